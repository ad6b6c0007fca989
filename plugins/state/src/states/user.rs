//! Salt's `user` states (`present`, `absent`), ported from Salt 3008.4's
//! `salt/states/user.py` for Linux, through the `user` module's functions
//! (`user.info`, `user.add`, `user.ch*`, `user.delete`, run by shadow-utils
//! under `[plugins.user]`'s `exec` grant) and `group.info`/`group.getent`
//! for what Salt asks of `grp` (`file.group_to_gid`, `file.gid_to_group`).
//!
//! Where maid cannot do what Salt does, the state says so and changes
//! nothing: the password and password-aging arguments need `/etc/shadow`,
//! which no grant gives (Salt's `shadow` module is not built); `local=True`
//! is libuser's; and making a missing home directory for an existing user
//! needs `file.mkdir` with an owner, which no plugin may set. Salt's own
//! `os.path.isdir(home)` is asked of `user.home_exists`, since the state
//! plugin may look at no directory.

use serde_json::{Map, Value, json};

use super::{Env, Step, Stop, finish, name_of, ret, salt};
use crate::compile::Obj;
use crate::py::{py_eq, py_int, py_str, repr, truthy};

/// The chunk's argument `key`, or None.
fn arg(low: &Obj, key: &str) -> Value {
    low.get(key).cloned().unwrap_or(Value::Null)
}

/// The chunk's argument `key`, or its default.
fn arg_or(low: &Obj, key: &str, default: Value) -> Value {
    low.get(key).cloned().unwrap_or(default)
}

/// `__salt__["user.info"](name)` (`{}` for no such user).
fn user_info(env: &mut Env, name: &str) -> Step<Map<String, Value>> {
    Ok(match salt(env, "user.info", &[json!(name)], &[])? {
        Value::Object(m) => m,
        _ => Map::new(),
    })
}

/// `__salt__["group.info"](name)`: truthy when the group exists.
fn group_info(env: &mut Env, name: &Value) -> Step<Value> {
    Ok(salt(env, "group.info", std::slice::from_ref(name), &[])?)
}

/// The groups, `(name, gid)` in file order, for Salt's `grp` lookups.
struct Grp(Vec<(String, Value)>);

impl Grp {
    fn read(env: &mut Env) -> Step<Grp> {
        let all = salt(env, "group.getent", &[], &[("refresh", json!(true))])?;
        Ok(Grp(all
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|g| (py_str(&g["name"]), g["gid"].clone()))
                    .collect()
            })
            .unwrap_or_default()))
    }

    /// Salt's `file.group_to_gid`: an int as it is, a name's gid, or "".
    fn group_to_gid(&self, group: &Value) -> Value {
        match group {
            Value::Null => json!(""),
            Value::Bool(_) => group.clone(),
            Value::Number(n) if n.is_i64() || n.is_u64() => group.clone(),
            Value::String(s) => self
                .0
                .iter()
                .find(|(n, _)| n == s)
                .map_or(json!(""), |(_, gid)| gid.clone()),
            _ => json!(""),
        }
    }

    /// Salt's `file.gid_to_group`: the name of the first group with the
    /// gid (`int(gid)`, or a name's), the gid itself when none has it.
    fn gid_to_group(&self, gid: &Value) -> Value {
        let gid = match py_int(gid) {
            Some(i) => json!(i),
            None => self.group_to_gid(gid),
        };
        if gid == json!("") {
            return gid;
        }
        self.0
            .iter()
            .find(|(_, g)| py_eq(g, &gid))
            .map_or(gid.clone(), |(n, _)| json!(n))
    }
}

/// A list argument as names (`groups`, `optional_groups`).
fn names(v: &Value) -> Step<Option<Vec<String>>> {
    match v {
        Value::Null => Ok(None),
        Value::Array(a) => Ok(Some(a.iter().map(py_str).collect())),
        other => Err(Stop::Raised(format!(
            "TypeError: can only concatenate list (not \"{}\") to list",
            super::type_name(other)
        ))),
    }
}

/// `sorted(set(list))`.
fn sorted_set(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v.dedup();
    v
}

/// `list.remove(x)`: the first `x`, as Python (a `ValueError` when none).
fn remove(list: &mut Vec<String>, x: &str) -> Step<()> {
    match list.iter().position(|g| g == x) {
        Some(i) => {
            list.remove(i);
            Ok(())
        }
        None => Err(Stop::Raised(
            "ValueError: list.remove(x): x not in list".into(),
        )),
    }
}

/// What `present` asks for, as its arguments say.
struct Wanted {
    uid: Value,
    gid: Value,
    groups: Option<Vec<String>>,
    optional_groups: Option<Vec<String>>,
    remove_groups: bool,
    home: Value,
    createhome: bool,
    shell: Value,
    /// fullname, roomnumber, workphone, homephone, other: `str()` of each
    /// given.
    gecos: [(&'static str, Option<String>); 5],
    allow_uid_change: bool,
    allow_gid_change: bool,
}

/// `_changes`' answer: None when there is no such user (Salt's False),
/// the attributes to change in Salt's order, or the text of the
/// `CommandExecutionError` it raises for a uid or gid change not allowed.
type Changes = Result<Option<Vec<(String, Value)>>, String>;

/// Salt's `_group_changes`: whether the groups differ, groups sharing a
/// gid with another listed counting as that one.
fn group_changes(env: &mut Env, cur: &[String], wanted: &[String], all_of: bool) -> Step<bool> {
    let cur_set = sorted_set(cur.to_vec());
    let wanted_set = sorted_set(wanted.to_vec());
    if cur_set == wanted_set || (!all_of && wanted_set.iter().all(|w| cur_set.contains(w))) {
        return Ok(false);
    }
    let all = sorted_set([cur_set.clone(), wanted_set.clone()].concat());
    let mut info = Vec::new();
    for g in &all {
        info.push((g.clone(), group_info(env, &json!(g))?));
    }
    let diff: Vec<String> = if all_of {
        all.iter()
            .filter(|g| cur_set.contains(g) != wanted_set.contains(g))
            .cloned()
            .collect()
    } else {
        wanted_set
            .iter()
            .filter(|g| !cur_set.contains(g))
            .cloned()
            .collect()
    };
    let gid_of = |g: &str| -> Step<Value> {
        let i = &info.iter().find(|(n, _)| n == g).expect("listed").1;
        i.get("gid")
            .cloned()
            .ok_or_else(|| Stop::Raised("KeyError: 'gid'".into()))
    };
    let mut remain = diff.clone();
    for d in &diff {
        let mine = gid_of(d)?;
        for (other, _) in &info {
            if other == d {
                continue;
            }
            if py_eq(&mine, &gid_of(other)?) {
                remove(&mut remain, d)?;
            }
        }
    }
    Ok(!remain.is_empty())
}

/// Salt's `_changes` on primary groups: the new (or kept) primary group,
/// the old one when it changes, and a group of the user's own name that
/// is not asked for are not supplementary groups — nor is any group that
/// shares one's gid.
fn drop_primary_groups(
    name: &str,
    grp: &Grp,
    gid: &Value,
    lgid: &Value,
    cur: &mut Vec<String>,
    wanted: &mut Vec<String>,
) -> Step<()> {
    let cur_gids: Vec<Value> = cur.iter().map(|g| grp.group_to_gid(&json!(g))).collect();
    let mut dupes: Vec<(Value, Vec<String>)> = Vec::new();
    for (i, g) in cur_gids.iter().enumerate() {
        if cur_gids.iter().filter(|x| *x == g).count() > 1 {
            match dupes.iter_mut().find(|(k, _)| k == g) {
                Some((_, v)) => v.push(cur[i].clone()),
                None => dupes.push((g.clone(), vec![cur[i].clone()])),
            }
        }
    }
    let in_dupes = |x: &Value| dupes.iter().any(|(_, v)| v.iter().any(|n| json!(n) == *x));
    let dupes_of = |x: &Value| -> Vec<String> {
        let gid = grp.group_to_gid(x);
        dupes
            .iter()
            .find(|(k, _)| *k == gid)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let default_grp = grp.gid_to_group(if gid.is_null() { lgid } else { gid });
    let old_default_grp = grp.gid_to_group(lgid);
    let holds =
        |list: &[String], x: &Value| x.as_str().is_some_and(|s| list.iter().any(|g| g == s));
    if holds(cur, &default_grp) || holds(wanted, &default_grp) {
        if in_dupes(&default_grp) {
            for g in dupes_of(&default_grp) {
                if cur.contains(&g) {
                    remove(cur, &g)?;
                }
                if wanted.contains(&g) {
                    remove(wanted, &g)?;
                }
            }
        } else {
            let d = py_str(&default_grp);
            if cur.contains(&d) {
                remove(cur, &d)?;
            }
            if wanted.contains(&d) {
                remove(wanted, &d)?;
            }
        }
    }
    if !py_eq(&old_default_grp, &default_grp) && holds(cur, &old_default_grp) {
        if in_dupes(&old_default_grp) {
            for g in dupes_of(&old_default_grp) {
                remove(cur, &g)?;
            }
        } else {
            remove(cur, &py_str(&old_default_grp))?;
        }
    }
    if cur.iter().any(|g| g == name) && !wanted.iter().any(|g| g == name) {
        if in_dupes(&json!(name)) {
            for g in dupes_of(&json!(name)) {
                remove(cur, &g)?;
            }
        } else {
            remove(cur, name)?;
        }
    }
    Ok(())
}

/// The uid and gid changes `w` does not allow, in Salt's words.
fn id_change_errors(
    w: &Wanted,
    change: &[(String, Value)],
    luid: &Value,
    lgid: &Value,
    gid: &Value,
) -> Vec<Value> {
    let mut errors = Vec::new();
    let has = |k: &str| change.iter().any(|(c, _)| c == k);
    if !w.allow_uid_change && has("uid") {
        errors.push(json!(format!(
            "Changing uid ({} -> {}) not permitted, set allow_uid_change to True to force \
             this change. Note that this will not change file ownership.",
            py_str(luid),
            py_str(&w.uid)
        )));
    }
    if !w.allow_gid_change && has("gid") {
        errors.push(json!(format!(
            "Changing gid ({} -> {}) not permitted, set allow_gid_change to True to force \
             this change. Note that this will not change file ownership.",
            py_str(lgid),
            py_str(gid)
        )));
    }
    errors
}

/// Salt's `_changes` for Linux without `shadow`: what differs between the
/// account and `w`.
fn changes(env: &mut Env, name: &str, w: &Wanted, gid: &Value) -> Step<Changes> {
    let lusr = user_info(env, name)?;
    if lusr.is_empty() {
        return Ok(Ok(None));
    }
    let grp = Grp::read(env)?;
    let mut change: Vec<(String, Value)> = Vec::new();
    let mut cur: Vec<String> = lusr
        .get("groups")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(py_str).collect())
        .unwrap_or_default();
    let groups = w.groups.clone();
    let optional = w.optional_groups.clone();
    let mut wanted = sorted_set(
        [
            groups.clone().unwrap_or_default(),
            optional.clone().unwrap_or_default(),
        ]
        .concat(),
    );
    let no_optional = optional.as_ref().is_none_or(|o| o.is_empty());
    if !w.remove_groups || (groups.is_none() && no_optional) {
        wanted = sorted_set([wanted, cur.clone()].concat());
    }
    let luid = lusr.get("uid").cloned().unwrap_or(Value::Null);
    let lgid = lusr.get("gid").cloned().unwrap_or(Value::Null);
    if truthy(&w.uid) && !py_eq(&luid, &w.uid) {
        change.push(("uid".into(), w.uid.clone()));
    }
    if !gid.is_null() && !py_eq(&lgid, gid) && !py_eq(&lgid, &grp.group_to_gid(gid)) {
        change.push(("gid".into(), gid.clone()));
    }
    drop_primary_groups(name, &grp, gid, &lgid, &mut cur, &mut wanted)?;
    if group_changes(env, &cur, &wanted, w.remove_groups)?
        && (!wanted.is_empty() || w.remove_groups)
    {
        change.push(("groups".into(), json!(wanted)));
    }
    let lhome = lusr.get("home").cloned().unwrap_or(Value::Null);
    if truthy(&w.home) && !py_eq(&lhome, &w.home) {
        change.push(("home".into(), w.home.clone()));
    }
    if w.createhome {
        let newhome = if truthy(&w.home) { &w.home } else { &lhome };
        if !newhome.is_null() && !home_exists(env, newhome)? {
            change.push(("homeDoesNotExist".into(), newhome.clone()));
        }
    }
    let lshell = lusr.get("shell").cloned().unwrap_or(Value::Null);
    if truthy(&w.shell) && !py_eq(&lshell, &w.shell) {
        change.push(("shell".into(), w.shell.clone()));
    }
    for (key, value) in &w.gecos {
        if let Some(value) = value
            && lusr.get(*key).map(py_str).as_deref() != Some(value)
        {
            change.push((key.to_string(), json!(value)));
        }
    }
    let errors = id_change_errors(w, &change, &luid, &lgid, gid);
    if !errors.is_empty() {
        let info = maid_salt::output::nested(&Value::Array(errors));
        return Ok(Err(format!(
            "Encountered error checking for needed changes. Additional info follows:\n\n{}",
            info.trim_end()
        )));
    }
    Ok(Ok(Some(change)))
}

/// `os.path.isdir(home)`, asked of the user module (`test -d`).
fn home_exists(env: &mut Env, home: &Value) -> Step<bool> {
    Ok(truthy(&salt(
        env,
        "user.home_exists",
        std::slice::from_ref(home),
        &[],
    )?))
}

/// The arguments that need `/etc/shadow` (Salt's `shadow` module), given.
fn shadow_args(low: &Obj) -> Vec<&'static str> {
    const ANY: &[&str] = &[
        "password",
        "date",
        "mindays",
        "maxdays",
        "inactdays",
        "warndays",
        "expire",
        "password_lock",
    ];
    let mut given: Vec<&'static str> = ANY
        .iter()
        .copied()
        .filter(|k| low.get(*k).is_some_and(|v| !v.is_null()))
        .collect();
    if low.get("empty_password").is_some_and(truthy) {
        given.push("empty_password");
    }
    given
}

fn set(r: &mut Obj, result: Value, comment: impl Into<String>) {
    r.insert("result".into(), result);
    r.insert("comment".into(), json!(comment.into()));
}

/// Ensure that the named user is present with the specified properties.
pub fn present(low: &Obj, env: &mut Env) -> Result<Obj, String> {
    finish(low, present_(low, env))
}

/// `groups` and `optional_groups` as `present` takes them: the groups
/// (under `test=True`, less those not there), the ones missing, and the
/// optional ones that are there; Salt's comment when a group is missing.
#[allow(clippy::type_complexity)]
fn wanted_groups(
    low: &Obj,
    env: &mut Env,
) -> Step<Result<(Option<Vec<String>>, Vec<String>, Option<Vec<String>>), String>> {
    let mut groups = names(&arg(low, "groups"))?;
    let optional_groups = names(&arg(low, "optional_groups"))?;
    let mut missing = Vec::new();
    if let Some(g) = groups.as_ref().filter(|g| !g.is_empty()) {
        for x in g {
            if !truthy(&group_info(env, &json!(x))?) {
                missing.push(x.clone());
            }
        }
        if !missing.is_empty() {
            if env.test {
                groups = Some(g.iter().filter(|x| !missing.contains(x)).cloned().collect());
            } else {
                return Ok(Err(format!(
                    "The following group(s) are not present: {}",
                    missing.join(",")
                )));
            }
        }
    }
    let present_optgroups = match optional_groups.as_ref().filter(|o| !o.is_empty()) {
        Some(o) => {
            let mut there = Vec::new();
            for x in o {
                if truthy(&group_info(env, &json!(x))?) {
                    there.push(x.clone());
                }
            }
            Some(there)
        }
        None => None,
    };
    Ok(Ok((groups, missing, present_optgroups)))
}

fn present_(low: &Obj, env: &mut Env) -> Step<Obj> {
    let name = name_of(low);
    let shadow = shadow_args(low);
    if !shadow.is_empty() {
        return Err(Stop::Denied(format!(
            "{} need /etc/shadow, which no grant gives: maid does not manage passwords \
             or password aging",
            shadow.join(", ")
        )));
    }
    let mut r = ret(
        low,
        json!(true),
        &format!("User {name} is present and up to date"),
    );
    if truthy(&arg(low, "local")) {
        set(
            &mut r,
            json!(false),
            "local=True is not supported by maid: it runs shadow-utils, not libuser",
        );
        return Ok(r);
    }
    let gecos_of = |key: &str| low.get(key).filter(|v| !v.is_null()).map(py_str);
    let gecos = [
        ("fullname", gecos_of("fullname")),
        ("roomnumber", gecos_of("roomnumber")),
        ("workphone", gecos_of("workphone")),
        ("homephone", gecos_of("homephone")),
        ("other", gecos_of("other")),
    ];
    for (_, field) in gecos.iter().take(3) {
        if let Some(f) = field
            && f.contains(',')
        {
            set(&mut r, json!(false), format!("Unsupported char ',' in {f}"));
            return Ok(r);
        }
    }
    let (groups, missing, present_optgroups) = match wanted_groups(low, env)? {
        Ok(found) => found,
        Err(comment) => {
            set(&mut r, json!(false), comment);
            return Ok(r);
        }
    };
    let gid = arg(low, "gid");
    let usergroup = arg(low, "usergroup");
    let changes_gid = if truthy(&usergroup) {
        let grp = Grp::read(env)?;
        if grp.group_to_gid(&json!(name)) != json!("") {
            json!(name)
        } else {
            gid.clone()
        }
    } else {
        gid.clone()
    };
    let mut w = Wanted {
        uid: arg(low, "uid"),
        gid: gid.clone(),
        groups: groups.clone(),
        optional_groups: present_optgroups.clone(),
        remove_groups: truthy(&arg_or(low, "remove_groups", json!(true))),
        home: arg(low, "home"),
        createhome: truthy(&arg_or(low, "createhome", json!(true))),
        shell: arg(low, "shell"),
        gecos,
        allow_uid_change: truthy(&arg(low, "allow_uid_change")),
        allow_gid_change: truthy(&arg(low, "allow_gid_change")),
    };
    let change = match changes(env, &name, &w, &changes_gid)? {
        Err(strerror) => {
            set(&mut r, json!(false), strerror);
            return Ok(r);
        }
        Ok(c) => c,
    };
    match change {
        Some(change) if !change.is_empty() => update(low, env, r, &name, &mut w, change, &missing),
        Some(_) => Ok(r),
        None => create(low, env, r, &name, &w, groups, present_optgroups, &missing),
    }
}

/// `present` for a user that is there but differs.
fn update(
    low: &Obj,
    env: &mut Env,
    mut r: Obj,
    name: &str,
    w: &mut Wanted,
    change: Vec<(String, Value)>,
    missing: &[String],
) -> Step<Obj> {
    if env.test {
        let mut comment = String::from("The following user attributes are set to be changed:\n");
        for (key, val) in &change {
            comment.push_str(&format!("{key}: {}\n", py_str(val)));
        }
        if !missing.is_empty() {
            comment.push_str(&format!(
                "groups (pending creation): {}\n",
                missing.join(",")
            ));
        }
        set(&mut r, Value::Null, comment);
        return Ok(r);
    }
    let mut change = change;
    let take = |change: &mut Vec<(String, Value)>, key: &str| -> Option<Value> {
        let i = change.iter().position(|(k, _)| k == key)?;
        Some(change.remove(i).1)
    };
    if change.iter().any(|(k, _)| k == "homeDoesNotExist") {
        let home = change
            .iter()
            .find(|(k, _)| k == "homeDoesNotExist")
            .map(|(_, v)| py_str(v))
            .unwrap_or_default();
        return Err(Stop::Denied(format!(
            "the home directory {home} does not exist, and making it for user {name} needs \
             file.mkdir with an owner, which no plugin may set (createhome: False leaves it \
             to be made otherwise)"
        )));
    }
    let pre = user_info(env, name)?;
    let persist = arg(low, "persist_home");
    if let Some(home) = take(&mut change, "home") {
        salt(
            env,
            "user.chhome",
            &[json!(name), home],
            &[("persist", json!(truthy(&persist)))],
        )?;
    }
    let keys: Vec<String> = change
        .iter()
        .map(|(k, _)| k.clone())
        .filter(|k| k != "groups")
        .collect();
    for key in keys {
        let val = take(&mut change, &key).unwrap_or(Value::Null);
        salt(env, &format!("user.ch{key}"), &[json!(name), val], &[])?;
    }
    if let Some(groups) = take(&mut change, "groups") {
        salt(
            env,
            "user.chgroups",
            &[json!(name), groups, json!(!w.remove_groups)],
            &[],
        )?;
    }
    let post = user_info(env, name)?;
    let mut diff = Map::new();
    for (key, val) in &post {
        if pre.get(key).is_none_or(|p| p != val) {
            diff.insert(key.clone(), val.clone());
        }
    }
    if !diff.is_empty() {
        r.insert("comment".into(), json!(format!("Updated user {name}")));
    }
    r.insert("changes".into(), Value::Object(diff));
    w.allow_uid_change = true;
    w.allow_gid_change = true;
    let gid = w.gid.clone();
    if let Ok(Some(left)) = changes(env, name, w, &gid)?
        && !left.is_empty()
    {
        let left: Map<String, Value> = left.into_iter().collect();
        set(
            &mut r,
            json!(false),
            format!(
                "These values could not be changed: {}",
                repr(&Value::Object(left))
            ),
        );
    }
    Ok(r)
}

/// `present` for a user that is not there.
#[allow(clippy::too_many_arguments)]
fn create(
    low: &Obj,
    env: &mut Env,
    mut r: Obj,
    name: &str,
    w: &Wanted,
    groups: Option<Vec<String>>,
    present_optgroups: Option<Vec<String>>,
    missing: &[String],
) -> Step<Obj> {
    if env.test {
        let mut comment = format!("User {name} set to be added");
        if !missing.is_empty() {
            comment.push_str(&format!(" (pending groups: {})", missing.join(",")));
        }
        set(&mut r, Value::Null, comment);
        return Ok(r);
    }
    let optgroups = present_optgroups.filter(|o| !o.is_empty());
    let groups = match (groups, optgroups) {
        (Some(g), Some(o)) if !g.is_empty() => Some([g, o].concat()),
        (_, Some(o)) => Some(o),
        (g, None) => g,
    };
    let gecos = |key: &str| {
        w.gecos
            .iter()
            .find(|(k, _)| *k == key)
            .and_then(|(_, v)| v.clone())
            .map_or(Value::Null, |v| json!(v))
    };
    let params: Vec<(&str, Value)> = vec![
        ("uid", w.uid.clone()),
        ("gid", w.gid.clone()),
        ("groups", groups.map_or(Value::Null, |g| json!(g))),
        ("home", w.home.clone()),
        ("shell", w.shell.clone()),
        ("unique", arg_or(low, "unique", json!(true))),
        ("system", arg_or(low, "system", json!(false))),
        ("fullname", gecos("fullname")),
        ("roomnumber", gecos("roomnumber")),
        ("workphone", gecos("workphone")),
        ("homephone", gecos("homephone")),
        ("other", gecos("other")),
        ("createhome", json!(w.createhome)),
        ("nologinit", arg_or(low, "nologinit", json!(false))),
        ("loginclass", arg(low, "loginclass")),
        ("usergroup", arg(low, "usergroup")),
    ];
    let result = salt(env, "user.add", &[json!(name)], &params)?;
    if result == json!(true) {
        let mut info = user_info(env, name)?;
        if !w.createhome {
            info.insert("home".into(), json!(""));
        }
        r.insert("comment".into(), json!(format!("New user {name} created")));
        r.insert("changes".into(), Value::Object(info));
    } else {
        set(
            &mut r,
            json!(false),
            format!("Failed to create new user {name}"),
        );
    }
    Ok(r)
}

/// Ensure that the named user is absent.
pub fn absent(low: &Obj, env: &mut Env) -> Result<Obj, String> {
    finish(low, absent_(low, env))
}

fn absent_(low: &Obj, env: &mut Env) -> Step<Obj> {
    let name = name_of(low);
    let mut r = ret(low, json!(true), "");
    if truthy(&arg(low, "local")) {
        set(
            &mut r,
            json!(false),
            "local=True is not supported by maid: it runs shadow-utils, not libuser",
        );
        return Ok(r);
    }
    if user_info(env, &name)?.is_empty() {
        r.insert(
            "comment".into(),
            json!(format!("User {name} is not present")),
        );
        return Ok(r);
    }
    if env.test {
        set(&mut r, Value::Null, format!("User {name} set for removal"));
        return Ok(r);
    }
    let before = salt(env, "user.list_groups", &[json!(name)], &[])?;
    let before: Vec<String> = sorted_set(
        before
            .as_array()
            .map(|a| a.iter().map(py_str).collect())
            .unwrap_or_default(),
    );
    let purge = arg_or(low, "purge", json!(false));
    let force = arg_or(low, "force", json!(false));
    let result = salt(
        env,
        "user.delete",
        &[json!(name), purge, force],
        &[("local", json!(false))],
    )?;
    let mut gone = Vec::new();
    for g in &before {
        if !truthy(&group_info(env, &json!(g))?) {
            gone.push(g.clone());
        }
    }
    if truthy(&result) {
        let mut changes = Map::new();
        for g in gone {
            changes.insert(format!("{g} group"), json!("removed"));
        }
        changes.insert(name.clone(), json!("removed"));
        r.insert("result".into(), result);
        r.insert("changes".into(), Value::Object(changes));
        r.insert("comment".into(), json!(format!("Removed user {name}")));
    } else {
        set(
            &mut r,
            json!(false),
            format!("Failed to remove user {name}"),
        );
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_lookups_answer_as_salts_file_module() {
        let grp = Grp(vec![
            ("staff".into(), json!(50)),
            ("alias".into(), json!(50)),
            ("dev".into(), json!(1000)),
        ]);
        assert_eq!(grp.group_to_gid(&json!("staff")), json!(50));
        assert_eq!(grp.group_to_gid(&json!("nosuch")), json!(""));
        assert_eq!(grp.group_to_gid(&json!("1000")), json!(""), "a name");
        assert_eq!(grp.group_to_gid(&json!(7)), json!(7));
        assert_eq!(grp.group_to_gid(&Value::Null), json!(""));
        assert_eq!(grp.gid_to_group(&json!(50)), json!("staff"), "the first");
        assert_eq!(grp.gid_to_group(&json!("1000")), json!("dev"));
        assert_eq!(grp.gid_to_group(&json!("dev")), json!("dev"));
        assert_eq!(grp.gid_to_group(&json!(4242)), json!(4242));
        assert_eq!(grp.gid_to_group(&json!("nosuch")), json!(""));
    }

    #[test]
    fn the_shadow_arguments_are_named_when_given() {
        let low: Obj = serde_json::from_value(json!({
            "name": "u", "password": "$6$x", "hash_password": true, "mindays": 0,
            "expire": null, "empty_password": false, "password_lock": false,
        }))
        .unwrap();
        assert_eq!(shadow_args(&low), ["password", "mindays", "password_lock"]);
        let low: Obj = serde_json::from_value(json!({"name": "u", "shell": "/bin/sh"})).unwrap();
        assert!(shadow_args(&low).is_empty());
    }
}
