//! Real Redis servers for integration tests, in the spirit of redis-rs's
//! `redis-test` crate: a single server, a sentinel setup (master, replica,
//! three sentinels) and a three-node cluster.
//!
//! Every server is a real `redis-server` child process listening on
//! 127.0.0.1 at a free port, in its own temporary directory, with
//! persistence off. Nothing here touches the system Redis on port 6379.
//! Servers are killed (SIGKILL) and reaped when their handle is dropped; they
//! also get SIGKILL if the test process dies without unwinding (parent-death
//! signal), so an aborted run leaves no strays behind.
//!
//! All functions block (they poll with short sleeps). From an async test,
//! start the servers before doing anything else on the runtime, or inside
//! `tokio::task::spawn_blocking`.
//!
//! If `redis-server` is not installed the helpers panic: tests are never
//! skipped silently.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::net::{Ipv4Addr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// How long a single server may take to answer PING after it is started.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a sentinel setup or a cluster may take to become ready.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// Pause between two polls.
const POLL: Duration = Duration::from_millis(100);
/// Socket timeouts for the helpers' own connections, so a stuck server makes
/// a poll fail instead of hanging the test.
const IO_TIMEOUT: Duration = Duration::from_secs(2);
/// How many log lines of each server go into a panic message.
const LOG_LINES: usize = 200;
/// The system Redis; never hand its port (or its cluster bus port) out.
const SYSTEM_PORTS: [u16; 2] = [6379, 16379];

const INSTALL_HINT: &str = "run `./dev test` (it installs it) or `apt-get install redis-server`";

// ---------------------------------------------------------------------------
// Binaries and ports
// ---------------------------------------------------------------------------

fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| {
            fs::metadata(candidate)
                .map(|m| {
                    m.is_file()
                        && std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0
                })
                .unwrap_or(false)
        })
}

/// `redis-server` on PATH. Panics with an install hint when it is missing.
pub fn redis_server_bin() -> PathBuf {
    find_on_path("redis-server")
        .unwrap_or_else(|| panic!("redis-server is not installed: {INSTALL_HINT}"))
}

/// `redis-cli` on PATH. Panics with an install hint when it is missing.
pub fn redis_cli_bin() -> PathBuf {
    find_on_path("redis-cli")
        .unwrap_or_else(|| panic!("redis-cli is not installed: {INSTALL_HINT}"))
}

/// How to run a sentinel: the program and the arguments that go after the
/// configuration file (`redis-server <conf> --sentinel`, which is what the
/// `redis-sentinel` symlink does).
pub fn redis_sentinel_cmd() -> (PathBuf, Vec<&'static str>) {
    (redis_server_bin(), vec!["--sentinel"])
}

/// Ports handed out in this process; never handed out twice, so two tests
/// running in parallel cannot race for the same port and a restarted node
/// cannot be mistaken for another test's server.
fn handed_out() -> &'static Mutex<HashSet<u16>> {
    static PORTS: OnceLock<Mutex<HashSet<u16>>> = OnceLock::new();
    PORTS.get_or_init(|| Mutex::new(HashSet::from(SYSTEM_PORTS)))
}

fn bindable(port: u16) -> bool {
    TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok()
}

/// A free TCP port on 127.0.0.1 (bind port 0, read it, release it). There is
/// a small window in which something else may take it; the server starters
/// retry on a new port when that happens.
pub fn free_port() -> u16 {
    pick_port(false)
}

/// A free port for a cluster node: its cluster bus port (`port + 10000`)
/// must exist and be free too, and is reserved with it.
fn free_cluster_port() -> u16 {
    pick_port(true)
}

fn pick_port(cluster: bool) -> u16 {
    for _ in 0..1000 {
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|l| l.local_addr())
            .expect("bind 127.0.0.1:0")
            .port();
        let bus = port.checked_add(10_000);
        let mut ports = handed_out().lock().unwrap();
        if ports.contains(&port) {
            continue;
        }
        if cluster {
            match bus {
                Some(bus) if !ports.contains(&bus) && bindable(bus) => {
                    ports.insert(bus);
                }
                _ => continue,
            }
        }
        ports.insert(port);
        return port;
    }
    panic!("could not find a free port on 127.0.0.1");
}

// ---------------------------------------------------------------------------
// Spawning
// ---------------------------------------------------------------------------

type SpawnRequest = (Command, mpsc::Sender<io::Result<Child>>);

/// Spawns `cmd` so that the child gets SIGKILL when this test process dies.
///
/// Linux sends the parent-death signal when the *thread* that forked the
/// child exits, and test threads (or tokio's blocking threads) come and go;
/// so every server is forked from one thread that lives as long as the
/// process.
fn spawn(mut cmd: Command) -> io::Result<Child> {
    static SPAWNER: OnceLock<mpsc::Sender<SpawnRequest>> = OnceLock::new();
    // SAFETY: the closure only makes the prctl(2) system call, which is
    // async-signal-safe, and allocates nothing.
    unsafe {
        cmd.pre_exec(|| {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                .map_err(io::Error::from)
        });
    }
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        thread::Builder::new()
            .name("redis-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("start the redis spawner thread");
        tx
    });
    let (reply_tx, reply_rx) = mpsc::channel();
    spawner
        .send((cmd, reply_tx))
        .expect("redis spawner thread is gone");
    reply_rx.recv().expect("redis spawner thread is gone")
}

fn kill_child(child: &mut Option<Child>) {
    if let Some(mut c) = child.take() {
        let _ = c.kill();
        let _ = c.wait();
    }
}

// ---------------------------------------------------------------------------
// Small Redis helpers (blocking, with timeouts)
// ---------------------------------------------------------------------------

fn url_for(port: u16) -> String {
    format!("redis://127.0.0.1:{port}/")
}

/// A connection to 127.0.0.1:`port` whose reads and writes time out.
fn connect(port: u16) -> redis::RedisResult<redis::Connection> {
    let client = redis::Client::open(url_for(port))?;
    let con = client.get_connection_with_timeout(IO_TIMEOUT)?;
    con.set_read_timeout(Some(IO_TIMEOUT))?;
    con.set_write_timeout(Some(IO_TIMEOUT))?;
    Ok(con)
}

/// Runs one command on 127.0.0.1:`port` over a fresh connection.
fn query<T: redis::FromRedisValue>(port: u16, cmd: &redis::Cmd) -> redis::RedisResult<T> {
    let mut con = connect(port)?;
    cmd.query(&mut con)
}

/// `INFO <section>` as key/value pairs.
fn info(port: u16, section: &str) -> redis::RedisResult<HashMap<String, String>> {
    let text: String = query(port, redis::cmd("INFO").arg(section))?;
    Ok(parse_info(&text))
}

fn parse_info(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect()
}

/// A flat `[k1, v1, k2, v2, ...]` reply (as SENTINEL returns) as a map.
fn flat_map(entry: &[String]) -> HashMap<&str, &str> {
    entry
        .chunks(2)
        .filter(|kv| kv.len() == 2)
        .map(|kv| (kv[0].as_str(), kv[1].as_str()))
        .collect()
}

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

/// Polls `check` every [`POLL`] until it returns `Ok`, or gives up after
/// `timeout` and returns the last error.
fn poll_until<T>(
    timeout: Duration,
    mut check: impl FnMut() -> Result<T, String>,
) -> Result<T, String> {
    let deadline = Instant::now() + timeout;
    loop {
        let err = match check() {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        if Instant::now() >= deadline {
            return Err(err);
        }
        thread::sleep(POLL);
    }
}

// ---------------------------------------------------------------------------
// RedisServer
// ---------------------------------------------------------------------------

/// One `redis-server` child on 127.0.0.1 at a free port, in its own
/// temporary directory. Killed when dropped.
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: TempDir,
    /// Extra arguments, reused by [`RedisServer::restart`].
    extra: Vec<String>,
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

    fn start_named(name: &str, pick: fn() -> u16, args: &[&str]) -> Self {
        let mut server = Self::unstarted(name);
        server.extra = args.iter().map(|s| s.to_string()).collect();
        server.start_on_free_port(pick, |_| {});
        server
    }

    /// A handle with its directory but no process yet.
    fn unstarted(name: &str) -> Self {
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
    fn start_on_free_port(&mut self, pick: fn() -> u16, prepare: impl Fn(&Self)) {
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
    fn sentinel_conf(&self) -> PathBuf {
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
    fn log_report(&self) -> String {
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

// ---------------------------------------------------------------------------
// Sentinel
// ---------------------------------------------------------------------------

/// A master, one replica and three sentinels (quorum 2) watching them.
/// Everything is killed when dropped.
pub struct Sentinel {
    service: String,
    /// Data nodes: index 0 started as master, 1 as its replica.
    nodes: Vec<RedisServer>,
    sentinels: Vec<RedisServer>,
    /// Port of the master killed by the last [`Sentinel::kill_master`].
    killed_master: Option<u16>,
}

impl Sentinel {
    /// The setup with service name `mymaster`.
    pub fn start() -> Self {
        Self::start_with_service("mymaster")
    }

    /// The setup with another service name.
    pub fn start_with_service(service: &str) -> Self {
        // No delay before a diskless full sync (default: 5 s).
        let data_args = ["--repl-diskless-sync-delay", "0"];
        let master = RedisServer::start_named("master", free_port, &data_args);
        let master_port = master.port();
        let mut replica_args = data_args.to_vec();
        let master_port_s = master_port.to_string();
        replica_args.extend(["--replicaof", "127.0.0.1", &master_port_s]);
        let replica = RedisServer::start_named("replica", free_port, &replica_args);
        let mut setup = Sentinel {
            service: service.to_owned(),
            nodes: vec![master, replica],
            sentinels: Vec::new(),
            killed_master: None,
        };

        // Sentinels learn about replicas from the master's INFO, so start
        // them once the replica is attached and in sync.
        let replica_port = setup.nodes[1].port();
        if let Err(e) = poll_until(READY_TIMEOUT, || {
            let m = info(master_port, "replication").map_err(|e| format!("master: {e}"))?;
            let r = info(replica_port, "replication").map_err(|e| format!("replica: {e}"))?;
            let slaves = m.get("connected_slaves").map(String::as_str);
            let link = r.get("master_link_status").map(String::as_str);
            if slaves == Some("1") && link == Some("up") {
                Ok(())
            } else {
                Err(format!(
                    "master connected_slaves={slaves:?}, replica master_link_status={link:?}"
                ))
            }
        }) {
            setup.fail(&format!("replica did not sync: {e}"));
        }

        for i in 0..3 {
            let sentinel = Self::start_sentinel(i, service, master_port);
            setup.sentinels.push(sentinel);
        }
        if let Err(e) = poll_until(READY_TIMEOUT, || setup.check_sentinels(master_port)) {
            setup.fail(&format!("sentinels did not become ready: {e}"));
        }
        setup
    }

    fn start_sentinel(i: usize, service: &str, master_port: u16) -> RedisServer {
        let mut server = RedisServer::unstarted(&format!("sentinel {i}"));
        server.extra = redis_sentinel_cmd()
            .1
            .iter()
            .map(|s| s.to_string())
            .collect();
        // Sentinel rewrites its configuration file, so it lives in the
        // server's own directory; it is written once the port is known.
        server.start_on_free_port(free_port, |server| {
            let conf = format!(
                "port {port}\n\
                 bind 127.0.0.1\n\
                 dir {dir}\n\
                 logfile {dir}/redis.log\n\
                 sentinel monitor {service} 127.0.0.1 {master_port} 2\n\
                 sentinel down-after-milliseconds {service} 1000\n\
                 sentinel failover-timeout {service} 5000\n\
                 sentinel parallel-syncs {service} 1\n",
                port = server.port,
                dir = server.dir.path().display(),
            );
            fs::write(server.sentinel_conf(), conf).expect("write sentinel.conf");
        });
        server
    }

    /// Every sentinel reports `master_port` as master and knows the
    /// replica and the two other sentinels.
    fn check_sentinels(&self, master_port: u16) -> Result<(), String> {
        let svc = &self.service;
        for s in &self.sentinels {
            let p = s.port();
            let addr: Option<(String, String)> = query(
                p,
                redis::cmd("SENTINEL")
                    .arg("get-master-addr-by-name")
                    .arg(svc),
            )
            .map_err(|e| format!("sentinel {p}: get-master-addr-by-name: {e}"))?;
            if addr.as_ref().map(|(_, port)| port.as_str()) != Some(&master_port.to_string()) {
                return Err(format!("sentinel {p} reports master {addr:?}"));
            }
            let replicas: Vec<Vec<String>> =
                query(p, redis::cmd("SENTINEL").arg("replicas").arg(svc))
                    .map_err(|e| format!("sentinel {p}: replicas: {e}"))?;
            let healthy = replicas
                .iter()
                .filter(|r| flat_map(r).get("flags") == Some(&"slave"))
                .count();
            if replicas.len() != 1 || healthy != 1 {
                return Err(format!("sentinel {p} sees replicas {replicas:?}"));
            }
            let others: Vec<Vec<String>> =
                query(p, redis::cmd("SENTINEL").arg("sentinels").arg(svc))
                    .map_err(|e| format!("sentinel {p}: sentinels: {e}"))?;
            if others.len() != self.sentinels.len() - 1 {
                return Err(format!(
                    "sentinel {p} knows {} other sentinels, want {}",
                    others.len(),
                    self.sentinels.len() - 1
                ));
            }
        }
        Ok(())
    }

    /// `redis://127.0.0.1:<port>/` of each sentinel.
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels.iter().map(RedisServer::url).collect()
    }

    /// The sentinel servers themselves (for their logs, or to kill one).
    pub fn sentinels(&mut self) -> &mut [RedisServer] {
        &mut self.sentinels
    }

    /// The monitored service's name (`mymaster` by default).
    pub fn service_name(&self) -> &str {
        &self.service
    }

    /// The master's port as the (first answering) sentinel reports it.
    pub fn master_port(&self) -> u16 {
        self.sentinels
            .iter()
            .find_map(|s| self.reported_master(s.port()).ok())
            .unwrap_or_else(|| self.panic_with_logs("no sentinel reports a master"))
    }

    /// The data nodes' ports: the one started as master, then the one
    /// started as replica.
    pub fn node_ports(&self) -> Vec<u16> {
        self.nodes.iter().map(RedisServer::port).collect()
    }

    fn reported_master(&self, sentinel_port: u16) -> Result<u16, String> {
        let addr: Option<(String, u16)> = query(
            sentinel_port,
            redis::cmd("SENTINEL")
                .arg("get-master-addr-by-name")
                .arg(&self.service),
        )
        .map_err(|e| format!("sentinel {sentinel_port}: {e}"))?;
        addr.map(|(_, port)| port)
            .ok_or_else(|| format!("sentinel {sentinel_port} knows no master"))
    }

    /// SIGKILLs the current master (as the sentinels report it).
    pub fn kill_master(&mut self) {
        let port = self.master_port();
        let node = self
            .nodes
            .iter_mut()
            .find(|n| n.port() == port)
            .unwrap_or_else(|| panic!("master port {port} is none of our nodes"));
        node.kill();
        self.killed_master = Some(port);
    }

    /// Waits until every running sentinel reports a master other than the
    /// one [`Sentinel::kill_master`] killed, and that server says it is a
    /// master; returns its port. Panics (with all logs) on timeout. Sentinel
    /// may need a second election round (10 s here) when the first vote
    /// splits, so allow 30 s.
    pub fn wait_for_failover(&self, timeout: Duration) -> u16 {
        let old = self
            .killed_master
            .expect("wait_for_failover: call kill_master first");
        let result = poll_until(timeout, || {
            let mut seen = Vec::new();
            for s in &self.sentinels {
                if s.child.is_none() {
                    continue;
                }
                seen.push(self.reported_master(s.port())?);
            }
            let new = *seen.first().ok_or("no sentinel is running")?;
            if new == old || seen.iter().any(|&p| p != new) {
                return Err(format!("old master {old}, sentinels report {seen:?}"));
            }
            let role = info(new, "replication")
                .map_err(|e| format!("new master {new}: {e}"))?
                .get("role")
                .cloned();
            if role.as_deref() != Some("master") {
                return Err(format!("new master {new} has role {role:?}"));
            }
            Ok(new)
        });
        result.unwrap_or_else(|e| {
            self.panic_with_logs(&format!("no failover within {timeout:?}: {e}"))
        })
    }

    fn logs(&self) -> String {
        self.sentinels
            .iter()
            .chain(&self.nodes)
            .map(RedisServer::log_report)
            .collect()
    }

    fn panic_with_logs(&self, why: &str) -> ! {
        panic!("sentinel setup ({}): {why}\n{}", self.service, self.logs())
    }

    fn fail(&mut self, why: &str) -> ! {
        let msg = format!("sentinel setup ({}): {why}\n{}", self.service, self.logs());
        self.kill_all();
        panic!("{msg}");
    }

    fn kill_all(&mut self) {
        // Sentinels first, so they do not start a failover during teardown.
        for s in self.sentinels.iter_mut().chain(self.nodes.iter_mut()) {
            s.kill();
        }
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        self.kill_all();
    }
}

// ---------------------------------------------------------------------------
// Cluster
// ---------------------------------------------------------------------------

/// A Redis Cluster of three masters (no replicas) covering all 16384
/// slots. Killed when dropped.
pub struct Cluster {
    nodes: Vec<RedisServer>,
}

impl Cluster {
    /// Starts three nodes, creates the cluster with `redis-cli --cluster
    /// create` and waits until every node reports `cluster_state:ok`.
    pub fn start() -> Self {
        const NODES: usize = 3;
        let mut nodes = Vec::with_capacity(NODES);
        for i in 0..NODES {
            let mut node = RedisServer::unstarted(&format!("cluster node {i}"));
            let conf = node.dir().join("nodes.conf");
            node.extra = vec![
                "--cluster-enabled".into(),
                "yes".into(),
                "--cluster-config-file".into(),
                conf.to_str().expect("utf-8 temp dir").into(),
                "--cluster-node-timeout".into(),
                "2000".into(),
            ];
            node.start_on_free_port(free_cluster_port, |_| {});
            nodes.push(node);
        }
        let mut cluster = Cluster { nodes };
        cluster.create();
        if let Err(e) = poll_until(READY_TIMEOUT, || cluster.check_ok()) {
            cluster.fail(&format!("cluster did not reach cluster_state:ok: {e}"));
        }
        cluster
    }

    fn create(&mut self) {
        let out_path = self.nodes[0].dir().join("cluster-create.log");
        let out = File::create(&out_path).expect("create cluster-create.log");
        let mut cmd = Command::new(redis_cli_bin());
        cmd.arg("--cluster").arg("create");
        for n in &self.nodes {
            cmd.arg(format!("127.0.0.1:{}", n.port()));
        }
        cmd.args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("clone log file"))
            .stderr(out);
        let mut child = match spawn(cmd) {
            Ok(c) => Some(c),
            Err(e) => self.fail(&format!("spawn redis-cli failed: {e}")),
        };
        let status = poll_until(READY_TIMEOUT, || match child.as_mut().unwrap().try_wait() {
            Ok(Some(status)) => Ok(status),
            Ok(None) => Err("still running".to_owned()),
            Err(e) => Err(e.to_string()),
        });
        let output = || fs::read_to_string(&out_path).unwrap_or_default();
        match status {
            Ok(s) if s.success() => {}
            Ok(s) => self.fail(&format!(
                "`redis-cli --cluster create` failed ({s}):\n{}",
                output()
            )),
            Err(e) => {
                kill_child(&mut child);
                self.fail(&format!(
                    "`redis-cli --cluster create` did not finish within {READY_TIMEOUT:?} ({e}):\n{}",
                    output()
                ))
            }
        }
    }

    /// Every node says `cluster_state:ok`, knows all nodes and sees all
    /// slots served.
    fn check_ok(&self) -> Result<(), String> {
        for n in &self.nodes {
            let text: String = query(n.port(), redis::cmd("CLUSTER").arg("INFO"))
                .map_err(|e| format!("node {}: CLUSTER INFO: {e}", n.port()))?;
            let i = parse_info(&text);
            let get = |k: &str| i.get(k).map(String::as_str).unwrap_or("?");
            let want_nodes = self.nodes.len().to_string();
            if get("cluster_state") != "ok"
                || get("cluster_slots_ok") != "16384"
                || get("cluster_known_nodes") != want_nodes
            {
                return Err(format!(
                    "node {}: cluster_state:{} cluster_slots_ok:{} cluster_known_nodes:{}",
                    n.port(),
                    get("cluster_state"),
                    get("cluster_slots_ok"),
                    get("cluster_known_nodes"),
                ));
            }
        }
        Ok(())
    }

    /// `redis://127.0.0.1:<port>/` of each node.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// A `[redis]` section pointing at this cluster.
    pub fn config(&self) -> maid_bus::RedisConfig {
        maid_bus::RedisConfig {
            cluster: self.urls(),
            ..Default::default()
        }
    }

    /// Each node's port.
    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(RedisServer::port).collect()
    }

    /// The node servers (for their logs, or to kill one).
    pub fn nodes(&mut self) -> &mut [RedisServer] {
        &mut self.nodes
    }

    /// A `ClusterClient` over all nodes.
    pub fn client(&self) -> redis::cluster::ClusterClient {
        redis::cluster::ClusterClient::new(self.urls()).expect("valid cluster urls")
    }

    /// Kills node `i` and starts it again on the same port and directory,
    /// so it rejoins from its `nodes.conf` (with no data: persistence is
    /// off); waits until the cluster is `ok` again everywhere.
    pub fn restart_node(&mut self, i: usize) {
        self.nodes[i].restart();
        if let Err(e) = poll_until(READY_TIMEOUT, || self.check_ok()) {
            self.fail(&format!(
                "cluster did not recover to cluster_state:ok after restarting node {i}: {e}"
            ));
        }
    }

    fn fail(&mut self, why: &str) -> ! {
        let logs: String = self.nodes.iter().map(RedisServer::log_report).collect();
        for n in &mut self.nodes {
            n.kill();
        }
        panic!("cluster: {why}\n{logs}");
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for n in &mut self.nodes {
            n.kill();
        }
    }
}
