//! Salt's `pillar` module: the pillar the master compiled for this minion,
//! sealed to this maid's key and pinned by the job (PROTOCOL §8), read
//! with Salt's rules for nested keys, defaults and merges. The host gives
//! it only to a plugin granted `pillar`; a job that carries none reads
//! `{}`. The master compiles a job's pillar afresh for every `pillar.*`
//! job (with its `saltenv`, `pillarenv` and inline `pillar=`), as Salt's
//! `pillar.items` does.
//!
//! As Salt 3008's, what `get`, `item` and `items` return is masked unless
//! `unmask=True` is passed (`salt.utils.secret.serial`: every non-empty
//! string and non-zero number or `True` reads `**********`); `raw` and
//! `keys` are not. A template's `salt['pillar.get']` reads plain values
//! (Salt unmasks while it renders): the state plugin asks with
//! `unmask=True`.

use maid_sdk::data::traverse;
use maid_sdk::python::truthy;
use maid_sdk::{Call, Error, Function, Plugin, export_plugin, function, host, python};
use serde_json::{Map, Value, json};

struct Pillar;

/// Salt's `DEFAULT_TARGET_DELIM`.
const DELIMITER: &str = ":";

fn pillar() -> Result<Map<String, Value>, Error> {
    host::pillar()
}

/// A Python exception the function raised, as a Salt minion returns it.
fn raised(class: &str, message: &str) -> Error {
    Error::failed(
        format!(
            "The minion function caused an exception: Traceback (most recent call last):\n{class}: {message}\n"
        ),
        1,
    )
}

/// Salt's `REDACT_PLACEHOLDER`.
const REDACTED: &str = "**********";

/// `salt.utils.secret.serial`: each leaf Python finds true (a non-empty
/// string, a non-zero number, `True`) redacted; containers kept.
fn serial(v: Value) -> Value {
    match v {
        Value::Object(o) => Value::Object(o.into_iter().map(|(k, v)| (k, serial(v))).collect()),
        Value::Array(a) => Value::Array(a.into_iter().map(serial).collect()),
        Value::Null => Value::Null,
        leaf if truthy(&leaf) => json!(REDACTED),
        leaf => leaf,
    }
}

/// The value as `unmask` (argument `pos`, else keyword) asks: plain when
/// it is true, masked when false; `None` (not given) is `default`.
fn shown(v: Value, call: &Call, pos: Option<usize>, default: bool) -> Value {
    let asked = match pos {
        Some(pos) => kw(call, pos, "unmask"),
        None => call.kwargs.get("unmask"),
    };
    let plain = match asked {
        None | Some(Value::Null) => default,
        Some(v) => truthy(v),
    };
    if plain { v } else { serial(v) }
}

fn kw<'a>(call: &'a Call, pos: usize, name: &str) -> Option<&'a Value> {
    call.kwargs.get(name).or_else(|| call.args.get(pos))
}

/// A key as `traverse_dict_and_list` reads it: a string split at the
/// delimiter; an int, one step (looked up as text: JSON keys are text).
fn key_text(key: &Value) -> Option<String> {
    match key {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) if n.is_i64() || n.is_u64() => Some(n.to_string()),
        _ => None,
    }
}

fn lookup(pillar: &Map<String, Value>, key: &Value, delimiter: &str) -> Option<Value> {
    let key = key_text(key)?;
    if delimiter.is_empty() {
        return None;
    }
    traverse(pillar, &key, delimiter).cloned()
}

fn delimiter(v: Option<&Value>) -> String {
    match v {
        Some(Value::Null) | None => DELIMITER.into(),
        Some(v) => python::str(v),
    }
}

/// `pillar.get`'s and `pillar.fetch`'s arguments.
const GET_ARGS: &[&str] = &[
    "key",
    "default=KeyError",
    "merge=false",
    "merge_nested_lists=None",
    "delimiter=\":\"",
    "pillarenv=None",
    "saltenv=None",
    "unmask=None",
];

fn get(call: &Call) -> Result<Value, Error> {
    let Some(key) = kw(call, 0, "key") else {
        return Err(Error::bad_arguments(
            "get() missing 1 required positional argument: 'key'",
        ));
    };
    let pillar = pillar()?;
    // Salt's NOT_SET, without `pillar_raise_on_missing`: the empty string.
    let default = kw(call, 1, "default").cloned().unwrap_or(json!(""));
    let merge = kw(call, 2, "merge").is_some_and(truthy);
    let merge_lists = kw(call, 3, "merge_nested_lists").is_some_and(truthy);
    let delimiter = delimiter(kw(call, 4, "delimiter"));
    if merge {
        let found = lookup(&pillar, key, &delimiter);
        match (&default, found) {
            (Value::Object(d), Some(Value::Object(ret))) => {
                let mut merged = d.clone();
                maid_sdk::dictupdate::update(&mut merged, &ret, merge_lists);
                return Ok(shown(Value::Object(merged), call, Some(7), false));
            }
            (Value::Array(d), Some(Value::Array(ret))) => {
                let mut merged = d.clone();
                let added: Vec<Value> = ret
                    .iter()
                    .filter(|x| !d.iter().any(|y| python::eq(x, y)))
                    .cloned()
                    .collect();
                merged.extend(added);
                return Ok(shown(Value::Array(merged), call, Some(7), false));
            }
            // Salt logs that the merge is skipped, and reads the key as
            // without `merge`.
            _ => {}
        }
    }
    let found = lookup(&pillar, key, &delimiter).unwrap_or(default);
    Ok(shown(found, call, Some(7), false))
}

/// Return the pillar value at KEY (nested keys with ':'), DEFAULT when absent; merge=True merges it into a dict or list DEFAULT
#[function(name = "get", raw, args = GET_ARGS)]
fn get_(call: &Call) -> Result<Value, Error> {
    get(call)
}

/// The same as pillar.get
#[function(raw, args = GET_ARGS)]
fn fetch(call: &Call) -> Result<Value, Error> {
    get(call)
}

/// `item(*args, default=, delimiter=)`.
fn item_of(
    args: &[Value],
    default: Option<&Value>,
    delimiter: Option<&Value>,
) -> Result<Map<String, Value>, Error> {
    let pillar = pillar()?;
    let default = match default {
        None | Some(Value::Null) => json!(""),
        Some(v) => v.clone(),
    };
    let delimiter = self::delimiter(delimiter);
    Ok(args
        .iter()
        .map(|arg| {
            let v = lookup(&pillar, arg, &delimiter).unwrap_or_else(|| default.clone());
            (python::str(arg), v)
        })
        .collect())
}

/// Return the pillar values named, as {key: value} (nested keys with ':')
#[function(
    raw,
    args = ["*args", "default=None", "delimiter=None", "pillarenv=None", "saltenv=None", "unmask=None"]
)]
fn item(call: &Call) -> Result<Value, Error> {
    let found = item_of(
        &call.args,
        call.kwargs.get("default"),
        call.kwargs.get("delimiter"),
    )?;
    Ok(shown(Value::Object(found), call, None, false))
}

/// items' result: the whole pillar (masked unless `unmask`), or with
/// names, `pillar.item` of them (without its default, delimiter or
/// `unmask`: masked).
fn items_of(call: &Call) -> Result<Map<String, Value>, Error> {
    let shown = if call.args.is_empty() {
        shown(Value::Object(pillar()?), call, None, false)
    } else {
        serial(Value::Object(item_of(&call.args, None, None)?))
    };
    match shown {
        Value::Object(o) => Ok(o),
        _ => unreachable!("a masked mapping is a mapping"),
    }
}

const ITEMS_ARGS: &[&str] = &[
    "*args",
    "pillar=None",
    "pillar_enc=None",
    "pillarenv=None",
    "saltenv=None",
    "unmask=None",
];

/// Return the whole pillar this minion receives, compiled by the master for this job
#[function(raw, args = ITEMS_ARGS)]
fn items(call: &Call) -> Result<Map<String, Value>, Error> {
    items_of(call)
}

/// The same as pillar.items
#[function(raw, args = ITEMS_ARGS)]
fn data(call: &Call) -> Result<Map<String, Value>, Error> {
    items_of(call)
}

/// The pillar's top-level keys
#[function(raw, args = ITEMS_ARGS)]
fn ls(call: &Call) -> Result<Vec<String>, Error> {
    Ok(items_of(call)?.keys().cloned().collect())
}

/// `_obfuscate_inner`: the structure kept, each value its type's name.
fn obfuscated(v: &Value) -> Value {
    match v {
        Value::Object(o) => {
            Value::Object(o.iter().map(|(k, v)| (k.clone(), obfuscated(v))).collect())
        }
        Value::Array(a) => Value::Array(a.iter().map(obfuscated).collect()),
        Value::String(_) => json!("<str>"),
        Value::Bool(_) => json!("<bool>"),
        Value::Null => json!("<NoneType>"),
        Value::Number(n) if n.is_f64() => json!("<float>"),
        Value::Number(_) => json!("<int>"),
    }
}

/// The pillar with every value replaced by its type, for sharing its shape
#[function(raw, args = ITEMS_ARGS)]
fn obfuscate(call: &Call) -> Result<Value, Error> {
    Ok(obfuscated(&Value::Object(items_of(call)?)))
}

/// Return the pillar as it is held (KEY: one top-level key, {} when absent)
#[function(raw, args = ["key=None", "unmask=None"])]
fn raw(call: &Call) -> Result<Value, Error> {
    let pillar = pillar()?;
    let value = match kw(call, 0, "key").filter(|k| truthy(k)) {
        Some(key) => pillar
            .get(&python::str(key))
            .cloned()
            .unwrap_or_else(|| json!({})),
        None => Value::Object(pillar),
    };
    Ok(shown(value, call, Some(1), true))
}

/// Return the keys of the dict at KEY (nested keys with ':')
#[function(raw, args = ["key", "delimiter=\":\"", "unmask=None"])]
fn keys(call: &Call) -> Result<Vec<String>, Error> {
    let Some(key) = kw(call, 0, "key") else {
        return Err(Error::bad_arguments(
            "keys() missing 1 required positional argument: 'key'",
        ));
    };
    let delimiter = delimiter(kw(call, 1, "delimiter"));
    let key_name = python::str(key);
    match lookup(&pillar()?, key, &delimiter) {
        None => Err(raised(
            "KeyError",
            &python::repr(&json!(format!("Pillar key not found: {key_name}"))),
        )),
        Some(Value::Object(o)) => Ok(o.keys().cloned().collect()),
        Some(_) => Err(raised(
            "ValueError",
            &format!("Pillar value in key {key_name} is not a dict"),
        )),
    }
}

/// A master function: a minion has no pillar_roots
#[function(raw, args = ["path", "saltenv=None"])]
fn file_exists(_call: &Call) -> Result<Value, Error> {
    Err(Error::failed(
        "ERROR: No pillar_roots found. Are you running this on the master?",
        1,
    ))
}

impl Plugin for Pillar {
    const MODULE: &'static str = "pillar";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const CAPABILITIES: &'static [maid_sdk::Capability] = &[];

    fn functions() -> Vec<Function> {
        maid_sdk::functions![
            get_,
            fetch,
            item,
            items,
            data,
            ls,
            obfuscate,
            raw,
            keys,
            file_exists
        ]
    }
}

export_plugin!(Pillar);
