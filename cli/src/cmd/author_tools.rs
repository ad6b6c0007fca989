//! The compilers that turn Python and JavaScript into components, installed
//! from the package registries on first use.
//!
//! componentize-py comes from PyPI into a virtual environment, ComponentizeJS
//! from npm into a `node_modules`; both live under one toolchain directory
//! (`$MAID_TOOLCHAIN_DIR`, else `$XDG_CACHE_HOME/maid/toolchains`, else
//! `~/.cache/maid/toolchains`), one directory per pinned version. Versions
//! are pinned so a build is reproducible and moving to a new compiler is a
//! reviewed change here, not a surprise on the next machine. An install
//! holds a file lock and marks itself complete last, so concurrent builds
//! install once and an interrupted install is redone, never used.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};

/// componentize-py on PyPI: CPython and the bindings generator in one wheel.
const COMPONENTIZE_PY: &str = "0.25.1";

/// ComponentizeJS on npm: the StarlingMonkey engine that `jco componentize`
/// drives. Its own CLI is used directly: jco 1.35's wrapper cannot read a
/// WIT directory given by path.
const COMPONENTIZE_JS: &str = "0.23.0";

/// Written last into an install directory: the install finished.
const COMPLETE: &str = ".maid-complete";

/// Where toolchains are installed.
pub fn toolchain_dir() -> anyhow::Result<PathBuf> {
    if let Some(dir) = std::env::var_os("MAID_TOOLCHAIN_DIR").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").filter(|x| !x.is_empty()) {
        return Ok(PathBuf::from(x).join("maid/toolchains"));
    }
    match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        Some(home) => Ok(PathBuf::from(home).join(".cache/maid/toolchains")),
        None => bail!("neither MAID_TOOLCHAIN_DIR nor HOME is set: set MAID_TOOLCHAIN_DIR"),
    }
}

/// The `componentize-py` program, installed if needed.
pub fn componentize_py() -> anyhow::Result<PathBuf> {
    let name = format!("componentize-py-{COMPONENTIZE_PY}");
    let dir = ensure(&name, |dir| {
        let python = std::env::var_os("MAID_PYTHON").unwrap_or_else(|| "python3".into());
        run(
            Command::new(&python).args(["-m", "venv"]).arg(dir),
            "create a Python virtual environment",
            "Python 3.11 or newer with the venv module is needed \
             (Debian: apt-get install python3 python3-venv; or set MAID_PYTHON)",
        )?;
        run(
            Command::new(dir.join("bin/python")).args([
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "--no-input",
                &format!("componentize-py=={COMPONENTIZE_PY}"),
            ]),
            &format!("install componentize-py {COMPONENTIZE_PY} from PyPI"),
            "pip must reach PyPI (or a mirror set with PIP_INDEX_URL)",
        )
    })?;
    Ok(dir.join("bin/componentize-py"))
}

/// The `componentize-js` program, installed if needed.
pub fn componentize_js() -> anyhow::Result<PathBuf> {
    let name = format!("componentize-js-{COMPONENTIZE_JS}");
    let dir = ensure(&name, |dir| {
        std::fs::create_dir_all(dir)?;
        let manifest = serde_json::json!({
            "private": true,
            "dependencies": {"@bytecodealliance/componentize-js": COMPONENTIZE_JS},
        });
        std::fs::write(dir.join("package.json"), manifest.to_string())?;
        run(
            Command::new("npm")
                .args(["install", "--no-audit", "--no-fund"])
                .current_dir(dir),
            &format!("install @bytecodealliance/componentize-js {COMPONENTIZE_JS} from npm"),
            "Node.js 20 or newer with npm is needed (Debian: apt-get install nodejs npm), \
             and npm must reach its registry",
        )
    })?;
    Ok(dir.join("node_modules/.bin/componentize-js"))
}

/// The install directory `name`, running `install` into it first unless a
/// complete install is there.
fn ensure(
    name: &str,
    install: impl FnOnce(&Path) -> anyhow::Result<()>,
) -> anyhow::Result<PathBuf> {
    let root = toolchain_dir()?;
    let dir = root.join(name);
    if dir.join(COMPLETE).exists() {
        return Ok(dir);
    }
    std::fs::create_dir_all(&root).with_context(|| format!("create {}", root.display()))?;
    let lock_path = root.join(format!("{name}.lock"));
    let lock =
        File::create(&lock_path).with_context(|| format!("create {}", lock_path.display()))?;
    lock.lock()
        .with_context(|| format!("lock {}", lock_path.display()))?;
    // Another build may have installed it while this one waited.
    if dir.join(COMPLETE).exists() {
        return Ok(dir);
    }
    if dir.exists() {
        std::fs::remove_dir_all(&dir)
            .with_context(|| format!("remove the unfinished install {}", dir.display()))?;
    }
    eprintln!("maid: installing {name} into {} (once)", dir.display());
    install(&dir)?;
    std::fs::write(dir.join(COMPLETE), "")?;
    Ok(dir)
}

/// Run an install step with its output on stderr; on failure say what was
/// being done and what is needed.
fn run(cmd: &mut Command, what: &str, needs: &str) -> anyhow::Result<()> {
    let status = cmd
        .stdin(Stdio::null())
        .stdout(std::io::stderr())
        .status()
        .with_context(|| format!("cannot {what}: {needs}"))?;
    if !status.success() {
        bail!("cannot {what} ({status}): {needs}");
    }
    Ok(())
}
