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
