//! Replies as a master receives them (PROTOCOL §3.4): bare, as v1 sends
//! them, or sealed in an envelope signed with the maid's own key; and what
//! a master that holds accepted maid keys makes of each.
//!
//! A master that verifies counts a reply only when the key it accepted for
//! the reply's maid (`sub_ip`) signed it. Anything else — unsigned, signed
//! by another key, a maid it never accepted, a payload changed after
//! signing — is **forged**: reported, never counted as that maid's answer.

use std::collections::BTreeMap;

use ed25519_dalek::{SigningKey, VerifyingKey};
use serde_json::Value;

use crate::protocol::Reply;
use crate::registry::Forged;
use crate::trust::{Envelope, sign};

/// Why a message on a reply topic is no reply.
#[derive(Debug, thiserror::Error)]
pub enum NoReply {
    #[error("not JSON: {0}")]
    NotJson(serde_json::Error),
    #[error("not an envelope: {0}")]
    NotEnvelope(serde_json::Error),
    #[error("the envelope holds no reply: {0}")]
    Empty(serde_json::Error),
    #[error("not a reply: {0}")]
    NotReply(serde_json::Error),
}

/// A reply message as it arrived: the reply, and the envelope it came in
/// when it was signed.
#[derive(Debug, Clone)]
pub struct Received {
    pub reply: Reply,
    pub envelope: Option<Envelope>,
}

/// Read a reply message: an envelope (`payload` and `sig`) is unwrapped,
/// anything else is read as a bare v1 reply. `Err` says why it is no reply.
pub fn receive(bytes: &[u8]) -> Result<Received, NoReply> {
    let value: Value = serde_json::from_slice(bytes).map_err(NoReply::NotJson)?;
    if value.get("payload").is_some() && value.get("sig").is_some() {
        let envelope: Envelope = serde_json::from_value(value).map_err(NoReply::NotEnvelope)?;
        let reply = serde_json::from_str(&envelope.payload).map_err(NoReply::Empty)?;
        return Ok(Received {
            reply,
            envelope: Some(envelope),
        });
    }
    let reply = serde_json::from_value(value).map_err(NoReply::NotReply)?;
    Ok(Received {
        reply,
        envelope: None,
    })
}

/// `payload` (a serialised reply) sealed with the maid's `key`: the
/// envelope's JSON, which is what the maid publishes and caches.
pub fn seal(payload: String, key: &SigningKey) -> String {
    serde_json::to_string(&sign(payload, key)).expect("envelopes serialise")
}

/// The maid keys a master has accepted, by maid id.
pub type AcceptedKeys = BTreeMap<String, VerifyingKey>;

impl Received {
    /// The maid that sent it, as the reply names it.
    pub fn maid(&self) -> &str {
        match &self.reply {
            Reply::Ping(p) => &p.sub_ip,
            Reply::Return(r) => &r.sub_ip,
            Reply::Reject(r) => &r.sub_ip,
        }
    }

    /// `Ok` when the key accepted for the reply's maid signed it; why it is
    /// forged otherwise.
    pub fn verify(&self, accepted: &AcceptedKeys) -> Result<(), Forged> {
        let maid = self.maid();
        let Some(key) = accepted.get(maid) else {
            return Err(Forged::NoAcceptedKey(maid.to_string()));
        };
        crate::registry::verify_envelope(self.envelope.as_ref(), key, maid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trust::generate;
    use serde_json::json;

    fn ping(id: &str) -> String {
        json!({"type": "ping", "sub_ip": id, "jid": "1", "match": true}).to_string()
    }

    #[test]
    fn a_sealed_reply_verifies_only_with_its_maids_accepted_key() {
        let key = generate().unwrap();
        let other = generate().unwrap();
        let accepted = AcceptedKeys::from([
            ("m1".to_string(), key.verifying_key()),
            ("m2".to_string(), other.verifying_key()),
        ]);
        let sealed = seal(ping("m1"), &key);
        let got = receive(sealed.as_bytes()).unwrap();
        assert_eq!(got.maid(), "m1");
        assert_eq!(got.verify(&accepted), Ok(()));
        // Bare: readable, but forged where m1 has an accepted key.
        let bare = receive(ping("m1").as_bytes()).unwrap();
        assert!(bare.envelope.is_none());
        assert_eq!(bare.verify(&accepted), Err(Forged::Unsigned("m1".into())));
        // m2's key signing a reply that claims to be m1.
        let claimed = receive(seal(ping("m1"), &other).as_bytes()).unwrap();
        assert!(claimed.verify(&accepted).is_err());
        // The same without a kid: the signature itself fails.
        let mut env: Envelope = serde_json::from_str(&seal(ping("m1"), &other)).unwrap();
        env.kid = None;
        let no_kid = receive(serde_json::to_string(&env).unwrap().as_bytes()).unwrap();
        assert_eq!(
            no_kid.verify(&accepted),
            Err(Forged::DoesNotVerify("m1".into()))
        );
        // A payload changed after signing.
        let mut env: Envelope = serde_json::from_str(&sealed).unwrap();
        env.payload = env.payload.replace("true", "false");
        let changed = receive(serde_json::to_string(&env).unwrap().as_bytes()).unwrap();
        assert!(changed.verify(&accepted).is_err());
        // A maid nobody accepted.
        let stranger = receive(seal(ping("m3"), &key).as_bytes()).unwrap();
        assert_eq!(
            stranger.verify(&accepted),
            Err(Forged::NoAcceptedKey("m3".into()))
        );
    }

    #[test]
    fn what_is_no_reply_says_why() {
        let why = |bytes: &[u8]| receive(bytes).unwrap_err();
        assert!(matches!(why(b"{"), NoReply::NotJson(_)));
        assert!(matches!(why(b"{\"type\": \"nope\"}"), NoReply::NotReply(_)));
        let env = json!({"payload": "{}", "sig": "x"}).to_string();
        let empty = why(env.as_bytes());
        assert!(matches!(empty, NoReply::Empty(_)));
        assert!(
            empty
                .to_string()
                .starts_with("the envelope holds no reply: ")
        );
    }
}
