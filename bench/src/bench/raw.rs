//! `maid-bench raw`: the Redis floor. A minimal Rust responder that
//! answers each job with a PING and a `true` return and runs no maid code,
//! one in a process (beside the measured agent) or many (beside a fleet).
//!
//! With `--protocol` it sends what the protocol asks of a maid, through
//! the agent's own send functions but none of its job handling: the floor
//! a fan-out of maid agents is held against.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::bail;
use clap::Args;
use futures_util::StreamExt;
use redis::aio::MultiplexedConnection;
use serde::Deserialize;
use serde_json::{Value, json};

use super::fleet::Fleet;

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
        let (ping, ret) = replies(&id, &job);
        let conn = conn.clone();
        // The return as the agent keeps it, only where it is cached.
        let id = protocol.then(|| id.clone());
        tokio::spawn(async move {
            let sent = match id {
                Some(id) => send_as_protocol(conn, job, ping, ret, id, ttl).await,
                None => send_both(conn, &job, ping, ret).await,
            };
            if let Err(e) = sent {
                eprintln!("maid-bench raw: publish failed: {e}");
            }
        });
    }
    Ok(())
}

/// The PING and the `true` return responder `id` answers `job` with.
fn replies(id: &str, job: &RawJob) -> (Value, Value) {
    let ping = json!({"type": "ping", "sub_ip": id, "jid": job.jid, "match": true});
    let stamp = maid_agent::jid::stamp();
    let ret = json!({
        "type": "return", "sub_ip": id, "jid": job.jid, "id": id,
        "fun": job.fun, "fun_args": job.arg, "return": true,
        "retcode": 0, "success": true, "out": "nested",
        "_stamp": stamp, "ret_": {id: true},
    });
    (ping, ret)
}

/// The PING and the return in one pipelined write: two publishes.
async fn send_both(
    mut conn: MultiplexedConnection,
    job: &RawJob,
    ping: Value,
    ret: Value,
) -> redis::RedisResult<()> {
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
}

/// The PING and the return as the protocol asks of a maid: the PING is
/// queued first and written by the connection's task before the return
/// is made and queued; both go out through the agent's own functions
/// (`bus::publish`, and `outbox::deliver`: PUBLISH, HSET and EXPIRE in
/// one pipeline), the return cached for `ttl` seconds under `id`.
async fn send_as_protocol(
    conn: MultiplexedConnection,
    job: RawJob,
    ping: Value,
    ret: Value,
    id: String,
    ttl: u64,
) -> redis::RedisResult<()> {
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
}
