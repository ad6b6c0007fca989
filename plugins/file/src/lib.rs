//! Salt's `file` module, for the directories the operator grants and no
//! others: read, write, copy, link and inspect files with Salt's names,
//! arguments and returns. Files go through WASI (`std::fs` on the
//! preopened directories); owners and modes, which WASI does not carry,
//! through `host.stat` and `host.set-mode`, which check the same grants.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use maid_sdk::fs::{check_read, check_write, normalize};
use maid_sdk::{Call, Capability, Error, Function, Plugin, export_plugin, host, python};
use serde::Deserialize;
use serde_json::{Value, json};

struct File;

/// A path argument as text (a word the master read as a number is still a
/// path).
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => python::str(other),
    }
}

/// Salt raises `SaltInvocationError` for a relative path where it needs an
/// absolute one; in maid every path must be absolute, since only granted
/// directories exist.
fn absolute(path: &str) -> Result<PathBuf, Error> {
    let p = Path::new(path);
    if !p.is_absolute() {
        return Err(Error::bad_arguments(format!(
            "File path must be absolute: {path}"
        )));
    }
    Ok(p.to_path_buf())
}

fn readable(path: &str) -> Result<PathBuf, Error> {
    let p = absolute(path)?;
    check_read(&p)?;
    Ok(p)
}

fn writable(path: &str) -> Result<PathBuf, Error> {
    let p = absolute(path)?;
    check_write(&p)?;
    Ok(p)
}

/// A failure as Salt's `CommandExecutionError` shows it.
fn failed(message: impl Into<String>) -> Error {
    Error::failed(message, 1)
}

fn io(path: &Path, e: std::io::Error) -> Error {
    let err = Error::from(e);
    Error {
        message: format!("{}: {}", path.display(), err.message),
        ..err
    }
}

/// Python's `oct()` of a mode, normalised as Salt's `normalize_mode`:
/// `0644`, `0755`, `0000`.
fn mode_text(mode: u32) -> String {
    let digits = format!("{mode:o}");
    format!("{digits:0>4}")
}

/// A mode argument (`644`, `"0644"`, `0o644`) as bits.
fn parse_mode(mode: &Value) -> Option<u32> {
    let t = text(mode);
    let t = t.trim_start_matches(['0', 'O', 'o']);
    if t.is_empty() {
        return Some(0);
    }
    u32::from_str_radix(t, 8).ok().filter(|m| *m <= 0o7777)
}

/// The hex digest of `path` with Salt's `form` (hashlib's names).
fn hash_file(path: &Path, form: &str) -> Result<String, Error> {
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
fn stats(path: &str, hash_type: Option<&str>, follow: bool) -> Result<Value, Error> {
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
        ret["sum"] = json!(hash_file(&p, form)?);
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

/// The lines `file.write`/`file.append` take: the positional arguments
/// after the path, or `args=`.
fn lines(call: &Call) -> Vec<String> {
    match call.kwargs.get("args") {
        Some(Value::Array(items)) => items.iter().map(text).collect(),
        Some(one) => vec![text(one)],
        None => call.args.iter().skip(1).map(text).collect(),
    }
}

fn path_arg(call: &Call, name: &str) -> Result<String, Error> {
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

/// Python's `re` flags as Salt passes them (an int, or names such as
/// `['IGNORECASE', 'MULTILINE']`), as inline flags.
fn regex_flags(flags: &Value, multiline: bool) -> Result<String, Error> {
    const IGNORECASE: i64 = 2;
    const MULTILINE: i64 = 8;
    const DOTALL: i64 = 16;
    const VERBOSE: i64 = 64;
    let mut bits = match flags {
        Value::Number(n) => n.as_i64().unwrap_or(0),
        Value::Null => 0,
        Value::String(_) | Value::Array(_) => {
            let names: Vec<String> = match flags {
                Value::Array(items) => items.iter().map(text).collect(),
                other => vec![text(other)],
            };
            let mut bits = 0;
            for n in names {
                bits |= match n.to_ascii_uppercase().trim_start_matches("RE.") {
                    "I" | "IGNORECASE" => IGNORECASE,
                    "M" | "MULTILINE" => MULTILINE,
                    "S" | "DOTALL" => DOTALL,
                    "X" | "VERBOSE" => VERBOSE,
                    other => {
                        return Err(Error::bad_arguments(format!(
                            "Invalid re flag given: {other}"
                        )));
                    }
                };
            }
            bits
        }
        other => {
            return Err(Error::bad_arguments(format!(
                "flags must be an int or a list of names, not {}",
                python::repr(other)
            )));
        }
    };
    if multiline {
        bits |= MULTILINE;
    }
    let mut out = String::new();
    for (bit, c) in [
        (IGNORECASE, 'i'),
        (MULTILINE, 'm'),
        (DOTALL, 's'),
        (VERBOSE, 'x'),
    ] {
        if bits & bit != 0 {
            out.push(c);
        }
    }
    Ok(if out.is_empty() {
        out
    } else {
        format!("(?{out})")
    })
}

fn compile(pattern: &str, flags: &str) -> Result<fancy_regex::Regex, Error> {
    fancy_regex::Regex::new(&format!("{flags}{pattern}"))
        .map_err(|e| Error::bad_arguments(format!("invalid pattern {pattern:?}: {e}")))
}

#[derive(Deserialize)]
struct Path1 {
    path: Value,
}

#[derive(Deserialize)]
struct Read_ {
    path: Value,
    #[serde(default)]
    binary: bool,
}

#[derive(Deserialize)]
struct Touch {
    name: Value,
    #[serde(default)]
    atime: Option<Value>,
    #[serde(default)]
    mtime: Option<Value>,
}

#[derive(Deserialize)]
struct Stats {
    path: Value,
    #[serde(default)]
    hash_type: Option<String>,
    #[serde(default = "yes")]
    follow_symlinks: bool,
}

fn yes() -> bool {
    true
}

#[derive(Deserialize)]
struct GetHash {
    path: Value,
    #[serde(default = "sha256")]
    form: String,
    #[serde(default)]
    #[allow(dead_code)] // Salt's read size; this reads in its own chunks.
    chunk_size: Value,
}

fn sha256() -> String {
    "sha256".into()
}

#[derive(Deserialize)]
struct Mkdir {
    dir_path: Value,
    #[serde(default)]
    user: Option<Value>,
    #[serde(default)]
    group: Option<Value>,
    #[serde(default)]
    mode: Option<Value>,
}

#[derive(Deserialize)]
struct Makedirs {
    path: Value,
    #[serde(default)]
    user: Option<Value>,
    #[serde(default)]
    group: Option<Value>,
    #[serde(default)]
    mode: Option<Value>,
}

#[derive(Deserialize)]
struct Copy {
    src: Value,
    dst: Value,
    #[serde(default)]
    recurse: bool,
    #[serde(default)]
    remove_existing: bool,
}

#[derive(Deserialize)]
struct Rename {
    src: Value,
    dst: Value,
}

#[derive(Deserialize)]
struct Symlink {
    src: Value,
    path: Value,
    #[serde(default)]
    force: Value,
    #[serde(default)]
    atomic: Value,
    #[serde(default = "yes_value")]
    follow_symlinks: Value,
}

fn yes_value() -> Value {
    Value::Bool(true)
}

/// A failure from the host's `symlink` as Salt's "Could not create"; a
/// denial stays one.
fn could_not_create(path: &str) -> impl FnOnce(Error) -> Error {
    let path = path.to_string();
    move |e| {
        if e.kind == maid_sdk::ErrorKind::Denied {
            e
        } else {
            failed(format!("Could not create '{path}'"))
        }
    }
}

/// Salt's `file.symlink`: `path` -> `src`; True when made, or when `path`
/// already is that link. An existing path is replaced with `force`, or
/// atomically (a new link renamed over it) with `atomic`.
fn symlink(a: Symlink) -> Result<bool, Error> {
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

#[derive(Deserialize)]
struct GetMode {
    path: Value,
    #[serde(default = "yes")]
    follow_symlinks: bool,
}

#[derive(Deserialize)]
struct SetMode {
    path: Value,
    mode: Value,
}

#[derive(Deserialize)]
struct Contains {
    path: Value,
    text: Value,
}

#[derive(Deserialize)]
struct Search {
    path: Value,
    pattern: Value,
    #[serde(default = "multiline_flag")]
    flags: Value,
    #[serde(default)]
    #[allow(dead_code)] // Salt's read size; the whole file is searched.
    bufsize: Value,
    #[serde(default)]
    ignore_if_missing: bool,
    #[serde(default)]
    multiline: bool,
}

fn multiline_flag() -> Value {
    json!(8)
}

#[derive(Deserialize)]
struct Replace {
    path: Value,
    pattern: Value,
    repl: Value,
    #[serde(default)]
    count: usize,
    #[serde(default = "multiline_flag")]
    flags: Value,
    #[serde(default)]
    #[allow(dead_code)] // Salt's read size; the whole file is replaced.
    bufsize: Value,
    #[serde(default)]
    append_if_not_found: bool,
    #[serde(default)]
    prepend_if_not_found: bool,
    #[serde(default)]
    not_found_content: Option<Value>,
    #[serde(default)]
    backup: Option<Value>,
    #[serde(default)]
    dry_run: bool,
    #[serde(default)]
    search_only: bool,
    #[serde(default = "yes")]
    show_changes: bool,
    #[serde(default)]
    ignore_if_missing: bool,
}

fn is_dir(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_dir())
}

fn exists(p: &Path) -> bool {
    std::fs::metadata(p).is_ok()
}

fn is_link(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink())
}

/// Owner and group on a created directory need `chown`, which no grant
/// gives a plugin yet: refuse rather than silently ignore.
fn no_owner(user: &Option<Value>, group: &Option<Value>) -> Result<(), Error> {
    if user.as_ref().is_some_and(|v| !v.is_null()) || group.as_ref().is_some_and(|v| !v.is_null()) {
        return Err(Error::denied(
            "setting a file's owner or group (user=, group=) is not a capability plugins have",
        ));
    }
    Ok(())
}

fn mkdir_one(dir: &Path, mode: Option<u32>) -> Result<(), Error> {
    std::fs::create_dir(dir).map_err(|e| io(dir, e))?;
    if let Some(m) = mode {
        host::set_mode(&dir.display().to_string(), m)?;
    }
    Ok(())
}

fn mode_arg(mode: &Option<Value>) -> Result<Option<u32>, Error> {
    match mode {
        None | Some(Value::Null) => Ok(None),
        Some(m) => parse_mode(m)
            .map(Some)
            .ok_or_else(|| Error::bad_arguments(format!("Invalid Mode {}", text(m)))),
    }
}

/// Make `dir` and its missing parents, each with `mode`.
fn makedirs_perms(dir: &Path, mode: Option<u32>) -> Result<(), Error> {
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

fn copy_tree(src: &Path, dst: &Path) -> Result<(), Error> {
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

fn replace(a: Replace) -> Result<Value, Error> {
    let path = text(&a.path);
    let p = if a.dry_run || a.search_only {
        readable(&path)?
    } else {
        writable(&path)?
    };
    if !exists(&p) {
        if a.ignore_if_missing {
            return Ok(json!(false));
        }
        return Err(failed(format!("{path}: File not found")));
    }
    if is_dir(&p) {
        return Err(failed(format!("{path}: Not a file")));
    }
    let before = std::fs::read(&p).map_err(|e| io(&p, e))?;
    let before = String::from_utf8_lossy(&before).into_owned();
    let flags = regex_flags(&a.flags, false)?;
    let re = compile(&text(&a.pattern), &flags)?;
    let found = re
        .is_match(&before)
        .map_err(|e| failed(format!("pattern: {e}")))?;
    if a.search_only {
        return Ok(json!(found));
    }
    let repl = text(&a.repl);
    let mut after = if found {
        let limit = a.count;
        // Python's `\1` and `\g<name>` in the replacement, as `re.sub`.
        let repl = python_repl(&repl);
        re.replacen(&before, limit, repl.as_str()).into_owned()
    } else {
        before.clone()
    };
    if !found && (a.append_if_not_found || a.prepend_if_not_found) {
        let content = a.not_found_content.as_ref().map_or(repl.clone(), text);
        if a.prepend_if_not_found {
            after = format!("{content}\n{before}");
        } else {
            let sep = if before.is_empty() || before.ends_with('\n') {
                ""
            } else {
                "\n"
            };
            after = format!("{before}{sep}{content}\n");
        }
    }
    let changed = after != before;
    if changed && !a.dry_run {
        if let Some(suffix) = a
            .backup
            .as_ref()
            .filter(|b| !matches!(b, Value::Bool(false) | Value::Null))
        {
            let suffix = text(suffix);
            let backup = PathBuf::from(format!("{}{suffix}", p.display()));
            check_write(&backup)?;
            std::fs::copy(&p, &backup).map_err(|e| io(&backup, e))?;
            // As Python's `shutil.copy2`: the mode comes along.
            let mode = host::stat(&path, true)?.mode;
            host::set_mode(&backup.display().to_string(), mode)?;
        }
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&p)
            .map_err(|e| io(&p, e))?;
        f.write_all(after.as_bytes()).map_err(|e| io(&p, e))?;
    }
    if !a.show_changes {
        return Ok(json!(changed));
    }
    Ok(json!(unified_diff(&before, &after)))
}

/// Python's `re.sub` replacement syntax (`\1`, `\g<1>`, `\g<name>`) in the
/// regex crate's (`${1}`, `${name}`).
fn python_repl(repl: &str) -> String {
    let mut out = String::new();
    let mut chars = repl.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '$' => out.push_str("$$"),
            '\\' => match chars.peek().copied() {
                Some(d) if d.is_ascii_digit() => {
                    let mut n = String::new();
                    while let Some(d) = chars.peek().copied().filter(char::is_ascii_digit) {
                        n.push(d);
                        chars.next();
                    }
                    out.push_str(&format!("${{{n}}}"));
                }
                Some('g') => {
                    chars.next();
                    if chars.peek() == Some(&'<') {
                        chars.next();
                        let name: String = chars.by_ref().take_while(|c| *c != '>').collect();
                        out.push_str(&format!("${{{name}}}"));
                    } else {
                        out.push_str("\\g");
                    }
                }
                Some('n') => {
                    chars.next();
                    out.push('\n');
                }
                Some('t') => {
                    chars.next();
                    out.push('\t');
                }
                Some('\\') => {
                    chars.next();
                    out.push('\\');
                }
                _ => out.push('\\'),
            },
            c => out.push(c),
        }
    }
    out
}

/// Salt's `get_diff`: Python's `difflib.unified_diff` of the lines, with no
/// file names.
fn unified_diff(before: &str, after: &str) -> String {
    similar::TextDiff::from_lines(before, after)
        .unified_diff()
        .header("", "")
        .to_string()
}

impl Plugin for File {
    const MODULE: &'static str = "file";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const CAPABILITIES: &'static [Capability] = &[Capability::FsRead, Capability::FsWrite];

    fn functions() -> Vec<Function> {
        vec![
            Function::new(
                "file_exists",
                "Return whether PATH is a file",
                &["path"],
                |a: Path1, _: &Call| {
                    let p = readable(&text(&a.path))?;
                    Ok(std::fs::metadata(&p).is_ok_and(|m| m.is_file()))
                },
            ),
            Function::new(
                "directory_exists",
                "Return whether PATH is a directory",
                &["path"],
                |a: Path1, _: &Call| Ok(is_dir(&readable(&text(&a.path))?)),
            ),
            Function::new(
                "read",
                "Return the contents of a file (binary=True: as bytes, lossily)",
                &["path", "binary=false"],
                |a: Read_, _: &Call| {
                    let p = readable(&text(&a.path))?;
                    let bytes = std::fs::read(&p).map_err(|e| io(&p, e))?;
                    if a.binary {
                        return Ok(String::from_utf8_lossy(&bytes).into_owned());
                    }
                    String::from_utf8(bytes).map_err(|_| {
                        failed(format!("{}: not UTF-8 text; use binary=True", p.display()))
                    })
                },
            ),
            Function::raw(
                "write",
                "Write the lines given to PATH, replacing what it held",
                &["path", "*args", "**kwargs"],
                |call: &Call| {
                    let path = path_arg(call, "path")?;
                    let p = writable(&path)?;
                    let lines = lines(call);
                    let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
                    std::fs::write(&p, body).map_err(|e| io(&p, e))?;
                    Ok(format!("Wrote {} lines to \"{path}\"", lines.len()))
                },
            ),
            Function::raw(
                "append",
                "Append the lines given to PATH, after a newline if it lacks one",
                &["path", "*args", "**kwargs"],
                |call: &Call| {
                    let path = path_arg(call, "path")?;
                    let p = writable(&path)?;
                    let lines = lines(call);
                    let mut f = std::fs::OpenOptions::new()
                        .read(true)
                        .write(true)
                        .open(&p)
                        .map_err(|e| io(&p, e))?;
                    let len = f.seek(SeekFrom::End(0)).map_err(|e| io(&p, e))?;
                    if len > 0 {
                        f.seek(SeekFrom::End(-1)).map_err(|e| io(&p, e))?;
                        let mut last = [0u8; 1];
                        f.read_exact(&mut last).map_err(|e| io(&p, e))?;
                        if last[0] != b'\n' {
                            f.write_all(b"\n").map_err(|e| io(&p, e))?;
                        }
                    }
                    let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
                    f.write_all(body.as_bytes()).map_err(|e| io(&p, e))?;
                    Ok(format!("Wrote {} lines to \"{path}\"", lines.len()))
                },
            ),
            Function::new(
                "touch",
                "Create NAME if missing and set its times (now, or ATIME/MTIME)",
                &["name", "atime=null", "mtime=null"],
                |a: Touch, _: &Call| {
                    let p = writable(&text(&a.name))?;
                    let f = std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(&p)
                        .map_err(|e| io(&p, e))?;
                    let time = |v: &Option<Value>| -> Result<Option<std::time::SystemTime>, Error> {
                        match v {
                            None | Some(Value::Null) => Ok(None),
                            Some(v) => {
                                let secs = match v {
                                    Value::Number(n) => n.as_u64(),
                                    Value::String(s) => s.parse().ok(),
                                    _ => None,
                                }
                                .ok_or_else(|| {
                                    Error::bad_arguments("atime and mtime must be integers")
                                })?;
                                Ok(Some(
                                    std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs),
                                ))
                            }
                        }
                    };
                    let now = std::time::SystemTime::now();
                    let times = std::fs::FileTimes::new()
                        .set_accessed(time(&a.atime)?.unwrap_or(now))
                        .set_modified(time(&a.mtime)?.unwrap_or(now));
                    f.set_times(times).map_err(|e| io(&p, e))?;
                    Ok(exists(&p))
                },
            ),
            Function::new(
                "stats",
                "Return a dict of a path's owner, mode, size, times, type (and sum with HASH_TYPE)",
                &["path", "hash_type=null", "follow_symlinks=true"],
                |a: Stats, _: &Call| {
                    stats(&text(&a.path), a.hash_type.as_deref(), a.follow_symlinks)
                },
            ),
            Function::new(
                "get_hash",
                "Return the hex digest of a file (FORM: md5, sha1, sha224, sha256, sha384, sha512)",
                &["path", "form=\"sha256\"", "chunk_size=65536"],
                |a: GetHash, _: &Call| hash_file(&readable(&text(&a.path))?, &a.form),
            ),
            Function::raw(
                "remove",
                "Remove a file, a link, or a directory and everything in it",
                &["path", "**kwargs"],
                |call: &Call| {
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
                },
            ),
            Function::new(
                "mkdir",
                "Make a directory and its missing parents (MODE for each)",
                &["dir_path", "user=null", "group=null", "mode=null"],
                |a: Mkdir, _: &Call| {
                    no_owner(&a.user, &a.group)?;
                    let p = writable(&text(&a.dir_path))?;
                    let p = normalize(&p);
                    if !is_dir(&p) {
                        makedirs_perms(&p, mode_arg(&a.mode)?)?;
                    }
                    Ok(true)
                },
            ),
            Function::new(
                "makedirs",
                "Make the parent directories of PATH (end it with / for PATH itself)",
                &["path", "user=null", "group=null", "mode=null"],
                |a: Makedirs, _: &Call| {
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
                },
            ),
            Function::new(
                "copy",
                "Copy a file (or, with recurse=True, a directory) keeping its mode",
                &["src", "dst", "recurse=false", "remove_existing=false"],
                |a: Copy, _: &Call| {
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
                            std::fs::remove_dir_all(&dst).map_err(|_| {
                                failed(format!("Could not copy '{src_s}' to '{dst_s}'"))
                            })?;
                        }
                        copy_tree(&src, &dst).map_err(|_| {
                            failed(format!("Could not copy '{src_s}' to '{dst_s}'"))
                        })?;
                    } else {
                        std::fs::copy(&src, &dst).map_err(|_| {
                            failed(format!("Could not copy '{src_s}' to '{dst_s}'"))
                        })?;
                    }
                    host::set_mode(&dst_s, mode)?;
                    Ok(true)
                },
            ),
            Function::new(
                "symlink",
                "Create a symbolic link PATH pointing at SRC",
                &[
                    "src",
                    "path",
                    "force=false",
                    "atomic=false",
                    "follow_symlinks=true",
                ],
                |a: Symlink, _: &Call| symlink(a),
            ),
            Function::new(
                "rename",
                "Rename SRC to DST",
                &["src", "dst"],
                |a: Rename, _: &Call| {
                    let (src_s, dst_s) = (text(&a.src), text(&a.dst));
                    let src = writable(&src_s)?;
                    let dst = writable(&dst_s)?;
                    std::fs::rename(&src, &dst)
                        .map(|()| true)
                        .map_err(|_| failed(format!("Could not rename '{src_s}' to '{dst_s}'")))
                },
            ),
            Function::new(
                "get_mode",
                "Return a path's mode as text, e.g. 0644",
                &["path", "follow_symlinks=true"],
                |a: GetMode, _: &Call| {
                    let path = text(&a.path);
                    readable(&path)?;
                    match host::stat(&path, a.follow_symlinks) {
                        Ok(st) => Ok(mode_text(st.mode)),
                        Err(e) if e.kind == maid_sdk::ErrorKind::Denied => Err(e),
                        Err(_) => Err(failed(format!("Path not found: {path}"))),
                    }
                },
            ),
            Function::new(
                "set_mode",
                "Set a path's mode (e.g. 0644); return the new mode as text",
                &["path", "mode"],
                |a: SetMode, _: &Call| {
                    let path = text(&a.path);
                    let p = writable(&path)?;
                    // A link that leads out of the granted directories does
                    // not exist for WASI; the host says why it is refused.
                    if !exists(&p) && !is_link(&p) {
                        return Err(failed(format!("{path}: File not found")));
                    }
                    let Some(mode) = parse_mode(&a.mode) else {
                        let m = text(&a.mode);
                        return Ok(format!(
                            "Invalid Mode {}",
                            m.trim_start_matches(['0', 'O', 'o'])
                        ));
                    };
                    host::set_mode(&path, mode)?;
                    Ok(mode_text(host::stat(&path, true)?.mode))
                },
            ),
            Function::new(
                "contains",
                "Return whether the file holds TEXT (stripped)",
                &["path", "text"],
                |a: Contains, _: &Call| {
                    let p = readable(&text(&a.path))?;
                    let Ok(bytes) = std::fs::read(&p) else {
                        return Ok(false);
                    };
                    let needle = text(&a.text);
                    let needle = needle.trim();
                    Ok(String::from_utf8_lossy(&bytes).contains(needle))
                },
            ),
            Function::new(
                "search",
                "Return whether the file matches PATTERN (a Python regex)",
                &[
                    "path",
                    "pattern",
                    "flags=8",
                    "bufsize=1",
                    "ignore_if_missing=false",
                    "multiline=false",
                ],
                |a: Search, _: &Call| {
                    let path = text(&a.path);
                    let p = readable(&path)?;
                    if !exists(&p) {
                        if a.ignore_if_missing {
                            return Ok(false);
                        }
                        return Err(failed(format!("{path}: File not found")));
                    }
                    let bytes = std::fs::read(&p).map_err(|e| io(&p, e))?;
                    let flags = regex_flags(&a.flags, a.multiline)?;
                    let re = compile(&text(&a.pattern), &flags)?;
                    re.is_match(String::from_utf8_lossy(&bytes).as_ref())
                        .map_err(|e| failed(format!("pattern: {e}")))
                },
            ),
            Function::new(
                "replace",
                "Replace PATTERN (a Python regex) with REPL in a file; return the diff",
                &[
                    "path",
                    "pattern",
                    "repl",
                    "count=0",
                    "flags=8",
                    "bufsize=1",
                    "append_if_not_found=false",
                    "prepend_if_not_found=false",
                    "not_found_content=null",
                    "backup=\".bak\"",
                    "dry_run=false",
                    "search_only=false",
                    "show_changes=true",
                    "ignore_if_missing=false",
                    "preserve_inode=true",
                    "backslash_literal=false",
                    "encoding=null",
                ],
                |a: Replace, _: &Call| replace(a),
            ),
        ]
    }
}

export_plugin!(File);
