//! A syndic maid (PROTOCOL §7): it answers for the maids beneath it, which
//! take their jobs from a Redis of their own.
//!
//! Who is beneath is read every `syndic.refresh_secs` from the downstream
//! registry (alive maids and their grains) and, for a syndic maid beneath,
//! from the list it keeps there; the same list, this maid's own, is kept
//! upstream at `maid:syndic:<id>` for the master. For each job the syndic
//! maid PINGs at once with the targeted ids of that list, relays the job
//! downstream as it arrived (a signed envelope stays the master's), and
//! sends each reply that comes back up: a return under its own `sub_ip`,
//! or, when the maid beneath signed it, as that maid signed it, so the
//! master verifies it end to end. It never signs what it relays.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use redis::AsyncCommands;

use super::Shared;
use super::downstream::{Down, Downstream, HandedDown, Targeted};
use crate::bus::{Bus, BusError, Conn, RedisConfig, publish};
use crate::outbox::Pending;
use crate::protocol::{self, Job, Registration, Reply};
use crate::target::{TargetType, matches_delimited};

/// The minions beneath, by id, as they registered.
type Listed = BTreeMap<String, Registration>;

/// The downstream side of a syndic maid.
pub(super) struct Syndic {
    bus: Bus,
    refresh: Duration,
    /// The downstream command connection, opened when first needed and
    /// dropped when it fails.
    conn: tokio::sync::Mutex<Option<Conn>>,
    /// Who is beneath, as last read.
    beneath: RwLock<Arc<Listed>>,
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
            mirrored: Default::default(),
        })
    }

    /// The keys the maids of `ids` registered beneath, by id.
    fn keys(&self, ids: &[String]) -> crate::replies::AcceptedKeys {
        let beneath = self
            .beneath
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        ids.iter()
            .filter_map(|id| {
                let text = beneath.get(id)?.pubkey.as_deref()?;
                let key = crate::trust::decode_verifying_key(text).ok()?;
                Some((id.clone(), key))
            })
            .collect()
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

    /// Read who is beneath from the downstream Redis.
    async fn read(&self) -> Result<Listed, BusError> {
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
        let beneath = self
            .beneath
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let ids = beneath
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

/// The alive maids of the registry on `conn`, with, for each syndic maid
/// among them, the minions it lists beneath it. An entry that does not
/// read is left out.
async fn read_beneath(conn: &mut Conn) -> redis::RedisResult<Listed> {
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
    let mut listed = Listed::new();
    let mut syndics = Vec::new();
    for (id, alive) in ids.into_iter().zip(alive) {
        let Ok(reg) = crate::registry::read::<Registration>(&all[id]).map(|r| r.value) else {
            continue;
        };
        if !alive || reg.id != *id {
            continue;
        }
        if reg.syndic {
            syndics.push(id.clone());
        }
        listed.insert(id.clone(), reg);
    }
    for syndic in syndics {
        let text: Option<String> = conn.get(protocol::syndic_key(&syndic)).await?;
        let Some(Ok(beneath)) = text.map(|t| crate::registry::read::<Listed>(&t)) else {
            continue;
        };
        for (id, reg) in beneath.value {
            listed.entry(id).or_insert(reg);
        }
    }
    Ok(listed)
}

impl Syndic {
    /// Read who is beneath once. A read that fails keeps the last list.
    async fn reread(&self, own: &str) {
        match self.read().await {
            Ok(mut listed) => {
                listed.remove(own);
                // What changes at every heartbeat is left out upstream, so the
                // list is written again only when who is beneath changes.
                for reg in listed.values_mut() {
                    reg.last_seen.clear();
                }
                *self.beneath.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(listed);
            }
            Err(e) => tracing::warn!(cause = %e, "cannot read the maids beneath"),
        }
    }

    /// Keep the list of who is beneath upstream, on `conn`, at
    /// `maid:syndic:<id>` for three heartbeats, signed with this maid's key.
    async fn mirror_list(&self, shared: &Shared, conn: &mut Conn) {
        let text = {
            let beneath = self
                .beneath
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            // Signed with this maid's key (PROTOCOL v1.2 §7): a Redis writer
            // cannot add minions a master would expect from this syndic maid.
            crate::registry::write(&*beneath, shared.identity.as_ref())
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
        let mut waiting: BTreeSet<&str> = expected.iter().map(String::as_str).collect();
        let keys = self.keys(&expected);
        while !waiting.is_empty() {
            let Ok(Some(msg)) = tokio::time::timeout_at(deadline, messages.next()).await else {
                break;
            };
            let bytes = msg.get_payload_bytes();
            let received = match crate::replies::receive(bytes) {
                Ok(r) if r.reply.jid() == job.jid => r,
                Ok(_) => continue,
                Err(why) => {
                    tracing::warn!(jid = %job.jid, %why, "ignored a downstream reply");
                    continue;
                }
            };
            let signed = received.envelope.is_some();
            // An answer ends the wait for its maid only when that maid's key,
            // if it registered one, signed it: a reply anyone else published
            // here is relayed (and the master finds it forged), but cannot cut
            // the wait for the real one short.
            let answered = |id: &str| !keys.contains_key(id) || received.verify(&keys).is_ok();
            let raw = || String::from_utf8_lossy(bytes).into_owned();
            match &received.reply {
                // Who is beneath was known before the job went down.
                Reply::Ping(_) => {}
                Reply::Reject(r) => {
                    if answered(&r.sub_ip) {
                        waiting.remove(r.sub_ip.as_str());
                    }
                    shared
                        .send_payload(None, &job.temp_topic, &job.jid, &raw())
                        .await;
                }
                Reply::Return(r) => {
                    if answered(&r.id) {
                        waiting.remove(r.id.as_str());
                    }
                    let mut r = r.clone();
                    let id = r.id.clone();
                    let payload = if signed {
                        raw()
                    } else {
                        r.sub_ip = shared.id.clone();
                        Reply::Return(r).to_json()
                    };
                    let pending = Pending {
                        topic: job.temp_topic.clone(),
                        payload,
                        jid: job.jid.clone(),
                        id,
                        published: false,
                    };
                    shared.deliver(pending).await;
                }
            }
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
