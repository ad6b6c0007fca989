//! What the commands that publish a job share (`maid run`, `maid cp`,
//! `maid runner`'s presence functions): Salt's target and report options,
//! the checks and registry lookup before a job goes out, and the accounting
//! of what came back.

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{ArgGroup, Args};
use maid_master::jobs::{self, Collect, JobRequest, Report};
use maid_protocol::protocol::Return;
use serde_json::{Map, Value};

use crate::master::MasterOpts;
use crate::output::{OutputOpts, Printer};
use crate::rt::block_on;

/// How a target is read (`-L`, `-E`, `-G`, `-P`, `-S`, `-C`; glob by
/// default), as `salt` takes it.
#[derive(Debug, Clone, Args)]
#[command(group(ArgGroup::new("target_type").args(["list", "pcre", "grain", "grain_pcre", "ipcidr", "compound", "nodegroup", "pillar", "pillar_pcre"])))]
pub struct TargetOpts {
    /// TGT is a list of ids, separated by commas or spaces.
    #[arg(short = 'L', long)]
    pub list: bool,
    /// TGT is a regular expression over ids.
    #[arg(short = 'E', long)]
    pub pcre: bool,
    /// TGT is `grain:glob`.
    #[arg(short = 'G', long)]
    pub grain: bool,
    /// TGT is `grain:regex`.
    #[arg(short = 'P', long)]
    pub grain_pcre: bool,
    /// TGT is an IP address or network, matched against the ipv4/ipv6 grains.
    #[arg(short = 'S', long)]
    pub ipcidr: bool,
    /// TGT is a compound expression (`G@os:Debian and web*`).
    #[arg(short = 'C', long)]
    pub compound: bool,
    /// TGT names a nodegroup of the config's `[master] nodegroups`.
    #[arg(short = 'N', long)]
    pub nodegroup: bool,
    /// TGT is `key:glob` over pillar data, evaluated on the pillar the
    /// master compiles from its pillar_roots: the maids are sent the ids
    /// it selects.
    #[arg(short = 'I', long)]
    pub pillar: bool,
    /// TGT is `key:regex` over pillar data (evaluated as `-I`).
    #[arg(short = 'J', long)]
    pub pillar_pcre: bool,
    /// What separates the levels of a grain key path in TGT (`-G`, `-P`).
    #[arg(long, default_value = maid_salt::target::DEFAULT_DELIM)]
    pub delimiter: String,
}

impl TargetOpts {
    pub(super) fn tgt_type(&self) -> &'static str {
        [
            (self.list, "list"),
            (self.pcre, "pcre"),
            (self.grain, "grain"),
            (self.grain_pcre, "grain_pcre"),
            (self.ipcidr, "ipcidr"),
            (self.compound, "compound"),
            (self.nodegroup, "nodegroup"),
            (self.pillar, "pillar"),
            (self.pillar_pcre, "pillar_pcre"),
        ]
        .into_iter()
        .find_map(|(set, name)| set.then_some(name))
        .unwrap_or("glob")
    }

    /// The target as `salt` publishes it: a list target is split into ids,
    /// at commas (spaces removed) or else at whitespace.
    pub(super) fn tgt(&self, tgt: &str) -> Value {
        if !self.list {
            return Value::String(tgt.to_string());
        }
        let ids: Vec<Value> = if tgt.contains(',') {
            tgt.replace(' ', "").split(',').map(Value::from).collect()
        } else {
            tgt.split_whitespace().map(Value::from).collect()
        };
        Value::Array(ids)
    }

    /// The job's `delimiter`: sent only when it is not the default, as
    /// Salt's master sends it.
    pub(super) fn delimiter(&self) -> Option<String> {
        (self.delimiter != maid_salt::target::DEFAULT_DELIM).then(|| self.delimiter.clone())
    }
}

/// Salt's `timeout` option: what `-t` is unless given, and what a
/// timeout of 0 or less means.
const DEFAULT_TIMEOUT: f64 = 5.0;

/// How results are shown.
#[derive(Debug, Clone, Args)]
pub struct ReportOpts {
    /// Seconds to wait for returns (0 or less: the default, as Salt).
    #[arg(short = 't', long, default_value_t = DEFAULT_TIMEOUT, allow_negative_numbers = true)]
    pub timeout: f64,
    /// When the timeout passes, ask the minions yet to return whether
    /// they still run the job (`saltutil.find_job`), waiting this many
    /// seconds for their answers; a minion still running it is waited for
    /// another timeout. 0: do not ask.
    #[arg(long, default_value_t = 10.0)]
    pub gather_job_timeout: f64,
    #[command(flatten)]
    pub output: OutputOpts,
    /// File of ids never expected to answer, one per line (`#` comments).
    #[arg(long)]
    pub exclude: Option<PathBuf>,
    /// Print counts after the returns: targeted, returned, missed, empty,
    /// repeated.
    #[arg(long)]
    pub summary: bool,
    /// Publish and print the jid; do not wait for returns.
    #[arg(long = "async")]
    pub run_async: bool,
    /// Print `jid: JID` before the returns.
    #[arg(long)]
    pub show_jid: bool,
    /// Accepted as `salt` 3008.4 accepts it, and like it hides nothing:
    /// every targeted minion that did not return is still printed.
    #[arg(long)]
    pub hide_timeout: bool,
    /// Print all returns at once, as one document, when all are in; exit 0
    /// whatever they returned.
    #[arg(short = 's', long = "static")]
    pub static_out: bool,
    /// Print the minions the target selects, and run nothing.
    #[arg(long)]
    pub preview_target: bool,
}

impl ReportOpts {
    /// The outputter, colouring as `--no-color`, `--force-color` and the
    /// terminal say, writing where `--out-file` says.
    pub(super) fn output(&self) -> Printer {
        self.output.out()
    }

    /// [`Self::output`] for the returns of `fun`: its own outputter
    /// (`highstate` for `state.apply`, ...) unless `--out` names another.
    pub(super) fn output_for(&self, fun: &str) -> Printer {
        self.output.out_for(fun)
    }

    /// Defaults that print nothing extra, for jobs the master runs for
    /// itself (`manage.status`).
    pub(super) fn quiet(output: OutputOpts) -> ReportOpts {
        ReportOpts {
            timeout: 5.0,
            gather_job_timeout: 10.0,
            output,
            exclude: None,
            summary: false,
            run_async: false,
            show_jid: false,
            hide_timeout: false,
            static_out: false,
            preview_target: false,
        }
    }
}

fn read_exclude(path: &Option<PathBuf>) -> anyhow::Result<HashSet<String>> {
    let Some(path) = path else {
        return Ok(HashSet::new());
    };
    let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    Ok(text
        .lines()
        .map(|l| l.split('#').next().unwrap_or_default().trim())
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect())
}

/// One minion's return, as `salt` prints each: `{id: return}`, in red
/// (when in colour) if `retcode` is not 0.
pub(super) fn print_one(out: &Printer, indent: Option<i64>, id: &str, value: Value, retcode: i32) {
    let mut m = Map::new();
    m.insert(id.to_string(), value);
    out.display_ret(&Value::Object(m), indent, retcode.into());
}

/// What to run, on whom.
pub(super) struct Spec {
    pub(super) tgt: Value,
    pub(super) tgt_type: &'static str,
    pub(super) fun: String,
    pub(super) arg: Vec<Value>,
    pub(super) kwarg: Map<String, Value>,
    /// SHA-256 pinned for `salt://` sources (`maid cp`).
    pub(super) source_hashes: std::collections::BTreeMap<String, String>,
    /// `-b`: a rolling batch of this size.
    pub(super) batch: Option<String>,
    /// `--delimiter`, when not the default.
    pub(super) delimiter: Option<String>,
}

impl Spec {
    /// `fun` with no arguments on `tgt`.
    pub(super) fn new(tgt: Value, tgt_type: &'static str, fun: &str) -> Spec {
        Spec {
            tgt,
            tgt_type,
            fun: fun.into(),
            arg: vec![],
            kwarg: Map::new(),
            source_hashes: Default::default(),
            batch: None,
            delimiter: None,
        }
    }
}

/// A job ready to go out, or why none goes.
pub(super) enum Prepared {
    /// Nothing to publish; exit so (the nodegroup error, the preview).
    Done(ExitCode),
    /// No maid matches the target.
    NoMatch,
    /// Publish `req` to `selected`.
    Ready(Box<Ready>),
}

/// A job to publish and whom it selects.
pub(super) struct Ready {
    pub(super) bus: maid_bus::Bus,
    pub(super) req: JobRequest,
    pub(super) selected: std::collections::BTreeSet<String>,
    /// The registry `selected` was read from, which the job then expects.
    pub(super) registry: jobs::Registry,
}

impl Ready {
    /// Publish the job as `jid` and collect its replies ([`jobs::run_as`]),
    /// over the registry it was selected from.
    pub(super) async fn run(
        &self,
        jid: String,
        on_return: impl FnMut(&Return),
    ) -> Result<Report, maid_bus::BusError> {
        jobs::run_as(&self.bus, &self.req, jid, Some(&self.registry), on_return).await
    }
}

pub(super) const NO_MATCH: &str =
    "No minions matched the target. No command was sent, no jid was assigned.";

/// The job `spec` describes (its batch aside), and whom it selects: the
/// checks, nodegroups and registry lookup `salt` does before it publishes.
/// `--timeout` in seconds: as `salt`, 0 or less is the configured one.
fn job_timeout(report_opts: &ReportOpts) -> anyhow::Result<f64> {
    let max = maid_protocol::protocol::MAX_TIMEOUT_SECS;
    let timeout = if report_opts.timeout <= 0.0 {
        DEFAULT_TIMEOUT
    } else {
        report_opts.timeout
    };
    if !(timeout.is_finite() && timeout <= max) {
        bail!("--timeout must be a number of seconds, at most {max}");
    }
    Ok(timeout)
}

pub(super) fn prepare(
    master: &MasterOpts,
    report_opts: &ReportOpts,
    spec: Spec,
) -> anyhow::Result<Prepared> {
    let Spec {
        tgt,
        tgt_type,
        fun,
        arg,
        kwarg,
        source_hashes,
        batch: _,
        delimiter,
    } = spec;
    let timeout = job_timeout(report_opts)?;
    let (bus, config) = master.bus()?;
    let (out, indent) = (&report_opts.output(), report_opts.output.out_indent);
    // Nodegroups are the master's: expanded here, as Salt's LocalClient
    // does, so maids only ever see compound words.
    let (tgt, tgt_type) =
        match maid_salt::target::expand_nodegroups(tgt, tgt_type, &config.master.nodegroups) {
            Ok(expanded) => expanded,
            // As `salt`: the error through the outputter, exit 0.
            Err(e) => {
                let conf = master.config.as_ref().map_or_else(
                    || "the master config file".to_string(),
                    |p| p.display().to_string(),
                );
                out.display_value(&Value::String(format!("{e} in {conf}")), indent);
                return Ok(Prepared::Done(ExitCode::SUCCESS));
            }
        };
    let req = job_request(
        master,
        &config,
        report_opts,
        Spec {
            tgt,
            tgt_type,
            fun,
            arg,
            kwarg,
            source_hashes,
            batch: None,
            delimiter,
        },
        timeout,
    )?;
    let registry = block_on(async {
        let mut conn = bus.connect().await?;
        anyhow::Ok(
            jobs::Registry::read(&mut conn, req.collect.pki.as_ref())
                .await?
                .with_pillar(req.pillar_settings.as_ref()),
        )
    })??;
    let selected = registry.selected(&req);
    if report_opts.preview_target {
        let ids: Vec<Value> = selected.into_iter().map(Value::String).collect();
        out.display_value(&Value::Array(ids.clone()), indent);
        // As `salt`'s `_output_ret`: nothing to show is no return.
        if ids.is_empty() {
            eprintln!("ERROR: No return received");
            return Ok(Prepared::Done(ExitCode::from(2)));
        }
        return Ok(Prepared::Done(ExitCode::SUCCESS));
    }
    if selected.is_empty() {
        return Ok(Prepared::NoMatch);
    }
    // A state run reads its SLS files from the master's file_roots.
    if jobs::reads_file_roots(&req.fun) && !config.master.file_roots.is_empty() {
        block_on(async {
            let mut conn = bus.connect().await?;
            jobs::serve_file_roots(&mut conn, &config.master.file_roots, req.key.as_ref())
                .await
                .context("storing the master's file_roots")
        })??;
    }
    Ok(Prepared::Ready(Box::new(Ready {
        bus,
        req,
        selected,
        registry,
    })))
}

/// The request `spec` (its nodegroups expanded) makes: signed, with the
/// master's options, its pillar plan and how it is collected.
fn job_request(
    master: &MasterOpts,
    config: &maid_config::Config,
    report_opts: &ReportOpts,
    spec: Spec,
    timeout: f64,
) -> anyhow::Result<JobRequest> {
    let Spec {
        tgt,
        tgt_type,
        fun,
        arg,
        mut kwarg,
        source_hashes,
        batch: _,
        delimiter,
    } = spec;
    let pillar_settings = maid_master::pillar::Settings::from_config(&config.master);
    // Inline `pillar=` leaves the arguments here: it travels sealed.
    let pillar =
        maid_master::pillar::deliver::Plan::for_job(Some(&pillar_settings), &fun, &mut kwarg);
    Ok(JobRequest {
        master_topic: master.topic(config),
        tgt,
        tgt_type: tgt_type.into(),
        kwarg: jobs::with_master_opts(
            &fun,
            kwarg,
            &config.master.nodegroups,
            &config.master.file_roots,
        ),
        fun,
        arg,
        user: std::env::var("USER").ok(),
        out: Some(report_opts.output.name().into()),
        key: master.signing_key(config)?,
        source_hashes,
        delimiter,
        pillar,
        pillar_settings: Some(pillar_settings),
        collect: Collect {
            timeout: Duration::from_secs_f64(timeout),
            exclude: read_exclude(&report_opts.exclude)?,
            linger: Duration::from_millis(100),
            pki: master.verified_pki(config)?,
            gather_job_timeout: (report_opts.gather_job_timeout > 0.0)
                .then(|| Duration::from_secs_f64(report_opts.gather_job_timeout)),
        },
    })
}

/// Forged replies go to stderr, never among the returns.
pub(super) fn report_forged(forged: &std::collections::BTreeMap<String, String>) {
    for (id, why) in forged {
        eprintln!("maid: a forged reply claimed to come from {id}: {why}; not counted");
    }
}

/// What the original design reports of a job beyond Salt's summary, on
/// stderr under `--summary`: returns, misses told apart (maids that never
/// pinged, minions that did not return), empty and repeated returns,
/// forged replies, and the jid.
pub fn accounting(r: &Report) -> String {
    let list = |s: &mut dyn Iterator<Item = String>| {
        let v: Vec<String> = s.collect();
        if v.is_empty() {
            "-".to_string()
        } else {
            v.join(", ")
        }
    };
    format!(
        "normal: {}\nmissed: {}\nempty: {}\n\
         missed maids: {}\nmissed minions: {}\nrepeated minions: {}\n\
         forged: {}\n\
         jid: {}\n",
        r.returns.len(),
        r.missed_maids.len() + r.missed_minions.len(),
        r.empty.len(),
        list(&mut r.missed_maids.iter().cloned()),
        list(&mut r.missed_minions.iter().cloned()),
        list(
            &mut r
                .repeated
                .iter()
                .map(|(id, n)| format!("{id} ({n} returns)"))
        ),
        list(&mut r.forged.keys().cloned()),
        r.jid,
    )
}
