//! Small file helpers for the agent's own private state files.

use std::fs::OpenOptions;
use std::io::{BufWriter, Write};
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
        let file = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        // Buffered: two write(2)s a line made rewriting the 100 000 lines
        // of a full jid file take ~200 ms, on the agent's runtime.
        let mut f = BufWriter::new(file);
        for line in lines {
            f.write_all(line.as_ref())?;
            f.write_all(b"\n")?;
        }
        f.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    }
    std::fs::rename(tmp, path)
}
