//! `maid plugin list` and `maid plugin inspect`: what each plugin is, asks
//! for and is granted, in a form a reviewer can read and diff;
//! `maid plugin compile`: the plugins compiled ahead, for a package to ship.
//! The author's commands (`new`, `build`, `test`) live in `author.rs`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use maid_agent::runtime::{CacheStatus, GrantSummary, LoadError, LoadedPlugin};
use serde::Serialize;

use crate::setup::RuntimeOpts;
use crate::setup::Setup;

#[derive(Debug, Subcommand)]
pub enum PluginCommand {
    /// List the plugins in the plugin directory.
    List(ListArgs),
    /// Show a plugin's manifest, hash, requested and granted capabilities.
    Inspect(InspectArgs),
    /// Compile every plugin ahead, for any CPU of this architecture, into
    /// PLUGIN_DIR/precompiled: shipped beside the plugins, it spares a
    /// fresh install (or an upgrade) compiling them at its first start.
    Compile(CompileArgs),
    /// Create a plugin project (Rust, Python or JavaScript).
    New(super::author::NewArgs),
    /// Build a plugin project into NAME.wasm.
    Build(super::author::BuildArgs),
    /// Run a function of a built plugin here, with only the grants given.
    Test(Box<super::author::TestArgs>),
    /// Sign a plugin with the master key and store it for the agents that
    /// sync it (`saltutil.sync_modules`, which pins this master's pushes).
    Push(super::plugin_push::PushArgs),
}

#[derive(Debug, Clone, Copy, ValueEnum, Default)]
pub enum Format {
    /// Aligned text for people.
    #[default]
    Text,
    /// JSON for tools.
    Json,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    #[command(flatten)]
    pub runtime: RuntimeOpts,
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The plugin file.
    pub file: PathBuf,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    #[command(flatten)]
    pub runtime: RuntimeOpts,
}

#[derive(Debug, Args)]
pub struct CompileArgs {
    /// Where to write the compiled plugins [default: PLUGIN_DIR/precompiled,
    /// where an agent reads them].
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub runtime: RuntimeOpts,
}

/// The reviewable facts about one plugin.
#[derive(Debug, Serialize)]
struct Report {
    file: String,
    sha256: String,
    module: String,
    version: String,
    requested: Vec<&'static str>,
    granted: GrantSummary,
    functions: Vec<maid_agent::runtime::FunctionDoc>,
}

fn report(p: &LoadedPlugin) -> Report {
    Report {
        file: p.path.display().to_string(),
        sha256: p.sha256.clone(),
        module: p.manifest.module.clone(),
        version: p.manifest.version.clone(),
        requested: p.manifest.capabilities.iter().map(|c| c.as_str()).collect(),
        granted: p.grants.summary(),
        functions: p.manifest.functions.clone(),
    }
}

fn list_or_none(items: &[String]) -> String {
    if items.is_empty() {
        "-".into()
    } else {
        items.join(", ")
    }
}

fn text(r: &Report) -> String {
    let g = &r.granted;
    let dirs: Vec<String> = g
        .dirs
        .iter()
        .map(|d| {
            format!(
                "{} ({})",
                d.path.display(),
                if d.writable { "rw" } else { "ro" }
            )
        })
        .collect();
    let requested: Vec<String> = r.requested.iter().map(|s| s.to_string()).collect();
    let mut out = format!(
        "module:    {}\nversion:   {}\nfile:      {}\nsha256:    {}\nrequests:  {}\ngranted:\n  exec:    {}\n  shell:   {}\n  env:     {}\n  runas:   {}\n  fetch:   {}\n  dirs:    {}\n  files:   {}\nfunctions:\n",
        r.module,
        r.version,
        r.file,
        r.sha256,
        list_or_none(&requested),
        list_or_none(&g.exec),
        if g.shell { "yes" } else { "no" },
        list_or_none(&g.env),
        list_or_none(&g.runas),
        list_or_none(&g.fetch),
        list_or_none(&dirs),
        list_or_none(&g.files),
    );
    // Grants that do less than they seem to: a reviewer reads these first.
    let warnings: String = g
        .warnings
        .iter()
        .map(|w| format!("warning:   {w}\n"))
        .collect();
    out.insert_str(0, &warnings);
    for f in &r.functions {
        out.push_str(&format!(
            "  {}.{}({})\n      {}\n",
            r.module,
            f.name,
            f.args.join(", "),
            f.doc
        ));
    }
    out
}

/// Load the plugin directory: a report per plugin, and what failed.
fn load_reports(setup: &Setup) -> anyhow::Result<(Vec<Report>, Vec<LoadError>)> {
    let runtime = setup.runtime(&setup.grains("local"), &[])?;
    let failed = crate::rt::block_on(runtime.load_dir(&setup.plugin_dir))??;
    let reports = runtime.plugins().iter().map(|p| report(p)).collect();
    Ok((reports, failed))
}

/// Name the plugins that did not load; exit 1 when any did not.
fn report_failures(failed: &[LoadError]) -> ExitCode {
    for e in failed {
        eprintln!("maid: not loaded: {e}");
    }
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

pub fn run(cmd: PluginCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        PluginCommand::New(args) => super::author::new(args),
        PluginCommand::Build(args) => super::author::build(args),
        PluginCommand::Test(args) => super::author::test(*args),
        PluginCommand::Push(args) => super::plugin_push::push(args),
        PluginCommand::List(args) => {
            let setup = Setup::resolve(&args.runtime, false)?;
            let (reports, failed) = load_reports(&setup)?;
            match args.format {
                Format::Json => outln!("{}", serde_json::to_string_pretty(&reports)?),
                Format::Text => {
                    outln!(
                        "{:<12} {:<10} {:<16} {:<28} FUNCTIONS",
                        "MODULE",
                        "VERSION",
                        "SHA256",
                        "REQUESTS"
                    );
                    for r in &reports {
                        let names: Vec<&str> =
                            r.functions.iter().map(|f| f.name.as_str()).collect();
                        outln!(
                            "{:<12} {:<10} {:<16} {:<28} {}",
                            r.module,
                            r.version,
                            &r.sha256[..16],
                            if r.requested.is_empty() {
                                "-".into()
                            } else {
                                r.requested.join(",")
                            },
                            names.join(" ")
                        );
                    }
                }
            }
            Ok(report_failures(&failed))
        }
        PluginCommand::Compile(args) => compile(args),
        PluginCommand::Inspect(args) => {
            let setup = Setup::resolve(&args.runtime, false)?;
            let runtime = setup.runtime(&setup.grains("local"), &[])?;
            let plugin = crate::rt::block_on(runtime.inspect_file(&args.file))??;
            let r = report(&plugin);
            match args.format {
                Format::Json => outln!("{}", serde_json::to_string_pretty(&r)?),
                Format::Text => out!("{}", text(&r)),
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `maid plugin compile`: one line per plugin, its module, the start of
/// its hash and whether it was compiled now or already; exit 1 when one
/// did not load.
fn compile(args: CompileArgs) -> anyhow::Result<ExitCode> {
    let setup = Setup::resolve(&args.runtime, false)?;
    let out = args
        .out
        .unwrap_or_else(|| setup.plugin_dir.join(maid_agent::runtime::SHIPPED_DIR));
    let done = crate::rt::block_on(maid_agent::runtime::Runtime::compile_ahead(
        &setup.plugin_dir,
        &out,
    ))??;
    for (module, sha256, status) in &done.plugins {
        let what = match status {
            CacheStatus::Hit => "already compiled",
            _ => "compiled",
        };
        outln!("{module:<12} {} {what}", &sha256[..16]);
    }
    for path in &done.removed {
        outln!("removed {}", path.display());
    }
    outln!(
        "{} plugins compiled for any {} CPU in {}",
        done.plugins.len(),
        std::env::consts::ARCH,
        out.display()
    );
    Ok(report_failures(&done.failed))
}

#[derive(Debug, Args)]
pub struct PolicyArgs {
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    #[command(flatten)]
    pub runtime: RuntimeOpts,
}

/// What the configuration trusts, for `maid policy`.
#[derive(Debug, Serialize)]
struct Trust {
    require_signed: bool,
    trusted_key_ids: Vec<String>,
    max_skew_secs: u64,
    audit_log: Option<String>,
}

/// `maid policy`: what this agent trusts, and for every plugin in the
/// plugin directory what it is, asks for and is granted.
pub fn policy(args: PolicyArgs) -> anyhow::Result<ExitCode> {
    let setup = Setup::resolve(&args.runtime, false)?;
    let sec = &setup.config.security;
    let trusted_key_ids = maid_agent::trust::read_trusted_keys(&sec.trusted_keys)?
        .into_iter()
        .map(|(kid, _)| kid)
        .collect();
    let trust = Trust {
        require_signed: sec.signed(),
        trusted_key_ids,
        max_skew_secs: sec.max_skew_secs,
        audit_log: setup
            .config
            .audit
            .path
            .as_ref()
            .map(|p| p.display().to_string()),
    };
    let (reports, failed) = load_reports(&setup)?;
    match args.format {
        Format::Json => outln!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({"trust": trust, "plugins": reports}))?
        ),
        Format::Text => {
            outln!(
                "require_signed: {}\ntrusted keys:   {}\nmax skew:       {} s\naudit log:      {}\n",
                if trust.require_signed {
                    "yes"
                } else {
                    "NO (anyone who can publish can run jobs)"
                },
                list_or_none(&trust.trusted_key_ids),
                trust.max_skew_secs,
                trust.audit_log.as_deref().unwrap_or("-"),
            );
            for r in &reports {
                outln!("{}", text(r));
            }
        }
    }
    Ok(report_failures(&failed))
}
