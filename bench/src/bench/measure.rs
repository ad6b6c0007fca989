//! What `maid-bench run` measures and how: a responder's round trips,
//! throughput, CPU and RSS ([`Measured`]), a fan-out round's CPU on each
//! side ([`RoundCpu`]), the agent's own timings from its `/metrics`
//! ([`MeanOf`], [`scrape`]), a direct spawn ([`spawn_direct`]), and the
//! percentiles the tables show.
//!
//! Kept apart from the scenarios that fill these in, so the arithmetic a
//! goal rests on can be read (and tested) without starting a process.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use super::procfs::cpu_ticks;

/// The agent's histogram of message arrival to PING published.
pub(super) const PING_LATENCY: &str = "maid_ping_latency_seconds";
/// The agent's histogram of `test.ping` calls in its plugin runtime.
pub(super) const PING_DURATION: &str = "maid_job_duration_seconds{fun=\"test.ping\"}";
/// The agent's histogram of `cmd.run` calls in its plugin runtime.
pub(super) const CMD_DURATION: &str = "maid_job_duration_seconds{fun=\"cmd.run\"}";

/// Nearest-rank percentile of sorted samples.
pub(super) fn percentile<T: Copy + Default>(sorted: &[T], p: f64) -> T {
    if sorted.is_empty() {
        return T::default();
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The samples, sorted for [`percentile`].
pub(super) fn sorted(mut v: Vec<Duration>) -> Vec<Duration> {
    v.sort();
    v
}

/// The p50 of some samples, or `None` when there are none.
pub(super) fn p50(samples: &[Duration]) -> Option<Duration> {
    (!samples.is_empty()).then(|| percentile(&sorted(samples.to_vec()), 50.0))
}

/// What one responder measured.
#[derive(Default)]
pub(super) struct Measured {
    pub(super) latencies: Vec<Duration>,
    pub(super) pings: Vec<Duration>,
    pub(super) flood_jobs: usize,
    pub(super) flood_time: Duration,
    pub(super) cpu_ticks: u64,
    /// This process's (the master's) CPU over the same runs.
    pub(super) master_ticks: u64,
    pub(super) rss_idle_kib: u64,
    pub(super) rss_idle_anon_kib: u64,
    pub(super) rss_after_kib: u64,
    pub(super) rss_peak_kib: u64,
}

impl Measured {
    pub(super) fn p(&self, pct: f64) -> Duration {
        percentile(&sorted(self.latencies.clone()), pct)
    }

    pub(super) fn ping_p(&self, pct: f64) -> Duration {
        percentile(&sorted(self.pings.clone()), pct)
    }

    pub(super) fn throughput(&self) -> f64 {
        self.flood_jobs as f64 / self.flood_time.as_secs_f64().max(1e-9)
    }

    pub(super) fn cpu_per_job(&self, ticks_per_sec: f64) -> Duration {
        Duration::from_secs_f64(
            self.cpu_ticks as f64 / ticks_per_sec / self.flood_jobs.max(1) as f64,
        )
    }

    pub(super) fn master_cpu_per_job(&self, ticks_per_sec: f64) -> Duration {
        Duration::from_secs_f64(
            self.master_ticks as f64 / ticks_per_sec / self.flood_jobs.max(1) as f64,
        )
    }
}

/// One fleet's fan-out rounds, summed: the CPU that its process,
/// redis-server and the master (this process) used from each round's
/// publish to a point after it. Counted to the round's last reply,
/// it bounds the round: the three share the machine's cores and
/// redis-server runs on one, so no round can be shorter than that CPU
/// spread over the cores, nor than redis-server's own, whatever the
/// responders do. CPU is read in clock ticks (10 ms), so the means want
/// many rounds.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct RoundCpu {
    rounds: u32,
    /// Clock ticks (`/proc/<pid>/stat`), each process's.
    fleet: u64,
    redis: u64,
    master: u64,
}

impl RoundCpu {
    /// The ticks of the fleet's process, redis-server and this process.
    pub(super) fn sample(fleet: i32, redis: i32) -> [u64; 3] {
        let master = i32::try_from(std::process::id()).unwrap_or_default();
        [cpu_ticks(fleet), cpu_ticks(redis), cpu_ticks(master)]
    }

    pub(super) fn add(&mut self, before: [u64; 3], after: [u64; 3]) {
        self.rounds += 1;
        self.fleet += after[0].saturating_sub(before[0]);
        self.redis += after[1].saturating_sub(before[1]);
        self.master += after[2].saturating_sub(before[2]);
    }

    /// Means per round of the CPU of the fleet, redis-server and the
    /// master, with `ticks` clock ticks a second.
    pub(super) fn means(&self, ticks: f64) -> [Duration; 3] {
        let n = self.rounds.max(1);
        let cpu = |t: u64| Duration::from_secs_f64(t as f64 / ticks) / n;
        [cpu(self.fleet), cpu(self.redis), cpu(self.master)]
    }

    /// The least a round can take here: all three's CPU spread over every
    /// core, and never less than redis-server's own, which runs on one.
    pub(super) fn least(&self, ticks: f64, cpus: usize) -> Duration {
        let [fleet, redis, master] = self.means(ticks);
        let spread = (fleet + redis + master) / u32::try_from(cpus.max(1)).unwrap_or(u32::MAX);
        spread.max(redis)
    }
}

/// The maid agent's counters, from its `/metrics` (Prometheus text).
pub(super) async fn scrape(port: u16) -> HashMap<String, f64> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let read = async {
        let mut s = tokio::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port)).await?;
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            .await?;
        let mut text = String::new();
        s.read_to_string(&mut text).await?;
        std::io::Result::Ok(text)
    };
    let text = match tokio::time::timeout(Duration::from_secs(5), read).await {
        Ok(Ok(t)) => t,
        _ => return HashMap::new(),
    };
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (k, v) = l.rsplit_once(' ')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

/// Sum and count of a Prometheus histogram, summed over scrapes.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct MeanOf {
    sum: f64,
    count: f64,
}

impl MeanOf {
    /// Add what `name` (a histogram, labels included) grew by between two
    /// scrapes.
    pub(super) fn add(
        &mut self,
        before: &HashMap<String, f64>,
        after: &HashMap<String, f64>,
        name: &str,
    ) {
        let (base, labels) = name
            .split_once('{')
            .map_or((name, String::new()), |(b, l)| (b, format!("{{{l}")));
        let get = |m: &HashMap<String, f64>, suffix: &str| {
            m.get(&format!("{base}_{suffix}{labels}"))
                .copied()
                .unwrap_or(0.0)
        };
        self.sum += get(after, "sum") - get(before, "sum");
        self.count += get(after, "count") - get(before, "count");
    }

    pub(super) fn mean(&self) -> Option<Duration> {
        (self.count > 0.0).then(|| Duration::from_secs_f64(self.sum / self.count))
    }
}

/// Spawn a program with its output captured (as the agent does) and wait.
pub(super) fn spawn_direct(mut cmd: Command) -> anyhow::Result<Duration> {
    cmd.stdin(Stdio::null());
    let started = Instant::now();
    let out = cmd.output().context("spawn `true`")?;
    let took = started.elapsed();
    if !out.status.success() {
        bail!("`true` failed: {}", out.status);
    }
    Ok(took)
}
