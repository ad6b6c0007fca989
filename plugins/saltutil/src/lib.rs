//! Salt's `saltutil` module, job side: what this maid is running and
//! stopping a job (`kill_job`, `term_job`, `signal_job`), through the
//! host's job table, which only the `jobs` grant opens.
//! (`saltutil.sync_modules` is the agent's own, with `[sync]`.)

use maid_sdk::salt::fnmatch;
use maid_sdk::{Call, Error, Function, Plugin, export_plugin, host, python};
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

impl Plugin for SaltUtil {
    const MODULE: &'static str = "saltutil";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");

    fn functions() -> Vec<Function> {
        vec![
            Function::new(
                "running",
                "Return the data of every job this maid is running",
                &[],
                |(): (), _: &Call| host::running_jobs(),
            ),
            Function::new(
                "find_job",
                "Return the data of job JID when it is running here, else {}",
                &["jid"],
                |a: Jid, _: &Call| {
                    let jid = python::str(&a.jid);
                    Ok(host::running_jobs()?
                        .into_iter()
                        .find(|d| d["jid"] == jid.as_str())
                        .unwrap_or_else(|| json!({})))
                },
            ),
            Function::new(
                "is_running",
                "Return the running jobs whose function matches FUN (a glob)",
                &["fun"],
                |a: Fun, _: &Call| {
                    let fun = python::str(&a.fun);
                    Ok(host::running_jobs()?
                        .into_iter()
                        .filter(|d| fnmatch(d["fun"].as_str().unwrap_or_default(), &fun))
                        .collect::<Vec<_>>())
                },
            ),
            Function::new(
                "kill_job",
                "Stop job JID with SIGKILL: its programs are killed and it returns at once",
                &["jid"],
                |a: Jid, _: &Call| signal(&a.jid, SIGKILL),
            ),
            Function::new(
                "term_job",
                "Stop job JID with SIGTERM: its programs get SIGTERM and it returns at once",
                &["jid"],
                |a: Jid, _: &Call| signal(&a.jid, SIGTERM),
            ),
            Function::new(
                "signal_job",
                "Send SIG to job JID's programs (HUP, INT, QUIT, KILL and TERM also stop the job)",
                &["jid", "sig"],
                |a: Signal, _: &Call| signal(&a.jid, signal_number(&a.sig)?),
            ),
        ]
    }
}

export_plugin!(SaltUtil);
