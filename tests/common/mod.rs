//! Helpers shared by the integration tests: a runtime over the real plugin
//! `.wasm` files that `maid-test-guests` built, with a given configuration.

#![allow(dead_code)]

pub mod fleet;
pub mod salt;

pub use maid_testkit::redis;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use maid_agent::fileserver::{FileServer, LocalRoots, NoFiles};
use maid_agent::runtime::{CallRequest, Outcome, Runtime, RuntimeSettings, Services};
use maid_config::{Config, DirGrant, PluginGrants};
use serde_json::{Map, Value};

pub use maid_test_guests as guests;

/// The `maid` binary as the tests run it. A master command without a key
/// store must have been told it counts replies unverified, or it refuses
/// to run (`tests/attacks_fleet.rs` proves that); here it is told so. A
/// `--pki-dir` verifies whatever this says.
pub fn maid_command() -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_maid"));
    // The warning it then gives at every run is silenced alone: Salt's
    // stderr, which the tests compare, has no such line.
    cmd.env("MAID_VERIFY_REPLIES", "false")
        .env("MAID_LOG", "warn,maid::unverified=off");
    cmd
}

/// A finished command's status, stdout and stderr, for a failure message.
pub fn output_text(o: &std::process::Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The grants `maid init` writes for `module` (its `[plugins.MODULE]` table
/// in the configuration template).
pub fn init_grants(module: &str) -> PluginGrants {
    let template: Config = toml::from_str(maid_config::TEMPLATE).unwrap();
    template.plugins.get(module).cloned().unwrap_or_default()
}

/// The grants `maid init` writes for the grains plugin to detect the core
/// grains, without `set_grains`: what test maids get unless their own
/// configuration says otherwise.
pub fn detection_grants() -> PluginGrants {
    PluginGrants {
        set_grains: false,
        ..init_grants("grains")
    }
}

/// `[plugins.grains]` with [`detection_grants`], as TOML. Test maids get
/// it unless their own configuration has a `[plugins.grains]` table.
pub fn init_grains_toml() -> String {
    let mut plugins = std::collections::BTreeMap::new();
    plugins.insert("grains", detection_grants());
    let mut table = std::collections::BTreeMap::new();
    table.insert("plugins", plugins);
    toml::to_string(&table).unwrap()
}

/// One compiled-artifact cache for the whole test run, so each plugin is
/// compiled once, not once per test.
pub fn shared_cache() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("plugin-cache");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A runtime with `config`, `salt://` served from `file_root`, every
/// shipped plugin and the hostile fixture loaded.
pub async fn runtime_with(config: Config, file_root: Option<&Path>) -> Arc<Runtime> {
    let files: Arc<dyn FileServer> = match file_root {
        Some(root) => Arc::new(LocalRoots::new(maid_config::FileRoots::base(vec![
            root.to_path_buf(),
        ]))),
        None => Arc::new(NoFiles),
    };
    // The core grains are detected under the grants `maid init` writes,
    // unless the test grants the grains plugin its own.
    let mut config = config;
    config
        .plugins
        .entry("grains".into())
        .or_insert_with(detection_grants);
    let grains = maid_agent::grains::of_config("test-minion", &config);
    let config = Arc::new(config);
    let rt = Runtime::new(RuntimeSettings {
        config: config.clone(),
        cache_dir: Some(shared_cache()),
        shipped_dir: None,
        compile_for: Default::default(),
        services: Arc::new(Services {
            grains: Arc::new(maid_agent::grains::GrainStore::new(grains, None)),
            files,
            jobs: Default::default(),
        }),
        instances: RuntimeSettings::instances_for(64),
        fs_on_call_thread: false,
    })
    .unwrap();
    let failed = rt.load_dir(Path::new(guests::PLUGINS_DIR)).await.unwrap();
    assert!(failed.is_empty(), "{failed:?}");
    rt.load_file(Path::new(guests::FIXTURE_HOSTILE))
        .await
        .unwrap();
    let (grains, _) = maid_agent::grains::detected(&rt, "test-minion", &config).await;
    rt.grains().replace(grains);
    rt
}

/// Grants for one module.
pub fn config_with(module: &str, grants: PluginGrants) -> Config {
    let mut config = Config::default();
    config.plugins.insert(module.into(), grants);
    config
}

pub fn dir(path: &Path, writable: bool) -> DirGrant {
    DirGrant {
        path: path.to_path_buf(),
        writable,
    }
}

/// Run `fun` with JSON positional and keyword arguments.
pub async fn call(rt: &Runtime, fun: &str, args: Value, kwargs: Value) -> Outcome {
    let args = match args {
        Value::Array(a) => a,
        other => panic!("args must be an array, not {other}"),
    };
    let kwargs: Map<String, Value> = match kwargs {
        Value::Object(m) => m,
        other => panic!("kwargs must be an object, not {other}"),
    };
    rt.call(CallRequest {
        fun: fun.into(),
        args,
        kwargs,
        jid: maid_agent::jid::new_jid(),
        minion_id: "test-minion".into(),
        user: Some("tester".into()),
        timeout: None,
        ..Default::default()
    })
    .await
}
