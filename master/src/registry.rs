//! What the master reads of the registry (PROTOCOL v1.2 §4, §7): the maids,
//! whether each is alive, what each registered, and the minions beneath
//! syndic maids — and, for a master that keeps keys, which of that it may
//! believe.
//!
//! Every maid holds a Redis credential that can write any registry entry,
//! so nothing there is believed for its own sake. A registration signed
//! with the key it names *presents* that key (filed as `salt-key` files a
//! minion's authentication); a master that keeps keys then uses an
//! accepted maid's registration — its grains for targeting and for API
//! permissions — only when the key it accepted signed it. Only a maid whose
//! key was filed, and so accepted, as a syndic maid's may list minions
//! beneath it, and only in a list its accepted key signed. Whom a job
//! targets and whom the API lets a user reach are both [`Registry::targets`]
//! over one reading.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::DirBuilderExt;

use redis::AsyncCommands;
use serde_json::{Map, Value};

use crate::bus::{BusError, Conn};
use crate::pki::{KeyState, Pki, PkiError, Submitted};
use crate::protocol::{self, Registration};
use crate::replies::AcceptedKeys;
use crate::wire_registry::Signed;

/// Every registry entry by id: whether its alive key exists, and the
/// registration when it reads as one (and, where the master keeps keys,
/// may be believed).
pub type Maids = BTreeMap<String, (bool, Option<Registration>)>;

/// The minions beneath syndic maids (PROTOCOL §7), by id: the syndic maid
/// each is beneath, and its registration as the syndic maid listed it.
pub type Beneath = BTreeMap<String, (String, Registration)>;

/// The registry as it reads, before anything is believed.
type Raw = BTreeMap<String, (bool, Option<Signed<Registration>>)>;

/// The registry entries, each with whether its alive key exists: the
/// registry, then every alive key at once (one pipeline; on a cluster,
/// where the keys lie on many nodes, all asked together), whatever the
/// fleet's size.
async fn read_raw(conn: &mut Conn) -> redis::RedisResult<Raw> {
    let all: BTreeMap<String, String> = conn.hgetall(protocol::REGISTRY_KEY).await?;
    if all.is_empty() {
        return Ok(Raw::new());
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
        .map(|((id, text), alive)| (id, (alive, crate::wire_registry::read(&text).ok())))
        .collect())
}

/// `raw` as a master reads it before checking keys: every registration,
/// but a `pubkey` only where the registration is signed with it (a key
/// nobody proved they hold is never filed).
fn presented(raw: &Raw) -> Maids {
    raw.iter()
        .map(|(id, (alive, signed))| {
            let reg = signed.as_ref().map(|s| {
                let mut reg = s.value.clone();
                if s.presented_key(id).is_err() {
                    reg.pubkey = None;
                }
                reg
            });
            (id.clone(), (*alive, reg))
        })
        .collect()
}

/// The registry entries with whether each is alive: with `pki`, an
/// accepted maid's registration only when its accepted key signed it
/// ([`Registry::read`]); without, every registration as it reads.
pub async fn alive_maids(conn: &mut Conn, pki: Option<&Pki>) -> redis::RedisResult<Maids> {
    Ok(Registry::read(conn, pki).await?.maids)
}

/// What one job reads of the registry, once: the maids, the minions
/// beneath syndic maids, and (for a master that keeps keys) the keys it
/// accepted. Whom a job selects, whom it then expects and whom the API
/// lets a user reach come from the same reading.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    pub maids: Maids,
    pub beneath: Beneath,
    /// The maids that may list minions beneath them and answer for them.
    pub syndics: BTreeSet<String>,
    /// The accepted keys, when the master keeps keys: then only the maids
    /// they name are expected, and only replies they sign count.
    pub accepted: Option<AcceptedKeys>,
    /// The keys of minions beneath accepted syndic maids that have no
    /// accepted key of their own, each as its syndic maid listed it (in a
    /// list that syndic maid's accepted key signed) while it is the key
    /// pending for the id: such a minion is its syndic maid's to answer
    /// for (PROTOCOL §7), so a reply it signed with that key counts when
    /// its syndic maid listed it in the job's PING. A key the operator
    /// rejected, or one other than the key filed for the id, is in none.
    pub vouched: AcceptedKeys,
    /// Each known minion's pillar, compiled when a target reads it
    /// (`-I`, `J@`), as Salt's master reads its pillar cache: pillar
    /// values never leave the master for targeting (PROTOCOL §8).
    pub pillar: Option<std::sync::Arc<crate::pillar::Cache>>,
}

/// Whom a target selects ([`Registry::targets`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Targets {
    /// The maids and the minions beneath them the target selects.
    pub ids: BTreeSet<String>,
    /// Among them, syndic maids that list nobody beneath them (over a
    /// Salt master, whose own targeting decides): anyone may be behind
    /// them.
    pub opaque: BTreeSet<String>,
}

impl Registry {
    /// Read the registry; with `pki`, as a master that keeps keys: keys
    /// presented are filed, and only what the accepted keys signed is
    /// believed.
    pub async fn read(conn: &mut Conn, pki: Option<&Pki>) -> redis::RedisResult<Self> {
        let raw = read_raw(conn).await?;
        let Some(pki) = pki else {
            let maids = presented(&raw);
            let syndics = maids
                .iter()
                .filter(|(_, (alive, reg))| *alive && reg.as_ref().is_some_and(|r| r.syndic))
                .map(|(id, _)| id.clone())
                .collect();
            let beneath = beneath(conn, &maids, &syndics, None).await?;
            return Ok(Self {
                maids,
                beneath,
                syndics,
                accepted: None,
                vouched: AcceptedKeys::new(),
                pillar: None,
            });
        };
        let filed = file_presented(pki, &raw);
        let accepted = match filed.and_then(|()| pki.accepted()) {
            Ok(keys) => keys,
            Err(e) => {
                tracing::error!(cause = %e, "cannot read the accepted maid keys: no reply counts");
                AcceptedKeys::new()
            }
        };
        let maids = believed(&raw, &accepted);
        let syndics = accepted_syndics(pki, &maids, &accepted);
        let beneath = beneath(conn, &maids, &syndics, Some(&accepted)).await?;
        // The minions' keys, as their syndic maids vouch for them.
        if let Err(e) = file_registered_keys(pki, &as_maids(&beneath)) {
            tracing::error!(cause = %e, "cannot file the keys of the minions beneath");
        }
        let accepted = pki.accepted().unwrap_or(accepted);
        let vouched = vouched_keys(pki, &beneath, &accepted);
        Ok(Self {
            maids,
            beneath,
            syndics,
            accepted: Some(accepted),
            vouched,
            pillar: None,
        })
    }

    /// This registry, its targets reading pillar compiled with `settings`
    /// (the master's `pillar_roots`). Only a master that keeps keys
    /// compiles pillar: its grains are then those the maids' accepted
    /// keys signed, never a registration anyone could write. Otherwise
    /// (or without `settings`) a pillar target selects no one.
    pub fn with_pillar(mut self, settings: Option<&crate::pillar::Settings>) -> Self {
        self.pillar = settings
            .filter(|s| !s.roots.is_empty() && self.accepted.is_some())
            .map(|s| std::sync::Arc::new(crate::pillar::Cache::new(s.clone())));
        self
    }

    /// Whom target `tgt` of type `tgt_type` (split at `delimiter`)
    /// selects, `exclude` left out: the known maids, alive or not, whose
    /// last registered grains match (an id whose registration cannot be
    /// believed matches only on its id) — as Salt's master matches its
    /// accepted minions against its grains cache —, the minions beneath
    /// alive syndic maids that match, and every alive syndic maid that
    /// lists nobody. A target a maid cannot evaluate selects nobody, as
    /// Salt's master finds no minion for it.
    pub fn targets(
        &self,
        tgt: &Value,
        tgt_type: &str,
        delimiter: Option<&str>,
        exclude: &dyn Fn(&str) -> bool,
    ) -> Targets {
        let Ok(tgt_type) = crate::target::TargetType::parse(tgt_type) else {
            return Targets::default();
        };
        let empty = Map::new();
        // Salt's master reads a glob with commas as several (its key
        // store's `glob_match`), which no minion's own glob matches: each
        // is expected and none returns.
        let globs: Option<Vec<Value>> = match (tgt_type, tgt) {
            (crate::target::TargetType::Glob, Value::String(t)) if t.contains(',') => {
                Some(t.split(',').map(|g| Value::String(g.into())).collect())
            }
            _ => None,
        };
        // A target that reads pillar is evaluated on each minion's pillar,
        // compiled here.
        let cache = self
            .pillar
            .as_ref()
            .filter(|_| crate::target::reads_pillar(tgt, tgt_type));
        let matches = |id: &str, grains: &Map<String, Value>| {
            let pillar = cache.map(|c| c.get(id, grains));
            let one = |t: &Value| {
                crate::target::matches_with_pillar(
                    t,
                    tgt_type,
                    id,
                    grains,
                    pillar.as_deref(),
                    delimiter,
                )
                .unwrap_or(false)
            };
            match &globs {
                Some(globs) => globs.iter().any(one),
                None => one(tgt),
            }
        };
        let known: BTreeMap<&String, Option<&Registration>> = self.known(exclude).collect();
        let listing: BTreeSet<&String> = self.beneath.values().map(|(s, _)| s).collect();
        let opaque: BTreeSet<String> = known
            .keys()
            .filter(|id| self.syndics.contains(**id) && self.alive(id) && !listing.contains(*id))
            .map(|id| (*id).clone())
            .collect();
        let leaves = self.beneath.iter().filter(|(id, (syndic, reg))| {
            known.contains_key(syndic) && !exclude(id) && matches(id, &reg.grains)
        });
        let ids = known
            .iter()
            .filter(|(id, reg)| {
                matches(id, reg.map_or(&empty, |r| &r.grains)) || opaque.contains(**id)
            })
            .map(|(id, _)| (*id).clone())
            .chain(leaves.map(|(id, _)| id.clone()))
            .collect();
        Targets { ids, opaque }
    }

    /// The maids a master knows, alive or not, `exclude` left out: every
    /// registered one, or (when the master keeps keys) every one whose key
    /// it accepted — Salt's accepted minions — registered or not yet: one
    /// that never registered has no grains and matches on its id alone. A
    /// maid never seen (no key) is not among them, nor a minion an alive
    /// syndic maid lists (it is that syndic maid's).
    pub fn known<'m>(
        &'m self,
        exclude: &'m dyn Fn(&str) -> bool,
    ) -> impl Iterator<Item = (&'m String, Option<&'m Registration>)> {
        let registered = self
            .maids
            .iter()
            .filter(|(id, _)| self.accepted.as_ref().is_none_or(|k| k.contains_key(*id)))
            .map(|(id, (_, reg))| (id, reg.as_ref()));
        let unregistered = self
            .accepted
            .iter()
            .flat_map(|keys| keys.keys())
            .filter(|id| !self.maids.contains_key(*id) && !self.beneath.contains_key(*id))
            .map(|id| (id, None));
        registered
            .chain(unregistered)
            .filter(move |(id, _)| !exclude(id))
    }

    /// The known maids ([`Self::known`]) that are alive: those a job
    /// expects to PING.
    pub fn expected<'m>(
        &'m self,
        exclude: &'m dyn Fn(&str) -> bool,
    ) -> impl Iterator<Item = (&'m String, Option<&'m Registration>)> {
        self.known(exclude).filter(|(id, _)| self.alive(id))
    }

    /// The grains of `id`'s registration, as far as it is believed (none
    /// for a maid that never registered, or whose entry did not verify;
    /// for a minion beneath a syndic maid, as that syndic maid listed
    /// it): what its targets match and its pillar is compiled from.
    pub fn grains(&self, id: &str) -> Map<String, Value> {
        self.maids
            .get(id)
            .and_then(|(_, reg)| reg.as_ref())
            .or_else(|| self.beneath.get(id).map(|(_, reg)| reg))
            .map(|r| r.grains.clone())
            .unwrap_or_default()
    }

    /// Whether `id` is connected now: a maid whose alive key lives, or a
    /// minion an alive syndic maid lists beneath it (its list lives only
    /// as long as the syndic maid keeps it).
    pub fn alive(&self, id: &str) -> bool {
        self.maids.get(id).is_some_and(|(alive, _)| *alive) || self.beneath.contains_key(id)
    }
}

/// File every key `raw` presents ([`presented`]) as its maid's
/// submission; a syndic maid's key filed while it is pending is noted as
/// a syndic maid's ([`note_syndic`]), so accepting it accepts the role.
fn file_presented(pki: &Pki, raw: &Raw) -> Result<(), PkiError> {
    for (id, (_, signed)) in raw {
        let Some(signed) = signed else { continue };
        let Ok((_, text)) = signed.presented_key(id) else {
            continue;
        };
        let filed = pki.submit(id, text)?;
        if signed.value.syndic
            && matches!(
                filed,
                Submitted::Pending | Submitted::Known(crate::pki::KeyState::Pending)
            )
        {
            note_syndic(pki, id, text)?;
        }
    }
    Ok(())
}

/// The registrations of `raw` a master that accepted `accepted` believes:
/// an accepted maid's only when its accepted key signed it (a forged or
/// unsigned one is logged and read as none: the maid matches on its id
/// alone), any other's as it presents itself.
fn believed(raw: &Raw, accepted: &AcceptedKeys) -> Maids {
    raw.iter()
        .map(|(id, (alive, signed))| {
            let reg = signed.as_ref().and_then(|s| match accepted.get(id) {
                Some(key) => match s.verify(key, id) {
                    Ok(()) if s.value.id == *id => Some(s.value.clone()),
                    Ok(()) => None,
                    Err(why) => {
                        tracing::warn!(%id, %why, "forged registration: not believed");
                        None
                    }
                },
                None => s.presented_key(id).is_ok().then(|| s.value.clone()),
            });
            (id.clone(), (*alive, reg))
        })
        .collect()
}

/// The directory, beside the key states, that notes which keys were
/// filed as syndic maids': one file per id holding the key it was filed
/// with.
const SYNDICS_DIR: &str = "syndics";

/// Note that `id` presented `key` as a syndic maid while its key was
/// pending: an operator who accepts that key accepts the role with it.
fn note_syndic(pki: &Pki, id: &str, key: &str) -> Result<(), PkiError> {
    crate::pki::check_id(id)?;
    let dir = pki.dir().join(SYNDICS_DIR);
    let io = |error| PkiError::Io {
        path: dir.clone(),
        error,
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(io)?;
    let path = dir.join(id);
    if std::fs::read_to_string(&path).is_ok_and(|t| t.trim() == key) {
        return Ok(());
    }
    crate::fsutil::replace_private(&path, [key]).map_err(|error| PkiError::Io { path, error })
}

/// Whether `id`'s accepted key was filed as a syndic maid's: the role
/// `maid key` shows.
pub fn is_syndic_key(pki: &Pki, id: &str, accepted: &str) -> bool {
    crate::pki::check_id(id).is_ok()
        && std::fs::read_to_string(pki.dir().join(SYNDICS_DIR).join(id))
            .is_ok_and(|t| t.trim() == accepted.trim())
}

/// The maids that may list minions beneath them: alive, registered as
/// syndic maids in a registration their accepted key signed, and accepted
/// with that role.
fn accepted_syndics(pki: &Pki, maids: &Maids, accepted: &AcceptedKeys) -> BTreeSet<String> {
    maids
        .iter()
        .filter(|(_, (alive, reg))| *alive && reg.as_ref().is_some_and(|r| r.syndic))
        .filter(|(id, _)| {
            accepted
                .get(*id)
                .is_some_and(|key| is_syndic_key(pki, id, &crate::trust::encode_verifying(key)))
        })
        .map(|(id, _)| id.clone())
        .collect()
}

/// The minions `syndics` list beneath them. With `accepted`, a list
/// counts only when the syndic maid's accepted key signed it; without, when
/// it is bare or signed by the key its syndic maid presents. A list that
/// does not read or verify is left out (and logged); an id the registry
/// has itself stays the registry's.
async fn beneath(
    conn: &mut Conn,
    maids: &Maids,
    syndics: &BTreeSet<String>,
    accepted: Option<&AcceptedKeys>,
) -> redis::RedisResult<Beneath> {
    let mut out = Beneath::new();
    for syndic in syndics {
        let text: Option<String> = conn.get(protocol::syndic_key(syndic)).await?;
        let Some(text) = text else { continue };
        let key = match accepted {
            Some(keys) => keys.get(syndic).copied(),
            None => maids[syndic]
                .1
                .as_ref()
                .and_then(|r| r.pubkey.as_deref())
                .and_then(|k| crate::trust::decode_verifying_key(k).ok()),
        };
        let listed = crate::wire_registry::read::<BTreeMap<String, Registration>>(&text)
            .map_err(Unbelieved::from)
            .and_then(|l| match key {
                Some(key) => Ok(l.verify(&key, syndic).map(|()| l.value)?),
                None if accepted.is_none() && l.envelope.is_none() => Ok(l.value),
                None => Err(Unbelieved::NoKey(syndic.clone())),
            });
        let listed = match listed {
            Ok(listed) => listed,
            Err(why) => {
                tracing::warn!(%syndic, %why, "the minions beneath a syndic maid are not believed");
                continue;
            }
        };
        for (id, reg) in listed {
            if !maids.contains_key(&id) && reg.id == id {
                out.entry(id).or_insert_with(|| (syndic.clone(), reg));
            }
        }
    }
    Ok(out)
}

/// Why the list a syndic maid keeps of the minions beneath it is not
/// believed.
#[derive(Debug, thiserror::Error)]
enum Unbelieved {
    #[error(transparent)]
    Unreadable(#[from] crate::wire_registry::Unreadable),
    #[error(transparent)]
    Forged(#[from] crate::wire_registry::Forged),
    #[error("{0:?} has no key to sign its list")]
    NoKey(String),
}

/// The minions `beneath` as registry entries that are never alive: what
/// their keys are filed from.
fn as_maids(beneath: &Beneath) -> Maids {
    beneath
        .iter()
        .map(|(id, (_, reg))| (id.clone(), (false, Some(reg.clone()))))
        .collect()
}

/// File the keys the registry entries `maids` carry, as their maids'
/// submissions ([`Pki::submit_registry`]).
fn file_registered_keys(pki: &Pki, maids: &Maids) -> Result<(), PkiError> {
    pki.submit_registry(
        maids
            .iter()
            .filter_map(|(id, (_, reg))| reg.as_ref().map(|r| (id, r))),
    )
}

/// The keys of the minions `beneath` that have no key in `accepted`, as
/// their syndic maids listed them, where that key is the one filed as
/// pending for the id ([`Registry::vouched`]). Filing runs first, so a
/// minion listed for the first time is pending by now, unless its id was
/// rejected or another key was filed for it.
fn vouched_keys(pki: &Pki, beneath: &Beneath, accepted: &AcceptedKeys) -> AcceptedKeys {
    beneath
        .iter()
        .filter(|(id, _)| !accepted.contains_key(*id))
        .filter_map(|(id, (_, reg))| {
            let listed = reg.pubkey.as_deref()?.trim();
            let pending = pki.key(KeyState::Pending, id).ok().flatten()?;
            let rejected = pki.key(KeyState::Rejected, id).ok()?.is_some();
            if pending != listed || rejected {
                return None;
            }
            let key = crate::trust::decode_verifying_key(listed).ok()?;
            Some((id.clone(), key))
        })
        .collect()
}

/// File every key the registry presents — each a maid's submission, a
/// pending syndic maid's noted with its role, the minions' beneath as
/// their accepted syndic maids list them — as `maid key` and the wheel do
/// before they list or act.
pub async fn file_keys(conn: &mut Conn, pki: &Pki) -> Result<(), BusError> {
    Registry::read(conn, Some(pki)).await?;
    Ok(())
}

/// The keys accepted by `pki`, after filing what the registry presents:
/// none (so nothing counts) when the store cannot be read.
pub async fn accepted_keys(conn: &mut Conn, pki: &Pki) -> Result<AcceptedKeys, BusError> {
    Ok(Registry::read(conn, Some(pki))
        .await?
        .accepted
        .unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A maid registered with `grains`, alive or not.
    fn maid(id: &str, alive: bool, grains: Value) -> (String, (bool, Option<Registration>)) {
        let reg = serde_json::from_value(json!({
            "id": id, "version": "1", "master_topics": ["m"], "functions": [],
            "grains": grains, "started_at": "", "last_seen": "",
        }))
        .unwrap();
        (id.to_string(), (alive, Some(reg)))
    }

    fn fleet() -> Registry {
        Registry {
            maids: [
                maid("web1", true, json!({"roles": ["web"]})),
                maid("web2", false, json!({"roles": ["web"]})),
                maid("db1", false, json!({"roles": ["db"]})),
            ]
            .into_iter()
            .collect(),
            ..Default::default()
        }
    }

    /// A master that keeps keys and accepted `ids`' (one key for all).
    fn accept(reg: &mut Registry, ids: &[&str]) {
        let key = ed25519_dalek::SigningKey::from_bytes(&[1; 32]).verifying_key();
        reg.accepted = Some(ids.iter().map(|id| (id.to_string(), key)).collect());
    }

    fn selected(reg: &Registry, tgt: &str, tgt_type: &str) -> Vec<String> {
        reg.targets(&json!(tgt), tgt_type, None, &|_| false)
            .ids
            .into_iter()
            .collect()
    }

    #[test]
    fn a_target_selects_known_maids_alive_or_not_by_their_last_grains() {
        let reg = fleet();
        assert_eq!(selected(&reg, "*", "glob"), ["db1", "web1", "web2"]);
        assert_eq!(selected(&reg, "roles:web", "grain"), ["web1", "web2"]);
        assert_eq!(selected(&reg, "web2", "glob"), ["web2"]);
        assert_eq!(selected(&reg, "web1,web2", "list"), ["web1", "web2"]);
        // A glob with commas is several to Salt's master (no maid's own
        // glob matches it); an empty piece matches nobody.
        assert_eq!(selected(&reg, "web1,d*,", "glob"), ["db1", "web1"]);
        // Only the alive are expected to PING.
        let expected: Vec<&String> = reg.expected(&|_| false).map(|(id, _)| id).collect();
        assert_eq!(expected, ["web1"]);
        assert!(reg.alive("web1") && !reg.alive("web2") && !reg.alive("mail1"));
    }

    #[test]
    fn with_accepted_keys_a_maid_whose_key_is_not_accepted_is_not_known() {
        let mut reg = fleet();
        accept(&mut reg, &["web1", "web2"]);
        assert_eq!(selected(&reg, "*", "glob"), ["web1", "web2"]);
        let excluded = reg.targets(&json!("*"), "glob", None, &|id| id == "web2");
        assert_eq!(excluded.ids.into_iter().collect::<Vec<_>>(), ["web1"]);
    }

    #[test]
    fn an_accepted_key_that_never_registered_is_known_by_its_id_alone() {
        let mut reg = fleet();
        accept(&mut reg, &["web1", "boot1"]);
        assert_eq!(selected(&reg, "*", "glob"), ["boot1", "web1"]);
        assert_eq!(selected(&reg, "boot1", "glob"), ["boot1"]);
        assert!(
            selected(&reg, "roles:*", "grain")
                .iter()
                .all(|id| id != "boot1")
        );
        assert!(!reg.alive("boot1"), "never connected");
        assert!(reg.expected(&|_| false).all(|(id, _)| id != "boot1"));
    }

    #[test]
    fn a_syndic_maid_that_lists_nobody_is_opaque_only_while_alive() {
        let mut reg = fleet();
        reg.maids.extend([maid("syn", false, json!({}))]);
        reg.syndics.insert("syn".into());
        assert!(
            reg.targets(&json!("salt*"), "glob", None, &|_| false)
                .ids
                .is_empty()
        );
        reg.maids.get_mut("syn").unwrap().0 = true;
        let t = reg.targets(&json!("salt*"), "glob", None, &|_| false);
        assert_eq!(t.ids.into_iter().collect::<Vec<_>>(), ["syn"]);
    }
}
