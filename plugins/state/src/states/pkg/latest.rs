//! `pkg.latest`: Salt's `latest`, which installs what `pkg.latest_version`
//! says is newer than what `pkg.version` says is installed.

use serde_json::{Map, Value, json};

use super::{
    AGGREGATE, Step, Stop, Wanted, changed, check_refresh, exc_str, finish, installable_versions,
    names, passed_on, pkg, repack, unported,
};
use crate::compile::Obj;
use crate::py::{py_str, truthy};
use crate::states::{CallError, Env, name_of, ret};

/// The arguments `latest` names; the chunk's others go on to the `pkg`
/// functions.
const NAMED: &[&str] = &[
    "name",
    "refresh",
    "fromrepo",
    "skip_verify",
    "pkgs",
    "watch_flags",
];

/// `pkg.latest`.
pub fn latest(low: &Obj, env: &mut Env) -> Result<Obj, String> {
    finish(low, run(low, env))
}

/// A `pkg` function's answer for one name (text) or several (a dict), as
/// a dict.
fn by_name(answer: Value, names: &[String]) -> Map<String, Value> {
    match answer {
        Value::Object(o) => o,
        Value::String(_) => [(names[0].clone(), answer)].into_iter().collect(),
        _ => Map::new(),
    }
}

fn run(low: &Obj, env: &mut Env) -> Step<Obj> {
    let unported_options = [
        ("resolve_capabilities", "pkg.resolve_capabilities"),
        AGGREGATE,
    ];
    if let Some(r) = unported(low, &unported_options) {
        return Ok(r);
    }
    let refresh = check_refresh(env, low.get("refresh"));
    let fail = |comment: &str| -> Step<Obj> { Ok(ret(low, json!(false), comment)) };
    if low.get("sources").is_some_and(truthy) {
        return fail("The \"sources\" parameter is not supported.");
    }
    let pkgs = low.get("pkgs").filter(|v| truthy(v));
    let desired = match pkgs {
        Some(p) => {
            let desired = names(&repack(env, p, true)?);
            if desired.is_empty() {
                return fail("Invalidly formatted \"pkgs\" parameter. See minion log.");
            }
            desired
        }
        None if matches!(low.get("pkgs"), Some(Value::Array(_))) => {
            return Ok(ret(low, json!(true), "No packages to install provided"));
        }
        None => vec![name_of(low)],
    };
    let extra = passed_on(low, NAMED);
    let fromrepo = low.get("fromrepo").cloned().unwrap_or(Value::Null);
    let mut kw = vec![("fromrepo", fromrepo.clone()), ("refresh", json!(refresh))];
    kw.extend(extra.iter().cloned());
    let avail = match pkg(env, "latest_version", &super::args(&desired), &kw) {
        Ok(v) => by_name(v, &desired),
        Err(CallError::Failed(m)) => {
            return fail(&format!(
                "An error was encountered while checking the newest available version of package(s): {m}"
            ));
        }
        Err(e) => return Err(e.into()),
    };
    if refresh {
        env.pkg_refresh = false;
    }
    let cur = match pkg(env, "version", &super::args(&desired), &extra) {
        Ok(v) => by_name(v, &desired),
        Err(CallError::Failed(m)) => return fail(&m),
        Err(e) => return Err(e.into()),
    };
    let mut targets = Wanted::new();
    let mut problems = Vec::new();
    for name in &desired {
        match avail.get(name).filter(|v| truthy(v)) {
            Some(v) => targets.push((name.clone(), Some(py_str(v)))),
            None if !cur.get(name).is_some_and(truthy) => {
                problems.push(format!("No information found for '{name}'."));
            }
            None => {}
        }
    }
    if !problems.is_empty() {
        return fail(&problems.join(" "));
    }
    if targets.is_empty() {
        return Ok(ret(low, json!(true), &up_to_date_already(&desired)));
    }
    let up_to_date = up_to_date(pkgs, &targets)?;
    if env.test {
        return predict(low, env, &targets, &up_to_date, &cur);
    }
    let mut kw = vec![
        ("refresh", json!(false)),
        ("fromrepo", fromrepo),
        (
            "skip_verify",
            low.get("skip_verify").cloned().unwrap_or(json!(false)),
        ),
        ("pkgs", json!(names(&targets))),
    ];
    kw.extend(extra);
    match pkg(env, "install", &[], &kw) {
        Ok(changes) => Ok(installed(low, &targets, &up_to_date, changes)),
        Err(CallError::Failed(m)) => fail(&format!(
            "An error was encountered while installing package(s): {}",
            exc_str(&m)
        )),
        Err(e) => Err(e.into()),
    }
}

/// Salt's comment when every package is as new as the repositories have.
fn up_to_date_already(desired: &[String]) -> String {
    let mut sorted = desired.to_vec();
    sorted.sort();
    match desired.len() {
        n if n > 10 => format!("All {n} packages are up-to-date."),
        n if n > 1 => format!("All packages are up-to-date ({}).", sorted.join(", ")),
        _ => format!("Package {} is already up-to-date", desired[0]),
    }
}

/// The entries of `pkgs=` that are not targets. Salt looks each entry up
/// among the targets as it is, so one given as a dict raises.
fn up_to_date(pkgs: Option<&Value>, targets: &Wanted) -> Step<Vec<String>> {
    let Some(Value::Array(pkgs)) = pkgs else {
        return Ok(Vec::new());
    };
    let targets = names(targets);
    let mut out = Vec::new();
    for entry in pkgs {
        if entry.is_object() || entry.is_array() {
            let kind = if entry.is_object() { "dict" } else { "list" };
            return Err(Stop::Raised(format!("unhashable type: '{kind}'")));
        }
        let name = py_str(entry);
        if !targets.contains(&name) {
            out.push(name);
        }
    }
    out.sort();
    Ok(out)
}

/// Under `test=True`: what would be installed or upgraded, to which
/// version, and what is up to date already.
fn predict(
    low: &Obj,
    env: &mut Env,
    targets: &Wanted,
    up_to_date: &[String],
    cur: &Map<String, Value>,
) -> Step<Obj> {
    let mut sorted = names(targets);
    sorted.sort();
    let mut comments = vec![format!(
        "The following packages would be installed/upgraded: {}",
        sorted.join(", ")
    )];
    if up_to_date.len() > 10 {
        comments.push(format!(
            "{} packages are already up-to-date",
            up_to_date.len()
        ));
    } else if !up_to_date.is_empty() {
        let mut shown = Vec::new();
        for name in up_to_date {
            let Some(version) = cur.get(name) else {
                return Err(Stop::Raised(format!("'{name}'")));
            };
            shown.push(format!("{name} ({})", py_str(version)));
        }
        comments.push(format!(
            "The following packages are already up-to-date: {}",
            shown.join(", ")
        ));
    }
    let changes = installable_versions(env, targets, Some(cur))?;
    Ok(changed(
        low,
        Value::Null,
        &comments.join("\n"),
        Value::Object(changes),
    ))
}

/// What `pkg.install` did, as Salt reads it: a target failed when the
/// changes lack it or name another version.
fn installed(low: &Obj, targets: &Wanted, up_to_date: &[String], changes: Value) -> Obj {
    let mut sorted = names(targets);
    sorted.sort();
    if !truthy(&changes) {
        let mut comment = match sorted.len() {
            n if n > 10 => {
                format!("{n} targeted packages failed to update. See debug log for details.")
            }
            n if n > 1 => format!(
                "The following targeted packages failed to update. See debug log for details: ({}).",
                sorted.join(", ")
            ),
            _ => format!("Package {} failed to update.", names(targets)[0]),
        };
        if up_to_date.len() > 10 {
            comment += &format!("{} packages were already up-to-date", up_to_date.len());
        } else if !up_to_date.is_empty() {
            comment += &format!(
                " The following packages were already up-to-date: {}",
                up_to_date.join(", ")
            );
        }
        return changed(low, json!(false), &comment, changes);
    }
    let failed: Vec<&String> = sorted
        .iter()
        .filter(|name| {
            let want = targets
                .iter()
                .find(|(n, _)| n == *name)
                .and_then(|(_, v)| v.clone())
                .unwrap_or_default();
            match changes.get(name.as_str()) {
                Some(c) if truthy(c) => match c.get("new").filter(|n| !n.is_null()) {
                    Some(new) => !py_str(new).split(',').any(|v| v == want) && want != "latest",
                    None => false,
                },
                _ => true,
            }
        })
        .collect();
    let successful: Vec<&String> = sorted.iter().filter(|n| !failed.contains(n)).collect();
    let join = |list: &[&String]| {
        list.iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut comments = Vec::new();
    if !failed.is_empty() {
        comments.push(format!(
            "The following packages failed to update: {}",
            join(&failed)
        ));
    }
    if !successful.is_empty() {
        comments.push(format!(
            "The following packages were successfully installed/upgraded: {}",
            join(&successful)
        ));
    }
    if up_to_date.len() > 10 {
        comments.push(format!(
            "{} packages were already up-to-date ",
            up_to_date.len()
        ));
    } else if !up_to_date.is_empty() {
        comments.push(format!(
            "The following packages were already up-to-date: {}",
            up_to_date.join(", ")
        ));
    }
    changed(low, json!(failed.is_empty()), &comments.join(" "), changes)
}
