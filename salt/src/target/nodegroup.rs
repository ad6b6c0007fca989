//! Nodegroups: the master expands `-N group` and `N@group` words before it
//! publishes (`salt.utils.minions.nodegroup_comp` and the compound
//! resolution of `LocalClient._prep_pub`), so minions never see them.

use std::collections::HashSet;

use serde_json::{Map, Value};

use crate::python;

const OPERATORS: [&str; 5] = ["and", "or", "not", "(", ")"];

/// The words `nodegroup` stands for in `groups` (the master's
/// `nodegroups`: each a compound string or a list of words), as
/// `nodegroup_comp` gives them. Empty when the group is unknown, not a
/// string or list, or names itself: Salt logs those and matches nothing.
pub fn nodegroup_comp(nodegroup: &str, groups: &Map<String, Value>) -> Vec<String> {
    comp(nodegroup, groups, &mut HashSet::new(), true)
}

fn comp(
    nodegroup: &str,
    groups: &Map<String, Value>,
    skip: &mut HashSet<String>,
    first_call: bool,
) -> Vec<String> {
    if skip.contains(nodegroup) {
        return Vec::new();
    }
    let words: Vec<String> = match groups.get(nodegroup) {
        Some(Value::String(s)) => super::compound::py_split(s)
            .into_iter()
            .map(String::from)
            .collect(),
        Some(Value::Array(items)) => items.iter().map(python::str).collect(),
        _ => return Vec::new(),
    };
    skip.insert(nodegroup.to_string());
    let mut ret = Vec::new();
    let mut expanded = false;
    for word in &words {
        if OPERATORS.contains(&word.as_str()) {
            ret.push(word.clone());
        } else if word.chars().count() >= 3
            && let Some(inner) = word.strip_prefix("N@")
        {
            expanded = true;
            ret.extend(comp(inner, groups, skip, false));
        } else {
            ret.push(word.clone());
        }
    }
    if !ret.is_empty() {
        ret.insert(0, "(".into());
        ret.push(")".into());
    }
    skip.remove(nodegroup);
    if expanded || !first_call {
        if !first_call && let Some(joined) = regex_or_list(&words) {
            return vec![joined];
        }
        return ret;
    }
    regex_or_list(&words).map_or(words, |joined| vec![joined])
}

/// `_nodegroup_regex`: a group of plain names (no operators, no `*`, no
/// engine) is an `L@` list, or an `E@` regex when a name holds a regex
/// character.
fn regex_or_list(words: &[String]) -> Option<String> {
    if words.iter().any(|w| OPERATORS.contains(&w.as_str())) {
        return None;
    }
    let engine = |w: &str| {
        let mut c = w.chars();
        matches!((c.next(), c.next()), (Some(l), Some('@')) if l.is_ascii_uppercase())
    };
    if words.iter().any(|w| w.contains('*') || engine(w)) {
        return None;
    }
    let regex = words
        .iter()
        .any(|w| w.contains(['(', '[', '{', '\\', '?', '}', ']', ')']));
    Some(format!(
        "{}@{}",
        if regex { 'E' } else { 'L' },
        words.join(",")
    ))
}

/// Why a `nodegroup` target cannot be expanded.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NodegroupError {
    /// The target is not one group's name.
    #[error("a nodegroup target names one group")]
    NotAName,
    /// The master defines no such group.
    #[error("Node group {0} unavailable")]
    Unknown(String),
}

/// A target as the master publishes it (`LocalClient._prep_pub`): a
/// `nodegroup` target becomes its group's compound words, `N@` words of a
/// compound string are replaced, any other target stays as it is.
pub fn expand_nodegroups<'t>(
    tgt: Value,
    tgt_type: &'t str,
    groups: &Map<String, Value>,
) -> Result<(Value, &'t str), NodegroupError> {
    match (tgt_type, &tgt) {
        ("nodegroup", Value::String(name)) if groups.contains_key(name) => Ok((
            Value::String(nodegroup_comp(name, groups).join(" ")),
            "compound",
        )),
        ("nodegroup", Value::String(name)) => Err(NodegroupError::Unknown(name.clone())),
        ("nodegroup", _) => Err(NodegroupError::NotAName),
        ("compound", Value::String(expr)) => {
            Ok((Value::String(resolve_compound(expr, groups)), "compound"))
        }
        _ => Ok((tgt, tgt_type)),
    }
}

/// A compound target with every `N@group` word replaced by its words, as
/// the master resolves it before publishing.
pub fn resolve_compound(tgt: &str, groups: &Map<String, Value>) -> String {
    let mut words = Vec::new();
    for word in super::compound::py_split(tgt) {
        match word.strip_prefix("N@") {
            Some(group) if !group.is_empty() => words.extend(nodegroup_comp(group, groups)),
            _ => words.push(word.to_string()),
        }
    }
    words.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn expands_as_salt() {
        let groups = json!({"web": "web* or G@role:web", "dbs": ["db1", "db2"],
            "nest": "N@web and not N@dbs", "rx": ["db(1|2)", "x"], "self": "N@self or x"});
        let groups = groups.as_object().unwrap();
        let comp = |g: &str| nodegroup_comp(g, groups).join(" ");
        assert_eq!(comp("web"), "web* or G@role:web");
        assert_eq!(comp("dbs"), "L@db1,db2");
        assert_eq!(comp("nest"), "( ( web* or G@role:web ) and not L@db1,db2 )");
        assert_eq!(comp("rx"), "E@db(1|2),x");
        assert_eq!(comp("self"), "( or x )");
        assert_eq!(comp("missing"), "");
        assert_eq!(
            resolve_compound("N@dbs or app*", groups),
            "L@db1,db2 or app*"
        );
    }
}
