//! `maid plugin push`: sign a plugin with the master key and store it in
//! Redis for the agents that sync it (`saltutil.sync_modules`), or remove
//! one with a signed removal. The layout is in `plugin_store.rs`.
//!
//! Each push is also noted in the master's own record beside its key
//! (`<key>.pushed.json`): Redis says what is stored, only this record says
//! what this master pushed last, and a sync job pins exactly that
//! ([`recorded_pins`]).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{ArgGroup, Args};
use maid_bus::plugin_store::{self, MODULES_KWARG, PluginManifest, Pushed, SYNC_MODULES};
use serde_json::Value;

use crate::master::MasterOpts;
use crate::rt::block_on;

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("what").required(true).args(["file", "remove"])))]
pub struct PushArgs {
    /// The plugin component to push (`NAME.wasm`).
    pub file: Option<PathBuf>,
    /// Module name it provides [default: the file name without `.wasm`];
    /// the plugin's own manifest must name the same module.
    #[arg(long, conflicts_with = "remove")]
    pub name: Option<String>,
    /// Remove MODULE from the agents that synced it.
    #[arg(long, value_name = "MODULE")]
    pub remove: Option<String>,
    #[command(flatten)]
    pub master: MasterOpts,
}

/// The `modules` kwarg of a `saltutil.sync_modules` job that installs what
/// this master pushed last, read from its record beside its key; `None`
/// without a key (an unsigned job: agents that take one sync unpinned).
pub(super) fn recorded_pins(master: &MasterOpts) -> anyhow::Result<Option<Value>> {
    let config = master.config()?;
    let Some(key) = master.key_path(&config) else {
        return Ok(None);
    };
    let pushed = Pushed::load(&Pushed::beside(&key))?;
    Ok(Some(Value::Object(pushed.pins())))
}

/// Note `manifest` in the master's record and say how to install it.
fn note(key: &std::path::Path, manifest: &PluginManifest) -> anyhow::Result<()> {
    let path = Pushed::beside(key);
    let mut pushed = Pushed::load(&path)?;
    pushed.note(manifest);
    pushed
        .save(&path)
        .context("stored in Redis, but not noted in this master's record of its pushes")?;
    // `{"module": pin}`, spaced as YAML flow (what `maid run` parses) reads it.
    let pin = format!(
        "{{{}: {}}}",
        Value::from(manifest.module.as_str()),
        manifest.pin()
    );
    eprintln!(
        "maid: sync with `maid run '*' {SYNC_MODULES}` (pins every push in {}), or only this one: \
         maid run '*' {SYNC_MODULES} '{MODULES_KWARG}={pin}'",
        path.display()
    );
    Ok(())
}

pub fn push(args: PushArgs) -> anyhow::Result<ExitCode> {
    let (bus, config) = args.master.bus()?;
    let (Some(key), Some(key_file)) = (
        args.master.signing_key(&config)?,
        args.master.key_path(&config),
    ) else {
        bail!("a pushed plugin must be signed: pass --key or set [master] key");
    };
    if let Some(module) = &args.remove {
        let signed = block_on(async {
            let mut conn = bus.connect().await?;
            anyhow::Ok(plugin_store::remove(&mut conn, module, &key).await?)
        })??;
        outln!(
            "{} removed, signed by {}",
            signed.manifest.module,
            signed.kid
        );
        note(&key_file, &signed.manifest)?;
        return Ok(ExitCode::SUCCESS);
    }
    let file = args.file.context("FILE or --remove MODULE")?;
    let module = match &args.name {
        Some(n) => n.clone(),
        None => file
            .file_stem()
            .and_then(|n| n.to_str())
            .context("FILE has no name; pass --name MODULE")?
            .to_string(),
    };
    let signed = block_on(async {
        let mut conn = bus.connect().await?;
        anyhow::Ok(plugin_store::push(&mut conn, &file, &module, &key).await?)
    })??;
    let m = &signed.manifest;
    outln!(
        "{} {} {} signed by {}",
        m.module,
        m.sha256.as_deref().unwrap_or_default(),
        m.size.unwrap_or_default(),
        signed.kid
    );
    note(&key_file, m)?;
    Ok(ExitCode::SUCCESS)
}
