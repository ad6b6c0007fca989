//! The `maid` command: a thin CLI over the agent and master libraries.
//!
//! Errors are `anyhow` here and printed with their whole cause chain; the
//! exit status of `maid call` is the call's retcode, as `salt-call`'s is.

mod cmd;
mod master;
mod output;
mod rt;

use maid_cli::setup;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let argv = cmd::key_list_short(std::env::args_os().collect());
    let args = match cmd::Cli::try_parse_from(argv) {
        Ok(args) => args,
        Err(e) => return usage_error(&e),
    };
    cmd::init_logging(
        args.log_verbosity(),
        args.log_level.as_deref(),
        args.log_format,
    );
    match cmd::run(args) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("maid: error: {err:#}");
            if err.is::<master::Usage>() {
                ExitCode::from(64)
            } else {
                ExitCode::from(2)
            }
        }
    }
}

/// A command line that does not parse, answered as Salt's tools answer
/// one: help and version on stdout (0); an incomplete `maid run` (no
/// function) with `salt`'s words and 42; any other error with clap's
/// message and 64 (`EX_USAGE`), as Salt's option parser exits.
fn usage_error(e: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    let _ = e.print();
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => ExitCode::SUCCESS,
        ErrorKind::MissingRequiredArgument if in_run(e) => {
            eprintln!("\nIncomplete options passed.\n");
            ExitCode::from(42)
        }
        _ => ExitCode::from(64),
    }
}

/// Whether the error is about `maid run`'s command line.
fn in_run(e: &clap::Error) -> bool {
    use clap::error::{ContextKind, ContextValue};
    matches!(e.get(ContextKind::Usage), Some(ContextValue::StyledStr(usage))
        if usage.to_string().contains("maid run "))
}
