//! `#[function]` and `functions!` build the same `Function`s a plugin
//! would write by hand: name, doc and args as declared, and the handler
//! reached with the parameters it asks for.

use maid_sdk::serde_json::{Value, json};
use maid_sdk::{Call, Context, Error, Function, function, functions};
use serde::Deserialize;

#[derive(Deserialize)]
struct Greet {
    name: String,
    #[serde(default)]
    shout: bool,
}

/// Greet someone
#[function(args = ["name", "shout=false"])]
fn greet(args: Greet, call: &Call) -> Result<String, Error> {
    let greeting = format!("hello, {} from {}", args.name, call.function);
    Ok(if args.shout {
        greeting.to_uppercase()
    } else {
        greeting
    })
}

/// Return `name`
///
///   indented, after a blank line
#[function(args = ["name"])]
fn name_only(args: Greet) -> Result<String, Error> {
    Ok(args.name)
}

/// Who is calling
#[function]
fn whoami(call: &Call) -> Result<String, Error> {
    Ok(call.context.minion_id.clone())
}

/// Always return False
#[function(name = "false")]
fn false_() -> Result<bool, Error> {
    Ok(false)
}

const ECHO_ARGS: &[&str] = &["*args", "**kwargs"];

/// Echo whatever came
#[function(raw, name = "echo", args = ECHO_ARGS)]
fn echo_(call: &Call) -> Result<Value, Error> {
    Ok(json!({"args": call.args, "kwargs": call.kwargs}))
}

/// Nothing to read
#[function(raw, args = ["*args"])]
fn ignore() -> Result<(), Error> {
    Ok(())
}

mod nested {
    use super::*;

    /// In a module of its own
    #[function]
    pub(crate) fn r#type() -> Result<&'static str, Error> {
        Ok("nested")
    }
}

fn all() -> Vec<Function> {
    functions![
        greet,
        name_only,
        whoami,
        false_,
        echo_,
        ignore,
        nested::r#type,
    ]
}

fn call(function: &str, args: Value, kwargs: Value) -> Call {
    Call {
        module: "m",
        function: function.into(),
        args: maid_sdk::serde_json::from_value(args).unwrap(),
        kwargs: maid_sdk::serde_json::from_value(kwargs).unwrap(),
        context: Context {
            jid: "1".into(),
            minion_id: "local".into(),
            user: None,
        },
    }
}

fn run(name: &str, args: Value, kwargs: Value) -> Result<Value, Error> {
    let functions = all();
    let f = functions.iter().find(|f| f.name() == name).unwrap();
    f.invoke(&call(name, args, kwargs))
}

#[test]
fn the_manifest_is_what_the_attributes_say() {
    let infos: Vec<(String, String, Vec<String>)> = all()
        .iter()
        .map(Function::info)
        .map(|i| (i.name, i.doc, i.args))
        .collect();
    let s = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    assert_eq!(
        infos,
        [
            (
                "greet".into(),
                "Greet someone".into(),
                s(&["name", "shout=false"])
            ),
            (
                "name_only".into(),
                "Return `name`\n\n  indented, after a blank line".into(),
                s(&["name"])
            ),
            ("whoami".into(), "Who is calling".into(), vec![]),
            ("false".into(), "Always return False".into(), vec![]),
            ("echo".into(), "Echo whatever came".into(), s(ECHO_ARGS)),
            ("ignore".into(), "Nothing to read".into(), s(&["*args"])),
            ("type".into(), "In a module of its own".into(), vec![]),
        ]
    );
}

#[test]
fn handlers_get_what_they_ask_for() {
    assert_eq!(
        run("greet", json!(["world"]), json!({"shout": true})).unwrap(),
        json!("HELLO, WORLD FROM GREET")
    );
    assert_eq!(
        run("name_only", json!([]), json!({"name": "x"})).unwrap(),
        json!("x")
    );
    assert_eq!(run("whoami", json!([]), json!({})).unwrap(), json!("local"));
    assert_eq!(run("false", json!([]), json!({})).unwrap(), json!(false));
    assert_eq!(
        run("echo", json!([1]), json!({"a": 2})).unwrap(),
        json!({"args": [1], "kwargs": {"a": 2}})
    );
    assert_eq!(
        run("ignore", json!([1, 2]), json!({})).unwrap(),
        Value::Null
    );
    assert_eq!(run("type", json!([]), json!({})).unwrap(), json!("nested"));
    // Typed functions bind as Function::new does; raw ones take anything.
    let err = run("false", json!([1]), json!({})).unwrap_err();
    assert_eq!(
        err.message,
        "false() takes 0 positional arguments but 1 was given"
    );
    let err = run("name_only", json!([]), json!({})).unwrap_err();
    assert_eq!(
        err.message,
        "name_only() missing 1 required positional argument: 'name'"
    );
}

#[test]
fn the_functions_stay_callable() {
    assert!(!false_().unwrap());
    assert_eq!(nested::r#type().unwrap(), "nested");
}
