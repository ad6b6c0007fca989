//! `maid file push`: store a file so `salt://NAME` resolves on every
//! agent, signed with the master key when there is one.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use crate::master::MasterOpts;
use crate::rt::block_on;
use maid_bus::filestore;

#[derive(Debug, Args)]
pub struct PushArgs {
    /// The file to store.
    pub path: PathBuf,
    /// Name it is served as (`salt://NAME`) [default: the file name].
    #[arg(long = "as")]
    pub name: Option<String>,
    /// The environment it is served in (`salt://NAME?saltenv=ENV`).
    #[arg(long, default_value = "base")]
    pub saltenv: String,
    #[command(flatten)]
    pub master: MasterOpts,
}

/// `, signed by KID` when a key signed the push.
pub(super) fn signed_by(pushed: &filestore::Pushed) -> String {
    match &pushed.kid {
        Some(kid) => format!(", signed by {kid}"),
        None => String::new(),
    }
}

/// Store a file as `salt://NAME`; with the master key (`--key`, the
/// config's `master.key`), sign its name, size and SHA-256, so agents that
/// require signed jobs serve it. Without one it is stored unsigned, and
/// such agents serve it only to jobs that pin its hash.
pub fn push(args: PushArgs) -> anyhow::Result<ExitCode> {
    let (bus, config) = args.master.bus()?;
    let key = args.master.signing_key(&config)?;
    let name = match &args.name {
        Some(n) => n.clone(),
        None => args
            .path
            .file_name()
            .and_then(|n| n.to_str())
            .context("PATH has no file name; pass --as NAME")?
            .to_string(),
    };
    let pushed = block_on(async {
        let mut conn = bus.connect().await?;
        anyhow::Ok(
            filestore::push(&mut conn, &args.path, &args.saltenv, &name, key.as_ref()).await?,
        )
    })??;
    let url = maid_salt::files::url(&pushed.name, &args.saltenv);
    outln!("{url} {} {}", pushed.sha256, pushed.size);
    if pushed.kid.is_none() {
        eprintln!(
            "maid: salt://{} is not signed (no --key or master.key): agents that require \
             signed jobs serve it only to jobs that pin its hash (`maid cp`)",
            pushed.name
        );
    }
    Ok(ExitCode::SUCCESS)
}
