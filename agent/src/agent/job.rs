//! Running a job this maid took: a slot, the call (or the agent's own
//! `saltutil.sync_modules`), its audit record and metrics, and the return
//! to deliver — or, when the queue is full, the busy return at once.

use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;

use super::{BUSY_RETCODE, Shared, records};
use crate::outbox::Pending;
use crate::protocol::Job;
use crate::runtime::{CallRequest, Failure, JobData, Outcome, Teardown};
use crate::sync::{SYNC_ALL, SYNC_MODULES, Syncer};

/// Run one job that targets this maid; the return to deliver (`None` when
/// the agent is shutting down before the job got a slot).
pub(super) async fn run_job(
    shared: &Shared,
    job: &Job,
    kid: &Option<String>,
) -> Option<(Pending, Teardown)> {
    let _accepted = Accepted(&shared.pending);
    let Ok(_slot) = shared.slots.acquire().await else {
        return None;
    };
    // Listed for `saltutil.running`/`kill_job` while it runs.
    let mut listed = shared.runtime.jobs().start(job_data(job));
    let started = std::time::Instant::now();
    // A job that gave its function pillar returns sealed to its master.
    let mut seal_to = None;
    let (outcome, teardown) = match &shared.sync {
        // The agent's own functions are boxed: seldom run, they would make
        // every job's future larger.
        Some(sync) if job.fun == SYNC_MODULES || job.fun == SYNC_ALL => (
            Box::pin(sync_modules(shared, sync, job)).await,
            Teardown::default(),
        ),
        _ if job.fun == REFRESH_GRAINS => (
            Box::pin(refresh_grains(shared, job)).await,
            Teardown::default(),
        ),
        _ => match super::pillar::for_job(shared, job, kid).await {
            Err(why) => (no_pillar(job, &why, started), Teardown::default()),
            Ok(opened) => {
                let pillar = opened.map(|o| {
                    seal_to = Some(o.master);
                    o.pillar
                });
                let call = shared.runtime.call_deferred(CallRequest {
                    fun: job.fun.clone(),
                    args: job.arg.clone(),
                    kwargs: job.kwarg.clone(),
                    jid: job.jid.clone(),
                    minion_id: shared.id.clone(),
                    user: job.user.clone(),
                    timeout: job.time_limit(),
                    // Where signatures are required, only signed jobs get
                    // here: a pin is then the master's word.
                    source_hashes: job.source_hashes.clone(),
                    pillar,
                    private: false,
                });
                tokio::select! {
                    // A stop seen with the call's end wins: the program's end
                    // was the signal's doing.
                    biased;
                    // Stopped by `saltutil.kill_job` (or term/signal): the
                    // call is dropped, which kills what is left of its
                    // programs, and the job returns saying so.
                    signal = listed.stopped() => (stopped(job, signal, started), Teardown::default()),
                    done = call => done,
                }
            }
        },
    };
    drop(listed);
    tracing::info!(
        jid = %job.jid,
        fun = %job.fun,
        retcode = outcome.retcode,
        ms = outcome.duration.as_millis() as u64,
        "job done"
    );
    records::ran(shared, job, kid, &outcome);
    let label = shared.fun_label(&job.fun);
    shared.metrics.jobs_run.get_or_create(&label).inc();
    shared
        .metrics
        .job_duration
        .get_or_create(&label)
        .observe(outcome.duration.as_secs_f64());
    let ret = match seal_to {
        Some(master) => sealed_return_of(shared, job, &outcome.ret, outcome.retcode, &master),
        None => return_of(shared, job, outcome.ret, outcome.retcode),
    };
    Some((ret, teardown))
}

/// The return of a job whose pillar this maid cannot have: it does not
/// run without it (a state run on no pillar could undo what pillar set).
fn no_pillar(job: &Job, why: &super::pillar::Unavailable, started: std::time::Instant) -> Outcome {
    tracing::error!(jid = %job.jid, fun = %job.fun, cause = %why, "the job's pillar is unavailable; not run");
    Outcome {
        ret: Value::String(format!("Pillar unavailable: {why}")),
        retcode: 1,
        failure: Some(Failure::Function),
        duration: started.elapsed(),
        used: Vec::new(),
        plugin_sha256: None,
        returned: false,
    }
}

/// What `saltutil.running` says of the job.
fn job_data(job: &Job) -> JobData {
    JobData {
        jid: job.jid.clone(),
        fun: job.fun.clone(),
        arg: job.arg.clone(),
        tgt: job.tgt.clone(),
        tgt_type: job.tgt_type.clone(),
        user: job.user.clone(),
    }
}

/// The outcome of a job stopped by `signal`: retcode 128 + the signal, as
/// a shell reports a program it killed.
fn stopped(job: &Job, signal: i32, started: std::time::Instant) -> Outcome {
    Outcome {
        ret: Value::String(format!(
            "Job {} ({}) was stopped by signal {signal} (saltutil.signal_job)",
            job.jid, job.fun
        )),
        retcode: 128 + signal,
        failure: Some(Failure::Function),
        duration: started.elapsed(),
        used: Vec::new(),
        plugin_sha256: None,
        returned: false,
    }
}

/// `saltutil.sync_modules` and `sync_all`, which the agent answers itself:
/// Salt's list of the modules that changed (for `sync_all`, under
/// `modules` beside Salt's other, empty, kinds), or what was refused
/// (retcode 1).
async fn sync_modules(shared: &Shared, sync: &Syncer, job: &Job) -> Outcome {
    let started = std::time::Instant::now();
    let (ret, retcode) = match shared.sync_job(sync, job).await {
        Ok(report) if job.fun == SYNC_ALL => report.salt_all_return(),
        Ok(report) => report.salt_return(),
        Err(e) => (Value::String(e.to_string()), 1),
    };
    Outcome {
        ret,
        retcode,
        failure: (retcode != 0).then_some(Failure::Function),
        duration: started.elapsed(),
        used: Vec::new(),
        plugin_sha256: None,
        returned: false,
    }
}

/// Salt's `saltutil.refresh_grains`, which the agent answers itself: the
/// grains detected again and merged as at start (the kept ones, then the
/// configuration's), seen by targeting and the registry at once. Salt's
/// `True`; an argument it does not take is refused as Salt refuses it.
pub(super) const REFRESH_GRAINS: &str = "saltutil.refresh_grains";

async fn refresh_grains(shared: &Shared, job: &Job) -> Outcome {
    let started = std::time::Instant::now();
    let invalid: Vec<String> = job
        .kwarg
        .iter()
        .filter(|(k, _)| {
            !k.starts_with("__") && *k != "refresh_pillar" && *k != "clean_pillar_cache"
        })
        .map(|(k, v)| format!("{k}={}", maid_salt::python::str(v)))
        .collect();
    let bad = if !job.arg.is_empty() {
        Some(format!(
            "refresh_grains() takes 0 positional arguments but {} were given",
            job.arg.len()
        ))
    } else if !invalid.is_empty() {
        Some(format!(
            "The following keyword arguments are not valid: {}",
            invalid.join(", ")
        ))
    } else {
        None
    };
    let (ret, retcode, used) = match bad {
        Some(why) => (
            Value::String(format!("Passed invalid arguments: {why}")),
            1,
            Vec::new(),
        ),
        None => (Value::Bool(true), 0, shared.refresh_grains().await),
    };
    Outcome {
        ret,
        retcode,
        failure: (retcode != 0).then_some(Failure::Function),
        duration: started.elapsed(),
        used,
        plugin_sha256: None,
        returned: false,
    }
}

/// Counts a job as pending until dropped.
struct Accepted<'a>(&'a AtomicUsize);

impl Drop for Accepted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The answer to a job that found the queue full: a return with the busy
/// retcode, at once, never silence.
pub(super) fn busy_return(shared: &Shared, job: &Job, kid: &Option<String>) -> Pending {
    let label = shared.fun_label(&job.fun);
    shared.metrics.jobs_busy.get_or_create(&label).inc();
    tracing::warn!(jid = %job.jid, "busy: answered without running");
    records::busy(shared, job, kid, BUSY_RETCODE);
    let msg = format!(
        "Busy: this maid is running or queueing {} jobs; try again later",
        shared.pending.load(Ordering::Relaxed)
    );
    return_of(shared, job, Value::String(msg), BUSY_RETCODE)
}

/// The return of a job that gave its function pillar: the value sealed to
/// `master`, the key that signed the job (it crosses Redis, rests in the
/// job cache and in the outbox's spill file sealed). A value that cannot
/// be sealed is not sent in its place: the return says so.
fn sealed_return_of(
    shared: &Shared,
    job: &Job,
    value: &Value,
    retcode: i32,
    master: &ed25519_dalek::VerifyingKey,
) -> Pending {
    let stamp = crate::jid::stamp();
    let payload = match maid_protocol::pillar::seal_value(value, master) {
        Ok(sealed) => {
            let b64 = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, sealed);
            job.sealed_return_json(&shared.id, &b64, retcode, &stamp)
        }
        Err(e) => {
            tracing::error!(jid = %job.jid, cause = %e, "return not sealed: not sent");
            let why = Value::String(format!("Plugin error: the return could not be sealed: {e}"));
            job.return_json(&shared.id, &why, 1, &stamp)
        }
    };
    pending(shared, job, payload)
}

/// `job`'s return message, ready to publish and cache.
fn return_of(shared: &Shared, job: &Job, value: Value, retcode: i32) -> Pending {
    let payload = job.return_json(&shared.id, &value, retcode, &crate::jid::stamp());
    pending(shared, job, payload)
}

/// Return message `payload` of `job`, signed when this maid has a key,
/// on its way to the reply topic and the job cache.
fn pending(shared: &Shared, job: &Job, payload: String) -> Pending {
    Pending {
        topic: job.temp_topic.clone(),
        payload: shared.seal(payload),
        jid: job.jid.clone(),
        id: shared.id.clone(),
        published: false,
    }
}
