//! `maid-bench`: the benchmark (`maid-bench run`) and the soak test
//! (`maid-bench soak`), kept out of the `maid` binary every host runs.
//!
//! Both start a private `redis-server` and measure the `maid` binary beside
//! this one (or `--maid`); the fleets they stand up run in processes of
//! this binary (`maid-bench fleet`, `maid-bench raw`). How to read the
//! results, and the goals, are in BENCHMARKS.md.

mod bench;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "maid-bench", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Benchmark raw Redis, maid and the Python seed side by side.
    Run(bench::BenchArgs),
    /// Soak test: many agents, many jobs, Redis restarted under them.
    Soak(bench::SoakArgs),
    /// A flat fleet against fleets behind syndic maids.
    Syndic(bench::SyndicArgs),
    /// A highstate through `maid call --local` and `salt-call --local`.
    States(bench::StatesArgs),
    /// The benchmark's raw Redis responder (used by `run`).
    #[command(hide = true)]
    Raw(bench::RawArgs),
    /// Many agents in one process (used by `run` and `soak`).
    #[command(hide = true)]
    Fleet(bench::FleetArgs),
}

/// The `maid` binary to measure: `explicit`, else `maid` beside this one.
fn maid_binary(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(path) = explicit {
        return Ok(path.to_path_buf());
    }
    let exe = std::env::current_exe().context("path of the maid-bench binary")?;
    let maid = exe.with_file_name("maid");
    anyhow::ensure!(
        maid.is_file(),
        "no maid binary beside {} (build it with `cargo build --release -p maid`, or pass --maid)",
        exe.display()
    );
    Ok(maid)
}

fn main() -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_env("MAID_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let result = match Cli::parse().command {
        Command::Run(args) => bench::bench(args),
        Command::Soak(args) => bench::soak(args),
        Command::Syndic(args) => bench::syndic(args),
        Command::States(args) => bench::states(args),
        Command::Raw(args) => bench::raw(args),
        Command::Fleet(args) => bench::fleet(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("maid-bench: error: {err:#}");
            ExitCode::from(2)
        }
    }
}
