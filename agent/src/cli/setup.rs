//! Turning command-line options and the config file into a ready
//! [`Runtime`]: which config, which plugin directory, which cache, which
//! grants.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use maid::config::{Config, DirGrant, PluginGrants};
use maid::fileserver::{Chain, FileServer, LocalRoots, NoFiles};
use maid::runtime::{Runtime, RuntimeSettings, Services};

use super::RuntimeOpts;

/// The plugin directory of a system install.
const SYSTEM_PLUGIN_DIR: &str = "/usr/lib/maid/plugins";

/// Everything resolved from options and config.
pub struct Setup {
    pub config: Config,
    pub plugin_dir: PathBuf,
    pub cache_dir: Option<PathBuf>,
}

/// `../plugins` beside the running binary (`target/release/maid` ->
/// `target/plugins`), when it exists.
fn plugins_beside_binary() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?.parent()?.join("plugins");
    dir.is_dir().then_some(dir)
}

fn user_cache_dir() -> Option<PathBuf> {
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").filter(|x| !x.is_empty()) {
        return Some(PathBuf::from(x).join("maid"));
    }
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".cache/maid"))
}

pub use maid::runtime::modules_in;

/// The grants of `maid call --local` without `--config`: the operator is
/// acting as themself, as with `salt-call --local`, so plugins may run any
/// program with the operator's environment and use the current directory
/// and the temp directory.
pub fn local_grants() -> anyhow::Result<PluginGrants> {
    let cwd = std::env::current_dir().context("current directory")?;
    let tmp = std::env::temp_dir();
    let mut dirs = vec![DirGrant {
        path: cwd.clone(),
        writable: true,
    }];
    if tmp != cwd {
        dirs.push(DirGrant {
            path: tmp,
            writable: true,
        });
    }
    Ok(PluginGrants {
        exec: vec!["*".into()],
        shell: true,
        env: vec!["*".into()],
        fetch: vec!["**".into()],
        dirs,
        runas: vec!["*".into()],
        limits: None,
    })
}

impl Setup {
    /// Resolve options. With `local_default` and no config file, every
    /// plugin gets [`local_grants`].
    pub fn resolve(opts: &RuntimeOpts, local_default: bool) -> anyhow::Result<Setup> {
        let mut config = match &opts.config {
            Some(path) => Config::load(path)?,
            None => Config::default(),
        };
        let plugin_dir = opts
            .plugin_dir
            .clone()
            .or_else(|| config.plugin_dir.clone())
            .or_else(plugins_beside_binary)
            .unwrap_or_else(|| PathBuf::from(SYSTEM_PLUGIN_DIR));
        let cache_dir = if opts.no_cache {
            None
        } else {
            opts.cache_dir
                .clone()
                .or_else(|| config.cache_dir.clone())
                .or_else(user_cache_dir)
        };
        if local_default && opts.config.is_none() {
            let grants = local_grants()?;
            for module in modules_in(&plugin_dir) {
                config.plugins.insert(module, grants.clone());
            }
        }
        Ok(Setup {
            config,
            plugin_dir,
            cache_dir,
        })
    }

    /// Grains of minion `id`: detected, with the config's own merged over.
    pub fn grains(&self, id: &str) -> serde_json::Map<String, serde_json::Value> {
        maid::grains::collect(id, &self.config.grains)
    }

    /// A runtime over this setup offering `grains` to plugins, serving
    /// `salt://` from `file_roots` and the config's own roots, then from
    /// `fallback` when given.
    pub fn runtime(
        &self,
        grains: &serde_json::Map<String, serde_json::Value>,
        file_roots: &[PathBuf],
        fallback: Option<Arc<dyn FileServer>>,
    ) -> anyhow::Result<Runtime> {
        let mut roots = file_roots.to_vec();
        roots.extend(self.config.file_roots.iter().cloned());
        let mut servers: Vec<Arc<dyn FileServer>> = Vec::new();
        if !roots.is_empty() {
            servers.push(Arc::new(LocalRoots::new(roots)));
        }
        servers.extend(fallback);
        let files: Arc<dyn FileServer> = match servers.len() {
            0 => Arc::new(NoFiles),
            1 => servers.remove(0),
            _ => Arc::new(Chain(servers)),
        };
        let services = Arc::new(Services {
            grains_json: serde_json::to_string(grains).expect("grains serialise"),
            files,
        });
        Runtime::new(RuntimeSettings {
            config: Arc::new(self.config.clone()),
            cache_dir: self.cache_dir.clone(),
            services,
            instances: RuntimeSettings::instances_for(self.config.agent.concurrency),
        })
    }
}
