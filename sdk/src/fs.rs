//! Clear answers about the filesystem sandbox.
//!
//! A plugin reads and writes files with `std::fs`, and the agent's WASI
//! sandbox decides: a path outside the directories granted to the plugin
//! simply does not exist for it (`No such file or directory`). That is safe
//! but confusing to whoever ran the job, so check a path first with
//! [`check_read`] / [`check_write`] and return their `Denied: ...` error.
//! The checks only explain; the sandbox still enforces, including against
//! symlinks that lead out of a granted directory.

use std::io::{Read, Write};
use std::path::{Component, Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::Error;
use crate::host::{GrantedDir, Source, dirs};

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

/// An I/O error prefixed with what was done to which path, keeping its
/// kind (a denial stays a denial).
pub fn at(path: &Path, what: &str) -> impl FnOnce(std::io::Error) -> Error {
    let prefix = format!("{what} {}", path.display());
    move |e| {
        let mut err = Error::from(e);
        err.message = format!("{prefix}: {}", err.message);
        err
    }
}

/// Write the fetched source `url` to `dest`: into a file beside it first,
/// checked against the SHA-256 the host gave for the source, then renamed
/// over `dest`. Readers never see a half-written or wrong file, and a
/// symlink at `dest` is replaced, not followed. `tag` makes the temporary
/// name unique to the caller (a jid).
pub fn write_source(src: &mut Source, url: &str, dest: &Path, tag: &str) -> Result<(), Error> {
    const CHUNK: usize = 1 << 20;
    let dir = dest
        .parent()
        .ok_or_else(|| Error::bad_arguments("dest has no parent directory"))?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    let tmp = dir.join(format!(
        ".{}.maid-{tag}-{nanos}",
        dest.file_name().and_then(|n| n.to_str()).unwrap_or("file"),
    ));
    let result = (|| {
        let mut file = std::fs::File::create(&tmp).map_err(at(dest, "cannot write"))?;
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = src
                .read(&mut buf)
                .map_err(at(Path::new(url), "cannot read"))?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            file.write_all(&buf[..n])
                .map_err(at(dest, "cannot write"))?;
        }
        let got: String = hasher
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        if got != src.sha256() {
            return Err(Error::failed(
                format!(
                    "{url}: content hash {got} does not match the source's {}",
                    src.sha256()
                ),
                1,
            ));
        }
        file.sync_all().map_err(at(dest, "cannot write"))?;
        std::fs::rename(&tmp, dest).map_err(at(dest, "cannot write"))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
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
