//! The `maid` command: a thin CLI over the agent and master libraries.
//!
//! Errors are `anyhow` here and printed with their whole cause chain; the
//! exit status of `maid call` is the call's retcode, as `salt-call`'s is.

/// `print!` for standard output, through [`output::stdout_fmt`].
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::stdout_fmt(format_args!($($arg)*))
    };
}

/// `println!` for standard output, through [`output::stdout_fmt`].
macro_rules! outln {
    () => {
        $crate::output::stdout_fmt(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::output::stdout_fmt(format_args!("{}\n", format_args!($($arg)*)))
    };
}

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
            eprintln!("maid: error: {}", said_once(&err));
            if err.is::<master::Usage>() {
                ExitCode::from(64)
            } else {
                ExitCode::from(2)
            }
        }
    }
}

/// `err` and its causes, each said once: a cause whose words the message
/// before it already holds is left out. Errors that wrap another often
/// print it in their own message too (`#[error("{0}")]` over `#[from]`;
/// redis-rs's errors over their I/O error), and `{:#}` said each again:
/// `Connection refused (os error 111): Connection refused (os error 111)`.
fn said_once(err: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
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

#[cfg(test)]
mod tests {
    #[derive(Debug, thiserror::Error)]
    #[error("{0}")]
    struct Wraps(#[from] std::io::Error);

    #[test]
    fn each_cause_is_said_once() {
        let io = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let err = anyhow::Error::new(Wraps(io)).context("cannot publish");
        assert_eq!(super::said_once(&err), "cannot publish: connection refused");
        let err = anyhow::anyhow!("outer").context("needs a key");
        assert_eq!(super::said_once(&err), "needs a key: outer");
    }
}
