//! Salt's `file.replace`: a Python regex substituted over a whole file,
//! optionally adding the text where nothing matched, with Salt's backup
//! and its unified diff (of `bytes.splitlines(True)`) as the return.

use std::path::PathBuf;

use maid_sdk::fs::check_write;
use maid_sdk::{Error, function, host, python};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::difflib::{bytes_splitlines_keep, is_text, unified_diff};
use crate::paths::{exists, failed, io, is_link, readable, text, writable};
use crate::pattern::{compile, multiline_flag, python_repl, regex_flags};
use crate::yes;

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
    #[serde(default)]
    backslash_literal: bool,
}

/// The file a path names, through a link (Salt's `os.path.realpath`).
fn real(path: &str) -> String {
    let p = PathBuf::from(path);
    if is_link(&p) {
        host::stat(path, true)
            .ok()
            .and_then(|st| st.target)
            .unwrap_or_else(|| path.to_string())
    } else {
        path.to_string()
    }
}

/// `re.subn`: the text with at most `count` (0: every) match replaced,
/// and how many were.
fn subn(
    re: &fancy_regex::Regex,
    repl: &str,
    text: &str,
    count: usize,
) -> Result<(String, usize), Error> {
    let limit = if count == 0 { usize::MAX } else { count };
    let mut n = 0;
    for m in re.find_iter(text).take(limit) {
        m.map_err(|e| failed(format!("pattern: {e}")))?;
        n += 1;
    }
    let out = re
        .replacen(text, count, python_repl(repl).as_str())
        .into_owned();
    Ok((out, n))
}

/// Write `lines` to `path`, keeping the original as `path + backup`
/// (with its mode, as `shutil.copy2` keeps it) when asked.
fn commit(path: &str, before: &[u8], after: &str, backup: &Option<Value>) -> Result<(), Error> {
    let p = writable(path)?;
    if let Some(suffix) = backup.as_ref().filter(|b| python::truthy(b)) {
        let backup = PathBuf::from(format!("{path}{}", text(suffix)));
        check_write(&backup)?;
        std::fs::write(&backup, before).map_err(|e| io(&backup, e))?;
        host::set_mode(&backup.display().to_string(), host::stat(path, true)?.mode)?;
    }
    std::fs::write(&p, after).map_err(|e| io(&p, e))
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
    let path = real(&text(&a.path));
    let p = if a.dry_run || a.search_only {
        readable(&path)?
    } else {
        writable(&path)?
    };
    if !exists(&p) {
        if a.ignore_if_missing {
            return Ok(json!(false));
        }
        return Err(Error::bad_arguments(format!("File not found: {path}")));
    }
    let bytes = std::fs::read(&p).unwrap_or_default();
    if !is_text(&bytes) || crate::paths::is_dir(&p) {
        return Err(Error::bad_arguments(format!(
            "Cannot perform string replacements on a binary file: {path}"
        )));
    }
    let (append, prepend) = (a.append_if_not_found, a.prepend_if_not_found);
    if a.search_only && (append || prepend) {
        return Err(Error::bad_arguments(
            "search_only cannot be used with append/prepend_if_not_found",
        ));
    }
    if append && prepend {
        return Err(Error::bad_arguments(
            "Only one of append and prepend_if_not_found is permitted",
        ));
    }
    let flags = regex_flags(&a.flags, false)?;
    let re = compile(&text(&a.pattern), &flags)?;
    let before = String::from_utf8_lossy(&bytes).into_owned();
    if a.search_only {
        return re
            .is_match(&before)
            .map_err(|e| failed(format!("pattern: {e}")))
            .map(|m| json!(m));
    }
    let repl = text(&a.repl);
    let nfc = a
        .not_found_content
        .as_ref()
        .filter(|v| !v.is_null())
        .map(text);
    let content = match &nfc {
        Some(c) if !c.is_empty() && (append || prepend) => c.clone(),
        _ => repl.clone(),
    };
    let repl_used = if a.backslash_literal {
        repl.replace('\\', "\\\\")
    } else {
        repl.clone()
    };
    let (result, nrepl) = subn(&re, &repl_used, &before, a.count)?;
    let mut found = nrepl > 0;
    if (append || prepend)
        && compile(
            &format!("^{}($|(?=\r\n))", fancy_regex::escape(&content)),
            &flags,
        )?
        .is_match(&before)
        .unwrap_or(false)
    {
        found = true;
    }
    let orig_file = bytes_splitlines_keep(&bytes);
    let mut new_file = bytes_splitlines_keep(result.as_bytes());
    let mut has_changes = nrepl > 0 && orig_file != new_file;
    if !found && (append || prepend) {
        let nfc = nfc.unwrap_or_else(|| repl.clone());
        if prepend {
            new_file.insert(0, format!("{nfc}\n"));
        } else {
            if let Some(last) = new_file.last_mut()
                && !last.ends_with('\n')
            {
                last.push('\n');
            }
            new_file.push(format!("{nfc}\n"));
        }
        has_changes = true;
    }
    if has_changes && !a.dry_run {
        commit(&path, &bytes, &new_file.concat(), &a.backup)?;
    }
    let differences = unified_diff(&orig_file, &new_file, "\n").concat();
    if a.show_changes {
        return Ok(json!(differences));
    }
    Ok(json!(has_changes && !differences.is_empty()))
}
