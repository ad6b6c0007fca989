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
//!
//! [`word`] is what both plugins check of every name and value before they
//! hand it to a shadow-utils program (`useradd`, `gpasswd`, ...).

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

/// What a value is, for [`word`]: each kind is refused what would let it
/// change how `useradd`, `usermod`, `userdel`, `groupadd`, `groupmod`,
/// `groupdel` or `gpasswd` reads its command line or the account files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Word {
    /// A user or group name: one field of `/etc/passwd` or `/etc/group`,
    /// and one element of a comma-separated list of them.
    Name,
    /// A GECOS field but the last: the fields are comma-separated.
    Gecos,
    /// The last GECOS field (`other`), which may hold commas.
    GecosLast,
    /// A login shell.
    Shell,
    /// A home directory: absolute, without a `..` component.
    Home,
}

/// `value`, named `what` in the refusal, unless it could be read as an
/// option (a leading `-`), would split or add a line or field of an
/// account file (`:`, a newline or another control character, NUL), or is
/// not what its kind allows (a comma in a name or a GECOS field but the
/// last, a relative home or one with `..`). Checked before any program
/// starts, so a refused value never reaches one: `useradd` would take
/// `-o` as "allow a duplicate uid", `--badname` as "accept any name".
pub fn word(what: &str, value: &str, kind: Word) -> Result<(), Error> {
    let why = if value.starts_with('-') {
        Some("begins with '-'")
    } else if value.contains(':') {
        Some("holds ':'")
    } else if value.chars().any(char::is_control) {
        Some("holds a control character")
    } else if value.contains(',') && matches!(kind, Word::Name | Word::Gecos) {
        Some("holds ','")
    } else if kind == Word::Name && value.is_empty() {
        Some("is empty")
    } else if kind == Word::Home && !value.starts_with('/') {
        Some("is not an absolute path")
    } else if kind == Word::Home && value.split('/').any(|c| c == "..") {
        Some("has a '..' component")
    } else {
        None
    };
    match why {
        Some(why) => Err(Error::bad_arguments(format!("{what} {value:?} {why}"))),
        None => Ok(()),
    }
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

    #[test]
    fn words_that_would_be_options_or_split_a_line_are_refused() {
        for (value, kind) in [
            ("-o", Word::Name),
            ("--badname", Word::Name),
            ("a:b", Word::Name),
            ("a,b", Word::Name),
            ("a\nb", Word::Name),
            ("a\0b", Word::Name),
            ("", Word::Name),
            ("A, B", Word::Gecos),
            ("x:y", Word::GecosLast),
            ("-c", Word::Gecos),
            ("-s", Word::Shell),
            ("/bin/sh\n", Word::Shell),
            ("../home/x", Word::Home),
            ("/home/../etc", Word::Home),
            ("home/x", Word::Home),
            ("-d", Word::Home),
        ] {
            let err = word("value", value, kind).unwrap_err();
            assert_eq!(err.kind, crate::ErrorKind::BadArguments, "{value:?}");
        }
        for (value, kind) in [
            ("alice", Word::Name),
            ("www-data", Word::Name),
            ("Alice A", Word::Gecos),
            ("a, b, c", Word::GecosLast),
            ("", Word::Gecos),
            ("/bin/bash", Word::Shell),
            ("/home/alice", Word::Home),
            ("/srv/a..b", Word::Home),
        ] {
            assert!(word("value", value, kind).is_ok(), "{value:?}");
        }
    }
}
