//! Salt 3008.4's Linux grains of the machine: CPUs, memory, kernel
//! parameters, disks, firmware (DMI, devicetree, EFI), GPUs, the init
//! system, systemd, SELinux, virtualisation, MD RAID and LVM.

use serde_json::{Map, Value, json};

use super::text::{lines, shlex_split};
use super::{Host, cmd_run, cmd_run_all};

/// Salt's `_linux_cpudata` over `/proc/cpuinfo`: `num_cpus`, `cpu_model`,
/// `cpu_flags` (`None` for a missing file gives Salt's defaults).
pub(crate) fn cpudata(cpuinfo: Option<&str>) -> Map<String, Value> {
    let mut num_cpus: i64 = 0;
    let mut model: Option<String> = None;
    let mut flags: Option<Vec<String>> = None;
    for line in cpuinfo.map(lines).unwrap_or_default() {
        // Salt splits on every `:` and keeps only the first two parts.
        let comps: Vec<&str> = line.split(':').collect();
        if comps.len() < 2 {
            continue;
        }
        let (key, val) = (comps[0].trim(), comps[1].trim());
        match key {
            "processor" => num_cpus += 1,
            "# processors" => {
                if let Ok(n) = val.parse() {
                    num_cpus = n;
                }
            }
            "vendor_id" | "model name" | "cpu" => model = Some(val.to_string()),
            "flags" | "Features" => {
                flags = Some(val.split_whitespace().map(str::to_string).collect())
            }
            "Processor" => {
                model = Some(val.split('-').next().unwrap_or("").to_string());
                num_cpus = 1;
            }
            _ => {}
        }
    }
    let mut g = Map::new();
    g.insert("num_cpus".into(), json!(num_cpus));
    g.insert(
        "cpu_model".into(),
        json!(model.unwrap_or_else(|| "Unknown".into())),
    );
    g.insert("cpu_flags".into(), json!(flags.unwrap_or_default()));
    g
}

/// Salt's `_linux_memdata` over `/proc/meminfo`: `mem_total` and
/// `swap_total` in MiB (0 where missing).
pub(crate) fn memdata(meminfo: Option<&str>) -> Map<String, Value> {
    let mut g = Map::new();
    g.insert("mem_total".into(), json!(0));
    g.insert("swap_total".into(), json!(0));
    for line in meminfo.map(lines).unwrap_or_default() {
        let comps: Vec<&str> = line.split(':').collect();
        if comps.len() < 2 {
            continue;
        }
        let grain = match comps[0].trim() {
            "MemTotal" => "mem_total",
            "SwapTotal" => "swap_total",
            _ => continue,
        };
        if let Some(kb) = comps[1]
            .split_whitespace()
            .next()
            .and_then(|n| n.parse::<i64>().ok())
        {
            g.insert(grain.into(), json!(kb.div_euclid(1024)));
        }
    }
    g
}

/// The machine (`uname -m`) as `/proc/cpuinfo` shows it, for a kernel
/// without `/proc/sys/kernel/arch`.
pub(crate) fn machine_from_cpuinfo(cpuinfo: &str) -> Option<String> {
    let mut fields: Vec<(&str, &str)> = Vec::new();
    for line in lines(cpuinfo) {
        if let Some((k, v)) = line.split_once(':') {
            fields.push((k.trim(), v.trim()));
        }
    }
    let field = |name: &str| fields.iter().find(|(k, _)| *k == name).map(|(_, v)| *v);
    if let Some(flags) = field("flags") {
        let long_mode = flags.split_whitespace().any(|f| f == "lm");
        return Some(if long_mode { "x86_64" } else { "i686" }.into());
    }
    if field("vendor_id").is_some_and(|v| v.contains("S390")) {
        return Some("s390x".into());
    }
    if let Some(isa) = field("isa") {
        return Some(
            if isa.starts_with("rv32") {
                "riscv32"
            } else {
                "riscv64"
            }
            .into(),
        );
    }
    if let Some(arch) = field("CPU architecture") {
        // A 32-bit ARM kernel names the mode in its model name: `(v7l)`.
        if let Some(model) = field("model name").or(field("Processor"))
            && let Some(open) = model.rfind("(v")
            && let Some(close) = model[open..].find(')')
        {
            return Some(format!("arm{}", &model[open + 1..open + close]));
        }
        return Some(
            if arch == "8" || arch == "AArch64" {
                "aarch64"
            } else {
                "armv7l"
            }
            .into(),
        );
    }
    if field("cpu").is_some_and(|c| c.contains("POWER")) {
        return Some("ppc64le".into());
    }
    if field("CPU Family").is_some_and(|c| c.contains("Loongson")) {
        return Some("loongarch64".into());
    }
    None
}

/// Salt's `kernelparams` of `/proc/cmdline`: the words split as a shell
/// would, each `(name, value)` with the value's quotes stripped, `None`
/// without exactly one `=`. `None` where Salt's split raises.
pub(crate) fn kernelparams(cmdline: &str) -> Option<Value> {
    let words = shlex_split(cmdline, false).ok()?;
    let params: Vec<Value> = words
        .iter()
        .map(|w| {
            let data: Vec<&str> = w.split('=').collect();
            let value = (data.len() == 2).then(|| data[1].trim_matches('"').to_string());
            json!([data[0], value])
        })
        .collect();
    Some(Value::Array(params))
}

/// Salt's `_linux_disks`: the block devices of `/sys/block` that are
/// not virtual, as `disks` (rotational) and `ssds`, in directory order.
pub(crate) fn disks(host: &dyn Host) -> Map<String, Value> {
    let (mut disks, mut ssds) = (Vec::new(), Vec::new());
    for name in host.list_dir("/sys/block").unwrap_or_default() {
        let entry = format!("/sys/block/{name}");
        let Some(target) = host.read_link(&entry) else {
            host.log(&format!("{entry}: not a link; skipped"));
            continue;
        };
        if target.starts_with("../devices/virtual/") {
            continue;
        }
        match host
            .read(&format!("{entry}/queue/rotational"))
            .and_then(|b| b.first().copied())
        {
            Some(b'0') => ssds.push(name),
            Some(b'1') => disks.push(name),
            _ => {}
        }
    }
    let mut g = Map::new();
    g.insert("disks".into(), json!(disks));
    g.insert("ssds".into(), json!(ssds));
    g
}

/// Salt's `_hw_data` on Linux with `/sys/class/dmi/id`: each DMI file
/// that can be read, stripped (the UUID lowercased).
pub(crate) fn dmi(host: &dyn Host) -> Map<String, Value> {
    let mut g = Map::new();
    if !host.exists("/sys/class/dmi/id") {
        return g;
    }
    for (grain, file) in [
        ("biosversion", "bios_version"),
        ("biosvendor", "bios_vendor"),
        ("boardname", "board_name"),
        ("productname", "product_name"),
        ("manufacturer", "sys_vendor"),
        ("biosreleasedate", "bios_date"),
        ("uuid", "product_uuid"),
        ("serialnumber", "product_serial"),
    ] {
        if let Some(bytes) = host.read(&format!("/sys/class/dmi/id/{file}")) {
            let text = String::from_utf8_lossy(bytes.trim_ascii()).into_owned();
            let text = if grain == "uuid" {
                text.to_lowercase()
            } else {
                text
            };
            g.insert(grain.into(), json!(text));
        }
    }
    g
}

/// Salt's `_linux_devicetree_platform_data`: `manufacturer`,
/// `productname` and `serialnumber` from `/proc/device-tree`.
pub(crate) fn devicetree(host: &dyn Host) -> Map<String, Value> {
    let read = |name: &str| {
        host.read(&format!("/proc/device-tree/{name}"))
            .and_then(|b| String::from_utf8(b).ok())
            .map(|s| s.trim_end_matches('\0').to_string())
            .filter(|s| !s.is_empty())
    };
    let mut g = Map::new();
    if let Some(model) = read("model") {
        match model.split_once(',') {
            Some((maker, product)) => {
                g.insert("manufacturer".into(), json!(maker));
                g.insert("productname".into(), json!(product));
            }
            None => {
                g.insert("productname".into(), json!(model));
            }
        }
    }
    if let Some(id) = read("system-id") {
        g.insert("serialnumber".into(), json!(id));
    }
    if let Some(serial) = read("serial-number") {
        g.insert("serialnumber".into(), json!(serial));
    }
    g
}

/// Salt's `_linux_gpu_data` of `lspci -vmm`'s output: the display
/// devices, each `{vendor, model}` with the vendor one Salt knows.
pub(crate) fn gpus(lspci_vmm: &str) -> Vec<Value> {
    const VENDORS: &[&str] = &[
        "nvidia",
        "amd",
        "ati",
        "intel",
        "cirrus logic",
        "vmware",
        "matrox",
        "aspeed",
    ];
    const CLASSES: &[&str] = &[
        "3d controller",
        "display controller",
        "processing accelerators",
        "vga compatible controller",
    ];
    let mut devs: Vec<Vec<(String, String)>> = Vec::new();
    let mut cur: Vec<(String, String)> = Vec::new();
    let field = |dev: &[(String, String)], key: &str| {
        dev.iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let mut all: Vec<&str> = lspci_vmm.lines().collect();
    all.push("");
    for line in all {
        if line.is_empty() {
            if CLASSES.contains(&field(&cur, "Class").to_lowercase().as_str()) {
                devs.push(std::mem::take(&mut cur));
            }
            cur.clear();
            continue;
        }
        // `^\w+:\s+.*`: a word, a colon, at least one blank.
        if let Some((key, val)) = line.split_once(':')
            && !key.is_empty()
            && key.chars().all(|c| c.is_alphanumeric() || c == '_')
            && val.starts_with(char::is_whitespace)
        {
            cur.push((key.trim().to_string(), val.trim().to_string()));
        }
    }
    devs.iter()
        .map(|dev| {
            let vendor = field(dev, "Vendor").to_lowercase();
            let words: Vec<&str> = vendor.split(|c: char| !c.is_ascii_alphanumeric()).collect();
            let known = VENDORS
                .iter()
                .find(|v| words.contains(v))
                .copied()
                .unwrap_or("unknown");
            json!({"vendor": known, "model": field(dev, "Device")})
        })
        .collect()
}

/// Salt's `_systemd`: `systemctl --version`'s version and features.
pub(crate) fn systemd(host: &dyn Host, systemctl: &str) -> Value {
    let (mut version, mut features) = ("UNDEFINED".to_string(), String::new());
    if let Some(out) = cmd_run_all(host, &[systemctl, "--version"])
        && out.retcode == 0
    {
        let info: Vec<&str> = out.stdout.lines().collect();
        if let Some(first) = info.first()
            && first.starts_with("systemd ")
            && let Some(v) = first.split_whitespace().nth(1)
        {
            version = v.to_string();
            if let Some(f) = info.get(1) {
                features = f.to_string();
            }
        }
    }
    json!({"version": version, "features": features})
}

/// Salt's `_selinux`: whether `selinuxenabled` says so, and what
/// `getenforce` says when it is there.
pub(crate) fn selinux(host: &dyn Host, selinuxenabled: &str) -> Value {
    let enabled = cmd_run_all(host, &[selinuxenabled]).is_some_and(|r| r.retcode == 0);
    let mut g = Map::new();
    g.insert("enabled".into(), json!(enabled));
    if let Some(getenforce) = host.which("getenforce") {
        let out = cmd_run(host, &[&getenforce]).unwrap_or_default();
        g.insert("enforced".into(), json!(out.trim()));
    }
    Value::Object(g)
}

/// Salt's `_linux_init_system`: `systemd` when `/run/systemd/system`
/// exists, else what PID 1's command line and program say.
pub(crate) fn init_system(host: &dyn Host, path_dirs: &[String]) -> String {
    if host.exists("/run/systemd/system") {
        return "systemd".into();
    }
    let Some(raw) = host.read("/proc/1/cmdline") else {
        return "unknown".into();
    };
    let text = String::from_utf8_lossy(&raw).replace('\0', " ");
    let cmdline: Vec<&str> = text.split_whitespace().collect();
    let init_bin = cmdline.first().and_then(|first| {
        if first.contains('/') {
            Some(first.to_string())
        } else {
            host.which(first)
        }
    });
    // Salt's `which(name) in cmdline`: the program found on PATH, by
    // the path it was started as.
    let started = |name: &str| {
        cmdline.iter().any(|w| {
            w.rsplit_once('/')
                .is_some_and(|(dir, base)| base == name && path_dirs.iter().any(|d| d == dir))
        })
    };
    if let Some(bin) = init_bin.as_deref()
        && bin.ends_with("bin/init")
    {
        return host
            .read(bin)
            .and_then(|b| init_in_binary(&b))
            .unwrap_or("unknown")
            .into();
    }
    if started("supervisord") {
        "supervisord".into()
    } else if started("dumb-init") {
        "dumb-init".into()
    } else if started("tini") {
        "tini".into()
    } else if cmdline == ["runit"] || cmdline.contains(&"/sbin/my_init") {
        "runit".into()
    } else {
        host.log(&format!(
            "Could not determine init system from command line: ({})",
            cmdline.join(" ")
        ));
        "unknown".into()
    }
}

/// The init system an init program names, as Salt reads it: in chunks
/// of 256 KiB, lowercased, the first of `upstart`, `sysvinit`, `systemd`
/// a chunk holds, the last chunk that holds one winning.
pub(crate) fn init_in_binary(bytes: &[u8]) -> Option<&'static str> {
    const CHUNK: usize = 262_144;
    const INITS: [&str; 3] = ["upstart", "sysvinit", "systemd"];
    let lower = bytes.to_ascii_lowercase();
    let mut found = None;
    let mut edge: Vec<u8> = Vec::new();
    for chunk in lower.chunks(CHUNK) {
        let mut buf = std::mem::take(&mut edge);
        buf.extend_from_slice(chunk);
        match INITS
            .iter()
            .find(|item| buf.windows(item.len()).any(|w| w == item.as_bytes()))
        {
            Some(item) => found = Some(*item),
            None => edge = buf[buf.len().saturating_sub(7)..].to_vec(),
        }
    }
    found
}

/// What `_virtual` needs to know of the host besides the programs.
pub(crate) struct VirtualInputs<'a> {
    pub cpuinfo: Option<&'a str>,
    pub productname: Option<&'a str>,
}

/// Salt's `_virtual` on Linux: `virtual` and, where it knows,
/// `virtual_subtype`, from `systemd-detect-virt` or `virt-what`,
/// `dmidecode`, `lspci`, and the files of `/proc` and `/sys` that show a
/// hypervisor or a container.
pub(crate) fn virtual_grains(host: &dyn Host, inputs: &VirtualInputs) -> Map<String, Value> {
    let mut v = Virt {
        virtual_: "physical".into(),
        subtype: None,
    };
    v.programs(host);
    v.openvz(host);
    v.xen(host, inputs);
    v.product(host, inputs);
    v.cgroup(host);
    v.amazon(host);
    let mut g = Map::new();
    g.insert("virtual".into(), json!(v.virtual_));
    if let Some(s) = v.subtype {
        g.insert("virtual_subtype".into(), json!(s));
    }
    g
}

/// `virtual` and `virtual_subtype` as `_virtual` works them out, step by
/// step.
struct Virt {
    virtual_: String,
    subtype: Option<String>,
}

impl Virt {
    /// What the first program that knows says (`_virtual`'s loop over
    /// its commands).
    fn programs(&mut self, host: &dyn Host) {
        let mut cmds: Vec<&str> = if host.which("virt-what").is_some() {
            vec!["virt-what"]
        } else {
            vec!["systemd-detect-virt", "virt-what", "dmidecode"]
        };
        if host.exists("/proc/bus/pci") {
            cmds.push("lspci");
        }
        for command in cmds {
            let Some(path) = host.which(command) else {
                continue;
            };
            let Some(ret) = cmd_run_all(host, &[&path]) else {
                continue;
            };
            if ret.retcode > 0 {
                continue;
            }
            let output = ret.stdout;
            match command {
                "systemd-detect-virt" => {
                    let found = systemd_detect_virt(&output);
                    if let Some((v, s)) = found {
                        self.virtual_ = v.into();
                        if let Some(s) = s {
                            self.subtype = Some(s.into());
                        }
                        break;
                    }
                }
                "virt-what" => {
                    if let Some((v, s)) = virt_what(&output) {
                        self.virtual_ = v.into();
                        if let Some(s) = s {
                            self.subtype = Some(s.into());
                        }
                    }
                    break;
                }
                "dmidecode" => {
                    let (v, s) = dmidecode_virtual(&output);
                    if let Some(v) = v {
                        self.virtual_ = v.into();
                    }
                    if let Some(s) = s {
                        self.subtype = Some(s.into());
                    }
                    break;
                }
                _ => {
                    let model = output.to_lowercase();
                    if model.contains("vmware") {
                        self.virtual_ = "VMware".into();
                    } else if model.contains("virtualbox") {
                        self.virtual_ = "VirtualBox".into();
                    } else if model.contains("qemu") || model.contains("virtio") {
                        self.virtual_ = "kvm".into();
                    }
                    break;
                }
            }
        }
    }

    /// OpenVZ, from `/proc/vz` and this process's `envID`.
    fn openvz(&mut self, host: &dyn Host) {
        // (Salt's chroot check compares `/` with `/proc/1/root`, which the
        // sandbox cannot stat.)
        if host.exists("/proc/vz/version") {
            self.virtual_ = "openvzhn".into();
        } else if host.exists("/proc/vz/veinfo") {
            self.virtual_ = "openvzve".into();
        }
        if let Some(status) = host.read_text("/proc/self/status") {
            for line in lines(&status) {
                if let Some(rest) = line.strip_prefix("envID:")
                    && rest.starts_with(char::is_whitespace)
                    && let Ok(id) = rest.trim().parse::<u64>()
                    && rest.trim_start().bytes().all(|b| b.is_ascii_digit())
                {
                    self.virtual_ = if id != 0 { "openvzve" } else { "openvzhn" }.into();
                }
            }
        }
    }

    /// Xen: dom0, HVM or PV guests.
    fn xen(&mut self, host: &dyn Host, inputs: &VirtualInputs) {
        if host.exists("/proc/sys/xen") || host.exists("/sys/bus/xen") || host.exists("/proc/xen") {
            if host.exists("/proc/xen/xsd_kva") {
                self.subtype = Some("Xen Dom0".into());
            } else if inputs.productname == Some("HVM domU") {
                self.subtype = Some("Xen HVM DomU".into());
            } else if let Some(caps) = host.read_text("/proc/xen/capabilities") {
                self.subtype = Some(
                    if caps.contains("control_d") {
                        "Xen Dom0"
                    } else {
                        "Xen PV DomU"
                    }
                    .into(),
                );
            } else if host.exists("/sys/bus/xen") {
                // An actual DomU has the xenconsole driver; else dmesg may say.
                if host.exists("/sys/bus/xen/drivers/xenconsole")
                    || host
                        .which("dmesg")
                        .and_then(|p| cmd_run(host, &[&p]))
                        .is_some_and(|out| out.to_lowercase().contains("xen:"))
                {
                    self.subtype = Some("Xen PV DomU".into());
                }
            }
            if self
                .subtype
                .as_deref()
                .is_some_and(|s| s.to_lowercase().contains("dom"))
            {
                self.virtual_ = "xen".into();
            }
        }
    }

    /// What the CPU model and the DMI product name tell.
    fn product(&mut self, host: &dyn Host, inputs: &VirtualInputs) {
        if inputs
            .cpuinfo
            .is_some_and(|c| c.contains("QEMU Virtual CPU"))
        {
            self.virtual_ = "kvm".into();
        }
        if let Some(bytes) = host.read("/sys/devices/virtual/dmi/id/product_name") {
            let output = String::from_utf8_lossy(&bytes);
            if output.contains("VirtualBox") {
                self.virtual_ = "VirtualBox".into();
            } else if output.contains("RHEV Hypervisor") {
                self.virtual_ = "kvm".into();
                self.subtype = Some("rhev".into());
            } else if output.contains("oVirt Node") {
                self.virtual_ = "kvm".into();
                self.subtype = Some("ovirt".into());
            } else if output.contains("Google") {
                self.virtual_ = "gce".into();
            } else if output.contains("BHYVE") {
                self.virtual_ = "bhyve".into();
            }
        }
    }

    /// Containers, from PID 1's cgroup.
    fn cgroup(&mut self, host: &dyn Host) {
        if let Some(cgroup) = host.read_text("/proc/1/cgroup") {
            if cgroup.contains(":/lxc/") {
                self.virtual_ = "container".into();
                self.subtype = Some("LXC".into());
            } else if cgroup.contains(":/kubepods/") {
                self.subtype = Some("kubernetes".into());
            } else if cgroup.contains(":/libpod_parent/") {
                self.subtype = Some("libpod".into());
            } else if [":/system.slice/docker", ":/docker/", ":/docker-ce/"]
                .iter()
                .any(|m| cgroup.contains(m))
            {
                self.virtual_ = "container".into();
                self.subtype = Some("Docker".into());
            }
        }
        // Salt also looks for `container=lxc` in `/proc/1/environ`; PID 1's
        // environment may hold secrets, and no grant gives it to grains
        // (systemd-detect-virt names LXC where systemd runs).
        if self.subtype.as_deref().is_some_and(|s| !s.is_empty()) && self.virtual_ == "physical" {
            self.virtual_ = "virtual".into();
        }
    }

    /// Amazon EC2 and Nutanix, from `dmidecode -t system` where it may run.
    fn amazon(&mut self, host: &dyn Host) {
        if ["qemu", "kvm", "xen", "amazon"].contains(&self.virtual_.as_str())
            && let Some(dmidecode) = host.which("dmidecode")
        {
            let output = cmd_run_all(host, &[&dmidecode, "-t", "system"])
                .map(|r| r.stdout)
                .unwrap_or_default();
            if output.contains("Manufacturer: Amazon EC2") {
                if self.virtual_ != "xen" {
                    self.virtual_ = "Nitro".into();
                }
                self.subtype = Some(match last_after(&output, "Product Name: ") {
                    Some(product) => format!("Amazon EC2 ({product})"),
                    None => "Amazon EC2".into(),
                });
            } else if amazon_version(&output) {
                self.subtype = Some("Amazon EC2".into());
            } else if output.contains("Manufacturer: Nutanix")
                && output.contains("Product Name: AHV")
            {
                self.subtype = Some("Nutanix AHV".into());
            }
        }
    }
}

/// What `systemd-detect-virt`'s answer makes of `virtual` and
/// `virtual_subtype`, when Salt knows the answer.
fn systemd_detect_virt(output: &str) -> Option<(&'static str, Option<&'static str>)> {
    Some(match output {
        "qemu" => ("qemu", None),
        "kvm" => ("kvm", None),
        "oracle" => ("oracle", None),
        "xen" => ("xen", None),
        "bochs" => ("bochs", None),
        "chroot" => ("chroot", None),
        "uml" => ("uml", None),
        "systemd-nspawn" => ("systemd-nspawn", None),
        o if o.contains("vmware") => ("VMware", None),
        o if o.contains("microsoft") => ("VirtualPC", None),
        o if o.contains("lxc") => ("container", Some("LXC")),
        o if o.contains("podman") => ("container", Some("Podman")),
        o if o.contains("docker") => ("container", Some("Docker")),
        o if o.contains("amazon") => ("Nitro", Some("Amazon EC2")),
        _ => return None,
    })
}

/// What `virt-what`'s first line Salt knows makes of `virtual` and
/// `virtual_subtype`.
fn virt_what(output: &str) -> Option<(&'static str, Option<&'static str>)> {
    for line in output.lines() {
        let found = match line {
            "kvm" => ("kvm", None),
            "qemu" => ("qemu", None),
            "uml" => ("uml", None),
            "xen" => ("xen", None),
            l if l.contains("lxc") => ("container", Some("LXC")),
            l if l.contains("docker") => ("container", Some("Docker")),
            l if l.contains("vmware") => ("VMware", None),
            l if l.contains("parallels") => ("Parallels", None),
            l if l.contains("nutanix") => ("kvm", Some("Nutanix AHV")),
            l if l.contains("hyperv") => ("HyperV", None),
            "ibm_power-kvm" => ("kvm", None),
            "ibm_power-lpar_shared" => ("LPAR", Some("shared")),
            "ibm_power-lpar_dedicated" => ("LPAR", Some("dedicated")),
            _ => continue,
        };
        return Some(found);
    }
    None
}

/// What `dmidecode`'s whole output makes of `virtual` and
/// `virtual_subtype` (Salt's `if` chain, the first `if`s not exclusive).
fn dmidecode_virtual(output: &str) -> (Option<&'static str>, Option<&'static str>) {
    let mut v = None;
    let mut s = None;
    for marker in [
        "Vendor: QEMU",
        "Manufacturer: QEMU",
        "Vendor: Bochs",
        "Manufacturer: Bochs",
    ] {
        if output.contains(marker) {
            v = Some("kvm");
        }
    }
    if output.contains("BHYVE") {
        v = Some("bhyve");
    } else if output.contains("Manufacturer: oVirt") {
        v = Some("kvm");
        s = Some("ovirt");
    } else if output.contains("Product Name: RHEV Hypervisor") {
        v = Some("kvm");
        s = Some("rhev");
    } else if output.contains("VirtualBox") {
        v = Some("VirtualBox");
    } else if output.contains("VMware") {
        v = Some("VMware");
    } else if output.contains(": Microsoft") && output.contains("Virtual Machine") {
        v = Some("VirtualPC");
    } else if output.contains("Parallels Software") {
        v = Some("Parallels");
    } else if output.contains("Manufacturer: Google") {
        v = Some("kvm");
    } else if output.contains("Manufacturer: Nutanix") && output.contains("Product Name: AHV") {
        v = Some("kvm");
        s = Some("Nutanix AHV");
    } else if output.contains("Vendor: SeaBIOS") {
        v = Some("kvm");
    }
    (v, s)
}

/// The rest of the line after the last `marker` (`.*marker([^\r\n]*)`).
fn last_after<'a>(output: &'a str, marker: &str) -> Option<&'a str> {
    let at = output.rfind(marker)? + marker.len();
    let rest = &output[at..];
    Some(rest.split(['\r', '\n']).next().unwrap_or(""))
}

/// `Version: <something>.amazon` on one line of `dmidecode` output.
fn amazon_version(output: &str) -> bool {
    output.split(['\r', '\n']).any(|line| {
        let mut from = 0;
        while let Some(at) = line[from..].find("Version: ") {
            let rest = &line[from + at + 9..];
            if rest
                .char_indices()
                .any(|(i, _)| i >= 1 && rest[i..].starts_with(".amazon"))
            {
                return true;
            }
            from += at + 1;
        }
        false
    })
}

/// Salt's `_virtual_hv` for Xen guests and hosts: the hypervisor's
/// version and features from `/sys/hypervisor`.
pub(crate) fn virtual_hv(host: &dyn Host) -> Map<String, Value> {
    let mut g = Map::new();
    let part = |f: &str| {
        host.read_text(&format!("/sys/hypervisor/version/{f}"))
            .map(|s| s.trim().to_string())
    };
    if let (Some(major), Some(minor), Some(extra)) = (part("major"), part("minor"), part("extra")) {
        g.insert(
            "virtual_hv_version".into(),
            json!(format!("{major}.{minor}{extra}")),
        );
        g.insert(
            "virtual_hv_version_info".into(),
            json!([major, minor, extra]),
        );
    }
    if let Some(features) = host
        .read_text("/sys/hypervisor/properties/features")
        .map(|s| s.trim().to_string())
        && let Ok(bits) = u64::from_str_radix(features.trim_start_matches("0x"), 16)
    {
        const FEATURES: &[(u32, &str)] = &[
            (0, "writable_page_tables"),
            (1, "writable_descriptor_tables"),
            (2, "auto_translated_physmap"),
            (3, "supervisor_mode_kernel"),
            (4, "pae_pgdir_above_4gb"),
            (5, "mmu_pt_update_preserve_ad"),
            (7, "gnttab_map_avail_bits"),
            (8, "hvm_callback_vector"),
            (9, "hvm_safe_pvclock"),
            (10, "hvm_pirqs"),
            (11, "dom0"),
            (12, "grant_map_identity"),
            (13, "memory_op_vnode_supported"),
            (14, "ARM_SMCCC_supported"),
        ];
        let enabled: Vec<&str> = FEATURES
            .iter()
            .filter(|(bit, _)| bits & (1 << bit) != 0)
            .map(|(_, name)| *name)
            .collect();
        g.insert("virtual_hv_features".into(), json!(features));
        g.insert("virtual_hv_features_list".into(), json!(enabled));
    }
    g
}

/// Salt's `_ps`: how to list processes on Linux.
pub(crate) fn ps(os_family: &str, virtual_: &str) -> &'static str {
    if virtual_ == "openvzhn" {
        "ps -fH -p $(grep -l \"^envID:[[:space:]]*0\\$\" /proc/[0-9]*/status | sed -e \"s=/proc/\\([0-9]*\\)/.*=\\1=\")  | awk '{ $7=\"\"; print }'"
    } else if os_family == "NILinuxRT" {
        "ps -o user,pid,ppid,tty,time,comm"
    } else {
        "ps -efHww"
    }
}

/// The GUID of EFI's global variables (`SecureBoot-<guid>`).
const EFI_GLOBAL: &str = "8be4df61-93ca-11d2-aa0d-00e098032b8c";

/// Salt's `uefi`: `efi` when the firmware exposes EFI variables, and
/// `efi-secure-boot` when the `SecureBoot` variable's last byte is 1.
pub(crate) fn uefi(host: &dyn Host) -> Map<String, Value> {
    let mut g = Map::new();
    let var = if host.exists("/sys/firmware/efi/efivars") {
        Some(format!("/sys/firmware/efi/efivars/SecureBoot-{EFI_GLOBAL}"))
    } else if host.exists("/sys/firmware/efi/vars") {
        Some(format!(
            "/sys/firmware/efi/vars/SecureBoot-{EFI_GLOBAL}/data"
        ))
    } else {
        None
    };
    let secure = var
        .as_deref()
        .and_then(|v| host.read(v))
        .is_some_and(|b| b.last() == Some(&1));
    g.insert("efi".into(), json!(var.is_some()));
    g.insert("efi-secure-boot".into(), json!(secure));
    g
}

/// Salt's `mdadm` grain of `/proc/mdstat`: the arrays, sorted.
pub(crate) fn mdadm(mdstat: &str) -> Vec<String> {
    let mut devices: Vec<String> = lines(mdstat)
        .into_iter()
        .filter(|l| !l.starts_with("Personalities : ") && !l.starts_with("unused devices:"))
        .filter_map(|l| l.split_once(" : ").map(|(d, _)| d.to_string()))
        .collect();
    devices.sort();
    devices.dedup();
    devices
}

/// Salt's `_linux_lvm`: each volume group's logical volumes.
pub(crate) fn lvm(host: &dyn Host, lvm: &str) -> Value {
    let mut ret = Map::new();
    let vgs = cmd_run_all(host, &[lvm, "vgs", "-o", "vg_name", "--noheadings"])
        .map(|r| r.stdout)
        .unwrap_or_default();
    for vg in vgs.lines() {
        let vg = vg.trim();
        let lvs = cmd_run_all(host, &[lvm, "lvs", "-o", "lv_name", "--noheadings", vg])
            .map(|r| r.stdout)
            .unwrap_or_default();
        let names: Vec<&str> = lvs.lines().map(str::trim).collect();
        ret.insert(vg.to_string(), json!(names));
    }
    Value::Object(ret)
}

#[cfg(test)]
mod tests;
