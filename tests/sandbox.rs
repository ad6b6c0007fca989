//! The sandbox against a plugin written as an attacker would (the `hostile`
//! fixture, which asks for every capability). Each attack ends in its exact
//! error return, and the next call on the same runtime still works.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::{call, config_with, dir, runtime_with};
use maid_agent::runtime::{CallRequest, Failure, Runtime};
use maid_config::{Config, LimitsOverride, PluginGrants};
use serde_json::json;

/// The runtime still serves ordinary calls after an attack.
async fn still_works(rt: &Runtime) {
    let out = call(rt, "hostile.ok", json!([]), json!({})).await;
    assert_eq!((out.ret, out.retcode), (json!(true), 0));
    let out = call(rt, "test.ping", json!([]), json!({})).await;
    assert_eq!(out.ret, json!(true));
}

fn limited(timeout_secs: f64, memory_mb: u64) -> Config {
    config_with(
        "hostile",
        PluginGrants {
            limits: Some(LimitsOverride {
                timeout_secs: Some(timeout_secs),
                memory_mb: Some(memory_mb),
                max_return_bytes: Some(1 << 20),
                ..Default::default()
            }),
            ..Default::default()
        },
    )
}

#[tokio::test]
async fn a_trap_is_a_plugin_error() {
    let rt = runtime_with(limited(5.0, 64), None).await;
    let out = call(&rt, "hostile.trap", json!([]), json!({})).await;
    assert_eq!(out.retcode, 1);
    assert_eq!(out.failure, Some(Failure::PluginError));
    let msg = out.ret.as_str().unwrap();
    assert!(msg.starts_with("Plugin error: "), "{msg}");
    still_works(&rt).await;

    let out = call(&rt, "hostile.panic", json!([]), json!({})).await;
    let msg = out.ret.as_str().unwrap();
    assert!(
        msg.starts_with("Plugin error: hostile panic (panicked at "),
        "{msg}"
    );
    still_works(&rt).await;
}

#[tokio::test]
async fn nothing_of_one_call_survives_into_the_next() {
    // Slots are reused call after call (and reset in place where the
    // kernel can say which pages were written): a secret left in a global
    // and over 4 MiB of heap must be gone for the next call.
    let rt = runtime_with(Config::default(), None).await;
    for i in 0..20 {
        let secret = format!("job {i}: the secret of one call");
        let stashed = call(&rt, "hostile.stash", json!([secret]), json!({})).await;
        assert_eq!(stashed.ret, json!(true), "the probe sees its own stash");
        let peek = call(&rt, "hostile.peek", json!([secret]), json!({})).await;
        assert_eq!(
            peek.ret,
            json!(false),
            "call {i} saw the previous call's memory"
        );
    }
}

#[tokio::test]
async fn an_endless_loop_is_stopped_by_the_wall_clock_limit() {
    let rt = runtime_with(limited(0.5, 64), None).await;
    let out = call(&rt, "hostile.spin", json!([]), json!({})).await;
    assert_eq!(out.retcode, 124);
    assert_eq!(out.failure, Some(Failure::TimedOut));
    assert_eq!(out.ret, json!("Timed out after 0.5 seconds"));
    assert!(out.duration < Duration::from_secs(15), "{:?}", out.duration);
    still_works(&rt).await;
}

#[tokio::test]
async fn an_idle_runtime_stops_ticking_and_wakes_for_the_next_call() {
    let rt = runtime_with(limited(0.5, 64), None).await;
    still_works(&rt).await;
    // No store for a second: the epoch ticker stops waking.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !rt.ticker_parked() {
        assert!(Instant::now() < deadline, "the epoch ticker never parked");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A guest that never yields is stopped only if the ticker wakes for it.
    let out = call(&rt, "hostile.spin", json!([]), json!({})).await;
    assert_eq!(out.retcode, 124);
    assert_eq!(out.ret, json!("Timed out after 0.5 seconds"));
    still_works(&rt).await;
}

#[tokio::test]
async fn waiting_in_the_host_is_stopped_too() {
    let rt = runtime_with(limited(0.5, 64), None).await;
    let out = call(&rt, "hostile.sleep", json!([30]), json!({})).await;
    assert_eq!(out.retcode, 124);
    assert!(out.duration < Duration::from_secs(15), "{:?}", out.duration);
    still_works(&rt).await;
}

#[tokio::test]
async fn the_jobs_own_timeout_lowers_the_limit() {
    let rt = runtime_with(limited(30.0, 64), None).await;
    let out = rt
        .call(CallRequest {
            fun: "hostile.spin".into(),
            args: vec![],
            kwargs: Default::default(),
            jid: "1".into(),
            minion_id: "m".into(),
            user: None,
            timeout: Some(Duration::from_millis(300)),
            ..Default::default()
        })
        .await;
    assert_eq!(out.retcode, 124);
    assert_eq!(out.ret, json!("Timed out after 0.3 seconds"));
}

#[tokio::test]
async fn unbounded_memory_is_stopped_by_the_cap() {
    let rt = runtime_with(limited(20.0, 32), None).await;
    let out = call(&rt, "hostile.alloc", json!([]), json!({})).await;
    assert_eq!(out.retcode, 1);
    assert_eq!(out.failure, Some(Failure::PluginError));
    assert_eq!(
        out.ret,
        json!("Plugin error: memory limit of 32 MiB exceeded")
    );
    still_works(&rt).await;
}

#[tokio::test]
async fn a_stack_overflow_is_a_plugin_error() {
    let rt = runtime_with(limited(20.0, 64), None).await;
    let out = call(&rt, "hostile.recurse", json!([]), json!({})).await;
    assert_eq!(out.retcode, 1);
    let msg = out.ret.as_str().unwrap();
    assert!(msg.starts_with("Plugin error: "), "{msg}");
    still_works(&rt).await;
}

#[tokio::test]
async fn an_oversized_return_is_refused() {
    let rt = runtime_with(limited(20.0, 64), None).await;
    let out = call(&rt, "hostile.big_return", json!([2]), json!({})).await;
    assert_eq!(out.retcode, 1);
    assert_eq!(
        out.ret,
        json!("Plugin error: return of 2097154 bytes exceeds the limit of 1048576 bytes")
    );
    still_works(&rt).await;
}

#[tokio::test]
async fn a_log_flood_is_bounded() {
    let rt = runtime_with(limited(20.0, 64), None).await;
    let out = call(&rt, "hostile.log_flood", json!([100000]), json!({})).await;
    assert_eq!((out.ret, out.retcode), (json!(100000), 0));
    still_works(&rt).await;
}

#[tokio::test]
async fn no_files_without_a_grant() {
    let rt = runtime_with(Config::default(), None).await;
    for path in [
        "/etc/passwd",
        "/proc/self/environ",
        "passwd",
        "../etc/passwd",
    ] {
        let out = call(&rt, "hostile.read", json!([path]), json!({})).await;
        // Nothing is preopened: no path exists for the guest.
        assert_eq!(out.retcode, 1, "{path}");
        assert_eq!(
            out.ret,
            json!("No such file or directory (os error 2)"),
            "{path}"
        );
    }
    still_works(&rt).await;
}

#[tokio::test]
async fn preopens_hold_against_escapes() {
    let granted = tempfile::tempdir().unwrap();
    let readonly = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "s3cret").unwrap();
    std::fs::write(granted.path().join("mine"), "ok").unwrap();
    std::os::unix::fs::symlink(outside.path(), granted.path().join("link")).unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("secret"),
        granted.path().join("filelink"),
    )
    .unwrap();
    let grants = PluginGrants {
        dirs: vec![dir(granted.path(), true), dir(readonly.path(), false)],
        ..Default::default()
    };
    let rt = runtime_with(config_with("hostile", grants), None).await;

    let mine = granted.path().join("mine");
    let out = call(&rt, "hostile.read", json!([mine]), json!({})).await;
    assert_eq!(out.ret, json!("ok"));

    let escapes = [
        outside.path().join("secret"),
        granted
            .path()
            .join("..")
            .join(outside.path().file_name().unwrap())
            .join("secret"),
        granted.path().join("link/secret"),
        granted.path().join("filelink"),
    ];
    // A path outside every preopen does not exist for the guest; one that
    // climbs out of a preopen (`..`, symlinks) is refused by the sandbox.
    let invisible = (1, json!("No such file or directory (os error 2)"));
    let refused = (77, json!("Denied: Operation not permitted (os error 1)"));
    let expected = [&invisible, &refused, &refused, &refused];
    for (path, want) in escapes.iter().zip(expected) {
        for (fun, args) in [
            ("hostile.read", json!([path])),
            ("hostile.write", json!([path, "pwned"])),
        ] {
            let out = call(&rt, fun, args, json!({})).await;
            assert_eq!(
                (out.retcode, &out.ret),
                (want.0, &want.1),
                "{fun} {}",
                path.display()
            );
        }
    }
    assert_eq!(
        std::fs::read_to_string(outside.path().join("secret")).unwrap(),
        "s3cret"
    );

    let ro = readonly.path().join("new");
    let out = call(&rt, "hostile.write", json!([ro, "x"]), json!({})).await;
    assert_eq!((out.retcode, &out.ret), (refused.0, &refused.1));
    assert!(!Path::new(&ro).exists());
    still_works(&rt).await;
}

#[tokio::test]
async fn the_guest_sees_no_environment() {
    // SAFETY: set before the runtime starts; nothing reads it concurrently.
    unsafe { std::env::set_var("MAID_AGENT_SECRET", "x") };
    let rt = runtime_with(Config::default(), None).await;
    let out = call(&rt, "hostile.env", json!([]), json!({})).await;
    assert_eq!(out.ret, json!({}));
}

#[tokio::test]
async fn exec_and_fetch_need_grants() {
    let rt = runtime_with(Config::default(), None).await;
    let out = call(&rt, "hostile.exec", json!(["/bin/echo", "hi"]), json!({})).await;
    assert_eq!(out.ret, json!("Denied: exec is not granted to this plugin"));
    let out = call(&rt, "hostile.fetch", json!(["salt://x"]), json!({})).await;
    assert_eq!(
        out.ret,
        json!("Denied: fetch is not granted to this plugin")
    );

    let grants = PluginGrants {
        exec: vec!["/bin/echo".into(), "/usr/bin/echo".into()],
        ..Default::default()
    };
    let rt = runtime_with(config_with("hostile", grants), None).await;
    let out = call(&rt, "hostile.exec", json!(["echo", "hi"]), json!({})).await;
    assert_eq!(out.ret, json!("hi\n"));
    for argv in [
        json!(["/bin/sh", "-c", "id"]),
        json!(["/usr/bin/id"]),
        json!(["./echo"]),
    ] {
        let out = call(&rt, "hostile.exec", argv.clone(), json!({})).await;
        assert_eq!(out.retcode, 77, "{argv}: {:?}", out.ret);
    }
    still_works(&rt).await;
}

#[tokio::test]
async fn a_gigabyte_return_is_stopped() {
    let rt = runtime_with(limited(20.0, 64), None).await;
    let out = call(&rt, "hostile.big_return", json!([1024]), json!({})).await;
    assert_eq!(out.retcode, 1);
    assert_eq!(
        out.ret,
        json!("Plugin error: memory limit of 64 MiB exceeded")
    );
    still_works(&rt).await;
}

#[tokio::test]
async fn instances_of_one_plugin_are_bounded() {
    let config = config_with(
        "hostile",
        PluginGrants {
            limits: Some(LimitsOverride {
                max_concurrent: Some(1),
                timeout_secs: Some(6.0),
                ..Default::default()
            }),
            ..Default::default()
        },
    );
    let rt = runtime_with(config, None).await;
    let busy = {
        let rt = rt.clone();
        tokio::spawn(async move { call(&rt, "hostile.sleep", json!([4]), json!({})).await })
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    // Waits about 3 s for the only slot, then has what is left of its
    // 6 s: too little for a sleep that alone would fit.
    let waiting = call(&rt, "hostile.sleep", json!([5]), json!({})).await;
    assert_eq!(busy.await.unwrap().retcode, 0);
    assert_eq!(waiting.retcode, 124, "{:?}", waiting.ret);
    still_works(&rt).await;
}

/// `call` runs only the functions its grant names, each in its own
/// instance under its own plugin's grants (never the caller's), one level
/// deep, and never waits for a slot its caller holds. Every call is in the
/// caller's audit, with what the function it ran did.
#[tokio::test]
async fn a_plugin_runs_only_the_functions_its_call_grant_names() {
    let used = |out: &maid_agent::runtime::Outcome| serde_json::to_value(&out.used).unwrap();
    let rt = runtime_with(Config::default(), None).await;
    let out = call(&rt, "hostile.call", json!(["test.echo", "hi"]), json!({})).await;
    assert_eq!(
        (out.retcode, &out.ret),
        (77, &json!("Denied: call is not granted to this plugin"))
    );
    assert_eq!(
        used(&out),
        json!([{"kind": "call", "fun": "test.echo", "allowed": false}])
    );

    let marker = tempfile::tempdir().unwrap();
    let touched = marker.path().join("touched");
    let grants = PluginGrants {
        // The caller may start touch; what it calls may not.
        exec: vec!["/usr/bin/touch".into(), "/bin/touch".into()],
        call: vec!["test.*".into(), "cmd.run".into(), "hostile.*".into()],
        ..Default::default()
    };
    let rt = runtime_with(config_with("hostile", grants.clone()), None).await;
    let out = call(&rt, "hostile.call", json!(["test.echo", "hi"]), json!({})).await;
    assert_eq!(
        (out.retcode, &out.ret),
        (0, &json!({"returned": "hi", "retcode": 0}))
    );
    assert_eq!(
        used(&out),
        json!([{"kind": "call", "fun": "test.echo", "allowed": true}])
    );
    // A retcode the function set comes back with its return; a failure
    // says which kind.
    let out = call(&rt, "hostile.call", json!(["test.retcode", 3]), json!({})).await;
    assert_eq!(out.ret, json!({"returned": true, "retcode": 3}));
    let out = call(&rt, "hostile.call", json!(["test.nosuch"]), json!({})).await;
    assert_eq!(
        out.ret["failed"],
        json!("CallFailure::NotAvailable"),
        "{}",
        out.ret
    );
    let out = call(&rt, "hostile.call", json!(["test.echo"]), json!({})).await;
    assert_eq!(
        out.ret["failed"],
        json!("CallFailure::BadArguments"),
        "{}",
        out.ret
    );

    // Not named: refused, though the caller itself may start touch.
    let cmd = format!("/usr/bin/touch {}", touched.display());
    let out = call(&rt, "hostile.call", json!(["cmd.retcode", cmd]), json!({})).await;
    assert_eq!(
        (out.retcode, &out.ret),
        (
            77,
            &json!("Denied: cmd.retcode is not among the functions call may run")
        )
    );
    // Named, but cmd's own grants (none here) refuse it: the caller's
    // exec grant does not go along.
    let out = call(
        &rt,
        "hostile.call",
        json!(["cmd.run", cmd]),
        json!({"python_shell": false}),
    )
    .await;
    assert_eq!(out.retcode, 77, "{}", out.ret);
    assert_eq!(
        out.ret,
        json!("Denied: cmd.run: exec is not granted to this plugin")
    );
    assert_eq!(used(&out)[0]["used"][0]["kind"], json!("exec"));
    assert_eq!(used(&out)[0]["used"][0]["allowed"], json!(false));
    assert!(!touched.exists());

    // One level only: what `call` runs cannot call again.
    let out = call(
        &rt,
        "hostile.call",
        json!(["hostile.call", "test.echo", "hi"]),
        json!({}),
    )
    .await;
    assert_eq!(
        (out.retcode, &out.ret),
        (
            77,
            &json!("Denied: hostile.call: test.echo: a function run with call cannot call another")
        )
    );

    // A plugin at its limit of instances is not waited for: the caller
    // holds the only one.
    let single = PluginGrants {
        limits: Some(LimitsOverride {
            max_concurrent: Some(1),
            ..Default::default()
        }),
        ..grants
    };
    let rt = runtime_with(config_with("hostile", single), None).await;
    let out = call(&rt, "hostile.call", json!(["hostile.ok"]), json!({})).await;
    assert_eq!(
        out.ret,
        json!({
            "failed": "CallFailure::PluginError",
            "message": "Plugin error: hostile already runs its limit of 1 calls at once",
            "retcode": 1,
        })
    );
    still_works(&rt).await;
}
