//! The `user` and `group` states against Salt 3008.4's own, on real
//! accounts that the host never sees: each side runs in a mount namespace
//! of its own (`unshare -m`, as root) where `/etc` is a copy of the host's
//! and `/home`, `/var/mail` and `/var/log` are empty directories, all
//! bound from the side's temporary directory. `useradd`, `usermod`,
//! `userdel`, `groupadd`, `gpasswd`, ... then change the copies (they write
//! `/etc/passwd+` and rename it over `/etc/passwd`, which a bind of the
//! file alone would refuse), Salt's `useradd`/`groupadd` modules through
//! the oracle, maid's `user` and `group` plugins through their `exec`
//! grants.
//!
//! The same SLS files (new users and groups, changes to shell, home,
//! groups and GECOS fields, a uid change not allowed, members, addusers
//! and delusers, a missing group, optional groups, absent) are applied
//! with `test=True`, for real, and again, and the returns compared whole,
//! less the times; then the account files each side ended with.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::common::salt::venv;
use crate::states::{first_difference, maid_local, normalise};

/// Groups and users, new: test=True predicts, a real run makes them, and
/// again changes nothing (maidt-alice keeps the groups maidt-team and
/// maidt-ops add her to, by `remove_groups: False`).
const CREATE: &str = r#"
maidt-staff:
  group.present:
    - gid: 7100
maidt-dev:
  group.present:
    - gid: 7101
    - system: False
maidt-alice:
  user.present:
    - uid: 7200
    - shell: /bin/sh
    - home: /home/maidt-alice
    - fullname: Alice Maid
    - roomnumber: "12"
    - workphone: "555"
    - groups:
      - maidt-staff
    - optional_groups:
      - maidt-dev
      - maidt-nosuch
    - remove_groups: False
    - require:
      - group: maidt-staff
      - group: maidt-dev
maidt-bob:
  user.present:
    - uid: 7201
    - createhome: False
    - usergroup: True
maidt-team:
  group.present:
    - addusers:
      - maidt-alice
    - require:
      - user: maidt-alice
maidt-ops:
  group.present:
    - gid: 7110
    - members:
      - maidt-alice
      - maidt-bob
    - require:
      - user: maidt-alice
      - user: maidt-bob
missing-group:
  user.present:
    - name: maidt-carol
    - groups:
      - maidt-nosuch
maidt-old:
  user.absent: []
maidt-ghost:
  group.absent: []
conflict:
  group.present:
    - name: maidt-staff
    - members: [maidt-alice]
    - addusers: [maidt-bob]
"#;

/// Changes to what [`CREATE`] made.
const CHANGE: &str = r#"
maidt-alice:
  user.present:
    - uid: 7200
    - shell: /bin/bash
    - home: /home/maidt-alice2
    - createhome: False
    - fullname: Alice M. Maid
    - homephone: "556"
    - groups:
      - maidt-dev
maidt-bob:
  user.present:
    - uid: 7999
    - createhome: False
maidt-bob-gid:
  user.present:
    - name: maidt-bob
    - gid: maidt-staff
    - allow_gid_change: True
    - createhome: False
maidt-team:
  group.present:
    - delusers:
      - maidt-alice
    - addusers:
      - maidt-bob
maidt-ops:
  group.present:
    - members:
      - maidt-bob
maidt-staff:
  group.present:
    - gid: 7105
comma:
  user.present:
    - name: maidt-alice
    - fullname: "Alice, Maid"
"#;

/// Removing them.
const REMOVE: &str = r#"
maidt-bob:
  user.absent:
    - purge: True
maidt-alice:
  user.absent:
    - purge: True
    - force: True
maidt-ops:
  group.absent: []
maidt-team:
  group.absent:
    - require:
      - user: maidt-alice
"#;

/// A side's private host in `dir`: `etc` a copy of `/etc`, empty `home`,
/// `mail` and `log`, and `srv/users/` holding `sls` files by name.
fn private_host(dir: &Path, sls: &[(&str, &str)]) -> PathBuf {
    let dir = dir.canonicalize().unwrap();
    std::fs::create_dir_all(dir.join("etc")).unwrap();
    let copied = Command::new("cp")
        .args(["-a", "/etc/."])
        .arg(dir.join("etc"))
        .status()
        .expect("cp");
    assert!(copied.success(), "cp -a /etc/. {}/etc", dir.display());
    for sub in ["home", "mail", "log", "srv/users"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    for (name, text) in sls {
        std::fs::write(dir.join(format!("srv/users/{name}.sls")), text).unwrap();
    }
    dir
}

/// `cmd` run inside a mount namespace of its own where `dir`'s copies
/// stand in for `/etc`, `/home`, `/var/mail` and `/var/log`: same
/// program, arguments, environment and working directory.
fn in_private_host(dir: &Path, cmd: &Command) -> Command {
    let d = dir.display();
    let script = format!(
        "mount --bind '{d}/etc' /etc && mount --bind '{d}/home' /home && \
         mount --bind '{d}/mail' /var/mail && mount --bind '{d}/log' /var/log && exec \"$@\""
    );
    let mut wrapped = Command::new("unshare");
    wrapped
        .args(["-m", "sh", "-c", &script, "sh"])
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => wrapped.env(k, v),
            None => wrapped.env_remove(k),
        };
    }
    if let Some(cwd) = cmd.get_current_dir() {
        wrapped.current_dir(cwd);
    }
    wrapped
}

/// Salt's answers (`oracle.py modules`) inside `dir`'s private host.
fn salt_in(dir: &Path, doc: &Value) -> Value {
    use std::io::Write;
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/salt/oracle.py");
    let mut oracle = Command::new(venv().join("bin/python"));
    oracle.arg(script).arg("modules");
    let mut child = in_private_host(dir, &oracle)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("unshare (util-linux) runs Salt's python");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(&serde_json::to_vec(doc).unwrap())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "oracle.py modules in a private host failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("oracle.py writes JSON")
}

/// `maid call --local -c CONFIG --out json WORDS` inside `dir`'s private
/// host: `{"return", "retcode"}`.
fn maid_in(dir: &Path, config: &Path, words: &[&str]) -> Value {
    let config = config.display().to_string();
    let mut cmd = maid_local(dir, &["--out", "json", "-c", &config]);
    cmd.arg("--").args(words);
    let out = in_private_host(dir, &cmd).output().expect("run maid");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{words:?}: {e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    json!({ "return": v["local"].clone(), "retcode": out.status.code() })
}

/// A maid config: the state, user and group plugins with `maid init`'s
/// grants, less what `strip` takes out (`"exec"`: no exec for user and
/// group; a function name: left out of state's `call`).
fn maid_config(dir: &Path, strip: &[&str]) -> PathBuf {
    let mut state = crate::common::init_grants("state");
    state.call.retain(|f| !strip.contains(&f.as_str()));
    let mut user = crate::common::init_grants("user");
    let mut group = crate::common::init_grants("group");
    if strip.contains(&"exec") {
        user.exec.clear();
        group.exec.clear();
    }
    let mut plugins = std::collections::BTreeMap::new();
    plugins.insert("state", state);
    plugins.insert("user", user);
    plugins.insert("group", group);
    plugins.insert("test", Default::default());
    let mut table = std::collections::BTreeMap::new();
    table.insert("plugins", plugins);
    let path = dir.join("maid.toml");
    std::fs::write(&path, toml::to_string(&table).unwrap()).unwrap();
    path
}

/// The lines of a side's account files that name test accounts.
fn accounts(dir: &Path) -> Vec<String> {
    let mut lines = Vec::new();
    for file in ["passwd", "group", "shadow", "gshadow"] {
        let text = std::fs::read_to_string(dir.join("etc").join(file)).unwrap();
        for line in text.lines().filter(|l| l.starts_with("maidt")) {
            let line = if file == "shadow" {
                // The day of the last change is today's on each side.
                let mut f: Vec<&str> = line.split(':').collect();
                f[2] = "DAY";
                f.join(":")
            } else {
                line.to_string()
            };
            lines.push(format!("{file}: {line}"));
        }
    }
    lines
}

/// The grains both sides are told (Salt's) or detect (maid's) that the
/// modules look at.
fn grains() -> Value {
    json!({"kernel": "Linux", "os": "Debian", "os_family": "Debian", "osfinger": "Debian-12"})
}

#[test]
fn user_and_group_states_apply_as_salt_applies_them() {
    let salt_tmp = tempfile::tempdir().unwrap();
    let maid_tmp = tempfile::tempdir().unwrap();
    let trees = [("create", CREATE), ("change", CHANGE), ("remove", REMOVE)];
    let salt_dir = private_host(salt_tmp.path(), &trees);
    let maid_dir = private_host(maid_tmp.path(), &trees);
    let mut calls: Vec<Vec<&str>> = Vec::new();
    for sls in ["users.create", "users.change", "users.remove"] {
        calls.push(vec!["state.sls", sls, "test=True"]);
        calls.push(vec!["state.sls", sls]);
        calls.push(vec!["state.sls", sls]);
    }
    let doc = json!({
        "calls": calls,
        "file_root": salt_dir.join("srv"),
        "grains": grains(),
    });
    let salt_host = salt_dir.clone();
    let salt_side = std::thread::spawn(move || salt_in(&salt_host, &doc));
    let config = maid_config(&maid_dir, &[]);
    let mut maid = Vec::new();
    let mut maid_accounts = Vec::new();
    for words in &calls {
        maid.push(maid_in(&maid_dir, &config, words));
        maid_accounts.push(accounts(&maid_dir));
    }
    let salt = salt_side.join().unwrap();
    let salt = salt.as_array().expect("oracle answers a list");

    let mut differ = Vec::new();
    for ((words, salt), maid) in calls.iter().zip(salt).zip(&maid) {
        let (mut salt, mut maid) = (salt.clone(), maid.clone());
        if salt.get("return").is_some() && salt.get("retcode").is_none() {
            salt["retcode"] = json!(0);
        }
        normalise(&mut salt, &salt_dir.display().to_string());
        normalise(&mut maid, &maid_dir.display().to_string());
        if let Some(at) = first_difference("", &salt, &maid) {
            differ.push(format!("{words:?}\n  {at}"));
        }
    }
    assert!(
        differ.is_empty(),
        "{} of {} runs differ from Salt:\n{}",
        differ.len(),
        calls.len(),
        differ.join("\n")
    );
    assert_eq!(accounts(&maid_dir), accounts(&salt_dir));
    maid_did_what_it_said(&maid, &maid_accounts);
}

/// One state's return in a run.
fn state<'a>(run: &'a Value, tag: &str) -> &'a Value {
    let r = &run["return"][tag];
    assert!(r.is_object(), "no {tag} in {run}");
    r
}

/// The returns say what happened and the files hold it: two runs failing
/// the same way must not pass.
fn maid_did_what_it_said(maid: &[Value], files: &[Vec<String>]) {
    for run in maid {
        assert!(run["return"].is_object(), "a run did not render: {run}");
    }
    let alice = "user_|-maidt-alice_|-maidt-alice_|-present";
    assert_eq!(state(&maid[0], alice)["result"], Value::Null);
    assert_eq!(
        state(&maid[0], alice)["comment"],
        "User maidt-alice set to be added (pending groups: maidt-staff)",
        "the group its group.present will make is pending, as in Salt"
    );
    assert!(
        !files[0].iter().any(|l| l.contains("maidt-alice")),
        "test=True made an account: {:?}",
        files[0]
    );
    let made = state(&maid[1], alice);
    assert_eq!(made["comment"], "New user maidt-alice created", "{made}");
    assert_eq!(made["changes"]["uid"], json!(7200));
    assert_eq!(made["changes"]["fullname"], "Alice Maid");
    assert_eq!(
        made["changes"]["groups"],
        json!(["maidt-alice", "maidt-dev", "maidt-staff"])
    );
    assert!(
        files[1]
            .iter()
            .any(|l| l
                == "passwd: maidt-alice:x:7200:7200:Alice Maid,12,555:/home/maidt-alice:/bin/sh"),
        "{:?}",
        files[1]
    );
    let carol = state(&maid[1], "user_|-missing-group_|-maidt-carol_|-present");
    assert_eq!(carol["result"], json!(false));
    assert_eq!(
        carol["comment"],
        "The following group(s) are not present: maidt-nosuch"
    );
    for run in &maid[2..3] {
        for (tag, r) in run["return"].as_object().unwrap() {
            if tag.contains("missing-group") || tag.contains("conflict") {
                continue;
            }
            assert_eq!(r["changes"], json!({}), "again: {tag}: {r}");
            assert_eq!(r["result"], json!(true), "again: {tag}: {r}");
        }
    }
    let changed = state(&maid[4], alice);
    assert_eq!(changed["comment"], "Updated user maidt-alice", "{changed}");
    assert_eq!(changed["changes"]["shell"], "/bin/bash");
    assert_eq!(changed["changes"]["home"], "/home/maidt-alice2");
    let bob = state(&maid[4], "user_|-maidt-bob_|-maidt-bob_|-present");
    assert_eq!(bob["result"], json!(false));
    assert!(
        bob["comment"]
            .as_str()
            .unwrap()
            .contains("Changing uid (7201 -> 7999) not permitted"),
        "{bob}"
    );
    assert!(
        files[4]
            .iter()
            .any(|l| l.starts_with("passwd: maidt-bob:x:7201:7105:"))
    );
    let gone = state(&maid[7], "user_|-maidt-bob_|-maidt-bob_|-absent");
    assert_eq!(gone["comment"], "Removed user maidt-bob", "{gone}");
    // maidt-bob's own group stays: it was no longer his primary group,
    // so userdel leaves it, on both sides.
    assert!(
        !files[7]
            .iter()
            .any(|l| l.starts_with("passwd:") || l.starts_with("shadow:")),
        "{:?}",
        files[7]
    );
    assert_eq!(
        state(&maid[8], "user_|-maidt-bob_|-maidt-bob_|-absent")["comment"],
        "User maidt-bob is not present"
    );
}

/// Without the grants, a user state fails `Denied` and no account
/// changes: `[plugins.user]` (and `group`) without `exec`, and a state plugin whose
/// `call` leaves out `user.add` (or `group.add`).
#[test]
fn user_states_change_nothing_their_grants_do_not_give() {
    let tmp = tempfile::tempdir().unwrap();
    let sls = "maidt-eve:\n  user.present:\n    - uid: 7300\nmaidt-crew:\n  group.present: []\n";
    let dir = private_host(tmp.path(), &[("init", sls)]);
    let before = accounts(&dir);

    let no_exec = maid_config(&dir, &["exec"]);
    let got = maid_in(&dir, &no_exec, &["state.sls", "users"]);
    let eve = state(&got, "user_|-maidt-eve_|-maidt-eve_|-present");
    assert_eq!(eve["result"], json!(false), "{got}");
    assert_eq!(eve["changes"], json!({}), "{got}");
    let comment = eve["comment"].as_str().unwrap();
    assert!(
        comment.starts_with("Denied: ") && comment.contains("exec"),
        "{got}"
    );
    assert_eq!(got["retcode"], json!(2), "{got}");
    assert_eq!(accounts(&dir)[..], before[..], "an account changed");

    let no_add = maid_config(&dir, &["user.add", "group.add"]);
    let got = maid_in(&dir, &no_add, &["state.sls", "users"]);
    for tag in [
        "user_|-maidt-eve_|-maidt-eve_|-present",
        "group_|-maidt-crew_|-maidt-crew_|-present",
    ] {
        let r = state(&got, tag);
        assert_eq!(r["result"], json!(false), "{got}");
        let comment = r["comment"].as_str().unwrap();
        assert!(
            comment.starts_with("Denied: ") && comment.contains(".add"),
            "{got}"
        );
    }
    assert_eq!(accounts(&dir), before, "an account changed");

    // The shadow fields need /etc/shadow, which no grant gives: refused,
    // not ignored.
    let sls = "maidt-eve:\n  user.present:\n    - password: '$6$x$y'\n    - mindays: 1\n";
    std::fs::write(dir.join("srv/users/init.sls"), sls).unwrap();
    let config = maid_config(&dir, &[]);
    let got = maid_in(&dir, &config, &["state.sls", "users"]);
    let eve = state(&got, "user_|-maidt-eve_|-maidt-eve_|-present");
    assert_eq!(eve["result"], json!(false), "{got}");
    assert!(
        eve["comment"]
            .as_str()
            .unwrap()
            .starts_with("Denied: password, mindays need /etc/shadow"),
        "{got}"
    );
    assert_eq!(accounts(&dir), before, "an account changed");
}

/// Names and values an SLS author chooses never become options for
/// useradd, usermod or gpasswd, nor fields or lines of the account files:
/// an option as a name (`-o`, `--badname`), a name with a newline, a
/// colon or a comma, an option as a group or member, a relative home.
/// Each state fails with the module's refusal and no account appears,
/// even with every grant given.
#[test]
fn user_states_never_hand_shadow_utils_an_option_or_a_line() {
    let tmp = tempfile::tempdir().unwrap();
    let sls = r#"
option:
  user.present:
    - name: "-o"
long-option:
  user.present:
    - name: "--badname"
newline:
  user.present:
    - name: "maidt-x\nmaidt-evil:x:0:0::/root:/bin/sh"
colon:
  group.present:
    - name: "maidt-y:x:0:"
comma:
  group.present:
    - name: "maidt-a,maidt-b"
home:
  user.present:
    - name: maidt-home
    - home: ../../etc
group-option:
  group.present:
    - name: maidt-crew
    - addusers:
      - "-r"
"#;
    let dir = private_host(tmp.path(), &[("init", sls)]);
    let before = accounts(&dir);
    let config = maid_config(&dir, &[]);
    let got = maid_in(&dir, &config, &["state.sls", "users"]);
    let refused = [
        (
            "user_|-option_|--o_|-present",
            "name \"-o\" begins with '-'",
        ),
        (
            "user_|-long-option_|---badname_|-present",
            "name \"--badname\" begins with '-'",
        ),
        (
            "user_|-newline_|-maidt-x\nmaidt-evil:x:0:0::/root:/bin/sh_|-present",
            "holds ':'",
        ),
        ("group_|-colon_|-maidt-y:x:0:_|-present", "holds ':'"),
        ("group_|-comma_|-maidt-a,maidt-b_|-present", "holds ','"),
        (
            "user_|-home_|-maidt-home_|-present",
            "home \"../../etc\" is not an absolute path",
        ),
        (
            "group_|-group-option_|-maidt-crew_|-present",
            "member \"-r\" begins with '-'",
        ),
    ];
    for (tag, why) in refused {
        let r = state(&got, tag);
        assert_eq!(r["result"], json!(false), "{tag}: {got}");
        let comment = r["comment"].as_str().unwrap_or_default();
        assert!(comment.contains(why), "{tag}: {comment}");
    }
    assert_eq!(got["retcode"], json!(2), "{got}");
    // maidt-crew itself was made (groupadd maidt-crew), its member never.
    let after = accounts(&dir);
    let added: Vec<&String> = after.iter().filter(|l| !before.contains(l)).collect();
    assert!(
        added.iter().all(
            |l| l.starts_with("group: maidt-crew:x:") && l.ends_with(':')
                || l.starts_with("gshadow: maidt-crew:")
        ),
        "{added:?}"
    );
    for word in [
        "evil",
        "badname",
        "maidt-home",
        "maidt-y",
        "maidt-a",
        ":0:0:",
    ] {
        assert!(
            !after
                .iter()
                .any(|l| l.contains(word) && !before.contains(l)),
            "{word} reached the account files: {after:?}"
        );
    }
    assert!(!dir.join("home/maidt-home").exists());
}
