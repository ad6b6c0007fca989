//! The `maid` binary as an operator runs it: `maid call --local` prints
//! what `salt-call --local` prints and exits with the retcode; `maid plugin`
//! shows what each plugin is and may touch; `maid init` writes a config
//! that the other commands accept.

use std::path::Path;
use std::process::{Command, Output};

use crate::common::guests;

fn maid(args: &[&str], cwd: &Path) -> Output {
    crate::common::maid_command()
        .args(args)
        .current_dir(cwd)
        .env("MAID_PLUGIN_DIR", guests::PLUGINS_DIR)
        .env("MAID_CACHE_DIR", crate::common::shared_cache())
        .env_remove("MAID_CONFIG")
        .output()
        .expect("run maid")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn call_local_prints_as_salt_call() {
    let tmp = tempfile::tempdir().unwrap();
    let o = maid(&["call", "--local", "test.ping"], tmp.path());
    assert_eq!(stdout(&o), "local:\n    True\n");
    assert_eq!(o.status.code(), Some(0));

    let o = maid(
        &["call", "--local", "cmd.run", "echo hi", "--out", "json"],
        tmp.path(),
    );
    // Salt's json outputter indents by 4.
    assert_eq!(stdout(&o), "{\n    \"local\": \"hi\"\n}\n");

    let o = maid(
        &["call", "--local", "test.echo", "[1, two]", "--out", "yaml"],
        tmp.path(),
    );
    assert_eq!(stdout(&o), "local:\n- 1\n- two\n");

    let o = maid(
        &["call", "--local", "test.arg", "1", "a=yes", "--out", "txt"],
        tmp.path(),
    );
    assert_eq!(stdout(&o), "local: {'args': [1], 'kwargs': {'a': True}}\n");

    let o = maid(
        &[
            "call",
            "--local",
            "cmd.run_all",
            "echo hi",
            "--out",
            "json",
            "--out-indent",
            "4",
        ],
        tmp.path(),
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["local"]["stdout"], "hi");
    assert!(stdout(&o).starts_with("{\n    \"local\": {\n"));
}

/// salt-call's `-d`, `-g` and `--out-file`: documentation as
/// `print_docs` prints it, the grains through the outputter, and output
/// written to a file (emptied first unless appending).
#[test]
fn call_local_prints_docs_grains_and_to_a_file() {
    let tmp = tempfile::tempdir().unwrap();
    let docs = maid(
        &["call", "--local", "sys.doc", "test", "--out", "json"],
        tmp.path(),
    );
    let docs: serde_json::Value = serde_json::from_slice(&docs.stdout).unwrap();
    let docs = docs["local"].as_object().unwrap();
    let ping = docs["test.ping"].as_str().unwrap();
    assert!(!ping.is_empty());
    let o = maid(&["call", "--local", "-d", "test.ping"], tmp.path());
    assert_eq!(stdout(&o), format!("test.ping:\n{ping}\n\n"));
    assert_eq!(o.status.code(), Some(0));
    // A prefix: every function whose name starts with it, sorted.
    let o = maid(&["call", "--local", "--doc", "test.r"], tmp.path());
    let expected: String = docs
        .iter()
        .filter(|(name, doc)| name.starts_with("test.r") && doc.as_str() != Some(""))
        .map(|(name, doc)| format!("{name}:\n{}\n\n", doc.as_str().unwrap()))
        .collect();
    assert!(expected.matches(":\n").count() >= 3, "{expected}");
    assert_eq!(stdout(&o), expected);
    // One function at a time, as salt-call says: a usage error.
    let o = maid(
        &["call", "--local", "-d", "test.ping", "test.echo"],
        tmp.path(),
    );
    assert_eq!(o.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&o.stderr).contains("one method at one time"));

    let o = maid(
        &["call", "--local", "-g", "--out", "json", "--id", "gr-1"],
        tmp.path(),
    );
    let grains: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(grains["local"]["id"], "gr-1");
    assert_eq!(grains["local"]["kernel"], "Linux");
    let o = maid(&["call", "--local", "-g", "test.ping"], tmp.path());
    assert_eq!(o.status.code(), Some(64));

    let file = tmp.path().join("out.txt");
    std::fs::write(&file, "before\n").unwrap();
    let f = file.to_str().unwrap();
    let o = maid(
        &["call", "--local", "--out-file", f, "test.ping"],
        tmp.path(),
    );
    assert_eq!((stdout(&o).as_str(), o.status.code()), ("", Some(0)));
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "local:\n    True\n"
    );
    let o = maid(
        &[
            "call",
            "--local",
            "--output-file",
            f,
            "--out-file-append",
            "--out",
            "json",
            "test.echo",
            "x",
        ],
        tmp.path(),
    );
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "local:\n    True\n{\n    \"local\": \"x\"\n}\n"
    );
}

#[test]
fn call_local_exits_with_the_retcode() {
    let tmp = tempfile::tempdir().unwrap();
    // As salt-call: `false` is read as a boolean and runs as `False`,
    // which no shell finds.
    let o = maid(&["call", "--local", "cmd.retcode", "false"], tmp.path());
    assert_eq!(stdout(&o), "local:\n    127\n");
    assert_eq!(o.status.code(), Some(1));

    // As salt-call: 1 for any non-zero retcode, unless passed through.
    let o = maid(&["call", "--local", "test.retcode", "code=5"], tmp.path());
    assert_eq!(o.status.code(), Some(1));
    let o = maid(
        &[
            "call",
            "--local",
            "--retcode-passthrough",
            "test.retcode",
            "code=5",
        ],
        tmp.path(),
    );
    assert_eq!(o.status.code(), Some(5));

    // Arguments that do not fit: salt-call's words on stderr (Python's
    // TypeError, naming the bare function), the documentation as usage on
    // stdout, exit 1 whatever --retcode-passthrough says.
    let doc = maid(
        &["call", "--local", "sys.doc", "test.echo", "--out", "json"],
        tmp.path(),
    );
    let doc: serde_json::Value = serde_json::from_slice(&doc.stdout).unwrap();
    let doc = doc["local"]["test.echo"].as_str().unwrap().to_string();
    for extra in [None, Some("--retcode-passthrough")] {
        let mut argv = vec!["call", "--local"];
        argv.extend(extra);
        argv.push("test.echo");
        let o = maid(&argv, tmp.path());
        assert_eq!(
            String::from_utf8_lossy(&o.stderr),
            "\nPassed invalid arguments: echo() missing 1 required positional argument: 'text'.\n\nUsage:\n"
        );
        assert_eq!(stdout(&o), format!("{doc}\n"));
        assert_eq!(o.status.code(), Some(1));
    }

    // An unknown function is named on stderr; the exit status is 255.
    let o = maid(&["call", "--local", "nope.ping"], tmp.path());
    assert_eq!(stdout(&o), "");
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "'nope.ping' is not available.\n"
    );
    assert_eq!(o.status.code(), Some(255));

    let o = maid(&["call", "test.ping"], tmp.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("needs --local"));
}

#[test]
fn call_local_serves_file_roots_and_writes_the_cwd() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("hello.txt"), "hello\n").unwrap();
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let dest = work.join("copy.txt");
    let o = maid(
        &[
            "call",
            "--local",
            "cp.get_file",
            "salt://hello.txt",
            dest.to_str().unwrap(),
            "--file-root",
            root.to_str().unwrap(),
            "--out",
            "json",
            "--out-indent",
            "-1",
        ],
        &work,
    );
    assert_eq!(
        stdout(&o),
        format!("{{\"local\": \"{}\"}}\n", dest.display())
    );
    assert_eq!(std::fs::read_to_string(&dest).unwrap(), "hello\n");
}

#[test]
fn call_with_config_uses_exactly_its_grants() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("maid.toml");
    // cmd may run programs but not a shell.
    std::fs::write(
        &config,
        "[plugins.cmd]\nexec = [\"/usr/bin/*\", \"/bin/*\"]\nshell = false\n",
    )
    .unwrap();
    let c = config.to_str().unwrap();
    let o = maid(
        &[
            "call",
            "--local",
            "--retcode-passthrough",
            "-c",
            c,
            "cmd.run",
            "echo hi",
        ],
        tmp.path(),
    );
    assert_eq!(o.status.code(), Some(77));
    assert!(
        stdout(&o).starts_with("local:\n    Denied: /bin/sh is a shell"),
        "{}",
        stdout(&o)
    );
    let o = maid(
        &[
            "call",
            "--local",
            "-c",
            c,
            "cmd.run",
            "echo hi",
            "python_shell=False",
        ],
        tmp.path(),
    );
    assert_eq!(stdout(&o), "local:\n    hi\n");

    std::fs::write(&config, "[plugins.cmd]\nexecs = []\n").unwrap();
    let o = maid(&["call", "--local", "-c", c, "test.ping"], tmp.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("execs"));
}

#[test]
fn plugin_list_and_inspect() {
    let tmp = tempfile::tempdir().unwrap();
    let o = maid(&["plugin", "list"], tmp.path());
    assert_eq!(o.status.code(), Some(0));
    let text = stdout(&o);
    for m in ["cmd ", "cp ", "test "] {
        assert!(text.lines().any(|l| l.starts_with(m)), "{text}");
    }

    let config = tmp.path().join("maid.toml");
    std::fs::write(
        &config,
        "[plugins.cp]\nfetch = [\"salt://files/**\"]\ndirs = [{ path = \"/srv\", writable = true }]\n",
    )
    .unwrap();
    let cp = Path::new(guests::PLUGINS_DIR).join("cp.wasm");
    let o = maid(
        &[
            "plugin",
            "inspect",
            cp.to_str().unwrap(),
            "-c",
            config.to_str().unwrap(),
            "--format",
            "json",
        ],
        tmp.path(),
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["module"], "cp");
    assert_eq!(
        r["requested"],
        serde_json::json!(["fetch", "fs-read", "fs-write"])
    );
    assert_eq!(
        r["granted"]["fetch"],
        serde_json::json!(["salt://files/**"])
    );
    assert_eq!(r["granted"]["dirs"][0]["path"], "/srv");
    assert_eq!(r["granted"]["exec"], serde_json::json!([]));
    let wasm = std::fs::read(&cp).unwrap();
    use sha2::Digest;
    assert_eq!(r["sha256"], hex::encode(sha2::Sha256::digest(&wasm)));
    let names: Vec<&str> = r["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "get_file",
            "get_file_str",
            "recv_chunked",
            "hash_file",
            "list_master",
            "list_master_dirs",
            "list_states"
        ]
    );

    let o = maid(&["plugin", "inspect", cp.to_str().unwrap()], tmp.path());
    let text = stdout(&o);
    assert!(
        text.contains("requests:  fetch, fs-read, fs-write"),
        "{text}"
    );
    assert!(
        text.contains("cp.get_file(path, dest, saltenv, makedirs, template, gzip)"),
        "{text}"
    );
}

/// `maid plugin compile` compiles a plugin directory ahead, as a package
/// ships it: a first `maid call` on a fresh cache then compiles nothing
/// (its compiler is never set up), where without them it compiles.
#[test]
fn plugins_compiled_ahead_spare_a_fresh_cache_compiling() {
    let tmp = tempfile::tempdir().unwrap();
    let plugins = tmp.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    for module in ["test", "cmd"] {
        let file = format!("{module}.wasm");
        std::fs::copy(
            Path::new(guests::PLUGINS_DIR).join(&file),
            plugins.join(&file),
        )
        .unwrap();
    }
    let dir = plugins.to_str().unwrap();
    let o = maid(&["plugin", "compile", "--plugin-dir", dir], tmp.path());
    let text = stdout(&o);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(
        lines[0].starts_with("cmd ") && lines[0].ends_with(" compiled"),
        "{text}"
    );
    assert!(
        lines[1].starts_with("test ") && lines[1].ends_with(" compiled"),
        "{text}"
    );
    assert_eq!(
        lines[2],
        format!(
            "2 plugins compiled for any {} CPU in {dir}/precompiled",
            std::env::consts::ARCH
        )
    );
    let again = stdout(&maid(
        &["plugin", "compile", "--plugin-dir", dir],
        tmp.path(),
    ));
    assert!(
        again.lines().next().unwrap().ends_with(" already compiled"),
        "{again}"
    );

    // A first call on a fresh cache, with the compiled plugins and then
    // without: only the second sets its compiler up.
    let first_call = |cache: &str| {
        let o = crate::common::maid_command()
            .args([
                "call",
                "--local",
                "--plugin-dir",
                dir,
                "--cache-dir",
                cache,
                "test.ping",
            ])
            .current_dir(tmp.path())
            .env_remove("MAID_CONFIG")
            .env("MAID_LOG", "maid_agent=debug")
            .output()
            .expect("run maid");
        assert_eq!(stdout(&o), "local:\n    True\n");
        String::from_utf8_lossy(&o.stderr).contains("setting up the compiler")
    };
    let cache = tmp.path().join("cache-1");
    assert!(
        !first_call(cache.to_str().unwrap()),
        "compiled though compiled ahead"
    );
    std::fs::remove_dir_all(plugins.join("precompiled")).unwrap();
    let cache = tmp.path().join("cache-2");
    assert!(
        first_call(cache.to_str().unwrap()),
        "the control run did not compile"
    );
}

#[test]
fn init_writes_a_config_the_agent_accepts() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("etc/maid.toml");
    let p = path.to_str().unwrap();
    let o = maid(&["init", p], tmp.path());
    assert_eq!(o.status.code(), Some(0));
    let o = maid(&["init", p], tmp.path());
    assert_eq!(o.status.code(), Some(2), "refuses to overwrite");
    let o = maid(&["call", "--local", "-c", p, "test.ping"], tmp.path());
    assert_eq!(stdout(&o), "local:\n    True\n");
}

#[test]
fn policy_shows_what_is_trusted_and_granted() {
    let tmp = tempfile::tempdir().unwrap();
    let key = maid_agent::trust::generate().unwrap();
    let public = tmp.path().join("master.pub");
    std::fs::write(
        &public,
        maid_agent::trust::encode_verifying(&key.verifying_key()),
    )
    .unwrap();
    let config = tmp.path().join("maid.toml");
    std::fs::write(
        &config,
        format!(
            "[security]\nrequire_signed = true\ntrusted_keys = [\"{}\"]\n\
             [plugins.cmd]\nexec = [\"/usr/bin/*\"]\nshell = false\nrunas = [\"nobody\"]\n",
            public.display()
        ),
    )
    .unwrap();
    let c = config.to_str().unwrap();
    let o = maid(&["policy", "-c", c, "--format", "json"], tmp.path());
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["trust"]["require_signed"], true);
    assert_eq!(
        v["trust"]["trusted_key_ids"],
        serde_json::json!([maid_agent::trust::key_id(&key.verifying_key())])
    );
    let cmd = v["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["module"] == "cmd")
        .unwrap();
    assert_eq!(
        cmd["requested"],
        serde_json::json!(["exec", "shell", "fetch"])
    );
    assert_eq!(cmd["granted"]["exec"], serde_json::json!(["/usr/bin/*"]));
    assert_eq!(cmd["granted"]["shell"], false);
    assert_eq!(cmd["granted"]["runas"], serde_json::json!(["nobody"]));
    // `/usr/bin/*` admits `env` (and interpreters): policy says they are
    // refused without shell.
    let warning = cmd["granted"]["warnings"][0].as_str().unwrap_or_default();
    assert!(
        warning.contains("\"/usr/bin/*\"")
            && warning.contains("env")
            && warning.contains("refused unless shell"),
        "{warning}"
    );
    let test = v["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["module"] == "test")
        .unwrap();
    assert_eq!(test["granted"]["exec"], serde_json::json!([]));

    let o = maid(&["policy", "-c", c], tmp.path());
    let text = stdout(&o);
    assert!(text.starts_with("require_signed: yes\n"), "{text}");
    assert!(text.contains("  runas:   nobody\n"), "{text}");
    assert!(
        text.contains("warning:   exec \"/usr/bin/*\" names programs"),
        "{text}"
    );
}

#[test]
fn the_systemd_unit_and_init_agree() {
    let unit = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../packaging/maid.service"
    ))
    .unwrap();
    let config: maid_config::Config = toml::from_str(maid_config::TEMPLATE).unwrap();
    assert!(unit.contains("ExecStart=/usr/bin/maid agent --config /etc/maid/maid.toml"));
    let dirs = [
        ("ConfigurationDirectory=maid", "/etc/maid"),
        ("StateDirectory=maid", "/var/lib/maid"),
        ("CacheDirectory=maid", "/var/cache/maid"),
        ("LogsDirectory=maid", "/var/log/maid"),
    ];
    for (line, _) in dirs {
        assert!(unit.contains(line), "{line}");
    }
    let under = |p: &std::path::Path, root: &str| p.starts_with(root);
    assert!(under(
        config.cache_dir.as_deref().unwrap(),
        "/var/cache/maid"
    ));
    assert!(under(
        config.security.state_dir.as_deref().unwrap(),
        "/var/lib/maid"
    ));
    assert!(under(
        config.audit.path.as_deref().unwrap(),
        "/var/log/maid"
    ));
    for key in &config.security.trusted_keys {
        assert!(key.starts_with("/etc/maid/"), "{key}");
    }
    assert_eq!(config.security.require_signed, Some(true));
}

/// The binary every host runs carries no benchmark: `maid --help` lists no
/// bench or soak command, and asking for one is an unknown command. The
/// benchmark is `maid-bench`, a crate of its own.
#[test]
fn maid_has_no_bench_commands() {
    let dir = tempfile::tempdir().unwrap();
    let help = stdout(&maid(&["--help"], dir.path()));
    for line in help.lines() {
        let command = line.split_whitespace().next().unwrap_or_default();
        assert!(
            !["bench", "soak", "bench-raw", "bench-fleet"].contains(&command),
            "{help}"
        );
    }
    assert!(help.contains("agent"), "{help}");
    for gone in ["bench", "soak", "bench-fleet", "bench-raw"] {
        let out = maid(&[gone, "--help"], dir.path());
        // A command line that does not parse exits 64, as Salt's do.
        assert_eq!(out.status.code(), Some(64), "maid {gone} still exists");
    }
}

/// What each crate may link, read from the lock file by `cargo tree`: the
/// protocol crate (what the fuzz targets build) has no Redis, no wasmtime
/// and no HTTP; the master crate has no wasmtime.
#[test]
fn the_protocol_and_master_crates_link_no_wasm_runtime() {
    let tree = |package: &str| -> String {
        let out = Command::new(env!("CARGO"))
            .args([
                "tree",
                "--offline",
                "--locked",
                "-e",
                "normal",
                "--prefix",
                "none",
            ])
            .args(["-p", package])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .expect("run cargo tree");
        assert!(
            out.status.success(),
            "cargo tree -p {package}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let crates = |tree: &str| -> Vec<String> {
        tree.lines()
            .filter_map(|l| l.split_whitespace().next())
            .map(str::to_string)
            .collect()
    };
    let protocol = crates(&tree("maid-protocol"));
    assert!(
        protocol.iter().any(|c| c == "ed25519-dalek"),
        "{protocol:?}"
    );
    for banned in ["wasmtime", "redis", "axum", "hyper", "tokio"] {
        assert!(
            !protocol.iter().any(|c| c == banned),
            "maid-protocol links {banned}"
        );
    }
    let master = crates(&tree("maid-master"));
    assert!(master.iter().any(|c| c == "redis"), "{master:?}");
    for banned in ["wasmtime", "wasmtime-wasi", "cranelift-codegen"] {
        assert!(
            !master.iter().any(|c| c == banned),
            "maid-master links {banned}"
        );
    }
}

/// `./dev demo` is the first thing a newcomer runs: it passes every time
/// (two maids once shared a `state_dir` and raced to make its key), and
/// never hangs (each wait has a timeout that shows the logs). Run here on
/// the test build, ten times in a row.
#[test]
fn the_demo_passes_ten_times_in_a_row() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    for round in 1..=10 {
        let out = Command::new("timeout")
            .arg("300")
            .arg(root.join("dev"))
            .arg("demo-only")
            .current_dir(root)
            .env("MAID_DEMO_BIN", env!("CARGO_BIN_EXE_maid"))
            .env("MAID_DEMO_PLUGINS", guests::PLUGINS_DIR)
            .env("MAID_DEMO_CACHE", crate::common::shared_cache())
            .env_remove("MAID_CONFIG")
            .stdin(std::process::Stdio::null())
            .output()
            .expect("run ./dev demo-only");
        let (text, err) = (stdout(&out), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "round {round}:\n{text}\n{err}");
        // Both maids answered every step: pinged, ran the command, got and
        // hashed the file, and were targeted by a grain.
        for id in ["maid-1", "maid-2"] {
            assert!(
                text.contains(&format!("{id}:\n    True")),
                "round {round}: {text}"
            );
            assert!(
                text.contains(&format!("{id}:\n    hello from")),
                "round {round}: {text}"
            );
            // Its core grains, detected under `maid init`'s grants.
            assert!(
                text.contains(&format!("{id}:\n    ----------\n    os:\n        ")),
                "round {round}: {text}"
            );
        }
    }
}

/// A reader that goes away (`maid call … | head -1`) ends the printing
/// quietly: no panic, no message, and the command's own status, as Salt's
/// `print_cli` passes over `EPIPE` (`print!` panicked there: rc 101 and
/// "failed printing to stdout: Broken pipe" on stderr).
#[test]
fn a_reader_that_goes_away_ends_the_printing_quietly() {
    use std::io::Read;
    let tmp = tempfile::tempdir().unwrap();
    let mut child = crate::common::maid_command()
        // Far more than a pipe holds, so the reader's going is met.
        .args(["call", "--local", "cmd.run", "seq 100000"])
        .current_dir(tmp.path())
        .env("MAID_PLUGIN_DIR", guests::PLUGINS_DIR)
        .env("MAID_CACHE_DIR", crate::common::shared_cache())
        .env_remove("MAID_CONFIG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run maid");
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 64];
    let n = stdout.read(&mut first).unwrap();
    assert!(n > 0, "maid printed nothing");
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
        "{stderr}"
    );
}

/// An error is said once, and a Redis that refuses is named (without its
/// password): `Connection refused (os error 111)` was printed three times
/// and the URL not at all; a config mistake twice.
#[test]
fn errors_are_said_once_and_name_the_redis_refusing() {
    let tmp = tempfile::tempdir().unwrap();
    let o = maid(
        &[
            "run",
            "*",
            "test.ping",
            "--redis",
            "redis://:s3cret@127.0.0.1:1/",
            "--verify-replies",
            "false",
        ],
        tmp.path(),
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("maid: error: cannot connect to Redis at 127.0.0.1:1: "),
        "{stderr}"
    );
    assert_eq!(stderr.matches("Connection refused").count(), 1, "{stderr}");
    assert!(!stderr.contains("s3cret"), "{stderr}");
    let config = tmp.path().join("maid.toml");
    std::fs::write(&config, "[security]\nrequire_signed = true\n").unwrap();
    let o = maid(&["agent", "-c", config.to_str().unwrap()], tmp.path());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        stderr
            .matches("require_signed needs security.trusted_keys")
            .count(),
        1,
        "{stderr}"
    );
}

/// docs/states.md quotes `maid init`'s `[plugins.state]`: the quote is the
/// table `maid init` writes (it lacked the pillar grants once).
#[test]
fn the_state_grants_states_md_quotes_are_maid_inits() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let doc = std::fs::read_to_string(root.join("docs/states.md")).unwrap();
    let start = doc
        .find("\n[plugins.state]\n")
        .expect("the quote in docs/states.md")
        + 1;
    let end = start + doc[start..].find("```").unwrap();
    let quoted: toml::Table = toml::from_str(&doc[start..end]).unwrap();
    let init = std::fs::read_to_string(root.join("config/maid.example.toml")).unwrap();
    let init: toml::Table = toml::from_str(&init).unwrap();
    assert_eq!(quoted["plugins"]["state"], init["plugins"]["state"]);
}
