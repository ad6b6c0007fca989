//! A syndic maid (PROTOCOL §7): it answers for the maids beneath it, which
//! take their jobs from a Redis of their own.
//!
//! Who is beneath is read every `syndic.refresh_secs` from the downstream
//! registry (alive maids and their grains) and, for a syndic maid beneath,
//! from the list it keeps there; the same list, this maid's own, is kept
//! upstream at `maid:syndic:<id>` for the master. A maid beneath presents
//! a key only in a registration signed with it, and the first key seen
//! for an id stays its key while this maid runs (a Redis writer beneath
//! can neither give a maid a key of its own nor take its key away); a
//! syndic maid's list beneath counts only signed with its key.
//!
//! For each job the syndic maid PINGs at once with the targeted ids of
//! that list, relays the job downstream as it arrived (a signed envelope
//! stays the master's), and sends up, once per minion, the reply of each
//! maid it went to: as that maid signed it, so the master verifies it end
//! to end, or — from a maid with no key, or through a syndic maid beneath —
//! under its own `sub_ip`, signed with its own key: it vouches for it, as
//! PROTOCOL §7 has a syndic maid answer for those beneath. Anything else
//! heard on the job's topic beneath — from whom the job did not go to, not
//! signed by the key its sender registered, a second return — is dropped
//! and counted, never relayed ([`Relay`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use redis::AsyncCommands;

use super::Shared;
use super::downstream::{Down, Downstream, HandedDown, Targeted};
use crate::bus::{Bus, BusError, Conn, RedisConfig, publish};
use crate::outbox::Pending;
use crate::protocol::{self, Job, Registration, Reply};
use crate::registry::Signed;
use crate::replies::Received;
use crate::target::{TargetType, matches_delimited};

/// The minions beneath, by id, as they registered.
type Listed = BTreeMap<String, Registration>;

/// Who is beneath, as one reading believed it.
#[derive(Debug, Default)]
struct Beneath {
    /// Each minion's registration, its `pubkey` only where the minion
    /// proved it holds that key: the list kept upstream, and the keys
    /// replies from beneath must be signed with.
    listed: Listed,
    /// For each minion a syndic maid beneath lists, that syndic maid: the
    /// one maid besides the minion itself whose reply for it is relayed.
    via: BTreeMap<String, String>,
}

/// The downstream side of a syndic maid.
pub(super) struct Syndic {
    bus: Bus,
    refresh: Duration,
    /// The downstream command connection, opened when first needed and
    /// dropped when it fails.
    conn: tokio::sync::Mutex<Option<Conn>>,
    /// Who is beneath, as last read.
    beneath: RwLock<Arc<Beneath>>,
    /// The first key each id beneath presented (base64): a registration
    /// rewritten beneath with another key, or with none, is not believed
    /// while this maid runs, so a Redis writer there cannot make its own
    /// key a maid's, nor turn a maid with a key into one whose unsigned
    /// replies this maid would vouch for.
    pinned: Mutex<BTreeMap<String, String>>,
    /// The list last written upstream, to write it again only when it
    /// changed (it is kept alive in between).
    mirrored: tokio::sync::Mutex<String>,
}

impl Syndic {
    pub(super) fn new(redis: &RedisConfig, refresh_secs: f64) -> Result<Syndic, BusError> {
        Ok(Syndic {
            bus: Bus::new(redis)?,
            refresh: Duration::from_secs_f64(refresh_secs),
            conn: Default::default(),
            beneath: Default::default(),
            pinned: Default::default(),
            mirrored: Default::default(),
        })
    }

    /// Who is beneath, as last read.
    fn snapshot(&self) -> Arc<Beneath> {
        self.beneath
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    async fn conn(&self) -> Result<Conn, BusError> {
        let mut slot = self.conn.lock().await;
        if let Some(conn) = &*slot {
            return Ok(conn.clone());
        }
        let conn = self.bus.connect().await?;
        *slot = Some(conn.clone());
        Ok(conn)
    }

    async fn forget_conn(&self) {
        *self.conn.lock().await = None;
    }

    /// Read who is beneath from the downstream Redis, as it reads.
    async fn read(&self) -> Result<Raw, BusError> {
        let mut conn = self.conn().await?;
        let result = read_beneath(&mut conn).await;
        if result.is_err() {
            self.forget_conn().await;
        }
        Ok(result?)
    }
}

impl Downstream for Syndic {
    /// The ids beneath that `job` targets, in order; never `own`.
    fn targeted(&self, job: &Job, own: &str) -> Targeted {
        let Ok(tgt_type) = TargetType::parse(&job.tgt_type) else {
            return Targeted::Ids(Vec::new());
        };
        let beneath = self.snapshot();
        let ids = beneath
            .listed
            .iter()
            .filter(|(id, reg)| {
                id.as_str() != own
                    && matches_delimited(
                        &job.tgt,
                        tgt_type,
                        id,
                        &reg.grains,
                        job.delimiter.as_deref(),
                    )
                    .unwrap_or(false)
            })
            .map(|(id, _)| id.clone())
            .collect();
        Targeted::Ids(ids)
    }

    /// Who is beneath was known before the job arrived: the PING lists
    /// them at once, and the job goes down after it.
    fn hand_down<'a>(
        &'a self,
        shared: &'a Shared,
        down: Down<'a>,
        targeted: Targeted,
    ) -> BoxFuture<'a, HandedDown<'a>> {
        let Targeted::Ids(expected) = targeted else {
            return Box::pin(std::future::ready(HandedDown::nobody()));
        };
        Box::pin(std::future::ready(HandedDown {
            minions: expected.clone(),
            relay: Box::pin(self.relay(shared, down, expected)),
        }))
    }

    fn read_now<'a>(&'a self, own: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(self.reread(own))
    }

    fn refresh_every(&self) -> Option<Duration> {
        Some(self.refresh)
    }

    fn mirror<'a>(&'a self, shared: &'a Shared, conn: &'a mut Conn) -> BoxFuture<'a, ()> {
        Box::pin(self.mirror_list(shared, conn))
    }
}

/// The downstream registry as it reads, before anything is believed: the
/// alive maids' registrations, and the list each one registered as a
/// syndic maid keeps.
#[derive(Debug, Default)]
struct Raw {
    maids: BTreeMap<String, Signed<Registration>>,
    lists: BTreeMap<String, Signed<Listed>>,
}

/// The alive maids of the registry on `conn`, with, for each that says it
/// is a syndic maid, the list it keeps of the minions beneath it. An entry
/// that does not read is left out.
async fn read_beneath(conn: &mut Conn) -> redis::RedisResult<Raw> {
    let all: BTreeMap<String, String> = conn.hgetall(protocol::REGISTRY_KEY).await?;
    let ids: Vec<&String> = all.keys().collect();
    // One request per key, all in flight at once on the multiplexed
    // connection: in a Cluster the keys live in different slots, which a
    // pipeline may not cross.
    let alive: Vec<bool> = futures_util::future::try_join_all(ids.iter().map(|id| {
        let mut conn = conn.clone();
        async move { conn.exists(protocol::alive_key(id)).await }
    }))
    .await?;
    let mut raw = Raw::default();
    for (id, alive) in ids.into_iter().zip(alive) {
        let Ok(reg) = crate::registry::read::<Registration>(&all[id]) else {
            continue;
        };
        if alive && reg.value.id == *id {
            raw.maids.insert(id.clone(), reg);
        }
    }
    let syndics: Vec<String> = raw
        .maids
        .iter()
        .filter(|(_, reg)| reg.value.syndic)
        .map(|(id, _)| id.clone())
        .collect();
    for syndic in syndics {
        let text: Option<String> = conn.get(protocol::syndic_key(&syndic)).await?;
        if let Some(Ok(list)) = text.map(|t| crate::registry::read::<Listed>(&t)) {
            raw.lists.insert(syndic, list);
        }
    }
    Ok(raw)
}

/// What of `raw` is believed (PROTOCOL v1.2 §4, §7, as a master believes
/// its own registry): a maid's `pubkey` only when its registration is
/// signed with it, and only the first key an id presented (`pinned`,
/// updated); a registration that presents another key, or none where a key
/// was pinned, is not believed, and the maid's `previous` entry stands
/// instead. A syndic maid's list counts only signed with its believed key
/// (bare when it has none); its minions come after the maids the registry
/// holds itself.
fn believe(raw: Raw, previous: &Beneath, pinned: &mut BTreeMap<String, String>) -> Beneath {
    let mut out = Beneath::default();
    // `reg` (for `id`, presenting `key`) if it agrees with the key pinned
    // for `id`, which it pins when none was; else the previous entry.
    let mut admit = |id: &str, mut reg: Registration, key: Option<String>| {
        match (pinned.get(id), key) {
            (Some(held), Some(key)) if *held == key => reg.pubkey = Some(key),
            (None, Some(key)) => {
                pinned.insert(id.to_string(), key.clone());
                reg.pubkey = Some(key);
            }
            (None, None) => reg.pubkey = None,
            (Some(_), _) => {
                tracing::warn!(%id, "a registration beneath without the key it first presented: not believed");
                return previous.listed.get(id).cloned();
            }
        }
        Some(reg)
    };
    for (id, signed) in &raw.maids {
        let key = signed
            .presented_key(id)
            .ok()
            .map(|(_, text)| text.to_string());
        if let Some(reg) = admit(id, signed.value.clone(), key) {
            out.listed.insert(id.clone(), reg);
        }
    }
    for (syndic, list) in raw.lists {
        let Some(reg) = out.listed.get(&syndic) else {
            continue;
        };
        if !reg.syndic {
            continue;
        }
        let signed_by_it = match reg.pubkey.as_deref() {
            Some(text) => crate::trust::decode_verifying_key(text)
                .is_ok_and(|key| list.verify(&key, &syndic).is_ok()),
            None => list.envelope.is_none(),
        };
        if !signed_by_it {
            tracing::warn!(%syndic, "a list of the maids beneath a syndic maid beneath that it did not sign: not believed");
            continue;
        }
        for (id, reg) in list.value {
            if out.listed.contains_key(&id) || reg.id != id {
                continue;
            }
            // Its syndic maid vouches for the key in the list it signed.
            let key = reg.pubkey.clone();
            if let Some(reg) = admit(&id, reg, key) {
                out.listed.insert(id.clone(), reg);
                out.via.insert(id, syndic.clone());
            }
        }
    }
    out
}

impl Syndic {
    /// Read who is beneath once. A read that fails keeps the last list.
    async fn reread(&self, own: &str) {
        match self.read().await {
            Ok(raw) => {
                let previous = self.snapshot();
                let mut believed = {
                    let mut pinned = self.pinned.lock().unwrap_or_else(|e| e.into_inner());
                    believe(raw, &previous, &mut pinned)
                };
                believed.listed.remove(own);
                believed.via.remove(own);
                // What changes at every heartbeat is left out upstream, so the
                // list is written again only when who is beneath changes.
                for reg in believed.listed.values_mut() {
                    reg.last_seen.clear();
                }
                *self.beneath.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(believed);
            }
            Err(e) => tracing::warn!(cause = %e, "cannot read the maids beneath"),
        }
    }

    /// Keep the list of who is beneath upstream, on `conn`, at
    /// `maid:syndic:<id>` for three heartbeats, signed with this maid's key.
    async fn mirror_list(&self, shared: &Shared, conn: &mut Conn) {
        let text = {
            let beneath = self.snapshot();
            // Signed with this maid's key (PROTOCOL v1.2 §7): a Redis writer
            // cannot add minions a master would expect from this syndic maid.
            crate::registry::write(&beneath.listed, shared.identity.as_ref())
        };
        let key = protocol::syndic_key(&shared.id);
        let ttl = shared.config.agent.heartbeat_secs * 3;
        let mut mirrored = self.mirrored.lock().await;
        // Kept alive only while what Redis holds is this maid's own list: one
        // another writer replaced is written again, not refreshed.
        if *mirrored == text {
            let held: redis::RedisResult<Option<String>> = conn.get(&key).await;
            if !matches!(&held, Ok(Some(h)) if *h == text) {
                mirrored.clear();
            }
        }
        let kept: redis::RedisResult<()> = if *mirrored == text {
            conn.expire::<_, bool>(&key, ttl as i64)
                .await
                .and_then(|kept| {
                    kept.then_some(()).ok_or_else(|| {
                        redis::RedisError::from((redis::ErrorKind::Client, "the list expired"))
                    })
                })
        } else {
            conn.set_ex(&key, &text, ttl).await
        };
        match kept {
            Ok(()) => *mirrored = text,
            Err(e) => {
                mirrored.clear();
                tracing::warn!(cause = %e, "cannot keep the list of maids beneath upstream");
            }
        }
    }

    /// Relay `down` to the maids beneath, and send their replies up until
    /// every id of `expected` has answered or the job's time is up.
    async fn relay(&self, shared: &Shared, down: Down<'_>, expected: Vec<String>) {
        let Down {
            job,
            kid,
            payload,
            topic,
        } = down;
        let deadline = tokio::time::Instant::now() + shared.relay_limit(job);
        // Subscribed before the job goes down, so no reply is missed.
        let mut messages = match self.bus.replies(&job.temp_topic).await {
            Ok(sub) => sub,
            Err(e) => {
                tracing::error!(jid = %job.jid, cause = %e, "cannot relay the job: downstream unreachable");
                return;
            }
        };
        let sent = match self.conn().await {
            Ok(mut conn) => {
                hand_down_pillar(shared, &mut conn, job, &expected).await;
                publish(&mut conn, topic, payload)
                    .await
                    .map_err(BusError::from)
            }
            Err(e) => Err(e),
        };
        if let Err(e) = sent {
            self.forget_conn().await;
            tracing::error!(jid = %job.jid, cause = %e, "cannot relay the job downstream");
            return;
        }
        super::records::relayed(shared, job, kid, &expected);
        let mut relay = {
            let pinned = self.pinned.lock().unwrap_or_else(|e| e.into_inner());
            Relay::new(&job.jid, &expected, &self.snapshot(), &pinned)
        };
        while !relay.done() {
            let Ok(Some(msg)) = tokio::time::timeout_at(deadline, messages.next()).await else {
                break;
            };
            let bytes = msg.get_payload_bytes();
            let received = match crate::replies::receive(bytes) {
                Ok(r) => r,
                Err(why) => {
                    relay.dropped += 1;
                    super::records::dropped(
                        shared,
                        "relay",
                        &format!("job {} beneath: no reply: {why}", job.jid),
                    );
                    continue;
                }
            };
            match relay.admit(&received) {
                Verdict::Skip => {}
                Verdict::Drop(why) => {
                    relay.dropped += 1;
                    super::records::dropped(
                        shared,
                        "relay",
                        &format!("job {} beneath: {why}: not relayed", job.jid),
                    );
                }
                Verdict::AsSigned => {
                    let raw = String::from_utf8_lossy(bytes).into_owned();
                    match received.reply {
                        Reply::Return(r) => shared.deliver(pending(job, r.id, raw)).await,
                        _ => {
                            shared
                                .send_payload(None, &job.temp_topic, &job.jid, &raw)
                                .await
                        }
                    }
                }
                Verdict::Vouched => {
                    if let Reply::Return(mut r) = received.reply {
                        r.sub_ip = shared.id.clone();
                        let id = r.id.clone();
                        let payload = shared.seal(Reply::Return(r).to_json());
                        shared.deliver(pending(job, id, payload)).await;
                    }
                }
            }
        }
        if relay.dropped > 0 {
            tracing::warn!(jid = %job.jid, dropped = relay.dropped, "replies beneath not relayed: not the maids' the job went to");
        }
    }
}

/// A return on its way up, for `id`, as `payload`.
fn pending(job: &Job, id: String, payload: String) -> Pending {
    Pending {
        topic: job.temp_topic.clone(),
        payload,
        jid: job.jid.clone(),
        id,
        published: false,
    }
}

/// What a syndic maid does with one message heard on a job's reply topic
/// beneath.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// A PING from beneath (who is beneath was known before the job went
    /// down), or another job's reply.
    Skip,
    /// Not relayed, for this reason.
    Drop(String),
    /// Relayed as it is: its maid signed it, and the master checks that
    /// signature (a reject, whoever the master knows it as, stays as sent).
    AsSigned,
    /// A return relayed under this maid's own id and key: from a maid
    /// beneath with no key, or vouched for by a syndic maid beneath.
    Vouched,
}

/// One job's relay of replies upward: whom it went to, the keys they
/// registered with, and what was relayed already. Nothing else goes up,
/// and nothing goes up twice, so what is published beneath costs the
/// Redis above at most a reply and a reject per maid the job went to.
struct Relay {
    jid: String,
    /// The maids the job went to that have not returned (or refused).
    waiting: BTreeSet<String>,
    /// The maids the job went to and the syndic maids beneath that list
    /// them, each with the key it registered (none for a maid with no
    /// key): what their replies must be signed with.
    keys: BTreeMap<String, Option<ed25519_dalek::VerifyingKey>>,
    /// For a maid the job went to that a syndic maid beneath lists, that
    /// syndic maid: the one other sender whose return for it goes up.
    via: BTreeMap<String, String>,
    /// The returns and rejects relayed, by minion.
    relayed: BTreeSet<(String, bool)>,
    /// Messages heard and not relayed.
    dropped: u64,
}

impl Relay {
    /// The relay of job `jid`, which went to `expected`, over who is
    /// `beneath` now. A maid's key is the one it was listed with, or else
    /// the one `pinned` for it (it may have left the list since the job
    /// went down: it is still no maid without a key).
    fn new(
        jid: &str,
        expected: &[String],
        beneath: &Beneath,
        pinned: &BTreeMap<String, String>,
    ) -> Relay {
        let key_of = |id: &str| {
            beneath
                .listed
                .get(id)
                .and_then(|r| r.pubkey.as_deref())
                .or_else(|| pinned.get(id).map(String::as_str))
                .and_then(|k| crate::trust::decode_verifying_key(k).ok())
        };
        let via: BTreeMap<String, String> = expected
            .iter()
            .filter_map(|id| Some((id.clone(), beneath.via.get(id)?.clone())))
            .collect();
        let keys = expected
            .iter()
            .chain(via.values())
            .map(|id| (id.clone(), key_of(id)))
            .collect();
        Relay {
            jid: jid.to_string(),
            waiting: expected.iter().cloned().collect(),
            keys,
            via,
            relayed: BTreeSet::new(),
            dropped: 0,
        }
    }

    /// Every maid the job went to has returned or refused.
    fn done(&self) -> bool {
        self.waiting.is_empty()
    }

    /// Whether `received` goes up, and how: only a reply of this job, for
    /// a maid it went to, from that maid or the syndic maid beneath that
    /// lists it, signed by the key its sender registered (unsigned only
    /// from one that registered none), and only the first return (or
    /// reject) for each.
    fn admit(&mut self, received: &Received) -> Verdict {
        // Another job's (a master may reply to several on one topic, as
        // `saltutil.find_job` does): its own relay, if any, takes it.
        if received.reply.jid() != self.jid {
            return Verdict::Skip;
        }
        let sender = received.maid();
        let (minion, is_return) = match &received.reply {
            Reply::Ping(_) => return Verdict::Skip,
            Reply::Reject(r) => (r.sub_ip.as_str(), false),
            Reply::Return(r) => (r.id.as_str(), true),
        };
        let Some(key) = self.keys.get(minion) else {
            return Verdict::Drop(format!("for {minion:?}, whom the job did not go to"));
        };
        let key = if sender == minion {
            key
        } else if is_return && self.via.get(minion).is_some_and(|v| v == sender) {
            &self.keys[sender]
        } else {
            return Verdict::Drop(format!(
                "for {minion:?} from {sender:?}, which does not list it"
            ));
        };
        match (key, &received.envelope) {
            (Some(key), envelope) => {
                if let Err(why) = crate::registry::verify_envelope(envelope.as_ref(), key, sender) {
                    return Verdict::Drop(format!("for {minion:?}: {why}"));
                }
            }
            (None, Some(_)) => {
                return Verdict::Drop(format!(
                    "for {minion:?}: signed, and {sender:?} registered no key"
                ));
            }
            (None, None) => {}
        }
        if !self.relayed.insert((minion.to_string(), is_return)) {
            let what = if is_return { "return" } else { "reject" };
            return Verdict::Drop(format!("a second {what} for {minion:?}"));
        }
        self.waiting.remove(minion);
        match received.envelope {
            Some(_) if sender == minion || !is_return => Verdict::AsSigned,
            None if !is_return => Verdict::AsSigned,
            _ => Verdict::Vouched,
        }
    }
}

/// How long a pillar record copied down stays under its hash, for a maid
/// beneath still queueing the job.
const PINNED_BENEATH: u64 = 3600;

/// The pillar records `job` pins for the maids `ids` beneath, copied as
/// they are to the Redis beneath before the job goes down (PROTOCOL §8):
/// each is sealed to its maid's key and signed by the master, so this
/// maid reads none of it and each maid beneath checks its own. One that
/// cannot be copied is logged; its maid then refuses the job.
async fn hand_down_pillar(shared: &Shared, down: &mut Conn, job: &Job, ids: &[String]) {
    use maid_protocol::pillar::{pinned_key, record_key};
    let pinned: Vec<(&String, &String)> = ids
        .iter()
        .filter_map(|id| job.pillar.get(id).map(|sha| (id, sha)))
        .collect();
    if pinned.is_empty() {
        return;
    }
    let Some(mut up) = crate::filestore::ConnSource::conn(&*shared.conn) else {
        tracing::error!(jid = %job.jid, "no Redis above: pillar records not handed down");
        return;
    };
    for (id, sha) in pinned {
        let at_pin = pinned_key(id, sha);
        let mut record: Option<String> = up.get(&at_pin).await.ok().flatten();
        if record.is_none() {
            record = up.get(record_key(id)).await.ok().flatten();
        }
        let Some(record) = record else {
            tracing::warn!(jid = %job.jid, %id, "no pillar record above to hand down");
            continue;
        };
        let copied: redis::RedisResult<()> = redis::pipe()
            .set(record_key(id), &record)
            .set_ex(&at_pin, &record, PINNED_BENEATH)
            .query_async(down)
            .await;
        if let Err(e) = copied {
            tracing::error!(jid = %job.jid, %id, cause = %e, "pillar record not handed down");
        }
    }
}

#[cfg(test)]
mod tests {
    use ed25519_dalek::SigningKey;
    use serde_json::json;

    use super::*;
    use crate::replies::{receive, seal};
    use crate::trust::encode_verifying;

    fn registration(id: &str, key: Option<&SigningKey>, syndic: bool) -> Registration {
        serde_json::from_value(json!({
            "id": id, "version": "1", "master_topics": [], "functions": [],
            "grains": {}, "started_at": "", "last_seen": "", "syndic": syndic,
            "pubkey": key.map(|k| encode_verifying(&k.verifying_key())),
        }))
        .unwrap()
    }

    /// `reg` as maid `signer` writes it to the registry, read back.
    fn written<T: serde::Serialize + serde::de::DeserializeOwned>(
        value: &T,
        signer: Option<&SigningKey>,
    ) -> Signed<T> {
        crate::registry::read(&crate::registry::write(value, signer)).unwrap()
    }

    fn key(n: u8) -> SigningKey {
        SigningKey::from_bytes(&[n; 32])
    }

    #[test]
    fn a_key_beneath_is_believed_signed_with_it_and_only_the_first_one() {
        let (a, evil) = (key(1), key(2));
        let mut pinned = BTreeMap::new();
        let raw = |reg: Signed<Registration>| Raw {
            maids: [("leaf".to_string(), reg)].into(),
            ..Default::default()
        };
        // Bare, naming a key: the key is not believed.
        let bare = written(&registration("leaf", Some(&evil), false), None);
        let got = believe(raw(bare), &Beneath::default(), &mut pinned);
        assert_eq!(got.listed["leaf"].pubkey, None);
        assert!(pinned.is_empty());
        // Signed with the key it names: believed, and pinned.
        let genuine = written(&registration("leaf", Some(&a), false), Some(&a));
        let first = believe(raw(genuine), &Beneath::default(), &mut pinned);
        let a_text = encode_verifying(&a.verifying_key());
        assert_eq!(first.listed["leaf"].pubkey.as_deref(), Some(&*a_text));
        // Rewritten with another key, or bare: the entry believed before
        // stands.
        for forged in [
            written(&registration("leaf", Some(&evil), false), Some(&evil)),
            written(&registration("leaf", None, false), None),
        ] {
            let got = believe(raw(forged), &first, &mut pinned);
            assert_eq!(got.listed["leaf"].pubkey.as_deref(), Some(&*a_text));
        }
    }

    #[test]
    fn a_list_beneath_counts_only_signed_by_its_syndic_maid() {
        let (mid, deep, evil) = (key(1), key(2), key(3));
        let list: Listed = [("deep".to_string(), registration("deep", Some(&deep), false))].into();
        let raw = |signer: &SigningKey| Raw {
            maids: [(
                "mid".to_string(),
                written(&registration("mid", Some(&mid), true), Some(&mid)),
            )]
            .into(),
            lists: [("mid".to_string(), written(&list, Some(signer)))].into(),
        };
        let got = believe(raw(&evil), &Beneath::default(), &mut BTreeMap::new());
        assert!(!got.listed.contains_key("deep"));
        let got = believe(raw(&mid), &Beneath::default(), &mut BTreeMap::new());
        assert!(got.listed.contains_key("deep"));
        assert_eq!(got.via["deep"], "mid");
    }

    fn ret(jid: &str, sub_ip: &str, id: &str) -> String {
        json!({"type": "return", "sub_ip": sub_ip, "jid": jid, "id": id, "fun": "test.ping",
            "fun_args": [], "return": true, "retcode": 0, "success": true, "out": "nested",
            "_stamp": "2026-11-27T00:00:00.000000", "ret_": {id: true}})
        .to_string()
    }

    #[test]
    fn only_the_first_reply_of_each_maid_the_job_went_to_signed_by_its_key_goes_up() {
        let (a, mid, evil) = (key(1), key(2), key(3));
        let with_key =
            |id: &str, k: Option<&SigningKey>| (id.to_string(), registration(id, k, false));
        let beneath = Beneath {
            listed: [
                with_key("a", Some(&a)),
                with_key("bare", None),
                with_key("mid", Some(&mid)),
                with_key("deep", None),
                with_key("other", None),
            ]
            .into(),
            via: [("deep".to_string(), "mid".to_string())].into(),
        };
        let expected = ["a".to_string(), "bare".into(), "deep".into()];
        let mut relay = Relay::new("1", &expected, &beneath, &BTreeMap::new());
        let mut admit = |text: String| relay.admit(&receive(text.as_bytes()).unwrap());
        let dropped = |v: Verdict| matches!(v, Verdict::Drop(_));
        // Forged: unsigned, or signed by another key, for a maid with a key;
        // for whom the job did not go to; from a maid that lists nobody; a
        // signed reply from a maid with no key. Another job's is its own
        // relay's.
        assert!(dropped(admit(ret("1", "a", "a"))));
        assert!(dropped(admit(seal(ret("1", "a", "a"), &evil))));
        assert!(dropped(admit(ret("1", "other", "other"))));
        assert!(dropped(admit(ret("1", "phantom", "phantom"))));
        assert!(dropped(admit(ret("1", "bare", "a"))));
        assert!(dropped(admit(ret("1", "mid", "deep"))));
        assert!(dropped(admit(seal(ret("1", "bare", "bare"), &evil))));
        assert_eq!(admit(seal(ret("2", "a", "a"), &a)), Verdict::Skip);
        // Genuine, each once.
        assert_eq!(admit(seal(ret("1", "a", "a"), &a)), Verdict::AsSigned);
        assert!(dropped(admit(seal(ret("1", "a", "a"), &a))), "a repeat");
        assert_eq!(admit(ret("1", "bare", "bare")), Verdict::Vouched);
        assert_eq!(admit(seal(ret("1", "mid", "deep"), &mid)), Verdict::Vouched);
        assert!(relay.done());
    }
}
