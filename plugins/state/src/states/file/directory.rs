//! `file.directory`, as Salt 3008.4's state runs it: a directory made
//! (with `makedirs`, its parents), what stands in its way removed or
//! backed up (`force`, `backupname`), and its mode set (`dir_mode`, or
//! `mode`). Made with `file.makedirs`, `file.mkdir`, `file.remove`,
//! `file.rename`, and checked with `file.check_perms`.
//!
//! `recurse` and `clean` walk the tree below; they are not done here
//! (the state fails saying so rather than doing less than asked).

use serde_json::{Map, Value, json};

use super::{
    Probe, Step, arg, call, changes, dirname, error, finish, flag, is_dir, name_of, new_owner,
    normalize_mode, owner, probe, set, start, user_of,
};
use crate::compile::Obj;
use crate::py::{py_str, truthy};
use crate::states::Env;

pub fn directory(low: &Obj, env: &mut Env) -> Result<Obj, String> {
    finish(low, run(low, env))
}

/// `_check_dir_meta`: what differs on `name` (a `file.stats` of it, or
/// `None` when it is missing).
fn dir_meta(
    path: &str,
    st: &Value,
    user: &Value,
    group: &Value,
    mode: &Option<String>,
    follow: bool,
) -> Step<Map<String, Value>> {
    let mut ch = Map::new();
    if st.is_null() {
        ch.insert("directory".into(), json!("new"));
        return Ok(ch);
    }
    owner(path, st, user, group)?;
    if let Some(mode) = mode
        && st["mode"] != json!(mode)
        && (follow || st["type"] != json!("link"))
    {
        ch.insert("mode".into(), json!(mode));
    }
    Ok(ch)
}

/// `_check_directory` without `recurse` or `clean`: `(result, comment,
/// changes)`.
fn check_directory(
    env: &mut Env,
    low: &Obj,
    name: &str,
    user: &Value,
    mode: &Option<String>,
) -> Step<(Value, String, Map<String, Value>)> {
    let follow = flag(low, "follow_symlinks", false);
    let group = arg(low, "group");
    let mut ch = Map::new();
    if !flag(low, "children_only", false) {
        let st = match call(
            env,
            "stats",
            &[("path", json!(name)), ("follow_symlinks", json!(follow))],
        ) {
            Ok(st) => st,
            Err(e) => {
                super::denied(e)?;
                Value::Null
            }
        };
        if st.is_null() {
            new_owner(env, name, user, group)?;
        }
        let meta = dir_meta(name, &st, user, group, mode, follow)?;
        if !meta.is_empty() {
            ch.insert(name.into(), Value::Object(meta));
        }
    }
    if !is_dir(env, name)? {
        ch.insert(name.into(), json!({"directory": "new"}));
    }
    if ch.is_empty() {
        return Ok((
            json!(true),
            format!("The directory {name} is in the correct state"),
            ch,
        ));
    }
    let mut comment = String::from("The following files will be changed:\n");
    for (path, c) in &ch {
        for (key, val) in c.as_object().into_iter().flatten() {
            comment.push_str(&format!("{path}: {key} - {}\n", py_str(val)));
        }
    }
    Ok((Value::Null, comment, ch))
}

/// A file or link where the directory should be: moved aside, removed, or
/// refused. `Some` is the state's return.
fn in_the_way(env: &mut Env, low: &Obj, name: &str, p: &Probe, ret: &mut Obj) -> Step<Option<Obj>> {
    let force = flag(low, "force", false);
    let backupname = arg(low, "backupname");
    if !backupname.is_null() {
        let backup = py_str(backupname);
        if probe(env, &backup)?.lexists {
            if !force {
                return Ok(Some(error(
                    ret.clone(),
                    format!("File exists where the backup target {backup} should go"),
                )));
            }
            if env.test {
                changes(ret).insert(
                    "forced".into(),
                    json!(format!(
                        "Existing file at backup path {backup} would be removed"
                    )),
                );
            } else {
                call(env, "remove", &[("path", json!(backup))])?;
            }
        }
        if env.test {
            changes(ret).insert(
                "backup".into(),
                json!(format!("{name} would be renamed to {backup}")),
            );
            changes(ret).insert(name.into(), json!({"directory": "new"}));
            set(
                ret,
                "comment",
                json!(format!(
                    "{name} would be backed up and replaced with a new directory"
                )),
            );
            set(ret, "result", Value::Null);
            return Ok(Some(ret.clone()));
        }
        call(
            env,
            "rename",
            &[("src", json!(name)), ("dst", json!(backup))],
        )?;
    } else if force {
        let what = if p.file {
            "File"
        } else if p.link {
            "Symlink"
        } else {
            "Directory"
        };
        let done = if env.test {
            "would be"
        } else {
            call(env, "remove", &[("path", json!(name))])?;
            "was"
        };
        changes(ret).insert(
            "forced".into(),
            json!(format!("{what} {done} forcibly replaced")),
        );
    } else if p.file {
        return Ok(Some(error(
            ret.clone(),
            format!("Specified location {name} exists and is a file"),
        )));
    } else if p.link {
        return Ok(Some(error(
            ret.clone(),
            format!("Specified location {name} exists and is a symlink"),
        )));
    }
    Ok(None)
}

pub(super) fn run(low: &Obj, env: &mut Env) -> Step<Obj> {
    let mut name = name_of(low);
    let mut ret = start(&name, json!(true));
    if name.is_empty() {
        return Ok(error(ret, "Must provide name to file.directory"));
    }
    if name.ends_with('/') && name != "/" {
        name.pop();
    }
    if !arg(low, "max_depth").is_null() && truthy(arg(low, "clean")) {
        return Ok(error(ret, "Cannot specify both max_depth and clean"));
    }
    let user = user_of(low);
    let mut dir_mode = arg(low, "dir_mode").clone();
    if low.contains_key("mode") && !truthy(&dir_mode) {
        dir_mode = arg(low, "mode").clone();
    }
    let dir_mode = normalize_mode(&dir_mode);
    if !name.starts_with('/') {
        return Ok(error(
            ret,
            format!("Specified file {name} is not an absolute path"),
        ));
    }
    if truthy(arg(low, "recurse")) || truthy(arg(low, "clean")) {
        return Ok(error(
            ret,
            "recurse and clean are not supported by maid's file.directory yet",
        ));
    }
    let p = probe(env, &name)?;
    let allow_symlink = flag(low, "allow_symlink", true);
    let force = flag(low, "force", false);
    if (p.file || (!allow_symlink && p.link) || (force && p.link))
        && let Some(done) = in_the_way(env, low, &name, &p, &mut ret)?
    {
        return Ok(done);
    }
    let (tresult, tcomment, tchanges) = check_directory(env, low, &name, &user, &dir_mode)?;
    changes(&mut ret).extend(tchanges);
    if env.test || changes(&mut ret).is_empty() {
        set(&mut ret, "result", tresult);
        set(&mut ret, "comment", json!(tcomment));
        return Ok(ret);
    }
    let mode = dir_mode.clone().map_or(Value::Null, Value::String);
    if !is_dir(env, &name)? {
        if !is_dir(env, &dirname(&name))? {
            if !flag(low, "makedirs", false) {
                return Ok(error(ret, format!("No directory to create {name} in")));
            }
            call(
                env,
                "makedirs",
                &[("path", json!(name)), ("mode", mode.clone())],
            )?;
        }
        call(env, "mkdir", &[("dir_path", json!(name)), ("mode", mode)])?;
        if !is_dir(env, &name)? {
            return Ok(error(ret, format!("Failed to create directory {name}")));
        }
        changes(&mut ret).insert(name.clone(), json!({"directory": "new"}));
        return Ok(ret);
    }
    let children_only = flag(low, "children_only", false);
    if !children_only {
        let kw = [
            ("name", json!(name)),
            ("ret", Value::Object(ret.clone())),
            ("user", user.clone()),
            ("group", arg(low, "group").clone()),
            ("mode", mode),
            (
                "follow_symlinks",
                json!(flag(low, "follow_symlinks", false)),
            ),
        ];
        let out = call(env, "check_perms", &kw)?;
        ret = out
            .get(0)
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or(ret);
    }
    let comment = ret.get("comment").map(py_str).unwrap_or_default();
    if comment.is_empty() {
        if children_only {
            set(
                &mut ret,
                "comment",
                json!(format!("Directory {name}/* updated")),
            );
        } else if !changes(&mut ret).is_empty() {
            set(
                &mut ret,
                "comment",
                json!(format!("Directory {name} updated")),
            );
        }
    }
    if changes(&mut ret).is_empty() && ret.get("result") == Some(&json!(true)) {
        let mut c = format!("Directory {name} is in the correct state");
        if !comment.is_empty() {
            c = format!("{c}\n{comment}");
        }
        set(&mut ret, "comment", json!(c));
    }
    Ok(ret)
}
