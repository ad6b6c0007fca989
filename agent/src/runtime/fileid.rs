//! Knowing a file still holds the bytes it held when it was hashed, without
//! reading it again.
//!
//! Starting `maid call` read and hashed every plugin file, and then, at the
//! first call of a plugin, its `.wasm` again and its compiled artifact
//! (several MiB each): a fifth of a short call's time. A [`FileId`] is what
//! the kernel says of a file — device, inode, size, modification and
//! change times — and any write to the file changes its change time, which
//! no caller can set back. So a file whose id is the one it had when it was
//! hashed holds the bytes that were hashed, as git's index and make assume.
//!
//! The kernel stamps change times from a clock that moves in ticks (a few
//! milliseconds), so two writes within one tick can leave the same time:
//! as git does for its "racy" entries, an id is only taken as proof for a
//! file whose change time was already [`SETTLED`] in the past when it was
//! hashed; a file changed more recently is always read.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, SystemTime};

/// How long ago a file must have last changed for its id to vouch for it.
pub(crate) const SETTLED: Duration = Duration::from_secs(2);

/// What the kernel says identifies a file's content (see the module's
/// header).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileId(String);

impl FileId {
    /// The id of the file at `path` (links followed).
    pub(crate) fn of(path: &Path) -> std::io::Result<Self> {
        Ok(Self::from_metadata(&std::fs::metadata(path)?))
    }

    pub(crate) fn from_metadata(m: &std::fs::Metadata) -> Self {
        Self(format!(
            "{}:{}:{}:{}.{:09}:{}.{:09}",
            m.dev(),
            m.ino(),
            m.size(),
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec()
        ))
    }

    /// The id of the file at `path` when it last changed long enough ago
    /// for the id to vouch for its content; `None` otherwise (or when it
    /// cannot be read).
    pub(crate) fn settled(path: &Path) -> Option<Self> {
        let m = std::fs::metadata(path).ok()?;
        let changed = SystemTime::UNIX_EPOCH
            + Duration::new(
                u64::try_from(m.ctime()).ok()?,
                u32::try_from(m.ctime_nsec()).ok()?,
            );
        let age = SystemTime::now().duration_since(changed).ok()?;
        (age >= SETTLED).then(|| Self::from_metadata(&m))
    }

    /// The id as kept in a file.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// An id read back from a file.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        let text = text.trim();
        let well_formed = !text.is_empty()
            && text.split(':').count() == 5
            && text
                .chars()
                .all(|c| c.is_ascii_digit() || c == ':' || c == '.');
        well_formed.then(|| Self(text.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_changes_the_id_and_a_fresh_file_is_not_settled() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"one").unwrap();
        let before = FileId::of(&path).unwrap();
        assert_eq!(FileId::of(&path).unwrap(), before);
        // Just written: its id does not vouch for it yet.
        assert_eq!(FileId::settled(&path), None);
        // The same size, written again: another change time or inode.
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(&path, b"two").unwrap();
        assert_ne!(FileId::of(&path).unwrap(), before);
        assert_eq!(
            FileId::parse(before.as_str()).as_ref(),
            Some(&before),
            "an id reads back as written"
        );
        assert_eq!(FileId::parse("1:2:3:4.5:6.7\n../x"), None);
        assert_eq!(FileId::parse(""), None);
    }
}
