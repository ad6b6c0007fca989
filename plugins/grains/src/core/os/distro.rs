//! What the `distro` package tells Salt of the distribution.

use std::collections::BTreeMap;

use super::*;

/// The `distro` package's release files, read when `/etc` cannot be
/// listed (the package's own list, and the few others a modern
/// distribution ships), in the sorted order it tries them.
pub(super) const RELEASE_FILES: &[&str] = &[
    "SuSE-release",
    "almalinux-release",
    "alpine-release",
    "altlinux-release",
    "arch-release",
    "base-release",
    "centos-release",
    "cloudlinux-release",
    "fedora-release",
    "gentoo-release",
    "mageia-release",
    "mandrake-release",
    "mandriva-release",
    "mandrivalinux-release",
    "manjaro-release",
    "openEuler-release",
    "oracle-release",
    "photon-release",
    "redhat-release",
    "rocky-release",
    "sl-release",
    "slackware-version",
    "virtuozzo-release",
];

/// What the `distro` package knows of the distribution, as Salt's
/// `linux_distribution()` asks it: `name()`, `version(best=True)` and
/// `codename()`, read lazily where Salt's grains need them.
pub(crate) struct Distro<'a> {
    host: &'a dyn Host,
    os_release: Option<BTreeMap<String, String>>,
    lsb: Option<BTreeMap<String, String>>,
    release: Option<BTreeMap<&'static str, String>>,
}

impl<'a> Distro<'a> {
    /// Nothing read yet.
    pub(crate) fn new(host: &'a dyn Host) -> Self {
        Self {
            host,
            os_release: None,
            lsb: None,
            release: None,
        }
    }

    /// `distro`'s os-release data: `/etc/os-release`, else
    /// `/usr/lib/os-release`, split as a shell would, keys lowercased, and
    /// the codename it finds in `VERSION`, `VERSION_CODENAME` or
    /// `UBUNTU_CODENAME`.
    fn os_release(&mut self) -> &BTreeMap<String, String> {
        if self.os_release.is_none() {
            let text = self
                .host
                .read_text("/etc/os-release")
                .or_else(|| self.host.read_text("/usr/lib/os-release"));
            self.os_release = Some(text.map(|t| distro_os_release(&t)).unwrap_or_default());
        }
        self.os_release.get_or_insert_with(BTreeMap::new)
    }

    /// `distro`'s `lsb_release -a` data, when the program runs.
    fn lsb(&mut self) -> &BTreeMap<String, String> {
        if self.lsb.is_none() {
            let out = self
                .host
                .which("lsb_release")
                .and_then(|p| cmd_run_all(self.host, &[&p, "-a"]))
                .filter(|r| r.retcode == 0);
            self.lsb = Some(
                out.map(|r| parse_lsb_release_output(&r.stdout))
                    .unwrap_or_default(),
            );
        }
        self.lsb.get_or_insert_with(BTreeMap::new)
    }

    /// `distro`'s distribution release file data: the first of the
    /// release files that names a distribution.
    fn release(&mut self) -> &BTreeMap<&'static str, String> {
        if self.release.is_none() {
            let mut found = BTreeMap::new();
            for base in RELEASE_FILES {
                let Some(text) = self.host.read_text(&format!("/etc/{base}")) else {
                    continue;
                };
                let first = lines(&text).first().copied().unwrap_or("");
                let mut info = parse_release_line(first);
                if !info.contains_key("name") {
                    continue;
                }
                let id = base
                    .rsplit_once(['-', '_'])
                    .map(|(id, _)| id)
                    .unwrap_or(base);
                info.insert("id", id.to_string());
                if info
                    .get("name")
                    .is_some_and(|n| n.to_lowercase().contains("cloudlinux"))
                {
                    info.insert("id", "cloudlinux".to_string());
                }
                found = info;
                break;
            }
            self.release = Some(found);
        }
        self.release.get_or_insert_with(BTreeMap::new)
    }

    /// `distro.os_release_attr(key)`.
    fn os_attr(&mut self, key: &str) -> String {
        self.os_release().get(key).cloned().unwrap_or_default()
    }

    /// `distro.lsb_release_attr(key)`.
    fn lsb_attr(&mut self, key: &str) -> String {
        self.lsb().get(key).cloned().unwrap_or_default()
    }

    /// `distro.distro_release_attr(key)`.
    fn release_attr(&mut self, key: &str) -> String {
        self.release().get(key).cloned().unwrap_or_default()
    }

    /// `distro.id()`.
    fn id(&mut self) -> String {
        let normalize = |id: &str, table: &[(&str, &str)]| {
            let id = id.to_lowercase().replace(' ', "_");
            lookup(table, &id).map(str::to_string).unwrap_or(id)
        };
        let id = self.os_attr("id");
        if !id.is_empty() {
            return normalize(&id, &[("ol", "oracle"), ("opensuse-leap", "opensuse")]);
        }
        let id = self.lsb_attr("distributor_id");
        if !id.is_empty() {
            return normalize(
                &id,
                &[
                    ("enterpriseenterpriseas", "oracle"),
                    ("enterpriseenterpriseserver", "oracle"),
                    ("redhatenterpriseworkstation", "rhel"),
                    ("redhatenterpriseserver", "rhel"),
                    ("redhatenterprisecomputenode", "rhel"),
                ],
            );
        }
        let id = self.release_attr("id");
        if !id.is_empty() {
            return normalize(&id, &[("redhat", "rhel")]);
        }
        String::new()
    }

    /// `distro.name()`.
    pub(crate) fn name(&mut self) -> String {
        for v in [
            self.os_attr("name"),
            self.lsb_attr("distributor_id"),
            self.release_attr("name"),
        ] {
            if !v.is_empty() {
                return v;
            }
        }
        String::new()
    }

    /// `distro.version(best=True)`: of the versions its sources give, the
    /// first with the most dots.
    pub(crate) fn version(&mut self) -> String {
        let pretty = self.os_attr("pretty_name");
        let description = self.lsb_attr("description");
        let mut versions = vec![
            self.os_attr("version_id"),
            self.lsb_attr("release"),
            self.release_attr("version_id"),
            parse_release_line(&pretty)
                .get("version_id")
                .cloned()
                .unwrap_or_default(),
            parse_release_line(&description)
                .get("version_id")
                .cloned()
                .unwrap_or_default(),
        ];
        let like = self.os_attr("id_like");
        if self.id() == "debian" || like.split_whitespace().any(|l| l == "debian") {
            versions.push(
                self.host
                    .read_text("/etc/debian_version")
                    .map(|t| {
                        lines(&t)
                            .first()
                            .map(|l| l.trim_end().to_string())
                            .unwrap_or_default()
                    })
                    .unwrap_or_default(),
            );
        }
        let mut version = String::new();
        for v in versions {
            if v.matches('.').count() > version.matches('.').count() || version.is_empty() {
                version = v;
            }
        }
        version
    }

    /// `distro.codename()`.
    pub(crate) fn codename(&mut self) -> String {
        if let Some(c) = self.os_release().get("codename") {
            return c.clone();
        }
        for v in [self.lsb_attr("codename"), self.release_attr("codename")] {
            if !v.is_empty() {
                return v;
            }
        }
        String::new()
    }
}

/// The `distro` package's os-release parse: the text split as a POSIX
/// shell would, every `key=value` word kept with its key lowercased,
/// and `codename` taken from `VERSION` (`(codename)` or `, codename`),
/// then `VERSION_CODENAME`, then `UBUNTU_CODENAME`. Text that leaves a
/// quote open gives nothing.
pub(crate) fn distro_os_release(text: &str) -> BTreeMap<String, String> {
    let mut props = BTreeMap::new();
    let Ok(words) = shlex_split(text, true) else {
        return props;
    };
    for word in words {
        if let Some((k, v)) = word.split_once('=') {
            props.insert(k.to_lowercase(), v.to_string());
        }
    }
    if let Some(version) = props.get("version").cloned()
        && let Some(codename) = version_codename(&version)
    {
        props.insert("codename".into(), codename.clone());
        props.insert("release_codename".into(), codename);
    }
    if let Some(c) = props.get("version_codename").cloned() {
        props.insert("codename".into(), c);
    } else if let Some(c) = props.get("ubuntu_codename").cloned() {
        props.insert("codename".into(), c);
    }
    props
}

/// `distro`'s `\((\D+)\)|,\s*(\D+)` search in os-release's `VERSION`:
/// the first `(name)` of non-digits, or the non-digits after a comma.
pub(super) fn version_codename(version: &str) -> Option<String> {
    let chars: Vec<char> = version.chars().collect();
    for i in 0..chars.len() {
        if chars[i] == '(' {
            let mut j = i + 1;
            while j < chars.len() && !chars[j].is_ascii_digit() {
                j += 1;
            }
            // `\D+` is greedy and may give back to find the `)`.
            if let Some(close) = (i + 2..=j).rev().find(|&k| chars.get(k) == Some(&')')) {
                return Some(chars[i + 1..close].iter().collect());
            }
        }
        if chars[i] == ',' {
            let mut j = i + 1;
            while j < chars.len() && chars[j].is_whitespace() {
                j += 1;
            }
            let mut k = j;
            while k < chars.len() && !chars[k].is_ascii_digit() {
                k += 1;
            }
            if k > j {
                return Some(chars[j..k].iter().collect());
            }
            // `\s*` may give back a blank for `\D+`.
            if j > i + 1 {
                return Some(chars[j - 1..k].iter().collect());
            }
        }
    }
    None
}

/// `distro`'s parse of `lsb_release -a`: `Key: value` lines, keys
/// lowercased with `_` for blanks.
pub(super) fn parse_lsb_release_output(out: &str) -> BTreeMap<String, String> {
    let mut props = BTreeMap::new();
    for line in out.lines() {
        if let Some((k, v)) = line.split_once(':') {
            props.insert(k.replace(' ', "_").to_lowercase(), v.trim().to_string());
        }
    }
    props
}

/// Python's `str.strip('"').strip("'")`.
pub(super) fn unquote(s: &str) -> String {
    s.trim_matches('"').trim_matches('\'').to_string()
}
