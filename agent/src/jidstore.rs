//! The job ids a maid has accepted, remembered across restarts.
//!
//! A `jid` runs at most once (PROTOCOL §5), and a signed job seen before is
//! rejected as `replayed` (§6) — also after the agent restarts, so the set
//! lives in a small append-only file in the state directory as well as in
//! memory. Both are bounded: the oldest ids are forgotten first, and the
//! file is rewritten when it holds twice the bound.

use std::collections::{HashSet, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Accepted job ids.
pub struct JidStore {
    set: HashSet<String>,
    order: VecDeque<String>,
    cap: usize,
    file: Option<(PathBuf, File, usize)>,
    /// The line being appended, reused.
    line: Vec<u8>,
}

fn open_append(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

impl JidStore {
    /// In memory only.
    pub fn memory(cap: usize) -> Self {
        Self {
            set: HashSet::new(),
            order: VecDeque::new(),
            cap: cap.max(1),
            file: None,
            line: Vec::new(),
        }
    }

    /// Backed by `path` (created when missing): the ids it holds are
    /// remembered.
    pub fn open(path: &Path, cap: usize) -> std::io::Result<Self> {
        let mut store = Self::memory(cap);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        if let Ok(f) = File::open(path) {
            for line in BufReader::new(f).lines() {
                let line = line?;
                let jid = line.trim();
                if !jid.is_empty() {
                    store.remember(jid);
                }
            }
        }
        // Rewrite compacted, so the file never holds more than it must.
        crate::fsutil::replace_private(path, &store.order)?;
        let lines = store.order.len();
        store.file = Some((path.to_path_buf(), open_append(path)?, lines));
        Ok(store)
    }

    fn remember(&mut self, jid: &str) -> bool {
        if self.set.contains(jid) {
            return false;
        }
        if self.order.len() == self.cap
            && let Some(old) = self.order.pop_front()
        {
            self.set.remove(&old);
        }
        self.set.insert(jid.to_string());
        self.order.push_back(jid.to_string());
        true
    }

    /// Whether `jid` was accepted before.
    pub fn contains(&self, jid: &str) -> bool {
        self.set.contains(jid)
    }

    /// Accept `jid`: true when it is new. A write error is logged; the id
    /// is still remembered in memory.
    pub fn insert(&mut self, jid: &str) -> bool {
        // A jid is one line: refuse what would break the file.
        if jid.contains(['\n', '\r']) {
            return false;
        }
        if !self.remember(jid) {
            return false;
        }
        let mut rewrite = false;
        if let Some((path, file, lines)) = &mut self.file {
            // One write(2) of the whole line: `writeln!` on a File makes
            // two, and a crash between them would leave half a line.
            self.line.clear();
            self.line.extend_from_slice(jid.as_bytes());
            self.line.push(b'\n');
            if let Err(e) = file.write_all(&self.line) {
                tracing::error!(path = %path.display(), cause = %e, "cannot record jid");
            }
            *lines += 1;
            rewrite = *lines >= self.cap * 2;
        }
        if rewrite && let Some((path, _, _)) = self.file.take() {
            match Self::open(&path, self.cap) {
                Ok(fresh) => self.file = fresh.file,
                Err(e) => {
                    tracing::error!(path = %path.display(), cause = %e, "cannot compact jid file")
                }
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_in_memory() {
        let mut s = JidStore::memory(2);
        assert!(s.insert("a"));
        assert!(!s.insert("a"));
        assert!(s.insert("b") && s.insert("c"));
        assert!(s.insert("a"), "the oldest was forgotten");
        assert!(!s.insert("with\nnewline"));
    }

    #[test]
    fn survives_a_restart_and_stays_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/jids");
        let mut s = JidStore::open(&path, 3).unwrap();
        for j in ["1", "2", "3", "4", "5", "6", "7"] {
            assert!(s.insert(j));
        }
        drop(s);
        let mut s = JidStore::open(&path, 3).unwrap();
        assert!(!s.insert("7") && !s.insert("5"));
        assert!(s.insert("1"));
        let lines = std::fs::read_to_string(&path).unwrap().lines().count();
        assert!(lines <= 6, "{lines}");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}
