//! The one writer of a maid's audit trail: it takes records from the
//! queues, links each into the hash chain (`seq`, `prev`), writes the line
//! to the file and hands the same bytes to every other sink, and signs
//! checkpoints — every [`CHECKPOINT_EVERY`] records or
//! [`CHECKPOINT_AFTER`], before the file is reopened and at stop.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

use maid_protocol::auditchain::{self, Head};

use super::sinks::{Line, Sink};
use super::{Audit, Decision, Record, must_keep};

/// The writer's two inputs.
pub(super) struct Queues {
    pub kept: mpsc::UnboundedReceiver<Record>,
    pub noise: mpsc::Receiver<Record>,
}

/// How long [`Audit::finish`] waits for the writer and the sinks.
pub const FINISH_WITHIN: std::time::Duration = std::time::Duration::from_secs(5);

/// Records between checkpoints, at most.
pub const CHECKPOINT_EVERY: u64 = 1_000;
/// How long records may wait for their checkpoint.
pub const CHECKPOINT_AFTER: std::time::Duration = std::time::Duration::from_secs(60);

/// How the summaries of suppressed noise and due checkpoints are looked at.
const SUMMARY_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// How the chain is kept: the maid's key signs its checkpoints (none: a
/// chain without them), `minion` names the maid in them, `head_file`
/// (in `state_dir`) keeps the head across a rotation while stopped.
#[derive(Debug, Clone, Default)]
pub struct ChainSettings {
    pub key: Option<ed25519_dalek::SigningKey>,
    pub minion: String,
    pub head_file: Option<PathBuf>,
}

pub(super) async fn open(path: &Path) -> std::io::Result<tokio::fs::File> {
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

/// Where the chain stands: the last line of `path`, or the head file when
/// the file is new (rotated while the maid was stopped); the later of
/// the two.
pub(super) async fn last_head(path: Option<&Path>, head_file: Option<&Path>) -> Head {
    let in_file = match path {
        Some(path) => last_line(path)
            .await
            .ok()
            .flatten()
            .and_then(|line| Head::of_line(&line)),
        None => None,
    };
    let kept = match head_file {
        Some(f) => tokio::fs::read(f)
            .await
            .ok()
            .and_then(|b| serde_json::from_slice::<Head>(&b).ok()),
        None => None,
    };
    [in_file, kept]
        .into_iter()
        .flatten()
        .max_by_key(|h| h.seq)
        .unwrap_or_else(Head::genesis)
}

/// How much of the file's end is read at a time looking for its last line.
pub(super) const TAIL_CHUNK: u64 = 64 * 1024;

/// The last non-empty line of `path`, read from its end (a log of
/// gigabytes is not read whole at every start); `None` for an empty or
/// missing file.
pub(super) async fn last_line(path: &Path) -> std::io::Result<Option<Vec<u8>>> {
    use tokio::io::{AsyncReadExt, AsyncSeekExt};
    let mut file = match tokio::fs::File::open(path).await {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let len = file.metadata().await?.len();
    let mut tail: Vec<u8> = Vec::new();
    let mut start = len;
    loop {
        let mut text = tail.as_slice();
        while let Some(t) = text.strip_suffix(b"\n") {
            text = t;
        }
        if let Some(nl) = text.iter().rposition(|b| *b == b'\n') {
            return Ok(Some(text[nl + 1..].to_vec()));
        }
        if start == 0 {
            return Ok((!text.is_empty()).then(|| text.to_vec()));
        }
        let from = start.saturating_sub(TAIL_CHUNK);
        let mut chunk = vec![0; (start - from) as usize];
        file.seek(std::io::SeekFrom::Start(from)).await?;
        file.read_exact(&mut chunk).await?;
        chunk.extend_from_slice(&tail);
        tail = chunk;
        start = from;
    }
}

/// The chain as the writer extends it.
pub(super) struct Chain {
    settings: ChainSettings,
    head: Head,
    /// Records written since the last checkpoint, and when the first was.
    unsigned: u64,
    since: std::time::Instant,
}

impl Chain {
    pub(super) fn new(settings: ChainSettings, head: Head) -> Self {
        Chain {
            settings,
            head,
            unsigned: 0,
            since: std::time::Instant::now(),
        }
    }

    /// `rec` as the next line of the chain (no newline), and its `seq`.
    fn link(&mut self, mut rec: Record) -> (u64, Vec<u8>) {
        rec.seq = self.head.seq + 1;
        rec.prev = self.head.sha256.clone();
        let line = serde_json::to_vec(&rec).expect("records serialise");
        self.head = Head::after(rec.seq, &line);
        if rec.decision == Decision::Checkpoint {
            self.unsigned = 0;
        } else {
            if self.unsigned == 0 {
                self.since = std::time::Instant::now();
            }
            self.unsigned += 1;
        }
        (rec.seq, line)
    }

    /// The checkpoint record due now (`force`: at rotation), if the chain
    /// has a key and records it does not cover yet.
    fn checkpoint(&self, force: bool) -> Option<Record> {
        let key = self.settings.key.as_ref()?;
        let due = self.unsigned >= CHECKPOINT_EVERY
            || (self.unsigned > 0 && (force || self.since.elapsed() >= CHECKPOINT_AFTER));
        if !due {
            return None;
        }
        let seq = self.head.seq + 1;
        let mut rec = Record::new(&self.settings.minion, "", Decision::Checkpoint);
        rec.checkpoint = Some(auditchain::checkpoint(
            key,
            &self.settings.minion,
            seq,
            &self.head.sha256,
        ));
        Some(rec)
    }
}

/// The local file, when there is one.
pub(super) struct LogFile {
    pub path: PathBuf,
    pub file: tokio::fs::File,
}

/// Where records go.
pub(super) struct Out {
    pub file: Option<LogFile>,
    pub sinks: Vec<Sink>,
    pub chain: Chain,
}

impl Out {
    async fn write(&mut self, rec: Record) {
        let keep = must_keep(rec.decision);
        let gap = rec.decision == Decision::Gap;
        let (seq, mut line) = self.chain.link(rec);
        if !self.sinks.is_empty() {
            let shipped = Line {
                seq,
                keep,
                gap,
                bytes: Arc::from(line.as_slice()),
            };
            for sink in &self.sinks {
                sink.send(shipped.clone());
            }
        }
        if let Some(f) = &mut self.file {
            line.push(b'\n');
            if let Err(e) = f.file.write_all(&line).await {
                tracing::error!(path = %f.path.display(), cause = %e, "cannot write audit record");
            }
            let _ = f.file.flush().await;
        }
    }

    /// A checkpoint when one is due, and the head kept beside it.
    async fn checkpoint(&mut self, force: bool) {
        let Some(rec) = self.chain.checkpoint(force) else {
            return;
        };
        self.write(rec).await;
        if let Some(f) = &self.chain.settings.head_file {
            let text = serde_json::to_vec(&self.chain.head).expect("a head serialises");
            let tmp = f.with_extension("tmp");
            let kept = async {
                tokio::fs::write(&tmp, &text).await?;
                tokio::fs::rename(&tmp, f).await
            };
            if let Err(e) = kept.await {
                tracing::error!(path = %f.display(), cause = %e, "cannot keep the audit chain's head");
            }
        }
    }

    /// After a rotation: the old file ends signed, the new one goes on
    /// with the same chain.
    async fn reopen(&mut self) {
        self.checkpoint(true).await;
        let Some(f) = &mut self.file else {
            return;
        };
        match open(&f.path).await {
            Ok(file) => {
                f.file = file;
                tracing::info!(path = %f.path.display(), "audit log reopened");
            }
            Err(e) => {
                tracing::error!(path = %f.path.display(), cause = %e, "cannot reopen audit log")
            }
        }
    }

    /// What is queued written, a checkpoint signing it, and the sinks
    /// given until `by` to deliver what they hold.
    async fn finish(&mut self, q: &mut Queues, by: tokio::time::Instant) {
        while let Ok(rec) = q.kept.try_recv() {
            self.write(rec).await;
        }
        while let Ok(rec) = q.noise.try_recv() {
            self.write(rec).await;
        }
        self.checkpoint(true).await;
        for sink in &self.sinks {
            sink.flush(by).await;
        }
        // The gaps the sinks recorded as they flushed, signed too.
        while let Ok(rec) = q.kept.try_recv() {
            self.write(rec).await;
        }
        self.checkpoint(true).await;
    }
}

pub(super) async fn writer(mut out: Out, mut q: Queues, audit: Audit) {
    let mut tick = tokio::time::interval(SUMMARY_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut open_queues = 2;
    while open_queues > 0 {
        let rec = tokio::select! {
            // Kept records first: noise waits while a job's record is due.
            biased;
            rec = q.kept.recv(), if !q.kept.is_closed() || !q.kept.is_empty() => rec,
            rec = q.noise.recv(), if !q.noise.is_closed() || !q.noise.is_empty() => rec,
            _ = tick.tick() => {
                out.checkpoint(false).await;
                audit.summary()
            }
            () = audit.finishing.0.notified() => {
                let by = tokio::time::Instant::now() + FINISH_WITHIN - SUMMARY_EVERY;
                out.finish(&mut q, by).await;
                audit.finishing.1.notify_one();
                continue;
            }
            () = audit.reopen.notified() => {
                out.reopen().await;
                continue;
            }
        };
        let Some(rec) = rec else {
            open_queues = usize::from(!q.kept.is_closed()) + usize::from(!q.noise.is_closed());
            continue;
        };
        out.write(rec).await;
        out.checkpoint(false).await;
    }
    // Stopping: what was written since the last checkpoint is signed.
    out.checkpoint(true).await;
}
