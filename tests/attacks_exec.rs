//! The program and file-mode rules attacked as a hostile job sender
//! attacked them, against real agents and a real `redis-server`
//! (docs/security.md, "Threat model"). Each hostile step is first shown to
//! work outside the agent, so a test fails if its refusal reopens.
//!
//! * Programs that run other programs: without `shell`, a program reached
//!   through an exec glob starts only when it is classified plain
//!   (agent/src/runtime/programs.rs), so runners no deny-list named
//!   (`split --filter`, `setarch`, `ssh-agent`, `sqlite3 .shell`, `gcc
//!   -wrapper`, `scp -S`, or any of them renamed) are refused.
//! * Set-uid files: the host refuses set-uid, set-gid and world-writable
//!   modes (`file.set_mode`, `cp.recv_chunked mode=`, `file.copy` of a
//!   set-uid file) unless the plugin is granted `special_modes`.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::attacks::{assert_denied, toml_str};
use crate::common::fleet::{request, run, start_agent, wait_registered};
use crate::common::redis::RedisServer;
use maid_agent::protocol::Return;
use maid_bus::Bus;
use serde_json::{Value, json};

/// The only return of agent `id` for `fun` with `arg`, `kwarg`.
async fn return_of(bus: &Bus, id: &str, fun: &str, arg: Value, kwarg: Value) -> Return {
    let report = run(bus, &request(id, "glob", fun, arg, kwarg)).await;
    assert_eq!(report.returns.len(), 1, "{report:?}");
    report.returns[0].clone()
}

/// An executable `#!/bin/sh` script at `path` that creates `marker`.
fn script(path: &Path, marker: &Path) {
    std::fs::write(path, format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Whether `marker` exists; it is removed, so the next step starts clean.
fn took(marker: &Path) -> bool {
    std::fs::remove_file(marker).is_ok()
}

/// The attacks: each argv, whose program lies in `/usr/bin` or `bin`
/// (a directory of the allow-list no plugin may write), runs `/bin/sh`
/// or a script outside the allow-list that creates `marker`.
fn attacks(bin: &Path, marker: &Path) -> Vec<Vec<String>> {
    let touch = format!("touch {}", marker.display());
    let evil = bin.parent().unwrap().join("evil");
    script(&evil, marker);
    let sh = |prog: &str, pre: &[&str]| {
        let mut argv = vec![prog.to_string()];
        argv.extend(pre.iter().map(|s| s.to_string()));
        argv.extend(["/bin/sh".into(), "-c".into(), touch.clone()]);
        argv
    };
    let filter = format!("--filter={touch}");
    // `split`, copied under a name no list has: what the classification
    // refuses that no deny-list could.
    let renamed = bin.join("chunk");
    std::fs::copy("/usr/bin/split", &renamed).unwrap();
    vec![
        vec![
            "/usr/bin/split".into(),
            filter.clone(),
            "/etc/passwd".into(),
        ],
        sh("/usr/bin/setarch", &[std::env::consts::ARCH]),
        sh("/usr/bin/linux64", &[]),
        sh("/usr/bin/linux32", &[]),
        sh("/usr/bin/ssh-agent", &[]),
        vec![
            "/usr/bin/sqlite3".into(),
            ":memory:".into(),
            format!(".shell {touch}"),
        ],
        vec![
            "/usr/bin/gcc".into(),
            "-wrapper".into(),
            format!("/bin/sh,-c,{touch}"),
            "-E".into(),
            "-xc".into(),
            "/dev/null".into(),
        ],
        vec![
            "/usr/bin/scp".into(),
            "-S".into(),
            evil.display().to_string(),
            "nohost:x".into(),
            bin.join("copy").display().to_string(),
        ],
        vec![renamed.display().to_string(), filter, "/etc/passwd".into()],
    ]
}

/// Each attack's program is installed, and run directly it creates
/// `marker`: the mechanism the agent must refuse works.
fn each_attack_works_outside_the_agent(attacks: &[Vec<String>], cwd: &Path, marker: &Path) {
    for argv in attacks {
        assert!(
            Path::new(&argv[0]).exists(),
            "{} is needed for this attack test: apt-get install coreutils util-linux \
             openssh-client sqlite3 gcc",
            argv[0]
        );
        let _ = Command::new(&argv[0])
            .args(&argv[1..])
            .current_dir(cwd)
            .env_remove("SHELL")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert!(
            took(marker),
            "{argv:?} did not run its payload outside the agent"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn programs_that_run_programs_are_refused_through_a_glob_without_shell() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path().canonicalize().unwrap();
    let bin = root.join("bin");
    std::fs::create_dir(&bin).unwrap();
    let marker = root.join("pwned");
    let attacks = attacks(&bin, &marker);
    each_attack_works_outside_the_agent(&attacks, &root, &marker);

    let server = RedisServer::start();
    let bus = Bus::new(&server.config()).unwrap();
    let grant = |shell: bool| {
        format!(
            "[plugins.cmd]\nexec = [\"/usr/bin/*\", \"/bin/*\", {}]\nshell = {shell}\n\
             env = [\"PATH\"]\ndirs = [{{ path = {} }}]\n",
            toml_str(&bin.join("*")),
            toml_str(&root),
        )
    };
    let _plain = start_agent(&server.config(), "plain", &grant(false));
    let _shell = start_agent(&server.config(), "shell", &grant(true));
    wait_registered(&bus, &["plain", "shell"]).await;
    let kwarg = json!({"python_shell": false, "cwd": root.display().to_string()});
    // The allow-list still runs plain programs.
    let r = return_of(
        &bus,
        "plain",
        "cmd.run",
        json!([["/usr/bin/echo", "hi"]]),
        kwarg.clone(),
    )
    .await;
    assert_eq!((r.retcode, r.ret.as_str()), (0, Some("hi")), "{r:?}");
    for argv in &attacks {
        let r = return_of(&bus, "plain", "cmd.run", json!([argv]), kwarg.clone()).await;
        assert_denied(&r, &argv[0]);
        assert!(!took(&marker), "{argv:?} ran its payload without shell");
        // With shell granted, the same job does what it says: the refusal,
        // nothing else about the agent, is what stopped it.
        let _ = return_of(&bus, "shell", "cmd.run", json!([argv]), kwarg.clone()).await;
        assert!(took(&marker), "{argv:?} did not run even with shell");
    }
    // `which` answers as exec decides.
    let r = return_of(&bus, "plain", "cmd.which", json!(["split"]), json!({})).await;
    assert_eq!(r.ret, Value::Null, "{r:?}");
}

// ---------------------------------------------------------------------
// Set-uid files
// ---------------------------------------------------------------------

/// A file's permission bits.
fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

/// A writable directory `rw` and a read-only one `ro` holding `suid`, a
/// set-uid copy of `/usr/bin/id` (in a temporary directory, returned to be
/// kept).
fn mode_dirs() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let work = tempfile::tempdir().unwrap();
    let root = work.path().canonicalize().unwrap();
    let (rw, ro) = (root.join("rw"), root.join("ro"));
    std::fs::create_dir(&rw).unwrap();
    std::fs::create_dir(&ro).unwrap();
    let suid = ro.join("suid");
    std::fs::copy("/usr/bin/id", &suid).unwrap();
    std::fs::set_permissions(&suid, std::fs::Permissions::from_mode(0o4755)).unwrap();
    // What the attack is after: the kernel keeps the bit the job asks for.
    assert_eq!(mode(&suid), 0o4755, "this filesystem drops set-uid bits");
    (work, rw, ro)
}

/// A writable directory and a read-only one holding `suid`, a set-uid
/// copy of `/usr/bin/id`, granted to `cp` and `file`; `special_modes` as
/// given.
fn mode_grants(rw: &Path, ro: &Path, special_modes: bool) -> String {
    format!(
        "[plugins.cp]\ndirs = [{{ path = {rw}, writable = true }}]\nspecial_modes = {special_modes}\n\
         [plugins.file]\ndirs = [{{ path = {rw}, writable = true }}, {{ path = {ro} }}]\n\
         special_modes = {special_modes}\n",
        rw = toml_str(rw),
        ro = toml_str(ro),
    )
}

/// The three ways a job made a set-uid file, run on agent `id`: each
/// returns, and leaves its file at the path returned.
async fn make_setuid_files(bus: &Bus, id: &str, rw: &Path, ro: &Path) -> Vec<(Return, PathBuf)> {
    // `a\n`, in base64: the bits, not the content, are the attack.
    let chunk = "YQo=";
    let elf = std::fs::read("/usr/bin/id").unwrap();
    let (recv, set, copy) = (rw.join("recv"), rw.join("set"), rw.join("copy"));
    std::fs::write(&set, &elf).unwrap();
    std::fs::set_permissions(&set, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = |p: &Path| p.display().to_string();
    let recv_kw = json!({"chunk": chunk, "compressed": false, "mode": 0o4755});
    vec![
        (
            return_of(bus, id, "cp.recv_chunked", json!([path(&recv)]), recv_kw).await,
            recv,
        ),
        (
            return_of(
                bus,
                id,
                "file.set_mode",
                json!([path(&set), "4755"]),
                json!({}),
            )
            .await,
            set,
        ),
        (
            return_of(
                bus,
                id,
                "file.copy",
                json!([path(&ro.join("suid")), path(&copy)]),
                json!({}),
            )
            .await,
            copy,
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_makes_no_setuid_or_world_writable_file_without_special_modes() {
    let (_work, rw, ro) = mode_dirs();

    let server = RedisServer::start();
    let bus = Bus::new(&server.config()).unwrap();
    let _a = start_agent(&server.config(), "modes", &mode_grants(&rw, &ro, false));
    wait_registered(&bus, &["modes"]).await;
    for (r, file) in make_setuid_files(&bus, "modes", &rw, &ro).await {
        assert_denied(&r, &file.display().to_string());
        let m = std::fs::metadata(&file).map(|_| mode(&file)).unwrap_or(0);
        assert_eq!(m & 0o6000, 0, "{} is set-uid: {m:o}", file.display());
    }
    let f = rw.join("plain");
    std::fs::write(&f, "x").unwrap();
    let at = f.display().to_string();
    for refused in ["2755", "6755", "0666", "0777", "1777", "0757"] {
        let r = return_of(
            &bus,
            "modes",
            "file.set_mode",
            json!([at, refused]),
            json!({}),
        )
        .await;
        assert_denied(&r, refused);
        assert_eq!(mode(&f) & 0o6002, 0, "{refused}: {:o}", mode(&f));
    }
    for allowed in ["0755", "1755", "0640"] {
        let r = return_of(
            &bus,
            "modes",
            "file.set_mode",
            json!([at, allowed]),
            json!({}),
        )
        .await;
        assert_eq!(r.retcode, 0, "{allowed}: {r:?}");
        assert_eq!(format!("{:04o}", mode(&f)), allowed);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn special_modes_lets_a_plugin_set_setuid_modes() {
    let (_work, rw, ro) = mode_dirs();

    let server = RedisServer::start();
    let bus = Bus::new(&server.config()).unwrap();
    let _a = start_agent(&server.config(), "special", &mode_grants(&rw, &ro, true));
    wait_registered(&bus, &["special"]).await;
    for (r, file) in make_setuid_files(&bus, "special", &rw, &ro).await {
        assert_eq!(r.retcode, 0, "{}: {r:?}", file.display());
        assert_eq!(mode(&file), 0o4755, "{}", file.display());
    }
}
