//! `salt` against `maid run`, `salt-cp` against `maid cp` and `salt-run`
//! against `maid runner`, side by side: the same command lines on a
//! real Salt 3008.4 master with two minions (`tests/salt/realsalt.py`)
//! and on two maids of the same ids; the same stdout and exit code
//! expected, jids masked. The corpus is what differs by the master alone
//! (output, batches, exit codes, targets nothing matches), on functions
//! both sides run alike.

use std::path::{Path, PathBuf};
use std::process::Command;

use maid_bus::Bus;

use crate::common::fleet::{TOPIC, start_agent, wait_registered, wait_subscribers};
use crate::common::redis::RedisServer;
use crate::common::salt::{RealSalt, venv};

const MINIONS: [&str; 2] = ["m1", "m2"];

/// `(stdout, stderr, exit code)`.
pub(crate) type Printed = (String, String, i32);

pub(crate) fn printed(out: std::process::Output) -> Printed {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

/// `argv` run as it is, or on a terminal of its own (`script`), its
/// stderr (Salt's log lines) dropped.
pub(crate) fn command(argv: &[String], tty: bool) -> Command {
    if !tty {
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..]);
        return cmd;
    }
    let line = shlex::try_join(argv.iter().map(String::as_str)).expect("no NUL in arguments");
    let mut cmd = Command::new("script");
    cmd.args(["-qec", &format!("{line} 2>/dev/null"), "/dev/null"]);
    cmd
}

pub(crate) fn salt(tool: &str, config_dir: &Path, args: &[String], tty: bool) -> Printed {
    let mut argv = vec![
        venv().join("bin").join(tool).display().to_string(),
        "-c".into(),
        config_dir.display().to_string(),
    ];
    argv.extend(args.iter().cloned());
    printed(command(&argv, tty).output().expect("run salt"))
}

/// A state run's times and pids, which differ from run to run, left out
/// of a printed line.
pub(crate) fn timeless(line: &str) -> String {
    let t = line.trim_start();
    let indent = &line[..line.len() - t.len()];
    if let Some(i) = line.find(" - Started: ") {
        return line[..i].to_string();
    }
    for label in ["Started:", "Duration:", "Total run time:"] {
        if t.starts_with(label) {
            return format!("{indent}{label}");
        }
    }
    line.to_string()
}

/// Jids masked: each run has its own.
pub(crate) fn masked(text: &str) -> String {
    // maid names its own command for looking a job up (docs/differences-from-salt.md).
    let text = &text.replace("maid job ", "salt-run jobs.lookup_jid ");
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let run = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
        if run == 20 && (i == 0 || !b[i - 1].is_ascii_digit()) {
            out.push_str("<jid>");
            i += 20;
        } else if run > 0 {
            out.push_str(&text[i..i + run]);
            i += run;
        } else {
            let ch = text[i..].chars().next().unwrap();
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// State runs from the master's file_roots (the trees of
/// tests/states/ both masters serve), on both minions or one.
fn state_corpus() -> Vec<Vec<&'static str>> {
    vec![
        vec!["*", "state.apply", "basic"],
        vec!["-L", "m1", "state.sls", "require", "test=True"],
        vec!["--state-output=terse", "*", "state.apply", "names"],
        vec![
            "-L",
            "m2",
            "state.single",
            "test.succeed_with_changes",
            "name=x",
        ],
        vec!["--out", "json", "-L", "m1", "state.show_low_sls", "require"],
        // The dev environment: rendered there, its import read from there.
        vec!["*", "state.sls", "envtree", "saltenv=dev"],
        vec!["--out", "json", "-L", "m2", "state.show_top", "saltenv=dev"],
    ]
}

/// The command lines of `salt` (and `maid run`); `true` where lines may
/// come in any order (returns printed as they arrive, batches started as
/// others finish).
fn corpus() -> Vec<(Vec<&'static str>, bool)> {
    vec![
        (vec!["*", "test.ping"], true),
        (vec!["--static", "*", "test.echo", "one document"], false),
        (
            vec!["--static", "--out", "json", "-L", "m1", "test.ping"],
            false,
        ),
        (
            vec![
                "--out",
                "yaml",
                "--static",
                "-C",
                "m1 or L@m2",
                "test.echo",
                "[1, {a: b}]",
            ],
            false,
        ),
        (vec!["-L", "m2", "cmd.run", "exit 3"], false),
        // Listed ids no minion answers for: rows of their own, exit 1;
        // nobody known at all is no match.
        (vec!["-t", "2", "-L", "m1,nosuch", "test.ping"], false),
        (
            vec!["-t", "2", "-C", "L@m1,gone and m*", "test.ping"],
            false,
        ),
        (
            vec!["-t", "2", "-C", "m1 or not L@nosuch", "test.ping"],
            true,
        ),
        (vec!["-L", "nosuch,gone", "test.ping"], false),
        (
            vec!["--summary", "-t", "2", "-L", "m2,nosuch", "test.ping"],
            false,
        ),
        (vec!["nomatch*", "test.ping"], false),
        (vec!["-I", "role:web", "test.ping"], false),
        (vec!["-J", "role:w.*", "test.ping"], false),
        // Grain key paths split at --delimiter, on the master and the minions.
        (vec!["--delimiter", ";", "-G", "id;m1", "test.ping"], false),
        (vec!["--delimiter", ";", "-G", "id:m1", "test.ping"], false),
        (vec!["--delimiter=|", "-P", "id|m[12]", "test.ping"], true),
        (vec!["--preview-target", "-E", "m[12]", "test.ping"], true),
        (vec!["-b", "1", "*", "test.echo", "one at a time"], true),
        (vec!["-b", "50%", "--out", "json", "*", "test.ping"], true),
        (vec!["--batch-size", "1", "*", "cmd.run", "exit 3"], true),
        (vec!["-b", "%100", "-L", "m1", "test.ping"], true),
        (
            vec!["-b", "1", "--static", "*", "test.echo", "quiet"],
            false,
        ),
        (vec!["-b", "many", "*", "test.ping"], false),
        (vec!["-b", "1", "nomatch*", "test.ping"], false),
        // Salt's colours, forced (stdout is a pipe here): red after a
        // failed return.
        (vec!["--force-color", "*", "test.ping"], true),
        (
            vec!["--force-colour", "-L", "m2", "cmd.run", "exit 3"],
            false,
        ),
        (
            vec!["--force-color", "--static", "*", "test.echo", "[1, {a: b}]"],
            false,
        ),
        (
            vec!["--force-color", "--out", "json", "-L", "m1", "test.ping"],
            false,
        ),
        (
            vec!["--no-color", "--force-color", "-L", "m1", "test.ping"],
            false,
        ),
        (vec!["--force-color", "-b", "1", "*", "test.ping"], true),
        // The progress bar (on stderr, compared too), then the summary.
        (vec!["-p", "*", "test.ping"], false),
        (vec!["--progress", "-L", "m2", "cmd.run", "exit 3"], false),
        // -v heads the returns with the jid; the summary (only where no
        // outputter is named) names who failed.
        (vec!["-v", "*", "test.ping"], true),
        (vec!["--summary", "*", "test.ping"], true),
        (
            vec!["--summary", "--out", "json", "-L", "m1", "test.ping"],
            false,
        ),
        (
            vec!["-v", "--summary", "-L", "m2", "cmd.run", "exit 3"],
            false,
        ),
        (
            vec![
                "--output",
                "json",
                "--output-indent",
                "1",
                "-L",
                "m1",
                "test.ping",
            ],
            false,
        ),
        // --out-file: the outputter writes there (shown after `--- file`),
        // emptied first unless appending; other lines stay on stdout.
        (
            vec!["--out-file", "{outfile}", "-L", "m1", "test.ping"],
            false,
        ),
        (
            vec![
                "--out-file",
                "{outfile}",
                "--out-file-append",
                "--out",
                "json",
                "*",
                "test.ping",
            ],
            true,
        ),
        (
            vec![
                "--out-file",
                "{outfile}",
                "-v",
                "-L",
                "m2",
                "cmd.run",
                "exit 3",
            ],
            false,
        ),
        (
            vec![
                "--out",
                "table",
                "-L",
                "m1",
                "test.echo",
                "[{a: 1, b_c: x}, {a: 22, b_c: y}]",
            ],
            false,
        ),
        // A function's own outputter (nested) prints it under `--out highstate`.
        (vec!["--out", "highstate", "*", "test.ping"], true),
        (
            vec![
                "--out",
                "no_return",
                "-L",
                "m2",
                "test.echo",
                "{a: [1], b: x}",
            ],
            false,
        ),
        // Batches: a wait between them, and a target wide enough to switch.
        (vec!["-b", "1", "--batch-wait", "1", "*", "test.ping"], true),
        (vec!["--batch-safe-limit", "2", "*", "test.ping"], true),
        (vec!["--batch-safe-limit", "3", "*", "test.ping"], true),
        // sys.doc of a function neither side has: nothing, exit 0.
        (vec!["-L", "m1", "sys.doc", "nope.nope"], false),
        (vec!["-d", "-L", "m1", "test.ping", "test.echo"], false),
        (vec!["--subset", "1", "*", "nope.nope"], false),
        (vec!["--subset", "3", "nomatch*", "test.ping"], false),
        // -t 0 and less are the default; --static runs before --async.
        (vec!["-t", "0", "-L", "m1", "test.ping"], false),
        (vec!["-t", "-1", "-L", "m2", "test.ping"], false),
        (vec!["--static", "--async", "*", "test.ping"], false),
        // --preview-target needs no function; nothing to preview fails.
        (vec!["--preview-target", "m*"], false),
        (vec!["--preview-target", "zz*", "test.ping"], false),
    ]
}

/// Command lines whose minion Salt picks at random (the first of a
/// batch, a subset): compared line for line with the minions' ids masked.
fn any_minion_corpus() -> Vec<Vec<&'static str>> {
    vec![
        vec!["--subset", "1", "*", "test.ping"],
        vec!["-b", "1", "--failhard", "*", "cmd.run", "exit 3"],
        vec![
            "--failhard",
            "-b",
            "1",
            "--static",
            "*",
            "cmd.run",
            "exit 3",
        ],
        // The next sub-batch is announced before the return that made
        // room for it is shown.
        vec!["-b", "1", "*", "test.ping"],
        vec!["-b", "1", "--out", "json", "*", "test.echo", "in order"],
    ]
}

/// Command lines run on a terminal (`script`): colour on, as there.
fn tty_corpus() -> Vec<(&'static str, &'static str, Vec<&'static str>)> {
    vec![
        ("salt", "run", vec!["-L", "m1", "test.echo", "{a: [1, x]}"]),
        ("salt", "run", vec!["--no-color", "-L", "m1", "test.ping"]),
        ("salt-run", "runner", vec!["manage.up"]),
    ]
}

/// The command lines of `salt-run` (and `maid runner`), run after the
/// others so the job cache holds their jobs.
fn runner_corpus() -> Vec<Vec<&'static str>> {
    vec![
        vec!["manage.status"],
        vec!["--force-color", "manage.status"],
        vec!["manage.up"],
        vec!["manage.down"],
        vec!["manage.status", "tgt=m1"],
        vec!["--out", "json", "manage.up", "tgt=m*"],
        // Not `jobs.list_jobs` of the jobs above: Salt 3008's `salt` records
        // a job's target as the minions it resolved, in no set order (the
        // docs/differences-from-salt.md lists the difference); tests/pepper.rs compares it for
        // jobs from salt-api, which records the target given.
        vec!["jobs.list_jobs", "search_function=no.such"],
        vec!["jobs.lookup_jid", "20000101000000000000"],
        vec!["--out-file", "{outfile}", "--out", "json", "manage.up"],
        vec!["nope.nope"],
        vec!["manage.up", "zz*"],
        vec!["manage.status", "tgt=zz*"],
        vec!["manage.up", "a", "b", "c"],
        // Presence from the registry, nothing sent.
        vec!["manage.present"],
        vec!["manage.alived", "subset=[m2, nobody]"],
        vec!["manage.not_present"],
        vec!["manage.list_state", "show_ip=True"],
        vec!["manage.list_not_state", "subset=m1"],
    ]
}

/// The command lines of `salt-cp` (and `maid cp`): `{src}` is a directory
/// of files `a.txt` and `b.txt` on the master, `{dest}` one the minions
/// may write.
fn cp_corpus() -> Vec<Vec<&'static str>> {
    vec![
        vec!["*", "{src}/a.txt", "{dest}/x.txt"],
        vec!["*", "{src}/a.txt", "{src}/b.txt", "{dest}/"],
        vec!["--out", "json", "-L", "m1", "{src}/b.txt", "{dest}"],
        vec!["-L", "m1", "{src}/a.txt", "{dest}/missing/deep.txt"],
        vec!["-t", "2", "-L", "m1,nosuch", "{src}/a.txt", "{dest}/w.txt"],
        vec!["*", "{src}/nothing-here", "{dest}/"],
        vec!["nomatch*", "{src}/a.txt", "{dest}/"],
        // salt-cp takes --delimiter and reads the target with `:`.
        vec![
            "--delimiter",
            ";",
            "-G",
            "id;m2",
            "{src}/a.txt",
            "{dest}/d.txt",
        ],
        vec![
            "--delimiter",
            ";",
            "-G",
            "id:m2",
            "{src}/a.txt",
            "{dest}/e.txt",
        ],
        vec!["--force-color", "*", "{src}/a.txt", "{dest}/y.txt"],
        vec![
            "--out-file",
            "{outfile}",
            "-L",
            "m1",
            "{src}/a.txt",
            "{dest}/z.txt",
        ],
        // A single path is the destination of nothing.
        vec!["*", "{dest}/only.txt"],
        // --chunked: directories walked, missing directories made, modes
        // kept, files of several chunks; each side into a tree of its own
        // (and one minion each: both would append the same file here).
        vec!["-C", "-L", "m1", "{src}/tree", "{dest}/c-{side}/"],
        vec!["-C", "*", "{src}/tree/sub", "{dest}/c-{side}/all/"],
        vec![
            "--chunked",
            "-n",
            "-L",
            "m1",
            "{src}/tree/run.sh",
            "{dest}/c-{side}/deep/n.sh",
        ],
        vec![
            "-C",
            "-L",
            "m2",
            "{src}/a.txt",
            "{src}/b.txt",
            "{dest}/c-{side}/two",
        ],
        vec!["-C", "*", "{src}/nope", "{dest}/"],
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn salt_and_maid_run_print_the_same() {
    let salt_fleet = tokio::task::spawn_blocking(|| RealSalt::start(&MINIONS, false, "alice"))
        .await
        .unwrap();
    let config_dir: PathBuf = salt_fleet.master_config_dir.clone();

    let redis = RedisServer::start();
    let bus = Bus::new(&redis.config()).unwrap();
    let files = tempfile::tempdir().unwrap();
    let (src, dest) = (files.path().join("src"), files.path().join("dest"));
    std::fs::create_dir_all(&src).unwrap();
    std::fs::create_dir_all(&dest).unwrap();
    // `salt-cp -C '*' … all/` has both minions of this one host make
    // `all/sub` at once; Salt's `cp.recv_chunked` then fails one of them
    // with `[Errno 17] File exists` whenever they race (1 run in 4 here).
    // The directory is there beforehand on both sides, so the comparison
    // is of what maid decides, not of Salt's race.
    for side in ["salt", "maid"] {
        std::fs::create_dir_all(dest.join(format!("c-{side}/all/sub"))).unwrap();
    }
    std::fs::write(src.join("a.txt"), "a\n").unwrap();
    std::fs::write(src.join("b.txt"), "b\n").unwrap();
    // A tree for `salt-cp -C`: a subdirectory, an empty one, an executable
    // file, and one of more than one chunk.
    let tree = src.join("tree");
    std::fs::create_dir_all(tree.join("sub")).unwrap();
    std::fs::create_dir_all(tree.join("hollow")).unwrap();
    std::fs::write(tree.join("sub/c.txt"), "c\n").unwrap();
    std::fs::write(tree.join("run.sh"), "#!/bin/sh\necho run\n").unwrap();
    std::fs::set_permissions(
        tree.join("run.sh"),
        std::os::unix::fs::PermissionsExt::from_mode(0o750),
    )
    .unwrap();
    let big: String = (0..40_000).map(|i| format!("{i}\n")).collect();
    std::fs::write(tree.join("big.txt"), &big).unwrap();
    let grants = format!(
        "[plugins.cmd]\nexec = [\"/usr/bin/*\", \"/bin/*\"]\nshell = true\nenv = [\"PATH\"]\n\
         [plugins.cp]\nfetch = [\"salt://**\"]\ndirs = [{{ path = \"{}\", writable = true }}]\n\
         [plugins.state]\nfetch = [\"salt://**\"]\ncall = [\"test.*\", \"cmd.run_all\", \"cmd.retcode\"]\n",
        dest.display()
    );
    // The SLS trees both masters serve: Salt's file_roots, and maid's
    // `[master] file_roots`, pushed to the file store before a state run.
    let file_root = config_dir.join("srv/salt");
    for tree in ["basic", "require", "names"] {
        let from = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/states")
            .join(tree);
        std::fs::create_dir_all(file_root.join(tree)).unwrap();
        for e in std::fs::read_dir(&from).unwrap().flatten() {
            std::fs::copy(e.path(), file_root.join(tree).join(e.file_name())).unwrap();
        }
    }
    // And the dev environment: an SLS that renders what it is given there.
    let dev_root = config_dir.join("srv/dev");
    std::fs::create_dir_all(dev_root.join("envtree")).unwrap();
    std::fs::write(
        dev_root.join("envtree/init.sls"),
        "{% import_yaml 'envtree/vars.yaml' as v %}\nenv_state:\n  \
         test.succeed_without_changes:\n    - name: {{ v.word }} in {{ saltenv }}\n",
    )
    .unwrap();
    std::fs::write(dev_root.join("envtree/vars.yaml"), "word: dev-vars\n").unwrap();
    std::fs::write(dev_root.join("top.sls"), "dev:\n  m2:\n    - envtree\n").unwrap();
    let master_toml = files.path().join("master.toml");
    std::fs::write(
        &master_toml,
        format!(
            "[master]\nverify_replies = false\nfile_roots = {{ base = [{:?}], dev = [{:?}] }}\n",
            file_root.display().to_string(),
            dev_root.display().to_string()
        ),
    )
    .unwrap();
    let _agents: Vec<_> = MINIONS
        .iter()
        .map(|id| start_agent(&redis.config(), id, &grants))
        .collect();
    wait_registered(&bus, &MINIONS).await;
    wait_subscribers(&bus, 2).await;
    let tmp = tempfile::tempdir().unwrap();
    let url = redis.url();

    let mut differences = Vec::new();
    let mut transcript = String::new();
    // (tool, maid's subcommand, words, lines in any order, on a terminal,
    // minion ids masked)
    let lines = corpus()
        .into_iter()
        .map(|(args, any_order)| ("salt", "run", args, any_order, false, false))
        .chain(
            any_minion_corpus()
                .into_iter()
                .map(|args| ("salt", "run", args, false, false, true)),
        )
        .chain(
            state_corpus()
                .into_iter()
                .map(|args| ("salt", "run", args, true, false, false)),
        )
        .chain(
            cp_corpus()
                .into_iter()
                .map(|args| ("salt-cp", "cp", args, false, false, false)),
        )
        .chain(
            runner_corpus()
                .into_iter()
                .map(|args| ("salt-run", "runner", args, false, false, false)),
        )
        .chain(
            tty_corpus()
                .into_iter()
                .map(|(tool, sub, args)| (tool, sub, args, false, true, false)),
        );
    let maid_bin = env!("CARGO_BIN_EXE_maid");
    // Each side's `--out-file`, holding a line of its own before each run.
    let out_files = tempfile::tempdir().unwrap();
    let out_file = |side: &str| out_files.path().join(format!("{side}.out"));
    for (tool, sub, args, any_order, tty, ids_masked) in lines {
        let words = |side: &str| -> Vec<String> {
            args.iter()
                .map(|a| {
                    a.replace("{src}", src.to_str().unwrap())
                        .replace("{dest}", dest.to_str().unwrap())
                        .replace("{outfile}", out_file(side).to_str().unwrap())
                        .replace("{side}", side)
                })
                .collect()
        };
        for side in ["salt", "maid"] {
            std::fs::write(out_file(side), "before\n").unwrap();
        }
        let (dir, a) = (config_dir.clone(), words("salt"));
        let s = tokio::task::spawn_blocking(move || salt(tool, &dir, &a, tty));
        let mut argv: Vec<String> = [maid_bin, sub, "--master-topic", TOPIC]
            .map(String::from)
            .to_vec();
        argv.extend(words("maid"));
        let m = printed(
            command(&argv, tty)
                .current_dir(tmp.path())
                .env("MAID_REDIS", &url)
                .env("MAID_VERIFY_REPLIES", "false")
                // Salt prints no such line: the warning that replies go
                // unverified is maid's.
                .env("MAID_LOG", "warn,maid::unverified=off")
                .env("MAID_CONFIG", &master_toml)
                .output()
                .expect("run maid"),
        );
        let s = s.await.unwrap();
        let args = words("salt");
        // The progress bar is drawn on stderr, and so is the line that
        // stops a batch; elsewhere stderr carries Salt's log lines, which
        // maid does not print.
        let stderr_shown = args
            .iter()
            .any(|a| a == "-p" || a == "--progress" || a == "--failhard");
        let written = args.iter().any(|a| a == "--out-file");
        let shown = |p: &Printed, side: &str| {
            let mut text = p.0.clone();
            if stderr_shown {
                text.push_str(&format!("--- stderr:\n{}\n", p.1));
            }
            if written {
                let file = std::fs::read_to_string(out_file(side)).unwrap_or_default();
                text.push_str(&format!("--- file:\n{file}"));
            }
            if ids_masked {
                text = text.replace("m1", "m?").replace("m2", "m?");
            }
            text.replace(&format!("/c-{side}/"), "/c-SIDE/")
        };
        let (s_text, m_text) = (shown(&s, "salt"), shown(&m, "maid"));
        let tty_note = if tty { " (on a terminal)" } else { "" };
        transcript.push_str(&format!(
            "$ {tool} {}{tty_note}\n--- salt (exit {}):\n{s_text}--- maid {sub} (exit {}):\n{m_text}\n",
            args.join(" "),
            s.2,
            m.2,
        ));
        let norm = |text: &str, code: i32| {
            let mut lines: Vec<String> = masked(text).lines().map(timeless).collect();
            if any_order {
                lines.sort();
            }
            (lines, code)
        };
        if norm(&s_text, s.2) != norm(&m_text, m.2) {
            differences.push(format!(
                "{tool} {}{tty_note}\n--- salt (exit {}):\n{s_text:?}\n--- maid {sub} (exit {}):\n{m_text:?}",
                args.join(" "),
                s.2,
                m.2,
            ));
        }
    }
    // What `cp -C` wrote is the same on both sides, byte for byte and
    // mode for mode.
    let written = |side: &str| -> Vec<(String, Vec<u8>, u32)> {
        use std::os::unix::fs::PermissionsExt;
        let root = dest.join(format!("c-{side}"));
        let mut out = Vec::new();
        let mut stack = vec![root.clone()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                let rel = path.strip_prefix(&root).unwrap().display().to_string();
                if path.is_dir() {
                    out.push((format!("{rel}/"), vec![], 0));
                    stack.push(path);
                } else {
                    let mode = entry.metadata().unwrap().permissions().mode();
                    out.push((rel, std::fs::read(&path).unwrap(), mode & 0o7777));
                }
            }
        }
        out.sort();
        out
    };
    let (salt_tree, maid_tree) = (written("salt"), written("maid"));
    let has = |path: &str| maid_tree.iter().find(|(p, _, _)| p == path).cloned();
    assert_eq!(
        has("tree/run.sh").map(|f| f.2),
        Some(0o750),
        "{maid_tree:?}"
    );
    assert_eq!(has("tree/big.txt").map(|f| f.1.len()), Some(big.len()));
    assert!(has("tree/hollow/").is_some(), "{maid_tree:?}");
    assert_eq!(salt_tree, maid_tree);

    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("salt-cli-transcript.txt");
    std::fs::write(&path, &transcript).unwrap();
    // Real runs, not the same failure twice.
    assert!(
        transcript.contains("Executing run on ['m1']"),
        "{transcript}"
    );
    assert!(
        transcript.contains("\x1b[0;31mm2\x1b[0;0m:"),
        "{transcript}"
    );
    assert!(transcript.contains("Returns: [2/2]"), "{transcript}");
    // The dev environment was rendered, and its import read, from dev.
    assert!(transcript.contains("Name: dev-vars in dev"), "{transcript}");
    assert!(
        differences.is_empty(),
        "{} of {} command lines differ from Salt {}'s `salt` (transcript: {}):\n\n{}",
        differences.len(),
        corpus().len()
            + any_minion_corpus().len()
            + cp_corpus().len()
            + runner_corpus().len()
            + tty_corpus().len(),
        crate::common::salt::SALT_VERSION,
        path.display(),
        differences.join("\n\n")
    );
}
