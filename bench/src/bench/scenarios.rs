//! The scenarios of `maid-bench run`, in the order the run takes them:
//! agent start-up, the responders' round trips and throughput in
//! alternating blocks, `cmd.run 'true'` against a direct spawn, and the
//! fan-out to many agents against its floors.
//!
//! Each step is a function that drives the master and records into
//! [`Results`]; [`super::run`] calls them in turn. The processes they
//! measure are started in [`super::responders`].

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::bail;
use futures_util::StreamExt;
use serde_json::json;

use maid_testkit::Proc;

use super::master::{Master, READY_TIMEOUT, Target, TgtType};
use super::measure::{CMD_DURATION, PING_DURATION, PING_LATENCY, RoundCpu, scrape, spawn_direct};
use super::procfs::{RssSampler, cpu_ticks, rss_anon_kib, rss_kib};
use super::responders::{
    AgentSetup, Lab, Responder, TOPIC_FLEET, TOPIC_MAID, TOPIC_PROTOCOL_FLEET, TOPIC_RAW_FLEET,
    TOPIC_START, everyone,
};
use super::results::{MAID, RAW, Results};
use super::run::Sizes;
use super::scratch::Scratch;
use super::stage;

/// Agent start-up to ready: cold caches first, the plugins compiled ahead
/// (the first one is then the warm cache every later agent uses), then
/// cold with nothing compiled ahead, then warm; each agent's RSS read
/// once it is ready and settled.
pub(super) async fn start_ups(
    lab: &Lab,
    sizes: &Sizes,
    plugins: usize,
    results: &mut Results,
) -> anyhow::Result<()> {
    stage(&format!(
        "agent start-up to ready: {} cold, {} cold compiling, {} warm ({plugins} plugins)",
        sizes.cold_starts, sizes.compiling_starts, sizes.warm_starts
    ));
    results.compile_ahead = lab.compile_ahead;
    let (client, agents, scratch) = (&lab.client, &lab.agents, &lab.scratch);
    for i in 0..sizes.cold_starts {
        let cache = scratch.join(&format!("cache-{i}"));
        let id = format!("bench-cold-{i}");
        let (t, rss) = start_up(client, agents, scratch, &id, &cache, None).await?;
        results.cold.push(t);
        results.cold_rss_kib.push(rss);
    }
    for i in 0..sizes.compiling_starts {
        let cache = scratch.join(&format!("cache-compiling-{i}"));
        let id = format!("bench-compiling-{i}");
        let bare = Some(lab.bare_plugins.as_path());
        let (t, rss) = start_up(client, agents, scratch, &id, &cache, bare).await?;
        results.compiling.push(t);
        results.compiling_rss_kib.push(rss);
    }
    for i in 0..sizes.warm_starts {
        let id = format!("bench-warm-{i}");
        let (t, rss) = start_up(client, agents, scratch, &id, &lab.warm_cache, None).await?;
        results.warm.push(t);
        results.warm_rss_kib.push(rss);
    }
    Ok(())
}

/// How long an agent started runs before its idle RSS is read: as
/// [`idle_rss`] waits.
const SETTLE: Duration = Duration::from_millis(500);

/// Time from spawning an agent (on `plugins`, else its own plugin
/// directory) to its `SET maid:alive:<id>` (it has loaded its plugins,
/// subscribed and registered), and its RSS in KiB [`SETTLE`] after.
async fn start_up(
    client: &redis::Client,
    agents: &AgentSetup,
    scratch: &Scratch,
    id: &str,
    cache: &Path,
    plugins: Option<&Path>,
) -> anyhow::Result<(Duration, u64)> {
    let mut pubsub = client.get_async_pubsub().await?;
    pubsub
        .subscribe(format!("__keyspace@0__:maid:alive:{id}"))
        .await?;
    let mut events = pubsub.into_on_message();
    let started = Instant::now();
    let mut proc = Proc::spawn(
        id,
        &mut agents.command(id, TOPIC_START, cache, plugins),
        scratch.join(&format!("{id}.log")),
    )?;
    loop {
        match tokio::time::timeout(Duration::from_millis(200), events.next()).await {
            Ok(Some(_)) => {
                let ready = started.elapsed();
                tokio::time::sleep(SETTLE).await;
                proc.check_alive()?;
                return Ok((ready, rss_kib(proc.pid())));
            }
            Ok(None) => bail!("keyspace subscription closed"),
            Err(_) => {
                proc.check_alive()?;
                if started.elapsed() > READY_TIMEOUT {
                    bail!(
                        "{id} not ready after {READY_TIMEOUT:?}:\n{}",
                        proc.log_tail()
                    );
                }
            }
        }
    }
}

/// Each responder's RSS once started and settled, all of it and its
/// anonymous part.
pub(super) async fn idle_rss(responders: &mut [Responder]) {
    tokio::time::sleep(SETTLE).await;
    for r in responders {
        r.measured.rss_idle_kib = rss_kib(r.proc.pid());
        r.measured.rss_idle_anon_kib = rss_anon_kib(r.proc.pid());
    }
}

/// Unmeasured round trips to each responder, so that the measured ones
/// find every path warm.
pub(super) async fn warm_up(
    master: &mut Master,
    responders: &mut [Responder],
    sizes: &Sizes,
) -> anyhow::Result<()> {
    let ping = json!([]);
    stage(&format!("warm-up: {} round trips each", sizes.warmup));
    for r in responders {
        master.watch = Some((r.proc.name.clone(), r.proc.pid()));
        for _ in 0..sizes.warmup.min(r.round_trips) {
            master
                .round_trip(r.topic, "test.ping", &ping, &r.target, 1)
                .await?;
        }
    }
    Ok(())
}

/// Block `block` of `sizes.blocks`: each responder's share of the
/// sequential round trips, then of the throughput run.
pub(super) async fn block(
    master: &mut Master,
    responders: &mut [Responder],
    metrics_port: Option<u16>,
    sizes: &Sizes,
    block: usize,
    results: &mut Results,
) -> anyhow::Result<()> {
    stage(&format!(
        "block {}/{}: sequential round trips, then {} jobs in flight",
        block + 1,
        sizes.blocks,
        sizes.in_flight
    ));
    let watch = metrics_port.filter(|_| responders.iter().any(|r| r.name == "maid"));
    sequential(master, responders, watch, sizes, block, results).await?;
    for r in responders {
        throughput(
            master,
            r,
            share(r.jobs, sizes.blocks, block),
            sizes.in_flight,
        )
        .await?;
    }
    Ok(())
}

/// A block's sequential round trips, in [`round_trip_order`]; with
/// `watch`, the maid agent's own timings over them from its `/metrics`.
async fn sequential(
    master: &mut Master,
    responders: &mut [Responder],
    watch: Option<u16>,
    sizes: &Sizes,
    block: usize,
    results: &mut Results,
) -> anyhow::Result<()> {
    let ping = json!([]);
    let before = match watch {
        Some(port) => scrape(port).await,
        None => HashMap::new(),
    };
    for i in round_trip_order(responders, sizes.blocks, block) {
        let r = &mut responders[i];
        master.watch = Some((r.proc.name.clone(), r.proc.pid()));
        let t = master
            .round_trip(r.topic, "test.ping", &ping, &r.target, 1)
            .await?;
        r.measured.latencies.push(t.all);
        r.measured.pings.push(t.pings);
    }
    if let Some(port) = watch {
        let after = scrape(port).await;
        results.arrival_to_ping.add(&before, &after, PING_LATENCY);
        results.ping_in_runtime.add(&before, &after, PING_DURATION);
    }
    Ok(())
}

/// The order of a block's round trips, as indices into `responders`.
///
/// raw's and maid's round trips alternate one by one, each first in
/// every other pair, so the machine's drift within a block reaches both
/// alike. The seed's come after: each of its jobs forks a process that
/// may still be exiting when its return is in.
fn round_trip_order(responders: &[Responder], blocks: usize, block: usize) -> Vec<usize> {
    let (seed, paired): (Vec<usize>, Vec<usize>) =
        (0..responders.len()).partition(|&i| responders[i].name == "seed");
    let turns = |i: usize| share(responders[i].round_trips, blocks, block);
    let rounds = paired.iter().map(|&i| turns(i)).max().unwrap_or(0);
    let mut order = Vec::with_capacity(rounds * paired.len());
    for round in 0..rounds {
        for k in 0..paired.len() {
            let i = paired[(k + round) % paired.len()];
            if round < turns(i) {
                order.push(i);
            }
        }
    }
    for &i in &seed {
        order.extend(std::iter::repeat_n(i, turns(i)));
    }
    order
}

/// Block `block`'s share of `total` split into `blocks`.
fn share(total: usize, blocks: usize, block: usize) -> usize {
    total / blocks + usize::from(block < total % blocks)
}

/// `n` jobs to one responder with `in_flight` of them out at once: the
/// time, the responder's and the master's CPU, and its peak RSS.
async fn throughput(
    master: &mut Master,
    r: &mut Responder,
    n: usize,
    in_flight: usize,
) -> anyhow::Result<()> {
    master.watch = Some((r.proc.name.clone(), r.proc.pid()));
    let pid = r.proc.pid();
    let me = std::process::id() as i32;
    let cpu = cpu_ticks(pid);
    let master_cpu = cpu_ticks(me);
    let sampler = RssSampler::start(pid);
    let took = master
        .flood(r.topic, "test.ping", &r.target, n, in_flight)
        .await;
    let peak = sampler.finish();
    let took = took?;
    r.proc.check_alive()?;
    let m = &mut r.measured;
    m.cpu_ticks += cpu_ticks(pid).saturating_sub(cpu);
    m.master_ticks += cpu_ticks(me).saturating_sub(master_cpu);
    m.flood_jobs += n;
    m.flood_time += took;
    m.rss_peak_kib = m.rss_peak_kib.max(peak);
    Ok(())
}

/// Each responder's RSS a second after the load.
pub(super) async fn after_load_rss(responders: &mut [Responder]) {
    tokio::time::sleep(Duration::from_secs(1)).await;
    for r in responders {
        r.measured.rss_after_kib = rss_kib(r.proc.pid());
    }
}

/// `cmd.run 'true'` on the maid agent, each round trip paired with direct
/// spawns of `true` and `sh -c true`; with `--agent-metrics`, the call's
/// time inside the agent.
pub(super) async fn cmd_runs(
    master: &mut Master,
    responders: &[Responder],
    metrics_port: Option<u16>,
    tgt_type: TgtType,
    sizes: &Sizes,
    results: &mut Results,
) -> anyhow::Result<()> {
    stage(&format!(
        "cmd.run 'true': {} round trips, each paired with spawning `true` directly",
        sizes.cmd_runs
    ));
    let truth = json!(["true"]);
    let maid = Target::new(tgt_type, &["maid".to_string()]);
    master.watch = responders
        .iter()
        .find(|r| r.name == "maid")
        .map(|r| (r.proc.name.clone(), r.proc.pid()));
    for _ in 0..sizes.warmup.min(20) {
        master
            .round_trip(TOPIC_MAID, "cmd.run", &truth, &maid, 1)
            .await?;
    }
    let before = match metrics_port {
        Some(port) => scrape(port).await,
        None => HashMap::new(),
    };
    for _ in 0..sizes.cmd_runs {
        results.spawn_true.push(spawn_direct(Command::new("true"))?);
        let mut sh = Command::new("/bin/sh");
        sh.args(["-c", "true"]);
        results.spawn_sh.push(spawn_direct(sh)?);
        let t = master
            .round_trip(TOPIC_MAID, "cmd.run", &truth, &maid, 1)
            .await?;
        results.cmd_run.push(t.all);
    }
    if let Some(port) = metrics_port {
        let after = scrape(port).await;
        results.cmd_in_runtime.add(&before, &after, CMD_DURATION);
    }
    Ok(())
}

/// One fan-out fleet: the topic its responders share, a target naming
/// every one of them, and its process.
struct FanOut<'a> {
    topic: &'static str,
    everyone: Target,
    proc: &'a Proc,
}

/// Fan-out: many agents in one process, and as many raw responders in
/// another (the floor) and in a third keeping the protocol, their rounds
/// alternating; each round's CPU on every side.
pub(super) async fn fan_out(
    lab: &mut Lab,
    master: &mut Master,
    tgt_type: TgtType,
    sizes: &Sizes,
    results: &mut Results,
) -> anyhow::Result<()> {
    stage(&format!(
        "fan-out: {} agents in one process (maid-bench fleet), and {} raw responders in each of two others (maid-bench raw --count, with and without --protocol), {} rounds each, alternating",
        sizes.agents, sizes.agents, sizes.fanout_rounds
    ));
    let timeout = READY_TIMEOUT + Duration::from_millis(100 * sizes.agents as u64);
    let (mut fleet, ready) = lab.start_fleet(sizes, timeout).await?;
    results.fleet_ready = ready;
    // The two floors, each in a process of its own: raw responders, and
    // raw responders keeping the protocol.
    let mut raw_fleet = lab
        .start_floor(
            sizes,
            timeout,
            TOPIC_RAW_FLEET,
            "rawfleet-",
            false,
            "raw-fleet.log",
        )
        .await?;
    let mut protocol_fleet = lab
        .start_floor(
            sizes,
            timeout,
            TOPIC_PROTOCOL_FLEET,
            "protofleet-",
            true,
            "protocol-fleet.log",
        )
        .await?;
    // Every agent registers right after it subscribes; let that settle.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let fleets = [
        FanOut {
            topic: TOPIC_RAW_FLEET,
            everyone: everyone(tgt_type, "rawfleet-", sizes.agents),
            proc: &raw_fleet,
        },
        FanOut {
            topic: TOPIC_FLEET,
            everyone: everyone(tgt_type, "fleet-", sizes.agents),
            proc: &fleet,
        },
        FanOut {
            topic: TOPIC_PROTOCOL_FLEET,
            everyone: everyone(tgt_type, "protofleet-", sizes.agents),
            proc: &protocol_fleet,
        },
    ];
    fan_out_rounds(master, &fleets, lab.redis_server.pid(), sizes, results).await?;
    raw_fleet.check_alive()?;
    fleet.check_alive()?;
    protocol_fleet.check_alive()?;
    results.fleet_rss_kib = rss_kib(fleet.pid());
    drop(fleet);
    drop(raw_fleet);
    drop(protocol_fleet);
    Ok(())
}

/// Two unmeasured rounds to each fleet, then `sizes.fanout_rounds`
/// measured ones to each in turn, each with its CPU counted to the last
/// reply and to the end of a 50 ms pause after it.
async fn fan_out_rounds(
    master: &mut Master,
    fleets: &[FanOut<'_>; 3],
    redis_pid: i32,
    sizes: &Sizes,
    results: &mut Results,
) -> anyhow::Result<()> {
    let ping = json!([]);
    for f in fleets {
        master.watch = Some((f.proc.name.clone(), f.proc.pid()));
        for _ in 0..2 {
            master
                .round_trip(f.topic, "test.ping", &ping, &f.everyone, sizes.agents)
                .await?;
        }
    }
    for _ in 0..sizes.fanout_rounds {
        for (i, f) in fleets.iter().enumerate() {
            let (topic, everyone, proc) = (f.topic, &f.everyone, f.proc);
            master.watch = Some((proc.name.clone(), proc.pid()));
            let before = RoundCpu::sample(proc.pid(), redis_pid);
            let t = master
                .round_trip(topic, "test.ping", &ping, everyone, sizes.agents)
                .await?;
            let replied = RoundCpu::sample(proc.pid(), redis_pid);
            results.in_round[i].add(before, replied);
            match i {
                RAW => results.raw_fanout.push(t.all),
                MAID => {
                    results.fanout.push(t.all);
                    results.fanout_pings.push(t.pings);
                }
                _ => results.protocol_fanout.push(t.all),
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            let settled = RoundCpu::sample(proc.pid(), redis_pid);
            results.with_pause[i].add(before, settled);
        }
    }
    Ok(())
}
