//! The `exec` capability: start a program on behalf of a plugin, under the
//! plugin's grants.
//!
//! The program is looked up on the grant's `PATH`, resolved to its real
//! path (links and `..` followed) and checked there against the allow-list
//! and, without the shell grant, the classification of programs that start
//! no other program (`programs`); the real path is what runs. Its
//! environment is the variables the grants pass through and those the job
//! sets that the `env` grant names, never one that changes
//! what a program loads (`policy::HIJACK_ENV`). Its working directory must
//! lie inside a granted directory. It runs in its own process group so
//! a timeout kills everything it started, and its output is captured up to
//! a bound.

use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;

use super::bindings::maid::plugin::host::{ExecOutput, ExecRequest, HostError};
use super::denied::Denied;
use super::jobs::JobTable;
use super::policy::Grants;
use crate::config::Limits;

/// `PATH` used to look programs up when the grants pass none through.
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Kills the program's whole process group if the call is abandoned (job
/// timeout, agent shutdown) before the program ends.
struct GroupGuard(Option<i32>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pgid) = self.0.take() {
            kill_group(pgid);
        }
    }
}

/// Takes a program's process group off its job's list when dropped.
struct Listed<'a>(&'a JobTable, &'a str, i32);

impl Drop for Listed<'_> {
    fn drop(&mut self) {
        self.0.program_ended(self.1, self.2);
    }
}

fn kill_group(pgid: i32) {
    use nix::sys::signal::{Signal, killpg};
    use nix::unistd::Pid;
    let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
}

fn failed(msg: impl Into<String>) -> HostError {
    HostError::Failed(msg.into())
}

/// Resolve `program` to an absolute path: as given when it contains a `/`
/// (it must then be absolute), else through `path_var`.
fn resolve(program: &str, path_var: &OsStr) -> Result<PathBuf, HostError> {
    if program.contains('/') {
        let p = Path::new(program);
        if !p.is_absolute() {
            return Err(HostError::Denied(format!(
                "{program}: a program with a '/' must be an absolute path"
            )));
        }
        return Ok(p.to_path_buf());
    }
    which::which_in(program, Some(path_var), "/")
        .map_err(|_| failed(format!("{program}: command not found")))
}

/// `program` looked up as `exec` looks it up — on the grant's `PATH`,
/// never the job's — and checked against the grants: the path it was
/// found at and its real path (links and `..` resolved), which is what
/// runs.
fn locate(grants: &Grants, program: &str) -> Result<(PathBuf, PathBuf), HostError> {
    let path_var = grants
        .passed_env
        .get("PATH")
        .unwrap_or(OsStr::new(DEFAULT_PATH));
    let resolved = resolve(program, path_var)?;
    let real = resolved
        .canonicalize()
        .map_err(|e| failed(format!("{program}: {e}")))?;
    grants
        .check_program(&resolved, &real)
        .map_err(HostError::from)?;
    Ok((resolved, real))
}

/// Where `exec` would find `program`, when the grants would start it
/// (`host.which`): `None` when it is not on the grant's `PATH` or not
/// allowed, so the answer says nothing of programs outside the allow-list.
pub(crate) fn which(grants: &Grants, program: &str) -> Result<Option<String>, HostError> {
    if grants.exec.is_empty() {
        return Err(HostError::Denied(
            "exec is not granted to this plugin".into(),
        ));
    }
    Ok(locate(grants, program)
        .ok()
        .map(|(found, _)| found.to_string_lossy().into_owned()))
}

/// The user a program may run as, after the grant and root checks.
fn runas_user(grants: &Grants, name: &str) -> Result<nix::unistd::User, HostError> {
    if !grants.runas.is_match(name) {
        return Err(HostError::Denied(format!(
            "runas={name} is not granted to this plugin"
        )));
    }
    if !nix::unistd::geteuid().is_root() {
        return Err(HostError::Denied(format!(
            "runas={name} needs the agent to run as root"
        )));
    }
    nix::unistd::User::from_name(name)
        .map_err(|e| failed(format!("runas={name}: {e}")))?
        .ok_or_else(|| failed(format!("runas={name}: no such user")))
}

/// Read everything, keep at most `cap` bytes; the flag says whether more
/// came. The kept bytes are read straight into the returned buffer, which
/// grows with what arrives: a command that prints nothing costs no buffer.
async fn read_capped(r: impl AsyncRead + Unpin, cap: usize) -> (Vec<u8>, bool) {
    let mut kept = Vec::new();
    let mut head = r.take(u64::try_from(cap).unwrap_or(u64::MAX));
    // A read error ends the output, as end-of-file does; what came before
    // it is kept.
    let _ = head.read_to_end(&mut kept).await;
    let mut rest = head.into_inner();
    let mut probe = [0u8; 512];
    if !matches!(rest.read(&mut probe).await, Ok(1..)) {
        return (kept, false);
    }
    // Past the bound: drain the pipe so the program is not blocked on a
    // full one, and keep nothing more.
    let mut sink = vec![0u8; 64 << 10];
    while let Ok(1..) = rest.read(&mut sink).await {}
    (kept, true)
}

/// Run one program for a plugin; `started` is set to the real path of
/// what the grants let start (for the audit record).
/// Its process group is listed with job `jid` in `jobs` while it runs, so
/// `saltutil.signal_job` reaches it.
pub(crate) async fn run(
    grants: &Grants,
    limits: &Limits,
    deadline: Instant,
    req: ExecRequest,
    (jobs, jid): (&JobTable, &str),
    started: &mut Option<PathBuf>,
) -> Result<ExecOutput, HostError> {
    let checked = check(grants, &req)?;
    *started = Some(checked.real.clone());
    let (mut cmd, merged_reader) = command(grants, &checked, &req)?;
    let mut child = cmd
        .spawn()
        .map_err(|e| failed(format!("{}: {e}", checked.real.display())))?;
    // The parent's copies of the pipe's write ends live in `cmd`; close
    // them or the merged reader never sees end-of-file.
    drop(cmd);
    let pid = child.id().unwrap_or_default();
    let mut guard = GroupGuard(i32::try_from(pid).ok());
    let _listed = i32::try_from(pid).ok().map(|pgid| {
        jobs.program_started(jid, pgid);
        Listed(jobs, jid, pgid)
    });

    if let (Some(bytes), Some(mut stdin)) = (req.stdin, child.stdin.take()) {
        tokio::spawn(async move {
            let _ = stdin.write_all(&bytes).await;
        });
    }
    let mut limit = deadline.saturating_duration_since(Instant::now());
    if let Some(ms) = req.timeout_ms {
        limit = limit.min(Duration::from_millis(ms));
    }
    let cap = limits.max_output_bytes;
    let (timed_out, result) = wait_capped(child, merged_reader, cap, limit, &mut guard).await;
    guard.0 = None;
    let Some(((stdout, out_trunc), (stderr, err_trunc), status)) = result else {
        return Ok(ExecOutput {
            pid,
            retcode: -9,
            stdout: Vec::new(),
            stderr: Vec::new(),
            timed_out,
            truncated: false,
        });
    };
    let status = status.map_err(|e| failed(format!("wait: {e}")))?;
    let retcode = status
        .code()
        .unwrap_or_else(|| -status.signal().unwrap_or(0));
    Ok(ExecOutput {
        pid,
        retcode,
        stdout,
        stderr,
        timed_out,
        truncated: out_trunc || err_trunc,
    })
}

/// A request the grants allow, resolved: what runs, where, as whom.
struct Checked<'a> {
    /// The name it was asked by, which the program sees as `argv[0]`.
    program: &'a str,
    /// The real path that was checked, and runs.
    real: PathBuf,
    cwd: PathBuf,
    user: Option<nix::unistd::User>,
}

/// Every check of the grants, before anything starts: `exec`, the job's
/// variables, the program (links and `..` resolved: what is checked is
/// what runs), the working directory and `runas`.
fn check<'a>(grants: &Grants, req: &'a ExecRequest) -> Result<Checked<'a>, HostError> {
    let Some(program) = req.argv.first().filter(|p| !p.is_empty()) else {
        return Err(failed("argv is empty"));
    };
    if grants.exec.is_empty() {
        return Err(Denied::NotGranted("exec").into());
    }
    grants.check_job_env(&req.env).map_err(HostError::from)?;
    let (_, real) = locate(grants, program)?;
    let cwd = match &req.cwd {
        Some(dir) => grants.check_cwd(Path::new(dir)).map_err(HostError::from)?,
        // The first granted directory that exists (a grant may name one
        // made later), else the root.
        None => grants
            .dirs
            .iter()
            .map(|d| &d.path)
            .find(|p| p.is_dir())
            .cloned()
            .unwrap_or_else(|| PathBuf::from("/")),
    };
    let user = match &req.runas {
        Some(name) => Some(runas_user(grants, name)?),
        None => None,
    };
    Ok(Checked {
        program,
        real,
        cwd,
        user,
    })
}

/// The command for a checked request: in a process group of its own,
/// with only the granted and the job's variables, killed when dropped;
/// with `merge_stderr`, both streams on one pipe, whose reader comes back.
fn command(
    grants: &Grants,
    checked: &Checked,
    req: &ExecRequest,
) -> Result<(tokio::process::Command, Option<pipe::Receiver>), HostError> {
    let mut cmd = tokio::process::Command::new(&checked.real);
    // The program sees the name it was asked by, as from a shell.
    cmd.arg0(checked.program)
        .args(&req.argv[1..])
        .env_clear()
        .envs(grants.passed_env.vars())
        .envs(req.env.iter().cloned())
        .current_dir(&checked.cwd)
        .process_group(0)
        .kill_on_drop(true)
        .stdin(if req.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        });
    if let Some(u) = &checked.user {
        // As root, std drops the supplementary groups when it sets the uid.
        cmd.uid(u.uid.as_raw())
            .gid(u.gid.as_raw())
            .env("USER", &u.name)
            .env("LOGNAME", &u.name)
            .env("HOME", &u.dir);
    }
    if !req.merge_stderr {
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        return Ok((cmd, None));
    }
    let (reader, writer) = std::io::pipe().map_err(|e| failed(format!("pipe: {e}")))?;
    let writer2 = writer
        .try_clone()
        .map_err(|e| failed(format!("pipe: {e}")))?;
    cmd.stdout(writer).stderr(writer2);
    // Read on this runtime, as the separate pipes are: a blocking read
    // on another thread cost two thread hand-offs per command.
    let reader = pipe::Receiver::from_owned_fd(OwnedFd::from(reader))
        .map_err(|e| failed(format!("pipe: {e}")))?;
    Ok((cmd, Some(reader)))
}

/// What a child wrote (each stream capped at `cap` bytes, with whether it
/// was cut) and how it ended, within `limit`; past it the process group is
/// killed and what it wrote is still read, for two seconds at most.
/// `(timed out, None)` when even that did not end.
async fn wait_capped(
    mut child: tokio::process::Child,
    merged_reader: Option<pipe::Receiver>,
    cap: usize,
    limit: Duration,
    guard: &mut GroupGuard,
) -> (bool, Option<Collected>) {
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let collect = async {
        let out = async {
            match (merged_reader, stdout) {
                (Some(reader), _) => read_capped(reader, cap).await,
                (None, Some(s)) => read_capped(s, cap).await,
                (None, None) => Default::default(),
            }
        };
        let err = async {
            match stderr {
                Some(s) => read_capped(s, cap).await,
                None => Default::default(),
            }
        };
        tokio::join!(out, err, child.wait())
    };
    tokio::pin!(collect);
    match tokio::time::timeout(limit, &mut collect).await {
        Ok(r) => (false, Some(r)),
        Err(_) => {
            if let Some(pgid) = guard.0.take() {
                kill_group(pgid);
            }
            // Whatever the killed group wrote is still worth returning; do
            // not wait on a straggler that escaped the group.
            let late = tokio::time::timeout(Duration::from_secs(2), &mut collect).await;
            (true, late.ok())
        }
    }
}

/// Each stream's bytes with whether they were cut, and the exit status.
type Collected = (
    (Vec<u8>, bool),
    (Vec<u8>, bool),
    std::io::Result<std::process::ExitStatus>,
);

#[cfg(test)]
mod tests {
    use super::read_capped;

    async fn capped(input: &[u8], cap: usize) -> (Vec<u8>, bool) {
        read_capped(input, cap).await
    }

    #[tokio::test]
    async fn output_is_kept_up_to_the_cap() {
        assert_eq!(capped(b"", 4).await, (Vec::new(), false));
        assert_eq!(capped(b"abc", 4).await, (b"abc".to_vec(), false));
        assert_eq!(capped(b"abcd", 4).await, (b"abcd".to_vec(), false));
        assert_eq!(capped(b"abcde", 4).await, (b"abcd".to_vec(), true));
        assert_eq!(capped(b"abc", 0).await, (Vec::new(), true));
    }

    #[tokio::test]
    async fn output_past_the_cap_is_drained() {
        // More than the probe and the drain's buffer hold at once.
        let big: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
        let mut reader = &big[..];
        let (kept, truncated) = read_capped(&mut reader, 1000).await;
        assert_eq!((kept.as_slice(), truncated), (&big[..1000], true));
        assert!(reader.is_empty(), "{} bytes left unread", reader.len());
        let (kept, truncated) = capped(&big, big.len()).await;
        assert_eq!((kept, truncated), (big, false));
    }
}
