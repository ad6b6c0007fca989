//! Fleet-wide plugin sync against a real `redis-server` and two real
//! `maid agent` processes: `maid plugin push` signs and stores a plugin,
//! `maid run '*' saltutil.sync_modules` loads it on both maids and says
//! so, and then its function runs on both. A plugin signed by a key the
//! maids do not trust, a module their policy does not allow, content whose
//! hash is not the signed one, a rollback to an older push and a plugin
//! shadowing a local one are each refused, reported and audited, and the
//! version already loaded keeps running. A restarted maid loads what it
//! synced from disk; a signed removal unloads it.
//!
//! The sync job pins what to install (the master's own record of its
//! pushes), so a Redis writer who restores an older signed entry or
//! deletes the newest gets neither a fresh maid to take the old version nor
//! an update held back in silence; and a maid that requires signed jobs
//! installs nothing on its own.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common::fleet::{Agent, TOPIC, maid_cli, request, start_agent, wait_registered};
use crate::common::guests;
use crate::common::redis::RedisServer;
use maid_bus::{Bus, RedisConfig};
use serde_json::{Value, json};

struct Fleet {
    server: RedisServer,
    redis: RedisConfig,
    bus: Bus,
    dir: tempfile::TempDir,
    /// The master key the maids trust, as `maid keygen` writes it.
    key: PathBuf,
    kid: String,
}

const IDS: [&str; 2] = ["sync-a", "sync-b"];

impl Fleet {
    fn new() -> Self {
        let server = RedisServer::start();
        let redis = server.config();
        let bus = Bus::new(&redis).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let prefix = dir.path().join("master");
        let o = maid_cli(
            &server.url(),
            &["keygen", prefix.to_str().unwrap()],
            dir.path(),
        );
        assert!(o.status.success(), "{o:?}");
        let public = prefix.with_extension("pub");
        let kid = maid_agent::trust::key_id(
            &maid_agent::trust::read_verifying_key(public.to_str().unwrap()).unwrap(),
        );
        Fleet {
            server,
            redis,
            bus,
            key: prefix.with_extension("key"),
            kid,
            dir,
        }
    }

    fn state(&self, id: &str) -> PathBuf {
        self.dir.path().join(id)
    }

    /// A maid that requires signed jobs and syncs modules named `old*` (a
    /// glob) and `test` (which is installed locally, so it may not arrive
    /// this way).
    async fn agent(&self, id: &str) -> Agent {
        self.agent_with(id, true, 0).await
    }

    /// [`Fleet::agent`], requiring signed jobs or not, also checking Redis
    /// every `poll_secs`.
    async fn agent_with(&self, id: &str, require_signed: bool, poll_secs: u64) -> Agent {
        let extra = format!(
            "[security]\nrequire_signed = {require_signed}\ntrusted_keys = [\"{}\"]\n\
             state_dir = \"{}\"\n\
             [audit]\npath = \"{}\"\n\
             [sync]\nenabled = true\nallow = [\"old*\", \"test\"]\npoll_secs = {poll_secs}\n",
            self.key.with_extension("pub").display(),
            self.state(id).display(),
            self.state(id).join("audit.jsonl").display(),
        );
        let a = start_agent(&self.redis, id, &extra);
        wait_registered(&self.bus, &[id]).await;
        a
    }

    fn cli(&self, args: &[&str]) -> Output {
        maid_cli(&self.server.url(), args, self.dir.path())
    }

    /// `maid plugin push ARGS --key KEY`; its one line of output.
    fn push(&self, args: &[&str], key: &Path) -> String {
        let mut all = vec!["plugin", "push"];
        all.extend(args);
        all.extend(["--key", key.to_str().unwrap()]);
        let o = self.cli(&all);
        assert!(o.status.success(), "{o:?}");
        String::from_utf8(o.stdout).unwrap()
    }

    /// `maid run '*' FUN --out json`: the exit status and each maid's return.
    fn run(&self, fun: &str) -> (i32, BTreeMap<String, Value>) {
        self.run_with(fun, &[])
    }

    /// `maid run '*' FUN ARGS --out json`.
    fn run_with(&self, fun: &str, args: &[&str]) -> (i32, BTreeMap<String, Value>) {
        let key = self.key.to_str().unwrap();
        let mut all = vec!["run", "*", fun];
        all.extend(args);
        all.extend([
            "--master-topic",
            TOPIC,
            "--key",
            key,
            "--out",
            "json",
            "--out-indent",
            "-1",
            "-t",
            "30",
        ]);
        let o = self.cli(&all);
        let mut returns = BTreeMap::new();
        for line in String::from_utf8(o.stdout).unwrap().lines() {
            let one: BTreeMap<String, Value> = serde_json::from_str(line).unwrap();
            returns.extend(one);
        }
        (o.status.code().unwrap(), returns)
    }

    /// Every maid returned `expected`.
    fn all(&self, expected: Value) -> BTreeMap<String, Value> {
        IDS.iter()
            .map(|id| (id.to_string(), expected.clone()))
            .collect()
    }

    fn audit(&self, id: &str) -> Vec<Value> {
        let text = std::fs::read_to_string(self.state(id).join("audit.jsonl")).unwrap();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The `plugin_*` audit records of `id` about `module`.
    fn plugin_records(&self, id: &str, module: &str) -> Vec<Value> {
        self.audit(id)
            .into_iter()
            .filter(|r| r["module"] == module)
            .collect()
    }

    async fn redis(&self) -> maid_bus::Conn {
        self.bus.connect().await.unwrap()
    }

    /// The content hashes of `module` that `id` loaded, in order (audit).
    fn loaded(&self, id: &str, module: &str) -> Vec<String> {
        self.plugin_records(id, module)
            .into_iter()
            .filter(|r| r["decision"] == "plugin_loaded")
            .map(|r| r["plugin_sha256"].as_str().unwrap().to_string())
            .collect()
    }

    /// The stored field `field` of the hash `key`, as a Redis writer reads it.
    async fn stored(&self, key: &str, field: &str) -> String {
        redis::AsyncCommands::hget(&mut self.redis().await, key, field)
            .await
            .unwrap()
    }

    /// A Redis writer sets (`Some`) or deletes (`None`) a field of a hash.
    async fn tamper(&self, key: &str, field: &str, value: Option<&str>) {
        let mut conn = self.redis().await;
        let _: () = match value {
            Some(v) => redis::AsyncCommands::hset(&mut conn, key, field, v).await,
            None => redis::AsyncCommands::hdel(&mut conn, key, field).await,
        }
        .unwrap();
    }
}

/// The content hash in the line `maid plugin push` prints.
fn pushed_sha(line: &str) -> String {
    line.split(' ').nth(1).unwrap().to_string()
}

fn sha256_of(path: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(std::fs::read(path).unwrap()))
}

/// The `older` fixture with a 3 MiB custom section of `fill` appended,
/// written to `path`: a valid component that spans several chunks.
fn padded(path: &Path, fill: u8) -> PathBuf {
    let mut bytes = std::fs::read(guests::FIXTURE_OLDER).unwrap();
    let payload_len = 3 << 20;
    let mut section = vec![3, b'p', b'a', b'd'];
    section.resize(section.len() + payload_len, fill);
    bytes.push(0); // custom section id
    let mut size = section.len();
    loop {
        let byte = (size & 0x7f) as u8;
        size >>= 7;
        if size == 0 {
            bytes.push(byte);
            break;
        }
        bytes.push(byte | 0x80);
    }
    bytes.extend(section);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
    path.to_path_buf()
}

/// The refusal reason every maid gave for `module` in a sync return.
fn refusals(returns: &BTreeMap<String, Value>, module: &str) -> Vec<String> {
    IDS.iter()
        .map(|id| {
            returns[*id]["refused"][format!("modules.{module}")]
                .as_str()
                .unwrap_or_else(|| panic!("{id} did not refuse {module}: {returns:?}"))
                .to_string()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pushed_plugins_sync_to_every_maid_and_every_bad_push_is_refused() {
    let f = Fleet::new();
    let mut agents = [f.agent(IDS[0]).await, f.agent(IDS[1]).await];

    // Nothing pushed yet; the function is the agent's own.
    assert_eq!(f.run("saltutil.sync_modules"), (0, f.all(json!([]))));
    let (code, returns) = f.run("older.ping");
    assert_eq!(code, 1, "{returns:?}");
    assert_eq!(returns, f.all(json!("'older.ping' is not available.")));

    // Push, sync: both maids report the change, then the function runs.
    let sha = sha256_of(guests::FIXTURE_OLDER);
    let size = std::fs::metadata(guests::FIXTURE_OLDER).unwrap().len();
    assert_eq!(
        f.push(&[guests::FIXTURE_OLDER], &f.key),
        format!("older {sha} {size} signed by {}\n", f.kid)
    );
    assert_eq!(
        f.run("saltutil.sync_modules"),
        (0, f.all(json!(["modules.older"])))
    );
    assert_eq!(f.run("older.ping"), (0, f.all(json!(true))));
    // Synced again: nothing changed, also for the same bytes pushed again.
    assert_eq!(f.run("saltutil.sync_modules"), (0, f.all(json!([]))));
    let good_push: String =
        redis::AsyncCommands::hget(&mut f.redis().await, "maid:plugins", "older")
            .await
            .unwrap();
    f.push(&[guests::FIXTURE_OLDER, "--name", "older"], &f.key);
    assert_eq!(f.run("saltutil.sync_modules"), (0, f.all(json!([]))));

    // The registry lists the new function and the built-in one.
    let mut conn = f.redis().await;
    let maids = maid_master::jobs::alive_maids(&mut conn, None)
        .await
        .unwrap();
    for id in IDS {
        let functions = &maids[id].1.as_ref().unwrap().functions;
        assert!(
            functions.contains(&"older.ping".to_string()),
            "{functions:?}"
        );
        for own in [
            "saltutil.sync_modules",
            "saltutil.sync_all",
            "saltutil.refresh_grains",
        ] {
            assert!(functions.contains(&own.to_string()), "{own}: {functions:?}");
        }
    }

    // The audit log: local plugins loaded at start, the synced one with its
    // hash, its signer and the jid of the sync that brought it.
    for id in IDS {
        let test = f.plugin_records(id, "test");
        assert_eq!(test[0]["decision"], "plugin_loaded", "{test:?}");
        assert_eq!(test[0]["source"], "startup");
        assert_eq!(test[0]["plugin_sha256"], sha256_of(guests::PLUGIN_TEST));
        let older = f.plugin_records(id, "older");
        assert_eq!(older.len(), 1, "{older:?}");
        assert_eq!(older[0]["decision"], "plugin_loaded");
        assert_eq!(older[0]["source"], "sync");
        assert_eq!(older[0]["plugin_sha256"], sha);
        assert_eq!(older[0]["signer"], f.kid);
        assert_eq!(older[0]["jid"].as_str().unwrap().len(), 20, "{older:?}");
    }

    // A new version several chunks long (Python components are ~40 MB)
    // replaces the old one; the function goes on running.
    let big = padded(&f.dir.path().join("v2/older.wasm"), b'a');
    let line = f.push(&[big.to_str().unwrap()], &f.key);
    let big_sha = line.split(' ').nth(1).unwrap().to_string();
    // saltutil.sync_all installs it as sync_modules does, and answers with
    // Salt's every kind, only `modules` holding anything.
    let (code, returns) = f.run("saltutil.sync_all");
    assert_eq!(code, 0, "{returns:?}");
    for ret in returns.values() {
        let kinds = ret.as_object().unwrap();
        assert_eq!(kinds.len(), 18, "{ret}");
        for (kind, v) in kinds {
            let want = if kind == "modules" {
                json!(["modules.older"])
            } else {
                json!([])
            };
            assert_eq!(*v, want, "{kind}");
        }
    }
    assert_eq!(f.run("older.ping"), (0, f.all(json!(true))));

    // Content that is not what was signed: the next version's middle chunk
    // is swapped (same size) before the maids fetch it.
    let v3 = padded(&f.dir.path().join("v3/older.wasm"), b'b');
    let line = f.push(&[v3.to_str().unwrap()], &f.key);
    let v3_sha = line.split(' ').nth(1).unwrap().to_string();
    let _: () = redis::AsyncCommands::set(
        &mut conn,
        format!("maid:file:chunk:{v3_sha}:1"),
        vec![b'a'; maid_bus::filestore::CHUNK_BYTES],
    )
    .await
    .unwrap();
    let (code, returns) = f.run("saltutil.sync_modules");
    assert_eq!(code, 1, "{returns:?}");
    for reason in refusals(&returns, "older") {
        assert!(
            reason.starts_with("content hash mismatch: signed"),
            "{reason}"
        );
    }
    assert_eq!(f.run("older.ping"), (0, f.all(json!(true))));

    // Signed by a key the maids do not trust, filed in place of the
    // master's push of the same content, which a job then pins.
    let other = f.dir.path().join("other");
    f.cli(&["keygen", other.to_str().unwrap()]);
    f.push(&[guests::FIXTURE_OLDER], &other.with_extension("key"));
    let pin_v1 = format!("modules={{\"older\": \"{sha}\"}}");
    let (code, returns) = f.run_with("saltutil.sync_modules", &[&pin_v1]);
    assert_eq!(code, 1);
    assert_eq!(
        refusals(&returns, "older"),
        vec!["no trusted key matches the signer's kid"; 2]
    );

    // A module the maids' policy does not allow, and one that would replace
    // a locally installed plugin.
    f.push(&[guests::FIXTURE_SOCKETS], &f.key);
    f.push(&[guests::PLUGIN_TEST], &f.key);
    let (code, returns) = f.run("saltutil.sync_modules");
    assert_eq!(code, 1);
    assert_eq!(
        refusals(&returns, "sockets"),
        vec!["not allowed by this maid's sync.allow"; 2]
    );
    for reason in refusals(&returns, "test") {
        assert!(reason.contains("installed in plugin_dir"), "{reason}");
    }
    let (code, returns) = f.run("sockets.connect");
    assert_eq!(code, 1);
    assert_eq!(returns, f.all(json!("'sockets.connect' is not available.")));
    // What already ran keeps running, unchanged.
    assert_eq!(f.run("older.ping"), (0, f.all(json!(true))));
    assert_eq!(f.run("test.ping"), (0, f.all(json!(true))));
    for id in IDS {
        let refused: Vec<Value> = f
            .audit(id)
            .into_iter()
            .filter(|r| r["decision"] == "plugin_refused")
            .collect();
        let modules: Vec<&str> = refused
            .iter()
            .map(|r| r["module"].as_str().unwrap())
            .collect();
        assert!(
            ["older", "sockets", "test"]
                .iter()
                .all(|m| modules.contains(m)),
            "{refused:?}"
        );
        assert!(refused.iter().all(|r| r["reason"].is_string()));
    }
    // Taken off the fleet again: removing what a maid never took changes
    // nothing on it.
    f.push(&["--remove", "sockets"], &f.key);
    f.push(&["--remove", "test"], &f.key);

    // A restarted maid loads what it synced from disk, before any sync.
    agents[0].kill();
    let _: () = redis::AsyncCommands::del(&mut conn, &["maid:plugins", "maid:alive:sync-a"])
        .await
        .unwrap();
    agents[0] = f.agent(IDS[0]).await;
    assert_eq!(f.run("older.ping"), (0, f.all(json!(true))));
    let startup: Vec<Value> = f
        .plugin_records(IDS[0], "older")
        .into_iter()
        .filter(|r| r["source"] == "startup")
        .collect();
    assert_eq!(startup.len(), 1, "{startup:?}");
    assert_eq!(startup[0]["plugin_sha256"], big_sha);
    assert_eq!(startup[0]["signer"], f.kid);

    // A signed removal unloads it; the older push, replayed, is ignored,
    // and refused where a job pins it.
    assert_eq!(
        f.push(&["--remove", "older"], &f.key),
        format!("older removed, signed by {}\n", f.kid)
    );
    assert_eq!(
        f.run("saltutil.sync_modules"),
        (0, f.all(json!(["modules.older"])))
    );
    let (code, returns) = f.run("older.ping");
    assert_eq!(code, 1);
    assert_eq!(returns, f.all(json!("'older.ping' is not available.")));
    let _: () = redis::AsyncCommands::hset(&mut conn, "maid:plugins", "older", &good_push)
        .await
        .unwrap();
    let _: () = redis::AsyncCommands::hset(&mut conn, "maid:plugins:older", &sha, &good_push)
        .await
        .unwrap();
    assert_eq!(f.run("saltutil.sync_modules"), (0, f.all(json!([]))));
    let (code, returns) = f.run_with("saltutil.sync_modules", &[&pin_v1]);
    assert_eq!(code, 1);
    for reason in refusals(&returns, "older") {
        assert!(reason.contains("not rolled back"), "{reason}");
    }
    let (code, _) = f.run("older.ping");
    assert_eq!(code, 1);
    for id in IDS {
        let last = f.plugin_records(id, "older");
        assert!(
            last.iter()
                .any(|r| r["decision"] == "plugin_removed" && r["signer"] == f.kid),
            "{last:?}"
        );
    }
}

#[test]
fn push_needs_the_master_key_and_a_component() {
    let f = Fleet::new();
    let o = f.cli(&["plugin", "push", guests::FIXTURE_OLDER]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("must be signed"),
        "{o:?}"
    );
    let not_wasm = f.dir.path().join("notes.wasm");
    std::fs::write(&not_wasm, "not a component").unwrap();
    let o = f.cli(&[
        "plugin",
        "push",
        not_wasm.to_str().unwrap(),
        "--key",
        f.key.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("not a WebAssembly component"),
        "{o:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_agent_does_not_install_an_older_signed_plugin() {
    let f = Fleet::new();
    // v1, then v2, both signed by the master; then a Redis writer restores
    // v1 as the module's latest entry.
    let v1_sha = pushed_sha(&f.push(&[guests::FIXTURE_OLDER], &f.key));
    let v1_entry = f.stored("maid:plugins", "older").await;
    let v2 = padded(&f.dir.path().join("v2/older.wasm"), b'a');
    let v2_sha = pushed_sha(&f.push(&[v2.to_str().unwrap()], &f.key));
    f.tamper("maid:plugins", "older", Some(&v1_entry)).await;

    // A fresh maid takes nothing on its own, and the signed sync job,
    // which pins v2, installs v2.
    let _a = f.agent(IDS[0]).await;
    let (code, returns) = f.run("older.ping");
    assert_eq!(code, 1, "{returns:?}");
    assert_eq!(returns[IDS[0]], json!("'older.ping' is not available."));
    assert_eq!(
        f.run("saltutil.sync_modules"),
        (
            0,
            BTreeMap::from([(IDS[0].to_string(), json!(["modules.older"]))])
        )
    );
    assert_eq!(
        f.run("older.ping"),
        (0, BTreeMap::from([(IDS[0].to_string(), json!(true))]))
    );
    assert_eq!(f.loaded(IDS[0], "older"), vec![v2_sha.clone()]);

    // With v2's entry deleted as well, the next fresh maid refuses, naming
    // the module and the pin, and still does not take v1.
    f.tamper("maid:plugins:older", &v2_sha, None).await;
    let _b = f.agent(IDS[1]).await;
    let (code, returns) = f.run("saltutil.sync_modules");
    assert_eq!(code, 1, "{returns:?}");
    assert_eq!(returns[IDS[0]], json!([]));
    let reason = returns[IDS[1]]["refused"]["modules.older"]
        .as_str()
        .unwrap_or_else(|| panic!("{returns:?}"));
    assert!(
        reason.contains(&v2_sha) && reason.contains("not in the store"),
        "{reason}"
    );
    let (code, returns) = f.run("older.ping");
    assert_eq!(code, 1);
    assert_eq!(returns[IDS[0]], json!(true));
    assert_eq!(returns[IDS[1]], json!("'older.ping' is not available."));
    assert!(f.loaded(IDS[1], "older").is_empty());
    assert!(!f.loaded(IDS[0], "older").contains(&v1_sha));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_writer_cannot_hold_back_an_update() {
    let f = Fleet::new();
    let _agents = [f.agent(IDS[0]).await, f.agent(IDS[1]).await];
    let v1_sha = pushed_sha(&f.push(&[guests::FIXTURE_OLDER], &f.key));
    assert_eq!(
        f.run("saltutil.sync_modules"),
        (0, f.all(json!(["modules.older"])))
    );
    let v1_entry = f.stored("maid:plugins", "older").await;

    // v2 is pushed and the writer restores v1's entry: v2 arrives anyway.
    let v2 = padded(&f.dir.path().join("v2/older.wasm"), b'a');
    let v2_sha = pushed_sha(&f.push(&[v2.to_str().unwrap()], &f.key));
    f.tamper("maid:plugins", "older", Some(&v1_entry)).await;
    assert_eq!(
        f.run("saltutil.sync_modules"),
        (0, f.all(json!(["modules.older"])))
    );

    // v3 is pushed; the writer restores v1's entry and deletes v3's: every
    // maid fails, naming the module and the pin, and keeps v2.
    let v3 = padded(&f.dir.path().join("v3/older.wasm"), b'b');
    let v3_sha = pushed_sha(&f.push(&[v3.to_str().unwrap()], &f.key));
    let v3_entry = f.stored("maid:plugins:older", &v3_sha).await;
    f.tamper("maid:plugins", "older", Some(&v1_entry)).await;
    f.tamper("maid:plugins:older", &v3_sha, None).await;
    let (code, returns) = f.run("saltutil.sync_modules");
    assert_eq!(code, 1, "{returns:?}");
    for reason in refusals(&returns, "older") {
        assert!(
            reason.contains(&v3_sha) && reason.contains("not in the store"),
            "{reason}"
        );
    }
    // Or files an older signed entry under v3's hash: refused all the same.
    let v2_entry = f.stored("maid:plugins:older", &v2_sha).await;
    f.tamper("maid:plugins:older", &v3_sha, Some(&v2_entry))
        .await;
    let (code, returns) = f.run("saltutil.sync_modules");
    assert_eq!(code, 1, "{returns:?}");
    for reason in refusals(&returns, "older") {
        assert!(
            reason.contains(&format!("not the pinned {v3_sha}")),
            "{reason}"
        );
    }
    assert_eq!(f.run("older.ping"), (0, f.all(json!(true))));
    for id in IDS {
        assert_eq!(f.loaded(id, "older"), vec![v1_sha.clone(), v2_sha.clone()]);
    }

    // Once v3's entry is back, the same job installs it.
    f.tamper("maid:plugins:older", &v3_sha, Some(&v3_entry))
        .await;
    assert_eq!(
        f.run("saltutil.sync_modules"),
        (0, f.all(json!(["modules.older"])))
    );
    for id in IDS {
        assert_eq!(f.loaded(id, "older").last(), Some(&v3_sha));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_maid_requiring_signed_jobs_installs_nothing_on_its_own() {
    let f = Fleet::new();
    f.push(&[guests::FIXTURE_OLDER], &f.key);
    let (signed, unsigned) = (IDS[0], IDS[1]);
    let _a = f.agent_with(signed, true, 1).await;
    let _b = f.agent_with(unsigned, false, 1).await;

    // The maid that takes unsigned jobs syncs on its own, as it always did.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while f.run("older.ping").1.get(unsigned) != Some(&json!(true)) {
        assert!(
            std::time::Instant::now() < deadline,
            "{unsigned} never synced"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    // The one that requires signed jobs took nothing, over several polls.
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    let (_, returns) = f.run("older.ping");
    assert_eq!(returns[signed], json!("'older.ping' is not available."));
    assert!(f.loaded(signed, "older").is_empty());
    assert!(!f.state(signed).join("synced/older.wasm").exists());

    // A signed sync job that pins nothing is refused there, saying how to
    // pin; the other maid syncs as before (nothing new).
    let mut req = request("*", "glob", "saltutil.sync_modules", json!([]), json!({}));
    req.key = Some(maid_agent::trust::read_signing_key(&f.key).unwrap());
    let report = maid_master::jobs::run(&f.bus, &req, |_| {}).await.unwrap();
    let ret = |id: &str| {
        report
            .returns
            .iter()
            .find(|r| r.id == id)
            .unwrap_or_else(|| panic!("{report:?}"))
            .clone()
    };
    assert_eq!(ret(signed).retcode, 1);
    assert!(
        ret(signed)
            .ret
            .as_str()
            .is_some_and(|r| r.starts_with("Sync refused:") && r.contains("modules=")),
        "{:?}",
        ret(signed).ret
    );
    assert_eq!((ret(unsigned).retcode, ret(unsigned).ret), (0, json!([])));
    assert!(f.loaded(signed, "older").is_empty());
}
