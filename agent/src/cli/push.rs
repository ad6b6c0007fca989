//! `maid plugin push`: sign a plugin with the master key and store it in
//! Redis for the agents that sync it (`saltutil.sync_modules`), or remove
//! one with a signed removal. The layout is in `plugin_store.rs`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{ArgGroup, Args};
use maid::plugin_store;

use super::fleet::MasterOpts;

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

pub fn push(args: PushArgs) -> anyhow::Result<ExitCode> {
    let (bus, config) = args.master.bus()?;
    let Some(key) = args.master.signing_key(&config)? else {
        bail!("a pushed plugin must be signed: pass --key or set [master] key");
    };
    if let Some(module) = &args.remove {
        let signed = super::block_on(async {
            let mut conn = bus.connect().await?;
            anyhow::Ok(plugin_store::remove(&mut conn, module, &key).await?)
        })??;
        println!(
            "{} removed, signed by {}",
            signed.manifest.module, signed.kid
        );
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
    let signed = super::block_on(async {
        let mut conn = bus.connect().await?;
        anyhow::Ok(plugin_store::push(&mut conn, &file, &module, &key).await?)
    })??;
    let m = &signed.manifest;
    println!(
        "{} {} {} signed by {}",
        m.module,
        m.sha256.as_deref().unwrap_or_default(),
        m.size.unwrap_or_default(),
        signed.kid
    );
    Ok(ExitCode::SUCCESS)
}
