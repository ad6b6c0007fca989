//! Salt's `pkg` module for Debian's family (`aptpkg`): what `dpkg-query`
//! says is installed, what `apt-cache` offers, and installing and removing
//! with `apt-get`, with Salt's names, arguments and shapes. It starts
//! `dpkg-query`, `dpkg`, `apt-cache` and `apt-get` and nothing else (the
//! exec grant says which of them it may), sets only Salt's four
//! non-interactive variables for them (the env grant), and writes only the
//! `salt://` packages it caches for `sources=` (the first writable dir).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use maid_sdk::host::{self, Command, Output};
use maid_sdk::salt::{fnmatch, is_true};
use maid_sdk::{Call, Capability, Error, ErrorKind, Function, Plugin, export_plugin, python};
use serde::Deserialize;
use serde_json::{Map, Value, json};

mod dnf;

struct Pkg;

/// What Salt's `aptpkg` puts in the environment of every package command,
/// so that nothing asks a question.
const DPKG_ENV: [(&str, &str); 4] = [
    ("APT_LISTBUGS_FRONTEND", "none"),
    ("APT_LISTCHANGES_FRONTEND", "none"),
    ("DEBIAN_FRONTEND", "noninteractive"),
    ("UCF_FORCE_CONFFOLD", "1"),
];

/// Where apt keeps the lists `refresh_db` fetches (`cache_valid_time`).
const APT_LISTS: &str = "/var/lib/apt/lists";

fn command(argv: &[String]) -> Command {
    DPKG_ENV
        .iter()
        .fold(Command::from_argv(argv.to_vec()), |c, (k, v)| c.env(*k, *v))
}

fn argv(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

/// A word a job gives (a name, a version, a repository) that reaches a
/// package tool's command line as an argument of its own: never an
/// option (`-oDPkg::Pre-Invoke::=...` makes apt run a command as root;
/// dnf has no working `--`), nor a line of `dpkg --set-selections`.
pub(crate) fn word<'a>(what: &str, text: &'a str) -> Result<&'a str, Error> {
    if text.starts_with('-') {
        return Err(Error::bad_arguments(format!(
            "{what} {text:?} begins with '-': it would be read as an option"
        )));
    }
    if text.chars().any(char::is_control) {
        return Err(Error::bad_arguments(format!(
            "{what} {text:?} holds a control character"
        )));
    }
    Ok(text)
}

/// A package as a job names it ([`word`]), which must name a package and
/// never a package file: `apt-get install` and `dnf install` take a path
/// (`x/../../evil.deb`, `/tmp/evil.rpm`, a URL) as a local package, which
/// would get round `sources=`'s check. For apt a `/` may only name a
/// release (`name/bookworm-backports`); for dnf a name may not end in
/// `.rpm` nor be a URL.
pub(crate) fn package(text: &str) -> Result<&str, Error> {
    word("package", text)?;
    if package_file(text, dnf::active()) {
        return Err(Error::denied(format!(
            "{text} names a package file: install files with sources=, \
             from the directories granted to pkg"
        )));
    }
    Ok(text)
}

/// Whether apt-get (or with `dnf`, dnf) would take `text` for a package
/// file rather than a package name.
fn package_file(text: &str, dnf: bool) -> bool {
    if dnf {
        return text.to_ascii_lowercase().ends_with(".rpm") || text.contains("://");
    }
    text.split_once('/').is_some_and(|(_, release)| {
        release.is_empty()
            || !release
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_+~".contains(c))
    })
}

/// Salt's `_call_apt`: run the program; while dpkg's lock is held, wait
/// 2, 4, ... seconds and try again, ten times at most.
fn call_apt(argv: &[String]) -> Result<Output, Error> {
    let cmd = command(argv);
    let mut out = cmd.output()?;
    let mut count = 0;
    while out.stderr_lossy().contains("Could not get lock") && count < 10 {
        count += 1;
        host::warn(&format!(
            "Waiting for dpkg lock release: retrying... {count}/100"
        ));
        std::thread::sleep(Duration::from_secs(1 << count));
        out = cmd.output()?;
    }
    Ok(out)
}

/// Installed, removed and purge-desired packages: name -> sorted versions.
type Lists = [BTreeMap<String, Vec<String>>; 3];

fn osarch() -> String {
    host::grains()
        .get("osarch")
        .map(python::str)
        .unwrap_or_default()
}

/// Salt's `aptpkg.list_pkgs` reading of `dpkg-query -W`.
fn query() -> Result<Lists, Error> {
    let out = Command::new("dpkg-query")
        .args([
            "--showformat",
            "${Status} ${Package} ${Version} ${Architecture}\n",
            "-W",
        ])
        .output()?;
    let grains = host::grains();
    let amd64 = grains.get("cpuarch").and_then(Value::as_str) == Some("x86_64")
        && grains.get("osarch").and_then(Value::as_str) == Some("amd64");
    let mut lists: Lists = Default::default();
    for line in out.stdout_lossy().lines() {
        let cols: Vec<&str> = line.split_whitespace().collect();
        let [linetype, _, status, name, version, arch, ..] = cols[..] else {
            continue;
        };
        let mut name = name.to_string();
        if amd64 && arch != "all" && arch != "amd64" {
            name = format!("{name}:{arch}");
        }
        let list = if (linetype.contains("install") || linetype.contains("hold"))
            && status.contains("installed")
        {
            &mut lists[0]
        } else if linetype.contains("deinstall") {
            &mut lists[1]
        } else if linetype.contains("purge") && status == "installed" {
            &mut lists[2]
        } else {
            continue;
        };
        list.entry(name).or_default().push(version.to_string());
    }
    for list in &mut lists {
        for versions in list.values_mut() {
            versions.sort();
            versions.dedup();
        }
    }
    Ok(lists)
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

fn list_pkgs(a: &ListPkgs) -> Result<Map<String, Value>, Error> {
    if dnf::active() {
        // yumpkg has no removed packages to list.
        if is_true(&a.removed) || is_true(&a.purge_desired) {
            return Ok(Map::new());
        }
        return dnf::list_pkgs(is_true(&a.versions_as_list));
    }
    let [installed, removed, purge] = query()?;
    let as_list = is_true(&a.versions_as_list);
    if is_true(&a.removed) {
        return Ok(shaped(removed, as_list));
    }
    let mut ret = purge;
    if !is_true(&a.purge_desired) {
        ret.extend(installed);
    }
    Ok(shaped(ret, as_list))
}

/// Packages and their versions, as `list_pkgs` returns them.
type Pkgs = Map<String, Value>;

/// What `list_pkgs()` and `list_pkgs(removed=True)` give (versions joined
/// by commas), as Salt's own functions call them, from one `dpkg-query`.
fn snapshot() -> Result<(Pkgs, Pkgs), Error> {
    let [installed, removed, mut current] = query()?;
    current.extend(installed);
    Ok((shaped(current, false), shaped(removed, false)))
}

/// `list_pkgs(versions_as_list=True)`.
fn versions() -> Result<Map<String, Value>, Error> {
    list_pkgs(&ListPkgs {
        versions_as_list: json!(true),
        ..Default::default()
    })
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

/// Salt's `pkg_resource.version`: one name gives its version text ("" when
/// not installed); several, or a glob, a dict.
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

/// Salt's `aptpkg.version_cmp`: -1, 0 or 1 as `dpkg --compare-versions`
/// orders the two, or None when it cannot.
fn version_cmp(a: &str, b: &str, ignore_epoch: bool) -> Result<Option<i32>, Error> {
    let norm = |v| if ignore_epoch { without_epoch(v) } else { v };
    let (a, b) = (word("version", norm(a))?, word("version", norm(b))?);
    for (oper, ret) in [("lt", -1), ("eq", 0), ("gt", 1)] {
        let out = Command::new("dpkg")
            .args(["--compare-versions", "--", a, oper, b])
            .output()?;
        if out.retcode == 0 {
            return Ok(Some(ret));
        }
    }
    Ok(None)
}

#[derive(Deserialize)]
struct VersionCmp {
    pkg1: Value,
    pkg2: Value,
    #[serde(default)]
    ignore_epoch: Value,
}

/// Salt's `refresh_db`: `apt-get -q update`, each source it names with
/// True (fetched), None (already current) or False (ignored or failed).
fn refresh_db(cache_valid_time: &Value, failhard: &Value) -> Result<Value, Error> {
    let valid = match cache_valid_time {
        Value::Number(n) => n.as_f64().unwrap_or_default(),
        Value::String(s) => s.trim().parse().unwrap_or_default(),
        _ => 0.0,
    };
    if valid > 0.0 {
        // Salt skips the update while the lists are younger than this.
        match host::stat(APT_LISTS, true) {
            Ok(st) => {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs_f64())
                    .unwrap_or_default();
                if st.mtime + valid > now {
                    return Ok(json!({}));
                }
            }
            Err(e) => host::warn(&format!("could not stat cache directory due to: {e}")),
        }
    }
    let out = call_apt(&argv(&["apt-get", "-q", "update"]))?;
    if out.retcode != 0 {
        return Err(Error::failed(out.stderr_lossy(), 1));
    }
    let mut ret = Map::new();
    let mut errors = Vec::new();
    for line in out.stdout_lossy().lines() {
        let cols: Vec<&str> = line.split_whitespace().collect();
        let Some(first) = cols.first() else { continue };
        let mut ident = cols[1..].join(" ");
        if first.contains("Get") {
            // Without the size apt prints last (" [1234 B]").
            if ident.ends_with("B]")
                && let Some(at) = ident.rfind(" [")
            {
                ident.truncate(at);
            }
            ret.insert(ident, json!(true));
        } else if first.contains("Ign") {
            ret.insert(ident, json!(false));
        } else if first.contains("Hit") {
            ret.insert(ident, Value::Null);
        } else if first.contains("Err") {
            ret.insert(ident.clone(), json!(false));
            errors.push(ident);
        }
    }
    if is_true(failhard) && !errors.is_empty() {
        return Err(Error::failed(
            format!("Error getting repos: {}", errors.join(", ")),
            1,
        ));
    }
    Ok(Value::Object(ret))
}

#[derive(Deserialize)]
struct RefreshDb {
    #[serde(default)]
    cache_valid_time: Value,
    #[serde(default)]
    failhard: Value,
}

/// The keyword a function pops (Salt reads these from `**kwargs`).
fn kwarg<'a>(call: &'a Call, key: &str) -> Option<&'a Value> {
    call.kwargs.get(key)
}

/// Salt's `latest_version`: the candidate `apt-cache policy` names for
/// each package, "" when what is installed is as new (one name gives the
/// text, several a dict).
fn latest_version(call: &Call) -> Result<Value, Error> {
    if dnf::active() {
        let names: Vec<String> = call.args.iter().map(python::str).collect();
        return dnf::latest_version(&names, call);
    }
    if call.kwargs.contains_key("repo") {
        return Err(Error::bad_arguments(
            "The 'repo' argument is invalid, use 'fromrepo' instead",
        ));
    }
    let names: Vec<String> = call.args.iter().map(python::str).collect();
    let refresh = kwarg(call, "refresh").is_none_or(is_true);
    let show_installed = kwarg(call, "show_installed").is_some_and(is_true);
    let fromrepo = kwarg(call, "fromrepo")
        .filter(|v| python::truthy(v))
        .map(python::str);
    latest(
        &names,
        refresh,
        show_installed,
        fromrepo.as_deref(),
        &cache_valid_time(call),
    )
}

fn latest(
    names: &[String],
    refresh: bool,
    show_installed: bool,
    fromrepo: Option<&str>,
    cache_valid_time: &Value,
) -> Result<Value, Error> {
    if names.is_empty() {
        return Ok(json!(""));
    }
    for name in names {
        package(name)?;
    }
    let mut names = names.to_vec();
    let mut ret: Map<String, Value> = names.iter().map(|n| (n.clone(), json!(""))).collect();
    let pkgs = versions()?;
    if refresh {
        refresh_db(cache_valid_time, &Value::Null)?;
    }
    let mut cmd = argv(&["apt-cache", "-q", "policy"]);
    if let Some(repo) = fromrepo {
        cmd.push("-o".into());
        cmd.push(format!("APT::Default-Release={repo}"));
    }
    cmd.push("--".into());
    cmd.extend(names.iter().cloned());
    let out = call_apt(&cmd)?;
    let short: Vec<&str> = names
        .iter()
        .map(|n| n.split(':').next().unwrap_or(n))
        .collect();
    let mut candidates: BTreeMap<String, String> = BTreeMap::new();
    let mut this = String::new();
    for line in out.stdout_lossy().lines() {
        let line = line.trim();
        if let Some(head) = line.strip_suffix(':')
            && !line.starts_with("Version table")
        {
            if names.iter().any(|n| n == head)
                || short.contains(&head.split(':').next().unwrap_or(head))
            {
                this = head.to_string();
            }
        } else if line.starts_with("Candidate") {
            let comps: Vec<&str> = line.split_whitespace().collect();
            let mut candidate = "";
            if comps.len() >= 2 {
                candidate = comps[comps.len() - 1];
                if candidate.eq_ignore_ascii_case("(none)") {
                    candidate = "";
                }
            }
            candidates.insert(this.clone(), candidate.to_string());
        }
    }
    loop {
        let (mut extensions, mut pops) = (Vec::new(), Vec::new());
        for name in &names {
            if !candidates.contains_key(name) {
                // No native package: foreign-architecture ones stand in.
                let prefix = format!("{name}:");
                extensions.extend(
                    candidates
                        .keys()
                        .filter(|c| c.starts_with(&prefix))
                        .cloned(),
                );
                pops.push(name.clone());
            }
            let have: Vec<String> = pkgs
                .get(name)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(python::str)
                .collect();
            let candidate = candidates.get(name).cloned().unwrap_or_default();
            if have.is_empty() || show_installed {
                ret.insert(name.clone(), json!(candidate));
            } else if !candidate.is_empty() {
                let mut newer = false;
                for v in &have {
                    newer |= matches!(version_cmp(v, &candidate, false)?, Some(0 | 1));
                }
                if !newer {
                    ret.insert(name.clone(), json!(candidate));
                }
            }
        }
        if extensions.is_empty() && pops.is_empty() {
            break;
        }
        names.extend(extensions);
        for p in pops {
            if let Some(at) = names.iter().position(|n| *n == p) {
                names.remove(at);
            }
        }
    }
    if names.len() == 1 {
        return Ok(ret.get(&names[0]).cloned().unwrap_or(json!("")));
    }
    Ok(Value::Object(ret))
}

#[derive(Deserialize)]
struct UpgradeAvailable {
    name: Value,
}

#[derive(Deserialize)]
struct ListUpgrades {
    #[serde(default)]
    refresh: Value,
    #[serde(default)]
    dist_upgrade: Value,
}

/// Salt's `list_upgrades`: `apt-get --just-print [dist-]upgrade`, each
/// package it would configure with the version.
fn list_upgrades(a: ListUpgrades, call: &Call) -> Result<Value, Error> {
    if dnf::active() {
        return dnf::list_upgrades(is_true(&a.refresh), call);
    }
    if is_true(&a.refresh) {
        refresh_db(&cache_valid_time(call), &Value::Null)?;
    }
    let mut cmd = argv(&["apt-get", "--just-print"]);
    cmd.push(
        if is_true(&a.dist_upgrade) {
            "dist-upgrade"
        } else {
            "upgrade"
        }
        .into(),
    );
    if let Some(repo) = kwarg(call, "fromrepo") {
        cmd.push("-o".into());
        cmd.push(format!("APT::Default-Release={}", python::str(repo)));
    }
    let out = call_apt(&cmd)?;
    if out.retcode != 0 {
        let mut msg = "Failed to get upgrades".to_string();
        for text in [out.stderr_lossy(), out.stdout_lossy()] {
            if !text.is_empty() {
                msg += &format!(": {text}");
                break;
            }
        }
        return Err(Error::failed(msg, 1));
    }
    let mut ret = Map::new();
    for line in out.stdout_lossy().lines() {
        // Conf libxfont1 (1:1.4.5-1 Debian:testing [i386])
        let Some(rest) = line.strip_prefix("Conf ") else {
            continue;
        };
        let Some((name, tail)) = rest.split_once(' ') else {
            continue;
        };
        let Some(version) = tail.strip_prefix('(') else {
            continue;
        };
        let version = version.split(' ').next().unwrap_or_default();
        if !name.is_empty() && !version.is_empty() {
            ret.insert(name.to_string(), json!(version));
        }
    }
    Ok(Value::Object(ret))
}

/// Salt's `normalize_name`: the architecture suffix dropped when it is
/// this host's (or `all`/`any`).
fn normalize_name(name: &str, osarch: &str) -> String {
    if dnf::active() {
        return dnf::normalize_name(name, osarch);
    }
    match name.rsplit_once(':') {
        Some((base, arch)) if arch == osarch || arch == "all" || arch == "any" => base.into(),
        Some(_) => name.into(),
        None => name.into(),
    }
}

/// The packages a `name=` names: comma-separated, each normalized
/// ([`normalize_name`]) when asked, a name given twice once (Salt keeps
/// them in a dict).
fn names(name: &Value, normalize: bool, osarch: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for n in python::str(name).split(',') {
        let n = if normalize {
            normalize_name(n, osarch)
        } else {
            n.to_string()
        };
        if !out.contains(&n) {
            out.push(n);
        }
    }
    out
}

/// A `pkgs=`/`sources=` value: a list, or the YAML text of one.
fn listed(v: &Value) -> Option<Vec<Value>> {
    match v {
        Value::Array(a) => Some(a.clone()),
        Value::String(s) => serde_json::from_str::<Value>(s)
            .ok()
            .and_then(|v| v.as_array().cloned()),
        _ => None,
    }
}

/// What `pkg_resource.parse_targets` gives `install`.
enum Targets {
    /// Names from a repository, each with the version asked for.
    Repository(Vec<(String, Option<String>)>),
    /// Package files on this host.
    Files(Vec<String>),
}

/// Salt's `salt.utils.data.repack_dictlist` with `_repack_pkgs`'s `str()`.
fn repack(
    list: &[Value],
    normalize: bool,
    osarch: &str,
) -> Result<Vec<(String, Option<String>)>, Error> {
    let mut out: Vec<(String, Option<String>)> = Vec::new();
    for element in list {
        let (name, version) = match element {
            Value::String(_) | Value::Number(_) => (python::str(element), None),
            Value::Object(o) if o.len() == 1 => {
                let (k, v) = o.iter().next().expect("one entry");
                (k.clone(), (!v.is_null()).then(|| python::str(v)))
            }
            _ => {
                host::warn(&format!("Invalid input for repack_dictlist: {element}"));
                return Ok(Vec::new());
            }
        };
        let name = if normalize {
            normalize_name(&name, osarch)
        } else {
            name
        };
        if let Some(at) = out.iter().position(|(n, _)| *n == name) {
            out[at].1 = version;
        } else {
            out.push((name, version));
        }
    }
    if out.len() != list.len() {
        return Err(Error::bad_arguments(format!(
            "You are passing a list of packages that contains duplicated packages names: {}. \
             This cannot be processed. In case you are targeting different versions of the \
             same package, please target them individually",
            python::repr(&Value::Array(list.to_vec()))
        )));
    }
    Ok(out)
}

fn parse_targets(a: &Install, osarch: &str) -> Result<Option<Targets>, Error> {
    let normalize = is_true(&a.normalize);
    let given = |v: &Value| python::truthy(v);
    if given(&a.pkgs) && given(&a.sources) {
        host::warn("Only one of \"pkgs\" and \"sources\" can be used.");
        return Ok(None);
    }
    if given(&a.pkgs) {
        let Some(list) = listed(&a.pkgs) else {
            return Ok(None);
        };
        let pkgs = checked(repack(&list, normalize, osarch)?)?;
        return Ok((!pkgs.is_empty()).then_some(Targets::Repository(pkgs)));
    }
    if given(&a.sources) {
        let Some(list) = listed(&a.sources) else {
            return Ok(None);
        };
        let mut files = Vec::new();
        for source in &list {
            let Some((name, src)) = source
                .as_object()
                .filter(|o| o.len() == 1)
                .and_then(|o| o.iter().next())
            else {
                host::warn("Input must be a list of 1-element dicts");
                return Ok(None);
            };
            let src = python::str(src);
            if src.contains("://") {
                files.push(cache_source(&src, name)?);
            } else if !Path::new(&src).is_absolute() {
                return Err(Error::bad_arguments(format!(
                    "Path {src} for package {name} is either not absolute or an invalid protocol"
                )));
            } else {
                files.push(local_source(&src, name)?);
            }
        }
        return Ok((!files.is_empty()).then_some(Targets::Files(files)));
    }
    if given(&a.name) {
        let version = a.version.as_ref().filter(|v| !v.is_null()).map(python::str);
        let pkgs = names(&a.name, normalize, osarch)
            .into_iter()
            .map(|n| (n, version.clone()))
            .collect();
        return Ok(Some(Targets::Repository(checked(pkgs)?)));
    }
    host::warn("No package sources provided");
    Ok(None)
}

/// Packages and versions a job names, each checked ([`package`], [`word`]).
pub(crate) fn checked(
    pkgs: Vec<(String, Option<String>)>,
) -> Result<Vec<(String, Option<String>)>, Error> {
    for (name, version) in &pkgs {
        package(name)?;
        if let Some(v) = version {
            word("version", v)?;
        }
    }
    Ok(pkgs)
}

/// A local `sources=` package, which must lie in a directory granted to
/// pkg: a file that another plugin lets a job write (`cp`'s directory)
/// must never reach `dpkg -I`, `rpm -qp` or `apt-get install`. The host
/// resolves links (one that leads out of the granted directory is
/// refused), and the tools are given the real path it found.
fn local_source(src: &str, name: &str) -> Result<String, Error> {
    let at = |e: Error| match e.kind {
        ErrorKind::Denied => Error::denied(format!(
            "Path {src} for package {name} is not in a directory granted to pkg: {}",
            e.message
        )),
        _ => Error::failed(format!("Path {src} for package {name}: {}", e.message), 1),
    };
    let st = host::stat(src, true).map_err(at)?;
    if st.kind != "file" {
        return Err(Error::bad_arguments(format!(
            "Path {src} for package {name} is not a file"
        )));
    }
    Ok(st.target.unwrap_or_else(|| src.to_string()))
}

/// Salt's `cp.cache_file` for a `sources=` URL: a `salt://` package is
/// fetched (under the fetch grant) into the first writable directory
/// granted to the plugin, which is where `apt-get` reads it.
fn cache_source(url: &str, name: &str) -> Result<String, Error> {
    let unable = || {
        Error::failed(
            format!("Unable to cache source {url} for package {name}"),
            1,
        )
    };
    if !url.starts_with("salt://") {
        return Err(Error::bad_arguments(format!(
            "only salt:// sources and local paths are supported, not {url:?}"
        )));
    }
    let dir = host::dirs()
        .into_iter()
        .find(|d| d.writable)
        .ok_or_else(|| {
            Error::denied(format!(
                "{url}: caching a package needs a writable directory granted to pkg"
            ))
        })?;
    if !dir.path.is_dir() {
        return Err(Error::failed(
            format!(
                "{url}: {} (granted to pkg for caching packages) does not exist; create it",
                dir.path.display()
            ),
            1,
        ));
    }
    let Some(mut source) = host::fetch(url)? else {
        return Err(unable());
    };
    let file = url
        .rsplit('/')
        .next()
        .filter(|f| !f.is_empty())
        .ok_or_else(unable)?;
    let dest = dir.path.join(file);
    maid_sdk::fs::write_source(&mut source, url, &dest, "pkg")?;
    Ok(dest.display().to_string())
}

/// Salt's `lowpkg.bin_pkg_info`: name and version from `dpkg -I`.
fn bin_pkg_info(path: &str) -> Result<(String, String), Error> {
    let out = Command::new("dpkg").args(["-I", "--", path]).output()?;
    if out.retcode != 0 {
        let mut msg = format!("Unable to get info for {path}");
        let err = out.stderr_lossy();
        if !err.is_empty() {
            msg += &format!(": {err}");
        }
        return Err(Error::failed(msg, 1));
    }
    let (mut name, mut version) = (None, None);
    for line in out.stdout_lossy().lines() {
        let line = line.trim();
        let field = |f: &str| {
            line.strip_prefix(f)
                .map(|r| r.trim_start_matches(' '))
                .filter(|r| r.starts_with(':'))
                .and_then(|_| line.split_whitespace().last())
                .map(str::to_string)
        };
        if let Some(v) = field("Package") {
            name = Some(v);
        } else if let Some(v) = field("Version") {
            version = Some(v);
        }
    }
    match (name, version) {
        (Some(n), Some(v)) => Ok((n, v)),
        (n, v) => {
            let missing: Vec<&str> = [("name", n.is_none()), ("version", v.is_none())]
                .into_iter()
                .filter_map(|(k, m)| m.then_some(k))
                .collect();
            Err(Error::failed(
                format!("Unable to get {} for {path}", missing.join(", ")),
                1,
            ))
        }
    }
}

/// Packages `dpkg --get-selections` marks `hold`.
fn held() -> Result<Vec<String>, Error> {
    let out = Command::new("dpkg").arg("--get-selections").output()?;
    Ok(out
        .stdout_lossy()
        .lines()
        .filter_map(|l| {
            let mut cols = l.split_whitespace();
            let (name, state) = (cols.next()?, cols.next()?);
            (state == "hold").then(|| name.to_string())
        })
        .collect())
}

/// `dpkg --set-selections` for each package: Salt's `hold`/`unhold`.
fn select(pkgs: &[String], state: &str) -> Result<(), Error> {
    let input: String = pkgs.iter().map(|p| format!("{p} {state}\n")).collect();
    command(&argv(&["dpkg", "--set-selections"]))
        .stdin(input.into_bytes())
        .output()?;
    Ok(())
}

/// A failure that carries the changes made so far, as Salt's
/// `CommandExecutionError(message, info={"errors", "changes"})` reads.
fn problem(what: &str, errors: &[String], changes: &Value) -> Error {
    let mut msg = format!("{what}. Additional info follows:\n\nerrors:\n");
    for e in errors {
        msg += &format!("    - {e}\n");
    }
    msg += &format!("changes:\n    {changes}");
    Error::failed(msg, 1)
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

/// What one `install` gives `apt-get`, in Salt's three batches.
struct Batches<'a> {
    install: Vec<String>,
    downgrade: Vec<String>,
    /// (name, what apt-get is given)
    reinstall: &'a [(String, String)],
}

/// Salt's `apt-get install` commands for the batches, each with its
/// options first and the packages after `--`, so that none is read as an
/// option; and every name they install.
fn apt_commands(
    prefix: &[String],
    batches: Batches,
    repository: bool,
    download_only: bool,
) -> (Vec<Vec<String>>, Vec<String>) {
    let with = |mut cmd: Vec<String>, targets: &mut dyn Iterator<Item = String>| {
        cmd.push("--".into());
        cmd.extend(targets);
        cmd
    };
    let mut cmds = Vec::new();
    let mut all = Vec::new();
    if !batches.install.is_empty() {
        all.extend(batches.install.iter().cloned());
        cmds.push(with(prefix.to_vec(), &mut batches.install.into_iter()));
    }
    if !batches.downgrade.is_empty() {
        let mut cmd = prefix.to_vec();
        if repository && !cmd.iter().any(|w| w == "--force-yes") {
            cmd.insert(cmd.len() - 1, "--force-yes".into());
        }
        cmds.push(with(cmd, &mut batches.downgrade.into_iter()));
    }
    if download_only && let Some(last) = cmds.last_mut() {
        let at = last.iter().position(|w| w == "--").unwrap_or(last.len());
        last.insert(at, "--download-only".into());
    }
    if !batches.reinstall.is_empty() {
        all.extend(batches.reinstall.iter().map(|(n, _)| n.clone()));
        let mut cmd = prefix.to_vec();
        if repository {
            cmd.push("--reinstall".into());
        }
        cmds.push(with(
            cmd,
            &mut batches.reinstall.iter().map(|(_, s)| s.clone()),
        ));
    }
    (cmds, all)
}

/// Salt's `aptpkg.install`.
fn install(mut a: Install, call: &Call) -> Result<Value, Error> {
    a.version = kwarg(call, "version").cloned();
    if dnf::active() {
        return dnf::install(&a, call);
    }
    let osarch = osarch();
    if python::truthy(&a.debconf) {
        return Err(Error::bad_arguments(
            "debconf answers files are not supported",
        ));
    }
    let version_kw = a
        .version
        .as_ref()
        .filter(|v| python::truthy(v))
        .map(python::str);
    let mut refresh = false;
    if is_true(&a.refresh) {
        refresh = true;
        if let Some(want) = &version_kw {
            let have = latest(&[python::str(&a.name)], false, true, None, &json!(0))?;
            refresh = python::str(&have) != *want;
        }
        if python::truthy(&a.pkgs) {
            refresh = false;
            for pkg in listed(&a.pkgs).unwrap_or_default() {
                match pkg.as_object().and_then(|o| o.iter().next()) {
                    Some((name, want)) => {
                        let have =
                            latest(std::slice::from_ref(name), false, true, None, &json!(0))?;
                        refresh |= have != *want;
                    }
                    None => refresh = true,
                }
            }
        }
    }
    let Some(targets) = parse_targets(&a, &osarch)? else {
        return Ok(json!({}));
    };
    let (old, _) = snapshot()?;
    let reinstall = is_true(&a.reinstall);
    let fromrepo = Some(&a.fromrepo)
        .filter(|v| python::truthy(v))
        .or_else(|| kwarg(call, "repo").filter(|v| python::truthy(v)))
        .map(python::str);

    // (name, what apt-get is given, version) for each target.
    let items: Vec<(Option<String>, String, Option<String>)> = match &targets {
        Targets::Repository(pkgs) => {
            if pkgs
                .iter()
                .any(|(_, v)| v.as_deref().is_some_and(|v| v.starts_with(['<', '>'])))
            {
                return Err(Error::bad_arguments(
                    "version comparisons (<, >) are not supported; name the version",
                ));
            }
            let single = python::truthy(&a.name) && !python::truthy(&a.pkgs) && pkgs.len() == 1;
            pkgs.iter()
                .map(|(n, v)| {
                    let v = if single && version_kw.is_some() {
                        version_kw.clone()
                    } else {
                        v.clone()
                    };
                    (Some(n.clone()), n.clone(), v)
                })
                .collect()
        }
        Targets::Files(files) => files
            .iter()
            .map(|f| bin_pkg_info(f).map(|(n, v)| (Some(n), f.clone(), Some(v))))
            .collect::<Result<_, _>>()?,
    };
    let repository = matches!(targets, Targets::Repository(_));

    let mut prefix = argv(&["apt-get", "-q", "-y"]);
    if kwarg(call, "force_yes").is_some_and(python::truthy) {
        prefix.push("--force-yes".into());
    }
    if kwarg(call, "force_conf_new").is_some_and(python::truthy) {
        prefix.extend(argv(&["-o", "DPkg::Options::=--force-confnew"]));
    } else {
        prefix.extend(argv(&[
            "-o",
            "DPkg::Options::=--force-confold",
            "-o",
            "DPkg::Options::=--force-confdef",
        ]));
    }
    if let Some(rec) = kwarg(call, "install_recommends") {
        prefix.push(
            if python::truthy(rec) {
                "--install-recommends"
            } else {
                "--no-install-recommends"
            }
            .into(),
        );
    }
    if kwarg(call, "only_upgrade").is_some_and(python::truthy) {
        prefix.push("--only-upgrade".into());
    }
    if python::truthy(&a.skip_verify) {
        prefix.push("--allow-unauthenticated".into());
    }
    if let Some(repo) = &fromrepo
        && repository
    {
        prefix.extend(["-t".to_string(), word("fromrepo", repo)?.to_string()]);
    }
    prefix.push("install".into());

    let (mut targets_, mut downgrade) = (Vec::new(), Vec::new());
    let mut to_reinstall: Vec<(String, String)> = Vec::new();
    for (name, target, version) in items {
        let name = name.unwrap_or_default();
        match version {
            None => {
                if repository && reinstall && old.contains_key(&name) {
                    to_reinstall.push((name.clone(), name));
                } else {
                    targets_.push(target);
                }
            }
            Some(v) => {
                let v = if repository {
                    v.trim_start_matches('=').to_string()
                } else {
                    v
                };
                let pkgstr = if repository {
                    format!("{name}={v}")
                } else {
                    target
                };
                if repository {
                    package(&pkgstr)?;
                }
                let cver = old.get(&name).map(python::str).unwrap_or_default();
                if reinstall && !cver.is_empty() && version_cmp(&v, &cver, false)? == Some(0) {
                    to_reinstall.push((name, pkgstr));
                } else if cver.is_empty() || matches!(version_cmp(&v, &cver, false)?, Some(0 | 1)) {
                    targets_.push(pkgstr);
                } else {
                    downgrade.push(pkgstr);
                }
            }
        }
    }
    let (cmds, all) = apt_commands(
        &prefix,
        Batches {
            install: targets_,
            downgrade,
            reinstall: &to_reinstall,
        },
        repository,
        is_true(&a.downloadonly),
    );
    if cmds.is_empty() {
        return Ok(json!({}));
    }
    if refresh {
        refresh_db(&cache_valid_time(call), &Value::Null)?;
    }
    // A held package is let go for the install and held again after.
    let named: Vec<&str> = all
        .iter()
        .map(|t| t.split('=').next().unwrap_or(t))
        .collect();
    let to_unhold: Vec<String> = held()?
        .into_iter()
        .filter(|h| named.contains(&h.as_str()))
        .collect();
    if !to_unhold.is_empty() {
        select(&to_unhold, "install")?;
    }
    let mut errors = Vec::new();
    for cmd in &cmds {
        let out = call_apt(cmd)?;
        let err = out.stderr_lossy();
        if out.retcode != 0 && !err.is_empty() {
            errors.push(err);
        }
    }
    let (new, _) = snapshot()?;
    let mut ret = compare(&old, &new);
    for (name, _) in &to_reinstall {
        if !ret.contains_key(name) || old.contains_key(name) {
            ret.insert(
                name.clone(),
                json!({
                    "old": old.get(name).cloned().unwrap_or(json!("")),
                    "new": new.get(name).cloned().unwrap_or(json!("")),
                }),
            );
        }
    }
    if !to_unhold.is_empty() {
        select(&to_unhold, "hold")?;
    }
    if !errors.is_empty() {
        return Err(problem(
            "Problem encountered installing package(s)",
            &errors,
            &Value::Object(ret),
        ));
    }
    Ok(Value::Object(ret))
}

#[derive(Deserialize)]
struct Uninstall {
    #[serde(default)]
    name: Value,
    #[serde(default)]
    pkgs: Value,
}

/// Salt's `_uninstall`: `apt-get -q -y remove|purge` of the named
/// packages that are installed (globs match installed names).
fn uninstall(action: &str, a: &Uninstall) -> Result<Value, Error> {
    let osarch = osarch();
    let params: Vec<String> = if python::truthy(&a.pkgs) {
        let list = listed(&a.pkgs).unwrap_or_default();
        repack(&list, true, &osarch)?
            .into_iter()
            .map(|(n, _)| n)
            .collect()
    } else if python::truthy(&a.name) {
        names(&a.name, true, &osarch)
    } else {
        Vec::new()
    };
    for name in &params {
        package(name)?;
    }
    let (old, old_removed) = snapshot()?;
    // Globs match installed names. Purge then looks for the same names
    // among the removed packages: a glob never reaches those.
    let params: Vec<String> = match_wildcard(params.into_iter().map(|p| (p, None)).collect(), &old)
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    let mut targets: Vec<String> = params
        .iter()
        .filter(|p| old.contains_key(*p))
        .cloned()
        .collect();
    if action == "purge" {
        targets.extend(params.into_iter().filter(|p| old_removed.contains_key(p)));
    }
    if targets.is_empty() {
        return Ok(json!({}));
    }
    let mut cmd = argv(&["apt-get", "-q", "-y", action, "--"]);
    cmd.extend(targets);
    let out = call_apt(&cmd)?;
    let err = out.stderr_lossy();
    let errors = if out.retcode != 0 && !err.is_empty() {
        vec![err]
    } else {
        Vec::new()
    };
    let (new, new_removed) = snapshot()?;
    let changes = Value::Object(compare(&old, &new));
    let ret = if action == "purge" {
        json!({"removed": compare(&old_removed, &new_removed), "installed": changes})
    } else {
        changes
    };
    if !errors.is_empty() {
        return Err(problem(
            "Problem encountered removing package(s)",
            &errors,
            &ret,
        ));
    }
    Ok(ret)
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
        let latest_fn = |name| {
            Function::raw(
                name,
                "Return the newest version apt offers for each package, \"\" when installed",
                &["*names", "**kwargs"],
                latest_version,
            )
        };
        let uninstall_fn = |name, doc, action: &'static str| {
            Function::new(
                name,
                doc,
                &["name=null", "pkgs=null", "**kwargs"],
                move |a: Uninstall, call: &Call| {
                    if dnf::active() {
                        dnf::remove(&a.name, &a.pkgs, call)
                    } else {
                        uninstall(action, &a)
                    }
                },
            )
        };
        vec![
            Function::new(
                "list_pkgs",
                "Return the installed packages as {name: version}",
                &[
                    "versions_as_list=false",
                    "removed=false",
                    "purge_desired=false",
                    "**kwargs",
                ],
                |a: ListPkgs, _: &Call| list_pkgs(&a),
            ),
            Function::raw(
                "version",
                "Return the installed version of the packages named (globs allowed)",
                &["*names", "**kwargs"],
                version,
            ),
            latest_fn("latest_version"),
            latest_fn("available_version"),
            Function::new(
                "upgrade_available",
                "Return whether a newer version of the package is available",
                &["name", "**kwargs"],
                |a: UpgradeAvailable, call: &Call| {
                    let names = [python::str(&a.name)];
                    let v = if dnf::active() {
                        dnf::latest_version(&names, call)?
                    } else {
                        latest(&names, true, false, None, &json!(0))?
                    };
                    Ok(v != json!(""))
                },
            ),
            Function::new(
                "list_upgrades",
                "Return the packages an upgrade would install, with their versions",
                &["refresh=true", "dist_upgrade=true", "**kwargs"],
                list_upgrades,
            ),
            Function::new(
                "refresh_db",
                "Update the package lists (apt-get update)",
                &["cache_valid_time=0", "failhard=false", "**kwargs"],
                |a: RefreshDb, call: &Call| {
                    if dnf::active() {
                        let check = kwarg(call, "check_update").is_none_or(python::truthy);
                        return dnf::refresh_db(call, check);
                    }
                    refresh_db(&a.cache_valid_time, &a.failhard)
                },
            ),
            Function::new(
                "version_cmp",
                "Compare two package versions: -1, 0 or 1",
                &["pkg1", "pkg2", "ignore_epoch=false", "**kwargs"],
                |a: VersionCmp, _: &Call| {
                    if dnf::active() {
                        let (one, two) = (python::str(&a.pkg1), python::str(&a.pkg2));
                        let ignore_epoch = is_true(&a.ignore_epoch);
                        return Ok(Some(dnf::version_cmp(&one, &two, ignore_epoch)));
                    }
                    version_cmp(
                        &python::str(&a.pkg1),
                        &python::str(&a.pkg2),
                        is_true(&a.ignore_epoch),
                    )
                },
            ),
            Function::new(
                "install",
                "Install packages by name (name, pkgs, version) or from .deb files (sources)",
                &[
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
                ],
                install,
            ),
            uninstall_fn("remove", "Remove packages (apt-get remove)", "remove"),
            uninstall_fn(
                "purge",
                "Remove packages and their configuration files (apt-get purge)",
                "purge",
            ),
        ]
    }
}

export_plugin!(Pkg);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_and_package_files_are_no_package_names() {
        assert!(word("package", "-oDPkg::Pre-Invoke::=touch /x").is_err());
        assert!(word("version", "--force").is_err());
        assert!(word("package", "a\nb hold").is_err());
        assert_eq!(word("package", "bash").unwrap(), "bash");
        for file in [
            "./x.deb",
            "partial/../../tmp/evil.deb",
            "a/",
            "a/b/c",
            "/tmp/x.deb",
        ] {
            assert!(package_file(file, false), "{file}");
        }
        for name in [
            "bash",
            "bash=5.2-1",
            "bash:amd64",
            "bash/bookworm-backports",
        ] {
            assert!(!package_file(name, false), "{name}");
        }
        for file in ["/tmp/x.rpm", "x.RPM", "https://example.com/x"] {
            assert!(package_file(file, true), "{file}");
        }
        assert!(!package_file("/usr/bin/vim", true));
        assert!(!package_file("vim-9.0-1.x86_64", true));
    }
}
