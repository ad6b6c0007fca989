//! Salt's `yumpkg` on dnf, the [`Backend`] where the `os_family` grain
//! is `RedHat`: `rpm -qa` for what is installed, `dnf` for the rest, with
//! Salt's commands, options and readings of their output. It starts
//! `rpm` and `dnf` and nothing else.
//!
//! Not here: holds (`versionlock`, which Salt lets go of and puts back
//! around an install), versions given as globs or comparisons
//! (`version='1.1*'`, `'>=1.1'`), `downloadonly`, and yum, tdnf and dnf5.

use std::cmp::Ordering;

use maid_sdk::host::{Command, Output};
use maid_sdk::salt::{is_true, python_int};
use maid_sdk::{Call, Error, host, python};
use serde_json::{Map, Value, json};

use crate::targets::{Targets, package, parse_targets};
use crate::{
    Backend, Install, Packages, Pkgs, RefreshDb, Snapshot, Versions, argv, compare, kwarg, osarch,
    problem, reinstalled, shaped, snapshot, without_epoch,
};

/// The dnf backend.
pub(crate) struct Dnf;

impl Backend for Dnf {
    /// A name ending in `.rpm`, or a URL: dnf takes either for a package
    /// file.
    fn package_file(&self, text: &str) -> bool {
        text.to_ascii_lowercase().ends_with(".rpm") || text.contains("://")
    }

    fn normalize_name(&self, name: &str, osarch: &str) -> String {
        normalize_name(name, osarch)
    }

    /// `rpm -qa`: what is installed, and nothing else (rpm keeps no trace
    /// of a removed package).
    fn packages(&self) -> Result<Packages, Error> {
        Ok(Packages {
            current: installed(&osarch())?,
            purge_desired: Vec::new(),
            removed: Vec::new(),
        })
    }

    fn keeps_removed(&self) -> bool {
        false
    }

    /// Always an answer: rpm's ordering is computed here, not asked of a
    /// tool.
    fn version_cmp(&self, a: &str, b: &str, ignore_epoch: bool) -> Result<Option<i32>, Error> {
        Ok(Some(version_cmp(a, b, ignore_epoch)))
    }

    fn latest_version(&self, names: &[String], call: &Call) -> Result<Value, Error> {
        latest_version(names, call)
    }

    /// `yumpkg` has no `dist_upgrade`.
    fn list_upgrades(
        &self,
        refresh: bool,
        _dist_upgrade: bool,
        call: &Call,
    ) -> Result<Value, Error> {
        list_upgrades(refresh, call)
    }

    /// `yumpkg.refresh_db` reads its repositories and `check_update` from
    /// the job's keywords, and has no `cache_valid_time` or `failhard`.
    fn refresh_db(&self, _a: &RefreshDb, call: &Call) -> Result<Value, Error> {
        let check = kwarg(call, "check_update").is_none_or(python::truthy);
        refresh_db(call, check)
    }

    /// Not built for dnf: `yumpkg` asks each repository in turn.
    fn list_repo_pkgs(&self, _args: &[String]) -> Result<Value, Error> {
        Err(Error::failed(
            "pkg.list_repo_pkgs is not built for dnf yet",
            1,
        ))
    }

    fn install(&self, a: &Install, call: &Call) -> Result<Value, Error> {
        install(a, call)
    }

    fn removes_versions(&self) -> bool {
        true
    }

    /// Salt's `yumpkg.remove` (and `purge`, the same): each named package
    /// that is installed, as `name-version[.arch]` when a version is given,
    /// which must be one of its installed ones.
    fn removal_targets(
        &self,
        _purge: bool,
        params: Vec<(String, Option<String>)>,
        old: &Snapshot,
        call: &Call,
        osarch: &str,
    ) -> Vec<String> {
        let split = kwarg(call, "split_arch").is_none_or(python::truthy);
        let mut targets = Vec::new();
        for (target, version) in params {
            let Some(have) = old.current.get(&target) else {
                continue;
            };
            match version.filter(|v| !v.is_empty()) {
                None => targets.push(target),
                Some(v) if python::str(have).split(',').any(|h| h == v) => {
                    let (base, arch) = split_arch(&target, osarch, split);
                    targets.push(format!("{base}-{}{arch}", without_epoch(&v)));
                }
                Some(_) => {}
            }
        }
        targets
    }

    /// `dnf -y remove targets`.
    fn run_removal(&self, _purge: bool, targets: Vec<String>) -> Result<Output, Error> {
        let mut cmd = argv(&["-y", "remove"]);
        cmd.extend(targets);
        dnf(&cmd, false)
    }

    fn removal_failed(&self) -> &'static str {
        "Error occurred removing package(s)"
    }
}

/// Salt's `salt.utils.pkg.rpm.QUERYFORMAT`, with `repoid` for the
/// repository (which `rpm` does not know).
fn queryformat(repoid: &str) -> String {
    format!(
        "%{{NAME}}_|-%{{EPOCH}}_|-%{{VERSION}}_|-%{{RELEASE}}_|-%{{ARCH}}_|-{repoid}_|-%{{INSTALLTIME}}"
    )
}

const ARCHES_X86_64: &[&str] = &["x86_64", "x86_64_v2"];
const ARCHES_32: &[&str] = &["i386", "i486", "i586", "i686"];
const ARCHES_ARM_32: &[&str] = &[
    "armv5tel",
    "armv5tejl",
    "armv6l",
    "armv6hl",
    "armv7l",
    "armv7hl",
    "armv7hnl",
];
/// Salt's `ARCHES`: what a `.suffix` of a package name may be.
const ARCHES: &[&str] = &[
    "x86_64",
    "x86_64_v2",
    "athlon",
    "amd64",
    "ia32e",
    "ia64",
    "geode",
    "i386",
    "i486",
    "i586",
    "i686",
    "ppc",
    "ppc64",
    "ppc64le",
    "ppc64iseries",
    "ppc64pseries",
    "s390",
    "s390x",
    "alpha",
    "alphaev4",
    "alphaev45",
    "alphaev5",
    "alphaev56",
    "alphapca56",
    "alphaev6",
    "alphaev67",
    "alphaev68",
    "alphaev7",
    "armv5tel",
    "armv5tejl",
    "armv6l",
    "armv6hl",
    "armv7l",
    "armv7hl",
    "armv7hnl",
    "aarch64",
    "sh3",
    "sh4",
    "sh4a",
];

/// Salt's `check_32`: both 32-bit x86, or both 32-bit ARM.
fn check_32(arch: &str, osarch: &str) -> bool {
    let both = |set: &[&str]| set.contains(&arch) && set.contains(&osarch);
    both(ARCHES_32) || both(ARCHES_ARM_32)
}

/// Salt's `resolve_name`: `name.arch`, unless the architecture is this
/// host's (x86_64 and x86_64_v2 counting as one), `noarch`, or 32-bit on
/// a 32-bit host.
fn resolve_name(name: &str, arch: &str, osarch: &str) -> String {
    let same_x86_64 = ARCHES_X86_64.contains(&arch) && ARCHES_X86_64.contains(&osarch);
    if !check_32(arch, osarch) && arch != osarch && arch != "noarch" && !same_x86_64 {
        format!("{name}.{arch}")
    } else {
        name.to_string()
    }
}

/// Salt's `yumpkg.normalize_name`: the architecture suffix dropped when
/// `resolve_name` would not add it.
fn normalize_name(name: &str, osarch: &str) -> String {
    match name.rsplit_once('.') {
        Some((base, arch))
            if (ARCHES.contains(&arch) || arch == "noarch")
                && resolve_name(base, arch, osarch) == base =>
        {
            base.to_string()
        }
        _ => name.to_string(),
    }
}

/// One package, as Salt's `parse_pkginfo` reads an `rpm` line.
struct PkgInfo {
    name: String,
    /// `[E:]V[-R]`.
    version: String,
}

/// Salt's `parse_pkginfo`: exactly seven `_|-` fields, or nothing.
fn parse_pkginfo(line: &str, osarch: &str) -> Option<PkgInfo> {
    let fields: Vec<&str> = line.split("_|-").collect();
    let [name, epoch, version, release, arch, _repoid, _time] = fields[..] else {
        return None;
    };
    let mut v = version.to_string();
    if !release.is_empty() {
        v = format!("{v}-{release}");
    }
    if epoch != "(none)" && epoch != "0" {
        v = format!("{epoch}:{v}");
    }
    Some(PkgInfo {
        name: resolve_name(name, arch, osarch),
        version: v,
    })
}

/// Installed packages: name -> versions, in `rpm -qa`'s order of names,
/// each name's versions ordered by their upstream part as Salt sorts them.
fn installed(osarch: &str) -> Result<Vec<(String, Vec<String>)>, Error> {
    let out = Command::new("rpm")
        .args(["-qa", "--nodigest", "--nosignature", "--queryformat"])
        .arg(format!("{}\n", queryformat("(none)")))
        .merge_stderr(true)
        .output()?;
    let mut pkgs: Vec<(String, Vec<String>)> = Vec::new();
    for info in out
        .stdout_lossy()
        .lines()
        .filter_map(|l| parse_pkginfo(l, osarch))
    {
        match pkgs.iter_mut().find(|(n, _)| *n == info.name) {
            Some((_, versions)) => versions.push(info.version),
            None => pkgs.push((info.name, vec![info.version])),
        }
    }
    let upstream = |v: &String| {
        let v = v.split_once(':').map_or(v.as_str(), |(_, rest)| rest);
        v.split_once('-').map_or(v, |(up, _)| up).to_string()
    };
    for (_, versions) in &mut pkgs {
        versions.sort_by_key(upstream);
    }
    Ok(pkgs)
}

/// What a `setopt=` setting may not name: where dnf loads plugins,
/// configuration and repositories from, where it installs, and what it
/// trusts. `--setopt=pluginpath=DIR` would run Python from a directory a
/// job can write as root, and `reposdir=` or `*.baseurl=` would install
/// packages from one.
const SETOPT_REFUSED: [&str; 13] = [
    "path",
    "dir",
    "url",
    "mirrorlist",
    "metalink",
    "gpg",
    "ssl",
    "proxy",
    "root",
    "file",
    "plugin",
    "key",
    "cert",
];

/// One `setopt=` setting, `[repo.]name=value`, unless it names what
/// [`SETOPT_REFUSED`] keeps from a job.
fn setting(text: String) -> Result<String, Error> {
    let name = text.split('=').next().unwrap_or_default();
    let option = name.rsplit('.').next().unwrap_or(name).to_ascii_lowercase();
    if let Some(what) = SETOPT_REFUSED.iter().find(|w| option.contains(*w)) {
        return Err(Error::denied(format!(
            "setopt {text}: a job may not set dnf's {name} (it names a {what}: \
             what dnf loads, installs from or trusts)"
        )));
    }
    Ok(format!("--setopt={text}"))
}

/// Salt's `_get_options`: which repositories, excludes and settings.
fn options(call: &Call) -> Result<Vec<String>, Error> {
    let given = |k: &str| kwarg(call, k).filter(|v| python::truthy(v));
    let each = |v: &Value| match v {
        Value::Array(items) => items.iter().map(python::str).collect(),
        other => vec![python::str(other)],
    };
    let mut out = Vec::new();
    let fromrepo = given("fromrepo").or_else(|| given("repo"));
    if let Some(repo) = fromrepo {
        out.push("--disablerepo=*".to_string());
        out.push(format!("--enablerepo={}", python::str(repo)));
    } else {
        if let Some(v) = given("disablerepo") {
            out.extend(each(v).into_iter().map(|r| format!("--disablerepo={r}")));
        }
        if let Some(v) = given("enablerepo") {
            out.extend(each(v).into_iter().map(|r| format!("--enablerepo={r}")));
        }
    }
    if let Some(v) = given("disableexcludes") {
        out.push(format!("--disableexcludes={}", python::str(v)));
    }
    if let Some(v) = given("branch") {
        out.push(format!("--branch={}", python::str(v)));
    }
    if let Some(v) = kwarg(call, "setopt").filter(|v| !v.is_null()) {
        // Salt's `split_input`: a list as given, text split on commas.
        let items: Vec<String> = match v {
            Value::Array(items) => items.iter().map(python::str).collect(),
            other => python::str(other)
                .split(',')
                .map(|s| s.trim().to_string())
                .collect(),
        };
        for item in items {
            out.push(setting(item)?);
        }
    }
    Ok(out)
}

/// Salt's `_call_yum`: `dnf` and the arguments.
fn dnf(args: &[String], merge_stderr: bool) -> Result<Output, Error> {
    Command::new("dnf")
        .args(args)
        .merge_stderr(merge_stderr)
        .output()
}

/// Salt's `refresh_db`: let the metadata expire, then `check-update`:
/// True when there are updates, None when there are none, False when it
/// failed.
fn refresh_db(call: &Call, check_update: bool) -> Result<Value, Error> {
    let options = options(call)?;
    let mut clean = argv(&["--quiet", "--assumeyes", "clean", "expire-cache"]);
    clean.extend(options.iter().cloned());
    dnf(&clean, false)?;
    if !check_update {
        return Ok(json!(true));
    }
    let mut update = argv(&["--quiet", "--assumeyes", "check-update"]);
    let grains = host::grains();
    if grains.get("osmajorrelease") == Some(&json!(7)) {
        update.push("--setopt=autocheck_running_kernel=false".into());
    }
    update.extend(options);
    Ok(match dnf(&update, false)?.retcode {
        100 => json!(true),
        0 => Value::Null,
        _ => json!(false),
    })
}

/// One row of `dnf list`: name (resolved), version, repository.
struct Row {
    name: String,
    arch: String,
    version: String,
}

/// Salt's `_yum_pkginfo`: the header lines dropped, then every word taken
/// in threes (name.arch, version, repository), so that rows dnf wrapped
/// still read.
fn rows(output: &str, osarch: &str) -> Vec<Row> {
    const HEADERS: [&str; 5] = [
        "installed packages",
        "available packages",
        "available upgrades",
        "updated packages",
        "upgraded packages",
    ];
    let words: Vec<&str> = output
        .split('\n')
        .filter(|l| !HEADERS.contains(&l.to_lowercase().as_str()))
        .flat_map(str::split_whitespace)
        .collect();
    words
        .chunks_exact(3)
        .map(|w| {
            let (name, arch) = match w[0].rsplit_once('.') {
                Some((n, a)) => (n.to_string(), a.to_string()),
                None => (w[0].to_string(), osarch.to_string()),
            };
            Row {
                name: resolve_name(&name, &arch, osarch),
                arch,
                version: w[1].trim_end_matches('-').to_string(),
            }
        })
        .collect()
}

/// A part of a version as Salt's `LooseVersion` splits it (numbers
/// compare as numbers).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Part {
    Num(u128),
    Text(String),
}

/// Salt's `LooseVersion`: runs of digits (numbers), of `a-z`, and of
/// anything else between them; dots dropped.
fn loose(v: &str) -> Vec<Part> {
    let class = |c: char| {
        if c.is_ascii_digit() {
            0
        } else if c.is_ascii_lowercase() {
            1
        } else if c == '.' {
            2
        } else {
            3
        }
    };
    let mut parts = Vec::new();
    let chars: Vec<char> = v.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let k = class(chars[i]);
        let start = i;
        if k == 2 {
            i += 1;
            continue;
        }
        while i < chars.len() && class(chars[i]) == k {
            i += 1;
        }
        let run: String = chars[start..i].iter().collect();
        parts.push(match k {
            0 => Part::Num(run.parse().unwrap_or(u128::MAX)),
            _ => Part::Text(run),
        });
    }
    parts
}

/// How Salt's `LooseVersion` orders two versions: as numbers when every
/// part of both is one, else as text with numbers zero-padded to 8.
fn loose_cmp(a: &str, b: &str) -> Ordering {
    let (a, b) = (loose(a), loose(b));
    let numbers = |p: &[Part]| p.iter().all(|x| matches!(x, Part::Num(_)));
    if numbers(&a) && numbers(&b) {
        return a.cmp(&b);
    }
    let text = |p: &[Part]| -> Vec<String> {
        p.iter()
            .map(|x| match x {
                Part::Num(n) => format!("{n:08}"),
                Part::Text(t) => t.clone(),
            })
            .collect()
    };
    text(&a).cmp(&text(&b))
}

/// Salt's `version_to_evr`: epoch (a number, 0 when absent or not one),
/// version and release, split at the first `:` and the first `-`.
fn version_to_evr(v: &str) -> (String, String, String) {
    let colon = v.find(':');
    let epoch = colon
        .and_then(|i| python_int(&v[..i]))
        .map_or("0".to_string(), |e| e.to_string());
    let start = colon.map_or(0, |i| i + 1);
    // The first `-` of the whole text, as Salt finds it (before the `:`,
    // the version is empty).
    match v.find('-') {
        Some(dash) => (
            epoch,
            v.get(start..dash).unwrap_or_default().to_string(),
            v[dash + 1..].to_string(),
        ),
        None => (epoch, v[start..].to_string(), String::new()),
    }
}

/// Salt's `version_cmp` for rpm: RPM's ordering of epoch, version and
/// release; a release missing on either side is left out of both.
fn version_cmp(a: &str, b: &str, ignore_epoch: bool) -> i32 {
    let norm = |v| if ignore_epoch { without_epoch(v) } else { v };
    let (ae, av, mut ar) = version_to_evr(norm(a));
    let (be, bv, mut br) = version_to_evr(norm(b));
    if ar.is_empty() || br.is_empty() {
        ar.clear();
        br.clear();
    }
    let a = rpm_version::Evr::new(ae, av, ar);
    let b = rpm_version::Evr::new(be, bv, br);
    match a.cmp(&b) {
        Ordering::Less => -1,
        Ordering::Equal => 0,
        Ordering::Greater => 1,
    }
}

/// Salt's `latest_version`: the newest version `dnf list available` offers
/// for each name that is newer than every installed one, "" otherwise
/// (one name gives the text, several a dict).
fn latest_version(names: &[String], call: &Call) -> Result<Value, Error> {
    let refresh = kwarg(call, "refresh").is_none_or(is_true);
    if names.is_empty() {
        return Ok(json!(""));
    }
    for name in names {
        package(name)?;
    }
    let osarch = osarch();
    let mut cmd = argv(&["--quiet"]);
    cmd.extend(options(call)?);
    if refresh {
        refresh_db(call, true)?;
    }
    let current = installed(&osarch)?;
    cmd.extend(argv(&["list", "available"]));
    cmd.extend(names.iter().cloned());
    let out = dnf(&cmd, false)?;
    let mut updates = if out.retcode == 0 {
        rows(&out.stdout_lossy(), &osarch)
    } else {
        Vec::new()
    };
    updates.sort_by(|a, b| loose_cmp(&b.version, &a.version));
    let newer = |row: &Row| {
        current
            .iter()
            .filter(|(n, _)| *n == row.name)
            .flat_map(|(_, vs)| vs)
            .all(|v| version_cmp(v, &row.version, false) < 0)
    };
    let mut ret = Map::new();
    for name in names {
        let arch = match name.rsplit_once('.') {
            Some((_, a)) if ARCHES.contains(&a) => a.to_string(),
            _ => osarch.clone(),
        };
        let found = updates.iter().find(|row| {
            row.name == *name
                && (row.arch == "noarch" || row.arch == arch || check_32(&row.arch, &osarch))
                && newer(row)
        });
        let version = found.map_or(String::new(), |row| row.version.clone());
        ret.insert(name.clone(), json!(version));
    }
    Ok(match names {
        [one] => ret.remove(one).unwrap_or(json!("")),
        _ => Value::Object(ret),
    })
}

/// Salt's `list_upgrades`: `dnf list --upgrades`, `{name: version}`.
fn list_upgrades(refresh: bool, call: &Call) -> Result<Value, Error> {
    let mut cmd = argv(&["--quiet"]);
    cmd.extend(options(call)?);
    if refresh {
        refresh_db(call, false)?;
    }
    cmd.extend(argv(&["list", "--upgrades"]));
    let out = dnf(&cmd, false)?;
    let mut ret = Map::new();
    for row in rows(&out.stdout_lossy(), &osarch()) {
        ret.insert(row.name, json!(row.version));
    }
    Ok(Value::Object(ret))
}

/// Salt's `lowpkg.bin_pkg_info`: name and version of a package file.
fn bin_pkg_info(path: &str) -> Result<Option<PkgInfo>, Error> {
    let out = Command::new("rpm")
        .args(["-qp", "--queryformat"])
        .arg(queryformat("none"))
        .args(["--", path])
        .output()?;
    Ok(parse_pkginfo(&out.stdout_lossy(), &osarch()))
}

/// `name.arch` split where Salt splits it for a command line: the
/// architecture kept apart when it is one.
fn split_arch(name: &str, osarch: &str, split: bool) -> (String, String) {
    match name.rsplit_once('.') {
        Some((base, arch)) if ARCHES.contains(&arch) && (arch != osarch || split) => {
            (base.to_string(), format!(".{arch}"))
        }
        _ => (name.to_string(), String::new()),
    }
}

/// (from a repository, the name Salt keys its changes by, what goes on
/// the command line, the version) for one target.
type Item = (bool, Option<String>, String, Option<String>);

/// (the name Salt keys its changes by, what dnf is given) for each
/// package of one batch.
type Batch = Vec<(Option<String>, String)>;

/// What `install` reads from the job to sort and name its targets.
struct Rules<'a> {
    osarch: &'a str,
    reinstall: bool,
    /// `ignore_epoch is True`: only a real True.
    ignore_epoch: bool,
    /// Salt's `split_arch`: `name-version.arch`, not `name.arch-version`.
    split: bool,
}

/// Salt's `yumpkg.install`.
fn install(a: &Install, call: &Call) -> Result<Value, Error> {
    if python::truthy(&a.downloadonly) {
        return Err(Error::bad_arguments(
            "downloadonly is not supported with dnf",
        ));
    }
    let osarch = osarch();
    let rules = Rules {
        osarch: &osarch,
        reinstall: is_true(&a.reinstall),
        ignore_epoch: kwarg(call, "ignore_epoch") == Some(&json!(true)),
        split: kwarg(call, "split_arch").is_none_or(python::truthy),
    };
    let options = options(call)?;
    if is_true(&a.refresh) {
        refresh_db(call, true)?;
    }
    let Some(targets) = parse_targets(a, &osarch)? else {
        return Ok(json!({}));
    };
    let before = installed(&osarch)?;
    let old = shaped(before.clone(), false);
    let items = install_items(targets)?;
    let batches = batch(items, &before, &old, &rules)?;
    let errors = run_batches(&batches, &options, python::truthy(&a.skip_verify))?;
    let [_, _, to_reinstall] = &batches;
    let new = snapshot()?.current;
    let mut ret = compare(&old, &new);
    let names = to_reinstall.iter().filter_map(|(n, _)| n.as_ref());
    reinstalled(&mut ret, &old, &new, names);
    let ret = Value::Object(ret);
    if !errors.is_empty() {
        let what = if to_reinstall.is_empty() {
            "Error occurred installing package(s)"
        } else {
            "Error occurred installing/reinstalling package(s)"
        };
        return Err(problem(what, &errors, &ret));
    }
    Ok(ret)
}

/// An [`Item`] for each target: a package file's name and version as
/// `rpm -qp` reads them (none, with Salt's warning, when it cannot).
fn install_items(targets: Targets) -> Result<Vec<Item>, Error> {
    Ok(match targets {
        Targets::Repository(pkgs) => pkgs
            .into_iter()
            .map(|(name, version)| (true, Some(name.clone()), name, version))
            .collect(),
        Targets::Files(paths) => {
            let mut items = Vec::new();
            for path in paths {
                match bin_pkg_info(&path)? {
                    Some(info) => items.push((false, Some(info.name), path, Some(info.version))),
                    None => {
                        host::warn(&format!(
                            "pkg.install: Unable to get rpm information for {path}. \
                             Version comparisons will be unavailable, and return data \
                             may be inaccurate if reinstall=True."
                        ));
                        items.push((false, None, path, None));
                    }
                }
            }
            items
        }
    })
}

/// Salt's sorting of the targets into what to install, downgrade and
/// reinstall, against what is installed (`before`, and `old` as
/// `list_pkgs` gives it); a repository's package with a version is
/// `name-version[.arch]`.
fn batch(
    items: Vec<Item>,
    before: &Versions,
    old: &Pkgs,
    rules: &Rules,
) -> Result<[Batch; 3], Error> {
    let (mut to_install, mut to_downgrade, mut to_reinstall) = (vec![], vec![], vec![]);
    for (repository, name, what, version) in items {
        let Some(version) = version else {
            if repository && rules.reinstall && name.as_ref().is_some_and(|n| old.contains_key(n)) {
                to_reinstall.push((name, what));
            } else {
                to_install.push((name, what));
            }
            continue;
        };
        let (pkgname, pkgstr, version) = if repository {
            let version = version.trim_start_matches('=').to_string();
            if version.contains('*') || version.starts_with(['<', '>']) {
                return Err(Error::bad_arguments(format!(
                    "version {version:?}: globs and comparisons are not supported with dnf"
                )));
            }
            let (base, arch) = split_arch(&what, rules.osarch, rules.split);
            let v = if rules.ignore_epoch {
                version.as_str()
            } else {
                without_epoch(&version)
            };
            let pkgstr = format!("{base}-{v}{arch}");
            package(&pkgstr)?;
            (Some(base), pkgstr, version)
        } else {
            (name, what, version)
        };
        let cmp = |a: &str, b: &str| version_cmp(a, b, rules.ignore_epoch);
        let cver: &[String] = pkgname
            .as_ref()
            .and_then(|n| before.iter().find(|(name, _)| name == n))
            .map_or(&[], |(_, versions)| versions);
        if rules.reinstall && !cver.is_empty() {
            if cver.iter().any(|v| cmp(&version, v) == 0) {
                to_reinstall.push((pkgname, pkgstr));
            }
        } else if cver.is_empty()
            || cver.iter().any(|v| cmp(&version, v) >= 0)
            // A kernel is installed beside the newer one, never downgraded.
            || matches!(pkgname.as_deref(), Some("kernel" | "kernel-devel"))
        {
            to_install.push((pkgname, pkgstr));
        } else if pkgname.is_some() {
            to_downgrade.push((pkgname, pkgstr));
        }
    }
    Ok([to_install, to_downgrade, to_reinstall])
}

/// `dnf -y install|downgrade|reinstall` for each batch that is not empty
/// (installing the best version, erasing what conflicts), with the job's
/// options; what dnf said for each that failed.
fn run_batches(
    batches: &[Batch; 3],
    options: &[String],
    skip_verify: bool,
) -> Result<Vec<String>, Error> {
    let mut errors = Vec::new();
    for (targets, verb) in batches.iter().zip(["install", "downgrade", "reinstall"]) {
        if targets.is_empty() {
            continue;
        }
        let mut cmd = argv(&["-y"]);
        if verb == "install" {
            cmd.extend(argv(&["--best", "--allowerasing"]));
        }
        cmd.extend(options.iter().cloned());
        if skip_verify {
            cmd.push("--nogpgcheck".into());
        }
        cmd.push(verb.into());
        cmd.extend(targets.iter().map(|(_, t)| t.clone()));
        let out = dnf(&cmd, true)?;
        if out.retcode != 0 {
            errors.push(out.stdout_lossy());
        }
    }
    Ok(errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_versions_read_as_salt_reads_them() {
        assert_eq!(resolve_name("glibc", "i686", "x86_64"), "glibc.i686");
        assert_eq!(resolve_name("a", "x86_64_v2", "x86_64"), "a");
        assert_eq!(resolve_name("a", "noarch", "x86_64"), "a");
        assert_eq!(normalize_name("a.noarch", "x86_64"), "a");
        assert_eq!(normalize_name("a.i686", "x86_64"), "a.i686");
        assert_eq!(normalize_name("a.b", "x86_64"), "a.b");
        let info = parse_pkginfo("e_|-2_|-2.0_|-3_|-noarch_|-(none)_|-1", "x86_64").unwrap();
        assert_eq!(
            (info.name.as_str(), info.version.as_str()),
            ("e", "2:2.0-3")
        );
        assert!(parse_pkginfo("a_|-b", "x86_64").is_none());
        assert_eq!(
            version_to_evr("2:1.0-1.2"),
            ("2".into(), "1.0".into(), "1.2".into())
        );
        assert_eq!(version_to_evr("1.0"), ("0".into(), "1.0".into(), "".into()));
        assert_eq!(
            version_to_evr("x:1-2-3"),
            ("0".into(), "1".into(), "2-3".into())
        );
        assert_eq!(version_cmp("1:1.0-1", "2.0-1", false), 1);
        assert_eq!(version_cmp("1:1.0-1", "2.0-1", true), -1);
        assert_eq!(version_cmp("1.0", "1.0-5", false), 0);
        assert_eq!(version_cmp("1.0~rc1-1", "1.0-1", false), -1);
        assert_eq!(loose_cmp("1.10-1", "1.9-1"), Ordering::Greater);
        assert_eq!(loose_cmp("1.10", "1.9"), Ordering::Greater);
        assert_eq!(loose_cmp("2:1.0-1", "1.1-1"), Ordering::Greater);
    }

    #[test]
    fn settings_that_name_code_or_trust_are_refused() {
        for bad in [
            "pluginpath=/srv/x",
            "reposdir=/tmp",
            "maidtest.baseurl=file:///tmp",
            "gpgcheck=0",
            "sslverify=False",
            "installroot=/",
        ] {
            assert!(setting(bad.into()).is_err(), "{bad}");
        }
        assert_eq!(
            setting("install_weak_deps=False".into()).unwrap(),
            "--setopt=install_weak_deps=False"
        );
    }

    #[test]
    fn dnf_rows_are_read_three_words_at_a_time() {
        let out = "Available Packages\nhello.noarch  1.1-1  maidtest\n\
                   archy.x86_64 0.5-1 maidtest\nglibc.i686\n    2.0-1    @anaconda\n";
        let rows = rows(out, "x86_64");
        let got: Vec<(&str, &str)> = rows
            .iter()
            .map(|r| (r.name.as_str(), r.version.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("hello", "1.1-1"),
                ("archy", "0.5-1"),
                ("glibc.i686", "2.0-1")
            ]
        );
    }
}
