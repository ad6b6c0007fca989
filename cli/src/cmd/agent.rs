//! `maid agent`: a maid, built from the command line and its config.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::rt::shutdown_signal;
use clap::Args;

use crate::setup::RuntimeOpts;
use crate::setup::Setup;

#[derive(Debug, Args)]
pub struct AgentArgs {
    /// Minion id [default: config's id, else the host name].
    #[arg(long)]
    pub id: Option<String>,
    /// Redis URL, overriding the config's [redis].
    #[arg(long, env = "MAID_REDIS")]
    pub redis: Option<String>,
    /// Master topic to subscribe to (repeatable, or comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub master_topic: Vec<String>,
    /// Also serve `salt://` from DIR before Redis (repeatable).
    #[arg(long)]
    pub file_root: Vec<PathBuf>,
    #[command(flatten)]
    pub runtime: RuntimeOpts,
}

pub fn agent(args: AgentArgs) -> anyhow::Result<ExitCode> {
    let mut config = Setup::resolve(&args.runtime, false)?.into_config();
    if let Some(url) = &args.redis {
        config.redis = config.redis.with_url(url);
    }
    if !args.master_topic.is_empty() {
        config.master_topics = args.master_topic.clone();
    }
    if args.id.is_some() {
        config.id = args.id.clone();
    }
    // `--file-root` directories come before the config's own base ones.
    config.file_roots.prepend("base", args.file_root.clone());
    let workers = config.agent.worker_threads();
    crate::rt::block_on_workers(workers, maid_agent::agent::run(config, shutdown_signal()))??;
    Ok(ExitCode::SUCCESS)
}
