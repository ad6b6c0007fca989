//! Small file helpers for the agent's private files: written whole, then
//! renamed into place.

use std::io::{BufWriter, Write};
use std::path::Path;

use tempfile::NamedTempFile;

/// A new temporary file in `dir`, private (mode 0600), filled by `fill`
/// through a buffer and synced: to be renamed into place with
/// [`NamedTempFile::persist`], so a reader sees the old file or the new one,
/// never half of either. It is removed if it never is.
pub fn staged_in(
    dir: &Path,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<NamedTempFile> {
    let mut staged = tempfile::Builder::new().prefix(".tmp-").tempfile_in(dir)?;
    {
        // Buffered: two write(2)s a line made rewriting the 100 000 lines
        // of a full jid file take ~200 ms, on the agent's runtime.
        let mut w = BufWriter::new(staged.as_file_mut());
        fill(&mut w)?;
        w.flush()?;
    }
    staged.as_file().sync_all()?;
    Ok(staged)
}

/// Replace `path` with `lines` (each followed by a newline), atomically: a
/// reader sees the old file or the new one, never half of either. The file
/// is created with mode 0600.
pub fn replace_private<I, L>(path: &Path, lines: I) -> std::io::Result<()>
where
    I: IntoIterator<Item = L>,
    L: AsRef<[u8]>,
{
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let staged = staged_in(dir, |w| {
        for line in lines {
            w.write_all(line.as_ref())?;
            w.write_all(b"\n")?;
        }
        Ok(())
    })?;
    staged.persist(path).map_err(|e| e.error)?;
    Ok(())
}
