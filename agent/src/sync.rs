//! Fleet-wide plugin sync on the agent: Salt's `saltutil.sync_modules`
//! for plugins pushed with `maid plugin push` (`plugin_store.rs`).
//!
//! A pushed plugin is code from the master, so it has to pass, in order:
//! the agent's own policy (`[sync] allow`, a glob list of module names, and
//! no replacing a plugin installed in `plugin_dir` unless `replace_local`),
//! a signature by one of `security.trusted_keys`, the no-rollback rule (a
//! module only moves to a newer push), the content hash and size the
//! signature covers, and the runtime's own validation (a component whose
//! manifest names the same module). Only then is it renamed into the sync
//! directory and loaded; calls already running finish on the version they
//! started with. Each synced plugin keeps its signed manifest beside it
//! (`<module>.json`), so at every start and reload it is checked again —
//! against the keys and policy of that moment — before it is loaded.
//! Every load, removal and refusal is an audit record.
//!
//! What to install is the master's word, not Redis's. Signatures alone
//! cannot say which push is the latest: a Redis writer can restore an older
//! signed entry (a fresh agent, with nothing to compare, would take it) or
//! delete the newest (holding an update back). So the sync job pins it:
//!
//! ```text
//! saltutil.sync_modules modules='{"disk": "<sha256 of disk.wasm>", "old": null}'
//! ```
//!
//! installs, for each module named, exactly the push whose content hash is
//! the one given — the signed manifest filed under that hash
//! (`maid:plugins:<module>`) — or, for `null`, applies the module's signed
//! removal. A pin whose entry is missing, whose manifest does not verify or
//! names other content, or that is older than the push this agent has, is
//! refused: retcode 1, the return naming `modules.<name>`. Modules not
//! named are left alone. `maid run … saltutil.sync_modules` fills `modules`
//! in from the master's own record of its pushes (`<key>.pushed.json`).
//!
//! An agent that requires signed jobs installs only what such a job pins:
//! its background pass (at every Redis session and every `poll_secs`)
//! installs nothing, and a sync job without `modules` is refused. Without
//! `require_signed`, anyone who can publish can run jobs anyway, so both
//! keep the older rule: take each module's latest entry in `maid:plugins`,
//! never older than what is installed.

use std::collections::BTreeMap;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use ed25519_dalek::VerifyingKey;
use globset::{Glob, GlobSet, GlobSetBuilder};
use serde_json::{Map, Value, json};

use crate::audit::{Audit, Decision, Record};
use crate::bus::Conn;
use crate::config::Config;
use crate::plugin_store::{self, Signed};
pub use crate::plugin_store::{MODULES_KWARG, SYNC_ALL, SYNC_ALL_KINDS, SYNC_MODULES};
use crate::runtime::Runtime;
use crate::trust::Verifier;

/// What a sync job pins: module → the SHA-256 of the push to install, or
/// `None` to apply its removal.
pub type Pins = BTreeMap<String, Option<String>>;

/// Read the pins of a sync job's `kwarg`: `None` when it names none
/// (`modules` absent), an error naming the first bad entry.
pub fn pins(kwarg: &Map<String, Value>) -> Result<Option<Pins>, BadPins> {
    let Some(modules) = kwarg.get(MODULES_KWARG) else {
        return Ok(None);
    };
    let Value::Object(modules) = modules else {
        return Err(BadPins::NotAMap);
    };
    let mut pins = Pins::new();
    for (module, pin) in modules {
        if !crate::protocol::is_identifier(module) {
            return Err(BadPins::Module(module.clone()));
        }
        let pin = match pin {
            Value::Null => None,
            Value::String(sha) if maid_bus::filestore::is_sha256(sha) => Some(sha.clone()),
            _ => return Err(BadPins::Pin(module.clone())),
        };
        pins.insert(module.clone(), pin);
    }
    Ok(Some(pins))
}

/// Why a sync job's `modules` pin nothing this maid would install.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadPins {
    #[error("{MODULES_KWARG} must map module names to a sha256 or null")]
    NotAMap,
    #[error("{MODULES_KWARG}: {0:?} is not a module name")]
    Module(String),
    #[error("{MODULES_KWARG}.{0} must be a sha256 (64 lowercase hex digits) or null")]
    Pin(String),
}

/// Why sync could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error("sync directory {path}: {error}")]
    Dir {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("sync.allow: {0}")]
    Allow(#[from] globset::Error),
}

/// Why this maid does not install, or load again, a plugin pushed to the
/// fleet; each reads as its audit record's reason and the job's return.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// `sync.allow` does not name the module.
    #[error("not allowed by this maid's sync.allow")]
    NotAllowed,
    /// A local plugin of that name wins (`sync.replace_local` is off).
    #[error("a plugin of that name is installed in plugin_dir (sync.replace_local is off)")]
    LocalPlugin,
    /// Installed, but its signed manifest is gone or no longer verifies.
    #[error("its signed manifest is missing or no longer verifies with the trusted keys")]
    Unverified,
    /// Its latest signed manifest removes it.
    #[error("it was removed")]
    Removed,
    /// The installed file cannot be read.
    #[error("{0}")]
    Unreadable(String),
    /// The installed file is not what was signed.
    #[error("content hash mismatch: signed {signed}, file hashes to {actual}")]
    HashMismatch { signed: String, actual: String },
}

/// Why a sync job did nothing at all; each reads as the job's return.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    #[error("Passed invalid arguments: {0}")]
    Arguments(#[from] BadPins),
    #[error(
        "Sync refused: this maid requires signed jobs and installs only the modules a sync \
         job pins ({MODULES_KWARG}={{\"<module>\": \"<sha256>\"}}; `maid run` fills them in \
         from the master's pushes)"
    )]
    Unpinned,
    #[error("Sync failed: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("Sync failed: redis is not connected")]
    NotConnected,
}

/// What one sync did, in Salt's terms (`modules.<name>`).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SyncReport {
    /// Modules added, updated or removed.
    pub changed: Vec<String>,
    /// Modules not taken, and why.
    pub refused: BTreeMap<String, String>,
}

impl SyncReport {
    /// The return of `saltutil.sync_modules` and its retcode: Salt's list
    /// of changed modules; with refusals, retcode 1 and an object that
    /// names them beside the changes.
    pub fn salt_return(&self) -> (Value, i32) {
        if self.refused.is_empty() {
            (json!(self.changed), 0)
        } else {
            (json!({"changed": self.changed, "refused": self.refused}), 1)
        }
    }

    /// The return of `saltutil.sync_all`: Salt's object of every kind,
    /// with this report's under `modules` and the rest empty.
    pub fn salt_all_return(&self) -> (Value, i32) {
        let (modules, retcode) = self.salt_return();
        let all: serde_json::Map<String, Value> = SYNC_ALL_KINDS
            .iter()
            .map(|k| {
                let v = if *k == "modules" {
                    modules.clone()
                } else {
                    json!([])
                };
                ((*k).to_string(), v)
            })
            .collect();
        (Value::Object(all), retcode)
    }
}

/// Salt's name for a module in sync returns.
fn salt_name(module: &str) -> String {
    format!("modules.{module}")
}

/// Who and why, for the audit records of one pass.
struct Pass<'a> {
    source: &'a str,
    jid: &'a str,
}

/// The agent's side of plugin sync.
pub struct Syncer {
    /// Synced `<module>.wasm` files and their signed `<module>.json`.
    dir: PathBuf,
    /// Downloads land here (same file system) and are renamed into `dir`
    /// only once verified and loadable.
    staging: PathBuf,
    /// The locally installed plugins, which win unless `replace_local`
    /// (`None`: an agent without a plugin directory).
    local_dir: Option<PathBuf>,
    allow: GlobSet,
    replace_local: bool,
    /// The trusted master keys (the same as for jobs).
    verifier: Verifier,
    /// Whether a pass nobody pinned may install (`require_signed` off).
    /// With signed jobs required, only a job's pins say what to install:
    /// the latest entry in Redis is whatever a Redis writer left there.
    unpinned: bool,
    audit: Audit,
    minion: String,
    /// One pass at a time: syncs and reloads both change the runtime's
    /// plugins and the sync directory.
    lock: tokio::sync::Mutex<()>,
}

impl Syncer {
    /// The syncer `config` asks for (`None` when `[sync]` is off), with its
    /// directory created (mode 0700).
    pub fn new(
        config: &Config,
        local_dir: Option<&Path>,
        keys: Vec<(String, VerifyingKey)>,
        audit: Audit,
        minion: &str,
    ) -> Result<Option<Self>, SyncError> {
        let settings = &config.sync;
        let Some(dir) = settings.dir(&config.security).filter(|_| settings.enabled) else {
            return Ok(None);
        };
        let staging = dir.join(".staging");
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&staging)
            .map_err(|error| SyncError::Dir {
                path: staging.clone(),
                error,
            })?;
        let mut allow = GlobSetBuilder::new();
        for pattern in &settings.allow {
            allow.add(Glob::new(pattern)?);
        }
        Ok(Some(Self {
            dir,
            staging,
            local_dir: local_dir.map(Path::to_path_buf),
            allow: allow.build()?,
            replace_local: settings.replace_local,
            verifier: Verifier {
                keys,
                require_signed: true,
                max_skew_ms: 0,
            },
            unpinned: !config.security.signed(),
            audit,
            minion: minion.into(),
            lock: tokio::sync::Mutex::new(()),
        }))
    }

    /// Where synced plugins live.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether the background pass ([`Syncer::sync`]) may install anything;
    /// `false` when this agent requires signed jobs.
    pub fn syncs_unpinned(&self) -> bool {
        self.unpinned
    }

    fn wasm(&self, module: &str) -> PathBuf {
        self.dir.join(format!("{module}.wasm"))
    }

    fn state(&self, module: &str) -> PathBuf {
        self.dir.join(format!("{module}.json"))
    }

    /// The policy of this agent for `module`, before anything is fetched.
    fn admit(&self, module: &str) -> Result<(), Refused> {
        if !self.allow.is_match(module) {
            return Err(Refused::NotAllowed);
        }
        let local = self
            .local_dir
            .as_ref()
            .is_some_and(|d| d.join(format!("{module}.wasm")).exists());
        if local && !self.replace_local {
            return Err(Refused::LocalPlugin);
        }
        Ok(())
    }

    /// The signed manifest this agent last accepted for `module`, if it
    /// still verifies with today's keys.
    fn accepted(&self, module: &str) -> Option<Signed> {
        let text = std::fs::read_to_string(self.state(module)).ok()?;
        plugin_store::open(module, &text, &self.verifier).ok()
    }

    fn record(&self, pass: &Pass, decision: Decision, module: &str) -> Record {
        Record::plugin(&self.minion, pass.jid, decision, module, pass.source)
    }

    fn refuse(
        &self,
        pass: &Pass,
        report: &mut SyncReport,
        module: &str,
        signed: Option<&Signed>,
        reason: String,
    ) {
        tracing::warn!(module, %reason, "synced plugin refused");
        let mut rec = self.record(pass, Decision::PluginRefused, module);
        rec.signer = signed.map(|s| s.kid.clone());
        rec.plugin_sha256 = signed.and_then(|s| s.manifest.sha256.clone());
        rec.reason = Some(reason.clone());
        self.audit.record(rec);
        report.refused.insert(salt_name(module), reason);
    }

    fn loaded(&self, pass: &Pass, module: &str, sha256: &str, kid: &str) {
        tracing::info!(
            module,
            sha256,
            signer = kid,
            source = pass.source,
            "synced plugin loaded"
        );
        let mut rec = self.record(pass, Decision::PluginLoaded, module);
        rec.plugin_sha256 = Some(sha256.into());
        rec.signer = Some(kid.into());
        self.audit.record(rec);
    }

    /// Load the plugins already in the sync directory (at start and on
    /// reload), each checked again against today's keys, policy and its
    /// signed hash. `source` is `startup` or `reload` in the audit log.
    pub async fn load_installed(&self, runtime: &Runtime, source: &str) -> SyncReport {
        let _pass = self.lock.lock().await;
        let pass = Pass { source, jid: "" };
        let mut report = SyncReport::default();
        for module in crate::runtime::modules_in(&self.dir) {
            let path = self.wasm(&module);
            let signed = self.accepted(&module);
            let checked = self.admit(&module).and_then(|()| {
                let signed = signed.as_ref().ok_or(Refused::Unverified)?;
                let sha = signed.manifest.sha256.as_deref().ok_or(Refused::Removed)?;
                let bytes = std::fs::read(&path).map_err(|e| Refused::Unreadable(e.to_string()))?;
                let actual = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&bytes));
                if actual != sha {
                    return Err(Refused::HashMismatch {
                        signed: sha.to_string(),
                        actual,
                    });
                }
                Ok(sha.to_string())
            });
            let sha = match checked {
                Ok(sha) => sha,
                Err(reason) => {
                    let reason = reason.to_string();
                    self.refuse(&pass, &mut report, &module, signed.as_ref(), reason);
                    continue;
                }
            };
            if runtime
                .plugin(&module)
                .is_some_and(|p| p.sha256 == sha && p.path == path)
            {
                continue;
            }
            let kid = signed.map(|s| s.kid).unwrap_or_default();
            match runtime.load_file(&path).await {
                Ok(_) => {
                    self.loaded(&pass, &module, &sha, &kid);
                    report.changed.push(salt_name(&module));
                }
                Err(e) => {
                    let reason = format!("not loadable: {e}");
                    self.refuse(&pass, &mut report, &module, None, reason);
                }
            }
        }
        report
    }

    /// The background pass: bring this agent in line with the latest entry
    /// of each module in Redis. `jid` is the unpinned sync job that asked,
    /// or empty. Does nothing where signed jobs are required
    /// ([`Syncer::syncs_unpinned`]).
    pub async fn sync(
        &self,
        conn: &mut Conn,
        runtime: &Runtime,
        jid: &str,
    ) -> redis::RedisResult<SyncReport> {
        if !self.unpinned {
            return Ok(SyncReport::default());
        }
        let _pass = self.lock.lock().await;
        let pass = Pass {
            source: "sync",
            jid,
        };
        let mut report = SyncReport::default();
        for (module, text) in plugin_store::entries(conn).await? {
            self.sync_one(conn, runtime, &pass, &mut report, &module, &text)
                .await?;
        }
        report.changed.sort();
        Ok(report)
    }

    /// Answer a `saltutil.sync_modules` job: install exactly what its
    /// `modules` kwarg pins (see the module header). Without pins, the
    /// background pass where that may install, else [`JobError::Unpinned`].
    pub async fn sync_job(
        &self,
        conn: &mut Conn,
        runtime: &Runtime,
        jid: &str,
        kwarg: &Map<String, Value>,
    ) -> Result<SyncReport, JobError> {
        let Some(pins) = pins(kwarg)? else {
            if self.unpinned {
                return Ok(self.sync(conn, runtime, jid).await?);
            }
            return Err(JobError::Unpinned);
        };
        let _pass = self.lock.lock().await;
        let pass = Pass {
            source: "sync",
            jid,
        };
        let mut report = SyncReport::default();
        for (module, pin) in &pins {
            self.sync_pinned(conn, runtime, &pass, &mut report, module, pin.as_deref())
                .await?;
        }
        report.changed.sort();
        Ok(report)
    }

    /// Bring `module` to the push pinned by its content hash `pin`, or
    /// apply its removal (`None`).
    async fn sync_pinned(
        &self,
        conn: &mut Conn,
        runtime: &Runtime,
        pass: &Pass<'_>,
        report: &mut SyncReport,
        module: &str,
        pin: Option<&str>,
    ) -> redis::RedisResult<()> {
        if !self.allow.is_match(module) {
            // Removing what this maid never takes leaves nothing to do.
            if pin.is_some() {
                let reason = "not allowed by this maid's sync.allow".to_string();
                self.refuse(pass, report, module, None, reason);
            }
            return Ok(());
        }
        // Already so: runs exactly the pinned bytes, or has none to remove.
        if pin.is_some() && self.is_loaded(runtime, module, pin)
            || pin.is_none() && !self.wasm(module).exists()
        {
            return Ok(());
        }
        let Some(text) = plugin_store::pinned(conn, module, pin).await? else {
            let reason = match pin {
                Some(sha) => format!(
                    "the pinned push {sha} is not in the store (never pushed, or its entry was deleted)"
                ),
                None => "the pinned removal is not in the store".into(),
            };
            self.refuse(pass, report, module, None, reason);
            return Ok(());
        };
        let signed = match plugin_store::open(module, &text, &self.verifier) {
            Ok(s) => s,
            Err(e) => {
                self.refuse(pass, report, module, None, e.to_string());
                return Ok(());
            }
        };
        let m = &signed.manifest;
        if m.sha256.as_deref() != pin {
            let reason = format!(
                "the entry filed under the pin is signed for {}, not the pinned {}",
                m.sha256.as_deref().unwrap_or("a removal"),
                pin.unwrap_or("removal"),
            );
            self.refuse(pass, report, module, Some(&signed), reason);
            return Ok(());
        }
        if let Some(prev) = self.accepted(module)
            && prev.manifest.pushed_at >= m.pushed_at
            && prev.manifest != *m
        {
            let reason = format!(
                "the pinned push is older than the one this maid has (pushed_at {} <= {}): \
                 not rolled back",
                m.pushed_at, prev.manifest.pushed_at
            );
            self.refuse(pass, report, module, Some(&signed), reason);
            return Ok(());
        }
        if m.is_removal() {
            self.remove(pass, report, runtime, &signed, &text);
            return Ok(());
        }
        if let Err(reason) = self.admit(module) {
            self.refuse(pass, report, module, Some(&signed), reason.to_string());
            return Ok(());
        }
        self.install(conn, runtime, pass, report, &signed, &text)
            .await
    }

    async fn sync_one(
        &self,
        conn: &mut Conn,
        runtime: &Runtime,
        pass: &Pass<'_>,
        report: &mut SyncReport,
        module: &str,
        text: &str,
    ) -> redis::RedisResult<()> {
        let signed = match plugin_store::open(module, text, &self.verifier) {
            Ok(s) => s,
            Err(e) => {
                self.refuse(pass, report, module, None, e.to_string());
                return Ok(());
            }
        };
        if !self.allow.is_match(module) {
            // Removing what this maid never takes leaves nothing to do.
            if !signed.manifest.is_removal() {
                let reason = "not allowed by this maid's sync.allow".to_string();
                self.refuse(pass, report, module, Some(&signed), reason);
            }
            return Ok(());
        }
        let accepted = self.accepted(module);
        let m = &signed.manifest;
        if let Some(prev) = &accepted
            && prev.manifest.pushed_at >= m.pushed_at
        {
            if prev.manifest != *m {
                let reason = format!(
                    "older than the push this maid has (pushed_at {} <= {}): not rolled back",
                    m.pushed_at, prev.manifest.pushed_at
                );
                self.refuse(pass, report, module, Some(&signed), reason);
                return Ok(());
            }
            // The push this maid has; done unless its plugin is not loaded.
            if m.is_removal() || self.is_loaded(runtime, module, m.sha256.as_deref()) {
                return Ok(());
            }
        }
        if m.is_removal() {
            self.remove(pass, report, runtime, &signed, text);
            return Ok(());
        }
        if let Err(reason) = self.admit(module) {
            self.refuse(pass, report, module, Some(&signed), reason.to_string());
            return Ok(());
        }
        // The same bytes pushed again: keep the newer manifest (it sets the
        // rollback floor), nothing changes.
        if self.is_loaded(runtime, module, m.sha256.as_deref()) {
            if let Err(e) = crate::fsutil::replace_private(&self.state(module), [text]) {
                tracing::warn!(module, cause = %e, "cannot record the newer manifest");
            }
            return Ok(());
        }
        self.install(conn, runtime, pass, report, &signed, text)
            .await
    }

    /// Whether `module` runs from its synced file with content `sha256`.
    fn is_loaded(&self, runtime: &Runtime, module: &str, sha256: Option<&str>) -> bool {
        runtime
            .plugin(module)
            .is_some_and(|p| Some(p.sha256.as_str()) == sha256 && p.path == self.wasm(module))
    }

    /// Apply a signed removal: forget the plugin and keep the removal, so
    /// an older push replayed later is refused.
    fn remove(
        &self,
        pass: &Pass,
        report: &mut SyncReport,
        runtime: &Runtime,
        signed: &Signed,
        text: &str,
    ) {
        let module = &signed.manifest.module;
        let path = self.wasm(module);
        let had = path.exists();
        let done = match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => crate::fsutil::replace_private(&self.state(module), [text]),
        };
        if let Err(e) = done {
            self.refuse(
                pass,
                report,
                module,
                Some(signed),
                format!("cannot remove: {e}"),
            );
            return;
        }
        runtime.forget_missing(&self.dir);
        if had {
            tracing::info!(module = %module, signer = %signed.kid, "synced plugin removed");
            let mut rec = self.record(pass, Decision::PluginRemoved, module);
            rec.signer = Some(signed.kid.clone());
            self.audit.record(rec);
            report.changed.push(salt_name(module));
        }
    }

    /// Fetch, verify, validate, then rename into place and load.
    async fn install(
        &self,
        conn: &mut Conn,
        runtime: &Runtime,
        pass: &Pass<'_>,
        report: &mut SyncReport,
        signed: &Signed,
        text: &str,
    ) -> redis::RedisResult<()> {
        let m = &signed.manifest;
        let module = m.module.as_str();
        let (Some(sha), Some(size)) = (m.sha256.as_deref(), m.size) else {
            return Ok(());
        };
        let staged = self.staging.join(format!("{module}.wasm"));
        if let Err(e) = plugin_store::fetch(conn, sha, size, &staged).await {
            if let plugin_store::FetchError::Redis(e) = e {
                return Err(e);
            }
            self.refuse(pass, report, module, Some(signed), e.to_string());
            return Ok(());
        }
        // Compiled and described before it replaces anything: a plugin
        // that cannot load never displaces one that runs.
        if let Err(e) = runtime.inspect_file(&staged).await {
            let _ = std::fs::remove_file(&staged);
            let reason = format!("not loadable: {e}");
            self.refuse(pass, report, module, Some(signed), reason);
            return Ok(());
        }
        let path = self.wasm(module);
        let placed = std::fs::rename(&staged, &path)
            .and_then(|()| crate::fsutil::replace_private(&self.state(module), [text]));
        if let Err(e) = placed {
            let _ = std::fs::remove_file(&staged);
            self.refuse(
                pass,
                report,
                module,
                Some(signed),
                format!("cannot install: {e}"),
            );
            return Ok(());
        }
        match runtime.load_file(&path).await {
            Ok(_) => {
                self.loaded(pass, module, sha, &signed.kid);
                report.changed.push(salt_name(module));
            }
            Err(e) => {
                let reason = format!("not loadable: {e}");
                self.refuse(pass, report, module, Some(signed), reason);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_return_is_salts_list_unless_something_was_refused() {
        let mut r = SyncReport {
            changed: vec!["modules.disk".into()],
            ..Default::default()
        };
        assert_eq!(r.salt_return(), (json!(["modules.disk"]), 0));
        r.refused.insert(
            "modules.evil".into(),
            "not allowed by this maid's sync.allow".into(),
        );
        assert_eq!(
            r.salt_return(),
            (
                json!({"changed": ["modules.disk"],
                       "refused": {"modules.evil": "not allowed by this maid's sync.allow"}}),
                1
            )
        );
    }

    fn kwarg(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn a_sync_job_pins_modules_to_a_hash_or_a_removal() {
        let sha = "0a".repeat(32);
        // No pins: Salt's plain sync_modules (and its own kwargs) names none.
        assert_eq!(pins(&kwarg(json!({}))), Ok(None));
        assert_eq!(pins(&kwarg(json!({"refresh": true}))), Ok(None));
        assert_eq!(pins(&kwarg(json!({"modules": {}}))), Ok(Some(Pins::new())));
        assert_eq!(
            pins(&kwarg(json!({"modules": {"disk": sha, "old": null}}))),
            Ok(Some(Pins::from([
                ("disk".into(), Some(sha.clone())),
                ("old".into(), None)
            ])))
        );
        for bad in [
            json!({"modules": ["disk"]}),
            json!({"modules": "disk"}),
            json!({"modules": {"disk": "latest"}}),
            json!({"modules": {"disk": sha.to_uppercase()}}),
            json!({"modules": {"disk": 1}}),
            json!({"modules": {"../disk": sha}}),
            json!({"modules": {"": null}}),
        ] {
            assert!(pins(&kwarg(bad.clone())).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_job_that_does_nothing_says_why_in_salts_words() {
        assert_eq!(
            JobError::Arguments(BadPins::Module("../disk".into())).to_string(),
            "Passed invalid arguments: modules: \"../disk\" is not a module name"
        );
        assert!(
            JobError::Unpinned
                .to_string()
                .contains(r#"modules={"<module>": "<sha256>"}"#)
        );
    }
}
