//! `maid init`: write the commented configuration file.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

#[derive(Debug, Args)]
pub struct InitArgs {
    /// Where to write it.
    #[arg(default_value = "/etc/maid/maid.toml")]
    pub path: PathBuf,

    /// Replace an existing file.
    #[arg(long)]
    pub force: bool,
}

pub fn run(args: InitArgs) -> anyhow::Result<ExitCode> {
    if let Some(dir) = args.path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).mode(0o640);
    if args.force {
        options.create(true).truncate(true);
    } else {
        options.create_new(true);
    }
    let mut file = options.open(&args.path).with_context(|| {
        format!(
            "write {} (it may exist already: pass --force to replace it)",
            args.path.display()
        )
    })?;
    file.write_all(maid_config::TEMPLATE.as_bytes())?;
    eprintln!("wrote {}", args.path.display());
    Ok(ExitCode::SUCCESS)
}
