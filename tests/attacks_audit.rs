//! Security round 4 on the audit trail: what a record may hold, whose
//! name it may carry, and what verification finds removed.
//!
//! Each test performs an attack of issue #67 against real maids, a real
//! `redis-server` and the real `maid` binary: a state run's command line
//! rendered from pillar (or sent as a job argument) reaching the records;
//! a record appended to a maid's own stream in another maid's name; the
//! oldest entries of a stream removed with `XDEL`, or the whole stream
//! deleted; a job whose function name holds terminal escapes.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::api::Fleet;
use crate::common::fleet::{TOPIC, maid_cli, wait_registered};
use crate::pillar_delivery::write;

/// `maid ARGS` with `-c config` (when given) against the fleet's Redis.
fn maid(fleet: &Fleet, config: Option<&Path>, args: &[&str]) -> Output {
    let mut all: Vec<&str> = args.to_vec();
    let config = config.map(|c| c.display().to_string());
    if let Some(c) = &config {
        all.extend(["-c", c]);
    }
    maid_cli(fleet.redis.url.as_deref().unwrap(), &all, fleet.dir.path())
}

/// Exit code and stdout + stderr of an output.
fn said(o: &Output) -> (i32, String) {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.code().unwrap_or(-1), text)
}

/// A master configuration holding the fleet's master key.
fn master_toml(fleet: &Fleet, extra: &str) -> PathBuf {
    let dir = fleet.dir.path();
    let path = dir.join("master.toml");
    std::fs::write(
        &path,
        format!(
            "master_topics = [\"{TOPIC}\"]\n[master]\nkey = {:?}\n{extra}",
            dir.join("master.key"),
        ),
    )
    .unwrap();
    path
}

/// The lines of maid `id`'s stream, oldest first, with their entry ids.
/// Append to maid `id`'s stream a record of `fields` that links to its
/// last one (the next `seq`, `prev` its line's SHA-256), as any writer
/// can: its entry's number in the stream.
async fn append_linked(fleet: &Fleet, id: &str, mut fields: Value) -> usize {
    let entries = stream(fleet, id).await;
    let head = maid_protocol::auditchain::Head::of_line(&entries.last().unwrap().1).unwrap();
    fields["seq"] = json!(head.seq + 1);
    fields["prev"] = json!(head.sha256);
    let line = serde_json::to_vec(&fields).unwrap();
    let mut conn = fleet.bus.connect().await.unwrap();
    let _: String = redis::cmd("XADD")
        .arg(format!("maid:audit:{id}"))
        .arg("*")
        .arg("line")
        .arg(&line)
        .query_async(&mut conn)
        .await
        .unwrap();
    entries.len() + 1
}

async fn stream(fleet: &Fleet, id: &str) -> Vec<(String, Vec<u8>)> {
    let mut conn = fleet.bus.connect().await.unwrap();
    let entries: Vec<(String, Vec<Vec<u8>>)> = redis::cmd("XRANGE")
        .arg(format!("maid:audit:{id}"))
        .arg("-")
        .arg("+")
        .query_async(&mut conn)
        .await
        .unwrap();
    entries
        .into_iter()
        .map(|(id, fields)| {
            let line = fields
                .chunks_exact(2)
                .find(|kv| kv[0] == b"line")
                .map(|kv| kv[1].clone())
                .unwrap();
            (id, line)
        })
        .collect()
}

/// Wait until `f` holds (40 s at most).
async fn until(what: &str, mut f: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(40);
    while !f().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Hex SHA-256 of `value` as JSON: how records digest what they do not
/// keep (`args_sha256`, `argv_sha256`, and now a state's `id` and `name`).
fn json_sha256(value: &Value) -> String {
    hex::encode(<sha2::Sha256 as sha2::Digest>::digest(
        serde_json::to_vec(value).unwrap(),
    ))
}

/// Grants and audit sinks for the maids of these tests.
fn audited(fleet: &Fleet, id: &str, more: &str) -> String {
    format!(
        "[audit]\npath = {:?}\nstream = true\n\
         [plugins.cmd]\nexec = [\"/usr/bin/*\", \"/bin/*\"]\n{more}",
        fleet.dir.path().join(format!("{id}.audit")),
    )
}

/// Ping maid `id` with a signed job through `maid run`.
fn ping(fleet: &Fleet, config: &Path, id: &str) {
    let (code, out) = said(&maid(fleet, Some(config), &["run", id, "test.ping"]));
    assert_eq!(code, 0, "{out}");
}

// ---------------------------------------------------------------------
// 2. Secrets in a state run's record
// ---------------------------------------------------------------------

/// A state whose command line is rendered from pillar, and one whose id
/// is: applied with `state.apply`, and a command line sent as a job
/// argument with `state.single`. Before, each state's `id` and `name`
/// went into the record in clear: the password reached the file, the
/// stream and every reader of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_runs_command_lines_reach_no_record() {
    let mut fleet = Fleet::new();
    let dir = fleet.dir.path().to_path_buf();
    write(
        &dir.join("pillar"),
        &[
            ("top.sls", "base:\n  '*':\n    - db\n"),
            ("db.sls", "db:\n  password: pillar-s3cret-pw\n"),
        ],
    );
    write(
        &dir.join("srv"),
        &[(
            "web.sls",
            "print_it:\n  cmd.run:\n    - name: /usr/bin/echo {{ pillar.db.password }}\n\
             /usr/bin/echo id-{{ pillar.db.password }}:\n  cmd.run\n",
        )],
    );
    let config = master_toml(
        &fleet,
        &format!(
            "pki_dir = {:?}\npillar_roots = [{:?}]\nfile_roots = [{:?}]\n",
            dir.join("pki"),
            dir.join("pillar"),
            dir.join("srv")
        ),
    );
    let grants = audited(
        &fleet,
        "web-1",
        // (in [plugins.cmd]: Salt's states run their names in a shell)
        "shell = true\n[plugins.state]\nfetch = [\"salt://**\"]\npillar = true\n\
         call = [\"cmd.run_all\", \"cmd.retcode\"]\n",
    );
    fleet.agents.push(fleet.signed_agent("web-1", &grants));
    wait_registered(&fleet.bus, &["web-1"]).await;
    let (code, out) = said(&maid(&fleet, Some(&config), &["key", "-A", "-y"]));
    assert_eq!(code, 0, "{out}");

    let (code, out) = said(&maid(
        &fleet,
        Some(&config),
        &["run", "--out", "json", "web-1", "state.apply", "web"],
    ));
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("pillar-s3cret-pw"),
        "the state ran with the password: {out}"
    );
    let (code, out) = said(&maid(
        &fleet,
        Some(&config),
        &[
            "run",
            "--out",
            "json",
            "web-1",
            "state.single",
            "cmd.run",
            "name=/usr/bin/echo -parg-s3cret",
        ],
    ));
    assert_eq!(code, 0, "{out}");

    let file = dir.join("web-1.audit");
    let mut records: Vec<Value> = Vec::new();
    until("both state runs in web-1's stream", async || {
        records = stream(&fleet, "web-1")
            .await
            .iter()
            .filter_map(|(_, l)| serde_json::from_slice(l).ok())
            .collect();
        records
            .iter()
            .filter(|r| r["fun"].as_str().unwrap_or("").starts_with("state."))
            .count()
            == 2
    })
    .await;
    let text = std::fs::read_to_string(&file).unwrap();
    for secret in ["pillar-s3cret", "arg-s3cret"] {
        assert!(
            !text.contains(secret),
            "{secret} in the audit file:\n{text}"
        );
        let streamed = serde_json::to_string(&records).unwrap();
        assert!(!streamed.contains(secret), "{secret} in the stream");
    }
    // What a record keeps of a state: its function, result and the
    // digests of its id and name, which whoever holds the rendered
    // states can check.
    let applied = records.iter().find(|r| r["fun"] == "state.apply").unwrap();
    let states = applied["states"].as_array().unwrap();
    assert_eq!(states.len(), 2, "{applied}");
    let name = json!("/usr/bin/echo pillar-s3cret-pw");
    let named = states
        .iter()
        .find(|s| s["name_sha256"] == json_sha256(&name).as_str())
        .unwrap_or_else(|| panic!("no state with the name's digest: {applied}"));
    assert_eq!(named["function"], "cmd.run");
    assert_eq!(named["id_sha256"], json_sha256(&json!("print_it")).as_str());
    assert_eq!(named["result"], true);
    assert!(named.get("name").is_none() && named.get("id").is_none());
    // The records are still found by function.
    let (code, out) = said(&maid(
        &fleet,
        None,
        &["audit", "query", "--out", "json", "--fun", "state.*"],
    ));
    assert_eq!(code, 0, "{out}");
    let found: Vec<Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(found.len(), 2, "{out}");
}

// ---------------------------------------------------------------------
// 3. A record in another maid's name
// ---------------------------------------------------------------------

/// web-1's host (or web-1's own Redis user, which may `XADD` to web-1's
/// stream) appends a record that links to the chain and names db-1.
/// Before, `maid audit query` showed it as db-1's without a mark and
/// `maid audit verify --stream web-1` found the chain intact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_in_another_maids_name_is_found_and_marked() {
    let mut fleet = Fleet::new();
    let config = master_toml(&fleet, "");
    fleet
        .agents
        .push(fleet.signed_agent("web-1", &audited(&fleet, "web-1", "")));
    wait_registered(&fleet.bus, &["web-1"]).await;
    ping(&fleet, &config, "web-1");
    until("web-1's ping in its stream", async || {
        stream(&fleet, "web-1")
            .await
            .iter()
            .any(|(_, l)| String::from_utf8_lossy(l).contains("test.ping"))
    })
    .await;
    let at = append_linked(
        &fleet,
        "web-1",
        json!({"minion": "db-1", "time": "2026-11-29T02:00:00.000000",
               "jid": "20261129020000000000", "fun": "cmd.run", "user": "mallory",
               "decision": "ran", "retcode": 0}),
    )
    .await;
    let key = fleet.dir.path().join("web-1/minion.pub");
    let key = key.to_str().unwrap();
    let (code, out) = said(&maid(
        &fleet,
        None,
        &["audit", "verify", "--stream", "web-1", "--key", key],
    ));
    assert_eq!(code, 1, "a record in db-1's name passed: {out}");
    assert!(
        out.contains(&format!("line {at}")) && out.contains("db-1"),
        "{out}"
    );
    // Query shows it, marked, whoever looks for it.
    let (code, out) = said(&maid(
        &fleet,
        None,
        &["audit", "query", "--out", "json", "--user", "mallory"],
    ));
    assert_eq!(code, 0, "{out}");
    let found: Vec<Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(found.len(), 1, "{out}");
    let mark = found[0]["_minion"].as_str().unwrap_or_else(|| {
        panic!("a record in db-1's name from web-1's stream is not marked: {out}")
    });
    assert!(mark.contains("maid:audit:web-1"), "{mark}");
    let (_, table) = said(&maid(&fleet, None, &["audit", "query", "--fun", "cmd.run"]));
    assert!(table.contains("db-1?"), "the table marks the name: {table}");

    // The same in the file: the forged line appended to a copy.
    let file = fleet.dir.path().join("web-1.audit");
    let mut text = std::fs::read(&file).unwrap();
    let head = maid_protocol::auditchain::Head::of_line(
        text.split(|b| *b == b'\n')
            .rfind(|l| !l.is_empty())
            .unwrap(),
    )
    .unwrap();
    let forged = json!({"seq": head.seq + 1, "prev": head.sha256, "minion": "db-1",
                        "jid": "x", "fun": "cmd.run", "user": "mallory", "decision": "ran"});
    text.extend(serde_json::to_vec(&forged).unwrap());
    text.push(b'\n');
    let copy = fleet.dir.path().join("forged.audit");
    std::fs::write(&copy, &text).unwrap();
    let copy = copy.to_str().unwrap();
    let (code, out) = said(&maid(
        &fleet,
        None,
        &["audit", "verify", copy, "--key", key],
    ));
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("db-1"), "{out}");
    let (code, out) = said(&maid(
        &fleet,
        None,
        &[
            "audit", "query", "--out", "json", "--file", copy, "--user", "mallory",
        ],
    ));
    assert_eq!(code, 0, "{out}");
    let found: Vec<Value> = serde_json::from_str(&out).unwrap();
    assert!(found[0]["_minion"].is_string(), "{out}");
}

// ---------------------------------------------------------------------
// 4. Records deleted from a stream
// ---------------------------------------------------------------------

/// Start maid `id`, ping it `n` times, and stop it (it signs a
/// checkpoint as it stops).
async fn a_session(fleet: &mut Fleet, config: &Path, id: &str, n: usize) {
    fleet
        .agents
        .push(fleet.signed_agent(id, &audited(fleet, id, "")));
    wait_registered(&fleet.bus, &[id]).await;
    for _ in 0..n {
        ping(fleet, config, id);
    }
    fleet.stop(id);
}

/// The oldest entries of a stream, a signed checkpoint among them,
/// removed with `XDEL`; the whole stream deleted, and made anew by the
/// maid's next record. Before, each verified as intact: a stream that
/// begins mid-chain was taken for one `MAXLEN` had trimmed, and a stream
/// that is not there for an empty one. Trimming itself still verifies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_head_or_a_deleted_stream_fails_verification() {
    let mut fleet = Fleet::new();
    let config = master_toml(&fleet, "");
    for id in ["web-1", "db-1"] {
        a_session(&mut fleet, &config, id, 6).await;
        a_session(&mut fleet, &config, id, 6).await;
    }
    let state = fleet.dir.path().join("verified");
    let verify = |fleet: &Fleet, id: &str, remember: bool| {
        let key = fleet.dir.path().join(id).join("minion.pub");
        let mut args = vec![
            "audit".to_string(),
            "verify".into(),
            "--stream".into(),
            id.into(),
            "--key".into(),
            key.display().to_string(),
        ];
        if remember {
            args.extend(["--state-dir".into(), state.display().to_string()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        said(&maid(fleet, None, &args))
    };
    let mut conn = fleet.bus.connect().await.unwrap();

    // XDEL of the oldest entries through the first checkpoint: no state
    // needed, Redis says entries were deleted.
    let (code, out) = verify(&fleet, "web-1", false);
    assert_eq!(code, 0, "{out}");
    let entries = stream(&fleet, "web-1").await;
    let first_checkpoint = entries
        .iter()
        .position(|(_, l)| String::from_utf8_lossy(l).contains("\"decision\":\"checkpoint\""))
        .unwrap();
    assert!(first_checkpoint + 3 < entries.len(), "{}", entries.len());
    for (id, _) in &entries[..=first_checkpoint] {
        let _: i64 = redis::cmd("XDEL")
            .arg("maid:audit:web-1")
            .arg(id)
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    let (code, out) = verify(&fleet, "web-1", false);
    assert_eq!(
        code, 1,
        "the oldest entries were deleted and it passed: {out}"
    );
    assert!(out.contains("XDEL"), "{out}");

    // db-1: verified and remembered; trimmed (as MAXLEN would) past the
    // checkpoint remembered: still intact.
    let (code, out) = verify(&fleet, "db-1", true);
    assert_eq!(code, 0, "{out}");
    assert!(state.join("db-1.json").exists(), "{out}");
    let _: i64 = redis::cmd("XTRIM")
        .arg("maid:audit:db-1")
        .arg("MAXLEN")
        .arg(3)
        .query_async(&mut conn)
        .await
        .unwrap();
    let (code, out) = verify(&fleet, "db-1", true);
    assert_eq!(code, 0, "trimming is no deletion: {out}");
    // Deleted: gone, with or without the memory of it.
    let _: i64 = redis::cmd("DEL")
        .arg("maid:audit:db-1")
        .query_async(&mut conn)
        .await
        .unwrap();
    let (code, out) = verify(&fleet, "db-1", true);
    assert_eq!(code, 1, "a deleted stream passed: {out}");
    assert!(out.contains("gone"), "{out}");
    let (code, out) = verify(&fleet, "db-1", false);
    assert_eq!(code, 1, "a stream that is not there passed: {out}");
    // The maid writes again: a stream made anew, begun mid-chain.
    a_session(&mut fleet, &config, "db-1", 2).await;
    let (code, out) = verify(&fleet, "db-1", true);
    assert_eq!(code, 1, "a stream deleted and made anew passed: {out}");
    assert!(out.contains("made anew"), "{out}");
}

// ---------------------------------------------------------------------
// 5. Terminal escapes
// ---------------------------------------------------------------------

/// An unsigned job whose `fun` holds an OSC sequence, a BEL and an
/// erase-line, published by anyone who can PUBLISH: its reject record
/// reached `maid audit query`'s table raw, and rewrote the operator's
/// terminal. Every output shows control characters escaped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_characters_in_records_are_printed_escaped() {
    let mut fleet = Fleet::new();
    fleet
        .agents
        .push(fleet.signed_agent("web-1", &audited(&fleet, "web-1", "")));
    wait_registered(&fleet.bus, &["web-1"]).await;
    let fun = "test.ping\u{1b}]0;pwned\u{7}\u{1b}[2K\u{9b}31m\u{7f}";
    let job = json!({"payload": json!({"jid": "20261129020000000001", "tempTopic": "r",
                                       "fun": fun, "arg": [], "kwarg": {}, "tgt": "*",
                                       "tgt_type": "glob", "topic": TOPIC,
                                       "issued_at": chrono::Utc::now().timestamp_millis()})
                                 .to_string(),
                     "sig": "AAAA", "kid": "feedfacecafebeef"});
    let mut conn = fleet.bus.connect().await.unwrap();
    until("the reject record", async || {
        let _: i64 = redis::cmd("PUBLISH")
            .arg(TOPIC)
            .arg(job.to_string())
            .query_async(&mut conn)
            .await
            .unwrap();
        stream(&fleet, "web-1")
            .await
            .iter()
            .any(|(_, l)| String::from_utf8_lossy(l).contains("pwned"))
    })
    .await;
    let raw = |text: &str| {
        text.chars()
            .any(|c| c.is_control() && c != '\n' || c == '\u{7f}')
    };
    for out in [
        None,
        Some("json"),
        Some("yaml"),
        Some("nested"),
        Some("txt"),
    ] {
        let mut args = vec!["audit", "query", "--decision", "rejected"];
        if let Some(o) = out {
            args.extend(["--out", o]);
        }
        let o = maid(&fleet, None, &args);
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{text}");
        assert!(text.contains("pwned"), "{out:?}: {text}");
        assert!(!raw(&text), "{out:?} printed a control character: {text:?}");
    }
    // JSON keeps the exact text, escaped the JSON way.
    let o = maid(&fleet, None, &["audit", "query", "--out", "json"]);
    let found: Vec<Value> = serde_json::from_slice(&o.stdout).unwrap();
    assert!(found.iter().any(|r| r["fun"] == fun), "{found:?}");
    // And verify's messages: a record in a name full of escapes.
    append_linked(
        &fleet,
        "web-1",
        json!({"minion": "db\u{1b}[2K\u{7}-1", "decision": "ran"}),
    )
    .await;
    let o = maid(&fleet, None, &["audit", "verify", "--stream", "web-1"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(!raw(&text), "verify printed a control character: {text:?}");
    assert!(text.contains("\\u{1b}[2K"), "{text}");
}
