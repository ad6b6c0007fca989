//! Signed jobs (PROTOCOL §6): Ed25519 keys, the envelope a master signs,
//! and the checks a maid makes before it considers a job at all.
//!
//! This closes the original design's hole — anyone who could PUBLISH could
//! run anything — and the Salt advisories of the same kind: a publish
//! without a valid signature from a trusted master key (CVE-2020-11651) or
//! a replayed one (CVE-2022-22935/22936) is rejected and nothing runs.

use std::path::{Path, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier as _, VerifyingKey};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::protocol::{Refusal, reply_address};

/// Why a key could not be used.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("{path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{0}: not a base64 Ed25519 key of 32 bytes")]
    Format(String),
    #[error("no randomness available: {0}")]
    Random(String),
}

/// `kid`: the first 16 hex digits of SHA-256 over the raw public key.
pub fn key_id(key: &VerifyingKey) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))[..16].to_string()
}

fn decode32(text: &str, what: &str) -> Result<[u8; 32], KeyError> {
    let bytes = B64
        .decode(text.trim())
        .map_err(|_| KeyError::Format(what.into()))?;
    bytes.try_into().map_err(|_| KeyError::Format(what.into()))
}

/// A new signing key from the operating system's randomness.
pub fn generate() -> Result<SigningKey, KeyError> {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|e| KeyError::Random(e.to_string()))?;
    Ok(SigningKey::from_bytes(&seed))
}

/// The base64 text of a private key file (its 32-byte seed).
pub fn encode_signing(key: &SigningKey) -> String {
    B64.encode(key.to_bytes())
}

/// The base64 text of a public key file.
pub fn encode_verifying(key: &VerifyingKey) -> String {
    B64.encode(key.as_bytes())
}

fn read(path: &Path) -> Result<String, KeyError> {
    std::fs::read_to_string(path).map_err(|error| KeyError::Io {
        path: path.to_path_buf(),
        error,
    })
}

/// Read a private key file written by `maid keygen`.
pub fn read_signing_key(path: &Path) -> Result<SigningKey, KeyError> {
    let seed = decode32(&read(path)?, &path.display().to_string())?;
    Ok(SigningKey::from_bytes(&seed))
}

/// A public key from its base64 text alone (never a path): what a
/// registry entry or a key file holds.
pub fn decode_verifying_key(text: &str) -> Result<VerifyingKey, KeyError> {
    verifying(text, "public key")
}

/// The public key in base64 `text`; `what` names it in an error.
fn verifying(text: &str, what: &str) -> Result<VerifyingKey, KeyError> {
    let raw = decode32(text, what)?;
    VerifyingKey::from_bytes(&raw).map_err(|_| KeyError::Format(what.into()))
}

/// A trusted public key: a file path, or the base64 key itself.
pub fn read_verifying_key(spec: &str) -> Result<VerifyingKey, KeyError> {
    let path = Path::new(spec);
    // Base64 may begin with `/`: an absolute "path" that does not exist but
    // decodes as a key is the key.
    let inline = !path.exists() && (!path.is_absolute() || decode32(spec, spec).is_ok());
    let text = if inline {
        spec.to_string()
    } else {
        read(path)?
    };
    verifying(&text, spec)
}

/// The trusted keys `specs` names (files or base64 keys, as
/// [`read_verifying_key`] takes them), each with its `kid`.
pub fn read_trusted_keys(specs: &[String]) -> Result<Vec<(String, VerifyingKey)>, KeyError> {
    specs
        .iter()
        .map(|spec| read_verifying_key(spec).map(|k| (key_id(&k), k)))
        .collect()
}

/// A signed job on the wire.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Envelope {
    /// The job object, serialised.
    pub payload: String,
    /// Base64 Ed25519 signature over the payload's UTF-8 bytes.
    pub sig: String,
    /// Which key signed it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kid: Option<String>,
}

/// Sign a serialised job.
pub fn sign(payload: String, key: &SigningKey) -> Envelope {
    let sig = key.sign(payload.as_bytes());
    Envelope {
        payload,
        sig: B64.encode(sig.to_bytes()),
        kid: Some(key_id(&key.verifying_key())),
    }
}

/// What a maid trusts.
#[derive(Debug, Clone)]
pub struct Verifier {
    /// Trusted master keys with their ids.
    pub keys: Vec<(String, VerifyingKey)>,
    /// Refuse unsigned jobs.
    pub require_signed: bool,
    /// Accepted distance of `issued_at` from this maid's clock, in ms.
    pub max_skew_ms: i64,
}

/// A job that passed the checks.
#[derive(Debug, Clone)]
pub struct Opened {
    /// The job object.
    pub job: Value,
    /// The signer's key id, for signed jobs.
    pub kid: Option<String>,
}

impl Verifier {
    /// Check a message that arrived on the master topic `topic`. `now_ms`
    /// is this maid's clock (Unix ms).
    pub fn open(&self, msg: Value, topic: &str, now_ms: i64) -> Result<Opened, Refusal> {
        let Some(payload) = msg.get("payload") else {
            if self.require_signed {
                let (temp_topic, jid) = reply_address(&msg)?;
                return Err(Refusal::Reject {
                    temp_topic,
                    jid,
                    reason: "unsigned".into(),
                    detail: "this maid requires signed jobs".into(),
                });
            }
            return Ok(Opened {
                job: msg,
                kid: None,
            });
        };
        let Some(payload) = payload.as_str() else {
            return Err(Refusal::Drop("envelope payload is not a string".into()));
        };
        let job: Value = serde_json::from_str(payload)
            .map_err(|e| Refusal::Drop(format!("envelope payload is not JSON: {e}")))?;
        let (temp_topic, jid) = reply_address(&job)?;
        let reject = |reason: &str, detail: String| Refusal::Reject {
            temp_topic: temp_topic.clone(),
            jid: jid.clone(),
            reason: reason.into(),
            detail,
        };
        let sig = msg.get("sig").and_then(Value::as_str).unwrap_or_default();
        let kid = msg.get("kid").and_then(Value::as_str);
        let signer = self.signer(payload, sig, kid).map_err(|e| match e {
            SignatureError::Malformed => reject(
                "bad signature",
                "sig is not a base64 Ed25519 signature".into(),
            ),
            SignatureError::UnknownKey => {
                reject("unknown key", "no trusted key matches the job's kid".into())
            }
            SignatureError::BadSignature => {
                reject("bad signature", "the signature does not verify".into())
            }
        })?;
        // The signature covers the topic, so a job signed for one master
        // topic cannot be replayed onto another that this maid also hears.
        match job.get("topic").and_then(Value::as_str) {
            Some(t) if t == topic => {}
            Some(t) => {
                return Err(reject(
                    "wrong topic",
                    format!("the job was signed for topic {t:?}, not {topic:?}"),
                ));
            }
            None => {
                return Err(reject(
                    "malformed",
                    "a signed job needs topic, the master topic it is published on".into(),
                ));
            }
        }
        let issued_at = job
            .get("issued_at")
            .and_then(Value::as_i64)
            .ok_or_else(|| reject("malformed", "a signed job needs issued_at (Unix ms)".into()))?;
        // Checked: near i64's ends the difference overflows, and such a
        // job is as stale as any.
        let skew = now_ms.checked_sub(issued_at);
        if skew
            .and_then(i64::checked_abs)
            .is_none_or(|d| d > self.max_skew_ms)
        {
            return Err(reject(
                "expired",
                match skew {
                    Some(ms) => format!("issued_at is {ms} ms from this maid's clock"),
                    None => "issued_at is out of any clock's range".into(),
                },
            ));
        }
        Ok(Opened {
            job,
            kid: Some(signer),
        })
    }

    /// The id of the trusted key whose Ed25519 signature over `payload` is
    /// `sig` (base64). With a `kid`, only that key is tried. Shared by jobs
    /// and by plugins pushed to the fleet, so both trust the same keys in
    /// the same way.
    pub fn signer(
        &self,
        payload: &str,
        sig: &str,
        kid: Option<&str>,
    ) -> Result<String, SignatureError> {
        let sig = decode_signature(sig)?;
        let candidates: Vec<&(String, VerifyingKey)> = match kid {
            Some(kid) => self.keys.iter().filter(|(k, _)| k == kid).collect(),
            None => self.keys.iter().collect(),
        };
        if candidates.is_empty() {
            return Err(SignatureError::UnknownKey);
        }
        candidates
            .iter()
            .find(|(_, key)| key.verify(payload.as_bytes(), &sig).is_ok())
            .map(|(k, _)| k.clone())
            .ok_or(SignatureError::BadSignature)
    }
}

/// The Ed25519 signature in base64 `sig`, as envelopes carry it.
pub fn decode_signature(sig: &str) -> Result<Signature, SignatureError> {
    B64.decode(sig)
        .ok()
        .and_then(|b| Signature::from_slice(&b).ok())
        .ok_or(SignatureError::Malformed)
}

/// Why a signature was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("the signature is not a base64 Ed25519 signature")]
    Malformed,
    #[error("no trusted key matches the signer's kid")]
    UnknownKey,
    #[error("the signature does not verify with any trusted key")]
    BadSignature,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn verifier(key: &SigningKey) -> Verifier {
        let pk = key.verifying_key();
        Verifier {
            keys: vec![(key_id(&pk), pk)],
            require_signed: true,
            max_skew_ms: 300_000,
        }
    }

    const TOPIC: &str = "master-1";

    fn job(issued_at: i64) -> String {
        json!({"jid": "1", "tempTopic": "t", "fun": "test.ping", "issued_at": issued_at,
               "topic": TOPIC})
        .to_string()
    }

    fn reason(r: Result<Opened, Refusal>) -> String {
        match r {
            Err(Refusal::Reject { reason, .. }) => reason,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn keys_round_trip_through_their_text() {
        let key = generate().unwrap();
        let back = SigningKey::from_bytes(&decode32(&encode_signing(&key), "k").unwrap());
        assert_eq!(back.to_bytes(), key.to_bytes());
        let pk = read_verifying_key(&encode_verifying(&key.verifying_key())).unwrap();
        assert_eq!(pk, key.verifying_key());
        assert_eq!(key_id(&pk).len(), 16);
        // One key in 64 encodes with a leading `/`, like an absolute path.
        let slash = std::iter::repeat_with(|| generate().unwrap())
            .map(|k| encode_verifying(&k.verifying_key()))
            .find(|text| text.starts_with('/'))
            .unwrap();
        assert!(read_verifying_key(&slash).is_ok(), "{slash}");
        assert!(read_verifying_key("/nonexistent/master.pub").is_err());
    }

    #[test]
    fn signed_jobs_open_and_attacks_are_named() {
        let key = generate().unwrap();
        let v = verifier(&key);
        let now = 1_800_000_000_000;
        let env = serde_json::to_value(sign(job(now), &key)).unwrap();
        let opened = v.open(env.clone(), TOPIC, now).unwrap();
        assert_eq!(opened.kid, Some(key_id(&key.verifying_key())));
        assert_eq!(opened.job["fun"], "test.ping");

        // Unsigned.
        assert_eq!(
            reason(v.open(serde_json::from_str(&job(now)).unwrap(), TOPIC, now)),
            "unsigned"
        );
        // Tampered payload.
        let mut bad = env.clone();
        bad["payload"] = json!(job(now).replace("test.ping", "cmd.run"));
        assert_eq!(reason(v.open(bad, TOPIC, now)), "bad signature");
        // Signed by a key nobody trusts.
        let other = generate().unwrap();
        let env2 = serde_json::to_value(sign(job(now), &other)).unwrap();
        assert_eq!(reason(v.open(env2.clone(), TOPIC, now)), "unknown key");
        let mut nokid = env2;
        nokid.as_object_mut().unwrap().remove("kid");
        assert_eq!(reason(v.open(nokid, TOPIC, now)), "bad signature");
        // Too old, and from the future.
        let old = serde_json::to_value(sign(job(now - 301_000), &key)).unwrap();
        assert_eq!(reason(v.open(old, TOPIC, now)), "expired");
        let future = serde_json::to_value(sign(job(now + 301_000), &key)).unwrap();
        assert_eq!(reason(v.open(future, TOPIC, now)), "expired");
        // Published on another topic than it was signed for, or signed
        // without one.
        assert_eq!(reason(v.open(env.clone(), "master-2", now)), "wrong topic");
        let untopical =
            json!({"jid": "1", "tempTopic": "t", "fun": "test.ping", "issued_at": now}).to_string();
        let env3 = serde_json::to_value(sign(untopical, &key)).unwrap();
        assert_eq!(reason(v.open(env3, TOPIC, now)), "malformed");
        // issued_at at i64's ends: the difference overflows, and the job
        // is expired, never fresh.
        for extreme in [i64::MIN, i64::MIN + 1, i64::MAX] {
            let far = serde_json::to_value(sign(job(extreme), &key)).unwrap();
            assert_eq!(reason(v.open(far, TOPIC, now)), "expired", "{extreme}");
        }
        for (issued, clock) in [(i64::MAX, i64::MIN), (i64::MIN, i64::MAX), (i64::MIN, 0)] {
            let far = serde_json::to_value(sign(job(issued), &key)).unwrap();
            assert_eq!(
                reason(v.open(far, TOPIC, clock)),
                "expired",
                "{issued} at {clock}"
            );
        }
        // Garbage signature.
        let mut garbage = env;
        garbage["sig"] = json!("!!");
        assert_eq!(reason(v.open(garbage, TOPIC, now)), "bad signature");
    }
}
