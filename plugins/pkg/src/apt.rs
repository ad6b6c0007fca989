//! Salt's `aptpkg`, the [`Backend`] for Debian's family: what `dpkg-query`
//! says is installed, what `apt-cache` offers, and installing and removing
//! with `apt-get`, with Salt's commands, options and readings of their
//! output. It starts `dpkg-query`, `dpkg`, `apt-cache` and `apt-get` and
//! nothing else, and sets no environment variables but Salt's four
//! non-interactive ones ([`DPKG_ENV`]).

use std::collections::BTreeMap;
use std::time::Duration;

use maid_sdk::host::{self, Command, Output};
use maid_sdk::salt::is_true;
use maid_sdk::{Call, Error, python};
use serde_json::{Map, Value, json};

mod repo;

use crate::targets::{Targets, listed, package, parse_targets, word};
use crate::{
    Backend, Install, Packages, Pkgs, RefreshDb, Snapshot, argv, cache_valid_time, compare, kwarg,
    osarch, problem, reinstalled, snapshot, versions, without_epoch,
};

/// The apt backend.
pub(crate) struct Apt;

impl Backend for Apt {
    /// A `/` may only name a release (`name/bookworm-backports`): apt-get
    /// takes anything else with one (`x/../../evil.deb`, `/tmp/x.deb`) for
    /// a file.
    fn package_file(&self, text: &str) -> bool {
        text.split_once('/').is_some_and(|(_, release)| {
            release.is_empty()
                || !release
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_+~".contains(c))
        })
    }

    /// The `:arch` suffix dropped when it is this host's (or `all`/`any`).
    fn normalize_name(&self, name: &str, osarch: &str) -> String {
        match name.rsplit_once(':') {
            Some((base, arch)) if arch == osarch || arch == "all" || arch == "any" => base.into(),
            Some(_) => name.into(),
            None => name.into(),
        }
    }

    fn packages(&self) -> Result<Packages, Error> {
        let [installed, removed, purge] = query()?;
        let mut current = purge.clone();
        current.extend(installed);
        Ok(Packages {
            current: current.into_iter().collect(),
            purge_desired: purge.into_iter().collect(),
            removed: removed.into_iter().collect(),
        })
    }

    fn keeps_removed(&self) -> bool {
        true
    }

    fn version_cmp(&self, a: &str, b: &str, ignore_epoch: bool) -> Result<Option<i32>, Error> {
        version_cmp(a, b, ignore_epoch)
    }

    fn latest_version(&self, names: &[String], call: &Call) -> Result<Value, Error> {
        latest_version(names, call)
    }

    /// `aptpkg.upgrade_available` asks `latest_version` without the job's
    /// keywords: refreshed, from the default release.
    fn upgrade_available(&self, name: String, _call: &Call) -> Result<bool, Error> {
        Ok(latest(&[name], true, false, None, &json!(0))? != json!(""))
    }

    fn list_upgrades(
        &self,
        refresh: bool,
        dist_upgrade: bool,
        call: &Call,
    ) -> Result<Value, Error> {
        list_upgrades(refresh, dist_upgrade, call)
    }

    fn refresh_db(&self, a: &RefreshDb, _call: &Call) -> Result<Value, Error> {
        refresh_db(&a.cache_valid_time, &a.failhard)
    }

    fn list_repo_pkgs(&self, args: &[String]) -> Result<Value, Error> {
        repo::list_repo_pkgs(args)
    }

    fn install(&self, a: &Install, call: &Call) -> Result<Value, Error> {
        install(a, call)
    }

    fn removes_versions(&self) -> bool {
        false
    }

    /// The names installed, and to purge also those removed (their
    /// configuration is left).
    fn removal_targets(
        &self,
        purge: bool,
        params: Vec<(String, Option<String>)>,
        old: &Snapshot,
        _call: &Call,
        _osarch: &str,
    ) -> Vec<String> {
        let params: Vec<String> = params.into_iter().map(|(name, _)| name).collect();
        let mut targets: Vec<String> = params
            .iter()
            .filter(|p| old.current.contains_key(*p))
            .cloned()
            .collect();
        if purge {
            targets.extend(params.into_iter().filter(|p| old.removed.contains_key(p)));
        }
        targets
    }

    /// `apt-get -q -y remove|purge -- targets`.
    fn run_removal(&self, purge: bool, targets: Vec<String>) -> Result<Output, Error> {
        let action = if purge { "purge" } else { "remove" };
        let mut cmd = argv(&["apt-get", "-q", "-y", action, "--"]);
        cmd.extend(targets);
        call_apt(&cmd)
    }

    fn removal_failed(&self) -> &'static str {
        "Problem encountered removing package(s)"
    }
}

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

/// `argv` as a command with [`DPKG_ENV`] set.
fn command(argv: &[String]) -> Command {
    DPKG_ENV
        .iter()
        .fold(Command::from_argv(argv.to_vec()), |c, (k, v)| c.env(*k, *v))
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

/// Salt's `latest_version`: the candidate `apt-cache policy` names for
/// each package, "" when what is installed is as new (one name gives the
/// text, several a dict).
fn latest_version(names: &[String], call: &Call) -> Result<Value, Error> {
    if call.kwargs.contains_key("repo") {
        return Err(Error::bad_arguments(
            "The 'repo' argument is invalid, use 'fromrepo' instead",
        ));
    }
    let refresh = kwarg(call, "refresh").is_none_or(is_true);
    let show_installed = kwarg(call, "show_installed").is_some_and(is_true);
    let fromrepo = kwarg(call, "fromrepo")
        .filter(|v| python::truthy(v))
        .map(python::str);
    latest(
        names,
        refresh,
        show_installed,
        fromrepo.as_deref(),
        &cache_valid_time(call),
    )
}

/// Salt's `aptpkg.latest_version` with its keywords read.
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
    let candidates = candidates(&names, fromrepo)?;
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

/// What `apt-cache policy` names as each package's candidate ("" for
/// `(none)`), by the name it heads the package with.
fn candidates(names: &[String], fromrepo: Option<&str>) -> Result<BTreeMap<String, String>, Error> {
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
    Ok(candidates)
}

/// Salt's `list_upgrades`: `apt-get --just-print [dist-]upgrade`, each
/// package it would configure with the version.
fn list_upgrades(refresh: bool, dist_upgrade: bool, call: &Call) -> Result<Value, Error> {
    if refresh {
        refresh_db(&cache_valid_time(call), &Value::Null)?;
    }
    let mut cmd = argv(&["apt-get", "--just-print"]);
    cmd.push(
        if dist_upgrade {
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

/// (the name Salt keys its changes by, what `apt-get` is given, the
/// version) for one target.
type Item = (Option<String>, String, Option<String>);

/// Salt's `aptpkg.install`.
fn install(a: &Install, call: &Call) -> Result<Value, Error> {
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
    let refresh = refresh_wanted(a, version_kw.as_deref())?;
    let Some(targets) = parse_targets(a, &osarch)? else {
        return Ok(json!({}));
    };
    let old = snapshot()?.current;
    let reinstall = is_true(&a.reinstall);
    let fromrepo = Some(&a.fromrepo)
        .filter(|v| python::truthy(v))
        .or_else(|| kwarg(call, "repo").filter(|v| python::truthy(v)))
        .map(python::str);
    let items = install_items(&targets, a, version_kw.as_ref())?;
    let repository = matches!(targets, Targets::Repository(_));
    let prefix = install_prefix(a, call, fromrepo.as_deref(), repository)?;
    let (install, downgrade, to_reinstall) = batch(items, repository, reinstall, &old)?;
    let (cmds, all) = apt_commands(
        &prefix,
        Batches {
            install,
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
    run_install(&cmds, &all, &old, &to_reinstall)
}

/// Whether `install` refreshes the package lists before it installs:
/// when asked to, unless the version asked for (`version=` for `name=`,
/// or each of `pkgs=`'s) is already the candidate.
fn refresh_wanted(a: &Install, version_kw: Option<&str>) -> Result<bool, Error> {
    let mut refresh = false;
    if is_true(&a.refresh) {
        refresh = true;
        if let Some(want) = version_kw {
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
    Ok(refresh)
}

/// An [`Item`] for each target: a repository's package with the version
/// asked for (`version=` wins for a lone `name=`), a package file with
/// the name and version `dpkg -I` reads in it.
fn install_items(
    targets: &Targets,
    a: &Install,
    version_kw: Option<&String>,
) -> Result<Vec<Item>, Error> {
    Ok(match targets {
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
                        version_kw.cloned()
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
    })
}

/// `apt-get`'s options for `install` from the job's keywords, ending in
/// the `install` command itself; `fromrepo` is the release only for a
/// repository's packages.
fn install_prefix(
    a: &Install,
    call: &Call,
    fromrepo: Option<&str>,
    repository: bool,
) -> Result<Vec<String>, Error> {
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
    if let Some(repo) = fromrepo
        && repository
    {
        prefix.extend(["-t".to_string(), word("fromrepo", repo)?.to_string()]);
    }
    prefix.push("install".into());
    Ok(prefix)
}

/// What `apt-get` is given to install, to downgrade, and (name, what it
/// is given) to reinstall.
type Batched = (Vec<String>, Vec<String>, Vec<(String, String)>);

/// Salt's sorting of the targets: a version older than the installed one
/// is a downgrade, the same one with `reinstall` a reinstall, the rest an
/// install; a repository's package with a version is `name=version`.
fn batch(
    items: Vec<Item>,
    repository: bool,
    reinstall: bool,
    old: &Pkgs,
) -> Result<Batched, Error> {
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
    Ok((targets_, downgrade, to_reinstall))
}

/// Run `install`'s commands, with the held packages among `all` let go
/// for them and held again after, and report the changes against `old`.
fn run_install(
    cmds: &[Vec<String>],
    all: &[String],
    old: &Pkgs,
    to_reinstall: &[(String, String)],
) -> Result<Value, Error> {
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
    for cmd in cmds {
        let out = call_apt(cmd)?;
        let err = out.stderr_lossy().trim_end().to_string();
        if out.retcode != 0 && !err.is_empty() {
            errors.push(err);
        }
    }
    let new = snapshot()?.current;
    let mut ret = compare(old, &new);
    reinstalled(&mut ret, old, &new, to_reinstall.iter().map(|(n, _)| n));
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
