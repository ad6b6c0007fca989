//! The last scenario of `maid-bench run`: `test.ping` and `cmd.run 'true'`
//! through a plugin runtime in this process, with no Redis and no agent
//! process: what the call alone costs.
//!
//! Apart from the other scenarios because it needs no `redis-server` and
//! runs after they have stopped theirs; the runtime gets the measured
//! agent's grants, from the same [`agent_config`].

use std::path::Path;
use std::time::Duration;

use anyhow::bail;
use serde_json::Value;

use maid_cli::setup::Setup;

use super::responders::agent_config;
use super::stage;

/// A plugin runtime in this process, with the measured agent's grants
/// (`cmd.run` needs exec) and the plugins of `plugin_dir`.
pub(super) async fn in_process_runtime(
    setup: &Setup,
    plugin_dir: &Path,
) -> anyhow::Result<std::sync::Arc<maid_agent::runtime::Runtime>> {
    let agent: maid_config::Config =
        toml::from_str(&agent_config("redis://unused", 1, None, None))?;
    let mut config = setup.config.clone();
    config.plugins = agent.plugins;
    let setup = Setup {
        config,
        plugin_dir: setup.plugin_dir.clone(),
        cache_dir: setup.cache_dir.clone(),
    };
    let runtime = setup.runtime(&setup.grains("bench"), &[])?;
    runtime.load_dir(plugin_dir).await?;
    Ok(runtime)
}

/// `fun` with `args` through `runtime`, `n` times after a twentieth as many
/// to warm up: what one call costs with no Redis and no second process (a
/// fresh instance from the pool each time).
pub(super) async fn in_process_calls(
    runtime: &maid_agent::runtime::Runtime,
    fun: &str,
    args: Vec<Value>,
    n: usize,
) -> anyhow::Result<Vec<Duration>> {
    stage(&format!(
        "{fun} through the plugin runtime in-process: {n} calls"
    ));
    let warmup = (n / 20).max(1);
    let mut times = Vec::with_capacity(n);
    for i in 0..warmup + n {
        let out = runtime
            .call(maid_agent::runtime::CallRequest {
                fun: fun.into(),
                args: args.clone(),
                kwargs: serde_json::Map::new(),
                jid: maid_agent::jid::new_jid(),
                minion_id: "bench".into(),
                user: None,
                timeout: None,
                ..Default::default()
            })
            .await;
        if out.retcode != 0 {
            bail!("{fun} failed in-process: {}", out.ret);
        }
        if i >= warmup {
            times.push(out.duration);
        }
    }
    Ok(times)
}
