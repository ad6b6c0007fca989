//! A child process for tests and the benchmark: its output in a log file,
//! in its own process group, killed with the group when dropped or when
//! this process dies.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use anyhow::{Context, bail};

/// A child process in its own process group; the group gets SIGKILL when
/// this is dropped, and the child gets it if this process dies first.
pub struct Proc {
    pub name: String,
    child: Child,
    log: PathBuf,
}

impl Proc {
    pub fn spawn(name: &str, cmd: &mut Command, log: PathBuf) -> anyhow::Result<Proc> {
        let out = File::create(&log).with_context(|| format!("create {}", log.display()))?;
        cmd.stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .process_group(0);
        // SAFETY: the closure only makes the prctl(2) system call, which is
        // async-signal-safe, and allocates nothing.
        unsafe {
            cmd.pre_exec(|| {
                nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                    .map_err(std::io::Error::from)
            });
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("start {name} ({:?})", cmd.get_program()))?;
        Ok(Proc {
            name: name.into(),
            child,
            log,
        })
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// An error if the process has exited, with the end of its log.
    pub fn check_alive(&mut self) -> anyhow::Result<()> {
        if let Ok(Some(status)) = self.child.try_wait() {
            bail!(
                "{} exited ({status}); the end of its log ({}):\n{}",
                self.name,
                self.log.display(),
                self.log_tail()
            );
        }
        Ok(())
    }

    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        use nix::sys::signal::{Signal, killpg};
        let _ = killpg(nix::unistd::Pid::from_raw(self.pid()), Signal::SIGKILL);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
