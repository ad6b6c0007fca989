//! Making, copying, linking, renaming and removing files and directories.

use std::path::{Path, PathBuf};

use maid_sdk::fs::{check_write, normalize};
use maid_sdk::{Call, Error, function, host, python};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::mode::mode_arg;
use crate::paths::{
    absolute, exists, failed, io, is_dir, is_link, path_arg, readable, text, writable,
};

#[derive(Deserialize)]
pub(crate) struct Mkdir {
    dir_path: Value,
    #[serde(default)]
    user: Option<Value>,
    #[serde(default)]
    group: Option<Value>,
    #[serde(default)]
    mode: Option<Value>,
}
#[derive(Deserialize)]
pub(crate) struct Makedirs {
    path: Value,
    #[serde(default)]
    user: Option<Value>,
    #[serde(default)]
    group: Option<Value>,
    #[serde(default)]
    mode: Option<Value>,
}
#[derive(Deserialize)]
pub(crate) struct Copy {
    src: Value,
    dst: Value,
    #[serde(default)]
    recurse: bool,
    #[serde(default)]
    remove_existing: bool,
}
#[derive(Deserialize)]
pub(crate) struct Rename {
    src: Value,
    dst: Value,
}
#[derive(Deserialize)]
pub(crate) struct Symlink {
    src: Value,
    path: Value,
    #[serde(default)]
    force: Value,
    #[serde(default)]
    atomic: Value,
    #[serde(default = "yes_value")]
    follow_symlinks: Value,
}
pub(crate) fn yes_value() -> Value {
    Value::Bool(true)
}
/// A failure from the host's `symlink` as Salt's "Could not create"; a
/// denial stays one.
pub(crate) fn could_not_create(path: &str) -> impl FnOnce(Error) -> Error {
    let path = path.to_string();
    move |e| {
        if e.kind == maid_sdk::ErrorKind::Denied {
            e
        } else {
            failed(format!("Could not create '{path}'"))
        }
    }
}
/// Owner and group on a created directory need `chown`, which no grant
/// gives a plugin yet: refuse rather than silently ignore.
pub(crate) fn no_owner(user: &Option<Value>, group: &Option<Value>) -> Result<(), Error> {
    if user.as_ref().is_some_and(|v| !v.is_null()) || group.as_ref().is_some_and(|v| !v.is_null()) {
        return Err(Error::denied(
            "setting a file's owner or group (user=, group=) is not a capability plugins have",
        ));
    }
    Ok(())
}
pub(crate) fn mkdir_one(dir: &Path, mode: Option<u32>) -> Result<(), Error> {
    std::fs::create_dir(dir).map_err(|e| io(dir, e))?;
    if let Some(m) = mode {
        host::set_mode(&dir.display().to_string(), m)?;
    }
    Ok(())
}
/// Make `dir` and its missing parents, each with `mode`.
pub(crate) fn makedirs_perms(dir: &Path, mode: Option<u32>) -> Result<(), Error> {
    let mut missing = Vec::new();
    let mut cur = Some(dir);
    while let Some(d) = cur {
        if is_dir(d) {
            break;
        }
        missing.push(d.to_path_buf());
        cur = d.parent();
    }
    for d in missing.iter().rev() {
        check_write(d)?;
        mkdir_one(d, mode)?;
    }
    Ok(())
}
pub(crate) fn copy_tree(src: &Path, dst: &Path) -> Result<(), Error> {
    if !is_dir(dst) {
        std::fs::create_dir(dst).map_err(|e| io(dst, e))?;
    }
    for entry in std::fs::read_dir(src).map_err(|e| io(src, e))? {
        let entry = entry.map_err(|e| io(src, e))?;
        let from = entry.path();
        let to = dst.join(entry.file_name());
        if is_dir(&from) {
            copy_tree(&from, &to)?;
        } else {
            std::fs::copy(&from, &to).map_err(|e| io(&from, e))?;
        }
    }
    Ok(())
}

/// Remove a file, a link, or a directory and everything in it
#[function(raw, args = ["path", "**kwargs"])]
pub(crate) fn remove(call: &Call) -> Result<bool, Error> {
    let path = path_arg(call, "path")?;
    let p = writable(&path)?;
    let removed = if is_link(&p) || (exists(&p) && !is_dir(&p)) {
        std::fs::remove_file(&p)
    } else if is_dir(&p) {
        std::fs::remove_dir_all(&p)
    } else {
        return Ok(false);
    };
    removed
        .map(|()| true)
        .map_err(|e| failed(format!("Could not remove '{path}': {e}")))
}

/// Make a directory and its missing parents (MODE for each)
#[function(args = ["dir_path", "user=null", "group=null", "mode=null"])]
pub(crate) fn mkdir(a: Mkdir) -> Result<bool, Error> {
    no_owner(&a.user, &a.group)?;
    let p = writable(&text(&a.dir_path))?;
    let p = normalize(&p);
    if !is_dir(&p) {
        makedirs_perms(&p, mode_arg(&a.mode)?)?;
    }
    Ok(true)
}

/// Make the parent directories of PATH (end it with / for PATH itself)
#[function(args = ["path", "user=null", "group=null", "mode=null"])]
pub(crate) fn makedirs(a: Makedirs) -> Result<Value, Error> {
    no_owner(&a.user, &a.group)?;
    let path = text(&a.path);
    let p = absolute(&path)?;
    // Salt: `os.path.dirname`, so `/a/b/` makes `/a/b` and
    // `/a/b` makes `/a`.
    let dirname = match path.rfind('/') {
        Some(0) => PathBuf::from("/"),
        Some(i) => normalize(Path::new(&path[..i])),
        None => p.clone(),
    };
    check_write(&dirname)?;
    if is_dir(&dirname) {
        return Ok(json!(format!(
            "Directory '{}' already exists",
            dirname.display()
        )));
    }
    if exists(&dirname) {
        return Ok(json!(format!(
            "The path '{}' already exists and is not a directory",
            dirname.display()
        )));
    }
    makedirs_perms(&dirname, mode_arg(&a.mode)?)?;
    Ok(Value::Null)
}

/// Copy a file (or, with recurse=True, a directory) keeping its mode
#[function(args = ["src", "dst", "recurse=false", "remove_existing=false"])]
pub(crate) fn copy(a: Copy) -> Result<bool, Error> {
    let (src_s, dst_s) = (text(&a.src), text(&a.dst));
    let src = readable(&src_s)?;
    let dst = writable(&dst_s)?;
    if !exists(&src) {
        return Err(failed(format!("No such file or directory '{src_s}'")));
    }
    let mode = host::stat(&src_s, true)?.mode;
    if is_dir(&dst) || is_dir(&src) {
        if !a.recurse {
            return Err(Error::bad_arguments(
                "Cannot copy overwriting a directory without recurse flag set to true!",
            ));
        }
        if a.remove_existing && exists(&dst) {
            std::fs::remove_dir_all(&dst)
                .map_err(|_| failed(format!("Could not copy '{src_s}' to '{dst_s}'")))?;
        }
        copy_tree(&src, &dst)
            .map_err(|_| failed(format!("Could not copy '{src_s}' to '{dst_s}'")))?;
    } else {
        std::fs::copy(&src, &dst)
            .map_err(|_| failed(format!("Could not copy '{src_s}' to '{dst_s}'")))?;
    }
    host::set_mode(&dst_s, mode)?;
    Ok(true)
}

/// Create a symbolic link PATH pointing at SRC
// Salt's `file.symlink`: `path` -> `src`; True when made, or when `path`
// already is that link. An existing path is replaced with `force`, or
// atomically (a new link renamed over it) with `atomic`.
#[function(args = ["src", "path", "force=false", "atomic=false", "follow_symlinks=true"])]
pub(crate) fn symlink(a: Symlink) -> Result<bool, Error> {
    let (src, path_s) = (text(&a.src), text(&a.path));
    let path = Path::new(&path_s);
    if !path.is_absolute() {
        return Err(Error::bad_arguments(format!(
            "Link path must be absolute: {path_s}"
        )));
    }
    check_write(path)?;
    let (force, atomic) = (python::truthy(&a.force), python::truthy(&a.atomic));
    let is_link = path
        .symlink_metadata()
        .is_ok_and(|m| m.file_type().is_symlink());
    if is_link {
        // The host reads the link (WASI will not read an absolute one).
        if let Some(current) = host::stat(&path_s, false).ok().and_then(|st| st.target)
            && normalize(Path::new(&current)) == normalize(Path::new(&src))
        {
            return Ok(true);
        }
        if !force && !atomic {
            return Err(failed(format!("Found existing symlink: {path_s}")));
        }
    }
    let exists = if python::truthy(&a.follow_symlinks) {
        path.exists()
    } else {
        path.symlink_metadata().is_ok()
    };
    if exists && !force && !atomic {
        return Err(failed(format!("Existing path is not a symlink: {path_s}")));
    }
    if (is_link || exists) && force && !atomic {
        std::fs::remove_file(path).map_err(|e| io(path, e))?;
    } else if atomic {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or_default();
        let temp = path
            .parent()
            .unwrap_or(Path::new("/"))
            .join(format!(".maid-link-{nanos:09}"));
        let temp_s = temp.display().to_string();
        host::symlink(&src, &temp_s).map_err(could_not_create(&path_s))?;
        if std::fs::rename(&temp, path).is_err() {
            let _ = std::fs::remove_file(&temp);
            return Err(failed(format!("Could not create '{path_s}'")));
        }
        return Ok(true);
    }
    host::symlink(&src, &path_s).map_err(could_not_create(&path_s))?;
    Ok(true)
}

/// Rename SRC to DST
#[function(args = ["src", "dst"])]
pub(crate) fn rename(a: Rename) -> Result<bool, Error> {
    let (src_s, dst_s) = (text(&a.src), text(&a.dst));
    let src = writable(&src_s)?;
    let dst = writable(&dst_s)?;
    std::fs::rename(&src, &dst)
        .map(|()| true)
        .map_err(|_| failed(format!("Could not rename '{src_s}' to '{dst_s}'")))
}

#[derive(Deserialize)]
pub(crate) struct IsLink {
    path: Value,
}
#[derive(Deserialize)]
pub(crate) struct Readlink {
    path: Value,
    #[serde(default)]
    canonicalize: Value,
}
#[derive(Deserialize)]
pub(crate) struct MakedirsPerms {
    name: Value,
    #[serde(default)]
    user: Value,
    #[serde(default)]
    group: Value,
    #[serde(default)]
    mode: Value,
}

/// Return whether PATH is a symbolic link
#[function(name = "is_link", args = ["path", "nostat=false"])]
pub(crate) fn is_link_(a: IsLink) -> Result<bool, Error> {
    let p = readable(&text(&a.path))?;
    Ok(is_link(&p))
}

/// Return where the symbolic link PATH points (canonicalize=True: the file it ends at)
#[function(args = ["path", "canonicalize=false"])]
pub(crate) fn readlink(a: Readlink) -> Result<String, Error> {
    let path = text(&a.path);
    if !Path::new(&path).is_absolute() {
        return Err(Error::bad_arguments("Path to link must be absolute."));
    }
    let p = readable(&path)?;
    if !is_link(&p) {
        return Err(Error::bad_arguments("A valid link was not specified."));
    }
    let follow = python::truthy(&a.canonicalize);
    host::stat(&path, follow)?
        .target
        .ok_or_else(|| failed(format!("{path}: cannot read the link")))
}

/// Make directory NAME and its missing parents, each with MODE (default 0755)
// Salt's makedirs_perms; a user or group the agent's new directories would
// not get is refused (plugins cannot chown).
#[function(name = "makedirs_perms", args = ["name", "user=null", "group=null", "mode=\"0755\""])]
pub(crate) fn makedirs_perms_(a: MakedirsPerms) -> Result<Value, Error> {
    let name = text(&a.name);
    let p = writable(&name)?;
    crate::perms::new_owner_is(&name, &a.user, &a.group)?;
    if exists(&p) || is_link(&p) {
        return Err(failed(format!("[Errno 17] File exists: '{name}'")));
    }
    let mode = if python::truthy(&a.mode) {
        crate::mode::parse_mode(&a.mode)
    } else {
        None
    };
    makedirs_perms(&normalize(&p), mode)?;
    Ok(Value::Null)
}

/// Return the entries of directory PATH, after '.' and '..'
#[function(args = ["path"])]
pub(crate) fn readdir(a: IsLink) -> Result<Vec<String>, Error> {
    let path = text(&a.path);
    if !Path::new(&path).is_absolute() {
        return Err(Error::bad_arguments("Dir path must be absolute."));
    }
    let p = readable(&path)?;
    if !is_dir(&p) {
        return Err(Error::bad_arguments("A valid directory was not specified."));
    }
    let dir = crate::paths::followed(&p)?;
    let mut out = vec![".".to_string(), "..".to_string()];
    for entry in std::fs::read_dir(&dir).map_err(|e| io(&dir, e))? {
        let entry = entry.map_err(|e| io(&dir, e))?;
        out.push(entry.file_name().to_string_lossy().into_owned());
    }
    Ok(out)
}
