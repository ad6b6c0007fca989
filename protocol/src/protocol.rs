//! The wire protocol (`docs/protocol.md`, a copy of the shared
//! `PROTOCOL.md`, version 1.2): jobs a master publishes and the replies a
//! maid sends, as Rust types.
//!
//! Decoding is split in two so a maid can always answer: a message that is
//! not a JSON object, or has no readable `tempTopic` and `jid`, is dropped
//! (and logged); one whose remaining fields have the wrong types is
//! rejected as `malformed` on its reply topic.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use maid_salt::args::load_args_and_kwargs;

/// Redis hash of the registry (PROTOCOL §4).
pub const REGISTRY_KEY: &str = "maid:registry";

/// `maid:alive:<id>`: exists while a maid heartbeats.
pub fn alive_key(id: &str) -> String {
    format!("maid:alive:{id}")
}

/// `maid:syndic:<id>`: the minions beneath syndic maid `id` (PROTOCOL §7),
/// each id's registration as it registered beneath, kept fresh by its
/// heartbeat.
pub fn syndic_key(id: &str) -> String {
    format!("maid:syndic:{id}")
}

/// `maid:job:<jid>`: the job cache (PROTOCOL §5).
pub fn job_key(jid: &str) -> String {
    format!("maid:job:{jid}")
}

/// A job (PROTOCOL §2), with Salt's aliases already folded in.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Job {
    pub jid: String,
    #[serde(rename = "tempTopic")]
    pub temp_topic: String,
    pub fun: String,
    pub arg: Vec<Value>,
    pub kwarg: Map<String, Value>,
    pub tgt: Value,
    pub tgt_type: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issued_at: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub out: Option<String>,
    /// The master topic the job was published on (PROTOCOL v1.1 §6):
    /// inside a signed job it binds the signature to that topic.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    /// SHA-256 (hex) the master pins for `salt://` sources the job reads,
    /// keyed by URL: inside a signed job, the agent serves those sources
    /// only with exactly that content (`docs/security.md`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
    pub source_hashes: BTreeMap<String, String>,
    /// PROTOCOL §8: the SHA-256 of the sealed pillar record each targeted
    /// id is to use (`maid:pillar:<id>`); a maid uses no other record.
    #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
    pub pillar: BTreeMap<String, String>,
    /// PROTOCOL §8: this job's own pillar (`pillar=`), sealed to each
    /// targeted id's key (base64): the whole pillar the job runs with,
    /// compiled with the inline data merged as Salt merges it.
    #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
    pub pillar_inline: BTreeMap<String, String>,
    /// Between the levels of a `grain`/`grain_pcre` target's key path when
    /// not Salt's `:` (`salt --delimiter`); sent, as Salt's master sends it,
    /// only when it is not the default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delimiter: Option<String>,
}

/// The longest `timeout` a job may ask for, in seconds (a year): the value
/// meets clocks and durations, and beyond this it means nothing anyway.
pub const MAX_TIMEOUT_SECS: f64 = 365.0 * 86_400.0;

/// The job's fields as they may arrive, aliases included. The reply
/// address and an envelope's `payload` are read too, for
/// [`Job::from_slice`]; [`Job::from_value`] takes the address it has
/// already checked.
#[derive(Deserialize)]
struct WireJob {
    #[serde(default)]
    jid: Option<String>,
    #[serde(default, rename = "tempTopic")]
    temp_topic: Option<String>,
    #[serde(default)]
    payload: Present,
    fun: String,
    #[serde(default)]
    arg: Vec<Value>,
    #[serde(default)]
    kwarg: Option<Map<String, Value>>,
    #[serde(default)]
    kwargs: Option<Map<String, Value>>,
    #[serde(default)]
    tgt: Option<Value>,
    #[serde(default)]
    tgt_type: Option<String>,
    #[serde(default)]
    expr_form: Option<String>,
    #[serde(default)]
    timeout: Option<f64>,
    #[serde(default)]
    user: Option<String>,
    #[serde(default)]
    issued_at: Option<i64>,
    #[serde(default)]
    out: Option<String>,
    #[serde(default)]
    topic: Option<String>,
    #[serde(default)]
    source_hashes: BTreeMap<String, String>,
    #[serde(default)]
    pillar: BTreeMap<String, String>,
    #[serde(default)]
    pillar_inline: BTreeMap<String, String>,
    #[serde(default)]
    delimiter: Option<String>,
}

/// Whether a field is there at all, whatever its value (`null` too).
#[derive(Default)]
struct Present(bool);

impl<'de> Deserialize<'de> for Present {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        serde::de::IgnoredAny::deserialize(d).map(|_| Present(true))
    }
}

/// Why a message was not accepted as a job.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// Not even a reply address: drop and log.
    Drop(String),
    /// Answer with a `reject` on `temp_topic`.
    Reject {
        temp_topic: String,
        jid: String,
        reason: String,
        detail: String,
    },
}

/// The longest `jid` or `tempTopic` a maid answers, in bytes. Longer ones
/// are dropped without a reply: a reject echoes the jid onto a topic the
/// sender chose, from every maid at once, and into every audit log, so an
/// unbounded one would make each maid an amplifier.
pub const MAX_ADDRESS_BYTES: usize = 256;

/// `Ok` when `temp_topic` and `jid` make a reply address a maid answers.
fn check_address(temp_topic: &str, jid: &str) -> Result<(), Refusal> {
    if temp_topic.is_empty() {
        return Err(Refusal::Drop("message has no tempTopic".into()));
    }
    if jid.is_empty() {
        return Err(Refusal::Drop("message has no jid".into()));
    }
    if temp_topic.len() > MAX_ADDRESS_BYTES || jid.len() > MAX_ADDRESS_BYTES {
        return Err(Refusal::Drop(format!(
            "tempTopic ({} bytes) or jid ({} bytes) is longer than {MAX_ADDRESS_BYTES} bytes",
            temp_topic.len(),
            jid.len()
        )));
    }
    Ok(())
}

/// The reply address of a message, if it has one.
pub fn reply_address(v: &Value) -> Result<(String, String), Refusal> {
    let Some(obj) = v.as_object() else {
        return Err(Refusal::Drop("message is not a JSON object".into()));
    };
    let temp_topic = match obj.get("tempTopic") {
        Some(Value::String(t)) => t.as_str(),
        _ => return Err(Refusal::Drop("message has no tempTopic".into())),
    };
    let jid = match obj.get("jid") {
        Some(Value::String(j)) => j.as_str(),
        _ => return Err(Refusal::Drop("message has no jid".into())),
    };
    check_address(temp_topic, jid)?;
    Ok((temp_topic.to_string(), jid.to_string()))
}

impl Job {
    /// Decode an unsigned job object.
    pub fn from_value(v: Value) -> Result<Job, Refusal> {
        let (temp_topic, jid) = reply_address(&v)?;
        match serde_json::from_value(v) {
            Ok(wire) => Self::from_wire(temp_topic, jid, wire),
            Err(e) => Err(Refusal::Reject {
                temp_topic,
                jid,
                reason: "malformed".into(),
                detail: e.to_string(),
            }),
        }
    }

    /// The fast path for the message a maid gets most, an unsigned job
    /// whose fields all have the right types: decoded straight from the
    /// bytes, without building a JSON tree and converting it. `None` for
    /// anything else (not JSON, no reply address, a field of the wrong
    /// type, a duplicate key, an envelope with a `payload`): the general
    /// path, [`Verifier::open`](crate::trust::Verifier::open) and then
    /// [`Job::from_value`], decides those, and gives the same result as
    /// this for every message this accepts.
    pub fn from_slice(bytes: &[u8]) -> Option<Result<Job, Refusal>> {
        let mut wire: WireJob = serde_json::from_slice(bytes).ok()?;
        if wire.payload.0 {
            return None;
        }
        let temp_topic = wire.temp_topic.take()?;
        let jid = wire.jid.take()?;
        if check_address(&temp_topic, &jid).is_err() {
            return None;
        }
        Some(Self::from_wire(temp_topic, jid, wire))
    }

    /// The job of a decoded message, or why it is malformed.
    fn from_wire(temp_topic: String, jid: String, wire: WireJob) -> Result<Job, Refusal> {
        let malformed = |detail: String| Refusal::Reject {
            temp_topic: temp_topic.clone(),
            jid: jid.clone(),
            reason: "malformed".into(),
            detail,
        };
        if wire.fun.is_empty() {
            return Err(malformed("fun is empty".into()));
        }
        let mut kwarg = wire.kwarg.or(wire.kwargs).unwrap_or_default();
        let arg = load_args_and_kwargs(wire.arg, &mut kwarg);
        let tgt = wire.tgt.unwrap_or_else(|| Value::String("*".into()));
        if !(tgt.is_string() || tgt.is_array()) {
            return Err(malformed("tgt must be a string or an array".into()));
        }
        if let Some(t) = wire.timeout
            && !(t.is_finite() && t > 0.0 && t <= MAX_TIMEOUT_SECS)
        {
            return Err(malformed(format!(
                "timeout must be a positive number of seconds, at most {MAX_TIMEOUT_SECS}"
            )));
        }
        Ok(Job {
            jid,
            temp_topic,
            fun: wire.fun,
            arg,
            kwarg,
            tgt,
            tgt_type: wire
                .tgt_type
                .or(wire.expr_form)
                .unwrap_or_else(|| "glob".into()),
            timeout: wire.timeout,
            user: wire.user,
            issued_at: wire.issued_at,
            out: wire.out,
            topic: wire.topic,
            source_hashes: wire.source_hashes,
            pillar: wire.pillar,
            pillar_inline: wire.pillar_inline,
            delimiter: wire.delimiter,
        })
    }

    /// The job's own time limit, when it gives one: `timeout` as a
    /// duration. Decoding bounds it ([`MAX_TIMEOUT_SECS`]); a value no
    /// duration holds is no limit of the job's, never a panic.
    pub fn time_limit(&self) -> Option<std::time::Duration> {
        self.timeout
            .and_then(|t| std::time::Duration::try_from_secs_f64(t).ok())
    }

    /// The return message (§3.2) of this job, serialised from what the maid
    /// holds: the bytes of `Reply::Return(..).to_json()` without copying the
    /// job's fields or the value first (it appears twice, as `return` and
    /// in `ret_`, and can be a whole file's content).
    pub fn return_json(&self, id: &str, ret: &Value, retcode: i32, stamp: &str) -> String {
        self.return_json_as(id, ret, None, retcode, stamp)
    }

    /// [`Self::return_json`] of a value sealed to the master (`sealed`,
    /// base64): `return` and `ret_` say `null` (§8).
    pub fn sealed_return_json(&self, id: &str, sealed: &str, retcode: i32, stamp: &str) -> String {
        self.return_json_as(id, &Value::Null, Some(sealed), retcode, stamp)
    }

    fn return_json_as(
        &self,
        id: &str,
        ret: &Value,
        sealed_return: Option<&str>,
        retcode: i32,
        stamp: &str,
    ) -> String {
        let view = ReturnView {
            sub_ip: id,
            jid: &self.jid,
            id,
            fun: &self.fun,
            fun_args: FunArgs(self),
            ret,
            retcode,
            success: retcode == 0,
            out: self.out.as_deref().unwrap_or("nested"),
            stamp,
            ret_: One(id, ret),
            sealed_return,
        };
        serde_json::to_string(&view).expect("returns always serialise")
    }
}

/// [`Return`], borrowed (same fields, same order, same tag).
#[derive(Serialize)]
#[serde(tag = "type", rename = "return")]
struct ReturnView<'a> {
    sub_ip: &'a str,
    jid: &'a str,
    id: &'a str,
    fun: &'a str,
    fun_args: FunArgs<'a>,
    #[serde(rename = "return")]
    ret: &'a Value,
    retcode: i32,
    success: bool,
    out: &'a str,
    #[serde(rename = "_stamp")]
    stamp: &'a str,
    ret_: One<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sealed_return: Option<&'a str>,
}

/// `fun_args` of a return: the positional arguments, then the keyword
/// arguments as one mapping when there are any (as Salt reports them).
struct FunArgs<'a>(&'a Job);

impl Serialize for FunArgs<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let job = self.0;
        let kwarg = !job.kwarg.is_empty();
        let mut seq = s.serialize_seq(Some(job.arg.len() + usize::from(kwarg)))?;
        for a in &job.arg {
            seq.serialize_element(a)?;
        }
        if kwarg {
            seq.serialize_element(&job.kwarg)?;
        }
        seq.end()
    }
}

/// A mapping of one key to one value.
struct One<'a>(&'a str, &'a Value);

impl Serialize for One<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(std::iter::once((self.0, self.1)))
    }
}

/// A maid's reply on a job's `tempTopic` (PROTOCOL §3).
// A reply is built once and serialised at once; boxing the large variant
// would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Reply {
    Ping(Ping),
    Return(Return),
    Reject(Reject),
}

/// §3.1: sent at once for every well-formed job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ping {
    pub sub_ip: String,
    pub jid: String,
    #[serde(rename = "match")]
    pub matched: bool,
    /// A syndic maid's targeted minions beneath it (itself included when
    /// it is targeted), known before any of them ran (§3.1, §7); absent
    /// from a maid that answers only for itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minions: Option<Vec<String>>,
}

/// §3.2: one per targeted minion when its function finishes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Return {
    pub sub_ip: String,
    pub jid: String,
    pub id: String,
    pub fun: String,
    pub fun_args: Vec<Value>,
    #[serde(rename = "return")]
    pub ret: Value,
    pub retcode: i32,
    pub success: bool,
    pub out: String,
    #[serde(rename = "_stamp")]
    pub stamp: String,
    pub ret_: Map<String, Value>,
    /// The return value sealed to the master key that signed the job
    /// (base64), where the job carried this minion's pillar: `return` and
    /// `ret_` then hold `null`, so what the function read of pillar
    /// crosses Redis and rests in the job cache sealed (§8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sealed_return: Option<String>,
}

impl Return {
    /// The return with its sealed value opened by `key`, the master's:
    /// `return` and `ret_` hold it. One that `key` cannot open says so.
    pub fn unsealed(mut self, key: Option<&ed25519_dalek::SigningKey>) -> Self {
        let Some(sealed) = self.sealed_return.take() else {
            return self;
        };
        let opened = key.ok_or(crate::pillar::PillarError::Open).and_then(|k| {
            let bytes = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, &sealed)
                .map_err(|_| crate::pillar::PillarError::Sealed)?;
            crate::pillar::open_value(&bytes, k)
        });
        self.ret = match opened {
            Ok(v) => v,
            Err(e) => Value::String(format!(
                "Sealed return: {e} (it is sealed to the master key that signed the job)"
            )),
        };
        self.ret_ = std::iter::once((self.id.clone(), self.ret.clone())).collect();
        self
    }
}

/// §3.3: a job the maid refuses to consider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reject {
    pub sub_ip: String,
    pub jid: String,
    pub reason: String,
}

impl Reply {
    pub fn jid(&self) -> &str {
        match self {
            Reply::Ping(p) => &p.jid,
            Reply::Return(r) => &r.jid,
            Reply::Reject(r) => &r.jid,
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("replies always serialise")
    }
}

/// What a maid writes into the registry (§4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Registration {
    pub id: String,
    pub version: String,
    pub master_topics: Vec<String>,
    pub functions: Vec<String>,
    pub grains: Map<String, Value>,
    pub started_at: String,
    pub last_seen: String,
    /// Base64 of the maid's raw 32-byte Ed25519 public key, when it has a
    /// key of its own (§4); a master accepts it as `salt-key` does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pubkey: Option<String>,
    /// A syndic maid: it answers for the minions beneath it, which it
    /// lists at [`syndic_key`] (§7).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub syndic: bool,
}

/// Whether `s` can name a module or function (`[A-Za-z_][A-Za-z0-9_]*`).
pub fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_and_aliases() {
        let job = Job::from_value(json!({
            "jid": "1", "tempTopic": "t", "fun": "test.arg",
            "arg": ["a", {"__kwarg__": true, "x": 1}],
            "kwargs": {"y": 2},
            "expr_form": "list", "tgt": ["m1"],
            "extra": "ignored"
        }))
        .unwrap();
        assert_eq!(job.arg, vec![json!("a")]);
        assert_eq!(
            job.kwarg,
            json!({"y": 2, "x": 1}).as_object().unwrap().clone()
        );
        assert_eq!(job.tgt_type, "list");
        let job =
            Job::from_value(json!({"jid": "1", "tempTopic": "t", "fun": "test.ping"})).unwrap();
        assert_eq!((job.tgt, job.tgt_type.as_str()), (json!("*"), "glob"));
        assert_eq!(job.delimiter, None);
        // Salt's `delimiter` rides along, and only when set.
        let job = Job::from_value(json!({"jid": "1", "tempTopic": "t", "fun": "test.ping",
            "tgt": "os;Debian", "tgt_type": "grain", "delimiter": ";"}))
        .unwrap();
        assert_eq!(job.delimiter.as_deref(), Some(";"));
        assert_eq!(serde_json::to_value(&job).unwrap()["delimiter"], ";");
        let plain = Job {
            delimiter: None,
            ..job
        };
        assert!(
            serde_json::to_value(&plain)
                .unwrap()
                .get("delimiter")
                .is_none()
        );
    }

    #[test]
    fn return_json_is_the_return_reply() {
        let stamp = "2026-11-21T10:00:00.000001";
        for (job, fun_args) in [
            (
                json!({"jid": "1", "tempTopic": "t", "fun": "test.ping"}),
                vec![],
            ),
            (
                json!({"jid": "2", "tempTopic": "t", "fun": "cmd.run", "arg": ["ls", {"__kwarg__": true, "cwd": "/"}], "out": "json"}),
                vec![json!("ls"), json!({"cwd": "/"})],
            ),
        ] {
            let job = Job::from_value(job).unwrap();
            for (ret, retcode) in [(json!(true), 0), (json!({"a": [1, "\u{e9}\""]}), 2)] {
                let owned = Reply::Return(Return {
                    sub_ip: "m1".into(),
                    jid: job.jid.clone(),
                    id: "m1".into(),
                    fun: job.fun.clone(),
                    fun_args: fun_args.clone(),
                    ret: ret.clone(),
                    retcode,
                    success: retcode == 0,
                    out: job.out.clone().unwrap_or_else(|| "nested".into()),
                    stamp: stamp.into(),
                    ret_: Map::from_iter([("m1".to_string(), ret.clone())]),
                    sealed_return: None,
                });
                assert_eq!(job.return_json("m1", &ret, retcode, stamp), owned.to_json());
            }
        }
    }

    #[test]
    fn a_sealed_return_opens_with_the_signing_master_key_only() {
        use base64::Engine;
        let job =
            Job::from_value(json!({"jid": "1", "tempTopic": "t", "fun": "pillar.items"})).unwrap();
        let master = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
        let other = ed25519_dalek::SigningKey::from_bytes(&[8; 32]);
        let value = json!({"secret": "s3-cr-et"});
        let sealed = crate::pillar::seal_value(&value, &master.verifying_key()).unwrap();
        let b64 = base64::engine::general_purpose::STANDARD.encode(sealed);
        let text = job.sealed_return_json("m1", &b64, 0, "x");
        assert!(!text.contains("s3-cr-et"), "{text}");
        let Ok(Reply::Return(r)) = serde_json::from_str::<Reply>(&text) else {
            panic!("{text}");
        };
        assert_eq!((&r.ret, &r.ret_["m1"]), (&Value::Null, &Value::Null));
        let opened = r.clone().unsealed(Some(&master));
        assert_eq!((&opened.ret, &opened.ret_["m1"]), (&value, &value));
        assert_eq!(opened.sealed_return, None);
        for key in [Some(&other), None] {
            let refused = r.clone().unsealed(key);
            assert!(
                refused
                    .ret
                    .as_str()
                    .is_some_and(|s| s.starts_with("Sealed return: ")),
                "{:?}",
                refused.ret
            );
        }
        // A return that was never sealed is as it was.
        let plain = Return {
            sealed_return: None,
            ..r.clone()
        };
        assert_eq!(plain.clone().unsealed(Some(&master)), plain);
    }

    /// `docs/protocol.md` is the wire contract this code keeps, and must be
    /// the project's shared one word for word.
    #[test]
    fn the_wire_contract_in_the_repository_is_the_shared_one() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let ours = std::fs::read_to_string(root.join("docs/protocol.md")).unwrap();
        let shared_path = root.join("../shared/PROTOCOL.md");
        let shared = std::fs::read_to_string(&shared_path).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (the shared contract sits beside the checkout, in ../shared)",
                shared_path.display()
            )
        });
        assert!(
            ours == shared,
            "docs/protocol.md differs from ../shared/PROTOCOL.md: copy the shared one over it"
        );
    }

    #[test]
    fn oversized_reply_addresses_are_dropped_without_a_reply() {
        let long = "j".repeat(MAX_ADDRESS_BYTES + 1);
        let fits = "j".repeat(MAX_ADDRESS_BYTES);
        for (jid, topic) in [(long.as_str(), "t"), ("1", long.as_str())] {
            let msg = json!({"jid": jid, "tempTopic": topic, "fun": 5});
            assert!(matches!(
                Job::from_value(msg.clone()),
                Err(Refusal::Drop(_))
            ));
            assert!(Job::from_slice(msg.to_string().as_bytes()).is_none());
        }
        let ok = json!({"jid": fits, "tempTopic": fits, "fun": "a.b"});
        assert!(Job::from_value(ok).is_ok());
    }

    #[test]
    fn refusals() {
        assert!(matches!(Job::from_value(json!([1])), Err(Refusal::Drop(_))));
        assert!(matches!(
            Job::from_value(json!({"jid": "1", "fun": "x"})),
            Err(Refusal::Drop(_))
        ));
        for bad in [
            json!({"jid": "1", "tempTopic": "t"}),
            json!({"jid": "1", "tempTopic": "t", "fun": 5}),
            json!({"jid": "1", "tempTopic": "t", "fun": "a.b", "arg": "x"}),
            json!({"jid": "1", "tempTopic": "t", "fun": "a.b", "tgt": 5}),
            json!({"jid": "1", "tempTopic": "t", "fun": "a.b", "timeout": -1}),
            // A timeout no clock can hold: refused, never a panic later.
            json!({"jid": "1", "tempTopic": "t", "fun": "a.b", "timeout": 1e300}),
            json!({"jid": "1", "tempTopic": "t", "fun": "a.b", "timeout": MAX_TIMEOUT_SECS * 2.0}),
        ] {
            match Job::from_value(bad.clone()) {
                Err(Refusal::Reject { reason, .. }) => assert_eq!(reason, "malformed"),
                other => panic!("{bad}: {other:?}"),
            }
        }
    }

    /// The fast path takes the messages it should, and on every message it
    /// takes it decides exactly as the general path does.
    #[test]
    fn the_fast_path_agrees_with_the_general_one() {
        let taken = [
            r#"{"jid":"1","tempTopic":"t","fun":"test.ping","arg":[],"tgt":"*"}"#,
            r#"{"jid":"1","tempTopic":"t","fun":"test.arg","arg":["a",{"__kwarg__":true,"x":1}],"kwargs":{"y":2},"expr_form":"list","tgt":["m1"],"extra":{"n":[1,2]}}"#,
            r#"{"jid":"1","tempTopic":"t","fun":"cmd.run","arg":["ls"],"kwarg":null,"timeout":2,"user":"root","issued_at":5,"out":"json","tgt_type":"pcre","tgt":"w.*"}"#,
            r#" {"fun":"a.b","tempTopic":"t","jid":"9","timeout":0.5} "#,
            // Decoded, then refused as malformed: the same refusal both ways.
            r#"{"jid":"1","tempTopic":"t","fun":""}"#,
            r#"{"jid":"1","tempTopic":"t","fun":"a.b","tgt":5}"#,
            r#"{"jid":"1","tempTopic":"t","fun":"a.b","timeout":-1}"#,
        ];
        let left = [
            "not json",
            "[1]",
            r#"{"jid":"1","fun":"x"}"#,
            r#"{"jid":"","tempTopic":"t","fun":"x"}"#,
            r#"{"jid":1,"tempTopic":"t","fun":"x"}"#,
            r#"{"jid":"1","tempTopic":"t","fun":5}"#,
            r#"{"jid":"1","tempTopic":"t","fun":"a.b","arg":"x"}"#,
            r#"{"jid":"1","tempTopic":"t","fun":"a.b","fun":"c.d"}"#,
            r#"{"jid":"1","tempTopic":"t","fun":"a.b","payload":null}"#,
            r#"{"payload":"{}","sig":"x"}"#,
            r#"{"jid":"1","tempTopic":"t","fun":"a.b"} x"#,
        ];
        let general = |m: &str| {
            serde_json::from_str::<Value>(m)
                .map_err(|e| Refusal::Drop(e.to_string()))
                .and_then(Job::from_value)
        };
        for m in taken {
            let fast = Job::from_slice(m.as_bytes()).unwrap_or_else(|| panic!("not taken: {m}"));
            assert_eq!(fast, general(m), "{m}");
        }
        for m in left {
            assert!(Job::from_slice(m.as_bytes()).is_none(), "taken: {m}");
        }
    }

    #[test]
    fn reply_shapes() {
        let ping = Reply::Ping(Ping {
            sub_ip: "m".into(),
            jid: "1".into(),
            matched: true,
            minions: None,
        });
        assert_eq!(
            ping.to_json(),
            r#"{"type":"ping","sub_ip":"m","jid":"1","match":true}"#
        );
        let back: Reply = serde_json::from_str(&ping.to_json()).unwrap();
        assert_eq!(back, ping);
        // A syndic maid's PING lists the minions beneath it.
        let syndic = r#"{"type":"ping","sub_ip":"s","jid":"1","match":true,"minions":["a","b"]}"#;
        let back: Reply = serde_json::from_str(syndic).unwrap();
        assert_eq!(back.to_json(), syndic);
    }
}
