//! What the agent offers a plugin: logging, grains, the job's retcode,
//! running programs and reading `salt://` sources.
//!
//! Every call that reaches outside the sandbox is checked against the
//! plugin's grants; a refusal comes back as [`Error`] of kind
//! [`Denied`](crate::ErrorKind::Denied), which `?` passes straight to the
//! job's return.

use std::time::Duration;

use serde_json::{Map, Value};

use crate::Error;
use crate::bindings::maid::plugin::host as wit;

pub use wit::Level;

/// Write a line into the agent's log, tagged with this plugin and the jid.
pub fn log(level: Level, message: &str) {
    wit::log(level, message);
}

/// [`log`] at info level.
pub fn info(message: &str) {
    wit::log(Level::Info, message);
}

/// [`log`] at warn level.
pub fn warn(message: &str) {
    wit::log(Level::Warn, message);
}

/// [`log`] at debug level.
pub fn debug(message: &str) {
    wit::log(Level::Debug, message);
}

/// The minion's grains (`os`, `kernel`, `id`, ... and the operator's own).
pub fn grains() -> Map<String, Value> {
    serde_json::from_str(&wit::grains()).unwrap_or_default()
}

/// The minion's pillar for this job (compiled by the master, sealed to
/// this maid's key): `{}` when the job carries none. Needs the `pillar`
/// grant.
pub fn pillar() -> Result<Map<String, Value>, Error> {
    let text = wit::pillar()?;
    serde_json::from_str(&text).map_err(|e| Error::failed(e.to_string(), 1))
}

/// End the job with `retcode` while still returning a value, as Salt
/// modules do with `__context__["retcode"]`.
pub fn set_retcode(retcode: i32) {
    wit::set_retcode(retcode);
}

/// A program to run through the host's `exec` capability.
#[derive(Debug, Clone)]
pub struct Command {
    request: wit::ExecRequest,
}

/// What a program did.
#[derive(Debug, Clone)]
pub struct Output {
    /// Process id the program ran as.
    pub pid: u32,
    /// Exit status; 128 + the signal for a program killed by one.
    pub retcode: i32,
    /// Standard output (with standard error when merged).
    pub stdout: Vec<u8>,
    /// Standard error, unless merged into standard output.
    pub stderr: Vec<u8>,
    /// Killed for running past its timeout.
    pub timed_out: bool,
    /// Output beyond the agent's capture limit was dropped.
    pub truncated: bool,
}

impl Output {
    /// Standard output as text (invalid UTF-8 replaced).
    pub fn stdout_lossy(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// Standard error as text (invalid UTF-8 replaced).
    pub fn stderr_lossy(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
}

impl Command {
    /// Run `program` (an absolute path, or a name looked up in `PATH`).
    pub fn new(program: impl Into<String>) -> Self {
        Self {
            request: wit::ExecRequest {
                argv: vec![program.into()],
                cwd: None,
                env: Vec::new(),
                stdin: None,
                merge_stderr: false,
                timeout_ms: None,
                runas: None,
            },
        }
    }

    /// Run `argv[0]` with the rest as its arguments.
    pub fn from_argv(argv: Vec<String>) -> Self {
        let mut cmd = Self::new(String::new());
        cmd.request.argv = argv;
        cmd
    }

    /// Add one argument.
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.request.argv.push(arg.into());
        self
    }

    /// Add arguments.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.request.argv.extend(args.into_iter().map(Into::into));
        self
    }

    /// Run in `dir`, which must lie inside a directory granted to the plugin.
    pub fn cwd(mut self, dir: impl Into<String>) -> Self {
        self.request.cwd = Some(dir.into());
        self
    }

    /// Set an environment variable on top of the scrubbed environment.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.request.env.push((key.into(), value.into()));
        self
    }

    /// Feed `bytes` to the program's standard input.
    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.request.stdin = Some(bytes.into());
        self
    }

    /// Interleave standard error into standard output.
    pub fn merge_stderr(mut self, merge: bool) -> Self {
        self.request.merge_stderr = merge;
        self
    }

    /// Run as `user` (needs the `runas` grant and an agent running as root).
    pub fn runas(mut self, user: impl Into<String>) -> Self {
        self.request.runas = Some(user.into());
        self
    }

    /// Kill the program after `timeout`.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.request.timeout_ms = Some(timeout.as_millis().try_into().unwrap_or(u64::MAX));
        self
    }

    /// Run the program and wait for it.
    pub fn output(&self) -> Result<Output, Error> {
        let out = wit::exec(&self.request)?;
        Ok(Output {
            pid: out.pid,
            retcode: out.retcode,
            stdout: out.stdout,
            stderr: out.stderr,
            timed_out: out.timed_out,
            truncated: out.truncated,
        })
    }
}

/// An open `salt://` source; read it with [`std::io::Read`].
#[derive(Debug)]
pub struct Source {
    inner: wit::Source,
    size: u64,
    sha256: String,
}

impl Source {
    /// Size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Lower-case hex SHA-256 of the content, as the host knows it. Check it
    /// against what you read.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }
}

impl std::io::Read for Source {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let want = u32::try_from(buf.len()).unwrap_or(u32::MAX);
        let chunk = self
            .inner
            .read(want)
            .map_err(|e| std::io::Error::other(Error::from(e).message))?;
        let n = chunk.len().min(buf.len());
        buf[..n].copy_from_slice(&chunk[..n]);
        Ok(n)
    }
}

/// Open `url` (`salt://path`, or `salt://path?saltenv=NAME` for an
/// environment other than `base`). `Ok(None)` when the source does not
/// exist.
pub fn fetch(url: &str) -> Result<Option<Source>, Error> {
    Ok(wit::fetch(url)?.map(|inner| {
        let info = inner.info();
        Source {
            inner,
            size: info.size,
            sha256: info.sha256,
        }
    }))
}

/// What `salt://` holds under a prefix, as Salt's file server lists it:
/// paths relative to `salt://`, `/`-separated, each list sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    /// Every file (Salt's `cp.list_master`).
    pub files: Vec<String>,
    /// Every directory, empty or not (Salt's `cp.list_master_dirs`).
    pub dirs: Vec<String>,
}

/// The `salt://` files and directories of environment `saltenv` whose
/// path begins with `prefix` (a string prefix after its leading and
/// trailing `/` are taken off, as Salt filters; `""` for everything).
/// Only what this plugin's `fetch` grant would open is listed; without the
/// `fetch` capability it is `Denied`.
pub fn list(saltenv: &str, prefix: &str) -> Result<Listing, Error> {
    let wit::Listing { files, dirs } = wit::list_sources_in(saltenv, prefix)?;
    Ok(Listing { files, dirs })
}

/// A directory this plugin may use through `std::fs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantedDir {
    /// Absolute path (the same on the host and in the plugin).
    pub path: std::path::PathBuf,
    /// Whether files in it may be created and written.
    pub writable: bool,
}

/// The directories the agent preopened for this plugin.
pub fn dirs() -> Vec<GrantedDir> {
    wit::dirs()
        .into_iter()
        .map(|d| GrantedDir {
            path: d.path.into(),
            writable: d.writable,
        })
        .collect()
}

/// The manifest of every module loaded on this agent, sorted by module
/// name (what `sys.list_functions` reports).
pub fn modules() -> Vec<crate::Manifest> {
    wit::modules()
}

/// Where [`Command`] would find `program` on the grants' `PATH`, when the
/// grants would start it (Salt's `cmd.which`). Needs the `exec`
/// capability; `Ok(None)` when it is missing or not allowed.
pub fn which(program: &str) -> Result<Option<String>, Error> {
    Ok(wit::which(program)?)
}

pub use wit::FileStat;

/// `stat` a path in a granted directory, following links (inside the
/// granted directories only) or not: owner, group and permission bits,
/// which `std::fs` cannot see under WASI. Needs `fs-read`.
pub fn stat(path: &str, follow: bool) -> Result<FileStat, Error> {
    Ok(wit::stat(path, follow)?)
}

/// Set the permission bits of a path in a directory granted read-write.
/// Needs `fs-write`.
pub fn set_mode(path: &str, mode: u32) -> Result<(), Error> {
    Ok(wit::set_mode(path, mode)?)
}

/// Create the symbolic link `link` (in a directory granted read-write)
/// pointing at `target`, which may be absolute. Needs `fs-write`.
pub fn symlink(target: &str, link: &str) -> Result<(), Error> {
    Ok(wit::symlink(target, link)?)
}

/// The whole of a file the grants name by path (`files`, e.g.
/// `/proc/meminfo`). Needs `fs-read`.
pub fn read_file(path: &str) -> Result<Vec<u8>, Error> {
    Ok(wit::read_file(path)?)
}

/// This host's network interfaces by name, in the shape of Salt's
/// `network.interfaces`.
pub fn interfaces() -> Map<String, Value> {
    serde_json::from_str(&wit::interfaces()).unwrap_or_default()
}

/// The jobs this maid is running, as Salt's job data (`saltutil.running`).
/// Needs the `jobs` grant.
pub fn running_jobs() -> Result<Vec<Value>, Error> {
    let text = wit::running_jobs()?;
    serde_json::from_str(&text).map_err(|e| Error::failed(e.to_string(), 1))
}

/// Send `signal` to job `jid` (`saltutil.signal_job`); Salt's words when
/// it was sent, `None` when no such job runs here. Needs the `jobs` grant.
pub fn signal_job(jid: &str, signal: i32) -> Result<Option<String>, Error> {
    Ok(wit::signal_job(jid, signal)?)
}

/// Set grain `key` to `value`, or remove it (`None`), as Salt's
/// `grains.setval` does: kept across restarts and seen by targeting at
/// once. Needs the `set_grains` grant.
pub fn set_grain(key: &str, value: Option<&Value>) -> Result<(), Error> {
    Ok(wit::set_grain(key, value.map(Value::to_string).as_deref())?)
}

pub use wit::CallFailure;

/// What a function run with [`call`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum Called {
    /// It returned `ret`, leaving `retcode` (0, or what it set).
    Returned { ret: Value, retcode: i32 },
    /// It failed: how, Salt's message for it, and its retcode.
    Failed {
        failure: CallFailure,
        message: String,
        retcode: i32,
    },
}

/// Run another module's function on this maid (`module.function`), as a
/// Salt module calls `__salt__[...]`: in its own instance, under its own
/// plugin's grants, within what is left of this call's time. Needs the
/// `call` grant to name it; a refusal, by that grant or by the function's
/// own grants, is an [`Error`] of kind `Denied`. A function run this way
/// cannot run a third.
pub fn call(fun: &str, args: &[Value], kwargs: &Map<String, Value>) -> Result<Called, Error> {
    let args = Value::Array(args.to_vec()).to_string();
    let kwargs = Value::Object(kwargs.clone()).to_string();
    let out = wit::call(fun, &args, &kwargs)?;
    let ret: Value = serde_json::from_str(&out.ret).unwrap_or(Value::String(out.ret));
    Ok(match out.failure {
        None => Called::Returned {
            ret,
            retcode: out.retcode,
        },
        Some(failure) => Called::Failed {
            failure,
            message: match ret {
                Value::String(s) => s,
                other => other.to_string(),
            },
            retcode: out.retcode,
        },
    })
}
