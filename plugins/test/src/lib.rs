//! Salt's `test` module: the functions every fleet uses to check that
//! minions answer and that returns, retcodes and failures travel intact.

use std::time::{Duration, Instant};

use maid_sdk::python::truthy;
use maid_sdk::salt::python_int;
use maid_sdk::{Call, Error, Function, Plugin, export_plugin, function, host, python};
use serde::Deserialize;
use serde_json::{Map, Value, json};

struct Test;

#[derive(Deserialize)]
struct Echo {
    text: Value,
}

#[derive(Deserialize)]
struct Sleep {
    length: Value,
}

/// Seconds to sleep. Salt's `test.sleep` takes `int(length)`, so a client
/// that sends `"4"` (a string) or `true` sleeps too; a number is slept as
/// given, fractions included (Salt would truncate `0.5` to no sleep at all).
fn seconds(v: &Value) -> Option<f64> {
    match v {
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        Value::Number(n) => n.as_f64(),
        // Python's `int(str)`.
        Value::String(s) => python_int(s).map(|n| n as f64),
        _ => None,
    }
}

#[derive(Deserialize)]
struct Retcode {
    #[serde(default = "default_retcode")]
    code: i32,
}

fn default_retcode() -> i32 {
    42
}

#[derive(Deserialize)]
struct Exception {
    #[serde(default = "default_exception")]
    message: String,
}

fn default_exception() -> String {
    "Test Exception".into()
}

/// Python's `int()` of a job argument, as Salt's functions take it.
fn int(v: &Value, what: &str) -> Result<i64, Error> {
    match v {
        Value::Number(n) if n.is_i64() => Ok(n.as_i64().unwrap_or_default()),
        Value::Number(n) => Ok(n.as_f64().unwrap_or_default().trunc() as i64),
        other => seconds(other).map(|f| f as i64).ok_or_else(|| {
            Error::bad_arguments(format!(
                "{what}: invalid literal for int() with base 10: {}",
                python::repr(other)
            ))
        }),
    }
}

/// Python's name for the type a JSON value arrives as.
fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "<class 'NoneType'>",
        Value::Bool(_) => "<class 'bool'>",
        Value::Number(n) if n.is_f64() => "<class 'float'>",
        Value::Number(_) => "<class 'int'>",
        Value::String(_) => "<class 'str'>",
        Value::Array(_) => "<class 'list'>",
        Value::Object(_) => "<class 'dict'>",
    }
}

/// The keyword arguments a user gave, as a map.
fn user_kwargs(call: &Call) -> Map<String, Value> {
    call.user_kwargs()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// `test.try`'s own arguments; the rest of its keywords go to MODULE.
#[derive(Deserialize)]
struct Try {
    module: Value,
    #[serde(default)]
    return_try_exception: Value,
}

const TRY_ARGS: &[&str] = &["module", "return_try_exception=false", "**kwargs"];

/// Run MODULE with the keywords given; None if it fails (with RETURN_TRY_EXCEPTION, the exception)
// Salt's `test.try`: `__salt__[module](**kwargs)`, `None` when it raises,
// or the exception's `repr()` with RETURN_TRY_EXCEPTION. As on a Salt
// minion, the job's own keywords (`__pub_fun`, ...) go along too, so a
// function without `**kwargs` raises `TypeError` on them: it is not run.
// A refusal by the grants is not an exception: it fails the job.
#[function(raw, name = "try", args = TRY_ARGS)]
fn try_(call: &Call) -> Result<Value, Error> {
    let a: Try = call.bind(TRY_ARGS)?;
    let kwargs: Map<String, Value> = user_kwargs(call)
        .into_iter()
        .filter(|(k, _)| !matches!(k.as_str(), "module" | "return_try_exception"))
        .collect();
    let raised = match raised_before_the_call(&a.module, &kwargs) {
        Some(raised) => raised,
        None => {
            let fun = a.module.as_str().unwrap_or_default();
            match host::call(fun, &[], &kwargs)? {
                host::Called::Returned { ret, retcode } => {
                    // One `__context__` in Salt: the job ends with it.
                    if retcode != 0 {
                        host::set_retcode(retcode);
                    }
                    return Ok(ret);
                }
                host::Called::Failed {
                    failure, message, ..
                } => exception(fun, failure, &message),
            }
        }
    };
    Ok(if truthy(&a.return_try_exception) {
        Value::String(raised)
    } else {
        Value::Null
    })
}

/// What `__salt__[module](**kwargs)` raises before the function runs, as
/// Python's `repr()`: `KeyError` for a function no module has, `TypeError`
/// for a keyword a function without `**kwargs` does not take (the first
/// of the user's, else Salt's own `__pub_fun`).
fn raised_before_the_call(module: &Value, kwargs: &Map<String, Value>) -> Option<String> {
    let raise = |class: &str, what: String| Some(py_exception(class, &what));
    // The loader's own refusals of a key, in its words.
    let name = match module {
        Value::String(s) => s,
        Value::Array(_) => return raise("TypeError", "unhashable type: 'list'".into()),
        Value::Object(_) => return raise("TypeError", "unhashable type: 'dict'".into()),
        _ => return raise("KeyError", "The key must be a string.".into()),
    };
    let key_error = || raise("KeyError", name.clone());
    let Some((m, f)) = name.split_once('.') else {
        return raise("KeyError", format!("The key '{name}' should contain a '.'"));
    };
    let modules = host::modules();
    let Some(function) = modules
        .iter()
        .filter(|man| man.module == m)
        .flat_map(|man| &man.functions)
        .find(|func| func.name == f)
    else {
        return key_error();
    };
    if function.args.iter().any(|a| a == "**kwargs") {
        return None;
    }
    let params: Vec<&str> = function
        .args
        .iter()
        .map(|a| a.split('=').next().unwrap_or(a))
        .collect();
    let unexpected = kwargs
        .keys()
        .map(String::as_str)
        .find(|k| !params.contains(k))
        .unwrap_or("__pub_fun");
    raise(
        "TypeError",
        format!("{f}() got an unexpected keyword argument '{unexpected}'"),
    )
}

/// Python's `repr()` of exception `class` raised with `message`.
fn py_exception(class: &str, message: &str) -> String {
    format!("{class}({})", python::repr(&json!(message)))
}

/// The `repr()` of the exception Salt would have caught for a function
/// that failed in maid.
fn exception(fun: &str, failure: host::CallFailure, message: &str) -> String {
    use host::CallFailure as F;
    let (class, message) = match failure {
        F::NotAvailable => return py_exception("KeyError", fun),
        F::BadArguments => {
            let why = message
                .strip_prefix("Passed invalid arguments: ")
                .unwrap_or(message);
            // Python names the function alone.
            let module = fun.split('.').next().unwrap_or_default();
            let why = why.strip_prefix(&format!("{module}.")).unwrap_or(why);
            ("TypeError", why)
        }
        F::Failed => ("CommandExecutionError", message),
        F::PluginError | F::TimedOut => ("Exception", message),
    };
    py_exception(class, message)
}

/// Python's `repr()` of a tuple.
fn tuple_repr(items: &[Value]) -> String {
    let inner: Vec<String> = items.iter().map(python::repr).collect();
    match inner.len() {
        1 => format!("({},)", inner[0]),
        _ => format!("({})", inner.join(", ")),
    }
}

#[derive(Deserialize)]
struct RandomHash {
    #[serde(default = "default_size")]
    size: Value,
    #[serde(default)]
    hash_type: Option<String>,
}

fn default_size() -> Value {
    json!(9_999_999_999_i64)
}

/// Salt's `salt.utils.hashutils.random_hash`: a random number from 1 to
/// `size`, hashed as text.
fn random_hash(a: RandomHash) -> Result<String, Error> {
    use sha2::Digest;
    let size = int(&a.size, "size")?;
    if size < 1 {
        return Err(Error::failed(
            format!("empty range for randrange() (1, {}, {})", size + 1, size),
            1,
        ));
    }
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|e| Error::failed(e.to_string(), 1))?;
    let n = u64::from_le_bytes(bytes) % (size as u64) + 1;
    let text = n.to_string();
    let hex = |d: &[u8]| d.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let kind = a.hash_type.as_deref().unwrap_or("sha256");
    Ok(match kind {
        "md5" => hex(&md5::Md5::digest(&text)),
        "sha1" => hex(&sha1::Sha1::digest(&text)),
        "sha224" => hex(&sha2::Sha224::digest(&text)),
        "sha256" => hex(&sha2::Sha256::digest(&text)),
        "sha384" => hex(&sha2::Sha384::digest(&text)),
        "sha512" => hex(&sha2::Sha512::digest(&text)),
        other => {
            return Err(Error::failed(format!("unsupported hash type {other}"), 1));
        }
    })
}

/// Every module loaded on this maid and its version.
fn module_versions() -> Map<String, Value> {
    host::modules()
        .into_iter()
        .map(|m| (m.module, json!(m.version)))
        .collect()
}

/// What `test.versions_information` reports: maid's version, the modules'
/// and the system's, by section.
fn versions_information() -> Value {
    let grains = host::grains();
    let g = |k: &str| grains.get(k).cloned().unwrap_or(Value::Null);
    json!({
        "Salt Version": {"Salt": g("saltversion")},
        "Maid Version": {"Maid": g("maidversion")},
        "Modules": module_versions(),
        "System Versions": {
            "kernel": g("kernelrelease"),
            "os": g("osfinger"),
            "machine": g("cpuarch"),
        },
    })
}

/// `test.versions_report`: [`versions_information`] as the lines Salt
/// prints, each section's names right-aligned.
fn versions_report() -> Vec<String> {
    let info = versions_information();
    let mut lines = Vec::new();
    let Value::Object(sections) = info else {
        return lines;
    };
    let width = sections
        .values()
        .filter_map(Value::as_object)
        .flat_map(|m| m.keys())
        .map(String::len)
        .max()
        .unwrap_or(0);
    for (i, (title, items)) in sections.iter().enumerate() {
        if i > 0 {
            lines.push(" ".into());
        }
        lines.push(format!("{title}:"));
        for (name, v) in items.as_object().into_iter().flatten() {
            let v = match v {
                Value::Null => "Not Installed".to_string(),
                other => python::str(other),
            };
            lines.push(format!("{name:>width$}: {v}"));
        }
    }
    lines
}

#[derive(Deserialize)]
struct Num {
    num: Value,
}

#[derive(Deserialize)]
struct Start {
    start: Value,
}

#[derive(Deserialize)]
struct Data {
    data: Value,
}

#[derive(Deserialize)]
struct Assertion {
    assertion: Value,
}

#[derive(Deserialize)]
struct RandSleep {
    #[serde(default = "default_max")]
    max: Value,
}

fn default_max() -> Value {
    json!(60)
}

/// Return True: the minion is up and answering
#[function]
fn ping() -> Result<bool, Error> {
    Ok(true)
}

/// Return the value given
#[function(args = ["text"])]
fn echo(a: Echo) -> Result<Value, Error> {
    Ok(a.text)
}

/// Sleep LENGTH seconds, then return True
#[function(args = ["length"])]
fn sleep(a: Sleep) -> Result<bool, Error> {
    let Some(length) = seconds(&a.length) else {
        return Err(Error::bad_arguments(format!(
            "invalid literal for int() with base 10: {}",
            a.length
        )));
    };
    if !(length.is_finite() && length >= 0.0) {
        return Err(Error::bad_arguments("sleep length must be non-negative"));
    }
    std::thread::sleep(Duration::from_secs_f64(length));
    Ok(true)
}

/// Pass in a module name to discover what provider is being used
// Salt's `test.provider`: the file a module comes from, without its
// extension, or "" for a module not loaded. A maid module comes from
// `<module>.wasm`, so its provider is its own name.
#[function(args = ["module"])]
fn provider(a: Provider) -> Result<Value, Error> {
    let wanted = python::str(&a.module);
    let loaded = host::modules().iter().any(|m| m.module == wanted);
    Ok(json!(if loaded { wanted } else { String::new() }))
}

#[derive(Deserialize)]
struct Provider {
    module: Value,
}

/// Return a dict of the provider names and the files that provided them
// Salt's `test.providers`: `{provider: module}` for each loaded module;
// each maid module is its own provider (`<module>.wasm`).
#[function]
fn providers() -> Result<Value, Error> {
    let mut ret = Map::new();
    for m in host::modules() {
        ret.insert(m.module.clone(), json!(m.module));
    }
    Ok(Value::Object(ret))
}

/// Return the version of Salt the minion answers as (maid's own is the
/// `maidversion` grain and `test.versions_information`)
#[function]
fn version() -> Result<Value, Error> {
    // Salt's `salt.version.__version__`: the release maid implements, which
    // `manage.versions` and consoles compare against the master's.
    Ok(host::grains()
        .get("saltversion")
        .cloned()
        .unwrap_or(Value::Null))
}

/// Return the positional and keyword arguments given
#[function(raw, args = ["*args", "**kwargs"])]
fn arg(call: &Call) -> Result<Value, Error> {
    let kwargs: serde_json::Map<String, Value> = call
        .user_kwargs()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Ok(json!({"args": call.args, "kwargs": kwargs}))
}

/// Return True and end the job with retcode CODE (default 42)
#[function(args = ["code=42"])]
fn retcode(a: Retcode) -> Result<bool, Error> {
    host::set_retcode(a.code);
    Ok(true)
}

/// Fail on purpose, as an uncaught exception does
#[function(name = "exception", args = ["message=\"Test Exception\""])]
fn exception_(a: Exception) -> Result<bool, Error> {
    panic!("{}", a.message)
}

/// Always return True
#[function(name = "true")]
fn true_() -> Result<bool, Error> {
    Ok(true)
}

/// Always return False
#[function(name = "false")]
fn false_() -> Result<bool, Error> {
    Ok(false)
}

/// Return the keyword arguments given
#[function(raw, args = ["**kwargs"])]
fn kwarg(call: &Call) -> Result<Map<String, Value>, Error> {
    if !call.args.is_empty() {
        return Err(Error::bad_arguments(format!(
            "{}() takes 0 positional arguments but {} were given",
            call.py_name(),
            call.args.len()
        )));
    }
    Ok(user_kwargs(call))
}

/// Return the positional and keyword arguments, without Salt's own
#[function(raw, args = ["*args", "**kwargs"])]
fn arg_clean(call: &Call) -> Result<Value, Error> {
    Ok(json!({"args": call.args, "kwargs": user_kwargs(call)}))
}

/// Return the Python type of each argument given
#[function(raw, args = ["*args", "**kwargs"])]
fn arg_type(call: &Call) -> Result<Value, Error> {
    let args: Vec<&str> = call.args.iter().map(type_name).collect();
    let kwargs: Map<String, Value> = call
        .user_kwargs()
        .map(|(k, v)| (k.clone(), json!(type_name(v))))
        .collect();
    Ok(json!({"args": args, "kwargs": kwargs}))
}

/// Return the Python repr() of the arguments given
#[function(raw, args = ["*args", "**kwargs"])]
fn arg_repr(call: &Call) -> Result<Value, Error> {
    Ok(json!({
        "args": tuple_repr(&call.args),
        "kwargs": python::repr(&Value::Object(user_kwargs(call))),
    }))
}

/// Return DATA, to try an outputter on it
#[function(args = ["data"])]
fn outputter(a: Data) -> Result<Value, Error> {
    Ok(a.data)
}

/// Fail with an AssertionError unless ASSERTION is true
#[function(args = ["assertion"])]
fn assertion(a: Assertion) -> Result<Value, Error> {
    if truthy(&a.assertion) {
        Ok(Value::Null)
    } else {
        Err(Error::failed("AssertionError", 1))
    }
}

/// Return [the NUM-th Fibonacci number, seconds taken]
#[function(args = ["num"])]
fn fib(a: Num) -> Result<Value, Error> {
    let num = int(&a.num, "num")?;
    if num < 0 {
        return Err(Error::failed("Negative number is not allowed!", 1));
    }
    let start = Instant::now();
    let (mut prev, mut curr) = (0u128, 1u128);
    let value: Value = if num < 2 {
        json!(num)
    } else {
        for _ in 1..num {
            let Some(next) = prev.checked_add(curr) else {
                return Err(Error::failed(
                    format!("fib({num}) does not fit in 128 bits"),
                    1,
                ));
            };
            (prev, curr) = (curr, next);
        }
        match u64::try_from(curr) {
            Ok(n) => json!(n),
            Err(_) => json!(curr.to_string()),
        }
    };
    Ok(json!([value, start.elapsed().as_secs_f64()]))
}

/// Return [the Collatz sequence from START, seconds taken]
#[function(args = ["start"])]
fn collatz(a: Start) -> Result<Value, Error> {
    let mut n = int(&a.start, "start")?;
    if n < 1 {
        // Salt loops forever here; refuse instead.
        return Err(Error::bad_arguments("start must be at least 1"));
    }
    let begin = Instant::now();
    // Python 3's `/` makes a float of every value after
    // the first halving; the return shows it.
    let mut halved = false;
    let mut steps = Vec::new();
    while n != 1 {
        steps.push(if halved { json!(n as f64) } else { json!(n) });
        if n % 2 == 0 {
            n /= 2;
            halved = true;
        } else {
            n = n
                .checked_mul(3)
                .and_then(|m| m.checked_add(1))
                .ok_or_else(|| Error::failed("collatz sequence overflowed", 1))?;
        }
    }
    Ok(json!([steps, begin.elapsed().as_secs_f64()]))
}

/// Hash a random number from 1 to SIZE with HASH_TYPE (default sha256)
#[function(name = "random_hash", args = ["size=9999999999", "hash_type=null"])]
fn random_hash_(a: RandomHash) -> Result<String, Error> {
    random_hash(a)
}

/// The old name of test.random_hash
#[function(args = ["size=9999999999", "hash_type=null"])]
fn rand_str(a: RandomHash) -> Result<String, Error> {
    random_hash(a)
}

/// Sleep a random number of seconds from 0 to MAX (default 60)
#[function(args = ["max=60"])]
fn rand_sleep(a: RandSleep) -> Result<u64, Error> {
    let max = int(&a.max, "max")?.max(0) as u64;
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|e| Error::failed(e.to_string(), 1))?;
    let secs = u64::from_le_bytes(bytes) % (max + 1);
    std::thread::sleep(Duration::from_secs(secs));
    Ok(secs)
}

/// Return the versions of maid, its modules and the system
#[function(name = "versions_information")]
fn versions_information_() -> Result<Value, Error> {
    Ok(versions_information())
}

/// Return the versions of maid, its modules and the system, as lines
#[function]
fn versions() -> Result<Vec<String>, Error> {
    Ok(versions_report())
}

/// Return the versions of maid, its modules and the system, as lines
#[function(name = "versions_report")]
fn versions_report_() -> Result<Vec<String>, Error> {
    Ok(versions_report())
}

/// Return the functions each loaded module provides
#[function]
fn module_report() -> Result<Value, Error> {
    let modules = host::modules();
    let names: Vec<&str> = modules.iter().map(|m| m.module.as_str()).collect();
    let functions: Vec<String> = modules
        .iter()
        .flat_map(|m| {
            m.functions
                .iter()
                .map(move |f| format!("{}.{}", m.module, f.name))
        })
        .collect();
    // Every function is reachable both ways here, as in a
    // healthy Salt loader.
    Ok(json!({
        "functions": functions,
        "function_attrs": functions,
        "function_subs": functions,
        "modules": names,
        "module_attrs": names,
        "missing_attrs": [],
        "missing_subs": [],
    }))
}

/// Deprecated in Salt: moved to cmd.tty
#[function(raw, args = ["*args", "**kwargs"])]
fn tty() -> Result<&'static str, Error> {
    Ok("ERROR: This function has been moved to cmd.tty")
}

impl Plugin for Test {
    const MODULE: &'static str = "test";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");

    fn functions() -> Vec<Function> {
        maid_sdk::functions![
            ping,
            echo,
            sleep,
            version,
            arg,
            retcode,
            exception_,
            true_,
            false_,
            kwarg,
            arg_clean,
            arg_type,
            arg_repr,
            outputter,
            assertion,
            fib,
            collatz,
            random_hash_,
            rand_str,
            rand_sleep,
            versions_information_,
            versions,
            versions_report_,
            module_report,
            try_,
            tty,
            provider,
            providers,
        ]
    }
}

export_plugin!(Test);
