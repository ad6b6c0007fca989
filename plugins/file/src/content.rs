//! A file's contents: read it, write or append lines, touch it.

use std::io::{Read, Seek, SeekFrom, Write};

use maid_sdk::{Call, Error, function};
use serde::Deserialize;
use serde_json::Value;

use crate::paths::{exists, failed, io, path_arg, readable_file, text, writable, writable_file};

#[derive(Deserialize)]
pub(crate) struct Read_ {
    path: Value,
    #[serde(default)]
    binary: bool,
}
#[derive(Deserialize)]
pub(crate) struct Touch {
    name: Value,
    #[serde(default)]
    atime: Option<Value>,
    #[serde(default)]
    mtime: Option<Value>,
}
/// The lines `file.write`/`file.append` take: the positional arguments
/// after the path, or `args=`.
pub(crate) fn lines(call: &Call) -> Vec<String> {
    match call.kwargs.get("args") {
        Some(Value::Array(items)) => items.iter().map(text).collect(),
        Some(one) => vec![text(one)],
        None => call.args.iter().skip(1).map(text).collect(),
    }
}

/// Return the contents of a file (binary=True: as bytes, lossily)
#[function(args = ["path", "binary=false"])]
pub(crate) fn read(a: Read_) -> Result<String, Error> {
    let p = readable_file(&text(&a.path))?;
    let bytes = std::fs::read(&p).map_err(|e| io(&p, e))?;
    if a.binary {
        return Ok(String::from_utf8_lossy(&bytes).into_owned());
    }
    String::from_utf8(bytes)
        .map_err(|_| failed(format!("{}: not UTF-8 text; use binary=True", p.display())))
}

/// Write the lines given to PATH, replacing what it held
#[function(raw, args = ["path", "*args", "**kwargs"])]
pub(crate) fn write(call: &Call) -> Result<String, Error> {
    let path = path_arg(call, "path")?;
    let p = writable(&path)?;
    let lines = lines(call);
    let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&p, body).map_err(|e| io(&p, e))?;
    Ok(format!("Wrote {} lines to \"{path}\"", lines.len()))
}

/// Append the lines given to PATH, after a newline if it lacks one
#[function(raw, args = ["path", "*args", "**kwargs"])]
pub(crate) fn append(call: &Call) -> Result<String, Error> {
    let path = path_arg(call, "path")?;
    let p = writable_file(&path)?;
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
}

/// Create NAME if missing and set its times (now, or ATIME/MTIME)
#[function(args = ["name", "atime=null", "mtime=null"])]
pub(crate) fn touch(a: Touch) -> Result<bool, Error> {
    let p = writable_file(&text(&a.name))?;
    // A directory's times are set through it opened for reading.
    let f = if crate::paths::is_dir(&p) {
        std::fs::File::open(&p)
    } else {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&p)
    }
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
                .ok_or_else(|| Error::bad_arguments("atime and mtime must be integers"))?;
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
}
