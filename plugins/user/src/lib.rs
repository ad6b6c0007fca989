//! Salt's `user` module (`useradd` on Linux). This file is the read side:
//! accounts from `/etc/passwd` and their groups from `/etc/group`, the
//! two files the grants name (never `/etc/shadow`). Accounts that only a
//! directory service knows (NSS) are not seen: only the local files are
//! read. [`change`] adds, changes and removes accounts through
//! shadow-utils, under the `exec` grant.
//!
//! The files are read and parsed by the SDK's [`accounts`], which the
//! `group` module shares, so that both read a line the same way; this
//! file only shapes the entries as Salt's `useradd` returns them.

mod change;

use maid_sdk::accounts::{self, Group, Passwd};
use maid_sdk::{Capability, Error, Function, Plugin, export_plugin, function, python};
use serde::Deserialize;
use serde_json::{Value, json};

struct User;

/// Salt's `salt.utils.user.get_group_list`: the primary group and every
/// group listing the user, by name, sorted.
pub(crate) fn group_list(user: &Passwd, groups: &[Group]) -> Vec<String> {
    let mut names: Vec<String> = groups
        .iter()
        .filter(|g| g.gid == user.gid || g.members.contains(&user.name))
        .map(|g| g.name.clone())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Salt's `useradd._format_info`.
fn info(user: &Passwd, groups: &[Group]) -> Value {
    let mut gecos: Vec<&str> = user.gecos.splitn(5, ',').collect();
    gecos.resize(5, "");
    json!({
        "gid": user.gid,
        "groups": group_list(user, groups),
        "home": user.home,
        "name": user.name,
        "passwd": user.passwd,
        "shell": user.shell,
        "uid": user.uid,
        "fullname": gecos[0],
        "roomnumber": gecos[1],
        "workphone": gecos[2],
        "homephone": gecos[3],
        "other": gecos[4],
    })
}

/// `info(name)`: the account, or `{}` when there is none.
pub(crate) fn find_info(name: &str) -> Result<Value, Error> {
    let groups = accounts::groups()?;
    Ok(accounts::passwd()?
        .iter()
        .find(|u| u.name == name)
        .map_or_else(|| json!({}), |u| info(u, &groups)))
}

#[derive(Deserialize)]
struct Name {
    name: Value,
}

#[derive(Deserialize)]
struct Refresh {
    #[serde(default)]
    #[allow(dead_code)] // Salt caches getent; this reads the files each time.
    refresh: Value,
}

/// Return a user's account: uid, gid, groups, home, shell, GECOS fields ({} if none)
#[function(name = "info", args = ["name"])]
fn info_(a: Name) -> Result<Value, Error> {
    find_info(&python::str(&a.name))
}

/// Return the names of all users, sorted
#[function]
fn list_users() -> Result<Vec<String>, Error> {
    let mut names: Vec<String> = accounts::passwd()?.into_iter().map(|u| u.name).collect();
    names.sort();
    Ok(names)
}

/// Return every user's account, as user.info shows one
#[function(args = ["refresh=false"])]
fn getent(_: Refresh) -> Result<Vec<Value>, Error> {
    let groups = accounts::groups()?;
    Ok(accounts::passwd()?
        .iter()
        .map(|u| info(u, &groups))
        .collect::<Vec<_>>())
}

/// Return the groups a user belongs to, sorted
#[function(args = ["name"])]
fn list_groups(a: Name) -> Result<Vec<String>, Error> {
    let name = python::str(&a.name);
    let groups = accounts::groups()?;
    Ok(accounts::passwd()?
        .iter()
        .find(|u| u.name == name)
        .map(|u| group_list(u, &groups))
        .unwrap_or_default())
}

/// Return a user's primary group
#[function(args = ["name"])]
fn primary_group(a: Name) -> Result<String, Error> {
    let name = python::str(&a.name);
    let groups = accounts::groups()?;
    let user = accounts::passwd()?.into_iter().find(|u| u.name == name);
    Ok(user
        .and_then(|u| groups.iter().find(|g| g.gid == u.gid))
        .map(|g| g.name.clone())
        .unwrap_or_default())
}

impl Plugin for User {
    const MODULE: &'static str = "user";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const CAPABILITIES: &'static [Capability] = &[Capability::FsRead, Capability::Exec];

    fn functions() -> Vec<Function> {
        maid_sdk::functions![
            info_,
            list_users,
            getent,
            list_groups,
            primary_group,
            change::add,
            change::delete,
            change::chuid,
            change::chgid,
            change::chshell,
            change::chhome,
            change::chgroups,
            change::chfullname,
            change::chroomnumber,
            change::chworkphone,
            change::chhomephone,
            change::chother,
            change::home_exists
        ]
    }
}

export_plugin!(User);
