//! `maid-bench run` runs to completion on a tiny setting and prints every row
//! of its tables. Timing is never asserted here: numbers belong in
//! BENCHMARKS.md, not in the test suite.

use std::process::Command;

use maid_bus::Bus;
use maid_protocol::protocol::Reply;
use maid_testkit::redis::RedisServer;
use maid_testkit::wire::{self, TOPIC, raw_round_trip};
use serde_json::{Value, json};

/// The seed needs redis-py; the test never installs anything, so it runs
/// the seed only when `import redis` already works.
fn redis_py_available() -> bool {
    Command::new("python3")
        .args(["-c", "import redis"])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn bench_runs_every_scenario_on_a_tiny_setting() {
    let seed = redis_py_available();
    // The maid measured is the one `cargo test` built beside this binary
    // (the workspace's tests build every binary before running any).
    let bench = std::path::Path::new(env!("CARGO_BIN_EXE_maid-bench"));
    let maid = bench.with_file_name("maid");
    assert!(
        maid.is_file(),
        "{} is missing: run the whole suite (`./dev test`), or build it first \
         (`cargo build --profile test-release -p maid`)",
        maid.display()
    );
    let mut cmd = Command::new(bench);
    cmd.args(["run", "--tiny", "--agents", "20", "--maid"])
        .arg(&maid)
        .env("MAID_PLUGIN_DIR", maid_test_guests::PLUGINS_DIR)
        .env_remove("MAID_CONFIG")
        .env("MAID_LOG", "maid=warn");
    if !seed {
        cmd.arg("--no-seed");
    }
    let out = cmd.output().expect("run maid bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "maid-bench run --tiny failed ({}):\n{stderr}\n{stdout}",
        out.status
    );
    // Start-up loads every shipped plugin.
    let plugins = std::fs::read_dir(maid_test_guests::PLUGINS_DIR)
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "wasm"))
        .count();
    let cold =
        format!("start-up to ready, cold cache, plugins compiled ahead, {plugins} plugins (1)");
    let compiling =
        format!("start-up to ready, cold cache, compiling every plugin, {plugins} plugins (1)");
    let warm = format!("start-up to ready, warm cache, {plugins} plugins (1)");
    let compiled = format!("`maid plugin compile`: {plugins} plugins compiled ahead");
    for row in [
        "round trip p50",
        "round trip p99",
        "publish → PING p50",
        "throughput, 64 in flight, jobs/s",
        "CPU per job",
        "master's CPU per job (this process)",
        "RSS idle (started)",
        "RSS peak, 64 in flight",
        "cmd.run 'true' round trip − spawning `true` (p50s)",
        "cmd.run 'true' − test.ping round trip − spawning `true` (p50s)",
        cold.as_str(),
        compiling.as_str(),
        warm.as_str(),
        compiled.as_str(),
        "RSS once ready, cold cache, plugins compiled ahead",
        "RSS once ready, cold cache, compiling every plugin",
        "RSS once ready, warm cache",
        "RSS once ready: compiling every plugin / warm cache (p50s)",
        "fan-out to 20 agents: publish → every PING",
        "fan-out to 20 raw responders in one process, the floor (2 rounds)",
        "fan-out: maid p50 / raw p50",
        "raw fan-out CPU per round: raw responders' process",
        "fan-out to 20 raw responders sending what the protocol asks (2 rounds)",
        "fan-out: maid p50 / protocol raw p50",
        "protocol raw fan-out CPU per round: responders' process",
        "Fan-out rounds against this machine",
        "20 × maid agents (bench-fleet)",
        "test.ping through the plugin runtime, in-process (20)",
    ] {
        assert!(stdout.contains(row), "no row {row:?} in:\n{stdout}");
    }
    // The goals: exactly these eleven, each measured in this run, with its
    // bound and whether it was met (the Markdown copy, so cells split).
    let goals = [
        ("maid p50 / raw p50 (round trip)", "≤ 1.3"),
        ("maid throughput / raw throughput", "≥ 0.5"),
        ("seed p50 / maid p50 (round trip)", "≥ 30"),
        (
            "fan-out to 20 agents: maid p50 / protocol floor p50 (no maid code)",
            "≤ 1.2",
        ),
        (
            "cmd.run's own share: cmd.run 'true' − test.ping round trip − spawning `true`, p50s",
            "≤ 100 µs",
        ),
        (
            "audit on (file and stream): audited maid throughput / maid throughput",
            "≥ 0.85",
        ),
        (
            "signed jobs and replies: signed maid p50 / maid p50 (round trip)",
            "≤ 1.2",
        ),
        (
            "signed jobs and replies: maid throughput / signed maid throughput",
            "≤ 1.2",
        ),
        (
            "start-up to ready: cold cache, plugins compiled ahead / warm cache (p50s)",
            "≤ 10",
        ),
        (
            "idle RSS after a cold start, plugins compiled ahead / after a warm start (p50s)",
            "≤ 1.5",
        ),
        ("maid idle RSS", "≤ 20 MB"),
    ];
    let table: Vec<Vec<&str>> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("**Goals"))
        .skip(4)
        .take_while(|l| l.starts_with('|'))
        .map(|l| l.split('|').map(str::trim).collect())
        .collect();
    assert_eq!(
        table.iter().map(|cells| cells[1]).collect::<Vec<_>>(),
        goals.map(|(goal, _)| goal),
        "the Goals table in:\n{stdout}"
    );
    for (cells, (goal, bound)) in table.iter().zip(goals) {
        // | goal | measured | bound | result |
        assert_eq!(cells[3], bound, "{goal}: {cells:?}");
        let seed_goal = goal.starts_with("seed");
        if seed || !seed_goal {
            assert_ne!(cells[2], "n/a", "{goal} not measured: {cells:?}");
            assert!(["met", "MISSED"].contains(&cells[4]), "{goal}: {cells:?}");
        } else {
            assert_eq!(cells[2..5], ["n/a", bound, "n/a"], "{goal}: {cells:?}");
        }
    }
    // The same tables again, in Markdown.
    assert!(stdout.contains("Markdown (for BENCHMARKS.md):"), "{stdout}");
    assert!(stdout.contains("| round trip p50 |"), "{stdout}");
    assert!(stdout.contains("|---|---:|---:|---:|"), "{stdout}");
    let round_trips = stdout
        .lines()
        .find(|l| l.starts_with("| round trip p50 |"))
        .unwrap();
    let cells: Vec<&str> = round_trips.split('|').map(str::trim).collect();
    // | label | raw | protocol floor | maid | maid, audit on | maid, signed | seed |
    assert_ne!(cells[2], "n/a", "raw measured nothing: {round_trips}");
    assert_ne!(
        cells[3], "n/a",
        "the protocol floor measured nothing: {round_trips}"
    );
    assert_ne!(cells[4], "n/a", "maid measured nothing: {round_trips}");
    assert_ne!(
        cells[5], "n/a",
        "audited maid measured nothing: {round_trips}"
    );
    // Measured only if each of its jobs went signed, and each of its
    // replies came back signed (the bench fails otherwise).
    assert_ne!(
        cells[6], "n/a",
        "signed maid measured nothing: {round_trips}"
    );
    // maid against the protocol floor: each ratio of times measured (CPU
    // per job, in clock ticks, can be none at all in a run this small).
    for (label, measured) in [
        ("round trip: protocol floor p50 / raw p50", true),
        ("round trip: maid p50 / protocol floor p50", true),
        ("throughput: protocol floor / raw", true),
        ("throughput: maid / protocol floor", true),
        ("CPU per job: protocol floor / raw", false),
        ("CPU per job: maid / protocol floor", false),
    ] {
        let row = stdout
            .lines()
            .find(|l| l.starts_with(&format!("| {label} |")))
            .unwrap_or_else(|| panic!("no row {label:?} in:\n{stdout}"));
        if measured {
            assert_ne!(row.split('|').nth(2).map(str::trim), Some("n/a"), "{row}");
        }
    }
    // Every fan-out came back: maid's, the raw floor and the protocol's.
    for ratio in ["raw", "protocol raw"] {
        let fan_out = stdout
            .lines()
            .find(|l| l.starts_with(&format!("| fan-out: maid p50 / {ratio} p50 |")))
            .unwrap();
        assert_ne!(
            fan_out.split('|').nth(2).map(str::trim),
            Some("n/a"),
            "{fan_out}"
        );
    }
    if seed {
        assert_ne!(cells[7], "n/a", "seed measured nothing: {round_trips}");
    } else {
        assert_eq!(cells[7], "n/a", "{round_trips}");
    }
}

/// The bench's protocol floor (`maid-bench raw --protocol`) sends what a
/// maid sends for a job: a PING, then the return, stored in the job cache
/// too. Otherwise the fan-out it stands beside would compare maid with a
/// responder that does less than the protocol asks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bench_protocol_floor_sends_what_a_maid_sends() {
    let server = RedisServer::start();
    let redis = server.config();
    let bus = Bus::new(&redis).unwrap();
    let mut floor = std::process::Command::new(env!("CARGO_BIN_EXE_maid-bench"))
        .args(["raw", "--redis", &server.url(), "--topic", TOPIC])
        .args(["--id", "floor-", "--count", "2", "--protocol"])
        .spawn()
        .expect("start maid-bench raw");
    wire::wait_subscribers(&bus, 2).await;

    let jid = "20261123000000000001";
    let replies = raw_round_trip(
        &bus,
        "reply-floor",
        &json!({"jid": jid, "tempTopic": "reply-floor", "fun": "test.ping",
                "arg": [], "kwarg": {}, "tgt": "*"})
        .to_string(),
        4,
    )
    .await;
    let _ = floor.kill();
    let _ = floor.wait();
    for id in ["floor-0", "floor-1"] {
        let theirs: Vec<&Reply> = replies
            .iter()
            .filter(|r| match r {
                Reply::Ping(p) => p.sub_ip == id,
                Reply::Return(r) => r.sub_ip == id,
                _ => false,
            })
            .collect();
        assert!(
            matches!(theirs.as_slice(), [Reply::Ping(_), Reply::Return(_)]),
            "{id}: {replies:?}"
        );
    }
    let mut cached: Vec<(String, Value)> = wire::cached_returns(&bus, jid, 2)
        .await
        .into_iter()
        .map(|r| (r.id, r.ret))
        .collect();
    cached.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        cached,
        [
            ("floor-0".into(), json!(true)),
            ("floor-1".into(), json!(true))
        ]
    );
}

/// `maid-bench soak` on a small setting: every job published while Redis was up
/// gets its return (on the reply topic or in the job cache) across two
/// Redis restarts, with the right value, and the command says so. The full
/// run and its numbers are in docs/reliability.md.
#[test]
fn soak_loses_nothing_across_redis_restarts() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_maid-bench"))
        .args(["soak", "--agents", "4", "--jobs", "600", "--restarts", "2"])
        .args(["--outage-secs", "0.5", "--in-flight", "32", "--no-cache"])
        .env("MAID_PLUGIN_DIR", maid_test_guests::PLUGINS_DIR)
        .env_remove("MAID_CONFIG")
        .env("MAID_LOG", "maid=error")
        .output()
        .expect("run maid-bench soak");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "maid-bench soak failed ({}):\n{stderr}\n{stdout}",
        out.status
    );
    let figure = |name: &str| -> u64 {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name:?} in:\n{stdout}"));
        line[name.len()..].trim().parse().unwrap()
    };
    assert_eq!(figure("jobs published"), 600, "{stdout}");
    assert_eq!(
        figure("returns on the reply topics") + figure("returns found only in the job cache"),
        600,
        "{stdout}"
    );
    assert_eq!(figure("lost"), 0, "{stdout}");
    assert_eq!(figure("wrong returns"), 0, "{stdout}");
    assert_eq!(figure("reply subscription re-made"), 2, "{stdout}");
}

/// `maid-bench syndic` on a tiny setting: every fleet, flat and behind
/// syndic maids, returns every minion, and the tables and the goal row are
/// printed (no timing is asserted).
#[test]
fn syndic_bench_loses_nothing_on_a_tiny_setting() {
    let bench = std::path::Path::new(env!("CARGO_BIN_EXE_maid-bench"));
    let out = std::process::Command::new(bench)
        .args(["syndic", "--flat", "20", "--syndics", "2", "--big", "40"])
        .args(["--rounds", "2", "--maid"])
        .arg(bench.with_file_name("maid"))
        .env("MAID_PLUGIN_DIR", maid_test_guests::PLUGINS_DIR)
        .env_remove("MAID_CONFIG")
        .env("MAID_LOG", "maid=error")
        .output()
        .expect("run maid-bench syndic");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "maid-bench syndic failed ({}):\n{stderr}\n{stdout}",
        out.status
    );
    for (fleet, minions) in [
        ("flat, 20 maids", "20"),
        ("tiered, 20 maids behind 2 syndic maids", "22"),
        ("tiered, 40 maids behind 2 syndic maids", "42"),
    ] {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(fleet))
            .unwrap_or_else(|| panic!("no {fleet:?} row in:\n{stdout}"));
        let cells: Vec<&str> = line[fleet.len()..].split_whitespace().collect();
        assert_eq!(cells.first(), Some(&minions), "{line}");
        assert_eq!(cells.last(), Some(&"0"), "lost, in {line}");
    }
    assert!(
        stdout.contains("tiered (--big) expected set known / flat fleet pinged, p50"),
        "{stdout}"
    );
}

/// `maid-bench states` applies a small highstate through maid and through
/// Salt (the suite's venv), checks each answer (every state passed, all
/// changed then none) and prints its one table with both goals. Timing is
/// not asserted.
#[test]
fn the_states_bench_runs_a_small_highstate_on_both_sides() {
    let venv = std::env::var_os("MAID_SALT_VENV")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/salt-venv")
        });
    assert!(
        venv.join("bin/salt-call").is_file(),
        "no Salt in {}: `./dev test` installs it",
        venv.display()
    );
    let bench = std::path::Path::new(env!("CARGO_BIN_EXE_maid-bench"));
    let out = Command::new(bench)
        .args(["states", "--states", "7", "--rounds", "1", "--maid"])
        .arg(bench.with_file_name("maid"))
        .arg("--salt-venv")
        .arg(&venv)
        .env("MAID_PLUGIN_DIR", maid_test_guests::PLUGINS_DIR)
        .output()
        .expect("run maid-bench states");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "maid-bench states failed ({}):\n{}\n{stdout}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    for row in ["first (every change made)", "second (nothing to do)"] {
        let line = stdout.lines().find(|l| l.starts_with(row));
        let line = line.unwrap_or_else(|| panic!("no row {row:?} in:\n{stdout}"));
        assert!(line.ends_with("met") || line.ends_with("MISSED"), "{line}");
    }
    let floor = "the 2 `unless` shells alone (the floor)";
    assert!(stdout.contains(floor), "no row {floor:?} in:\n{stdout}");
}
