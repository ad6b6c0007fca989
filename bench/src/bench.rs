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

use std::collections::{HashMap, HashSet};

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use futures_util::{Stream, StreamExt};
use redis::aio::MultiplexedConnection;
use serde::Deserialize;
use serde_json::{Value, json};

use maid_cli::setup::{RuntimeOpts, Setup, modules_in};
use maid_testkit::Proc;
use maid_testkit::redis::{RedisServer, free_port, redis_server_bin};

mod soak;
mod syndic;
pub use soak::{SoakArgs, soak};
pub use syndic::{SyndicArgs, syndic};

/// The seed baseline, compiled in so the binary always runs the repo's copy.
const SEED_PY: &str = include_str!("../seed.py");

/// How long one reply may take before a scenario is declared stuck.
const REPLY_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a process may take to subscribe.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// Master topics, one per responder.
const TOPIC_RAW: &str = "bench-raw";
const TOPIC_MAID: &str = "bench-maid";
const TOPIC_SEED: &str = "bench-seed";
const TOPIC_FLEET: &str = "bench-fleet";
const TOPIC_RAW_FLEET: &str = "bench-raw-fleet";
const TOPIC_PROTOCOL_FLEET: &str = "bench-protocol-fleet";
const TOPIC_START: &str = "bench-start";

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
    /// Agent start-ups with a cold (empty) plugin cache [default: 2; --tiny: 1].
    #[arg(long)]
    pub cold_starts: Option<usize>,
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
struct Sizes {
    round_trips: usize,
    seed_round_trips: usize,
    jobs: usize,
    seed_jobs: usize,
    in_flight: usize,
    blocks: usize,
    agents: usize,
    fanout_rounds: usize,
    cmd_runs: usize,
    fanout_threads: usize,
    calls: usize,
    warm_starts: usize,
    cold_starts: usize,
    warmup: usize,
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
            warmup: if a.tiny { 2 } else { 100 },
        }
    }
}

// ---------------------------------------------------------------------------
// Processes and scratch space
// ---------------------------------------------------------------------------

/// A temporary directory, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> anyhow::Result<Scratch> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or_default();
        let dir =
            std::env::temp_dir().join(format!("maid-bench-{}-{nanos:08x}", std::process::id()));
        std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
        Ok(Scratch(dir))
    }

    fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

// ---------------------------------------------------------------------------
// /proc
// ---------------------------------------------------------------------------

/// Clock ticks per second of `/proc/<pid>/stat`.
fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|t| *t > 0.0)
        .unwrap_or(100.0)
}

/// User + system CPU of `pid` and its reaped children, in ticks.
fn cpu_ticks(pid: i32) -> u64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0;
    };
    let Some(close) = stat.rfind(')') else {
        return 0;
    };
    // Fields after the command name start at field 3 (state); utime,
    // stime, cutime and cstime are fields 14 to 17.
    let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
    (11..=14)
        .filter_map(|i| fields.get(i)?.parse::<u64>().ok())
        .sum()
}

/// Resident set size of `pid`, in KiB.
fn rss_kib(pid: i32) -> u64 {
    status_kib(pid, "VmRSS:")
}

/// The anonymous part of a process's RSS: its own heap, stacks and copies,
/// without the pages of its binary and of mapped files (which depend on how
/// the page cache holds those files, and are shared).
fn rss_anon_kib(pid: i32) -> u64 {
    status_kib(pid, "RssAnon:")
}

/// A `kB` field of `/proc/<pid>/status`.
fn status_kib(pid: i32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))?
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

/// Samples a process's RSS every few milliseconds until stopped; the peak.
struct RssSampler {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<u64>,
}

impl RssSampler {
    fn start(pid: i32) -> RssSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut peak = 0;
            while !flag.load(Ordering::Relaxed) {
                peak = peak.max(rss_kib(pid));
                std::thread::sleep(Duration::from_millis(5));
            }
            peak.max(rss_kib(pid))
        });
        RssSampler { stop, thread }
    }

    fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or(0)
    }
}

// ---------------------------------------------------------------------------
// The master
// ---------------------------------------------------------------------------

/// What the master reads of a reply.
#[derive(Deserialize)]
struct ReplyHead {
    #[serde(rename = "type")]
    kind: String,
    jid: String,
    #[serde(default)]
    sub_ip: String,
    #[serde(default)]
    retcode: i64,
    #[serde(default, rename = "return")]
    ret: Value,
    #[serde(default)]
    reason: String,
    /// A return's minion (a syndic maid's differs from `sub_ip`).
    #[serde(default)]
    id: String,
    #[serde(default, rename = "match")]
    matched: bool,
    /// A syndic maid's PING: whom it answers for.
    #[serde(default)]
    minions: Option<Vec<String>>,
}

/// A failed return or a reject: the benchmark measures nothing but success.
fn refused(head: &ReplyHead) -> anyhow::Error {
    if head.kind == "reject" {
        anyhow::anyhow!("{} rejected job {}: {}", head.sub_ip, head.jid, head.reason)
    } else {
        anyhow::anyhow!(
            "{} returned retcode {} for job {}: {}",
            head.sub_ip,
            head.retcode,
            head.jid,
            head.ret
        )
    }
}

/// Whom a job targets.
#[derive(Debug, Clone)]
struct Target {
    tgt: Value,
    tgt_type: &'static str,
}

impl Target {
    /// `--tgt-type glob`: `*`, Salt's default; `list`: exactly `ids`.
    fn new(mode: TgtType, ids: &[String]) -> Target {
        match mode {
            TgtType::Glob => Target {
                tgt: json!("*"),
                tgt_type: "glob",
            },
            TgtType::List => Target {
                tgt: json!(ids.join(",")),
                tgt_type: "list",
            },
        }
    }
}

/// How the benchmark's jobs target.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TgtType {
    /// `tgt: "*"` (glob), as `maid run '*'` sends.
    #[default]
    Glob,
    /// The responders' ids (list): no glob for the agent to compile.
    List,
}

/// One round trip: publish to the last PING, publish to the last reply.
#[derive(Debug, Clone, Copy)]
struct Trip {
    pings: Duration,
    all: Duration,
}

type Replies = Pin<Box<dyn Stream<Item = redis::Msg>>>;

/// Whether `pid` is running (not gone, not a zombie).
fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let state = s[s.rfind(')')? + 1..]
                .split_whitespace()
                .next()?
                .to_string();
            Some(state != "Z" && state != "X")
        })
        .unwrap_or(false)
}

/// The next reply, or `None` at `deadline`; an error as soon as the
/// watched process is gone, rather than at the deadline.
async fn next_reply(
    replies: &mut Replies,
    watch: &Option<(String, i32)>,
    deadline: tokio::time::Instant,
) -> anyhow::Result<Option<redis::Msg>> {
    loop {
        let slice = (tokio::time::Instant::now() + Duration::from_millis(500)).min(deadline);
        match tokio::time::timeout_at(slice, replies.next()).await {
            Ok(Some(m)) => return Ok(Some(m)),
            Ok(None) => bail!("the reply subscription closed"),
            Err(_) => {
                if let Some((name, pid)) = watch
                    && !running(*pid)
                {
                    bail!("{name} (pid {pid}) exited while the benchmark waited for it");
                }
                if slice >= deadline {
                    return Ok(None);
                }
            }
        }
    }
}

/// Publishes jobs and collects replies on one reply topic.
struct Master {
    conn: MultiplexedConnection,
    replies: Replies,
    /// The process under test: waiting for replies fails fast when it dies.
    watch: Option<(String, i32)>,
    reply_topic: String,
    prefix: String,
    seq: u64,
}

async fn publish(
    conn: &mut MultiplexedConnection,
    topic: &str,
    payload: &str,
) -> anyhow::Result<()> {
    redis::cmd("PUBLISH")
        .arg(topic)
        .arg(payload)
        .query_async::<i64>(conn)
        .await?;
    Ok(())
}

impl Master {
    async fn connect(client: &redis::Client) -> anyhow::Result<Master> {
        let conn = client.get_multiplexed_async_connection().await?;
        let reply_topic = format!("bench.reply.{}", std::process::id());
        let mut pubsub = client.get_async_pubsub().await?;
        pubsub.subscribe(&reply_topic).await?;
        Ok(Master {
            conn,
            replies: Box::pin(pubsub.into_on_message()),
            watch: None,
            reply_topic,
            prefix: format!("bench{}-", std::process::id()),
            seq: 0,
        })
    }

    /// A new job: its jid and its JSON.
    fn job(&mut self, fun: &str, arg: &Value, target: &Target) -> (String, String) {
        self.seq += 1;
        let jid = format!("{}{}", self.prefix, self.seq);
        let job = json!({
            "jid": jid,
            "tempTopic": self.reply_topic,
            "fun": fun,
            "arg": arg,
            "tgt": target.tgt,
            "tgt_type": target.tgt_type,
            "timeout": REPLY_TIMEOUT.as_secs(),
            "user": "bench",
        });
        (jid, job.to_string())
    }

    /// Publish one job on `topic` and wait until `expect` responders have
    /// both pinged and returned: the time from publish to the last PING and
    /// to the last reply.
    async fn round_trip(
        &mut self,
        topic: &str,
        fun: &str,
        arg: &Value,
        target: &Target,
        expect: usize,
    ) -> anyhow::Result<Trip> {
        let (jid, payload) = self.job(fun, arg, target);
        let mut conn = self.conn.clone();
        let replies = &mut self.replies;
        let watch = &self.watch;
        let started = Instant::now();
        let send = publish(&mut conn, topic, &payload);
        let collect = async {
            let mut pings = HashSet::new();
            let mut returns = HashSet::new();
            let mut pinged = Duration::ZERO;
            let deadline = tokio::time::Instant::now() + REPLY_TIMEOUT;
            while pings.len() < expect || returns.len() < expect {
                let msg = match next_reply(replies, watch, deadline).await? {
                    Some(m) => m,
                    None => bail!(
                        "job {jid} ({fun} on {topic}): {}/{expect} pings and {}/{expect} returns after {REPLY_TIMEOUT:?}",
                        pings.len(),
                        returns.len()
                    ),
                };
                let Ok(head) = serde_json::from_slice::<ReplyHead>(msg.get_payload_bytes()) else {
                    continue;
                };
                if head.jid != jid {
                    continue;
                }
                match head.kind.as_str() {
                    "ping" => {
                        pings.insert(head.sub_ip);
                        if pings.len() == expect {
                            pinged = started.elapsed();
                        }
                    }
                    "return" if head.retcode == 0 => {
                        returns.insert(head.sub_ip);
                    }
                    _ => return Err(refused(&head)),
                }
            }
            Ok(Trip {
                pings: pinged,
                all: started.elapsed(),
            })
        };
        let (sent, elapsed) = tokio::join!(send, collect);
        sent?;
        elapsed
    }

    /// Send `total` jobs to `topic`, keeping `in_flight` of them out at
    /// once; how long until every one both pinged and returned.
    async fn flood(
        &mut self,
        topic: &str,
        fun: &str,
        target: &Target,
        total: usize,
        in_flight: usize,
    ) -> anyhow::Result<Duration> {
        let arg = json!([]);
        let mut out: HashMap<String, u8> = HashMap::with_capacity(in_flight * 2);
        let mut sent = 0;
        let mut done = 0;
        let started = Instant::now();
        while sent < total.min(in_flight) {
            self.spawn_publish(topic, fun, &arg, target, &mut out);
            sent += 1;
        }
        while done < total {
            let deadline = tokio::time::Instant::now() + REPLY_TIMEOUT;
            let msg = match next_reply(&mut self.replies, &self.watch, deadline).await? {
                Some(m) => m,
                None => bail!(
                    "{fun} on {topic}: {done}/{total} jobs done, nothing came back for {REPLY_TIMEOUT:?}"
                ),
            };
            let Ok(head) = serde_json::from_slice::<ReplyHead>(msg.get_payload_bytes()) else {
                continue;
            };
            let Some(seen) = out.get_mut(&head.jid) else {
                continue;
            };
            match head.kind.as_str() {
                "ping" => *seen |= 1,
                "return" if head.retcode == 0 => *seen |= 2,
                _ => return Err(refused(&head)),
            }
            if *seen == 3 {
                out.remove(&head.jid);
                done += 1;
                if sent < total {
                    self.spawn_publish(topic, fun, &arg, target, &mut out);
                    sent += 1;
                }
            }
        }
        Ok(started.elapsed())
    }

    /// Publish without waiting in the receive loop: the multiplexed
    /// connection pipelines what the spawned tasks send.
    fn spawn_publish(
        &mut self,
        topic: &str,
        fun: &str,
        arg: &Value,
        target: &Target,
        out: &mut HashMap<String, u8>,
    ) {
        let (jid, payload) = self.job(fun, arg, target);
        out.insert(jid, 0);
        let mut conn = self.conn.clone();
        let topic = topic.to_string();
        tokio::spawn(async move {
            if let Err(e) = publish(&mut conn, &topic, &payload).await {
                eprintln!("maid-bench: publish failed: {e:#}");
            }
        });
    }
}

/// `PUBSUB NUMSUB topic` reaches `n`; `proc` must stay alive meanwhile.
async fn wait_subscribed(
    conn: &mut MultiplexedConnection,
    topic: &str,
    n: usize,
    proc: &mut Proc,
    timeout: Duration,
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    loop {
        proc.check_alive()?;
        let counts: Vec<(String, usize)> = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(topic)
            .query_async(conn)
            .await?;
        let have = counts.first().map(|(_, c)| *c).unwrap_or(0);
        if have >= n {
            return Ok(started.elapsed());
        }
        if started.elapsed() > timeout {
            bail!(
                "{}: {have}/{n} subscribed to {topic} after {timeout:?}; the end of its log:\n{}",
                proc.name,
                proc.log_tail()
            );
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The agent `id` registered (subscribed first) with every function in
/// `needed`: a plugin that failed to load must not pass as a fast agent.
async fn check_functions(
    conn: &mut MultiplexedConnection,
    id: &str,
    proc: &mut Proc,
    needed: &[&str],
) -> anyhow::Result<()> {
    let started = Instant::now();
    loop {
        proc.check_alive()?;
        let entry: Option<String> = redis::cmd("HGET")
            .arg(maid_agent::protocol::REGISTRY_KEY)
            .arg(id)
            .query_async(conn)
            .await?;
        if let Some(json) = entry {
            let reg: Value = serde_json::from_str(&json)?;
            let functions: Vec<&str> = reg["functions"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let missing: Vec<&&str> = needed.iter().filter(|f| !functions.contains(f)).collect();
            if missing.is_empty() {
                return Ok(());
            }
            bail!(
                "{id} is missing {missing:?} (a plugin did not load; rebuild them with `./dev build`); the end of its log:\n{}",
                proc.log_tail()
            );
        }
        if started.elapsed() > READY_TIMEOUT {
            bail!("{id} never registered:\n{}", proc.log_tail());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

// ---------------------------------------------------------------------------
// Statistics and formatting
// ---------------------------------------------------------------------------

/// Nearest-rank percentile of sorted samples.
fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn sorted(mut v: Vec<Duration>) -> Vec<Duration> {
    v.sort();
    v
}

fn fmt_dur(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 1000.0 {
        format!("{us:.0} µs")
    } else if us < 1e6 {
        format!("{:.2} ms", us / 1e3)
    } else {
        format!("{:.2} s", us / 1e6)
    }
}

fn fmt_signed_us(us: f64) -> String {
    if us.abs() < 1000.0 {
        format!("{us:.0} µs")
    } else {
        format!("{:.2} ms", us / 1e3)
    }
}

fn fmt_count(n: f64) -> String {
    let digits = format!("{:.0}", n.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

fn fmt_mb(kib: u64) -> String {
    format!("{:.1} MB", kib as f64 * 1024.0 / 1e6)
}

fn fmt_ratio(r: f64) -> String {
    if r >= 10.0 {
        format!("{r:.0}")
    } else {
        format!("{r:.2}")
    }
}

/// A table, rendered aligned for the terminal and as Markdown.
struct Table {
    title: String,
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    fn new(title: &str, header: &[&str]) -> Table {
        Table {
            title: title.into(),
            header: header.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    fn text(&self) -> String {
        let width = |i: usize| {
            std::iter::once(&self.header)
                .chain(&self.rows)
                .map(|r| r.get(i).map(|c| c.chars().count()).unwrap_or(0))
                .max()
                .unwrap_or(0)
        };
        let widths: Vec<usize> = (0..self.header.len()).map(width).collect();
        let line = |cells: &Vec<String>| {
            let mut s = String::new();
            for (i, w) in widths.iter().enumerate() {
                let cell = cells.get(i).map(String::as_str).unwrap_or("");
                let pad = w - cell.chars().count();
                if i == 0 {
                    s.push_str(cell);
                    s.push_str(&" ".repeat(pad));
                } else {
                    s.push_str("  ");
                    s.push_str(&" ".repeat(pad));
                    s.push_str(cell);
                }
            }
            s.trim_end().to_string() + "\n"
        };
        let mut out = format!("{}\n", self.title);
        out.push_str(&line(&self.header));
        let total: usize = widths.iter().sum::<usize>() + 2 * (widths.len() - 1);
        out.push_str(&"-".repeat(total));
        out.push('\n');
        for r in &self.rows {
            out.push_str(&line(r));
        }
        out
    }

    fn markdown(&self) -> String {
        let mut out = format!("**{}**\n\n", self.title);
        out.push_str(&format!("| {} |\n", self.header.join(" | ")));
        let rule: Vec<&str> = (0..self.header.len())
            .map(|i| if i == 0 { "---" } else { "---:" })
            .collect();
        out.push_str(&format!("|{}|\n", rule.join("|")));
        for r in &self.rows {
            out.push_str(&format!("| {} |\n", r.join(" | ")));
        }
        out
    }
}

/// The machine the run happened on.
fn machine(redis_server: &Path) -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "unknown CPU".into());
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            let kib: u64 = m
                .lines()
                .find(|l| l.starts_with("MemTotal:"))?
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            Some(format!("{:.1} GiB RAM", kib as f64 / (1 << 20) as f64))
        })
        .unwrap_or_default();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let redis = Command::new(redis_server)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| {
            s.split_whitespace()
                .find(|w| w.starts_with("v="))
                .map(|v| format!(", redis-server {}", &v[2..]))
        })
        .unwrap_or_default();
    format!("{cpus} vCPU {model}, {mem}, Linux {kernel}{redis}")
}

// ---------------------------------------------------------------------------
// The scenarios
// ---------------------------------------------------------------------------

/// What one responder measured.
#[derive(Default)]
struct Measured {
    latencies: Vec<Duration>,
    pings: Vec<Duration>,
    flood_jobs: usize,
    flood_time: Duration,
    cpu_ticks: u64,
    /// This process's (the master's) CPU over the same runs.
    master_ticks: u64,
    rss_idle_kib: u64,
    rss_idle_anon_kib: u64,
    rss_after_kib: u64,
    rss_peak_kib: u64,
}

impl Measured {
    fn p(&self, pct: f64) -> Duration {
        percentile(&sorted(self.latencies.clone()), pct)
    }

    fn ping_p(&self, pct: f64) -> Duration {
        percentile(&sorted(self.pings.clone()), pct)
    }

    fn throughput(&self) -> f64 {
        self.flood_jobs as f64 / self.flood_time.as_secs_f64().max(1e-9)
    }

    fn cpu_per_job(&self, ticks_per_sec: f64) -> Duration {
        Duration::from_secs_f64(
            self.cpu_ticks as f64 / ticks_per_sec / self.flood_jobs.max(1) as f64,
        )
    }

    fn master_cpu_per_job(&self, ticks_per_sec: f64) -> Duration {
        Duration::from_secs_f64(
            self.master_ticks as f64 / ticks_per_sec / self.flood_jobs.max(1) as f64,
        )
    }
}

/// A responder under test.
struct Responder {
    name: &'static str,
    topic: &'static str,
    target: Target,
    proc: Proc,
    round_trips: usize,
    jobs: usize,
    measured: Measured,
}

/// Where the `maid` agents get their config and plugins.
struct AgentSetup {
    exe: PathBuf,
    config: PathBuf,
    plugin_dir: PathBuf,
}

impl AgentSetup {
    fn command(&self, id: &str, topic: &str, cache: &Path) -> Command {
        self.command_with(id, topic, cache, &self.config)
    }

    fn command_with(&self, id: &str, topic: &str, cache: &Path, config: &Path) -> Command {
        let mut cmd = Command::new(&self.exe);
        cmd.args(["agent", "--id", id, "--master-topic", topic, "-c"])
            .arg(config)
            .arg("--plugin-dir")
            .arg(&self.plugin_dir)
            .arg("--cache-dir")
            .arg(cache);
        cmd
    }
}

/// The agents' config: every default, except the grants `cmd.run 'true'`
/// needs, room for all the jobs in flight, and unsigned jobs (the bench's
/// master sends them, as the raw and seed baselines do).
fn agent_config(url: &str, in_flight: usize, http: Option<u16>) -> String {
    let http = http
        .map(|port| format!("http = \"127.0.0.1:{port}\"\n"))
        .unwrap_or_default();
    format!(
        "master_topics = [\"{TOPIC_MAID}\"]\n\n\
         [redis]\nurl = \"{url}\"\n\n\
         [agent]\nconcurrency = {in_flight}\n{http}\n\
         [security]\nrequire_signed = false\n\n\
         [plugins.cmd]\nexec = [\"*\"]\nshell = true\nenv = [\"PATH\"]\n"
    )
}

/// The maid agent's counters, from its `/metrics` (Prometheus text).
async fn scrape(port: u16) -> HashMap<String, f64> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let read = async {
        let mut s = tokio::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port)).await?;
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            .await?;
        let mut text = String::new();
        s.read_to_string(&mut text).await?;
        std::io::Result::Ok(text)
    };
    let text = match tokio::time::timeout(Duration::from_secs(5), read).await {
        Ok(Ok(t)) => t,
        _ => return HashMap::new(),
    };
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (k, v) = l.rsplit_once(' ')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

/// Sum and count of a Prometheus histogram, summed over scrapes.
#[derive(Debug, Default, Clone, Copy)]
struct MeanOf {
    sum: f64,
    count: f64,
}

impl MeanOf {
    /// Add what `name` (a histogram, labels included) grew by between two
    /// scrapes.
    fn add(&mut self, before: &HashMap<String, f64>, after: &HashMap<String, f64>, name: &str) {
        let (base, labels) = name
            .split_once('{')
            .map_or((name, String::new()), |(b, l)| (b, format!("{{{l}")));
        let get = |m: &HashMap<String, f64>, suffix: &str| {
            m.get(&format!("{base}_{suffix}{labels}"))
                .copied()
                .unwrap_or(0.0)
        };
        self.sum += get(after, "sum") - get(before, "sum");
        self.count += get(after, "count") - get(before, "count");
    }

    fn mean(&self) -> Option<Duration> {
        (self.count > 0.0).then(|| Duration::from_secs_f64(self.sum / self.count))
    }
}

const PING_LATENCY: &str = "maid_ping_latency_seconds";
const PING_DURATION: &str = "maid_job_duration_seconds{fun=\"test.ping\"}";
const CMD_DURATION: &str = "maid_job_duration_seconds{fun=\"cmd.run\"}";

/// Time from spawning an agent to its `SET maid:alive:<id>` (it has
/// loaded its plugins, subscribed and registered).
async fn start_up(
    client: &redis::Client,
    agents: &AgentSetup,
    scratch: &Scratch,
    id: &str,
    cache: &Path,
) -> anyhow::Result<Duration> {
    let mut pubsub = client.get_async_pubsub().await?;
    pubsub
        .subscribe(format!("__keyspace@0__:maid:alive:{id}"))
        .await?;
    let mut events = pubsub.into_on_message();
    let started = Instant::now();
    let mut proc = Proc::spawn(
        id,
        &mut agents.command(id, TOPIC_START, cache),
        scratch.join(&format!("{id}.log")),
    )?;
    loop {
        match tokio::time::timeout(Duration::from_millis(200), events.next()).await {
            Ok(Some(_)) => return Ok(started.elapsed()),
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

/// Make sure `import redis` works for the seed, installing redis-py with
/// pip when it does not. `Err` says why the seed cannot run.
fn ensure_redis_py(python: &Path) -> Result<(), String> {
    let importable = || {
        Command::new(python)
            .args(["-c", "import redis"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
    };
    match importable() {
        Ok(true) => return Ok(()),
        Ok(false) => {}
        Err(e) => return Err(format!("cannot run {}: {e}", python.display())),
    }
    eprintln!(
        "==> the seed needs redis-py: running `{} -m pip install redis`",
        python.display()
    );
    let installed = Command::new(python)
        .args(["-m", "pip", "install", "--quiet", "redis"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status();
    match (installed, importable()) {
        (_, Ok(true)) => Ok(()),
        (Ok(s), _) => Err(format!(
            "redis-py is not installed and `{} -m pip install redis` failed ({s}); \
             install it (pip install redis) or pass --no-seed",
            python.display()
        )),
        (Err(e), _) => Err(format!(
            "redis-py is not installed and pip could not run ({e}); \
             install it (pip install redis) or pass --no-seed"
        )),
    }
}

fn stage(what: &str) {
    eprintln!("==> {what}");
}

/// One fleet's fan-out rounds, summed: the CPU that its process,
/// redis-server and the master (this process) used from each round's
/// publish to a point after it. Counted to the round's last reply,
/// it bounds the round: the three share the machine's cores and
/// redis-server runs on one, so no round can be shorter than that CPU
/// spread over the cores, nor than redis-server's own, whatever the
/// responders do. CPU is read in clock ticks (10 ms), so the means want
/// many rounds.
#[derive(Debug, Default, Clone, Copy)]
struct RoundCpu {
    rounds: u32,
    /// Clock ticks (`/proc/<pid>/stat`), each process's.
    fleet: u64,
    redis: u64,
    master: u64,
}

impl RoundCpu {
    /// The ticks of the fleet's process, redis-server and this process.
    fn sample(fleet: i32, redis: i32) -> [u64; 3] {
        let master = i32::try_from(std::process::id()).unwrap_or_default();
        [cpu_ticks(fleet), cpu_ticks(redis), cpu_ticks(master)]
    }

    fn add(&mut self, before: [u64; 3], after: [u64; 3]) {
        self.rounds += 1;
        self.fleet += after[0].saturating_sub(before[0]);
        self.redis += after[1].saturating_sub(before[1]);
        self.master += after[2].saturating_sub(before[2]);
    }

    /// Means per round of the CPU of the fleet, redis-server and the
    /// master, with `ticks` clock ticks a second.
    fn means(&self, ticks: f64) -> [Duration; 3] {
        let n = self.rounds.max(1);
        let cpu = |t: u64| Duration::from_secs_f64(t as f64 / ticks) / n;
        [cpu(self.fleet), cpu(self.redis), cpu(self.master)]
    }

    /// The least a round can take here: all three's CPU spread over every
    /// core, and never less than redis-server's own, which runs on one.
    fn least(&self, ticks: f64, cpus: usize) -> Duration {
        let [fleet, redis, master] = self.means(ticks);
        let spread = (fleet + redis + master) / u32::try_from(cpus.max(1)).unwrap_or(u32::MAX);
        spread.max(redis)
    }
}

/// The fan-out fleets, as `Results::in_round` and `with_pause` index them.
const RAW: usize = 0;
const MAID: usize = 1;
const PROTOCOL: usize = 2;

/// Everything measured, for the tables.
#[derive(Default)]
struct Results {
    responders: Vec<(&'static str, Option<Measured>)>,
    seed_skipped: Option<String>,
    ticks: f64,
    cold: Vec<Duration>,
    warm: Vec<Duration>,
    plugins: usize,
    cmd_run: Vec<Duration>,
    /// `test.ping` through `Runtime::call` in this process.
    calls: Vec<Duration>,
    /// `cmd.run 'true'` through `Runtime::call` in this process.
    cmd_calls: Vec<Duration>,
    spawn_true: Vec<Duration>,
    spawn_sh: Vec<Duration>,
    agents: usize,
    fanout: Vec<Duration>,
    fanout_pings: Vec<Duration>,
    /// The same fan-out to as many raw responders (the floor).
    raw_fanout: Vec<Duration>,
    /// And to as many raw responders that send what the protocol asks
    /// (`maid-bench raw --protocol`).
    protocol_fanout: Vec<Duration>,
    fleet_ready: Duration,
    /// Each fleet's rounds (raw, maid, protocol), their CPU counted to
    /// the last reply: what bounds a round.
    in_round: [RoundCpu; 3],
    /// The same rounds, their CPU counted to the end of the 50 ms pause
    /// after each: work left over after the last reply counts too.
    with_pause: [RoundCpu; 3],
    /// The CPUs this machine has.
    cpus: usize,
    /// The maid agent's own means (`--agent-metrics`).
    arrival_to_ping: MeanOf,
    ping_in_runtime: MeanOf,
    cmd_in_runtime: MeanOf,
    agent_metrics: bool,
    tgt_type: TgtType,
    fleet_rss_kib: u64,
    fanout_threads: usize,
    in_flight: usize,
}

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
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let results = rt.block_on(async {
        tokio::select! {
            r = async {
                let mut r = run_all(&args, &sizes, &plugin_dir, modules.len()).await?;
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

/// A plugin runtime in this process, with the measured agent's grants
/// (`cmd.run` needs exec) and the plugins of `plugin_dir`.
async fn in_process_runtime(
    setup: &Setup,
    plugin_dir: &Path,
) -> anyhow::Result<std::sync::Arc<maid_agent::runtime::Runtime>> {
    let agent: maid_config::Config = toml::from_str(&agent_config("redis://unused", 1, None))?;
    let mut config = setup.config.clone();
    config.plugins = agent.plugins;
    let setup = Setup {
        config,
        plugin_dir: setup.plugin_dir.clone(),
        cache_dir: setup.cache_dir.clone(),
    };
    let runtime = setup.runtime(&setup.grains("bench"), &[])?;
    runtime.load_dir(plugin_dir).await?;
    Ok(runtime)
}

/// `fun` with `args` through `runtime`, `n` times after a twentieth as many
/// to warm up: what one call costs with no Redis and no second process (a
/// fresh instance from the pool each time).
async fn in_process_calls(
    runtime: &maid_agent::runtime::Runtime,
    fun: &str,
    args: Vec<Value>,
    n: usize,
) -> anyhow::Result<Vec<Duration>> {
    stage(&format!(
        "{fun} through the plugin runtime in-process: {n} calls"
    ));
    let warmup = (n / 20).max(1);
    let mut times = Vec::with_capacity(n);
    for i in 0..warmup + n {
        let out = runtime
            .call(maid_agent::runtime::CallRequest {
                fun: fun.into(),
                args: args.clone(),
                kwargs: serde_json::Map::new(),
                jid: maid_agent::jid::new_jid(),
                minion_id: "bench".into(),
                user: None,
                timeout: None,
                ..Default::default()
            })
            .await;
        if out.retcode != 0 {
            bail!("{fun} failed in-process: {}", out.ret);
        }
        if i >= warmup {
            times.push(out.duration);
        }
    }
    Ok(times)
}

async fn run_all(
    args: &BenchArgs,
    sizes: &Sizes,
    plugin_dir: &Path,
    plugins: usize,
) -> anyhow::Result<Results> {
    // Declared first, dropped last: every process is gone before the
    // directory is removed.
    let scratch = Scratch::new()?;
    let exe = std::env::current_exe().context("path of the maid-bench binary")?;
    let maid = crate::maid_binary(args.maid.as_deref())?;
    stage("starting a private redis-server");
    // Keyspace events for `SET` on: start-up readiness is the agent's
    // `SET maid:alive:<id>`.
    let redis_server =
        RedisServer::start_with(&["--maxclients", "10000", "--notify-keyspace-events", "K$"]);
    let url = redis_server.url();
    eprintln!("    {url}");
    let client = redis::Client::open(url.as_str())?;
    let mut admin = client.get_multiplexed_async_connection().await?;
    let config = scratch.join("maid.toml");
    std::fs::write(&config, agent_config(&url, sizes.in_flight, None))?;
    // The measured agent's config; with --agent-metrics it also serves
    // /metrics, read around the maid runs.
    let metrics_port = if args.agent_metrics {
        Some(free_port())
    } else {
        None
    };
    let main_config = scratch.join("maid-main.toml");
    std::fs::write(
        &main_config,
        agent_config(&url, sizes.in_flight, metrics_port),
    )?;
    let agents = AgentSetup {
        exe: maid,
        config,
        plugin_dir: plugin_dir.to_path_buf(),
    };

    let mut results = Results {
        responders: Vec::new(),
        seed_skipped: None,
        ticks: clock_ticks(),
        cold: Vec::new(),
        warm: Vec::new(),
        plugins,
        cmd_run: Vec::new(),
        calls: Vec::new(),
        cmd_calls: Vec::new(),
        spawn_true: Vec::new(),
        spawn_sh: Vec::new(),
        agents: sizes.agents,
        fanout: Vec::new(),
        fanout_pings: Vec::new(),
        raw_fanout: Vec::new(),
        protocol_fanout: Vec::new(),
        fleet_ready: Duration::ZERO,
        in_round: [RoundCpu::default(); 3],
        with_pause: [RoundCpu::default(); 3],
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        arrival_to_ping: MeanOf::default(),
        ping_in_runtime: MeanOf::default(),
        cmd_in_runtime: MeanOf::default(),
        agent_metrics: args.agent_metrics,
        tgt_type: args.tgt_type,
        fleet_rss_kib: 0,
        fanout_threads: sizes.fanout_threads,
        in_flight: sizes.in_flight,
    };

    // Start-up: cold caches first; the first one is then the warm cache
    // every later agent uses.
    stage(&format!(
        "agent start-up to ready: {} cold, {} warm ({plugins} plugins)",
        sizes.cold_starts, sizes.warm_starts
    ));
    let warm_cache = scratch.join("cache-0");
    for i in 0..sizes.cold_starts {
        let cache = scratch.join(&format!("cache-{i}"));
        let t = start_up(
            &client,
            &agents,
            &scratch,
            &format!("bench-cold-{i}"),
            &cache,
        )
        .await?;
        results.cold.push(t);
    }
    for i in 0..sizes.warm_starts {
        let t = start_up(
            &client,
            &agents,
            &scratch,
            &format!("bench-warm-{i}"),
            &warm_cache,
        )
        .await?;
        results.warm.push(t);
    }

    // The responders, side by side.
    stage("starting the responders: raw, maid, seed");
    let mut responders = Vec::new();
    let mut raw = Command::new(&exe);
    raw.args(["raw", "--redis", &url, "--topic", TOPIC_RAW, "--id", "raw"]);
    let target = |id: &str| Target::new(args.tgt_type, &[id.to_string()]);
    responders.push(Responder {
        name: "raw",
        topic: TOPIC_RAW,
        target: target("raw"),
        proc: Proc::spawn("raw responder", &mut raw, scratch.join("raw.log"))?,
        round_trips: sizes.round_trips,
        jobs: sizes.jobs,
        measured: Measured::default(),
    });
    responders.push(Responder {
        name: "maid",
        topic: TOPIC_MAID,
        target: target("maid"),
        proc: Proc::spawn(
            "maid agent",
            &mut agents.command_with("maid", TOPIC_MAID, &warm_cache, &main_config),
            scratch.join("maid.log"),
        )?,
        round_trips: sizes.round_trips,
        jobs: sizes.jobs,
        measured: Measured::default(),
    });
    if args.no_seed {
        results.seed_skipped = Some("--no-seed".into());
    } else {
        match ensure_redis_py(&args.python) {
            Ok(()) => {
                let script = scratch.join("seed.py");
                std::fs::write(&script, SEED_PY)?;
                let mut seed = Command::new(&args.python);
                seed.arg(&script)
                    .args(["--redis", &url, "--topic", TOPIC_SEED, "--id", "seed"]);
                responders.push(Responder {
                    name: "seed",
                    topic: TOPIC_SEED,
                    target: target("seed"),
                    proc: Proc::spawn("seed (python)", &mut seed, scratch.join("seed.log"))?,
                    round_trips: sizes.seed_round_trips,
                    jobs: sizes.seed_jobs,
                    measured: Measured::default(),
                });
            }
            Err(why) => {
                eprintln!("maid-bench: seed skipped: {why}");
                results.seed_skipped = Some(why);
            }
        }
    }
    for r in &mut responders {
        wait_subscribed(&mut admin, r.topic, 1, &mut r.proc, READY_TIMEOUT).await?;
    }
    if let Some(r) = responders.iter_mut().find(|r| r.name == "maid") {
        check_functions(&mut admin, "maid", &mut r.proc, &["test.ping", "cmd.run"]).await?;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    for r in &mut responders {
        r.measured.rss_idle_kib = rss_kib(r.proc.pid());
        r.measured.rss_idle_anon_kib = rss_anon_kib(r.proc.pid());
    }

    let mut master = Master::connect(&client).await?;
    let ping = json!([]);
    stage(&format!("warm-up: {} round trips each", sizes.warmup));
    for r in &mut responders {
        master.watch = Some((r.proc.name.clone(), r.proc.pid()));
        for _ in 0..sizes.warmup.min(r.round_trips) {
            master
                .round_trip(r.topic, "test.ping", &ping, &r.target, 1)
                .await?;
        }
    }
    for block in 0..sizes.blocks {
        stage(&format!(
            "block {}/{}: sequential round trips, then {} jobs in flight",
            block + 1,
            sizes.blocks,
            sizes.in_flight
        ));
        // raw's and maid's round trips alternate one by one, each first in
        // every other pair, so the machine's drift within a block reaches
        // both alike. The seed's come after: each of its jobs forks a
        // process that may still be exiting when its return is in.
        let watch = metrics_port.filter(|_| responders.iter().any(|r| r.name == "maid"));
        let before = match watch {
            Some(port) => scrape(port).await,
            None => HashMap::new(),
        };
        let (seed, paired): (Vec<usize>, Vec<usize>) =
            (0..responders.len()).partition(|&i| responders[i].name == "seed");
        let turns = |i: usize| share(responders[i].round_trips, sizes.blocks, block);
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
        for i in order {
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
        for r in &mut responders {
            let n = share(r.jobs, sizes.blocks, block);
            master.watch = Some((r.proc.name.clone(), r.proc.pid()));
            let pid = r.proc.pid();
            let me = std::process::id() as i32;
            let cpu = cpu_ticks(pid);
            let master_cpu = cpu_ticks(me);
            let sampler = RssSampler::start(pid);
            let took = master
                .flood(r.topic, "test.ping", &r.target, n, sizes.in_flight)
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
        }
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    for r in &mut responders {
        r.measured.rss_after_kib = rss_kib(r.proc.pid());
    }

    // cmd.run 'true' on the maid agent, each paired with direct spawns.
    stage(&format!(
        "cmd.run 'true': {} round trips, each paired with spawning `true` directly",
        sizes.cmd_runs
    ));
    let truth = json!(["true"]);
    let maid = target("maid");
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

    for r in responders {
        let Responder { name, measured, .. } = r;
        results.responders.push((name, Some(measured)));
    }
    if results.seed_skipped.is_some() {
        results.responders.push(("seed", None));
    }

    // Fan-out: many agents in one process, and as many raw responders in
    // another (the floor), their rounds alternating.
    stage(&format!(
        "fan-out: {} agents in one process (maid-bench fleet), and {} raw responders in each of two others (maid-bench raw --count, with and without --protocol), {} rounds each, alternating",
        sizes.agents, sizes.agents, sizes.fanout_rounds
    ));
    let threads = sizes.fanout_threads.to_string();
    let count = sizes.agents.to_string();
    let timeout = READY_TIMEOUT + Duration::from_millis(100 * sizes.agents as u64);
    let mut fleet_cmd = Command::new(&exe);
    fleet_cmd
        .args(["fleet", "--redis", &url, "--topic", TOPIC_FLEET])
        .args([
            "--prefix",
            "fleet-",
            "--count",
            &count,
            "--threads",
            &threads,
        ])
        .arg("--plugin-dir")
        .arg(plugin_dir)
        .arg("--cache-dir")
        .arg(&warm_cache);
    let mut fleet = Proc::spawn(
        "maid-bench fleet",
        &mut fleet_cmd,
        scratch.join("fleet.log"),
    )?;
    results.fleet_ready =
        wait_subscribed(&mut admin, TOPIC_FLEET, sizes.agents, &mut fleet, timeout).await?;
    // The two floors, each in a process of its own: raw responders, and
    // raw responders keeping the protocol.
    let mut spawn_floor = async |topic: &str, prefix: &str, protocol: bool, log: &str| {
        let mut cmd = Command::new(&exe);
        cmd.args(["raw", "--redis", &url, "--topic", topic])
            .args(["--id", prefix, "--count", &count, "--threads", &threads])
            .args(protocol.then_some("--protocol"));
        let name = if protocol {
            "maid-bench raw --count --protocol"
        } else {
            "maid-bench raw --count"
        };
        let mut proc = Proc::spawn(name, &mut cmd, scratch.join(log))?;
        wait_subscribed(&mut admin, topic, sizes.agents, &mut proc, timeout).await?;
        anyhow::Ok(proc)
    };
    let mut raw_fleet = spawn_floor(TOPIC_RAW_FLEET, "rawfleet-", false, "raw-fleet.log").await?;
    let mut protocol_fleet = spawn_floor(
        TOPIC_PROTOCOL_FLEET,
        "protofleet-",
        true,
        "protocol-fleet.log",
    )
    .await?;
    // Every agent registers right after it subscribes; let that settle.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let ids = |prefix: &str| -> Vec<String> {
        (0..sizes.agents).map(|i| format!("{prefix}{i}")).collect()
    };
    let fleets = [
        (
            TOPIC_RAW_FLEET,
            Target::new(args.tgt_type, &ids("rawfleet-")),
            &raw_fleet,
        ),
        (
            TOPIC_FLEET,
            Target::new(args.tgt_type, &ids("fleet-")),
            &fleet,
        ),
        (
            TOPIC_PROTOCOL_FLEET,
            Target::new(args.tgt_type, &ids("protofleet-")),
            &protocol_fleet,
        ),
    ];
    for (topic, everyone, proc) in &fleets {
        master.watch = Some((proc.name.clone(), proc.pid()));
        for _ in 0..2 {
            master
                .round_trip(topic, "test.ping", &ping, everyone, sizes.agents)
                .await?;
        }
    }
    for _ in 0..sizes.fanout_rounds {
        for (i, (topic, everyone, proc)) in fleets.iter().enumerate() {
            master.watch = Some((proc.name.clone(), proc.pid()));
            let before = RoundCpu::sample(proc.pid(), redis_server.pid());
            let t = master
                .round_trip(topic, "test.ping", &ping, everyone, sizes.agents)
                .await?;
            let replied = RoundCpu::sample(proc.pid(), redis_server.pid());
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
            let settled = RoundCpu::sample(proc.pid(), redis_server.pid());
            results.with_pause[i].add(before, settled);
        }
    }
    raw_fleet.check_alive()?;
    fleet.check_alive()?;
    protocol_fleet.check_alive()?;
    results.fleet_rss_kib = rss_kib(fleet.pid());
    drop(fleet);
    drop(raw_fleet);
    drop(protocol_fleet);
    stage("done; stopping everything");
    Ok(results)
}

/// Block `block`'s share of `total` split into `blocks`.
fn share(total: usize, blocks: usize, block: usize) -> usize {
    total / blocks + usize::from(block < total % blocks)
}

/// Spawn a program with its output captured (as the agent does) and wait.
fn spawn_direct(mut cmd: Command) -> anyhow::Result<Duration> {
    cmd.stdin(Stdio::null());
    let started = Instant::now();
    let out = cmd.output().context("spawn `true`")?;
    let took = started.elapsed();
    if !out.status.success() {
        bail!("`true` failed: {}", out.status);
    }
    Ok(took)
}

// ---------------------------------------------------------------------------
// Report
// ---------------------------------------------------------------------------

/// The p50 of some samples, or `None` when there are none.
fn p50(samples: &[Duration]) -> Option<Duration> {
    (!samples.is_empty()).then(|| percentile(&sorted(samples.to_vec()), 50.0))
}

impl Results {
    fn measured(&self, name: &str) -> Option<&Measured> {
        self.responders
            .iter()
            .find(|(n, _)| *n == name)
            .and_then(|(_, m)| m.as_ref())
    }

    /// The p50 round trip of `test.ping` to one responder, in seconds.
    fn round_trip_p50(&self, name: &str) -> Option<f64> {
        self.measured(name).map(|m| m.p(50.0).as_secs_f64())
    }

    /// `cmd.run 'true'`'s round trip over spawning `true` directly (p50s,
    /// µs): the old absolute goal, which counts a whole pub/sub round trip.
    fn cmd_over_spawn_us(&self) -> Option<f64> {
        let cmd = p50(&self.cmd_run)?;
        let spawn = p50(&self.spawn_true)?;
        Some((cmd.as_secs_f64() - spawn.as_secs_f64()) * 1e6)
    }

    /// What of `cmd.run 'true'` is the agent's own: its round trip less a
    /// `test.ping` round trip (the pub/sub hops and the plugin call) and
    /// less spawning `true` directly (the kernel's share), p50s in µs.
    fn cmd_own_us(&self) -> Option<f64> {
        Some(self.cmd_over_spawn_us()? - self.round_trip_p50("maid")? * 1e6)
    }

    /// maid's fan-out round over a floor's, p50s.
    fn fanout_over(&self, floor: &[Duration]) -> Option<f64> {
        let maid = p50(&self.fanout)?.as_secs_f64();
        let floor = p50(floor)?.as_secs_f64();
        (floor > 0.0).then(|| maid / floor)
    }
}

/// The side of its bound a goal must stay on.
#[derive(Debug, Clone, Copy)]
enum Bound {
    AtMost(f64),
    AtLeast(f64),
}

impl Bound {
    fn holds(self, x: f64) -> bool {
        match self {
            Bound::AtMost(b) => x <= b,
            Bound::AtLeast(b) => x >= b,
        }
    }
}

/// One goal: a figure measured in this run, and the bound it must keep.
struct Goal {
    what: String,
    /// `None` when this run did not measure it (the seed left out, say).
    measured: Option<f64>,
    bound: Bound,
    /// The unit after the bound (`" µs"`), empty for a ratio.
    unit: &'static str,
    show: fn(f64) -> String,
}

impl Goal {
    /// The goal's row: what, measured, bound, met or MISSED.
    fn cells(&self) -> Vec<String> {
        let bound = match self.bound {
            Bound::AtMost(b) => format!("≤ {b}{}", self.unit),
            Bound::AtLeast(b) => format!("≥ {b}{}", self.unit),
        };
        let result = match self.measured {
            Some(x) if self.bound.holds(x) => "met",
            Some(_) => "MISSED",
            None => "n/a",
        };
        vec![
            self.what.clone(),
            self.measured.map(self.show).unwrap_or_else(|| "n/a".into()),
            bound,
            result.into(),
        ]
    }
}

/// The goals, each computed from figures measured in this same run, so
/// that the machine's load reaches both sides of every ratio alike. The
/// fan-out is held against the floor that keeps the protocol, and
/// `cmd.run` with the round trip and the spawn taken out, because the
/// absolute bounds these replaced (50 ms, 150 µs over the spawn) were
/// out of reach of any responder on a slow machine.
fn goals(r: &Results) -> Vec<Goal> {
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    let throughput = |name| r.measured(name).map(Measured::throughput);
    vec![
        Goal {
            what: "maid p50 / raw p50 (round trip)".into(),
            measured: ratio(r.round_trip_p50("maid"), r.round_trip_p50("raw")),
            bound: Bound::AtMost(1.3),
            unit: "",
            show: fmt_ratio,
        },
        Goal {
            what: "maid throughput / raw throughput".into(),
            measured: ratio(throughput("maid"), throughput("raw")),
            bound: Bound::AtLeast(0.5),
            unit: "",
            show: fmt_ratio,
        },
        Goal {
            what: "seed p50 / maid p50 (round trip)".into(),
            measured: ratio(r.round_trip_p50("seed"), r.round_trip_p50("maid")),
            bound: Bound::AtLeast(30.0),
            unit: "",
            show: fmt_ratio,
        },
        Goal {
            what: format!(
                "fan-out to {} agents: maid p50 / protocol floor p50 (no maid code)",
                r.agents
            ),
            measured: r.fanout_over(&r.protocol_fanout),
            bound: Bound::AtMost(1.2),
            unit: "",
            show: fmt_ratio,
        },
        Goal {
            what:
                "cmd.run's own share: cmd.run 'true' − test.ping round trip − spawning `true`, p50s"
                    .into(),
            measured: r.cmd_own_us(),
            bound: Bound::AtMost(100.0),
            unit: " µs",
            show: fmt_signed_us,
        },
        Goal {
            what: "maid idle RSS".into(),
            measured: r
                .measured("maid")
                .map(|m| m.rss_idle_kib as f64 * 1024.0 / 1e6),
            bound: Bound::AtMost(20.0),
            unit: " MB",
            show: |mb| format!("{mb:.1} MB"),
        },
    ]
}

fn render(r: &Results, sizes: &Sizes) -> (String, String) {
    let cell = |name: &str, f: &dyn Fn(&Measured) -> String| {
        r.measured(name).map(f).unwrap_or_else(|| "n/a".into())
    };
    let names = ["raw", "maid", "seed"];

    let mut t1 = Table::new(
        "Round trip (master publish → last reply), test.ping",
        &["", "raw", "maid", "seed"],
    );
    type Metric<'a> = (String, Box<dyn Fn(&Measured) -> String + 'a>);
    let flight = r.in_flight;
    let metrics: Vec<Metric> = vec![
        ("round trip p50".into(), Box::new(|m| fmt_dur(m.p(50.0)))),
        ("round trip p99".into(), Box::new(|m| fmt_dur(m.p(99.0)))),
        (
            "publish → PING p50".into(),
            Box::new(|m| fmt_dur(m.ping_p(50.0))),
        ),
        (
            format!("throughput, {flight} in flight, jobs/s"),
            Box::new(|m| fmt_count(m.throughput())),
        ),
        (
            "CPU per job".into(),
            Box::new(|m| fmt_dur(m.cpu_per_job(r.ticks))),
        ),
        (
            "master's CPU per job (this process)".into(),
            Box::new(|m| fmt_dur(m.master_cpu_per_job(r.ticks))),
        ),
        (
            "RSS idle (started)".into(),
            Box::new(|m| fmt_mb(m.rss_idle_kib)),
        ),
        (
            "of which anonymous (heap, stacks)".into(),
            Box::new(|m| fmt_mb(m.rss_idle_anon_kib)),
        ),
        (
            format!("RSS peak, {flight} in flight"),
            Box::new(|m| fmt_mb(m.rss_peak_kib)),
        ),
        (
            "RSS idle (after load)".into(),
            Box::new(|m| fmt_mb(m.rss_after_kib)),
        ),
        (
            "samples (round trips / jobs)".into(),
            Box::new(|m| format!("{} / {}", m.latencies.len(), m.flood_jobs)),
        ),
    ];
    for (label, f) in &metrics {
        let mut row = vec![label.clone()];
        for n in names {
            row.push(cell(n, f.as_ref()));
        }
        t1.row(row);
    }

    let mut t2 = Table::new(
        "Goals (each from this run's numbers)",
        &["goal", "measured", "bound", "result"],
    );
    for goal in goals(r) {
        t2.row(goal.cells());
    }

    let mut t3 = Table::new("Other measurements", &["", "p50", "p99", "max"]);
    let dist = |label: String, v: &[Duration]| {
        let s = sorted(v.to_vec());
        vec![
            label,
            fmt_dur(percentile(&s, 50.0)),
            fmt_dur(percentile(&s, 99.0)),
            fmt_dur(s.last().copied().unwrap_or_default()),
        ]
    };
    t3.row(dist(
        format!(
            "fan-out test.ping to {} agents ({} rounds)",
            r.agents,
            r.fanout.len()
        ),
        &r.fanout,
    ));
    t3.row(dist(
        format!("fan-out to {} agents: publish → every PING", r.agents),
        &r.fanout_pings,
    ));
    // Each floor's fan-out, and maid's over it.
    let floors = [
        ("in one process, the floor", "raw", &r.raw_fanout),
        (
            "sending what the protocol asks",
            "protocol raw",
            &r.protocol_fanout,
        ),
    ];
    for (what, name, samples) in floors {
        t3.row(dist(
            format!(
                "fan-out to {} raw responders {what} ({} rounds)",
                r.agents,
                samples.len()
            ),
            samples,
        ));
        t3.row(vec![
            format!("fan-out: maid p50 / {name} p50"),
            r.fanout_over(samples)
                .map(fmt_ratio)
                .unwrap_or_else(|| "n/a".into()),
            String::new(),
            String::new(),
        ]);
    }
    t3.row(dist(
        format!("cmd.run 'true' round trip ({})", r.cmd_run.len()),
        &r.cmd_run,
    ));
    t3.row(dist(
        format!(
            "test.ping through the plugin runtime, in-process ({})",
            r.calls.len()
        ),
        &r.calls,
    ));
    t3.row(dist(
        format!(
            "cmd.run 'true' through the plugin runtime, in-process ({})",
            r.cmd_calls.len()
        ),
        &r.cmd_calls,
    ));
    t3.row(dist(
        format!("spawn `true` directly ({})", r.spawn_true.len()),
        &r.spawn_true,
    ));
    t3.row(dist(
        format!("spawn `sh -c true` directly ({})", r.spawn_sh.len()),
        &r.spawn_sh,
    ));
    let us = |d: Option<f64>| d.map(fmt_signed_us).unwrap_or_else(|| "n/a".into());
    for (label, value) in [
        (
            "cmd.run 'true' round trip − spawning `true` (p50s)",
            r.cmd_over_spawn_us(),
        ),
        (
            "cmd.run 'true' − test.ping round trip − spawning `true` (p50s)",
            r.cmd_own_us(),
        ),
    ] {
        t3.row(vec![label.into(), us(value), String::new(), String::new()]);
    }
    t3.row(dist(
        format!(
            "start-up to ready, cold cache, {} plugins ({})",
            r.plugins,
            r.cold.len()
        ),
        &r.cold,
    ));
    t3.row(dist(
        format!(
            "start-up to ready, warm cache, {} plugins ({})",
            r.plugins,
            r.warm.len()
        ),
        &r.warm,
    ));
    t3.row(vec![
        format!("bench-fleet: spawn to {} agents subscribed", r.agents),
        fmt_dur(r.fleet_ready),
        String::new(),
        String::new(),
    ]);
    // CPU per round with the pause after it, maid's fleet first.
    let pause_rows = [
        (MAID, "fan-out", "bench-fleet process"),
        (RAW, "raw fan-out", "raw responders' process"),
        (PROTOCOL, "protocol raw fan-out", "responders' process"),
    ];
    for (i, fleet, process) in pause_rows {
        let [process_cpu, redis_cpu, _] = r.with_pause[i].means(r.ticks);
        for (what, cpu) in [(process, process_cpu), ("redis-server", redis_cpu)] {
            t3.row(vec![
                format!("{fleet} CPU per round: {what}"),
                fmt_dur(cpu),
                String::new(),
                String::new(),
            ]);
        }
    }
    t3.row(vec![
        format!("bench-fleet RSS, {} agents", r.agents),
        fmt_mb(r.fleet_rss_kib),
        String::new(),
        String::new(),
    ]);

    let least = format!("the least a round can take on {} CPUs", r.cpus);
    let mut floors = Table::new(
        "Fan-out rounds against this machine (means; CPU from the publish to the last reply)",
        &[
            "",
            "round",
            "responders' CPU",
            "redis-server's CPU",
            "master's CPU",
            &least,
        ],
    );
    let fleets = [
        (RAW, "raw responders (the floor)", &r.raw_fanout),
        (MAID, "maid agents (bench-fleet)", &r.fanout),
        (
            PROTOCOL,
            "raw responders sending what the protocol asks",
            &r.protocol_fanout,
        ),
    ];
    for (i, name, rounds) in fleets {
        let mean = rounds.iter().sum::<Duration>()
            / u32::try_from(rounds.len().max(1)).unwrap_or(u32::MAX);
        let mut cells = vec![format!("{} × {}", r.agents, name), fmt_dur(mean)];
        cells.extend(r.in_round[i].means(r.ticks).map(fmt_dur));
        cells.push(fmt_dur(r.in_round[i].least(r.ticks, r.cpus)));
        floors.row(cells);
    }

    let mut t4 = Table::new(
        "Inside the maid agent (its /metrics, means; --agent-metrics)",
        &["", "mean"],
    );
    let mean = |m: &MeanOf| m.mean().map(fmt_dur).unwrap_or_else(|| "n/a".into());
    t4.row(vec![
        "test.ping, sequential: message arrival → PING published".into(),
        mean(&r.arrival_to_ping),
    ]);
    t4.row(vec![
        "test.ping, sequential: the call in the plugin runtime".into(),
        mean(&r.ping_in_runtime),
    ]);
    t4.row(vec![
        "cmd.run 'true': the call in the plugin runtime".into(),
        mean(&r.cmd_in_runtime),
    ]);

    let mut notes = vec![format!("machine: {}", machine(&redis_server_bin()))];
    // The command exactly as given.
    let command = std::env::args()
        .map(|a| {
            if a.is_empty() || a.contains(|c: char| c.is_whitespace() || "'\"$`\\".contains(c)) {
                format!("'{}'", a.replace('\'', "'\\''"))
            } else {
                a
            }
        })
        .collect::<Vec<_>>()
        .join(" ");
    notes.push(format!(
        "command: `{command}` (jobs target {}; {} + {} seed round trips, {} + {} seed jobs at {} in flight in {} blocks, {} agents × {} rounds, fan-out runtime: {}, {} cmd.run, {} in-process calls, {} cold + {} warm start-ups)",
        match r.tgt_type {
            TgtType::Glob => "`*` (glob)",
            TgtType::List => "the responder's id (list)",
        },
        sizes.round_trips,
        sizes.seed_round_trips,
        sizes.jobs,
        sizes.seed_jobs,
        sizes.in_flight,
        sizes.blocks,
        sizes.agents,
        sizes.fanout_rounds,
        if r.fanout_threads == 0 {
            "current-thread".to_string()
        } else {
            format!("{} current-thread runtimes", r.fanout_threads)
        },
        sizes.cmd_runs,
        sizes.calls,
        sizes.cold_starts,
        sizes.warm_starts,
    ));
    notes.push(
        "CPU per job: user+system time of the responder process (and its reaped children) during the throughput run, divided by its jobs".into(),
    );
    if let Some(why) = &r.seed_skipped {
        notes.push(format!("seed skipped: {why}"));
    }

    let mut tables = vec![&t1, &t2, &t3, &floors];
    if r.agent_metrics {
        tables.push(&t4);
    }
    let mut text = String::new();
    let mut md = String::new();
    for t in tables {
        text.push_str(&t.text());
        text.push('\n');
        md.push_str(&t.markdown());
        md.push('\n');
    }
    for n in &notes {
        text.push_str(n);
        text.push('\n');
        md.push_str(&format!("- {n}\n"));
    }
    (text, md)
}

// ---------------------------------------------------------------------------
// maid-bench raw: the Redis floor
// ---------------------------------------------------------------------------

#[derive(Debug, Args)]
pub struct RawArgs {
    /// Redis URL.
    #[arg(long)]
    pub redis: String,
    /// Master topic to answer on.
    #[arg(long)]
    pub topic: String,
    /// The id it answers as (with --count, the prefix of ID0, ID1, ...).
    #[arg(long, default_value = "raw")]
    pub id: String,
    /// How many responders, each with its own connections, in this one
    /// process: the floor for `maid-bench fleet`'s fan-out.
    #[arg(long, default_value_t = 1)]
    pub count: usize,
    /// Threads, each with a current-thread runtime and its share of the
    /// responders (0: one on the main thread), as the fleet's.
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Answer as the protocol asks of a maid, not just with two publishes:
    /// the PING in a write of its own, sent before the return is made, and
    /// the return with its job-cache write (`HSET maid:job:<jid>` and
    /// `EXPIRE`), sent by the same functions `maid agent` sends them with;
    /// none of the agent's job handling or plugin runtime: the floor for what
    /// every maid has to send.
    #[arg(long)]
    pub protocol: bool,
}

/// Just what a reply needs of a job.
#[derive(Deserialize)]
struct RawJob {
    jid: String,
    #[serde(rename = "tempTopic")]
    temp_topic: String,
    fun: String,
    #[serde(default)]
    arg: Vec<Value>,
}

/// Answer every job on the topic with a PING and a `true` return, in one
/// pipelined write, without waiting in the receive loop. No maid code:
/// only redis, serde_json and tokio, on a current-thread runtime (or, for
/// a fleet of them, on `--threads` of them as the fleet's agents).
pub fn raw(args: RawArgs) -> anyhow::Result<ExitCode> {
    let fleet = Fleet::new(args.threads)?;
    fleet.main.block_on(async {
        let client = redis::Client::open(args.redis.as_str())?;
        if args.count <= 1 {
            return raw_responder(client, args.topic, args.id, args.protocol).await;
        }
        let mut responders = tokio::task::JoinSet::new();
        for i in 0..args.count {
            let id = format!("{}{i}", args.id);
            let topic = args.topic.clone();
            responders.spawn_on(
                raw_responder(client.clone(), topic, id, args.protocol),
                fleet.handle(i),
            );
        }
        match responders.join_next().await {
            Some(Ok(Err(e))) => Err(e),
            Some(Err(e)) => bail!("a responder task failed: {e}"),
            _ => bail!("a responder stopped"),
        }
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
struct Fleet {
    /// Drives the first share (and the set-up) on the calling thread.
    main: tokio::runtime::Runtime,
    /// Every runtime's handle, the first's included.
    handles: Vec<tokio::runtime::Handle>,
    /// Dropped with the fleet: the other threads then end, and their
    /// runtimes with them.
    _stop: Vec<tokio::sync::oneshot::Sender<()>>,
}

impl Fleet {
    fn new(threads: usize) -> std::io::Result<Fleet> {
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
    fn handle(&self, i: usize) -> &tokio::runtime::Handle {
        &self.handles[i % self.handles.len()]
    }
}

/// One raw responder on its own two connections, until its subscription
/// ends; with `protocol`, answering as the protocol asks (see
/// [`RawArgs::protocol`]).
async fn raw_responder(
    client: redis::Client,
    topic: String,
    id: String,
    protocol: bool,
) -> anyhow::Result<()> {
    let ttl = maid_config::Config::default().agent.job_cache_ttl_secs;
    // redis-rs's default 1 s to connect is too short for a thousand
    // responders connecting at once.
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(30)))
        .set_response_timeout(Some(Duration::from_secs(10)));
    let conn = client
        .get_multiplexed_async_connection_with_config(&config)
        .await?;
    let mut pubsub = client.get_async_pubsub().await?;
    pubsub.subscribe(&topic).await?;
    let mut messages = pubsub.into_on_message();
    while let Some(msg) = messages.next().await {
        let Ok(job) = serde_json::from_slice::<RawJob>(msg.get_payload_bytes()) else {
            continue;
        };
        let ping = json!({"type": "ping", "sub_ip": id, "jid": job.jid, "match": true});
        let stamp = maid_agent::jid::stamp();
        let ret = json!({
            "type": "return", "sub_ip": id, "jid": job.jid, "id": id,
            "fun": job.fun, "fun_args": job.arg, "return": true,
            "retcode": 0, "success": true, "out": "nested",
            "_stamp": stamp, "ret_": {id.as_str(): true},
        });
        let mut conn = conn.clone();
        // The return as the agent keeps it, only where it is cached.
        let id = protocol.then(|| id.clone());
        tokio::spawn(async move {
            let sent: redis::RedisResult<()> = if let Some(id) = id {
                // The PING is queued first and written by the connection's
                // task before the return is made and queued; both go out
                // through the agent's own functions (`bus::publish`, and
                // `outbox::deliver`: PUBLISH, HSET and EXPIRE in one
                // pipeline).
                let mut conn = maid_bus::Conn::Single(conn);
                let mut ping_conn = conn.clone();
                let ping = ping.to_string();
                let ret = async {
                    maid_agent::agent::Requeue::default().await;
                    let mut pending = maid_agent::outbox::Pending {
                        topic: job.temp_topic.clone(),
                        payload: ret.to_string(),
                        jid: job.jid.clone(),
                        id,
                        published: false,
                    };
                    maid_agent::outbox::deliver(&mut conn, &mut pending, ttl).await
                };
                let (pinged, returned) = tokio::join!(
                    maid_bus::publish(&mut ping_conn, &job.temp_topic, &ping),
                    ret
                );
                pinged.and(returned)
            } else {
                redis::pipe()
                    .cmd("PUBLISH")
                    .arg(&job.temp_topic)
                    .arg(ping.to_string())
                    .ignore()
                    .cmd("PUBLISH")
                    .arg(&job.temp_topic)
                    .arg(ret.to_string())
                    .ignore()
                    .query_async(&mut conn)
                    .await
            };
            if let Err(e) = sent {
                eprintln!("maid-bench raw: publish failed: {e}");
            }
        });
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// maid-bench fleet: many agents in one process
// ---------------------------------------------------------------------------

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

#[cfg(test)]
mod tests {
    use super::{Fleet, Measured, Results, goals};
    use std::thread::ThreadId;
    use std::time::Duration;

    fn us(n: u64) -> Vec<Duration> {
        vec![Duration::from_micros(n)]
    }

    fn responder(round_trip_us: u64, jobs: usize, rss_idle_kib: u64) -> Measured {
        Measured {
            latencies: us(round_trip_us),
            flood_jobs: jobs,
            flood_time: Duration::from_secs(1),
            rss_idle_kib,
            ..Measured::default()
        }
    }

    /// The six goals, each from figures of the same run: `cmd.run`'s
    /// own share takes the `test.ping` round trip and the direct spawn
    /// out, the fan-out is held against the protocol floor.
    #[test]
    fn the_goals_are_computed_from_the_runs_own_figures() {
        let r = Results {
            responders: vec![
                ("raw", Some(responder(100, 1000, 10_000))),
                ("maid", Some(responder(120, 400, 18_000))),
                ("seed", Some(responder(6000, 10, 30_000))),
            ],
            cmd_run: us(1000),
            spawn_true: us(800),
            fanout: us(55_000),
            protocol_fanout: us(50_000),
            raw_fanout: us(40_000),
            ..Results::default()
        };
        let rows: Vec<Vec<String>> = goals(&r).iter().map(|g| g.cells()).collect();
        let row = |i: usize| rows[i].iter().map(String::as_str).collect::<Vec<_>>();
        assert_eq!(rows.len(), 6, "{rows:?}");
        assert_eq!(row(0)[1..], ["1.20", "≤ 1.3", "met"]);
        assert_eq!(row(1)[1..], ["0.40", "≥ 0.5", "MISSED"]);
        assert_eq!(row(2)[1..], ["50", "≥ 30", "met"]);
        assert_eq!(row(3)[1..], ["1.10", "≤ 1.2", "met"]);
        assert_eq!(row(4)[1..], ["80 µs", "≤ 100 µs", "met"]);
        assert_eq!(row(5)[1..], ["18.4 MB", "≤ 20 MB", "met"]);
    }

    /// What a run did not measure is n/a, never met.
    #[test]
    fn a_goal_not_measured_is_neither_met_nor_missed() {
        for goal in goals(&Results::default()) {
            let cells = goal.cells();
            assert_eq!(cells[1..], ["n/a", cells[2].as_str(), "n/a"], "{cells:?}");
        }
    }

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
