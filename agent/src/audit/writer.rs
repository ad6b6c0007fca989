//! The one writer of a maid's audit trail: it takes records from the
//! queues, links each into the hash chain (`seq`, `prev`), writes the line
//! to the file and hands the same bytes to every other sink, and signs
//! checkpoints — every [`CHECKPOINT_EVERY`] records or
//! [`CHECKPOINT_AFTER`], before the file is reopened and at stop.
//!
//! Lines leave in bursts: a linked line waits at most [`BATCH_WITHIN`]
//! (or until [`BATCH_BYTES`] or [`BATCH_LINES`] are held) for those after
//! it, then the burst is appended to the file in one write and handed to
//! each sink in one message. While a burst is open the writer does not
//! watch its queues, so the records sent meanwhile wake nobody; they join
//! the burst when it is due. A write to a `tokio::fs::File` is a hand-off
//! to the blocking pool and back, each message wakes a sink's task, and
//! each record sent to an idle writer woke it: with a line each, they
//! cost more than the rest of a record. A checkpoint, a reopen and a stop
//! release what is held first.

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

/// How long a linked line may wait for others to leave with it.
pub const BATCH_WITHIN: std::time::Duration = std::time::Duration::from_millis(5);
/// Bytes of lines held before they leave, however new.
pub const BATCH_BYTES: usize = 256 * 1024;
/// Lines held before they leave, however new.
pub const BATCH_LINES: usize = 1024;

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

    /// `rec` as the next line of the chain, serialised onto the end of
    /// `into` (no newline); its `seq`.
    fn link(&mut self, mut rec: Record, into: &mut Vec<u8>) -> u64 {
        // Every record names its maid, those made without one (a gap, a
        // summary of noise) too: a verifier holds each record of a chain
        // to the chain's maid.
        if rec.minion.is_empty() {
            rec.minion.clone_from(&self.settings.minion);
        }
        rec.seq = self.head.seq + 1;
        rec.prev = std::mem::take(&mut self.head.sha256);
        let start = into.len();
        serde_json::to_writer(&mut *into, &rec).expect("records serialise");
        self.head = Head::after(rec.seq, &into[start..]);
        if rec.decision == Decision::Checkpoint {
            self.unsigned = 0;
        } else {
            if self.unsigned == 0 {
                self.since = std::time::Instant::now();
            }
            self.unsigned += 1;
        }
        rec.seq
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
    /// Lines linked and not yet appended to the file, each ending in a
    /// newline (without a file: the line being linked, then nothing).
    pub held: Vec<u8>,
    /// The same lines, not yet handed to the sinks (none without sinks).
    pub shipping: Vec<Line>,
}

impl Out {
    /// Link `rec` into the chain and hold it for the next release.
    fn write(&mut self, rec: Record) {
        let keep = must_keep(rec.decision);
        let gap = rec.decision == Decision::Gap;
        let start = self.held.len();
        let seq = self.chain.link(rec, &mut self.held);
        if !self.sinks.is_empty() {
            self.shipping.push(Line {
                seq,
                keep,
                gap,
                bytes: Arc::from(&self.held[start..]),
            });
        }
        if self.file.is_some() {
            self.held.push(b'\n');
        } else {
            self.held.clear();
        }
    }

    /// Whether linked lines wait to leave.
    fn holds(&self) -> bool {
        !self.held.is_empty() || !self.shipping.is_empty()
    }

    /// Whether what is held must leave now, however new.
    fn full(&self) -> bool {
        self.held.len() >= BATCH_BYTES || self.shipping.len() >= BATCH_LINES
    }

    /// What queued while a burst was open joins it, kept records first;
    /// at most a burst's worth (the rest opens the next one).
    async fn gather(&mut self, q: &mut Queues) {
        for _ in 0..BATCH_LINES {
            let Ok(rec) = q.kept.try_recv().or_else(|_| q.noise.try_recv()) else {
                return;
            };
            self.write(rec);
            if self.full() {
                return;
            }
            self.checkpoint(false).await;
        }
    }

    /// What is held handed to each sink in one message and appended to
    /// the file in one write.
    async fn release(&mut self) {
        if !self.shipping.is_empty() {
            let lines = std::mem::take(&mut self.shipping);
            if let Some((last, others)) = self.sinks.split_last() {
                for sink in others {
                    sink.send(lines.clone());
                }
                last.send(lines);
            }
        }
        let Some(f) = &mut self.file else {
            self.held.clear();
            return;
        };
        if self.held.is_empty() {
            return;
        }
        if let Err(e) = f.file.write_all(&self.held).await {
            tracing::error!(path = %f.path.display(), cause = %e, "cannot write audit records");
        }
        let _ = f.file.flush().await;
        self.held.clear();
    }

    /// A checkpoint when one is due, and the head kept beside it.
    async fn checkpoint(&mut self, force: bool) {
        let Some(rec) = self.chain.checkpoint(force) else {
            return;
        };
        self.write(rec);
        // The signed lines leave before the head is kept.
        self.release().await;
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
        self.release().await;
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
            self.write(rec);
        }
        while let Ok(rec) = q.noise.try_recv() {
            self.write(rec);
        }
        self.checkpoint(true).await;
        self.release().await;
        for sink in &self.sinks {
            sink.flush(by).await;
        }
        // The gaps the sinks recorded as they flushed, signed too.
        while let Ok(rec) = q.kept.try_recv() {
            self.write(rec);
        }
        self.checkpoint(true).await;
        self.release().await;
    }
}

pub(super) async fn writer(mut out: Out, mut q: Queues, audit: Audit) {
    let mut tick = tokio::time::interval(SUMMARY_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // When what is held leaves: set as the first line is held.
    let due = tokio::time::sleep(BATCH_WITHIN);
    tokio::pin!(due);
    let mut open_queues = 2;
    while open_queues > 0 {
        let rec = tokio::select! {
            // A burst open, the queues are not watched: what is sent
            // meanwhile wakes nobody, and joins the burst when it is due.
            // Kept records before noise: noise waits while a job's record
            // is due.
            biased;
            () = &mut due, if out.holds() => {
                out.gather(&mut q).await;
                out.release().await;
                continue;
            }
            rec = q.kept.recv(), if !out.holds() && (!q.kept.is_closed() || !q.kept.is_empty()) => rec,
            rec = q.noise.recv(), if !out.holds() && (!q.noise.is_closed() || !q.noise.is_empty()) => rec,
            _ = tick.tick() => {
                out.checkpoint(false).await;
                // Nothing to summarise is no closed queue.
                let Some(rec) = audit.summary() else {
                    continue;
                };
                Some(rec)
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
            // A queue is done once closed and drained (a burst may still
            // have to gather what it holds).
            let done_with = |closed: bool, empty: bool| usize::from(!(closed && empty));
            open_queues = done_with(q.kept.is_closed(), q.kept.is_empty())
                + done_with(q.noise.is_closed(), q.noise.is_empty());
            continue;
        };
        let first = !out.holds();
        out.write(rec);
        if first {
            due.as_mut()
                .reset(tokio::time::Instant::now() + BATCH_WITHIN);
        }
        if out.full() {
            out.release().await;
        }
        out.checkpoint(false).await;
    }
    // Stopping: what was written since the last checkpoint is signed.
    out.checkpoint(true).await;
    out.release().await;
}
