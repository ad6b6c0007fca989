//! A module's functions and how a job's arguments bind to them.
//!
//! Binding follows Python's rules, which is what Salt users expect:
//! positional arguments fill the listed names in order, keyword arguments
//! fill them by name, a name filled twice or a keyword nobody declared is an
//! error, and keywords Salt adds for itself (`__pub_*`) are ignored.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::{Context, Error, FunctionInfo};

/// A job's call as the plugin receives it.
#[derive(Debug)]
pub struct Call {
    /// The module this plugin provides.
    pub module: &'static str,
    /// The function name without the module.
    pub function: String,
    /// Positional arguments.
    pub args: Vec<Value>,
    /// Keyword arguments.
    pub kwargs: Map<String, Value>,
    /// Who asked.
    pub context: Context,
}

impl Call {
    /// `module.function`, as error messages name it.
    pub fn fun(&self) -> String {
        format!("{}.{}", self.module, self.function)
    }

    /// The function's name as Python's errors name it (`echo` in
    /// `echo() missing 1 required positional argument: 'text'`).
    pub fn py_name(&self) -> &str {
        &self.function
    }

    /// Keyword arguments the user gave, without the ones Salt adds itself.
    pub fn user_kwargs(&self) -> impl Iterator<Item = (&String, &Value)> {
        self.kwargs.iter().filter(|(k, _)| !k.starts_with("__"))
    }

    /// Bind positional and keyword arguments to `names` (in positional
    /// order) and deserialise them into `A`.
    ///
    /// A name may be `*args` or `**kwargs` to accept extra positional or
    /// keyword arguments; those extras are not part of `A`.
    pub fn bind<A: DeserializeOwned>(&self, names: &[&str]) -> Result<A, Error> {
        let bound = self.bind_map(names)?;
        deserialize(self, Value::Object(bound))
    }

    fn bind_map(&self, names: &[&str]) -> Result<Map<String, Value>, Error> {
        let varargs = names.contains(&"*args");
        let varkw = names.contains(&"**kwargs");
        let specs: Vec<(&str, Option<&str>)> = names
            .iter()
            .copied()
            .filter(|n| !n.starts_with('*'))
            .map(split_default)
            .collect();
        let named: Vec<&str> = specs.iter().map(|(n, _)| *n).collect();
        if self.args.len() > named.len() && !varargs {
            return Err(Error::bad_arguments(format!(
                "{}() takes {} positional argument{} but {} {} given",
                self.py_name(),
                named.len(),
                if named.len() == 1 { "" } else { "s" },
                self.args.len(),
                if self.args.len() == 1 { "was" } else { "were" },
            )));
        }
        let mut bound = Map::new();
        for (name, value) in named.iter().zip(&self.args) {
            bound.insert((*name).to_string(), value.clone());
        }
        let mut invalid = Vec::new();
        for (key, value) in self.user_kwargs() {
            if named.contains(&key.as_str()) {
                if bound.contains_key(key) {
                    return Err(Error::bad_arguments(format!(
                        "{}() got multiple values for argument '{key}'",
                        self.py_name()
                    )));
                }
                bound.insert(key.clone(), value.clone());
            } else if !varkw {
                invalid.push(format!("{key}={}", python_str(value)));
            }
        }
        if !invalid.is_empty() {
            return Err(Error::bad_arguments(format!(
                "The following keyword arguments are not valid: {}",
                invalid.join(", ")
            )));
        }
        for (name, default) in &specs {
            if let Some(default) = default
                && !bound.contains_key(*name)
            {
                let value = serde_json::from_str(default)
                    .map_err(|e| Error::failed(format!("default of {name} is not JSON: {e}"), 1))?;
                bound.insert((*name).to_string(), value);
            }
        }
        Ok(bound)
    }
}

/// An argument as a function lists it: `name`, or `name=default` with the
/// default as JSON (`code=42`, `hash_type=null`, `delimiter=":"`), which
/// binding fills in and `sys.argspec` reports.
pub fn split_default(spec: &str) -> (&str, Option<&str>) {
    match spec.split_once('=') {
        Some((name, default)) => (name, Some(default)),
        None => (spec, None),
    }
}

/// Render a scalar as Python's `str()` would, for messages.
fn python_str(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Null => "None".into(),
        other => other.to_string(),
    }
}

fn deserialize<A: DeserializeOwned>(call: &Call, value: Value) -> Result<A, Error> {
    // `()` and other argument-less types: accept the empty object.
    let value = match value {
        Value::Object(map) if map.is_empty() && A::deserialize(Value::Null).is_ok() => Value::Null,
        other => other,
    };
    A::deserialize(value).map_err(|e| {
        let msg = e.to_string();
        match msg
            .strip_prefix("missing field `")
            .and_then(|rest| rest.split('`').next())
        {
            Some(field) => Error::bad_arguments(format!(
                "{}() missing 1 required positional argument: '{field}'",
                call.py_name()
            )),
            None => Error::bad_arguments(format!("{}(): {msg}", call.py_name())),
        }
    })
}

type Handler = Box<dyn Fn(&Call) -> Result<Value, Error>>;

/// One function of a module: its name, one-line doc, argument names and
/// handler.
pub struct Function {
    name: &'static str,
    doc: &'static str,
    args: &'static [&'static str],
    handler: Handler,
}

impl std::fmt::Debug for Function {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Function")
            .field("name", &self.name)
            .field("args", &self.args)
            .finish_non_exhaustive()
    }
}

impl Function {
    /// A function with typed arguments: the job's arguments are bound to
    /// `args` (see [`Call::bind`]) and deserialised into `A`; the return is
    /// serialised to JSON.
    ///
    /// Use `()` for a function without arguments.
    pub fn new<A, R, F>(
        name: &'static str,
        doc: &'static str,
        args: &'static [&'static str],
        handler: F,
    ) -> Self
    where
        A: DeserializeOwned,
        R: Serialize,
        F: Fn(A, &Call) -> Result<R, Error> + 'static,
    {
        Self::raw(name, doc, args, move |call| {
            let bound = call.bind::<A>(args)?;
            handler(bound, call)
        })
    }

    /// A function that reads the raw [`Call`] itself, for Salt's `*args` and
    /// `**kwargs`.
    pub fn raw<R, F>(
        name: &'static str,
        doc: &'static str,
        args: &'static [&'static str],
        handler: F,
    ) -> Self
    where
        R: Serialize,
        F: Fn(&Call) -> Result<R, Error> + 'static,
    {
        Self {
            name,
            doc,
            args,
            handler: Box::new(move |call| {
                let ret = handler(call)?;
                serde_json::to_value(ret)
                    .map_err(|e| Error::failed(format!("return is not JSON: {e}"), 1))
            }),
        }
    }

    /// The function name without the module.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// What the manifest says about this function.
    pub fn info(&self) -> FunctionInfo {
        FunctionInfo {
            name: self.name.to_string(),
            doc: self.doc.to_string(),
            args: self.args.iter().map(|a| a.to_string()).collect(),
        }
    }

    /// Run the handler.
    pub fn invoke(&self, call: &Call) -> Result<Value, Error> {
        (self.handler)(call)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    fn call(args: Value, kwargs: Value) -> Call {
        Call {
            module: "m",
            function: "f".into(),
            args: serde_json::from_value(args).unwrap(),
            kwargs: serde_json::from_value(kwargs).unwrap(),
            context: Context {
                jid: "1".into(),
                minion_id: "local".into(),
                user: None,
            },
        }
    }

    #[derive(Deserialize, Debug, PartialEq)]
    struct Ab {
        a: String,
        #[serde(default)]
        b: Option<i64>,
    }

    #[test]
    fn positional_and_keyword_bind_to_names() {
        let got: Ab = call(json!(["x"]), json!({"b": 2}))
            .bind(&["a", "b"])
            .unwrap();
        assert_eq!(
            got,
            Ab {
                a: "x".into(),
                b: Some(2)
            }
        );
        let got: Ab = call(json!([]), json!({"a": "y", "__pub_jid": "1"}))
            .bind(&["a", "b"])
            .unwrap();
        assert_eq!(got.a, "y");
    }

    #[test]
    fn python_style_errors() {
        let err = call(json!([1, 2, 3]), json!({}))
            .bind::<Ab>(&["a", "b"])
            .unwrap_err();
        assert_eq!(
            err.message,
            "f() takes 2 positional arguments but 3 were given"
        );
        let err = call(json!(["x"]), json!({"a": "y"}))
            .bind::<Ab>(&["a", "b"])
            .unwrap_err();
        assert_eq!(err.message, "f() got multiple values for argument 'a'");
        let err = call(json!(["x"]), json!({"c": true}))
            .bind::<Ab>(&["a", "b"])
            .unwrap_err();
        assert_eq!(
            err.message,
            "The following keyword arguments are not valid: c=True"
        );
        let err = call(json!([]), json!({}))
            .bind::<Ab>(&["a", "b"])
            .unwrap_err();
        assert_eq!(
            err.message,
            "f() missing 1 required positional argument: 'a'"
        );
        assert_eq!(err.kind, crate::ErrorKind::BadArguments);
    }

    #[test]
    fn defaults_fill_what_the_call_left_out() {
        let got: Ab = call(json!(["x"]), json!({})).bind(&["a", "b=7"]).unwrap();
        assert_eq!(got.b, Some(7));
        let got: Ab = call(json!(["x", 1]), json!({}))
            .bind(&["a", "b=7"])
            .unwrap();
        assert_eq!(got.b, Some(1));
        let got: Ab = call(json!([]), json!({"b": 2, "a": "y"}))
            .bind(&["a", "b=7"])
            .unwrap();
        assert_eq!(got.b, Some(2));
        let err = call(json!([]), json!({"b=7": 1}))
            .bind::<Ab>(&["a", "b=7"])
            .unwrap_err();
        assert!(err.message.contains("not valid"), "{}", err.message);
    }

    #[test]
    fn unit_takes_no_arguments() {
        call(json!([]), json!({})).bind::<()>(&[]).unwrap();
        assert!(call(json!([1]), json!({})).bind::<()>(&[]).is_err());
    }

    #[test]
    fn varargs_accept_extras() {
        #[derive(Deserialize)]
        struct None_ {}
        call(json!([1, 2]), json!({"z": 1}))
            .bind::<None_>(&["*args", "**kwargs"])
            .unwrap();
    }
}
