//! `maid pillar ID…`: the pillar the master compiles for each minion
//! named, from its `pillar_roots` and the grains of the minion's verified
//! registration — what a job would deliver it — shown on the master (as
//! Salt's `salt-run pillar.show_pillar`), for operators debugging top
//! files. Nothing is sent to any maid and nothing is stored.

use std::process::ExitCode;

use clap::Args;
use serde_json::{Map, Value};

use crate::master::MasterOpts;
use crate::output::OutputOpts;
use crate::rt::block_on;
use maid_master::jobs;
use maid_master::pillar::{self, Request, Settings};

#[derive(Debug, Args)]
pub struct PillarArgs {
    /// The minions whose pillar to show.
    #[arg(required = true)]
    pub ids: Vec<String>,
    /// Compile it as a job with `saltenv=ENV` would.
    #[arg(long)]
    pub saltenv: Option<String>,
    /// Only this environment's top file and SLS (`pillarenv=ENV`).
    #[arg(long)]
    pub pillarenv: Option<String>,
    #[command(flatten)]
    pub output: OutputOpts,
    #[command(flatten)]
    pub master: MasterOpts,
}

pub fn run(args: PillarArgs) -> anyhow::Result<ExitCode> {
    args.output.prepare()?;
    let (out, indent) = (&args.output.out(), args.output.out_indent);
    let (bus, config) = args.master.bus()?;
    if config.master.pillar_roots.is_empty() {
        anyhow::bail!("the configuration has no [master] pillar_roots: no minion has pillar");
    }
    let Some(pki) = args.master.pki(&config) else {
        anyhow::bail!(
            "pillar is compiled only by a master that keeps keys ([master] pki_dir): \
             its grains are those the maids' accepted keys signed"
        );
    };
    let pki = Some(pki);
    let registry = block_on(async {
        let mut conn = bus.connect().await?;
        anyhow::Ok(jobs::Registry::read(&mut conn, pki.as_ref()).await?)
    })??;
    let settings = Settings::from_config(&config.master);
    let mut shown = Map::new();
    let mut unknown = Vec::new();
    for id in &args.ids {
        let known = registry.known(&|_| false).any(|(k, _)| k == id);
        if !known {
            unknown.push(id.clone());
            continue;
        }
        // The grains a job's pillar is compiled from: the verified
        // registration's.
        let req = Request {
            id: id.clone(),
            grains: registry.grains(id),
            saltenv: args.saltenv.clone(),
            pillarenv: args.pillarenv.clone(),
            pillar_override: Map::new(),
        };
        shown.insert(id.clone(), Value::Object(pillar::compile(&settings, &req)));
    }
    if !shown.is_empty() {
        out.display(&shown, indent);
    }
    for id in &unknown {
        eprintln!("maid: {id} is not a known maid (no accepted key, or never registered)");
    }
    Ok(if unknown.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
