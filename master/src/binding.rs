//! How the master's own functions (runners and wheel) are called: their
//! parameters in Salt's order, and arguments bound to them as Python binds
//! them — as Salt's `RunnerClient._reformat_low` reads a chunk: `arg`
//! through `parse_input` (so `jid=…` strings are keyword arguments), then
//! `kwarg`, then any other key of the chunk; keywords a function does not
//! take are dropped (`ignore_invalid`).

use serde_json::{Map, Value, json};

/// Which of the master's clients runs a function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    Runner,
    Wheel,
}

impl Form {
    pub fn name(self) -> &'static str {
        match self {
            Form::Runner => "runner",
            Form::Wheel => "wheel",
        }
    }
}

/// A parameter of a master function: its name and, for an optional one,
/// its default.
struct Param(&'static str, Option<Value>);

/// What a master function is called with once bound to its parameters.
pub type Bound = Map<String, Value>;

/// The functions, with their parameters in Salt's order.
fn signature(form: Form, fun: &str) -> Option<Vec<Param>> {
    let none = || Some(Value::Null);
    let t = || Some(Value::Bool(true));
    let f = || Some(Value::Bool(false));
    let star = || Some(json!("*"));
    let glob = || Some(json!("glob"));
    Some(match (form, fun) {
        (Form::Runner, "jobs.lookup_jid") => vec![
            Param("jid", None),
            Param("ext_source", none()),
            Param("returned", t()),
            Param("missing", f()),
            Param("display_progress", f()),
        ],
        (Form::Runner, "jobs.list_job" | "jobs.print_job" | "jobs.exit_success") => {
            vec![Param("jid", None), Param("ext_source", none())]
        }
        (Form::Runner, "jobs.list_jobs") => vec![
            Param("ext_source", none()),
            Param("outputter", none()),
            Param("search_metadata", none()),
            Param("search_function", none()),
            Param("search_target", none()),
            Param("start_time", none()),
            Param("end_time", none()),
            Param("display_progress", f()),
        ],
        (Form::Runner, "manage.status") => vec![
            Param("output", t()),
            Param("tgt", star()),
            Param("tgt_type", glob()),
            Param("timeout", none()),
            Param("gather_job_timeout", none()),
        ],
        (Form::Runner, name) if crate::runners::manage::is_presence(name) => {
            vec![Param("subset", none()), Param("show_ip", f())]
        }
        (Form::Runner, "manage.up") => vec![
            Param("tgt", star()),
            Param("tgt_type", glob()),
            Param("timeout", none()),
            Param("gather_job_timeout", none()),
        ],
        (Form::Runner, "jobs.active") => vec![Param("display_progress", f())],
        (Form::Runner, "manage.versions") => vec![],
        (Form::Runner, "manage.down") => vec![
            Param("removekeys", f()),
            Param("tgt", star()),
            Param("tgt_type", glob()),
            Param("timeout", none()),
            Param("gather_job_timeout", none()),
        ],
        (Form::Wheel, "key.list_all" | "minions.connected" | "config.values") => vec![],
        (
            Form::Wheel,
            "key.list" | "key.glob_match" | "key.name_match" | "key.delete" | "key.print",
        ) => vec![Param("match", None)],
        (Form::Wheel, "key.accept") => vec![
            Param("match", None),
            Param("include_rejected", f()),
            Param("include_denied", f()),
        ],
        (Form::Wheel, "key.reject") => vec![
            Param("match", None),
            Param("include_accepted", f()),
            Param("include_denied", f()),
        ],
        (Form::Wheel, "key.finger") => vec![Param("match", None), Param("hash_type", none())],
        (Form::Wheel, "key.gen_accept") => vec![
            Param("id_", None),
            Param("keysize", none()),
            Param("force", f()),
        ],
        _ => return None,
    })
}

/// Whether `fun` is one of the master's `form` functions.
pub fn exists(form: Form, fun: &str) -> bool {
    signature(form, fun).is_some()
}

/// Why a call could not be made: Salt's `TypeError` text.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct BadCall(pub String);

/// Bind `args` and `kwargs` to `fun`'s parameters as Python would, the
/// keywords it does not take dropped.
pub fn bind(
    form: Form,
    fun: &str,
    args: Vec<Value>,
    kwargs: &Map<String, Value>,
) -> Result<Bound, BadCall> {
    let params =
        signature(form, fun).ok_or_else(|| BadCall(format!("'{fun}' is not available")))?;
    let short = fun.rsplit('.').next().unwrap_or(fun);
    if args.len() > params.len() {
        let required = params.iter().filter(|p| p.1.is_none()).count();
        let takes = if required == params.len() {
            format!("{required}")
        } else {
            format!("from {required} to {}", params.len())
        };
        return Err(BadCall(format!(
            "{short}() takes {takes} positional argument{} but {} {} given",
            if params.len() == 1 { "" } else { "s" },
            args.len(),
            if args.len() == 1 { "was" } else { "were" }
        )));
    }
    let mut bound = Map::new();
    let given = args.len();
    for (param, value) in params.iter().zip(args) {
        bound.insert(param.0.into(), value);
    }
    for param in &params[given..] {
        if let Some(v) = kwargs.get(param.0) {
            bound.insert(param.0.into(), v.clone());
        }
    }
    for param in &params[..given] {
        if kwargs.contains_key(param.0) {
            return Err(BadCall(format!(
                "{short}() got multiple values for argument '{}'",
                param.0
            )));
        }
    }
    let missing: Vec<&str> = params
        .iter()
        .filter(|p| p.1.is_none() && !bound.contains_key(p.0))
        .map(|p| p.0)
        .collect();
    if !missing.is_empty() {
        let names: Vec<String> = missing.iter().map(|m| format!("'{m}'")).collect();
        let list = match names.as_slice() {
            [one] => one.clone(),
            [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
            [] => unreachable!(),
        };
        return Err(BadCall(format!(
            "{short}() missing {} required positional argument{}: {list}",
            missing.len(),
            if missing.len() == 1 { "" } else { "s" }
        )));
    }
    for param in &params {
        if let (false, Some(default)) = (bound.contains_key(param.0), &param.1) {
            bound.insert(param.0.into(), default.clone());
        }
    }
    Ok(bound)
}

/// The arguments a runner was called with, as Salt's event shows them:
/// the positional ones, then the keywords it takes as one mapping.
pub fn fun_args(form: Form, fun: &str, args: &[Value], kwargs: &Map<String, Value>) -> Vec<Value> {
    let names: Vec<&str> = signature(form, fun)
        .map(|ps| ps.iter().map(|p| p.0).collect())
        .unwrap_or_default();
    let mut out = args.to_vec();
    let taken: Map<String, Value> = kwargs
        .iter()
        .filter(|(k, _)| names.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if !taken.is_empty() {
        out.push(Value::Object(taken));
    }
    out
}

/// The arguments a wheel function was called with, as Salt's events show
/// them (its `format_call`): the values of the parameters without a
/// default, in order, then those with one (defaults filled) as one
/// mapping.
pub fn wheel_fun_args(fun: &str, bound: &Bound) -> Vec<Value> {
    let params = signature(Form::Wheel, fun).unwrap_or_default();
    let mut out: Vec<Value> = params
        .iter()
        .filter(|p| p.1.is_none())
        .filter_map(|p| bound.get(p.0).cloned())
        .collect();
    let defaulted: Map<String, Value> = params
        .iter()
        .filter(|p| p.1.is_some())
        .filter_map(|p| bound.get(p.0).map(|v| (p.0.to_string(), v.clone())))
        .collect();
    if !defaulted.is_empty() {
        out.push(Value::Object(defaulted));
    }
    out
}

/// A jid as Salt takes one: a string, or the number a client decoded it to.
pub fn jid_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Python's `fnmatch.fnmatch` on a posix system (case-sensitive).
pub(crate) fn fnmatch(name: &str, pattern: &str) -> bool {
    crate::target::matches(
        &Value::String(pattern.to_string()),
        crate::target::TargetType::Glob,
        name,
        &Map::new(),
    )
    .unwrap_or(false)
}

/// Salt's `split_input`: a list as it is, else comma-separated text.
pub(crate) fn split_input(v: &Value) -> Vec<String> {
    match v {
        Value::Array(items) => items.iter().map(jid_text).collect(),
        other => jid_text(other)
            .split(',')
            .map(|s| s.trim().to_string())
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(fun: &str, args: Value, kwargs: Value) -> Result<Bound, BadCall> {
        let args = args.as_array().unwrap().clone();
        bind(Form::Runner, fun, args, kwargs.as_object().unwrap())
    }

    #[test]
    fn arguments_bind_as_python_binds_them() {
        let ok = b(
            "jobs.lookup_jid",
            json!(["123"]),
            json!({"missing": true, "junk": 1}),
        )
        .unwrap();
        assert_eq!(ok["jid"], json!("123"));
        assert_eq!(ok["missing"], json!(true));
        assert_eq!(ok["returned"], json!(true));
        assert!(!ok.contains_key("junk"));
        assert_eq!(
            b("jobs.lookup_jid", json!([]), json!({})).unwrap_err().0,
            "lookup_jid() missing 1 required positional argument: 'jid'"
        );
        assert_eq!(
            b("jobs.list_job", json!([1, 2, 3]), json!({}))
                .unwrap_err()
                .0,
            "list_job() takes from 1 to 2 positional arguments but 3 were given"
        );
        assert_eq!(
            b("jobs.list_job", json!([1]), json!({"jid": 2}))
                .unwrap_err()
                .0,
            "list_job() got multiple values for argument 'jid'"
        );
        assert!(bind(Form::Runner, "nope.x", vec![], &Map::new()).is_err());
    }
}
