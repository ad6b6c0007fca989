//! The state modules: each state function decides what should change and
//! makes the change only through execution functions of the module whose
//! grant allows it (`host::call`), so the state plugin itself can change
//! nothing and a state whose module lacks the grant fails `Denied`.

mod cmd;
mod file;
mod group;
mod pkg;
mod service;
mod test;
mod user;

use maid_sdk::host::{self, Called};
use serde_json::{Map, Value, json};

use crate::compile::Obj;
use crate::py::{py_str, truthy};

/// What a state function sees besides its arguments.
pub struct Env {
    /// `test=True`: predict, change nothing.
    pub test: bool,
    pub grains: Map<String, Value>,
    /// Execution functions called, for the run's audit: `(function,
    /// retcode)` in order.
    pub calls: Vec<(String, i32)>,
    /// The state modules whose `mod_init` has run in this run.
    pub mod_init: Vec<String>,
    /// Salt's `pkg_refresh` rtag: the next `pkg` state that does not say
    /// `refresh` refreshes the package lists (`pkg`'s `mod_init` sets it,
    /// a refresh clears it).
    pub pkg_refresh: bool,
}

/// A state function: its required arguments (beyond `name`) and body.
struct StateFn {
    required: &'static [&'static str],
    run: fn(&Obj, &mut Env) -> Result<Obj, String>,
}

fn lookup(state: &str, fun: &str) -> Option<StateFn> {
    let run: fn(&Obj, &mut Env) -> Result<Obj, String> = match (state, fun) {
        ("test", "nop") => test::nop,
        ("test", "succeed_without_changes") => test::succeed_without_changes,
        ("test", "succeed_with_changes") => test::succeed_with_changes,
        ("test", "fail_without_changes") => test::fail_without_changes,
        ("test", "fail_with_changes") => test::fail_with_changes,
        ("test", "configurable_test_state") => test::configurable,
        ("test", "show_notification") => test::show_notification,
        ("test", "mod_watch") => test::mod_watch,
        ("cmd", "run") => cmd::run,
        ("cmd", "wait") => cmd::wait,
        ("cmd", "wait_script") => cmd::wait,
        ("cmd", "script") => cmd::script,
        ("cmd", "mod_watch") => cmd::mod_watch,
        ("service", "running") => service::running,
        ("service", "dead") => service::dead,
        ("service", "enabled") => service::enabled,
        ("service", "disabled") => service::disabled,
        ("service", "mod_watch") => service::mod_watch,
        ("file", "managed") => file::managed,
        ("file", "directory") => file::directory,
        ("file", "absent") => file::absent,
        ("file", "touch") => file::touch,
        ("file", "append") => file::append,
        ("pkg", "installed") => pkg::installed,
        ("pkg", "latest") => pkg::latest,
        ("pkg", "removed") => pkg::removed,
        ("pkg", "purged") => pkg::purged,
        ("pkg", "mod_watch") => pkg::mod_watch,
        ("user", "present") => user::present,
        ("user", "absent") => user::absent,
        ("group", "present") => group::present,
        ("group", "absent") => group::absent,
        ("file", "symlink") => {
            return Some(StateFn {
                required: &["target"],
                run: file::symlink,
            });
        }
        ("file", "replace") => {
            return Some(StateFn {
                required: &["pattern", "repl"],
                run: file::replace,
            });
        }
        ("file", "recurse") => {
            return Some(StateFn {
                required: &["source"],
                run: file::recurse,
            });
        }
        _ => return None,
    };
    Some(StateFn { required: &[], run })
}

/// States with a `mod_watch` (others turn `watch` into `require`).
pub fn has_mod_watch(state: &str) -> bool {
    matches!(state, "test" | "cmd" | "pkg" | "service")
}

/// `State._mod_init`: a state module's `mod_init`, at the first chunk of
/// that module in a run whose function exists (and again at the next
/// while it says no).
pub fn mod_init(low: &Obj, env: &mut Env) {
    let state = low.get("state").map(py_str).unwrap_or_default();
    let fun = low.get("fun").map(py_str).unwrap_or_default();
    if env.mod_init.contains(&state) || lookup(&state, &fun).is_none() {
        return;
    }
    let done = match state.as_str() {
        "pkg" => pkg::mod_init(low, env),
        _ => return,
    };
    if done {
        env.mod_init.push(state);
    }
}

/// States that run `unless`/`onlyif`/`creates` themselves.
pub fn has_mod_run_check(_state: &str) -> bool {
    false
}

/// `State.verify_data`: why a chunk cannot be called, in Salt's words.
pub fn verify(low: &Obj) -> Vec<String> {
    let mut errors = Vec::new();
    for key in ["state", "fun", "name"] {
        if !low.contains_key(key) {
            errors.push(format!("Missing \"{key}\" data"));
        }
    }
    if let Some(name) = low.get("name")
        && truthy(name)
        && !name.is_string()
    {
        let sls = low
            .get("__sls__")
            .map(|s| format!("in SLS '{}' ", py_str(s)))
            .unwrap_or_default();
        errors.push(format!(
            "ID '{}' {sls}is not formed as a string, but is a {}",
            py_str(name),
            type_name(name)
        ));
    }
    if !errors.is_empty() {
        return errors;
    }
    let state = py_str(&low["state"]);
    let fun = py_str(&low["fun"]);
    let full = format!("{state}.{fun}");
    match lookup(&state, &fun) {
        None => match low.get("__sls__") {
            Some(sls) => {
                errors.push(format!(
                    "State '{full}' was not found in SLS '{}'",
                    py_str(sls)
                ));
                errors.push(format!("Reason: '{full}' is not available."));
            }
            None => errors.push(format!("Specified state '{full}' was not found")),
        },
        Some(f) => {
            for arg in f.required {
                if !low.contains_key(*arg) {
                    errors.push(format!("Missing parameter {arg} for state {full}"));
                }
            }
        }
    }
    errors
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
        Value::Null => "NoneType",
        Value::String(_) => "str",
    }
}

/// Run the chunk's state function.
pub fn call(low: &Obj, env: &mut Env) -> Result<Obj, String> {
    let state = low.get("state").map(py_str).unwrap_or_default();
    let fun = low.get("fun").map(py_str).unwrap_or_default();
    let f = lookup(&state, &fun).ok_or_else(|| format!("{state}.{fun} is not available"))?;
    (f.run)(low, env)
}

/// The chunk's `name`, as text.
pub fn name_of(low: &Obj) -> String {
    low.get("name").map(py_str).unwrap_or_default()
}

/// A fresh return: `{name, changes, result, comment}`.
pub fn ret(low: &Obj, result: Value, comment: &str) -> Obj {
    let mut r = Obj::new();
    r.insert(
        "name".into(),
        low.get("name").cloned().unwrap_or(Value::Null),
    );
    r.insert("changes".into(), json!({}));
    r.insert("result".into(), result);
    r.insert("comment".into(), json!(comment));
    r
}

/// Why an execution function did not return.
#[derive(Debug)]
pub enum CallError {
    /// The grants refused it (Salt has no such case: maid's `Denied`).
    Denied(String),
    /// It raised (Salt's `CommandExecutionError` and kin).
    Failed(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Denied(m) => write!(f, "Denied: {m}"),
            CallError::Failed(m) => f.write_str(m),
        }
    }
}

/// Why a state stopped before its own return.
pub enum Stop {
    /// The grants refused a call (maid's own case): fail, change nothing.
    Denied(String),
    /// An execution function raised (Salt's `CommandExecutionError`), and
    /// the state did not catch it where it called it: a caller further up
    /// may (`pkg.removed` does).
    Failed(String),
    /// Another exception, which Salt's state does not catch.
    Raised(String),
}

impl From<CallError> for Stop {
    fn from(e: CallError) -> Self {
        match e {
            CallError::Denied(m) => Stop::Denied(m),
            CallError::Failed(m) => Stop::Failed(m),
        }
    }
}

pub type Step<T> = Result<T, Stop>;

/// A state's outcome as the engine takes it: a refusal is a failed
/// return saying `Denied:`, an uncaught raise is an exception.
pub fn finish(low: &Obj, out: Step<Obj>) -> Result<Obj, String> {
    match out {
        Ok(r) => Ok(r),
        Err(Stop::Denied(m)) => Ok(ret(low, json!(false), &format!("Denied: {m}"))),
        Err(Stop::Failed(m) | Stop::Raised(m)) => Err(m),
    }
}

/// `__salt__[fun](*args, **kwargs)`: an execution function, under its
/// own module's grants.
pub fn salt(
    env: &mut Env,
    fun: &str,
    args: &[Value],
    kwargs: &[(&str, Value)],
) -> Result<Value, CallError> {
    let kw: Map<String, Value> = kwargs
        .iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    match host::call(fun, args, &kw) {
        Ok(Called::Returned { ret, retcode }) => {
            env.calls.push((fun.to_string(), retcode));
            Ok(ret)
        }
        Ok(Called::Failed {
            message, retcode, ..
        }) => {
            env.calls.push((fun.to_string(), retcode));
            Err(CallError::Failed(message))
        }
        Err(e) => {
            env.calls.push((fun.to_string(), 77));
            let m = e.to_string();
            let m = m.strip_prefix("Denied: ").unwrap_or(&m).to_string();
            Err(CallError::Denied(m))
        }
    }
}

/// `State._run_check`: `onlyif`, `unless` and `creates`, each through
/// `cmd.retcode` or the function it names; the keys to merge into the
/// return (`result` True: the state is not run). `Err` when the grants
/// refused a check: that is no answer, so the state neither runs nor is
/// skipped, but fails `Denied` (maid's own case; Salt's checks are never
/// refused).
pub fn run_check(low: &Obj, env: &mut Env) -> Result<Obj, cmd::Refused> {
    let mut ret = Obj::new();
    ret.insert("result".into(), json!(false));
    ret.insert("comment".into(), json!([]));
    for key in ["__sls__", "__id__", "name"] {
        ret.insert(key.into(), low.get(key).cloned().unwrap_or(Value::Null));
    }
    let opts = cmd::check_opts(low, env);
    let mut comments = Vec::new();
    let mut skip_watch: Option<bool> = None;
    if let Some(onlyif) = low.get("onlyif") {
        let (result, comment, skip) = cmd::onlyif(onlyif, &opts, env)?;
        ret.insert("result".into(), json!(result));
        comments.push(json!(comment));
        if skip.is_some() {
            skip_watch = skip;
        }
    }
    if let Some(unless) = low.get("unless") {
        let (result, comment, skip) = cmd::unless(unless, &opts, env)?;
        let before = ret.get("result").is_some_and(truthy);
        ret.insert("result".into(), json!(result || before));
        comments.push(json!(comment));
        if let Some(s) = skip {
            skip_watch = Some(s || skip_watch.unwrap_or(false));
        }
    }
    if let Some(creates) = low.get("creates") {
        let (result, comment, skip) = file::creates(creates, env)?;
        let before = ret.get("result").is_some_and(truthy);
        ret.insert("result".into(), json!(result || before));
        comments.push(json!(comment));
        if let Some(s) = skip {
            skip_watch = Some(s || skip_watch.unwrap_or(false));
        }
    }
    ret.insert("comment".into(), Value::Array(comments));
    if let Some(s) = skip_watch {
        ret.insert("skip_watch".into(), json!(s));
    }
    Ok(ret)
}
