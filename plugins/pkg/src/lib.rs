//! Salt's `pkg` module with Salt's names, arguments and shapes, over the
//! package manager this host has: Salt's `aptpkg` (dpkg and apt, in
//! `apt.rs`) or, where the `os_family` grain is `RedHat`, its `yumpkg` on
//! dnf (`dnf.rs`). Each is a `Backend`, the trait below, chosen once by
//! that grain. What is the same for both lives here and is written once
//! against the trait: the Salt-facing functions and their arguments, the
//! shapes `list_pkgs` and `version` give, Salt's comparison of the package
//! lists before and after a change, and `remove` up to the command that
//! removes. How a job's names, `pkgs=` and `sources=` are read and checked
//! is in `targets.rs`.
//!
//! It starts only its backend's package tools (the exec grant says which
//! of them it may), sets only Salt's four non-interactive variables for
//! apt's (the env grant), and writes only the `salt://` packages it caches
//! for `sources=` (the first writable dir).

use std::sync::OnceLock;

use maid_sdk::host::{self, Output};
use maid_sdk::salt::{fnmatch, is_true};
use maid_sdk::{Call, Capability, Error, Function, Plugin, export_plugin, function, python};
use serde::Deserialize;
use serde_json::{Map, Value, json};

mod apt;
mod dnf;
mod targets;

use targets::{package, to_remove, word};

struct Pkg;

/// What differs between the package managers `pkg` drives: what the
/// package database says is installed, how versions compare, what the
/// repositories offer, and the commands that refresh, install and remove.
/// One implementation per package manager ([`apt::Apt`], [`dnf::Dnf`]),
/// each following its Salt module (`aptpkg`, `yumpkg`), which differ in
/// their commands, the order they run them in and their messages; so
/// `install`, where the two share little beyond [`targets::parse_targets`]
/// and [`reinstalled`], is the backend's whole.
trait Backend: Sync {
    /// Whether the tool would take `text`, a name a job gives, for a
    /// package file rather than a package name ([`package`] refuses it).
    fn package_file(&self, text: &str) -> bool;

    /// Salt's `normalize_name`: the architecture suffix of `name` dropped
    /// when it is this host's (`osarch`).
    fn normalize_name(&self, name: &str, osarch: &str) -> String;

    /// What the package database says, from one query of it.
    fn packages(&self) -> Result<Packages, Error>;

    /// Whether the database keeps packages that were removed but not
    /// purged (dpkg does; rpm forgets a package once it is removed), which
    /// `list_pkgs(removed=True)` lists and `purge` reports apart.
    fn keeps_removed(&self) -> bool;

    /// Salt's `version_cmp`: -1, 0 or 1, or None when it cannot tell.
    fn version_cmp(&self, a: &str, b: &str, ignore_epoch: bool) -> Result<Option<i32>, Error>;

    /// Salt's `latest_version` of `names` with the job's keywords.
    fn latest_version(&self, names: &[String], call: &Call) -> Result<Value, Error>;

    /// Salt's `upgrade_available`: whether `latest_version` names a version
    /// for `name`. `yumpkg` passes the job's keywords on, as this does;
    /// `aptpkg` does not.
    fn upgrade_available(&self, name: String, call: &Call) -> Result<bool, Error> {
        Ok(self.latest_version(&[name], call)? != json!(""))
    }

    /// Salt's `list_upgrades`: `{name: version}` an upgrade would install.
    fn list_upgrades(&self, refresh: bool, dist_upgrade: bool, call: &Call)
    -> Result<Value, Error>;

    /// Salt's `refresh_db`.
    fn refresh_db(&self, a: &RefreshDb, call: &Call) -> Result<Value, Error>;

    /// Salt's `list_repo_pkgs`: `{name: [version, ...]}` the repositories
    /// hold for `args` (names, or `name=version`), every package when
    /// there are none.
    fn list_repo_pkgs(&self, args: &[String]) -> Result<Value, Error>;

    /// Salt's `install`: the changes to the package list.
    fn install(&self, a: &Install, call: &Call) -> Result<Value, Error>;

    /// Whether a version given with a package to remove reaches the
    /// command line (`yumpkg` removes `name-version`; `aptpkg` drops it),
    /// and so must be checked as a [`word`].
    fn removes_versions(&self) -> bool;

    /// What the remove command is given for `params` (checked, globs
    /// matched): those installed (or, to purge, left removed) as `old`
    /// says, as the tool names them.
    fn removal_targets(
        &self,
        purge: bool,
        params: Vec<(String, Option<String>)>,
        old: &Snapshot,
        call: &Call,
        osarch: &str,
    ) -> Vec<String>;

    /// Remove (or purge) `targets`, which is not empty.
    fn run_removal(&self, purge: bool, targets: Vec<String>) -> Result<Output, Error>;

    /// The words of Salt's error when the remove command failed.
    fn removal_failed(&self) -> &'static str;
}

/// The backend for this host: Salt's loader picks `yumpkg` where the
/// `os_family` grain says `RedHat`, and this reads the grain once.
fn backend() -> &'static dyn Backend {
    static BACKEND: OnceLock<&'static dyn Backend> = OnceLock::new();
    *BACKEND.get_or_init(|| {
        let redhat = host::grains()
            .get("os_family")
            .and_then(Value::as_str)
            .is_some_and(|f| f.eq_ignore_ascii_case("redhat"));
        if redhat { &dnf::Dnf } else { &apt::Apt }
    })
}

/// A package command line: `words` as owned arguments.
fn argv(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

/// The `osarch` grain as text ("" when absent).
fn osarch() -> String {
    host::grains()
        .get("osarch")
        .map(python::str)
        .unwrap_or_default()
}

/// Name -> versions, in the order `list_pkgs` gives the names.
type Versions = Vec<(String, Vec<String>)>;

/// What one query of the package database says, as a backend reads it.
struct Packages {
    /// What `list_pkgs()` gives: installed (with dpkg, also those whose
    /// purge is desired and which are still there).
    current: Versions,
    /// `list_pkgs(purge_desired=True)` (dpkg only).
    purge_desired: Versions,
    /// `list_pkgs(removed=True)`: removed, configuration kept (dpkg only).
    removed: Versions,
}

/// `list_pkgs`'s shape: each name's versions joined by commas, or a list
/// with `as_list`.
fn shaped(
    list: impl IntoIterator<Item = (String, Vec<String>)>,
    as_list: bool,
) -> Map<String, Value> {
    list.into_iter()
        .map(|(k, v)| {
            let v = if as_list {
                json!(v)
            } else {
                json!(v.join(","))
            };
            (k, v)
        })
        .collect()
}

#[derive(Deserialize, Default)]
struct ListPkgs {
    #[serde(default)]
    versions_as_list: Value,
    #[serde(default)]
    removed: Value,
    #[serde(default)]
    purge_desired: Value,
}

/// Salt's `list_pkgs`: installed packages, or the removed ones, or those
/// whose purge is desired.
fn list_pkgs(a: &ListPkgs) -> Result<Map<String, Value>, Error> {
    let backend = backend();
    let (removed, purge_desired) = (is_true(&a.removed), is_true(&a.purge_desired));
    if !backend.keeps_removed() && (removed || purge_desired) {
        // yumpkg has no removed packages to list (and asks rpm nothing).
        return Ok(Map::new());
    }
    let pkgs = backend.packages()?;
    let as_list = is_true(&a.versions_as_list);
    let list = if removed {
        pkgs.removed
    } else if purge_desired {
        pkgs.purge_desired
    } else {
        pkgs.current
    };
    Ok(shaped(list, as_list))
}

/// Packages and their versions, as `list_pkgs` returns them.
type Pkgs = Map<String, Value>;

/// What `list_pkgs()` and `list_pkgs(removed=True)` give (versions joined
/// by commas), as Salt's own functions call them, from one query.
struct Snapshot {
    current: Pkgs,
    removed: Pkgs,
}

/// A [`Snapshot`] of the package database now.
fn snapshot() -> Result<Snapshot, Error> {
    let pkgs = backend().packages()?;
    Ok(Snapshot {
        current: shaped(pkgs.current, false),
        removed: shaped(pkgs.removed, false),
    })
}

/// `list_pkgs(versions_as_list=True)`.
fn versions() -> Result<Map<String, Value>, Error> {
    list_pkgs(&ListPkgs {
        versions_as_list: json!(true),
        ..Default::default()
    })
}

/// The keyword a function pops (Salt reads these from `**kwargs`).
fn kwarg<'a>(call: &'a Call, key: &str) -> Option<&'a Value> {
    call.kwargs.get(key)
}

/// The `cache_valid_time` a function pops from its kwargs (Salt's 0).
fn cache_valid_time(call: &Call) -> Value {
    call.kwargs
        .get("cache_valid_time")
        .cloned()
        .unwrap_or(json!(0))
}

/// Salt's `salt.utils.data.compare_dicts`: `{name: {"old", "new"}}` for
/// every name whose value changed, "" for a side that lacks it.
fn compare(old: &Map<String, Value>, new: &Map<String, Value>) -> Map<String, Value> {
    let mut ret = Map::new();
    for key in old.keys().chain(new.keys()) {
        let (o, n) = (old.get(key), new.get(key));
        if o != n && !ret.contains_key(key) {
            ret.insert(
                key.clone(),
                json!({"old": o.cloned().unwrap_or(json!("")), "new": n.cloned().unwrap_or(json!(""))}),
            );
        }
    }
    ret
}

/// Salt's `install` after `compare`: each package reinstalled is in the
/// changes, old and new, even when its version is the same (unless it
/// was not installed before and the changes already name it).
fn reinstalled<'a>(
    ret: &mut Map<String, Value>,
    old: &Pkgs,
    new: &Pkgs,
    names: impl IntoIterator<Item = &'a String>,
) {
    for name in names {
        if !ret.contains_key(name) || old.contains_key(name) {
            let side = |m: &Pkgs| m.get(name).cloned().unwrap_or(json!(""));
            ret.insert(name.clone(), json!({"old": side(old), "new": side(new)}));
        }
    }
}

/// A failure that carries the changes made so far, as Salt's
/// `CommandExecutionError(message, info={"errors", "changes"})` reads: its
/// text without the changes (`strerror_without_changes`, each error
/// rstripped as `cmd.run_all` gives it and shown as the `nested`
/// outputter lists it), then `\nchanges:\n    ` and the changes as JSON
/// on one line, which is where a state finds them.
fn problem(what: &str, errors: &[String], changes: &Value) -> Error {
    let mut msg = format!("{what}. Additional info follows:\n\nerrors:");
    for e in errors {
        for (i, line) in e.trim_end().lines().enumerate() {
            msg += if i == 0 { "\n    - " } else { "\n      " };
            msg += line;
        }
    }
    msg += &format!("\nchanges:\n    {changes}");
    Error::failed(msg, 1)
}

/// Return the installed version of the packages named (globs allowed)
// Salt's `pkg_resource.version`: one name gives its version text ("" when
// not installed); several, or a glob, a dict.
#[function(raw, args = ["*names", "**kwargs"])]
fn version(call: &Call) -> Result<Value, Error> {
    let as_list = call.kwargs.get("versions_as_list").is_some_and(is_true);
    let pkgs = versions()?;
    let mut ret = Map::new();
    let mut glob = false;
    for name in call.args.iter().map(python::str) {
        if name.contains('*') {
            glob = true;
            for (k, v) in &pkgs {
                if fnmatch(k, &name) {
                    ret.insert(k.clone(), v.clone());
                }
            }
        } else {
            ret.insert(name.clone(), pkgs.get(&name).cloned().unwrap_or(json!([])));
        }
    }
    if !as_list {
        for v in ret.values_mut() {
            let joined: Vec<&str> = v
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            *v = json!(joined.join(","));
        }
    }
    if ret.len() == 1 && !glob {
        return Ok(ret.into_iter().next().map(|(_, v)| v).unwrap_or_default());
    }
    Ok(Value::Object(ret))
}

/// A version without its `epoch:` (Salt's `split(":", 1)[-1]`).
fn without_epoch(v: &str) -> &str {
    v.split_once(':').map_or(v, |(_, rest)| rest)
}

/// Salt's `match_wildcard`: each name with a glob is dropped, and the
/// installed names the last of them matches are added with its version
/// (each glob's matches replace the one's before, as Salt keeps them).
fn match_wildcard(
    params: Vec<(String, Option<String>)>,
    installed: &Map<String, Value>,
) -> Vec<(String, Option<String>)> {
    let mut matches = Vec::new();
    let mut out = Vec::new();
    for (name, version) in params {
        if name.contains('*') {
            matches = installed
                .keys()
                .filter(|k| fnmatch(k, &name))
                .map(|k| (k.clone(), version.clone()))
                .collect();
        } else {
            out.push((name, version));
        }
    }
    for (name, version) in matches {
        match out.iter_mut().find(|(n, _)| *n == name) {
            Some(entry) => entry.1 = version,
            None => out.push((name, version)),
        }
    }
    out
}

#[derive(Deserialize)]
struct VersionCmp {
    pkg1: Value,
    pkg2: Value,
    #[serde(default)]
    ignore_epoch: Value,
}

#[derive(Deserialize)]
struct RefreshDb {
    #[serde(default)]
    cache_valid_time: Value,
    #[serde(default)]
    failhard: Value,
}

/// Return the newest version apt offers for each package, "" when installed
// Salt's `latest_version` (and `available_version`): the newest version
// the repositories offer for each package, "" when what is installed is
// as new (one name gives the text, several a dict).
#[function(raw, args = ["*names", "**kwargs"])]
fn latest_version(call: &Call) -> Result<Value, Error> {
    let names: Vec<String> = call.args.iter().map(python::str).collect();
    backend().latest_version(&names, call)
}

/// Return the newest version apt offers for each package, "" when installed
// Salt's alias of `latest_version`.
#[function(raw, args = ["*names", "**kwargs"])]
fn available_version(call: &Call) -> Result<Value, Error> {
    latest_version(call)
}

#[derive(Deserialize)]
struct UpgradeAvailable {
    name: Value,
}

/// Return every version the repositories offer of the packages named
// Salt's `list_repo_pkgs`: what the package tool lists for each name (or
// `name=version`), every package when none is named.
#[function(raw, args = ["*args", "**kwargs"])]
fn list_repo_pkgs(call: &Call) -> Result<Value, Error> {
    let args: Vec<String> = call.args.iter().map(python::str).collect();
    for arg in &args {
        package(arg)?;
    }
    backend().list_repo_pkgs(&args)
}

#[derive(Deserialize)]
struct NormalizeName {
    name: Value,
}

/// Return the package name without its architecture when that is this host's
// Salt's `normalize_name` (`aptpkg`'s `:arch`, `yumpkg`'s `.arch`).
#[function(args = ["name"])]
fn normalize_name(a: NormalizeName) -> Result<String, Error> {
    Ok(backend().normalize_name(&python::str(&a.name), &osarch()))
}

#[derive(Deserialize)]
struct ListUpgrades {
    #[serde(default)]
    refresh: Value,
    #[serde(default)]
    dist_upgrade: Value,
}

#[derive(Deserialize)]
struct Install {
    #[serde(default)]
    name: Value,
    #[serde(default)]
    refresh: Value,
    #[serde(default)]
    fromrepo: Value,
    #[serde(default)]
    skip_verify: Value,
    #[serde(default)]
    debconf: Value,
    #[serde(default)]
    pkgs: Value,
    #[serde(default)]
    sources: Value,
    #[serde(default)]
    reinstall: Value,
    #[serde(default)]
    downloadonly: Value,
    #[serde(default)]
    normalize: Value,
    #[serde(skip)]
    version: Option<Value>,
}

/// Install packages by name (name, pkgs, version) or from .deb files (sources)
// Salt's `install`, with the `version` it pops from its kwargs.
#[function(args = [
    "name=null",
    "refresh=false",
    "fromrepo=null",
    "skip_verify=false",
    "debconf=null",
    "pkgs=null",
    "sources=null",
    "reinstall=false",
    "downloadonly=false",
    "ignore_epoch=false",
    "normalize=true",
    "**kwargs",
])]
fn install(mut a: Install, call: &Call) -> Result<Value, Error> {
    a.version = kwarg(call, "version").cloned();
    backend().install(&a, call)
}

#[derive(Deserialize)]
struct Uninstall {
    #[serde(default)]
    name: Value,
    #[serde(default)]
    pkgs: Value,
}

/// Salt's `remove` and `purge`: of the named packages (globs match
/// installed names), the backend's command removes those installed, and
/// the changes to the package list come back (with dpkg, `purge` also
/// reports the changes to the removed packages, apart).
fn remove(purge: bool, a: &Uninstall, call: &Call) -> Result<Value, Error> {
    let backend = backend();
    let osarch = osarch();
    let params = to_remove(a, &osarch)?;
    for (name, version) in &params {
        package(name)?;
        if backend.removes_versions()
            && let Some(v) = version
        {
            word("version", v)?;
        }
    }
    let old = snapshot()?;
    // Globs match installed names. Purge then looks for the same names
    // among the removed packages: a glob never reaches those.
    let params = match_wildcard(params, &old.current);
    let targets = backend.removal_targets(purge, params, &old, call, &osarch);
    if targets.is_empty() {
        return Ok(json!({}));
    }
    let out = backend.run_removal(purge, targets)?;
    let err = out.stderr_lossy().trim_end().to_string();
    let new = snapshot()?;
    let changes = Value::Object(compare(&old.current, &new.current));
    let ret = if purge && backend.keeps_removed() {
        json!({"removed": compare(&old.removed, &new.removed), "installed": changes})
    } else {
        changes
    };
    if out.retcode != 0 && !err.is_empty() {
        return Err(problem(backend.removal_failed(), &[err], &ret));
    }
    Ok(ret)
}

/// Return the installed packages as {name: version}
#[function(
    name = "list_pkgs",
    args = [
        "versions_as_list=false",
        "removed=false",
        "purge_desired=false",
        "**kwargs",
    ]
)]
fn list_pkgs_(a: ListPkgs) -> Result<Map<String, Value>, Error> {
    list_pkgs(&a)
}

/// Return whether a newer version of the package is available
#[function(args = ["name", "**kwargs"])]
fn upgrade_available(a: UpgradeAvailable, call: &Call) -> Result<bool, Error> {
    backend().upgrade_available(python::str(&a.name), call)
}

/// Return the packages an upgrade would install, with their versions
#[function(args = ["refresh=true", "dist_upgrade=true", "**kwargs"])]
fn list_upgrades(a: ListUpgrades, call: &Call) -> Result<Value, Error> {
    let (refresh, dist_upgrade) = (is_true(&a.refresh), is_true(&a.dist_upgrade));
    backend().list_upgrades(refresh, dist_upgrade, call)
}

/// Update the package lists (apt-get update)
#[function(args = ["cache_valid_time=0", "failhard=false", "**kwargs"])]
fn refresh_db(a: RefreshDb, call: &Call) -> Result<Value, Error> {
    backend().refresh_db(&a, call)
}

/// Compare two package versions: -1, 0 or 1
#[function(args = ["pkg1", "pkg2", "ignore_epoch=false", "**kwargs"])]
fn version_cmp(a: VersionCmp) -> Result<Option<i32>, Error> {
    let (one, two) = (python::str(&a.pkg1), python::str(&a.pkg2));
    backend().version_cmp(&one, &two, is_true(&a.ignore_epoch))
}

/// The arguments of `remove` and `purge`.
const REMOVE_ARGS: &[&str] = &["name=null", "pkgs=null", "**kwargs"];

/// Remove packages (apt-get remove)
#[function(name = "remove", args = REMOVE_ARGS)]
fn remove_(a: Uninstall, call: &Call) -> Result<Value, Error> {
    remove(false, &a, call)
}

/// Remove packages and their configuration files (apt-get purge)
#[function(args = REMOVE_ARGS)]
fn purge(a: Uninstall, call: &Call) -> Result<Value, Error> {
    remove(true, &a, call)
}

impl Plugin for Pkg {
    const MODULE: &'static str = "pkg";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const CAPABILITIES: &'static [Capability] = &[
        Capability::Exec,
        Capability::Fetch,
        Capability::FsRead,
        Capability::FsWrite,
    ];

    fn functions() -> Vec<Function> {
        maid_sdk::functions![
            list_pkgs_,
            version,
            latest_version,
            available_version,
            upgrade_available,
            list_upgrades,
            list_repo_pkgs,
            normalize_name,
            refresh_db,
            version_cmp,
            install,
            remove_,
            purge,
        ]
    }
}

export_plugin!(Pkg);
