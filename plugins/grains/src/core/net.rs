//! Salt 3008.4's network grains on Linux: the interfaces' addresses
//! (`ip*_interfaces`, `hwaddr_interfaces`, `ipv4`, `ipv6`), the host's
//! names as the resolver finds them with no DNS answer (`/etc/hosts`:
//! `fqdn`, `host`, `domain`, `fqdn_ip4`, `fqdn_ip6`, `fqdns`), the
//! resolver's configuration (`dns`) and the default gateways (`ip_gw`,
//! `ip4_gw`, `ip6_gw`).

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde_json::{Map, Value, json};

use super::text::lines;

/// Python's `str()` of an IPv6 address (`ipaddress`, 3.11): lowercase
/// hextets, the longest run of two or more zero hextets (the first such)
/// as `::`.
pub(crate) fn ipv6_str(addr: &Ipv6Addr) -> String {
    let h = addr.segments();
    let (mut best, mut best_len) = (None, 0);
    let mut i = 0;
    while i < 8 {
        if h[i] == 0 {
            let start = i;
            while i < 8 && h[i] == 0 {
                i += 1;
            }
            if i - start > best_len {
                best = Some(start);
                best_len = i - start;
            }
        } else {
            i += 1;
        }
    }
    let hex = |s: &[u16]| {
        s.iter()
            .map(|x| format!("{x:x}"))
            .collect::<Vec<_>>()
            .join(":")
    };
    match best {
        Some(start) if best_len > 1 => {
            format!("{}::{}", hex(&h[..start]), hex(&h[start + best_len..]))
        }
        _ => hex(&h),
    }
}

/// Python's `str()` of an address.
pub(crate) fn ip_str(addr: &IpAddr) -> String {
    match addr {
        IpAddr::V4(a) => a.to_string(),
        IpAddr::V6(a) => ipv6_str(a),
    }
}

/// Python's `ipaddress.ip_address()` of text (IPv4 dotted quad without
/// leading zeros, IPv6 with an optional `%scope`), and the scope.
fn py_ip(text: &str) -> Option<(IpAddr, Option<&str>)> {
    if let Ok(v4) = text.parse::<Ipv4Addr>() {
        return Some((IpAddr::V4(v4), None));
    }
    let (addr, scope) = match text.split_once('%') {
        Some((a, s)) if !s.is_empty() && !s.contains('%') => (a, Some(s)),
        Some(_) => return None,
        None => (text, None),
    };
    let v6 = addr.parse::<Ipv6Addr>().ok()?;
    Some((IpAddr::V6(v6), scope))
}

/// The text of each address of `family` (`inet`, `inet6`) of one of
/// `host::interfaces`' interfaces.
fn addresses<'a>(iface: &'a Value, family: &str) -> Vec<&'a str> {
    iface
        .get(family)
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(|a| a.get("address").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default()
}

/// The IPv4 addresses of one interface `ip addr show` calls `secondary`:
/// those in the subnet (same netmask) of an address before them.
fn secondary(iface: &Value) -> Vec<bool> {
    let inet = iface.get("inet").and_then(Value::as_array);
    let nets: Vec<Option<(u32, u32)>> = inet
        .map(|list| {
            list.iter()
                .map(|a| {
                    let addr: Ipv4Addr = a.get("address")?.as_str()?.parse().ok()?;
                    let mask: Ipv4Addr = a.get("netmask")?.as_str()?.parse().ok()?;
                    Some((u32::from(addr) & u32::from(mask), u32::from(mask)))
                })
                .collect()
        })
        .unwrap_or_default();
    nets.iter()
        .enumerate()
        .map(|(i, n)| n.is_some_and(|n| nets[..i].contains(&Some(n))))
        .collect()
}

/// Salt's `ip_interfaces`, `ip4_interfaces`, `ip6_interfaces` and
/// `hwaddr_interfaces` of `host::interfaces`' data.
pub(crate) fn interface_grains(ifaces: &Map<String, Value>) -> Map<String, Value> {
    let (mut ip, mut ip4, mut ip6, mut hw) = (Map::new(), Map::new(), Map::new(), Map::new());
    for (name, iface) in ifaces {
        let v4 = addresses(iface, "inet");
        let v6 = addresses(iface, "inet6");
        let second = secondary(iface);
        let primary4 = v4
            .iter()
            .zip(second.iter().chain(std::iter::repeat(&false)))
            .filter(|(_, s)| !**s)
            .map(|(a, _)| *a);
        let secondary4 = v4
            .iter()
            .zip(second.iter().chain(std::iter::repeat(&false)))
            .filter(|(_, s)| **s)
            .map(|(a, _)| *a);
        let all: Vec<&str> = primary4
            .clone()
            .chain(v6.iter().copied())
            .chain(secondary4.clone())
            .collect();
        let only4: Vec<&str> = primary4.chain(secondary4).collect();
        ip.insert(name.clone(), json!(all));
        ip4.insert(name.clone(), json!(only4));
        ip6.insert(name.clone(), json!(v6));
        if let Some(mac) = iface.get("hwaddr") {
            hw.insert(name.clone(), mac.clone());
        }
    }
    let mut g = Map::new();
    g.insert("hwaddr_interfaces".into(), Value::Object(hw));
    g.insert("ip4_interfaces".into(), Value::Object(ip4));
    g.insert("ip6_interfaces".into(), Value::Object(ip6));
    g.insert("ip_interfaces".into(), Value::Object(ip));
    g
}

/// Salt's `ip_addrs` / `ip_addrs6`: every address of `family` on the
/// host, once, in numeric order (loopback ones only when asked).
pub(crate) fn ip_addrs(
    ifaces: &Map<String, Value>,
    family: &str,
    include_loopback: bool,
) -> Vec<IpAddr> {
    let mut set = BTreeSet::new();
    for iface in ifaces.values() {
        for text in addresses(iface, family) {
            if let Some((addr, _)) = py_ip(text)
                && (include_loopback || !addr.is_loopback())
            {
                set.insert(addr);
            }
        }
    }
    set.into_iter().collect()
}

/// One line of `/etc/hosts`: an address and its names, the canonical
/// one first.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HostsEntry {
    pub addr: IpAddr,
    pub names: Vec<String>,
}

/// The entries of `/etc/hosts` text, as the C library's `files` source
/// reads them: `#` comments dropped, lines whose address does not parse
/// skipped.
pub(crate) fn parse_hosts(text: &str) -> Vec<HostsEntry> {
    let mut out = Vec::new();
    for line in lines(text) {
        let line = line.split('#').next().unwrap_or("");
        let mut words = line.split_whitespace();
        let (Some(addr), Some(first)) = (words.next(), words.next()) else {
            continue;
        };
        let Ok(addr) = addr.parse::<IpAddr>() else {
            continue;
        };
        let mut names = vec![first.to_string()];
        names.extend(words.map(str::to_string));
        out.push(HostsEntry { addr, names });
    }
    out
}

/// The resolver with no DNS answer: what `getaddrinfo`,
/// `gethostbyaddr` and Python's `socket.getfqdn` find in `/etc/hosts`.
pub(crate) struct Resolver {
    pub hosts: Vec<HostsEntry>,
    pub hostname: String,
}

impl Resolver {
    /// The entries naming `name` (case does not matter), in file order.
    fn named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a HostsEntry> + 'a {
        self.hosts
            .iter()
            .filter(move |e| e.names.iter().any(|n| n.eq_ignore_ascii_case(name)))
    }

    /// `getaddrinfo(name)`'s addresses of one family (or both), each once.
    pub(crate) fn addresses(&self, name: &str, v6: Option<bool>) -> Vec<IpAddr> {
        let mut out: Vec<IpAddr> = Vec::new();
        for e in self.named(name) {
            if v6.is_none_or(|v6| v6 == e.addr.is_ipv6()) && !out.contains(&e.addr) {
                out.push(e.addr);
            }
        }
        out
    }

    /// `getaddrinfo(name, AI_CANONNAME)`'s canonical name.
    fn canonical(&self, name: &str) -> Option<&str> {
        self.hosts
            .iter()
            .find(|e| e.names.iter().any(|n| n.eq_ignore_ascii_case(name)))
            .map(|e| e.names[0].as_str())
    }

    /// `gethostbyaddr(addr)`: the names of the first line of the address.
    fn by_addr(&self, addr: &IpAddr) -> Option<&[String]> {
        self.hosts
            .iter()
            .find(|e| e.addr == *addr)
            .map(|e| e.names.as_slice())
    }

    /// Python's `socket.getfqdn(name)`: the first name with a dot of the
    /// entry for `name`'s address, else its canonical name, else `name`.
    pub(crate) fn getfqdn(&self, name: &str) -> String {
        let name = name.trim();
        let name = if name.is_empty() || name == "0.0.0.0" || name == "::" {
            self.hostname.as_str()
        } else {
            name
        };
        let addr = match py_ip(name) {
            Some((a, _)) => Some(a),
            None => self.addresses(name, None).first().copied(),
        };
        let Some(names) = addr.and_then(|a| self.by_addr(&a)) else {
            return name.to_string();
        };
        names
            .iter()
            .find(|n| n.contains('.'))
            .unwrap_or(&names[0])
            .clone()
    }

    /// Salt's `get_fqhostname`, with its fallback of
    /// `localhost.localdomain`: the hostname's canonical name, else
    /// `getfqdn()`.
    pub(crate) fn fqdn(&self) -> String {
        let fqdn = match self.canonical(&self.hostname) {
            Some(c) => c.to_string(),
            None => self.getfqdn(""),
        };
        if fqdn.is_empty() {
            "localhost.localdomain".into()
        } else {
            fqdn
        }
    }

    /// Salt's `network.fqdns`: the fully qualified names of the host's
    /// addresses (not loopback), sorted.
    pub(crate) fn fqdns(&self, addrs: &[IpAddr]) -> Vec<String> {
        let mut set = BTreeSet::new();
        for addr in addrs {
            if let Some(names) = self.by_addr(addr) {
                set.insert(self.getfqdn(&names[0]));
            }
        }
        set.into_iter().collect()
    }
}

/// Salt's `hostname` grains and `ip_fqdn`'s `fqdn_ip4`/`fqdn_ip6`.
pub(crate) fn name_grains(
    resolver: &Resolver,
    ipv4: &[IpAddr],
    ipv6: &[IpAddr],
) -> Map<String, Value> {
    let fqdn = resolver.fqdn();
    let (host, domain) = fqdn.split_once('.').unwrap_or((&fqdn, ""));
    let lookup = |have: &[IpAddr], v6: bool| -> Vec<String> {
        if have.is_empty() {
            return Vec::new();
        }
        resolver
            .addresses(&fqdn, Some(v6))
            .iter()
            .map(ip_str)
            .collect()
    };
    let mut g = Map::new();
    g.insert("localhost".into(), json!(resolver.hostname));
    g.insert("fqdn".into(), json!(fqdn));
    g.insert("host".into(), json!(host));
    g.insert("domain".into(), json!(domain));
    g.insert("fqdn_ip4".into(), json!(lookup(ipv4, false)));
    g.insert("fqdn_ip6".into(), json!(lookup(ipv6, true)));
    g
}

/// Salt's `natural_ipv4_netmask` prefix of an address: its class's.
fn natural_prefix(addr: Ipv4Addr) -> u8 {
    match addr.octets()[0] {
        192.. => 24,
        128.. => 16,
        _ => 8,
    }
}

/// Python's `ipaddress.ip_network(text)` (strict) of a `sortlist`
/// entry, as Salt shows it: `address/netmask` (IPv4 without a mask gets
/// its class's).
fn sortlist_entry(raw: &str) -> Option<String> {
    let (addr, mask) = match raw.split_once('/') {
        Some((a, m)) => (a, Some(m)),
        None => (raw, None),
    };
    if let Ok(v4) = addr.parse::<Ipv4Addr>() {
        let bits = u32::from(v4);
        let prefix: u32 = match mask {
            None => 32,
            Some(m) if m.bytes().all(|b| b.is_ascii_digit()) && !m.is_empty() => {
                let p: u32 = m.parse().ok()?;
                (p <= 32).then_some(p)?
            }
            Some(m) => {
                let m = u32::from(m.parse::<Ipv4Addr>().ok()?);
                if m.leading_ones() + m.trailing_zeros() == 32 {
                    m.leading_ones()
                } else if (!m).leading_ones() + (!m).trailing_zeros() == 32 {
                    (!m).leading_ones()
                } else {
                    return None;
                }
            }
        };
        let netmask = |p: u32| if p == 0 { 0 } else { u32::MAX << (32 - p) };
        if bits & !netmask(prefix) != 0 {
            return None;
        }
        let prefix = if mask.is_none() {
            u32::from(natural_prefix(v4))
        } else {
            prefix
        };
        let net = Ipv4Addr::from(bits & netmask(prefix));
        return Some(format!("{net}/{}", Ipv4Addr::from(netmask(prefix))));
    }
    let v6 = addr.parse::<Ipv6Addr>().ok()?;
    let prefix: u32 = match mask {
        None => 128,
        Some(m) if m.bytes().all(|b| b.is_ascii_digit()) && !m.is_empty() => {
            let p: u32 = m.parse().ok()?;
            (p <= 128).then_some(p)?
        }
        Some(_) => return None,
    };
    let netmask: u128 = if prefix == 0 {
        0
    } else {
        u128::MAX << (128 - prefix)
    };
    if u128::from(v6) & !netmask != 0 {
        return None;
    }
    Some(format!(
        "{}/{}",
        ipv6_str(&v6),
        ipv6_str(&Ipv6Addr::from(netmask))
    ))
}

/// Salt's `salt.utils.dns.parse_resolv` of a `resolv.conf` text.
pub(crate) fn parse_resolv(text: &str) -> Value {
    let (mut nameservers, mut ip4, mut ip6) = (Vec::new(), Vec::new(), Vec::new());
    let (mut search, mut sortlist, mut options): (Vec<String>, Vec<String>, Vec<String>) =
        (Vec::new(), Vec::new(), Vec::new());
    let mut domain = String::new();
    for line in lines(text) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some((directive, rest)) = words.split_first() else {
            continue;
        };
        let args: Vec<&str> = rest
            .iter()
            .take_while(|w| !w.starts_with(['#', ';']))
            .copied()
            .collect();
        match directive.to_lowercase().as_str() {
            "nameserver" => {
                let Some(addr) = args.first() else { continue };
                let Some((ip, scope)) = py_ip(addr) else {
                    continue;
                };
                let mut text = ip_str(&ip);
                if let Some(s) = scope {
                    text = format!("{text}%{s}");
                }
                if !nameservers.contains(&text) {
                    nameservers.push(text.clone());
                }
                let list = if ip.is_ipv4() { &mut ip4 } else { &mut ip6 };
                if !list.contains(&text) {
                    list.push(text);
                }
            }
            "domain" => {
                if let Some(d) = args.first() {
                    domain = d.to_string();
                }
            }
            "search" => search = args.iter().map(|s| s.to_string()).collect(),
            "sortlist" => {
                for raw in &args {
                    if let Some(net) = sortlist_entry(raw)
                        && !sortlist.contains(&net)
                    {
                        sortlist.push(net);
                    }
                }
            }
            "options" => {
                if let Some(o) = args.first()
                    && !options.iter().any(|x| x == o)
                {
                    options.push(o.to_string());
                }
            }
            _ => {}
        }
    }
    json!({
        "nameservers": nameservers,
        "ip4_nameservers": ip4,
        "ip6_nameservers": ip6,
        "sortlist": sortlist,
        "domain": domain,
        "search": search,
        "options": options,
    })
}

/// `RTF_GATEWAY` and `RTF_REJECT` of the kernel's route flags.
const RTF_GATEWAY: u32 = 0x0002;
const RTF_REJECT: u32 = 0x0200;

/// What `ip -4 route show` makes of the default route, from
/// `/proc/net/route` (the main table): `Some(gateway)` for the first
/// default route (`None` inside when it has no gateway), `None` when
/// there is none. The file writes addresses in the host's byte order.
pub(crate) fn default_route4(text: &str, big_endian: bool) -> Option<Option<String>> {
    for line in lines(text).into_iter().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 8 {
            continue;
        }
        let hex = |s: &str| u32::from_str_radix(s, 16).ok();
        let (Some(dest), Some(gw), Some(flags), Some(mask)) =
            (hex(f[1]), hex(f[2]), hex(f[3]), hex(f[7]))
        else {
            continue;
        };
        if dest != 0 || mask != 0 || flags & RTF_REJECT != 0 {
            continue;
        }
        if flags & RTF_GATEWAY == 0 {
            return Some(None);
        }
        let octets = if big_endian {
            gw.to_be_bytes()
        } else {
            gw.to_le_bytes()
        };
        return Some(Some(Ipv4Addr::from(octets).to_string()));
    }
    None
}

/// What `ip -6 route show` makes of the default route, from
/// `/proc/net/ipv6_route` (unreachable routes left out).
pub(crate) fn default_route6(text: &str) -> Option<Option<String>> {
    for line in lines(text) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 10 {
            continue;
        }
        let (Ok(dest), Ok(plen), Ok(gw), Ok(flags)) = (
            u128::from_str_radix(f[0], 16),
            u8::from_str_radix(f[1], 16),
            u128::from_str_radix(f[4], 16),
            u32::from_str_radix(f[8], 16),
        ) else {
            continue;
        };
        if dest != 0 || plen != 0 || flags & RTF_REJECT != 0 {
            continue;
        }
        if flags & RTF_GATEWAY == 0 {
            return Some(None);
        }
        return Some(Some(ipv6_str(&Ipv6Addr::from(gw))));
    }
    None
}

/// Salt's reading of `ip -N route show`: the first `default` line, and
/// its gateway when it says `via`.
pub(crate) fn default_route_ip(out: &str) -> Option<Option<String>> {
    let line = out.lines().find(|l| l.starts_with("default"))?;
    let words: Vec<&str> = line.split_whitespace().collect();
    Some(match words.get(1..3) {
        Some(["via", gw]) => Some(gw.to_string()),
        _ => None,
    })
}

/// Salt's `default_gateway` grains of the two default routes found.
pub(crate) fn gateway_grains(
    v4: Option<Option<String>>,
    v6: Option<Option<String>>,
) -> Map<String, Value> {
    let grain = |r: &Option<Option<String>>| match r {
        None => json!(false),
        Some(None) => json!(true),
        Some(Some(gw)) => json!(gw),
    };
    let mut g = Map::new();
    g.insert("ip_gw".into(), json!(v4.is_some() || v6.is_some()));
    g.insert("ip4_gw".into(), grain(&v4));
    g.insert("ip6_gw".into(), grain(&v6));
    g
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ifaces() -> Map<String, Value> {
        let v = json!({
            "lo": {"up": true, "hwaddr": "00:00:00:00:00:00",
                   "inet": [{"address": "127.0.0.1", "netmask": "255.0.0.0", "broadcast": null, "label": "lo"}],
                   "inet6": [{"address": "::1", "prefixlen": "128", "scope": "host"}]},
            "ifb0": {"up": false, "hwaddr": "8a:c7:f7:d0:96:f1"},
            "eth0": {"up": true, "hwaddr": "02:fc:00:00:00:01",
                     "inet": [{"address": "192.0.2.2", "netmask": "255.255.255.0", "broadcast": "192.0.2.255", "label": "eth0"},
                              {"address": "10.0.0.5", "netmask": "255.0.0.0", "broadcast": null, "label": "eth0"},
                              {"address": "192.0.2.9", "netmask": "255.255.255.0", "broadcast": "192.0.2.255", "label": "eth0:1"}],
                     "inet6": [{"address": "fd00::2", "prefixlen": "64", "scope": "global"},
                               {"address": "fe80::fc:ff:fe00:1", "prefixlen": "64", "scope": "link"}]},
            "wg0": {"up": true}
        });
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn interface_grains_list_addresses_as_salt_does() {
        let g = interface_grains(&ifaces());
        assert_eq!(
            g["ip_interfaces"]["eth0"],
            json!([
                "192.0.2.2",
                "10.0.0.5",
                "fd00::2",
                "fe80::fc:ff:fe00:1",
                "192.0.2.9"
            ])
        );
        assert_eq!(
            g["ip4_interfaces"]["eth0"],
            json!(["192.0.2.2", "10.0.0.5", "192.0.2.9"])
        );
        assert_eq!(g["ip6_interfaces"]["lo"], json!(["::1"]));
        assert_eq!(g["ip_interfaces"]["ifb0"], json!([]));
        assert_eq!(g["hwaddr_interfaces"]["ifb0"], json!("8a:c7:f7:d0:96:f1"));
        assert!(g["hwaddr_interfaces"].get("wg0").is_none());
        let v4: Vec<String> = ip_addrs(&ifaces(), "inet", true)
            .iter()
            .map(ip_str)
            .collect();
        assert_eq!(v4, ["10.0.0.5", "127.0.0.1", "192.0.2.2", "192.0.2.9"]);
        let v6: Vec<String> = ip_addrs(&ifaces(), "inet6", false)
            .iter()
            .map(ip_str)
            .collect();
        assert_eq!(v6, ["fd00::2", "fe80::fc:ff:fe00:1"]);
    }

    #[test]
    fn ipv6_text_is_pythons() {
        let s = |t: &str| ipv6_str(&t.parse().unwrap_or(Ipv6Addr::UNSPECIFIED));
        assert_eq!(s("::1"), "::1");
        assert_eq!(s("2001:db8:0:0:1:0:0:1"), "2001:db8::1:0:0:1");
        assert_eq!(s("2001:db8:0:1:1:1:1:1"), "2001:db8:0:1:1:1:1:1");
        assert_eq!(s("::ffff:1.2.3.4"), "::ffff:102:304");
        assert_eq!(s("::"), "::");
        assert_eq!(s("fe80::"), "fe80::");
    }

    const HOSTS: &str = "127.0.0.1\tlocalhost\n127.0.1.1\tweb1.example.com web1 # the host\n\
                         192.0.2.2 web1.example.com\n::1 localhost ip6-localhost ip6-loopback\n\
                         fd00::2 web1-v6.example.com web1\nbad line\n# 10.0.0.1 gone\n";

    #[test]
    fn names_resolve_through_etc_hosts() {
        let r = Resolver {
            hosts: parse_hosts(HOSTS),
            hostname: "web1".into(),
        };
        assert_eq!(r.fqdn(), "web1.example.com");
        let v4 = ["127.0.0.1"
            .parse()
            .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST))];
        let g = name_grains(&r, &v4, &[]);
        assert_eq!(g["host"], json!("web1"));
        assert_eq!(g["domain"], json!("example.com"));
        assert_eq!(g["fqdn_ip4"], json!(["127.0.1.1", "192.0.2.2"]));
        assert_eq!(g["fqdn_ip6"], json!([]));
        let addrs: Vec<IpAddr> = ["192.0.2.2", "fd00::2", "10.9.9.9"]
            .iter()
            .filter_map(|a| a.parse().ok())
            .collect();
        assert_eq!(r.fqdns(&addrs), ["web1-v6.example.com", "web1.example.com"]);

        // This sandbox's host: the hostname has a line, without a domain.
        let r = Resolver {
            hosts: parse_hosts("127.0.0.1 localhost\n127.0.0.1 runsc\n127.0.0.1 vm\n"),
            hostname: "vm".into(),
        };
        assert_eq!(r.fqdn(), "vm");
        assert_eq!(r.getfqdn(""), "localhost");
        // A hostname no line names is its own fqdn.
        let r = Resolver {
            hosts: Vec::new(),
            hostname: "lonely".into(),
        };
        assert_eq!(r.fqdn(), "lonely");
        let r = Resolver {
            hosts: Vec::new(),
            hostname: String::new(),
        };
        assert_eq!(r.fqdn(), "localhost.localdomain");
    }

    #[test]
    fn resolv_conf_parses_as_salt_parses_it() {
        let text = "# generated\nnameserver 10.255.255.53\nnameserver 2001:DB8::0:1 # v6\n\
                    nameserver 10.255.255.53\nnameserver fe80::1%eth0\nnameserver bogus\n\
                    search a.example b.example ;x\ndomain example.org\n\
                    sortlist 130.155.160.0/255.255.240.0 130.155.0.0 10.1.2.3/8\n\
                    options ndots:2 timeout:1\noptions edns0\n\nnameserver\n";
        assert_eq!(
            parse_resolv(text),
            json!({
                "nameservers": ["10.255.255.53", "2001:db8::1", "fe80::1%eth0"],
                "ip4_nameservers": ["10.255.255.53"],
                "ip6_nameservers": ["2001:db8::1", "fe80::1%eth0"],
                "sortlist": ["130.155.160.0/255.255.240.0", "130.155.0.0/255.255.0.0"],
                "domain": "example.org",
                "search": ["a.example", "b.example"],
                "options": ["ndots:2", "edns0"],
            })
        );
    }

    #[test]
    fn default_routes_read_as_ip_route_shows_them() {
        let route = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
                     eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n\
                     eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n";
        assert_eq!(default_route4(route, false), Some(Some("192.0.2.1".into())));
        assert_eq!(
            default_route4(
                "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\n\
                            eth0\t00000000\tC0000201\t0003\t0\t0\t0\t00000000\n",
                true
            ),
            Some(Some("192.0.2.1".into()))
        );
        let no_gw = "h\nwg0\t00000000\t00000000\t0001\t0\t0\t0\t00000000\t0\t0\t0\n";
        assert_eq!(default_route4(no_gw, false), Some(None));
        assert_eq!(default_route4("h\n", false), None);
        let v6 = "fd000000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth0\n\
                  00000000000000000000000000000000 00 00000000000000000000000000000000 00 fd000000000000000000000000000001 00000400 00000002 00000000 00000003     eth0\n\
                  00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo\n";
        assert_eq!(default_route6(v6), Some(Some("fd00::1".into())));
        let only_null = "00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo\n";
        assert_eq!(default_route6(only_null), None);
        assert_eq!(
            default_route_ip("default via 192.0.2.1 dev eth0 \n192.0.2.0/24 dev eth0\n"),
            Some(Some("192.0.2.1".into()))
        );
        assert_eq!(default_route_ip("default dev wg0 scope link\n"), Some(None));
        assert_eq!(default_route_ip("10.0.0.0/8 dev x\n"), None);
        assert_eq!(
            Value::Object(gateway_grains(Some(Some("192.0.2.1".into())), None)),
            json!({"ip_gw": true, "ip4_gw": "192.0.2.1", "ip6_gw": false})
        );
    }
}
