//! salt-api's `wheel` client: `key.list_all`, `key.list`,
//! `key.glob_match`, `key.accept`, `key.reject`, `key.delete`,
//! `key.finger`, `key.print` and `key.gen_accept` on the master's maid keys
//! ([`Pki`]), as `maid key` does, with Salt's return shapes. Arguments
//! arrive bound ([`crate::binding::bind`]).

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::binding::{BadCall, Bound, fnmatch, jid_text};
use crate::pki::{KeyState, Pki};
use crate::trust;
use maid_salt::python::truthy;

/// The key states as Salt's `list_keys` names them, each sorted as
/// `sorted_ignorecase`.
fn list_keys(pki: &Pki) -> Result<BTreeMap<&'static str, Vec<String>>, BadCall> {
    let listing = pki.list().map_err(|e| BadCall(e.to_string()))?;
    Ok(KeyState::ALL
        .into_iter()
        .map(|state| {
            let mut ids = listing.get(&state).cloned().unwrap_or_default();
            ids.sort_by_key(|id| id.to_lowercase());
            (state.dir(), ids)
        })
        .collect())
}

fn state_of(dir: &str) -> Option<KeyState> {
    KeyState::ALL.into_iter().find(|s| s.dir() == dir)
}

/// Salt's `Key.glob_match`: each state's ids `match` selects (a glob, a
/// comma-separated list of globs, or a list), the empty states left out.
fn glob_match(pki: &Pki, pattern: &Value) -> Result<Map<String, Value>, BadCall> {
    let patterns = match pattern {
        Value::Array(items) => items.iter().map(jid_text).collect(),
        Value::String(s) if s.contains(',') => s.split(',').map(str::to_string).collect(),
        other => vec![jid_text(other)],
    };
    let mut out = Map::new();
    for (status, ids) in list_keys(pki)? {
        let chosen: Vec<&String> = if patterns == ["*"] {
            ids.iter().collect()
        } else {
            ids.iter()
                .filter(|id| patterns.iter().any(|p| fnmatch(id, p)))
                .collect()
        };
        if !chosen.is_empty() {
            out.insert(status.into(), json!(chosen));
        }
    }
    Ok(out)
}

/// Wheel `minions.connected`: the minions connected now — each maid whose
/// alive key lives, and each minion an alive syndic maid lists — sorted
/// (Salt's comes from its presence check, in no set order).
pub fn connected(registry: &crate::registry::Registry) -> Value {
    let ids: std::collections::BTreeSet<&String> = registry
        .known(&|_| false)
        .map(|(id, _)| id)
        .chain(registry.beneath.keys())
        .filter(|id| registry.alive(id))
        .collect();
    json!(ids)
}

/// Run wheel function `fun` (bound by [`bind`]) on the key store.
pub fn wheel(pki: &Pki, fun: &str, bound: &Bound) -> Result<Value, BadCall> {
    match fun {
        "key.list_all" => key_list_all(pki),
        "key.list" => key_list(pki, bound),
        "key.glob_match" | "key.name_match" => Ok(Value::Object(glob_match(pki, &matched(bound))?)),
        "key.accept" | "key.reject" => key_move(pki, fun, bound),
        "key.delete" => key_delete(pki, bound),
        "key.finger" | "key.print" => key_show(pki, fun, bound),
        "key.gen_accept" => key_gen_accept(pki, bound),
        other => Err(BadCall(format!("'{other}' is not available"))),
    }
}

/// A wheel function's `match` argument (null when not bound).
fn matched(bound: &Bound) -> Value {
    bound.get("match").cloned().unwrap_or(Value::Null)
}

/// Whether the boolean argument `name` is set, by Python's truth.
fn flag(bound: &Bound, name: &str) -> bool {
    bound.get(name).is_some_and(truthy)
}

/// A key store failure as the function's answer.
fn pki_err(e: crate::pki::PkiError) -> BadCall {
    BadCall(e.to_string())
}

/// `key.list_all`: every state's ids, and Salt's `local`.
fn key_list_all(pki: &Pki) -> Result<Value, BadCall> {
    let mut out: Map<String, Value> = list_keys(pki)?
        .into_iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    // Salt lists the master's own keys here; maid's master key is
    // not kept in the key store.
    out.insert("local".into(), json!([]));
    Ok(Value::Object(out))
}

/// `key.list`: the ids in the one state `match` names by its prefix
/// (`acc`, `pre`/`un`, `rej`, `den`), or all of them (`all`); nothing for
/// any other.
fn key_list(pki: &Pki, bound: &Bound) -> Result<Value, BadCall> {
    let m = jid_text(&matched(bound));
    let all = list_keys(pki)?;
    let one = |dir: &str| json!({dir: all.get(dir).cloned().unwrap_or_default()});
    Ok(if m.starts_with("acc") {
        one("minions")
    } else if m.starts_with("pre") || m.starts_with("un") {
        one("minions_pre")
    } else if m.starts_with("rej") {
        one("minions_rejected")
    } else if m.starts_with("den") {
        one("minions_denied")
    } else if m.starts_with("all") {
        key_list_all(pki)?
    } else {
        json!({})
    })
}

/// `key.accept` or `key.reject`: move the pending keys `match` selects
/// (and, as the `include_` flags say, the rejected, accepted or denied
/// ones) and answer what `match` selects afterwards.
fn key_move(pki: &Pki, fun: &str, bound: &Bound) -> Result<Value, BadCall> {
    let (to, mut from) = if fun == "key.accept" {
        (KeyState::Accepted, vec![KeyState::Pending])
    } else {
        (KeyState::Rejected, vec![KeyState::Pending])
    };
    if fun == "key.accept" && flag(bound, "include_rejected") {
        from.push(KeyState::Rejected);
    }
    if fun == "key.reject" && flag(bound, "include_accepted") {
        from.push(KeyState::Accepted);
    }
    if flag(bound, "include_denied") {
        from.push(KeyState::Denied);
    }
    let selected = glob_match(pki, &matched(bound))?;
    for state in from {
        for id in selected
            .get(state.dir())
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            pki.transfer(id, state, to).map_err(pki_err)?;
        }
    }
    Ok(Value::Object(glob_match(pki, &matched(bound))?))
}

/// `key.delete`: delete every key `match` selects, in whatever state,
/// and answer what it selects afterwards.
fn key_delete(pki: &Pki, bound: &Bound) -> Result<Value, BadCall> {
    for (status, ids) in glob_match(pki, &matched(bound))? {
        let Some(state) = state_of(&status) else {
            continue;
        };
        for id in ids
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            pki.delete(state, id).map_err(pki_err)?;
        }
    }
    Ok(Value::Object(glob_match(pki, &matched(bound))?))
}

/// `key.finger` or `key.print`: each key `match` selects, by state, as
/// its fingerprint or its text.
fn key_show(pki: &Pki, fun: &str, bound: &Bound) -> Result<Value, BadCall> {
    let mut out = Map::new();
    for (status, ids) in glob_match(pki, &matched(bound))? {
        let Some(state) = state_of(&status) else {
            continue;
        };
        let mut keys = Map::new();
        for id in ids
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            let text = pki.key(state, id).map_err(pki_err)?.unwrap_or_default();
            let shown = if fun == "key.finger" {
                crate::pki::fingerprint(&text)
            } else {
                text
            };
            keys.insert(id.to_string(), json!(shown));
        }
        out.insert(status, Value::Object(keys));
    }
    Ok(Value::Object(out))
}

/// `key.gen_accept`: make a key pair for maid `id_`, accept its public
/// half, and answer both halves (nothing when `id_` has a key in any
/// state already and `force` is not set).
fn key_gen_accept(pki: &Pki, bound: &Bound) -> Result<Value, BadCall> {
    // A maid's key: Ed25519 (`keysize` is for RSA and not used),
    // in the files a maid reads (`minion.key`, `minion.pub`).
    let id = bound.get("id_").map(jid_text).unwrap_or_default();
    let key = trust::generate().map_err(|e| BadCall(e.to_string()))?;
    let public = trust::encode_verifying(&key.verifying_key());
    if !pki
        .accept_new(&id, &public, flag(bound, "force"))
        .map_err(pki_err)?
    {
        return Ok(json!({}));
    }
    Ok(json!({
        "pub": format!("{public}\n"),
        "priv": format!("{}\n", trust::encode_signing(&key)),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::binding::{Form, bind};

    #[test]
    fn wheel_key_functions_move_keys_as_salt_key() {
        let dir = tempfile::tempdir().unwrap();
        let pki = Pki::new(dir.path());
        let key = |n: u8| {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD.encode(
                ed25519_dalek::SigningKey::from_bytes(&[n; 32])
                    .verifying_key()
                    .as_bytes(),
            )
        };
        pki.submit("web1", &key(1)).unwrap();
        pki.submit("web2", &key(2)).unwrap();
        pki.submit("db1", &key(3)).unwrap();
        let call = |fun: &str, kw: Value| {
            let bound = bind(Form::Wheel, fun, vec![], kw.as_object().unwrap()).unwrap();
            wheel(&pki, fun, &bound).unwrap()
        };
        assert_eq!(
            call("key.list_all", json!({})),
            json!({"minions": [], "minions_denied": [], "minions_pre": ["db1", "web1", "web2"],
                   "minions_rejected": [], "local": []})
        );
        assert_eq!(
            call("key.accept", json!({"match": "web*"})),
            json!({"minions": ["web1", "web2"]})
        );
        assert_eq!(
            call("key.reject", json!({"match": "db1,web1"})),
            json!({"minions": ["web1"], "minions_rejected": ["db1"]})
        );
        assert_eq!(
            call("key.list", json!({"match": "acc"})),
            json!({"minions": ["web1", "web2"]})
        );
        let finger = call("key.finger", json!({"match": "web2"}));
        assert_eq!(
            finger["minions"]["web2"],
            json!(crate::pki::fingerprint(&key(2)))
        );
        assert_eq!(call("key.delete", json!({"match": "web2"})), json!({}));
        assert_eq!(
            call("key.glob_match", json!({"match": "*"})),
            json!({"minions": ["web1"], "minions_rejected": ["db1"]})
        );
    }
}
