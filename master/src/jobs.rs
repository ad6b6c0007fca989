//! The master side: publish a job and collect what comes back.
//!
//! The reply topic is subscribed **before** the job is published (PROTOCOL
//! §1). Collection ([`crate::collect`], which decides; [`run_in`] drives it)
//! stops as soon as every expected maid has pinged and every targeted one
//! has returned, or at the timeout; the report then says
//! what the original masters reported: normal returns, maids that never
//! pinged (missed maids), targeted minions that never returned (missed
//! minions), maids that pinged `match: false` (empty), and ids that
//! returned more than once (repeated).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::time::{Duration, Instant};

use futures_util::{Stream, StreamExt};
use maid_config::FileRoots;
use redis::{AsyncCommands, Msg};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::bus::{Bus, BusError, Conn, publish};
use crate::collect::{Collector, Step, genuine};
use crate::pki::Pki;
use crate::protocol::{self, Job, Reply, Return};
pub use crate::registry::{
    Beneath, Maids, Registry, Targets, accepted_keys, alive_maids, file_keys,
};
use crate::replies::{Received, receive};

/// A job to publish: what goes on the wire ([`Job`]), and how its replies
/// are collected ([`Collect`]).
#[derive(Debug, Clone)]
pub struct JobRequest {
    pub master_topic: String,
    pub tgt: Value,
    pub tgt_type: String,
    pub fun: String,
    pub arg: Vec<Value>,
    pub kwarg: Map<String, Value>,
    pub user: Option<String>,
    pub out: Option<String>,
    /// Sign the job with this key (PROTOCOL §6).
    pub key: Option<ed25519_dalek::SigningKey>,
    /// SHA-256 pinned for each `salt://` source the job reads
    /// ([`Job::source_hashes`]).
    pub source_hashes: BTreeMap<String, String>,
    /// `--delimiter`: [`Job::delimiter`].
    pub delimiter: Option<String>,
    /// The pillar the job delivers to the maids it selects, when it reads
    /// pillar and the master has `pillar_roots` (PROTOCOL §8).
    pub pillar: Option<crate::pillar::deliver::Plan>,
    /// The master's `pillar_roots` and merge settings: what `pillar` is
    /// compiled with, and what a target that reads pillar is evaluated on.
    pub pillar_settings: Option<crate::pillar::Settings>,
    /// How its replies are collected.
    pub collect: Collect,
}

/// How a master collects a job's replies: none of it travels with the
/// job, except that a master that never asks after a running job
/// (`gather_job_timeout` unset) tells the maids its `timeout`.
#[derive(Debug, Clone)]
pub struct Collect {
    /// How long to wait for returns (and, with `gather_job_timeout`,
    /// between asks).
    pub timeout: Duration,
    /// Ids never expected to answer (the original `ip.md`).
    pub exclude: HashSet<String>,
    /// After everything expected came back, how long to keep listening for
    /// repeated returns.
    pub linger: Duration,
    /// The master's key store: with one, a reply counts only when the key
    /// accepted for its maid signed it (PROTOCOL §3.4), and the maids
    /// expected are the accepted ones that are alive.
    pub pki: Option<Pki>,
    /// Salt's `gather_job_timeout`: when `timeout` passes with targeted
    /// minions yet to return, ask them (`saltutil.find_job`) and wait this
    /// long for their answers; those still running the job are waited for
    /// another `timeout`, as Salt's master waits. `None`: do not ask.
    pub gather_job_timeout: Option<Duration>,
}

impl JobRequest {
    /// Whether its target reads pillar (`-I`, `J@`): the master evaluates
    /// it, and the maids and the job cache see the ids it selected.
    pub fn targets_pillar(&self) -> bool {
        crate::target::TargetType::parse(&self.tgt_type)
            .is_ok_and(|t| crate::target::reads_pillar(&self.tgt, t))
    }
}

#[cfg(test)]
impl JobRequest {
    /// `fun` on every minion (`*`), unsigned, with no arguments: what the
    /// unit tests publish.
    pub(crate) fn to_all(fun: &str) -> JobRequest {
        JobRequest {
            master_topic: "master".into(),
            tgt: Value::String("*".into()),
            tgt_type: "glob".into(),
            fun: fun.into(),
            arg: vec![],
            kwarg: Map::new(),
            user: None,
            out: None,
            key: None,
            source_hashes: Default::default(),
            delimiter: None,
            pillar: None,
            pillar_settings: None,
            collect: Collect {
                timeout: Duration::from_secs(5),
                exclude: Default::default(),
                linger: Duration::ZERO,
                pki: None,
                gather_job_timeout: None,
            },
        }
    }
}

/// Salt's default `gather_job_timeout`.
pub const GATHER_JOB_TIMEOUT: Duration = Duration::from_secs(10);

/// The function a master asks minions with whether a job still runs.
pub const FIND_JOB: &str = "saltutil.find_job";

/// What came back for one job.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub jid: String,
    /// Maids the registry says are alive (minus excluded) when the job went out.
    pub expected: BTreeSet<String>,
    /// Maids that pinged `match: true`.
    pub targeted: BTreeSet<String>,
    /// Maids that pinged `match: false`.
    pub empty: BTreeSet<String>,
    /// First return of each minion, in arrival order.
    pub returns: Vec<Return>,
    /// Ids that returned more than once, with how many returns.
    pub repeated: BTreeMap<String, usize>,
    /// Maids that rejected the job, with the reason.
    pub rejected: BTreeMap<String, String>,
    /// Maids that never pinged: expected ones (alive when the job went
    /// out) that did not, and those the target selects that were not
    /// alive. Salt's `[Not connected]`.
    pub missed_maids: BTreeSet<String>,
    /// Targeted minions that did not return before the timeout.
    pub missed_minions: BTreeSet<String>,
    /// Replies that claimed to come from a maid but were not signed by the
    /// key accepted for it, by the maid they named, with why; counted
    /// nowhere else.
    pub forged: BTreeMap<String, String>,
    /// How long collection took.
    #[serde(skip)]
    pub elapsed: Duration,
}

/// Salt's `cmd_subset` choice: of the minions whose `sys.list_functions`
/// return (`listed`) names `fun`, `n` picked at random.
pub fn subset<'a>(
    listed: impl IntoIterator<Item = (&'a String, &'a Value)>,
    fun: &str,
    n: usize,
) -> Vec<String> {
    let mut having: Vec<String> = listed
        .into_iter()
        .filter(|(_, funs)| {
            funs.as_array()
                .is_some_and(|f| f.iter().any(|f| f.as_str() == Some(fun)))
        })
        .map(|(id, _)| id.clone())
        .collect();
    shuffle(&mut having);
    having.truncate(n);
    having
}

/// Put `items` in a random order (Fisher-Yates).
fn shuffle<T>(items: &mut [T]) {
    for i in (1..items.len()).rev() {
        let mut b = [0u8; 8];
        if getrandom::fill(&mut b).is_err() {
            return;
        }
        let j = (u64::from_le_bytes(b) % (i as u64 + 1)) as usize;
        items.swap(i, j);
    }
}

/// Salt's row for a targeted minion that did not return in time, naming
/// the command that looks the job up later.
pub fn no_response(jid: &str) -> String {
    format!(
        "Minion did not return. [No response]\nThe minions may not have all finished running \
         and any remaining minions will return upon completion. To look up the return data for \
         this job later, run the following command:\n\nmaid job {jid}"
    )
}

/// Salt's row for an expected minion that is not connected (a maid that
/// never pinged).
pub const NOT_CONNECTED: &str = "Minion did not return. [Not connected]";

impl Report {
    /// `salt`'s exit status for this report (3008): 0 when every targeted
    /// minion returned retcode 0; 1 when one returned another retcode, or
    /// did not return (Salt counts its "Minion did not return" row as a
    /// failure), or refused the job; 2 when nothing came back at all.
    pub fn exit_code(&self) -> u8 {
        let missed = self.missed_minions.len() + self.missed_maids.len();
        let rows = self.returns.len() + missed + self.rejected.len();
        if rows == 0 {
            2
        } else if rows > self.returns.len() || self.returns.iter().any(|r| r.retcode != 0) {
            1
        } else {
            0
        }
    }
}

impl Registry {
    /// Whom `req`'s target selects among the maids the master knows, alive
    /// or not (and the minions beneath them): whom Salt's master would
    /// publish to. An empty set is Salt's "No minions matched the target":
    /// nothing is sent.
    pub fn selected(&self, req: &JobRequest) -> BTreeSet<String> {
        self.targets(&req.tgt, &req.tgt_type, req.delimiter.as_deref(), &|id| {
            req.collect.exclude.contains(id)
        })
        .ids
    }

    /// The ids `req`'s target names in a list (`-L`, or an `L@` word not
    /// under `not`) that no maid answers for: Salt's master counts them
    /// as targeted minions that never return ([`no_response`]).
    pub fn unknown(&self, req: &JobRequest) -> BTreeSet<String> {
        // A minion beneath a syndic maid is its syndic's to vouch for.
        let known = |id: &String| {
            self.beneath.contains_key(id)
                || (self.maids.contains_key(id)
                    && self
                        .accepted
                        .as_ref()
                        .is_none_or(|keys| keys.contains_key(id)))
        };
        crate::target::listed_ids(&req.tgt, &req.tgt_type)
            .into_iter()
            .filter(|id| !id.is_empty() && !known(id) && !req.collect.exclude.contains(id))
            .collect()
    }
}

/// The expected maids that `req`'s target selects by their registered
/// grains ([`Registry::selected`]), read now.
pub async fn selected(conn: &mut Conn, req: &JobRequest) -> Result<BTreeSet<String>, BusError> {
    Ok(Registry::read(conn, req.collect.pki.as_ref())
        .await?
        .with_pillar(req.pillar_settings.as_ref())
        .selected(req))
}

/// Whether a job running `fun` reads the master's `file_roots` (a state
/// run's SLS files), which must then be in the file store before it is
/// published.
pub fn reads_file_roots(fun: &str) -> bool {
    fun.starts_with("state.")
}

/// The keyword argument a state run reads its master's options from:
/// `{"nodegroups": …}`, for the top file's `nodegroup` matcher and `N@`
/// words (a Salt minion asks its master for them, `master_opts`). Set
/// only by the master, inside the job it signs.
pub const MASTER_OPTS_KWARG: &str = "__master_opts__";

/// `kwarg` as a job running `fun` is published with: for a state run,
/// the master's `nodegroups` and the names of its `file_roots`
/// environments (`envs`, what Salt's minion learns from its master's
/// file server) under [`MASTER_OPTS_KWARG`]; for any job, whatever a
/// caller (an API user) put there itself taken out, so that only the
/// master's own options reach a top file.
pub fn with_master_opts(
    fun: &str,
    mut kwarg: Map<String, Value>,
    nodegroups: &Map<String, Value>,
    file_roots: &FileRoots,
) -> Map<String, Value> {
    kwarg.remove(MASTER_OPTS_KWARG);
    if !reads_file_roots(fun) {
        return kwarg;
    }
    let mut opts = Map::new();
    if !nodegroups.is_empty() {
        opts.insert("nodegroups".into(), Value::Object(nodegroups.clone()));
    }
    let envs: Vec<&str> = file_roots.envs().map(|(env, _)| env).collect();
    if envs.iter().any(|e| *e != "base") {
        opts.insert("envs".into(), serde_json::json!(envs));
    }
    if !opts.is_empty() {
        kwarg.insert(MASTER_OPTS_KWARG.into(), Value::Object(opts));
    }
    kwarg
}

/// Every file under each environment's `roots` stored as `salt://` in
/// that environment (signed with `key` when given) for the state runs
/// about to be published. `maid run` and the API call it before
/// publishing a job [`reads_file_roots`] says needs them.
pub async fn serve_file_roots(
    conn: &mut Conn,
    roots: &FileRoots,
    key: Option<&ed25519_dalek::SigningKey>,
) -> Result<(), maid_bus::filestore::PushError> {
    for (saltenv, dirs) in roots.envs() {
        maid_bus::filestore::push_tree(conn, saltenv, dirs, key).await?;
    }
    Ok(())
}

/// Save `req`'s load as job `jid` ([`jobcache`](crate::jobcache)), the
/// target selecting `minions`, and publish it replying on `topic`; with
/// the pillar of each of `minions` first stored for it when the job
/// delivers pillar (read from `registry`, or a fresh reading).
pub async fn publish_job(
    conn: &mut Conn,
    req: &JobRequest,
    jid: &str,
    topic: &str,
    minions: impl IntoIterator<Item = String>,
    registry: Option<&Registry>,
) -> Result<(), BusError> {
    let minions: BTreeSet<String> = minions.into_iter().collect();
    let delivered = match (&req.pillar, &req.pillar_settings, &req.key) {
        (Some(plan), Some(settings), Some(key)) => {
            let read;
            let registry = match registry {
                Some(r) => r,
                None => {
                    read = Registry::read(conn, req.collect.pki.as_ref()).await?;
                    &read
                }
            };
            crate::pillar::deliver::deliver(
                conn,
                settings,
                plan,
                key,
                registry,
                &minions,
                req.collect.timeout,
            )
            .await?
        }
        (Some(_), _, None) => {
            tracing::warn!("pillar is delivered only in signed jobs: this master has no key");
            Default::default()
        }
        _ => Default::default(),
    };
    let load = crate::jobcache::Load::of(req, jid, minions.iter().cloned());
    crate::jobcache::save(conn, &load).await?;
    // A target that reads pillar was evaluated here: the maids are sent
    // the ids it selected, never the pillar key it named (§8).
    let listed = req.targets_pillar().then_some(&minions);
    let payload = job_payload_with(req, jid, topic, delivered, listed);
    publish(conn, &req.master_topic, &payload).await?;
    Ok(())
}

/// Returns stored in the job cache for `jid`, as they are (signed or not).
pub async fn cached_returns(conn: &mut Conn, jid: &str) -> Result<Vec<Return>, BusError> {
    Ok(cached(conn, jid, None, None).await?.returns)
}

/// What the job cache holds for a job.
#[derive(Debug, Clone, Default)]
pub struct Cached {
    pub returns: Vec<Return>,
    /// Entries not signed by the key accepted for their maid, by the maid
    /// they named, with why (only when verifying).
    pub forged: BTreeMap<String, String>,
}

/// The job cache's returns for `jid`; with the key store `pki`, only
/// those the key accepted for their maid signed, the others as forged.
/// Returns sealed to the master (§8) are opened with `key`.
pub async fn cached(
    conn: &mut Conn,
    jid: &str,
    pki: Option<&Pki>,
    key: Option<&ed25519_dalek::SigningKey>,
) -> Result<Cached, BusError> {
    let accepted = match pki {
        Some(pki) => Some(crate::registry::accepted_keys(conn, pki).await?),
        None => None,
    };
    let accepted = accepted.as_ref();
    let all: BTreeMap<String, String> = conn.hgetall(protocol::job_key(jid)).await?;
    let mut out = Cached::default();
    for (field, text) in all {
        let Ok(received) = receive(text.as_bytes()) else {
            continue;
        };
        match genuine(received, jid, accepted, key, &mut out.forged) {
            Some(Reply::Return(r)) if r.id == field && r.jid == jid => out.returns.push(r),
            _ => {}
        }
    }
    Ok(out)
}

/// `msg` read as a PROTOCOL reply; what does not read is logged.
fn parsed(msg: &Msg) -> Option<Received> {
    let received = receive(msg.get_payload_bytes()).ok();
    if received.is_none() {
        tracing::warn!(
            topic = msg.get_channel_name(),
            "ignored a reply that is not a PROTOCOL reply"
        );
    }
    received
}

/// What every reply topic [`temp_topic`] makes matches, for a master that
/// listens to many jobs on one `PSUBSCRIBE` (`maid api`).
pub const REPLY_PATTERN: &str = "maid.reply.*";

/// A reply topic no other job uses.
pub fn temp_topic(jid: &str) -> String {
    let nonce: u64 = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() as u64 ^ d.as_secs())
        .unwrap_or_default();
    format!("maid.reply.{jid}.{:x}{:x}", std::process::id(), nonce)
}

/// The message that publishes `req` as job `jid` replying on `topic`:
/// the job itself, or its signed envelope when `req.key` is set.
pub fn job_payload(req: &JobRequest, jid: &str, topic: &str) -> String {
    job_payload_with(req, jid, topic, Default::default(), None)
}

/// [`job_payload`] carrying the pillar `delivered` for it.
fn job_payload_with(
    req: &JobRequest,
    jid: &str,
    topic: &str,
    delivered: crate::pillar::deliver::Delivered,
    listed: Option<&BTreeSet<String>>,
) -> String {
    let (tgt, tgt_type) = match listed {
        Some(ids) => (
            Value::Array(ids.iter().cloned().map(Value::String).collect()),
            "list".to_string(),
        ),
        None => (req.tgt.clone(), req.tgt_type.clone()),
    };
    let job = Job {
        jid: jid.to_string(),
        temp_topic: topic.to_string(),
        fun: req.fun.clone(),
        arg: req.arg.clone(),
        kwarg: req.kwarg.clone(),
        tgt,
        tgt_type,
        // A master that asks after a running job (Salt's find_job) lets it
        // run, as a Salt minion does, to the maid's own limit; one that
        // gives up at its timeout has the maid stop the job there.
        timeout: req
            .collect
            .gather_job_timeout
            .is_none()
            .then_some(req.collect.timeout.as_secs_f64()),
        user: req.user.clone(),
        issued_at: Some(chrono::Utc::now().timestamp_millis()),
        out: req.out.clone(),
        topic: Some(req.master_topic.clone()),
        source_hashes: req.source_hashes.clone(),
        pillar: delivered.pins,
        pillar_inline: delivered.inline,
        delimiter: req.delimiter.clone(),
    };
    let payload = serde_json::to_string(&job).expect("jobs serialise");
    match &req.key {
        Some(key) => {
            serde_json::to_string(&crate::trust::sign(payload, key)).expect("envelopes serialise")
        }
        None => payload,
    }
}

/// Publish `req` and collect replies; `on_return` sees each return as it
/// arrives.
pub async fn run(
    bus: &Bus,
    req: &JobRequest,
    on_return: impl FnMut(&Return),
) -> Result<Report, BusError> {
    run_as(bus, req, crate::jid::new_jid(), None, on_return).await
}

/// Publish `req` as job `jid` and return at once, as `salt --async` does:
/// the returns are left to the job cache.
pub async fn submit(
    bus: &Bus,
    req: &JobRequest,
    jid: &str,
    minions: impl IntoIterator<Item = String>,
) -> Result<(), BusError> {
    let mut conn = bus.connect().await?;
    publish_job(&mut conn, req, jid, &temp_topic(jid), minions, None).await
}

/// [`run`] as job `jid`, which the caller chose (to show it first), over
/// `registry` when the caller read it already (to select whom the job
/// goes to).
pub async fn run_as(
    bus: &Bus,
    req: &JobRequest,
    jid: String,
    registry: Option<&Registry>,
    on_return: impl FnMut(&Return),
) -> Result<Report, BusError> {
    let mut conn = bus.connect().await?;
    let topic = temp_topic(&jid);
    let replies = bus.replies(&topic).await?;
    let read;
    let registry = match registry {
        Some(r) => r,
        None => {
            read = Registry::read(&mut conn, req.collect.pki.as_ref())
                .await?
                .with_pillar(req.pillar_settings.as_ref());
            &read
        }
    };
    run_in(&mut conn, registry, replies, jid, &topic, req, on_return).await
}

/// [`run`] over connections the caller already holds: `replies` must
/// already carry what is published on `topic`, so that no PING is missed.
/// Many jobs can then share one command connection and one subscription.
pub async fn run_on(
    conn: &mut Conn,
    replies: impl Stream<Item = Msg> + Unpin,
    jid: String,
    topic: &str,
    req: &JobRequest,
    on_return: impl FnMut(&Return),
) -> Result<Report, BusError> {
    let registry = Registry::read(conn, req.collect.pki.as_ref())
        .await?
        .with_pillar(req.pillar_settings.as_ref());
    run_in(conn, &registry, replies, jid, topic, req, on_return).await
}

/// [`run_on`] over `registry`, which the caller read (to select whom the
/// job goes to): the job expects and targets from that same reading. The
/// decisions are the [`Collector`]'s; this drives it over Redis.
pub async fn run_in(
    conn: &mut Conn,
    registry: &Registry,
    mut replies: impl Stream<Item = Msg> + Unpin,
    jid: String,
    topic: &str,
    req: &JobRequest,
    mut on_return: impl FnMut(&Return),
) -> Result<Report, BusError> {
    let started = Instant::now();
    let mut collector = Collector::new(jid, registry, req, started);
    let selected = collector.selected().clone();
    publish_job(conn, req, collector.jid(), topic, selected, Some(registry)).await?;
    loop {
        let now = Instant::now();
        let until = match collector.next(now) {
            Step::Done => break,
            Step::Wait(until) => until,
            Step::Ask(ids) => {
                // On this job's reply topic: the answers come on the
                // stream already read, told apart by their jid.
                let find_jid = crate::jid::new_jid();
                let ask = find_job(req, collector.jid(), &ids);
                publish(
                    conn,
                    &req.master_topic,
                    &job_payload(&ask, &find_jid, topic),
                )
                .await?;
                collector.asked(find_jid, ids, now);
                continue;
            }
        };
        let wait = until.saturating_duration_since(now).min(TICK);
        match tokio::time::timeout(wait, replies.next()).await {
            Err(_) => {}
            Ok(None) => break,
            Ok(Some(msg)) => {
                if let Some(r) = parsed(&msg).and_then(|received| collector.receive(received)) {
                    on_return(r);
                }
            }
        }
    }
    // Late repeats of a finished job still count.
    let linger_until = tokio::time::Instant::now() + req.collect.linger;
    while let Ok(Some(msg)) = tokio::time::timeout_at(linger_until, replies.next()).await {
        if let Some(received) = parsed(&msg) {
            collector.receive_late(received);
        }
    }
    Ok(collector.finish(started.elapsed()))
}

/// How often collection looks at the clock while no reply comes.
const TICK: Duration = Duration::from_millis(200);

/// `saltutil.find_job` for job `jid`, asked of `ids` as `req` was
/// published, waiting `gather_job_timeout` for answers.
fn find_job(req: &JobRequest, jid: &str, ids: &BTreeSet<String>) -> JobRequest {
    JobRequest {
        tgt: Value::Array(ids.iter().cloned().map(Value::String).collect()),
        tgt_type: "list".into(),
        fun: FIND_JOB.into(),
        arg: vec![Value::String(jid.to_string())],
        kwarg: Map::new(),
        source_hashes: BTreeMap::new(),
        delimiter: None,
        pillar: None,
        pillar_settings: None,
        master_topic: req.master_topic.clone(),
        user: req.user.clone(),
        out: req.out.clone(),
        key: req.key.clone(),
        collect: Collect {
            timeout: req.collect.gather_job_timeout.unwrap_or(GATHER_JOB_TIMEOUT),
            gather_job_timeout: None,
            ..req.collect.clone()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A state run carries the master's nodegroups; no job carries a
    /// caller's own `__master_opts__` (an API user's kwarg), whatever the
    /// function; a master without nodegroups sends none.
    #[test]
    fn only_the_masters_own_options_reach_a_state_run() {
        let groups = json!({"web": "L@a,b"}).as_object().unwrap().clone();
        let forged = json!({"__master_opts__": {"nodegroups": {"web": "*"}}, "test": true})
            .as_object()
            .unwrap()
            .clone();
        let base = FileRoots::base(vec!["/srv/salt".into()]);
        let state = with_master_opts("state.apply", forged.clone(), &groups, &base);
        assert_eq!(
            Value::Object(state),
            json!({"__master_opts__": {"nodegroups": {"web": "L@a,b"}}, "test": true})
        );
        let other = with_master_opts("test.arg", forged.clone(), &groups, &base);
        assert_eq!(Value::Object(other), json!({"test": true}));
        let none = with_master_opts("state.highstate", forged.clone(), &Map::new(), &base);
        assert_eq!(Value::Object(none), json!({"test": true}));
        // Environments besides base are named, never their directories.
        let mut envs = base.clone();
        envs.prepend("dev", vec!["/srv/dev".into()]);
        let state = with_master_opts("state.apply", forged, &Map::new(), &envs);
        assert_eq!(
            Value::Object(state),
            json!({"__master_opts__": {"envs": ["base", "dev"]}, "test": true})
        );
    }
}
