//! The job ids a maid has accepted, remembered across restarts.
//!
//! A `jid` runs at most once (PROTOCOL §5), and a signed job seen before is
//! rejected as `replayed` (§6) — also after the agent restarts, so the ids
//! live in a small append-only file in the state directory as well as in
//! memory. Both are bounded: the oldest ids are forgotten first, and the
//! file is rewritten when it holds twice the bound.
//!
//! In memory each id is kept as a 128-bit keyed hash, not as its text, in
//! a set and a queue of 16-byte values: an agent that has seen a full
//! bound of jobs (100 000 by default) holds ~6.5 MB for them where two
//! strings an id took ~15.7 MB (measured), and accepting a job allocates
//! nothing once the queue has grown. The key is random for each process,
//! so nobody can make two ids collide on purpose, and by chance two of
//! 100 000 ids would collide once in ~10²⁸ tries. A collision could only
//! refuse a job as seen, never run one twice. The text stays in the file,
//! which is what a restart reads.

use std::collections::hash_map::RandomState;
use std::collections::{HashSet, VecDeque};
use std::fs::{File, OpenOptions};
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// A set of digests. They are keyed hashes already, so the set uses their
/// low 64 bits as they are instead of hashing them again.
type Digests = HashSet<u128, BuildHasherDefault<Prehashed>>;

/// What a store remembers of a file: its lines kept, oldest first, each
/// with its digest, and the set of those digests.
type Kept<'t> = (Vec<(&'t [u8], u128)>, Digests);

/// The [`Hasher`] of [`Digests`]: a digest's low 64 bits.
#[derive(Default)]
struct Prehashed(u64);

impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u128` is used; anything else is still hashed whole.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u128(&mut self, digest: u128) {
        self.0 = digest as u64;
    }
}

/// Accepted job ids.
pub struct JidStore {
    key: [RandomState; 2],
    set: Digests,
    /// The ids of `set`, oldest first.
    order: VecDeque<u128>,
    cap: usize,
    file: Option<Journal>,
}

/// The file the ids are appended to.
struct Journal {
    path: PathBuf,
    file: File,
    /// Lines in the file.
    lines: usize,
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

/// The last `cap` distinct non-empty lines of `text`, oldest first, and
/// the set of their digests: what a store bounded by `cap` remembers of a
/// file.
fn newest<'t>(text: &'t [u8], cap: usize, key: &[RandomState; 2]) -> Kept<'t> {
    let mut seen = Digests::default();
    let mut kept = Vec::new();
    for line in text.split(|b| *b == b'\n').rev() {
        if kept.len() == cap {
            break;
        }
        if line.is_empty() {
            continue;
        }
        let digest = digest(key, line);
        if seen.insert(digest) {
            kept.push((line, digest));
        }
    }
    kept.reverse();
    (kept, seen)
}

fn digest(key: &[RandomState; 2], jid: &[u8]) -> u128 {
    (u128::from(key[0].hash_one(jid)) << 64) | u128::from(key[1].hash_one(jid))
}

/// Rewrite `path` (whose contents are `text`) with what a store bounded
/// by `cap` remembers of it, unless that is every line already: the lines
/// kept, and their digests.
fn compact<'t>(
    path: &Path,
    text: &'t [u8],
    cap: usize,
    key: &[RandomState; 2],
) -> std::io::Result<Kept<'t>> {
    let (kept, seen) = newest(text, cap, key);
    let lines = text
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .count();
    if kept.len() < lines || text.last().is_some_and(|b| *b != b'\n') {
        crate::fsutil::replace_private(path, kept.iter().map(|(line, _)| line))?;
    }
    Ok((kept, seen))
}

fn read_if_any(path: &Path) -> std::io::Result<Vec<u8>> {
    match std::fs::read(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        read => read,
    }
}

impl JidStore {
    /// In memory only.
    pub fn memory(cap: usize) -> Self {
        Self {
            // Two keys, so two independent 64-bit hashes of each id.
            key: [RandomState::new(), RandomState::new()],
            set: Digests::default(),
            order: VecDeque::new(),
            cap: cap.max(1),
            file: None,
        }
    }

    /// Backed by `path` (created when missing): the ids it holds are
    /// remembered, the newest `cap` of them.
    pub fn open(path: &Path, cap: usize) -> std::io::Result<Self> {
        let mut store = Self::memory(cap);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        // Compacted when it holds more than is remembered, so it never
        // holds more than it must.
        let text = read_if_any(path)?;
        let (kept, set) = compact(path, &text, store.cap, &store.key)?;
        store.order = kept.iter().map(|(_, digest)| *digest).collect();
        store.set = set;
        store.file = Some(Journal {
            path: path.to_path_buf(),
            file: open_append(path)?,
            lines: kept.len(),
            line: Vec::new(),
        });
        Ok(store)
    }

    fn remember(&mut self, digest: u128) -> bool {
        if !self.set.insert(digest) {
            return false;
        }
        if self.order.len() == self.cap
            && let Some(old) = self.order.pop_front()
        {
            self.set.remove(&old);
        }
        self.order.push_back(digest);
        true
    }

    /// Whether `jid` was accepted before.
    pub fn contains(&self, jid: &str) -> bool {
        self.set.contains(&digest(&self.key, jid.as_bytes()))
    }

    /// Accept `jid`: true when it is new. A write error is logged; the id
    /// is still remembered in memory. An id the file could not hold as one
    /// line (empty, or with a line break) is refused: false.
    pub fn insert(&mut self, jid: &str) -> bool {
        if jid.is_empty() || jid.contains(['\n', '\r']) {
            return false;
        }
        if !self.remember(digest(&self.key, jid.as_bytes())) {
            return false;
        }
        let Some(journal) = &mut self.file else {
            return true;
        };
        // One write(2) of the whole line: `writeln!` on a File makes two,
        // and a crash between them would leave half a line.
        journal.line.clear();
        journal.line.extend_from_slice(jid.as_bytes());
        journal.line.push(b'\n');
        if let Err(e) = journal.file.write_all(&journal.line) {
            tracing::error!(path = %journal.path.display(), cause = %e, "cannot record jid");
        }
        journal.lines += 1;
        if journal.lines >= self.cap.saturating_mul(2) {
            let compacted = read_if_any(&journal.path)
                .and_then(|text| Ok(compact(&journal.path, &text, self.cap, &self.key)?.0.len()))
                .and_then(|lines| Ok((open_append(&journal.path)?, lines)));
            match compacted {
                Ok((file, lines)) => {
                    journal.file = file;
                    journal.lines = lines;
                }
                Err(e) => {
                    // Appending goes on; compacting is tried again later.
                    tracing::error!(path = %journal.path.display(), cause = %e, "cannot compact jid file");
                    journal.lines = 0;
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
        assert!(s.contains("b") && s.contains("c") && !s.contains("a"));
        assert!(s.insert("a"), "the oldest was forgotten");
        assert!(!s.insert("with\nnewline") && !s.insert(""));
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

    #[test]
    fn the_file_is_compacted_to_the_newest_ids_and_read_back_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jids");
        // An older file: a repeated id, a blank line, an id with spaces.
        std::fs::write(&path, "a\nb\n\na\n c \nd\n").unwrap();
        let mut s = JidStore::open(&path, 3).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a\n c \nd\n");
        assert!(s.contains("a") && s.contains(" c ") && s.contains("d"));
        assert!(!s.contains("b") && !s.contains("c"));
        // Appended until the file holds twice the bound, then compacted to
        // the bound: the newest, in order.
        for j in ["e", "f", "g"] {
            assert!(s.insert(j));
        }
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "e\nf\ng\n");
        assert!(s.insert("h"));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "e\nf\ng\nh\n");
        drop(s);
        let s = JidStore::open(&path, 3).unwrap();
        assert!(s.contains("f") && s.contains("g") && s.contains("h"));
        assert!(!s.contains("e"));
    }

    #[test]
    fn a_file_within_the_bound_is_not_rewritten_unless_its_last_line_is_torn() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jids");
        std::fs::write(&path, "x\ny\n").unwrap();
        let inode = std::fs::metadata(&path).unwrap().ino();
        let s = JidStore::open(&path, 3).unwrap();
        assert!(s.contains("x") && s.contains("y"));
        assert_eq!(std::fs::metadata(&path).unwrap().ino(), inode);
        drop(s);
        // A crash mid-line: the line is kept and ended, so the next id is
        // a line of its own.
        std::fs::write(&path, "x\ny").unwrap();
        let mut s = JidStore::open(&path, 3).unwrap();
        assert!(s.insert("z"));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "x\ny\nz\n");
    }

    #[test]
    fn the_same_id_is_one_id_and_others_are_not() {
        let mut s = JidStore::memory(100_000);
        for i in 0..100_000u64 {
            assert!(s.insert(&format!("2026112313454{i:07}")));
        }
        for i in 0..100_000u64 {
            assert!(!s.insert(&format!("2026112313454{i:07}")), "{i}");
        }
        assert!(s.insert("20261123134550000000"));
        assert!(!s.contains("20261123134540000000"), "the oldest went");
    }
}
