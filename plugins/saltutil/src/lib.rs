//! Salt's `saltutil` module, job side: what this maid is running and
//! stopping a job (`kill_job`, `term_job`, `signal_job`), through the
//! host's job table, which only the `jobs` grant opens.
//! `sync_modules`, `sync_all` and `refresh_grains` change the agent
//! itself, so a running agent answers them without this plugin; here
//! they answer where there is no agent to do it (`maid call --local`,
//! or an agent without `[sync]`).

use maid_sdk::salt::fnmatch;
use maid_sdk::{Call, Error, Function, Plugin, export_plugin, function, host, python};
use serde::Deserialize;
use serde_json::{Value, json};

struct SaltUtil;

const SIGKILL: i32 = 9;
const SIGTERM: i32 = 15;

#[derive(Deserialize)]
struct Jid {
    jid: Value,
}

#[derive(Deserialize)]
struct Signal {
    jid: Value,
    sig: Value,
}

#[derive(Deserialize)]
struct Fun {
    fun: Value,
}

/// A signal by number or by name (`9`, `KILL`, `SIGKILL`).
fn signal_number(v: &Value) -> Result<i32, Error> {
    if let Some(n) = v.as_i64() {
        return i32::try_from(n).map_err(|_| Error::bad_arguments(format!("no signal {n}")));
    }
    let name = python::str(v).to_ascii_uppercase();
    let name = name.strip_prefix("SIG").unwrap_or(&name);
    Ok(match name {
        "HUP" => 1,
        "INT" => 2,
        "QUIT" => 3,
        "KILL" => 9,
        "USR1" => 10,
        "USR2" => 12,
        "TERM" => 15,
        "CONT" => 18,
        "STOP" => 19,
        other => other
            .parse()
            .map_err(|_| Error::bad_arguments(format!("no signal named {other}")))?,
    })
}

/// Salt's `signal_job`: the words when sent, "" when no such job runs.
fn signal(jid: &Value, sig: i32) -> Result<String, Error> {
    Ok(host::signal_job(&python::str(jid), sig)?.unwrap_or_default())
}

/// Why a sync reached this plugin: only an agent syncing from a master
/// installs plugins.
fn no_sync(call: &Call) -> Error {
    Error::failed(
        format!(
            "{} is answered by a maid agent with [sync] configured; this one has none",
            call.fun()
        ),
        1,
    )
}

/// Return the data of every job this maid is running
#[function]
fn running() -> Result<Vec<Value>, Error> {
    host::running_jobs()
}

/// Return the data of job JID when it is running here, else {}
#[function(args = ["jid"])]
fn find_job(a: Jid) -> Result<Value, Error> {
    let jid = python::str(&a.jid);
    Ok(host::running_jobs()?
        .into_iter()
        .find(|d| d["jid"] == jid.as_str())
        .unwrap_or_else(|| json!({})))
}

/// Return the running jobs whose function matches FUN (a glob)
#[function(args = ["fun"])]
fn is_running(a: Fun) -> Result<Vec<Value>, Error> {
    let fun = python::str(&a.fun);
    Ok(host::running_jobs()?
        .into_iter()
        .filter(|d| fnmatch(d["fun"].as_str().unwrap_or_default(), &fun))
        .collect::<Vec<_>>())
}

/// Install the plugins the master pushed (answered by an agent with [sync])
#[function(args = [
    "saltenv=null",
    "refresh=true",
    "extmod_whitelist=null",
    "extmod_blacklist=null",
    "**kwargs",
])]
fn sync_modules(_: Value, call: &Call) -> Result<Value, Error> {
    Err(no_sync(call))
}

/// Sync every kind of extension: the plugins the master pushed (answered by an agent with [sync])
#[function(args = [
    "saltenv=null",
    "refresh=true",
    "extmod_whitelist=null",
    "extmod_blacklist=null",
    "clean_pillar_cache=false",
    "**kwargs",
])]
fn sync_all(_: Value, call: &Call) -> Result<Value, Error> {
    Err(no_sync(call))
}

/// Detect the grains again (answered by the agent; without one, every call detects them)
#[function(raw, args = ["**kwargs"])]
fn refresh_grains(call: &Call) -> Result<bool, Error> {
    if !call.args.is_empty() {
        return Err(Error::bad_arguments(format!(
            "refresh_grains() takes 0 positional arguments but {} were given",
            call.args.len()
        )));
    }
    // Salt pops these two and refuses the rest.
    let invalid: Vec<String> = call
        .user_kwargs()
        .filter(|(k, _)| *k != "refresh_pillar" && *k != "clean_pillar_cache")
        .map(|(k, v)| format!("{k}={}", python::str(v)))
        .collect();
    if !invalid.is_empty() {
        return Err(Error::bad_arguments(format!(
            "The following keyword arguments are not valid: {}",
            invalid.join(", ")
        )));
    }
    Ok(true)
}

/// Refresh this minion's pillar: the master compiles it afresh and stores it sealed to this maid with this very job
#[function(args = ["wait=false", "timeout=30", "clean_cache=true"])]
fn refresh_pillar() -> Result<bool, Error> {
    // A maid keeps no pillar between jobs: each job that reads pillar
    // carries the one the master compiled for it, and this job's delivery
    // was the refresh. Salt answers whether it could fire the event.
    Ok(true)
}

/// Stop job JID with SIGKILL: its programs are killed and it returns at once
#[function(args = ["jid"])]
fn kill_job(a: Jid) -> Result<String, Error> {
    signal(&a.jid, SIGKILL)
}

/// Stop job JID with SIGTERM: its programs get SIGTERM and it returns at once
#[function(args = ["jid"])]
fn term_job(a: Jid) -> Result<String, Error> {
    signal(&a.jid, SIGTERM)
}

/// Send SIG to job JID's programs (HUP, INT, QUIT, KILL and TERM also stop the job)
#[function(args = ["jid", "sig"])]
fn signal_job(a: Signal) -> Result<String, Error> {
    signal(&a.jid, signal_number(&a.sig)?)
}

impl Plugin for SaltUtil {
    const MODULE: &'static str = "saltutil";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");

    fn functions() -> Vec<Function> {
        maid_sdk::functions![
            running,
            find_job,
            is_running,
            sync_modules,
            sync_all,
            refresh_grains,
            refresh_pillar,
            kill_job,
            term_job,
            signal_job,
        ]
    }
}

export_plugin!(SaltUtil);
