//! Owners and modes as Salt's `file.check_perms` checks and sets them.
//!
//! A mode is set through the host. An owner or group cannot be: no grant
//! gives a plugin `chown`. So where Salt would change one, this refuses
//! (`Denied`) before anything is changed; where the owner already is the
//! one asked for, all goes as in Salt. A path about to be made will be
//! the agent's own: its user and group are the `username`/`uid` and
//! `groupname`/`gid` grains.

use maid_sdk::{Error, function, host, python};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::inspect::stats;
use crate::paths::{absolute, is_link, text};

/// `salt.utils.files.normalize_mode`: `644`, `"0644"`, `"0o644"` all read
/// `"0644"`; `None` stays `None`.
pub(crate) fn normalize_mode(mode: &Value) -> Option<String> {
    if mode.is_null() {
        return None;
    }
    let m = python::str(mode).replace("0o", "0");
    let m = m
        .trim_matches('"')
        .trim_matches('\'')
        .trim_start_matches('0');
    Some(format!("{m:0>4}"))
}

/// Salt's `file.set_mode` as `check_perms` uses it: a mode that is not
/// octal sets nothing ("Invalid Mode", which the caller then sees as a
/// mode that did not change).
pub(crate) fn set_mode_text(path: &str, mode: &str) -> Result<(), Error> {
    match mode_bits(mode) {
        Some(bits) => host::set_mode(path, bits),
        None => Ok(()),
    }
}

/// The bits [`set_mode_text`] sets for `mode`; `None` for a mode that is
/// not octal, which sets nothing.
pub(crate) fn mode_bits(mode: &str) -> Option<u32> {
    let m = mode.trim_start_matches(['0', 'O', 'o']);
    let m = if m.is_empty() { "0" } else { m };
    // chmod(2) keeps the permission bits and no others.
    u32::from_str_radix(m, 8).ok().map(|bits| bits & 0o7777)
}

/// An owner asked for (`user`, or `group`) that a path with this name
/// and id does not have. Salt compares with either (`user: 0` is falsy
/// and asks for nothing).
fn differs(want: &Value, name: &Value, id: &Value) -> bool {
    python::truthy(want) && want != name && want != id
}

fn refuse(path: &str, what: &str, want: &Value, have: &Value) -> Error {
    let have = if have.is_null() {
        "not known".to_string()
    } else {
        python::str(have)
    };
    Error::denied(format!(
        "{path}: {what} is {have}, not {}: changing a file's owner or group is not a capability plugins have",
        python::str(want)
    ))
}

/// Refuse a `user`/`group` that `st` (a `file.stats` return) does not
/// already have.
pub(crate) fn owner_is(path: &str, st: &Value, user: &Value, group: &Value) -> Result<(), Error> {
    if differs(user, &st["user"], &st["uid"]) {
        return Err(refuse(path, "its owner", user, &st["user"]));
    }
    if differs(group, &st["group"], &st["gid"]) {
        return Err(refuse(path, "its group", group, &st["group"]));
    }
    Ok(())
}

/// Refuse a `user`/`group` that a path this agent makes will not have.
pub(crate) fn new_owner_is(path: &str, user: &Value, group: &Value) -> Result<(), Error> {
    let g = host::grains();
    let st = json!({
        "user": g.get("username").cloned().unwrap_or(Value::Null),
        "uid": g.get("uid").cloned().unwrap_or(Value::Null),
        "group": g.get("groupname").cloned().unwrap_or(Value::Null),
        "gid": g.get("gid").cloned().unwrap_or(Value::Null),
    });
    match owner_is(path, &st, user, group) {
        Err(e) => Err(Error::denied(e.message.replacen(
            ": its ",
            ": as a new file, its ",
            1,
        ))),
        ok => ok,
    }
}

/// File attributes (`chattr`) are not a capability plugins have either.
pub(crate) fn no_attrs(path: &str, attrs: &Value) -> Result<(), Error> {
    if attrs.is_null() {
        return Ok(());
    }
    Err(Error::denied(format!(
        "{path}: setting file attributes (attrs=) is not a capability plugins have"
    )))
}

/// A fresh state return for `name`.
pub(crate) fn fresh(name: &str) -> Map<String, Value> {
    let mut r = Map::new();
    r.insert("name".into(), json!(name));
    r.insert("changes".into(), json!({}));
    r.insert("comment".into(), json!(""));
    r.insert("result".into(), json!(true));
    r
}

pub(crate) fn changes(ret: &mut Map<String, Value>) -> &mut Map<String, Value> {
    if !ret.get("changes").is_some_and(Value::is_object) {
        ret.insert("changes".into(), json!({}));
    }
    ret.get_mut("changes")
        .and_then(Value::as_object_mut)
        .expect("changes is an object")
}

/// What a path's owner and mode were (`luser`, `lgroup`, `lmode`), and
/// the mode set (`cmode`).
pub(crate) type Perms = Map<String, Value>;

/// What to check on a path: Salt's `check_perms` arguments.
pub(crate) struct Want<'a> {
    pub user: &'a Value,
    pub group: &'a Value,
    pub mode: Option<String>,
    pub follow: bool,
    pub test: bool,
}

/// Salt's `check_perms(name, ret, user, group, mode, attrs,
/// follow_symlinks)`: the mode set where it differs (not with `test`),
/// `ret` given its changes and failures; also the path's `perms` as they
/// were (`luser`, `lgroup`, `lmode`, and `cmode` when set).
pub(crate) fn check_perms(
    name: &str,
    ret: Value,
    want: &Want<'_>,
) -> Result<(Map<String, Value>, Perms), Error> {
    let (mut ret, orig_comment) = match ret {
        Value::Object(m) if !m.is_empty() => {
            let orig = m.get("comment").cloned().unwrap_or(json!(""));
            (m, orig)
        }
        _ => (fresh(name), json!("")),
    };
    let mut comments: Vec<String> = Vec::new();
    let cur = stats(name, None, want.follow)?;
    owner_is(name, &cur, want.user, want.group)?;
    let mut perms = Map::new();
    perms.insert(
        "luser".into(),
        if want.user.is_number() {
            cur["uid"].clone()
        } else {
            cur["user"].clone()
        },
    );
    perms.insert(
        "lgroup".into(),
        if want.group.is_number() {
            cur["gid"].clone()
        } else {
            cur["group"].clone()
        },
    );
    perms.insert("lmode".into(), cur["mode"].clone());
    let p = absolute(name)?;
    let skip_mode = is_link(&p) && !want.follow;
    if let Some(mode) = &want.mode
        && !want.test
        && !skip_mode
        && cur["mode"] != json!(mode)
    {
        perms.insert("cmode".into(), json!(mode));
        set_mode_text(name, mode)?;
    }
    let post = stats(name, None, want.follow)?;
    if let Some(mode) = &want.mode
        && !skip_mode
    {
        if post["mode"] != json!(mode) {
            if want.test {
                changes(&mut ret).insert("mode".into(), json!(mode));
            } else {
                ret.insert("result".into(), json!(false));
                comments.push(format!("Failed to change mode to {mode}"));
            }
        } else if perms.contains_key("cmode") {
            changes(&mut ret).insert("mode".into(), json!(mode));
        }
    }
    match orig_comment {
        Value::String(orig) => {
            if !orig.is_empty() {
                comments.insert(0, orig);
            }
            ret.insert("comment".into(), json!(comments.join("; ")));
        }
        _ => {
            ret.insert("comment".into(), json!(comments));
        }
    }
    if want.test
        && ret
            .get("changes")
            .is_some_and(|c| c.as_object().is_some_and(|c| !c.is_empty()))
    {
        ret.insert("result".into(), Value::Null);
    }
    Ok((ret, perms))
}

#[derive(Deserialize)]
pub(crate) struct CheckPerms {
    name: Value,
    #[serde(default)]
    ret: Value,
    #[serde(default)]
    user: Value,
    #[serde(default)]
    group: Value,
    #[serde(default)]
    mode: Value,
    #[serde(default)]
    attrs: Value,
    #[serde(default)]
    follow_symlinks: Value,
    #[serde(default)]
    test: Value,
}

/// Check (and set) a path's mode, as Salt's check_perms; return [ret, perms]
// Salt reads `test` from `__opts__`; here it is an argument. An owner or
// group that differs is refused (Denied), never changed.
#[function(name = "check_perms", args = [
    "name",
    "ret",
    "user",
    "group",
    "mode",
    "attrs=null",
    "follow_symlinks=false",
    "seuser=null",
    "serole=null",
    "setype=null",
    "serange=null",
    "test=false",
])]
pub(crate) fn check_perms_(a: CheckPerms) -> Result<Value, Error> {
    let name = text(&a.name);
    no_attrs(&name, &a.attrs)?;
    let want = Want {
        user: &a.user,
        group: &a.group,
        mode: normalize_mode(&a.mode),
        follow: python::truthy(&a.follow_symlinks),
        test: python::truthy(&a.test),
    };
    let (ret, perms) = check_perms(&name, a.ret, &want)?;
    Ok(json!([ret, perms]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_normalise_as_salts() {
        assert_eq!(normalize_mode(&json!(644)), Some("0644".into()));
        assert_eq!(normalize_mode(&json!("0o755")), Some("0755".into()));
        assert_eq!(normalize_mode(&json!("00600")), Some("0600".into()));
        assert_eq!(normalize_mode(&json!("'0640'")), Some("0640".into()));
        assert_eq!(normalize_mode(&json!(0)), Some("0000".into()));
        assert_eq!(normalize_mode(&Value::Null), None);
    }

    #[test]
    fn an_owner_asked_for_is_compared_by_name_or_id() {
        let st = json!({"user": "root", "uid": 0, "group": "wheel", "gid": 10});
        assert!(owner_is("/x", &st, &json!("root"), &json!(10)).is_ok());
        assert!(owner_is("/x", &st, &json!(0), &Value::Null).is_ok());
        assert!(owner_is("/x", &st, &json!("bob"), &Value::Null).is_err());
        assert!(owner_is("/x", &st, &Value::Null, &json!("root")).is_err());
    }
}
