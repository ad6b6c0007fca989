//! Salt's `status` module on Linux: uptime, load, memory, CPUs and disk
//! space, read from the `/proc` files the grants name one by one (never
//! `/proc` itself, where every process's environment lies) and from `df`
//! and `who` where the grants allow them.

use std::collections::BTreeSet;

use maid_sdk::host::{self, Command};
use maid_sdk::{Call, Capability, Error, Function, Plugin, export_plugin, function, python};
use serde_json::{Map, Value, json};

struct Status;

fn proc_text(path: &str) -> Result<String, Error> {
    let bytes = host::read_file(path)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// `days` since 1970-01-01 as (year, month, day), proleptic Gregorian.
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Python's `datetime.isoformat()` of a naive UTC time: microseconds only
/// when there are some.
fn isoformat(t: f64) -> String {
    let micros_total = (t * 1e6).round() as i64;
    let secs = micros_total.div_euclid(1_000_000);
    let micros = micros_total.rem_euclid(1_000_000);
    let (y, m, d) = civil(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    let base = format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
        s / 3600,
        s % 3600 / 60,
        s % 60
    );
    if micros == 0 {
        base
    } else {
        format!("{base}.{micros:06}")
    }
}

/// Return how long the host has been up: seconds, since_iso, since_t, days, time, users
#[function]
fn uptime() -> Result<Value, Error> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|e| Error::failed(e.to_string(), 1))?
        .as_secs_f64();
    let text = proc_text("/proc/uptime")?;
    let seconds = text
        .split_whitespace()
        .next()
        .and_then(|s| s.parse::<f64>().ok())
        .ok_or_else(|| Error::failed("/proc/uptime: unreadable", 1))?
        .trunc() as i64;
    let mut ret = json!({
        "seconds": seconds,
        "since_iso": isoformat(now - seconds as f64),
        "since_t": (now - seconds as f64).trunc() as i64,
        "days": seconds.div_euclid(86_400),
        "time": format!("{}:{}", seconds.rem_euclid(86_400) / 3600, seconds % 3600 / 60),
    });
    // As Salt: users only where `who` can be run, counted as the lines of
    // `who -s` (one for no output at all).
    if matches!(host::which("who"), Ok(Some(_))) {
        let out = Command::new("who").arg("-s").output()?;
        let text = out.stdout_lossy();
        ret["users"] = json!(text.trim_end().split('\n').count());
    }
    Ok(ret)
}

/// Return the load averages: {1-min, 5-min, 15-min}
#[function]
fn loadavg() -> Result<Value, Error> {
    let text = proc_text("/proc/loadavg")?;
    let l: Vec<f64> = text
        .split_whitespace()
        .take(3)
        .filter_map(|v| v.parse().ok())
        .collect();
    let [one, five, fifteen] = l[..] else {
        return Err(Error::failed("/proc/loadavg: unreadable", 1));
    };
    Ok(json!({"1-min": one, "5-min": five, "15-min": fifteen}))
}

/// Return /proc/meminfo as {name: {value, unit}}
// Salt's `linux_meminfo`: `{name: {value, unit}}`.
#[function]
fn meminfo() -> Result<Value, Error> {
    let mut ret = Map::new();
    for line in proc_text("/proc/meminfo")?.lines() {
        let comps: Vec<&str> = line.split_whitespace().collect();
        let Some(name) = comps.first() else {
            continue;
        };
        let mut entry = Map::new();
        if let Some(v) = comps.get(1) {
            entry.insert("value".into(), json!(v));
        }
        if let Some(u) = comps.get(2) {
            entry.insert("unit".into(), json!(u));
        }
        ret.insert(name.replace(':', ""), Value::Object(entry));
    }
    Ok(Value::Object(ret))
}

/// Return /proc/cpuinfo as {name: value}
// Salt's `linux_cpuinfo`: each `key: value` line, the last CPU's winning;
// `flags` split into a list.
#[function]
fn cpuinfo() -> Result<Value, Error> {
    let mut ret = Map::new();
    for line in proc_text("/proc/cpuinfo")?.lines() {
        if line.is_empty() {
            continue;
        }
        let mut comps = line.split(':');
        let key = comps.next().unwrap_or_default().trim().to_string();
        let value = comps.next().unwrap_or_default();
        if key == "flags" {
            let flags: Vec<&str> = value.split_whitespace().collect();
            ret.insert(key, json!(flags));
        } else {
            ret.insert(key, json!(value.trim()));
        }
    }
    Ok(Value::Object(ret))
}

/// Python's `fnmatch.translate` then `re.match`, for filesystem types.
fn fstype_matches(fstype: &str, patterns: &BTreeSet<String>) -> bool {
    patterns.iter().any(|p| {
        p == "*" || {
            let mut rest = fstype;
            let mut ok = true;
            // Only `*` is special in a filesystem type in practice.
            let parts: Vec<&str> = p.split('*').collect();
            for (i, part) in parts.iter().enumerate() {
                if i == 0 {
                    if !rest.starts_with(part) {
                        ok = false;
                        break;
                    }
                    rest = &rest[part.len()..];
                } else if let Some(at) = rest.find(part) {
                    rest = &rest[at + part.len()..];
                } else {
                    ok = false;
                    break;
                }
            }
            ok && (p.ends_with('*') || rest.is_empty())
        }
    })
}

/// Return {mount: {available, total}} for the mounts or filesystem types named
// Salt's `status.diskusage`: `{mount: {available, total}}` in bytes, for
// the mounts named or those of the filesystem types named (all without
// arguments).
#[function(raw, args = ["*args"])]
fn diskusage(call: &Call) -> Result<Value, Error> {
    let mut selected = BTreeSet::new();
    let mut fstypes = BTreeSet::new();
    if call.args.is_empty() {
        fstypes.insert("*".to_string());
    }
    for a in &call.args {
        let a = python::str(a);
        if a.starts_with('/') {
            selected.insert(a);
        } else {
            fstypes.insert(a);
        }
    }
    if !fstypes.is_empty() {
        for line in proc_text("/proc/mounts")?.lines() {
            let comps: Vec<&str> = line.split_whitespace().collect();
            if comps.len() >= 3 && fstype_matches(comps[2], &fstypes) {
                selected.insert(comps[1].replace("\\040", " "));
            }
        }
    }
    let mut ret = Map::new();
    if selected.is_empty() {
        return Ok(Value::Object(ret));
    }
    // statfs through df, one line per mount: size and available in bytes.
    let out = Command::new("df")
        .args(["-B1", "--output=target,size,avail", "--"])
        .args(selected.iter().cloned())
        .output()?;
    for line in out.stdout_lossy().lines().skip(1) {
        let comps: Vec<&str> = line.split_whitespace().collect();
        let n = comps.len();
        if n < 3 {
            continue;
        }
        let (Ok(avail), Ok(size)) = (comps[n - 1].parse::<u64>(), comps[n - 2].parse::<u64>())
        else {
            continue;
        };
        let target = comps[..n - 2].join(" ");
        let target = target.as_str();
        if selected.contains(target) {
            ret.insert(
                target.to_string(),
                json!({"available": avail, "total": size}),
            );
        }
    }
    Ok(Value::Object(ret))
}

impl Plugin for Status {
    const MODULE: &'static str = "status";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const CAPABILITIES: &'static [Capability] = &[Capability::FsRead, Capability::Exec];

    fn functions() -> Vec<Function> {
        maid_sdk::functions![uptime, loadavg, meminfo, cpuinfo, diskusage]
    }
}

export_plugin!(Status);
