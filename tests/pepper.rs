//! pepper 0.7.6 against `maid api` and against real salt-api, side by
//! side: the same command lines on both, the same output and exit code
//! expected. The Salt side is a real salt-master, two salt-minions and
//! salt-api (rest_cherrypy) from `tests/salt/realsalt.py`; the maid side is
//! two maids of the same ids behind `maid api`. Beside pepper, raw HTTP
//! requests in the formats salt-api takes (forms, YAML, `Accept: YAML`)
//! and its job and key endpoints are compared the same way.
//!
//! Outputs are compared after jids and start times are masked; nothing
//! else is. What maid answers differently on purpose is listed in the
//! docs/differences-from-salt.md ("Where maid differs from Salt") and kept out of the corpus here.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::api::{ApiServer, Fleet};
use crate::common::fleet::TOPIC;
use crate::common::salt::{RealSalt, venv};

/// Who pepper logs in as on both sides. Salt's `auto` eauth takes any
/// password; maid's API has the user with this password.
const USER: &str = "alice";
const PASSWORD: &str = "wonderland";
const MINIONS: [&str; 2] = ["m1", "m2"];

/// What a pepper run printed and how it exited.
#[derive(Debug, Clone, PartialEq)]
struct Run {
    stdout: String,
    code: i32,
}

/// Run pepper with `args` against the API at `url`; its home is `home`
/// (so no `~/.pepperrc` of the machine's counts).
fn pepper(url: &str, home: &Path, args: &[String]) -> Run {
    let out = Command::new(venv().join("bin/pepper"))
        .args(args)
        .env("HOME", home)
        .env("SALTAPI_URL", url)
        .env("SALTAPI_USER", USER)
        .env("SALTAPI_PASS", PASSWORD)
        .env("SALTAPI_EAUTH", "auto")
        .env_remove("PEPPERRC")
        .output()
        .expect("run pepper");
    Run {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        code: out.status.code().unwrap_or(-1),
    }
}

/// Jids and start times, which differ by design, masked.
fn masked(text: &str) -> String {
    // maid names its own command for looking a job up (docs/differences-from-salt.md).
    let text = &text.replace("maid job ", "salt-run jobs.lookup_jid ");
    // A start time is `2026, Nov 24 23:04:17.123456`: this shape, where
    // `9` is a digit and `A`/`a` a letter.
    const TIME: &[u8] = b"9999, Aaa 99 99:99:99.999999";
    let fits = |w: &[u8]| {
        w.iter().zip(TIME).all(|(c, t)| match t {
            b'9' => c.is_ascii_digit(),
            b'A' => c.is_ascii_uppercase(),
            b'a' => c.is_ascii_lowercase(),
            _ => c == t,
        })
    };
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        if b.len() - i >= TIME.len() && fits(&b[i..i + TIME.len()]) {
            out.push_str("<time>");
            i += TIME.len();
            continue;
        }
        if b[i].is_ascii_digit() && (i == 0 || !b[i - 1].is_ascii_digit()) {
            let run = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
            if run == 20 {
                out.push_str("<jid>");
            } else {
                out.push_str(&text[i..i + run]);
            }
            i += run;
            continue;
        }
        let ch = text[i..].chars().next().unwrap();
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

/// The first jid `text` names.
fn jid_in(text: &str) -> Option<String> {
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let run = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
        if run == 20 {
            return Some(text[i..i + 20].to_string());
        }
        i += run.max(1);
    }
    None
}

/// The maid side: two maids that run `cmd.run`, an API whose user has
/// every permission, and a key store whose keys pepper will accept.
async fn maid_side(fleet: &mut Fleet) -> ApiServer {
    let cmd =
        "\n[plugins.cmd]\nexec = [\"/usr/bin/*\", \"/bin/*\"]\nshell = true\nenv = [\"PATH\"]\n";
    for id in MINIONS {
        fleet.agent(id, cmd).await;
    }
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("maid.toml");
    let hash = maid_master::api::auth::hash_password(PASSWORD).unwrap();
    std::fs::write(
        &config,
        format!(
            "master_topics = [\"{TOPIC}\"]\n[redis]\nurl = \"{}\"\n\
             [master]\nkey = \"{}\"\npki_dir = \"{}\"\n\
             [api]\n[api.users]\n{USER} = \"{hash}\"\n\
             [api.perms]\n{USER} = [\".*\", \"@runner\", \"@wheel\", \"@jobs\"]\n",
            fleet.redis.url.as_deref().unwrap(),
            fleet.dir.path().join("master.key").display(),
            fleet.dir.path().join("pki").display(),
        ),
    )
    .unwrap();
    crate::api::start_api(dir, &config, &[])
}

/// The command lines, in order (later ones read the jid `{jid}` of the
/// last `local_async`). `true` marks outputs whose lines may come in any
/// order (returns printed as they arrive).
fn corpus() -> Vec<(Vec<&'static str>, bool)> {
    vec![
        // Salt accepted its minions' keys already; maid's wait pending.
        (vec!["--client", "wheel", "key.accept", "match=*"], false),
        (vec!["--client", "wheel", "key.list", "match=acc"], false),
        // Who is connected, as consoles ask (Salt's in no set order).
        (vec!["--client", "wheel", "minions.connected"], true),
        (vec!["*", "test.ping"], false),
        (vec!["-L", "m1,m2", "test.echo", "hello world"], false),
        // An id no minion answers for is awaited and reported missing.
        (vec!["-t", "2", "-L", "m1,nosuch", "test.ping"], false),
        (vec!["-t", "2", "-C", "L@m2,gone or m1", "test.ping"], false),
        (vec!["-E", "m[12]", "cmd.run", "echo hi; echo there"], false),
        (vec!["--fail-any", "*", "cmd.run", "exit 3"], false),
        (vec!["--fail-any", "*", "test.ping"], false),
        (vec!["--fail-all", "m1", "cmd.run", "exit 4"], false),
        (vec!["nobody-here", "test.ping"], false),
        (vec!["*", "no.such"], false),
        (vec!["-C", "m1 or L@m2", "test.ping"], false),
        (vec!["-G", "id:m1", "test.ping"], false),
        (vec!["-I", "role:web", "test.ping"], false),
        (vec!["-t", "1", "*", "test.sleep", "2"], false),
        (vec!["--client", "local_async", "*", "test.ping"], false),
        (
            vec!["--client", "runner", "jobs.lookup_jid", "jid={jid}"],
            false,
        ),
        (
            vec!["--client", "runner", "jobs.list_job", "jid={jid}"],
            false,
        ),
        (
            vec!["--client", "runner", "jobs.exit_success", "jid={jid}"],
            false,
        ),
        (
            vec!["--client", "runner", "jobs.print_job", "jid={jid}"],
            false,
        ),
        (
            vec![
                "--client",
                "runner",
                "jobs.list_jobs",
                "search_function=test.echo",
            ],
            false,
        ),
        (
            vec![
                "--client",
                "runner",
                "jobs.list_jobs",
                "search_function=test.echo",
                "start_time=2000, Jan 01 00:00",
                "end_time=2999-12-31",
            ],
            false,
        ),
        (
            vec![
                "--client",
                "runner",
                "jobs.list_jobs",
                "start_time=2999-01-01 10:00",
            ],
            false,
        ),
        (
            vec![
                "--client",
                "runner",
                "jobs.lookup_jid",
                "jid=20000101000000000000",
            ],
            false,
        ),
        (vec!["--client", "runner", "manage.status"], false),
        (vec!["--client", "runner", "manage.status", "tgt=m1"], false),
        (
            vec!["--client", "wheel", "key.finger", "match=nobody"],
            false,
        ),
        (vec!["--client", "runner", "manage.up"], false),
        (vec!["--client", "runner", "manage.present"], false),
        (vec!["--client", "runner", "manage.not_joined"], false),
        (vec!["--client", "runner", "manage.down"], false),
        (vec!["--batch", "1", "*", "test.echo", "batched"], true),
        (vec!["--batch", "50%", "*", "cmd.run", "echo half"], true),
        (vec!["--fail-if-incomplete", "*", "test.ping"], true),
        (vec!["--run-uri", "*", "test.echo", "through /run"], false),
        (
            vec![
                "--json",
                r#"[{"client": "local", "tgt": "m2", "fun": "test.echo", "arg": ["json"]}]"#,
            ],
            false,
        ),
    ]
}

/// Raw HTTP, as a client other than pepper sends it: `(method, path,
/// content type, body, accept)`.
fn raw_requests() -> Vec<(
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
)> {
    let form = "application/x-www-form-urlencoded";
    let yaml = "application/x-yaml";
    let json = "application/json";
    vec![
        (
            "POST",
            "/",
            form,
            "client=local&tgt=*&fun=test.echo&arg=from+a+form",
            json,
        ),
        (
            "POST",
            "/",
            form,
            "client=local&tgt=m1&fun=test.echo&arg=%5B1%2C+2%5D",
            json,
        ),
        (
            "POST",
            "/",
            yaml,
            "- client: local\n  tgt: '*'\n  fun: test.echo\n  arg: [yaml]\n",
            json,
        ),
        (
            "POST",
            "/",
            json,
            r#"[{"client": "local", "tgt": "*", "fun": "test.ping"}]"#,
            yaml,
        ),
        (
            "POST",
            "/",
            json,
            r#"{"client": "local", "tgt": "m1", "fun": "test.echo", "arg": "one"}"#,
            json,
        ),
        (
            "POST",
            "/",
            json,
            r#"[{"client": "local", "tgt": "*", "fun": "test.ping", "full_return": true}, {"client": "runner", "fun": "manage.up"}]"#,
            json,
        ),
        (
            "POST",
            "/",
            json,
            r#"[{"client": "local_batch", "tgt": "m1", "fun": "test.echo", "arg": ["b"], "batch": "1"}]"#,
            json,
        ),
        (
            "POST",
            "/",
            json,
            r#"[{"client": "local_batch", "tgt": "m2", "fun": "cmd.run", "arg": ["exit 3"], "batch": "1", "failhard": true, "batch_wait": 1}]"#,
            json,
        ),
        (
            "POST",
            "/minions",
            json,
            r#"[{"tgt": "m9*", "fun": "test.ping"}]"#,
            json,
        ),
        ("GET", "/jobs/{jid}", "", "", json),
        ("GET", "/keys/nobody", "", "", json),
        ("GET", "/jobs/20000101000000000000", "", "", json),
        (
            "POST",
            "/",
            form,
            "client=local&tgt=m1&fun=test.ping&full_return=true",
            yaml,
        ),
        (
            "POST",
            "/",
            "text/plain",
            r#"[{"client": "runner", "fun": "manage.status", "tgt": "m2"}]"#,
            json,
        ),
        ("GET", "/", "", "", json),
        ("GET", "/login", "", "", json),
        (
            "POST",
            "/",
            json,
            r#"[{"client": "local_subset", "tgt": "*", "fun": "test.echo", "arg": ["s"], "subset": 2}]"#,
            json,
        ),
        (
            "POST",
            "/",
            json,
            r#"[{"client": "local_subset", "tgt": "*", "fun": "no.such", "subset": 1}]"#,
            json,
        ),
        (
            "POST",
            "/",
            json,
            r#"[{"client": "runner_async", "fun": "manage.up"}]"#,
            json,
        ),
        (
            "POST",
            "/",
            json,
            r#"[{"client": "wheel_async", "fun": "key.list", "match": "acc"}]"#,
            json,
        ),
    ]
}

/// `GET /events` on `url` with `token`: the open stream.
async fn open_events(c: &reqwest::Client, url: &str, token: &str) -> reqwest::Response {
    let events = c
        .get(format!("{url}/events"))
        .header("X-Auth-Token", token)
        .send()
        .await
        .unwrap();
    assert_eq!(events.status(), 200, "{url}/events");
    events
}

/// Put what salt-api and maid api gave for `what` (`side`, in that
/// order) in the transcript, and in `differences` when they differ.
fn compare_sides(
    what: &str,
    side: &[Value],
    transcript: &mut String,
    differences: &mut Vec<String>,
) {
    let shown = format!("--- salt-api: {}\n--- maid api: {}", side[0], side[1]);
    transcript.push_str(&format!("$ {what}\n{shown}\n\n"));
    if side[0] != side[1] {
        differences.push(format!("{what}\n{shown}"));
    }
}

/// The tag and data of the first event whose tag starts with `prefix` and
/// ends with `suffix` on the open `/events` stream `events` (SSE, whatever
/// each side names its messages), `_stamp` masked; `seen` keeps what was
/// read, for the next event asked for.
async fn event_data(
    events: &mut reqwest::Response,
    seen: &mut String,
    prefix: &str,
    suffix: &str,
) -> (String, Value) {
    let tag = format!("{prefix}…{suffix}");
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        for line in seen.lines() {
            let Some(json) = line.strip_prefix("data:") else {
                continue;
            };
            let Ok(mut ev) = serde_json::from_str::<Value>(json.trim()) else {
                continue;
            };
            let t = ev["tag"].as_str().unwrap_or_default().to_string();
            if t.starts_with(prefix) && t.ends_with(suffix) {
                if ev["data"].get("_stamp").is_some() {
                    ev["data"]["_stamp"] = json!("<stamp>");
                }
                return (t, ev["data"].clone());
            }
        }
        assert!(
            std::time::Instant::now() < until,
            "no {tag} on /events: {seen}"
        );
        let chunk = tokio::time::timeout(std::time::Duration::from_secs(30), events.chunk())
            .await
            .unwrap_or_else(|_| panic!("no {tag} on /events, which stalled: {seen}"))
            .unwrap()
            .expect("event stream ended");
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
}

/// `POST /` of the lowstate `chunk` as JSON, asking for JSON: [`raw`]'s
/// answer.
async fn post_chunk(c: &reqwest::Client, base: &str, token: &str, chunk: &Value) -> (u16, Value) {
    let body = chunk.to_string();
    let request = (
        "POST",
        "/",
        "application/json",
        body.as_str(),
        "application/json",
    );
    raw(c, base, token, request, "").await
}

/// `(status, body)` of one raw request, the body parsed (JSON or YAML).
async fn raw(
    c: &reqwest::Client,
    base: &str,
    token: &str,
    (method, path, ctype, body, accept): (&str, &str, &str, &str, &str),
    jid: &str,
) -> (u16, Value) {
    let url = format!("{base}{}", path.replace("{jid}", jid));
    let mut req = match method {
        "GET" => c.get(url),
        _ => c
            .post(url)
            .header("Content-Type", ctype)
            .body(body.to_string()),
    };
    req = req.header("X-Auth-Token", token).header("Accept", accept);
    let r = req.send().await.unwrap();
    let status = r.status().as_u16();
    let ctype = r
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let text = r.text().await.unwrap();
    let value = if ctype.starts_with("application/x-yaml") {
        maid_salt::args::to_json(&maid_salt::yaml11::safe_load(&text).unwrap()).unwrap()
    } else {
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    };
    (status, value)
}

/// What of a raw answer is compared: all of it but maid's own `maid`
/// member, jids masked, and the welcome's client list (maid runs fewer).
fn comparable(path: &str, mut v: Value) -> Value {
    if let Some(obj) = v.as_object_mut() {
        obj.remove("maid");
        if path == "/" && obj.contains_key("clients") {
            obj.remove("clients");
        }
    }
    serde_json::from_str(&masked(&v.to_string())).unwrap()
}

/// `GET url` with the session `token`: its JSON.
async fn get_json(c: &reqwest::Client, url: &str, token: &str) -> Value {
    c.get(url)
        .header("X-Auth-Token", token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn login(c: &reqwest::Client, base: &str) -> String {
    let r: Value = c
        .post(format!("{base}/login"))
        .json(&json!({"username": USER, "password": PASSWORD, "eauth": "auto"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    r["return"][0]["token"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pepper_sees_maid_api_as_salt_api() {
    let salt = tokio::task::spawn_blocking(|| RealSalt::start(&MINIONS, true, USER))
        .await
        .unwrap();
    let salt_url = salt.api_url.clone().unwrap();
    let mut fleet = Fleet::new();
    let api = maid_side(&mut fleet).await;
    let home = tempfile::tempdir().unwrap();

    let mut differences = Vec::new();
    let mut transcript = String::new();
    let mut outputs: Vec<(Vec<&str>, Run)> = Vec::new();
    let (mut salt_jid, mut maid_jid) = (String::new(), String::new());
    for (args, any_order) in corpus() {
        let with =
            |jid: &str| -> Vec<String> { args.iter().map(|a| a.replace("{jid}", jid)).collect() };
        let (s_args, m_args) = (with(&salt_jid), with(&maid_jid));
        let (s_url, m_url, h) = (salt_url.clone(), api.url.clone(), home.path().to_path_buf());
        let (s, m) = tokio::task::spawn_blocking(move || {
            let h2 = h.clone();
            let s_args2 = s_args.clone();
            let s = std::thread::spawn(move || pepper(&s_url, &h2, &s_args2));
            let m = pepper(&m_url, &h, &m_args);
            (s.join().unwrap(), m)
        })
        .await
        .unwrap();
        if args.contains(&"local_async") {
            salt_jid = jid_in(&s.stdout).expect("salt-api gave a jid");
            maid_jid = jid_in(&m.stdout).expect("maid api gave a jid");
        }
        let norm = |r: &Run| {
            let mut lines: Vec<String> = masked(&r.stdout).lines().map(str::to_string).collect();
            if any_order {
                lines.sort();
            }
            (lines, r.code)
        };
        transcript.push_str(&format!(
            "$ pepper {}\n--- salt-api (exit {}):\n{}--- maid api (exit {}):\n{}\n",
            args.join(" "),
            s.code,
            s.stdout,
            m.code,
            m.stdout
        ));
        outputs.push((args.clone(), m.clone()));
        if norm(&s) != norm(&m) {
            differences.push(format!(
                "pepper {}\n--- salt-api (exit {}):\n{}--- maid api (exit {}):\n{}",
                args.join(" "),
                s.code,
                s.stdout,
                m.code,
                m.stdout
            ));
        }
    }

    let c = reqwest::Client::new();
    let (s_token, m_token) = (login(&c, &salt_url).await, login(&c, &api.url).await);
    for request in raw_requests() {
        let s = raw(&c, &salt_url, &s_token, request, &salt_jid).await;
        let m = raw(&c, &api.url, &m_token, request, &maid_jid).await;
        let (s, m) = (
            (s.0, comparable(request.1, s.1)),
            (m.0, comparable(request.1, m.1)),
        );
        transcript.push_str(&format!(
            "$ {} {} {:?}\n--- salt-api: {} {}\n--- maid api: {} {}\n\n",
            request.0, request.1, request.3, s.0, s.1, m.0, m.1
        ));
        if s != m {
            differences.push(format!(
                "{} {} ({}) {:?} Accept {}\n--- salt-api: {} {}\n--- maid api: {} {}",
                request.0, request.1, request.2, request.3, request.4, s.0, s.1, m.0, m.1
            ));
        }
    }
    // runner_async and wheel_async return through the event stream: the
    // same `<tag>/new` and `<tag>/ret` events from both.
    for chunk in [
        json!([{"client": "runner_async", "fun": "manage.up"}]),
        json!([{"client": "wheel_async", "fun": "key.list", "match": "acc"}]),
        json!([{"client": "wheel_async", "fun": "key.accept", "match": "m1"}]),
    ] {
        let mut side = Vec::new();
        for (url, token) in [(&salt_url, &s_token), (&api.url, &m_token)] {
            let mut events = open_events(&c, url, token).await;
            let (_, answer) = post_chunk(&c, url, token, &chunk).await;
            let tag = answer["return"][0]["tag"].as_str().unwrap().to_string();
            // Salt 3008.4 answers wheel_async with a jid its events do not
            // carry: its events are found by their kind.
            let prefix = if tag.starts_with("salt/wheel/") {
                "salt/wheel/".to_string()
            } else {
                tag
            };
            let mut seen = String::new();
            let (new_tag, new) = event_data(&mut events, &mut seen, &prefix, "/new").await;
            let job = new_tag.trim_end_matches("/new");
            let (_, ret) = event_data(&mut events, &mut seen, job, "/ret").await;
            side.push(
                serde_json::from_str::<Value>(&masked(&json!([new, ret]).to_string())).unwrap(),
            );
        }
        compare_sides(
            &format!("events of {chunk}"),
            &side,
            &mut transcript,
            &mut differences,
        );
        assert_eq!(side[1][1]["success"], json!(true), "{}", side[1]);
    }

    // Webhooks: the same answer, and the same event (its body, what the
    // body reads as, and the headers a reactor reads).
    for (ctype, body) in [
        ("application/json", r#"{"build": 42, "ok": true}"#),
        ("application/x-www-form-urlencoded", "a=1&b=two"),
    ] {
        let mut side = Vec::new();
        for (url, token) in [(&salt_url, &s_token), (&api.url, &m_token)] {
            let mut events = open_events(&c, url, token).await;
            let answer: Value = c
                .post(format!("{url}/hook/ci/build"))
                .header("X-Auth-Token", token.as_str())
                .header("Content-Type", ctype)
                .header("X-My-Secret-Key", "s3cret")
                .body(body)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            let mut seen = String::new();
            let (_, data) =
                event_data(&mut events, &mut seen, "salt/netapi/hook/ci/build", "").await;
            let headers = &data["headers"];
            side.push(json!({
                "answer": answer,
                "body": data["body"],
                "post": data["post"],
                "headers": [headers["Content-Type"], headers["X-My-Secret-Key"]],
            }));
            if url == &api.url {
                // The caller's token is not handed to every listener.
                assert!(headers.get("X-Auth-Token").is_none(), "{data}");
            }
        }
        compare_sides(
            &format!("POST /hook/ci/build {body:?}"),
            &side,
            &mut transcript,
            &mut differences,
        );
    }

    // POST /keys: a new minion's key pair, accepted, as a tar; asked again
    // (no `force`), empty files. salt-api's RSA `minion.pem` is a maid's
    // Ed25519 `minion.key` (docs/differences-from-salt.md).
    for attempt in ["first", "again"] {
        let mut side = Vec::new();
        for (url, token) in [(&salt_url, &s_token), (&api.url, &m_token)] {
            let r = c
                .post(format!("{url}/keys"))
                .form(&[
                    ("username", USER),
                    ("password", PASSWORD),
                    ("eauth", "auto"),
                    ("mid", "boot1"),
                ])
                .send()
                .await
                .unwrap();
            let header = |name: &str| {
                r.headers()
                    .get(name)
                    .map(|v| v.to_str().unwrap().to_string())
            };
            let shape = json!({
                "status": r.status().as_u16(),
                "type": header("content-type"),
                "disposition": header("content-disposition"),
            });
            let bytes = r.bytes().await.unwrap();
            // A tar's members, or what came instead.
            let members: Value = tar::Archive::new(&bytes[..])
                .entries()
                .and_then(|entries| {
                    entries
                        .map(|e| {
                            let e = e?;
                            let name = e.path()?.display().to_string();
                            Ok(json!([
                                name.replace("minion.pem", "minion.key"),
                                e.size() > 0
                            ]))
                        })
                        .collect::<std::io::Result<Vec<Value>>>()
                })
                .map(Value::from)
                .unwrap_or_else(|_| Value::from(String::from_utf8_lossy(&bytes).into_owned()));
            let listed = get_json(&c, &format!("{url}/keys"), token).await;
            let accepted = listed["return"]["minions"]
                .as_array()
                .is_some_and(|ids| ids.contains(&json!("boot1")));
            side.push(json!({"answer": shape, "members": members, "accepted": accepted}));
        }
        compare_sides(
            &format!("POST /keys mid=boot1 ({attempt})"),
            &side,
            &mut transcript,
            &mut differences,
        );
        let made = attempt == "first";
        assert_eq!(
            side[1]["members"],
            json!([["minion.pub", made], ["minion.key", made]]),
            "{}",
            side[1]
        );
        assert_eq!(side[1]["accepted"], json!(true));
    }

    // GET /stats: CherryPy's statistics, the same names and kinds of
    // value; every request counted, this one in flight; a token needed.
    let mut side = Vec::new();
    for (url, token) in [(&salt_url, &s_token), (&api.url, &m_token)] {
        // One slow request (over a second): a slow query.
        let slept = c
            .post(format!("{url}/"))
            .header("X-Auth-Token", token.as_str())
            .json(&json!([{"client": "local", "tgt": "m1", "fun": "test.sleep", "arg": [1.2]}]))
            .send()
            .await
            .unwrap();
        assert!(slept.status().is_success());
        let unauthenticated = c.get(format!("{url}/stats")).send().await.unwrap().status();
        let stats = get_json(&c, &format!("{url}/stats"), token).await;
        let app = &stats["CherryPy Applications"];
        let kinds = |v: &Value| -> Value {
            v.as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| {
                            let kind = match v {
                                Value::Number(_) => "number",
                                Value::Object(_) => "object",
                                Value::String(_) => "string",
                                Value::Bool(_) => "bool",
                                Value::Null => "null",
                                Value::Array(_) => "array",
                            };
                            (k.clone(), json!(kind))
                        })
                        .collect::<serde_json::Map<_, _>>()
                        .into()
                })
                .unwrap_or(Value::Null)
        };
        let in_flight: Vec<&Value> = app["Requests"]
            .as_object()
            .into_iter()
            .flat_map(|m| m.values())
            .filter(|r| r["End Time"].is_null())
            .collect();
        side.push(json!({
            "without a token": unauthenticated.as_u16(),
            // Not Cheroot's own thread-pool section (docs/differences-from-salt.md).
            "top": stats.as_object().map(|m| {
                m.keys()
                    .filter(|k| !k.starts_with("Cheroot HTTPServer"))
                    .cloned()
                    .collect::<Vec<_>>()
            }),
            "kinds": kinds(app),
            "requests counted": app["Total Requests"].as_u64().unwrap_or(0) > 10,
            "enabled": app["Enabled"],
            "this request": in_flight.first().map(|r| json!([r["Request-Line"], kinds(r)])),
        }));
    }
    compare_sides("GET /stats", &side, &mut transcript, &mut differences);
    assert_eq!(side[1]["requests counted"], json!(true), "{}", side[1]);
    assert!(
        side[1]["kinds"].get("Slow Queries").is_some(),
        "{}",
        side[1]
    );

    // m2 down on both sides, stopped as a service is: what pepper and a
    // raw `local` chunk say of a targeted minion that is down.
    let salt = tokio::task::spawn_blocking(move || {
        let mut salt = salt;
        salt.stop_minion("m2");
        salt
    })
    .await
    .unwrap();
    fleet.stop("m2");
    // Salt words a stopped minion `[No response]` on a host whose minions
    // share the master's addresses, maid `[Not connected]`
    // (docs/differences-from-salt.md): both read alike here. `boot1`,
    // whose key POST /keys accepted and which never connected, is expected
    // by `*` on both sides.
    let alike = |text: String| {
        let tail = "The minions may not have all finished running and any remaining minions \
                    will return upon completion. To look up the return data for this job \
                    later, run the following command:";
        text.replace(
            &format!("[No response]\n    {tail}\n    \n    salt-run jobs.lookup_jid <jid>"),
            "[Not connected]",
        )
        .replace(
            &format!("[No response]\\n{tail}\\n\\nsalt-run jobs.lookup_jid <jid>"),
            "[Not connected]",
        )
    };
    for args in [
        vec!["-t", "3", "*", "test.ping"],
        vec!["-t", "3", "-L", "m1,m2", "test.ping"],
        vec!["-t", "3", "m2", "test.ping"],
        // Its `Failed:` list is in no set order.
        vec!["--fail-if-incomplete", "-t", "3", "*", "test.ping"],
    ] {
        let line = format!("(m2 down) pepper {}", args.join(" "));
        let sorted = args[0] == "--fail-if-incomplete";
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let (s_url, m_url, h) = (salt_url.clone(), api.url.clone(), home.path().to_path_buf());
        let (s, m) = tokio::task::spawn_blocking(move || {
            (pepper(&s_url, &h, &args), pepper(&m_url, &h, &args))
        })
        .await
        .unwrap();
        let shown = |r: &Run| {
            let mut lines: Vec<String> = alike(masked(&r.stdout))
                .lines()
                .map(str::to_string)
                .collect();
            if sorted {
                lines.sort();
            }
            json!({"stdout": lines, "exit": r.code})
        };
        compare_sides(
            &line,
            &[shown(&s), shown(&m)],
            &mut transcript,
            &mut differences,
        );
    }
    for chunk in [
        json!([{"client": "local", "tgt": "*", "fun": "test.ping", "timeout": 3}]),
        json!([{"client": "local", "tgt": "m1,m2", "tgt_type": "list", "fun": "test.ping", "timeout": 3}]),
        json!([{"client": "local", "tgt": "*", "fun": "test.ping", "timeout": 3, "full_return": true}]),
    ] {
        let mut side = Vec::new();
        for (url, token) in [(&salt_url, &s_token), (&api.url, &m_token)] {
            let (_, answer) = post_chunk(&c, url, token, &chunk).await;
            let answer = comparable("/", answer).to_string();
            side.push(serde_json::from_str::<Value>(&alike(answer)).unwrap());
        }
        compare_sides(
            &format!("(m2 down) POST / {chunk}"),
            &side,
            &mut transcript,
            &mut differences,
        );
    }
    drop(salt);

    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("pepper-transcript.txt");
    std::fs::write(&path, &transcript).unwrap();
    // The corpus ran what it says: real returns, real exit codes (so a
    // pepper that failed the same way on both sides would not pass).
    let printed = |words: &[&str]| {
        outputs
            .iter()
            .find(|(a, _)| a == words)
            .map(|(_, r)| r.clone())
            .unwrap()
    };
    assert_eq!(
        printed(&["*", "test.ping"]).stdout,
        "m1:\n    True\nm2:\n    True\n"
    );
    assert_eq!(printed(&["--fail-any", "*", "cmd.run", "exit 3"]).code, 3);
    assert_eq!(printed(&["--fail-all", "m1", "cmd.run", "exit 4"]).code, 4);
    assert!(
        printed(&["--client", "runner", "manage.up"])
            .stdout
            .contains("- m2")
    );
    assert!(
        printed(&[
            "--client",
            "runner",
            "jobs.list_jobs",
            "search_function=test.echo"
        ])
        .stdout
        .contains("test.echo")
    );
    assert!(
        differences.is_empty(),
        "{} of {} cases differ from Salt {}'s salt-api:\n\n{}",
        differences.len(),
        corpus().len() + raw_requests().len(),
        crate::common::salt::SALT_VERSION,
        differences.join("\n\n")
    );
    eprintln!("transcript: {}", path.display());
}
