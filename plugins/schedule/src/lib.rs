//! Salt's `schedule` module, reading only: maid runs no scheduler (jobs
//! come from the master), so a maid's schedule is empty and `schedule.list`
//! answers what a Salt minion with nothing scheduled answers. Web consoles
//! call it on every minion page.

use maid_sdk::python::truthy;
use maid_sdk::{Capability, Error, Function, Plugin, export_plugin, function};
use serde::Deserialize;
use serde_json::{Value, json};

struct Schedule;

#[derive(Deserialize)]
struct List {
    #[serde(default = "yes")]
    return_yaml: Value,
}

fn yes() -> Value {
    json!(true)
}

/// List the jobs currently scheduled on the minion (none: maid schedules nothing)
// Salt's `schedule.list` with an empty schedule: `schedule: {}` as YAML
// text, or `{}` with `return_yaml=False`.
#[function(args = [
    "show_all=false",
    "show_disabled=true",
    "where=null",
    "return_yaml=true",
    "offline=false"
])]
fn list(a: List) -> Result<Value, Error> {
    Ok(if truthy(&a.return_yaml) {
        json!("schedule: {}\n")
    } else {
        json!({})
    })
}

impl Plugin for Schedule {
    const MODULE: &'static str = "schedule";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const CAPABILITIES: &'static [Capability] = &[];

    fn functions() -> Vec<Function> {
        maid_sdk::functions![list]
    }
}

export_plugin!(Schedule);
