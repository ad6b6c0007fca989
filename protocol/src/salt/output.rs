//! Salt's outputters, byte for byte where scripts parse them: `nested` (the
//! default), `json`, `yaml` and `txt`. Each renders `{minion_id: return}`.

use std::io::Write;

use clap::ValueEnum;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::salt::python;

/// Which outputter (`--out`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Outputter {
    #[default]
    Nested,
    Json,
    Yaml,
    Txt,
}

impl Outputter {
    pub fn name(self) -> &'static str {
        match self {
            Outputter::Nested => "nested",
            Outputter::Json => "json",
            Outputter::Yaml => "yaml",
            Outputter::Txt => "txt",
        }
    }

    /// Render `data` (`{minion: return}`), ending with a newline.
    /// `indent` applies to `json` only: `None` prints one line with
    /// Python's separators, as `--out-indent -1` does in Salt.
    pub fn render(self, data: &Map<String, Value>, indent: Option<usize>) -> String {
        match self {
            Outputter::Nested => nested(data),
            Outputter::Json => json(&Value::Object(data.clone()), indent),
            Outputter::Yaml => yaml(data),
            Outputter::Txt => txt(data),
        }
    }
}

/// Python's `str()` of a scalar inside the nested outputter.
fn scalar(v: &Value) -> String {
    python::str(v)
}

/// Python's `splitlines()`: no trailing empty line, none at all for "".
fn split_lines(s: &str) -> impl Iterator<Item = &str> {
    s.lines()
}

fn nested_display(v: &Value, indent: usize, prefix: &str, out: &mut Vec<String>) {
    let pad = " ".repeat(indent);
    match v {
        Value::Array(items) => {
            for item in items {
                match item {
                    Value::Array(_) | Value::Object(_) => {
                        out.push(format!("{pad}|_"));
                        let p = if item.is_object() { "" } else { "- " };
                        nested_display(item, indent + 2, p, out);
                    }
                    _ => nested_display(item, indent, "- ", out),
                }
            }
        }
        Value::Object(map) => {
            if indent > 0 {
                out.push(format!("{pad}----------"));
            }
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            for key in keys {
                out.push(format!("{pad}{prefix}{key}:"));
                nested_display(&map[key], indent + 4, "", out);
            }
        }
        Value::String(s) => {
            for (i, line) in split_lines(s).enumerate() {
                let p = if i == 0 {
                    prefix.to_string()
                } else {
                    " ".repeat(prefix.len())
                };
                out.push(format!("{pad}{p}{line}"));
            }
        }
        scalar_value => out.push(format!("{pad}{prefix}{}", scalar(scalar_value))),
    }
}

/// Salt's `nested` outputter.
pub fn nested(data: &Map<String, Value>) -> String {
    let mut out = Vec::new();
    nested_display(&Value::Object(data.clone()), 0, "", &mut out);
    let mut text = out.join("\n");
    text.push('\n');
    text
}

/// Writes JSON with Python's default separators (`", "` and `": "`), so a
/// one-line document reads exactly as `json.dumps` prints it.
struct PythonCompact;

impl serde_json::ser::Formatter for PythonCompact {
    fn begin_array_value<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }

    fn begin_object_key<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }
}

/// Salt's `json` outputter.
pub fn json(v: &Value, indent: Option<usize>) -> String {
    let mut buf = Vec::new();
    let result = match indent {
        None => v.serialize(&mut serde_json::Serializer::with_formatter(
            &mut buf,
            PythonCompact,
        )),
        Some(n) => {
            let pad = vec![b' '; n];
            let fmt = serde_json::ser::PrettyFormatter::with_indent(&pad);
            v.serialize(&mut serde_json::Serializer::with_formatter(&mut buf, fmt))
        }
    };
    // Serialising a `Value` into memory cannot fail.
    debug_assert!(result.is_ok());
    let mut text = String::from_utf8(buf).unwrap_or_default();
    text.push('\n');
    text
}

/// Salt's `yaml` outputter (block style).
pub fn yaml(data: &Map<String, Value>) -> String {
    serde_yaml_ng::to_string(data).unwrap_or_default()
}

/// Salt's `txt` outputter: `minion: line` for every line of a string
/// return, `minion: str(return)` otherwise.
pub fn txt(data: &Map<String, Value>) -> String {
    let mut out = String::new();
    for (minion, ret) in data {
        match ret {
            Value::String(s) => {
                for line in split_lines(s) {
                    out.push_str(&format!("{minion}: {line}\n"));
                }
            }
            other => out.push_str(&format!("{minion}: {}\n", python::str(other))),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn local(v: Value) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("local".into(), v);
        m
    }

    #[test]
    fn floats_print_as_python_and_grain_targeting_read_them() {
        // The outputters and the grain matcher share one Python `str()`.
        for (f, shown) in [(1e16, "1e+16"), (1e-7, "1e-07"), (2.0, "2.0"), (0.1, "0.1")] {
            assert_eq!(nested(&local(json!(f))), format!("local:\n    {shown}\n"));
            assert_eq!(txt(&local(json!([f]))), format!("local: [{shown}]\n"));
        }
        assert_eq!(txt(&local(json!(["a\tb"]))), "local: ['a\\tb']\n");
    }

    #[test]
    fn nested_scalars() {
        assert_eq!(nested(&local(json!(true))), "local:\n    True\n");
        assert_eq!(nested(&local(json!(null))), "local:\n    None\n");
        assert_eq!(nested(&local(json!(42))), "local:\n    42\n");
        assert_eq!(nested(&local(json!("a\nb"))), "local:\n    a\n    b\n");
    }

    #[test]
    fn nested_collections_as_salt() {
        let ret = json!({"retcode": 0, "stdout": "hi", "stderr": "", "pid": 7});
        assert_eq!(
            nested(&local(ret)),
            "local:\n    ----------\n    pid:\n        7\n    retcode:\n        0\n    stderr:\n    stdout:\n        hi\n"
        );
        let list = json!(["a", 1, {"k": "v"}, ["x"]]);
        assert_eq!(
            nested(&local(list)),
            "local:\n    - a\n    - 1\n    |_\n      ----------\n      k:\n          v\n    |_\n      - x\n"
        );
    }

    #[test]
    fn json_as_python_prints_it() {
        assert_eq!(json(&json!({"local": "hi"}), None), "{\"local\": \"hi\"}\n");
        assert_eq!(json(&json!({"a": [1, 2]}), None), "{\"a\": [1, 2]}\n");
        assert_eq!(
            json(&json!({"local": true}), Some(4)),
            "{\n    \"local\": true\n}\n"
        );
    }

    #[test]
    fn yaml_and_txt() {
        assert_eq!(yaml(&local(json!(true))), "local: true\n");
        assert_eq!(txt(&local(json!("a\nb"))), "local: a\nlocal: b\n");
        assert_eq!(txt(&local(json!(true))), "local: True\n");
        assert_eq!(
            txt(&local(json!({"a": [1, "x"], "b": null}))),
            "local: {'a': [1, 'x'], 'b': None}\n"
        );
    }
}
