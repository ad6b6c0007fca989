//! Salt's rolling batch (`salt -b N`, salt-api's `local_batch`): the
//! selected minions run a job at most `size` at a time, a new one started
//! as each returns, all under one jid (as Salt 3008 does: each maid still
//! runs the jid once, since every sub-batch names other minions).

use std::collections::{BTreeSet, VecDeque};
use std::future::Future;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::bus::BusError;
use crate::jobs::{JobRequest, Report};
use crate::protocol::Return;

/// What Salt says of a batch it cannot read.
pub fn invalid(batch: &str) -> String {
    format!(
        "Invalid batch specification {}: must be an integer or percentage string like '10' or '25%'.",
        maid_salt::python::repr(&Value::String(batch.to_string()))
    )
}

/// How many of `total` minions a batch of `batch` (`3`, `25%`) runs at
/// once, as Salt's `get_batch_size`: at least one; a percentage of the
/// targeted rounds down. `None` for a batch that is neither.
pub fn size(batch: &str, total: usize) -> Option<usize> {
    let b = batch.trim();
    if b.contains('%') {
        // `10%` or `%10`, as Salt's `strip("%")` reads either.
        let pct: f64 = b.trim_matches('%').trim().parse().ok()?;
        let res = pct / 100.0 * total as f64;
        if res < 1.0 {
            return Some(1);
        }
        return res.is_finite().then_some(res as usize);
    }
    let n: i64 = b.parse().ok()?;
    Some(usize::try_from(n).unwrap_or(0).max(1))
}

/// How a batch moves on, as Salt's `batch_wait` and `failhard` say.
#[derive(Debug, Clone, Copy, Default)]
pub struct Pace {
    /// How long a slot rests after its minion returned (or was given up
    /// on) before it takes the next minion.
    pub wait: Duration,
    /// Stop at the first return with a non-zero retcode: nothing more is
    /// started, and nothing more is shown.
    pub failhard: bool,
}

/// What a batch run saw: every sub-batch's report.
#[derive(Debug, Default)]
pub struct Outcome {
    pub reports: Vec<Report>,
    /// The retcodes of the returns shown, highest first met.
    retcodes: Vec<i32>,
    /// A return tripped `failhard`, and the batch stopped there.
    pub halted: bool,
}

impl Outcome {
    /// The highest retcode any minion returned (`salt -b` exits with it).
    pub fn max_retcode(&self) -> i32 {
        self.retcodes.iter().copied().max().unwrap_or(0)
    }
}

/// Run `req` on `ids` (in this order) a batch of `size` at a time, moving
/// on as `pace` says. Each sub-batch is `req` retargeted to a list of its
/// ids and run by `launch`, which hands every return to the sender it is
/// given as it arrives and ends with the sub-batch's report. `on_start`
/// is told each sub-batch as it starts, `on_return` each return shown.
pub async fn run<F, Fut>(
    ids: Vec<String>,
    size: usize,
    pace: Pace,
    req: &JobRequest,
    mut launch: F,
    mut on_start: impl FnMut(&[String]),
    mut on_return: impl FnMut(&Return),
) -> Result<Outcome, BusError>
where
    F: FnMut(JobRequest, mpsc::UnboundedSender<Return>) -> Fut,
    Fut: Future<Output = Result<Report, BusError>> + Send + 'static,
{
    let mut batch = Batch::new(ids, size, pace);
    let (tx, mut rx) = mpsc::unbounded_channel::<Return>();
    loop {
        let now = Instant::now();
        let free = batch.free_slots(now);
        if free > 0 && !batch.pending.is_empty() {
            batch.start(free, req, &tx, &mut launch, &mut on_start);
            continue;
        }
        // Nothing more starts now: what is held is shown.
        batch.show_held(&mut on_return);
        if batch.running.is_empty() {
            // Nothing runs, so nobody is in flight.
            batch.in_flight.clear();
            if batch.pending.is_empty() {
                break;
            }
            // Only resting slots stand between the batch and its next
            // minions.
            if let Some(t) = batch.resting.front() {
                tokio::time::sleep_until(*t).await;
            }
            continue;
        }
        batch.next_event(now, &mut rx).await?;
        // A halted batch starts nothing more: it shows what it holds, the
        // return that halted it last.
        if batch.outcome.halted {
            batch.show_held(&mut on_return);
            break;
        }
    }
    // What is still running when the batch halts goes on on the minions,
    // as under Salt; nobody waits for it here.
    batch.running.abort_all();
    Ok(batch.outcome)
}

/// A batch under way, between the steps of [`run`]: whom it has yet to
/// start, what runs, which slots rest, and what it has seen.
struct Batch {
    /// How many minions run at once (at least one).
    size: usize,
    pace: Pace,
    /// The minions not started yet, in the order they start.
    pending: VecDeque<String>,
    /// The minions started that have neither returned nor been given up
    /// on: each holds a slot.
    in_flight: BTreeSet<String>,
    /// When each resting slot (`pace.wait`) is free again, soonest first.
    resting: VecDeque<Instant>,
    /// The sub-batches' jobs, each ending with its ids and its report.
    running: JoinSet<(Vec<String>, Result<Report, BusError>)>,
    /// Returns wait here until the slots they freed have taken the next
    /// minions: Salt announces the next sub-batch before it shows the
    /// returns that made room for it.
    held: Vec<Return>,
    outcome: Outcome,
}

impl Batch {
    fn new(ids: Vec<String>, size: usize, pace: Pace) -> Batch {
        Batch {
            size: size.max(1),
            pace,
            pending: ids.into(),
            in_flight: BTreeSet::new(),
            resting: VecDeque::new(),
            running: JoinSet::new(),
            held: Vec::new(),
            outcome: Outcome::default(),
        }
    }

    /// How many minions may start at `now`: the slots neither running a
    /// minion nor resting (the rests over by `now` are forgotten first).
    fn free_slots(&mut self, now: Instant) -> usize {
        while self.resting.front().is_some_and(|t| *t <= now) {
            self.resting.pop_front();
        }
        self.size
            .saturating_sub(self.in_flight.len() + self.resting.len())
    }

    /// Start the next `free` pending minions as one sub-batch, told to
    /// `on_start` first: `req` retargeted to a list of them, launched
    /// with a sender for its returns.
    fn start<F, Fut>(
        &mut self,
        free: usize,
        req: &JobRequest,
        tx: &mpsc::UnboundedSender<Return>,
        launch: &mut F,
        on_start: &mut impl FnMut(&[String]),
    ) where
        F: FnMut(JobRequest, mpsc::UnboundedSender<Return>) -> Fut,
        Fut: Future<Output = Result<Report, BusError>> + Send + 'static,
    {
        let next: Vec<String> = self.pending.drain(..free.min(self.pending.len())).collect();
        on_start(&next);
        self.in_flight.extend(next.iter().cloned());
        let mut sub = req.clone();
        sub.tgt = Value::Array(next.iter().cloned().map(Value::String).collect());
        sub.tgt_type = "list".into();
        let job = launch(sub, tx.clone());
        self.running.spawn(async move { (next, job.await) });
    }

    /// Wait for whichever comes first: a return, the end of a
    /// sub-batch's job, or (only while there is more to start) a resting
    /// slot coming free, whose rest `now` measures.
    async fn next_event(
        &mut self,
        now: Instant,
        rx: &mut mpsc::UnboundedReceiver<Return>,
    ) -> Result<(), BusError> {
        let rest = self.resting.front().copied();
        tokio::select! {
            Some(ret) = rx.recv() => self.hold(ret),
            Some(done) = self.running.join_next() => {
                let (ids, report) = done.map_err(|e| {
                    BusError::Config(format!("a batch's job task failed: {e}"))
                })?;
                self.sub_batch_done(&ids, report?, rx);
            }
            // A resting slot comes free (only while there is more to start).
            () = tokio::time::sleep_until(rest.unwrap_or(now)), if rest.is_some() && !self.pending.is_empty() => {}
        }
        Ok(())
    }

    /// The job of the sub-batch of `ids` ended with `report`.
    fn sub_batch_done(
        &mut self,
        ids: &[String],
        report: Report,
        rx: &mut mpsc::UnboundedReceiver<Return>,
    ) {
        // Returns still queued are the report's own: take them first.
        while !self.outcome.halted
            && let Ok(ret) = rx.try_recv()
        {
            self.hold(ret);
        }
        self.outcome.reports.push(report);
        // Whoever it targeted and did not hear from is done too.
        for id in ids {
            self.finished(id);
        }
    }

    /// A return in: its minion is done and the return is held; the batch
    /// halts when it trips `failhard`.
    fn hold(&mut self, ret: Return) {
        self.finished(&ret.id);
        self.outcome.halted = self.pace.failhard && ret.retcode > 0;
        self.held.push(ret);
    }

    /// A minion done: its slot rests, if the batch waits.
    fn finished(&mut self, id: &str) {
        if self.in_flight.remove(id) && !self.pace.wait.is_zero() {
            self.resting.push_back(Instant::now() + self.pace.wait);
        }
    }

    /// Show what is held, in the order it came, each retcode kept for
    /// the exit status.
    fn show_held(&mut self, on_return: &mut impl FnMut(&Return)) {
        for r in self.held.drain(..) {
            on_return(&r);
            self.outcome.retcodes.push(r.retcode);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> JobRequest {
        JobRequest::to_all("test.retcode")
    }

    fn ret(id: &str, retcode: i32) -> Return {
        Return {
            sub_ip: id.into(),
            jid: "j".into(),
            id: id.into(),
            fun: "test.retcode".into(),
            fun_args: vec![],
            ret: Value::from(retcode),
            retcode,
            success: retcode == 0,
            out: "nested".into(),
            stamp: String::new(),
            ret_: Default::default(),
            sealed_return: None,
        }
    }

    /// A batch whose minions return at once with the retcode `code` gives
    /// each: what started, when, and what was shown.
    async fn batch(
        ids: &[&str],
        size: usize,
        pace: Pace,
        code: fn(&str) -> i32,
    ) -> (
        Vec<(Vec<String>, tokio::time::Instant)>,
        Vec<String>,
        Outcome,
    ) {
        let mut started = Vec::new();
        let mut shown = Vec::new();
        let launch = |sub: JobRequest, tx: mpsc::UnboundedSender<Return>| async move {
            for id in sub.tgt.as_array().unwrap() {
                let id = id.as_str().unwrap();
                let _ = tx.send(ret(id, code(id)));
            }
            Ok(Report::default())
        };
        let outcome = run(
            ids.iter().map(|s| s.to_string()).collect(),
            size,
            pace,
            &request(),
            launch,
            |next| started.push((next.to_vec(), tokio::time::Instant::now())),
            |r| shown.push(r.id.clone()),
        )
        .await
        .unwrap();
        (started, shown, outcome)
    }

    #[tokio::test]
    async fn failhard_starts_nothing_after_a_failed_return() {
        let fails_b = |id: &str| if id == "b" { 3 } else { 0 };
        let failhard = Pace {
            failhard: true,
            ..Pace::default()
        };
        let (started, shown, outcome) = batch(&["a", "b", "c", "d"], 1, failhard, fails_b).await;
        let started: Vec<Vec<String>> = started.into_iter().map(|(ids, _)| ids).collect();
        assert_eq!(started, [vec!["a".to_string()], vec!["b".to_string()]]);
        assert_eq!(shown, ["a", "b"]);
        assert!(outcome.halted);
        assert_eq!(outcome.max_retcode(), 3);
        // Without it, every minion runs and the highest retcode stands.
        let (_, shown, outcome) = batch(&["a", "b", "c", "d"], 1, Pace::default(), fails_b).await;
        assert_eq!(shown, ["a", "b", "c", "d"]);
        assert!(!outcome.halted);
        assert_eq!(outcome.max_retcode(), 3);
    }

    #[tokio::test]
    async fn batch_wait_rests_a_slot_before_the_next_minion() {
        let wait = Duration::from_millis(150);
        let pace = Pace {
            wait,
            ..Pace::default()
        };
        let (started, shown, _) = batch(&["a", "b", "c"], 1, pace, |_| 0).await;
        assert_eq!(shown, ["a", "b", "c"]);
        assert_eq!(started.len(), 3);
        // Each minion starts no sooner than `wait` after the one before
        // it returned (at once, here).
        for pair in started.windows(2) {
            assert!(pair[1].1 - pair[0].1 >= wait, "{:?}", pair[1].1 - pair[0].1);
        }
    }

    #[test]
    fn batch_sizes_are_salts() {
        assert_eq!(size("50%", 5), Some(2));
        assert_eq!(size("10%", 3), Some(1));
        assert_eq!(size("100%", 3), Some(3));
        assert_eq!(size(" 2 ", 5), Some(2));
        assert_eq!(size("%40", 5), Some(2));
        // Salt runs at least one, whatever the number says.
        assert_eq!(size("0", 5), Some(1));
        assert_eq!(size("-1", 5), Some(1));
        assert_eq!(size("0%", 5), Some(1));
        for bad in ["x", "x%", "", "1.5", "nan%"] {
            assert_eq!(size(bad, 5), None, "{bad}");
        }
        assert_eq!(
            invalid("many"),
            "Invalid batch specification 'many': must be an integer or percentage string like '10' or '25%'."
        );
    }
}
