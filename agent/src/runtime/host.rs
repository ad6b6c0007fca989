//! The state each call's store carries, and the host interface plugins
//! import (`maid:plugin/host`): logging, grains, retcode, exec and fetch.
//!
//! One `HostState` lives exactly as long as one call. Everything a plugin
//! does outside its memory passes through here, is checked against its
//! grants, and is recorded in `used` for the audit trail.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::Serialize;
use serde_json::{Map, Value};
use wasmtime::component::{Resource, ResourceTable};
use wasmtime::{ResourceLimiter, Result};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::Services;
use super::bindings::maid::plugin::host::{self as wit, HostError, Level};
use super::bindings::maid::plugin::types::Manifest;
use super::fileuse::{FileAccess, FileUses};
use super::policy::Grants;
use super::{exec, files};
use crate::config::Limits;
use crate::fileserver::{OpenError, SourceReader};
use crate::salt::files::{is_saltenv, salt_path};

/// Something a plugin did outside its sandbox, for the audit trail.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum CapabilityUse {
    /// A program was started (or refused): the real path that ran (links
    /// resolved; none when refused before it was found), the SHA-256 of
    /// its argv (as a JSON array), and the argv itself unless records keep
    /// digests only.
    Exec {
        #[serde(skip_serializing_if = "Option::is_none")]
        program: Option<String>,
        argv_sha256: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        argv: Option<Vec<String>>,
        allowed: bool,
    },
    /// A `salt://` source was opened (or refused), with the SHA-256 of the
    /// content served.
    Fetch {
        url: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        sha256: Option<String>,
        allowed: bool,
    },
    /// `salt://` was listed under a prefix (`list-sources`), or the listing
    /// refused; only what the `fetch` grant admits was listed.
    List {
        saltenv: String,
        prefix: String,
        allowed: bool,
    },
    /// A program was looked up (`which`), or the lookup refused.
    Which { program: String, allowed: bool },
    /// A path's owner and mode were read (`stat`), or refused.
    Stat { path: String, allowed: bool },
    /// A path's mode was set (`set-mode`), or refused.
    SetMode {
        path: String,
        mode: u32,
        allowed: bool,
    },
    /// A link was made (`symlink`), or refused.
    Symlink {
        target: String,
        link: String,
        allowed: bool,
    },
    /// A granted file was read (`read-file`), or refused.
    ReadFile { path: String, allowed: bool },
    /// A grain was set or removed (`set-grain`), or refused.
    SetGrain { key: String, allowed: bool },
    /// The job's pillar was read (`pillar`), or refused.
    Pillar { allowed: bool },
    /// The running jobs were listed (`running-jobs`), or refused.
    Jobs { allowed: bool },
    /// A job was signalled (`signal-job`), or refused.
    SignalJob {
        jid: String,
        signal: i32,
        allowed: bool,
    },
    /// A host file or directory under a granted directory was opened
    /// through WASI (`read` or `write`), or changed (`change`: removed,
    /// made, renamed, linked, its times set); or the directory's
    /// permissions refused it. Each path and access once per call.
    File {
        path: String,
        access: FileAccess,
        allowed: bool,
    },
    /// More distinct file uses than a record lists ([`super::MAX_FILES`]): how
    /// many more.
    MoreFiles { count: u64 },
    /// Another module's function was run (`call`), or refused, and what
    /// that function did outside its own sandbox, in order.
    Call {
        fun: String,
        allowed: bool,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        used: Vec<CapabilityUse>,
    },
}

impl CapabilityUse {
    /// Drop what may be secret and keep its digest: an `exec`'s argv
    /// (here and in nested calls).
    pub fn keep_digests_only(&mut self) {
        match self {
            CapabilityUse::Exec { argv, .. } => *argv = None,
            CapabilityUse::Call { used, .. } => used.iter_mut().for_each(Self::keep_digests_only),
            _ => {}
        }
    }
}

/// The per-call state of a store.
pub struct HostState {
    /// Keeps the epoch ticking while this store can run guest code (held
    /// for its `Drop`); `None` while it waits as a spare, running nothing.
    pub(crate) ticking: Option<super::Ticking>,
    /// WASI: preopened directories, captured stdout/stderr, no env, no args.
    pub(crate) wasi: WasiCtx,
    /// WASI and host resources (open sources, streams).
    pub(crate) table: ResourceTable,
    /// Memory, table and instance caps.
    pub(crate) limiter: Limiter,
    /// Which plugin and job this store serves; what it may do.
    pub(crate) job: JobState,
}

/// What the host functions need to know about the call.
pub(crate) struct JobState {
    /// Module name, for log lines.
    pub plugin: Arc<str>,
    /// Job id, for log lines.
    pub jid: Arc<str>,
    /// Effective grants of the plugin.
    pub grants: Arc<Grants>,
    /// Grains and the file server.
    pub services: Arc<Services>,
    /// Every loaded plugin, for `modules` (read when asked, so a call sees
    /// the modules loaded at that moment).
    pub catalog: Arc<super::PluginMap>,
    /// Limits of this call.
    pub limits: Limits,
    /// When the call must be done; programs started by `exec` are killed by
    /// then even if their own timeout is longer.
    pub deadline: Instant,
    /// Retcode set with `set-retcode`.
    pub retcode: Option<i32>,
    /// Log bytes left before lines are dropped.
    pub log_budget: usize,
    /// Log lines dropped for the budget.
    pub log_dropped: u64,
    /// Capabilities exercised, in order.
    pub used: Vec<CapabilityUse>,
    /// The host path of each WASI descriptor this call handed out (by
    /// resource rep), so file uses are recorded by host path.
    pub fs_paths: std::collections::HashMap<u32, std::path::PathBuf>,
    /// The file uses recorded in `used` so far.
    pub files: FileUses,
    /// SHA-256 the job pins for `salt://` sources, by URL
    /// ([`super::CallRequest::source_hashes`]): such a source is served
    /// with exactly that content or not at all.
    pub source_hashes: Arc<BTreeMap<String, String>>,
    /// The job's pillar, opened ([`super::CallRequest::pillar`]).
    pub pillar: Option<Arc<Map<String, Value>>>,
    /// The runtime, for `call`.
    pub runtime: std::sync::Weak<super::Runtime>,
    /// 0 for a job's own call, 1 for a function a plugin ran with `call`.
    pub depth: u8,
    /// The minion and the user the call runs for, passed on by `call`.
    pub minion_id: Arc<str>,
    pub user: Option<String>,
    /// The host's own file system calls (`read-file`, `stat`, `set-mode`,
    /// `symlink`) run on the calling thread, as WASI's do there
    /// ([`super::RuntimeSettings::fs_on_call_thread`]).
    pub fs_on_call_thread: bool,
}

impl JobState {
    /// Run `f`, one of the host's own file system calls, where WASI runs
    /// its own: in an agent on a blocking thread, so a call stuck in the
    /// file system (a FIFO where a granted file was, a hung network mount)
    /// holds no worker, and the call's time limit still ends the job;
    /// on the calling thread for `maid call`.
    async fn in_file_system<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Grants) -> Result<T, HostError> + Send + 'static,
    ) -> Result<T, HostError> {
        if self.fs_on_call_thread {
            return f(&self.grants);
        }
        let grants = self.grants.clone();
        tokio::task::spawn_blocking(move || f(&grants))
            .await
            .unwrap_or_else(|e| Err(HostError::Failed(format!("file system call failed: {e}"))))
    }

    /// A file use through WASI (see [`FileUses::add`]).
    pub(crate) fn file_used(&mut self, path: String, access: FileAccess, allowed: bool) {
        self.files.add(&mut self.used, path, access, allowed);
    }

    /// Record a capability use for the audit trail (`used` is told whether
    /// it was allowed: anything but a denial), and log a refusal.
    fn audit<T>(
        &mut self,
        result: &Result<T, HostError>,
        used: impl FnOnce(bool) -> CapabilityUse,
    ) {
        let allowed = !matches!(result, Err(HostError::Denied(_)));
        if let Err(HostError::Denied(why)) = result {
            tracing::warn!(plugin = &*self.plugin, jid = &*self.jid, "denied: {why}");
        }
        self.used.push(used(allowed));
    }
}

/// How deep `call` may go: a job's plugin may run another function, and
/// that one none. Deeper nesting could wait for pool slots its own callers
/// hold.
const MAX_CALL_DEPTH: u8 = 1;

impl JobState {
    /// What `call` of `fun` would run, once the grant and the depth allow
    /// it and its arguments read.
    fn nested_request(
        &self,
        fun: &str,
        args: &str,
        kwargs: &str,
    ) -> Result<(Arc<super::Runtime>, super::CallRequest), HostError> {
        self.grants.check_call(fun)?;
        if self.depth >= MAX_CALL_DEPTH {
            return Err(denied(format!(
                "{fun}: a function run with call cannot call another"
            )));
        }
        let failed = |what: &str, e: serde_json::Error| HostError::Failed(format!("{what}: {e}"));
        let args =
            serde_json::from_str(args).map_err(|e| failed("args are not a JSON array", e))?;
        let kwargs =
            serde_json::from_str(kwargs).map_err(|e| failed("kwargs are not a JSON object", e))?;
        let runtime = self
            .runtime
            .upgrade()
            .ok_or_else(|| HostError::Failed("the maid is stopping".into()))?;
        let req = super::CallRequest {
            fun: fun.to_string(),
            args,
            kwargs,
            jid: self.jid.to_string(),
            minion_id: self.minion_id.to_string(),
            user: self.user.clone(),
            timeout: Some(self.deadline.saturating_duration_since(Instant::now())),
            source_hashes: (*self.source_hashes).clone(),
            pillar: self.pillar.clone(),
            // A plugin's call of another module is a job's call.
            private: false,
        };
        Ok((runtime, req))
    }

    /// Run `fun` for `call`: checked against the `call` grant, then run in
    /// its own instance under its own grants, within this call's time. A
    /// refusal by the function's grants is a refusal of this call too.
    /// Also what the function did outside its sandbox, for the audit.
    async fn call(
        &self,
        fun: &str,
        args: &str,
        kwargs: &str,
    ) -> (Result<wit::CallOutcome, HostError>, Vec<CapabilityUse>) {
        use super::Failure;
        use wit::CallFailure;
        let (runtime, req) = match self.nested_request(fun, args, kwargs) {
            Ok(nested) => nested,
            Err(e) => return (Err(e), Vec::new()),
        };
        let mut outcome = runtime.nested(req, self.depth + 1).await;
        let used = std::mem::take(&mut outcome.used);
        let failure = match outcome.failure {
            _ if outcome.returned => None,
            None => None,
            Some(Failure::Denied) => {
                let why = match &outcome.ret {
                    Value::String(s) => s.strip_prefix("Denied: ").unwrap_or(s).to_string(),
                    other => other.to_string(),
                };
                return (Err(denied(format!("{fun}: {why}"))), used);
            }
            Some(Failure::NotAvailable) => Some(CallFailure::NotAvailable),
            Some(Failure::BadArguments) => Some(CallFailure::BadArguments),
            Some(Failure::PluginError) => Some(CallFailure::PluginError),
            Some(Failure::TimedOut) => Some(CallFailure::TimedOut),
            Some(Failure::Function) => Some(CallFailure::Failed),
        };
        let outcome = wit::CallOutcome {
            ret: outcome.ret.to_string(),
            retcode: outcome.retcode,
            failure,
        };
        (Ok(outcome), used)
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// Caps on what one instance may allocate. Hitting the memory cap traps
/// with a message the runtime recognises.
pub(crate) struct Limiter {
    pub memory_bytes: usize,
    pub max_instances: usize,
    pub max_tables: usize,
    pub max_table_elements: usize,
    /// Set when the memory cap stopped a grow.
    pub memory_exceeded: bool,
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> Result<bool> {
        if desired > self.memory_bytes {
            self.memory_exceeded = true;
            return Err(wasmtime::format_err!(
                "memory limit of {} MiB exceeded",
                self.memory_bytes >> 20
            ));
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> Result<bool> {
        Ok(desired <= self.max_table_elements)
    }

    fn instances(&self) -> usize {
        self.max_instances
    }

    fn tables(&self) -> usize {
        self.max_tables
    }

    fn memories(&self) -> usize {
        self.max_instances
    }
}

/// An open `salt://` source, held in the store's resource table.
pub struct SourceHandle {
    reader: Box<dyn SourceReader>,
}

fn denied(msg: impl Into<String>) -> HostError {
    HostError::Denied(msg.into())
}

/// A refusal of the grants, as the plugin reads it.
impl From<super::denied::Denied> for HostError {
    fn from(d: super::denied::Denied) -> Self {
        HostError::Denied(d.to_string())
    }
}

impl wit::Host for HostState {
    async fn log(&mut self, level: Level, message: String) {
        let job = &mut self.job;
        if message.len() > job.log_budget {
            job.log_budget = 0;
            job.log_dropped += 1;
            return;
        }
        job.log_budget -= message.len();
        let (plugin, jid) = (&*job.plugin, &*job.jid);
        match level {
            Level::Trace => tracing::trace!(plugin, jid, "{message}"),
            Level::Debug => tracing::debug!(plugin, jid, "{message}"),
            Level::Info => tracing::info!(plugin, jid, "{message}"),
            Level::Warn => tracing::warn!(plugin, jid, "{message}"),
            Level::Error => tracing::error!(plugin, jid, "{message}"),
        }
    }

    async fn grains(&mut self) -> String {
        self.job.services.grains.json()
    }

    async fn pillar(&mut self) -> Result<String, HostError> {
        // A job that carries no pillar has nothing to read or refuse.
        let Some(pillar) = &self.job.pillar else {
            return Ok("{}".to_string());
        };
        let result = if self.job.grants.pillar {
            Ok(serde_json::to_string(&**pillar).expect("pillar serialises"))
        } else {
            Err(denied("pillar is not granted to this plugin"))
        };
        self.job
            .audit(&result, |allowed| CapabilityUse::Pillar { allowed });
        result
    }

    async fn set_retcode(&mut self, retcode: i32) {
        self.job.retcode = Some(retcode);
    }

    async fn dirs(&mut self) -> Vec<wit::GrantedDir> {
        self.job
            .grants
            .preopens()
            .map(|d| wit::GrantedDir {
                path: d.path.to_string_lossy().into_owned(),
                writable: d.writable,
            })
            .collect()
    }

    async fn exec(&mut self, request: wit::ExecRequest) -> Result<wit::ExecOutput, HostError> {
        let job = &mut self.job;
        let argv = request.argv.clone();
        let jobs = job.services.jobs.clone();
        let mut started = None;
        let result = exec::run(
            &job.grants,
            &job.limits,
            job.deadline,
            request,
            (&jobs, &job.jid),
            &mut started,
        )
        .await;
        job.used.push(CapabilityUse::Exec {
            program: started.map(|p| p.to_string_lossy().into_owned()),
            argv_sha256: super::cache::json_sha256(&argv),
            argv: Some(argv),
            allowed: !matches!(result, Err(HostError::Denied(_))),
        });
        if let Err(HostError::Denied(why)) = &result {
            tracing::warn!(plugin = &*job.plugin, jid = &*job.jid, "exec denied: {why}");
        }
        result
    }

    async fn modules(&mut self) -> Vec<Manifest> {
        self.job
            .catalog
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .map(|p| Manifest::from(&p.manifest))
            .collect()
    }

    async fn which(&mut self, program: String) -> Result<Option<String>, HostError> {
        let result = exec::which(&self.job.grants, &program);
        self.job
            .audit(&result, |allowed| CapabilityUse::Which { program, allowed });
        result
    }

    async fn stat(&mut self, path: String, follow: bool) -> Result<wit::FileStat, HostError> {
        let p = path.clone();
        let result = self
            .job
            .in_file_system(move |grants| files::stat(grants, &p, follow))
            .await;
        self.job
            .audit(&result, |allowed| CapabilityUse::Stat { path, allowed });
        result
    }

    async fn set_mode(&mut self, path: String, mode: u32) -> Result<(), HostError> {
        let p = path.clone();
        let result = self
            .job
            .in_file_system(move |grants| files::set_mode(grants, &p, mode))
            .await;
        self.job.audit(&result, |allowed| CapabilityUse::SetMode {
            path,
            mode,
            allowed,
        });
        result
    }

    async fn symlink(&mut self, target: String, link: String) -> Result<(), HostError> {
        let (t, l) = (target.clone(), link.clone());
        let result = self
            .job
            .in_file_system(move |grants| files::symlink(grants, &t, &l))
            .await;
        self.job.audit(&result, |allowed| CapabilityUse::Symlink {
            target,
            link,
            allowed,
        });
        result
    }

    async fn read_file(&mut self, path: String) -> Result<Vec<u8>, HostError> {
        let (p, max) = (path.clone(), self.job.limits.max_output_bytes);
        let result = self
            .job
            .in_file_system(move |grants| files::read_file(grants, max, &p))
            .await;
        self.job
            .audit(&result, |allowed| CapabilityUse::ReadFile { path, allowed });
        result
    }

    async fn running_jobs(&mut self) -> Result<String, HostError> {
        let result = if self.job.grants.jobs {
            Ok(Value::Array(self.job.services.jobs.running()).to_string())
        } else {
            Err(denied("jobs is not granted to this plugin"))
        };
        self.job
            .audit(&result, |allowed| CapabilityUse::Jobs { allowed });
        result
    }

    async fn signal_job(&mut self, jid: String, signal: i32) -> Result<Option<String>, HostError> {
        let result = if self.job.grants.jobs {
            self.job
                .services
                .jobs
                .signal(&jid, signal)
                .map_err(|why| HostError::Failed(why.to_string()))
        } else {
            Err(denied("jobs is not granted to this plugin"))
        };
        if let Ok(Some(_)) = &result {
            tracing::warn!(plugin = &*self.job.plugin, jid = &*self.job.jid, target = %jid, signal, "job signalled");
        }
        self.job.audit(&result, |allowed| CapabilityUse::SignalJob {
            jid,
            signal,
            allowed,
        });
        result
    }

    async fn set_grain(&mut self, key: String, value: Option<String>) -> Result<(), HostError> {
        let result = if !self.job.grants.set_grains {
            Err(denied("set_grains is not granted to this plugin"))
        } else {
            match value
                .as_deref()
                .map(serde_json::from_str::<Value>)
                .transpose()
            {
                Err(e) => Err(HostError::Failed(format!("grain value is not JSON: {e}"))),
                Ok(v) => self
                    .job
                    .services
                    .grains
                    .set(&key, v)
                    .map_err(|why| HostError::Failed(why.to_string())),
            }
        };
        self.job
            .audit(&result, |allowed| CapabilityUse::SetGrain { key, allowed });
        result
    }

    async fn call(
        &mut self,
        function: String,
        args: String,
        kwargs: String,
    ) -> Result<wit::CallOutcome, HostError> {
        let (result, used) = self.job.call(&function, &args, &kwargs).await;
        if result.is_ok() {
            tracing::info!(plugin = &*self.job.plugin, jid = &*self.job.jid, fun = %function, "ran another function");
        }
        self.job.audit(&result, |allowed| CapabilityUse::Call {
            fun: function,
            allowed,
            used,
        });
        result
    }

    async fn interfaces(&mut self) -> String {
        crate::grains::interfaces().to_string()
    }

    async fn list_sources(&mut self, prefix: String) -> Result<wit::Listing, HostError> {
        self.list_sources_in("base".into(), prefix).await
    }

    async fn list_sources_in(
        &mut self,
        saltenv: String,
        prefix: String,
    ) -> Result<wit::Listing, HostError> {
        let result = listing_for(&self.job.grants, &self.job.services, &saltenv, &prefix).await;
        self.job.audit(&result, |allowed| CapabilityUse::List {
            saltenv,
            prefix,
            allowed,
        });
        result
    }

    async fn fetch(&mut self, url: String) -> Result<Option<Resource<SourceHandle>>, HostError> {
        let job = &mut self.job;
        // The grant is held against the path the URL names (in any
        // environment), never the URL as spelt: `salt://secret?x.conf` is
        // no `*.conf`.
        let opened = match crate::salt::files::parse(&url) {
            Err(why) => Err(denied(format!("fetch: {why}"))),
            Ok(parsed) => {
                let canonical = format!("salt://{}", parsed.path.display());
                match job.grants.check_fetch(&canonical) {
                    Err(e) => Err(e.into()),
                    Ok(()) => {
                        let saltenv = parsed.saltenv.as_deref().unwrap_or("base");
                        let pin = pinned(&job.source_hashes, &parsed.path);
                        open_source(&job.services, &url, saltenv, &parsed.path, pin.as_deref())
                            .await
                    }
                }
            }
        };
        job.used.push(CapabilityUse::Fetch {
            url: url.clone(),
            sha256: match &opened {
                Ok(Some(reader)) => Some(reader.sha256().to_string()),
                _ => None,
            },
            allowed: !matches!(opened, Err(HostError::Denied(_))),
        });
        let opened = opened.inspect_err(|e| {
            if let HostError::Denied(why) = e {
                tracing::warn!(
                    plugin = &*job.plugin,
                    jid = &*job.jid,
                    "fetch denied: {why}"
                );
            }
        })?;
        match opened {
            None => Ok(None),
            Some(reader) => {
                let handle = self
                    .table
                    .push(SourceHandle { reader })
                    .map_err(|e| HostError::Failed(e.to_string()))?;
                Ok(Some(handle))
            }
        }
    }
}

/// What the file servers hold in `saltenv` under `prefix`, less what the
/// `fetch` grant would not open: a file is listed when its URL is
/// granted, a directory when its URL is granted or it holds a listed file
/// or directory, so a plugin learns nothing of a path it could not fetch.
/// Salt's prefix is a string prefix with its `/` taken off both ends.
async fn listing_for(
    grants: &Grants,
    services: &Services,
    saltenv: &str,
    prefix: &str,
) -> Result<wit::Listing, HostError> {
    if grants.fetch.is_empty() {
        return Err(super::denied::Denied::NotGranted("fetch").into());
    }
    if !is_saltenv(saltenv) {
        return Err(denied(format!(
            "{saltenv:?} is not an environment name (letters, digits, `_`, `-`, `.`)"
        )));
    }
    let prefix = prefix.trim_matches('/');
    if prefix.contains(['\0', '\\']) || prefix.split('/').any(|c| c == "..") {
        return Err(denied(format!(
            "{prefix:?} is not a salt:// path that stays inside the file roots"
        )));
    }
    let listing = services
        .files
        .list(saltenv, prefix)
        .await
        .map_err(|e| match e {
            OpenError::Denied(why) => HostError::Denied(why),
            OpenError::Failed(why) => HostError::Failed(why),
        })?;
    let granted = |path: &str| grants.check_fetch(&format!("salt://{path}")).is_ok();
    let files: Vec<String> = listing.files.into_iter().filter(|f| granted(f)).collect();
    // The directories above what is listed: the plugin learns them from
    // the listed paths anyway.
    let mut above = std::collections::BTreeSet::new();
    fn note_above(path: &str, above: &mut std::collections::BTreeSet<String>) {
        let mut p = path;
        while let Some((parent, _)) = p.rsplit_once('/') {
            if !above.insert(parent.to_string()) {
                break;
            }
            p = parent;
        }
    }
    for f in &files {
        note_above(f, &mut above);
    }
    // Deepest first, so a directory holding only a listed directory is
    // seen to hold something listed.
    let mut dirs: Vec<String> = Vec::new();
    for dir in listing.dirs.into_iter().rev() {
        if above.contains(&dir) || granted(&dir) {
            note_above(&dir, &mut above);
            dirs.push(dir);
        }
    }
    dirs.reverse();
    Ok(wit::Listing { files, dirs })
}

/// The SHA-256 the job pins for `path`: pins are keyed by URL, and any
/// spelling of a URL that names the same path is held to the pin.
fn pinned(pins: &BTreeMap<String, String>, path: &Path) -> Option<String> {
    pins.iter()
        .find(|(url, _)| salt_path(url).is_ok_and(|p| p == path))
        .map(|(_, sha)| sha.to_ascii_lowercase())
}

/// Open `path` from the file servers. A pinned source is served only with
/// the pinned hash, whatever server answered: the servers check, and so
/// does this, so a server that forgot to cannot serve other content.
async fn open_source(
    services: &Services,
    url: &str,
    saltenv: &str,
    path: &Path,
    pin: Option<&str>,
) -> Result<Option<Box<dyn SourceReader>>, HostError> {
    let opened = services
        .files
        .open(saltenv, path, pin)
        .await
        .map_err(|e| match e {
            OpenError::Denied(why) => HostError::Denied(why),
            OpenError::Failed(why) => HostError::Failed(why),
        })?;
    match (opened, pin) {
        (Some(reader), Some(pin)) if reader.sha256() != pin => Err(denied(format!(
            "{url}: the job pins content {pin}, the file server offers {}",
            reader.sha256()
        ))),
        (opened, _) => Ok(opened),
    }
}

impl wit::HostSource for HostState {
    async fn info(&mut self, this: Resource<SourceHandle>) -> wit::SourceInfo {
        match self.table.get(&this) {
            Ok(h) => wit::SourceInfo {
                size: h.reader.size(),
                sha256: h.reader.sha256().to_string(),
            },
            Err(_) => wit::SourceInfo {
                size: 0,
                sha256: String::new(),
            },
        }
    }

    async fn read(&mut self, this: Resource<SourceHandle>, len: u32) -> Result<Vec<u8>, HostError> {
        // Bound one read so a plugin cannot make the host buffer a whole
        // file at once.
        const MAX_READ: usize = 4 << 20;
        let h = self
            .table
            .get_mut(&this)
            .map_err(|e| HostError::Failed(e.to_string()))?;
        h.reader
            .read((len as usize).min(MAX_READ))
            .await
            .map_err(|e| HostError::Failed(e.to_string()))
    }

    async fn drop(&mut self, this: Resource<SourceHandle>) -> Result<()> {
        self.table.delete(this)?;
        Ok(())
    }
}

/// Collects what a guest writes to stdout or stderr, up to a bound; the rest
/// is dropped (a plugin that floods its output must not exhaust the agent).
#[derive(Clone)]
pub(crate) struct Capture {
    buf: Arc<Mutex<Vec<u8>>>,
    cap: usize,
}

impl Capture {
    pub fn new(cap: usize) -> Self {
        Self {
            buf: Arc::default(),
            cap,
        }
    }

    /// What was captured, as text.
    pub fn text(&self) -> String {
        let buf = self.buf.lock().unwrap_or_else(|e| e.into_inner());
        String::from_utf8_lossy(&buf).into_owned()
    }
}

impl wasmtime_wasi::cli::IsTerminal for Capture {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl wasmtime_wasi::cli::StdoutStream for Capture {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

impl tokio::io::AsyncWrite for Capture {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        data: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let mut buf = self.buf.lock().unwrap_or_else(|e| e.into_inner());
        let room = self.cap.saturating_sub(buf.len());
        buf.extend_from_slice(&data[..data.len().min(room)]);
        std::task::Poll::Ready(Ok(data.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

/// `maid:plugin/types` has no functions; its host trait is empty.
impl super::bindings::maid::plugin::types::Host for HostState {}
