//! Pillar on a real Salt 3008.4 master with two minions against maid's
//! master with two maids of the same ids: the same `pillar_roots`, the
//! same command lines (`pillar.*`, `-I`, `-J`, `I@`, inline `pillar=`, a
//! state that reads pillar), the same stdout and exit code expected.

use std::path::PathBuf;

use maid_bus::Bus;

use crate::common::fleet::{TOPIC, maid_cli, start_agent, wait_registered};
use crate::common::redis::RedisServer;
use crate::common::salt::RealSalt;
use crate::pillar_delivery::write;
use crate::salt_cli::{Printed, command, masked, printed, salt, timeless};

const MINIONS: [&str; 2] = ["m1", "m2"];

const PILLAR: &[(&str, &str)] = &[
    (
        "top.sls",
        "base:\n  '*':\n    - common\n  m1:\n    - web\n  m2:\n    - db\n",
    ),
    ("common.sls", "site: lab\nusers:\n  alice: 1000\n"),
    (
        "web.sls",
        "role: web\ndb:\n  tier: front\nsecret: web-s3cret\nusers:\n  bob: 1001\n",
    ),
    (
        "db.sls",
        "include:\n  - common\nrole: db\ndb:\n  tier: back\n  port: 5432\nsecret: db-s3cret\n",
    ),
];

/// A state that reads pillar, in SLS and in its template.
const STATE: &str = "show_role:\n  test.succeed_without_changes:\n    \
    - name: {{ pillar['role'] }} at {{ salt['pillar.get']('db:tier', 'none') }}\n";

/// The command lines; all lines of an output may come in any order
/// (returns are printed as they arrive).
fn corpus() -> Vec<Vec<&'static str>> {
    vec![
        vec!["*", "pillar.items"],
        vec!["-L", "m1", "pillar.get", "db:tier"],
        vec!["*", "pillar.items", "unmask=True"],
        vec!["-L", "m2", "pillar.get", "db", "unmask=True"],
        vec!["*", "pillar.item", "role", "db:port", "default=none"],
        vec!["-I", "role:web", "test.ping"],
        vec!["-J", "db:tier:b.*", "test.ping"],
        vec!["-C", "I@role:db or m1", "test.ping"],
        vec!["-C", "I@role:nobody", "test.ping"],
        vec![
            "-L",
            "m1",
            "pillar.items",
            "pillar={\"site\": \"inline\", \"extra\": [1]}",
        ],
        vec!["--out", "json", "-L", "m2", "pillar.obfuscate"],
        vec!["-L", "m2", "pillar.keys", "db"],
        vec!["*", "state.apply", "pilltest"],
        vec![
            "-L",
            "m1",
            "state.apply",
            "pilltest",
            "pillar={\"role\": \"inline\"}",
        ],
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn salt_and_maid_deliver_and_target_pillar_alike() {
    let salt_fleet = tokio::task::spawn_blocking(|| RealSalt::start(&MINIONS, false, "alice"))
        .await
        .unwrap();
    let config_dir: PathBuf = salt_fleet.master_config_dir.clone();
    let pillar_root = config_dir.join("srv/pillar");
    let file_root = config_dir.join("srv/salt");
    write(&pillar_root, PILLAR);
    write(&file_root, &[("pilltest/init.sls", STATE)]);
    // Salt's master targets on the pillar it cached at the minions' last
    // refresh: refreshed once the files are there.
    let (_, err, code) = salt(
        "salt",
        &config_dir,
        &[
            "*".into(),
            "saltutil.refresh_pillar".into(),
            "wait=True".into(),
        ],
        false,
    );
    assert_eq!(code, 0, "{err}");

    let redis = RedisServer::start();
    let bus = Bus::new(&redis.config()).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let o = maid_cli(
        &redis.url(),
        &["keygen", dir.join("master").to_str().unwrap()],
        dir,
    );
    assert!(o.status.success(), "{o:?}");
    let master_toml = dir.join("master.toml");
    std::fs::write(
        &master_toml,
        format!(
            "master_topics = [\"{TOPIC}\"]\n[master]\nkey = {:?}\npki_dir = {:?}\n\
             pillar_roots = [{pillar_root:?}]\nfile_roots = [{file_root:?}]\n",
            dir.join("master.key"),
            dir.join("pki"),
        ),
    )
    .unwrap();
    let public = dir.join("master.pub");
    let _agents: Vec<_> = MINIONS
        .iter()
        .map(|id| {
            let state = dir.join(format!("state-{id}"));
            let toml = format!(
                "[plugins.pillar]\npillar = true\n\
                 [plugins.state]\nfetch = [\"salt://**\"]\npillar = true\n\
                 call = [\"test.*\", \"pillar.*\"]\n\
                 [security]\nrequire_signed = true\ntrusted_keys = [{public:?}]\n\
                 state_dir = {state:?}\n"
            );
            start_agent(&redis.config(), id, &toml)
        })
        .collect();
    wait_registered(&bus, &MINIONS).await;
    let maid = |args: &[&str]| -> Printed {
        let mut argv: Vec<String> = vec![env!("CARGO_BIN_EXE_maid").into()];
        argv.extend(args.iter().map(|a| a.to_string()));
        argv.extend(["-c".to_string(), master_toml.display().to_string()]);
        printed(
            command(&argv, false)
                .current_dir(dir)
                .env("MAID_REDIS", redis.url())
                .env_remove("MAID_CONFIG")
                .output()
                .expect("run maid"),
        )
    };
    let (_, err, code) = maid(&["key", "-A", "-y"][..]);
    assert_eq!(code, 0, "{err}");

    let mut differences = Vec::new();
    let mut transcript = String::new();
    for args in corpus() {
        let words: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let (cd, w) = (config_dir.clone(), words.clone());
        let s = tokio::task::spawn_blocking(move || salt("salt", &cd, &w, false))
            .await
            .unwrap();
        let mut run = vec!["run"];
        run.extend(args.iter().copied());
        let m = maid(&run[..]);
        transcript.push_str(&format!(
            "$ salt {}\n--- salt (exit {}):\n{}--- maid run (exit {}):\n{}\n",
            args.join(" "),
            s.2,
            s.0,
            m.2,
            m.0
        ));
        let norm = |p: &Printed| {
            let mut lines: Vec<String> = masked(&p.0).lines().map(timeless).collect();
            lines.sort();
            (lines, p.2)
        };
        if norm(&s) != norm(&m) {
            differences.push(format!(
                "salt {}\n--- salt (exit {}):\n{:?}\n--- maid run (exit {}):\n{:?}",
                args.join(" "),
                s.2,
                s.0,
                m.2,
                m.0
            ));
        }
    }
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("salt-pillar-transcript.txt");
    std::fs::write(&path, &transcript).unwrap();
    // Real answers, not the same failure twice.
    assert!(transcript.contains("db-s3cret"), "{transcript}");
    assert!(transcript.contains("**********"), "{transcript}");
    assert!(transcript.contains("Name: web at front"), "{transcript}");
    assert!(transcript.contains("Name: inline at front"), "{transcript}");
    assert!(
        differences.is_empty(),
        "{} of {} command lines differ from Salt's (transcript: {}):\n\n{}",
        differences.len(),
        corpus().len(),
        path.display(),
        differences.join("\n\n")
    );
}
