//! Salt's `cmd` states, and the `onlyif`/`unless` checks every state
//! takes: commands run through the `cmd` module (`cmd.run_all`,
//! `cmd.retcode`), under its grants.

use serde_json::{Map, Value, json};

use super::{CallError, Env, name_of, ret, salt};
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

/// A check's outcome, `(result, comment, skip_watch)`, or `Err` with why
/// the grants refused the check: a refused check is no answer either way,
/// so the state fails `Denied` rather than run or be skipped.
pub type Checked = Result<(bool, String, Option<bool>), Refused>;

/// Why the grants refused a check, as the host said it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused(pub String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A check command's retcode; `fallback` when it raised (Salt's
/// `CommandExecutionError`); `Err` when the grants refused it.
fn retcode(
    cmd: &str,
    opts: &[(&str, Value)],
    env: &mut Env,
    fallback: i64,
) -> Result<i64, Refused> {
    let mut kw: Vec<(&str, Value)> = vec![
        ("ignore_retcode", json!(true)),
        ("python_shell", json!(true)),
    ];
    kw.extend(opts.iter().cloned());
    match salt(env, "cmd.retcode", &[json!(cmd)], &kw) {
        Ok(v) => Ok(v.as_i64().unwrap_or(fallback)),
        Err(CallError::Denied(why)) => Err(Refused(why)),
        Err(CallError::Failed(_)) => Ok(fallback),
    }
}

/// A check function's return: `null` when it raised; `Err` when the
/// grants refused it.
fn check_return(entry: &Map<String, Value>, env: &mut Env) -> Result<Value, Refused> {
    match check_function(entry, env) {
        Ok(v) => Ok(v),
        Err(CallError::Denied(why)) => Err(Refused(why)),
        Err(CallError::Failed(_)) => Ok(Value::Null),
    }
}

/// A check given as `{fun: ..., args: [...], ...}`: its return.
fn check_function(entry: &Map<String, Value>, env: &mut Env) -> Result<Value, CallError> {
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
    let result = salt(env, &fun, &args, &kw)?;
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

/// `_run_check_onlyif`: `(result, comment, skip_watch)`; `Err` when the
/// grants refused a check.
pub fn onlyif(v: &Value, opts: &[(&str, Value)], env: &mut Env) -> Checked {
    let mut state = (false, String::new(), None);
    for entry in listed(v) {
        match &entry {
            Value::String(cmd) => {
                let rc = retcode(cmd, opts, env, 100)?;
                if rc != 0 && !state.0 {
                    return Ok((true, "onlyif condition is false".into(), Some(true)));
                } else if rc == 0 {
                    state = (false, "onlyif condition is true".into(), state.2);
                }
            }
            Value::Object(o) => {
                if !o.contains_key("fun") {
                    return Ok((
                        state.0,
                        format!("no `fun` argument in onlyif: {}", crate::py::repr(&entry)),
                        state.2,
                    ));
                }
                let result = check_return(o, env)?;
                if !truthy(&result) {
                    return Ok((true, "onlyif condition is false".into(), Some(true)));
                }
                state = (false, "onlyif condition is true".into(), state.2);
            }
            _ => {
                return Ok((
                    false,
                    "onlyif execution failed, bad type passed".into(),
                    state.2,
                ));
            }
        }
    }
    Ok(state)
}

/// `_run_check_unless`: `(result, comment, skip_watch)`; `Err` when the
/// grants refused a check.
pub fn unless(v: &Value, opts: &[(&str, Value)], env: &mut Env) -> Checked {
    let mut state = (false, String::new(), None);
    for entry in listed(v) {
        match &entry {
            Value::String(cmd) => {
                if retcode(cmd, opts, env, 0)? == 0 {
                    state = (true, "unless condition is true".into(), Some(true));
                } else {
                    return Ok((false, "unless condition is false".into(), None));
                }
            }
            Value::Object(o) => {
                if !o.contains_key("fun") {
                    return Ok((
                        state.0,
                        format!("no `fun` argument in unless: {}", crate::py::repr(&entry)),
                        state.2,
                    ));
                }
                let result = check_return(o, env)?;
                if truthy(&result) {
                    state = (true, "unless condition is true".into(), Some(true));
                } else {
                    return Ok((false, "unless condition is false".into(), state.2));
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
    Ok(state)
}

/// Salt's check of `env`: a list, a dict, or none at all.
fn malformed_env(low: &Obj) -> bool {
    low.get("env")
        .is_some_and(|e| !e.is_null() && !e.is_array() && !e.is_object())
}

/// `cmd.run`: the command through `cmd.run_all`; what it did is the change.
pub fn run(low: &Obj, env: &mut Env) -> Result<Obj, String> {
    let name = name_of(low);
    let mut r = ret(low, json!(false), "");
    if malformed_env(low) {
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

/// `cmd.wait` and `cmd.wait_script`: nothing unless watched (then
/// `mod_watch` runs them).
pub fn wait(low: &Obj, _env: &mut Env) -> Result<Obj, String> {
    Ok(ret(low, json!(true), ""))
}

/// The chunk's keys that are the state's own (Salt's named parameters of
/// `cmd.script`, and the state system's keywords): not handed on to the
/// `cmd.script` function as Salt hands on the rest of `**kwargs`.
const SCRIPT_OWN: &[&str] = &[
    "name",
    "source",
    "template",
    "cwd",
    "runas",
    "password",
    "shell",
    "env",
    "stateful",
    "timeout",
    "use_vt",
    "output_loglevel",
    "hide_output",
    "defaults",
    "context",
    "success_retcodes",
    "success_stdout",
    "success_stderr",
    "state",
    "fun",
    "__id__",
    "__sls__",
    "__env__",
    "__run_num__",
    "order",
    "sfun",
    "__watch__",
    "__reqs__",
    "__prerequired__",
    "__prereq__",
    "unless",
    "onlyif",
    "creates",
    "check_cmd",
    "fail_hard",
    "failhard",
    "reload_modules",
    "reload_grains",
    "reload_pillar",
    "saltenv",
    "require",
    "require_in",
    "require_any",
    "watch",
    "watch_in",
    "watch_any",
    "onchanges",
    "onchanges_in",
    "onchanges_any",
    "onfail",
    "onfail_in",
    "onfail_any",
    "onfail_all",
    "prereq",
    "prereq_in",
    "use",
    "use_in",
    "listen",
    "listen_in",
    "names",
    "retry",
    "parallel",
    "cmd_opts_exclude",
    "__pub_fun",
    "__pub_jid",
    "__pub_pid",
    "__pub_tgt",
];

/// What the `cmd.script` state hands the `cmd.script` function, as Salt's
/// `cmd_kwargs`: the chunk's own extra keywords, then the state's options
/// (`shell` from the grains when not given, `defaults` updated by
/// `context`).
fn script_kwargs<'a>(low: &'a Obj, env: &Env, saltenv: &str) -> Vec<(&'a str, Value)> {
    // `defaults` updated by `context`: the template's context.
    let mut context = Map::new();
    for k in ["defaults", "context"] {
        if let Some(Value::Object(o)) = low.get(k) {
            context.extend(o.clone());
        }
    }
    let shell = low
        .get("shell")
        .filter(|v| truthy(v))
        .cloned()
        .or_else(|| env.grains.get("shell").cloned())
        .unwrap_or(Value::Null);
    let mut kw: Vec<(&str, Value)> = low
        .iter()
        .filter(|(k, _)| !SCRIPT_OWN.contains(&k.as_str()) && !k.starts_with("__"))
        .map(|(k, v)| (k.as_str(), v.clone()))
        .collect();
    let opt = |k: &str| low.get(k).cloned().unwrap_or(Value::Null);
    kw.extend([
        ("runas", opt("runas")),
        ("password", opt("password")),
        ("shell", shell),
        ("env", opt("env")),
        ("cwd", opt("cwd")),
        ("template", opt("template")),
        ("timeout", opt("timeout")),
        (
            "output_loglevel",
            low.get("output_loglevel")
                .cloned()
                .unwrap_or_else(|| json!("debug")),
        ),
        (
            "hide_output",
            low.get("hide_output").cloned().unwrap_or(json!(false)),
        ),
        ("use_vt", low.get("use_vt").cloned().unwrap_or(json!(false))),
        ("context", Value::Object(context)),
        ("saltenv", json!(saltenv)),
        ("success_retcodes", opt("success_retcodes")),
        ("success_stdout", opt("success_stdout")),
        ("success_stderr", opt("success_stderr")),
    ]);
    kw
}

/// `cmd.script`: the `salt://` script (`source`, else `name`) run by the
/// `cmd.script` function, with the words after the first of `name` as its
/// arguments unless `args` says otherwise; what it did is the change.
pub fn script(low: &Obj, env: &mut Env) -> Result<Obj, String> {
    let name = name_of(low);
    let mut r = ret(low, json!(false), "");
    if malformed_env(low) {
        r.insert(
            "comment".into(),
            json!("Invalidly-formatted 'env' parameter. See documentation."),
        );
        return Ok(r);
    }
    let given = |k: &str| low.get(k).filter(|v| !v.is_null());
    for k in ["context", "defaults"] {
        if let Some(v) = low.get(k)
            && truthy(v)
            && !v.is_object()
        {
            r.insert(
                "comment".into(),
                json!(format!(
                    "Invalidly-formatted '{k}' parameter. Must be formed as a dict."
                )),
            );
            return Ok(r);
        }
    }
    let saltenv = low
        .get("__env__")
        .map(py_str)
        .unwrap_or_else(|| "base".into());
    let mut kw = script_kwargs(low, env, &saltenv);
    let source = given("source").map(py_str).unwrap_or_else(|| name.clone());
    let has_args = kw.iter().any(|(k, v)| *k == "args" && truthy(v));
    if !has_args && name.split_whitespace().count() > 1 {
        let rest = name.split_once(' ').map(|(_, r)| r).unwrap_or_default();
        kw.retain(|(k, _)| *k != "args");
        kw.push(("args", json!(rest)));
    }
    if env.test {
        r.insert("result".into(), Value::Null);
        r.insert(
            "comment".into(),
            json!(format!("Command '{name}' would have been executed")),
        );
        return Ok(r);
    }
    kw.push(("python_shell", json!(true)));
    let all = match salt(env, "cmd.script", &[json!(source)], &kw) {
        Ok(all) => all,
        Err(e) => {
            r.insert("comment".into(), json!(e.to_string()));
            return Ok(r);
        }
    };
    let failed = match low.get("retcode") {
        Some(v) if truthy(v) => truthy(&all),
        _ => all.get("retcode").is_some_and(truthy),
    };
    let cache_error = all.get("cache_error").is_some_and(truthy);
    r.insert("changes".into(), all);
    r.insert("result".into(), json!(!failed));
    let comment = if cache_error {
        format!("Unable to cache script {source} from saltenv '{saltenv}'")
    } else {
        format!("Command '{name}' run")
    };
    r.insert("comment".into(), json!(comment));
    Ok(r)
}

/// `cmd.mod_watch`: a watched `run` or `wait` runs its command.
pub fn mod_watch(low: &Obj, env: &mut Env) -> Result<Obj, String> {
    let sfun = low.get("sfun").map(py_str).unwrap_or_default();
    if matches!(sfun.as_str(), "wait" | "run" | "watch") {
        return run(low, env);
    }
    if matches!(sfun.as_str(), "wait_script" | "script") {
        return script(low, env);
    }
    Ok(ret(
        low,
        json!(false),
        &format!(
            "cmd.{sfun} does not work with the watch requisite, please use cmd.wait or cmd.wait_script"
        ),
    ))
}
