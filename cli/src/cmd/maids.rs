//! `maid maids`: the registry — who registered, alive or not, with what
//! key and role.

use std::collections::BTreeMap;
use std::process::ExitCode;

use clap::Args;
use serde_json::Value;

use crate::master::MasterOpts;
use crate::rt::block_on;
use maid_master::jobs;

#[derive(Debug, Args)]
pub struct MaidsArgs {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub master: MasterOpts,
}

pub fn maids(args: MaidsArgs) -> anyhow::Result<ExitCode> {
    let (bus, config) = args.master.bus()?;
    let pki = args.master.pki(&config);
    let maids = block_on(async {
        let mut conn = bus.connect().await?;
        anyhow::Ok(jobs::alive_maids(&mut conn, pki.as_ref()).await?)
    })??;
    // Each maid's key state, where the master keeps keys: only accepted
    // maids are expected to answer.
    let states: BTreeMap<String, &'static str> = match &pki {
        Some(pki) => {
            let mut states = BTreeMap::new();
            for (state, ids) in pki.list()? {
                for id in ids {
                    states.entry(id).or_insert(state.name());
                }
            }
            states
        }
        None => BTreeMap::new(),
    };
    let key_of = |id: &str| -> &str {
        match &pki {
            Some(_) => states.get(id).copied().unwrap_or("none"),
            None => "-",
        }
    };
    // A syndic maid answers for others only when its key was accepted as
    // a syndic maid's (PROTOCOL v1.2 §7): the role the operator accepted.
    let role_of = |id: &str, reg: &Option<maid_protocol::protocol::Registration>| -> &str {
        let accepted_syndic = pki.as_ref().is_some_and(|pki| {
            pki.key(maid_master::pki::KeyState::Accepted, id)
                .ok()
                .flatten()
                .is_some_and(|key| maid_master::registry::is_syndic_key(pki, id, &key))
        });
        match (&pki, reg.as_ref().is_some_and(|r| r.syndic)) {
            (Some(_), _) if accepted_syndic => "syndic",
            (Some(_), true) => "syndic?",
            (None, true) => "syndic",
            _ => "minion",
        }
    };
    if args.json {
        let v: Vec<Value> = maids
            .iter()
            .map(|(id, (alive, reg))| {
                let mut entry = serde_json::json!({"id": id, "alive": alive, "registration": reg});
                if pki.is_some() {
                    entry["key"] = Value::from(key_of(id));
                }
                entry["role"] = Value::from(role_of(id, reg));
                entry
            })
            .collect();
        outln!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "{:<24} {:<6} {:<9} {:<8} {:<8} {:<27} FUNCTIONS",
        "ID",
        "ALIVE",
        "KEY",
        "ROLE",
        "VERSION",
        "LAST SEEN"
    );
    for (id, (alive, reg)) in &maids {
        let (version, seen, funs) = match reg {
            Some(r) => (
                r.version.clone(),
                r.last_seen.clone(),
                r.functions.len().to_string(),
            ),
            None => ("?".into(), "?".into(), "?".into()),
        };
        outln!(
            "{id:<24} {:<6} {:<9} {:<8} {version:<8} {seen:<27} {funs}",
            if *alive { "yes" } else { "no" },
            key_of(id),
            role_of(id, reg)
        );
    }
    Ok(ExitCode::SUCCESS)
}
