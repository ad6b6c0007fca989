//! Salt's `service` module for systemd (`systemd_service`): start, stop,
//! enable and ask about units through `systemctl`, the one program its
//! grants name. `root=` works on a unit tree that is not the running
//! system's (`systemctl --root`), as in Salt; a running systemd is needed
//! for `status`, `start`, `stop`, `restart`, `reload` and `force_reload`.

use maid_sdk::host::{Command, Output};
use maid_sdk::{Capability, Error, ErrorKind, Function, Plugin, export_plugin, function, python};
use serde::Deserialize;
use serde_json::Value;

struct Service;

/// Salt's `VALID_UNIT_TYPES`.
const UNIT_TYPES: &[&str] = &[
    "service",
    "socket",
    "device",
    "mount",
    "automount",
    "swap",
    "target",
    "path",
    "timer",
];

/// Salt's `_canonical_unit_name`: `.service` unless the name has a unit
/// type already.
fn canonical(name: &str) -> String {
    match name.rsplit_once('.') {
        Some((_, kind)) if UNIT_TYPES.contains(&kind) => name.to_string(),
        _ => format!("{name}.service"),
    }
}

/// A unit name as a job gives it. Never a path: `systemctl link` and
/// `enable` take a unit file by path and link it into the unit tree, so a
/// file any job could write (`cp`'s directory) would become a root service
/// (a denial, retcode 77). Never an option for `systemctl`, nor anything
/// with control characters (bad arguments, as Salt calls a name it cannot
/// use).
fn unit(name: &Value) -> Result<String, Error> {
    let name = python::str(name);
    if name.contains('/') {
        return Err(Error::denied(format!(
            "{name} is a path: service functions take unit names, never unit files"
        )));
    }
    if name.is_empty() || name.starts_with('-') || name.chars().any(char::is_control) {
        return Err(Error::bad_arguments(format!("{name:?} is not a unit name")));
    }
    Ok(canonical(&name))
}

/// Where `systemctl` runs for `root=`: the unit tree itself, which must be
/// an absolute path. The host starts a program only in a directory granted
/// to this plugin once links are resolved (a tree elsewhere is denied),
/// and `systemctl --root .` then works on the directory it was started in,
/// so a link swapped in after the check changes nothing.
fn unit_tree(root: &Option<Value>) -> Result<Option<String>, Error> {
    let Some(root) = root.as_ref().filter(|r| !r.is_null()) else {
        return Ok(None);
    };
    let root = python::str(root);
    if !root.starts_with('/') || root.chars().any(char::is_control) {
        return Err(Error::bad_arguments(format!(
            "root must be an absolute path: {root}"
        )));
    }
    Ok(Some(root))
}

/// Salt's `_systemctl_cmd`, every option before `--` and the unit after
/// it.
fn systemctl(
    action: &[&str],
    name: Option<&str>,
    root: &Option<Value>,
    no_block: bool,
) -> Result<Output, Error> {
    let mut cmd = Command::new("systemctl");
    if no_block {
        cmd = cmd.arg("--no-block");
    }
    let tree = unit_tree(root)?;
    if let Some(tree) = &tree {
        cmd = cmd.args(["--root", "."]).cwd(tree.as_str());
    }
    cmd = cmd.args(action.iter().copied());
    if action.contains(&"status") {
        cmd = cmd.args(["-n", "0"]);
    }
    if let Some(name) = name {
        cmd = cmd.args(["--", name]);
    }
    cmd.output()
        .map_err(|e| match e.message.strip_prefix("cwd ") {
            // The host names the directory it refused as `cwd`: it is `root`.
            Some(rest) if tree.is_some() && e.kind == ErrorKind::Denied => {
                Error::denied(format!("root {rest}"))
            }
            _ => e,
        })
}

#[derive(Deserialize)]
struct Name {
    name: Value,
    #[serde(default)]
    no_block: bool,
    #[serde(default)]
    root: Option<Value>,
}

#[derive(Deserialize)]
struct Root {
    #[serde(default)]
    root: Option<Value>,
}

/// Salt's `enabled`: `is-enabled` succeeds (an alias counts as its
/// target's answer).
fn enabled(name: &str, root: &Option<Value>) -> Result<bool, Error> {
    let out = systemctl(&["is-enabled"], Some(name), root, false)?;
    let said = out.stdout_lossy();
    if out.retcode == 0 && said.trim() != "alias" {
        return Ok(true);
    }
    if said.trim() == "alias" {
        let target = systemctl(&["show", "-P", "Id"], Some(name), root, false)?;
        let target = target.stdout_lossy();
        let again = systemctl(&["is-enabled"], Some(target.trim()), root, false)?;
        return Ok(again.retcode == 0);
    }
    Ok(false)
}

/// The unit files `systemctl list-unit-files` names, with their state,
/// as Salt names units (`name` for a service, `name.type` otherwise).
fn unit_files(root: &Option<Value>) -> Result<Vec<(String, String)>, Error> {
    let out = systemctl(
        &["--full", "--no-legend", "--no-pager", "list-unit-files"],
        None,
        root,
        false,
    )?;
    let mut units = Vec::new();
    for line in out.stdout_lossy().lines() {
        let mut cols = line.split_whitespace();
        let (Some(full), Some(state)) = (cols.next(), cols.next()) else {
            continue;
        };
        let Some((name, kind)) = full.rsplit_once('.') else {
            continue;
        };
        if UNIT_TYPES.contains(&kind) {
            let shown = if kind == "service" {
                name.to_string()
            } else {
                full.to_string()
            };
            units.push((shown, state.to_string()));
        }
    }
    Ok(units)
}

/// Salt's `_strip_scope`: systemctl's standard error without the lines
/// about `--scope`.
fn strip_scope(stderr: &str) -> String {
    let kept: Vec<&str> = stderr.lines().filter(|l| !l.ends_with(".scope")).collect();
    kept.join("\n").trim().to_string()
}

/// `systemctl ACTION NAME` (in the unit tree of `root=`, for `enable`),
/// which must succeed: Salt raises with its standard error.
fn act(action: &str, a: &Name) -> Result<bool, Error> {
    let name = unit(&a.name)?;
    let out = systemctl(&[action], Some(&name), &a.root, a.no_block)?;
    if out.retcode != 0 {
        return Err(Error::failed(strip_scope(&out.stderr_lossy()), 1));
    }
    Ok(true)
}

/// Return whether a unit is active (needs a running systemd)
#[function(args = ["name", "sig=null"])]
fn status(a: Name) -> Result<bool, Error> {
    let name = unit(&a.name)?;
    Ok(systemctl(&["is-active"], Some(&name), &None, false)?.retcode == 0)
}

/// Start a unit (needs a running systemd)
#[function(args = ["name", "no_block=false", "unmask=false", "unmask_runtime=false"])]
fn start(a: Name) -> Result<bool, Error> {
    act("start", &a)
}

/// Stop a unit (needs a running systemd): whether systemctl succeeded
#[function(args = ["name", "no_block=false"])]
fn stop(a: Name) -> Result<bool, Error> {
    let name = unit(&a.name)?;
    Ok(systemctl(&["stop"], Some(&name), &None, a.no_block)?.retcode == 0)
}

/// Restart a unit (needs a running systemd)
#[function(args = ["name", "no_block=false", "unmask=false", "unmask_runtime=false"])]
fn restart(a: Name) -> Result<bool, Error> {
    act("restart", &a)
}

/// Reload a unit (needs a running systemd)
#[function(args = ["name", "no_block=false", "unmask=false", "unmask_runtime=false"])]
fn reload(a: Name) -> Result<bool, Error> {
    act("reload", &a)
}

/// Force-reload a unit, without waiting for it by default (needs a
/// running systemd)
#[function(args = ["name", "no_block=true", "unmask=false", "unmask_runtime=false"])]
fn force_reload(a: Name) -> Result<bool, Error> {
    act("force-reload", &a)
}

/// Enable a unit at boot (root=: in that unit tree); systemctl's error
/// when it cannot
#[function(args = [
    "name",
    "no_block=false",
    "unmask=false",
    "unmask_runtime=false",
    "root=null",
    "**kwargs",
])]
fn enable(a: Name) -> Result<bool, Error> {
    act("enable", &a)
}

/// Disable a unit at boot (root=: in that unit tree)
#[function(args = ["name", "no_block=false", "root=null", "**kwargs"])]
fn disable(a: Name) -> Result<bool, Error> {
    let name = unit(&a.name)?;
    Ok(systemctl(&["disable"], Some(&name), &a.root, a.no_block)?.retcode == 0)
}

/// Return whether a unit is enabled at boot
#[function(name = "enabled", args = ["name", "root=null", "**kwargs"])]
fn enabled_(a: Name) -> Result<bool, Error> {
    enabled(&unit(&a.name)?, &a.root)
}

/// Return whether a unit is not enabled at boot
#[function(args = ["name", "root=null"])]
fn disabled(a: Name) -> Result<bool, Error> {
    Ok(!enabled(&unit(&a.name)?, &a.root)?)
}

/// Return whether a unit file exists for the name
#[function(args = ["name", "root=null"])]
fn available(a: Name) -> Result<bool, Error> {
    let shown = unit(&a.name)?;
    let shown = shown.strip_suffix(".service").unwrap_or(&shown);
    Ok(unit_files(&a.root)?.iter().any(|(n, _)| n == shown))
}

/// Return every unit's name, sorted
#[function(args = ["root=null"])]
fn get_all(a: Root) -> Result<Vec<String>, Error> {
    let mut names: Vec<String> = unit_files(&a.root)?.into_iter().map(|(n, _)| n).collect();
    names.sort();
    names.dedup();
    Ok(names)
}

/// Return the names of the units enabled at boot, sorted
#[function(args = ["root=null"])]
fn get_enabled(a: Root) -> Result<Vec<String>, Error> {
    let mut names: Vec<String> = unit_files(&a.root)?
        .into_iter()
        .filter(|(_, state)| state == "enabled")
        .map(|(n, _)| n)
        .collect();
    names.sort();
    names.dedup();
    Ok(names)
}

impl Plugin for Service {
    const MODULE: &'static str = "service";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const CAPABILITIES: &'static [Capability] = &[Capability::Exec];

    fn functions() -> Vec<Function> {
        maid_sdk::functions![
            status,
            start,
            stop,
            restart,
            reload,
            force_reload,
            enable,
            disable,
            enabled_,
            disabled,
            available,
            get_all,
            get_enabled,
        ]
    }
}

export_plugin!(Service);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_unit_names_are_units() {
        assert_eq!(unit(&json!("nginx")).unwrap(), "nginx.service");
        assert_eq!(unit(&json!("getty@tty1")).unwrap(), "getty@tty1.service");
        assert_eq!(unit(&json!("a.timer")).unwrap(), "a.timer");
        for path in ["/srv/drop/evil.service", "drop/evil", "../x"] {
            assert_eq!(unit(&json!(path)).unwrap_err().kind, ErrorKind::Denied);
        }
        for bad in ["", "--now", "-x", "a\nb", "a\u{7f}"] {
            assert_eq!(
                unit(&json!(bad)).unwrap_err().kind,
                ErrorKind::BadArguments,
                "{bad:?}"
            );
        }
        assert!(unit_tree(&Some(json!("relative"))).is_err());
        assert_eq!(unit_tree(&Some(Value::Null)).unwrap(), None);
        assert_eq!(unit_tree(&None).unwrap(), None);
    }

    #[test]
    fn errors_lose_the_lines_about_scopes() {
        assert_eq!(
            strip_scope("Running scope as unit: run-r1.scope\nJob failed.\n"),
            "Job failed."
        );
    }
}
