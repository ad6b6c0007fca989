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
//!
//! The per-message path reads as decide, then act: [`admission`] decides
//! what a message is (a [`admission::Verdict`]) from a read-only
//! [`admission::View`]; [`message`] turns the verdict into replies and
//! metrics and starts the job, which [`job`] runs. Every audit record is
//! written by [`records`]. [`tasks`] holds the long-running loops; this
//! file, the shared state and [`run`], which builds an agent.

mod admission;
mod backoff;
mod downstream;
mod job;
mod message;
mod pillar;
mod records;
mod salt_bridge;
mod syndic;
mod tasks;

use std::future::Future;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use redis::AsyncCommands;
use serde_json::{Map, Value};
use tokio::sync::{Notify, Semaphore, mpsc};

use crate::audit::Audit;
use crate::bus::{Bus, BusError, Conn, publish_reply};
use crate::config::Config;
use crate::filestore::{ConnSource, RedisFiles};
use crate::jidstore::JidStore;
use crate::metrics::Metrics;
use crate::outbox::{self, Outbox, Pending};
use crate::protocol::{self, Job, Registration, Reply};
use crate::runtime::{Runtime, RuntimeSettings};
use crate::sync::{JobError, SYNC_ALL, SYNC_MODULES, Syncer};
use crate::trust::{KeyError, Verifier, read_trusted_keys};
use ed25519_dalek::{SigningKey, VerifyingKey};

use backoff::Backoff;
use downstream::Downstream;
pub use message::Requeue;
use tasks::{flush_outbox, heartbeat, metrics_plugins, reload_plugins, serve, sync_task};

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
    #[error("plugin runtime: {0}")]
    Runtime(#[from] crate::runtime::SetupError),
    #[error("plugin dir {dir}: {error}")]
    Plugins {
        dir: String,
        error: crate::runtime::LoadError,
    },
    #[error("{0}")]
    StateDir(#[from] crate::identity::StateDirError),
    #[error("a fleet needs at least one agent id")]
    NoAgents,
    #[error("an agent of the fleet stopped")]
    Stopped,
}

/// The command connection of the current Redis session, shared by every
/// task; replaced on reconnect.
#[derive(Default)]
pub(crate) struct ConnSlot(RwLock<Option<Conn>>);

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
    /// This maid's own key, which signs its replies (none without a
    /// `state_dir`: replies go unsigned, as in v1).
    identity: Option<SigningKey>,
    config: Config,
    runtime: Arc<Runtime>,
    /// Live: `grains.setval` changes them and the registry at once.
    grains: Arc<crate::grains::GrainStore>,
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
    /// Those beneath, on a syndic maid: the maids of `[syndic] redis`, the
    /// Salt master of `[syndic] salt_api`.
    beneath: Vec<Box<dyn Downstream>>,
}

/// How long to keep retrying a PING or reject before giving it up (a
/// return is never given up: it goes to the outbox).
const REPLY_RETRY_FOR: Duration = Duration::from_secs(5);

/// Retcode of the busy return: EX_TEMPFAIL, "try again later".
pub const BUSY_RETCODE: i32 = 75;

impl Shared {
    /// A serialised reply as this maid sends it: signed with its own key
    /// when it has one (§3.4), as it is otherwise.
    fn seal(&self, payload: String) -> String {
        match &self.identity {
            Some(key) => crate::replies::seal(payload, key),
            None => payload,
        }
    }

    /// Publish `reply` on `topic`, first on `first` when given, then on the
    /// current connection, retrying across reconnects for a while.
    async fn send(&self, first: Option<Conn>, topic: &str, reply: &Reply) {
        let payload = self.seal(reply.to_json());
        self.send_payload(first, topic, reply.jid(), &payload).await;
    }

    /// [`Self::send`] of a reply already serialised (or sealed) as
    /// `payload`, for job `jid`.
    async fn send_payload(&self, first: Option<Conn>, topic: &str, jid: &str, payload: &str) {
        let deadline = tokio::time::Instant::now() + REPLY_RETRY_FOR;
        let mut backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(2));
        let mut first = first;
        loop {
            if let Some(mut conn) = first.take().or_else(|| self.conn.conn()) {
                match publish_reply(&mut conn, topic, payload).await {
                    Ok(()) => return,
                    Err(e) => {
                        tracing::warn!(%jid, cause = %e, "publish failed; retrying")
                    }
                }
            }
            if tokio::time::Instant::now() >= deadline {
                tracing::error!(%jid, "reply not published: redis unreachable");
                return;
            }
            backoff.wait().await;
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
        let known = (self.sync.is_some() && (fun == SYNC_MODULES || fun == SYNC_ALL))
            || fun == job::REFRESH_GRAINS
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
            grains: self.grains.read().clone(),
            started_at: self.started_at.clone(),
            last_seen: crate::jid::stamp(),
            pubkey: self
                .identity
                .as_ref()
                .map(|k| crate::trust::encode_verifying(&k.verifying_key())),
            syndic: !self.beneath.is_empty(),
        }
    }

    /// What this maid answers: the plugins' functions and its own.
    fn functions(&self) -> Vec<String> {
        let mut funs = self.runtime.functions();
        if self.sync.is_some() {
            funs.push(SYNC_MODULES.into());
            funs.push(SYNC_ALL.into());
        }
        funs.push(job::REFRESH_GRAINS.into());
        funs.sort();
        funs.dedup();
        funs
    }

    /// How long a syndic maid relays `job`'s replies: the job's own
    /// timeout, else the longest a call may run here.
    fn relay_limit(&self, job: &Job) -> Duration {
        job.time_limit()
            .unwrap_or(Duration::from_secs_f64(self.config.limits.timeout_secs))
    }

    /// `saltutil.refresh_grains`: detect the grains again and merge them as
    /// at start; the heartbeat re-registers them. What detecting them did
    /// outside the sandbox is the job's, for the audit.
    async fn refresh_grains(&self) -> Vec<crate::runtime::CapabilityUse> {
        let (grains, used) = crate::grains::detected(&self.runtime, &self.id, &self.config).await;
        self.grains.replace(grains);
        used
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
    ) -> Result<crate::sync::SyncReport, JobError> {
        let mut conn = self.conn.conn().ok_or(JobError::NotConnected)?;
        let report = sync.sync(&mut conn, &self.runtime, jid).await?;
        if !report.changed.is_empty() {
            self.plugins_changed().await;
        }
        Ok(report)
    }

    /// Answer a `saltutil.sync_modules` job: install what it pins (or,
    /// where unsigned jobs run, the newest pushes when it pins nothing).
    async fn sync_job(
        &self,
        sync: &Syncer,
        job: &Job,
    ) -> Result<crate::sync::SyncReport, JobError> {
        let mut conn = self.conn.conn().ok_or(JobError::NotConnected)?;
        let report = sync
            .sync_job(&mut conn, &self.runtime, &job.jid, &job.kwarg)
            .await?;
        if !report.changed.is_empty() {
            self.plugins_changed().await;
        }
        Ok(report)
    }

    /// Write the registry entry and the alive key.
    async fn register(&self, conn: &mut Conn) -> redis::RedisResult<()> {
        // Signed with this maid's key when it has one (PROTOCOL v1.2 §4):
        // nobody else can write grains a master will believe.
        let value = crate::registry::write(&self.registration(), self.identity.as_ref());
        let _: i64 = conn.hset(protocol::REGISTRY_KEY, &self.id, value).await?;
        let ttl = self.config.agent.heartbeat_secs * 3;
        let _: () = conn.set_ex(protocol::alive_key(&self.id), 1, ttl).await?;
        Ok(())
    }
}

/// Run the agent `config` describes until `shutdown` completes; then let
/// running jobs finish for `agent.shutdown_grace_secs` and return.
///
/// The one place an agent is built. `config` is as
/// [`crate::setup::Setup::into_config`] resolves it: plugins come from its
/// `plugin_dir` (reloaded when files change and on SIGHUP), compiled
/// plugins are cached in its `cache_dir` (none: compiled in memory), the id
/// is its `id` or else the host name, and `salt://` is served from its
/// `file_roots`, then from Redis as far as a trusted key vouches for it.
pub async fn run(config: Config, shutdown: impl Future<Output = ()>) -> Result<(), AgentError> {
    let id = config.id.clone().unwrap_or_else(crate::grains::hostname);
    let keys = trusted_keys(&config)?;
    // Held until the agent returns: one maid per state_dir.
    let _claimed = match &config.security.state_dir {
        Some(dir) => Some(crate::identity::lock_state_dir(dir)?),
        None => None,
    };
    let identity = match &config.security.state_dir {
        Some(dir) => Some(crate::identity::load_or_create(dir)?),
        None => None,
    };
    let conn = Arc::new(ConnSlot::default());
    let files = RedisFiles::new(conn.clone(), keys.clone(), config.security.signed());
    let files = Arc::new(files);
    let grains = crate::grains::of_config(&id, &config);
    let instances = RuntimeSettings::instances_for(config.agent.concurrency);
    let runtime = plugin_runtime(&config, &grains, Some(files), instances).await?;
    // One store: what plugins set is what targeting and the registry see.
    let grains = runtime.grains().clone();
    grains.replace(core_grains(&runtime, &id, &config).await);
    let plugin_dir = config.plugin_dir.clone();
    // The audit chain is this maid's: checkpointed with its key, its head
    // kept in its state_dir.
    let chain = crate::audit::ChainSettings {
        key: identity.clone(),
        minion: id.clone(),
        head_file: config
            .security
            .state_dir
            .as_ref()
            .map(|d| d.join("audit.head")),
    };
    let audit = open_audit(&config, &id, chain).await?;
    let reload = Arc::new(Notify::new());
    tokio::spawn(on_sighup(audit.clone(), reload.clone()));
    let parts = Parts {
        id,
        bus: Bus::new(&config.redis)?,
        keys,
        identity,
        config,
        runtime,
        grains,
        conn,
        audit,
        metrics: Arc::new(Metrics::new()),
        plugin_dir,
        reload,
    };
    serve_agent(parts, shutdown).await
}

/// Run one agent per id of `ids` in this process, all sharing one plugin
/// runtime, one metrics registry and one audit log, until `shutdown`
/// completes or one of them stops; agent `i` runs on `place(i)`. This is
/// how the benchmark and the soak test stand up a large fleet on one
/// machine. Plugins are not reloaded and `salt://` is served only from the
/// config's `file_roots`.
pub async fn run_fleet(
    config: Config,
    ids: &[String],
    place: impl Fn(usize) -> tokio::runtime::Handle,
    shutdown: impl Future<Output = ()>,
) -> Result<(), AgentError> {
    let first = ids.first().ok_or(AgentError::NoAgents)?;
    let keys = trusted_keys(&config)?;
    let grains = crate::grains::of_config(first, &config);
    // Every agent may have a call running at once: a fan-out.
    let instances = RuntimeSettings::instances_for(ids.len());
    let runtime = plugin_runtime(&config, &grains, None, instances).await?;
    let grains = core_grains(&runtime, first, &config).await;
    // Stand-ins for many hosts share one log: a chain without a key.
    let audit = open_audit(&config, first, Default::default()).await?;
    let bus = Bus::new(&config.redis)?;
    let metrics = Arc::new(Metrics::new());
    let mut agents = tokio::task::JoinSet::new();
    for (i, id) in ids.iter().enumerate() {
        let mut grains = grains.clone();
        grains.insert("id".into(), Value::String(id.clone()));
        // Stand-ins for many hosts keep no grains file.
        let grains = Arc::new(crate::grains::GrainStore::new(grains, None));
        let parts = Parts {
            id: id.clone(),
            keys: keys.clone(),
            // Many agents stand in for many hosts: they keep no state of
            // their own, so none has a key.
            identity: None,
            config: config.clone(),
            runtime: runtime.clone(),
            grains,
            conn: Arc::new(ConnSlot::default()),
            bus: bus.clone(),
            audit: audit.clone(),
            metrics: metrics.clone(),
            plugin_dir: None,
            reload: Arc::new(Notify::new()),
        };
        agents.spawn_on(serve_agent(parts, std::future::pending()), &place(i));
    }
    tokio::select! {
        () = shutdown => Ok(()),
        Some(ended) = agents.join_next() => match ended {
            Ok(result) => result.and(Err(AgentError::Stopped)),
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => Err(AgentError::Stopped),
        },
    }
}

/// The master keys `config` trusts, once its security settings are whole
/// (read once: jobs, pushed plugins and `salt://` content are all checked
/// against them).
fn trusted_keys(config: &Config) -> Result<Vec<(String, VerifyingKey)>, AgentError> {
    config.security.for_agent()?;
    Ok(read_trusted_keys(&config.security.trusted_keys)?)
}

/// The plugin runtime of `config` ([`crate::setup::runtime`]) with every
/// plugin of its `plugin_dir` loaded; one that fails is logged and left
/// out.
async fn plugin_runtime(
    config: &Config,
    grains: &Map<String, Value>,
    fallback: Option<Arc<dyn crate::fileserver::FileServer>>,
    instances: u32,
) -> Result<Arc<Runtime>, AgentError> {
    let runtime = Runtime::for_config(config, grains, fallback, instances, false)
        .map_err(AgentError::Runtime)?;
    if let Some(dir) = &config.plugin_dir {
        load_plugins(&runtime, dir).await?;
    }
    Ok(runtime)
}

/// The grains of maid `id` at start, the core ones detected by the grains
/// plugin under its grants; what that touched is logged.
async fn core_grains(runtime: &Runtime, id: &str, config: &Config) -> Map<String, Value> {
    let (grains, used) = crate::grains::detected(runtime, id, config).await;
    tracing::info!(
        grains = grains.len(),
        host_calls = used.len(),
        "grains detected"
    );
    tracing::debug!(?used, "what detecting the grains read and ran");
    grains
}

async fn load_plugins(runtime: &Runtime, dir: &std::path::Path) -> Result<(), AgentError> {
    let failed = runtime
        .load_dir(dir)
        .await
        .map_err(|error| AgentError::Plugins {
            dir: dir.display().to_string(),
            error,
        })?;
    tracing::info!(
        plugins = runtime.plugins().len(),
        failed = failed.len(),
        dir = %dir.display(),
        "plugins loaded"
    );
    Ok(())
}

/// The audit trail `config` asks for: its file, and the stream and
/// syslog sinks of maid `id` (the stream `maid:audit:<id>`).
async fn open_audit(
    config: &Config,
    id: &str,
    chain: crate::audit::ChainSettings,
) -> Result<Audit, AgentError> {
    let settings = &config.audit;
    if !settings.enabled() {
        return Ok(Audit::disabled());
    }
    let mut targets = Vec::new();
    if settings.stream {
        targets.push(crate::audit::Target::Stream {
            bus: Box::new(Bus::new(&config.redis)?),
            key: maid_protocol::auditchain::stream_key(id),
            maxlen: settings.stream_maxlen,
        });
    }
    if let Some(spec) = &settings.syslog {
        let syslog = crate::audit::syslog::Syslog::parse(spec, id)?;
        targets.push(crate::audit::Target::Syslog(syslog));
    }
    let what = match &settings.path {
        Some(path) => format!("audit log {}", path.display()),
        None => "audit chain".into(),
    };
    Audit::open(
        settings.path.clone(),
        targets,
        (settings.queue, settings.spool),
        chain,
    )
    .await
    .map_err(|error| AgentError::State { what, error })
}

/// SIGHUP: reopen the audit log (after rotation) and reload plugins.
async fn on_sighup(audit: Audit, reload: Arc<Notify>) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        return;
    };
    while hup.recv().await.is_some() {
        tracing::info!("SIGHUP: reopening the audit log and reloading plugins");
        audit.reopen();
        reload.notify_one();
    }
}

/// What an agent runs with.
struct Parts {
    /// Minion id.
    id: String,
    /// The master keys it trusts (`security.trusted_keys`, read).
    keys: Vec<(String, VerifyingKey)>,
    /// Its own key, when it keeps state.
    identity: Option<SigningKey>,
    config: Config,
    runtime: Arc<Runtime>,
    grains: Arc<crate::grains::GrainStore>,
    /// The command connection slot, shared with the runtime's `salt://`
    /// file server.
    conn: Arc<ConnSlot>,
    bus: Bus,
    audit: Audit,
    metrics: Arc<Metrics>,
    /// Where plugins come from, for hot reload (None: no reload).
    plugin_dir: Option<std::path::PathBuf>,
    /// Notified to reload plugins now (SIGHUP).
    reload: Arc<Notify>,
}

/// Serve jobs until `shutdown` completes; then let running jobs finish
/// for `agent.shutdown_grace_secs` and return.
async fn serve_agent(parts: Parts, shutdown: impl Future<Output = ()>) -> Result<(), AgentError> {
    if parts.config.master_topics.is_empty() {
        return Err(AgentError::NoTopics);
    }
    if !parts.config.security.signed() {
        tracing::warn!(
            "security.require_signed = false: anyone who can publish to this Redis can run any \
             granted function on this maid, and salt:// content is not authenticated"
        );
    }
    let grace = Duration::from_secs_f64(parts.config.agent.shutdown_grace_secs);
    let (bus, plugin_dir, reload) = (
        parts.bus.clone(),
        parts.plugin_dir.clone(),
        parts.reload.clone(),
    );
    let shared = Arc::new(shared(parts)?);
    start_up(&shared).await;
    let (done_tx, done_rx) = mpsc::channel::<()>(1);
    let tasks = Tasks::spawn(&shared, plugin_dir, reload);
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
    drain(&shared, grace, done_tx, done_rx).await;
    tasks.abort();
    gone(&shared).await;
    // The records of the jobs that ran are written, and signed.
    shared.audit.finish().await;
    Ok(())
}

/// The state the message loop and every job share, built from `parts`:
/// the verifier and the jids it remembers (from `state_dir` when there is
/// one), the syncer, and those beneath a syndic maid.
fn shared(parts: Parts) -> Result<Shared, AgentError> {
    let Parts {
        id,
        keys,
        identity,
        config,
        runtime,
        grains,
        conn,
        audit,
        metrics,
        plugin_dir,
        ..
    } = parts;
    let sec = &config.security;
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
    let jids = remembered_jids(&config, max_skew_ms)?;
    let beneath = downstreams(&config)?;
    let agent = config.agent.clone();
    Ok(Shared {
        id,
        identity,
        slots: Semaphore::new(agent.concurrency),
        jids: Mutex::new(jids),
        verifier,
        audit,
        config,
        runtime,
        grains,
        conn,
        outbox: Outbox::new(
            agent.return_buffer,
            agent.return_buffer_bytes,
            agent.spill_file.clone(),
        ),
        metrics,
        flush: Notify::new(),
        pending: AtomicUsize::new(0),
        started_at: crate::jid::stamp(),
        sync: syncer,
        sync_now: Notify::new(),
        beneath,
    })
}

/// Those beneath this maid, when `[syndic]` names them.
fn downstreams(config: &Config) -> Result<Vec<Box<dyn Downstream>>, AgentError> {
    let mut beneath: Vec<Box<dyn Downstream>> = Vec::new();
    let Some(s) = &config.syndic else {
        return Ok(beneath);
    };
    if let Some(redis) = &s.redis {
        beneath.push(Box::new(syndic::Syndic::new(redis, s.refresh_secs)?));
    }
    if let Some(api) = &s.salt_api {
        beneath.push(Box::new(salt_bridge::SaltBridge::new(api)?));
    }
    Ok(beneath)
}

/// The jids this maid accepted, kept in `state_dir` when there is one. A
/// job accepted now was within the skew of this clock, so it is fresh for
/// at most two skews from now: its jid is kept that long, and a second
/// more, so no millisecond at the edge finds it fresh and forgotten.
fn remembered_jids(config: &Config, max_skew_ms: i64) -> Result<JidStore, AgentError> {
    let cap = config.agent.remembered_jids;
    let retention_ms = max_skew_ms.saturating_mul(2).saturating_add(1_000);
    match &config.security.state_dir {
        Some(dir) => {
            let path = dir.join("accepted-jids");
            let now_ms = chrono::Utc::now().timestamp_millis();
            JidStore::open(&path, cap, retention_ms, now_ms).map_err(|error| AgentError::State {
                what: path.display().to_string(),
                error,
            })
        }
        None => Ok(JidStore::memory(cap, retention_ms)),
    }
}

/// Before the first job: audit the plugins loaded, read who is beneath,
/// load synced plugins, and serve `/healthz` and `/metrics`.
async fn start_up(shared: &Arc<Shared>) {
    records::plugins_loaded(shared, &Default::default(), "startup");
    downstream::read_now(shared).await;
    if let Some(sync) = &shared.sync {
        sync.load_installed(&shared.runtime, "startup").await;
    }
    metrics_plugins(shared);
    if let Some(addr) = shared.config.agent.http {
        let m = shared.metrics.clone();
        tokio::spawn(async move {
            if let Err(e) = crate::metrics::serve(addr, m).await {
                tracing::error!(%addr, cause = %e, "cannot serve /healthz and /metrics");
            }
        });
    }
}

/// The long-running tasks beside the message loop, stopped together.
struct Tasks(Vec<tokio::task::JoinHandle<()>>);

impl Tasks {
    /// The outbox flusher, the syncer, the plugin reloader (with a plugin
    /// directory), the heartbeat and the refresh of those beneath.
    fn spawn(
        shared: &Arc<Shared>,
        plugin_dir: Option<std::path::PathBuf>,
        reload: Arc<Notify>,
    ) -> Tasks {
        let mut tasks = vec![
            tokio::spawn(flush_outbox(shared.clone())),
            tokio::spawn(sync_task(shared.clone())),
            tokio::spawn(heartbeat(shared.clone())),
            tokio::spawn(downstream::refresh(shared.clone())),
        ];
        if let Some(dir) = plugin_dir {
            tasks.push(tokio::spawn(reload_plugins(shared.clone(), dir, reload)));
        }
        Tasks(tasks)
    }

    fn abort(self) {
        for task in self.0 {
            task.abort();
        }
    }
}

/// Stopped is not connected, at once: a master reports this maid `[Not
/// connected]` from now on, not after its alive key's TTL (the heartbeat,
/// which keeps it, has stopped). An expiry, which every agent's Redis user
/// may set on its own key.
async fn gone(shared: &Shared) {
    let Some(mut conn) = shared.conn.conn() else {
        return;
    };
    let gone: redis::RedisResult<bool> = conn.expire(protocol::alive_key(&shared.id), 0).await;
    if let Err(e) = gone {
        tracing::warn!(cause = %e, "cannot mark this maid gone; its alive key expires on its own");
    }
}

/// Shutting down: no new jobs; running ones get `grace` to finish (each
/// holds a clone of `done_tx`, so `done_rx` ends when the last one does),
/// then what they returned is flushed from the outbox.
async fn drain(
    shared: &Shared,
    grace: Duration,
    done_tx: mpsc::Sender<()>,
    mut done_rx: mpsc::Receiver<()>,
) {
    tracing::info!("shutting down: no new jobs; waiting for running ones");
    drop(done_tx);
    if tokio::time::timeout(grace, done_rx.recv()).await.is_err() {
        tracing::warn!("shutdown grace period over with jobs still running");
    }
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
}
