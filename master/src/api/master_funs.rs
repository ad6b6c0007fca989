//! salt-api's `runner` and `wheel` clients: functions the master runs
//! itself, with Salt's names, arguments and return shapes.
//!
//! * runner `jobs.lookup_jid`, `jobs.list_job`, `jobs.list_jobs`,
//!   `jobs.print_job`, `jobs.exit_success` read the job cache (the loads
//!   of [`jobcache`](crate::jobcache) and the maids' returns);
//!   `manage.status`, `manage.up`, `manage.down` ping the fleet;
//!   `manage.present`, `list_state` and their kin (and the `not_` ones)
//!   read who is connected from the registry, sending nothing.
//! * wheel `key.*` work on the master's maid keys, as `maid key` does
//!   ([`super::wheel`]).
//!
//! Arguments are read as Salt's `RunnerClient._reformat_low` reads them:
//! `arg` through `parse_input` (so `jid=…` strings are keyword
//! arguments), then `kwarg`, then any other key of the chunk; keywords a
//! function does not take are dropped (`ignore_invalid`).

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::bus::{BusError, Conn};
use crate::pki::{KeyState, Pki};
use crate::{jobcache, jobs};
use maid_salt::python::truthy;

pub use super::wheel::wheel;

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

/// Whom `manage.status`/`up`/`down` ping, from their bound arguments:
/// `tgt` (default `*`), `tgt_type` (default `glob`) and `timeout` in
/// seconds when one is given (a number, or a string that reads as one).
pub struct ManageTarget {
    pub tgt: Value,
    pub tgt_type: crate::target::TargetType,
    pub timeout: Option<f64>,
}

impl ManageTarget {
    pub fn of(bound: &Bound) -> Result<ManageTarget, crate::target::TargetError> {
        let tgt_type = bound
            .get("tgt_type")
            .and_then(Value::as_str)
            .unwrap_or("glob");
        let timeout = bound.get("timeout").and_then(|t| {
            t.as_f64()
                .or_else(|| t.as_str().and_then(|s| s.parse().ok()))
        });
        Ok(ManageTarget {
            tgt: bound.get("tgt").cloned().unwrap_or(json!("*")),
            tgt_type: crate::target::TargetType::parse(tgt_type)?,
            timeout: timeout.filter(|t| t.is_finite() && *t > 0.0),
        })
    }
}

/// `manage`'s split of the `selected` minions of a `test.ping` job into
/// those that returned (up) and the rest (down), each sorted.
pub fn up_down(
    selected: &std::collections::BTreeSet<String>,
    report: &jobs::Report,
) -> (Vec<String>, Vec<String>) {
    let up: std::collections::BTreeSet<String> =
        report.returns.iter().map(|r| r.id.clone()).collect();
    let down = selected.difference(&up).cloned().collect();
    (up.into_iter().collect(), down)
}

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
        (Form::Runner, name) if is_presence(name) => {
            vec![Param("subset", none()), Param("show_ip", f())]
        }
        (Form::Runner, "manage.up") => vec![
            Param("tgt", star()),
            Param("tgt_type", glob()),
            Param("timeout", none()),
            Param("gather_job_timeout", none()),
        ],
        (Form::Runner, "manage.down") => vec![
            Param("removekeys", f()),
            Param("tgt", star()),
            Param("tgt_type", glob()),
            Param("timeout", none()),
            Param("gather_job_timeout", none()),
        ],
        (Form::Wheel, "key.list_all") => vec![],
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

/// The runners that read one job's returns, whose jid they are given.
const ONE_JOB: [&str; 4] = [
    "jobs.lookup_jid",
    "jobs.list_job",
    "jobs.print_job",
    "jobs.exit_success",
];

/// The job whose returns a call reads, when it reads one: a caller that
/// may not read that job may not make the call (the API holds these
/// runners to what `GET /jobs/{jid}` allows; [`jobs_runner`] does not
/// check).
pub fn job_read(form: Form, fun: &str, bound: &Bound) -> Option<String> {
    if form == Form::Runner && ONE_JOB.contains(&fun) {
        bound.get("jid").map(jid_text)
    } else {
        None
    }
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
pub(super) fn fnmatch(name: &str, pattern: &str) -> bool {
    crate::target::matches(
        &Value::String(pattern.to_string()),
        crate::target::TargetType::Glob,
        name,
        &Map::new(),
    )
    .unwrap_or(false)
}

/// Salt's `split_input`: a list as it is, else comma-separated text.
fn split_input(v: &Value) -> Vec<String> {
    match v {
        Value::Array(items) => items.iter().map(jid_text).collect(),
        other => jid_text(other)
            .split(',')
            .map(|s| s.trim().to_string())
            .collect(),
    }
}

/// A time as `dateutil.parser.parse` reads the forms an operator gives
/// `jobs.list_jobs`: Salt's own StartTime (`2015, Mar 16 19:00`, seconds
/// and their fraction optional) and ISO 8601 (`2015-03-16 19:00`, `T`
/// between, a date alone at midnight).
fn parse_time(text: &str) -> Option<chrono::NaiveDateTime> {
    use chrono::{NaiveDate, NaiveDateTime};
    let text = text.trim();
    const FORMATS: [&str; 8] = [
        "%Y, %b %d %H:%M:%S%.f",
        "%Y, %b %d %H:%M",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M",
        "%Y-%m-%dT%H:%M",
        "%Y/%m/%d %H:%M:%S%.f",
        "%Y/%m/%d %H:%M",
    ];
    FORMATS
        .iter()
        .find_map(|f| NaiveDateTime::parse_from_str(text, f).ok())
        .or_else(|| {
            ["%Y-%m-%d", "%Y, %b %d", "%Y/%m/%d"]
                .iter()
                .find_map(|f| NaiveDate::parse_from_str(text, f).ok())
                .and_then(|d| d.and_hms_opt(0, 0, 0))
        })
}

/// `jobs.list_jobs`' filters over `described` (jid → description).
pub fn filter_jobs(described: Map<String, Value>, bound: &Bound) -> Result<Value, BadCall> {
    let search_function = bound.get("search_function").filter(|v| truthy(v));
    let search_target = bound.get("search_target").filter(|v| truthy(v));
    let search_metadata = bound.get("search_metadata").filter(|v| truthy(v));
    // `start_time` and `end_time` bound each job's StartTime, inclusive.
    let bound_time = |key: &str| -> Result<Option<chrono::NaiveDateTime>, BadCall> {
        match bound.get(key).filter(|v| truthy(v)) {
            None => Ok(None),
            Some(v) => {
                let text = jid_text(v);
                parse_time(&text)
                    .map(Some)
                    .ok_or_else(|| BadCall(format!("{key}: Unknown string format: {text}")))
            }
        }
    };
    let (start_time, end_time) = (bound_time("start_time")?, bound_time("end_time")?);
    let mut out = Map::new();
    for (jid, job) in described {
        let mut keep = true;
        if let Some(meta) = search_metadata {
            keep = match (
                meta.as_object(),
                job.get("Metadata").and_then(Value::as_object),
            ) {
                (Some(wanted), Some(have)) => wanted.iter().any(|(k, v)| have.get(k) == Some(v)),
                _ => false,
            };
        }
        if let (Some(st), true) = (search_target, keep) {
            let targets = match job.get("Target") {
                Some(Value::Array(a)) => a.iter().map(jid_text).collect(),
                Some(t) => vec![jid_text(t)],
                None => vec![],
            };
            let keys = split_input(st);
            keep = targets.iter().any(|t| keys.iter().any(|k| fnmatch(t, k)));
        }
        if let (Some(sf), true) = (search_function, keep) {
            let fun = job.get("Function").map(jid_text).unwrap_or_default();
            keep = split_input(sf).iter().any(|k| fnmatch(&fun, k));
        }
        if (start_time.is_some() || end_time.is_some()) && keep {
            let started = job
                .get("StartTime")
                .and_then(Value::as_str)
                .and_then(parse_time);
            keep = started.is_some_and(|t| {
                start_time.is_none_or(|s| t >= s) && end_time.is_none_or(|e| t <= e)
            });
        }
        if keep {
            out.insert(jid, job);
        }
    }
    Ok(match bound.get("outputter").filter(|v| truthy(v)) {
        Some(o) => json!({"outputter": o, "data": out}),
        None => Value::Object(out),
    })
}

/// Salt's `jobs.list_job`: the job's description from its load, the
/// minions it expected, and each return with its retcode and success
/// (with the key store `pki`, only the returns its accepted keys signed).
pub async fn list_job(
    conn: &mut Conn,
    pki: Option<&Pki>,
    jid: &str,
) -> Result<Map<String, Value>, BusError> {
    let mut out = Map::new();
    out.insert("jid".into(), json!(jid));
    match jobcache::get(conn, jid).await? {
        Some(load) => {
            // Salt's order: the description, the minions, the start time.
            let mut described = load.describe();
            let start = described.remove("StartTime");
            out.extend(described);
            out.insert("Minions".into(), json!(load.minions));
            out.extend(start.map(|s| ("StartTime".to_string(), s)));
        }
        None => {
            out.insert(
                "Error".into(),
                json!("Cannot contact returner or no job with this jid"),
            );
            out.insert("StartTime".into(), json!(jobcache::jid_to_time(jid)));
        }
    }
    let cached = jobs::cached(conn, jid, pki).await?;
    let mut result = Map::new();
    for r in &cached.returns {
        result.insert(
            r.id.clone(),
            json!({"return": r.ret, "retcode": r.retcode, "success": r.success}),
        );
    }
    out.insert("Result".into(), Value::Object(result));
    Ok(out)
}

/// The runner functions over the job cache (`jobs.*`), `visible` saying
/// which cached jobs the caller may list. Those that read one job
/// ([`job_read`]) read it whoever may see it: the caller decides first.
pub async fn jobs_runner(
    conn: &mut Conn,
    pki: Option<&Pki>,
    fun: &str,
    bound: &Bound,
    visible: impl Fn(&jobcache::Load) -> bool,
) -> Result<Result<Value, BadCall>, BusError> {
    let jid = bound.get("jid").map(jid_text).unwrap_or_default();
    let results = |job: &Map<String, Value>| {
        job.get("Result")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default()
    };
    let minions = |job: &Map<String, Value>| -> Vec<String> {
        job.get("Minions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect()
    };
    Ok(Ok(match fun {
        "jobs.lookup_jid" => {
            let job = list_job(conn, pki, &jid).await?;
            let results = results(&job);
            let mut ret = Map::new();
            if bound.get("returned").is_some_and(truthy) {
                for (id, r) in &results {
                    ret.insert(id.clone(), r.get("return").cloned().unwrap_or(Value::Null));
                }
            }
            if bound.get("missing").is_some_and(truthy) {
                for id in minions(&job) {
                    if !results.contains_key(&id) {
                        ret.insert(id, json!("Minion did not return"));
                    }
                }
            }
            Value::Object(ret)
        }
        "jobs.list_job" => Value::Object(list_job(conn, pki, &jid).await?),
        "jobs.print_job" => {
            let mut job = list_job(conn, pki, &jid).await?;
            job.remove("jid");
            json!({jid: job})
        }
        "jobs.exit_success" => {
            let job = list_job(conn, pki, &jid).await?;
            let results = results(&job);
            let mut ret = Map::new();
            for id in minions(&job) {
                let ok = results
                    .get(&id)
                    .and_then(|r| r.get("return"))
                    .is_some_and(truthy);
                ret.insert(id, json!(ok));
            }
            for (id, r) in &results {
                if r.get("return").is_some_and(truthy) {
                    ret.insert(id.clone(), json!(true));
                }
            }
            Value::Object(ret)
        }
        "jobs.list_jobs" => {
            let described: Map<String, Value> = jobcache::all(conn)
                .await?
                .into_iter()
                .filter(|load| visible(load))
                .map(|load| (load.jid.clone(), Value::Object(load.describe())))
                .collect();
            match filter_jobs(described, bound) {
                Ok(v) => v,
                Err(e) => return Ok(Err(e)),
            }
        }
        other => return Ok(Err(BadCall(format!("'{other}' is not available")))),
    }))
}

/// The runners that list the minions Salt's presence detection finds
/// connected (all `list_state` in Salt 3008).
const PRESENCE: [&str; 6] = [
    "manage.list_state",
    "manage.present",
    "manage.joined",
    "manage.allowed",
    "manage.alived",
    "manage.reaped",
];

/// Their `not_` twins (all `list_not_state`): accepted minions that are
/// not connected.
const NOT_PRESENT: [&str; 6] = [
    "manage.list_not_state",
    "manage.not_present",
    "manage.not_joined",
    "manage.not_allowed",
    "manage.not_alived",
    "manage.not_reaped",
];

/// Whether `fun` is one of the presence runners ([`presence`]).
pub fn is_presence(fun: &str) -> bool {
    PRESENCE.contains(&fun) || NOT_PRESENT.contains(&fun)
}

/// Salt's `manage.list_state` and `list_not_state` (and the names that
/// call them), from the registry: a maid is connected while its alive key
/// lives, as are the minions its syndic lists beneath it. `show_ip` names
/// the address each connects from: its first address that is not
/// loopback (`ipv4`, then `ipv6` grains), as Salt finds a local minion's.
/// The not-connected are the accepted minions (the key store's, or every
/// registered maid without one) that are not connected, `subset` keeping
/// those it names.
pub async fn presence(
    conn: &mut Conn,
    pki: Option<&Pki>,
    fun: &str,
    bound: &Bound,
) -> Result<Result<Value, BadCall>, BusError> {
    let registry = jobs::Registry::read(conn, pki).await?;
    let show_ip = bound.get("show_ip").is_some_and(truthy);
    let subset = bound.get("subset").filter(|v| truthy(v));
    // Python's `x in subset`: a list's items, or a string's substrings.
    let in_subset = |id: &str| match subset {
        None => true,
        Some(Value::Array(items)) => items.iter().any(|i| i.as_str() == Some(id)),
        Some(Value::String(s)) => s.contains(id),
        Some(other) => jid_text(other) == id,
    };
    let address = |grains: &Map<String, Value>| -> Option<String> {
        ["ipv4", "ipv6"].iter().find_map(|key| {
            grains
                .get(*key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .find(|a| !a.starts_with("127.") && *a != "::1")
                .map(str::to_string)
        })
    };
    let mut connected: BTreeMap<String, Option<String>> = BTreeMap::new();
    for (id, (alive, reg)) in &registry.maids {
        if *alive {
            connected.insert(id.clone(), reg.as_ref().and_then(|r| address(&r.grains)));
        }
    }
    for (id, (syndic, reg)) in &registry.beneath {
        if connected.contains_key(syndic) {
            connected.insert(id.clone(), address(&reg.grains));
        }
    }
    // With a subset, only those it names are looked for (Salt iterates
    // the subset itself).
    let listed: Vec<(String, Option<String>)> = match subset {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .filter_map(|id| connected.get(id).map(|ip| (id.to_string(), ip.clone())))
            .collect(),
        _ => connected.clone().into_iter().collect(),
    };
    if PRESENCE.contains(&fun) {
        return Ok(Ok(if show_ip {
            Value::Object(
                listed
                    .into_iter()
                    .map(|(id, ip)| (id, json!(ip.unwrap_or_default())))
                    .collect(),
            )
        } else {
            json!(listed.into_iter().map(|(id, _)| id).collect::<Vec<_>>())
        }));
    }
    let accepted: Vec<String> = match pki {
        Some(pki) => pki
            .list()
            .map(|mut l| l.remove(&KeyState::Accepted).unwrap_or_default())
            .unwrap_or_default(),
        None => registry.maids.keys().cloned().collect(),
    };
    Ok(Ok(json!(
        accepted
            .into_iter()
            .filter(|id| !connected.contains_key(id) && in_subset(id))
            .collect::<Vec<_>>()
    )))
}

/// `manage.status`, `manage.up` or `manage.down` from a ping's outcome:
/// the minions that answered and those expected that did not, sorted.
pub fn manage_answer(fun: &str, up: Vec<String>, down: Vec<String>) -> Value {
    match fun {
        "manage.up" => json!(up),
        "manage.down" => json!(down),
        _ => json!({"up": up, "down": down}),
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

    #[test]
    fn list_jobs_filters_as_salt() {
        let jobs = json!({
            "1": {"Function": "test.ping", "Target": "web*", "Metadata": {"a": 1},
                  "StartTime": "2015, Mar 16 19:00:00.123456"},
            "2": {"Function": "cmd.run", "Target": ["db1", "db2"],
                  "StartTime": "2015, Mar 18 22:00:00.000001"},
        });
        let jobs = jobs.as_object().unwrap().clone();
        let run = |kw: Value| {
            let bound = b("jobs.list_jobs", json!([]), kw).unwrap();
            let out = filter_jobs(jobs.clone(), &bound).unwrap();
            out.as_object().unwrap().keys().cloned().collect::<Vec<_>>()
        };
        assert_eq!(run(json!({})), ["1", "2"]);
        assert_eq!(run(json!({"search_function": "test.*"})), ["1"]);
        assert_eq!(run(json!({"search_target": "db2"})), ["2"]);
        assert_eq!(run(json!({"search_target": "web*,db1"})), ["1", "2"]);
        assert_eq!(run(json!({"search_metadata": {"a": 1}})), ["1"]);
        // Times as dateutil reads them; both bounds inclusive.
        assert_eq!(run(json!({"start_time": "2015, Mar 16 19:00"})), ["1", "2"]);
        assert_eq!(run(json!({"start_time": "2015-03-17"})), ["2"]);
        assert_eq!(run(json!({"end_time": "2015-03-17T00:00"})), ["1"]);
        assert_eq!(
            run(
                json!({"start_time": "2015/03/16 19:00:00.123456", "end_time": "2015, Mar 18 22:00"})
            ),
            ["1"]
        );
        assert_eq!(
            run(json!({"end_time": "2015, Mar 18 22:00:00.000001", "search_function": "cmd.*"})),
            ["2"]
        );
        let bound = b(
            "jobs.list_jobs",
            json!([]),
            json!({"start_time": "whenever"}),
        )
        .unwrap();
        assert_eq!(
            filter_jobs(jobs.clone(), &bound).unwrap_err().0,
            "start_time: Unknown string format: whenever"
        );
        let bound = b("jobs.list_jobs", json!([]), json!({"outputter": "yaml"})).unwrap();
        assert_eq!(
            filter_jobs(jobs, &bound).unwrap()["outputter"],
            json!("yaml")
        );
    }

    #[test]
    fn wheel_key_functions_move_keys_as_salt_key() {
        let dir = tempfile::tempdir().unwrap();
        let pki = Pki::new(dir.path());
        let key = |n: u8| {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD.encode(
                ed25519_dalek::SigningKey::from_bytes(&[n; 32])
                    .verifying_key()
                    .as_bytes(),
            )
        };
        pki.submit("web1", &key(1)).unwrap();
        pki.submit("web2", &key(2)).unwrap();
        pki.submit("db1", &key(3)).unwrap();
        let call = |fun: &str, kw: Value| {
            let bound = bind(Form::Wheel, fun, vec![], kw.as_object().unwrap()).unwrap();
            wheel(&pki, fun, &bound).unwrap()
        };
        assert_eq!(
            call("key.list_all", json!({})),
            json!({"minions": [], "minions_denied": [], "minions_pre": ["db1", "web1", "web2"],
                   "minions_rejected": [], "local": []})
        );
        assert_eq!(
            call("key.accept", json!({"match": "web*"})),
            json!({"minions": ["web1", "web2"]})
        );
        assert_eq!(
            call("key.reject", json!({"match": "db1,web1"})),
            json!({"minions": ["web1"], "minions_rejected": ["db1"]})
        );
        assert_eq!(
            call("key.list", json!({"match": "acc"})),
            json!({"minions": ["web1", "web2"]})
        );
        let finger = call("key.finger", json!({"match": "web2"}));
        assert_eq!(
            finger["minions"]["web2"],
            json!(crate::pki::fingerprint(&key(2)))
        );
        assert_eq!(call("key.delete", json!({"match": "web2"})), json!({}));
        assert_eq!(
            call("key.glob_match", json!({"match": "*"})),
            json!({"minions": ["web1"], "minions_rejected": ["db1"]})
        );
    }
}
