//! The state system against Salt 3008.4's own: every SLS tree in
//! `tests/states/` applied by Salt's `state` module (`salt-call --local`'s
//! loader, through `tests/salt/oracle.py modules`) and by `maid call
//! --local`, each side in a copy of its own, with the same words in the
//! same order — `test=True` first, then for real, then again (nothing left
//! to change) — and what `show_sls` and `show_low_sls` compile. The
//! returns are compared whole, less the times and the pids, which differ
//! from run to run; render errors are compared by their first words
//! (the template engines word their errors differently).

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};

use crate::common::guests;
use crate::common::salt::oracle;

/// Trees run with their own words instead of `state.sls TREE`.
const SPECIAL: &[&str] = &["renderers", "top"];

/// Every tree's directory name.
fn trees() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/states");
    let mut out: Vec<String> = std::fs::read_dir(&dir)
        .expect("tests/states")
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    out.sort();
    out
}

/// The calls both sides make, in order.
fn calls() -> Vec<Vec<String>> {
    let w = |words: &[&str]| words.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let mut out = Vec::new();
    for tree in trees() {
        if SPECIAL.contains(&tree.as_str()) {
            continue;
        }
        out.push(w(&["state.sls", &tree, "test=True"]));
        out.push(w(&["state.sls", &tree]));
        out.push(w(&["state.sls", &tree]));
        out.push(w(&["state.show_sls", &tree]));
        out.push(w(&["state.show_low_sls", &tree]));
    }
    let mods = "renderers,renderers.j,renderers.jj";
    out.push(w(&["state.sls", mods]));
    out.push(w(&["state.show_low_sls", mods]));
    out.push(w(&["state.apply", "basic", "test=True"]));
    out.push(w(&["state.apply", "basic,require", "exclude=require"]));
    out.push(w(&["state.test", "require"]));
    out.push(w(&["state.top", "top/top.sls"]));
    out.push(w(&["state.top", "top/top.sls", "test=True"]));
    out.push(w(&["state.sls_id", "restart", "watch"]));
    out.push(w(&["state.sls_id", "depends", "require_fail"]));
    out.push(w(&["state.sls_id", "nosuchid", "basic"]));
    out.push(w(&[
        "state.single",
        "test.succeed_with_changes",
        "name=single",
    ]));
    out.push(w(&[
        "state.single",
        "test.succeed_with_changes",
        "name=single",
        "test=True",
    ]));
    out.push(w(&["state.single", "cmd.run", "name=echo single"]));
    out.push(w(&["state.single", "test.nosuch", "name=x"]));
    out.push(w(&["state.running"]));
    // Globs among a run's SLS names and a top file's, as for includes.
    out.push(w(&["state.sls", "include_glob.web.[ac]"]));
    out.push(w(&["state.sls", "include_glob.web.*,nosuch.*"]));
    out.push(w(&["state.show_sls", "include_glob.web.?"]));
    out.push(w(&["state.top", "include_glob/top.sls"]));
    // The file server's listings, over trees no state writes into (a
    // string prefix: `file_recurse` takes `file_recurse_clean` too).
    out.push(w(&["cp.list_master", "prefix=file_recurse"]));
    out.push(w(&["cp.list_master_dirs", "base", "file_recurse/tree"]));
    out.push(w(&["cp.list_master_dirs", "prefix=include_glob/"]));
    out.push(w(&["cp.list_master", "saltenv=prod"]));
    out.push(w(&["cp.list_states"]));
    out
}

/// A copy of the trees under `root/srv`, with `@ROOT@` in them naming
/// `root` (where the states may make their changes).
fn copy_trees(root: &Path) {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/states");
    copy_dir(&from, &root.join("srv"), &root.display().to_string());
}

pub(crate) fn copy_dir(from: &Path, to: &Path, root: &str) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let dest = to.join(e.file_name());
        if e.path().is_dir() {
            copy_dir(&e.path(), &dest, root);
        } else {
            let bytes = std::fs::read(e.path()).unwrap();
            let bytes = match String::from_utf8(bytes) {
                Ok(text) => text.replace("@ROOT@", root).into_bytes(),
                Err(e) => e.into_bytes(),
            };
            std::fs::write(dest, bytes).unwrap();
        }
    }
}

/// `maid call --local --id local --retcode-passthrough FLAGS` in `cwd`,
/// serving `cwd/srv`, with the test build's plugins and no config but
/// what `flags` name.
pub(crate) fn maid_local(cwd: &Path, flags: &[&str]) -> std::process::Command {
    let mut cmd = crate::common::maid_command();
    cmd.args(["call", "--local", "--id", "local", "--retcode-passthrough"])
        .args(flags)
        .arg("--file-root")
        .arg(cwd.join("srv"))
        .current_dir(cwd)
        .env("MAID_PLUGIN_DIR", guests::PLUGINS_DIR)
        .env("MAID_CACHE_DIR", crate::common::shared_cache())
        .env_remove("MAID_CONFIG");
    cmd
}

fn maid_call(cwd: &Path, words: &[String]) -> Output {
    maid_local(cwd, &["--out", "json"])
        .arg("--")
        .args(words)
        .output()
        .expect("run maid")
}

/// One maid call as the oracle reports a Salt call: `{"return", "retcode"}`
/// or `{"error"}`.
pub(crate) fn maid_answer(cwd: &Path, words: &[String]) -> Value {
    answer_of(maid_call(cwd, words))
}

/// A finished maid call as the oracle reports a Salt call.
pub(crate) fn answer_of(out: Output) -> Value {
    let code = out.status.code().unwrap_or(-1);
    match serde_json::from_slice::<Value>(&out.stdout) {
        Ok(v) if v.get("local").is_some() => {
            json!({ "return": v["local"].clone(), "retcode": code })
        }
        _ => json!({ "error": String::from_utf8_lossy(&out.stderr).trim(), "retcode": code }),
    }
}

/// Maid's answers to `calls`, in order: the calls on one tree (or set of
/// SLS names) one after another, different trees side by side — each
/// tree changes only paths of its own.
fn maid_answers(dir: &Path, calls: &[Vec<String>]) -> Vec<Value> {
    let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
    for (i, words) in calls.iter().enumerate() {
        let key = words.get(1).cloned().unwrap_or_default();
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, g)) => g.push(i),
            None => groups.push((key, vec![i])),
        }
    }
    let answers = std::sync::Mutex::new(vec![Value::Null; calls.len()]);
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..3 {
            scope.spawn(|| {
                loop {
                    let g = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let Some((_, group)) = groups.get(g) else {
                        break;
                    };
                    for &i in group {
                        let answer = maid_answer(dir, &calls[i]);
                        answers.lock().unwrap()[i] = answer;
                    }
                }
            });
        }
    });
    answers.into_inner().unwrap()
}

/// What differs from run to run (times, pids) taken out, and each side's
/// own directory named alike.
pub(crate) fn normalise(v: &mut Value, root: &str) {
    match v {
        Value::Object(o) => {
            o.remove("start_time");
            o.remove("duration");
            if o.contains_key("retcode") && o.contains_key("stdout") {
                o.remove("pid");
            }
            let mut out = serde_json::Map::new();
            for (k, mut x) in std::mem::take(o) {
                normalise(&mut x, root);
                out.insert(k.replace(root, "@ROOT@"), x);
            }
            *o = out;
        }
        Value::Array(a) => a.iter_mut().for_each(|x| normalise(x, root)),
        Value::String(s) => {
            if s.contains(root) {
                *s = s.replace(root, "@ROOT@");
            }
            // `file.recurse`'s comment, one `#### PATH ####` block a path,
            // in the order of Salt's sets of paths (Python's string hash,
            // which changes from process to process): in path order.
            if s.starts_with("#### ") {
                let mut blocks: Vec<&str> = s.split("\n\n#### ").collect();
                blocks[0] = blocks[0].trim_start_matches("#### ");
                blocks.sort();
                *s = format!("#### {}", blocks.join("\n\n#### "));
            }
            if let Some(i) = s
                .find("failed: ")
                .filter(|_| s.starts_with("Rendering SLS"))
            {
                s.truncate(i + "failed:".len());
            }
        }
        _ => {}
    }
}

/// Where two answers first differ: a path of keys and both values.
pub(crate) fn first_difference(path: &str, salt: &Value, maid: &Value) -> Option<String> {
    match (salt, maid) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, x) in a {
                let p = format!("{path}/{k}");
                match b.get(k) {
                    None => return Some(format!("{p}: salt {x}, maid has none")),
                    Some(y) => {
                        if let Some(d) = first_difference(&p, x, y) {
                            return Some(d);
                        }
                    }
                }
            }
            b.iter()
                .find(|(k, _)| !a.contains_key(*k))
                .map(|(k, y)| format!("{path}/{k}: salt has none, maid {y}"))
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => a
            .iter()
            .zip(b)
            .enumerate()
            .find_map(|(i, (x, y))| first_difference(&format!("{path}/{i}"), x, y)),
        _ => (salt != maid).then(|| format!("{path}: salt {salt}, maid {maid}")),
    }
}

/// A Salt exception and maid's failed call are the same answer when
/// maid's words hold Salt's message.
fn same_failure(salt: &Value, maid: &Value) -> bool {
    let Some(message) = salt.get("message").and_then(Value::as_str) else {
        return false;
    };
    maid["retcode"] != json!(0)
        && maid
            .to_string()
            .contains(&json!(message).to_string().trim_matches('"').to_string())
}

/// Where maid's answer to `words` differs from Salt's, each normalised
/// with its own root (a Salt return without a retcode is a 0, as
/// salt-call exits): `None` where they agree or fail alike.
pub(crate) fn differs(
    words: &[String],
    mut salt: Value,
    mut maid: Value,
    salt_root: &Path,
    maid_root: &Path,
) -> Option<String> {
    if salt.get("return").is_some() && salt.get("retcode").is_none() {
        salt["retcode"] = json!(0);
    }
    normalise(&mut salt, &salt_root.display().to_string());
    normalise(&mut maid, &maid_root.display().to_string());
    if salt == maid || same_failure(&salt, &maid) {
        return None;
    }
    let at = first_difference("", &salt, &maid).unwrap_or_default();
    Some(format!("{words:?}\n  {at}"))
}

/// No call of `total` differs from Salt ([`differs`]' answers).
pub(crate) fn agree(differ: &[String], total: usize) {
    assert!(
        differ.is_empty(),
        "{} of {total} calls differ from Salt:\n{}",
        differ.len(),
        differ.join("\n")
    );
}

#[test]
fn sls_trees_apply_as_salt_applies_them() {
    let salt_dir = tempfile::tempdir().unwrap();
    let maid_dir = tempfile::tempdir().unwrap();
    copy_trees(salt_dir.path());
    copy_trees(maid_dir.path());
    let grains = maid_answer(maid_dir.path(), &["grains.items".to_string()])["return"].clone();
    assert!(grains.is_object(), "maid's grains: {grains}");
    let calls = calls();
    let doc = json!({
        "calls": calls,
        "file_root": salt_dir.path().join("srv"),
        "grains": grains,
    });
    let salt_side = std::thread::spawn(move || oracle("modules", &doc));
    let maid = maid_answers(maid_dir.path(), &calls);
    let salt = salt_side.join().unwrap();
    let salt = salt.as_array().expect("oracle answers a list").clone();
    let differ: Vec<String> = calls
        .iter()
        .zip(salt)
        .zip(maid)
        .filter_map(|((words, salt), maid)| {
            differs(words, salt, maid, salt_dir.path(), maid_dir.path())
        })
        .collect();
    agree(&differ, calls.len());
}

/// A top file that selects by nodegroup (`- match: nodegroup`, `N@`
/// words in compound targets, a group of another group, a group given
/// as a list, a group nobody defined) applies what Salt's applies: Salt
/// reads the nodegroups from its options (a minion asks its master for
/// them), maid from the master's `[master] nodegroups` — in the job the
/// master signs, and for `maid call --local` in its own config, as
/// salt-call --local reads its own. A caller's own `__master_opts__`
/// names no group.
#[test]
fn top_files_match_nodegroups_as_salt_does() {
    let dir = tempfile::tempdir().unwrap();
    let srv = dir.path().join("srv");
    std::fs::create_dir_all(&srv).unwrap();
    let top = "base:
  web:
    - match: nodegroup
    - ng_web
  db:
    - match: nodegroup
    - ng_db
  nosuch:
    - match: nodegroup
    - ng_nosuch
  'N@both and not E@^x':
    - ng_both
  'N@nosuch or L@other':
    - ng_nosuch_compound
  'N@nested':
    - ng_nested
";
    std::fs::write(srv.join("top.sls"), top).unwrap();
    for sls in [
        "ng_web",
        "ng_db",
        "ng_nosuch",
        "ng_both",
        "ng_nosuch_compound",
        "ng_nested",
    ] {
        std::fs::write(
            srv.join(format!("{sls}.sls")),
            format!("{sls}_state:\n  test.succeed_without_changes\n"),
        )
        .unwrap();
    }
    let nodegroups = json!({
        "web": "L@local,other",
        "db": "E@^db",
        "both": ["local", "x"],
        "nested": "N@web and E@^loc",
    });
    let config = dir.path().join("maid.toml");
    std::fs::write(
        &config,
        "[master]\nnodegroups = { web = \"L@local,other\", db = \"E@^db\", \
         both = [\"local\", \"x\"], nested = \"N@web and E@^loc\" }\n\
         [plugins.state]\nfetch = [\"salt://**\"]\ncall = [\"test.*\"]\n",
    )
    .unwrap();
    let config = config.display().to_string();
    let calls: Vec<Vec<String>> = [
        &["state.show_top"][..],
        &["state.apply"],
        &["state.apply", "test=True"],
    ]
    .iter()
    .map(|w| w.iter().map(|s| s.to_string()).collect())
    .collect();
    let maid = |words: &[String], flags: &[&str]| -> Value {
        answer_of(
            maid_local(dir.path(), flags)
                .arg("--")
                .args(words)
                .output()
                .expect("run maid"),
        )
    };
    let flags = ["--out", "json", "-c", config.as_str()];
    let grains = maid(&["grains.items".to_string()], &flags)["return"].clone();
    assert_eq!(grains["id"], json!("local"), "maid's grains: {grains}");
    let salt = oracle(
        "modules",
        &json!({
            "calls": calls,
            "file_root": srv,
            "grains": grains,
            "nodegroups": nodegroups,
        }),
    );
    let salt = salt.as_array().expect("oracle answers a list").clone();
    let differ: Vec<String> = calls
        .iter()
        .zip(salt)
        .filter_map(|(words, salt)| {
            differs(words, salt, maid(words, &flags), dir.path(), dir.path())
        })
        .collect();
    agree(&differ, calls.len());
    // What matched, named: the groups that select `local`, and no other.
    let top = maid(&calls[0], &flags)["return"]["base"].clone();
    assert_eq!(top, json!(["ng_web", "ng_both", "ng_nested"]), "{top}");
    // Without the config's nodegroups, a caller's own `__master_opts__`
    // is taken out before the call: no group selects anyone.
    let bare = dir.path().join("bare.toml");
    std::fs::write(
        &bare,
        "[plugins.state]\nfetch = [\"salt://**\"]\ncall = [\"test.*\"]\n",
    )
    .unwrap();
    let bare = bare.display().to_string();
    let forged = maid(
        &[
            "state.show_top".to_string(),
            r#"__master_opts__={"nodegroups": {"web": "L@local", "both": "L@local", "nested": "L@local"}}"#
                .to_string(),
        ],
        &["--out", "json", "-c", bare.as_str()],
    );
    assert_eq!(forged["return"], json!({}), "{forged}");
}

/// `maid call --local -c CONFIG` in `cwd`, serving `cwd/srv`.
pub(crate) fn maid_call_config(cwd: &Path, config: &Path, words: &[&str]) -> Value {
    maid_call_config_env(cwd, config, words, &[])
}

/// [`maid_call_config`] with the variables `env` set for maid (and for
/// the programs it starts).
pub(crate) fn maid_call_config_env(
    cwd: &Path,
    config: &Path,
    words: &[&str],
    env: &[(&str, String)],
) -> Value {
    let config = config.display().to_string();
    let out = maid_local(cwd, &["--out", "json", "-c", &config])
        .envs(env.iter().map(|(k, v)| (k, v)))
        .arg("--")
        .args(words)
        .output()
        .expect("run maid");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{words:?}: {e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    json!({ "return": v["local"].clone(), "retcode": out.status.code() })
}

/// A `cmd.script` state runs a script only as the `cmd` plugin's own
/// grants allow: its `fetch` grant names the `salt://` scripts it may
/// read, its `exec` grant what may start. Without either (or with a
/// `fetch` grant for other scripts) the state fails `Denied` and the
/// script never runs; with both it runs (the control).
#[test]
fn a_script_state_is_held_to_cmds_fetch_and_exec_grants() {
    let dir = tempfile::tempdir().unwrap();
    let srv = dir.path().join("srv");
    std::fs::create_dir_all(srv.join("attack")).unwrap();
    let marker = dir.path().join("scripted");
    std::fs::write(
        srv.join("attack/touch.sh"),
        format!("#!/bin/sh\ntouch {}\n", marker.display()),
    )
    .unwrap();
    std::fs::write(
        srv.join("attack/script.sls"),
        "run_it:\n  cmd.script:\n    - source: salt://attack/touch.sh\n",
    )
    .unwrap();
    let state = "[plugins.state]\nfetch = [\"salt://**\"]\ncall = [\"cmd.script\", \"test.*\"]\n";
    let exec = "exec = [\"/usr/bin/*\", \"/bin/*\"]\nshell = true\nenv = [\"PATH\"]\n";
    let run = |name: &str, cmd: String| -> Value {
        let config = dir.path().join(format!("{name}.toml"));
        std::fs::write(&config, format!("{state}[plugins.cmd]\n{cmd}")).unwrap();
        maid_call_config(dir.path(), &config, &["state.sls", "attack.script"])
    };
    for (name, cmd) in [
        ("no_fetch", exec.to_string()),
        ("no_exec", "fetch = [\"salt://**\"]\n".to_string()),
        (
            "other_fetch",
            format!("{exec}fetch = [\"salt://elsewhere/**\"]\n"),
        ),
    ] {
        let got = run(name, cmd);
        let ret = &got["return"]["cmd_|-run_it_|-run_it_|-script"];
        assert_eq!(ret["result"], json!(false), "{name}: {got}");
        assert!(
            ret["comment"]
                .as_str()
                .unwrap_or_default()
                .starts_with("Denied: "),
            "{name}: {got}"
        );
        assert_eq!(got["retcode"], json!(2), "{name}: {got}");
        assert!(!marker.exists(), "{name}: a denied script ran");
    }
    let got = run("granted", format!("{exec}fetch = [\"salt://**\"]\n"));
    assert_eq!(
        got["return"]["cmd_|-run_it_|-run_it_|-script"]["result"],
        json!(true),
        "{got}"
    );
    assert!(marker.exists(), "the granted script did not run: {got}");
}

/// A state changes only what the grants of the module that makes the
/// change allow: `cmd.run` under a `cmd` plugin without `exec`, a state
/// plugin whose `call` grant leaves out the function a state (or a
/// template's `salt[...]`) needs, an SLS reaching out of the file root:
/// each fails `Denied` (or does not render), and nothing is changed.
#[test]
fn a_state_is_held_to_the_grants_of_the_module_that_makes_its_change() {
    let dir = tempfile::tempdir().unwrap();
    let srv = dir.path().join("srv");
    std::fs::create_dir_all(srv.join("attack")).unwrap();
    let marker = dir.path().join("touched");
    std::fs::write(
        srv.join("attack/init.sls"),
        format!(
            "make_marker:\n  cmd.run:\n    - name: touch {}\n",
            marker.display()
        ),
    )
    .unwrap();
    std::fs::write(
        srv.join("attack/template.sls"),
        format!(
            "{{% set out = salt['cmd.run']('touch {}') %}}\nx:\n  test.nop\n",
            marker.display()
        ),
    )
    .unwrap();
    std::fs::write(
        srv.join("attack/escape.sls"),
        "{% include '../../../../etc/passwd' %}\n",
    )
    .unwrap();
    std::fs::write(
        srv.join("attack/bomb.sls"),
        "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n\
         c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n\
         e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: [*e, *e, *e, *e, *e, *e, *e, *e, *e]\n",
    )
    .unwrap();

    // The state plugin may call cmd.run_all, but cmd may start nothing.
    let no_exec = dir.path().join("no_exec.toml");
    std::fs::write(
        &no_exec,
        "[plugins.state]\nfetch = [\"salt://**\"]\ncall = [\"cmd.run_all\", \"cmd.retcode\", \"test.*\"]\n\
         [plugins.cmd]\n[plugins.test]\n",
    )
    .unwrap();
    let got = maid_call_config(dir.path(), &no_exec, &["state.sls", "attack"]);
    let ret = &got["return"]
        ["cmd_|-make_marker_|-touch ".to_string() + &marker.display().to_string() + "_|-run"];
    assert_eq!(ret["result"], json!(false), "{got}");
    let comment = ret["comment"].as_str().unwrap();
    assert!(
        comment.starts_with("Denied: ") && comment.contains("exec"),
        "{got}"
    );
    assert_eq!(got["retcode"], json!(2), "{got}");
    assert!(!marker.exists(), "a denied cmd.run touched its file");

    // The state plugin may not call cmd.* at all: the state, and a
    // template's salt['cmd.run'], are refused before cmd runs.
    let no_call = dir.path().join("no_call.toml");
    std::fs::write(
        &no_call,
        "[plugins.state]\nfetch = [\"salt://**\"]\ncall = [\"test.*\"]\n\
         [plugins.cmd]\nexec = [\"/usr/bin/*\", \"/bin/*\"]\nshell = true\nenv = [\"PATH\"]\n[plugins.test]\n",
    )
    .unwrap();
    let got = maid_call_config(dir.path(), &no_call, &["state.sls", "attack"]);
    let ret = &got["return"]
        ["cmd_|-make_marker_|-touch ".to_string() + &marker.display().to_string() + "_|-run"];
    assert_eq!(ret["result"], json!(false), "{got}");
    assert!(
        ret["comment"].as_str().unwrap().contains("Denied: "),
        "{got}"
    );
    let got = maid_call_config(dir.path(), &no_call, &["state.sls", "attack.template"]);
    assert_eq!(got["retcode"], json!(1), "{got}");
    let errors = got["return"].as_array().expect("a render error list");
    assert!(
        errors[0]
            .as_str()
            .unwrap()
            .starts_with("Rendering SLS 'base:attack.template' failed"),
        "{got}"
    );
    assert!(
        !marker.exists(),
        "a template ran cmd.run without the call grant"
    );

    // An include that climbs out of the file root, and a YAML bomb, do
    // not render; neither reads nor builds what it asks for.
    let got = maid_call_config(dir.path(), &no_call, &["state.sls", "attack.escape"]);
    assert_eq!(got["retcode"], json!(1), "{got}");
    assert!(!got.to_string().contains("root:x:0:0"), "{got}");
    let got = maid_call_config(dir.path(), &no_call, &["state.show_sls", "attack.bomb"]);
    assert_eq!(got["retcode"], json!(1), "{got}");

    // Without fetch the state plugin reads no SLS at all.
    let no_fetch = dir.path().join("no_fetch.toml");
    std::fs::write(
        &no_fetch,
        "[plugins.state]\ncall = [\"test.*\"]\n[plugins.test]\n",
    )
    .unwrap();
    let got = maid_call_config(dir.path(), &no_fetch, &["state.sls", "attack"]);
    assert_eq!(got["retcode"], json!(1), "{got}");
    assert!(got["return"].to_string().contains("Denied"), "{got}");
    assert!(!marker.exists());
}

/// What salt-call prints for a state run, as it prints it (no colour):
/// `salt-call --local` with its own root and `file_roots` in `dir`.
fn salt_call_text(dir: &Path, words: &[&str]) -> (String, Option<i32>) {
    let conf = dir.join("salt");
    std::fs::create_dir_all(conf.join("root")).unwrap();
    std::fs::write(
        conf.join("minion"),
        format!(
            "id: local\nroot_dir: {}\nfile_client: local\nfile_roots:\n  base:\n    - {}\n",
            conf.join("root").display(),
            dir.join("srv").display()
        ),
    )
    .unwrap();
    let out = std::process::Command::new(crate::common::salt::venv().join("bin/salt-call"))
        .args(["--local", "--no-color", "--retcode-passthrough", "-c"])
        .arg(&conf)
        .args(words)
        .current_dir(dir)
        .output()
        .expect("run salt-call");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.status.code(),
    )
}

/// The same words through `maid call --local`, as printed.
fn maid_call_text(dir: &Path, words: &[&str]) -> (String, Option<i32>) {
    let mut flags = vec!["--no-color"];
    flags.extend(words.iter().take_while(|w| w.starts_with("--")));
    let out = maid_local(dir, &flags)
        .arg("--")
        .args(words.iter().skip_while(|w| w.starts_with("--")))
        .output()
        .expect("run maid");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.status.code(),
    )
}

/// Times and this side's directory taken out of printed text.
fn normalise_text(text: &str, root: &Path) -> String {
    let root = root.display().to_string();
    let mut after_pid = false;
    text.lines()
        .map(|l| {
            let l = l.replace(&root, "@ROOT@");
            let t = l.trim_start();
            let indent = &l[..l.len() - t.len()];
            let was_pid = std::mem::replace(&mut after_pid, t == "pid:");
            if was_pid && t.bytes().all(|b| b.is_ascii_digit()) {
                format!("{indent}PID")
            } else if let Some(i) = l.find(" - Started: ") {
                // A terse line ends with its times.
                l[..i].to_string()
            } else if t.starts_with("Started:")
                || t.starts_with("Duration:")
                || t.starts_with("Total run time:")
            {
                format!("{indent}{}", t.split(':').next().unwrap())
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `salt-call`'s text for a state run — the `highstate` outputter with
/// its summary, `--state-output` and `--state-verbose`, and the exit
/// status — is maid's, for runs that succeed, fail, change and compile
/// badly.
#[test]
fn state_runs_print_as_salt_call_prints_them() {
    let cases: &[&[&str]] = &[
        &["state.sls", "basic"],
        &["state.apply", "watch"],
        &["state.sls", "require_fail", "test=True"],
        &["--state-output=terse", "state.sls", "names"],
        &[
            "--state-output=changes",
            "--state-verbose=False",
            "state.sls",
            "onchanges",
        ],
        &["--state-output=mixed", "state.sls", "any"],
        &["state.sls", "cycle"],
        &["state.single", "test.succeed_with_changes", "name=one"],
        &["state.show_low_sls", "require"],
    ];
    let salt_dir = tempfile::tempdir().unwrap();
    let maid_dir = tempfile::tempdir().unwrap();
    copy_trees(salt_dir.path());
    copy_trees(maid_dir.path());
    let mut differ = Vec::new();
    for words in cases {
        let (salt, salt_code) = salt_call_text(salt_dir.path(), words);
        let (maid, maid_code) = maid_call_text(maid_dir.path(), words);
        let (salt, maid) = (
            normalise_text(&salt, salt_dir.path()),
            normalise_text(&maid, maid_dir.path()),
        );
        if salt != maid || salt_code != maid_code {
            differ.push(format!(
                "{words:?}: exit salt {salt_code:?}, maid {maid_code:?}\n--- salt\n{salt}\n--- maid\n{maid}"
            ));
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n\n"));
}

/// What a master pushes for its state runs is what lies under its
/// file_roots and nothing else: a link leading out (to a secret on the
/// master's host) is not stored, a link loop does not hang the push, and
/// an earlier root's file wins over a later one's.
#[tokio::test]
async fn a_master_pushes_only_what_its_file_roots_hold() {
    use redis::AsyncCommands;
    let redis = crate::common::redis::RedisServer::start();
    let bus = maid_bus::Bus::new(&redis.config()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (dir.path().join("first"), dir.path().join("second"));
    std::fs::create_dir_all(first.join("web")).unwrap();
    std::fs::create_dir_all(&second).unwrap();
    std::fs::write(first.join("top.sls"), "base: {'*': [web]}\n").unwrap();
    std::fs::write(first.join("web/init.sls"), "x:\n  test.nop\n").unwrap();
    std::fs::write(second.join("top.sls"), "shadowed\n").unwrap();
    std::fs::write(second.join("extra.sls"), "y:\n  test.nop\n").unwrap();
    let secret = dir.path().join("secret.key");
    std::fs::write(&secret, "PRIVATE").unwrap();
    std::os::unix::fs::symlink(&secret, first.join("web/leak.sls")).unwrap();
    std::os::unix::fs::symlink(&first, first.join("web/loop")).unwrap();
    std::os::unix::fs::symlink(first.join("web/init.sls"), first.join("alias.sls")).unwrap();

    let mut conn = bus.connect().await.unwrap();
    let pushed =
        maid_bus::filestore::push_tree(&mut conn, "base", &[first.clone(), second.clone()], None)
            .await
            .unwrap();
    let mut names: Vec<&str> = pushed.iter().map(|p| p.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["alias.sls", "extra.sls", "top.sls", "web/init.sls"]);
    let index: std::collections::HashMap<String, String> =
        conn.hgetall(maid_bus::filestore::INDEX_KEY).await.unwrap();
    assert!(!index.contains_key("web/leak.sls"), "{index:?}");
    let top = pushed.iter().find(|p| p.name == "top.sls").unwrap();
    assert_eq!(
        top.size,
        "base: {'*': [web]}\n".len() as u64,
        "the first root's top.sls wins"
    );
}

/// File states through the file plugin's grants: outside the granted
/// directory, in a read-only one, or through a link that leads out of
/// it, every file state fails `Denied` and nothing is written.
#[test]
fn file_states_change_nothing_their_grants_do_not_give() {
    let dir = tempfile::tempdir().unwrap();
    let (rw, ro, outside) = (
        dir.path().join("rw"),
        dir.path().join("ro"),
        dir.path().join("outside"),
    );
    for d in [&rw, &ro, &outside] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(ro.join("kept.txt"), "kept\n").unwrap();
    std::fs::write(outside.join("target.txt"), "untouched\n").unwrap();
    std::os::unix::fs::symlink(outside.join("target.txt"), rw.join("link.txt")).unwrap();
    std::os::unix::fs::symlink(&outside, rw.join("dirlink")).unwrap();
    let srv = dir.path().join("srv/attack");
    std::fs::create_dir_all(&srv).unwrap();
    let (o, r, w) = (outside.display(), ro.display(), rw.display());
    std::fs::write(
        srv.join("init.sls"),
        format!(
            "out_managed:\n  file.managed:\n    - name: {o}/new.txt\n    - contents: x\n\
             out_dir:\n  file.directory:\n    - name: {o}/newdir\n\
             out_absent:\n  file.absent:\n    - name: {o}/target.txt\n\
             ro_managed:\n  file.managed:\n    - name: {r}/kept.txt\n    - contents: changed\n\
             ro_append:\n  file.append:\n    - name: {r}/kept.txt\n    - text: more\n\
             link_managed:\n  file.managed:\n    - name: {w}/link.txt\n    - contents: through the link\n\
             link_replace:\n  file.replace:\n    - name: {w}/link.txt\n    - pattern: untouched\n    - repl: changed\n\
             dirlink_managed:\n  file.managed:\n    - name: {w}/dirlink/new.txt\n    - contents: x\n\
             climb:\n  file.managed:\n    - name: {w}/../outside/climb.txt\n    - contents: x\n\
             owner:\n  file.managed:\n    - name: {w}/owned.txt\n    - contents: x\n    - user: nobody\n"
        ),
    )
    .unwrap();
    let config = dir.path().join("maid.toml");
    std::fs::write(
        &config,
        format!(
            "[plugins.state]\nfetch = [\"salt://**\"]\ncall = [\"file.*\"]\n\
             [plugins.file]\ndirs = [{{ path = \"{w}\", writable = true }}, {{ path = \"{r}\", writable = false }}]\n"
        ),
    )
    .unwrap();
    for test in [true, false] {
        let mut words = vec!["state.sls", "attack"];
        if test {
            words.push("test=True");
        }
        let got = maid_call_config(dir.path(), &config, &words);
        let ret = got["return"].as_object().unwrap_or_else(|| panic!("{got}"));
        assert_eq!(ret.len(), 10, "{got}");
        for (tag, r) in ret {
            // test=True only reads: a read-only directory may be read to
            // predict a change the real run is then refused.
            if test && tag.contains("_|-ro_") && r["result"].is_null() {
                continue;
            }
            assert_eq!(r["result"], json!(false), "{tag}: {r}");
            let comment = r["comment"].as_str().unwrap_or_default();
            assert!(comment.contains("Denied"), "{tag}: {r}");
        }
        assert_eq!(got["retcode"], json!(2), "{got}");
    }
    assert_eq!(
        std::fs::read_to_string(outside.join("target.txt")).unwrap(),
        "untouched\n"
    );
    assert_eq!(
        std::fs::read_to_string(ro.join("kept.txt")).unwrap(),
        "kept\n"
    );
    let left: Vec<_> = std::fs::read_dir(&outside)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(
        !rw.join("owned.txt").exists(),
        "a file for another owner was written"
    );
}
