//! `maid audit verify FILE…`: check a maid's audit log — its hash chain
//! and the checkpoints its key signed — and name the first record that
//! was altered, removed, inserted or moved.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use maid_protocol::auditchain::Verifier;
use serde_json::Value;

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Check audit log files of one maid (a rotated file first, then the
    /// next): every record chained to the one before, every checkpoint
    /// signed by the maid's key. Exit 1 naming the first break.
    Verify(VerifyArgs),
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The files, oldest first.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// The maid's public key (`state_dir/minion.pub`), for its checkpoints.
    #[arg(long)]
    pub key: Option<PathBuf>,
    /// The master's key store: the key it accepted for the maid the
    /// records name checks the checkpoints.
    #[arg(long, env = "MAID_PKI_DIR")]
    pub pki_dir: Option<PathBuf>,
}

pub fn run(cmd: AuditCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        AuditCommand::Verify(args) => verify(args),
    }
}

fn verify(args: VerifyArgs) -> anyhow::Result<ExitCode> {
    let mut texts = Vec::new();
    for f in &args.files {
        let bytes = std::fs::read(f).with_context(|| format!("reading {}", f.display()))?;
        texts.push((f.display().to_string(), bytes));
    }
    let key = match (&args.key, &args.pki_dir) {
        (Some(path), _) => Some(maid_protocol::trust::read_verifying_key(
            path.to_str().context("the key's path is not UTF-8")?,
        )?),
        (None, Some(dir)) => {
            let minion = first_minion(&texts)
                .context("no record names its maid: give the maid's key with --key")?;
            let accepted = maid_master::pki::Pki::new(dir.clone()).accepted()?;
            Some(
                *accepted
                    .get(&minion)
                    .with_context(|| format!("{}: no key accepted for {minion}", dir.display()))?,
            )
        }
        (None, None) => None,
    };
    let checked = key.is_some();
    let mut v = Verifier::new(key);
    for (name, bytes) in &texts {
        for (i, line) in bytes.split(|b| *b == b'\n').enumerate() {
            if !line.is_empty() {
                v.push(name, i + 1, line);
            }
        }
    }
    if let Some(b) = &v.first_break {
        println!("{b}");
        return Ok(ExitCode::from(1));
    }
    println!(
        "{} records, {} checkpoints: the chain is intact",
        v.records, v.checkpoints
    );
    if !checked {
        println!("checkpoints not checked: no --key or --pki-dir");
    } else {
        let last = v.head().map_or(0, |h| h.seq);
        match v.vouched_through {
            Some(seq) if seq == last => println!("signed through seq {seq}, the last"),
            Some(seq) => println!(
                "signed through seq {seq}; seq {} to {last} wait for the next checkpoint",
                seq + 1
            ),
            None => println!("no checkpoint yet: nothing is signed"),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The maid the first record names.
fn first_minion(texts: &[(String, Vec<u8>)]) -> Option<String> {
    texts
        .iter()
        .flat_map(|(_, b)| b.split(|c| *c == b'\n'))
        .filter_map(|l| serde_json::from_slice::<Value>(l).ok())
        .find_map(|v| {
            v.get("minion")
                .and_then(Value::as_str)
                .filter(|m| !m.is_empty())
                .map(String::from)
        })
}
