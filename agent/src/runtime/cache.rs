//! The on-disk cache of compiled plugins.
//!
//! Compiling a component with Cranelift takes far longer than loading its
//! machine code, so each plugin is compiled once and the artifact kept,
//! keyed by the SHA-256 of the `.wasm`, the wasmtime version and wasmtime's
//! own compatibility hash of the engine configuration. Loading compiled code
//! means running it, so an entry is trusted only when its own SHA-256 (kept
//! beside it) matches: a corrupt, truncated or stale entry is rebuilt,
//! never loaded.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use serde::Serialize;
use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// The wasmtime this agent is built with; part of every cache key.
pub const WASMTIME_VERSION: &str = "48.0.8";

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
}

/// A directory of compiled plugins.
#[derive(Debug, Clone)]
pub struct ArtifactCache {
    dir: Option<PathBuf>,
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// A `Hasher` over SHA-256, so wasmtime's compatibility hash is stable
/// across processes (std's `DefaultHasher` makes no such promise).
struct ShaHasher(Sha256);

impl Hasher for ShaHasher {
    fn finish(&self) -> u64 {
        let digest = self.0.clone().finalize();
        u64::from_le_bytes(digest[..8].try_into().unwrap_or_default())
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

impl ArtifactCache {
    /// A cache in `dir` (created when missing), or none.
    pub fn new(dir: Option<PathBuf>) -> Self {
        Self { dir }
    }

    /// The file name of the entry for a wasm with this hash.
    fn key(engine: &Engine, wasm_sha256: &str) -> String {
        let mut h = ShaHasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut h);
        format!(
            "{wasm_sha256}-wasmtime{WASMTIME_VERSION}-{:016x}.cwasm",
            h.finish()
        )
    }

    /// Load the compiled form of `wasm`, compiling (and storing) it when the
    /// cache has no valid entry.
    pub fn load(
        &self,
        engine: &Engine,
        wasm: &[u8],
        wasm_sha256: &str,
    ) -> wasmtime::Result<(Component, CacheStatus)> {
        let Some(dir) = &self.dir else {
            return Ok((Component::new(engine, wasm)?, CacheStatus::Disabled));
        };
        let entry = dir.join(Self::key(engine, wasm_sha256));
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
        let compiled = engine.precompile_component(wasm)?;
        if let Err(e) = Self::write(dir, &entry, &compiled) {
            tracing::warn!(entry = %entry.display(), cause = %e, "cannot write cache entry");
        }
        // SAFETY: `compiled` was produced just now by this engine's own
        // `precompile_component`.
        let component = unsafe { Component::deserialize(engine, &compiled)? };
        Ok((component, status))
    }

    fn sum_path(entry: &Path) -> PathBuf {
        entry.with_extension("cwasm.sha256")
    }

    fn read_verified(engine: &Engine, entry: &Path) -> Result<Component, String> {
        let bytes = std::fs::read(entry).map_err(|e| e.to_string())?;
        let expected = std::fs::read_to_string(Self::sum_path(entry)).map_err(|e| e.to_string())?;
        if sha256_hex(&bytes) != expected.trim() {
            return Err("checksum mismatch".into());
        }
        // SAFETY: the bytes are exactly what `write` stored (checked above
        // against the checksum written with them), and `write` only stores
        // output of `Engine::precompile_component`; wasmtime additionally
        // checks that the artifact matches this engine's version and
        // configuration.
        unsafe { Component::deserialize(engine, &bytes) }.map_err(|e| e.to_string())
    }

    fn write(dir: &Path, entry: &Path, compiled: &[u8]) -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        let tmp = tempfile_in(dir, compiled)?;
        std::fs::write(Self::sum_path(entry), sha256_hex(compiled))?;
        std::fs::rename(tmp, entry)
    }
}

/// Write `bytes` to a fresh temporary file in `dir`, for an atomic rename.
fn tempfile_in(dir: &Path, bytes: &[u8]) -> std::io::Result<PathBuf> {
    use std::io::Write;
    let path = dir.join(format!(
        ".tmp-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default()
    ));
    let mut f = std::fs::File::create(&path)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    Ok(path)
}
