//! `salt.utils.dictupdate`: how Salt merges pillar — one SLS's data over
//! the pillar so far (`pillar_source_merging_strategy`), and inline
//! `pillar=` over a minion's pillar.

use serde_json::{Map, Value};

/// `dictupdate.update(dest, upd, merge_lists=…)`: `upd` merged into
/// `dest`, mappings recursively; a list over a list replaces it, or with
/// `merge_lists` gains the items of `upd`'s that it does not hold yet;
/// anything else replaces.
pub fn update(dest: &mut Map<String, Value>, upd: &Map<String, Value>, merge_lists: bool) {
    for (key, val) in upd {
        match (dest.get_mut(key), val) {
            (Some(Value::Object(sub)), Value::Object(val)) => update(sub, val, merge_lists),
            (Some(Value::Array(have)), Value::Array(val)) if merge_lists => {
                let added: Vec<Value> = val
                    .iter()
                    .filter(|x| !have.iter().any(|h| crate::python::eq(h, x)))
                    .cloned()
                    .collect();
                have.extend(added);
            }
            _ => {
                dest.insert(key.clone(), val.clone());
            }
        }
    }
}

/// `dictupdate.merge(obj_a, obj_b, strategy, renderer, merge_lists)`:
/// `b` merged over `a` as `strategy` says — `smart` (Salt's default:
/// `recurse`, as maid has no `yamlex` renderer), `recurse`, `list`,
/// `overwrite`, `none`; another name falls back to `recurse`, as Salt's
/// (which warns). `None` for `aggregate`, which needs `yamlex`.
pub fn merge(
    a: &Map<String, Value>,
    b: &Map<String, Value>,
    strategy: &str,
    renderer: &str,
    merge_lists: bool,
) -> Option<Map<String, Value>> {
    let yamlex = renderer.rsplit('|').next() == Some("yamlex") || renderer.starts_with("yamlex_");
    let strategy = match strategy {
        "smart" if yamlex => "aggregate",
        "smart" => "recurse",
        other => other,
    };
    match strategy {
        "aggregate" => None,
        "list" => Some(
            a.iter()
                .map(|(k, v)| match b.get(k) {
                    Some(w) => (k.clone(), Value::Array(vec![v.clone(), w.clone()])),
                    None => (k.clone(), v.clone()),
                })
                .collect(),
        ),
        // `merge_overwrite` first sets `a`'s keys that `b` has, then
        // recurses: the same as `recurse`, less the recursion into those.
        "overwrite" => {
            let mut merged = a.clone();
            for (k, v) in b {
                if merged.contains_key(k) {
                    merged.insert(k.clone(), v.clone());
                }
            }
            update(&mut merged, b, merge_lists);
            Some(merged)
        }
        // `none` merges too (one pillar source, nothing to log).
        "none" => {
            let mut merged = a.clone();
            update(&mut merged, b, false);
            Some(merged)
        }
        _ => {
            let mut merged = a.clone();
            update(&mut merged, b, merge_lists);
            Some(merged)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn recurse_merges_mappings_and_replaces_the_rest() {
        let a = obj(json!({"x": {"p": 1, "q": [1, 2]}, "y": 1}));
        let b = obj(json!({"x": {"q": [2, 3], "r": 3}, "y": {"z": 1}}));
        let m = merge(&a, &b, "smart", "jinja|yaml", false).unwrap();
        assert_eq!(
            Value::Object(m),
            json!({"x": {"p": 1, "q": [2, 3], "r": 3}, "y": {"z": 1}})
        );
        let m = merge(&a, &b, "recurse", "yaml", true).unwrap();
        assert_eq!(m["x"]["q"], json!([1, 2, 3]));
        assert_eq!(merge(&a, &b, "aggregate", "yaml", false), None);
        assert_eq!(merge(&a, &b, "smart", "jinja|yamlex", false), None);
    }
}
