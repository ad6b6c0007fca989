//! The act step of the per-message path: one place turns each
//! [`Verdict`] into what the maid does — audit records, metrics, log lines,
//! replies — and starts the jobs it takes. Refusals and other noise go
//! through the audit log's rate, so a flood is counted, not echoed.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures_util::future::BoxFuture;
use tokio::sync::mpsc;

use super::Shared;
use super::admission::{Verdict, View, admit};
use super::downstream::{Down, Targeted, answers_for};
use super::job::{busy_return, run_job};
use super::records;
use crate::audit::{Decision, Record};
use crate::bus::Conn;
use crate::filestore::ConnSource;
use crate::protocol::{Job, Ping, Reject, Reply};
use crate::runtime::Teardown;

/// Handle one message from the master topic `topic`. Never fails: what
/// cannot be used is logged (and audited) or rejected on its reply topic.
pub(super) fn handle_message(
    shared: &Arc<Shared>,
    topic: &str,
    payload: &[u8],
    done: &mpsc::Sender<()>,
) {
    let received = std::time::Instant::now();
    let verdict = {
        let grains = shared.grains.read();
        let view = View {
            id: &shared.id,
            grains: &grains,
            verifier: &shared.verifier,
            jids: &shared.jids,
            max_message_bytes: shared.config.agent.max_message_bytes,
            remembered_jids: shared.config.agent.remembered_jids,
            beneath: &shared.beneath,
            arguments: shared.config.audit.arguments,
            now_ms: chrono::Utc::now().timestamp_millis(),
        };
        admit(&view, topic, payload)
    };
    match verdict {
        Verdict::Drop { kind, why } => records::dropped(shared, kind, &why),
        Verdict::Refuse {
            rec,
            reply,
            reason,
            detail,
            decoded,
        } => {
            if decoded && let Some(fun) = &rec.fun {
                count_received(shared, fun);
            }
            refuse(shared, done, *rec, reply, &reason, &detail);
        }
        Verdict::NotTargeted { job, kid } => {
            count_received(shared, &job.fun);
            records::not_targeted(shared, &job, &kid);
            let target = Target::default();
            start(shared, job, kid, target, received, done);
        }
        Verdict::Run {
            job,
            kid,
            own,
            beneath,
        } => {
            count_received(shared, &job.fun);
            // What arrived goes down unchanged: a signed envelope stays
            // the master's.
            let down = beneath.iter().any(Targeted::any).then(|| Arrived {
                payload: String::from_utf8_lossy(payload).into_owned(),
                topic: topic.to_string(),
                beneath,
            });
            let target = Target { own, down };
            start(shared, job, kid, target, received, done);
        }
    }
}

fn count_received(shared: &Shared, fun: &str) {
    let label = shared.fun_label(fun);
    shared.metrics.jobs_received.get_or_create(&label).inc();
}

/// Refuse a job, within the noise rate: log it, audit it (`rec`, whose
/// reason is `reason: detail`) and reply `reason` on its topic. Past the
/// rate it is only counted, and nobody is answered: a flood of junk must
/// neither fill the logs nor make every maid an amplifier.
fn refuse(
    shared: &Arc<Shared>,
    done: &mpsc::Sender<()>,
    rec: Record,
    reply: Option<(String, String)>,
    reason: &str,
    detail: &str,
) {
    if rec.decision == Decision::Rejected {
        let label = crate::metrics::Reason {
            reason: reason.to_string(),
        };
        shared.metrics.jobs_rejected.get_or_create(&label).inc();
    }
    if !records::refused(shared, rec, reason, detail) {
        return;
    }
    if let Some((temp_topic, jid)) = reply {
        spawn_reject(shared, done, temp_topic, jid, reason.to_string());
    }
}

/// Reply `reason` on `temp_topic` without waiting.
fn spawn_reject(
    shared: &Arc<Shared>,
    done: &mpsc::Sender<()>,
    temp_topic: String,
    jid: String,
    reason: String,
) {
    let reply = Reply::Reject(Reject {
        sub_ip: shared.id.clone(),
        jid,
        reason,
    });
    let shared = shared.clone();
    let done = done.clone();
    tokio::spawn(async move {
        shared.send(None, &temp_topic, &reply).await;
        drop(done);
    });
}

/// Whom a job is for, on this maid.
#[derive(Default)]
struct Target {
    /// This maid itself.
    own: bool,
    /// Those beneath this syndic maid.
    down: Option<Arrived>,
}

/// A job for some beneath: as it arrived, on what topic, and whom it
/// targets under each downstream.
struct Arrived {
    payload: String,
    topic: String,
    beneath: Vec<Targeted>,
}

impl Arrived {
    /// Whether a downstream decides whom it targets only once it has the
    /// job: then the PING waits for that, and the work for the PING.
    fn asks_first(&self) -> bool {
        self.beneath.contains(&Targeted::TheyDecide)
    }
}

/// PING `job` at once and, when it targets this maid, run it and deliver
/// its return; hand it down to those beneath it targets.
fn start(
    shared: &Arc<Shared>,
    job: Job,
    kid: Option<String>,
    target: Target,
    received: std::time::Instant,
    done: &mpsc::Sender<()>,
) {
    let Target { own: matched, down } = target;
    // Admission: running + waiting is bounded; past it the job is answered
    // busy at once.
    let limit = shared.config.agent.concurrency + shared.config.agent.queue;
    let busy = matched && shared.pending.fetch_add(1, Ordering::Relaxed) >= limit;
    let work = match (busy, matched) {
        (true, _) => Work::Busy,
        (false, true) => Work::Run,
        (false, false) => Work::Nothing,
    };
    let shared = shared.clone();
    let done = done.clone();
    // Boxed: the task's future (the job, its PING, its work and relays) is
    // large, and tokio copies a future it holds inline as it spawns it and
    // again as it ends; a box is copied once, as it is made.
    tokio::spawn(Box::pin(async move {
        // The PING goes out before any work: it is queued on the connection
        // first, and the work yields once so the connection's task writes it
        // before the call starts. The return is then published on that same
        // connection without waiting for the PING's acknowledgement: Redis
        // runs one connection's commands in order, so a return it
        // acknowledged came after the PING. If that attempt fails, the
        // return waits for the PING's retries to end before it is kept for
        // later, so a master still never sees a return before its PING.
        //
        // Where those beneath decide whom a job targets once they have it
        // (a Salt master), the PING waits for that, and the work for the
        // PING.
        let conn = shared.conn.conn();
        let (pinged_tx, pinged) = tokio::sync::watch::channel(false);
        let (relay_tx, relay_rx) = tokio::sync::oneshot::channel();
        let pinging = async {
            let relays = ping(&shared, &job, &kid, matched, down.as_ref(), conn.clone()).await;
            shared
                .metrics
                .ping_latency
                .observe(received.elapsed().as_secs_f64());
            let _ = pinged_tx.send(true);
            let _ = relay_tx.send(relays);
        };
        // Replies from beneath go up after the PING.
        let relayed = async {
            if let Ok(relays) = relay_rx.await {
                futures_util::future::join_all(relays).await;
            }
        };
        let ping_first = down.as_ref().is_some_and(Arrived::asks_first);
        let work = work_on(&shared, &job, &kid, work, ping_first, conn.clone(), pinged);
        tokio::join!(pinging, work, relayed);
        drop(done);
    }));
}

/// What a job asks of this maid itself.
#[derive(Clone, Copy)]
enum Work {
    /// Answer busy at once: the queue is full.
    Busy,
    /// Run it.
    Run,
    /// Nothing: it is for those beneath alone, or for nobody here.
    Nothing,
}

/// Send `job`'s PING: whether it targets this maid and, on a syndic maid,
/// whom it answers for — itself when `matched`, and those beneath that
/// took the job from `down`. Their relays come back, to run after it.
async fn ping<'a>(
    shared: &'a Shared,
    job: &'a Job,
    kid: &'a Option<String>,
    matched: bool,
    down: Option<&'a Arrived>,
    conn: Option<Conn>,
) -> Vec<BoxFuture<'a, ()>> {
    let handed = match down {
        Some(down) => {
            let handing = shared
                .beneath
                .iter()
                .zip(&down.beneath)
                .filter(|(_, t)| t.any());
            futures_util::future::join_all(handing.map(|(downstream, targeted)| {
                let arrived = Down {
                    job,
                    kid,
                    payload: &down.payload,
                    topic: &down.topic,
                };
                downstream.hand_down(shared, arrived, targeted.clone())
            }))
            .await
        }
        None => Vec::new(),
    };
    let (beneath, relays): (Vec<_>, Vec<_>) =
        handed.into_iter().map(|h| (h.minions, h.relay)).unzip();
    // A syndic maid lists whom it answers for: itself when targeted, and
    // the targeted minions beneath it (§3.1).
    let minions = (!shared.beneath.is_empty()).then(|| answers_for(&shared.id, matched, &beneath));
    let ping = Reply::Ping(Ping {
        sub_ip: shared.id.clone(),
        jid: job.jid.clone(),
        matched: minions.as_ref().map_or(matched, |m| !m.is_empty()),
        minions,
    });
    shared.send(conn, &job.temp_topic, &ping).await;
    relays
}

/// This maid's own part of `job` (`work`), after its PING went out: its
/// return delivered on `conn` at once, else kept until the PING's retries
/// ended (`pinged`), so a master never sees a return before its PING.
/// With `ping_first`, the work waits for the PING.
async fn work_on(
    shared: &Arc<Shared>,
    job: &Job,
    kid: &Option<String>,
    work: Work,
    ping_first: bool,
    conn: Option<Conn>,
    mut pinged: tokio::sync::watch::Receiver<bool>,
) {
    if ping_first {
        let _ = pinged.clone().wait_for(|p| *p).await;
    }
    Requeue::default().await;
    let ret = match work {
        Work::Busy => {
            shared.pending.fetch_sub(1, Ordering::Relaxed);
            Some((busy_return(shared, job, kid), Teardown::default()))
        }
        // Boxed: the call's future is large, and only a job this maid runs
        // needs it; inline it would make the task of every job, also one
        // only PINGed or handed down, as large to allocate and copy.
        Work::Run => Box::pin(run_job(shared, job, kid)).await,
        Work::Nothing => None,
    };
    let Some((mut ret, teardown)) = ret else {
        return;
    };
    // The instance is torn down (its slot reset) once the return is on
    // its way: queued on the connection first, then this task goes behind
    // the connection's, which writes it. A job that ran alone then has the
    // next instance of its plugin made, while the agent waits for its next
    // job.
    let teardown = async {
        Requeue::default().await;
        shared.runtime.retire(teardown).await;
    };
    let (delivered, ()) = tokio::join!(shared.try_deliver(conn, &mut ret), teardown);
    if !delivered {
        // Boxed, as this is seldom taken: inline it would make every job's
        // task larger to allocate and copy.
        Box::pin(async move {
            let _ = pinged.wait_for(|p| *p).await;
            shared.deliver(ret).await;
        })
        .await;
    }
}

/// Resumes once every task already queued has run once: what the job queued
/// on the connection (its PING before the call, its return before the
/// instance's teardown) is written by the connection's task first.
/// `tokio::task::yield_now` would do that too, but it resumes only after the
/// runtime's next poll for I/O, one `epoll_wait` more on every job's path.
#[derive(Default)]
pub struct Requeue(bool);

impl Future for Requeue {
    type Output = ();

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.0 {
            return std::task::Poll::Ready(());
        }
        self.0 = true;
        // Woken while running: the task goes to the back of the run queue.
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    }
}
