//! The core grains, whole: `maid call --local --grains` under the grants
//! `maid init` writes for the grains plugin against `salt-call --local
//! grains.items` of Salt 3008.4, on this host and, in a private mount
//! namespace, with a second distribution's `/etc/os-release` (Rocky 9).
//! Every grain is compared but the few docs/differences-from-salt.md
//! lists: what names the running process (`pid`) and what names Python or
//! Salt's own install.

use std::path::Path;
use std::process::Command;

use serde_json::{Map, Value};

use crate::common::salt::venv;

/// The grains that differ on purpose (docs/differences-from-salt.md).
const NOT_COMPARED: [&str; 11] = [
    "pid",
    "pythonexecutable",
    "pythonpath",
    "pythonversion",
    "zmqversion",
    "ca_truststore",
    "saltpath",
    "master",
    "maidversion",
    "package",
    "id",
];

/// `sh -c script` run as is, or inside `unshare -rm` (a user and mount
/// namespace of its own, where `mount --bind` needs no root) after `mount`.
fn shell(script: &str, mount: Option<(&Path, &str)>) -> Value {
    let script = match mount {
        Some((from, onto)) => {
            format!("mount --bind '{}' '{onto}' && {script}", from.display())
        }
        None => script.to_string(),
    };
    let mut cmd = match mount {
        Some(_) => {
            let mut c = Command::new("unshare");
            c.args(["-rm", "sh", "-c", &script]);
            c
        }
        None => {
            let mut c = Command::new("sh");
            c.args(["-c", &script]);
            c
        }
    };
    let out = cmd.output().unwrap_or_else(|e| {
        panic!("cannot run sh (or unshare, from util-linux: apt-get install util-linux): {e}")
    });
    assert!(
        out.status.success(),
        "{script}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let all: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{script}: {e}: {}", String::from_utf8_lossy(&out.stdout)));
    all["local"].clone()
}

/// Both sides' grains as `(maid, salt)`, each run in `cwd` with the same
/// environment (and, with `mount`, in the same kind of namespace).
fn both(cwd: &Path, mount: Option<(&Path, &str)>) -> (Map<String, Value>, Map<String, Value>) {
    let salt_conf = cwd.join("salt");
    std::fs::create_dir_all(salt_conf.join("root")).unwrap();
    std::fs::write(
        salt_conf.join("minion"),
        format!(
            "id: m1\nroot_dir: {}\nfile_client: local\n",
            salt_conf.join("root").display()
        ),
    )
    .unwrap();
    // `maid init`'s grants for the grains plugin, and nothing else.
    let maid_conf = cwd.join("maid.toml");
    std::fs::write(&maid_conf, crate::common::init_grains_toml()).unwrap();
    let maid = format!(
        "cd '{cwd}' && MAID_LOG=warn '{bin}' call --local -c '{conf}' --plugin-dir '{plugins}' \
         --cache-dir '{cache}' --id m1 --out json --grains",
        cwd = cwd.display(),
        bin = env!("CARGO_BIN_EXE_maid"),
        conf = maid_conf.display(),
        plugins = crate::common::guests::PLUGINS_DIR,
        cache = crate::common::shared_cache().display(),
    );
    let salt = format!(
        "cd '{cwd}' && '{bin}' --local -c '{conf}' --out json grains.items 2>/dev/null",
        cwd = cwd.display(),
        bin = venv().join("bin/salt-call").display(),
        conf = salt_conf.display(),
    );
    let as_map = |v: Value| match v {
        Value::Object(m) => m,
        other => panic!("grains are not an object: {other}"),
    };
    (as_map(shell(&maid, mount)), as_map(shell(&salt, mount)))
}

/// Every grain either side reports that the other reports otherwise.
fn differences(maid: &Map<String, Value>, salt: &Map<String, Value>) -> Vec<String> {
    let keys: std::collections::BTreeSet<&String> = maid.keys().chain(salt.keys()).collect();
    keys.into_iter()
        .filter(|k| !NOT_COMPARED.contains(&k.as_str()))
        .filter(|k| maid.get(*k) != salt.get(*k))
        .map(|k| {
            format!(
                "{k}: maid {}, Salt {}",
                maid.get(k).map_or("(none)".into(), Value::to_string),
                salt.get(k).map_or("(none)".into(), Value::to_string)
            )
        })
        .collect()
}

#[test]
fn every_core_grain_is_salts_on_this_host() {
    let dir = tempfile::tempdir().unwrap();
    let (maid, salt) = both(dir.path(), None);
    // The ones Salt reports on every Linux host are there at all.
    for k in [
        "os",
        "osmajorrelease",
        "virtual",
        "ip4_interfaces",
        "mem_total",
        "username",
    ] {
        assert!(maid.contains_key(k), "no {k} grain: {maid:?}");
    }
    let differ = differences(&maid, &salt);
    assert!(differ.is_empty(), "{}", differ.join("\n"));
    // What maid says of itself.
    assert_eq!(maid["saltversion"], salt["saltversion"]);
    assert_eq!(maid["saltversioninfo"], salt["saltversioninfo"]);
    assert_eq!(maid["id"], "m1");
}

#[test]
fn every_core_grain_is_salts_on_a_second_distribution() {
    let dir = tempfile::tempdir().unwrap();
    let release = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../plugins/grains/fixtures/os/rocky9/etc/os-release");
    let (maid, salt) = both(dir.path(), Some((&release, "/etc/os-release")));
    assert_eq!(
        salt["os"], "Rocky",
        "the namespace did not show Rocky's os-release"
    );
    let differ = differences(&maid, &salt);
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}
