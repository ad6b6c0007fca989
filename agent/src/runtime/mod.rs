//! The plugin runtime: loads `<module>.wasm` components from a plugin
//! directory and runs one function call per fresh, sandboxed instance.
//!
//! Loading compiles each plugin once (through the on-disk
//! [`ArtifactCache`]), asks it to `describe` itself, validates the manifest
//! and intersects what it asks for with what the configuration grants.
//! Calling instantiates from a pre-linked `InstancePre` into a new store,
//! with its own memory cap, an epoch-based wall-clock limit, captured
//! stdout/stderr and only the grants of that plugin. Whatever the guest
//! does — trap, loop, exhaust memory or its stack — ends as an [`Outcome`]
//! with Salt's return shape, never as an error of the runtime itself.
//!
//! One file per concern: this one holds the types and the engine's set-up
//! ([`Runtime::new`]); [`pool`] sizes the pooling allocator, [`ticker`]
//! drives the epoch, [`wasi`] links WASI, [`registry`] loads and answers
//! for plugins, [`spare`] makes an instance ahead, [`call`] runs a call;
//! [`host`], [`exec`] and [`policy`] are what a guest can ask of the host
//! and what its grants allow, [`programs`] which programs start without
//! the shell grant.

mod ahead;
mod bindings;
mod cache;
mod call;
pub mod denied;
mod exec;
mod fileid;
mod files;
mod fileuse;
mod host;
pub mod jobs;
pub mod manifest;
pub mod policy;
mod pool;
pub mod programs;
mod registry;
mod spare;
mod ticker;
mod wasi;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Map, Value};
use wasmtime::component::{HasSelf, Linker, ResourceTable};
use wasmtime::{
    Config as EngineConfig, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig,
    Store, Trap, UpdateDeadline,
};
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

pub use ahead::CompiledAhead;
pub(crate) use cache::json_sha256;
pub use cache::{ArtifactCache, CacheStatus, CompileFor, SHIPPED_DIR, WASMTIME_VERSION};
pub use fileuse::{FileAccess, MAX_FILES};
pub use host::CapabilityUse;
pub use jobs::JobData;
pub use manifest::{Capability, FunctionDoc, Manifest};
pub use policy::{GrantSummary, Grants};
pub use registry::modules_in;

use pool::{bound_free_heap, pool, release_free_heap};
use spare::Spare;
use ticker::Ticker;
pub(crate) use ticker::Ticking;
use wasi::link_wasi;

use crate::config::{Config, Limits};
use crate::fileserver::{Chain, FileServer, LocalRoots, NoFiles};
use bindings::{Plugin as PluginBindings, PluginPre};
use host::{Capture, HostState, JobState, Limiter};

/// How often the engine's epoch advances; the granularity of wall-clock
/// limits and of the yields that keep a busy guest from starving the
/// async runtime.
const EPOCH_TICK: Duration = Duration::from_millis(5);

/// Bytes of a guest's stdout/stderr kept per call (panic messages, prints).
const CAPTURE_BYTES: usize = 64 << 10;

/// How long `describe` may take at load time.
const DESCRIBE_TIMEOUT: Duration = Duration::from_secs(10);

/// Salt retcodes for failures the runtime itself detects (PROTOCOL.md 3.2).
pub mod retcode {
    /// The function does not exist.
    pub const NOT_AVAILABLE: i32 = 254;
    /// Bad arguments, plugin errors, the function's generic failure.
    pub const ERROR: i32 = 1;
    /// A capability was not granted.
    pub const DENIED: i32 = 77;
    /// The call ran past its wall-clock limit.
    pub const TIMED_OUT: i32 = 124;
}

/// What plugins can reach through the host: grains and `salt://` files.
pub struct Services {
    /// The minion's grains, live.
    pub grains: Arc<crate::grains::GrainStore>,
    /// Where `salt://` sources come from.
    pub files: Arc<dyn FileServer>,
    /// The jobs running, for `saltutil` (empty outside an agent).
    pub jobs: Arc<jobs::JobTable>,
}

/// Why a plugin could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error("{path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
}

/// A loaded, validated plugin, ready to instantiate.
pub struct LoadedPlugin {
    /// Where it was loaded from.
    pub path: PathBuf,
    /// SHA-256 of the `.wasm` file: what a reviewer pins.
    pub sha256: String,
    /// What the plugin says about itself (validated).
    pub manifest: Manifest,
    /// What it may actually do: manifest ∩ config.
    pub grants: Arc<Grants>,
    /// Limits it runs under.
    pub limits: Limits,
    /// What the compiled-artifact cache did when it was loaded
    /// ([`CacheStatus::Deferred`]: nothing yet, see [`LoadedPlugin::artifact`]).
    pub cache: CacheStatus,
    /// The file's id when it vouched for the bytes hashed (see
    /// `fileid`): while the file keeps it, the first call does not read
    /// it again.
    file_id: Option<fileid::FileId>,
    /// Bounds the instances running at once (`limits.max_concurrent`).
    slots: Arc<tokio::sync::Semaphore>,
    /// The compiled, linked plugin, and what the cache did for it: made
    /// when it was loaded, or at its first call when its manifest came from
    /// the cache.
    pre: tokio::sync::OnceCell<(PluginPre<HostState>, CacheStatus)>,
}

impl LoadedPlugin {
    /// What the compiled-artifact cache did for this plugin's code, once
    /// it was loaded: at its first call (also after it was compiled and
    /// described at load: its code is then kept in the cache, not in
    /// memory), or at load without a cache.
    pub fn artifact(&self) -> Option<CacheStatus> {
        self.pre.get().map(|(_, status)| *status)
    }
}

impl std::fmt::Debug for LoadedPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedPlugin")
            .field("path", &self.path)
            .field("sha256", &self.sha256)
            .field("module", &self.manifest.module)
            .finish_non_exhaustive()
    }
}

/// One function call.
#[derive(Debug, Clone, Default)]
pub struct CallRequest {
    /// `module.function`.
    pub fun: String,
    /// Positional arguments.
    pub args: Vec<Value>,
    /// Keyword arguments.
    pub kwargs: Map<String, Value>,
    /// Job id.
    pub jid: String,
    /// Minion id the call runs as.
    pub minion_id: String,
    /// Who asked.
    pub user: Option<String>,
    /// The job's own timeout; it can only lower the plugin's limit.
    pub timeout: Option<Duration>,
    /// SHA-256 the signed job pins for `salt://` sources, by URL: `fetch`
    /// serves such a source only with that content.
    pub source_hashes: std::collections::BTreeMap<String, String>,
    /// The minion's pillar for this job (PROTOCOL §8), opened by the agent
    /// from the record the signed job pins; `None`: the job carries none.
    /// Only a plugin granted `pillar` reads it.
    pub pillar: Option<Arc<Map<String, Value>>>,
    /// The agent's own call (core grains), never a job's: only such a call
    /// reaches a module's private functions (`_core`).
    pub private: bool,
}

/// How a call failed, when it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Failure {
    NotAvailable,
    BadArguments,
    Denied,
    PluginError,
    TimedOut,
    /// The function's own failure (an error it returned, or a retcode it set).
    Function,
}

/// The result of a call, in Salt's shape: `ret` is the return value, or a
/// human-readable string when the call failed.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub ret: Value,
    pub retcode: i32,
    /// Set when the call failed; `None` with retcode 0 is success.
    pub failure: Option<Failure>,
    /// Wall-clock time of the call.
    #[serde(skip)]
    pub duration: Duration,
    /// What the plugin did outside its sandbox.
    pub used: Vec<CapabilityUse>,
    /// SHA-256 of the plugin that ran, when one did.
    pub plugin_sha256: Option<String>,
    /// The function returned a value (with or without a retcode set)
    /// rather than failing: what a calling plugin tells apart (`test.try`).
    #[serde(skip)]
    pub returned: bool,
}

/// What is left of a call once its outcome is known: the instance's store
/// and the pool slots it holds. Dropping it resets the slot (the pages the
/// guest dirtied, its fiber stack) and gives the slot back; the agent does
/// that after its return is written, not before.
#[derive(Default)]
pub struct Teardown {
    // Declared first, so dropped first: a slot's permit goes back only once
    // the store in it is gone.
    store: Option<Store<HostState>>,
    _slots: Option<[tokio::sync::OwnedSemaphorePermit; 2]>,
}

impl Teardown {
    /// Whether an instance is still here to tear down (a deferred one).
    pub fn holds_instance(&self) -> bool {
        self.store.is_some()
    }
}

impl Outcome {
    fn fail(failure: Failure, retcode: i32, message: String) -> Self {
        Self {
            ret: Value::String(message),
            retcode,
            failure: Some(failure),
            duration: Duration::ZERO,
            used: Vec::new(),
            plugin_sha256: None,
            returned: false,
        }
    }

    pub fn success(&self) -> bool {
        self.retcode == 0
    }
}

/// Where plugins come from and what they may do.
#[derive(Clone)]
pub struct RuntimeSettings {
    /// The configuration: grants and limits per plugin.
    pub config: Arc<Config>,
    /// Compiled-artifact cache directory; `None` compiles in memory.
    pub cache_dir: Option<PathBuf>,
    /// The plugins compiled ahead and shipped beside them
    /// (`<plugin_dir>/precompiled`, see [`cache::SHIPPED_DIR`]): read when
    /// a plugin is not in the cache, before it is compiled.
    pub shipped_dir: Option<PathBuf>,
    /// Which CPUs what this runtime compiles is for: this host's (an
    /// agent's cache), or any of its architecture (`maid plugin compile`).
    pub compile_for: CompileFor,
    /// Grains and the file server.
    pub services: Arc<Services>,
    /// Plugin instances alive at once, across all plugins: the slots of the
    /// pooling allocator. A call that finds every slot taken waits for one
    /// (within its time limit). An agent needs its job concurrency plus one
    /// for loading; see [`RuntimeSettings::instances_for`].
    pub instances: u32,
    /// A plugin's file system calls (WASI) run on the thread that runs
    /// the plugin, not handed to a blocking thread and back. For a
    /// process that is one call (`maid call`, as salt-call): the hand-offs
    /// were half of a second highstate's time. Not for an agent: there a
    /// call blocked in the file system (a FIFO, a hung NFS mount) would
    /// hold a worker thread that heartbeats and other jobs need, and its
    /// timeout could not fire.
    pub fs_on_call_thread: bool,
}

impl RuntimeSettings {
    /// Slots for a process that runs up to `concurrency` calls at once, plus
    /// one for `describe` while (re)loading plugins.
    pub fn instances_for(concurrency: usize) -> u32 {
        u32::try_from(concurrency)
            .unwrap_or(u32::MAX)
            .saturating_add(1)
    }

    /// The pool's slots: [`RuntimeSettings::instances`], at least one.
    fn pool_slots(&self) -> u32 {
        self.instances.max(1)
    }
}

/// The loaded plugins, by module name.
pub(crate) type PluginMap = RwLock<BTreeMap<String, Arc<LoadedPlugin>>>;

/// Loads plugins and runs calls.
pub struct Runtime {
    engine: Engine,
    ticker: Arc<Ticker>,
    linker: Linker<HostState>,
    cache: ArtifactCache,
    settings: RuntimeSettings,
    /// Shared with every call's store, for `host.modules` (`sys.*`).
    plugins: Arc<PluginMap>,
    /// Why each plugin file that failed its last load did, by module (its
    /// file stem), with the file: a call of the module says why it is not
    /// available, as Salt's loader does for a module that did not load.
    failed: RwLock<BTreeMap<String, (PathBuf, String)>>,
    /// One permit per pool slot (see [`RuntimeSettings::instances`]).
    slots: Arc<tokio::sync::Semaphore>,
    /// At most one instance made ahead; it holds one of the slots.
    spare: std::sync::Mutex<Option<Spare>>,
    /// This runtime, for the calls a plugin makes with `call`.
    me: std::sync::Weak<Runtime>,
}

/// Why the plugin runtime could not be set up: wasmtime refused its
/// engine or its linker (a kernel without what the pooling allocator
/// needs, a host function defined twice).
#[derive(Debug, thiserror::Error)]
#[error("{0:#}")]
pub struct SetupError(#[from] wasmtime::Error);

impl Runtime {
    /// A runtime for `config` as resolved (its `cache_dir` used as it is),
    /// offering `grains` to plugins, serving `salt://` from the config's
    /// `file_roots`, then from `fallback` when given, with room for
    /// `instances` calls at once; with `fs_on_call_thread` (see
    /// [`RuntimeSettings::fs_on_call_thread`]) for a one-call process.
    pub fn for_config(
        config: &Config,
        grains: &Map<String, Value>,
        fallback: Option<Arc<dyn FileServer>>,
        instances: u32,
        fs_on_call_thread: bool,
    ) -> Result<Arc<Runtime>, SetupError> {
        Runtime::new(Self::settings_for(
            config,
            grains,
            fallback,
            instances,
            fs_on_call_thread,
        ))
    }

    /// [`Runtime::for_config`]'s settings.
    fn settings_for(
        config: &Config,
        grains: &Map<String, Value>,
        fallback: Option<Arc<dyn FileServer>>,
        instances: u32,
        fs_on_call_thread: bool,
    ) -> RuntimeSettings {
        let mut servers: Vec<Arc<dyn FileServer>> = Vec::new();
        if !config.file_roots.is_empty() {
            servers.push(Arc::new(LocalRoots::new(config.file_roots.clone())));
        }
        servers.extend(fallback);
        let files: Arc<dyn FileServer> = match servers.len() {
            0 => Arc::new(NoFiles),
            1 => servers.remove(0),
            _ => Arc::new(Chain(servers)),
        };
        let services = Arc::new(Services {
            grains: Arc::new(crate::grains::GrainStore::new(
                grains.clone(),
                config.security.state_dir.as_deref(),
            )),
            files,
            jobs: Default::default(),
        });
        RuntimeSettings {
            config: Arc::new(config.clone()),
            cache_dir: config.cache_dir.clone(),
            shipped_dir: config.plugin_dir.as_ref().map(|d| d.join(SHIPPED_DIR)),
            compile_for: CompileFor::Host,
            services,
            instances,
            fs_on_call_thread,
        }
    }

    /// A runtime with no plugins loaded yet.
    pub fn new(settings: RuntimeSettings) -> Result<Arc<Self>, SetupError> {
        bound_free_heap();
        // What compiled code depends on; the cache's compiler uses the same
        // (bump `cache::ENGINE_SETTINGS` when changing it).
        let mut base = EngineConfig::new();
        base.wasm_component_model(true);
        base.epoch_interruption(true);
        // A guest's own stack; deep recursion traps here, well inside the
        // fiber stack it runs on.
        base.max_wasm_stack(1 << 20);
        base.async_stack_size(4 << 20);
        // Pooled stacks are reused across calls and plugins: zero them, so
        // nothing of one job survives into the next (PROTOCOL §5), and give
        // their pages back instead of keeping every slot's high-water mark.
        base.async_stack_zeroing(true);
        let engine = |reset_in_place| {
            let mut config = base.clone();
            // Plugins are compiled by the cache's own engine, only when
            // they are not in the cache (see `cache`).
            config.enable_compiler(false);
            config.allocation_strategy(pool(&settings, reset_in_place));
            Engine::new(&config)
        };
        // Older kernels have no PAGEMAP_SCAN: slots are then unmapped.
        let engine = engine(true).or_else(|e| {
            tracing::debug!(cause = %e, "slots are reset by unmapping their pages");
            engine(false)
        })?;
        let ticker = Ticker::start(&engine);
        let mut linker = Linker::new(&engine);
        link_wasi(&mut linker)?;
        PluginBindings::add_to_linker::<HostState, HasSelf<HostState>>(&mut linker, |s| s)?;
        let cache = ArtifactCache::new(
            settings.cache_dir.clone(),
            settings.shipped_dir.as_deref(),
            base,
            settings.compile_for,
        )?;
        Ok(Arc::new_cyclic(|me| Self {
            engine,
            ticker,
            linker,
            cache,
            plugins: Arc::default(),
            failed: RwLock::new(BTreeMap::new()),
            slots: Arc::new(tokio::sync::Semaphore::new(settings.pool_slots() as usize)),
            spare: std::sync::Mutex::new(None),
            me: me.clone(),
            settings,
        }))
    }

    /// The grains plugins read and `grains.setval` changes.
    pub fn grains(&self) -> &Arc<crate::grains::GrainStore> {
        &self.settings.services.grains
    }

    /// The jobs running on this runtime's agent.
    pub fn jobs(&self) -> &Arc<jobs::JobTable> {
        &self.settings.services.jobs
    }

    /// Whether this runtime has set up its compiler, which it does only
    /// when a plugin is not in the compiled-plugin cache.
    pub fn compiler_set_up(&self) -> bool {
        self.cache.compiler_set_up()
    }

    /// Whether the epoch ticker sleeps: no call or load has run for a
    /// while, so nothing needs the epoch to advance.
    pub fn ticker_parked(&self) -> bool {
        self.ticker.parked()
    }
}
