//! Salt's `group` module, the side that changes groups (`groupadd` on
//! Linux): `add`, `delete`, `chgid`, `adduser`, `deluser` and `members`,
//! each running the program Salt 3008.4 runs (`groupadd`, `groupdel`,
//! `groupmod`, `gpasswd`) with Salt's argv, under this plugin's `exec`
//! grant.
//!
//! Every name is checked ([`accounts::word`]) before a program starts: one
//! that begins with `-` would be an option, one holding `:`, `,` or a
//! newline would add a field, a member or a line to `/etc/group`. `root=`
//! (a chroot) and `local=True` (libuser's `lgroupadd`) are refused. Salt's
//! SUSE 11 branches (`usermod -A`) are not taken: Salt compares the
//! `osmajorrelease` grain, a number, with the text `"11"`, so they never
//! run there either.

use maid_sdk::accounts::{Word, word};
use maid_sdk::host::Command;
use maid_sdk::{Error, function, python};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::find;

/// Run `argv` (`python_shell=False`); its exit status. A refusal by the
/// grants is the error.
fn status(argv: &[&str]) -> Result<i32, Error> {
    Ok(
        Command::from_argv(argv.iter().map(|s| s.to_string()).collect())
            .output()?
            .retcode,
    )
}

/// Python's `str()` of a name, checked.
fn name_word(what: &str, v: &Value) -> Result<String, Error> {
    let s = python::str(v);
    word(what, &s, Word::Name)?;
    Ok(s)
}

fn refuse_root_local(root: &Value, local: &Value) -> Result<(), Error> {
    if !root.is_null() {
        return Err(Error::bad_arguments(
            "root is not supported by maid: the grants name the host's account files, not a chroot's",
        ));
    }
    if python::truthy(local) {
        return Err(Error::bad_arguments(
            "local=True is not supported by maid: it runs shadow-utils, not libuser",
        ));
    }
    Ok(())
}

/// A gid as Salt hands it on: digits only (it goes into `-g GID`).
fn gid_word(v: &Value) -> Result<String, Error> {
    let s = python::str(v);
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Error::bad_arguments(format!("gid {s:?} is not a number")));
    }
    Ok(s)
}

#[derive(Deserialize)]
pub(crate) struct Add {
    name: Value,
    gid: Value,
    system: Value,
    root: Value,
    non_unique: Value,
    local: Value,
}

/// Salt's argv for `add`: `-g GID` is one word, as Salt passes it.
fn add_argv(a: &Add, name: &str) -> Result<Vec<String>, Error> {
    let mut cmd = vec!["groupadd".to_string()];
    if python::truthy(&a.gid) {
        cmd.push(format!("-g {}", gid_word(&a.gid)?));
        if python::truthy(&a.non_unique) {
            cmd.push("-o".into());
        }
    }
    if python::truthy(&a.system) {
        cmd.push("-r".into());
    }
    cmd.push(name.to_string());
    Ok(cmd)
}

/// Add a group (groupadd): gid, system, non_unique
#[function(args = ["name", "gid=null", "system=false", "root=null", "non_unique=false", "local=false"])]
pub(crate) fn add(a: Add) -> Result<bool, Error> {
    refuse_root_local(&a.root, &a.local)?;
    let name = name_word("name", &a.name)?;
    let argv = add_argv(&a, &name)?;
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    Ok(status(&argv)? == 0)
}

#[derive(Deserialize)]
pub(crate) struct Delete {
    name: Value,
    root: Value,
    local: Value,
}

/// Remove a group (groupdel)
#[function(args = ["name", "root=null", "local=false"])]
pub(crate) fn delete(a: Delete) -> Result<bool, Error> {
    refuse_root_local(&a.root, &a.local)?;
    let name = name_word("name", &a.name)?;
    Ok(status(&["groupdel", &name])? == 0)
}

#[derive(Deserialize)]
pub(crate) struct ChGid {
    name: Value,
    gid: Value,
    root: Value,
    non_unique: Value,
}

/// Change a group's gid (groupmod -g; non_unique=True allows a taken one, -og)
#[function(args = ["name", "gid", "root=null", "non_unique=false"])]
pub(crate) fn chgid(a: ChGid) -> Result<bool, Error> {
    refuse_root_local(&a.root, &Value::Null)?;
    let name = name_word("name", &a.name)?;
    let gid = gid_word(&a.gid)?;
    let pre = find(&name)?;
    if pre.as_object().is_none_or(|o| o.is_empty()) {
        return Ok(false);
    }
    if same(&a.gid, &pre["gid"]) {
        return Ok(true);
    }
    let param = if python::truthy(&a.non_unique) {
        "-og"
    } else {
        "-g"
    };
    // Salt's cmd.run: the status is not looked at, only the result.
    status(&["groupmod", param, &gid, &name])?;
    Ok(same(&find(&name)?["gid"], &a.gid))
}

/// Python's `==` between a gid given and one read: numbers by value.
fn same(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

#[derive(Deserialize)]
pub(crate) struct Member {
    name: Value,
    username: Value,
    root: Value,
}

/// Add a user to a group (gpasswd --add)
#[function(args = ["name", "username", "root=null"])]
pub(crate) fn adduser(a: Member) -> Result<bool, Error> {
    refuse_root_local(&a.root, &Value::Null)?;
    let name = name_word("name", &a.name)?;
    let user = name_word("username", &a.username)?;
    Ok(status(&["gpasswd", "--add", &user, &name])? == 0)
}

/// Remove a user from a group (gpasswd --del), when it lists the user
#[function(args = ["name", "username", "root=null"])]
pub(crate) fn deluser(a: Member) -> Result<bool, Error> {
    refuse_root_local(&a.root, &Value::Null)?;
    let name = name_word("name", &a.name)?;
    let user = name_word("username", &a.username)?;
    let info = find(&name)?;
    // Salt's `username in grp_info["members"]`: a group that is not there
    // raises KeyError, which it takes as done.
    let listed = info["members"]
        .as_array()
        .is_some_and(|m| m.contains(&json!(user)));
    if !listed {
        return Ok(true);
    }
    Ok(status(&["gpasswd", "--del", &user, &name])? == 0)
}

#[derive(Deserialize)]
pub(crate) struct Members {
    name: Value,
    members_list: Value,
    root: Value,
}

/// Set a group's members to a comma-separated list (gpasswd --members)
#[function(args = ["name", "members_list", "root=null"])]
pub(crate) fn members(a: Members) -> Result<bool, Error> {
    refuse_root_local(&a.root, &Value::Null)?;
    let name = name_word("name", &a.name)?;
    let list = python::str(&a.members_list);
    if !list.is_empty() {
        for user in list.split(',') {
            word("member", user, Word::Name)?;
        }
    }
    Ok(status(&["gpasswd", "--members", &list, &name])? == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groupadd_is_told_what_salt_tells_it() {
        let a = |v: Value| -> Add { serde_json::from_value(v).unwrap() };
        let plain = a(
            json!({"name": "g", "gid": null, "system": false, "root": null,
            "non_unique": false, "local": false}),
        );
        assert_eq!(add_argv(&plain, "g").unwrap(), ["groupadd", "g"]);
        let all = a(
            json!({"name": "g", "gid": 4000, "system": true, "root": null,
            "non_unique": true, "local": false}),
        );
        assert_eq!(
            add_argv(&all, "g").unwrap(),
            ["groupadd", "-g 4000", "-o", "-r", "g"]
        );
        let bad = a(
            json!({"name": "g", "gid": "-o", "system": false, "root": null,
            "non_unique": false, "local": false}),
        );
        assert!(add_argv(&bad, "g").is_err());
    }
}
