//! Salt's argument conventions.
//!
//! On the command line `key=value` is a keyword argument and every value is
//! read as YAML 1.1, with Salt's exceptions (`salt.utils.args.yamlify_arg`):
//! only bracketed text becomes a list or mapping, `None` is null, text with
//! a tab or a newline stays as it was, and anything YAML would mangle (`#`
//! comments, `|`, `!`, `1_000`) stays the string it was. A minion then
//! reads the job's `arg` as `salt.minion.load_args_and_kwargs` does: a
//! trailing `{"__kwarg__": true, ...}` element is folded into `kwarg`, and
//! so is a string `key=value` argument.

use serde_json::{Map, Number, Value};

use super::yaml11::{Py, safe_load};

/// Split command-line words into positional and keyword arguments, as
/// `salt.utils.args.parse_input` does (with `condition_input`: an int of
/// twenty digits, a jid, is sent as a string).
pub fn parse_cli(words: &[String]) -> (Vec<Value>, Map<String, Value>) {
    let words: Vec<Value> = words.iter().cloned().map(Value::String).collect();
    parse_input(words, true)
}

/// `salt.utils.args.parse_input` over values, as the master reads a
/// runner's or wheel's `arg` (`condition` false) or the CLI's words
/// (`condition` true): a `key=value` string is a keyword argument, other
/// strings are read by [`yamlify`], a `{"__kwarg__": true, ...}` mapping
/// gives keyword arguments, anything else stays positional.
pub fn parse_input(values: Vec<Value>, condition_jids: bool) -> (Vec<Value>, Map<String, Value>) {
    let mut args = Vec::new();
    let mut kwargs = Map::new();
    for value in values {
        match value {
            Value::String(word) => match parse_kwarg(&word) {
                Some((key, value)) => {
                    kwargs.insert(key.to_string(), yamlify(value));
                }
                None if condition_jids => args.push(condition(yamlify(&word))),
                None => args.push(yamlify(&word)),
            },
            Value::Object(mut map) => {
                if map.remove("__kwarg__") == Some(Value::Bool(true)) {
                    kwargs.extend(map);
                } else {
                    args.push(Value::Object(map));
                }
            }
            other => args.push(other),
        }
    }
    (args, kwargs)
}

/// `condition_input`: a positional int that reads as a jid is a string.
fn condition(value: Value) -> Value {
    match &value {
        Value::Number(n) if (n.is_i64() || n.is_u64()) && n.to_string().len() == 20 => {
            Value::String(n.to_string())
        }
        _ => value,
    }
}

/// A job's arguments as a minion takes them (`load_args_and_kwargs`):
/// `{"__kwarg__": true, ...}` elements and `key=value` strings become
/// keyword arguments; everything else stays positional, as it came.
pub fn load_args_and_kwargs(args: Vec<Value>, kwargs: &mut Map<String, Value>) -> Vec<Value> {
    let mut positional = Vec::with_capacity(args.len());
    for arg in args {
        match arg {
            Value::Object(mut map) if map.get("__kwarg__") == Some(&Value::Bool(true)) => {
                map.remove("__kwarg__");
                kwargs.extend(map);
            }
            // Salt pops the marker whatever its value.
            Value::Object(mut map) => {
                map.remove("__kwarg__");
                positional.push(Value::Object(map));
            }
            Value::String(s) => match parse_kwarg(&s) {
                Some((key, value)) => {
                    kwargs.insert(key.to_string(), yamlify(value));
                }
                None => positional.push(Value::String(s)),
            },
            other => positional.push(other),
        }
    }
    positional
}

/// `name=value` when `word` is a keyword argument by Salt's rule
/// `^([^\d\W][\w.-]*)=(?!=)(.*)$` (Python's `re.match`: `.` stops at a
/// newline, and `$` may stand before a final one).
fn parse_kwarg(word: &str) -> Option<(&str, &str)> {
    let (name, value) = word.split_once('=')?;
    if value.starts_with('=') {
        return None;
    }
    let value = value.strip_suffix('\n').unwrap_or(value);
    if value.contains('\n') {
        return None;
    }
    let mut chars = name.chars();
    let first = chars.next()?;
    let word_char = |c: char| c.is_alphanumeric() || c == '_';
    if !word_char(first) || first.is_numeric() {
        return None;
    }
    if !chars.all(|c| word_char(c) || c == '.' || c == '-') {
        return None;
    }
    Some((name, value))
}

/// Read one command-line value as Salt's `yamlify_arg` does.
pub fn yamlify(text: &str) -> Value {
    let original = || Value::String(text.to_string());
    let trimmed = text.trim();
    if matches!(trimmed, "" | "---" | "...") {
        return original();
    }
    // `1_000` would be an int to YAML 1.1; Salt keeps it a string.
    if text.contains('_') && trimmed.chars().all(|c| c.is_ascii_digit() || c == '_') {
        return original();
    }
    if text.contains(['\t', '\r', '\n']) {
        return original();
    }
    if text.contains('#') {
        // `#` starts a YAML comment: keep a parse only when it is no plain
        // string, which the comment may have cut.
        return match safe_load(text) {
            Ok(Py::Str(_) | Py::None) | Err(_) => original(),
            Ok(other) => to_json(&other).unwrap_or_else(original),
        };
    }
    let parsed = if text == "None" {
        Py::None
    } else {
        match safe_load(text) {
            Ok(parsed) => parsed,
            Err(_) => return original(),
        }
    };
    let keep = match &parsed {
        Py::Dict(_) => text.starts_with('{'),
        Py::List(_) => text.starts_with('['),
        Py::Str(s) if s.is_empty() => !(text == "|" || text == "!"),
        Py::None => !(trimmed.starts_with('#') || text == "!"),
        Py::Bool(_) | Py::Int(_) | Py::BigInt(_) | Py::Float(_) | Py::Str(_) => true,
        Py::Bytes(_) | Py::Set(_) => false,
    };
    if !keep {
        return original();
    }
    to_json(&parsed).unwrap_or_else(original)
}

/// A Python value as the job carries it: what msgpack would send, in JSON.
/// Ints beyond 64 bits are strings (as Salt's payload sends them), bytes
/// are text. `None` for what JSON cannot hold (infinities, NaN): the word
/// then stays the string it was.
pub fn to_json(value: &Py) -> Option<Value> {
    Some(match value {
        Py::None => Value::Null,
        Py::Bool(b) => Value::Bool(*b),
        Py::Int(i) => match (i64::try_from(*i), u64::try_from(*i)) {
            (Ok(n), _) => Value::from(n),
            (_, Ok(n)) => Value::from(n),
            _ => Value::String(i.to_string()),
        },
        Py::BigInt(digits) => Value::String(digits.clone()),
        Py::Float(f) => Value::Number(Number::from_f64(*f)?),
        Py::Str(s) => Value::String(s.clone()),
        Py::Bytes(b) => Value::String(String::from_utf8_lossy(b).into_owned()),
        Py::List(items) | Py::Set(items) => {
            Value::Array(items.iter().map(to_json).collect::<Option<_>>()?)
        }
        Py::Dict(pairs) => {
            let mut out = Map::new();
            for (k, v) in pairs {
                // `json.dumps` writes a non-string key as its JSON text.
                let key = match to_json(k)? {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                out.insert(key, to_json(v)?);
            }
            Value::Object(out)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn words(w: &[&str]) -> Vec<String> {
        w.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn complex_keys_stay_text_as_in_salt() {
        // PyYAML cannot hash a mapping or list key; Salt keeps the text.
        assert_eq!(yamlify("{? {a: 1} : b}"), json!("{? {a: 1} : b}"));
        assert_eq!(yamlify("{? [a] : b}"), json!("{? [a] : b}"));
        // `1 == True` in Python: a conflicting key, so the text stays.
        assert_eq!(yamlify("{1: a, true: b}"), json!("{1: a, true: b}"));
        assert_eq!(yamlify("{1: a, false: b}"), json!({"1": "a", "false": "b"}));
        // The fuzzer's case: forty nested complex keys once took minutes
        // and gigabytes; now it is a string at once.
        let nested = format!("[{}x]", "? ".repeat(40));
        assert_eq!(yamlify(&nested), json!(nested));
    }

    #[test]
    fn scalars_as_salt_reads_them() {
        assert_eq!(yamlify("1"), json!(1));
        assert_eq!(yamlify("1.5"), json!(1.5));
        assert_eq!(yamlify("true"), json!(true));
        assert_eq!(yamlify("yes"), json!(true));
        assert_eq!(yamlify("off"), json!(false));
        assert_eq!(yamlify("None"), json!(null));
        assert_eq!(yamlify("null"), json!(null));
        assert_eq!(yamlify("hello world"), json!("hello world"));
        assert_eq!(yamlify("echo hi"), json!("echo hi"));
        assert_eq!(
            yamlify("echo out; echo err >&2"),
            json!("echo out; echo err >&2")
        );
        assert_eq!(yamlify("1_000"), json!("1_000"));
        assert_eq!(yamlify(""), json!(""));
        assert_eq!(yamlify("|"), json!("|"));
        assert_eq!(yamlify("!"), json!("!"));
        assert_eq!(yamlify("#"), json!("#"));
        assert_eq!(yamlify("echo a # b"), json!("echo a # b"));
    }

    #[test]
    fn collections_only_when_bracketed() {
        assert_eq!(yamlify("[a, b, 1]"), json!(["a", "b", 1]));
        assert_eq!(yamlify("{a: 1}"), json!({"a": 1}));
        assert_eq!(yamlify("a: 1"), json!("a: 1"));
        assert_eq!(yamlify("- a"), json!("- a"));
    }

    #[test]
    fn kwargs_by_salts_rule() {
        let (args, kwargs) = parse_cli(&words(&[
            "echo a=b",
            "cwd=/tmp",
            "python_shell=False",
            "a.b-c=1",
            "1x=2",
            "x==y",
        ]));
        assert_eq!(args, vec![json!("echo a=b"), json!("1x=2"), json!("x==y")]);
        assert_eq!(kwargs["cwd"], json!("/tmp"));
        assert_eq!(kwargs["python_shell"], json!(false));
        assert_eq!(kwargs["a.b-c"], json!(1));
    }

    #[test]
    fn kwarg_markers_fold() {
        let mut kwargs = Map::new();
        let args = load_args_and_kwargs(
            vec![
                json!("x"),
                json!({"__kwarg__": true, "cwd": "/tmp"}),
                json!({"k": 1}),
            ],
            &mut kwargs,
        );
        assert_eq!(args, vec![json!("x"), json!({"k": 1})]);
        assert_eq!(kwargs["cwd"], json!("/tmp"));
    }
}
