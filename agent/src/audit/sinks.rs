//! Sinks beyond the local file: a Redis stream per maid and syslog. Each
//! runs as its own task with its own spool, so a sink that is slow, full
//! or down never blocks a job nor the other sinks. A sink that cannot
//! deliver keeps the lines it was given (up to `[audit] spool`) and
//! retries with a growing pause; past the spool it gives up the oldest
//! noise first, then the oldest of the rest, and the maid records the
//! gap in the chain (a `gap` record naming the sink and the `seq` range),
//! so a reader of that sink sees what it lacks and why.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use maid_bus::{Bus, Conn};

use super::syslog::Syslog;
use super::{Decision, GapRecord, Record};

/// One record as written: its place in the chain, whether it is a record
/// that must be kept (a job that ran, a plugin event) or a `gap` record,
/// and its bytes.
#[derive(Debug, Clone)]
pub(super) struct Line {
    pub seq: u64,
    pub keep: bool,
    pub gap: bool,
    pub bytes: Arc<[u8]>,
}

enum ToSink {
    /// Lines in chain order: one burst of the writer's.
    Lines(Vec<Line>),
    /// Deliver what is held, then answer (or answer at the deadline).
    Flush(oneshot::Sender<()>),
}

/// Where a sink delivers.
pub enum Target {
    /// `XADD key MAXLEN ~ maxlen * seq N line BYTES`.
    Stream {
        bus: Box<Bus>,
        key: String,
        maxlen: u64,
    },
    /// RFC 5424 messages.
    Syslog(Syslog),
}

impl Target {
    /// The sink's name in log lines and `gap` records.
    fn name(&self) -> String {
        match self {
            Target::Stream { key, .. } => format!("stream {key}"),
            Target::Syslog(s) => format!("syslog {}", s.address()),
        }
    }

    /// `stream` or `syslog`: what a `gap` record names.
    pub fn kind(&self) -> &'static str {
        match self {
            Target::Stream { .. } => "stream",
            Target::Syslog(_) => "syslog",
        }
    }
}

/// The handle the writer holds.
pub(super) struct Sink {
    tx: mpsc::UnboundedSender<ToSink>,
}

impl Sink {
    /// Start delivering to `target`, holding at most `spool` lines it
    /// could not deliver yet; gaps are recorded through `gaps`.
    pub fn start(target: Target, spool: usize, gaps: mpsc::WeakUnboundedSender<Record>) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(Spooler::new(target, spool, gaps), rx));
        Sink { tx }
    }

    pub fn send(&self, lines: Vec<Line>) {
        let _ = self.tx.send(ToSink::Lines(lines));
    }

    /// Wait until the sink delivered what it was given, or `by`.
    pub async fn flush(&self, by: tokio::time::Instant) {
        let (tx, rx) = oneshot::channel();
        if self.tx.send(ToSink::Flush(tx)).is_ok() {
            let _ = tokio::time::timeout_at(by, rx).await;
        }
    }
}

/// Lines at most per round trip.
const BATCH: usize = 256;
/// The first pause after a failure, and the longest.
const RETRY_FIRST: Duration = Duration::from_millis(200);
const RETRY_MAX: Duration = Duration::from_secs(30);
/// How long a connection or a delivery may take before the sink counts
/// as down: a peer that accepts and never reads must not keep lines
/// piling up beyond the spool.
const DELIVER_WITHIN: Duration = Duration::from_secs(10);
/// While a sink stays down, how often what it gave up is recorded (each
/// `gap` record takes a place in the full spool, so not at every loss);
/// it is recorded at once when the sink is back, and at stop.
const GAP_EVERY: Duration = Duration::from_secs(60);

/// A sink's state: what it holds and what it gave up.
struct Spooler {
    name: String,
    target: Target,
    held: VecDeque<Line>,
    cap: usize,
    /// `seq` ranges given up since the last `gap` record.
    lost: Vec<(u64, u64)>,
    /// When the last `gap` record was made.
    gap_at: Option<tokio::time::Instant>,
    gaps: mpsc::WeakUnboundedSender<Record>,
    /// Flushes answered once `held` is empty (or the sink failed).
    waiting: Vec<oneshot::Sender<()>>,
}

impl Spooler {
    fn new(target: Target, cap: usize, gaps: mpsc::WeakUnboundedSender<Record>) -> Self {
        Spooler {
            name: target.name(),
            target,
            held: VecDeque::new(),
            cap: cap.max(1),
            lost: Vec::new(),
            gap_at: None,
            gaps,
            waiting: Vec::new(),
        }
    }

    fn take(&mut self, msg: ToSink) {
        match msg {
            ToSink::Flush(tx) => {
                self.waiting.push(tx);
                self.record_gaps(true);
            }
            ToSink::Lines(lines) => {
                for line in lines {
                    self.hold(line);
                }
            }
        }
    }

    fn hold(&mut self, line: Line) {
        if self.held.len() >= self.cap {
            // Noise first; else the oldest record but a `gap` record (the
            // only word the sink gets of what it lost); else the oldest.
            let at = self
                .held
                .iter()
                .position(|l| !l.keep)
                .or_else(|| self.held.iter().position(|l| !l.gap))
                .unwrap_or(0);
            if let Some(gone) = self.held.remove(at) {
                self.give_up(gone.seq);
            }
        }
        self.held.push_back(line);
    }

    fn give_up(&mut self, seq: u64) {
        match self.lost.iter_mut().find(|(_, to)| *to + 1 == seq) {
            Some((_, to)) => *to = seq,
            None => self.lost.push((seq, seq)),
        }
    }

    /// A `gap` record for each range given up, into the chain: now when
    /// `now`, else when the last was [`GAP_EVERY`] ago.
    fn record_gaps(&mut self, now: bool) {
        if self.lost.is_empty() || !(now || self.gap_at.is_none_or(|t| t.elapsed() >= GAP_EVERY)) {
            return;
        }
        let Some(tx) = self.gaps.upgrade() else {
            return;
        };
        self.gap_at = Some(tokio::time::Instant::now());
        self.lost.sort_unstable();
        let mut ranges: Vec<(u64, u64)> = Vec::new();
        for (from, to) in std::mem::take(&mut self.lost) {
            match ranges.last_mut() {
                Some((_, end)) if *end + 1 >= from => *end = (*end).max(to),
                _ => ranges.push((from, to)),
            }
        }
        for (from, to) in ranges {
            tracing::error!(sink = %self.name, from, to, "audit records given up: the sink was down and its spool full");
            let mut rec = Record::new("", "", Decision::Gap);
            rec.reason = Some(format!(
                "{}: records seq {from} to {to} not delivered (spool full while it was unreachable)",
                self.name
            ));
            rec.gap = Some(GapRecord {
                sink: self.target.kind().into(),
                from_seq: from,
                to_seq: to,
            });
            let _ = tx.send(rec);
        }
    }

    fn answer_flushes(&mut self) {
        for tx in self.waiting.drain(..) {
            let _ = tx.send(());
        }
    }
}

/// A connection to the target, kept between deliveries.
enum Link {
    Redis(Conn),
    Syslog(super::syslog::Socket),
}

async fn connect(target: &Target) -> Result<Link, String> {
    match target {
        Target::Stream { bus, .. } => bus
            .connect()
            .await
            .map(Link::Redis)
            .map_err(|e| e.to_string()),
        Target::Syslog(s) => s
            .connect()
            .await
            .map(Link::Syslog)
            .map_err(|e| e.to_string()),
    }
}

/// Deliver `lines`, all or nothing.
async fn deliver(target: &Target, link: &mut Link, lines: &[Line]) -> Result<(), String> {
    match (target, link) {
        (Target::Stream { key, maxlen, .. }, Link::Redis(conn)) => {
            let mut pipe = redis::pipe();
            for l in lines {
                pipe.cmd("XADD")
                    .arg(key)
                    .arg("MAXLEN")
                    .arg("~")
                    .arg(*maxlen)
                    .arg("*")
                    .arg("seq")
                    .arg(l.seq)
                    .arg("line")
                    .arg(&*l.bytes)
                    .ignore();
            }
            pipe.query_async::<()>(conn)
                .await
                .map_err(|e| e.to_string())
        }
        (Target::Syslog(s), Link::Syslog(sock)) => {
            for l in lines {
                s.send(sock, l).await.map_err(|e| e.to_string())?;
            }
            Ok(())
        }
        _ => Err("mismatched link".into()),
    }
}

/// Whether the sink is delivering, and when to try again when not.
struct Health {
    link: Option<Link>,
    pause: Duration,
    retry_at: Option<tokio::time::Instant>,
    down_since: Option<std::time::Instant>,
}

impl Health {
    fn failed(&mut self, s: &Spooler, why: &str) {
        self.link = None;
        self.retry_at = Some(tokio::time::Instant::now() + self.pause);
        self.pause = (self.pause * 2).min(RETRY_MAX);
        if self.down_since.is_none() {
            self.down_since = Some(std::time::Instant::now());
            tracing::error!(sink = %s.name, cause = %why, held = s.held.len(), "audit sink unreachable: records are spooled");
        }
    }

    /// Delivered: `true` when it had been down.
    fn delivered(&mut self, s: &Spooler) -> bool {
        self.pause = RETRY_FIRST;
        match self.down_since.take() {
            Some(since) => {
                tracing::info!(sink = %s.name, down_ms = since.elapsed().as_millis() as u64, "audit sink delivering again");
                true
            }
            None => false,
        }
    }
}

async fn run(mut s: Spooler, mut rx: mpsc::UnboundedReceiver<ToSink>) {
    let mut h = Health {
        link: None,
        pause: RETRY_FIRST,
        retry_at: None,
        down_since: None,
    };
    let mut open = true;
    loop {
        let due = h.retry_at.is_none_or(|t| t <= tokio::time::Instant::now());
        if s.held.is_empty() || !due {
            // Nothing to send, or waiting to retry: flushes are answered.
            if s.held.is_empty() || h.retry_at.is_some() {
                s.answer_flushes();
                if !open {
                    // The writer is gone: what could not go now is given up.
                    return;
                }
            }
            let wake = h
                .retry_at
                .unwrap_or_else(|| tokio::time::Instant::now() + GAP_EVERY);
            tokio::select! {
                msg = rx.recv(), if open => match msg {
                    Some(m) => s.take(m),
                    None => open = false,
                },
                () = tokio::time::sleep_until(wake) => {
                    if h.retry_at.is_some_and(|t| t <= tokio::time::Instant::now()) {
                        h.retry_at = None;
                    }
                }
            }
            while let Ok(m) = rx.try_recv() {
                s.take(m);
            }
            s.record_gaps(false);
            continue;
        }
        if h.link.is_none() {
            let connected = tokio::time::timeout(DELIVER_WITHIN, connect(&s.target))
                .await
                .unwrap_or_else(|_| Err("connecting timed out".into()));
            match connected {
                Ok(l) => h.link = Some(l),
                Err(e) => {
                    h.failed(&s, &e);
                    continue;
                }
            }
        }
        let n = s.held.len().min(BATCH);
        let batch: Vec<Line> = s.held.iter().take(n).cloned().collect();
        let link = h.link.as_mut().expect("connected above");
        let delivered = tokio::time::timeout(DELIVER_WITHIN, deliver(&s.target, link, &batch))
            .await
            .unwrap_or_else(|_| Err("delivery timed out".into()));
        match delivered {
            Ok(()) => {
                s.held.drain(..n);
                let back = h.delivered(&s);
                s.record_gaps(back);
            }
            Err(e) => h.failed(&s, &e),
        }
        while let Ok(m) = rx.try_recv() {
            s.take(m);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(seq: u64, keep: bool) -> ToSink {
        ToSink::Lines(vec![Line {
            seq,
            keep,
            gap: false,
            bytes: Arc::from(&b"{}"[..]),
        }])
    }

    #[tokio::test]
    async fn a_full_spool_gives_up_noise_first_then_the_oldest_and_records_each_range() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let target = Target::Syslog(Syslog::parse("udp://127.0.0.1:9", "m").unwrap());
        let mut s = Spooler::new(target, 3, tx.downgrade());
        for (seq, keep) in [
            (1, true),
            (2, false),
            (3, true),
            (4, true),
            (5, true),
            (6, true),
        ] {
            s.take(line(seq, keep));
        }
        // 2 (noise) went first, then 1 and 3, the oldest.
        let held: Vec<u64> = s.held.iter().map(|l| l.seq).collect();
        assert_eq!(held, [4, 5, 6]);
        s.record_gaps(true);
        let mut gaps = Vec::new();
        while let Ok(rec) = rx.try_recv() {
            let g = rec.gap.unwrap();
            assert_eq!((rec.decision, g.sink.as_str()), (Decision::Gap, "syslog"));
            gaps.push((g.from_seq, g.to_seq));
        }
        assert_eq!(gaps, [(1, 3)]);
        // Recorded once; the next loss waits for its own record.
        s.record_gaps(true);
        assert!(rx.try_recv().is_err());
        s.take(line(7, true));
        s.record_gaps(false);
        assert!(rx.try_recv().is_err(), "not again within GAP_EVERY");
        s.record_gaps(true);
        assert_eq!(rx.try_recv().unwrap().gap.unwrap().from_seq, 4);
        // A gap record in the spool outlasts the records after it.
        s.take(ToSink::Lines(vec![Line {
            seq: 8,
            keep: true,
            gap: true,
            bytes: Arc::from(&b"{}"[..]),
        }]));
        for seq in 9..12 {
            s.take(line(seq, true));
        }
        let held: Vec<u64> = s.held.iter().map(|l| l.seq).collect();
        assert_eq!(held, [8, 10, 11]);
    }
}
