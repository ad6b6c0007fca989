use super::*;
use serde_json::json;

fn settings(files: &[(&str, &str)]) -> (tempfile::TempDir, Settings) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("pillar");
    for (path, text) in files {
        let full = root.join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, text).unwrap();
    }
    let master = maid_config::MasterSettings {
        pillar_roots: maid_config::FileRoots::base(vec![root]),
        ..Default::default()
    };
    (dir, Settings::from_config(&master))
}

fn compile_for(settings: &Settings, id: &str) -> Map<String, Value> {
    let req = Request {
        id: id.into(),
        grains: json!({"id": id, "os": "Debian"})
            .as_object()
            .unwrap()
            .clone(),
        ..Default::default()
    };
    compile(settings, &req)
}

#[test]
fn pillar_templates_run_no_module_on_the_master_but_read_the_minions_grains() {
    let (_dir, s) = settings(&[
        ("top.sls", "base:\n  '*':\n    - run\n    - grains\n"),
        ("run.sls", "out: {{ salt['cmd.run']('id') }}\n"),
        (
            "grains.sls",
            "os: {{ salt['grains.get']('os') }}\nall: {{ salt['grains.items']()['id'] }}\n",
        ),
    ]);
    let p = compile_for(&s, "web1");
    assert_eq!(p.get("out"), None);
    assert_eq!(p["os"], json!("Debian"));
    assert_eq!(p["all"], json!("web1"));
    assert_eq!(
        p["_errors"],
        json!(["Rendering SLS 'run' failed. Please see master log for details."])
    );
}

#[test]
fn pillar_files_are_read_beneath_their_root_only() {
    let (dir, s) = settings(&[
        ("top.sls", "base:\n  '*':\n    - climb\n    - linked\n"),
        (
            "climb.sls",
            "{% include '../secret.txt' %}\n{% include '/etc/hostname' %}\nk: 1\n",
        ),
    ]);
    std::fs::write(dir.path().join("secret.txt"), "leaked: yes\n").unwrap();
    std::os::unix::fs::symlink(
        dir.path().join("secret.txt"),
        dir.path().join("pillar/linked.sls"),
    )
    .unwrap();
    let p = compile_for(&s, "web1");
    assert_eq!(p.get("leaked"), None, "{p:?}");
    let errors = p["_errors"].as_array().unwrap();
    assert!(
        errors.contains(&json!(
            "Rendering SLS 'climb' failed. Please see master log for details."
        )),
        "{errors:?}"
    );
    // The link leads out of the root: not served, as if absent.
    assert!(
        errors.contains(&json!(
            "Specified SLS 'linked' in environment 'base' is not available on the salt master"
        )),
        "{errors:?}"
    );
}

#[test]
fn targets_read_each_minions_compiled_pillar_once() {
    let (_dir, s) = settings(&[
        ("top.sls", "base:\n  'web*':\n    - web\n"),
        ("web.sls", "role: web\n"),
    ]);
    let cache = Cache::new(s);
    let grains = Map::new();
    assert_eq!(cache.get("web1", &grains)["role"], json!("web"));
    assert_eq!(cache.get("db1", &grains).get("role"), None);
    assert!(Arc::ptr_eq(
        &cache.get("web1", &grains),
        &cache.get("web1", &grains)
    ));
}

#[test]
fn only_a_master_that_keeps_keys_targets_on_pillar() {
    let (_dir, s) = settings(&[("top.sls", "base:\n  '*':\n    - r\n"), ("r.sls", "r: 1\n")]);
    // No key store: registrations are anyone's word, so no pillar.
    let bare = crate::registry::Registry::default().with_pillar(Some(&s));
    assert!(bare.pillar.is_none());
    let keeping = crate::registry::Registry {
        accepted: Some(Default::default()),
        ..Default::default()
    }
    .with_pillar(Some(&s));
    assert!(keeping.pillar.is_some());
    // And none without pillar_roots.
    let (_empty, none) = settings(&[]);
    let none = Settings {
        roots: maid_config::FileRoots::default(),
        ..none
    };
    let keeping = crate::registry::Registry {
        accepted: Some(Default::default()),
        ..Default::default()
    }
    .with_pillar(Some(&none));
    assert!(keeping.pillar.is_none());
}

#[test]
fn each_compile_reads_the_files_as_they_are_now() {
    let (dir, s) = settings(&[("top.sls", "base:\n  '*':\n    - v\n"), ("v.sls", "v: 1\n")]);
    assert_eq!(compile_for(&s, "web1")["v"], json!(1));
    // An operator's edit: the next job (the same long-running master's)
    // compiles the new value.
    std::fs::write(dir.path().join("pillar/v.sls"), "v: 2\n").unwrap();
    assert_eq!(compile_for(&s, "web1")["v"], json!(2));
    assert_eq!(Cache::new(s).get("web1", &Map::new())["v"], json!(2));
}
