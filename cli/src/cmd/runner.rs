//! `maid runner FUN [ARGS...]`: Salt's `salt-run`, for the runner
//! functions the master runs itself — `jobs.lookup_jid`,
//! `jobs.list_job`, `jobs.list_jobs`, `jobs.print_job`,
//! `jobs.exit_success`, `manage.status`, `manage.up`, `manage.down` —
//! the same functions `maid api`'s `runner` client runs. As `salt-run`,
//! it exits 0 when it could ask, even when the function could not run.

use std::process::ExitCode;

use crate::output::OutputOpts;
use clap::Args;
use maid_salt::args::parse_input;
use serde_json::Value;

use super::fleet::{self, Prepared, ReportOpts, Spec};
use crate::master::MasterOpts;
use crate::rt::block_on;
use maid_master::binding::Form;
use maid_master::{binding, runners::jobs as job_runners, runners::manage};

#[derive(Debug, Args)]
pub struct RunnerArgs {
    /// `module.function`.
    pub fun: String,
    /// Arguments: `key=value` keyword, else positional (YAML values).
    pub args: Vec<String>,
    /// Seconds `manage.*` waits for the minions to answer.
    #[arg(short = 't', long, default_value_t = 5.0)]
    pub timeout: f64,
    #[command(flatten)]
    pub output: OutputOpts,
    #[command(flatten)]
    pub master: MasterOpts,
}

pub fn run(args: RunnerArgs) -> anyhow::Result<ExitCode> {
    args.output.prepare()?;
    let (out, indent) = (&args.output.out(), args.output.out_indent);
    if !binding::exists(Form::Runner, &args.fun) {
        // As salt-run: said, and exit 0.
        out.display_value(
            &Value::String(format!("'{}' is not available.", args.fun)),
            indent,
        );
        return Ok(ExitCode::SUCCESS);
    }
    let words = args.args.iter().cloned().map(Value::String).collect();
    let (positional, kwargs) = parse_input(words, false);
    let bound = match binding::bind(Form::Runner, &args.fun, positional, &kwargs) {
        Ok(bound) => bound,
        Err(bad) => {
            out.display_value(
                &Value::String(format!("\nPassed invalid arguments: {bad}\n")),
                indent,
            );
            return Ok(ExitCode::SUCCESS);
        }
    };
    let answer = if let Some(asked) = maid_master::runners::asks(&args.fun) {
        let (selected, report) = manage_job(&args, &bound, asked)?.unwrap_or_default();
        if args.fun == "jobs.active" {
            Ok(jobs_active(&args, &selected, &report)?)
        } else {
            Ok(manage::answer(&args.fun, &selected, &report))
        }
    } else {
        // The rest read Redis: the registry, or the job cache.
        let (bus, config) = args.master.bus()?;
        let pki = args.master.verified_pki(&config)?;
        // Returns sealed to the master (PROTOCOL §8) open with its key.
        let key = args.master.signing_key(&config)?;
        block_on(async {
            let mut conn = bus.connect().await?;
            if manage::is_presence(&args.fun) {
                manage::presence(&mut conn, pki.as_ref(), &args.fun, &bound).await
            } else {
                let key = key.as_ref();
                job_runners::jobs_runner(&mut conn, pki.as_ref(), key, &args.fun, &bound, |_| true)
                    .await
            }
        })??
    };
    let ret = match answer {
        Ok(ret) => ret,
        Err(bad) => {
            out.display_value(&Value::String(bad.0), indent);
            return Ok(ExitCode::SUCCESS);
        }
    };
    out.display_value(&ret, indent);
    Ok(ExitCode::SUCCESS)
}

/// `jobs.active`, from what `saltutil.running` returned (`report`) and
/// the job cache.
fn jobs_active(
    args: &RunnerArgs,
    selected: &std::collections::BTreeSet<String>,
    report: &maid_master::jobs::Report,
) -> anyhow::Result<Value> {
    let (returns, _) = manage::answered(selected, report);
    let (bus, config) = args.master.bus()?;
    let pki = args.master.verified_pki(&config)?;
    block_on(async {
        let mut conn = bus.connect().await?;
        anyhow::Ok(job_runners::active(&mut conn, pki.as_ref(), &returns).await?)
    })?
}

/// Run `fun` on the minions `tgt` selects, as `manage.status` pings them:
/// those selected and the report; `None` when none is.
fn manage_job(
    args: &RunnerArgs,
    bound: &binding::Bound,
    fun: &str,
) -> anyhow::Result<
    Option<(
        std::collections::BTreeSet<String>,
        maid_master::jobs::Report,
    )>,
> {
    // As Salt's `manage._ping` (through `LocalClient.run_job`): a target
    // that selects nobody, or of a type there is none of, is said so.
    let no_match = || {
        outln!("{}", fleet::NO_MATCH);
        Ok(None)
    };
    let Ok(target) = manage::ManageTarget::of(bound) else {
        return no_match();
    };
    let timeout = target.timeout.unwrap_or(args.timeout);
    let report_opts = ReportOpts {
        timeout,
        ..ReportOpts::quiet(args.output.clone())
    };
    let spec = Spec::new(target.tgt, target.tgt_type.name(), fun);
    let ready = match fleet::prepare(&args.master, &report_opts, spec)? {
        Prepared::Ready(ready) => ready,
        Prepared::NoMatch => return no_match(),
        Prepared::Done(_) => return Ok(None),
    };
    let report = block_on(ready.run(maid_protocol::jid::new_jid(), |_| {}))??;
    Ok(Some((ready.selected, report)))
}
