//! `maid api` end to end: the real binary on a free port, a real
//! `redis-server`, real agents that only accept jobs signed by the API's
//! master key, and real HTTP requests — login and token expiry, every
//! endpoint, lowstate with several chunks, `local_async` then the job
//! cache, the SSE stream, malformed bodies, 100 concurrent requests
//! sharing the Redis connections, HTTPS, and a schemathesis run of the
//! OpenAPI document that must find no server error.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::fleet::{Agent, TOPIC, start_agent, wait_registered};
use crate::common::redis::RedisServer;
use maid_bus::{Bus, RedisConfig};
use reqwest::StatusCode;
use serde_json::{Value, json};

pub(crate) const USER: &str = "tester";
/// May run `test.*` and `grains.items` on `web*` only, and see only their
/// own jobs.
pub(crate) const INTERN: &str = "intern";
/// Knows the password, has no permissions: cannot log in.
const NOBODY: &str = "nobody";
/// May call the runners, and see only their own jobs.
pub(crate) const WATCHER: &str = "watcher";
pub(crate) const PASSWORD: &str = "correct horse";

/// A `maid api` process; killed on drop.
pub(crate) struct ApiServer {
    child: Child,
    pub(crate) url: String,
    _dir: tempfile::TempDir,
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A Redis, a master key, and agents that trust only that key.
pub(crate) struct Fleet {
    _server: RedisServer,
    pub(crate) redis: RedisConfig,
    pub(crate) bus: Bus,
    pub(crate) dir: tempfile::TempDir,
    pub(crate) agents: Vec<Agent>,
}

impl Fleet {
    pub(crate) fn new() -> Fleet {
        let server = RedisServer::start();
        let redis = server.config();
        let bus = Bus::new(&redis).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let key = maid_agent::trust::generate().unwrap();
        std::fs::write(
            dir.path().join("master.key"),
            maid_agent::trust::encode_signing(&key),
        )
        .unwrap();
        std::fs::write(
            dir.path().join("master.pub"),
            maid_agent::trust::encode_verifying(&key.verifying_key()),
        )
        .unwrap();
        Fleet {
            _server: server,
            redis,
            bus,
            dir,
            agents: Vec::new(),
        }
    }

    /// Stop agent `id` as an operator stops the service (SIGTERM): its
    /// alive key goes with it, and the master knows it is down.
    pub(crate) fn stop(&mut self, id: &str) {
        let at = self
            .agents
            .iter()
            .position(|a| a.id == id)
            .unwrap_or_else(|| panic!("no agent {id}"));
        let mut agent = self.agents.remove(at);
        assert!(agent.terminate().success(), "{id} did not stop cleanly");
    }

    /// Start agent `id` with `grains` (TOML lines) and wait for it.
    pub(crate) async fn agent(&mut self, id: &str, grains: &str) {
        let agent = self.signed_agent(id, &format!("[grains]\n{grains}\n"));
        self.agents.push(agent);
        wait_registered(&self.bus, &[id]).await;
    }

    /// Agent `id`, with a `state_dir` of its own, running only jobs signed
    /// by the master key, or by the keys `extra` (TOML lines, `[security]`'s
    /// first) names in a `trusted_keys` of its own.
    pub(crate) fn signed_agent(&self, id: &str, extra: &str) -> Agent {
        let state = self.dir.path().join(id);
        std::fs::create_dir_all(&state).unwrap();
        let keys = if extra.contains("trusted_keys") {
            String::new()
        } else {
            format!(
                "trusted_keys = [\"{}\"]\n",
                self.dir.path().join("master.pub").display()
            )
        };
        start_agent(
            &self.redis,
            id,
            &format!(
                "[security]\nrequire_signed = true\nstate_dir = \"{}\"\n{keys}{extra}\n",
                state.display()
            ),
        )
    }

    /// Accept every maid's key, as `maid key -A -y` does, into a key store
    /// of the fleet's own: its directory.
    pub(crate) fn accept_keys(&self) -> std::path::PathBuf {
        let pki = self.dir.path().join("pki");
        let accepted = crate::common::maid_command()
            .args(["key", "-A", "-y", "--pki-dir"])
            .arg(&pki)
            .env("MAID_REDIS", self.redis.url.as_deref().unwrap())
            .env_remove("MAID_CONFIG")
            .output()
            .unwrap();
        assert!(accepted.status.success(), "{accepted:?}");
        pki
    }

    /// Write a `maid api` configuration into `dir` for this fleet's Redis
    /// and master key, with `[master]` lines `master_toml`, `[api]` lines
    /// `api_toml`, and users `perms` (each `(name, TOML list)`, all with
    /// [`PASSWORD`]): its path.
    pub(crate) fn api_config(
        &self,
        dir: &Path,
        master_toml: &str,
        api_toml: &str,
        perms: &[(&str, &str)],
    ) -> std::path::PathBuf {
        let config = dir.join("maid.toml");
        let hash = maid_master::api::auth::hash_password(PASSWORD).unwrap();
        let users: String = perms
            .iter()
            .map(|(user, _)| format!("{user} = \"{hash}\"\n"))
            .collect();
        let perms: String = perms
            .iter()
            .map(|(user, list)| format!("{user} = {list}\n"))
            .collect();
        std::fs::write(
            &config,
            format!(
                "master_topics = [\"{TOPIC}\"]\n[redis]\nurl = \"{}\"\n[master]\nkey = \"{}\"\n\
                 {master_toml}\n[api]\n{api_toml}\n[api.users]\n{users}[api.perms]\n{perms}",
                self.redis.url.as_deref().unwrap(),
                self.dir.path().join("master.key").display(),
            ),
        )
        .unwrap();
        config
    }

    /// Start `maid api` with `[master]` lines `master_toml` and users
    /// `perms` ([`Fleet::api_config`]).
    pub(crate) fn api_for(&self, master_toml: &str, perms: &[(&str, &str)]) -> ApiServer {
        let dir = tempfile::tempdir().unwrap();
        let config = self.api_config(dir.path(), master_toml, "", perms);
        start_api(dir, &config, &[])
    }

    /// Start `maid api` with `[api]` lines `api_toml` and `extra_args`.
    pub(crate) fn api(&self, api_toml: &str, extra_args: &[&str]) -> ApiServer {
        self.api_with("", api_toml, extra_args)
    }

    /// [`Fleet::api`] with `[master]` lines `master_toml` besides its key.
    pub(crate) fn api_with(
        &self,
        master_toml: &str,
        api_toml: &str,
        extra_args: &[&str],
    ) -> ApiServer {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("maid.toml");
        let hash = maid_master::api::auth::hash_password(PASSWORD).unwrap();
        std::fs::write(
            &config,
            format!(
                "master_topics = [\"{TOPIC}\"]\n[redis]\nurl = \"{}\"\n[master]\nkey = \"{}\"\n{master_toml}\n\
                 [api]\n{api_toml}\n[api.users]\n{USER} = \"{hash}\"\n\
                 {INTERN} = \"{hash}\"\n{NOBODY} = \"{hash}\"\n{WATCHER} = \"{hash}\"\n\
                 [api.perms]\n{USER} = [\".*\", \"@jobs\"]\n\
                 {INTERN} = [{{ \"web*\" = [\"test.*\", \"grains.items\"] }}]\n\
                 {WATCHER} = [\"@runner\"]\n",
                self.redis.url.as_deref().unwrap(),
                self.dir.path().join("master.key").display(),
            ),
        )
        .unwrap();
        start_api(dir, &config, extra_args)
    }
}

/// Start `maid api` with the configuration file `config` (in `dir`).
pub(crate) fn start_api(dir: tempfile::TempDir, config: &Path, extra_args: &[&str]) -> ApiServer {
    let mut child = crate::common::maid_command()
        .args(["api", "--listen", "127.0.0.1:0", "-c"])
        .arg(config)
        .args(extra_args)
        .env("MAID_LOG", "maid=warn")
        .env_remove("MAID_REDIS")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start maid api");
    let url = listening_url(&mut child)
        .unwrap_or_else(|line| panic!("maid api did not say where it listens: {line:?}"));
    ApiServer {
        child,
        url,
        _dir: dir,
    }
}

/// The url a `maid api` started with its stdout piped says it listens on
/// (the end of its first line); `Err` with that line when it says none.
pub(crate) fn listening_url(child: &mut Child) -> Result<String, String> {
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    match line.trim().rsplit(' ').next() {
        Some(url) if url.starts_with("http") => Ok(url.to_string()),
        _ => Err(line),
    }
}

pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

pub(crate) async fn login(c: &reqwest::Client, api: &ApiServer) -> String {
    let r = c
        .post(format!("{}/login", api.url))
        .json(&json!({"username": USER, "password": PASSWORD, "eauth": "pam"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let header = r.headers()["x-auth-token"].to_str().unwrap().to_string();
    let body: Value = r.json().await.unwrap();
    let token = body["return"][0]["token"].as_str().unwrap().to_string();
    assert_eq!(token, header);
    assert_eq!(body["return"][0]["user"], USER);
    token
}

/// Log in to the API at `url` as `user` (with [`PASSWORD`]): the token.
pub(crate) async fn token_for(c: &reqwest::Client, url: &str, user: &str) -> String {
    let r = c
        .post(format!("{url}/login"))
        .json(&json!({"username": user, "password": PASSWORD, "eauth": "pam"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK, "login as {user}");
    r.headers()["x-auth-token"].to_str().unwrap().to_string()
}

/// `POST /` with `body`; the status and the JSON answer.
pub(crate) async fn lowstate(
    c: &reqwest::Client,
    api: &ApiServer,
    token: &str,
    body: &Value,
) -> (StatusCode, Value) {
    let r = c
        .post(format!("{}/", api.url))
        .header("X-Auth-Token", token)
        .json(body)
        .send()
        .await
        .unwrap();
    (r.status(), r.json().await.unwrap())
}

async fn get(c: &reqwest::Client, api: &ApiServer, token: &str, path: &str) -> (StatusCode, Value) {
    let r = c
        .get(format!("{}{path}", api.url))
        .header("X-Auth-Token", token)
        .send()
        .await
        .unwrap();
    (r.status(), r.json().await.unwrap())
}

fn sorted(v: &Value) -> Vec<String> {
    let mut out: Vec<String> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_tokens_expire_and_guard_every_endpoint() {
    let fleet = Fleet::new();
    let api = fleet.api("token_ttl_secs = 4", &[]);
    let c = client();

    for (body, status, field) in [
        (json!({"username": USER, "password": "wrong"}), 401, None),
        (
            json!({"username": "nobody", "password": PASSWORD}),
            401,
            None,
        ),
        (json!({"password": PASSWORD}), 400, Some("username")),
        (
            json!({"username": USER, "password": 5}),
            400,
            Some("password"),
        ),
        (json!([1]), 400, Some("body")),
    ] {
        let r = c
            .post(format!("{}/login", api.url))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), status, "{body}");
        let answer: Value = r.json().await.unwrap();
        assert_eq!(answer["status"], status, "{answer}");
        if let Some(f) = field {
            assert_eq!(answer["field"], f, "{answer}");
        }
    }
    let r = c
        .post(format!("{}/login", api.url))
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);

    // Without a token, with a made-up one: 401 everywhere but login.
    for token in [None, Some("0123456789abcdef")] {
        for (method, path) in [
            ("POST", "/"),
            ("GET", "/jobs/20260101000000000000"),
            ("GET", "/minions"),
            ("GET", "/minions/x"),
            ("GET", "/events"),
            ("POST", "/hook/ci/build"),
        ] {
            let mut req = c.request(method.parse().unwrap(), format!("{}{path}", api.url));
            if let Some(t) = token {
                req = req.header("X-Auth-Token", t);
            }
            let r = req.json(&json!([])).send().await.unwrap();
            assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "{method} {path}");
            let body: Value = r.json().await.unwrap();
            assert!(body["error"].as_str().unwrap().contains("X-Auth-Token") || token.is_some());
        }
    }

    let token = login(&c, &api).await;
    assert_eq!(get(&c, &api, &token, "/minions").await.0, StatusCode::OK);
    // Logged out: the token is gone.
    let r = c
        .post(format!("{}/logout", api.url))
        .header("X-Auth-Token", &token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(
        get(&c, &api, &token, "/minions").await.0,
        StatusCode::UNAUTHORIZED
    );
    // Expired: valid for token_ttl_secs, then refused.
    let token = login(&c, &api).await;
    assert_eq!(get(&c, &api, &token, "/minions").await.0, StatusCode::OK);
    tokio::time::sleep(Duration::from_millis(4300)).await;
    assert_eq!(
        get(&c, &api, &token, "/minions").await.0,
        StatusCode::UNAUTHORIZED
    );

    // The document served is the one in the repository; unknown paths
    // are JSON 404s.
    let r = c
        .get(format!("{}/openapi.json", api.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let served = r.text().await.unwrap();
    let file =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/openapi.json"))
            .unwrap();
    assert_eq!(served, file);
    serde_json::from_str::<Value>(&served).unwrap();
    let r = c.get(format!("{}/nowhere", api.url)).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lowstate_runs_several_chunks_and_reports_like_maid_run() {
    let mut fleet = Fleet::new();
    fleet.agent("web-1", "role = \"web\"").await;
    fleet.agent("db-1", "role = \"db\"").await;
    fleet.agent("gone", "").await;
    // A dead maid whose alive key outlives it: a missed maid.
    fleet.agents.pop().unwrap().kill();
    let api = fleet.api("", &[]);
    let c = client();
    let token = login(&c, &api).await;

    let (status, body) = lowstate(
        &c,
        &api,
        &token,
        &json!([
            {"client": "local", "tgt": "*", "fun": "test.ping", "timeout": 6},
            {"client": "local", "tgt": ["web-1"], "tgt_type": "list", "fun": "test.echo", "arg": ["hi"]},
            {"client": "local", "tgt": "role:db", "expr_form": "grain", "fun": "test.arg",
             "arg": [1], "kwarg": {"k": "v"}},
            {"client": "local", "tgt": "web-*", "fun": "nosuch.fun"},
            {"client": "local", "tgt": "role;web", "tgt_type": "grain", "delimiter": ";",
             "fun": "test.echo", "arg": ["semi"]},
        ]),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let ret = &body["return"];
    let maid = &body["maid"];
    assert_eq!(ret.as_array().unwrap().len(), 5, "{body}");
    // The missed maid is answered for, as `maid run` answers for it: a
    // maid that never PINGs is not connected.
    assert_eq!(
        ret[0],
        json!({"web-1": true, "db-1": true, "gone": "Minion did not return. [Not connected]"}),
        "{body}"
    );
    assert_eq!(sorted(&maid[0]["missed_maids"]), ["gone"]);
    assert_eq!(sorted(&maid[0]["targeted"]), ["db-1", "web-1"]);
    assert_eq!(maid[0]["missed_minions"], json!([]));
    assert_eq!(maid[0]["repeated"], json!({}));

    assert_eq!(ret[1], json!({"web-1": "hi"}), "{body}");
    assert_eq!(sorted(&maid[1]["empty"]), ["db-1"]);

    assert_eq!(ret[2]["db-1"]["args"], json!([1]), "{body}");
    assert_eq!(ret[2]["db-1"]["kwargs"]["k"], "v", "{body}");

    // An unknown function still goes out and comes back as Salt's
    // not-available return.
    assert_eq!(ret[3]["web-1"], "'nosuch.fun' is not available.", "{body}");
    assert_eq!(maid[3]["retcodes"]["web-1"], 254, "{body}");
    // The job's delimiter reaches the maids, which split the grain target
    // at it.
    assert_eq!(ret[4], json!({"web-1": "semi"}), "{body}");
    assert_eq!(sorted(&maid[4]["empty"]), ["db-1"]);
    let jids: Vec<&str> = maid
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["jid"].as_str().unwrap())
        .collect();
    assert!(jids.windows(2).all(|w| w[0] < w[1]), "{jids:?}");

    // A single chunk without the list, as salt-api takes it; and the
    // signed job was accepted by maids that require signatures, with the
    // API user as the job's user.
    let (status, body) = lowstate(
        &c,
        &api,
        &token,
        &json!({"client": "local", "tgt": "db-1", "fun": "test.ping"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["return"], json!([{"db-1": true}]));
    assert_eq!(body["maid"][0]["rejected"], json!({}));
}

/// A state run through the API reads its SLS files from the master's
/// `file_roots`, stored (signed with the master's key) before the job goes
/// out, as `maid run` stores them; a master without file_roots stores
/// nothing, and the maid finds no such SLS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_run_through_the_api_reads_the_masters_file_roots() {
    let mut fleet = Fleet::new();
    let roots = fleet.dir.path().join("srv");
    std::fs::create_dir_all(&roots).unwrap();
    std::fs::write(
        roots.join("hello.sls"),
        "hello:\n  test.succeed_with_changes:\n    - name: from the master\n",
    )
    .unwrap();
    let audit = fleet.dir.path().join("web-1.audit.jsonl");
    let grants = format!(
        "[plugins.state]\nfetch = [\"salt://**\"]\n\
         call = [\"test.*\", \"saltutil.is_running\"]\n\
         [plugins.saltutil]\njobs = true\n[audit]\npath = {:?}\n",
        audit.display().to_string()
    );
    fleet.agents.push(fleet.signed_agent("web-1", &grants));
    wait_registered(&fleet.bus, &["web-1"]).await;
    let c = client();
    let chunk = json!({"client": "local", "tgt": "web-1", "fun": "state.apply", "arg": ["hello"]});

    let bare = fleet.api("", &[]);
    let token = login(&c, &bare).await;
    let (status, body) = lowstate(&c, &bare, &token, &chunk).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["return"][0]["web-1"],
        json!(["No matching sls found for 'hello' in env 'base'"]),
        "{body}"
    );
    drop(bare);

    let api = fleet.api_with(
        &format!("file_roots = [{:?}]", roots.display().to_string()),
        "",
        &[],
    );
    let token = login(&c, &api).await;
    let (status, body) = lowstate(&c, &api, &token, &chunk).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let state =
        &body["return"][0]["web-1"]["test_|-hello_|-from the master_|-succeed_with_changes"];
    assert_eq!(state["result"], json!(true), "{body}");
    assert_eq!(state["__sls__"], json!("hello"), "{body}");
    assert_eq!(body["maid"][0]["retcodes"]["web-1"], json!(0), "{body}");
    // The maid's audit trail says who ran the state run, signed by whom,
    // and what each state did (the names of its changes, never the
    // changes).
    let jid = body["maid"][0]["jid"].as_str().unwrap().to_string();
    let record = wait_for(|| {
        std::fs::read_to_string(&audit)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|r| r["jid"] == jid.as_str() && r["decision"] == "ran")
    })
    .await;
    assert_eq!(record["fun"], "state.apply", "{record}");
    assert_eq!(record["user"], USER, "{record}");
    assert!(record["signer"].is_string(), "{record}");
    // The state's id and name as digests, as arguments are.
    let sha = |s: &str| hex::encode(<sha2::Sha256 as sha2::Digest>::digest(format!("{s:?}")));
    assert_eq!(
        record["states"],
        json!([{"function": "test.succeed_with_changes", "id_sha256": sha("hello"),
                "name_sha256": sha("from the master"), "result": true, "changed": ["testing"]}]),
        "{record}"
    );
}

/// `found()` once it is `Some`, within the fleet's reply deadline.
async fn wait_for<T>(found: impl Fn() -> Option<T>) -> T {
    let deadline = std::time::Instant::now() + crate::common::fleet::REPLY_DEADLINE;
    loop {
        if let Some(t) = found() {
            return t;
        }
        assert!(std::time::Instant::now() < deadline, "not found in time");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_async_jobs_minions_and_the_event_stream() {
    let mut fleet = Fleet::new();
    fleet.agent("web-1", "role = \"web\"").await;
    fleet.agent("db-1", "role = \"db\"").await;
    let api = fleet.api("", &[]);
    let c = client();
    let token = login(&c, &api).await;

    // Listen first, then publish.
    let mut events = open_events(&c, &api, &token).await;
    assert_eq!(events.status(), StatusCode::OK);
    assert_eq!(events.headers()["content-type"], "text/event-stream");

    let (status, body) = lowstate(
        &c,
        &api,
        &token,
        &json!([{"client": "local_async", "tgt": "role:web", "tgt_type": "grain",
                 "fun": "test.echo", "arg": ["later"]}]),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let jid = body["return"][0]["jid"].as_str().unwrap().to_string();
    assert_eq!(body["return"][0]["minions"], json!(["web-1"]));
    assert_eq!(body["maid"][0]["jid"], jid);

    // The SSE stream sees the job go out, the PINGs and the return (the
    // two maids' messages in any order).
    let want = format!("salt/job/{jid}/ret/web-1");
    let wanted = [
        want.clone(),
        format!("salt/job/{jid}/new"),
        format!("maid/job/{jid}/ping/db-1"),
        format!("maid/job/{jid}/ping/web-1"),
    ];
    let seen = read_events(&mut events, &wanted, Duration::from_secs(15)).await;
    let ret_line = seen
        .lines()
        .find(|l| l.starts_with("data:") && l.contains(&want))
        .unwrap();
    let ev: Value = serde_json::from_str(ret_line.trim_start_matches("data:").trim()).unwrap();
    assert_eq!(ev["data"]["return"], "later");
    // As salt-api: unnamed messages, a `tag:` line before each `data:`.
    assert!(seen.contains(&format!("tag: {want}\ndata: ")), "{seen}");
    assert!(!seen.contains("event:"), "{seen}");
    drop(events);

    // The job cache has it (its write and the return's PUBLISH go out
    // together, in no set order).
    let until = Instant::now() + Duration::from_secs(5);
    let job = loop {
        let (status, job) = get(&c, &api, &token, &format!("/jobs/{jid}")).await;
        assert_eq!(status, StatusCode::OK);
        if job["return"][0] != json!({}) || Instant::now() > until {
            break job;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(job["return"], json!([{"web-1": "later"}]), "{job}");
    assert_eq!(job["info"][0]["Function"], "test.echo");
    assert_eq!(job["info"][0]["Result"]["web-1"]["retcode"], 0);
    let (_, none) = get(&c, &api, &token, "/jobs/19990101000000000000").await;
    assert_eq!(none["return"], json!([{}]));

    // The registry.
    let (status, minions) = get(&c, &api, &token, "/minions").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(minions["return"][0]["web-1"]["role"], "web", "{minions}");
    assert_eq!(minions["return"][0]["db-1"]["id"], "db-1");
    assert_eq!(minions["maid"]["db-1"]["alive"], true);
    assert!(
        minions["maid"]["web-1"]["functions"]
            .as_array()
            .unwrap()
            .contains(&json!("test.ping"))
    );
    let (_, one) = get(&c, &api, &token, "/minions/db-1").await;
    assert_eq!(one["return"][0].as_object().unwrap().len(), 1);
    assert_eq!(one["return"][0]["db-1"]["role"], "db");
    let (status, nobody) = get(&c, &api, &token, "/minions/nobody").await;
    assert_eq!((status, &nobody["return"]), (StatusCode::OK, &json!([{}])));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_bodies_are_400_naming_the_field() {
    let fleet = Fleet::new();
    let api = fleet.api("max_timeout_secs = 60", &[]);
    let c = client();
    let token = login(&c, &api).await;
    let ok = json!({"client": "local", "tgt": "*", "fun": "test.ping"});
    let with = |k: &str, v: Value| {
        let mut chunk = ok.clone();
        chunk[k] = v;
        json!([chunk])
    };
    let cases = [
        (json!("just a string"), "body"),
        (json!([]), "body"),
        (json!([ok, 7]), "[1]"),
        (json!([{"tgt": "*", "fun": "test.ping"}]), "[0].client"),
        // test.ping is no runner; ssh is no client maid runs.
        (with("client", json!("runner")), "[0].fun"),
        (with("client", json!("ssh")), "[0].client"),
        (with("client", json!(1)), "[0].client"),
        (json!([ok, {"client": "local", "tgt": "*"}]), "[1].fun"),
        (with("fun", json!("")), "[0].fun"),
        (with("fun", json!(["a.b", "c.d"])), "[0].fun"),
        (json!([{"client": "local", "fun": "test.ping"}]), "[0].tgt"),
        (with("tgt", json!({"a": 1})), "[0].tgt"),
        (with("tgt_type", json!("range")), "[0].tgt_type"),
        // A nodegroup the master does not define.
        (with("tgt_type", json!("nodegroup")), "[0].tgt"),
        (with("expr_form", json!(5)), "[0].expr_form"),
        (
            json!([{"client": "local", "tgt": "[", "tgt_type": "pcre", "fun": "a.b"}]),
            "[0].tgt",
        ),
        (
            json!([{"client": "local", "tgt": "a and (", "tgt_type": "compound", "fun": "a.b"}]),
            "[0].tgt",
        ),
        (with("arg", json!({"x": 1})), "[0].arg"),
        (with("kwarg", json!([1])), "[0].kwarg"),
        (with("timeout", json!(0)), "[0].timeout"),
        (with("timeout", json!(61)), "[0].timeout"),
        (with("timeout", json!("soon")), "[0].timeout"),
    ];
    for (body, field) in cases {
        let (status, answer) = lowstate(&c, &api, &token, &body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
        assert_eq!(answer["field"], field, "{body}: {answer}");
        assert_eq!(answer["status"], 400);
        assert!(
            answer["error"].as_str().unwrap().starts_with(field),
            "{answer}"
        );
    }
    // Not JSON at all.
    let r = c
        .post(format!("{}/", api.url))
        .header("X-Auth-Token", &token)
        .body("{\"client\": ")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert_eq!(r.json::<Value>().await.unwrap()["field"], "body");
}

/// The Redis server's `connected_clients` now, not counting `conn`, the
/// probe's own (one probe connection throughout, so that no probe counts
/// another's connection still closing).
async fn connected_clients(conn: &mut maid_bus::Conn) -> i64 {
    let info: String = redis::cmd("INFO")
        .arg("clients")
        .query_async(conn)
        .await
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("connected_clients:"))
        .unwrap()
        .trim()
        .parse::<i64>()
        .unwrap()
        - 1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_job_blocks_none_of_100_concurrent_requests() {
    let mut fleet = Fleet::new();
    fleet.agent("a-1", "").await;
    fleet.agent("a-2", "").await;
    let api = fleet.api("", &[]);
    let c = client();
    let token = login(&c, &api).await;
    // A slow job first, then 100 quick ones at once.
    let slow = {
        let (c, url, token) = (c.clone(), api.url.clone(), token.clone());
        tokio::spawn(async move {
            let started = Instant::now();
            let r = c
                .post(format!("{url}/"))
                .header("X-Auth-Token", token)
                .json(&json!([{"client": "local", "tgt": "a-1", "fun": "test.sleep", "arg": [12], "timeout": 20}]))
                .send()
                .await
                .unwrap();
            let body: Value = r.json().await.unwrap();
            (started.elapsed(), body)
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    let burst: Vec<_> = (0..100)
        .map(|i| {
            let (c, url, token) = (c.clone(), api.url.clone(), token.clone());
            tokio::spawn(async move {
                let r = c
                    .post(format!("{url}/"))
                    .header("X-Auth-Token", token)
                    .json(&json!([{"client": "local", "tgt": "*", "fun": "test.echo", "arg": [i], "timeout": 10}]))
                    .send()
                    .await
                    .unwrap();
                (r.status(), r.json::<Value>().await.unwrap())
            })
        })
        .collect();
    for (i, task) in burst.into_iter().enumerate() {
        let (status, body) = task.await.unwrap();
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["return"][0], json!({"a-1": i, "a-2": i}), "{body}");
        assert_eq!(body["maid"][0]["missed_minions"], json!([]), "{body}");
    }
    // The burst did not wait for the slow job: it is still running.
    let burst_time = started.elapsed();
    assert!(!slow.is_finished(), "the burst took {burst_time:?}");
    let (slow_time, slow_body) = slow.await.unwrap();
    assert_eq!(slow_body["return"][0], json!({"a-1": true}), "{slow_body}");
    assert!(slow_time >= Duration::from_secs(12), "{slow_time:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_never_open_a_connection_each() {
    let mut fleet = Fleet::new();
    fleet.agent("a-1", "").await;
    let api = fleet.api("", &[]);
    let c = client();
    let token = login(&c, &api).await;
    let mut probe = fleet.bus.connect().await.unwrap();
    let baseline = connected_clients(&mut probe).await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut peak = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                peak = peak.max(connected_clients(&mut probe).await);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            peak
        })
    };
    let burst: Vec<_> = (0..100)
        .map(|_| {
            let (c, url, token) = (c.clone(), api.url.clone(), token.clone());
            tokio::spawn(async move {
                c.post(format!("{url}/"))
                    .header("X-Auth-Token", token)
                    .json(&json!([{"client": "local", "tgt": "*", "fun": "test.sleep", "arg": [0.5], "timeout": 10}]))
                    .send()
                    .await
                    .unwrap()
                    .status()
            })
        })
        .collect();
    for task in burst {
        assert_eq!(task.await.unwrap(), StatusCode::OK);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let peak = watcher.await.unwrap();
    // 100 jobs in flight at once, on the API's one command connection and
    // one subscription (one more is slack, should the hub reconnect).
    assert!(
        peak <= baseline + 1,
        "peak {peak} clients, baseline {baseline}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_with_a_certificate_and_key() {
    let fleet = Fleet::new();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (cert_path, key_path) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert_path, cert.cert.pem()).unwrap();
    std::fs::write(&key_path, cert.key_pair.serialize_pem()).unwrap();
    let api = fleet.api(
        "",
        &[
            "--tls-cert",
            cert_path.to_str().unwrap(),
            "--tls-key",
            key_path.to_str().unwrap(),
        ],
    );
    assert!(api.url.starts_with("https://"), "{}", api.url);
    let port = api.url.rsplit(':').next().unwrap();
    let c = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(cert.cert.pem().as_bytes()).unwrap())
        .resolve("localhost", format!("127.0.0.1:{port}").parse().unwrap())
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let r = c
        .post(format!("https://localhost:{port}/login"))
        .json(&json!({"username": USER, "password": PASSWORD}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    // Over HTTPS the session cookie never goes out in clear.
    let cookie = r.headers()["set-cookie"].to_str().unwrap();
    assert!(cookie.ends_with("; Secure"), "{cookie}");
    // Plain HTTP on the TLS port gets nowhere.
    let plain = client()
        .get(format!("http://127.0.0.1:{port}/openapi.json"))
        .send()
        .await;
    assert!(plain.is_err() || !plain.unwrap().status().is_success());
}

/// Exactly the fuzzer this test was written against: a newer schemathesis
/// may change what its options mean (4.x made fuzzing repeat until
/// `--max-time` is spent, and its cut-off crashed inside hypothesis).
const SCHEMATHESIS: &str = "4.32.5";
const HYPOTHESIS: &str = "6.170.15";

/// A Python virtualenv with that schemathesis, made once under the target
/// directory and reused.
fn schemathesis() -> PathBuf {
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("schemathesis-venv");
    let bin = venv.join("bin/schemathesis");
    let works = |bin: &Path| {
        Command::new(bin).arg("--version").output().is_ok_and(|o| {
            o.status.success()
                && String::from_utf8_lossy(&o.stdout).trim_end()
                    == format!("schemathesis, version {SCHEMATHESIS}")
        })
    };
    if works(&bin) {
        return bin;
    }
    let run = |cmd: &mut Command, what: &str| {
        let out = cmd
            .output()
            .unwrap_or_else(|e| panic!("{what}: {e} (is python3 installed?)"));
        assert!(
            out.status.success(),
            "{what} failed; schemathesis is needed from PyPI:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run(
        Command::new("python3").args(["-m", "venv"]).arg(&venv),
        "python3 -m venv",
    );
    run(
        Command::new(venv.join("bin/pip"))
            .args(["install", "--quiet"])
            .arg(format!("schemathesis=={SCHEMATHESIS}"))
            .arg(format!("hypothesis=={HYPOTHESIS}")),
        "pip install schemathesis",
    );
    assert!(works(&bin), "schemathesis does not run after installing it");
    bin
}

/// The lines of a schemathesis report that name an error, repeated after
/// it: a crash's report is a long traceback, and where only the end of a
/// failed test's output is kept (CI), the exception it started from would
/// otherwise be lost.
fn error_lines(report: &str) -> String {
    let mut seen = std::collections::HashSet::new();
    let lines: Vec<String> = report
        .lines()
        .map(|l| l.trim_start_matches([' ', '|']).trim_end())
        .filter(|l| {
            !l.starts_with("File ")
                && (l.contains("Error") || l.contains("Exception") || l.contains("error"))
        })
        .filter(|l| seen.insert(*l))
        .take(20)
        .map(|l| match l.char_indices().nth(300) {
            Some((cut, _)) => format!("{} …", &l[..cut]),
            None => l.to_string(),
        })
        .collect();
    format!("errors named in the report:\n{}", lines.join("\n"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_no_server_error() {
    let bin = tokio::task::spawn_blocking(schemathesis).await.unwrap();
    let mut fleet = Fleet::new();
    fleet.agent("fuzz-1", "").await;
    let api = fleet.api("max_timeout_secs = 2", &[]);
    let token = login(&client(), &api).await;
    let work = tempfile::tempdir().unwrap();
    let out = tokio::process::Command::new(bin)
        .current_dir(work.path())
        .args(["run", &format!("{}/openapi.json", api.url)])
        .args(["--checks", "not_a_server_error"])
        .args(["--header", &format!("X-Auth-Token: {token}")])
        // Endless by design, and would log the fuzzer out.
        .args(["--exclude-path", "/events", "--exclude-path", "/logout"])
        // A fixed number of cases, no `--max-time`: with one, fuzzing
        // repeats until the budget is spent. One worker: with two threads
        // generating at once, the fuzzer itself crashed under load (CI
        // twice; here 1 run in 8 beside busy loops, with `SystemError: AST
        // constructor recursion depth mismatch` inside hypothesis) while no
        // request to us had failed; with one, 10 runs in 10 passed under the
        // same load. One worker also makes the seed repeat the same cases in
        // the same order.
        .args(["--max-examples", "100", "--seed", "7", "--workers", "1"])
        .args(["--request-timeout", "15"])
        .args(["--generation-database", "none", "--no-color"])
        .output()
        .await
        .expect("run schemathesis");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "schemathesis found problems:\n{text}\n{}",
        error_lines(&text)
    );
    assert!(text.contains("passed"), "{text}");
}

/// `GET /events` with `token`: the open stream.
pub(crate) async fn open_events(
    c: &reqwest::Client,
    api: &ApiServer,
    token: &str,
) -> reqwest::Response {
    c.get(format!("{}/events", api.url))
        .header("X-Auth-Token", token)
        .send()
        .await
        .unwrap()
}

/// Read `events` until every one of `wanted` has been seen, in whole SSE
/// messages (a chunk may end mid-line), within `within`; what was read.
pub(crate) async fn read_events(
    events: &mut reqwest::Response,
    wanted: &[String],
    within: Duration,
) -> String {
    let mut seen = String::new();
    let until = Instant::now() + within;
    while !(wanted.iter().all(|w| seen.contains(w)) && seen.ends_with("\n\n")) {
        assert!(Instant::now() < until, "missing events on /events: {seen}");
        let chunk = tokio::time::timeout(Duration::from_secs(15), events.chunk())
            .await
            .expect("event stream stalled")
            .unwrap()
            .expect("event stream ended");
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    seen
}

/// Log in as `user`; the status, the body and the `Retry-After` header.
pub(crate) async fn login_as(
    c: &reqwest::Client,
    api: &ApiServer,
    user: &str,
    password: &str,
) -> (StatusCode, Value, Option<String>) {
    let r = c
        .post(format!("{}/login", api.url))
        .json(&json!({"username": user, "password": password, "eauth": "pam"}))
        .send()
        .await
        .unwrap();
    let retry = r
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    (r.status(), r.json().await.unwrap_or(Value::Null), retry)
}

/// `[api.perms]` as Salt's `external_auth`: login returns the user's own
/// perms; a chunk outside them is 403 naming the function and target and
/// runs nowhere; a user without `@jobs` reads only their own jobs and
/// hears only their own events; a user with no perms cannot log in; and
/// repeated bad logins are refused with 429 and `Retry-After`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_users_are_held_to_their_perms() {
    let mut fleet = Fleet::new();
    fleet.agent("web-1", "role = \"web\"").await;
    fleet.agent("db-1", "role = \"db\"").await;
    let api = fleet.api("", &[]);
    let c = client();
    let admin = login(&c, &api).await;

    let (status, body, _) = login_as(&c, &api, INTERN, PASSWORD).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["return"][0]["perms"],
        json!([{"web*": ["test.*", "grains.items"]}])
    );
    let intern = body["return"][0]["token"].as_str().unwrap().to_string();
    let (status, body, _) = login_as(&c, &api, NOBODY, PASSWORD).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");

    let chunk = |tgt: &str, fun: &str, client: &str| json!([{"client": client, "tgt": tgt, "fun": fun, "timeout": 10}]);
    // Allowed: test.* on web-1.
    let (status, body) = lowstate(&c, &api, &intern, &chunk("web-1", "test.ping", "local")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["return"][0], json!({"web-1": true}));
    // cmd.run anywhere, and test.ping beyond web*, are refused and named.
    for (tgt, fun) in [
        ("web-1", "cmd.run"),
        ("*", "test.ping"),
        ("db-1", "test.ping"),
    ] {
        let (status, body) = lowstate(&c, &api, &intern, &chunk(tgt, fun, "local")).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{tgt} {fun}: {body}");
        let error = body["error"].as_str().unwrap();
        assert!(error.contains(fun) && error.contains(tgt), "{error}");
    }
    // The registry through /minions: all of it is beyond web*.
    let (status, _) = get(&c, &api, &intern, "/minions").await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = get(&c, &api, &intern, "/minions/web-1").await;
    assert_eq!(status, StatusCode::OK);

    // Jobs and events: the intern's own only.
    let mut events = open_events(&c, &api, &intern).await;
    let (status, theirs) =
        lowstate(&c, &api, &admin, &chunk("db-1", "test.ping", "local_async")).await;
    assert_eq!(status, StatusCode::OK, "{theirs}");
    let theirs = theirs["return"][0]["jid"].as_str().unwrap().to_string();
    let (status, own) = lowstate(
        &c,
        &api,
        &intern,
        &chunk("web-1", "test.ping", "local_async"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{own}");
    let own = own["return"][0]["jid"].as_str().unwrap().to_string();
    let (status, body) = get(&c, &api, &intern, &format!("/jobs/{theirs}")).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(body["error"].as_str().unwrap().contains(&theirs));
    let (status, _) = get(&c, &api, &admin, &format!("/jobs/{theirs}")).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = get(&c, &api, &intern, &format!("/jobs/{own}")).await;
    assert_eq!(status, StatusCode::OK);
    let own_return = [format!("salt/job/{own}/ret/web-1")];
    let seen = read_events(&mut events, &own_return, Duration::from_secs(30)).await;
    // The job carries who asked (and so the maid's audit log names them).
    assert!(seen.contains("\"user\":\"intern\""), "{seen}");
    assert!(!seen.contains(&theirs), "another user's job leaked: {seen}");
    drop(events);

    // Bad passwords: five, then even the right one waits.
    for _ in 0..5 {
        let (status, _, _) = login_as(&c, &api, INTERN, "wrong").await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }
    let (status, _, retry) = login_as(&c, &api, INTERN, PASSWORD).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    let retry: u64 = retry.expect("Retry-After").parse().unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    // Another user from the same address is not locked out by that.
    login(&c, &api).await;
}

/// `local_subset` runs the function on as many of the targeted minions
/// as `subset` says, among those whose `sys.list_functions` lists it; none
/// when none does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_subset_runs_on_as_many_as_asked_that_have_the_function() {
    let mut fleet = Fleet::new();
    fleet.agent("web-1", "").await;
    fleet.agent("web-2", "").await;
    let api = fleet.api("", &[]);
    let c = client();
    let token = login(&c, &api).await;
    let subset = |n: u64, fun: &str| json!([{"client": "local_subset", "tgt": "web-*", "fun": fun, "arg": ["x"], "subset": n}]);
    let (status, body) = lowstate(&c, &api, &token, &subset(1, "test.echo")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let ret = body["return"][0].as_object().unwrap();
    assert_eq!(ret.len(), 1, "{body}");
    let (id, echoed) = ret.iter().next().unwrap();
    assert!(id == "web-1" || id == "web-2", "{body}");
    assert_eq!(echoed, "x");
    // The probe went to both.
    let mut probed: Vec<&String> = body["maid"][0]["probe"]["retcodes"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    probed.sort();
    assert_eq!(probed, ["web-1", "web-2"], "{body}");
    let (_, body) = lowstate(&c, &api, &token, &subset(5, "test.echo")).await;
    assert_eq!(body["return"][0], json!({"web-1": "x", "web-2": "x"}));
    let (_, body) = lowstate(&c, &api, &token, &subset(2, "no.such")).await;
    assert_eq!(body["return"][0], json!({}));
}

/// `GET /stats` counts every request (its own in flight) and the bytes
/// read; with `[api] stats_disable_auth` it needs no token, as salt-api's
/// option. (tests/pepper.rs compares its shape with salt-api's.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_count_every_request() {
    let fleet = Fleet::new();
    let api = fleet.api("stats_disable_auth = true", &[]);
    let c = client();
    let stats = || async {
        let r = c.get(format!("{}/stats", api.url)).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        let body: Value = r.json().await.unwrap();
        body["CherryPy Applications"].clone()
    };
    let before = stats().await;
    let body = "{\"username\": \"nobody-at-all\", \"password\": \"x\"}";
    let r = c
        .post(format!("{}/login", api.url))
        .header("Content-Type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    c.get(format!("{}/", api.url)).send().await.unwrap();
    let after = stats().await;
    let count = |s: &Value, k: &str| s[k].as_u64().unwrap();
    assert_eq!(
        count(&after, "Total Requests"),
        count(&before, "Total Requests") + 3
    );
    assert_eq!(
        count(&after, "Total Bytes Read"),
        count(&before, "Total Bytes Read") + body.len() as u64
    );
    assert!(count(&after, "Total Bytes Written") > count(&before, "Total Bytes Written"));
    assert_eq!(count(&after, "Current Requests"), 1);
    let lines: Vec<&str> = after["Requests"]
        .as_object()
        .unwrap()
        .values()
        .map(|r| r["Request-Line"].as_str().unwrap())
        .collect();
    assert!(lines.contains(&"POST /login HTTP/1.1"), "{lines:?}");
    let login = after["Requests"]
        .as_object()
        .unwrap()
        .values()
        .find(|r| r["Request-Line"] == "POST /login HTTP/1.1")
        .unwrap();
    assert_eq!(login["Response Status"], "401 Unauthorized");
    // Without the option, a token is needed.
    let closed = fleet.api("", &[]);
    let r = c.get(format!("{}/stats", closed.url)).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
}

/// Read `ws` until a message carries the event tagged `tag`; every message
/// must be salt-api's `data: {...}` and a blank line. The event's JSON
/// text, and every message read.
async fn ws_event<S>(ws: &mut S, tag: &str) -> (String, Vec<String>)
where
    S: futures_util::Stream<
            Item = Result<
                tokio_tungstenite::tungstenite::Message,
                tokio_tungstenite::tungstenite::Error,
            >,
        > + Unpin,
{
    use futures_util::StreamExt;
    let mut seen = Vec::new();
    loop {
        let message = tokio::time::timeout(Duration::from_secs(30), ws.next())
            .await
            .unwrap_or_else(|_| panic!("no {tag} on /ws"))
            .expect("the socket stays open")
            .unwrap();
        let text = message.into_text().unwrap().to_string();
        let body = text
            .strip_prefix("data: ")
            .and_then(|t| t.strip_suffix("\n\n"))
            .unwrap_or_else(|| panic!("not salt-api's framing: {text:?}"));
        seen.push(body.to_string());
        let event: Value = serde_json::from_str(body).unwrap();
        if event["tag"] == tag {
            return (body.to_string(), seen);
        }
    }
}

/// `GET /ws[/<token>]`, salt-api's WebSocket of the event stream (salt-api
/// 3008.4's own fails with CherryPy 18: docs/differences-from-salt.md): a token is needed; once
/// the client says it is ready, each event comes as `data: {json}` and a
/// blank line, the same JSON as on `/events`; a user without `@jobs` gets
/// only their own jobs' events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_websocket_carries_the_events_a_user_may_see() {
    use futures_util::SinkExt;
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;

    let mut fleet = Fleet::new();
    fleet.agent("web-1", "role = \"web\"").await;
    let api = fleet.api("", &[]);
    let c = client();
    let admin = login(&c, &api).await;
    let ws_url = |token: &str| format!("{}/ws/{token}", api.url.replacen("http", "ws", 1));

    assert_eq!(
        c.get(format!("{}/ws", api.url))
            .send()
            .await
            .unwrap()
            .status(),
        StatusCode::UNAUTHORIZED
    );
    assert!(
        tokio_tungstenite::connect_async(ws_url("not-a-token"))
            .await
            .is_err()
    );
    let (status, _) = get(&c, &api, &admin, "/ws?format_events").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    let (mut ws, _) = tokio_tungstenite::connect_async(ws_url(&admin))
        .await
        .unwrap();
    // The header works too.
    let mut request = format!("{}/ws", api.url.replacen("http", "ws", 1))
        .into_client_request()
        .unwrap();
    request
        .headers_mut()
        .insert("X-Auth-Token", admin.parse().unwrap());
    let (mut by_header, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    let (_, body, _) = login_as(&c, &api, INTERN, PASSWORD).await;
    let intern = body["return"][0]["token"].as_str().unwrap().to_string();
    let (mut interns, _) = tokio_tungstenite::connect_async(ws_url(&intern))
        .await
        .unwrap();
    for socket in [&mut ws, &mut by_header, &mut interns] {
        socket
            .send(Message::text("websocket client ready"))
            .await
            .unwrap();
    }
    let mut sse = open_events(&c, &api, &admin).await;
    // Past the ready message before any job starts.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let chunk = |client: &str| json!([{"client": client, "tgt": "web-1", "fun": "test.ping"}]);
    let (status, started) = lowstate(&c, &api, &admin, &chunk("local_async")).await;
    assert_eq!(status, StatusCode::OK, "{started}");
    let admins_jid = started["return"][0]["jid"].as_str().unwrap().to_string();
    let tag = format!("salt/job/{admins_jid}/ret/web-1");
    let (on_ws, _) = ws_event(&mut ws, &tag).await;
    assert_eq!(ws_event(&mut by_header, &tag).await.0, on_ws);
    let on_sse = read_events(
        &mut sse,
        std::slice::from_ref(&tag),
        Duration::from_secs(30),
    )
    .await;
    assert!(
        on_sse.contains(&format!("data: {on_ws}\n")),
        "{on_ws}\n{on_sse}"
    );
    let event: Value = serde_json::from_str(&on_ws).unwrap();
    assert_eq!(event["data"]["return"], json!(true));

    // The intern's socket: their own job's return, never the admin's.
    let (status, own) = lowstate(&c, &api, &intern, &chunk("local_async")).await;
    assert_eq!(status, StatusCode::OK, "{own}");
    let own = own["return"][0]["jid"].as_str().unwrap().to_string();
    let (_, seen) = ws_event(&mut interns, &format!("salt/job/{own}/ret/web-1")).await;
    assert!(seen.iter().all(|e| e.contains(&own)), "{seen:?}");
    assert!(
        !seen.iter().any(|e| e.contains(&admins_jid)),
        "the intern saw another user's job: {seen:?}"
    );
}
