//! What a maid writes about itself (PROTOCOL v1.2 §4, §7): its registration
//! in `maid:registry`, and a syndic maid's list of the minions beneath it at
//! `maid:syndic:<id>`. A maid with a key of its own writes each as an
//! envelope signed with that key (the §3.4 form), so a Redis writer —
//! every maid holds a credential that can write these keys — can neither
//! forge another maid's grains nor add minions to its list. A master that
//! keeps keys uses a value only when the key it accepted for that maid
//! signed it.

use ed25519_dalek::{SigningKey, Verifier as _, VerifyingKey};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::protocol::Registration;
use crate::trust::{Envelope, KeyError, decode_signature, decode_verifying_key, key_id, sign};

/// Why a registry value or a reply does not read.
#[derive(Debug, thiserror::Error)]
pub enum Unreadable {
    #[error("not JSON: {0}")]
    NotJson(serde_json::Error),
    #[error("not an envelope: {0}")]
    NotEnvelope(serde_json::Error),
    #[error("the envelope holds nothing of the kind: {0}")]
    Empty(serde_json::Error),
    #[error("{0}")]
    NotOfTheKind(serde_json::Error),
}

/// Why a value is not signed by the key accepted for its owner: it is
/// forged. Each names that owner.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Forged {
    #[error("{0:?} has no accepted key")]
    NoAcceptedKey(String),
    #[error("unsigned, and {0:?} has an accepted key")]
    Unsigned(String),
    #[error("signed by another key than {0:?}'s")]
    OtherKey(String),
    #[error("{0}")]
    BadSignature(String),
    #[error("the signature does not verify with {0:?}'s key")]
    DoesNotVerify(String),
}

/// Why a registration presents no key a master may file for its id.
#[derive(Debug, thiserror::Error)]
pub enum NoKey {
    #[error("registered under {under:?} as {claimed:?}")]
    OtherId { under: String, claimed: String },
    #[error("{0:?} presents no key")]
    None(String),
    #[error(transparent)]
    Unreadable(#[from] KeyError),
    #[error(transparent)]
    Forged(#[from] Forged),
}

/// A registry value as read: what it says, and the envelope it came in
/// when it was signed.
#[derive(Debug, Clone)]
pub struct Signed<T> {
    pub value: T,
    pub envelope: Option<Envelope>,
}

/// Write `value` as a maid with `key` writes it: sealed in an envelope
/// signed with that key, or bare (v1.1) when the maid has no key.
pub fn write<T: Serialize>(value: &T, key: Option<&SigningKey>) -> String {
    let json = serde_json::to_string(value).expect("registry values serialise");
    match key {
        Some(key) => serde_json::to_string(&sign(json, key)).expect("envelopes serialise"),
        None => json,
    }
}

/// Read a registry value, bare or sealed. `Err` says why it does not read.
pub fn read<T: DeserializeOwned>(text: &str) -> Result<Signed<T>, Unreadable> {
    let value: Value = serde_json::from_str(text).map_err(Unreadable::NotJson)?;
    if value.get("payload").is_some() && value.get("sig").is_some() {
        let envelope: Envelope = serde_json::from_value(value).map_err(Unreadable::NotEnvelope)?;
        let value = serde_json::from_str(&envelope.payload).map_err(Unreadable::Empty)?;
        return Ok(Signed {
            value,
            envelope: Some(envelope),
        });
    }
    Ok(Signed {
        value: serde_json::from_value(value).map_err(Unreadable::NotOfTheKind)?,
        envelope: None,
    })
}

/// `Ok` when `key` signed `envelope`; why not otherwise (`who` names the
/// key's owner in the answer).
pub fn verify_envelope(
    envelope: Option<&Envelope>,
    key: &VerifyingKey,
    who: &str,
) -> Result<(), Forged> {
    let Some(envelope) = envelope else {
        return Err(Forged::Unsigned(who.to_string()));
    };
    if envelope
        .kid
        .as_deref()
        .is_some_and(|kid| kid != key_id(key))
    {
        return Err(Forged::OtherKey(who.to_string()));
    }
    let sig = decode_signature(&envelope.sig).map_err(|e| Forged::BadSignature(e.to_string()))?;
    key.verify(envelope.payload.as_bytes(), &sig)
        .map_err(|_| Forged::DoesNotVerify(who.to_string()))
}

impl<T> Signed<T> {
    /// `Ok` when `key`, the key accepted for `who`, signed this value.
    pub fn verify(&self, key: &VerifyingKey, who: &str) -> Result<(), Forged> {
        verify_envelope(self.envelope.as_ref(), key, who)
    }
}

impl Signed<Registration> {
    /// The key this registration presents, when the registration is
    /// signed with it: proof that whoever wrote it holds that key, which
    /// is what a master files as the id's submission (a bare entry, or
    /// one signed with another key, presents nothing).
    pub fn presented_key(&self, id: &str) -> Result<(VerifyingKey, &str), NoKey> {
        if self.value.id != id {
            return Err(NoKey::OtherId {
                under: id.to_string(),
                claimed: self.value.id.clone(),
            });
        }
        let text = self
            .value
            .pubkey
            .as_deref()
            .ok_or_else(|| NoKey::None(id.to_string()))?;
        let key = decode_verifying_key(text)?;
        self.verify(&key, id)?;
        Ok((key, text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trust::{encode_verifying, generate};
    use serde_json::json;

    fn registration(id: &str, key: &SigningKey) -> Registration {
        serde_json::from_value(json!({
            "id": id, "version": "1", "master_topics": [], "functions": [],
            "grains": {"role": "web"}, "started_at": "x", "last_seen": "x",
            "pubkey": encode_verifying(&key.verifying_key())}))
        .unwrap()
    }

    #[test]
    fn a_registration_presents_its_key_only_when_signed_with_it() {
        let key = generate().unwrap();
        let other = generate().unwrap();
        let reg = registration("web1", &key);
        let signed: Signed<Registration> = read(&write(&reg, Some(&key))).unwrap();
        assert!(signed.presented_key("web1").is_ok());
        assert!(signed.verify(&key.verifying_key(), "web1").is_ok());
        assert!(signed.verify(&other.verifying_key(), "web1").is_err());
        // Under another id than it names.
        assert!(signed.presented_key("web2").is_err());
        // Bare: readable, presents nothing, verifies with no key.
        let bare: Signed<Registration> = read(&write(&reg, None)).unwrap();
        assert!(bare.presented_key("web1").is_err());
        assert!(bare.verify(&key.verifying_key(), "web1").is_err());
        // Signed by a key other than the one it names.
        let claimed: Signed<Registration> = read(&write(&reg, Some(&other))).unwrap();
        assert!(claimed.presented_key("web1").is_err());
        // Grains changed after signing.
        let mut env: Envelope = serde_json::from_str(&write(&reg, Some(&key))).unwrap();
        env.payload = env.payload.replace("\"web\"", "\"db\"");
        let changed: Signed<Registration> = read(&serde_json::to_string(&env).unwrap()).unwrap();
        assert!(changed.verify(&key.verifying_key(), "web1").is_err());
    }
}
