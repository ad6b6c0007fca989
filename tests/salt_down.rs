//! A minion that is down, side by side with Salt 3008.4: on a real Salt
//! master with minions m1 and m2 and on two maids of the same ids, m2 is
//! stopped (its key stays accepted, its grains cached), then `salt`,
//! `salt-cp` and `salt-run` against `maid run`, `maid cp` and `maid
//! runner` — the same stdout and exit code expected, jids masked. The
//! targets are those an operator types: a glob, a list, a grain and the
//! down minion's own id.
//!
//! One difference is by design and is normalised here: Salt words a
//! minion that did not return `[Not connected]` only when the master sees
//! no TCP connection from that minion's addresses; on one host every
//! minion shares the master's, so Salt says `[No response]` for a stopped
//! minion. maid knows: a maid whose alive key expired is not connected.
//! Both rows are read as "did not return" below, and the test checks that
//! maid's says `[Not connected]`.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use maid_bus::Bus;
use redis::AsyncCommands;

use crate::common::fleet::{TOPIC, start_agent, wait_registered, wait_subscribers};
use crate::common::redis::RedisServer;
use crate::common::salt::{RealSalt, venv};

/// `(stdout, exit code)`.
type Printed = (String, i32);

fn run(argv: &[String], maid: Option<&str>) -> Printed {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    if let Some(url) = maid {
        cmd.env("MAID_REDIS", url)
            .env("MAID_VERIFY_REPLIES", "false")
            .env("MAID_LOG", "warn,maid::unverified=off")
            .env_remove("MAID_CONFIG");
    }
    let out = cmd.output().expect("run the command");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

/// `text` with jids masked and every "did not return" row read alike:
/// Salt's `[No response]` (its lines up to the command that looks the job
/// up) and `[Not connected]` both become `Minion did not return.`.
fn normalised(text: &str) -> String {
    let text = text.replace("maid job ", "salt-run jobs.lookup_jid ");
    let mut out = Vec::new();
    let mut skipping = false;
    for line in text.lines() {
        if skipping {
            skipping = !line.contains("jobs.lookup_jid");
            continue;
        }
        if let Some(at) = line.find("Minion did not return. [No response]") {
            // One line in JSON, where the row is one string.
            let end = line[at..]
                .find("jobs.lookup_jid ")
                .map(|j| at + j + "jobs.lookup_jid ".len() + 20);
            let rest = end.map_or("", |e| &line[e.min(line.len())..]);
            out.push(format!("{}Minion did not return.{rest}", &line[..at]));
            skipping = end.is_none();
        } else {
            out.push(line.replace(
                "Minion did not return. [Not connected]",
                "Minion did not return.",
            ));
        }
    }
    let jid = |w: &str| w.len() == 20 && w.bytes().all(|b| b.is_ascii_digit());
    out.iter()
        .map(|l| {
            l.split(' ')
                .map(|w| if jid(w) { "<jid>" } else { w })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The command lines, as `(Salt's tool, maid's subcommand, words)`.
fn corpus() -> Vec<(&'static str, &'static str, Vec<&'static str>)> {
    let salt = |words: &[&'static str]| ("salt", "run", words.to_vec());
    vec![
        salt(&["-t", "3", "*", "test.ping"]),
        salt(&["-t", "3", "-L", "m1,m2", "test.ping"]),
        salt(&["-t", "3", "-G", "kernel:Linux", "test.ping"]),
        salt(&["-t", "3", "m2", "test.ping"]),
        salt(&["-t", "3", "--out", "json", "*", "test.echo", "hi"]),
        salt(&["-t", "3", "-b", "1", "*", "test.ping"]),
        // --hide-timeout hides no row: Salt 3008 always expects minions.
        salt(&["-t", "3", "--hide-timeout", "*", "test.ping"]),
        salt(&["-t", "3", "--hide-timeout", "-L", "m1,ghost", "test.ping"]),
        // A glob with commas: Salt's master expects both, neither matches.
        salt(&["-t", "3", "m1,m2", "test.ping"]),
        (
            "salt-cp",
            "cp",
            vec!["-t", "3", "*", "{src}/a.txt", "{dest}/{side}-a.txt"],
        ),
        ("salt-run", "runner", vec!["-t", "3", "manage.down"]),
        ("salt-run", "runner", vec!["-t", "3", "manage.status"]),
        ("salt-run", "runner", vec!["-t", "3", "manage.versions"]),
        ("salt-run", "runner", vec!["-t", "3", "jobs.active"]),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_minion_is_reported_as_salt_reports_it() {
    let mut salt_fleet =
        tokio::task::spawn_blocking(|| RealSalt::start(&["m1", "m2"], false, "alice"))
            .await
            .unwrap();
    let redis = RedisServer::start();
    let bus = Bus::new(&redis.config()).unwrap();
    let files = tempfile::tempdir().unwrap();
    let (src, dest) = (files.path().join("src"), files.path().join("dest"));
    std::fs::create_dir_all(&src).unwrap();
    std::fs::create_dir_all(&dest).unwrap();
    std::fs::write(src.join("a.txt"), "a\n").unwrap();
    let grants = format!(
        "[agent]\nheartbeat_secs = 1\n\
         [plugins.cp]\nfetch = [\"salt://**\"]\ndirs = [{{ path = \"{}\", writable = true }}]\n",
        dest.display()
    );
    let m1 = start_agent(&redis.config(), "m1", &grants);
    let m2 = start_agent(&redis.config(), "m2", &grants);
    wait_registered(&bus, &["m1", "m2"]).await;
    wait_subscribers(&bus, 2).await;

    // m2 stops on both sides.
    let salt_fleet = tokio::task::spawn_blocking(move || {
        salt_fleet.stop_minion("m2");
        salt_fleet
    })
    .await
    .unwrap();
    drop(m2);
    let mut conn = bus.connect().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while conn
        .exists::<_, bool>(maid_protocol::protocol::alive_key("m2"))
        .await
        .unwrap()
    {
        assert!(Instant::now() < deadline, "m2's alive key never expired");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let salt_dir = salt_fleet.master_config_dir.clone();
    let maid_bin = env!("CARGO_BIN_EXE_maid");
    let mut differences = Vec::new();
    let mut transcript = String::new();
    for (tool, sub, words) in corpus() {
        let words = |side: &str| -> Vec<String> {
            words
                .iter()
                .map(|w| {
                    w.replace("{src}", src.to_str().unwrap())
                        .replace("{dest}", dest.to_str().unwrap())
                        .replace("{side}", side)
                })
                .collect()
        };
        let mut salt_argv = vec![
            venv().join("bin").join(tool).display().to_string(),
            "-c".into(),
            salt_dir.display().to_string(),
        ];
        salt_argv.extend(words("salt"));
        let s = tokio::task::spawn_blocking(move || run(&salt_argv, None));
        let mut maid_argv: Vec<String> = [maid_bin, sub, "--master-topic", TOPIC]
            .map(String::from)
            .to_vec();
        maid_argv.extend(words("maid"));
        let url = redis.url();
        let m = tokio::task::spawn_blocking(move || run(&maid_argv, Some(&url)))
            .await
            .unwrap();
        let s = s.await.unwrap();
        let line = format!("{tool} {}", words("salt").join(" "));
        transcript.push_str(&format!(
            "$ {line}\n--- salt (exit {}):\n{}\n--- maid {sub} (exit {}):\n{}\n",
            s.1, s.0, m.1, m.0
        ));
        // Both sides report the Salt release they answer as
        // (`manage.versions`), the same on each.
        let (s_text, m_text) = (
            s.0.replace("/salt-", "/SIDE-"),
            m.0.replace("/maid-", "/SIDE-"),
        );
        if (normalised(&s_text), s.1) != (normalised(&m_text), m.1) {
            differences.push(format!(
                "{line}\n--- salt (exit {}):\n{}\n--- maid {sub} (exit {}):\n{}",
                s.1, s.0, m.1, m.0
            ));
        }
    }
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("salt-down-transcript.txt");
    std::fs::write(&path, &transcript).unwrap();
    // Real runs: m1 answered on both sides, and maid words m2's miss as
    // a maid that is not connected.
    assert!(transcript.contains("m1:\n    True"), "{transcript}");
    assert!(
        transcript.contains("m2:\n    Minion did not return. [Not connected]"),
        "{transcript}"
    );
    assert!(
        differences.is_empty(),
        "{} of {} command lines differ from Salt's (transcript: {}):\n\n{}",
        differences.len(),
        corpus().len(),
        path.display(),
        differences.join("\n\n")
    );
    drop(m1);
}
