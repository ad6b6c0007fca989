//! The Redis test harness itself: real servers, a sentinel setup and a
//! cluster start, answer, and survive the failures the fleet tests inject.

use std::time::{Duration, Instant};

use crate::common::redis::{Cluster, RedisServer, Sentinel};
use futures_util::StreamExt;
use redis::{AsyncCommands, Commands};

#[tokio::test]
async fn server_answers_set_get_and_pubsub() {
    let server = RedisServer::start();
    assert_ne!(server.port(), 6379);
    assert_eq!(
        server.url(),
        format!("redis://127.0.0.1:{}/", server.port())
    );

    let client = server.client();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    let () = con.set("greeting", "hello").await.unwrap();
    let got: String = con.get("greeting").await.unwrap();
    assert_eq!(got, "hello");

    let mut sub = client.get_async_pubsub().await.unwrap();
    sub.subscribe("maid-events").await.unwrap();
    // SUBSCRIBE is acknowledged before `subscribe` returns; still, publish
    // until someone is listening rather than rely on it.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let receivers: i64 = con.publish("maid-events", "ping 1").await.unwrap();
        if receivers >= 1 {
            break;
        }
        assert!(Instant::now() < deadline, "nobody subscribed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let msg = tokio::time::timeout(Duration::from_secs(10), sub.on_message().next())
        .await
        .expect("no message within 10 s")
        .expect("pubsub stream ended");
    assert_eq!(msg.get_channel_name(), "maid-events");
    let payload: String = msg.get_payload().unwrap();
    assert_eq!(payload, "ping 1");
}

#[test]
fn server_kill_and_restart_keeps_port() {
    let mut server = RedisServer::start_with(&["--maxmemory", "64mb"]);
    let port = server.port();
    let mut con = server.client().get_connection().unwrap();
    let () = con.set("k", "v").unwrap();

    server.kill();
    assert!(!server.is_running());
    assert!(
        server
            .client()
            .get_connection_with_timeout(Duration::from_secs(1))
            .is_err(),
        "a killed server still accepts connections"
    );

    server.restart();
    assert_eq!(server.port(), port);
    let mut con = server.client().get_connection().unwrap();
    let pong: String = redis::cmd("PING").query(&mut con).unwrap();
    assert_eq!(pong, "PONG");
    // Persistence is off: a restart starts empty.
    let gone: Option<String> = con.get("k").unwrap();
    assert_eq!(gone, None);
    let maxmemory: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxmemory")
        .query(&mut con)
        .unwrap();
    assert_eq!(
        maxmemory,
        ["maxmemory", "67108864"],
        "extra args survive a restart"
    );
    assert!(server.log().contains("Ready to accept connections"));
}

fn sentinel_master(urls: &[String], service: &str) -> redis::Connection {
    let mut client = redis::sentinel::SentinelClient::build(
        urls.to_vec(),
        service,
        None,
        redis::sentinel::SentinelServerType::Master,
    )
    .unwrap();
    client.get_connection().unwrap()
}

#[test]
fn sentinel_fails_over_to_the_replica() {
    let mut setup = Sentinel::start();
    assert_eq!(setup.service_name(), "mymaster");
    assert_eq!(setup.sentinel_urls().len(), 3);
    let old = setup.master_port();
    assert_eq!(old, setup.node_ports()[0]);

    let mut con = sentinel_master(&setup.sentinel_urls(), setup.service_name());
    let () = con.set("before", "1").unwrap();

    setup.kill_master();
    let new = setup.wait_for_failover(Duration::from_secs(30));
    assert_ne!(new, old);
    assert_eq!(new, setup.node_ports()[1]);
    assert_eq!(setup.master_port(), new);

    // The promoted replica accepts writes, directly and through sentinel.
    let mut direct = redis::Client::open(format!("redis://127.0.0.1:{new}/"))
        .unwrap()
        .get_connection()
        .unwrap();
    let () = direct.set("after", "2").unwrap();
    let mut con = sentinel_master(&setup.sentinel_urls(), setup.service_name());
    let before: String = con.get("before").unwrap();
    assert_eq!(before, "1", "the replica had the data before the failover");
    let after: String = con.get("after").unwrap();
    assert_eq!(after, "2");
}

#[test]
fn cluster_spreads_keys_and_recovers_a_restarted_node() {
    let mut cluster = Cluster::start();
    assert_eq!(cluster.urls().len(), 3);

    let keys: Vec<String> = (0..30).map(|i| format!("key-{i}")).collect();
    let write_and_read = |cluster: &Cluster| {
        let mut con = cluster.client().get_connection().unwrap();
        for k in &keys {
            let () = con.set(k, format!("value of {k}")).unwrap();
        }
        for k in &keys {
            let v: String = con.get(k).unwrap();
            assert_eq!(v, format!("value of {k}"));
        }
    };
    write_and_read(&cluster);

    // The keys landed on every node, not just one.
    for port in cluster.ports() {
        let mut con = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
            .unwrap()
            .get_connection()
            .unwrap();
        let n: usize = redis::cmd("DBSIZE").query(&mut con).unwrap();
        assert!(n > 0, "node {port} holds no keys");
    }
    let slots: std::collections::HashSet<u16> = keys
        .iter()
        .map(|k| {
            let mut con = cluster.client().get_connection().unwrap();
            redis::cmd("CLUSTER")
                .arg("KEYSLOT")
                .arg(k)
                .query(&mut con)
                .unwrap()
        })
        .collect();
    assert!(slots.len() > 1);

    let ports = cluster.ports();
    cluster.restart_node(1);
    assert_eq!(cluster.ports(), ports, "the node came back on its port");
    write_and_read(&cluster);
}
