//! Salt's `test` states: results made to order, for trying requisites
//! and outputs.

use serde_json::{Value, json};

use super::{Env, ret};
use crate::compile::Obj;
use crate::graph::tag;
use crate::py::py_str;

fn comment_or(low: &Obj, default: &str) -> String {
    low.get("comment").map_or(default.to_string(), py_str)
}

fn testing_changes() -> Value {
    json!({"testing": {"old": "Unchanged", "new": "Something pretended to change"}})
}

pub fn nop(low: &Obj, _env: &mut Env) -> Result<Obj, String> {
    Ok(ret(low, json!(true), "Success!"))
}

pub fn succeed_without_changes(low: &Obj, _env: &mut Env) -> Result<Obj, String> {
    Ok(ret(low, json!(true), &comment_or(low, "Success!")))
}

pub fn fail_without_changes(low: &Obj, env: &mut Env) -> Result<Obj, String> {
    let mut r = ret(low, json!(false), &comment_or(low, "Failure!"));
    if env.test {
        r.insert(
            "comment".into(),
            json!("If we weren't testing, this would be a failure!"),
        );
    }
    Ok(r)
}

/// `succeed_with_changes` and `fail_with_changes`: `result` with the
/// pretended change; under test, result None and `predicted`.
fn with_changes(low: &Obj, env: &Env, result: bool, default: &str, predicted: &str) -> Obj {
    let mut r = ret(low, json!(result), &comment_or(low, default));
    r.insert("changes".into(), testing_changes());
    if env.test {
        r.insert("result".into(), Value::Null);
        r.insert("comment".into(), json!(predicted));
    }
    r
}

pub fn succeed_with_changes(low: &Obj, env: &mut Env) -> Result<Obj, String> {
    Ok(with_changes(
        low,
        env,
        true,
        "Success!",
        "If we weren't testing, this would be successful with changes",
    ))
}

pub fn fail_with_changes(low: &Obj, env: &mut Env) -> Result<Obj, String> {
    Ok(with_changes(
        low,
        env,
        false,
        "Failure!",
        "If we weren't testing, this would be failed with changes",
    ))
}

pub fn configurable(low: &Obj, env: &mut Env) -> Result<Obj, String> {
    let comment = comment_or(low, "");
    let mut r = ret(low, json!(false), &comment);
    let changes = low.get("changes").cloned().unwrap_or(json!(true));
    match &changes {
        Value::Bool(true) => {
            r.insert("changes".into(), testing_changes());
        }
        Value::Bool(false) => {}
        _ => {
            return Err(
                "You have specified the state option 'changes' with invalid arguments. \
                        It must be either True, False, or 'Random'"
                    .into(),
            );
        }
    }
    let result = low.get("result").cloned().unwrap_or(json!(true));
    match &result {
        Value::Bool(b) => {
            r.insert("result".into(), json!(b));
        }
        _ => {
            return Err(
                "You have specified the state option 'result' with invalid arguments. \
                        It must be either True, False, or 'Random'"
                    .into(),
            );
        }
    }
    match low.get("warnings") {
        None | Some(Value::Null) => {}
        Some(Value::String(w)) => {
            r.insert("warnings".into(), json!([w]));
        }
        Some(Value::Array(w)) => {
            r.insert("warnings".into(), json!(w));
        }
        Some(_) => {
            return Err(
                "You have specified the state option 'warnings' with invalid arguments. \
                        It must be a string or a list of strings"
                    .into(),
            );
        }
    }
    if env.test {
        let allow = low
            .get("allow_test_mode_failure")
            .is_some_and(crate::py::truthy);
        let test_result = if allow && result == json!(false) {
            result
        } else if changes == json!(false) {
            json!(true)
        } else {
            Value::Null
        };
        r.insert("result".into(), test_result);
        r.insert(
            "comment".into(),
            json!(if comment.is_empty() {
                "This is a test".into()
            } else {
                comment
            }),
        );
    }
    Ok(r)
}

pub fn show_notification(low: &Obj, _env: &mut Env) -> Result<Obj, String> {
    let text = low.get("text").filter(|t| crate::py::truthy(t));
    let Some(text) = text else {
        return Err("Missing required argument text.".into());
    };
    let mut r = ret(low, json!(true), "");
    r.insert("comment".into(), text.clone());
    Ok(r)
}

/// `test.mod_watch`: what fired it, by the watched states with changes.
pub fn mod_watch(low: &Obj, _env: &mut Env) -> Result<Obj, String> {
    let mut has = Vec::new();
    if let Some(Value::Array(watched)) = low.get("__reqs__").and_then(|r| r.get("watch")) {
        for req in watched {
            let Some(req) = req.as_object() else { continue };
            if req.get("__changed__").is_some_and(crate::py::truthy) {
                let _ = tag(req);
                has.push(json!(format!(
                    "{}: {}",
                    req.get("state").map(py_str).unwrap_or_default(),
                    req.get("__id__").map(py_str).unwrap_or_default()
                )));
            }
        }
    }
    let mut r = Obj::new();
    r.insert(
        "name".into(),
        low.get("name").cloned().unwrap_or(Value::Null),
    );
    r.insert(
        "result".into(),
        low.get("result").cloned().unwrap_or(json!(true)),
    );
    r.insert(
        "comment".into(),
        low.get("comment")
            .cloned()
            .unwrap_or(json!("Watch statement fired.")),
    );
    r.insert(
        "changes".into(),
        low.get("changes")
            .cloned()
            .unwrap_or(json!({"Requisites with changes": has})),
    );
    Ok(r)
}
