//! The local account files, `/etc/passwd` and `/etc/group`, read and
//! parsed in one place for every plugin that reports accounts (`user`,
//! `group`), so that they agree on what a line means.
//!
//! The files are read whole through the host ([`host::read_file`]), not
//! `std::fs`, so the grants name just these files (`files`) instead of
//! opening `/etc` to the plugin; it needs `fs-read`. Only the local files are
//! read: accounts that only a directory service knows (NSS) are not seen,
//! and neither `/etc/shadow` nor `/etc/gshadow` is ever read.
//!
//! Reading is forgiving as `getent` is: blank lines and `#` comments are
//! skipped, and so is a line without exactly the file's number of fields
//! or whose id is not a number, rather than failing the whole file.

use crate::{Error, host};

/// Where the local users are.
pub const PASSWD: &str = "/etc/passwd";

/// Where the local groups are.
pub const GROUP: &str = "/etc/group";

/// One `/etc/passwd` line: `name:passwd:uid:gid:gecos:home:shell`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Passwd {
    /// Login name.
    pub name: String,
    /// The password field as written (`x` when the hash is in the shadow
    /// file).
    pub passwd: String,
    /// User id.
    pub uid: u32,
    /// Primary group id.
    pub gid: u32,
    /// The GECOS field, whole (comma-separated full name, room, phones,
    /// other).
    pub gecos: String,
    /// Home directory.
    pub home: String,
    /// Login shell.
    pub shell: String,
}

/// One `/etc/group` line: `name:passwd:gid:member,member,...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// Group name.
    pub name: String,
    /// The password field as written (usually `x`).
    pub passwd: String,
    /// Group id.
    pub gid: u32,
    /// The users listed as members, in file order (without the users
    /// whose primary group this is, which the file does not list).
    pub members: Vec<String>,
}

/// The lines of an account file that hold entries: not blank, not a
/// `#` comment.
fn entries(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
}

/// One `/etc/passwd` line, unless it has not exactly seven fields or its
/// ids are not numbers.
fn passwd_line(line: &str) -> Option<Passwd> {
    let f: Vec<&str> = line.split(':').collect();
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
}

/// One `/etc/group` line, unless it has not exactly four fields or its id
/// is not a number.
fn group_line(line: &str) -> Option<Group> {
    let f: Vec<&str> = line.split(':').collect();
    let [name, passwd, gid, members] = f[..] else {
        return None;
    };
    Some(Group {
        name: name.into(),
        passwd: passwd.into(),
        gid: gid.parse().ok()?,
        members: members
            .split(',')
            .filter(|m| !m.is_empty())
            .map(str::to_string)
            .collect(),
    })
}

/// The entries of `/etc/passwd` text, in file order.
pub fn parse_passwd(text: &str) -> Vec<Passwd> {
    entries(text).filter_map(passwd_line).collect()
}

/// The entries of `/etc/group` text, in file order.
pub fn parse_group(text: &str) -> Vec<Group> {
    entries(text).filter_map(group_line).collect()
}

/// A whole file through the host, as text (invalid UTF-8 replaced: a
/// stray byte in one GECOS field must not hide every account).
fn read_text(path: &str) -> Result<String, Error> {
    Ok(String::from_utf8_lossy(&host::read_file(path)?).into_owned())
}

/// The users in [`PASSWD`], in file order. Needs `fs-read` and the file
/// among the grants' `files`; a refusal is the host's `Denied` error.
pub fn passwd() -> Result<Vec<Passwd>, Error> {
    Ok(parse_passwd(&read_text(PASSWD)?))
}

/// The groups in [`GROUP`], in file order. Needs `fs-read` and the file
/// among the grants' `files`; a refusal is the host's `Denied` error.
pub fn groups() -> Result<Vec<Group>, Error> {
    Ok(parse_group(&read_text(GROUP)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwd_lines_read_as_getent_reads_them() {
        let text = "# comment\n\
                    root:x:0:0:root:/root:/bin/bash\n\
                    \n\
                    alice:x:1000:100:Alice A,12,555,556,extra:/home/alice:/bin/sh\r\n\
                    short:x:1:1\n\
                    toolong:x:2:2:g:/h:/s:more\n\
                    baduid:x:nope:0::/:/bin/false\n\
                    nobody:*:65534:65534::/nonexistent:/usr/sbin/nologin";
        let users = parse_passwd(text);
        let names: Vec<&str> = users.iter().map(|u| u.name.as_str()).collect();
        assert_eq!(names, ["root", "alice", "nobody"]);
        assert_eq!(
            users[1],
            Passwd {
                name: "alice".into(),
                passwd: "x".into(),
                uid: 1000,
                gid: 100,
                gecos: "Alice A,12,555,556,extra".into(),
                home: "/home/alice".into(),
                shell: "/bin/sh".into(),
            }
        );
        assert_eq!(
            (users[2].passwd.as_str(), users[2].gecos.as_str()),
            ("*", "")
        );
        assert!(parse_passwd("").is_empty());
    }

    #[test]
    fn group_lines_read_as_getent_reads_them() {
        let text = "root:x:0:\n\
                    #wheel:x:10:alice\n\
                    sudo:x:27:alice,,bob,\n\
                    bad:x:-1:alice\n\
                    three:x:3\n\
                    users:!:100:bob";
        let groups = parse_group(text);
        let names: Vec<&str> = groups.iter().map(|g| g.name.as_str()).collect();
        assert_eq!(names, ["root", "sudo", "users"]);
        assert!(groups[0].members.is_empty());
        assert_eq!(groups[1].members, ["alice", "bob"]);
        assert_eq!(
            groups[2],
            Group {
                name: "users".into(),
                passwd: "!".into(),
                gid: 100,
                members: vec!["bob".into()],
            }
        );
    }
}
