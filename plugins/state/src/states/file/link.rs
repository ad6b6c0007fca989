//! `file.symlink` and `file.absent`, as Salt 3008.4's states run them,
//! through `file.symlink`, `file.readlink`, `file.remove`, `file.rename`
//! and `file.makedirs`.
//!
//! A link's owner cannot be changed (plugins cannot chown): one asked
//! for that the link does not have, or that a new link would not get (the
//! agent's user and group), is refused. Without `user`, Salt takes its
//! own user (`__opts__['user']`); here that is the agent's.

use serde_json::{Map, Value, json};

use super::{
    Step, arg, call, changes, dirname, error, finish, flag, is_dir, name_of, new_owner, normpath,
    owner, probe, set, start, user_of,
};
use crate::compile::Obj;
use crate::py::{py_str, truthy};
use crate::states::Env;

pub fn symlink(low: &Obj, env: &mut Env) -> Result<Obj, String> {
    finish(low, run_symlink(low, env))
}

pub fn absent(low: &Obj, env: &mut Env) -> Result<Obj, String> {
    finish(low, run_absent(low, env))
}

/// The owner a link is checked against: `user` (else the agent's), and
/// `group` (else that user's primary group).
fn link_owner(low: &Obj, env: &mut Env, cur: Option<&Value>) -> (Value, Value) {
    let mut user = user_of(low);
    let mut group = arg(low, "group").clone();
    if flag(low, "inherit_user_and_group", false)
        && let Some(st) = cur
    {
        if user.is_null() {
            user = st["user"].clone();
        }
        if group.is_null() {
            group = st["group"].clone();
        }
    }
    let grain = |k: &str| env.grains.get(k).cloned().unwrap_or(Value::Null);
    if user.is_null() {
        user = grain("username");
    }
    if group.is_null() {
        group = if user == grain("username") {
            grain("groupname")
        } else {
            match crate::states::salt(env, "user.primary_group", &[user.clone()], &[]) {
                Ok(g) if truthy(&g) => g,
                _ => user.clone(),
            }
        };
    }
    (user, group)
}

/// `_symlink_check`: `(result, comment, changes)` for `test=True`.
fn symlink_check(
    env: &mut Env,
    name: &str,
    target: &str,
    force: bool,
    owners: (&Value, &Value),
    follow: bool,
) -> Step<(Value, String, Map<String, Value>)> {
    let mut ch = Map::new();
    let p = probe(env, name)?;
    let exists = if follow { p.exists } else { p.lexists };
    if !exists && !p.link {
        ch.insert("new".into(), json!(name));
        return Ok((
            Value::Null,
            format!("Symlink {name} to {target} is set for creation"),
            ch,
        ));
    }
    if p.link {
        let current = call(env, "readlink", &[("path", json!(name))])?;
        if py_str(&current) != target {
            ch.insert("change".into(), json!(name));
            return Ok((
                Value::Null,
                format!("Link {name} target is set to be changed to {target}"),
                ch,
            ));
        }
        let st = call(
            env,
            "stats",
            &[("path", json!(name)), ("follow_symlinks", json!(false))],
        )?;
        owner(name, &st, owners.0, owners.1)?;
        return Ok((json!(true), format!("The symlink {name} is present"), ch));
    }
    if force {
        return Ok((
            Value::Null,
            format!(
                "The file or directory {name} is set for removal to make way for a new symlink targeting {target}"
            ),
            ch,
        ));
    }
    Ok((
        json!(false),
        format!(
            "File or directory exists where the symlink {name} should be. Did you mean to use force?"
        ),
        ch,
    ))
}

/// A path in the way, moved to `backupname`; `Some` is the state's
/// (failed) return.
fn back_up(env: &mut Env, low: &Obj, name: &str, target: &str, ret: &Obj) -> Step<Option<Obj>> {
    let mut backup = py_str(arg(low, "backupname"));
    if !backup.starts_with('/') {
        if backup.contains('/') {
            return Ok(Some(error(
                ret.clone(),
                format!("Backupname must be an absolute path or a file name: {backup}"),
            )));
        }
        backup = format!("{}/{backup}", dirname(&normpath(name)));
    }
    if probe(env, &backup)?.lexists {
        if !flag(low, "force", false) {
            return Ok(Some(error(
                ret.clone(),
                format!(
                    "Symlink & backup dest exists and Force not set. {name} -> {target} - backup: {backup}"
                ),
            )));
        }
        call(env, "remove", &[("path", json!(backup))])?;
    }
    if let Err(e) = call(
        env,
        "rename",
        &[("src", json!(name)), ("dst", json!(backup))],
    ) {
        let why = super::denied(e)?;
        return Ok(Some(error(
            ret.clone(),
            format!("Unable to rename {name} to backup {backup} -> : {why}"),
        )));
    }
    Ok(None)
}

fn run_symlink(low: &Obj, env: &mut Env) -> Step<Obj> {
    let name = name_of(low);
    let mut ret = start(&name, json!(true));
    if name.is_empty() {
        return Ok(error(ret, "Must provide name to file.symlink"));
    }
    let target = py_str(arg(low, "target"));
    let follow = flag(low, "follow_symlinks", true);
    let (force, atomic) = (flag(low, "force", false), flag(low, "atomic", false));
    let p = probe(env, &name)?;
    let cur = match p.link {
        true => Some(call(
            env,
            "stats",
            &[("path", json!(name)), ("follow_symlinks", json!(false))],
        )?),
        false => None,
    };
    let (user, group) = link_owner(low, env, cur.as_ref());
    if !name.starts_with('/') {
        return Ok(error(
            ret,
            format!("Specified file {name} is not an absolute path"),
        ));
    }
    if !p.link {
        new_owner(env, &name, &user, &group)?;
    }
    let (tresult, mut tcomment, tchanges) =
        symlink_check(env, &name, &target, force, (&user, &group), follow)?;
    if let Some(failed) = parent(env, low, &name, &mut tcomment, &ret)? {
        return Ok(failed);
    }
    if env.test {
        set(&mut ret, "result", tresult);
        set(&mut ret, "comment", json!(tcomment));
        set(&mut ret, "changes", Value::Object(tchanges));
        return Ok(ret);
    }
    let p = probe(env, &name)?;
    if p.link {
        let current = py_str(&call(env, "readlink", &[("path", json!(name))])?);
        if normpath(&current) != normpath(&target) {
            call(env, "remove", &[("path", json!(name))])?;
        } else {
            let comment = format!(
                "Symlink {name} is present and owned by {}:{}",
                py_str(&user),
                py_str(&group)
            );
            set(&mut ret, "comment", json!(comment));
            return Ok(ret);
        }
    } else if if follow { p.exists } else { p.lexists } {
        if !arg(low, "backupname").is_null() {
            if let Some(failed) = back_up(env, low, &name, &target, &ret)? {
                return Ok(failed);
            }
        } else if !force && !atomic {
            let what = if p.file {
                "File"
            } else if p.dir {
                "Directory"
            } else {
                "File system entry"
            };
            return Ok(error(
                ret,
                format!("{what} exists where the symlink {name} should be"),
            ));
        }
    }
    create(env, ret, &name, &target, [force, atomic, follow])
}

/// `file.symlink` makes the link; the state's return says so.
fn create(env: &mut Env, mut ret: Obj, name: &str, target: &str, flags: [bool; 3]) -> Step<Obj> {
    let [force, atomic, follow] = flags;
    let kw = [
        ("src", json!(target)),
        ("path", json!(name)),
        ("force", json!(force)),
        ("atomic", json!(atomic)),
        ("follow_symlinks", json!(follow)),
    ];
    if let Err(e) = call(env, "symlink", &kw) {
        let why = super::denied(e)?;
        set(&mut ret, "result", json!(false));
        let comment = format!("Unable to create new symlink {name} -> {target}: {why}");
        set(&mut ret, "comment", json!(comment));
        return Ok(ret);
    }
    set(
        &mut ret,
        "comment",
        json!(format!("Created new symlink {name} -> {target}")),
    );
    changes(&mut ret).insert("new".into(), json!(name));
    Ok(ret)
}

/// The link's directory: made (`makedirs`), or said to be missing;
/// `Some` is the state's (failed) return.
fn parent(
    env: &mut Env,
    low: &Obj,
    name: &str,
    tcomment: &mut String,
    ret: &Obj,
) -> Step<Option<Obj>> {
    let parent = dirname(name);
    if is_dir(env, &parent)? {
        return Ok(None);
    }
    if flag(low, "makedirs", false) {
        if env.test {
            tcomment.push_str(&format!("\n{parent} will be created"));
        } else {
            let mode = super::normalize_mode(arg(low, "mode")).map_or(Value::Null, Value::String);
            call(env, "makedirs", &[("path", json!(name)), ("mode", mode)])?;
        }
    } else if env.test {
        tcomment.push_str(&format!("\nDirectory {parent} for symlink is not present"));
    } else {
        return Ok(Some(error(
            ret.clone(),
            format!("Directory {parent} for symlink is not present"),
        )));
    }
    Ok(None)
}

fn run_absent(low: &Obj, env: &mut Env) -> Step<Obj> {
    let name = name_of(low);
    let mut ret = start(&name, json!(true));
    if name.is_empty() {
        return Ok(error(ret, "Must provide name to file.absent"));
    }
    if !name.starts_with('/') {
        return Ok(error(
            ret,
            format!("Specified file {name} is not an absolute path"),
        ));
    }
    if name == "/" {
        return Ok(error(ret, "Refusing to make \"/\" absent"));
    }
    let p = probe(env, &name)?;
    let what = if p.file || p.link {
        "File"
    } else if p.dir {
        "Directory"
    } else {
        set(
            &mut ret,
            "comment",
            json!(format!("File {name} is not present")),
        );
        return Ok(ret);
    };
    if env.test {
        set(&mut ret, "result", Value::Null);
        changes(&mut ret).insert("removed".into(), json!(name));
        set(
            &mut ret,
            "comment",
            json!(format!("{what} {name} is set for removal")),
        );
        return Ok(ret);
    }
    match call(
        env,
        "remove",
        &[("path", json!(name)), ("force", json!(true))],
    ) {
        Ok(_) => {
            set(
                &mut ret,
                "comment",
                json!(format!("Removed {} {name}", what.to_lowercase())),
            );
            changes(&mut ret).insert("removed".into(), json!(name));
            Ok(ret)
        }
        // Salt catches the module's error for a file, not for a directory.
        Err(e) if what == "File" => Ok(error(ret, super::denied(e)?)),
        Err(e) => Err(e.into()),
    }
}
