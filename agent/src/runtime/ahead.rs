//! Compiling a plugin directory ahead (`maid plugin compile`): every
//! `*.wasm` compiled for any CPU of this architecture and described, into
//! the directory an agent reads when a plugin is not in its cache (see
//! `cache`). A package ships it beside the `.wasm` files, so the first
//! start of a fresh install, or the first after an upgrade, compiles
//! nothing.

use std::collections::BTreeSet;

use super::*;

/// What compiling a directory ahead did.
#[derive(Debug, Default)]
pub struct CompiledAhead {
    /// Each plugin compiled (or found already compiled, [`CacheStatus::Hit`]):
    /// its module, its `.wasm`'s SHA-256 and what the cache did.
    pub plugins: Vec<(String, String, CacheStatus)>,
    /// The plugins that did not load (the others are still compiled).
    pub failed: Vec<LoadError>,
    /// Files of plugins no longer in the directory, removed.
    pub removed: Vec<PathBuf>,
}

impl Runtime {
    /// Compile every `*.wasm` in `plugin_dir` into `out` (created when
    /// missing): its compiled form, checksum and manifest, as the cache
    /// keeps them. Entries of plugins not in `plugin_dir` are removed from
    /// `out`, so what is shipped is exactly what the directory holds.
    pub async fn compile_ahead(plugin_dir: &Path, out: &Path) -> Result<CompiledAhead, LoadError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |error| LoadError::Io { path, error }
        };
        std::fs::create_dir_all(out).map_err(io(out))?;
        let config = Config {
            plugin_dir: Some(plugin_dir.to_path_buf()),
            cache_dir: Some(out.to_path_buf()),
            ..Config::default()
        };
        let mut settings = Self::settings_for(
            &config,
            &Map::new(),
            None,
            RuntimeSettings::instances_for(1),
            true,
        );
        settings.shipped_dir = None;
        settings.compile_for = CompileFor::AnyCpu;
        let runtime = Runtime::new(settings).map_err(|e| LoadError::Invalid {
            path: out.to_path_buf(),
            message: e.to_string(),
        })?;
        let mut done = CompiledAhead::default();
        let mut keep = BTreeSet::new();
        for path in super::registry::wasm_files(plugin_dir).map_err(io(plugin_dir))? {
            match runtime.inspect_file(&path).await {
                Ok(plugin) => {
                    keep.insert(plugin.sha256.clone());
                    done.plugins.push((
                        plugin.manifest.module.clone(),
                        plugin.sha256.clone(),
                        plugin.cache,
                    ));
                }
                Err(e) => done.failed.push(e),
            }
        }
        done.removed = runtime.cache.retain(&keep).map_err(io(out))?;
        Ok(done)
    }
}
