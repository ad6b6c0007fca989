//! The fleet round trip over a real `redis-server` with real agent
//! processes: every PROTOCOL message and field, targeting, missed maids
//! and minions, empty, repeated, duplicate jids, bad input, Salt's
//! aliases, the job cache, the registry, `maid cp`, and shutdown.

use std::time::Duration;

use crate::common::fleet::{
    LINGER, REPLY_DEADLINE, TOPIC, collect_replies, maid_cli, raw_round_trip, request, run,
    run_watching, run_with_replies, start_agent, wait_registered,
};
use crate::common::redis::RedisServer;
use maid_agent::protocol::Reply;
use maid_bus::{Bus, publish};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_trip_has_every_protocol_field() {
    let server = RedisServer::start();
    let redis = server.config();
    let bus = Bus::new(&redis).unwrap();
    let _a = start_agent(&redis, "maid-a", "[grains]\nrole = \"web\"\n");
    wait_registered(&bus, &["maid-a"]).await;

    let replies = raw_round_trip(
        &bus,
        "reply-1",
        &json!({"jid": "20261121000000000001", "tempTopic": "reply-1", "fun": "test.echo",
                "arg": ["hi"], "kwarg": {}, "tgt": "maid-*", "out": "json"})
        .to_string(),
        2,
    )
    .await;
    assert_eq!(replies.len(), 2, "{replies:?}");
    let Reply::Ping(ping) = &replies[0] else {
        panic!("{replies:?}")
    };
    assert_eq!(
        (ping.sub_ip.as_str(), ping.jid.as_str(), ping.matched),
        ("maid-a", "20261121000000000001", true)
    );
    let Reply::Return(ret) = &replies[1] else {
        panic!("{replies:?}")
    };
    assert_eq!(ret.sub_ip, "maid-a");
    assert_eq!(ret.id, "maid-a");
    assert_eq!(ret.jid, "20261121000000000001");
    assert_eq!(ret.fun, "test.echo");
    assert_eq!(ret.fun_args, vec![json!("hi")]);
    assert_eq!(ret.ret, json!("hi"));
    assert_eq!((ret.retcode, ret.success), (0, true));
    assert_eq!(ret.out, "json");
    assert_eq!(ret.stamp.len(), 26);
    assert_eq!(
        ret.ret_,
        json!({"maid-a": "hi"}).as_object().unwrap().clone()
    );

    // The same return is in the job cache, and the maid in the registry.
    let cached = crate::common::fleet::cached_returns(&bus, "20261121000000000001", 1).await;
    assert_eq!(cached, vec![ret.clone()]);
    let mut conn = bus.connect().await.unwrap();
    let ttl: i64 = redis::cmd("TTL")
        .arg("maid:job:20261121000000000001")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(ttl > 86_000 && ttl <= 86_400, "{ttl}");
    let maids = maid_master::jobs::alive_maids(&mut conn, None)
        .await
        .unwrap();
    let (alive, reg) = &maids["maid-a"];
    let reg = reg.as_ref().unwrap();
    assert!(alive);
    assert_eq!(reg.master_topics, vec![TOPIC.to_string()]);
    assert!(reg.functions.contains(&"cmd.run".to_string()));
    assert_eq!(reg.grains["role"], json!("web"));
    assert_eq!(reg.grains["id"], json!("maid-a"));
    let alive_ttl: i64 = redis::cmd("TTL")
        .arg("maid:alive:maid-a")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(alive_ttl > 0 && alive_ttl <= 30, "{alive_ttl}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn targeting_and_the_report() {
    let server = RedisServer::start();
    let redis = server.config();
    let bus = Bus::new(&redis).unwrap();
    let _web = start_agent(&redis, "web-1", "[grains]\nroles = [\"web\", \"edge\"]\n");
    let _db = start_agent(&redis, "db-1", "[grains]\nroles = [\"db\"]\n");
    wait_registered(&bus, &["web-1", "db-1"]).await;

    let cases = [
        ("*", "glob", vec!["db-1", "web-1"]),
        ("web-*", "glob", vec!["web-1"]),
        ("db-1,nobody", "list", vec!["db-1"]),
        ("^web", "pcre", vec!["web-1"]),
        ("roles:edge", "grain", vec!["web-1"]),
        ("G@roles:db or L@web-1", "compound", vec!["db-1", "web-1"]),
        ("* and not web-*", "compound", vec!["db-1"]),
    ];
    for (tgt, tgt_type, expected) in cases {
        let mut req = request(tgt, tgt_type, "test.ping", json!([]), json!({}));
        req.collect.timeout = Duration::from_secs(60);
        let report = run(&bus, &req).await;
        let returned: Vec<&str> = {
            let mut v: Vec<&str> = report.returns.iter().map(|r| r.id.as_str()).collect();
            v.sort();
            v
        };
        assert_eq!(returned, expected, "{tgt_type} {tgt}");
        let targeted: Vec<&str> = report.targeted.iter().map(String::as_str).collect();
        assert_eq!(targeted, expected, "{tgt_type} {tgt}");
        // The others pinged match:false: empty, not missed.
        assert_eq!(report.empty.len(), 2 - expected.len(), "{tgt_type} {tgt}");
        assert!(report.missed_maids.is_empty() && report.missed_minions.is_empty());
        assert_eq!(report.exit_code(), 0);
        // Stopped once everything expected came back, long before the
        // timeout (the margin is wide: this is no performance check).
        assert!(
            report.elapsed < req.collect.timeout / 2,
            "{:?}",
            report.elapsed
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missed_maids_missed_minions_and_repeats() {
    let server = RedisServer::start();
    let redis = server.config();
    let bus = Bus::new(&redis).unwrap();
    let mut gone = start_agent(&redis, "gone", "");
    let mut dying = start_agent(&redis, "dying", "");
    let _twin1 = start_agent(&redis, "twin", "");
    let _twin2 = start_agent(&redis, "twin", "");
    let _ok = start_agent(&redis, "ok", "");
    wait_registered(&bus, &["gone", "dying", "twin", "ok"]).await;
    // Both twins listen (one registration covers both).
    crate::common::fleet::wait_subscribers(&bus, 5).await;

    // A stopped agent is a missed maid (its alive key outlives it).
    gone.kill();
    let mut req = request("*", "glob", "test.sleep", json!([2]), json!({}));
    req.collect.timeout = Duration::from_secs(8);
    // An agent that dies after it pinged is a missed minion.
    let (job, pinged) = run_watching(&bus, req, "dying").await;
    pinged.await.unwrap();
    dying.kill();
    let report = job.await.unwrap();
    assert!(report.missed_maids.contains("gone"), "{report:?}");
    assert!(report.missed_minions.contains("dying"), "{report:?}");
    assert_eq!(report.repeated.get("twin"), Some(&2), "{report:?}");
    let returned: Vec<&str> = report.returns.iter().map(|r| r.id.as_str()).collect();
    assert!(returned.contains(&"ok") && returned.contains(&"twin"));
    assert_eq!(report.exit_code(), 1);

    // Excluded ids are never expected.
    let mut req = request("ok", "glob", "test.ping", json!([]), json!({}));
    req.collect.exclude = ["gone".to_string(), "dying".to_string()].into();
    let report = run(&bus, &req).await;
    assert!(report.missed_maids.is_empty(), "{report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_never_stops_the_agent() {
    let server = RedisServer::start();
    let redis = server.config();
    let bus = Bus::new(&redis).unwrap();
    let _a = start_agent(&redis, "solid", "");
    wait_registered(&bus, &["solid"]).await;
    let mut conn = bus.connect().await.unwrap();

    let huge = format!(
        "{{\"jid\": \"9\", \"tempTopic\": \"t9\", \"fun\": \"test.echo\", \"arg\": [\"{}\"]}}",
        "x".repeat(10 << 20)
    );
    for junk in [
        "not json at all".to_string(),
        "[1, 2, 3]".into(),
        json!({"jid": "1", "fun": "test.ping"}).to_string(),
        json!({"tempTopic": "t", "fun": "test.ping"}).to_string(),
        huge,
        "\u{0}\u{1}binary".into(),
    ] {
        publish(&mut conn, TOPIC, &junk).await.unwrap();
    }
    // Wrong types: a reject on the reply topic, nothing executed.
    let replies = raw_round_trip(
        &bus,
        "bad-types",
        &json!({"jid": "2", "tempTopic": "bad-types", "fun": ["test.ping"], "arg": "x"})
            .to_string(),
        1,
    )
    .await;
    assert_eq!(replies.len(), 1, "{replies:?}");
    let Reply::Reject(r) = &replies[0] else {
        panic!("{replies:?}")
    };
    assert_eq!(
        (r.sub_ip.as_str(), r.jid.as_str(), r.reason.as_str()),
        ("solid", "2", "malformed")
    );

    // An unknown function still comes back, as Salt's not-available return.
    let report = run(
        &bus,
        &request("*", "glob", "nope.nothing", json!([]), json!({})),
    )
    .await;
    assert_eq!(report.returns[0].retcode, 254);
    assert_eq!(
        report.returns[0].ret,
        json!("'nope.nothing' is not available.")
    );
    // And the next job works.
    let report = run(
        &bus,
        &request("*", "glob", "test.ping", json!([]), json!({})),
    )
    .await;
    assert_eq!(report.returns.len(), 1);
    assert_eq!(report.returns[0].ret, json!(true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jid_runs_once_and_salt_aliases_work() {
    let server = RedisServer::start();
    let redis = server.config();
    let bus = Bus::new(&redis).unwrap();
    let _a = start_agent(&redis, "once", "");
    wait_registered(&bus, &["once"]).await;

    let job = json!({"jid": "77", "tempTopic": "dup", "fun": "test.arg",
        "arg": ["a", {"__kwarg__": true, "k": 1}], "kwargs": {"z": 2},
        "tgt": "once", "expr_form": "list"})
    .to_string();
    let pubsub = bus.subscribe(&["dup".to_string()]).await.unwrap();
    let stream = pubsub.into_on_message();
    let mut conn = bus.connect().await.unwrap();
    publish(&mut conn, TOPIC, &job).await.unwrap();
    publish(&mut conn, TOPIC, &job).await.unwrap();
    // Its PING and return, then a while longer for a second run's.
    let replies = collect_replies(stream, 2, LINGER * 2).await;
    let returns: Vec<_> = replies
        .iter()
        .filter_map(|r| {
            if let Reply::Return(r) = r {
                Some(r)
            } else {
                None
            }
        })
        .collect();
    assert_eq!(returns.len(), 1, "{replies:?}");
    assert_eq!(
        returns[0].ret,
        json!({"args": ["a"], "kwargs": {"z": 2, "k": 1}})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_job_cache_keeps_returns_after_the_master_gave_up() {
    let server = RedisServer::start();
    let redis = server.config();
    let bus = Bus::new(&redis).unwrap();
    let _a = start_agent(&redis, "slow", "");
    wait_registered(&bus, &["slow"]).await;
    // The master stops listening after 1.5 s, long before the job's own
    // 4 s timeout, at which the maid stops it.
    let mut req = request("*", "glob", "test.sleep", json!([30]), json!({}));
    req.collect.timeout = Duration::from_secs(4);
    let report = run_with_replies(&bus, req, |sub| {
        Box::pin(futures_util::StreamExt::take_until(
            sub.into_on_message(),
            tokio::time::sleep(Duration::from_millis(1500)),
        ))
    })
    .await
    .await
    .unwrap();
    assert!(report.returns.is_empty());
    assert!(report.missed_minions.contains("slow"), "{report:?}");
    // As `salt`: a minion that did not return is a failure.
    assert_eq!(report.exit_code(), 1);
    let tmp = tempfile::tempdir().unwrap();
    // The job carried the master's timeout, so the maid stopped it there
    // (PROTOCOL §5); the return the CLI never saw is in the cache.
    let deadline = std::time::Instant::now() + REPLY_DEADLINE;
    let o = loop {
        let o = maid_cli(
            &server.url(),
            &["job", &report.jid, "--out", "json", "--out-indent", "-1"],
            tmp.path(),
        );
        if !o.stdout.is_empty() || std::time::Instant::now() > deadline {
            break o;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "{\"slow\": \"Timed out after 4 seconds\"}\n"
    );
    assert_eq!(o.status.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_reports_as_salt_does() {
    let server = RedisServer::start();
    let redis = server.config();
    let bus = Bus::new(&redis).unwrap();
    let _a = start_agent(
        &redis,
        "cli-a",
        "[plugins.cmd]\nexec = [\"*\"]\nshell = true\nenv = [\"PATH\"]\n",
    );
    let mut b = start_agent(&redis, "cli-b", "");
    wait_registered(&bus, &["cli-a", "cli-b"]).await;
    let tmp = tempfile::tempdir().unwrap();
    let url = server.url();

    let o = maid_cli(
        &url,
        &[
            "run",
            "*",
            "test.ping",
            "--master-topic",
            TOPIC,
            "--out",
            "json",
            "--out-indent",
            "-1",
        ],
        tmp.path(),
    );
    let mut lines: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    lines.sort();
    assert_eq!(lines, ["{\"cli-a\": true}", "{\"cli-b\": true}"]);
    assert_eq!(o.status.code(), Some(0));

    let o = maid_cli(
        &url,
        &[
            "run",
            "-L",
            "cli-a",
            "cmd.retcode",
            "exit 3",
            "--master-topic",
            TOPIC,
        ],
        tmp.path(),
    );
    assert_eq!(String::from_utf8_lossy(&o.stdout), "cli-a:\n    3\n");
    // As `salt` 3008: 1 for any failing minion, and a line on stderr.
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "ERROR: Minions returned with non-zero exit code\n"
    );

    b.kill();
    let o = maid_cli(
        &url,
        &[
            "run",
            "*",
            "test.ping",
            "--master-topic",
            TOPIC,
            "-t",
            "5",
            "--summary",
        ],
        tmp.path(),
    );
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.starts_with("cli-a:\n    True\ncli-b:\n    Minion did not return. [Not connected]\n"),
        "{text}"
    );
    // Salt's summary on stdout, which counts the row of the maid that
    // never pinged as a minion that did not return; the original design's
    // accounting, which tells who was missed how, on stderr.
    assert!(
        text.ends_with(
            "\n\n-------------------------------------------\nSummary\n\
             -------------------------------------------\n\
             # of minions targeted: 2\n# of minions returned: 1\n\
             # of minions that did not return: 1\n# of minions with errors: 0\n\
             -------------------------------------------\n"
        ),
        "{text}"
    );
    let accounting = String::from_utf8_lossy(&o.stderr);
    assert!(accounting.contains("missed maids: cli-b\n"), "{accounting}");
    assert!(accounting.contains("missed minions: -\n"), "{accounting}");
    assert_eq!(o.status.code(), Some(1));

    let o = maid_cli(&url, &["maids"], tmp.path());
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.lines()
            .any(|l| l.starts_with("cli-a") && l.contains(" yes ")),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maid_cp_copies_a_large_file_to_three_agents() {
    let server = RedisServer::start();
    let redis = server.config();
    let bus = Bus::new(&redis).unwrap();
    let dests: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let _agents: Vec<_> = dests
        .iter()
        .enumerate()
        .map(|(i, d)| {
            start_agent(
                &redis,
                &format!("cp-{i}"),
                &format!(
                    "[plugins.cp]\nfetch = [\"salt://**\"]\ndirs = [{{ path = \"{}\", writable = true }}]\n",
                    d.path().display()
                ),
            )
        })
        .collect();
    wait_registered(&bus, &["cp-0", "cp-1", "cp-2"]).await;

    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("big.bin");
    let mut data = vec![0u8; 50 << 20];
    let mut x: u32 = 12345;
    for b in data.iter_mut() {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        *b = (x >> 16) as u8;
    }
    std::fs::write(&src, &data).unwrap();
    let expected = {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(&data))
    };
    // Each agent writes into its own directory: target each with its dest.
    for (i, d) in dests.iter().enumerate() {
        let dest = d.path().join("big.bin");
        let o = maid_cli(
            &server.url(),
            &[
                "cp",
                "-L",
                &format!("cp-{i}"),
                src.to_str().unwrap(),
                dest.to_str().unwrap(),
                "--master-topic",
                TOPIC,
                "-t",
                "60",
                "--out",
                "json",
                "--out-indent",
                "-1",
            ],
            tmp.path(),
        );
        assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            format!("{{\"cp-{i}\": {{\"{}\": true}}}}\n", dest.display()),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let written = std::fs::read(&dest).unwrap();
        use sha2::Digest;
        assert_eq!(hex::encode(sha2::Sha256::digest(&written)), expected);
    }
    // Pushed once: content-addressed, 50 chunks.
    let mut conn = bus.connect().await.unwrap();
    let chunks: String = redis::cmd("HGET")
        .arg(format!("maid:file:meta:{expected}"))
        .arg("chunks")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(chunks, "50");
    let index: Value = Value::String(
        redis::cmd("HGET")
            .arg("maid:file:index")
            .arg("big.bin")
            .query_async(&mut conn)
            .await
            .unwrap(),
    );
    assert_eq!(index, json!(expected));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_running_jobs_then_exits_zero() {
    let server = RedisServer::start();
    let redis = server.config();
    let bus = Bus::new(&redis).unwrap();
    let mut a = start_agent(&redis, "graceful", "");
    wait_registered(&bus, &["graceful"]).await;
    let mut req = request("*", "glob", "test.sleep", json!([1]), json!({}));
    req.collect.timeout = Duration::from_secs(5);
    let (job, pinged) = run_watching(&bus, req, "graceful").await;
    pinged.await.unwrap();
    let status = tokio::task::spawn_blocking(move || a.terminate())
        .await
        .unwrap();
    assert_eq!(status.code(), Some(0));
    let report = job.await.unwrap();
    assert_eq!(report.returns.len(), 1, "{report:?}");
    assert_eq!(report.returns[0].ret, json!(true));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_in_another_language_drives_the_agents() {
    let server = RedisServer::start();
    let redis = server.config();
    let bus = Bus::new(&redis).unwrap();
    let _a = start_agent(&redis, "py-1", "");
    let _b = start_agent(&redis, "py-2", "");
    wait_registered(&bus, &["py-1", "py-2"]).await;
    let got =
        crate::common::fleet::foreign_master(server.port(), "test.echo", &["from python"]).await;
    let one = json!({"return": "from python", "retcode": 0, "success": true,
        "fun": "test.echo", "fun_args": ["from python"]});
    assert_eq!(
        got,
        json!({"pings": {"py-1": true, "py-2": true}, "returns": {"py-1": one, "py-2": one}})
    );
}
