//! Pillar delivered as PROTOCOL §8 says, end to end: a master with
//! `pillar_roots` and accepted keys, maids with keys of their own. Each
//! maid reads only its own pillar; every byte Redis saw during the
//! deliveries (MONITOR: every command, every published job and reply)
//! holds no pillar value; another maid's key opens no other's record; a
//! plugin without the `pillar` grant is refused; `-I` is evaluated on the
//! master and reaches the maids as a list; `maid pillar` shows what a
//! minion receives; a syndic maid hands the sealed record of a maid
//! beneath it down, and neither Redis sees the value.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use redis::AsyncCommands;
use serde_json::{Value, json};

use crate::common::fleet::{Agent, maid_cli, start_agent, wait_registered};
use maid_bus::Bus;
use maid_protocol::pillar::{self, PillarRecord};
use maid_testkit::redis::RedisServer;
use maid_testkit::wire::TOPIC;

/// The secrets: each in one maid's pillar only. `-` never occurs in
/// base64, so a sealed box cannot spell one by chance.
const ONE: &str = "s3cret-for-pd-one";
const TWO: &str = "s3cret-for-pd-two";
const INLINE: &str = "inline-s3cret-zz";

/// `maid` as the master, with its config file.
pub(crate) struct Master<'a> {
    pub(crate) url: String,
    pub(crate) dir: &'a Path,
}

impl Master<'_> {
    pub(crate) fn run(&self, args: &[&str]) -> (i32, String, String) {
        let config = self.dir.join("master.toml");
        let mut words: Vec<&str> = args.to_vec();
        words.extend(["-c", config.to_str().unwrap()]);
        let o = maid_cli(&self.url, &words, self.dir);
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }

    /// `maid run ARGS --out json --static`, read.
    pub(crate) fn json(&self, args: &[&str]) -> Value {
        let mut words = args.to_vec();
        words.extend(["--out", "json", "--static"]);
        let (code, out, err) = self.run(&words);
        serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("maid {args:?} ({code}): {e}\n{out}\n{err}"))
    }
}

pub(crate) fn write(root: &Path, files: &[(&str, &str)]) {
    for (path, text) in files {
        let full = root.join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, text).unwrap();
    }
}

/// A maid that requires signed jobs, with a key of its own; `grant`: its
/// pillar plugin may read pillar.
pub(crate) fn agent(server: &RedisServer, dir: &Path, id: &str, grant: bool) -> Agent {
    let state = dir.join(format!("state-{id}"));
    let public = dir.join("master.pub");
    let grant = if grant {
        "[plugins.pillar]\npillar = true\n"
    } else {
        ""
    };
    let toml = format!(
        "[grains]\nrole = \"{id}\"\n{grant}\n[security]\nrequire_signed = true\n\
         trusted_keys = [{public:?}]\nstate_dir = {state:?}\n\
         [audit]\npath = {:?}\n",
        state.join("audit.jsonl")
    );
    start_agent(&server.config(), id, &toml)
}

/// Everything Redis is sent while it runs, as `redis-cli monitor` prints.
struct Monitor {
    child: Child,
    log: PathBuf,
}

impl Monitor {
    fn start(port: u16, log: PathBuf) -> Monitor {
        let child = Command::new("redis-cli")
            .args(["-p", &port.to_string(), "monitor"])
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-cli: apt-get install redis-tools");
        // MONITOR takes effect once redis-cli is connected.
        std::thread::sleep(std::time::Duration::from_millis(500));
        Monitor { child, log }
    }

    fn stop(mut self) -> String {
        std::thread::sleep(std::time::Duration::from_millis(300));
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::fs::read_to_string(&self.log).unwrap()
    }
}

/// Every job published on the master topic from now on, opened (the
/// payload of a signed envelope).
async fn published_jobs(server: &RedisServer) -> std::sync::Arc<std::sync::Mutex<Vec<Value>>> {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let client = server.client();
    let (ready_tx, ready) = tokio::sync::oneshot::channel();
    let into = seen.clone();
    tokio::spawn(async move {
        let mut pubsub = client.get_async_pubsub().await.unwrap();
        pubsub.subscribe(TOPIC).await.unwrap();
        ready_tx.send(()).unwrap();
        let mut messages = pubsub.into_on_message();
        while let Some(msg) = futures_util::StreamExt::next(&mut messages).await {
            let v: Value = serde_json::from_slice(msg.get_payload_bytes()).unwrap();
            let job = match v.get("payload").and_then(Value::as_str) {
                Some(p) => serde_json::from_str(p).unwrap(),
                None => v,
            };
            into.lock().unwrap().push(job);
        }
    });
    ready.await.unwrap();
    seen
}

/// The master's key, its `pillar_roots` (holding `files`) and config in
/// `dir`.
pub(crate) fn master_with(dir: &Path, url: &str, files: &[(&str, &str)]) {
    let o = maid_cli(url, &["keygen", dir.join("master").to_str().unwrap()], dir);
    assert!(o.status.success(), "{o:?}");
    let root = dir.join("pillar");
    write(&root, files);
    std::fs::write(
        dir.join("master.toml"),
        format!(
            "master_topics = [\"{TOPIC}\"]\n[master]\nkey = {:?}\npki_dir = {:?}\n\
             pillar_roots = [{root:?}]\n",
            dir.join("master.key"),
            dir.join("pki"),
        ),
    )
    .unwrap();
}

/// The master of these tests: a secret for each of two maids.
fn master_in(dir: &Path, url: &str) {
    master_with(
        dir,
        url,
        &[
            (
                "top.sls",
                "base:\n  '*':\n    - common\n  'pd-one':\n    - one\n  'pd-two':\n    - two\n",
            ),
            ("common.sls", "site: lab\nrole: {{ grains['role'] }}\n"),
            (
                "one.sls",
                &format!("secret: {ONE}\ndb:\n  user: app\n  tier: front\n"),
            ),
            (
                "two.sls",
                &format!("secret: {TWO}\ndb:\n  user: app\n  tier: back\n"),
            ),
        ],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_maid_opens_only_its_own_pillar_and_redis_never_sees_one() {
    let server = RedisServer::start();
    let bus = Bus::new(&server.config()).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    master_in(dir, &server.url());
    let master = Master {
        url: server.url(),
        dir,
    };
    let _agents = [
        agent(&server, dir, "pd-one", true),
        agent(&server, dir, "pd-two", true),
        agent(&server, dir, "pd-nogrant", false),
    ];
    wait_registered(&bus, &["pd-one", "pd-two", "pd-nogrant"]).await;
    let (code, _, err) = master.run(&["key", "-A", "-y"]);
    assert_eq!(code, 0, "{err}");

    let monitor = Monitor::start(server.port(), dir.join("monitor.log"));
    let jobs = published_jobs(&server).await;
    assert_eq!(
        master.json(&["run", "pd-one,pd-two", "-L", "pillar.ls"]),
        json!({"pd-one": ["site", "role", "secret", "db"],
               "pd-two": ["site", "role", "secret", "db"]})
    );
    // Inline pillar, merged over the compiled as Salt merges it (its keys
    // first: Salt starts from it), sealed in the job.
    let inline = format!("pillar={{\"db\": {{\"extra\": \"{INLINE}\"}}}}");
    assert_eq!(
        master.json(&["run", "pd-two", "pillar.keys", "db", &inline]),
        json!({"pd-two": ["extra", "user", "tier"]})
    );
    // `-I`: the master's pillar decides; the maids see a list.
    assert_eq!(
        master.json(&["run", "-I", "db:tier:back", "test.ping"]),
        json!({"pd-two": true})
    );
    assert_eq!(
        master.json(&["run", "-C", "I@db:tier:fr* or pd-nogrant", "test.ping"]),
        json!({"pd-one": true, "pd-nogrant": true})
    );
    // Without the grant: refused, though the job carried its pillar.
    let (code, out, _) = master.run(&["run", "pd-nogrant", "pillar.ls"]);
    assert!(
        out.contains("Denied: pillar is not granted to this plugin"),
        "{code}: {out}"
    );
    // Each maid reads its own values (its return sealed to the master:
    // only the master reads it); inline pillar merges over them.
    assert_eq!(
        master.json(&["run", "pd-one,pd-two", "-L", "pillar.items", "unmask=True"]),
        json!({
            "pd-one": {"site": "lab", "role": "pd-one", "secret": ONE,
                       "db": {"user": "app", "tier": "front"}},
            "pd-two": {"site": "lab", "role": "pd-two", "secret": TWO,
                       "db": {"user": "app", "tier": "back"}},
        })
    );
    assert_eq!(
        master.json(&["run", "pd-one", "pillar.get", "db:tier", "unmask=True"]),
        json!({"pd-one": "front"})
    );
    let inline = format!("pillar={{\"db\": {{\"tier\": \"{INLINE}\"}}}}");
    assert_eq!(
        master.json(&[
            "run",
            "pd-two",
            "pillar.item",
            "db",
            "secret",
            &inline,
            "unmask=True"
        ]),
        json!({"pd-two": {"db": {"user": "app", "tier": INLINE}, "secret": TWO}})
    );

    // The job cache holds them sealed; the master's key opens them there.
    let jid = {
        let jobs = jobs.lock().unwrap();
        let items = jobs.iter().find(|j| j["fun"] == "pillar.items").unwrap();
        items["jid"].as_str().unwrap().to_string()
    };
    let (code, out, err) = master.run(&["job", &jid, "--out", "json"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(ONE) && out.contains(TWO), "{out}");
    let seen = monitor.stop();
    assert!(
        seen.contains("maid:pillar:pd-one"),
        "MONITOR saw no delivery:\n{seen}"
    );
    // The `-I` job went out as the ids the master selected.
    let jobs = jobs.lock().unwrap().clone();
    let pinged: Vec<&Value> = jobs.iter().filter(|j| j["fun"] == "test.ping").collect();
    assert_eq!(pinged[0]["tgt"], json!(["pd-two"]), "{pinged:?}");
    assert_eq!(pinged[0]["tgt_type"], json!("list"));
    // Pillar jobs pin a record per maid; the inline one carries it sealed.
    let items = jobs.iter().find(|j| j["fun"] == "pillar.ls").unwrap();
    assert_eq!(
        items["pillar"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["pd-one", "pd-two"]
    );
    let item = jobs.iter().find(|j| j["fun"] == "pillar.keys").unwrap();
    assert!(item["pillar_inline"]["pd-two"].is_string(), "{item}");
    assert!(item["kwarg"].get("pillar").is_none(), "{item}");
    // The maid's record names the pinned record it used, never a value.
    let audit = std::fs::read_to_string(dir.join("state-pd-one/audit.jsonl")).unwrap();
    let ls = audit
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|r| r["fun"] == "pillar.ls" && r["decision"] == "ran")
        .unwrap_or_else(|| panic!("no pillar.ls record in {audit}"));
    assert_eq!(ls["pillar_sha256"], items["pillar"]["pd-one"], "{ls}");
    for secret in [ONE, TWO, INLINE] {
        assert!(!audit.contains(secret), "the audit log holds {secret:?}");
    }
    for secret in [ONE, TWO, INLINE, "db:tier:back", "tier:fr", "back", "front"] {
        assert!(
            !seen.contains(secret),
            "{secret:?} crossed Redis in plaintext:\n{seen}"
        );
    }
    // At rest too: no key Redis holds spells one.
    let mut conn = bus.connect().await.unwrap();
    let keys: Vec<String> = conn.keys("*").await.unwrap();
    for key in &keys {
        let dumped: Option<Vec<u8>> = redis::cmd("DUMP")
            .arg(key)
            .query_async(&mut conn)
            .await
            .unwrap();
        let text = String::from_utf8_lossy(&dumped.unwrap_or_default()).into_owned();
        for secret in [ONE, TWO, INLINE] {
            assert!(!text.contains(secret), "{key} holds {secret:?}");
        }
    }

    // pd-one's record: signed by the master, sealed to pd-one alone.
    let record: String = conn.get(pillar::record_key("pd-one")).await.unwrap();
    let envelope: Value = serde_json::from_str(&record).unwrap();
    let rec: PillarRecord = serde_json::from_str(envelope["payload"].as_str().unwrap()).unwrap();
    let sealed = B64.decode(&rec.sealed).unwrap();
    let key_of = |id: &str| {
        maid_protocol::trust::read_signing_key(&dir.join(format!("state-{id}/minion.key"))).unwrap()
    };
    let opened = pillar::open(&sealed, &key_of("pd-one")).unwrap();
    assert_eq!(opened["secret"], json!(ONE));
    for other in ["pd-two", "pd-nogrant"] {
        assert!(
            matches!(
                pillar::open(&sealed, &key_of(other)),
                Err(pillar::PillarError::Open)
            ),
            "{other} opened pd-one's pillar"
        );
    }
    // A maid without an accepted key gets none, and none is stored for it.
    let none: Option<String> = conn.get(pillar::record_key("pd-ghost")).await.unwrap();
    assert!(none.is_none());

    // `maid pillar`: what the master compiles, shown on the master alone.
    let (code, out, err) = master.run(&["pillar", "pd-two", "--out", "json"]);
    assert_eq!(code, 0, "{err}");
    let shown: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(shown["pd-two"]["secret"], json!(TWO));
}

/// A secret of the maid beneath the syndic maid.
const LEAF: &str = "s3cret-of-the-leaf";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_syndic_maid_hands_sealed_pillar_down_and_reads_none_of_it() {
    let (top, low) = (RedisServer::start(), RedisServer::start());
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let leaf_sls = format!("secret: {LEAF}\n");
    master_with(
        dir,
        &top.url(),
        &[
            ("top.sls", "base:\n  'leaf-*':\n    - leaf\n"),
            ("leaf.sls", &leaf_sls),
        ],
    );
    let master = Master {
        url: top.url(),
        dir,
    };
    let public = dir.join("master.pub");
    let signed = |id: &str| {
        let state = dir.join(format!("state-{id}"));
        format!(
            "[plugins.pillar]\npillar = true\n[security]\nrequire_signed = true\n\
             trusted_keys = [{public:?}]\nstate_dir = {state:?}\n"
        )
    };
    let _leaf = start_agent(&low.config(), "leaf-1", &signed("leaf-1"));
    let syndic_toml = format!("{}{}", crate::syndic::syndic(&low), signed("syn-1"));
    let _syndic = start_agent(&top.config(), "syn-1", &syndic_toml);
    wait_registered(&Bus::new(&low.config()).unwrap(), &["leaf-1"]).await;
    wait_registered(&Bus::new(&top.config()).unwrap(), &["syn-1"]).await;
    // The syndic maid's key (with its role), then the key of the maid
    // its list vouches for.
    let (code, _, err) = master.run(&["key", "-A", "-y"]);
    assert_eq!(code, 0, "{err}");
    crate::syndic::wait_beneath(&top, "syn-1", &["leaf-1"]).await;
    let (code, out, err) = master.run(&["key", "-A", "-y"]);
    assert_eq!(code, 0, "{err}");
    let (_, listed, _) = master.run(&["key", "-L"]);
    assert!(listed.contains("leaf-1"), "{out}{listed}");

    let above = Monitor::start(top.port(), dir.join("above.log"));
    let below = Monitor::start(low.port(), dir.join("below.log"));
    assert_eq!(
        master.json(&["run", "leaf-1", "pillar.items", "unmask=True"]),
        json!({"leaf-1": {"secret": LEAF}})
    );
    for (side, seen) in [("above", above.stop()), ("below", below.stop())] {
        assert!(
            seen.contains("maid:pillar:leaf-1"),
            "{side}: no record:\n{seen}"
        );
        assert!(
            !seen.contains(LEAF),
            "{side}: the leaf's secret in plaintext:\n{seen}"
        );
    }
}
