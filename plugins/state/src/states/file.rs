//! Salt's `file` states, through the `file` module's functions and
//! grants: this plugin holds no directory, so whatever a state reads or
//! changes on disk goes through a `file.*` call, and a refused call makes
//! the state fail `Denied:` with nothing changed. (`creates`, which every
//! state takes, is here too: it asks `file` whether the paths exist.)
//!
//! One submodule per group of states: [`managed`] (`file.managed`),
//! [`directory`] (`file.directory`), [`link`] (`file.symlink`,
//! `file.absent`), [`edit`] (`file.append`, `file.replace`, `file.touch`)
//! and [`recurse`] (`file.recurse`); what they share is below.

mod directory;
mod edit;
mod link;
mod managed;
mod recurse;
mod walk;

// Python's difflib, the same source the file plugin compiles.
#[allow(dead_code)]
#[path = "../../../file/src/difflib.rs"]
mod difflib;

use serde_json::{Map, Value, json};

pub(crate) use super::name_of;
use super::{CallError, Env, Step, Stop, finish, salt};
use crate::compile::Obj;
use crate::py::{py_str, truthy};

pub use directory::directory;
pub use edit::{append, replace, touch};
pub use link::{absent, symlink};
pub use managed::managed;
pub use recurse::recurse;

/// Whether `path` exists; `Err` when the grants refused the question.
fn exists(path: &str, env: &mut Env) -> Result<bool, super::cmd::Refused> {
    let arg = [json!(path)];
    for fun in ["file.file_exists", "file.directory_exists"] {
        match salt(env, fun, &arg, &[]) {
            Ok(Value::Bool(true)) => return Ok(true),
            Err(CallError::Denied(why)) => return Err(super::cmd::Refused(why)),
            _ => {}
        }
    }
    Ok(false)
}

/// `_run_check_creates`: `(result, comment, skip_watch)`; `Err` when the
/// grants refused the check (no answer either way).
pub fn creates(v: &Value, env: &mut Env) -> super::cmd::Checked {
    let all = match v {
        Value::String(p) => {
            if exists(p, env)? {
                return Ok((true, format!("{p} exists"), Some(true)));
            }
            false
        }
        Value::Array(paths) => {
            let mut all = true;
            for p in paths {
                if !exists(&py_str(p), env)? {
                    all = false;
                    break;
                }
            }
            all
        }
        _ => false,
    };
    if all {
        return Ok((true, "All files in creates exist".into(), Some(true)));
    }
    Ok((false, "Creates files not found".into(), None))
}

/// `__salt__['file.<fun>'](**kwargs)`.
pub(crate) fn call(env: &mut Env, fun: &str, kwargs: &[(&str, Value)]) -> Result<Value, CallError> {
    salt(env, &format!("file.{fun}"), &[], kwargs)
}

/// Only a refusal stops; a raise is the caller's to handle.
pub(crate) fn denied(e: CallError) -> Step<String> {
    match e {
        CallError::Denied(m) => Err(Stop::Denied(m)),
        CallError::Failed(m) => Ok(m),
    }
}

/// A state's return as Salt starts it.
pub(crate) fn start(name: &str, result: Value) -> Obj {
    let mut r = Obj::new();
    r.insert("name".into(), json!(name));
    r.insert("changes".into(), json!({}));
    r.insert("result".into(), result);
    r.insert("comment".into(), json!(""));
    r
}

/// `_error(ret, msg)`.
pub(crate) fn error(mut ret: Obj, msg: impl Into<String>) -> Obj {
    ret.insert("result".into(), json!(false));
    ret.insert("comment".into(), json!(msg.into()));
    ret
}

pub(crate) fn set(ret: &mut Obj, key: &str, v: Value) {
    ret.insert(key.into(), v);
}

pub(crate) fn changes(ret: &mut Obj) -> &mut Map<String, Value> {
    if !ret.get("changes").is_some_and(Value::is_object) {
        ret.insert("changes".into(), json!({}));
    }
    ret.get_mut("changes")
        .and_then(Value::as_object_mut)
        .expect("changes is an object")
}

/// An argument of the chunk (`None` when absent or null).
pub(crate) fn arg<'a>(low: &'a Obj, key: &str) -> &'a Value {
    low.get(key).unwrap_or(&Value::Null)
}

/// A flag argument, with its default.
pub(crate) fn flag(low: &Obj, key: &str, default: bool) -> bool {
    match low.get(key) {
        None => default,
        Some(v) => truthy(v),
    }
}

/// `_test_owner`: `user`, or the `owner` Salt still takes for it.
pub(crate) fn user_of(low: &Obj) -> Value {
    let user = arg(low, "user");
    if truthy(user) {
        return user.clone();
    }
    low.get("owner").cloned().unwrap_or_else(|| user.clone())
}

/// `os.path.dirname`.
pub(crate) fn dirname(path: &str) -> String {
    match path.rfind('/') {
        Some(0) => "/".into(),
        Some(i) => path[..i].trim_end_matches('/').to_string(),
        None => String::new(),
    }
}

/// `os.path.normpath` of an absolute or relative path.
pub(crate) fn normpath(path: &str) -> String {
    if path.is_empty() {
        return ".".into();
    }
    let abs = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." if parts.last().is_some_and(|p| *p != "..") => {
                parts.pop();
            }
            ".." if abs => {}
            p => parts.push(p),
        }
    }
    let joined = parts.join("/");
    match (abs, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".into(),
        (false, false) => joined,
    }
}

/// `salt.utils.files.normalize_mode`.
pub(crate) fn normalize_mode(mode: &Value) -> Option<String> {
    if mode.is_null() {
        return None;
    }
    let m = py_str(mode).replace("0o", "0");
    let m = m
        .trim_matches('"')
        .trim_matches('\'')
        .trim_start_matches('0');
    Some(format!("{m:0>4}"))
}

/// What a path is, as `os.path` sees it, asked of the file module.
#[derive(Default)]
pub(crate) struct Probe {
    /// `os.path.lexists`.
    pub lexists: bool,
    /// `os.path.islink`.
    pub link: bool,
    /// `os.path.exists` (links followed).
    pub exists: bool,
    /// `os.path.isfile`.
    pub file: bool,
    /// `os.path.isdir`.
    pub dir: bool,
    /// `file.stats` of it, links followed (dangling: not).
    pub stats: Value,
}

/// Look at `path` through `file.stats`; a refusal stops the state.
pub(crate) fn probe(env: &mut Env, path: &str) -> Step<Probe> {
    let mut p = Probe::default();
    let lstat = match call(
        env,
        "stats",
        &[("path", json!(path)), ("follow_symlinks", json!(false))],
    ) {
        Ok(st) => st,
        Err(e) => {
            denied(e)?;
            return Ok(p);
        }
    };
    p.lexists = true;
    p.link = lstat["type"] == json!("link");
    p.stats = lstat;
    if p.link {
        match call(env, "stats", &[("path", json!(path))]) {
            Ok(st) if st["type"] != json!("link") => p.stats = st,
            Ok(_) => return Ok(p),
            Err(e) => {
                denied(e)?;
                return Ok(p);
            }
        }
    }
    p.exists = true;
    p.file = p.stats["type"] == json!("file");
    p.dir = p.stats["type"] == json!("dir");
    Ok(p)
}

/// `os.path.isdir(path)`.
pub(crate) fn is_dir(env: &mut Env, path: &str) -> Step<bool> {
    Ok(probe(env, path)?.dir)
}

/// A `user`/`group` asked for that a path made now would not get (it is
/// the agent's own) is refused: plugins cannot chown.
pub(crate) fn new_owner(env: &Env, path: &str, user: &Value, group: &Value) -> Step<()> {
    let g = &env.grains;
    let st = json!({
        "user": g.get("username").cloned().unwrap_or(Value::Null),
        "uid": g.get("uid").cloned().unwrap_or(Value::Null),
        "group": g.get("groupname").cloned().unwrap_or(Value::Null),
        "gid": g.get("gid").cloned().unwrap_or(Value::Null),
    });
    owner(path, &st, user, group).map_err(|e| match e {
        Stop::Denied(m) => Stop::Denied(m.replacen(": its ", ": as a new file, its ", 1)),
        other => other,
    })
}

/// A `user`/`group` asked for that `st` (a `file.stats`) does not have
/// is refused: plugins cannot chown.
pub(crate) fn owner(path: &str, st: &Value, user: &Value, group: &Value) -> Step<()> {
    let differs =
        |want: &Value, name: &Value, id: &Value| truthy(want) && want != name && want != id;
    for (want, name, id, what) in [
        (user, &st["user"], &st["uid"], "owner"),
        (group, &st["group"], &st["gid"], "group"),
    ] {
        if differs(want, name, id) {
            return Err(Stop::Denied(format!(
                "{path}: its {what} is {}, not {}: changing a file's owner or group is not a capability plugins have",
                if name.is_null() {
                    "not known".into()
                } else {
                    py_str(name)
                },
                py_str(want)
            )));
        }
    }
    Ok(())
}

/// Standard base64, as `file.manage_file` takes a source's bytes.
pub(crate) fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ABC[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// `salt://path` of `saltenv` (unless the URL names its own) read whole
/// (`None`: it does not exist); a refused fetch stops the state.
pub(crate) fn fetch_bytes(url: &str, saltenv: &str) -> Step<Option<Vec<u8>>> {
    match maid_sdk::host::fetch(&crate::render::url_in(url, saltenv)) {
        Ok(None) => Ok(None),
        Ok(Some(mut src)) => {
            let mut bytes = Vec::with_capacity(src.size() as usize);
            std::io::Read::read_to_end(&mut src, &mut bytes)
                .map_err(|e| Stop::Raised(e.to_string()))?;
            Ok(Some(bytes))
        }
        Err(e) if e.kind == maid_sdk::ErrorKind::Denied => Err(Stop::Denied(e.message)),
        Err(e) => Err(Stop::Raised(e.message)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_as_os_path_reads_them() {
        assert_eq!(dirname("/a/b/c"), "/a/b");
        assert_eq!(dirname("/a"), "/");
        assert_eq!(normpath("/a/./b/../c/"), "/a/c");
        assert_eq!(normpath("a/../../b"), "../b");
        assert_eq!(normalize_mode(&json!(644)), Some("0644".into()));
    }

    #[test]
    fn base64_is_standard() {
        assert_eq!(base64(b"hello\n"), "aGVsbG8K");
        assert_eq!(base64(b"hi"), "aGk=");
        assert_eq!(base64(b"a"), "YQ==");
        assert_eq!(base64(b""), "");
    }
}
