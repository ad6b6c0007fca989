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
