//! Salt's environments, against Salt 3008.4's state module: `file_roots`
//! with `base`, `dev` and `prod` (`tests/state_envs/`), each with its own
//! top file. Salt merges the top files (`base` authoritative, another
//! environment's top counting only for its own section and only where
//! `base` did not name it), renders each SLS in its own environment
//! (`saltenv` in Jinja, `salt://` sources and imports from there unless a
//! URL names its own `?saltenv=`), resolves `{env: sls}` includes, and
//! lists each environment's files apart. Both sides run the same words in
//! the same order, each in a copy of its own.

use std::path::Path;

use serde_json::{Value, json};

use crate::common::guests;
use crate::common::salt::oracle;
use crate::states::{agree, answer_of, copy_dir, differs};

const ENVS: [&str; 3] = ["base", "dev", "prod"];

/// A copy of the environments under `root/srv/ENV`, with `@ROOT@` naming
/// `root`.
fn copy_envs(root: &Path) {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/state_envs");
    copy_dir(&from, &root.join("srv"), &root.display().to_string());
}

/// maid's config for `root`: the three environments, and grants enough
/// for the states to write under `root/out` and no further.
fn config(root: &Path) -> std::path::PathBuf {
    let srv = root.join("srv");
    let roots: Vec<String> = ENVS
        .iter()
        .map(|e| format!("{e} = [{:?}]", srv.join(e)))
        .collect();
    let out = root.join("out");
    let text = format!(
        "file_roots = {{ {} }}\n\
         [plugins.state]\nfetch = [\"salt://**\"]\ncall = [\"*\"]\n\
         [plugins.file]\nfetch = [\"salt://**\"]\nfiles = [{out:?}, \"{}/**\"]\n\
         dirs = [{{ path = {root:?}, writable = true }}]\n\
         [plugins.cp]\nfetch = [\"salt://**\"]\n",
        roots.join(", "),
        out.display(),
    );
    let path = root.join("maid.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn maid(root: &Path, words: &[String]) -> Value {
    let config = config(root);
    answer_of(
        crate::common::maid_command()
            .args(["call", "--local", "--id", "local", "--retcode-passthrough"])
            .args(["--out", "json", "-c"])
            .arg(&config)
            .current_dir(root)
            .env("MAID_PLUGIN_DIR", guests::PLUGINS_DIR)
            .env("MAID_CACHE_DIR", crate::common::shared_cache())
            .env_remove("MAID_CONFIG")
            .arg("--")
            .args(words)
            .output()
            .expect("run maid"),
    )
}

fn calls() -> Vec<Vec<String>> {
    let calls: &[&[&str]] = &[
        &["state.show_top"],
        &["state.show_top", "saltenv=dev"],
        &["state.show_highstate"],
        &["state.apply", "test=True"],
        &["state.apply"],
        &["state.apply"],
        &["state.apply", "saltenv=dev", "test=True"],
        &["state.highstate", "saltenv=prod"],
        &["state.sls", "app", "saltenv=dev", "test=True"],
        &["state.show_sls", "app", "saltenv=dev"],
        &["state.show_low_sls", "tools", "saltenv=dev"],
        &["state.sls", "app"],
        &["state.sls", "xenv", "saltenv=dev"],
        &["state.sls", "badenv", "saltenv=dev"],
        &["state.sls", "unknown", "saltenv=dev"],
        &["state.top", "top.sls", "saltenv=prod", "test=True"],
        &["cp.list_master", "saltenv=dev"],
        &["cp.list_master_dirs", "saltenv=dev"],
        &["cp.list_states", "saltenv=prod"],
        &["cp.list_states", "saltenv=qa"],
        &["cp.list_master"],
        &["cp.get_file_str", "salt://files/motd", "saltenv=dev"],
        &["cp.get_file_str", "salt://files/motd?saltenv=dev"],
        &[
            "cp.get_file_str",
            "salt://files/motd?saltenv=dev",
            "saltenv=prod",
        ],
        &["cp.get_file_str", "salt://files/conf.j2"],
        &["cp.hash_file", "salt://files/motd", "saltenv=dev"],
    ];
    calls
        .iter()
        .map(|w| w.iter().map(|s| s.to_string()).collect())
        .collect()
}

#[test]
fn environments_apply_as_salt_applies_them() {
    let salt_dir = tempfile::tempdir().unwrap();
    let maid_dir = tempfile::tempdir().unwrap();
    copy_envs(salt_dir.path());
    copy_envs(maid_dir.path());
    let grains = maid(maid_dir.path(), &["grains.items".to_string()])["return"].clone();
    assert_eq!(grains["id"], json!("local"), "maid's grains: {grains}");
    let calls = calls();
    let srv = salt_dir.path().join("srv");
    let file_roots: serde_json::Map<String, Value> = ENVS
        .iter()
        .map(|e| (e.to_string(), json!([srv.join(e)])))
        .collect();
    let doc = json!({"calls": calls, "file_roots": file_roots, "grains": grains});
    let salt_side = std::thread::spawn(move || oracle("modules", &doc));
    let maid_answers: Vec<Value> = calls.iter().map(|w| maid(maid_dir.path(), w)).collect();
    let salt = salt_side.join().unwrap();
    let salt = salt.as_array().expect("oracle answers a list").clone();
    let differ: Vec<String> = calls
        .iter()
        .zip(salt)
        .zip(maid_answers)
        .filter_map(|((words, salt), maid)| {
            differs(words, salt, maid, salt_dir.path(), maid_dir.path())
        })
        .collect();
    agree(&differ, calls.len());
    // What each environment served, on disk: the dev SLS's own motd, and
    // base's where its URL named base.
    let out = maid_dir.path().join("out");
    let read = |f: &str| std::fs::read_to_string(out.join(f)).unwrap_or_default();
    assert_eq!(read("base_motd"), "motd of base\n");
    assert_eq!(read("dev_motd"), "motd of dev\n");
    assert_eq!(read("dev_base_motd"), "motd of base\n");
    assert_eq!(read("dev_conf"), "rendered in dev for local\n");
}
