//! Unit tests of the parent module.

use super::*;

const X86_CPUINFO: &str = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\nmodel name\t: Intel(R) Xeon(R) Processor\nflags\t\t: fpu vme de pse tsc lm\nbogomips\t: 4200.00\n\nprocessor\t: 1\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Processor\nflags\t\t: fpu vme de pse tsc lm\n\n";

const ARM64_CPUINFO: &str = "processor\t: 0\nBogoMIPS\t: 243.75\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x3\nCPU part\t: 0xd0c\nCPU revision\t: 1\n\nprocessor\t: 1\nBogoMIPS\t: 243.75\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x3\nCPU part\t: 0xd0c\nCPU revision\t: 1\n\n";

const RPI_CPUINFO: &str = "processor\t: 0\nmodel name\t: ARMv7 Processor rev 4 (v7l)\nBogoMIPS\t: 38.40\nFeatures\t: half thumb fastmult vfp edsp neon vfpv3 tls vfpv4 idiva idivt vfpd32 lpae evtstrm crc32\nCPU implementer\t: 0x41\nCPU architecture: 7\n\nHardware\t: BCM2835\nRevision\t: a02082\nSerial\t\t: 00000000e5b2f9a0\nModel\t\t: Raspberry Pi 3 Model B Rev 1.2\n";

#[test]
fn cpuinfo_reads_as_salt_reads_it() {
    let g = cpudata(Some(X86_CPUINFO));
    assert_eq!(g["num_cpus"], json!(2));
    assert_eq!(g["cpu_model"], json!("Intel(R) Xeon(R) Processor"));
    assert_eq!(
        g["cpu_flags"],
        json!(["fpu", "vme", "de", "pse", "tsc", "lm"])
    );
    let g = cpudata(Some(ARM64_CPUINFO));
    assert_eq!(g["num_cpus"], json!(2));
    assert_eq!(g["cpu_model"], json!("Unknown"));
    assert_eq!(g["cpu_flags"][1], json!("asimd"));
    let g = cpudata(Some("vendor_id       : IBM/S390\n# processors    : 4\n"));
    assert_eq!(
        (g["num_cpus"].clone(), g["cpu_model"].clone()),
        (json!(4), json!("IBM/S390"))
    );
    let g = cpudata(Some(
        "processor : 0\ncpu : POWER9 (architected), altivec supported\n",
    ));
    assert_eq!(
        g["cpu_model"],
        json!("POWER9 (architected), altivec supported")
    );
    let g = cpudata(Some("model name : CPU @ 2.20GHz: fast\n"));
    assert_eq!(g["cpu_model"], json!("CPU @ 2.20GHz"));
    let g = cpudata(None);
    assert_eq!(
        Value::Object(g),
        json!({"num_cpus": 0, "cpu_model": "Unknown", "cpu_flags": []})
    );
}

/// `/proc/cpuinfo` of a Xeon (this host), a Neoverse-N1 and a
/// Raspberry Pi 3 read as Salt's own `_linux_cpudata` read them
/// (`fixtures/cpuinfo/expected.json`), and the machine each shows.
#[test]
fn real_cpuinfo_files_read_as_salt_read_them() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/cpuinfo");
    let want: Map<String, Value> = serde_json::from_str(
        &std::fs::read_to_string(dir.join("expected.json")).unwrap_or_default(),
    )
    .unwrap_or_default();
    assert_eq!(want.len(), 3);
    for (name, machine) in [
        ("x86_64-xeon", "x86_64"),
        ("aarch64-neoverse-n1", "aarch64"),
        ("armv7l-raspberrypi3", "armv7l"),
    ] {
        let text = std::fs::read_to_string(dir.join(name)).unwrap_or_default();
        assert_eq!(Value::Object(cpudata(Some(&text))), want[name], "{name}");
        assert_eq!(
            machine_from_cpuinfo(&text).as_deref(),
            Some(machine),
            "{name}"
        );
    }
}

#[test]
fn the_machine_shows_in_cpuinfo() {
    assert_eq!(machine_from_cpuinfo(X86_CPUINFO).as_deref(), Some("x86_64"));
    assert_eq!(
        machine_from_cpuinfo(ARM64_CPUINFO).as_deref(),
        Some("aarch64")
    );
    assert_eq!(machine_from_cpuinfo(RPI_CPUINFO).as_deref(), Some("armv7l"));
    assert_eq!(
        machine_from_cpuinfo("vendor_id : IBM/S390\n").as_deref(),
        Some("s390x")
    );
    assert_eq!(
        machine_from_cpuinfo("processor : 0\nhart : 0\nisa : rv64imafdch_zicsr\n").as_deref(),
        Some("riscv64")
    );
    assert_eq!(machine_from_cpuinfo("nothing : here\n"), None);
}

#[test]
fn meminfo_reads_in_mebibytes() {
    let g = memdata(Some(
        "MemTotal:       24683564 kB\nMemFree:        1 kB\nSwapTotal:       2097148 kB\n",
    ));
    assert_eq!(g["mem_total"], json!(24105));
    assert_eq!(g["swap_total"], json!(2047));
    let g = memdata(None);
    assert_eq!(
        (g["mem_total"].clone(), g["swap_total"].clone()),
        (json!(0), json!(0))
    );
}

#[test]
fn kernel_parameters_split_as_salt_splits_them() {
    let got =
        kernelparams("BOOT_IMAGE=/vmlinuz-6.1 root=UUID=abc ro quiet a=\"b c\" x=y=z -- --flag\n")
            .unwrap();
    assert_eq!(
        got,
        json!([
            ["BOOT_IMAGE", "/vmlinuz-6.1"],
            ["root", null],
            ["ro", null],
            ["quiet", null],
            ["a", "b c"],
            ["x", null],
            ["--", null],
            ["--flag", null]
        ])
    );
    assert_eq!(kernelparams("a=\"b\n"), None);
}

#[test]
fn lspci_displays_are_gpus() {
    let out = "Slot:\t00:01.0\nClass:\tVGA compatible controller\nVendor:\tNVIDIA Corporation\nDevice:\tGA102 [GeForce RTX 3080]\nSVendor:\tMicro-Star International Co., Ltd. [MSI]\n\nSlot:\t00:02.0\nClass:\tEthernet controller\nVendor:\tRed Hat, Inc.\nDevice:\tVirtio network device\n\nSlot:\t00:03.0\nClass:\tDisplay controller\nVendor:\tAdvanced Micro Devices, Inc. [AMD/ATI]\nDevice:\tRenoir\nSlot:\t00:04.0\nClass:\t3D controller\nVendor:\tAcme\nDevice:\tX1";
    assert_eq!(
        gpus(out),
        vec![
            json!({"vendor": "nvidia", "model": "GA102 [GeForce RTX 3080]"}),
            json!({"vendor": "unknown", "model": "X1"}),
        ]
    );
    assert!(gpus("").is_empty());
}

#[test]
fn init_programs_name_their_init_system() {
    assert_eq!(
        init_in_binary(b"\x7fELF...SysVinit version 3.06"),
        Some("sysvinit")
    );
    assert_eq!(init_in_binary(b"Upstart ... systemd"), Some("upstart"));
    let mut two = b"upstart".to_vec();
    two.resize(262_144, b'x');
    two.extend_from_slice(b"systemd");
    assert_eq!(init_in_binary(&two), Some("systemd"));
    assert_eq!(init_in_binary(b"nothing"), None);
    let mut big = vec![b'x'; 262_144 - 3];
    big.extend_from_slice(b"systemd");
    assert_eq!(init_in_binary(&big), Some("systemd"));
}

#[test]
fn virtualisation_programs_map_as_salt_maps_them() {
    assert_eq!(
        systemd_detect_virt("docker"),
        Some(("container", Some("Docker")))
    );
    assert_eq!(systemd_detect_virt("kvm"), Some(("kvm", None)));
    assert_eq!(systemd_detect_virt("none"), None);
    assert_eq!(virt_what("kvm\n"), Some(("kvm", None)));
    assert_eq!(virt_what("hyperv\nxen"), Some(("HyperV", None)));
    assert_eq!(virt_what(""), None);
    assert_eq!(
        dmidecode_virtual("Manufacturer: QEMU\nProduct Name: Standard PC"),
        (Some("kvm"), None)
    );
    assert_eq!(dmidecode_virtual("Manufacturer: Dell Inc."), (None, None));
    assert_eq!(
        last_after(
            "Product Name: a\nProduct Name: m5.large\n",
            "Product Name: "
        ),
        Some("m5.large")
    );
    assert!(amazon_version("\tVersion: 4.11.amazon\n"));
    assert!(!amazon_version("\tVersion: .amazon\n"));
}

#[test]
fn mdstat_names_the_arrays() {
    let text = "Personalities : [raid1]\nmd1 : active raid1 sdb1[1] sda1[0]\n      1 blocks\nmd0 : active raid1 sdb2[1] sda2[0]\nunused devices: <none>\n";
    assert_eq!(mdadm(text), ["md0", "md1"]);
}
