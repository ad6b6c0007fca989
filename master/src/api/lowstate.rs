//! salt-api's lowstate: the body of `POST /`, a list of chunks, each one
//! client call (`{"client": "local", "tgt": "*", "fun": "test.ping"}`).
//!
//! Parsing is by hand over JSON values rather than a derived struct so a
//! bad request names the exact field (`[1].timeout`), and so the target is
//! checked here: a job the maids would reject as malformed is a 400 now.

use std::time::Duration;

use serde_json::{Map, Value};

use super::error::ApiError;
use crate::binding::{BadCall, Bound, Form};
use crate::target::{self, TargetError, TargetType};
use crate::{binding, runners::jobs as job_runners};

/// How long a `local` call waits when the chunk gives no `timeout`, as
/// `maid run` and Salt's default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

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
    /// Run on the targeted minions a batch at a time (`batch`: a count or
    /// a percentage), answering with every return.
    LocalBatch,
    /// Run on `subset` of the targeted minions that have the function
    /// (asked with `sys.list_functions`), picked at random.
    LocalSubset,
    /// A function the master runs itself ([`crate::runners`], [`crate::wheel`]).
    Master(Form),
    /// One the master runs in the background (`runner_async`,
    /// `wheel_async`), answering at once with its jid and tag; its
    /// return comes as an event.
    MasterAsync(Form),
}

/// One checked chunk.
#[derive(Debug, Clone)]
pub struct Chunk {
    pub client: Client,
    /// The target (minion clients; `*` for the master's).
    pub tgt: Value,
    pub tgt_type: TargetType,
    pub tgt_type_name: String,
    pub fun: String,
    pub arg: Vec<Value>,
    pub kwarg: Map<String, Value>,
    /// The chunk's own timeout, if it gave one.
    pub timeout: Option<Duration>,
    /// `full_return`: each minion's return with its retcode and jid.
    pub full_return: bool,
    /// `local_batch`'s `batch`.
    pub batch: Option<String>,
    /// `local_batch`'s `batch_wait` and `failhard`.
    pub pace: crate::batch::Pace,
    /// `local_subset`'s `subset`: how many of the targeted minions that
    /// have the function run it.
    pub subset: Option<usize>,
    /// A runner's or wheel's arguments bound to its parameters, or why
    /// they could not be (Salt answers that as the function's return).
    pub bound: Option<Result<Bound, BadCall>>,
    /// `delimiter` (as `salt --delimiter`), when not the default `:`.
    pub delimiter: Option<String>,
}

impl Chunk {
    /// How long a `local` call waits for returns.
    pub fn wait(&self) -> Duration {
        self.timeout.unwrap_or(DEFAULT_TIMEOUT)
    }

    /// Whether the chunk publishes a job to maids (which each remember
    /// its jid): the minion clients, and the runners that ask every
    /// minion (`manage.status`/`up`/`down`/`versions`, `jobs.active`).
    pub fn publishes(&self) -> bool {
        match self.client {
            Client::Local | Client::LocalAsync | Client::LocalBatch | Client::LocalSubset => true,
            Client::Master(form) | Client::MasterAsync(form) => {
                form == Form::Runner && crate::runners::asks(&self.fun).is_some()
            }
        }
    }

    /// The job whose returns the chunk reads, if it reads one
    /// ([`job_runners::job_read`]).
    pub fn job_read(&self) -> Option<String> {
        match (self.client, &self.bound) {
            (Client::Master(form) | Client::MasterAsync(form), Some(Ok(bound))) => {
                job_runners::job_read(form, &self.fun, bound)
            }
            _ => None,
        }
    }
}

/// How many minions `local_subset` picks unless told (Salt's `cmd_subset`).
pub const DEFAULT_SUBSET: usize = 3;

/// Salt's `pillar_exact`, which maid's master does not evaluate: it
/// selects no one.
const PILLAR_EXACT: &str = "pillar_exact";

/// Keys of a chunk that are never a runner's or wheel's keyword argument
/// (Salt pops the credentials and the client; netapi takes `timeout` and
/// `full_return`).
const NOT_KWARGS: [&str; 10] = [
    "client",
    "fun",
    "arg",
    "kwarg",
    "username",
    "password",
    "eauth",
    "token",
    "timeout",
    "full_return",
];

/// Check a lowstate: a list of chunks (a single chunk is made a list of
/// one by [`media`](super::media)). `max_timeout` bounds each chunk's
/// `timeout`; `nodegroups` (the master's) expand `tgt_type: nodegroup`
/// and `N@` words, as Salt's LocalClient does before it publishes.
pub fn parse(
    lowstate: Value,
    max_timeout: f64,
    nodegroups: &Map<String, Value>,
) -> Result<Vec<Chunk>, ApiError> {
    let items = match lowstate {
        Value::Array(items) => items,
        obj @ Value::Object(_) => vec![obj],
        _ => return Err(ApiError::bad("body", "Lowstates must be a list")),
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

/// Check chunk `i` of a lowstate: what every client reads (`client`,
/// `fun`, `full_return`, `timeout`), then a master client's arguments or
/// a minion client's target, arguments and batch or subset. The first
/// fault found is the answer, so this order is part of the API.
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
    let client = client_of(obj, &field)?;
    let fun = fun_of(obj, &field)?;
    let full_return = obj
        .get("full_return")
        .is_some_and(maid_salt::python::truthy);
    let timeout = timeout_of(obj, &field, max_timeout)?;
    if let Client::Master(form) | Client::MasterAsync(form) = client {
        let mut chunk = master_chunk(obj, form, fun, timeout, full_return, &field)?;
        chunk.client = client;
        return Ok(chunk);
    }
    let tgt = tgt_of(obj, &field)?;
    let (type_field, tgt_type_name) = tgt_type_of(obj, &field)?;
    let delimiter = delimiter_of(obj, &field)?;
    let (tgt, tgt_type, tgt_type_name) =
        resolve_target(tgt, tgt_type_name, type_field, nodegroups, &field)?;
    let (arg, kwarg) = minion_args(obj, &field)?;
    let batch = batch_of(obj, client, &field)?;
    let pace = pace_of(obj, client, &field, max_timeout)?;
    let subset = subset_of(obj, client, &field)?;
    Ok(Chunk {
        client,
        tgt,
        tgt_type,
        tgt_type_name,
        fun,
        arg,
        kwarg,
        timeout,
        full_return,
        batch,
        pace,
        subset,
        bound: None,
        delimiter,
    })
}

/// The chunk's `client`, which it must name.
fn client_of(obj: &Map<String, Value>, field: &dyn Fn(&str) -> String) -> Result<Client, ApiError> {
    match obj.get("client") {
        Some(Value::String(c)) => match c.as_str() {
            "local" => Ok(Client::Local),
            "local_async" => Ok(Client::LocalAsync),
            "local_batch" => Ok(Client::LocalBatch),
            "local_subset" => Ok(Client::LocalSubset),
            "runner" => Ok(Client::Master(Form::Runner)),
            "wheel" => Ok(Client::Master(Form::Wheel)),
            "runner_async" => Ok(Client::MasterAsync(Form::Runner)),
            "wheel_async" => Ok(Client::MasterAsync(Form::Wheel)),
            _ => Err(ApiError::bad(
                field("client"),
                format!(
                    "client `{c}` is not supported; use local, local_async, local_batch, \
                     local_subset, runner, runner_async, wheel or wheel_async"
                ),
            )),
        },
        Some(_) => Err(ApiError::bad(field("client"), "must be a string")),
        None => Err(ApiError::bad(field("client"), "is required")),
    }
}

/// The chunk's `fun`: required, and not blank.
fn fun_of(obj: &Map<String, Value>, field: &dyn Fn(&str) -> String) -> Result<String, ApiError> {
    match obj.get("fun") {
        Some(Value::String(f)) if !f.trim().is_empty() => Ok(f.clone()),
        Some(Value::String(_)) => Err(ApiError::bad(field("fun"), "is empty")),
        Some(_) => Err(ApiError::bad(field("fun"), "must be a string")),
        None => Err(ApiError::bad(field("fun"), "is required")),
    }
}

/// A minion client's `tgt`: a string, or a list of strings (a `list`
/// target).
fn tgt_of(obj: &Map<String, Value>, field: &dyn Fn(&str) -> String) -> Result<Value, ApiError> {
    match obj.get("tgt") {
        Some(t @ Value::String(_)) => Ok(t.clone()),
        Some(Value::Array(items)) if items.iter().all(Value::is_string) => {
            Ok(Value::Array(items.clone()))
        }
        Some(_) => Err(ApiError::bad(
            field("tgt"),
            "must be a string or a list of strings",
        )),
        None => Err(ApiError::bad(field("tgt"), "is required")),
    }
}

/// The target type's name (`glob` unless given) and the field that gave
/// it, which a bad type is blamed on: `expr_form` is the older name of
/// `tgt_type`, read only when `tgt_type` is absent.
fn tgt_type_of(
    obj: &Map<String, Value>,
    field: &dyn Fn(&str) -> String,
) -> Result<(&'static str, String), ApiError> {
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
    Ok((type_field, tgt_type_name))
}

/// The chunk's `delimiter`; `None` for the default `:` too, as Salt's
/// master sends none for it.
fn delimiter_of(
    obj: &Map<String, Value>,
    field: &dyn Fn(&str) -> String,
) -> Result<Option<String>, ApiError> {
    match obj.get("delimiter") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(d)) if d == target::DEFAULT_DELIM => Ok(None),
        Some(Value::String(d)) if d.is_empty() => {
            Err(ApiError::bad(field("delimiter"), "is empty"))
        }
        Some(Value::String(d)) => Ok(Some(d.clone())),
        Some(_) => Err(ApiError::bad(field("delimiter"), "must be a string")),
    }
}

/// The target as the maids will see it: nodegroups expanded,
/// `pillar_exact` made empty, and checked by evaluating it once, so what every
/// maid would reject is a 400 here. Answers the target, its type and the
/// type's name.
fn resolve_target(
    tgt: Value,
    tgt_type_name: String,
    type_field: &str,
    nodegroups: &Map<String, Value>,
    field: &dyn Fn(&str) -> String,
) -> Result<(Value, TargetType, String), ApiError> {
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
    // `pillar` and `pillar_pcre` are evaluated on the master's pillar when
    // the job is published; `pillar_exact` selects no one, as a Salt
    // master whose pillar lacks the key finds no minion. An empty list
    // says so to every check after this.
    let (tgt, tgt_type) = if tgt_type_name == PILLAR_EXACT {
        (Value::Array(vec![]), TargetType::List)
    } else {
        let t = TargetType::parse(&tgt_type_name)
            .map_err(|e| ApiError::bad(field(type_field), e.to_string()))?;
        (tgt, t)
    };
    // Evaluating the target once finds what every maid would reject.
    if let Err(e) = target::matches(&tgt, tgt_type, "", &Map::new()) {
        let name = match e {
            TargetError::UnknownType(_) => type_field,
            _ => "tgt",
        };
        return Err(ApiError::bad(field(name), e.to_string()));
    }
    Ok((tgt, tgt_type, tgt_type_name))
}

/// A minion client's `arg` and `kwarg`, which go to the maids as given.
fn minion_args(
    obj: &Map<String, Value>,
    field: &dyn Fn(&str) -> String,
) -> Result<(Vec<Value>, Map<String, Value>), ApiError> {
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
    Ok((arg, kwarg))
}

/// `local_batch`'s `batch` (`10%` unless given); `None` for any other
/// client, which ignores the key.
fn batch_of(
    obj: &Map<String, Value>,
    client: Client,
    field: &dyn Fn(&str) -> String,
) -> Result<Option<String>, ApiError> {
    if client != Client::LocalBatch {
        return Ok(None);
    }
    match obj.get("batch") {
        Some(Value::String(b)) if crate::batch::size(b, 1).is_some() => Ok(Some(b.clone())),
        Some(Value::Number(n)) if n.as_u64().is_some_and(|n| n > 0) => Ok(Some(n.to_string())),
        None | Some(Value::Null) => Ok(Some("10%".to_string())),
        Some(_) => Err(ApiError::bad(
            field("batch"),
            "must be a count of minions or a percentage (`10%`)",
        )),
    }
}

/// `local_batch`'s `failhard` and `batch_wait`, as `cmd_batch` reads
/// them: `failhard` by Python's truth, and `int(batch_wait)`, at most
/// `max_timeout`. Any other client gets the default pace.
fn pace_of(
    obj: &Map<String, Value>,
    client: Client,
    field: &dyn Fn(&str) -> String,
    max_timeout: f64,
) -> Result<crate::batch::Pace, ApiError> {
    if client != Client::LocalBatch {
        return Ok(crate::batch::Pace::default());
    }
    Ok(crate::batch::Pace {
        failhard: obj.get("failhard").is_some_and(maid_salt::python::truthy),
        wait: match obj.get("batch_wait") {
            None | Some(Value::Null) => Duration::ZERO,
            Some(v) => v
                .as_f64()
                .filter(|w| w.is_finite())
                .map(f64::trunc)
                .or_else(|| {
                    v.as_str()
                        .and_then(|s| s.trim().parse::<i64>().ok())
                        .map(|n| n as f64)
                })
                .filter(|w| (0.0..=max_timeout).contains(w))
                .map(Duration::from_secs_f64)
                .ok_or_else(|| {
                    ApiError::bad(field("batch_wait"), "must be a whole number of seconds")
                })?,
        },
    })
}

/// `local_subset`'s `subset` ([`DEFAULT_SUBSET`] unless given); `None`
/// for any other client.
fn subset_of(
    obj: &Map<String, Value>,
    client: Client,
    field: &dyn Fn(&str) -> String,
) -> Result<Option<usize>, ApiError> {
    if client != Client::LocalSubset {
        return Ok(None);
    }
    Ok(Some(match obj.get("subset") {
        None | Some(Value::Null) => DEFAULT_SUBSET,
        Some(v) => v
            .as_u64()
            .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| ApiError::bad(field("subset"), "must be a count of minions"))?,
    }))
}

/// The chunk's `timeout`, bounded by `max_timeout`.
fn timeout_of(
    obj: &Map<String, Value>,
    field: &dyn Fn(&str) -> String,
    max_timeout: f64,
) -> Result<Option<Duration>, ApiError> {
    let Some(v) = obj.get("timeout").filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    // Form-minded clients send numbers as strings; Salt takes both.
    let secs = match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    };
    match secs {
        Some(s) if s.is_finite() && (MIN_TIMEOUT..=max_timeout).contains(&s) => {
            Ok(Some(Duration::from_secs_f64(s)))
        }
        _ => Err(ApiError::bad(
            field("timeout"),
            format!("must be a number of seconds from {MIN_TIMEOUT} to {max_timeout}"),
        )),
    }
}

/// A runner or wheel chunk: its arguments read as `_reformat_low` reads
/// them.
fn master_chunk(
    obj: &Map<String, Value>,
    form: Form,
    fun: String,
    timeout: Option<Duration>,
    full_return: bool,
    field: &dyn Fn(&str) -> String,
) -> Result<Chunk, ApiError> {
    if !binding::exists(form, &fun) {
        return Err(ApiError::bad(
            field("fun"),
            format!("'{fun}' is not available as a {} function", form.name()),
        ));
    }
    let arg = match obj.get("arg") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a.clone(),
        Some(one) => vec![one.clone()],
    };
    let (arg, mut kwarg) = maid_salt::args::parse_input(arg, false);
    match obj.get("kwarg") {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => kwarg.extend(m.clone()),
        Some(_) => return Err(ApiError::bad(field("kwarg"), "must be an object")),
    }
    for (k, v) in obj {
        if !NOT_KWARGS.contains(&k.as_str()) {
            kwarg.insert(k.clone(), v.clone());
        }
    }
    let bound = binding::bind(form, &fun, arg.clone(), &kwarg);
    Ok(Chunk {
        client: Client::Master(form),
        tgt: Value::String("*".into()),
        tgt_type: TargetType::Glob,
        tgt_type_name: "glob".into(),
        fun,
        arg,
        kwarg,
        timeout,
        full_return,
        batch: None,
        pace: crate::batch::Pace::default(),
        subset: None,
        bound: Some(bound),
        delimiter: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lit(s: &str) -> Value {
        serde_json::from_str(s).unwrap()
    }

    #[test]
    fn runner_arguments_are_read_as_reformat_low_reads_them() {
        // pepper without X-Salt-Version: `jid=…` becomes a top-level key.
        let c = &parse(
            lit(
                r#"{"client": "runner", "fun": "jobs.lookup_jid", "jid": "20261124230417123456",
                    "full_return": true, "timeout": 9}"#,
            ),
            60.0,
            &Map::new(),
        )
        .unwrap()[0];
        assert_eq!(c.client, Client::Master(Form::Runner));
        assert!(c.full_return);
        let bound = c.bound.clone().unwrap().unwrap();
        assert_eq!(bound["jid"], json!("20261124230417123456"));
        assert!(!bound.contains_key("timeout"));
        // The CLI style: `key=value` words in `arg`, YAML-read.
        let c = &parse(
            lit(
                r#"{"client": "runner", "fun": "manage.status", "arg": ["tgt=web*", "timeout=2"]}"#,
            ),
            60.0,
            &Map::new(),
        )
        .unwrap()[0];
        let bound = c.bound.clone().unwrap().unwrap();
        assert_eq!(
            (&bound["tgt"], &bound["timeout"]),
            (&json!("web*"), &json!(2))
        );
        // Bad arguments are the function's answer, not a bad request.
        let c = &parse(
            lit(r#"{"client": "runner", "fun": "jobs.lookup_jid"}"#),
            60.0,
            &Map::new(),
        )
        .unwrap()[0];
        assert!(c.bound.clone().unwrap().is_err());
        assert_eq!(
            field_of(r#"{"client": "wheel", "fun": "key.nope"}"#),
            "[0].fun"
        );
    }

    #[test]
    fn async_master_clients_and_subsets_read_as_salt_api_reads_them() {
        let one = |body: &str| parse(lit(body), 60.0, &Map::new()).unwrap().remove(0);
        let c = one(r#"{"client": "runner_async", "fun": "manage.up"}"#);
        assert_eq!(c.client, Client::MasterAsync(Form::Runner));
        assert!(c.bound.unwrap().is_ok());
        let c = one(r#"{"client": "wheel_async", "fun": "key.list", "match": "acc"}"#);
        assert_eq!(c.client, Client::MasterAsync(Form::Wheel));
        assert_eq!(c.bound.unwrap().unwrap()["match"], "acc");
        let c = one(r#"{"client": "local_subset", "tgt": "*", "fun": "test.ping"}"#);
        assert_eq!((c.client, c.subset), (Client::LocalSubset, Some(3)));
        let c = one(r#"{"client": "local_subset", "tgt": "*", "fun": "a.b", "subset": "2"}"#);
        assert_eq!(c.subset, Some(2));
        assert_eq!(
            field_of(r#"{"client": "local_subset", "tgt": "*", "fun": "a.b", "subset": -1}"#),
            "[0].subset"
        );
        assert_eq!(
            field_of(r#"{"client": "wheel_async", "fun": "key.nope"}"#),
            "[0].fun"
        );
    }

    #[test]
    fn pillar_targets_are_kept_for_the_master_and_exact_selects_no_one() {
        let chunk = |t: &str| {
            let body = format!(
                r#"{{"client": "local", "tgt": "role:web", "tgt_type": "{t}", "fun": "test.ping"}}"#
            );
            parse(lit(&body), 60.0, &Map::new()).unwrap().remove(0)
        };
        for (t, kind) in [
            ("pillar", TargetType::Pillar),
            ("pillar_pcre", TargetType::PillarPcre),
        ] {
            let c = chunk(t);
            assert_eq!((c.tgt_type, &c.tgt), (kind, &json!("role:web")), "{t}");
        }
        let c = chunk(PILLAR_EXACT);
        assert_eq!((c.tgt_type, &c.tgt), (TargetType::List, &json!([])));
        assert_eq!(c.tgt_type_name, PILLAR_EXACT);
    }

    /// `delimiter` is the job's (salt-api passes it to LocalClient), not
    /// the function's; `:` is no delimiter at all, as Salt's master sends
    /// none for it.
    #[test]
    fn a_delimiter_goes_with_the_job() {
        let one = |body: &str| parse(lit(body), 60.0, &Map::new()).unwrap().remove(0);
        let c = one(
            r#"{"client": "local", "tgt": "os;Debian", "tgt_type": "grain", "fun": "test.kwarg", "delimiter": ";"}"#,
        );
        assert_eq!(c.delimiter.as_deref(), Some(";"));
        assert!(c.kwarg.is_empty());
        let c = one(r#"{"client": "local", "tgt": "*", "fun": "test.ping", "delimiter": ":"}"#);
        assert_eq!(c.delimiter, None);
        for bad in [r#""""#, "1", "[]"] {
            let body = format!(
                r#"{{"client": "local", "tgt": "*", "fun": "test.ping", "delimiter": {bad}}}"#
            );
            assert_eq!(field_of(&body), "[0].delimiter", "{bad}");
        }
    }

    #[test]
    fn batches_are_counts_or_percentages() {
        let c = &parse(
            lit(r#"{"client": "local_batch", "tgt": "*", "fun": "test.ping", "batch": "50%"}"#),
            60.0,
            &Map::new(),
        )
        .unwrap()[0];
        assert_eq!(c.batch.as_deref(), Some("50%"));
        assert_eq!(
            field_of(r#"{"client": "local_batch", "tgt": "*", "fun": "a.b", "batch": "lots"}"#),
            "[0].batch"
        );
    }

    fn field_of(body: &str) -> String {
        let value = serde_json::from_str(body).unwrap_or(Value::String(body.into()));
        match parse(value, 60.0, &Map::new()) {
            Err(ApiError::BadRequest { field, .. }) => field,
            other => panic!("{body}: {other:?}"),
        }
    }

    #[test]
    fn nodegroups_are_expanded_before_publishing() {
        let groups = serde_json::json!({"dbs": ["db1", "db2"], "web": "web* or N@dbs"});
        let groups = groups.as_object().unwrap();
        let c = &parse(
            lit(
                r#"{"client": "local", "tgt": "web", "tgt_type": "nodegroup", "fun": "test.ping"}"#,
            ),
            60.0,
            groups,
        )
        .unwrap()[0];
        assert_eq!(c.tgt_type, TargetType::Compound);
        assert_eq!(c.tgt, Value::String("( web* or L@db1,db2 )".into()));
        let c = &parse(
            lit(r#"{"client": "local", "tgt": "N@dbs and not db2", "tgt_type": "compound", "fun": "test.ping"}"#),
            60.0,
            groups,
        )
        .unwrap()[0];
        assert_eq!(c.tgt, Value::String("L@db1,db2 and not db2".into()));
        let unknown = parse(
            lit(
                r#"{"client": "local", "tgt": "nope", "tgt_type": "nodegroup", "fun": "test.ping"}"#,
            ),
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
            lit(
                r#"{"client": "local_async", "tgt": "web1,web2", "expr_form": "list",
                 "fun": "cmd.run", "arg": "uptime", "timeout": "2.5", "extra": 1}"#,
            ),
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
            lit(r#"[{"client": "local", "tgt": "*", "fun": "test.ping"}]"#),
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
            "[1].fun"
        );
        assert_eq!(
            field_of(&format!(
                r#"[{ok}, {{"client": "ssh", "tgt": "*", "fun": "x.y"}}]"#
            )),
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
