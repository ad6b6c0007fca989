//! maid's TOML configuration, as an operator writes it.
//!
//! Every table is `deny_unknown_fields`: a misspelt key is an error that
//! names the key, never a grant silently not applied. Grants default to
//! deny; `maid init` writes a commented file that shows every key.
//!
//! One file for every side: the agent reads its grants and limits, the
//! master its `[master]` and `[api]` tables, both the `[redis]` one.

mod master;
pub mod perms;
mod roots;

pub use master::{ApiSettings, MasterSettings, MergeStrategy};
pub use roots::FileRoots;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Why a configuration could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {error}")]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{path}: {error}")]
    Parse {
        path: PathBuf,
        error: Box<toml::de::Error>,
    },
    #[error("{0}")]
    Invalid(String),
}

/// The whole configuration file.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Minion id this agent answers as (default: the host name).
    pub id: Option<String>,
    /// Where `<module>.wasm` plugins are loaded from.
    pub plugin_dir: Option<PathBuf>,
    /// Where compiled plugins are cached between starts.
    pub cache_dir: Option<PathBuf>,
    /// Local directories that serve `salt://` paths, searched in order: a
    /// list (the `base` environment) or a table of environments.
    #[serde(default)]
    pub file_roots: FileRoots,
    /// Custom grains, merged over the ones the agent detects.
    #[serde(default)]
    pub grains: Map<String, Value>,
    /// Limits every plugin runs under unless its own table overrides them.
    #[serde(default)]
    pub limits: Limits,
    /// What each plugin may touch, by module name. A plugin without a table
    /// here gets nothing beyond its own memory.
    #[serde(default)]
    pub plugins: BTreeMap<String, PluginGrants>,
    /// Masters whose topics this maid subscribes to (their ids).
    #[serde(default)]
    pub master_topics: Vec<String>,
    /// Where Redis is.
    #[serde(default)]
    pub redis: maid_bus::RedisConfig,
    /// How the agent runs jobs.
    #[serde(default)]
    pub agent: AgentSettings,
    /// Which jobs the agent trusts.
    #[serde(default)]
    pub security: SecuritySettings,
    /// Where the audit log goes.
    #[serde(default)]
    pub audit: AuditSettings,
    /// The master side's own settings (`maid run`, `maid cp`).
    #[serde(default)]
    pub master: MasterSettings,
    /// The master's HTTP API (`maid api`).
    #[serde(default)]
    pub api: ApiSettings,
    /// Plugins pushed to the fleet (`maid plugin push`) that this agent
    /// accepts.
    #[serde(default)]
    pub sync: SyncSettings,
    /// A syndic maid: the Redis of the maids beneath it (PROTOCOL §7).
    pub syndic: Option<SyndicSettings>,
}

/// `[syndic]`: this maid answers for the minions beneath it: maids on a
/// Redis of their own (`redis`), or the minions of a Salt master on this
/// host (`salt_api`). To maids beneath, each job it takes is relayed
/// unchanged, on the topic it arrived on (a signed job names that topic,
/// and the maids beneath check it); to a Salt master, it is published
/// through salt-api. Their replies come back up under this maid.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SyndicSettings {
    /// The downstream Redis (a single server, Sentinel or Cluster), where
    /// the maids beneath register and take jobs.
    pub redis: Option<maid_bus::RedisConfig>,
    /// A Salt master's salt-api (rest_cherrypy), whose minions are beneath.
    pub salt_api: Option<SaltApiSettings>,
    /// Seconds between reads of who is beneath (the downstream registry,
    /// and what syndic maids beneath list) [default: 2].
    #[serde(default = "SyndicSettings::default_refresh")]
    pub refresh_secs: f64,
}

impl SyndicSettings {
    fn default_refresh() -> f64 {
        2.0
    }
}

/// `[syndic.salt_api]`: how a syndic maid reaches the Salt master beneath
/// it. The user's `external_auth` must allow the functions jobs ask for;
/// the maid uses `POST /login`, `local_async` and `GET /events`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SaltApiSettings {
    /// Where salt-api listens (`http://127.0.0.1:8000`).
    pub url: String,
    pub username: String,
    /// The password, or `password_file`'s first line.
    pub password: Option<String>,
    pub password_file: Option<PathBuf>,
    /// Salt's eauth backend [default: `pam`].
    #[serde(default = "SaltApiSettings::default_eauth")]
    pub eauth: String,
}

impl SaltApiSettings {
    fn default_eauth() -> String {
        "pam".into()
    }

    /// The password, from the file when one is named.
    pub fn password(&self) -> Result<String, ConfigError> {
        match (&self.password, &self.password_file) {
            (Some(p), None) => Ok(p.clone()),
            (None, Some(path)) => std::fs::read_to_string(path)
                .map(|t| t.lines().next().unwrap_or_default().to_string())
                .map_err(|e| {
                    ConfigError::Invalid(format!(
                        "syndic.salt_api.password_file {}: {e}",
                        path.display()
                    ))
                }),
            _ => Err(ConfigError::Invalid(
                "syndic.salt_api needs one of password and password_file".into(),
            )),
        }
    }
}

/// `[sync]`: plugins pushed through Redis with `maid plugin push`.
///
/// Off by default, and when on, only the module names in `allow` arrive:
/// a pushed plugin is code from the master, so the operator of each agent
/// says which modules it takes. Every pushed plugin must be signed by one
/// of `security.trusted_keys`, whatever `require_signed` says.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SyncSettings {
    /// Fetch and load pushed plugins (at start, on reconnect, on
    /// `saltutil.sync_modules`, and every `poll_secs`).
    pub enabled: bool,
    /// Module names allowed to arrive this way (globs: `"disk"`, `"file*"`).
    /// Empty: none.
    pub allow: Vec<String>,
    /// Where synced plugins and their signed manifests are kept [default:
    /// `synced/` under `security.state_dir`].
    pub dir: Option<PathBuf>,
    /// Let a pushed plugin take the place of a plugin of the same name in
    /// `plugin_dir`. Off: the locally installed one always wins.
    pub replace_local: bool,
    /// Also check Redis for pushed plugins every this many seconds (0: only
    /// at start, on reconnect and on `saltutil.sync_modules`).
    pub poll_secs: u64,
}

impl SyncSettings {
    fn validate(&self, security: &SecuritySettings) -> Result<(), ConfigError> {
        if !self.enabled {
            return Ok(());
        }
        if security.trusted_keys.is_empty() {
            return Err(ConfigError::Invalid(
                "sync.enabled needs security.trusted_keys: pushed plugins are always signed".into(),
            ));
        }
        if self.dir.is_none() && security.state_dir.is_none() {
            return Err(ConfigError::Invalid(
                "sync.enabled needs sync.dir or security.state_dir".into(),
            ));
        }
        for pattern in &self.allow {
            globset::Glob::new(pattern).map_err(|e| {
                ConfigError::Invalid(format!("sync.allow: {pattern:?} is not a glob: {e}"))
            })?;
        }
        Ok(())
    }

    /// Where synced plugins live, when sync is possible at all.
    pub fn dir(&self, security: &SecuritySettings) -> Option<PathBuf> {
        self.dir
            .clone()
            .or_else(|| security.state_dir.as_ref().map(|d| d.join("synced")))
    }
}

/// `[security]`: signed jobs and replay protection (PROTOCOL §6).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SecuritySettings {
    /// Refuse jobs that are not signed by a trusted master key. An agent
    /// will not start until this is said either way: running unsigned is
    /// an operator's explicit choice, never a default.
    pub require_signed: Option<bool>,
    /// Trusted master public keys: files written by `maid keygen` (`.pub`),
    /// or the base64 keys themselves.
    pub trusted_keys: Vec<String>,
    /// How far a signed job's `issued_at` may be from this maid's clock.
    pub max_skew_secs: u64,
    /// Where state that must survive a restart lives (the accepted jids).
    pub state_dir: Option<PathBuf>,
}

impl Default for SecuritySettings {
    fn default() -> Self {
        Self {
            require_signed: None,
            trusted_keys: Vec::new(),
            max_skew_secs: 300,
            state_dir: None,
        }
    }
}

/// Whether `secs` is a number of seconds a duration can hold and a job may
/// ask for: finite, not negative, at most [`maid_protocol::protocol::MAX_TIMEOUT_SECS`].
fn seconds_in_range(secs: f64) -> bool {
    secs.is_finite() && (0.0..=maid_protocol::protocol::MAX_TIMEOUT_SECS).contains(&secs)
}

/// The longest `security.max_skew_secs` accepted: a day. The agent
/// remembers every accepted jid for twice the skew, so the window bounds
/// that memory too.
pub const MAX_SKEW_SECS: u64 = 86_400;

impl SecuritySettings {
    /// Whether signed jobs are required (`false` when not said; an agent
    /// refuses to start then, see [`SecuritySettings::for_agent`]).
    pub fn signed(&self) -> bool {
        self.require_signed == Some(true)
    }

    /// The checks an agent makes before it takes a job: `require_signed`
    /// said either way, and, when signatures are required, trusted keys
    /// and a `state_dir` (without one, a restart forgets which signed jobs
    /// ran, and replaying them would work).
    pub fn for_agent(&self) -> Result<(), ConfigError> {
        match self.require_signed {
            None => Err(ConfigError::Invalid(
                "security.require_signed is not set: set it to true (with trusted_keys and \
                 state_dir; what `maid init` writes) or, to run jobs nobody signed, to false"
                    .into(),
            )),
            Some(false) => Ok(()),
            Some(true) if self.trusted_keys.is_empty() => Err(ConfigError::Invalid(
                "security.require_signed needs security.trusted_keys".into(),
            )),
            Some(true) if self.state_dir.is_none() => Err(ConfigError::Invalid(
                "security.require_signed needs security.state_dir: the jids of signed jobs \
                 must be remembered across restarts, or a restart reopens replay"
                    .into(),
            )),
            Some(true) => Ok(()),
        }
    }
}

/// `[audit]`: the audit trail — one chained JSON record per job and
/// plugin event, written to a file, a Redis stream and/or syslog.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct AuditSettings {
    /// The log file (mode 0600, append-only, reopened on SIGHUP). None: no
    /// file.
    pub path: Option<PathBuf>,
    /// Records that may wait for a slow disk before new ones are dropped
    /// (and counted).
    pub queue: usize,
    /// Also append each record to the Redis stream `maid:audit:<id>`
    /// (where `maid audit` on the master reads the fleet's records).
    pub stream: bool,
    /// Entries the stream keeps, about (`XADD MAXLEN ~`).
    pub stream_maxlen: u64,
    /// Also send each record to syslog, RFC 5424 with structured data:
    /// `udp://HOST:PORT`, `tcp://HOST:PORT` (octet counting, RFC 6587) or
    /// `unix:PATH` (a datagram socket such as `/dev/log`).
    pub syslog: Option<String>,
    /// Records kept for a stream or syslog that is down, per sink; past it
    /// the oldest are given up (noise first) and the gap is recorded.
    pub spool: usize,
    /// What a record keeps of a job's arguments and of the programs it
    /// started: `digest` (SHA-256 of what was sent, and of each argv) or
    /// `redacted` (the values too, keyword values whose names look like
    /// secrets replaced).
    pub arguments: AuditArguments,
}

/// How much of a job's arguments an audit record keeps.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum AuditArguments {
    /// Their SHA-256 only: a record proves what was sent without holding
    /// what may be secrets.
    #[default]
    Digest,
    /// The values as well, secret-looking keyword values redacted.
    Redacted,
}

impl AuditSettings {
    /// Whether any sink is configured.
    pub fn enabled(&self) -> bool {
        self.path.is_some() || self.stream || self.syslog.is_some()
    }
}

impl Default for AuditSettings {
    fn default() -> Self {
        Self {
            path: None,
            queue: 10_000,
            stream: false,
            stream_maxlen: 100_000,
            syslog: None,
            spool: 100_000,
            arguments: AuditArguments::Digest,
        }
    }
}

/// `[agent]`: how `maid agent` runs jobs.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct AgentSettings {
    /// Jobs that run at once; more wait for a slot (their PING is not
    /// delayed).
    pub concurrency: usize,
    /// Seconds between registry heartbeats (PROTOCOL §4).
    pub heartbeat_secs: u64,
    /// How long returns stay in the job cache, in seconds.
    pub job_cache_ttl_secs: u64,
    /// On SIGTERM, how long running jobs may take to finish, in seconds.
    pub shutdown_grace_secs: f64,
    /// Largest job message accepted, in bytes; larger ones are dropped.
    pub max_message_bytes: usize,
    /// How many job ids may be remembered at once to refuse running one
    /// twice. Each is kept until its job can no longer be fresh (twice
    /// `security.max_skew_secs`); past this bound new jobs are refused,
    /// never an id forgotten early.
    pub remembered_jids: usize,
    /// Jobs that may wait for a free slot; beyond it a job is answered at
    /// once with the busy return (retcode 75).
    pub queue: usize,
    /// Returns kept while Redis is unreachable (count and bytes).
    pub return_buffer: usize,
    pub return_buffer_bytes: usize,
    /// Where returns go when the buffer is full (JSON lines); without it
    /// they are dropped and counted.
    pub spill_file: Option<PathBuf>,
    /// Serve `/healthz` and `/metrics` here (e.g. `127.0.0.1:9101`).
    pub http: Option<std::net::SocketAddr>,
    /// Check the plugin directory for changes every this many seconds (0:
    /// only on SIGHUP).
    pub plugin_poll_secs: u64,
    /// Threads that run the agent's work: reading jobs, PINGs, signatures
    /// and the plugin calls (0: one per CPU). A plugin's file-system calls
    /// and the programs it starts run beside them, never on them. One
    /// thread spends the least CPU on each job and answers soonest; more
    /// let many jobs that compute, or many signature checks at once, use
    /// more cores.
    pub workers: usize,
}

/// The most threads `agent.workers` may ask for.
pub const MAX_WORKERS: usize = 1024;

impl Default for AgentSettings {
    fn default() -> Self {
        Self {
            concurrency: 32,
            heartbeat_secs: 10,
            job_cache_ttl_secs: 86_400,
            shutdown_grace_secs: 30.0,
            max_message_bytes: 1 << 20,
            remembered_jids: 100_000,
            queue: 1024,
            return_buffer: 10_000,
            return_buffer_bytes: 64 << 20,
            spill_file: None,
            http: None,
            plugin_poll_secs: 5,
            workers: 1,
        }
    }
}

impl AgentSettings {
    /// The agent's worker threads: `workers`, or one per CPU for 0.
    pub fn worker_threads(&self) -> usize {
        match self.workers {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        }
    }
}

/// Resource limits of one call.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Linear memory a plugin instance may grow to, in MiB.
    pub memory_mb: u64,
    /// Wall-clock limit of one call, in seconds (the job's `timeout` may
    /// lower it, never raise it).
    pub timeout_secs: f64,
    /// Largest return value, in bytes of JSON.
    pub max_return_bytes: usize,
    /// Output captured from one program started by `exec` (stdout and
    /// stderr each); the rest is discarded and the output marked truncated.
    pub max_output_bytes: usize,
    /// Log lines a plugin may write in one call, in bytes; beyond it lines
    /// are dropped and counted.
    pub max_log_bytes: usize,
    /// Tables and instances one call may create (component instances count).
    pub max_instances: usize,
    /// Tables one call may create.
    pub max_tables: usize,
    /// Elements of any one table.
    pub max_table_elements: usize,
    /// Instances of one plugin running at once; more calls wait (within
    /// their time limit) for one to finish.
    pub max_concurrent: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory_mb: 256,
            timeout_secs: 300.0,
            max_return_bytes: 16 << 20,
            max_output_bytes: 16 << 20,
            max_log_bytes: 64 << 10,
            max_instances: 32,
            max_tables: 32,
            max_table_elements: 100_000,
            max_concurrent: 64,
        }
    }
}

/// Per-plugin overrides of [`Limits`]; unset keys keep the global value.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LimitsOverride {
    pub memory_mb: Option<u64>,
    pub timeout_secs: Option<f64>,
    pub max_return_bytes: Option<usize>,
    pub max_output_bytes: Option<usize>,
    pub max_log_bytes: Option<usize>,
    pub max_instances: Option<usize>,
    pub max_tables: Option<usize>,
    pub max_table_elements: Option<usize>,
    pub max_concurrent: Option<usize>,
}

impl Limits {
    /// These limits with `over` applied.
    pub fn with(&self, over: Option<&LimitsOverride>) -> Limits {
        let Some(o) = over else {
            return self.clone();
        };
        Limits {
            memory_mb: o.memory_mb.unwrap_or(self.memory_mb),
            timeout_secs: o.timeout_secs.unwrap_or(self.timeout_secs),
            max_return_bytes: o.max_return_bytes.unwrap_or(self.max_return_bytes),
            max_output_bytes: o.max_output_bytes.unwrap_or(self.max_output_bytes),
            max_log_bytes: o.max_log_bytes.unwrap_or(self.max_log_bytes),
            max_instances: o.max_instances.unwrap_or(self.max_instances),
            max_tables: o.max_tables.unwrap_or(self.max_tables),
            max_table_elements: o.max_table_elements.unwrap_or(self.max_table_elements),
            max_concurrent: o.max_concurrent.unwrap_or(self.max_concurrent),
        }
    }

    fn validate(&self, what: &str) -> Result<(), ConfigError> {
        if !seconds_in_range(self.timeout_secs) || self.timeout_secs == 0.0 {
            return Err(ConfigError::Invalid(format!(
                "{what}.timeout_secs must be a positive number of seconds"
            )));
        }
        if self.max_concurrent == 0 {
            return Err(ConfigError::Invalid(format!(
                "{what}.max_concurrent must be at least 1"
            )));
        }
        if self.memory_mb == 0 {
            return Err(ConfigError::Invalid(format!(
                "{what}.memory_mb must be at least 1"
            )));
        }
        Ok(())
    }
}

/// What one plugin may touch. Everything defaults to nothing.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PluginGrants {
    /// Programs `exec` may start: absolute paths or globs (`/usr/bin/*`).
    /// `"*"` allows any program. Without `shell`, a program reached
    /// through a glob starts only if maid classifies it plain (it starts
    /// no other program); one named by its exact path needs no such
    /// classification.
    #[serde(default)]
    pub exec: Vec<String>,
    /// Set by `maid call --local` without a configuration, never read from
    /// one: the operator asking is the one running, as with `salt-call
    /// --local`, so every program `exec` admits counts as named exactly.
    #[serde(skip)]
    pub operator_is_caller: bool,
    /// Whether `exec` may start a shell (`sh`, `bash`, ...), which runs
    /// whatever its command line says.
    #[serde(default)]
    pub shell: bool,
    /// Environment variables of the agent passed to programs (globs, e.g.
    /// `"LC_*"`); everything else is scrubbed.
    #[serde(default)]
    pub env: Vec<String>,
    /// `salt://` sources `fetch` may read (globs over the URL, e.g.
    /// `"salt://files/**"`).
    #[serde(default)]
    pub fetch: Vec<String>,
    /// Host directories preopened for the plugin at the same path.
    #[serde(default)]
    pub dirs: Vec<DirGrant>,
    /// Single files the plugin may read whole through the host (globs over
    /// absolute paths, e.g. `"/proc/meminfo"`): system files whose
    /// directory holds more than the plugin should see.
    #[serde(default)]
    pub files: Vec<String>,
    /// Users programs may be started as (`runas=`), when the agent runs as
    /// root.
    #[serde(default)]
    pub runas: Vec<String>,
    /// See and signal this maid's running jobs (`saltutil.running`,
    /// `kill_job`, ...). Granted by the configuration alone: plugin
    /// manifests of WIT 0.1.0 cannot name it.
    #[serde(default)]
    pub jobs: bool,
    /// Set and remove grains (`grains.setval` and its kin), which changes
    /// what targets this maid. Granted by the configuration alone, as
    /// `jobs` is.
    #[serde(default)]
    pub set_grains: bool,
    /// Read the minion's pillar (`pillar.*`, `pillar` in SLS files and
    /// templates): the secrets the master compiled for this maid.
    /// Granted by the configuration alone, as `jobs` is.
    #[serde(default)]
    pub pillar: bool,
    /// Functions of other modules the plugin may run on this maid, each
    /// under its own plugin's grants (`test.try`): globs over
    /// `module.function`, e.g. `"test.*"`. A grant of a function is a
    /// grant of everything that function's plugin may do, to whoever may
    /// run this plugin. Granted by the configuration alone, as `jobs` is.
    #[serde(default)]
    pub call: Vec<String>,
    /// Set set-uid, set-gid and world-writable modes (`file.set_mode
    /// 4755`, `cp.recv_chunked mode=0o4755`) in the writable directories.
    /// Off, the host refuses them: a set-uid-root file a job made is root
    /// for every local user who can run it. Granted by the configuration
    /// alone, as `jobs` is.
    #[serde(default)]
    pub special_modes: bool,
    /// Limits for this plugin only.
    #[serde(default)]
    pub limits: Option<LimitsOverride>,
}

/// A directory a plugin may use through WASI.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct DirGrant {
    /// Absolute host path; the plugin sees it at the same path.
    pub path: PathBuf,
    /// Read-write when true, read-only otherwise.
    #[serde(default)]
    pub writable: bool,
}

impl Config {
    /// Read and validate a configuration file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read {
            path: path.to_path_buf(),
            error,
        })?;
        let config: Config = toml::from_str(&text).map_err(|error| ConfigError::Parse {
            path: path.to_path_buf(),
            error: Box::new(error),
        })?;
        config.validate()?;
        Ok(config)
    }

    /// Checks that deserialisation cannot express.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.limits.validate("limits")?;
        self.api.validate()?;
        self.sync.validate(&self.security)?;
        if self.security.max_skew_secs > MAX_SKEW_SECS {
            return Err(ConfigError::Invalid(format!(
                "security.max_skew_secs must be at most {MAX_SKEW_SECS}"
            )));
        }
        let a = &self.agent;
        if a.concurrency == 0 || a.heartbeat_secs == 0 || a.remembered_jids == 0 {
            return Err(ConfigError::Invalid(
                "agent.concurrency, agent.heartbeat_secs and agent.remembered_jids must be at least 1"
                    .into(),
            ));
        }
        if a.workers > MAX_WORKERS {
            return Err(ConfigError::Invalid(format!(
                "agent.workers must be at most {MAX_WORKERS} (0: one per CPU)"
            )));
        }
        if !seconds_in_range(a.shutdown_grace_secs) {
            return Err(ConfigError::Invalid(
                "agent.shutdown_grace_secs must be a number of seconds, at most a year".into(),
            ));
        }
        if let Some(syndic) = &self.syndic {
            if !seconds_in_range(syndic.refresh_secs) || syndic.refresh_secs < 0.05 {
                return Err(ConfigError::Invalid(
                    "syndic.refresh_secs must be a number of seconds, from 0.05 to a year".into(),
                ));
            }
            if syndic.redis.is_some() == syndic.salt_api.is_some() {
                return Err(ConfigError::Invalid(
                    "[syndic] needs exactly one of syndic.redis (maids beneath) and \
                     syndic.salt_api (a Salt master beneath)"
                        .into(),
                ));
            }
            if let Some(api) = &syndic.salt_api {
                api.password()?;
            }
        }
        for (name, grants) in &self.plugins {
            self.limits
                .with(grants.limits.as_ref())
                .validate(&format!("plugins.{name}.limits"))?;
            if let Some(f) = grants.files.iter().find(|f| !f.starts_with('/')) {
                return Err(ConfigError::Invalid(format!(
                    "plugins.{name}.files: {f} is not an absolute path"
                )));
            }
            for dir in &grants.dirs {
                if !dir.path.is_absolute() {
                    return Err(ConfigError::Invalid(format!(
                        "plugins.{name}.dirs: {} is not an absolute path",
                        dir.path.display()
                    )));
                }
            }
        }
        Ok(())
    }

    /// Every directory some plugin is granted to write into: a program
    /// found there may be one a job wrote.
    pub fn writable_dirs(&self) -> Vec<PathBuf> {
        self.plugins
            .values()
            .flat_map(|g| g.dirs.iter())
            .filter(|d| d.writable)
            .map(|d| d.path.clone())
            .collect()
    }

    /// The grants of `module` (nothing when it has no table).
    pub fn grants(&self, module: &str) -> PluginGrants {
        self.plugins.get(module).cloned().unwrap_or_default()
    }

    /// The limits `module` runs under.
    pub fn limits_for(&self, module: &str) -> Limits {
        self.limits
            .with(self.plugins.get(module).and_then(|g| g.limits.as_ref()))
    }
}

/// The commented configuration `maid init` writes.
pub const TEMPLATE: &str = include_str!("../maid.example.toml");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_parses_and_validates() {
        let config: Config = toml::from_str(TEMPLATE).unwrap();
        config.validate().unwrap();
        assert!(config.plugins.contains_key("cmd"));
        // A master set up from the template verifies its maids' replies.
        assert!(config.master.pki_dir.is_some());
    }

    #[test]
    fn unknown_keys_are_named() {
        let err = toml::from_str::<Config>("plugin_dri = \"/x\"").unwrap_err();
        assert!(err.to_string().contains("plugin_dri"), "{err}");
        let err = toml::from_str::<Config>("[plugins.cmd]\nexecs = []").unwrap_err();
        assert!(err.to_string().contains("execs"), "{err}");
    }

    #[test]
    fn limits_override_per_plugin() {
        let config: Config =
            toml::from_str("[limits]\nmemory_mb = 64\n[plugins.x.limits]\ntimeout_secs = 2\n")
                .unwrap();
        let l = config.limits_for("x");
        assert_eq!(l.memory_mb, 64);
        assert_eq!(l.timeout_secs, 2.0);
        assert_eq!(config.limits_for("y").timeout_secs, 300.0);
    }

    #[test]
    fn a_syndic_has_exactly_one_thing_beneath() {
        let parse = |t: &str| toml::from_str::<Config>(t).unwrap().validate();
        let redis = "[syndic.redis]\nurl = \"redis://127.0.0.1:6380/\"\n";
        let salt = "[syndic.salt_api]\nurl = \"http://127.0.0.1:8000\"\nusername = \"m\"\n";
        assert!(parse(redis).is_ok());
        assert!(parse(&format!("{salt}password = \"p\"\n")).is_ok());
        // Neither, both, or a Salt master without a password.
        assert!(parse("[syndic]\n").is_err());
        assert!(parse(&format!("{redis}{salt}password = \"p\"\n")).is_err());
        let err = parse(salt).unwrap_err().to_string();
        assert!(err.contains("password"), "{err}");
        assert!(parse(&format!("[syndic]\nrefresh_secs = 0\n{redis}")).is_err());
    }

    #[test]
    fn the_agent_works_on_one_thread_unless_told_otherwise() {
        let parse = |t: &str| toml::from_str::<Config>(t).unwrap();
        let agent = parse("").agent;
        assert_eq!((agent.workers, agent.worker_threads()), (1, 1));
        assert_eq!(parse("[agent]\nworkers = 3\n").agent.worker_threads(), 3);
        // 0: one per CPU.
        let cpus = std::thread::available_parallelism().unwrap().get();
        assert_eq!(parse("[agent]\nworkers = 0\n").agent.worker_threads(), cpus);
        let err = parse("[agent]\nworkers = 100000\n").validate().unwrap_err();
        assert!(err.to_string().contains("agent.workers"), "{err}");
        assert!(toml::from_str::<Config>("[agent]\nworkers = -1\n").is_err());
    }

    #[test]
    fn relative_dirs_are_refused() {
        let config: Config = toml::from_str("[plugins.cp]\ndirs = [{ path = \"srv\" }]\n").unwrap();
        assert!(config.validate().is_err());
    }
}
