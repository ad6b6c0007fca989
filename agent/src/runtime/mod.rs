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

mod bindings;
mod cache;
mod exec;
mod host;
pub mod manifest;
pub mod policy;

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

pub use cache::{ArtifactCache, CacheStatus, WASMTIME_VERSION};
pub use host::CapabilityUse;
pub use manifest::{Capability, FunctionDoc, Manifest};
pub use policy::{GrantSummary, Grants};

use crate::config::{Config, Limits};
use crate::fileserver::FileServer;
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
    /// The minion's grains, serialised once.
    pub grains_json: String,
    /// Where `salt://` sources come from.
    pub files: Arc<dyn FileServer>,
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
    /// What the compiled-artifact cache did when it was loaded.
    pub cache: CacheStatus,
    /// Bounds the instances running at once (`limits.max_concurrent`).
    slots: Arc<tokio::sync::Semaphore>,
    pre: PluginPre<HostState>,
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
        }
    }

    pub fn success(&self) -> bool {
        self.retcode == 0
    }
}

/// An instance of a plugin made ahead of its next call, while nothing ran
/// (see [`Runtime::prepare`]), so that call skips instantiating. It was
/// made with no grants and an empty WASI context, and nothing of it has run
/// but the component's own start-up; the call puts its own context, grants
/// and deadline in before running it. Fresh, like any call's instance: no
/// job has touched it.
struct Spare {
    plugin: Arc<LoadedPlugin>,
    // Declared before the slot, so dropped before it.
    store: Store<HostState>,
    instance: PluginBindings,
    slot: tokio::sync::OwnedSemaphorePermit,
}

/// Where plugins come from and what they may do.
#[derive(Clone)]
pub struct RuntimeSettings {
    /// The configuration: grants and limits per plugin.
    pub config: Arc<Config>,
    /// Compiled-artifact cache directory; `None` compiles in memory.
    pub cache_dir: Option<PathBuf>,
    /// Grains and the file server.
    pub services: Arc<Services>,
    /// Plugin instances alive at once, across all plugins: the slots of the
    /// pooling allocator. A call that finds every slot taken waits for one
    /// (within its time limit). An agent needs its job concurrency plus one
    /// for loading; see [`RuntimeSettings::instances_for`].
    pub instances: u32,
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

/// Loads plugins and runs calls.
pub struct Runtime {
    engine: Engine,
    ticker: Arc<Ticker>,
    linker: Linker<HostState>,
    cache: ArtifactCache,
    settings: RuntimeSettings,
    plugins: RwLock<BTreeMap<String, Arc<LoadedPlugin>>>,
    /// Why each plugin file that failed its last load did, by module (its
    /// file stem), with the file: a call of the module says why it is not
    /// available, as Salt's loader does for a module that did not load.
    failed: RwLock<BTreeMap<String, (PathBuf, String)>>,
    /// One permit per pool slot (see [`RuntimeSettings::instances`]).
    slots: Arc<tokio::sync::Semaphore>,
    /// At most one instance made ahead; it holds one of the slots.
    spare: std::sync::Mutex<Option<Spare>>,
}

/// Ticks the ticker keeps going after the last store is gone, so a steady
/// stream of jobs never has to wake it.
const IDLE_TICKS: u32 = 200;

/// While parked, how often the ticker checks that its engine still exists.
const PARKED_CHECK: Duration = Duration::from_secs(1);

/// Advances the engine's epoch, which is what stops a guest past its
/// deadline and makes a busy one yield, every [`EPOCH_TICK`] while a store
/// exists (and for [`IDLE_TICKS`] after); an idle agent's ticker sleeps
/// instead of waking 200 times a second. Ends when the engine is dropped.
struct Ticker {
    state: Arc<TickState>,
    thread: std::thread::Thread,
}

#[derive(Default)]
struct TickState {
    /// Stores alive: each can run guest code.
    stores: AtomicUsize,
    /// The ticker is parked, or about to park.
    parked: AtomicBool,
}

/// Held by every store (in its [`HostState`]): the ticker ticks while one
/// exists.
pub(crate) struct Ticking(Arc<Ticker>);

impl Drop for Ticking {
    fn drop(&mut self) {
        self.0.state.stores.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Ticker {
    fn start(engine: &Engine) -> Arc<Ticker> {
        let weak = engine.weak();
        let state = Arc::new(TickState::default());
        let shared = state.clone();
        let handle = std::thread::Builder::new()
            .name("maid-epoch".into())
            .spawn(move || {
                let state = shared;
                let mut idle = 0;
                loop {
                    let Some(engine) = weak.upgrade() else { return };
                    engine.increment_epoch();
                    drop(engine);
                    if state.stores.load(Ordering::SeqCst) > 0 {
                        idle = 0;
                    } else {
                        idle += 1;
                    }
                    if idle < IDLE_TICKS {
                        std::thread::sleep(EPOCH_TICK);
                        continue;
                    }
                    // Say "parked" before looking at the count: a store made
                    // meanwhile either is seen here or sees the flag and
                    // unparks this thread.
                    state.parked.store(true, Ordering::SeqCst);
                    while state.stores.load(Ordering::SeqCst) == 0 {
                        if weak.upgrade().is_none() {
                            return;
                        }
                        std::thread::park_timeout(PARKED_CHECK);
                    }
                    state.parked.store(false, Ordering::SeqCst);
                    idle = 0;
                }
            })
            .expect("spawn epoch thread");
        Arc::new(Ticker {
            state,
            thread: handle.thread().clone(),
        })
    }

    /// A store is being made: tick (waking the ticker if it sleeps).
    fn ticking(self: &Arc<Self>) -> Ticking {
        self.state.stores.fetch_add(1, Ordering::SeqCst);
        if self.state.parked.load(Ordering::SeqCst) {
            self.thread.unpark();
        }
        Ticking(self.clone())
    }

    /// Whether the ticker sleeps (no store for a while).
    fn parked(&self) -> bool {
        self.state.parked.load(Ordering::SeqCst)
    }
}

fn link_wasi(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    // Everything of wasi:cli 0.2 that a guest's standard library imports.
    // That includes wasi:sockets: CPython built by componentize-py imports
    // it whether or not the plugin opens a socket. It is linked so such a
    // plugin loads, but no call can use it: the `WasiCtx` of every store is
    // built without `allow_tcp`, `allow_udp`, `allow_ip_name_lookup` or a
    // socket address check, so creating a socket, resolving a name and every
    // address are refused (`access-denied`). A plugin reaches outside only
    // through `host.exec` and `host.fetch`, which check its grants.
    use wasmtime_wasi::cli::{WasiCli, WasiCliView};
    use wasmtime_wasi::clocks::{WasiClocks, WasiClocksView};
    use wasmtime_wasi::filesystem::{WasiFilesystem, WasiFilesystemView};
    use wasmtime_wasi::p2::bindings::{cli, clocks, filesystem, random, sockets};
    use wasmtime_wasi::sockets::{WasiSockets, WasiSocketsView};
    use wasmtime_wasi::{WasiView, random::WasiRandom};
    type Io = HasSelf<ResourceTable>;
    let l = linker;
    wasmtime_wasi_io::bindings::wasi::io::error::add_to_linker::<HostState, Io>(l, |t| {
        &mut t.table
    })?;
    wasmtime_wasi_io::bindings::wasi::io::poll::add_to_linker::<HostState, Io>(l, |t| {
        &mut t.table
    })?;
    wasmtime_wasi_io::bindings::wasi::io::streams::add_to_linker::<HostState, Io>(l, |t| {
        &mut t.table
    })?;
    clocks::wall_clock::add_to_linker::<HostState, WasiClocks>(l, |t| t.clocks())?;
    clocks::monotonic_clock::add_to_linker::<HostState, WasiClocks>(l, |t| t.clocks())?;
    filesystem::types::add_to_linker::<HostState, WasiFilesystem>(l, |t| t.filesystem())?;
    filesystem::preopens::add_to_linker::<HostState, WasiFilesystem>(l, |t| t.filesystem())?;
    random::random::add_to_linker::<HostState, WasiRandom>(l, |t| t.ctx().ctx.random())?;
    random::insecure::add_to_linker::<HostState, WasiRandom>(l, |t| t.ctx().ctx.random())?;
    random::insecure_seed::add_to_linker::<HostState, WasiRandom>(l, |t| t.ctx().ctx.random())?;
    cli::exit::add_to_linker::<HostState, WasiCli>(l, |t| t.cli())?;
    cli::environment::add_to_linker::<HostState, WasiCli>(l, |t| t.cli())?;
    cli::stdin::add_to_linker::<HostState, WasiCli>(l, |t| t.cli())?;
    cli::stdout::add_to_linker::<HostState, WasiCli>(l, |t| t.cli())?;
    cli::stderr::add_to_linker::<HostState, WasiCli>(l, |t| t.cli())?;
    cli::terminal_input::add_to_linker::<HostState, WasiCli>(l, |t| t.cli())?;
    cli::terminal_output::add_to_linker::<HostState, WasiCli>(l, |t| t.cli())?;
    cli::terminal_stdin::add_to_linker::<HostState, WasiCli>(l, |t| t.cli())?;
    cli::terminal_stdout::add_to_linker::<HostState, WasiCli>(l, |t| t.cli())?;
    cli::terminal_stderr::add_to_linker::<HostState, WasiCli>(l, |t| t.cli())?;
    let network = sockets::network::LinkOptions::default();
    sockets::network::add_to_linker::<HostState, WasiSockets>(l, &network, |t| t.sockets())?;
    sockets::instance_network::add_to_linker::<HostState, WasiSockets>(l, |t| t.sockets())?;
    sockets::tcp::add_to_linker::<HostState, WasiSockets>(l, |t| t.sockets())?;
    sockets::tcp_create_socket::add_to_linker::<HostState, WasiSockets>(l, |t| t.sockets())?;
    sockets::udp::add_to_linker::<HostState, WasiSockets>(l, |t| t.sockets())?;
    sockets::udp_create_socket::add_to_linker::<HostState, WasiSockets>(l, |t| t.sockets())?;
    sockets::ip_name_lookup::add_to_linker::<HostState, WasiSockets>(l, |t| t.sockets())?;
    Ok(())
}

/// Classify a call that ended in a wasmtime error (trap, limit, interrupt).
fn classify_trap(
    err: &wasmtime::Error,
    state: &HostState,
    stderr: &str,
    timeout: Duration,
) -> Outcome {
    if state.limiter.memory_exceeded {
        return Outcome::fail(
            Failure::PluginError,
            retcode::ERROR,
            format!(
                "Plugin error: memory limit of {} MiB exceeded",
                state.limiter.memory_bytes >> 20
            ),
        );
    }
    match err.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => return timed_out(timeout),
        Some(Trap::StackOverflow) => {
            return Outcome::fail(
                Failure::PluginError,
                retcode::ERROR,
                "Plugin error: call stack exhausted (stack overflow)".into(),
            );
        }
        _ => {}
    }
    let message = match panic_message(stderr) {
        Some(panic) => format!("Plugin error: {panic}"),
        None => format!("Plugin error: {err}"),
    };
    Outcome::fail(Failure::PluginError, retcode::ERROR, message)
}

/// A Rust guest prints `thread '..' panicked at FILE:LINE:COL:` and the
/// message to stderr before it traps; that message is what the operator
/// needs, as a Python traceback's last line is in Salt.
fn panic_message(stderr: &str) -> Option<String> {
    let mut lines = stderr.lines().skip_while(|l| !l.contains(" panicked at "));
    let head = lines.next()?;
    let location = head
        .split(" panicked at ")
        .nth(1)
        .unwrap_or_default()
        .trim_end_matches(':');
    let message: Vec<&str> = lines
        .take_while(|l| !l.starts_with("note: run with `RUST_BACKTRACE"))
        .collect();
    Some(format!(
        "{} (panicked at {location})",
        message.join("\n").trim()
    ))
}

fn timed_out(limit: Duration) -> Outcome {
    Outcome::fail(
        Failure::TimedOut,
        retcode::TIMED_OUT,
        format!("Timed out after {} seconds", limit.as_secs_f64()),
    )
}

/// Module names of the `*.wasm` files in `dir`, sorted (none when it
/// cannot be read).
pub fn modules_in(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "wasm"))
        .filter_map(|p| p.file_stem()?.to_str().map(str::to_string))
        .collect();
    out.sort();
    out
}

/// The pooling allocator: every instance's memories, tables, stack and
/// metadata come from slots reserved once, so a call costs no `mmap` and a
/// memory starts as a copy-on-write view of the plugin's initial image.
///
/// A component has a handful of core instances (a Rust plugin three; an
/// interpreter built by componentize-py or ComponentizeJS a dozen, some
/// with their own memory), so the per-component totals are generous: the
/// slots are address space, committed only when used and released when an
/// instance ends.
fn pool(settings: &RuntimeSettings, reset_in_place: bool) -> InstanceAllocationStrategy {
    const CORE_PER_COMPONENT: u32 = 16;
    const MEMORIES_PER_COMPONENT: u32 = 4;
    const TABLES_PER_COMPONENT: u32 = 16;
    let n = settings.pool_slots();
    let config = &settings.config;
    let largest = |f: fn(&Limits) -> usize| {
        config
            .plugins
            .keys()
            .map(|name| f(&config.limits_for(name)))
            .chain([f(&config.limits)])
            .max()
            .unwrap_or_default()
    };
    let memory_mb = largest(|l| usize::try_from(l.memory_mb).unwrap_or(usize::MAX));
    let mut pool = PoolingAllocationConfig::new();
    pool.total_component_instances(n)
        .total_core_instances(n.saturating_mul(CORE_PER_COMPONENT))
        .total_memories(n.saturating_mul(MEMORIES_PER_COMPONENT))
        .total_tables(n.saturating_mul(TABLES_PER_COMPONENT))
        .total_stacks(n)
        .max_memories_per_module(2)
        .max_tables_per_module(4)
        .table_elements(largest(|l| l.max_table_elements))
        // The store's limiter enforces each plugin's own cap; the slot only
        // has to hold the largest one.
        .max_memory_size(memory_mb.saturating_mul(1 << 20).min(4 << 30))
        .max_core_instance_size(4 << 20)
        .max_component_instance_size(4 << 20)
        // Idle slots keep little memory, so RSS goes back down after a
        // burst: the first pages of a stack are zeroed in place and the
        // rest released, and memories likewise (below). The part zeroed in
        // place is zeroed after every call, used or not: 16 KiB covers
        // what `test.ping` and `cmd.run` use (no more page faults per call
        // than with 64 KiB), and a deeper call pays a fault per page beyond.
        .async_stack_keep_resident(16 << 10)
        .max_unused_warm_slots(n.min(64));
    if reset_in_place {
        // Where the kernel can say which pages an instance wrote
        // (PAGEMAP_SCAN, Linux 6.7+), a slot is put back to its initial
        // image by rewriting just those pages, up to this much, instead of
        // unmapping them all and taking a page fault on each again in the
        // next call: that was half of what a call cost. A slot then keeps
        // what it wrote resident, which bounds how much an idle agent holds
        // at (warm slots × this).
        pool.pagemap_scan(Enabled::Yes)
            .linear_memory_keep_resident(512 << 10)
            .table_keep_resident(64 << 10);
    }
    InstanceAllocationStrategy::Pooling(pool)
}

/// Give the memory malloc holds but no one uses back to the kernel.
/// Loading reads each `.wasm` and compiled artifact whole and copies the
/// code out of it; glibc keeps the freed buffers (and, after the first
/// large one, serves the next ones from its heaps instead of fresh
/// mappings), so an idle agent would hold ~0.5 MB of them for good.
fn release_free_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory of glibc's own heaps;
    // it takes their locks and is safe to call from any thread at any time.
    unsafe {
        nix::libc::malloc_trim(0);
    }
}

/// Check the clock every epoch tick: past `deadline` the guest traps,
/// before it the guest yields so other tasks keep running.
fn stop_at(store: &mut Store<HostState>, deadline: Instant) {
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(move |_| {
        if Instant::now() >= deadline {
            Ok(UpdateDeadline::Interrupt)
        } else {
            Ok(UpdateDeadline::Yield(1))
        }
    });
}

impl Runtime {
    /// A runtime with no plugins loaded yet.
    pub fn new(settings: RuntimeSettings) -> anyhow::Result<Self> {
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
        Ok(Self {
            engine,
            ticker,
            linker,
            cache: ArtifactCache::new(settings.cache_dir.clone(), base),
            plugins: RwLock::new(BTreeMap::new()),
            failed: RwLock::new(BTreeMap::new()),
            slots: Arc::new(tokio::sync::Semaphore::new(settings.pool_slots() as usize)),
            spare: std::sync::Mutex::new(None),
            settings,
        })
    }

    /// Whether this runtime has set up its compiler, which it does only
    /// when a plugin is not in the compiled-plugin cache.
    pub fn compiler_set_up(&self) -> bool {
        self.cache.compiler_set_up()
    }

    /// Load every `*.wasm` in `dir`. A plugin that fails to load is
    /// reported and skipped; the others still load.
    pub async fn load_dir(&self, dir: &Path) -> Result<Vec<LoadError>, LoadError> {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|error| LoadError::Io {
                path: dir.to_path_buf(),
                error,
            })?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "wasm"))
            .collect();
        entries.sort();
        let mut errors = Vec::new();
        for path in entries {
            match self.load_file(&path).await {
                Ok(p) => tracing::debug!(
                    module = %p.manifest.module,
                    sha256 = %p.sha256,
                    cache = ?p.cache,
                    "loaded plugin"
                ),
                Err(e) => {
                    tracing::error!(cause = %e, "plugin not loaded");
                    errors.push(e);
                }
            }
        }
        release_free_heap();
        Ok(errors)
    }

    /// Bring the loaded plugins in line with `dir`: load new and changed
    /// files, forget plugins whose file is gone. Calls already running keep
    /// the version they started with.
    pub async fn reload_dir(&self, dir: &Path) -> Result<Vec<LoadError>, LoadError> {
        let errors = self.load_dir(dir).await?;
        self.forget_missing(dir);
        Ok(errors)
    }

    /// Forget the plugins loaded from `dir` whose file is gone (a removed
    /// synced plugin). Calls already running keep theirs.
    pub fn forget_missing(&self, dir: &Path) {
        self.plugins
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|_, p| !p.path.starts_with(dir) || p.path.exists());
        self.failed
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|_, (path, _)| !path.starts_with(dir) || path.exists());
        self.drop_spare();
    }

    /// Load (or replace) one plugin from `path`, named after its file stem.
    pub async fn load_file(&self, path: &Path) -> Result<Arc<LoadedPlugin>, LoadError> {
        let stem = path.file_stem().and_then(|s| s.to_str()).map(str::to_owned);
        let inspected = self.inspect_file(path).await;
        if let Some(stem) = stem {
            let mut failed = self.failed.write().unwrap_or_else(|e| e.into_inner());
            match &inspected {
                Ok(_) => failed.remove(&stem),
                Err(e) => failed.insert(stem, (path.to_path_buf(), e.to_string())),
            };
        }
        let plugin = Arc::new(inspected?);
        self.plugins
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(plugin.manifest.module.clone(), plugin.clone());
        // A spare of the plugin replaced would only hold its slot.
        self.drop_spare();
        Ok(plugin)
    }

    /// Compile, describe and validate the plugin at `path` without making it
    /// callable (for `maid plugin inspect`).
    pub async fn inspect_file(&self, path: &Path) -> Result<LoadedPlugin, LoadError> {
        let invalid = |message: String| LoadError::Invalid {
            path: path.to_path_buf(),
            message,
        };
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .ok_or_else(|| invalid("file name is not valid UTF-8".into()))?
            .to_string();
        let wasm = std::fs::read(path).map_err(|error| LoadError::Io {
            path: path.to_path_buf(),
            error,
        })?;
        let sha256 = cache::sha256_hex(&wasm);
        let engine = self.engine.clone();
        let cache = self.cache.clone();
        let sha = sha256.clone();
        let (component, cache_status) =
            tokio::task::spawn_blocking(move || cache.load(&engine, &wasm, &sha))
                .await
                .map_err(|e| invalid(format!("compile task failed: {e}")))?
                .map_err(|e| invalid(format!("not a valid component: {e:#}")))?;
        let instance_pre = self
            .linker
            .instantiate_pre(&component)
            .map_err(|e| invalid(format!("cannot link: {e:#}")))?;
        let pre = PluginPre::new(instance_pre)
            .map_err(|e| invalid(format!("does not implement maid:plugin/plugin: {e:#}")))?;

        let config = &self.settings.config;
        let limits = config.limits_for(&stem);
        let store = self.store(
            WasiCtxBuilder::new().build(),
            self.job_state(
                &stem,
                "describe",
                Arc::new(Grants::none()),
                &limits,
                Instant::now() + DESCRIBE_TIMEOUT,
            ),
        );
        let described = tokio::time::timeout(DESCRIBE_TIMEOUT, async {
            let _slot = self.pool_slot().await?;
            // Moved in after the permit, so dropped before it: the permit
            // goes back only with the pool's slot.
            let mut store = store;
            let instance = pre.instantiate_async(&mut store).await?;
            instance.call_describe(&mut store).await
        })
        .await
        .map_err(|_| invalid("describe timed out".into()))?
        .map_err(|e| invalid(format!("describe failed: {e:#}")))?;
        let manifest = Manifest::from(described);
        manifest.validate(&stem).map_err(invalid)?;
        let grants = Grants::effective(&manifest.capabilities, &config.grants(&stem))
            .map_err(|e| invalid(format!("config for plugins.{stem}: {e}")))?
            .with_writable_dirs(&config.writable_dirs());
        Ok(LoadedPlugin {
            path: path.to_path_buf(),
            sha256,
            manifest,
            grants: Arc::new(grants),
            slots: Arc::new(tokio::sync::Semaphore::new(limits.max_concurrent)),
            limits,
            cache: cache_status,
            pre,
        })
    }

    fn store(&self, wasi: wasmtime_wasi::WasiCtx, job: JobState) -> Store<HostState> {
        let limits = &job.limits;
        let limiter = Limiter {
            memory_bytes: usize::try_from(limits.memory_mb << 20).unwrap_or(usize::MAX),
            max_instances: limits.max_instances,
            max_tables: limits.max_tables,
            max_table_elements: limits.max_table_elements,
            memory_exceeded: false,
        };
        let deadline = job.deadline;
        let mut store = Store::new(
            &self.engine,
            HostState {
                ticking: Some(self.ticker.ticking()),
                wasi,
                table: ResourceTable::new(),
                limiter,
                job,
            },
        );
        store.limiter(|s| &mut s.limiter);
        stop_at(&mut store, deadline);
        store
    }

    /// Give a spare's store to a call: its WASI context, its job (grants,
    /// deadline) and the ticking of the epoch.
    fn arm(&self, store: &mut Store<HostState>, wasi: wasmtime_wasi::WasiCtx, job: JobState) {
        let deadline = job.deadline;
        let state = store.data_mut();
        state.wasi = wasi;
        state.job = job;
        state.ticking = Some(self.ticker.ticking());
        stop_at(store, deadline);
    }

    /// The state of a store for `module`'s call `jid`.
    fn job_state(
        &self,
        module: &str,
        jid: &str,
        grants: Arc<Grants>,
        limits: &Limits,
        deadline: Instant,
    ) -> JobState {
        JobState {
            plugin: Arc::from(module),
            jid: Arc::from(jid),
            grants,
            services: self.settings.services.clone(),
            limits: limits.clone(),
            deadline,
            retcode: None,
            log_budget: limits.max_log_bytes,
            log_dropped: 0,
            used: Vec::new(),
            source_hashes: Arc::default(),
        }
    }

    /// A pool slot. When none is free the spare instance gives its up: a
    /// call that runs comes before one that might.
    async fn pool_slot(
        &self,
    ) -> Result<tokio::sync::OwnedSemaphorePermit, tokio::sync::AcquireError> {
        if let Ok(slot) = self.slots.clone().try_acquire_owned() {
            return Ok(slot);
        }
        self.drop_spare();
        self.slots.clone().acquire_owned().await
    }

    fn spare(&self) -> std::sync::MutexGuard<'_, Option<Spare>> {
        self.spare.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn drop_spare(&self) {
        // Taken out first: the store is dropped outside the lock.
        let spare = self.spare().take();
        drop(spare);
    }

    /// The spare instance, when it is one of `plugin`.
    fn take_spare(&self, plugin: &Arc<LoadedPlugin>) -> Option<Spare> {
        let mut spare = self.spare();
        match spare.as_ref() {
            Some(s) if Arc::ptr_eq(&s.plugin, plugin) => spare.take(),
            _ => None,
        }
    }

    /// Which module's instance is waiting, made ahead, if any.
    pub fn spare_module(&self) -> Option<String> {
        self.spare()
            .as_ref()
            .map(|s| s.plugin.manifest.module.clone())
    }

    /// Make an instance of `module`'s plugin ahead of its next call, so that
    /// call does not wait for it. Done only when no instance is live (an
    /// agent between jobs): it holds a pool slot and the pages it touched
    /// until that call, and replaces the spare of another plugin. A plugin
    /// that cannot be instantiated is left to its call to report.
    pub async fn prepare(&self, module: &str) {
        let Some(plugin) = self.plugin(module) else {
            return;
        };
        let made_already = self
            .spare()
            .as_ref()
            .is_some_and(|s| Arc::ptr_eq(&s.plugin, &plugin));
        if made_already || self.live_instances() > 0 {
            return;
        }
        let Ok(slot) = self.slots.clone().try_acquire_owned() else {
            return;
        };
        let limit = Duration::from_secs_f64(plugin.limits.timeout_secs);
        let deadline = Instant::now() + limit;
        let job = self.job_state(
            module,
            "spare",
            Arc::new(Grants::none()),
            &plugin.limits,
            deadline,
        );
        let mut store = self.store(WasiCtxBuilder::new().build(), job);
        let made = tokio::time::timeout(
            limit + EPOCH_TICK * 4,
            plugin.pre.instantiate_async(&mut store),
        )
        .await;
        match made {
            Ok(Ok(instance)) => {
                // Nothing runs in it until its call, which ticks again.
                store.data_mut().ticking = None;
                let old = self.spare().replace(Spare {
                    plugin,
                    store,
                    instance,
                    slot,
                });
                drop(old);
            }
            Ok(Err(e)) => tracing::debug!(plugin = module, cause = %e, "no instance made ahead"),
            Err(_) => tracing::debug!(plugin = module, "no instance made ahead: timed out"),
        }
    }

    /// Whether the epoch ticker sleeps: no call or load has run for a
    /// while, so nothing needs the epoch to advance.
    pub fn ticker_parked(&self) -> bool {
        self.ticker.parked()
    }

    /// The loaded plugins, by module name.
    pub fn plugins(&self) -> Vec<Arc<LoadedPlugin>> {
        self.plugins
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// The loaded plugin providing `module`.
    pub fn plugin(&self, module: &str) -> Option<Arc<LoadedPlugin>> {
        self.plugins
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(module)
            .cloned()
    }

    /// Why `module`'s plugin file failed its last load, when it did: the
    /// error, which names the file. (An older version may still be loaded.)
    fn load_failure(&self, module: &str) -> Option<String> {
        self.failed
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(module)
            .map(|(_, why)| why.clone())
    }

    /// The directories `fun`'s plugin may write into (for the audit log).
    pub fn writable_dirs(&self, fun: &str) -> Vec<String> {
        let module = fun.split('.').next().unwrap_or_default();
        self.plugin(module)
            .map(|p| {
                p.grants
                    .preopens()
                    .filter(|d| d.writable)
                    .map(|d| d.path.display().to_string())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Every `module.function` the loaded plugins provide, sorted.
    pub fn functions(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .plugins()
            .iter()
            .flat_map(|p| {
                p.manifest
                    .functions
                    .iter()
                    .map(|f| format!("{}.{}", p.manifest.module, f.name))
                    .collect::<Vec<_>>()
            })
            .collect();
        out.sort();
        out
    }

    /// Run one call. Never fails: every way a call can go wrong is an
    /// [`Outcome`] with Salt's return for it.
    pub async fn call(&self, req: CallRequest) -> Outcome {
        let started = Instant::now();
        let (mut outcome, teardown) = self.call_inner(req).await;
        drop(teardown);
        outcome.duration = started.elapsed();
        outcome
    }

    /// [`Runtime::call`], with the instance's teardown left to the caller
    /// when no other instance is live: the outcome is known before the
    /// store is dropped, so a caller can send it on first and drop the
    /// [`Teardown`] while it travels. The duration is the call's without
    /// the teardown.
    ///
    /// With other instances live the teardown is done here, before
    /// returning: calls queued behind this one would otherwise each take
    /// another pool slot while this one waits, and slots past the warm ones
    /// the pool keeps start cold.
    pub async fn call_deferred(&self, req: CallRequest) -> (Outcome, Teardown) {
        let started = Instant::now();
        let (mut outcome, mut teardown) = self.call_inner(req).await;
        outcome.duration = started.elapsed();
        if self.live_instances() > 1 {
            teardown = Teardown::default();
        }
        (outcome, teardown)
    }

    /// Tear down what [`Runtime::call_deferred`] handed back. When it held
    /// the instance (the call ran alone), the next instance of its plugin
    /// is then made ahead ([`Runtime::prepare`]).
    pub async fn retire(&self, teardown: Teardown) {
        let module = teardown.store.as_ref().map(|s| s.data().job.plugin.clone());
        drop(teardown);
        if let Some(module) = module {
            self.prepare(&module).await;
        }
    }

    /// Pool slots in use now by calls and `describe`s (not the spare).
    fn live_instances(&self) -> usize {
        let total = self.settings.pool_slots() as usize;
        let spare = usize::from(self.spare().is_some());
        total.saturating_sub(self.slots.available_permits() + spare)
    }

    async fn call_inner(&self, req: CallRequest) -> (Outcome, Teardown) {
        let not_available = |why: Option<String>| {
            let mut message = format!("'{}' is not available.", req.fun);
            if let Some(why) = why {
                message.push_str(" The module did not load: ");
                message.push_str(&why);
            }
            let outcome = Outcome::fail(Failure::NotAvailable, retcode::NOT_AVAILABLE, message);
            (outcome, Teardown::default())
        };
        let Some((module, function)) = req.fun.split_once('.') else {
            return not_available(None);
        };
        let Some(plugin) = self.plugin(module) else {
            return not_available(self.load_failure(module));
        };
        if plugin.manifest.function(function).is_none() {
            return not_available(None);
        }

        let mut limit = Duration::from_secs_f64(plugin.limits.timeout_secs);
        if let Some(t) = req.timeout {
            limit = limit.min(t);
        }
        let stderr = Capture::new(CAPTURE_BYTES);
        let mut wasi = WasiCtxBuilder::new();
        wasi.stdout(stderr.clone()).stderr(stderr.clone());
        for dir in plugin.grants.preopens() {
            let perms = if dir.writable {
                FsPerms::ReadWrite
            } else {
                FsPerms::ReadOnly
            };
            let guest = dir.path.to_string_lossy().into_owned();
            if let Err(e) = wasi.preopened_dir(&dir.path, &guest, perms) {
                // A granted directory that does not exist is the operator's
                // mistake; the plugin runs without it and says what failed.
                tracing::warn!(plugin = module, dir = %dir.path.display(), cause = %e, "cannot preopen");
            }
        }
        let deadline = Instant::now() + limit;
        // Waiting for a free instance counts against the call's own limit.
        let slots = async {
            let of_plugin = plugin.slots.clone().acquire_owned().await?;
            let (of_pool, spare) = match self.take_spare(&plugin) {
                Some(s) => (s.slot, Some((s.store, s.instance))),
                None => (self.pool_slot().await?, None),
            };
            Ok::<_, tokio::sync::AcquireError>(([of_plugin, of_pool], spare))
        };
        let Ok(Ok((slots, spare))) = tokio::time::timeout(limit, slots).await else {
            return (timed_out(limit), Teardown::default());
        };
        let mut job = self.job_state(
            module,
            &req.jid,
            plugin.grants.clone(),
            &plugin.limits,
            deadline,
        );
        job.source_hashes = Arc::new(req.source_hashes.clone());
        let (mut store, made) = match spare {
            Some((mut store, instance)) => {
                self.arm(&mut store, wasi.build(), job);
                (store, Some(instance))
            }
            None => (self.store(wasi.build(), job), None),
        };

        let args = Value::Array(req.args.clone()).to_string();
        let kwargs = Value::Object(req.kwargs.clone()).to_string();
        let ctx = bindings::maid::plugin::types::Context {
            jid: req.jid.clone(),
            minion_id: req.minion_id.clone(),
            user: req.user.clone(),
        };
        let run = async {
            let instance = match made {
                Some(instance) => instance,
                None => plugin.pre.instantiate_async(&mut store).await?,
            };
            instance
                .call_call(&mut store, function, &args, &kwargs, &ctx)
                .await
        };
        // The epoch callback stops a guest that computes past the deadline;
        // this stops one that waits past it in a host call (sleep, exec).
        let left = deadline.saturating_duration_since(Instant::now());
        let result = tokio::time::timeout(left + EPOCH_TICK * 4, run).await;
        let mut outcome = match result {
            Err(_) => timed_out(limit),
            Ok(Err(err)) => classify_trap(&err, store.data(), &stderr.text(), limit),
            Ok(Ok(Err(e))) => {
                use bindings::maid::plugin::types::ErrorKind;
                match e.kind {
                    ErrorKind::BadArguments => Outcome::fail(
                        Failure::BadArguments,
                        retcode::ERROR,
                        format!("Passed invalid arguments: {}", e.message),
                    ),
                    ErrorKind::Denied => Outcome::fail(
                        Failure::Denied,
                        retcode::DENIED,
                        format!("Denied: {}", e.message),
                    ),
                    ErrorKind::Failed => Outcome::fail(
                        Failure::Function,
                        if e.retcode == 0 {
                            retcode::ERROR
                        } else {
                            e.retcode
                        },
                        e.message,
                    ),
                }
            }
            Ok(Ok(Ok(json))) => self.decode_return(&plugin, json, store.data().job.retcode),
        };
        let job = &mut store.data_mut().job;
        if job.log_dropped > 0 {
            tracing::warn!(plugin = module, jid = %req.jid, dropped = job.log_dropped, "log lines over the limit were dropped");
        }
        outcome.used = std::mem::take(&mut job.used);
        outcome.plugin_sha256 = Some(plugin.sha256.clone());
        (
            outcome,
            Teardown {
                store: Some(store),
                _slots: Some(slots),
            },
        )
    }

    fn decode_return(&self, plugin: &LoadedPlugin, json: String, retcode: Option<i32>) -> Outcome {
        let max = plugin.limits.max_return_bytes;
        if json.len() > max {
            return Outcome::fail(
                Failure::PluginError,
                retcode::ERROR,
                format!(
                    "Plugin error: return of {} bytes exceeds the limit of {max} bytes",
                    json.len()
                ),
            );
        }
        match serde_json::from_str::<Value>(&json) {
            Ok(ret) => {
                let retcode = retcode.unwrap_or(0);
                Outcome {
                    ret,
                    retcode,
                    failure: (retcode != 0).then_some(Failure::Function),
                    duration: Duration::ZERO,
                    used: Vec::new(),
                    plugin_sha256: None,
                }
            }
            Err(e) => Outcome::fail(
                Failure::PluginError,
                retcode::ERROR,
                format!("Plugin error: return is not JSON: {e}"),
            ),
        }
    }
}
