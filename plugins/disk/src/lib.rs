//! Salt's `disk` module on Linux: `usage` and `inodeusage`, read from `df`
//! run through the exec grant (which need name nothing else).

use maid_sdk::host::Command;
use maid_sdk::{Capability, Error, Function, Plugin, export_plugin, function, python};
use serde::Deserialize;
use serde_json::{Map, Value, json};

struct Disk;

#[derive(Deserialize)]
struct Args {
    #[serde(default)]
    args: Value,
}

/// Salt's `_clean_flags`: each character a `df` flag Salt allows.
fn flags(args: &Value, caller: &str) -> Result<String, Error> {
    const ALLOWED: &str = "aBhHiklPtTxv";
    let text = match args {
        Value::Null => return Ok(String::new()),
        Value::Array(items) => items.iter().map(python::str).collect::<String>(),
        other => python::str(other),
    };
    if text.chars().any(|c| !ALLOWED.contains(c)) {
        return Err(Error::failed(format!("Invalid flag passed to {caller}"), 1));
    }
    Ok(text)
}

fn df(base: &str, extra: &str) -> Result<String, Error> {
    let mut cmd = Command::new("df").arg(base);
    if !extra.is_empty() {
        cmd = cmd.arg(format!("-{extra}"));
    }
    let out = cmd.output()?;
    // Salt reads what `df` printed even when it failed on one mount.
    Ok(out.stdout_lossy())
}

/// Return the space used on each mounted volume (df -P)
// Salt's `disk.usage`: `{mount: {filesystem, 1K-blocks, used, available,
// capacity}}`, the numbers as text.
#[function(args = ["args=null"])]
fn usage(a: Args) -> Result<Value, Error> {
    let extra = flags(&a.args, "disk.usage")?;
    let mut ret = Map::new();
    let mut oldline: Option<String> = None;
    for line in df("-P", &extra)?.lines() {
        if line.is_empty() || line.starts_with("Filesystem") {
            continue;
        }
        let line = match oldline.take() {
            Some(old) => format!("{old} {line}"),
            None => line.to_string(),
        };
        let mut comps: Vec<String> = line.split_whitespace().map(str::to_string).collect();
        if comps.len() == 1 {
            oldline = Some(line);
            continue;
        }
        // A filesystem name with spaces: join until a number follows.
        while comps.len() >= 2 && !comps[1].chars().all(|c| c.is_ascii_digit()) {
            let second = comps.remove(1);
            comps[0] = format!("{} {second}", comps[0]);
        }
        if comps.len() < 6 {
            continue;
        }
        ret.insert(
            comps[5].clone(),
            json!({
                "filesystem": comps[0],
                "1K-blocks": comps[1],
                "used": comps[2],
                "available": comps[3],
                "capacity": comps[4],
            }),
        );
    }
    Ok(Value::Object(ret))
}

/// Return the inodes used on each mounted volume (df -iP)
// Salt's `disk.inodeusage`: `{mount: {inodes, used, free, use,
// filesystem}}`.
#[function(args = ["args=null"])]
fn inodeusage(a: Args) -> Result<Value, Error> {
    let extra = flags(&a.args, "disk.inodeusage")?;
    let mut ret = Map::new();
    for line in df("-iP", &extra)?.lines() {
        if line.starts_with("Filesystem") {
            continue;
        }
        let comps: Vec<&str> = line.split_whitespace().collect();
        if comps.len() < 6 {
            continue;
        }
        ret.insert(
            comps[5].to_string(),
            json!({
                "inodes": comps[1],
                "used": comps[2],
                "free": comps[3],
                "use": comps[4],
                "filesystem": comps[0],
            }),
        );
    }
    Ok(Value::Object(ret))
}

impl Plugin for Disk {
    const MODULE: &'static str = "disk";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const CAPABILITIES: &'static [Capability] = &[Capability::Exec];

    fn functions() -> Vec<Function> {
        maid_sdk::functions![usage, inodeusage]
    }
}

export_plugin!(Disk);
