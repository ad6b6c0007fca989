//! `ipcidr` and `S@`: an address or network against the minion's `ipv4`
//! and `ipv6` grains, as `salt/matchers/ipcidr_match.py` decides with
//! Python's `ipaddress` module.
//!
//! An address matches when its text (Python's `str()`, compressed for
//! IPv6) is one of the grain's; a network when any grain address lies in
//! it. Networks are strict, as `ip_network()` is: host bits set is no
//! network. The prefix may be a length, or for IPv4 a netmask
//! (`255.255.0.0`) or a hostmask (`0.0.255.255`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::*;

/// A parsed `ipcidr` target.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Cidr {
    Addr(IpAddr),
    Net { addr: IpAddr, prefix: u8 },
}

impl Cidr {
    /// `ip_address(tgt)`, else `ip_network(tgt)`; `None` where Salt logs
    /// "Invalid IP/CIDR target" and matches nothing.
    pub(super) fn parse(tgt: &str) -> Option<Self> {
        if let Some(addr) = ip_address(tgt) {
            return Some(Self::Addr(addr));
        }
        let (addr, mask) = tgt.split_once('/').unwrap_or((tgt, ""));
        if mask.contains('/') {
            return None;
        }
        let addr = ip_address(addr)?;
        let prefix = if tgt.contains('/') {
            prefix(addr, mask)?
        } else {
            max_prefix(addr)
        };
        // Strict: no host bits set.
        (mask_bits(addr, prefix) == bits(addr)).then_some(Self::Net { addr, prefix })
    }

    /// `ipcidr_match.match` given the minion's grains. `Err` where Python
    /// raises: a grain address that is no address.
    pub(super) fn matches(&self, grains: &Map<String, Value>) -> Result<bool, TargetError> {
        let addr = match self {
            Self::Addr(a) | Self::Net { addr: a, .. } => *a,
        };
        let proto = if addr.is_ipv4() { "ipv4" } else { "ipv6" };
        let Some(grain) = grains.get(proto) else {
            return Ok(false);
        };
        match self {
            Self::Addr(a) => {
                let text = python_str(*a);
                match grain {
                    Value::Array(items) => Ok(items.iter().any(|i| i.as_str() == Some(&text))),
                    // `str in str` is a substring test in Python.
                    Value::String(s) => Ok(s.contains(&text)),
                    Value::Object(map) => Ok(map.contains_key(&text)),
                    other => Err(grain_error(proto, other)),
                }
            }
            Self::Net { addr, prefix } => {
                let items: Vec<&Value> = match grain {
                    Value::Array(items) => items.iter().collect(),
                    one => vec![one],
                };
                let mut hit = false;
                for item in items {
                    let member = item
                        .as_str()
                        .and_then(ip_address)
                        .ok_or_else(|| grain_error(proto, item))?;
                    hit |= member.is_ipv4() == addr.is_ipv4()
                        && mask_bits(member, *prefix) == bits(*addr);
                }
                Ok(hit)
            }
        }
    }
}

fn grain_error(proto: &str, value: &Value) -> TargetError {
    TargetError::BadGrain {
        grain: proto.to_string(),
        reason: format!("{} is no IP address", python::str(value)),
    }
}

/// `ipaddress.ip_address(s)` for a string.
fn ip_address(s: &str) -> Option<IpAddr> {
    if let Some(v4) = ipv4(s) {
        return Some(IpAddr::V4(v4));
    }
    // Python takes a scope (`fe80::1%eth0`); such an address is never one
    // of the grains, which carry none, and no network may have one.
    if s.contains('%') || !s.is_ascii() {
        return None;
    }
    s.parse::<Ipv6Addr>().ok().map(IpAddr::V6)
}

/// Python's IPv4 parser: four decimal octets of one to three ASCII digits,
/// no leading zeros, each at most 255.
fn ipv4(s: &str) -> Option<Ipv4Addr> {
    let mut octets = [0u8; 4];
    let mut parts = s.split('.');
    for octet in &mut octets {
        let part = parts.next()?;
        if part.is_empty()
            || part.len() > 3
            || !part.bytes().all(|b| b.is_ascii_digit())
            || (part.len() > 1 && part.starts_with('0'))
        {
            return None;
        }
        *octet = part.parse().ok()?;
    }
    parts.next().is_none().then(|| Ipv4Addr::from(octets))
}

fn max_prefix(addr: IpAddr) -> u8 {
    if addr.is_ipv4() { 32 } else { 128 }
}

/// The prefix after `/`: a decimal length, or for IPv4 a netmask or a
/// hostmask, as `_make_netmask` reads it.
fn prefix(addr: IpAddr, mask: &str) -> Option<u8> {
    let max = max_prefix(addr);
    if !mask.is_empty() && mask.bytes().all(|b| b.is_ascii_digit()) {
        let n: u32 = mask.parse().ok()?;
        return (n <= u32::from(max)).then_some(n as u8);
    }
    if !addr.is_ipv4() {
        return None;
    }
    let m = u32::from(ipv4(mask)?);
    let contiguous = |m: u32| m.leading_ones() + m.trailing_zeros() == 32;
    if contiguous(m) {
        return Some(m.leading_ones() as u8);
    }
    // A hostmask: its inverse is a netmask.
    contiguous(!m).then(|| (!m).leading_ones() as u8)
}

fn bits(addr: IpAddr) -> u128 {
    match addr {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

fn mask_bits(addr: IpAddr, prefix: u8) -> u128 {
    let width = u32::from(max_prefix(addr));
    let host = width - u32::from(prefix);
    let all = if width == 128 {
        u128::MAX
    } else {
        (1u128 << width) - 1
    };
    let mask = if host >= 128 {
        0
    } else {
        all & !((1u128 << host) - 1)
    };
    bits(addr) & mask
}

/// Python's `str()` of an address: dotted IPv4, or IPv6 with the longest
/// run of two or more zero groups (the first, on a tie) written `::`, and
/// no embedded IPv4 (Python 3.11 prints `::ffff:102:304`).
fn python_str(addr: IpAddr) -> String {
    let v6 = match addr {
        IpAddr::V4(a) => return a.to_string(),
        IpAddr::V6(a) => a.segments(),
    };
    let (mut best, mut best_len, mut run, mut run_len) = (0, 0, 0, 0);
    for (i, s) in v6.iter().enumerate() {
        if *s == 0 {
            if run_len == 0 {
                run = i;
            }
            run_len += 1;
            if run_len > best_len {
                best = run;
                best_len = run_len;
            }
        } else {
            run_len = 0;
        }
    }
    let hex = |segs: &[u16]| {
        segs.iter()
            .map(|s| format!("{s:x}"))
            .collect::<Vec<_>>()
            .join(":")
    };
    if best_len < 2 {
        return hex(&v6);
    }
    format!("{}::{}", hex(&v6[..best]), hex(&v6[best + best_len..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_as_pythons_ipaddress() {
        assert!(matches!(Cidr::parse("10.0.0.5"), Some(Cidr::Addr(_))));
        assert_eq!(Cidr::parse("10.0.0.0/255.0.0.0"), Cidr::parse("10.0.0.0/8"));
        assert_eq!(
            Cidr::parse("10.0.0.0/0.255.255.255"),
            Cidr::parse("10.0.0.0/8")
        );
        assert_eq!(Cidr::parse("0.0.0.0/0.0.0.0"), Cidr::parse("0.0.0.0/0"));
        for bad in [
            "010.0.0.5",
            "10.0.0.1/8",
            "10.0.0.0/33",
            "10.0.0.0/ 8",
            "10.0.0.0/8/8",
            "x",
            "fd00::1/64",
            "fe80::1%eth0",
            "10.0.0.0/255.0.255.0",
            "",
        ] {
            assert_eq!(Cidr::parse(bad), None, "{bad:?}");
        }
        assert!(Cidr::parse("fd00::/8").is_some());
    }

    #[test]
    fn prints_ipv6_as_python() {
        for (text, python) in [
            ("fd00:0:0:0:0:0:3:5", "fd00::3:5"),
            ("::1", "::1"),
            ("1:0:0:2:0:0:0:3", "1:0:0:2::3"),
            ("1:0:2:0:3:0:4:0", "1:0:2:0:3:0:4:0"),
            ("::", "::"),
            ("::ffff:1.2.3.4", "::ffff:102:304"),
            ("1::", "1::"),
        ] {
            assert_eq!(python_str(text.parse().unwrap()), python, "{text}");
        }
    }
}
