//! Salt's `pkg` module for Debian's family (`aptpkg`), read side: what
//! `dpkg-query` says is installed, with Salt's names and shapes. It runs
//! `dpkg-query` and nothing else.

use std::collections::BTreeMap;

use maid_sdk::host::{self, Command};
use maid_sdk::salt::{fnmatch, is_true};
use maid_sdk::{Call, Capability, Error, Function, Plugin, export_plugin, python};
use serde::Deserialize;
use serde_json::{Map, Value, json};

struct Pkg;

/// Installed, removed and purge-desired packages: name -> sorted versions.
type Lists = [BTreeMap<String, Vec<String>>; 3];

/// Salt's `aptpkg.list_pkgs` reading of `dpkg-query -W`.
fn query() -> Result<Lists, Error> {
    let out = Command::new("dpkg-query")
        .args([
            "--showformat",
            "${Status} ${Package} ${Version} ${Architecture}\n",
            "-W",
        ])
        .output()?;
    let grains = host::grains();
    let amd64 = grains.get("cpuarch").and_then(Value::as_str) == Some("x86_64")
        && grains.get("osarch").and_then(Value::as_str) == Some("amd64");
    let mut lists: Lists = Default::default();
    for line in out.stdout_lossy().lines() {
        let cols: Vec<&str> = line.split_whitespace().collect();
        let [linetype, _, status, name, version, arch, ..] = cols[..] else {
            continue;
        };
        let mut name = name.to_string();
        if amd64 && arch != "all" && arch != "amd64" {
            name = format!("{name}:{arch}");
        }
        let list = if (linetype.contains("install") || linetype.contains("hold"))
            && status.contains("installed")
        {
            &mut lists[0]
        } else if linetype.contains("deinstall") {
            &mut lists[1]
        } else if linetype.contains("purge") && status == "installed" {
            &mut lists[2]
        } else {
            continue;
        };
        list.entry(name).or_default().push(version.to_string());
    }
    for list in &mut lists {
        for versions in list.values_mut() {
            versions.sort();
            versions.dedup();
        }
    }
    Ok(lists)
}

fn shaped(list: BTreeMap<String, Vec<String>>, as_list: bool) -> Map<String, Value> {
    list.into_iter()
        .map(|(k, v)| {
            let v = if as_list {
                json!(v)
            } else {
                json!(v.join(","))
            };
            (k, v)
        })
        .collect()
}

#[derive(Deserialize)]
struct ListPkgs {
    #[serde(default)]
    versions_as_list: Value,
    #[serde(default)]
    removed: Value,
    #[serde(default)]
    purge_desired: Value,
}

fn list_pkgs(a: &ListPkgs) -> Result<Map<String, Value>, Error> {
    let [installed, removed, purge] = query()?;
    let as_list = is_true(&a.versions_as_list);
    if is_true(&a.removed) {
        return Ok(shaped(removed, as_list));
    }
    let mut ret = purge;
    if !is_true(&a.purge_desired) {
        ret.extend(installed);
    }
    Ok(shaped(ret, as_list))
}

/// Salt's `pkg_resource.version`: one name gives its version text ("" when
/// not installed); several, or a glob, a dict.
fn version(call: &Call) -> Result<Value, Error> {
    let as_list = call.kwargs.get("versions_as_list").is_some_and(is_true);
    let pkgs = list_pkgs(&ListPkgs {
        versions_as_list: json!(true),
        removed: Value::Null,
        purge_desired: Value::Null,
    })?;
    let mut ret = Map::new();
    let mut glob = false;
    for name in call.args.iter().map(python::str) {
        if name.contains('*') {
            glob = true;
            for (k, v) in &pkgs {
                if fnmatch(k, &name) {
                    ret.insert(k.clone(), v.clone());
                }
            }
        } else {
            ret.insert(name.clone(), pkgs.get(&name).cloned().unwrap_or(json!([])));
        }
    }
    if !as_list {
        for v in ret.values_mut() {
            let joined: Vec<&str> = v
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            *v = json!(joined.join(","));
        }
    }
    if ret.len() == 1 && !glob {
        return Ok(ret.into_iter().next().map(|(_, v)| v).unwrap_or_default());
    }
    Ok(Value::Object(ret))
}

impl Plugin for Pkg {
    const MODULE: &'static str = "pkg";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const CAPABILITIES: &'static [Capability] = &[Capability::Exec];

    fn functions() -> Vec<Function> {
        vec![
            Function::new(
                "list_pkgs",
                "Return the installed packages as {name: version}",
                &[
                    "versions_as_list=false",
                    "removed=false",
                    "purge_desired=false",
                    "**kwargs",
                ],
                |a: ListPkgs, _: &Call| list_pkgs(&a),
            ),
            Function::raw(
                "version",
                "Return the installed version of the packages named (globs allowed)",
                &["*names", "**kwargs"],
                version,
            ),
        ]
    }
}

export_plugin!(Pkg);
