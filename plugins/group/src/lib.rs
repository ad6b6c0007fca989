//! Salt's `group` module (`groupadd` on Linux). This file is the read
//! side: groups from `/etc/group`, the one file the grants name. Groups
//! that only a directory service knows (NSS) are not seen. [`change`]
//! adds, changes and removes groups through shadow-utils, under the
//! `exec` grant.
//!
//! The file is read and parsed by the SDK's [`accounts`], which the
//! `user` module shares; this file only shapes each entry as Salt's
//! `groupadd` returns it.

use maid_sdk::accounts;
use maid_sdk::{Capability, Error, Function, Plugin, export_plugin, function, python};
use serde::Deserialize;
use serde_json::{Value, json};

mod change;

struct GroupModule;

/// Salt's `groupadd._format_info` of each `/etc/group` entry, in file
/// order.
fn groups() -> Result<Vec<Value>, Error> {
    Ok(accounts::groups()?
        .into_iter()
        .map(|g| json!({"name": g.name, "passwd": g.passwd, "gid": g.gid, "members": g.members}))
        .collect())
}

#[derive(Deserialize)]
struct Name {
    name: Value,
}

#[derive(Deserialize)]
struct Refresh {
    #[serde(default)]
    #[allow(dead_code)] // Salt caches getent; this reads the file each time.
    refresh: Value,
}

/// `info(name)`: the group, or `{}` when there is none.
pub(crate) fn find(name: &str) -> Result<Value, Error> {
    Ok(groups()?
        .into_iter()
        .find(|g| g["name"] == name)
        .unwrap_or_else(|| json!({})))
}

/// Return a group: name, passwd, gid, members ({} if none)
#[function(args = ["name"])]
fn info(a: Name) -> Result<Value, Error> {
    find(&python::str(&a.name))
}

/// Return every group, as group.info shows one
#[function(args = ["refresh=false"])]
fn getent(_: Refresh) -> Result<Vec<Value>, Error> {
    groups()
}

impl Plugin for GroupModule {
    const MODULE: &'static str = "group";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const CAPABILITIES: &'static [Capability] = &[Capability::FsRead, Capability::Exec];

    fn functions() -> Vec<Function> {
        maid_sdk::functions![
            info,
            getent,
            change::add,
            change::delete,
            change::chgid,
            change::adduser,
            change::deluser,
            change::members
        ]
    }
}

export_plugin!(GroupModule);
