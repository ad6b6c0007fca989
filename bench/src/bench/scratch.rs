//! The scratch directory of one command: configs, logs, caches and copied
//! files of the processes it starts, removed when the command ends.
//!
//! Every command declares it before anything that writes into it, so it
//! is dropped last: the processes are gone before their files are.

use std::path::PathBuf;

use anyhow::Context;

/// A temporary directory, removed on drop.
pub(super) struct Scratch(PathBuf);

impl Scratch {
    pub(super) fn new() -> anyhow::Result<Scratch> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or_default();
        let dir =
            std::env::temp_dir().join(format!("maid-bench-{}-{nanos:08x}", std::process::id()));
        std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
        Ok(Scratch(dir))
    }

    pub(super) fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
