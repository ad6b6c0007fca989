//! `maid-bench run`: the benchmark of the whole path, master publish to last
//! reply, on a private `redis-server`.
//!
//! Three responders run side by side in one run, each in its own process
//! so its CPU time and memory can be read from `/proc/<pid>`:
//!
//! * `raw`: the Redis floor, `maid-bench raw` — a minimal Rust responder
//!   that answers each message with two publishes (no maid code);
//! * `maid`: the real agent binary (`maid agent`) running `test.ping`;
//! * `seed`: `bench/seed.py`, the original design in Python (redis-py
//!   pub/sub listener, PING, a forked `multiprocessing.Process` per job).
//!
//! The master is this process: one reply topic, unique jids. For each
//! responder: sequential round trips (publish → PING and return both in),
//! throughput with a fixed number of jobs in flight, CPU time per job and
//! RSS. The scenarios alternate in blocks so that background load on the
//! machine hits them alike. Then: `cmd.run 'true'` against spawning `true`
//! directly, agent start-up to ready with a cold and a warm compiled-plugin
//! cache, and a fan-out of `test.ping` to many agents in one process
//! (`maid-bench fleet`), its rounds alternating with the same fan-out to
//! as many raw responders in another (`maid-bench raw --count`, the
//! floor: what the machine and Redis allow before any maid code) and to as
//! many that send what the protocol asks of a maid in a third (`--protocol`:
//! the PING in a write of its own, the return with its job-cache write),
//! each with the least a round can take on this machine, from the CPU the
//! fleet, redis-server and the master used within the rounds. Last,
//! `test.ping` and `cmd.run 'true'` through a plugin runtime in this
//! process: the call alone, without Redis or the agent. Everything started
//! is killed when the command ends, also on error or Ctrl-C.
//!
//! The goals (`goals`) are each computed from figures of the same run, so
//! the machine's load reaches both sides alike: maid's round trip and
//! throughput against raw's, the seed's round trip against maid's, the
//! fan-out against the floor that keeps the protocol, and `cmd.run`'s own
//! share with a `test.ping` round trip and a direct spawn of `true` taken
//! out; the idle RSS alone is an absolute bound.
//!
//! Timing is reported, never asserted; the test suite only runs `--tiny`.
//!
//! This module holds the command's flags, the run sizes they make, and
//! the order of the steps; the steps themselves are in
//! [`super::scenarios`] and [`super::in_process`], the processes they
//! measure in [`super::responders`], the report in [`super::report`].

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Args;
use serde_json::json;

use maid_cli::setup::{RuntimeOpts, Setup, modules_in};

use super::in_process::{in_process_calls, in_process_runtime};
use super::master::{Master, TgtType};
use super::report::render;
use super::responders::{Lab, TOPIC_SIGNED, into_results, start_responders};
use super::results::Results;
use super::{scenarios, stage};

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Tiny sizes: check that every scenario runs (the test suite's setting).
    #[arg(long)]
    pub tiny: bool,
    /// Sequential round trips each for raw and maid [default: 2000; --tiny: 20].
    #[arg(long)]
    pub round_trips: Option<usize>,
    /// Sequential round trips for seed [default: 200; --tiny: 5].
    #[arg(long)]
    pub seed_round_trips: Option<usize>,
    /// Jobs each for raw and maid in the throughput run [default: 20000; --tiny: 200].
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Jobs for seed in the throughput run [default: 1000; --tiny: 20].
    #[arg(long)]
    pub seed_jobs: Option<usize>,
    /// Jobs kept in flight in the throughput run.
    #[arg(long, default_value_t = 64)]
    pub in_flight: usize,
    /// Blocks the scenarios alternate in [default: 4; --tiny: 1].
    #[arg(long)]
    pub blocks: Option<usize>,
    /// Agents in the fan-out process [default: 1000; --tiny: 10].
    #[arg(long)]
    pub agents: Option<usize>,
    /// Fan-out rounds [default: 20; --tiny: 2].
    #[arg(long)]
    pub fanout_rounds: Option<usize>,
    /// Threads of the fan-out processes, each driving a current-thread
    /// runtime with its share of the agents (0: one current-thread runtime
    /// on the main thread) [default: one per CPU, 0 on one CPU]. A
    /// thousand agents would each have their own host; one process stands
    /// in for them, so it may use every core.
    #[arg(long)]
    pub fanout_threads: Option<usize>,
    /// `cmd.run 'true'` round trips, each paired with a direct spawn of
    /// `true` [default: 300; --tiny: 5].
    #[arg(long)]
    pub cmd_runs: Option<usize>,
    /// `test.ping` calls through the plugin runtime in this process, no
    /// Redis: the call alone [default: 20000; --tiny: 20].
    #[arg(long)]
    pub calls: Option<usize>,
    /// Agent start-ups with a warm plugin cache [default: 10; --tiny: 1].
    #[arg(long)]
    pub warm_starts: Option<usize>,
    /// Agent start-ups with a cold (empty) plugin cache, the plugins
    /// compiled ahead beside them (`maid plugin compile`, as a package
    /// ships them) [default: 2; --tiny: 1].
    #[arg(long)]
    pub cold_starts: Option<usize>,
    /// Agent start-ups with a cold plugin cache and nothing compiled
    /// ahead: every plugin compiled at start [default: 1; --tiny: 1].
    #[arg(long)]
    pub compiling_starts: Option<usize>,
    /// How the jobs target: `glob` sends `*` (what `maid run '*'` sends);
    /// `list` sends the responders' ids, which the agent matches without
    /// compiling a pattern.
    #[arg(long, value_enum, default_value_t = TgtType::Glob)]
    pub tgt_type: TgtType,
    /// Also read the maid agent's own timings from its /metrics (serves
    /// them on a loopback port; off by default so the agent measured is
    /// the default one).
    #[arg(long)]
    pub agent_metrics: bool,
    /// Leave the Python seed out.
    #[arg(long)]
    pub no_seed: bool,
    /// Directory of `<module>.wasm` plugins [default: `../plugins` beside the
    /// maid binary, else /usr/lib/maid/plugins].
    #[arg(long, env = "MAID_PLUGIN_DIR")]
    pub plugin_dir: Option<PathBuf>,
    /// The Python that runs the seed.
    #[arg(long, default_value = "python3")]
    pub python: PathBuf,
    /// Also write the Markdown tables to FILE.
    #[arg(long)]
    pub markdown: Option<PathBuf>,
    /// The `maid` binary whose agents are measured [default: `maid`
    /// beside this binary].
    #[arg(long, env = "MAID_BIN")]
    pub maid: Option<PathBuf>,
}

/// Run sizes after `--tiny` and the flags.
#[derive(Debug, Clone)]
pub(super) struct Sizes {
    pub(super) round_trips: usize,
    pub(super) seed_round_trips: usize,
    pub(super) jobs: usize,
    pub(super) seed_jobs: usize,
    pub(super) in_flight: usize,
    pub(super) blocks: usize,
    pub(super) agents: usize,
    pub(super) fanout_rounds: usize,
    pub(super) cmd_runs: usize,
    pub(super) fanout_threads: usize,
    pub(super) calls: usize,
    pub(super) warm_starts: usize,
    pub(super) cold_starts: usize,
    pub(super) compiling_starts: usize,
    pub(super) warmup: usize,
}

impl Sizes {
    fn of(a: &BenchArgs) -> Sizes {
        let pick = |given: Option<usize>, full: usize, tiny: usize| {
            given.unwrap_or(if a.tiny { tiny } else { full }).max(1)
        };
        Sizes {
            round_trips: pick(a.round_trips, 2000, 20),
            seed_round_trips: pick(a.seed_round_trips, 200, 5),
            jobs: pick(a.jobs, 20_000, 200),
            seed_jobs: pick(a.seed_jobs, 1000, 20),
            in_flight: a.in_flight.max(1),
            blocks: pick(a.blocks, 4, 1),
            agents: pick(a.agents, 1000, 10),
            fanout_rounds: pick(a.fanout_rounds, 20, 2),
            cmd_runs: pick(a.cmd_runs, 300, 5),
            fanout_threads: a.fanout_threads.unwrap_or_else(|| {
                match std::thread::available_parallelism().map_or(1, |n| n.get()) {
                    1 => 0,
                    n => n,
                }
            }),
            calls: pick(a.calls, 20_000, 20),
            warm_starts: pick(a.warm_starts, 10, 1),
            cold_starts: pick(a.cold_starts, 2, 1),
            compiling_starts: pick(a.compiling_starts, 1, 1),
            warmup: if a.tiny { 2 } else { 100 },
        }
    }
}

/// `maid-bench run`: every scenario, then the report on stdout, as text
/// and as Markdown (also to `--markdown`).
pub fn bench(args: BenchArgs) -> anyhow::Result<ExitCode> {
    let sizes = Sizes::of(&args);
    let setup = Setup::resolve(
        &RuntimeOpts {
            config: None,
            plugin_dir: args.plugin_dir.clone(),
            cache_dir: None,
            no_cache: true,
        },
        false,
    )?;
    let (plugin_dir, plugins) = plugins(&setup)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let results = rt.block_on(async {
        tokio::select! {
            r = async {
                let mut r = run_all(&args, &sizes, &plugin_dir, plugins).await?;
                let runtime = in_process_runtime(&setup, &plugin_dir).await?;
                r.calls = in_process_calls(&runtime, "test.ping", vec![], sizes.calls).await?;
                r.cmd_calls =
                    in_process_calls(&runtime, "cmd.run", vec![json!("true")], sizes.cmd_runs).await?;
                anyhow::Ok(r)
            } => r,
            _ = tokio::signal::ctrl_c() => bail!("interrupted"),
        }
    })?;
    let (text, markdown) = render(&results, &sizes);
    println!("{text}");
    println!("Markdown (for BENCHMARKS.md):\n\n{markdown}");
    if let Some(path) = &args.markdown {
        std::fs::write(path, &markdown).with_context(|| format!("write {}", path.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The plugin directory, canonical, and how many plugins are in it; an
/// error unless `test` and `cmd`, which the scenarios call, are there.
fn plugins(setup: &Setup) -> anyhow::Result<(PathBuf, usize)> {
    let plugin_dir = setup
        .plugin_dir
        .canonicalize()
        .with_context(|| format!("plugin dir {}", setup.plugin_dir.display()))?;
    let modules = modules_in(&plugin_dir);
    for needed in ["test", "cmd"] {
        if !modules.iter().any(|m| m == needed) {
            bail!(
                "{needed}.wasm is not in {}; run `./dev build` or pass --plugin-dir",
                plugin_dir.display()
            );
        }
    }
    Ok((plugin_dir, modules.len()))
}

/// Every scenario that needs Redis, in turn, on a private `redis-server`:
/// start-up, the responders' blocks, `cmd.run`, the fan-out. Everything
/// it started is stopped when it returns.
async fn run_all(
    args: &BenchArgs,
    sizes: &Sizes,
    plugin_dir: &Path,
    plugins: usize,
) -> anyhow::Result<Results> {
    let mut lab = Lab::start(args, sizes, plugin_dir).await?;
    let mut results = Results::start(args, sizes, plugins);
    scenarios::start_ups(&lab, sizes, plugins, &mut results).await?;
    let mut responders = start_responders(&mut lab, args, sizes, &mut results).await?;
    scenarios::idle_rss(&mut responders).await;
    let mut master = Master::connect(&lab.client).await?;
    master.sign_on(TOPIC_SIGNED, lab.master_key.clone());
    scenarios::warm_up(&mut master, &mut responders, sizes).await?;
    for block in 0..sizes.blocks {
        scenarios::block(
            &mut master,
            &mut responders,
            lab.metrics_port,
            sizes,
            block,
            &mut results,
        )
        .await?;
    }
    scenarios::after_load_rss(&mut responders).await;
    scenarios::cmd_runs(
        &mut master,
        &responders,
        lab.metrics_port,
        args.tgt_type,
        sizes,
        &mut results,
    )
    .await?;
    // The responders stop here; the fan-out fleets have the machine.
    into_results(responders, &mut results);
    scenarios::fan_out(&mut lab, &mut master, args.tgt_type, sizes, &mut results).await?;
    stage("done; stopping everything");
    Ok(results)
}
