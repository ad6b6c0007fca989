//! The `service` states against Salt 3008.4's own, on a machine without a
//! running systemd: each side gets a fake `systemctl` of its own (a shell
//! script that keeps each unit's active and enabled state in files and logs
//! every call), found first on `PATH` — Salt's `systemd_service` through
//! the oracle's `systemd` option, maid's `service` plugin through its
//! `exec` grant. The same SLS tree (running, dead, enabled, disabled, a
//! service that is not there, the `enabled:` typo, watches that restart,
//! reload and force-reload) is applied with `test=True`, for real, and
//! again, and the returns are compared whole, less the times; then what
//! each fake was told to do, and the units' states after, are checked.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::common::salt::oracle;
use crate::states::{first_difference, maid_call_config_env, normalise};

/// `systemctl`, for the tests: a unit is a file in `@DIR@/units`, active
/// with one of its name in `active/`, enabled with one in `enabled/`; one
/// in `fail-start/` or `fail-enable/` makes that fail as systemd does.
/// Every call is logged to `@DIR@/log`.
const FAKE_SYSTEMCTL: &str = r#"#!/bin/sh
PATH=/usr/bin:/bin
D='@DIR@'
echo "$*" >> "$D/log"
while :; do
    case "$1" in
        --no-block|--full|--no-legend|--no-pager|--system) shift ;;
        --version) echo "systemd 252 (252.30-1~deb12u2)"; echo "+PAM +AUDIT"; exit 0 ;;
        *) break ;;
    esac
done
verb=$1
[ $# -gt 0 ] && shift
[ "$1" = -- ] && shift
u=$1
if [ "$verb" = list-unit-files ]; then
    for f in "$D"/units/*; do
        n=${f##*/}
        if [ -e "$D/enabled/$n" ]; then s=enabled; else s=disabled; fi
        echo "$n $s enabled"
    done
    exit 0
fi
if [ "$verb" = status ] && [ -z "$u" ]; then
    echo "State: running"
    exit 0
fi
if [ ! -e "$D/units/$u" ]; then
    case "$verb" in
        is-active) echo inactive; exit 3 ;;
        status) echo "Unit $u could not be found." >&2; exit 4 ;;
        *) echo "Failed to $verb $u: Unit $u not found." >&2; exit 5 ;;
    esac
fi
case "$verb" in
    status)
        echo "* $u"
        echo "     Loaded: loaded (/usr/lib/systemd/system/$u; enabled; preset: enabled)"
        if [ -e "$D/active/$u" ]; then echo "     Active: active (running)"; exit 0; fi
        echo "     Active: inactive (dead)"; exit 3 ;;
    is-active)
        if [ -e "$D/active/$u" ]; then echo active; exit 0; fi
        echo inactive; exit 3 ;;
    is-enabled)
        if [ -e "$D/enabled/$u" ]; then echo enabled; exit 0; fi
        echo disabled; exit 1 ;;
    start|restart)
        if [ -e "$D/fail-start/$u" ]; then
            echo "Job for $u failed because the control process exited with error code." >&2
            echo "See \"systemctl status $u\" and \"journalctl -xeu $u\" for details." >&2
            exit 1
        fi
        : > "$D/active/$u" ;;
    reload|force-reload)
        if [ ! -e "$D/active/$u" ]; then echo "Job for $u failed." >&2; exit 1; fi ;;
    stop) rm -f "$D/active/$u" ;;
    enable)
        if [ -e "$D/fail-enable/$u" ]; then
            echo "Failed to enable unit: Unit $u is masked." >&2
            exit 1
        fi
        : > "$D/enabled/$u" ;;
    disable) rm -f "$D/enabled/$u" ;;
    *) echo "Unknown command verb $verb." >&2; exit 1 ;;
esac
exit 0
"#;

/// The units at the start: (name, active, enabled, what fails). Names no
/// host has in `/etc/init.d`, where Salt would look for a sysvinit script.
const UNITS: &[(&str, bool, bool, &str)] = &[
    ("maidweb", false, false, ""),
    ("maidplain", false, false, ""),
    ("maiddb", true, true, ""),
    ("maidbroken", false, false, "start"),
    ("maidcache", true, true, ""),
    ("maidold", true, true, ""),
    ("maidstop", true, false, ""),
    ("maidgone", false, false, ""),
    ("maidboot", false, false, ""),
    ("maidnoboot", true, true, ""),
    ("maidlocked", false, false, "enable"),
    ("maidapp", true, true, ""),
    ("maidproxy", true, false, ""),
    ("maidforce", true, false, ""),
    ("maididle", false, false, ""),
];

/// Every service state, and what a watch does to each kind.
const SLS: &str = r#"
maidweb:
  service.running:
    - enable: True
    - init_delay: 0.1
maidplain:
  service.running:
    - no_block: True
maiddb:
  service.running: []
maidbroken:
  service.running:
    - enable: True
maidcache:
  service.running:
    - enable: False
maidold:
  service.dead:
    - enable: False
maidstop:
  service.dead:
    - enable: "False"
maidgone:
  service.dead: []
maidboot:
  service.enabled: []
maidnoboot:
  service.disabled: []
maidlocked:
  service.enabled: []
boot-already:
  service.enabled:
    - name: maiddb
noboot-already:
  service.disabled:
    - name: maidgone
nosuch-running:
  service.running:
    - name: maid-nosuch
nosuch-dead:
  service.dead:
    - name: maid-nosuch
nosuch-enabled:
  service.enabled:
    - name: maid-nosuch
nosuch-disabled:
  service.disabled:
    - name: maid-nosuch
typo:
  service.running:
    - name: maiddb
    - enabled: True
config:
  test.succeed_with_changes: []
maidapp:
  service.running:
    - watch:
      - test: config
maidproxy:
  service.running:
    - reload: True
    - watch:
      - test: config
maidforce:
  service.running:
    - reload: True
    - force: True
    - watch:
      - test: config
maididle:
  service.dead:
    - watch:
      - test: config
"#;

/// A host for one side in `dir`: the fake's units as [`UNITS`] says,
/// `srv/services/init.sls` holding `sls`; the fake's directory, to put
/// first on `PATH`, by its real path.
fn fake_host(dir: &Path, sls: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = dir.canonicalize().unwrap();
    for sub in [
        "bin",
        "units",
        "active",
        "enabled",
        "fail-start",
        "fail-enable",
    ] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    for (name, active, enabled, fails) in UNITS {
        let unit = format!("{name}.service");
        std::fs::write(dir.join("units").join(&unit), "").unwrap();
        for (on, sub) in [(*active, "active"), (*enabled, "enabled")] {
            if on {
                std::fs::write(dir.join(sub).join(&unit), "").unwrap();
            }
        }
        if !fails.is_empty() {
            std::fs::write(dir.join(format!("fail-{fails}")).join(&unit), "").unwrap();
        }
    }
    let fake = dir.join("bin/systemctl");
    let script = FAKE_SYSTEMCTL.replace("@DIR@", &dir.display().to_string());
    std::fs::write(&fake, script).unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::create_dir_all(dir.join("srv/services")).unwrap();
    std::fs::write(dir.join("srv/services/init.sls"), sls).unwrap();
    dir.join("bin")
}

/// What the fake was told, a call a line.
fn fake_log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("log")).unwrap_or_default()
}

/// The units active and enabled, by name.
fn unit_states(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for sub in ["active", "enabled"] {
        let mut names: Vec<String> = std::fs::read_dir(dir.join(sub))
            .unwrap()
            .flatten()
            .map(|e| format!("{sub}/{}", e.file_name().to_string_lossy()))
            .collect();
        names.sort();
        out.extend(names);
    }
    out
}

/// A maid config: the state plugin with `maid init`'s grants, service
/// with `service` (TOML lines), test with none.
fn maid_config(dir: &Path, service: &str, call: Option<Vec<String>>) -> PathBuf {
    let state = crate::common::init_grants("state");
    let call = call.unwrap_or(state.call);
    let path = dir.join("maid.toml");
    std::fs::write(
        &path,
        format!(
            "[plugins.state]\nfetch = {:?}\ncall = {call:?}\n[plugins.service]\n{service}\
             [plugins.test]\n",
            state.fetch
        ),
    )
    .unwrap();
    path
}

/// `maid call --local -c CONFIG --out json WORDS` in `dir`, with `bin`
/// first on `PATH`: `{"return", "retcode"}`.
fn maid_state(dir: &Path, bin: &Path, config: &Path, words: &[&str]) -> Value {
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    maid_call_config_env(dir, config, words, &[("PATH", path)])
}

/// `[plugins.service]` lines granting the fake `systemctl` in `bin`.
fn exec_grant(bin: &Path) -> String {
    format!(
        "exec = [{:?}]\nenv = [\"PATH\"]\n",
        bin.join("systemctl").display().to_string()
    )
}

/// One state's return in a run, by its id and function.
fn state<'a>(run: &'a Value, id: &str, name: &str, fun: &str) -> &'a Value {
    &run["return"][format!("service_|-{id}_|-{name}_|-{fun}")]
}

#[test]
fn service_states_apply_as_salt_applies_them() {
    let salt_dir = tempfile::tempdir().unwrap();
    let maid_dir = tempfile::tempdir().unwrap();
    let salt_bin = fake_host(salt_dir.path(), SLS);
    let maid_bin = fake_host(maid_dir.path(), SLS);
    let (salt_dir, maid_dir) = (salt_bin.parent().unwrap(), maid_bin.parent().unwrap());
    let calls: Vec<Vec<&str>> = vec![
        vec!["state.sls", "services", "test=True"],
        vec!["state.sls", "services"],
        vec!["state.sls", "services"],
    ];
    let doc = json!({
        "calls": calls,
        "file_root": salt_dir.join("srv"),
        "grains": {"kernel": "Linux", "os": "Debian", "os_family": "Debian", "osfinger": "Debian-12"},
        "path_prefix": salt_bin,
        "systemd": true,
    });
    let salt_side = std::thread::spawn(move || oracle("modules", &doc));
    let config = maid_config(maid_dir, &exec_grant(&maid_bin), None);
    let maid: Vec<Value> = calls
        .iter()
        .map(|words| maid_state(maid_dir, &maid_bin, &config, words))
        .collect();
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
    maid_did_what_salt_did(salt_dir, maid_dir, &maid);
}

/// The returns say what happened, each fake was told the same, and the
/// units ended alike — so that two runs failing the same way do not pass.
fn maid_did_what_salt_did(salt_dir: &Path, maid_dir: &Path, maid: &[Value]) {
    let (test, real, again) = (&maid[0], &maid[1], &maid[2]);
    let web = state(real, "maidweb", "maidweb", "running");
    assert_eq!(web["changes"], json!({"maidweb": true}), "{web}");
    assert_eq!(
        web["comment"],
        "Service maidweb has been enabled, and is running\nDelayed return for 0.1 seconds"
    );
    assert_eq!(
        state(test, "maidweb", "maidweb", "running")["result"],
        Value::Null
    );
    assert_eq!(
        state(real, "maidplain", "maidplain", "running")["comment"],
        "Started service maidplain"
    );
    let broken = state(real, "maidbroken", "maidbroken", "running");
    assert_eq!(broken["result"], json!(false), "{broken}");
    assert!(
        broken["comment"]
            .as_str()
            .unwrap()
            .starts_with("Job for maidbroken.service failed")
    );
    assert_eq!(
        state(real, "maidold", "maidold", "dead")["comment"],
        "Service maidold has been disabled, and is dead"
    );
    assert_eq!(
        state(real, "maidstop", "maidstop", "dead")["changes"],
        json!({"maidstop": false})
    );
    for (id, done) in [
        ("maidapp", "restarted"),
        ("maidproxy", "reloaded"),
        ("maidforce", "forcefully reloaded"),
    ] {
        let r = state(real, id, id, "running");
        assert_eq!(r["changes"], json!({ id: true }), "{r}");
        assert_eq!(r["comment"], format!("Service {done}"), "{r}");
    }
    let typo = state(real, "typo", "maiddb", "running");
    assert!(
        typo["comment"]
            .as_str()
            .unwrap()
            .contains("non-existent option \"enabled\"")
    );
    assert_eq!(real["retcode"], json!(2));
    let again_web = state(again, "maidweb", "maidweb", "running");
    assert_eq!(
        again_web["comment"],
        "The service maidweb is already running"
    );

    let (salt_log, maid_log) = (fake_log(salt_dir), fake_log(maid_dir));
    for said in [
        "start maidweb.service",
        "enable maidweb.service",
        "--no-block start maidplain.service",
        "stop maidold.service",
        "disable maidcache.service",
        "restart maidapp.service",
        "reload maidproxy.service",
        "--no-block force-reload maidforce.service",
    ] {
        assert!(
            salt_log.lines().any(|l| l == said),
            "Salt's systemctl was not told {said}:\n{salt_log}"
        );
        let (verb, unit) = said.rsplit_once(' ').unwrap();
        let ours = format!("{verb} -- {unit}");
        assert!(
            maid_log.lines().any(|l| l == ours),
            "maid's systemctl was not told {ours}:\n{maid_log}"
        );
    }
    // Tried once a run, never in test=True.
    for log in [&salt_log, &maid_log] {
        let starts = log
            .lines()
            .filter(|l| l.starts_with("start") && l.ends_with("maidbroken.service"));
        assert_eq!(starts.count(), 2, "{log}");
    }
    assert_eq!(unit_states(maid_dir), unit_states(salt_dir));
    assert!(unit_states(maid_dir).contains(&"enabled/maidweb.service".to_string()));
}

/// Without the grants, a service state fails `Denied` and changes
/// nothing: `[plugins.service]` without `exec` for systemctl, and a state
/// plugin whose `call` leaves out `service.start`.
#[test]
fn service_states_change_nothing_their_grants_do_not_give() {
    let dir = tempfile::tempdir().unwrap();
    let sls = "maidweb:\n  service.running:\n    - enable: True\nmaidold:\n  service.dead: []\n";
    let bin = fake_host(dir.path(), sls);
    let dir = bin.parent().unwrap();
    let before = unit_states(dir);
    let grant = exec_grant(&bin);

    let no_exec = maid_config(dir, "", None);
    let got = maid_state(dir, &bin, &no_exec, &["state.sls", "services"]);
    for (id, fun) in [("maidweb", "running"), ("maidold", "dead")] {
        let r = state(&got, id, id, fun);
        assert_eq!(r["result"], json!(false), "{got}");
        assert_eq!(r["changes"], json!({}), "{got}");
        let comment = r["comment"].as_str().unwrap();
        assert!(
            comment.starts_with("Denied: ") && comment.contains("exec"),
            "{got}"
        );
    }
    assert_eq!(got["retcode"], json!(2), "{got}");
    assert_eq!(fake_log(dir), "", "systemctl ran without the exec grant");

    let mut call = crate::common::init_grants("state").call;
    call.retain(|f| f != "service.start" && f != "service.stop");
    let no_start = maid_config(dir, &grant, Some(call));
    let got = maid_state(dir, &bin, &no_start, &["state.sls", "services"]);
    for (id, fun) in [("maidweb", "running"), ("maidold", "dead")] {
        let r = state(&got, id, id, fun);
        assert_eq!(r["result"], json!(false), "{got}");
        assert!(
            r["comment"].as_str().unwrap().starts_with("Denied: "),
            "{got}"
        );
    }
    let log = fake_log(dir);
    assert!(log.contains("is-active -- maidweb.service"), "{log}");
    assert!(
        !log.lines()
            .any(|l| l.starts_with("start") || l.starts_with("stop") || l.starts_with("enable")),
        "{log}"
    );
    assert_eq!(unit_states(dir), before);
}

/// Names a job or an SLS author chooses never become systemctl options or
/// unit files, through the states as through the module: a name that is an
/// option (`--now`), a path to a unit file, or one carrying a newline
/// fails the state and systemctl is told nothing about it, even with every
/// grant given.
#[test]
fn service_states_never_hand_systemctl_an_option_or_a_unit_file() {
    let dir = tempfile::tempdir().unwrap();
    let sls = "option:\n  service.running:\n    - name: '--now'\n    - enable: True\n\
               file:\n  service.enabled:\n    - name: ../../etc/systemd/system/evil.service\n\
               newline:\n  service.dead:\n    - name: \"maidweb\\nstart evil\"\n";
    let bin = fake_host(dir.path(), sls);
    let dir = bin.parent().unwrap();
    let before = unit_states(dir);
    let grant = exec_grant(&bin);
    let config = maid_config(dir, &grant, None);
    let got = maid_state(dir, &bin, &config, &["state.sls", "services"]);
    let refused = [
        ("service_|-option_|---now_|-running", "is not a unit name"),
        (
            "service_|-file_|-../../etc/systemd/system/evil.service_|-enabled",
            "is a path",
        ),
        (
            "service_|-newline_|-maidweb\nstart evil_|-dead",
            "is not a unit name",
        ),
    ];
    for (tag, why) in refused {
        let r = &got["return"][tag];
        assert_eq!(r["result"], json!(false), "{tag}: {got}");
        let comment = r["comment"].as_str().unwrap_or_default();
        assert!(comment.contains(why), "{tag}: {comment}");
        assert_eq!(r["changes"], json!({}), "{tag}: {got}");
    }
    assert_eq!(got["retcode"], json!(2), "{got}");
    let log = fake_log(dir);
    for word in ["--now", "evil", "start", "enable", "stop"] {
        assert!(
            !log.lines().any(|l| l.contains(word)),
            "systemctl was told {word:?}:\n{log}"
        );
    }
    assert_eq!(unit_states(dir), before);
}
