//! Target expressions of every type against a minion id and grains: the
//! first byte picks the type, the rest up to a NUL is the expression (or a
//! JSON array of words), after it the minion id.
#![no_main]

use libfuzzer_sys::fuzz_target;
use maid_salt::target::{TargetType, matches};
use serde_json::{Value, json};

fuzz_target!(|data: &[u8]| {
    let Some((&kind, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let (expr, id) = text.split_once('\0').unwrap_or((text, "web1.example.org"));
    let tgt = if kind & 0x80 != 0 {
        serde_json::from_str(expr).unwrap_or_else(|_| Value::String(expr.to_owned()))
    } else {
        Value::String(expr.to_owned())
    };
    let grains = json!({
        "os": "Debian",
        "roles": ["web", "db"],
        "num_cpus": 2,
        "ip_interfaces": {"eth0": ["10.0.0.1"]},
        "ipv4": ["10.0.0.1", "127.0.0.1"],
        "ipv6": ["::1", "fe80::1"],
        "nested": {"a": {"b": [1, {"c": "d"}]}},
    });
    let grains = grains.as_object().expect("an object");
    let tgt_type = TargetType::ALL[usize::from(kind & 0x7f) % TargetType::ALL.len()];
    let _ = matches(&tgt, tgt_type, id, grains);
});
