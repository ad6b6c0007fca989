//! The master's side of the protocol, as the benchmarks play it: publish
//! jobs, collect PINGs and returns on one reply topic, and wait for the
//! processes under test to subscribe and register.
//!
//! The benchmark measures nothing but success: a reject or a failed
//! return ends the run ([`refused`]), and waiting for a reply fails as
//! soon as the process under test is gone, rather than at the deadline.

use std::collections::{HashMap, HashSet};
use std::pin::Pin;
use std::time::{Duration, Instant};

use anyhow::bail;
use ed25519_dalek::SigningKey;
use futures_util::{Stream, StreamExt};
use redis::aio::MultiplexedConnection;
use serde::Deserialize;
use serde_json::{Value, json};

use maid_protocol::trust::{Envelope, sign};
use maid_testkit::Proc;

use super::procfs::running;

/// How long one reply may take before a scenario is declared stuck.
pub(super) const REPLY_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a process may take to subscribe.
pub(super) const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// What the master reads of a reply.
#[derive(Deserialize)]
pub(super) struct ReplyHead {
    #[serde(rename = "type")]
    pub(super) kind: String,
    pub(super) jid: String,
    #[serde(default)]
    pub(super) sub_ip: String,
    #[serde(default)]
    pub(super) retcode: i64,
    #[serde(default, rename = "return")]
    pub(super) ret: Value,
    #[serde(default)]
    pub(super) reason: String,
    /// A return's minion (a syndic maid's differs from `sub_ip`).
    #[serde(default)]
    pub(super) id: String,
    #[serde(default, rename = "match")]
    pub(super) matched: bool,
    /// A syndic maid's PING: whom it answers for.
    #[serde(default)]
    pub(super) minions: Option<Vec<String>>,
}

impl ReplyHead {
    /// The head of a reply message, and whether it came sealed in an
    /// envelope (a maid with a key signs its replies, §3.4) or bare. The
    /// envelope's signature is not checked: what a master spends verifying
    /// is its own cost, not the maid's. `None` for what is no reply.
    fn of(bytes: &[u8]) -> Option<(ReplyHead, bool)> {
        match serde_json::from_slice::<ReplyHead>(bytes) {
            Ok(head) => Some((head, false)),
            Err(_) => {
                let envelope: Envelope = serde_json::from_slice(bytes).ok()?;
                Some((serde_json::from_str(&envelope.payload).ok()?, true))
            }
        }
    }
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

/// A bare reply to a signed job: the maid that takes signed jobs signs its
/// replies, or the scenario measures less than it says.
fn unsealed(head: &ReplyHead) -> anyhow::Error {
    anyhow::anyhow!(
        "{} sent its {} for signed job {} unsigned",
        head.sub_ip,
        head.kind,
        head.jid
    )
}

/// Whom a job targets.
#[derive(Debug, Clone)]
pub(super) struct Target {
    tgt: Value,
    tgt_type: &'static str,
}

impl Target {
    /// `--tgt-type glob`: `*`, Salt's default; `list`: exactly `ids`.
    pub(super) fn new(mode: TgtType, ids: &[String]) -> Target {
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
pub(super) struct Trip {
    pub(super) pings: Duration,
    pub(super) all: Duration,
}

type Replies = Pin<Box<dyn Stream<Item = redis::Msg>>>;

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
pub(super) struct Master {
    conn: MultiplexedConnection,
    replies: Replies,
    /// The process under test: waiting for replies fails fast when it dies.
    pub(super) watch: Option<(String, i32)>,
    reply_topic: String,
    prefix: String,
    seq: u64,
    /// The master topics whose jobs are signed, each with its key.
    signing: HashMap<String, SigningKey>,
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
    pub(super) async fn connect(client: &redis::Client) -> anyhow::Result<Master> {
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
            signing: HashMap::new(),
        })
    }

    /// Sign every job published on `topic` with `key`, as `maid run` does
    /// with its `[master] key`.
    pub(super) fn sign_on(&mut self, topic: &str, key: SigningKey) {
        self.signing.insert(topic.to_string(), key);
    }

    /// A new job on `topic`: its jid and its JSON, signed where the
    /// topic's jobs are (with the time it was issued and the topic inside,
    /// as PROTOCOL §6 asks).
    fn job(&mut self, topic: &str, fun: &str, arg: &Value, target: &Target) -> (String, String) {
        self.seq += 1;
        let jid = format!("{}{}", self.prefix, self.seq);
        let mut job = json!({
            "jid": jid,
            "tempTopic": self.reply_topic,
            "fun": fun,
            "arg": arg,
            "tgt": target.tgt,
            "tgt_type": target.tgt_type,
            "timeout": REPLY_TIMEOUT.as_secs(),
            "user": "bench",
        });
        let Some(key) = self.signing.get(topic) else {
            return (jid, job.to_string());
        };
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        job["issued_at"] = json!(now.map_or(0, |d| d.as_millis() as u64));
        job["topic"] = json!(topic);
        let envelope = sign(job.to_string(), key);
        (
            jid,
            serde_json::to_string(&envelope).expect("envelopes serialise"),
        )
    }

    /// Publish one job on `topic` and wait until `expect` responders have
    /// both pinged and returned: the time from publish to the last PING and
    /// to the last reply.
    pub(super) async fn round_trip(
        &mut self,
        topic: &str,
        fun: &str,
        arg: &Value,
        target: &Target,
        expect: usize,
    ) -> anyhow::Result<Trip> {
        let (jid, payload) = self.job(topic, fun, arg, target);
        let signed = self.signing.contains_key(topic);
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
                let Some((head, sealed)) = ReplyHead::of(msg.get_payload_bytes()) else {
                    continue;
                };
                if head.jid != jid {
                    continue;
                }
                if signed && !sealed {
                    return Err(unsealed(&head));
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
    pub(super) async fn flood(
        &mut self,
        topic: &str,
        fun: &str,
        target: &Target,
        total: usize,
        in_flight: usize,
    ) -> anyhow::Result<Duration> {
        let arg = json!([]);
        let signed = self.signing.contains_key(topic);
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
            let Some((head, sealed)) = ReplyHead::of(msg.get_payload_bytes()) else {
                continue;
            };
            let Some(seen) = out.get_mut(&head.jid) else {
                continue;
            };
            if signed && !sealed {
                return Err(unsealed(&head));
            }
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
        let (jid, payload) = self.job(topic, fun, arg, target);
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
pub(super) async fn wait_subscribed(
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
pub(super) async fn check_functions(
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
            // Bare, or sealed by a maid with a key of its own.
            let reg = maid_protocol::registry::read::<Value>(&json)?.value;
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
