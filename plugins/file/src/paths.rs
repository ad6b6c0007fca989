//! Arguments as paths: text, absolute, and inside a granted directory,
//! and the errors about them as Salt words them.

use std::path::{Path, PathBuf};

use maid_sdk::fs::{check_read, check_write};
use maid_sdk::{Call, Error, python};
use serde_json::Value;

/// A path argument as text (a word the master read as a number is still a
/// path).
pub(crate) fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => python::str(other),
    }
}
/// Salt raises `SaltInvocationError` for a relative path where it needs an
/// absolute one; in maid every path must be absolute, since only granted
/// directories exist.
pub(crate) fn absolute(path: &str) -> Result<PathBuf, Error> {
    let p = Path::new(path);
    if !p.is_absolute() {
        return Err(Error::bad_arguments(format!(
            "File path must be absolute: {path}"
        )));
    }
    Ok(p.to_path_buf())
}
pub(crate) fn readable(path: &str) -> Result<PathBuf, Error> {
    let p = absolute(path)?;
    check_read(&p)?;
    Ok(p)
}
pub(crate) fn writable(path: &str) -> Result<PathBuf, Error> {
    let p = absolute(path)?;
    check_write(&p)?;
    Ok(p)
}
/// A failure as Salt's `CommandExecutionError` shows it.
pub(crate) fn failed(message: impl Into<String>) -> Error {
    Error::failed(message, 1)
}
pub(crate) fn io(path: &Path, e: std::io::Error) -> Error {
    let err = Error::from(e);
    Error {
        message: format!("{}: {}", path.display(), err.message),
        ..err
    }
}
pub(crate) fn path_arg(call: &Call, name: &str) -> Result<String, Error> {
    call.args
        .first()
        .or_else(|| call.kwargs.get(name))
        .map(text)
        .ok_or_else(|| {
            Error::bad_arguments(format!(
                "{}() missing 1 required positional argument: '{name}'",
                call.py_name()
            ))
        })
}
/// `os.path.isdir`: links followed (see [`followed`]).
pub(crate) fn is_dir(p: &Path) -> bool {
    match followed(p) {
        Ok(f) => std::fs::metadata(f).is_ok_and(|m| m.is_dir()),
        Err(_) => false,
    }
}
/// `os.path.exists`: links followed (see [`followed`]).
pub(crate) fn exists(p: &Path) -> bool {
    match followed(p) {
        Ok(f) => std::fs::metadata(f).is_ok(),
        Err(_) => false,
    }
}
/// Where `p` leads: itself, or, for a symbolic link (which WASI does not
/// follow when its target is absolute), the real path the host resolves,
/// which it refuses when that lies outside the granted directories.
pub(crate) fn followed(p: &Path) -> Result<PathBuf, Error> {
    if !is_link(p) {
        return Ok(p.to_path_buf());
    }
    let st = maid_sdk::host::stat(&p.display().to_string(), true)?;
    Ok(st.target.map_or_else(|| p.to_path_buf(), PathBuf::from))
}
/// A file to read, links followed.
pub(crate) fn readable_file(path: &str) -> Result<PathBuf, Error> {
    let p = followed(&readable(path)?)?;
    check_read(&p)?;
    Ok(p)
}
/// A file to write, links followed.
pub(crate) fn writable_file(path: &str) -> Result<PathBuf, Error> {
    let p = followed(&writable(path)?)?;
    check_write(&p)?;
    Ok(p)
}
pub(crate) fn is_link(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink())
}
