//! maid against real Salt 3008.4, differentially: the same input to both,
//! and zero differences is the bar. Salt answers through
//! `tests/salt/oracle.py` in the venv `./dev` makes (see `common::salt`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures_util::StreamExt;
use maid_bus::Bus;
use maid_protocol::protocol::Reply;
use maid_protocol::replies::receive;
use serde_json::{Value, json};

use crate::common::fleet::{TOPIC, start_agent, wait_registered, wait_subscribers};
use crate::common::redis::RedisServer;
use crate::common::salt::oracle;

/// The minions of the targeting test, and the custom grains each agent
/// registers on top of the ones it detects: nested dicts, lists of dicts,
/// mixed case, numbers, booleans, values holding the delimiter, and its own
/// addresses for `ipcidr`.
fn minion_grains() -> Vec<(&'static str, String)> {
    let ids = ["web1", "web2.example.com", "db-1", "DB_2", "app10"];
    ids.iter()
        .enumerate()
        .map(|(i, id)| {
            let roles = [
                r#"["web", "Cache"]"#,
                r#"["web"]"#,
                r#"["db", "backup"]"#,
                r#"["DB"]"#,
                "[]",
            ][i];
            let toml = format!(
                r#"[grains]
roles = {roles}
datacenter = "{dc}"
Tier = "{tier}"
num = {num}
ratio = {ratio}
enabled = {enabled}
master = "salt.example.com:4506"
ipv4 = ["10.0.{i}.5", "127.0.0.1", "192.168.{i}.{last}"]
ipv6 = ["::1", "fd00::{i}:5"]
tags = [{{ k = "v{i}" }}, "plain"]

[grains.app]
name = "{app}"
version = "1.{i}.3"
ports = [80, {port}]
"a:b" = "colon-key"
Upper = "MiXeD"
"#,
                dc = [
                    "Region-East-1",
                    "region-west-2",
                    "REGION-EAST-2",
                    "eu-1",
                    "us"
                ][i],
                tier = ["Front", "front", "Back", "back", "edge"][i],
                num = [4, 8, 16, 2, 0][i],
                ratio = ["0.5", "1.0", "1e-07", "2.5", "-3.0"][i],
                enabled = i % 2 == 0,
                last = 10 + i,
                app = ["shop", "shop", "ledger", "Ledger", "cron"][i],
                port = 443 + i,
            );
            (*id, toml)
        })
        .collect()
}

/// Expressions written for what a Salt operator types and what maid got
/// wrong before: grain keys globbed and case-folded, words glued to
/// parentheses, lists with spaces, Python regex features, the v1.1 types
/// and engines, and engines a maid has no data for.
fn hand_written() -> Vec<(&'static str, &'static str)> {
    vec![
        ("glob", "*"),
        ("glob", "web*"),
        ("glob", "WEB*"),
        ("glob", "web?"),
        ("glob", "*.example.com"),
        ("glob", "db[-_]*"),
        ("glob", "[!w]*"),
        ("glob", "[a-c]*"),
        ("glob", "web[12"),
        ("glob", "[]]*"),
        ("glob", "[!]]*"),
        ("glob", "*[0-9]"),
        ("glob", ""),
        ("list", "web1,db-1"),
        ("list", "web1, db-1"),
        ("list", "web1 ,db-1"),
        ("list", "db-1"),
        ("list", ",web1,"),
        ("list", "web1,,app10"),
        ("list", "web"),
        ("list", "web1,db-1,DB_2,app10,web2.example.com"),
        ("pcre", "web"),
        ("pcre", "web\\d$"),
        ("pcre", "web\\d\\Z"),
        ("pcre", ".*1$"),
        ("pcre", "(?i)db"),
        ("pcre", "(?=.*\\d)(?!web)"),
        ("pcre", "(?<=w)eb"),
        ("pcre", "(\\w)\\w*\\1"),
        ("pcre", "(?P<c>[a-z])(?P=c)"),
        ("pcre", "[[:alpha:]]"),
        ("pcre", "[[:alpha:]]+\\d"),
        ("pcre", "d{1}b"),
        ("pcre", "a{"),
        ("pcre", "x{,2}app"),
        ("pcre", "app1{1,}0"),
        ("pcre", "(web|db)"),
        ("pcre", "web2\\.example\\.com\\Z"),
        ("pcre", "\\Aweb"),
        ("pcre", "(?x) w e b"),
        ("pcre", "[\\w.]+com"),
        ("pcre", "(unclosed"),
        ("pcre", "*bad"),
        ("pcre", "\\"),
        ("pcre", "(?s).*"),
        ("pcre", "app(?#comment)10"),
        ("pcre", "(?>db)-"),
        ("pcre", "web1?+"),
        ("grain", "os:*"),
        ("grain", "datacenter:reg*"),
        ("grain", "datacenter:REG*east*"),
        ("grain", "data*:reg*"),
        ("grain", "DATACENTER:us"),
        ("grain", "tier:front"),
        ("grain", "Tier:front"),
        ("grain", "T*:back"),
        ("grain", "roles:web"),
        ("grain", "roles:WEB"),
        ("grain", "roles:cache"),
        ("grain", "roles:*"),
        ("grain", "num:4"),
        ("grain", "num:1*"),
        ("grain", "ratio:1e-07"),
        ("grain", "ratio:0.5"),
        ("grain", "ratio:1.0"),
        ("grain", "enabled:true"),
        ("grain", "enabled:True"),
        ("grain", "master:salt.example.com:4506"),
        ("grain", "master:*:4506"),
        ("grain", "app:name:shop"),
        ("grain", "app:name:SHOP"),
        ("grain", "app:ports:80"),
        ("grain", "app:ports:44*"),
        ("grain", "app:a:b:colon-key"),
        ("grain", "app:a:b"),
        ("grain", "app:upper:mixed"),
        ("grain", "app:Upper:mixed"),
        ("grain", "app:*:shop"),
        ("grain", "app:name"),
        ("grain", "app:nam*"),
        ("grain", "*:shop"),
        ("grain", "*:*:shop"),
        ("grain", "tags:k:v1"),
        ("grain", "tags:0:k:v*"),
        ("grain", "tags:1:plain"),
        ("grain", "tags:-1:plain"),
        ("grain", "tags:plain"),
        ("grain", "os:x:y"),
        ("grain", "ipv4:10.0.*"),
        ("grain", "nogrin:x"),
        ("grain", "os"),
        ("grain", "id:web1"),
        ("grain_pcre", "os:.*"),
        ("grain_pcre", "datacenter:region-(east|west)"),
        ("grain_pcre", "data.*:eu"),
        ("grain_pcre", "roles:^c"),
        ("grain_pcre", "app:version:1\\.[0-2]\\.3$"),
        ("grain_pcre", "app:name:(?!shop)"),
        ("grain_pcre", "num:\\d{2}"),
        ("grain_pcre", "app:ports:(unclosed"),
        ("grain_pcre", "tier:F"),
        ("ipcidr", "10.0.1.5"),
        ("ipcidr", "10.0.0.0/8"),
        ("ipcidr", "10.0.2.0/24"),
        ("ipcidr", "10.0.2.1/24"),
        ("ipcidr", "192.168.0.0/255.255.0.0"),
        ("ipcidr", "192.168.3.0/0.0.0.255"),
        ("ipcidr", "127.0.0.1"),
        ("ipcidr", "fd00::/8"),
        ("ipcidr", "fd00::3:5"),
        ("ipcidr", "fd00::3:0/112"),
        ("ipcidr", "::1"),
        ("ipcidr", "0.0.0.0/0"),
        ("ipcidr", "10.0.0.5/32"),
        ("ipcidr", "010.0.0.5"),
        ("ipcidr", "not-an-ip"),
        ("ipcidr", "10.0.0.0/33"),
        ("ipcidr", "10.0.0.0/ 8"),
        ("compound", "web* and G@os:*"),
        ("compound", "( web* or db* ) and not G@enabled:true"),
        ("compound", "(web* or db*)"),
        ("compound", "(web1 or db-1 )"),
        ("compound", "G@roles:web and not L@web1,app10"),
        ("compound", "P@datacenter:region-east or E@app\\d+"),
        ("compound", "S@10.0.0.0/16 and not S@10.0.1.0/24"),
        ("compound", "S@fd00::/8"),
        ("compound", "I@role:web or db*"),
        ("compound", "J@role:web or db*"),
        ("compound", "T@vm or app10"),
        ("compound", "M@web1 or app10"),
        ("compound", "R@%cluster or web1"),
        ("compound", "N@group or web1"),
        ("compound", "web1 or N@group"),
        ("compound", "X@foo or web1"),
        ("compound", "G|@app|name|shop"),
        ("compound", "G:@app:name:shop"),
        ("compound", "P;@datacenter;eu.*"),
        ("compound", "L@web1,db-1 or E@(bad"),
        ("compound", "P@os:(bad or web1"),
        ("compound", "not ( )"),
        ("compound", "( )"),
        ("compound", "not"),
        ("compound", "not web1"),
        ("compound", "not not web1"),
        ("compound", "web1 not db-1"),
        ("compound", "web1 db-1"),
        ("compound", "and web1"),
        ("compound", "web1 and"),
        ("compound", "( and web1 )"),
        ("compound", "( web1"),
        ("compound", "web1 )"),
        ("compound", ") web1 ("),
        ("compound", "web1 ( db-1 )"),
        ("compound", "( web1 ) ( db-1 )"),
        ("compound", "( ( ( web* ) ) )"),
        ("compound", "G@os:x:y or web1"),
        ("compound", "G@app:a:b:colon-key and E@.*1"),
        ("compound", "E@web1 or E@db-1 and not E@db.*"),
        ("compound", "not G@roles:web or not G@roles:db"),
        ("compound", "web1 or"),
        ("compound", "@"),
        ("compound", "G@"),
        ("compound", "G@nocolon or app10"),
        ("compound", "L@"),
        ("compound", "E@"),
    ]
}

/// A target case: `(tgt_type, tgt, delimiter)`, the delimiter sent only
/// when not `None` (as `salt --delimiter` sends it).
type Case = (String, String, Option<String>);

/// Grain targets under `salt --delimiter`: `(tgt_type, delimiter, tgt)`.
fn delimited() -> Vec<(&'static str, &'static str, &'static str)> {
    vec![
        ("grain", ";", "os;*"),
        ("grain", ";", "os:*"),
        ("grain", ";", "app;name;shop"),
        ("grain", ";", "app;a:b;colon-key"),
        ("grain", ";", "app;a;b;colon-key"),
        ("grain", ";", "master;*:4506"),
        ("grain", "|", "tags|0|k|v*"),
        ("grain", "::", "app::name::SHOP"),
        ("grain", "::", "app:name:shop"),
        ("grain", ":", "app:name:shop"),
        ("grain", "", "app:name:shop"),
        ("grain_pcre", ";", "datacenter;region-(east|west)"),
        ("grain_pcre", ";", "app;version;1\\.[0-2]\\.3$"),
        ("grain_pcre", "", "os:.*"),
        ("glob", ";", "web*"),
        ("compound", ";", "G@app:name:shop or db*"),
        ("compound", ";", "G@app;name;shop or db*"),
    ]
}

/// A tiny deterministic generator, so the generated corpus is the same in
/// every run and a difference can be reproduced from the test's output.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[(self.next() % items.len() as u64) as usize]
    }
}

/// Expressions generated from the minions' ids and grains: every type,
/// and compound expressions over every engine.
fn generated(ids: &[&str]) -> Vec<(&'static str, String)> {
    let mut rng = Rng(0x5a17_3008_0004_0001);
    let mut out = Vec::new();
    let globs = [
        "*", "w*", "*1", "?b*", "*-*", "*_*", "[dw]*", "[!d]*", "D*", "*.com", "a*0", "*[0-9]*",
    ];
    let regexes = [
        "w",
        "d",
        "D",
        ".*\\d$",
        "[a-z]+\\d",
        "(?i)d",
        "\\w+-",
        "(?!db)",
        "a.p",
        "web\\d*\\.",
    ];
    let grain_keys = [
        "os",
        "kernel",
        "roles",
        "datacenter",
        "Tier",
        "tier",
        "num",
        "ratio",
        "enabled",
        "app",
        "app:name",
        "app:version",
        "app:ports",
        "app:upper",
        "app:Upper",
        "tags",
        "tags:k",
        "id",
        "data*",
        "ROLES",
        "ipv4",
        "ipv6",
        "*",
    ];
    let grain_values = [
        "*",
        "web",
        "db*",
        "*EAST*",
        "front",
        "F*",
        "1*",
        "0.5",
        "true",
        "false",
        "shop",
        "Ledger",
        "8?",
        "1.*",
        "v*",
        "127.0.0.1",
        "::1",
        "linux",
        "Linux",
        "debian",
    ];
    let grain_regexes = [
        ".*",
        "w",
        "reg.*(1|2)$",
        "(?i)FRONT",
        "\\d+",
        "sh",
        "l[a-z]+",
        "^t",
        "1\\.",
    ];
    let cidrs = [
        "10.0.0.0/8",
        "10.0.3.0/24",
        "192.168.1.11",
        "192.168.0.0/16",
        "127.0.0.0/8",
        "fd00::/16",
        "::1",
        "fd00::1:5",
        "172.16.0.0/12",
        "10.0.4.5",
    ];
    for g in globs {
        out.push(("glob", g.to_string()));
    }
    for r in regexes {
        out.push(("pcre", r.to_string()));
    }
    for c in cidrs {
        out.push(("ipcidr", c.to_string()));
    }
    for _ in 0..20 {
        let n = 1 + rng.next() % 3;
        let items: Vec<&str> = (0..n).map(|_| *rng.pick(ids)).collect();
        let sep = *rng.pick(&[",", ", ", " ,"]);
        out.push(("list", items.join(sep)));
    }
    for _ in 0..60 {
        let key = rng.pick(&grain_keys);
        let value = rng.pick(&grain_values);
        out.push(("grain", format!("{key}:{value}")));
    }
    for _ in 0..30 {
        let key = rng.pick(&grain_keys);
        let value = rng.pick(&grain_regexes);
        out.push(("grain_pcre", format!("{key}:{value}")));
    }
    let leaf = |rng: &mut Rng| -> String {
        match rng.next() % 9 {
            0 => rng.pick(&globs).to_string(),
            1 => format!("G@{}:{}", rng.pick(&grain_keys), rng.pick(&grain_values)),
            2 => format!("P@{}:{}", rng.pick(&grain_keys), rng.pick(&grain_regexes)),
            3 => format!("E@{}", rng.pick(&regexes)),
            4 => format!("L@{},{}", rng.pick(ids), rng.pick(ids)),
            5 => format!("S@{}", rng.pick(&cidrs)),
            6 => format!("I@{}:{}", rng.pick(&grain_keys), rng.pick(&grain_values)),
            7 => format!("M@{}", rng.pick(ids)),
            _ => rng.pick(ids).to_string(),
        }
    };
    for _ in 0..140 {
        let terms = 1 + rng.next() % 4;
        let mut words = Vec::new();
        let mut open = 0;
        for t in 0..terms {
            if t > 0 {
                words.push(rng.pick(&["and", "or", "and", "or", "and not"]).to_string());
            }
            if rng.next().is_multiple_of(5) {
                words.push("not".to_string());
            }
            if rng.next().is_multiple_of(4) {
                words.push("(".to_string());
                open += 1;
            }
            words.push(leaf(&mut rng));
            if open > 0 && rng.next().is_multiple_of(3) {
                words.push(")".to_string());
                open -= 1;
            }
        }
        words.extend(std::iter::repeat_n(")".to_string(), open));
        out.push(("compound", words.join(" ")));
    }
    out
}

/// Who runs each job, as maid's agents decide it: the ids that PINGed
/// `match: true`. Jobs go out in batches, each with its own reply topic.
async fn maid_decisions(bus: &Bus, cases: &[Case], ids: &[&str]) -> Vec<Vec<String>> {
    let mut out = Vec::with_capacity(cases.len());
    for (batch_no, batch) in cases.chunks(40).enumerate() {
        let topics: Vec<String> = (0..batch.len())
            .map(|i| format!("maid.reply.difftest.{batch_no}.{i}"))
            .collect();
        let pubsub = bus.subscribe(&topics).await.unwrap();
        let mut stream = pubsub.into_on_message();
        let mut conn = bus.connect().await.unwrap();
        for (i, (tgt_type, tgt, delimiter)) in batch.iter().enumerate() {
            let mut job = json!({
                "jid": format!("2026112400000{batch_no:03}{i:04}"),
                "tempTopic": topics[i],
                "fun": "test.ping",
                "tgt": tgt,
                "tgt_type": tgt_type,
                "timeout": 5,
            });
            if let Some(d) = delimiter {
                job["delimiter"] = json!(d);
            }
            maid_bus::publish(&mut conn, TOPIC, &job.to_string())
                .await
                .unwrap();
        }
        // Every maid answers every job at once: a ping or a reject.
        let mut answered: Vec<BTreeMap<String, bool>> = vec![BTreeMap::new(); batch.len()];
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while answered.iter().any(|a| a.len() < ids.len()) {
            let msg = tokio::time::timeout_at(deadline, stream.next())
                .await
                .expect("every maid answers every job")
                .unwrap();
            let channel = msg.get_channel_name().to_string();
            let i = topics.iter().position(|t| *t == channel).unwrap();
            match receive(msg.get_payload_bytes()).unwrap().reply {
                Reply::Ping(p) => {
                    answered[i].insert(p.sub_ip, p.matched);
                }
                Reply::Reject(r) => {
                    answered[i].insert(r.sub_ip, false);
                }
                Reply::Return(_) => {}
            }
        }
        out.extend(answered.into_iter().map(|a| {
            a.into_iter()
                .filter(|(_, hit)| *hit)
                .map(|(id, _)| id)
                .collect()
        }));
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn targeting_agrees_with_salts_matchers() {
    let redis = RedisServer::start();
    let bus = Bus::new(&redis.config()).unwrap();
    let minions = minion_grains();
    let ids: Vec<&str> = minions.iter().map(|(id, _)| *id).collect();
    let _agents: Vec<_> = minions
        .iter()
        .map(|(id, toml)| start_agent(&redis.config(), id, toml))
        .collect();
    wait_registered(&bus, &ids).await;
    wait_subscribers(&bus, ids.len() as i64).await;

    // The grains as the agents registered them are what Salt is given.
    let mut conn = bus.connect().await.unwrap();
    let registry = maid_master::jobs::alive_maids(&mut conn, None)
        .await
        .unwrap();
    let grains: serde_json::Map<String, Value> = ids
        .iter()
        .map(|id| {
            (
                id.to_string(),
                Value::Object(registry[*id].1.as_ref().unwrap().grains.clone()),
            )
        })
        .collect();

    let mut cases: Vec<Case> = hand_written()
        .into_iter()
        .map(|(t, e)| (t.to_string(), e.to_string(), None))
        .collect();
    cases.extend(
        generated(&ids)
            .into_iter()
            .map(|(t, e)| (t.to_string(), e, None)),
    );
    cases.extend(
        delimited()
            .into_iter()
            .map(|(t, d, e)| (t.to_string(), e.to_string(), Some(d.to_string()))),
    );
    let pairs = cases.len() * ids.len();
    assert!(pairs >= 1000, "the corpus has only {pairs} pairs");

    let salt = oracle(
        "targeting",
        &json!({
            "minions": grains,
            "cases": cases
                .iter()
                .map(|(t, e, d)| json!({"tgt_type": t, "tgt": e, "delimiter": d}))
                .collect::<Vec<_>>(),
        }),
    );
    let salt: Vec<Vec<String>> = serde_json::from_value(salt).unwrap();
    let maid = maid_decisions(&bus, &cases, &ids).await;

    // What was compared, for reproducing a difference outside the test.
    let dump = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("targeting-diff.json");
    std::fs::write(
        &dump,
        json!({"minions": grains, "cases": cases, "salt": salt, "maid": maid}).to_string(),
    )
    .unwrap();

    let mut differences = Vec::new();
    for (((tgt_type, tgt, delimiter), salt), maid) in cases.iter().zip(&salt).zip(&maid) {
        if salt != maid {
            let salt: BTreeSet<_> = salt.iter().collect();
            let maid: BTreeSet<_> = maid.iter().collect();
            differences.push(format!(
                "{tgt_type} {tgt:?} (delimiter {delimiter:?}): Salt runs on {salt:?}, maid on {maid:?}"
            ));
        }
    }
    let hits: usize = salt.iter().map(Vec::len).sum();
    assert!(
        hits > pairs / 10 && hits < pairs * 9 / 10,
        "a corpus that (almost) always or never matches proves little: {hits} of {pairs}"
    );
    assert!(
        differences.is_empty(),
        "{} of {} expressions ({pairs} expression × minion pairs) differ from Salt {} \
         (all cases in {}):\n{}",
        differences.len(),
        cases.len(),
        crate::common::salt::SALT_VERSION,
        dump.display(),
        differences.join("\n")
    );
}

/// Register `id` as an alive maid that no agent runs: a master selects
/// and expects it, and it never answers.
async fn register_silent_maid(bus: &Bus, id: &str) {
    let mut conn = bus.connect().await.unwrap();
    let registration = maid_protocol::protocol::Registration {
        id: id.into(),
        version: "test".into(),
        master_topics: vec![TOPIC.into()],
        functions: vec![],
        grains: serde_json::Map::new(),
        started_at: "2026-11-24T00:00:00".into(),
        last_seen: "2026-11-24T00:00:00".into(),
        pubkey: None,
        syndic: false,
    };
    redis::cmd("HSET")
        .arg(maid_protocol::protocol::REGISTRY_KEY)
        .arg(id)
        .arg(serde_json::to_string(&registration).unwrap())
        .query_async::<()>(&mut conn)
        .await
        .unwrap();
    redis::cmd("SET")
        .arg(maid_protocol::protocol::alive_key(id))
        .arg(1)
        .query_async::<()>(&mut conn)
        .await
        .unwrap();
}

/// Words an operator types, and the ones YAML 1.1, Salt's loader and its
/// `key=value` rule read in surprising ways.
const WORDS: &[&str] = &[
    "010",
    "1:30",
    ".inf",
    "-.inf",
    ".nan",
    "1e3",
    "1.5e3",
    "0o17",
    "0x1F",
    "0b101",
    "1_000",
    "+12",
    "-12",
    "012",
    "08",
    "-010",
    "yes",
    "no",
    "on",
    "off",
    "y",
    "n",
    "True",
    "true",
    "TRUE",
    "False",
    "null",
    "Null",
    "~",
    "None",
    "none",
    "''",
    "\"\"",
    "[1,2]",
    "{a: 1}",
    "{\"a\": 1}",
    "a=b",
    "a=",
    "=b",
    "a==b",
    "--flag",
    "-x",
    "-",
    "- item",
    "a: b",
    "a:b",
    "2026-11-24",
    "2026-11-24 10:00:00",
    "12:30:45",
    "1.0",
    ".5",
    "5.",
    "1e-7",
    "3.14",
    "'quoted'",
    "\"quoted\"",
    "#comment",
    "a #b",
    "foo bar",
    "echo l1\necho l2",
    "!!str 1",
    "!!binary aGk=",
    "&a 1",
    "*a",
    "@x",
    "%x",
    "`x`",
    "|",
    ">",
    "key=val=ue",
    "name=\"a b\"",
    "x=[1,2]",
    "x={a: 1}",
    "x=1",
    "x=yes",
    "x=null",
    "0",
    "00",
    "-0",
    "0.0",
    "1.0e+3",
    "1.5E-3",
    "1e+3",
    "190:20:30",
    "1_0.5",
    "0_1",
    "123456789012345678901234567890",
    "20260101123456789012",
    "12345678901234567890",
    "[a, b",
    "{a: [1, {b: 2}]}",
    "[]",
    "{}",
    "!",
    "!!int 5",
    "!!float 1",
    "!!bool yes",
    "!!null x",
    "!!set {a, b}",
    "!!timestamp 2026-01-01",
    "[2026-11-24]",
    "{d: 2026-11-24}",
    "---",
    "...",
    " ",
    "   x   ",
    "x\ty",
    "a\r",
    "a=b\nc",
    "a=b\n",
    "a.b=1",
    "a-b=1",
    "_a=1",
    "1a=2",
    "é=1",
    "a b=1",
    "a=b c",
    "<<: {a: 1}",
    "{a: 1, a: 2}",
    "{1: a, true: b}",
    "[1, 2]  # c",
    "#",
    "\"a=b\"",
    "'x=1'",
    "[.inf]",
    "{<<: {a: 1}, b: 2}",
    "[1, !!binary aGk=]",
    "echo hello",
    "cwd=/tmp",
    "python_shell=False",
    "! foo",
    "[x, 'y z', \"q\"]",
    "{a: {b: {c: [1, 2.5, yes, ~]}}}",
    "0.1",
    "1_000.5",
    "+.5",
];

/// What JSON cannot carry: Salt sends `inf` and `nan` as floats over
/// msgpack; maid's wire is JSON, so such a word stays the text it was.
/// Listed in docs/differences-from-salt.md as a deliberate difference.
fn is_nonjson(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.contains_key("__nonjson__") || m.values().any(is_nonjson),
        Value::Array(items) => items.iter().any(is_nonjson),
        _ => false,
    }
}

fn maid_cli(args: &[&str]) -> std::process::Output {
    crate::common::maid_command()
        .args(args)
        .env("MAID_PLUGIN_DIR", crate::common::guests::PLUGINS_DIR)
        .env("MAID_CACHE_DIR", crate::common::shared_cache())
        .env_remove("MAID_CONFIG")
        .env_remove("MAID_KEY")
        .env_remove("MAID_PKI_DIR")
        .output()
        .expect("run maid")
}

#[tokio::test(flavor = "multi_thread")]
async fn arguments_agree_with_salts_parse_input() {
    let mut cases: Vec<Vec<String>> = WORDS.iter().map(|w| vec![w.to_string()]).collect();
    // Several words at once: positional order kept, kwargs gathered, the
    // last of a repeated name wins.
    cases.push(
        ["1", "a=1", "two", "a=2", "[3]", "b={c: d}"]
            .map(String::from)
            .to_vec(),
    );
    let salt: Vec<Value> =
        serde_json::from_value(oracle("arguments", &json!({ "cases": cases }))).unwrap();

    // `maid run` publishes: read the job off the master topic.
    let redis = RedisServer::start();
    let bus = Bus::new(&redis.config()).unwrap();
    let mut jobs = bus
        .subscribe(&[TOPIC.to_string()])
        .await
        .unwrap()
        .into_on_message();
    // A registered maid for the target, or `maid run` (as `salt`) sends
    // nothing; the test reads the job itself and never answers it.
    register_silent_maid(&bus, "argcheck").await;

    let url = redis.url();
    let mut differences = Vec::new();
    let mut deliberate = 0;
    for (words, salt) in cases.iter().zip(&salt) {
        let shown = format!("{words:?}");
        if is_nonjson(salt) {
            deliberate += 1;
            continue;
        }
        let mut argv = vec!["run", "--redis", &url, "--master-topic", TOPIC];
        argv.extend(["-t", "0.2", "argcheck", "test.arg", "--"]);
        argv.extend(words.iter().map(String::as_str));
        let out = maid_cli(&argv);
        let msg = tokio::time::timeout(Duration::from_secs(10), jobs.next())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "maid run {shown} published nothing: {}",
                    String::from_utf8_lossy(&out.stderr)
                )
            })
            .unwrap();
        let job: Value = serde_json::from_slice(msg.get_payload_bytes()).unwrap();
        let published =
            json!({"arg": job["arg"], "kwarg": job.get("kwarg").cloned().unwrap_or(json!({}))});
        if published != salt["published"] {
            differences.push(format!(
                "maid run {shown}: published {published}, Salt {}",
                salt["published"]
            ));
        }

        // `maid call test.arg` shows what a function receives.
        let mut argv = vec!["call", "--local", "--out", "json", "test.arg", "--"];
        argv.extend(words.iter().map(String::as_str));
        let out = maid_cli(&argv);
        let got: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "maid call {shown}: {e}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        let got = &got["local"];
        if got["args"] != salt["minion"]["args"] || got["kwargs"] != salt["minion"]["kwargs"] {
            differences.push(format!(
                "maid call {shown}: received {got}, Salt {}",
                salt["minion"]
            ));
        }
    }
    assert!(deliberate <= 4, "{deliberate} words JSON cannot carry");
    assert!(
        differences.is_empty(),
        "{} of {} argument lists read differently from Salt {}:\n{}",
        differences.len(),
        cases.len(),
        crate::common::salt::SALT_VERSION,
        differences.join("\n")
    );
}

/// Return shapes: scalars Python prints its own way, strings YAML must
/// quote or fold, long values pprint wraps, nesting of every kind.
fn return_shapes() -> Vec<Value> {
    let long_words = "the quick brown fox jumps over the lazy dog ".repeat(4);
    let long_list: Vec<Value> = (0..40).map(|i| json!(i * 1000)).collect();
    vec![
        json!(true),
        json!(false),
        json!(null),
        json!(0),
        json!(-7),
        json!(12345678901234567890u64),
        json!(1e-07),
        json!(0.1),
        json!(1.0),
        json!(2.5e16),
        json!(-0.0),
        json!(1e100),
        json!("hello"),
        json!(""),
        json!("line1\nline2"),
        json!("a\r\nb"),
        json!("a\n"),
        json!("a\n\nb"),
        json!("tab\tx"),
        json!("unicode é ✓"),
        json!("emoji 😀"),
        json!("esc \u{1b}[0m"),
        json!("yes"),
        json!("1"),
        json!("010"),
        json!("1e3"),
        json!("a: b"),
        json!("- x"),
        json!("#x"),
        json!(" lead"),
        json!("trail "),
        json!("it's \"quoted\""),
        json!("null"),
        json!("~"),
        json!(long_words.trim_end()),
        json!(format!("{}\n{}", long_words, long_words)),
        json!([]),
        json!([1, "two", 3.0]),
        json!({}),
        json!({"b": 1, "a": {"c": [1, 2]}}),
        json!({"x": null}),
        json!([{"k": "v"}]),
        json!({"retcode": 1, "stdout": "out"}),
        json!([[1, 2], [], {}, [[3]]]),
        json!({"k": [{"a": 1, "b": [1]}, "s"], "e": {}, "l": []}),
        json!({"yes": 1, "": 2, "a b": 3, "1": 4, "Z": 5, "_": 6}),
        json!({"pid": 4242, "retcode": 0, "stderr": "", "stdout": long_words}),
        json!(long_list),
        json!({"deep": {"er": {"and": {"deeper": [{"x": [long_words.trim_end()]}]}}}}),
        // What `--out table` lays out, and what makes it fall back.
        json!([{"name": "a", "size_kb": 1}, {"name": "bb", "size_kb": 22.5}]),
        json!(["one", "two words here", long_words.trim_end()]),
        json!([["a", "b"], ["cc", "d"]]),
        json!({"disks": [{"dev": "/dev/sda", "use": "10%"}], "x": 1, "l": ["s"]}),
        json!([{"a": 1}, {"b": 2, "c": 3}]),
        json!([{}, {}]),
        json!([[1, 2]]),
        json!([[]]),
        json!([{"a": 1}, "s"]),
        json!([true, false]),
        json!([{"text": format!("{long_words}{long_words}"), "n": "x", "m": {"k": [1, null]}}]),
        json!([{"é_ü": "ünïcode ✓", "x_y_z": "a"}]),
    ]
}

/// `--out` with `--out-indent` variants as Salt takes them.
fn outputters() -> Vec<(&'static str, Option<i64>)> {
    vec![
        ("nested", None),
        ("json", None),
        ("json", Some(2)),
        ("json", Some(0)),
        ("json", Some(-1)),
        ("yaml", None),
        ("yaml", Some(4)),
        ("yaml", Some(-1)),
        ("txt", None),
        ("text", None),
        ("raw", None),
        ("pprint", None),
        ("pprint", Some(4)),
        ("pprint", Some(-1)),
        ("quiet", None),
        ("newline_values_only", None),
        ("table", None),
        ("table", Some(2)),
        ("no_return", None),
    ]
}

/// Whether one of Salt's outputs carries a colour escape.
fn stdout_has_colour(outputs: &[Value]) -> bool {
    outputs
        .iter()
        .any(|o| o["stdout"].as_str().is_some_and(|s| s.contains("\x1b[0;")))
}

#[test]
fn outputs_agree_with_salts_outputters() {
    use maid_salt::output::Out;

    let shapes = return_shapes();
    // Each outputter plain, and in colour after a return of retcode 0 and
    // of another (Salt's `nested` turns red).
    let mut cases = Vec::new();
    let paints = [(false, 0), (true, 0), (true, 2)];
    for (out, indent) in outputters() {
        for (color, retcode) in paints {
            for shape in &shapes {
                let mut data = serde_json::Map::new();
                data.insert("web1".into(), shape.clone());
                cases.push((out, indent, color, retcode, data));
            }
        }
    }
    let salt: Vec<Value> = serde_json::from_value(oracle(
        "output",
        &json!({"cases": cases.iter().map(|(o, i, c, r, d)| json!({"out": o, "indent": i, "color": c, "retcode": r, "data": d})).collect::<Vec<_>>()}),
    ))
    .unwrap();

    // The renderer every command uses, on the whole corpus.
    let mut differences = Vec::new();
    for ((out, indent, color, retcode, data), salt) in cases.iter().zip(&salt) {
        let o: Out = out.parse::<Out>().unwrap().colored(*color);
        let stdout = o.render_ret(&Value::Object(data.clone()), *indent, *retcode);
        let stderr = o.warning().map(|w| format!("{w}\n")).unwrap_or_default();
        if stdout != salt["stdout"] || stderr != salt["stderr"] {
            differences.push(format!(
                "--out {out} --out-indent {indent:?} (colour {color}, retcode {retcode}) of {}:\n  maid: {stdout:?} {stderr:?}\n  Salt: {} {}",
                data["web1"], salt["stdout"], salt["stderr"]
            ));
        }
    }
    assert!(
        stdout_has_colour(&salt),
        "the oracle printed no colour: the colour cases compare nothing"
    );

    // The commands themselves: `maid call --out X` prints `{local: ...}`
    // as salt-call does, for every outputter, on the shapes a command
    // line can carry to `test.echo` as JSON text.
    let via_cli: Vec<&Value> = shapes
        .iter()
        .filter(|v| {
            // What `salt-call test.echo WORD` would echo back unchanged
            // (a 20-digit int, for one, travels as a string).
            let (args, kwargs) = maid_salt::args::parse_cli(&[v.to_string()]);
            kwargs.is_empty() && args == [(*v).clone()]
        })
        .collect();
    assert!(
        via_cli.len() >= 20,
        "only {} shapes reach the CLI",
        via_cli.len()
    );
    // `--force-color` on some (stdout is a pipe here, so colour is off
    // otherwise); `--no-color` alone changes nothing.
    let cli_cases: Vec<(&str, Option<i64>, &Value, Option<&str>)> = outputters()
        .into_iter()
        .flat_map(|(o, i)| via_cli.iter().map(move |v| (o, i, *v)))
        .enumerate()
        .map(|(n, (o, i, v))| {
            (
                o,
                i,
                v,
                [None, Some("--force-color"), Some("--no-color")][n % 3],
            )
        })
        .collect();
    let salt_cli: Vec<Value> = serde_json::from_value(oracle(
        "output",
        &json!({"cases": cli_cases.iter().map(|(o, i, v, c)| json!({"out": o, "indent": i, "color": *c == Some("--force-color"), "data": {"local": v}})).collect::<Vec<_>>()}),
    ))
    .unwrap();
    assert!(stdout_has_colour(&salt_cli));
    for ((out, indent, value, color), salt) in cli_cases.iter().zip(&salt_cli) {
        let word = value.to_string();
        let mut argv = vec!["call", "--local", "--out", out];
        argv.extend(color);
        let indent_text = indent.map(|i| i.to_string());
        if let Some(i) = &indent_text {
            argv.extend(["--out-indent", i]);
        }
        argv.extend(["test.echo", "--", &word]);
        let o = maid_cli(&argv);
        let (stdout, stderr) = (
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr),
        );
        if stdout != salt["stdout"].as_str().unwrap() || stderr != salt["stderr"].as_str().unwrap()
        {
            differences.push(format!(
                "maid call --out {out} --out-indent {indent:?} {color:?} test.echo {word}:\n  maid: {stdout:?} {stderr:?}\n  Salt: {} {}",
                salt["stdout"], salt["stderr"]
            ));
        }
    }
    // A failed call in colour: salt-call hands the outputter its retcode.
    let failed = maid_cli(&["call", "--local", "--force-color", "cmd.retcode", "exit 1"]);
    let salt_failed = oracle(
        "output",
        &json!({"cases": [{"out": "nested", "color": true, "retcode": 1, "data": {"local": 1}}]}),
    );
    let stdout = String::from_utf8_lossy(&failed.stdout);
    if stdout != salt_failed[0]["stdout"].as_str().unwrap() {
        differences.push(format!(
            "maid call --force-color cmd.retcode 'exit 1':\n  maid: {stdout:?}\n  Salt: {}",
            salt_failed[0]["stdout"]
        ));
    }
    assert!(
        differences.is_empty(),
        "{} outputs differ from Salt {}:\n{}",
        differences.len(),
        crate::common::salt::SALT_VERSION,
        differences.join("\n")
    );
}

/// One state's return as `state.apply` gives it, keyed as Salt keys it
/// (`module_|-id_|-name_|-function`).
fn state_ret(key: &str, run: i64, result: Value, comment: &str, changes: Value) -> (String, Value) {
    let parts: Vec<&str> = key.split("_|-").collect();
    let ret = json!({
        "name": parts[2], "changes": changes, "result": result,
        "comment": comment, "__sls__": "web", "__run_num__": run,
        "start_time": format!("10:00:0{}.123456", run % 10),
        "duration": 1.25 + run as f64 * 10.5, "__id__": parts[1],
    });
    (key.to_string(), ret)
}

/// A state that succeeded without changes.
fn ok_state(key: &str, run: i64) -> (String, Value) {
    let comment = "Already in the correct state";
    state_ret(key, run, json!(true), comment, json!({}))
}

/// A state that succeeded with `changes`.
fn changed_state(key: &str, run: i64, changes: Value) -> (String, Value) {
    state_ret(key, run, json!(true), "Updated", changes)
}

/// `state` with `field` set to `value`, or removed when `value` is `None`.
fn with_field(mut state: (String, Value), field: &str, value: Option<Value>) -> (String, Value) {
    let ret = state.1.as_object_mut().unwrap();
    match value {
        Some(v) => ret.insert(field.into(), v),
        None => ret.remove(field),
    };
    state
}

/// `{minion: {state key: state return}}`.
fn states_of(minion: &str, states: Vec<(String, Value)>) -> Value {
    let states: serde_json::Map<String, Value> = states.into_iter().collect();
    json!({ minion: states })
}

/// Highstate returns as minions send them: every result, changes of
/// every shape, the envelopes and non-state returns the outputter takes,
/// and those that make Salt's raise and fall back to `nested`.
fn highstate_returns() -> Vec<Value> {
    let diff = "--- \n+++ \n@@ -1,2 +1,2 @@\n-old line\n+new line\n context\n";
    let pkgs =
        json!({"nginx": {"old": "", "new": "1.24.0-1"}, "curl": {"old": "7.88", "new": "8.5.0"}});
    let one = |state| states_of("web1", vec![state]);
    let mut returns = vec![
        // Success without changes, and with a diff shown as it is.
        one(ok_state("file_|-motd_|-/etc/motd_|-managed", 0)),
        one(changed_state(
            "file_|-motd_|-/etc/motd_|-managed",
            0,
            json!({"diff": diff}),
        )),
        // Nested changes, several states, run order not key order.
        states_of(
            "web1",
            vec![
                changed_state("pkg_|-web_|-web_|-installed", 2, pkgs.clone()),
                ok_state("service_|-nginx_|-nginx_|-running", 0),
                state_ret(
                    "file_|-conf_|-/etc/nginx.conf_|-managed",
                    1,
                    json!(false),
                    "Source file salt://nginx.conf not found\n  in saltenv 'base'",
                    json!({}),
                ),
            ],
        ),
        // test=True: result None, with pchanges.
        states_of(
            "web1",
            vec![
                with_field(
                    state_ret(
                        "file_|-motd_|-/etc/motd_|-managed",
                        0,
                        json!(null),
                        "The file /etc/motd is set to be changed\nNote: No changes made.",
                        json!({"diff": diff}),
                    ),
                    "pchanges",
                    Some(json!({"diff": diff})),
                ),
                ok_state("file_|-x_|-/x_|-exists", 1),
            ],
        ),
        // Failures, multi-line and padded comments, a list as comment.
        states_of(
            "db1",
            vec![
                state_ret(
                    "cmd_|-migrate_|-./migrate.sh_|-run",
                    0,
                    json!(false),
                    "\n  Command \"./migrate.sh\" run\nstderr: boom\n\n",
                    json!({"pid": 7, "retcode": 1, "stderr": "boom", "stdout": ""}),
                ),
                state_ret(
                    "cmd_|-after_|-true_|-run",
                    1,
                    json!(false),
                    "One or more requisite failed: web.migrate",
                    json!({}),
                ),
            ],
        ),
        one(with_field(
            ok_state("test_|-list_|-list_|-succeed_without_changes", 0),
            "comment",
            Some(json!(["first", "second"])),
        )),
    ];
    // Durations absent, parallel states (only the longest counts), a
    // duration that is a string.
    let ran = json!({"pid": 42, "retcode": 0, "stdout": "hi", "stderr": ""});
    let ran = changed_state("cmd_|-hi_|-echo hi_|-run", 0, ran);
    returns.push(one(with_field(
        with_field(ran, "duration", None),
        "start_time",
        None,
    )));
    let parallel = |key, run, duration: f64| {
        let state = changed_state(key, run, json!({"retcode": 0}));
        let state = with_field(state, "__parallel__", Some(json!(true)));
        with_field(state, "duration", Some(json!(duration)))
    };
    returns.push(states_of(
        "web1",
        vec![
            parallel("cmd_|-p1_|-sleep 1_|-run", 0, 1200.5),
            parallel("cmd_|-p2_|-sleep 2_|-run", 1, 2400.25),
            ok_state("file_|-after_|-/tmp/x_|-exists", 2),
        ],
    ));
    let timed = ok_state("file_|-s_|-/s_|-exists", 0);
    returns.push(one(with_field(timed, "duration", Some(json!("12.5 ms")))));
    // Several minions, one of each outcome.
    let denied = state_ret(
        "file_|-a_|-/a_|-managed",
        0,
        json!(false),
        "denied",
        json!({}),
    );
    let created = json!({"new": "file /a created"});
    returns.push(json!({
        "web1": one(changed_state("file_|-a_|-/a_|-managed", 0, created))["web1"],
        "web2": one(ok_state("file_|-a_|-/a_|-managed", 0))["web1"],
        "db1": one(denied)["web1"],
    }));
    // Compile errors: a list of strings (one with escapes, one no string).
    returns.push(json!({"web1": [
        "Rendering SLS 'base:web' failed: Jinja variable 'x' is undefined",
        "No matching sls found for 'nope' in env 'base'",
    ]}));
    returns.push(json!({"web1": [
        "Pillar failed to render with the following messages:",
        "\u{1b}[31mSLS 'x' not found\u{1b}[0m",
        3,
    ]}));
    // Unicode names and changes.
    let unicode = "file_|-café ✓_|-/srv/ünïcode 😀_|-managed";
    let unicode = changed_state(unicode, 0, json!({"diff": "+ü\n-é"}));
    returns.push(states_of("mïnion-ü", vec![unicode]));
    // Widths: a dozen states of every result.
    let many = (0..12)
        .map(|i| {
            let key = format!("file_|-f{i}_|-/srv/f{i}_|-managed");
            match i % 4 {
                0 => changed_state(&key, i, json!({"mode": "0644"})),
                1 => state_ret(&key, i, json!(false), "failed", json!({})),
                2 => state_ret(&key, i, json!(null), "would change", json!({})),
                _ => ok_state(&key, i),
            }
        })
        .collect();
    returns.push(states_of("web1", many));
    // A state that lost its order; warnings; data appended to comments.
    let lost = with_field(
        ok_state("file_|-lost_|-/lost_|-exists", 0),
        "__run_num__",
        None,
    );
    returns.push(states_of(
        "web1",
        vec![lost, ok_state("file_|-y_|-/y_|-exists", 1)],
    ));
    let warnings = json!([
        "The 'refresh' argument of pkg.installed is deprecated and will be removed in Salt 3009; \
         use 'refresh_db' instead, which does the same thing.",
        "Second warning",
    ]);
    let warned = ok_state("pkg_|-old_|-old_|-installed", 0);
    returns.push(one(with_field(warned, "warnings", Some(warnings))));
    returns.push(states_of(
        "web1",
        [json!(["a", 1]), json!({"k": "v", "n": [1]}), json!(7)]
            .into_iter()
            .enumerate()
            .map(|(i, data)| {
                let state = ok_state(&format!("module_|-m{i}_|-test.ping_|-run"), i as i64);
                with_field(state, "data", Some(data))
            })
            .collect(),
    ));
    // Changes that are no dict, and changes of every scalar kind.
    returns.push(states_of(
        "web1",
        vec![
            changed_state(
                "test_|-s_|-s_|-configurable_test_state",
                0,
                json!("a string"),
            ),
            changed_state("test_|-l_|-l_|-configurable_test_state", 1, json!([1, "x"])),
        ],
    ));
    let scalars = json!({"b": true, "n": null, "f": 2.5, "e": "", "l": [], "d": {}});
    returns.push(one(changed_state(
        "test_|-v_|-v_|-configurable_test_state",
        0,
        scalars,
    )));
    // Orchestration: a salt.state's highstate changes, a state.orch's
    // (with the runner's retcode beside its master).
    let inner = states_of(
        "web1",
        vec![
            changed_state("pkg_|-nginx_|-nginx_|-installed", 0, pkgs),
            ok_state("service_|-nginx_|-nginx_|-running", 1),
        ],
    );
    let deploy = json!({"out": "highstate", "ret": inner});
    let deploy = changed_state("salt_|-deploy_|-deploy_|-state", 0, deploy);
    returns.push(states_of("orch_master", vec![deploy]));
    let sub = changed_state("salt_|-sub_|-state.orch_|-runner", 0, inner.clone());
    let sub = with_field(sub, "name", Some(json!("state.orch")));
    returns.push(json!({"orch_master": one(sub)["web1"], "retcode": 0}));
    // Envelopes: a job's `return`, a lookup_jid return.
    returns.push(json!({"return": inner}));
    let job =
        json!({"jid": "20240101000000000000", "fun": "state.apply", "return": {"data": inner}});
    returns.push(json!({ "web1": job }));
    // Not state returns: a dict, {}, a string, an int, a bool, a float, None.
    returns.push(json!({"web1": {"a": 1, "b": "x"}, "web2": {}}));
    returns.push(json!({"web1": "line one\nline two", "web2": 42, "web3": true}));
    returns.push(json!({"web1": 2.5, "web2": null}));
    // What makes Salt's raise: no `changes`; no `comment` after a state
    // shown in full (which `nested` then shows as Salt left it); a list
    // as result; `__run_num__` of two kinds.
    let bare = json!({"result": true, "__run_num__": 0, "comment": "x"});
    returns.push(json!({"web1": {"a_|-b_|-c_|-d": bare}}));
    let first = changed_state("file_|-a_|-/a_|-managed", 0, json!({"x": 1}));
    let no_comment = with_field(ok_state("file_|-b_|-/b_|-exists", 1), "comment", None);
    returns.push(states_of("web1", vec![first, no_comment]));
    let odd = state_ret(
        "file_|-a_|-/a_|-managed",
        0,
        json!([true]),
        "odd",
        json!({}),
    );
    returns.push(one(odd));
    let text_run = with_field(
        ok_state("file_|-b_|-/b_|-managed", 1),
        "__run_num__",
        Some(json!("1")),
    );
    returns.push(states_of(
        "web1",
        vec![ok_state("file_|-a_|-/a_|-managed", 0), text_run],
    ));
    // Escapes in a minion's name and in a state's comment and changes.
    let esc = "esc \u{1b}[1m here";
    let esc = state_ret(
        "file_|-e_|-/e_|-managed",
        0,
        json!(true),
        esc,
        json!({"s": "\u{1b}[0m"}),
    );
    returns.push(states_of("we\u{1b}b1", vec![esc]));
    returns
}

/// Salt's opts for the highstate outputter, one set per case: each
/// `state_output` mode, with and without the other switches.
fn highstate_opts() -> Vec<Value> {
    let base = json!({
        "state_output": "full", "state_verbose": true, "state_tabular": false,
        "state_output_diff": false, "state_output_profile": true,
        "state_output_pct": false, "state_output_exclude": [], "state_output_terse": [],
    });
    let with = |changes: Value| {
        let mut o = base.clone();
        for (k, v) in changes.as_object().unwrap() {
            o[k] = v.clone();
        }
        o
    };
    let mut all = vec![base.clone()];
    for mode in [
        "terse",
        "mixed",
        "changes",
        "full_id",
        "terse_id",
        "mixed_id",
        "changes_id",
        "Terse",
    ] {
        all.push(with(json!({"state_output": mode})));
    }
    all.extend([
        with(json!({"state_verbose": false})),
        with(json!({"state_output": "changes", "state_verbose": false})),
        with(json!({"state_output_diff": true})),
        with(json!({"state_output_profile": false})),
        with(json!({"state_output_pct": true})),
        with(json!({"state_output": "terse", "state_tabular": true})),
        with(json!({"state_output": "terse", "state_tabular": true, "state_output_profile": false})),
        with(json!({"state_output": "filter", "state_output_exclude": ["True"], "state_output_terse": ["None"]})),
        with(json!({"state_output": "filter_id", "state_output_terse": ["True", "False"]})),
    ]);
    all
}

/// The [`HighstateOpts`] of one of [`highstate_opts`].
fn state_opts(o: &Value) -> maid_salt::output::HighstateOpts {
    let words = |k: &str| -> Vec<String> {
        o[k].as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_str().unwrap().to_string())
            .collect()
    };
    maid_salt::output::HighstateOpts {
        state_output: o["state_output"].as_str().unwrap().into(),
        state_verbose: o["state_verbose"].as_bool().unwrap(),
        state_tabular: o["state_tabular"].as_bool().unwrap(),
        state_output_diff: o["state_output_diff"].as_bool().unwrap(),
        state_output_profile: o["state_output_profile"].as_bool().unwrap(),
        state_output_pct: o["state_output_pct"].as_bool().unwrap(),
        state_output_exclude: words("state_output_exclude"),
        state_output_terse: words("state_output_terse"),
    }
}

#[test]
fn highstate_agrees_with_salts_outputter() {
    use maid_salt::output::{Out, Outputter};

    let returns = highstate_returns();
    let all_opts = highstate_opts();
    assert!(
        returns.len() >= 25,
        "only {} highstate returns",
        returns.len()
    );
    // Every return under every set of opts: plain, in colour, and in
    // colour with a retcode (which only `nested`, where Salt's highstate
    // falls back to it, shows).
    let mut cases = Vec::new();
    for opts in &all_opts {
        for data in &returns {
            for (color, retcode) in [(false, 0), (true, 0), (true, 2)] {
                cases.push((opts, data, color, retcode));
            }
        }
    }
    let salt: Vec<Value> = serde_json::from_value(oracle(
        "output",
        &json!({"cases": cases.iter().map(|(o, d, c, r)| json!({"out": "highstate", "indent": null, "color": c, "retcode": r, "data": d, "opts": o})).collect::<Vec<_>>()}),
    ))
    .unwrap();
    assert!(stdout_has_colour(&salt));

    let mut differences = Vec::new();
    for ((opts, data, color, retcode), salt) in cases.iter().zip(&salt) {
        // As a state function's return reaches it: `--out highstate`
        // (or none) deferring to the function's own outputter.
        let o = "highstate"
            .parse::<Out>()
            .unwrap()
            .for_function("highstate")
            .colored(*color)
            .with_state_opts(state_opts(opts));
        assert_eq!(o.outputter(), Outputter::Highstate);
        let stdout = o.render_ret(data, None, *retcode);
        let stderr = o.warning().map(|w| format!("{w}\n")).unwrap_or_default();
        if stdout != salt["stdout"] || stderr != salt["stderr"] {
            differences.push(format!(
                "highstate of {data} with {opts} (colour {color}, retcode {retcode}):\n  maid: {stdout:?} {stderr:?}\n  Salt: {} {}",
                salt["stdout"], salt["stderr"]
            ));
        }
    }
    assert!(
        differences.is_empty(),
        "{} of {} highstate outputs differ from Salt {}:\n{}",
        differences.len(),
        cases.len(),
        crate::common::salt::SALT_VERSION,
        differences.join("\n")
    );
}

#[test]
fn nodegroups_expand_as_salts_master() {
    let groups = json!({
        "web": "web* or G@role:web",
        "dbs": ["db1", "db2"],
        "nest": "N@web and not N@dbs",
        "deeper": ["N@nest", "or", "app*"],
        "rx": ["db(1|2)", "x"],
        "globs": ["web*", "db1"],
        "engines": ["G@os:Debian", "db1"],
        "self": "N@self or x",
        "loop1": "N@loop2 or a",
        "loop2": "N@loop1 and b",
        "number": 5,
    });
    let names: Vec<String> = groups
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .chain(["missing".to_string()])
        .collect();
    let compound = [
        "N@dbs or app*",
        "N@nest and E@.*",
        "N@missing or web1",
        "( N@web ) and not N@rx",
        "N@ or N@dbs",
        "web1   and   N@globs",
    ];
    let salt = oracle(
        "nodegroups",
        &json!({"groups": groups, "names": names, "compound": compound}),
    );
    let groups = groups.as_object().unwrap();
    for (name, expected) in names.iter().zip(salt["names"].as_array().unwrap()) {
        let ours = maid_salt::target::nodegroup_comp(name, groups);
        assert_eq!(json!(ours), *expected, "nodegroup {name}");
    }
    for (tgt, expected) in compound.iter().zip(salt["compound"].as_array().unwrap()) {
        let ours = maid_salt::target::resolve_compound(tgt, groups);
        assert_eq!(json!(ours), *expected, "compound {tgt:?}");
    }
}

/// `maid run`'s flags from Salt's `salt`: -N, --async, --show-jid,
/// --static, --hide-timeout, --preview-target, -l, and the message for a
/// target nothing matches.
#[tokio::test(flavor = "multi_thread")]
async fn salt_cli_flags_work_as_in_salt() {
    use crate::common::fleet::maid_cli;

    let redis = RedisServer::start();
    let bus = Bus::new(&redis.config()).unwrap();
    let _agents: Vec<_> = ["flag-a", "flag-b"]
        .iter()
        .map(|id| start_agent(&redis.config(), id, ""))
        .collect();
    wait_registered(&bus, &["flag-a", "flag-b"]).await;
    wait_subscribers(&bus, 2).await;
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("master.toml");
    std::fs::write(
        &config,
        "master_topics = [\"maid-test\"]\n[master.nodegroups]\nfirst = [\"flag-a\"]\nboth = \"N@first or flag-b\"\n",
    )
    .unwrap();
    let url = redis.url();
    let conf = config.to_str().unwrap();
    let run = |extra: &[&str]| {
        let mut argv = vec!["run", "-c", conf, "--master-topic", TOPIC, "-t", "10"];
        argv.extend(extra);
        let o = maid_cli(&url, &argv, tmp.path());
        (
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
            o.status.code(),
        )
    };

    // -N: the group's words, expanded by the master.
    let (out, _, code) = run(&["-N", "first", "test.ping"]);
    assert_eq!((out.as_str(), code), ("flag-a:\n    True\n", Some(0)));
    let (out, _, _) = run(&["-N", "both", "test.ping", "--static"]);
    assert_eq!(out, "flag-a:\n    True\nflag-b:\n    True\n");
    let (out, _, code) = run(&["-N", "nope", "test.ping"]);
    assert_eq!(
        (out.as_str(), code),
        (
            format!("Node group nope unavailable in {conf}\n").as_str(),
            Some(0)
        )
    );
    let (out, _, code) = run(&["-C", "N@first and flag-*", "test.ping"]);
    assert_eq!((out.as_str(), code), ("flag-a:\n    True\n", Some(0)));

    // --preview-target: whom it would run on, through the outputter.
    let (out, _, code) = run(&["--preview-target", "flag-*", "test.ping"]);
    assert_eq!((out.as_str(), code), ("- flag-a\n- flag-b\n", Some(0)));

    // sys.doc (and -d): each function's text once, as Salt's
    // `_print_docs` prints it, or through the outputter named.
    let (out, _, code) = run(&["--out", "json", "flag-*", "sys.doc", "test.ping"]);
    assert_eq!(code, Some(0), "{out}");
    let doc: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let text = doc["test.ping"].as_str().unwrap_or_else(|| panic!("{out}"));
    assert_eq!(doc.as_object().unwrap().len(), 1, "{out}");
    let printed = format!("test.ping:\n{text}\n\n");
    assert_eq!(run(&["-d", "flag-*", "test.ping"]).0, printed);
    assert_eq!(run(&["flag-a", "sys.doc", "test.ping"]).0, printed);

    // Nothing matched: Salt's words, nothing sent, exit 2.
    let (out, err, code) = run(&["nobody*", "test.ping"]);
    assert_eq!(
        (out.as_str(), err.as_str(), code),
        (
            "No minions matched the target. No command was sent, no jid was assigned.\n",
            "ERROR: No return received\n",
            Some(2)
        )
    );

    // --async: the jid at once; the returns land in the job cache.
    let (out, _, code) = run(&["--async", "flag-a", "test.ping"]);
    assert_eq!(code, Some(0));
    let jid = out
        .strip_prefix("Executed command with job ID: ")
        .and_then(|rest| rest.strip_suffix('\n'))
        .unwrap_or_else(|| panic!("{out:?}"))
        .to_string();
    assert_eq!(jid.len(), 20, "{jid}");
    let mut cached = String::new();
    for _ in 0..100 {
        let o = maid_cli(&url, &["job", &jid], tmp.path());
        cached = String::from_utf8_lossy(&o.stdout).into_owned();
        if !cached.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(cached, "flag-a:\n    True\n");

    // --show-jid: the jid first.
    let (out, _, _) = run(&["--show-jid", "flag-a", "test.ping"]);
    let (first, rest) = out.split_once('\n').unwrap();
    assert!(first.starts_with("jid: ") && first.len() == 25, "{out}");
    assert_eq!(rest, "flag-a:\n    True\n");

    // --static: one document when all are in; a failing retcode does not
    // decide the exit status.
    let (out, err, code) = run(&[
        "--static",
        "--out",
        "json",
        "flag-*",
        "test.retcode",
        "code=3",
    ]);
    let doc: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(doc, json!({"flag-a": true, "flag-b": true}));
    assert_eq!((err.as_str(), code), ("", Some(0)));
    let (_, err, code) = run(&["flag-*", "test.retcode", "code=3"]);
    assert_eq!(
        (err.as_str(), code),
        ("ERROR: Minions returned with non-zero exit code\n", Some(1))
    );

    // A registered maid that never answers: its row, and exit 1; with
    // --hide-timeout too, as salt 3008 (tests/salt_down.rs compares it).
    register_silent_maid(&bus, "flag-ghost").await;
    let short = |extra: &[&str]| {
        let mut argv = vec!["run", "-c", conf, "--master-topic", TOPIC, "-t", "2"];
        argv.extend(extra);
        let o = maid_cli(&url, &argv, tmp.path());
        (
            String::from_utf8_lossy(&o.stdout).into_owned(),
            o.status.code(),
        )
    };
    // Returns print as they arrive, in either order; missed rows last.
    let returned =
        |out: &str| out.contains("flag-a:\n    True\n") && out.contains("flag-b:\n    True\n");
    let (out, code) = short(&["flag-*", "test.ping"]);
    assert!(returned(&out), "{out}");
    assert!(
        out.ends_with("flag-ghost:\n    Minion did not return. [Not connected]\n"),
        "{out}"
    );
    assert_eq!((out.lines().count(), code), (6, Some(1)), "{out}");
    let (out, code) = short(&["--hide-timeout", "-l", "quiet", "flag-*", "test.ping"]);
    assert!(returned(&out), "{out}");
    assert!(
        out.ends_with("flag-ghost:\n    Minion did not return. [Not connected]\n"),
        "{out}"
    );
    assert_eq!((out.lines().count(), code), (6, Some(1)), "{out}");

    // -p: as `salt -p` with a minion that never answers (seen against Salt
    // 3008.4 by hand; tests/salt_cli.rs compares the rest): the summary
    // counts it; when none returns, Salt prints nothing at all.
    let (out, code) = short(&["-p", "-L", "flag-a,flag-ghost", "test.ping"]);
    assert_eq!(
        (out.as_str(), code),
        (
            "\n\n-------------------------------------------\nSummary\n\
             -------------------------------------------\n\
             # of minions targeted: 2\n# of minions returned: 1\n\
             # of minions that did not return: 1\n# of minions with errors: 0\n\
             -------------------------------------------\n",
            Some(0)
        )
    );
    assert_eq!(
        short(&["-p", "-L", "flag-ghost", "test.ping"]),
        (String::new(), Some(0))
    );
}
