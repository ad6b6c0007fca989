//! `maid plugin new`, `build` and `test`: from an empty folder to a plugin
//! running here, in Rust, Python or JavaScript.
//!
//! A plugin project is a directory whose own manifest says what it is:
//! `Cargo.toml` (`[package.metadata.maid]`) for Rust, `pyproject.toml`
//! (`[tool.maid]`) for Python, `package.json` (`"maid"`) for JavaScript.
//! The templates, the WIT package and the Python and JavaScript glue are
//! compiled into this binary, so a project builds wherever `maid` runs; the
//! glue and the WIT are written into the project's `.maid/` directory at
//! every build, so they always match the `maid` that builds.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use maid_agent::runtime::Capability;
use maid_config::{DirGrant, PluginGrants};
use serde::Deserialize;

use super::author_tools;
use super::call::{self, Invocation};
use crate::setup::RuntimeOpts;
use crate::setup::Setup;

/// The one WIT package, `maid:plugin`: what every plugin is built against.
const WIT: &str = include_str!("../../../wit/plugin.wit");

/// Project files per language: path in the project, template.
const RUST: &[(&str, &str)] = &[
    (
        "Cargo.toml",
        include_str!("../../../plugins/templates/rust/Cargo.toml"),
    ),
    (
        "src/lib.rs",
        include_str!("../../../plugins/templates/rust/lib.rs"),
    ),
    (
        ".gitignore",
        include_str!("../../../plugins/templates/gitignore"),
    ),
];
const PYTHON: &[(&str, &str)] = &[
    (
        "pyproject.toml",
        include_str!("../../../plugins/templates/python/pyproject.toml"),
    ),
    (
        "app.py",
        include_str!("../../../plugins/templates/python/app.py"),
    ),
    (
        "test_app.py",
        include_str!("../../../plugins/templates/python/test_app.py"),
    ),
    (
        ".gitignore",
        include_str!("../../../plugins/templates/gitignore"),
    ),
];
const JS: &[(&str, &str)] = &[
    (
        "package.json",
        include_str!("../../../plugins/templates/js/package.json"),
    ),
    (
        "app.js",
        include_str!("../../../plugins/templates/js/app.js"),
    ),
    (
        "app.test.js",
        include_str!("../../../plugins/templates/js/app.test.js"),
    ),
    (
        ".gitignore",
        include_str!("../../../plugins/templates/gitignore"),
    ),
];

/// Glue written into `.maid/` at build time (and, for Python, by `new`, so
/// the unit tests can import the `maid` helper before the first build).
const PY_HELPER: &str = include_str!("../../../plugins/templates/support/maid.py");
const PY_WORLD: &str = include_str!("../../../plugins/templates/support/maid_world.py");
const JS_WORLD: &str = include_str!("../../../plugins/templates/support/maid_world.js");

/// The SDK of the checkout this binary was built from; used by `new` when
/// it still exists (a `maid` built from a clone).
const REPO_SDK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../sdk");

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Lang {
    Rust,
    Python,
    Js,
}

#[derive(Debug, Args)]
pub struct NewArgs {
    /// The Salt module name (`disk` gives `disk.usage`, ...): lower-case
    /// letters, digits and `_`.
    pub name: String,
    /// The language to write it in.
    #[arg(long, value_enum, default_value_t = Lang::Rust)]
    pub lang: Lang,
    /// Where to create the project [default: ./NAME].
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// The maid-sdk crate a Rust plugin depends on [default: the sdk/ of the
    /// maid checkout this binary was built from].
    #[arg(long, env = "MAID_SDK_PATH")]
    pub sdk_path: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct BuildArgs {
    /// The plugin project.
    #[arg(default_value = ".")]
    pub dir: PathBuf,
    /// Write the plugin here [default: DIR/NAME.wasm].
    #[arg(long, short = 'o')]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub runtime: RuntimeOpts,
}

#[derive(Debug, Args)]
pub struct TestArgs {
    /// The plugin project, built with `maid plugin build` (DIR/NAME.wasm).
    pub dir: PathBuf,
    #[command(flatten)]
    pub call: Invocation,
    /// A capability granted for this call (repeatable): `exec=GLOB`,
    /// `shell`, `env=GLOB`, `fetch=GLOB`, `dir=PATH` (read-only),
    /// `dir-rw=PATH`, `runas=USER`. Nothing is granted otherwise. (No
    /// `-g`: that is `--grains`, as in `salt-call`.)
    #[arg(long)]
    pub grant: Vec<String>,
    /// Directory for compiled plugins [default: $XDG_CACHE_HOME/maid or
    /// ~/.cache/maid].
    #[arg(long, env = "MAID_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
}

/// A plugin project as its manifest describes it.
#[derive(Debug)]
struct Project {
    dir: PathBuf,
    lang: Lang,
    /// The Salt module name; the plugin is `NAME.wasm`.
    module: String,
    /// Reported in the plugin's manifest (Python and JavaScript; a Rust
    /// plugin says it itself).
    version: String,
    /// What the plugin asks for (Python and JavaScript).
    capabilities: Vec<Capability>,
}

#[derive(Deserialize)]
struct CargoToml {
    package: CargoPackage,
}

#[derive(Deserialize)]
struct CargoPackage {
    name: String,
    version: String,
    #[serde(default)]
    metadata: CargoMetadata,
}

#[derive(Deserialize, Default)]
struct CargoMetadata {
    #[serde(default)]
    maid: Option<MaidSection>,
}

#[derive(Deserialize)]
struct MaidSection {
    module: String,
    #[serde(default)]
    capabilities: Vec<Capability>,
}

#[derive(Deserialize)]
struct PyProject {
    #[serde(default)]
    project: Option<PyPackage>,
    tool: PyTool,
}

#[derive(Deserialize)]
struct PyPackage {
    version: Option<String>,
}

#[derive(Deserialize)]
struct PyTool {
    maid: MaidSection,
}

#[derive(Deserialize)]
struct PackageJson {
    version: Option<String>,
    maid: MaidSection,
}

impl Project {
    /// Read the project in `dir`.
    fn open(dir: &Path) -> anyhow::Result<Project> {
        // Absolute: the compilers run inside the project directory.
        let dir = &std::path::absolute(dir)?;
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read_to_string(&path).with_context(|| format!("read {}", path.display()))
        };
        let project = if dir.join("Cargo.toml").is_file() {
            let cargo: CargoToml = toml::from_str(&read("Cargo.toml")?)
                .with_context(|| format!("{}/Cargo.toml", dir.display()))?;
            Project {
                dir: dir.to_path_buf(),
                lang: Lang::Rust,
                module: cargo
                    .package
                    .metadata
                    .maid
                    .map(|m| m.module)
                    .unwrap_or(cargo.package.name),
                version: cargo.package.version,
                capabilities: Vec::new(),
            }
        } else if dir.join("pyproject.toml").is_file() {
            let py: PyProject = toml::from_str(&read("pyproject.toml")?)
                .with_context(|| format!("{}/pyproject.toml: needs [tool.maid]", dir.display()))?;
            Project {
                dir: dir.to_path_buf(),
                lang: Lang::Python,
                module: py.tool.maid.module,
                version: py
                    .project
                    .and_then(|p| p.version)
                    .unwrap_or_else(|| "0.0.0".into()),
                capabilities: py.tool.maid.capabilities,
            }
        } else if dir.join("package.json").is_file() {
            let js: PackageJson = serde_json::from_str(&read("package.json")?)
                .with_context(|| format!("{}/package.json: needs \"maid\"", dir.display()))?;
            Project {
                dir: dir.to_path_buf(),
                lang: Lang::Js,
                module: js.maid.module,
                version: js.version.unwrap_or_else(|| "0.0.0".into()),
                capabilities: js.maid.capabilities,
            }
        } else {
            bail!(
                "{} is not a plugin project: it has no Cargo.toml, pyproject.toml or \
                 package.json (create one with `maid plugin new`)",
                dir.display()
            );
        };
        check_module_name(&project.module)?;
        Ok(project)
    }

    fn wasm(&self) -> PathBuf {
        self.dir.join(format!("{}.wasm", self.module))
    }

    /// Write the WIT and the glue a Python or JavaScript build needs into
    /// `.maid/` (a Rust plugin gets both from maid-sdk).
    fn write_support(&self) -> anyhow::Result<PathBuf> {
        let support = self.dir.join(".maid");
        let (world, glue) = match self.lang {
            Lang::Rust => return Ok(support),
            Lang::Python => {
                write(&support.join("maid.py"), PY_HELPER)?;
                ("maid_world.py", PY_WORLD)
            }
            Lang::Js => ("maid_world.js", JS_WORLD),
        };
        write(&support.join("wit/plugin.wit"), WIT)?;
        let manifest = serde_json::json!({
            "module": self.module,
            "version": self.version,
            "capabilities": self.capabilities,
        });
        // A JSON string holding the JSON document: a valid string literal
        // in Python and in JavaScript alike.
        let literal = serde_json::to_string(&manifest.to_string())?;
        write(&support.join(world), &glue.replace("@MANIFEST@", &literal))?;
        Ok(support)
    }
}

fn check_module_name(name: &str) -> anyhow::Result<()> {
    let mut chars = name.chars();
    let ok = matches!(chars.next(), Some(c) if c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !ok {
        bail!(
            "{name:?} is not a module name: use lower-case letters, digits and `_`, \
             starting with a letter"
        );
    }
    Ok(())
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("create {}", parent.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("write {}", path.display()))
}

/// `maid plugin new`.
pub fn new(args: NewArgs) -> anyhow::Result<ExitCode> {
    check_module_name(&args.name)?;
    let dir = args.dir.unwrap_or_else(|| PathBuf::from(&args.name));
    if dir.read_dir().is_ok_and(|mut d| d.next().is_some()) {
        bail!("{} exists and is not empty", dir.display());
    }
    let sdk = match args.lang {
        Lang::Rust => sdk_path(args.sdk_path)?,
        Lang::Python | Lang::Js => String::new(),
    };
    let files = match args.lang {
        Lang::Rust => RUST,
        Lang::Python => PYTHON,
        Lang::Js => JS,
    };
    for (path, template) in files {
        let text = template
            .replace("@NAME@", &args.name)
            .replace("@SDK@", &sdk);
        write(&dir.join(path), &text)?;
    }
    let project = Project::open(&dir)?;
    project.write_support()?;
    let test = match args.lang {
        Lang::Rust => "cargo test",
        Lang::Python => "python3 -m unittest",
        Lang::Js => "node --test",
    };
    let d = dir.display();
    outln!(
        "created {d}: the `{name}` module with one function, {name}.greet\n\n\
         next:\n  (cd {d} && {test})        # unit tests\n  \
         maid plugin build {d}             # -> {d}/{name}.wasm\n  \
         maid plugin test {d} {name}.greet world",
        name = args.name,
    );
    Ok(ExitCode::SUCCESS)
}

/// The maid-sdk path a new Rust project depends on, absolute.
fn sdk_path(given: Option<PathBuf>) -> anyhow::Result<String> {
    let sdk = match given {
        Some(p) => p,
        None if Path::new(REPO_SDK).join("Cargo.toml").is_file() => PathBuf::from(REPO_SDK),
        None => bail!(
            "maid-sdk is not published on crates.io and the checkout this maid was built \
             from is gone: pass --sdk-path to the sdk/ directory of a maid clone"
        ),
    };
    let sdk = sdk
        .canonicalize()
        .with_context(|| format!("--sdk-path {}", sdk.display()))?;
    if !sdk.join("Cargo.toml").is_file() {
        bail!("{} has no Cargo.toml: it is not maid-sdk", sdk.display());
    }
    let sdk = sdk.to_str().context("the sdk path is not UTF-8")?;
    // A TOML basic string: escape what TOML would read otherwise.
    Ok(sdk.replace('\\', "\\\\").replace('"', "\\\""))
}

/// `maid plugin build`.
pub fn build(args: BuildArgs) -> anyhow::Result<ExitCode> {
    let project = Project::open(&args.dir)?;
    let out = match args.out {
        Some(out) => std::path::absolute(out)?,
        None => std::path::absolute(project.wasm())?,
    };
    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let support = project.write_support()?;
    match project.lang {
        Lang::Rust => build_rust(&project, &out)?,
        Lang::Python => {
            let compiler = author_tools::componentize_py()?;
            let mut cmd = Command::new(compiler);
            cmd.current_dir(&project.dir)
                .arg("-d")
                .arg(support.join("wit"))
                .args(["-w", "plugin", "componentize", "maid_world", "-p", "."])
                .arg("-p")
                .arg(&support)
                .arg("-o")
                .arg(&out);
            run_build(&mut cmd, "componentize-py")?;
        }
        Lang::Js => {
            let compiler = author_tools::componentize_js()?;
            let mut cmd = Command::new(compiler);
            // No wasi:http: a plugin reaches the network only through the
            // host's `fetch`, as in every other language.
            cmd.current_dir(&project.dir)
                .args(["--wit", ".maid/wit", "-n", "plugin"])
                .args(["-d", "http", "fetch-event", "-o"])
                .arg(&out)
                .arg(".maid/maid_world.js");
            run_build(&mut cmd, "componentize-js")?;
        }
    }
    // Load it as the agent would: a plugin that does not describe itself
    // or link fails here, not on the fleet.
    let setup = Setup::resolve(&args.runtime, false)?;
    let runtime = setup.runtime(&setup.grains("local"), &[])?;
    let plugin = crate::rt::block_on(runtime.inspect_file(&out))??;
    let names: Vec<&str> = plugin
        .manifest
        .functions
        .iter()
        .map(|f| f.name.as_str())
        .collect();
    outln!(
        "built {} ({} {}, sha256 {}): {}",
        out.display(),
        plugin.manifest.module,
        plugin.manifest.version,
        &plugin.sha256[..16],
        names.join(" ")
    );
    Ok(ExitCode::SUCCESS)
}

fn run_build(cmd: &mut Command, what: &str) -> anyhow::Result<()> {
    let status = cmd
        .stdout(std::io::stderr())
        .status()
        .with_context(|| format!("run {what}"))?;
    if !status.success() {
        bail!("{what} failed ({status})");
    }
    Ok(())
}

#[derive(Deserialize)]
struct CargoMetadataOut {
    target_directory: PathBuf,
    packages: Vec<CargoMetadataPackage>,
}

#[derive(Deserialize)]
struct CargoMetadataPackage {
    targets: Vec<CargoTarget>,
}

#[derive(Deserialize)]
struct CargoTarget {
    name: String,
    crate_types: Vec<String>,
}

/// `cargo build --target wasm32-wasip2 --release` and copy the cdylib.
fn build_rust(project: &Project, out: &Path) -> anyhow::Result<()> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let meta = Command::new(&cargo)
        .current_dir(&project.dir)
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .stderr(std::io::stderr())
        .output()
        .context("run cargo: is Rust installed? (https://rustup.rs)")?;
    if !meta.status.success() {
        bail!("cargo metadata failed ({})", meta.status);
    }
    let meta: CargoMetadataOut = serde_json::from_slice(&meta.stdout)?;
    let lib = meta
        .packages
        .iter()
        .flat_map(|p| &p.targets)
        .find(|t| t.crate_types.iter().any(|c| c == "cdylib"))
        .context("the crate has no cdylib target: set [lib] crate-type = [\"cdylib\"]")?;
    let status = Command::new(&cargo)
        .current_dir(&project.dir)
        .args(["build", "--release", "--target", "wasm32-wasip2", "--lib"])
        .stdout(std::io::stderr())
        .status()
        .context("run cargo build")?;
    if !status.success() {
        bail!(
            "cargo build failed ({status}); if the target is missing: \
             rustup target add wasm32-wasip2"
        );
    }
    let built = meta
        .target_directory
        .join("wasm32-wasip2/release")
        .join(format!("{}.wasm", lib.name.replace('-', "_")));
    std::fs::copy(&built, out)
        .with_context(|| format!("copy {} to {}", built.display(), out.display()))?;
    Ok(())
}

/// `maid plugin test`: `maid call --local` on the project's plugin with
/// exactly the grants given.
pub fn test(args: TestArgs) -> anyhow::Result<ExitCode> {
    let project = Project::open(&args.dir)?;
    if !project.wasm().is_file() {
        bail!(
            "{} is not built yet: run `maid plugin build {}`",
            project.wasm().display(),
            args.dir.display()
        );
    }
    let opts = RuntimeOpts {
        config: None,
        plugin_dir: Some(project.dir.clone()),
        cache_dir: args.cache_dir,
        no_cache: false,
    };
    let mut setup = Setup::resolve(&opts, false)?;
    setup
        .config
        .plugins
        .insert(project.module.clone(), parse_grants(&args.grant)?);
    call::invoke(&setup, &args.call, true)
}

/// `--grant` words into grants.
fn parse_grants(words: &[String]) -> anyhow::Result<PluginGrants> {
    let mut g = PluginGrants::default();
    for word in words {
        let (kind, value) = match word.split_once('=') {
            Some((k, v)) => (k, Some(v.to_string())),
            None => (word.as_str(), None),
        };
        let need = || {
            value
                .clone()
                .with_context(|| format!("--grant {kind} needs a value: {kind}=..."))
        };
        let dir = |writable| -> anyhow::Result<DirGrant> {
            Ok(DirGrant {
                path: std::path::absolute(need()?)?,
                writable,
            })
        };
        match kind {
            "exec" => g.exec.push(need()?),
            "shell" => g.shell = true,
            "env" => g.env.push(need()?),
            "fetch" => g.fetch.push(need()?),
            "dir" => g.dirs.push(dir(false)?),
            "dir-rw" => g.dirs.push(dir(true)?),
            "runas" => g.runas.push(need()?),
            other => bail!(
                "--grant {other}: not a grant (exec=GLOB, shell, env=GLOB, fetch=GLOB, \
                 dir=PATH, dir-rw=PATH, runas=USER)"
            ),
        }
    }
    Ok(g)
}
