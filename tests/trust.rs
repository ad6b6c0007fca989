//! Signed jobs, replay protection and the audit log, against a real agent
//! and `redis-server`: every rejection reason of PROTOCOL §6 sends the
//! `reject` reply and runs nothing, a replay is refused even after the
//! agent restarts, and every job received leaves one audit line.

use std::path::Path;
use std::time::Duration;

use crate::common::fleet::{Agent, raw_round_trip, request, run, start_agent, wait_registered};
use crate::common::redis::RedisServer;
use ed25519_dalek::SigningKey;
use maid_agent::protocol::Reply;
use maid_bus::{Bus, RedisConfig};
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
    let key = maid_agent::trust::generate().unwrap();
    let state = tempfile::tempdir().unwrap();
    let public = state.path().join("master.pub");
    std::fs::write(
        &public,
        maid_agent::trust::encode_verifying(&key.verifying_key()),
    )
    .unwrap();
    let extra = format!(
        "[security]\nrequire_signed = true\ntrusted_keys = [\"{}\"]\nstate_dir = \"{}\"\n\
         [audit]\npath = \"{}\"\narguments = \"redacted\"\n",
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
        let deadline = std::time::Instant::now() + crate::common::fleet::REPLY_DEADLINE;
        loop {
            let audit = self.audit();
            if done(&audit) || std::time::Instant::now() > deadline {
                return audit;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// A signed job's payload; `topic` is its reply topic, and it names the
/// test fleet's master topic as the one it is published on (PROTOCOL §6).
fn job(jid: &str, topic: &str, issued_at: i64) -> String {
    json!({"jid": jid, "tempTopic": topic, "fun": "test.arg", "arg": ["signed"],
           "kwarg": {"password": "hunter2"}, "tgt": "*", "issued_at": issued_at,
           "topic": crate::common::fleet::TOPIC})
    .to_string()
}

fn envelope(payload: String, key: &SigningKey) -> String {
    serde_json::to_string(&maid_agent::trust::sign(payload, key)).unwrap()
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
    std::fs::write(&keyfile, maid_agent::trust::encode_signing(&s.key)).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let o = crate::common::fleet::maid_cli(
        &s.server.url(),
        &[
            "run",
            "*",
            "test.echo",
            "hi",
            "--master-topic",
            crate::common::fleet::TOPIC,
            "--key",
            keyfile.to_str().unwrap(),
        ],
        tmp.path(),
    );
    assert_eq!(String::from_utf8_lossy(&o.stdout), "secure:\n    hi\n");

    // Unsigned: the CLI without a key.
    let o = crate::common::fleet::maid_cli(
        &s.server.url(),
        &[
            "run",
            "*",
            "test.ping",
            "--master-topic",
            crate::common::fleet::TOPIC,
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
    let other = maid_agent::trust::generate().unwrap();
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
    let kid = maid_agent::trust::key_id(&s.key.verifying_key());
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
    crate::common::fleet::wait_subscribers(&s.bus, 1).await;
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
    // The digest is of what was sent, the secret included.
    let sent = serde_json::to_vec(&json!([["signed"], {"password": "hunter2"}])).unwrap();
    assert_eq!(
        rec["args_sha256"].as_str().unwrap(),
        hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&sent))
    );
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
    let o = crate::common::maid_command()
        .args(["keygen", "m"])
        .current_dir(tmp.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&tmp.path().join("m.key")), 0o600);
    let key = maid_agent::trust::read_signing_key(&tmp.path().join("m.key")).unwrap();
    let public = std::fs::read_to_string(tmp.path().join("m.pub")).unwrap();
    let pk = maid_agent::trust::read_verifying_key(public.trim()).unwrap();
    assert_eq!(pk, key.verifying_key());
    let o = crate::common::maid_command()
        .args(["keygen", "m"])
        .current_dir(tmp.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "refuses to overwrite");
}

// ---------------------------------------------------------------------------
// `salt://` content is served only as a trusted master vouches for it:
// the SHA-256 a signed job pins, or a record the master key signed.
// ---------------------------------------------------------------------------

/// An agent of the signed fleet whose `cp` may fetch any `salt://` source
/// and write into `dir`.
async fn cp_agent(s: &Setup, id: &str, dir: &Path) -> Agent {
    let extra = format!(
        "{}[plugins.cp]\nfetch = [\"salt://**\"]\ndirs = [{{ path = \"{}\", writable = true }}]\n",
        s.extra,
        dir.display()
    );
    let a = start_agent(&s.redis, id, &extra);
    wait_registered(&s.bus, &[id]).await;
    a
}

/// The master's private key as a file, for the CLI's `--key`.
fn master_keyfile(s: &Setup) -> std::path::PathBuf {
    let path = s.state.path().join("master.key");
    std::fs::write(&path, maid_agent::trust::encode_signing(&s.key)).unwrap();
    path
}

/// `maid file push PATH --as NAME`, signed with the master key when
/// `signed`; the SHA-256 it printed.
fn file_push(s: &Setup, path: &Path, name: &str, signed: bool) -> String {
    let keyfile = master_keyfile(s);
    let mut args = vec!["file", "push", path.to_str().unwrap(), "--as", name];
    if signed {
        args.extend(["--key", keyfile.to_str().unwrap()]);
    }
    let o = crate::common::fleet::maid_cli(&s.server.url(), &args, s.state.path());
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let sha = out.split_whitespace().nth(1).unwrap().to_string();
    assert_eq!(sha.len(), 64, "{out}");
    sha
}

/// A signed `cp.get_file URL DEST` on every agent; with `pin`, the job
/// pins that SHA-256 for `url`. The one return.
async fn signed_get_file(s: &Setup, url: &str, dest: &Path, pin: Option<&str>) -> (i32, String) {
    let mut req = request(
        "*",
        "glob",
        "cp.get_file",
        json!([url, dest.to_str().unwrap()]),
        json!({}),
    );
    req.key = Some(s.key.clone());
    if let Some(pin) = pin {
        req.source_hashes = [(url.to_string(), pin.to_string())].into();
    }
    let report = run(&s.bus, &req).await;
    assert_eq!(report.returns.len(), 1, "{report:?}");
    let r = &report.returns[0];
    let text = match &r.ret {
        Value::String(t) => t.clone(),
        other => other.to_string(),
    };
    (r.retcode, text)
}

/// Names in `dir`: nothing written, not even a temporary file left behind.
fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

async fn redis_set(s: &Setup, key: &str, value: &[u8]) {
    let mut conn = s.bus.connect().await.unwrap();
    let _: () = redis::AsyncCommands::set(&mut conn, key, value)
        .await
        .unwrap();
}

async fn redis_hset(s: &Setup, key: &str, field: &str, value: &str) {
    let mut conn = s.bus.connect().await.unwrap();
    let _: () = redis::AsyncCommands::hset(&mut conn, key, field, value)
        .await
        .unwrap();
}

async fn redis_hget(s: &Setup, key: &str, field: &str) -> Option<String> {
    let mut conn = s.bus.connect().await.unwrap();
    redis::AsyncCommands::hget(&mut conn, key, field)
        .await
        .unwrap()
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn salt_content_replaced_in_redis_is_not_written() {
    let s = setup();
    let out = tempfile::tempdir().unwrap();
    let _a = cp_agent(&s, "victim", out.path()).await;
    let src = s.state.path().join("motd");
    std::fs::write(&src, "good content\n").unwrap();
    let sha = file_push(&s, &src, "motd", true);
    let dest = out.path().join("motd");

    // Whoever can write to Redis replaces the bytes under the same hash,
    // keeping their length.
    redis_set(
        &s,
        &maid_bus::filestore::chunk_key(&sha, 0),
        b"evil content\n",
    )
    .await;
    // A job that pins the pushed hash: the last piece never reaches the
    // plugin, so nothing is written.
    let (retcode, ret) = signed_get_file(&s, "salt://motd", &dest, Some(&sha)).await;
    assert_eq!(retcode, 1, "{ret}");
    assert!(ret.contains("not to the vouched SHA-256"), "{ret}");
    assert_eq!(entries(out.path()), Vec::<String>::new());
    // The same without a pin: the signed record vouches for the same hash.
    let (retcode, ret) = signed_get_file(&s, "salt://motd", &dest, None).await;
    assert_eq!(retcode, 1, "{ret}");
    assert!(ret.contains("not to the vouched SHA-256"), "{ret}");
    assert_eq!(entries(out.path()), Vec::<String>::new());

    // The attacker stores its own content, under its own hash, and points
    // the index at it...
    let evil = b"evil, under its own hash\n";
    let evil_sha = sha256_hex(evil);
    redis_set(&s, &maid_bus::filestore::chunk_key(&evil_sha, 0), evil).await;
    let meta = maid_bus::filestore::meta_key(&evil_sha);
    redis_hset(&s, &meta, "size", &evil.len().to_string()).await;
    redis_hset(&s, &meta, "chunks", "1").await;
    redis_hset(&s, &meta, "chunk_bytes", &(1u32 << 20).to_string()).await;
    redis_hset(&s, maid_bus::filestore::INDEX_KEY, "motd", &evil_sha).await;
    let denied = |(retcode, ret): (i32, String)| {
        assert_eq!(retcode, 77, "{ret}");
        assert!(
            ret.starts_with("Denied: salt://motd is not vouched for by a trusted master key"),
            "{ret}"
        );
        assert_eq!(entries(out.path()), Vec::<String>::new());
    };
    // ...with the signed record removed,
    let mut conn = s.bus.connect().await.unwrap();
    let _: () = redis::AsyncCommands::hdel(&mut conn, maid_bus::filestore::SIGNED_KEY, "motd")
        .await
        .unwrap();
    denied(signed_get_file(&s, "salt://motd", &dest, None).await);
    // ...with a record signed by a key of its own,
    let own = maid_agent::trust::generate().unwrap();
    let forged =
        maid_bus::filestore::FileRecord::new("motd", &evil_sha, evil.len() as u64).sign(&own);
    let forged = serde_json::to_string(&forged).unwrap();
    redis_hset(&s, maid_bus::filestore::SIGNED_KEY, "motd", &forged).await;
    denied(signed_get_file(&s, "salt://motd", &dest, None).await);
    // ...with the master's record of that payload, re-signed by nobody,
    let mut lifted: Value = serde_json::from_str(&forged).unwrap();
    lifted["kid"] = json!(maid_agent::trust::key_id(&s.key.verifying_key()));
    redis_hset(
        &s,
        maid_bus::filestore::SIGNED_KEY,
        "motd",
        &lifted.to_string(),
    )
    .await;
    denied(signed_get_file(&s, "salt://motd", &dest, None).await);
    // ...and with the master's genuine record of another file.
    let other = s.state.path().join("other");
    std::fs::write(&other, evil).unwrap();
    assert_eq!(file_push(&s, &other, "other", true), evil_sha);
    let record = redis_hget(&s, maid_bus::filestore::SIGNED_KEY, "other")
        .await
        .unwrap();
    redis_hset(&s, maid_bus::filestore::SIGNED_KEY, "motd", &record).await;
    redis_hset(&s, maid_bus::filestore::INDEX_KEY, "motd", &evil_sha).await;
    denied(signed_get_file(&s, "salt://motd", &dest, None).await);
    // The pin holds, whatever the index and the records say: the pushed
    // hash is served, and its content is still the tampered one.
    let (retcode, ret) = signed_get_file(&s, "salt://motd", &dest, Some(&sha)).await;
    assert_eq!(retcode, 1, "{ret}");
    assert_eq!(entries(out.path()), Vec::<String>::new());

    // Restored content is served again, exactly.
    redis_set(
        &s,
        &maid_bus::filestore::chunk_key(&sha, 0),
        b"good content\n",
    )
    .await;
    let (retcode, ret) = signed_get_file(&s, "salt://motd", &dest, Some(&sha)).await;
    assert_eq!((retcode, ret), (0, dest.display().to_string()));
    assert_eq!(std::fs::read(&dest).unwrap(), b"good content\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsigned_salt_content_is_denied_without_a_pin() {
    let s = setup();
    let out = tempfile::tempdir().unwrap();
    let _a = cp_agent(&s, "strict", out.path()).await;
    let dest = out.path().join("app.conf");
    let src = s.state.path().join("app.conf");

    // Signed first, then replaced by an unsigned push: the old record
    // goes, so neither version is served to a job that pins nothing.
    std::fs::write(&src, "v1\n").unwrap();
    file_push(&s, &src, "app.conf", true);
    std::fs::write(&src, "v2\n").unwrap();
    let sha = file_push(&s, &src, "app.conf", false);
    assert_eq!(
        redis_hget(&s, maid_bus::filestore::SIGNED_KEY, "app.conf").await,
        None
    );
    let (retcode, ret) = signed_get_file(&s, "salt://app.conf", &dest, None).await;
    assert_eq!(retcode, 77, "{ret}");
    assert!(
        ret.starts_with("Denied: salt://app.conf is not vouched for by a trusted master key"),
        "{ret}"
    );
    assert_eq!(entries(out.path()), Vec::<String>::new());

    // A signed job that pins its hash vouches for it.
    let (retcode, ret) = signed_get_file(&s, "salt://app.conf", &dest, Some(&sha)).await;
    assert_eq!((retcode, ret), (0, dest.display().to_string()));
    assert_eq!(std::fs::read(&dest).unwrap(), b"v2\n");

    // A name never pushed is missing, as in Salt (an empty return).
    let (retcode, ret) = signed_get_file(&s, "salt://nothing", &dest, None).await;
    assert_eq!((retcode, ret.as_str()), (0, ""));
}

/// A signed `fun` (`cp.list_master` and kin) with `arg` on every agent:
/// the one return and the job's id.
async fn signed_call(s: &Setup, fun: &str, arg: Value) -> (maid_agent::protocol::Return, String) {
    let mut req = request("*", "glob", fun, arg, json!({}));
    req.key = Some(s.key.clone());
    let report = run(&s.bus, &req).await;
    assert_eq!(report.returns.len(), 1, "{report:?}");
    (report.returns[0].clone(), report.jid.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_writer_cannot_add_a_name_to_a_listing() {
    let s = setup();
    let out = tempfile::tempdir().unwrap();
    let _a = cp_agent(&s, "lister", out.path()).await;
    let src = s.state.path().join("app.conf");
    std::fs::write(&src, "good\n").unwrap();
    let sha = file_push(&s, &src, "web/app.conf", true);
    file_push(&s, &src, "web/unsigned.conf", false);

    // Whoever can write to Redis adds names: to the index alone, with a
    // record signed by a key nobody trusts, with the master's own record
    // of another name, and spelled to climb out of the store.
    use maid_bus::filestore::{FileRecord, INDEX_KEY, SIGNED_KEY};
    for name in [
        "web/evil.sh",
        "web/forged.sh",
        "web/renamed.conf",
        "web/../etc/x",
    ] {
        redis_hset(&s, INDEX_KEY, name, &sha).await;
    }
    let stranger = maid_agent::trust::generate().unwrap();
    let forged = FileRecord::new("web/forged.sh", &sha, 5).sign(&stranger);
    redis_hset(
        &s,
        SIGNED_KEY,
        "web/forged.sh",
        &serde_json::to_string(&forged).unwrap(),
    )
    .await;
    let genuine = redis_hget(&s, SIGNED_KEY, "web/app.conf").await.unwrap();
    redis_hset(&s, SIGNED_KEY, "web/renamed.conf", &genuine).await;
    redis_hset(&s, SIGNED_KEY, "web/../etc/x", &genuine).await;

    let (files, jid) = signed_call(&s, "cp.list_master", json!([])).await;
    assert_eq!(
        (files.retcode, &files.ret),
        (0, &json!(["web/app.conf"])),
        "{files:?}"
    );
    let (dirs, _) = signed_call(&s, "cp.list_master_dirs", json!(["base", "web"])).await;
    assert_eq!(dirs.ret, json!(["web"]), "{dirs:?}");
    // What is listed is what a job can fetch, and no more.
    let dest = out.path().join("got");
    let (retcode, ret) = signed_get_file(&s, "salt://web/evil.sh", &dest, None).await;
    assert_eq!(retcode, 77, "{ret}");

    // The listing is in the audit trail as a fetch is.
    let audit = s.audit_when(|a| a.iter().any(|r| r["jid"] == jid)).await;
    let rec = audit.iter().find(|r| r["jid"] == jid).unwrap();
    assert_eq!(
        rec["capabilities"],
        json!([{"kind": "list", "saltenv": "base", "prefix": "", "allowed": true}]),
        "{rec}"
    );

    // Environments: the master's record of base's file, copied into
    // another environment's hashes, vouches for nothing there; a file
    // the master signed for `dev` is listed and served in dev alone.
    use maid_bus::filestore::{index_key, signed_key};
    redis_hset(&s, &index_key("dev"), "web/app.conf", &sha).await;
    redis_hset(&s, &signed_key("dev"), "web/app.conf", &genuine).await;
    let (files, _) = signed_call(&s, "cp.list_master", json!(["dev"])).await;
    assert_eq!((files.retcode, &files.ret), (0, &json!([])), "{files:?}");
    let url = "salt://web/app.conf?saltenv=dev";
    let (retcode, ret) = signed_get_file(&s, url, &dest, None).await;
    assert_eq!(retcode, 77, "a base record moved to dev: {ret}");
    assert!(ret.contains("environment \"base\""), "{ret}");
    let dev_src = s.state.path().join("dev.conf");
    std::fs::write(&dev_src, "dev\n").unwrap();
    let mut conn = s.bus.connect().await.unwrap();
    maid_bus::filestore::push(&mut conn, &dev_src, "dev", "web/dev.conf", Some(&s.key))
        .await
        .unwrap();
    let (files, _) = signed_call(&s, "cp.list_master", json!(["dev"])).await;
    assert_eq!(files.ret, json!(["web/dev.conf"]), "{files:?}");
    let (files, _) = signed_call(&s, "cp.list_master", json!([])).await;
    assert_eq!(files.ret, json!(["web/app.conf"]), "{files:?}");
    let (retcode, ret) = signed_get_file(&s, "salt://web/dev.conf?saltenv=dev", &dest, None).await;
    assert_eq!(
        (retcode, std::fs::read_to_string(&dest).unwrap()),
        (0, "dev\n".into()),
        "{ret}"
    );
    let (retcode, ret) = signed_get_file(&s, "salt://web/dev.conf", &dest, None).await;
    assert_eq!((retcode, ret.as_str()), (0, ""), "not in base");
}

/// Bytes Redis has sent to its clients so far.
async fn redis_output_bytes(s: &Setup) -> u64 {
    let mut conn = s.bus.connect().await.unwrap();
    let info: String = redis::cmd("INFO")
        .arg("stats")
        .query_async(&mut conn)
        .await
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("total_net_output_bytes:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_chunk_is_refused_without_being_read() {
    let s = setup();
    let out = tempfile::tempdir().unwrap();
    let _a = cp_agent(&s, "bounded", out.path()).await;
    let src = s.state.path().join("ten");
    std::fs::write(&src, "0123456789").unwrap();
    let sha = file_push(&s, &src, "ten", true);
    let dest = out.path().join("ten");

    // 8 MiB under the chunk of a 10-byte file, starting with the right 10
    // bytes, and metadata that claims as much.
    let mut huge = b"0123456789".to_vec();
    huge.resize(8 << 20, b'x');
    redis_set(&s, &maid_bus::filestore::chunk_key(&sha, 0), &huge).await;
    drop(huge);
    redis_hset(
        &s,
        &maid_bus::filestore::meta_key(&sha),
        "size",
        &(8u64 << 20).to_string(),
    )
    .await;
    let before = redis_output_bytes(&s).await;
    for pin in [None, Some(sha.as_str())] {
        let (retcode, ret) = signed_get_file(&s, "salt://ten", &dest, pin).await;
        assert_eq!(retcode, 1, "{ret}");
        assert!(ret.contains("chunk 0 holds 8388608 bytes where"), "{ret}");
        assert_eq!(entries(out.path()), Vec::<String>::new());
    }
    // Neither job fetched the chunk: Redis sent far less than 8 MiB in all.
    let sent = redis_output_bytes(&s).await - before;
    assert!(sent < 1 << 20, "redis sent {sent} bytes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maid_cp_with_the_master_key_copies_end_to_end() {
    let s = setup();
    let out = tempfile::tempdir().unwrap();
    let _a = cp_agent(&s, "copied", out.path()).await;
    let src = s.state.path().join("payload.bin");
    let data: Vec<u8> = (0..3_000_000u32).map(|i| (i * 31 + i / 7) as u8).collect();
    std::fs::write(&src, &data).unwrap();
    let dest = out.path().join("payload.bin");
    let keyfile = master_keyfile(&s);
    let o = crate::common::fleet::maid_cli(
        &s.server.url(),
        &[
            "cp",
            "*",
            src.to_str().unwrap(),
            dest.to_str().unwrap(),
            "--master-topic",
            crate::common::fleet::TOPIC,
            "--key",
            keyfile.to_str().unwrap(),
            "-t",
            "30",
            "--out",
            "json",
            "--out-indent",
            "-1",
        ],
        s.state.path(),
    );
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        format!("{{\"copied\": {{\"{}\": true}}}}\n", dest.display()),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(std::fs::read(&dest).unwrap(), data);

    // The push was signed: the master's record vouches for the name, so a
    // later signed job that pins nothing is served it too.
    let record = redis_hget(&s, maid_bus::filestore::SIGNED_KEY, "payload.bin")
        .await
        .unwrap();
    let pk = s.key.verifying_key();
    let verifier = maid_agent::trust::Verifier {
        keys: vec![(maid_agent::trust::key_id(&pk), pk)],
        require_signed: true,
        max_skew_ms: 0,
    };
    let vouched =
        maid_bus::filestore::FileRecord::verify(&verifier, &record, "base", "payload.bin").unwrap();
    assert_eq!(vouched.sha256, sha256_hex(&data));
    assert_eq!(vouched.size, data.len() as u64);
    std::fs::remove_file(&dest).unwrap();
    let (retcode, ret) = signed_get_file(&s, "salt://payload.bin", &dest, None).await;
    assert_eq!((retcode, ret), (0, dest.display().to_string()));
    assert_eq!(std::fs::read(&dest).unwrap(), data);
}
