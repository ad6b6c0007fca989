//! Pillar through `maid api`: `tgt_type` `pillar` and `pillar_pcre`, and
//! `I@` words, evaluated on the pillar the master compiles for a user who
//! may read every minion's pillar (and refused to anyone else); `pillar.*`
//! answered from the pillar delivered sealed, inline `pillar` included.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::api::{Fleet, INTERN, client, login, lowstate, token_for};
use crate::common::fleet::wait_registered;

fn ids(body: &Value) -> Vec<String> {
    let mut ids: Vec<String> = body["return"][0]
        .as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default();
    ids.sort();
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_targets_on_pillar_and_holds_users_to_whom_it_reaches() {
    let mut fleet = Fleet::new();
    let root = fleet.dir.path().join("pillar");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("top.sls"), "base:\n  '*':\n    - tier\n").unwrap();
    std::fs::write(root.join("tier.sls"), "tier: {{ grains['role'] }}\n").unwrap();
    for (id, role) in [("web-1", "web"), ("db-1", "db")] {
        let extra = format!("[grains]\nrole = \"{role}\"\n[plugins.pillar]\npillar = true\n");
        let agent = fleet.signed_agent(id, &extra);
        fleet.agents.push(agent);
    }
    wait_registered(&fleet.bus, &["web-1", "db-1"]).await;
    let pki = fleet.accept_keys();
    let api = fleet.api_with(
        &format!("pki_dir = {pki:?}\npillar_roots = [{root:?}]"),
        "",
        &[],
    );
    let c = client();
    let token = login(&c, &api).await;
    let ping = |tgt: &str, tgt_type: &str| json!({"client": "local", "tgt": tgt, "tgt_type": tgt_type, "fun": "test.ping"});
    for (tgt, tgt_type, expected) in [
        ("tier:db", "pillar", vec!["db-1"]),
        ("tier:w.b", "pillar_pcre", vec!["web-1"]),
        ("I@tier:* and not db-1", "compound", vec!["web-1"]),
        ("tier:nobody", "pillar", vec![]),
    ] {
        let (status, body) = lowstate(&c, &api, &token, &ping(tgt, tgt_type)).await;
        assert_eq!(status, StatusCode::OK, "{tgt}: {body}");
        assert_eq!(ids(&body), expected, "{tgt_type} {tgt}: {body}");
    }
    // The pillar each maid reads, and inline pillar over it; the return
    // crosses Redis sealed to the API's key, and the event stream carries
    // it opened.
    let mut events = crate::api::open_events(&c, &api, &token).await;
    let items = json!({"client": "local", "tgt": "*", "fun": "pillar.items",
        "kwarg": {"pillar": {"extra": "inline"}, "unmask": true}});
    let (status, body) = lowstate(&c, &api, &token, &items).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["return"][0],
        json!({"web-1": {"extra": "inline", "tier": "web"},
               "db-1": {"extra": "inline", "tier": "db"}}),
        "{body}"
    );
    let jid = body["maid"][0]["jid"].as_str().unwrap().to_string();
    let want = format!("salt/job/{jid}/ret/web-1");
    let seen = crate::api::read_events(
        &mut events,
        std::slice::from_ref(&want),
        std::time::Duration::from_secs(15),
    )
    .await;
    let line = seen
        .lines()
        .find(|l| l.starts_with("data:") && l.contains(&want))
        .unwrap();
    let ev: Value = serde_json::from_str(line.trim_start_matches("data:").trim()).unwrap();
    assert_eq!(
        ev["data"]["return"],
        json!({"extra": "inline", "tier": "web"}),
        "{ev}"
    );
    assert!(ev["data"].get("sealed_return").is_none(), "{ev}");
    drop(events);

    // The intern may run test.* on web* alone, and may not read pillar:
    // a pillar target is refused whomever it would reach
    // (tests/attacks_targeting.rs proves the answer says nothing of it).
    let intern = token_for(&c, &api.url, INTERN).await;
    for (tgt, tgt_type) in [("tier:db", "pillar"), ("I@tier:web", "compound")] {
        let (status, body) = lowstate(&c, &api, &intern, &ping(tgt, tgt_type)).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    }
}
