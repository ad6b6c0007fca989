//! Salt's `cmd` states, and the `onlyif`/`unless` checks every state
//! takes: commands run through the `cmd` module (`cmd.run_all`,
//! `cmd.retcode`), under its grants.

use serde_json::{Map, Value, json};

use super::{Env, name_of, ret, salt};
use crate::compile::Obj;
use crate::py::{py_str, truthy};

/// The `cmd.retcode` options a check passes on from the chunk.
pub fn check_opts(low: &Obj, env: &Env) -> Vec<(&'static str, Value)> {
    let exclude: Vec<String> = match low.get("cmd_opts_exclude") {
        Some(Value::Array(a)) => a.iter().map(py_str).collect(),
        Some(v) => vec![py_str(v)],
        None => Vec::new(),
    };
    let mut opts = Vec::new();
    for k in ["cwd", "runas", "env", "timeout", "success_retcodes"] {
        if !exclude.iter().any(|e| e == k)
            && let Some(v) = low.get(k)
        {
            opts.push((k, v.clone()));
        }
    }
    if let Some(shell) = low
        .get("shell")
        .filter(|_| !exclude.iter().any(|e| e == "shell"))
    {
        opts.push(("shell", shell.clone()));
    } else if let Some(shell) = env.grains.get("shell") {
        opts.push(("shell", shell.clone()));
    }
    opts
}

fn listed(v: &Value) -> Vec<Value> {
    match v {
        Value::Array(a) => a.clone(),
        other => vec![other.clone()],
    }
}

/// A check command's retcode; `fallback` when it could not run.
fn retcode(cmd: &str, opts: &[(&str, Value)], env: &mut Env, fallback: i64) -> i64 {
    let mut kw: Vec<(&str, Value)> = vec![
        ("ignore_retcode", json!(true)),
        ("python_shell", json!(true)),
    ];
    kw.extend(opts.iter().cloned());
    match salt(env, "cmd.retcode", &[json!(cmd)], &kw) {
        Ok(v) => v.as_i64().unwrap_or(fallback),
        Err(_) => fallback,
    }
}

/// A check given as `{fun: ..., args: [...], ...}`: its return.
fn check_function(entry: &Map<String, Value>, env: &mut Env) -> Result<Value, String> {
    let mut entry = entry.clone();
    let fun = entry
        .shift_remove("fun")
        .map(|f| py_str(&f))
        .unwrap_or_default();
    let args = match entry.shift_remove("args") {
        Some(Value::Array(a)) => a,
        _ => Vec::new(),
    };
    let get_return = entry.shift_remove("get_return");
    let kw: Vec<(&str, Value)> = entry.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    let result = salt(env, &fun, &args, &kw).map_err(|e| e.to_string())?;
    Ok(match get_return {
        Some(path) => traverse(&result, &py_str(&path)),
        None => result,
    })
}

fn traverse(v: &Value, path: &str) -> Value {
    let mut cur = v;
    for part in path.split(':') {
        cur = match cur {
            Value::Object(o) => match o.get(part) {
                Some(n) => n,
                None => return Value::Null,
            },
            Value::Array(a) => match part.parse::<usize>().ok().and_then(|i| a.get(i)) {
                Some(n) => n,
                None => return Value::Null,
            },
            _ => return Value::Null,
        };
    }
    cur.clone()
}

/// `_run_check_onlyif`: `(result, comment, skip_watch)`.
pub fn onlyif(v: &Value, opts: &[(&str, Value)], env: &mut Env) -> (bool, String, Option<bool>) {
    let mut state = (false, String::new(), None);
    for entry in listed(v) {
        match &entry {
            Value::String(cmd) => {
                let rc = retcode(cmd, opts, env, 100);
                if rc != 0 && !state.0 {
                    return (true, "onlyif condition is false".into(), Some(true));
                } else if rc == 0 {
                    state = (false, "onlyif condition is true".into(), state.2);
                }
            }
            Value::Object(o) => {
                if !o.contains_key("fun") {
                    return (
                        state.0,
                        format!("no `fun` argument in onlyif: {}", crate::py::repr(&entry)),
                        state.2,
                    );
                }
                let result = check_function(o, env).unwrap_or(Value::Null);
                if !truthy(&result) {
                    return (true, "onlyif condition is false".into(), Some(true));
                }
                state = (false, "onlyif condition is true".into(), state.2);
            }
            _ => {
                return (
                    false,
                    "onlyif execution failed, bad type passed".into(),
                    state.2,
                );
            }
        }
    }
    state
}

/// `_run_check_unless`: `(result, comment, skip_watch)`.
pub fn unless(v: &Value, opts: &[(&str, Value)], env: &mut Env) -> (bool, String, Option<bool>) {
    let mut state = (false, String::new(), None);
    for entry in listed(v) {
        match &entry {
            Value::String(cmd) => {
                if retcode(cmd, opts, env, 0) == 0 {
                    state = (true, "unless condition is true".into(), Some(true));
                } else {
                    return (false, "unless condition is false".into(), None);
                }
            }
            Value::Object(o) => {
                if !o.contains_key("fun") {
                    return (
                        state.0,
                        format!("no `fun` argument in unless: {}", crate::py::repr(&entry)),
                        state.2,
                    );
                }
                let result = check_function(o, env).unwrap_or(Value::Null);
                if truthy(&result) {
                    state = (true, "unless condition is true".into(), Some(true));
                } else {
                    return (false, "unless condition is false".into(), state.2);
                }
            }
            _ => {
                state = (
                    false,
                    "unless condition is false, bad type passed".into(),
                    state.2,
                )
            }
        }
    }
    state
}

/// `cmd.run`: the command through `cmd.run_all`; what it did is the change.
pub fn run(low: &Obj, env: &mut Env) -> Result<Obj, String> {
    let name = name_of(low);
    let mut r = ret(low, json!(false), "");
    if let Some(e) = low.get("env")
        && !e.is_null()
        && !e.is_array()
        && !e.is_object()
    {
        r.insert(
            "comment".into(),
            json!("Invalidly-formatted 'env' parameter. See documentation."),
        );
        return Ok(r);
    }
    if env.test {
        r.insert("result".into(), Value::Null);
        r.insert(
            "comment".into(),
            json!(format!("Command \"{name}\" would have been executed")),
        );
        r.insert("changes".into(), json!({ "cmd": name }));
        return Ok(r);
    }
    let shell = low
        .get("shell")
        .cloned()
        .or_else(|| env.grains.get("shell").cloned());
    let mut kw: Vec<(&str, Value)> = vec![
        ("python_shell", json!(true)),
        ("shell", shell.unwrap_or(Value::Null)),
    ];
    for k in [
        "cwd",
        "runas",
        "env",
        "timeout",
        "success_retcodes",
        "stdin",
        "hide_output",
        "output_loglevel",
    ] {
        if let Some(v) = low.get(k) {
            kw.push((k, v.clone()));
        }
    }
    match salt(env, "cmd.run_all", &[json!(name)], &kw) {
        Ok(all) => {
            let rc = all.get("retcode").and_then(Value::as_i64).unwrap_or(1);
            r.insert("changes".into(), all);
            r.insert("result".into(), json!(rc == 0));
            r.insert("comment".into(), json!(format!("Command \"{name}\" run")));
        }
        Err(e) => {
            r.insert("comment".into(), json!(e.to_string()));
        }
    }
    Ok(r)
}

/// `cmd.wait`: nothing unless watched (then `mod_watch` runs it).
pub fn wait(low: &Obj, _env: &mut Env) -> Result<Obj, String> {
    Ok(ret(low, json!(true), ""))
}

/// `cmd.mod_watch`: a watched `run` or `wait` runs its command.
pub fn mod_watch(low: &Obj, env: &mut Env) -> Result<Obj, String> {
    let sfun = low.get("sfun").map(py_str).unwrap_or_default();
    if matches!(sfun.as_str(), "wait" | "run" | "watch") {
        return run(low, env);
    }
    Ok(ret(
        low,
        json!(false),
        &format!(
            "cmd.{sfun} does not work with the watch requisite, please use cmd.wait or cmd.wait_script"
        ),
    ))
}
