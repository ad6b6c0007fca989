//! Turning command-line options and the config file into a ready
//! configuration and [`Runtime`]: which config, which plugin directory,
//! which cache, which grants. The `maid` commands and the benchmark resolve
//! their options here.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use serde_json::{Map, Value};

use maid_agent::runtime::{Runtime, RuntimeSettings};
use maid_config::{Config, DirGrant, PluginGrants};

/// Where configuration and plugins come from (shared by subcommands).
#[derive(Debug, Clone, Default, Args)]
pub struct RuntimeOpts {
    /// Configuration file: grants and limits per plugin.
    #[arg(long, short = 'c', env = "MAID_CONFIG")]
    pub config: Option<PathBuf>,

    /// Directory of `<module>.wasm` plugins [default: config's plugin_dir,
    /// else `../plugins` beside the maid binary, else /usr/lib/maid/plugins].
    #[arg(long, env = "MAID_PLUGIN_DIR")]
    pub plugin_dir: Option<PathBuf>,

    /// Directory for compiled plugins [default: config's cache_dir, else
    /// $XDG_CACHE_HOME/maid or ~/.cache/maid].
    #[arg(long, env = "MAID_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,

    /// Compile plugins in memory only; never read or write the cache, nor
    /// read the plugins compiled ahead.
    #[arg(long)]
    pub no_cache: bool,
}

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

pub use maid_agent::runtime::modules_in;

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
        operator_is_caller: true,
        shell: true,
        env: vec!["*".into()],
        fetch: vec!["**".into()],
        dirs,
        files: vec!["/**".into()],
        runas: vec!["*".into()],
        jobs: true,
        set_grains: true,
        pillar: true,
        call: vec!["*".into()],
        special_modes: true,
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

    /// The configuration with what was resolved written into it: the
    /// plugin directory and the cache (none with `--no-cache`), as
    /// [`maid_agent::agent::run`] takes it.
    pub fn into_config(self) -> Config {
        let mut config = self.config;
        config.plugin_dir = Some(self.plugin_dir);
        config.cache_dir = self.cache_dir;
        config
    }

    /// [`Self::into_config`]'s configuration, this setup kept.
    pub fn resolved(&self) -> Config {
        Setup {
            config: self.config.clone(),
            plugin_dir: self.plugin_dir.clone(),
            cache_dir: self.cache_dir.clone(),
        }
        .into_config()
    }

    /// The grains of minion `id` before the core grains are detected: the
    /// agent's own (`saltpath` is the plugin directory), then those kept
    /// by `grains.setval`, then the config's own.
    pub fn grains(&self, id: &str) -> Map<String, Value> {
        maid_agent::grains::of_config(id, &self.resolved())
    }

    /// A runtime over this setup offering `grains` to plugins, serving
    /// `salt://` from `file_roots` (`--file-root`: `base`) and the config's
    /// own roots.
    pub fn runtime(
        &self,
        grains: &Map<String, Value>,
        file_roots: &[PathBuf],
    ) -> anyhow::Result<Arc<Runtime>> {
        let mut config = self.resolved();
        config.file_roots.prepend("base", file_roots.to_vec());
        let instances = RuntimeSettings::instances_for(config.agent.concurrency);
        // One call per process, as salt-call: file system calls on the
        // calling thread.
        Ok(Runtime::for_config(&config, grains, None, instances, true)?)
    }
}
