//! [`RedisServer`]: one `redis-server` child, started on a free port,
//! restarted in place, and its log for panic messages.

use std::fmt::Write as _;
use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use tempfile::TempDir;

use super::bins::redis_server_bin;
use super::client::{connect, parse_info, url_for};
use super::ports::free_port;
use super::spawn::{kill_child, spawn};

/// How long a single server may take to answer PING after it is started.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(20);
/// How many log lines of each server go into a panic message.
const LOG_LINES: usize = 200;

/// One `redis-server` child on 127.0.0.1 at a free port, in its own
/// temporary directory. Killed when dropped.
pub struct RedisServer {
    pub(super) child: Option<Child>,
    pub(super) port: u16,
    pub(super) dir: TempDir,
    /// Extra arguments, reused by [`RedisServer::restart`].
    pub(super) extra: Vec<String>,
    /// Optional label used in panic messages ("sentinel 2", "node 1"...).
    name: String,
}

/// Why a start attempt failed.
enum StartError {
    /// The port was taken between picking and binding it.
    PortTaken,
    Other(String),
}

impl RedisServer {
    /// A plain server.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// A server with extra `redis-server` arguments after the defaults
    /// (later arguments override earlier ones), e.g. `&["--maxmemory", "1mb"]`.
    pub fn start_with(args: &[&str]) -> Self {
        Self::start_named("redis", free_port, args)
    }

    pub(super) fn start_named(name: &str, pick: fn() -> u16, args: &[&str]) -> Self {
        let mut server = Self::unstarted(name);
        server.extra = args.iter().map(|s| s.to_string()).collect();
        server.start_on_free_port(pick, |_| {});
        server
    }

    /// A handle with its directory but no process yet.
    pub(super) fn unstarted(name: &str) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("maid-redis-")
            .tempdir()
            .expect("create a temporary directory for redis");
        RedisServer {
            child: None,
            port: 0,
            dir,
            extra: Vec::new(),
            name: name.to_owned(),
        }
    }

    /// Starts on a port from `pick`, trying new ports while the chosen one
    /// turns out to be taken. `prepare` runs before each attempt, once the
    /// port is known (to write a configuration file).
    pub(super) fn start_on_free_port(&mut self, pick: fn() -> u16, prepare: impl Fn(&Self)) {
        for _ in 0..20 {
            self.port = pick();
            prepare(self);
            match self.try_start() {
                Ok(()) => return,
                Err(StartError::PortTaken) => continue,
                Err(StartError::Other(why)) => self.fail(&why),
            }
        }
        self.fail("no free port found after 20 attempts")
    }

    /// The configuration file's path when this server is a sentinel.
    pub(super) fn sentinel_conf(&self) -> PathBuf {
        self.dir.path().join("sentinel.conf")
    }

    fn is_sentinel(&self) -> bool {
        self.extra.iter().any(|a| a == "--sentinel")
    }

    fn command(&self) -> Command {
        let dir = self.dir.path();
        let mut cmd = Command::new(redis_server_bin());
        if self.is_sentinel() {
            // The configuration file must be the first argument.
            cmd.arg(self.sentinel_conf());
        }
        cmd.arg("--port")
            .arg(self.port.to_string())
            .args(["--bind", "127.0.0.1"])
            .args(["--daemonize", "no"])
            .args(["--save", ""])
            .args(["--appendonly", "no"])
            .arg("--dir")
            .arg(dir)
            .arg("--logfile")
            .arg(dir.join("redis.log"))
            .args(&self.extra)
            .current_dir(dir)
            .stdin(Stdio::null());
        // Whatever redis prints before its log file is open (bad arguments,
        // config errors) lands here.
        let out = OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("stdout.log"))
            .expect("open redis stdout log");
        let err = out.try_clone().expect("clone redis stdout log");
        cmd.stdout(out).stderr(err);
        cmd
    }

    /// Spawns the server and waits until it answers PING.
    fn try_start(&mut self) -> Result<(), StartError> {
        // Only this attempt's output tells whether it lost the port race
        // (the log files are shared by every start and restart).
        let log_path = self.dir.path().join("redis.log");
        let out_path = self.dir.path().join("stdout.log");
        let len = |p: &Path| fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        let (log_start, out_start) = (len(&log_path), len(&out_path));
        let child = spawn(self.command())
            .map_err(|e| StartError::Other(format!("spawn redis-server failed: {e}")))?;
        self.child = Some(child);
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            // redis-server binds (or fails to) within milliseconds; sleeping
            // first usually catches a failed bind before probing the port,
            // where a foreign listener could stall the probe.
            thread::sleep(Duration::from_millis(50));
            let child = self.child.as_mut().unwrap();
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                let since = |p: &Path, start: u64| {
                    let all = fs::read(p).unwrap_or_default();
                    let start = usize::try_from(start).unwrap_or(0).min(all.len());
                    String::from_utf8_lossy(&all[start..]).into_owned()
                };
                let out = since(&log_path, log_start) + &since(&out_path, out_start);
                if out.contains("Address already in use") {
                    return Err(StartError::PortTaken);
                }
                return Err(StartError::Other(format!(
                    "redis-server exited during startup ({status})"
                )));
            }
            let pid = child.id();
            if self.answers_as(pid).is_ok() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                let last = self.answers_as(pid).err().unwrap_or_default();
                kill_child(&mut self.child);
                return Err(StartError::Other(format!(
                    "redis-server did not answer PING within {STARTUP_TIMEOUT:?} (last error: {last})"
                )));
            }
        }
    }

    /// The server on our port answers PING and is our child (not some
    /// other process that got the port).
    fn answers_as(&self, pid: u32) -> Result<(), String> {
        let mut con = connect(self.port).map_err(|e| e.to_string())?;
        let pong: String = redis::cmd("PING")
            .query(&mut con)
            .map_err(|e| e.to_string())?;
        if pong != "PONG" {
            return Err(format!("PING answered {pong:?}"));
        }
        let text: String = redis::cmd("INFO")
            .arg("server")
            .query(&mut con)
            .map_err(|e| e.to_string())?;
        match parse_info(&text).get("process_id") {
            Some(p) if *p == pid.to_string() => Ok(()),
            other => Err(format!(
                "port {} is served by process {other:?}, not our redis-server {pid}",
                self.port
            )),
        }
    }

    fn fail(&mut self, why: &str) -> ! {
        kill_child(&mut self.child);
        panic!("{}", self.describe_failure(why));
    }

    fn describe_failure(&self, why: &str) -> String {
        format!(
            "{} on 127.0.0.1:{} ({}): {why}\n{}",
            self.name,
            self.port,
            self.dir.path().display(),
            self.log_report()
        )
    }

    /// The log for a panic message: the server's log file plus anything it
    /// printed before opening it.
    pub(super) fn log_report(&self) -> String {
        let mut out = format!(
            "----- {} (port {}) log -----\n{}",
            self.name,
            self.port,
            tail(&self.log(), LOG_LINES)
        );
        let early = fs::read_to_string(self.dir.path().join("stdout.log")).unwrap_or_default();
        if !early.trim().is_empty() {
            let _ = write!(
                out,
                "----- {} stdout/stderr -----\n{}",
                self.name,
                tail(&early, 50)
            );
        }
        out
    }

    /// The port it listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its process id (0 when it is not running), for reading its CPU time
    /// and memory in `/proc`.
    pub fn pid(&self) -> i32 {
        self.child
            .as_ref()
            .and_then(|c| i32::try_from(c.id()).ok())
            .unwrap_or(0)
    }

    /// `redis://127.0.0.1:<port>/`.
    pub fn url(&self) -> String {
        url_for(self.port)
    }

    /// maid's configuration for this one server.
    pub fn config(&self) -> maid_bus::RedisConfig {
        maid_bus::RedisConfig {
            url: Some(self.url()),
            ..Default::default()
        }
    }

    /// A client for this server.
    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).expect("valid redis url")
    }

    /// Its working directory (holds `redis.log`, `nodes.conf`...).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Whether the process is running (not killed, not exited).
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// SIGKILLs the server and waits for it to be gone. Idempotent.
    pub fn kill(&mut self) {
        kill_child(&mut self.child);
    }

    /// Starts the server again on the same port, directory and arguments
    /// (kills it first if it is still running) and waits for PING.
    pub fn restart(&mut self) {
        self.kill();
        // The port may be briefly taken by someone else (e.g. an outgoing
        // connection's ephemeral port): keep trying the same port.
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            match self.try_start() {
                Ok(()) => return,
                Err(StartError::PortTaken) if Instant::now() < deadline => {
                    thread::sleep(Duration::from_millis(200));
                }
                Err(StartError::PortTaken) => self.fail("restart: the port stayed in use"),
                Err(StartError::Other(why)) => self.fail(&format!("restart: {why}")),
            }
        }
    }

    /// The server's log file (all of it, across restarts).
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("redis.log")).unwrap_or_default()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        kill_child(&mut self.child);
    }
}

/// The last `lines` lines of `text`, saying how many were left out.
fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    let start = all.len().saturating_sub(lines);
    let mut out = String::new();
    if start > 0 {
        let _ = writeln!(out, "[... {start} earlier lines ...]");
    }
    for line in &all[start..] {
        out.push_str(line);
        out.push('\n');
    }
    out
}
