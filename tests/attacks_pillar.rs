//! Attacks on pillar delivery (PROTOCOL §8), each against a real agent:
//! a Redis writer swapping, rolling back, forging or retargeting the
//! record a signed job pins; tampered sealed bytes; inline pillar sealed
//! to another maid; pillar in an unsigned job. Each is refused before the
//! function runs (`Pillar unavailable: …`, retcode 1); the genuine record
//! is read even when a later job's record took its key.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use ed25519_dalek::SigningKey;
use redis::AsyncCommands;
use serde_json::{Map, Value, json};

use crate::common::fleet::{Agent, start_agent, wait_registered};
use maid_bus::Bus;
use maid_protocol::pillar::{self, PillarRecord};
use maid_protocol::protocol::Reply;
use maid_protocol::trust;
use maid_testkit::redis::RedisServer;
use maid_testkit::wire::{TOPIC, raw_round_trip};

struct Fleet {
    _server: RedisServer,
    bus: Bus,
    dir: tempfile::TempDir,
    master: SigningKey,
    _agents: Vec<Agent>,
}

impl Fleet {
    async fn start() -> Fleet {
        let server = RedisServer::start();
        let bus = Bus::new(&server.config()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let master = trust::generate().unwrap();
        let public = dir.path().join("master.pub");
        std::fs::write(&public, trust::encode_verifying(&master.verifying_key())).unwrap();
        let agent = |id: &str, signed: bool| {
            let state = dir.path().join(format!("state-{id}"));
            let toml = format!(
                "[plugins.pillar]\npillar = true\n[security]\nrequire_signed = {signed}\n\
                 trusted_keys = [{public:?}]\nstate_dir = {state:?}\n"
            );
            start_agent(&server.config(), id, &toml)
        };
        let agents = vec![agent("pa-one", true), agent("pa-lax", false)];
        wait_registered(&bus, &["pa-one", "pa-lax"]).await;
        Fleet {
            _server: server,
            bus,
            dir,
            master,
            _agents: agents,
        }
    }

    /// `id`'s own public key, as its registration presents it.
    fn maid_key(&self, id: &str) -> ed25519_dalek::VerifyingKey {
        let text = std::fs::read_to_string(self.dir.path().join(format!("state-{id}/minion.pub")))
            .unwrap();
        trust::decode_verifying_key(text.trim()).unwrap()
    }

    /// A record of `pillar` for `id`, sealed to `to`, signed by `signer`.
    fn record(
        &self,
        id: &str,
        pillar: Value,
        to: &ed25519_dalek::VerifyingKey,
        signer: &SigningKey,
    ) -> (String, String) {
        let sealed = pillar::seal(pillar.as_object().unwrap(), to).unwrap();
        let rec = PillarRecord::new(id, &sealed, 1);
        let envelope = serde_json::to_string(&rec.sign(signer)).unwrap();
        (envelope, rec.sha256)
    }

    async fn set(&self, key: &str, value: &str) {
        let mut conn = self.bus.connect().await.unwrap();
        let _: () = conn.set(key, value).await.unwrap();
    }

    /// `pillar.items` on `id` in a job signed by `signer` (none: unsigned)
    /// that carries `extra` (`pillar`, `pillar_inline`): the return, its
    /// sealed value opened with the master's key.
    async fn items(&self, id: &str, signer: Option<&SigningKey>, extra: Value) -> (Value, i32) {
        let jid = maid_protocol::jid::new_jid();
        let topic = format!("maid.reply.{jid}");
        let mut job = json!({"jid": jid, "tempTopic": topic, "fun": "pillar.items",
            "arg": [], "kwarg": {"unmask": true}, "tgt": id, "tgt_type": "glob", "topic": TOPIC,
            "issued_at": chrono::Utc::now().timestamp_millis()});
        job.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let payload = match signer {
            Some(key) => serde_json::to_string(&trust::sign(job.to_string(), key)).unwrap(),
            None => job.to_string(),
        };
        let replies = raw_round_trip(&self.bus, &topic, &payload, 2).await;
        let ret = replies
            .into_iter()
            .find_map(|r| match r {
                Reply::Return(r) => Some(r),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no return from {id}"));
        let ret = ret.unsealed(Some(&self.master));
        (ret.ret, ret.retcode)
    }
}

fn refused(got: &(Value, i32), why: &str) {
    let text = got.0.as_str().unwrap_or_default();
    assert!(
        got.1 == 1 && text.starts_with("Pillar unavailable: ") && text.contains(why),
        "expected a refusal naming {why:?}, got {got:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_writer_cannot_swap_roll_back_forge_or_retarget_a_pinned_pillar() {
    let f = Fleet::start().await;
    let one = f.maid_key("pa-one");
    let key = pillar::record_key("pa-one");
    let pin = |sha: &str| json!({"pillar": {"pa-one": sha}});

    // The genuine record, pinned: read and opened.
    let (genuine, sha) = f.record("pa-one", json!({"v": "genuine"}), &one, &f.master);
    f.set(&key, &genuine).await;
    assert_eq!(
        f.items("pa-one", Some(&f.master), pin(&sha)).await,
        (json!({"v": "genuine"}), 0)
    );

    // Rolled back (or swapped): the key holds another genuine record of
    // pa-one than the one pinned, and nothing is filed under the pin.
    let (older, _) = f.record("pa-one", json!({"v": "older"}), &one, &f.master);
    f.set(&key, &older).await;
    refused(
        &f.items("pa-one", Some(&f.master), pin(&sha)).await,
        "the job pins",
    );
    // The pinned copy, kept under its hash, is found though a later job's
    // record took the key.
    f.set(&pillar::pinned_key("pa-one", &sha), &genuine).await;
    assert_eq!(
        f.items("pa-one", Some(&f.master), pin(&sha)).await,
        (json!({"v": "genuine"}), 0)
    );

    // Another maid's genuine record under pa-one's key, pinned.
    let (theirs, theirs_sha) = f.record("pa-lax", json!({"v": "theirs"}), &one, &f.master);
    f.set(&key, &theirs).await;
    refused(
        &f.items("pa-one", Some(&f.master), pin(&theirs_sha)).await,
        "is for \"pa-lax\"",
    );

    // Signed by a key the maid does not trust.
    let stranger = trust::generate().unwrap();
    let (forged, forged_sha) = f.record("pa-one", json!({"v": "forged"}), &one, &stranger);
    f.set(&key, &forged).await;
    refused(
        &f.items("pa-one", Some(&f.master), pin(&forged_sha)).await,
        "pillar record",
    );

    // A master-signed payload of another kind.
    let sealed = pillar::seal(json!({"v": "kind"}).as_object().unwrap(), &one).unwrap();
    let mut rec = PillarRecord::new("pa-one", &sealed, 1);
    rec.kind = "salt-file".into();
    f.set(&key, &serde_json::to_string(&rec.sign(&f.master)).unwrap())
        .await;
    refused(
        &f.items("pa-one", Some(&f.master), pin(&rec.sha256)).await,
        "not pillar",
    );

    // Sealed bytes altered under a genuine signature's hash.
    let mut rec = PillarRecord::new("pa-one", &sealed, 1);
    let mut bytes = B64.decode(&rec.sealed).unwrap();
    bytes[40] ^= 1;
    rec.sealed = B64.encode(&bytes);
    f.set(&key, &serde_json::to_string(&rec.sign(&f.master)).unwrap())
        .await;
    refused(
        &f.items("pa-one", Some(&f.master), pin(&rec.sha256)).await,
        "sealed bytes",
    );

    // Inline pillar sealed to another key: it does not open.
    let other = trust::generate().unwrap().verifying_key();
    let boxed = pillar::seal(&Map::new(), &other).unwrap();
    let inline = json!({"pillar_inline": {"pa-one": B64.encode(boxed)}});
    refused(
        &f.items("pa-one", Some(&f.master), inline).await,
        "does not open",
    );

    // Pillar in an unsigned job, to a maid that runs unsigned jobs.
    let (lax, lax_sha) = f.record(
        "pa-lax",
        json!({"v": "lax"}),
        &f.maid_key("pa-lax"),
        &f.master,
    );
    f.set(&pillar::record_key("pa-lax"), &lax).await;
    refused(
        &f.items("pa-lax", None, json!({"pillar": {"pa-lax": lax_sha}}))
            .await,
        "only in signed jobs",
    );
    // Signed, the same record is read.
    assert_eq!(
        f.items(
            "pa-lax",
            Some(&f.master),
            json!({"pillar": {"pa-lax": lax_sha}})
        )
        .await,
        (json!({"v": "lax"}), 0)
    );
}
