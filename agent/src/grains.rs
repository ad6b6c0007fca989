//! Grains: what a minion knows about itself, for targeting (`-G os:Debian`)
//! and for plugins (`host.grains`).
//!
//! Detected from the running system once at start, then the operator's own
//! grains from the config are merged over them.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::RwLock;

use serde_json::{Map, Value, json};

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// `KEY=value` pairs of `/etc/os-release`.
fn os_release() -> Map<String, Value> {
    let mut out = Map::new();
    for line in read("/etc/os-release").unwrap_or_default().lines() {
        if let Some((k, v)) = line.split_once('=') {
            out.insert(k.to_string(), json!(v.trim_matches('"')));
        }
    }
    out
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(first) => first.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

fn mem_total_mib() -> Option<u64> {
    let info = read("/proc/meminfo")?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024)
}

/// The hostname of this machine.
pub fn hostname() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".into())
}

/// Salt's `ipv4` and `ipv6` grains: every interface address, loopback
/// included, sorted and without duplicates; what `ipcidr` targets match.
fn addresses() -> (Vec<String>, Vec<String>) {
    let (mut v4, mut v6) = (BTreeSet::new(), BTreeSet::new());
    if let Ok(addrs) = nix::ifaddrs::getifaddrs() {
        for ifaddr in addrs {
            let Some(address) = ifaddr.address else {
                continue;
            };
            if let Some(sin) = address.as_sockaddr_in() {
                v4.insert(sin.ip().to_string());
            } else if let Some(sin6) = address.as_sockaddr_in6() {
                v6.insert(sin6.ip().to_string());
            }
        }
    }
    (v4.into_iter().collect(), v6.into_iter().collect())
}

/// This host's interfaces in the shape of Salt's `network.interfaces`
/// (what `ip addr show` says, as Salt reads it): by name, in the kernel's
/// order, each with `up` and `hwaddr`, and `inet` / `inet6` lists when it
/// has addresses.
pub fn interfaces() -> Value {
    use nix::net::if_::InterfaceFlags;
    let mut out = Map::new();
    let Ok(addrs) = nix::ifaddrs::getifaddrs() else {
        return Value::Object(out);
    };
    for ifaddr in addrs {
        // An alias (`eth0:1`) belongs to its interface and labels its
        // addresses.
        let label = ifaddr.interface_name.clone();
        let name = label.split(':').next().unwrap_or(&label).to_string();
        let entry = out
            .entry(name)
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .expect("an object");
        entry.insert(
            "up".into(),
            json!(ifaddr.flags.contains(InterfaceFlags::IFF_UP)),
        );
        let Some(address) = ifaddr.address else {
            continue;
        };
        if let Some(link) = address.as_link_addr() {
            if let Some(mac) = link.addr() {
                let hex: Vec<String> = mac.iter().map(|b| format!("{b:02x}")).collect();
                entry.insert("hwaddr".into(), json!(hex.join(":")));
            }
        } else if let Some(sin) = address.as_sockaddr_in() {
            let netmask = ifaddr
                .netmask
                .as_ref()
                .and_then(|m| m.as_sockaddr_in())
                .map(|m| m.ip().to_string());
            let broadcast = ifaddr
                .broadcast
                .as_ref()
                .and_then(|b| b.as_sockaddr_in())
                .map(|b| b.ip().to_string());
            let inet = entry.entry("inet").or_insert_with(|| json!([]));
            if let Some(list) = inet.as_array_mut() {
                list.push(json!({
                    "address": sin.ip().to_string(),
                    "netmask": netmask,
                    "broadcast": broadcast,
                    "label": label,
                }));
            }
        } else if let Some(sin6) = address.as_sockaddr_in6() {
            let ip = sin6.ip();
            let prefix: u32 = ifaddr
                .netmask
                .as_ref()
                .and_then(|m| m.as_sockaddr_in6())
                .map(|m| m.ip().octets().iter().map(|b| b.count_ones()).sum())
                .unwrap_or(128);
            let scope = if ip.is_loopback() {
                "host"
            } else if ip.segments()[0] & 0xffc0 == 0xfe80 {
                "link"
            } else if ip.segments()[0] & 0xffc0 == 0xfec0 {
                "site"
            } else {
                "global"
            };
            let inet6 = entry.entry("inet6").or_insert_with(|| json!([]));
            if let Some(list) = inet6.as_array_mut() {
                list.push(json!({
                    "address": ip.to_string(),
                    "prefixlen": prefix.to_string(),
                    "scope": scope,
                }));
            }
        }
    }
    Value::Object(out)
}

/// Salt's `osarch`: the package architecture, which Debian's family names
/// its own way (`dpkg --print-architecture`); elsewhere the CPU's.
fn osarch(g: &Map<String, Value>) -> String {
    let arch = std::env::consts::ARCH;
    if g.get("os_family").and_then(Value::as_str) != Some("Debian") {
        return arch.to_string();
    }
    match arch {
        "x86_64" => "amd64",
        "x86" => "i386",
        "aarch64" => "arm64",
        "arm" => "armhf",
        "powerpc64" => "ppc64el",
        "loongarch64" => "loong64",
        "riscv64" => "riscv64",
        "s390x" => "s390x",
        other => other,
    }
    .to_string()
}

/// Detected grains for minion `id`, with `custom` merged over them.
pub fn collect(id: &str, custom: &Map<String, Value>) -> Map<String, Value> {
    let release = os_release();
    let os_id = release
        .get("ID")
        .and_then(Value::as_str)
        .unwrap_or("unknown");
    let host = hostname();
    let mut g = Map::new();
    g.insert("id".into(), json!(id));
    g.insert(
        "host".into(),
        json!(host.split('.').next().unwrap_or(&host)),
    );
    g.insert("fqdn".into(), json!(host));
    g.insert("kernel".into(), json!(capitalise(std::env::consts::OS)));
    g.insert(
        "kernelrelease".into(),
        json!(read("/proc/sys/kernel/osrelease")),
    );
    g.insert("os".into(), json!(capitalise(os_id)));
    g.insert(
        "os_family".into(),
        json!(capitalise(
            release
                .get("ID_LIKE")
                .and_then(Value::as_str)
                .and_then(|l| l.split_whitespace().next())
                .unwrap_or(os_id)
        )),
    );
    g.insert(
        "osrelease".into(),
        release.get("VERSION_ID").cloned().unwrap_or(Value::Null),
    );
    g.insert(
        "oscodename".into(),
        release
            .get("VERSION_CODENAME")
            .cloned()
            .unwrap_or(Value::Null),
    );
    g.insert(
        "osfullname".into(),
        release.get("NAME").cloned().unwrap_or(Value::Null),
    );
    g.insert("cpuarch".into(), json!(std::env::consts::ARCH));
    g.insert("osarch".into(), json!(osarch(&g)));
    g.insert(
        "num_cpus".into(),
        json!(
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        ),
    );
    g.insert("mem_total".into(), json!(mem_total_mib()));
    g.insert("maidversion".into(), json!(env!("CARGO_PKG_VERSION")));
    let (ipv4, ipv6) = addresses();
    g.insert("ipv4".into(), json!(ipv4));
    g.insert("ipv6".into(), json!(ipv6));
    for (k, v) in custom {
        g.insert(k.clone(), v.clone());
    }
    g
}

/// Why a grain set with `grains.setval` and its kin is not kept.
#[derive(Debug, thiserror::Error)]
pub enum NotKept {
    #[error("grains cannot be kept: this maid has no security.state_dir")]
    NoStateDir,
    #[error("{}: {error}", path.display())]
    Io {
        path: std::path::PathBuf,
        error: std::io::Error,
    },
}

/// The file under `security.state_dir` that keeps the grains set with
/// `grains.setval` and its kin (Salt keeps them in `/etc/salt/grains`).
pub const GRAINS_FILE: &str = "grains.json";

/// The grains kept in `state_dir`'s [`GRAINS_FILE`] (none when it is
/// missing or unreadable, which is logged).
pub fn persisted(state_dir: Option<&Path>) -> Map<String, Value> {
    let Some(path) = state_dir.map(|d| d.join(GRAINS_FILE)) else {
        return Map::new();
    };
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            tracing::error!(path = %path.display(), cause = %e, "grains file unreadable; ignored");
            Map::new()
        }),
        Err(_) => Map::new(),
    }
}

/// The operator's grains as Salt ranks them: the kept ones (`grains.setval`)
/// under the configuration's, which win.
pub(crate) fn custom(state_dir: Option<&Path>, config: &Map<String, Value>) -> Map<String, Value> {
    let mut out = persisted(state_dir);
    for (k, v) in config {
        out.insert(k.clone(), v.clone());
    }
    out
}

/// The grains of minion `id` under `config`: detected, then the kept ones
/// (`grains.setval`), then the configuration's.
pub fn of_config(id: &str, config: &crate::config::Config) -> Map<String, Value> {
    collect(
        id,
        &custom(config.security.state_dir.as_deref(), &config.grains),
    )
}

/// A maid's live grains: read by targeting, the registry and plugins;
/// changed by `grains.setval` and its kin, which also keep them in the
/// grains file so they survive a restart.
pub struct GrainStore {
    live: RwLock<Map<String, Value>>,
    /// `live` as JSON, what every plugin call that reads the grains gets:
    /// made when the grains change, not per call.
    json: RwLock<String>,
    /// The grains file, when the maid has a `state_dir`.
    file: Option<PathBuf>,
    /// Woken when the grains change: the registry is written at once.
    changed: tokio::sync::Notify,
}

impl GrainStore {
    /// `grains`, kept in `state_dir` when there is one.
    pub fn new(grains: Map<String, Value>, state_dir: Option<&Path>) -> Self {
        Self {
            json: RwLock::new(Value::Object(grains.clone()).to_string()),
            live: RwLock::new(grains),
            file: state_dir.map(|d| d.join(GRAINS_FILE)),
            changed: tokio::sync::Notify::new(),
        }
    }

    /// The grains now.
    pub fn read(&self) -> std::sync::RwLockReadGuard<'_, Map<String, Value>> {
        self.live.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The grains now, as JSON.
    pub fn json(&self) -> String {
        self.json.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Set grain `key` to `value`, or remove it (`None`): first in the
    /// grains file, then live. Without a `state_dir` nothing can be kept,
    /// and nothing changes.
    pub fn set(&self, key: &str, value: Option<Value>) -> Result<(), NotKept> {
        let Some(file) = &self.file else {
            return Err(NotKept::NoStateDir);
        };
        let dir = file.parent().unwrap_or(Path::new("/"));
        let mut kept = persisted(Some(dir));
        match &value {
            Some(v) => kept.insert(key.to_string(), v.clone()),
            None => kept.remove(key),
        };
        let json = serde_json::to_vec_pretty(&kept).expect("grains serialise");
        let io = |error| NotKept::Io {
            path: file.clone(),
            error,
        };
        let staged =
            crate::fsutil::staged_in(dir, |w| std::io::Write::write_all(w, &json)).map_err(io)?;
        staged.persist(file).map_err(|e| io(e.error))?;
        {
            let mut live = self.live.write().unwrap_or_else(|e| e.into_inner());
            match value {
                Some(v) => live.insert(key.to_string(), v),
                None => live.remove(key),
            };
            *self.json.write().unwrap_or_else(|e| e.into_inner()) =
                Value::Object(live.clone()).to_string();
        }
        // A permit is kept if the heartbeat is busy registering just now.
        self.changed.notify_one();
        Ok(())
    }

    /// Replace the grains whole (`saltutil.refresh_grains`); the kept ones
    /// are in `grains` already, and the grains file is not touched.
    pub fn replace(&self, grains: Map<String, Value>) {
        {
            let mut live = self.live.write().unwrap_or_else(|e| e.into_inner());
            *self.json.write().unwrap_or_else(|e| e.into_inner()) =
                Value::Object(grains.clone()).to_string();
            *live = grains;
        }
        self.changed.notify_one();
    }

    /// Wait until the grains change.
    pub async fn changed(&self) {
        self.changed.notified().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detected_and_custom() {
        let mut custom = Map::new();
        custom.insert("roles".into(), json!(["web"]));
        custom.insert("os".into(), json!("Override"));
        let g = collect("m1", &custom);
        assert_eq!(g["id"], "m1");
        assert_eq!(g["kernel"], "Linux");
        assert_eq!(g["os"], "Override");
        assert_eq!(g["roles"], json!(["web"]));
        assert!(g["num_cpus"].as_u64().unwrap() >= 1);
        assert!(g["mem_total"].as_u64().unwrap() > 0);
    }

    #[test]
    fn set_grains_are_kept_and_ranked_under_the_config() {
        let dir = tempfile::tempdir().unwrap();
        let store = GrainStore::new(collect("m1", &Map::new()), Some(dir.path()));
        store.set("role", Some(json!("db"))).unwrap();
        store.set("os", Some(json!("Mine"))).unwrap();
        assert_eq!(store.read()["role"], "db");
        assert_eq!(persisted(Some(dir.path()))["role"], "db");
        store.set("os", None).unwrap();
        assert!(!store.read().contains_key("os"));
        let mut config = Map::new();
        config.insert("role".into(), json!("web"));
        let merged = custom(Some(dir.path()), &config);
        assert_eq!(merged["role"], "web", "the configuration wins, as in Salt");
        // Without a state_dir nothing is kept and nothing changes.
        let store = GrainStore::new(Map::new(), None);
        assert!(store.set("x", Some(json!(1))).is_err());
        assert!(store.read().is_empty());
    }
}
