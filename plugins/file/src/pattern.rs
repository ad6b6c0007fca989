//! Python's regexes over a file's text: `file.search` and the plain
//! `file.contains` (and what `file.replace` shares with them).

use maid_sdk::{Error, function, python};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::paths::{exists, io, readable, readable_file, text};

/// Python's `re` flags as Salt passes them (an int, or names such as
/// `['IGNORECASE', 'MULTILINE']`), as inline flags.
pub(crate) fn regex_flags(flags: &Value, multiline: bool) -> Result<String, Error> {
    const IGNORECASE: i64 = 2;
    const MULTILINE: i64 = 8;
    const DOTALL: i64 = 16;
    const VERBOSE: i64 = 64;
    let mut bits = match flags {
        Value::Number(n) => n.as_i64().unwrap_or(0),
        Value::Null => 0,
        Value::String(_) | Value::Array(_) => {
            let names: Vec<String> = match flags {
                Value::Array(items) => items.iter().map(text).collect(),
                other => vec![text(other)],
            };
            let mut bits = 0;
            for n in names {
                bits |= match n.to_ascii_uppercase().trim_start_matches("RE.") {
                    "I" | "IGNORECASE" => IGNORECASE,
                    "M" | "MULTILINE" => MULTILINE,
                    "S" | "DOTALL" => DOTALL,
                    "X" | "VERBOSE" => VERBOSE,
                    other => {
                        return Err(Error::bad_arguments(format!(
                            "Invalid re flag given: {other}"
                        )));
                    }
                };
            }
            bits
        }
        other => {
            return Err(Error::bad_arguments(format!(
                "flags must be an int or a list of names, not {}",
                python::repr(other)
            )));
        }
    };
    if multiline {
        bits |= MULTILINE;
    }
    let mut out = String::new();
    for (bit, c) in [
        (IGNORECASE, 'i'),
        (MULTILINE, 'm'),
        (DOTALL, 's'),
        (VERBOSE, 'x'),
    ] {
        if bits & bit != 0 {
            out.push(c);
        }
    }
    Ok(if out.is_empty() {
        out
    } else {
        format!("(?{out})")
    })
}
pub(crate) fn compile(pattern: &str, flags: &str) -> Result<fancy_regex::Regex, Error> {
    fancy_regex::Regex::new(&format!("{flags}{pattern}"))
        .map_err(|e| Error::bad_arguments(format!("invalid pattern {pattern:?}: {e}")))
}
#[derive(Deserialize)]
pub(crate) struct Contains {
    path: Value,
    text: Value,
}
#[derive(Deserialize)]
pub(crate) struct Search {
    path: Value,
    pattern: Value,
    #[serde(default = "multiline_flag")]
    flags: Value,
    #[serde(default)]
    #[allow(dead_code)] // Salt's read size; the whole file is searched.
    bufsize: Value,
    #[serde(default)]
    ignore_if_missing: bool,
    #[serde(default)]
    multiline: bool,
}
pub(crate) fn multiline_flag() -> Value {
    json!(8)
}
/// Python's `re.sub` replacement syntax (`\1`, `\g<1>`, `\g<name>`) in the
/// regex crate's (`${1}`, `${name}`).
pub(crate) fn python_repl(repl: &str) -> String {
    let mut out = String::new();
    let mut chars = repl.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '$' => out.push_str("$$"),
            '\\' => match chars.peek().copied() {
                Some(d) if d.is_ascii_digit() => {
                    let mut n = String::new();
                    while let Some(d) = chars.peek().copied().filter(char::is_ascii_digit) {
                        n.push(d);
                        chars.next();
                    }
                    out.push_str(&format!("${{{n}}}"));
                }
                Some('g') => {
                    chars.next();
                    if chars.peek() == Some(&'<') {
                        chars.next();
                        let name: String = chars.by_ref().take_while(|c| *c != '>').collect();
                        out.push_str(&format!("${{{name}}}"));
                    } else {
                        out.push_str("\\g");
                    }
                }
                Some('n') => {
                    chars.next();
                    out.push('\n');
                }
                Some('t') => {
                    chars.next();
                    out.push('\t');
                }
                Some('\\') => {
                    chars.next();
                    out.push('\\');
                }
                _ => out.push('\\'),
            },
            c => out.push(c),
        }
    }
    out
}
/// Return whether the file holds TEXT (stripped)
#[function(args = ["path", "text"])]
pub(crate) fn contains(a: Contains) -> Result<bool, Error> {
    let p = readable_file(&text(&a.path))?;
    let Ok(bytes) = std::fs::read(&p) else {
        return Ok(false);
    };
    let needle = text(&a.text);
    let needle = needle.trim();
    Ok(String::from_utf8_lossy(&bytes).contains(needle))
}

/// Return whether the file matches PATTERN (a Python regex)
#[function(args = [
    "path",
    "pattern",
    "flags=8",
    "bufsize=1",
    "ignore_if_missing=false",
    "multiline=false",
])]
pub(crate) fn search(a: Search) -> Result<bool, Error> {
    let path = text(&a.path);
    let p = readable(&path)?;
    if !exists(&p) {
        if a.ignore_if_missing {
            return Ok(false);
        }
        return Err(Error::bad_arguments(format!("File not found: {path}")));
    }
    let p = crate::paths::followed(&p)?;
    let bytes = std::fs::read(&p).map_err(|e| io(&p, e))?;
    if !crate::difflib::is_text(&bytes) {
        return Err(Error::bad_arguments(format!(
            "Cannot perform string replacements on a binary file: {path}"
        )));
    }
    let flags = regex_flags(&a.flags, a.multiline)?;
    let re = compile(&text(&a.pattern), &flags)?;
    re.is_match(String::from_utf8_lossy(&bytes).as_ref())
        .map_err(|e| crate::paths::failed(format!("pattern: {e}")))
}
