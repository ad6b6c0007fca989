//! SLS files and templates rendered by [`maid_render`], their files read
//! from `salt://` and their `salt[...]` calls made through the host, under
//! this plugin's grants.

use std::sync::Arc;

use maid_sdk::host;
use serde_json::{Map, Value};

pub use maid_render::{Context, Rendered, render, sls};

/// The host as a render's [`maid_render::Source`].
struct Host;

impl maid_render::Source for Host {
    fn fetch(&self, path: &str, saltenv: &str) -> Result<Option<String>, String> {
        fetch(path, saltenv)
    }

    fn call(
        &self,
        fun: &str,
        args: &[Value],
        kwargs: &Map<String, Value>,
    ) -> Result<Value, String> {
        // Salt renders with pillar unmasked: a template reads the values.
        let mut kwargs = kwargs.clone();
        if fun.starts_with("pillar.") && !kwargs.contains_key("unmask") {
            kwargs.insert("unmask".into(), Value::Bool(true));
        }
        match host::call(fun, args, &kwargs) {
            Ok(host::Called::Returned { ret, .. }) => Ok(ret),
            Ok(host::Called::Failed { message, .. }) => Err(message),
            Err(e) => Err(e.to_string()),
        }
    }
}

/// A render context on the host's files and functions.
pub fn context(
    grains: Map<String, Value>,
    pillar: Map<String, Value>,
    saltenv: String,
    envs: Vec<String>,
) -> Context {
    Context {
        grains,
        pillar,
        saltenv,
        envs,
        source: Arc::new(Host),
        vars: Map::new(),
    }
}

/// Render a file template (`salt://path` of `saltenv`) with Jinja.
pub fn jinja(ctx: &Context, text: &str, path: &str, saltenv: &str) -> Result<String, String> {
    maid_render::jinja::render(ctx, text, path, "", saltenv)
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
