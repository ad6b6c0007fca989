//! `maid-bench fleet`: many agents in one process, and the runtimes that
//! process (and `maid-bench raw --count`) deals them to.
//!
//! A thousand agents would each have their own host; one process stands
//! in for them, with one current-thread runtime per thread ([`Fleet`]) as
//! each real agent has one, so the fan-out measures the agents' code and
//! not a work-stealing pool's.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

#[derive(Debug, Args)]
pub struct FleetArgs {
    /// How many agents.
    #[arg(long, default_value_t = 1000)]
    pub count: usize,
    /// Redis URL.
    #[arg(long)]
    pub redis: String,
    /// Master topic every agent subscribes to.
    #[arg(long)]
    pub topic: String,
    /// Plugin directory.
    #[arg(long)]
    pub plugin_dir: PathBuf,
    /// Compiled-plugin cache.
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// Threads, each with a current-thread runtime and its share of the
    /// agents (0: one on the main thread).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Agent ids are PREFIX0, PREFIX1, ...
    #[arg(long, default_value = "fleet-")]
    pub prefix: String,
    /// Configuration file (grants, limits, file_roots); its Redis and
    /// master topics are replaced by --redis and --topic.
    #[arg(long)]
    pub config: Option<PathBuf>,
}

/// `count` agents, each with its own Redis connections, job slots and jid
/// memory, sharing one plugin runtime ([`maid_agent::agent::run_fleet`]); until
/// SIGTERM or SIGINT.
pub fn fleet(args: FleetArgs) -> anyhow::Result<ExitCode> {
    let fleet = Fleet::new(args.threads)?;
    let mut config = match &args.config {
        Some(path) => maid_config::Config::load(path)?,
        None => Default::default(),
    };
    config.master_topics = vec![args.topic.clone()];
    config.redis = maid_bus::RedisConfig {
        url: Some(args.redis.clone()),
        ..Default::default()
    };
    config.plugin_dir = Some(args.plugin_dir.clone());
    config.cache_dir = args.cache_dir.clone();
    config.agent.shutdown_grace_secs = 0.0;
    // The bench's fleet runs what its own master sends, unsigned, unless
    // its configuration says otherwise.
    config.security.require_signed.get_or_insert(false);
    let ids: Vec<String> = (0..args.count)
        .map(|i| format!("{}{i}", args.prefix))
        .collect();
    fleet.main.block_on(async {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate())?;
        let stop = async {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        };
        maid_agent::agent::run_fleet(config, &ids, |i| fleet.handle(i).clone(), stop).await?;
        anyhow::Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}

/// The runtimes many responders or agents share in one process.
///
/// With 0 threads, one current-thread runtime. Otherwise `threads`
/// current-thread runtimes, each driven by a thread of its own, and the
/// tasks dealt to them in turn ([`Fleet::handle`]): each real agent runs
/// on a current-thread runtime, and a fleet's agents then never move
/// between threads, as they would in a work-stealing pool (where a job's
/// memory freed on the other thread takes malloc's arena lock).
pub(super) struct Fleet {
    /// Drives the first share (and the set-up) on the calling thread.
    pub(super) main: tokio::runtime::Runtime,
    /// Every runtime's handle, the first's included.
    handles: Vec<tokio::runtime::Handle>,
    /// Dropped with the fleet: the other threads then end, and their
    /// runtimes with them.
    _stop: Vec<tokio::sync::oneshot::Sender<()>>,
}

impl Fleet {
    pub(super) fn new(threads: usize) -> std::io::Result<Fleet> {
        let build = || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
        };
        let main = build()?;
        let mut handles = vec![main.handle().clone()];
        let mut stop = Vec::new();
        for i in 1..threads {
            let rt = build()?;
            let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
            handles.push(rt.handle().clone());
            stop.push(stop_tx);
            std::thread::Builder::new()
                .name(format!("fleet-{i}"))
                .spawn(move || rt.block_on(stop_rx))?;
        }
        Ok(Fleet {
            main,
            handles,
            _stop: stop,
        })
    }

    /// The runtime of the `i`th task.
    pub(super) fn handle(&self, i: usize) -> &tokio::runtime::Handle {
        &self.handles[i % self.handles.len()]
    }
}

#[cfg(test)]
mod tests {
    use super::Fleet;
    use std::thread::ThreadId;

    /// Tasks are dealt to the runtimes in turn, the first share on the
    /// calling thread, and a task never changes threads.
    #[test]
    fn a_fleet_deals_its_tasks_to_one_runtime_per_thread() {
        let fleet = Fleet::new(3).unwrap();
        let here = std::thread::current().id();
        let ran: Vec<(usize, ThreadId, ThreadId)> = fleet.main.block_on(async {
            let mut tasks = tokio::task::JoinSet::new();
            for i in 0..9 {
                let task = async move {
                    let first = std::thread::current().id();
                    tokio::task::yield_now().await;
                    (i, first, std::thread::current().id())
                };
                tasks.spawn_on(task, fleet.handle(i));
            }
            tasks.join_all().await
        });
        assert_eq!(ran.len(), 9);
        let mut shares: [Option<ThreadId>; 3] = [None; 3];
        for (i, first, then) in ran {
            assert_eq!(first, then, "task {i} changed threads");
            let share = shares[i % 3].get_or_insert(first);
            assert_eq!(*share, first, "task {i} left its share's thread");
        }
        let [a, b, c] = shares.map(Option::unwrap);
        assert_eq!(a, here, "the first share runs on the calling thread");
        assert!(a != b && b != c && a != c, "{shares:?}");
    }

    /// With 0 threads everything runs on the calling thread.
    #[test]
    fn a_fleet_of_no_threads_runs_on_the_calling_thread() {
        let fleet = Fleet::new(0).unwrap();
        let here = std::thread::current().id();
        let ran = fleet.main.block_on(async {
            let mut tasks = tokio::task::JoinSet::new();
            for i in 0..4 {
                tasks.spawn_on(async { std::thread::current().id() }, fleet.handle(i));
            }
            tasks.join_all().await
        });
        assert_eq!(ran, vec![here; 4]);
    }
}
