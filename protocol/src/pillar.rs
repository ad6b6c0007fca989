//! Pillar sealed to one maid (PROTOCOL §8).
//!
//! The master seals a minion's pillar — a JSON object — to that maid's
//! accepted Ed25519 key, converted to X25519 as libsodium's
//! `crypto_sign_ed25519_pk_to_curve25519` converts it, in a libsodium
//! sealed box (`crypto_box_seal`: an ephemeral X25519 key,
//! XSalsa20-Poly1305). Only the holder of the maid's private key opens it:
//! a Redis reader, another maid or a syndic relaying it learns nothing.
//!
//! The sealed bytes travel in a [`PillarRecord`] a trusted master key
//! signs, stored under [`record_key`]; the signed job pins the record's
//! `sha256`, so a Redis writer can neither swap a minion's pillar nor roll
//! it back to an older one.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use crypto_box::aead::OsRng;
use ed25519_dalek::{SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::trust::{self, Envelope, SignatureError, Verifier};

/// `kind` of a [`PillarRecord`]: what the master's signature is about, so
/// a signature over anything else (a job, a file record) never reads as
/// one.
pub const RECORD_KIND: &str = "pillar";

/// `maid:pillar:<id>`: where the master stores `id`'s signed record.
pub fn record_key(id: &str) -> String {
    format!("maid:pillar:{id}")
}

/// `maid:pillar-pinned:<sha256>:<id>`: the same record kept under its
/// own hash for a while, so that two jobs published close together, each
/// pinning the record it stored, both find theirs although
/// [`record_key`] holds only the later one.
pub fn pinned_key(id: &str, sha256: &str) -> String {
    format!("maid:pillar-pinned:{sha256}:{id}")
}

/// Why pillar could not be sealed, opened or believed.
#[derive(Debug, thiserror::Error)]
pub enum PillarError {
    #[error("pillar could not be sealed")]
    Seal,
    #[error("the sealed pillar does not open with this maid's key (sealed to another, or altered)")]
    Open,
    #[error("the opened pillar is not a JSON object (or not JSON)")]
    NotObject,
    #[error("the pillar record is not an envelope: {0}")]
    NotEnvelope(serde_json::Error),
    #[error("the pillar record: {0}")]
    Signature(#[from] SignatureError),
    #[error("the pillar record's payload is not a record: {0}")]
    NotRecord(serde_json::Error),
    #[error("the signed record is a {0:?}, not pillar")]
    Kind(String),
    #[error("the pillar record is for {0:?}")]
    Id(String),
    #[error("the pillar record holds {held}, the job pins {pinned}")]
    NotPinned { held: String, pinned: String },
    #[error("the pillar record's sealed bytes are not what its sha256 names")]
    Sealed,
}

/// The X25519 public key of a maid's Ed25519 key (libsodium's
/// `crypto_sign_ed25519_pk_to_curve25519`).
pub fn x25519_public(key: &VerifyingKey) -> crypto_box::PublicKey {
    crypto_box::PublicKey::from(key.to_montgomery().to_bytes())
}

/// The X25519 secret key of a maid's Ed25519 key (libsodium's
/// `crypto_sign_ed25519_sk_to_curve25519`: the first half of SHA-512 of
/// the seed, clamped).
pub fn x25519_secret(key: &SigningKey) -> crypto_box::SecretKey {
    crypto_box::SecretKey::from(key.to_scalar_bytes())
}

/// `pillar` sealed to the maid whose accepted key is `maid_key`.
pub fn seal(pillar: &Map<String, Value>, maid_key: &VerifyingKey) -> Result<Vec<u8>, PillarError> {
    seal_value(&Value::Object(pillar.clone()), maid_key)
}

/// Any JSON value sealed to the holder of `key`'s private half: the
/// pillar to a maid, and a return read from pillar back to the master
/// whose key signed the job.
pub fn seal_value(value: &Value, key: &VerifyingKey) -> Result<Vec<u8>, PillarError> {
    let json = serde_json::to_vec(value).expect("JSON serialises");
    x25519_public(key)
        .seal(&mut OsRng, &json)
        .map_err(|_| PillarError::Seal)
}

/// The JSON value in `sealed`, opened with `own` key.
pub fn open_value(sealed: &[u8], own: &SigningKey) -> Result<Value, PillarError> {
    let json = x25519_secret(own)
        .unseal(sealed)
        .map_err(|_| PillarError::Open)?;
    serde_json::from_slice(&json).map_err(|_| PillarError::NotObject)
}

/// The pillar in `sealed`, opened with this maid's own key.
pub fn open(sealed: &[u8], own: &SigningKey) -> Result<Map<String, Value>, PillarError> {
    match open_value(sealed, own)? {
        Value::Object(pillar) => Ok(pillar),
        _ => Err(PillarError::NotObject),
    }
}

/// Lower-case hex SHA-256 of sealed bytes: what a job pins.
pub fn sealed_sha256(sealed: &[u8]) -> String {
    hex::encode(Sha256::digest(sealed))
}

/// What a master signs: `id`'s pillar, sealed, at `issued_at`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PillarRecord {
    /// Always [`RECORD_KIND`].
    pub kind: String,
    /// The minion the pillar is for.
    pub id: String,
    /// Base64 of the sealed box.
    pub sealed: String,
    /// Hex SHA-256 of the sealed bytes.
    pub sha256: String,
    /// When the master compiled it, ms since the epoch.
    pub issued_at: i64,
}

impl PillarRecord {
    /// The record of `sealed` for `id`.
    pub fn new(id: &str, sealed: &[u8], issued_at: i64) -> Self {
        Self {
            kind: RECORD_KIND.into(),
            id: id.into(),
            sealed: B64.encode(sealed),
            sha256: sealed_sha256(sealed),
            issued_at,
        }
    }

    /// The record signed with the master's `key`, as stored.
    pub fn sign(&self, key: &SigningKey) -> Envelope {
        let payload = serde_json::to_string(self).expect("a pillar record serialises");
        trust::sign(payload, key)
    }

    /// The sealed bytes of `envelope` (JSON, as stored) when a key of
    /// `verifier` signed it, it is a pillar record for `id`, and it is the
    /// one the job pins (`pin`, the record's `sha256`); why not,
    /// otherwise.
    pub fn verify(
        verifier: &Verifier,
        envelope: &str,
        id: &str,
        pin: &str,
    ) -> Result<Vec<u8>, PillarError> {
        let envelope: Envelope =
            serde_json::from_str(envelope).map_err(PillarError::NotEnvelope)?;
        verifier.signer(&envelope.payload, &envelope.sig, envelope.kid.as_deref())?;
        let record: Self =
            serde_json::from_str(&envelope.payload).map_err(PillarError::NotRecord)?;
        if record.kind != RECORD_KIND {
            return Err(PillarError::Kind(record.kind));
        }
        if record.id != id {
            return Err(PillarError::Id(record.id));
        }
        if !record.sha256.eq_ignore_ascii_case(pin) {
            return Err(PillarError::NotPinned {
                held: record.sha256,
                pinned: pin.to_string(),
            });
        }
        let sealed = B64
            .decode(&record.sealed)
            .map_err(|_| PillarError::Sealed)?;
        if sealed_sha256(&sealed) != record.sha256.to_ascii_lowercase() {
            return Err(PillarError::Sealed);
        }
        Ok(sealed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key() -> SigningKey {
        trust::generate().unwrap()
    }

    fn pillar() -> Map<String, Value> {
        json!({"db": {"password": "s3cret"}, "roles": ["web"]})
            .as_object()
            .unwrap()
            .clone()
    }

    fn verifier(master: &SigningKey) -> Verifier {
        let pk = master.verifying_key();
        Verifier {
            keys: vec![(trust::key_id(&pk), pk)],
            require_signed: true,
            max_skew_ms: 0,
        }
    }

    #[test]
    fn only_the_maid_it_is_sealed_to_opens_it() {
        let (web1, web2) = (key(), key());
        let sealed = seal(&pillar(), &web1.verifying_key()).unwrap();
        // Nothing of the pillar in the sealed bytes.
        assert!(!String::from_utf8_lossy(&sealed).contains("s3cret"));
        assert_eq!(open(&sealed, &web1).unwrap(), pillar());
        assert!(matches!(open(&sealed, &web2), Err(PillarError::Open)));
        // One bit changed anywhere, and it does not open.
        for i in [0, 31, 32, 47, sealed.len() - 1] {
            let mut altered = sealed.clone();
            altered[i] ^= 1;
            assert!(
                matches!(open(&altered, &web1), Err(PillarError::Open)),
                "{i}"
            );
        }
        assert!(matches!(open(&sealed[..40], &web1), Err(PillarError::Open)));
        // Each seal is fresh: two seals of the same pillar differ.
        assert_ne!(sealed, seal(&pillar(), &web1.verifying_key()).unwrap());
    }

    #[test]
    fn a_record_is_believed_only_as_signed_for_its_minion_and_pinned() {
        let (master, web1) = (key(), key());
        let v = verifier(&master);
        let sealed = seal(&pillar(), &web1.verifying_key()).unwrap();
        let record = PillarRecord::new("web-1", &sealed, 1);
        let pin = record.sha256.clone();
        let text = |e: &Envelope| serde_json::to_string(e).unwrap();
        let signed = text(&record.sign(&master));
        assert_eq!(
            PillarRecord::verify(&v, &signed, "web-1", &pin).unwrap(),
            sealed
        );
        // Another minion's record, a stranger's signature, a rollback.
        assert!(matches!(
            PillarRecord::verify(&v, &signed, "web-2", &pin),
            Err(PillarError::Id(id)) if id == "web-1"
        ));
        assert!(matches!(
            PillarRecord::verify(&v, &text(&record.sign(&key())), "web-1", &pin),
            Err(PillarError::Signature(_))
        ));
        let older = PillarRecord::new("web-1", &seal(&pillar(), &web1.verifying_key()).unwrap(), 0);
        assert!(matches!(
            PillarRecord::verify(&v, &text(&older.sign(&master)), "web-1", &pin),
            Err(PillarError::NotPinned { .. })
        ));
        // Sealed bytes swapped under a genuine hash: the payload changed,
        // so the signature no longer holds; a record whose own hash lies
        // is refused even when signed.
        let mut forged = record.sign(&master);
        forged.payload = forged
            .payload
            .replace(&record.sealed, &B64.encode(b"other"));
        assert!(matches!(
            PillarRecord::verify(&v, &text(&forged), "web-1", &pin),
            Err(PillarError::Signature(_))
        ));
        let mut lying = record.clone();
        lying.sealed = B64.encode(b"other");
        assert!(matches!(
            PillarRecord::verify(&v, &text(&lying.sign(&master)), "web-1", &pin),
            Err(PillarError::Sealed)
        ));
        // Something else the master signed is no pillar record.
        let job = trust::sign(
            json!({"kind": "salt-file", "id": "web-1", "sealed": record.sealed,
                   "sha256": pin, "issued_at": 1})
            .to_string(),
            &master,
        );
        assert!(matches!(
            PillarRecord::verify(&v, &text(&job), "web-1", &pin),
            Err(PillarError::Kind(k)) if k == "salt-file"
        ));
        assert!(matches!(
            PillarRecord::verify(&v, "not json", "web-1", &pin),
            Err(PillarError::NotEnvelope(_))
        ));
        assert_eq!(record_key("web-1"), "maid:pillar:web-1");
    }
}
