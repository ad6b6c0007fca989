//! The fleet attacked as a compromised maid or a Redis writer would attack
//! it (docs/security.md, "Threat model"): every maid holds a credential
//! that can write the registry and the syndic lists, and a compromised
//! maid holds its own accepted key. Real agents, real `redis-server`s, the
//! real `maid`; each test fails if its hole reopens.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use redis::AsyncCommands;
use serde_json::{Value, json};

use crate::common::fleet::{Agent, request, run, start_agent, wait_registered};
use crate::common::redis::RedisServer;
use crate::syndic::{accept_all, run_injecting, syndic, wait_beneath};
use maid_agent::target::TargetType;
use maid_bus::Bus;
use maid_master::api::perms::{self, PermEntry};
use maid_master::jobs::Registry;
use maid_master::pki::Pki;

/// An agent that keeps state (and so has a key of its own) in `dir`.
fn keyed(server: &RedisServer, id: &str, dir: &Path, extra: &str) -> Agent {
    let state = dir.join(format!("state-{id}"));
    let toml = format!("[security]\nrequire_signed = false\nstate_dir = {state:?}\n{extra}");
    start_agent(&server.config(), id, &toml)
}

/// The key of the maid that keeps state in `dir` as `id`: what an
/// attacker who took that host holds.
fn key_of(dir: &Path, id: &str) -> ed25519_dalek::SigningKey {
    maid_agent::identity::load_or_create(&dir.join(format!("state-{id}"))).unwrap()
}

fn ids(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// A return for `id` from `sub_ip`, as a maid sends it.
fn return_for(jid: &str, sub_ip: &str, id: &str) -> String {
    json!({"type": "return", "sub_ip": sub_ip, "jid": jid, "id": id, "fun": "test.sleep",
        "fun_args": [], "return": true, "retcode": 0, "success": true, "out": "nested",
        "_stamp": "2026-11-27T00:00:00.000000", "ret_": {id: true}})
    .to_string()
}

/// A compromised ordinary maid (its own accepted key in hand) PINGs with
/// minions it invents or that are not its own, returns for them, and even
/// re-registers as a syndic maid, signed: the master counts none of it.
/// Only a maid whose key was filed, and so accepted, as a syndic maid's may
/// answer for others (PROTOCOL v1.2 §7).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_maid_not_accepted_as_a_syndic_maid_cannot_answer_for_others() {
    let top = RedisServer::start();
    let bus = Bus::new(&top.config()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let _web = keyed(&top, "web-1", dir.path(), "");
    wait_registered(&bus, &["web-1"]).await;
    let pki = dir.path().join("pki");
    accept_all(&top.url(), &pki);
    let stolen = key_of(dir.path(), "web-1");
    // The job runs a second: the attacker's messages arrive while it does.
    let mut req = request("*", "glob", "test.sleep", json!([1]), json!({}));
    req.collect.pki = Some(Pki::new(&pki));
    req.collect.timeout = Duration::from_secs(5);
    let attack = |jid: &str, n: &mut u32| {
        *n += 1;
        let msg = match *n % 3 {
            0 => json!({"type": "ping", "sub_ip": "web-1", "jid": jid, "match": true,
                "minions": ["web-1", "leaf-2", "phantom-7"]})
            .to_string(),
            1 => return_for(jid, "web-1", "leaf-2"),
            _ => return_for(jid, "web-1", "phantom-7"),
        };
        maid_agent::replies::seal(msg, &stolen)
    };
    let check = |r: &maid_master::jobs::Report| {
        let returned: BTreeSet<String> = r.returns.iter().map(|r| r.id.clone()).collect();
        assert_eq!(returned, ids(&["web-1"]), "{r:?}");
        assert!(!r.targeted.contains("leaf-2"), "{r:?}");
        assert!(!r.targeted.contains("phantom-7"), "{r:?}");
        assert!(r.missed_minions.is_empty(), "{r:?}");
        assert!(r.forged.contains_key("web-1"), "{r:?}");
    };
    let n = std::sync::Mutex::new(0);
    let r = run_injecting(&bus, &req, &top, |jid| attack(jid, &mut n.lock().unwrap())).await;
    check(&r);

    // It registers again as a syndic maid, signed with its accepted key:
    // the role was never accepted with that key, so nothing changes.
    let mut conn = bus.connect().await.unwrap();
    let text: String = conn.hget("maid:registry", "web-1").await.unwrap();
    let mut reg = maid_agent::registry::read::<maid_agent::protocol::Registration>(&text)
        .unwrap()
        .value;
    reg.syndic = true;
    let forged = maid_agent::registry::write(&reg, Some(&stolen));
    let _: i64 = conn.hset("maid:registry", "web-1", &forged).await.unwrap();
    accept_all(&top.url(), &pki);
    let registry = Registry::read(&mut conn, Some(&Pki::new(&pki)))
        .await
        .unwrap();
    assert!(registry.syndics.is_empty(), "{registry:?}");
    // `maid maids` shows the role it claims and was never accepted with.
    let o = crate::common::fleet::maid_cli(
        &top.url(),
        &["maids", "--json", "--pki-dir", pki.to_str().unwrap()],
        dir.path(),
    );
    let listed: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(listed[0]["role"], "syndic?", "{listed}");
    let r = run_injecting(&bus, &req, &top, |jid| attack(jid, &mut n.lock().unwrap())).await;
    check(&r);
}

/// Any agent credential can rewrite a registry entry. A user whose API
/// permissions hold only `G@role:web` rewrites db-1's grains to
/// `role: web` (bare, then signed with a key of its own, then with web-1's
/// stolen key): db-1 never counts as `role: web`, so neither the API's
/// check nor the master's selection lets the user reach it. Grains come
/// only from a registration db-1's accepted key signed (PROTOCOL v1.2 §4).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_registry_grains_decide_neither_permissions_nor_targets() {
    let top = RedisServer::start();
    let bus = Bus::new(&top.config()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let _web = keyed(&top, "web-1", dir.path(), "[grains]\nrole = \"web\"\n");
    let _db = keyed(&top, "db-1", dir.path(), "[grains]\nrole = \"db\"\n");
    wait_registered(&bus, &["web-1", "db-1"]).await;
    let pki = Pki::new(dir.path().join("pki"));
    accept_all(&top.url(), pki.dir());
    let entries: Vec<PermEntry> =
        serde_json::from_value(json!([{"G@role:web": ["cmd.*"]}])).unwrap();
    let mut conn = bus.connect().await.unwrap();
    let allowed = |registry: &Registry, tgt: &str, tgt_type: TargetType| {
        let reached = perms::reach(registry, &json!(tgt), tgt_type, None);
        perms::allows(&entries, "cmd.run", &reached, registry)
    };
    // Genuine: web-1 is the user's, db-1 is not.
    let registry = Registry::read(&mut conn, Some(&pki)).await.unwrap();
    assert!(allowed(&registry, "web-1", TargetType::Glob));
    assert!(!allowed(&registry, "db-1", TargetType::Glob));

    let text: String = conn.hget("maid:registry", "db-1").await.unwrap();
    let mut reg = maid_agent::registry::read::<maid_agent::protocol::Registration>(&text)
        .unwrap()
        .value;
    reg.grains.insert("role".into(), json!("web"));
    let stranger = maid_agent::trust::generate().unwrap();
    let stolen = key_of(dir.path(), "web-1");
    for (what, forged) in [
        ("bare", maid_agent::registry::write(&reg, None)),
        (
            "signed by a stranger",
            maid_agent::registry::write(&reg, Some(&stranger)),
        ),
        (
            "signed by web-1's key",
            maid_agent::registry::write(&reg, Some(&stolen)),
        ),
    ] {
        let _: i64 = conn.hset("maid:registry", "db-1", &forged).await.unwrap();
        let registry = Registry::read(&mut conn, Some(&pki)).await.unwrap();
        assert!(!allowed(&registry, "db-1", TargetType::Glob), "{what}");
        assert!(
            !allowed(&registry, "db-1 or web-1", TargetType::Compound),
            "{what}"
        );
        let mut req = request("role:web", "grain", "cmd.run", json!(["id"]), json!({}));
        req.collect.pki = Some(pki.clone());
        assert_eq!(registry.selected(&req), ids(&["web-1"]), "{what}");
        // db-1 itself stays expected and reachable by its id.
        req.tgt = json!("db-1");
        req.tgt_type = "glob".into();
        assert_eq!(registry.selected(&req), ids(&["db-1"]), "{what}");
    }
    // The accepted key stays db-1's: the forgery filed nothing over it.
    let accepted = pki.accepted().unwrap();
    assert_eq!(
        maid_agent::trust::encode_verifying(&accepted["db-1"]),
        maid_agent::trust::encode_verifying(&key_of(dir.path(), "db-1").verifying_key())
    );
}

/// Any agent credential can `SET maid:syndic:<id>`. A list of minions the
/// syndic maid did not sign — bare, or signed by another key — is not
/// believed: its minions are neither expected nor reachable, and the
/// genuine syndic maid writes its own list again rather than keeping the
/// attacker's alive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_of_minions_its_syndic_maid_did_not_sign_is_not_believed() {
    let top = RedisServer::start();
    let low = RedisServer::start();
    let bus = Bus::new(&top.config()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let _leaf = start_agent(&low.config(), "leaf-a", "");
    let _syn = keyed(&top, "syn", dir.path(), &syndic(&low));
    wait_registered(&Bus::new(&low.config()).unwrap(), &["leaf-a"]).await;
    wait_registered(&bus, &["syn"]).await;
    wait_beneath(&top, "syn", &["leaf-a"]).await;
    let pki = Pki::new(dir.path().join("pki"));
    // Accepting it, the operator is told the key comes with the role.
    let out = crate::common::maid_command()
        .args(["key", "--pki-dir"])
        .arg(pki.dir())
        .args(["-A", "-y"])
        .env("MAID_REDIS", top.url())
        .env_remove("MAID_CONFIG")
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("syn presented its key as a syndic maid's"),
        "{out:?}"
    );
    accept_all(&top.url(), pki.dir());
    let mut conn = bus.connect().await.unwrap();
    let everyone = |registry: &Registry| {
        let mut req = request("*", "glob", "test.ping", json!([]), json!({}));
        req.collect.pki = Some(pki.clone());
        registry.selected(&req)
    };
    let registry = Registry::read(&mut conn, Some(&pki)).await.unwrap();
    assert_eq!(everyone(&registry), ids(&["syn", "leaf-a"]), "{registry:?}");

    let genuine: String = conn.get("maid:syndic:syn").await.unwrap();
    let mut listed: Value = maid_agent::registry::read(&genuine).unwrap().value;
    let mut evil = listed["leaf-a"].clone();
    evil["id"] = json!("evil-leaf");
    listed["evil-leaf"] = evil;
    let stranger = maid_agent::trust::generate().unwrap();
    for (what, forged) in [
        ("bare", maid_agent::registry::write(&listed, None)),
        (
            "signed by a stranger",
            maid_agent::registry::write(&listed, Some(&stranger)),
        ),
    ] {
        let _: () = conn.set_ex("maid:syndic:syn", &forged, 60).await.unwrap();
        let registry = Registry::read(&mut conn, Some(&pki)).await.unwrap();
        assert!(
            !everyone(&registry).contains("evil-leaf"),
            "{what}: {registry:?}"
        );
        assert!(registry.beneath.is_empty(), "{what}: {registry:?}");
        // The syndic maid writes its own list again within a refresh.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let now: String = conn.get("maid:syndic:syn").await.unwrap();
            if now == genuine {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{what}: never rewritten"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// `maid` as an operator types it, with no config and the verify switch
/// left unsaid (nothing from the tests' own default).
fn bare_master(url: &str, args: &[&str], cwd: &Path) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_maid"))
        .args(args)
        .args(["--master-topic", crate::common::fleet::TOPIC])
        .current_dir(cwd)
        .env("MAID_REDIS", url)
        .env_remove("MAID_CONFIG")
        .env_remove("MAID_PKI_DIR")
        .env_remove("MAID_VERIFY_REPLIES")
        .env_remove("MAID_LOG")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run maid")
}

/// A master with no key store counted every reply, forged or not, and
/// said nothing. Like an agent about `require_signed`, it must now be
/// told: a key store, or `verify_replies = false`, which it warns of at
/// every run. Told neither, `run`, `cp`, `job`, `runner` and `api` refuse
/// before they publish or listen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_that_was_not_told_how_to_trust_replies_does_not_run() {
    let top = RedisServer::start();
    let bus = Bus::new(&top.config()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let _web = keyed(&top, "web-1", dir.path(), "");
    wait_registered(&bus, &["web-1"]).await;
    let file = dir.path().join("motd");
    std::fs::write(&file, "hi\n").unwrap();
    let file = file.to_str().unwrap();
    let url = top.url();
    let refusals: [&[&str]; 5] = [
        &["run", "*", "test.ping"],
        &["cp", "*", file, "/tmp/never-written-by-maid"],
        &["job", "20261127000000000000"],
        &["runner", "jobs.list_jobs"],
        &["api", "--listen", "127.0.0.1:0"],
    ];
    let mut hear = top.client().get_async_pubsub().await.unwrap();
    hear.subscribe(crate::common::fleet::TOPIC).await.unwrap();
    for args in refusals {
        let (url, cwd) = (url.clone(), dir.path().to_path_buf());
        let owned: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let out = tokio::task::spawn_blocking(move || {
            let words: Vec<&str> = owned.iter().map(String::as_str).collect();
            bare_master(&url, &words, &cwd)
        })
        .await
        .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{args:?}: {err}");
        assert!(
            err.contains("replies cannot be verified"),
            "{args:?}: {err}"
        );
    }
    // Nothing was published on the master topic.
    let heard = tokio::time::timeout(Duration::from_millis(300), async {
        futures_util::StreamExt::next(&mut hear.on_message()).await
    })
    .await;
    assert!(heard.is_err(), "a refused master published {heard:?}");

    // Told `verify_replies = false`, it runs, and says so.
    let out = crate::common::maid_command()
        .args([
            "run",
            "*",
            "test.ping",
            "--master-topic",
            crate::common::fleet::TOPIC,
        ])
        .env("MAID_REDIS", top.url())
        .env_remove("MAID_CONFIG")
        .env_remove("MAID_LOG")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "web-1:\n    True\n");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("replies are not verified"),
        "{out:?}"
    );
    // With a key store it verifies: web-1's key accepted, its reply counts.
    let pki = dir.path().join("pki");
    accept_all(&top.url(), &pki);
    let out = bare_master(
        &top.url(),
        &["run", "*", "test.ping", "--pki-dir", pki.to_str().unwrap()],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "web-1:\n    True\n");
}

/// Two maids on one `state_dir` raced to make its key (one died, the demo
/// hung) and would share one replay memory. A running maid holds the
/// directory: a second is refused with an error that says why, and the
/// first serves on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_maid_on_a_state_dir_is_refused() {
    let top = RedisServer::start();
    let bus = Bus::new(&top.config()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let _first = keyed(&top, "first", dir.path(), "");
    wait_registered(&bus, &["first"]).await;
    let redis = toml::to_string(&top.config()).unwrap();
    let config = format!(
        "master_topics = [\"{}\"]\n[security]\nrequire_signed = false\nstate_dir = {:?}\n\
         [redis]\n{redis}",
        crate::common::fleet::TOPIC,
        dir.path().join("state-first"),
    );
    let (status, err) = tokio::task::spawn_blocking(move || crate::attacks::agent_exit(&config))
        .await
        .unwrap();
    assert!(!status.success());
    assert!(err.contains("in use by another running maid"), "{err}");
    let r = run(
        &bus,
        &request("first", "glob", "test.ping", json!([]), json!({})),
    )
    .await;
    assert_eq!(r.returns.len(), 1, "{r:?}");
}

/// Anyone who can publish on the Redis beneath a syndic maid sent 2 000
/// forged returns on a running job's reply topic there — bare, signed by a
/// stranger, for minions nobody listed, in the syndic maid's own name —
/// and the syndic maid relayed every one upstream, one for one. It now
/// relays only what the maids the job went to sent: a reply for one of
/// them, from it (or a syndic maid beneath that lists it), signed by the
/// key it registered with, once per minion. The rest is dropped and
/// counted; the genuine return goes up and is counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_replies_beneath_a_syndic_maid_are_not_relayed_upstream() {
    let top = RedisServer::start();
    let low = RedisServer::start();
    let bus = Bus::new(&top.config()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let _leaf = keyed(&low, "leaf-a", dir.path(), "");
    let _bare = start_agent(&low.config(), "leaf-0", "");
    let _syn = keyed(&top, "syn", dir.path(), &syndic(&low));
    wait_registered(&Bus::new(&low.config()).unwrap(), &["leaf-a", "leaf-0"]).await;
    wait_registered(&bus, &["syn"]).await;
    wait_beneath(&top, "syn", &["leaf-a", "leaf-0"]).await;
    let pki = dir.path().join("pki");
    accept_all(&top.url(), &pki);
    accept_all(&top.url(), &pki);
    assert!(Pki::new(&pki).accepted().unwrap().contains_key("leaf-a"));
    let mut req = request("leaf-a", "glob", "test.sleep", json!([2]), json!({}));
    req.collect.pki = Some(Pki::new(&pki));
    req.collect.timeout = Duration::from_secs(10);

    let jid = maid_agent::jid::new_jid();
    let topic = maid_master::jobs::temp_topic(&jid);
    // What reaches the Redis above on the job's reply topic.
    let mut above = top.client().get_async_pubsub().await.unwrap();
    above.subscribe(&topic).await.unwrap();
    let heard = tokio::spawn(async move {
        let mut stream = above.on_message();
        let mut n = 0usize;
        while tokio::time::timeout(
            Duration::from_secs(3),
            futures_util::StreamExt::next(&mut stream),
        )
        .await
        .is_ok_and(|m| m.is_some())
        {
            n += 1;
        }
        n
    });
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
    // Once the syndic maid listens beneath, the attacker floods the topic.
    let mut below = low
        .client()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (_, subscribers): (String, i64) = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(&topic)
            .query_async(&mut below)
            .await
            .unwrap();
        if subscribers > 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the job never went down"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stranger = maid_agent::trust::generate().unwrap();
    let mut flood = redis::pipe();
    for n in 0..2000 {
        let msg = match n % 5 {
            0 => return_for(&jid, "leaf-a", "leaf-a"),
            1 => maid_agent::replies::seal(return_for(&jid, "leaf-a", "leaf-a"), &stranger),
            2 => return_for(&jid, &format!("phantom-{n}"), &format!("phantom-{n}")),
            3 => return_for(&jid, "syn", "leaf-a"),
            _ => return_for(&jid, "leaf-0", "leaf-0"),
        };
        flood.publish(&topic, msg).ignore();
    }
    let () = flood.query_async(&mut below).await.unwrap();
    let r = job.await.unwrap();
    let heard = heard.await.unwrap();
    let returned: BTreeSet<String> = r.returns.iter().map(|r| r.id.clone()).collect();
    assert_eq!(returned, ids(&["leaf-a"]), "{r:?}");
    assert_eq!(r.returns[0].ret, json!(true), "{r:?}");
    assert_eq!(r.returns[0].sub_ip, "leaf-a", "{r:?}");
    assert!(r.forged.is_empty(), "{r:?}");
    assert!(r.repeated.is_empty(), "{r:?}");
    // The syndic maid's PING and leaf-a's return: nothing of the flood.
    assert!(heard <= 3, "{heard} messages relayed upstream");
    // The job cache above holds leaf-a's own return.
    let mut conn = bus.connect().await.unwrap();
    let cached = maid_master::jobs::cached(&mut conn, &jid, Some(&Pki::new(&pki)), None)
        .await
        .unwrap();
    assert_eq!(cached.returns.len(), 1, "{cached:?}");
    assert_eq!(cached.returns[0].ret, json!(true), "{cached:?}");
    assert!(cached.forged.is_empty(), "{cached:?}");
}
