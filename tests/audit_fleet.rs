//! The audit trail across a fleet: two signed maids append their records
//! to their own Redis streams and send them to a syslog receiver (RFC
//! 5424 over UDP, read here from the socket); `maid audit query` and the
//! API's `GET /audit` (for `@audit` users alone) find who ran what where
//! and which programs it started, with arguments and argv kept as
//! digests; `maid audit verify --stream` names a removed or an inserted
//! entry; a syslog sink that is down spools, gives up the oldest past its
//! spool, records the gap in the chain, and delivers the rest once up.

use std::io::{BufRead, Read};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::api::{ApiServer, Fleet, PASSWORD, client, login_as, start_api};
use crate::common::fleet::{TOPIC, maid_cli, request, run, start_agent, wait_registered};
use crate::common::redis::RedisServer;
use maid_bus::Bus;

/// Datagrams received on a UDP socket, as text.
fn udp_receiver() -> (u16, Arc<Mutex<Vec<String>>>) {
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = sock.local_addr().unwrap().port();
    let got = Arc::new(Mutex::new(Vec::new()));
    let keep = got.clone();
    std::thread::spawn(move || {
        let mut buf = vec![0; 65_536];
        while let Ok(n) = sock.recv(&mut buf) {
            keep.lock()
                .unwrap()
                .push(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
    });
    (port, got)
}

/// Frames received over TCP with octet counting (RFC 6587), from every
/// connection to `listener`, as text.
fn tcp_receiver(listener: std::net::TcpListener) -> Arc<Mutex<Vec<String>>> {
    let got = Arc::new(Mutex::new(Vec::new()));
    let keep = got.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { return };
            let keep = keep.clone();
            std::thread::spawn(move || {
                let mut r = std::io::BufReader::new(conn);
                loop {
                    let mut len = Vec::new();
                    if r.read_until(b' ', &mut len).unwrap_or(0) == 0 {
                        return;
                    }
                    let n: usize = String::from_utf8_lossy(&len).trim().parse().unwrap();
                    let mut msg = vec![0; n];
                    r.read_exact(&mut msg).unwrap();
                    keep.lock().unwrap().push(String::from_utf8(msg).unwrap());
                }
            });
        }
    });
    got
}

/// Wait until `f` holds (30 s at most).
async fn until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(40);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `maid audit ARGS` against `redis`: exit code, stdout, stderr.
fn audit(redis: &str, args: &[&str], cwd: &Path) -> (i32, String, String) {
    let mut all = vec!["audit"];
    all.extend_from_slice(args);
    let o = maid_cli(redis, &all, cwd);
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn query(redis: &str, args: &[&str], cwd: &Path) -> Vec<Value> {
    let mut all = vec!["query", "--out", "json"];
    all.extend_from_slice(args);
    let (code, out, err) = audit(redis, &all, cwd);
    assert_eq!(code, 0, "{out}{err}");
    serde_json::from_str::<Value>(&out)
        .unwrap_or_else(|e| panic!("{e}: {out}"))
        .as_array()
        .unwrap()
        .clone()
}

/// The API with `alice` (may run anything) and `auditor` (`@audit` only).
fn api(fleet: &Fleet) -> ApiServer {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("maid.toml");
    let hash = maid_master::api::auth::hash_password(PASSWORD).unwrap();
    std::fs::write(
        &config,
        format!(
            "master_topics = [\"{TOPIC}\"]\n[redis]\nurl = \"{}\"\n[master]\nkey = \"{}\"\n\
             [api]\n[api.users]\nalice = \"{hash}\"\nauditor = \"{hash}\"\n\
             [api.perms]\nalice = [\".*\"]\nauditor = [\"@audit\"]\n",
            fleet.redis.url.as_deref().unwrap(),
            fleet.dir.path().join("master.key").display(),
        ),
    )
    .unwrap();
    start_api(dir, &config, &[])
}

async fn token(c: &reqwest::Client, api: &ApiServer, user: &str) -> String {
    let (status, body, _) = login_as(c, api, user, PASSWORD).await;
    assert_eq!(status, reqwest::StatusCode::OK, "{body}");
    body["return"][0]["token"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleets_records_reach_streams_and_syslog_and_answer_who_ran_what_where() {
    let mut fleet = Fleet::new();
    let (port, syslog) = udp_receiver();
    let redis = fleet.redis.url.clone().unwrap();
    for id in ["web-1", "db-1"] {
        let extra = format!(
            "[audit]\npath = {:?}\nstream = true\nsyslog = \"udp://127.0.0.1:{port}\"\n\
             [plugins.cmd]\nexec = [\"/usr/bin/*\", \"/bin/*\"]\n",
            fleet.dir.path().join(format!("{id}.audit")),
        );
        let agent = fleet.signed_agent(id, &extra);
        fleet.agents.push(agent);
    }
    wait_registered(&fleet.bus, &["web-1", "db-1"]).await;
    let api = api(&fleet);
    let c = client();
    let alice = token(&c, &api, "alice").await;
    for chunk in [
        json!({"client": "local", "tgt": "web-1", "fun": "cmd.run", "arg": ["echo s3cr3t-word"],
               "kwarg": {"python_shell": false}}),
        json!({"client": "local", "tgt": "db-1", "fun": "test.ping"}),
    ] {
        let r = c
            .post(format!("{}/", api.url))
            .header("X-Auth-Token", &alice)
            .json(&chunk)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), reqwest::StatusCode::OK);
    }
    let cwd = fleet.dir.path();
    // Every program started under cmd on web-* by alice.
    let mut found = Vec::new();
    until("web-1's cmd.run record in its stream", || {
        found = query(
            &redis,
            &[
                "--minion",
                "web-*",
                "--user",
                "alice",
                "--fun",
                "cmd.*",
                "--capability",
                "exec",
                "--since",
                "1h",
            ],
            cwd,
        );
        !found.is_empty()
    })
    .await;
    assert_eq!(found.len(), 1, "{found:?}");
    let rec = &found[0];
    assert_eq!(
        (
            &rec["minion"],
            &rec["fun"],
            &rec["decision"],
            &rec["retcode"]
        ),
        (&json!("web-1"), &json!("cmd.run"), &json!("ran"), &json!(0))
    );
    assert_eq!(rec["topic"], TOPIC);
    assert!(rec["signer"].is_string(), "{rec}");
    assert_eq!(rec["args_sha256"].as_str().unwrap().len(), 64);
    let exec = rec["capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["kind"] == "exec")
        .unwrap_or_else(|| panic!("no exec in {rec}"));
    let program = exec["program"].as_str().unwrap();
    assert!(
        Path::new(program).is_absolute() && Path::new(program).exists(),
        "{exec}"
    );
    assert_eq!(exec["argv_sha256"].as_str().unwrap().len(), 64);
    assert!(
        exec.get("argv").is_none(),
        "argv is kept as a digest: {exec}"
    );
    // Neither the arguments nor the argv are in a record, anywhere.
    let stream: Vec<Value> = query(&redis, &["--limit", "0"], cwd);
    assert!(stream.len() > 4, "{stream:?}");
    assert!(!serde_json::to_string(&stream).unwrap().contains("s3cr3t"));
    // Other questions: db-1's ping; nothing of bob's; no program on db-1.
    let db = query(&redis, &["--minion", "db-*", "--fun", "test.ping"], cwd);
    assert_eq!(db.len(), 1, "{db:?}");
    assert_eq!(db[0]["user"], "alice");
    assert!(query(&redis, &["--user", "bob"], cwd).is_empty());
    assert!(query(&redis, &["--minion", "db-1", "--program", "*"], cwd).is_empty());
    assert!(query(&redis, &["--since", "2d", "--until", "1d"], cwd).is_empty());
    let (code, _, err) = audit(&redis, &["query", "--since", "yesterday"], cwd);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("RFC 3339"), "{err}");
    // The table names the program.
    let (code, table, _) = audit(&redis, &["query", "--fun", "cmd.run"], cwd);
    assert_eq!(code, 0);
    assert!(table.contains(&format!("exec {program}")), "{table}");

    // The API: the same query for @audit users; refused to others.
    let auditor = token(&c, &api, "auditor").await;
    let url = format!("{}/audit?minion=web-*&user=alice&capability=exec", api.url);
    let r = c
        .get(&url)
        .header("X-Auth-Token", &auditor)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), reqwest::StatusCode::OK);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["return"], json!(found), "{body}");
    let r = c
        .get(&url)
        .header("X-Auth-Token", &alice)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), reqwest::StatusCode::FORBIDDEN);
    let r = c
        .get(format!("{}/audit?since=never", api.url))
        .header("X-Auth-Token", &auditor)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), reqwest::StatusCode::BAD_REQUEST);
    let r = c
        .get(format!("{}/audit?drop=table", api.url))
        .header("X-Auth-Token", &auditor)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), reqwest::StatusCode::BAD_REQUEST);

    // Syslog got both maids' records, RFC 5424 with structured data, and
    // web-1's messages are its chain.
    let key = |id: &str| cwd.join(id).join("minion.pub");
    let capture = cwd.join("web-1.syslog");
    until("web-1's cmd.run record over syslog", || {
        let got = syslog.lock().unwrap();
        got.iter()
            .any(|m| m.contains(" web-1 maid ") && m.contains("fun=\"cmd.run\""))
            && got.iter().any(|m| m.contains(" db-1 maid "))
    })
    .await;
    {
        let got = syslog.lock().unwrap();
        let web: Vec<&String> = got.iter().filter(|m| m.contains(" web-1 maid ")).collect();
        let ran = web.iter().find(|m| m.contains("fun=\"cmd.run\"")).unwrap();
        assert!(ran.starts_with("<86>1 "), "authpriv.info: {ran}");
        assert!(
            ran.contains("[maid@32473 seq=\"") && ran.contains("decision=\"ran\""),
            "{ran}"
        );
        let lines: Vec<&str> = web.iter().map(|m| m.as_str()).collect();
        std::fs::write(&capture, lines.join("\n")).unwrap();
    }
    let (code, out, err) = audit(
        &redis,
        &[
            "verify",
            "--syslog",
            capture.to_str().unwrap(),
            "--key",
            key("web-1").to_str().unwrap(),
        ],
        cwd,
    );
    assert_eq!(code, 0, "{out}{err}");

    // The stream verifies; an entry removed or one added is found.
    let verify_stream = |id: &str| {
        audit(
            &redis,
            &["verify", "--stream", id, "--key", key(id).to_str().unwrap()],
            cwd,
        )
    };
    let (code, out, err) = verify_stream("web-1");
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("the chain is intact"), "{out}");
    let mut conn = fleet.bus.connect().await.unwrap();
    let entries: Vec<(String, Vec<Vec<u8>>)> = redis::cmd("XRANGE")
        .arg("maid:audit:web-1")
        .arg("-")
        .arg("+")
        .query_async(&mut conn)
        .await
        .unwrap();
    let (first_line, third_id) = (entries[0].1[3].clone(), entries[2].0.clone());
    let _: String = redis::cmd("XADD")
        .arg("maid:audit:web-1")
        .arg("*")
        .arg("line")
        .arg(&first_line)
        .query_async(&mut conn)
        .await
        .unwrap();
    let (code, out, _) = verify_stream("web-1");
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("inserted or replayed"), "{out}");
    // And a query shows the forged entry for what it is.
    let all = query(&redis, &["--minion", "web-1", "--limit", "0"], cwd);
    let flagged: Vec<&Value> = all.iter().filter(|r| r.get("_chain").is_some()).collect();
    assert_eq!(flagged.len(), 1, "{flagged:?}");
    assert_eq!(flagged[0]["seq"], 1);
    assert!(
        flagged[0]["_chain"]
            .as_str()
            .unwrap()
            .contains("does not follow")
    );
    let _: i64 = redis::cmd("XDEL")
        .arg("maid:audit:web-1")
        .arg(&third_id)
        .query_async(&mut conn)
        .await
        .unwrap();
    let (code, out, _) = verify_stream("web-1");
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("seq 3 to 3 are missing"), "{out}");
    // db-1's stream is its own and intact.
    let (code, out, err) = verify_stream("db-1");
    assert_eq!(code, 0, "{out}{err}");

    // --follow prints what was there, then each record as it arrives.
    let mut follow = crate::common::maid_command()
        .args([
            "audit",
            "query",
            "--follow",
            "--minion",
            "db-1",
            "--fun",
            "test.ping",
        ])
        .env("MAID_REDIS", &redis)
        .env_remove("MAID_CONFIG")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, lines) = std::sync::mpsc::channel();
    let out = follow.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let mut pings = 0;
    let mut next_ping = |lines: &std::sync::mpsc::Receiver<String>| loop {
        let line = lines
            .recv_timeout(Duration::from_secs(30))
            .expect("maid audit query --follow printed nothing more");
        if line.contains(" db-1 ") && line.contains(" test.ping ") {
            pings += 1;
            return pings;
        }
    };
    assert_eq!(next_ping(&lines), 1, "the ping already recorded");
    let r = c
        .post(format!("{}/", api.url))
        .header("X-Auth-Token", &alice)
        .json(&json!({"client": "local", "tgt": "db-1", "fun": "test.ping"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), reqwest::StatusCode::OK);
    assert_eq!(next_ping(&lines), 2, "the new ping, as it arrived");
    let _ = follow.kill();
    let _ = follow.wait();

    // A Redis writer who knows the chain's rules appends a record that
    // links (seq + 1, prev = the last line's SHA-256): the chain is not
    // keyed, so it holds until db-1 writes its next record, which then
    // follows a record db-1 never wrote; both verify and query say so.
    let entries: Vec<(String, Vec<Vec<u8>>)> = redis::cmd("XRANGE")
        .arg("maid:audit:db-1")
        .arg("-")
        .arg("+")
        .query_async(&mut conn)
        .await
        .unwrap();
    let last = &entries.last().unwrap().1[3];
    let head = maid_protocol::auditchain::Head::of_line(last).unwrap();
    let forged = json!({"seq": head.seq + 1, "prev": head.sha256, "minion": "db-1",
                        "jid": "forged", "fun": "cmd.run", "user": "mallory", "decision": "ran"});
    let _: String = redis::cmd("XADD")
        .arg("maid:audit:db-1")
        .arg("*")
        .arg("line")
        .arg(serde_json::to_vec(&forged).unwrap())
        .query_async(&mut conn)
        .await
        .unwrap();
    let r = c
        .post(format!("{}/", api.url))
        .header("X-Auth-Token", &alice)
        .json(&json!({"client": "local", "tgt": "db-1", "fun": "test.ping"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), reqwest::StatusCode::OK);
    until("db-1's next record after the forged one", || {
        query(&redis, &["--minion", "db-1", "--limit", "0"], cwd)
            .iter()
            .any(|r| r.get("_chain").is_some())
    })
    .await;
    let (code, out, _) = verify_stream("db-1");
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("inserted, moved or replayed"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sink_that_is_down_spools_gives_up_the_oldest_and_records_the_gap() {
    let server = RedisServer::start();
    let bus = Bus::new(&server.config()).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // Nothing listens there yet.
    let port = crate::common::redis::free_port();
    let toml = format!(
        "[security]\nrequire_signed = false\nstate_dir = {:?}\n\
         [audit]\npath = {:?}\nsyslog = \"tcp://127.0.0.1:{port}\"\nspool = 5\n",
        dir.join("state"),
        dir.join("audit.log"),
    );
    let _maid = start_agent(&server.config(), "gap-1", &toml);
    wait_registered(&bus, &["gap-1"]).await;
    for _ in 0..8 {
        let report = run(
            &bus,
            &request("gap-1", "glob", "test.ping", json!([]), json!({})),
        )
        .await;
        assert_eq!(report.returns.len(), 1);
    }
    let listener = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
    let got = tcp_receiver(listener);
    let log = dir.join("audit.log");
    let text = std::fs::read_to_string(&log).unwrap();
    let last_seq = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["decision"] == "ran")
        .filter_map(|r| r["seq"].as_u64())
        .max()
        .unwrap();
    // Once the sink is back: the gap recorded, then what it held.
    until("the last job's record and a gap record over syslog", || {
        let got = got.lock().unwrap();
        got.iter()
            .any(|m| m.contains(&format!("seq=\"{last_seq}\"")))
            && got.iter().any(|m| m.contains("decision=\"gap\""))
    })
    .await;
    let capture = dir.join("syslog.capture");
    let messages = got.lock().unwrap().clone();
    std::fs::write(&capture, messages.join("\n")).unwrap();
    let seq_of = |m: &String| -> u64 {
        let at = m.find("seq=\"").unwrap() + 5;
        m[at..].split('"').next().unwrap().parse().unwrap()
    };
    let first = seq_of(&messages[0]);
    assert!(first > 1, "the oldest were given up: {first}");
    let key = dir.join("state/minion.pub");
    let verify = |args: &[&str]| {
        let mut all = vec!["verify"];
        all.extend_from_slice(args);
        all.extend(["--key", key.to_str().unwrap()]);
        audit("redis://127.0.0.1:1/", &all, dir)
    };
    // What syslog lacks, the chain says it lacks: every seq before the
    // first it got is in a gap record's range.
    let (code, out, err) = verify(&["--syslog", capture.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    let named = out
        .lines()
        .find_map(|l| l.strip_prefix("never delivered here, as the maid's gap records say: seq "))
        .unwrap_or_else(|| panic!("no gaps named: {out}"));
    let ranges: Vec<(u64, u64)> = named
        .split(", ")
        .map(|r| {
            let (a, b) = r.split_once('-').unwrap();
            (a.parse().unwrap(), b.parse().unwrap())
        })
        .collect();
    for seq in 1..first {
        assert!(
            ranges.iter().any(|(a, b)| (*a..=*b).contains(&seq)),
            "seq {seq} lost without a gap record: {ranges:?}"
        );
    }
    // The file lost nothing, and holds the gap records.
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("\"decision\":\"gap\""));
    let (code, out, err) = verify(&[log.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
}
