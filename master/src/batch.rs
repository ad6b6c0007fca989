//! Salt's rolling batch (`salt -b N`, salt-api's `local_batch`): the
//! selected minions run a job at most `size` at a time, a new one started
//! as each returns, all under one jid (as Salt 3008 does: each maid still
//! runs the jid once, since every sub-batch names other minions).

use std::collections::{BTreeSet, VecDeque};
use std::future::Future;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;

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
    use tokio::time::Instant;

    let size = size.max(1);
    let mut pending: VecDeque<String> = ids.into();
    let mut in_flight: BTreeSet<String> = BTreeSet::new();
    // When each resting slot (`pace.wait`) is free again, soonest first.
    let mut resting: VecDeque<Instant> = VecDeque::new();
    let mut running = tokio::task::JoinSet::new();
    let (tx, mut rx) = mpsc::unbounded_channel::<Return>();
    let mut outcome = Outcome::default();
    // A minion done: its slot rests, if the batch waits.
    let finished = |in_flight: &mut BTreeSet<String>, resting: &mut VecDeque<Instant>, id: &str| {
        if in_flight.remove(id) && !pace.wait.is_zero() {
            resting.push_back(Instant::now() + pace.wait);
        }
    };
    // A return shown, its retcode kept for the exit status.
    let mut show = |outcome: &mut Outcome, ret: &Return| {
        on_return(ret);
        outcome.retcodes.push(ret.retcode);
    };
    // Returns wait here until the slots they freed have taken the next
    // minions: Salt announces the next sub-batch before it shows the
    // returns that made room for it.
    let mut held: Vec<Return> = Vec::new();
    // A return in is held; `true` when it trips `failhard`.
    let trips = |ret: &Return| pace.failhard && ret.retcode > 0;
    loop {
        let now = Instant::now();
        while resting.front().is_some_and(|t| *t <= now) {
            resting.pop_front();
        }
        let free = size.saturating_sub(in_flight.len() + resting.len());
        if free > 0 && !pending.is_empty() {
            let next: Vec<String> = pending.drain(..free.min(pending.len())).collect();
            on_start(&next);
            in_flight.extend(next.iter().cloned());
            let mut sub = req.clone();
            sub.tgt = Value::Array(next.iter().cloned().map(Value::String).collect());
            sub.tgt_type = "list".into();
            let job = launch(sub, tx.clone());
            running.spawn(async move { (next, job.await) });
            continue;
        }
        // Nothing more starts now: what is held is shown.
        for r in held.drain(..) {
            show(&mut outcome, &r);
        }
        if running.is_empty() {
            // Nothing runs, so nobody is in flight.
            in_flight.clear();
            if pending.is_empty() {
                break;
            }
            // Only resting slots stand between the batch and its next
            // minions.
            if let Some(t) = resting.front() {
                tokio::time::sleep_until(*t).await;
            }
            continue;
        }
        let rest = resting.front().copied();
        tokio::select! {
            Some(ret) = rx.recv() => {
                finished(&mut in_flight, &mut resting, &ret.id);
                outcome.halted = trips(&ret);
                held.push(ret);
            }
            Some(done) = running.join_next() => {
                let (ids, report) = done.map_err(|e| {
                    BusError::Config(format!("a batch's job task failed: {e}"))
                })?;
                let report = report?;
                // Returns still queued are the report's own: take them first.
                while !outcome.halted && let Ok(ret) = rx.try_recv() {
                    finished(&mut in_flight, &mut resting, &ret.id);
                    outcome.halted = trips(&ret);
                    held.push(ret);
                }
                outcome.reports.push(report);
                // Whoever it targeted and did not hear from is done too.
                for id in &ids {
                    finished(&mut in_flight, &mut resting, id);
                }
            }
            // A resting slot comes free (only while there is more to start).
            () = tokio::time::sleep_until(rest.unwrap_or(now)), if rest.is_some() && !pending.is_empty() => {}
        }
        // A halted batch starts nothing more: it shows what it holds, the
        // return that halted it last.
        if outcome.halted {
            for r in held.drain(..) {
                show(&mut outcome, &r);
            }
            break;
        }
    }
    // What is still running when the batch halts goes on on the minions,
    // as under Salt; nobody waits for it here.
    running.abort_all();
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> JobRequest {
        JobRequest {
            master_topic: "t".into(),
            tgt: Value::String("*".into()),
            tgt_type: "glob".into(),
            fun: "test.retcode".into(),
            arg: vec![],
            kwarg: Default::default(),
            timeout: Duration::from_secs(5),
            user: None,
            out: None,
            exclude: Default::default(),
            linger: Duration::ZERO,
            key: None,
            source_hashes: Default::default(),
            pki: None,
            gather_job_timeout: None,
            delimiter: None,
        }
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
