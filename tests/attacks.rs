//! The agent attacked as a hostile master, job sender or Redis writer
//! would attack it, against real agents and a real `redis-server`: one
//! named test per hole found (docs/security.md, "Threat model"). Each
//! fails if its hole reopens: the hostile step is shown to work outside
//! the agent where that can be shown, then shown not to work through it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::fleet::{
    Agent, TOPIC, collect_replies, request, run, start_agent, wait_registered,
};
use crate::common::redis::RedisServer;
use ed25519_dalek::SigningKey;
use maid_agent::protocol::{Reply, Return};
use maid_bus::{Bus, RedisConfig};
use serde_json::{Value, json};

/// A real agent's only return for `fun` with `arg`, `kwarg`.
pub(crate) async fn one_return(bus: &Bus, fun: &str, arg: Value, kwarg: Value) -> Return {
    let report = run(bus, &request("*", "glob", fun, arg, kwarg)).await;
    assert_eq!(report.returns.len(), 1, "{report:?}");
    report.returns[0].clone()
}

pub(crate) fn assert_denied(r: &Return, what: &str) {
    let text = r.ret.as_str().unwrap_or_default();
    assert_eq!(r.retcode, 77, "{what}: {r:?}");
    assert!(text.starts_with("Denied:"), "{what}: {text}");
}

pub(crate) fn toml_str(p: &Path) -> String {
    format!("{:?}", p.display().to_string())
}

// ---------------------------------------------------------------------
// 1. A job's environment
// ---------------------------------------------------------------------

/// A shared object whose constructor writes `marker`.
fn preload_library(dir: &Path, marker: &Path) -> PathBuf {
    let src = dir.join("evil.c");
    std::fs::write(
        &src,
        format!(
            "#include <stdio.h>\n__attribute__((constructor)) static void evil(void) {{\n\
             FILE *f = fopen(\"{}\", \"w\"); if (f) {{ fputs(\"pwned\", f); fclose(f); }} }}\n",
            marker.display()
        ),
    )
    .unwrap();
    let so = dir.join("evil.so");
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&so)
        .arg(&src)
        .status()
        .expect("cc is needed to build the LD_PRELOAD library: apt-get install gcc");
    assert!(status.success());
    so
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_ld_preload_and_path_never_reach_a_program() {
    let work = tempfile::tempdir().unwrap();
    let marker = work.path().join("preloaded");
    let so = preload_library(work.path(), &marker);
    // The library does what an attacker wants when the loader takes it.
    let status = Command::new("/usr/bin/true")
        .env("LD_PRELOAD", &so)
        .status()
        .unwrap();
    assert!(status.success() && marker.exists(), "the library never ran");
    std::fs::remove_file(&marker).unwrap();
    // A program named like a real one, in a directory of the job's choice.
    let bin = work.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let fake = bin.join("hostname");
    std::fs::write(&fake, format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();

    let server = RedisServer::start();
    let bus = Bus::new(&server.config()).unwrap();
    // The widest env grant there is: the hijack set still wins.
    let _a = start_agent(
        &server.config(),
        "env",
        "[plugins.cmd]\nexec = [\"/usr/bin/*\", \"/bin/*\"]\nenv = [\"*\"]\n",
    );
    wait_registered(&bus, &["env"]).await;
    for (name, value) in [
        ("LD_PRELOAD", so.display().to_string()),
        ("LD_LIBRARY_PATH", work.path().display().to_string()),
        ("GLIBC_TUNABLES", "glibc.malloc.check=3".into()),
        ("BASH_ENV", so.display().to_string()),
        ("PYTHONSTARTUP", so.display().to_string()),
        ("PATH", bin.display().to_string()),
    ] {
        let r = one_return(
            &bus,
            "cmd.run",
            json!(["hostname"]),
            json!({"python_shell": false, "env": {name: value}}),
        )
        .await;
        assert_denied(&r, name);
        assert!(!marker.exists(), "{name} reached the program");
    }
    // A granted, harmless variable still reaches it.
    let r = one_return(
        &bus,
        "cmd.run",
        json!(["/usr/bin/printenv MAID_TEST_VAR"]),
        json!({"python_shell": false, "env": {"MAID_TEST_VAR": "ok"}}),
    )
    .await;
    assert_eq!((r.retcode, r.ret.as_str()), (0, Some("ok")), "{r:?}");
}

// ---------------------------------------------------------------------
// 2. Programs are checked where they really are
// ---------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn programs_are_checked_by_their_real_path_and_runners_need_shell() {
    let work = tempfile::tempdir().unwrap();
    let root = work.path().canonicalize().unwrap();
    let allowed = root.join("allowed");
    let outside = root.join("outside");
    std::fs::create_dir_all(&allowed).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let marker = root.join("ran");
    let script = |path: &Path, mark: &Path| {
        std::fs::write(path, format!("#!/bin/sh\ntouch {}\n", mark.display())).unwrap();
        std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
    };
    script(&outside.join("evil"), &marker);
    let good_marker = root.join("good-ran");
    script(&allowed.join("good"), &good_marker);
    std::os::unix::fs::symlink(outside.join("evil"), allowed.join("link")).unwrap();
    // A directory another plugin may write into, inside the allow-list: a
    // job writes a program with `cp` and runs it with `cmd`.
    let dropbox = root.join("dropbox");
    std::fs::create_dir_all(&dropbox).unwrap();
    script(&dropbox.join("dropped"), &marker);

    let server = RedisServer::start();
    let bus = Bus::new(&server.config()).unwrap();
    let _a = start_agent(
        &server.config(),
        "progs",
        // `good` is named exactly: a script reached through a glob alone
        // is not a plain program and needs shell (`attacks_exec`).
        &format!(
            "[plugins.cmd]\nexec = [{}, {}, {}, \"/usr/bin/*\", \"/bin/*\"]\nenv = [\"PATH\"]\n\
             [plugins.cp]\ndirs = [{{ path = {}, writable = true }}]\n",
            toml_str(&allowed.join("**")),
            toml_str(&allowed.join("good")),
            toml_str(&dropbox.join("*")),
            toml_str(&dropbox),
        ),
    );
    wait_registered(&bus, &["progs"]).await;
    let no_shell = json!({"python_shell": false});
    // The allow-list admits its own program...
    let r = one_return(
        &bus,
        "cmd.run",
        json!([allowed.join("good").display().to_string()]),
        no_shell.clone(),
    )
    .await;
    assert_eq!(r.retcode, 0, "{r:?}");
    assert!(good_marker.exists());
    // ...but not a `..` out of it, nor a link inside it that leads out,
    // nor a program where a plugin may write.
    for path in [
        format!("{}/../outside/evil", allowed.display()),
        allowed.join("link").display().to_string(),
        dropbox.join("dropped").display().to_string(),
    ] {
        let r = one_return(&bus, "cmd.run", json!([path.clone()]), no_shell.clone()).await;
        assert_denied(&r, &path);
        assert!(!marker.exists(), "{path} ran");
    }
    // Programs that run code from their arguments, allowed by the glob,
    // refused without the shell grant.
    let touch = format!("touch {}", marker.display());
    for argv in [
        format!("/usr/bin/env sh -c '{touch}'"),
        format!("/usr/bin/python3 -c 'import os; os.system(\"{touch}\")'"),
        format!("/usr/bin/perl -e 'system(\"{touch}\")'"),
        format!("/usr/bin/find / -maxdepth 0 -exec {touch} ;"),
        format!("/usr/bin/timeout 5 {touch}"),
        format!("/usr/bin/xargs -a /dev/null {touch}"),
        format!("/bin/sh -c '{touch}'"),
    ] {
        let program = argv.split(' ').next().unwrap();
        if !Path::new(program).exists() {
            continue;
        }
        let r = one_return(&bus, "cmd.run", json!([argv.clone()]), no_shell.clone()).await;
        assert_denied(&r, &argv);
        assert!(!marker.exists(), "{argv} ran");
    }
}

// ---------------------------------------------------------------------
// 4. Replay, and what an agent needs before it starts
// ---------------------------------------------------------------------

/// A signed fleet's pieces.
struct Signed {
    server: RedisServer,
    redis: RedisConfig,
    bus: Bus,
    key: SigningKey,
    state: tempfile::TempDir,
}

impl Signed {
    fn new() -> Self {
        let server = RedisServer::start();
        let redis = server.config();
        let bus = Bus::new(&redis).unwrap();
        Self {
            server,
            redis,
            bus,
            key: maid_agent::trust::generate().unwrap(),
            state: tempfile::tempdir().unwrap(),
        }
    }

    fn public(&self) -> PathBuf {
        let p = self.state.path().join("master.pub");
        std::fs::write(
            &p,
            maid_agent::trust::encode_verifying(&self.key.verifying_key()),
        )
        .unwrap();
        p
    }

    fn audit_path(&self) -> PathBuf {
        self.state.path().join("audit.jsonl")
    }

    /// The `[security]` and `[audit]` tables, plus `extra`.
    fn toml(&self, extra: &str) -> String {
        format!(
            "[security]\nrequire_signed = true\ntrusted_keys = [{}]\nstate_dir = {}\n\
             [audit]\npath = {}\n{extra}",
            toml_str(&self.public()),
            toml_str(&self.state.path().join("state")),
            toml_str(&self.audit_path()),
        )
    }

    async fn agent(&self, id: &str, extra: &str) -> Agent {
        let a = start_agent(&self.redis, id, &self.toml(extra));
        wait_registered(&self.bus, &[id]).await;
        a
    }

    /// A signed `test.ping` for `topic`, replying on `reply`.
    fn job(&self, jid: &str, reply: &str, topic: &str, fields: Value) -> String {
        let mut job = json!({"jid": jid, "tempTopic": reply, "fun": "test.ping", "tgt": "*",
                             "issued_at": chrono::Utc::now().timestamp_millis(),
                             "topic": topic});
        for (k, v) in fields.as_object().unwrap() {
            job[k] = v.clone();
        }
        serde_json::to_string(&maid_agent::trust::sign(job.to_string(), &self.key)).unwrap()
    }

    /// Publish `payload` on `topic` and collect replies on `reply`.
    async fn send(&self, topic: &str, reply: &str, payload: &str, expect: usize) -> Vec<Reply> {
        let sub = self.bus.subscribe(&[reply.to_string()]).await.unwrap();
        let mut conn = self.bus.connect().await.unwrap();
        maid_bus::publish(&mut conn, topic, payload).await.unwrap();
        collect_replies(sub.into_on_message(), expect, crate::common::fleet::LINGER).await
    }

    fn audit(&self) -> Vec<Value> {
        std::fs::read_to_string(self.audit_path())
            .unwrap_or_default()
            .split_inclusive('\n')
            .filter(|l| l.ends_with('\n'))
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    async fn audit_when(&self, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + crate::common::fleet::REPLY_DEADLINE;
        loop {
            let audit = self.audit();
            if done(&audit) || Instant::now() > deadline {
                return audit;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn rejected(replies: &[Reply]) -> Vec<String> {
    replies
        .iter()
        .filter_map(|r| match r {
            Reply::Reject(r) => Some(r.reason.clone()),
            _ => None,
        })
        .collect()
}

fn returned(replies: &[Reply]) -> usize {
    replies
        .iter()
        .filter(|r| matches!(r, Reply::Return(_)))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jids_are_remembered_until_their_job_expires_never_evicted_for_room() {
    let s = Signed::new();
    let mut a = s.agent("replay", "[agent]\nremembered_jids = 3\n").await;
    for i in 0..3 {
        let jid = format!("2026112400000000000{i}");
        let r = s
            .send(TOPIC, "r", &s.job(&jid, "r", TOPIC, json!({})), 2)
            .await;
        assert_eq!(returned(&r), 1, "{r:?}");
    }
    // Once full, a new job is refused; before, the oldest id was forgotten
    // to make room, and replaying it ran it again.
    let r = s
        .send(
            TOPIC,
            "r",
            &s.job("20261124000000000009", "r", TOPIC, json!({})),
            1,
        )
        .await;
    assert_eq!(rejected(&r), ["busy"], "{r:?}");
    let first = s.job("20261124000000000000", "r", TOPIC, json!({}));
    let r = s.send(TOPIC, "r", &first, 1).await;
    assert_eq!(rejected(&r), ["replayed"], "{r:?}");
    // Across a restart too. (The old registry entry is still alive: wait
    // for the new agent's subscription instead.)
    a.kill();
    let _a = start_agent(
        &s.redis,
        "replay",
        &s.toml("[agent]\nremembered_jids = 3\n"),
    );
    crate::common::fleet::wait_subscribers(&s.bus, 1).await;
    let r = s.send(TOPIC, "r", &first, 1).await;
    assert_eq!(rejected(&r), ["replayed"], "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_signed_for_one_master_topic_is_refused_on_another() {
    let s = Signed::new();
    // One agent hears two masters' topics.
    let mut config = tempfile::NamedTempFile::new().unwrap();
    let text = format!(
        "master_topics = [\"{TOPIC}\", \"master-other\"]\n{}\n[redis]\n{}",
        s.toml(""),
        toml::to_string(&s.redis).unwrap()
    );
    std::io::Write::write_all(&mut config, text.as_bytes()).unwrap();
    let _child = ChildGuard(
        crate::common::maid_command()
            .args(["agent", "--id", "two", "-c"])
            .arg(config.path())
            .env("MAID_PLUGIN_DIR", crate::common::guests::PLUGINS_DIR)
            .env("MAID_CACHE_DIR", crate::common::shared_cache())
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_registered(&s.bus, &["two"]).await;
    let job = s.job("20261124000000000100", "r", TOPIC, json!({}));
    let r = s.send("master-other", "r", &job, 1).await;
    assert_eq!(rejected(&r), ["wrong topic"], "{r:?}");
    // On its own topic it runs (the refusal did not use up the jid).
    let r = s.send(TOPIC, "r", &job, 2).await;
    assert_eq!(returned(&r), 1, "{r:?}");
    // Signed without a topic: refused.
    let mut bare = json!({"jid": "20261124000000000101", "tempTopic": "r", "fun": "test.ping",
                          "issued_at": chrono::Utc::now().timestamp_millis()});
    bare["tgt"] = json!("*");
    let env = serde_json::to_string(&maid_agent::trust::sign(bare.to_string(), &s.key)).unwrap();
    let r = s.send(TOPIC, "r", &env, 1).await;
    assert_eq!(rejected(&r), ["malformed"], "{r:?}");
}

/// Kills its child on drop.
struct ChildGuard(std::process::Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `maid agent` with `config`: its exit status and stderr, or a panic if
/// it is still running after a few seconds.
pub(crate) fn agent_exit(config: &str) -> (std::process::ExitStatus, String) {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut file, config.as_bytes()).unwrap();
    let mut child = crate::common::maid_command()
        .args(["agent", "--id", "nostart", "-c"])
        .arg(file.path())
        .env("MAID_PLUGIN_DIR", crate::common::guests::PLUGINS_DIR)
        .env("MAID_CACHE_DIR", crate::common::shared_cache())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
            return (status, err);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the agent started with {config}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn an_agent_that_was_not_told_how_to_trust_jobs_does_not_start() {
    let server = RedisServer::start();
    let redis = toml::to_string(&server.config()).unwrap();
    let base = format!("master_topics = [\"{TOPIC}\"]\n[redis]\n{redis}");
    // No [security] table: before, it ran unsigned jobs without a word.
    let (status, err) = agent_exit(&base);
    assert!(!status.success());
    assert!(err.contains("security.require_signed is not set"), "{err}");
    // Signatures required, but nowhere to remember jids across a restart.
    let key = maid_agent::trust::generate().unwrap();
    let pk = maid_agent::trust::encode_verifying(&key.verifying_key());
    let (status, err) = agent_exit(&format!(
        "{base}\n[security]\nrequire_signed = true\ntrusted_keys = [\"{pk}\"]\n"
    ));
    assert!(!status.success());
    assert!(err.contains("state_dir"), "{err}");
}

// ---------------------------------------------------------------------
// 5. The audit log under a flood, and what a refusal may cost
// ---------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_junk_never_costs_a_real_job_its_audit_record() {
    let s = Signed::new();
    let _a = s.agent("flooded", "queue = 8\n").await;
    let junk_topic = "maid.reply.junk";
    let sub = s.bus.subscribe(&[junk_topic.to_string()]).await.unwrap();
    let mut conn = s.bus.connect().await.unwrap();
    // 6 000 forgeries, the real job in the middle of them.
    let forged = |i: usize| {
        json!({"payload": json!({"jid": format!("junk-{i}"), "tempTopic": junk_topic,
                                 "fun": "cmd.run", "arg": ["id"], "topic": TOPIC,
                                 "issued_at": 0}).to_string(),
               "sig": "AAAA", "kid": "0123456789abcdef"})
        .to_string()
    };
    let real = "20261124000000000200";
    let mut pipe = redis::pipe();
    for i in 0..3_000 {
        pipe.cmd("PUBLISH").arg(TOPIC).arg(forged(i)).ignore();
    }
    pipe.cmd("PUBLISH")
        .arg(TOPIC)
        .arg(s.job(real, "maid.reply.real", TOPIC, json!({})))
        .ignore();
    for i in 3_000..6_000 {
        pipe.cmd("PUBLISH").arg(TOPIC).arg(forged(i)).ignore();
    }
    let sent = Instant::now();
    let (): () = pipe.query_async(&mut conn).await.unwrap();
    let audit = s
        .audit_when(|a| {
            a.iter().any(|r| r["jid"] == real) && a.iter().any(|r| r["decision"] == "suppressed")
        })
        .await;
    let elapsed = sent.elapsed().as_secs_f64();
    let ran: Vec<&Value> = audit.iter().filter(|r| r["jid"] == real).collect();
    assert_eq!(ran.len(), 1, "the real job's record is missing");
    assert_eq!(ran[0]["decision"], "ran");
    // The junk was summarised: written one by one only up to the rate.
    let one_by_one = audit.iter().filter(|r| r["decision"] == "rejected").count();
    let summarised: u64 = audit
        .iter()
        .filter(|r| r["decision"] == "suppressed")
        .flat_map(|r| r["suppressed"].as_object().unwrap().values())
        .map(|n| n.as_u64().unwrap())
        .sum();
    assert!(summarised > 0, "nothing was summarised");
    assert!(
        (one_by_one as f64) < 1_000.0 + 200.0 * (elapsed + 2.0),
        "{one_by_one} junk records in {elapsed:.1} s"
    );
    // And the forger got no more answers than the rate allows.
    let replies = collect_replies(sub.into_on_message(), 6_000, Duration::from_secs(1)).await;
    assert!(
        (replies.len() as f64) < 1_000.0 + 200.0 * (sent.elapsed().as_secs_f64() + 2.0),
        "{} replies",
        replies.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_bounded_and_say_what_was_asked() {
    let s = Signed::new();
    let _a = s.agent("bounded", "").await;
    // A jid or reply topic over 256 bytes: no reply, no record of it.
    let long = "J".repeat(300);
    let forged = |jid: &str, reply: &str| {
        json!({"payload": json!({"jid": jid, "tempTopic": reply, "fun": "cmd.run",
                                 "arg": ["rm -rf /"], "kwarg": {"cwd": "/"}, "topic": TOPIC,
                                 "issued_at": chrono::Utc::now().timestamp_millis()}).to_string(),
               "sig": "AAAA", "kid": "feedfacecafebeef"})
        .to_string()
    };
    let r = s.send(TOPIC, "r", &forged(&long, "r"), 0).await;
    assert!(r.is_empty(), "{r:?}");
    let r = s
        .send(TOPIC, &long, &forged("20261124000000000300", &long), 0)
        .await;
    assert!(r.is_empty(), "{r:?}");
    // A refused job's record names what it asked for and the key it claimed.
    let r = s
        .send(TOPIC, "r", &forged("20261124000000000301", "r"), 1)
        .await;
    assert_eq!(rejected(&r), ["bad signature"]);
    let audit = s
        .audit_when(|a| a.iter().any(|r| r["jid"] == "20261124000000000301"))
        .await;
    assert!(
        !audit
            .iter()
            .any(|r| r["jid"].as_str().unwrap_or("").contains(&long))
    );
    let rec = audit
        .iter()
        .find(|r| r["jid"] == "20261124000000000301")
        .unwrap();
    assert_eq!(rec["fun"], "cmd.run");
    assert_eq!(rec["claimed_kid"], "feedfacecafebeef");
    let digest = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(
        serde_json::to_vec(&json!([["rm -rf /"], {"cwd": "/"}])).unwrap(),
    ));
    assert_eq!(rec["args_sha256"], digest.as_str());
}

// ---------------------------------------------------------------------
// 6. Numbers
// ---------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn numbers_out_of_any_range_are_refused_and_the_agent_serves_on() {
    let s = Signed::new();
    let _a = s.agent("numbers", "").await;
    // A timeout no clock holds: before, the job's task panicked after its
    // PING, and nothing returned or was audited.
    let huge = s.job(
        "20261124000000000400",
        "r",
        TOPIC,
        json!({"timeout": 1e300}),
    );
    let r = s.send(TOPIC, "r", &huge, 1).await;
    assert_eq!(rejected(&r), ["malformed"], "{r:?}");
    // issued_at at i64's ends: the skew check overflowed and let it in.
    for (i, at) in [i64::MIN, i64::MIN + 1, i64::MAX].into_iter().enumerate() {
        let jid = format!("2026112400000000041{i}");
        let old = s.job(&jid, "r", TOPIC, json!({"issued_at": at}));
        let r = s.send(TOPIC, "r", &old, 1).await;
        assert_eq!(rejected(&r), ["expired"], "{at}: {r:?}");
    }
    // The agent is still there and answers.
    let r = s
        .send(
            TOPIC,
            "r",
            &s.job("20261124000000000420", "r", TOPIC, json!({})),
            2,
        )
        .await;
    assert_eq!(returned(&r), 1, "{r:?}");
    drop(s.server);
}
