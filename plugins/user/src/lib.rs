//! Salt's `user` module, read side (`useradd` on Linux): accounts from
//! `/etc/passwd` and their groups from `/etc/group`, the two files the
//! grants name (never `/etc/shadow`). Accounts that only a directory
//! service knows (NSS) are not seen: only the local files are read.

use maid_sdk::{Call, Capability, Error, Function, Plugin, export_plugin, host, python};
use serde::Deserialize;
use serde_json::{Value, json};

struct User;

/// One `/etc/passwd` line.
struct Passwd {
    name: String,
    passwd: String,
    uid: u32,
    gid: u32,
    gecos: String,
    home: String,
    shell: String,
}

/// One `/etc/group` line.
struct Group {
    name: String,
    gid: u32,
    members: Vec<String>,
}

fn lines(path: &str) -> Result<Vec<String>, Error> {
    let text = String::from_utf8_lossy(&host::read_file(path)?).into_owned();
    Ok(text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect())
}

fn passwd() -> Result<Vec<Passwd>, Error> {
    Ok(lines("/etc/passwd")?
        .iter()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            let [name, passwd, uid, gid, gecos, home, shell] = f[..] else {
                return None;
            };
            Some(Passwd {
                name: name.into(),
                passwd: passwd.into(),
                uid: uid.parse().ok()?,
                gid: gid.parse().ok()?,
                gecos: gecos.into(),
                home: home.into(),
                shell: shell.into(),
            })
        })
        .collect())
}

fn groups() -> Result<Vec<Group>, Error> {
    Ok(lines("/etc/group")?
        .iter()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            let [name, _, gid, members] = f[..] else {
                return None;
            };
            Some(Group {
                name: name.into(),
                gid: gid.parse().ok()?,
                members: members
                    .split(',')
                    .filter(|m| !m.is_empty())
                    .map(str::to_string)
                    .collect(),
            })
        })
        .collect())
}

/// Salt's `salt.utils.user.get_group_list`: the primary group and every
/// group listing the user, by name, sorted.
fn group_list(user: &Passwd, groups: &[Group]) -> Vec<String> {
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

impl Plugin for User {
    const MODULE: &'static str = "user";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const CAPABILITIES: &'static [Capability] = &[Capability::FsRead];

    fn functions() -> Vec<Function> {
        vec![
            Function::new(
                "info",
                "Return a user's account: uid, gid, groups, home, shell, GECOS fields ({} if none)",
                &["name"],
                |a: Name, _: &Call| {
                    let name = python::str(&a.name);
                    let groups = groups()?;
                    Ok(passwd()?
                        .iter()
                        .find(|u| u.name == name)
                        .map_or_else(|| json!({}), |u| info(u, &groups)))
                },
            ),
            Function::new(
                "list_users",
                "Return the names of all users, sorted",
                &[],
                |(): (), _: &Call| {
                    let mut names: Vec<String> = passwd()?.into_iter().map(|u| u.name).collect();
                    names.sort();
                    Ok(names)
                },
            ),
            Function::new(
                "getent",
                "Return every user's account, as user.info shows one",
                &["refresh=false"],
                |_: Refresh, _: &Call| {
                    let groups = groups()?;
                    Ok(passwd()?
                        .iter()
                        .map(|u| info(u, &groups))
                        .collect::<Vec<_>>())
                },
            ),
            Function::new(
                "list_groups",
                "Return the groups a user belongs to, sorted",
                &["name"],
                |a: Name, _: &Call| {
                    let name = python::str(&a.name);
                    let groups = groups()?;
                    Ok(passwd()?
                        .iter()
                        .find(|u| u.name == name)
                        .map(|u| group_list(u, &groups))
                        .unwrap_or_default())
                },
            ),
            Function::new(
                "primary_group",
                "Return a user's primary group",
                &["name"],
                |a: Name, _: &Call| {
                    let name = python::str(&a.name);
                    let groups = groups()?;
                    let user = passwd()?.into_iter().find(|u| u.name == name);
                    Ok(user
                        .and_then(|u| groups.iter().find(|g| g.gid == u.gid))
                        .map(|g| g.name.clone())
                        .unwrap_or_default())
                },
            ),
        ]
    }
}

export_plugin!(User);
