//! The master side of a fleet: `maid run`, `maid cp`, `maid job`,
//! `maid maids`, `maid file push` and `maid keygen`.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crate::output::{OutputOpts, Printer};
use anyhow::{Context, bail};
use clap::{ArgGroup, Args};
use maid_protocol::protocol::Return;
use maid_salt::args::parse_cli;
use serde_json::{Map, Value};

use super::progress::ProgressBar;
use crate::master::{MasterOpts, Usage};
use crate::rt::block_on;
use maid_bus::filestore;
use maid_bus::plugin_store::{MODULES_KWARG, SYNC_ALL, SYNC_MODULES};
use maid_master::jobs::{self, JobRequest, Report};

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
    /// TGT is `key:glob` over pillar data. Maids have no pillar, so this
    /// selects no one, as it does on a Salt master whose pillar lacks the
    /// key.
    #[arg(short = 'I', long)]
    pub pillar: bool,
    /// TGT is `key:regex` over pillar data (selects no one, as `-I`).
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
    /// Print nothing for minions that did not return.
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

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub target: TargetOpts,
    /// Target expression (`*` with `-d` and nothing else).
    #[arg(required_unless_present = "doc")]
    pub tgt: Option<String>,
    /// `module.function` (none needed with --preview-target).
    #[arg(required_unless_present_any = ["doc", "preview_target"])]
    pub fun: Option<String>,
    /// Arguments: `value` positional, `key=value` keyword (YAML values).
    pub args: Vec<String>,
    /// Show the documentation of FUN (a function, a module, or every
    /// function when none is named) from the targeted minions, as
    /// `salt -d` does: `sys.doc` run on them.
    #[arg(short = 'd', long = "doc", visible_alias = "documentation")]
    pub doc: bool,
    /// Run on at most this many minions at a time (a count, or a
    /// percentage of those targeted), starting another as each returns.
    #[arg(short = 'b', long = "batch-size", visible_alias = "batch")]
    pub batch: Option<String>,
    /// With a batch: wait SECONDS after a minion returns before its slot
    /// takes the next one.
    #[arg(long, value_name = "SECONDS", default_value_t = 0.0)]
    pub batch_wait: f64,
    /// With a batch: stop starting minions once one returns a non-zero
    /// retcode.
    #[arg(long)]
    pub failhard: bool,
    /// Run on N of the targeted minions that have the function, picked at
    /// random (`sys.list_functions` asked first), as `salt --subset`
    /// (0: all of them).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub subset: usize,
    /// Run as a batch of --batch-safe-size when the target selects at
    /// least N minions (when N is over 1).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub batch_safe_limit: usize,
    /// The batch --batch-safe-limit switches to.
    #[arg(long, value_name = "SIZE", default_value = "8")]
    pub batch_safe_size: String,
    /// Draw Salt's progress bar on stderr as returns arrive, then print
    /// the summary instead of the returns (`salt -p`).
    #[arg(short = 'p', long)]
    pub progress: bool,
    #[command(flatten)]
    pub report: ReportOpts,
    #[command(flatten)]
    pub master: MasterOpts,
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
fn print_one(out: &Printer, indent: Option<i64>, id: &str, value: Value, retcode: i32) {
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
    let max = maid_protocol::protocol::MAX_TIMEOUT_SECS;
    // As `salt`: a timeout of 0 or less is the configured one.
    let timeout = if report_opts.timeout <= 0.0 {
        DEFAULT_TIMEOUT
    } else {
        report_opts.timeout
    };
    if !(timeout.is_finite() && timeout <= max) {
        bail!("--timeout must be a number of seconds, at most {max}");
    }
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
    let req = JobRequest {
        master_topic: master.topic(&config),
        tgt,
        tgt_type: tgt_type.into(),
        fun,
        arg,
        kwarg,
        timeout: Duration::from_secs_f64(timeout),
        user: std::env::var("USER").ok(),
        out: Some(report_opts.output.name().into()),
        exclude: read_exclude(&report_opts.exclude)?,
        linger: Duration::from_millis(100),
        key: master.signing_key(&config)?,
        source_hashes,
        pki: master.verified_pki(&config)?,
        gather_job_timeout: (report_opts.gather_job_timeout > 0.0)
            .then(|| Duration::from_secs_f64(report_opts.gather_job_timeout)),
        delimiter,
    };
    let registry = block_on(async {
        let mut conn = bus.connect().await?;
        anyhow::Ok(jobs::Registry::read(&mut conn, req.pki.as_ref()).await?)
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
    Ok(Prepared::Ready(Box::new(Ready {
        bus,
        req,
        selected,
        registry,
    })))
}

/// How `maid run` goes about a job beyond what it runs where: Salt's
/// `-v`, `-p`, `--subset` and batch options.
struct Mode {
    /// `-v`: the jid heads the returns; the summary names who failed.
    verbose: bool,
    /// `-p`: a progress bar, then the summary.
    progress: bool,
    /// `--subset N`: N of the targeted that have the function (0: all).
    subset: usize,
    /// `--batch-wait`, `--failhard`.
    pace: maid_master::batch::Pace,
    /// `--batch-safe-limit`: a target selecting this many (when over 1)
    /// runs as a batch of `safe_size`.
    safe_limit: usize,
    safe_size: String,
}

/// Publish, stream returns as they come, then report what is missing.
fn run_and_report(
    master: &MasterOpts,
    report_opts: &ReportOpts,
    mut spec: Spec,
    mode: &Mode,
) -> anyhow::Result<ExitCode> {
    let Mode {
        verbose, progress, ..
    } = *mode;
    let (out, indent) = (&report_opts.output(), report_opts.output.out_indent);
    let mut batch = spec.batch.take();
    let doc = spec.fun == DOC_FUN;
    // As `salt` when no minion matches: nothing is published, and the
    // outputter shows `{}` (a batch says it once more).
    let no_match = |batch: bool| {
        println!("{NO_MATCH}");
        if batch && !report_opts.run_async {
            println!("No minions matched the target.");
            eprintln!("ERROR: No return received");
            return ExitCode::from(2);
        }
        if report_opts.run_async {
            println!("Executed command with job ID: 0");
            return ExitCode::SUCCESS;
        }
        out.display(&Map::new(), indent);
        eprintln!("ERROR: No return received");
        ExitCode::from(2)
    };
    let subset = mode.subset > 0 && !report_opts.run_async && !report_opts.static_out;
    let ready = match prepare(master, report_opts, spec)? {
        Prepared::Done(code) => return Ok(code),
        Prepared::NoMatch => {
            // `--subset` asks (`sys.list_functions`) before it runs: the
            // question matches nobody either.
            if subset && batch.is_none() {
                println!("{NO_MATCH}");
            }
            return Ok(no_match(batch.is_some()));
        }
        Prepared::Ready(ready) => *ready,
    };
    // As `salt --batch-safe-limit`: a target too wide runs as a batch.
    if batch.is_none() && mode.safe_limit > 1 && ready.selected.len() >= mode.safe_limit {
        println!("\nNOTICE: Too many minions targeted, switching to batch execution.");
        batch = Some(mode.safe_size.clone());
    }
    let jid = maid_protocol::jid::new_jid();
    if let Some(batch) = batch
        && !report_opts.run_async
    {
        return run_batch(
            &ready.bus,
            &ready.req,
            report_opts,
            ready.selected,
            &batch,
            mode.pace,
            jid,
        );
    }
    let mut ready = ready;
    if subset {
        pick_subset(&mut ready, mode.subset)?;
        if ready.selected.is_empty() {
            return Ok(no_match(false));
        }
    }
    if report_opts.run_async {
        block_on(jobs::submit(&ready.bus, &ready.req, &jid, ready.selected))??;
        println!("Executed command with job ID: {jid}");
        return Ok(ExitCode::SUCCESS);
    }
    // As Salt's `get_cli_event_returns`: `-v` heads the returns with the
    // jid (not under `-p`), else `--show-jid` names it; `--static` runs
    // as a quiet batch there, which says neither.
    if !report_opts.static_out {
        if verbose && !progress && !doc {
            let head = format!("Executing job with jid {jid}");
            println!("{head}\n{}\n", "-".repeat(head.len()));
        } else if report_opts.show_jid {
            println!("jid: {jid}");
        }
    }
    if progress && !report_opts.static_out {
        return run_with_progress(&ready, jid, verbose);
    }
    if doc && !report_opts.static_out {
        return run_docs(&ready, jid, report_opts);
    }
    // `--static` gathers every return and prints them as one document.
    let mut gathered = Map::new();
    let mut report: Report = block_on(ready.run(jid, |r: &Return| {
        if report_opts.static_out {
            gathered.insert(r.id.clone(), r.ret.clone());
        } else {
            print_one(out, indent, &r.id, r.ret.clone(), r.retcode);
        }
    }))??;
    // Ids the target listed that no maid answers for never return, as on
    // a Salt master that has no key for them.
    report
        .missed_minions
        .extend(ready.registry.unknown(&ready.req));
    if report_opts.static_out {
        // As `salt --static`: one document, and no retcode decides.
        if gathered.is_empty() {
            eprintln!("ERROR: No return received");
            return Ok(ExitCode::from(2));
        }
        out.display(&gathered, indent);
        report_forged(&report.forged);
        return Ok(ExitCode::SUCCESS);
    }
    if !report_opts.hide_timeout {
        let missed = report
            .missed_minions
            .iter()
            .map(|id| (id, jobs::no_response(&report.jid)))
            .chain(
                report
                    .missed_maids
                    .iter()
                    .map(|id| (id, jobs::NOT_CONNECTED.to_string())),
            );
        // Salt's `EX_GENERIC` for each.
        for (id, row) in missed {
            print_one(out, indent, id, Value::String(row), 1);
        }
    }
    for (id, reason) in &report.rejected {
        print_one(
            out,
            indent,
            id,
            Value::String(format!("Job rejected: {reason}")),
            1,
        );
    }
    report_forged(&report.forged);
    if report_opts.summary {
        // Salt's block, as `salt --summary` prints it: only when no
        // outputter was named.
        if report_opts.output.out.is_none() {
            print!("\n\n{}", salt_summary(&report, verbose));
        }
        eprint!("{}", accounting(&report));
    }
    let code = report.exit_code_with(!report_opts.hide_timeout);
    match code {
        1 => eprintln!("ERROR: Minions returned with non-zero exit code"),
        2 => eprintln!("ERROR: No return received"),
        _ => {}
    }
    Ok(ExitCode::from(code))
}

/// `salt --subset N`: ask the targeted minions which functions they have
/// (`sys.list_functions`) and retarget the job to N of those that have
/// its function, picked at random.
fn pick_subset(ready: &mut Ready, n: usize) -> anyhow::Result<()> {
    let mut probe = ready.req.clone();
    probe.fun = "sys.list_functions".into();
    probe.arg.clear();
    probe.kwarg.clear();
    let report = block_on(jobs::run_as(
        &ready.bus,
        &probe,
        maid_protocol::jid::new_jid(),
        Some(&ready.registry),
        |_| {},
    ))??;
    let picked = jobs::subset(
        report.returns.iter().map(|r| (&r.id, &r.ret)),
        &ready.req.fun,
        n,
    );
    ready.req.tgt = Value::Array(picked.iter().cloned().map(Value::String).collect());
    ready.req.tgt_type = "list".into();
    ready.selected = picked.into_iter().collect();
    Ok(())
}

/// `salt TGT sys.doc [FUN]` (and `salt -d`): every return gathered, then
/// each function's documentation once, sorted, as Salt's `_print_docs`
/// prints it (`FUN:`, the text, a blank line; or through the outputter
/// named with `--out`); the exit status is 0 once anyone answered.
fn run_docs(ready: &Ready, jid: String, report_opts: &ReportOpts) -> anyhow::Result<ExitCode> {
    let report = block_on(ready.run(jid, |_| {}))??;
    report_forged(&report.forged);
    let mut docs: BTreeMap<String, Value> = BTreeMap::new();
    for r in &report.returns {
        for (fun, doc) in r.ret.as_object().into_iter().flatten() {
            if !docs.contains_key(fun) && maid_salt::python::truthy(doc) {
                docs.insert(fun.clone(), doc.clone());
            }
        }
    }
    let missed = report.missed_minions.len() + report.missed_maids.len();
    if report.returns.is_empty() && report.rejected.is_empty() && missed == 0 {
        eprintln!("No minions found to gather docs from");
        return Ok(ExitCode::from(2));
    }
    let out = report_opts.output();
    for (fun, doc) in docs {
        if report_opts.output.out.is_some() {
            let mut one = Map::new();
            one.insert(fun, doc);
            out.display(&one, report_opts.output.out_indent);
        } else {
            let text = match &doc {
                Value::String(s) => s.clone(),
                other => maid_salt::python::str(other),
            };
            println!("{fun}:\n{text}\n");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `salt -p`: Salt's progress bar from the first return on, no returns
/// shown, then the summary (nothing at all when no minion returned); the
/// exit status is 0 whatever came back, as `salt`'s is.
fn run_with_progress(ready: &Ready, jid: String, verbose: bool) -> anyhow::Result<ExitCode> {
    let minion_count = ready.selected.len();
    let mut bar: Option<ProgressBar> = None;
    let mut returned = 0;
    let report = block_on(ready.run(jid, |_| {
        returned += 1;
        bar.get_or_insert_with(|| ProgressBar::start(minion_count))
            .update(returned);
    }))??;
    report_forged(&report.forged);
    // Salt draws its bar at the first return and, when none came, stops
    // there without a word (its outputter cannot start): so does this.
    if bar.is_some() {
        print!("\n\n{}", salt_summary(&report, verbose));
    }
    Ok(ExitCode::SUCCESS)
}

/// Salt's `_print_returns_summary`: the counts, and with `-v` who was not
/// connected, who did not respond and who failed.
fn salt_summary(r: &Report, verbose: bool) -> String {
    let failed: Vec<&str> = r
        .returns
        .iter()
        .filter(|x| x.retcode != 0)
        .map(|x| x.id.as_str())
        .chain(r.rejected.keys().map(String::as_str))
        .collect();
    let returned = r.returns.len() + r.rejected.len();
    let missed = r.missed_maids.len() + r.missed_minions.len();
    let mut text = summary_head(returned + missed, returned, missed, failed.len());
    if verbose {
        let named = |label: &str, ids: Vec<&str>| {
            if ids.is_empty() {
                String::new()
            } else {
                format!("{label}: {}\n", ids.join(" "))
            }
        };
        text.push_str(&named(
            "Minions not connected",
            r.missed_maids.iter().map(String::as_str).collect(),
        ));
        text.push_str(&named(
            "Minions not responding",
            r.missed_minions.iter().map(String::as_str).collect(),
        ));
        text.push_str(&named("Minions with failures", failed));
    }
    text.push_str(SUMMARY_RULE);
    text.push('\n');
    text
}

const SUMMARY_RULE: &str = "-------------------------------------------";

/// The head of Salt's summary block: its heading and four counts.
fn summary_head(targeted: usize, returned: usize, missed: usize, errors: usize) -> String {
    let line = SUMMARY_RULE;
    format!(
        "{line}\nSummary\n{line}\n\
         # of minions targeted: {targeted}\n\
         # of minions returned: {returned}\n\
         # of minions that did not return: {missed}\n\
         # of minions with errors: {errors}\n"
    )
}

/// `salt -b`: the selected minions a batch at a time, each start
/// announced and each return shown with its jid and retcode, as Salt's
/// batch prints them; the exit code is the highest retcode.
fn run_batch(
    bus: &maid_bus::Bus,
    req: &JobRequest,
    report_opts: &ReportOpts,
    selected: std::collections::BTreeSet<String>,
    batch: &str,
    pace: maid_master::batch::Pace,
    jid: String,
) -> anyhow::Result<ExitCode> {
    let (out, indent) = (&report_opts.output(), report_opts.output.out_indent);
    let quiet = report_opts.static_out;
    let ids: Vec<String> = selected.into_iter().collect();
    let Some(size) = maid_master::batch::size(batch, ids.len()) else {
        eprintln!("ERROR: {}", maid_master::batch::invalid(batch));
        return Ok(ExitCode::FAILURE);
    };
    let mut gathered = Map::new();
    let launch = |sub: JobRequest, tx: tokio::sync::mpsc::UnboundedSender<Return>| {
        let bus = bus.clone();
        let jid = jid.clone();
        async move {
            jobs::run_as(&bus, &sub, jid, None, |r| {
                let _ = tx.send(r.clone());
            })
            .await
        }
    };
    let outcome = block_on(maid_master::batch::run(
        ids,
        size,
        pace,
        req,
        launch,
        |next| {
            if !quiet {
                let ids = Value::Array(next.iter().cloned().map(Value::String).collect());
                println!("\nExecuting run on {}\n", maid_salt::python::repr(&ids));
            }
        },
        |r| {
            if quiet {
                gathered.insert(r.id.clone(), r.ret.clone());
                return;
            }
            let mut shown = Map::new();
            shown.insert("retcode".into(), Value::from(r.retcode));
            shown.insert("jid".into(), Value::String(r.jid.clone()));
            shown.insert(r.id.clone(), r.ret.clone());
            out.display(&shown, indent);
        },
    ))??;
    if outcome.halted {
        // Salt's log line, at its console format.
        eprintln!("[ERROR   ] Batch run stopped due to failhard");
    }
    if quiet {
        out.display(&gathered, indent);
        return Ok(ExitCode::SUCCESS);
    }
    for report in &outcome.reports {
        report_forged(&report.forged);
    }
    Ok(ExitCode::from(outcome.max_retcode().clamp(0, 255) as u8))
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

/// `salt -d`'s words: the target (`*` when none), then `sys.doc`, then
/// at most one function or module to document.
fn doc_words(words: Vec<String>) -> anyhow::Result<(String, Vec<String>)> {
    let mut words = words;
    if words.is_empty() {
        words.push("*".into());
    }
    if words.get(1).map(String::as_str) != Some(DOC_FUN) {
        words.insert(1, DOC_FUN.into());
    }
    if words.len() > 3 {
        return Err(Usage("You can only get documentation for one method at one time.").into());
    }
    let tgt = words.remove(0);
    Ok((tgt, words))
}

/// The function whose returns `salt` prints as documentation.
const DOC_FUN: &str = "sys.doc";

pub fn run(args: RunArgs, verbose: bool) -> anyhow::Result<ExitCode> {
    args.report.output.prepare()?;
    let words: Vec<String> = args
        .tgt
        .iter()
        .chain(&args.fun)
        .chain(&args.args)
        .cloned()
        .collect();
    let (tgt, mut words) = if args.doc {
        doc_words(words)?
    } else {
        let mut words = words.into_iter();
        (words.next().context("TGT")?, words.collect::<Vec<_>>())
    };
    // `--preview-target` runs nothing: Salt puts a function in for form.
    if words.is_empty() {
        words.push("not_a_valid_command".into());
    }
    let fun = words.remove(0);
    let (arg, mut kwarg) = parse_cli(&words);
    // A sync installs what this master pushed last, from its own record.
    if (fun == SYNC_MODULES || fun == SYNC_ALL)
        && !kwarg.contains_key(MODULES_KWARG)
        && let Some(pins) = super::plugin_push::recorded_pins(&args.master)?
    {
        kwarg.insert(MODULES_KWARG.into(), pins);
    }
    let spec = Spec {
        tgt: args.target.tgt(&tgt),
        tgt_type: args.target.tgt_type(),
        fun,
        arg,
        kwarg,
        source_hashes: Default::default(),
        batch: args.batch.clone(),
        delimiter: args.target.delimiter(),
    };
    if !(args.batch_wait.is_finite() && args.batch_wait >= 0.0) {
        bail!("--batch-wait must be a number of seconds");
    }
    let mode = Mode {
        verbose,
        progress: args.progress,
        subset: args.subset,
        pace: maid_master::batch::Pace {
            wait: Duration::from_secs_f64(args.batch_wait),
            failhard: args.failhard,
        },
        safe_limit: args.batch_safe_limit,
        safe_size: args.batch_safe_size.clone(),
    };
    let mut report = args.report.clone();
    if report.run_async && args.batch.is_some() {
        // Salt's master takes an async batch over (its BatchManager) and
        // runs it after `salt` exits; a maid master is this command alone.
        bail!(
            "--async with --batch needs a master that goes on running the batch after this \
             command exits, and maid has none: run the batch without --async"
        );
    }
    // As `salt`: `--static` runs the job (as a quiet batch) before
    // `--async` is looked at.
    if report.static_out {
        report.run_async = false;
    }
    run_and_report(&args.master, &report, spec, &mode)
}

#[derive(Debug, Args)]
pub struct JobArgs {
    /// The job id.
    pub jid: String,
    #[command(flatten)]
    pub output: OutputOpts,
    #[command(flatten)]
    pub master: MasterOpts,
}

pub fn job(args: JobArgs) -> anyhow::Result<ExitCode> {
    args.output.prepare()?;
    let (bus, config) = args.master.bus()?;
    let pki = args.master.verified_pki(&config)?;
    let cached = block_on(async {
        let mut conn = bus.connect().await?;
        anyhow::Ok(jobs::cached(&mut conn, &args.jid, pki.as_ref()).await?)
    })??;
    report_forged(&cached.forged);
    let returns = cached.returns;
    let out = args.output.out();
    for r in &returns {
        print_one(
            &out,
            args.output.out_indent,
            &r.id,
            r.ret.clone(),
            r.retcode,
        );
    }
    Ok(if returns.is_empty() {
        eprintln!("maid: no returns cached for job {}", args.jid);
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

#[derive(Debug, Args)]
pub struct MaidsArgs {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub master: MasterOpts,
}

pub fn maids(args: MaidsArgs) -> anyhow::Result<ExitCode> {
    let (bus, config) = args.master.bus()?;
    let pki = args.master.pki(&config);
    let maids = block_on(async {
        let mut conn = bus.connect().await?;
        anyhow::Ok(jobs::alive_maids(&mut conn, pki.as_ref()).await?)
    })??;
    // Each maid's key state, where the master keeps keys: only accepted
    // maids are expected to answer.
    let states: BTreeMap<String, &'static str> = match &pki {
        Some(pki) => {
            let mut states = BTreeMap::new();
            for (state, ids) in pki.list()? {
                for id in ids {
                    states.entry(id).or_insert(state.name());
                }
            }
            states
        }
        None => BTreeMap::new(),
    };
    let key_of = |id: &str| -> &str {
        match &pki {
            Some(_) => states.get(id).copied().unwrap_or("none"),
            None => "-",
        }
    };
    // A syndic maid answers for others only when its key was accepted as
    // a syndic maid's (PROTOCOL v1.2 §7): the role the operator accepted.
    let role_of = |id: &str, reg: &Option<maid_protocol::protocol::Registration>| -> &str {
        let accepted_syndic = pki.as_ref().is_some_and(|pki| {
            pki.key(maid_master::pki::KeyState::Accepted, id)
                .ok()
                .flatten()
                .is_some_and(|key| maid_master::registry::is_syndic_key(pki, id, &key))
        });
        match (&pki, reg.as_ref().is_some_and(|r| r.syndic)) {
            (Some(_), _) if accepted_syndic => "syndic",
            (Some(_), true) => "syndic?",
            (None, true) => "syndic",
            _ => "minion",
        }
    };
    if args.json {
        let v: Vec<Value> = maids
            .iter()
            .map(|(id, (alive, reg))| {
                let mut entry = serde_json::json!({"id": id, "alive": alive, "registration": reg});
                if pki.is_some() {
                    entry["key"] = Value::from(key_of(id));
                }
                entry["role"] = Value::from(role_of(id, reg));
                entry
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:<24} {:<6} {:<9} {:<8} {:<8} {:<27} FUNCTIONS",
        "ID", "ALIVE", "KEY", "ROLE", "VERSION", "LAST SEEN"
    );
    for (id, (alive, reg)) in &maids {
        let (version, seen, funs) = match reg {
            Some(r) => (
                r.version.clone(),
                r.last_seen.clone(),
                r.functions.len().to_string(),
            ),
            None => ("?".into(), "?".into(), "?".into()),
        };
        println!(
            "{id:<24} {:<6} {:<9} {:<8} {version:<8} {seen:<27} {funs}",
            if *alive { "yes" } else { "no" },
            key_of(id),
            role_of(id, reg)
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Debug, Args)]
pub struct PushArgs {
    /// The file to store.
    pub path: PathBuf,
    /// Name it is served as (`salt://NAME`) [default: the file name].
    #[arg(long = "as")]
    pub name: Option<String>,
    #[command(flatten)]
    pub master: MasterOpts,
}

/// `, signed by KID` when a key signed the push.
pub(super) fn signed_by(pushed: &filestore::Pushed) -> String {
    match &pushed.kid {
        Some(kid) => format!(", signed by {kid}"),
        None => String::new(),
    }
}

/// Store a file as `salt://NAME`; with the master key (`--key`, the
/// config's `master.key`), sign its name, size and SHA-256, so agents that
/// require signed jobs serve it. Without one it is stored unsigned, and
/// such agents serve it only to jobs that pin its hash.
pub fn push(args: PushArgs) -> anyhow::Result<ExitCode> {
    let (bus, config) = args.master.bus()?;
    let key = args.master.signing_key(&config)?;
    let name = match &args.name {
        Some(n) => n.clone(),
        None => args
            .path
            .file_name()
            .and_then(|n| n.to_str())
            .context("PATH has no file name; pass --as NAME")?
            .to_string(),
    };
    let pushed = block_on(async {
        let mut conn = bus.connect().await?;
        anyhow::Ok(filestore::push(&mut conn, &args.path, &name, key.as_ref()).await?)
    })??;
    println!("salt://{} {} {}", pushed.name, pushed.sha256, pushed.size);
    if pushed.kid.is_none() {
        eprintln!(
            "maid: salt://{} is not signed (no --key or master.key): agents that require \
             signed jobs serve it only to jobs that pin its hash (`maid cp`)",
            pushed.name
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Debug, Args)]
pub struct KeygenArgs {
    /// Writes PREFIX.key (private, mode 0600) and PREFIX.pub.
    #[arg(default_value = "master")]
    pub prefix: PathBuf,
    /// Replace existing files.
    #[arg(long)]
    pub force: bool,
}

pub fn keygen(args: KeygenArgs) -> anyhow::Result<ExitCode> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let key = maid_protocol::trust::generate()?;
    let private = args.prefix.with_extension("key");
    let public = args.prefix.with_extension("pub");
    for (path, text, mode) in [
        (&private, maid_protocol::trust::encode_signing(&key), 0o600),
        (
            &public,
            maid_protocol::trust::encode_verifying(&key.verifying_key()),
            0o644,
        ),
    ] {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).mode(mode);
        if args.force {
            options.create(true).truncate(true);
        } else {
            options.create_new(true);
        }
        let mut f = options
            .open(path)
            .with_context(|| format!("write {} (pass --force to replace it)", path.display()))?;
        writeln!(f, "{text}")?;
    }
    println!(
        "{} {} (kid {})",
        private.display(),
        public.display(),
        maid_protocol::trust::key_id(&key.verifying_key())
    );
    Ok(ExitCode::SUCCESS)
}
