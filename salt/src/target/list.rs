//! `list`: a comma-separated list of minion ids, or an array of them; and
//! the ids listed in a target, as the master reads them.

use serde_json::Value;

/// `list_match.match` on a string, exactly: the id between commas, at
/// either end of the list, or the whole of it. Nothing is trimmed, so
/// `web1, web2` names `web1` and ` web2`; `maid run -L` (as `salt -L`)
/// removes the spaces before it sends such a list.
pub(super) fn list_match(tgt: &str, id: &str) -> bool {
    tgt.contains(&format!(",{id},"))
        || tgt.starts_with(&format!("{id},"))
        || tgt.ends_with(&format!(",{id}"))
        || tgt == id
}

/// The ids a target names in lists, as Salt's master reads them to find
/// targeted minions it has no key for: a `list` target's ids (an array,
/// or a string split at commas), and the ids of a compound target's `L@`
/// words, except a word right after `not` (excluded, so not awaited).
pub fn listed_ids(tgt: &Value, tgt_type: &str) -> Vec<String> {
    let split = |s: &str| -> Vec<String> {
        s.split(',')
            .filter(|m| !m.is_empty())
            .map(str::to_string)
            .collect()
    };
    match (tgt_type, tgt) {
        ("list", Value::String(s)) => split(s),
        ("list", Value::Array(items)) => items
            .iter()
            .filter_map(|i| i.as_str())
            .map(str::to_string)
            .collect(),
        ("compound", tgt) => {
            let words: Vec<&str> = match tgt {
                Value::String(s) => s.split_whitespace().collect(),
                Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
                _ => Vec::new(),
            };
            let mut ids = Vec::new();
            for (i, word) in words.iter().enumerate() {
                if let Some(list) = word.strip_prefix("L@")
                    && (i == 0 || words[i - 1] != "not")
                {
                    ids.extend(split(list));
                }
            }
            ids
        }
        _ => Vec::new(),
    }
}
