//! Modes as Salt shows and takes them (`0644`), read and set through the
//! host, since WASI carries none.

use maid_sdk::{Error, function, host};
use serde::Deserialize;
use serde_json::Value;

use crate::paths::{exists, failed, is_link, readable, text, writable};
use crate::yes;

/// Python's `oct()` of a mode, normalised as Salt's `normalize_mode`:
/// `0644`, `0755`, `0000`.
pub(crate) fn mode_text(mode: u32) -> String {
    let digits = format!("{mode:o}");
    format!("{digits:0>4}")
}
/// A mode argument (`644`, `"0644"`, `0o644`) as bits.
pub(crate) fn parse_mode(mode: &Value) -> Option<u32> {
    let t = text(mode);
    let t = t.trim_start_matches(['0', 'O', 'o']);
    if t.is_empty() {
        return Some(0);
    }
    u32::from_str_radix(t, 8).ok().filter(|m| *m <= 0o7777)
}
/// Bits the host sets only for a plugin granted `special_modes`:
/// set-uid, set-gid and world-writable (`SPECIAL_MODE_BITS` in the
/// agent's `runtime/files.rs`). A mode without them is never refused for
/// itself, so only a mode with them is asked about ahead.
const SPECIAL_MODE_BITS: u32 = 0o6002;

/// Refuse (`Denied`) a mode the host would refuse to set on `path`,
/// before the caller writes anything: a state whose mode is refused must
/// leave nothing behind, neither a new file nor new content in an old
/// one. Only the host knows the grant, so it is asked to set `mode` on an
/// empty scratch file in the granted directory that holds `path`, which
/// is removed whatever the answer. Where that directory is not writable
/// nothing is asked: the place itself is refused.
pub(crate) fn may_set_mode(path: &str, mode: u32) -> Result<(), Error> {
    if mode & SPECIAL_MODE_BITS == 0 {
        return Ok(());
    }
    let Some(dir) = maid_sdk::fs::granted_dir(std::path::Path::new(path)) else {
        return Ok(());
    };
    if !dir.writable {
        return Ok(());
    }
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let mut made = None;
    for n in 0..8 {
        let scratch = dir.path.join(format!(".maid-mode-{stamp:x}-{n}"));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&scratch)
        {
            Ok(_) => {
                made = Some(scratch);
                break;
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(crate::paths::io(&scratch, e)),
        }
    }
    let Some(scratch) = made else {
        return Err(failed(format!(
            "{}: no scratch file could be made to ask whether mode {} may be set",
            dir.path.display(),
            mode_text(mode)
        )));
    };
    let shown = scratch.display().to_string();
    let asked = host::set_mode(&shown, mode);
    let _ = std::fs::remove_file(&scratch);
    match asked {
        Err(e) if e.kind == maid_sdk::ErrorKind::Denied => {
            Err(Error::denied(e.message.replace(&shown, path)))
        }
        _ => Ok(()),
    }
}
pub(crate) fn mode_arg(mode: &Option<Value>) -> Result<Option<u32>, Error> {
    match mode {
        None | Some(Value::Null) => Ok(None),
        Some(m) => parse_mode(m)
            .map(Some)
            .ok_or_else(|| Error::bad_arguments(format!("Invalid Mode {}", text(m)))),
    }
}
#[derive(Deserialize)]
pub(crate) struct GetMode {
    path: Value,
    #[serde(default = "yes")]
    follow_symlinks: bool,
}
#[derive(Deserialize)]
pub(crate) struct SetMode {
    path: Value,
    mode: Value,
}

/// Return a path's mode as text, e.g. 0644
#[function(args = ["path", "follow_symlinks=true"])]
pub(crate) fn get_mode(a: GetMode) -> Result<String, Error> {
    let path = text(&a.path);
    readable(&path)?;
    match host::stat(&path, a.follow_symlinks) {
        Ok(st) => Ok(mode_text(st.mode)),
        Err(e) if e.kind == maid_sdk::ErrorKind::Denied => Err(e),
        Err(_) => Err(failed(format!("Path not found: {path}"))),
    }
}

/// Set a path's mode (e.g. 0644); return the new mode as text
#[function(args = ["path", "mode"])]
pub(crate) fn set_mode(a: SetMode) -> Result<String, Error> {
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
}
