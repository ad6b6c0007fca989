//! Salt's `grains` module: the grains the agent detected and registered
//! (the same ones `-G` targets), read with Salt's rules for nested keys
//! (`pkg:apache`, list indexes, a `delimiter`), defaults and `filter_by`;
//! and set (`setval`, `setvals`, `set`, `append`, `remove`, `delval`,
//! `delkey`) through the host, which keeps them in the maid's grains file
//! and re-registers them at once. Reading needs no grant; setting needs
//! `set_grains`. The private `_core` detects the core grains for the
//! agent (see [`core`]), which is why the plugin asks for `fs-read` and
//! `exec`.

mod core;

use maid_sdk::data;
use maid_sdk::python::truthy;
use maid_sdk::salt::{fnmatch, is_true};
use maid_sdk::{Call, Capability, Error, Function, Plugin, export_plugin, function, host, python};
use serde::Deserialize;
use serde_json::{Map, Value, json};

struct Grains;

/// Salt's `DEFAULT_TARGET_DELIM`.
const DELIMITER: &str = ":";

/// Salt's `traverse_dict_and_list` over the grains ([`data::traverse`]);
/// `None` where Salt returns its default.
fn traverse<'a>(data: &'a Value, key: &str, delimiter: &str) -> Option<&'a Value> {
    if delimiter.is_empty() {
        // Python's `str.split('')` raises; Salt then gives up on the key.
        return None;
    }
    data::traverse(data.as_object()?, key, delimiter)
}

/// A key as the master sent it: a word the master read as a number is
/// looked up as text, which is what Salt's lookup of it comes to on grains
/// (their keys are strings).
fn key_text(key: &Value) -> Option<String> {
    match key {
        Value::String(s) => Some(s.clone()),
        _ => None,
    }
}

/// Salt's `_SANITIZERS`: what `sanitize=True` hides.
fn sanitize(key: &str, value: &Value) -> Option<Value> {
    let hidden = match key {
        "serialnumber" => {
            let s = python::str(value);
            let chars: Vec<char> = s.chars().collect();
            let keep = chars.len() * 3 / 4;
            let mut out: String = chars[..keep].iter().collect();
            out.push_str(&"X".repeat(chars.len() - keep));
            out
        }
        "domain" => "DOMAINNAME".into(),
        "fqdn" | "id" => "MINION.DOMAINNAME".into(),
        "host" | "localhost" | "nodename" => "MINION".into(),
        _ => return None,
    };
    Some(json!(hidden))
}

fn sanitized(mut map: Map<String, Value>) -> Map<String, Value> {
    for (k, v) in map.iter_mut() {
        if let Some(hidden) = sanitize(k, v) {
            *v = hidden;
        }
    }
    map
}

fn grains() -> Value {
    Value::Object(host::grains())
}

#[derive(Deserialize)]
struct Items {
    #[serde(default)]
    sanitize: Value,
}

#[derive(Deserialize)]
struct Get {
    key: Value,
    #[serde(default = "empty")]
    default: Value,
    #[serde(default = "default_delimiter")]
    delimiter: String,
    #[serde(default)]
    #[allow(dead_code)] // Salt's `ordered`: JSON objects keep their order anyway.
    ordered: Value,
}

/// `grains.get`'s and `grains.fetch`'s arguments.
const GET_ARGS: &[&str] = &["key", "default=\"\"", "delimiter=\":\"", "ordered=true"];

fn empty() -> Value {
    json!("")
}

fn default_delimiter() -> String {
    DELIMITER.into()
}

fn get(a: &Get) -> Value {
    let grains = grains();
    key_text(&a.key)
        .and_then(|k| traverse(&grains, &k, &a.delimiter).cloned())
        .unwrap_or_else(|| a.default.clone())
}

#[derive(Deserialize)]
struct Key {
    key: Value,
}

#[derive(Deserialize)]
struct Equals {
    key: Value,
    value: Value,
}

#[derive(Deserialize)]
struct FilterBy {
    lookup_dict: Value,
    #[serde(default = "os_family")]
    grain: String,
    #[serde(default)]
    merge: Value,
    #[serde(default = "default_key")]
    default: Value,
    #[serde(default)]
    base: Value,
}

fn os_family() -> String {
    "os_family".into()
}

fn default_key() -> Value {
    json!("default")
}

/// Salt's `salt.utils.dictupdate.update`: merge `upd` into `dest`,
/// recursively where both hold a dict under the same key.
fn update(dest: &mut Map<String, Value>, upd: &Map<String, Value>) {
    for (k, v) in upd {
        match (dest.get_mut(k), v) {
            (Some(Value::Object(d)), Value::Object(u)) => update(d, u),
            _ => {
                dest.insert(k.clone(), v.clone());
            }
        }
    }
}

/// Salt's `salt.utils.data.filter_by` over the grains.
fn filter_by(a: FilterBy) -> Result<Value, Error> {
    let Value::Object(lookup) = a.lookup_dict else {
        return Err(Error::bad_arguments("lookup_dict must be a dictionary"));
    };
    let grains = grains();
    let val = traverse(&grains, &a.grain, DELIMITER)
        .cloned()
        .unwrap_or(json!([]));
    let vals = match val {
        Value::Array(items) => items,
        other => vec![other],
    };
    let mut ret = vals.iter().find_map(|each| {
        let each = python::str(each);
        lookup
            .iter()
            .find(|(key, _)| fnmatch(&each, key))
            .map(|(_, v)| v.clone())
    });
    // A value of None counts as no match, as in Salt.
    if ret.as_ref().is_some_and(Value::is_null) {
        ret = None;
    }
    if ret.is_none() {
        ret = key_text(&a.default)
            .and_then(|k| lookup.get(&k).cloned())
            .filter(|v| !v.is_null());
    }
    if let Some(base) = key_text(&a.base).filter(|b| !b.is_empty())
        && let Some(base_values) = lookup.get(&base)
    {
        ret = match (ret, base_values) {
            (None, b) => Some(b.clone()),
            (Some(r), Value::Object(b)) => {
                let Value::Object(r) = r else {
                    return Err(Error::failed(
                        "filter_by default and look-up values must both be dictionaries.",
                        1,
                    ));
                };
                let mut merged = b.clone();
                update(&mut merged, &r);
                Some(Value::Object(merged))
            }
            (Some(r), _) => Some(r),
        };
    }
    if truthy(&a.merge) {
        let Value::Object(merge) = &a.merge else {
            return Err(Error::failed(
                "filter_by merge argument must be a dictionary.",
                1,
            ));
        };
        ret = match ret {
            None => Some(a.merge.clone()),
            Some(Value::Object(mut r)) => {
                update(&mut r, merge);
                Some(Value::Object(r))
            }
            Some(_) => {
                return Err(Error::failed(
                    "Cannot update using non-dict types in dictupdate.update()",
                    1,
                ));
            }
        };
    }
    Ok(ret.unwrap_or(Value::Null))
}

/// Salt's `setvals`: each key set (or, destructive with None, removed) in
/// the grains file and in the live grains, which targeting sees at once.
fn setvals(grains: &Value, destructive: bool) -> Result<Value, Error> {
    let Value::Object(new) = grains else {
        return Err(Error::failed("setvals grains must be a dictionary.", 1));
    };
    for (key, val) in new {
        if val.is_null() && destructive {
            host::set_grain(key, None)?;
        } else {
            host::set_grain(key, Some(val))?;
        }
    }
    Ok(grains.clone())
}

fn setval(key: &str, val: Value, destructive: bool) -> Result<Value, Error> {
    setvals(&one(key, val), destructive)
}

/// `{key: value}`.
fn one(key: &str, value: Value) -> Value {
    let mut m = Map::new();
    m.insert(key.to_string(), value);
    Value::Object(m)
}

/// Whether a value is a dict or a list (Salt's "complex").
fn complex(v: &Value) -> bool {
    v.is_object() || v.is_array()
}

/// Salt's `grains.set`: the value at KEY (nested with DELIMITER), with
/// its rules for overwriting dicts and lists (`force`).
fn set(
    key: &str,
    val: Value,
    force: bool,
    destructive: bool,
    delimiter: &str,
) -> Result<Value, Error> {
    let mut ret = json!({"comment": "", "changes": {}, "result": true});
    let grains = grains();
    let existing = traverse(&grains, key, delimiter).cloned();
    if let Some(e) = &existing
        && *e == val
        && (!val.is_null() || !destructive)
    {
        ret["comment"] = json!("Grain is already set");
        return Ok(ret);
    }
    let exists_not_null = existing.as_ref().is_some_and(|e| !e.is_null());
    if exists_not_null && !force {
        let e = existing.as_ref().unwrap_or(&Value::Null);
        if complex(e) {
            ret["comment"] = json!(format!(
                "The key '{key}' exists but is a dict or a list. Use 'force=True' to overwrite."
            ));
            ret["result"] = json!(false);
            return Ok(ret);
        }
        if complex(&val) {
            ret["comment"] = json!(format!(
                "The key '{key}' exists and the given value is a dict or a list. \
                 Use 'force=True' to overwrite."
            ));
            ret["result"] = json!(false);
            return Ok(ret);
        }
    }
    let mut value = val;
    let mut key = key.to_string();
    while !delimiter.is_empty() && key.contains(delimiter) {
        let (head, rest) = key.rsplit_once(delimiter).unwrap_or_default();
        let (head, rest) = (head.to_string(), rest.to_string());
        let current = traverse(&grains, &head, delimiter).cloned();
        let updated = match current {
            None => {
                let mut m = Map::new();
                if !(value.is_null() && destructive) {
                    m.insert(rest.clone(), value.clone());
                }
                Value::Object(m)
            }
            Some(Value::Object(mut m)) => {
                if value.is_null() && destructive {
                    m.remove(&rest);
                } else {
                    m.insert(rest.clone(), value.clone());
                }
                Value::Object(m)
            }
            Some(Value::Array(mut items)) => {
                let mut updated = false;
                for item in items.iter_mut() {
                    if item.as_str() == Some(rest.as_str()) {
                        *item = one(&rest, value.clone());
                        updated = true;
                    } else if let Some(m) = item.as_object_mut()
                        && m.contains_key(&rest)
                    {
                        m.insert(rest.clone(), value.clone());
                        updated = true;
                    }
                }
                if !updated {
                    items.push(one(&rest, value.clone()));
                }
                Value::Array(items)
            }
            Some(other) if other.as_str() == Some(rest.as_str()) || force => {
                one(&rest, value.clone())
            }
            Some(other) => {
                ret["comment"] = json!(format!(
                    "The key '{head}' value is '{}', which is different from the provided \
                     key '{rest}'. Use 'force=True' to overwrite.",
                    python::str(&other)
                ));
                ret["result"] = json!(false);
                return Ok(ret);
            }
        };
        value = updated;
        key = head;
    }
    ret["changes"] = setval(&key, value, destructive)?;
    Ok(ret)
}

#[derive(Deserialize)]
struct SetVals {
    grains: Value,
    #[serde(default)]
    destructive: bool,
    #[serde(default)]
    #[allow(dead_code)] // maid has no pillar to refresh.
    refresh_pillar: Value,
}

#[derive(Deserialize)]
struct SetVal {
    key: Value,
    val: Value,
    #[serde(default)]
    destructive: bool,
    #[serde(default)]
    #[allow(dead_code)] // maid has no pillar to refresh.
    refresh_pillar: Value,
}

#[derive(Deserialize)]
struct Append {
    key: Value,
    val: Value,
    #[serde(default)]
    convert: bool,
    #[serde(default = "default_delimiter")]
    delimiter: String,
}

#[derive(Deserialize)]
struct Set {
    key: Value,
    #[serde(default = "empty")]
    val: Value,
    #[serde(default)]
    force: bool,
    #[serde(default)]
    destructive: bool,
    #[serde(default = "default_delimiter")]
    delimiter: String,
}

#[derive(Deserialize)]
struct DelVal {
    key: Value,
    #[serde(default)]
    destructive: bool,
    #[serde(default)]
    force: bool,
}

/// Salt's `grains.append` and `grains.remove`: the list at KEY (nested
/// with DELIMITER) with VAL added or taken out, set back whole.
fn edit_list(a: Append, add: bool) -> Result<Value, Error> {
    let key = python::str(&a.key);
    let grains = grains();
    let mut list = traverse(&grains, &key, &a.delimiter)
        .cloned()
        .unwrap_or(json!([]));
    if add && a.convert && !list.is_array() {
        list = if list.is_null() {
            json!([])
        } else {
            json!([list])
        };
    }
    let Value::Array(mut items) = list else {
        return Ok(json!(format!("The key {key} is not a valid list")));
    };
    let shown = python::str(&a.val);
    if add {
        if items.contains(&a.val) {
            return Ok(json!(format!(
                "The val {shown} was already in the list {key}"
            )));
        }
        match a.val {
            Value::Array(vals) => items.extend(vals),
            other => items.push(other),
        }
    } else {
        let Some(at) = items.iter().position(|v| *v == a.val) else {
            return Ok(json!(format!("The val {shown} was not in the list {key}")));
        };
        items.remove(at);
    }
    let mut value = Value::Array(items);
    let mut key = key;
    while !a.delimiter.is_empty() && key.contains(&a.delimiter) {
        let (head, rest) = key.rsplit_once(&a.delimiter).unwrap_or_default();
        let (head, rest) = (head.to_string(), rest.to_string());
        let parent = traverse(&grains, &head, &a.delimiter).cloned();
        value = match parent {
            Some(Value::Object(mut m)) => {
                m.insert(rest, value);
                Value::Object(m)
            }
            None if add => one(&rest, value),
            Some(other) => other,
            None => Value::Null,
        };
        key = head;
    }
    setval(&key, value, false)
}

/// Return all of the minion's grains (sanitize=True hides host names and serials)
#[function(args = ["sanitize=false"])]
fn items(a: Items) -> Result<Map<String, Value>, Error> {
    let all = host::grains();
    Ok(if is_true(&a.sanitize) {
        sanitized(all)
    } else {
        all
    })
}

/// Return the grains named, as {key: value} (nested keys with ':')
#[function(raw, args = ["*args", "**kwargs"])]
fn item(call: &Call) -> Result<Map<String, Value>, Error> {
    let kw = |k: &str| call.kwargs.get(k).cloned();
    let default = kw("default").unwrap_or_else(empty);
    let delimiter = match kw("delimiter") {
        Some(Value::String(d)) => d,
        Some(_) => return Err(Error::bad_arguments("delimiter must be a string")),
        None => DELIMITER.into(),
    };
    let grains = grains();
    let mut ret = Map::new();
    for arg in &call.args {
        let name = python::str(arg);
        let value = key_text(arg)
            .and_then(|k| traverse(&grains, &k, &delimiter).cloned())
            .unwrap_or_else(|| default.clone());
        ret.insert(name, value);
    }
    Ok(if kw("sanitize").is_some_and(|v| is_true(&v)) {
        sanitized(ret)
    } else {
        ret
    })
}

/// Return a grain, nested keys with ':' (or DELIMITER); DEFAULT when absent
#[function(name = "get", args = GET_ARGS)]
fn get_(a: Get) -> Result<Value, Error> {
    Ok(get(&a))
}

/// The same as grains.get
#[function(args = GET_ARGS)]
fn fetch(a: Get) -> Result<Value, Error> {
    Ok(get(&a))
}

/// Return the names of the grains, sorted
#[function]
fn ls() -> Result<Vec<String>, Error> {
    let mut keys: Vec<String> = host::grains().keys().cloned().collect();
    keys.sort();
    Ok(keys)
}

/// Return whether a grain (nested keys with ':') exists
#[function(args = ["key"])]
fn has_value(a: Key) -> Result<bool, Error> {
    let grains = grains();
    Ok(key_text(&a.key).is_some_and(|k| traverse(&grains, &k, DELIMITER).is_some()))
}

/// Return whether a grain's value, as text, equals VALUE's
#[function(args = ["key", "value"])]
fn equals(a: Equals) -> Result<bool, Error> {
    let got = get(&Get {
        key: a.key,
        default: empty(),
        delimiter: default_delimiter(),
        ordered: Value::Null,
    });
    Ok(python::str(&a.value) == python::str(&got))
}

/// Return the LOOKUP_DICT entry whose key matches the GRAIN's value (default os_family)
#[function(
    name = "filter_by",
    args = [
        "lookup_dict",
        "grain=\"os_family\"",
        "merge=null",
        "default=\"default\"",
        "base=null",
    ]
)]
fn filter_by_(a: FilterBy) -> Result<Value, Error> {
    filter_by(a)
}

/// Set the grains of a dict (kept across restarts; None with destructive=True removes)
#[function(name = "setvals", args = ["grains", "destructive=false", "refresh_pillar=true"])]
fn setvals_(a: SetVals) -> Result<Value, Error> {
    setvals(&a.grains, a.destructive)
}

/// Set grain KEY to VAL (kept across restarts; targeting sees it at once)
#[function(name = "setval", args = ["key", "val", "destructive=false", "refresh_pillar=true"])]
fn setval_(a: SetVal) -> Result<Value, Error> {
    setval(&python::str(&a.key), a.val, a.destructive)
}

/// Append VAL to the list grain KEY (convert=True makes a list of a value)
#[function(args = ["key", "val", "convert=false", "delimiter=\":\""])]
fn append(a: Append) -> Result<Value, Error> {
    edit_list(a, true)
}

/// Remove VAL from the list grain KEY
#[function(args = ["key", "val", "delimiter=\":\""])]
fn remove(a: Append) -> Result<Value, Error> {
    edit_list(a, false)
}

/// Set grain KEY (nested with DELIMITER) to VAL; force=True overwrites a dict or list
#[function(
    name = "set",
    args = [
        "key",
        "val=\"\"",
        "force=false",
        "destructive=false",
        "delimiter=\":\"",
    ]
)]
fn set_(a: Set) -> Result<Value, Error> {
    set(
        &python::str(&a.key),
        a.val,
        a.force,
        a.destructive,
        &a.delimiter,
    )
}

/// Set grain KEY to None (destructive=True removes it)
#[function(args = ["key", "destructive=false", "force=false"])]
fn delval(a: DelVal) -> Result<Value, Error> {
    set(
        &python::str(&a.key),
        Value::Null,
        a.force,
        a.destructive,
        DELIMITER,
    )
}

/// Remove grain KEY
#[function(args = ["key", "force=false"])]
fn delkey(a: DelVal) -> Result<Value, Error> {
    set(&python::str(&a.key), Value::Null, a.force, true, DELIMITER)
}

impl Plugin for Grains {
    const MODULE: &'static str = "grains";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const CAPABILITIES: &'static [Capability] = &[Capability::FsRead, Capability::Exec];

    fn functions() -> Vec<Function> {
        maid_sdk::functions![
            items,
            item,
            get_,
            fetch,
            ls,
            has_value,
            equals,
            filter_by_,
            setvals_,
            setval_,
            append,
            remove,
            set_,
            delval,
            delkey,
            core::core_,
        ]
    }
}

export_plugin!(Grains);
