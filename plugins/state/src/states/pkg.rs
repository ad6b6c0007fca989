//! Salt's `pkg` states: `installed` ([`installed`]), `latest`
//! ([`latest`]), `removed` and `purged` ([`removed`]), and their
//! `mod_watch`, over the `pkg` module's functions (`pkg.list_pkgs`,
//! `pkg.install`, `pkg.remove`, ...). A package's scripts run as root, so
//! a state installs or removes only what `[plugins.pkg]` lets `pkg.install`
//! and `pkg.remove` do; a refused call fails the state `Denied:` with
//! nothing changed.
//!
//! What the states share is here: reading `pkgs=`, Salt's version
//! conditions (`>=1.0,<2.0`, compared by `pkg.version_cmp`), the refresh
//! flag `mod_init` sets, the keywords handed on to the module, the
//! versions predicted under `test=True`, and `pkg`'s failures.

mod installed;
mod latest;
mod removed;

use std::sync::OnceLock;

use maid_sdk::salt::{fnmatch, is_true};
use regex::Regex;
use serde_json::{Map, Value, json};

use super::{CallError, Env, Step, Stop, finish, ret, salt};
use crate::compile::Obj;
use crate::py::{py_str, repr, truthy};

pub use installed::installed;
pub use latest::latest;
pub use removed::{purged, removed};

/// Packages and the version asked of each, in order (Salt's dicts).
type Wanted = Vec<(String, Option<String>)>;

/// `pkg.list_pkgs(versions_as_list=True)`: name -> versions.
type Installed = Map<String, Value>;

/// A return with `changes`.
fn changed(low: &Obj, result: Value, comment: &str, changes: Value) -> Obj {
    let mut r = ret(low, result, comment);
    r.insert("changes".into(), changes);
    r
}

/// `__salt__["pkg.FUN"](*args, **kwargs)`.
fn pkg(
    env: &mut Env,
    fun: &str,
    args: &[Value],
    kwargs: &[(&str, Value)],
) -> Result<Value, CallError> {
    salt(env, &format!("pkg.{fun}"), args, kwargs)
}

/// Names as positional arguments.
fn args(names: &[String]) -> Vec<Value> {
    names.iter().map(|n| json!(n)).collect()
}

/// `pkg.list_pkgs(versions_as_list=True, **extra)`.
fn list_pkgs(env: &mut Env, extra: &[(&str, Value)]) -> Result<Installed, CallError> {
    let mut kw = vec![("versions_as_list", json!(true))];
    kw.extend(extra.iter().cloned());
    Ok(match pkg(env, "list_pkgs", &[], &kw)? {
        Value::Object(m) => m,
        _ => Map::new(),
    })
}

/// The versions `installed` lists for `name` (none when it is not).
fn versions_of(installed: &Installed, name: &str) -> Vec<String> {
    match installed.get(name) {
        Some(Value::Array(a)) => a.iter().map(py_str).collect(),
        Some(v) if truthy(v) => vec![py_str(v)],
        _ => Vec::new(),
    }
}

/// `pkg.normalize_name(name)`. Only a name with an architecture suffix
/// (apt's `:arch`, dnf's `.arch`) can change, so no other is asked.
fn normalize_name(env: &mut Env, name: &str) -> Result<String, CallError> {
    if !name.contains([':', '.']) {
        return Ok(name.to_string());
    }
    Ok(py_str(&pkg(env, "normalize_name", &[json!(name)], &[])?))
}

/// Set `name`'s version, where a dict keeps a name given twice: its first
/// place, its last value.
fn upsert(list: &mut Wanted, name: String, version: Option<String>) {
    match list.iter_mut().find(|(n, _)| *n == name) {
        Some(entry) => entry.1 = version,
        None => list.push((name, version)),
    }
}

/// The version asked of `name` in `list`.
fn wanted<'a>(list: &'a Wanted, name: &str) -> Option<&'a str> {
    list.iter()
        .find(|(n, _)| n == name)
        .and_then(|(_, v)| v.as_deref())
}

/// The names of `list`.
fn names(list: &Wanted) -> Vec<String> {
    list.iter().map(|(n, _)| n.clone()).collect()
}

/// Salt's `repack_dictlist`: names (strings, numbers) and one-entry
/// dicts, or nothing when an element is neither.
fn repack_dictlist(list: &[Value]) -> Wanted {
    let mut out = Wanted::new();
    for element in list {
        match element {
            Value::String(_) | Value::Number(_) | Value::Bool(_) => {
                upsert(&mut out, py_str(element), None);
            }
            Value::Object(o) if o.len() == 1 => {
                for (k, v) in o {
                    upsert(&mut out, k.clone(), (!v.is_null()).then(|| py_str(v)));
                }
            }
            _ => return Wanted::new(),
        }
    }
    out
}

/// Salt's `_repack_pkgs`: `pkgs=` as names and versions, each name
/// normalized when asked; empty when `pkgs` cannot be read. Fewer names
/// than entries (a name twice, or a list Salt cannot read) is Salt's
/// `SaltInvocationError`.
fn repack(env: &mut Env, pkgs: &Value, normalize: bool) -> Step<Wanted> {
    let (list, given) = match pkgs {
        Value::Array(a) => (repack_dictlist(a), a.len()),
        Value::Object(o) => (Wanted::new(), o.len()),
        Value::String(s) => (Wanted::new(), s.chars().count()),
        _ => (Wanted::new(), 0),
    };
    let mut out = Wanted::new();
    for (name, version) in list {
        let name = if normalize {
            normalize_name(env, &name)?
        } else {
            name
        };
        upsert(&mut out, name, version);
    }
    if out.len() != given {
        return Err(Stop::Raised(format!(
            "You are passing a list of packages that contains duplicated packages names: {}. \
             This cannot be processed. In case you are targeting different versions of the \
             same package, please target them individually",
            repr(pkgs)
        )));
    }
    Ok(out)
}

/// Salt's `split_comparison`: the operator ("" when none) and the version.
fn split_comparison(version: &str) -> (String, String) {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(r"^(<=>|!=|>=|<=|>>|<<|<>|>|<|=)?\s?([^<>=]+)$").expect("a valid pattern")
    });
    match re.captures(version) {
        Some(c) => (
            c.get(1).map_or("", |m| m.as_str()).to_string(),
            c[2].to_string(),
        ),
        None => (String::new(), version.to_string()),
    }
}

/// `_parse_version_string`: each comma-separated condition as (operator,
/// version), `=` and none being `==`.
fn conditions(text: &str) -> Vec<(String, String)> {
    let text = text.trim();
    if text.is_empty() {
        return Vec::new();
    }
    text.split(',')
        .map(|c| {
            let (oper, version) = split_comparison(c.trim());
            let oper = if oper.is_empty() || oper == "=" {
                "==".to_string()
            } else {
                oper
            };
            (oper, version)
        })
        .collect()
}

/// `salt.utils.versions.compare` with `pkg.version_cmp`.
fn compare(
    env: &mut Env,
    ver1: &str,
    oper: &str,
    ver2: &str,
    ignore_epoch: bool,
) -> Result<bool, CallError> {
    let accepted: &[i64] = match oper {
        "<" => &[-1],
        "<=" => &[-1, 0],
        "==" => &[0],
        ">=" => &[0, 1],
        ">" => &[1],
        "!=" => &[],
        _ => return Ok(false),
    };
    let kw = [("ignore_epoch", json!(ignore_epoch))];
    let cmp = pkg(env, "version_cmp", &[json!(ver1), json!(ver2)], &kw)?;
    let Some(cmp) = cmp.as_i64() else {
        return Ok(false);
    };
    if oper == "!=" {
        return Ok(cmp != 0);
    }
    Ok(accepted.contains(&cmp.clamp(-1, 1)))
}

/// `_fulfills_version_spec` for one installed version: a glob match for
/// `==`, else the comparison, the epoch ignored as `_check_ignore_epoch`
/// says when the state does not.
fn fulfills_spec(
    env: &mut Env,
    version: &str,
    oper: &str,
    want: &str,
    ignore_epoch: Option<bool>,
) -> Result<bool, CallError> {
    if oper == "==" && fnmatch(version, want) {
        return Ok(true);
    }
    let ignore =
        ignore_epoch.unwrap_or(!oper.contains('<') && !oper.contains('>') && !want.contains(':'));
    compare(env, version, oper, want, ignore)
}

/// `_fulfills_version_string`: whether one of the installed versions
/// meets every condition (with `allow_updates`, a lone `==` is `>=`).
fn fulfills(
    env: &mut Env,
    installed: &[String],
    wanted: &str,
    ignore_epoch: Option<bool>,
    allow_updates: bool,
) -> Result<bool, CallError> {
    let conditions = conditions(wanted);
    for version in installed {
        let mut all = true;
        for (oper, want) in &conditions {
            let oper = if allow_updates && conditions.len() == 1 && oper == "==" {
                ">="
            } else {
                oper
            };
            all = all && fulfills_spec(env, version, oper, want, ignore_epoch)?;
        }
        if all {
            return Ok(true);
        }
    }
    Ok(false)
}

/// `_get_desired_pkg`: `name=version` (`name>=version` for a condition).
fn desired_pkg(name: &str, version: Option<&str>) -> String {
    match version.filter(|v| !v.is_empty()) {
        None => name.to_string(),
        Some(v) if v.starts_with(['<', '>', '=']) => format!("{name}{v}"),
        Some(v) => format!("{name}={v}"),
    }
}

/// `_get_installable_versions`: the change each target would make under
/// `test=True`, `new` being the version the repositories would give
/// (`pkg.latest_version` for a target without a version,
/// `pkg.list_repo_pkgs name=version` for one with) or "installed", `old`
/// what `current` says.
///
/// Salt binds its changes and the versions found to one dict, and binds
/// the versions anew only when some target has no version: without one,
/// whatever `list_repo_pkgs` names lands in the changes themselves.
fn installable_versions(
    env: &mut Env,
    targets: &Wanted,
    current: Option<&Map<String, Value>>,
) -> Result<Map<String, Value>, CallError> {
    let latest: Vec<String> = targets
        .iter()
        .filter(|(_, v)| v.as_deref().is_none_or(str::is_empty))
        .map(|(n, _)| n.clone())
        .collect();
    let mut changes = Map::new();
    let mut found: Option<Map<String, Value>> = None;
    if !latest.is_empty() {
        // Asked without `refresh`, `latest_version` refreshes (and so
        // clears the rtag).
        env.pkg_refresh = false;
        found = match pkg(env, "latest_version", &args(&latest), &[])? {
            Value::String(s) => Some([(latest[0].clone(), json!(s))].into_iter().collect()),
            Value::Object(o) => Some(o),
            _ => None,
        };
    }
    let explicit: Vec<String> = targets
        .iter()
        .filter(|(n, _)| !latest.contains(n))
        .map(|(n, v)| desired_pkg(n, v.as_deref()))
        .collect();
    if !explicit.is_empty() {
        // dnf has no list_repo_pkgs yet: its versions stay unknown.
        let repo = match pkg(env, "list_repo_pkgs", &args(&explicit), &[]) {
            Err(CallError::Failed(_)) => Value::Null,
            other => other?,
        };
        for (name, versions) in repo.as_object().into_iter().flatten() {
            if let Some(first) = versions.as_array().and_then(|a| a.first()) {
                found
                    .as_mut()
                    .unwrap_or(&mut changes)
                    .insert(name.clone(), first.clone());
            }
        }
    }
    let mut update = Vec::new();
    for (name, _) in targets {
        let from = found.as_ref().unwrap_or(&changes);
        let new = from.get(name).filter(|v| truthy(v)).cloned();
        let old = current.and_then(|c| c.get(name)).cloned();
        update.push((
            name.clone(),
            json!({"new": new.unwrap_or(json!("installed")), "old": old.unwrap_or(json!(""))}),
        ));
    }
    changes.extend(update);
    Ok(changes)
}

/// `salt.utils.pkg.check_refresh`: refresh when asked to, or when the
/// run's rtag is set and `refresh` is not `False`.
fn check_refresh(env: &Env, refresh: Option<&Value>) -> bool {
    refresh.is_some_and(is_true) || (env.pkg_refresh && refresh != Some(&Value::Bool(false)))
}

/// `pkg.mod_init`, at a run's first `pkg` chunk (again at the next while
/// it says no): an `installed` or `latest` sets the rtag, so that the
/// first of the run's pkg states that does not say `refresh` refreshes
/// the package lists, and the refresh clears it.
pub fn mod_init(low: &Obj, env: &mut Env) -> bool {
    let fun = low.get("fun").map(py_str).unwrap_or_default();
    let sets = fun == "installed" || fun == "latest";
    if sets {
        env.pkg_refresh = true;
    }
    sets
}

/// The keywords Salt's engine keeps for itself (`STATE_INTERNAL_KEYWORDS`,
/// whose dunder ones are left out by their `__`), and `mod_watch`'s
/// `sfun`.
const INTERNAL: &[&str] = &[
    "onfail",
    "onfail_any",
    "onfail_all",
    "onfail_stop",
    "require",
    "require_any",
    "onchanges",
    "onchanges_any",
    "watch",
    "watch_any",
    "prereq",
    "prerequired",
    "listen",
    "onchanges_in",
    "onfail_in",
    "prereq_in",
    "watch_in",
    "require_in",
    "listen_in",
    "fun",
    "state",
    "check_cmd",
    "cmd_opts_exclude",
    "failhard",
    "onlyif",
    "unless",
    "creates",
    "retry",
    "order",
    "parallel",
    "reload_modules",
    "reload_grains",
    "reload_pillar",
    "runas",
    "runas_password",
    "no_log",
    "fire_event",
    "saltenv",
    "umask",
    "use",
    "use_in",
    "sfun",
];

/// The chunk's other keywords, which Salt's pkg states hand on to the
/// `pkg` functions (their `**kwargs`): those the state function does not
/// name (`named`) and the engine does not keep.
fn passed_on<'a>(low: &'a Obj, named: &[&str]) -> Vec<(&'a str, Value)> {
    low.iter()
        .filter(|(k, _)| {
            !named.contains(&k.as_str()) && !INTERNAL.contains(&k.as_str()) && !k.starts_with("__")
        })
        .map(|(k, v)| (k.as_str(), v.clone()))
        .collect()
}

/// An option of Salt's pkg states that is not ported, and what it lacks.
type Unported = (&'static str, &'static str);

/// `aggregate`: Salt's `pkg.mod_aggregate`, which no state has here.
const AGGREGATE: Unported = ("aggregate", "pkg.mod_aggregate");

/// The state's failure when it is given an option it cannot honour
/// (`hold` counts when given at all, as Salt reads it; the others when
/// true), rather than doing less than asked.
fn unported(low: &Obj, options: &[Unported]) -> Option<Obj> {
    let (option, lacks) = options.iter().find(|(option, _)| match low.get(*option) {
        Some(v) => *option == "hold" || truthy(v),
        None => false,
    })?;
    Some(ret(
        low,
        json!(false),
        &format!("The '{option}' option is not supported: {lacks} not implemented"),
    ))
}

/// A `pkg` failure that carries the changes made before it (Salt's
/// `CommandExecutionError` with `info`, as the pkg plugin words it): its
/// text without them (`strerror_without_changes`) and the changes.
fn with_info(message: &str) -> Option<(String, Value)> {
    let (text, changes) = message.rsplit_once("\nchanges:\n    ")?;
    if !text.contains(". Additional info follows:\n\n") {
        return None;
    }
    let changes = serde_json::from_str(changes).ok()?;
    Some((text.to_string(), changes))
}

/// `str(exc)` of a `pkg` failure: with its changes, as Salt's `nested`
/// outputter shows them, ahead of the errors.
fn exc_str(message: &str) -> String {
    const INFO: &str = "Additional info follows:\n\n";
    let Some((text, changes)) = with_info(message) else {
        return message.to_string();
    };
    let Some((head, errors)) = text.split_once(INFO) else {
        return message.to_string();
    };
    let changes = maid_salt::output::nested(&json!({ "changes": changes }));
    format!("{head}{INFO}{changes}\n{errors}")
}

/// How a state that called `pkg.install`, `remove` or `purge` ends when
/// that failed (`verb`: "installing", ...): the changes it made and its
/// errors, or Salt's words around its message.
fn failed_call(low: &Obj, e: CallError, verb: &str) -> Step<Obj> {
    let message = match e {
        CallError::Denied(m) => return Err(Stop::Denied(m)),
        CallError::Failed(m) => m,
    };
    Ok(match with_info(&message) {
        Some((text, changes)) => changed(low, json!(false), &text, changes),
        None => ret(
            low,
            json!(false),
            &format!("An error was encountered while {verb} package(s): {message}"),
        ),
    })
}

/// `pkg.mod_watch`: a watched `installed`, `latest`, `removed` or
/// `purged` runs again.
pub fn mod_watch(low: &Obj, env: &mut Env) -> Result<Obj, String> {
    let sfun = low.get("sfun").map_or("None".to_string(), py_str);
    match sfun.as_str() {
        "installed" => installed(low, env),
        "latest" => latest(low, env),
        "removed" => removed(low, env),
        "purged" => purged(low, env),
        _ => Ok(ret(
            low,
            json!(false),
            &format!("pkg.{sfun} does not work with the watch requisite"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_as_salt_reads_them() {
        assert_eq!(
            conditions(">=1.0-1, <2.0"),
            [
                (">=".to_string(), "1.0-1".to_string()),
                ("<".to_string(), "2.0".to_string())
            ]
        );
        assert_eq!(
            conditions("=1:2.0"),
            [("==".to_string(), "1:2.0".to_string())]
        );
        assert!(conditions(" ").is_empty());
        assert_eq!(split_comparison("<=>1.0"), ("<=>".into(), "1.0".into()));
        assert_eq!(desired_pkg("a", Some("1.0")), "a=1.0");
        assert_eq!(desired_pkg("a", Some(">=1.0")), "a>=1.0");
        assert_eq!(desired_pkg("a", None), "a");
    }

    #[test]
    fn a_failure_with_changes_reads_as_salts() {
        let message = "Problem encountered installing package(s). Additional info follows:\n\n\
                       errors:\n    - E: one\n      two\nchanges:\n    {\"a\":{\"new\":\"1\",\"old\":\"\"}}";
        let (text, changes) = with_info(message).unwrap();
        assert!(text.ends_with("errors:\n    - E: one\n      two"));
        assert_eq!(changes, json!({"a": {"new": "1", "old": ""}}));
        assert_eq!(
            exc_str(message),
            "Problem encountered installing package(s). Additional info follows:\n\n\
             changes:\n    ----------\n    a:\n        ----------\n        new:\n            1\n        old:\n\
             errors:\n    - E: one\n      two"
        );
        assert_eq!(exc_str("plain"), "plain");
    }
}
