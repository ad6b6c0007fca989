//! The agent under faults and load, against real servers: Redis killed and
//! restarted mid-stream, a Cluster node restarted, overload answered busy,
//! plugins hot-reloaded during a stream of calls, health and metrics.

use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::fleet::{
    request, run, start_agent, start_agent_with_plugins, wait_registered, wait_subscribers,
};
use crate::common::redis::{Cluster, RedisServer};
use maid_bus::{Bus, RedisConfig};
use serde_json::json;

/// Run jobs until `n` in a row get every return.
async fn until_healthy(bus: &Bus, returns: usize, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut streak = 0;
    let mut req = request("*", "glob", "test.ping", json!([]), json!({}));
    req.collect.timeout = Duration::from_secs(3);
    while streak < n {
        assert!(Instant::now() < deadline, "the fleet did not recover");
        if bus.connect().await.is_err() {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        }
        let report = run(bus, &req).await;
        if report.returns.len() == returns {
            streak += 1;
        } else {
            streak = 0;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_restarted_mid_stream_loses_no_return() {
    let mut server = RedisServer::start();
    let redis = server.config();
    let bus = Bus::new(&redis).unwrap();
    let _a = start_agent(&redis, "steady", "[agent]\nheartbeat_secs = 1\n");
    wait_registered(&bus, &["steady"]).await;

    // A job that finishes while Redis is down.
    let job = json!({"jid": "outage-1", "tempTopic": "gone", "fun": "test.sleep",
                     "arg": [1.5], "tgt": "*"})
    .to_string();
    // Redis goes down once the maid has the job (it PINGs on taking it).
    let replies = bus.subscribe(&["gone".to_string()]).await.unwrap();
    let mut replies = replies.into_on_message();
    let mut conn = bus.connect().await.unwrap();
    maid_bus::publish(&mut conn, crate::common::fleet::TOPIC, &job)
        .await
        .unwrap();
    let ping = tokio::time::timeout(
        crate::common::fleet::REPLY_DEADLINE,
        futures_util::StreamExt::next(&mut replies),
    )
    .await
    .expect("the maid never pinged")
    .unwrap();
    assert!(
        matches!(
            serde_json::from_slice(ping.get_payload_bytes()),
            Ok(maid_agent::protocol::Reply::Ping(_))
        ),
        "{ping:?}"
    );
    drop(replies);
    server.kill();
    tokio::time::sleep(Duration::from_secs(3)).await;
    server.restart();

    // Every job published after it is back gets its return...
    wait_subscribers(&bus, 1).await;
    until_healthy(&bus, 1, 10).await;
    // ...and the return produced during the outage reached the job cache.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut conn = bus.connect().await.unwrap();
        let cached = maid_master::jobs::cached_returns(&mut conn, "outage-1")
            .await
            .unwrap();
        if let Some(r) = cached.first() {
            assert_eq!((r.ret.clone(), r.retcode), (json!(true), 0));
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the outage's return never reached the cache"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The registry came back too (the alive key lives 3 heartbeats, so
    // look until it is there rather than once).
    let mut conn = bus.connect().await.unwrap();
    let deadline = Instant::now() + crate::common::fleet::REPLY_DEADLINE;
    while !maid_master::jobs::alive_maids(&mut conn, None)
        .await
        .unwrap()["steady"]
        .0
    {
        assert!(Instant::now() < deadline, "the registry never came back");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_cluster_node_is_survived() {
    let mut cluster = tokio::task::spawn_blocking(Cluster::start).await.unwrap();
    let redis = cluster.config();
    let bus = Bus::new(&redis).unwrap();
    let _a = start_agent(&redis, "k-1", "");
    let _b = start_agent(&redis, "k-2", "");
    wait_registered(&bus, &["k-1", "k-2"]).await;
    until_healthy(&bus, 2, 2).await;
    // Node 0 is where the subscriptions went (the first seed that answers).
    let cluster = tokio::task::spawn_blocking(move || {
        cluster.restart_node(0);
        cluster
    })
    .await
    .unwrap();
    until_healthy(&bus, 2, 5).await;
    drop(cluster);
}

/// A return whose PUBLISH Redis took but whose job-cache write failed is
/// retried for the cache write only: the master gets it once.
async fn a_published_return_is_retried_for_the_cache_only(redis: RedisConfig) {
    use futures_util::StreamExt;
    use maid_agent::outbox::{Pending, deliver};
    use redis::AsyncCommands;

    let bus = Bus::new(&redis).unwrap();
    let mut conn = bus.connect().await.unwrap();
    // Where replies are heard: sharded on a Redis 7 cluster.
    let mut replies = bus.replies("retry-reply").await.unwrap();
    // The job's cache key holds a string: HSET fails with WRONGTYPE.
    let key = maid_agent::protocol::job_key("retry-1");
    let _: () = conn.set(&key, "in the way").await.unwrap();
    let mut p = Pending {
        topic: "retry-reply".into(),
        payload: r#"{"return":true}"#.into(),
        jid: "retry-1".into(),
        id: "m1".into(),
        published: false,
    };
    let err = deliver(&mut conn, &mut p, 60).await.unwrap_err();
    assert!(err.to_string().contains("WRONGTYPE"), "{err}");
    assert!(p.published, "Redis took the PUBLISH");

    let _: () = conn.del(&key).await.unwrap();
    deliver(&mut conn, &mut p, 60).await.unwrap();
    let cached: std::collections::HashMap<String, String> = conn.hgetall(&key).await.unwrap();
    assert_eq!(cached.get("m1"), Some(&p.payload));
    let ttl: i64 = conn.ttl(&key).await.unwrap();
    assert!((1..=60).contains(&ttl), "ttl {ttl}");

    let first = tokio::time::timeout(Duration::from_secs(5), replies.next())
        .await
        .expect("the return was published")
        .unwrap();
    assert_eq!(first.get_payload::<String>().unwrap(), p.payload);
    let again = tokio::time::timeout(Duration::from_millis(500), replies.next()).await;
    assert!(again.is_err(), "the return was published twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_published_return_is_not_published_again() {
    let server = RedisServer::start();
    a_published_return_is_retried_for_the_cache_only(server.config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_published_return_is_not_published_again_on_a_cluster() {
    let cluster = tokio::task::spawn_blocking(Cluster::start).await.unwrap();
    let redis = cluster.config();
    a_published_return_is_retried_for_the_cache_only(redis).await;
    drop(cluster);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overload_is_answered_busy_never_silence() {
    let server = RedisServer::start();
    let redis = server.config();
    let bus = Bus::new(&redis).unwrap();
    let _a = start_agent(&redis, "small", "[agent]\nconcurrency = 1\nqueue = 1\n");
    wait_registered(&bus, &["small"]).await;

    let mut jobs = Vec::new();
    for _ in 0..5 {
        let bus = bus.clone();
        jobs.push(tokio::spawn(async move {
            // Long enough that all five arrive while the first runs.
            let mut req = request("*", "glob", "test.sleep", json!([3]), json!({}));
            req.collect.timeout = Duration::from_secs(30);
            run(&bus, &req).await
        }));
    }
    let mut codes = Vec::new();
    for j in jobs {
        let report = j.await.unwrap();
        assert_eq!(report.returns.len(), 1, "every job is answered: {report:?}");
        codes.push(report.returns[0].retcode);
        if report.returns[0].retcode == maid_agent::agent::BUSY_RETCODE {
            let msg = report.returns[0].ret.as_str().unwrap();
            assert!(msg.starts_with("Busy: "), "{msg}");
        }
    }
    codes.sort();
    assert_eq!(codes, [0, 0, 75, 75, 75]);
}

/// A burst of jobs arriving together at an agent on its default single
/// worker (where the jobs that arrived together have their PINGs, then
/// their returns, written in one go): each job is PINGed before it
/// returns, and each is answered exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_jobs_is_each_pinged_before_it_returns_and_answered_once() {
    use maid_agent::protocol::Reply;
    const JOBS: usize = 300;
    let server = RedisServer::start();
    let redis = server.config();
    let bus = Bus::new(&redis).unwrap();
    let _a = start_agent(&redis, "burst", "");
    wait_registered(&bus, &["burst"]).await;

    let topic = "burst.replies".to_string();
    let replies = bus.subscribe(std::slice::from_ref(&topic)).await.unwrap();
    let mut replies = replies.into_on_message();
    // Every job in one write: they reach the agent together.
    let mut pipe = redis::pipe();
    for i in 0..JOBS {
        let job = json!({"jid": format!("burst-{i}"), "tempTopic": topic,
                         "fun": "test.ping", "arg": [], "tgt": "*"});
        pipe.cmd("PUBLISH")
            .arg(crate::common::fleet::TOPIC)
            .arg(job.to_string())
            .ignore();
    }
    let mut conn = bus.connect().await.unwrap();
    let () = pipe.query_async(&mut conn).await.unwrap();

    // jid -> (PINGs seen, returns seen); a return counts only after a PING.
    let mut seen: std::collections::HashMap<String, (usize, usize)> = Default::default();
    let deadline = Instant::now() + Duration::from_secs(60);
    let returned = |seen: &std::collections::HashMap<String, (usize, usize)>| {
        seen.values().filter(|(_, r)| *r > 0).count()
    };
    while returned(&seen) < JOBS {
        let left = deadline.saturating_duration_since(Instant::now());
        let msg = tokio::time::timeout(left, futures_util::StreamExt::next(&mut replies))
            .await
            .unwrap_or_else(|_| panic!("only {} of {JOBS} jobs returned", returned(&seen)))
            .unwrap();
        match serde_json::from_slice::<Reply>(msg.get_payload_bytes()).unwrap() {
            Reply::Ping(p) => {
                assert!(p.matched, "{p:?}");
                seen.entry(p.jid).or_default().0 += 1;
            }
            Reply::Return(r) => {
                let (pings, returns) = seen.entry(r.jid.clone()).or_default();
                assert_eq!(*pings, 1, "{} returned before its PING", r.jid);
                *returns += 1;
                assert_eq!(*returns, 1, "{} returned twice", r.jid);
                assert_eq!((r.ret, r.retcode), (json!(true), 0));
            }
            other => panic!("{other:?}"),
        }
    }
    // Nothing more comes: no second PING or return for any job.
    let late = tokio::time::timeout(LATE, futures_util::StreamExt::next(&mut replies)).await;
    assert!(late.is_err(), "a reply after every job returned: {late:?}");
    assert_eq!(seen.len(), JOBS);
    assert!(seen.values().all(|&c| c == (1, 1)), "{seen:?}");
}

/// How long a test waits to see that nothing more arrives.
const LATE: Duration = Duration::from_millis(500);

fn http_get(port: u16, path: &str) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let code = text[9..12].parse().unwrap();
    let body = text
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .to_string();
    (code, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugins_hot_reload_during_a_stream_of_calls() {
    let server = RedisServer::start();
    let redis = server.config();
    let bus = Bus::new(&redis).unwrap();
    let plugins = tempfile::tempdir().unwrap();
    let from = Path::new(crate::common::guests::PLUGINS_DIR);
    std::fs::copy(from.join("test.wasm"), plugins.path().join("test.wasm")).unwrap();
    let port = crate::common::redis::free_port();
    let mut agent = start_agent_with_plugins(
        &redis,
        "hot",
        &format!("[agent]\nplugin_poll_secs = 1\nhttp = \"127.0.0.1:{port}\"\n"),
        plugins.path(),
    );
    wait_registered(&bus, &["hot"]).await;

    // A stream of calls runs throughout.
    let stream = {
        let bus = bus.clone();
        tokio::spawn(async move {
            let mut missed = 0;
            for _ in 0..30 {
                let report = run(
                    &bus,
                    &request("*", "glob", "test.ping", json!([]), json!({})),
                )
                .await;
                if report.returns.len() != 1 {
                    missed += 1;
                }
            }
            missed
        })
    };
    let cp = request("*", "glob", "cp.hash_file", json!(["salt://x"]), json!({}));
    let report = run(&bus, &cp).await;
    assert_eq!(report.returns[0].retcode, 254);

    // Added: picked up without a restart, and the registry follows.
    std::fs::copy(from.join("cp.wasm"), plugins.path().join("cp.wasm")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let report = run(&bus, &cp).await;
        if report.returns[0].retcode != 254 {
            break;
        }
        assert!(Instant::now() < deadline, "cp.wasm was never loaded");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // The registration is rewritten after the swap, in no set order with
    // the first call.
    let mut conn = bus.connect().await.unwrap();
    loop {
        let reg = maid_master::jobs::alive_maids(&mut conn, None)
            .await
            .unwrap()["hot"]
            .1
            .clone()
            .unwrap();
        if reg.functions.contains(&"cp.hash_file".to_string()) {
            break;
        }
        assert!(Instant::now() < deadline, "{:?}", reg.functions);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Removed: gone, on SIGHUP at once.
    std::fs::remove_file(plugins.path().join("cp.wasm")).unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(agent.pid() as i32),
        nix::sys::signal::Signal::SIGHUP,
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let report = run(&bus, &cp).await;
        if report.returns[0].retcode == 254 {
            break;
        }
        assert!(Instant::now() < deadline, "cp.wasm was never unloaded");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert_eq!(stream.await.unwrap(), 0, "calls were lost during reloads");

    // Health and metrics.
    let (code, body) = tokio::task::spawn_blocking(move || http_get(port, "/healthz"))
        .await
        .unwrap();
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&body).unwrap(),
        json!({"redis_connected": true, "plugins_loaded": 1})
    );
    let (code, body) = tokio::task::spawn_blocking(move || http_get(port, "/metrics"))
        .await
        .unwrap();
    assert_eq!(code, 200);
    assert!(
        body.contains("maid_jobs_received_total{fun=\"test.ping\"}"),
        "{body}"
    );
    assert!(
        body.contains("maid_jobs_run_total{fun=\"cp.hash_file\"}"),
        "{body}"
    );
    assert!(body.contains("maid_job_duration_seconds_bucket"), "{body}");
    assert!(body.contains("maid_ping_latency_seconds_count"), "{body}");
    // Loaded from the kept manifest (or, on a cold shared cache, compiled).
    assert!(
        ["deferred", "hit", "miss"]
            .iter()
            .any(|o| body.contains(&format!("maid_plugin_cache_total{{outcome=\"{o}\"}}"))),
        "{body}"
    );
    assert_eq!(agent.terminate().code(), Some(0));
}

/// Returns past the memory buffer go to the spill file, each once, and all
/// of them, memory first, reach Redis when it answers again; while it does
/// not, nothing is lost from either.
#[tokio::test]
async fn returns_past_the_buffer_spill_to_a_file_and_all_are_delivered() {
    use futures_util::StreamExt;
    use maid_agent::metrics::Metrics;
    use maid_agent::outbox::{Outbox, Pending};
    use std::os::unix::fs::PermissionsExt;

    let mut server = RedisServer::start();
    let bus = Bus::new(&server.config()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spill.jsonl");
    let metrics = Metrics::new();
    let outbox = Outbox::new(1, 1 << 20, Some(path.clone()));
    let pending = |i: usize| Pending {
        topic: "t-spill".into(),
        payload: format!("{{\"n\": {i}}}"),
        jid: format!("j{i}"),
        id: "maid-s".into(),
        published: false,
    };
    for i in 0..4 {
        outbox.push(pending(i), &metrics);
    }
    assert_eq!(outbox.len(), 1);
    let spilled = std::fs::read_to_string(&path).unwrap();
    let jids: Vec<String> = spilled
        .lines()
        .map(|l| serde_json::from_str::<Pending>(l).unwrap().jid)
        .collect();
    assert_eq!(jids, ["j1", "j2", "j3"]);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);

    // Redis gone: the flush fails and keeps everything.
    let mut conn = bus.connect().await.unwrap();
    server.kill();
    assert!(outbox.flush(&mut conn, 60, &metrics).await.is_err());
    assert_eq!(outbox.len(), 1);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), spilled);

    // Back: all four are published and cached, and the file is gone.
    server.restart();
    let mut conn = bus.connect().await.unwrap();
    let mut sub = bus.subscribe(&["t-spill".to_string()]).await.unwrap();
    assert_eq!(outbox.flush(&mut conn, 60, &metrics).await.unwrap(), 4);
    assert!(outbox.is_empty() && !path.exists());
    for i in 0..4 {
        let cached: Option<String> = redis::cmd("HGET")
            .arg(maid_agent::protocol::job_key(&format!("j{i}")))
            .arg("maid-s")
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(cached, Some(format!("{{\"n\": {i}}}")), "j{i}");
    }
    let mut published = Vec::new();
    let mut messages = sub.on_message();
    while published.len() < 4 {
        let m = tokio::time::timeout(Duration::from_secs(5), messages.next())
            .await
            .expect("every return published")
            .unwrap();
        published.push(m.get_payload::<String>().unwrap());
    }
    let expected: Vec<String> = (0..4).map(|i| format!("{{\"n\": {i}}}")).collect();
    assert_eq!(published, expected, "memory first, then the file, in order");
}
