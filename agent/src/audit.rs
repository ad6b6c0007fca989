//! The audit log: one JSON line per job received, whatever its fate, and
//! one per plugin loaded, removed or refused (at start, on reload, by sync).
//!
//! Records go through a bounded queue to a writer task, so a slow or full
//! disk never blocks a job: when the queue is full the record is dropped,
//! counted, and the count is written into the next record that gets
//! through (`dropped_before`). The file is opened append-only with mode
//! 0600 and reopened on `reopen()` (SIGHUP) for log rotation. Values of
//! keyword arguments whose names look like secrets are redacted.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;
use serde_json::{Map, Value};
use tokio::io::AsyncWriteExt;
use tokio::sync::{Notify, mpsc};

use crate::runtime::CapabilityUse;

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
    /// A jid this maid had already accepted.
    Duplicate,
    /// A plugin became callable (`module`, `plugin_sha256`, `source`, and
    /// `signer` when it was pushed).
    PluginLoaded,
    /// A pushed plugin was removed by a signed removal.
    PluginRemoved,
    /// A pushed plugin was not loaded; `reason` says why.
    PluginRefused,
}

/// One audit line.
#[derive(Debug, Clone, Serialize)]
pub struct Record {
    pub time: String,
    pub minion: String,
    pub jid: String,
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
}

impl Record {
    /// A record with the fields every decision has.
    pub fn new(minion: &str, jid: &str, decision: Decision) -> Self {
        Self {
            time: crate::jid::stamp(),
            minion: minion.into(),
            jid: jid.into(),
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

/// The audit log's handle; cheap to clone.
#[derive(Clone)]
pub struct Audit {
    tx: Option<mpsc::Sender<Record>>,
    dropped: Arc<AtomicU64>,
    reopen: Arc<Notify>,
}

impl Audit {
    /// No audit log.
    pub fn disabled() -> Self {
        Self {
            tx: None,
            dropped: Arc::default(),
            reopen: Arc::default(),
        }
    }

    /// Log to `path` through a queue of `queue` records.
    pub async fn open(path: PathBuf, queue: usize) -> std::io::Result<Self> {
        let file = open(&path).await?;
        let (tx, rx) = mpsc::channel(queue.max(1));
        let audit = Self {
            tx: Some(tx),
            dropped: Arc::default(),
            reopen: Arc::default(),
        };
        tokio::spawn(writer(path, file, rx, audit.reopen.clone()));
        Ok(audit)
    }

    /// Queue the record `make` builds, building it only when the log is
    /// on: a job's record copies its arguments and formats a time, work
    /// an agent without an audit log should not do for every job.
    pub fn record_with(&self, make: impl FnOnce() -> Record) {
        if self.tx.is_some() {
            self.record(make());
        }
    }

    /// Queue a record; never waits.
    pub fn record(&self, mut rec: Record) {
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
}

async fn open(path: &PathBuf) -> std::io::Result<tokio::fs::File> {
    if let Some(dir) = path.parent() {
        tokio::fs::create_dir_all(dir).await?;
    }
    tokio::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
        .await
}

async fn writer(
    path: PathBuf,
    mut file: tokio::fs::File,
    mut rx: mpsc::Receiver<Record>,
    reopen: Arc<Notify>,
) {
    loop {
        tokio::select! {
            rec = rx.recv() => {
                let Some(rec) = rec else { return };
                let mut line = serde_json::to_vec(&rec).expect("records serialise");
                line.push(b'\n');
                if let Err(e) = file.write_all(&line).await {
                    tracing::error!(path = %path.display(), cause = %e, "cannot write audit record");
                }
                let _ = file.flush().await;
            }
            () = reopen.notified() => {
                match open(&path).await {
                    Ok(f) => {
                        file = f;
                        tracing::info!(path = %path.display(), "audit log reopened");
                    }
                    Err(e) => tracing::error!(path = %path.display(), cause = %e, "cannot reopen audit log"),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secrets_are_redacted() {
        let kw = json!({"password": "p", "api_token": "t", "SSH_KEY": "k", "cwd": "/tmp"});
        let r = redact(kw.as_object().unwrap());
        assert_eq!(
            Value::Object(r),
            json!({"password": "<redacted>", "api_token": "<redacted>", "SSH_KEY": "<redacted>", "cwd": "/tmp"})
        );
    }

    #[tokio::test]
    async fn appends_lines_with_mode_0600_and_reopens() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let audit = Audit::open(path.clone(), 16).await.unwrap();
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
