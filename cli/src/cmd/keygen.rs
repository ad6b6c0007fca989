//! `maid keygen`: an Ed25519 key pair for signing jobs.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

#[derive(Debug, Args)]
pub struct KeygenArgs {
    /// Writes PREFIX.key (private, mode 0600) and PREFIX.pub.
    #[arg(default_value = "master")]
    pub prefix: PathBuf,
    /// Replace existing files.
    #[arg(long)]
    pub force: bool,
}

pub fn keygen(args: KeygenArgs) -> anyhow::Result<ExitCode> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let key = maid_protocol::trust::generate()?;
    let private = args.prefix.with_extension("key");
    let public = args.prefix.with_extension("pub");
    for (path, text, mode) in [
        (&private, maid_protocol::trust::encode_signing(&key), 0o600),
        (
            &public,
            maid_protocol::trust::encode_verifying(&key.verifying_key()),
            0o644,
        ),
    ] {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).mode(mode);
        if args.force {
            options.create(true).truncate(true);
        } else {
            options.create_new(true);
        }
        let mut f = options
            .open(path)
            .with_context(|| format!("write {} (pass --force to replace it)", path.display()))?;
        writeln!(f, "{text}")?;
    }
    outln!(
        "{} {} (kid {})",
        private.display(),
        public.display(),
        maid_protocol::trust::key_id(&key.verifying_key())
    );
    Ok(ExitCode::SUCCESS)
}
