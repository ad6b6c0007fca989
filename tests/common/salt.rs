//! Real Salt for the differential tests: the Salt 3008.4 (and pepper 0.7.6,
//! and the progressbar `salt -p` draws with) venv that `./dev` makes, and `tests/salt/oracle.py`, which answers from
//! Salt's own code.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::Value;

/// The Salt release every differential test compares against.
pub const SALT_VERSION: &str = "3008.4";

/// The venv: `$MAID_SALT_VENV`, else `target/salt-venv` in the workspace.
pub fn venv() -> PathBuf {
    let dir = std::env::var_os("MAID_SALT_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/salt-venv"));
    let found = std::fs::read_dir(dir.join("lib"))
        .ok()
        .into_iter()
        .flatten()
        .flatten()
        .any(|py| {
            let site = py.path().join("site-packages");
            site.join(format!("salt-{SALT_VERSION}.dist-info")).is_dir()
                && site.join("progressbar-2.5.dist-info").is_dir()
                && site.join("PyNaCl-1.5.0.dist-info").is_dir()
        });
    assert!(
        found,
        "Salt {SALT_VERSION} is not installed in {0}; `./dev test` makes it, or: \
         python3 -m venv {0} && {0}/bin/pip install salt=={SALT_VERSION} salt-pepper==0.7.6 \
         cherrypy==18.10.0 progressbar==2.5 pynacl==1.5.0",
        dir.display()
    );
    dir
}

/// Ask Salt: run `oracle.py <command>` with `input` on stdin.
pub fn oracle(command: &str, input: &Value) -> Value {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/salt/oracle.py");
    let mut child = Command::new(venv().join("bin/python"))
        .arg(script)
        .arg(command)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start Salt's python");
    let body = serde_json::to_vec(input).unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&body));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(
        out.status.success(),
        "oracle.py {command} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("oracle.py writes JSON")
}

/// A real Salt 3008.4 fleet on loopback — a salt-master, salt-minions and,
/// with `api`, a salt-api (rest_cherrypy) — from `tests/salt/realsalt.py`.
/// Closing its stdin (on drop) stops every daemon.
pub struct RealSalt {
    child: std::process::Child,
    /// realsalt.py's answers, a JSON line each.
    answers: std::io::BufReader<std::process::ChildStdout>,
    /// salt-api's address, with `api`.
    pub api_url: Option<String>,
    /// The master's configuration directory, for `salt -c`.
    pub master_config_dir: PathBuf,
    _dir: tempfile::TempDir,
}

impl RealSalt {
    /// Start minions `ids` (and salt-api, whose `auto` eauth lets `user`
    /// in with any password and every permission); returns once each
    /// minion answers `test.ping`.
    pub fn start(ids: &[&str], api: bool, user: &str) -> RealSalt {
        use std::io::BufRead;
        let dir = tempfile::tempdir().unwrap();
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/salt/realsalt.py");
        let mut cmd = Command::new(venv().join("bin/python"));
        cmd.arg(script).arg("--dir").arg(dir.path()).args([
            "--minions",
            &ids.join(","),
            "--user",
            user,
        ]);
        if api {
            cmd.arg("--api");
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start tests/salt/realsalt.py");
        let mut line = String::new();
        let mut answers = std::io::BufReader::new(child.stdout.take().unwrap());
        answers.read_line(&mut line).unwrap();
        let ready: Value = serde_json::from_str(&line).unwrap_or_else(|_| {
            panic!("realsalt.py did not start Salt (its log is above on stderr): {line:?}")
        });
        let master_config = PathBuf::from(ready["master_config"].as_str().unwrap());
        RealSalt {
            child,
            answers,
            api_url: ready["api_url"].as_str().map(str::to_string),
            master_config_dir: master_config.parent().unwrap().to_path_buf(),
            _dir: dir,
        }
    }
}

impl RealSalt {
    /// Stop the minion `id`, as an operator stopping its service would;
    /// its key stays accepted and its grains cached on the master.
    pub fn stop_minion(&mut self, id: &str) {
        use std::io::BufRead;
        let stdin = self.child.stdin.as_mut().expect("realsalt.py's stdin");
        writeln!(stdin, "stop-minion {id}").unwrap();
        stdin.flush().unwrap();
        let mut line = String::new();
        self.answers.read_line(&mut line).unwrap();
        let answer: Value =
            serde_json::from_str(&line).unwrap_or_else(|_| panic!("realsalt.py answered {line:?}"));
        assert_eq!(answer["stopped"], id, "{answer}");
    }
}

impl Drop for RealSalt {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}
