//! Everything one `maid-bench run` measured ([`Results`]), and the figures
//! the goals and the tables derive from it.
//!
//! The scenarios fill it in; [`super::goals`] and [`super::report`] only
//! read it, so a report can be built from figures made up in a test.

use std::time::Duration;

use super::master::TgtType;
use super::measure::{MeanOf, Measured, RoundCpu, p50, percentile};
use super::procfs::clock_ticks;
use super::run::{BenchArgs, Sizes};

/// The fan-out fleets, as `Results::in_round` and `with_pause` index them.
pub(super) const RAW: usize = 0;
pub(super) const MAID: usize = 1;
pub(super) const PROTOCOL: usize = 2;

/// The p50 of RSS samples in KiB (by [`percentile`]'s rank, as [`p50`]),
/// `None` of none.
pub(super) fn median_kib(samples: &[u64]) -> Option<f64> {
    let mut v = samples.to_vec();
    v.sort_unstable();
    (!v.is_empty()).then(|| percentile(&v, 50.0) as f64)
}

/// Everything measured, for the tables.
#[derive(Default)]
pub(super) struct Results {
    pub(super) responders: Vec<(&'static str, Option<Measured>)>,
    pub(super) seed_skipped: Option<String>,
    pub(super) ticks: f64,
    /// Start-ups on a cold cache, the plugins compiled ahead.
    pub(super) cold: Vec<Duration>,
    /// Start-ups on a cold cache, nothing compiled ahead.
    pub(super) compiling: Vec<Duration>,
    pub(super) warm: Vec<Duration>,
    /// Each start-up's RSS once ready and settled, in the same order.
    pub(super) cold_rss_kib: Vec<u64>,
    pub(super) compiling_rss_kib: Vec<u64>,
    pub(super) warm_rss_kib: Vec<u64>,
    /// How long `maid plugin compile` took for the plugins.
    pub(super) compile_ahead: Duration,
    pub(super) plugins: usize,
    pub(super) cmd_run: Vec<Duration>,
    /// `test.ping` through `Runtime::call` in this process.
    pub(super) calls: Vec<Duration>,
    /// `cmd.run 'true'` through `Runtime::call` in this process.
    pub(super) cmd_calls: Vec<Duration>,
    pub(super) spawn_true: Vec<Duration>,
    pub(super) spawn_sh: Vec<Duration>,
    pub(super) agents: usize,
    pub(super) fanout: Vec<Duration>,
    pub(super) fanout_pings: Vec<Duration>,
    /// The same fan-out to as many raw responders (the floor).
    pub(super) raw_fanout: Vec<Duration>,
    /// And to as many raw responders that send what the protocol asks
    /// (`maid-bench raw --protocol`).
    pub(super) protocol_fanout: Vec<Duration>,
    pub(super) fleet_ready: Duration,
    /// Each fleet's rounds (raw, maid, protocol), their CPU counted to
    /// the last reply: what bounds a round.
    pub(super) in_round: [RoundCpu; 3],
    /// The same rounds, their CPU counted to the end of the 50 ms pause
    /// after each: work left over after the last reply counts too.
    pub(super) with_pause: [RoundCpu; 3],
    /// The CPUs this machine has.
    pub(super) cpus: usize,
    /// The maid agent's own means (`--agent-metrics`).
    pub(super) arrival_to_ping: MeanOf,
    pub(super) ping_in_runtime: MeanOf,
    pub(super) cmd_in_runtime: MeanOf,
    pub(super) agent_metrics: bool,
    pub(super) tgt_type: TgtType,
    pub(super) fleet_rss_kib: u64,
    pub(super) fanout_threads: usize,
    pub(super) in_flight: usize,
}

impl Results {
    /// A run's results before anything is measured: what the tables say
    /// of the run itself (its sizes, its targeting, this machine).
    pub(super) fn start(args: &BenchArgs, sizes: &Sizes, plugins: usize) -> Results {
        Results {
            ticks: clock_ticks(),
            plugins,
            agents: sizes.agents,
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            agent_metrics: args.agent_metrics,
            tgt_type: args.tgt_type,
            fanout_threads: sizes.fanout_threads,
            in_flight: sizes.in_flight,
            ..Results::default()
        }
    }

    /// What the responder `name` measured; `None` when it did not run
    /// (the seed left out).
    pub(super) fn measured(&self, name: &str) -> Option<&Measured> {
        self.responders
            .iter()
            .find(|(n, _)| *n == name)
            .and_then(|(_, m)| m.as_ref())
    }

    /// The p50 round trip of `test.ping` to one responder, in seconds.
    pub(super) fn round_trip_p50(&self, name: &str) -> Option<f64> {
        self.measured(name).map(|m| m.p(50.0).as_secs_f64())
    }

    /// Responder `a`'s round-trip p50 over `b`'s.
    pub(super) fn p50_over(&self, a: &str, b: &str) -> Option<f64> {
        over(self.round_trip_p50(a)?, self.round_trip_p50(b)?)
    }

    /// Responder `a`'s throughput over `b`'s.
    pub(super) fn throughput_over(&self, a: &str, b: &str) -> Option<f64> {
        let of = |name| self.measured(name).map(Measured::throughput);
        over(of(a)?, of(b)?)
    }

    /// Responder `a`'s CPU per job in the throughput run over `b`'s.
    pub(super) fn cpu_over(&self, a: &str, b: &str) -> Option<f64> {
        let of = |name| {
            self.measured(name)
                .map(|m| m.cpu_per_job(self.ticks).as_secs_f64())
        };
        over(of(a)?, of(b)?)
    }

    /// `cmd.run 'true'`'s round trip over spawning `true` directly (p50s,
    /// µs): the old absolute goal, which counts a whole pub/sub round trip.
    pub(super) fn cmd_over_spawn_us(&self) -> Option<f64> {
        let cmd = p50(&self.cmd_run)?;
        let spawn = p50(&self.spawn_true)?;
        Some((cmd.as_secs_f64() - spawn.as_secs_f64()) * 1e6)
    }

    /// What of `cmd.run 'true'` is the agent's own: its round trip less a
    /// `test.ping` round trip (the pub/sub hops and the plugin call) and
    /// less spawning `true` directly (the kernel's share), p50s in µs.
    pub(super) fn cmd_own_us(&self) -> Option<f64> {
        Some(self.cmd_over_spawn_us()? - self.round_trip_p50("maid")? * 1e6)
    }

    /// The p50 start-up on a cold cache, the plugins compiled ahead, over
    /// the p50 start-up on a warm one.
    pub(super) fn cold_over_warm(&self) -> Option<f64> {
        let cold = p50(&self.cold)?.as_secs_f64();
        let warm = p50(&self.warm)?.as_secs_f64();
        (warm > 0.0).then(|| cold / warm)
    }

    /// The RSS once ready after a cold start (`cold`: the plugins
    /// compiled ahead, or a start that compiled them all) over the RSS
    /// after a warm one, p50s.
    pub(super) fn rss_over_warm(&self, cold: &[u64]) -> Option<f64> {
        let warm = median_kib(&self.warm_rss_kib)?;
        let cold = median_kib(cold)?;
        (warm > 0.0).then(|| cold / warm)
    }

    /// maid's fan-out round over a floor's, p50s.
    pub(super) fn fanout_over(&self, floor: &[Duration]) -> Option<f64> {
        let maid = p50(&self.fanout)?.as_secs_f64();
        let floor = p50(floor)?.as_secs_f64();
        (floor > 0.0).then(|| maid / floor)
    }
}

/// `a / b`, `None` when `b` is not above zero (nothing measured).
fn over(a: f64, b: f64) -> Option<f64> {
    (b > 0.0).then(|| a / b)
}
