//! The audit trail's hash chain, end to end: a maid writes its records
//! chained and checkpointed with its own key, across a rotation (SIGHUP)
//! and across a restart after its file was rotated while it was stopped;
//! `maid audit verify` finds the files intact and signed to the last
//! record, and names the record an edit, a removal or an insertion
//! touched.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::fleet::{Agent, maid_cli, request, run, start_agent, wait_registered};
use maid_bus::Bus;
use maid_testkit::redis::RedisServer;

fn agent(server: &RedisServer, dir: &Path) -> Agent {
    let toml = format!(
        "[security]\nrequire_signed = false\nstate_dir = {:?}\n[audit]\npath = {:?}\n",
        dir.join("state"),
        dir.join("audit.log"),
    );
    start_agent(&server.config(), "au-1", &toml)
}

async fn pings(bus: &Bus, n: usize) {
    for _ in 0..n {
        let report = run(
            bus,
            &request("au-1", "glob", "test.ping", json!([]), json!({})),
        )
        .await;
        assert_eq!(report.returns.len(), 1);
    }
}

/// `maid audit verify FILES --key`: exit code and what it printed.
fn verify(dir: &Path, files: &[&str]) -> (i32, String) {
    let mut args = vec!["audit", "verify"];
    args.extend_from_slice(files);
    let key = dir.join("state/minion.pub");
    args.extend(["--key", key.to_str().unwrap()]);
    let o = maid_cli("redis://127.0.0.1:1/", &args, dir);
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr),
    )
}

/// Until `path` holds a checkpoint as its last record.
async fn checkpointed(path: &Path) {
    for _ in 0..200 {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text
            .lines()
            .last()
            .and_then(|l| serde_json::from_str::<Value>(l).ok())
            .is_some_and(|v| v["decision"] == "checkpoint")
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{} ends with no checkpoint", path.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_chain_survives_rotations_and_restarts_and_locates_every_edit() {
    let server = RedisServer::start();
    let bus = Bus::new(&server.config()).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let log = dir.join("audit.log");
    let mut maid = agent(&server, dir);
    wait_registered(&bus, &["au-1"]).await;
    pings(&bus, 3).await;
    // Rotated as logrotate does: moved, then SIGHUP. The old file ends
    // with a checkpoint; the new one goes on with the chain.
    std::fs::rename(&log, dir.join("audit.log.2")).unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(maid.pid() as i32),
        nix::sys::signal::Signal::SIGHUP,
    )
    .unwrap();
    checkpointed(&dir.join("audit.log.2")).await;
    pings(&bus, 2).await;
    assert!(maid.terminate().success());
    checkpointed(&log).await;
    // Rotated while stopped: the maid takes the chain up from its
    // state_dir when it starts on a new file.
    std::fs::rename(&log, dir.join("audit.log.1")).unwrap();
    let mut maid = agent(&server, dir);
    wait_registered(&bus, &["au-1"]).await;
    pings(&bus, 2).await;
    assert!(maid.terminate().success());
    checkpointed(&log).await;

    let files = ["audit.log.2", "audit.log.1", "audit.log"];
    let (code, out) = verify(dir, &files);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("the chain is intact"), "{out}");
    assert!(out.contains(", the last"), "{out}");
    let records = std::fs::read_to_string(&log).unwrap().lines().count()
        + std::fs::read_to_string(dir.join("audit.log.1"))
            .unwrap()
            .lines()
            .count()
        + std::fs::read_to_string(dir.join("audit.log.2"))
            .unwrap()
            .lines()
            .count();
    assert!(out.starts_with(&format!("{records} records")), "{out}");

    // One edit in the middle file: a job's function rewritten.
    let middle = dir.join("audit.log.1");
    let original = std::fs::read_to_string(&middle).unwrap();
    let lines: Vec<&str> = original.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.contains("\"test.ping\""))
        .expect("a job's record");
    let mut edited = lines.clone();
    let forged = lines[at].replace("\"test.ping\"", "\"test.true\"");
    edited[at] = &forged;
    std::fs::write(&middle, edited.join("\n") + "\n").unwrap();
    let (code, out) = verify(dir, &files);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("(audit.log.1 line {}) was altered", at + 1)),
        "{out}"
    );
    // Removed.
    let mut removed = lines.clone();
    removed.remove(at);
    std::fs::write(&middle, removed.join("\n") + "\n").unwrap();
    let (code, out) = verify(dir, &files);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("missing") && out.contains("removed"), "{out}");
    // Inserted: a copy of another record.
    let mut inserted = lines.clone();
    inserted.insert(at, lines[0]);
    std::fs::write(&middle, inserted.join("\n") + "\n").unwrap();
    let (code, out) = verify(dir, &files);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("inserted"), "{out}");
    // Put back: intact again.
    std::fs::write(&middle, &original).unwrap();
    assert_eq!(verify(dir, &files).0, 0);
}
