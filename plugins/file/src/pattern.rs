//! Python's regexes over a file's text: `file.search`, `file.replace`
//! (with Salt's unified diff), and the plain `file.contains`.

use std::io::Write;
use std::path::PathBuf;

use maid_sdk::fs::check_write;
use maid_sdk::{Error, function, host, python};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::paths::{exists, failed, io, is_dir, readable, text, writable};
use crate::yes;

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
#[derive(Deserialize)]
pub(crate) struct Replace {
    path: Value,
    pattern: Value,
    repl: Value,
    #[serde(default)]
    count: usize,
    #[serde(default = "multiline_flag")]
    flags: Value,
    #[serde(default)]
    #[allow(dead_code)] // Salt's read size; the whole file is replaced.
    bufsize: Value,
    #[serde(default)]
    append_if_not_found: bool,
    #[serde(default)]
    prepend_if_not_found: bool,
    #[serde(default)]
    not_found_content: Option<Value>,
    #[serde(default)]
    backup: Option<Value>,
    #[serde(default)]
    dry_run: bool,
    #[serde(default)]
    search_only: bool,
    #[serde(default = "yes")]
    show_changes: bool,
    #[serde(default)]
    ignore_if_missing: bool,
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
/// Salt's `get_diff`: Python's `difflib.unified_diff` of the lines, with no
/// file names.
pub(crate) fn unified_diff(before: &str, after: &str) -> String {
    similar::TextDiff::from_lines(before, after)
        .unified_diff()
        .header("", "")
        .to_string()
}

/// Return whether the file holds TEXT (stripped)
#[function(args = ["path", "text"])]
pub(crate) fn contains(a: Contains) -> Result<bool, Error> {
    let p = readable(&text(&a.path))?;
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
        return Err(failed(format!("{path}: File not found")));
    }
    let bytes = std::fs::read(&p).map_err(|e| io(&p, e))?;
    let flags = regex_flags(&a.flags, a.multiline)?;
    let re = compile(&text(&a.pattern), &flags)?;
    re.is_match(String::from_utf8_lossy(&bytes).as_ref())
        .map_err(|e| failed(format!("pattern: {e}")))
}

/// Replace PATTERN (a Python regex) with REPL in a file; return the diff
#[function(args = [
    "path",
    "pattern",
    "repl",
    "count=0",
    "flags=8",
    "bufsize=1",
    "append_if_not_found=false",
    "prepend_if_not_found=false",
    "not_found_content=null",
    "backup=\".bak\"",
    "dry_run=false",
    "search_only=false",
    "show_changes=true",
    "ignore_if_missing=false",
    "preserve_inode=true",
    "backslash_literal=false",
    "encoding=null",
])]
pub(crate) fn replace(a: Replace) -> Result<Value, Error> {
    let path = text(&a.path);
    let p = if a.dry_run || a.search_only {
        readable(&path)?
    } else {
        writable(&path)?
    };
    if !exists(&p) {
        if a.ignore_if_missing {
            return Ok(json!(false));
        }
        return Err(failed(format!("{path}: File not found")));
    }
    if is_dir(&p) {
        return Err(failed(format!("{path}: Not a file")));
    }
    let before = std::fs::read(&p).map_err(|e| io(&p, e))?;
    let before = String::from_utf8_lossy(&before).into_owned();
    let flags = regex_flags(&a.flags, false)?;
    let re = compile(&text(&a.pattern), &flags)?;
    let found = re
        .is_match(&before)
        .map_err(|e| failed(format!("pattern: {e}")))?;
    if a.search_only {
        return Ok(json!(found));
    }
    let repl = text(&a.repl);
    let mut after = if found {
        let limit = a.count;
        // Python's `\1` and `\g<name>` in the replacement, as `re.sub`.
        let repl = python_repl(&repl);
        re.replacen(&before, limit, repl.as_str()).into_owned()
    } else {
        before.clone()
    };
    if !found && (a.append_if_not_found || a.prepend_if_not_found) {
        let content = a.not_found_content.as_ref().map_or(repl.clone(), text);
        if a.prepend_if_not_found {
            after = format!("{content}\n{before}");
        } else {
            let sep = if before.is_empty() || before.ends_with('\n') {
                ""
            } else {
                "\n"
            };
            after = format!("{before}{sep}{content}\n");
        }
    }
    let changed = after != before;
    if changed && !a.dry_run {
        if let Some(suffix) = a
            .backup
            .as_ref()
            .filter(|b| !matches!(b, Value::Bool(false) | Value::Null))
        {
            let suffix = text(suffix);
            let backup = PathBuf::from(format!("{}{suffix}", p.display()));
            check_write(&backup)?;
            std::fs::copy(&p, &backup).map_err(|e| io(&backup, e))?;
            // As Python's `shutil.copy2`: the mode comes along.
            let mode = host::stat(&path, true)?.mode;
            host::set_mode(&backup.display().to_string(), mode)?;
        }
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&p)
            .map_err(|e| io(&p, e))?;
        f.write_all(after.as_bytes()).map_err(|e| io(&p, e))?;
    }
    if !a.show_changes {
        return Ok(json!(changed));
    }
    Ok(json!(unified_diff(&before, &after)))
}
