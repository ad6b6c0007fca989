//! Salt's `sys` module: what this maid can run, read from the manifests of
//! the modules it loaded (`host.modules`), so the answer is what a job
//! would find. It needs no capability.

use std::collections::{BTreeMap, BTreeSet};

use maid_sdk::salt::fnmatch;
use maid_sdk::{
    Call, Error, Function, Manifest, Plugin, export_plugin, function, host, split_default,
};
use serde::Deserialize;
use serde_json::{Map, Value, json};

struct Sys;

/// Every `module.function` with its module's manifest entry.
fn functions(modules: &[Manifest]) -> BTreeMap<String, (&Manifest, usize)> {
    modules
        .iter()
        .flat_map(|m| {
            m.functions
                .iter()
                .enumerate()
                .map(move |(i, f)| (format!("{}.{}", m.module, f.name), (m, i)))
        })
        .collect()
}

/// The names given, as text (the master may have read a word as a number).
fn names(call: &Call) -> Vec<String> {
    call.args
        .iter()
        .map(|a| match a {
            Value::String(s) => s.clone(),
            other => maid_sdk::python::str(other),
        })
        .collect()
}

/// Salt's `argspec_report` for one function.
fn argspec(args: &[String]) -> Value {
    let mut plain = Vec::new();
    let mut defaults = Vec::new();
    let (mut varargs, mut kwargs) = (false, false);
    for a in args {
        match a.as_str() {
            s if s.starts_with("**") => kwargs = true,
            s if s.starts_with('*') => varargs = true,
            spec => {
                let (name, default) = split_default(spec);
                plain.push(json!(name));
                if let Some(d) = default {
                    defaults.push(serde_json::from_str(d).unwrap_or(json!(d)));
                }
            }
        }
    }
    let none_if_empty = |v: Vec<Value>| {
        if v.is_empty() {
            Value::Null
        } else {
            Value::Array(v)
        }
    };
    json!({
        "args": none_if_empty(plain),
        "defaults": none_if_empty(defaults),
        "varargs": if varargs { json!(true) } else { Value::Null },
        "kwargs": if kwargs { json!(true) } else { Value::Null },
    })
}

#[derive(Deserialize)]
struct Module {
    #[serde(default)]
    module: Value,
}

/// List the modules loaded on this maid (globs allowed)
#[function(raw, args = ["*args"])]
fn list_modules(call: &Call) -> Result<Vec<String>, Error> {
    let modules = host::modules();
    let all = functions(&modules);
    let mut out = BTreeSet::new();
    let wanted = names(call);
    if wanted.is_empty() {
        out.extend(modules.iter().map(|m| m.module.clone()));
    }
    for w in &wanted {
        for fun in all.keys() {
            let module = fun.split('.').next().unwrap_or_default();
            if (w.contains('*') && fnmatch(fun, w)) || module == w {
                out.insert(module.to_string());
            }
        }
    }
    Ok(out.into_iter().collect::<Vec<_>>())
}

/// List the functions of all modules, or of those named (globs allowed)
#[function(raw, args = ["*args", "**kwargs"])]
fn list_functions(call: &Call) -> Result<Vec<String>, Error> {
    let modules = host::modules();
    let all = functions(&modules);
    let wanted = names(call);
    if wanted.is_empty() {
        return Ok(all.keys().cloned().collect::<Vec<_>>());
    }
    let mut out = BTreeSet::new();
    for w in &wanted {
        let dotted = format!("{w}.");
        for fun in all.keys() {
            let hit = if w.contains('*') || w.contains('.') {
                fnmatch(fun, w)
            } else {
                fun.starts_with(&dotted)
            };
            if hit {
                out.insert(fun.clone());
            }
        }
    }
    Ok(out.into_iter().collect::<Vec<_>>())
}

/// Return the documentation of all functions, or of the modules and functions named
#[function(raw, args = ["*args"])]
fn doc(call: &Call) -> Result<Map<String, Value>, Error> {
    let modules = host::modules();
    let all = functions(&modules);
    let doc = |(m, i): &(&Manifest, usize)| json!(m.functions[*i].doc);
    let mut out = Map::new();
    let wanted = names(call);
    for (fun, entry) in &all {
        let hit = wanted.is_empty()
            || wanted.iter().any(|w| {
                if w.contains('*') {
                    fnmatch(fun, w)
                } else if w.is_empty() {
                    true
                } else {
                    let target = if w.ends_with('.') {
                        w.clone()
                    } else {
                        format!("{w}.")
                    };
                    fun == w || fun.starts_with(&target)
                }
            });
        if hit {
            out.insert(fun.clone(), doc(entry));
        }
    }
    Ok(out)
}

/// Return the argument specification of the functions of MODULE (globs allowed)
#[function(name = "argspec", args = ["module=\"\""])]
fn argspec_(a: Module) -> Result<Map<String, Value>, Error> {
    let module = match &a.module {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => maid_sdk::python::str(other),
    };
    let modules = host::modules();
    let all = functions(&modules);
    let mut out = Map::new();
    let dotted = format!("{module}.");
    for (fun, (m, i)) in &all {
        let hit = if module.contains('*') || module.contains('.') {
            fnmatch(fun, &module)
        } else {
            fun.starts_with(&dotted)
        };
        if hit {
            out.insert(fun.clone(), argspec(&m.functions[*i].args));
        }
    }
    Ok(out)
}

/// Reload the modules: a maid loads changed plugins by itself; returns True
#[function]
fn reload_modules() -> Result<bool, Error> {
    Ok(true)
}

impl Plugin for Sys {
    const MODULE: &'static str = "sys";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");

    fn functions() -> Vec<Function> {
        maid_sdk::functions![list_modules, list_functions, doc, argspec_, reload_modules]
    }
}

export_plugin!(Sys);
