//! Syndic maids (PROTOCOL §7): a maid that answers for the maids beneath
//! it, each level on a Redis of its own. The master publishes once on the
//! top Redis; each syndic maid PINGs with the targeted minions beneath it,
//! relays the job down and the replies up; the master tells missed maids
//! (a syndic that never pinged) from missed minions (a maid beneath that
//! never returned). Real agents, real `redis-server`s, the real `maid`.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use serde_json::{Value, json};

use crate::common::fleet::{Agent, TOPIC, maid_cli, request, run, start_agent, wait_registered};
use crate::common::redis::RedisServer;
use maid_bus::Bus;
use maid_master::jobs::Report;

/// The `[syndic]` table of a syndic maid whose maids beneath use
/// `downstream`.
pub(crate) fn syndic(downstream: &RedisServer) -> String {
    format!(
        "[syndic]\nrefresh_secs = 0.2\n[syndic.redis]\nurl = \"{}\"\n",
        downstream.url()
    )
}

/// Wait until syndic maid `id` lists `ids` beneath it on `top`.
pub(crate) async fn wait_beneath(top: &RedisServer, id: &str, ids: &[&str]) {
    let mut conn = top
        .client()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text: Option<String> = conn.get(format!("maid:syndic:{id}")).await.unwrap();
        // Bare, or signed by the syndic maid's key (PROTOCOL v1.2 §7).
        let listed: Value = text.map_or(Value::Null, |t| {
            maid_agent::registry::read(&t).unwrap().value
        });
        if ids.iter().all(|i| listed.get(i).is_some()) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{id} never listed {ids:?}: {listed}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn set(ids: &[&str]) -> BTreeSet<String> {
    ids.iter().map(|s| s.to_string()).collect()
}

fn returned(r: &Report) -> BTreeSet<String> {
    r.returns.iter().map(|r| r.id.clone()).collect()
}

/// The maid that sent `id`'s return.
fn sent_by(r: &Report, id: &str) -> String {
    let ret = r.returns.iter().find(|r| r.id == id).expect("a return");
    ret.sub_ip.clone()
}

fn ping(tgt: &str, tgt_type: &str, timeout: u64) -> maid_master::jobs::JobRequest {
    let mut req = request(tgt, tgt_type, "test.ping", json!([]), json!({}));
    req.collect.timeout = Duration::from_secs(timeout);
    req
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn syndic_maids_answer_for_the_maids_beneath_and_misses_are_told_apart() {
    let top = RedisServer::start();
    let (r1, r2) = (RedisServer::start(), RedisServer::start());
    let bus = Bus::new(&top.config()).unwrap();
    let _l1a = start_agent(&r1.config(), "l1a", "[grains]\nrole = \"web\"\n");
    let mut l1b = start_agent(&r1.config(), "l1b", "[grains]\nrole = \"db\"\n");
    let _l2a = start_agent(&r2.config(), "l2a", "[grains]\nrole = \"web\"\n");
    let _s1 = start_agent(&top.config(), "s1", &syndic(&r1));
    let mut s2 = start_agent(&top.config(), "s2", &syndic(&r2));
    wait_registered(&Bus::new(&r1.config()).unwrap(), &["l1a", "l1b"]).await;
    wait_registered(&Bus::new(&r2.config()).unwrap(), &["l2a"]).await;
    wait_registered(&bus, &["s1", "s2"]).await;
    wait_beneath(&top, "s1", &["l1a", "l1b"]).await;
    wait_beneath(&top, "s2", &["l2a"]).await;

    // Everyone: the syndic maids and the maids beneath them.
    let r = run(&bus, &ping("*", "glob", 10)).await;
    let all = set(&["s1", "s2", "l1a", "l1b", "l2a"]);
    assert_eq!(r.expected, set(&["s1", "s2"]), "{r:?}");
    assert_eq!(r.targeted, all, "{r:?}");
    assert_eq!(returned(&r), all, "{r:?}");
    assert!(
        r.missed_maids.is_empty() && r.missed_minions.is_empty(),
        "{r:?}"
    );
    assert!(r.forged.is_empty() && r.repeated.is_empty(), "{r:?}");
    // A return from beneath comes up under its syndic maid.
    assert_eq!(sent_by(&r, "l1a"), "s1");
    assert_eq!(sent_by(&r, "l2a"), "s2");
    assert_eq!(sent_by(&r, "s1"), "s1");

    // A master written from PROTOCOL.md alone, in Python, drives them too.
    let got = crate::common::fleet::foreign_master(top.port(), "test.echo", &["from python"]).await;
    assert_eq!(got["pings"], json!({"s1": true, "s2": true}), "{got}");
    assert_eq!(
        got["minions"],
        json!({"s1": ["l1a", "l1b", "s1"], "s2": ["l2a", "s2"]}),
        "{got}"
    );
    let ids: BTreeSet<String> = got["returns"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(ids, all, "{got}");
    assert_eq!(got["returns"]["l2a"]["return"], "from python");

    // A grain target picks the maids beneath by their own grains.
    let r = run(&bus, &ping("role:web", "grain", 10)).await;
    assert_eq!(returned(&r), set(&["l1a", "l2a"]), "{r:?}");
    assert_eq!(r.targeted, set(&["l1a", "l2a"]), "{r:?}");
    assert!(r.empty.is_empty(), "{r:?}");

    // A target no maid beneath matches: each syndic maid is empty.
    let r = run(&bus, &ping("nobody*", "glob", 5)).await;
    assert_eq!(r.empty, set(&["s1", "s2"]), "{r:?}");
    assert!(r.targeted.is_empty() && r.returns.is_empty(), "{r:?}");
    // `maid run` checks first, with the lists of who is beneath, as Salt's
    // master checks its minions, and sends nothing.
    let dir = tempfile::tempdir().unwrap();
    let cli = |args: &[&str]| {
        let all = [args, &["--master-topic", TOPIC]].concat();
        maid_cli(&top.url(), &all, dir.path())
    };
    let out = cli(&["run", "nobody*", "test.ping"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "No minions matched the target. No command was sent, no jid was assigned.\n"
    );
    // ...and a maid beneath is a minion it can name.
    let out = cli(&["run", "l2a", "test.ping"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "l2a:\n    True\n");
    assert_eq!(out.status.code(), Some(0));

    // A maid beneath stops: a missed minion; its syndic maid is not missed.
    l1b.kill();
    let r = run(&bus, &ping("*", "glob", 3)).await;
    assert_eq!(r.missed_minions, set(&["l1b"]), "{r:?}");
    assert!(r.missed_maids.is_empty(), "{r:?}");
    assert_eq!(returned(&r), set(&["s1", "s2", "l1a", "l2a"]), "{r:?}");

    // A syndic maid stops: a missed maid. What is beneath it was never
    // listed, so it is not counted as missed minions.
    s2.kill();
    let r = run(&bus, &ping("*", "glob", 3)).await;
    assert_eq!(r.missed_maids, set(&["s2"]), "{r:?}");
    assert_eq!(r.missed_minions, set(&["l1b"]), "{r:?}");
    assert_eq!(returned(&r), set(&["s1", "l1a"]), "{r:?}");
    // The CLI's summary says the same, apart.
    let out = cli(&["run", "*", "test.ping", "-t", "3", "--summary"]);
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("missed maids: s2\n"), "{text}");
    assert!(text.contains("missed minions: l1b\n"), "{text}");
    assert_eq!(out.status.code(), Some(1), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_syndic_beneath_a_syndic_relays_three_levels() {
    let (top, mid, low) = (
        RedisServer::start(),
        RedisServer::start(),
        RedisServer::start(),
    );
    let bus = Bus::new(&top.config()).unwrap();
    let mut deep = start_agent(&low.config(), "deep", "");
    let _side = start_agent(&mid.config(), "side", "");
    // `mid-s` is a maid beneath `top-s` and a syndic maid itself.
    let mut mid_s = start_agent(&mid.config(), "mid-s", &syndic(&low));
    let _top_s = start_agent(&top.config(), "top-s", &syndic(&mid));
    wait_registered(&Bus::new(&low.config()).unwrap(), &["deep"]).await;
    wait_registered(&Bus::new(&mid.config()).unwrap(), &["side", "mid-s"]).await;
    wait_registered(&bus, &["top-s"]).await;
    wait_beneath(&top, "top-s", &["mid-s", "side", "deep"]).await;

    let r = run(&bus, &ping("*", "glob", 10)).await;
    let all = set(&["top-s", "mid-s", "side", "deep"]);
    assert_eq!(r.targeted, all, "{r:?}");
    assert_eq!(returned(&r), all, "{r:?}");
    assert!(
        r.missed_minions.is_empty() && r.missed_maids.is_empty(),
        "{r:?}"
    );
    assert_eq!(sent_by(&r, "deep"), "top-s");

    // Only the deepest maid.
    let r = run(&bus, &ping("deep", "glob", 10)).await;
    assert_eq!(r.targeted, set(&["deep"]), "{r:?}");
    assert_eq!(returned(&r), set(&["deep"]), "{r:?}");
    assert_eq!(r.returns[0].ret, json!(true));

    // The deepest maid stops: a missed minion, two levels down; no syndic
    // maid is missed.
    deep.kill();
    let r = run(&bus, &ping("*", "glob", 3)).await;
    assert_eq!(r.missed_minions, set(&["deep"]), "{r:?}");
    assert!(r.missed_maids.is_empty(), "{r:?}");
    assert_eq!(returned(&r), set(&["top-s", "mid-s", "side"]), "{r:?}");

    // The middle syndic maid stops: to the master, everything beneath
    // `top-s` is a minion, so it and what it answered for are missed
    // minions, and `top-s` (which pinged) is not a missed maid.
    mid_s.kill();
    let r = run(&bus, &ping("*", "glob", 3)).await;
    assert_eq!(r.missed_minions, set(&["mid-s", "deep"]), "{r:?}");
    assert!(r.missed_maids.is_empty(), "{r:?}");
    assert_eq!(returned(&r), set(&["top-s", "side"]), "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_maids_beneath_may_share_a_redis_cluster() {
    let top = RedisServer::start();
    let cluster = tokio::task::spawn_blocking(crate::common::redis::Cluster::start)
        .await
        .unwrap();
    let bus = Bus::new(&top.config()).unwrap();
    let below = cluster.config();
    let _leaves = [
        start_agent(&below, "cl-1", ""),
        start_agent(&below, "cl-2", ""),
    ];
    let nodes: Vec<String> = cluster.urls().iter().map(|u| format!("{u:?}")).collect();
    let toml = format!(
        "[syndic]\nrefresh_secs = 0.2\n[syndic.redis]\ncluster = [{}]\n",
        nodes.join(", ")
    );
    let _syndic = start_agent(&top.config(), "cl-s", &toml);
    wait_registered(&Bus::new(&below).unwrap(), &["cl-1", "cl-2"]).await;
    wait_registered(&bus, &["cl-s"]).await;
    wait_beneath(&top, "cl-s", &["cl-1", "cl-2"]).await;
    // The replies beneath go on sharded pub/sub there; the syndic maid
    // hears them as the master would.
    let r = run(&bus, &ping("cl-1,cl-2", "list", 10)).await;
    assert_eq!(r.targeted, set(&["cl-1", "cl-2"]), "{r:?}");
    assert_eq!(returned(&r), set(&["cl-1", "cl-2"]), "{r:?}");
    assert_eq!(sent_by(&r, "cl-2"), "cl-s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_maids_beneath_may_sit_behind_sentinel() {
    let top = RedisServer::start();
    let sentinel = tokio::task::spawn_blocking(crate::common::redis::Sentinel::start)
        .await
        .unwrap();
    let bus = Bus::new(&top.config()).unwrap();
    let below = maid_bus::RedisConfig {
        sentinels: sentinel.sentinel_urls(),
        service: Some(sentinel.service_name().to_string()),
        ..Default::default()
    };
    let _leaf = start_agent(&below, "sn-1", "");
    let toml = format!(
        "[syndic]\nrefresh_secs = 0.2\n[syndic.redis]\n{}",
        toml::to_string(&below).unwrap()
    );
    let _syndic = start_agent(&top.config(), "sn-s", &toml);
    wait_registered(&Bus::new(&below).unwrap(), &["sn-1"]).await;
    wait_registered(&bus, &["sn-s"]).await;
    wait_beneath(&top, "sn-s", &["sn-1"]).await;
    let r = run(&bus, &ping("sn-1", "glob", 10)).await;
    assert_eq!(r.targeted, set(&["sn-1"]), "{r:?}");
    assert_eq!(returned(&r), set(&["sn-1"]), "{r:?}");
    assert_eq!(sent_by(&r, "sn-1"), "sn-s");
}

/// Run `req` while publishing `message(jid)` ten times, 50 ms apart, on
/// its reply topic on `redis`: what someone who can publish there sends.
pub(crate) async fn run_injecting(
    bus: &Bus,
    req: &maid_master::jobs::JobRequest,
    redis: &RedisServer,
    message: impl Fn(&str) -> String,
) -> Report {
    let jid = maid_agent::jid::new_jid();
    let topic = maid_master::jobs::temp_topic(&jid);
    let replies = bus.replies(&topic).await.unwrap();
    let mut conn = bus.connect().await.unwrap();
    let job = tokio::spawn({
        let (jid, topic, req) = (jid.clone(), topic.clone(), req.clone());
        async move {
            maid_master::jobs::run_on(&mut conn, replies, jid, &topic, &req, |_| {})
                .await
                .unwrap()
        }
    });
    let mut conn = redis
        .client()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    for _ in 0..10 {
        let _: i64 = conn.publish(&topic, message(&jid)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    job.await.unwrap()
}

/// `maid key --pki-dir PKI -A -y`: accept every pending key.
pub(crate) fn accept_all(url: &str, pki: &Path) {
    let out = crate::common::maid_command()
        .args(["key", "--pki-dir"])
        .arg(pki)
        .args(["-A", "-y"])
        .env("MAID_REDIS", url)
        .env_remove("MAID_CONFIG")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_jobs_reach_the_maids_beneath_and_their_replies_verify_end_to_end() {
    let top = RedisServer::start();
    let low = RedisServer::start();
    let bus = Bus::new(&top.config()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let master = maid_agent::trust::generate().unwrap();
    let public = dir.path().join("master.pub");
    std::fs::write(
        &public,
        maid_agent::trust::encode_verifying(&master.verifying_key()),
    )
    .unwrap();
    // Every maid requires jobs signed by the master and signs its own
    // replies; the syndic maid holds no master key.
    let secure = |id: &str| {
        format!(
            "[security]\nrequire_signed = true\ntrusted_keys = [{public:?}]\nstate_dir = {:?}\n",
            dir.path().join(format!("state-{id}"))
        )
    };
    let agents: Vec<Agent> = vec![
        start_agent(&low.config(), "leaf-a", &secure("leaf-a")),
        start_agent(&low.config(), "leaf-b", &secure("leaf-b")),
        start_agent(
            &top.config(),
            "syn",
            &format!(
                "{}[audit]\npath = {:?}\n{}",
                secure("syn"),
                dir.path().join("audit-syn.jsonl"),
                syndic(&low)
            ),
        ),
    ];
    wait_registered(&Bus::new(&low.config()).unwrap(), &["leaf-a", "leaf-b"]).await;
    wait_registered(&bus, &["syn"]).await;
    wait_beneath(&top, "syn", &["leaf-a", "leaf-b"]).await;
    // The master accepts the keys of the syndic maid (with its role: it
    // was pending as a syndic maid's) and then, as listed by it, of the
    // maids beneath: `maid key` sees them all.
    let pki = dir.path().join("pki");
    accept_all(&top.url(), &pki);
    accept_all(&top.url(), &pki);
    let accepted = maid_master::pki::Pki::new(&pki).accepted().unwrap();
    assert_eq!(
        accepted.keys().cloned().collect::<BTreeSet<_>>(),
        set(&["syn", "leaf-a", "leaf-b"])
    );
    // `maid maids` shows the role its key was accepted with.
    let o = maid_cli(
        &top.url(),
        &["maids", "--json", "--pki-dir", pki.to_str().unwrap()],
        dir.path(),
    );
    let listed: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(listed[0]["id"], "syn", "{listed}");
    assert_eq!(listed[0]["role"], "syndic", "{listed}");

    let signed = |tgt: &str| {
        let mut req = request(tgt, "glob", "test.arg", json!(["signed"]), json!({}));
        req.key = Some(master.clone());
        req.collect.pki = Some(maid_master::pki::Pki::new(&pki));
        req.collect.timeout = Duration::from_secs(10);
        req
    };
    let r = run(&bus, &signed("*")).await;
    let all = set(&["syn", "leaf-a", "leaf-b"]);
    assert_eq!(returned(&r), all, "{r:?}");
    assert!(r.forged.is_empty() && r.rejected.is_empty(), "{r:?}");
    // A signed reply from beneath stays its maid's: the master verified
    // leaf-a's own signature.
    assert_eq!(sent_by(&r, "leaf-a"), "leaf-a");
    assert_eq!(sent_by(&r, "syn"), "syn");
    // The syndic maid's audit log says what it relayed, to whom, signed by
    // which key.
    let deadline = Instant::now() + Duration::from_secs(10);
    let (audit, relayed) = loop {
        let audit = std::fs::read_to_string(dir.path().join("audit-syn.jsonl")).unwrap_or_default();
        let relayed: Vec<Value> = audit
            .split_inclusive('\n')
            .filter(|l| l.ends_with('\n'))
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|rec| rec["decision"] == "relayed")
            .collect();
        if !relayed.is_empty() || Instant::now() > deadline {
            break (audit, relayed);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(relayed.len(), 1, "{audit}");
    assert_eq!(relayed[0]["reason"], "to leaf-a, leaf-b", "{audit}");
    assert_eq!(relayed[0]["jid"], json!(r.jid));
    assert!(relayed[0]["signer"].is_string(), "{audit}");

    // An unsigned job is refused by the syndic maid itself: nothing goes
    // down.
    let mut unsigned = signed("leaf-a");
    unsigned.key = None;
    let r = run(&bus, &unsigned).await;
    assert!(r.returns.is_empty(), "{r:?}");
    assert_eq!(r.rejected.get("syn").map(String::as_str), Some("unsigned"));
    assert!(!r.rejected.contains_key("leaf-a"), "{r:?}");

    // Someone who can publish on the Redis beneath sends a return for
    // leaf-a while its job runs: not signed by leaf-a's key, the syndic
    // maid does not relay it, and it does not cut short the wait for the
    // real one.
    let req = {
        let mut req = request("leaf-a", "glob", "test.sleep", json!([1]), json!({}));
        req.key = Some(master.clone());
        req.collect.pki = Some(maid_master::pki::Pki::new(&pki));
        req
    };
    let forged = |jid: &str, sub_ip: &str| {
        json!({"type": "return", "sub_ip": sub_ip, "jid": jid, "id": "leaf-a",
            "fun": "test.sleep", "fun_args": [1], "return": "forged", "retcode": 0,
            "success": true, "out": "nested", "_stamp": "2026-11-25T00:00:00.000000",
            "ret_": {"leaf-a": "forged"}})
        .to_string()
    };
    let r = run_injecting(&bus, &req, &low, |jid| forged(jid, "leaf-a")).await;
    assert_eq!(returned(&r), set(&["leaf-a"]), "{r:?}");
    assert_eq!(r.returns[0].ret, json!(true), "{r:?}");
    assert!(r.forged.is_empty(), "{r:?}");
    assert!(r.missed_minions.is_empty(), "{r:?}");

    // Nor can the syndic maid itself, with its own key, answer for a
    // maid beneath whose key the master accepted: that maid signs its own.
    let syn_key = maid_agent::identity::load_or_create(&dir.path().join("state-syn")).unwrap();
    let sealed = |payload: String| maid_agent::replies::seal(payload, &syn_key);
    let r = run_injecting(&bus, &req, &top, |jid| sealed(forged(jid, "syn"))).await;
    assert_eq!(r.returns.len(), 1, "{r:?}");
    assert_eq!(r.returns[0].ret, json!(true), "{r:?}");
    assert!(r.forged["syn"].contains("own accepted key"), "{r:?}");

    // ...nor list a maid the master reaches itself as one beneath it.
    let _: i64 = top
        .client()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
        .hset("maid:registry", "direct", "{}")
        .await
        .unwrap();
    let ping = |jid: &str| {
        let ping = json!({"type": "ping", "sub_ip": "syn", "jid": jid, "match": true,
            "minions": ["leaf-a", "direct"]});
        sealed(ping.to_string())
    };
    let r = run_injecting(&bus, &req, &top, ping).await;
    assert!(r.forged["syn"].contains("\"direct\""), "{r:?}");
    assert!(!r.targeted.contains("direct"), "{r:?}");
    drop(agents);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_syndic_maid_over_a_real_salt_master_relays_its_minions() {
    let user = "maid-syndic";
    let salt = tokio::task::spawn_blocking(move || {
        crate::common::salt::RealSalt::start(&["sm1", "sm2"], true, user)
    })
    .await
    .unwrap();
    let top = RedisServer::start();
    let bus = Bus::new(&top.config()).unwrap();
    // salt-api's `auto` eauth takes any password.
    let toml = format!(
        "[syndic.salt_api]\nurl = \"{}\"\nusername = \"{user}\"\npassword = \"any\"\neauth = \"auto\"\n",
        salt.api_url.as_deref().unwrap()
    );
    let _syndic = start_agent(&top.config(), "salt-syn", &toml);
    wait_registered(&bus, &["salt-syn"]).await;

    // Everyone: the syndic maid itself and the Salt master's minions.
    let r = run(&bus, &ping("*", "glob", 30)).await;
    let all = set(&["salt-syn", "sm1", "sm2"]);
    assert_eq!(r.targeted, all, "{r:?}");
    assert_eq!(returned(&r), all, "{r:?}");
    assert!(
        r.missed_minions.is_empty() && r.missed_maids.is_empty(),
        "{r:?}"
    );
    assert_eq!(sent_by(&r, "sm1"), "salt-syn");
    assert!(r.returns.iter().all(|r| r.ret == json!(true)), "{r:?}");

    // Salt's own targeting decides beneath, and Salt's retcodes come up.
    let mut req = request("sm2", "list", "test.retcode", json!([3]), json!({}));
    req.collect.timeout = Duration::from_secs(30);
    let r = run(&bus, &req).await;
    assert_eq!(r.targeted, set(&["sm2"]), "{r:?}");
    assert_eq!(returned(&r), set(&["sm2"]), "{r:?}");
    assert_eq!(r.returns[0].retcode, 3, "{r:?}");
    assert_eq!(r.exit_code(), 1);

    // No Salt minion matches: the syndic maid is empty.
    let r = run(&bus, &ping("nobody*", "glob", 10)).await;
    assert_eq!(r.empty, set(&["salt-syn"]), "{r:?}");
    assert!(r.returns.is_empty(), "{r:?}");

    // `maid run` names a Salt minion beneath.
    let dir = tempfile::tempdir().unwrap();
    let out = maid_cli(
        &top.url(),
        &[
            "run",
            "sm1",
            "test.ping",
            "--master-topic",
            TOPIC,
            "-t",
            "30",
        ],
        dir.path(),
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "sm1:\n    True\n");
    assert_eq!(out.status.code(), Some(0));
}

/// A maid beneath whose key the master has not accepted — one that joined
/// since the operator last accepted keys, or one with no key at all — is
/// its syndic maid's to answer for (PROTOCOL §7). Its genuine return was
/// counted as forged: a signed one went up as it was signed, and the
/// master held no key for it; an unsigned one went up under the syndic
/// maid's id but bare, and a master that keeps keys takes that only when
/// the syndic maid's key signed it. Each run must count every return;
/// a key the operator rejected is still refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_maid_beneath_whose_key_is_not_accepted_yet_is_answered_for_by_its_syndic_maid() {
    let top = RedisServer::start();
    let low = RedisServer::start();
    let bus = Bus::new(&top.config()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let keyed = |id: &str| {
        format!(
            "[security]\nrequire_signed = false\nstate_dir = {:?}\n",
            dir.path().join(format!("state-{id}"))
        )
    };
    let _agents = [
        start_agent(&low.config(), "leaf-new", &keyed("leaf-new")),
        start_agent(&low.config(), "leaf-bad", &keyed("leaf-bad")),
        start_agent(&low.config(), "leaf-bare", ""),
        start_agent(
            &top.config(),
            "syn",
            &format!("{}{}", keyed("syn"), syndic(&low)),
        ),
    ];
    let beneath = ["leaf-new", "leaf-bad", "leaf-bare"];
    wait_registered(&Bus::new(&low.config()).unwrap(), &beneath).await;
    wait_registered(&bus, &["syn"]).await;
    wait_beneath(&top, "syn", &beneath).await;
    // The operator accepts the syndic maid (with its role); the maids
    // beneath it have no accepted key yet.
    let pki_dir = dir.path().join("pki");
    accept_all(&top.url(), &pki_dir);
    let pki = maid_master::pki::Pki::new(&pki_dir);
    let accepted = pki.accepted().unwrap();
    assert_eq!(
        accepted.keys().cloned().collect::<BTreeSet<_>>(),
        set(&["syn"])
    );
    let mut req = ping("*", "glob", 10);
    req.collect.pki = Some(pki.clone());
    let all = set(&["syn", "leaf-new", "leaf-bad", "leaf-bare"]);
    for round in 0..3 {
        let r = run(&bus, &req).await;
        assert_eq!(returned(&r), all, "round {round}: {r:?}");
        assert!(r.forged.is_empty(), "round {round}: {r:?}");
        assert!(r.missed_minions.is_empty(), "round {round}: {r:?}");
        // Signed by the maid beneath, as the syndic maid listed its key;
        // a maid with no key is vouched for by the syndic maid's own.
        assert_eq!(sent_by(&r, "leaf-new"), "leaf-new");
        assert_eq!(sent_by(&r, "leaf-bare"), "syn");
    }
    // The operator rejects leaf-bad's key and accepts the rest: leaf-bad's
    // returns are refused, leaf-new's verify with its accepted key.
    assert!(
        pki.transfer(
            "leaf-bad",
            maid_master::pki::KeyState::Pending,
            maid_master::pki::KeyState::Rejected
        )
        .unwrap()
    );
    accept_all(&top.url(), &pki_dir);
    assert!(pki.accepted().unwrap().contains_key("leaf-new"));
    let r = run(&bus, &req).await;
    assert_eq!(
        returned(&r),
        set(&["syn", "leaf-new", "leaf-bare"]),
        "{r:?}"
    );
    assert!(r.forged.contains_key("leaf-bad"), "{r:?}");
    assert_eq!(sent_by(&r, "leaf-new"), "leaf-new");
}
