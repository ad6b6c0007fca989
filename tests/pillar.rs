//! Pillar sealed as PROTOCOL §8 says: a libsodium sealed box to the maid's
//! Ed25519 key converted to X25519. maid's sealing is checked against
//! libsodium itself (PyNaCl 1.5.0 in the Salt venv): what maid seals,
//! libsodium opens with the maid's converted key, and what libsodium
//! seals to that key, maid opens; a box sealed to another maid's key
//! opens on neither side.

use std::io::Write;
use std::process::{Command, Stdio};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Value, json};

use crate::common::salt::venv;
use maid_protocol::pillar;
use maid_protocol::trust;

/// libsodium, through PyNaCl: for each case, open `sealed` with the
/// Ed25519 key `seed`+`pk` converted to X25519 (`opened`, or null when it
/// does not open), and seal `plain` to the Ed25519 public key `pk`
/// (`sealed`).
const LIBSODIUM: &str = r#"
import base64, json, sys
from nacl import bindings as b
out = []
for case in json.load(sys.stdin):
    seed, pk = base64.b64decode(case["seed"]), base64.b64decode(case["pk"])
    curve_sk = b.crypto_sign_ed25519_sk_to_curve25519(seed + pk)
    curve_pk = b.crypto_sign_ed25519_pk_to_curve25519(pk)
    try:
        opened = b.crypto_box_seal_open(base64.b64decode(case["sealed"]), curve_pk, curve_sk)
        opened = json.loads(opened)
    except Exception:
        opened = None
    sealed = b.crypto_box_seal(case["plain"].encode(), curve_pk)
    out.append({"opened": opened, "sealed": base64.b64encode(sealed).decode()})
json.dump(out, sys.stdout)
"#;

fn libsodium(cases: &Value) -> Vec<Value> {
    let mut child = Command::new(venv().join("bin/python"))
        .args(["-c", LIBSODIUM])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run the venv's python");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(cases.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "PyNaCl failed");
    serde_json::from_slice::<Vec<Value>>(&out.stdout).expect("PyNaCl's answer")
}

#[test]
fn pillar_is_sealed_as_libsodium_seals_it() {
    let (web1, web2) = (trust::generate().unwrap(), trust::generate().unwrap());
    let data = json!({"db": {"password": "s3cret", "port": 5432}, "roles": ["web", "ünïcode"]});
    let data = data.as_object().unwrap().clone();
    let sealed = pillar::seal(&data, &web1.verifying_key()).unwrap();
    let case = |key: &ed25519_dalek::SigningKey| {
        json!({
            "seed": B64.encode(key.to_bytes()),
            "pk": B64.encode(key.verifying_key().as_bytes()),
            "sealed": B64.encode(&sealed),
            "plain": Value::Object(data.clone()).to_string(),
        })
    };
    let answers = libsodium(&json!([case(&web1), case(&web2)]));
    // maid's box opens in libsodium with web-1's key, not with web-2's.
    assert_eq!(answers[0]["opened"], Value::Object(data.clone()));
    assert_eq!(answers[1]["opened"], Value::Null);
    // libsodium's boxes open in maid with the key they were sealed to only.
    let theirs = |i: usize| B64.decode(answers[i]["sealed"].as_str().unwrap()).unwrap();
    assert_eq!(pillar::open(&theirs(0), &web1).unwrap(), data);
    assert_eq!(pillar::open(&theirs(1), &web2).unwrap(), data);
    assert!(pillar::open(&theirs(0), &web2).is_err());
}

/// A small deterministic generator (xorshift), so a failing case can be
/// run again.
struct Gen(u64);

impl Gen {
    fn next(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }

    /// A value as pillar SLS files hold them: mappings over few keys (so
    /// that two of them share some), lists, and scalars of each kind,
    /// `true` and `1` among them.
    fn value(&mut self, depth: u32) -> Value {
        match self.next(if depth == 0 { 5 } else { 9 }) {
            0 => json!(self.next(3)),
            1 => json!(["a", "b", "c"][self.next(3) as usize]),
            2 => json!(self.next(2) == 0),
            3 => Value::Null,
            4 => json!(1.0),
            5 | 6 => Value::Object(self.map(depth - 1)),
            7 => Value::Array((0..self.next(3)).map(|_| self.value(depth - 1)).collect()),
            // Lists of scalars mostly, so that two share items.
            _ => Value::Array((0..self.next(4)).map(|_| self.value(0)).collect()),
        }
    }

    /// A mapping over some of `a`'s keys, each value of the same kind as
    /// `a`'s (a list for a list, a mapping like it for a mapping), as two
    /// SLS files for one minion often are.
    fn like(&mut self, a: &serde_json::Map<String, Value>) -> serde_json::Map<String, Value> {
        let mut out = serde_json::Map::new();
        for (k, v) in a {
            if self.next(3) == 0 {
                continue;
            }
            let v = match v {
                Value::Object(m) => Value::Object(self.like(m)),
                Value::Array(_) => Value::Array((0..self.next(4)).map(|_| self.value(0)).collect()),
                _ => self.value(1),
            };
            out.insert(k.clone(), v);
        }
        out.extend(self.map(1));
        out
    }

    fn map(&mut self, depth: u32) -> serde_json::Map<String, Value> {
        (0..self.next(4))
            .map(|_| {
                let key = ["k", "db", "roles"][self.next(3) as usize];
                (key.to_string(), self.value(depth))
            })
            .collect()
    }
}

/// Pillar merged as Salt's `salt.utils.dictupdate.merge` merges it, on
/// 400 generated pairs of mappings (and three written out), under every strategy maid has, with
/// and without `merge_lists`, and as `smart` reads the renderer.
#[test]
fn pillar_merges_as_salts_dictupdate_merges_it() {
    let mut g = Gen(0x9e37_79b9_7f4a_7c15);
    // Written out: lists merged without what they hold (`True` is `1` to
    // Python), a list over a mapping, `list` pairing values.
    let mut cases = vec![
        json!({"a": {"k": [1, 2, true]}, "b": {"k": [2, 3, 1, 1.0]}, "strategy": "smart",
               "renderer": "jinja|yaml", "merge_lists": true}),
        json!({"a": {"k": {"x": 1}}, "b": {"k": [1]}, "strategy": "recurse",
               "renderer": "yaml", "merge_lists": true}),
        json!({"a": {"k": 1, "x": 2}, "b": {"k": 3}, "strategy": "list",
               "renderer": "yaml", "merge_lists": false}),
    ];
    for i in 0..400 {
        let strategy = ["smart", "recurse", "list", "overwrite", "none", "bogus"][i % 6];
        let a = g.map(3);
        let b = if i % 2 == 0 { g.like(&a) } else { g.map(3) };
        cases.push(json!({
            "a": Value::Object(a.clone()),
            "b": Value::Object(b),
            "strategy": strategy,
            "renderer": if i % 7 == 0 { "yaml" } else { "jinja|yaml" },
            "merge_lists": i % 3 == 0,
        }));
    }
    let salt = crate::common::salt::oracle("merging", &json!({ "cases": cases }));
    let salt = salt.as_array().expect("the oracle answers a list");
    let mut differ = Vec::new();
    for (case, salt) in cases.iter().zip(salt) {
        let obj = |k: &str| case[k].as_object().unwrap().clone();
        let maid = maid_salt::dictupdate::merge(
            &obj("a"),
            &obj("b"),
            case["strategy"].as_str().unwrap(),
            case["renderer"].as_str().unwrap(),
            case["merge_lists"].as_bool().unwrap(),
        );
        let maid = maid.map_or(json!({"error": "unsupported"}), |m| json!({"merged": m}));
        if &maid != salt {
            differ.push(format!("{case}\n  salt: {salt}\n  maid: {maid}"));
        }
    }
    assert!(
        differ.is_empty(),
        "{} of {} merges differ from Salt's:\n{}",
        differ.len(),
        cases.len(),
        differ
            .iter()
            .take(5)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}
