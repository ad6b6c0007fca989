//! The plugin runtime with the shipped plugins: every function of `test`,
//! `cmd` and `cp` returns what SaltStack returns, failures come back in
//! Salt's shapes and retcodes, and compiled plugins are cached safely.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::common::{call, config_with, dir, guests, runtime_with};
use maid_agent::fileserver::NoFiles;
use maid_agent::runtime::{CacheStatus, CallRequest, Failure, Runtime, RuntimeSettings, Services};
use maid_config::{Config, PluginGrants};
use serde_json::{Map, json};

fn cmd_grants(cwd: &Path) -> PluginGrants {
    PluginGrants {
        exec: vec!["*".into()],
        shell: true,
        // A job sets only variables its grant names (`cmd_functions_and_options`).
        env: vec!["PATH".into(), "GREETING".into()],
        dirs: vec![dir(cwd, false)],
        ..Default::default()
    }
}

#[tokio::test]
async fn test_module_returns_what_salt_returns() {
    let rt = runtime_with(Config::default(), None).await;

    let ping = call(&rt, "test.ping", json!([]), json!({})).await;
    assert_eq!((ping.ret.clone(), ping.retcode), (json!(true), 0));
    assert!(ping.success() && ping.failure.is_none());

    let echo = call(&rt, "test.echo", json!(["hello"]), json!({})).await;
    assert_eq!(echo.ret, json!("hello"));
    let echo = call(
        &rt,
        "test.echo",
        json!([]),
        json!({"text": [1, {"a": null}]}),
    )
    .await;
    assert_eq!(echo.ret, json!([1, {"a": null}]));

    let version = call(&rt, "test.version", json!([]), json!({})).await;
    // Salt's `test.version`: the Salt release maid answers as.
    assert_eq!(version.ret, json!(crate::common::salt::SALT_VERSION));

    let arg = call(
        &rt,
        "test.arg",
        json!([1, "two"]),
        json!({"three": 3, "__pub_jid": "x"}),
    )
    .await;
    assert_eq!(arg.ret, json!({"args": [1, "two"], "kwargs": {"three": 3}}));

    let sleep = call(&rt, "test.sleep", json!([0.05]), json!({})).await;
    assert_eq!(sleep.ret, json!(true));
    assert!(sleep.duration.as_millis() >= 50);

    let rc = call(&rt, "test.retcode", json!([]), json!({})).await;
    assert_eq!((rc.ret.clone(), rc.retcode), (json!(true), 42));
    assert_eq!(rc.failure, Some(Failure::Function));
    let rc = call(&rt, "test.retcode", json!([3]), json!({})).await;
    assert_eq!(rc.retcode, 3);

    let exc = call(&rt, "test.exception", json!(["boom"]), json!({})).await;
    assert_eq!(exc.retcode, 1);
    assert_eq!(exc.failure, Some(Failure::PluginError));
    let msg = exc.ret.as_str().unwrap();
    assert!(msg.starts_with("Plugin error: boom (panicked at "), "{msg}");
}

#[tokio::test]
async fn unknown_functions_are_not_available() {
    let rt = runtime_with(Config::default(), None).await;
    for fun in ["test.nope", "nope.ping", "noperiod", "test."] {
        let out = call(&rt, fun, json!([]), json!({})).await;
        assert_eq!(out.retcode, 254, "{fun}");
        assert_eq!(out.ret, json!(format!("'{fun}' is not available.")));
        assert_eq!(out.failure, Some(Failure::NotAvailable));
    }
}

/// A module's private functions (`grains._core`, which detects the core
/// grains) are the agent's alone: a job naming one finds it not
/// available, a plugin's `call` grant cannot reach it, and no listing
/// shows it.
#[tokio::test]
async fn private_functions_are_the_agents_alone() {
    let grants = PluginGrants {
        call: vec!["*".into()],
        ..Default::default()
    };
    let rt = runtime_with(config_with("test", grants), None).await;
    let out = call(&rt, "grains._core", json!([]), json!({})).await;
    assert_eq!(out.ret, json!("'grains._core' is not available."));
    assert_eq!(out.failure, Some(Failure::NotAvailable));
    let out = call(&rt, "test.try", json!(["grains._core"]), json!({})).await;
    assert!(out.ret.get("os").is_none(), "{}", out.ret);
    let listed = call(&rt, "sys.list_functions", json!(["grains"]), json!({})).await;
    let listed = listed.ret.as_array().unwrap();
    assert!(listed.contains(&json!("grains.items")), "{listed:?}");
    assert!(
        !listed.iter().any(|f| f.as_str().unwrap().contains("._")),
        "{listed:?}"
    );
    // The agent's own call reaches it, under the grains plugin's grants.
    let (core, used) = maid_agent::grains::detect(&rt, "m1").await;
    let core = core.unwrap();
    assert_eq!(core["kernel"], "Linux");
    assert!(core.contains_key("os"), "{core:?}");
    assert!(!used.is_empty(), "what detecting read is audited");
}

#[tokio::test]
async fn bad_arguments_as_salt_reports_them() {
    let rt = runtime_with(Config::default(), None).await;
    let cases = [
        (
            json!(["x"]),
            json!({}),
            "ping() takes 0 positional arguments but 1 was given",
        ),
        (
            json!([]),
            json!({}),
            "echo() missing 1 required positional argument: 'text'",
        ),
        (
            json!(["a"]),
            json!({"text": "b"}),
            "echo() got multiple values for argument 'text'",
        ),
        (
            json!(["a"]),
            json!({"bogus": 1}),
            "The following keyword arguments are not valid: bogus=1",
        ),
    ];
    for (i, (args, kwargs, expected)) in cases.into_iter().enumerate() {
        let fun = if i == 0 { "test.ping" } else { "test.echo" };
        let out = call(&rt, fun, args, kwargs).await;
        assert_eq!(out.retcode, 1);
        assert_eq!(out.failure, Some(Failure::BadArguments));
        assert_eq!(
            out.ret,
            json!(format!("Passed invalid arguments: {expected}"))
        );
    }
    let out = call(&rt, "test.sleep", json!(["soon"]), json!({})).await;
    let msg = out.ret.as_str().unwrap();
    assert!(
        msg.starts_with("Passed invalid arguments: invalid literal for int()"),
        "{msg}"
    );
    // As Salt's `int(length)`: a string of digits is a length.
    let out = call(&rt, "test.sleep", json!(["0"]), json!({})).await;
    assert_eq!((out.retcode, out.ret), (0, json!(true)));
}

#[tokio::test]
async fn cmd_run_merges_stderr_and_strips() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = runtime_with(config_with("cmd", cmd_grants(tmp.path())), None).await;
    let out = call(&rt, "cmd.run", json!(["echo out; echo err >&2"]), json!({})).await;
    assert_eq!((out.ret, out.retcode), (json!("out\nerr"), 0));

    let out = call(
        &rt,
        "cmd.run",
        json!(["printf 'a  \\n\\n'"]),
        json!({"rstrip": false}),
    )
    .await;
    assert_eq!(out.ret, json!("a  \n\n"));

    // A failing command: its output is the return, its status the retcode.
    let out = call(&rt, "cmd.run", json!(["echo nope; exit 3"]), json!({})).await;
    assert_eq!((out.ret, out.retcode), (json!("nope"), 3));

    // A child left in the background holds the output pipe open: the
    // command's timeout ends the wait and kills its process group.
    let out = call(
        &rt,
        "cmd.run",
        json!(["sleep 60 & echo started"]),
        json!({"timeout": 1}),
    )
    .await;
    assert_eq!(
        (out.ret, out.retcode),
        (json!("Timed out after 1 seconds"), 1)
    );
}

#[tokio::test]
async fn cmd_functions_and_options() {
    let tmp = tempfile::tempdir().unwrap();
    let rt = runtime_with(config_with("cmd", cmd_grants(tmp.path())), None).await;

    let out = call(&rt, "cmd.retcode", json!(["false"]), json!({})).await;
    assert_eq!((out.ret, out.retcode), (json!(1), 1));
    // Salt reads `false` on the command line as a boolean, and runs its
    // str(): `False`, which no shell finds.
    let out = call(&rt, "cmd.retcode", json!([false]), json!({})).await;
    assert_eq!(out.ret, json!(127));
    let out = call(&rt, "cmd.retcode", json!(["true"]), json!({})).await;
    assert_eq!((out.ret, out.retcode), (json!(0), 0));

    let out = call(
        &rt,
        "cmd.run_all",
        json!(["echo o; echo e >&2; exit 2"]),
        json!({}),
    )
    .await;
    let ret = out.ret.as_object().unwrap();
    assert_eq!(ret["stdout"], json!("o"));
    assert_eq!(ret["stderr"], json!("e"));
    assert_eq!(ret["retcode"], json!(2));
    assert!(ret["pid"].as_u64().unwrap() > 0);
    assert_eq!(ret.len(), 4);
    assert_eq!(out.retcode, 2);

    let out = call(
        &rt,
        "cmd.run_stdout",
        json!(["echo o; echo e >&2"]),
        json!({}),
    )
    .await;
    assert_eq!(out.ret, json!("o"));
    let out = call(
        &rt,
        "cmd.run_stderr",
        json!(["echo o; echo e >&2"]),
        json!({}),
    )
    .await;
    assert_eq!(out.ret, json!("e"));

    // cwd, env, stdin.
    let real = tmp.path().canonicalize().unwrap();
    let out = call(&rt, "cmd.run", json!(["pwd"]), json!({"cwd": tmp.path()})).await;
    assert_eq!(out.ret, json!(real.display().to_string()));
    let out = call(
        &rt,
        "cmd.run",
        json!(["echo $GREETING"]),
        json!({"env": {"GREETING": "hi"}}),
    )
    .await;
    assert_eq!(out.ret, json!("hi"));
    let out = call(
        &rt,
        "cmd.run",
        json!(["cat"]),
        json!({"stdin": "from stdin"}),
    )
    .await;
    assert_eq!(out.ret, json!("from stdin"));

    // The agent's own environment is scrubbed to the granted names.
    // SAFETY: set before any program this test starts reads it; no other
    // thread of this test process reads it concurrently.
    unsafe { std::env::set_var("MAID_TEST_SECRET", "leak") };
    let out = call(
        &rt,
        "cmd.run",
        json!(["echo \"[$MAID_TEST_SECRET]\""]),
        json!({}),
    )
    .await;
    assert_eq!(out.ret, json!("[]"));

    // Without a shell: words split as a shell would, no shell features.
    let out = call(
        &rt,
        "cmd.run",
        json!(["echo 'a b' ; echo c"]),
        json!({"python_shell": false}),
    )
    .await;
    assert_eq!(out.ret, json!("a b ; echo c"));
    // A list is argv without the shell; under it, `Popen(list,
    // shell=True)`'s: the first item is the command line, the rest `$0`….
    let out = call(
        &rt,
        "cmd.run",
        json!([["echo", "x y"]]),
        json!({"python_shell": false}),
    )
    .await;
    assert_eq!(out.ret, json!("x y"));
    let out = call(&rt, "cmd.run", json!([["echo \"$0\"", "x y"]]), json!({})).await;
    assert_eq!(out.ret, json!("x y"));

    // The command's own timeout.
    let out = call(&rt, "cmd.run", json!(["sleep 5"]), json!({"timeout": 0.2})).await;
    assert_eq!(out.retcode, 1);
    assert_eq!(out.ret, json!("Timed out after 0.2 seconds"));
    assert!(out.duration.as_secs() < 4);

    let out = call(
        &rt,
        "cmd.run",
        json!(["no-such-program-xyz"]),
        json!({"python_shell": false}),
    )
    .await;
    assert_eq!(out.retcode, 1);
    assert_eq!(out.ret, json!("no-such-program-xyz: command not found"));
}

#[tokio::test]
async fn granted_variables_reach_programs_byte_for_byte() {
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: set before this test's runtime takes its grants; no other
    // test reads these names, and std's own environment lock orders this
    // against the other tests' reads of the environment.
    unsafe {
        std::env::set_var("MAID_PASSED_TEXT", "yes");
        std::env::set_var("MAID_PASSED_BYTES", std::ffi::OsStr::from_bytes(b"a\xffb"));
        std::env::set_var("MAID_WITHHELD", "no");
    }
    let tmp = tempfile::tempdir().unwrap();
    let grants = PluginGrants {
        env: vec!["PATH".into(), "MAID_PASSED_*".into()],
        ..cmd_grants(tmp.path())
    };
    let rt = runtime_with(config_with("cmd", grants), None).await;
    // A variable that is not UTF-8 passes through as the agent has it.
    let out = call(
        &rt,
        "cmd.run",
        json!([
            "printf '%s|%s|' \"$MAID_PASSED_TEXT\" \"$MAID_WITHHELD\"; printf %s \"$MAID_PASSED_BYTES\" | od -An -tx1"
        ]),
        json!({}),
    )
    .await;
    assert_eq!(out.retcode, 0, "{:?}", out.ret);
    let text = out.ret.as_str().unwrap();
    let words: Vec<&str> = text.split_whitespace().collect();
    assert_eq!(words, ["yes||", "61", "ff", "62"]);
}

#[tokio::test]
async fn cmd_needs_its_grants() {
    let tmp = tempfile::tempdir().unwrap();
    // No grants at all.
    let rt = runtime_with(Config::default(), None).await;
    let out = call(&rt, "cmd.run", json!(["echo hi"]), json!({})).await;
    assert_eq!(out.retcode, 77);
    assert_eq!(out.failure, Some(Failure::Denied));
    assert_eq!(out.ret, json!("Denied: exec is not granted to this plugin"));

    // Programs but no shell.
    let grants = PluginGrants {
        exec: vec!["/usr/bin/*".into(), "/bin/*".into()],
        shell: false,
        dirs: vec![dir(tmp.path(), false)],
        ..Default::default()
    };
    let rt = runtime_with(config_with("cmd", grants), None).await;
    let out = call(&rt, "cmd.run", json!(["echo hi"]), json!({})).await;
    assert_eq!(out.retcode, 77);
    let msg = out.ret.as_str().unwrap();
    assert!(msg.starts_with("Denied: /bin/sh is a shell"), "{msg}");
    let out = call(
        &rt,
        "cmd.run",
        json!(["echo hi"]),
        json!({"python_shell": false}),
    )
    .await;
    assert_eq!((out.ret, out.retcode), (json!("hi"), 0));

    // A program outside the allow-list.
    let out = call(
        &rt,
        "cmd.run",
        json!(["/sbin/nologin"]),
        json!({"python_shell": false}),
    )
    .await;
    assert_eq!(out.retcode, 77);
    assert_eq!(
        out.ret,
        json!("Denied: /sbin/nologin is not in the exec allow-list")
    );

    // A cwd outside the granted directories.
    let out = call(
        &rt,
        "cmd.run",
        json!(["pwd"]),
        json!({"cwd": "/", "python_shell": false}),
    )
    .await;
    assert_eq!(out.retcode, 77);
    assert_eq!(
        out.ret,
        json!("Denied: cwd / is outside the directories granted to this plugin")
    );
    let escape = tmp.path().join("..");
    let out = call(
        &rt,
        "cmd.run",
        json!(["pwd"]),
        json!({"cwd": escape, "python_shell": false}),
    )
    .await;
    assert_eq!(out.retcode, 77);
}

struct CpFixture {
    root: tempfile::TempDir,
    granted: tempfile::TempDir,
    outside: tempfile::TempDir,
}

fn cp_fixture() -> CpFixture {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("files")).unwrap();
    std::fs::write(root.path().join("files/motd"), "welcome\n").unwrap();
    CpFixture {
        root,
        granted: tempfile::tempdir().unwrap(),
        outside: tempfile::tempdir().unwrap(),
    }
}

async fn cp_runtime(f: &CpFixture) -> Arc<Runtime> {
    let grants = PluginGrants {
        fetch: vec!["salt://**".into()],
        dirs: vec![dir(f.granted.path(), true)],
        ..Default::default()
    };
    runtime_with(config_with("cp", grants), Some(f.root.path())).await
}

#[tokio::test]
async fn cp_get_file_writes_inside_granted_dirs() {
    let f = cp_fixture();
    let rt = cp_runtime(&f).await;
    let dest = f.granted.path().join("motd");
    let out = call(
        &rt,
        "cp.get_file",
        json!(["salt://files/motd", dest]),
        json!({}),
    )
    .await;
    assert_eq!(
        (out.ret, out.retcode),
        (json!(dest.display().to_string()), 0)
    );
    assert_eq!(std::fs::read_to_string(&dest).unwrap(), "welcome\n");
    // No temporary file is left behind.
    assert_eq!(std::fs::read_dir(f.granted.path()).unwrap().count(), 1);

    // Into a directory: the source's name is kept.
    let sub = f.granted.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    let out = call(
        &rt,
        "cp.get_file",
        json!(["salt://files/motd", sub]),
        json!({}),
    )
    .await;
    assert_eq!(out.ret, json!(sub.join("motd").display().to_string()));

    // makedirs.
    let deep = f.granted.path().join("a/b/c.txt");
    let out = call(
        &rt,
        "cp.get_file",
        json!(["salt://files/motd", deep]),
        json!({}),
    )
    .await;
    assert_eq!(out.retcode, 1);
    let out = call(
        &rt,
        "cp.get_file",
        json!(["salt://files/motd", deep]),
        json!({"makedirs": true}),
    )
    .await;
    assert_eq!(
        (out.ret, out.retcode),
        (json!(deep.display().to_string()), 0)
    );

    // A missing source is Salt's empty string, not an error.
    let out = call(&rt, "cp.get_file", json!(["salt://nope", dest]), json!({})).await;
    assert_eq!((out.ret, out.retcode), (json!(""), 0));

    let out = call(
        &rt,
        "cp.get_file_str",
        json!(["salt://files/motd"]),
        json!({}),
    )
    .await;
    assert_eq!(out.ret, json!("welcome\n"));

    let expected = sha256_hex(b"welcome\n");
    let out = call(&rt, "cp.hash_file", json!(["salt://files/motd"]), json!({})).await;
    assert_eq!(out.ret, json!({"hash_type": "sha256", "hsum": expected}));
    let out = call(&rt, "cp.hash_file", json!([dest]), json!({})).await;
    assert_eq!(out.ret, json!({"hash_type": "sha256", "hsum": expected}));
    let out = call(
        &rt,
        "cp.hash_file",
        json!([dest]),
        json!({"hash_type": "md5"}),
    )
    .await;
    assert_eq!(out.failure, Some(Failure::BadArguments));
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

#[tokio::test]
async fn cp_get_file_is_refused_outside_granted_dirs() {
    let f = cp_fixture();
    let rt = cp_runtime(&f).await;
    let src = "salt://files/motd";

    let outside = f.outside.path().join("x");
    let dotdot = f
        .granted
        .path()
        .join("../")
        .join(f.outside.path().file_name().unwrap())
        .join("y");
    let link = f.granted.path().join("link");
    std::os::unix::fs::symlink(f.outside.path(), &link).unwrap();
    let through_link = link.join("z");

    for dest in [outside, dotdot, through_link, "/etc/maid-test-never".into()] {
        let out = call(&rt, "cp.get_file", json!([src, dest]), json!({})).await;
        assert_eq!(out.retcode, 77, "{} -> {:?}", dest.display(), out.ret);
        assert!(
            out.ret.as_str().unwrap().starts_with("Denied: "),
            "{:?}",
            out.ret
        );
    }
    assert_eq!(std::fs::read_dir(f.outside.path()).unwrap().count(), 0);

    // salt:// paths cannot climb out of the file root either.
    let out = call(
        &rt,
        "cp.get_file",
        json!(["salt://../etc/passwd", f.granted.path()]),
        json!({}),
    )
    .await;
    assert_eq!(out.retcode, 77, "{:?}", out.ret);

    // The next call still works.
    let ok = f.granted.path().join("ok");
    let out = call(&rt, "cp.get_file", json!([src, ok]), json!({})).await;
    assert_eq!(out.retcode, 0);
}

#[tokio::test]
async fn cp_without_fetch_grant_is_denied() {
    let f = cp_fixture();
    let grants = PluginGrants {
        dirs: vec![dir(f.granted.path(), true)],
        ..Default::default()
    };
    let rt = runtime_with(config_with("cp", grants), Some(f.root.path())).await;
    let out = call(
        &rt,
        "cp.get_file",
        json!(["salt://files/motd", f.granted.path()]),
        json!({}),
    )
    .await;
    assert_eq!(out.retcode, 77);
    assert_eq!(
        out.ret,
        json!("Denied: fetch is not granted to this plugin")
    );
}

fn bare_runtime(cache: &Path) -> Arc<Runtime> {
    runtime_of(cache, RuntimeSettings::instances_for(64))
}

/// No grants, no plugins loaded, `instances` pool slots.
fn runtime_of(cache: &Path, instances: u32) -> Arc<Runtime> {
    runtime_shipped(cache, None, instances)
}

/// [`runtime_of`], reading the plugins compiled ahead in `shipped`.
fn runtime_shipped(cache: &Path, shipped: Option<&Path>, instances: u32) -> Arc<Runtime> {
    Runtime::new(RuntimeSettings {
        config: Arc::new(Config::default()),
        cache_dir: Some(cache.to_path_buf()),
        shipped_dir: shipped.map(Path::to_path_buf),
        compile_for: Default::default(),
        services: Arc::new(Services {
            grains: Arc::new(maid_agent::grains::GrainStore::new(
                Default::default(),
                None,
            )),
            files: Arc::new(NoFiles),
            jobs: Default::default(),
        }),
        instances,
        fs_on_call_thread: false,
    })
    .unwrap()
}

/// More calls at once than the pool has slots: each waits for a slot
/// within its time limit, and is let in only once the instance before it is
/// back in the pool (else the full pool would refuse it). Two slots, forty
/// calls.
#[tokio::test]
async fn more_calls_than_pool_slots_each_wait_for_a_clean_slot() {
    let rt = runtime_of(&crate::common::shared_cache(), 2);
    let failed = rt.load_dir(Path::new(guests::PLUGINS_DIR)).await.unwrap();
    assert!(failed.is_empty(), "{failed:?}");
    // test.sleep waits in a host call, so the calls overlap.
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..40 {
        let rt = rt.clone();
        calls.spawn(async move { call(&rt, "test.sleep", json!([0.01]), json!({})).await });
    }
    let mut done = 0;
    while let Some(out) = calls.join_next().await {
        let out = out.unwrap();
        assert_eq!(
            (out.ret.clone(), out.retcode),
            (json!(true), 0),
            "{}",
            out.ret
        );
        done += 1;
    }
    assert_eq!(done, 40);
}

fn ping_request() -> CallRequest {
    CallRequest {
        fun: "test.ping".into(),
        args: Vec::new(),
        kwargs: Map::new(),
        jid: maid_agent::jid::new_jid(),
        minion_id: "test-minion".into(),
        user: None,
        timeout: None,
        ..Default::default()
    }
}

/// A call whose teardown is left to the caller keeps its pool slot until
/// the caller drops it; one made while another instance is live is torn
/// down at once, so calls queued behind it do not each take a slot more.
#[tokio::test]
async fn a_deferred_teardown_holds_its_slot_until_dropped() {
    let rt = runtime_of(&crate::common::shared_cache(), 2);
    let failed = rt.load_dir(Path::new(guests::PLUGINS_DIR)).await.unwrap();
    assert!(failed.is_empty(), "{failed:?}");

    // Alone: the instance is handed back with the outcome.
    let (out, first) = rt.call_deferred(ping_request()).await;
    assert_eq!((out.ret, out.retcode), (json!(true), 0));
    assert!(first.holds_instance());

    // Another instance live: this one is torn down before the call returns.
    let (out, second) = rt.call_deferred(ping_request()).await;
    assert_eq!((out.ret, out.retcode), (json!(true), 0));
    assert!(!second.holds_instance());

    // The held slot is really taken: with one of the two slots held by a
    // test.sleep still running, a third call waits for `first` to go.
    let sleeping = {
        let rt = rt.clone();
        tokio::spawn(async move { call(&rt, "test.sleep", json!([0.5]), json!({})).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut third = {
        let rt = rt.clone();
        tokio::spawn(async move { rt.call_deferred(ping_request()).await })
    };
    let waited = tokio::time::timeout(Duration::from_millis(200), &mut third).await;
    assert!(
        waited.is_err(),
        "a call got a slot a deferred teardown holds"
    );
    drop(first);
    let (out, third) = tokio::time::timeout(Duration::from_secs(30), third)
        .await
        .expect("the slot came back with the teardown")
        .unwrap();
    assert_eq!((out.ret, out.retcode), (json!(true), 0));
    drop(third);
    let slept = sleeping.await.unwrap();
    assert_eq!((slept.ret, slept.retcode), (json!(true), 0));
}

/// An instance made ahead runs the next call of its plugin with that call's
/// grants and directories, not the empty ones it was made with.
#[tokio::test]
async fn an_instance_made_ahead_runs_with_the_calls_grants() {
    let f = cp_fixture();
    let rt = cp_runtime(&f).await;
    for (i, dest) in [f.granted.path(), f.outside.path()].iter().enumerate() {
        rt.prepare("cp").await;
        assert_eq!(rt.spare_module().as_deref(), Some("cp"));
        let dest = dest.join(format!("motd{i}"));
        let out = call(
            &rt,
            "cp.get_file",
            json!(["salt://files/motd", dest]),
            json!({}),
        )
        .await;
        assert_eq!(rt.spare_module(), None, "the call took the spare");
        if i == 0 {
            // The fetch grant and the writable directory are the call's.
            assert_eq!(
                (out.ret, out.retcode),
                (json!(dest.display().to_string()), 0)
            );
            assert_eq!(std::fs::read_to_string(&dest).unwrap(), "welcome\n");
        } else {
            assert_eq!(out.retcode, 77, "{}", out.ret);
            assert!(!dest.exists());
        }
    }
}

/// The instance made ahead waits in a pool slot only while nothing needs
/// it: it is not made beside a live call, a call that finds no other slot
/// takes its slot, and reloading a plugin drops it.
#[tokio::test]
async fn an_instance_made_ahead_gives_way() {
    let rt = runtime_of(&crate::common::shared_cache(), 1);
    let failed = rt.load_dir(Path::new(guests::PLUGINS_DIR)).await.unwrap();
    assert!(failed.is_empty(), "{failed:?}");

    // Not beside a live call.
    let sleeping = {
        let rt = rt.clone();
        tokio::spawn(async move { call(&rt, "test.sleep", json!([0.3]), json!({})).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    rt.prepare("cmd").await;
    assert_eq!(rt.spare_module(), None);
    let slept = sleeping.await.unwrap();
    assert_eq!((slept.ret, slept.retcode), (json!(true), 0));

    // The one slot held by a spare of `cmd`: a call of `test` takes it.
    rt.prepare("cmd").await;
    assert_eq!(rt.spare_module().as_deref(), Some("cmd"));
    let (out, teardown) =
        tokio::time::timeout(Duration::from_secs(30), rt.call_deferred(ping_request()))
            .await
            .expect("the call got the spare's slot");
    assert_eq!((out.ret, out.retcode), (json!(true), 0));
    assert_eq!(rt.spare_module(), None);
    // It ran alone, so its teardown was handed back, and retiring it makes
    // the next instance of its plugin.
    assert!(teardown.holds_instance());
    rt.retire(teardown).await;
    assert_eq!(rt.spare_module().as_deref(), Some("test"));

    // Loading the same bytes from the same file again keeps the plugin,
    // and so its spare; replacing the plugin drops it.
    let same = rt
        .load_file(&Path::new(guests::PLUGINS_DIR).join("test.wasm"))
        .await
        .unwrap();
    assert!(Arc::ptr_eq(&same, &rt.plugin("test").unwrap()));
    assert_eq!(rt.spare_module().as_deref(), Some("test"));
    let elsewhere = tempfile::tempdir().unwrap();
    let copy = elsewhere.path().join("test.wasm");
    std::fs::copy(guests::PLUGIN_TEST, &copy).unwrap();
    rt.load_file(&copy).await.unwrap();
    assert_eq!(rt.spare_module(), None);
    let out = call(&rt, "test.ping", json!([]), json!({})).await;
    assert_eq!((out.ret, out.retcode), (json!(true), 0));
}

#[tokio::test]
async fn compiled_plugins_are_cached_and_corrupt_entries_rebuilt() {
    let cache = tempfile::tempdir().unwrap();
    let wasm = Path::new(guests::PLUGIN_TEST);

    let rt = bare_runtime(cache.path());
    assert!(!rt.compiler_set_up());
    let first = rt.load_file(wasm).await.unwrap();
    assert_eq!(first.cache, CacheStatus::Miss);
    assert!(rt.compiler_set_up());
    // Its code, once compiled and described, is not kept: the cache has
    // it, and it is loaded from there at its first call.
    assert_eq!(first.artifact(), None);
    // A warm cache: loaded from the manifest kept with the artifact, no
    // code loaded until the first call, which loads it from the cache
    // without ever setting the compiler up.
    let rt = bare_runtime(cache.path());
    let second = rt.load_file(wasm).await.unwrap();
    assert_eq!(second.cache, CacheStatus::Deferred);
    assert_eq!(second.artifact(), None);
    assert_eq!(second.manifest, first.manifest);
    assert_eq!(
        call(&rt, "test.ping", json!([]), json!({})).await.ret,
        json!(true)
    );
    assert_eq!(second.artifact(), Some(CacheStatus::Hit));
    assert!(!rt.compiler_set_up());

    // Flip bytes in the middle of the artifact: never trusted, rebuilt.
    let entry = std::fs::read_dir(cache.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "cwasm"))
        .unwrap();
    let mut bytes = std::fs::read(&entry).unwrap();
    let mid = bytes.len() / 2;
    for b in &mut bytes[mid..mid + 64] {
        *b ^= 0xff;
    }
    std::fs::write(&entry, &bytes).unwrap();
    let rt = bare_runtime(cache.path());
    let third = rt.load_file(wasm).await.unwrap();
    let out = call(&rt, "test.ping", json!([]), json!({})).await;
    assert_eq!(out.ret, json!(true));
    assert_eq!(third.artifact(), Some(CacheStatus::Rebuilt));
    assert_eq!(
        first_call_artifact(cache.path(), wasm).await,
        CacheStatus::Hit
    );

    // A truncated artifact whose checksum was "fixed" up: wasmtime's own
    // checks still refuse it, and it is rebuilt.
    std::fs::write(&entry, b"not an artifact").unwrap();
    std::fs::write(
        entry.with_extension("cwasm.sha256"),
        sha256_hex(b"not an artifact"),
    )
    .unwrap();
    assert_eq!(
        first_call_artifact(cache.path(), wasm).await,
        CacheStatus::Rebuilt
    );

    // A real artifact of the same plugin compiled under other engine
    // settings (wasmtime's defaults: no epoch interruption, other stack
    // limits), with a matching checksum: the cache key does not tell, but
    // wasmtime refuses to load it into the runtime's engine, so it is
    // rebuilt rather than run.
    let foreign = wasmtime::Engine::default()
        .precompile_component(&std::fs::read(wasm).unwrap())
        .unwrap();
    std::fs::write(&entry, &foreign).unwrap();
    std::fs::write(entry.with_extension("cwasm.sha256"), sha256_hex(&foreign)).unwrap();
    assert_eq!(
        first_call_artifact(cache.path(), wasm).await,
        CacheStatus::Rebuilt
    );

    // Without the kept manifest the plugin is described at load again.
    for e in std::fs::read_dir(cache.path()).unwrap().flatten() {
        if e.path().to_string_lossy().ends_with(".manifest.json") {
            std::fs::remove_file(e.path()).unwrap();
        }
    }
    let sixth = bare_runtime(cache.path()).load_file(wasm).await.unwrap();
    assert_eq!(sixth.cache, CacheStatus::Hit);
}

/// Plugins compiled ahead (`maid plugin compile`, shipped beside them):
/// an agent on a fresh cache loads them without setting its compiler up,
/// and copies them into its cache. Compiled code is run only when it is
/// intact and only root or the agent's user could have written it:
/// anything else is compiled here instead, never loaded.
#[tokio::test]
async fn plugins_compiled_ahead_load_without_compiling_and_only_when_trusted() {
    use std::os::unix::fs::PermissionsExt;
    let plugins = tempfile::tempdir().unwrap();
    let wasm = plugins.path().join("test.wasm");
    std::fs::copy(guests::PLUGIN_TEST, &wasm).unwrap();
    let shipped = plugins.path().join(maid_agent::runtime::SHIPPED_DIR);
    // A stale entry of a plugin no longer there is removed.
    let stale = shipped.join(format!("{}-stale.cwasm", "0".repeat(64)));
    std::fs::create_dir_all(&shipped).unwrap();
    std::fs::write(&stale, b"old").unwrap();
    let done = Runtime::compile_ahead(plugins.path(), &shipped)
        .await
        .unwrap();
    assert!(done.failed.is_empty(), "{:?}", done.failed);
    assert_eq!(done.plugins.len(), 1);
    assert_eq!(
        (done.plugins[0].0.as_str(), done.plugins[0].2),
        ("test", CacheStatus::Miss)
    );
    assert_eq!(done.removed, [stale]);
    let mut files: Vec<String> = std::fs::read_dir(&shipped)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    files.sort();
    let sha = &done.plugins[0].1;
    assert_eq!(
        files,
        [
            format!(
                "{sha}-wasmtime{}-e1.cwasm",
                maid_agent::runtime::WASMTIME_VERSION
            ),
            format!(
                "{sha}-wasmtime{}-e1.cwasm.sha256",
                maid_agent::runtime::WASMTIME_VERSION
            ),
            format!(
                "{sha}-wasmtime{}-e1.manifest.json",
                maid_agent::runtime::WASMTIME_VERSION
            ),
        ]
    );
    // Again: nothing to compile, nothing removed.
    let again = Runtime::compile_ahead(plugins.path(), &shipped)
        .await
        .unwrap();
    assert_eq!(again.plugins[0].2, CacheStatus::Hit);
    assert!(again.removed.is_empty());

    // A fresh cache: described from the shipped manifest, its code loaded
    // from the shipped artifact at the first call, no compiler set up.
    let first_call = |cache: &Path| {
        let rt = runtime_shipped(cache, Some(&shipped), RuntimeSettings::instances_for(4));
        let wasm = wasm.clone();
        async move {
            let plugin = rt.load_file(&wasm).await.unwrap();
            let out = call(&rt, "test.ping", json!([]), json!({})).await;
            assert_eq!((out.ret, out.retcode), (json!(true), 0));
            (
                plugin.cache,
                plugin.artifact().unwrap(),
                rt.compiler_set_up(),
            )
        }
    };
    let cache = tempfile::tempdir().unwrap();
    assert_eq!(
        first_call(cache.path()).await,
        (CacheStatus::Deferred, CacheStatus::Shipped, false)
    );
    // Copied into the cache: the next start finds it there.
    assert_eq!(
        first_call(cache.path()).await,
        (CacheStatus::Deferred, CacheStatus::Hit, false)
    );

    let artifact = shipped.join(&files[0]);
    let sum = shipped.join(&files[1]);
    let fresh = || tempfile::tempdir().unwrap();
    let compiled_here = (CacheStatus::Deferred, CacheStatus::Miss, true);

    // The directory or the plugin directory above it writable by others:
    // nothing shipped is read, not even the manifest (the plugin is
    // described, so compiled, at load). The artifact writable by others:
    // its manifest is read, its code compiled here at the first call.
    let at_load = (CacheStatus::Miss, CacheStatus::Hit, true);
    for (path, expected) in [
        (shipped.clone(), at_load),
        (plugins.path().to_path_buf(), at_load),
        (artifact.clone(), compiled_here),
    ] {
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode | 0o002)).unwrap();
        assert_eq!(
            first_call(fresh().path()).await,
            expected,
            "{}",
            path.display()
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    // Written by a user that is neither root nor the agent's: not run.
    if nix::unistd::geteuid().is_root() {
        std::os::unix::fs::chown(&artifact, Some(65534), None).unwrap();
        assert_eq!(first_call(fresh().path()).await, compiled_here);
        std::os::unix::fs::chown(&artifact, Some(0), None).unwrap();
    }
    // A symbolic link in its place (even to the real artifact): not
    // followed.
    let real = plugins.path().join("real.cwasm");
    std::fs::rename(&artifact, &real).unwrap();
    std::os::unix::fs::symlink(&real, &artifact).unwrap();
    assert_eq!(first_call(fresh().path()).await, compiled_here);
    std::fs::remove_file(&artifact).unwrap();
    std::fs::rename(&real, &artifact).unwrap();
    assert_eq!(first_call(fresh().path()).await.1, CacheStatus::Shipped);

    // Bytes flipped in the artifact: its checksum no longer matches.
    let good = std::fs::read(&artifact).unwrap();
    let mut bad = good.clone();
    let mid = bad.len() / 2;
    for b in &mut bad[mid..mid + 64] {
        *b ^= 0xff;
    }
    std::fs::write(&artifact, &bad).unwrap();
    assert_eq!(first_call(fresh().path()).await, compiled_here);
    // The same plugin compiled under other engine settings, its checksum
    // made to match: wasmtime refuses it for this engine.
    let foreign = wasmtime::Engine::default()
        .precompile_component(&std::fs::read(&wasm).unwrap())
        .unwrap();
    std::fs::write(&artifact, &foreign).unwrap();
    std::fs::write(&sum, sha256_hex(&foreign)).unwrap();
    assert_eq!(first_call(fresh().path()).await, compiled_here);
    // Put back as shipped: loaded again.
    std::fs::write(&artifact, &good).unwrap();
    std::fs::write(&sum, sha256_hex(&good)).unwrap();
    assert_eq!(first_call(fresh().path()).await.1, CacheStatus::Shipped);
}

/// What the cache did for the code of `wasm`, loaded into a new runtime
/// over `cache` and called once.
async fn first_call_artifact(cache: &Path, wasm: &Path) -> CacheStatus {
    first_call_artifact_of(cache, wasm, true).await
}

/// [`first_call_artifact`], the plugin's manifest kept (`deferred`) or not.
async fn first_call_artifact_of(cache: &Path, wasm: &Path, deferred: bool) -> CacheStatus {
    let rt = bare_runtime(cache);
    let plugin = rt.load_file(wasm).await.unwrap();
    assert_eq!(plugin.cache == CacheStatus::Deferred, deferred);
    let out = call(&rt, "test.ping", json!([]), json!({})).await;
    assert_eq!(out.ret, json!(true));
    // Described at load: what the cache did then (its code is loaded from
    // the cache at the call).
    if plugin.cache == CacheStatus::Deferred {
        plugin.artifact().unwrap()
    } else {
        plugin.cache
    }
}

#[tokio::test]
async fn a_deferred_plugin_runs_only_the_bytes_its_manifest_was_kept_for() {
    let cache = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("test.wasm");
    std::fs::copy(guests::PLUGIN_TEST, &path).unwrap();
    // Compiled and described once: the manifest is kept.
    bare_runtime(cache.path()).load_file(&path).await.unwrap();
    let rt = bare_runtime(cache.path());
    let plugin = rt.load_file(&path).await.unwrap();
    assert_eq!(plugin.cache, CacheStatus::Deferred);
    // Another plugin's bytes under its name before its first call: the
    // call is refused rather than running what nobody described.
    std::fs::copy(guests::PLUGIN_CMD, &path).unwrap();
    refused_as_changed(&rt, &plugin).await;
}

/// The first call of `plugin` in `rt` is refused, its file having changed
/// since it was loaded, and none of its code was loaded.
async fn refused_as_changed(rt: &Runtime, plugin: &maid_agent::runtime::LoadedPlugin) {
    let out = call(rt, "test.ping", json!([]), json!({})).await;
    assert_ne!(out.retcode, 0, "{}", out.ret);
    assert!(
        out.ret
            .as_str()
            .unwrap_or_default()
            .contains("changed since it was loaded"),
        "{}",
        out.ret
    );
    assert_eq!(plugin.artifact(), None);
}

/// Overwrite `len` bytes in the middle of `path` in place, the size and
/// the modification time kept as they were: only the change time, which
/// nobody can set, tells.
fn overwrite_in_place(path: &Path, len: usize) {
    use std::io::{Seek, SeekFrom, Write};
    let modified = std::fs::metadata(path).unwrap().modified().unwrap();
    let mut bytes = std::fs::read(path).unwrap();
    let mid = bytes.len() / 2;
    for b in &mut bytes[mid..mid + len] {
        *b ^= 0xff;
    }
    let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.seek(SeekFrom::Start(mid as u64)).unwrap();
    f.write_all(&bytes[mid..mid + len]).unwrap();
    f.set_modified(modified).unwrap();
}

/// A start on a warm cache reads neither the plugin files nor their
/// compiled code again while the kernel's ids of those files vouch that
/// they were not written since they were hashed; a file written in place
/// since (its size and modification time put back) is hashed again, and
/// its change is found.
#[tokio::test]
async fn files_written_since_they_were_hashed_are_hashed_again() {
    let cache = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("test.wasm");
    std::fs::copy(guests::PLUGIN_TEST, &path).unwrap();
    assert_eq!(
        first_call_artifact_of(cache.path(), &path, false).await,
        CacheStatus::Miss
    );
    // Files changed in the last two seconds are always read: wait until
    // the plugin and its artifact have settled, then a start hashes both
    // once more and keeps their ids.
    std::thread::sleep(std::time::Duration::from_millis(2100));
    assert_eq!(
        first_call_artifact(cache.path(), &path).await,
        CacheStatus::Hit
    );
    let entry = std::fs::read_dir(cache.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "cwasm"))
        .unwrap();
    let sum = std::fs::read_to_string(entry.with_extension("cwasm.sha256")).unwrap();
    assert_eq!(sum.lines().count(), 2, "the artifact's id is kept: {sum:?}");
    let kept_ids = std::fs::read_dir(cache.path())
        .unwrap()
        .flatten()
        .filter(|e| e.path().to_string_lossy().ends_with(".wasm-id"))
        .count();
    assert_eq!(kept_ids, 1, "the plugin file's id is kept");
    // Vouched for by their ids: loaded without being hashed.
    assert_eq!(
        first_call_artifact(cache.path(), &path).await,
        CacheStatus::Hit
    );

    // The artifact written in place: hashed again, refused, rebuilt.
    overwrite_in_place(&entry, 64);
    assert_eq!(
        first_call_artifact(cache.path(), &path).await,
        CacheStatus::Rebuilt
    );

    // The plugin file written in place between its load and its first
    // call: the call is refused rather than run other bytes.
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let rt = bare_runtime(cache.path());
    let plugin = rt.load_file(&path).await.unwrap();
    assert_eq!(plugin.cache, CacheStatus::Deferred);
    overwrite_in_place(&path, 16);
    refused_as_changed(&rt, &plugin).await;
}

#[tokio::test]
async fn plugins_that_are_not_components_are_refused_and_others_load() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(guests::PLUGIN_TEST, dir.path().join("test.wasm")).unwrap();
    std::fs::write(dir.path().join("junk.wasm"), b"\0asm garbage").unwrap();
    // The hostile plugin under another name: its manifest says `hostile`.
    std::fs::copy(guests::FIXTURE_HOSTILE, dir.path().join("liar.wasm")).unwrap();
    let rt = bare_runtime(&crate::common::shared_cache());
    let failed = rt.load_dir(dir.path()).await.unwrap();
    let messages: Vec<String> = failed.iter().map(|e| e.to_string()).collect();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(
        messages[0].contains("junk.wasm: not a valid component"),
        "{messages:?}"
    );
    assert!(
        messages[1].contains("manifest names module \"hostile\" but the file is liar.wasm"),
        "{messages:?}"
    );
    // The good plugin loaded whole.
    let functions = rt.functions();
    for f in [
        "test.ping",
        "test.echo",
        "test.arg",
        "test.true",
        "test.kwarg",
    ] {
        assert!(functions.iter().any(|g| g == f), "{f}: {functions:?}");
    }
    assert!(rt.plugin("liar").is_none() && rt.plugin("hostile").is_none());
    let out = call(&rt, "test.ping", json!([]), json!({})).await;
    assert_eq!(out.ret, json!(true));

    // A call of a module that did not load says why, as Salt's loader does;
    // the return still starts as PROTOCOL.md 3.2 has it.
    let out = call(&rt, "junk.ping", json!([]), json!({})).await;
    assert_eq!(
        (out.retcode, out.failure),
        (254, Some(Failure::NotAvailable))
    );
    let why = format!(
        "'junk.ping' is not available. The module did not load: {}",
        messages[0]
    );
    assert_eq!(out.ret, json!(why));
    // Once the file is gone, it is only not available.
    std::fs::remove_file(dir.path().join("junk.wasm")).unwrap();
    rt.reload_dir(dir.path()).await.unwrap();
    let out = call(&rt, "junk.ping", json!([]), json!({})).await;
    assert_eq!(out.ret, json!("'junk.ping' is not available."));
    // A module whose only file is broken, then mended.
    let other = tempfile::tempdir().unwrap();
    let rt = bare_runtime(&crate::common::shared_cache());
    std::fs::write(other.path().join("test.wasm"), b"not wasm").unwrap();
    assert_eq!(rt.load_dir(other.path()).await.unwrap().len(), 1);
    let out = call(&rt, "test.ping", json!([]), json!({})).await;
    let ret = out.ret.as_str().unwrap();
    assert!(
        ret.starts_with("'test.ping' is not available. The module did not load: ")
            && ret.contains("test.wasm: not a valid component"),
        "{ret}"
    );
    std::fs::copy(guests::PLUGIN_TEST, other.path().join("test.wasm")).unwrap();
    assert!(rt.reload_dir(other.path()).await.unwrap().is_empty());
    let out = call(&rt, "test.ping", json!([]), json!({})).await;
    assert_eq!(out.ret, json!(true));
}

#[tokio::test]
async fn runas_needs_its_grant_and_root() {
    let tmp = tempfile::tempdir().unwrap();
    let mut grants = cmd_grants(tmp.path());
    grants.runas = vec!["nobody".into()];
    let rt = runtime_with(config_with("cmd", grants), None).await;
    let out = call(
        &rt,
        "cmd.run",
        json!(["id -un"]),
        json!({"runas": "nobody", "cwd": "/tmp"}),
    )
    .await;
    let as_root = nix::unistd::geteuid().is_root();
    if as_root {
        // `cwd` is checked against the grants before the user switch.
        assert_eq!(out.retcode, 77, "{:?}", out.ret);
        let out = call(
            &rt,
            "cmd.run",
            json!(["id -un"]),
            json!({"runas": "nobody"}),
        )
        .await;
        assert_eq!((out.ret, out.retcode), (json!("nobody"), 0));
        let out = call(&rt, "cmd.run", json!(["id -G"]), json!({"runas": "nobody"})).await;
        let groups = out.ret.as_str().unwrap().to_string();
        assert!(
            !groups.split(' ').any(|g| g == "0"),
            "root's groups kept: {groups}"
        );
    } else {
        let out = call(
            &rt,
            "cmd.run",
            json!(["id -un"]),
            json!({"runas": "nobody"}),
        )
        .await;
        assert_eq!(
            out.ret,
            json!("Denied: runas=nobody needs the agent to run as root")
        );
    }
    let out = call(&rt, "cmd.run", json!(["id -un"]), json!({"runas": "root"})).await;
    assert_eq!(out.retcode, 77);
    assert_eq!(
        out.ret,
        json!("Denied: runas=root is not granted to this plugin")
    );
}
