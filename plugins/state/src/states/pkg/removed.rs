//! `pkg.removed` and `pkg.purged`: Salt's `_uninstall`, with
//! `_find_remove_targets` deciding what is installed (at the version
//! given) and so to remove; `purged` also purges what was removed with
//! its configuration left.

use serde_json::{Value, json};

use super::{
    AGGREGATE, Step, Stop, Wanted, changed, failed_call, finish, fulfills, list_pkgs, names,
    normalize_name, passed_on, pkg, repack, unported, upsert, versions_of,
};
use crate::compile::Obj;
use crate::py::{py_str, truthy};
use crate::states::{CallError, Env, name_of, ret};

/// The arguments `removed` and `purged` name; the chunk's others go on
/// to the `pkg` functions.
const NAMED: &[&str] = &["name", "version", "pkgs", "normalize", "ignore_epoch"];

/// `pkg.removed`.
pub fn removed(low: &Obj, env: &mut Env) -> Result<Obj, String> {
    uninstall_state(low, env, false)
}

/// `pkg.purged`.
pub fn purged(low: &Obj, env: &mut Env) -> Result<Obj, String> {
    uninstall_state(low, env, true)
}

/// What `removed`/`purged` were asked.
struct Ask<'a> {
    low: &'a Obj,
    purge: bool,
    name: String,
    version: Option<String>,
    pkgs: Option<&'a Value>,
    normalize: bool,
    ignore_epoch: Option<bool>,
}

impl Ask<'_> {
    fn action(&self) -> &'static str {
        if self.purge { "purge" } else { "remove" }
    }
}

/// `removed`/`purged`: `_uninstall`, where a `pkg` function that failed
/// ends the state with its changes and errors.
fn uninstall_state(low: &Obj, env: &mut Env, purge: bool) -> Result<Obj, String> {
    let out = match uninstall(low, env, purge) {
        Err(Stop::Failed(m)) => {
            let verb = if purge { "purging" } else { "removing" };
            failed_call(low, CallError::Failed(m), verb)
        }
        other => other,
    };
    finish(low, out)
}

fn uninstall(low: &Obj, env: &mut Env, purge: bool) -> Step<Obj> {
    if let Some(r) = unported(low, &[AGGREGATE]) {
        return Ok(r);
    }
    let given = |k: &str| low.get(k).filter(|v| !v.is_null());
    let ask = Ask {
        low,
        purge,
        name: name_of(low),
        version: given("version").map(py_str),
        pkgs: given("pkgs").filter(|v| truthy(v)),
        normalize: given("normalize").is_none_or(truthy),
        ignore_epoch: given("ignore_epoch").map(truthy),
    };
    let params = parse_targets(&ask, env)?;
    let mut targets = match find_remove_targets(&ask, env)? {
        Ok(targets) => targets,
        Err(_) if purge => Vec::new(),
        Err(done) => return Ok(done),
    };
    if purge {
        let removed = list_pkgs(env, &[("removed", json!(true))])?;
        targets.extend(
            names(&params)
                .into_iter()
                .filter(|x| removed.contains_key(x)),
        );
    }
    targets.sort();
    if targets.is_empty() {
        let partly = if purge { " or partially installed" } else { "" };
        let comment = format!("None of the targeted packages are installed{partly}");
        return Ok(ret(low, json!(true), &comment));
    }
    let action = ask.action();
    if env.test {
        let changes: serde_json::Map<String, Value> = targets
            .iter()
            .map(|x| (x.clone(), json!({"new": format!("{action}d"), "old": ""})))
            .collect();
        let comment = format!(
            "The following packages will be {action}d: {}.",
            targets.join(", ")
        );
        return Ok(changed(low, Value::Null, &comment, Value::Object(changes)));
    }
    let mut kw = vec![
        ("pkgs", ask.pkgs.cloned().unwrap_or(Value::Null)),
        ("version", json!(ask.version)),
        ("split_arch", json!(false)),
    ];
    kw.extend(passed_on(low, NAMED));
    let changes = pkg(env, action, &[json!(ask.name)], &kw)?;
    let failed = still_there(&ask, env, &params)?;
    if !failed.is_empty() {
        let comment = format!(
            "The following packages failed to {action}: {}.",
            failed.join(", ")
        );
        return Ok(changed(low, json!(false), &comment, changes));
    }
    let mut not_installed: Vec<String> = names(&params)
        .into_iter()
        .filter(|x| !targets.contains(x))
        .collect();
    not_installed.sort();
    let comment = if not_installed.is_empty() {
        format!("All targeted packages were {action}d.")
    } else {
        format!(
            "The following packages were not installed: {} The following packages were {action}d: {}.",
            not_installed.join(", "),
            targets.join(", ")
        )
    };
    Ok(changed(low, json!(true), &comment, changes))
}

/// `pkg_resource.parse_targets`: `pkgs=`, else the comma-separated names
/// with `version`, each normalized when asked.
fn parse_targets(ask: &Ask, env: &mut Env) -> Step<Wanted> {
    if let Some(pkgs) = ask.pkgs {
        return repack(env, pkgs, ask.normalize);
    }
    let mut params = Wanted::new();
    if ask.name.is_empty() {
        return Ok(params);
    }
    for name in ask.name.split(',') {
        let name = if ask.normalize {
            normalize_name(env, name)?
        } else {
            name.to_string()
        };
        upsert(&mut params, name, ask.version.clone());
    }
    Ok(params)
}

/// `_find_remove_targets`: the packages installed (at a version that
/// meets `version`, when given), or Salt's return when there are none.
/// Unlike `parse_targets`, a lone `name` is one package, normalized
/// whatever `normalize` says.
fn find_remove_targets(ask: &Ask, env: &mut Env) -> Step<Result<Vec<String>, Obj>> {
    let cur = list_pkgs(env, &[])?;
    let to_remove = match ask.pkgs {
        Some(pkgs) => {
            let to_remove = repack(env, pkgs, ask.normalize)?;
            if to_remove.is_empty() {
                let comment = "Invalidly formatted pkgs parameter. See minion log.";
                return Ok(Err(ret(ask.low, json!(false), comment)));
            }
            to_remove
        }
        None => vec![(normalize_name(env, &ask.name)?, ask.version.clone())],
    };
    let (mut targets, mut problems) = (Vec::new(), Vec::new());
    let mut version_spec = false;
    for (name, version) in to_remove {
        let cver = versions_of(&cur, &name);
        if cver.is_empty() {
            continue;
        }
        let Some(version) = version else {
            targets.push(name);
            continue;
        };
        version_spec = true;
        match fulfills(env, &cver, &version, ask.ignore_epoch, false) {
            Ok(true) => targets.push(name),
            Ok(false) => {}
            Err(CallError::Failed(m)) => problems.push(m),
            Err(e) => return Err(e.into()),
        }
    }
    if !problems.is_empty() {
        return Ok(Err(ret(ask.low, json!(false), &problems.join(" "))));
    }
    if targets.is_empty() {
        let matching = if version_spec {
            " (matching specified versions)"
        } else {
            ""
        };
        let comment = format!("All specified packages{matching} are already absent");
        return Ok(Err(ret(ask.low, json!(true), &comment)));
    }
    Ok(Ok(targets))
}

/// What is still installed (or, purging, still removed with its
/// configuration) of what was asked. Where Salt's `os_family` is RedHat,
/// Suse or Windows, a package counts only at the version asked.
fn still_there(ask: &Ask, env: &mut Env, params: &Wanted) -> Step<Vec<String>> {
    let new = list_pkgs(env, &[])?;
    let by_version = env
        .grains
        .get("os_family")
        .and_then(Value::as_str)
        .is_some_and(|f| matches!(f, "Suse" | "RedHat" | "Windows"));
    let mut failed = Vec::new();
    for (param, version) in params {
        if !new.contains_key(param) {
            continue;
        }
        match version.as_deref().filter(|_| by_version) {
            _ if !by_version => failed.push(param.clone()),
            None | Some("") => failed.push(param.clone()),
            Some(v) if versions_of(&new, param).iter().any(|x| x == v) => {
                failed.push(format!("{param}-{v}"));
            }
            Some(_) => {}
        }
    }
    if ask.purge {
        let removed = list_pkgs(env, &[("removed", json!(true))])?;
        failed.extend(
            names(params)
                .into_iter()
                .filter(|x| removed.contains_key(x)),
        );
    }
    failed.sort();
    Ok(failed)
}
