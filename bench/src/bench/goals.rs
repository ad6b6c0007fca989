//! The goals of `maid-bench run`: each a figure of the run held against a
//! bound, and whether it was met.
//!
//! Each goal is computed from figures measured in the same run, so that
//! the machine's load reaches both sides of every ratio alike; the idle
//! RSS alone is an absolute bound. BENCHMARKS.md quotes these rows, so
//! their wording and order are part of its format.

use super::measure::Measured;
use super::results::Results;
use super::table::{fmt_ratio, fmt_signed_us};

/// The side of its bound a goal must stay on.
#[derive(Debug, Clone, Copy)]
enum Bound {
    AtMost(f64),
    AtLeast(f64),
}

impl Bound {
    fn holds(self, x: f64) -> bool {
        match self {
            Bound::AtMost(b) => x <= b,
            Bound::AtLeast(b) => x >= b,
        }
    }
}

/// One goal: a figure measured in this run, and the bound it must keep.
pub(super) struct Goal {
    what: String,
    /// `None` when this run did not measure it (the seed left out, say).
    measured: Option<f64>,
    bound: Bound,
    /// The unit after the bound (`" µs"`), empty for a ratio.
    unit: &'static str,
    show: fn(f64) -> String,
}

impl Goal {
    /// The goal's row: what, measured, bound, met or MISSED.
    pub(super) fn cells(&self) -> Vec<String> {
        let bound = match self.bound {
            Bound::AtMost(b) => format!("≤ {b}{}", self.unit),
            Bound::AtLeast(b) => format!("≥ {b}{}", self.unit),
        };
        let result = match self.measured {
            Some(x) if self.bound.holds(x) => "met",
            Some(_) => "MISSED",
            None => "n/a",
        };
        vec![
            self.what.clone(),
            self.measured.map(self.show).unwrap_or_else(|| "n/a".into()),
            bound,
            result.into(),
        ]
    }
}

/// The goals, each computed from figures measured in this same run, so
/// that the machine's load reaches both sides of every ratio alike. The
/// fan-out is held against the floor that keeps the protocol, and
/// `cmd.run` with the round trip and the spawn taken out, because the
/// absolute bounds these replaced (50 ms, 150 µs over the spawn) were
/// out of reach of any responder on a slow machine.
pub(super) fn goals(r: &Results) -> Vec<Goal> {
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    let throughput = |name| r.measured(name).map(Measured::throughput);
    vec![
        Goal {
            what: "maid p50 / raw p50 (round trip)".into(),
            measured: ratio(r.round_trip_p50("maid"), r.round_trip_p50("raw")),
            bound: Bound::AtMost(1.3),
            unit: "",
            show: fmt_ratio,
        },
        Goal {
            what: "maid throughput / raw throughput".into(),
            measured: ratio(throughput("maid"), throughput("raw")),
            bound: Bound::AtLeast(0.5),
            unit: "",
            show: fmt_ratio,
        },
        Goal {
            what: "seed p50 / maid p50 (round trip)".into(),
            measured: ratio(r.round_trip_p50("seed"), r.round_trip_p50("maid")),
            bound: Bound::AtLeast(30.0),
            unit: "",
            show: fmt_ratio,
        },
        Goal {
            what: format!(
                "fan-out to {} agents: maid p50 / protocol floor p50 (no maid code)",
                r.agents
            ),
            measured: r.fanout_over(&r.protocol_fanout),
            bound: Bound::AtMost(1.2),
            unit: "",
            show: fmt_ratio,
        },
        Goal {
            what:
                "cmd.run's own share: cmd.run 'true' − test.ping round trip − spawning `true`, p50s"
                    .into(),
            measured: r.cmd_own_us(),
            bound: Bound::AtMost(100.0),
            unit: " µs",
            show: fmt_signed_us,
        },
        Goal {
            what: "audit on (file and stream): audited maid throughput / maid throughput".into(),
            measured: ratio(throughput("audited"), throughput("maid")),
            bound: Bound::AtLeast(0.85),
            unit: "",
            show: fmt_ratio,
        },
        Goal {
            what: "signed jobs and replies: signed maid p50 / maid p50 (round trip)".into(),
            measured: ratio(r.round_trip_p50("signed"), r.round_trip_p50("maid")),
            bound: Bound::AtMost(1.2),
            unit: "",
            show: fmt_ratio,
        },
        Goal {
            what: "signed jobs and replies: maid throughput / signed maid throughput".into(),
            measured: ratio(throughput("maid"), throughput("signed")),
            bound: Bound::AtMost(1.2),
            unit: "",
            show: fmt_ratio,
        },
        Goal {
            what: "start-up to ready: cold cache, plugins compiled ahead / warm cache (p50s)"
                .into(),
            measured: r.cold_over_warm(),
            bound: Bound::AtMost(10.0),
            unit: "",
            show: fmt_ratio,
        },
        Goal {
            what: "idle RSS after a cold start, plugins compiled ahead / after a warm start (p50s)"
                .into(),
            measured: r.rss_over_warm(&r.cold_rss_kib),
            bound: Bound::AtMost(1.5),
            unit: "",
            show: fmt_ratio,
        },
        Goal {
            what: "maid idle RSS".into(),
            measured: r
                .measured("maid")
                .map(|m| m.rss_idle_kib as f64 * 1024.0 / 1e6),
            bound: Bound::AtMost(20.0),
            unit: " MB",
            show: |mb| format!("{mb:.1} MB"),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::goals;
    use crate::bench::measure::Measured;
    use crate::bench::results::Results;
    use std::time::Duration;

    fn us(n: u64) -> Vec<Duration> {
        vec![Duration::from_micros(n)]
    }

    fn responder(round_trip_us: u64, jobs: usize, rss_idle_kib: u64) -> Measured {
        Measured {
            latencies: us(round_trip_us),
            flood_jobs: jobs,
            flood_time: Duration::from_secs(1),
            rss_idle_kib,
            ..Measured::default()
        }
    }

    /// The eleven goals, each from figures of the same run: `cmd.run`'s
    /// own share takes the `test.ping` round trip and the direct spawn
    /// out, the fan-out is held against the protocol floor.
    #[test]
    fn the_goals_are_computed_from_the_runs_own_figures() {
        let r = Results {
            responders: vec![
                ("raw", Some(responder(100, 1000, 10_000))),
                ("maid", Some(responder(120, 400, 18_000))),
                ("audited", Some(responder(130, 360, 18_500))),
                ("signed", Some(responder(150, 320, 18_600))),
                ("seed", Some(responder(6000, 10, 30_000))),
            ],
            cmd_run: us(1000),
            spawn_true: us(800),
            fanout: us(55_000),
            protocol_fanout: us(50_000),
            raw_fanout: us(40_000),
            cold: vec![Duration::from_millis(60), Duration::from_millis(80)],
            warm: vec![Duration::from_millis(10); 3],
            cold_rss_kib: vec![21_000, 32_000],
            compiling_rss_kib: vec![33_000],
            warm_rss_kib: vec![20_000, 21_000, 22_000],
            ..Results::default()
        };
        let rows: Vec<Vec<String>> = goals(&r).iter().map(|g| g.cells()).collect();
        let row = |i: usize| rows[i].iter().map(String::as_str).collect::<Vec<_>>();
        assert_eq!(rows.len(), 11, "{rows:?}");
        assert_eq!(row(0)[1..], ["1.20", "≤ 1.3", "met"]);
        assert_eq!(row(1)[1..], ["0.40", "≥ 0.5", "MISSED"]);
        assert_eq!(row(2)[1..], ["50", "≥ 30", "met"]);
        assert_eq!(row(3)[1..], ["1.10", "≤ 1.2", "met"]);
        assert_eq!(row(4)[1..], ["80 µs", "≤ 100 µs", "met"]);
        assert_eq!(row(5)[1..], ["0.90", "≥ 0.85", "met"]);
        assert_eq!(row(6)[1..], ["1.25", "≤ 1.2", "MISSED"]);
        assert_eq!(row(7)[1..], ["1.25", "≤ 1.2", "MISSED"]);
        // p50s: the lower middle of two.
        assert_eq!(row(8)[1..], ["6.00", "≤ 10", "met"]);
        assert_eq!(row(9)[1..], ["1.00", "≤ 1.5", "met"]);
        assert_eq!(row(10)[1..], ["18.4 MB", "≤ 20 MB", "met"]);
    }

    /// What a run did not measure is n/a, never met.
    #[test]
    fn a_goal_not_measured_is_neither_met_nor_missed() {
        for goal in goals(&Results::default()) {
            let cells = goal.cells();
            assert_eq!(cells[1..], ["n/a", cells[2].as_str(), "n/a"], "{cells:?}");
        }
    }
}
