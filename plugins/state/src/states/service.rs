//! Salt's `service` states (`running`, `dead`, `enabled`, `disabled` and
//! `mod_watch`), through the `service` module's functions: systemd's,
//! whose `systemctl` runs under `[plugins.service]`'s grants. A refused
//! call makes the state fail `Denied:`; what Salt's state catches
//! (`CommandExecutionError` from `service.available`, `start`, `enable`
//! and the function a watch runs) is its comment, as in Salt.
//!
//! maid's `service` module is systemd's alone, so the arguments Salt
//! passes only where systemd booted the host (`no_block`) are always
//! passed, and Salt's warning for other hosts never arises. Masks are not
//! managed: `unmask` or `unmask_runtime` where Salt would unmask fails the
//! state, saying so, before it does anything.

use std::time::Duration;

use serde_json::{Map, Value, json};

use super::{CallError, Env, Step, Stop, finish, name_of, ret, salt, type_name};
use crate::compile::Obj;
use crate::py::{py_str, truthy};

/// The arguments of `_enable`/`_disable`'s `**kwargs` that maid's
/// `service.enable`, `enabled` and `disable` act on.
const PASSED: &[&str] = &["no_block", "root"];

/// `__salt__['service.FUN'](name, **kwargs)`; a raise Salt's state does
/// not catch stops it, as a refusal does.
fn ask(env: &mut Env, fun: &str, name: &str, kwargs: &[(&str, Value)]) -> Step<Value> {
    Ok(salt(
        env,
        &format!("service.{fun}"),
        &[json!(name)],
        kwargs,
    )?)
}

/// The same inside Salt's `try`: a raise is its `strerror`.
fn caught(
    env: &mut Env,
    fun: &str,
    name: &str,
    kwargs: &[(&str, Value)],
) -> Step<Result<Value, String>> {
    match salt(env, &format!("service.{fun}"), &[json!(name)], kwargs) {
        Ok(v) => Ok(Ok(v)),
        Err(CallError::Denied(m)) => Err(Stop::Denied(m)),
        Err(CallError::Failed(m)) => Ok(Err(m)),
    }
}

/// The chunk's arguments among `keys`, to pass on.
fn passed<'a>(low: &Obj, keys: &[&'a str]) -> Vec<(&'a str, Value)> {
    keys.iter()
        .filter_map(|k| low.get(*k).map(|v| (*k, v.clone())))
        .collect()
}

/// `_get_systemd_only(func, kwargs)` on a host systemd booted: the
/// chunk's `no_block` for a function that takes it (`status` takes none).
fn systemd_only(low: &Obj, fun: &str) -> Vec<(&'static str, Value)> {
    if fun == "status" {
        return Vec::new();
    }
    passed(low, &["no_block"])
}

/// `_available`, inside the states' `try`: `Err` with the raise's words.
fn available(env: &mut Env, name: &str) -> Step<Result<bool, String>> {
    Ok(caught(env, "available", name, &[])?.map(|v| truthy(&v)))
}

fn not_available(name: &str) -> String {
    format!("The named service {name} is not available")
}

/// `service.status(name, sig)`.
fn status(env: &mut Env, low: &Obj, name: &str) -> Step<bool> {
    let sig = low.get("sig").cloned().unwrap_or(Value::Null);
    Ok(truthy(&ask(env, "status", name, &[("sig", sig)])?))
}

fn is_enabled(env: &mut Env, name: &str) -> Step<bool> {
    Ok(truthy(&ask(env, "enabled", name, &[])?))
}

fn set(r: &mut Obj, result: Value, comment: impl Into<String>) {
    r.insert("result".into(), result);
    r.insert("comment".into(), json!(comment.into()));
}

fn comment(r: &mut Obj, comment: impl Into<String>) {
    r.insert("comment".into(), json!(comment.into()));
}

/// `enable`, a text made a bool (`is_true`); only True and False act.
fn enable_arg(low: &Obj) -> Option<bool> {
    match low.get("enable") {
        Some(Value::Bool(b)) => Some(*b),
        Some(s @ Value::String(_)) => Some(maid_sdk::salt::is_true(s)),
        _ => None,
    }
}

/// Salt's `_enabled_used_error` (with `typo`), and maid's refusal of
/// `unmask` where Salt would unmask (with `unmask`): the return of a
/// state that does nothing, or None.
fn refused(low: &Obj, typo: bool, unmask: bool) -> Option<Obj> {
    let name = name_of(low);
    if typo && low.contains_key("enabled") {
        return Some(ret(
            low,
            json!(false),
            &format!(
                "Service {name} uses non-existent option \"enabled\".  \
                 Perhaps \"enable\" option was intended?"
            ),
        ));
    }
    let key = ["unmask", "unmask_runtime"]
        .into_iter()
        .find(|k| unmask && low.get(*k).is_some_and(truthy))?;
    Some(ret(
        low,
        json!(false),
        &format!("The '{key}' argument is not supported by maid: it does not manage masks"),
    ))
}

/// `if init_delay: time.sleep(init_delay)`.
fn delay(v: Option<&Value>) -> Step<()> {
    let Some(v) = v.filter(|v| truthy(v)) else {
        return Ok(());
    };
    let secs = match v {
        Value::Bool(_) => 1.0,
        Value::Number(n) => n.as_f64().unwrap_or(0.0),
        other => {
            return Err(Stop::Raised(format!(
                "TypeError: '{}' object cannot be interpreted as an integer",
                type_name(other)
            )));
        }
    };
    if !(secs >= 0.0 && secs.is_finite()) {
        return Err(Stop::Raised(
            "ValueError: sleep length must be non-negative".into(),
        ));
    }
    std::thread::sleep(Duration::from_secs_f64(secs));
    Ok(())
}

/// `_enable(name, started, result, **kwargs)`: the keys it sets, for the
/// state to merge into its return. `started`: Some(true) running, None
/// in the desired state, Some(false) dead.
fn enable(low: &Obj, env: &mut Env, started: Option<bool>, result: Value) -> Step<Obj> {
    let name = name_of(low);
    let mut r = Obj::new();
    match available(env, &name)? {
        Ok(true) => {}
        Ok(false) => return Ok(with(json!(false), not_available(&name))),
        Err(m) => return Ok(with(json!(false), m)),
    }
    r.insert("result".into(), result);
    let kw = passed(low, PASSED);
    let before = truthy(&ask(env, "enabled", &name, &kw)?);
    if before {
        if started.is_none() {
            r.insert("changes".into(), json!({}));
        }
        let how = said(started);
        comment(
            &mut r,
            format!("Service {name} is already enabled, and {how}"),
        );
        return Ok(r);
    }
    if env.test {
        set(
            &mut r,
            Value::Null,
            format!("Service {name} set to be enabled"),
        );
        return Ok(r);
    }
    let error = match caught(env, "enable", &name, &kw)? {
        Ok(v) if truthy(&v) => {
            let after = truthy(&ask(env, "enabled", &name, &kw)?);
            r.insert("changes".into(), toggled(&name, before != after));
            let how = said(started);
            comment(
                &mut r,
                format!("Service {name} has been enabled, and {how}"),
            );
            return Ok(r);
        }
        Ok(_) => String::new(),
        Err(m) => m,
    };
    let mut words = match started {
        Some(true) => format!(
            "Failed when setting service {name} to start at boot, but the service is running"
        ),
        None => format!(
            "Failed when setting service {name} to start at boot, but the service was already running"
        ),
        Some(false) => {
            format!("Failed when setting service {name} to start at boot, and the service is dead")
        }
    };
    if !error.is_empty() {
        words.push_str(&format!(". Additional information follows:\n\n{error}"));
    }
    set(&mut r, json!(false), words);
    Ok(r)
}

/// `_disable(name, started, result, **kwargs)`, as [`enable`].
fn disable(low: &Obj, env: &mut Env, started: Option<bool>, result: Value) -> Step<Obj> {
    let name = name_of(low);
    let mut r = Obj::new();
    match available(env, &name)? {
        Ok(true) => {}
        Ok(false) => return Ok(with(json!(true), not_available(&name))),
        Err(m) => return Ok(with(json!(false), m)),
    }
    r.insert("result".into(), result);
    let before = truthy(&ask(env, "disabled", &name, &[])?);
    if before {
        if started.is_none() {
            r.insert("changes".into(), json!({}));
        }
        let how = said(started);
        comment(
            &mut r,
            format!("Service {name} is already disabled, and {how}"),
        );
        return Ok(r);
    }
    if env.test {
        set(
            &mut r,
            Value::Null,
            format!("Service {name} set to be disabled"),
        );
        return Ok(r);
    }
    if truthy(&ask(env, "disable", &name, &passed(low, PASSED))?) {
        let after = truthy(&ask(env, "disabled", &name, &[])?);
        r.insert("changes".into(), toggled(&name, before != after));
        let how = said(started);
        comment(
            &mut r,
            format!("Service {name} has been disabled, and {how}"),
        );
        return Ok(r);
    }
    let words = match started {
        Some(true) => {
            format!("Failed when setting service {name} to not start at boot, and is running")
        }
        None => format!(
            "Failed when setting service {name} to not start at boot, but the service was already running"
        ),
        Some(false) => format!(
            "Failed when setting service {name} to not start at boot, and the service is dead"
        ),
    };
    set(&mut r, json!(false), words);
    Ok(r)
}

/// `{result, comment}`, to merge.
fn with(result: Value, words: String) -> Obj {
    let mut r = Obj::new();
    set(&mut r, result, words);
    r
}

/// `{name: True}` when the toggle showed, else `{}`.
fn toggled(name: &str, changed: bool) -> Value {
    let mut changes = Map::new();
    if changed {
        changes.insert(name.to_string(), json!(true));
    }
    Value::Object(changes)
}

/// `is running` / `is in the desired state` / `is dead`, as `started`
/// says.
fn said(started: Option<bool>) -> &'static str {
    match started {
        Some(true) => "is running",
        None => "is in the desired state",
        Some(false) => "is dead",
    }
}

/// `ret.update(_enable(...))` for `enable: True`, `_disable` for False.
fn toggle(low: &Obj, env: &mut Env, r: &mut Obj, started: Option<bool>, result: Value) -> Step<()> {
    let keys = match enable_arg(low) {
        Some(true) => enable(low, env, started, result)?,
        Some(false) => disable(low, env, started, result)?,
        None => return Ok(()),
    };
    r.extend(keys);
    Ok(())
}

/// The state's return when the service is not there, or `available`
/// raised; `verb` for test=True's prediction; `missing_ok`: `dead`'s
/// success.
fn unavailable(low: &Obj, env: &mut Env, verb: &str, missing_ok: bool) -> Step<Option<Obj>> {
    let name = name_of(low);
    let mut r = ret(low, json!(true), "");
    match available(env, &name)? {
        Ok(true) => return Ok(None),
        Ok(false) if env.test => set(
            &mut r,
            Value::Null,
            format!(
                "Service {name} not present; if created in this state run, it would have been {verb}"
            ),
        ),
        Ok(false) => set(&mut r, json!(missing_ok), not_available(&name)),
        Err(m) => set(&mut r, json!(false), m),
    }
    Ok(Some(r))
}

/// `service.running`: the service started (and enabled or disabled at
/// boot with `enable`).
pub fn running(low: &Obj, env: &mut Env) -> Result<Obj, String> {
    if let Some(r) = refused(low, true, true) {
        return Ok(r);
    }
    finish(low, start(low, env))
}

fn start(low: &Obj, env: &mut Env) -> Step<Obj> {
    if let Some(r) = unavailable(low, env, "started", false)? {
        return Ok(r);
    }
    let name = name_of(low);
    let mut r = ret(low, json!(true), "");
    let before = status(env, low, &name)?;
    let before_enable = is_enabled(env, &name)?;
    if before {
        comment(&mut r, format!("The service {name} is already running"));
        if enable_arg(low) == Some(!before_enable) {
            toggle(low, env, &mut r, None, json!(true))?;
        }
        return Ok(r);
    }
    if env.test {
        set(
            &mut r,
            Value::Null,
            format!("Service {name} is set to start"),
        );
        return Ok(r);
    }
    match caught(env, "start", &name, &systemd_only(low, "start"))? {
        Err(m) => {
            set(&mut r, json!(false), m);
            return Ok(r);
        }
        Ok(v) if !truthy(&v) => {
            set(
                &mut r,
                json!(false),
                format!("Service {name} failed to start"),
            );
            toggle(low, env, &mut r, Some(false), json!(false))?;
            return Ok(r);
        }
        Ok(_) => {}
    }
    let init_delay = low.get("init_delay");
    delay(init_delay)?;
    let after = status(env, low, &name)?;
    let after_enable = is_enabled(env, &name)?;
    record(
        &mut r,
        &name,
        before != after || before_enable != after_enable,
        after,
    );
    if after {
        comment(&mut r, format!("Started service {name}"));
    } else {
        set(
            &mut r,
            json!(false),
            format!("Service {name} failed to start"),
        );
    }
    toggle(low, env, &mut r, Some(after), json!(after))?;
    if let Some(d) = init_delay.filter(|d| truthy(d)) {
        let said = py_str(&r["comment"]);
        comment(
            &mut r,
            format!("{said}\nDelayed return for {} seconds", py_str(d)),
        );
    }
    Ok(r)
}

/// "only force a change state if we have explicitly detected them":
/// `{name: status}` when something toggled and nothing else changed.
fn record(r: &mut Obj, name: &str, toggled: bool, after: bool) {
    if toggled && !r.get("changes").is_some_and(truthy) {
        r.insert("changes".into(), json!({ name: after }));
    }
}

/// `service.dead`: the service stopped (and enabled or disabled at boot
/// with `enable`); a service that is not there is dead enough.
pub fn dead(low: &Obj, env: &mut Env) -> Result<Obj, String> {
    // Stopping takes no `unmask`; enabling does.
    if let Some(r) = refused(low, true, enable_arg(low) == Some(true)) {
        return Ok(r);
    }
    finish(low, kill(low, env))
}

fn kill(low: &Obj, env: &mut Env) -> Step<Obj> {
    if let Some(r) = unavailable(low, env, "stopped", true)? {
        return Ok(r);
    }
    let name = name_of(low);
    let mut r = ret(low, json!(true), "");
    let before = status(env, low, &name)?;
    let before_enable = is_enabled(env, &name)?;
    if !before {
        comment(&mut r, format!("The service {name} is already dead"));
        if enable_arg(low) == Some(!before_enable) {
            toggle(low, env, &mut r, None, json!(true))?;
        }
        return Ok(r);
    }
    if env.test {
        set(
            &mut r,
            Value::Null,
            format!("Service {name} is set to be killed"),
        );
        return Ok(r);
    }
    if !truthy(&ask(env, "stop", &name, &systemd_only(low, "stop"))?) {
        set(
            &mut r,
            json!(false),
            format!("Service {name} failed to die"),
        );
        toggle(low, env, &mut r, Some(true), json!(false))?;
        return Ok(r);
    }
    delay(low.get("init_delay"))?;
    let after = status(env, low, &name)?;
    let after_enable = is_enabled(env, &name)?;
    record(
        &mut r,
        &name,
        before != after || before_enable != after_enable,
        after,
    );
    if after {
        set(
            &mut r,
            json!(false),
            format!("Service {name} failed to die"),
        );
    } else {
        comment(&mut r, format!("Service {name} was killed"));
    }
    toggle(low, env, &mut r, Some(after), json!(!after))?;
    Ok(r)
}

/// `service.enabled`: started at boot, whether running or not.
pub fn enabled(low: &Obj, env: &mut Env) -> Result<Obj, String> {
    if let Some(r) = refused(low, false, true) {
        return Ok(r);
    }
    let name = name_of(low);
    let out = enable(low, env, None, json!(true)).map(|keys| {
        let mut r = ret(low, json!(true), "");
        r.extend(keys);
        if env.test && r["comment"] == json!(not_available(&name)) {
            set(
                &mut r,
                Value::Null,
                format!(
                    "Service {name} not present; if created in this state run, it would have been enabled"
                ),
            );
        }
        r
    });
    finish(low, out)
}

/// `service.disabled`: not started at boot, whether running or not.
pub fn disabled(low: &Obj, env: &mut Env) -> Result<Obj, String> {
    let out = disable(low, env, None, json!(true)).map(|keys| {
        let mut r = ret(low, json!(true), "");
        r.extend(keys);
        r
    });
    finish(low, out)
}

/// `service.mod_watch`: a watched `running` service restarted (reloaded
/// with `reload`, force-reloaded with `force` too), or started when it
/// is not running; a watched `dead` one stopped.
pub fn mod_watch(low: &Obj, env: &mut Env) -> Result<Obj, String> {
    let starts = low.get("sfun") == Some(&json!("running"));
    if let Some(r) = refused(low, false, starts) {
        return Ok(r);
    }
    finish(low, watched(low, env))
}

fn watched(low: &Obj, env: &mut Env) -> Step<Obj> {
    let name = name_of(low);
    let mut r = ret(low, json!(true), "");
    let sfun = low.get("sfun").map(py_str).unwrap_or_else(|| "None".into());
    let flag = |k: &str| low.get(k).is_some_and(truthy);
    let (fun, verb) = match sfun.as_str() {
        "dead" if status(env, low, &name)? => ("stop", "stop"),
        "dead" => {
            comment(&mut r, "Service is already stopped");
            return Ok(r);
        }
        "running" if status(env, low, &name)? => match (flag("reload"), flag("force")) {
            (true, true) => ("force_reload", "forcefully reload"),
            (true, false) => ("reload", "reload"),
            // Salt's systemd module has no `full_restart`: restarted.
            _ => ("restart", "restart"),
        },
        "running" => ("start", "start"),
        _ => {
            set(
                &mut r,
                json!(false),
                format!("Unable to trigger watch for service.{sfun}"),
            );
            return Ok(r);
        }
    };
    let done = if verb == "stop" {
        "stopped".to_string()
    } else {
        format!("{verb}ed")
    };
    if env.test {
        set(&mut r, Value::Null, format!("Service is set to be {done}"));
        return Ok(r);
    }
    if verb == "start" {
        // "stop service before start"
        ask(env, "stop", &name, &[])?;
    }
    let result = match caught(env, fun, &name, &systemd_only(low, fun))? {
        Ok(v) => v,
        Err(m) => {
            set(&mut r, json!(false), m);
            return Ok(r);
        }
    };
    delay(low.get("init_delay"))?;
    let words = if truthy(&result) {
        format!("Service {done}")
    } else {
        format!("Failed to {verb} the service")
    };
    r.insert("changes".into(), json!({ name: result.clone() }));
    set(&mut r, result, words);
    Ok(r)
}
