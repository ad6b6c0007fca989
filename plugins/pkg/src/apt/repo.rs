//! Salt's `aptpkg.list_repo_pkgs`: every version `apt-cache` knows of
//! each package named (`apt-cache show`), or of every package (`apt-cache
//! dump`), read as Salt reads them.

use maid_sdk::Error;
use serde_json::{Map, Value, json};

use super::call_apt;
use crate::argv;

/// `{name: [version, ...]}` in the order `apt-cache` lists them; a name
/// it does not know (or a `name=version` it has not) is left out, as
/// Salt ignores the command's retcode.
pub(super) fn list_repo_pkgs(args: &[String]) -> Result<Value, Error> {
    let cmd = if args.is_empty() {
        argv(&["apt-cache", "dump"])
    } else {
        let mut cmd = argv(&["apt-cache", "show", "--"]);
        cmd.extend(args.iter().cloned());
        cmd
    };
    let out = call_apt(&cmd)?;
    Ok(Value::Object(versions(&out.stdout_lossy())))
}

/// Each `Version:` line, for the package the last `Package:` line named.
fn versions(stdout: &str) -> Map<String, Value> {
    let mut ret = Map::new();
    let mut package: Option<String> = None;
    for line in stdout.split('\n') {
        if line.trim().is_empty() {
            continue;
        }
        if let Some(name) = line.strip_prefix("Package: ").filter(|n| !n.is_empty())
            && package.as_deref() != Some(name)
        {
            package = Some(name.to_string());
            continue;
        }
        let mut comps = line.trim().splitn(2, char::is_whitespace);
        if comps.next() != Some("Version:") {
            continue;
        }
        let (Some(version), Some(name)) = (comps.next(), &package) else {
            continue;
        };
        if let Value::Array(list) = ret.entry(name.clone()).or_insert_with(|| json!([])) {
            list.push(json!(version.trim_start()));
        }
    }
    ret
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_under_their_package() {
        let show = "Package: a\nVersion: 2.0-1\nArchitecture: all\n\n\
                    Package: a\nVersion: 1.0-1\n\nPackage: b\nVersion:  1:3.0\n";
        assert_eq!(
            Value::Object(versions(show)),
            json!({"a": ["2.0-1", "1.0-1"], "b": ["1:3.0"]})
        );
        let dump = "Package: c\n Version: 1.0\n     File: x\n Version: 0.9\n";
        assert_eq!(Value::Object(versions(dump)), json!({"c": ["1.0", "0.9"]}));
    }
}
