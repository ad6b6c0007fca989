//! The master's side of the wire, bare, for tests that watch what agents
//! and responders send: publish a payload and collect the replies, read
//! the job cache, wait for subscribers.

use std::time::{Duration, Instant};

use maid_bus::Bus;
use maid_protocol::replies::receive;

/// The master topic the test fleets use.
pub const TOPIC: &str = "master-test";

/// The job cache's returns for `jid` once there are `n` of them (the
/// cache write and the return's PUBLISH go out together, in no set order),
/// or what is there at [`REPLY_DEADLINE`].
pub async fn cached_returns(
    bus: &Bus,
    jid: &str,
    n: usize,
) -> Vec<maid_protocol::protocol::Return> {
    let deadline = Instant::now() + REPLY_DEADLINE;
    let mut conn = bus.connect().await.unwrap();
    loop {
        let cached = maid_master::jobs::cached_returns(&mut conn, jid)
            .await
            .unwrap();
        if cached.len() >= n || Instant::now() > deadline {
            return cached;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// How long a test waits for a reply it expects. Generous: a loaded CI
/// machine may be slow, and a test waits this long only when it fails.
pub const REPLY_DEADLINE: Duration = Duration::from_secs(30);

/// How long a test keeps listening after what it expected arrived, to see
/// anything extra (a second return, a reply that should not be there).
pub const LINGER: Duration = Duration::from_millis(500);

/// Subscribe to `topic`, publish `payload` on the master topic, and collect
/// the replies: until `expected` arrived (or [`REPLY_DEADLINE`] passed),
/// then for [`LINGER`] more, so extra replies are seen too.
pub async fn raw_round_trip(
    bus: &Bus,
    topic: &str,
    payload: &str,
    expected: usize,
) -> Vec<maid_protocol::protocol::Reply> {
    let pubsub = bus.subscribe(&[topic.to_string()]).await.unwrap();
    let stream = pubsub.into_on_message();
    let mut conn = bus.connect().await.unwrap();
    maid_bus::publish(&mut conn, TOPIC, payload).await.unwrap();
    collect_replies(stream, expected, LINGER).await
}

/// The replies on `stream`: until `expected` arrived (or [`REPLY_DEADLINE`]
/// passed), then for `linger` more, so extra replies are seen too.
pub async fn collect_replies(
    mut stream: impl futures_util::Stream<Item = redis::Msg> + Unpin,
    expected: usize,
    linger: Duration,
) -> Vec<maid_protocol::protocol::Reply> {
    use futures_util::StreamExt;
    let mut out = Vec::new();
    let mut until = tokio::time::Instant::now() + REPLY_DEADLINE;
    let mut lingering = false;
    loop {
        if !lingering && out.len() >= expected {
            lingering = true;
            until = tokio::time::Instant::now() + linger;
        }
        match tokio::time::timeout_at(until, stream.next()).await {
            Ok(Some(msg)) => out.push(receive(msg.get_payload_bytes()).unwrap().reply),
            _ => return out,
        }
    }
}

/// Wait until `n` connections subscribe to the master topic.
pub async fn wait_subscribers(bus: &Bus, n: i64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(mut conn) = bus.connect().await {
            let counts: Vec<(String, i64)> = redis::cmd("PUBSUB")
                .arg("NUMSUB")
                .arg(TOPIC)
                .query_async(&mut conn)
                .await
                .unwrap_or_default();
            if counts.first().is_some_and(|(_, c)| *c >= n) {
                return;
            }
        }
        assert!(Instant::now() < deadline, "{n} subscribers never came");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
