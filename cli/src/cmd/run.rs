//! `maid run`: a function on the minions a target selects, as `salt`
//! runs it — streamed returns, `-v`, `-p`, `--subset`, batches, `--async`
//! and the summary.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use maid_protocol::protocol::Return;
use maid_salt::args::parse_cli;
use serde_json::{Map, Value};

use super::fleet::{
    NO_MATCH, Prepared, Ready, ReportOpts, Spec, TargetOpts, accounting, prepare, print_one,
    report_forged,
};
use super::progress::ProgressBar;
use crate::master::{MasterOpts, Usage};
use crate::output::Printer;
use crate::rt::block_on;
use maid_bus::plugin_store::{MODULES_KWARG, SYNC_ALL, SYNC_MODULES};
use maid_master::jobs::{self, JobRequest, Report};

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
    let mut batch = spec.batch.take();
    let doc = spec.fun == DOC_FUN;
    let subset = mode.subset > 0 && !report_opts.run_async && !report_opts.static_out;
    let mut ready = match prepare(master, report_opts, spec)? {
        Prepared::Done(code) => return Ok(code),
        Prepared::NoMatch => {
            // `--subset` asks (`sys.list_functions`) before it runs: the
            // question matches nobody either.
            if subset && batch.is_none() {
                outln!("{NO_MATCH}");
            }
            return Ok(no_match(report_opts, batch.is_some()));
        }
        Prepared::Ready(ready) => *ready,
    };
    // As `salt --batch-safe-limit`: a target too wide runs as a batch.
    if batch.is_none() && mode.safe_limit > 1 && ready.selected.len() >= mode.safe_limit {
        outln!("\nNOTICE: Too many minions targeted, switching to batch execution.");
        batch = Some(mode.safe_size.clone());
    }
    let jid = maid_protocol::jid::new_jid();
    if let Some(batch) = batch
        && !report_opts.run_async
    {
        // As Salt's batch, which pings first: a minion that is not
        // connected is announced, and no job is sent to it.
        let (up, down) = ready
            .selected
            .into_iter()
            .partition(|id| ready.registry.alive(id));
        return run_batch(
            &ready.bus,
            &ready.req,
            report_opts,
            (up, down),
            &batch,
            mode.pace,
            jid,
        );
    }
    if subset {
        pick_subset(&mut ready, mode.subset)?;
        if ready.selected.is_empty() {
            return Ok(no_match(report_opts, false));
        }
    }
    if report_opts.run_async {
        block_on(jobs::submit(&ready.bus, &ready.req, &jid, ready.selected))??;
        outln!("Executed command with job ID: {jid}");
        return Ok(ExitCode::SUCCESS);
    }
    // As Salt's `get_cli_event_returns`: `-v` heads the returns with the
    // jid (not under `-p`), else `--show-jid` names it.
    announce_jid(report_opts, verbose && !progress && !doc, &jid);
    if progress && !report_opts.static_out {
        return run_with_progress(&ready, jid, verbose);
    }
    if doc && !report_opts.static_out {
        return run_docs(&ready, jid, report_opts);
    }
    run_streamed(&ready, jid, report_opts, verbose)
}

/// As `salt` when no minion matches: nothing is published, and the
/// outputter shows `{}` (a batch, `batch`, says it once more).
fn no_match(report_opts: &ReportOpts, batch: bool) -> ExitCode {
    outln!("{NO_MATCH}");
    if batch && !report_opts.run_async {
        outln!("No minions matched the target.");
        eprintln!("ERROR: No return received");
        return ExitCode::from(2);
    }
    if report_opts.run_async {
        outln!("Executed command with job ID: 0");
        return ExitCode::SUCCESS;
    }
    report_opts
        .output()
        .display(&Map::new(), report_opts.output.out_indent);
    eprintln!("ERROR: No return received");
    ExitCode::from(2)
}

/// Name the jid before the returns: as a heading when `heading`, else
/// as `jid: JID` with `--show-jid`.
fn announce_jid(report_opts: &ReportOpts, heading: bool, jid: &str) {
    // Salt runs `--static` as a quiet batch, which says neither.
    if report_opts.static_out {
        return;
    }
    if heading {
        let head = format!("Executing job with jid {jid}");
        outln!("{head}\n{}\n", "-".repeat(head.len()));
    } else if report_opts.show_jid {
        outln!("jid: {jid}");
    }
}

/// Publish as `jid` and print each return as it comes (`--static`: all
/// of them as one document once they are in), then who did not return,
/// the summary and the exit status, as `salt` does.
fn run_streamed(
    ready: &Ready,
    jid: String,
    report_opts: &ReportOpts,
    verbose: bool,
) -> anyhow::Result<ExitCode> {
    let (out, indent) = (
        &report_opts.output_for(&ready.req.fun),
        report_opts.output.out_indent,
    );
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
    print_unreturned(out, indent, &report);
    report_forged(&report.forged);
    Ok(conclude(&report, report_opts, verbose))
}

/// A row for each minion that did not return and each that rejected the
/// job, as `salt` prints them after the returns. `--hide-timeout` hides
/// none: `salt` 3008 always expects its minions (`expect_minions`), and
/// prints each that did not return with or without it.
fn print_unreturned(out: &Printer, indent: Option<i64>, report: &Report) {
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
    for (id, reason) in &report.rejected {
        print_one(
            out,
            indent,
            id,
            Value::String(format!("Job rejected: {reason}")),
            1,
        );
    }
}

/// The summary `--summary` asks for, then the exit status, named on
/// stderr when it is not 0.
fn conclude(report: &Report, report_opts: &ReportOpts, verbose: bool) -> ExitCode {
    if report_opts.summary {
        // Salt's block, as `salt --summary` prints it: only when no
        // outputter was named.
        if report_opts.output.out.is_none() {
            out!("\n\n{}", salt_summary(report, verbose));
        }
        eprint!("{}", accounting(report));
    }
    let code = report.exit_code();
    match code {
        1 => eprintln!("ERROR: Minions returned with non-zero exit code"),
        2 => eprintln!("ERROR: No return received"),
        _ => {}
    }
    ExitCode::from(code)
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
            outln!("{fun}:\n{text}\n");
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
        out!("\n\n{}", salt_summary(&report, verbose));
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

/// `salt -b`: the selected minions that are connected (`up`) a batch at
/// a time, each start announced and each return shown with its jid and
/// retcode, as Salt's batch prints them, after a line for each that is
/// not (`down`); the exit code is the highest retcode.
fn run_batch(
    bus: &maid_bus::Bus,
    req: &JobRequest,
    report_opts: &ReportOpts,
    (up, down): (Vec<String>, Vec<String>),
    batch: &str,
    pace: maid_master::batch::Pace,
    jid: String,
) -> anyhow::Result<ExitCode> {
    let (out, indent) = (
        &report_opts.output_for(&req.fun),
        report_opts.output.out_indent,
    );
    let quiet = report_opts.static_out;
    let ids = up;
    let Some(size) = maid_master::batch::size(batch, ids.len()) else {
        eprintln!("ERROR: {}", maid_master::batch::invalid(batch));
        return Ok(ExitCode::FAILURE);
    };
    if !quiet {
        for id in &down {
            outln!("Minion {id} did not respond. No job will be sent.");
        }
    }
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
                outln!("\nExecuting run on {}\n", maid_salt::python::repr(&ids));
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
