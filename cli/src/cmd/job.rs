//! `maid job JID`: a job's returns from the job cache.

use std::process::ExitCode;

use clap::Args;
use maid_master::jobs;

use super::fleet::{print_one, report_forged};
use crate::master::MasterOpts;
use crate::output::OutputOpts;
use crate::rt::block_on;

#[derive(Debug, Args)]
pub struct JobArgs {
    /// The job id.
    pub jid: String,
    #[command(flatten)]
    pub output: OutputOpts,
    #[command(flatten)]
    pub master: MasterOpts,
}

pub fn job(args: JobArgs) -> anyhow::Result<ExitCode> {
    args.output.prepare()?;
    let (bus, config) = args.master.bus()?;
    let pki = args.master.verified_pki(&config)?;
    // Returns sealed to the master (PROTOCOL §8) open with its key.
    let key = args.master.signing_key(&config)?;
    let cached = block_on(async {
        let mut conn = bus.connect().await?;
        anyhow::Ok(jobs::cached(&mut conn, &args.jid, pki.as_ref(), key.as_ref()).await?)
    })??;
    report_forged(&cached.forged);
    let returns = cached.returns;
    let out = args.output.out();
    for r in &returns {
        print_one(
            &out,
            args.output.out_indent,
            &r.id,
            r.ret.clone(),
            r.retcode,
        );
    }
    Ok(if returns.is_empty() {
        eprintln!("maid: no returns cached for job {}", args.jid);
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}
