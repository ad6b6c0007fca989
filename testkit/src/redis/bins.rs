//! The Redis binaries on PATH: a missing one is a panic with an install
//! hint, so a test never skips silently.

use std::fs;
use std::path::PathBuf;

const INSTALL_HINT: &str = "run `./dev test` (it installs it) or `apt-get install redis-server`";

fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| {
            fs::metadata(candidate)
                .map(|m| {
                    m.is_file()
                        && std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0
                })
                .unwrap_or(false)
        })
}

/// `redis-server` on PATH. Panics with an install hint when it is missing.
pub fn redis_server_bin() -> PathBuf {
    find_on_path("redis-server")
        .unwrap_or_else(|| panic!("redis-server is not installed: {INSTALL_HINT}"))
}

/// `redis-cli` on PATH. Panics with an install hint when it is missing.
pub fn redis_cli_bin() -> PathBuf {
    find_on_path("redis-cli")
        .unwrap_or_else(|| panic!("redis-cli is not installed: {INSTALL_HINT}"))
}

/// How to run a sentinel: the program and the arguments that go after the
/// configuration file (`redis-server <conf> --sentinel`, which is what the
/// `redis-sentinel` symlink does).
pub fn redis_sentinel_cmd() -> (PathBuf, Vec<&'static str>) {
    (redis_server_bin(), vec!["--sentinel"])
}
