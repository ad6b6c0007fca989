//! What a plugin does to host files through WASI is in its audit record:
//! each file read, written or changed beneath a granted directory, by its
//! host path, and each the directory's permissions refused — once per
//! path and access.

use std::path::Path;

use serde_json::json;

use crate::common::{call, config_with, dir, runtime_with};
use maid_agent::runtime::{CapabilityUse, FileAccess};
use maid_config::PluginGrants;

fn file(path: &Path, access: FileAccess, allowed: bool) -> CapabilityUse {
    CapabilityUse::File {
        path: path.to_string_lossy().into_owned(),
        access,
        allowed,
    }
}

#[tokio::test]
async fn files_read_written_and_refused_are_recorded_by_host_path() {
    let granted = tempfile::tempdir().unwrap();
    let readonly = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(granted.path().join("mine"), "ok").unwrap();
    std::fs::write(readonly.path().join("conf"), "c").unwrap();
    std::fs::write(outside.path().join("secret"), "s").unwrap();
    std::os::unix::fs::symlink(outside.path(), granted.path().join("link")).unwrap();
    let grants = PluginGrants {
        dirs: vec![dir(granted.path(), true), dir(readonly.path(), false)],
        ..Default::default()
    };
    let rt = runtime_with(config_with("hostile", grants), None).await;

    let mine = granted.path().join("mine");
    let out = call(&rt, "hostile.read", json!([mine]), json!({})).await;
    assert_eq!(out.ret, json!("ok"));
    assert!(
        out.used.contains(&file(&mine, FileAccess::Read, true)),
        "{:?}",
        out.used
    );

    let new = granted.path().join("new");
    let out = call(&rt, "hostile.write", json!([new, "x"]), json!({})).await;
    assert_eq!(out.retcode, 0, "{:?}", out.ret);
    assert!(
        out.used.contains(&file(&new, FileAccess::Write, true)),
        "{:?}",
        out.used
    );

    // Refused by the read-only grant: recorded as refused, not written.
    let ro = readonly.path().join("new");
    let out = call(&rt, "hostile.write", json!([ro, "x"]), json!({})).await;
    assert_eq!(out.retcode, 77);
    assert!(
        out.used.contains(&file(&ro, FileAccess::Write, false)),
        "{:?}",
        out.used
    );
    // Reading there is allowed, and recorded.
    let conf = readonly.path().join("conf");
    let out = call(&rt, "hostile.read", json!([conf]), json!({})).await;
    assert_eq!(out.ret, json!("c"));
    assert!(out.used.contains(&file(&conf, FileAccess::Read, true)));

    // A climb out through a link is refused, and recorded as the path the
    // plugin asked for.
    let escape = granted.path().join("link/secret");
    let out = call(&rt, "hostile.read", json!([escape]), json!({})).await;
    assert_eq!(out.retcode, 77);
    assert!(
        out.used.iter().any(
            |u| matches!(u, CapabilityUse::File { allowed: false, path, .. }
                if path.ends_with("link/secret"))
        ),
        "{:?}",
        out.used
    );

    // Nothing of one call's files is in the next one's record.
    let out = call(&rt, "hostile.read", json!([mine]), json!({})).await;
    let files: Vec<_> = out
        .used
        .iter()
        .filter(|u| matches!(u, CapabilityUse::File { .. }))
        .collect();
    assert_eq!(files, [&file(&mine, FileAccess::Read, true)]);
}
