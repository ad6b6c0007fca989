//! `_core` against fixtures: files copied from real systems, and what
//! Salt 3008.4 itself reported for them.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::{Facts, Host, Ran, collect, os, zone};

/// A host made of a directory tree (its `/` under `root`), plus the
/// programs, links, directory listings and interfaces a test gives it.
#[derive(Default)]
struct Fixture {
    root: Option<PathBuf>,
    files: BTreeMap<String, Vec<u8>>,
    dirs: BTreeMap<String, Vec<String>>,
    links: BTreeMap<String, String>,
    programs: BTreeMap<String, BTreeMap<Vec<String>, Ran>>,
    interfaces: Map<String, Value>,
    now: i64,
    ran: RefCell<Vec<String>>,
}

impl Fixture {
    fn tree(dir: &str) -> Self {
        Self {
            root: Some(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(dir)),
            ..Self::default()
        }
    }

    fn file(mut self, path: &str, text: &str) -> Self {
        self.files.insert(path.into(), text.as_bytes().to_vec());
        self
    }

    fn program(mut self, path: &str, args: &[&str], retcode: i32, stdout: &str) -> Self {
        self.programs.entry(path.into()).or_default().insert(
            args.iter().map(|s| s.to_string()).collect(),
            Ran {
                retcode,
                stdout: stdout.into(),
                ..Ran::default()
            },
        );
        self
    }
}

impl Host for Fixture {
    fn read(&self, path: &str) -> Option<Vec<u8>> {
        if let Some(b) = self.files.get(path) {
            return Some(b.clone());
        }
        let root = self.root.as_ref()?;
        let p = root.join(path.trim_start_matches('/'));
        if p.is_file() {
            std::fs::read(p).ok()
        } else {
            None
        }
    }

    fn exists(&self, path: &str) -> bool {
        self.files.contains_key(path)
            || self.dirs.contains_key(path)
            || self.links.contains_key(path)
            || self
                .root
                .as_ref()
                .is_some_and(|r| r.join(path.trim_start_matches('/')).exists())
    }

    fn list_dir(&self, path: &str) -> Option<Vec<String>> {
        self.dirs.get(path).cloned()
    }

    fn read_link(&self, path: &str) -> Option<String> {
        self.links.get(path).cloned()
    }

    fn which(&self, program: &str) -> Option<String> {
        self.programs
            .keys()
            .find(|p| p.rsplit('/').next() == Some(program))
            .cloned()
    }

    fn run(&self, argv: &[&str], _merge: bool, _timeout: Duration) -> Option<Ran> {
        self.ran.borrow_mut().push(argv.join(" "));
        let args: Vec<String> = argv[1..].iter().map(|s| s.to_string()).collect();
        self.programs.get(argv[0])?.get(&args).cloned()
    }

    fn interfaces(&self) -> Map<String, Value> {
        self.interfaces.clone()
    }

    fn now(&self) -> i64 {
        self.now
    }

    fn log(&self, _message: &str) {}
}

/// The distribution grains Salt computes for an os-release tree.
fn distribution_of(host: &Fixture) -> Map<String, Value> {
    let mut g = os::distribution(host);
    let release = g
        .get("osrelease")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if !release.is_empty() {
        let os_ = g
            .get("os")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let full = g
            .get("osfullname")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        g.extend(os::osrelease_data(&os_, &full, &release));
    }
    g
}

fn expected(path: &std::path::Path) -> Map<String, Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    serde_json::from_str(&text).unwrap_or_default()
}

/// Every tree under `fixtures/os` (Debian 12, Ubuntu 22.04 and 24.04,
/// Rocky 9, AlmaLinux 9, RHEL 9, CentOS Stream 9, Fedora 42, Amazon
/// Linux 2023, Alpine, openSUSE Leap and Tumbleweed, SLES 12, Arch,
/// Gentoo, Kali, Linux Mint, Debian testing) gives exactly the grains
/// Salt 3008.4 computed from it (`expected.json`, made by running Salt's
/// `_linux_distribution_data` and `_osrelease_data` with the tree
/// mounted over `/etc`), with `lsb_release -a` answering as it did there
/// (`lsb_release.out`) and, where recorded, without the program.
#[test]
fn distributions_match_salt() {
    let base = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/os");
    let mut names: Vec<String> = std::fs::read_dir(&base)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    assert!(names.len() >= 18, "fixtures missing: {names:?}");
    let mut checked = 0;
    for name in names {
        let dir = base.join(&name);
        let lsb = std::fs::read_to_string(dir.join("lsb_release.out")).unwrap_or_default();
        let with = Fixture::tree(&format!("fixtures/os/{name}")).program(
            "/usr/bin/lsb_release",
            &["-a"],
            0,
            &lsb,
        );
        let want = expected(&dir.join("expected.json"));
        assert!(!want.is_empty(), "{name}: no expected.json");
        assert_eq!(distribution_of(&with), want, "{name}");
        checked += 1;
        let without = dir.join("expected-without-lsb_release.json");
        if without.exists() {
            let host = Fixture::tree(&format!("fixtures/os/{name}"));
            assert_eq!(
                distribution_of(&host),
                expected(&without),
                "{name} without lsb_release"
            );
        }
    }
    assert!(checked >= 18);
}

#[test]
fn a_lsb_release_file_wins_over_os_release() {
    let host = Fixture::tree("fixtures/os/ubuntu2204");
    let g = distribution_of(&host);
    assert_eq!(g["lsb_distrib_description"], json!("Ubuntu 22.04.4 LTS"));
    assert_eq!(g["osfinger"], json!("Ubuntu-22.04"));
    assert_eq!(g["osrelease_info"], json!([22, 4]));
}

#[test]
fn no_release_files_at_all() {
    let g = distribution_of(&Fixture::default());
    assert_eq!(
        Value::Object(g),
        json!({"osfullname": "", "osrelease": "", "oscodename": "", "os": "", "os_family": ""})
    );
}

#[test]
fn legacy_release_files_without_os_release() {
    let host = Fixture::default().file("/etc/centos-release", "CentOS release 6.10 (Final)\n");
    let g = distribution_of(&host);
    assert_eq!(g["lsb_distrib_id"], json!("CentOS"));
    assert_eq!(g["lsb_distrib_release"], json!("6.10"));
    assert_eq!(g["oscodename"], json!("Final"));
    assert_eq!(g["os"], json!("CentOS"));
    assert_eq!(g["os_family"], json!("RedHat"));
    assert_eq!(g["osfinger"], json!("CentOS-6"));
    let host = Fixture::default().file(
        "/etc/SuSE-release",
        "SUSE Linux Enterprise Server 11 (x86_64)\nVERSION = 11\nPATCHLEVEL = 4\n",
    );
    let g = distribution_of(&host);
    assert_eq!(g["lsb_distrib_id"], json!("SLES"));
    assert_eq!(g["lsb_distrib_release"], json!("11.4"));
    assert_eq!(
        g["lsb_distrib_codename"],
        json!("SUSE Linux Enterprise Server 11 SP4")
    );
    assert_eq!(g["os"], json!("SUSE"));
}

/// This machine, a Debian 12 container, as `fixtures/host-debian12`
/// copied it, gives exactly what `salt-call --local grains.items` said
/// on it (`salt-grains.json`, less the grains the agent adds itself).
#[test]
fn this_host_matches_salt() {
    let dir = "fixtures/host-debian12";
    let base = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(dir);
    let read = |f: &str| std::fs::read_to_string(base.join(f)).unwrap_or_default();
    let mut host = Fixture::tree(dir)
        .program("/usr/bin/systemd-detect-virt", &[], 0, "docker\n")
        .program(
            "/usr/bin/systemctl",
            &["--version"],
            0,
            &read("systemctl--version.out"),
        )
        .program("/usr/bin/localectl", &[], 0, "")
        .program("/usr/bin/dpkg", &["--print-architecture"], 0, "amd64\n")
        .program("/usr/sbin/ip", &[], 0, "");
    host.interfaces = serde_json::from_str(&read("interfaces.json")).unwrap_or_default();
    host.dirs.insert(
        "/sys/block".into(),
        ["loop0", "vda", "zram0"].map(String::from).to_vec(),
    );
    host.links.insert(
        "/sys/block/loop0".into(),
        "../devices/virtual/block/loop0".into(),
    );
    host.links.insert(
        "/sys/block/vda".into(),
        "../devices/pci0000:00/0000:00:02.0/virtio1/block/vda".into(),
    );
    host.links.insert(
        "/sys/block/zram0".into(),
        "../devices/virtual/block/zram0".into(),
    );
    host.now = 1_795_000_000;
    let want: Map<String, Value> =
        serde_json::from_str(&read("salt-grains.json")).unwrap_or_default();
    let path = want["path"].as_str().unwrap_or("").to_string();
    let facts = Facts {
        id: "sc1".into(),
        pid: Some(10518),
        uid: Some(0),
        gid: Some(0),
        cwd: Some("/tmp".into()),
        env: [
            ("PATH", path.as_str()),
            ("SHELL", "/bin/bash"),
            ("LANG", "C.UTF-8"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
        ..Facts::default()
    };
    let got = collect(&host, &facts);
    for (k, v) in &want {
        assert_eq!(got.get(k), Some(v), "grain {k}");
    }
    let extra: Vec<&String> = got.keys().filter(|k| !want.contains_key(*k)).collect();
    assert!(
        extra.is_empty(),
        "grains Salt does not report here: {extra:?}"
    );
    // Only the programs Salt runs here ran.
    assert_eq!(
        *host.ran.borrow(),
        [
            "/usr/bin/systemctl --version",
            "/usr/bin/dpkg --print-architecture",
            "/usr/bin/systemd-detect-virt",
        ]
    );
}

/// With nothing granted every grain degrades as Salt's does when its
/// source is missing, and the call still answers.
#[test]
fn nothing_granted_degrades_as_salt_does() {
    let facts = Facts {
        id: "m1".into(),
        pid: Some(7),
        uid: Some(0),
        gid: Some(0),
        cwd: Some("/".into()),
        env: BTreeMap::new(),
        ..Facts::default()
    };
    let g = collect(&Fixture::default(), &facts);
    assert_eq!(g["fqdn"], json!("localhost.localdomain"));
    assert_eq!(g["host"], json!("localhost"));
    assert_eq!(g["domain"], json!("localdomain"));
    assert_eq!(g["num_cpus"], json!(0));
    assert_eq!(g["cpu_model"], json!("Unknown"));
    assert_eq!(g["mem_total"], json!(0));
    assert_eq!(g["virtual"], json!("physical"));
    assert_eq!(g["init"], json!("unknown"));
    assert_eq!(g["kernel"], json!("Linux"));
    assert_eq!(g["shell"], json!("/bin/sh"));
    assert_eq!(g["path"], json!(""));
    assert_eq!(g["systempath"], json!([""]));
    assert_eq!(g["disks"], json!([]));
    assert_eq!(g["efi"], json!(false));
    assert_eq!(g["transactional"], json!(false));
    assert_eq!(
        g["locale_info"],
        json!({"defaultlanguage": "en_US", "defaultencoding": "UTF-8",
               "detectedencoding": "utf-8", "timezone": "UTC"})
    );
    for absent in [
        "dns",
        "machine_id",
        "kernelparams",
        "ip_gw",
        "username",
        "pid",
        "uid",
        "systemd",
        "selinux",
        "localhost",
        "nodename",
        "mdadm",
        "lvm",
        "osrelease_info",
    ] {
        assert!(!g.contains_key(absent), "{absent} should be absent");
    }
}

#[test]
fn the_user_and_group_come_from_the_account_files() {
    let host = Fixture::default()
        .file(
            "/etc/passwd",
            "root:x:0:0:root:/root:/bin/bash\nmaid:x:998:997::/var/lib/maid:/usr/sbin/nologin\n",
        )
        .file("/etc/group", "root:x:0:\nmaid:x:997:\n");
    let facts = Facts {
        uid: Some(998),
        gid: Some(997),
        pid: Some(42),
        ..Facts::default()
    };
    let g = collect(&host, &facts);
    assert_eq!(g["username"], json!("maid"));
    assert_eq!(g["groupname"], json!("maid"));
    assert_eq!(
        (g["uid"].clone(), g["gid"].clone(), g["pid"].clone()),
        (json!(998), json!(997), json!(42))
    );
    let host = Fixture::default().file(
        "/etc/passwd",
        "root:x:0:0:root:/root:/bin/bash\nmaid:x:998:555::/:/bin/sh\n",
    );
    assert_eq!(collect(&host, &facts)["groupname"], json!(""));
}

#[test]
fn virtual_machines_and_containers_are_told_apart() {
    let facts = Facts::default();
    let kvm = Fixture::default()
        .program("/usr/bin/systemd-detect-virt", &[], 0, "kvm\n")
        .program(
            "/usr/sbin/dmidecode",
            &["-t", "system"],
            0,
            "System Information\n\tManufacturer: Amazon EC2\n\tProduct Name: m5.large\n",
        );
    let g = collect(&kvm, &facts);
    assert_eq!(
        (g["virtual"].clone(), g["virtual_subtype"].clone()),
        (json!("Nitro"), json!("Amazon EC2 (m5.large)"))
    );
    let lxc = Fixture::default()
        .program("/usr/bin/systemd-detect-virt", &[], 1, "none\n")
        .file("/proc/1/cgroup", "12:pids:/lxc/web\n");
    let g = collect(&lxc, &facts);
    assert_eq!(
        (g["virtual"].clone(), g["virtual_subtype"].clone()),
        (json!("container"), json!("LXC"))
    );
    let k8s = Fixture::default().file("/proc/1/cgroup", "0::/kubepods/besteffort/pod1\n");
    let g = collect(&k8s, &facts);
    assert_eq!(
        (g["virtual"].clone(), g["virtual_subtype"].clone()),
        (json!("virtual"), json!("kubernetes"))
    );
    let qemu = Fixture::default().file(
        "/proc/cpuinfo",
        "processor : 0\nmodel name : QEMU Virtual CPU version 2.5+\nflags : fpu lm\n",
    );
    assert_eq!(collect(&qemu, &facts)["virtual"], json!("kvm"));
    let gce = Fixture::default().file(
        "/sys/devices/virtual/dmi/id/product_name",
        "Google Compute Engine\n",
    );
    assert_eq!(collect(&gce, &facts)["virtual"], json!("gce"));
}

#[test]
fn init_systems_are_found_as_salt_finds_them() {
    let facts = Facts {
        env: [("PATH".to_string(), "/usr/bin:/bin".to_string())]
            .into_iter()
            .collect(),
        ..Facts::default()
    };
    let systemd = Fixture::default().file("/run/systemd/system", "");
    assert_eq!(collect(&systemd, &facts)["init"], json!("systemd"));
    let sysv = Fixture::default()
        .file("/proc/1/cmdline", "/sbin/init\0")
        .file("/sbin/init", "\x7fELF ... INIT_VERSION=sysvinit-3.06");
    assert_eq!(collect(&sysv, &facts)["init"], json!("sysvinit"));
    let tini = Fixture::default().file("/proc/1/cmdline", "/usr/bin/tini\0--\0/app\0");
    assert_eq!(collect(&tini, &facts)["init"], json!("tini"));
    let runit = Fixture::default().file("/proc/1/cmdline", "runit\0");
    assert_eq!(collect(&runit, &facts)["init"], json!("runit"));
}

#[test]
fn firmware_and_disks_show_where_their_files_do() {
    let mut host = Fixture::default()
        .file("/sys/class/dmi/id/sys_vendor", "QEMU\n")
        .file(
            "/sys/class/dmi/id/product_name",
            "Standard PC (Q35 + ICH9, 2009)\n",
        )
        .file(
            "/sys/class/dmi/id/product_uuid",
            "3D1219C7-C4C5-404A-AA1F-6D2A48ADFDA4\n",
        )
        .file(
            "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c",
            "\x06\x00\x00\x00\x01",
        )
        .file("/sys/block/nvme0n1/queue/rotational", "0\n")
        .file("/sys/block/sda/queue/rotational", "1\n")
        .file(
            "/proc/mdstat",
            "Personalities : [raid1]\nmd0 : active raid1 sda1[0]\n",
        )
        .file("/proc/sys/kernel/arch", "aarch64\n");
    host.dirs.insert("/sys/class/dmi/id".into(), Vec::new());
    host.dirs
        .insert("/sys/firmware/efi/efivars".into(), Vec::new());
    host.dirs.insert(
        "/sys/block".into(),
        ["sda", "nvme0n1"].map(String::from).to_vec(),
    );
    host.links.insert(
        "/sys/block/sda".into(),
        "../devices/pci0000:00/ata1/block/sda".into(),
    );
    host.links.insert(
        "/sys/block/nvme0n1".into(),
        "../devices/pci0000:00/nvme/nvme0n1".into(),
    );
    let g = collect(&host, &Facts::default());
    assert_eq!(g["manufacturer"], json!("QEMU"));
    assert_eq!(g["productname"], json!("Standard PC (Q35 + ICH9, 2009)"));
    assert_eq!(g["uuid"], json!("3d1219c7-c4c5-404a-aa1f-6d2a48adfda4"));
    assert!(!g.contains_key("serialnumber"));
    assert_eq!(
        (g["efi"].clone(), g["efi-secure-boot"].clone()),
        (json!(true), json!(true))
    );
    assert_eq!(
        (g["disks"].clone(), g["ssds"].clone()),
        (json!(["sda"]), json!(["nvme0n1"]))
    );
    assert_eq!(g["mdadm"], json!(["md0"]));
    assert_eq!(g["cpuarch"], json!("aarch64"));
}

#[test]
fn the_zone_comes_from_tz_or_localtime() {
    let mut host = Fixture::tree("fixtures/host-debian12");
    assert_eq!(super::locale::tzname(&zone(&host, None), 0), "UTC");
    // An empty TZ is the `Universal` zone, a name only without its file.
    assert_eq!(
        super::locale::tzname(&zone(&host, Some("")), 0),
        "Universal"
    );
    let utc = host.read("/etc/localtime").unwrap_or_default();
    host.files
        .insert("/usr/share/zoneinfo/Universal".into(), utc);
    assert_eq!(super::locale::tzname(&zone(&host, Some("")), 0), "UTC");
    assert_eq!(super::locale::tzname(&zone(&host, Some(":")), 0), "UTC");
    assert_eq!(
        super::locale::tzname(&zone(&host, Some("Europe/Nowhere")), 0),
        "Europe"
    );
    assert_eq!(
        super::locale::tzname(
            &zone(&host, Some("CET-1CEST,M3.5.0,M10.5.0/3")),
            1_782_864_000
        ),
        "CEST"
    );
    assert_eq!(super::locale::tzname(&zone(&host, Some("12")), 0), "");
}

/// What `salt-call grains.item locale_info` said on this host under
/// `LC_ALL=C`, `LANG=de_DE.UTF-8` (a locale it lacks), and with a
/// daylight-saving `TZ`.
#[test]
fn locale_info_follows_the_environment_as_salt_does() {
    let env = |pairs: &[(&str, &str)]| Facts {
        env: pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Facts::default()
    };
    let mut host = Fixture::tree("fixtures/host-debian12");
    host.now = 1_795_000_000; // November 2026
    let info = |host: &Fixture, facts: &Facts| collect(host, facts)["locale_info"].clone();
    assert_eq!(
        info(&host, &env(&[("LC_ALL", "C")])),
        json!({"defaultlanguage": null, "defaultencoding": null,
               "detectedencoding": "utf-8", "timezone": "UTC"})
    );
    assert_eq!(
        info(&host, &env(&[("LANG", "de_DE.UTF-8")]))["defaultlanguage"],
        json!("en_US")
    );
    assert_eq!(
        info(
            &host,
            &env(&[("LANG", "POSIX"), ("TZ", "AEST-10AEDT,M10.1.0,M4.1.0/3")])
        )["timezone"],
        json!("AEDT")
    );
    // Where the locale is installed, it is the one.
    host.dirs
        .insert("/usr/lib/locale/de_DE.utf8".into(), Vec::new());
    assert_eq!(
        info(&host, &env(&[("LANG", "de_DE.UTF-8")])),
        json!({"defaultlanguage": "de_DE", "defaultencoding": "UTF-8",
               "detectedencoding": "utf-8", "timezone": "UTC"})
    );
}

/// The names Salt 3008.4 reported on this host with `hostname web1` and
/// this `/etc/hosts` bind-mounted (`fqdns` by `network.fqdns`, which the
/// grain gives only with `enable_fqdns_grains`, off by default).
#[test]
fn host_names_come_from_etc_hosts_as_salt_finds_them() {
    let base = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/host-debian12");
    let mut host = Fixture::default()
        .file("/proc/sys/kernel/hostname", "web1\n")
        .file(
            "/etc/hosts",
            "127.0.0.1\tlocalhost\n127.0.1.1\tweb1.example.com web1 # the host\n\
             192.0.2.2 web1.example.com\n::1 localhost ip6-localhost ip6-loopback\n\
             fd00::2 web1-v6.example.com web1\nbad line\n# 10.0.0.1 gone\n",
        );
    host.interfaces = serde_json::from_str(
        &std::fs::read_to_string(base.join("interfaces.json")).unwrap_or_default(),
    )
    .unwrap_or_default();
    let mut facts = Facts::default();
    let g = collect(&host, &facts);
    assert_eq!(g["fqdn"], json!("web1.example.com"));
    assert_eq!(g["host"], json!("web1"));
    assert_eq!(g["domain"], json!("example.com"));
    assert_eq!(g["localhost"], json!("web1"));
    assert_eq!(g["fqdn_ip4"], json!(["127.0.1.1", "192.0.2.2"]));
    assert_eq!(g["fqdn_ip6"], json!([]));
    assert_eq!(g["fqdns"], json!([]));
    facts.enable_fqdns_grains = true;
    assert_eq!(
        collect(&host, &facts)["fqdns"],
        json!(["web1-v6.example.com", "web1.example.com"])
    );
}
