//! The packages as an operator meets them. `./dev package` builds the
//! `.deb` and the `.rpm` from what the tests built; the `.deb` goes with
//! dpkg into a clean Debian root (debootstrap's minbase of this host's
//! release, made once under target/package-root), where `maid call
//! --local test.ping` and `maid policy` work from the packaged files,
//! nothing is enabled or started, and the agent refuses to start until
//! the operator trusts a master's key; once trusted, it runs a signed job
//! from a private redis-server. An upgrade keeps the operator's config,
//! the maid's key and jid memory; removing keeps them; purging removes
//! them. The `.rpm` is read with `rpm -qlp` and installed, upgraded and
//! erased with `rpm --root` in a scratch copy of that root.
//!
//! Installing needs root (dpkg, chroot, mounting /proc): run the tests as
//! root, as CI does.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::common::fleet::maid_cli;
use crate::common::guests;
use crate::common::output_text as text;
use crate::common::redis::RedisServer;
use maid_testkit::proc::Proc;

/// The workspace's target directory and the profile the tests' `maid`
/// was built with (`target/<profile>/maid`).
fn target_and_profile() -> (PathBuf, String) {
    let bin = Path::new(env!("CARGO_BIN_EXE_maid"));
    let profile_dir = bin.parent().unwrap();
    let profile = profile_dir
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    (profile_dir.parent().unwrap().to_path_buf(), profile)
}

/// Run `cmd`, which must succeed; its output.
fn ok(cmd: &mut Command) -> Output {
    let o = cmd.output().unwrap_or_else(|e| panic!("run {cmd:?}: {e}"));
    assert!(o.status.success(), "{cmd:?} failed: {}", text(&o));
    o
}

fn require_root() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "tests/package.rs installs the packages into a chroot with dpkg and rpm: \
         run the tests as root (CI does)"
    );
}

/// The packages, built once: revision 1 and revision 2 (the upgrade).
struct Packages {
    deb: [PathBuf; 2],
    rpm: [PathBuf; 2],
    _dir: tempfile::TempDir,
}

fn packages() -> &'static Packages {
    static PACKAGES: OnceLock<Packages> = OnceLock::new();
    PACKAGES.get_or_init(|| {
        let (target, profile) = target_and_profile();
        let root = target.parent().unwrap();
        ok(Command::new("timeout")
            .arg("900")
            .arg(root.join("dev"))
            .arg("package-only")
            .current_dir(root)
            .env("MAID_PACKAGE_PROFILE", &profile)
            .env("MAID_PACKAGE_REVISIONS", "1 2")
            .env("MAID_PACKAGE_FAST", "1"));
        // Copied out: another run of ./dev package replaces target/package.
        let dir = tempfile::tempdir().unwrap();
        let built = |ext: &str, revision: &str| {
            let found: Vec<PathBuf> = std::fs::read_dir(target.join("package"))
                .unwrap()
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    let name = p.file_name().unwrap().to_str().unwrap();
                    name.ends_with(&format!(".{ext}"))
                        && (name.contains(&format!("-{revision}_"))
                            || name.contains(&format!("-{revision}.")))
                })
                .collect();
            assert_eq!(found.len(), 1, "one revision {revision} .{ext}: {found:?}");
            let to = dir.path().join(format!("maid-{revision}.{ext}"));
            std::fs::copy(&found[0], &to).unwrap();
            to
        };
        Packages {
            deb: [built("deb", "1"), built("deb", "2")],
            rpm: [built("rpm", "1"), built("rpm", "2")],
            _dir: dir,
        }
    })
}

/// This host's Debian release (`VERSION_CODENAME`).
fn codename() -> String {
    let os = std::fs::read_to_string("/etc/os-release").unwrap();
    os.lines()
        .find_map(|l| l.strip_prefix("VERSION_CODENAME="))
        .map(|c| c.trim_matches('"').to_string())
        .filter(|c| !c.is_empty())
        .expect("a Debian host: /etc/os-release names no VERSION_CODENAME")
}

/// A minimal Debian root of this host's release, made once by debootstrap
/// and kept (`.complete` marks a finished one).
fn base_root() -> &'static Path {
    static BASE: OnceLock<PathBuf> = OnceLock::new();
    BASE.get_or_init(|| {
        let (target, _) = target_and_profile();
        let codename = codename();
        let dir = target.join("package-root").join(&codename);
        if !dir.join(".complete").exists() {
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(dir.parent().unwrap()).unwrap();
            let mirror = std::env::var("MAID_DEBIAN_MIRROR")
                .unwrap_or_else(|_| "http://deb.debian.org/debian".into());
            let o = Command::new("timeout")
                .args(["900", "debootstrap", "--variant=minbase", &codename])
                .arg(&dir)
                .arg(&mirror)
                .output()
                .expect("run debootstrap (./dev test installs it: apt-get install debootstrap)");
            assert!(o.status.success(), "debootstrap: {}", text(&o));
            std::fs::write(dir.join(".complete"), "").unwrap();
        }
        dir
    })
}

/// A scratch copy of [`base_root`] with /proc mounted; unmounted and
/// removed when dropped.
struct Chroot {
    dir: tempfile::TempDir,
}

impl Chroot {
    fn new() -> Chroot {
        require_root();
        let base = base_root();
        let dir = tempfile::Builder::new()
            .prefix("scratch-")
            .tempdir_in(base.parent().unwrap())
            .unwrap();
        ok(Command::new("cp")
            .arg("-a")
            .arg(format!("{}/.", base.display()))
            .arg(dir.path()));
        ok(Command::new("mount")
            .args(["-t", "proc", "proc"])
            .arg(dir.path().join("proc")));
        Chroot { dir }
    }

    fn path(&self, inside: &str) -> PathBuf {
        self.dir.path().join(inside.trim_start_matches('/'))
    }

    /// `args` run inside the root, with a clean environment.
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("chroot");
        cmd.arg(self.dir.path())
            .args(args)
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .env("HOME", "/root")
            .env("LANG", "C.UTF-8");
        cmd
    }

    /// [`Self::command`], given two minutes at most.
    fn timed(&self, args: &[&str]) -> Command {
        let mut all = vec!["timeout", "120"];
        all.extend_from_slice(args);
        self.command(&all)
    }

    fn run(&self, args: &[&str]) -> Output {
        self.timed(args).output().unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        String::from_utf8(ok(&mut self.timed(args)).stdout).unwrap()
    }

    /// Copy `file` from the host to /tmp inside; its path inside.
    fn put(&self, file: &Path) -> String {
        let inside = format!("/tmp/{}", file.file_name().unwrap().to_str().unwrap());
        std::fs::copy(file, self.path(&inside)).unwrap();
        inside
    }

    fn mode(&self, inside: &str) -> u32 {
        let meta = std::fs::metadata(self.path(inside))
            .unwrap_or_else(|e| panic!("{inside} in the root: {e}"));
        meta.permissions().mode() & 0o7777
    }

    /// Every file under `inside`, with its bytes.
    fn files_under(&self, inside: &str) -> BTreeMap<String, Vec<u8>> {
        let mut out = BTreeMap::new();
        let mut todo = vec![self.path(inside)];
        while let Some(dir) = todo.pop() {
            for e in std::fs::read_dir(&dir).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    todo.push(p);
                } else {
                    let name = p.strip_prefix(self.dir.path()).unwrap();
                    out.insert(name.display().to_string(), std::fs::read(&p).unwrap());
                }
            }
        }
        out
    }
}

impl Drop for Chroot {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path().join("proc"))
            .status();
    }
}

/// The agent as the unit starts it, as maid `pkg-1`.
const AGENT: &[&str] = &[
    "maid",
    "agent",
    "--config",
    "/etc/maid/maid.toml",
    "--id",
    "pkg-1",
];

/// Every shipped plugin's module name: what the tests built of plugins/.
fn shipped_modules() -> Vec<String> {
    let modules = maid_agent::runtime::modules_in(Path::new(guests::PLUGINS_DIR));
    assert!(modules.len() > 10, "{modules:?}");
    modules
}

/// What a package put in place: the binary, every plugin, the commented
/// config (0640, as `maid init` writes it), the unit, the manual pages,
/// the licences, and the directories the agent keeps its state in (0700).
fn assert_installed(root: &Chroot) {
    assert_eq!(root.mode("/usr/bin/maid"), 0o755);
    for module in shipped_modules() {
        assert!(
            root.path(&format!("/usr/lib/maid/plugins/{module}.wasm"))
                .is_file(),
            "plugin {module} is not installed"
        );
    }
    // Each compiled ahead: its code, checksum and manifest.
    let precompiled: Vec<_> = std::fs::read_dir(root.path("/usr/lib/maid/plugins/precompiled"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(
        precompiled.len(),
        3 * shipped_modules().len(),
        "{precompiled:?}"
    );
    let config = std::fs::read_to_string(root.path("/etc/maid/maid.toml")).unwrap();
    assert_eq!(config, maid_config::TEMPLATE);
    assert_eq!(root.mode("/etc/maid/maid.toml"), 0o640);
    let unit = std::fs::read_to_string(root.path("/usr/lib/systemd/system/maid.service")).unwrap();
    assert!(unit.contains("ExecStart=/usr/bin/maid agent --config /etc/maid/maid.toml"));
    for dir in ["/var/lib/maid", "/var/cache/maid", "/var/log/maid"] {
        assert_eq!(root.mode(dir), 0o700, "{dir}");
    }
    for page in [
        "maid.1",
        "maid-agent.1",
        "maid-run.1",
        "maid-audit-verify.1",
    ] {
        assert!(
            root.path(&format!("/usr/share/man/man1/{page}")).exists()
                || root
                    .path(&format!("/usr/share/man/man1/{page}.gz"))
                    .exists(),
            "manual page {page}"
        );
    }
    let licences =
        std::fs::read_to_string(root.path("/usr/share/doc/maid/THIRD-PARTY-LICENSES")).unwrap();
    for word in [
        "wasmtime",
        "tokio",
        "wit-bindgen",
        "Apache License",
        "MIT License",
    ] {
        assert!(licences.contains(word), "THIRD-PARTY-LICENSES names {word}");
    }
    assert!(root.path("/usr/share/doc/maid/security.md").is_file());
    // Installing enables and starts nothing (the operator chooses).
    let wants = root.path("/etc/systemd/system/multi-user.target.wants/maid.service");
    assert!(!wants.exists() && wants.symlink_metadata().is_err());
}

/// Every entry of a package listing (`dpkg-deb -c`, `rpm -qlvp`: mode
/// first, owner and group as the `owner_at` fields) is root's and
/// writable by root alone.
fn assert_root_only(listing: &str, owner_at: (usize, usize)) {
    assert!(listing.lines().count() > 20, "{listing}");
    for line in listing.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (mode, owner) = (f[0].as_bytes(), f[owner_at.0..=owner_at.1].join(" "));
        assert!(
            ["root/root", "0/0", "root root"].contains(&owner.as_str()),
            "not root's: {line}"
        );
        if mode[0] != b'l' {
            assert!(
                mode[5] != b'w' && mode[8] != b'w',
                "writable by others than root: {line}"
            );
        }
    }
}

/// `maid call --local test.ping` from the packaged files (no
/// --plugin-dir: /usr/lib/maid/plugins), its plugin compiled ahead by the
/// package: the call sets no compiler up.
fn assert_runs_locally(root: &Chroot) {
    let ping = root.run(&[
        "env",
        "MAID_LOG=maid_agent=debug",
        "maid",
        "call",
        "--local",
        "test.ping",
    ]);
    assert!(ping.status.success(), "{}", text(&ping));
    assert!(
        String::from_utf8_lossy(&ping.stdout).contains("True"),
        "{}",
        text(&ping)
    );
    assert!(
        !String::from_utf8_lossy(&ping.stderr).contains("setting up the compiler"),
        "compiled though the package ships its plugins compiled: {}",
        text(&ping)
    );
}

/// Wait up to 60 s for `id` to be alive in the registry of `redis`.
fn wait_alive(redis: &RedisServer, id: &str, agent: &mut Proc) {
    let mut conn = redis.client().get_connection().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let alive: bool = redis::cmd("EXISTS")
            .arg(format!("maid:alive:{id}"))
            .query(&mut conn)
            .unwrap();
        if alive {
            return;
        }
        agent.check_alive().unwrap();
        assert!(Instant::now() < deadline, "{id} never registered");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// dpkg in a clean root: install, what it put in place, the agent failing
/// closed and then serving jobs, upgrade, remove, purge.
#[test]
fn the_deb_installs_runs_upgrades_and_purges_in_a_clean_root() {
    require_root();
    let pkgs = packages();
    let listing = ok(Command::new("dpkg-deb").arg("-c").arg(&pkgs.deb[0]));
    assert_root_only(&String::from_utf8(listing.stdout).unwrap(), (1, 1));
    let root = Chroot::new();
    let deb = [root.put(&pkgs.deb[0]), root.put(&pkgs.deb[1])];
    root.ok(&["dpkg", "-i", &deb[0]]);
    assert_installed(&root);
    let conffiles = root.ok(&["dpkg-query", "-W", "-f=${Conffiles}", "maid"]);
    assert!(conffiles.contains("/etc/maid/maid.toml"), "{conffiles}");
    assert_runs_locally(&root);

    // The packaged config fails closed: require_signed, and no master's
    // key trusted yet. The agent says what is missing and stops.
    let refused = root.run(AGENT);
    assert!(!refused.status.success(), "{}", text(&refused));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("/etc/maid/master.pub"),
        "{}",
        text(&refused)
    );
    let policy = root.run(&["maid", "policy", "-c", "/etc/maid/maid.toml"]);
    assert!(!policy.status.success(), "{}", text(&policy));

    let (edited, state) = trust_a_master_and_serve_a_job(&root);

    // Upgrade: the operator's config, the key and jid memory stay.
    let config_path = root.path("/etc/maid/maid.toml");
    root.ok(&["dpkg", "-i", &deb[1]]);
    let version = root.ok(&["dpkg-query", "-W", "-f=${Version}", "maid"]);
    assert!(version.ends_with("-2"), "{version}");
    assert_eq!(std::fs::read_to_string(&config_path).unwrap(), edited);
    assert!(!root.path("/etc/maid/maid.toml.dpkg-new").exists());
    assert!(!root.path("/etc/maid/maid.toml.dpkg-dist").exists());
    assert_eq!(root.files_under("/var/lib/maid"), state);
    assert_runs_locally(&root);

    // Removing keeps them; purging removes them.
    root.ok(&["dpkg", "-r", "maid"]);
    assert!(!root.path("/usr/bin/maid").exists());
    assert!(!root.path("/usr/lib/maid/plugins").exists());
    assert_eq!(std::fs::read_to_string(&config_path).unwrap(), edited);
    assert_eq!(root.files_under("/var/lib/maid"), state);
    root.ok(&["dpkg", "-P", "maid"]);
    assert!(!config_path.exists());
    for dir in ["/var/lib/maid", "/var/cache/maid", "/var/log/maid"] {
        assert!(!root.path(dir).exists(), "{dir} survived the purge");
    }
    let status = root.run(&["dpkg", "-s", "maid"]);
    assert!(!status.status.success(), "{}", text(&status));
}

/// What an operator does after installing: trust the master's key, point
/// the maid at Redis; then the agent, started as the unit starts it,
/// answers a job the master signed and stops on SIGTERM. The config as
/// edited, and what the agent keeps in /var/lib/maid (its key, jid memory).
fn trust_a_master_and_serve_a_job(root: &Chroot) -> (String, BTreeMap<String, Vec<u8>>) {
    let redis = RedisServer::start();
    let work = tempfile::tempdir().unwrap();
    ok(crate::common::maid_command()
        .arg("keygen")
        .arg(work.path().join("master")));
    std::fs::copy(
        work.path().join("master.pub"),
        root.path("/etc/maid/master.pub"),
    )
    .unwrap();
    let config_path = root.path("/etc/maid/maid.toml");
    let edited = maid_config::TEMPLATE.replace("redis://127.0.0.1:6379/", &redis.url());
    assert_ne!(edited, maid_config::TEMPLATE);
    std::fs::write(&config_path, &edited).unwrap();
    let policy = root.ok(&["maid", "policy", "-c", "/etc/maid/maid.toml"]);
    assert!(policy.contains("require_signed: yes"), "{policy}");

    let mut agent = Proc::spawn(
        "packaged agent",
        root.command(AGENT).env("MAID_LOG", "maid=info"),
        work.path().join("agent.log"),
    )
    .unwrap();
    wait_alive(&redis, "pkg-1", &mut agent);
    // A job nobody signed is refused; the master's signed one runs.
    let out = maid_cli(&redis.url(), &["run", "pkg-1", "test.ping"], work.path());
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("Job rejected: unsigned"),
        "{}",
        text(&out)
    );
    let out = crate::common::maid_command()
        .args(["run", "pkg-1", "test.ping"])
        .env("MAID_REDIS", redis.url())
        .env("MAID_KEY", work.path().join("master.key"))
        .env_remove("MAID_CONFIG")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("pkg-1:\n    True"),
        "{}\nagent log:\n{}",
        text(&out),
        agent.log_tail()
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(agent.pid()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(40);
    while agent.check_alive().is_ok() {
        assert!(
            Instant::now() < deadline,
            "the agent did not stop on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let state = root.files_under("/var/lib/maid");
    assert!(
        state.contains_key("var/lib/maid/minion.key"),
        "{:?}",
        state.keys()
    );
    assert!(root.path("/var/log/maid/audit.jsonl").is_file());
    (edited, state)
}

/// The .rpm: its file list and config files read with rpm -qlp/-qcp, then
/// installed with `rpm --root` (its scriptlets run in that root), run,
/// upgraded with the operator's config kept, and erased.
#[test]
fn the_rpm_lists_its_files_and_installs_into_a_scratch_root() {
    require_root();
    let pkgs = packages();
    let list =
        String::from_utf8(ok(Command::new("rpm").arg("-qlp").arg(&pkgs.rpm[0])).stdout).unwrap();
    let mut want = vec![
        "/usr/bin/maid".to_string(),
        "/etc/maid/maid.toml".into(),
        "/usr/lib/systemd/system/maid.service".into(),
        "/usr/share/man/man1/maid.1".into(),
        "/usr/share/doc/maid/THIRD-PARTY-LICENSES".into(),
    ];
    want.extend(
        shipped_modules()
            .iter()
            .map(|m| format!("/usr/lib/maid/plugins/{m}.wasm")),
    );
    for file in &want {
        assert!(
            list.lines().any(|l| l == file),
            "rpm -qlp lacks {file}:\n{list}"
        );
    }
    let long = ok(Command::new("rpm").arg("-qlvp").arg(&pkgs.rpm[0]));
    assert_root_only(&String::from_utf8(long.stdout).unwrap(), (2, 3));
    let config =
        String::from_utf8(ok(Command::new("rpm").arg("-qcp").arg(&pkgs.rpm[0])).stdout).unwrap();
    assert_eq!(config.trim(), "/etc/maid/maid.toml");

    let root = Chroot::new();
    let dir = root.dir.path().to_str().unwrap().to_string();
    let rpm = |args: &[&str]| {
        ok(Command::new("rpm")
            .args(["--root", &dir, "--nodeps"])
            .args(args))
    };
    ok(Command::new("rpm").args(["--root", &dir, "--initdb"]));
    rpm(&["-i", pkgs.rpm[0].to_str().unwrap()]);
    assert_installed(&root);
    assert_runs_locally(&root);

    let config_path = root.path("/etc/maid/maid.toml");
    let edited = format!("{}\n# the operator's own line\n", maid_config::TEMPLATE);
    std::fs::write(&config_path, &edited).unwrap();
    std::fs::write(root.path("/var/lib/maid/minion.key"), "kept").unwrap();
    rpm(&["-U", pkgs.rpm[1].to_str().unwrap()]);
    let q = String::from_utf8(ok(Command::new("rpm").args(["--root", &dir, "-q", "maid"])).stdout)
        .unwrap();
    assert!(q.contains("-2."), "{q}");
    assert_eq!(std::fs::read_to_string(&config_path).unwrap(), edited);
    assert_eq!(
        std::fs::read_to_string(root.path("/var/lib/maid/minion.key")).unwrap(),
        "kept"
    );

    rpm(&["-e", "maid"]);
    assert!(!root.path("/usr/bin/maid").exists());
    // A changed config is saved aside, as rpm does; the state is kept.
    assert_eq!(
        std::fs::read_to_string(root.path("/etc/maid/maid.toml.rpmsave")).unwrap(),
        edited
    );
    assert!(root.path("/var/lib/maid/minion.key").exists());
}
