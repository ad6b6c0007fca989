//! Salt's rolling batch (`salt -b N`, salt-api's `local_batch`): the
//! selected minions run a job at most `size` at a time, a new one started
//! as each returns, all under one jid (as Salt 3008 does: each maid still
//! runs the jid once, since every sub-batch names other minions).

use std::collections::{BTreeSet, VecDeque};
use std::future::Future;

use serde_json::Value;
use tokio::sync::mpsc;

use crate::bus::BusError;
use crate::jobs::{JobRequest, Report};
use crate::protocol::Return;

/// What Salt says of a batch it cannot read.
pub fn invalid(batch: &str) -> String {
    format!(
        "Invalid batch specification {}: must be an integer or percentage string like '10' or '25%'.",
        maid_protocol::salt::python::repr(&Value::String(batch.to_string()))
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

/// What a batch run saw: every sub-batch's report.
#[derive(Debug, Default)]
pub struct Outcome {
    pub reports: Vec<Report>,
}

impl Outcome {
    /// The highest retcode any minion returned (`salt -b` exits with it).
    pub fn max_retcode(&self) -> i32 {
        self.reports
            .iter()
            .flat_map(|r| &r.returns)
            .map(|r| r.retcode)
            .max()
            .unwrap_or(0)
    }
}

/// Run `req` on `ids` (in this order) a batch of `size` at a time. Each
/// sub-batch is `req` retargeted to a list of its ids and run by
/// `launch`, which hands every return to the sender it is given as it
/// arrives and ends with the sub-batch's report. `on_start` is told each
/// sub-batch as it starts, `on_return` each return.
pub async fn run<F, Fut>(
    ids: Vec<String>,
    size: usize,
    req: &JobRequest,
    mut launch: F,
    mut on_start: impl FnMut(&[String]),
    mut on_return: impl FnMut(&Return),
) -> Result<Outcome, BusError>
where
    F: FnMut(JobRequest, mpsc::UnboundedSender<Return>) -> Fut,
    Fut: Future<Output = Result<Report, BusError>> + Send + 'static,
{
    let size = size.max(1);
    let mut pending: VecDeque<String> = ids.into();
    let mut in_flight: BTreeSet<String> = BTreeSet::new();
    let mut running = tokio::task::JoinSet::new();
    let (tx, mut rx) = mpsc::unbounded_channel::<Return>();
    let mut outcome = Outcome::default();
    loop {
        let free = size.saturating_sub(in_flight.len());
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
        if running.is_empty() {
            break;
        }
        tokio::select! {
            Some(ret) = rx.recv() => {
                in_flight.remove(&ret.id);
                on_return(&ret);
            }
            Some(done) = running.join_next() => {
                let (ids, report) = done.map_err(|e| {
                    BusError::Config(format!("a batch's job task failed: {e}"))
                })?;
                let report = report?;
                // Returns still queued are the report's own: take them first.
                while let Ok(ret) = rx.try_recv() {
                    in_flight.remove(&ret.id);
                    on_return(&ret);
                }
                // Whoever it targeted and did not hear from is done too.
                for id in &ids {
                    in_flight.remove(id);
                }
                outcome.reports.push(report);
            }
        }
    }
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

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
