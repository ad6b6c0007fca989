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
