//! Unit tests of the parent module.

use super::*;

#[test]
fn os_release_lines_parse_as_python_platform_does() {
    let osr = parse_os_release(
        "NAME=\"Debian GNU/Linux\"\n# c\nID=debian\nX='a\\\"b'\nY=\"open\nZ=\"\nBAD KEY=1\n",
    );
    assert_eq!(osr["NAME"], "Debian GNU/Linux");
    assert_eq!(osr["ID"], "debian");
    assert_eq!(osr["PRETTY_NAME"], "Linux");
    assert_eq!(osr["X"], "a\"b");
    assert_eq!(osr["Y"], "\"open");
    assert_eq!(osr["Z"], "\"");
    assert!(!osr.contains_key("BAD KEY"));
}

#[test]
fn lsb_release_values_stop_where_salts_pattern_stops() {
    let got = parse_lsb_release(
        "DISTRIB_ID=Ubuntu\nDISTRIB_RELEASE=22.04\nDISTRIB_CODENAME=jammy\n\
         DISTRIB_DESCRIPTION=\"Debian GNU/Linux 12 (bookworm)\"\nDISTRIB_IDX=1\nDISTRIB_ID=\"\"\n",
    );
    assert_eq!(
        got,
        [
            ("lsb_distrib_id".to_string(), "Ubuntu".to_string()),
            ("lsb_distrib_release".to_string(), "22.04".to_string()),
            ("lsb_distrib_codename".to_string(), "jammy".to_string()),
            (
                "lsb_distrib_description".to_string(),
                "Debian GNU".to_string()
            ),
        ]
    );
}

#[test]
fn os_names_derive_as_salt_derives_them() {
    assert_eq!(derive_os("Debian GNU/Linux", Some("debian")), "Debian");
    assert_eq!(derive_os("Rocky Linux", Some("rocky")), "Rocky");
    assert_eq!(derive_os("AlmaLinux", Some("almalinux")), "AlmaLinux");
    assert_eq!(derive_os("Red Hat Enterprise Linux", None), "RedHat");
    assert_eq!(derive_os("Alpine Linux", None), "Alpine");
    assert_eq!(derive_os("Pop!_OS", Some("pop")), "Pop");
    assert_eq!(derive_os("Linux Mint", None), "Mint");
    assert_eq!(
        derive_os("openSUSE Tumbleweed", None),
        "openSUSE Tumbleweed"
    );
    assert_eq!(os_family("Rocky"), "RedHat");
    assert_eq!(os_family("Alpine"), "Alpine");
}

#[test]
fn release_lines_parse_as_the_distro_package_does() {
    let p = parse_release_line("Rocky Linux release 9.3 (Blue Onyx)");
    assert_eq!(p["name"], "Rocky Linux");
    assert_eq!(p["version_id"], "9.3");
    assert_eq!(p["codename"], "Blue Onyx");
    let p = parse_release_line("Gentoo Base System release 2.2");
    assert_eq!(
        (p["name"].as_str(), p["version_id"].as_str()),
        ("Gentoo Base System", "2.2")
    );
    let p = parse_release_line("Ubuntu 14.04.3 LTS");
    assert_eq!(
        (p["name"].as_str(), p["version_id"].as_str()),
        ("Ubuntu", "14.04.3")
    );
    let p = parse_release_line("3.19.0");
    assert_eq!(
        (p["name"].as_str(), p["version_id"].as_str()),
        ("3.", "19.0")
    );
    let p = parse_release_line("Arch Linux");
    assert_eq!(p.get("version_id"), None);
    assert_eq!(p["name"], "Arch Linux");
    assert!(parse_release_line("").is_empty());
    let p = parse_release_line("CentOS Stream release 9");
    assert_eq!(
        (p["name"].as_str(), p["version_id"].as_str()),
        ("CentOS Stream", "9")
    );
}

#[test]
fn distro_reads_codenames_from_version() {
    assert_eq!(
        version_codename("9.3 (Blue Onyx)").as_deref(),
        Some("Blue Onyx")
    );
    assert_eq!(
        version_codename("14.04.3 LTS, Trusty Tahr").as_deref(),
        Some("Trusty Tahr")
    );
    assert_eq!(
        version_codename("12 (bookworm)").as_deref(),
        Some("bookworm")
    );
    assert_eq!(version_codename("15.2"), None);
    let p = distro_os_release("VERSION=\"42 (Forty Two)\"\nVERSION_CODENAME=\"\"\n");
    assert_eq!(p["codename"], "");
    assert_eq!(p["release_codename"], "Forty Two");
}

#[test]
fn cpe_names_parse_as_salt_parses_them() {
    let c = parse_cpe("cpe:/o:opensuse:leap:15.2");
    assert_eq!(c["vendor"].as_deref(), Some("opensuse"));
    assert_eq!(c["version"].as_deref(), Some("15.2"));
    let c = parse_cpe("cpe:2.3:o:opensuse:tumbleweed:20241024:*:*:*:*:*:*:*");
    assert_eq!(c["version"].as_deref(), Some("20241024"));
    assert_eq!(c["phase"], None);
    assert!(parse_cpe("cpe:broken").is_empty());
}

#[test]
fn osrelease_data_derives_as_salt_does() {
    let d = osrelease_data("Ubuntu", "Ubuntu", "22.04");
    assert_eq!(d["osrelease_info"], json!([22, 4]));
    assert_eq!(d["osmajorrelease"], json!(22));
    assert_eq!(d["osfinger"], json!("Ubuntu-22.04"));
    let d = osrelease_data("Debian", "Debian GNU/Linux", "bookworm/sid");
    assert_eq!(d["osrelease_info"], json!(["bookworm/sid"]));
    assert!(!d.contains_key("osmajorrelease"));
    assert_eq!(d["osfinger"], json!("Debian-bookworm/sid"));
    let d = osrelease_data("Rocky", "Rocky Linux", "9.3");
    assert_eq!(d["osfinger"], json!("Rocky Linux-9"));
}

#[test]
fn opkg_architectures_sort_by_priority() {
    let out = "arch all 1\narch any 6\narch noarch 11\narch x86_64 16\n";
    assert_eq!(opkg_arches(out), ["x86_64", "noarch", "any", "all"]);
}
