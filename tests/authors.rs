//! A plugin author's path, through the real `maid` binary and the real
//! compilers: `maid plugin new` in each language, the project's own unit
//! tests, `maid plugin build`, `maid plugin test` with explicit grants, the
//! Python and JavaScript examples under `plugins/examples/` through
//! `maid call --local`, tracebacks and guest logs, the network staying
//! closed, and a plugin built against an older cut of the WIT loading on
//! this host. Every command of docs/plugin-guide.md runs here.
//!
//! Each project is built once per test run (a `OnceLock` each) in a fixed
//! directory under the target dir; compiled plugins go to the shared cache,
//! so the large Python and JavaScript interpreters are compiled by
//! cranelift once. componentize-py and ComponentizeJS are installed by
//! `maid plugin build` itself on first use (into the user's toolchain
//! cache); if PyPI or npm cannot be reached these tests fail and say so.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::Duration;

use crate::common::guests;
use crate::common::output_text as text;

/// The repository root.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A fixed working directory for this test binary's projects.
fn work() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("authors");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn maid(args: &[&str], cwd: &Path) -> Output {
    crate::common::maid_command()
        .args(args)
        .current_dir(cwd)
        .env("MAID_CACHE_DIR", crate::common::shared_cache())
        // Scaffolded Rust plugins share one target dir across runs; it is
        // for wasm32-wasip2 only and never touches the host build's.
        .env("CARGO_TARGET_DIR", work().join("cargo"))
        .env_remove("MAID_CONFIG")
        .env_remove("MAID_PLUGIN_DIR")
        .output()
        .expect("run maid")
}

/// Run `maid`, insist it succeeds, return its stdout.
fn ok(args: &[&str], cwd: &Path) -> String {
    let o = maid(args, cwd);
    assert!(o.status.success(), "maid {args:?}\n{}", text(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A program of the project's own language, which must succeed.
fn run_in(dir: &Path, program: &str, args: &[&str]) {
    let o = Command::new(program)
        .args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", work().join("cargo-host"))
        .output()
        .unwrap_or_else(|e| panic!("{program} is needed for this test: {e}"));
    assert!(
        o.status.success(),
        "{program} {args:?} in {}\n{}",
        dir.display(),
        text(&o)
    );
}

/// `maid plugin new hello --lang LANG` into a fresh directory, the
/// project's unit tests run, then what an author does next: `extra`
/// appended to the app source, `edit` (file, from, to) applied to the
/// project's manifest, and `maid plugin build`.
fn scaffold(
    lang: &str,
    app: &str,
    extra: &str,
    edit: Option<(&str, &str, &str)>,
    unit_test: &[&str],
) -> PathBuf {
    let dir = work().join(format!("hello-{lang}"));
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.to_str().unwrap();
    let created = ok(
        &["plugin", "new", "hello", "--lang", lang, "--dir", d],
        &work(),
    );
    assert!(created.contains("maid plugin build"), "{created}");
    run_in(&dir, unit_test[0], &unit_test[1..]);
    if !extra.is_empty() {
        let path = dir.join(app);
        let mut source = std::fs::read_to_string(&path).unwrap();
        source.push_str(extra);
        std::fs::write(&path, source).unwrap();
    }
    if let Some((file, from, to)) = edit {
        let path = dir.join(file);
        let manifest = std::fs::read_to_string(&path).unwrap();
        assert!(manifest.contains(from), "{manifest}");
        std::fs::write(&path, manifest.replace(from, to)).unwrap();
    }
    let built = ok(&["plugin", "build", d], &work());
    assert!(built.contains("hello.wasm"), "{built}");
    assert!(dir.join("hello.wasm").is_file());
    dir
}

fn rust_project() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| scaffold("rust", "src/lib.rs", "", None, &["cargo", "test"]))
}

/// Python and JavaScript functions the tests add to the template, as an
/// author adds functions to theirs.
const PY_EXTRA: &str = r#"

def boom():
    """Fail with an exception."""
    return {}["missing"]


def kernel():
    """Name the kernel, through the exec capability."""
    return maid.run(["uname", "-s"]).stdout.strip()
"#;

const JS_EXTRA: &str = r#"
functions.boom = {
  doc: "Fail with an exception",
  args: [],
  run() {
    return null.missing;
  },
};
"#;

fn python_project() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        scaffold(
            "python",
            "app.py",
            PY_EXTRA,
            Some((
                "pyproject.toml",
                "capabilities = []",
                "capabilities = [\"exec\"]",
            )),
            &["python3", "-m", "unittest", "-q"],
        )
    })
}

fn js_project() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| scaffold("js", "app.js", JS_EXTRA, None, &["node", "--test"]))
}

/// The examples, each built once into one plugin directory.
fn examples() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let out = work().join("examples");
        std::fs::create_dir_all(&out).unwrap();
        let ex = repo().join("plugins/examples");
        run_in(&ex.join("file"), "python3", &["-m", "unittest", "-q"]);
        run_in(&ex.join("disk"), "node", &["--test"]);
        for (project, wasm) in [("file", "file.wasm"), ("disk", "disk.wasm")] {
            let dest = out.join(wasm);
            ok(
                &[
                    "plugin",
                    "build",
                    ex.join(project).to_str().unwrap(),
                    "-o",
                    dest.to_str().unwrap(),
                ],
                &repo(),
            );
        }
        out
    })
}

/// `maid plugin test DIR ARGS...`: (stdout, exit code, stderr).
fn plugin_test(dir: &Path, args: &[&str]) -> (String, Option<i32>, String) {
    let mut all = vec!["plugin", "test", dir.to_str().unwrap()];
    all.extend_from_slice(args);
    let o = maid(&all, dir);
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The same template behaviour in every language: a return, keyword
/// arguments, the function's own failure and its retcode, an unknown
/// function, and the guest's log line in the agent's log with plugin and
/// jid.
fn template_behaves(dir: &Path) {
    // Each check shows the command's stderr too: why a plugin did not load
    // is logged there.
    let (out, code, err) = plugin_test(dir, &["hello.greet", "world"]);
    assert_eq!(
        (out.as_str(), code),
        ("local:\n    hello, world\n", Some(0)),
        "{err}"
    );

    let (out, code, err) = plugin_test(
        dir,
        &["hello.greet", "name=world", "shout=true", "--out", "json"],
    );
    assert_eq!(
        (out.as_str(), code),
        ("{\n    \"local\": \"HELLO, WORLD\"\n}\n", Some(0)),
        "{err}"
    );

    let (out, code, err) = plugin_test(dir, &["hello.greet", ""]);
    assert!(out.contains("name must not be empty"), "{out}\n{err}");
    assert_eq!(code, Some(1), "{err}");

    let (out, code, err) = plugin_test(dir, &["hello.greet", "a", "b", "c"]);
    assert!(out.contains("Passed invalid arguments:"), "{out}\n{err}");
    assert_eq!(code, Some(1), "{err}");

    let (out, code, err) = plugin_test(dir, &["hello.nope"]);
    assert!(
        out.contains("'hello.nope' is not available."),
        "{out}\n{err}"
    );
    assert_eq!(code, Some(254), "{err}");

    let o = crate::common::maid_command()
        .args([
            "-v",
            "plugin",
            "test",
            dir.to_str().unwrap(),
            "hello.greet",
            "bob",
        ])
        .env("MAID_CACHE_DIR", crate::common::shared_cache())
        .env("NO_COLOR", "1")
        // -v, not the tests' MAID_LOG, decides what this run logs.
        .env_remove("MAID_LOG")
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&o.stderr);
    let line = log
        .lines()
        .find(|l| l.contains("greeting bob"))
        .unwrap_or_else(|| panic!("no guest log line\n{}", text(&o)));
    assert!(line.contains("hello") && line.contains("jid"), "{line}");
}

#[test]
fn a_rust_plugin_from_new_to_test() {
    let dir = rust_project();
    template_behaves(dir);
    let cargo = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    let sdk = repo().join("sdk").canonicalize().unwrap();
    assert!(
        cargo.contains(&format!("path = {:?}", sdk.display().to_string())),
        "{cargo}"
    );
}

#[test]
fn a_python_plugin_from_new_to_test() {
    let dir = python_project();
    template_behaves(dir);
    let (out, code, _) = plugin_test(dir, &["hello.greet"]);
    assert!(
        out.contains("Passed invalid arguments:") && out.contains("'name'"),
        "{out}"
    );
    assert_eq!(code, Some(1));
    // An exception comes back as Salt returns it: the traceback.
    let (out, code, _) = plugin_test(dir, &["hello.boom"]);
    assert!(
        out.contains("The minion function caused an exception: Traceback (most recent call last):"),
        "{out}"
    );
    assert!(
        out.contains("in boom") && out.contains("KeyError: 'missing'"),
        "{out}"
    );
    assert_eq!(code, Some(1));
}

#[test]
fn a_javascript_plugin_from_new_to_test() {
    let dir = js_project();
    template_behaves(dir);
    let (out, code, _) = plugin_test(dir, &["hello.greet", "x=1"]);
    assert!(out.contains("unexpected keyword argument 'x'"), "{out}");
    assert_eq!(code, Some(1));
    let (out, code, _) = plugin_test(dir, &["hello.boom"]);
    assert!(
        out.contains("The minion function caused an exception: TypeError"),
        "{out}"
    );
    assert!(
        out.contains("run@app.js"),
        "the stack names the function: {out}"
    );
    assert_eq!(code, Some(1));
}

#[test]
fn grants_given_to_plugin_test_are_all_it_gets() {
    let dir = python_project();
    // The plugin asks for exec; without a grant it is denied.
    let (out, code, _) = plugin_test(dir, &["hello.kernel"]);
    assert!(out.contains("Denied: exec is not granted"), "{out}");
    assert_eq!(code, Some(77));
    let (out, code, _) = plugin_test(dir, &["hello.kernel", "--grant", "exec=/usr/bin/true"]);
    assert!(out.contains("not in the exec allow-list"), "{out}");
    assert_eq!(code, Some(77));
    let uname = which::which("uname").unwrap().canonicalize().unwrap();
    let grant = format!("exec={}", uname.display());
    let (out, code, _) = plugin_test(dir, &["hello.kernel", "--grant", &grant]);
    assert_eq!((out.as_str(), code), ("local:\n    Linux\n", Some(0)));
    // A word that is not a grant is refused before anything runs.
    let (_, code, err) = plugin_test(dir, &["hello.kernel", "--grant", "network"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("not a grant"), "{err}");
}

#[test]
fn new_refuses_bad_names_and_non_empty_directories() {
    let o = maid(&["plugin", "new", "Bad-Name", "--dir", "x"], &work());
    assert!(
        !o.status.success() && text(&o).contains("not a module name"),
        "{}",
        text(&o)
    );
    let dir = work().join("taken");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("keep"), "").unwrap();
    let o = maid(
        &[
            "plugin",
            "new",
            "taken",
            "--lang",
            "python",
            "--dir",
            dir.to_str().unwrap(),
        ],
        &work(),
    );
    assert!(
        !o.status.success() && text(&o).contains("not empty"),
        "{}",
        text(&o)
    );
    let o = maid(&["plugin", "build", work().to_str().unwrap()], &work());
    assert!(text(&o).contains("is not a plugin project"), "{}", text(&o));
}

#[test]
fn the_python_file_example_reads_only_granted_directories() {
    let plugins = examples();
    let tmp = tempfile::tempdir().unwrap();
    let motd = tmp.path().join("motd");
    std::fs::write(&motd, "hello\n").unwrap();
    let motd = motd.to_str().unwrap();
    let pd = plugins.to_str().unwrap();
    // Without --config, `maid call --local` grants the current directory.
    let call = |args: &[&str]| {
        let mut all = vec!["call", "--local", "--plugin-dir", pd, "--out", "json"];
        all.extend_from_slice(args);
        let o = maid(&all, tmp.path());
        let v: serde_json::Value =
            serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}\n{}", text(&o)));
        (v["local"].clone(), o.status.code())
    };
    assert_eq!(
        call(&["file.get_hash", motd]),
        (
            "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03".into(),
            Some(0)
        )
    );
    assert_eq!(
        call(&["file.get_hash", motd, "form=md5"]).0,
        "b1946ac92492d2347c6235b4d2611184"
    );
    assert_eq!(call(&["file.read", motd]), ("hello\n".into(), Some(0)));
    assert_eq!(call(&["file.file_exists", motd]).0, true);
    // Outside the granted directories the file does not exist for the
    // plugin, and the exception comes back as a traceback.
    assert_eq!(call(&["file.file_exists", "/etc/hostname"]).0, false);
    let (ret, code) = call(&["file.read", "/etc/hostname"]);
    let ret = ret.as_str().unwrap();
    assert!(
        ret.starts_with("The minion function caused an exception: Traceback"),
        "{ret}"
    );
    assert!(ret.contains("FileNotFoundError"), "{ret}");
    assert_eq!(code, Some(1));
}

#[test]
fn the_javascript_disk_example_runs_df_when_granted() {
    let plugins = examples();
    let tmp = tempfile::tempdir().unwrap();
    let pd = plugins.to_str().unwrap();
    let o = maid(
        &[
            "call",
            "--local",
            "--plugin-dir",
            pd,
            "disk.usage",
            "--out",
            "json",
        ],
        tmp.path(),
    );
    let v: serde_json::Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}\n{}", text(&o)));
    let root = &v["local"]["/"];
    assert!(
        root["capacity"].as_str().is_some_and(|c| c.ends_with('%')),
        "{v}"
    );
    assert!(
        root["1K-blocks"]
            .as_str()
            .is_some_and(|b| b.parse::<u64>().is_ok()),
        "{v}"
    );
    let o = maid(
        &["call", "--local", "--plugin-dir", pd, "disk.percent", "/"],
        tmp.path(),
    );
    assert!(
        String::from_utf8_lossy(&o.stdout).trim_end().ends_with('%'),
        "{}",
        text(&o)
    );

    // With a configuration that does not grant df, the call is denied.
    let config = tmp.path().join("maid.toml");
    std::fs::write(&config, "[plugins.disk]\nexec = [\"/usr/bin/true\"]\n").unwrap();
    let o = maid(
        &[
            "call",
            "--local",
            "--retcode-passthrough",
            "--plugin-dir",
            pd,
            "-c",
            config.to_str().unwrap(),
            "disk.usage",
        ],
        tmp.path(),
    );
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("Denied:"),
        "{}",
        text(&o)
    );
    assert_eq!(o.status.code(), Some(77));
}

#[test]
fn a_plugin_built_against_an_older_wit_loads_and_runs() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(guests::FIXTURE_OLDER, dir.path().join("older.wasm")).unwrap();
    let pd = dir.path().to_str().unwrap();
    let o = maid(
        &["call", "--local", "--plugin-dir", pd, "older.ping"],
        dir.path(),
    );
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "local:\n    True\n",
        "{}",
        text(&o)
    );
    let inspect = ok(&["plugin", "inspect", guests::FIXTURE_OLDER], dir.path());
    assert!(inspect.contains("module:    older"), "{inspect}");
}

#[test]
fn wasi_sockets_link_but_every_use_is_refused() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(guests::FIXTURE_SOCKETS, dir.path().join("sockets.wasm")).unwrap();
    let pd = dir.path().to_str().unwrap();
    let o = maid(
        &[
            "call",
            "--local",
            "--plugin-dir",
            pd,
            "sockets.connect",
            &addr,
        ],
        dir.path(),
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("refused:"), "{}", text(&o));
    let o = maid(
        &[
            "call",
            "--local",
            "--plugin-dir",
            pd,
            "sockets.resolve",
            "localhost:80",
        ],
        dir.path(),
    );
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("refused:"),
        "{}",
        text(&o)
    );
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        listener.accept().is_err(),
        "the plugin reached the listener"
    );
}

/// The guide's last step: a new plugin in each language, pushed with the
/// master key, synced by two agents and run on both. The three projects
/// are the same module, `hello`, so each push replaces the one before.
#[test]
fn each_language_runs_across_two_agents_after_push() {
    use crate::common::fleet::{TOPIC, maid_cli, start_agent, wait_registered};
    use crate::common::redis::RedisServer;
    use maid_bus::Bus;
    use serde_json::{Value, json};

    let projects = [rust_project(), python_project(), js_project()];
    let server = RedisServer::start();
    let url = server.url();
    let redis = server.config();
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("master");
    let o = maid_cli(&url, &["keygen", prefix.to_str().unwrap()], dir.path());
    assert!(o.status.success(), "{}", text(&o));
    let key = prefix.with_extension("key");
    let key = key.to_str().unwrap();
    let ids = ["author-a", "author-b"];
    let _agents: Vec<_> = ids
        .iter()
        .map(|id| {
            let extra = format!(
                "[security]\nrequire_signed = true\ntrusted_keys = [\"{}\"]\nstate_dir = \"{}\"\n\
                 [sync]\nenabled = true\nallow = [\"hello\"]\n",
                prefix.with_extension("pub").display(),
                dir.path().join(id).display(),
            );
            start_agent(&redis, id, &extra)
        })
        .collect();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(wait_registered(&Bus::new(&redis).unwrap(), &ids));

    // `maid run '*' FUN ARGS --out json`: each maid's return.
    let run = |fun: &str, args: &[&str]| -> Value {
        let mut all = vec!["run", "*", fun];
        all.extend(args);
        all.extend(["--master-topic", TOPIC, "--key", key, "--out", "json"]);
        // One document per line.
        all.extend(["--out-indent", "-1"]);
        all.extend(["-t", "60"]);
        let o = maid_cli(&url, &all, dir.path());
        assert!(o.status.success(), "{}", text(&o));
        let mut returns = serde_json::Map::new();
        for line in String::from_utf8(o.stdout).unwrap().lines() {
            let one: serde_json::Map<String, Value> = serde_json::from_str(line).unwrap();
            returns.extend(one);
        }
        Value::Object(returns)
    };
    let both = |v: Value| json!({"author-a": v.clone(), "author-b": v});
    for project in projects {
        let wasm = project.join("hello.wasm");
        let o = maid_cli(
            &url,
            &["plugin", "push", wasm.to_str().unwrap(), "--key", key],
            dir.path(),
        );
        assert!(o.status.success(), "{}", text(&o));
        assert_eq!(
            run("saltutil.sync_modules", &[]),
            both(json!(["modules.hello"])),
            "{}",
            project.display()
        );
        assert_eq!(
            run("hello.greet", &["fleet"]),
            both(json!("hello, fleet")),
            "{}",
            project.display()
        );
    }
}
