//! salt-api's lowstate: the body of `POST /`, a list of chunks, each one
//! client call (`{"client": "local", "tgt": "*", "fun": "test.ping"}`).
//!
//! Parsing is by hand over JSON values rather than a derived struct so a
//! bad request names the exact field (`[1].timeout`), and so the target is
//! checked here: a job the maids would reject as malformed is a 400 now.

use std::time::Duration;

use serde_json::{Map, Value};

use super::error::ApiError;
use crate::target::{self, TargetError, TargetType};

/// How long a `local` call waits when the chunk gives no `timeout`, as
/// `maid run` and Salt's default.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// The shortest `timeout` taken, in seconds: anything shorter would reach
/// the maids as zero, which they reject.
const MIN_TIMEOUT: f64 = 0.001;

/// Which salt-api client runs a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    /// Publish, wait for the returns, answer with them.
    Local,
    /// Publish and answer at once with the jid and the expected minions.
    LocalAsync,
}

/// One checked chunk.
#[derive(Debug, Clone)]
pub struct Chunk {
    pub client: Client,
    pub tgt: Value,
    pub tgt_type: TargetType,
    pub tgt_type_name: String,
    pub fun: String,
    pub arg: Vec<Value>,
    pub kwarg: Map<String, Value>,
    /// The chunk's own timeout, if it gave one.
    pub timeout: Option<Duration>,
}

impl Chunk {
    /// How long a `local` call waits for returns.
    pub fn wait(&self) -> Duration {
        self.timeout.unwrap_or(DEFAULT_TIMEOUT)
    }
}

/// Parse a lowstate body: a list of chunks, or one chunk on its own (as
/// salt-api also takes). `max_timeout` bounds each chunk's `timeout`;
/// `nodegroups` (the master's) expand `tgt_type: nodegroup` and `N@` words,
/// as Salt's LocalClient does before it publishes.
pub fn parse(
    body: &[u8],
    max_timeout: f64,
    nodegroups: &Map<String, Value>,
) -> Result<Vec<Chunk>, ApiError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad("body", format!("not JSON: {e}")))?;
    let items = match value {
        Value::Array(items) => items,
        obj @ Value::Object(_) => vec![obj],
        _ => return Err(ApiError::bad("body", "must be a list of lowstate chunks")),
    };
    if items.is_empty() {
        return Err(ApiError::bad("body", "the lowstate list is empty"));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, item)| chunk(i, item, max_timeout, nodegroups))
        .collect()
}

fn chunk(
    i: usize,
    item: &Value,
    max_timeout: f64,
    nodegroups: &Map<String, Value>,
) -> Result<Chunk, ApiError> {
    let field = |name: &str| format!("[{i}].{name}");
    let Some(obj) = item.as_object() else {
        return Err(ApiError::bad(format!("[{i}]"), "a chunk must be an object"));
    };
    let client = match obj.get("client") {
        Some(Value::String(c)) if c == "local" => Client::Local,
        Some(Value::String(c)) if c == "local_async" => Client::LocalAsync,
        Some(Value::String(c)) => {
            return Err(ApiError::bad(
                field("client"),
                format!("client `{c}` is not supported; use local or local_async"),
            ));
        }
        Some(_) => return Err(ApiError::bad(field("client"), "must be a string")),
        None => return Err(ApiError::bad(field("client"), "is required")),
    };
    let fun = match obj.get("fun") {
        Some(Value::String(f)) if !f.trim().is_empty() => f.clone(),
        Some(Value::String(_)) => return Err(ApiError::bad(field("fun"), "is empty")),
        Some(_) => return Err(ApiError::bad(field("fun"), "must be a string")),
        None => return Err(ApiError::bad(field("fun"), "is required")),
    };
    let tgt = match obj.get("tgt") {
        Some(t @ Value::String(_)) => t.clone(),
        Some(Value::Array(items)) if items.iter().all(Value::is_string) => {
            Value::Array(items.clone())
        }
        Some(_) => {
            return Err(ApiError::bad(
                field("tgt"),
                "must be a string or a list of strings",
            ));
        }
        None => return Err(ApiError::bad(field("tgt"), "is required")),
    };
    // `expr_form` is the older name of `tgt_type`.
    let (type_field, type_value) = match (obj.get("tgt_type"), obj.get("expr_form")) {
        (Some(t), _) => ("tgt_type", Some(t)),
        (None, Some(t)) => ("expr_form", Some(t)),
        (None, None) => ("tgt_type", None),
    };
    let tgt_type_name = match type_value {
        None => "glob".to_string(),
        Some(Value::String(t)) => t.clone(),
        Some(_) => return Err(ApiError::bad(field(type_field), "must be a string")),
    };
    // Nodegroups are the master's: expanded into compound words here.
    let (tgt, tgt_type_name) = match target::expand_nodegroups(tgt, &tgt_type_name, nodegroups) {
        Ok((tgt, name)) => (tgt, name.to_string()),
        Err(e @ target::NodegroupError::Unknown(_)) => {
            return Err(ApiError::bad(
                field("tgt"),
                format!("{e} in the master config file"),
            ));
        }
        Err(e) => return Err(ApiError::bad(field("tgt"), e.to_string())),
    };
    let tgt_type = TargetType::parse(&tgt_type_name)
        .map_err(|e| ApiError::bad(field(type_field), e.to_string()))?;
    // Evaluating the target once finds what every maid would reject.
    if let Err(e) = target::matches(&tgt, tgt_type, "", &Map::new()) {
        let name = match e {
            TargetError::UnknownType(_) => type_field,
            _ => "tgt",
        };
        return Err(ApiError::bad(field(name), e.to_string()));
    }
    let arg = match obj.get("arg") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a.clone(),
        Some(Value::Object(_)) => {
            return Err(ApiError::bad(
                field("arg"),
                "must be a list (keyword arguments go in kwarg)",
            ));
        }
        // salt-api takes a single argument without the list.
        Some(one) => vec![one.clone()],
    };
    let kwarg = match obj.get("kwarg") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => return Err(ApiError::bad(field("kwarg"), "must be an object")),
    };
    let timeout = match obj.get("timeout") {
        None | Some(Value::Null) => None,
        Some(v) => {
            // Form-minded clients send numbers as strings; Salt takes both.
            let secs = match v {
                Value::Number(n) => n.as_f64(),
                Value::String(s) => s.trim().parse::<f64>().ok(),
                _ => None,
            };
            match secs {
                Some(s) if s.is_finite() && (MIN_TIMEOUT..=max_timeout).contains(&s) => {
                    Some(Duration::from_secs_f64(s))
                }
                _ => {
                    return Err(ApiError::bad(
                        field("timeout"),
                        format!("must be a number of seconds from {MIN_TIMEOUT} to {max_timeout}"),
                    ));
                }
            }
        }
    };
    Ok(Chunk {
        client,
        tgt,
        tgt_type,
        tgt_type_name,
        fun,
        arg,
        kwarg,
        timeout,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(body: &str) -> String {
        match parse(body.as_bytes(), 60.0, &Map::new()) {
            Err(ApiError::BadRequest { field, .. }) => field,
            other => panic!("{body}: {other:?}"),
        }
    }

    #[test]
    fn nodegroups_are_expanded_before_publishing() {
        let groups = serde_json::json!({"dbs": ["db1", "db2"], "web": "web* or N@dbs"});
        let groups = groups.as_object().unwrap();
        let c = &parse(
            br#"{"client": "local", "tgt": "web", "tgt_type": "nodegroup", "fun": "test.ping"}"#,
            60.0,
            groups,
        )
        .unwrap()[0];
        assert_eq!(c.tgt_type, TargetType::Compound);
        assert_eq!(c.tgt, Value::String("( web* or L@db1,db2 )".into()));
        let c = &parse(
            br#"{"client": "local", "tgt": "N@dbs and not db2", "tgt_type": "compound", "fun": "test.ping"}"#,
            60.0,
            groups,
        )
        .unwrap()[0];
        assert_eq!(c.tgt, Value::String("L@db1,db2 and not db2".into()));
        let unknown = parse(
            br#"{"client": "local", "tgt": "nope", "tgt_type": "nodegroup", "fun": "test.ping"}"#,
            60.0,
            groups,
        );
        assert!(
            matches!(unknown, Err(ApiError::BadRequest { .. })),
            "{unknown:?}"
        );
    }

    #[test]
    fn a_chunk_with_aliases_and_defaults() {
        let chunks = parse(
            br#"{"client": "local_async", "tgt": "web1,web2", "expr_form": "list",
                 "fun": "cmd.run", "arg": "uptime", "timeout": "2.5", "extra": 1}"#,
            60.0,
            &Map::new(),
        )
        .unwrap();
        let c = &chunks[0];
        assert_eq!(c.client, Client::LocalAsync);
        assert_eq!(c.tgt_type, TargetType::List);
        assert_eq!(c.arg, vec![Value::String("uptime".into())]);
        assert_eq!(c.wait(), Duration::from_millis(2500));
        let c = &parse(
            br#"[{"client": "local", "tgt": "*", "fun": "test.ping"}]"#,
            60.0,
            &Map::new(),
        )
        .unwrap()[0];
        assert_eq!((c.tgt_type, c.wait()), (TargetType::Glob, DEFAULT_TIMEOUT));
    }

    #[test]
    fn errors_name_the_field() {
        let ok = r#"{"client": "local", "tgt": "*", "fun": "test.ping"}"#;
        assert_eq!(field_of("nope"), "body");
        assert_eq!(field_of("[]"), "body");
        assert_eq!(field_of("[1]"), "[0]");
        assert_eq!(
            field_of(r#"{"tgt": "*", "fun": "test.ping"}"#),
            "[0].client"
        );
        assert_eq!(
            field_of(&format!(r#"[{ok}, {{"client": "runner", "fun": "x"}}]"#)),
            "[1].client"
        );
        assert_eq!(field_of(r#"{"client": "local", "tgt": "*"}"#), "[0].fun");
        assert_eq!(
            field_of(r#"{"client": "local", "tgt": 5, "fun": "a.b"}"#),
            "[0].tgt"
        );
        assert_eq!(
            field_of(r#"{"client": "local", "tgt": "(", "tgt_type": "pcre", "fun": "a.b"}"#),
            "[0].tgt"
        );
        assert_eq!(
            field_of(r#"{"client": "local", "tgt": "*", "expr_form": "range", "fun": "a.b"}"#),
            "[0].expr_form"
        );
        assert_eq!(
            field_of(r#"{"client": "local", "tgt": "*", "fun": "a.b", "kwarg": []}"#),
            "[0].kwarg"
        );
        for t in ["0", "-1", "1e-300", "1e300", "\"x\"", "true"] {
            assert_eq!(
                field_of(&format!(
                    r#"{{"client": "local", "tgt": "*", "fun": "a.b", "timeout": {t}}}"#
                )),
                "[0].timeout"
            );
        }
    }
}
