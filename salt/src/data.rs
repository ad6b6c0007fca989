//! `salt.utils.data`: reading nested data as Salt does (grain and
//! pillar targets, `grains.get`, `pillar.get`).

use serde_json::{Map, Value};

/// `salt.utils.data.traverse_dict_and_list`: follow `key` down through
/// objects and arrays (an array step is an index, negative from the end, or
/// else a key of the first embedded object that has it). `None` is Salt's
/// default: not found, or a step into a string, number or null (Python's
/// `TypeError`, which Salt catches).
pub fn traverse<'a>(data: &'a Map<String, Value>, key: &str, delimiter: &str) -> Option<&'a Value> {
    let mut parts = key.split(delimiter);
    let mut ptr = data.get(parts.next()?)?;
    for part in parts {
        ptr = match ptr {
            Value::Object(map) => map.get(part)?,
            Value::Array(items) => match py_int(part) {
                // Embedded dicts are searched with the int first, but JSON
                // keys are strings, so only the index can succeed.
                Some(idx) => {
                    let len = i128::try_from(items.len()).ok()?;
                    let idx = if idx < 0 { idx + len } else { idx };
                    items.get(usize::try_from(idx).ok()?)?
                }
                None => items
                    .iter()
                    .filter_map(Value::as_object)
                    .find_map(|map| map.get(part))?,
            },
            _ => return None,
        };
    }
    Some(ptr)
}

/// Python's `int(s)` for ASCII input: surrounding whitespace, a sign, and
/// single underscores between digits.
pub fn py_int(s: &str) -> Option<i128> {
    let s = s.trim();
    let (neg, digits) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if digits.is_empty()
        || digits.starts_with('_')
        || digits.ends_with('_')
        || digits.contains("__")
        || !digits.chars().all(|c| c.is_ascii_digit() || c == '_')
    {
        return None;
    }
    // Too large to index anything: saturate, the lookup then misses.
    let value = digits
        .chars()
        .filter(char::is_ascii_digit)
        .try_fold(0i128, |acc, c| {
            acc.checked_mul(10)?
                .checked_add(i128::from(c.to_digit(10)?))
        })
        .unwrap_or(i128::MAX);
    Some(if neg { -value } else { value })
}
