//! `file.directory`, as Salt 3008.4's state runs it: a directory made
//! (with `makedirs`, its parents), what stands in its way removed or
//! backed up (`force`, `backupname`), and its mode set (`dir_mode`, or
//! `mode`). Made with `file.makedirs`, `file.mkdir`, `file.remove`,
//! `file.rename`, and checked with `file.check_perms`.
//!
//! `recurse` walks the tree below (`file.readdir`); `clean` is not done
//! here (the state fails saying so rather than doing less than asked).

use serde_json::{Map, Value, json};

use super::walk::{recurse_set, walk};
use super::{
    Probe, Step, Stop, arg, call, changes, dirname, error, finish, flag, is_dir, name_of,
    new_owner, normalize_mode, owner, probe, set, start, user_of,
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

/// What the state asks of the directory (and, with `recurse`, of what
/// is below it).
struct Want {
    user: Value,
    group: Value,
    dir_mode: Option<String>,
    file_mode: Option<String>,
    /// `_get_recurse_set(recurse)`, or Salt's message for why not.
    recurse: Result<Vec<String>, String>,
    max_depth: Option<u64>,
    follow: bool,
    children_only: bool,
}

impl Want {
    fn has(&self, key: &str) -> bool {
        self.recurse
            .as_ref()
            .is_ok_and(|r| r.iter().any(|k| k == key))
    }

    fn recursing(&self) -> bool {
        self.recurse.as_ref().map_or(true, |r| !r.is_empty())
    }
}

fn stats_or_null(env: &mut Env, path: &str, follow: bool) -> Step<Value> {
    match call(
        env,
        "stats",
        &[("path", json!(path)), ("follow_symlinks", json!(follow))],
    ) {
        Ok(st) => Ok(st),
        Err(e) => {
            super::denied(e)?;
            Ok(Value::Null)
        }
    }
}

/// The files and directories below `name` whose owner or mode differs
/// (`_check_directory`'s `recurse`).
fn check_below(env: &mut Env, name: &str, w: &Want, ch: &mut Map<String, Value>) -> Step<()> {
    let (user, group) = (
        if w.has("user") {
            w.user.clone()
        } else {
            Value::Null
        },
        if w.has("group") {
            w.group.clone()
        } else {
            Value::Null
        },
    );
    let (dir_mode, file_mode) = match w.has("mode") {
        true => (w.dir_mode.clone(), w.file_mode.clone()),
        false => (None, None),
    };
    for (root, dirs, files) in walk(env, name, w.max_depth)? {
        if !w.has("ignore_files") {
            for f in &files {
                let path = format!("{root}/{f}");
                let st = call(
                    env,
                    "stats",
                    &[("path", json!(path)), ("follow_symlinks", json!(w.follow))],
                )?;
                owner(&path, &st, &user, &group)?;
                if let Some(mode) = &file_mode
                    && st["mode"] != json!(mode)
                    && (w.follow || st["type"] != json!("link"))
                {
                    ch.insert(path, json!({ "mode": mode }));
                }
            }
        }
        if !w.has("ignore_dirs") {
            for d in &dirs {
                let path = format!("{root}/{d}");
                let st = stats_or_null(env, &path, w.follow)?;
                let meta = dir_meta(&path, &st, &user, &group, &dir_mode, w.follow)?;
                if !meta.is_empty() {
                    ch.insert(path, Value::Object(meta));
                }
            }
        }
    }
    Ok(())
}

/// `_check_directory` (without `clean`): `(result, comment, changes)`.
fn check_directory(
    env: &mut Env,
    name: &str,
    w: &Want,
) -> Step<(Value, String, Map<String, Value>)> {
    let mut ch = Map::new();
    let (mut user, mut group, mut dir_mode) = (w.user.clone(), w.group.clone(), w.dir_mode.clone());
    if w.recursing() {
        if let Err(why) = &w.recurse {
            return Ok((json!(false), why.clone(), ch));
        }
        check_below(env, name, w, &mut ch)?;
        // Salt's own quirk: what recurse leaves out is left out of the
        // directory's own check too.
        if !w.has("user") {
            user = Value::Null;
        }
        if !w.has("group") {
            group = Value::Null;
        }
        if !w.has("mode") {
            dir_mode = None;
        }
    }
    if !w.children_only {
        let st = stats_or_null(env, name, w.follow)?;
        if st.is_null() {
            new_owner(env, name, &user, &group)?;
        }
        let meta = dir_meta(name, &st, &user, &group, &dir_mode, w.follow)?;
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

/// `file.check_perms` on `path`, into `ret`.
fn check_perms(
    env: &mut Env,
    ret: &mut Obj,
    path: &str,
    w: &Want,
    user: &Value,
    group: &Value,
    mode: &Option<String>,
) -> Step<()> {
    let kw = [
        ("name", json!(path)),
        ("ret", Value::Object(ret.clone())),
        ("user", user.clone()),
        ("group", group.clone()),
        ("mode", mode.clone().map_or(Value::Null, Value::String)),
        ("follow_symlinks", json!(w.follow)),
    ];
    let out = call(env, "check_perms", &kw)?;
    if let Some(r) = out.get(0).and_then(Value::as_object) {
        *ret = r.clone();
    }
    Ok(())
}

/// After the directory itself, what `recurse` sets below it; the
/// errors met on the way.
fn recurse_below(env: &mut Env, ret: &mut Obj, name: &str, w: &Want) -> Step<Vec<String>> {
    let mut errors = Vec::new();
    let (mut user, mut group) = (Value::Null, Value::Null);
    for (key, want, slot) in [
        ("user", &w.user, &mut user),
        ("group", &w.group, &mut group),
    ] {
        if !w.has(key) {
            continue;
        }
        if crate::py::truthy(want) || want.is_number() {
            *slot = want.clone();
        } else {
            set(ret, "result", json!(false));
            let msg = format!(
                "{key} not specified, but configured as a target for recursive ownership management"
            );
            set(ret, "comment", json!(msg));
        }
    }
    let (dir_mode, file_mode) = match w.has("mode") {
        true => (w.dir_mode.clone(), w.file_mode.clone()),
        false => (None, None),
    };
    if w.has("silent") {
        set(ret, "changes", json!({"recursion": "Changes silenced"}));
    }
    for (root, dirs, files) in walk(env, name, w.max_depth)? {
        let mut todo: Vec<(String, &Option<String>)> = Vec::new();
        if !w.has("ignore_files") {
            todo.extend(files.iter().map(|f| (format!("{root}/{f}"), &file_mode)));
        }
        if !w.has("ignore_dirs") {
            todo.extend(dirs.iter().map(|d| (format!("{root}/{d}"), &dir_mode)));
        }
        for (path, mode) in todo {
            match check_perms(env, ret, &path, w, &user, &group, mode) {
                Ok(()) => {}
                Err(Stop::Failed(m) | Stop::Raised(m)) if !m.starts_with("Path not found") => {
                    errors.push(m)
                }
                Err(Stop::Failed(_) | Stop::Raised(_)) => {}
                Err(denied) => return Err(denied),
            }
        }
    }
    Ok(errors)
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

/// The state's arguments as Salt reads them (`mode` for `dir_mode`,
/// `dir_mode` for `file_mode`).
fn want(low: &Obj) -> Want {
    let mut dir_mode = arg(low, "dir_mode").clone();
    if low.contains_key("mode") && !truthy(&dir_mode) {
        dir_mode = arg(low, "mode").clone();
    }
    let mut file_mode = arg(low, "file_mode").clone();
    if !truthy(&file_mode) {
        file_mode = dir_mode.clone();
    }
    Want {
        user: user_of(low),
        group: arg(low, "group").clone(),
        dir_mode: normalize_mode(&dir_mode),
        file_mode: normalize_mode(&file_mode),
        recurse: recurse_set(arg(low, "recurse")),
        max_depth: arg(low, "max_depth").as_u64(),
        follow: flag(low, "follow_symlinks", false),
        children_only: flag(low, "children_only", false),
    }
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
    let w = want(low);
    if !name.starts_with('/') {
        return Ok(error(
            ret,
            format!("Specified file {name} is not an absolute path"),
        ));
    }
    if truthy(arg(low, "clean")) {
        return Ok(error(
            ret,
            "clean is not supported by maid's file.directory yet",
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
    let (tresult, tcomment, tchanges) = check_directory(env, &name, &w)?;
    changes(&mut ret).extend(tchanges);
    if env.test || changes(&mut ret).is_empty() {
        set(&mut ret, "result", tresult);
        set(&mut ret, "comment", json!(tcomment));
        return Ok(ret);
    }
    if !is_dir(env, &name)? {
        return make(env, low, ret, &name, &w);
    }
    if !w.children_only {
        check_perms(env, &mut ret, &name, &w, &w.user, &w.group, &w.dir_mode)?;
    }
    let errors = if w.recursing() {
        recurse_below(env, &mut ret, &name, &w)?
    } else {
        Vec::new()
    };
    if ret
        .get("comment")
        .map(py_str)
        .unwrap_or_default()
        .is_empty()
    {
        if w.children_only {
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
        let orig = ret.get("comment").map(py_str).unwrap_or_default();
        let mut c = format!("Directory {name} is in the correct state");
        if !orig.is_empty() {
            c = format!("{c}\n{orig}");
        }
        set(&mut ret, "comment", json!(c));
    }
    if !errors.is_empty() {
        set(&mut ret, "result", json!(false));
        let mut c = ret.get("comment").map(py_str).unwrap_or_default();
        c.push_str("\n\nThe following errors were encountered:\n");
        for e in errors {
            c.push_str(&format!("\n- {e}"));
        }
        set(&mut ret, "comment", json!(c));
    }
    Ok(ret)
}

/// The directory is missing: made (with its parents, given `makedirs`).
fn make(env: &mut Env, low: &Obj, mut ret: Obj, name: &str, w: &Want) -> Step<Obj> {
    let mode = w.dir_mode.clone().map_or(Value::Null, Value::String);
    if !is_dir(env, &dirname(name))? {
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
    if !is_dir(env, name)? {
        return Ok(error(ret, format!("Failed to create directory {name}")));
    }
    changes(&mut ret).insert(name.to_string(), json!({"directory": "new"}));
    Ok(ret)
}
