//! `file.append`, `file.replace` and `file.touch`, as Salt 3008.4's states
//! run them: the lines looked for with `file.search`, added with
//! `file.append`; the regex applied by `file.replace` (a dry run under
//! `test=True`); the file made or its times set by `file.touch`.

use serde_json::{Value, json};

use super::difflib::{is_text, str_splitlines, unified_diff};
use super::managed::validate_str_list;
use super::{
    Step, arg, call, changes, dirname, error, fetch_bytes, finish, flag, is_dir, name_of, probe,
    set, start,
};
use crate::compile::Obj;
use crate::py::{py_str, truthy};
use crate::states::Env;

pub fn touch(low: &Obj, env: &mut Env) -> Result<Obj, String> {
    let name = name_of(low);
    let out = touch_ret(
        env,
        &name,
        arg(low, "atime"),
        arg(low, "mtime"),
        flag(low, "makedirs", false),
    );
    finish(low, out)
}

pub fn append(low: &Obj, env: &mut Env) -> Result<Obj, String> {
    finish(low, run_append(low, env))
}

pub fn replace(low: &Obj, env: &mut Env) -> Result<Obj, String> {
    finish(low, run_replace(low, env))
}

/// `_check_touch`: what `test=True` says.
fn check_touch(env: &mut Env, name: &str, atime: &Value, mtime: &Value) -> Step<Obj> {
    let mut ret = Obj::new();
    ret.insert("result".into(), Value::Null);
    ret.insert("comment".into(), json!(""));
    ret.insert("changes".into(), json!({"new": name}));
    if !probe(env, name)?.exists {
        set(
            &mut ret,
            "comment",
            json!(format!("File {name} is set to be created")),
        );
        return Ok(ret);
    }
    let st = call(
        env,
        "stats",
        &[("path", json!(name)), ("follow_symlinks", json!(false))],
    )?;
    let differs = |want: &Value, have: &Value| !want.is_null() && py_str(want) != py_str(have);
    if differs(atime, &st["atime"]) || differs(mtime, &st["mtime"]) {
        set(
            &mut ret,
            "comment",
            json!(format!("Times set to be updated on file {name}")),
        );
        set(&mut ret, "changes", json!({"touched": name}));
    } else {
        set(&mut ret, "result", json!(true));
        set(
            &mut ret,
            "comment",
            json!(format!("File {name} exists and has the correct times")),
        );
    }
    Ok(ret)
}

/// The `file.touch` state (also what `file.append` does to a missing file).
fn touch_ret(env: &mut Env, name: &str, atime: &Value, mtime: &Value, makedirs: bool) -> Step<Obj> {
    let mut ret = Obj::new();
    ret.insert("name".into(), json!(name));
    ret.insert("changes".into(), json!({}));
    if name.is_empty() {
        return Ok(error(ret, "Must provide name to file.touch"));
    }
    if !name.starts_with('/') {
        return Ok(error(
            ret,
            format!("Specified file {name} is not an absolute path"),
        ));
    }
    if env.test {
        ret.extend(check_touch(env, name, atime, mtime)?);
        return Ok(ret);
    }
    if makedirs {
        call(env, "makedirs", &[("path", json!(name))])?;
    }
    if !is_dir(env, &dirname(name))? {
        return Ok(error(
            ret,
            format!("Directory not present to touch file {name}"),
        ));
    }
    let extant = probe(env, name)?.exists;
    let result = call(
        env,
        "touch",
        &[
            ("name", json!(name)),
            ("atime", atime.clone()),
            ("mtime", mtime.clone()),
        ],
    )?;
    set(&mut ret, "result", result.clone());
    if truthy(&result) {
        if extant {
            let what = if is_dir(env, name)? {
                "directory"
            } else {
                "file"
            };
            set(
                &mut ret,
                "comment",
                json!(format!("Updated times on {what} {name}")),
            );
            changes(&mut ret).insert("touched".into(), json!(name));
        } else {
            set(
                &mut ret,
                "comment",
                json!(format!("Created empty file {name}")),
            );
            changes(&mut ret).insert("new".into(), json!(name));
        }
    }
    Ok(ret)
}

/// `shlex.shlex(line)` with `whitespace_split` and no comments, as
/// `build_whitespace_split_regex` cuts a line into words (Python's
/// non-POSIX mode: a quoted word keeps its quotes).
fn shlex_words(line: &str) -> Result<Vec<String>, String> {
    let quotes: &[char] = if line.contains("'\\\"") {
        &[]
    } else if line.contains('\'') {
        &['"']
    } else if line.contains('"') {
        &['\'']
    } else {
        &['\'', '"']
    };
    let mut words = Vec::new();
    let mut chars = line.chars();
    let mut word = String::new();
    while let Some(c) = chars.next() {
        if " \t\r\n".contains(c) {
            if !word.is_empty() {
                words.push(std::mem::take(&mut word));
            }
        } else if word.is_empty() && quotes.contains(&c) {
            word.push(c);
            loop {
                match chars.next() {
                    None => return Err("No closing quotation".into()),
                    Some(q) if q == c => {
                        word.push(q);
                        break;
                    }
                    Some(other) => word.push(other),
                }
            }
            words.push(std::mem::take(&mut word));
        } else {
            word.push(c);
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    Ok(words)
}

/// `salt.utils.stringutils.build_whitespace_split_regex`.
fn whitespace_split_regex(text: &str) -> Result<String, String> {
    let mut regex = String::new();
    for line in str_splitlines(text) {
        let parts: Vec<String> = shlex_words(&line)?
            .iter()
            .map(|w| regex::escape(w))
            .collect();
        regex.push_str(&format!(
            r"(?:[\s]+)?{}(?:[\s]+)?",
            parts.join(r"(?:[\s]+)?")
        ));
    }
    Ok(format!("(?m)^{regex}$"))
}

/// `_get_template_texts`: each source rendered; `Err` is the return.
fn template_texts(env: &mut Env, low: &Obj, sources: &[Value]) -> Step<Result<Vec<String>, Obj>> {
    let mut ret = start("_get_template_texts", json!(true));
    ret.insert("data".into(), json!([]));
    let mut texts = Vec::new();
    let template = low.get("template").map_or("jinja".into(), py_str);
    let saltenv = low.get("__env__").map_or("base".into(), py_str);
    for source in sources {
        let source = py_str(source);
        let Some(bytes) = fetch_bytes(&source, &saltenv)? else {
            set(&mut ret, "name", json!(source));
            return Ok(Err(error(
                ret,
                format!("Failed to load template file {source}"),
            )));
        };
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let text = if template == "jinja" {
            let ctx = crate::render::context(
                env.grains.clone(),
                Default::default(),
                saltenv.clone(),
                Vec::new(),
            );
            let path = source.trim_start_matches("salt://");
            crate::render::jinja(&ctx, &text, path, &saltenv).map_err(super::Stop::Raised)?
        } else {
            text
        };
        texts.push(text);
    }
    Ok(Ok(texts))
}

/// The diff `file.append` shows between the lines before and after.
fn append_diff(
    env: &mut Env,
    name: &str,
    before: &[String],
    after: &[String],
    show_changes: bool,
) -> Step<String> {
    let bytes = call(
        env,
        "read",
        &[("path", json!(name)), ("binary", json!(true))],
    )?;
    Ok(if !is_text(py_str(&bytes).as_bytes()) {
        "Replace binary file".into()
    } else if !show_changes {
        "<show_changes=False>".into()
    } else {
        unified_diff(before, after, "\n").join("\n")
    })
}

fn read_lines(env: &mut Env, name: &str) -> Step<Vec<String>> {
    Ok(str_splitlines(&py_str(&call(
        env,
        "read",
        &[("path", json!(name))],
    )?)))
}

fn run_append(low: &Obj, env: &mut Env) -> Step<Obj> {
    let name = name_of(low);
    let mut ret = start(&name, json!(false));
    if name.is_empty() {
        return Ok(error(ret, "Must provide name to file.append"));
    }
    let (source, sources) = (arg(low, "source"), arg(low, "sources"));
    if truthy(source) && truthy(sources) {
        return Ok(error(ret, "source and sources are mutually exclusive"));
    }
    if truthy(arg(low, "source_hash")) && truthy(arg(low, "source_hashes")) {
        return Ok(error(
            ret,
            "source_hash and source_hashes are mutually exclusive",
        ));
    }
    let sl: Vec<Value> = if truthy(source) {
        vec![source.clone()]
    } else {
        sources.as_array().cloned().unwrap_or_default()
    };
    let makedirs = low.get("makedirs") == Some(&json!(true));
    if makedirs {
        let parent = dirname(&name);
        if env.test {
            set(
                &mut ret,
                "comment",
                json!(format!("Directory {parent} is set to be updated")),
            );
            set(&mut ret, "result", Value::Null);
        } else if !is_dir(env, &parent)? {
            call(env, "makedirs", &[("path", json!(name))])?;
            if !is_dir(env, &parent)? {
                set(
                    &mut ret,
                    "changes",
                    json!({ parent.clone(): {"directory": "new"} }),
                );
                return Ok(error(
                    ret,
                    format!("The following files will be changed:\n{parent}: directory - new\n"),
                ));
            }
        }
    }
    let check = if !name.starts_with('/') {
        Some(format!("Specified file {name} is not an absolute path"))
    } else if !probe(env, &name)?.exists {
        Some(format!("{name}: file not found"))
    } else {
        None
    };
    if let Some(msg) = check {
        let touched = touch_ret(env, &name, &Value::Null, &Value::Null, makedirs)?;
        if env.test {
            return Ok(touched);
        }
        if !name.starts_with('/') || !probe(env, &name)?.exists {
            return Ok(error(ret, msg));
        }
    }
    let text = if sl.is_empty() {
        arg(low, "text").clone()
    } else {
        match template_texts(env, low, &sl)? {
            Ok(texts) => json!(texts),
            Err(failed) => return Ok(failed),
        }
    };
    append_lines(low, env, ret, &name, &validate_str_list(&text))
}

/// The lines of `text` not yet in the file, added (or, under `test`,
/// said to be).
fn append_lines(low: &Obj, env: &mut Env, mut ret: Obj, name: &str, text: &[String]) -> Step<Obj> {
    let slines = read_lines(env, name)?;
    let mut lines = Vec::new();
    for chunk in text {
        let pattern = if flag(low, "ignore_whitespace", true) {
            whitespace_split_regex(chunk).map_err(super::Stop::Raised)?
        } else {
            chunk.clone()
        };
        let found = call(
            env,
            "search",
            &[
                ("path", json!(name)),
                ("pattern", json!(pattern)),
                ("multiline", json!(true)),
            ],
        )?;
        if truthy(&found) {
            continue;
        }
        lines.extend(str_splitlines(chunk));
    }
    let show_changes = flag(low, "show_changes", true);
    if env.test {
        set(
            &mut ret,
            "comment",
            json!(format!("File {name} is set to be updated")),
        );
        set(&mut ret, "result", Value::Null);
        let nlines: Vec<String> = slines.iter().chain(&lines).cloned().collect();
        if slines != nlines {
            let diff = append_diff(env, name, &slines, &nlines, show_changes)?;
            changes(&mut ret).insert("diff".into(), json!(diff));
        } else {
            set(
                &mut ret,
                "comment",
                json!(format!("File {name} is in correct state")),
            );
            set(&mut ret, "result", json!(true));
        }
        return Ok(ret);
    }
    if lines.is_empty() {
        set(
            &mut ret,
            "comment",
            json!(format!("File {name} is in correct state")),
        );
    } else {
        call(
            env,
            "append",
            &[("path", json!(name)), ("args", json!(lines))],
        )?;
        set(
            &mut ret,
            "comment",
            json!(format!("Appended {} lines", lines.len())),
        );
    }
    let nlines = read_lines(env, name)?;
    if slines != nlines {
        let diff = append_diff(env, name, &slines, &nlines, show_changes)?;
        changes(&mut ret).insert("diff".into(), json!(diff));
    }
    set(&mut ret, "result", json!(true));
    Ok(ret)
}

fn run_replace(low: &Obj, env: &mut Env) -> Step<Obj> {
    let name = name_of(low);
    let mut ret = start(&name, json!(true));
    if name.is_empty() {
        return Ok(error(ret, "Must provide name to file.replace"));
    }
    let missing = if !name.starts_with('/') {
        Some(format!("Specified file {name} is not an absolute path"))
    } else if !probe(env, &name)?.exists {
        Some(format!("{name}: file not found"))
    } else {
        None
    };
    if let Some(msg) = missing {
        if flag(low, "ignore_if_missing", false) && msg.contains("file not found") {
            set(&mut ret, "comment", json!("No changes needed to be made"));
            return Ok(ret);
        }
        return Ok(error(ret, msg));
    }
    let mut kw: Vec<(&str, Value)> = vec![("path", json!(name)), ("dry_run", json!(env.test))];
    for key in [
        "pattern",
        "repl",
        "count",
        "flags",
        "bufsize",
        "append_if_not_found",
        "prepend_if_not_found",
        "not_found_content",
        "backup",
        "show_changes",
        "ignore_if_missing",
        "backslash_literal",
        "encoding",
    ] {
        if let Some(v) = low.get(key) {
            kw.push((key, v.clone()));
        }
    }
    let diff = call(env, "replace", &kw)?;
    if truthy(&diff) {
        changes(&mut ret).insert("diff".into(), diff);
        if env.test {
            set(&mut ret, "result", Value::Null);
            set(&mut ret, "comment", json!("Changes would have been made"));
        } else {
            set(&mut ret, "comment", json!("Changes were made"));
        }
    } else {
        set(&mut ret, "comment", json!("No changes needed to be made"));
    }
    Ok(ret)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_cut_as_shlex_cuts_them() {
        assert_eq!(shlex_words("a  b\tc").unwrap(), ["a", "b", "c"]);
        // A line with a double quote quotes with single ones only, and
        // one with a single quote with double ones.
        assert_eq!(
            shlex_words("say \"hi there\"x").unwrap(),
            ["say", "\"hi", "there\"x"]
        );
        assert_eq!(
            shlex_words("it's \"a b\"c").unwrap(),
            ["it's", "\"a b\"", "c"]
        );
        assert!(shlex_words("it's \"b").is_err());
    }
}
