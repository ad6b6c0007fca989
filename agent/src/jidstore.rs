//! The job ids a maid has accepted, remembered by age across restarts.
//!
//! A `jid` runs at most once (PROTOCOL §5), and a signed job seen before is
//! rejected as `replayed` (§6) — also after the agent restarts, so the ids
//! live in a small append-only file in the state directory as well as in
//! memory.
//!
//! Each id is kept for a *retention* from the moment it was accepted: twice
//! the signature skew window, and a second. A signed job is fresh only while its
//! `issued_at` is within the skew of the maid's clock, and it was within
//! the skew when it was accepted, so by the time its id is forgotten the
//! job itself is refused as `expired`: no replay can fall in between. Ids
//! are never forgotten before then. The store is bounded all the same:
//! when it holds its bound of live ids, a new job is refused
//! ([`Insert::Full`]) rather than an id forgotten early, which would reopen
//! replay to anyone who can send that many signed jobs.
//!
//! The bound is per signing key ([`JidStore::insert_signed`]): each key
//! (the `kid` a signed job was verified with; unsigned jobs are one more)
//! may have its bound of live ids, so a flood of jobs signed by one key —
//! the API's, sending whatever its users ask — fills only that key's room,
//! and `maid run`'s jobs, signed by the master's key, still run. Keys are
//! the maid's trusted keys, so the whole store holds at most the bound
//! times their number, plus one.
//!
//! The file holds one `jid<TAB>expiry` line per id (expiry in Unix ms),
//! `<TAB>kid` after it for a signed job's; lines of older agents, a jid
//! alone, are kept for a whole retention from the start. It is rewritten
//! with just the live ids at start and whenever it holds twice as many
//! lines as there are live ids.
//!
//! In memory each id is kept as a 128-bit keyed hash, not as its text: an
//! agent that holds 100 000 ids spends a few MB on them, and accepting a
//! job allocates nothing once the queue has grown. The key is random for
//! each process, so nobody can make two ids collide on purpose, and by
//! chance two of 100 000 ids would collide once in ~10²⁸ tries. A collision
//! could only refuse a job as seen, never run one twice.

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

/// What [`JidStore::insert`] made of an id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Insert {
    /// Not seen within its retention: accepted, and remembered.
    New,
    /// Seen before, and still remembered.
    Seen,
    /// The store holds its bound of live ids: refused, nothing forgotten.
    Full,
    /// Not an id the file could hold as one line (empty, or with a line
    /// break or a tab).
    Invalid,
}

/// Accepted job ids.
pub struct JidStore {
    key: [RandomState; 2],
    set: Digests,
    /// The ids of `set` with their expiry (Unix ms) and signer (an index
    /// into `signers`), oldest first.
    order: VecDeque<(u128, i64, u32)>,
    /// Each key that signed a live id (`None`: unsigned), and how many
    /// live ids it signed. A few entries: the maid's trusted keys.
    signers: Vec<(Option<String>, usize)>,
    /// How long an id is kept, in ms.
    retention_ms: i64,
    /// Live ids each signer may have.
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

fn digest(key: &[RandomState; 2], jid: &[u8]) -> u128 {
    (u128::from(key[0].hash_one(jid)) << 64) | u128::from(key[1].hash_one(jid))
}

fn read_if_any(path: &Path) -> std::io::Result<Vec<u8>> {
    match std::fs::read(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        read => read,
    }
}

/// A file line: the id, its expiry and its signer. A line without an
/// expiry (an older agent's) expires `fallback`; an expiry that is not a
/// number is read as `fallback` too, never as already past.
fn parse_line(line: &[u8], fallback: i64) -> (&[u8], i64, Option<&str>) {
    let mut fields = line.splitn(3, |b| *b == b'\t');
    let jid = fields.next().unwrap_or_default();
    let expiry = fields
        .next()
        .and_then(|t| std::str::from_utf8(t).ok())
        .and_then(|t| t.trim().parse::<i64>().ok())
        .unwrap_or(fallback);
    let signer = fields
        .next()
        .and_then(|s| std::str::from_utf8(s).ok())
        .filter(|s| !s.is_empty());
    (jid, expiry, signer)
}

/// Whether `text` fits in a file line's field.
fn one_field(text: &str) -> bool {
    !text.is_empty() && !text.contains(['\n', '\r', '\t'])
}

impl JidStore {
    /// In memory only: each id kept for `retention_ms`, at most `cap` at once.
    pub fn memory(cap: usize, retention_ms: i64) -> Self {
        Self {
            // Two keys, so two independent 64-bit hashes of each id.
            key: [RandomState::new(), RandomState::new()],
            set: Digests::default(),
            order: VecDeque::new(),
            signers: vec![(None, 0)],
            retention_ms: retention_ms.max(0),
            cap: cap.max(1),
            file: None,
        }
    }

    /// The index of `signer` in `signers`, added when new.
    fn signer_index(&mut self, signer: Option<&str>) -> u32 {
        let found = self
            .signers
            .iter()
            .position(|(s, _)| s.as_deref() == signer);
        let index = found.unwrap_or_else(|| {
            self.signers.push((signer.map(str::to_string), 0));
            self.signers.len() - 1
        });
        index as u32
    }

    /// Live ids `signer` signed.
    pub fn signed_by(&self, signer: Option<&str>) -> usize {
        self.signers
            .iter()
            .find(|(s, _)| s.as_deref() == signer)
            .map_or(0, |(_, n)| *n)
    }

    /// Backed by `path` (created when missing): the ids it holds that are
    /// still within their retention at `now_ms` are remembered. Live ids
    /// beyond `cap` are all kept: the file's word wins over the bound, and
    /// new jobs are refused until enough expire.
    pub fn open(path: &Path, cap: usize, retention_ms: i64, now_ms: i64) -> std::io::Result<Self> {
        let mut store = Self::memory(cap, retention_ms);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let text = read_if_any(path)?;
        let fallback = now_ms.saturating_add(store.retention_ms);
        // Each live id once, with its expiry, digest and signer.
        let mut live: Vec<(&[u8], i64, u128, Option<&str>)> = Vec::new();
        let mut lines = 0;
        // Whether a line must be written differently from how it is.
        let mut rewrite = text.last().is_some_and(|b| *b != b'\n');
        for line in text.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            lines += 1;
            // An expiry later than a retention from now is kept as it is:
            // the clock may have been stepped back since it was written,
            // and the job it guards is fresh by that clock's measure for
            // as long. Only this agent writes the file.
            let (jid, expiry, signer) = parse_line(line, fallback);
            rewrite |= expiry == fallback;
            if jid.is_empty() || expiry <= now_ms {
                continue;
            }
            let d = digest(&store.key, jid);
            if store.set.insert(d) {
                live.push((jid, expiry, d, signer));
            } else if let Some(kept) = live.iter_mut().find(|(_, _, k, _)| *k == d) {
                // A repeat (only an older agent's file has them): the
                // later expiry holds.
                kept.1 = kept.1.max(expiry);
            }
        }
        live.sort_by_key(|(_, expiry, _, _)| *expiry);
        let mut order = VecDeque::with_capacity(live.len());
        for (_, expiry, d, signer) in &live {
            let index = store.signer_index(*signer);
            store.signers[index as usize].1 += 1;
            order.push_back((*d, *expiry, index));
        }
        store.order = order;
        // Rewritten when it holds anything but the live ids as this agent
        // writes them, so it never holds more than it must.
        if rewrite || lines != live.len() {
            crate::fsutil::replace_private(
                path,
                live.iter().map(|(jid, e, _, s)| line_of(jid, *e, *s)),
            )?;
        }
        store.file = Some(Journal {
            path: path.to_path_buf(),
            file: open_append(path)?,
            lines: live.len(),
            line: Vec::new(),
        });
        Ok(store)
    }

    /// Live ids remembered.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether no id is remembered.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Forget the ids whose retention is over at `now_ms`.
    fn expire(&mut self, now_ms: i64) {
        while let Some(&(d, expiry, signer)) = self.order.front() {
            if expiry > now_ms {
                break;
            }
            self.order.pop_front();
            self.set.remove(&d);
            if let Some((_, n)) = self.signers.get_mut(signer as usize) {
                *n = n.saturating_sub(1);
            }
        }
    }

    /// Whether `jid` is remembered at `now_ms`.
    pub fn contains(&mut self, jid: &str, now_ms: i64) -> bool {
        self.expire(now_ms);
        self.set.contains(&digest(&self.key, jid.as_bytes()))
    }

    /// Accept the unsigned job `jid` at `now_ms`: [`JidStore::insert_signed`]
    /// without a signer.
    pub fn insert(&mut self, jid: &str, now_ms: i64) -> Insert {
        self.insert_signed(jid, None, now_ms)
    }

    /// Accept `jid`, signed by the key `signer` (its `kid`; `None`:
    /// unsigned), at `now_ms`: new unless any signer's job had it; full
    /// when `signer` has its bound of live ids, whatever the others have.
    /// A write error is logged; the id is still remembered in memory.
    pub fn insert_signed(&mut self, jid: &str, signer: Option<&str>, now_ms: i64) -> Insert {
        if !one_field(jid) || !signer.is_none_or(one_field) {
            return Insert::Invalid;
        }
        self.expire(now_ms);
        let d = digest(&self.key, jid.as_bytes());
        if self.set.contains(&d) {
            return Insert::Seen;
        }
        if self.signed_by(signer) >= self.cap {
            return Insert::Full;
        }
        let index = self.signer_index(signer);
        let expiry = now_ms.saturating_add(self.retention_ms);
        // Kept in expiry order even if the clock stepped back: such an id
        // waits behind later ones and lives longer, never shorter.
        let expiry = self
            .order
            .back()
            .map_or(expiry, |&(_, last, _)| expiry.max(last));
        self.set.insert(d);
        self.order.push_back((d, expiry, index));
        self.signers[index as usize].1 += 1;
        self.append(jid, expiry, signer);
        Insert::New
    }

    fn append(&mut self, jid: &str, expiry: i64, signer: Option<&str>) {
        let live = self.order.len();
        let Some(journal) = &mut self.file else {
            return;
        };
        // One write(2) of the whole line: `writeln!` on a File makes two,
        // and a crash between them would leave half a line.
        journal.line.clear();
        journal
            .line
            .extend_from_slice(&line_of(jid.as_bytes(), expiry, signer));
        journal.line.push(b'\n');
        if let Err(e) = journal.file.write_all(&journal.line) {
            tracing::error!(path = %journal.path.display(), cause = %e, "cannot record jid");
        }
        journal.lines += 1;
        if journal.lines >= live.saturating_mul(2).max(1024) {
            self.compact();
        }
    }

    /// Rewrite the file with the live ids only.
    fn compact(&mut self) {
        let Some(journal) = &mut self.file else {
            return;
        };
        let key = &self.key;
        let set = &self.set;
        let order = &self.order;
        let signers = &self.signers;
        let rewritten = read_if_any(&journal.path).and_then(|text| {
            // The live ids, each once, with the expiry and signer memory
            // holds.
            let mut written = Digests::default();
            let mut keep = Vec::new();
            for line in text.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                let (jid, _, _) = parse_line(line, 0);
                let d = digest(key, jid);
                if set.contains(&d) && written.insert(d) {
                    keep.push(jid.to_vec());
                }
            }
            let held: std::collections::HashMap<u128, (i64, u32)> =
                order.iter().map(|&(d, e, s)| (d, (e, s))).collect();
            let lines: Vec<Vec<u8>> = keep
                .iter()
                .filter_map(|jid| {
                    let (expiry, signer) = *held.get(&digest(key, jid))?;
                    let signer = signers.get(signer as usize).and_then(|(s, _)| s.as_deref());
                    Some(line_of(jid, expiry, signer))
                })
                .collect();
            crate::fsutil::replace_private(&journal.path, &lines)?;
            Ok((open_append(&journal.path)?, lines.len()))
        });
        match rewritten {
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
}

/// The file line of an id (without its newline).
fn line_of(jid: &[u8], expiry: i64, signer: Option<&str>) -> Vec<u8> {
    let mut line = Vec::with_capacity(jid.len() + 21 + signer.map_or(0, |s| s.len() + 1));
    line.extend_from_slice(jid);
    line.push(b'\t');
    line.extend_from_slice(expiry.to_string().as_bytes());
    if let Some(signer) = signer {
        line.push(b'\t');
        line.extend_from_slice(signer.as_bytes());
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: i64 = 3_600_000;

    #[test]
    fn ids_are_kept_for_their_retention_and_never_forgotten_early() {
        let mut s = JidStore::memory(2, HOUR);
        assert_eq!(s.insert("a", 0), Insert::New);
        assert_eq!(s.insert("a", 1), Insert::Seen);
        assert_eq!(s.insert("b", 2), Insert::New);
        // Full: a third id is refused, and neither kept id is forgotten.
        assert_eq!(s.insert("c", 3), Insert::Full);
        assert_eq!(s.insert("a", HOUR - 1), Insert::Seen);
        assert_eq!(s.insert("b", HOUR - 1), Insert::Seen);
        // Once "a" is past its retention, it goes and there is room.
        assert_eq!(s.insert("c", HOUR), Insert::New);
        assert!(!s.contains("a", HOUR));
        assert_eq!(s.insert("with\nnewline", 0), Insert::Invalid);
        assert_eq!(s.insert("tab\there", 0), Insert::Invalid);
        assert_eq!(s.insert("", 0), Insert::Invalid);
    }

    #[test]
    fn a_clock_stepped_back_makes_ids_live_longer_not_shorter() {
        let mut s = JidStore::memory(10, HOUR);
        assert_eq!(s.insert("a", 10 * HOUR), Insert::New);
        assert_eq!(s.insert("b", 0), Insert::New);
        assert!(s.contains("a", 11 * HOUR - 1) && s.contains("b", 11 * HOUR - 1));
        assert!(!s.contains("b", 11 * HOUR));
    }

    #[test]
    fn survives_a_restart_with_expiries_and_drops_what_expired() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/jids");
        let mut s = JidStore::open(&path, 100, HOUR, 0).unwrap();
        for (i, j) in ["1", "2", "3"].iter().enumerate() {
            assert_eq!(s.insert(j, i as i64 * HOUR / 2), Insert::New);
        }
        drop(s);
        // At 1.2 h, "1" (accepted at 0) has expired; "2" and "3" are kept.
        let mut s = JidStore::open(&path, 100, HOUR, HOUR + HOUR / 5).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s.insert("2", HOUR + HOUR / 5), Insert::Seen);
        assert_eq!(s.insert("1", HOUR + HOUR / 5), Insert::New);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 3, "{text}");
        assert!(text.lines().all(|l| l.contains('\t')), "{text}");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn a_restart_keeps_every_live_id_even_past_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jids");
        let mut s = JidStore::open(&path, 3, HOUR, 0).unwrap();
        for j in ["a", "b", "c"] {
            assert_eq!(s.insert(j, 0), Insert::New);
        }
        drop(s);
        // A smaller bound after the restart: nothing is forgotten, new ids
        // are refused.
        let mut s = JidStore::open(&path, 2, HOUR, 1).unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(s.insert("a", 1), Insert::Seen);
        assert_eq!(s.insert("d", 1), Insert::Full);
    }

    #[test]
    fn older_files_and_torn_lines_are_read_conservatively() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jids");
        // An older agent's file (ids alone), a repeat, a blank line, an
        // expiry that is not a number and a torn last line.
        std::fs::write(&path, "a\nb\n\na\nc\tnonsense\nd\t99").unwrap();
        let mut s = JidStore::open(&path, 100, HOUR, 1000).unwrap();
        // Ids without a readable expiry are kept a whole retention.
        for j in ["a", "b", "c"] {
            assert!(s.contains(j, 1000 + HOUR - 1), "{j}");
        }
        // "d" expired at 99.
        assert!(!s.contains("d", 1000));
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 3, "{text}");
        assert!(text.ends_with('\n'));
        assert_eq!(s.insert("e", 1000), Insert::New);
        assert!(
            std::fs::read_to_string(&path)
                .unwrap()
                .ends_with("e\t3601000\n")
        );
    }

    #[test]
    fn a_clock_stepped_back_across_a_restart_keeps_ids_as_long_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jids");
        let mut s = JidStore::open(&path, 10, HOUR, 10 * HOUR).unwrap();
        assert_eq!(s.insert("a", 10 * HOUR), Insert::New);
        drop(s);
        // Restarted with the clock nine hours back: "a" stays until the
        // expiry it was written with, though that is past one retention.
        let mut s = JidStore::open(&path, 10, HOUR, HOUR).unwrap();
        assert!(s.contains("a", 11 * HOUR - 1));
        assert!(!s.contains("a", 11 * HOUR));
    }

    #[test]
    fn a_file_of_live_ids_is_not_rewritten() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jids");
        std::fs::write(&path, "x\t5000\ny\t6000\n").unwrap();
        let inode = std::fs::metadata(&path).unwrap().ino();
        let mut s = JidStore::open(&path, 3, HOUR, 0).unwrap();
        assert!(s.contains("x", 0) && s.contains("y", 0));
        assert_eq!(std::fs::metadata(&path).unwrap().ino(), inode);
    }

    #[test]
    fn the_journal_is_compacted_to_the_live_ids() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jids");
        let mut s = JidStore::open(&path, 10_000, 10, 0).unwrap();
        // Each id lives 10 ms; at 1 ms apart, about ten are live at once,
        // and the file is rewritten long before it holds 2 000 lines.
        for i in 0..2_000i64 {
            assert_eq!(s.insert(&i.to_string(), i), Insert::New);
        }
        let lines = std::fs::read_to_string(&path).unwrap().lines().count();
        assert!(lines <= 1024 + 10, "{lines}");
        drop(s);
        let s = JidStore::open(&path, 10_000, 10, 1_999).unwrap();
        assert!(s.len() <= 10, "{}", s.len());
    }

    /// A key that fills its room leaves every other key its own: the API's
    /// key flooding a maid cannot get the master's jobs refused `busy`.
    #[test]
    fn each_signing_key_has_its_own_bound() {
        let mut s = JidStore::memory(2, HOUR);
        assert_eq!(s.insert_signed("a1", Some("api"), 0), Insert::New);
        assert_eq!(s.insert_signed("a2", Some("api"), 0), Insert::New);
        assert_eq!(s.insert_signed("a3", Some("api"), 0), Insert::Full);
        assert_eq!(s.signed_by(Some("api")), 2);
        assert_eq!(s.insert_signed("m1", Some("master"), 1), Insert::New);
        assert_eq!(s.insert("u1", 1), Insert::New);
        // A jid is one jid whoever signs it again: a replay, not new.
        assert_eq!(s.insert_signed("a1", Some("master"), 1), Insert::Seen);
        assert_eq!(s.insert_signed("m2", Some("master"), 1), Insert::New);
        assert_eq!(s.insert_signed("m3", Some("master"), 1), Insert::Full);
        assert_eq!(s.len(), 5);
        // Room comes back to the key whose ids expire.
        assert_eq!(s.insert_signed("a3", Some("api"), HOUR), Insert::New);
        assert_eq!(s.signed_by(Some("api")), 1);
        assert_eq!(
            s.insert_signed("x", Some("bad\tkid"), HOUR),
            Insert::Invalid
        );
    }

    #[test]
    fn signers_survive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jids");
        let mut s = JidStore::open(&path, 2, HOUR, 0).unwrap();
        assert_eq!(s.insert_signed("a1", Some("api"), 0), Insert::New);
        assert_eq!(s.insert_signed("a2", Some("api"), 0), Insert::New);
        assert_eq!(s.insert_signed("m1", Some("master"), 0), Insert::New);
        drop(s);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(&format!("a1\t{HOUR}\tapi\n")), "{text}");
        let mut s = JidStore::open(&path, 2, HOUR, 1).unwrap();
        assert_eq!(s.insert_signed("a3", Some("api"), 1), Insert::Full);
        assert_eq!(s.insert_signed("m2", Some("master"), 1), Insert::New);
        assert_eq!(s.insert_signed("m1", Some("api"), 1), Insert::Seen);
        // The file, compacted or not, keeps the signers.
        drop(s);
        let s = JidStore::open(&path, 2, HOUR, 2).unwrap();
        assert_eq!(
            (s.signed_by(Some("api")), s.signed_by(Some("master"))),
            (2, 2)
        );
    }

    #[test]
    fn the_same_id_is_one_id_and_others_are_not() {
        let mut s = JidStore::memory(100_000, HOUR);
        for i in 0..100_000u64 {
            assert_eq!(s.insert(&format!("2026112313454{i:07}"), 0), Insert::New);
        }
        for i in 0..100_000u64 {
            assert_eq!(
                s.insert(&format!("2026112313454{i:07}"), 1),
                Insert::Seen,
                "{i}"
            );
        }
        assert_eq!(s.insert("20261123134550000000", 1), Insert::Full);
    }
}
