//! A message off a master topic, as the agent decodes it: JSON, the
//! signed-envelope checks, the job fields and `fun_args`. Any input must end
//! in a job or a refusal, never a panic.
//!
//! The first byte picks the path: even, the rest is the message itself
//! (checked with and without required signatures); odd, the rest is a job
//! payload that is signed with the trusted key first, so the checks behind
//! a valid signature (topic, clock skew, job decoding) are explored too.
//! Each message is checked at the clock's ends as well as at a plain time,
//! and a job's `timeout` is turned into its time limit: numbers at their
//! extremes (seeds `extremes*`) must be refused, never overflow.
#![no_main]

use ed25519_dalek::SigningKey;
use libfuzzer_sys::fuzz_target;
use maid_protocol::protocol::Job;
use maid_protocol::trust::{self, Verifier};
use serde_json::Value;

const NOW_MS: i64 = 1_700_000_000_000;
/// The master topic the message arrived on.
const TOPIC: &str = "master-1";

fuzz_target!(|data: &[u8]| {
    let Some((&path, rest)) = data.split_first() else {
        return;
    };
    let key = SigningKey::from_bytes(&[7; 32]);
    let verifier = |require_signed| Verifier {
        keys: vec![(trust::key_id(&key.verifying_key()), key.verifying_key())],
        require_signed,
        max_skew_ms: 60_000,
    };
    if path % 2 == 1 {
        let Ok(payload) = std::str::from_utf8(rest) else {
            return;
        };
        let envelope = trust::sign(payload.to_owned(), &key);
        let msg = serde_json::to_value(envelope).expect("an envelope serialises");
        decode(&verifier(true), msg);
        return;
    }
    let Ok(msg) = serde_json::from_slice::<Value>(rest) else {
        return;
    };
    decode(&verifier(false), msg.clone());
    decode(&verifier(true), msg);
});

fn decode(verifier: &Verifier, msg: Value) {
    // The clock's ends too: the skew check must not overflow.
    for now in [NOW_MS, i64::MIN, i64::MAX] {
        if let Ok(opened) = verifier.open(msg.clone(), TOPIC, now)
            && let Ok(job) = Job::from_value(opened.job)
        {
            let _ = job.return_json("m", &Value::Null, 0, "");
            // Where a job's number meets a duration.
            let _ = job.time_limit();
        }
    }
}
