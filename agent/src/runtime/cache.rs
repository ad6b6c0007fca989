//! The on-disk cache of compiled plugins, and the compiler behind it.
//!
//! Compiling a component with Cranelift takes far longer than loading its
//! machine code, so each plugin is compiled once and the artifact kept,
//! keyed by the SHA-256 of the `.wasm`, the wasmtime version and the
//! version of the engine settings ([`ENGINE_SETTINGS`]). Loading compiled
//! code means running it, so an entry is trusted only when its own SHA-256
//! (kept beside it) matches: a corrupt, truncated or stale entry is
//! rebuilt, never loaded. Once checked, an entry's [`FileId`] is kept with
//! its checksum, and while the file keeps that id it is not hashed again
//! (nor is a plugin file whose hash was kept with its id): see `fileid`. wasmtime itself then checks that the artifact
//! fits the engine it is loaded into (version, settings, the CPU features
//! it was compiled for); an entry that does not is rebuilt too.
//!
//! An install can ship its plugins compiled (`maid plugin compile`, run
//! by the package build): a directory of entries in the cache's own
//! format beside the `.wasm` files ([`SHIPPED_DIR`]), compiled for any CPU
//! of the architecture. A plugin that is not in the cache is looked up
//! there before it is compiled, so the first start of a fresh install (or
//! after an upgrade) compiles nothing. The shipped directory is read only:
//! an entry taken from it is checked as a cache entry is (its SHA-256, then
//! wasmtime's checks) and copied into the cache. It is compiled code the
//! agent will run, so it is trusted only as the plugin directory and the
//! binary are: the directory, the plugin directory above it and each file
//! must belong to root (or the agent's own user) and be writable by their
//! owner alone, else it is not read at all.
//!
//! The engine that runs plugins has no compiler. Compiling is done by a
//! second engine with the same settings, built the first time a plugin is
//! not in the cache: an agent started on a warm cache never sets Cranelift
//! up, and keeps none of its code or tables in memory.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use sha2::{Digest, Sha256};
use wasmtime::component::Component;
use wasmtime::{Config as EngineConfig, Engine};

use super::fileid::FileId;

/// The wasmtime this agent is built with; part of every cache key.
pub const WASMTIME_VERSION: &str = "48.0.8";

/// The version of the engine settings compiled code depends on (see
/// `Runtime::new`); part of every cache key. Change it with those
/// settings, so old entries are not even tried. (If it is not changed, an
/// entry compiled under other settings is still refused by wasmtime when
/// it is loaded, and rebuilt.)
pub const ENGINE_SETTINGS: &str = "e1";

/// The directory, inside the plugin directory, of the plugins compiled
/// ahead and shipped with them (see the module's header).
pub const SHIPPED_DIR: &str = "precompiled";

/// What the cache did for one load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheStatus {
    /// Loaded from a valid entry.
    Hit,
    /// No entry: compiled and stored.
    Miss,
    /// An entry existed but failed verification: compiled again and replaced.
    Rebuilt,
    /// No cache directory configured: compiled in memory only.
    Disabled,
    /// Loaded from the manifest kept beside the artifact: the compiled code
    /// is loaded (or compiled) at the plugin's first call.
    Deferred,
    /// Not in the cache: loaded from the plugins compiled ahead and shipped
    /// beside the `.wasm` files, and copied into the cache.
    Shipped,
}

/// For which CPUs a compiler makes code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CompileFor {
    /// This host's CPU, every feature it has (the cache).
    #[default]
    Host,
    /// Any CPU of this architecture: Cranelift's baseline features, which
    /// wasmtime accepts on every host (what `maid plugin compile` ships).
    AnyCpu,
}

/// A directory of compiled plugins, and the compiler that fills it.
#[derive(Debug, Clone)]
pub struct ArtifactCache {
    dir: Option<PathBuf>,
    /// The plugins compiled ahead (see the module's header), when their
    /// directory exists and is trusted.
    shipped: Option<PathBuf>,
    compiler: Arc<Compiler>,
}

/// An engine that compiles, with the runtime engine's settings and none of
/// its instance pool; set up on first use.
#[derive(Debug)]
struct Compiler {
    config: EngineConfig,
    engine: Mutex<Option<Engine>>,
    /// Whether it was ever set up (it is dropped after loading).
    set_up: std::sync::atomic::AtomicBool,
}

impl Compiler {
    /// `wasm` compiled and loaded into `engine` (which has these settings),
    /// with the artifact it was loaded from.
    fn compile(&self, engine: &Engine, wasm: &[u8]) -> wasmtime::Result<(Component, Vec<u8>)> {
        let compiled = self.compile_artifact(wasm)?;
        // SAFETY: `compiled` was produced just now by `precompile_component`
        // of an engine with `engine`'s settings.
        let component = unsafe { Component::deserialize(engine, &compiled)? };
        Ok((component, compiled))
    }

    /// `wasm` compiled for an engine with these settings.
    fn compile_artifact(&self, wasm: &[u8]) -> wasmtime::Result<Vec<u8>> {
        let engine = {
            let mut slot = self.engine.lock().unwrap_or_else(|e| e.into_inner());
            match &*slot {
                Some(engine) => engine.clone(),
                None => {
                    tracing::debug!("setting up the compiler");
                    let engine = Engine::new(&self.config)?;
                    self.set_up
                        .store(true, std::sync::atomic::Ordering::Relaxed);
                    *slot = Some(engine.clone());
                    engine
                }
            }
        };
        engine.precompile_component(wasm)
    }
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// SHA-256 (hex) of `value` as JSON: what an audit record keeps of a
/// job's arguments or a program's argv instead of the values.
pub(crate) fn json_sha256(value: &impl serde::Serialize) -> String {
    sha256_hex(&serde_json::to_vec(value).unwrap_or_default())
}

fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Why a cache entry is not used (it is rebuilt).
#[derive(Debug, thiserror::Error)]
enum Unusable {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("checksum mismatch")]
    Checksum,
    #[error("{0}")]
    Artifact(wasmtime::Error),
    #[error("{0}")]
    Untrusted(String),
}

/// Why the file or directory at `path` (whose metadata is `m`) is not
/// trusted to hold compiled code: not root's nor the agent user's, or
/// writable by its group or others.
fn untrusted(path: &Path, m: &std::fs::Metadata) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let euid = nix::unistd::geteuid().as_raw();
    if m.uid() != 0 && m.uid() != euid {
        return Some(format!(
            "{} belongs to uid {}, neither root nor this agent's user",
            path.display(),
            m.uid()
        ));
    }
    if m.mode() & 0o022 != 0 {
        return Some(format!(
            "{} is writable by its group or others (mode {:o})",
            path.display(),
            m.mode() & 0o7777
        ));
    }
    None
}

/// `dir` when it is a directory that may hold compiled code, and so is the
/// directory it is in; `None` (and a warning, unless it does not exist)
/// otherwise.
fn trusted_dir(dir: &Path) -> Option<PathBuf> {
    let m = match std::fs::metadata(dir) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            tracing::warn!(dir = %dir.display(), cause = %e, "precompiled plugins not read");
            return None;
        }
    };
    let parent = dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let why = if !m.is_dir() {
        Some(format!("{} is not a directory", dir.display()))
    } else {
        untrusted(dir, &m).or_else(|| match std::fs::metadata(parent) {
            Ok(pm) => untrusted(parent, &pm),
            Err(e) => Some(format!("{}: {e}", parent.display())),
        })
    };
    match why {
        None => Some(dir.to_path_buf()),
        Some(why) => {
            tracing::warn!(
                dir = %dir.display(),
                "precompiled plugins not read (every plugin is compiled here): {why}"
            );
            None
        }
    }
}

/// The bytes of the shipped file at `path`, when it is a regular file that
/// may hold compiled code (checked on the file opened, so what is checked is
/// what is read).
fn read_shipped(path: &Path) -> Result<Vec<u8>, Unusable> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)?;
    let m = file.metadata()?;
    if !m.is_file() {
        return Err(Unusable::Untrusted(format!(
            "{} is not a regular file",
            path.display()
        )));
    }
    if let Some(why) = untrusted(path, &m) {
        return Err(Unusable::Untrusted(why));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(m.len()).unwrap_or(0));
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

impl ArtifactCache {
    /// A cache in `dir` (created when missing), or none, backed by the
    /// plugins compiled ahead in `shipped` (when that directory exists and
    /// is trusted); what it compiles is compiled with `settings` (the
    /// runtime engine's, before its instance pool and without its
    /// compiler), for `target`.
    pub fn new(
        dir: Option<PathBuf>,
        shipped: Option<&Path>,
        mut settings: EngineConfig,
        target: CompileFor,
    ) -> wasmtime::Result<Self> {
        if target == CompileFor::AnyCpu {
            // A target named, even this host's, is compiled for with
            // Cranelift's baseline flags instead of the host's features.
            settings.target(&target_lexicon::HOST.to_string())?;
        }
        // No cache (`--no-cache`): everything is compiled in memory, nothing
        // compiled ahead is read either.
        let shipped = shipped.filter(|_| dir.is_some()).and_then(trusted_dir);
        Ok(Self {
            dir,
            shipped,
            compiler: Arc::new(Compiler {
                config: settings,
                engine: Mutex::new(None),
                set_up: Default::default(),
            }),
        })
    }

    /// Whether compiled code is kept on disk (there is a cache directory):
    /// a loaded plugin's code can then be dropped and loaded again.
    pub fn keeps_code(&self) -> bool {
        self.dir.is_some()
    }

    /// Whether the compiler was ever set up: only when a plugin was not
    /// in the cache.
    pub fn compiler_set_up(&self) -> bool {
        self.compiler
            .set_up
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The manifest `describe` gave for a wasm with this hash, kept when it
    /// was compiled: what lets an agent start without loading any compiled
    /// code. `None` when there is none or it does not parse (the plugin is
    /// then loaded and described now).
    pub fn manifest(&self, wasm_sha256: &str) -> Option<super::Manifest> {
        let key = Self::manifest_key(wasm_sha256);
        let cached = self
            .dir
            .as_ref()
            .and_then(|dir| std::fs::read(dir.join(&key)).ok());
        let bytes = match cached {
            Some(bytes) => bytes,
            None => {
                let path = self.shipped.as_ref()?.join(&key);
                match read_shipped(&path) {
                    Ok(bytes) => bytes,
                    Err(Unusable::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                        return None;
                    }
                    Err(why) => {
                        tracing::warn!(file = %path.display(), "shipped manifest not read: {why}");
                        return None;
                    }
                }
            }
        };
        serde_json::from_slice(&bytes).ok()
    }

    /// Keep `manifest` for a wasm with this hash (best effort).
    pub fn store_manifest(&self, wasm_sha256: &str, manifest: &super::Manifest) {
        let Some(dir) = &self.dir else {
            return;
        };
        let write = || -> std::io::Result<()> {
            std::fs::create_dir_all(dir)?;
            let json = serde_json::to_vec(manifest)?;
            let staged = crate::fsutil::staged_in(dir, |w| w.write_all(&json))?;
            staged
                .persist(dir.join(Self::manifest_key(wasm_sha256)))
                .map_err(|e| e.error)?;
            Ok(())
        };
        if let Err(e) = write() {
            tracing::warn!(cause = %e, "cannot keep the plugin's manifest in the cache");
        }
    }

    fn manifest_key(wasm_sha256: &str) -> String {
        format!("{wasm_sha256}-wasmtime{WASMTIME_VERSION}-{ENGINE_SETTINGS}.manifest.json")
    }

    /// The file name of the entry for a wasm with this hash.
    fn key(wasm_sha256: &str) -> String {
        format!("{wasm_sha256}-wasmtime{WASMTIME_VERSION}-{ENGINE_SETTINGS}.cwasm")
    }

    /// Load the compiled form of the wasm with this hash into `engine`,
    /// compiling (and storing) it when the cache has no valid entry: only
    /// then is `wasm` asked for its bytes.
    pub fn load(
        &self,
        engine: &Engine,
        wasm: impl FnOnce() -> wasmtime::Result<Vec<u8>>,
        wasm_sha256: &str,
    ) -> wasmtime::Result<(Component, CacheStatus)> {
        let Some(dir) = &self.dir else {
            let (component, _) = self.compiler.compile(engine, &wasm()?)?;
            return Ok((component, CacheStatus::Disabled));
        };
        let entry = dir.join(Self::key(wasm_sha256));
        let mut status = CacheStatus::Miss;
        if entry.exists() {
            match Self::read_verified(engine, &entry) {
                Ok(component) => return Ok((component, CacheStatus::Hit)),
                Err(why) => {
                    tracing::warn!(entry = %entry.display(), "rebuilding cache entry: {why}");
                    status = CacheStatus::Rebuilt;
                }
            }
        }
        if let Some(shipped) = &self.shipped {
            let from = shipped.join(Self::key(wasm_sha256));
            match Self::read_shipped_artifact(engine, &from) {
                Ok((component, compiled)) => {
                    if let Err(e) = Self::write(dir, &entry, &compiled) {
                        tracing::warn!(entry = %entry.display(), cause = %e, "cannot write cache entry");
                    }
                    return Ok((component, CacheStatus::Shipped));
                }
                Err(Unusable::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(why) => {
                    tracing::warn!(file = %from.display(), "shipped plugin not loaded, compiling it: {why}");
                }
            }
        }
        let (component, compiled) = self.compiler.compile(engine, &wasm()?)?;
        if let Err(e) = Self::write(dir, &entry, &compiled) {
            tracing::warn!(entry = %entry.display(), cause = %e, "cannot write cache entry");
        }
        Ok((component, status))
    }

    /// Drop the compiler, and with it the memory it keeps between
    /// compilations (Cranelift's contexts, one per thread that compiled):
    /// tens of MiB after a start that compiled every plugin. It is set up
    /// again if a plugin must be compiled later.
    pub fn release_compiler(&self) {
        self.compiler
            .engine
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
    }

    /// The shipped artifact at `path`, once it is known to be what `maid
    /// plugin compile` wrote (its SHA-256 is the one shipped beside it) and
    /// wasmtime takes it for this engine; with its bytes.
    fn read_shipped_artifact(
        engine: &Engine,
        path: &Path,
    ) -> Result<(Component, Vec<u8>), Unusable> {
        let bytes = read_shipped(path)?;
        let sum = String::from_utf8_lossy(&read_shipped(&Self::sum_path(path))?).into_owned();
        let expected = sum.lines().next().unwrap_or_default().trim();
        // SAFETY: `maid plugin compile` writes only output of
        // `Engine::precompile_component` there, in a directory, and files,
        // only root or this agent's user can write: as trusted as the
        // binary and the plugin directory (see the module's header).
        let component = unsafe { Self::deserialize_checked(engine, &bytes, expected) }?;
        Ok((component, bytes))
    }

    /// `bytes` as a component of `engine`, once their SHA-256 is
    /// `expected` (the first line of the checksum file written with them):
    /// what was written is what is read. wasmtime additionally checks that
    /// the artifact matches this engine's version, configuration and this
    /// CPU's features.
    ///
    /// # Safety
    ///
    /// The checksum file must have been written, beside them, by a writer
    /// that only stores output of `Engine::precompile_component` (this
    /// cache's `write`, or `maid plugin compile`), where no one less
    /// trusted can write.
    unsafe fn deserialize_checked(
        engine: &Engine,
        bytes: &[u8],
        expected: &str,
    ) -> Result<Component, Unusable> {
        if sha256_hex(bytes) != expected {
            return Err(Unusable::Checksum);
        }
        // SAFETY: the bytes are the compiled code the caller vouches for
        // (the checksum written with them says so).
        unsafe { Component::deserialize(engine, bytes) }.map_err(Unusable::Artifact)
    }

    fn sum_path(entry: &Path) -> PathBuf {
        entry.with_extension("cwasm.sha256")
    }

    /// The entry, once it is known to hold what `write` stored: its
    /// SHA-256 is the one kept beside it, or its [`FileId`] is the one kept
    /// there when that was last checked (the checksum file's second line,
    /// written after a check of an entry that had settled).
    fn read_verified(engine: &Engine, entry: &Path) -> Result<Component, Unusable> {
        let sum_path = Self::sum_path(entry);
        let kept = std::fs::read_to_string(&sum_path)?;
        let mut lines = kept.lines();
        let expected = lines.next().unwrap_or_default().trim();
        let checked_id = lines.next().and_then(FileId::parse);
        if checked_id.is_some() && checked_id == FileId::of(entry).ok() {
            // SAFETY: the file is the one whose bytes were checked against
            // the checksum `write` stored with them (its id says it has not
            // been written since), and `write` only stores output of
            // `Engine::precompile_component`; entries are replaced by
            // renaming a new file over them, never written in place, so
            // the mapped file does not change under wasmtime. wasmtime
            // additionally checks that the artifact matches this engine's
            // version and configuration.
            return unsafe { Component::deserialize_file(engine, entry) }
                .map_err(Unusable::Artifact);
        }
        let settled = FileId::settled(entry);
        let bytes = std::fs::read(entry)?;
        // SAFETY: `write` stored the checksum beside the entry, and it
        // only stores output of `Engine::precompile_component`.
        let component = unsafe { Self::deserialize_checked(engine, &bytes, expected) }?;
        // Checked, and settled since before it was read: its id vouches for
        // it next time (best effort: a cache that cannot be written is only
        // slower).
        if let Some(id) = settled.filter(|id| FileId::of(entry).ok().as_ref() == Some(id))
            && let Some(dir) = entry.parent()
        {
            let text = format!("{expected}\n{}\n", id.as_str());
            let _ = crate::fsutil::staged_in(dir, |w| w.write_all(text.as_bytes()))
                .and_then(|staged| staged.persist(&sum_path).map_err(|e| e.error));
        }
        Ok(component)
    }

    /// The SHA-256 of the plugin file at `path`, when it was hashed before
    /// and the file has not been written since (its [`FileId`] is the one
    /// kept with the hash).
    pub(crate) fn known_sha256(&self, path: &Path, id: &FileId) -> Option<String> {
        let kept =
            std::fs::read_to_string(self.dir.as_ref()?.join(Self::wasm_id_key(path))).ok()?;
        let mut lines = kept.lines();
        let kept_id = FileId::parse(lines.next()?)?;
        let sha256 = lines.next()?.trim();
        (kept_id == *id && is_sha256_hex(sha256)).then(|| sha256.to_string())
    }

    /// Keep the SHA-256 of the plugin file at `path`, read while its id was
    /// `id`, for [`Self::known_sha256`] (best effort).
    pub(crate) fn remember_sha256(&self, path: &Path, id: &FileId, sha256: &str) {
        let Some(dir) = &self.dir else {
            return;
        };
        let text = format!("{}\n{sha256}\n", id.as_str());
        let write = || -> std::io::Result<()> {
            std::fs::create_dir_all(dir)?;
            let staged = crate::fsutil::staged_in(dir, |w| w.write_all(text.as_bytes()))?;
            staged
                .persist(dir.join(Self::wasm_id_key(path)))
                .map_err(|e| e.error)?;
            Ok(())
        };
        if let Err(e) = write() {
            tracing::debug!(cause = %e, "cannot keep the plugin file's hash in the cache");
        }
    }

    /// Where the hash of the plugin file at `path` is kept: named by the
    /// hash of the path, so any path has one name of a fixed shape.
    fn wasm_id_key(path: &Path) -> String {
        use std::os::unix::ffi::OsStrExt;
        format!("{}.wasm-id", sha256_hex(path.as_os_str().as_bytes()))
    }

    /// Remove from the cache directory every entry (compiled code, its
    /// checksum, manifest) of a wasm whose hash is not in `keep`, of
    /// another wasmtime or engine settings, and every kept plugin-file
    /// hash: what `maid plugin compile` leaves is exactly its plugins'
    /// entries. Files of other names are left alone. The removed files.
    pub(crate) fn retain(
        &self,
        keep: &std::collections::BTreeSet<String>,
    ) -> std::io::Result<Vec<PathBuf>> {
        let Some(dir) = &self.dir else {
            return Ok(Vec::new());
        };
        let wanted: std::collections::BTreeSet<String> = keep
            .iter()
            .flat_map(|sha| {
                let key = Self::key(sha);
                [format!("{key}.sha256"), key, Self::manifest_key(sha)]
            })
            .collect();
        let ours = |name: &str| {
            [".cwasm", ".cwasm.sha256", ".manifest.json", ".wasm-id"]
                .iter()
                .any(|suffix| name.ends_with(suffix))
        };
        let mut removed = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else {
                continue;
            };
            if ours(name) && !wanted.contains(name) {
                std::fs::remove_file(entry.path())?;
                removed.push(entry.path());
            }
        }
        removed.sort();
        Ok(removed)
    }

    fn write(dir: &Path, entry: &Path, compiled: &[u8]) -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        // Both files are renamed into place, so a process loading the same
        // plugin at the same time never reads half of either (it would only
        // rebuild, but for nothing).
        let artifact = crate::fsutil::staged_in(dir, |w| w.write_all(compiled))?;
        let sum = crate::fsutil::staged_in(dir, |w| w.write_all(sha256_hex(compiled).as_bytes()))?;
        sum.persist(Self::sum_path(entry)).map_err(|e| e.error)?;
        artifact.persist(entry).map_err(|e| e.error)?;
        Ok(())
    }
}
