//! `file.recurse`, as Salt 3008.4's state runs it: every file under a
//! `salt://` directory managed below `name` (`file.managed` with
//! `makedirs`), and every directory holding one made (`file.directory`).
//!
//! Which files a `salt://` directory holds Salt learns from the file
//! server (`cp.list_master`, `cp.list_master_dirs`); maid's host can
//! only open a `salt://` path, not list one, so those calls are made as
//! Salt makes them and, until a module answers them, the state fails
//! saying why ("Recurse failed: ..."). `clean`, `keep_symlinks` and
//! `merge` are not done (they fail saying so).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::managed::validate_str_list;
use super::{
    CallError, Step, Stop, arg, changes, directory, error, finish, flag, managed, name_of,
    normalize_mode, set, user_of,
};
use crate::compile::Obj;
use crate::py::{py_str, truthy};
use crate::states::{Env, salt};

pub fn recurse(low: &Obj, env: &mut Env) -> Result<Obj, String> {
    finish(low, run(low, env))
}

/// `salt.utils.stringutils.check_include_exclude`: globs, or `E@` regexes.
fn include_exclude(path: &str, include: &Value, exclude: &Value) -> bool {
    let check = |pat: &str| match pat.strip_prefix("E@") {
        Some(re) => regex::Regex::new(re).is_ok_and(|r| r.is_match(path)),
        None => maid_sdk::salt::fnmatch(path, pat),
    };
    let list = |v: &Value| -> Vec<String> {
        match v {
            Value::Array(a) => a.iter().map(py_str).collect(),
            other => vec![py_str(other)],
        }
    };
    let inc = truthy(include).then(|| list(include).iter().any(|p| check(p)));
    let exc = truthy(exclude).then(|| list(exclude).iter().all(|p| !check(p)));
    inc.unwrap_or(true) && exc.unwrap_or(true)
}

/// A listing of the file server (`cp.list_master*`), as Salt asks it.
fn list(
    env: &mut Env,
    fun: &str,
    saltenv: &str,
    prefix: &str,
) -> Step<Result<Vec<String>, String>> {
    match salt(env, fun, &[json!(saltenv), json!(prefix)], &[]) {
        Ok(Value::Array(a)) => Ok(Ok(a.iter().map(py_str).collect())),
        Ok(other) => Ok(Err(format!("{fun} returned {}", py_str(&other)))),
        Err(CallError::Denied(m)) => Err(Stop::Denied(m)),
        Err(CallError::Failed(m)) => Ok(Err(m)),
    }
}

/// `_filter_recurse_sources`: the `salt://` directories that exist.
fn sources(env: &mut Env, source: &Value, saltenv: &str) -> Step<Result<Vec<String>, String>> {
    let list_: Vec<String> = validate_str_list(source)
        .iter()
        .map(|s| s.trim_end_matches('/').to_string())
        .collect();
    if let Some(bad) = list_.iter().find(|s| !s.starts_with("salt://")) {
        return Ok(Err(format!(
            "Invalid source '{bad}' (must be a salt:// URI)"
        )));
    }
    let dirs = match list(env, "cp.list_master_dirs", saltenv, "")? {
        Ok(d) => d,
        Err(why) => return Ok(Err(why)),
    };
    let found: Vec<String> = list_
        .into_iter()
        .filter(|s| dirs.contains(&s["salt://".len()..].to_string()))
        .collect();
    if found.is_empty() {
        return Ok(Err("none of the specified sources were found".into()));
    }
    Ok(Ok(found))
}

/// `_is_valid_relpath`.
fn valid_relpath(rel: &str, maxdepth: &Value) -> bool {
    if format!("/{rel}/").contains("/../") {
        return false;
    }
    match maxdepth.as_u64() {
        Some(max) => rel.trim_matches('/').matches('/').count() as u64 <= max,
        None => true,
    }
}

/// The files (destination → `salt://` source) and directories to manage.
type Plan = (BTreeMap<String, String>, Vec<String>);

/// `_gen_recurse_managed_files` for one source, without symlinks.
fn plan(
    env: &mut Env,
    low: &Obj,
    name: &str,
    source: &str,
    saltenv: &str,
) -> Step<Result<Plan, String>> {
    let root = format!("{}/", &source["salt://".len()..]);
    let files = match list(env, "cp.list_master", saltenv, &root)? {
        Ok(f) => f,
        Err(why) => return Ok(Err(why)),
    };
    let (include, exclude, maxdepth) = (
        arg(low, "include_pat"),
        arg(low, "exclude_pat"),
        arg(low, "maxdepth"),
    );
    let relative = |path: &str| -> Option<String> {
        let rel = path.strip_prefix(&root)?.to_string();
        (!rel.trim().is_empty()
            && valid_relpath(&rel, maxdepth)
            && include_exclude(&rel, include, exclude))
        .then_some(rel)
    };
    let mut managed_files = BTreeMap::new();
    let mut dirs: Vec<String> = Vec::new();
    for f in &files {
        let Some(rel) = relative(f) else { continue };
        let dest = format!("{name}/{rel}");
        let parent = super::dirname(&dest);
        if !dirs.contains(&parent) {
            dirs.push(parent);
        }
        managed_files.insert(dest, format!("salt://{f}"));
    }
    if flag(low, "include_empty", false) {
        let mdirs = match list(env, "cp.list_master_dirs", saltenv, &root)? {
            Ok(d) => d,
            Err(why) => return Ok(Err(why)),
        };
        for d in &mdirs {
            if let Some(rel) = relative(d) {
                let dest = format!("{name}/{rel}");
                if !dirs.contains(&dest) {
                    dirs.push(dest);
                }
            }
        }
    }
    Ok(Ok((managed_files, dirs)))
}

/// A chunk for the state run on one path below `name`.
fn sub_low(low: &Obj, path: &str, pairs: &[(&str, Value)]) -> Obj {
    let mut sub = Obj::new();
    sub.insert("name".into(), json!(path));
    sub.insert("__env__".into(), arg(low, "__env__").clone());
    for (k, v) in pairs {
        if !v.is_null() {
            sub.insert((*k).into(), v.clone());
        }
    }
    sub
}

/// Salt's `merge_ret`: the most negative result wins; comments of what
/// was not right, changes by path.
fn merge_ret(ret: &mut Obj, comments: &mut Vec<(String, String)>, path: &str, sub: &Obj) {
    let r = sub.get("result").cloned().unwrap_or(Value::Null);
    if r == json!(false) || ret.get("result") == Some(&json!(true)) {
        set(ret, "result", r.clone());
    }
    let comment = sub.get("comment").map(py_str).unwrap_or_default();
    if r != json!(true) && !comment.is_empty() {
        comments.push((path.to_string(), comment));
    }
    if let Some(c) = sub.get("changes").filter(|c| truthy(c)) {
        changes(ret).insert(path.to_string(), c.clone());
    }
}

fn run(low: &Obj, env: &mut Env) -> Step<Obj> {
    let name = name_of(low);
    let mut ret = super::start(&name, json!(true));
    set(&mut ret, "comment", json!({}));
    if low.contains_key("mode") {
        return Ok(error(
            ret,
            "'mode' is not allowed in 'file.recurse'. Please use 'file_mode' and 'dir_mode'.",
        ));
    }
    let dir_mode = normalize_mode(arg(low, "dir_mode"));
    let file_mode = arg(low, "file_mode");
    let keep_mode = file_mode
        .as_str()
        .is_some_and(|m| m.to_lowercase() == "keep");
    let file_mode = if keep_mode {
        Some("keep".to_string())
    } else {
        normalize_mode(file_mode)
    };
    if !name.starts_with('/') {
        return Ok(error(
            ret,
            format!("Specified file {name} is not an absolute path"),
        ));
    }
    for unsupported in ["clean", "keep_symlinks", "merge"] {
        if flag(low, unsupported, false) {
            return Ok(error(
                ret,
                format!("{unsupported} is not supported by maid's file.recurse yet"),
            ));
        }
    }
    let saltenv = low.get("__env__").map_or("base".into(), py_str);
    let found = match sources(env, arg(low, "source"), &saltenv)? {
        Ok(s) => s,
        Err(why) => return Ok(error(ret, format!("Recurse failed: {why}"))),
    };
    let (files, dirs) = match plan(env, low, &name, &found[0], &saltenv)? {
        Ok(p) => p,
        Err(why) => return Ok(error(ret, format!("Recurse failed: {why}"))),
    };
    let p = super::probe(env, &name)?;
    if !p.dir {
        if p.exists {
            return Ok(error(
                ret,
                format!("The path {name} exists and is not a directory"),
            ));
        }
        if !env.test {
            let mode = dir_mode.clone().map_or(json!("0755"), Value::String);
            let kw = [
                ("name", json!(name)),
                ("user", user_of(low)),
                ("group", arg(low, "group").clone()),
                ("mode", mode),
            ];
            super::call(env, "makedirs_perms", &kw)?;
        }
    }
    let modes = (dir_mode, file_mode);
    let comments = manage_all(env, low, &mut ret, &dirs, &files, &modes)?;
    let text: Vec<String> = comments
        .iter()
        .map(|(k, v)| format!("\n#### {k} ####\n{v}"))
        .collect();
    let mut comment = text.join("\n").trim().to_string();
    if comment.is_empty() {
        comment = format!("Recursively updated {name}");
    }
    if changes(&mut ret).is_empty() && ret.get("result") == Some(&json!(true)) {
        comment = format!("The directory {name} is in the correct state");
    }
    set(&mut ret, "comment", json!(comment));
    Ok(ret)
}

/// Every directory with `file.directory`, every file with
/// `file.managed`, merged into `ret`; the comments of what was not right.
fn manage_all(
    env: &mut Env,
    low: &Obj,
    ret: &mut Obj,
    dirs: &[String],
    files: &BTreeMap<String, String>,
    modes: &(Option<String>, Option<String>),
) -> Step<Vec<(String, String)>> {
    let (dir_mode, file_mode) = modes;
    let owners = [("user", user_of(low)), ("group", arg(low, "group").clone())];
    let mut comments = Vec::new();
    for d in dirs {
        let mut pairs = vec![
            (
                "dir_mode",
                dir_mode.clone().map_or(Value::Null, Value::String),
            ),
            ("makedirs", json!(true)),
        ];
        pairs.extend(owners.iter().cloned());
        let sub = directory::run(&sub_low(low, d, &pairs), env)?;
        merge_ret(ret, &mut comments, d, &sub);
    }
    for (dest, src) in files {
        let mut pairs = vec![
            ("source", json!(src)),
            ("mode", file_mode.clone().map_or(Value::Null, Value::String)),
            ("makedirs", json!(true)),
            ("replace", json!(flag(low, "replace", true))),
        ];
        for k in ["template", "context", "defaults", "backup", "show_changes"] {
            pairs.push((k, arg(low, k).clone()));
        }
        pairs.extend(owners.iter().cloned());
        let sub = managed::run(&sub_low(low, dest, &pairs), env)?;
        merge_ret(ret, &mut comments, dest, &sub);
    }
    Ok(comments)
}
