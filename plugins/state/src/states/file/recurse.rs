//! `file.recurse`, as Salt 3008.4's state runs it: every file under a
//! `salt://` directory managed below `name` (`file.managed` with
//! `makedirs`), and every directory holding one made (`file.directory`).
//!
//! Which files a `salt://` directory holds Salt learns from the file
//! server (`cp.list_master`, `cp.list_master_dirs`); maid asks the host's
//! `list-sources` the same questions (`crate::fileserver`), under the state
//! plugin's own `fetch` grant, so a recurse sees only what it could read.
//! `clean` removes what the recurse does not manage, as Salt's
//! `_clean_dir` does (through `file.remove`). Not done, and failing
//! saying so: `keep_symlinks` (the host lists no links as links;
//! `force_symlinks` only matters with it), `merge` (several sources layered), and `clean` with
//! a `require` of another file state (Salt keeps what that state manages,
//! which needs the whole run's low data).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::managed::validate_str_list;
use super::{
    CallError, Step, Stop, arg, changes, directory, error, finish, flag, managed, name_of,
    normalize_mode, set, user_of,
};
use crate::compile::Obj;
use crate::fileserver;
use crate::py::{py_str, truthy};
use crate::states::Env;

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
fn list(fun: &str, saltenv: &str, prefix: &str) -> Step<Result<Vec<String>, String>> {
    let listed = match fun {
        "cp.list_master" => fileserver::file_list(saltenv, prefix),
        _ => fileserver::dir_list(saltenv, prefix),
    };
    match listed {
        Ok(names) => Ok(Ok(names)),
        Err(CallError::Denied(m)) => Err(Stop::Denied(m)),
        Err(CallError::Failed(m)) => Ok(Err(m)),
    }
}

/// `_filter_recurse_sources`: the `salt://` directories that exist.
fn sources(source: &Value, saltenv: &str) -> Step<Result<Vec<String>, String>> {
    let list_: Vec<String> = validate_str_list(source)
        .iter()
        .map(|s| s.trim_end_matches('/').to_string())
        .collect();
    if let Some(bad) = list_.iter().find(|s| !s.starts_with("salt://")) {
        return Ok(Err(format!(
            "Invalid source '{bad}' (must be a salt:// URI)"
        )));
    }
    let dirs = match list("cp.list_master_dirs", saltenv, "")? {
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

/// The files (destination → `salt://` source) and directories to manage,
/// and what `clean` keeps (Salt's `keep`: the files, and the empty
/// directories `include_empty` adds).
type Plan = (BTreeMap<String, String>, Vec<String>, Vec<String>);

/// `_gen_recurse_managed_files` for one source, without symlinks.
fn plan(low: &Obj, name: &str, source: &str, saltenv: &str) -> Step<Result<Plan, String>> {
    let root = format!("{}/", &source["salt://".len()..]);
    let files = match list("cp.list_master", saltenv, &root)? {
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
    let mut keep: Vec<String> = Vec::new();
    for f in &files {
        let Some(rel) = relative(f) else { continue };
        let dest = format!("{name}/{rel}");
        let parent = super::dirname(&dest);
        if !dirs.contains(&parent) {
            dirs.push(parent);
        }
        keep.push(dest.clone());
        managed_files.insert(dest, format!("salt://{f}"));
    }
    if flag(low, "include_empty", false) {
        let mdirs = match list("cp.list_master_dirs", saltenv, &root)? {
            Ok(d) => d,
            Err(why) => return Ok(Err(why)),
        };
        for d in &mdirs {
            if let Some(rel) = relative(d) {
                let dest = format!("{name}/{rel}");
                keep.push(dest.clone());
                if !dirs.contains(&dest) {
                    dirs.push(dest);
                }
            }
        }
    }
    Ok(Ok((managed_files, dirs, keep)))
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

/// The comments of a recurse by path, in the order paths first had one
/// (Salt's `ret["comment"]` dict of lists).
type Comments = Vec<(String, Vec<String>)>;

/// Salt's `add_comment`.
fn add_comment(comments: &mut Comments, path: &str, lines: Vec<String>) {
    match comments.iter_mut().find(|(p, _)| p == path) {
        Some((_, have)) => have.extend(lines),
        None => comments.push((path.to_string(), lines)),
    }
}

/// Salt's `merge_ret`: the most negative result wins; comments of what
/// was not right, changes by path.
fn merge_ret(ret: &mut Obj, comments: &mut Comments, path: &str, sub: &Obj) {
    let r = sub.get("result").cloned().unwrap_or(Value::Null);
    if r == json!(false) || ret.get("result") == Some(&json!(true)) {
        set(ret, "result", r.clone());
    }
    let comment = sub.get("comment").map(py_str).unwrap_or_default();
    if r != json!(true) && !comment.is_empty() {
        add_comment(comments, path, vec![comment]);
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
    for unsupported in ["keep_symlinks", "merge"] {
        if flag(low, unsupported, false) {
            return Ok(error(
                ret,
                format!("{unsupported} is not supported by maid's file.recurse yet"),
            ));
        }
    }
    let clean = flag(low, "clean", false);
    if clean && requires_a_file(arg(low, "require")) {
        return Ok(error(
            ret,
            "clean with a require of a file state is not supported by maid's file.recurse yet",
        ));
    }
    let saltenv = low.get("__env__").map_or("base".into(), py_str);
    let found = match sources(arg(low, "source"), &saltenv)? {
        Ok(s) => s,
        Err(why) => return Ok(error(ret, format!("Recurse failed: {why}"))),
    };
    let (files, dirs, keep) = match plan(low, &name, &found[0], &saltenv)? {
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
    let mut comments = manage_all(env, low, &mut ret, &dirs, &files, &modes, clean)?;
    if clean {
        let removed = clean_dir(env, &name, &keep, arg(low, "exclude_pat"))?;
        report_removed(env, &mut ret, &mut comments, removed);
    }
    let text: Vec<String> = comments
        .iter()
        .map(|(k, v)| format!("\n#### {k} ####\n{}", v.join("\n")))
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

/// What `clean` removed: a change, or under `test=True` a comment (and
/// the result `None`, where it was `True`).
fn report_removed(env: &Env, ret: &mut Obj, comments: &mut Comments, removed: Vec<String>) {
    if removed.is_empty() {
        return;
    }
    if env.test {
        if ret.get("result") == Some(&json!(true)) {
            set(ret, "result", Value::Null);
        }
        add_comment(comments, "removed", removed);
    } else {
        changes(ret).insert("removed".into(), json!(removed));
    }
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
    clean: bool,
) -> Step<Comments> {
    let (dir_mode, file_mode) = modes;
    let owners = [("user", user_of(low)), ("group", arg(low, "group").clone())];
    let mut comments = Vec::new();
    let replace = flag(low, "replace", true);
    for d in dirs {
        if d.rsplit('/').next() == Some("..") {
            continue;
        }
        if clean {
            let p = super::probe(env, d)?;
            if p.exists && !p.dir {
                let why = format!("Replacing {d} with a directory");
                let sub = replace_kind(env, d, why, "Replaced file with a directory")?;
                merge_ret(ret, &mut comments, d, &sub);
                if env.test {
                    continue;
                }
            }
        }
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
        if clean && replace {
            let p = super::probe(env, dest)?;
            if p.exists && p.dir {
                let why = format!("Replacing directory {dest} with a file");
                let sub = replace_kind(env, dest, why, "Replaced directory with a new file")?;
                merge_ret(ret, &mut comments, dest, &sub);
                if env.test {
                    continue;
                }
            }
        }
        let mut pairs = vec![
            ("source", json!(src)),
            ("mode", file_mode.clone().map_or(Value::Null, Value::String)),
            ("makedirs", json!(true)),
            ("replace", json!(replace)),
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

/// `clean` meeting a path of the other kind (a file where a directory
/// belongs, or the reverse): under `test=True` the return saying so, else
/// the path removed (`file.remove`) and the return saying that.
fn replace_kind(env: &mut Env, path: &str, predicted: String, done: &str) -> Step<Obj> {
    let mut sub = Obj::new();
    sub.insert("changes".into(), json!({}));
    sub.insert("result".into(), json!(true));
    sub.insert("comment".into(), json!(""));
    if env.test {
        set(&mut sub, "comment", json!(predicted));
        set(&mut sub, "result", Value::Null);
    } else {
        super::call(env, "remove", &[("path", json!(path))])?;
        set(&mut sub, "changes", json!({ "diff": done }));
    }
    Ok(sub)
}

/// Whether a `require` names a file state (Salt's `_gen_keep_files` then
/// keeps what that state manages).
fn requires_a_file(require: &Value) -> bool {
    match require {
        Value::Array(items) => items
            .iter()
            .any(|i| i.as_object().is_some_and(|o| o.contains_key("file"))),
        _ => false,
    }
}

/// `_find_keep_files`: `root`, each kept path and every directory above
/// one.
fn keep_set(root: &str, keep: &[String]) -> std::collections::BTreeSet<String> {
    let mut real_keep = std::collections::BTreeSet::new();
    real_keep.insert(root.to_string());
    for k in keep.iter().filter(|k| k.starts_with('/')) {
        let mut p = super::normpath(k);
        loop {
            real_keep.insert(p.clone());
            if p == "/" {
                break;
            }
            p = super::dirname(&p);
        }
    }
    real_keep
}

/// `_clean_dir`: every path below `root` that is not kept and that
/// `exclude_pat` does not spare, removed (unless `test=True`) as the walk
/// meets it, top-down (`os.walk`, links to directories not entered); what
/// was (or would be) removed. A directory removed is not walked into, as
/// Salt's walk finds it gone; under `test=True` it is, so its contents are
/// named too, as Salt names them.
fn clean_dir(env: &mut Env, root: &str, keep: &[String], exclude: &Value) -> Step<Vec<String>> {
    let real_keep = keep_set(root, keep);
    let mut removed = Vec::new();
    let mut stack = vec![root.to_string()];
    while let Some(dir) = stack.pop() {
        let entries = match super::call(env, "readdir", &[("path", json!(dir))]) {
            Ok(Value::Array(e)) => e,
            Ok(_) => Vec::new(),
            Err(e) => {
                super::denied(e)?;
                continue;
            }
        };
        let (mut dirs, mut files, mut enter) = (Vec::new(), Vec::new(), Vec::new());
        for name in entries.iter().map(py_str).filter(|n| n != "." && n != "..") {
            let path = format!("{dir}/{name}");
            let p = super::probe(env, &path)?;
            if p.dir {
                if !p.link {
                    enter.push(path.clone());
                }
                dirs.push(path);
            } else {
                files.push(path);
            }
        }
        for path in dirs.into_iter().chain(files) {
            if real_keep.contains(&path) {
                continue;
            }
            let rel = path[root.len()..].trim_start_matches('/');
            if !include_exclude(rel, &Value::Null, exclude) {
                continue;
            }
            if !env.test {
                super::call(env, "remove", &[("path", json!(path))])?;
            }
            removed.push(path);
        }
        // Entered in order (the stack takes the last first); what was
        // removed is gone.
        let gone = |p: &String| !env.test && removed.contains(p);
        let enter: Vec<String> = enter.into_iter().filter(|p| !gone(p)).collect();
        stack.extend(enter.into_iter().rev());
    }
    Ok(removed)
}
