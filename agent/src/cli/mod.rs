//! Command-line interface: argument definitions and dispatch. Each
//! subcommand lives in its own file.

mod api;
mod author;
mod author_tools;
mod bench;
mod call;
mod fleet;
mod init;
mod plugin;
mod push;
mod setup;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// maid: run Salt execution modules as sandboxed WebAssembly plugins.
#[derive(Debug, Parser)]
#[command(name = "maid", version, about, propagate_version = true)]
pub struct Cli {
    /// More log output on stderr (-v info, -vv debug, -vvv trace).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,

    /// Log format on stderr.
    #[arg(long, value_enum, default_value_t = LogFormat::Human, global = true)]
    pub log_format: LogFormat,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LogFormat {
    Human,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one function on this machine, as `salt-call --local` does.
    Call(call::CallArgs),
    /// List and inspect plugins.
    #[command(subcommand)]
    Plugin(plugin::PluginCommand),
    /// Write a commented configuration file.
    Init(init::InitArgs),
    /// What this agent trusts and what every plugin may touch, for review.
    Policy(plugin::PolicyArgs),
    /// Run the agent: take jobs from the masters' topics.
    Agent(fleet::AgentArgs),
    /// Run a function on the minions TGT selects, as `salt` does.
    Run(fleet::RunArgs),
    /// Copy a file to the minions TGT selects, as `salt-cp` does.
    Cp(fleet::CpArgs),
    /// Show the returns of a job from the job cache.
    Job(fleet::JobArgs),
    /// List the maids in the registry.
    Maids(fleet::MaidsArgs),
    /// Write an Ed25519 key pair for signing jobs.
    Keygen(fleet::KeygenArgs),
    /// Serve the master's HTTP API (salt-api compatible).
    Api(api::ApiArgs),
    /// Manage the salt:// files stored in Redis.
    #[command(subcommand)]
    File(FileCommand),
    /// Benchmark raw Redis, maid and the Python seed side by side.
    Bench(bench::BenchArgs),
    /// The benchmark's raw Redis responder (used by `maid bench`).
    #[command(hide = true)]
    BenchRaw(bench::RawArgs),
    /// Many agents in one process (used by `maid bench`).
    #[command(hide = true)]
    BenchFleet(bench::FleetArgs),
    /// Soak test: many agents, many jobs, Redis restarted under them.
    Soak(bench::SoakArgs),
}

#[derive(Debug, Subcommand)]
pub enum FileCommand {
    /// Store a file so `salt://NAME` resolves on every agent.
    Push(fleet::PushArgs),
}

/// Where configuration and plugins come from (shared by subcommands).
#[derive(Debug, Clone, Args)]
pub struct RuntimeOpts {
    /// Configuration file: grants and limits per plugin.
    #[arg(long, short = 'c', env = "MAID_CONFIG")]
    pub config: Option<PathBuf>,

    /// Directory of `<module>.wasm` plugins [default: config's plugin_dir,
    /// else `../plugins` beside the maid binary, else /usr/lib/maid/plugins].
    #[arg(long, env = "MAID_PLUGIN_DIR")]
    pub plugin_dir: Option<PathBuf>,

    /// Directory for compiled plugins [default: config's cache_dir, else
    /// $XDG_CACHE_HOME/maid or ~/.cache/maid].
    #[arg(long, env = "MAID_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,

    /// Compile plugins in memory only; never read or write the cache.
    #[arg(long)]
    pub no_cache: bool,
}

/// Send `tracing` output to stderr.
pub fn init_logging(verbose: u8, format: LogFormat) {
    use tracing_subscriber::EnvFilter;
    let default = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_env("MAID_LOG").unwrap_or_else(|_| EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Human => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Run the parsed command line; `Ok` carries the exit status.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Call(args) => call::run(args),
        Command::Plugin(cmd) => plugin::run(cmd),
        Command::Init(args) => init::run(args),
        Command::Policy(args) => plugin::policy(args),
        Command::Agent(args) => fleet::agent(args),
        Command::Run(args) => fleet::run(args, cli.verbose > 0),
        Command::Cp(args) => fleet::cp(args, cli.verbose > 0),
        Command::Job(args) => fleet::job(args),
        Command::Maids(args) => fleet::maids(args),
        Command::Keygen(args) => fleet::keygen(args),
        Command::Api(args) => api::run(args),
        Command::File(FileCommand::Push(args)) => fleet::push(args),
        Command::Bench(args) => bench::bench(args),
        Command::BenchRaw(args) => bench::raw(args),
        Command::BenchFleet(args) => bench::fleet(args),
        Command::Soak(args) => bench::soak(args),
    }
}

/// A single-threaded tokio runtime: one call at a time needs no more, and
/// it starts fastest.
fn block_on<F: std::future::Future>(f: F) -> anyhow::Result<F::Output> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    Ok(rt.block_on(f))
}
