//! Questions about a path: does it exist, what is it, what does it hash to.

use std::io::Read;
use std::path::Path;

use maid_sdk::fs::normalize;
use maid_sdk::{Error, function, host};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::mode::mode_text;
use crate::paths::{failed, followed, io, is_dir, readable, readable_file, text};
use crate::yes;

#[derive(Deserialize)]
pub(crate) struct Path1 {
    path: Value,
}
#[derive(Deserialize)]
pub(crate) struct Stats {
    path: Value,
    #[serde(default)]
    hash_type: Option<String>,
    #[serde(default = "yes")]
    follow_symlinks: bool,
}
#[derive(Deserialize)]
pub(crate) struct GetHash {
    path: Value,
    #[serde(default = "sha256")]
    form: String,
    #[serde(default)]
    #[allow(dead_code)] // Salt's read size; this reads in its own chunks.
    chunk_size: Value,
}
pub(crate) fn sha256() -> String {
    "sha256".into()
}
/// The hex digest of `path` with Salt's `form` (hashlib's names).
pub(crate) fn hash_file(path: &Path, form: &str) -> Result<String, Error> {
    use sha2::Digest;
    fn digest<D: Digest>(mut f: std::fs::File, path: &Path) -> Result<String, Error> {
        let mut h = D::new();
        let mut buf = vec![0u8; 64 << 10];
        loop {
            let n = f.read(&mut buf).map_err(|e| io(path, e))?;
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
        }
        Ok(h.finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>())
    }
    let f = std::fs::File::open(path).map_err(|e| io(path, e))?;
    match form {
        "md5" => digest::<md5::Md5>(f, path),
        "sha1" => digest::<sha1::Sha1>(f, path),
        "sha224" => digest::<sha2::Sha224>(f, path),
        "sha256" => digest::<sha2::Sha256>(f, path),
        "sha384" => digest::<sha2::Sha384>(f, path),
        "sha512" => digest::<sha2::Sha512>(f, path),
        other => Err(failed(format!("Invalid hash type: {other}"))),
    }
}
/// Salt's `file.stats`.
pub(crate) fn stats(path: &str, hash_type: Option<&str>, follow: bool) -> Result<Value, Error> {
    let p = readable(path)?;
    let st = match host::stat(path, follow) {
        Ok(st) => st,
        // A dangling link: Salt falls back to lstat.
        Err(e) if follow && e.kind != maid_sdk::ErrorKind::Denied => {
            host::stat(path, false).map_err(|_| failed(format!("Path not found: {path}")))?
        }
        Err(e) if e.kind == maid_sdk::ErrorKind::Denied => return Err(e),
        Err(_) => return Err(failed(format!("Path not found: {path}"))),
    };
    let mut ret = json!({
        "inode": st.inode,
        "uid": st.uid,
        "gid": st.gid,
        "group": st.group.clone().map_or(json!(st.gid), Value::from),
        "user": st.user.clone().map_or(json!(st.uid), Value::from),
        "atime": st.atime,
        "mtime": st.mtime,
        "ctime": st.ctime,
        "size": st.size,
        "mode": mode_text(st.mode),
    });
    if let Some(form) = hash_type.filter(|f| !f.is_empty()) {
        ret["sum"] = json!(hash_file(&followed(&p)?, form)?);
    }
    ret["type"] = json!(st.kind);
    ret["target"] = json!(if follow {
        st.target
            .unwrap_or_else(|| normalize(&p).display().to_string())
    } else {
        normalize(&p).display().to_string()
    });
    Ok(ret)
}

/// Return whether PATH is a file
#[function(args = ["path"])]
pub(crate) fn file_exists(a: Path1) -> Result<bool, Error> {
    let p = readable(&text(&a.path))?;
    Ok(followed(&p).is_ok_and(|f| std::fs::metadata(f).is_ok_and(|m| m.is_file())))
}

/// Return whether PATH is a directory
#[function(args = ["path"])]
pub(crate) fn directory_exists(a: Path1) -> Result<bool, Error> {
    Ok(is_dir(&readable(&text(&a.path))?))
}

/// Return a dict of a path's owner, mode, size, times, type (and sum with HASH_TYPE)
#[function(name = "stats", args = ["path", "hash_type=null", "follow_symlinks=true"])]
pub(crate) fn stats_(a: Stats) -> Result<Value, Error> {
    stats(&text(&a.path), a.hash_type.as_deref(), a.follow_symlinks)
}

/// Return the hex digest of a file (FORM: md5, sha1, sha224, sha256, sha384, sha512)
#[function(args = ["path", "form=\"sha256\"", "chunk_size=65536"])]
pub(crate) fn get_hash(a: GetHash) -> Result<String, Error> {
    hash_file(&readable_file(&text(&a.path))?, &a.form)
}
