//! Security round 4 on the API: pillar is never read through targeting,
//! and a logged-out token's event stream ends.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::api::{ApiServer, Fleet, client, lowstate, open_events, read_events, token_for};
use crate::common::fleet::wait_registered;

/// The secret the attacks try to learn, db-1's alone.
const SECRET: &str = "hunter2";

/// Two maids, web-1 and db-1, with their keys accepted, a pillar root
/// that gives db-1 alone `db:password`, and `maid api` with these users:
/// `admin` (every function), `tester` (`test.*` on every minion),
/// `intern` (`test.*` on `web-*`), `watcher` (`@runner`) and `auditor`
/// (`@jobs`: every job's events).
async fn fleet_with_a_secret() -> (Fleet, ApiServer) {
    let mut fleet = Fleet::new();
    let root = fleet.dir.path().join("pillar");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("top.sls"), "base:\n  'db-1':\n    - db\n").unwrap();
    std::fs::write(root.join("db.sls"), format!("db:\n  password: {SECRET}\n")).unwrap();
    for id in ["web-1", "db-1"] {
        let agent = fleet.signed_agent(id, "[plugins.pillar]\npillar = true\n");
        fleet.agents.push(agent);
    }
    wait_registered(&fleet.bus, &["web-1", "db-1"]).await;
    let pki = fleet.accept_keys();
    let api = fleet.api_for(
        &format!(
            "pki_dir = {pki:?}\npillar_roots = [{root:?}]\n\
             nodegroups = {{ right = \"I@db:password:hun*\", wrong = \"I@db:password:zzz*\" }}"
        ),
        &[
            ("admin", "[\".*\"]"),
            ("tester", "[\"test.*\"]"),
            ("intern", "[{ \"web-*\" = [\"test.*\"] }]"),
            ("watcher", "[\"@runner\"]"),
            ("auditor", "[\"@jobs\"]"),
        ],
    );
    (fleet, api)
}

/// Each way to target on pillar, as (`tgt_type`, a target that holds for
/// db-1's secret, one that holds for no one).
fn guesses() -> Vec<(&'static str, String, String)> {
    vec![
        (
            "pillar",
            "db:password:hun*".into(),
            "db:password:zzz*".into(),
        ),
        (
            "pillar_pcre",
            "db:password:^hun".into(),
            "db:password:^zzz".into(),
        ),
        (
            "compound",
            "I@db:password:hun*".into(),
            "I@db:password:zzz*".into(),
        ),
        (
            "compound",
            "web-1 or J@db:password:^hun".into(),
            "web-1 or J@db:password:^zzz".into(),
        ),
    ]
}

/// An API user who may not read every minion's pillar learns nothing of
/// it by targeting: a `pillar`, `pillar_pcre`, `I@` or `J@` target is
/// refused before it is evaluated, with one answer (status and body)
/// whether the guess is right or wrong — for a user allowed `test.*`
/// everywhere (who saw `{"db-1": true}` against `{}`), for one limited to
/// `web-*` (who saw 403 against 200), and for a runner user through
/// `manage.up`'s target. A user who may read every pillar still targets
/// on it, and the event announcing such a job names the minions it
/// selected, never the expression.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pillar_is_never_read_through_targeting() {
    let (_fleet, api) = fleet_with_a_secret().await;
    let c = client();
    for user in ["tester", "intern"] {
        let token = token_for(&c, &api.url, user).await;
        for (tgt_type, right, wrong) in guesses() {
            let ask = |tgt: &str| json!({"client": "local", "tgt": tgt, "tgt_type": tgt_type, "fun": "test.ping"});
            let (status, body) = lowstate(&c, &api, &token, &ask(&right)).await;
            let (status_wrong, body_wrong) = lowstate(&c, &api, &token, &ask(&wrong)).await;
            assert_eq!(
                status,
                StatusCode::FORBIDDEN,
                "{user} {tgt_type} {right}: {body}"
            );
            assert_eq!(
                (status, &body),
                (status_wrong, &body_wrong),
                "{user}: a right guess and a wrong one answer alike"
            );
            assert!(!body.to_string().contains("db-1"), "{body}");
        }
    }
    // Every client that targets, and a nodegroup that holds `I@`.
    let tester = token_for(&c, &api.url, "tester").await;
    for client in ["local_async", "local_batch", "local_subset"] {
        let ask = |tgt: &str| json!({"client": client, "tgt": tgt, "tgt_type": "pillar", "fun": "test.ping"});
        let (status, body) = lowstate(&c, &api, &tester, &ask("db:password:hun*")).await;
        let (status_wrong, body_wrong) =
            lowstate(&c, &api, &tester, &ask("db:password:zzz*")).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{client}: {body}");
        assert_eq!((status, &body), (status_wrong, &body_wrong), "{client}");
    }
    let ask = |group: &str| json!({"client": "local", "tgt": group, "tgt_type": "nodegroup", "fun": "test.ping"});
    let (status, body) = lowstate(&c, &api, &tester, &ask("right")).await;
    let (status_wrong, body_wrong) = lowstate(&c, &api, &tester, &ask("wrong")).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "nodegroup: {body}");
    assert_eq!((status, &body), (status_wrong, &body_wrong), "nodegroup");

    let watcher = token_for(&c, &api.url, "watcher").await;
    for (tgt_type, right, wrong) in guesses() {
        let ask = |tgt: &str| json!({"client": "runner", "fun": "manage.up", "tgt": tgt, "tgt_type": tgt_type});
        let (status, body) = lowstate(&c, &api, &watcher, &ask(&right)).await;
        let (status_wrong, body_wrong) = lowstate(&c, &api, &watcher, &ask(&wrong)).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "manage.up {right}: {body}");
        assert_eq!(
            (status, &body),
            (status_wrong, &body_wrong),
            "manage.up {tgt_type}"
        );
    }
    // The refusal is the permission's, not the registry's: the same for
    // a target that could only ever select web-1.
    let (status, _) = lowstate(
        &c,
        &api,
        &tester,
        &json!({"client": "local", "tgt": "web-1 and I@db:password:*", "tgt_type": "compound", "fun": "test.ping"}),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);

    // Whoever may read every pillar targets on it as Salt does.
    let admin = token_for(&c, &api.url, "admin").await;
    let auditor = token_for(&c, &api.url, "auditor").await;
    let mut events = open_events(&c, &api, &auditor).await;
    let (status, body) = lowstate(
        &c,
        &api,
        &admin,
        &json!({"client": "local", "tgt": "db:password:hun*", "tgt_type": "pillar", "fun": "test.ping"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["return"][0], json!({"db-1": true}), "{body}");
    let jid = body["maid"][0]["jid"].as_str().unwrap().to_string();
    let new = format!("salt/job/{jid}/new");
    let seen = read_events(
        &mut events,
        std::slice::from_ref(&new),
        Duration::from_secs(15),
    )
    .await;
    let line = seen
        .lines()
        .find(|l| l.starts_with("data:") && l.contains(&new))
        .unwrap();
    let event: Value = serde_json::from_str(line.trim_start_matches("data:").trim()).unwrap();
    assert_eq!(event["data"]["tgt"], json!(["db-1"]), "{event}");
    assert_eq!(event["data"]["tgt_type"], "list", "{event}");
    assert!(
        !line.contains("hun"),
        "the expression reached an @jobs reader: {line}"
    );
}

/// `POST /logout` ends the session's open event streams: after it, an
/// `/events` stream that was open delivers no further event and ends,
/// and a `/ws` socket closes (it kept delivering every job's events to
/// the logged-out token).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_logged_out_token_hears_no_more_events() {
    let (_fleet, api) = fleet_with_a_secret().await;
    let c = client();
    let admin = token_for(&c, &api.url, "admin").await;
    let auditor = token_for(&c, &api.url, "auditor").await;
    let mut events = open_events(&c, &api, &auditor).await;
    let ping = json!({"client": "local", "tgt": "*", "fun": "test.ping"});
    let (status, body) = lowstate(&c, &api, &admin, &ping).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let jid = body["maid"][0]["jid"].as_str().unwrap().to_string();
    read_events(
        &mut events,
        &[format!("salt/job/{jid}/new")],
        Duration::from_secs(15),
    )
    .await;
    let (mut socket, _) = tokio_tungstenite::connect_async(format!(
        "{}/ws/{auditor}",
        api.url.replacen("http", "ws", 1)
    ))
    .await
    .unwrap();
    use futures_util::{SinkExt, StreamExt};
    socket
        .send(tokio_tungstenite::tungstenite::Message::Text(
            "websocket client ready".into(),
        ))
        .await
        .unwrap();
    // The socket hears jobs while the session lives.
    let (status, body) = lowstate(&c, &api, &admin, &ping).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let heard = tokio::time::timeout(Duration::from_secs(15), socket.next())
        .await
        .expect("the socket heard nothing while the session lived");
    assert!(matches!(heard, Some(Ok(_))), "{heard:?}");

    let r = c
        .post(format!("{}/logout", api.url))
        .header("X-Auth-Token", &auditor)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let (status, body) = lowstate(&c, &api, &admin, &ping).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let later = body["maid"][0]["jid"].as_str().unwrap().to_string();
    // The stream ends, and what it delivered before its end holds nothing
    // of the job started after the logout.
    let mut after = String::new();
    loop {
        match tokio::time::timeout(Duration::from_secs(20), events.chunk()).await {
            Ok(Ok(Some(chunk))) => after.push_str(&String::from_utf8_lossy(&chunk)),
            Ok(Ok(None)) | Ok(Err(_)) => break,
            Err(_) => panic!("the event stream outlived its logout: {after}"),
        }
    }
    assert!(!after.contains(&later), "an event after logout: {after}");
    loop {
        match tokio::time::timeout(Duration::from_secs(20), socket.next()).await {
            Ok(Some(Ok(tokio_tungstenite::tungstenite::Message::Text(t)))) => {
                assert!(!t.contains(&later), "a socket event after logout: {t}");
            }
            Ok(Some(Ok(tokio_tungstenite::tungstenite::Message::Close(_)))) | Ok(None) => break,
            Ok(Some(Err(_))) => break,
            Ok(Some(Ok(_))) => continue,
            Err(_) => panic!("the socket outlived its logout"),
        }
    }
}
