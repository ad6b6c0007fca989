//! `pkg.installed`: Salt's `installed`, with `_find_install_targets`
//! deciding what to install and `_verify_install` reading what was.

use serde_json::{Map, Value, json};

use super::{
    AGGREGATE, Installed, Step, Wanted, changed, check_refresh, desired_pkg, failed_call, finish,
    fulfills, installable_versions, list_pkgs, names, normalize_name, passed_on, pkg, repack,
    unported, upsert, versions_of, wanted,
};
use crate::compile::Obj;
use crate::py::{first_key, py_str, truthy};
use crate::states::{CallError, Env, name_of, ret};

/// The arguments `installed` names; the chunk's others go on to the
/// `pkg` functions.
const NAMED: &[&str] = &[
    "name",
    "version",
    "refresh",
    "fromrepo",
    "skip_verify",
    "skip_suggestions",
    "pkgs",
    "sources",
    "allow_updates",
    "pkg_verify",
    "normalize",
    "ignore_epoch",
    "reinstall",
    "update_holds",
];

/// What `installed` was asked, read as Salt's reads it.
struct Ask<'a> {
    low: &'a Obj,
    name: String,
    /// `version=` beside `pkgs=`/`sources=` (a lone name's goes into
    /// `pkgs`).
    version: Option<String>,
    pkgs: Option<Value>,
    sources: Option<&'a Value>,
    refresh: bool,
    normalize: bool,
    ignore_epoch: Option<bool>,
    reinstall: bool,
    allow_updates: bool,
    /// `fromrepo` and the keywords handed on.
    extra: Vec<(&'a str, Value)>,
}

/// What `_find_install_targets` found to do.
struct Found {
    desired: Wanted,
    targets: Wanted,
    to_unpurge: Vec<String>,
    to_reinstall: Wanted,
    sources: bool,
}

/// `pkg.installed`.
pub fn installed(low: &Obj, env: &mut Env) -> Result<Obj, String> {
    finish(low, run(low, env))
}

fn run(low: &Obj, env: &mut Env) -> Step<Obj> {
    let unported_options = [
        ("hold", "pkg.hold"),
        ("update_holds", "pkg.unhold"),
        ("resolve_capabilities", "pkg.resolve_capabilities"),
        AGGREGATE,
    ];
    if let Some(r) = unported(low, &unported_options) {
        return Ok(r);
    }
    if matches!(low.get("pkgs"), Some(Value::Array(a)) if a.is_empty()) {
        return Ok(ret(low, json!(true), "No packages to install provided"));
    }
    let mut ask = asked(low, env);
    if matches!(
        low.get("pkg_verify"),
        Some(Value::Bool(true) | Value::Array(_))
    ) {
        return Ok(ret(low, json!(false), "pkg.verify not implemented"));
    }
    let found = match find_targets(&mut ask, env)? {
        Ok(found) => found,
        Err(done) => return Ok(done),
    };
    if !found.to_unpurge.is_empty() {
        return Ok(ret(low, json!(false), "lowpkg.unpurge not implemented"));
    }
    if env.test {
        return predict(low, env, &found);
    }
    install(&ask, env, &found)
}

/// The state's arguments: a lone `name` (with its `version`) becomes
/// `pkgs`, as Salt packs it.
fn asked<'a>(low: &'a Obj, env: &Env) -> Ask<'a> {
    let given = |k: &str| low.get(k).filter(|v| !v.is_null());
    let name = name_of(low);
    let mut version = given("version").cloned();
    let mut pkgs = given("pkgs").cloned();
    let sources = given("sources");
    if !name.is_empty() && !pkgs.as_ref().is_some_and(truthy) && !sources.is_some_and(truthy) {
        pkgs = Some(match version.as_ref().filter(|v| truthy(v)) {
            Some(v) => json!([{ name.clone(): v }]),
            None => json!([name]),
        });
        if version.as_ref().is_some_and(truthy) {
            version = None;
        }
    }
    let mut extra: Vec<(&str, Value)> = given("fromrepo")
        .map(|v| ("fromrepo", v.clone()))
        .into_iter()
        .collect();
    extra.extend(passed_on(low, NAMED));
    Ask {
        low,
        name,
        version: version.as_ref().map(py_str),
        pkgs,
        sources,
        refresh: check_refresh(env, low.get("refresh")),
        normalize: given("normalize").is_none_or(truthy),
        ignore_epoch: given("ignore_epoch").map(truthy),
        reinstall: given("reinstall").is_some_and(truthy),
        allow_updates: given("allow_updates").is_some_and(truthy),
        extra,
    }
}

/// `_find_install_targets`: what to install, or the state's return when
/// there is nothing to (or it cannot tell).
fn find_targets(ask: &mut Ask, env: &mut Env) -> Step<Result<Found, Obj>> {
    let low = ask.low;
    let done = |result: bool, comment: &str| -> Step<Result<Found, Obj>> {
        Ok(Err(ret(low, json!(result), comment)))
    };
    let (pkgs, sources) = (
        ask.pkgs.as_ref().filter(|v| truthy(v)),
        ask.sources.filter(|v| truthy(v)),
    );
    if pkgs.is_some() && sources.is_some() {
        return done(false, "Only one of \"pkgs\" and \"sources\" is permitted.");
    }
    let cur = match list_pkgs(env, &[]) {
        Ok(cur) => cur,
        Err(CallError::Failed(m)) => return done(false, &m),
        Err(e) => return Err(e.into()),
    };
    let mut desired = match (pkgs, sources) {
        (Some(p), _) => repack(env, p, false)?,
        (None, Some(s)) => pack_sources(env, s, ask.normalize)?,
        // Not reached from `installed`, which packs a name into `pkgs`.
        (None, None) if ask.normalize => {
            vec![(normalize_name(env, &ask.name)?, ask.version.clone())]
        }
        (None, None) => vec![(ask.name.clone(), ask.version.clone())],
    };
    if (pkgs.is_some() || sources.is_some()) && desired.is_empty() {
        let what = if pkgs.is_some() { "pkgs" } else { "sources" };
        return done(
            false,
            &format!("Invalidly formatted '{what}' parameter. See minion log."),
        );
    }
    let purge_desired = list_pkgs(env, &[("purge_desired", json!(true))])?;
    let to_unpurge = names(&desired)
        .into_iter()
        .filter(|n| purge_desired.contains_key(n))
        .collect();
    if sources.is_none() {
        resolve_latest(ask, env, &cur, &mut desired)?;
    }
    let mut found = Found {
        desired,
        targets: Wanted::new(),
        to_unpurge,
        to_reinstall: Wanted::new(),
        sources: sources.is_some(),
    };
    match sort_targets(ask, env, &cur, &mut found)? {
        Some(comment) => done(comment.0, &comment.1),
        None => Ok(Ok(found)),
    }
}

/// `pkg_resource.pack_sources`: `{name: source}`, each name normalized
/// when asked; empty when an entry is not a one-entry dict.
fn pack_sources(env: &mut Env, sources: &Value, normalize: bool) -> Step<Wanted> {
    let Value::Array(list) = sources else {
        return Ok(Wanted::new());
    };
    let mut out = Wanted::new();
    for source in list {
        let Some((name, src)) = source
            .as_object()
            .filter(|o| o.len() == 1)
            .and_then(|o| o.iter().next())
        else {
            return Ok(Wanted::new());
        };
        let name = if normalize {
            normalize_name(env, name)?
        } else {
            name.clone()
        };
        upsert(&mut out, name, Some(py_str(src)));
    }
    Ok(out)
}

/// The `latest` versions asked for, as `pkg.latest_version` names them
/// (refreshing first when the state refreshes), or the installed one when
/// that is newest, or none when there is no such package.
fn resolve_latest(ask: &mut Ask, env: &mut Env, cur: &Installed, desired: &mut Wanted) -> Step<()> {
    let wants: Vec<String> = desired
        .iter()
        .filter(|(_, v)| v.as_deref() == Some("latest"))
        .map(|(n, _)| n.clone())
        .collect();
    if wants.is_empty() {
        return Ok(());
    }
    let mut kw = vec![("refresh", json!(ask.refresh))];
    kw.extend(ask.extra.iter().cloned());
    let args: Vec<Value> = wants.iter().map(|w| json!(w)).collect();
    let got = pkg(env, "latest_version", &args, &kw)?;
    let resolved: Map<String, Value> = match got {
        Value::Object(o) if wants.len() > 1 => o,
        one if wants.len() == 1 => [(wants[0].clone(), one)].into_iter().collect(),
        _ => Map::new(),
    };
    if ask.refresh {
        ask.refresh = false;
        env.pkg_refresh = false;
    }
    for (name, version) in resolved {
        let version = if truthy(&version) {
            Some(py_str(&version))
        } else {
            versions_of(cur, &name).last().cloned()
        };
        upsert(desired, name, version);
    }
    Ok(())
}

/// `_find_install_targets`' sorting of what is desired into targets (not
/// installed, or at another version) and reinstalls; Salt's return (result,
/// comment) when that leaves nothing to do or a comparison failed.
fn sort_targets(
    ask: &Ask,
    env: &mut Env,
    cur: &Installed,
    found: &mut Found,
) -> Step<Option<(bool, String)>> {
    let mut problems = Vec::new();
    let mut version_spec = false;
    for (name, version) in &found.desired {
        let mut cver = versions_of(cur, name);
        if cver.is_empty() {
            let normalized = normalize_name(env, name)?;
            if normalized != *name {
                cver = versions_of(cur, &normalized);
            }
        }
        let entry = (name.clone(), version.clone());
        if cver.is_empty() {
            found.targets.push(entry);
            continue;
        }
        if ask.reinstall {
            found.to_reinstall.push(entry);
            continue;
        }
        // An installed package from `sources=`: maid has no
        // `lowpkg.bin_pkg_info`, so, as Salt then does, it is left be.
        let Some(version) = version.as_deref().filter(|_| !found.sources) else {
            continue;
        };
        match fulfills(env, &cver, version, ask.ignore_epoch, ask.allow_updates) {
            Ok(ok) => {
                version_spec = true;
                if !ok {
                    found.targets.push(entry);
                }
            }
            Err(CallError::Failed(m)) => problems.push(m),
            Err(e) => return Err(e.into()),
        }
    }
    if !problems.is_empty() {
        return Ok(Some((false, problems.join(" "))));
    }
    if found.targets.is_empty() && found.to_unpurge.is_empty() && found.to_reinstall.is_empty() {
        let at = if version_spec && !found.sources {
            " and are at the desired version"
        } else {
            ""
        };
        return Ok(Some((
            true,
            format!("All specified packages are already installed{at}"),
        )));
    }
    Ok(None)
}

/// Under `test=True`: what would be installed or reinstalled, and the
/// versions the repositories would give.
fn predict(low: &Obj, env: &mut Env, found: &Found) -> Step<Obj> {
    let mut comment = Vec::new();
    let mut changes = Map::new();
    if !found.targets.is_empty() {
        if found.sources {
            for (name, _) in &found.targets {
                changes.insert(name.clone(), json!({"new": "installed", "old": ""}));
            }
        } else {
            changes.extend(installable_versions(env, &found.targets, None)?);
        }
        comment.push(format!(
            "The following packages would be installed/updated: {}",
            names(&found.targets).join(", ")
        ));
    }
    if !found.to_reinstall.is_empty() {
        let mut reinstall = Vec::new();
        for (name, version) in &found.to_reinstall {
            reinstall.push(if found.sources {
                name.clone()
            } else {
                desired_pkg(name, version.as_deref())
            });
            for x in &reinstall {
                changes.insert(x.clone(), json!({"new": "installed", "old": ""}));
            }
        }
        comment.push(format!(
            "The following packages would be reinstalled: {}",
            reinstall.join(", ")
        ));
    }
    Ok(changed(
        low,
        Value::Null,
        &comment.join("\n"),
        Value::Object(changes),
    ))
}

/// `pkgs`/`sources` narrowed to the targets and reinstalls, in that order.
fn narrowed(ask: &Ask, found: &Found) -> (Value, Value) {
    let listed = |list: &Wanted| -> Vec<Value> {
        list.iter()
            .map(|(n, v)| json!({ n.clone(): v.clone() }))
            .collect()
    };
    if ask.pkgs.as_ref().is_some_and(truthy) {
        let mut pkgs = listed(&found.targets);
        pkgs.extend(listed(&found.to_reinstall));
        return (Value::Array(pkgs), Value::Null);
    }
    let Some(Value::Array(old)) = ask.sources.filter(|v| truthy(v)) else {
        return (Value::Null, Value::Null);
    };
    let key = |x: &Value| x.as_object().and_then(first_key).unwrap_or_default();
    let mut sources: Vec<Value> = Vec::new();
    for list in [&found.targets, &found.to_reinstall] {
        let names = names(list);
        sources.extend(old.iter().filter(|x| names.contains(&key(x))).cloned());
    }
    (Value::Null, Value::Array(sources))
}

/// `pkg.install` with the targets, then what it did, as Salt reads it.
fn install(ask: &Ask, env: &mut Env, found: &Found) -> Step<Obj> {
    let low = ask.low;
    let (pkgs, sources) = narrowed(ask, found);
    let given = |k: &str| low.get(k).cloned().unwrap_or(Value::Null);
    let mut kw: Vec<(&str, Value)> = vec![
        ("refresh", json!(ask.refresh)),
        ("version", json!(ask.version)),
        ("skip_verify", given("skip_verify")),
        ("pkgs", pkgs),
        ("sources", sources),
        ("reinstall", json!(!found.to_reinstall.is_empty())),
        ("normalize", json!(ask.normalize)),
        ("ignore_epoch", json!(ask.ignore_epoch)),
        ("split_arch", json!(false)),
    ];
    kw.extend(ask.extra.iter().cloned());
    let done = pkg(env, "install", &[], &kw);
    if ask.refresh && !matches!(done, Err(CallError::Denied(_))) {
        env.pkg_refresh = false;
    }
    let mut comment = Vec::new();
    let mut changes = Map::new();
    let pkg_ret = match done {
        Ok(Value::Object(m)) => {
            changes.extend(m.clone());
            m
        }
        Ok(Value::String(s)) => {
            comment.push(s);
            Map::new()
        }
        Ok(_) => Map::new(),
        Err(e) => return failed_call(low, e, "installing"),
    };
    let result = report(ask, env, found, &changes, &mut comment)?;
    let result = reinstalls(ask, found, &pkg_ret, &mut comment) && result;
    Ok(changed(
        low,
        json!(result),
        &comment.join("\n"),
        Value::Object(changes),
    ))
}

/// What was installed, already installed, or failed, as Salt's comment
/// says it; whether nothing failed.
fn report(
    ask: &Ask,
    env: &mut Env,
    found: &Found,
    changes: &Map<String, Value>,
    comment: &mut Vec<String>,
) -> Step<bool> {
    let targets = names(&found.targets);
    let reinstall = names(&found.to_reinstall);
    let (modified, not_modified, failed): (Vec<String>, Vec<String>, Vec<String>) = if found.sources
    {
        let modified: Vec<String> = changes
            .keys()
            .filter(|x| targets.contains(x))
            .cloned()
            .collect();
        let not_modified = names(&found.desired)
            .into_iter()
            .filter(|x| !targets.contains(x) && !reinstall.contains(x))
            .collect();
        let failed = targets
            .iter()
            .filter(|x| !modified.contains(x))
            .cloned()
            .collect();
        (modified, not_modified, failed)
    } else {
        let new = list_pkgs(env, &[])?;
        let (ok, bad) = verify_install(env, &found.desired, &new, ask.ignore_epoch)?;
        let modified = ok.iter().filter(|x| targets.contains(x)).cloned().collect();
        let not_modified = ok
            .into_iter()
            .filter(|x| !targets.contains(x) && !reinstall.contains(x))
            .collect();
        let failed = bad.into_iter().filter(|x| targets.contains(x)).collect();
        (modified, not_modified, failed)
    };
    let summary = |list: &[String]| -> String {
        let shown: Vec<String> = list.iter().map(|x| shown(found, x)).collect();
        shown.join(", ")
    };
    let count = |n: usize| if n > 1 { ("s", "were") } else { ("", "was") };
    if !modified.is_empty() {
        let text = summary(&modified);
        comment.push(if text.chars().count() < 20 {
            format!("The following packages were installed/updated: {text}")
        } else {
            let (s, were) = count(modified.len());
            format!(
                "{} targeted package{s} {were} installed/updated.",
                modified.len()
            )
        });
    }
    if !not_modified.is_empty() {
        comment.push(if not_modified.len() <= 20 {
            format!(
                "The following packages were already installed: {}",
                summary(&not_modified)
            )
        } else {
            let (s, were) = count(not_modified.len());
            format!(
                "{} targeted package{s} {were} already installed",
                not_modified.len()
            )
        });
    }
    if !failed.is_empty() {
        let text = summary(&failed);
        comment.insert(
            0,
            format!("The following packages failed to install/update: {text}"),
        );
    }
    Ok(failed.is_empty())
}

/// A package as Salt's comments name it: with the version asked
/// (`_get_desired_pkg`), or the bare name for `sources=`.
fn shown(found: &Found, name: &str) -> String {
    if found.sources {
        name.to_string()
    } else {
        desired_pkg(name, wanted(&found.desired, name))
    }
}

/// The reinstalls: done when `pkg.install` reports them; whether all were.
fn reinstalls(
    ask: &Ask,
    found: &Found,
    pkg_ret: &Map<String, Value>,
    comment: &mut Vec<String>,
) -> bool {
    let mut all = true;
    let (done, failed): (Vec<&String>, Vec<&String>) = found
        .to_reinstall
        .iter()
        .map(|(n, _)| n)
        .filter(|_| ask.reinstall)
        .partition(|n| pkg_ret.contains_key(*n));
    for name in done {
        comment.push(format!("Package {} was reinstalled.", shown(found, name)));
    }
    for name in failed {
        comment.push(format!(
            "Reinstall was not successful for package {}.",
            shown(found, name)
        ));
        all = false;
    }
    all
}

/// `_verify_install`: which desired packages are now installed as asked
/// (a version `latest`, none, or a glob's prefix counts), which are not.
fn verify_install(
    env: &mut Env,
    desired: &Wanted,
    new: &Installed,
    ignore_epoch: Option<bool>,
) -> Step<(Vec<String>, Vec<String>)> {
    let (mut ok, mut failed) = (Vec::new(), Vec::new());
    for (name, version) in desired {
        let lookup = name.split('=').next().unwrap_or(name);
        let mut cver = versions_of(new, lookup);
        if cver.is_empty() {
            let normalized = normalize_name(env, lookup)?;
            if normalized != lookup {
                cver = versions_of(new, &normalized);
            }
        }
        let good = match version.as_deref() {
            _ if cver.is_empty() => false,
            Some("latest") | None | Some("") => true,
            Some(v) if v.ends_with('*') && cver[0].starts_with(&v[..v.len() - 1]) => true,
            Some(v) => fulfills(env, &cver, v, ignore_epoch, false)?,
        };
        if good {
            ok.push(name.clone());
        } else {
            failed.push(name.clone());
        }
    }
    Ok((ok, failed))
}
