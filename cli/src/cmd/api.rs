//! `maid api`: serve the master's HTTP API, and `maid api hash-password`
//! to make the password hashes its `[api.users]` table holds.

use std::io::BufRead;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};

use crate::master::MasterOpts;

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ApiArgs {
    #[command(subcommand)]
    pub command: Option<ApiCommand>,
    /// Address to listen on [default: the config's api.listen, else
    /// 127.0.0.1:8000]. Port 0 picks a free port; the address is printed.
    #[arg(long)]
    pub listen: Option<SocketAddr>,
    /// PEM certificate chain: serve HTTPS (with --tls-key).
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    #[command(flatten)]
    pub master: MasterOpts,
}

#[derive(Debug, Subcommand)]
pub enum ApiCommand {
    /// Read a password from the first line of standard input and print its
    /// argon2 hash, for `[api.users]`.
    HashPassword,
}

pub fn run(args: ApiArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        Some(ApiCommand::HashPassword) => hash_password(),
        None => serve(args),
    }
}

fn hash_password() -> anyhow::Result<ExitCode> {
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .context("read the password from standard input")?;
    let password = line.trim_end_matches(['\r', '\n']);
    if password.is_empty() {
        bail!("no password on standard input");
    }
    outln!("{}", maid_master::api::auth::hash_password(password)?);
    Ok(ExitCode::SUCCESS)
}

fn serve(args: ApiArgs) -> anyhow::Result<ExitCode> {
    let (bus, config) = args.master.bus()?;
    let pki = args.master.verified_pki(&config)?;
    let mut settings = config.api.clone();
    if let Some(listen) = args.listen {
        settings.listen = listen;
    }
    if args.tls_cert.is_some() {
        settings.tls_cert = args.tls_cert.clone();
        settings.tls_key = args.tls_key.clone();
    }
    if settings.users.is_empty() {
        bail!("no [api.users] in the configuration: nobody could log in");
    }
    let key = args.master.signing_key(&config)?;
    if key.is_none() {
        tracing::warn!(
            "no master key: jobs go out unsigned, and maids that require signed jobs reject them"
        );
    }
    let tls = match (&settings.tls_cert, &settings.tls_key) {
        (Some(cert), Some(key)) => Some(maid_master::api::tls::acceptor(cert, key)?),
        _ => None,
    };
    let master_topic = args.master.topic(&config);
    let nodegroups = config.master.nodegroups.clone();
    let file_roots = config.master.file_roots.clone();
    let pillar = Some(maid_master::pillar::Settings::from_config(&config.master));
    // Many requests at once: a worker per core, unlike the one-shot
    // commands.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(settings.listen)
            .await
            .with_context(|| format!("listen on {}", settings.listen))?;
        let scheme = if tls.is_some() { "https" } else { "http" };
        outln!(
            "maid api listening on {scheme}://{}",
            listener.local_addr()?
        );
        let settings = maid_master::api::Settings {
            bus,
            master_topic,
            key,
            api: settings,
            pki,
            nodegroups,
            file_roots,
            pillar,
        };
        maid_master::api::serve(listener, tls, settings, crate::rt::shutdown_signal()).await?;
        anyhow::Ok(ExitCode::SUCCESS)
    })
}
