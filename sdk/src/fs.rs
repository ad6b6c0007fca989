//! Clear answers about the filesystem sandbox.
//!
//! A plugin reads and writes files with `std::fs`, and the agent's WASI
//! sandbox decides: a path outside the directories granted to the plugin
//! simply does not exist for it (`No such file or directory`). That is safe
//! but confusing to whoever ran the job, so check a path first with
//! [`check_read`] / [`check_write`] and return their `Denied: ...` error.
//! The checks only explain; the sandbox still enforces, including against
//! symlinks that lead out of a granted directory.

use std::path::{Component, Path, PathBuf};

use crate::Error;
use crate::host::{GrantedDir, dirs};

/// `path` with `.` and `..` resolved lexically (no filesystem access).
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The granted directory `path` lies in (the innermost one), if any.
pub fn granted_dir(path: &Path) -> Option<GrantedDir> {
    let path = normalize(path);
    dirs()
        .into_iter()
        .filter(|d| path.starts_with(&d.path))
        .max_by_key(|d| d.path.components().count())
}

fn check(path: &Path, write: bool) -> Result<(), Error> {
    if !path.is_absolute() {
        return Err(Error::bad_arguments(format!(
            "{} is not an absolute path",
            path.display()
        )));
    }
    match granted_dir(path) {
        None => Err(Error::denied(format!(
            "{} is outside the directories granted to this plugin",
            path.display()
        ))),
        Some(d) if write && !d.writable => Err(Error::denied(format!(
            "{} is in {}, which is granted read-only",
            path.display(),
            d.path.display()
        ))),
        Some(_) => Ok(()),
    }
}

/// `Ok` when `path` lies in a granted directory.
pub fn check_read(path: &Path) -> Result<(), Error> {
    check(path, false)
}

/// `Ok` when `path` lies in a directory granted read-write.
pub fn check_write(path: &Path) -> Result<(), Error> {
    check(path, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_lexically() {
        assert_eq!(
            normalize(Path::new("/a/b/../c/./d")),
            PathBuf::from("/a/c/d")
        );
        assert_eq!(normalize(Path::new("/a/../../etc")), PathBuf::from("/etc"));
    }
}
