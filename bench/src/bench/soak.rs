//! `maid-bench soak`: many agents, many jobs, Redis restarted under them; does
//! every job published while Redis was up get its return?
//!
//! One `maid-bench fleet` process runs the agents against a private
//! `redis-server` with an append-only file, so the job cache outlives a
//! restart as it would in production. This process is the master: it
//! publishes a mix of `test.ping`, `cmd.run` and `cp.get_file`, each job
//! targeting one agent (a `list` target), with a bounded number in flight,
//! and collects every reply on a pattern subscription that reconnects when
//! Redis goes away. Part way through, Redis is shut down and started again
//! on the same port and data directory, `--restarts` times.
//!
//! A job counts as published when `PUBLISH` reached every agent (its
//! receiver count); one that reached fewer, because some agents were still
//! resubscribing, is published again under the same jid, which each agent
//! runs at most once. At the end, a job with no return on the reply topic
//! is looked up in the job cache (`maid:job:<jid>`): returns produced while
//! the master was disconnected are found there. What is in neither place
//! is lost. The report also counts duplicates (a minion returning twice for
//! one jid), wrong returns and the agents' RSS before and after.

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::bail;
use clap::Args;
use futures_util::StreamExt;
use serde_json::{Value, json};

use maid_testkit::Proc;
use maid_testkit::redis::{RedisServer, redis_server_bin};

use super::{Scratch, Table, machine, rss_kib};
use maid_cli::setup::{RuntimeOpts, Setup};

/// The master topic of the soak.
const TOPIC: &str = "soak";

/// Reply topics are `soak.reply.<n>`.
const REPLY_PREFIX: &str = "soak.reply.";

/// A job with no return after this long stops counting against the
/// in-flight bound (its return may still come, or be in the job cache).
const GIVE_UP: Duration = Duration::from_secs(10);

/// How long the end of the run waits for returns with no progress.
const DRAIN: Duration = Duration::from_secs(20);

#[derive(Debug, Args)]
pub struct SoakArgs {
    /// Agents, all in one `maid-bench fleet` process.
    #[arg(long, default_value_t = 100)]
    pub agents: usize,
    /// Jobs to publish: 80% test.ping, 10% cmd.run, 10% cp.get_file.
    #[arg(long, default_value_t = 100_000)]
    pub jobs: usize,
    /// Times Redis is shut down and started again, evenly spaced.
    #[arg(long, default_value_t = 2)]
    pub restarts: usize,
    /// How long Redis stays down each time, in seconds.
    #[arg(long, default_value_t = 2.0)]
    pub outage_secs: f64,
    /// Jobs in flight at most.
    #[arg(long, default_value_t = 128)]
    pub in_flight: usize,
    /// Print the report as Markdown too (for docs/reliability.md).
    #[arg(long)]
    pub markdown: bool,
    #[command(flatten)]
    pub runtime: RuntimeOpts,
}

/// What the master saw, shared by the publisher and the collector.
#[derive(Default)]
struct Seen {
    /// Returns per job, from the reply topics.
    returns: HashMap<usize, u32>,
    /// Returns whose value was not the expected one, with what came back.
    wrong: Vec<(usize, Value)>,
    pings: u64,
    /// Times the reply subscription had to be made again.
    resubscribed: u32,
}

/// `jid` of job `n`.
fn jid(n: usize) -> String {
    format!("soak-{n:08}")
}

/// The job number in a reply topic or jid.
fn job_number(s: &str) -> Option<usize> {
    s.rsplit(['.', '-']).next()?.parse().ok()
}

/// The agent job `n` targets.
fn minion(n: usize, agents: usize) -> String {
    format!("soak-{}", n % agents)
}

/// Job `n`: the message (its function and arguments, targeting
/// [`minion`]) and the return expected.
fn job(n: usize, agents: usize, dest: &Path) -> (Value, Value) {
    let (fun, arg, expect) = match n % 10 {
        8 => {
            let word = format!("soak {n}");
            ("cmd.run", json!([format!("echo {word}")]), json!(word))
        }
        9 => {
            let to = dest.join(n.to_string()).display().to_string();
            ("cp.get_file", json!(["salt://soak.txt", to]), json!(to))
        }
        _ => ("test.ping", json!([]), json!(true)),
    };
    let msg = json!({
        "jid": jid(n),
        "tempTopic": format!("{REPLY_PREFIX}{n}"),
        "fun": fun,
        "arg": arg,
        "tgt": minion(n, agents),
        "tgt_type": "list",
    });
    (msg, expect)
}

/// Collect replies until the process ends, resubscribing whenever Redis
/// goes away.
async fn collect(
    client: redis::Client,
    seen: Arc<Mutex<Seen>>,
    expected: Arc<Vec<Value>>,
    progress: Arc<tokio::sync::Notify>,
) {
    let mut first = true;
    loop {
        let subscribed = async {
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.psubscribe(format!("{REPLY_PREFIX}*")).await?;
            redis::RedisResult::Ok(pubsub)
        };
        let Ok(mut pubsub) = subscribed.await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        if !first {
            seen.lock().unwrap_or_else(|e| e.into_inner()).resubscribed += 1;
        }
        first = false;
        let mut stream = pubsub.on_message();
        while let Some(msg) = stream.next().await {
            let Ok(reply) = serde_json::from_slice::<Value>(msg.get_payload_bytes()) else {
                continue;
            };
            let Some(n) = job_number(msg.get_channel_name()) else {
                continue;
            };
            let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
            match reply["type"].as_str() {
                Some("ping") => seen.pings += 1,
                Some("return") => {
                    *seen.returns.entry(n).or_default() += 1;
                    if expected.get(n) != Some(&reply["return"]) {
                        seen.wrong.push((n, reply["return"].clone()));
                    }
                    progress.notify_one();
                }
                _ => {}
            }
        }
    }
}

/// Shut Redis down (it writes its append-only file) and wait for it to go.
async fn shutdown_redis(server: &mut RedisServer) {
    if let Ok(mut c) = server.client().get_multiplexed_async_connection().await {
        let _ = redis::cmd("SHUTDOWN").query_async::<()>(&mut c).await;
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.is_running() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

pub fn soak(args: SoakArgs) -> anyhow::Result<ExitCode> {
    if args.agents == 0 || args.jobs == 0 || args.in_flight == 0 {
        bail!("--agents, --jobs and --in-flight must be at least 1");
    }
    let setup = Setup::resolve(&args.runtime, false)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(run(args, setup))
}

async fn run(args: SoakArgs, setup: Setup) -> anyhow::Result<ExitCode> {
    let scratch = Scratch::new()?;
    let (files, dest) = (scratch.join("files"), scratch.join("dest"));
    for d in [&files, &dest] {
        std::fs::create_dir_all(d)?;
    }
    std::fs::write(files.join("soak.txt"), "a file for the soak\n")?;
    let config = scratch.join("soak.toml");
    std::fs::write(
        &config,
        format!(
            "file_roots = [{files:?}]\n\n\
             [plugins.cmd]\nexec = [\"/bin/*\", \"/usr/bin/*\"]\nshell = true\n\
             env = [\"PATH\"]\n\n\
             [plugins.cp]\nfetch = [\"salt://soak.txt\"]\n\
             dirs = [{{ path = {dest:?}, writable = true }}]\n",
            files = files.display().to_string(),
            dest = dest.display().to_string(),
        ),
    )?;

    // An append-only file, so a graceful restart keeps what was stored.
    let mut redis_server = tokio::task::spawn_blocking(|| {
        RedisServer::start_with(&[
            "--appendonly",
            "yes",
            "--appendfsync",
            "everysec",
            "--maxclients",
            "10000",
        ])
    })
    .await?;
    let url = redis_server.url();
    let client = redis_server.client();

    eprintln!("==> starting {} agents (maid-bench fleet)", args.agents);
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(&exe);
    cmd.args(["fleet", "--redis", &url, "--topic", TOPIC])
        .args(["--prefix", "soak-", "--count"])
        .arg(args.agents.to_string())
        .arg("--plugin-dir")
        .arg(&setup.plugin_dir)
        .arg("--config")
        .arg(&config);
    if let Some(cache) = &setup.cache_dir {
        cmd.arg("--cache-dir").arg(cache);
    }
    let mut fleet = Proc::spawn("maid-bench fleet", &mut cmd, scratch.join("fleet.log"))?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    super::wait_subscribed(
        &mut conn,
        TOPIC,
        args.agents,
        &mut fleet,
        Duration::from_secs(120),
    )
    .await?;
    let rss_start = rss_kib(fleet.pid());

    let expected: Arc<Vec<Value>> = Arc::new(
        (0..args.jobs)
            .map(|n| job(n, args.agents, &dest).1)
            .collect(),
    );
    let seen = Arc::new(Mutex::new(Seen::default()));
    let progress = Arc::new(tokio::sync::Notify::new());
    let collector = tokio::spawn(collect(
        client.clone(),
        seen.clone(),
        expected.clone(),
        progress.clone(),
    ));
    // Let the pattern subscription settle before the first job.
    tokio::time::sleep(Duration::from_millis(200)).await;

    eprintln!(
        "==> publishing {} jobs, {} in flight, Redis restarted {} times",
        args.jobs, args.in_flight, args.restarts
    );
    // Restarts happen beside the publisher, with jobs in flight.
    let published = Arc::new(AtomicUsize::new(0));
    let restarter = {
        let published = published.clone();
        let (jobs, restarts) = (args.jobs, args.restarts);
        let outage = Duration::from_secs_f64(args.outage_secs);
        tokio::spawn(async move {
            for k in 1..=restarts {
                while published.load(Ordering::Relaxed) < jobs * k / (restarts + 1) {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                eprintln!("==> restarting Redis ({k}/{restarts})");
                shutdown_redis(&mut redis_server).await;
                tokio::time::sleep(outage).await;
                redis_server = tokio::task::spawn_blocking(move || {
                    redis_server.restart();
                    redis_server
                })
                .await?;
            }
            anyhow::Ok((redis_server, restarts))
        })
    };
    let started = Instant::now();
    let mut outstanding: VecDeque<(usize, Instant)> = VecDeque::new();
    let (mut republished, mut publish_errors, mut given_up) = (0u64, 0u64, 0u64);
    for n in 0..args.jobs {
        // Keep at most `in_flight` jobs without a return.
        loop {
            {
                let seen = seen.lock().unwrap_or_else(|e| e.into_inner());
                while let Some((front, at)) = outstanding.front() {
                    if seen.returns.contains_key(front) {
                        outstanding.pop_front();
                    } else if at.elapsed() > GIVE_UP {
                        given_up += 1;
                        outstanding.pop_front();
                    } else {
                        break;
                    }
                }
            }
            if outstanding.len() < args.in_flight {
                break;
            }
            let _ = tokio::time::timeout(Duration::from_millis(20), progress.notified()).await;
        }
        let payload = job(n, args.agents, &dest).0.to_string();
        loop {
            fleet.check_alive()?;
            let sent = redis::cmd("PUBLISH")
                .arg(TOPIC)
                .arg(&payload)
                .query_async::<usize>(&mut conn)
                .await;
            match sent {
                Ok(receivers) if receivers >= args.agents => break,
                Ok(_) => republished += 1,
                Err(_) => {
                    publish_errors += 1;
                    if let Ok(c) = client.get_multiplexed_async_connection().await {
                        conn = c;
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        outstanding.push_back((n, Instant::now()));
        published.store(n + 1, Ordering::Relaxed);
    }
    let published_in = started.elapsed();
    let (_redis_proc, restarts_done) = restarter.await??;

    eprintln!("==> waiting for the last returns");
    let mut last_count = 0;
    let mut last_change = Instant::now();
    loop {
        let count = seen.lock().unwrap_or_else(|e| e.into_inner()).returns.len();
        if count == args.jobs {
            break;
        }
        if count != last_count {
            last_count = count;
            last_change = Instant::now();
        } else if last_change.elapsed() > DRAIN {
            break;
        }
        fleet.check_alive()?;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let elapsed = started.elapsed();
    let rss_end = rss_kib(fleet.pid());
    collector.abort();

    // Returns the reply topics missed, from the job cache.
    let (mut from_cache, mut lost) = (Vec::new(), Vec::new());
    let seen = std::mem::take(&mut *seen.lock().unwrap_or_else(|e| e.into_inner()));
    let mut wrong = seen.wrong.clone();
    let mut conn = client.get_multiplexed_async_connection().await?;
    for n in (0..args.jobs).filter(|n| !seen.returns.contains_key(n)) {
        let cached: Option<String> = redis::cmd("HGET")
            .arg(maid_agent::protocol::job_key(&jid(n)))
            .arg(minion(n, args.agents))
            .query_async(&mut conn)
            .await?;
        match cached.and_then(|c| serde_json::from_str::<Value>(&c).ok()) {
            Some(ret) => {
                if ret["return"] != expected[n] {
                    wrong.push((n, ret["return"].clone()));
                }
                from_cache.push(n);
            }
            None => lost.push(n),
        }
    }
    let duplicates = seen.returns.values().filter(|c| **c > 1).count();

    let mut t = Table::new(
        &format!(
            "soak: {} agents, {} jobs, Redis restarted {} times",
            args.agents, args.jobs, restarts_done
        ),
        &["figure", "value"],
    );
    let mut row = |k: &str, v: String| t.row(vec![k.into(), v]);
    row("jobs published", args.jobs.to_string());
    row(
        "republished (reached only some agents)",
        republished.to_string(),
    );
    row(
        "publish attempts refused (Redis down)",
        publish_errors.to_string(),
    );
    row(
        "returns on the reply topics",
        seen.returns.len().to_string(),
    );
    row(
        "returns found only in the job cache",
        from_cache.len().to_string(),
    );
    row("lost", lost.len().to_string());
    row("duplicate returns", duplicates.to_string());
    row("wrong returns", wrong.len().to_string());
    row("PINGs received", seen.pings.to_string());
    row("reply subscription re-made", seen.resubscribed.to_string());
    row("jobs past the in-flight wait (10 s)", given_up.to_string());
    row(
        "publishing took",
        format!("{:.1} s", published_in.as_secs_f64()),
    );
    row("run took", format!("{:.1} s", elapsed.as_secs_f64()));
    row(
        "jobs per second",
        format!("{:.0}", args.jobs as f64 / elapsed.as_secs_f64()),
    );
    row(
        "agents' RSS at start",
        format!("{:.1} MiB", rss_start as f64 / 1024.0),
    );
    row(
        "agents' RSS at end",
        format!("{:.1} MiB", rss_end as f64 / 1024.0),
    );
    print!("{}", t.text());
    for (n, got) in wrong.iter().take(5) {
        println!("wrong return for {}: {got}", jid(n.to_owned()));
    }
    for n in lost.iter().take(5) {
        println!("lost: {}", jid(*n));
    }
    if args.markdown {
        println!();
        print!("{}", t.markdown());
        println!(
            "\nmachine: {}\n\ncommand: `maid-bench soak --agents {} --jobs {} --restarts {} --outage-secs {} --in-flight {}`",
            machine(&redis_server_bin()),
            args.agents,
            args.jobs,
            args.restarts,
            args.outage_secs,
            args.in_flight
        );
    }
    Ok(if lost.is_empty() && wrong.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
