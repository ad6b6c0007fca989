//! The filters Salt adds to Jinja that SLS files use most
//! (`salt.utils.jinja`, `salt.utils.data`): `yaml`, `json`, `yaml_encode`,
//! `yaml_dquote`, `regex_match`, `regex_search`, `regex_replace`,
//! `unique`, `sequence`, `to_bool`.

use std::sync::Arc;

use minijinja::value::{Enumerator, Kwargs, Object, ObjectRepr};
use minijinja::{Environment, Error, ErrorKind, Value as J};
use serde_json::Value;

fn err(msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidOperation, msg.into())
}

fn json(v: &J) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

fn flag(kwargs: &Kwargs, name: &str) -> Result<bool, Error> {
    Ok(kwargs.get::<Option<bool>>(name)?.unwrap_or(false))
}

fn regex(pattern: &str, kwargs: &Kwargs) -> Result<regex::Regex, Error> {
    let mut flags = String::new();
    if flag(kwargs, "ignorecase")? {
        flags.push('i');
    }
    if flag(kwargs, "multiline")? {
        flags.push('m');
    }
    let pattern = if flags.is_empty() {
        pattern.to_string()
    } else {
        format!("(?{flags}){pattern}")
    };
    regex::Regex::new(&pattern).map_err(|e| err(e.to_string()))
}

/// A Python tuple: a sequence that prints as `('a', 'b')`.
#[derive(Debug)]
pub struct Tuple(pub Vec<J>);

impl Object for Tuple {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Seq
    }

    fn get_value(self: &Arc<Self>, key: &J) -> Option<J> {
        self.0.get(key.as_usize()?).cloned()
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Seq(self.0.len())
    }
}

impl Tuple {
    /// Python's `repr()` of the tuple.
    pub fn repr(&self) -> String {
        let items: Vec<String> = self
            .0
            .iter()
            .map(|v| maid_salt::python::repr(&json(v)))
            .collect();
        match items.len() {
            1 => format!("({},)", items[0]),
            _ => format!("({})", items.join(", ")),
        }
    }
}

/// `regex_match`/`regex_search`: the groups of the match (Python's
/// `match.groups()`, a tuple), or None.
fn groups(caps: Option<regex::Captures>) -> J {
    match caps {
        None => J::from(()),
        Some(c) => J::from_object(Tuple(
            c.iter()
                .skip(1)
                .map(|m| m.map_or(J::from(()), |m| J::from(m.as_str())))
                .collect::<Vec<J>>(),
        )),
    }
}

/// Python's `json.dumps` (`, ` and `: ` separators).
fn json_dumps(v: &Value, sort: bool) -> String {
    match v {
        Value::Object(o) => {
            let mut items: Vec<(&String, &Value)> = o.iter().collect();
            if sort {
                items.sort_by(|a, b| a.0.cmp(b.0));
            }
            let parts: Vec<String> = items
                .iter()
                .map(|(k, v)| format!("{}: {}", Value::String((*k).clone()), json_dumps(v, sort)))
                .collect();
            format!("{{{}}}", parts.join(", "))
        }
        Value::Array(a) => format!(
            "[{}]",
            a.iter()
                .map(|v| json_dumps(v, sort))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Value::String(s) => ascii_json(s),
        other => other.to_string(),
    }
}

/// A JSON string with non-ASCII escaped, as `ensure_ascii` does.
fn ascii_json(s: &str) -> String {
    let mut out = String::from("\"");
    for c in Value::String(s.to_string())
        .to_string()
        .trim_matches('"')
        .chars()
    {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut buf = [0u16; 2];
            for u in c.encode_utf16(&mut buf) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        }
    }
    out.push('"');
    out
}

pub fn add(env: &mut Environment) {
    env.add_filter("yaml", |v: J, flow: Option<bool>| -> String {
        let indent = if flow.unwrap_or(true) { Some(-1) } else { None };
        let text = maid_salt::output::yaml::dump(&json(&v), indent);
        let text = text.trim();
        text.strip_suffix("\n...").unwrap_or(text).to_string()
    });
    env.add_filter("json", |v: J, kwargs: Kwargs| -> Result<J, Error> {
        let sort = flag(&kwargs, "sort_keys")?;
        let _ = kwargs.get::<Option<J>>("indent")?;
        Ok(J::from_safe_string(json_dumps(&json(&v), sort)))
    });
    env.add_filter("yaml_encode", |v: J| -> String {
        let text = maid_salt::output::yaml::dump(&json(&v), Some(-1));
        let text = text.trim();
        text.strip_suffix("\n...").unwrap_or(text).to_string()
    });
    env.add_filter("yaml_dquote", |v: String| -> String {
        Value::String(v).to_string()
    });
    env.add_filter(
        "regex_match",
        |v: String, pattern: String, kwargs: Kwargs| -> Result<J, Error> {
            let re = regex(&format!("^(?:{pattern})"), &kwargs)?;
            Ok(groups(re.captures(&v)))
        },
    );
    env.add_filter(
        "regex_search",
        |v: String, pattern: String, kwargs: Kwargs| -> Result<J, Error> {
            let re = regex(&pattern, &kwargs)?;
            Ok(groups(re.captures(&v)))
        },
    );
    env.add_filter(
        "regex_replace",
        |v: String, pattern: String, repl: String, kwargs: Kwargs| -> Result<String, Error> {
            let re = regex(&pattern, &kwargs)?;
            let repl = python_repl(&repl);
            Ok(re.replace_all(&v, repl.as_str()).into_owned())
        },
    );
    env.add_filter("unique", |v: Vec<J>| -> Vec<J> {
        let mut out: Vec<J> = Vec::new();
        for x in v {
            if !out.contains(&x) {
                out.push(x);
            }
        }
        out
    });
    env.add_filter("sequence", |v: J| -> J {
        if v.kind() == minijinja::value::ValueKind::Seq {
            v
        } else {
            J::from(vec![v])
        }
    });
    env.add_filter("to_bool", |v: J| -> bool {
        match json(&v) {
            Value::Null => false,
            Value::Bool(b) => b,
            Value::String(s) => matches!(s.to_lowercase().as_str(), "yes" | "1" | "true"),
            Value::Number(n) => n.as_f64().is_some_and(|f| f > 0.0),
            Value::Array(a) => !a.is_empty(),
            Value::Object(o) => !o.is_empty(),
        }
    });
}

/// Python's `\1`/`\g<name>` replacement references as the regex crate's.
fn python_repl(repl: &str) -> String {
    let mut out = String::new();
    let mut chars = repl.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '$' => out.push_str("$$"),
            '\\' => match chars.peek() {
                Some(d) if d.is_ascii_digit() => {
                    let d = *d;
                    chars.next();
                    out.push_str(&format!("${{{d}}}"));
                }
                Some('n') => {
                    chars.next();
                    out.push('\n');
                }
                Some('\\') => {
                    chars.next();
                    out.push('\\');
                }
                _ => out.push('\\'),
            },
            other => out.push(other),
        }
    }
    out
}
