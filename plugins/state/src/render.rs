//! SLS files fetched from `salt://` and rendered as Salt's default
//! renderer pipe does: `jinja|yaml` unless a `#!` first line names
//! another (`yaml`, `json`, `jinja|json`, `jinja|yaml`). YAML is read
//! with Salt's 1.1 rules (duplicate keys are an error).

use maid_sdk::host;
use serde_json::{Map, Value};

use crate::jinja;

/// What templates see besides the SLS's own names.
pub struct Context {
    pub grains: Map<String, Value>,
    pub pillar: Map<String, Value>,
    /// The run's environment: the `saltenv` it was asked for, else `base`.
    pub saltenv: String,
    /// The environments the file server has, as Salt's `_get_envs` lists
    /// them: `base` first.
    pub envs: Vec<String>,
}

/// The `salt://` URL of `url` (a `salt://` URL or a bare path under it)
/// as fetched from environment `saltenv` ([`maid_sdk::salt::url_in`]).
pub fn url_in(url: &str, saltenv: &str) -> String {
    let url = if url.starts_with("salt://") {
        url.to_string()
    } else {
        format!("salt://{url}")
    };
    maid_sdk::salt::url_in(&url, Some(saltenv))
}

/// A rendered SLS: its data and the `salt://` path it came from.
pub struct Rendered {
    pub data: Value,
    pub source: String,
}

/// Read `salt://path` of `saltenv` whole; `None` when it does not exist.
pub fn fetch(path: &str, saltenv: &str) -> Result<Option<String>, String> {
    let url = url_in(path, saltenv);
    let Some(mut src) = host::fetch(&url).map_err(host_error)? else {
        return Ok(None);
    };
    let mut bytes = Vec::with_capacity(src.size() as usize);
    std::io::Read::read_to_end(&mut src, &mut bytes).map_err(|e| e.to_string())?;
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| format!("{url} is not UTF-8 text"))
}

/// A host refusal in the words a job sees it in (`Denied: ...`).
pub fn host_error(e: maid_sdk::Error) -> String {
    match e.kind {
        maid_sdk::ErrorKind::Denied => format!("Denied: {}", e.message),
        _ => e.message,
    }
}

/// `fileclient.get_state` and `compile_template`: SLS `sls` (`a.b` is
/// `a/b.sls` or `a/b/init.sls`) rendered; `None` when neither exists.
pub fn sls(ctx: &Context, sls: &str, saltenv: &str) -> Result<Option<Rendered>, String> {
    let base = sls.replace('.', "/");
    for path in [format!("{base}.sls"), format!("{base}/init.sls")] {
        let Some(text) = fetch(&path, saltenv)? else {
            continue;
        };
        let data = render(ctx, &text, &path, sls, saltenv)
            .map_err(|e| format!("Rendering SLS '{saltenv}:{sls}' failed: {e}"))?;
        return Ok(Some(Rendered {
            data,
            source: format!("salt://{path}"),
        }));
    }
    Ok(None)
}

/// The renderer pipe a template asks for with its `#!` line.
fn pipe(text: &str) -> (Vec<String>, &str) {
    let first = text.lines().next().unwrap_or("");
    if let Some(spec) = first.strip_prefix("#!")
        && !spec.starts_with('/')
    {
        let names: Vec<String> = spec
            .split('|')
            .map(|s| s.split_whitespace().next().unwrap_or("").to_string())
            .collect();
        return (names, text);
    }
    (vec!["jinja".into(), "yaml".into()], text)
}

/// Render `text` (from `salt://path` of `saltenv`, SLS `sls`) to data.
pub fn render(
    ctx: &Context,
    text: &str,
    path: &str,
    sls: &str,
    saltenv: &str,
) -> Result<Value, String> {
    let (names, text) = pipe(text);
    let mut current = text.to_string();
    for name in &names {
        current = match name.as_str() {
            "jinja" => jinja::render(ctx, &current, path, sls, saltenv)?,
            "yaml" => return load_yaml(&current),
            "json" => return load_json(&current),
            other => return Err(format!("The renderer \"{other}\" is not available")),
        };
    }
    Ok(Value::String(current))
}

fn strip_shebang(text: &str) -> &str {
    if text.starts_with("#!") {
        text.split_once('\n').map_or("", |(_, rest)| rest)
    } else {
        text
    }
}

/// YAML with Salt's rules.
pub fn load_yaml(text: &str) -> Result<Value, String> {
    let py = maid_salt::yaml11::safe_load(text).map_err(|e| e.to_string())?;
    maid_salt::args::to_json(&py).ok_or_else(|| "the YAML holds a value JSON cannot".to_string())
}

fn load_json(text: &str) -> Result<Value, String> {
    let text = strip_shebang(text);
    if text.trim().is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_str(text).map_err(|e| e.to_string())
}
