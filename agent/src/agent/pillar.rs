//! A job's pillar (PROTOCOL §8): the record the signed job pins for this
//! maid, verified against the trusted master keys and opened with this
//! maid's own key; or the job's own pillar, sealed in the job. Nothing
//! of it is written to disk or logged; it lives in the job's call.

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use ed25519_dalek::VerifyingKey;
use redis::AsyncCommands;
use serde_json::{Map, Value};

use super::Shared;
use crate::filestore::ConnSource;
use crate::protocol::Job;
use maid_protocol::pillar::{self, PillarError, PillarRecord};

/// Why a job that carries pillar for this maid cannot have it.
#[derive(Debug, thiserror::Error)]
pub enum Unavailable {
    #[error("this maid has no key of its own (no state_dir): it receives no pillar")]
    NoKey,
    #[error("pillar travels only in signed jobs")]
    Unsigned,
    #[error("the job's inline pillar is not base64")]
    NotBase64,
    #[error("Redis is unavailable")]
    NoRedis,
    #[error("reading the pillar record: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("no pillar record is stored for this maid")]
    Missing,
    #[error(transparent)]
    Refused(#[from] PillarError),
}

/// A job's pillar, opened, and the master key that signed the job: what
/// the job returns is sealed to it.
pub(super) struct Opened {
    pub pillar: Arc<Map<String, Value>>,
    pub master: VerifyingKey,
}

/// The pillar `job` (signed with trusted key `kid`) carries for this
/// maid: `None` when it carries none.
pub(super) async fn for_job(
    shared: &Shared,
    job: &Job,
    kid: &Option<String>,
) -> Result<Option<Opened>, Unavailable> {
    let id = shared.id.as_str();
    let inline = job.pillar_inline.get(id);
    let pin = job.pillar.get(id);
    if inline.is_none() && pin.is_none() {
        return Ok(None);
    }
    let master = kid
        .as_ref()
        .and_then(|kid| shared.verifier.keys.iter().find(|(k, _)| k == kid))
        .map(|(_, key)| *key)
        .ok_or(Unavailable::Unsigned)?;
    let key = shared.identity.as_ref().ok_or(Unavailable::NoKey)?;
    let opened = |pillar| {
        Some(Opened {
            pillar: Arc::new(pillar),
            master,
        })
    };
    if let Some(inline) = inline {
        let sealed = B64.decode(inline).map_err(|_| Unavailable::NotBase64)?;
        return Ok(opened(pillar::open(&sealed, key)?));
    }
    let pin = pin.expect("one of the two");
    let mut conn = shared.conn.conn().ok_or(Unavailable::NoRedis)?;
    let mut refused = None;
    for at in [pillar::record_key(id), pillar::pinned_key(id, pin)] {
        let Some(text): Option<String> = conn.get(&at).await? else {
            continue;
        };
        match PillarRecord::verify(&shared.verifier, &text, id, pin) {
            Ok(sealed) => return Ok(opened(pillar::open(&sealed, key)?)),
            // A later job's record took the key: the pinned copy is next.
            Err(e) => refused = Some(e),
        }
    }
    Err(refused.map_or(Unavailable::Missing, Unavailable::Refused))
}
