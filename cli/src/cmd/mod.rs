//! Command-line interface: argument definitions and dispatch. Each
//! subcommand lives in its own file.

mod acl;
mod agent;
mod api;
mod audit;
mod author;
mod author_tools;
mod call;
mod cp;
mod file;
mod fleet;
mod init;
mod job;
mod key;
pub use key::key_list_short;
mod keygen;
mod maids;
mod man;
mod pillar;
mod plugin;
mod plugin_push;
mod progress;
mod run;
mod runner;

use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

/// maid: run Salt execution modules as sandboxed WebAssembly plugins.
#[derive(Debug, Parser)]
#[command(name = "maid", version, about, propagate_version = true)]
pub struct Cli {
    /// More log output on stderr (-v info, -vv debug, -vvv trace); for
    /// `run` and `cp`, Salt's verbose output instead.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,

    /// Log format on stderr.
    #[arg(long, value_enum, default_value_t = LogFormat::Human, global = true)]
    pub log_format: LogFormat,

    /// Console log level, as Salt's `-l`: quiet, critical, error, warning,
    /// info, debug, trace, garbage or all (overrides -v).
    #[arg(short = 'l', long, global = true, value_parser = [
        "quiet", "critical", "error", "warning", "info", "profile", "debug", "trace", "garbage", "all",
    ])]
    pub log_level: Option<String>,

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
    /// List, inspect, create, build, test, compile ahead and push plugins.
    #[command(subcommand)]
    Plugin(plugin::PluginCommand),
    /// Write a commented configuration file.
    Init(init::InitArgs),
    /// What this agent trusts and what every plugin may touch, for review.
    Policy(plugin::PolicyArgs),
    /// Run the agent: take jobs from the masters' topics.
    Agent(agent::AgentArgs),
    /// Run a function on the minions TGT selects, as `salt` does.
    Run(run::RunArgs),
    /// Copy a file to the minions TGT selects, as `salt-cp` does.
    Cp(cp::CpArgs),
    /// Run a runner function on the master, as `salt-run` does
    /// (`jobs.list_jobs`, `jobs.lookup_jid`, `manage.status`, ...).
    Runner(runner::RunnerArgs),
    /// Show the returns of a job from the job cache.
    Job(job::JobArgs),
    /// List the maids in the registry.
    Maids(maids::MaidsArgs),
    /// Show the pillar the master compiles for minions, from its
    /// pillar_roots (nothing is sent).
    Pillar(pillar::PillarArgs),
    /// Write an Ed25519 key pair for signing jobs.
    Keygen(keygen::KeygenArgs),
    /// The maids' keys: list, accept, reject, delete, as `salt-key` does.
    Key(key::KeyArgs),
    /// Print the Redis ACL rules (aclfile) for the agents' and the master's
    /// credentials: each can do only what it must.
    Acl(acl::AclArgs),
    /// Serve the master's HTTP API (salt-api compatible).
    Api(api::ApiArgs),
    /// Manage the salt:// files stored in Redis.
    #[command(subcommand)]
    File(FileCommand),
    /// The audit trail: `maid audit verify FILE…` checks a maid's log.
    #[command(subcommand)]
    Audit(audit::AuditCommand),
    /// Write the manual pages into a directory (for packages).
    #[command(hide = true)]
    Man(man::ManArgs),
}

#[derive(Debug, Subcommand)]
pub enum FileCommand {
    /// Store a file so `salt://NAME` resolves on every agent.
    Push(file::PushArgs),
}

impl Cli {
    /// How much `-v` raises the log level: not at all for `maid run` and
    /// `maid cp`, where `-v` is `salt`'s verbose output.
    pub fn log_verbosity(&self) -> u8 {
        match self.command {
            Command::Run(_) | Command::Cp(_) => 0,
            _ => self.verbose,
        }
    }
}

/// Send `tracing` output to stderr.
pub fn init_logging(verbose: u8, log_level: Option<&str>, format: LogFormat) {
    use tracing_subscriber::EnvFilter;
    let default = match (log_level, verbose) {
        (Some("quiet"), _) => "off",
        (Some("critical" | "error"), _) => "error",
        (Some("warning"), _) => "warn",
        (Some("info" | "profile"), _) => "info",
        (Some("debug"), _) => "debug",
        (Some(_), _) => "trace",
        (None, 0) => "warn",
        (None, 1) => "info",
        (None, 2) => "debug",
        (None, _) => "trace",
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
        Command::Agent(args) => agent::agent(args),
        Command::Run(args) => run::run(args, cli.verbose > 0),
        Command::Cp(args) => cp::cp(args, cli.verbose > 0),
        Command::Runner(args) => runner::run(args),
        Command::Job(args) => job::job(args),
        Command::Maids(args) => maids::maids(args),
        Command::Pillar(args) => pillar::run(args),
        Command::Keygen(args) => keygen::keygen(args),
        Command::Key(args) => key::run(args),
        Command::Acl(args) => acl::run(args),
        Command::Api(args) => api::run(args),
        Command::File(FileCommand::Push(args)) => file::push(args),
        Command::Audit(cmd) => audit::run(cmd),
        Command::Man(args) => man::run(args),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    /// clap's own checks of the whole command line (unique short and long
    /// names per command, valid defaults and groups), which it runs only
    /// in debug builds and only for the command parsed.
    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }
}
