//! The grants' rules, each refusal by its variant and its words.

use super::*;

#[test]
fn call_runs_only_the_functions_granted() {
    let granted = PluginGrants {
        call: vec!["test.*".into(), "grains.get".into()],
        ..Default::default()
    };
    let g = Grants::effective(&[], &granted).unwrap();
    assert!(g.check_call("test.echo").is_ok());
    assert!(g.check_call("grains.get").is_ok());
    for refused in [
        "cmd.run",
        "grains.setval",
        "test",
        "xtest.echo",
        "grains.get_x",
    ] {
        assert!(g.check_call(refused).is_err(), "{refused}");
    }
    let none = Grants::effective(&[], &PluginGrants::default()).unwrap();
    let err = none.check_call("test.echo").unwrap_err();
    assert_eq!(err, Denied::NotGranted("call"));
    assert_eq!(err.to_string(), "call is not granted to this plugin");
}

fn grants(exec: &[&str], shell: bool) -> Grants {
    let g = PluginGrants {
        exec: exec.iter().map(|s| s.to_string()).collect(),
        shell,
        ..Default::default()
    };
    Grants::effective(&[Capability::Exec, Capability::Shell], &g).unwrap()
}

#[test]
fn passed_env_takes_the_granted_variables_and_shows_only_their_names() {
    let path = std::env::var_os("PATH").expect("PATH is set");
    let env = Patterns::new(&["PATH".to_string()], false).unwrap();
    let passed = PassedEnv::of(&env);
    assert_eq!(passed.get("PATH"), Some(path.as_os_str()));
    assert_eq!(passed.vars().count(), 1);
    let shown = format!("{passed:?}");
    assert_eq!(shown, "[\"PATH\"]");
    let none = Patterns::new(&["MAID_NO_SUCH_*".to_string()], false).unwrap();
    assert_eq!(PassedEnv::of(&none).vars().count(), 0);
    assert_eq!(PassedEnv::of(&Patterns::empty()).vars().count(), 0);
}

#[test]
fn a_granted_file_must_be_named_and_lead_where_named() {
    let dir = tempfile::tempdir().unwrap();
    let named = dir.path().join("named");
    std::fs::write(&named, "x").unwrap();
    let outside = dir.path().join("outside");
    std::fs::write(&outside, "secret").unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&outside, &link).unwrap();
    let g = PluginGrants {
        files: vec![named.display().to_string(), link.display().to_string()],
        ..Default::default()
    };
    let eff = Grants::effective(&[Capability::FsRead], &g).unwrap();
    assert_eq!(
        eff.check_file(&named).unwrap(),
        named.canonicalize().unwrap()
    );
    let err = eff.check_file(&link).unwrap_err();
    assert!(matches!(err, Denied::FileLeadsOut { .. }), "{err}");
    assert!(err.to_string().contains("leads to"), "{err}");
    let err = eff.check_file(&outside).unwrap_err();
    assert_eq!(err, Denied::FileNotGranted(outside.clone()));
    let dotted = dir.path().join("x/../named");
    assert!(eff.check_file(&dotted).is_err());
    assert!(eff.check_file(Path::new("named")).is_err());
    // Not asked for in the manifest: nothing.
    let eff = Grants::effective(&[Capability::Exec], &g).unwrap();
    let err = eff.check_file(&named).unwrap_err();
    assert_eq!(err, Denied::NoFiles);
}

#[test]
fn the_kernels_links_into_the_agents_own_proc_lead_where_granted_and_no_other_link_does() {
    let dir = tempfile::tempdir().unwrap();
    let planted = dir.path().join("environ");
    std::os::unix::fs::symlink("/proc/self/environ", &planted).unwrap();
    let g = PluginGrants {
        files: vec![
            "/proc/mounts".into(),
            "/proc/net/dev".into(),
            "/proc/self/root/etc/hostname".into(),
            format!("{}/*", dir.path().display()),
        ],
        ..Default::default()
    };
    let eff = Grants::effective(&[Capability::FsRead], &g).unwrap();
    let own = Path::new("/proc").join(std::process::id().to_string());
    // `/proc/mounts` is the kernel's `self/mounts`: this process's own.
    assert_eq!(
        eff.check_file(Path::new("/proc/mounts")).unwrap(),
        own.join("mounts")
    );
    assert_eq!(
        eff.check_file(Path::new("/proc/net/dev")).unwrap(),
        own.join("net/dev")
    );
    // Further links under `/proc/<pid>/` lead where they lead: out.
    let err = eff
        .check_file(Path::new("/proc/self/root/etc/hostname"))
        .unwrap_err();
    assert!(matches!(err, Denied::FileLeadsOut { .. }), "{err}");
    // A link someone planted in a granted directory is no kernel link.
    let err = eff.check_file(&planted).unwrap_err();
    assert!(matches!(err, Denied::FileLeadsOut { .. }), "{err}");
    // Nor is a `/proc` path the grants do not name.
    assert!(eff.check_file(Path::new("/proc/self/environ")).is_err());
}

#[test]
fn special_modes_are_granted_by_the_config_to_plugins_that_write() {
    let g = PluginGrants {
        special_modes: true,
        ..Default::default()
    };
    let eff = Grants::effective(&[Capability::FsWrite], &g).unwrap();
    assert!(eff.special_modes);
    assert!(
        eff.summary().warnings.iter().any(|w| w.contains("set-uid")),
        "{:?}",
        eff.summary().warnings
    );
    assert!(
        !Grants::effective(&[Capability::FsRead], &g)
            .unwrap()
            .special_modes
    );
    let off = Grants::effective(&[Capability::FsWrite], &PluginGrants::default()).unwrap();
    assert!(!off.special_modes);
}

#[test]
fn policy_says_whom_grains_a_plugin_sets_are_believed_by() {
    let g = PluginGrants {
        set_grains: true,
        ..Default::default()
    };
    let w = Grants::effective(&[], &g).unwrap().summary().warnings;
    assert!(
        w.iter().any(|w| w.starts_with("set_grains")
            && w.contains("API permissions (G@")
            && w.contains("pillar top files")),
        "{w:?}"
    );
    let w = Grants::effective(&[], &PluginGrants::default())
        .unwrap()
        .summary()
        .warnings;
    assert!(!w.iter().any(|w| w.contains("set_grains")), "{w:?}");
}

#[test]
fn undeclared_capabilities_are_not_granted() {
    let g = PluginGrants {
        exec: vec!["*".into()],
        shell: true,
        fetch: vec!["**".into()],
        ..Default::default()
    };
    let eff = Grants::effective(&[], &g).unwrap();
    assert!(eff.exec.is_empty());
    assert!(!eff.shell);
    assert!(eff.fetch.is_empty());
}

/// Whether `g` lets `resolved` run when its links lead to `real`.
fn runs(g: &Grants, resolved: &str, real: &str) -> bool {
    g.check_program(Path::new(resolved), Path::new(real))
        .is_ok()
}

#[test]
fn exec_globs_do_not_cross_directories() {
    let g = grants(&["/usr/bin/*"], false);
    assert!(runs(&g, "/usr/bin/true", "/usr/bin/true"));
    assert!(!runs(&g, "/usr/bin/x/evil", "/usr/bin/x/evil"));
    assert!(!runs(&g, "/opt/true", "/opt/true"));
    // A link from outside the allow-list to a program inside it.
    assert!(runs(&g, "/opt/true", "/usr/bin/true"));
}

#[test]
fn the_allow_list_is_matched_on_the_real_path_only() {
    // With shell, so that only the allow-list decides.
    let g = grants(&["/usr/local/**"], true);
    // `..` in the requested path: the real path decides.
    assert!(!runs(&g, "/usr/local/../../tmp/evil", "/tmp/evil"));
    // A link inside an allowed directory to a program outside it.
    assert!(!runs(&g, "/usr/local/bin/tool", "/tmp/evil"));
    assert!(runs(&g, "/usr/local/bin/tool", "/usr/local/lib/tool"));
    // A pattern with `..` is refused outright.
    let bad = PluginGrants {
        exec: vec!["/usr/local/../../tmp/*".into()],
        ..Default::default()
    };
    assert!(Grants::effective(&[Capability::Exec], &bad).is_err());
}

#[test]
fn a_pattern_also_admits_its_directories_real_path() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real");
    std::fs::create_dir(&real).unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let real = real.canonicalize().unwrap();
    let g = grants(&[&format!("{}/*", link.display())], true);
    let prog = real.join("tool");
    assert!(runs(
        &g,
        &link.join("tool").to_string_lossy(),
        &prog.to_string_lossy()
    ));
    assert_eq!(g.summary().exec, vec![format!("{}/*", link.display())]);
}

#[test]
fn programs_that_run_their_arguments_need_the_shell_grant() {
    let refused = grants(&["*"], false);
    let granted = grants(&["*"], true);
    for (resolved, real) in [
        ("/bin/sh", "/usr/bin/dash"),
        ("/usr/bin/env", "/usr/bin/env"),
        ("/usr/bin/python3", "/usr/bin/python3.11"),
        ("/usr/bin/perl", "/usr/bin/perl5.36.0"),
        ("/usr/bin/xargs", "/usr/bin/xargs"),
        ("/usr/bin/find", "/usr/bin/find"),
        ("/usr/bin/timeout", "/usr/bin/timeout"),
        ("/usr/bin/nohup", "/usr/bin/nohup"),
        ("/usr/bin/sudo", "/usr/bin/sudo"),
        ("/bin/busybox", "/bin/busybox"),
        // Behind a name that is not a runner's.
        ("/usr/local/bin/tool", "/usr/bin/bash"),
        ("/usr/local/bin/true", "/usr/bin/python3.12"),
    ] {
        assert!(!runs(&refused, resolved, real), "{resolved} -> {real}");
        assert!(runs(&granted, resolved, real), "{resolved} -> {real}");
    }
    for plain in [
        "/usr/bin/true",
        "/usr/bin/ls",
        "/usr/bin/cat",
        "/usr/bin/id",
    ] {
        assert!(runs(&refused, plain, plain), "{plain}");
    }
}

/// A directory holding a copy of `/usr/bin/true` (an ELF executable)
/// under each of `names`, and the pattern `DIR/*`.
fn programs_named(names: &[&str]) -> (tempfile::TempDir, PathBuf, String) {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().canonicalize().unwrap();
    for name in names {
        std::fs::copy("/usr/bin/true", real.join(name)).unwrap();
    }
    let pattern = format!("{}/*", real.display());
    (dir, real, pattern)
}

#[test]
fn through_a_glob_only_plain_programs_start_without_shell() {
    let (_dir, real, pattern) = programs_named(PLAIN);
    let g = grants(&[&pattern], false);
    for name in PLAIN {
        let p = real.join(name).to_string_lossy().into_owned();
        assert!(runs(&g, &p, &p), "{name} is plain and refused");
    }
    // The runners the attack used, and programs that are not plain,
    // all refused through `*` and `/usr/bin/*` without shell.
    let not_plain = super::super::programs::NOT_PLAIN.iter().map(|(n, _)| *n);
    for g in [grants(&["*"], false), grants(&["/usr/bin/*"], false)] {
        for name in not_plain
            .clone()
            .chain(["split", "setarch", "linux64", "linux32"])
        {
            let p = format!("/usr/bin/{name}");
            assert!(!runs(&g, &p, &p), "{name} ran through a glob");
        }
        // Unknown to the classification: refused too.
        assert!(!runs(&g, "/usr/bin/maid-no-such-tool", "/usr/bin/true"));
    }
}

#[test]
fn a_program_named_exactly_needs_no_classification_but_a_runner_still_needs_shell() {
    let (_dir, real, pattern) = programs_named(&["tool", "sh", "split"]);
    let path = |n: &str| real.join(n).to_string_lossy().into_owned();
    let (tool, sh, split) = (path("tool"), path("sh"), path("split"));
    assert!(!runs(&grants(&[&pattern], false), &tool, &tool));
    // `maid call --local` without a configuration: the operator chose.
    let local = PluginGrants {
        exec: vec![pattern.clone()],
        operator_is_caller: true,
        ..Default::default()
    };
    let local = Grants::effective(&[Capability::Exec], &local).unwrap();
    assert!(runs(&local, &tool, &tool));
    assert!(!runs(&local, &sh, &sh), "a runner still needs shell");
    let exact = grants(&[&pattern, &tool, &sh, &split], false);
    assert!(runs(&exact, &tool, &tool));
    // Reached by another name, through a link: still that program.
    std::os::unix::fs::symlink(&tool, real.join("alias")).unwrap();
    assert!(runs(&exact, &path("alias"), &tool));
    for runner in [&sh, &split] {
        assert!(!runs(&exact, runner, runner), "{runner}");
        assert!(runs(&grants(&[runner], true), runner, runner), "{runner}");
    }
}

#[test]
fn policy_says_which_globbed_programs_need_shell() {
    let (_dir, real, pattern) = programs_named(&["cat", "tool", "sh"]);
    let w = grants(&[&pattern], false).summary().warnings;
    let names_runner = w
        .iter()
        .any(|l| l.contains("(sh)") && l.contains("refused unless shell"));
    assert!(names_runner, "{w:?}");
    let unclassified = w
        .iter()
        .find(|l| l.contains("classified plain"))
        .unwrap_or_else(|| panic!("{w:?}"));
    assert!(
        unclassified.ends_with("refused through it: tool (name one's path exactly to allow it)"),
        "{unclassified}"
    );
    let exact = format!("{}/tool", real.display());
    let w = grants(&[&pattern, &exact], false).summary().warnings;
    assert!(w.iter().all(|l| !l.contains("classified plain")), "{w:?}");
    let w = grants(&["*"], false).summary().warnings;
    assert!(
        w.iter()
            .any(|l| l.contains("any program not classified plain")),
        "{w:?}"
    );
    let w = grants(&[&pattern], true).summary().warnings;
    assert!(w.iter().all(|l| !l.contains("classified plain")), "{w:?}");
    assert!(w.iter().any(|l| l.contains("can run anything")), "{w:?}");
}

#[test]
fn a_program_in_a_writable_directory_is_as_good_as_a_shell() {
    let (dir, real, pattern) = programs_named(&["true"]);
    let prog = real.join("true");
    let prog = prog.to_string_lossy();
    let writable = [dir.path().to_path_buf()];
    let refused = grants(&[&pattern], false).with_writable_dirs(&writable);
    assert!(!runs(&refused, &prog, &prog));
    assert!(
        refused
            .summary()
            .warnings
            .iter()
            .any(|w| w.contains("which plugins may write")),
        "{:?}",
        refused.summary().warnings
    );
    assert!(runs(
        &grants(&[&pattern], true).with_writable_dirs(&writable),
        &prog,
        &prog
    ));
    // Not writable: a plain program.
    assert!(runs(&grants(&[&pattern], false), &prog, &prog));
}

#[test]
fn a_job_sets_only_granted_variables_and_never_a_hijacking_one() {
    let g = Grants::effective(
        &[Capability::Exec],
        &PluginGrants {
            exec: vec!["/usr/bin/*".into()],
            env: vec!["*".into()],
            ..Default::default()
        },
    )
    .unwrap();
    let set = |name: &str| g.check_job_env(&[(name.to_string(), "x".to_string())]);
    assert!(set("LC_ALL").is_ok());
    for hijack in [
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "LD_AUDIT",
        "GLIBC_TUNABLES",
        "GCONV_PATH",
        "BASH_ENV",
        "ENV",
        "BASH_FUNC_x%%",
        "PYTHONPATH",
        "PYTHONSTARTUP",
        "PERL5OPT",
        "PERL5LIB",
        "RUBYOPT",
        "NODE_OPTIONS",
        "GIT_SSH_COMMAND",
        "PATH",
        "HOME",
        "IFS",
    ] {
        assert!(set(hijack).is_err(), "{hijack}");
    }
    assert!(set("BAD=NAME").is_err());
    let narrow = grants(&["/usr/bin/*"], false);
    assert!(
        narrow
            .check_job_env(&[("LC_ALL".to_string(), "C".to_string())])
            .is_err(),
        "not granted"
    );
}

#[test]
fn hijacking_variables_are_not_passed_from_the_agent_either() {
    let all = Patterns::new(&["*".to_string()], false).unwrap();
    let passed = PassedEnv::of(&all);
    assert!(
        passed
            .vars()
            .all(|(k, _)| !is_hijack_env(&k.to_string_lossy()))
    );
}

#[test]
fn policy_warns_of_grants_that_name_runners_or_hijacking_variables() {
    let g = Grants::effective(
        &[Capability::Exec],
        &PluginGrants {
            exec: vec!["/usr/bin/python3".into(), "/usr/bin/true".into()],
            env: vec!["LD_PRELOAD".into(), "PATH".into(), "*".into()],
            ..Default::default()
        },
    )
    .unwrap();
    let w = g.summary().warnings;
    assert!(
        w.iter()
            .any(|l| l.contains("/usr/bin/python3") && l.contains("refused unless shell")),
        "{w:?}"
    );
    assert!(!w.iter().any(|l| l.contains("/usr/bin/true")), "{w:?}");
    assert!(
        w.iter()
            .any(|l| l.contains("\"LD_PRELOAD\"") && l.contains("never passed")),
        "{w:?}"
    );
    assert!(w.iter().any(|l| l.contains("\"PATH\"")), "{w:?}");
    assert!(
        w.iter().any(|l| l.contains("\"*\"") && l.contains("LD_")),
        "{w:?}"
    );
}
