//! Who answered: each maid's own key, accepted on the master as `salt-key`
//! accepts minion keys (`maid key`), and replies that count only when the
//! key accepted for their maid signed them (PROTOCOL §3.4, §4). Real
//! agents, a real `redis-server`, the real `maid` binary.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use redis::AsyncCommands;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::common::fleet::{Agent, TOPIC, request, run, start_agent, wait_registered};
use crate::common::redis::RedisServer;
use maid_bus::Bus;
use maid_master::pki::Pki;

/// `maid key --pki-dir PKI ARGS`, with `input` on its stdin.
fn maid_key(url: &str, pki: &Path, args: &[&str], input: &str) -> Output {
    let mut child = crate::common::maid_command()
        .arg("key")
        .arg("--pki-dir")
        .arg(pki)
        .args(args)
        .env("MAID_REDIS", url)
        .env_remove("MAID_CONFIG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run maid key");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "maid key {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// An agent that keeps state (and so has a key of its own) in `dir`.
fn keyed_agent(server: &RedisServer, id: &str, dir: &Path) -> Agent {
    let state = dir.join(format!("state-{id}"));
    let toml = format!("[security]\nrequire_signed = false\nstate_dir = {state:?}\n");
    start_agent(&server.config(), id, &toml)
}

/// Salt's fingerprint of a maid's public key file, computed here from the
/// raw key: SHA-256, lower-case hex pairs joined by `:`.
fn fingerprint_of(pub_file: &Path) -> String {
    let text = std::fs::read_to_string(pub_file).unwrap();
    let key = maid_agent::trust::decode_verifying_key(text.trim()).unwrap();
    Sha256::digest(key.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maid_key_lists_accepts_rejects_and_deletes_as_salt_key_does() {
    let server = RedisServer::start();
    let url = server.url();
    let bus = Bus::new(&server.config()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let _agents = [
        keyed_agent(&server, "key-a", dir.path()),
        keyed_agent(&server, "key-b", dir.path()),
    ];
    wait_registered(&bus, &["key-a", "key-b"]).await;
    let pki = dir.path().join("pki");
    let key = |args: &[&str], input: &str| stdout(&maid_key(&url, &pki, args, input));

    // The agents' keys arrived through the registry: pending.
    assert_eq!(
        key(&["-L"], ""),
        "Accepted Keys:\nDenied Keys:\nUnaccepted Keys:\nkey-a\nkey-b\nRejected Keys:\n"
    );
    // Accepting asks first; "n" accepts nothing.
    let asked = "The following keys are going to be accepted:\nUnaccepted Keys:\nkey-a\n\
                 Proceed? [n/Y] ";
    assert_eq!(key(&["-a", "key-a"], "n\n"), asked);
    assert!(Pki::new(&pki).accepted().unwrap().is_empty());
    // The end of standard input answers no, whatever the default (it
    // answered yes to `[n/Y]`).
    assert_eq!(key(&["-a", "key-a"], ""), format!("{asked}\n"));
    assert!(
        Pki::new(&pki).accepted().unwrap().is_empty(),
        "end of input accepted a key"
    );
    assert_eq!(
        key(&["-a", "key-a"], "y\n"),
        format!("{asked}Key for minion key-a accepted.\n")
    );
    assert_eq!(
        key(&["-a", "nobody*", "-y"], ""),
        "The key glob 'nobody*' does not match any unaccepted keys.\n"
    );
    assert_eq!(
        key(&["-r", "key-b", "-y"], ""),
        "Key for minion key-b rejected.\n"
    );
    let listed: Value = serde_json::from_str(&key(&["-L", "--out", "json"], "")).unwrap();
    assert_eq!(
        listed,
        json!({"minions": ["key-a"], "minions_denied": [], "minions_pre": [],
               "minions_rejected": ["key-b"]})
    );
    // Fingerprints: SHA-256 of the maid's own public key.
    let fp = fingerprint_of(&dir.path().join("state-key-a/minion.pub"));
    assert_eq!(
        key(&["-f", "key-a"], ""),
        format!("Accepted Keys:\nkey-a:  {fp}\n")
    );

    // Someone registers key-a with another key: denied, and the accepted
    // key stays the one that counts.
    let mut conn = bus.connect().await.unwrap();
    let reg: String = conn.hget("maid:registry", "key-a").await.unwrap();
    let mut reg: Value = maid_agent::registry::read(&reg).unwrap().value;
    let impostor = maid_agent::trust::generate().unwrap();
    reg["pubkey"] = Value::from(maid_agent::trust::encode_verifying(
        &impostor.verifying_key(),
    ));
    // Signed with the key it presents, as a maid's registration is.
    let _: i64 = conn
        .hset(
            "maid:registry",
            "key-a",
            maid_agent::registry::write(&reg, Some(&impostor)),
        )
        .await
        .unwrap();
    assert_eq!(
        key(&["-L"], ""),
        "Accepted Keys:\nkey-a\nDenied Keys:\nkey-a\nUnaccepted Keys:\nRejected Keys:\nkey-b\n"
    );
    // One state, as `salt-key -l` lists it (Salt's `list_status`, which
    // reads the word by its beginning): its heading even when empty.
    assert_eq!(key(&["-l", "acc"], ""), "Accepted Keys:\nkey-a\n");
    assert_eq!(key(&["-l", "un"], ""), "Unaccepted Keys:\n");
    assert_eq!(key(&["-lrej"], ""), "Rejected Keys:\nkey-b\n");
    assert_eq!(key(&["-l", "all"], ""), key(&["-L"], ""));
    assert_eq!(
        key(&["-l", "den", "--out", "json"], ""),
        "{\n    \"minions_denied\": [\n        \"key-a\"\n    ]\n}\n"
    );
    // In colour, as Salt's key outputter colours the same listing.
    let listed: Value = serde_json::from_str(&key(&["-L", "--out", "json"], "")).unwrap();
    let salt = crate::common::salt::oracle(
        "output",
        &json!({"cases": [{"out": "key", "color": true, "data": listed}]}),
    );
    let colored = key(&["-L", "--force-color"], "");
    assert!(
        colored.contains("\x1b[0;1;35mDenied Keys:\x1b[0;0m"),
        "{colored:?}"
    );
    assert_eq!(colored, salt[0]["stdout"].as_str().unwrap());
    let store = Pki::new(&pki);
    let accepted = store.accepted().unwrap();
    assert_eq!(
        maid_agent::trust::encode_verifying(&accepted["key-a"]),
        std::fs::read_to_string(dir.path().join("state-key-a/minion.pub"))
            .unwrap()
            .trim()
    );

    // Deleting asks with "no" as the default; a maid still registering
    // comes back as pending, as a minion re-authenticating does.
    assert_eq!(
        key(&["-d", "key-b"], "\n"),
        "The following keys are going to be deleted:\nRejected Keys:\nkey-b\nProceed? [N/y] "
    );
    assert_eq!(
        key(&["-d", "key-b", "-y"], ""),
        "Key for minion key-b deleted.\n"
    );
    assert_eq!(
        key(&["-L"], ""),
        "Accepted Keys:\nkey-a\nDenied Keys:\nkey-a\nUnaccepted Keys:\nkey-b\nRejected Keys:\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_replies_signed_by_an_accepted_key_count() {
    let server = RedisServer::start();
    let bus = Bus::new(&server.config()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // sig-a keeps state, so it has a key; sig-b has none (a v1 maid).
    let _a = keyed_agent(&server, "sig-a", dir.path());
    let _b = start_agent(&server.config(), "sig-b", "");
    wait_registered(&bus, &["sig-a", "sig-b"]).await;
    let pki = dir.path().join("pki");
    maid_key(&server.url(), &pki, &["-A", "-y"], "");
    assert_eq!(
        Pki::new(&pki)
            .accepted()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["sig-a"]
    );
    // A ghost: a registry entry and an alive key, and nobody behind them.
    let mut conn = bus.connect().await.unwrap();
    let ghost = json!({"id": "ghost", "version": "1", "master_topics": [TOPIC],
        "functions": ["test.ping"], "grains": {}, "started_at": "x", "last_seen": "x"});
    let _: i64 = conn
        .hset("maid:registry", "ghost", ghost.to_string())
        .await
        .unwrap();
    let _: () = conn.set_ex("maid:alive:ghost", 1, 120).await.unwrap();

    // A Redis client answers every job at once as sig-a: bare, and sealed
    // with a key of its own.
    let forger = {
        let client = server.client();
        let other = maid_agent::trust::generate().unwrap();
        tokio::spawn(async move {
            let mut pubsub = client.get_async_pubsub().await.unwrap();
            pubsub.subscribe(TOPIC).await.unwrap();
            let mut publish = client.get_multiplexed_async_connection().await.unwrap();
            let mut jobs = pubsub.into_on_message();
            while let Some(msg) = futures_util::StreamExt::next(&mut jobs).await {
                let job: Value = serde_json::from_slice(msg.get_payload_bytes()).unwrap();
                let (jid, topic) = (job["jid"].clone(), job["tempTopic"].as_str().unwrap());
                let ping = json!({"type": "ping", "sub_ip": "sig-a", "jid": jid, "match": true});
                let ret = json!({"type": "return", "sub_ip": "sig-a", "id": "sig-a",
                    "jid": jid, "fun": "test.ping", "fun_args": [], "return": "forged",
                    "retcode": 0, "success": true, "out": "nested", "_stamp": "x",
                    "ret_": {"sig-a": "forged"}});
                for reply in [ping, ret] {
                    let sealed = maid_agent::replies::seal(reply.to_string(), &other);
                    for payload in [reply.to_string(), sealed] {
                        let _: i64 = publish.publish(topic, payload).await.unwrap();
                    }
                }
            }
        })
    };
    // The forger is listening before the job goes out.
    crate::common::fleet::wait_subscribers(&bus, 3).await;

    let mut req = request("*", "glob", "test.ping", json!([]), json!({}));
    req.collect.timeout = Duration::from_secs(3);
    req.collect.pki = Some(Pki::new(&pki));
    let report = run(&bus, &req).await;
    assert_eq!(report.expected, BTreeSet::from(["sig-a".to_string()]));
    let returned: Vec<(String, Value)> = report
        .returns
        .iter()
        .map(|r| (r.id.clone(), r.ret.clone()))
        .collect();
    assert_eq!(returned, [("sig-a".to_string(), json!(true))], "{report:?}");
    assert!(report.repeated.is_empty(), "{report:?}");
    assert!(report.forged.contains_key("sig-a"), "{report:?}");
    assert!(
        report.forged["sig-b"].contains("no accepted key"),
        "{report:?}"
    );
    assert!(report.missed_maids.is_empty(), "{report:?}");
    assert_eq!(report.exit_code(), 0);

    // The control: without the key store, the ghost is expected (and
    // missed), the forger's return is counted as sig-a's or as a repeat.
    req.collect.pki = None;
    let open = run(&bus, &req).await;
    assert!(open.missed_maids.contains("ghost"), "{open:?}");
    assert!(
        open.repeated.contains_key("sig-a")
            || open.returns.iter().any(|r| r.ret == json!("forged")),
        "{open:?}"
    );
    forger.abort();

    // The job cache: a forged entry put in sig-a's place is not printed as
    // sig-a's return by `maid job` with the key store.
    let forged_entry = json!({"type": "return", "sub_ip": "sig-a", "id": "sig-a",
        "jid": report.jid, "fun": "test.ping", "fun_args": [], "return": "forged",
        "retcode": 0, "success": true, "out": "nested", "_stamp": "x",
        "ret_": {"sig-a": "forged"}});
    let key = maid_agent::protocol::job_key(&report.jid);
    let genuine: String = conn.hget(&key, "sig-a").await.unwrap();
    let job_out = |pki_dir: Option<&Path>| -> Output {
        let mut cmd = crate::common::maid_command();
        cmd.args(["job", &report.jid, "--out", "json"])
            .env("MAID_REDIS", server.url())
            .env_remove("MAID_CONFIG");
        if let Some(p) = pki_dir {
            cmd.arg("--pki-dir").arg(p);
        }
        cmd.output().unwrap()
    };
    let verified = job_out(Some(&pki));
    assert!(
        stdout(&verified).contains("\"sig-a\": true"),
        "{}",
        stdout(&verified)
    );
    let _: i64 = conn
        .hset(&key, "sig-a", forged_entry.to_string())
        .await
        .unwrap();
    let verified = job_out(Some(&pki));
    assert!(
        !stdout(&verified).contains("sig-a"),
        "{}",
        stdout(&verified)
    );
    assert!(
        String::from_utf8_lossy(&verified.stderr)
            .contains("forged reply claimed to come from sig-a"),
        "{}",
        String::from_utf8_lossy(&verified.stderr)
    );
    // Without the key store the forgery reads as sig-a's answer.
    assert!(stdout(&job_out(None)).contains("forged"));
    assert!(
        genuine.contains("\"sig\""),
        "the cached return is an envelope: {genuine}"
    );
}

const AGENT_PW: &str = "agent-password-0123456789";
const MASTER_PW: &str = "master-password-0123456789";

/// A `redis-server` reading its users from an aclfile, open while the
/// server starts (the kit checks it with PING); the test then writes the
/// generated rules there and loads them, as an operator deploys them.
fn acl_server() -> (tempfile::TempDir, std::path::PathBuf, RedisServer) {
    let dir = tempfile::tempdir().unwrap();
    let aclfile = dir.path().join("users.acl");
    std::fs::write(&aclfile, "user default on nopass ~* &* +@all\n").unwrap();
    let server = RedisServer::start_with(&["--aclfile", aclfile.to_str().unwrap()]);
    (dir, aclfile, server)
}

/// What `maid acl ARGS` prints, given the test's passwords.
fn maid_acl(args: &[&str]) -> String {
    let out = crate::common::maid_command()
        .arg("acl")
        .args(args)
        .env("MAID_REDIS_AGENT_PASSWORD", AGENT_PW)
        .env("MAID_REDIS_MASTER_PASSWORD", MASTER_PW)
        .env_remove("MAID_CONFIG")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `maid acl`'s rules, loaded into a real `redis-server` as an aclfile:
/// the fleet runs with an agent credential and a master credential, and
/// the agent credential cannot publish a job, write the file or plugin
/// store, or hear another master's topic; without a credential nothing
/// works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_acls_hold_each_credential_to_what_it_must_do() {
    let (_dir, aclfile, server) = acl_server();
    let rules = maid_acl(&["--master-topic", TOPIC]);
    assert!(
        !rules.contains(AGENT_PW) && !rules.contains(MASTER_PW),
        "{rules}"
    );
    std::fs::write(&aclfile, &rules).unwrap();
    let mut admin = server.client().get_connection().unwrap();
    let loaded: redis::RedisResult<()> = redis::cmd("ACL").arg("LOAD").query(&mut admin);
    assert!(loaded.is_ok(), "{loaded:?}\n{rules}");

    let url = |user: &str, pw: &str| format!("redis://{user}:{pw}@127.0.0.1:{}/", server.port());
    let agent_url = url("maid-agent", AGENT_PW);
    let master = maid_bus::RedisConfig {
        url: Some(url("maid-master", MASTER_PW)),
        ..Default::default()
    };
    let agent_redis = maid_bus::RedisConfig {
        url: Some(agent_url.clone()),
        ..Default::default()
    };
    // The fleet works with the two credentials.
    let _agent = ping_round_trip(&agent_redis, &master, "acl-a").await;

    // What the agent credential may not do.
    let agent = redis::Client::open(agent_url.as_str()).unwrap();
    let mut conn = agent.get_multiplexed_async_connection().await.unwrap();
    let refused = |r: redis::RedisResult<redis::Value>, what: &str| {
        let e = r.expect_err(what);
        assert!(
            e.to_string().to_lowercase().contains("noperm"),
            "{what}: {e}"
        );
    };
    let job = json!({"jid": "1", "tempTopic": "maid.reply.1.x", "fun": "cmd.run",
        "arg": ["id"]})
    .to_string();
    refused(
        redis::cmd("PUBLISH")
            .arg(TOPIC)
            .arg(&job)
            .query_async(&mut conn)
            .await,
        "publish a job",
    );
    refused(
        redis::cmd("HSET")
            .arg("maid:file:index")
            .arg("motd")
            .arg("0".repeat(64))
            .query_async(&mut conn)
            .await,
        "repoint a pushed file",
    );
    refused(
        redis::cmd("SET")
            .arg("maid:file:chunk:x:0")
            .arg("evil")
            .query_async(&mut conn)
            .await,
        "write file content",
    );
    refused(
        redis::cmd("HSET")
            .arg("maid:plugins")
            .arg("cmd")
            .arg("{}")
            .query_async(&mut conn)
            .await,
        "push a plugin",
    );
    // Pillar records are the master's to write (an agent reads them).
    for key in [
        maid_protocol::pillar::record_key("acl-a"),
        maid_protocol::pillar::pinned_key("acl-a", &"0".repeat(64)),
    ] {
        refused(
            redis::cmd("SET")
                .arg(&key)
                .arg("{}")
                .query_async(&mut conn)
                .await,
            "write a pillar record",
        );
        let read: redis::RedisResult<Option<String>> =
            redis::cmd("GET").arg(&key).query_async(&mut conn).await;
        assert!(read.is_ok(), "an agent reads {key}: {read:?}");
    }
    refused(
        redis::cmd("DEL")
            .arg("maid:registry")
            .query_async(&mut conn)
            .await,
        "delete the registry",
    );
    refused(
        redis::cmd("EXPIRE")
            .arg("maid:registry")
            .arg(0)
            .query_async(&mut conn)
            .await,
        "expire the registry",
    );
    // A job's description (its load) is the master's word alone.
    refused(
        redis::cmd("SET")
            .arg(maid_master::jobcache::load_key("1"))
            .arg("{\"fun\": \"test.ping\"}")
            .query_async(&mut conn)
            .await,
        "describe a job",
    );
    refused(
        redis::cmd("ZADD")
            .arg(maid_master::jobcache::INDEX_KEY)
            .arg(1)
            .arg("1")
            .query_async(&mut conn)
            .await,
        "list a job",
    );
    let mut pubsub = agent.get_async_pubsub().await.unwrap();
    let e = pubsub
        .subscribe("master-other")
        .await
        .expect_err("hear another master");
    assert!(e.to_string().to_lowercase().contains("noperm"), "{e}");
    // What it must do still works.
    let _: i64 = redis::cmd("PUBLISH")
        .arg("maid.reply.1.x")
        .arg("{}")
        .query_async(&mut conn)
        .await
        .expect("publish a reply");
    let _: Option<String> = redis::cmd("HGET")
        .arg("maid:file:index")
        .arg("motd")
        .query_async(&mut conn)
        .await
        .expect("read the file store");
    // Without a credential: nothing.
    let anonymous = redis::Client::open(format!("redis://127.0.0.1:{}/", server.port())).unwrap();
    let mut anon = anonymous.get_multiplexed_async_connection().await.unwrap();
    let e = redis::cmd("PING")
        .query_async::<String>(&mut anon)
        .await
        .expect_err("the default user is off");
    assert!(e.to_string().to_lowercase().contains("noauth"), "{e}");
}

/// `maid acl --maid`: each maid its own Redis user, which may write and
/// expire its own alive key and syndic list and only `HSET` the registry
/// and the job cache. Holding `acl-a`'s credential, nobody can expire or
/// overwrite `acl-b`'s alive key, list or cached returns, or the registry;
/// the fleet still runs, and the returns `acl-a` stored without a TTL are
/// ended by the master once their job leaves the index.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_maid_with_a_user_of_its_own_expires_no_other_key() {
    let (_dir, aclfile, server) = acl_server();
    let rules = maid_acl(&[
        "--master-topic",
        TOPIC,
        "--maid",
        "acl-a",
        "--maid",
        "acl-b",
    ]);
    let password_a = maid_acl(&["--password-for", "acl-a"]).trim().to_string();
    let password_b = maid_acl(&["--password-for", "acl-b"]).trim().to_string();
    assert_eq!(password_a.len(), 64, "{password_a}");
    assert_ne!(password_a, password_b);
    assert!(
        !rules.contains(&password_a) && !rules.contains(AGENT_PW),
        "{rules}"
    );
    // The test's own eyes, beside the generated users: it reads TTLs.
    let admin_rule = "user test-admin on >test-admin-password ~* &* +@all\n";
    std::fs::write(&aclfile, format!("{rules}{admin_rule}")).unwrap();
    let mut admin = server.client().get_connection().unwrap();
    let loaded: redis::RedisResult<()> = redis::cmd("ACL").arg("LOAD").query(&mut admin);
    assert!(loaded.is_ok(), "{loaded:?}\n{rules}");
    let url = |user: &str, pw: &str| format!("redis://{user}:{pw}@127.0.0.1:{}/", server.port());
    let master = maid_bus::RedisConfig {
        url: Some(url("maid-master", MASTER_PW)),
        ..Default::default()
    };
    let as_maid = |id: &str, pw: &str| maid_bus::RedisConfig {
        url: Some(url(&format!("maid-agent.{id}"), pw)),
        ..Default::default()
    };
    // The fleet runs on the maids' own users; the shared one is not there.
    let _a = ping_round_trip(&as_maid("acl-a", &password_a), &master, "acl-a").await;
    let shared = redis::Client::open(url("maid-agent", AGENT_PW)).unwrap();
    assert!(shared.get_multiplexed_async_connection().await.is_err());
    // One maid's password is not another's.
    let wrong = redis::Client::open(url("maid-agent.acl-b", &password_a)).unwrap();
    assert!(wrong.get_multiplexed_async_connection().await.is_err());

    let master_bus = Bus::new(&master).unwrap();
    let mut m = redis::Client::open(url("test-admin", "test-admin-password"))
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let _: () = m.set_ex("maid:alive:acl-b", 1, 600).await.unwrap();
    let _: () = m.set_ex("maid:syndic:acl-b", "[]", 600).await.unwrap();
    let _: i64 = m.hset("maid:job:other", "acl-b", "{}").await.unwrap();
    let _: bool = m.expire("maid:job:other", 600).await.unwrap();

    let a = redis::Client::open(url("maid-agent.acl-a", &password_a)).unwrap();
    let mut conn = a.get_multiplexed_async_connection().await.unwrap();
    for (what, cmd) in [
        (
            "expire another maid's alive key",
            redis::cmd("EXPIRE").arg("maid:alive:acl-b").arg(0).clone(),
        ),
        (
            "overwrite another maid's alive key",
            redis::cmd("SET").arg("maid:alive:acl-b").arg(1).clone(),
        ),
        (
            "expire another maid's list",
            redis::cmd("EXPIRE").arg("maid:syndic:acl-b").arg(0).clone(),
        ),
        (
            "write another maid's list",
            redis::cmd("SET").arg("maid:syndic:acl-b").arg("{}").clone(),
        ),
        (
            "expire cached returns",
            redis::cmd("EXPIRE").arg("maid:job:other").arg(0).clone(),
        ),
        (
            "expire the registry",
            redis::cmd("EXPIRE").arg("maid:registry").arg(0).clone(),
        ),
        (
            "delete cached returns",
            redis::cmd("DEL").arg("maid:job:other").clone(),
        ),
        (
            "delete a field of the registry",
            redis::cmd("HDEL").arg("maid:registry").arg("acl-b").clone(),
        ),
        (
            "append to another maid's audit stream",
            redis::cmd("XADD")
                .arg("maid:audit:acl-b")
                .arg("*")
                .arg("line")
                .arg("{}")
                .clone(),
        ),
        (
            "read its own audit stream",
            redis::cmd("XRANGE")
                .arg("maid:audit:acl-a")
                .arg("-")
                .arg("+")
                .clone(),
        ),
        (
            "trim its own audit stream",
            redis::cmd("XTRIM")
                .arg("maid:audit:acl-a")
                .arg("MAXLEN")
                .arg(0)
                .clone(),
        ),
        (
            "delete its own audit stream",
            redis::cmd("DEL").arg("maid:audit:acl-a").clone(),
        ),
    ] {
        let e = cmd
            .query_async::<redis::Value>(&mut conn)
            .await
            .expect_err(what);
        assert!(
            e.to_string().to_lowercase().contains("noperm"),
            "{what}: {e}"
        );
    }
    let ttl: i64 = m.ttl("maid:alive:acl-b").await.unwrap();
    assert!(ttl > 0, "{ttl}");
    let ttl: i64 = m.ttl("maid:job:other").await.unwrap();
    assert!(ttl > 0, "{ttl}");
    // Its own keys it keeps, and it appends to its own audit stream,
    // which the master reads.
    let _: bool = redis::cmd("EXPIRE")
        .arg("maid:alive:acl-a")
        .arg(30)
        .query_async(&mut conn)
        .await
        .expect("expire its own alive key");
    let _: String = redis::cmd("XADD")
        .arg("maid:audit:acl-a")
        .arg("MAXLEN")
        .arg("~")
        .arg(1000)
        .arg("*")
        .arg("line")
        .arg("{\"seq\":1}")
        .query_async(&mut conn)
        .await
        .expect("append to its own audit stream");
    let mut master_conn = master_bus.connect().await.unwrap();
    let filter = maid_master::audit::Query::default().resolve_now().unwrap();
    let read = maid_master::audit::read(&mut master_conn, &filter)
        .await
        .expect("the master reads the streams");
    assert_eq!(read, vec![json!({"seq": 1})]);

    // Its returns were stored without a TTL (it may not set one) ...
    let index: Vec<String> = m
        .zrange(maid_master::jobcache::INDEX_KEY, 0, -1)
        .await
        .unwrap();
    assert_eq!(index.len(), 1, "{index:?}");
    let returns = format!("maid:job:{}", index[0]);
    let held: BTreeSet<String> = m.hkeys(&returns).await.unwrap();
    assert_eq!(held, BTreeSet::from(["acl-a".to_string()]));
    let ttl: i64 = m.ttl(&returns).await.unwrap();
    assert_eq!(ttl, -1);
    // ... and end when their job leaves the index: aged past the window,
    // the next job the master publishes sweeps them.
    let _: i64 = m
        .zadd(maid_master::jobcache::INDEX_KEY, &index[0], 1.0)
        .await
        .unwrap();
    let _: i64 = m
        .zadd(maid_master::jobcache::INDEX_KEY, "other", 1.0)
        .await
        .unwrap();
    let report = run(
        &master_bus,
        &request("acl-a", "glob", "test.ping", json!([]), json!({})),
    )
    .await;
    assert_eq!(report.returns.len(), 1, "{report:?}");
    let kept: bool = m.exists(&returns).await.unwrap();
    assert!(!kept, "{returns} outlived its job's window");
    // The other aged job's returns, which had a TTL, keep it.
    let kept: bool = m.exists("maid:job:other").await.unwrap();
    assert!(kept);
}

/// The PEM files of a certificate and its key.
struct Pem {
    cert: std::path::PathBuf,
    key: std::path::PathBuf,
}

/// A CA `name`: its certificate, its key, and the certificate's PEM file.
fn ca(dir: &Path, name: &str) -> (rcgen::Certificate, rcgen::KeyPair, std::path::PathBuf) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    let cert = params.self_signed(&key).unwrap();
    let path = dir.join(format!("{name}.pem"));
    std::fs::write(&path, cert.pem()).unwrap();
    (cert, key, path)
}

/// A certificate for `names` and use `usage`, signed by `ca`.
fn leaf(
    dir: &Path,
    name: &str,
    names: &[&str],
    usage: rcgen::ExtendedKeyUsagePurpose,
    (ca, ca_key): (&rcgen::Certificate, &rcgen::KeyPair),
) -> Pem {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params =
        rcgen::CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .unwrap();
    params.extended_key_usages = vec![usage];
    let cert = params.signed_by(&key, ca, ca_key).unwrap();
    let pem = Pem {
        cert: dir.join(format!("{name}.pem")),
        key: dir.join(format!("{name}.key")),
    };
    std::fs::write(&pem.cert, cert.pem()).unwrap();
    std::fs::write(&pem.key, key.serialize_pem()).unwrap();
    pem
}

/// The fleet over TLS, as production runs it: a `rediss://` url, the
/// server's certificate verified against the operator's CA (IP included),
/// and a client certificate the server requires. A client that trusts
/// other roots, or brings no client certificate, gets no connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleet_round_trip_works_over_verified_tls() {
    use rcgen::ExtendedKeyUsagePurpose::{ClientAuth, ServerAuth};
    let dir = tempfile::tempdir().unwrap();
    let (ca_cert, ca_key, ca_pem) = ca(dir.path(), "fleet-ca");
    let (other_cert, other_key, other_pem) = ca(dir.path(), "other-ca");
    let server_pem = leaf(
        dir.path(),
        "server",
        &["127.0.0.1", "localhost"],
        ServerAuth,
        (&ca_cert, &ca_key),
    );
    let client = leaf(
        dir.path(),
        "client",
        &["maid"],
        ClientAuth,
        (&ca_cert, &ca_key),
    );
    let stranger = leaf(
        dir.path(),
        "stranger",
        &["maid"],
        ClientAuth,
        (&other_cert, &other_key),
    );
    let tls_port = crate::common::redis::free_port();
    let arg = |p: &Path| p.to_str().unwrap().to_string();
    let (port, cert, key, ca_file) = (
        tls_port.to_string(),
        arg(&server_pem.cert),
        arg(&server_pem.key),
        arg(&ca_pem),
    );
    let _server = RedisServer::start_with(&[
        "--tls-port",
        &port,
        "--tls-cert-file",
        &cert,
        "--tls-key-file",
        &key,
        "--tls-ca-cert-file",
        &ca_file,
        "--tls-auth-clients",
        "yes",
    ]);
    let tls = |ca: Option<&Path>, pem: Option<&Pem>| maid_bus::RedisConfig {
        url: Some(format!("rediss://127.0.0.1:{tls_port}/")),
        tls_ca: ca.map(Path::to_path_buf),
        tls_cert: pem.map(|p| p.cert.clone()),
        tls_key: pem.map(|p| p.key.clone()),
        ..Default::default()
    };
    let good = tls(Some(&ca_pem), Some(&client));
    let _agent = ping_round_trip(&good, &good, "tls-a").await;

    // The server's certificate is checked: another CA's trust fails.
    for (what, config) in [
        (
            "a client trusting another CA",
            tls(Some(&other_pem), Some(&client)),
        ),
        ("a client without a certificate", tls(Some(&ca_pem), None)),
        (
            "a client with another CA's certificate",
            tls(Some(&ca_pem), Some(&stranger)),
        ),
    ] {
        let bus = Bus::new(&config).unwrap();
        let connected = async {
            let mut conn = bus.connect().await?;
            let pong: String = redis::cmd("PING").query_async(&mut conn).await?;
            anyhow::Ok(pong)
        };
        assert!(connected.await.is_err(), "{what} was let in");
    }
}

/// An agent `id` on `agent`'s Redis settings answers `test.ping` from a
/// master on `master`'s; the agent, to keep it running.
async fn ping_round_trip(
    agent: &maid_bus::RedisConfig,
    master: &maid_bus::RedisConfig,
    id: &str,
) -> Agent {
    let running = start_agent(agent, id, "");
    let bus = Bus::new(master).unwrap();
    wait_registered(&bus, &[id]).await;
    let report = run(
        &bus,
        &request("*", "glob", "test.ping", json!([]), json!({})),
    )
    .await;
    let returned: Vec<(&str, &Value)> = report
        .returns
        .iter()
        .map(|r| (r.id.as_str(), &r.ret))
        .collect();
    assert_eq!(returned, [(id, &json!(true))], "{report:?}");
    running
}

/// `POST /keys` as salt-api's key bootstrap: credentials in the body and
/// `@wheel` needed; the answer a tar that, unpacked into a new maid's
/// `state_dir`, is the identity it starts with, already accepted (no
/// pending or denied entry appears); asked again, empty files and the
/// key kept; with `force`, a new key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_keys_gives_a_new_maid_its_accepted_identity() {
    use std::os::unix::fs::PermissionsExt;

    let server = RedisServer::start();
    let url = server.url();
    let bus = Bus::new(&server.config()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let pki = dir.path().join("pki");
    let api_dir = tempfile::tempdir().unwrap();
    let config = api_dir.path().join("maid.toml");
    let hash = maid_master::api::auth::hash_password("pw").unwrap();
    std::fs::write(
        &config,
        format!(
            "master_topics = [\"{TOPIC}\"]\n[redis]\nurl = \"{url}\"\n\
             [master]\npki_dir = {pki:?}\n\
             [api.users]\nadmin = \"{hash}\"\nintern = \"{hash}\"\n\
             [api.perms]\nadmin = [\"@wheel\"]\nintern = [\".*\"]\n"
        ),
    )
    .unwrap();
    let api = crate::api::start_api(api_dir, &config, &[]);
    let c = reqwest::Client::new();
    let post = |form: Vec<(&'static str, &'static str)>| {
        let request = c.post(format!("{}/keys", api.url)).form(&form);
        async move { request.send().await.unwrap() }
    };
    let creds =
        |user: &'static str| vec![("username", user), ("password", "pw"), ("mid", "boot-1")];

    assert_eq!(post(vec![("mid", "boot-1")]).await.status(), 401);
    assert_eq!(post(creds("intern")).await.status(), 403);
    let no_mid = post(vec![("username", "admin"), ("password", "pw")]).await;
    assert_eq!(no_mid.status(), 400);
    let bad_mid = post(vec![
        ("username", "admin"),
        ("password", "pw"),
        ("mid", "../boot-1"),
    ])
    .await;
    assert_eq!(bad_mid.status(), 400);
    assert!(!pki.join("minions/boot-1").exists());
    assert!(!dir.path().join("boot-1").exists());

    let r = post(creds("admin")).await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/x-tar");
    assert_eq!(
        r.headers()["content-disposition"],
        "attachment; filename=\"saltkeys-boot-1.tar\""
    );
    let tarball = dir.path().join("boot-1.tar");
    std::fs::write(&tarball, r.bytes().await.unwrap()).unwrap();
    // Unpacked as an operator would, into the new maid's state_dir.
    let state = dir.path().join("state-boot-1");
    std::fs::create_dir_all(&state).unwrap();
    let untar = Command::new("tar")
        .arg("-C")
        .arg(&state)
        .arg("-xf")
        .arg(&tarball)
        .status()
        .unwrap();
    assert!(untar.success());
    let mode = std::fs::metadata(state.join("minion.key"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let public = std::fs::read_to_string(state.join("minion.pub")).unwrap();
    assert_eq!(
        maid_agent::trust::encode_verifying(&Pki::new(&pki).accepted().unwrap()["boot-1"]),
        public.trim()
    );

    let _agent = keyed_agent(&server, "boot-1", dir.path());
    wait_registered(&bus, &["boot-1"]).await;
    assert_eq!(
        stdout(&maid_key(&url, &pki, &["-L"], "")),
        "Accepted Keys:\nboot-1\nDenied Keys:\nUnaccepted Keys:\nRejected Keys:\n"
    );
    // The maid kept the key it was given.
    assert_eq!(
        std::fs::read_to_string(state.join("minion.pub")).unwrap(),
        public
    );

    // Again: empty files, the key kept.
    let again = post(creds("admin")).await.bytes().await.unwrap();
    let sizes: Vec<u64> = tar::Archive::new(&again[..])
        .entries()
        .unwrap()
        .map(|e| e.unwrap().size())
        .collect();
    assert_eq!(sizes, [0, 0]);
    let accepted = |pki: &Path| {
        maid_agent::trust::encode_verifying(&Pki::new(pki).accepted().unwrap()["boot-1"])
    };
    assert_eq!(accepted(&pki), public.trim());
    // With force, a new key replaces it.
    let mut forced = creds("admin");
    forced.push(("force", "true"));
    assert_eq!(post(forced).await.status(), 200);
    assert_ne!(accepted(&pki), public.trim());
}
