//! Salt's `test` module: the functions every fleet uses to check that
//! minions answer and that returns, retcodes and failures travel intact.

use std::time::Duration;

use maid_sdk::{Call, Error, Function, Plugin, export_plugin, host};
use serde::Deserialize;
use serde_json::{Value, json};

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
        // Python's `int(str)`: decimal digits, a sign, surrounding spaces
        // and single underscores between digits.
        Value::String(s) => {
            let t = s.trim();
            let digits = t.strip_prefix(['+', '-']).unwrap_or(t);
            let ok = !digits.is_empty()
                && !digits.starts_with('_')
                && !digits.ends_with('_')
                && !digits.contains("__")
                && digits.chars().all(|c| c.is_ascii_digit() || c == '_');
            ok.then(|| t.replace('_', "").parse::<i64>().ok())
                .flatten()
                .map(|n| n as f64)
        }
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

impl Plugin for Test {
    const MODULE: &'static str = "test";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");

    fn functions() -> Vec<Function> {
        vec![
            Function::new(
                "ping",
                "Return True: the minion is up and answering",
                &[],
                |(): (), _: &Call| Ok(true),
            ),
            Function::new(
                "echo",
                "Return the value given",
                &["text"],
                |a: Echo, _: &Call| Ok(a.text),
            ),
            Function::new(
                "sleep",
                "Sleep LENGTH seconds, then return True",
                &["length"],
                |a: Sleep, _: &Call| {
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
                },
            ),
            Function::new(
                "version",
                "Return the version of maid on the minion",
                &[],
                |(): (), _: &Call| {
                    Ok(host::grains()
                        .get("maidversion")
                        .cloned()
                        .unwrap_or(Value::Null))
                },
            ),
            Function::raw(
                "arg",
                "Return the positional and keyword arguments given",
                &["*args", "**kwargs"],
                |call: &Call| {
                    let kwargs: serde_json::Map<String, Value> = call
                        .user_kwargs()
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    Ok(json!({"args": call.args, "kwargs": kwargs}))
                },
            ),
            Function::new(
                "retcode",
                "Return True and end the job with retcode CODE (default 42)",
                &["code"],
                |a: Retcode, _: &Call| {
                    host::set_retcode(a.code);
                    Ok(true)
                },
            ),
            Function::new(
                "exception",
                "Fail on purpose, as an uncaught exception does",
                &["message"],
                |a: Exception, _: &Call| -> Result<bool, Error> { panic!("{}", a.message) },
            ),
        ]
    }
}

export_plugin!(Test);
