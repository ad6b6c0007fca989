//! The `pillar` module as Salt 3008.4 answers it: each call below runs
//! through a master and a maid (`maid run`, the pillar compiled from the
//! master's `pillar_roots` and delivered sealed) and through Salt's own
//! module as `salt-call --local` runs it, over the same pillar tree, and
//! the returns must be equal (a raised exception: its class and message).

use serde_json::{Value, json};

use crate::common::fleet::wait_registered;
use crate::pillar_delivery::{Master, agent, master_with, write};
use maid_bus::Bus;
use maid_testkit::redis::RedisServer;

const DATA: &str = "\
app:
  name: web
  port: 8080
  tags: [a, b]
  opts:
    debug: false
    level: 3
users:
  - name: alice
    uid: 1000
  - name: bob
    uid: 1001
flag: true
nothing: null
ratio: 1.5
";

/// Each call's words, as `salt-call` and `maid run` read them.
const CALLS: &[&[&str]] = &[
    &["pillar.get", "app:port"],
    &["pillar.get", "app:port", "unmask=True"],
    &["pillar.get", "app:opts", "unmask=True"],
    &["pillar.get", "app:missing", "default=42"],
    &["pillar.get", "app:missing"],
    &["pillar.get", "users:0:name"],
    &["pillar.get", "users:-1:uid"],
    &["pillar.get", "users:name"],
    &["pillar.get", "app/opts/level", "delimiter=/"],
    &[
        "pillar.get",
        "app:opts",
        "default={\"extra\": 1, \"level\": 0}",
        "merge=True",
    ],
    &[
        "pillar.get",
        "app:tags",
        "default=[\"z\", \"a\"]",
        "merge=True",
    ],
    &["pillar.get", "app:name", "default=[\"x\"]", "merge=True"],
    &["pillar.get", "nothing", "default=5"],
    &["pillar.get", "ratio"],
    &["pillar.fetch", "app:name"],
    &["pillar.item", "app:port", "flag"],
    &["pillar.item", "app:port", "flag", "unmask=True"],
    &["pillar.item", "app:missing", "default=zz"],
    &["pillar.item", "app/port", "delimiter=/"],
    &["pillar.items"],
    &["pillar.items", "unmask=True"],
    &["pillar.items", "app", "unmask=True"],
    &["pillar.items", "app", "flag"],
    &["pillar.data"],
    &["pillar.raw"],
    &["pillar.raw", "app"],
    &["pillar.raw", "app", "unmask=False"],
    &["pillar.raw", "nope"],
    &["pillar.ls"],
    &["pillar.keys", "app"],
    &["pillar.keys", "app:opts"],
    &["pillar.keys", "nope"],
    &["pillar.keys", "app:port"],
    &["pillar.obfuscate"],
    &["pillar.obfuscate", "app"],
    &["pillar.obfuscate", "unmask=True"],
];

/// What maid returned, in the oracle's terms: a raised exception's
/// return (`…\nKeyError: 'msg'\n`) as its class and message.
fn as_salt(ret: &Value) -> Value {
    const RAISED: &str = "The minion function caused an exception: ";
    match ret.as_str().and_then(|s| s.strip_prefix(RAISED)) {
        Some(trace) => {
            let last = trace.trim_end().lines().last().unwrap_or_default();
            let (class, message) = last.split_once(": ").unwrap_or((last, ""));
            json!({"error": class, "message": message})
        }
        None => json!({"return": ret}),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pillar_functions_answer_as_salts_module_answers() {
    let server = RedisServer::start();
    let bus = Bus::new(&server.config()).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let files = [
        ("top.sls", "base:\n  '*':\n    - data\n"),
        ("data.sls", DATA),
    ];
    master_with(dir, &server.url(), &files);
    let master = Master {
        url: server.url(),
        dir,
    };
    let _agent = agent(&server, dir, "pf-one", true);
    wait_registered(&bus, &["pf-one"]).await;
    let (code, _, err) = master.run(&["key", "-A", "-y"]);
    assert_eq!(code, 0, "{err}");

    // Salt's side: its own pillar_roots, the same files.
    let salt_root = dir.join("salt-pillar");
    write(&salt_root, &files);
    let salt = crate::common::salt::oracle(
        "modules",
        &json!({
            "id": "pf-one",
            "grains": {"id": "pf-one", "role": "pf-one"},
            "pillar_roots": {"base": [salt_root]},
            "calls": CALLS,
        }),
    );
    let salt = salt.as_array().expect("the oracle answers a list");
    let mut differ = Vec::new();
    for (words, salt) in CALLS.iter().zip(salt) {
        let mut args = vec!["run", "pf-one"];
        args.extend_from_slice(words);
        let maid = as_salt(&master.json(&args)["pf-one"]);
        let mut salt = salt.clone();
        salt.as_object_mut().unwrap().remove("retcode");
        if maid != salt {
            differ.push(format!("{words:?}:\n  salt: {salt}\n  maid: {maid}"));
        }
    }
    assert!(
        differ.is_empty(),
        "{} of {} calls differ from Salt's:\n{}",
        differ.len(),
        CALLS.len(),
        differ.join("\n")
    );
}
