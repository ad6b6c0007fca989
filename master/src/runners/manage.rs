//! Runner `manage.*`: `manage.status`, `manage.up` and `manage.down` ping
//! the fleet, `manage.versions` asks it `test.version` (the caller runs the
//! job; [`ManageTarget`] says whom, and [`manage_answer`] shapes what came
//! back); `manage.present`, `list_state` and their kin (and the `not_`
//! ones) read who is connected from the registry, sending nothing
//! ([`presence`]).

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::binding::{BadCall, Bound, jid_text};
use crate::bus::{BusError, Conn};
use crate::jobs;
use crate::pki::{KeyState, Pki};
use maid_salt::python::truthy;

/// Whom `manage.status`/`up`/`down` ping, from their bound arguments:
/// `tgt` (default `*`), `tgt_type` (default `glob`) and `timeout` in
/// seconds when one is given (a number, or a string that reads as one).
pub struct ManageTarget {
    pub tgt: Value,
    pub tgt_type: crate::target::TargetType,
    pub timeout: Option<f64>,
}

impl ManageTarget {
    pub fn of(bound: &Bound) -> Result<ManageTarget, crate::target::TargetError> {
        let tgt_type = bound
            .get("tgt_type")
            .and_then(Value::as_str)
            .unwrap_or("glob");
        let timeout = bound.get("timeout").and_then(|t| {
            t.as_f64()
                .or_else(|| t.as_str().and_then(|s| s.parse().ok()))
        });
        Ok(ManageTarget {
            tgt: bound.get("tgt").cloned().unwrap_or(json!("*")),
            tgt_type: crate::target::TargetType::parse(tgt_type)?,
            timeout: timeout.filter(|t| t.is_finite() && *t > 0.0),
        })
    }
}

/// `manage`'s split of the `selected` minions of a `test.ping` job into
/// those that returned (up) and the rest (down), each sorted.
pub fn up_down(
    selected: &std::collections::BTreeSet<String>,
    report: &jobs::Report,
) -> (Vec<String>, Vec<String>) {
    let up: std::collections::BTreeSet<String> =
        report.returns.iter().map(|r| r.id.clone()).collect();
    let down = selected.difference(&up).cloned().collect();
    (up.into_iter().collect(), down)
}

/// The runners that list the minions Salt's presence detection finds
/// connected (all `list_state` in Salt 3008).
const PRESENCE: [&str; 6] = [
    "manage.list_state",
    "manage.present",
    "manage.joined",
    "manage.allowed",
    "manage.alived",
    "manage.reaped",
];

/// Their `not_` twins (all `list_not_state`): accepted minions that are
/// not connected.
const NOT_PRESENT: [&str; 6] = [
    "manage.list_not_state",
    "manage.not_present",
    "manage.not_joined",
    "manage.not_allowed",
    "manage.not_alived",
    "manage.not_reaped",
];

/// Whether `fun` is one of the presence runners ([`presence`]).
pub fn is_presence(fun: &str) -> bool {
    PRESENCE.contains(&fun) || NOT_PRESENT.contains(&fun)
}

/// Salt's `manage.list_state` and `list_not_state` (and the names that
/// call them), from the registry: a maid is connected while its alive key
/// lives, as are the minions its syndic lists beneath it. `show_ip` names
/// the address each connects from: its first address that is not
/// loopback (`ipv4`, then `ipv6` grains), as Salt finds a local minion's.
/// The not-connected are the accepted minions (the key store's, or every
/// registered maid without one) that are not connected, `subset` keeping
/// those it names.
pub async fn presence(
    conn: &mut Conn,
    pki: Option<&Pki>,
    fun: &str,
    bound: &Bound,
) -> Result<Result<Value, BadCall>, BusError> {
    let registry = jobs::Registry::read(conn, pki).await?;
    let show_ip = bound.get("show_ip").is_some_and(truthy);
    let subset = bound.get("subset").filter(|v| truthy(v));
    // Python's `x in subset`: a list's items, or a string's substrings.
    let in_subset = |id: &str| match subset {
        None => true,
        Some(Value::Array(items)) => items.iter().any(|i| i.as_str() == Some(id)),
        Some(Value::String(s)) => s.contains(id),
        Some(other) => jid_text(other) == id,
    };
    let address = |grains: &Map<String, Value>| -> Option<String> {
        ["ipv4", "ipv6"].iter().find_map(|key| {
            grains
                .get(*key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .find(|a| !a.starts_with("127.") && *a != "::1")
                .map(str::to_string)
        })
    };
    let mut connected: BTreeMap<String, Option<String>> = BTreeMap::new();
    for (id, (alive, reg)) in &registry.maids {
        if *alive {
            connected.insert(id.clone(), reg.as_ref().and_then(|r| address(&r.grains)));
        }
    }
    for (id, (syndic, reg)) in &registry.beneath {
        if connected.contains_key(syndic) {
            connected.insert(id.clone(), address(&reg.grains));
        }
    }
    // With a subset, only those it names are looked for (Salt iterates
    // the subset itself).
    let listed: Vec<(String, Option<String>)> = match subset {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .filter_map(|id| connected.get(id).map(|ip| (id.to_string(), ip.clone())))
            .collect(),
        _ => connected.clone().into_iter().collect(),
    };
    if PRESENCE.contains(&fun) {
        return Ok(Ok(if show_ip {
            Value::Object(
                listed
                    .into_iter()
                    .map(|(id, ip)| (id, json!(ip.unwrap_or_default())))
                    .collect(),
            )
        } else {
            json!(listed.into_iter().map(|(id, _)| id).collect::<Vec<_>>())
        }));
    }
    let accepted: Vec<String> = match pki {
        Some(pki) => pki
            .list()
            .map(|mut l| l.remove(&KeyState::Accepted).unwrap_or_default())
            .unwrap_or_default(),
        None => registry.maids.keys().cloned().collect(),
    };
    Ok(Ok(json!(
        accepted
            .into_iter()
            .filter(|id| !connected.contains_key(id) && in_subset(id))
            .collect::<Vec<_>>()
    )))
}

/// What each of the `selected` minions returned in `report`, and those
/// that did not, sorted: what `manage.versions` and `jobs.active` read.
pub fn answered(
    selected: &std::collections::BTreeSet<String>,
    report: &jobs::Report,
) -> (BTreeMap<String, Value>, Vec<String>) {
    let returns: BTreeMap<String, Value> = report
        .returns
        .iter()
        .map(|r| (r.id.clone(), r.ret.clone()))
        .collect();
    let missing = selected
        .iter()
        .filter(|id| !returns.contains_key(*id))
        .cloned()
        .collect();
    (returns, missing)
}

/// `manage.versions` from what `test.version` returned (`versions`, by
/// minion) and the minions that did not answer (`offline`), against the
/// master's `master` version: Salt's labels, each minion under the one
/// its version earns, and the master's own.
pub fn versions_answer(
    master: &str,
    versions: &BTreeMap<String, Value>,
    offline: &[String],
) -> Value {
    let mut out = Map::new();
    let mut put = |label: &str, id: &str, v: Value| {
        out.entry(label)
            .or_insert_with(|| Value::Object(Map::new()))
            .as_object_mut()
            .expect("labels hold objects")
            .insert(id.to_string(), v);
    };
    for (id, version) in versions {
        let text = version.as_str().unwrap_or_default();
        let label = match version_cmp(text, master) {
            std::cmp::Ordering::Less => "Minion requires update",
            std::cmp::Ordering::Equal => "Up to date",
            std::cmp::Ordering::Greater => "Minion newer than master",
        };
        put(label, id, Value::String(text.to_string()));
    }
    for id in offline {
        put("Minion offline", id, Value::Bool(false));
    }
    out.insert("Master".into(), Value::String(master.to_string()));
    Value::Object(out)
}

/// Two versions compared as their dotted numbers (`0.10.0` after
/// `0.9.1`); a part that is no number counts as 0.
fn version_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    let parts = |v: &str| -> Vec<u64> { v.split('.').map(|p| p.parse().unwrap_or(0)).collect() };
    let (a, b) = (parts(a), parts(b));
    let n = a.len().max(b.len());
    (0..n)
        .map(|i| {
            (
                a.get(i).copied().unwrap_or(0),
                b.get(i).copied().unwrap_or(0),
            )
        })
        .map(|(x, y)| x.cmp(&y))
        .find(|o| o.is_ne())
        .unwrap_or(std::cmp::Ordering::Equal)
}

/// `manage.status`, `up`, `down` or `versions` from the job it ran
/// ([`super::asks`]) on the `selected` minions: Salt's answer, against
/// this master's version for `versions`.
pub fn answer(
    fun: &str,
    selected: &std::collections::BTreeSet<String>,
    report: &jobs::Report,
) -> Value {
    if fun == "manage.versions" {
        let (returns, missing) = answered(selected, report);
        // The master answers as the Salt release it implements, as its
        // maids' `test.version` does: consoles compare the two.
        return versions_answer(maid_salt::SALT_VERSION, &returns, &missing);
    }
    let (up, down) = up_down(selected, report);
    manage_answer(fun, up, down)
}

/// `manage.status`, `manage.up` or `manage.down` from a ping's outcome:
/// the minions that answered and those expected that did not, sorted.
pub fn manage_answer(fun: &str, up: Vec<String>, down: Vec<String>) -> Value {
    match fun {
        "manage.up" => json!(up),
        "manage.down" => json!(down),
        _ => json!({"up": up, "down": down}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_labelled_as_salts_manage_versions_labels_them() {
        let versions = BTreeMap::from([
            ("old".to_string(), json!("0.0.9")),
            ("same".to_string(), json!("0.1.0")),
            ("new".to_string(), json!("0.10.0")),
        ]);
        assert_eq!(
            versions_answer("0.1.0", &versions, &["gone".to_string()]),
            json!({
                "Master": "0.1.0",
                "Minion newer than master": {"new": "0.10.0"},
                "Minion offline": {"gone": false},
                "Minion requires update": {"old": "0.0.9"},
                "Up to date": {"same": "0.1.0"},
            })
        );
    }
}
