//! A real browser against `maid api`: headless Chromium, driven over
//! WebDriver (`chromedriver`), loads a page of our own that `maid api`
//! serves as salt-api's `app` option serves a console, with its script as
//! a `static` asset. The script logs in as a console does, opens `/events`
//! with `EventSource` (which sends only the `session_id` cookie and
//! `Accept: text/event-stream`), runs `test.ping` and keeps every message
//! `onmessage` hands it. The test reads them back from the page.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::api::{Fleet, PASSWORD, USER};
use maid_testkit::redis::free_port;

/// `chromedriver` on a free loopback port, stopped on drop.
struct Driver {
    child: Child,
    url: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tool(name: &str) -> std::path::PathBuf {
    which::which(name).unwrap_or_else(|_| {
        panic!(
            "{name} is missing: install Chromium and its WebDriver \
             (`apt-get install chromium chromium-driver`; ./dev test does)"
        )
    })
}

impl Driver {
    async fn start() -> Driver {
        let port = free_port();
        let child = Command::new(tool("chromedriver"))
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let driver = Driver {
            child,
            url: format!("http://127.0.0.1:{port}"),
        };
        let until = Instant::now() + Duration::from_secs(30);
        while reqwest::get(format!("{}/status", driver.url))
            .await
            .is_err()
        {
            assert!(Instant::now() < until, "chromedriver never listened");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        driver
    }

    /// A headless Chromium session; its id.
    async fn session(&self, c: &reqwest::Client) -> String {
        let chromium = tool("chromium");
        let answer: Value = c
            .post(format!("{}/session", self.url))
            .json(&json!({"capabilities": {"alwaysMatch": {
                "browserName": "chrome",
                "goog:chromeOptions": {
                    "binary": chromium,
                    "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                             "--disable-dev-shm-usage", "--no-first-run"],
                },
            }}}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        answer["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {answer}"))
            .to_string()
    }
}

/// The console page: its script is an asset.
const PAGE: &str = "<!doctype html><html><head><title>console</title>\
    <script src=\"/static/console.js\"></script></head><body></body></html>";

/// What a console does: log in, listen, run a job; every message kept.
fn script() -> String {
    format!(
        r#"window.seen = []; window.errors = [];
(async () => {{
  try {{
    const login = await fetch('/login', {{method: 'POST',
      headers: {{'Content-Type': 'application/json', 'Accept': 'application/json'}},
      body: JSON.stringify({{username: '{USER}', password: '{PASSWORD}', eauth: 'pam'}})}});
    const token = (await login.json()).return[0].token;
    const events = new EventSource('/events');
    events.onerror = () => window.errors.push('EventSource error');
    events.onmessage = (e) => window.seen.push(JSON.parse(e.data));
    events.onopen = async () => {{
      const job = await fetch('/', {{method: 'POST',
        headers: {{'X-Auth-Token': token, 'Content-Type': 'application/json',
                   'Accept': 'application/json'}},
        body: JSON.stringify([{{client: 'local', tgt: '*', fun: 'test.ping'}}])}});
      window.job = await job.json();
    }};
  }} catch (e) {{ window.errors.push(String(e)); }}
}})();"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_console_served_by_the_api_logs_in_and_follows_a_job_on_events() {
    let mut fleet = Fleet::new();
    fleet.agent("web-1", "role = \"web\"").await;
    let site = tempfile::tempdir().unwrap();
    let assets = site.path().join("static");
    std::fs::create_dir_all(&assets).unwrap();
    std::fs::write(site.path().join("index.html"), PAGE).unwrap();
    std::fs::write(assets.join("console.js"), script()).unwrap();
    let api = fleet.api(
        &format!(
            "app = \"{}\"\nstatic = \"{}\"\n",
            site.path().join("index.html").display(),
            assets.display()
        ),
        &[],
    );
    let driver = Driver::start().await;
    let c = reqwest::Client::new();
    let session = driver.session(&c).await;
    let at = |path: &str| format!("{}/session/{session}{path}", driver.url);
    c.post(at("/url"))
        .json(&json!({"url": format!("{}/app", api.url)}))
        .send()
        .await
        .unwrap();
    let read = || async {
        let answer: Value = c
            .post(at("/execute/sync"))
            .json(&json!({
                "script": "return JSON.stringify({seen: window.seen, job: window.job, errors: window.errors, title: document.title});",
                "args": [],
            }))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        serde_json::from_str::<Value>(answer["value"].as_str().unwrap_or("null"))
            .unwrap_or(Value::Null)
    };
    let until = Instant::now() + Duration::from_secs(30);
    let (page, jid) = loop {
        let page = read().await;
        let jid = page["job"]["maid"][0]["jid"].as_str().map(str::to_string);
        if let Some(jid) = jid {
            let ret = format!("salt/job/{jid}/ret/web-1");
            let tags: Vec<&str> = page["seen"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|e| e["tag"].as_str())
                .collect();
            if tags.contains(&ret.as_str()) {
                break (page, jid);
            }
        }
        assert!(Instant::now() < until, "the page saw no return: {page}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let _ = c.delete(at("")).send().await;
    assert_eq!(page["title"], "console", "{page}");
    assert_eq!(page["job"]["return"], json!([{"web-1": true}]), "{page}");
    let seen = page["seen"].as_array().unwrap();
    let event = |tag: String| {
        seen.iter()
            .find(|e| e["tag"] == tag)
            .unwrap_or_else(|| panic!("no {tag} among {page}"))
    };
    let new = event(format!("salt/job/{jid}/new"));
    assert_eq!(new["data"]["minions"], json!(["web-1"]));
    let ret = event(format!("salt/job/{jid}/ret/web-1"));
    assert_eq!(ret["data"]["return"], true);
    assert!(
        seen.iter().all(|e| e["data"]["_stamp"].is_string()),
        "every event is stamped: {page}"
    );
}
