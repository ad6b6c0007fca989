//! Pillar delivered with a job (PROTOCOL §8): for each maid the job
//! selects whose key the master accepted, its pillar compiled from the
//! grains of its verified registration, sealed to that key, stored in a
//! record the master signs, and pinned by hash in the signed job. With
//! inline pillar (`pillar=`), the job's own pillar — compiled with the
//! inline data merged as Salt merges it — travels sealed in the job
//! instead, and the stored record is left as it was.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use ed25519_dalek::SigningKey;
use maid_protocol::pillar::{self as sealed, PillarRecord};
use serde_json::{Map, Value};

use super::{Request, Roots, Settings, compile_in};
use crate::bus::{BusError, Conn};
use crate::registry::Registry;

/// Whether a job running `fun` reads pillar: the master then delivers it.
pub fn reads_pillar(fun: &str) -> bool {
    fun.starts_with("state.") || fun.starts_with("pillar.") || fun == "saltutil.refresh_pillar"
}

/// What a job's pillar is compiled from, besides each maid's grains.
#[derive(Clone)]
pub struct Plan {
    /// The job's `saltenv=`.
    pub saltenv: Option<String>,
    /// The job's `pillarenv=`.
    pub pillarenv: Option<String>,
    /// The job's inline `pillar=`, taken out of its arguments.
    pub inline: Option<Map<String, Value>>,
}

impl std::fmt::Debug for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the inline pillar's values.
        f.debug_struct("Plan")
            .field("saltenv", &self.saltenv)
            .field("pillarenv", &self.pillarenv)
            .field("inline", &self.inline.as_ref().map(|_| "…"))
            .finish_non_exhaustive()
    }
}

impl Plan {
    /// The plan for a job running `fun` with `kwarg`, when it reads
    /// pillar and the master has `pillar_roots`: `kwarg` loses its inline
    /// `pillar` (a mapping), which must not cross Redis in plaintext.
    pub fn for_job(
        settings: Option<&Settings>,
        fun: &str,
        kwarg: &mut Map<String, Value>,
    ) -> Option<Self> {
        settings.filter(|s| !s.roots.is_empty())?;
        if !reads_pillar(fun) {
            return None;
        }
        let word = |k: &str| {
            kwarg
                .get(k)
                .filter(|v| maid_salt::python::truthy(v))
                .map(maid_salt::python::str)
        };
        let (saltenv, pillarenv) = (word("saltenv"), word("pillarenv"));
        let inline = match kwarg.get("pillar") {
            Some(Value::Object(_)) => match kwarg.remove("pillar") {
                Some(Value::Object(m)) => Some(m),
                _ => None,
            },
            _ => None,
        };
        Some(Self {
            saltenv,
            pillarenv,
            inline,
        })
    }
}

/// What a job carries of pillar: pins, and inline pillar, by id.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Delivered {
    pub pins: BTreeMap<String, String>,
    pub inline: BTreeMap<String, String>,
}

/// How long a record stays under its own hash ([`sealed::pinned_key`])
/// beyond the job's timeout, for a maid still queueing it.
const PINNED_FOR: Duration = Duration::from_secs(600);

/// Compile, seal and store the pillar of each of `ids` that has an
/// accepted key in `registry`, signed with `key`; the pins (or inline
/// pillar) the job is to carry. An id without an accepted key receives
/// no pillar (logged).
pub async fn deliver(
    conn: &mut Conn,
    settings: &Settings,
    plan: &Plan,
    key: &SigningKey,
    registry: &Registry,
    ids: &BTreeSet<String>,
    timeout: Duration,
) -> Result<Delivered, BusError> {
    let Some(accepted) = &registry.accepted else {
        tracing::warn!("pillar is delivered only by a master that keeps keys (pki_dir)");
        return Ok(Delivered::default());
    };
    let mut jobs = Vec::new();
    for id in ids {
        let Some(maid_key) = accepted.get(id) else {
            tracing::warn!(%id, "no accepted key: the maid receives no pillar");
            continue;
        };
        jobs.push((id.clone(), *maid_key, registry.grains(id)));
    }
    let (plan2, settings) = (plan.clone(), settings.clone());
    // A job that asks no environment and no inline pillar receives what
    // the registry's reading compiles (once per minion: a target that read
    // pillar compiled it already).
    let cache = registry
        .pillar
        .clone()
        .filter(|_| plan.saltenv.is_none() && plan.pillarenv.is_none() && plan.inline.is_none());
    // Rendering is CPU work over the operator's files: off the runtime.
    // The files are read once for the job's minions.
    let compiled = tokio::task::spawn_blocking(move || {
        let roots = std::sync::Arc::new(Roots::new(settings.roots.clone()));
        jobs.into_iter()
            .map(|(id, maid_key, grains)| {
                let sealed = match &cache {
                    Some(cache) => sealed::seal(&cache.get(&id, &grains), &maid_key),
                    None => {
                        let req = Request {
                            id: id.clone(),
                            grains,
                            saltenv: plan2.saltenv.clone(),
                            pillarenv: plan2.pillarenv.clone(),
                            pillar_override: plan2.inline.clone().unwrap_or_default(),
                        };
                        sealed::seal(&compile_in(&roots, &settings, &req), &maid_key)
                    }
                };
                (id, sealed)
            })
            .collect::<Vec<_>>()
    })
    .await
    .map_err(|e| BusError::Config(format!("compiling pillar: {e}")))?;
    let now = chrono::Utc::now().timestamp_millis();
    let ttl = (timeout + PINNED_FOR).as_secs();
    let mut out = Delivered::default();
    for (id, sealed_box) in compiled {
        let sealed_box = match sealed_box {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(%id, cause = %e, "pillar not sealed: the maid receives none");
                continue;
            }
        };
        if plan.inline.is_some() {
            out.inline.insert(id, B64.encode(&sealed_box));
            continue;
        }
        let record = PillarRecord::new(&id, &sealed_box, now);
        let envelope = serde_json::to_string(&record.sign(key)).expect("an envelope serialises");
        redis::pipe()
            .set(sealed::record_key(&id), &envelope)
            .set_ex(sealed::pinned_key(&id, &record.sha256), &envelope, ttl)
            .query_async::<()>(conn)
            .await?;
        out.pins.insert(id, record.sha256);
    }
    Ok(out)
}
