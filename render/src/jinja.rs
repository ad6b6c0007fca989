//! Jinja as Salt renders SLS files and templates: MiniJinja with the
//! context Salt gives (`grains`, `pillar`, `salt`, `opts`, `saltenv`,
//! `sls`, `slspath`, `tpldir`, `tplfile`, ...), `{% include %}` and
//! `{% import %}` from `salt://`, Salt's `import_yaml`/`import_json`/
//! `import_text` tags, undefined names an error (Salt's
//! `StrictUndefined`), and values printed as Python prints them.

use minijinja::value::{Kwargs, Object, Rest};
use minijinja::{Environment, Error, ErrorKind, State, UndefinedBehavior, Value as J};
use serde_json::{Map, Value};
use std::sync::{Arc, LazyLock};

use crate::{Context, Source};

fn err(msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidOperation, msg.into())
}

fn to_json(v: &J) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// `salt`: every execution function, as `salt['mod.fun'](...)` or
/// `salt.mod.fun(...)`, run through the render's [`Source`] (the state
/// plugin's host `call` and its grant; the master's few).
struct Salt(Arc<dyn Source>);

struct Module(Arc<dyn Source>, String);

impl std::fmt::Debug for Salt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("salt")
    }
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "salt.{}", self.1)
    }
}

impl Object for Salt {
    fn get_value(self: &Arc<Self>, key: &J) -> Option<J> {
        let name = key.as_str()?.to_string();
        if name.contains('.') {
            Some(function(self.0.clone(), name))
        } else {
            Some(J::from_object(Module(self.0.clone(), name)))
        }
    }
}

impl Object for Module {
    fn get_value(self: &Arc<Self>, key: &J) -> Option<J> {
        Some(function(
            self.0.clone(),
            format!("{}.{}", self.1, key.as_str()?),
        ))
    }
}

fn function(source: Arc<dyn Source>, name: String) -> J {
    J::from_function(move |args: Rest<J>, kwargs: Kwargs| -> Result<J, Error> {
        let args: Vec<Value> = args.iter().map(to_json).collect();
        let mut kw = Map::new();
        for key in kwargs.args() {
            let v: J = kwargs.get(key)?;
            kw.insert(key.to_string(), to_json(&v));
        }
        let ret = source.call(&name, &args, &kw).map_err(err)?;
        Ok(J::from_serialize(&ret))
    })
}

/// Values printed as Python's `str()` prints them (`True`, `None`,
/// `['a', 'b']`, `{'k': 1}`).
fn formatter(out: &mut minijinja::Output, state: &State, value: &J) -> Result<(), Error> {
    if value.is_undefined() || value.as_str().is_some() || value.is_safe() {
        return minijinja::escape_formatter(out, state, value);
    }
    if let Some(t) = value.downcast_object_ref::<crate::filters::Tuple>() {
        return out.write_str(&t.repr()).map_err(|_| err("write failed"));
    }
    let text = maid_salt::python::str(&to_json(value));
    out.write_str(&text).map_err(|_| err("write failed"))
}

/// Salt's SerializerExtension tags, turned into what MiniJinja knows:
/// `{% import_yaml "x" as v %}` is `{% set v = import_yaml("x") %}`.
fn preprocess(text: &str) -> String {
    static TAG: LazyLock<regex::Regex> = LazyLock::new(|| {
        regex::Regex::new(r#"\{%(-?)\s*import_(yaml|json|text)\s+(.+?)\s+as\s+(\w+)\s*(-?)%\}"#)
            .expect("regex")
    });
    TAG.replace_all(text, "{%${1} set ${4} = import_${2}(${3}) ${5}%}")
        .into_owned()
}

fn import(
    kind: &'static str,
    source: Arc<dyn Source>,
    saltenv: String,
) -> impl Fn(String) -> Result<J, Error> + Send + Sync + 'static {
    move |path: String| {
        let path = path.trim_start_matches("salt://").to_string();
        let text = source
            .fetch(&path, &saltenv)
            .map_err(err)?
            .ok_or_else(|| err(format!("Template {path} not found")))?;
        Ok(match kind {
            "yaml" => J::from_serialize(&crate::load_yaml(&text).map_err(err)?),
            "json" => J::from_serialize(
                &serde_json::from_str::<Value>(&text).map_err(|e| err(e.to_string()))?,
            ),
            _ => J::from(text),
        })
    }
}

/// The names `generate_sls_context` gives a template at `path` for `sls`.
fn sls_context(path: &str, sls: &str) -> Vec<(&'static str, String)> {
    let slspath_full = sls.replace('.', "/");
    let template = path.to_string();
    let dir = template
        .rsplit_once('/')
        .map_or(String::new(), |(d, _)| d.to_string());
    let mut out = vec![
        ("tplpath", template.clone()),
        ("tplfile", template.clone()),
        (
            "tpldir",
            if dir.is_empty() {
                ".".into()
            } else {
                dir.clone()
            },
        ),
        ("tpldot", dir.replace('/', ".")),
    ];
    let slspath = if sls.is_empty() {
        String::new()
    } else {
        dir.clone()
    };
    let _ = slspath_full;
    out.push(("slspath", slspath.clone()));
    out.push(("sls_path", slspath.replace('/', "_")));
    out.push(("slsdotpath", slspath.replace('/', ".")));
    out.push(("slscolonpath", slspath.replace('/', ":")));
    out
}

/// Render `text` (`salt://path` of `saltenv`, for SLS `sls`; empty for a
/// file).
pub fn render(
    ctx: &Context,
    text: &str,
    path: &str,
    sls: &str,
    saltenv: &str,
) -> Result<String, String> {
    let mut env = Environment::new();
    env.set_keep_trailing_newline(true);
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_formatter(formatter);
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    let loader_env = saltenv.to_string();
    let loader = ctx.source.clone();
    env.set_loader(move |name| {
        loader
            .fetch(name.trim_start_matches("salt://"), &loader_env)
            .map_err(err)
    });
    crate::filters::add(&mut env);
    for kind in ["yaml", "json", "text"] {
        env.add_function(
            format!("import_{kind}"),
            import(kind, ctx.source.clone(), saltenv.to_string()),
        );
    }
    env.add_global("grains", J::from_serialize(&ctx.grains));
    env.add_global("pillar", J::from_serialize(&ctx.pillar));
    env.add_global("salt", J::from_object(Salt(ctx.source.clone())));
    env.add_global(
        "opts",
        J::from_serialize(serde_json::json!({"id": ctx.grains.get("id"), "saltenv": ctx.saltenv})),
    );
    env.add_global("saltenv", J::from(saltenv.to_string()));
    env.add_global("sls", J::from(sls.to_string()));
    for (k, v) in sls_context(path, sls) {
        env.add_global(k, J::from(v));
    }
    for (k, v) in &ctx.vars {
        env.add_global(k.clone(), J::from_serialize(v));
    }
    let source = preprocess(text);
    env.render_named_str(path, &source, ()).map_err(describe)
}

fn describe(e: Error) -> String {
    let mut msg = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        msg.push_str(&format!(": {s}"));
        source = s.source();
    }
    msg
}
