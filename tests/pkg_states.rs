//! The `pkg` states against Salt 3008.4's (`salt/states/pkg.py`): SLS
//! files that install packages the test builds (by name, with `pkgs`, at
//! a version, `latest`, from a `salt://` package), upgrade, remove and
//! purge them, from an apt repository of the test's own, applied by Salt's
//! `state` module (`tests/salt/oracle.py modules`) and then by `maid call
//! --local`, each from the same machine — `test=True` first, then for
//! real, then again — and compared whole, less the times. And the grants:
//! a pkg state installs or removes nothing `[plugins.pkg]` and
//! `[plugins.state]` do not allow. Both change the machine's dpkg
//! database, so they run as root, one at a time (`DPKG`).

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::common::salt::oracle;
use crate::modules::{AptRepo, DPKG, build_deb, purge_packages};
use crate::states::{first_difference, maid_answer, maid_call_config, normalise};

/// Every package the SLS files name, purged before and after each side.
const PACKAGES: &[&str] = &[
    "maid-test-a",
    "maid-test-b",
    "maid-test-c",
    "maid-test-missing",
    "maid-test-zzz",
];

/// By name at a version, by name with an architecture, a `pkgs` list with
/// and without a version, a package no repository has, a version none
/// has; a command on the first's changes, and a pkg state watching a
/// command (its `mod_watch`).
const INSTALL: &str = "\
pinned:
  pkg.installed:
    - name: maid-test-a
    - version: 1.0-1
arch_suffix:
  pkg.installed:
    - name: maid-test-a:all
listed:
  pkg.installed:
    - pkgs:
      - maid-test-b
      - maid-test-c: 1.0-1
missing:
  pkg.installed:
    - name: maid-test-missing
wrong_version:
  pkg.installed:
    - name: maid-test-c
    - version: 9.9-1
after_pinned:
  cmd.run:
    - name: echo pinned changed
    - onchanges:
      - pkg: pinned
always:
  cmd.run:
    - name: echo always
rewatch:
  pkg.installed:
    - name: maid-test-b
    - watch:
      - cmd: always
";

/// `pkg.latest` of one package and of a list, and `version: latest`.
const UPGRADE: &str = "\
newest_a:
  pkg.latest:
    - name: maid-test-a
newest_listed:
  pkg.latest:
    - pkgs:
      - maid-test-b
      - maid-test-c
latest_b:
  pkg.installed:
    - name: maid-test-b
    - version: latest
";

/// Removing by a normalized name, at a version not installed, purging a
/// list with one not installed, Salt's `normalize: False` (which
/// `_find_remove_targets` ignores for a name), and purging what removing
/// left (its configuration).
const REMOVE: &str = "\
remove_a:
  pkg.removed:
    - name: maid-test-a:all
remove_c_other_version:
  pkg.removed:
    - name: maid-test-c
    - version: 9.9-1
purge_listed:
  pkg.purged:
    - pkgs:
      - maid-test-b
      - maid-test-zzz
remove_c_unnormalized:
  pkg.removed:
    - name: maid-test-c:all
    - normalize: False
purge_c:
  pkg.purged:
    - name: maid-test-c
";

/// A package from `salt://`.
const SOURCES: &str = "\
from_file:
  pkg.installed:
    - sources:
      - maid-test-a: salt://debs/maid-test-a_1.0-1_all.deb
";

fn assert_root() {
    let uid = Command::new("id").arg("-u").output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&uid.stdout).trim(),
        "0",
        "installing packages through dpkg needs root: run the tests as root"
    );
}

/// apt's lists read the test's repository before either side runs, so
/// that both start from the same lists.
fn refresh_our_source(repo: &AptRepo) {
    let out = Command::new("apt-get")
        .args(["-q", "update", "-o"])
        .arg(format!("Dir::Etc::sourcelist={}", repo.list.display()))
        .args([
            "-o",
            "Dir::Etc::sourceparts=-",
            "-o",
            "APT::Get::List-Cleanup=0",
        ])
        .output()
        .expect("apt-get");
    assert!(
        out.status.success(),
        "apt-get update: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Whether dpkg has `name` installed (not only its configuration).
fn installed(name: &str) -> bool {
    let out = Command::new("dpkg-query")
        .args(["-W", "-f", "${Status}", name])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).ends_with(" installed")
}

fn words(w: &[&str]) -> Vec<String> {
    w.iter().map(|s| s.to_string()).collect()
}

/// The calls both sides make, in order: each SLS under `test=True`, for
/// real and again; then `state.single`.
fn calls() -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for sls in ["install", "upgrade", "remove", "sources"] {
        let mods = format!("pkgtest.{sls}");
        out.push(words(&["state.sls", &mods, "test=True"]));
        out.push(words(&["state.sls", &mods]));
        out.push(words(&["state.sls", &mods]));
    }
    out.push(words(&[
        "state.single",
        "pkg.removed",
        "name=maid-test-a",
        "test=True",
    ]));
    out.push(words(&["state.single", "pkg.removed", "name=maid-test-a"]));
    out
}

/// The packages (`a` 1.0-1 and 2.0-1, `b` and `c` 1.0-1 with a conffile)
/// in `srv/debs`, and the repository holding them all.
fn packages(dir: &Path, srv: &Path) -> AptRepo {
    let debs = srv.join("debs");
    std::fs::create_dir_all(&debs).unwrap();
    let a1 = build_deb(&debs, "maid-test-a", "1.0-1", false);
    let a2 = build_deb(&debs, "maid-test-a", "2.0-1", false);
    let b1 = build_deb(&debs, "maid-test-b", "1.0-1", true);
    let c1 = build_deb(&debs, "maid-test-c", "1.0-1", true);
    AptRepo::new(dir, &[&a1, &a2, &b1, &c1])
}

#[test]
fn pkg_states_apply_as_salt_applies_them() {
    let _dpkg = DPKG.lock().unwrap_or_else(|e| e.into_inner());
    assert_root();
    let dir = tempfile::tempdir().unwrap();
    let srv = dir.path().join("srv");
    let repo = packages(dir.path(), &srv);
    std::fs::create_dir_all(srv.join("pkgtest")).unwrap();
    for (name, text) in [
        ("install", INSTALL),
        ("upgrade", UPGRADE),
        ("remove", REMOVE),
        ("sources", SOURCES),
    ] {
        std::fs::write(srv.join(format!("pkgtest/{name}.sls")), text).unwrap();
    }
    refresh_our_source(&repo);
    let grains = maid_answer(dir.path(), &words(&["grains.items"]))["return"].clone();
    assert!(grains.is_object(), "maid's grains: {grains}");
    let calls = calls();

    purge_packages(PACKAGES);
    let salt = oracle(
        "modules",
        &json!({"calls": calls, "file_root": srv, "grains": grains}),
    );
    let salt = salt.as_array().expect("oracle answers a list").clone();
    purge_packages(PACKAGES);
    let maid: Vec<Value> = calls.iter().map(|c| maid_answer(dir.path(), c)).collect();
    let left: Vec<&str> = PACKAGES.iter().copied().filter(|p| installed(p)).collect();
    purge_packages(PACKAGES);

    let root = dir.path().display().to_string();
    let mut differ = Vec::new();
    for ((words, salt), maid) in calls.iter().zip(salt).zip(&maid) {
        let (mut salt, mut maid) = (salt, maid.clone());
        if salt.get("return").is_some() && salt.get("retcode").is_none() {
            salt["retcode"] = json!(0);
        }
        normalise(&mut salt, &root);
        normalise(&mut maid, &root);
        if salt != maid {
            let at = first_difference("", &salt, &maid).unwrap_or_default();
            differ.push(format!("{words:?}\n  {at}"));
        }
    }
    assert!(
        differ.is_empty(),
        "{} of {} pkg state runs differ from Salt:\n{}",
        differ.len(),
        calls.len(),
        differ.join("\n")
    );
    assert!(left.is_empty(), "left installed: {left:?}");
    assert_what_happened(&maid);
}

/// What the runs did (so that two sides failing alike would not pass).
fn assert_what_happened(maid: &[Value]) {
    let state = |i: usize, tag: &str| {
        let ret = &maid[i]["return"][tag];
        assert!(ret.is_object(), "call {i} has no {tag}: {}", maid[i]);
        ret.clone()
    };
    let change = |old: &str, new: &str| json!({"old": old, "new": new});
    let pinned = "pkg_|-pinned_|-maid-test-a_|-installed";
    assert_eq!(state(0, pinned)["result"], Value::Null);
    assert_eq!(
        state(0, pinned)["changes"],
        json!({"maid-test-a": change("", "1.0-1")})
    );
    assert_eq!(state(1, pinned)["result"], json!(true));
    assert_eq!(
        state(1, pinned)["changes"],
        json!({"maid-test-a": change("", "1.0-1")})
    );
    assert_eq!(
        state(2, pinned)["comment"],
        json!("All specified packages are already installed and are at the desired version")
    );
    let listed = state(1, "pkg_|-listed_|-listed_|-installed");
    assert_eq!(
        listed["changes"],
        json!({"maid-test-b": change("", "1.0-1"), "maid-test-c": change("", "1.0-1")})
    );
    let missing = state(1, "pkg_|-missing_|-maid-test-missing_|-installed");
    assert_eq!(missing["result"], json!(false));
    assert!(
        missing["comment"]
            .as_str()
            .unwrap()
            .contains("Unable to locate package maid-test-missing"),
        "{missing}"
    );
    assert_eq!(maid[1]["retcode"], json!(2));
    let ran = state(1, "cmd_|-after_pinned_|-echo pinned changed_|-run");
    assert_eq!(ran["changes"]["stdout"], json!("pinned changed"));
    let newest = "pkg_|-newest_a_|-maid-test-a_|-latest";
    assert_eq!(
        state(3, newest)["changes"],
        json!({"maid-test-a": change("1.0-1", "2.0-1")})
    );
    assert_eq!(
        state(4, newest)["changes"],
        json!({"maid-test-a": change("1.0-1", "2.0-1")})
    );
    let purge_c = "pkg_|-purge_c_|-maid-test-c_|-purged";
    assert_eq!(
        state(7, purge_c)["changes"],
        json!({"removed": {"maid-test-c": change("1.0-1", "")}, "installed": {}})
    );
    let from_file = "pkg_|-from_file_|-from_file_|-installed";
    assert_eq!(
        state(10, from_file)["changes"],
        json!({"maid-test-a": change("", "1.0-1")})
    );
    assert_eq!(
        state(13, "pkg_|-maid-test-a_|-maid-test-a_|-removed")["changes"],
        json!({"maid-test-a": change("1.0-1", "")})
    );
}

/// Installs and a removal, as a highstate would make them.
const DENY: &str = "\
install_a:
  pkg.installed:
    - name: maid-test-a
install_file:
  pkg.installed:
    - sources:
      - maid-test-b: salt://maid-test-b_1.0-1_all.deb
remove_c:
  pkg.removed:
    - name: maid-test-c
";

/// The tags of [`DENY`]'s states.
const DENY_TAGS: [&str; 3] = [
    "pkg_|-install_a_|-maid-test-a_|-installed",
    "pkg_|-install_file_|-install_file_|-installed",
    "pkg_|-remove_c_|-maid-test-c_|-removed",
];

/// A pkg state installs and removes only what the grants allow: where
/// `[plugins.pkg]` may start no `apt-get` or `dpkg`, or `[plugins.state]`
/// may not call `pkg.install` and `pkg.remove`, each state fails `Denied`
/// and no package is installed or removed; under `maid init`'s grants the
/// same states do their work.
#[test]
fn pkg_states_change_no_package_their_grants_do_not_give() {
    let _dpkg = DPKG.lock().unwrap_or_else(|e| e.into_inner());
    assert_root();
    let dir = tempfile::tempdir().unwrap();
    let srv = dir.path().join("srv");
    std::fs::create_dir_all(srv.join("deny")).unwrap();
    std::fs::write(srv.join("deny/init.sls"), DENY).unwrap();
    let a1 = build_deb(&srv, "maid-test-a", "1.0-1", false);
    build_deb(&srv, "maid-test-b", "1.0-1", false);
    let c1 = build_deb(&srv, "maid-test-c", "1.0-1", false);
    let repo = AptRepo::new(dir.path(), &[&a1]);
    refresh_our_source(&repo);
    let cache = dir.path().join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    purge_packages(PACKAGES);
    let out = Command::new("dpkg").arg("-i").arg(&c1).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let dirs = format!(
        "dirs = [{{ path = {:?}, writable = true }}]\n",
        cache.display().to_string()
    );
    let pkg_env = "env = [\"DEBIAN_FRONTEND\", \"APT_LISTBUGS_FRONTEND\", \"APT_LISTCHANGES_FRONTEND\", \"UCF_FORCE_CONFFOLD\"]\n";
    let configs = [
        // pkg may read the dpkg database and apt's cache, and start nothing else.
        format!(
            "[plugins.state]\nfetch = [\"salt://**\"]\ncall = [\"pkg.*\"]\n\
             [plugins.pkg]\nexec = [\"/usr/bin/dpkg-query\", \"/usr/bin/apt-cache\"]\n{pkg_env}\
             fetch = [\"salt://**\"]\n{dirs}"
        ),
        // pkg may do anything; the state plugin may only read through it.
        format!(
            "[plugins.state]\nfetch = [\"salt://**\"]\n\
             call = [\"pkg.list_pkgs\", \"pkg.version\", \"pkg.latest_version\", \"pkg.list_repo_pkgs\", \"pkg.normalize_name\", \"pkg.version_cmp\"]\n\
             [plugins.pkg]\nexec = [\"/usr/bin/dpkg-query\", \"/usr/bin/dpkg\", \"/usr/bin/apt-get\", \"/usr/bin/apt-cache\"]\n\
             {pkg_env}fetch = [\"salt://**\"]\n{dirs}"
        ),
    ];
    let unchanged = || {
        assert!(!installed("maid-test-a"), "maid-test-a was installed");
        assert!(!installed("maid-test-b"), "maid-test-b was installed");
        assert!(installed("maid-test-c"), "maid-test-c was removed");
    };
    for (i, text) in configs.iter().enumerate() {
        let config = dir.path().join(format!("deny{i}.toml"));
        std::fs::write(&config, text).unwrap();
        let got = maid_call_config(dir.path(), &config, &["state.sls", "deny"]);
        for tag in DENY_TAGS {
            let ret = &got["return"][tag];
            assert_eq!(ret["result"], json!(false), "{tag} under {text}: {got}");
            let comment = ret["comment"].as_str().unwrap_or_default();
            assert!(comment.starts_with("Denied: "), "{tag} under {text}: {got}");
            assert_eq!(ret["changes"], json!({}), "{tag}: {got}");
        }
        assert_eq!(got["retcode"], json!(2), "{got}");
        unchanged();
    }

    // maid init's grants (the cache where the test has one) are what the
    // pkg states need.
    let template = init_config(dir.path(), &cache);
    let got = maid_call_config(dir.path(), &template, &["state.sls", "deny"]);
    let (a, b, c) = (
        installed("maid-test-a"),
        installed("maid-test-b"),
        installed("maid-test-c"),
    );
    purge_packages(PACKAGES);
    for tag in DENY_TAGS {
        assert_eq!(got["return"][tag]["result"], json!(true), "{tag}: {got}");
    }
    assert!(a && b && !c, "a {a}, b {b}, c {c}: {got}");
}

/// `dir/maid.toml`: `maid init`'s config, with pkg's package cache at
/// `cache`.
fn init_config(dir: &Path, cache: &Path) -> std::path::PathBuf {
    let config = dir.join("maid.toml");
    std::fs::write(
        &config,
        maid_config::TEMPLATE.replace("/var/cache/maid/pkg", &cache.display().to_string()),
    )
    .unwrap();
    config
}

/// Names an SLS gives never reach apt-get or dpkg as options, whatever
/// state carries them: under `maid init`'s grants (pkg may run apt-get and
/// dpkg as root), `-oDPkg::Pre-Invoke::=touch MARKER` as a `pkg.installed`
/// name and in its `pkgs` fail the state with pkg's refusal, as a
/// `pkg.removed` name it is a package not installed (nothing is run), and
/// the marker is never made; a `sources:` entry naming a file on the host
/// outside pkg's grants fails too.
#[test]
fn pkg_states_never_hand_apt_an_option() {
    let _dpkg = DPKG.lock().unwrap_or_else(|e| e.into_inner());
    assert_root();
    let dir = tempfile::tempdir().unwrap();
    let srv = dir.path().join("srv");
    std::fs::create_dir_all(srv.join("hostile")).unwrap();
    let marker = dir.path().join("marker");
    let hook = format!("-oDPkg::Pre-Invoke::=touch {}", marker.display());
    std::fs::write(
        srv.join("hostile/init.sls"),
        format!(
            "as_name:\n  pkg.installed:\n    - name: '{hook}'\n    - refresh: False\n\
             in_pkgs:\n  pkg.installed:\n    - refresh: False\n    - pkgs:\n      - '{hook}'\n\
             removed:\n  pkg.removed:\n    - name: '{hook}'\n\
             foreign:\n  pkg.installed:\n    - refresh: False\n    - sources:\n      \
             - maid-test-zzz: /etc/passwd\n"
        ),
    )
    .unwrap();
    let cache = dir.path().join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    let config = init_config(dir.path(), &cache);
    let got = maid_call_config(dir.path(), &config, &["state.sls", "hostile"]);
    let states = got["return"].as_object().unwrap_or_else(|| panic!("{got}"));
    assert_eq!(states.len(), 4, "{got}");
    for (tag, r) in states {
        assert_eq!(r["changes"], json!({}), "{tag}: {got}");
        if tag.ends_with("_|-removed") {
            assert_eq!(r["result"], json!(true), "{tag}: {got}");
            assert_eq!(r["comment"], "All specified packages are already absent");
            continue;
        }
        assert_eq!(r["result"], json!(false), "{tag}: {got}");
        let comment = r["comment"].as_str().unwrap_or_default();
        let why = if tag.contains("foreign") {
            "Denied: pkg.install: Path /etc/passwd"
        } else {
            "would be read as an option"
        };
        assert!(comment.contains(why), "{tag}: {comment}");
    }
    assert_eq!(got["retcode"], json!(2), "{got}");
    assert!(!marker.exists(), "apt or dpkg ran the hook");
}
