//! The shape of the workspace, as `cargo metadata` reads it: the binary on
//! top, libraries beneath it, and the pure crates pure. A dependency that
//! turns the graph upside down fails here, in the change that adds it.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

/// Each workspace package's normal (non-dev, non-build) dependencies,
/// read once for every test here.
fn dependencies() -> &'static BTreeMap<String, BTreeSet<String>> {
    static DEPENDENCIES: OnceLock<BTreeMap<String, BTreeSet<String>>> = OnceLock::new();
    DEPENDENCIES.get_or_init(read_dependencies)
}

fn read_dependencies() -> BTreeMap<String, BTreeSet<String>> {
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
    for (package, uses) in deps {
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

/// A library's public functions fail with an error type that says what
/// went wrong, never a bare `String` a caller can only print.
#[test]
fn no_public_library_function_fails_with_a_string() {
    let root = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let libraries = ["protocol", "salt", "bus", "config", "agent", "master"].map(|l| root.join(l));
    let mut found = vec![];
    for path in sources() {
        if !libraries.iter().any(|l| path.starts_with(l)) {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let text = text.split("#[cfg(test)]").next().unwrap_or_default();
        found.extend(
            string_errors(text)
                .into_iter()
                .map(|f| format!("{}: {f}", path.display())),
        );
    }
    assert!(found.is_empty(), "{found:#?}");
}

/// The public functions of `text` whose signature returns
/// `Result<_, String>`.
fn string_errors(text: &str) -> Vec<String> {
    let mut found = vec![];
    for (at, _) in text
        .match_indices("pub fn ")
        .chain(text.match_indices("pub async fn "))
    {
        let signature = &text[at..];
        let end = signature.find(['{', ';']).unwrap_or(signature.len());
        let signature: String = signature[..end]
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let returns = signature.split(" where ").next().unwrap_or_default().trim();
        if returns.ends_with(", String>") {
            found.push(signature);
        }
    }
    found
}

#[test]
fn the_string_error_check_reads_signatures_across_lines() {
    let text = "pub fn a(x: u8)\n    -> Result<(), String> {\n}\n\
                pub async fn b() -> Result<u8, Error> {}\nfn c() -> Result<(), String> {}\n\
                pub fn d() -> Result<Vec<String>, E> {}\n\
                pub fn e() -> Result<BTreeMap<String, String>, E> {}\n";
    assert_eq!(
        string_errors(text),
        ["pub fn a(x: u8) -> Result<(), String>"]
    );
}

/// The source files of the workspace's crates (each `src/` tree of the
/// host crates, the SDK, its macros and the plugins), tests excluded.
fn sources() -> Vec<std::path::PathBuf> {
    let root = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let mut crates = vec![];
    for top in [
        "protocol",
        "salt",
        "bus",
        "config",
        "agent",
        "master",
        "cli",
        "sdk",
        "sdk/macros",
        "testkit",
        "bench",
    ] {
        crates.push(root.join(top));
    }
    for plugin in std::fs::read_dir(root.join("plugins")).unwrap().flatten() {
        crates.push(plugin.path());
    }
    let mut files = vec![];
    let mut dirs: Vec<_> = crates.iter().map(|c| c.join("src")).collect();
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for path in entries.flatten().map(|e| e.path()) {
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files
}

/// The functions of `text` (before its `#[cfg(test)]` module) longer than
/// `max` lines, by name: from `fn` to the `}` at its own indentation.
fn long_functions(text: &str, max: usize) -> Vec<(String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let end = lines
        .iter()
        .position(|l| l.starts_with("#[cfg(test)]"))
        .unwrap_or(lines.len());
    let mut long = vec![];
    for (i, line) in lines[..end].iter().enumerate() {
        let body = line.trim_start();
        let indent = &line[..line.len() - body.len()];
        let Some(name) = body
            .split("fn ")
            .nth(1)
            .filter(|_| {
                body.starts_with("fn ")
                    || body.starts_with("pub ")
                    || body.starts_with("pub(")
                    || body.starts_with("async ")
                    || body.starts_with("const ")
            })
            .and_then(|rest| rest.split(['(', '<']).next())
        else {
            continue;
        };
        // A declaration (in a trait) ends in `;` before any `{`.
        let opens = lines[i..end]
            .iter()
            .find(|l| l.contains('{') || l.trim_end().ends_with(';'));
        if opens.is_none_or(|l| !l.contains('{')) {
            continue;
        }
        let close = format!("{indent}}}");
        let length = lines[i..end]
            .iter()
            .position(|l| l.trim_end() == close)
            .map_or(end - i, |n| n + 1);
        if length > max {
            long.push((name.to_string(), length));
        }
    }
    long
}

/// Files a reader takes in at once: none over 900 lines, no function over
/// 100 (tests aside).
#[test]
fn no_source_file_over_900_lines_nor_function_over_100() {
    let mut over = vec![];
    for path in sources() {
        let text = std::fs::read_to_string(&path).unwrap();
        let lines = text.lines().count();
        if lines > 900 {
            over.push(format!("{}: {lines} lines", path.display()));
        }
        for (name, length) in long_functions(&text, 100) {
            over.push(format!("{}: fn {name} is {length} lines", path.display()));
        }
    }
    assert!(over.is_empty(), "too long:\n{}", over.join("\n"));
}

#[test]
fn the_length_check_finds_long_functions_and_skips_declarations() {
    let body = "    x();\n".repeat(101);
    let text = format!(
        "trait T {{\n    fn declared(&self)\n    -> u8;\n}}\n\npub async fn long() {{\n{body}}}\n\
         fn short() {{\n}}\n#[cfg(test)]\nmod tests {{\n    fn in_tests() {{\n{body}    }}\n}}\n"
    );
    assert_eq!(long_functions(&text, 100), [("long".to_string(), 103)]);
}
