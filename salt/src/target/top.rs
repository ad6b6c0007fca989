//! `confirm_top`: how a top file's target selects a minion, for the
//! state system's top file (on the minion) and pillar's (on the master).

use super::*;

/// Salt's `confirm_top`: does top file target `tgt`, with its items
/// `data` (a `- match:` item names the matcher; `compound` when none
/// does), select minion `id` with `grains`? `nodegroups` are the
/// master's. A matcher Salt does not have selects no one.
pub fn confirm_top(
    tgt: &str,
    data: &[Value],
    id: &str,
    grains: &Map<String, Value>,
    nodegroups: &Map<String, Value>,
) -> bool {
    let mut matcher = "compound".to_string();
    for item in data {
        if let Some(x) = item.get("match") {
            matcher = python::str(x);
        }
    }
    let compound = |expr: String| {
        matches(&Value::String(expr), TargetType::Compound, id, grains).unwrap_or(false)
    };
    match matcher.as_str() {
        // `nodegroup_match`: a group the master defines, matched as the
        // compound words it stands for; any other name matches nothing.
        "nodegroup" => {
            nodegroups.contains_key(tgt) && compound(nodegroup_comp(tgt, nodegroups).join(" "))
        }
        // `compound_match` evaluates an `N@group` word in place.
        "compound" => compound(resolve_compound(tgt, nodegroups)),
        _ => {
            let Ok(kind) = TargetType::parse(&matcher) else {
                return false;
            };
            matches(&Value::String(tgt.to_string()), kind, id, grains).unwrap_or(false)
        }
    }
}
