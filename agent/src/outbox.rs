//! Returns that could not reach Redis yet: a bounded buffer, optionally
//! spilling to a file, drained as soon as a session is back.
//!
//! A return the agent produced is never silently lost: it is published and
//! written to the job cache now, or kept here (count and bytes bounded)
//! and delivered when Redis answers again. When the memory buffer is full
//! it spills to `spill_file` when one is configured; without one, or when
//! the file cannot be written, the return is dropped, logged and counted
//! (`maid_returns_dropped`).

use std::collections::VecDeque;
use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::bus::{Conn, command, publish_command, publish_reply};
use crate::metrics::Metrics;

/// A return on its way: published on `topic`, stored at `maid:job:<jid>`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Pending {
    pub topic: String,
    pub payload: String,
    pub jid: String,
    pub id: String,
    /// Redis acknowledged the PUBLISH; only the job-cache write is left, so
    /// a retry does not send the master the same return twice.
    #[serde(default)]
    pub published: bool,
}

/// How long one delivery attempt may take before the return is buffered.
const ATTEMPT: Duration = Duration::from_secs(3);

/// Publish a return (unless that was done already) and store it in the job
/// cache. A return is published again only when Redis never acknowledged
/// the PUBLISH: delivery is at least once, and a connection lost between
/// the write and its acknowledgement can still repeat a return, which the
/// master reports as repeated.
pub async fn deliver(conn: &mut Conn, p: &mut Pending, ttl_secs: u64) -> redis::RedisResult<()> {
    let key = crate::protocol::job_key(&p.jid);
    let hset = command(&[
        b"HSET",
        key.as_bytes(),
        p.id.as_bytes(),
        p.payload.as_bytes(),
    ]);
    let expire = command(&[b"EXPIRE", key.as_bytes(), ttl_secs.to_string().as_bytes()]);
    if let Conn::Single(_) = conn
        && !p.published
    {
        // One server: the PUBLISH and the job-cache write are one request,
        // answered command by command, so a PUBLISH Redis took is known
        // even when the cache write failed.
        let mut pipe = redis::Pipeline::with_capacity(3);
        pipe.ignore_errors()
            .add_command(publish_command(&p.topic, &p.payload))
            .add_command(hset)
            .add_command(expire);
        let replies: Vec<redis::RedisResult<redis::Value>> = timed(pipe.query_async(conn)).await?;
        let mut replies = replies.into_iter();
        let sent = replies.next().unwrap_or_else(|| Err(no_answer()));
        p.published |= sent.is_ok();
        sent?;
        let stored = replies.next().unwrap_or_else(|| Err(no_answer()));
        let expired = replies.next().unwrap_or_else(|| Err(no_answer()));
        return cached(stored, expired);
    }
    // A Cluster routes the PUBLISH to any node and the cache write to its
    // key's (and a return Redis already took needs only the cache write):
    // both go out together on the multiplexed connection, one round trip,
    // not three. The cache write is one pipeline on one key.
    let mut cache = redis::Pipeline::with_capacity(2);
    cache.ignore_errors().add_command(hset).add_command(expire);
    let mut cache_conn = conn.clone();
    let published = p.published;
    let (topic, payload) = (&p.topic, &p.payload);
    let publish = async {
        if published {
            Ok(())
        } else {
            publish_reply(conn, topic, payload).await
        }
    };
    let (sent, stored) = tokio::join!(
        timed(publish),
        timed(cache.query_async::<Vec<redis::RedisResult<redis::Value>>>(&mut cache_conn))
    );
    p.published |= sent.is_ok();
    sent?;
    let mut replies = stored?.into_iter();
    let stored = replies.next().unwrap_or_else(|| Err(no_answer()));
    let expired = replies.next().unwrap_or_else(|| Err(no_answer()));
    cached(stored, expired)
}

/// The job-cache write's outcome from its two replies. An `EXPIRE` the
/// Redis user may not send (`NOPERM`: a maid's own user from `maid acl
/// --maid`, which may expire no key but its own) is no failure: the
/// master keeps the job cache's TTL then.
fn cached(
    stored: redis::RedisResult<redis::Value>,
    expired: redis::RedisResult<redis::Value>,
) -> redis::RedisResult<()> {
    stored?;
    match expired {
        Err(e) if e.code() == Some("NOPERM") => Ok(()),
        other => other.map(drop),
    }
}

/// `f`, or a timeout error after [`ATTEMPT`].
async fn timed<T>(
    f: impl std::future::Future<Output = redis::RedisResult<T>>,
) -> redis::RedisResult<T> {
    tokio::time::timeout(ATTEMPT, f)
        .await
        .unwrap_or_else(|_| Err(no_answer()))
}

fn no_answer() -> redis::RedisError {
    redis::RedisError::from(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        "redis did not answer",
    ))
}

/// The buffer.
pub struct Outbox {
    items: Mutex<VecDeque<Pending>>,
    bytes: Mutex<usize>,
    max_items: usize,
    max_bytes: usize,
    spill: Option<PathBuf>,
}

impl Outbox {
    pub fn new(max_items: usize, max_bytes: usize, spill: Option<PathBuf>) -> Self {
        Self {
            items: Mutex::default(),
            bytes: Mutex::default(),
            max_items,
            max_bytes,
            spill,
        }
    }

    /// Returns waiting in memory.
    pub fn len(&self) -> usize {
        self.items.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keep `p` for later.
    pub fn push(&self, p: Pending, metrics: &Metrics) {
        let size = p.payload.len();
        let mut items = self.items.lock().unwrap_or_else(|e| e.into_inner());
        let mut bytes = self.bytes.lock().unwrap_or_else(|e| e.into_inner());
        if items.len() < self.max_items && *bytes + size <= self.max_bytes {
            *bytes += size;
            items.push_back(p);
            metrics.buffered_returns.inc();
            return;
        }
        drop((items, bytes));
        match &self.spill {
            Some(path) => match spill(path, &p) {
                Ok(()) => {
                    metrics.buffered_returns.inc();
                }
                Err(e) => {
                    metrics.returns_dropped.inc();
                    tracing::error!(jid = %p.jid, cause = %e, "return buffer full and spill failed: return dropped");
                }
            },
            None => {
                metrics.returns_dropped.inc();
                tracing::error!(jid = %p.jid, "return buffer full: return dropped");
            }
        }
    }

    /// Deliver everything buffered over `conn`; stops at the first failure
    /// (what is left stays buffered).
    pub async fn flush(
        &self,
        conn: &mut Conn,
        ttl_secs: u64,
        metrics: &Metrics,
    ) -> redis::RedisResult<usize> {
        let mut sent = 0;
        loop {
            let next = self
                .items
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .pop_front();
            let Some(mut p) = next else { break };
            if let Err(e) = deliver(conn, &mut p, ttl_secs).await {
                self.items
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push_front(p);
                return Err(e);
            }
            *self.bytes.lock().unwrap_or_else(|e| e.into_inner()) -= p.payload.len();
            metrics.buffered_returns.dec();
            sent += 1;
        }
        if let Some(path) = &self.spill {
            sent += self.flush_spill(path, conn, ttl_secs, metrics).await?;
        }
        Ok(sent)
    }

    async fn flush_spill(
        &self,
        path: &PathBuf,
        conn: &mut Conn,
        ttl_secs: u64,
        metrics: &Metrics,
    ) -> redis::RedisResult<usize> {
        let Ok(file) = std::fs::File::open(path) else {
            return Ok(0);
        };
        let mut spilled: Vec<Pending> = BufReader::new(file)
            .lines()
            .map_while(Result::ok)
            .filter_map(|l| serde_json::from_str(&l).ok())
            .collect();
        let mut sent = 0;
        while sent < spilled.len() {
            if let Err(e) = deliver(conn, &mut spilled[sent], ttl_secs).await {
                // Keep what was not delivered.
                let _ = rewrite(path, &spilled[sent..]);
                return Err(e);
            }
            metrics.buffered_returns.dec();
            sent += 1;
        }
        let _ = std::fs::remove_file(path);
        Ok(sent)
    }
}

fn spill(path: &PathBuf, p: &Pending) -> std::io::Result<()> {
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)?;
    let mut line = serde_json::to_vec(p)?;
    line.push(b'\n');
    f.write_all(&line)
}

fn rewrite(path: &std::path::Path, rest: &[Pending]) -> std::io::Result<()> {
    let lines = rest
        .iter()
        .map(serde_json::to_vec)
        .collect::<Result<Vec<_>, _>>()?;
    crate::fsutil::replace_private(path, lines)
}
