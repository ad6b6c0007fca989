//! `maid man DIR`: the manual pages, one per command (`maid.1`,
//! `maid-run.1`, `maid-audit-verify.1`, …), written from the same
//! definitions as `--help`, so they cannot drift from the binary. The
//! packages carry them (`./dev package`); hidden from `--help`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, CommandFactory};

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Directory to write the pages into (created if missing).
    pub dir: PathBuf,
}

pub fn run(args: ManArgs) -> anyhow::Result<ExitCode> {
    std::fs::create_dir_all(&args.dir).with_context(|| format!("create {}", args.dir.display()))?;
    clap_mangen::generate_to(super::Cli::command(), &args.dir)
        .with_context(|| format!("write the manual pages into {}", args.dir.display()))?;
    Ok(ExitCode::SUCCESS)
}
