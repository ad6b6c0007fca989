//! Salt's `group` module, read side (`groupadd` on Linux): groups from
//! `/etc/group`, the one file the grants name. Groups that only a
//! directory service knows (NSS) are not seen.

use maid_sdk::{Call, Capability, Error, Function, Plugin, export_plugin, host, python};
use serde::Deserialize;
use serde_json::{Value, json};

struct GroupModule;

/// Salt's `groupadd._format_info` of each `/etc/group` line, in file order.
fn groups() -> Result<Vec<Value>, Error> {
    let text = String::from_utf8_lossy(&host::read_file("/etc/group")?).into_owned();
    Ok(text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            let [name, passwd, gid, members] = f[..] else {
                return None;
            };
            let gid: u32 = gid.parse().ok()?;
            let members: Vec<&str> = members.split(',').filter(|m| !m.is_empty()).collect();
            Some(json!({"name": name, "passwd": passwd, "gid": gid, "members": members}))
        })
        .collect())
}

#[derive(Deserialize)]
struct Name {
    name: Value,
}

#[derive(Deserialize)]
struct Refresh {
    #[serde(default)]
    #[allow(dead_code)] // Salt caches getent; this reads the file each time.
    refresh: Value,
}

impl Plugin for GroupModule {
    const MODULE: &'static str = "group";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const CAPABILITIES: &'static [Capability] = &[Capability::FsRead];

    fn functions() -> Vec<Function> {
        vec![
            Function::new(
                "info",
                "Return a group: name, passwd, gid, members ({} if none)",
                &["name"],
                |a: Name, _: &Call| {
                    let name = python::str(&a.name);
                    Ok(groups()?
                        .into_iter()
                        .find(|g| g["name"] == name.as_str())
                        .unwrap_or_else(|| json!({})))
                },
            ),
            Function::new(
                "getent",
                "Return every group, as group.info shows one",
                &["refresh=false"],
                |_: Refresh, _: &Call| groups(),
            ),
        ]
    }
}

export_plugin!(GroupModule);
