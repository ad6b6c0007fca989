//! Entries gone from a maid's stream: what Redis's own counts say of
//! them, and what `maid audit verify --stream` remembers of a stream it
//! verified, so that a head removed with `XDEL`, or the whole stream
//! deleted, is told from what `XADD … MAXLEN` does every day.
//!
//! The chain finds what was removed between two records; a stream's
//! oldest records, or all of them, leave no hole behind. Two facts fill
//! that in. Redis 7's `XINFO STREAM` reports `max-deleted-entry-id`, set
//! by `XDEL` and never by trimming (maids never delete), and
//! `entries-added`, every entry ever added to the key, which trimming
//! does not lower and which starts again at 0 when the key is deleted
//! and written anew. And a [`Seen`] file per maid remembers the last
//! checkpoint verify found signed in the stream, which entry it was of
//! all ever added, and the count then: a stream gone since, counting
//! fewer entries than then, or beginning after that checkpoint when the
//! counts say trimming would have kept it, was deleted.
//!
//! What this cannot prove: trimming itself is allowed (`XADD` takes
//! `MAXLEN`/`MINID` and ACLs cannot forbid the argument), so whoever may
//! `XADD` to a stream — the maid's own Redis user, its host's root — can
//! empty it by trimming, and that reads as trimming. A writer allowed
//! `XSETID` can raise `entries-added`, and one allowed `RESTORE` can
//! write a stream with any counts: against them only a collector that
//! read the records first (syslog, or a verify that remembered) holds.

use std::path::{Path, PathBuf};

use redis::Value as Reply;
use serde::{Deserialize, Serialize};

use maid_bus::Conn;
use maid_protocol::auditchain::stream_key;

use super::AuditError;

/// What `XINFO STREAM` says of a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamInfo {
    /// Entries in it now.
    pub length: u64,
    /// The last entry id it gave (`last-generated-id`): entries read up
    /// to it are those the counts below count.
    pub last_id: String,
    /// Every entry ever added to the key (Redis 7; `None` before).
    pub entries_added: Option<u64>,
    /// The greatest id `XDEL` removed, `0-0` when it never ran (Redis 7).
    pub max_deleted: Option<String>,
}

/// `XINFO STREAM` of maid `id`'s stream; `None` when there is no such
/// key.
pub async fn stream_info(conn: &mut Conn, id: &str) -> Result<Option<StreamInfo>, AuditError> {
    let key = stream_key(id);
    let exists: bool = redis::cmd("EXISTS").arg(&key).query_async(conn).await?;
    if !exists {
        return Ok(None);
    }
    let reply: Reply = redis::cmd("XINFO")
        .arg("STREAM")
        .arg(&key)
        .query_async(conn)
        .await?;
    let pairs: Vec<(String, Reply)> = match reply {
        Reply::Map(kv) => kv
            .into_iter()
            .filter_map(|(k, v)| text(&k).map(|k| (k, v)))
            .collect(),
        Reply::Array(flat) => flat
            .chunks_exact(2)
            .filter_map(|kv| text(&kv[0]).map(|k| (k, kv[1].clone())))
            .collect(),
        other => {
            return Err(AuditError::Query(format!(
                "XINFO STREAM {key}: an answer that is no map: {other:?}"
            )));
        }
    };
    let get = |name: &str| pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v);
    let number = |name: &str| match get(name) {
        Some(Reply::Int(n)) => u64::try_from(*n).ok(),
        Some(v) => text(v).and_then(|t| t.parse().ok()),
        None => None,
    };
    Ok(Some(StreamInfo {
        length: number("length").unwrap_or(0),
        last_id: get("last-generated-id")
            .and_then(text)
            .unwrap_or_else(|| "+".into()),
        entries_added: number("entries-added"),
        max_deleted: get("max-deleted-entry-id").and_then(text),
    }))
}

fn text(v: &Reply) -> Option<String> {
    match v {
        Reply::BulkString(b) => String::from_utf8(b.clone()).ok(),
        Reply::SimpleString(s) => Some(s.clone()),
        Reply::VerbatimString { text, .. } => Some(text.clone()),
        _ => None,
    }
}

/// A stream entry id as numbers, for ordering.
fn entry_id(id: &str) -> Option<(u64, u64)> {
    let (ms, n) = id.split_once('-')?;
    Some((ms.parse().ok()?, n.parse().ok()?))
}

/// What verify remembers of a maid's stream: the last checkpoint it
/// found signed there, and Redis's count then.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Seen {
    /// The checkpoint's `seq`.
    pub seq: u64,
    /// The SHA-256 of its line: the same `seq` read later must be it.
    pub sha256: String,
    /// Its entry's id.
    pub entry: String,
    /// Which entry it was of all the stream ever had (the first added
    /// is 1): trimming removes entries in that order, so it is gone by
    /// trimming only once the stream's first entry comes later.
    pub ordinal: u64,
    /// `entries-added` when it was verified: the same stream never
    /// counts fewer.
    pub entries_added: u64,
    /// When (RFC 3339), for the operator.
    pub verified_at: String,
}

/// Why a remembered stream cannot be read or kept.
#[derive(Debug, thiserror::Error)]
pub enum SeenError {
    #[error("{0}: {1}")]
    Io(PathBuf, std::io::Error),
    #[error("{0}: not what verify remembers of a stream: {1}")]
    Format(PathBuf, serde_json::Error),
    #[error("{0}")]
    Id(#[from] crate::pki::PkiError),
}

impl Seen {
    /// Where maid `id`'s stream is remembered under `dir`.
    pub fn path(dir: &Path, id: &str) -> Result<PathBuf, SeenError> {
        crate::pki::check_id(id)?;
        Ok(dir.join(format!("{id}.json")))
    }

    /// What `dir` remembers of maid `id`'s stream, if anything.
    pub fn load(dir: &Path, id: &str) -> Result<Option<Seen>, SeenError> {
        let path = Self::path(dir, id)?;
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(SeenError::Io(path, e)),
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| SeenError::Format(path, e))
    }

    /// Remember this for maid `id` under `dir` (made 0700 if new); the
    /// file is replaced whole, never left half written.
    pub fn store(&self, dir: &Path, id: &str) -> Result<(), SeenError> {
        use std::os::unix::fs::DirBuilderExt;
        let path = Self::path(dir, id)?;
        let io = |e| SeenError::Io(dir.to_path_buf(), e);
        if !dir.is_dir() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(io)?;
        }
        let tmp = dir.join(format!(".{id}.json.tmp"));
        let text = serde_json::to_vec_pretty(self).expect("a Seen serialises");
        std::fs::write(&tmp, text).map_err(io)?;
        std::fs::rename(&tmp, &path).map_err(io)
    }
}

/// One entry of a stream as verify read it: its id, and its record's
/// `seq` and line SHA-256.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Read {
    pub entry: String,
    pub seq: u64,
    pub sha256: String,
}

/// What is known of maid `id`'s stream beyond its chain.
pub struct Stream<'a> {
    pub id: &'a str,
    /// `None`: no such key.
    pub info: Option<&'a StreamInfo>,
    /// Its entries, oldest first, up to `info.last_id`.
    pub read: &'a [Read],
    /// The ranges the maid's gap records say the stream never got.
    pub gaps: &'a [(u64, u64)],
}

/// How entries left a stream other than by trimming, in words that
/// name the stream and what tells.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Deleted(pub String);

/// Whether entries are gone from the stream other than by trimming:
/// `Err` says how, `Ok` what cannot be told either way (nothing when
/// all is known).
pub fn judge(s: &Stream, seen: Option<&Seen>) -> Result<Vec<String>, Deleted> {
    let key = stream_key(s.id);
    let Some(info) = s.info else {
        return Err(Deleted(match seen {
            Some(seen) => format!(
                "{key} is gone: it held checkpoint seq {} when verified at {}; the stream \
                 was deleted (DEL, UNLINK, FLUSHDB, or evicted)",
                seen.seq, seen.verified_at
            ),
            None => format!(
                "{key} does not exist: the maid never wrote to it (is `[audit] stream` on?), \
                 or it was deleted"
            ),
        }));
    };
    if let Some(m) = &info.max_deleted
        && entry_id(m).is_some_and(|m| m != (0, 0))
    {
        let before_first = match (entry_id(m), s.read.first()) {
            (Some(m), Some(first)) => entry_id(&first.entry).is_some_and(|f| m < f),
            (_, None) => true,
            _ => false,
        };
        let head = if before_first {
            ", before its first entry: its oldest records are gone"
        } else {
            ""
        };
        return Err(Deleted(format!(
            "entries were deleted from {key} with XDEL (the last of them {m}{head}); \
             trimming (MAXLEN, XTRIM) never marks a stream so, and maids never delete"
        )));
    }
    let Some(added) = info.entries_added else {
        return Ok(vec![format!(
            "this Redis is older than 7 and keeps no count of what left {key}: a head \
             removed cannot be told from trimming"
        )]);
    };
    let first = s.read.first();
    let Some(seen) = seen else {
        let mut notes = Vec::new();
        if let Some(first) = first
            && first.seq > 1
            && added == info.length
        {
            notes.push(format!(
                "{key} begins at seq {} and Redis counts no entry ever gone from it: the \
                 records before never reached it (the stream sink came later), or the stream \
                 was deleted and made anew; only a checkpoint remembered (--state-dir) tells",
                first.seq
            ));
        }
        return Ok(notes);
    };
    if added < seen.entries_added {
        return Err(Deleted(format!(
            "{key} was made anew: Redis counts {added} entries ever added to it, fewer than \
             the {} when checkpoint seq {} was verified at {}; it was deleted and written again",
            seen.entries_added, seen.seq, seen.verified_at
        )));
    }
    if let Some(at) = s.read.iter().find(|r| r.seq == seen.seq) {
        if at.sha256 != seen.sha256 {
            return Err(Deleted(format!(
                "seq {} in {key} is not the checkpoint verified there at {}: replaced",
                seen.seq, seen.verified_at
            )));
        }
        return Ok(Vec::new());
    }
    if first.is_some_and(|f| f.seq < seen.seq) {
        return Err(Deleted(format!(
            "checkpoint seq {}, verified in {key} at {}, is missing from it: removed",
            seen.seq, seen.verified_at
        )));
    }
    // The checkpoint is before the stream's first entry. Trimming takes
    // the oldest first: the first entry now is the (added - length + 1)th
    // ever added, and trimming took the checkpoint only if it came before.
    let first_ordinal = added - info.length + 1;
    if first_ordinal <= seen.ordinal {
        return Err(Deleted(format!(
            "checkpoint seq {}, verified in {key} at {}, is gone though trimming would have \
             kept it (it was entry {} of {added}, and {} remain): removed",
            seen.seq, seen.verified_at, seen.ordinal, info.length
        )));
    }
    if let Some(first) = first {
        made_anew(&key, s, seen, first, first_ordinal)?;
    }
    Ok(Vec::new())
}

/// Whether stream `s`, begun at `first` (the `first_ordinal`th entry ever
/// added) after the remembered checkpoint `seen`, holds too few entries
/// since it for the records the maid wrote: deleted and made anew.
fn made_anew(
    key: &str,
    s: &Stream,
    seen: &Seen,
    first: &Read,
    first_ordinal: u64,
) -> Result<(), Deleted> {
    // Each record after the checkpoint became an entry (one given up
    // is in a gap record), so at least as many entries were added
    // between the two as records were written; a stream deleted and
    // made anew counts from 0 again.
    let entries = first_ordinal - 1 - seen.ordinal;
    let records = first.seq.saturating_sub(seen.seq + 1);
    let given_up: u64 = s
        .gaps
        .iter()
        .map(|&(a, b)| {
            let (a, b) = (a.max(seen.seq + 1), b.min(first.seq.saturating_sub(1)));
            if a <= b { b - a + 1 } else { 0 }
        })
        .sum();
    if entries + given_up < records {
        return Err(Deleted(format!(
            "{key} was made anew: Redis counts {entries} entries added after checkpoint \
             seq {} (verified at {}) before the first there now, seq {}, but the maid wrote \
             {records} records between them ({given_up} given up, as its gap records \
             say); it was deleted and written again (or a gap record trimmed away since \
             would explain it)",
            seen.seq, seen.verified_at, first.seq
        )));
    }
    Ok(())
}

/// The time to remember a verify by: RFC 3339, UTC, to the second.
pub fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// What to remember after a verify that found the stream intact:
/// `vouched`, the last checkpoint a key verified in it (else what was
/// remembered, with the count now).
pub fn remember(
    info: &StreamInfo,
    read: &[Read],
    vouched: Option<u64>,
    seen: Option<&Seen>,
    now: &str,
) -> Option<Seen> {
    let added = info.entries_added?;
    let at = vouched.and_then(|v| read.iter().rposition(|r| r.seq == v));
    match at {
        Some(i) if seen.is_none_or(|s| read[i].seq >= s.seq) => Some(Seen {
            seq: read[i].seq,
            sha256: read[i].sha256.clone(),
            entry: read[i].entry.clone(),
            ordinal: added - (read.len() - 1 - i) as u64,
            entries_added: added,
            verified_at: now.into(),
        }),
        _ => seen.map(|s| Seen {
            entries_added: added.max(s.entries_added),
            ..s.clone()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(from_seq: u64, n: u64, first_ms: u64) -> Vec<Read> {
        (0..n)
            .map(|i| Read {
                entry: format!("{}-0", first_ms + i),
                seq: from_seq + i,
                sha256: format!("h{}", from_seq + i),
            })
            .collect()
    }

    fn info(length: u64, added: u64, deleted: &str) -> StreamInfo {
        StreamInfo {
            length,
            last_id: "9-0".into(),
            entries_added: Some(added),
            max_deleted: Some(deleted.into()),
        }
    }

    #[test]
    fn a_head_removed_or_a_stream_deleted_is_told_from_trimming() {
        // 100 records, seq 1..=100, entries 1000..; seq 50 a checkpoint.
        let all = read(1, 100, 1000);
        let full = info(100, 100, "0-0");
        let s = |info: Option<&'static StreamInfo>, read: &'static [Read]| Stream {
            id: "m1",
            info,
            read,
            gaps: &[],
        };
        let leak = |v: Vec<Read>| -> &'static [Read] { Box::leak(v.into_boxed_slice()) };
        let leak_info = |i: StreamInfo| -> &'static StreamInfo { Box::leak(Box::new(i)) };
        let all: &'static [Read] = leak(all);
        assert_eq!(
            judge(&s(Some(leak_info(full.clone())), all), None),
            Ok(vec![])
        );
        let seen = remember(&full, all, Some(50), None, "t").unwrap();
        assert_eq!((seen.seq, seen.ordinal, seen.entries_added), (50, 50, 100));
        assert_eq!(
            judge(&s(Some(leak_info(full.clone())), all), Some(&seen)),
            Ok(vec![])
        );

        // Trimmed to the last 30 (MAXLEN), 20 more added: intact.
        let trimmed = leak(read(91, 30, 1090));
        let t = leak_info(info(30, 120, "0-0"));
        assert_eq!(judge(&s(Some(t), trimmed), Some(&seen)), Ok(vec![]));
        // The oldest 60 removed with XDEL: Redis says so, remembered or not.
        let x = leak_info(info(40, 100, "1059-0"));
        let tail = leak(read(61, 40, 1060));
        for seen in [None, Some(&seen)] {
            let e = judge(&s(Some(x), tail), seen).unwrap_err().0;
            assert!(
                e.contains("XDEL") && e.contains("oldest records are gone"),
                "{e}"
            );
        }
        // Deleted: gone; then made anew by the maid's next records.
        let e = judge(&s(None, tail), Some(&seen)).unwrap_err().0;
        assert!(e.contains("is gone"), "{e}");
        assert!(
            judge(&s(None, tail), None)
                .unwrap_err()
                .0
                .contains("does not exist")
        );
        let anew = leak(read(101, 5, 2000));
        let e = judge(&s(Some(leak_info(info(5, 5, "0-0"))), anew), Some(&seen))
            .unwrap_err()
            .0;
        assert!(e.contains("made anew"), "{e}");
        // ... and after as many records as were ever added before: the
        // count alone passes, what the checkpoint remembers does not.
        let later = leak(read(300, 50, 3000));
        let e = judge(
            &s(Some(leak_info(info(50, 200, "0-0"))), later),
            Some(&seen),
        )
        .unwrap_err()
        .0;
        assert!(e.contains("made anew"), "{e}");
        // Unremembered, a stream begun mid-chain with nothing ever gone
        // is told, not failed.
        let notes = judge(&s(Some(leak_info(info(5, 5, "0-0"))), anew), None).unwrap();
        assert!(notes[0].contains("begins at seq 101"), "{notes:?}");
        // The checkpoint replaced.
        let mut swapped = all.to_vec();
        swapped[49].sha256 = "other".into();
        let e = judge(
            &s(Some(leak_info(full.clone())), leak(swapped)),
            Some(&seen),
        )
        .unwrap_err()
        .0;
        assert!(e.contains("replaced"), "{e}");
    }

    #[test]
    fn what_is_remembered_is_kept_per_maid_and_refuses_bad_ids() {
        let dir = tempfile::tempdir().unwrap();
        let seen = Seen {
            seq: 7,
            sha256: "h".into(),
            entry: "1-0".into(),
            ordinal: 7,
            entries_added: 9,
            verified_at: "t".into(),
        };
        let at = dir.path().join("verified");
        assert_eq!(Seen::load(&at, "web-1").unwrap(), None);
        seen.store(&at, "web-1").unwrap();
        assert_eq!(Seen::load(&at, "web-1").unwrap(), Some(seen.clone()));
        assert!(seen.store(&at, "../etc").is_err());
        std::fs::write(at.join("db-1.json"), "{").unwrap();
        assert!(
            Seen::load(&at, "db-1")
                .unwrap_err()
                .to_string()
                .contains("db-1.json")
        );
    }
}
