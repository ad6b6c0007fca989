//! What `file.directory`'s `recurse` goes through: the tree below a
//! directory as Python's `os.walk` gives it (top-down; a link to a
//! directory listed with the directories but not entered), read with
//! `file.readdir` and `file.stats`, and Salt's checks of the `recurse`
//! list.

use serde_json::{Value, json};

use super::{Step, call, probe};
use crate::py::py_str;
use crate::states::Env;

/// One directory of the walk: `(root, dirs, files)`.
pub(crate) type Level = (String, Vec<String>, Vec<String>);

/// `_depth_limited_walk(top, max_depth)`.
pub(crate) fn walk(env: &mut Env, top: &str, max_depth: Option<u64>) -> Step<Vec<Level>> {
    let mut out = Vec::new();
    let depth = |p: &str| p.matches('/').count();
    let base = depth(top);
    let mut stack = vec![top.to_string()];
    while let Some(root) = stack.pop() {
        // A level as deep as max_depth or deeper is left out (and so is
        // all below it).
        if max_depth.is_some_and(|m| (depth(&root) - base) as u64 >= m) {
            continue;
        }
        let entries = match call(env, "readdir", &[("path", json!(root))]) {
            Ok(Value::Array(e)) => e,
            Ok(_) => Vec::new(),
            Err(e) => {
                super::denied(e)?;
                continue;
            }
        };
        let (mut dirs, mut files, mut enter) = (Vec::new(), Vec::new(), Vec::new());
        for name in entries.iter().map(py_str).filter(|n| n != "." && n != "..") {
            let path = format!("{root}/{name}");
            let p = probe(env, &path)?;
            if p.dir {
                if !p.link {
                    enter.push(path);
                }
                dirs.push(name);
            } else {
                files.push(name);
            }
        }
        // Entered in order: the stack takes the last first.
        stack.extend(enter.into_iter().rev());
        out.push((root, dirs, files));
    }
    Ok(out)
}

const RECURSE_TYPES: [&str; 6] = [
    "user",
    "group",
    "mode",
    "ignore_files",
    "ignore_dirs",
    "silent",
];

/// `_get_recurse_set`: the `recurse` list checked; `Err` is Salt's
/// message.
pub(crate) fn recurse_set(recurse: &Value) -> Result<Vec<String>, String> {
    let items = match recurse {
        v if !crate::py::truthy(v) => return Ok(Vec::new()),
        Value::Array(a) => a,
        _ => return Err("\"recurse\" must be formed as a list of strings".into()),
    };
    let set: Vec<String> = items.iter().map(py_str).collect();
    if items.iter().any(|v| !v.is_string())
        || set.iter().any(|s| !RECURSE_TYPES.contains(&s.as_str()))
    {
        let names: Vec<String> = RECURSE_TYPES.iter().map(|t| format!("\"{t}\"")).collect();
        return Err(format!(
            "Types for \"recurse\" limited to {}.",
            names.join(", ")
        ));
    }
    if set.iter().any(|s| s == "ignore_files") && set.iter().any(|s| s == "ignore_dirs") {
        return Err("Must not specify \"recurse\" options \"ignore_files\" and \"ignore_dirs\" at the same time.".into());
    }
    Ok(set)
}
