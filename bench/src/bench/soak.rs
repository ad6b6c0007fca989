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
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::bail;
use clap::Args;
use futures_util::StreamExt;
use redis::aio::MultiplexedConnection;
use serde_json::{Value, json};

use maid_testkit::Proc;
use maid_testkit::redis::{RedisServer, redis_server_bin};

use super::master::wait_subscribed;
use super::procfs::{machine, rss_kib};
use super::scratch::Scratch;
use super::table::Table;
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

/// `maid-bench soak`: the soak on a current-thread runtime; failure when
/// a job was lost or returned the wrong value.
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

/// The soak: start Redis and the fleet, publish every job with Redis
/// restarted under them, wait for the last returns, look up the missing
/// ones in the job cache, and report.
async fn run(args: SoakArgs, setup: Setup) -> anyhow::Result<ExitCode> {
    let scratch = Scratch::new()?;
    let (config, dest) = write_files(&scratch)?;
    let redis_server = start_redis().await?;
    let url = redis_server.url();
    let client = redis_server.client();
    let mut fleet = start_fleet(&args, &setup, &url, &config, &scratch)?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    wait_subscribed(
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
    let restarter = restarter(redis_server, published.clone(), &args);
    let started = Instant::now();
    let mut outstanding: VecDeque<(usize, Instant)> = VecDeque::new();
    let mut tally = Tally::default();
    for n in 0..args.jobs {
        let room = wait_for_room(&mut outstanding, &seen, &progress, args.in_flight);
        tally.given_up += room.await;
        let payload = job(n, args.agents, &dest).0.to_string();
        publish(
            &mut conn,
            &client,
            &mut fleet,
            &payload,
            args.agents,
            &mut tally,
        )
        .await?;
        outstanding.push_back((n, Instant::now()));
        published.store(n + 1, Ordering::Relaxed);
    }
    let published_in = started.elapsed();
    let (_redis_proc, restarts) = restarter.await??;

    drain(&seen, args.jobs, &mut fleet).await?;
    let elapsed = started.elapsed();
    let rss_end = rss_kib(fleet.pid());
    collector.abort();

    let seen = std::mem::take(&mut *seen.lock().unwrap_or_else(|e| e.into_inner()));
    let found = from_job_cache(&client, &seen, &expected, args.agents, args.jobs).await?;
    let figures = Figures {
        restarts,
        tally,
        seen,
        found,
        published_in,
        elapsed,
        rss: [rss_start, rss_end],
    };
    Ok(report(&args, &figures))
}

/// The soak's files in `scratch`: `salt://soak.txt` under `files`, the
/// directory `cp.get_file` copies it to, and the agents' config, which
/// grants both and `cmd.run`. The config's path, and that directory.
fn write_files(scratch: &Scratch) -> anyhow::Result<(PathBuf, PathBuf)> {
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
    Ok((config, dest))
}

/// A private `redis-server` with an append-only file, so a graceful
/// restart keeps what was stored.
async fn start_redis() -> anyhow::Result<RedisServer> {
    let redis_server = tokio::task::spawn_blocking(|| {
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
    Ok(redis_server)
}

/// `args.agents` agents in one `maid-bench fleet` process on `url`, with
/// the soak's `config`.
fn start_fleet(
    args: &SoakArgs,
    setup: &Setup,
    url: &str,
    config: &Path,
    scratch: &Scratch,
) -> anyhow::Result<Proc> {
    eprintln!("==> starting {} agents (maid-bench fleet)", args.agents);
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(&exe);
    cmd.args(["fleet", "--redis", url, "--topic", TOPIC])
        .args(["--prefix", "soak-", "--count"])
        .arg(args.agents.to_string())
        .arg("--plugin-dir")
        .arg(&setup.plugin_dir)
        .arg("--config")
        .arg(config);
    if let Some(cache) = &setup.cache_dir {
        cmd.arg("--cache-dir").arg(cache);
    }
    Proc::spawn("maid-bench fleet", &mut cmd, scratch.join("fleet.log"))
}

/// Shut Redis down and start it again, `--restarts` times, each when its
/// share of the jobs has been `published`; Redis and the restarts done.
fn restarter(
    mut redis_server: RedisServer,
    published: Arc<AtomicUsize>,
    args: &SoakArgs,
) -> tokio::task::JoinHandle<anyhow::Result<(RedisServer, usize)>> {
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
}

/// What the publisher counted.
#[derive(Default)]
struct Tally {
    /// Publishes that reached only some agents, made again.
    republished: u64,
    /// Publishes refused while Redis was down.
    publish_errors: u64,
    /// Jobs that stopped counting against the in-flight bound without a
    /// return ([`GIVE_UP`]).
    given_up: u64,
}

/// Wait until fewer than `in_flight` jobs are without a return; how many
/// stopped counting after [`GIVE_UP`] without one.
async fn wait_for_room(
    outstanding: &mut VecDeque<(usize, Instant)>,
    seen: &Mutex<Seen>,
    progress: &tokio::sync::Notify,
    in_flight: usize,
) -> u64 {
    let mut given_up = 0;
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
        if outstanding.len() < in_flight {
            return given_up;
        }
        let _ = tokio::time::timeout(Duration::from_millis(20), progress.notified()).await;
    }
}

/// Publish one job until it reaches every one of the `agents`: again
/// under the same jid while some are resubscribing, on a new connection
/// while Redis is down.
async fn publish(
    conn: &mut MultiplexedConnection,
    client: &redis::Client,
    fleet: &mut Proc,
    payload: &str,
    agents: usize,
    tally: &mut Tally,
) -> anyhow::Result<()> {
    loop {
        fleet.check_alive()?;
        let sent = redis::cmd("PUBLISH")
            .arg(TOPIC)
            .arg(payload)
            .query_async::<usize>(conn)
            .await;
        match sent {
            Ok(receivers) if receivers >= agents => return Ok(()),
            Ok(_) => tally.republished += 1,
            Err(_) => {
                tally.publish_errors += 1;
                if let Ok(c) = client.get_multiplexed_async_connection().await {
                    *conn = c;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Wait for the last returns: until every one of the `jobs` has one, or
/// none came for [`DRAIN`].
async fn drain(seen: &Mutex<Seen>, jobs: usize, fleet: &mut Proc) -> anyhow::Result<()> {
    eprintln!("==> waiting for the last returns");
    let mut last_count = 0;
    let mut last_change = Instant::now();
    loop {
        let count = seen.lock().unwrap_or_else(|e| e.into_inner()).returns.len();
        if count == jobs {
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
    Ok(())
}

/// The returns the reply topics missed, looked up in the job cache, and
/// every wrong return.
struct Found {
    /// Jobs whose return is only in the job cache.
    from_cache: Vec<usize>,
    /// Jobs with a return in neither place.
    lost: Vec<usize>,
    /// Returns, from either place, that were not the expected value.
    wrong: Vec<(usize, Value)>,
}

/// Look up in the job cache every job with no return on its reply topic.
async fn from_job_cache(
    client: &redis::Client,
    seen: &Seen,
    expected: &[Value],
    agents: usize,
    jobs: usize,
) -> anyhow::Result<Found> {
    let (mut from_cache, mut lost) = (Vec::new(), Vec::new());
    let mut wrong = seen.wrong.clone();
    let mut conn = client.get_multiplexed_async_connection().await?;
    for n in (0..jobs).filter(|n| !seen.returns.contains_key(n)) {
        let cached: Option<String> = redis::cmd("HGET")
            .arg(maid_agent::protocol::job_key(&jid(n)))
            .arg(minion(n, agents))
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
    Ok(Found {
        from_cache,
        lost,
        wrong,
    })
}

/// Everything the report shows.
struct Figures {
    /// Redis restarts done.
    restarts: usize,
    tally: Tally,
    /// What came in on the reply topics.
    seen: Seen,
    found: Found,
    published_in: Duration,
    elapsed: Duration,
    /// The agents' RSS at the start and at the end, in KiB.
    rss: [u64; 2],
}

/// Print the report (in Markdown too with `--markdown`), the first wrong
/// and lost jobs; success when nothing was lost or wrong.
fn report(args: &SoakArgs, f: &Figures) -> ExitCode {
    let t = table(args, f);
    print!("{}", t.text());
    for (n, got) in f.found.wrong.iter().take(5) {
        println!("wrong return for {}: {got}", jid(n.to_owned()));
    }
    for n in f.found.lost.iter().take(5) {
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
    if f.found.lost.is_empty() && f.found.wrong.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The report's table: one figure a row.
fn table(args: &SoakArgs, f: &Figures) -> Table {
    let duplicates = f.seen.returns.values().filter(|c| **c > 1).count();
    let mut t = Table::new(
        &format!(
            "soak: {} agents, {} jobs, Redis restarted {} times",
            args.agents, args.jobs, f.restarts
        ),
        &["figure", "value"],
    );
    let mut row = |k: &str, v: String| t.row(vec![k.into(), v]);
    row("jobs published", args.jobs.to_string());
    row(
        "republished (reached only some agents)",
        f.tally.republished.to_string(),
    );
    row(
        "publish attempts refused (Redis down)",
        f.tally.publish_errors.to_string(),
    );
    row(
        "returns on the reply topics",
        f.seen.returns.len().to_string(),
    );
    row(
        "returns found only in the job cache",
        f.found.from_cache.len().to_string(),
    );
    row("lost", f.found.lost.len().to_string());
    row("duplicate returns", duplicates.to_string());
    row("wrong returns", f.found.wrong.len().to_string());
    row("PINGs received", f.seen.pings.to_string());
    row(
        "reply subscription re-made",
        f.seen.resubscribed.to_string(),
    );
    row(
        "jobs past the in-flight wait (10 s)",
        f.tally.given_up.to_string(),
    );
    row(
        "publishing took",
        format!("{:.1} s", f.published_in.as_secs_f64()),
    );
    row("run took", format!("{:.1} s", f.elapsed.as_secs_f64()));
    row(
        "jobs per second",
        format!("{:.0}", args.jobs as f64 / f.elapsed.as_secs_f64()),
    );
    row(
        "agents' RSS at start",
        format!("{:.1} MiB", f.rss[0] as f64 / 1024.0),
    );
    row(
        "agents' RSS at end",
        format!("{:.1} MiB", f.rss[1] as f64 / 1024.0),
    );
    t
}
