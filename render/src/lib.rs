//! Salt's renderers as maid runs them, for whoever renders: the state
//! plugin in its sandbox (files and `salt[...]` through its host) and the
//! master compiling pillar (files from `pillar_roots`).
//!
//! SLS files are rendered as Salt's default renderer pipe does:
//! `jinja|yaml` unless a `#!` first line names another (`yaml`, `json`,
//! `jinja|json`, `jinja|yaml`). YAML is read with Salt's 1.1 rules
//! (duplicate keys are an error). Jinja is [`jinja`]'s: Salt's context,
//! tags and filters ([`filters`]).
//!
//! No I/O here: what a template reads and calls goes through the
//! [`Source`] the renderer is given.

pub mod filters;
pub mod jinja;

use std::sync::Arc;

use serde_json::{Map, Value};

/// Where a render's files and function calls come from.
pub trait Source: Send + Sync {
    /// Text of `salt://path` in environment `saltenv`; `None` when it
    /// does not exist.
    fn fetch(&self, path: &str, saltenv: &str) -> Result<Option<String>, String>;

    /// `salt['fun'](*args, **kwargs)` in a template.
    fn call(&self, fun: &str, args: &[Value], kwargs: &Map<String, Value>)
    -> Result<Value, String>;
}

/// What templates see besides the SLS's own names.
#[derive(Clone)]
pub struct Context {
    pub grains: Map<String, Value>,
    pub pillar: Map<String, Value>,
    /// The run's environment: the `saltenv` it was asked for, else `base`.
    pub saltenv: String,
    /// The environments the file server has, as Salt's `_get_envs` lists
    /// them: `base` first.
    pub envs: Vec<String>,
    /// Files and functions.
    pub source: Arc<dyn Source>,
    /// Names the template is given besides Salt's (a pillar include's
    /// `defaults`); they win over Salt's own of the same name.
    pub vars: Map<String, Value>,
}

/// A rendered SLS: its data and the `salt://` path it came from.
#[derive(Debug)]
pub struct Rendered {
    pub data: Value,
    pub source: String,
}

/// `fileclient.get_state` and `compile_template`: SLS `sls` (`a.b` is
/// `a/b.sls` or `a/b/init.sls`) rendered; `None` when neither exists.
/// A render error is `Rendering SLS '<saltenv>:<sls>' failed: <why>`.
pub fn sls(ctx: &Context, sls: &str, saltenv: &str) -> Result<Option<Rendered>, String> {
    let Some((path, text)) = find_sls(ctx.source.as_ref(), sls, saltenv)? else {
        return Ok(None);
    };
    let data = render(ctx, &text, &path, sls, saltenv)
        .map_err(|e| format!("Rendering SLS '{saltenv}:{sls}' failed: {e}"))?;
    Ok(Some(Rendered {
        data,
        source: format!("salt://{path}"),
    }))
}

/// The file SLS `sls` is read from (`a/b.sls`, else `a/b/init.sls`) and
/// its text; `None` when neither exists.
pub fn find_sls(
    source: &dyn Source,
    sls: &str,
    saltenv: &str,
) -> Result<Option<(String, String)>, String> {
    let base = sls.replace('.', "/");
    for path in [format!("{base}.sls"), format!("{base}/init.sls")] {
        if let Some(text) = source.fetch(&path, saltenv)? {
            return Ok(Some((path, text)));
        }
    }
    Ok(None)
}

/// The renderer pipe a template asks for with its `#!` line.
fn pipe(text: &str) -> Vec<String> {
    let first = text.lines().next().unwrap_or("");
    if let Some(spec) = first.strip_prefix("#!")
        && !spec.starts_with('/')
    {
        return spec
            .split('|')
            .map(|s| s.split_whitespace().next().unwrap_or("").to_string())
            .collect();
    }
    vec!["jinja".into(), "yaml".into()]
}

/// Render `text` (from `salt://path` of `saltenv`, SLS `sls`) to data.
pub fn render(
    ctx: &Context,
    text: &str,
    path: &str,
    sls: &str,
    saltenv: &str,
) -> Result<Value, String> {
    let mut current = text.to_string();
    for name in &pipe(text) {
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
