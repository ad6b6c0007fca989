//! Python's view of JSON values, as Salt's state code sees its dicts.

use serde_json::{Map, Value};

/// Python's `str()`.
pub fn py_str(v: &Value) -> String {
    maid_salt::python::str(v)
}

/// Python's `repr()`.
pub fn repr(v: &Value) -> String {
    maid_salt::python::repr(v)
}

/// Python's `bool()`.
pub fn truthy(v: &Value) -> bool {
    maid_salt::python::truthy(v)
}

/// `next(iter(d))`.
pub fn first_key(o: &Map<String, Value>) -> Option<String> {
    o.keys().next().cloned()
}

/// A key Salt's state system keeps for itself (`__sls__`, `__env__`, ...).
pub fn is_dunder(k: &str) -> bool {
    k.starts_with("__")
}

/// Python's `==`: numbers (and bools) by value, containers element by
/// element.
pub fn py_eq(a: &Value, b: &Value) -> bool {
    maid_salt::python::eq(a, b)
}

/// Python's `int(v)`, where it would not raise.
pub fn py_int(v: &Value) -> Option<i64> {
    match v {
        Value::Bool(b) => Some(i64::from(*b)),
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f.trunc() as i64)),
        Value::String(s) => {
            let t = s.trim().replace('_', "");
            let digits = t.strip_prefix(['+', '-']).unwrap_or(&t);
            (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
                .then(|| t.parse().ok())
                .flatten()
        }
        _ => None,
    }
}
