//! The master's tables: `[master]` (`maid run`, `maid cp`, state runs'
//! `file_roots`) and `[api]` (`maid api`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::{ConfigError, seconds_in_range};

/// `[master]`: settings of `maid run` and `maid cp`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MasterSettings {
    /// Private key that signs every job (`maid keygen`).
    pub key: Option<PathBuf>,
    /// The maid keys this master accepted, rejected or denied (`maid key`),
    /// laid out as Salt's `pki_dir`. When set, replies count only when the
    /// key accepted for their maid signed them, and the maids expected are
    /// the accepted ones that are alive.
    pub pki_dir: Option<PathBuf>,
    /// `false` to count replies unverified where there is no `pki_dir`;
    /// with neither, master commands refuse to run (fail closed).
    pub verify_replies: Option<bool>,
    /// Salt's `nodegroups`: a name for a compound target (a string) or a
    /// list of minion ids, for `maid run -N NAME` and `N@NAME` words. The
    /// master expands them before it publishes.
    #[serde(default)]
    pub nodegroups: serde_json::Map<String, serde_json::Value>,
    /// Salt's master `file_roots`: the directories state runs (`maid run
    /// '*' state.apply`) are served from. Before it publishes a `state.*`
    /// job the master stores every file under them in the fleet's file
    /// store as `salt://PATH`, signed with `key`: a list (the `base`
    /// environment) or a table of environments, as Salt's.
    #[serde(default)]
    pub file_roots: crate::FileRoots,
    /// Salt's master `pillar_roots`: where the master compiles each
    /// minion's pillar from (`top.sls` per environment, SLS rendered
    /// `jinja|yaml` with the grains of the minion's verified
    /// registration). A list (the `base` environment) or a table of
    /// environments, as `file_roots`. Pillar is sealed to each maid's own
    /// key before it is stored (PROTOCOL §8).
    #[serde(default)]
    pub pillar_roots: crate::FileRoots,
    /// Salt's `pillar_source_merging_strategy`: how one SLS's data is
    /// merged over the pillar so far: `smart` (Salt's default, which is
    /// `recurse` without the `yamlex` renderer), `recurse`, `list`,
    /// `overwrite` or `none` (only the run's own environment's top file).
    #[serde(default)]
    pub pillar_source_merging_strategy: MergeStrategy,
    /// Salt's `pillar_merge_lists`: a list merged over a list gains the
    /// items it did not hold, instead of being replaced.
    #[serde(default)]
    pub pillar_merge_lists: bool,
}

/// `pillar_source_merging_strategy`, as Salt names them (`aggregate`
/// needs Salt's `yamlex` renderer, which maid does not have: refused).
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum MergeStrategy {
    #[default]
    Smart,
    Recurse,
    List,
    Overwrite,
    None,
}

impl MergeStrategy {
    /// Salt's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Smart => "smart",
            Self::Recurse => "recurse",
            Self::List => "list",
            Self::Overwrite => "overwrite",
            Self::None => "none",
        }
    }
}

/// `[api]`: `maid api`, the master's HTTP API (salt-api compatible).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ApiSettings {
    /// Where it listens (`--listen` overrides).
    pub listen: std::net::SocketAddr,
    /// PEM certificate chain; with `tls_key`, the API speaks HTTPS only.
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of `tls_cert`.
    pub tls_key: Option<PathBuf>,
    /// How long a login token is valid, in seconds (Salt's `token_expire`).
    pub token_ttl_secs: u64,
    /// The longest `timeout` a lowstate chunk may ask for, in seconds, so
    /// one request cannot hold a connection for ever.
    pub max_timeout_secs: f64,
    /// Who may log in: user name → argon2 PHC string, as `maid api
    /// hash-password` prints it. Passwords are never stored in clear.
    pub users: BTreeMap<String, String>,
    /// What each user (or group, `name%`) may run, as Salt's
    /// `external_auth`: function regexes for every minion, `{target =
    /// [regexes]}` tables, `@jobs` (every job's returns and events, not
    /// only their own). A user with no entry cannot log in.
    pub perms: BTreeMap<String, Vec<crate::perms::PermEntry>>,
    /// Groups for `perms`: group name → its users.
    pub groups: BTreeMap<String, Vec<String>>,
    /// Serve `GET /stats` without a token (salt-api's
    /// `stats_disable_auth`). Either way the statistics name each request
    /// by its route alone, never by its path, query or headers: no token
    /// or password is ever in them.
    pub stats_disable_auth: bool,
    /// The key that signs the jobs the API publishes (`maid keygen`), when
    /// not `[master] key`. Give the API a key of its own, trusted by the
    /// maids beside the master's: each maid remembers up to
    /// `agent.remembered_jids` jids for each key, so however many jobs API
    /// users send, `maid run`'s jobs are never refused `busy` for them.
    pub key: Option<PathBuf>,
    /// The most chunks one request may hold (salt-api has no bound): each
    /// can be a job on every maid.
    pub max_chunks: usize,
    /// Jobs each user may start per second, on average (chunks that
    /// publish to maids: `local`, `local_async`, `local_batch`,
    /// `local_subset`, `manage.status`/`up`/`down`). Past it, 429 with
    /// `Retry-After`.
    pub jobs_per_second: f64,
    /// Jobs a user may start at once before `jobs_per_second` paces them;
    /// at least `max_chunks`.
    pub jobs_burst: u32,
    /// The largest request body read, in bytes; a larger one is 413.
    pub max_body_bytes: usize,
    /// An HTML file served at `app_path` (and every path under it), with
    /// no token, as salt-api's `app`: a web console's page.
    pub app: Option<PathBuf>,
    /// Where `app` is served (salt-api's `app_path`).
    pub app_path: String,
    /// A directory of the console's assets, served under `static_path`
    /// with no token, as salt-api's `static`: regular files within it
    /// only, never a path or a link that leads out.
    #[serde(rename = "static")]
    pub static_dir: Option<PathBuf>,
    /// Where `static` is served (salt-api's `static_path`).
    pub static_path: String,
}

impl Default for ApiSettings {
    fn default() -> Self {
        Self {
            listen: std::net::SocketAddr::from(([127, 0, 0, 1], 8000)),
            tls_cert: None,
            tls_key: None,
            token_ttl_secs: 43_200,
            max_timeout_secs: 3_600.0,
            users: BTreeMap::new(),
            perms: BTreeMap::new(),
            groups: BTreeMap::new(),
            stats_disable_auth: false,
            key: None,
            max_chunks: 16,
            jobs_per_second: 10.0,
            jobs_burst: 200,
            max_body_bytes: 2 << 20,
            app: None,
            app_path: "/app".into(),
            static_dir: None,
            static_path: "/static".into(),
        }
    }
}

/// The first path segments the API answers itself, which a console's
/// `app_path` and `static_path` may not take.
const API_ROUTES: [&str; 12] = [
    "login",
    "logout",
    "token",
    "run",
    "keys",
    "ws",
    "events",
    "jobs",
    "minions",
    "hook",
    "stats",
    "openapi.json",
];

impl ApiSettings {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        for (key, path) in [
            ("app_path", &self.app_path),
            ("static_path", &self.static_path),
        ] {
            let plain = path.len() > 1
                && path.starts_with('/')
                && !path.ends_with('/')
                && path[1..].split('/').all(|part| {
                    !part.is_empty()
                        && part != "."
                        && part != ".."
                        && part
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
                });
            if !plain {
                return Err(ConfigError::Invalid(format!(
                    "api.{key} {path:?}: a path like /app (letters, digits, - _ . between slashes)"
                )));
            }
            let first = path[1..].split('/').next().unwrap_or_default();
            if API_ROUTES.contains(&first) {
                return Err(ConfigError::Invalid(format!(
                    "api.{key} {path:?}: /{first} is the API's own"
                )));
            }
        }
        if self.app.is_some() && self.static_dir.is_some() && self.app_path == self.static_path {
            return Err(ConfigError::Invalid(
                "api.app_path and api.static_path must differ".into(),
            ));
        }
        if self.tls_cert.is_some() != self.tls_key.is_some() {
            return Err(ConfigError::Invalid(
                "api.tls_cert and api.tls_key go together".into(),
            ));
        }
        if self.token_ttl_secs == 0 {
            return Err(ConfigError::Invalid(
                "api.token_ttl_secs must be at least 1".into(),
            ));
        }
        if !seconds_in_range(self.max_timeout_secs) || self.max_timeout_secs == 0.0 {
            return Err(ConfigError::Invalid(format!(
                "api.max_timeout_secs must be a positive number of seconds, at most {}",
                maid_protocol::protocol::MAX_TIMEOUT_SECS
            )));
        }
        if self.max_chunks == 0 {
            return Err(ConfigError::Invalid(
                "api.max_chunks must be at least 1".into(),
            ));
        }
        if !(self.jobs_per_second.is_finite() && self.jobs_per_second > 0.0) {
            return Err(ConfigError::Invalid(
                "api.jobs_per_second must be a positive number".into(),
            ));
        }
        if (self.jobs_burst as usize) < self.max_chunks {
            return Err(ConfigError::Invalid(
                "api.jobs_burst must be at least api.max_chunks: a request of max_chunks jobs \
                 could never run"
                    .into(),
            ));
        }
        if self.max_body_bytes == 0 {
            return Err(ConfigError::Invalid(
                "api.max_body_bytes must be at least 1".into(),
            ));
        }
        crate::perms::validate(&self.perms).map_err(|e| ConfigError::Invalid(e.to_string()))?;
        for (user, hash) in &self.users {
            argon2::password_hash::PasswordHash::new(hash).map_err(|error| {
                ConfigError::Invalid(format!(
                    "api.users.{user}: not a password hash ({error}); make one with `maid api hash-password`"
                ))
            })?;
        }
        Ok(())
    }
}
