//! The master side: publish a job and collect what comes back.
//!
//! The reply topic is subscribed **before** the job is published (PROTOCOL
//! §1). Collection stops as soon as every expected maid has pinged and
//! every targeted one has returned, or at the timeout; the report then says
//! what the original masters reported: normal returns, maids that never
//! pinged (missed maids), targeted minions that never returned (missed
//! minions), maids that pinged `match: false` (empty), and ids that
//! returned more than once (repeated).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::time::{Duration, Instant};

use futures_util::{Stream, StreamExt};
use redis::{AsyncCommands, Msg};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::bus::{Bus, BusError, Conn, publish};
use crate::pki::Pki;
use crate::protocol::{self, Job, Registration, Reply, Return};
use crate::replies::{AcceptedKeys, Received, receive};

/// A job to publish.
#[derive(Debug, Clone)]
pub struct JobRequest {
    pub master_topic: String,
    pub tgt: Value,
    pub tgt_type: String,
    pub fun: String,
    pub arg: Vec<Value>,
    pub kwarg: Map<String, Value>,
    pub timeout: Duration,
    pub user: Option<String>,
    pub out: Option<String>,
    /// Ids never expected to answer (the original `ip.md`).
    pub exclude: HashSet<String>,
    /// After everything expected came back, how long to keep listening for
    /// repeated returns.
    pub linger: Duration,
    /// Sign the job with this key (PROTOCOL §6).
    pub key: Option<ed25519_dalek::SigningKey>,
    /// SHA-256 pinned for each `salt://` source the job reads
    /// ([`Job::source_hashes`]).
    pub source_hashes: BTreeMap<String, String>,
    /// The master's key store: with one, a reply counts only when the key
    /// accepted for its maid signed it (PROTOCOL §3.4), and the maids
    /// expected are the accepted ones that are alive.
    pub pki: Option<Pki>,
    /// Salt's `gather_job_timeout`: when `timeout` passes with targeted
    /// minions yet to return, ask them (`saltutil.find_job`) and wait this
    /// long for their answers; those still running the job are waited for
    /// another `timeout`, as Salt's master waits. `None`: do not ask.
    pub gather_job_timeout: Option<Duration>,
    /// `--delimiter`: [`Job::delimiter`].
    pub delimiter: Option<String>,
}

/// Salt's default `gather_job_timeout`.
pub const GATHER_JOB_TIMEOUT: Duration = Duration::from_secs(10);

/// The function a master asks minions with whether a job still runs.
pub const FIND_JOB: &str = "saltutil.find_job";

/// A `saltutil.find_job` asked of the minions still to return.
struct FindJob {
    jid: String,
    asked: BTreeSet<String>,
    answered: BTreeSet<String>,
    running: BTreeSet<String>,
    until: tokio::time::Instant,
}

impl FindJob {
    /// Take in a genuine return of the find-job: a minion asked that
    /// returns the job's data (a non-empty object) still runs it; `{}`,
    /// or anything else (no `saltutil`, no `jobs` grant), says it does
    /// not.
    fn answer(&mut self, r: Return) {
        if !self.asked.contains(&r.id) {
            return;
        }
        self.answered.insert(r.id.clone());
        if r.ret.as_object().is_some_and(|o| !o.is_empty()) {
            self.running.insert(r.id);
        }
    }
}

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
    /// Expected maids that never pinged.
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
    /// Every expected maid pinged and every targeted one returned
    /// (`counts`: returns seen per id).
    fn complete(&self, pinged: &BTreeSet<String>, counts: &BTreeMap<String, usize>) -> bool {
        !self.expected.is_empty()
            && self.expected.is_subset(pinged)
            && self
                .targeted
                .iter()
                .all(|t| counts.contains_key(t) || self.rejected.contains_key(t))
    }

    /// `salt`'s exit status for this report (3008): 0 when every targeted
    /// minion returned retcode 0; 1 when one returned another retcode, or
    /// did not return (Salt counts its "Minion did not return" row as a
    /// failure), or refused the job; 2 when nothing came back at all.
    pub fn exit_code(&self) -> u8 {
        self.exit_code_with(true)
    }

    /// [`Self::exit_code`], with `timeouts` false as `salt --hide-timeout`
    /// decides it: a minion that did not return has no row, so fails
    /// nothing.
    pub fn exit_code_with(&self, timeouts: bool) -> u8 {
        let missed = if timeouts {
            self.missed_minions.len() + self.missed_maids.len()
        } else {
            0
        };
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

/// Every registry entry by id: whether its alive key exists, and the
/// registration when it reads as one.
pub type Maids = BTreeMap<String, (bool, Option<Registration>)>;

/// The registry entries, each with whether its alive key exists: the
/// registry, then every alive key at once (one pipeline; on a cluster,
/// where the keys lie on many nodes, all asked together), whatever the
/// fleet's size.
pub async fn alive_maids(conn: &mut Conn) -> redis::RedisResult<Maids> {
    let all: BTreeMap<String, String> = conn.hgetall(protocol::REGISTRY_KEY).await?;
    if all.is_empty() {
        return Ok(Maids::new());
    }
    let alive: Vec<bool> = match conn {
        Conn::Single(single) => {
            let mut pipe = redis::pipe();
            for id in all.keys() {
                pipe.exists(protocol::alive_key(id));
            }
            pipe.query_async(single).await?
        }
        Conn::Cluster(cluster, _) => {
            futures_util::future::try_join_all(all.keys().map(|id| {
                let mut c = cluster.clone();
                let key = protocol::alive_key(id);
                async move { c.exists::<_, bool>(key).await }
            }))
            .await?
        }
    };
    Ok(all
        .into_iter()
        .zip(alive)
        .map(|((id, json), alive)| (id, (alive, serde_json::from_str(&json).ok())))
        .collect())
}

/// What one job reads of the registry, once: the maids, and the minions
/// beneath syndic maids. Whom a job selects and whom it then expects come
/// from the same reading.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    pub maids: Maids,
    pub beneath: Beneath,
}

impl Registry {
    /// Read the registry.
    pub async fn read(conn: &mut Conn) -> redis::RedisResult<Self> {
        let maids = alive_maids(conn).await?;
        let beneath = beneath(conn, &maids).await?;
        Ok(Self { maids, beneath })
    }

    /// The keys accepted for these maids, when `req`'s master verifies.
    fn accepted(&self, req: &JobRequest) -> Option<AcceptedKeys> {
        req.pki
            .as_ref()
            .map(|pki| accepted_keys(pki, &self.maids, &self.beneath))
    }

    /// Whom `req`'s target selects ([`selected`]).
    pub fn selected(&self, req: &JobRequest) -> BTreeSet<String> {
        matching(&self.maids, &self.beneath, req, self.accepted(req).as_ref())
    }

    /// The ids `req`'s target names in a list (`-L`, or an `L@` word not
    /// under `not`) that no maid answers for: Salt's master counts them
    /// as targeted minions that never return ([`no_response`]).
    pub fn unknown(&self, req: &JobRequest) -> BTreeSet<String> {
        let accepted = self.accepted(req);
        // A minion beneath a syndic maid is its syndic's to vouch for.
        let known = |id: &String| {
            self.beneath.contains_key(id)
                || (self.maids.contains_key(id)
                    && accepted.as_ref().is_none_or(|keys| keys.contains_key(id)))
        };
        crate::target::listed_ids(&req.tgt, &req.tgt_type)
            .into_iter()
            .filter(|id| !id.is_empty() && !known(id) && !req.exclude.contains(id))
            .collect()
    }
}

/// The minions beneath syndic maids (PROTOCOL §7), by id: the syndic maid
/// each is beneath, and its registration as the syndic maid listed it.
pub type Beneath = BTreeMap<String, (String, Registration)>;

/// The minions the alive syndic maids of `maids` list beneath them. A
/// list that does not read is left out (and logged); an id the registry
/// has itself stays the registry's.
pub async fn beneath(conn: &mut Conn, maids: &Maids) -> redis::RedisResult<Beneath> {
    let syndics: Vec<&String> = maids
        .iter()
        .filter(|(_, (alive, reg))| *alive && reg.as_ref().is_some_and(|r| r.syndic))
        .map(|(id, _)| id)
        .collect();
    let mut out = Beneath::new();
    for syndic in syndics {
        let text: Option<String> = conn.get(protocol::syndic_key(syndic)).await?;
        let Some(text) = text else { continue };
        let listed: BTreeMap<String, Registration> = match serde_json::from_str(&text) {
            Ok(listed) => listed,
            Err(e) => {
                tracing::warn!(%syndic, cause = %e, "the minions beneath a syndic maid do not read");
                continue;
            }
        };
        for (id, reg) in listed {
            if !maids.contains_key(&id) {
                out.entry(id).or_insert_with(|| (syndic.clone(), reg));
            }
        }
    }
    Ok(out)
}

/// Every registration the master can see, for filing their keys: the
/// registry's, and the minions' beneath syndic maids (never alive: they
/// are not maids a job expects).
pub async fn registrations(conn: &mut Conn) -> redis::RedisResult<Maids> {
    let mut maids = alive_maids(conn).await?;
    let beneath = beneath(conn, &maids).await?;
    maids.extend(as_maids(&beneath));
    Ok(maids)
}

/// The minions `beneath` as registry entries that are never alive: what
/// their keys are filed from.
fn as_maids(beneath: &Beneath) -> Maids {
    beneath
        .iter()
        .map(|(id, (_, reg))| (id.clone(), (false, Some(reg.clone()))))
        .collect()
}

/// The maids a job expects: alive, not excluded, and accepted (when the
/// master verifies, `accepted` is set).
fn expected<'m>(
    maids: &'m Maids,
    req: &'m JobRequest,
    accepted: Option<&'m AcceptedKeys>,
) -> impl Iterator<Item = (&'m String, Option<&'m Registration>)> {
    maids
        .iter()
        .filter(|(id, (alive, _))| *alive && !req.exclude.contains(*id))
        .filter(move |(id, _)| accepted.is_none_or(|keys| keys.contains_key(*id)))
        .map(|(id, (_, reg))| (id, reg.as_ref()))
}

/// The expected maids that `req`'s target selects by their registered
/// grains: whom Salt's master would publish to. An empty set is Salt's "No
/// minions matched the target": nothing is sent. A target a maid cannot
/// evaluate selects nobody, as Salt's master finds no minion for it.
pub async fn selected(conn: &mut Conn, req: &JobRequest) -> Result<BTreeSet<String>, BusError> {
    Ok(Registry::read(conn).await?.selected(req))
}

/// The expected maids of `maids`, and the minions `beneath` them, that
/// `req`'s target selects. A minion beneath counts when the syndic maid
/// that lists it is expected; its key is checked by its syndic's side.
fn matching(
    maids: &Maids,
    beneath: &Beneath,
    req: &JobRequest,
    accepted: Option<&AcceptedKeys>,
) -> BTreeSet<String> {
    let Ok(tgt_type) = crate::target::TargetType::parse(&req.tgt_type) else {
        return BTreeSet::new();
    };
    let empty = Map::new();
    let targets = |id: &str, grains: &Map<String, Value>| {
        crate::target::matches_delimited(&req.tgt, tgt_type, id, grains, req.delimiter.as_deref())
            .unwrap_or(false)
    };
    let expected: BTreeMap<&String, Option<&Registration>> =
        expected(maids, req, accepted).collect();
    let leaves = beneath
        .iter()
        .filter(|(id, (syndic, reg))| {
            expected.contains_key(syndic) && !req.exclude.contains(*id) && targets(id, &reg.grains)
        })
        .map(|(id, _)| id.clone());
    // A syndic maid that lists no one beneath it (over a Salt master,
    // whose own targeting decides) may have anyone there: it is sent the
    // job, and its PING says whom it targeted.
    let listing: BTreeSet<&String> = beneath.values().map(|(syndic, _)| syndic).collect();
    let unknown_beneath = |id: &String, reg: Option<&Registration>| {
        reg.is_some_and(|r| r.syndic) && !listing.contains(id)
    };
    expected
        .iter()
        .filter(|(id, reg)| {
            targets(id, reg.map_or(&empty, |r| &r.grains)) || unknown_beneath(id, **reg)
        })
        .map(|(id, _)| (*id).clone())
        .chain(leaves)
        .collect()
}

/// Save `req`'s load as job `jid` ([`jobcache`](crate::jobcache)), the
/// target selecting `minions`, and publish it replying on `topic`.
pub async fn publish_job(
    conn: &mut Conn,
    req: &JobRequest,
    jid: &str,
    topic: &str,
    minions: impl IntoIterator<Item = String>,
) -> Result<(), BusError> {
    let load = crate::jobcache::Load::of(req, jid, minions);
    crate::jobcache::save(conn, &load).await?;
    publish(conn, &req.master_topic, &job_payload(req, jid, topic)).await?;
    Ok(())
}

/// Returns stored in the job cache for `jid`, as they are (signed or not).
pub async fn cached_returns(conn: &mut Conn, jid: &str) -> redis::RedisResult<Vec<Return>> {
    Ok(cached(conn, jid, None).await?.returns)
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
pub async fn cached(conn: &mut Conn, jid: &str, pki: Option<&Pki>) -> redis::RedisResult<Cached> {
    let accepted = match pki {
        Some(pki) => {
            let maids = alive_maids(conn).await?;
            Some(accepted_keys(pki, &maids, &beneath(conn, &maids).await?))
        }
        None => None,
    };
    let accepted = accepted.as_ref();
    let all: BTreeMap<String, String> = conn.hgetall(protocol::job_key(jid)).await?;
    let mut out = Cached::default();
    for (field, text) in all {
        let Ok(received) = receive(text.as_bytes()) else {
            continue;
        };
        match genuine(received, jid, accepted, &mut out.forged) {
            Some(Reply::Return(r)) if r.id == field && r.jid == jid => out.returns.push(r),
            _ => {}
        }
    }
    Ok(out)
}

/// File the keys the registry entries `maids` carry, as their maids'
/// submissions ([`Pki::submit_registry`]).
pub fn file_registered_keys(pki: &Pki, maids: &Maids) -> Result<(), crate::pki::PkiError> {
    pki.submit_registry(
        maids
            .iter()
            .filter_map(|(id, (_, reg))| reg.as_ref().map(|r| (id, r))),
    )
}

/// The accepted keys of `pki`, after filing what the registry carries and
/// what syndic maids list `beneath` them; none (so nothing counts) when
/// the store cannot be read.
pub fn accepted_keys(pki: &Pki, maids: &Maids, beneath: &Beneath) -> AcceptedKeys {
    let filed = file_registered_keys(pki, maids)
        .and_then(|()| file_registered_keys(pki, &as_maids(beneath)));
    match filed.and_then(|()| pki.accepted()) {
        Ok(keys) => keys,
        Err(e) => {
            tracing::error!(cause = %e, "cannot read the accepted maid keys: no reply counts");
            AcceptedKeys::new()
        }
    }
}

/// The reply `msg` carries when it is one of `report`'s job and, with
/// `accepted`, signed by the key accepted for its maid; a forged one is
/// noted in `report` (and logged), anything else is dropped.
fn counted(msg: &Msg, report: &mut Report, accepted: Option<&AcceptedKeys>) -> Option<Reply> {
    of_job(parsed(msg)?, report, accepted)
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

/// `received`'s reply when it is `report`'s job's and genuine.
fn of_job(
    received: Received,
    report: &mut Report,
    accepted: Option<&AcceptedKeys>,
) -> Option<Reply> {
    if received.reply.jid() != report.jid {
        return None;
    }
    genuine(received, &report.jid, accepted, &mut report.forged)
}

/// `received`'s reply when, with `accepted`, the key accepted for its maid
/// signed it; a forged one goes into `forged` (maid → why) and the log.
fn genuine(
    received: Received,
    jid: &str,
    accepted: Option<&AcceptedKeys>,
    forged: &mut BTreeMap<String, String>,
) -> Option<Reply> {
    if let Some(keys) = accepted
        && let Err(why) = received.verify(keys)
    {
        let maid = received.maid().to_string();
        tracing::warn!(%jid, %maid, %why, "forged reply: not counted");
        forged.insert(maid, why);
        return None;
    }
    Some(received.reply)
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
    let job = Job {
        jid: jid.to_string(),
        temp_topic: topic.to_string(),
        fun: req.fun.clone(),
        arg: req.arg.clone(),
        kwarg: req.kwarg.clone(),
        tgt: req.tgt.clone(),
        tgt_type: req.tgt_type.clone(),
        // A master that asks after a running job (Salt's find_job) lets it
        // run, as a Salt minion does, to the maid's own limit; one that
        // gives up at its timeout has the maid stop the job there.
        timeout: req
            .gather_job_timeout
            .is_none()
            .then_some(req.timeout.as_secs_f64()),
        user: req.user.clone(),
        issued_at: Some(chrono::Utc::now().timestamp_millis()),
        out: req.out.clone(),
        topic: Some(req.master_topic.clone()),
        source_hashes: req.source_hashes.clone(),
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
    publish_job(&mut conn, req, jid, &temp_topic(jid), minions).await
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
            read = Registry::read(&mut conn).await?;
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
    let registry = Registry::read(conn).await?;
    run_in(conn, &registry, replies, jid, topic, req, on_return).await
}

/// [`run_on`] over `registry`, which the caller read (to select whom the
/// job goes to): the job expects and targets from that same reading.
pub async fn run_in(
    conn: &mut Conn,
    registry: &Registry,
    mut replies: impl Stream<Item = Msg> + Unpin,
    jid: String,
    topic: &str,
    req: &JobRequest,
    mut on_return: impl FnMut(&Return),
) -> Result<Report, BusError> {
    let mut report = Report {
        jid,
        ..Default::default()
    };
    let Registry { maids, beneath } = registry;
    let accepted = registry.accepted(req);
    report.expected = expected(maids, req, accepted.as_ref())
        .map(|(id, _)| id.clone())
        .collect();
    let started = Instant::now();
    let minions = matching(maids, beneath, req, accepted.as_ref());
    // The minions each syndic maid listed in its PING: the only ids other
    // than its own it may return for.
    let mut listed: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    publish_job(conn, req, &report.jid, topic, minions).await?;

    let mut pinged = BTreeSet::new();
    let mut deadline = tokio::time::Instant::now() + req.timeout;
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut finding: Option<FindJob> = None;
    let tick = Duration::from_millis(200);
    loop {
        if report.complete(&pinged, &counts) {
            break;
        }
        let now = tokio::time::Instant::now();
        if let Some(f) = &finding
            && (now >= f.until || f.answered.is_superset(&f.asked))
        {
            // As Salt's master: while a minion says it runs the job, wait
            // another timeout; when none does, the job is over.
            if f.running.is_empty() {
                break;
            }
            tracing::debug!(jid = %report.jid, running = ?f.running, "still running; waiting");
            deadline = now + req.timeout;
            finding = None;
        }
        if now >= deadline && finding.is_none() {
            let missing: BTreeSet<String> = report
                .targeted
                .iter()
                .filter(|t| !counts.contains_key(*t) && !report.rejected.contains_key(*t))
                .cloned()
                .collect();
            let Some(gather) = req.gather_job_timeout.filter(|_| !missing.is_empty()) else {
                break;
            };
            let find_jid = crate::jid::new_jid();
            let ask = JobRequest {
                tgt: Value::Array(missing.iter().cloned().map(Value::String).collect()),
                tgt_type: "list".into(),
                fun: FIND_JOB.into(),
                arg: vec![Value::String(report.jid.clone())],
                kwarg: Map::new(),
                timeout: gather,
                source_hashes: BTreeMap::new(),
                gather_job_timeout: None,
                delimiter: None,
                ..req.clone()
            };
            // On this job's reply topic: the answers come on the stream
            // already read, told apart by their jid.
            publish(
                conn,
                &req.master_topic,
                &job_payload(&ask, &find_jid, topic),
            )
            .await?;
            finding = Some(FindJob {
                jid: find_jid,
                asked: missing,
                answered: BTreeSet::new(),
                running: BTreeSet::new(),
                until: now + gather,
            });
        }
        let until = finding.as_ref().map_or(deadline, |f| f.until);
        let wait = until.saturating_duration_since(now).min(tick);
        let msg = match tokio::time::timeout(wait, replies.next()).await {
            Err(_) => continue,
            Ok(None) => break,
            Ok(Some(msg)) => msg,
        };
        let Some(received) = parsed(&msg) else {
            continue;
        };
        if let Some(f) = &mut finding
            && received.reply.jid() == f.jid
        {
            if let Some(Reply::Return(r)) =
                genuine(received, &f.jid, accepted.as_ref(), &mut report.forged)
            {
                f.answer(r);
            }
            continue;
        }
        let Some(reply) = of_job(received, &mut report, accepted.as_ref()) else {
            continue;
        };
        match reply {
            Reply::Ping(p) => {
                pinged.insert(p.sub_ip.clone());
                match p.minions {
                    // A syndic maid: each listed minion is targeted. It
                    // cannot answer for a maid the master reaches itself.
                    Some(mut minions) => {
                        let sub_ip = p.sub_ip.clone();
                        minions.retain(|m| {
                            let own = *m == sub_ip || !maids.contains_key(m);
                            if !own {
                                let why = format!("listed {m:?}, a maid of the registry's own");
                                tracing::warn!(jid = %p.jid, maid = %sub_ip, %why, "forged reply");
                                report.forged.insert(sub_ip.clone(), why);
                            }
                            own
                        });
                        if minions.is_empty() {
                            report.empty.insert(p.sub_ip.clone());
                        }
                        report.targeted.extend(minions.iter().cloned());
                        listed.entry(p.sub_ip).or_default().extend(minions);
                    }
                    None if p.matched => {
                        report.targeted.insert(p.sub_ip);
                    }
                    None => {
                        report.empty.insert(p.sub_ip);
                    }
                }
            }
            Reply::Reject(r) => {
                pinged.insert(r.sub_ip.clone());
                report.rejected.insert(r.sub_ip, r.reason);
            }
            Reply::Return(r) => {
                if let Err(why) = vouched(&r, &listed, accepted.as_ref()) {
                    tracing::warn!(jid = %r.jid, maid = %r.sub_ip, %why, "forged reply: not counted");
                    report.forged.insert(r.sub_ip, why);
                    continue;
                }
                let n = counts.entry(r.id.clone()).or_default();
                *n += 1;
                if *n == 1 {
                    on_return(&r);
                    report.returns.push(r);
                } else {
                    report.repeated.insert(r.id.clone(), *n);
                }
            }
        }
    }
    // Late repeats of a finished job still count.
    let linger_until = tokio::time::Instant::now() + req.linger;
    while let Ok(Some(msg)) = tokio::time::timeout_at(linger_until, replies.next()).await {
        if let Some(Reply::Return(r)) = counted(&msg, &mut report, accepted.as_ref())
            && vouched(&r, &listed, accepted.as_ref()).is_ok()
        {
            let n = counts.entry(r.id.clone()).or_default();
            *n += 1;
            if *n > 1 {
                report.repeated.insert(r.id.clone(), *n);
            }
        }
    }
    report.elapsed = started.elapsed();
    let returned: BTreeSet<String> = report.returns.iter().map(|r| r.id.clone()).collect();
    report.missed_maids = report.expected.difference(&pinged).cloned().collect();
    report.missed_minions = report
        .targeted
        .iter()
        .filter(|id| !returned.contains(*id) && !report.rejected.contains_key(*id))
        .cloned()
        .collect();
    Ok(report)
}

/// Whether the maid that sent return `r` may answer for its minion: its
/// own id, or one it listed beneath it in its PING (`listed`) that has no
/// accepted key of its own (a minion with one signs its returns itself,
/// and a syndic maid relays them as signed).
fn vouched(
    r: &Return,
    listed: &BTreeMap<String, BTreeSet<String>>,
    accepted: Option<&AcceptedKeys>,
) -> Result<(), String> {
    if r.id == r.sub_ip {
        return Ok(());
    }
    if !listed.get(&r.sub_ip).is_some_and(|l| l.contains(&r.id)) {
        return Err(format!("returned for {:?}, which it did not list", r.id));
    }
    if accepted.is_some_and(|keys| keys.contains_key(&r.id)) {
        return Err(format!(
            "returned for {:?}, whose own accepted key must sign its returns",
            r.id
        ));
    }
    Ok(())
}
