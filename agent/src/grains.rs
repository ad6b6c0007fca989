//! Grains: what a minion knows about itself, for targeting (`-G os:Debian`)
//! and for plugins (`host.grains`).
//!
//! The core grains are detected by the grains plugin's private `_core`,
//! under that plugin's grants, at start and on `saltutil.refresh_grains`;
//! the agent adds what it knows of itself (`id`, `master`, `saltversion`,
//! …), then the kept grains and the operator's own from the config are
//! merged over them.

use std::path::{Path, PathBuf};
use std::sync::RwLock;

use serde_json::{Map, Value, json};

/// The hostname of this machine.
pub fn hostname() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".into())
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

/// The Salt release whose minion maid answers as ([`maid_salt::SALT_VERSION`]).
pub use maid_salt::SALT_VERSION;

/// The grains the agent knows of itself rather than reads from the host:
/// its id, where its jobs come from (`master`: the host of each Redis it
/// takes them from, as Salt names its master's host), what it is
/// (`saltversion`, `saltversioninfo`, `maidversion`, `package`) and where
/// its modules are (`saltpath`: the plugin directory).
pub fn own(id: &str, config: &crate::config::Config) -> Map<String, Value> {
    let mut g = Map::new();
    g.insert("id".into(), json!(id));
    g.insert("master".into(), master(&config.redis));
    g.insert("saltversion".into(), json!(SALT_VERSION));
    let info: Vec<u64> = SALT_VERSION
        .split('.')
        .filter_map(|p| p.parse().ok())
        .collect();
    g.insert("saltversioninfo".into(), json!(info));
    g.insert(
        "saltpath".into(),
        json!(config.plugin_dir.as_ref().map(|d| d.display().to_string())),
    );
    g.insert("maidversion".into(), json!(env!("CARGO_PKG_VERSION")));
    // Salt's `package` says how Salt was installed; maid is no Salt package.
    g.insert("package".into(), Value::Null);
    g
}

/// The `master` grain: the host of each Redis jobs come from (never a
/// password), one as a string and several as a list, as Salt reports one
/// master or several.
fn master(redis: &maid_bus::RedisConfig) -> Value {
    let urls = redis
        .url
        .iter()
        .chain(&redis.sentinels)
        .chain(&redis.cluster);
    let mut hosts: Vec<String> = Vec::new();
    for url in urls {
        if let Some(host) = reqwest::Url::parse(url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_string))
            && !hosts.contains(&host)
        {
            hosts.push(host);
        }
    }
    match hosts.len() {
        0 => json!(""),
        1 => json!(hosts[0]),
        _ => json!(hosts),
    }
}

/// The variables of the agent's environment `_core` is told, and no other.
const PROCESS_ENV: [&str; 7] = [
    "PATH", "SHELL", "LC_ALL", "LC_CTYPE", "LANG", "LANGUAGE", "TZ",
];

/// What the grains plugin's `_core` is told of this process, which no
/// file grant reaches: its pid, user and group ids, working directory and
/// the variables Salt reads its `path`, `shell` and `locale_info` from.
fn process(id: &str) -> Map<String, Value> {
    let mut env = Map::new();
    for name in PROCESS_ENV {
        if let Some(value) = std::env::var_os(name) {
            env.insert(name.into(), json!(value.to_string_lossy()));
        }
    }
    let mut facts = Map::new();
    facts.insert("id".into(), json!(id));
    facts.insert("pid".into(), json!(std::process::id()));
    facts.insert("uid".into(), json!(nix::unistd::getuid().as_raw()));
    facts.insert("gid".into(), json!(nix::unistd::getgid().as_raw()));
    facts.insert(
        "cwd".into(),
        json!(
            std::env::current_dir()
                .map(|d| d.display().to_string())
                .unwrap_or_default()
        ),
    );
    facts.insert("env".into(), Value::Object(env));
    facts
}

/// The private function of the grains plugin that detects the core grains.
pub const CORE: &str = "grains._core";

/// Why the core grains were not detected: the maid then has only its own
/// grains and the operator's, and targets on the rest match nothing.
#[derive(Debug, thiserror::Error)]
pub enum Undetected {
    #[error("{CORE} failed: {0}")]
    Failed(String),
    #[error("{CORE} returned {0}, not an object")]
    NotAnObject(String),
}

/// Detect the core grains (`os`, `ipv4`, `virtual`, … as Salt 3008 on
/// Linux) by calling the grains plugin's private `_core` as minion `id`,
/// under that plugin's grants: what it reads and runs is what the grains
/// plugin's grants allow. Also what it did outside its sandbox, for the
/// audit.
pub async fn detect(
    runtime: &crate::runtime::Runtime,
    id: &str,
) -> (
    Result<Map<String, Value>, Undetected>,
    Vec<crate::runtime::CapabilityUse>,
) {
    let outcome = runtime
        .call(crate::runtime::CallRequest {
            fun: CORE.into(),
            kwargs: process(id),
            jid: "grains".into(),
            minion_id: id.into(),
            private: true,
            ..Default::default()
        })
        .await;
    let detected = match (outcome.success(), outcome.ret) {
        (false, Value::String(why)) => Err(Undetected::Failed(why)),
        (false, other) => Err(Undetected::Failed(other.to_string())),
        (true, Value::Object(map)) => Ok(map),
        (true, other) => Err(Undetected::NotAnObject(other.to_string())),
    };
    (detected, outcome.used)
}

/// The grains of minion `id` under `config`, as Salt ranks them: the core
/// grains detected through `runtime`'s grains plugin, the agent's own,
/// then the kept ones (`grains.setval`), then the configuration's; and
/// what detecting them did outside the sandbox. A detection that fails is
/// logged and leaves the core grains out.
pub async fn detected(
    runtime: &crate::runtime::Runtime,
    id: &str,
    config: &crate::config::Config,
) -> (Map<String, Value>, Vec<crate::runtime::CapabilityUse>) {
    let (core, used) = detect(runtime, id).await;
    let mut g = core.unwrap_or_else(|e| {
        tracing::error!(cause = %e, "core grains not detected: targets on them match nothing");
        Map::new()
    });
    g.extend(of_config(id, config));
    (g, used)
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

/// The grains of minion `id` under `config` but for the detected ones:
/// the agent's own, then the kept ones (`grains.setval`), then the
/// configuration's. What a maid starts with until [`detected`] returns.
pub fn of_config(id: &str, config: &crate::config::Config) -> Map<String, Value> {
    let mut g = own(id, config);
    g.extend(custom(config.security.state_dir.as_deref(), &config.grains));
    g
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
    fn the_agents_own_grains_and_the_operators_over_them() {
        let mut config = crate::config::Config::default();
        config.redis.url = Some("redis://:secret@redis.example:6380/0".into());
        config.plugin_dir = Some("/usr/lib/maid/plugins".into());
        config.grains.insert("roles".into(), json!(["web"]));
        config.grains.insert("saltversion".into(), json!("mine"));
        let g = of_config("m1", &config);
        assert_eq!(g["id"], "m1");
        assert_eq!(g["master"], "redis.example", "the host, never the password");
        assert_eq!(g["saltversioninfo"], json!([3008, 4]));
        assert_eq!(g["saltpath"], "/usr/lib/maid/plugins");
        assert_eq!(g["roles"], json!(["web"]));
        assert_eq!(
            g["saltversion"], "mine",
            "the configuration wins, as in Salt"
        );
        config.redis.url = None;
        config.redis.sentinels = vec!["redis://s1:26379".into(), "redis://s2:26379".into()];
        assert_eq!(own("m1", &config)["master"], json!(["s1", "s2"]));
        config.redis.sentinels.clear();
        assert_eq!(own("m1", &config)["master"], "");
    }

    #[test]
    fn the_process_facts_core_is_told() {
        let facts = process("m1");
        assert_eq!(facts["pid"], json!(std::process::id()));
        assert_eq!(facts["uid"], json!(nix::unistd::getuid().as_raw()));
        assert!(
            facts["env"]
                .as_object()
                .unwrap()
                .keys()
                .all(|k| PROCESS_ENV.contains(&k.as_str())),
            "no other variable reaches a plugin"
        );
    }

    #[test]
    fn set_grains_are_kept_and_ranked_under_the_config() {
        let dir = tempfile::tempdir().unwrap();
        let store = GrainStore::new(Map::new(), Some(dir.path()));
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
