//! Salt's `user` module, the side that changes accounts (`useradd` on
//! Linux): `add`, `delete` and the `ch*` functions, each running the
//! shadow-utils program Salt 3008.4 runs (`useradd`, `userdel`, `usermod`,
//! `gpasswd`) with Salt's argv, under this plugin's `exec` grant.
//!
//! Every name and value is checked ([`accounts::word`]) before a program
//! starts: one that begins with `-` would be an option to the program, one
//! holding `:` or a newline would add a field or a line to `/etc/passwd`.
//! Salt hands them on as they are; a refused one is bad arguments here.
//! `root=` (`-R`, a chroot) and `local=True` (libuser's `luseradd`) are
//! refused too: neither is among what the grants describe.

use maid_sdk::accounts::{self, Word, word};
use maid_sdk::host::{self, Command, Output};
use maid_sdk::{Error, function, python};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::{find_info, group_list};

/// Run `argv` as Salt's `cmd.run_all` does (`python_shell=False`): the
/// program's status and output; a refusal by the grants is the error.
fn run(argv: Vec<String>) -> Result<Output, Error> {
    Command::from_argv(argv).output()
}

/// `name` as a word for the programs: Python's `str()` of it, checked.
fn name_word(what: &str, v: &Value) -> Result<String, Error> {
    let s = python::str(v);
    word(what, &s, Word::Name)?;
    Ok(s)
}

/// Python's `==` between what a job gave and what the files hold: numbers
/// (and bools) by value, everything else exactly.
fn same(a: &Value, b: &Value) -> bool {
    let num = |v: &Value| match v {
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        Value::Number(n) => n.as_f64(),
        _ => None,
    };
    match (num(a), num(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// `root=` and `local=True`, which maid does not run: refused before
/// anything else.
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

/// Salt's `file.group_to_gid` for a name: its gid, or `""` for none.
fn group_to_gid(name: &str) -> Result<Value, Error> {
    Ok(accounts::groups()?
        .into_iter()
        .find(|g| g.name == name)
        .map_or(json!(""), |g| json!(g.gid)))
}

/// Whether `/etc/login.defs` says `USERGROUPS_ENAB yes`, read as Salt reads
/// it: the first line with `USERGROUPS_ENAB` in its first 15 characters
/// decides, by holding `yes` anywhere. A file that cannot be read says no.
fn usergroups_enab() -> bool {
    let Ok(bytes) = host::read_file("/etc/login.defs") else {
        return false;
    };
    let text = String::from_utf8_lossy(&bytes);
    text.split_inclusive('\n')
        .find(|line| {
            line.chars()
                .take(15)
                .collect::<String>()
                .contains("USERGROUPS_ENAB")
        })
        .is_some_and(|line| line.contains("yes"))
}

/// The groups a job gave: a list, or Salt's comma-separated text.
fn group_names(groups: &Value) -> Vec<String> {
    match groups {
        Value::String(s) => s.split(',').map(str::to_string).collect(),
        Value::Array(a) => a.iter().map(python::str).collect(),
        Value::Null => Vec::new(),
        other => vec![python::str(other)],
    }
}

#[derive(Deserialize)]
pub(crate) struct Add {
    name: Value,
    uid: Value,
    gid: Value,
    groups: Value,
    home: Value,
    shell: Value,
    unique: Value,
    system: Value,
    fullname: Value,
    roomnumber: Value,
    workphone: Value,
    homephone: Value,
    other: Value,
    createhome: Value,
    #[allow(dead_code)] // OpenBSD's alone, as in Salt.
    loginclass: Value,
    nologinit: Value,
    root: Value,
    usergroup: Value,
    local: Value,
}

/// Salt's `add`: `useradd` with Salt's options, then the groups and GECOS
/// fields through the `ch*` functions. Checked whole before useradd runs.
fn add_argv(a: &Add, name: &str) -> Result<Vec<String>, Error> {
    let mut cmd = vec!["useradd".to_string()];
    if python::truthy(&a.shell) {
        let shell = python::str(&a.shell);
        word("shell", &shell, Word::Shell)?;
        cmd.extend(["-s".into(), shell]);
    }
    if !a.uid.is_null() && a.uid != json!("") {
        let uid = python::str(&a.uid);
        if uid.is_empty() || !uid.bytes().all(|b| b.is_ascii_digit()) {
            return Err(Error::bad_arguments(format!("uid {uid:?} is not a number")));
        }
        cmd.extend(["-u".into(), uid]);
    }
    if !a.gid.is_null() && a.gid != json!("") {
        cmd.extend(["-g".into(), name_word("gid", &a.gid)?]);
    } else if python::truthy(&a.usergroup) {
        cmd.push("-U".into());
    } else if !a.groups.is_null()
        && group_names(&a.groups).iter().any(|g| g == name)
        && usergroups_enab()
    {
        cmd.extend(["-g".into(), python::str(&group_to_gid(name)?)]);
    }
    if a.usergroup == json!(false) {
        cmd.push("-N".into());
    }
    if python::truthy(&a.createhome) {
        cmd.push("-m".into());
    } else {
        cmd.push("-M".into());
    }
    if python::truthy(&a.nologinit) {
        cmd.push("-l".into());
    }
    if !a.home.is_null() {
        let home = python::str(&a.home);
        word("home", &home, Word::Home)?;
        cmd.extend(["-d".into(), home]);
    }
    if !python::truthy(&a.unique) {
        cmd.push("-o".into());
    }
    if python::truthy(&a.system) {
        cmd.push("-r".into());
    }
    cmd.push(name.to_string());
    Ok(cmd)
}

/// Add a user (useradd): uid, gid, groups, home, shell, unique, system, GECOS fields, createhome, nologinit, usergroup
#[function(args = [
    "name", "uid=null", "gid=null", "groups=null", "home=null", "shell=null", "unique=true",
    "system=false", "fullname=\"\"", "roomnumber=\"\"", "workphone=\"\"", "homephone=\"\"",
    "other=\"\"", "createhome=true", "loginclass=null", "nologinit=false", "root=null",
    "usergroup=null", "local=false",
])]
pub(crate) fn add(a: Add) -> Result<bool, Error> {
    refuse_root_local(&a.root, &a.local)?;
    let name = name_word("name", &a.name)?;
    let groups = group_names(&a.groups);
    for g in &groups {
        word("group", g, Word::Name)?;
    }
    let gecos = [
        ("fullname", &a.fullname, Word::Gecos),
        ("roomnumber", &a.roomnumber, Word::Gecos),
        ("workphone", &a.workphone, Word::Gecos),
        ("homephone", &a.homephone, Word::Gecos),
        ("other", &a.other, Word::GecosLast),
    ];
    for (key, value, kind) in &gecos {
        if python::truthy(value) {
            word(key, &python::str(value), *kind)?;
        }
    }
    let argv = add_argv(&a, &name)?;
    if run(argv)?.retcode != 0 {
        return Ok(false);
    }
    // As Salt: the account exists now, so the rest cannot make add fail;
    // a field left unchanged shows at the next state run.
    if python::truthy(&a.groups) {
        chgroups_of(&name, &groups, false)?;
    }
    for (key, value, _) in &gecos {
        if python::truthy(value) {
            update_gecos(&name, key, value)?;
        }
    }
    Ok(true)
}

#[derive(Deserialize)]
pub(crate) struct Delete {
    name: Value,
    remove: Value,
    force: Value,
    root: Value,
    local: Value,
}

/// Remove a user (userdel): remove=True takes the home directory and mail spool too, force=True even while logged in
#[function(args = ["name", "remove=false", "force=false", "root=null", "local=false"])]
pub(crate) fn delete(a: Delete) -> Result<bool, Error> {
    refuse_root_local(&a.root, &a.local)?;
    let name = name_word("name", &a.name)?;
    let mut cmd = vec!["userdel".to_string()];
    if python::truthy(&a.remove) {
        cmd.push("-r".into());
    }
    if python::truthy(&a.force) {
        cmd.push("-f".into());
    }
    cmd.push(name);
    let out = run(cmd)?;
    if out.retcode == 0 {
        return Ok(true);
    }
    // Salt's allowance for Debian's userdel, which exits 12 when the mail
    // spool it was told to remove is not there.
    if out.retcode == 12 && host::grains().get("os_family") == Some(&json!("Debian")) {
        let stderr = out.stderr_lossy();
        return Ok(stderr.contains("var/mail") || stderr.contains("var/spool/mail"));
    }
    Ok(false)
}

/// The account of `name` as `user.info` shows it ({} when none).
fn info_of(name: &str) -> Result<Value, Error> {
    find_info(name)
}

/// Salt's `_chattrib`: `usermod PARAM VALUE NAME` unless the account holds
/// `value` already; whether it holds it after.
fn chattrib(
    name: &Value,
    key: &str,
    value: &Value,
    param: &str,
    persist: bool,
) -> Result<bool, Error> {
    let name = name_word("name", name)?;
    let text = python::str(value);
    match key {
        "uid" if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) => {
            return Err(Error::bad_arguments(format!(
                "uid {text:?} is not a number"
            )));
        }
        "gid" => word("gid", &text, Word::Name)?,
        "shell" => word("shell", &text, Word::Shell)?,
        "home" => word("home", &text, Word::Home)?,
        _ => {}
    }
    let pre = info_of(&name)?;
    if pre.as_object().is_none_or(|o| o.is_empty()) {
        return Err(Error::failed(format!("User '{name}' does not exist"), 1));
    }
    if same(value, &pre[key]) {
        return Ok(true);
    }
    let mut cmd = vec!["usermod".to_string()];
    if persist {
        cmd.push("-m".into());
    }
    cmd.extend([param.to_string(), text, name.clone()]);
    // Salt's cmd.run: the status is not looked at, only the result.
    run(cmd)?;
    Ok(same(&info_of(&name)?[key], value))
}

#[derive(Deserialize)]
pub(crate) struct ChUid {
    name: Value,
    uid: Value,
    root: Value,
}

/// Change a user's uid (usermod -u)
#[function(args = ["name", "uid", "root=null"])]
pub(crate) fn chuid(a: ChUid) -> Result<bool, Error> {
    refuse_root_local(&a.root, &Value::Null)?;
    chattrib(&a.name, "uid", &a.uid, "-u", false)
}

#[derive(Deserialize)]
pub(crate) struct ChGid {
    name: Value,
    gid: Value,
    root: Value,
}

/// Change a user's primary group (usermod -g)
#[function(args = ["name", "gid", "root=null"])]
pub(crate) fn chgid(a: ChGid) -> Result<bool, Error> {
    refuse_root_local(&a.root, &Value::Null)?;
    chattrib(&a.name, "gid", &a.gid, "-g", false)
}

#[derive(Deserialize)]
pub(crate) struct ChShell {
    name: Value,
    shell: Value,
    root: Value,
}

/// Change a user's login shell (usermod -s)
#[function(args = ["name", "shell", "root=null"])]
pub(crate) fn chshell(a: ChShell) -> Result<bool, Error> {
    refuse_root_local(&a.root, &Value::Null)?;
    chattrib(&a.name, "shell", &a.shell, "-s", false)
}

#[derive(Deserialize)]
pub(crate) struct ChHome {
    name: Value,
    home: Value,
    persist: Value,
    root: Value,
}

/// Change a user's home directory (usermod -d; persist=True moves its files, -m)
#[function(args = ["name", "home", "persist=false", "root=null"])]
pub(crate) fn chhome(a: ChHome) -> Result<bool, Error> {
    refuse_root_local(&a.root, &Value::Null)?;
    chattrib(&a.name, "home", &a.home, "-d", python::truthy(&a.persist))
}

/// Salt's `chgroups` on checked words: `usermod [-a] -G G1,G2 NAME`,
/// falling back on `gpasswd -a` per group where usermod did not find the
/// user in the local files.
fn chgroups_of(name: &str, groups: &[String], append: bool) -> Result<bool, Error> {
    for g in groups {
        word("group", g, Word::Name)?;
    }
    let current: std::collections::BTreeSet<String> = current_groups(name)?.into_iter().collect();
    let wanted: std::collections::BTreeSet<String> = groups.iter().cloned().collect();
    if current == wanted {
        return Ok(true);
    }
    let mut cmd = vec!["usermod".to_string()];
    if append {
        cmd.push("-a".into());
    }
    cmd.extend(["-G".into(), groups.join(","), name.to_string()]);
    let out = run(cmd)?;
    if out.retcode != 0 && out.stderr_lossy().contains("not found in") {
        let mut ok = true;
        for g in groups {
            let argv = vec!["gpasswd".into(), "-a".into(), name.to_string(), g.clone()];
            if run(argv)?.retcode != 0 {
                ok = false;
            }
        }
        return Ok(ok);
    }
    Ok(out.retcode == 0)
}

/// `list_groups(name)`: the primary group and every group listing it.
fn current_groups(name: &str) -> Result<Vec<String>, Error> {
    let groups = accounts::groups()?;
    Ok(accounts::passwd()?
        .iter()
        .find(|u| u.name == name)
        .map(|u| group_list(u, &groups))
        .unwrap_or_default())
}

#[derive(Deserialize)]
pub(crate) struct ChGroups {
    name: Value,
    groups: Value,
    append: Value,
    root: Value,
}

/// Set a user's groups (usermod -G G1,G2; append=True adds them, -a)
#[function(args = ["name", "groups", "append=false", "root=null"])]
pub(crate) fn chgroups(a: ChGroups) -> Result<bool, Error> {
    refuse_root_local(&a.root, &Value::Null)?;
    let name = name_word("name", &a.name)?;
    chgroups_of(&name, &group_names(&a.groups), python::truthy(&a.append))
}

/// The GECOS fields of `name`, in order, as Salt's `_get_gecos` splits them.
const GECOS: [&str; 5] = ["fullname", "roomnumber", "workphone", "homephone", "other"];

/// Salt's `_update_gecos`: `usermod -c GECOS NAME` with `key` set to
/// `value`, unless it holds it already; whether it holds it after.
fn update_gecos(name: &str, key: &str, value: &Value) -> Result<bool, Error> {
    let value = match value {
        Value::Null => String::new(),
        other => python::str(other),
    };
    let kind = if key == "other" {
        Word::GecosLast
    } else {
        Word::Gecos
    };
    word(key, &value, kind)?;
    let pre = info_of(name)?;
    if pre.as_object().is_none_or(|o| o.is_empty()) {
        // Salt's pwd.getpwnam raises.
        return Err(Error::failed(
            format!("KeyError: \"getpwnam(): name not found: '{name}'\""),
            1,
        ));
    }
    if pre[key] == json!(value) {
        return Ok(true);
    }
    let fields: Vec<String> = GECOS
        .iter()
        .map(|k| {
            if *k == key {
                value.clone()
            } else {
                python::str(&pre[*k])
            }
        })
        .collect();
    let gecos = fields.join(",").trim_end_matches(',').to_string();
    run(vec!["usermod".into(), "-c".into(), gecos, name.to_string()])?;
    Ok(info_of(name)?[key] == json!(value))
}

#[derive(Deserialize)]
pub(crate) struct ChGecos {
    name: Value,
    #[serde(alias = "fullname", alias = "roomnumber", alias = "workphone")]
    #[serde(alias = "homephone", alias = "other")]
    value: Value,
    root: Value,
}

fn gecos_fn(a: ChGecos, key: &str) -> Result<bool, Error> {
    refuse_root_local(&a.root, &Value::Null)?;
    let name = name_word("name", &a.name)?;
    update_gecos(&name, key, &a.value)
}

/// Change a user's full name (usermod -c, GECOS field 1)
#[function(args = ["name", "fullname", "root=null"])]
pub(crate) fn chfullname(a: ChGecos) -> Result<bool, Error> {
    gecos_fn(a, "fullname")
}

/// Change a user's room number (usermod -c, GECOS field 2)
#[function(args = ["name", "roomnumber", "root=null"])]
pub(crate) fn chroomnumber(a: ChGecos) -> Result<bool, Error> {
    gecos_fn(a, "roomnumber")
}

/// Change a user's work phone (usermod -c, GECOS field 3)
#[function(args = ["name", "workphone", "root=null"])]
pub(crate) fn chworkphone(a: ChGecos) -> Result<bool, Error> {
    gecos_fn(a, "workphone")
}

/// Change a user's home phone (usermod -c, GECOS field 4)
#[function(args = ["name", "homephone", "root=null"])]
pub(crate) fn chhomephone(a: ChGecos) -> Result<bool, Error> {
    gecos_fn(a, "homephone")
}

/// Change a user's other GECOS field (usermod -c, GECOS field 5)
#[function(args = ["name", "other", "root=null"])]
pub(crate) fn chother(a: ChGecos) -> Result<bool, Error> {
    gecos_fn(a, "other")
}

#[derive(Deserialize)]
pub(crate) struct Path1 {
    path: Value,
}

/// Return whether a home directory PATH exists (test -d), for user.present's createhome
///
/// Not Salt's: Salt's `user.present` asks `os.path.isdir` itself, which
/// the state plugin (granted no directories) cannot. Only an absolute path
/// without `..` is asked about; `test` changes nothing.
#[function(args = ["path"])]
pub(crate) fn home_exists(a: Path1) -> Result<bool, Error> {
    let path = python::str(&a.path);
    word("home", &path, Word::Home)?;
    Ok(run(vec!["test".into(), "-d".into(), path])?.retcode == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(args: Value) -> Add {
        let mut base = json!({
            "name": "alice", "uid": null, "gid": null, "groups": null, "home": null,
            "shell": null, "unique": true, "system": false, "fullname": "", "roomnumber": "",
            "workphone": "", "homephone": "", "other": "", "createhome": true,
            "loginclass": null, "nologinit": false, "root": null, "usergroup": null,
            "local": false,
        });
        for (k, v) in args.as_object().unwrap() {
            base[k] = v.clone();
        }
        serde_json::from_value(base).unwrap()
    }

    #[test]
    fn useradd_is_told_what_salt_tells_it() {
        let argv = add_argv(&add(json!({})), "alice").unwrap();
        assert_eq!(argv, ["useradd", "-m", "alice"]);
        let a = add(json!({
            "shell": "/bin/zsh", "uid": 4000, "gid": "staff", "createhome": false,
            "home": "/srv/alice", "unique": false, "system": true, "usergroup": false,
            "nologinit": true,
        }));
        assert_eq!(
            add_argv(&a, "alice").unwrap(),
            [
                "useradd",
                "-s",
                "/bin/zsh",
                "-u",
                "4000",
                "-g",
                "staff",
                "-N",
                "-M",
                "-l",
                "-d",
                "/srv/alice",
                "-o",
                "-r",
                "alice"
            ]
        );
        let a = add(json!({"usergroup": true}));
        assert_eq!(
            add_argv(&a, "alice").unwrap(),
            ["useradd", "-U", "-m", "alice"]
        );
    }

    #[test]
    fn values_that_would_be_options_are_refused_before_useradd() {
        for bad in [
            json!({"shell": "-o"}),
            json!({"uid": "-1"}),
            json!({"uid": "12x"}),
            json!({"gid": "--badname"}),
            json!({"home": "../x"}),
            json!({"home": "/home/a\n/b"}),
        ] {
            assert!(add_argv(&add(bad.clone()), "alice").is_err(), "{bad}");
        }
    }

    #[test]
    fn python_equality_holds_numbers_by_value() {
        assert!(same(&json!(1000), &json!(1000.0)));
        assert!(same(&json!(true), &json!(1)));
        assert!(!same(&json!("1000"), &json!(1000)));
        assert!(same(&json!("/bin/sh"), &json!("/bin/sh")));
    }
}
