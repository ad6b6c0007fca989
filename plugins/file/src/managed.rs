//! The execution side of Salt's `file.managed`: `file.check_managed_changes`
//! (what would change, for `test=True`), `file.manage_file` (make it so)
//! and `file.get_diff`, each following Salt 3008.4's own code path.
//!
//! Salt's functions find the source themselves (`cp.cache_file`); this
//! plugin has no `fetch`, so the caller — the state plugin, which does —
//! hands over the source's (rendered) bytes as `maid_source` (base64), or
//! names a local source file as `sfn`, which is read under this plugin's
//! grants. Every write goes to a file in a directory granted read-write,
//! and only after the host has said it will set the modes asked for
//! (`mode::may_set_mode`): a refused mode leaves nothing written.

use std::io::Write;
use std::path::Path;

use maid_sdk::fs::normalize;
use maid_sdk::{Error, function, host, python};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::difflib::{binary_replace, readlines, unified_diff_named};
use crate::inspect::stats;
use crate::mode::{may_set_mode, mode_text, parse_mode};
use crate::paths::{
    exists, failed, io, is_dir, is_link, readable, readable_file, text, writable, writable_file,
};
use crate::perms::{
    Want, changes, check_perms, fresh, mode_bits, new_owner_is, no_attrs, normalize_mode, owner_is,
};
use crate::tree::{makedirs_perms, yes_value};

/// A return that failed with `comment`, as Salt's `_error`.
fn error(mut ret: Map<String, Value>, comment: impl Into<String>) -> Value {
    ret.insert("result".into(), json!(false));
    ret.insert("comment".into(), json!(comment.into()));
    Value::Object(ret)
}

/// The source's content: `maid_source` (base64, fetched by the caller)
/// or the local file `sfn`; `None` when neither is given.
fn source_data(sfn: &Value, maid_source: &Value) -> Result<Option<Vec<u8>>, Error> {
    if let Value::String(b64) = maid_source {
        let bytes = crate::b64::decode(b64)
            .ok_or_else(|| Error::bad_arguments("maid_source is not base64"))?;
        return Ok(Some(bytes));
    }
    match sfn {
        Value::String(path) if !path.is_empty() => {
            let p = readable(path)?;
            Ok(Some(std::fs::read(&p).map_err(|e| io(&p, e))?))
        }
        _ => Ok(None),
    }
}

/// A local source (`/path`, `file:///path`): the file Salt reads as `sfn`.
fn local_source(source: &Value) -> Value {
    match source {
        Value::String(s) if s.starts_with('/') => json!(s),
        Value::String(s) => s.strip_prefix("file://").map_or(Value::Null, |p| json!(p)),
        _ => Value::Null,
    }
}

/// `contents` as the bytes Salt writes (`to_bytes`: UTF-8).
fn contents_bytes(contents: &Value) -> Option<Vec<u8>> {
    match contents {
        Value::Null => None,
        Value::String(s) => Some(s.clone().into_bytes()),
        other => Some(python::str(other).into_bytes()),
    }
}

/// Salt's `get_diff(a, b, show_changes=...)` of two contents: empty when
/// equal, else `<show_changes=False>`, a binary file's words, or the diff.
pub(crate) fn salt_get_diff(a: &[u8], b: &[u8], show_changes: bool) -> String {
    if readlines(a) == readlines(b) {
        return String::new();
    }
    if !show_changes {
        return "<show_changes=False>".into();
    }
    let bdiff = binary_replace(a, b);
    if !bdiff.is_empty() {
        return bdiff.into();
    }
    crate::difflib::get_diff(a, b)
}

/// `os.path.dirname`.
pub(crate) fn dirname(path: &str) -> String {
    match path.rfind('/') {
        Some(0) => "/".into(),
        Some(i) => path[..i].trim_end_matches('/').to_string(),
        None => String::new(),
    }
}

fn read(path: &str) -> Result<Vec<u8>, Error> {
    let p = readable_file(path)?;
    std::fs::read(&p).map_err(|e| io(&p, e))
}

/// Replace an existing file's content in place, so it keeps its owner
/// and mode (Salt's `copyfile` restores both afterwards).
fn overwrite(path: &str, data: &[u8]) -> Result<(), Error> {
    let p = writable_file(path)?;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&p)
        .map_err(|e| failed(format!("Failed to commit change: {}", io(&p, e).message)))?;
    f.write_all(data).map_err(|e| io(&p, e))
}

/// Salt's `copyfile` onto an existing path: the content replaced, the
/// mode kept; a link (not followed) is replaced by a regular file with
/// its target's mode. A file's owner is kept by writing it in place.
fn copyfile(path: &str, data: &[u8]) -> Result<(), Error> {
    if !is_link(Path::new(path)) {
        return overwrite(path, data);
    }
    let mode = host::stat(path, true).map(|st| st.mode).ok();
    let p = writable(path)?;
    std::fs::remove_file(&p).map_err(|e| io(&p, e))?;
    create(path)?;
    overwrite(path, data)?;
    match mode {
        Some(m) => host::set_mode(path, m),
        None => host::set_mode(path, 0o600),
    }
}

/// Make a new file; the mode a new file gets from the umask, which is
/// Salt's `(0o777 ^ umask) & 0o666`.
fn create(path: &str) -> Result<u32, Error> {
    let p = writable(path)?;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&p)
        .map_err(|e| io(&p, e))?;
    Ok(host::stat(path, false)?.mode)
}

/// `os.path.realpath` of a link inside the granted directories.
fn realpath(name: &str) -> String {
    host::stat(name, true)
        .ok()
        .and_then(|st| st.target)
        .unwrap_or_else(|| name.to_string())
}

/// `file.manage_file`'s arguments.
#[derive(Deserialize)]
pub(crate) struct ManageFile {
    name: Value,
    #[serde(default)]
    sfn: Value,
    #[serde(default)]
    ret: Value,
    #[serde(default)]
    source: Value,
    #[serde(default)]
    user: Value,
    #[serde(default)]
    group: Value,
    #[serde(default)]
    mode: Value,
    #[serde(default)]
    attrs: Value,
    #[serde(default)]
    makedirs: Value,
    #[serde(default = "yes_value")]
    show_changes: Value,
    #[serde(default)]
    contents: Value,
    #[serde(default)]
    dir_mode: Value,
    #[serde(default = "yes_value")]
    follow_symlinks: Value,
    #[serde(default)]
    maid_source: Value,
}

/// What `manage_file` works with, read from its arguments.
struct Job<'a> {
    name: String,
    a: &'a ManageFile,
    data: Option<Vec<u8>>,
    contents: Option<Vec<u8>>,
    mode: Option<String>,
}

impl Job<'_> {
    fn want(&self, follow: bool) -> Want<'_> {
        Want {
            user: &self.a.user,
            group: &self.a.group,
            mode: self.mode.clone(),
            follow,
            test: false,
        }
    }
}

/// The target exists (a file, or a link): bring its content and
/// permissions in line.
fn manage_existing(job: &Job<'_>, mut ret: Map<String, Value>) -> Result<Value, Error> {
    let name = job.name.as_str();
    let follow = python::truthy(&job.a.follow_symlinks);
    let show_changes = python::truthy(&job.a.show_changes);
    let link = is_link(Path::new(name));
    let real = if link && follow {
        realpath(name)
    } else {
        name.to_string()
    };
    if let Some(data) = &job.data {
        let same = (follow || !is_link(Path::new(&real))) && read(&real)? == *data;
        if !same {
            if !show_changes {
                changes(&mut ret).insert("diff".into(), json!("<show_changes=False>"));
            } else {
                let diff = salt_get_diff(&read(&real)?, data, true);
                if !diff.is_empty() {
                    changes(&mut ret).insert("diff".into(), json!(diff));
                }
            }
            copyfile(&real, data)?;
        }
    }
    if let Some(contents) = &job.contents {
        let differences = salt_get_diff(&read(&real)?, contents, show_changes);
        if !differences.is_empty() {
            changes(&mut ret).insert("diff".into(), json!(differences));
            copyfile(&real, contents)?;
        }
    }
    if is_link(Path::new(name)) && !follow {
        let Some(data) = &job.data else {
            return Ok(error(
                ret,
                format!("Source file '{}' not found", python::str(&job.a.source)),
            ));
        };
        copyfile(name, data)?;
        changes(&mut ret).insert(
            "diff".into(),
            json!("Replace symbolic link with regular file"),
        );
    }
    let (mut ret, _) = check_perms(name, Value::Object(ret), &job.want(follow))?;
    if !changes(&mut ret).is_empty() {
        ret.insert("comment".into(), json!(format!("File {name} updated")));
    } else if ret.get("result") == Some(&json!(true)) {
        ret.insert(
            "comment".into(),
            json!(format!("File {name} is in the correct state")),
        );
    }
    Ok(Value::Object(ret))
}

/// The mode `_set_mode_and_make_dirs` gives the parents it makes:
/// `dir_mode`, or `mode` with an execute bit for each digit that is not 0.
/// Salt's makedirs_perms sets it through check_perms, whose failure it
/// drops: a mode that is not octal leaves the umask's (`None`).
fn dir_mode_bits(dir_mode: &Value, mode: &Option<String>) -> Option<u32> {
    let dir_mode = match (normalize_mode(dir_mode), mode) {
        (Some(d), _) => Some(d),
        (None, Some(m)) => {
            let digits: Vec<char> = m.chars().collect();
            let last3 = &digits[digits.len().saturating_sub(3)..];
            let digit = |c: &char| match c.to_digit(10) {
                Some(0) | None => c.to_string(),
                Some(d) => (d | 1).to_string(),
            };
            Some(last3.iter().map(digit).collect())
        }
        (None, None) => None,
    };
    dir_mode.and_then(|d| parse_mode(&json!(d)))
}

/// `_set_mode_and_make_dirs`: the parents of `name`, with
/// [`dir_mode_bits`].
fn make_dirs(job: &Job<'_>) -> Result<(), Error> {
    let bits = dir_mode_bits(&job.a.dir_mode, &job.mode);
    makedirs_perms(&normalize(Path::new(&dirname(&job.name))), bits)
}

/// Refuse, before anything is written or made, the modes this would set
/// that the host refuses (set-uid, set-gid or world-writable without the
/// `special_modes` grant): `mode` for the file where it differs from the
/// `current` one (`None`: a new file; a link not followed keeps its
/// own, as `check_perms` does), and the parents' mode where `makedirs`
/// will make them. Otherwise the file would be written (a new one at
/// 0600, an old one with its new content) and only then refused its mode.
fn modes_may_be_set(
    name: &str,
    mode: &Option<String>,
    current: Option<&Value>,
    makedirs: &Value,
    dir_mode: &Value,
) -> Result<(), Error> {
    if let Some(m) = mode
        && current.is_none_or(|c| *c != json!(m))
        && let Some(bits) = mode_bits(m)
    {
        may_set_mode(name, bits)?;
    }
    if python::truthy(makedirs)
        && !is_dir(Path::new(&dirname(name)))
        && let Some(bits) = dir_mode_bits(dir_mode, mode)
    {
        may_set_mode(&dirname(name), bits)?;
    }
    Ok(())
}

/// The target does not exist: make it, from the source, the contents, or
/// empty.
fn manage_new(job: &Job<'_>, mut ret: Map<String, Value>) -> Result<Value, Error> {
    let name = job.name.as_str();
    let parent_ok = is_dir(Path::new(&dirname(name)));
    let makedirs = python::truthy(&job.a.makedirs);
    if job.data.is_some() {
        changes(&mut ret).insert("diff".into(), json!("New file"));
    }
    if !parent_ok {
        if !makedirs {
            changes(&mut ret).remove("diff");
            return Ok(error(ret, "Parent directory not present"));
        }
        make_dirs(job)?;
    }
    let mut default_mode = None;
    if job.data.is_none() {
        // Salt touches it first, under umask 077 when a mode will be set.
        default_mode = Some(create(name)?);
        if job.mode.is_some() {
            host::set_mode(name, 0o600)?;
        }
        if job.contents.is_none() {
            changes(&mut ret).insert("new".into(), json!(format!("file {name} created")));
            ret.insert("comment".into(), json!("Empty file"));
        } else {
            changes(&mut ret).insert("diff".into(), json!("New file"));
        }
    }
    if let Some(contents) = &job.contents {
        overwrite(name, contents)?;
    } else if let Some(data) = &job.data {
        // Salt's copy is made with mkstemp: mode 0600 until set.
        default_mode = Some(create(name)?);
        host::set_mode(name, 0o600)?;
        overwrite(name, data)?;
    }
    let mode = job
        .mode
        .clone()
        .or_else(|| default_mode.map(|m| mode_text(m & 0o666)));
    let want = Want {
        mode,
        ..job.want(false)
    };
    let (mut ret, _) = check_perms(name, Value::Object(ret), &want)?;
    if ret
        .get("comment")
        .is_none_or(|c| c.as_str().is_some_and(str::is_empty))
    {
        ret.insert("comment".into(), json!(format!("File {name} updated")));
    }
    if changes(&mut ret).is_empty() && ret.get("result") == Some(&json!(true)) {
        ret.insert(
            "comment".into(),
            json!(format!("File {name} is in the correct state")),
        );
    }
    Ok(Value::Object(ret))
}

/// Make a file hold its source or contents with the mode given; return the state's ret
// Salt's manage_file, with the source's bytes given as `maid_source`
// (base64) or a local file as `sfn`. An owner or group that the file does
// not already have (or, for a new file, that the agent's files do not
// get) is refused before anything changes: plugins cannot chown.
#[function(args = [
    "name",
    "sfn",
    "ret",
    "source",
    "source_sum",
    "user",
    "group",
    "mode",
    "attrs",
    "saltenv",
    "backup",
    "makedirs=false",
    "template=null",
    "show_changes=true",
    "contents=null",
    "dir_mode=null",
    "follow_symlinks=true",
    "skip_verify=false",
    "keep_mode=false",
    "encoding=null",
    "encoding_errors=\"strict\"",
    "maid_source=null",
    "**kwargs",
])]
pub(crate) fn manage_file(a: ManageFile) -> Result<Value, Error> {
    let name = text(&a.name);
    let p = writable(&name)?;
    no_attrs(&name, &a.attrs)?;
    let ret = match &a.ret {
        Value::Object(m) if !m.is_empty() => m.clone(),
        _ => fresh(&name),
    };
    let mut job = Job {
        name: name.clone(),
        a: &a,
        data: None,
        contents: contents_bytes(&a.contents),
        mode: normalize_mode(&a.mode),
    };
    if python::truthy(&a.source) {
        job.data = source_data(&a.sfn, &a.maid_source)?;
        if job.data.is_none() {
            return Ok(error(
                ret,
                format!("Source file '{}' not found", python::str(&a.source)),
            ));
        }
    }
    let target = exists(&p) && !is_dir(&p) || is_link(&p);
    if target {
        let follow = python::truthy(&a.follow_symlinks);
        let st = stats(&name, None, follow)?;
        owner_is(&name, &st, &a.user, &a.group)?;
        // A link not followed is replaced by a new file, whose mode is set.
        let current = (!is_link(&p) || follow).then_some(&st["mode"]);
        modes_may_be_set(&name, &job.mode, current, &Value::Null, &Value::Null)?;
        manage_existing(&job, ret)
    } else {
        new_owner_is(&name, &a.user, &a.group)?;
        modes_may_be_set(&name, &job.mode, None, &a.makedirs, &a.dir_mode)?;
        manage_new(&job, ret)
    }
}

/// `file.check_managed_changes`' arguments.
#[derive(Deserialize)]
pub(crate) struct CheckManaged {
    name: Value,
    #[serde(default)]
    source: Value,
    #[serde(default)]
    user: Value,
    #[serde(default)]
    group: Value,
    #[serde(default)]
    mode: Value,
    #[serde(default)]
    attrs: Value,
    #[serde(default)]
    contents: Value,
    #[serde(default)]
    follow_symlinks: Value,
    #[serde(default)]
    new_file_diff: Value,
    #[serde(default)]
    maid_source: Value,
    /// The state's `makedirs` and `dir_mode` (`manage_file`'s), which
    /// Salt's `check_managed_changes` does not take: with them the
    /// prediction refuses a parents' mode as the run would.
    #[serde(default)]
    maid_makedirs: Value,
    #[serde(default)]
    maid_dir_mode: Value,
}

/// Salt's `check_file_meta`: the changes `manage_file` would make.
fn check_file_meta(
    a: &CheckManaged,
    name: &str,
    data: Option<&[u8]>,
) -> Result<Map<String, Value>, Error> {
    let mut changes = Map::new();
    let p = readable(name)?;
    let follow = python::truthy(&a.follow_symlinks);
    let lstats = match stats(name, None, follow) {
        Ok(st) => Some(st),
        Err(e) if e.kind == maid_sdk::ErrorKind::Denied => return Err(e),
        Err(_) => None,
    };
    let new_file_diff = python::truthy(&a.new_file_diff);
    if lstats.is_none() && !new_file_diff {
        changes.insert("newfile".into(), json!(name));
        return Ok(changes);
    }
    let current = match &lstats {
        Some(_) if exists(&p) && !is_dir(&p) => read(name)?,
        _ => Vec::new(),
    };
    if let Some(data) = data
        && (lstats.is_none() || current != *data)
    {
        let diff = salt_get_diff(&current, data, true);
        changes.insert("diff".into(), json!(diff));
    }
    if let Some(contents) = contents_bytes(&a.contents) {
        let differences = salt_get_diff(&current, &contents, true);
        if !differences.is_empty() {
            changes.insert("diff".into(), json!(differences));
        }
    }
    let Some(lstats) = lstats else {
        return Ok(changes);
    };
    owner_is(name, &lstats, &a.user, &a.group)?;
    if let Some(mode) = normalize_mode(&a.mode)
        && lstats["mode"] != json!(mode)
    {
        changes.insert("mode".into(), json!(mode));
    }
    Ok(changes)
}

/// Return the changes file.manage_file would make (test=True's prediction)
// Salt's check_managed_changes, with a salt:// source's (rendered) bytes
// given as `maid_source` (base64); an owner or group the
// file does not have is refused (Denied), since it could not be set.
#[function(args = [
    "name",
    "source",
    "source_hash",
    "source_hash_name",
    "user",
    "group",
    "mode",
    "attrs",
    "template",
    "context",
    "defaults",
    "saltenv",
    "contents=null",
    "skip_verify=false",
    "keep_mode=false",
    "seuser=null",
    "serole=null",
    "setype=null",
    "serange=null",
    "verify_ssl=true",
    "follow_symlinks=false",
    "ignore_ordering=false",
    "ignore_whitespace=false",
    "ignore_comment_characters=null",
    "new_file_diff=false",
    "maid_source=null",
    "maid_makedirs=false",
    "maid_dir_mode=null",
    "**kwargs",
])]
pub(crate) fn check_managed_changes(a: CheckManaged) -> Result<Value, Error> {
    let name = text(&a.name);
    no_attrs(&name, &a.attrs)?;
    let mut data = None;
    if a.contents.is_null() && python::truthy(&a.source) {
        data = source_data(&local_source(&a.source), &a.maid_source)?;
        if data.is_none() {
            return Ok(json!([
                false,
                format!("Source file {} not found", python::str(&a.source))
            ]));
        }
    }
    let mode = normalize_mode(&a.mode);
    let follow = python::truthy(&a.follow_symlinks);
    if lstat_missing(&name)? {
        new_owner_is(&name, &a.user, &a.group)?;
        modes_may_be_set(&name, &mode, None, &a.maid_makedirs, &a.maid_dir_mode)?;
    } else if let Ok(st) = stats(&name, None, follow) {
        let current = (!is_link(Path::new(&name)) || follow).then_some(&st["mode"]);
        modes_may_be_set(&name, &mode, current, &Value::Null, &Value::Null)?;
    }
    Ok(Value::Object(check_file_meta(&a, &name, data.as_deref())?))
}

fn lstat_missing(name: &str) -> Result<bool, Error> {
    let p = readable(name)?;
    Ok(!exists(&p) && !is_link(&p))
}

#[derive(Deserialize)]
pub(crate) struct GetDiff {
    file1: Value,
    file2: Value,
    #[serde(default = "yes_value")]
    show_filenames: Value,
    #[serde(default = "yes_value")]
    show_changes: Value,
}

/// Return the unified diff of two files on this minion
#[function(args = [
    "file1",
    "file2",
    "saltenv=\"base\"",
    "show_filenames=true",
    "show_changes=true",
    "template=false",
    "source_hash_file1=null",
    "source_hash_file2=null",
    "ignore_ordering=false",
    "ignore_whitespace=false",
    "ignore_comment_characters=null",
])]
pub(crate) fn get_diff(a: GetDiff) -> Result<String, Error> {
    let (f1, f2) = (text(&a.file1), text(&a.file2));
    let mut errors = Vec::new();
    for f in [&f1, &f2] {
        // A salt:// file would be cached by cp; this plugin reads only
        // local files.
        if f.contains("://") || !exists(&readable(f)?) {
            errors.push(format!("File {f} not found"));
        }
    }
    if !errors.is_empty() {
        return Err(failed(format!(
            "Failed to cache one or more files: {}",
            errors.join(", ")
        )));
    }
    let (b1, b2) = (read(&f1)?, read(&f2)?);
    if readlines(&b1) == readlines(&b2) {
        return Ok(String::new());
    }
    if !python::truthy(&a.show_changes) {
        return Ok("<show_changes=False>".into());
    }
    let bdiff = binary_replace(&b1, &b2);
    if !bdiff.is_empty() {
        return Ok(bdiff.into());
    }
    let names = if python::truthy(&a.show_filenames) {
        (f1.as_str(), f2.as_str())
    } else {
        ("", "")
    };
    Ok(unified_diff_named(&readlines(&b1), &readlines(&b2), names, "\n").concat())
}
