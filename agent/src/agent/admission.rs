//! The decide step of the per-message path: what a message off a master
//! topic is to this maid, as a [`Verdict`]. Nothing here replies, audits or
//! counts; [`super::message`] turns each verdict into that, in one place.
//!
//! [`admit`] reads the maid only through a [`View`]: its id and grains, the
//! keys it trusts, its memory of jids, and those beneath it. So every
//! verdict is decided, and unit-tested, without Redis, a runtime or a
//! plugin.
//!
//! The one state it changes is the replay store: a targeted job that is
//! new is recorded there as accepted, in the same step that finds it new,
//! so two copies of one jid can never both be taken.

use std::sync::Mutex;

use serde_json::{Map, Value};

use super::downstream::{Downstream, Targeted};
use crate::audit::{Decision, Record};
use crate::jidstore::{Insert, JidStore};
use crate::protocol::{self, Job, Refusal};
use crate::target::{TargetType, matches_delimited};
use crate::trust::Verifier;

/// What admission may read of the maid, and the one thing it may change
/// (the jids it remembers).
pub(super) struct View<'a> {
    /// This maid's id.
    pub id: &'a str,
    /// Its grains now, as targeting reads them.
    pub grains: &'a Map<String, Value>,
    /// The keys it trusts, whether it requires signatures, its clock skew.
    pub verifier: &'a Verifier,
    /// The jids it accepted, per signing key.
    pub jids: &'a Mutex<JidStore>,
    /// `agent.max_message_bytes`: a longer message is not read.
    pub max_message_bytes: usize,
    /// `agent.remembered_jids`, which a `busy` refusal names.
    pub remembered_jids: usize,
    /// Those beneath, on a syndic maid.
    pub beneath: &'a [Box<dyn Downstream>],
    /// `audit.arguments`: what records keep of a job's arguments.
    pub arguments: crate::config::AuditArguments,
    /// This maid's clock (Unix ms), for signatures' age and jid retention.
    pub now_ms: i64,
}

/// What a message is to this maid.
pub(super) enum Verdict {
    /// Not a job a maid answers: logged (within the noise rate), nothing
    /// more. `kind` is the short reason the summary counts it under.
    Drop { kind: &'static str, why: String },
    /// Refused: audited as `rec` and answered with a `reject` of `reason`
    /// on `reply` when there is one. `decoded` says whether it was a job
    /// (counted as received) before it was refused.
    Refuse {
        rec: Box<Record>,
        reply: Option<(String, String)>,
        reason: String,
        detail: String,
        decoded: bool,
    },
    /// A job for other maids: PING `match: false`.
    NotTargeted { job: Job, kid: Option<String> },
    /// A job for this maid or, on a syndic maid, for those beneath it
    /// (`beneath`: whom it targets under each of the view's downstreams,
    /// in order), new: PING, then run it here when `own`, and hand it down
    /// where it targets somebody.
    Run {
        job: Job,
        kid: Option<String>,
        own: bool,
        beneath: Vec<Targeted>,
    },
}

/// Decide what `payload`, which arrived on the master topic `topic`, is.
pub(super) fn admit(view: &View, topic: &str, payload: &[u8]) -> Verdict {
    let (job, kid) = match open(view, topic, payload) {
        Ok(opened) => opened,
        Err(verdict) => return *verdict,
    };
    let matched = TargetType::parse(&job.tgt_type).and_then(|t| {
        matches_delimited(&job.tgt, t, view.id, view.grains, job.delimiter.as_deref())
    });
    let matched = match matched {
        Ok(m) => m,
        Err(e) => {
            let rec = super::records::of_job(
                view.id,
                &job,
                &kid,
                None,
                Decision::Rejected,
                view.arguments,
            );
            let reply = Some((job.temp_topic.clone(), job.jid.clone()));
            return refused(rec, reply, "malformed", e.to_string());
        }
    };
    let beneath: Vec<Targeted> = view
        .beneath
        .iter()
        .map(|d| d.targeted(&job, view.id))
        .collect();
    if !matched && !beneath.iter().any(Targeted::any) {
        return Verdict::NotTargeted { job, kid };
    }
    take(view, job, kid, matched, beneath)
}

/// The job `payload` holds, checked (size, JSON, signature, topic, age)
/// with the key that signed it; else what it is instead.
fn open(view: &View, topic: &str, payload: &[u8]) -> Result<(Job, Option<String>), Box<Verdict>> {
    if payload.len() > view.max_message_bytes {
        return Err(Box::new(Verdict::Drop {
            kind: "too large",
            why: format!("{} bytes, over agent.max_message_bytes", payload.len()),
        }));
    }
    // An unsigned job is decoded straight into its fields; everything else
    // (and every job, where signatures are required) goes through the JSON
    // tree and the verifier.
    let fast = if view.verifier.require_signed {
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
                    return Err(Box::new(Verdict::Drop {
                        kind: "not json",
                        why: format!("not JSON: {e}"),
                    }));
                }
            };
            view.verifier
                .open(value, topic, view.now_ms)
                .and_then(|o| Job::from_value(o.job).map(|job| (job, o.kid)))
        }
    };
    match opened {
        // Where it arrived, for its records (a signed job names the topic
        // it was signed for, and the verifier held it to that).
        Ok((mut job, kid)) => {
            if job.topic.is_none() {
                job.topic = Some(bounded(topic).to_string());
            }
            Ok((job, kid))
        }
        Err(Refusal::Drop(why)) => Err(Box::new(Verdict::Drop {
            kind: "dropped",
            why,
        })),
        Err(Refusal::Reject {
            temp_topic,
            jid,
            reason,
            detail,
        }) => {
            let mut rec = Record::new(view.id, &jid, Decision::Rejected);
            rec.topic = Some(bounded(topic).to_string());
            claim(payload, &mut rec);
            Err(Box::new(Verdict::Refuse {
                rec: Box::new(rec),
                reply: Some((temp_topic, jid)),
                reason,
                detail,
                decoded: false,
            }))
        }
    }
}

/// A job targeting this maid or those beneath it: taken when its jid is
/// new (and remembered in the same step), else refused as a replay, a
/// duplicate, a signer past its bound or a jid the journal cannot hold.
fn take(
    view: &View,
    job: Job,
    kid: Option<String>,
    matched: bool,
    beneath: Vec<Targeted>,
) -> Verdict {
    let inserted = view
        .jids
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert_signed(&job.jid, kid.as_deref(), view.now_ms);
    let (decision, reason, detail) = match inserted {
        Insert::New => {
            return Verdict::Run {
                job,
                kid,
                own: matched,
                beneath,
            };
        }
        // A signed job seen before is an attack; an unsigned one a
        // master's retry.
        Insert::Seen if kid.is_some() => (
            Decision::Rejected,
            "replayed",
            "this jid was accepted before".to_string(),
        ),
        Insert::Seen => (
            Decision::Duplicate,
            "duplicate",
            "this jid was accepted before".to_string(),
        ),
        Insert::Full => (
            Decision::Rejected,
            "busy",
            format!(
                "this maid remembers {} jids of this job's signer, its \
                 agent.remembered_jids; none may be forgotten before its retention ends",
                view.remembered_jids
            ),
        ),
        Insert::Invalid => (
            Decision::Rejected,
            "malformed",
            "the jid has a line break or a tab".to_string(),
        ),
    };
    let rec = super::records::of_job(view.id, &job, &kid, Some(true), decision, view.arguments);
    // A duplicate is dropped without a word.
    let reply = (decision == Decision::Rejected).then(|| (job.temp_topic.clone(), job.jid.clone()));
    refused(rec, reply, reason, detail)
}

/// The refusal of a job that was decoded.
fn refused(rec: Record, reply: Option<(String, String)>, reason: &str, detail: String) -> Verdict {
    Verdict::Refuse {
        rec: Box::new(rec),
        reply,
        reason: reason.to_string(),
        detail,
        decoded: true,
    }
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
    rec.args_sha256 = Some(super::records::args_digest(args[0], args[1]));
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

#[cfg(test)]
mod tests {
    use ed25519_dalek::SigningKey;
    use serde_json::json;

    use super::*;
    use crate::trust::{key_id, sign};

    const TOPIC: &str = "master";
    const NOW: i64 = 1_800_000_000_000;

    fn master() -> SigningKey {
        SigningKey::from_bytes(&[7; 32])
    }

    /// A maid `web1` (grains `roles: [web]`) that trusts [`master`].
    struct Maid {
        grains: Map<String, Value>,
        verifier: Verifier,
        jids: Mutex<JidStore>,
        beneath: Vec<Box<dyn Downstream>>,
    }

    /// Maids beneath a syndic maid, by id (no grains).
    struct Beneath(Vec<String>);

    impl Downstream for Beneath {
        fn targeted(&self, job: &Job, own: &str) -> Targeted {
            let t = TargetType::parse(&job.tgt_type).unwrap();
            Targeted::Ids(
                self.0
                    .iter()
                    .filter(|id| {
                        id.as_str() != own
                            && matches_delimited(&job.tgt, t, id, &Map::new(), None).unwrap()
                    })
                    .cloned()
                    .collect(),
            )
        }

        fn hand_down<'a>(
            &'a self,
            _: &'a super::super::Shared,
            _: super::super::downstream::Down<'a>,
            _: Targeted,
        ) -> futures_util::future::BoxFuture<'a, super::super::downstream::HandedDown<'a>> {
            unreachable!("admission hands nothing down")
        }
    }

    /// A Salt master beneath: it targets itself.
    struct SaltMaster;

    impl Downstream for SaltMaster {
        fn targeted(&self, _: &Job, _: &str) -> Targeted {
            Targeted::TheyDecide
        }

        fn hand_down<'a>(
            &'a self,
            _: &'a super::super::Shared,
            _: super::super::downstream::Down<'a>,
            _: Targeted,
        ) -> futures_util::future::BoxFuture<'a, super::super::downstream::HandedDown<'a>> {
            unreachable!("admission hands nothing down")
        }
    }

    impl Maid {
        fn new(require_signed: bool) -> Maid {
            let key = master();
            Maid {
                grains: json!({"id": "web1", "roles": ["web"]})
                    .as_object()
                    .unwrap()
                    .clone(),
                verifier: Verifier {
                    keys: vec![(key_id(&key.verifying_key()), key.verifying_key())],
                    require_signed,
                    max_skew_ms: 60_000,
                },
                jids: Mutex::new(JidStore::memory(100, 3_600_000)),
                beneath: Vec::new(),
            }
        }

        fn admit(&self, payload: &[u8]) -> Verdict {
            let view = View {
                id: "web1",
                grains: &self.grains,
                verifier: &self.verifier,
                jids: &self.jids,
                max_message_bytes: 4096,
                remembered_jids: 100,
                beneath: &self.beneath,
                arguments: Default::default(),
                now_ms: NOW,
            };
            admit(&view, TOPIC, payload)
        }
    }

    fn job(jid: &str, tgt: &str, tgt_type: &str) -> Value {
        json!({
            "jid": jid, "tempTopic": format!("reply.{jid}"), "fun": "test.ping",
            "arg": ["a"], "tgt": tgt, "tgt_type": tgt_type,
            "topic": TOPIC, "issued_at": NOW,
        })
    }

    fn signed_by(job: &Value, key: &SigningKey) -> Vec<u8> {
        serde_json::to_vec(&sign(job.to_string(), key)).unwrap()
    }

    fn signed(job: &Value) -> Vec<u8> {
        signed_by(job, &master())
    }

    fn unsigned(job: &Value) -> Vec<u8> {
        job.to_string().into_bytes()
    }

    /// The refusal's reason, whether it is answered, whether it was a
    /// decoded job, and its audit record's decision.
    fn refusal(v: Verdict) -> (String, bool, bool, Decision) {
        match v {
            Verdict::Refuse {
                rec,
                reply,
                reason,
                decoded,
                ..
            } => (reason, reply.is_some(), decoded, rec.decision),
            other => panic!("not a refusal: {}", name(&other)),
        }
    }

    fn drop_kind(v: Verdict) -> &'static str {
        match v {
            Verdict::Drop { kind, .. } => kind,
            other => panic!("not a drop: {}", name(&other)),
        }
    }

    fn name(v: &Verdict) -> &'static str {
        match v {
            Verdict::Drop { .. } => "drop",
            Verdict::Refuse { .. } => "refuse",
            Verdict::NotTargeted { .. } => "not targeted",
            Verdict::Run { .. } => "run",
        }
    }

    #[test]
    fn a_message_over_the_size_bound_is_not_read() {
        let big = vec![b' '; 4097];
        assert_eq!(drop_kind(Maid::new(false).admit(&big)), "too large");
    }

    #[test]
    fn what_is_not_json_or_has_no_reply_address_is_dropped() {
        let maid = Maid::new(true);
        assert_eq!(drop_kind(maid.admit(b"{not json")), "not json");
        assert_eq!(drop_kind(Maid::new(false).admit(b"{not json")), "not json");
        let no_address = json!({"fun": "test.ping", "tgt": "*"});
        assert_eq!(drop_kind(maid.admit(&unsigned(&no_address))), "dropped");
        let bad_envelope = json!({"payload": 1, "sig": "x"});
        assert_eq!(drop_kind(maid.admit(&unsigned(&bad_envelope))), "dropped");
    }

    #[test]
    fn signature_failures_are_refused_and_answered() {
        let maid = Maid::new(true);
        let j = job("1", "*", "glob");
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (unsigned(&j), "unsigned"),
            (
                signed_by(&j, &SigningKey::from_bytes(&[8; 32])),
                "unknown key",
            ),
            (
                {
                    let mut env = sign(j.to_string(), &master());
                    env.payload = job("1", "web*", "glob").to_string();
                    serde_json::to_vec(&env).unwrap()
                },
                "bad signature",
            ),
            (
                signed(&{
                    let mut j = j.clone();
                    j["topic"] = json!("other");
                    j
                }),
                "wrong topic",
            ),
            (
                signed(&{
                    let mut j = j.clone();
                    j["issued_at"] = json!(NOW - 3_600_000);
                    j
                }),
                "expired",
            ),
        ];
        for (payload, want) in cases {
            let (reason, answered, decoded, decision) = refusal(maid.admit(&payload));
            assert_eq!(reason, want);
            assert!(answered, "{want}: a reject is sent");
            assert!(!decoded, "{want}: refused before it was a job");
            assert_eq!(decision, Decision::Rejected);
        }
    }

    #[test]
    fn a_target_that_cannot_be_read_is_malformed() {
        let maid = Maid::new(true);
        let (reason, answered, decoded, decision) =
            refusal(maid.admit(&signed(&job("1", "*", "nonsense"))));
        assert_eq!(
            (reason.as_str(), answered, decoded, decision),
            ("malformed", true, true, Decision::Rejected)
        );
    }

    #[test]
    fn a_job_for_others_is_not_targeted_and_remembers_nothing() {
        let maid = Maid::new(true);
        let j = job("1", "db*", "glob");
        for _ in 0..2 {
            let Verdict::NotTargeted { job, kid } = maid.admit(&signed(&j)) else {
                panic!("targeted");
            };
            assert_eq!(job.jid, "1");
            assert_eq!(kid, Some(key_id(&master().verifying_key())));
        }
        // Its jid was not taken: the same jid targeting this maid runs.
        assert!(matches!(
            maid.admit(&signed(&job("1", "web*", "glob"))),
            Verdict::Run { own: true, .. }
        ));
    }

    #[test]
    fn targeting_reads_the_views_grains() {
        let maid = Maid::new(true);
        assert!(matches!(
            maid.admit(&signed(&job("1", "roles:web", "grain"))),
            Verdict::Run { own: true, .. }
        ));
        assert!(matches!(
            maid.admit(&signed(&job("2", "roles:db", "grain"))),
            Verdict::NotTargeted { .. }
        ));
    }

    #[test]
    fn a_new_job_for_this_maid_runs_once_and_a_signed_replay_is_refused() {
        let maid = Maid::new(true);
        let payload = signed(&job("1", "web*", "glob"));
        let Verdict::Run {
            job,
            kid,
            own,
            beneath,
        } = maid.admit(&payload)
        else {
            panic!("not run");
        };
        assert_eq!((job.fun.as_str(), own), ("test.ping", true));
        assert_eq!(kid, Some(key_id(&master().verifying_key())));
        assert!(beneath.is_empty());
        let (reason, answered, decoded, decision) = refusal(maid.admit(&payload));
        assert_eq!(
            (reason.as_str(), answered, decoded, decision),
            ("replayed", true, true, Decision::Rejected)
        );
    }

    #[test]
    fn an_unsigned_job_seen_again_is_a_silent_duplicate() {
        let maid = Maid::new(false);
        let payload = unsigned(&job("1", "*", "glob"));
        assert!(matches!(
            maid.admit(&payload),
            Verdict::Run {
                own: true,
                kid: None,
                ..
            }
        ));
        let (reason, answered, _, decision) = refusal(maid.admit(&payload));
        assert_eq!(
            (reason.as_str(), answered, decision),
            ("duplicate", false, Decision::Duplicate)
        );
    }

    #[test]
    fn a_signer_past_its_jid_bound_is_refused_busy() {
        let mut maid = Maid::new(true);
        maid.jids = Mutex::new(JidStore::memory(1, 3_600_000));
        assert!(matches!(
            maid.admit(&signed(&job("1", "*", "glob"))),
            Verdict::Run { .. }
        ));
        let (reason, answered, _, decision) = refusal(maid.admit(&signed(&job("2", "*", "glob"))));
        assert_eq!(
            (reason.as_str(), answered, decision),
            ("busy", true, Decision::Rejected)
        );
    }

    #[test]
    fn a_jid_the_journal_cannot_hold_is_malformed() {
        let maid = Maid::new(false);
        let (reason, answered, _, _) = refusal(maid.admit(&unsigned(&job("1\t2", "*", "glob"))));
        assert_eq!((reason.as_str(), answered), ("malformed", true));
    }

    #[test]
    fn a_syndic_maid_runs_for_the_maids_beneath_it_targets() {
        let mut maid = Maid::new(true);
        maid.beneath = vec![Box::new(Beneath(vec![
            "db1".into(),
            "db2".into(),
            "web1".into(),
        ]))];
        let db = Targeted::Ids(vec!["db1".into(), "db2".into()]);
        let Verdict::Run { own, beneath, .. } = maid.admit(&signed(&job("1", "db*", "glob")))
        else {
            panic!("not run");
        };
        assert!(!own);
        assert_eq!(beneath, std::slice::from_ref(&db));
        let Verdict::Run { own, beneath, .. } = maid.admit(&signed(&job("2", "*", "glob"))) else {
            panic!("not run");
        };
        assert!(own, "its own id is its own grains' to decide");
        assert_eq!(beneath, [db]);
        assert!(matches!(
            maid.admit(&signed(&job("3", "mail*", "glob"))),
            Verdict::NotTargeted { .. }
        ));
    }

    #[test]
    fn a_syndic_maid_over_salt_takes_every_job_for_the_master_beneath() {
        let mut maid = Maid::new(true);
        maid.beneath = vec![Box::new(Beneath(vec!["db1".into()])), Box::new(SaltMaster)];
        let Verdict::Run { own, beneath, .. } = maid.admit(&signed(&job("1", "minion*", "glob")))
        else {
            panic!("not run");
        };
        assert!(!own);
        assert_eq!(beneath, [Targeted::Ids(Vec::new()), Targeted::TheyDecide]);
    }

    #[test]
    fn a_refused_message_is_audited_with_what_it_claimed() {
        let maid = Maid::new(true);
        let Verdict::Refuse { rec, .. } = maid.admit(&signed_by(
            &job("1", "*", "glob"),
            &SigningKey::from_bytes(&[8; 32]),
        )) else {
            panic!("not refused");
        };
        assert_eq!(rec.fun.as_deref(), Some("test.ping"));
        assert_eq!(
            rec.claimed_kid,
            Some(key_id(&SigningKey::from_bytes(&[8; 32]).verifying_key()))
        );
        assert!(rec.args_sha256.is_some());
    }
}
