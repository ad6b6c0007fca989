//! The `maid` command: a thin CLI over the `maid` library.
//!
//! Errors are `anyhow` here and printed with their whole cause chain; the
//! exit status of `maid call` is the call's retcode, as `salt-call`'s is.

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    cli::init_logging(args.verbose, args.log_level.as_deref(), args.log_format);
    match cli::run(args) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("maid: error: {err:#}");
            ExitCode::from(2)
        }
    }
}
