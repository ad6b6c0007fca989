//! Runner `jobs.*`: `jobs.lookup_jid`, `jobs.list_job`, `jobs.list_jobs`,
//! `jobs.print_job`, `jobs.exit_success`, read from the job cache (the
//! loads of [`jobcache`] and the maids' returns); `jobs.active` from what
//! `saltutil.running` returned on every minion (the caller runs it).

use serde_json::{Map, Value, json};

use crate::binding::{BadCall, Bound, Form, fnmatch, jid_text, split_input};
use crate::bus::{BusError, Conn};
use crate::pki::Pki;
use crate::{jobcache, jobs};
use ed25519_dalek::SigningKey;
use maid_salt::python::truthy;

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

/// `jobs.active` from what `saltutil.running` returned on each minion
/// (`running`: a list of job data, or anything else, which says nothing):
/// each running job as Salt describes it, with its `StartTime`, the
/// minions that run it (`Running`, each with its pid) and, filled by the
/// caller from the job cache, those that already returned (`Returned`).
pub fn active_answer(running: &std::collections::BTreeMap<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    for (minion, jobs) in running {
        let Some(jobs) = jobs.as_array() else {
            continue;
        };
        for job in jobs {
            let Some(jid) = job.get("jid").map(jid_text) else {
                continue;
            };
            let entry = out.entry(jid.clone()).or_insert_with(|| {
                json!({
                    "Function": job.get("fun").cloned().unwrap_or(json!("unknown-function")),
                    "Arguments": job.get("arg").cloned().unwrap_or(json!([])),
                    "Target": job.get("tgt").cloned().unwrap_or(json!("unknown-target")),
                    "Target-type": job.get("tgt_type").cloned().unwrap_or(json!("list")),
                    "User": job.get("user").cloned().unwrap_or(json!("root")),
                    "StartTime": jobcache::jid_to_time(&jid),
                    "Running": [],
                    "Returned": [],
                })
            });
            let pid = job.get("pid").cloned().unwrap_or(Value::Null);
            if let Some(list) = entry["Running"].as_array_mut() {
                list.push(json!({minion: pid}));
            }
        }
    }
    out
}

/// `jobs.active` over the job cache: [`active_answer`] of `running`, each
/// job's `Returned` the minions whose returns the cache holds (with the
/// key store `pki`, only those its accepted keys signed).
pub async fn active(
    conn: &mut Conn,
    pki: Option<&Pki>,
    running: &std::collections::BTreeMap<String, Value>,
) -> Result<Value, BusError> {
    let mut out = active_answer(running);
    for (jid, job) in out.iter_mut() {
        let cached = jobs::cached(conn, jid, pki, None).await?;
        let returned: Vec<Value> = cached.returns.iter().map(|r| json!(r.id)).collect();
        job["Returned"] = Value::Array(returned);
    }
    Ok(Value::Object(out))
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
/// (with the key store `pki`, only the returns its accepted keys signed;
/// those sealed to the master opened with `key`).
pub async fn list_job(
    conn: &mut Conn,
    pki: Option<&Pki>,
    key: Option<&SigningKey>,
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
    let cached = jobs::cached(conn, jid, pki, key).await?;
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
    key: Option<&SigningKey>,
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
            let job = list_job(conn, pki, key, &jid).await?;
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
        "jobs.list_job" => Value::Object(list_job(conn, pki, key, &jid).await?),
        "jobs.print_job" => {
            let mut job = list_job(conn, pki, key, &jid).await?;
            job.remove("jid");
            json!({jid: job})
        }
        "jobs.exit_success" => {
            let job = list_job(conn, pki, key, &jid).await?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::binding::bind;

    #[test]
    fn active_jobs_are_gathered_by_jid_as_salts_jobs_active() {
        let job = |jid: &str, pid: u32| {
            json!({"jid": jid, "fun": "cmd.run", "arg": ["sleep 9"], "tgt": "*",
                   "tgt_type": "glob", "user": "root", "pid": pid})
        };
        let running = std::collections::BTreeMap::from([
            ("m1".to_string(), json!([job("20261127100000000000", 11)])),
            ("m2".to_string(), json!([job("20261127100000000000", 22)])),
            (
                "m3".to_string(),
                json!("Denied: jobs is not granted to this plugin"),
            ),
        ]);
        let active = active_answer(&running);
        assert_eq!(
            Value::Object(active),
            json!({"20261127100000000000": {
                "Function": "cmd.run", "Arguments": ["sleep 9"], "Target": "*",
                "Target-type": "glob", "User": "root",
                "StartTime": "2026, Nov 27 10:00:00.000000",
                "Running": [{"m1": 11}, {"m2": 22}], "Returned": [],
            }})
        );
        assert!(
            active_answer(&Default::default()).is_empty(),
            "{{}} when nothing runs"
        );
    }

    fn b(fun: &str, args: Value, kwargs: Value) -> Result<Bound, BadCall> {
        let args = args.as_array().unwrap().clone();
        bind(Form::Runner, fun, args, kwargs.as_object().unwrap())
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
}
