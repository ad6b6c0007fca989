//! `maid-bench syndic`: a flat fleet against fleets behind syndic maids
//! (PROTOCOL §7), in one run.
//!
//! * **flat**: `--flat` maids (`maid-bench fleet`) on one private
//!   `redis-server`, which the master publishes on.
//! * **tiered**: `--syndics` syndic maids (real `maid agent` processes) on
//!   a top `redis-server`, each with a `redis-server` of its own beneath,
//!   where its share of the maids runs (one `maid-bench fleet` each). Run
//!   with as many maids as the flat fleet, and with `--big` (0: skipped).
//!
//! Each fleet gets `--rounds` rounds of `test.ping` to `*`. Per round: the
//! time from publish until the master knows every minion it should expect
//! (flat: the last `match: true` PING; tiered: when the syndic maids' PINGs
//! have listed every maid beneath, and themselves), the time until every
//! one of them returned, the top Redis's CPU in that round, and how many
//! never returned (lost). The goal: the tiered `--big` fleet's expected set
//! is known within 1.5× the flat fleet's time to PING, both p50s.

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures_util::StreamExt;
use maid_testkit::Proc;
use maid_testkit::redis::RedisServer;
use redis::AsyncCommands;
use serde_json::{Value, json};

use super::master::{ReplyHead, wait_subscribed};
use super::measure::p50;
use super::procfs::{clock_ticks, cpu_ticks};
use super::scratch::Scratch;
use super::stage;
use super::table::{Table, fmt_dur, fmt_ratio};

const TOPIC: &str = "bench-syndic";

/// How long one round may take before it counts what is missing as lost.
const ROUND_TIMEOUT: Duration = Duration::from_secs(60);

/// The goal's bound: tiered `--big` known / flat pinged, p50s.
const GOAL: f64 = 1.5;

#[derive(Debug, clap::Args)]
pub struct SyndicArgs {
    /// Where the plugins are (`test.wasm` at least).
    #[arg(long, env = "MAID_PLUGIN_DIR")]
    pub plugin_dir: PathBuf,
    /// The `maid` binary the syndic maids run [default: beside this one].
    #[arg(long)]
    pub maid: Option<PathBuf>,
    /// Maids in the flat fleet, and in the first tiered one.
    #[arg(long, default_value_t = 1000)]
    pub flat: usize,
    /// Syndic maids, each over a Redis of its own.
    #[arg(long, default_value_t = 10)]
    pub syndics: usize,
    /// Maids behind the syndic maids in the large tiered fleet (0: none).
    #[arg(long, default_value_t = 10_000)]
    pub big: usize,
    /// Measured rounds per fleet (after two to warm up).
    #[arg(long, default_value_t = 10)]
    pub rounds: usize,
    /// Also write the tables, in Markdown, to this file.
    #[arg(long)]
    pub markdown: Option<PathBuf>,
}

/// One fleet's measured rounds.
#[derive(Default)]
struct Fleet {
    name: String,
    minions: usize,
    known: Vec<Duration>,
    returned: Vec<Duration>,
    /// The top Redis's CPU over the measured rounds (its clock ticks are
    /// too coarse to read one round alone).
    redis_cpu: Duration,
    lost: usize,
    ready: Duration,
}

pub fn syndic(args: SyndicArgs) -> anyhow::Result<ExitCode> {
    let maid = crate::maid_binary(args.maid.as_deref())?;
    let exe = std::env::current_exe().context("path of the maid-bench binary")?;
    anyhow::ensure!(args.syndics > 0, "--syndics must be at least 1");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let scratch = Scratch::new()?;
    let cache = scratch.join("cache");
    std::fs::create_dir_all(&cache)?;
    let ctx = Ctx {
        exe,
        maid,
        plugin_dir: args.plugin_dir.clone(),
        cache,
        scratch,
        rounds: args.rounds,
    };
    let mut fleets = Vec::new();
    rt.block_on(async {
        fleets.push(flat(&ctx, args.flat).await?);
        fleets.push(tiered(&ctx, args.flat, args.syndics).await?);
        if args.big > 0 {
            fleets.push(tiered(&ctx, args.big, args.syndics).await?);
        }
        anyhow::Ok(())
    })?;
    let (text, markdown) = render(&fleets);
    println!("{text}");
    if let Some(path) = &args.markdown {
        std::fs::write(path, &markdown).with_context(|| format!("write {}", path.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

struct Ctx {
    exe: PathBuf,
    maid: PathBuf,
    plugin_dir: PathBuf,
    cache: PathBuf,
    scratch: Scratch,
    rounds: usize,
}

impl Ctx {
    /// `count` maids named `prefix<i>` in one `maid-bench fleet` on `url`.
    async fn leaves(&self, url: &str, prefix: &str, count: usize) -> anyhow::Result<Proc> {
        let mut cmd = Command::new(&self.exe);
        cmd.args([
            "fleet", "--redis", url, "--topic", TOPIC, "--prefix", prefix,
        ])
        .args(["--count", &count.to_string(), "--threads", "1"])
        .arg("--plugin-dir")
        .arg(&self.plugin_dir)
        .arg("--cache-dir")
        .arg(&self.cache);
        let log = self.scratch.join(&format!("{prefix}fleet.log"));
        Proc::spawn("maid-bench fleet", &mut cmd, log)
    }
}

async fn flat(ctx: &Ctx, count: usize) -> anyhow::Result<Fleet> {
    stage(&format!("flat: {count} maids on one redis-server"));
    let redis = RedisServer::start();
    let client = redis.client();
    let mut admin = client.get_multiplexed_async_connection().await?;
    let started = Instant::now();
    let mut proc = ctx.leaves(&redis.url(), "flat-", count).await?;
    let timeout = Duration::from_secs(60) + Duration::from_millis(100 * count as u64);
    wait_subscribed(&mut admin, TOPIC, count, &mut proc, timeout).await?;
    let mut fleet = Fleet {
        name: format!("flat, {count} maids"),
        minions: count,
        ready: started.elapsed(),
        ..Fleet::default()
    };
    rounds(ctx, &redis, count, &mut fleet, &mut [&mut proc]).await?;
    Ok(fleet)
}

async fn tiered(ctx: &Ctx, leaves: usize, syndics: usize) -> anyhow::Result<Fleet> {
    stage(&format!(
        "tiered: {leaves} maids behind {syndics} syndic maids, each over a redis-server of its own"
    ));
    let top = RedisServer::start();
    let client = top.client();
    let mut admin = client.get_multiplexed_async_connection().await?;
    let started = Instant::now();
    let mut below = Vec::new();
    let mut procs = Vec::new();
    let mut shares = Vec::new();
    for i in 0..syndics {
        let share = leaves / syndics + usize::from(i < leaves % syndics);
        let redis = RedisServer::start();
        procs.push(ctx.leaves(&redis.url(), &format!("s{i}-"), share).await?);
        below.push(redis);
        shares.push(share);
    }
    for (i, redis) in below.iter().enumerate() {
        let mut conn = redis.client().get_multiplexed_async_connection().await?;
        let timeout = Duration::from_secs(60) + Duration::from_millis(100 * shares[i] as u64);
        wait_subscribed(&mut conn, TOPIC, shares[i], &mut procs[i], timeout).await?;
    }
    for (i, redis) in below.iter().enumerate() {
        let config = ctx.scratch.join(&format!("syn-{i}.toml"));
        std::fs::write(
            &config,
            format!(
                "master_topics = [\"{TOPIC}\"]\nplugin_dir = {:?}\ncache_dir = {:?}\n\
                 [redis]\nurl = \"{}\"\n[security]\nrequire_signed = false\n\
                 [syndic]\nrefresh_secs = 1\n[syndic.redis]\nurl = \"{}\"\n",
                ctx.plugin_dir,
                ctx.cache,
                top.url(),
                redis.url()
            ),
        )?;
        let mut cmd = Command::new(&ctx.maid);
        cmd.args(["agent", "--id", &format!("syn-{i}"), "-c"])
            .arg(&config)
            .env("MAID_LOG", "maid=warn");
        let log = ctx.scratch.join(&format!("syn-{i}.log"));
        procs.push(Proc::spawn("maid agent (syndic)", &mut cmd, log)?);
    }
    // Every syndic maid lists its whole share upstream.
    for (i, share) in shares.iter().enumerate() {
        wait_listed(&mut admin, &format!("syn-{i}"), *share, &mut procs).await?;
    }
    let subscribed = Duration::from_secs(60);
    let mut syndic_procs: Vec<&mut Proc> = procs.iter_mut().collect();
    wait_subscribed(
        &mut admin,
        TOPIC,
        syndics,
        syndic_procs.last_mut().expect("a syndic maid"),
        subscribed,
    )
    .await?;
    let mut fleet = Fleet {
        name: format!("tiered, {leaves} maids behind {syndics} syndic maids"),
        minions: leaves + syndics,
        ready: started.elapsed(),
        ..Fleet::default()
    };
    rounds(ctx, &top, leaves + syndics, &mut fleet, &mut syndic_procs).await?;
    drop(below);
    Ok(fleet)
}

/// Wait until syndic maid `id` lists `count` maids beneath it upstream.
async fn wait_listed(
    conn: &mut redis::aio::MultiplexedConnection,
    id: &str,
    count: usize,
    procs: &mut [Proc],
) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        for p in procs.iter_mut() {
            p.check_alive()?;
        }
        let text: Option<String> = conn.get(format!("maid:syndic:{id}")).await?;
        let listed = text
            .and_then(|t| serde_json::from_str::<serde_json::Map<String, Value>>(&t).ok())
            .map_or(0, |m| m.len());
        if listed >= count {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{id} lists {listed}/{count} maids beneath it after 120 s");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Two warm-up rounds, then `ctx.rounds` measured ones, of `test.ping`
/// to `*` published on `redis`, expecting `expect` minions.
async fn rounds(
    ctx: &Ctx,
    redis: &RedisServer,
    expect: usize,
    fleet: &mut Fleet,
    procs: &mut [&mut Proc],
) -> anyhow::Result<()> {
    let client = redis.client();
    let mut conn = client.get_multiplexed_async_connection().await?;
    let reply = format!("bench.syndic.{}", std::process::id());
    let mut pubsub = client.get_async_pubsub().await?;
    pubsub.subscribe(&reply).await?;
    let mut replies = pubsub.into_on_message();
    let ticks = clock_ticks();
    for round in 0..ctx.rounds + 2 {
        for p in procs.iter_mut() {
            p.check_alive()?;
        }
        let jid = format!("syndic{}-{round}", std::process::id());
        let job = json!({"jid": jid, "tempTopic": reply, "fun": "test.ping", "tgt": "*",
            "tgt_type": "glob", "timeout": ROUND_TIMEOUT.as_secs(), "user": "bench"});
        let cpu_before = cpu_ticks(redis.pid());
        let started = Instant::now();
        let _: i64 = conn.publish(TOPIC, job.to_string()).await?;
        let mut known: HashSet<String> = HashSet::new();
        let mut returned: HashSet<String> = HashSet::new();
        let mut known_at = None;
        let deadline = tokio::time::Instant::now() + ROUND_TIMEOUT;
        while returned.len() < expect {
            let Ok(Some(msg)) = tokio::time::timeout_at(deadline, replies.next()).await else {
                break;
            };
            let Ok(head) = serde_json::from_slice::<ReplyHead>(msg.get_payload_bytes()) else {
                continue;
            };
            if head.jid != jid {
                continue;
            }
            match (head.kind.as_str(), head.minions) {
                ("ping", Some(minions)) => known.extend(minions),
                ("ping", None) if head.matched => {
                    known.insert(head.sub_ip);
                }
                ("return", _) => {
                    returned.insert(head.id);
                }
                _ => {}
            }
            if known_at.is_none() && known.len() >= expect {
                known_at = Some(started.elapsed());
            }
        }
        let all = started.elapsed();
        let cpu = (cpu_ticks(redis.pid()) - cpu_before) as f64 / ticks;
        if round < 2 {
            continue;
        }
        fleet.lost += expect.saturating_sub(returned.len());
        if let Some(k) = known_at {
            fleet.known.push(k);
        }
        fleet.returned.push(all);
        fleet.redis_cpu += Duration::from_secs_f64(cpu);
        // Let the last returns' cache writes settle before the next round.
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

/// The results as text and as Markdown.
fn render(fleets: &[Fleet]) -> (String, String) {
    let mut table = Table::new(
        "Syndic maids: a flat fleet against fleets behind syndic maids",
        &[
            "fleet",
            "minions",
            "ready",
            "expected set known (p50)",
            "every return (p50)",
            "top redis CPU / round (mean)",
            "lost",
        ],
    );
    let p = |v: &[Duration]| p50(v).map_or("n/a".to_string(), fmt_dur);
    for f in fleets {
        table.row(vec![
            f.name.clone(),
            f.minions.to_string(),
            fmt_dur(f.ready),
            p(&f.known),
            p(&f.returned),
            fmt_dur(f.redis_cpu / f.returned.len().max(1) as u32),
            f.lost.to_string(),
        ]);
    }
    let mut goal = Table::new("Goal", &["goal", "measured", "bound", ""]);
    let flat = fleets.first().and_then(|f| p50(&f.known));
    let big = fleets.get(2).and_then(|f| p50(&f.known));
    let ratio = flat
        .zip(big)
        .map(|(f, b)| b.as_secs_f64() / f.as_secs_f64());
    goal.row(vec![
        "tiered (--big) expected set known / flat fleet pinged, p50".into(),
        ratio.map_or("n/a".into(), fmt_ratio),
        format!("≤ {GOAL}"),
        match ratio {
            None => "n/a".into(),
            Some(r) if r <= GOAL => "met".into(),
            Some(_) => "MISSED".into(),
        },
    ]);
    let text = format!("{}\n{}", table.text(), goal.text());
    let markdown = format!("{}\n{}", table.markdown(), goal.markdown());
    (text, markdown)
}
