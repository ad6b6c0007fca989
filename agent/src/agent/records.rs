//! The audit trail of the agent, in one place: every record a maid writes
//! about a job (refused, not targeted, ran, answered busy, relayed) and
//! about the plugins it loads at start and on reload. What it says of
//! each is defined here and nowhere else; [`crate::audit`] keeps the
//! records (the file, the queue, the noise rate). Plugins installed by
//! sync are recorded by the syncer ([`crate::sync`]), with their signer.

use std::collections::HashSet;
use std::path::PathBuf;

use serde::Serialize;

use super::Shared;
use crate::audit::{self, Decision, Record};
use crate::config::AuditArguments;
use crate::protocol::Job;
use crate::runtime::{Failure, Outcome};

/// SHA-256 (hex) of a job's `arg` and `kwarg` as the JSON array
/// `[arg, kwarg]` (object keys sorted): what a record keeps of them by
/// default. Anyone holding the arguments (the master's job cache) can
/// check a record against them; the record does not disclose them.
pub(crate) fn args_digest(arg: &impl Serialize, kwarg: &impl Serialize) -> String {
    crate::runtime::json_sha256(&(arg, kwarg))
}

/// The record of `job` (signed by `kid`) on maid `id`: what it asked, of
/// whom, for whom, and `decision`. `matched`: whether it targeted this
/// maid (`None`: its target could not be read). `arguments` says whether
/// the arguments are kept or only their digest.
pub(super) fn of_job(
    id: &str,
    job: &Job,
    kid: &Option<String>,
    matched: Option<bool>,
    decision: Decision,
    arguments: AuditArguments,
) -> Record {
    let mut rec = Record::new(id, &job.jid, decision);
    rec.fun = Some(job.fun.clone());
    rec.topic = job.topic.clone();
    rec.pillar_sha256 = job.pillar.get(id).cloned();
    rec.args_sha256 = Some(args_digest(&job.arg, &job.kwarg));
    if arguments == AuditArguments::Redacted {
        rec.args = job.arg.clone();
        rec.kwargs = audit::redact(&job.kwarg);
    }
    rec.user = job.user.clone();
    rec.signer = kid.clone();
    rec.tgt = Some(job.tgt.clone());
    rec.tgt_type = Some(job.tgt_type.clone());
    rec.matched = matched;
    rec
}

/// A message that is no job a maid answers: counted under `kind` and
/// logged within the noise rate; no record, since it names no job.
pub(super) fn dropped(shared: &Shared, kind: &str, why: &str) {
    if shared.audit.admit_noise(Decision::Rejected, Some(kind)) {
        tracing::warn!("dropped message: {why}");
    }
}

/// A refused message ([`super::admission`]'s record of it), within the
/// noise rate: logged and recorded with `reason: detail`. `false` past the
/// rate: then it is only counted, and nobody is answered.
pub(super) fn refused(shared: &Shared, mut rec: Record, reason: &str, detail: &str) -> bool {
    if !shared.audit.admit_noise(rec.decision, Some(reason)) {
        return false;
    }
    tracing::warn!(jid = %rec.jid, %reason, "refused job: {detail}");
    rec.reason = Some(format!("{reason}: {detail}"));
    shared.audit.record(rec);
    true
}

/// A job for other maids: noise, recorded within its rate.
pub(super) fn not_targeted(shared: &Shared, job: &Job, kid: &Option<String>) {
    shared.audit.noise_with(Decision::NotTargeted, || {
        of_job(
            &shared.id,
            job,
            kid,
            Some(false),
            Decision::NotTargeted,
            shared.config.audit.arguments,
        )
    });
}

/// A job that ran here (or was denied by the grants): the plugin's hash,
/// the capabilities it used, the directories it could write, how long it
/// took and its retcode.
pub(super) fn ran(shared: &Shared, job: &Job, kid: &Option<String>, outcome: &Outcome) {
    let decision = if outcome.failure == Some(Failure::Denied) {
        Decision::Denied
    } else {
        Decision::Ran
    };
    shared.audit.record_with(|| {
        let arguments = shared.config.audit.arguments;
        let mut rec = of_job(&shared.id, job, kid, Some(true), decision, arguments);
        rec.plugin_sha256 = outcome.plugin_sha256.clone();
        rec.capabilities = outcome.used.clone();
        if arguments == AuditArguments::Digest {
            for used in &mut rec.capabilities {
                used.keep_digests_only();
            }
        }
        rec.writable_dirs = shared.runtime.writable_dirs(&job.fun);
        rec.duration_ms = Some(outcome.duration.as_millis() as u64);
        rec.retcode = Some(outcome.retcode);
        if job.fun.starts_with("state.") {
            rec.states = audit::StateRecord::of_return(&outcome.ret);
            if arguments == AuditArguments::Digest {
                for state in rec.states.iter_mut().flatten() {
                    state.keep_digests_only();
                }
            }
        }
        rec
    });
}

/// A job answered `retcode` at once: the queue was full.
pub(super) fn busy(shared: &Shared, job: &Job, kid: &Option<String>, retcode: i32) {
    let mut rec = of_job(
        &shared.id,
        job,
        kid,
        Some(true),
        Decision::Rejected,
        shared.config.audit.arguments,
    );
    rec.reason = Some("busy".into());
    rec.retcode = Some(retcode);
    shared.audit.record(rec);
}

/// A job relayed to the maids beneath that it targets (`expected`).
pub(super) fn relayed(shared: &Shared, job: &Job, kid: &Option<String>, expected: &[String]) {
    let mut rec = of_job(
        &shared.id,
        job,
        kid,
        Some(true),
        Decision::Relayed,
        shared.config.audit.arguments,
    );
    rec.reason = Some(format!("to {}", expected.join(", ")));
    shared.audit.record(rec);
}

/// A plugin file that did not load on `source` (`reload`), and why.
pub(super) fn plugin_refused(shared: &Shared, module: &str, source: &str, why: String) {
    let mut rec = Record::plugin(&shared.id, "", Decision::PluginRefused, module, source);
    rec.reason = Some(why);
    shared.audit.record(rec);
}

/// Audit every locally installed plugin loaded since `before` (synced ones
/// are audited by the syncer, with their signer).
pub(super) fn plugins_loaded(shared: &Shared, before: &HashSet<(PathBuf, String)>, source: &str) {
    let synced = shared.sync.as_ref().map(|s| s.dir());
    for p in shared.runtime.plugins() {
        if before.contains(&(p.path.clone(), p.sha256.clone()))
            || synced.is_some_and(|d| p.path.starts_with(d))
        {
            continue;
        }
        let mut rec = Record::plugin(
            &shared.id,
            "",
            Decision::PluginLoaded,
            &p.manifest.module,
            source,
        );
        rec.plugin_sha256 = Some(p.sha256.clone());
        shared.audit.record(rec);
    }
}
