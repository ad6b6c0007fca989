//! What the commands read of processes and of the machine from `/proc`:
//! CPU time, RSS, whether a process still runs, and the one-line
//! description of the machine a report names.
//!
//! Every responder runs in a process of its own so that these figures are
//! its own; a reading that fails is 0 (or "not running"), never an error,
//! since a figure is reported, not asserted.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Clock ticks per second of `/proc/<pid>/stat`.
pub(super) fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|t| *t > 0.0)
        .unwrap_or(100.0)
}

/// User + system CPU of `pid` and its reaped children, in ticks.
pub(super) fn cpu_ticks(pid: i32) -> u64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0;
    };
    let Some(close) = stat.rfind(')') else {
        return 0;
    };
    // Fields after the command name start at field 3 (state); utime,
    // stime, cutime and cstime are fields 14 to 17.
    let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
    (11..=14)
        .filter_map(|i| fields.get(i)?.parse::<u64>().ok())
        .sum()
}

/// Resident set size of `pid`, in KiB.
pub(super) fn rss_kib(pid: i32) -> u64 {
    status_kib(pid, "VmRSS:")
}

/// The anonymous part of a process's RSS: its own heap, stacks and copies,
/// without the pages of its binary and of mapped files (which depend on how
/// the page cache holds those files, and are shared).
pub(super) fn rss_anon_kib(pid: i32) -> u64 {
    status_kib(pid, "RssAnon:")
}

/// A `kB` field of `/proc/<pid>/status`.
fn status_kib(pid: i32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))?
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

/// Whether `pid` is running (not gone, not a zombie).
pub(super) fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let state = s[s.rfind(')')? + 1..]
                .split_whitespace()
                .next()?
                .to_string();
            Some(state != "Z" && state != "X")
        })
        .unwrap_or(false)
}

/// Samples a process's RSS every few milliseconds until stopped; the peak.
pub(super) struct RssSampler {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<u64>,
}

impl RssSampler {
    pub(super) fn start(pid: i32) -> RssSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut peak = 0;
            while !flag.load(Ordering::Relaxed) {
                peak = peak.max(rss_kib(pid));
                std::thread::sleep(Duration::from_millis(5));
            }
            peak.max(rss_kib(pid))
        });
        RssSampler { stop, thread }
    }

    pub(super) fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or(0)
    }
}

/// The machine the run happened on.
pub(super) fn machine(redis_server: &Path) -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "unknown CPU".into());
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            let kib: u64 = m
                .lines()
                .find(|l| l.starts_with("MemTotal:"))?
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            Some(format!("{:.1} GiB RAM", kib as f64 / (1 << 20) as f64))
        })
        .unwrap_or_default();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let redis = Command::new(redis_server)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| {
            s.split_whitespace()
                .find(|w| w.starts_with("v="))
                .map(|v| format!(", redis-server {}", &v[2..]))
        })
        .unwrap_or_default();
    format!("{cpus} vCPU {model}, {mem}, Linux {kernel}{redis}")
}
