//! The shape of the workspace, as `cargo metadata` reads it: the binary on
//! top, libraries beneath it, and the pure crates pure. A dependency that
//! turns the graph upside down fails here, in the change that adds it.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use serde_json::Value;

/// Each workspace package's normal (non-dev, non-build) dependencies.
fn dependencies() -> BTreeMap<String, BTreeSet<String>> {
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).unwrap();
    meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["kind"].is_null())
                .map(|d| d["name"].as_str().unwrap().to_string())
                .collect();
            (p["name"].as_str().unwrap().to_string(), deps)
        })
        .collect()
}

/// The binaries: the `maid` command and the benchmark. Everything else in
/// the host workspace is a library.
const BINARIES: &[&str] = &["maid", "maid-bench"];

#[test]
fn no_library_depends_on_the_binary() {
    let deps = dependencies();
    assert!(deps.contains_key("maid"), "the cli package is named maid");
    for (package, uses) in &deps {
        if BINARIES.contains(&package.as_str()) {
            continue;
        }
        assert!(
            !uses.contains("maid"),
            "{package} depends on the maid binary's crate (cli/)"
        );
    }
}

#[test]
fn the_agent_never_depends_on_the_master() {
    let deps = dependencies();
    let agent = &deps["maid-agent"];
    assert!(agent.contains("maid-protocol"), "{agent:?}");
    for banned in ["maid-master", "maid", "clap"] {
        assert!(!agent.contains(banned), "maid-agent depends on {banned}");
    }
    for lower in ["maid-protocol", "maid-salt", "maid-bus", "maid-config"] {
        for banned in ["maid-agent", "maid-master"] {
            assert!(!deps[lower].contains(banned), "{lower} depends on {banned}");
        }
    }
}

/// The wire contract and Salt's language are pure: no Redis, no
/// WebAssembly runtime, no HTTP, no command line.
#[test]
fn protocol_and_salt_are_pure() {
    let deps = dependencies();
    for pure in ["maid-protocol", "maid-salt"] {
        for banned in [
            "redis", "wasmtime", "axum", "reqwest", "tokio", "clap", "maid-bus",
        ] {
            assert!(!deps[pure].contains(banned), "{pure} depends on {banned}");
        }
    }
}

/// Only the agent runs plugins: one crate links wasmtime.
#[test]
fn only_the_agent_links_wasmtime() {
    let deps = dependencies();
    let linking: Vec<&String> = deps
        .iter()
        .filter(|(_, uses)| uses.contains("wasmtime"))
        .map(|(p, _)| p)
        .collect();
    assert_eq!(linking, ["maid-agent"]);
}

/// Libraries say precisely what failed (`thiserror`); `anyhow`, which
/// erases that, is for the binaries.
#[test]
fn no_library_uses_anyhow() {
    let deps = dependencies();
    for library in [
        "maid-protocol",
        "maid-salt",
        "maid-bus",
        "maid-config",
        "maid-agent",
        "maid-master",
    ] {
        assert!(
            !deps[library].contains("anyhow"),
            "{library} depends on anyhow"
        );
    }
}
