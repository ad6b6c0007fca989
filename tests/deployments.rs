//! The Redis deployments operators run, each against real servers started
//! by the tests: Sentinel (1 master, 1 replica, 3 sentinels) with a
//! failover in the middle of a stream of jobs, and a 3-master Cluster.

use std::time::{Duration, Instant};

use crate::common::fleet::{TOPIC, request, run, start_agent, wait_registered};
use crate::common::redis::{Cluster, Sentinel};
use maid_bus::{Bus, RedisConfig};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_failover_during_a_run_of_jobs() {
    let mut sentinel = tokio::task::spawn_blocking(Sentinel::start).await.unwrap();
    let redis = RedisConfig {
        sentinels: sentinel.sentinel_urls(),
        service: Some(sentinel.service_name().to_string()),
        ..Default::default()
    };
    let bus = Bus::new(&redis).unwrap();
    let _a = start_agent(&redis, "s-1", "");
    let _b = start_agent(&redis, "s-2", "");
    wait_registered(&bus, &["s-1", "s-2"]).await;

    for _ in 0..5 {
        let report = run(
            &bus,
            &request("*", "glob", "test.ping", json!([]), json!({})),
        )
        .await;
        assert_eq!(report.returns.len(), 2, "{report:?}");
    }
    // Short, after the failover: a job the agents missed costs only this.
    let mut req = request("*", "glob", "test.ping", json!([]), json!({}));
    req.collect.timeout = Duration::from_secs(3);

    let old = sentinel.master_port();
    sentinel.kill_master();
    let new = tokio::task::spawn_blocking(move || {
        let port = sentinel.wait_for_failover(Duration::from_secs(60));
        (sentinel, port)
    })
    .await
    .unwrap();
    let (_sentinel, new_port) = new;
    assert_ne!(old, new_port);

    // Jobs keep flowing: once the agents have followed the new master,
    // every job gets both returns.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut streak = 0;
    while streak < 5 {
        assert!(
            Instant::now() < deadline,
            "agents did not follow the new master"
        );
        match bus.connect().await {
            Ok(_) => {
                let report = run(&bus, &req).await;
                if report.returns.len() == 2 {
                    streak += 1;
                } else {
                    streak = 0;
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    // The registry moved with them.
    let mut conn = bus.connect().await.unwrap();
    let maids = maid_master::jobs::alive_maids(&mut conn, None)
        .await
        .unwrap();
    assert!(maids["s-1"].0 && maids["s-2"].0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_round_trip() {
    let cluster = tokio::task::spawn_blocking(Cluster::start).await.unwrap();
    let redis = cluster.config();
    let bus = Bus::new(&redis).unwrap();
    let _a = start_agent(&redis, "c-1", "");
    let _b = start_agent(&redis, "c-2", "");
    let _c = start_agent(&redis, "c-3", "");
    wait_registered(&bus, &["c-1", "c-2", "c-3"]).await;

    let report = run(
        &bus,
        &request("*", "glob", "test.echo", json!(["hi"]), json!({})),
    )
    .await;
    assert_eq!(report.returns.len(), 3, "{report:?}");
    assert!(report.returns.iter().all(|r| r.ret == json!("hi")));
    assert_eq!(report.exit_code(), 0);

    // Returns are in the job cache, whichever node holds the key.
    let cached = crate::common::fleet::cached_returns(&bus, &report.jid, 3).await;
    assert_eq!(cached.len(), 3);

    // Redis 7 everywhere: replies went on sharded pub/sub. A classic
    // subscriber of the reply topic hears none of them; the master does.
    assert!(bus.sharded().await.unwrap());
    let jid = maid_agent::jid::new_jid();
    let topic = maid_master::jobs::temp_topic(&jid);
    let classic = bus.subscribe(std::slice::from_ref(&topic)).await.unwrap();
    let replies = bus.replies(&topic).await.unwrap();
    let mut conn = bus.connect().await.unwrap();
    let req = request("*", "glob", "test.echo", json!(["sharded"]), json!({}));
    let report = maid_master::jobs::run_on(&mut conn, replies, jid, &topic, &req, |_| {})
        .await
        .unwrap();
    assert_eq!(report.returns.len(), 3, "{report:?}");
    assert!(report.missed_maids.is_empty(), "{report:?}");
    let mut heard = classic.into_on_message();
    let classic_heard = tokio::time::timeout(
        Duration::from_millis(500),
        futures_util::StreamExt::next(&mut heard),
    )
    .await;
    assert!(classic_heard.is_err(), "a classic subscriber heard a reply");

    // `maid api` on the cluster subscribes each job's reply topic itself.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("maid.toml");
    let hash = maid_master::api::auth::hash_password(crate::api::PASSWORD).unwrap();
    let user = crate::api::USER;
    let nodes: Vec<String> = cluster.urls().iter().map(|u| format!("{u:?}")).collect();
    std::fs::write(
        &config,
        format!(
            "master_topics = [\"{TOPIC}\"]\n[redis]\ncluster = [{}]\n\
             [api]\n[api.users]\n{user} = \"{hash}\"\n[api.perms]\n{user} = [\".*\"]\n",
            nodes.join(", ")
        ),
    )
    .unwrap();
    let api = crate::api::start_api(dir, &config, &[]);
    let body = json!([{"client": "local", "tgt": "*", "fun": "test.echo", "arg": ["api"],
        "username": user, "password": crate::api::PASSWORD, "eauth": "pam"}]);
    let answer: serde_json::Value = reqwest::Client::new()
        .post(format!("{}/run", api.url))
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        answer["return"],
        json!([{"c-1": "api", "c-2": "api", "c-3": "api"}]),
        "{answer}"
    );
    assert_eq!(answer["maid"][0]["missed_maids"], json!([]), "{answer}");

    // A fleet that says `sharded_replies = false` keeps classic pub/sub,
    // as a cluster with nodes older than Redis 7 does.
    let classic_redis = maid_bus::RedisConfig {
        sharded_replies: Some(false),
        ..redis.clone()
    };
    let classic_bus = Bus::new(&classic_redis).unwrap();
    assert!(!classic_bus.sharded().await.unwrap());
    let _d = start_agent(&classic_redis, "c-4", "");
    wait_registered(&classic_bus, &["c-4"]).await;
    let mut req = request("c-4", "glob", "test.echo", json!(["classic"]), json!({}));
    req.collect.exclude = ["c-1", "c-2", "c-3"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let report = run(&classic_bus, &req).await;
    assert_eq!(report.returns.len(), 1, "{report:?}");
    assert_eq!(report.returns[0].ret, json!("classic"));
}
