//! `maid agent`: subscribe to the masters' topics and answer every job.
//!
//! For each message: decode just enough to reply, PING at once (with
//! `match`), and — when targeted and not seen before — run the function in
//! the plugin runtime on its own task, bounded by a semaphore, then publish
//! the return and store it in the job cache. A bad message is logged (or
//! rejected on its reply topic) and the loop goes on; a dropped Redis
//! connection is reopened (following a Sentinel failover) and the topics
//! resubscribed. Shutdown stops taking jobs and gives running ones a grace
//! period to finish and publish.

use std::future::Future;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures_util::StreamExt;
use redis::AsyncCommands;
use serde_json::{Map, Value};
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{Notify, Semaphore, mpsc};

use crate::audit::{self, Audit, Decision, Record};
use crate::bus::{Bus, BusError, Conn, publish};
use crate::config::Config;
use crate::filestore::ConnSource;
use crate::jidstore::{Insert, JidStore};
use crate::metrics::Metrics;
use crate::outbox::{self, Outbox, Pending};
use crate::protocol::{self, Job, Ping, Refusal, Registration, Reject, Reply};
use crate::runtime::{CallRequest, Failure, Outcome, Runtime, Teardown};
use crate::sync::{SYNC_MODULES, Syncer};
use crate::target::{TargetType, matches};
use crate::trust::{KeyError, Verifier, key_id, read_verifying_key};

/// Why the agent could not start.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("{0}")]
    Bus(#[from] BusError),
    #[error("no master topics configured (master_topics or --master-topic)")]
    NoTopics,
    #[error("trusted key: {0}")]
    Key(#[from] KeyError),
    #[error("{what}: {error}")]
    State { what: String, error: std::io::Error },
    #[error("{0}")]
    Sync(#[from] crate::sync::SyncError),
    #[error("{0}")]
    Config(#[from] crate::config::ConfigError),
}

/// The command connection of the current Redis session, shared by every
/// task; replaced on reconnect.
#[derive(Default)]
pub struct ConnSlot(RwLock<Option<Conn>>);

impl ConnSlot {
    fn set(&self, conn: Option<Conn>) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = conn;
    }
}

impl ConnSource for ConnSlot {
    fn conn(&self) -> Option<Conn> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Everything the message loop and the job tasks share.
struct Shared {
    id: String,
    config: Config,
    runtime: Arc<Runtime>,
    grains: Map<String, Value>,
    conn: Arc<ConnSlot>,
    slots: Semaphore,
    /// Job ids accepted (persisted when a state_dir is configured).
    jids: Mutex<JidStore>,
    /// Signature and clock checks.
    verifier: Verifier,
    audit: Audit,
    metrics: Arc<Metrics>,
    /// Returns waiting for Redis.
    outbox: Outbox,
    /// Wakes the outbox flusher.
    flush: Notify,
    /// Jobs accepted and not finished (running or waiting for a slot).
    pending: AtomicUsize,
    started_at: String,
    /// Plugins pushed to the fleet, when `[sync]` is on.
    sync: Option<Syncer>,
    /// Wakes the sync task (a new Redis session).
    sync_now: Notify,
}

/// How long to keep retrying a PING or reject before giving it up (a
/// return is never given up: it goes to the outbox).
const REPLY_RETRY_FOR: Duration = Duration::from_secs(5);

/// Retcode of the busy return: EX_TEMPFAIL, "try again later".
pub const BUSY_RETCODE: i32 = 75;

impl Shared {
    /// Publish `reply` on `topic`, first on `first` when given, then on the
    /// current connection, retrying across reconnects for a while.
    async fn send(&self, first: Option<Conn>, topic: &str, reply: &Reply) {
        let payload = reply.to_json();
        let deadline = tokio::time::Instant::now() + REPLY_RETRY_FOR;
        let mut wait = Duration::from_millis(50);
        let mut first = first;
        loop {
            if let Some(mut conn) = first.take().or_else(|| self.conn.conn()) {
                match publish(&mut conn, topic, &payload).await {
                    Ok(()) => return,
                    Err(e) => {
                        tracing::warn!(jid = reply.jid(), cause = %e, "publish failed; retrying")
                    }
                }
            }
            if tokio::time::Instant::now() >= deadline {
                tracing::error!(jid = reply.jid(), "reply not published: redis unreachable");
                return;
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_secs(2));
        }
    }

    /// Publish a return and cache it, or keep it until Redis is back.
    async fn deliver(&self, mut pending: Pending) {
        if !self.try_deliver(self.conn.conn(), &mut pending).await {
            self.keep(pending);
        }
    }

    /// One attempt to publish and cache a return on `conn`; `false` when it
    /// must be kept (no connection, an error, or older returns waiting).
    async fn try_deliver(&self, conn: Option<Conn>, pending: &mut Pending) -> bool {
        let ttl = self.config.agent.job_cache_ttl_secs;
        if self.outbox.is_empty()
            && let Some(mut conn) = conn
        {
            match outbox::deliver(&mut conn, pending, ttl).await {
                Ok(()) => return true,
                Err(e) => tracing::warn!(jid = %pending.jid, cause = %e, "return kept for later"),
            }
        }
        false
    }

    /// Keep a return until Redis is back.
    fn keep(&self, pending: Pending) {
        self.outbox.push(pending, &self.metrics);
        self.flush.notify_one();
    }

    /// The metrics label of `fun`: itself when a plugin provides it, else
    /// `unknown` (so made-up names cannot grow the registry).
    fn fun_label(&self, fun: &str) -> crate::metrics::Fun {
        let known = (self.sync.is_some() && fun == SYNC_MODULES)
            || fun
                .split_once('.')
                .and_then(|(m, f)| {
                    self.runtime
                        .plugin(m)
                        .map(|p| p.manifest.function(f).is_some())
                })
                .unwrap_or(false);
        Metrics::fun(if known { fun } else { "unknown" })
    }

    fn registration(&self) -> Registration {
        Registration {
            id: self.id.clone(),
            version: env!("CARGO_PKG_VERSION").into(),
            master_topics: self.config.master_topics.clone(),
            functions: self.functions(),
            grains: self.grains.clone(),
            started_at: self.started_at.clone(),
            last_seen: crate::jid::stamp(),
        }
    }

    /// What this maid answers: the plugins' functions and its own.
    fn functions(&self) -> Vec<String> {
        let mut funs = self.runtime.functions();
        if self.sync.is_some() {
            funs.push(SYNC_MODULES.into());
            funs.sort();
        }
        funs
    }

    /// Re-register, so the registry's function list follows the plugins.
    async fn plugins_changed(&self) {
        metrics_plugins(self);
        if let Some(mut conn) = self.conn.conn()
            && let Err(e) = self.register(&mut conn).await
        {
            tracing::warn!(cause = %e, "re-register after a plugin change failed");
        }
    }

    /// Fetch pushed plugins now; `jid` is the job that asked, or empty.
    async fn sync_plugins(
        &self,
        sync: &Syncer,
        jid: &str,
    ) -> Result<crate::sync::SyncReport, String> {
        let mut conn = self.conn.conn().ok_or("redis is not connected")?;
        let report = sync
            .sync(&mut conn, &self.runtime, jid)
            .await
            .map_err(|e| e.to_string())?;
        if !report.changed.is_empty() {
            self.plugins_changed().await;
        }
        Ok(report)
    }

    /// Answer a `saltutil.sync_modules` job: install what it pins (or,
    /// where unsigned jobs run, the newest pushes when it pins nothing).
    async fn sync_job(&self, sync: &Syncer, job: &Job) -> Result<crate::sync::SyncReport, String> {
        let mut conn = self
            .conn
            .conn()
            .ok_or("Sync failed: redis is not connected")?;
        let report = sync
            .sync_job(&mut conn, &self.runtime, &job.jid, &job.kwarg)
            .await
            .map_err(|e| e.to_string())?;
        if !report.changed.is_empty() {
            self.plugins_changed().await;
        }
        Ok(report)
    }

    /// Write the registry entry and the alive key.
    async fn register(&self, conn: &mut Conn) -> redis::RedisResult<()> {
        let json = serde_json::to_string(&self.registration()).expect("registration serialises");
        let _: i64 = conn.hset(protocol::REGISTRY_KEY, &self.id, json).await?;
        let ttl = self.config.agent.heartbeat_secs * 3;
        let _: () = conn.set_ex(protocol::alive_key(&self.id), 1, ttl).await?;
        Ok(())
    }
}

/// Run one job that targets this maid; the return to deliver (`None` when
/// the agent is shutting down before the job got a slot).
async fn run_job(shared: &Shared, job: &Job, kid: &Option<String>) -> Option<(Pending, Teardown)> {
    let _accepted = Accepted(&shared.pending);
    let Ok(_slot) = shared.slots.acquire().await else {
        return None;
    };
    let (outcome, teardown) = match &shared.sync {
        Some(sync) if job.fun == SYNC_MODULES => {
            (sync_modules(shared, sync, job).await, Teardown::default())
        }
        _ => {
            shared
                .runtime
                .call_deferred(CallRequest {
                    fun: job.fun.clone(),
                    args: job.arg.clone(),
                    kwargs: job.kwarg.clone(),
                    jid: job.jid.clone(),
                    minion_id: shared.id.clone(),
                    user: job.user.clone(),
                    timeout: job.time_limit(),
                    // Where signatures are required, only signed jobs get
                    // here: a pin is then the master's word.
                    source_hashes: job.source_hashes.clone(),
                })
                .await
        }
    };
    tracing::info!(
        jid = %job.jid,
        fun = %job.fun,
        retcode = outcome.retcode,
        ms = outcome.duration.as_millis() as u64,
        "job done"
    );
    let decision = if outcome.failure == Some(Failure::Denied) {
        Decision::Denied
    } else {
        Decision::Ran
    };
    shared.audit.record_with(|| {
        let mut rec = job_record(shared, job, kid, Some(true), decision);
        rec.plugin_sha256 = outcome.plugin_sha256.clone();
        rec.capabilities = outcome.used.clone();
        rec.writable_dirs = shared.runtime.writable_dirs(&job.fun);
        rec.duration_ms = Some(outcome.duration.as_millis() as u64);
        rec.retcode = Some(outcome.retcode);
        rec
    });
    let label = shared.fun_label(&job.fun);
    shared.metrics.jobs_run.get_or_create(&label).inc();
    shared
        .metrics
        .job_duration
        .get_or_create(&label)
        .observe(outcome.duration.as_secs_f64());
    let ret = return_of(shared, job, outcome.ret, outcome.retcode);
    Some((ret, teardown))
}

/// `saltutil.sync_modules`, which the agent answers itself: Salt's list of
/// the modules that changed, or what was refused (retcode 1).
async fn sync_modules(shared: &Shared, sync: &Syncer, job: &Job) -> Outcome {
    let started = std::time::Instant::now();
    let (ret, retcode) = match shared.sync_job(sync, job).await {
        Ok(report) => report.salt_return(),
        Err(e) => (Value::String(e), 1),
    };
    Outcome {
        ret,
        retcode,
        failure: (retcode != 0).then_some(Failure::Function),
        duration: started.elapsed(),
        used: Vec::new(),
        plugin_sha256: None,
    }
}

/// Counts a job as pending until dropped.
struct Accepted<'a>(&'a AtomicUsize);

impl Drop for Accepted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The answer to a job that found the queue full: a return with the busy
/// retcode, at once, never silence.
fn busy_return(shared: &Shared, job: &Job, kid: &Option<String>) -> Pending {
    let label = shared.fun_label(&job.fun);
    shared.metrics.jobs_busy.get_or_create(&label).inc();
    tracing::warn!(jid = %job.jid, "busy: answered without running");
    let mut rec = job_record(shared, job, kid, Some(true), Decision::Rejected);
    rec.reason = Some("busy".into());
    rec.retcode = Some(BUSY_RETCODE);
    shared.audit.record(rec);
    let msg = format!(
        "Busy: this maid is running or queueing {} jobs; try again later",
        shared.pending.load(Ordering::Relaxed)
    );
    return_of(shared, job, Value::String(msg), BUSY_RETCODE)
}

/// `job`'s return message, ready to publish and cache.
fn return_of(shared: &Shared, job: &Job, value: Value, retcode: i32) -> Pending {
    Pending {
        topic: job.temp_topic.clone(),
        payload: job.return_json(&shared.id, &value, retcode, &crate::jid::stamp()),
        jid: job.jid.clone(),
        id: shared.id.clone(),
        published: false,
    }
}

/// An audit record describing `job`.
fn job_record(
    shared: &Shared,
    job: &Job,
    kid: &Option<String>,
    matched: Option<bool>,
    decision: Decision,
) -> Record {
    let mut rec = Record::new(&shared.id, &job.jid, decision);
    rec.fun = Some(job.fun.clone());
    rec.args = job.arg.clone();
    rec.kwargs = audit::redact(&job.kwarg);
    rec.user = job.user.clone();
    rec.signer = kid.clone();
    rec.tgt = Some(job.tgt.clone());
    rec.tgt_type = Some(job.tgt_type.clone());
    rec.matched = matched;
    rec
}

/// Reply `reason` on `temp_topic` without waiting.
fn spawn_reject(
    shared: &Arc<Shared>,
    done: &mpsc::Sender<()>,
    temp_topic: String,
    jid: String,
    reason: String,
) {
    let reply = Reply::Reject(Reject {
        sub_ip: shared.id.clone(),
        jid,
        reason,
    });
    let shared = shared.clone();
    let done = done.clone();
    tokio::spawn(async move {
        shared.send(None, &temp_topic, &reply).await;
        drop(done);
    });
}

/// What a refused message claimed to be, for its audit record: `fun`
/// (bounded), a digest of its arguments, and the key id an envelope named.
/// Read again from the bytes: refusals are the rare path, and the accepted
/// path should not pay for this.
fn claim(payload: &[u8], rec: &mut Record) {
    let Ok(msg) = serde_json::from_slice::<Value>(payload) else {
        return;
    };
    let inner = match msg.get("payload").and_then(Value::as_str) {
        Some(text) => {
            rec.claimed_kid = msg
                .get("kid")
                .and_then(Value::as_str)
                .map(|k| bounded(k).to_string());
            serde_json::from_str::<Value>(text).unwrap_or(Value::Null)
        }
        None => msg,
    };
    if let Some(fun) = inner.get("fun").and_then(Value::as_str) {
        rec.fun = Some(bounded(fun).to_string());
    }
    let args = [
        inner.get("arg").unwrap_or(&Value::Null),
        inner
            .get("kwarg")
            .or_else(|| inner.get("kwargs"))
            .unwrap_or(&Value::Null),
    ];
    let text = serde_json::to_vec(&args).unwrap_or_default();
    rec.args_sha256 = Some(hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&text)));
}

/// `s` cut to at most [`protocol::MAX_ADDRESS_BYTES`] bytes (at a char
/// boundary): what a sender's string may take in a record.
fn bounded(s: &str) -> &str {
    let mut end = s.len().min(protocol::MAX_ADDRESS_BYTES);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Refuse a job, within the noise rate: log it, audit it (`rec`, whose
/// reason is `reason: detail`) and reply `reason` on its topic. Past the
/// rate it is only counted, and nobody is answered: a flood of junk must
/// neither fill the logs nor make every maid an amplifier.
fn refuse(
    shared: &Arc<Shared>,
    done: &mpsc::Sender<()>,
    mut rec: Record,
    reply: Option<(String, String)>,
    reason: &str,
    detail: &str,
) {
    if rec.decision == Decision::Rejected {
        let label = crate::metrics::Reason {
            reason: reason.to_string(),
        };
        shared.metrics.jobs_rejected.get_or_create(&label).inc();
    }
    if !shared.audit.admit_noise(rec.decision, Some(reason)) {
        return;
    }
    tracing::warn!(jid = %rec.jid, %reason, "refused job: {detail}");
    rec.reason = Some(format!("{reason}: {detail}"));
    shared.audit.record(rec);
    if let Some((temp_topic, jid)) = reply {
        spawn_reject(shared, done, temp_topic, jid, reason.to_string());
    }
}

/// Handle one message from the master topic `topic`. Never fails: what
/// cannot be used is logged (and audited) or rejected on its reply topic.
fn handle_message(shared: &Arc<Shared>, topic: &str, payload: &[u8], done: &mpsc::Sender<()>) {
    let received = std::time::Instant::now();
    if payload.len() > shared.config.agent.max_message_bytes {
        if shared
            .audit
            .admit_noise(Decision::Rejected, Some("too large"))
        {
            tracing::warn!(
                bytes = payload.len(),
                "dropped message over max_message_bytes"
            );
        }
        return;
    }
    // An unsigned job is decoded straight into its fields; everything else
    // (and every job, where signatures are required) goes through the JSON
    // tree and the verifier.
    let fast = if shared.verifier.require_signed {
        None
    } else {
        Job::from_slice(payload)
    };
    let opened = match fast {
        Some(job) => job.map(|job| (job, None)),
        None => {
            let value: Value = match serde_json::from_slice(payload) {
                Ok(v) => v,
                Err(e) => {
                    if shared
                        .audit
                        .admit_noise(Decision::Rejected, Some("not json"))
                    {
                        tracing::warn!(cause = %e, "dropped message that is not JSON");
                    }
                    return;
                }
            };
            let now_ms = chrono::Utc::now().timestamp_millis();
            shared
                .verifier
                .open(value, topic, now_ms)
                .and_then(|o| Job::from_value(o.job).map(|job| (job, o.kid)))
        }
    };
    let (job, kid) = match opened {
        Ok(ok) => {
            let label = shared.fun_label(&ok.0.fun);
            shared.metrics.jobs_received.get_or_create(&label).inc();
            ok
        }
        Err(Refusal::Drop(why)) => {
            if shared
                .audit
                .admit_noise(Decision::Rejected, Some("dropped"))
            {
                tracing::warn!("dropped message: {why}");
            }
            return;
        }
        Err(Refusal::Reject {
            temp_topic,
            jid,
            reason,
            detail,
        }) => {
            let mut rec = Record::new(&shared.id, &jid, Decision::Rejected);
            claim(payload, &mut rec);
            refuse(shared, done, rec, Some((temp_topic, jid)), &reason, &detail);
            return;
        }
    };
    let matched = TargetType::parse(&job.tgt_type)
        .and_then(|t| matches(&job.tgt, t, &shared.id, &shared.grains));
    let matched = match matched {
        Ok(m) => m,
        Err(e) => {
            let rec = job_record(shared, &job, &kid, None, Decision::Rejected);
            let reply = Some((job.temp_topic.clone(), job.jid.clone()));
            refuse(shared, done, rec, reply, "malformed", &e.to_string());
            return;
        }
    };
    if !matched {
        if shared.audit.admit_noise(Decision::NotTargeted, None) {
            shared
                .audit
                .record_with(|| job_record(shared, &job, &kid, Some(false), Decision::NotTargeted));
        }
    } else {
        let now_ms = chrono::Utc::now().timestamp_millis();
        let inserted = shared
            .jids
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(&job.jid, now_ms);
        let refused = match inserted {
            Insert::New => None,
            // A signed job seen before is an attack; an unsigned one a
            // master's retry.
            Insert::Seen if kid.is_some() => Some((
                Decision::Rejected,
                "replayed",
                "this jid was accepted before".to_string(),
            )),
            Insert::Seen => Some((
                Decision::Duplicate,
                "duplicate",
                "this jid was accepted before".to_string(),
            )),
            Insert::Full => Some((
                Decision::Rejected,
                "busy",
                format!(
                    "this maid remembers {} jids, its agent.remembered_jids; \
                     none may be forgotten before its retention ends",
                    shared.config.agent.remembered_jids
                ),
            )),
            Insert::Invalid => Some((
                Decision::Rejected,
                "malformed",
                "the jid has a line break or a tab".to_string(),
            )),
        };
        if let Some((decision, reason, detail)) = refused {
            let rec = job_record(shared, &job, &kid, Some(true), decision);
            // A duplicate is dropped without a word, as before.
            let reply =
                (decision == Decision::Rejected).then(|| (job.temp_topic.clone(), job.jid.clone()));
            refuse(shared, done, rec, reply, reason, &detail);
            return;
        }
    }
    let ping = Reply::Ping(Ping {
        sub_ip: shared.id.clone(),
        jid: job.jid.clone(),
        matched,
    });
    // Admission: running + waiting is bounded; past it the job is answered
    // busy at once.
    let limit = shared.config.agent.concurrency + shared.config.agent.queue;
    let busy = matched && shared.pending.fetch_add(1, Ordering::Relaxed) >= limit;
    let shared = shared.clone();
    let done = done.clone();
    tokio::spawn(async move {
        // The PING goes out before any work: it is queued on the connection
        // first, and the work yields once so the connection's task writes it
        // before the call starts. The return is then published on that same
        // connection without waiting for the PING's acknowledgement: Redis
        // runs one connection's commands in order, so a return it
        // acknowledged came after the PING. If that attempt fails, the
        // return waits for the PING's retries to end before it is kept for
        // later, so a master still never sees a return before its PING.
        let conn = shared.conn.conn();
        let (pinged_tx, pinged) = tokio::sync::oneshot::channel::<()>();
        let ping = async {
            shared.send(conn.clone(), &job.temp_topic, &ping).await;
            shared
                .metrics
                .ping_latency
                .observe(received.elapsed().as_secs_f64());
            let _ = pinged_tx.send(());
        };
        let work = async {
            Requeue::default().await;
            let ret = if busy {
                shared.pending.fetch_sub(1, Ordering::Relaxed);
                Some((busy_return(&shared, &job, &kid), Teardown::default()))
            } else if matched {
                run_job(&shared, &job, &kid).await
            } else {
                None
            };
            let Some((mut ret, teardown)) = ret else {
                return;
            };
            // The instance is torn down (its slot reset) once the return is
            // on its way: queued on the connection first, then this task
            // goes behind the connection's, which writes it. A job that ran
            // alone then has the next instance of its plugin made, while
            // the agent waits for its next job.
            let teardown = async {
                Requeue::default().await;
                shared.runtime.retire(teardown).await;
            };
            let (delivered, ()) =
                tokio::join!(shared.try_deliver(conn.clone(), &mut ret), teardown);
            if !delivered {
                let _ = pinged.await;
                shared.deliver(ret).await;
            }
        };
        tokio::join!(ping, work);
        drop(done);
    });
}

/// Resumes once every task already queued has run once: what the job queued
/// on the connection (its PING before the call, its return before the
/// instance's teardown) is written by the connection's task first.
/// `tokio::task::yield_now` would do that too, but it resumes only after the
/// runtime's next poll for I/O, one `epoll_wait` more on every job's path.
#[derive(Default)]
pub struct Requeue(bool);

impl Future for Requeue {
    type Output = ();

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.0 {
            return std::task::Poll::Ready(());
        }
        self.0 = true;
        // Woken while running: the task goes to the back of the run queue.
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    }
}

/// One Redis session: connect, register, subscribe, serve until the
/// subscription ends. Says whether it got as far as subscribing.
async fn session(bus: &Bus, shared: &Arc<Shared>, done: &mpsc::Sender<()>) -> (bool, BusError) {
    // Subscribe before registering: a master that sees this maid in the
    // registry must not publish into a gap.
    let pubsub = async {
        let mut conn = bus.connect().await?;
        let pubsub = bus.subscribe(&shared.config.master_topics).await?;
        shared.register(&mut conn).await?;
        shared.conn.set(Some(conn));
        // Pushes made while this maid was away arrive now.
        shared.sync_now.notify_one();
        Ok(pubsub)
    };
    let pubsub = match pubsub.await {
        Ok(p) => p,
        Err(e) => return (false, e),
    };
    tracing::info!(
        id = %shared.id,
        redis = %bus.describe(),
        topics = ?shared.config.master_topics,
        "subscribed"
    );
    shared
        .metrics
        .redis_connected
        .store(true, Ordering::Relaxed);
    shared.flush.notify_one();
    let mut messages = pubsub.into_on_message();
    while let Some(msg) = messages.next().await {
        handle_message(
            shared,
            msg.get_channel_name(),
            msg.get_payload_bytes(),
            done,
        );
    }
    (true, BusError::Config("subscription closed".into()))
}

/// Redis sessions one after another, for as long as the agent runs:
/// reconnecting with backoff when one is lost.
async fn serve(bus: Bus, shared: Arc<Shared>, done_tx: mpsc::Sender<()>) {
    let mut wait = Duration::from_millis(100);
    let mut reported = false;
    loop {
        let (subscribed, cause) = session(&bus, &shared, &done_tx).await;
        shared.conn.set(None);
        shared
            .metrics
            .redis_connected
            .store(false, Ordering::Relaxed);
        if subscribed {
            wait = Duration::from_millis(100);
            reported = false;
            shared.metrics.redis_reconnects.inc();
        }
        // Say so once per outage, not once per retry.
        if !reported {
            tracing::warn!(%cause, "redis session lost; reconnecting");
            reported = true;
        }
        tokio::time::sleep(jitter(wait)).await;
        wait = (wait * 2).min(Duration::from_secs(5));
    }
}

/// `d` ± 25 %, so a fleet that lost Redis together does not reconnect in
/// lockstep.
fn jitter(d: Duration) -> Duration {
    let mut b = [0u8; 2];
    let r = getrandom::fill(&mut b)
        .map(|()| u16::from_le_bytes(b))
        .unwrap_or(0);
    let factor = 0.75 + 0.5 * (f64::from(r) / f64::from(u16::MAX));
    d.mul_f64(factor)
}

/// Deliver buffered returns whenever a session is up.
async fn flush_outbox(shared: Arc<Shared>) {
    loop {
        tokio::select! {
            () = shared.flush.notified() => {}
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
        if shared.outbox.is_empty() && shared.config.agent.spill_file.is_none() {
            continue;
        }
        let Some(mut conn) = shared.conn.conn() else {
            continue;
        };
        let ttl = shared.config.agent.job_cache_ttl_secs;
        match shared.outbox.flush(&mut conn, ttl, &shared.metrics).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(returns = n, "delivered buffered returns"),
            Err(e) => tracing::warn!(cause = %e, "buffered returns wait for redis"),
        }
    }
}

fn metrics_plugins(shared: &Shared) {
    let plugins = shared.runtime.plugins();
    shared.metrics.plugins_loaded.set(plugins.len() as i64);
    for p in plugins {
        let outcome = format!("{:?}", p.cache).to_lowercase();
        shared
            .metrics
            .plugin_cache
            .get_or_create(&crate::metrics::CacheOutcome { outcome })
            .inc();
    }
}

/// What the plugin directory holds: names, sizes and modification times.
fn fingerprint(
    dir: &std::path::Path,
) -> Vec<(std::path::PathBuf, u64, Option<std::time::SystemTime>)> {
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "wasm"))
        .filter_map(|e| {
            let m = e.metadata().ok()?;
            Some((e.path(), m.len(), m.modified().ok()))
        })
        .collect();
    out.sort();
    out
}

/// Reload plugins on SIGHUP (`reload`) and when the directory changes;
/// re-register so the registry's function list follows.
async fn reload_plugins(shared: Arc<Shared>, dir: std::path::PathBuf, reload: Arc<Notify>) {
    let poll = shared.config.agent.plugin_poll_secs;
    let mut seen = fingerprint(&dir);
    loop {
        let forced = tokio::select! {
            () = reload.notified() => true,
            () = async {
                if poll == 0 {
                    std::future::pending::<()>().await
                }
                tokio::time::sleep(Duration::from_secs(poll)).await
            } => false,
        };
        let now = fingerprint(&dir);
        if !forced && now == seen {
            continue;
        }
        seen = now;
        let before = loaded(&shared.runtime);
        match shared.runtime.reload_dir(&dir).await {
            Ok(errors) => {
                tracing::info!(
                    plugins = shared.runtime.plugins().len(),
                    failed = errors.len(),
                    "plugins reloaded"
                );
                audit_loads(&shared, &before, "reload");
                for e in errors {
                    let path = match &e {
                        crate::runtime::LoadError::Invalid { path, .. }
                        | crate::runtime::LoadError::Io { path, .. } => path,
                    };
                    let module = path.file_stem().unwrap_or_default().to_string_lossy();
                    let mut rec =
                        Record::plugin(&shared.id, "", Decision::PluginRefused, &module, "reload");
                    rec.reason = Some(e.to_string());
                    shared.audit.record(rec);
                }
            }
            Err(e) => tracing::error!(cause = %e, "plugin reload failed"),
        }
        // Synced plugins are checked again, and take their place back from
        // a local plugin of the same name only where `replace_local` says.
        if let Some(sync) = &shared.sync {
            sync.load_installed(&shared.runtime, "reload").await;
        }
        shared.plugins_changed().await;
    }
}

/// Which plugin files are loaded, and which versions.
fn loaded(runtime: &Runtime) -> std::collections::HashSet<(std::path::PathBuf, String)> {
    runtime
        .plugins()
        .iter()
        .map(|p| (p.path.clone(), p.sha256.clone()))
        .collect()
}

/// Audit every locally installed plugin loaded since `before` (synced ones
/// are audited by the syncer, with their signer).
fn audit_loads(
    shared: &Shared,
    before: &std::collections::HashSet<(std::path::PathBuf, String)>,
    source: &str,
) {
    let synced = shared.sync.as_ref().map(|s| s.dir());
    for p in shared.runtime.plugins() {
        if before.contains(&(p.path.clone(), p.sha256.clone()))
            || synced.is_some_and(|d| p.path.starts_with(d))
        {
            continue;
        }
        let mut rec = Record::plugin(
            &shared.id,
            "",
            Decision::PluginLoaded,
            &p.manifest.module,
            source,
        );
        rec.plugin_sha256 = Some(p.sha256.clone());
        shared.audit.record(rec);
    }
}

/// Fetch pushed plugins whenever a Redis session starts and every
/// `sync.poll_secs`; `saltutil.sync_modules` does it on demand.
async fn sync_task(shared: Arc<Shared>) {
    // Where signed jobs are required, only a sync job's pins install: a
    // fresh agent must not take whatever older push Redis holds.
    let Some(sync) = shared.sync.as_ref().filter(|s| s.syncs_unpinned()) else {
        return;
    };
    let poll = shared.config.sync.poll_secs;
    loop {
        tokio::select! {
            () = shared.sync_now.notified() => {}
            () = async {
                if poll == 0 {
                    std::future::pending::<()>().await
                }
                tokio::time::sleep(Duration::from_secs(poll)).await
            } => {}
        }
        match shared.sync_plugins(sync, "").await {
            Ok(r) if r.changed.is_empty() && r.refused.is_empty() => {}
            Ok(r) => tracing::info!(changed = ?r.changed, refused = ?r.refused, "plugins synced"),
            Err(e) => tracing::warn!(cause = %e, "plugin sync failed"),
        }
    }
}

async fn heartbeat(shared: Arc<Shared>) {
    let period = Duration::from_secs(shared.config.agent.heartbeat_secs);
    loop {
        tokio::time::sleep(period).await;
        if let Some(mut conn) = shared.conn.conn()
            && let Err(e) = shared.register(&mut conn).await
        {
            tracing::warn!(cause = %e, "heartbeat failed");
        }
    }
}

/// What an agent runs with.
pub struct AgentParts {
    /// Minion id.
    pub id: String,
    pub config: Config,
    pub runtime: Arc<Runtime>,
    pub grains: Map<String, Value>,
    /// The command connection slot, shared with the runtime's `salt://`
    /// file server.
    pub conn: Arc<ConnSlot>,
    pub bus: Bus,
    pub audit: Audit,
    pub metrics: Arc<Metrics>,
    /// Where plugins come from, for hot reload (None: no reload).
    pub plugin_dir: Option<std::path::PathBuf>,
    /// Notified to reload plugins now (SIGHUP).
    pub reload: Arc<Notify>,
}

/// Serve jobs until `shutdown` completes; then let running jobs finish
/// for `agent.shutdown_grace_secs` and return.
pub async fn run(parts: AgentParts, shutdown: impl Future<Output = ()>) -> Result<(), AgentError> {
    let AgentParts {
        id,
        config,
        runtime,
        grains,
        conn,
        bus,
        audit,
        metrics,
        plugin_dir,
        reload,
    } = parts;
    if config.master_topics.is_empty() {
        return Err(AgentError::NoTopics);
    }
    let sec = &config.security;
    sec.for_agent()?;
    let keys = sec
        .trusted_keys
        .iter()
        .map(|spec| read_verifying_key(spec).map(|k| (key_id(&k), k)))
        .collect::<Result<Vec<_>, _>>()?;
    if !sec.signed() {
        tracing::warn!(
            "security.require_signed = false: anyone who can publish to this Redis can run any \
             granted function on this maid, and salt:// content is not authenticated"
        );
    }
    let syncer = Syncer::new(
        &config,
        plugin_dir.as_deref(),
        keys.clone(),
        audit.clone(),
        &id,
    )?;
    let max_skew_ms = i64::try_from(sec.max_skew_secs)
        .unwrap_or(i64::MAX)
        .saturating_mul(1000);
    let verifier = Verifier {
        keys,
        require_signed: sec.signed(),
        max_skew_ms,
    };
    let cap = config.agent.remembered_jids;
    // A job accepted now was within the skew of this clock, so it is fresh
    // for at most two skews from now: its jid is kept that long, and a
    // second more, so no millisecond at the edge finds it fresh and
    // forgotten.
    let retention_ms = max_skew_ms.saturating_mul(2).saturating_add(1_000);
    let jids = match &sec.state_dir {
        Some(dir) => {
            let path = dir.join("accepted-jids");
            let now_ms = chrono::Utc::now().timestamp_millis();
            JidStore::open(&path, cap, retention_ms, now_ms).map_err(|error| AgentError::State {
                what: path.display().to_string(),
                error,
            })?
        }
        None => JidStore::memory(cap, retention_ms),
    };
    let grace = Duration::from_secs_f64(config.agent.shutdown_grace_secs);
    let config_agent = config.agent.clone();
    let shared = Arc::new(Shared {
        id,
        slots: Semaphore::new(config.agent.concurrency),
        jids: Mutex::new(jids),
        verifier,
        audit,
        config,
        runtime,
        grains,
        conn,
        outbox: Outbox::new(
            config_agent.return_buffer,
            config_agent.return_buffer_bytes,
            config_agent.spill_file.clone(),
        ),
        metrics,
        flush: Notify::new(),
        pending: AtomicUsize::new(0),
        started_at: crate::jid::stamp(),
        sync: syncer,
        sync_now: Notify::new(),
    });
    audit_loads(&shared, &Default::default(), "startup");
    if let Some(sync) = &shared.sync {
        sync.load_installed(&shared.runtime, "startup").await;
    }
    metrics_plugins(&shared);
    if let Some(addr) = shared.config.agent.http {
        let m = shared.metrics.clone();
        tokio::spawn(async move {
            if let Err(e) = crate::metrics::serve(addr, m).await {
                tracing::error!(%addr, cause = %e, "cannot serve /healthz and /metrics");
            }
        });
    }
    let flusher = tokio::spawn(flush_outbox(shared.clone()));
    let syncing = tokio::spawn(sync_task(shared.clone()));
    let reloader = plugin_dir.map(|dir| tokio::spawn(reload_plugins(shared.clone(), dir, reload)));
    let (done_tx, mut done_rx) = mpsc::channel::<()>(1);
    let beat = tokio::spawn(heartbeat(shared.clone()));
    // A task of its own, not part of this function's future: a message that
    // wakes a task is handled at once, while waking the runtime's main
    // future costs the runtime a poll for I/O (one `epoll_wait`) first.
    let mut serving = tokio::spawn(serve(bus, shared.clone(), done_tx.clone()));
    tokio::select! {
        () = shutdown => {}
        ended = &mut serving => {
            if let Err(e) = ended
                && e.is_panic()
            {
                std::panic::resume_unwind(e.into_panic());
            }
        }
    }
    serving.abort();
    tracing::info!("shutting down: no new jobs; waiting for running ones");
    drop(done_tx);
    if tokio::time::timeout(grace, done_rx.recv()).await.is_err() {
        tracing::warn!("shutdown grace period over with jobs still running");
    }
    // Returns of the jobs that just finished are flushed before exit.
    if !shared.outbox.is_empty()
        && let Some(mut conn) = shared.conn.conn()
    {
        let _ = shared
            .outbox
            .flush(
                &mut conn,
                shared.config.agent.job_cache_ttl_secs,
                &shared.metrics,
            )
            .await;
    }
    beat.abort();
    flusher.abort();
    syncing.abort();
    if let Some(r) = reloader {
        r.abort();
    }
    Ok(())
}
