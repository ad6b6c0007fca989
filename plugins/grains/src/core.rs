//! `grains._core`: the core grains of Salt 3008.4 on Linux, detected as
//! Salt's `core`, `disks`, `extra`, `mdadm`, `lvm` and `minion_process`
//! grain modules detect them, through what the grains plugin's grants
//! let it read and run. The agent calls it at start and on
//! `saltutil.refresh_grains` with the facts of its own process no grant
//! reaches (`id`, `pid`, `uid`, `gid`, `cwd`, some of `env`), and adds
//! its own grains (`id`, `master`, `saltversion`, ...) to what it returns.
//!
//! A source that is missing or not granted is treated as missing, which
//! Salt answers with its fallback or by leaving the grain out; what was
//! refused is logged at debug level.

use std::collections::BTreeMap;
use std::time::Duration;

use maid_sdk::accounts::{parse_group, parse_passwd};
use maid_sdk::host;
use maid_sdk::{Call, Error, function};
use serde::Deserialize;
use serde_json::{Map, Value, json};

mod hw;
mod locale;
mod net;
mod os;
mod sha256;
mod text;

/// What a program did, as Salt's `cmd.run_all` returns it.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Ran {
    pub retcode: i32,
    pub stdout: String,
    pub stderr: String,
    pub timed_out: bool,
}

/// What `_core` reads and runs on the host: the SDK's host calls in the
/// plugin, fixtures in the tests.
pub(crate) trait Host {
    /// The whole of a file, or `None` when it is missing or not granted.
    fn read(&self, path: &str) -> Option<Vec<u8>>;
    /// Whether a path exists (Salt's `os.path.exists`).
    fn exists(&self, path: &str) -> bool;
    /// The names in a directory, in the order the directory lists them.
    fn list_dir(&self, path: &str) -> Option<Vec<String>>;
    /// What a symbolic link holds.
    fn read_link(&self, path: &str) -> Option<String>;
    /// Where a program is (Salt's `salt.utils.path.which`).
    fn which(&self, program: &str) -> Option<String>;
    /// Run `argv` (its first word a path `which` gave); `None` when it
    /// could not run.
    fn run(&self, argv: &[&str], merge_stderr: bool, timeout: Duration) -> Option<Ran>;
    /// The interfaces in the shape of Salt's `network.interfaces`.
    fn interfaces(&self) -> Map<String, Value>;
    /// Seconds since the epoch.
    fn now(&self) -> i64;
    /// Note something in the agent's log.
    fn log(&self, message: &str);

    /// A file as text (invalid UTF-8 replaced).
    fn read_text(&self, path: &str) -> Option<String> {
        self.read(path)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    }
}

/// Where [`installed`] looks for a program: the directories Salt's
/// `which` adds to any `PATH`.
const SYSTEM_DIRS: [&str; 6] = [
    "/usr/local/sbin",
    "/usr/local/bin",
    "/usr/sbin",
    "/usr/bin",
    "/sbin",
    "/bin",
];

/// Whether `program` is installed, for a program Salt only looks for and
/// never runs (`localectl`, `transactional-update`, `ip` where `/proc/net`
/// answers): found by `which` when the exec grant names it, else seen as
/// a file the files grant names. Seeing a program needs no grant to run
/// it.
pub(crate) fn installed(host: &dyn Host, program: &str) -> bool {
    host.which(program).is_some()
        || SYSTEM_DIRS
            .iter()
            .any(|dir| host.exists(&format!("{dir}/{program}")))
}

/// How long a program Salt runs without a limit may run here.
const PROGRAM_TIMEOUT: Duration = Duration::from_secs(30);

/// Salt's `cmd.run`: standard output and error together, trailing
/// blanks stripped.
pub(crate) fn cmd_run(host: &dyn Host, argv: &[&str]) -> Option<String> {
    host.run(argv, true, PROGRAM_TIMEOUT)
        .map(|r| r.stdout.trim_end().to_string())
}

/// Salt's `cmd.run_all`: retcode, standard output and error, each with
/// trailing blanks stripped.
pub(crate) fn cmd_run_all(host: &dyn Host, argv: &[&str]) -> Option<Ran> {
    host.run(argv, false, PROGRAM_TIMEOUT).map(|r| Ran {
        stdout: r.stdout.trim_end().to_string(),
        stderr: r.stderr.trim_end().to_string(),
        ..r
    })
}

/// The host as the plugin reaches it: files through `read_file` (or the
/// preopened directories), programs through `exec`.
struct Sandbox;

impl Host for Sandbox {
    fn read(&self, path: &str) -> Option<Vec<u8>> {
        match host::read_file(path) {
            Ok(bytes) => Some(bytes),
            Err(e) => {
                host::debug(&format!("grains: {path} not read: {e}"));
                None
            }
        }
    }

    fn exists(&self, path: &str) -> bool {
        if std::fs::symlink_metadata(path).is_ok() {
            return true;
        }
        // A directory the grants name as a file: reading it fails, but not
        // as a missing path does (`os error 2`, which the agent answers
        // for a granted path that is not there); a path not granted is
        // denied, and is not there as far as the grants say.
        match host::read_file(path) {
            Ok(_) => true,
            Err(e) => e.kind == maid_sdk::ErrorKind::Failed && !e.message.ends_with("(os error 2)"),
        }
    }

    fn list_dir(&self, path: &str) -> Option<Vec<String>> {
        match std::fs::read_dir(path) {
            Ok(entries) => Some(
                entries
                    .filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect(),
            ),
            Err(e) => {
                host::debug(&format!("grains: {path} not listed: {e}"));
                None
            }
        }
    }

    fn read_link(&self, path: &str) -> Option<String> {
        std::fs::read_link(path)
            .ok()
            .map(|p| p.to_string_lossy().into_owned())
    }

    fn which(&self, program: &str) -> Option<String> {
        match host::which(program) {
            Ok(found) => found,
            Err(e) => {
                host::debug(&format!("grains: which {program}: {e}"));
                None
            }
        }
    }

    fn run(&self, argv: &[&str], merge_stderr: bool, timeout: Duration) -> Option<Ran> {
        let cmd = host::Command::from_argv(argv.iter().map(|s| s.to_string()).collect())
            .merge_stderr(merge_stderr)
            .timeout(timeout);
        match cmd.output() {
            Ok(out) => Some(Ran {
                retcode: out.retcode,
                stdout: out.stdout_lossy(),
                stderr: out.stderr_lossy(),
                timed_out: out.timed_out,
            }),
            Err(e) => {
                host::debug(&format!("grains: {} did not run: {e}", argv.join(" ")));
                None
            }
        }
    }

    fn interfaces(&self) -> Map<String, Value> {
        host::interfaces()
    }

    fn now(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
            .unwrap_or(0)
    }

    fn log(&self, message: &str) {
        host::debug(&format!("grains: {message}"));
    }
}

/// What the agent tells `_core` of its own process.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Facts {
    pub id: String,
    pub pid: Option<u64>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub cwd: Option<String>,
    pub env: BTreeMap<String, String>,
    /// The minion option of that name (Salt 3008 defaults it to off,
    /// which leaves `fqdns` empty).
    pub enable_fqdns_grains: bool,
}

impl Facts {
    /// An environment variable of the agent, when set.
    fn env(&self, name: &str) -> Option<&str> {
        self.env.get(name).map(String::as_str)
    }
}

/// A `/proc/sys/kernel` value, its newline taken off.
fn kernel_value(host: &dyn Host, name: &str) -> Option<String> {
    host.read_text(&format!("/proc/sys/kernel/{name}"))
        .map(|s| s.trim_end_matches('\n').to_string())
}

/// Whether a machine's `/proc` writes numbers in big-endian order.
fn big_endian(cpuarch: &str) -> bool {
    matches!(
        cpuarch,
        "s390x" | "s390" | "ppc64" | "ppc" | "sparc64" | "sparc" | "mips" | "mips64" | "m68k"
    )
}

/// Salt's `default_gateway`: nothing without `ip`; else what `ip -4
/// route show` and `ip -6 route show` would say of the default routes,
/// read from `/proc/net` (or from `ip` when those cannot be read).
fn gateways(host: &dyn Host, cpuarch: &str) -> Map<String, Value> {
    let ip = host.which("ip");
    if ip.is_none() && !installed(host, "ip") {
        return Map::new();
    }
    let from_ip = |v: &str| {
        let ip = ip.as_deref()?;
        cmd_run(host, &[ip, v, "route", "show"]).and_then(|out| net::default_route_ip(&out))
    };
    let v4 = match host.read_text("/proc/net/route") {
        Some(t) => net::default_route4(&t, big_endian(cpuarch)),
        None => from_ip("-4"),
    };
    let v6 = match host.read_text("/proc/net/ipv6_route") {
        Some(t) => net::default_route6(&t),
        None => from_ip("-6"),
    };
    net::gateway_grains(v4, v6)
}

/// The zone the C library uses: `TZ` (empty for UTC; a file, by path or
/// under `/usr/share/zoneinfo`, else a POSIX rule), else
/// `/etc/localtime`, else UTC.
fn zone(host: &dyn Host, tz: Option<&str>) -> locale::Zone {
    let file = |path: &str| host.read(path).and_then(|b| locale::parse_tzif(&b));
    let Some(tz) = tz else {
        return file("/etc/localtime").unwrap_or_else(|| locale::Zone::fixed("UTC"));
    };
    let tz = if tz.is_empty() { "Universal" } else { tz };
    let tz = tz.strip_prefix(':').unwrap_or(tz);
    let path = if tz.is_empty() {
        "/etc/localtime".to_string()
    } else if tz.starts_with('/') {
        tz.to_string()
    } else {
        format!("/usr/share/zoneinfo/{tz}")
    };
    file(&path)
        .or_else(|| locale::parse_posix(tz).map(locale::Zone::Rule))
        .unwrap_or_else(|| locale::Zone::fixed(if tz.is_empty() { "UTC" } else { "" }))
}

/// Whether the C library would load locale `name`: C and its UTF-8
/// variant are built in; else its directory under `/usr/lib/locale`, or
/// its entry in `/usr/lib/locale/locale-archive` (an archive too large
/// to read is assumed to hold it), by its name or with the codeset
/// normalised as glibc does.
fn locale_installed(host: &dyn Host, name: &str) -> bool {
    if name == "C" || name == "POSIX" || name.starts_with("C.") {
        return true;
    }
    if name.contains('/') || name.starts_with('.') {
        return false;
    }
    let norm = locale::normalize_codeset(name);
    if [name, norm.as_str()]
        .iter()
        .any(|n| host.exists(&format!("/usr/lib/locale/{n}")))
    {
        return true;
    }
    const ARCHIVE: &str = "/usr/lib/locale/locale-archive";
    match host.read(ARCHIVE).map(|b| locale::archive_names(&b)) {
        Some(Some(names)) => names.iter().any(|n| n == name || *n == norm),
        Some(None) => false,
        None => host.exists(ARCHIVE),
    }
}

/// Salt's `locale_info` for this environment.
fn locale_info(host: &dyn Host, facts: &Facts) -> Value {
    let name = locale::ctype_locale(
        facts.env("LC_ALL"),
        facts.env("LC_CTYPE"),
        facts.env("LANG"),
        &|name| locale_installed(host, name),
    );
    let (lang, enc) = locale::getlocale(&name).unwrap_or((json!("unknown"), json!("unknown")));
    let timezone = locale::tzname(&zone(host, facts.env("TZ")), host.now());
    json!({
        "defaultlanguage": lang,
        "defaultencoding": enc,
        "detectedencoding": "utf-8",
        "timezone": timezone,
    })
}

/// Salt's `minion_process` grains: none at all when the user is unknown
/// (Salt's `getpwuid` raises), as in Salt.
fn process_grains(host: &dyn Host, facts: &Facts) -> Map<String, Value> {
    let mut g = Map::new();
    let passwd = host
        .read_text("/etc/passwd")
        .map(|t| parse_passwd(&t))
        .unwrap_or_default();
    let Some(uid) = facts.uid else {
        return g;
    };
    let Some(user) = passwd.iter().find(|p| p.uid == uid) else {
        host.log(&format!("no user has uid {uid}: no username grains"));
        return g;
    };
    let groups = host
        .read_text("/etc/group")
        .map(|t| parse_group(&t))
        .unwrap_or_default();
    let groupname = passwd
        .iter()
        .find(|p| p.name == user.name)
        .and_then(|p| groups.iter().find(|gr| gr.gid == p.gid))
        .map(|gr| gr.name.clone())
        .unwrap_or_default();
    g.insert("username".into(), json!(user.name));
    g.insert("groupname".into(), json!(groupname));
    if let Some(pid) = facts.pid {
        g.insert("pid".into(), json!(pid));
    }
    if let Some(gid) = facts.gid {
        g.insert("gid".into(), json!(gid));
    }
    g.insert("uid".into(), json!(uid));
    g
}

/// Salt's `os_data` on Linux.
fn os_data(
    host: &dyn Host,
    uname: &Uname,
    cpuinfo: Option<&str>,
    facts: &Facts,
) -> Map<String, Value> {
    let mut g = Map::new();
    g.insert("num_gpus".into(), json!(0));
    g.insert("gpus".into(), json!([]));
    g.insert("kernel".into(), json!(uname.kernel));
    if let Some(n) = &uname.nodename {
        g.insert("nodename".into(), json!(n));
    }
    if let Some(r) = &uname.release {
        g.insert("kernelrelease".into(), json!(r));
    }
    if let Some(v) = &uname.version {
        g.insert("kernelversion".into(), json!(v));
    }
    g.insert("cpuarch".into(), json!(uname.machine));
    if let Some(se) = host.which("selinuxenabled") {
        g.insert("selinux".into(), hw::selinux(host, &se));
    }
    if let Some(systemctl) = host.which("systemctl")
        && installed(host, "localectl")
    {
        g.insert("systemd".into(), hw::systemd(host, &systemctl));
    }
    let path_dirs: Vec<String> = facts
        .env("PATH")
        .unwrap_or("")
        .split(':')
        .map(str::to_string)
        .collect();
    g.insert("init".into(), json!(hw::init_system(host, &path_dirs)));
    g.extend(os::distribution(host));
    g.extend(hw::cpudata(cpuinfo));
    if let Some(lspci) = host.which("lspci") {
        match host.run(&[&lspci, "-vmm"], false, Duration::from_secs(5)) {
            Some(out) if !out.timed_out => {
                let gpus = hw::gpus(&out.stdout);
                g.insert("num_gpus".into(), json!(gpus.len()));
                g.insert("gpus".into(), Value::Array(gpus));
            }
            Some(_) => host.log("lspci timed out: no GPU grains"),
            None => {
                g.insert("num_gpus".into(), json!(0));
                g.insert("gpus".into(), json!([]));
            }
        }
    }
    g.extend(hw::devicetree(host));
    let family = g
        .get("os_family")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    g.insert("osarch".into(), os::osarch(host, &family, &uname.machine));
    g.extend(hw::memdata(host.read_text("/proc/meminfo").as_deref()));
    g.extend(hw::dmi(host));
    let productname = g
        .get("productname")
        .and_then(Value::as_str)
        .map(str::to_string);
    let virt = hw::virtual_grains(
        host,
        &hw::VirtualInputs {
            cpuinfo,
            productname: productname.as_deref(),
        },
    );
    g.extend(virt);
    let virtual_ = g
        .get("virtual")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if virtual_.contains("xen") {
        g.extend(hw::virtual_hv(host));
    }
    g.insert("ps".into(), json!(hw::ps(&family, &virtual_)));
    let release = g.get("osrelease").and_then(Value::as_str).unwrap_or("");
    if !release.is_empty() {
        let os = g.get("os").and_then(Value::as_str).unwrap_or("");
        let fullname = g.get("osfullname").and_then(Value::as_str).unwrap_or("");
        let data = os::osrelease_data(os, fullname, release);
        g.extend(data);
    }
    g
}

/// What `uname` says, read from `/proc/sys/kernel`.
struct Uname {
    kernel: String,
    nodename: Option<String>,
    release: Option<String>,
    version: Option<String>,
    machine: String,
}

impl Uname {
    /// The kernel's names; the machine from `/proc/sys/kernel/arch`, else
    /// as `/proc/cpuinfo` shows it (the plugin's own architecture is
    /// WebAssembly's, not the host's).
    fn read(host: &dyn Host, cpuinfo: Option<&str>) -> Self {
        let machine = kernel_value(host, "arch")
            .or_else(|| cpuinfo.and_then(hw::machine_from_cpuinfo))
            .unwrap_or_else(|| {
                host.log("machine unknown: no /proc/sys/kernel/arch or /proc/cpuinfo");
                String::new()
            });
        Self {
            kernel: kernel_value(host, "ostype").unwrap_or_else(|| "Linux".into()),
            nodename: kernel_value(host, "hostname"),
            release: kernel_value(host, "osrelease"),
            version: kernel_value(host, "version"),
            machine,
        }
    }
}

/// Every core grain Salt 3008.4 reports on Linux, in the order Salt's
/// grain functions add them.
pub(crate) fn collect(host: &dyn Host, facts: &Facts) -> Map<String, Value> {
    let cpuinfo = host.read_text("/proc/cpuinfo");
    let uname = Uname::read(host, cpuinfo.as_deref());
    let ifaces = host.interfaces();
    let mut g = Map::new();

    g.insert("cwd".into(), json!(facts.cwd.clone().unwrap_or_default()));
    g.extend(gateways(host, &uname.machine));
    let resolv = host
        .read_text("/run/systemd/resolve/resolv.conf")
        .or_else(|| host.read_text("/etc/resolv.conf"));
    if let Some(text) = resolv {
        g.insert("dns".into(), net::parse_resolv(&text));
    }
    g.insert(
        "fibre_channel_host".into(),
        json!(host.exists("/sys/class/fc_host")),
    );

    let resolver = net::Resolver {
        hosts: host
            .read_text("/etc/hosts")
            .map(|t| net::parse_hosts(&t))
            .unwrap_or_default(),
        hostname: uname.nodename.clone().unwrap_or_default(),
    };
    let fqdns = if facts.enable_fqdns_grains {
        let mut others = net::ip_addrs(&ifaces, "inet", false);
        others.extend(net::ip_addrs(&ifaces, "inet6", false));
        resolver.fqdns(&others)
    } else {
        Vec::new()
    };
    g.insert("fqdns".into(), json!(fqdns));
    if let Some(id) = host
        .read_text("/etc/machine-id")
        .or_else(|| host.read_text("/var/lib/dbus/machine-id"))
    {
        g.insert("machine_id".into(), json!(id.trim()));
    }
    g.insert("server_id".into(), json!(sha256::server_id(&facts.id)));

    let ipv4 = net::ip_addrs(&ifaces, "inet", true);
    let ipv6 = net::ip_addrs(&ifaces, "inet6", true);
    let mut names = net::name_grains(&resolver, &ipv4, &ipv6);
    let (fqdn_ip4, fqdn_ip6) = (names.remove("fqdn_ip4"), names.remove("fqdn_ip6"));
    if uname.nodename.is_none() {
        names.remove("localhost");
    }
    g.extend(names);
    let mut ifgrains = net::interface_grains(&ifaces);
    let ip_interfaces = ifgrains.remove("ip_interfaces");
    g.extend(ifgrains);
    g.insert(
        "ipv4".into(),
        json!(ipv4.iter().map(net::ip_str).collect::<Vec<_>>()),
    );
    g.insert(
        "ipv6".into(),
        json!(ipv6.iter().map(net::ip_str).collect::<Vec<_>>()),
    );
    g.insert("fqdn_ip4".into(), fqdn_ip4.unwrap_or(json!([])));
    g.insert("fqdn_ip6".into(), fqdn_ip6.unwrap_or(json!([])));
    g.insert("ip_interfaces".into(), ip_interfaces.unwrap_or(json!({})));

    if let Some(params) = host
        .read_text("/proc/cmdline")
        .and_then(|c| hw::kernelparams(&c))
    {
        g.insert("kernelparams".into(), params);
    }
    g.insert("locale_info".into(), locale_info(host, facts));
    g.extend(os_data(host, &uname, cpuinfo.as_deref(), facts));

    let path = facts.env("PATH").unwrap_or("").trim().to_string();
    g.insert("path".into(), json!(path));
    g.insert(
        "systempath".into(),
        json!(path.split(':').collect::<Vec<_>>()),
    );
    g.extend(hw::disks(host));
    g.insert(
        "shell".into(),
        json!(facts.env("SHELL").unwrap_or("/bin/sh")),
    );
    if let Some(mdstat) = host.read_text("/proc/mdstat") {
        g.insert("mdadm".into(), json!(hw::mdadm(&mdstat)));
    }
    if let Some(lvm) = host.which("lvm") {
        g.insert("lvm".into(), hw::lvm(host, &lvm));
    }
    g.insert(
        "transactional".into(),
        json!(installed(host, "transactional-update")),
    );
    g.extend(hw::uefi(host));
    g.extend(process_grains(host, facts));
    g
}

/// Detect the minion's core grains as Salt does on Linux (the agent's, not a job's)
#[function(raw, name = "_core", args = ["**kwargs"])]
pub(crate) fn core_(call: &Call) -> Result<Value, Error> {
    let facts: Facts = serde_json::from_value(Value::Object(call.kwargs.clone()))
        .map_err(|e| Error::bad_arguments(format!("_core: {e}")))?;
    Ok(Value::Object(collect(&Sandbox, &facts)))
}

#[cfg(test)]
mod tests;
