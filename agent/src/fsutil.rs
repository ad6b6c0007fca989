//! Small file helpers for the agent's own private state files.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Replace `path` with `lines` (each followed by a newline), atomically: a
/// reader sees the old file or the new one, never half of either. The file
/// is created with mode 0600.
pub fn replace_private<I, L>(path: &Path, lines: I) -> std::io::Result<()>
where
    I: IntoIterator<Item = L>,
    L: AsRef<[u8]>,
{
    let tmp = path.with_extension("tmp");
    {
        let mut f = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        for line in lines {
            f.write_all(line.as_ref())?;
            f.write_all(b"\n")?;
        }
        f.sync_all()?;
    }
    std::fs::rename(tmp, path)
}
