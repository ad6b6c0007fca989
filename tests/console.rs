//! What a web console (SaltGUI and its kin) needs of `maid api`, over
//! plain HTTP as a browser sends it: `/events` read with the `session_id`
//! cookie `/login` sets and `Accept: text/event-stream`, in salt-api's
//! unnamed `tag:`/`data:` messages, every event stamped and a job's `new`
//! naming its minions; the console's page and assets served as salt-api's
//! `app` and `static` options serve them. And what must not follow: the
//! cookie starts nothing, and no asset path leads out of its directory.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::api::{Fleet, client, lowstate, read_events};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_reads_events_with_the_login_cookie_which_starts_nothing() {
    let mut fleet = Fleet::new();
    fleet.agent("web-1", "role = \"web\"").await;
    let api = fleet.api("", &[]);
    let c = client();

    // `/login` sets salt-api's session cookie, out of a script's reach
    // and never sent by another site's page.
    let r = c
        .post(format!("{}/login", api.url))
        .json(&json!({"username": crate::api::USER, "password": crate::api::PASSWORD, "eauth": "pam"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let set = r.headers()["set-cookie"].to_str().unwrap().to_string();
    let token = r.headers()["x-auth-token"].to_str().unwrap().to_string();
    assert!(set.starts_with(&format!("session_id={token};")), "{set}");
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set.contains(attribute), "{set}");
    }
    // Plain HTTP here: `Secure` only over HTTPS (tests/api.rs).
    assert!(!set.contains("Secure"), "{set}");
    let cookie = format!("session_id={token}");

    // An `EventSource`: the cookie, and it accepts only the event stream.
    let mut events = c
        .get(format!("{}/events", api.url))
        .header("Accept", "text/event-stream")
        .header("Cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(events.status(), StatusCode::OK);
    assert_eq!(events.headers()["content-type"], "text/event-stream");

    // The cookie alone starts no job and reads nothing else.
    let forged = c
        .post(format!("{}/", api.url))
        .header("Cookie", &cookie)
        .json(&json!([{"client": "local", "tgt": "*", "fun": "test.ping"}]))
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), StatusCode::UNAUTHORIZED);
    for path in ["/minions", "/jobs", "/keys"] {
        let r = c
            .get(format!("{}{path}", api.url))
            .header("Cookie", &cookie)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "{path}");
    }

    let (status, body) = lowstate(
        &c,
        &api,
        &token,
        &json!([{"client": "local", "tgt": "*", "fun": "test.ping"}]),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let jid = body["maid"][0]["jid"].as_str().unwrap().to_string();
    let new = format!("salt/job/{jid}/new");
    let ret = format!("salt/job/{jid}/ret/web-1");
    let seen = read_events(
        &mut events,
        &[new.clone(), ret.clone()],
        Duration::from_secs(15),
    )
    .await;
    assert!(seen.starts_with("retry: 400\n"), "{seen}");
    assert!(!seen.contains("event:"), "unnamed, for onmessage: {seen}");
    let data = |tag: &str| -> Value {
        let line = seen
            .lines()
            .skip_while(|l| *l != format!("tag: {tag}"))
            .nth(1)
            .unwrap_or_else(|| panic!("no {tag} in {seen}"));
        serde_json::from_str(line.strip_prefix("data: ").unwrap()).unwrap()
    };
    let announced = data(&new);
    assert_eq!(announced["tag"], new);
    assert_eq!(announced["data"]["minions"], json!(["web-1"]));
    assert!(announced["data"]["_stamp"].is_string(), "{announced}");
    let returned = data(&ret);
    assert_eq!(returned["data"]["return"], true);
    assert!(returned["data"]["_stamp"].is_string(), "{returned}");
    let pinged = data(&format!("maid/job/{jid}/ping/web-1"));
    assert!(pinged["data"]["_stamp"].is_string(), "{pinged}");
    drop(events);

    // Logged out, the cookie is dead, and `/logout` clears it.
    let out = c
        .post(format!("{}/logout", api.url))
        .header("X-Auth-Token", &token)
        .send()
        .await
        .unwrap();
    assert!(
        out.headers()["set-cookie"]
            .to_str()
            .unwrap()
            .starts_with("session_id=;"),
        "{:?}",
        out.headers()
    );
    let r = c
        .get(format!("{}/events", api.url))
        .header("Cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_is_served_as_salt_api_serves_it_and_nothing_out_of_its_directory() {
    let fleet = Fleet::new();
    let site = tempfile::tempdir().unwrap();
    let assets = site.path().join("static");
    std::fs::create_dir_all(assets.join("scripts")).unwrap();
    std::fs::write(site.path().join("index.html"), "<html>console</html>").unwrap();
    std::fs::write(assets.join("scripts/app.js"), "start();").unwrap();
    std::fs::write(site.path().join("maid.toml"), "password = 1").unwrap();
    std::os::unix::fs::symlink(site.path().join("maid.toml"), assets.join("leak.js")).unwrap();
    let api = fleet.api(
        &format!(
            "app = \"{}\"\nstatic = \"{}\"\n",
            site.path().join("index.html").display(),
            assets.display()
        ),
        &[],
    );
    let c = client();
    let fetch = |path: &str| {
        let url = format!("{}{path}", api.url);
        let c = c.clone();
        async move {
            let r = c.get(url).send().await.unwrap();
            let status = r.status();
            let kind = r
                .headers()
                .get("content-type")
                .map(|v| v.to_str().unwrap().to_string());
            (status, kind, r.text().await.unwrap())
        }
    };
    // The page at /app and under it (a console's own routes), no token.
    for path in ["/app", "/app/minions", "/app/job/123"] {
        let (status, kind, text) = fetch(path).await;
        assert_eq!(status, StatusCode::OK, "{path}");
        assert_eq!(kind.as_deref(), Some("text/html;charset=utf-8"));
        assert_eq!(text, "<html>console</html>");
    }
    let (status, kind, text) = fetch("/static/scripts/app.js").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(kind.as_deref(), Some("text/javascript;charset=utf-8"));
    assert_eq!(text, "start();");
    // Nothing out of the directory: `..` (raw and encoded), a link.
    for path in [
        "/static/../maid.toml",
        "/static/%2e%2e/maid.toml",
        "/static/scripts/%2e%2e/%2e%2e/maid.toml",
        "/static/leak.js",
        "/static/%2fetc%2fpasswd",
        "/static/scripts",
    ] {
        let (status, _, text) = fetch(path).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {text}");
        assert!(!text.contains("password"), "{path}: {text}");
    }
    // The API is as it was.
    let (status, _, _) = fetch("/minions").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

/// `jobs.active`, which consoles poll: the jobs running on the maids, and
/// to a user without `@jobs` only their own — another user's running
/// command and its arguments stay theirs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_active_shows_running_jobs_and_only_to_whom_they_belong() {
    let mut fleet = Fleet::new();
    fleet
        .agent("web-1", "role = \"web\"\n[plugins.saltutil]\njobs = true")
        .await;
    let api = fleet.api("", &[]);
    let c = client();
    let token = crate::api::login(&c, &api).await;
    let (status, body, _) =
        crate::api::login_as(&c, &api, crate::api::WATCHER, crate::api::PASSWORD).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let watcher = body["return"][0]["token"].as_str().unwrap().to_string();

    let (status, body) = lowstate(
        &c,
        &api,
        &token,
        &json!([{"client": "local_async", "tgt": "web-1", "fun": "test.sleep", "arg": [8]}]),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let jid = body["return"][0]["jid"].as_str().unwrap().to_string();
    let active = |token: String| {
        let c = c.clone();
        let url = api.url.clone();
        async move {
            let r = c
                .post(format!("{url}/"))
                .header("X-Auth-Token", token)
                .json(&json!([{"client": "runner", "fun": "jobs.active"}]))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), StatusCode::OK);
            let body: Value = r.json().await.unwrap();
            body["return"][0].clone()
        }
    };
    // Its owner sees it running on web-1, once it has started there.
    let until = std::time::Instant::now() + Duration::from_secs(6);
    let seen = loop {
        let seen = active(token.clone()).await;
        if seen.get(&jid).is_some() || std::time::Instant::now() > until {
            break seen;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(seen[&jid]["Function"], "test.sleep", "{seen}");
    assert_eq!(seen[&jid]["Arguments"], json!([8]), "{seen}");
    let running = seen[&jid]["Running"].as_array().unwrap();
    assert_eq!(running.len(), 1, "{seen}");
    assert!(running[0]["web-1"].is_number(), "{seen}");
    // A runner user without `@jobs` does not.
    let hidden = active(watcher).await;
    assert!(hidden.get(&jid).is_none(), "{hidden}");
    assert!(hidden.is_object(), "{hidden}");
}
