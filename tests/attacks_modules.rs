//! The modules and `maid key` attacked as a job sender or a Redis writer
//! would attack them, against real agents, a real `redis-server` and the
//! real `maid` binary: `service` given a unit file or a unit tree outside
//! its grants, `pkg` given words its tools read as options or package
//! files, `cp`'s listing of `salt://` asked beyond its `fetch` grant or
//! led out of `file_roots` by a link, and the registry given ids that are
//! no minion ids. One named
//! test per hole (docs/security.md, "Threat model"); each fails if its
//! hole reopens, and shows the hostile step working outside the agent
//! where that can be shown.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::common::fleet::{
    Agent, request, run, start_agent, start_agent_with_plugins, wait_registered,
};
use crate::common::redis::RedisServer;
use maid_agent::protocol::Return;
use maid_bus::Bus;
use redis::AsyncCommands;
use serde_json::{Value, json};

/// The only return of maid `tgt` for `fun` with `arg`, `kwarg`.
async fn one_return(bus: &Bus, tgt: &str, fun: &str, arg: Value, kwarg: Value) -> Return {
    let mut req = request(tgt, "glob", fun, arg, kwarg);
    // dnf on a host that is not Fedora takes its time.
    req.collect.timeout = Duration::from_secs(90);
    let report = run(bus, &req).await;
    assert_eq!(report.returns.len(), 1, "{fun}: {report:?}");
    report.returns[0].clone()
}

fn text(r: &Return) -> &str {
    r.ret.as_str().unwrap_or_default()
}

fn assert_denied(r: &Return, says: &str, what: &str) {
    assert_eq!(r.retcode, 77, "{what}: {r:?}");
    assert!(
        text(r).starts_with("Denied:") && text(r).contains(says),
        "{what}: should be denied saying {says:?}: {r:?}"
    );
}

fn assert_refused(r: &Return, says: &str, what: &str) {
    assert_ne!(r.retcode, 0, "{what}: {r:?}");
    assert!(text(r).contains(says), "{what}: should say {says:?}: {r:?}");
}

fn toml_str(p: &Path) -> String {
    format!("{:?}", p.display().to_string())
}

// ---------------------------------------------------------------------
// 8. service: unit files by path, unit trees outside the grants
// ---------------------------------------------------------------------

/// A unit tree as `systemctl --root` reads one: `maidtest.service`
/// installed, and `srv/drop/evil.service` where a job could have written
/// it (as `cp` writes into its directory).
fn unit_tree(root: &Path) {
    std::fs::create_dir_all(root.join("etc/systemd/system")).unwrap();
    std::fs::create_dir_all(root.join("usr/lib/systemd/system")).unwrap();
    std::fs::create_dir_all(root.join("srv/drop")).unwrap();
    let unit = |what: &str| {
        format!(
            "[Unit]\nDescription={what}\n[Service]\nExecStart=/bin/true\n\
             [Install]\nWantedBy=multi-user.target\n"
        )
    };
    std::fs::write(
        root.join("usr/lib/systemd/system/maidtest.service"),
        unit("maid test"),
    )
    .unwrap();
    std::fs::write(root.join("srv/drop/evil.service"), unit("evil")).unwrap();
}

/// Every link systemctl made in a unit tree's `etc`.
fn links(root: &Path) -> Vec<String> {
    let out = Command::new("find")
        .arg(root.join("etc"))
        .args(["-type", "l"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_never_links_a_unit_file_nor_works_outside_its_granted_tree() {
    let work = tempfile::tempdir().unwrap();
    let (tree, outside, scratch) = (
        work.path().join("tree"),
        work.path().join("outside"),
        work.path().join("scratch"),
    );
    for root in [&tree, &outside, &scratch] {
        unit_tree(root);
    }
    std::os::unix::fs::symlink(&outside, tree.join("escape")).unwrap();
    // What the job asks is what systemctl does when given it: the unit
    // file is linked into the tree and enabled.
    let out = Command::new("systemctl")
        .arg("--root")
        .arg(&scratch)
        .args(["enable", "/srv/drop/evil.service"])
        .output()
        .expect("systemctl");
    assert!(out.status.success(), "{out:?}");
    assert!(links(&scratch).iter().any(|l| l.ends_with("evil.service")));

    let server = RedisServer::start();
    let bus = Bus::new(&server.config()).unwrap();
    let grants = format!(
        "[plugins.service]\nexec = [\"/usr/bin/systemctl\", \"/bin/systemctl\"]\n\
         dirs = [{{ path = {}, writable = false }}]\n",
        toml_str(&tree)
    );
    let _agent = start_agent(&server.config(), "svc-1", &grants);
    wait_registered(&bus, &["svc-1"]).await;
    let ask = |fun: &'static str, name: &str, root: &Path| {
        let (arg, kwarg) = (json!([name]), json!({"root": root}));
        let bus = &bus;
        async move { one_return(bus, "svc-1", fun, arg, kwarg).await }
    };

    // A unit file by path: refused by every function, before systemctl.
    for fun in [
        "service.enable",
        "service.disable",
        "service.enabled",
        "service.disabled",
        "service.available",
    ] {
        let r = ask(fun, "/srv/drop/evil.service", &tree).await;
        assert_denied(&r, "never unit files", fun);
        let r = ask(fun, "srv/drop/evil.service", &tree).await;
        assert_denied(&r, "never unit files", fun);
    }
    for fun in ["service.start", "service.restart", "service.status"] {
        let r = one_return(
            &bus,
            "svc-1",
            fun,
            json!(["/srv/drop/evil.service"]),
            json!({}),
        )
        .await;
        assert_denied(&r, "never unit files", fun);
    }
    // An option where the name goes.
    let r = ask("service.enable", "--now", &tree).await;
    assert_refused(&r, "is not a unit name", "--now");
    // A tree outside the grants, directly, through a link inside the
    // granted one, or through `..`.
    for root in [
        outside.clone(),
        tree.join("escape"),
        tree.join("../outside"),
    ] {
        let r = ask("service.enable", "maidtest", &root).await;
        assert_denied(
            &r,
            "outside the directories granted",
            &root.display().to_string(),
        );
    }
    assert_eq!(links(&tree), Vec::<String>::new());
    assert_eq!(links(&outside), Vec::<String>::new());
    // The granted tree itself works: the refusals are the checks'.
    let r = ask("service.enable", "maidtest", &tree).await;
    assert_eq!((r.retcode, &r.ret), (0, &json!(true)), "{r:?}");
    let made = links(&tree);
    assert!(
        made.iter().any(|l| l.ends_with("maidtest.service"))
            && !made.iter().any(|l| l.contains("evil")),
        "{made:?}"
    );
    assert_eq!(links(&outside), Vec::<String>::new());
}

// ---------------------------------------------------------------------
// 10. pkg: options for apt and dnf, package files from anywhere
// ---------------------------------------------------------------------

/// A `.deb` of `name` whose `postinst` writes `marker`: what an attacker
/// leaves where a job can write, for root to install.
fn evil_deb(dir: &Path, name: &str, marker: &Path) -> std::path::PathBuf {
    let root = dir.join(name);
    std::fs::create_dir_all(root.join("DEBIAN")).unwrap();
    std::fs::write(
        root.join("DEBIAN/control"),
        format!(
            "Package: {name}\nVersion: 1.0\nArchitecture: all\n\
             Maintainer: maid <maid@localhost>\nDescription: evil\n"
        ),
    )
    .unwrap();
    let postinst = root.join("DEBIAN/postinst");
    std::fs::write(
        &postinst,
        format!("#!/bin/sh\ntouch {}\n", marker.display()),
    )
    .unwrap();
    std::fs::set_permissions(
        &postinst,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let deb = dir.join(format!("{name}.deb"));
    let out = Command::new("dpkg-deb")
        .args(["--build", "--root-owner-group"])
        .arg(&root)
        .arg(&deb)
        .output()
        .expect("dpkg-deb (apt-get install dpkg) builds the test's package");
    assert!(out.status.success(), "{out:?}");
    deb
}

/// A dnf plugin whose import writes `marker`, in `dir`.
fn evil_dnf_plugin(dir: &Path, marker: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("evil.py"),
        format!(
            "open({:?}, 'w').write('pwned')\nimport dnf\n\
             class Evil(dnf.Plugin):\n    name = 'evil'\n",
            marker.display().to_string()
        ),
    )
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pkg_never_hands_an_option_or_a_foreign_package_file_to_its_tools() {
    let work = tempfile::tempdir().unwrap();
    let (granted, outside) = (work.path().join("granted"), work.path().join("outside"));
    std::fs::create_dir_all(&granted).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let marker = work.path().join("marker");
    let deb = evil_deb(&outside, "maid-attack-evil", &marker);
    std::os::unix::fs::symlink(&deb, granted.join("link.deb")).unwrap();
    std::fs::write(granted.join("junk.deb"), "not a package").unwrap();
    let plugins = work.path().join("dnf-plugins");
    evil_dnf_plugin(&plugins, &marker);
    // dnf reads an option after the package names, and runs the plugins
    // it finds there as root.
    let setopt = format!("--setopt=pluginpath={}", plugins.display());
    let _ = Command::new("dnf")
        .args(["--quiet", "list", "available", "maid-attack-none", &setopt])
        .output()
        .expect("dnf (apt-get install dnf, as ./dev test does)");
    assert!(marker.exists(), "the dnf plugin never ran");
    std::fs::remove_file(&marker).unwrap();

    let server = RedisServer::start();
    let bus = Bus::new(&server.config()).unwrap();
    let dirs = format!(
        "dirs = [{{ path = {}, writable = false }}]\n",
        toml_str(&granted)
    );
    let apt = format!(
        "[plugins.pkg]\nexec = [\"/usr/bin/dpkg-query\", \"/usr/bin/dpkg\", \
         \"/usr/bin/apt-get\", \"/usr/bin/apt-cache\"]\n\
         env = [\"DEBIAN_FRONTEND\", \"APT_LISTBUGS_FRONTEND\", \"APT_LISTCHANGES_FRONTEND\", \
         \"UCF_FORCE_CONFFOLD\"]\n{dirs}"
    );
    let dnf = format!(
        "[grains]\nos_family = \"RedHat\"\nos = \"Fedora\"\nosarch = \"x86_64\"\n\
         [plugins.pkg]\nexec = [\"/usr/bin/dnf\", \"/usr/bin/rpm\"]\n{dirs}"
    );
    let _agents = [
        start_agent(&server.config(), "pkg-apt", &apt),
        start_agent(&server.config(), "pkg-dnf", &dnf),
    ];
    wait_registered(&bus, &["pkg-apt", "pkg-dnf"]).await;
    let hook = format!("-oDPkg::Pre-Invoke::=touch {}", marker.display());

    // apt: the hook as a name, among pkgs, as a version, as a repository.
    for (fun, arg, kwarg) in [
        ("pkg.install", json!([hook]), json!({})),
        (
            "pkg.install",
            json!([]),
            json!({"pkgs": [hook, "maid-attack-none"]}),
        ),
        (
            "pkg.install",
            json!(["maid-attack-none"]),
            json!({"version": hook}),
        ),
        (
            "pkg.install",
            json!(["maid-attack-none"]),
            json!({"fromrepo": hook}),
        ),
        (
            "pkg.latest_version",
            json!([hook]),
            json!({"refresh": false}),
        ),
        ("pkg.remove", json!([hook]), json!({})),
        ("pkg.purge", json!([]), json!({"pkgs": [hook]})),
        ("pkg.version_cmp", json!([hook, "1.0"]), json!({})),
    ] {
        let r = one_return(&bus, "pkg-apt", fun, arg.clone(), kwarg.clone()).await;
        assert_refused(
            &r,
            "would be read as an option",
            &format!("{fun} {arg} {kwarg}"),
        );
    }
    // A package file outside the grants, as a source (directly or through
    // a link in the granted directory) or as a name apt-get takes for a
    // file.
    for source in [deb.clone(), granted.join("link.deb")] {
        let sources = json!({"sources": [{"maid-attack-evil": source}]});
        let r = one_return(&bus, "pkg-apt", "pkg.install", json!([]), sources).await;
        assert_denied(
            &r,
            "not in a directory granted to pkg",
            &source.display().to_string(),
        );
    }
    let relative = format!("partial/../../../..{}", deb.display());
    for name in [deb.display().to_string(), relative] {
        let r = one_return(&bus, "pkg-apt", "pkg.install", json!([name]), json!({})).await;
        assert_denied(&r, "names a package file", &name);
    }
    // dnf: the plugin path as a name, and as a setting.
    let r = one_return(
        &bus,
        "pkg-dnf",
        "pkg.latest_version",
        json!([setopt]),
        json!({"refresh": false}),
    )
    .await;
    assert_refused(&r, "would be read as an option", "dnf name");
    let pluginpath = format!("pluginpath={}", plugins.display());
    let r = one_return(
        &bus,
        "pkg-dnf",
        "pkg.latest_version",
        json!(["maid-attack-none"]),
        json!({"refresh": false, "setopt": pluginpath}),
    )
    .await;
    assert_denied(&r, "a job may not set dnf's pluginpath", "dnf setopt");
    let r = one_return(
        &bus,
        "pkg-dnf",
        "pkg.install",
        json!([format!("{}/evil.rpm", outside.display())]),
        json!({}),
    )
    .await;
    assert_denied(&r, "names a package file", "dnf name as a file");
    assert!(!marker.exists(), "an attack's hook or plugin ran");
    let installed = Command::new("dpkg-query")
        .args(["-W", "maid-attack-evil"])
        .output()
        .unwrap();
    assert!(
        !installed.status.success(),
        "the evil package was installed"
    );

    // What the checks let through still reaches the tools: a file in the
    // granted directory is read by dpkg -I (which finds no package in
    // it), versions are compared, names asked after.
    let junk = json!({"sources": [{"junk": granted.join("junk.deb")}]});
    let r = one_return(&bus, "pkg-apt", "pkg.install", json!([]), junk).await;
    assert_refused(&r, "Unable to get info for", "a granted source");
    let r = one_return(
        &bus,
        "pkg-apt",
        "pkg.version_cmp",
        json!(["1.0", "2.0"]),
        json!({}),
    )
    .await;
    assert_eq!((r.retcode, &r.ret), (0, &json!(-1)), "{r:?}");
    for tgt in ["pkg-apt", "pkg-dnf"] {
        let r = one_return(
            &bus,
            tgt,
            "pkg.latest_version",
            json!(["maid-attack-none"]),
            json!({"refresh": false}),
        )
        .await;
        // (apt's shape for a name it does not know is Salt's dict.)
        assert!(
            r.retcode == 0 && (r.ret == json!("") || r.ret == json!({"maid-attack-none": ""})),
            "{tgt}: {r:?}"
        );
    }
    assert!(!marker.exists());
}

// ---------------------------------------------------------------------
// 14. maid key: registry ids that are no minion ids
// ---------------------------------------------------------------------

/// `maid key --pki-dir PKI ARGS`: exit code, standard output, standard
/// error.
fn maid_key(url: &str, pki: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_maid"))
        .arg("key")
        .arg("--pki-dir")
        .arg(pki)
        .args(args)
        .env("MAID_REDIS", url)
        .env_remove("MAID_CONFIG")
        .output()
        .expect("run maid key");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_ids_that_are_no_minion_ids_never_stop_maid_key() {
    let server = RedisServer::start();
    let bus = Bus::new(&server.config()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let toml = format!(
        "[security]\nrequire_signed = false\nstate_dir = {}\n",
        toml_str(&state)
    );
    let _agent = start_agent(&server.config(), "good-1", &toml);
    wait_registered(&bus, &["good-1"]).await;

    // Registrations that read and are signed with the key they present,
    // under ids that would name files outside the key directories, be
    // options or patterns to `maid key`, or write on the terminal.
    let mut conn = bus.connect().await.unwrap();
    let genuine: String = conn.hget("maid:registry", "good-1").await.unwrap();
    let bad = [
        "../x",
        "../../escaped",
        "a/b",
        "*",
        "-A",
        "-rf",
        "web[1]",
        "a,good-1",
        "esc\u{1b}[31m",
        "line\nbreak",
        "",
    ];
    for id in bad {
        let mut reg = maid_agent::registry::read::<maid_agent::protocol::Registration>(&genuine)
            .unwrap()
            .value;
        let key = maid_agent::trust::generate().unwrap();
        reg.id = id.to_string();
        reg.pubkey = Some(maid_agent::trust::encode_verifying(&key.verifying_key()));
        let text = maid_agent::registry::write(&reg, Some(&key));
        let _: i64 = conn.hset("maid:registry", id, text).await.unwrap();
    }
    let pki = dir.path().join("pki");
    let url = server.url();

    let (code, listed, said) = maid_key(&url, &pki, &["-L"]);
    assert_eq!(code, Some(0), "{said}");
    assert_eq!(
        listed, "Accepted Keys:\nDenied Keys:\nUnaccepted Keys:\ngood-1\nRejected Keys:\n",
        "{said}"
    );
    for id in bad {
        let named = format!("invalid minion id '{}'", id.escape_debug());
        assert!(said.contains(&named), "{named} not reported: {said}");
    }
    // Named, never written: no id's own escape or line break reaches the
    // operator's terminal.
    assert!(
        !said.contains("esc\u{1b}[31m") && !said.contains("line\nbreak"),
        "{said:?}"
    );

    let (code, out, said) = maid_key(&url, &pki, &["-A", "-y"]);
    assert_eq!(code, Some(0), "{said}");
    assert_eq!(out, "Key for minion good-1 accepted.\n", "{said}");
    // Nothing was filed for them, inside the key directories or out.
    let (_, listed, _) = maid_key(&url, &pki, &["-L", "--out", "json"]);
    let listed: Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(
        listed,
        json!({"minions": ["good-1"], "minions_denied": [], "minions_pre": [],
               "minions_rejected": []})
    );
    for escaped in [pki.join("x"), dir.path().join("escaped")] {
        assert!(!escaped.exists(), "{} was written", escaped.display());
    }
    let filed = Command::new("find")
        .arg(&pki)
        .args(["-type", "f"])
        .output()
        .unwrap();
    let filed = String::from_utf8_lossy(&filed.stdout);
    assert!(
        filed
            .lines()
            .all(|f| f.ends_with("/good-1") || f.contains("/syndics/")),
        "{filed}"
    );
}

/// `file_roots` holding what one plugin may read (`web/`), what it may
/// not (`secret/`, `webx/`, a sibling under the same string prefix), a
/// link out of the root, and a link loop.
fn salt_tree(root: &Path, outside: &Path) {
    for (path, text) in [
        ("web/index.html", "index"),
        ("web/sub/a.txt", "a"),
        ("secret/key.pem", "PRIVATE"),
        ("webx/other.txt", "other"),
    ] {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    std::fs::create_dir_all(outside).unwrap();
    std::fs::write(outside.join("leak.txt"), "host secret").unwrap();
    std::os::unix::fs::symlink(outside, root.join("web/escape")).unwrap();
    std::os::unix::fs::symlink(outside.join("leak.txt"), root.join("web/leak.txt")).unwrap();
    std::os::unix::fs::symlink("..", root.join("web/loop")).unwrap();
}

/// A listing of `salt://` shows a plugin only what its `fetch` grant
/// would open: granted `salt://web/**`, `cp.list_master` names nothing
/// of `secret/` (nor `webx/`, which shares the string prefix `web`),
/// whatever prefix it is asked for, and a prefix climbing out is
/// refused. Whatever the grant, a link leading out of `file_roots` is
/// not listed (Salt's roots backend lists it and its contents), and a
/// link loop ends the walk instead of growing the path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cp_lists_only_what_its_fetch_grant_opens_and_never_leaves_file_roots() {
    let work = tempfile::tempdir().unwrap();
    let (root, outside) = (work.path().join("srv"), work.path().join("outside"));
    salt_tree(&root, &outside);
    // Outside the agent, the link does lead to the host's file.
    assert_eq!(
        std::fs::read_to_string(root.join("web/escape/leak.txt")).unwrap(),
        "host secret"
    );

    let server = RedisServer::start();
    let bus = Bus::new(&server.config()).unwrap();
    let roots = format!("file_roots = [{}]\n", toml_str(&root));
    let _narrow = start_agent(
        &server.config(),
        "narrow",
        &format!("{roots}[plugins.cp]\nfetch = [\"salt://web/**\"]\n"),
    );
    let _wide = start_agent(
        &server.config(),
        "wide",
        &format!("{roots}[plugins.cp]\nfetch = [\"salt://**\"]\n"),
    );
    wait_registered(&bus, &["narrow", "wide"]).await;
    let list = |id: &'static str, fun: &'static str, arg: Value| {
        let bus = &bus;
        async move { one_return(bus, id, fun, arg, json!({})).await }
    };

    let files = list("narrow", "cp.list_master", json!([])).await;
    assert_eq!(
        files.ret,
        json!(["web/index.html", "web/sub/a.txt"]),
        "{files:?}"
    );
    let dirs = list("narrow", "cp.list_master_dirs", json!([])).await;
    assert_eq!(dirs.ret, json!(["web", "web/loop", "web/sub"]), "{dirs:?}");
    for prefix in ["secret", "secret/", "s", "webx", ""] {
        for fun in ["cp.list_master", "cp.list_master_dirs"] {
            let r = list("narrow", fun, json!(["base", prefix])).await;
            assert_eq!(r.retcode, 0, "{fun} {prefix:?}: {r:?}");
            let text = r.ret.to_string();
            assert!(
                !text.contains("secret") && !text.contains("webx") && !text.contains("key.pem"),
                "{fun} {prefix:?} told of what fetch may not open: {r:?}"
            );
        }
    }
    let r = list("narrow", "cp.list_master", json!(["base", "web/../secret"])).await;
    assert_denied(&r, "stays inside the file roots", "a prefix climbing out");
    let r = list("narrow", "cp.list_master", json!(["base", "../"])).await;
    assert_denied(&r, "stays inside the file roots", "a prefix above the root");
    // Another environment lists nothing, as Salt for an unknown one.
    let r = list("narrow", "cp.list_master", json!(["prod"])).await;
    assert_eq!(r.ret, json!([]), "{r:?}");

    // Granted everything: the whole tree, less the links that leave it;
    // the loop is listed once and not walked into again.
    let files = list("wide", "cp.list_master", json!([])).await;
    assert_eq!(
        files.ret,
        json!([
            "secret/key.pem",
            "web/index.html",
            "web/sub/a.txt",
            "webx/other.txt"
        ]),
        "{files:?}"
    );
    let dirs = list("wide", "cp.list_master_dirs", json!([])).await;
    assert_eq!(
        dirs.ret,
        json!(["secret", "web", "web/loop", "web/sub", "webx"]),
        "{dirs:?}"
    );
    let r = list("wide", "cp.list_master", json!(["base", "web/escape"])).await;
    assert_eq!(r.ret, json!([]), "{r:?}");
    assert!(!format!("{files:?}{dirs:?}").contains("leak"));
}

/// A `fetch` grant names paths, and holds whatever a URL spells or
/// whichever environment it asks for. Granted `salt://web/*.conf`: a
/// query that makes the URL end in `.conf`
/// (`salt://web/notes.txt?.conf`) names a path of its own, which does not
/// exist, so `web/notes.txt` is not served (before environments, the agent
/// held the grant against the URL as spelt, then dropped the query and
/// served it); `?saltenv=` never widens the grant (`secret/key.pem` in any
/// environment is `Denied`); an environment name that could climb or
/// spell a Redis key of another kind (`..`, `a/b`, a space) is refused in a
/// URL and in a listing. Within the grant, each environment serves its
/// own file and lists its own names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetch_grant_holds_whatever_the_url_spells_in_every_environment() {
    let work = tempfile::tempdir().unwrap();
    let (base, dev) = (work.path().join("base"), work.path().join("dev"));
    for (root, path, text) in [
        (&base, "web/app.conf", "base conf"),
        (&base, "secret/key.pem", "PRIVATE"),
        (&base, "web/notes.txt", "PRIVATE notes"),
        (&dev, "web/app.conf", "dev conf"),
        (&dev, "web/dev.conf", "dev only"),
        (&dev, "secret/key.pem", "DEV PRIVATE"),
    ] {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let server = RedisServer::start();
    let bus = Bus::new(&server.config()).unwrap();
    let _agent = start_agent(
        &server.config(),
        "envs",
        &format!(
            "file_roots = {{ base = [{}], dev = [{}] }}\n\
             [plugins.cp]\nfetch = [\"salt://web/*.conf\"]\n",
            toml_str(&base),
            toml_str(&dev)
        ),
    );
    wait_registered(&bus, &["envs"]).await;
    let call = |fun: &'static str, arg: Value| {
        let bus = &bus;
        async move { one_return(bus, "envs", fun, arg, json!({})).await }
    };
    let read = |url: &str| call("cp.get_file_str", json!([url]));

    // A query is part of the path: nothing by that name.
    for url in [
        "salt://web/notes.txt?.conf",
        "salt://web/notes.txt?x=a.conf",
    ] {
        let r = read(url).await;
        assert_eq!((r.retcode, &r.ret), (0, &json!(false)), "{url}: {r:?}");
    }
    assert_denied(&read("salt://web/notes.txt").await, "", "outside the grant");
    // Within the grant: each environment its own file.
    assert_eq!(read("salt://web/app.conf").await.ret, json!("base conf"));
    assert_eq!(
        read("salt://web/app.conf?saltenv=dev").await.ret,
        json!("dev conf")
    );
    let r = call("cp.get_file_str", json!(["salt://web/app.conf", "dev"])).await;
    assert_eq!(r.ret, json!("dev conf"), "{r:?}");
    assert_eq!(read("salt://web/dev.conf").await.ret, json!(false));
    // The grant holds in every environment.
    for url in [
        "salt://secret/key.pem",
        "salt://secret/key.pem?saltenv=dev",
        "salt://secret/key.pem?saltenv=web.conf",
        "salt://web/../secret/key.pem?saltenv=dev",
    ] {
        assert_denied(&read(url).await, "", url);
    }
    for env in ["..", "a/b", "x y", "dev\n"] {
        let url = format!("salt://web/app.conf?saltenv={env}");
        assert_denied(&read(&url).await, "environment", &url);
        let r = call("cp.list_master", json!([env])).await;
        assert_denied(&r, "environment", &format!("listing {env:?}"));
    }
    // Listings: each environment's own names, only what the grant opens.
    let r = call("cp.list_master", json!(["dev"])).await;
    assert_eq!(r.ret, json!(["web/app.conf", "web/dev.conf"]), "{r:?}");
    let r = call("cp.list_master", json!([])).await;
    assert_eq!(r.ret, json!(["web/app.conf"]), "{r:?}");
    let r = call("cp.list_master", json!(["qa"])).await;
    assert_eq!(r.ret, json!([]), "{r:?}");
}

/// An agent `id` with `test` and the hostile fixture as its plugins; the
/// directory they are in, kept while it runs.
fn hostile_agent(
    redis: &maid_bus::RedisConfig,
    id: &str,
    extra_toml: &str,
) -> (Agent, tempfile::TempDir) {
    let plugins = tempfile::tempdir().unwrap();
    let shipped = Path::new(crate::common::guests::PLUGINS_DIR).join("test.wasm");
    std::fs::copy(shipped, plugins.path().join("test.wasm")).unwrap();
    let hostile = crate::common::guests::FIXTURE_HOSTILE;
    std::fs::copy(hostile, plugins.path().join("hostile.wasm")).unwrap();
    let agent = start_agent_with_plugins(redis, id, extra_toml, plugins.path());
    (agent, plugins)
}

/// A FIFO in a new directory (kept while it is used), which nothing writes.
fn fifo() -> (tempfile::TempDir, std::path::PathBuf) {
    let work = tempfile::tempdir().unwrap();
    let fifo = work.path().join("pipe");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    (work, fifo)
}

/// Let what still waits to open `fifo` go, without waiting for a reader.
fn release(fifo: &Path) {
    let w = std::os::unix::fs::OpenOptionsExt::custom_flags(
        std::fs::OpenOptions::new().write(true),
        0o4000, // O_NONBLOCK
    )
    .open(fifo);
    if let Ok(mut w) = w {
        let _ = std::io::Write::write_all(&mut w, b"x");
    }
}

/// `n` jobs of `fun` (`arg`) to agent `id`, meant to hold it, and a
/// `test.ping` half a second after them, which must be answered, and
/// before any of them ends: the ping waited behind none. Their returns,
/// and how long the ping took.
async fn held_jobs_beside_a_ping(
    bus: &Bus,
    id: &str,
    n: usize,
    fun: &str,
    arg: Value,
) -> (Vec<Return>, Duration) {
    let held = || {
        let arg = arg.clone();
        async move {
            let r = one_return(bus, id, fun, arg, json!({})).await;
            (r, std::time::Instant::now())
        }
    };
    let pinged = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let sent = std::time::Instant::now();
        let r = one_return(bus, id, "test.ping", json!([]), json!({})).await;
        (r, sent.elapsed(), std::time::Instant::now())
    };
    let (held, (ping, took, ping_end)) = tokio::join!(
        futures_util::future::join_all((0..n).map(|_| held())),
        pinged
    );
    assert_eq!(ping.ret, json!(true), "{ping:?}");
    for (r, end) in &held {
        assert!(
            *end > ping_end,
            "{fun} ended before the ping did: the ping waited behind it: {r:?}"
        );
    }
    (held.into_iter().map(|(r, _)| r).collect(), took)
}

/// The host's own file system calls (`read-file` here) run off the agent's
/// worker as WASI's do: a granted file replaced by a FIFO nobody writes,
/// read by more jobs than the agent has workers, holds none of them; each
/// read ends at its time limit and `test.ping` is answered meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_file_that_blocks_holds_no_agent_thread() {
    let (_work, fifo) = fifo();
    let server = RedisServer::start();
    let bus = Bus::new(&server.config()).unwrap();
    let _agent = hostile_agent(
        &server.config(),
        "granted-fifo",
        &format!(
            "[agent]\nconcurrency = 8\n[limits]\ntimeout_secs = 3\n\
             [plugins.hostile]\nfiles = [{}]\n",
            toml_str(&fifo)
        ),
    );
    wait_registered(&bus, &["granted-fifo"]).await;
    let path = fifo.display().to_string();
    let read = "hostile.read_granted";
    let (stuck, _) = held_jobs_beside_a_ping(&bus, "granted-fifo", 3, read, json!([path])).await;
    for r in &stuck {
        assert_eq!(r.retcode, 124, "a read of a FIFO nobody writes: {r:?}");
    }
    release(&fifo);
}

/// A plugin that computes without end, several jobs of it at once, on an
/// agent on its default single worker thread: the guest is interrupted
/// every epoch tick and yields the thread, so the agent answers
/// `test.ping` meanwhile, long before the spinning jobs reach their time
/// limit, which then ends each of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_that_computes_without_end_holds_no_agent_thread() {
    let server = RedisServer::start();
    let bus = Bus::new(&server.config()).unwrap();
    let _agent = hostile_agent(
        &server.config(),
        "spinner",
        "[agent]\nconcurrency = 8\n[limits]\ntimeout_secs = 4\n",
    );
    wait_registered(&bus, &["spinner"]).await;
    let (spun, took) = held_jobs_beside_a_ping(&bus, "spinner", 4, "hostile.spin", json!([])).await;
    assert!(
        took < Duration::from_secs(2),
        "test.ping took {took:?} beside four spinning jobs"
    );
    for r in &spun {
        assert_eq!(r.retcode, 124, "a spinning job was not stopped: {r:?}");
        assert_eq!(r.ret, json!("Timed out after 4 seconds"), "{r:?}");
    }
}

/// A plugin's file system call that blocks forever — reading a FIFO under
/// a granted directory, which nothing writes — holds no agent thread: the
/// agent hands WASI's file calls to blocking threads (only `maid call`,
/// one call per process as salt-call, runs them on its own thread), so
/// more such jobs than the runtime has workers each end at their time
/// limit, and the agent answers `test.ping` meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_blocked_in_the_file_system_holds_no_agent_thread() {
    let (work, fifo) = fifo();
    let server = RedisServer::start();
    let bus = Bus::new(&server.config()).unwrap();
    let _agent = start_agent(
        &server.config(),
        "fifo",
        &format!(
            "[agent]\nconcurrency = 8\n[limits]\ntimeout_secs = 3\n\
             [plugins.file]\ndirs = [{{ path = {} }}]\n",
            toml_str(work.path())
        ),
    );
    wait_registered(&bus, &["fifo"]).await;
    let path = fifo.display().to_string();
    let (stuck, _) = held_jobs_beside_a_ping(&bus, "fifo", 4, "file.read", json!([path])).await;
    for r in &stuck {
        assert_ne!(
            r.retcode, 0,
            "a read of a FIFO nobody writes returned: {r:?}"
        );
    }
    release(&fifo);
}
