//! The plugins a runtime holds: loading a directory or a file (compiled
//! through the artifact cache, described, validated, granted), reloading,
//! and what a loaded set answers (functions, writable directories, why a
//! module did not load).

use super::fileid::FileId;
use super::*;

/// A plugin file's module name (its stem).
fn stem_of(path: &Path) -> Result<String, LoadError> {
    path.file_stem()
        .and_then(|s| s.to_str())
        .map(str::to_string)
        .ok_or_else(|| LoadError::Invalid {
            path: path.to_path_buf(),
            message: "file name is not valid UTF-8".into(),
        })
}

/// A plugin file's bytes and SHA-256.
fn read_wasm(path: &Path) -> Result<(Vec<u8>, String), LoadError> {
    let wasm = std::fs::read(path).map_err(|error| LoadError::Io {
        path: path.to_path_buf(),
        error,
    })?;
    let sha256 = cache::sha256_hex(&wasm);
    Ok((wasm, sha256))
}

/// A plugin file's module name, bytes and SHA-256.
fn read_plugin(path: &Path) -> Result<(String, Vec<u8>, String), LoadError> {
    let stem = stem_of(path)?;
    let (wasm, sha256) = read_wasm(path)?;
    Ok((stem, wasm, sha256))
}

/// The bytes of the plugin file at `path`, which must be the ones loaded
/// (`sha256`).
fn read_checked(path: &Path, sha256: &str) -> wasmtime::Result<Vec<u8>> {
    let wasm = std::fs::read(path).map_err(|e| wasmtime::format_err!("{}: {e}", path.display()))?;
    let got = cache::sha256_hex(&wasm);
    if got != sha256 {
        return Err(wasmtime::format_err!(
            "{} changed since it was loaded (sha256 {got}, loaded {sha256}); it is loaded \
             again at the next reload",
            path.display()
        ));
    }
    Ok(wasm)
}

/// What a plugin file is, as far as loading it needs: its SHA-256, and its
/// bytes when they had to be read for it.
struct Identified {
    stem: String,
    sha256: String,
    wasm: Option<Vec<u8>>,
    /// The file's id when it vouches for the bytes hashed (see
    /// [`super::fileid`]): a first call need not read the file again.
    id: Option<FileId>,
}

/// The `*.wasm` files in `dir`, sorted.
pub(super) fn wasm_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "wasm"))
        .collect();
    entries.sort();
    Ok(entries)
}

/// Module names of the `*.wasm` files in `dir`, sorted (none when it
/// cannot be read).
pub fn modules_in(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = wasm_files(dir)
        .unwrap_or_default()
        .iter()
        .filter_map(|p| p.file_stem()?.to_str().map(str::to_string))
        .collect();
    // By name, not by file name ("a" before "a-b").
    out.sort();
    out
}

impl Runtime {
    /// Load every `*.wasm` in `dir`. A plugin that fails to load is
    /// reported and skipped; the others still load.
    pub async fn load_dir(&self, dir: &Path) -> Result<Vec<LoadError>, LoadError> {
        let entries = wasm_files(dir).map_err(|error| LoadError::Io {
            path: dir.to_path_buf(),
            error,
        })?;
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
        self.cache.release_compiler();
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
    /// A plugin whose manifest the cache kept is loaded from it alone: its
    /// compiled code waits for its first call, so an agent with many
    /// plugins starts without loading any.
    pub async fn load_file(&self, path: &Path) -> Result<Arc<LoadedPlugin>, LoadError> {
        let stem = path.file_stem().and_then(|s| s.to_str()).map(str::to_owned);
        let inspected = match self.identify(path) {
            Err(e) => Err(e),
            Ok(Identified {
                stem,
                sha256,
                wasm,
                id,
            }) => {
                // The same bytes from the same file: keep the plugin, code
                // and all (a reload after another plugin changed costs this
                // one nothing).
                if let Some(loaded) = self.plugin(&stem)
                    && loaded.path == path
                    && loaded.sha256 == sha256
                {
                    return Ok(loaded);
                }
                match self.cache.manifest(&sha256) {
                    // Described before: its code waits for its first call.
                    Some(manifest) => manifest
                        .validate(&stem)
                        .map_err(|why| LoadError::Invalid {
                            path: path.to_path_buf(),
                            message: why.to_string(),
                        })
                        .and_then(|()| self.granted(path, &stem, sha256, manifest, None, id)),
                    None => match wasm {
                        Some(wasm) => self.describe(path, &stem, wasm, sha256, id).await,
                        None => match read_wasm(path) {
                            Ok((wasm, sha256)) => {
                                self.describe(path, &stem, wasm, sha256, None).await
                            }
                            Err(e) => Err(e),
                        },
                    }
                    .map(|plugin| self.code_to_cache(plugin)),
                }
            }
        };
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

    /// `plugin`, just described, without its code when the cache keeps
    /// that: loaded again at its first call, as after a warm start. An
    /// agent that compiled every plugin at start would otherwise keep all
    /// their code and metadata in memory, used or not (three times a warm
    /// start's RSS with 18 plugins). Without a cache it keeps its code,
    /// which would otherwise be compiled again.
    fn code_to_cache(&self, mut plugin: LoadedPlugin) -> LoadedPlugin {
        if self.cache.keeps_code() {
            plugin.pre = tokio::sync::OnceCell::new();
        }
        plugin
    }

    /// The plugin file at `path`: its hash kept in the cache when the file
    /// has not been written since it was hashed, else read and hashed now
    /// (and the hash kept, once the file has settled).
    fn identify(&self, path: &Path) -> Result<Identified, LoadError> {
        let stem = stem_of(path)?;
        let settled = FileId::settled(path);
        if let Some(id) = &settled
            && let Some(sha256) = self.cache.known_sha256(path, id)
        {
            return Ok(Identified {
                stem,
                sha256,
                wasm: None,
                id: settled,
            });
        }
        let (wasm, sha256) = read_wasm(path)?;
        // Kept only when the file was settled before it was read and is
        // unchanged after: then the id vouches for what was hashed.
        let id = settled.filter(|id| FileId::of(path).ok().as_ref() == Some(id));
        if let Some(id) = &id {
            self.cache.remember_sha256(path, id, &sha256);
        }
        Ok(Identified {
            stem,
            sha256,
            wasm: Some(wasm),
            id,
        })
    }

    /// A plugin ready to call: `manifest` validated, its grants worked out
    /// from the configuration, its compiled code `pre` when already made.
    fn granted(
        &self,
        path: &Path,
        stem: &str,
        sha256: String,
        manifest: Manifest,
        pre: Option<(PluginPre<HostState>, CacheStatus)>,
        file_id: Option<FileId>,
    ) -> Result<LoadedPlugin, LoadError> {
        let config = &self.settings.config;
        let limits = config.limits_for(stem);
        let grants = Grants::effective(&manifest.capabilities, &config.grants(stem))
            .map_err(|e| LoadError::Invalid {
                path: path.to_path_buf(),
                message: format!("config for plugins.{stem}: {e}"),
            })?
            .with_writable_dirs(&config.writable_dirs());
        let cache = pre.as_ref().map_or(CacheStatus::Deferred, |(_, s)| *s);
        Ok(LoadedPlugin {
            path: path.to_path_buf(),
            sha256,
            manifest,
            grants: Arc::new(grants),
            slots: Arc::new(tokio::sync::Semaphore::new(limits.max_concurrent)),
            limits,
            cache,
            file_id,
            pre: tokio::sync::OnceCell::new_with(pre),
        })
    }

    /// The compiled, linked code of `plugin`, loaded from the cache (or
    /// compiled) at its first call when it was loaded from its manifest.
    /// The file must still hold the bytes the manifest was kept for.
    pub(super) async fn pre<'a>(
        &self,
        plugin: &'a LoadedPlugin,
    ) -> wasmtime::Result<&'a PluginPre<HostState>> {
        let (pre, _) = plugin
            .pre
            .get_or_try_init(|| async {
                let (path, sha256) = (plugin.path.clone(), plugin.sha256.clone());
                // The file as it was when its hash was taken: its bytes are
                // read only if the cache must compile them. Otherwise they
                // are read (and checked) first.
                let unchanged =
                    plugin.file_id.is_some() && FileId::of(&plugin.path).ok() == plugin.file_id;
                if unchanged {
                    let wanted = sha256.clone();
                    self.link(move || read_checked(&path, &wanted), sha256)
                        .await
                } else {
                    let wasm = read_checked(&path, &sha256)?;
                    self.link(move || Ok(wasm), sha256).await
                }
            })
            .await?;
        Ok(pre)
    }

    /// Compile (through the cache) and link `wasm`.
    async fn link(
        &self,
        wasm: impl FnOnce() -> wasmtime::Result<Vec<u8>> + Send + 'static,
        sha256: String,
    ) -> wasmtime::Result<(PluginPre<HostState>, CacheStatus)> {
        let engine = self.engine.clone();
        let cache = self.cache.clone();
        let (component, status) =
            tokio::task::spawn_blocking(move || cache.load(&engine, wasm, &sha256))
                .await
                .map_err(|e| wasmtime::format_err!("compile task failed: {e}"))?
                .map_err(|e| wasmtime::format_err!("not a valid component: {e:#}"))?;
        let instance_pre = self
            .linker
            .instantiate_pre(&component)
            .map_err(|e| wasmtime::format_err!("cannot link: {e:#}"))?;
        let pre = PluginPre::new(instance_pre)
            .map_err(|e| wasmtime::format_err!("does not implement maid:plugin/plugin: {e:#}"))?;
        Ok((pre, status))
    }

    /// Compile, describe and validate the plugin at `path` without making it
    /// callable (for `maid plugin inspect`).
    pub async fn inspect_file(&self, path: &Path) -> Result<LoadedPlugin, LoadError> {
        let (stem, wasm, sha256) = read_plugin(path)?;
        self.describe(path, &stem, wasm, sha256, None).await
    }

    /// Compile (through the cache), describe and validate the plugin read
    /// from `path`, and keep its manifest for the next load.
    async fn describe(
        &self,
        path: &Path,
        stem: &str,
        wasm: Vec<u8>,
        sha256: String,
        file_id: Option<FileId>,
    ) -> Result<LoadedPlugin, LoadError> {
        let invalid = |message: String| LoadError::Invalid {
            path: path.to_path_buf(),
            message,
        };
        let (pre, cache_status) = self
            .link(move || Ok(wasm), sha256.clone())
            .await
            .map_err(|e| invalid(format!("{e:#}")))?;

        let limits = self.settings.config.limits_for(stem);
        let store = self.store(
            WasiCtxBuilder::new().build(),
            self.job_state(
                stem,
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
        manifest
            .validate(stem)
            .map_err(|why| invalid(why.to_string()))?;
        self.cache.store_manifest(&sha256, &manifest);
        self.granted(
            path,
            stem,
            sha256,
            manifest,
            Some((pre, cache_status)),
            file_id,
        )
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
    pub(super) fn load_failure(&self, module: &str) -> Option<String> {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modules_are_the_wasm_files_stems_sorted() {
        let dir = tempfile::tempdir().unwrap();
        for f in [
            "b.wasm",
            "a.wasm",
            "notes.txt",
            "c.wasm.bak",
            ".hidden.wasm",
        ] {
            std::fs::write(dir.path().join(f), b"").unwrap();
        }
        let found = modules_in(dir.path());
        assert_eq!(found, [".hidden", "a", "b"]);
        assert!(modules_in(&dir.path().join("missing")).is_empty());
    }
}
