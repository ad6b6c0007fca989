//! Signed jobs, replay protection and the audit log, against a real agent
//! and `redis-server`: every rejection reason of PROTOCOL §6 sends the
//! `reject` reply and runs nothing, a replay is refused even after the
//! agent restarts, and every job received leaves one audit line.

mod common;

use std::path::Path;
use std::time::Duration;

use common::fleet::{Agent, raw_round_trip, request, run, start_agent, wait_registered};
use common::redis::RedisServer;
use ed25519_dalek::SigningKey;
use maid::bus::{Bus, RedisConfig};
use maid::protocol::Reply;
use serde_json::{Value, json};

struct Setup {
    server: RedisServer,
    redis: RedisConfig,
    bus: Bus,
    key: SigningKey,
    state: tempfile::TempDir,
    extra: String,
}

fn setup() -> Setup {
    let server = RedisServer::start();
    let redis = server.config();
    let bus = Bus::new(&redis).unwrap();
    let key = maid::trust::generate().unwrap();
    let state = tempfile::tempdir().unwrap();
    let public = state.path().join("master.pub");
    std::fs::write(&public, maid::trust::encode_verifying(&key.verifying_key())).unwrap();
    let extra = format!(
        "[security]\nrequire_signed = true\ntrusted_keys = [\"{}\"]\nstate_dir = \"{}\"\n\
         [audit]\npath = \"{}\"\n",
        public.display(),
        state.path().display(),
        state.path().join("audit.jsonl").display()
    );
    Setup {
        server,
        redis,
        bus,
        key,
        state,
        extra,
    }
}

impl Setup {
    async fn agent(&self, id: &str) -> Agent {
        let a = start_agent(&self.redis, id, &self.extra);
        wait_registered(&self.bus, &[id]).await;
        a
    }

    fn audit(&self) -> Vec<Value> {
        let text =
            std::fs::read_to_string(self.state.path().join("audit.jsonl")).unwrap_or_default();
        // A last line still being written has no newline yet.
        text.split_inclusive('\n')
            .filter(|l| l.ends_with('\n'))
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The audit log once `done` holds of it (it is written beside the
    /// replies, in no set order with them).
    async fn audit_when(&self, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = std::time::Instant::now() + common::fleet::REPLY_DEADLINE;
        loop {
            let audit = self.audit();
            if done(&audit) || std::time::Instant::now() > deadline {
                return audit;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn job(jid: &str, topic: &str, issued_at: i64) -> String {
    json!({"jid": jid, "tempTopic": topic, "fun": "test.arg", "arg": ["signed"],
           "kwarg": {"password": "hunter2"}, "tgt": "*", "issued_at": issued_at})
    .to_string()
}

fn envelope(payload: String, key: &SigningKey) -> String {
    serde_json::to_string(&maid::trust::sign(payload, key)).unwrap()
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

async fn reject_reason(s: &Setup, topic: &str, payload: String) -> String {
    let replies = raw_round_trip(&s.bus, topic, &payload, 1).await;
    match replies.as_slice() {
        [Reply::Reject(r)] => r.reason.clone(),
        other => panic!("{topic}: expected one reject, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_jobs_run_and_every_attack_is_rejected() {
    let s = setup();
    let _a = s.agent("secure").await;

    // A signed job runs, through the master library...
    let mut req = request("*", "glob", "test.ping", json!([]), json!({}));
    req.key = Some(s.key.clone());
    let report = run(&s.bus, &req).await;
    assert_eq!(report.returns.len(), 1, "{report:?}");
    // ...and through the CLI with --key.
    let keyfile = s.state.path().join("master.key");
    std::fs::write(&keyfile, maid::trust::encode_signing(&s.key)).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let o = common::fleet::maid_cli(
        &s.server.url(),
        &[
            "run",
            "*",
            "test.echo",
            "hi",
            "--master-topic",
            common::fleet::TOPIC,
            "--key",
            keyfile.to_str().unwrap(),
        ],
        tmp.path(),
    );
    assert_eq!(String::from_utf8_lossy(&o.stdout), "secure:\n    hi\n");

    // Unsigned: the CLI without a key.
    let o = common::fleet::maid_cli(
        &s.server.url(),
        &[
            "run",
            "*",
            "test.ping",
            "--master-topic",
            common::fleet::TOPIC,
        ],
        tmp.path(),
    );
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "secure:\n    Job rejected: unsigned\n"
    );
    assert_eq!(
        reject_reason(&s, "t-unsigned", job("u1", "t-unsigned", now_ms())).await,
        "unsigned"
    );

    // Tampered payload.
    let good: Value =
        serde_json::from_str(&envelope(job("t1", "t-tamper", now_ms()), &s.key)).unwrap();
    let mut tampered = good.clone();
    tampered["payload"] = json!(
        good["payload"]
            .as_str()
            .unwrap()
            .replace("test.arg", "cmd.run")
    );
    assert_eq!(
        reject_reason(&s, "t-tamper", tampered.to_string()).await,
        "bad signature"
    );

    // Wrong key.
    let other = maid::trust::generate().unwrap();
    assert_eq!(
        reject_reason(
            &s,
            "t-wrong",
            envelope(job("w1", "t-wrong", now_ms()), &other)
        )
        .await,
        "unknown key"
    );
    // Expired and future-dated.
    assert_eq!(
        reject_reason(
            &s,
            "t-old",
            envelope(job("o1", "t-old", now_ms() - 600_000), &s.key)
        )
        .await,
        "expired"
    );
    assert_eq!(
        reject_reason(
            &s,
            "t-new",
            envelope(job("f1", "t-new", now_ms() + 600_000), &s.key)
        )
        .await,
        "expired"
    );

    // Nothing rejected ran: only the two good jobs are in the audit log as ran.
    let audit = s
        .audit_when(|a| {
            let n = |d: &str| a.iter().filter(|r| r["decision"] == d).count();
            n("ran") >= 2 && n("rejected") >= 6
        })
        .await;
    let ran: Vec<&Value> = audit.iter().filter(|r| r["decision"] == "ran").collect();
    assert_eq!(ran.len(), 2, "{audit:#?}");
    let rejected: Vec<&str> = audit
        .iter()
        .filter(|r| r["decision"] == "rejected")
        .map(|r| r["reason"].as_str().unwrap().split(':').next().unwrap())
        .collect();
    for reason in ["unsigned", "bad signature", "unknown key", "expired"] {
        assert!(rejected.contains(&reason), "{reason}: {rejected:?}");
    }
    let kid = maid::trust::key_id(&s.key.verifying_key());
    assert!(ran.iter().all(|r| r["signer"] == json!(kid)), "{ran:?}");
    assert!(
        ran.iter()
            .all(|r| r["plugin_sha256"].as_str().unwrap().len() == 64)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_is_rejected_also_after_a_restart() {
    let s = setup();
    let mut a = s.agent("replay").await;
    let signed = envelope(job("r1", "t-replay", now_ms()), &s.key);
    let first = raw_round_trip(&s.bus, "t-replay", &signed, 2).await;
    assert!(
        matches!(first.as_slice(), [Reply::Ping(_), Reply::Return(_)]),
        "{first:?}"
    );
    assert_eq!(
        reject_reason(&s, "t-replay", signed.clone()).await,
        "replayed"
    );

    a.kill();
    // Its alive key outlives it; gone, the new one's registration counts.
    let mut conn = s.bus.connect().await.unwrap();
    let _: () = redis::AsyncCommands::del(&mut conn, "maid:alive:replay")
        .await
        .unwrap();
    let _b = s.agent("replay").await;
    common::fleet::wait_subscribers(&s.bus, 1).await;
    assert_eq!(reject_reason(&s, "t-replay", signed).await, "replayed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_log_records_and_redacts() {
    let s = setup();
    let _a = s.agent("audited").await;
    let replies = raw_round_trip(
        &s.bus,
        "t-audit",
        &envelope(job("a1", "t-audit", now_ms()), &s.key),
        2,
    )
    .await;
    assert_eq!(replies.len(), 2);
    let audit = s.audit_when(|a| a.iter().any(|r| r["jid"] == "a1")).await;
    let rec = audit.iter().find(|r| r["jid"] == "a1").unwrap();
    assert_eq!(rec["decision"], "ran");
    assert_eq!(rec["fun"], "test.arg");
    assert_eq!(rec["args"], json!(["signed"]));
    assert_eq!(rec["kwargs"], json!({"password": "<redacted>"}));
    assert_eq!(rec["matched"], json!(true));
    assert_eq!(rec["retcode"], json!(0));
    assert!(rec["duration_ms"].is_u64());
    let line = std::fs::read_to_string(s.state.path().join("audit.jsonl")).unwrap();
    assert!(!line.contains("hunter2"));
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(s.state.path().join("audit.jsonl"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn keygen_writes_a_private_key_only_its_owner_reads() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_maid"))
        .args(["keygen", "m"])
        .current_dir(tmp.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&tmp.path().join("m.key")), 0o600);
    let key = maid::trust::read_signing_key(&tmp.path().join("m.key")).unwrap();
    let public = std::fs::read_to_string(tmp.path().join("m.pub")).unwrap();
    let pk = maid::trust::read_verifying_key(public.trim()).unwrap();
    assert_eq!(pk, key.verifying_key());
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_maid"))
        .args(["keygen", "m"])
        .current_dir(tmp.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "refuses to overwrite");
}
