//! Salt's `network` module, the part an operator reads: interfaces,
//! addresses and hardware addresses, from the host's `interfaces` call
//! (the same facts as the `ipv4`/`ipv6` grains every plugin sees). It
//! needs no capability.

use std::net::IpAddr;

use maid_sdk::salt::fnmatch;
use maid_sdk::{Error, Function, Plugin, export_plugin, function, host, python};
use serde::Deserialize;
use serde_json::{Value, json};

struct Network;

/// Salt's `split_input`: a list, or text split on commas.
fn split_input(v: &Value) -> Vec<String> {
    match v {
        Value::Array(items) => items.iter().map(python::str).collect(),
        other => python::str(other)
            .split(',')
            .map(|s| s.trim().to_string())
            .collect(),
    }
}

/// Python's `ipaddress` `is_private` (3.11's table).
fn is_private(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let n = u32::from(*v4);
            const NETS: &[(u32, u32)] = &[
                (0x0000_0000, 8),
                (0x0a00_0000, 8),
                (0x7f00_0000, 8),
                (0xa9fe_0000, 16),
                (0xac10_0000, 12),
                (0xc000_0000, 29),
                (0xc000_00aa, 31),
                (0xc000_0200, 24),
                (0xc0a8_0000, 16),
                (0xc612_0000, 15),
                (0xc633_6400, 24),
                (0xcb00_7100, 24),
                (0xf000_0000, 4),
                (0xffff_ffff, 32),
            ];
            NETS.iter().any(|&(net, len)| {
                let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
                n & mask == net
            })
        }
        IpAddr::V6(v6) => {
            let n = u128::from(*v6);
            const NETS: &[(u128, u32)] = &[
                (0, 128),
                (1, 128),
                (0x0000_0000_0000_0000_0000_ffff_0000_0000, 96),
                (0x0100_0000_0000_0000_0000_0000_0000_0000, 64),
                (0x2001_0000_0000_0000_0000_0000_0000_0000, 23),
                (0x2001_0db8_0000_0000_0000_0000_0000_0000, 32),
                (0x2001_0010_0000_0000_0000_0000_0000_0000, 28),
                (0xfc00_0000_0000_0000_0000_0000_0000_0000, 7),
                (0xfe80_0000_0000_0000_0000_0000_0000_0000, 10),
            ];
            NETS.iter().any(|&(net, len)| {
                let mask = if len == 0 {
                    0
                } else {
                    u128::MAX << (128 - len)
                };
                n & mask == net
            })
        }
    }
}

/// Python's `ipaddress.ip_network(cidr)` (strict: no host bits), as a
/// membership test; `None` for a CIDR Python refuses.
fn network(cidr: &str) -> Option<impl Fn(&IpAddr) -> bool> {
    let (addr, len) = match cidr.split_once('/') {
        Some((a, l)) => (a.parse::<IpAddr>().ok()?, Some(l.parse::<u32>().ok()?)),
        None => (cidr.parse::<IpAddr>().ok()?, None),
    };
    let (bits, max) = match addr {
        IpAddr::V4(v4) => (u128::from(u32::from(v4)), 32),
        IpAddr::V6(v6) => (u128::from(v6), 128),
    };
    let len = len.unwrap_or(max);
    if len > max {
        return None;
    }
    let mask = move |len: u32| -> u128 {
        if len == 0 {
            0
        } else {
            (u128::MAX << (128 - len)) >> (128 - max)
        }
    };
    if bits & !mask(len) & mask(max) != 0 {
        return None;
    }
    let v4 = addr.is_ipv4();
    Some(move |ip: &IpAddr| {
        let n = match ip {
            IpAddr::V4(a) if v4 => u128::from(u32::from(*a)),
            IpAddr::V6(a) if !v4 => u128::from(*a),
            _ => return false,
        };
        n & mask(len) == bits
    })
}

#[derive(Deserialize)]
struct IpAddrs {
    #[serde(default)]
    interface: Value,
    #[serde(default)]
    include_loopback: bool,
    #[serde(default)]
    cidr: Value,
    #[serde(default, rename = "type")]
    kind: Value,
}

/// Salt's `_ip_addrs`: the addresses of `proto` on the interfaces named
/// (globs; all by default), loopback only when asked, sorted, once each.
fn ip_addrs(a: &IpAddrs, proto: &str) -> Result<Vec<String>, Error> {
    let ifaces = host::interfaces();
    let patterns = (!a.interface.is_null()).then(|| split_input(&a.interface));
    let mut addrs: Vec<IpAddr> = ifaces
        .iter()
        .filter(|(name, _)| {
            patterns
                .as_ref()
                .is_none_or(|ps| ps.iter().any(|p| fnmatch(name, p)))
        })
        .flat_map(|(_, info)| info[proto].as_array().cloned().unwrap_or_default())
        .filter_map(|entry| entry["address"].as_str().and_then(|s| s.parse().ok()))
        .filter(|ip: &IpAddr| a.include_loopback || !ip.is_loopback())
        .collect();
    addrs.sort();
    addrs.dedup();
    let cidr = match &a.cidr {
        Value::Null => None,
        Value::String(s) if s.is_empty() => None,
        other => Some(python::str(other)),
    };
    if let Some(cidr) = cidr {
        // Salt logs an invalid CIDR and matches nothing.
        return Ok(match network(&cidr) {
            Some(inside) => addrs
                .iter()
                .filter(|ip| inside(ip))
                .map(IpAddr::to_string)
                .collect(),
            None => Vec::new(),
        });
    }
    let kind = a.kind.as_str().unwrap_or_default();
    Ok(addrs
        .iter()
        .filter(|ip| match kind {
            "public" if proto == "inet" => !is_private(ip),
            "private" if proto == "inet" => is_private(ip),
            _ => true,
        })
        .map(IpAddr::to_string)
        .collect())
}

#[derive(Deserialize)]
struct Iface {
    iface: Value,
}

/// Salt's `_get_iface_info`: the interface, or the error text it returns
/// (as a value, not a failure).
fn iface_info(iface: &Value) -> Result<Value, String> {
    let name = python::str(iface);
    let ifaces = host::interfaces();
    match ifaces.get(&name) {
        Some(info) => Ok(info.clone()),
        None => {
            let names: Vec<&str> = ifaces.keys().map(String::as_str).collect();
            Err(format!(
                "Interface \"{name}\" not in available interfaces: \"{}\"",
                names.join("\", \"")
            ))
        }
    }
}

fn hw_addr(a: &Iface) -> Value {
    match iface_info(&a.iface) {
        Ok(info) => info.get("hwaddr").cloned().unwrap_or_else(|| json!("")),
        Err(e) => json!(e),
    }
}

/// The arguments of `network.ip_addrs` and `network.ipaddrs`.
const IP4_ARGS: &[&str] = &[
    "interface=null",
    "include_loopback=false",
    "cidr=null",
    "type=null",
];

/// The arguments of `network.ip_addrs6` and `network.ipaddrs6`.
const IP6_ARGS: &[&str] = &["interface=null", "include_loopback=false", "cidr=null"];

/// Return each interface: up, hwaddr, inet and inet6 addresses
#[function]
fn interfaces() -> Result<Value, Error> {
    Ok(Value::Object(host::interfaces()))
}

/// Return the IPv4 addresses (loopback with include_loopback=True; filter by interface, cidr, type)
#[function(name = "ip_addrs", args = IP4_ARGS)]
fn ip_addrs_(a: IpAddrs) -> Result<Vec<String>, Error> {
    ip_addrs(&a, "inet")
}

/// The same as network.ip_addrs
#[function(args = IP4_ARGS)]
fn ipaddrs(a: IpAddrs) -> Result<Vec<String>, Error> {
    ip_addrs(&a, "inet")
}

/// Return the IPv6 addresses (loopback with include_loopback=True; filter by interface, cidr)
#[function(args = IP6_ARGS)]
fn ip_addrs6(a: IpAddrs) -> Result<Vec<String>, Error> {
    ip_addrs(&a, "inet6")
}

/// The same as network.ip_addrs6
#[function(args = IP6_ARGS)]
fn ipaddrs6(a: IpAddrs) -> Result<Vec<String>, Error> {
    ip_addrs(&a, "inet6")
}

/// Return an interface's hardware (MAC) address
#[function(name = "hw_addr", args = ["iface"])]
fn hw_addr_(a: Iface) -> Result<Value, Error> {
    Ok(hw_addr(&a))
}

/// The same as network.hw_addr
#[function(args = ["iface"])]
fn hwaddr(a: Iface) -> Result<Value, Error> {
    Ok(hw_addr(&a))
}

/// Return an interface's IPv4 addresses (inet entries)
#[function(args = ["iface"])]
fn interface(a: Iface) -> Result<Value, Error> {
    Ok(match iface_info(&a.iface) {
        Ok(info) => info.get("inet").cloned().unwrap_or_else(|| json!("")),
        Err(e) => json!(e),
    })
}

/// Return an interface's first IPv4 address
#[function(args = ["iface"])]
fn interface_ip(a: Iface) -> Result<Value, Error> {
    Ok(match iface_info(&a.iface) {
        Ok(info) => info["inet"][0]
            .get("address")
            .cloned()
            .unwrap_or_else(|| json!("")),
        Err(e) => json!(e),
    })
}

/// Return whether an IP address is private
#[function(name = "is_private", args = ["ip_addr"])]
fn is_private_(a: IpArg) -> Result<bool, Error> {
    let ip: IpAddr = python::str(&a.ip_addr).parse().map_err(|_| {
        Error::failed(
            format!(
                "{} does not appear to be an IPv4 or IPv6 address",
                python::repr(&a.ip_addr)
            ),
            1,
        )
    })?;
    Ok(is_private(&ip))
}

impl Plugin for Network {
    const MODULE: &'static str = "network";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");

    fn functions() -> Vec<Function> {
        maid_sdk::functions![
            interfaces,
            ip_addrs_,
            ipaddrs,
            ip_addrs6,
            ipaddrs6,
            hw_addr_,
            hwaddr,
            interface,
            interface_ip,
            is_private_,
        ]
    }
}

#[derive(Deserialize)]
struct IpArg {
    ip_addr: Value,
}

export_plugin!(Network);
