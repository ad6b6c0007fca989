//! The execution modules as a Salt operator calls them, compared with
//! Salt 3008.4's own modules (`salt-call --local`, through
//! `tests/salt/oracle.py modules`): the same words to both, the returns
//! compared as JSON; files in twin temporary directories, compared after.
//! Each module also refuses what its default grants (`maid init`'s
//! configuration) do not give it, with retcode 77.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};

use crate::common::guests;
use crate::common::salt::oracle;

/// `maid call --local --out json WORDS` in `cwd` (which the local grants
/// let every plugin read and write), with `file_root` serving `salt://`.
fn maid_call(cwd: &Path, config: Option<&Path>, words: &[String]) -> Output {
    maid_call_with(cwd, config, &[], words)
}

/// [`maid_call`] with `flags` before the words.
fn maid_call_with(cwd: &Path, config: Option<&Path>, flags: &[&str], words: &[String]) -> Output {
    let mut cmd = crate::common::maid_command();
    cmd.args(["call", "--local", "--out", "json"])
        .arg("--file-root")
        .arg(cwd)
        .current_dir(cwd)
        .env("MAID_PLUGIN_DIR", guests::PLUGINS_DIR)
        .env("MAID_CACHE_DIR", crate::common::shared_cache())
        .env_remove("MAID_CONFIG");
    if let Some(c) = config {
        cmd.arg("-c").arg(c);
    }
    cmd.args(flags)
        .arg("--")
        .args(words)
        .output()
        .expect("run maid")
}

/// The return of one `maid call` under `config`, which must succeed.
fn maid_ok(cwd: &Path, config: Option<&Path>, words: &[String]) -> Value {
    let out = maid_call(cwd, config, words);
    assert!(
        out.status.success(),
        "{words:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice::<Value>(&out.stdout).unwrap()["local"].clone()
}

/// The return of one `maid call`, or `None` when it failed (non-zero exit).
fn maid_return(cwd: &Path, words: &[String]) -> Option<Value> {
    let out = maid_call(cwd, None, words);
    if !out.status.success() {
        return None;
    }
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "maid call {words:?}: {e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    Some(v["local"].clone())
}

/// A directory tree both sides start from: a text file (mode 0640), a
/// second file, a subdirectory with a file, a link, a script.
fn seed(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(dir.join("a.txt"), "hello\nworld\nfoo=1\n").unwrap();
    std::fs::set_permissions(dir.join("a.txt"), std::fs::Permissions::from_mode(0o640)).unwrap();
    std::fs::write(dir.join("b.txt"), "no newline at the end").unwrap();
    std::fs::create_dir(dir.join("sub")).unwrap();
    std::fs::write(dir.join("sub/c.txt"), "c\n").unwrap();
    std::os::unix::fs::symlink(dir.join("a.txt"), dir.join("link")).unwrap();
    std::fs::write(
        dir.join("s.sh"),
        "#!/bin/sh\necho \"args: $*\"\necho oops >&2\nexit 3\n",
    )
    .unwrap();
}

/// Every file under `dir`: relative path, type, mode and content.
fn tree(dir: &Path) -> Vec<(String, String)> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let rel = p.strip_prefix(dir).unwrap().display().to_string();
            let md = std::fs::symlink_metadata(&p).unwrap();
            let mode = md.permissions().mode() & 0o7777;
            let what = if md.file_type().is_symlink() {
                let t = std::fs::read_link(&p).unwrap().display().to_string();
                format!("link -> {}", t.replace(&dir.display().to_string(), "{d}"))
            } else if md.is_dir() {
                stack.push(p.clone());
                format!("dir {mode:o}")
            } else {
                format!(
                    "file {mode:o} {:?}",
                    String::from_utf8_lossy(&std::fs::read(&p).unwrap())
                )
            };
            out.push((rel, what));
        }
    }
    out.sort();
    out
}

/// What can differ between two runs of the same call and is not the
/// module's doing: times, inodes, pids, the directory's own name.
fn comparable(fun: &str, v: &Value, dir: &Path) -> Value {
    let text = v.to_string().replace(&dir.display().to_string(), "{d}");
    let mut v: Value = serde_json::from_str(&text).unwrap();
    match fun {
        "test.fib" | "test.collatz" => v = v[0].clone(),
        "test.random_hash" | "test.rand_str" => v = json!(v.as_str().map(str::len)),
        "file.stats" => {
            for k in ["atime", "mtime", "ctime", "inode"] {
                v.as_object_mut().map(|m| m.remove(k));
            }
        }
        // Salt's side reads the grains one `maid call` detected, in its
        // own process and directory.
        "grains.items" => {
            for k in ["pid", "cwd"] {
                v.as_object_mut().map(|m| m.remove(k));
            }
        }
        "cmd.script" | "cmd.run_all" => {
            v.as_object_mut().map(|m| m.remove("pid"));
        }
        // Readings that change from one moment to the next: which there
        // are, not what they read.
        "status.meminfo" | "status.loadavg" | "status.uptime" | "status.diskusage" => {
            v = keys(&v);
        }
        "status.cpuinfo" => {
            for k in ["cpu MHz", "bogomips"] {
                v.as_object_mut().map(|m| m.remove(k));
            }
        }
        "disk.usage" | "disk.inodeusage" => {
            for entry in v.as_object_mut().into_iter().flat_map(|m| m.values_mut()) {
                *entry = entry["filesystem"].clone();
            }
        }
        _ => {}
    }
    v
}

/// The sorted keys of an object.
fn keys(v: &Value) -> Value {
    let mut k: Vec<&String> = v.as_object().into_iter().flat_map(|m| m.keys()).collect();
    k.sort();
    json!(k)
}

#[test]
fn modules_answer_as_salt_call_local() {
    // pkg.list_pkgs reads the dpkg database another test changes.
    let _dpkg = DPKG.lock().unwrap_or_else(|e| e.into_inner());
    let salt_dir = tempfile::tempdir().unwrap();
    let maid_dir = tempfile::tempdir().unwrap();
    seed(salt_dir.path());
    seed(maid_dir.path());

    // Salt's grains modules read the grains this maid registered.
    let grains = maid_return(maid_dir.path(), &["grains.items".to_string()]).unwrap();

    let corpus: &[&str] = &[
        // test
        "test.true",
        "test.false",
        "test.ping",
        "test.echo 'hello world'",
        "test.kwarg a=1 b=x c='[1, 2]'",
        "test.arg_clean 1 two k=v",
        "test.arg_type 1 x 1.5 [1] '{a: 1}' null True",
        "test.arg_repr 1 \"x'y\" k=True",
        "test.arg_repr",
        "test.outputter '{a: [1, 2.5, null]}'",
        "test.fib 0",
        "test.fib 30",
        "test.collatz 6",
        "test.collatz 27",
        "test.random_hash",
        "test.random_hash hash_type=md5",
        "test.rand_str 100 sha512",
        "test.retcode",
        "test.retcode 3",
        "test.assertion 1",
        "test.assertion ''",
        "test.tty",
        // test.try: Salt hands the job's `__pub_*` keywords on, so only a
        // function with **kwargs runs
        "test.try module=test.ping",
        "test.try module=test.echo text=hi",
        "test.try test.echo True text=hi",
        "test.try module=test.echo return_try_exception=True bogus=1 text=hi",
        "test.try module=cmd.run cmd='echo hi'",
        "test.try module=cmd.run cmd='echo hi' return_try_exception=True",
        "test.try module=cmd.retcode cmd='exit 3' python_shell=True",
        "test.try module=cmd.run",
        "test.try module=cmd.run return_try_exception=True",
        "test.try module=nosuch.fun",
        "test.try module=nosuch.fun return_try_exception=True",
        "test.try module=test.nosuch return_try_exception=True",
        // (A key that is not text, or has no dot: a fresh salt-call's
        // loader says so, as maid does; a loader that has loaded every
        // module, as this one has, raises a bare KeyError.)
        "test.try module='[1]' return_try_exception=True",
        "test.try module=test. return_try_exception=True",
        "test.try module=file.read path={d}/a.txt return_try_exception=True",
        "test.try module=test.arg_clean k=v",
        "test.try",
        "test.try test.ping True extra",
        // schedule and beacons: a minion with nothing scheduled and no
        // beacons, as consoles ask every minion
        "schedule.list",
        "schedule.list return_yaml=False",
        "beacons.list",
        "beacons.list return_yaml=False",
        "beacons.list_available",
        "test.provider nosuch",
        // grains, on the same grains
        "grains.items",
        "grains.items sanitize=True",
        "grains.ls",
        "grains.get os",
        "grains.get os_family",
        "grains.get ipv4:0",
        "grains.get nope",
        "grains.get nope default=zz",
        "grains.get cpu_flags default='[1]'",
        "grains.item os kernel nope",
        "grains.item id sanitize=True",
        "grains.item os_family delimiter=|",
        "grains.fetch kernel",
        "grains.has_value os",
        "grains.has_value os:x",
        "grains.has_value nope",
        "grains.equals os_family Debian",
        "grains.equals kernel linux",
        "grains.filter_by '{Debian: deb, RedHat: rpm}'",
        "grains.filter_by '{Deb*: deb, default: other}'",
        "grains.filter_by '{Linux: {a: 1}, default: {b: 2}}' grain=kernel",
        "grains.filter_by '{x: 1, default: 2}'",
        "grains.filter_by '{A: B, C: {D: {E: F, G: H}}}' xxx '{D: {E: I}, J: K}' C",
        "grains.filter_by '{default: {A: {B: C}, D: E}, F: {A: {B: G}}, H: {D: I}}' xxx '{D: J}' F default",
        // file, in the twin directories
        "file.file_exists {d}/a.txt",
        "file.file_exists {d}/sub",
        "file.file_exists {d}/missing",
        "file.directory_exists {d}/sub",
        "file.directory_exists {d}/a.txt",
        "file.read {d}/a.txt",
        "file.contains {d}/a.txt world",
        "file.contains {d}/a.txt '  world  '",
        "file.contains {d}/a.txt nope",
        "file.contains {d}/missing x",
        "file.search {d}/a.txt '^w.*d$'",
        "file.search {d}/a.txt '^W' flags=0",
        "file.search {d}/a.txt '^W' flags='[IGNORECASE, MULTILINE]'",
        "file.search {d}/missing x ignore_if_missing=True",
        "file.get_hash {d}/a.txt",
        "file.get_hash {d}/a.txt md5",
        "file.get_hash {d}/a.txt form=sha1",
        "file.get_hash {d}/a.txt sha512",
        "file.get_mode {d}/a.txt",
        "file.get_mode {d}/sub",
        "file.stats {d}/a.txt",
        "file.stats {d}/a.txt hash_type=md5",
        "file.stats {d}/link",
        "file.stats {d}/link follow_symlinks=False",
        "file.stats {d}/sub",
        "file.set_mode {d}/b.txt 0600",
        "file.set_mode {d}/b.txt 755",
        "file.get_mode {d}/b.txt",
        "file.write {d}/w.txt one two 'three four'",
        "file.append {d}/b.txt x y",
        "file.append {d}/a.txt z",
        "file.touch {d}/t.txt",
        "file.file_exists {d}/t.txt",
        "file.touch {d}/t.txt atime=1000 mtime=2000",
        "file.mkdir {d}/m1/m2 mode=0700",
        "file.mkdir {d}/sub",
        "file.makedirs {d}/n1/n2/file",
        "file.makedirs {d}/n1/n2/file",
        "file.makedirs {d}/a.txt/x",
        "file.copy {d}/a.txt {d}/a2.txt",
        "file.copy {d}/sub {d}/sub2",
        "file.copy {d}/sub {d}/sub2 recurse=True",
        "file.rename {d}/a2.txt {d}/a3.txt",
        "file.symlink {d}/a.txt {d}/ln1",
        "file.symlink {d}/a.txt {d}/ln1",
        "file.symlink {d}/b.txt {d}/ln1",
        "file.symlink {d}/b.txt {d}/ln1 force=True",
        "file.symlink {d}/a.txt {d}/ln1 atomic=True",
        "file.symlink {d}/b.txt {d}/a.txt",
        "file.symlink sub/c.txt {d}/ln2",
        "file.symlink /etc/hostname {d}/ln3",
        "file.symlink {d}/a.txt ln4",
        "file.symlink {d}/a.txt {d}/nodir/ln5",
        "file.replace {d}/a.txt '^foo=.*$' repl=foo=2",
        "file.replace {d}/a.txt '^(w)orld$' '\\1ORLD' show_changes=False",
        "file.replace {d}/a.txt nomatch x show_changes=False",
        "file.replace {d}/a.txt pattern=bar=1 repl=bar=1 append_if_not_found=True",
        "file.replace {d}/w.txt one ONE backup=False",
        "file.remove {d}/a3.txt",
        "file.remove {d}/sub2",
        "file.remove {d}/missing",
        // cmd
        "cmd.which ls",
        "cmd.which no-such-program-anywhere",
        "cmd.has_exec sh",
        "cmd.has_exec no-such-program-anywhere",
        "cmd.run_stdout 'echo out; echo err >&2' python_shell=True",
        "cmd.run_stderr 'echo out; echo err >&2' python_shell=True",
        // A YAML-typed word as the command: Python's str() of it runs
        // (`False`, `None`: not found), and a list under the shell is
        // `Popen(list, shell=True)`'s: its first item is the command line.
        // (Called here without a job, Salt's `python_shell` defaults to
        // False; a job's, and maid's, to True: it is named.)
        "cmd.retcode false",
        "cmd.retcode null",
        "cmd.retcode True",
        "cmd.run_stdout '[echo, hi]' python_shell=True",
        "cmd.run_stdout '[\"echo $0\", hi]' python_shell=True",
        "cmd.run_stdout '[echo, hi]' python_shell=False",
        "cmd.script salt://s.sh 'a \"b c\"'",
        "cmd.script salt://missing.sh",
        // status, disk: what this host reads
        "status.uptime",
        "status.loadavg",
        "status.meminfo",
        "status.cpuinfo",
        "status.diskusage",
        "status.diskusage /",
        "status.diskusage tmpfs",
        "disk.usage",
        "disk.inodeusage",
        "disk.usage args=z",
        // network
        "network.interfaces",
        "network.ip_addrs",
        "network.ip_addrs include_loopback=True",
        "network.ip_addrs interface=lo* include_loopback=True",
        "network.ip_addrs cidr=127.0.0.0/8 include_loopback=True",
        "network.ip_addrs cidr=127.0.0.1/8 include_loopback=True",
        "network.ip_addrs type=private include_loopback=True",
        "network.ip_addrs type=public",
        "network.ip_addrs6",
        "network.ip_addrs6 include_loopback=True",
        "network.ipaddrs6 interface=lo include_loopback=True",
        "network.hw_addr lo",
        "network.hwaddr no-such-iface",
        "network.interface lo",
        "network.interface_ip lo",
        "network.is_private 10.1.2.3",
        "network.is_private 8.8.8.8",
        "network.is_private fe80::1",
        // pkg: the real dpkg database
        "pkg.list_pkgs",
        "pkg.list_pkgs versions_as_list=True",
        "pkg.list_pkgs removed=True",
        "pkg.version bash",
        "pkg.version bash coreutils no-such-package",
        "pkg.version 'lib*'",
        "pkg.version no-such-package",
        "pkg.version bash versions_as_list=True",
        // user, group: the local account files
        "user.info root",
        "user.info nobody",
        "user.info no-such-user",
        "user.list_users",
        "user.getent",
        "user.list_groups root",
        "user.primary_group root",
        "group.info root",
        "group.info no-such-group",
        "group.getent",
        // sys: argument specifications of what both define
        "sys.argspec test.retcode",
        "sys.argspec test.echo",
        "sys.argspec test.arg",
        "sys.argspec grains.get",
        "sys.argspec file.get_hash",
        "sys.argspec file.stats",
        "sys.argspec file.replace",
        "sys.argspec cmd.which",
        "sys.argspec pkg.version",
        "sys.argspec pkg.list_pkgs",
        "sys.argspec pkg.install",
        "sys.argspec pkg.remove",
        "sys.argspec pkg.refresh_db",
        "sys.argspec pkg.list_upgrades",
        "sys.argspec test.try",
    ];

    let words = |dir: &Path, line: &str| -> Vec<String> {
        let line = line.replace("{d}", &dir.display().to_string());
        shlex::split(&line).unwrap()
    };
    let calls: Vec<Vec<String>> = corpus.iter().map(|l| words(salt_dir.path(), l)).collect();
    let salt = oracle(
        "modules",
        &json!({
            "calls": calls,
            "grains": grains,
            "file_root": salt_dir.path(),
        }),
    );
    let salt = salt.as_array().unwrap();
    assert_eq!(salt.len(), corpus.len(), "{salt:?}");

    let mut differences = Vec::new();
    for (line, salt) in corpus.iter().zip(salt) {
        let w = words(maid_dir.path(), line);
        let fun = w[0].as_str();
        let out = maid_call(maid_dir.path(), None, &w);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        match salt.get("return") {
            Some(want) => {
                let Ok(got) = serde_json::from_str::<Value>(&stdout) else {
                    differences.push(format!("{line}: maid printed {stdout}{stderr}"));
                    continue;
                };
                let got = comparable(fun, &got["local"], maid_dir.path());
                let want = comparable(fun, want, salt_dir.path());
                if got != want {
                    differences.push(format!("{line}:\n  maid {got}\n  Salt {want}"));
                }
                // A retcode Salt set, maid sets (salt-call exits 1 for it).
                let failed = salt.get("retcode").is_some_and(|r| r != 0);
                if failed != (out.status.code() != Some(0)) {
                    differences.push(format!(
                        "{line}: maid exited {:?}, Salt's retcode {:?}",
                        out.status.code(),
                        salt.get("retcode")
                    ));
                }
            }
            None => {
                // Salt raised: maid must fail too.
                if out.status.success() {
                    differences.push(format!(
                        "{line}: Salt raised {} ({}), maid returned {stdout}",
                        salt["error"], salt["message"]
                    ));
                }
            }
        }
    }
    assert!(
        differences.is_empty(),
        "{} of {} calls differ from Salt {}:\n{}",
        differences.len(),
        corpus.len(),
        crate::common::salt::SALT_VERSION,
        differences.join("\n")
    );
    // What the calls did to the files is the same, too.
    assert_eq!(tree(maid_dir.path()), tree(salt_dir.path()));
}

/// The functions each maid module lists all exist in Salt's module of the
/// same name, and the grains both detect agree.
#[test]
fn functions_and_grains_are_salts() {
    let dir = tempfile::tempdir().unwrap();
    let mut differences = Vec::new();
    let modules = [
        "test", "grains", "sys", "cmd", "file", "cp", "status", "disk", "network", "user", "group",
        "pkg", "saltutil", "service",
    ];
    let calls: Vec<Value> = modules
        .iter()
        .map(|m| json!(["sys.list_functions", m]))
        .chain([json!([
            "grains.item",
            "os",
            "os_family",
            "kernel",
            "osarch",
            "cpuarch",
            "osrelease",
            "oscodename",
            "osfullname",
            "num_cpus",
            "mem_total",
            "ipv4",
            "ipv6"
        ])])
        .collect();
    let salt = oracle("modules", &json!({"calls": calls}));
    // maid's own, each documented in docs/differences-from-salt.md: a
    // state asks them what Salt's state looks up in-process.
    let maids_own = [
        // `user.present`'s `os.path.isdir(home)`: the state plugin may
        // look at no directory, so the user module (`test -d`) answers.
        "user.home_exists",
    ];
    for (i, m) in modules.iter().enumerate() {
        let ours = maid_return(dir.path(), &["sys.list_functions".into(), m.to_string()])
            .unwrap_or_else(|| panic!("sys.list_functions {m} failed"));
        let theirs = salt[i]["return"].as_array().unwrap();
        let ours = ours.as_array().unwrap();
        assert!(!ours.is_empty(), "{m} lists no functions");
        for f in ours {
            if !theirs.contains(f) && !maids_own.iter().any(|own| f == own) {
                differences.push(format!("{f} is not a Salt function"));
            }
        }
    }
    let words: Vec<String> = calls.last().unwrap().as_array().unwrap()[..]
        .iter()
        .map(|w| w.as_str().unwrap().to_string())
        .collect();
    let ours = maid_return(dir.path(), &words).unwrap();
    let theirs = &salt[modules.len()]["return"];
    for (k, v) in theirs.as_object().unwrap() {
        if &ours[k] != v {
            differences.push(format!("grain {k}: maid {}, Salt {v}", ours[k]));
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}

/// `maid init`'s configuration, with the plugin and cache directories the
/// tests use.
fn default_config(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("maid.toml");
    std::fs::write(&path, maid_config::TEMPLATE).unwrap();
    path
}

/// `maid call --retcode-passthrough WORDS` under `config`: the exit code
/// and what it printed.
fn passthrough(cwd: &Path, config: &Path, words: &[&str]) -> (Option<i32>, String) {
    let words: Vec<String> = words.iter().map(|w| w.to_string()).collect();
    let out = maid_call_with(cwd, Some(config), &["--retcode-passthrough"], &words);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// Outside its default grants, each module is refused with retcode 77 and
/// says why; a module that asks for no capability has none to misuse.
#[test]
fn modules_refuse_what_their_default_grants_do_not_give() {
    let dir = tempfile::tempdir().unwrap();
    let config = default_config(dir.path());
    let refused = |words: &[&str], why: &str| {
        let words: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        let out = maid_call(dir.path(), Some(&config), &words);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(1), "{words:?}: {text}");
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        let ret = v["local"].as_str().unwrap_or_default();
        assert!(
            ret.starts_with("Denied: ") && ret.contains(why),
            "{words:?} should be denied ({why}): {text}"
        );
        // The retcode itself, passed through.
        let out = maid_call_with(
            dir.path(),
            Some(&config),
            &["--retcode-passthrough"],
            &words,
        );
        assert_eq!(out.status.code(), Some(77), "{words:?}");
    };
    // file: only /srv/maid.
    refused(
        &["file.read", "/etc/hostname"],
        "outside the directories granted",
    );
    refused(
        &["file.write", "/etc/maid-test", "x"],
        "outside the directories granted",
    );
    refused(
        &["file.stats", "/etc/hostname"],
        "outside the directories granted",
    );
    refused(
        &["file.set_mode", "/etc/hostname", "0777"],
        "outside the directories granted",
    );
    refused(
        &["file.symlink", "/etc/hostname", "/etc/maid-link"],
        "outside the directories granted",
    );
    refused(&["file.mkdir", "/srv/maid/x", "user=root"], "owner");
    // cp.recv_chunked (salt-cp -C): a chunk or a directory only where cp
    // may write, and nothing made elsewhere.
    refused(
        &[
            "cp.recv_chunked",
            "/etc/maid-cp-test",
            "chunk=YQo=",
            "compressed=False",
        ],
        "outside the directories granted",
    );
    refused(
        &["cp.recv_chunked", "/etc/maid-cp-dir/sub", "chunk=null"],
        "outside the directories granted",
    );
    refused(
        &[
            "cp.recv_chunked",
            "/srv/maid/../../etc/maid-cp-test",
            "chunk=YQo=",
            "compressed=False",
            "mode=2541",
        ],
        "outside the directories granted",
    );
    for made in ["/etc/maid-cp-test", "/etc/maid-cp-dir"] {
        assert!(!std::path::Path::new(made).exists(), "{made} was made");
    }
    // cmd: programs outside its allow-list, even through which.
    refused(
        &[
            "cmd.run_stdout",
            "/usr/lib/os-release",
            "python_shell=False",
        ],
        "not in the exec allow-list",
    );
    // cmd.script: only salt:// sources.
    refused(&["cmd.script", "file:///etc/hostname"], "fetch");
    // cmd.script renders no template: refused before anything is fetched
    // or run, rather than run unrendered.
    let words = ["cmd.script", "salt://s.sh", "template=jinja"].map(String::from);
    let out = maid_call(dir.path(), Some(&config), &words);
    // As salt-call: the refusal on stderr, the function's doc on stdout.
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.trim_start().starts_with(
            "Passed invalid arguments: cmd.script does not render scripts (template=jinja)"
        ),
        "{text}"
    );
    // test.try: only the functions its call grant names. cmd.run is not
    // among them, though cmd's own grants would start touch.
    let touched = dir.path().join("touched");
    let touch = format!("cmd=/usr/bin/touch {}", touched.display());
    refused(
        &["test.try", "module=cmd.run", &touch],
        "cmd.run is not among the functions call may run",
    );
    assert!(!touched.exists());
    // What it names runs, under its own plugin's grants.
    let words = ["test.try", "module=test.arg_clean", "k=v"].map(String::from);
    assert_eq!(
        maid_ok(dir.path(), Some(&config), &words),
        json!({"args": [], "kwargs": {"k": "v"}})
    );
    // What the default grants do give works: `/proc/mounts` is the
    // kernel's link into the agent's own `/proc/<pid>/`.
    for words in [&["status.diskusage"][..], &["status.diskusage", "/"][..]] {
        let (code, text) = passthrough(dir.path(), &config, words);
        assert_eq!(code, Some(0), "{words:?} under maid init's grants: {text}");
    }

    // status, disk, user and group: with the grants they need taken away,
    // or only some of them, each says what is missing.
    let narrow = dir.path().join("narrow.toml");
    std::fs::write(
        &narrow,
        "[plugins.status]\nfiles = [\"/proc/uptime\"]\n\
         [plugins.disk]\n\
         [plugins.pkg]\n\
         [plugins.service]\n\
         [plugins.user]\nfiles = [\"/etc/group\"]\n\
         [plugins.group]\nfiles = [\"/etc/passwd\"]\n",
    )
    .unwrap();
    for (words, why) in [
        (
            &["status.meminfo"][..],
            "/proc/meminfo is not among the files granted",
        ),
        (
            &["status.diskusage"][..],
            "/proc/mounts is not among the files granted",
        ),
        (&["disk.usage"][..], "exec is not granted"),
        (&["pkg.list_pkgs"][..], "exec is not granted"),
        (&["service.get_all"][..], "exec is not granted"),
        (
            &["user.info", "root"][..],
            "/etc/passwd is not among the files granted",
        ),
        (
            &["group.getent"][..],
            "/etc/group is not among the files granted",
        ),
    ] {
        let (code, text) = passthrough(dir.path(), &narrow, words);
        assert_eq!(code, Some(77), "{words:?}: {text}");
        assert!(text.contains(why), "{words:?} should say {why}: {text}");
    }

    // pkg with only dpkg-query reads but never changes: removing is refused
    // before anything is removed, and so is fetching a package.
    let read_only = dir.path().join("pkg.toml");
    std::fs::write(
        &read_only,
        format!(
            "[plugins.pkg]\nexec = [\"/usr/bin/dpkg-query\"]\n\
             dirs = [{{ path = \"{}\", writable = true }}]\n",
            dir.path().display()
        ),
    )
    .unwrap();
    let pkg = |words: &[&str]| passthrough(dir.path(), &read_only, words);
    let (code, text) = pkg(&["pkg.version", "bash"]);
    assert_eq!(code, Some(0), "{text}");
    let (code, text) = pkg(&["pkg.remove", "bash"]);
    assert_eq!(code, Some(77), "{text}");
    assert!(text.contains("Denied: "), "{text}");
    assert!(Path::new("/usr/bin/bash").exists() || Path::new("/bin/bash").exists());
    let (code, text) = pkg(&["pkg.install", "sources=[{\"x\": \"salt://x.deb\"}]"]);
    assert_eq!(code, Some(77), "{text}");
    assert!(text.contains("fetch"), "{text}");

    // cmd.which names only what the grants would start: a program that
    // exists but is not allowed is as absent; without exec, it is denied.
    let which = dir.path().join("which.toml");
    std::fs::write(
        &which,
        "[plugins.cmd]\nexec = [\"/usr/bin/ls\"]\nenv = [\"PATH\"]\n",
    )
    .unwrap();
    let ask = |config: &Path, words: &[&str]| {
        let words: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        let out = maid_call(dir.path(), Some(config), &words);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        (out.status.code(), v["local"].clone())
    };
    assert_eq!(
        ask(&which, &["cmd.which", "ls"]),
        (Some(0), json!("/usr/bin/ls"))
    );
    assert!(Path::new("/usr/bin/cat").exists());
    assert_eq!(ask(&which, &["cmd.which", "cat"]), (Some(0), Value::Null));
    assert_eq!(
        ask(&which, &["cmd.which", "/usr/bin/cat"]),
        (Some(0), Value::Null)
    );
    assert_eq!(
        ask(&which, &["cmd.has_exec", "cat"]),
        (Some(0), json!(false))
    );
    std::fs::write(&which, "[plugins.cmd]\n").unwrap();
    let (code, ret) = ask(&which, &["cmd.which", "ls"]);
    assert_eq!(code, Some(1));
    assert!(
        ret.as_str().unwrap_or_default().starts_with("Denied: exec"),
        "{ret}"
    );

    // A link inside a granted directory that leads out of it: the host's
    // own file calls (owner and mode, which WASI lacks) refuse it too, and
    // the file it points at keeps its mode.
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("secret");
    std::fs::write(&target, "x").unwrap();
    std::fs::set_permissions(&target, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let granted = dir.path().join("granted");
    std::fs::create_dir(&granted).unwrap();
    std::os::unix::fs::symlink(&target, granted.join("out")).unwrap();
    // The same, by a relative path.
    let name = outside.path().file_name().unwrap().to_str().unwrap();
    std::os::unix::fs::symlink(format!("../../{name}"), granted.join("up")).unwrap();
    let config = dir.path().join("links.toml");
    std::fs::write(
        &config,
        format!(
            "[plugins.file]\ndirs = [{{ path = \"{}\", writable = true }}]\n",
            granted.display()
        ),
    )
    .unwrap();
    // And a directory link leading out, to make a new link through.
    std::os::unix::fs::symlink(outside.path(), granted.join("outdir")).unwrap();
    let link = granted.join("out").display().to_string();
    let up = granted.join("up/secret").display().to_string();
    let through = granted.join("outdir/made").display().to_string();
    for words in [
        vec!["file.stats", link.as_str()],
        vec!["file.get_mode", link.as_str()],
        vec!["file.set_mode", link.as_str(), "0666"],
        vec!["file.read", link.as_str()],
        vec!["file.stats", up.as_str()],
        vec!["file.symlink", "/etc/hostname", through.as_str()],
        vec![
            "file.symlink",
            "/etc/hostname",
            through.as_str(),
            "atomic=True",
        ],
    ] {
        let words: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        let out = maid_call_with(
            dir.path(),
            Some(&config),
            &["--retcode-passthrough"],
            &words,
        );
        assert_eq!(
            out.status.code(),
            Some(77),
            "{words:?}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&target).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600, "the file outside kept its mode");
    assert_eq!(
        std::fs::read_dir(outside.path()).unwrap().count(),
        1,
        "no link was made outside"
    );
    // The same link's own entry may be read without following it.
    let out = maid_call(
        dir.path(),
        Some(&config),
        &[
            "file.stats".into(),
            link.clone(),
            "follow_symlinks=False".into(),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["local"]["type"], "link");

    // test, grains, sys and network ask for nothing, so nothing is granted
    // them; grains asks to read files and run programs, for the core
    // grains, and gets only the ones `maid init` names: no shell, no
    // environment, nothing written, no other process's environment.
    for m in ["test", "grains", "sys", "network"] {
        let out = crate::common::maid_command()
            .args(["plugin", "inspect", "--format", "json"])
            .arg(format!("{}/{m}.wasm", guests::PLUGINS_DIR))
            .arg("-c")
            // `maid init`'s configuration (default_config's).
            .arg(dir.path().join("maid.toml"))
            .env("MAID_CACHE_DIR", crate::common::shared_cache())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        if m != "grains" {
            assert_eq!(v["requested"], json!([]), "{m}: {v}");
            continue;
        }
        assert_eq!(v["requested"], json!(["exec", "fs-read"]), "{v}");
        let granted = &v["granted"];
        assert_eq!(granted["shell"], json!(false), "{v}");
        assert_eq!(granted["env"], json!([]), "{v}");
        assert_eq!(
            granted["dirs"],
            json!([{"path": "/sys/block", "writable": false}]),
            "{v}"
        );
        let named = |key: &str| -> Vec<String> {
            granted[key]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p.as_str().unwrap().to_string())
                .collect()
        };
        for program in named("exec") {
            let name = program.rsplit('/').next().unwrap();
            assert!(
                [
                    "systemctl",
                    "systemd-detect-virt",
                    "selinuxenabled",
                    "getenforce",
                    "lspci"
                ]
                .contains(&name),
                "{program}"
            );
        }
        for file in named("files") {
            assert!(
                (!file.contains("environ") && !file.ends_with("/**"))
                    || file == "/usr/share/zoneinfo/**",
                "{file}"
            );
        }
    }
}

/// The one return of `report` (from the maid its job targeted).
fn only_return(report: &maid_master::jobs::Report) -> &maid_agent::protocol::Return {
    assert_eq!(report.returns.len(), 1, "{report:?}");
    &report.returns[0]
}

/// Whether a process whose command line holds `marker` is running.
fn process_running(marker: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        std::fs::read(e.path().join("cmdline")).is_ok_and(|c| {
            String::from_utf8_lossy(&c)
                .replace('\0', " ")
                .contains(marker)
        })
    })
}

/// `saltutil` on a real agent: a running `cmd.run 'sleep …'` is listed,
/// found, and stopped by `kill_job`; its program is gone and its return
/// says it was stopped. Without the `jobs` grant, the same calls are
/// refused with 77.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn saltutil_kill_job_stops_a_running_command() {
    use crate::common::fleet::{request, run, run_watching, start_agent, wait_registered};
    use std::time::{Duration, Instant};

    let server = crate::common::redis::RedisServer::start();
    let redis = server.config();
    let bus = maid_bus::Bus::new(&redis).unwrap();
    let _k = start_agent(
        &redis,
        "maid-k",
        "[plugins.cmd]\nexec = [\"*\"]\nshell = true\nenv = [\"PATH\"]\n\
         [plugins.saltutil]\njobs = true\n",
    );
    let _n = start_agent(&redis, "maid-n", "[plugins.saltutil]\n");
    wait_registered(&bus, &["maid-k", "maid-n"]).await;

    // A marker no other test's program carries.
    let marker = "59.4217";
    let mut sleeper = request(
        "maid-k",
        "glob",
        "cmd.run",
        json!([format!("sleep {marker}")]),
        json!({}),
    );
    sleeper.collect.timeout = Duration::from_secs(120);
    let (job, pinged) = run_watching(&bus, sleeper, "maid-k").await;
    pinged.await.unwrap();

    // Listed once it has its slot and its program runs.
    let deadline = Instant::now() + Duration::from_secs(20);
    let data = loop {
        let report = run(
            &bus,
            &request(
                "maid-k",
                "glob",
                "saltutil.is_running",
                json!(["cmd.*"]),
                json!({}),
            ),
        )
        .await;
        let ret = &only_return(&report).ret;
        if let Some(d) = ret.as_array().and_then(|l| l.first()).cloned()
            && process_running(marker)
        {
            break d;
        }
        assert!(Instant::now() < deadline, "never listed: {ret}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(data["fun"], "cmd.run");
    assert_eq!(data["arg"], json!([format!("sleep {marker}")]));
    assert_eq!(data["tgt"], "maid-k");
    assert_eq!(data["user"], "tester");
    let jid = data["jid"].as_str().unwrap().to_string();
    let found = run(
        &bus,
        &request(
            "maid-k",
            "glob",
            "saltutil.find_job",
            json!([jid]),
            json!({}),
        ),
    )
    .await;
    assert_eq!(only_return(&found).ret, data);

    // `maid runner jobs.active`, as salt-run's: the job by its jid, the
    // maid running it with the agent's pid (maid-n, whose saltutil has
    // no `jobs` grant, says nothing).
    let active = crate::common::maid_command()
        .args([
            "runner",
            "--master-topic",
            crate::common::fleet::TOPIC,
            "--out",
            "json",
        ])
        .args(["jobs.active"])
        .env("MAID_REDIS", server.url())
        .env("MAID_VERIFY_REPLIES", "false")
        .env_remove("MAID_CONFIG")
        .output()
        .unwrap();
    let active: Value = serde_json::from_slice(&active.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&active.stderr)));
    let listed = &active[&jid];
    assert_eq!(listed["Function"], "cmd.run", "{active}");
    assert_eq!(listed["Target"], "maid-k", "{active}");
    assert_eq!(
        listed["Running"],
        json!([{"maid-k": data["pid"]}]),
        "{active}"
    );
    assert_eq!(listed["Returned"], json!([]), "{active}");

    let asked = Instant::now();
    let killed = run(
        &bus,
        &request(
            "maid-k",
            "glob",
            "saltutil.kill_job",
            json!([jid]),
            json!({}),
        ),
    )
    .await;
    let said = only_return(&killed).ret.as_str().unwrap().to_string();
    assert!(
        said.starts_with(&format!("Signal 9 sent to job {jid} at pid ")),
        "{said}"
    );
    let report = job.await.unwrap();
    let stopped = only_return(&report);
    // Stopped, not run out: far inside the minute it would have slept.
    let took = asked.elapsed();
    eprintln!("kill_job asked to the stopped job's return: {took:?}");
    assert!(took < Duration::from_secs(30), "{took:?}");
    assert_eq!(stopped.retcode, 137, "{:?}", stopped.ret);
    assert!(
        stopped
            .ret
            .as_str()
            .unwrap_or_default()
            .contains("stopped by signal 9"),
        "{:?}",
        stopped.ret
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while process_running(marker) {
        assert!(Instant::now() < deadline, "sleep {marker} still runs");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Gone from the table; a second kill finds nothing.
    let found = run(
        &bus,
        &request(
            "maid-k",
            "glob",
            "saltutil.find_job",
            json!([jid]),
            json!({}),
        ),
    )
    .await;
    assert_eq!(only_return(&found).ret, json!({}));
    let again = run(
        &bus,
        &request(
            "maid-k",
            "glob",
            "saltutil.kill_job",
            json!([jid]),
            json!({}),
        ),
    )
    .await;
    assert_eq!(only_return(&again).ret, json!(""));

    // Without the jobs grant: refused.
    for fun in ["saltutil.running", "saltutil.kill_job"] {
        let args = if fun.ends_with("kill_job") {
            json!([jid])
        } else {
            json!([])
        };
        let report = run(&bus, &request("maid-n", "glob", fun, args, json!({}))).await;
        let ret = only_return(&report);
        assert_eq!(ret.retcode, 77, "{fun}: {:?}", ret.ret);
        assert!(
            ret.ret
                .as_str()
                .unwrap_or_default()
                .contains("jobs is not granted"),
            "{fun}: {:?}",
            ret.ret
        );
    }
}

/// `grains.setval` and its kin, in order, against Salt's on the same
/// grains: the same returns, and the same grains kept in the grains file.
#[test]
fn grains_are_set_as_salt_sets_them() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir(&state).unwrap();
    let config = dir.path().join("maid.toml");
    std::fs::write(
        &config,
        format!(
            "[security]\nstate_dir = \"{}\"\n[plugins.grains]\nset_grains = true\n",
            state.display()
        ),
    )
    .unwrap();
    let call = |words: &[String]| {
        let out = maid_call(dir.path(), Some(&config), words);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{words:?}: {e}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        v["local"].clone()
    };
    let grains = call(&["grains.items".to_string()]);
    let corpus: &[&str] = &[
        "grains.setval role web",
        "grains.get role",
        "grains.setvals '{a: 1, b: [x], c: {d: e}}'",
        "grains.append b y",
        "grains.append b y",
        "grains.append newlist 1",
        "grains.append role z",
        "grains.append role z convert=True",
        "grains.append c:f 1",
        "grains.remove b x",
        "grains.remove b q",
        "grains.set nested:key v",
        "grains.set nested:key v",
        "grains.set nested:other 2",
        "grains.set b q",
        "grains.set b q force=True",
        "grains.set c:d '[1, 2]'",
        "grains.set c:d '[1, 2]' force=True",
        "grains.delval a",
        "grains.delkey a",
        "grains.delval nested:key destructive=True",
        "grains.delkey c",
        "grains.setvals '{gone: null}' destructive=True",
        "grains.setvals notadict",
        "grains.item role b nested newlist",
        "grains.items",
    ];
    let calls: Vec<Vec<String>> = corpus.iter().map(|l| shlex::split(l).unwrap()).collect();
    let salt = oracle(
        "modules",
        &json!({"calls": calls, "grains": grains, "grains_file": true}),
    );
    let salt = salt.as_array().unwrap();
    assert_eq!(salt.len(), corpus.len() + 1, "{salt:?}");
    let mut differences = Vec::new();
    for ((line, words), salt) in corpus.iter().zip(&calls).zip(salt) {
        let out = maid_call(dir.path(), Some(&config), words);
        let got: Option<Value> = serde_json::from_slice::<Value>(&out.stdout)
            .ok()
            .map(|v| v["local"].clone());
        match (salt.get("return"), got) {
            (Some(want), Some(got)) if out.status.success() => {
                if &got != want {
                    differences.push(format!("{line}:\n  maid {got}\n  Salt {want}"));
                }
            }
            (None, _) if !out.status.success() => {}
            (want, got) => differences.push(format!(
                "{line}: maid exited {:?} with {got:?}; Salt {want:?} {salt}",
                out.status.code()
            )),
        }
    }
    let kept: Value =
        serde_json::from_slice(&std::fs::read(state.join("grains.json")).unwrap()).unwrap();
    let salt_kept = &salt.last().unwrap()["grains_file"];
    if &kept != salt_kept {
        differences.push(format!("grains file:\n  maid {kept}\n  Salt {salt_kept}"));
    }
    assert!(
        differences.is_empty(),
        "{} differences from Salt {}:\n{}",
        differences.len(),
        crate::common::salt::SALT_VERSION,
        differences.join("\n")
    );
}

/// A grain set on a running maid is what targeting matches at once, on the
/// maid and in the registry the master selects from; it survives a
/// restart. Without the grant it is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grain_set_is_targeted_at_once_and_kept() {
    use crate::common::fleet::{request, run, start_agent, wait_registered};
    use std::time::{Duration, Instant};

    let server = crate::common::redis::RedisServer::start();
    let redis = server.config();
    let bus = maid_bus::Bus::new(&redis).unwrap();
    let state = tempfile::tempdir().unwrap();
    let extra = format!(
        "[security]\nrequire_signed = false\nstate_dir = \"{}\"\n\
         [plugins.grains]\nset_grains = true\n",
        state.path().display()
    );
    let mut g = start_agent(&redis, "maid-g", &extra);
    let _n = start_agent(&redis, "maid-ng", "");
    wait_registered(&bus, &["maid-g", "maid-ng"]).await;

    let ping_role = || request("role:db", "grain", "test.ping", json!([]), json!({}));
    assert!(run(&bus, &ping_role()).await.returns.is_empty());
    let set = run(
        &bus,
        &request(
            "maid-g",
            "glob",
            "grains.setval",
            json!(["role", "db"]),
            json!({}),
        ),
    )
    .await;
    assert_eq!(only_return(&set).ret, json!({"role": "db"}));
    // The maid matches it at once.
    let report = run(&bus, &ping_role()).await;
    assert_eq!(only_return(&report).id, "maid-g");
    // The registry follows without waiting for a heartbeat.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut conn = bus.connect().await.unwrap();
    loop {
        let reg = maid_master::jobs::alive_maids(&mut conn, None)
            .await
            .unwrap()["maid-g"]
            .1
            .clone()
            .unwrap();
        if reg.grains.get("role") == Some(&json!("db")) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "registry grains: {:?}",
            reg.grains
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Kept across a restart.
    g.kill();
    let _g = start_agent(&redis, "maid-g", &extra);
    tokio::time::sleep(Duration::from_millis(200)).await;
    wait_registered(&bus, &["maid-g"]).await;
    let report = run(&bus, &ping_role()).await;
    assert_eq!(only_return(&report).id, "maid-g");

    // Without the grant: refused, and nothing changes.
    let refused = run(
        &bus,
        &request(
            "maid-ng",
            "glob",
            "grains.setval",
            json!(["role", "db"]),
            json!({}),
        ),
    )
    .await;
    let ret = only_return(&refused);
    assert_eq!(ret.retcode, 77, "{:?}", ret.ret);
    assert!(
        ret.ret
            .as_str()
            .unwrap_or_default()
            .contains("set_grains is not granted"),
        "{:?}",
        ret.ret
    );
    let report = run(&bus, &ping_role()).await;
    assert_eq!(report.returns.len(), 1, "{report:?}");

    // The kept grains edited by hand are read again by
    // saltutil.refresh_grains (the agent's own, Salt's `True`).
    std::fs::write(
        state.path().join(maid_agent::grains::GRAINS_FILE),
        r#"{"role": "web"}"#,
    )
    .unwrap();
    let refresh = || {
        request(
            "maid-g",
            "glob",
            "saltutil.refresh_grains",
            json!([]),
            json!({}),
        )
    };
    assert_eq!(only_return(&run(&bus, &refresh()).await).ret, json!(true));
    let ping_web = request("role:web", "grain", "test.ping", json!([]), json!({}));
    let report = run(&bus, &ping_web).await;
    assert_eq!(only_return(&report).id, "maid-g");
    assert!(run(&bus, &ping_role()).await.returns.is_empty());
    // An argument Salt's refresh_grains does not take is refused.
    let mut bad = refresh();
    bad.kwarg.insert("bogus".into(), json!(1));
    let ret = run(&bus, &bad).await;
    let ret = only_return(&ret);
    assert_eq!(ret.retcode, 1, "{:?}", ret.ret);
    assert_eq!(
        ret.ret,
        json!("Passed invalid arguments: The following keyword arguments are not valid: bogus=1")
    );
}

/// `service` against a unit tree (`root=`, `systemctl --root`), which works
/// without a running systemd: enable, enabled, get_enabled, disable,
/// disabled, available, get_all, with `maid init`'s grants for it.
#[test]
fn service_enables_and_disables_units_in_a_unit_tree() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir_all(root.join("etc/systemd/system")).unwrap();
    std::fs::create_dir_all(root.join("usr/lib/systemd/system")).unwrap();
    std::fs::write(
        root.join("usr/lib/systemd/system/maidtest.service"),
        "[Unit]\nDescription=maid test\n[Service]\nExecStart=/bin/true\n\
         [Install]\nWantedBy=multi-user.target\n",
    )
    .unwrap();
    // maid init's grants, and the unit tree granted to service (`root=`
    // works only in a directory granted to it).
    let config = dir.path().join("maid.toml");
    let tree = format!(
        "[plugins.service]\ndirs = [{{ path = {:?}, writable = false }}]\n",
        root.display().to_string()
    );
    std::fs::write(
        &config,
        maid_config::TEMPLATE.replace("[plugins.service]\n", &tree),
    )
    .unwrap();
    let r = format!("root={}", root.display());
    let ask = |words: &[&str]| -> Value {
        let words: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        maid_ok(dir.path(), Some(&config), &words)
    };
    assert_eq!(ask(&["service.available", "maidtest", &r]), json!(true));
    assert_eq!(ask(&["service.available", "nope", &r]), json!(false));
    assert_eq!(ask(&["service.get_all", &r]), json!(["maidtest"]));
    assert_eq!(ask(&["service.enabled", "maidtest", &r]), json!(false));
    assert_eq!(ask(&["service.disabled", "maidtest", &r]), json!(true));
    assert_eq!(ask(&["service.get_enabled", &r]), json!([]));
    assert_eq!(ask(&["service.enable", "maidtest", &r]), json!(true));
    assert!(
        root.join("etc/systemd/system/multi-user.target.wants/maidtest.service")
            .symlink_metadata()
            .is_ok()
    );
    assert_eq!(
        ask(&["service.enabled", "maidtest.service", &r]),
        json!(true)
    );
    assert_eq!(ask(&["service.get_enabled", &r]), json!(["maidtest"]));
    assert_eq!(ask(&["service.disable", "maidtest", &r]), json!(true));
    assert_eq!(ask(&["service.enabled", "maidtest", &r]), json!(false));
    // A unit that is not there: systemctl's error, which Salt raises.
    let out = maid_call(
        dir.path(),
        Some(&config),
        &["service.enable".into(), "nope".into(), r.clone()],
    );
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("nope.service"), "{text}");
    // A name that would be an option is refused, not passed on.
    let out = maid_call(
        dir.path(),
        Some(&config),
        &["service.enable".into(), "--now".into(), r.clone()],
    );
    // salt-call prints a bad call's message on stderr, the usage on stdout.
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a unit name"));
}

/// The dpkg database is the machine's: one test at a time changes or
/// reads it.
pub(crate) static DPKG: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A `.deb` built with `dpkg-deb`: `name` at `version` (architecture
/// `all`), with `/etc/<name>.conf` as a conffile when `conffile`.
pub(crate) fn build_deb(
    dir: &Path,
    name: &str,
    version: &str,
    conffile: bool,
) -> std::path::PathBuf {
    let root = dir.join(format!("{name}-{version}"));
    std::fs::create_dir_all(root.join("DEBIAN")).unwrap();
    std::fs::write(
        root.join("DEBIAN/control"),
        format!(
            "Package: {name}\nVersion: {version}\nArchitecture: all\n\
             Maintainer: maid <maid@localhost>\nDescription: maid's test package\n"
        ),
    )
    .unwrap();
    if conffile {
        std::fs::create_dir_all(root.join("etc")).unwrap();
        std::fs::write(root.join(format!("etc/{name}.conf")), "x=1\n").unwrap();
        std::fs::write(root.join("DEBIAN/conffiles"), format!("/etc/{name}.conf\n")).unwrap();
    }
    let deb = dir.join(format!("{name}_{version}_all.deb"));
    let out = Command::new("dpkg-deb")
        .args(["--build", "--root-owner-group"])
        .arg(&root)
        .arg(&deb)
        .output()
        .expect("dpkg-deb (apt-get install dpkg) builds the test packages");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    deb
}

/// A flat apt repository in `dir` holding `debs`, listed as a trusted
/// source in `/etc/apt/sources.list.d` while the value lives: apt and dpkg
/// are the machine's own, as an operator's are (`APT_CONFIG`, which could
/// have kept this private, is a variable no grant passes to a program).
pub(crate) struct AptRepo {
    pub(crate) list: std::path::PathBuf,
    repo: std::path::PathBuf,
}

impl AptRepo {
    pub(crate) fn new(dir: &Path, debs: &[&Path]) -> Self {
        use sha2::Digest;
        let repo = dir.join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        // apt fetches as its own user where it can read.
        let _ = Command::new("chmod")
            .arg("755")
            .arg(dir)
            .arg(&repo)
            .output();
        let mut packages = String::new();
        for deb in debs {
            let name = deb.file_name().unwrap().to_str().unwrap();
            std::fs::copy(deb, repo.join(name)).unwrap();
            let fields = Command::new("dpkg-deb")
                .arg("-f")
                .arg(deb)
                .output()
                .unwrap();
            let bytes = std::fs::read(deb).unwrap();
            packages += &String::from_utf8_lossy(&fields.stdout);
            packages += &format!(
                "Filename: ./{name}\nSize: {}\nSHA256: {:x}\n\n",
                bytes.len(),
                sha2::Sha256::digest(&bytes)
            );
        }
        std::fs::write(repo.join("Packages"), packages).unwrap();
        let list = Path::new("/etc/apt/sources.list.d")
            .join(format!("maid-test-{}.list", std::process::id()));
        std::fs::write(
            &list,
            format!("deb [trusted=yes] file:{} ./\n", repo.display()),
        )
        .unwrap();
        Self { list, repo }
    }
}

impl Drop for AptRepo {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.list);
    }
}

/// Each of `calls` run by maid (`run`) against what Salt's module did
/// (`salt`, from the oracle): maid's returns (`null` where Salt raised and
/// maid failed too), and every difference.
fn against_salt(
    calls: &[Vec<String>],
    salt: &[Value],
    run: impl Fn(&[String]) -> Output,
) -> (Vec<Value>, Vec<String>) {
    let mut differences = Vec::new();
    let mut maid_returns = Vec::new();
    for (call, salt) in calls.iter().zip(salt) {
        let out = run(call);
        let stdout = String::from_utf8_lossy(&out.stdout);
        match salt.get("return") {
            Some(want) => match serde_json::from_str::<Value>(&stdout) {
                Ok(got) if got["local"] == *want && out.status.success() => {
                    maid_returns.push(got["local"].clone());
                }
                _ => differences.push(format!(
                    "{call:?}:\n  maid {stdout}{}\n  Salt {want}",
                    String::from_utf8_lossy(&out.stderr)
                )),
            },
            None => {
                if out.status.success() {
                    differences.push(format!(
                        "{call:?}: Salt raised {} ({}), maid returned {stdout}",
                        salt["error"], salt["message"]
                    ));
                }
                maid_returns.push(Value::Null);
            }
        }
    }
    (maid_returns, differences)
}

/// Remove the test packages, whatever state they are in: each side starts
/// from the same machine.
pub(crate) fn purge_packages(names: &[&str]) {
    let _ = Command::new("dpkg").arg("--purge").args(names).output();
}

/// `pkg.install` (from `.deb` files, by name, by version), `remove`,
/// `purge`, `refresh_db`, `latest_version`, `upgrade_available` and
/// `list_upgrades` through the real dpkg and apt, Salt's `aptpkg` first and
/// then maid's, on packages the test builds and an apt repository of its
/// own: the same calls, the same returns, the same machine after.
#[test]
fn pkg_installs_and_removes_as_salt_does() {
    let _dpkg = DPKG.lock().unwrap_or_else(|e| e.into_inner());
    let uid = Command::new("id").arg("-u").output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&uid.stdout).trim(),
        "0",
        "installing packages through dpkg needs root: run the tests as root"
    );
    let dir = tempfile::tempdir().unwrap();
    let debs = dir.path().join("debs");
    std::fs::create_dir_all(&debs).unwrap();
    let a1 = build_deb(&debs, "maid-test-a", "1.0-1", false);
    let a2 = build_deb(&debs, "maid-test-a", "2.0-1", false);
    build_deb(&debs, "maid-test-b", "1.0-1", true);
    let repo = AptRepo::new(dir.path(), &[&a2]);
    let names = ["maid-test-a", "maid-test-b"];

    let source_a1 = format!("sources=[{{\"maid-test-a\": \"{}\"}}]", a1.display());
    let words: &[&[&str]] = &[
        &["pkg.version", "maid-test-a"],
        &["pkg.install", &source_a1],
        // From salt:// (file_root is the packages' directory): cached
        // first, as Salt's cp.cache_file does.
        &[
            "pkg.install",
            "sources=[{\"maid-test-b\": \"salt://maid-test-b_1.0-1_all.deb\"}]",
        ],
        &["pkg.version", "maid-test-a", "maid-test-b"],
        &["pkg.list_upgrades"],
        &["pkg.latest_version", "maid-test-a", "refresh=False"],
        &[
            "pkg.latest_version",
            "maid-test-a",
            "maid-test-b",
            "refresh=False",
        ],
        &["pkg.upgrade_available", "maid-test-a"],
        &["pkg.upgrade_available", "maid-test-b"],
        &["pkg.version_cmp", "1.0-1", "2.0-1"],
        &["pkg.version_cmp", "1:1.0", "2.0", "ignore_epoch=True"],
        // A version the repository does not have: apt-get fails.
        &["pkg.install", "maid-test-a", "version=9.9-1"],
        &["pkg.install", "maid-test-a"],
        &["pkg.list_upgrades", "refresh=False"],
        &["pkg.latest_version", "maid-test-a", "refresh=False"],
        &["pkg.install", "pkgs=[\"maid-test-a\"]"],
        &["pkg.install", "maid-test-nope"],
        &["pkg.remove", "maid-test-a"],
        &["pkg.remove", "pkgs=[\"maid-test-b\"]"],
        &["pkg.list_pkgs", "removed=True"],
        // Salt's glob matches installed names only: nothing to purge.
        &["pkg.purge", "maid-test-*"],
        &["pkg.purge", "maid-test-b"],
        &["pkg.remove", "maid-test-zzz"],
        &["pkg.version", "maid-test-a", "maid-test-b"],
    ];
    let calls: Vec<Vec<String>> = words
        .iter()
        .map(|c| c.iter().map(|w| w.to_string()).collect())
        .collect();

    purge_packages(&names);
    let salt = oracle("modules", &json!({"calls": calls, "file_root": debs}));
    let salt = salt.as_array().unwrap();
    purge_packages(&names);

    let (maid_returns, differences) = against_salt(&calls, salt, |call| {
        crate::common::maid_command()
            .args(["call", "--local", "--out", "json"])
            .arg("--file-root")
            .arg(&debs)
            .current_dir(dir.path())
            .env("MAID_PLUGIN_DIR", guests::PLUGINS_DIR)
            .env("MAID_CACHE_DIR", crate::common::shared_cache())
            .env_remove("MAID_CONFIG")
            .arg("--")
            .args(call)
            .output()
            .unwrap()
    });
    purge_packages(&names);
    assert!(
        differences.is_empty(),
        "{} of {} pkg calls differ from Salt:\n{}",
        differences.len(),
        calls.len(),
        differences.join("\n")
    );
    // The returns say what happened (so a pkg that failed the same way on
    // both sides would not pass).
    let change = |old: &str, new: &str| json!({"old": old, "new": new});
    assert_eq!(maid_returns[1], json!({"maid-test-a": change("", "1.0-1")}));
    assert_eq!(maid_returns[2], json!({"maid-test-b": change("", "1.0-1")}));
    assert!(dir.path().join("maid-test-b_1.0-1_all.deb").is_file());
    // (list_upgrades also lists what the machine's own sources offer.)
    assert_eq!(maid_returns[4]["maid-test-a"], json!("2.0-1"));
    assert_eq!(maid_returns[7], json!(true));
    assert_eq!(
        maid_returns[12],
        json!({"maid-test-a": change("1.0-1", "2.0-1")})
    );
    assert_eq!(
        maid_returns[17],
        json!({"maid-test-a": change("2.0-1", "")})
    );
    assert_eq!(maid_returns[20], json!({}));
    assert_eq!(
        maid_returns[21],
        json!({"removed": {"maid-test-b": change("1.0-1", "")}, "installed": {}})
    );
    // maid init's grants for pkg are enough to install and remove (its
    // programs, and the variables it sets for them), with the directory
    // of the local package granted to it.
    let config = dir.path().join("maid.toml");
    let debs_dir = format!(
        "{{ path = \"/var/cache/maid/pkg\", writable = true }}, {{ path = {:?}, writable = false }}]",
        debs.display().to_string()
    );
    std::fs::write(
        &config,
        maid_config::TEMPLATE.replace(
            "{ path = \"/var/cache/maid/pkg\", writable = true }]",
            &debs_dir,
        ),
    )
    .unwrap();
    for words in [
        vec!["pkg.install".to_string(), source_a1.clone()],
        vec!["pkg.remove".to_string(), "maid-test-a".to_string()],
    ] {
        maid_ok(dir.path(), Some(&config), &words);
    }
    // refresh_db names each source with what apt did; ours among them.
    let refreshed = maid_ok(dir.path(), None, &["pkg.refresh_db".into()]);
    let ours = format!("file:{} ./ Packages", repo.repo.display());
    assert!(
        refreshed.as_object().unwrap().contains_key(&ours),
        "{refreshed}"
    );
}

/// A job still running when the timeout passes is asked after, as Salt's
/// master asks (`saltutil.find_job`), and waited for while its maid says
/// it runs; a maid that cannot say (no `jobs` grant) counts as done at
/// once, and without asking the job ends at the timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_still_running_is_asked_after_and_waited_for() {
    use crate::common::fleet::{request, run, start_agent, wait_registered};
    use std::time::{Duration, Instant};

    let server = crate::common::redis::RedisServer::start();
    let redis = server.config();
    let bus = maid_bus::Bus::new(&redis).unwrap();
    let _f = start_agent(&redis, "maid-f", "[plugins.saltutil]\njobs = true\n");
    let _n = start_agent(&redis, "maid-nf", "[plugins.saltutil]\n");
    wait_registered(&bus, &["maid-f", "maid-nf"]).await;

    let sleep = |tgt: &str, gather: Option<u64>| {
        let mut req = request(tgt, "glob", "test.sleep", json!([3]), json!({}));
        req.collect.timeout = Duration::from_secs(1);
        req.collect.gather_job_timeout = gather.map(Duration::from_secs);
        req
    };
    // Asked after the 1 s timeout, it says it runs: waited for, returned.
    let started = Instant::now();
    let report = run(&bus, &sleep("maid-f", Some(5))).await;
    assert_eq!(only_return(&report).ret, json!(true), "{report:?}");
    assert!(report.missed_minions.is_empty(), "{report:?}");
    assert!(started.elapsed() >= Duration::from_secs(3));
    // Not asked: missed at the timeout, as before.
    let report = run(&bus, &sleep("maid-f", None)).await;
    assert!(report.returns.is_empty(), "{report:?}");
    assert_eq!(report.missed_minions, ["maid-f".to_string()].into());
    // A maid whose saltutil may not see its jobs answers find_job with a
    // refusal: not running, so the job ends without the whole gather wait.
    let started = Instant::now();
    let report = run(&bus, &sleep("maid-nf", Some(30))).await;
    assert!(report.returns.is_empty(), "{report:?}");
    assert_eq!(report.missed_minions, ["maid-nf".to_string()].into());
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
}

/// Build `name-[epoch:]version-release.arch.rpm` into `top` with
/// `rpmbuild`: one small file under `/usr/share/maid-test`.
fn build_rpm(top: &Path, name: &str, evr: &str, arch: &str) -> std::path::PathBuf {
    let (epoch, vr) = evr
        .split_once(':')
        .map_or((None, evr), |(e, r)| (Some(e), r));
    let (version, release) = vr.split_once('-').unwrap();
    std::fs::create_dir_all(top).unwrap();
    let spec = top.join(format!("{name}-{version}.spec"));
    std::fs::write(
        &spec,
        format!(
            "Name: {name}\nVersion: {version}\nRelease: {release}\n{}\
             Summary: maid test package\nLicense: MIT\nBuildArch: {arch}\n\
             %global debug_package %{{nil}}\n\
             %description\nA package the maid tests install.\n\
             %install\nmkdir -p %{{buildroot}}/usr/share/maid-test\n\
             echo {vr} > %{{buildroot}}/usr/share/maid-test/{name}\n\
             %files\n/usr/share/maid-test/{name}\n",
            epoch.map(|e| format!("Epoch: {e}\n")).unwrap_or_default()
        ),
    )
    .unwrap();
    let out = Command::new("rpmbuild")
        .arg("-bb")
        .arg("--define")
        .arg(format!("_topdir {}", top.display()))
        .arg(&spec)
        .output()
        .expect("rpmbuild (apt-get install rpm) builds the test's packages");
    assert!(
        out.status.success(),
        "rpmbuild {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    top.join(format!("RPMS/{arch}/{name}-{vr}.{arch}.rpm"))
}

/// An rpm host of the test's own: `dnf` and `rpm` wrappers first on
/// `PATH` that work in a root directory of their own (its own rpm
/// database and a repository of the test's packages), so that Salt's
/// `yumpkg` and maid both run the real dnf and rpm without touching the
/// machine's.
struct RpmHost {
    bin: std::path::PathBuf,
    root: std::path::PathBuf,
}

impl RpmHost {
    fn new(dir: &Path, repo: &Path) -> Self {
        use std::os::unix::fs::PermissionsExt;
        for tool in ["dnf", "rpm", "createrepo_c"] {
            assert!(
                Command::new("sh")
                    .args(["-c", &format!("command -v {tool}")])
                    .output()
                    .is_ok_and(|o| o.status.success()),
                "{tool} is missing: apt-get install dnf rpm createrepo-c (./dev test does)"
            );
        }
        let out = Command::new("createrepo_c").arg(repo).output().unwrap();
        assert!(out.status.success(), "{out:?}");
        let repos = dir.join("repos.d");
        std::fs::create_dir_all(&repos).unwrap();
        std::fs::write(
            repos.join("maidtest.repo"),
            format!(
                "[maidtest]\nname=maidtest\nbaseurl=file://{}\nenabled=1\ngpgcheck=0\n",
                repo.display()
            ),
        )
        .unwrap();
        let bin = dir.join("bin");
        let root = dir.join("root");
        std::fs::create_dir_all(&bin).unwrap();
        // Debian's rpm keeps its database under $HOME: the same one for
        // both sides.
        let wrappers = [
            (
                "dnf",
                format!(
                    "exec /usr/bin/dnf --installroot={} --setopt=reposdir={} --releasever=38 \"$@\"",
                    root.display(),
                    repos.display()
                ),
            ),
            (
                "rpm",
                format!("exec /usr/bin/rpm --root {} \"$@\"", root.display()),
            ),
        ];
        for (name, line) in wrappers {
            let path = bin.join(name);
            std::fs::write(
                &path,
                format!("#!/bin/sh\nHOME=/root; export HOME\n{line}\n"),
            )
            .unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let host = Self { bin, root };
        host.reset();
        host
    }

    /// An empty root: nothing installed, no cache.
    fn reset(&self) {
        let _ = std::fs::remove_dir_all(&self.root);
        std::fs::create_dir_all(&self.root).unwrap();
    }

    /// `PATH` with the wrappers first.
    fn path(&self) -> String {
        format!(
            "{}:{}",
            self.bin.display(),
            std::env::var("PATH").unwrap_or_default()
        )
    }
}

/// `pkg` where the grains say RedHat is Salt's `yumpkg` on dnf: the same
/// calls through the real dnf and rpm (in a root of the test's own, with a
/// repository of packages it builds), Salt's `yumpkg` first and then
/// maid's, give the same returns.
#[test]
fn pkg_on_dnf_answers_as_salt_does() {
    let dir = tempfile::tempdir().unwrap();
    let top = dir.path().join("rpmbuild");
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let hello1 = build_rpm(&top, "maid-test-hello", "1.0-1", "noarch");
    for (name, evr, arch) in [
        ("maid-test-hello", "1.0-1", "noarch"),
        ("maid-test-hello", "1.1-1", "noarch"),
        ("maid-test-epochy", "2:2.0-3", "noarch"),
        ("maid-test-archy", "0.5-1", "x86_64"),
    ] {
        let rpm = build_rpm(&top, name, evr, arch);
        std::fs::copy(&rpm, repo.join(rpm.file_name().unwrap())).unwrap();
    }
    let host = RpmHost::new(dir.path(), &repo);
    let grains = json!({
        "os": "Fedora",
        "os_family": "RedHat",
        "osrelease": "38",
        "osmajorrelease": 38,
        "osarch": "x86_64",
        "cpuarch": "x86_64",
        "kernel": "Linux",
    });

    let source = format!(
        "sources=[{{\"maid-test-hello\": \"{}\"}}]",
        hello1.display()
    );
    let words: &[&[&str]] = &[
        &["pkg.list_pkgs"],
        &["pkg.version", "maid-test-hello"],
        &["pkg.install", &source],
        &["pkg.version", "maid-test-hello", "maid-test-epochy"],
        &["pkg.list_upgrades"],
        &["pkg.latest_version", "maid-test-hello", "refresh=False"],
        // Salt does not take the architecture off here.
        &[
            "pkg.latest_version",
            "maid-test-archy.x86_64",
            "refresh=False",
        ],
        &["pkg.list_upgrades", "refresh=False"],
        &[
            "pkg.latest_version",
            "maid-test-hello",
            "maid-test-epochy",
            "maid-test-archy",
            "maid-test-nope",
        ],
        &["pkg.upgrade_available", "maid-test-hello"],
        &["pkg.upgrade_available", "maid-test-nope"],
        &["pkg.refresh_db"],
        &["pkg.refresh_db", "fromrepo=nosuchrepo"],
        &["pkg.version_cmp", "1:1.0-1", "2.0-1"],
        &["pkg.version_cmp", "1:1.0-1", "2.0-1", "ignore_epoch=True"],
        &["pkg.version_cmp", "1.0", "1.0-5"],
        &["pkg.version_cmp", "1.0~rc1-1", "1.0-1"],
        // A version the repository does not have: dnf fails.
        &["pkg.install", "maid-test-hello", "version=9.9-1"],
        &["pkg.install", "maid-test-hello"],
        &["pkg.install", "maid-test-hello", "version=1.0-1"],
        &[
            "pkg.install",
            "pkgs=[\"maid-test-epochy\", \"maid-test-archy.x86_64\"]",
        ],
        &["pkg.install", "maid-test-hello", "reinstall=True"],
        // Reinstalled only when that version is the one installed.
        &[
            "pkg.install",
            "maid-test-hello",
            "version=1.1-1",
            "reinstall=True",
        ],
        &["pkg.version_cmp", "1.0", "1.0.1"],
        &["pkg.list_pkgs"],
        &["pkg.list_pkgs", "versions_as_list=True"],
        &["pkg.install", "maid-test-nope"],
        &["pkg.latest_version", "maid-test-hello", "refresh=False"],
        &["pkg.remove", "maid-test-hello"],
        &["pkg.remove", "pkgs=[{\"maid-test-epochy\": \"2:2.0-3\"}]"],
        &["pkg.purge", "maid-test-*"],
        &["pkg.remove", "maid-test-zzz"],
        &["pkg.list_pkgs"],
    ];
    let calls: Vec<Vec<String>> = words
        .iter()
        .map(|c| c.iter().map(|w| w.to_string()).collect())
        .collect();
    let salt = oracle(
        "modules",
        &json!({"calls": calls, "grains": grains, "path_prefix": host.bin}),
    );
    let salt = salt.as_array().unwrap();
    host.reset();

    // maid with those grains, and pkg granted the wrappers and PATH.
    let config = dir.path().join("maid.toml");
    std::fs::write(
        &config,
        format!(
            "[grains]\nos = \"Fedora\"\nos_family = \"RedHat\"\nosrelease = \"38\"\n\
             osmajorrelease = 38\nosarch = \"x86_64\"\ncpuarch = \"x86_64\"\n\
             [plugins.pkg]\nexec = [\"{0}/dnf\", \"{0}/rpm\"]\nenv = [\"PATH\"]\n\
             dirs = [{{ path = {1:?}, writable = false }}]\n",
            host.bin.display(),
            top.display().to_string()
        ),
    )
    .unwrap();
    let (maid_returns, differences) = against_salt(&calls, salt, |call| {
        crate::common::maid_command()
            .args(["call", "--local", "--out", "json", "--config"])
            .arg(&config)
            .current_dir(dir.path())
            .env("PATH", host.path())
            .env("MAID_PLUGIN_DIR", guests::PLUGINS_DIR)
            .env("MAID_CACHE_DIR", crate::common::shared_cache())
            .env_remove("MAID_CONFIG")
            .arg("--")
            .args(call)
            .output()
            .unwrap()
    });
    assert!(
        differences.is_empty(),
        "{} of {} pkg calls differ from Salt's yumpkg:\n{}",
        differences.len(),
        calls.len(),
        differences.join("\n")
    );
    // The returns say what happened (so a call that failed the same way on
    // both sides would not pass).
    let change = |old: &str, new: &str| json!({"old": old, "new": new});
    assert_eq!(maid_returns[0], json!({}));
    assert_eq!(
        maid_returns[2],
        json!({"maid-test-hello": change("", "1.0-1")})
    );
    assert_eq!(maid_returns[4], json!({"maid-test-hello": "1.1-1"}));
    assert_eq!(
        maid_returns[8],
        json!({
            "maid-test-hello": "1.1-1",
            "maid-test-epochy": "2:2.0-3",
            "maid-test-archy": "0.5-1",
            "maid-test-nope": "",
        })
    );
    assert_eq!(maid_returns[11], json!(true));
    assert_eq!(
        maid_returns[18],
        json!({"maid-test-hello": change("1.0-1", "1.1-1")})
    );
    assert_eq!(
        maid_returns[19],
        json!({"maid-test-hello": change("1.1-1", "1.0-1")})
    );
    assert_eq!(
        maid_returns[21],
        json!({"maid-test-hello": change("1.0-1", "1.0-1")})
    );
    assert_eq!(
        maid_returns[24],
        json!({"maid-test-hello": "1.0-1", "maid-test-epochy": "2:2.0-3", "maid-test-archy": "0.5-1"})
    );
    assert_eq!(
        maid_returns[29],
        json!({"maid-test-epochy": change("2:2.0-3", "")})
    );
    assert_eq!(maid_returns[32], json!({}));
}
