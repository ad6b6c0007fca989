//! Security round 4 on states and grains: a refused mode writes nothing,
//! a refused check is a failure, and grains a job sets widen no API
//! permission. Each attack runs against the real `maid` binary and the
//! real plugins (a real `redis-server` and real agents where a fleet is
//! needed), and each test fails if its hole reopens:
//!
//! * `maid init` granted the grains plugin `set_grains`, so an API user
//!   holding `grains.*` on a maid could `grains.setval role db` and then
//!   pass a `G@role:db` permission there: `maid init` grants no setting
//!   now, and `maid policy` says whom grains a plugin sets are believed by.
//! * A `file.managed` whose mode the host refuses (set-uid, set-gid or
//!   world-writable without `special_modes`) wrote the file, at 0600 or
//!   over the old content, before the refusal: the mode is asked first.
//! * A denied `unless:`/`onlyif:` (or `creates:`) check read as an
//!   answer ("unless condition is true": the state skipped, result True;
//!   or, for a function or `creates`, run as if the condition were
//!   false): it is a failed state saying `Denied:`.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::api::{Fleet, PASSWORD, client, login_as, lowstate};
use crate::states::maid_call_config;
use reqwest::StatusCode;
use serde_json::{Value, json};

// ---------------------------------------------------------------------
// A. Grains a job sets widen no API permission
// ---------------------------------------------------------------------

/// `[plugins.grains]` exactly as `maid init` writes it, as TOML.
fn init_grains_table() -> String {
    let mut plugins = std::collections::BTreeMap::new();
    plugins.insert("grains", crate::common::init_grants("grains"));
    let mut table = std::collections::BTreeMap::new();
    table.insert("plugins", plugins);
    toml::to_string(&table).unwrap()
}

/// An API user holding `grains.*` on maid-1 and `cmd.*`/`test.*` on
/// `G@role:db` tries `grains.setval role db` on maid-1, which runs the
/// grains plugin under `maid init`'s grants, to pass the `G@role:db`
/// entry there. The setting is `Denied` and maid-1 stays beyond the
/// entry (403), while db-1, whose configuration says `role: db`, is
/// within it (the entry works).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grains_a_job_sets_under_maid_inits_grants_widen_no_api_permission() {
    let mut fleet = Fleet::new();
    let db = fleet.signed_agent("db-1", "[grains]\nrole = \"db\"\n");
    let maid = fleet.signed_agent("maid-1", &init_grains_table());
    fleet.agents.extend([db, maid]);
    crate::common::fleet::wait_registered(&fleet.bus, &["db-1", "maid-1"]).await;

    let api = fleet.api_for(
        "",
        &[(
            "op",
            "[{ \"maid-1\" = [\"grains.*\"] }, { \"G@role:db\" = [\"cmd.*\", \"test.*\"] }]",
        )],
    );
    let c = client();
    let (status, body, _) = login_as(&c, &api, "op", PASSWORD).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let op = body["return"][0]["token"].as_str().unwrap().to_string();
    let chunk = |tgt: &str, fun: &str, arg: Value| json!([{"client": "local", "tgt": tgt, "fun": fun, "arg": arg, "timeout": 20}]);

    // The entry works: db-1 is within it, maid-1 is not.
    let (status, body) = lowstate(&c, &api, &op, &chunk("db-1", "test.ping", json!([]))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["return"][0], json!({"db-1": true}));
    for fun in ["test.ping", "cmd.run"] {
        let (status, body) = lowstate(&c, &api, &op, &chunk("maid-1", fun, json!(["id"]))).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{fun} before: {body}");
    }

    // The attack: a grain set through the user's own grains.* entry.
    let (status, set) = lowstate(
        &c,
        &api,
        &op,
        &chunk("maid-1", "grains.setval", json!(["role", "db"])),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{set}");
    // Where the setting was granted, the registry shows it within a
    // moment; give it that moment before asking the API again.
    let mut conn = fleet.bus.connect().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut registered = Value::Null;
    while Instant::now() < deadline {
        let alive = maid_master::jobs::alive_maids(&mut conn, None)
            .await
            .unwrap();
        registered = alive["maid-1"]
            .1
            .as_ref()
            .and_then(|r| r.grains.get("role").cloned())
            .unwrap_or(Value::Null);
        if !registered.is_null() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (after, body) = lowstate(&c, &api, &op, &chunk("maid-1", "test.ping", json!([]))).await;
    let said = set["return"][0]["maid-1"].as_str().unwrap_or_default();
    assert!(
        said.starts_with("Denied: ") && said.contains("set_grains is not granted"),
        "grains.setval under maid init's grants: {set}; registered role {registered}; \
         test.ping on maid-1 then: {after} {body}"
    );
    assert_eq!(registered, Value::Null, "maid-1's registered role");
    assert_eq!(after, StatusCode::FORBIDDEN, "test.ping after: {body}");
    let (status, body) = lowstate(&c, &api, &op, &chunk("maid-1", "cmd.run", json!(["id"]))).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "cmd.run after: {body}");
}

/// `maid policy` (text and JSON) under a configuration whose grains
/// plugin is granted `set_grains`: the reviewer is told that grains it
/// sets are believed by grain-targeted API permissions and pillar top
/// files. Under `maid init`'s configuration there is no such note, since
/// nothing is granted to set grains.
#[test]
fn maid_policy_says_whom_grains_a_plugin_sets_are_believed_by() {
    let dir = tempfile::tempdir().unwrap();
    let policy = |config: &Path, format: &str| -> String {
        let out = crate::common::maid_command()
            .args(["policy", "--format", format, "-c"])
            .arg(config)
            .env("MAID_PLUGIN_DIR", crate::common::guests::PLUGINS_DIR)
            .env("MAID_CACHE_DIR", crate::common::shared_cache())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", crate::common::output_text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // `maid init`'s configuration, trusting a key that exists here.
    let key = maid_agent::trust::generate().unwrap();
    let public = dir.path().join("master.pub");
    std::fs::write(
        &public,
        maid_agent::trust::encode_verifying(&key.verifying_key()),
    )
    .unwrap();
    let init = dir.path().join("init.toml");
    std::fs::write(
        &init,
        maid_config::TEMPLATE.replace("/etc/maid/master.pub", &public.display().to_string()),
    )
    .unwrap();
    let setting = dir.path().join("setting.toml");
    std::fs::write(&setting, "[plugins.grains]\nset_grains = true\n").unwrap();

    let text = policy(&setting, "text");
    let note = text
        .lines()
        .find(|l| l.starts_with("warning:") && l.contains("set_grains"))
        .unwrap_or_else(|| panic!("no set_grains note:\n{text}"));
    assert!(
        note.contains("API permissions") && note.contains("pillar top files"),
        "{note}"
    );
    let json: Value = serde_json::from_str(&policy(&setting, "json")).unwrap();
    let grains = json["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["module"] == "grains")
        .unwrap_or_else(|| panic!("{json}"));
    assert_eq!(grains["granted"]["set_grains"], json!(true), "{grains}");
    assert!(
        grains["granted"]["warnings"]
            .as_array()
            .is_some_and(|w| w.iter().any(|w| w.as_str().unwrap().contains("G@"))),
        "{grains}"
    );

    let text = policy(&init, "text");
    assert!(!text.contains("set_grains"), "{text}");
    let json: Value = serde_json::from_str(&policy(&init, "json")).unwrap();
    assert!(!json.to_string().contains("set_grains"), "{json}");
}

// ---------------------------------------------------------------------
// B. A refused mode writes nothing
// ---------------------------------------------------------------------

/// `file.managed` with modes the host refuses without `special_modes`
/// (4755, 2755, 0777, and a `dir_mode` of 1777 for parents it would
/// make), for a new file and over an existing one: each state fails
/// `Denied:`, with `test=True` as without, and nothing is written, made
/// or changed — no file, no directory, no content, no mode, nothing left
/// behind in the directory. With `special_modes` granted the same states
/// make what they say (the control).
#[test]
fn a_file_managed_whose_mode_is_refused_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let rw = dir.path().join("rw");
    std::fs::create_dir_all(&rw).unwrap();
    let old = rw.join("old");
    std::fs::write(&old, "kept\n").unwrap();
    std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o644)).unwrap();
    let srv = dir.path().join("srv/modes");
    std::fs::create_dir_all(&srv).unwrap();
    let w = rw.display();
    std::fs::write(
        srv.join("init.sls"),
        format!(
            "new_setuid:\n  file.managed:\n    - name: {w}/new-suid\n    - contents: '#!/bin/sh'\n    - mode: '4755'\n\
             new_setgid_source:\n  file.managed:\n    - name: {w}/new-sgid\n    - source: salt://modes/payload\n    - mode: 2755\n\
             new_world_writable:\n  file.managed:\n    - name: {w}/new-ww\n    - contents: x\n    - mode: '0777'\n\
             old_setuid:\n  file.managed:\n    - name: {w}/old\n    - contents: changed\n    - mode: '4755'\n\
             new_dirs:\n  file.managed:\n    - name: {w}/sub/deep/f\n    - contents: x\n    - makedirs: True\n    - dir_mode: '1777'\n    - mode: '0644'\n"
        ),
    )
    .unwrap();
    std::fs::write(srv.join("payload"), "payload\n").unwrap();
    let config = |special_modes: bool| {
        let path = dir.path().join(format!("special-{special_modes}.toml"));
        std::fs::write(
            &path,
            format!(
                "[plugins.state]\nfetch = [\"salt://**\"]\ncall = [\"file.*\"]\n\
                 [plugins.file]\ndirs = [{{ path = \"{w}\", writable = true }}]\n\
                 special_modes = {special_modes}\n"
            ),
        )
        .unwrap();
        path
    };
    let refused = config(false);
    let left = || -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&rw)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    for test in [true, false] {
        let mut words = vec!["state.sls", "modes"];
        if test {
            words.push("test=True");
        }
        let got = maid_call_config(dir.path(), &refused, &words);
        let ret = got["return"].as_object().unwrap_or_else(|| panic!("{got}"));
        assert_eq!(ret.len(), 5, "{got}");
        for (tag, r) in ret {
            assert_eq!(r["result"], json!(false), "test={test} {tag}: {r}");
            let comment = r["comment"].as_str().unwrap_or_default();
            assert!(
                comment.starts_with("Denied: ") && comment.contains("special_modes"),
                "test={test} {tag}: {r}"
            );
            assert_eq!(r["changes"], json!({}), "test={test} {tag}: {r}");
        }
        assert_eq!(got["retcode"], json!(2), "{got}");
        assert_eq!(left(), ["old"], "test={test}: made beside it");
        assert_eq!(std::fs::read_to_string(&old).unwrap(), "kept\n");
        let mode = std::fs::metadata(&old).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o644, "test={test}: the old file's mode");
    }

    // The control: granted, the same states make what they say.
    let got = maid_call_config(dir.path(), &config(true), &["state.sls", "modes"]);
    assert_eq!(got["retcode"], json!(0), "{got}");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode(&rw.join("new-suid")), 0o4755);
    assert_eq!(mode(&rw.join("new-sgid")), 0o2755);
    assert_eq!(mode(&rw.join("new-ww")), 0o777);
    assert_eq!(mode(&old), 0o4755);
    assert_eq!(std::fs::read_to_string(&old).unwrap(), "changed\n");
    assert_eq!(mode(&rw.join("sub")), 0o1777);
    assert_eq!(
        left(),
        ["new-sgid", "new-suid", "new-ww", "old", "sub"],
        "nothing but what the states name"
    );
}

// ---------------------------------------------------------------------
// C. A refused check is a failure
// ---------------------------------------------------------------------

/// `unless:` and `onlyif:`, as a command or as a function, and
/// `creates:`, where the check itself is refused (`cmd` is granted no
/// program, `file` no directory): each state fails `Denied:` with no
/// changes, under `test=True` as without — never "unless condition is
/// true" or "onlyif condition is false" (skipped, as if answered), nor
/// "unless condition is false" or "Creates files not found" (run, as if
/// answered). With the grants given, the checks answer as Salt's do (the
/// control).
#[test]
fn a_refused_unless_or_onlyif_is_a_failed_state() {
    let dir = tempfile::tempdir().unwrap();
    let made = dir.path().join("made");
    std::fs::write(&made, "x\n").unwrap();
    let srv = dir.path().join("srv/checks");
    std::fs::create_dir_all(&srv).unwrap();
    std::fs::write(
        srv.join("init.sls"),
        format!(
            "unless_cmd:\n  test.succeed_with_changes:\n    - unless: 'true'\n\
             onlyif_cmd:\n  test.succeed_with_changes:\n    - onlyif: 'true'\n\
             unless_fun:\n  test.succeed_with_changes:\n    - unless:\n      - fun: cmd.run\n        cmd: 'echo yes'\n\
             onlyif_fun:\n  test.succeed_with_changes:\n    - onlyif:\n      - fun: cmd.run\n        cmd: 'true'\n\
             creates_file:\n  test.succeed_with_changes:\n    - creates: {}\n",
            made.display()
        ),
    )
    .unwrap();
    let config = |name: &str, grants: &str| {
        let path = dir.path().join(format!("{name}.toml"));
        std::fs::write(
            &path,
            format!(
                "[plugins.state]\nfetch = [\"salt://**\"]\ncall = [\"cmd.*\", \"file.*\", \"test.*\"]\n\
                 [plugins.test]\n{grants}"
            ),
        )
        .unwrap();
        path
    };
    let refused = config("refused", "[plugins.cmd]\n[plugins.file]\n");
    for test in [true, false] {
        let mut words = vec!["state.sls", "checks"];
        if test {
            words.push("test=True");
        }
        let got = maid_call_config(dir.path(), &refused, &words);
        let ret = got["return"].as_object().unwrap_or_else(|| panic!("{got}"));
        assert_eq!(ret.len(), 5, "{got}");
        for (tag, r) in ret {
            assert_eq!(r["result"], json!(false), "test={test} {tag}: {r}");
            let comment = r["comment"].as_str().unwrap_or_default();
            let why = if tag.contains("creates") {
                "outside the directories granted"
            } else {
                "exec"
            };
            assert!(
                comment.starts_with("Denied: ") && comment.contains(why),
                "test={test} {tag}: {r}"
            );
            assert_eq!(r["changes"], json!({}), "test={test} {tag}: {r}");
        }
        assert_eq!(got["retcode"], json!(2), "{got}");
    }

    // The control: granted, the checks are answers.
    let granted = config(
        "granted",
        &format!(
            "[plugins.cmd]\nexec = [\"/usr/bin/*\", \"/bin/*\"]\nshell = true\nenv = [\"PATH\"]\n\
             [plugins.file]\ndirs = [{{ path = \"{}\", writable = false }}]\n",
            dir.path().display()
        ),
    );
    let got = maid_call_config(dir.path(), &granted, &["state.sls", "checks"]);
    let comment = |id: &str| {
        let tag = format!("test_|-{id}_|-{id}_|-succeed_with_changes");
        let r = &got["return"][&tag];
        assert_eq!(r["result"], json!(true), "{id}: {got}");
        r["comment"].as_str().unwrap_or_default().to_string()
    };
    assert_eq!(comment("unless_cmd"), "unless condition is true");
    assert_eq!(comment("onlyif_cmd"), "Success!");
    assert_eq!(comment("unless_fun"), "unless condition is true");
    assert_eq!(comment("onlyif_fun"), "onlyif condition is false");
    assert_eq!(
        comment("creates_file"),
        format!("{} exists", made.display())
    );
}
