//! The decide step of the per-message path: what a message off a master
//! topic is to this maid, as a [`Verdict`]. Nothing here replies, audits or
//! counts; [`super::message`] turns each verdict into that, in one place.
//!
//! The one state it changes is the replay store: a targeted job that is
//! new is recorded there as accepted, in the same step that finds it new,
//! so two copies of one jid can never both be taken.

use serde_json::Value;

use super::Shared;
use crate::audit::{Decision, Record};
use crate::jidstore::Insert;
use crate::protocol::{self, Job, Refusal};
use crate::target::{TargetType, matches_delimited};

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
    /// A job for this maid or, on a syndic maid, for maids beneath it
    /// (`beneath`, the targeted ids), new: PING, then run it here when
    /// `own`, and relay it to those beneath.
    Run {
        job: Job,
        kid: Option<String>,
        own: bool,
        beneath: Vec<String>,
        /// Also publish it to the Salt master beneath, which says whom it
        /// targets there.
        salt: bool,
    },
}

/// Decide what `payload`, which arrived on the master topic `topic`, is.
pub(super) fn admit(shared: &Shared, topic: &str, payload: &[u8]) -> Verdict {
    if payload.len() > shared.config.agent.max_message_bytes {
        return Verdict::Drop {
            kind: "too large",
            why: format!("{} bytes, over agent.max_message_bytes", payload.len()),
        };
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
                    return Verdict::Drop {
                        kind: "not json",
                        why: format!("not JSON: {e}"),
                    };
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
        Ok(ok) => ok,
        Err(Refusal::Drop(why)) => {
            return Verdict::Drop {
                kind: "dropped",
                why,
            };
        }
        Err(Refusal::Reject {
            temp_topic,
            jid,
            reason,
            detail,
        }) => {
            let mut rec = Record::new(&shared.id, &jid, Decision::Rejected);
            claim(payload, &mut rec);
            return Verdict::Refuse {
                rec: Box::new(rec),
                reply: Some((temp_topic, jid)),
                reason,
                detail,
                decoded: false,
            };
        }
    };
    let matched = TargetType::parse(&job.tgt_type).and_then(|t| {
        matches_delimited(
            &job.tgt,
            t,
            &shared.id,
            &shared.grains.read(),
            job.delimiter.as_deref(),
        )
    });
    let matched = match matched {
        Ok(m) => m,
        Err(e) => {
            let rec = super::job::record(shared, &job, &kid, None, Decision::Rejected);
            let reply = Some((job.temp_topic.clone(), job.jid.clone()));
            return refused(rec, reply, "malformed", e.to_string());
        }
    };
    let beneath = match &shared.syndic {
        Some(syndic) => syndic.targeted(&job, &shared.id),
        None => Vec::new(),
    };
    let salt = shared.salt.is_some();
    if !matched && beneath.is_empty() && !salt {
        return Verdict::NotTargeted { job, kid };
    }
    let now_ms = chrono::Utc::now().timestamp_millis();
    let inserted = shared
        .jids
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert_signed(&job.jid, kid.as_deref(), now_ms);
    let (decision, reason, detail) = match inserted {
        Insert::New => {
            return Verdict::Run {
                job,
                kid,
                own: matched,
                beneath,
                salt,
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
                shared.config.agent.remembered_jids
            ),
        ),
        Insert::Invalid => (
            Decision::Rejected,
            "malformed",
            "the jid has a line break or a tab".to_string(),
        ),
    };
    let rec = super::job::record(shared, &job, &kid, Some(true), decision);
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
