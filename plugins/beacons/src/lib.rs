//! Salt's `beacons` module, reading only: maid has no beacons (a maid
//! watches nothing on its own), so `beacons.list` and
//! `beacons.list_available` answer what a Salt minion with no beacon
//! configured and none available answers. Web consoles call both on every
//! minion page.

use maid_sdk::python::truthy;
use maid_sdk::{Capability, Error, Function, Plugin, export_plugin, function};
use serde::Deserialize;
use serde_json::{Value, json};

struct Beacons;

#[derive(Deserialize)]
struct List {
    #[serde(default = "yes")]
    return_yaml: Value,
}

fn yes() -> Value {
    json!(true)
}

/// List the beacons currently configured on the minion (none)
// Salt's `beacons.list` with no beacon configured: `beacons: null` as YAML
// text, or `None` with `return_yaml=False`.
#[function(args = [
    "return_yaml=true",
    "include_pillar=true",
    "include_opts=true",
    "**kwargs"
])]
fn list(a: List) -> Result<Value, Error> {
    Ok(if truthy(&a.return_yaml) {
        json!("beacons: null\n")
    } else {
        Value::Null
    })
}

/// List the beacons currently available on the minion (none)
// Salt answers `{"beacons": {}}` when it lists none, YAML or not.
#[function(args = ["return_yaml=true", "**kwargs"])]
fn list_available(_a: List) -> Result<Value, Error> {
    Ok(json!({"beacons": {}}))
}

impl Plugin for Beacons {
    const MODULE: &'static str = "beacons";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const CAPABILITIES: &'static [Capability] = &[];

    fn functions() -> Vec<Function> {
        maid_sdk::functions![list, list_available]
    }
}

export_plugin!(Beacons);
