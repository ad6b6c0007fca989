//! `salt` against `maid run`, side by side: the same command lines on a
//! real Salt 3008.4 master with two minions (`tests/salt/realsalt.py`)
//! and on two maids of the same ids; the same stdout and exit code
//! expected, jids masked. The corpus is what differs by the master alone
//! (output, batches, exit codes, targets nothing matches), on functions
//! both sides run alike.

use std::path::{Path, PathBuf};
use std::process::Command;

use maid_master::bus::Bus;

use crate::common::fleet::{TOPIC, maid_cli, start_agent, wait_registered, wait_subscribers};
use crate::common::redis::RedisServer;
use crate::common::salt::{RealSalt, venv};

const MINIONS: [&str; 2] = ["m1", "m2"];

/// `(stdout, exit code)`.
type Printed = (String, i32);

fn salt(config_dir: &Path, args: &[&str]) -> Printed {
    let out = Command::new(venv().join("bin/salt"))
        .arg("-c")
        .arg(config_dir)
        .args(args)
        .output()
        .expect("run salt");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

/// Jids masked: each run has its own.
fn masked(text: &str) -> String {
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

/// The command lines; `true` where lines may come in any order (returns
/// printed as they arrive, batches started as others finish).
fn corpus() -> Vec<(Vec<&'static str>, bool)> {
    vec![
        (vec!["*", "test.ping"], true),
        (vec!["--static", "*", "test.echo", "one document"], false),
        (
            vec!["--static", "--out", "json", "-L", "m1,m2", "test.ping"],
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
        (vec!["nomatch*", "test.ping"], false),
        (vec!["-I", "role:web", "test.ping"], false),
        (vec!["-J", "role:w.*", "test.ping"], false),
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
    let cmd =
        "[plugins.cmd]\nexec = [\"/usr/bin/*\", \"/bin/*\"]\nshell = true\nenv = [\"PATH\"]\n";
    let _agents: Vec<_> = MINIONS
        .iter()
        .map(|id| start_agent(&redis.config(), id, cmd))
        .collect();
    wait_registered(&bus, &MINIONS).await;
    wait_subscribers(&bus, 2).await;
    let tmp = tempfile::tempdir().unwrap();
    let url = redis.url();

    let mut differences = Vec::new();
    let mut transcript = String::new();
    for (args, any_order) in corpus() {
        let (dir, a) = (config_dir.clone(), args.clone());
        let s = tokio::task::spawn_blocking(move || salt(&dir, &a));
        let mut argv = vec!["run", "--master-topic", TOPIC];
        argv.extend(&args);
        let m = maid_cli(&url, &argv, tmp.path());
        let m: Printed = (
            String::from_utf8_lossy(&m.stdout).into_owned(),
            m.status.code().unwrap_or(-1),
        );
        let s = s.await.unwrap();
        transcript.push_str(&format!(
            "$ salt {}\n--- salt (exit {}):\n{}--- maid run (exit {}):\n{}\n",
            args.join(" "),
            s.1,
            s.0,
            m.1,
            m.0
        ));
        let norm = |p: &Printed| {
            let mut lines: Vec<String> = masked(&p.0).lines().map(str::to_string).collect();
            if any_order {
                lines.sort();
            }
            (lines, p.1)
        };
        if norm(&s) != norm(&m) {
            differences.push(format!(
                "salt {}\n--- salt (exit {}):\n{}--- maid run (exit {}):\n{}",
                args.join(" "),
                s.1,
                s.0,
                m.1,
                m.0
            ));
        }
    }
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("salt-cli-transcript.txt");
    std::fs::write(&path, &transcript).unwrap();
    // Real runs, not the same failure twice.
    assert!(
        transcript.contains("Executing run on ['m1']"),
        "{transcript}"
    );
    assert!(
        differences.is_empty(),
        "{} of {} command lines differ from Salt {}'s `salt` (transcript: {}):\n\n{}",
        differences.len(),
        corpus().len(),
        crate::common::salt::SALT_VERSION,
        path.display(),
        differences.join("\n\n")
    );
}
