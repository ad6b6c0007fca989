//! Attacks on `maid api`, each against the real binary, a real
//! `redis-server` and real agents that run only signed jobs:
//!
//! * `GET /stats` showed every request line, so any user (or anyone, with
//!   `stats_disable_auth`) read an admin's token from `GET /events?token=`
//!   or `GET /ws/<token>`: no token or password is now in the statistics,
//!   the events or the API's own log, whichever way a request carried it.
//! * YAML alias expansion ("billion laughs"), and nesting past any stack,
//!   on a body posted before login: refused as it is read, and a flood of
//!   the worst bodies that are accepted leaves the API's peak memory
//!   within tens of MB.
//! * One API user filling every maid's replay store so that every job is
//!   refused `busy`: chunks per request and jobs per user are bounded, and
//!   with `[api] key` the API's jobs cannot take the room of `maid run`'s.
//! * `@runner` alone reading other users' returns through `jobs.*`: held
//!   to what `GET /jobs/{jid}` shows.

use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::api::{Fleet, PASSWORD};
use crate::common::fleet::{Agent, TOPIC, maid_cli, wait_registered};
use maid_bus::Bus;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// A `maid api` process whose log goes to a file; killed on drop.
struct Api {
    child: Child,
    url: String,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Api {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Api {
    /// Everything the API logged so far.
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The API's peak resident memory so far (`VmHWM`), in KiB.
    fn peak_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmHWM in /proc/<pid>/status")
    }

    /// Whether the process is still running.
    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

/// Start `maid api` on `fleet`'s Redis: `[api]` lines `api_toml`, users
/// `perms` (each `(name, TOML list)`, all with [`PASSWORD`]), signing with
/// the fleet's master key unless `api_toml` names a key; logging
/// everything (`MAID_LOG=trace`) to a file.
fn start(fleet: &Fleet, api_toml: &str, perms: &[(&str, &str)]) -> Api {
    let dir = tempfile::tempdir().unwrap();
    let config = fleet.api_config(dir.path(), "", api_toml, perms);
    let log = dir.path().join("api.log");
    let mut child = crate::common::maid_command()
        .args(["api", "--listen", "127.0.0.1:0", "-c"])
        .arg(&config)
        .env("MAID_LOG", "trace")
        .env_remove("MAID_REDIS")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("start maid api");
    let url = crate::api::listening_url(&mut child).unwrap_or_else(|line| {
        panic!(
            "maid api did not say where it listens: {line:?}\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        )
    });
    Api {
        child,
        url,
        log,
        _dir: dir,
    }
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap()
}

async fn login(c: &reqwest::Client, api: &Api, user: &str) -> String {
    crate::api::token_for(c, &api.url, user).await
}

/// `POST /` as the holder of `token`: the status, the `Retry-After`
/// header and the answer.
async fn post(
    c: &reqwest::Client,
    api: &Api,
    token: &str,
    body: &Value,
) -> (StatusCode, Option<String>, Value) {
    let r = c
        .post(format!("{}/", api.url))
        .header("X-Auth-Token", token)
        .json(body)
        .send()
        .await
        .unwrap();
    let retry = r
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    (r.status(), retry, r.json().await.unwrap_or(Value::Null))
}

/// A Redis, the fleet's master key, and agents that trust it.
async fn fleet_with(ids: &[&str], extra: &str) -> (Fleet, Bus, Vec<Agent>) {
    let fleet = Fleet::new();
    let bus = Bus::new(&fleet.redis).unwrap();
    let mut agents = Vec::new();
    for id in ids {
        agents.push(fleet.signed_agent(id, extra));
    }
    wait_registered(&bus, ids).await;
    (fleet, bus, agents)
}

/// Every place a credential could have been left: a token in the query
/// (`/events?token=`, `salt_token=`), in the path (`/ws/<token>`, and
/// `/events/<token>`, which is no route), in headers, a password in a
/// query and in bodies; a slow request with a token in its query (kept
/// among the slow queries) and streams still open. A user who may run
/// `test.*` only then reads `/stats`, with a token and, under
/// `stats_disable_auth`, without one: no credential is there, nor in the
/// events an `@jobs` listener hears, nor in the API's log at `trace`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_credential_is_recorded_in_stats_events_or_logs() {
    use futures_util::SinkExt;
    let (fleet, _bus, _agents) = fleet_with(&["web-1"], "").await;
    for disable_auth in [false, true] {
        let api = start(
            &fleet,
            &format!("stats_disable_auth = {disable_auth}"),
            &[
                ("admin", r#"[".*", "@jobs", "@runner"]"#),
                ("intern", r#"["test.*"]"#),
            ],
        );
        let c = client();
        let admin = login(&c, &api, "admin").await;
        let intern = login(&c, &api, "intern").await;
        let url = &api.url;
        // The admin listens to every event, through a token in the query.
        let mut events = c
            .get(format!("{url}/events?token={admin}"))
            .send()
            .await
            .unwrap();
        assert_eq!(events.status(), StatusCode::OK);
        let salt_token = c
            .get(format!("{url}/events?salt_token={admin}&x=1"))
            .send()
            .await
            .unwrap();
        assert_eq!(salt_token.status(), StatusCode::OK);
        let (mut ws, _) = tokio_tungstenite::connect_async(format!(
            "{}/ws/{admin}",
            url.replacen("http", "ws", 1)
        ))
        .await
        .unwrap();
        ws.send(tokio_tungstenite::tungstenite::Message::Text(
            "ready".into(),
        ))
        .await
        .unwrap();
        for path in [format!("/events/{admin}"), format!("/{admin}")] {
            let r = c.get(format!("{url}{path}")).send().await.unwrap();
            assert_eq!(r.status(), StatusCode::NOT_FOUND, "{path}");
        }
        // A password in the query and in the body; in a `/run` chunk.
        let r = c
            .post(format!("{url}/login?username=admin&password={PASSWORD}"))
            .json(&json!({"username": "admin", "password": PASSWORD, "eauth": "pam"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        let r = c
            .post(format!("{url}/run"))
            .json(
                &json!([{"client": "local", "tgt": "web-1", "fun": "test.ping",
                           "username": "admin", "password": PASSWORD, "eauth": "pam"}]),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        // A webhook with the token in its headers, and in the path.
        let r = c
            .post(format!("{url}/hook/ci/{admin}"))
            .header("X-Auth-Token", &admin)
            .header("Cookie", format!("session_id={admin}"))
            .json(&json!({"ok": true}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        // A request slower than a second, with the token in its query too.
        let r = c
            .post(format!("{url}/?token={admin}"))
            .header("X-Auth-Token", &admin)
            .json(&json!([{"client": "local", "tgt": "web-1", "fun": "test.sleep", "arg": [1.5], "timeout": 10}]))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);

        let stats = |token: Option<&str>| {
            let mut r = c.get(format!("{url}/stats"));
            if let Some(t) = token {
                r = r.header("X-Auth-Token", t);
            }
            async move {
                let r = r.send().await.unwrap();
                (r.status(), r.text().await.unwrap())
            }
        };
        let (status, anonymous) = stats(None).await;
        if disable_auth {
            assert_eq!(status, StatusCode::OK);
        } else {
            assert_eq!(status, StatusCode::UNAUTHORIZED, "{anonymous}");
        }
        let (status, text) = stats(Some(&intern)).await;
        assert_eq!(status, StatusCode::OK, "{text}");
        for shown in [&text, &anonymous] {
            assert!(
                !shown.contains(&admin),
                "the admin's token in /stats: {shown}"
            );
            assert!(!shown.contains(PASSWORD), "a password in /stats: {shown}");
        }
        // What was recorded is there, by route.
        let report: Value = serde_json::from_str(&text).unwrap();
        let app = &report["CherryPy Applications"];
        let lines: Vec<&str> = app["Requests"]
            .as_object()
            .unwrap()
            .values()
            .chain(app["Slow Queries"].as_array().unwrap())
            .filter_map(|r| r["Request-Line"].as_str())
            .collect();
        assert!(lines.contains(&"POST /?… HTTP/1.1"), "{lines:?}");
        assert!(lines.contains(&"POST /hook/{path} HTTP/1.1"), "{lines:?}");
        assert!(lines.contains(&"GET /stats HTTP/1.1"), "{lines:?}");
        assert!(
            app["Slow Queries"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["Request-Line"] == "POST /?… HTTP/1.1"),
            "{app}"
        );

        // The events: the hook's, without the caller's token or cookie.
        let mut seen = String::new();
        let until = Instant::now() + Duration::from_secs(15);
        while !seen.contains("salt/netapi/hook/ci") {
            assert!(Instant::now() < until, "no hook event: {seen}");
            let chunk = tokio::time::timeout(Duration::from_secs(15), events.chunk())
                .await
                .expect("event stream stalled")
                .unwrap()
                .expect("event stream ended");
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
        let hook_event = seen
            .lines()
            .find(|l| l.contains("salt/netapi/hook/ci"))
            .unwrap();
        assert!(
            hook_event.contains("salt/netapi/hook/ci/{token}"),
            "{hook_event}"
        );
        assert!(!hook_event.contains("session_id"), "{hook_event}");
        assert!(
            !hook_event.to_ascii_lowercase().contains("x-auth-token"),
            "{hook_event}"
        );
        drop(ws);
        drop(events);
        drop(salt_token);
        // The log, at `trace`, names neither.
        let log = api.log();
        assert!(!log.is_empty());
        assert!(!log.contains(&admin), "the admin's token in the log");
        assert!(!log.contains(PASSWORD), "a password in the log");
    }
}

/// YAML with nested aliases (10 levels of 10: a billion strings from
/// about 600 bytes), posted to `/login` as `application/x-yaml`.
fn billion_laughs() -> String {
    let mut doc = String::from(
        "username: x\npassword: y\na0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n",
    );
    for i in 1..10 {
        let prev = format!("*a{}", i - 1);
        doc.push_str(&format!("a{i}: &a{i} [{}]\n", vec![prev; 10].join(", ")));
    }
    doc
}

/// The costliest YAML body of `size` bytes that is read, not refused: one
/// line of flow style (its parser holds all its tokens at once) with as
/// many nodes as fit, named a second time by an alias (the budget allows
/// aliases twice the document's length). No credentials: the request is
/// refused once read, so only reading it is measured.
fn worst_accepted(size: usize) -> String {
    let (head, tail) = ("{a: &s [", "0], b: *s}");
    let items = (size - head.len() - tail.len()) / 2;
    format!("{head}{}{tail}", "0,".repeat(items))
}

async fn post_login(c: &reqwest::Client, api: &Api, kind: &str, body: String) -> StatusCode {
    c.post(format!("{}/login", api.url))
        .header("Content-Type", kind)
        .body(body)
        .send()
        .await
        .unwrap()
        .status()
}

/// The "billion laughs" on `/login` before anyone logged in: 400 in
/// milliseconds. Nesting past any stack (block sequences 32 000 deep in
/// 64 KiB), JSON nested past serde_json's bound, YAML past 64 KiB and
/// bodies past `[api] max_body_bytes` are refused too, and the API lives
/// on. Then 200 of the worst 64 KiB bodies that are read and 200 bombs of
/// that size, at once: the API's peak memory grows by what reading a few
/// at a time takes (one per worker thread) and the bodies waiting, tens
/// of MB, where one 201-byte bomb took 290 MB before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn yaml_bombs_and_deep_bodies_are_refused_before_login() {
    const YAML: &str = "application/x-yaml";
    let fleet = Fleet::new();
    let mut api = start(
        &fleet,
        "max_body_bytes = 1048576",
        &[("admin", r#"[".*"]"#)],
    );
    let c = client();
    let bomb = billion_laughs();
    assert!(bomb.len() < 700, "{}", bomb.len());
    let r = c
        .post(format!("{}/login", api.url))
        .header("Content-Type", YAML)
        .body(bomb.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let text = r.text().await.unwrap();
    assert!(text.contains("aliases are expanded"), "{text}");

    // Nesting: YAML in block and flow style, JSON.
    let block = "- ".repeat(32 * 1024 - 1) + "x";
    let flow = format!("{}{}", "[".repeat(200), "]".repeat(200));
    for (kind, body) in [
        (YAML, block),
        (YAML, flow.clone()),
        ("application/json", flow),
    ] {
        assert_eq!(
            post_login(&c, &api, kind, body).await,
            StatusCode::BAD_REQUEST,
            "{kind}"
        );
        assert!(api.alive(), "the API died on a deep {kind} body");
    }
    // Bodies past the bounds are not read.
    let long = |n: usize| format!("[{}0]", "0,".repeat(n));
    assert_eq!(
        post_login(&c, &api, YAML, long(40_000)).await,
        StatusCode::PAYLOAD_TOO_LARGE
    );
    assert_eq!(
        post_login(&c, &api, "application/json", long(600_000)).await,
        StatusCode::PAYLOAD_TOO_LARGE
    );

    let worst = worst_accepted(64 * 1024);
    assert!(worst.len() <= 64 * 1024);
    assert_eq!(
        post_login(&c, &api, YAML, worst.clone()).await,
        StatusCode::BAD_REQUEST
    );
    let mut big_bomb = bomb.clone();
    while big_bomb.len() < 64 * 1024 - 20 {
        big_bomb.push_str("# padding padding\n");
    }
    let before = api.peak_kib();
    let started = Instant::now();
    let flooder = client();
    let flood: Vec<_> = (0..400)
        .map(|i| {
            let (c, url) = (flooder.clone(), api.url.clone());
            let body = if i % 2 == 0 {
                worst.clone()
            } else {
                big_bomb.clone()
            };
            tokio::spawn(async move {
                // Of 400 connections opened at once on this loopback, one
                // in a few runs is reset before it is answered (seen with
                // pooled and fresh connections alike); it is sent again,
                // and every body must still be answered 400.
                let mut tries = 0;
                loop {
                    let sent = c
                        .post(format!("{url}/login"))
                        .header("Content-Type", YAML)
                        .body(body.clone())
                        .send()
                        .await;
                    match sent {
                        Err(e) if e.is_request() && tries < 3 => tries += 1,
                        other => break other.unwrap(),
                    }
                }
            })
        })
        .collect();
    for (i, task) in flood.into_iter().enumerate() {
        let r = task.await.unwrap();
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{i}");
        let text = r.text().await.unwrap();
        let why = if i % 2 == 0 {
            "username"
        } else {
            "aliases are expanded"
        };
        assert!(text.contains(why), "{i}: {text}");
    }
    let took = started.elapsed();
    let after = api.peak_kib();
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get()) as u64;
    eprintln!(
        "maid api VmHWM: {before} KiB before, {after} KiB after 200 worst accepted and 200 \
         refused 64 KiB YAML bodies at once ({} KiB more, {took:?}, {cores} cores)",
        after - before
    );
    // The bodies waiting (400 × 64 KiB), and up to ~16 MiB for each
    // worker thread reading one.
    let bound = 32 * 1024 + cores * 16 * 1024;
    assert!(
        after - before < bound,
        "peak memory grew from {before} KiB to {after} KiB, over {bound} KiB"
    );
    assert!(api.alive());
}

/// The API floods every maid's replay store as far as it is allowed:
/// more than `[api] max_chunks` in one request is 400; past `jobs_burst`
/// a user's jobs are 429 with `Retry-After` and run nowhere; and a user
/// given a large quota fills the room of the API's key on a maid (its jobs
/// come back `busy`), yet `maid run`, signing with the master key, still
/// runs there. An API that signs with the master key instead takes that
/// room, and `maid run` is refused `busy`: what `[api] key` is for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_flood_cannot_get_maid_run_refused_busy() {
    let fleet = Fleet::new();
    let api_key = maid_agent::trust::generate().unwrap();
    let key_file = |name: &str, text: String| {
        let path = fleet.dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let api_private = key_file("api.key", maid_agent::trust::encode_signing(&api_key));
    let api_public = key_file(
        "api.pub",
        maid_agent::trust::encode_verifying(&api_key.verifying_key()),
    );
    let master_public = fleet.dir.path().join("master.pub");
    let bus = Bus::new(&fleet.redis).unwrap();
    // Each key may have 8 live jids on the maid.
    let _agent = fleet.signed_agent(
        "m-1",
        &format!(
            "trusted_keys = [\"{}\", \"{}\"]\n[agent]\nremembered_jids = 8\n",
            master_public.display(),
            api_public.display()
        ),
    );
    wait_registered(&bus, &["m-1"]).await;
    let c = client();
    let ping = json!({"client": "local", "tgt": "m-1", "fun": "test.ping", "timeout": 5});
    let chunks = |n: usize| Value::Array(vec![ping.clone(); n]);

    // Bounds: chunks per request, jobs per user.
    let paced = start(
        &fleet,
        &format!(
            "key = \"{}\"\nmax_chunks = 4\njobs_burst = 4\njobs_per_second = 0.2",
            api_private.display()
        ),
        &[("flood", r#"["test.*"]"#)],
    );
    let token = login(&c, &paced, "flood").await;
    let (status, _, body) = post(&c, &paced, &token, &chunks(5)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("max_chunks"),
        "{body}"
    );
    let (status, _, body) = post(&c, &paced, &token, &chunks(3)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["return"][1], json!({"m-1": true}), "{body}");
    let (status, retry, body) = post(&c, &paced, &token, &chunks(2)).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    // One left, two asked: five seconds at 0.2 a second.
    assert_eq!(retry.as_deref(), Some("5"), "{body}");
    let (status, _, body) = post(&c, &paced, &token, &chunks(1)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    drop(paced);

    // The flood: as many jobs as the API's key may have on the maid, and
    // more, which it refuses busy.
    let own_key = start(
        &fleet,
        &format!(
            "key = \"{}\"\nmax_chunks = 4\njobs_burst = 1000\njobs_per_second = 1000",
            api_private.display()
        ),
        &[("flood", r#"["test.*"]"#)],
    );
    let token = login(&c, &own_key, "flood").await;
    let mut busy = false;
    for _ in 0..4 {
        let (status, _, body) = post(&c, &own_key, &token, &chunks(4)).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        busy |= body["maid"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["rejected"]["m-1"] == "busy");
    }
    assert!(busy, "the flood never filled the API key's room");
    let dir = tempfile::tempdir().unwrap();
    let master_key = fleet.dir.path().join("master.key");
    let maid_run = || {
        maid_cli(
            fleet.redis.url.as_deref().unwrap(),
            &[
                "run",
                "--key",
                master_key.to_str().unwrap(),
                "--master-topic",
                TOPIC,
                "m-1",
                "test.ping",
                "--out",
                "json",
            ],
            dir.path(),
        )
    };
    let out = maid_run();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("true"),
        "maid run after the flood: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    drop(own_key);

    // Signing with the master key, the same flood leaves maid run no room.
    let shared_key = start(
        &fleet,
        "max_chunks = 4\njobs_burst = 1000\njobs_per_second = 1000",
        &[("flood", r#"["test.*"]"#)],
    );
    let token = login(&c, &shared_key, "flood").await;
    for _ in 0..3 {
        let (status, _, body) = post(&c, &shared_key, &token, &chunks(4)).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let out = maid_run();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(all.contains("busy"), "{all}");
}

/// `runner` `jobs.lookup_jid` (and `list_job`, `print_job`,
/// `exit_success`, `list_jobs`): a user holding `@runner` alone reads no
/// one else's job, by any way of naming the jid; its owner does, and so
/// does a user with `@jobs`, as for `GET /jobs/{jid}`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runner_jobs_functions_show_only_the_jobs_a_user_may_see() {
    let (fleet, _bus, _agents) = fleet_with(&["r-1"], "").await;
    let api = start(
        &fleet,
        "",
        &[
            ("alice", r#"["test.*", "@runner"]"#),
            ("bob", r#"["@runner"]"#),
            ("carol", r#"["@runner", "@jobs"]"#),
        ],
    );
    let c = client();
    let alice = login(&c, &api, "alice").await;
    let bob = login(&c, &api, "bob").await;
    let carol = login(&c, &api, "carol").await;
    let (status, _, body) = post(
        &c,
        &api,
        &alice,
        &json!([{"client": "local", "tgt": "r-1", "fun": "test.echo", "arg": ["alice's secret"]}]),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let jid = body["maid"][0]["jid"].as_str().unwrap().to_string();

    let calls = |jid: &str| {
        vec![
            json!({"client": "runner", "fun": "jobs.lookup_jid", "jid": jid}),
            json!({"client": "runner", "fun": "jobs.lookup_jid", "arg": [format!("jid={jid}")]}),
            json!({"client": "runner", "fun": "jobs.lookup_jid", "arg": [jid]}),
            json!({"client": "runner", "fun": "jobs.lookup_jid", "kwarg": {"jid": jid}, "missing": true}),
            json!({"client": "runner_async", "fun": "jobs.lookup_jid", "jid": jid}),
            json!({"client": "runner", "fun": "jobs.list_job", "jid": jid}),
            json!({"client": "runner", "fun": "jobs.print_job", "jid": jid}),
            json!({"client": "runner", "fun": "jobs.exit_success", "jid": jid}),
        ]
    };
    for call in calls(&jid) {
        let (status, _, body) = post(&c, &api, &bob, &json!([call])).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{call}: {body}");
        assert!(!body.to_string().contains("secret"), "{body}");
    }
    let list = json!([{"client": "runner", "fun": "jobs.list_jobs"}]);
    let (status, _, body) = post(&c, &api, &bob, &list).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body["return"][0].get(&jid).is_none(), "{body}");
    let r = c
        .get(format!("{}/jobs/{jid}", api.url))
        .header("X-Auth-Token", &bob)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);

    // The owner, and a user with `@jobs`, read it.
    for token in [&alice, &carol] {
        let (status, _, body) = post(
            &c,
            &api,
            token,
            &json!([{"client": "runner", "fun": "jobs.lookup_jid", "jid": jid}]),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(
            body["return"][0],
            json!({"r-1": "alice's secret"}),
            "{body}"
        );
        let (status, _, body) = post(&c, &api, token, &list).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert!(body["return"][0].get(&jid).is_some(), "{body}");
        let (status, _, body) = post(
            &c,
            &api,
            token,
            &json!([{"client": "runner", "fun": "jobs.exit_success", "jid": jid}]),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["return"][0], json!({"r-1": true}), "{body}");
    }
    // A job nobody started through this API (`maid run`'s) is readable
    // with `@jobs` only.
    let dir = tempfile::tempdir().unwrap();
    let out = maid_cli(
        fleet.redis.url.as_deref().unwrap(),
        &[
            "run",
            "--key",
            fleet.dir.path().join("master.key").to_str().unwrap(),
            "--master-topic",
            TOPIC,
            "r-1",
            "test.echo",
            "root's secret",
            "--out",
            "json",
        ],
        dir.path(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (_, _, body) = post(&c, &api, &carol, &list).await;
    let root_jid = body["return"][0]
        .as_object()
        .unwrap()
        .iter()
        .find(|(_, job)| job["Arguments"] == json!(["root's secret"]))
        .map(|(jid, _)| jid.clone())
        .unwrap_or_else(|| panic!("maid run's job in the cache: {body}"));
    for (token, expected) in [(&alice, StatusCode::FORBIDDEN), (&carol, StatusCode::OK)] {
        let (status, _, body) = post(
            &c,
            &api,
            token,
            &json!([{"client": "runner", "fun": "jobs.lookup_jid", "jid": root_jid}]),
        )
        .await;
        assert_eq!(status, expected, "{body}");
    }
}
