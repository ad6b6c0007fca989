//! Build every guest (the shipped plugins and the test fixtures) for
//! `wasm32-wasip2` with a nested cargo, as wasmtime's test-programs do, and
//! generate constants with their paths.
//!
//! The nested build uses its own target directory (`target/guests`), so it
//! never waits on the lock of the build that runs this script, and the
//! `guest` profile, the same one `./dev build` uses, so the two share
//! artifacts.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Shipped plugins: every `plugins/<module>/` with a `Cargo.toml`, whose
/// package is `maid-mod-<module>` (as `./dev` finds them).
fn plugins(root: &Path) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = std::fs::read_dir(root.join("plugins"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("Cargo.toml").is_file())
        .filter_map(|e| e.file_name().into_string().ok())
        .map(|module| (format!("maid-mod-{module}"), module))
        .collect();
    out.sort();
    out
}

/// Test-only plugins: package name -> module name.
const FIXTURES: &[(&str, &str)] = &[
    ("maid-fixture-hostile", "hostile"),
    ("maid-fixture-older-wit", "older"),
    ("maid-fixture-sockets", "sockets"),
];

fn owned(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(p, m)| (p.to_string(), m.to_string()))
        .collect()
}

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest_dir.join("../..").canonicalize().unwrap();
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    let target = env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let guest_target = target.join("guests");

    for dir in ["wit", "sdk", "plugins", "tests/fixtures", "Cargo.lock"] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }

    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&root)
        .args(["build", "--profile", "guest", "--target", "wasm32-wasip2"])
        .arg("--target-dir")
        .arg(&guest_target)
        // Host flags are not for the guest target.
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_TARGET_DIR");
    let plugins = plugins(&root);
    let fixtures = owned(FIXTURES);
    for (package, _) in plugins.iter().chain(&fixtures) {
        cmd.args(["-p", package]);
    }
    let status = cmd.status().expect("run cargo for the guests");
    if !status.success() {
        panic!(
            "building the wasm32-wasip2 guests failed; is the target installed? \
             Run `rustup target add wasm32-wasip2` (./dev test does it for you)"
        );
    }

    let built = guest_target.join("wasm32-wasip2/guest");
    let mut consts = String::new();
    for (group, list) in [("plugins", &plugins), ("fixtures", &fixtures)] {
        let dir = out.join(group);
        std::fs::create_dir_all(&dir).unwrap();
        for (package, module) in list {
            let from = built.join(format!("{}.wasm", package.replace('-', "_")));
            let to = dir.join(format!("{module}.wasm"));
            copy(&from, &to);
            consts.push_str(&format!(
                "/// `{module}.wasm` built from `{package}`.\npub const {}_{}: &str = {:?};\n",
                group.to_uppercase().trim_end_matches('S'),
                module.to_uppercase(),
                to.display().to_string()
            ));
        }
        consts.push_str(&format!(
            "/// The directory holding every {group} `.wasm`.\npub const {}_DIR: &str = {:?};\n",
            group.to_uppercase(),
            dir.display().to_string()
        ));
    }
    std::fs::write(out.join("guests.rs"), consts).unwrap();
}

fn copy(from: &Path, to: &Path) {
    std::fs::copy(from, to)
        .unwrap_or_else(|e| panic!("copy {} -> {}: {e}", from.display(), to.display()));
}
