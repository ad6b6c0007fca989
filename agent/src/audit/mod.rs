//! The audit log: one JSON line per job received, whatever its fate, and
//! one per plugin loaded, removed or refused (at start, on reload, by sync).
//!
//! Records go through a bounded queue to a writer task, so a slow or full
//! disk never blocks a job: when the queue is full the record is dropped,
//! counted, and the count is written into the next record that gets
//! through (`dropped_before`). The file is opened append-only with mode
//! 0600 and reopened on `reopen()` (SIGHUP) for log rotation. A job's
//! arguments are kept as their digest, or with `arguments = "redacted"`
//! as values, those of keywords whose names look like secrets redacted;
//! so are a state run's state ids and names ([`StateRecord`]). Every
//! record names its maid: a verifier holds a chain's records to it.
//!
//! Besides the file, records go to a Redis stream and/or syslog as
//! configured ([`sinks`]): each spools what it cannot deliver and the
//! gap is recorded in the chain when its spool overflows.
//!
//! The records form a hash chain ([`maid_protocol::auditchain`]): each
//! carries `seq` and `prev`, the SHA-256 of the line before it, across
//! rotations and restarts (the head is taken up from the file's last
//! line, else from `state_dir/audit.head`). With the maid's own key, a
//! signed `checkpoint` record is written every [`CHECKPOINT_EVERY`]
//! records or [`CHECKPOINT_AFTER`] (when something was written), and
//! before the file is reopened. `maid audit verify` checks them.

mod sinks;
pub mod syslog;
mod writer;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::{Map, Value};
use tokio::sync::{Notify, mpsc};

use crate::runtime::CapabilityUse;

pub use sinks::Target;
pub use writer::{CHECKPOINT_AFTER, CHECKPOINT_EVERY, ChainSettings, FINISH_WITHIN};

/// What happened to a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// The function ran (its retcode says how it went).
    Ran,
    /// The function ran but a capability was refused (retcode 77).
    Denied,
    /// Refused before anything ran; `reason` says why.
    Rejected,
    /// Not targeted at this maid.
    NotTargeted,
    /// Relayed by this syndic maid to the maids beneath it; `reason`
    /// names them.
    Relayed,
    /// A jid this maid had already accepted.
    Duplicate,
    /// A plugin became callable (`module`, `plugin_sha256`, `source`, and
    /// `signer` when it was pushed).
    PluginLoaded,
    /// A pushed plugin was removed by a signed removal.
    PluginRemoved,
    /// A pushed plugin was not loaded; `reason` says why.
    PluginRefused,
    /// Noise records over the rate, counted in `suppressed` instead of
    /// written one by one.
    Suppressed,
    /// The maid's signature over the chain so far (`checkpoint`).
    Checkpoint,
    /// Records a sink (stream, syslog) never got: its spool overflowed
    /// while it was down (`gap`).
    Gap,
}

/// What a `gap` record says: which sink lacks which records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GapRecord {
    /// `stream` or `syslog`.
    pub sink: String,
    pub from_seq: u64,
    pub to_seq: u64,
}

/// One audit line.
#[derive(Debug, Clone, Serialize)]
pub struct Record {
    /// Its place in the chain (the writer sets it): 1 for the first.
    pub seq: u64,
    /// Hex SHA-256 of the line before it (the writer sets it).
    pub prev: String,
    pub time: String,
    pub minion: String,
    pub jid: String,
    /// The master topic the job came on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    pub fun: Option<String>,
    pub args: Vec<Value>,
    pub kwargs: Map<String, Value>,
    pub user: Option<String>,
    /// Key id of the master key that signed the job.
    pub signer: Option<String>,
    pub tgt: Option<Value>,
    pub tgt_type: Option<String>,
    pub matched: Option<bool>,
    pub decision: Decision,
    pub reason: Option<String>,
    pub plugin_sha256: Option<String>,
    /// Programs started and `salt://` sources opened, allowed or refused.
    pub capabilities: Vec<CapabilityUse>,
    /// Directories the plugin could write into during the call.
    pub writable_dirs: Vec<String>,
    pub duration_ms: Option<u64>,
    pub retcode: Option<i32>,
    /// Records lost to a full queue since the previous line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dropped_before: Option<u64>,
    /// The plugin a `plugin_*` record is about.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
    /// What made a `plugin_*` record happen: `startup`, `reload` or `sync`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// SHA-256 of a rejected message's `arg` and `kwarg` as sent: what the
    /// sender asked for, without copying what may be secrets or megabytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args_sha256: Option<String>,
    /// The key id a rejected envelope claimed (`signer` is only ever a key
    /// that verified).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub claimed_kid: Option<String>,
    /// For a `suppressed` record: how many noise records of each
    /// `decision: reason` were counted instead of written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suppressed: Option<BTreeMap<String, u64>>,
    /// For a state run (`state.apply`, ...): what each state did. The
    /// execution functions each called are in `capabilities` (`call`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub states: Option<Vec<StateRecord>>,
    /// For a `checkpoint` record: the maid's signature over the chain.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<maid_protocol::auditchain::Checkpoint>,
    /// The SHA-256 of the sealed pillar record the job pinned for this
    /// maid (read from Redis, used only with exactly that hash).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pillar_sha256: Option<String>,
    /// For a `gap` record: the sink and the records it lacks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gap: Option<GapRecord>,
}

/// One state of a state run, as the audit trail keeps it: which state
/// function ran on what, its result, and the names of what it changed —
/// never the changes themselves, since a diff may hold a secret.
///
/// A state's `id` and `name` are kept as their digests, as a job's
/// arguments are, and in clear only with `arguments = "redacted"`
/// ([`StateRecord::keep_digests_only`]). They are arguments in all but
/// name: rendered from the SLS and pillar (`cmd.run`'s name is its
/// command line, `git.latest`'s a URL that may carry a token), or sent
/// in the job itself (`state.single cmd.run name='mysql -pSECRET'`).
/// Every state's are digested, not a list of command-running functions:
/// any state module (a custom one too) may take a secret for its name,
/// and what a state changed on the host is in the record anyway, in
/// clear where it is no argument — the paths it wrote, the programs it
/// started, the `salt://` files it read — under `capabilities`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StateRecord {
    /// `file.managed`, from the return's tag.
    pub function: String,
    /// Hex SHA-256 of the state's id as a JSON string (`"print_it"`), as
    /// `args_sha256` is of the arguments: whoever holds the rendered
    /// states (`state.show_sls`) can tell which state this was.
    pub id_sha256: String,
    /// Hex SHA-256 of its name as a JSON string.
    pub name_sha256: String,
    /// The id itself, with `arguments = "redacted"`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The name itself, with `arguments = "redacted"`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `true`, `false`, or `None` (test mode: would change).
    pub result: Option<bool>,
    /// The keys of its `changes` (`diff`, `mode`, `stdout`, ...).
    pub changed: Vec<String>,
}

impl StateRecord {
    /// The states of a state run's return (`{tag: {result, changes, ...}}`);
    /// `None` when it is no such return (a compile error's list).
    pub fn of_return(ret: &Value) -> Option<Vec<StateRecord>> {
        let Value::Object(states) = ret else {
            return None;
        };
        let mut out = Vec::new();
        for (tag, r) in states {
            let mut parts = tag.splitn(4, "_|-");
            let (Some(state), Some(id), Some(name), Some(fun)) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                return None;
            };
            let changed = match r.get("changes") {
                Some(Value::Object(c)) => c.keys().cloned().collect(),
                _ => Vec::new(),
            };
            out.push(StateRecord {
                function: format!("{state}.{fun}"),
                id_sha256: crate::runtime::json_sha256(&id),
                name_sha256: crate::runtime::json_sha256(&name),
                id: Some(id.to_string()),
                name: Some(name.to_string()),
                result: r.get("result").and_then(Value::as_bool),
                changed,
            });
        }
        Some(out)
    }

    /// Drop the id and name, keep their digests (`arguments = "digest"`).
    pub fn keep_digests_only(&mut self) {
        self.id = None;
        self.name = None;
    }
}

impl Record {
    /// A record with the fields every decision has.
    pub fn new(minion: &str, jid: &str, decision: Decision) -> Self {
        Self {
            seq: 0,
            prev: String::new(),
            time: crate::jid::stamp(),
            minion: minion.into(),
            jid: jid.into(),
            topic: None,
            fun: None,
            args: Vec::new(),
            kwargs: Map::new(),
            user: None,
            signer: None,
            tgt: None,
            tgt_type: None,
            matched: None,
            decision,
            reason: None,
            plugin_sha256: None,
            capabilities: Vec::new(),
            writable_dirs: Vec::new(),
            duration_ms: None,
            retcode: None,
            dropped_before: None,
            module: None,
            source: None,
            args_sha256: None,
            claimed_kid: None,
            suppressed: None,
            states: None,
            checkpoint: None,
            pillar_sha256: None,
            gap: None,
        }
    }

    /// A `plugin_*` record about `module`. `jid` is the job that caused it
    /// (`saltutil.sync_modules`), else empty.
    pub fn plugin(minion: &str, jid: &str, decision: Decision, module: &str, source: &str) -> Self {
        let mut rec = Self::new(minion, jid, decision);
        rec.module = Some(module.into());
        rec.source = Some(source.into());
        rec
    }
}

/// Whether a keyword's value must not be logged.
fn secret_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    ["password", "passwd", "token", "secret", "key", "credential"]
        .iter()
        .any(|s| n.contains(s))
}

/// `kwargs` with secret-looking values replaced.
pub fn redact(kwargs: &Map<String, Value>) -> Map<String, Value> {
    kwargs
        .iter()
        .map(|(k, v)| {
            let v = if secret_name(k) {
                Value::String("<redacted>".into())
            } else {
                v.clone()
            };
            (k.clone(), v)
        })
        .collect()
}

/// Whether a record must be written whatever the load: a job that ran (or
/// was denied mid-run) and a plugin loaded, removed or refused. Everything
/// else — rejects, duplicates, jobs for other maids — is noise a flood can
/// make as fast as it likes.
pub(crate) fn must_keep(decision: Decision) -> bool {
    matches!(
        decision,
        Decision::Ran
            | Decision::Denied
            | Decision::Relayed
            | Decision::PluginLoaded
            | Decision::PluginRemoved
            | Decision::PluginRefused
            | Decision::Checkpoint
            | Decision::Gap
    )
}

/// Noise records written per second at most, after a burst.
const NOISE_PER_SEC: f64 = 200.0;
/// Noise records that may be written at once before the rate applies.
const NOISE_BURST: f64 = 1_000.0;

/// A token bucket for noise records, and what it turned away.
struct Noise {
    tokens: f64,
    last: std::time::Instant,
    /// Records not written since the last summary, by `decision: reason`.
    suppressed: BTreeMap<String, u64>,
}

impl Noise {
    fn new() -> Self {
        Self {
            tokens: NOISE_BURST,
            last: std::time::Instant::now(),
            suppressed: BTreeMap::new(),
        }
    }

    /// Take a token, or count `key` as suppressed.
    fn admit(&mut self, key: impl FnOnce() -> String) -> bool {
        let now = std::time::Instant::now();
        let refill = now.duration_since(self.last).as_secs_f64() * NOISE_PER_SEC;
        self.tokens = (self.tokens + refill).min(NOISE_BURST);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return true;
        }
        *self.suppressed.entry(key()).or_default() += 1;
        false
    }
}

/// The key a suppressed record is counted under: its decision, and the
/// short reason (`rejected: bad signature`), never the sender's words.
fn noise_key(decision: Decision, reason: Option<&str>) -> String {
    let decision = serde_json::to_value(decision)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    match reason {
        Some(r) => format!("{decision}: {r}"),
        None => decision,
    }
}

/// The audit log's handle; cheap to clone.
///
/// Two queues lead to the writer. Records that must be kept (see
/// [`must_keep`]) go through one that never drops: it holds at most what
/// the jobs admitted to run produce, since each makes one. Noise goes
/// through a token bucket and a bounded queue; what neither takes is
/// counted, and the counts are written as one `suppressed` record a second,
/// so a flood is summarised and can never crowd out a real job's record.
#[derive(Clone)]
pub struct Audit {
    kept: Option<mpsc::UnboundedSender<Record>>,
    tx: Option<mpsc::Sender<Record>>,
    noise: Arc<Mutex<Noise>>,
    dropped: Arc<AtomicU64>,
    reopen: Arc<Notify>,
    /// Asks the writer to sign what it wrote (`finish`), and its answer.
    finishing: Arc<(Notify, Notify)>,
}

impl Audit {
    /// No audit log.
    pub fn disabled() -> Self {
        Self {
            kept: None,
            tx: None,
            noise: Arc::new(Mutex::new(Noise::new())),
            dropped: Arc::default(),
            reopen: Arc::default(),
            finishing: Arc::default(),
        }
    }

    /// Before the agent stops: the records queued so far written and a
    /// checkpoint signing them (waits at most [`FINISH_WITHIN`]).
    pub async fn finish(&self) {
        if self.tx.is_none() {
            return;
        }
        self.finishing.0.notify_one();
        if tokio::time::timeout(FINISH_WITHIN, self.finishing.1.notified())
            .await
            .is_err()
        {
            tracing::error!(
                "the audit writer did not finish in time: its last records may be unsigned"
            );
        }
    }

    /// Write to `path` (when given) and to `targets`; up to `queue`
    /// noise records wait for a slow disk, up to `spool` for each target
    /// that is down. The chain goes on from where `path` (or `chain`'s
    /// head file) left it, checkpointed with `chain`'s key when it has one.
    pub async fn open(
        path: Option<PathBuf>,
        targets: Vec<Target>,
        limits: (usize, usize),
        chain: ChainSettings,
    ) -> std::io::Result<Self> {
        let (queue, spool) = limits;
        let head = writer::last_head(path.as_deref(), chain.head_file.as_deref()).await;
        let file = match path {
            Some(path) => Some(writer::LogFile {
                file: writer::open(&path).await?,
                path,
            }),
            None => None,
        };
        let (tx, rx) = mpsc::channel(queue.max(1));
        let (kept, kept_rx) = mpsc::unbounded_channel();
        let sinks = targets
            .into_iter()
            .map(|t| sinks::Sink::start(t, spool, kept.downgrade()))
            .collect();
        let audit = Self {
            kept: Some(kept),
            tx: Some(tx),
            ..Self::disabled()
        };
        tokio::spawn(writer::writer(
            writer::Out {
                file,
                sinks,
                chain: writer::Chain::new(chain, head),
                held: Vec::new(),
                shipping: Vec::new(),
            },
            writer::Queues {
                kept: kept_rx,
                noise: rx,
            },
            audit.clone_quiet(),
        ));
        Ok(audit)
    }

    /// A handle for the writer: without the senders, so the writer's own
    /// copy does not keep its queues open.
    fn clone_quiet(&self) -> Self {
        Self {
            kept: None,
            tx: None,
            noise: self.noise.clone(),
            dropped: self.dropped.clone(),
            reopen: self.reopen.clone(),
            finishing: self.finishing.clone(),
        }
    }

    /// Queue the record `make` builds, building it only when the log is
    /// on: a job's record copies its arguments and formats a time, work
    /// an agent without an audit log should not do for every job.
    pub fn record_with(&self, make: impl FnOnce() -> Record) {
        if self.tx.is_some() {
            self.record(make());
        }
    }

    /// Queue the noise record `make` builds when the log is on and the
    /// rate lets it through (else it is counted, see [`Audit::admit_noise`]).
    pub fn noise_with(&self, decision: Decision, make: impl FnOnce() -> Record) {
        if self.tx.is_some() && self.admit_noise(decision, None) {
            self.record(make());
        }
    }

    /// Whether a noise record about `decision` for `reason` is within the
    /// rate: the caller logs it then, and records it. Past the rate it is
    /// counted into the next `suppressed` record instead, and the caller
    /// stays quiet too, so a flood fills neither the audit log nor the
    /// agent's own log.
    pub fn admit_noise(&self, decision: Decision, reason: Option<&str>) -> bool {
        self.noise
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .admit(|| noise_key(decision, reason))
    }

    /// Queue a record; never waits.
    pub fn record(&self, mut rec: Record) {
        if must_keep(rec.decision) {
            if let Some(kept) = &self.kept
                && kept.send(rec).is_err()
            {
                tracing::error!("audit writer is gone: a job's record was lost");
            }
            return;
        }
        let Some(tx) = &self.tx else {
            return;
        };
        let lost = self.dropped.swap(0, Ordering::Relaxed);
        if lost > 0 {
            rec.dropped_before = Some(lost);
        }
        if let Err(e) = tx.try_send(rec) {
            let back = match e {
                mpsc::error::TrySendError::Full(r) | mpsc::error::TrySendError::Closed(r) => r,
            };
            let n = self
                .dropped
                .fetch_add(1 + back.dropped_before.unwrap_or(0), Ordering::Relaxed);
            if n == 0 {
                tracing::error!("audit queue full: records are being dropped (and counted)");
            }
        }
    }

    /// Reopen the file (after rotation).
    pub fn reopen(&self) {
        self.reopen.notify_one();
    }

    /// The `suppressed` record of what the rate turned away since the last
    /// one, if anything was.
    fn summary(&self) -> Option<Record> {
        let counts = std::mem::take(
            &mut self
                .noise
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .suppressed,
        );
        if counts.is_empty() {
            return None;
        }
        let total: u64 = counts.values().sum();
        tracing::warn!(records = total, "audit: noise over the rate summarised");
        let mut rec = Record::new("", "", Decision::Suppressed);
        rec.suppressed = Some(counts);
        Some(rec)
    }
}

#[cfg(test)]
mod tests {
    use super::writer::{TAIL_CHUNK, last_line};
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn the_last_line_is_read_from_the_end_whatever_its_length() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.log");
        assert_eq!(last_line(&path).await.unwrap(), None);
        std::fs::write(&path, "").unwrap();
        assert_eq!(last_line(&path).await.unwrap(), None);
        std::fs::write(&path, "one").unwrap();
        assert_eq!(last_line(&path).await.unwrap(), Some(b"one".to_vec()));
        // A last line longer than a chunk, after others; blank lines after.
        let long = "x".repeat(3 * TAIL_CHUNK as usize + 5);
        std::fs::write(&path, format!("first\nsecond\n{long}\n\n")).unwrap();
        assert_eq!(last_line(&path).await.unwrap(), Some(long.into_bytes()));
        std::fs::write(&path, "first\nsecond\n").unwrap();
        assert_eq!(last_line(&path).await.unwrap(), Some(b"second".to_vec()));
    }

    #[test]
    fn secrets_are_redacted() {
        let kw = json!({"password": "p", "api_token": "t", "SSH_KEY": "k", "cwd": "/tmp"});
        let r = redact(kw.as_object().unwrap());
        assert_eq!(
            Value::Object(r),
            json!({"password": "<redacted>", "api_token": "<redacted>", "SSH_KEY": "<redacted>", "cwd": "/tmp"})
        );
    }

    #[test]
    fn a_state_run_is_recorded_state_by_state_without_its_changes() {
        let ret = json!({
            "file_|-conf_|-/etc/app.conf_|-managed": {
                "result": true, "comment": "File updated",
                "changes": {"diff": "-password=old\n+password=new\n", "mode": "0600"}
            },
            "cmd_|-restart_|-systemctl restart app_|-run": {
                "result": null, "comment": "would run", "changes": {"cmd": "systemctl restart app"}
            },
            "test_|-ok_|-ok_|-nop": {"result": true, "comment": "Success!", "changes": {}}
        });
        let digest = |s: &str| crate::runtime::json_sha256(&s);
        let mut states = StateRecord::of_return(&ret).unwrap();
        // `arguments = "redacted"`: the ids and names in clear too.
        let as_json = serde_json::to_value(&states).unwrap();
        assert_eq!(
            as_json,
            json!([
                {"function": "file.managed", "id_sha256": digest("conf"), "name_sha256": digest("/etc/app.conf"),
                 "id": "conf", "name": "/etc/app.conf", "result": true, "changed": ["diff", "mode"]},
                {"function": "cmd.run", "id_sha256": digest("restart"), "name_sha256": digest("systemctl restart app"),
                 "id": "restart", "name": "systemctl restart app", "result": null, "changed": ["cmd"]},
                {"function": "test.nop", "id_sha256": digest("ok"), "name_sha256": digest("ok"),
                 "id": "ok", "name": "ok", "result": true, "changed": []}
            ])
        );
        assert!(
            !as_json.to_string().contains("password"),
            "a change's content is never kept"
        );
        // `arguments = "digest"`, the default: a command line is no more
        // in the record than a job's arguments are.
        states.iter_mut().for_each(StateRecord::keep_digests_only);
        let as_json = serde_json::to_value(&states).unwrap();
        assert!(!as_json.to_string().contains("systemctl"), "{as_json}");
        assert_eq!(
            as_json[1],
            json!({"function": "cmd.run", "id_sha256": digest("restart"),
                   "name_sha256": digest("systemctl restart app"), "result": null, "changed": ["cmd"]})
        );
        // "restart" as JSON: what `echo -n '"restart"' | sha256sum` says.
        assert_eq!(
            digest("restart"),
            hex::encode(<sha2::Sha256 as sha2::Digest>::digest(b"\"restart\""))
        );
        // A compile error is a list: no states ran.
        assert_eq!(
            StateRecord::of_return(&json!(["Rendering SLS failed"])),
            None
        );
    }

    #[test]
    fn noise_is_taken_up_to_the_burst_then_counted_by_reason() {
        let mut n = Noise::new();
        let taken = (0..5_000)
            .filter(|_| n.admit(|| noise_key(Decision::Rejected, Some("bad signature"))))
            .count();
        // The burst, and what the rate refilled while the loop ran.
        assert!((1_000..1_100).contains(&taken), "{taken}");
        let counted = n.suppressed["rejected: bad signature"];
        assert_eq!(taken as u64 + counted, 5_000);
        assert!(!n.admit(|| noise_key(Decision::NotTargeted, None)));
        assert_eq!(n.suppressed["not_targeted"], 1);
    }

    #[tokio::test]
    async fn a_job_that_ran_is_recorded_however_full_the_noise_queue() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let audit = Audit::open(
            Some(path.clone()),
            Vec::new(),
            (1, 1),
            ChainSettings::default(),
        )
        .await
        .unwrap();
        for i in 0..20_000 {
            audit.record(Record::new("m", &format!("junk-{i}"), Decision::Rejected));
            if i == 10_000 {
                audit.record(Record::new("m", "real", Decision::Ran));
            }
        }
        let plugin = Record::plugin("m", "", Decision::PluginLoaded, "x", "sync");
        audit.record(plugin);
        drop(audit);
        // The writer ends once every handle is gone and its queues drained.
        for _ in 0..100 {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            let text = std::fs::read_to_string(&path).unwrap();
            if text.contains("\"plugin_loaded\"") {
                assert!(
                    text.contains("\"jid\":\"real\""),
                    "the job's record was dropped"
                );
                assert!(text.lines().count() < 20, "noise was not bounded");
                return;
            }
        }
        panic!("the kept records never arrived");
    }

    #[tokio::test]
    async fn every_record_names_the_maid_whose_chain_it_is_in() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let chain = ChainSettings {
            minion: "web-1".into(),
            ..ChainSettings::default()
        };
        let audit = Audit::open(Some(path.clone()), Vec::new(), (16, 1), chain)
            .await
            .unwrap();
        // A gap and a summary of noise are made without a maid's name.
        audit.record(Record::new("", "", Decision::Gap));
        audit.record(Record::new("web-1", "1", Decision::Ran));
        drop(audit);
        for _ in 0..100 {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            let text = std::fs::read_to_string(&path).unwrap();
            let named: Vec<Value> = text
                .lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap()["minion"].clone())
                .collect();
            if named.len() == 2 {
                assert_eq!(named, [json!("web-1"), json!("web-1")]);
                return;
            }
        }
        panic!("the records never arrived");
    }

    #[tokio::test]
    async fn appends_lines_with_mode_0600_and_reopens() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let audit = Audit::open(
            Some(path.clone()),
            Vec::new(),
            (16, 1),
            ChainSettings::default(),
        )
        .await
        .unwrap();
        audit.record(Record::new("m", "1", Decision::Ran));
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        std::fs::rename(&path, dir.path().join("audit.jsonl.1")).unwrap();
        audit.reopen();
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        audit.record(Record::new("m", "2", Decision::NotTargeted));
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let old = std::fs::read_to_string(dir.path().join("audit.jsonl.1")).unwrap();
        let new = std::fs::read_to_string(&path).unwrap();
        assert_eq!(old.lines().count(), 1);
        let rec: Value = serde_json::from_str(new.trim()).unwrap();
        assert_eq!(
            (rec["jid"].as_str(), rec["decision"].as_str()),
            (Some("2"), Some("not_targeted"))
        );
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}
