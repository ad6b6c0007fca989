//! Salt's argument conventions.
//!
//! On the command line `key=value` is a keyword argument and every value is
//! read as YAML, with Salt's exceptions (`salt.utils.args.yamlify_arg`):
//! only bracketed text becomes a list or mapping, `None` is null, YAML 1.1's
//! `yes`/`no`/`on`/`off` are booleans, and anything YAML would mangle (`#`
//! comments, `|`, `!`, `1_000`) stays the string it was. Over the wire, a
//! trailing `{"__kwarg__": true, ...}` element of `arg` is folded into
//! `kwarg` (`salt.utils.args.parse_input`).

use serde_json::{Map, Number, Value};

/// Split command-line words into positional and keyword arguments.
pub fn parse_cli(words: &[String]) -> (Vec<Value>, Map<String, Value>) {
    let mut args = Vec::new();
    let mut kwargs = Map::new();
    for word in words {
        match parse_kwarg(word) {
            Some((key, value)) => {
                kwargs.insert(key.to_string(), yamlify(value));
            }
            None => args.push(yamlify(word)),
        }
    }
    (args, kwargs)
}

/// Move `{"__kwarg__": true, ...}` elements of `args` into `kwargs`, as
/// Salt does for jobs published by its own client.
pub fn fold_kwarg_markers(args: Vec<Value>, kwargs: &mut Map<String, Value>) -> Vec<Value> {
    let mut positional = Vec::with_capacity(args.len());
    for arg in args {
        match arg {
            Value::Object(mut map) if map.get("__kwarg__") == Some(&Value::Bool(true)) => {
                map.remove("__kwarg__");
                kwargs.extend(map);
            }
            other => positional.push(other),
        }
    }
    positional
}

/// `name=value` when `word` is a keyword argument by Salt's rule
/// `^([^\d\W][\w.-]*)=(?!=)(.*)$`.
fn parse_kwarg(word: &str) -> Option<(&str, &str)> {
    let (name, value) = word.split_once('=')?;
    if value.starts_with('=') {
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

/// Read one command-line value as Salt does.
pub fn yamlify(text: &str) -> Value {
    let original = || Value::String(text.to_string());
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return original();
    }
    // `1_000` would be an int to YAML 1.1; Salt keeps it a string.
    if text.contains('_') && trimmed.chars().all(|c| c.is_ascii_digit() || c == '_') {
        return original();
    }
    if text == "None" {
        return Value::Null;
    }
    match trimmed {
        "yes" | "Yes" | "YES" | "on" | "On" | "ON" | "y" | "Y" => {
            // YAML 1.1 booleans (`y` excluded by PyYAML's resolver).
            if trimmed.eq_ignore_ascii_case("y") {
                return original();
            }
            return Value::Bool(true);
        }
        "no" | "No" | "NO" | "off" | "Off" | "OFF" => return Value::Bool(false),
        _ => {}
    }
    let Ok(parsed) = serde_yaml_ng::from_str::<serde_yaml_ng::Value>(text) else {
        return original();
    };
    let Some(value) = to_json(parsed) else {
        return original();
    };
    if text.contains('#') {
        // Only keep a parse that is not a plain string: `#` starts a YAML
        // comment and would silently cut the value.
        return match value {
            Value::String(_) | Value::Null => original(),
            other => other,
        };
    }
    match &value {
        Value::Object(_) if !text.starts_with('{') => original(),
        Value::Array(_) if !text.starts_with('[') => original(),
        Value::String(s) if s.is_empty() && (text == "|" || text == "!") => original(),
        Value::Null if trimmed.starts_with('#') || text == "!" => original(),
        _ => value,
    }
}

/// YAML to JSON, or `None` for what Salt would not accept (non-finite
/// floats, tagged values).
fn to_json(v: serde_yaml_ng::Value) -> Option<Value> {
    use serde_yaml_ng::Value as Y;
    Some(match v {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(b),
        Y::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::Number(i.into())
            } else if let Some(u) = n.as_u64() {
                Value::Number(u.into())
            } else {
                Value::Number(Number::from_f64(n.as_f64()?)?)
            }
        }
        Y::String(s) => Value::String(s),
        Y::Sequence(items) => Value::Array(items.into_iter().map(to_json).collect::<Option<_>>()?),
        Y::Mapping(map) => {
            let mut out = Map::new();
            for (k, v) in map {
                // A mapping or sequence as a key is unhashable to PyYAML, so
                // Salt keeps the text. Turning it into JSON text instead
                // re-escaped it at every level of nesting: `? ? ? …` grew
                // exponentially (found by fuzzing).
                if matches!(k, Y::Mapping(_) | Y::Sequence(_)) {
                    return None;
                }
                let key = match to_json(k)? {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                out.insert(key, to_json(v)?);
            }
            Value::Object(out)
        }
        Y::Tagged(_) => return None,
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
        assert_eq!(yamlify("{1: a, true: b}"), json!({"1": "a", "true": "b"}));
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
        let args = fold_kwarg_markers(
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
