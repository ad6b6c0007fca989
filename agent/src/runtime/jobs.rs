//! The jobs this agent is running, for `saltutil.running`, `find_job`,
//! `kill_job`, `term_job` and `signal_job`: each job's Salt job data, the
//! process groups of the programs it started, and a way to stop its call.
//!
//! A job is listed from when it gets a slot until its call ends. Stopping
//! one sends the signal to the programs it started and, for the signals
//! that end a process (`KILL`, `TERM`, `INT`, `HUP`, `QUIT`), ends its
//! call too: the instance is dropped, which kills what is left of its
//! programs, and the job returns saying it was stopped.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, OnceLock};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde_json::{Value, json};
use tokio::sync::watch;

/// What Salt's job data says of a running job: what it asked. Kept as it
/// came and put in Salt's shape only when `saltutil.running` asks, not for
/// every job.
pub struct JobData {
    pub jid: String,
    pub fun: String,
    pub arg: Vec<Value>,
    pub tgt: Value,
    pub tgt_type: String,
    pub user: Option<String>,
}

impl JobData {
    /// Salt's job data (`jid`, `fun`, `arg`, `tgt`, `tgt_type`, `user`,
    /// `pid`, `ret`): jobs run inside the agent, so `pid` is its own.
    fn salt(&self) -> Value {
        json!({
            "jid": self.jid,
            "fun": self.fun,
            "arg": self.arg,
            "tgt": self.tgt,
            "tgt_type": self.tgt_type,
            "user": self.user.clone().unwrap_or_default(),
            "pid": pid(),
            "ret": "",
        })
    }
}

/// This process's id, asked of the kernel once.
fn pid() -> u32 {
    static PID: OnceLock<u32> = OnceLock::new();
    *PID.get_or_init(std::process::id)
}

/// One running job.
struct Running {
    /// What it asked.
    data: JobData,
    /// Process groups of the programs it started that are still running.
    groups: BTreeSet<i32>,
    /// Set to the signal that stops it.
    stop: watch::Sender<Option<i32>>,
}

/// The running jobs of one agent.
#[derive(Default)]
pub struct JobTable {
    jobs: Mutex<BTreeMap<String, Running>>,
}

/// A job's place in the table, for as long as it runs; dropping it takes
/// the job off.
pub struct JobEntry<'a> {
    table: &'a JobTable,
    jid: String,
    stopped: watch::Receiver<Option<i32>>,
}

impl JobEntry<'_> {
    /// The signal that stopped this job, once one has.
    pub async fn stopped(&mut self) -> i32 {
        loop {
            if let Some(sig) = *self.stopped.borrow_and_update() {
                return sig;
            }
            if self.stopped.changed().await.is_err() {
                // The table entry is gone: never stopped.
                std::future::pending::<()>().await;
            }
        }
    }
}

impl Drop for JobEntry<'_> {
    fn drop(&mut self) {
        self.table.lock().remove(&self.jid);
    }
}

/// The signals that end a job's call, not only its programs.
const ENDING: &[Signal] = &[
    Signal::SIGHUP,
    Signal::SIGINT,
    Signal::SIGQUIT,
    Signal::SIGKILL,
    Signal::SIGTERM,
];

impl JobTable {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Running>> {
        self.jobs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// List job `data.jid` until the entry is dropped.
    pub fn start(&self, data: JobData) -> JobEntry<'_> {
        let (stop, stopped) = watch::channel(None);
        let jid = data.jid.clone();
        self.lock().insert(
            jid.clone(),
            Running {
                data,
                groups: BTreeSet::new(),
                stop,
            },
        );
        JobEntry {
            table: self,
            jid,
            stopped,
        }
    }

    /// Salt's job data of every running job, by jid.
    pub fn running(&self) -> Vec<Value> {
        self.lock().values().map(|r| r.data.salt()).collect()
    }

    /// A program job `jid` started runs in process group `pgid`.
    pub fn program_started(&self, jid: &str, pgid: i32) {
        if let Some(r) = self.lock().get_mut(jid) {
            r.groups.insert(pgid);
        }
    }

    /// That program ended.
    pub fn program_ended(&self, jid: &str, pgid: i32) {
        if let Some(r) = self.lock().get_mut(jid) {
            r.groups.remove(&pgid);
        }
    }

    /// Send `signal` to job `jid`: to the programs it started, and, for a
    /// signal that ends a process, to its call. Salt's words when it was
    /// sent; `None` when no such job runs here.
    pub fn signal(&self, jid: &str, signal: i32) -> Result<Option<String>, NotASignal> {
        let sig = Signal::try_from(signal).map_err(|_| NotASignal(signal))?;
        let jobs = self.lock();
        let Some(r) = jobs.get(jid) else {
            return Ok(None);
        };
        // The job is marked stopped before its programs get the signal:
        // its call, which a killed program ends at once, then never wins
        // the race with the stop ([`crate::agent`] prefers the stop).
        if ENDING.contains(&sig) {
            r.stop.send_replace(Some(signal));
        }
        for &pgid in &r.groups {
            let _ = killpg(Pid::from_raw(pgid), sig);
        }
        Ok(Some(format!(
            "Signal {signal} sent to job {jid} at pid {}",
            pid()
        )))
    }
}

/// `saltutil.signal_job` named a number that is no signal.
#[derive(Debug, thiserror::Error)]
#[error("{0} is not a signal")]
pub struct NotASignal(pub i32);
