//! Salt's `group` states (`present`, `absent`), ported from Salt 3008.4's
//! `salt/states/group.py` for Linux, through the `group` module's
//! functions (`group.info`, `getent`, `add`, `chgid`, `adduser`,
//! `deluser`, `members`, `delete`: `groupadd`, `groupmod`, `groupdel` and
//! `gpasswd` under `[plugins.group]`'s `exec` grant). `local=True`
//! (libuser's `lgroupadd`) fails the state, saying so.
//!
//! One thing cannot be the same byte for byte: Salt prints `members: []`'s
//! users to remove as a Python set, whose order changes from run to run;
//! maid prints them in the group's order.

use serde_json::{Map, Value, json};

use super::{Env, Step, finish, name_of, ret, salt};
use crate::compile::Obj;
use crate::py::{py_eq, py_int, py_str, repr, truthy};

fn arg(low: &Obj, key: &str) -> Value {
    low.get(key).cloned().unwrap_or(Value::Null)
}

/// `__salt__["group.info"](name)` (`{}` for no such group).
fn info(env: &mut Env, name: &str) -> Step<Map<String, Value>> {
    Ok(match salt(env, "group.info", &[json!(name)], &[])? {
        Value::Object(m) => m,
        _ => Map::new(),
    })
}

/// A list argument's names (`addusers`, `delusers`, `members`); None when
/// not given.
fn names(v: &Value) -> Option<Vec<String>> {
    match v {
        Value::Null => None,
        Value::Array(a) => Some(a.iter().map(py_str).collect()),
        other => Some(vec![py_str(other)]),
    }
}

/// What `present` asks for.
struct Wanted {
    gid: Value,
    addusers: Option<Vec<String>>,
    delusers: Option<Vec<String>>,
    members: Option<Vec<String>>,
}

/// One attribute to change: its key, its value, and whether Salt holds the
/// value as a set (printed `{'a', 'b'}`).
type Change = (String, Value, bool);

/// Salt's `_changes`: None when there is no such group (Salt's False),
/// else the attributes to change, in Salt's order (or Salt's `Invalid gid`
/// dict, which it returns in their place).
fn changes(env: &mut Env, name: &str, w: &Wanted) -> Step<Option<Vec<Change>>> {
    let lgrp = info(env, name)?;
    if lgrp.is_empty() {
        return Ok(None);
    }
    let lmembers: Vec<String> = lgrp
        .get("members")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(py_str).collect())
        .unwrap_or_default();
    let mut change = Vec::new();
    if truthy(&w.gid) {
        match py_int(&w.gid) {
            Some(gid) => {
                if !py_eq(&lgrp["gid"], &json!(gid)) {
                    change.push(("gid".to_string(), json!(gid), false));
                }
            }
            None => {
                return Ok(Some(vec![
                    ("result".into(), json!(false), false),
                    ("comment".into(), json!("Invalid gid"), false),
                ]));
            }
        }
    }
    let differs = |want: &[String]| {
        lmembers.iter().any(|m| !want.contains(m)) || want.iter().any(|m| !lmembers.contains(m))
    };
    match &w.members {
        Some(m) if m.is_empty() && differs(m) => {
            let mut all: Vec<String> = Vec::new();
            for m in &lmembers {
                if !all.contains(m) {
                    all.push(m.clone());
                }
            }
            change.push(("delusers".into(), json!(all), true));
        }
        Some(m) if !m.is_empty() && differs(m) => {
            change.push(("members".into(), json!(m), false));
        }
        _ => {}
    }
    if let Some(add) = w.addusers.as_ref().filter(|a| !a.is_empty()) {
        let add: Vec<&String> = add.iter().filter(|u| !lmembers.contains(u)).collect();
        if !add.is_empty() {
            change.push(("addusers".into(), json!(add), false));
        }
    }
    if let Some(del) = w.delusers.as_ref().filter(|d| !d.is_empty()) {
        let del: Vec<&String> = del.iter().filter(|u| lmembers.contains(u)).collect();
        if !del.is_empty() {
            change.push(("delusers".into(), json!(del), false));
        }
    }
    Ok(Some(change))
}

/// A change's value as the comment prints it (`str()`; a set as Python
/// prints one, its members in the group's order).
fn shown(val: &Value, is_set: bool) -> String {
    match (val, is_set) {
        (Value::Array(a), true) => {
            let items: Vec<String> = a.iter().map(repr).collect();
            format!("{{{}}}", items.join(", "))
        }
        _ => py_str(val),
    }
}

/// The users of a change's value.
fn users(val: &Value) -> Vec<String> {
    val.as_array()
        .map(|a| a.iter().map(py_str).collect())
        .unwrap_or_default()
}

/// `changes` as the return shows them (`{"Failed": ...}`).
fn as_map(change: &[Change]) -> Value {
    Value::Object(
        change
            .iter()
            .map(|(k, v, _)| (k.clone(), v.clone()))
            .collect(),
    )
}

/// Ensure that a group is present.
pub fn present(low: &Obj, env: &mut Env) -> Result<Obj, String> {
    finish(low, present_(low, env))
}

/// Make the changes `present` found, each through its group function.
fn apply(env: &mut Env, name: &str, w: &Wanted, change: &[Change], non_unique: &Value) -> Step<()> {
    for (key, val, _) in change {
        match key.as_str() {
            "gid" => {
                salt(
                    env,
                    "group.chgid",
                    &[json!(name), w.gid.clone()],
                    &[("non_unique", json!(truthy(non_unique)))],
                )?;
            }
            "addusers" => {
                for user in users(val) {
                    salt(env, "group.adduser", &[json!(name), json!(user)], &[])?;
                }
            }
            "delusers" => {
                for user in users(val) {
                    salt(env, "group.deluser", &[json!(name), json!(user)], &[])?;
                }
            }
            "members" => {
                let list = w.members.clone().unwrap_or_default().join(",");
                salt(env, "group.members", &[json!(name), json!(list)], &[])?;
            }
            _ => {}
        }
    }
    Ok(())
}

fn present_(low: &Obj, env: &mut Env) -> Step<Obj> {
    let name = name_of(low);
    let mut r = ret(
        low,
        json!(true),
        &format!("Group {name} is present and up to date"),
    );
    let w = Wanted {
        gid: arg(low, "gid"),
        addusers: names(&arg(low, "addusers")),
        delusers: names(&arg(low, "delusers")),
        members: names(&arg(low, "members")),
    };
    if w.members.is_some() && (w.addusers.is_some() || w.delusers.is_some()) {
        r.insert("result".into(), Value::Null);
        r.insert(
            "comment".into(),
            json!(
                "Error: Conflicting options \"members\" with \"addusers\" and/or \"delusers\" \
                 can not be used together. "
            ),
        );
        return Ok(r);
    }
    if let (Some(add), Some(del)) = (&w.addusers, &w.delusers)
        && !add.is_empty()
        && !del.is_empty()
        && add.iter().any(|u| del.contains(u))
    {
        r.insert("result".into(), Value::Null);
        r.insert(
            "comment".into(),
            json!("Error. Same user(s) can not be added and deleted simultaneously"),
        );
        return Ok(r);
    }
    if truthy(&arg(low, "local")) {
        r.insert("result".into(), json!(false));
        r.insert(
            "comment".into(),
            json!("local=True is not supported by maid: it runs shadow-utils, not libuser"),
        );
        return Ok(r);
    }
    let non_unique = arg(low, "non_unique");
    match changes(env, &name, &w)? {
        Some(change) if !change.is_empty() => {
            let mut comment =
                String::from("The following group attributes are set to be changed:\n");
            for (key, val, is_set) in &change {
                comment.push_str(&format!("{key}: {}\n", shown(val, *is_set)));
            }
            r.insert("comment".into(), json!(comment));
            if env.test {
                r.insert("result".into(), Value::Null);
                return Ok(r);
            }
            apply(env, &name, &w, &change, &non_unique)?;
            match changes(env, &name, &w)? {
                Some(left) if !left.is_empty() => {
                    r.insert("result".into(), json!(false));
                    comment.push_str("Some changes could not be applied");
                    r.insert("comment".into(), json!(comment));
                    r.insert("changes".into(), json!({ "Failed": as_map(&left) }));
                }
                _ => {
                    r.insert(
                        "changes".into(),
                        json!({"Final": "All changes applied successfully"}),
                    );
                }
            }
            Ok(r)
        }
        Some(_) => Ok(r),
        None => create(low, env, r, &name, &w, &non_unique),
    }
}

/// `present` for a group that is not there.
fn create(
    low: &Obj,
    env: &mut Env,
    mut r: Obj,
    name: &str,
    w: &Wanted,
    non_unique: &Value,
) -> Step<Obj> {
    if env.test {
        r.insert("result".into(), Value::Null);
        r.insert(
            "comment".into(),
            json!(format!("Group {name} set to be added")),
        );
        return Ok(r);
    }
    let grps = salt(env, "group.getent", &[], &[])?;
    if !w.gid.is_null() && !truthy(non_unique) {
        let taken = grps
            .as_array()
            .into_iter()
            .flatten()
            .find(|g| py_eq(&g["gid"], &w.gid) && g["gid"].is_number() == w.gid.is_number());
        if let Some(g) = taken {
            r.insert("result".into(), json!(false));
            r.insert(
                "comment".into(),
                json!(format!(
                    "Group {name} is not present but gid {} is already taken by group {}",
                    py_str(&w.gid),
                    py_str(&g["name"])
                )),
            );
            return Ok(r);
        }
    }
    let added = salt(
        env,
        "group.add",
        &[json!(name)],
        &[
            ("gid", w.gid.clone()),
            ("system", json!(truthy(&arg(low, "system")))),
            ("non_unique", json!(truthy(non_unique))),
            ("local", json!(false)),
        ],
    )?;
    if !truthy(&added) {
        r.insert("result".into(), json!(false));
        r.insert(
            "comment".into(),
            json!(format!("Failed to create new group {name}")),
        );
        return Ok(r);
    }
    let mut members = None;
    if let Some(m) = w.members.as_ref().filter(|m| !m.is_empty()) {
        members = Some(m.join(","));
    }
    if let Some(a) = w.addusers.as_ref().filter(|a| !a.is_empty()) {
        members = Some(a.join(","));
    }
    if let Some(list) = members.filter(|l| !l.is_empty()) {
        salt(env, "group.members", &[json!(name), json!(list)], &[])?;
    }
    r.insert("comment".into(), json!(format!("New group {name} created")));
    r.insert("changes".into(), Value::Object(info(env, name)?));
    if let Some(left) = changes(env, name, w)?
        && !left.is_empty()
    {
        r.insert("result".into(), json!(false));
        r.insert(
            "comment".into(),
            json!(format!(
                "Group {name} has been created but, some changes could not be applied"
            )),
        );
        r.insert("changes".into(), json!({ "Failed": as_map(&left) }));
    }
    Ok(r)
}

/// Ensure that the named group is absent.
pub fn absent(low: &Obj, env: &mut Env) -> Result<Obj, String> {
    finish(low, absent_(low, env))
}

fn absent_(low: &Obj, env: &mut Env) -> Step<Obj> {
    let name = name_of(low);
    let mut r = ret(low, json!(true), "");
    if truthy(&arg(low, "local")) {
        r.insert("result".into(), json!(false));
        r.insert(
            "comment".into(),
            json!("local=True is not supported by maid: it runs shadow-utils, not libuser"),
        );
        return Ok(r);
    }
    if info(env, &name)?.is_empty() {
        r.insert("comment".into(), json!("Group not present"));
        return Ok(r);
    }
    if env.test {
        r.insert("result".into(), Value::Null);
        r.insert(
            "comment".into(),
            json!(format!("Group {name} is set for removal")),
        );
        return Ok(r);
    }
    let removed = salt(
        env,
        "group.delete",
        &[json!(name)],
        &[("local", json!(false))],
    )?;
    r.insert("result".into(), removed.clone());
    if truthy(&removed) {
        r.insert("changes".into(), json!({ name.clone(): "" }));
        r.insert("comment".into(), json!(format!("Removed group {name}")));
    } else {
        r.insert(
            "comment".into(),
            json!(format!("Failed to remove group {name}")),
        );
    }
    Ok(r)
}
