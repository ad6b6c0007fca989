//! The distribution grains of Salt 3008.4 on Linux (`os`, `os_family`,
//! `osfullname`, `osrelease`, `oscodename`, `lsb_distrib_*`, and what
//! `_osrelease_data` derives from them): `_linux_distribution_data` as it
//! runs where Python's `lsb_release` module cannot be imported (Salt's
//! own packages), which sends every distribution through
//! `_legacy_linux_distribution_data`, with the `distro` package's
//! answers where that falls back on them.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::text::{is_digits, lines, py_int, shlex_split};
use super::{Host, cmd_run_all};

mod distro;

use distro::*;

/// A grain set in insertion order (Salt's dict).
type Grains = Vec<(String, Value)>;

/// `(os_id, NAME)` pairs whose `os` grain Salt keeps by hand
/// (`_ID_AND_NAME_TO_OS_NAME_MAP`).
const ID_AND_NAME_TO_OS: &[(&str, &str, &str)] = &[
    ("astra", "Astra Linux (Orel)", "AstraLinuxCE"),
    ("astra", "Astra Linux (Smolensk)", "AstraLinuxSE"),
    ("pop", "Pop!_OS", "Pop"),
];

/// Salt's `_OS_NAME_MAP`: the first ten letters of a name, lowercased
/// without blanks, to the `os` grain.
const OS_NAME_MAP: &[(&str, &str)] = &[
    ("redhatente", "RedHat"),
    ("gentoobase", "Gentoo"),
    ("archarm", "Arch ARM"),
    ("arch", "Arch"),
    ("debian", "Debian"),
    ("Junos", "Junos"),
    ("raspbian", "Raspbian"),
    ("fedoraremi", "Fedora"),
    ("chapeau", "Chapeau"),
    ("korora", "Korora"),
    ("amazonami", "Amazon"),
    ("alt", "ALT"),
    ("enterprise", "OEL"),
    ("oracleserv", "OEL"),
    ("cloudserve", "CloudLinux"),
    ("cloudlinux", "CloudLinux"),
    ("virtuozzo", "Virtuozzo"),
    ("almalinux", "AlmaLinux"),
    ("almalinuxk", "AlmaLinux"),
    ("pidora", "Fedora"),
    ("scientific", "ScientificLinux"),
    ("synology", "Synology"),
    ("nilrt", "NILinuxRT"),
    ("poky", "Poky"),
    ("manjaro", "Manjaro"),
    ("manjarolin", "Manjaro"),
    ("univention", "Univention"),
    ("antergos", "Antergos"),
    ("sles", "SUSE"),
    ("void", "Void"),
    ("slesexpand", "RES"),
    ("linuxmint", "Mint"),
    ("neon", "KDE neon"),
    ("pop", "Pop"),
    ("rocky", "Rocky"),
    ("alibabaclo", "Alinux"),
    ("mendel", "Mendel"),
    ("photon", "VMware Photon OS"),
];

/// Salt's `_OS_FAMILY_MAP`: the `os` grain to `os_family` (an `os` not
/// listed is its own family).
const OS_FAMILY_MAP: &[(&str, &str)] = &[
    ("Ubuntu", "Debian"),
    ("Fedora", "RedHat"),
    ("Chapeau", "RedHat"),
    ("Korora", "RedHat"),
    ("FedBerry", "RedHat"),
    ("CentOS", "RedHat"),
    ("CentOS Stream", "RedHat"),
    ("GoOSe", "RedHat"),
    ("Scientific", "RedHat"),
    ("Amazon", "RedHat"),
    ("CloudLinux", "RedHat"),
    ("Virtuozzo", "RedHat"),
    ("AlmaLinux", "RedHat"),
    ("AlmaLinux Kitten", "RedHat"),
    ("OVS", "RedHat"),
    ("OEL", "RedHat"),
    ("XCP", "RedHat"),
    ("XCP-ng", "RedHat"),
    ("XenServer", "RedHat"),
    ("RES", "RedHat"),
    ("Sangoma", "RedHat"),
    ("VMware Photon OS", "RedHat"),
    ("Mandrake", "Mandriva"),
    ("Mint", "Debian"),
    ("VMwareESX", "VMware"),
    ("Bluewhite64", "Bluewhite"),
    ("Slamd64", "Slackware"),
    ("SLES", "Suse"),
    ("SUSE Enterprise Server", "Suse"),
    ("SUSE  Enterprise Server", "Suse"),
    ("SLED", "Suse"),
    ("openSUSE", "Suse"),
    ("SUSE", "Suse"),
    ("openSUSE Leap", "Suse"),
    ("openSUSE Tumbleweed", "Suse"),
    ("SLES_SAP", "Suse"),
    ("alfaLinux", "Suse"),
    ("alfaLinux Rise", "Suse"),
    ("AlterOS", "RedHat"),
    ("RED OS", "RedHat"),
    ("Arch ARM", "Arch"),
    ("Manjaro", "Arch"),
    ("Manjaro ARM", "Arch"),
    ("Antergos", "Arch"),
    ("EndeavourOS", "Arch"),
    ("ALT", "RedHat"),
    ("Trisquel", "Debian"),
    ("GCEL", "Debian"),
    ("Linaro", "Debian"),
    ("elementary OS", "Debian"),
    ("elementary", "Debian"),
    ("Univention", "Debian"),
    ("ScientificLinux", "RedHat"),
    ("Raspbian", "Debian"),
    ("Devuan", "Debian"),
    ("antiX", "Debian"),
    ("Kali", "Debian"),
    ("Parrot OS", "Debian"),
    ("neon", "Debian"),
    ("Cumulus", "Debian"),
    ("Deepin", "Debian"),
    ("NILinuxRT", "NILinuxRT"),
    ("KDE neon", "Debian"),
    ("Void", "Void"),
    ("IDMS", "Debian"),
    ("Funtoo", "Gentoo"),
    ("TurnKey", "Debian"),
    ("Pop", "Debian"),
    ("Rocky", "RedHat"),
    ("AstraLinuxCE", "Debian"),
    ("AstraLinuxSE", "Debian"),
    ("Alinux", "RedHat"),
    ("Mendel", "Debian"),
    ("OSMC", "Debian"),
    ("openEuler", "RedHat"),
];

/// The value of `key` in one of Salt's maps.
fn lookup<'a>(table: &'a [(&str, &str)], key: &str) -> Option<&'a str> {
    table.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
}

/// Python's `\w` for one character.
fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Salt's `_REPLACE_LINUX_RE.sub("", name)`: every ` Linux`, `/Linux`,
/// ` GNU/Linux` (a non-word character, then `linux` or `gnu/linux` in any
/// case) taken out.
fn strip_linux(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let starts = |at: usize, word: &str| {
        let w: Vec<char> = word.chars().collect();
        chars.len() >= at + w.len()
            && chars[at..at + w.len()]
                .iter()
                .zip(&w)
                .all(|(a, b)| a.to_ascii_lowercase() == *b)
    };
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        if !is_word(chars[i]) {
            if starts(i + 1, "gnu/linux") {
                i += 10;
                continue;
            }
            if starts(i + 1, "linux") {
                i += 6;
                continue;
            }
        }
        out.push(chars[i]);
        i += 1;
    }
    out
}

/// Salt's `_derive_os_grain`: the short `os` name of a distribution's
/// full name (and os-release `ID`).
pub(crate) fn derive_os(fullname: &str, os_id: Option<&str>) -> String {
    if let Some(id) = os_id
        && let Some((_, _, os)) = ID_AND_NAME_TO_OS
            .iter()
            .find(|(i, n, _)| *i == id && *n == fullname)
    {
        return (*os).to_string();
    }
    let distroname = strip_linux(fullname).trim().to_string();
    let short: String = distroname
        .replace(' ', "")
        .to_lowercase()
        .chars()
        .take(10)
        .collect();
    lookup(OS_NAME_MAP, &short)
        .map(str::to_string)
        .unwrap_or(distroname)
}

/// Salt's `_OS_FAMILY_MAP.get(os, os)`.
pub(crate) fn os_family(os: &str) -> String {
    lookup(OS_FAMILY_MAP, os).unwrap_or(os).to_string()
}

/// Python's `platform.freedesktop_os_release` parse of an os-release
/// text: `KEY=value` lines, one pair of matching quotes taken off, the
/// five shell escapes undone, and `NAME`, `ID`, `PRETTY_NAME` defaulted.
pub(crate) fn parse_os_release(text: &str) -> BTreeMap<String, String> {
    let mut info = BTreeMap::new();
    info.insert("NAME".to_string(), "Linux".to_string());
    info.insert("ID".to_string(), "linux".to_string());
    info.insert("PRETTY_NAME".to_string(), "Linux".to_string());
    for line in lines(text) {
        let Some((name, value)) = line.split_once('=') else {
            continue;
        };
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            continue;
        }
        let value = match value.chars().next() {
            Some(q @ ('"' | '\'')) if value.len() >= 2 && value.ends_with(q) => {
                &value[1..value.len() - 1]
            }
            _ => value,
        };
        let mut unescaped = String::new();
        let mut chars = value.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '\\'
                && let Some(&n) = chars.peek()
                && matches!(n, '\\' | '$' | '"' | '\'' | '`')
            {
                unescaped.push(n);
                chars.next();
                continue;
            }
            unescaped.push(c);
        }
        info.insert(name.to_string(), unescaped);
    }
    info
}

/// Salt's `_parse_lsb_release`: the `DISTRIB_*` lines of
/// `/etc/lsb-release` as `lsb_distrib_*` grains, in file order (a value
/// ends at the first character that is not a word character, blank, `.`
/// or `-`).
pub(crate) fn parse_lsb_release(text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in lines(text) {
        let Some((key, rest)) = line.split_once('=') else {
            continue;
        };
        if !matches!(
            key,
            "DISTRIB_ID" | "DISTRIB_RELEASE" | "DISTRIB_CODENAME" | "DISTRIB_DESCRIPTION"
        ) {
            continue;
        }
        let rest = rest
            .strip_prefix('\'')
            .or_else(|| rest.strip_prefix('"'))
            .unwrap_or(rest);
        let value: String = rest
            .chars()
            .take_while(|&c| is_word(c) || c.is_whitespace() || c == '.' || c == '-')
            .collect();
        if value.is_empty() {
            continue;
        }
        let grain = format!("lsb_{}", key.to_lowercase());
        let value = value.trim_end().to_string();
        match out.iter_mut().find(|(k, _)| *k == grain) {
            Some(slot) => slot.1 = value,
            None => out.push((grain, value)),
        }
    }
    out
}

/// Salt's `_parse_cpe_name`: vendor, version, ... of os-release's
/// `CPE_NAME` (empty when it is not a CPE Salt understands).
fn parse_cpe(cpe: &str) -> BTreeMap<&'static str, Option<String>> {
    let mut ret = BTreeMap::new();
    let parts: Vec<&str> = cpe.split(':').collect();
    let part = |p: &str| match p {
        "o" => Some("operating system".to_string()),
        "h" => Some("hardware".to_string()),
        "a" => Some("application".to_string()),
        _ => None,
    };
    let star = |s: &str| (s != "*").then(|| s.to_string());
    if parts.len() > 4 && parts[0] == "cpe" {
        if let Some(p) = parts[1].strip_prefix('/') {
            ret.insert("vendor", Some(parts[2].to_string()));
            ret.insert("product", Some(parts[3].to_string()));
            ret.insert("version", Some(parts[4].to_string()));
            ret.insert("phase", parts.get(5).map(|s| s.to_string()));
            ret.insert("part", part(p));
        } else if parts.len() == 6 && parts[1] == "2.3" {
            ret.insert("vendor", star(parts[3]));
            ret.insert("product", star(parts[4]));
            ret.insert("version", star(parts[5]));
            ret.insert("phase", None);
            ret.insert("part", part(parts[2]));
        } else if parts.len() > 7 && parts.len() <= 13 && parts[1] == "2.3" {
            ret.insert("vendor", star(parts[3]));
            ret.insert("product", star(parts[4]));
            ret.insert("version", star(parts[5]));
            ret.insert("phase", star(parts[6]));
            ret.insert("part", part(parts[2]));
        }
    }
    ret
}

/// The `distro` package's parse of one line of a distribution's release
/// file (`Rocky Linux release 9.3 (Blue Onyx)`): its name, version and
/// codename, by the package's pattern read from the end of the line.
pub(crate) fn parse_release_line(line: &str) -> BTreeMap<&'static str, String> {
    let mut info = BTreeMap::new();
    let r: Vec<char> = line.trim().chars().rev().collect();
    // Where the optional `(codename)` part leaves off, most greedy first:
    // the text up to the first `)` (of the reversed line), then the
    // codename up to a `(`, the farthest first.
    let mut starts: Vec<(usize, Option<(usize, usize)>)> = Vec::new();
    if let Some(p) = r.iter().position(|&c| c == ')') {
        for q in (p + 1..r.len()).rev() {
            if r[q] == '(' {
                starts.push((q + 1, Some((p + 1, q))));
            }
        }
    }
    starts.push((0, None));
    let text = |a: usize, b: usize| -> String { r[a..b].iter().rev().collect() };
    for (start, codename) in starts {
        let mut i = start;
        while r.get(i) == Some(&' ') {
            i += 1;
        }
        if r[i..].starts_with(&['S', 'T', 'L', ' ']) {
            i += 4;
        }
        // The version: version characters, ending on a digit, the longest first.
        let mut run = i;
        while r.get(run).is_some_and(|&c| {
            c.is_ascii_digit() || matches!(c, '.' | '+' | '-') || c.is_ascii_lowercase()
        }) {
            run += 1;
        }
        for end in (i + 1..=run).rev() {
            if !r[end - 1].is_ascii_digit() {
                continue;
            }
            // Then blanks, an optional `release ` (reversed), and a name of
            // at least one character, trying the greediest first.
            let mut spaces = end;
            while r.get(spaces) == Some(&' ') {
                spaces += 1;
            }
            for blank in (end..=spaces).rev() {
                let mut tails = Vec::new();
                let word: Vec<char> = "esaeler".chars().collect();
                if r[blank..].starts_with(&word) {
                    let mut k = blank + word.len();
                    while r.get(k) == Some(&' ') {
                        k += 1;
                    }
                    for t in (blank + word.len()..=k).rev() {
                        tails.push(t);
                    }
                }
                tails.push(blank);
                if let Some(&name_at) = tails.iter().find(|&&t| t < r.len()) {
                    info.insert("name", text(name_at, r.len()));
                    info.insert("version_id", text(i, end));
                    if let Some((a, b)) = codename {
                        info.insert("codename", text(a, b));
                    }
                    return info;
                }
            }
        }
    }
    if !line.is_empty() {
        info.insert("name", line.trim().to_string());
    }
    info
}

/// `grains.get(key)`.
fn get<'g>(g: &'g Grains, key: &str) -> Option<&'g Value> {
    g.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

/// `grains.get(key)` when it is a string.
fn get_str(g: &Grains, key: &str) -> Option<String> {
    get(g, key).and_then(Value::as_str).map(str::to_string)
}

/// `grains[key] = value`, keeping the key's place.
fn set(g: &mut Grains, key: &str, value: Value) {
    match g.iter_mut().find(|(k, _)| k == key) {
        Some(slot) => slot.1 = value,
        None => g.push((key.to_string(), value)),
    }
}

/// `grains.pop(key)`.
fn remove(g: &mut Grains, key: &str) {
    g.retain(|(k, _)| k != key);
}

/// Salt's `_linux_distribution_data` where the `lsb_release` module is
/// missing: `/etc/lsb-release`, then os-release's `NAME` for `os` and
/// `osfullname`, then the legacy heuristics and `distro`'s answers for
/// the rest. Returns the grains in Salt's order.
pub(crate) fn distribution(host: &dyn Host) -> Map<String, Value> {
    let mut g: Grains = host
        .read_text("/etc/lsb-release")
        .map(|t| parse_lsb_release(&t))
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, json!(v)))
        .collect();
    let os_release = host
        .read_text("/etc/os-release")
        .or_else(|| host.read_text("/usr/lib/os-release"))
        .map(|t| parse_os_release(&t));
    if let Some(osr) = &os_release {
        let name = osr.get("NAME").map(String::as_str).unwrap_or("");
        let id = osr.get("ID").map(String::as_str);
        set(&mut g, "os", json!(derive_os(name, id)));
        set(&mut g, "osfullname", json!(name.trim()));
    }
    legacy(host, &mut g, os_release.as_ref());
    g.into_iter().collect()
}

/// The start of `_legacy_linux_distribution_data`: without
/// `lsb_distrib_id`, what os-release or a distribution's own release file
/// says.
fn release_files(host: &dyn Host, g: &mut Grains, os_release: Option<&BTreeMap<String, String>>) {
    let description = get_str(g, "lsb_distrib_description").unwrap_or_default();
    if description.to_lowercase().starts_with("antergos") {
        set(g, "osfullname", json!("Antergos Linux"));
    } else if get(g, "lsb_distrib_id").is_none() {
        if let Some(osr) = os_release {
            from_os_release(g, osr);
        } else if let Some(text) = host.read_text("/etc/SuSE-release") {
            from_suse_release(g, &text);
        } else if let Some(text) = host.read_text("/etc/altlinux-release") {
            set(g, "lsb_distrib_id", json!("altlinux"));
            for line in lines(&text) {
                let comps: Vec<&str> = line.split_whitespace().collect();
                if comps.first() == Some(&"ALT") && comps.len() >= 4 {
                    set(g, "lsb_distrib_release", json!(comps[2]));
                    set(
                        g,
                        "lsb_distrib_codename",
                        json!(comps[3].replace(['(', ')'], "")),
                    );
                }
            }
        } else if let Some(text) = host.read_text("/etc/centos-release") {
            set(g, "lsb_distrib_id", json!("CentOS"));
            for line in lines(&text) {
                if let Some(release) = first_decimal(line) {
                    set(g, "lsb_distrib_release", json!(release));
                }
                if let Some(open) = line.find('(')
                    && let Some(len) = line[open + 1..].find(')')
                {
                    set(
                        g,
                        "lsb_distrib_codename",
                        json!(&line[open + 1..open + 1 + len]),
                    );
                }
            }
        } else if host.exists("/etc.defaults/synoinfo.conf")
            && let Some(text) = host.read_text("/etc.defaults/VERSION")
        {
            set(g, "osfullname", json!("Synology"));
            let mut info = BTreeMap::new();
            for line in lines(&text) {
                let parts: Vec<&str> = line.split('=').collect();
                if let [key, val] = parts[..]
                    && matches!(key, "majorversion" | "minorversion" | "buildnumber")
                {
                    info.insert(key, val.trim_matches('"'));
                }
            }
            if let (Some(a), Some(b), Some(c)) = (
                info.get("majorversion"),
                info.get("minorversion"),
                info.get("buildnumber"),
            ) {
                set(g, "osrelease", json!(format!("{a}.{b}-{c}")));
            }
        }
    }
}

/// Salt's `_legacy_linux_distribution_data` (with `lsb_has_error`).
fn legacy(host: &dyn Host, g: &mut Grains, os_release: Option<&BTreeMap<String, String>>) {
    release_files(host, g, os_release);

    let mut distro = Distro::new(host);
    if get(g, "osfullname").is_none() {
        let lsb_id = get_str(g, "lsb_distrib_id");
        let fullname = match lsb_id {
            Some(id) if id.to_lowercase().starts_with("nilrt") => "nilrt".to_string(),
            Some(id) => id.trim().to_string(),
            None => unquote(&distro.name()).trim().to_string(),
        };
        set(g, "osfullname", json!(fullname));
    }
    if get(g, "osrelease").is_none() {
        let codename = get_str(g, "lsb_distrib_codename").unwrap_or_default();
        if ["CentOS Linux 7", "CentOS Linux 8"]
            .iter()
            .any(|c| codename.contains(c))
        {
            remove(g, "lsb_distrib_release");
        }
        let release = match get_str(g, "lsb_distrib_release") {
            Some(r) => r,
            None => unquote(&distro.version()),
        };
        set(g, "osrelease", json!(release.trim()));
    }
    let os = get_str(g, "os").unwrap_or_default();
    if let Some(codename) = get_str(g, "lsb_distrib_codename").filter(|c| !c.is_empty())
        && ["Rocky", "AlmaLinux", "AstraLinuxSE"]
            .iter()
            .any(|o| os.contains(o))
        && let Some((_, after)) = codename.split_once('(')
    {
        let inner = after.split_once(')').map(|(a, _)| a).unwrap_or(after);
        let inner = if os == "AstraLinuxSE" {
            inner.split_whitespace().next().unwrap_or("").to_lowercase()
        } else {
            inner.to_string()
        };
        set(g, "lsb_distrib_codename", json!(inner));
    }
    let lsb_codename = get_str(g, "lsb_distrib_codename").unwrap_or_default();
    let mut oscodename = lsb_codename.trim().to_string();
    if oscodename.is_empty() || oscodename.contains("Red Hat") {
        oscodename = unquote(&distro.codename());
    }
    set(g, "oscodename", json!(oscodename));
    if get(g, "os").is_none() {
        let fullname = get_str(g, "osfullname").unwrap_or_default();
        set(g, "os", json!(derive_os(&fullname, None)));
    }
    if let Some(osr) = os_release
        && let Some(product) = osr.get("SUSE_SUPPORT_PRODUCT")
        && let Some(version) = osr.get("SUSE_SUPPORT_PRODUCT_VERSION")
    {
        let pretty = osr
            .get("SUSE_PRETTY_NAME")
            .cloned()
            .unwrap_or_else(|| format!("{product} {version}"));
        set(g, "oscodename", json!(pretty));
        set(g, "osrelease", json!(version));
        if product == "SUSE Linux Micro" {
            set(g, "osfullname", json!("SL-Micro"));
        }
    }
    let os = get_str(g, "os").unwrap_or_default();
    set(g, "os_family", json!(os_family(&os)));
}

/// The legacy `lsb_distrib_*` grains from os-release data, with Salt's
/// openSUSE and Mendel corrections.
fn from_os_release(g: &mut Grains, osr: &BTreeMap<String, String>) {
    if let Some(name) = osr.get("NAME") {
        set(g, "lsb_distrib_id", json!(name.trim()));
    }
    if let Some(v) = osr.get("VERSION_ID") {
        set(g, "lsb_distrib_release", json!(v));
    }
    if let Some(c) = osr.get("VERSION_CODENAME") {
        set(g, "lsb_distrib_codename", json!(c));
    } else if let Some(p) = osr.get("PRETTY_NAME") {
        set(g, "lsb_distrib_codename", json!(p));
    }
    if let Some(cpe_name) = osr.get("CPE_NAME") {
        let cpe = parse_cpe(cpe_name);
        let vendor = cpe.get("vendor").cloned().flatten().unwrap_or_default();
        if ["suse", "opensuse"].contains(&vendor.to_lowercase().as_str()) {
            set(g, "os", json!("SUSE"));
            if osr.get("NAME").map(String::as_str) == Some("openSUSE Leap") {
                set(g, "osfullname", json!("Leap"));
            } else if osr.get("VERSION").map(String::as_str) == Some("Tumbleweed") {
                set(g, "osfullname", json!("Tumbleweed"));
            }
            if let Some(Some(version)) = cpe.get("version")
                && !version.is_empty()
                && vendor == "opensuse"
            {
                set(g, "lsb_distrib_release", json!(version));
            }
        }
    }
    if osr.get("ID").map(|i| i.trim()) == Some("mendel") {
        let pretty = osr.get("PRETTY_NAME").cloned().unwrap_or_default();
        let words: Vec<&str> = pretty.split_whitespace().collect();
        if words.len() >= 3 {
            set(g, "lsb_distrib_release", json!(words[2]));
        }
    }
}

/// The legacy grains from `/etc/SuSE-release`.
fn from_suse_release(g: &mut Grains, text: &str) {
    set(g, "lsb_distrib_id", json!("SUSE"));
    let (mut version, mut patch) = (String::new(), String::new());
    let digits = |l: &str| l.chars().filter(char::is_ascii_digit).collect::<String>();
    for line in lines(text) {
        let lower = line.to_lowercase();
        if lower.contains("enterprise") {
            set(g, "lsb_distrib_id", json!("SLES"));
            // `re.sub(r"\(.+\)", "", line)`: from the first `(` to the last `)`.
            let cleaned = match (line.find('('), line.rfind(')')) {
                (Some(a), Some(b)) if b > a + 1 => format!("{}{}", &line[..a], &line[b + 1..]),
                _ => line.to_string(),
            };
            set(g, "lsb_distrib_codename", json!(cleaned.trim()));
        } else if lower.contains("version") {
            version = digits(line);
        } else if lower.contains("patchlevel") {
            patch = digits(line);
        }
    }
    let mut release = version;
    if !patch.is_empty() {
        release = format!("{release}.{patch}");
        let sp = format!("SP{patch}");
        if let Some(codename) = get_str(g, "lsb_distrib_codename")
            && !codename.is_empty()
            && !codename.contains(&sp)
        {
            set(g, "lsb_distrib_codename", json!(format!("{codename} {sp}")));
        }
    }
    set(g, "lsb_distrib_release", json!(release));
    if get_str(g, "lsb_distrib_codename").is_none_or(|c| c.is_empty()) {
        set(g, "lsb_distrib_codename", json!("n.a"));
    }
}

/// The first `\d+\.\d+` of a line.
fn first_decimal(line: &str) -> Option<&str> {
    let b = line.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit() {
            let start = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            if i + 1 < b.len() && b[i] == b'.' && b[i + 1].is_ascii_digit() {
                let mut j = i + 1;
                while j < b.len() && b[j].is_ascii_digit() {
                    j += 1;
                }
                return Some(&line[start..j]);
            }
        } else {
            i += 1;
        }
    }
    None
}

/// Salt's `_osrelease_data`: `osrelease_info`, `osmajorrelease` and
/// `osfinger` of a non-empty `osrelease`.
pub(crate) fn osrelease_data(os: &str, osfullname: &str, osrelease: &str) -> Map<String, Value> {
    let mut g = Map::new();
    let info: Vec<Value> = osrelease
        .split('.')
        .map(|part| match part.parse::<u64>() {
            Ok(n) if is_digits(part) => json!(n),
            _ => json!(part),
        })
        .collect();
    let major = match &info[0] {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => py_int(s),
        _ => None,
    };
    if let Some(m) = major {
        g.insert("osmajorrelease".into(), json!(m));
    }
    let name = if [
        "Debian",
        "FreeBSD",
        "OpenBSD",
        "NetBSD",
        "Mac",
        "Raspbian",
        "AlmaLinux",
    ]
    .contains(&os)
    {
        os
    } else {
        osfullname
    };
    let version = if ["Ubuntu", "Pop", "NixOS"].contains(&os) {
        osrelease.to_string()
    } else {
        match &info[0] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }
    };
    g.insert("osfinger".into(), json!(format!("{name}-{version}")));
    g.insert("osrelease_info".into(), Value::Array(info));
    g
}

/// Salt's `_osarch`: `dpkg --print-architecture` on the Debian family,
/// `rpm --eval %{_host_cpu}` on RedHat and Suse, `opkg`'s architectures
/// on NI Linux RT and Poky, else the CPU architecture. Where the program
/// cannot run, the architecture its packages would name for `cpuarch`.
pub(crate) fn osarch(host: &dyn Host, os_family: &str, cpuarch: &str) -> Value {
    match os_family {
        "Debian" => {
            let out = host
                .which("dpkg")
                .and_then(|p| super::cmd_run(host, &[&p, "--print-architecture"]));
            match out {
                Some(o) => json!(o.trim()),
                None => {
                    host.log("dpkg --print-architecture did not run: osarch from cpuarch");
                    json!(debian_arch(cpuarch))
                }
            }
        }
        "RedHat" | "Suse" => {
            let out = host
                .which("rpm")
                .and_then(|p| super::cmd_run_all(host, &[&p, "--eval", "%{_host_cpu}"]))
                .map(|r| r.stdout.trim().to_string());
            let arch = out.unwrap_or_else(|| cpuarch.to_string());
            json!(if arch.is_empty() { "unknown" } else { &arch })
        }
        "NILinuxRT" | "Poky" => {
            let out = host
                .which("opkg")
                .and_then(|p| super::cmd_run(host, &[&p, "print-architecture"]))
                .unwrap_or_default();
            json!(opkg_arches(&out))
        }
        _ => json!(cpuarch),
    }
}

/// `opkg print-architecture`'s architectures, highest priority first.
fn opkg_arches(out: &str) -> Vec<String> {
    let mut arches: Vec<(String, i64)> = Vec::new();
    for line in out.lines().filter(|l| l.starts_with("arch")) {
        let parts: Vec<&str> = line.split_whitespace().collect();
        if let [_, arch, prio] = parts[..]
            && let Some(p) = py_int(prio)
        {
            match arches.iter_mut().find(|(a, _)| a == arch.trim()) {
                Some(slot) => slot.1 = p,
                None => arches.push((arch.trim().to_string(), p)),
            }
        }
    }
    arches.sort_by_key(|a| std::cmp::Reverse(a.1));
    arches.into_iter().map(|(a, _)| a).collect()
}

/// Debian's name for the architecture of a kernel's `uname -m`.
pub(crate) fn debian_arch(machine: &str) -> String {
    match machine {
        "x86_64" => "amd64",
        "i386" | "i486" | "i586" | "i686" => "i386",
        "aarch64" | "arm64" => "arm64",
        "armv7l" | "armv8l" | "armv6l" => "armhf",
        "ppc64le" => "ppc64el",
        "mips64" => "mips64el",
        "loongarch64" => "loong64",
        other => other,
    }
    .to_string()
}

#[cfg(test)]
mod tests;
