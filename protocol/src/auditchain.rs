//! The audit trail's hash chain: each record a maid writes carries its
//! sequence number (`seq`) and the SHA-256 of the line before it
//! (`prev`, of the bytes as written, without the newline), so a record
//! altered, removed, inserted or moved breaks the chain where it was
//! touched. At intervals and at rotation the maid writes a `checkpoint`
//! record whose Ed25519 signature, by the maid's own key, covers the
//! chain so far: a chain rewritten from some point on by someone without
//! that key no longer verifies at the next checkpoint.
//!
//! [`Verifier`] reads records in order (a rotated file's, then the next)
//! and names the first place the chain breaks. A chain is one maid's:
//! given whose it is ([`Verifier::owned_by`]; a stream `maid:audit:<id>`
//! is `<id>`'s, a file its checkpoints' maid's, see [`owner_of`]), a
//! record naming another maid is a break too, since the chain is not
//! keyed and whoever may append to a stream can link a record to it.
//!
//! Records hold what senders chose (a job's `fun`, a reject's reason):
//! whatever prints them shows them through [`escape_controls`].

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use ed25519_dalek::{Signer, SigningKey, Verifier as _, VerifyingKey};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// `prev` of the first record of a chain.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Hex SHA-256 of a record's line, as `prev` names it.
pub fn line_sha256(line: &[u8]) -> String {
    hex::encode(Sha256::digest(line))
}

/// Where a chain stands: the last record's `seq` and hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Head {
    pub seq: u64,
    pub sha256: String,
}

impl Head {
    /// Before the first record.
    pub fn genesis() -> Self {
        Head {
            seq: 0,
            sha256: GENESIS.into(),
        }
    }

    /// The head after `line` (whose `seq` is `seq`) was written.
    pub fn after(seq: u64, line: &[u8]) -> Self {
        Head {
            seq,
            sha256: line_sha256(line),
        }
    }

    /// Whether `rec` (a parsed record) is the one after this head.
    pub fn links(&self, rec: &Value) -> bool {
        rec.get("seq").and_then(Value::as_u64) == Some(self.seq + 1)
            && rec.get("prev").and_then(Value::as_str) == Some(self.sha256.as_str())
    }

    /// The head of a chain whose last written line is `line`, if it is a
    /// record with a `seq`.
    pub fn of_line(line: &[u8]) -> Option<Self> {
        let v: Value = serde_json::from_slice(line).ok()?;
        Some(Head::after(v.get("seq")?.as_u64()?, line))
    }
}

/// A checkpoint's signature: by the maid's key, over the chain up to the
/// checkpoint record itself (its `seq` and its `prev`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Base64 Ed25519 signature over [`signed_bytes`].
    pub sig: String,
    /// Hex SHA-256 of the maid's public key, first 16 characters.
    pub kid: String,
}

/// What a checkpoint signs: the minion, the checkpoint's `seq`, and the
/// hash of the record before it.
pub fn signed_bytes(minion: &str, seq: u64, prev: &str) -> Vec<u8> {
    format!("maid-audit-checkpoint\n{minion}\n{seq}\n{prev}").into_bytes()
}

/// The checkpoint of `minion`'s chain at record `seq` after `prev`.
pub fn checkpoint(key: &SigningKey, minion: &str, seq: u64, prev: &str) -> Checkpoint {
    let sig = key.sign(&signed_bytes(minion, seq, prev));
    Checkpoint {
        sig: B64.encode(sig.to_bytes()),
        kid: crate::trust::key_id(&key.verifying_key()),
    }
}

/// `text` with every character that could steer a terminal shown
/// escaped: C0 controls (newline and tab too: a record's field is one
/// line of a table), DEL, C1 controls (U+009B is a CSI on its own to
/// some terminals) and Unicode's bidirectional formatting characters,
/// which reorder what is read. `\u{1b}`, `\n`, `\t`, `\r`, as Rust
/// writes them; the rest of the text as it is.
pub fn escape_controls(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(steers) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if steers(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// JSON text (serde_json's: C0 controls escaped in strings, and outside
/// them only whitespace) with every other character [`steers`] names
/// written `\uXXXX` too. They can only
/// stand inside its strings, where the escape means the same character:
/// the JSON reads back exactly, and prints nothing a terminal obeys.
pub fn escape_json_controls(json: &str) -> std::borrow::Cow<'_, str> {
    // C0 stands in JSON only as the whitespace between its tokens.
    let escaped = |c: char| steers(c) && c >= ' ';
    if !json.chars().any(escaped) {
        return std::borrow::Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if escaped(c) {
            // Each is in the Basic Multilingual Plane: one escape.
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Whether `c` is a character [`escape_controls`] escapes.
pub fn steers(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Whose records `lines` (one maid's chain) are: the maid its first
/// `checkpoint` names — what the maid signed, when a key checks it —
/// else the first record that names one.
pub fn owner_of<'a>(lines: impl IntoIterator<Item = &'a [u8]> + Clone) -> Option<String> {
    let named = |checkpoint: bool| {
        lines
            .clone()
            .into_iter()
            .filter_map(|l| serde_json::from_slice::<Value>(l).ok())
            .filter(|v| {
                !checkpoint || v.get("decision").and_then(Value::as_str) == Some("checkpoint")
            })
            .find_map(|v| {
                v.get("minion")
                    .and_then(Value::as_str)
                    .filter(|m| !m.is_empty())
                    .map(String::from)
            })
    };
    named(true).or_else(|| named(false))
}

/// The maid `rec` names, when it names one other than `owner`: a record
/// in another maid's name.
pub fn names_other(rec: &Value, owner: &str) -> Option<String> {
    rec.get("minion")
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty() && *m != owner)
        .map(String::from)
}

/// Whether `rec` names no maid where a maid's record names one. Every
/// record a maid writes names it; those it wrote before it named itself
/// in every record (`suppressed` and `gap` carried an empty `minion`)
/// are the exception.
pub fn names_nobody(rec: &Value) -> bool {
    let unnamed_ok = matches!(
        rec.get("decision").and_then(Value::as_str),
        Some("suppressed" | "gap")
    );
    !unnamed_ok
        && rec
            .get("minion")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
}

/// The Redis stream maid `id` appends its records to.
pub fn stream_key(id: &str) -> String {
    format!("maid:audit:{id}")
}

/// The first thing wrong with a chain, where it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Break {
    /// Which input (a file name), and its 1-based line.
    pub source: String,
    pub line: usize,
    pub what: String,
}

impl std::fmt::Display for Break {
    /// Escaped: a break's words quote what a record says.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} line {}: {}",
            escape_controls(&self.source),
            self.line,
            escape_controls(&self.what)
        )
    }
}

/// Checks records in the order they were written.
#[derive(Debug)]
pub struct Verifier {
    key: Option<VerifyingKey>,
    /// Whose chain this is: every record must name this maid.
    owner: Option<String>,
    head: Option<Head>,
    /// Where the previous record was: for naming an altered one.
    last_at: Option<(String, usize)>,
    pub records: u64,
    pub checkpoints: u64,
    /// `seq` of the last record a verified checkpoint covers.
    pub vouched_through: Option<u64>,
    pub first_break: Option<Break>,
    /// Reading what a sink (`stream`, `syslog`) received: a hole is
    /// accepted while a later `gap` record of that sink explains it.
    sink: Option<String>,
    /// Holes seen and not explained yet: first and last `seq` missing,
    /// and where the record after them was.
    holes: Vec<(u64, u64, Break)>,
    /// Holes (or parts of one) a `gap` record explained.
    pub explained: u64,
    /// The ranges this verifier's sink never got, as the maid's `gap`
    /// records name them (before the first record read too).
    pub gaps: Vec<(u64, u64)>,
    /// A sink's last records (seq, SHA-256): one delivered again after a
    /// failed delivery is a repeat, not an insertion.
    recent: std::collections::VecDeque<(u64, String)>,
    /// Records a sink got twice (the same bytes).
    pub repeated: u64,
    /// Within a repeated run: the next `seq` it must repeat (a retried
    /// delivery repeats records up to the last one read, in order), and
    /// where the run began.
    replaying: Option<(u64, Break)>,
}

/// How many of a sink's last records a repeat is looked for among.
const RECENT: usize = 4_096;

impl Verifier {
    /// A verifier of checkpoints signed by `key` (without one, only the
    /// chain is checked).
    pub fn new(key: Option<VerifyingKey>) -> Self {
        Verifier {
            key,
            owner: None,
            head: None,
            last_at: None,
            records: 0,
            checkpoints: 0,
            vouched_through: None,
            first_break: None,
            sink: None,
            holes: Vec::new(),
            explained: 0,
            gaps: Vec::new(),
            recent: std::collections::VecDeque::new(),
            repeated: 0,
            replaying: None,
        }
    }

    /// A verifier of what `sink` (`stream`, `syslog`) received: records
    /// the maid could not deliver to it are missing, and the `gap` record
    /// it wrote names them.
    pub fn for_sink(key: Option<VerifyingKey>, sink: &str) -> Self {
        Verifier {
            sink: Some(sink.into()),
            ..Self::new(key)
        }
    }

    /// Every record must name `minion`: the chain is its alone.
    pub fn owned_by(self, minion: impl Into<String>) -> Self {
        Verifier {
            owner: Some(minion.into()),
            ..self
        }
    }

    /// After the last line: a hole no `gap` record explained is a break
    /// (the first, since it came before any other break found).
    pub fn finish(&mut self) {
        if self.first_break.is_none()
            && let Some((_, at)) = &self.replaying
        {
            self.first_break = Some(Break {
                what: "a record repeated without the records after it: inserted or replayed".into(),
                ..at.clone()
            });
        }
        if let Some((a, b, at)) = self.holes.first() {
            self.first_break = Some(Break {
                what: format!(
                    "records seq {a} to {b} are missing before this one, and no gap \
                     record says the sink never got them: removed"
                ),
                ..at.clone()
            });
        }
    }

    /// Check the next line (`line` of `source`); after the first break
    /// nothing more is checked.
    pub fn push(&mut self, source: &str, line_no: usize, line: &[u8]) {
        if self.first_break.is_some() {
            return;
        }
        if let Err(what) = self.check(source, line_no, line) {
            self.first_break = Some(Break {
                source: source.into(),
                line: line_no,
                what,
            });
            return;
        }
        self.last_at = Some((source.into(), line_no));
    }

    /// Record `v` (seq `seq`) names the chain's maid, where it has one.
    fn owned(&self, v: &Value, seq: u64) -> Result<(), String> {
        let Some(owner) = &self.owner else {
            return Ok(());
        };
        if names_nobody(v) {
            return Err(format!(
                "record seq {seq} names no maid, and every record a maid writes names it: \
                 inserted or altered"
            ));
        }
        if let Some(other) = names_other(v, owner) {
            return Err(format!(
                "record seq {seq} names maid {other:?}, in a chain of {owner:?}'s: \
                 written in another maid's name (whoever may append to {owner}'s \
                 records can link a record to them)"
            ));
        }
        Ok(())
    }

    fn check(&mut self, source: &str, line_no: usize, line: &[u8]) -> Result<(), String> {
        let v: Value = serde_json::from_slice(line)
            .map_err(|_| "not a record (the line is not JSON): inserted or altered".to_string())?;
        let seq = v
            .get("seq")
            .and_then(Value::as_u64)
            .ok_or("a record without `seq`: inserted, or written before the chain began")?;
        let prev = v
            .get("prev")
            .and_then(Value::as_str)
            .ok_or("a record without `prev`: inserted or altered")?;
        // A sink may get records again when a delivery failed halfway
        // and was retried: the same bytes at the seqs already read, in
        // order, up to the last one read.
        if let (Some(_), Some(head)) = (&self.sink, &self.head)
            && seq <= head.seq
            && self.replaying.as_ref().is_none_or(|(next, _)| *next == seq)
        {
            let sha = line_sha256(line);
            if self.recent.iter().any(|(s, h)| *s == seq && *h == sha) {
                self.repeated += 1;
                let at = Break {
                    source: source.into(),
                    line: line_no,
                    what: String::new(),
                };
                let began = self.replaying.take().map_or(at, |(_, b)| b);
                if seq < head.seq {
                    self.replaying = Some((seq + 1, began));
                }
                return Ok(());
            }
        }
        if self.replaying.take().is_some() {
            return Err(format!(
                "record seq {seq} cuts short a run of repeated records: inserted, moved or replayed"
            ));
        }
        match &self.head {
            // The first record read: the chain is taken up where it is
            // (an earlier file may not be at hand).
            None => {}
            Some(head) if seq == head.seq + 1 && prev == head.sha256 => {}
            Some(head) if seq == head.seq + 1 => {
                let at = self
                    .last_at
                    .as_ref()
                    .map(|(s, l)| format!(" ({s} line {l})"))
                    .unwrap_or_default();
                return Err(format!(
                    "record seq {} before it{at} was altered: this record (seq {seq}) \
                     names another SHA-256 for it",
                    head.seq
                ));
            }
            Some(head) if seq > head.seq + 1 => {
                let what = format!(
                    "records seq {} to {} are missing before this one (seq {seq}): removed",
                    head.seq + 1,
                    seq - 1
                );
                if self.sink.is_none() {
                    return Err(what);
                }
                // Perhaps never delivered: a `gap` record may say so.
                self.holes.push((
                    head.seq + 1,
                    seq - 1,
                    Break {
                        source: source.into(),
                        line: line_no,
                        what,
                    },
                ));
            }
            Some(head) => {
                return Err(format!(
                    "record seq {seq} where seq {} was due: inserted, moved or replayed",
                    head.seq + 1
                ));
            }
        }
        self.owned(&v, seq)?;
        match v.get("decision").and_then(Value::as_str) {
            Some("checkpoint") => self.checkpoint(&v, seq, prev)?,
            Some("gap") => self.gap(&v),
            _ => {}
        }
        self.head = Some(Head::after(seq, line));
        if self.sink.is_some() {
            if self.recent.len() == RECENT {
                self.recent.pop_front();
            }
            self.recent
                .push_back((seq, self.head.as_ref().expect("set").sha256.clone()));
        }
        self.records += 1;
        Ok(())
    }

    fn checkpoint(&mut self, v: &Value, seq: u64, prev: &str) -> Result<(), String> {
        self.checkpoints += 1;
        let Some(key) = &self.key else {
            return Ok(());
        };
        let minion = v.get("minion").and_then(Value::as_str).unwrap_or_default();
        let sig = v
            .pointer("/checkpoint/sig")
            .and_then(Value::as_str)
            .and_then(|s| crate::trust::decode_signature(s).ok())
            .ok_or(format!("checkpoint seq {seq} carries no signature"))?;
        key.verify(&signed_bytes(minion, seq, prev), &sig)
            .map_err(|_| {
                format!(
                    "checkpoint seq {seq} does not verify with {minion}'s key: \
                     the chain before it was rewritten, or another key signed it"
                )
            })?;
        self.vouched_through = Some(seq);
        Ok(())
    }

    /// A `gap` record of this verifier's sink explains the holes within
    /// its range.
    fn gap(&mut self, v: &Value) {
        let Some(sink) = &self.sink else {
            return;
        };
        let g = |k: &str| v.pointer(&format!("/gap/{k}"));
        if g("sink").and_then(Value::as_str) != Some(sink) {
            return;
        }
        let (Some(from), Some(to)) = (
            g("from_seq").and_then(Value::as_u64),
            g("to_seq").and_then(Value::as_u64),
        ) else {
            return;
        };
        self.gaps.push((from, to));
        let mut left = Vec::new();
        for (a, b, at) in std::mem::take(&mut self.holes) {
            if to < a || b < from {
                left.push((a, b, at));
                continue;
            }
            self.explained += 1;
            if a < from {
                left.push((a, from - 1, at.clone()));
            }
            if to < b {
                left.push((to + 1, b, at));
            }
        }
        self.holes = left;
    }

    /// The last record read.
    pub fn head(&self) -> Option<&Head> {
        self.head.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A chain of `n` records, a checkpoint every `every`, as lines.
    fn chain(key: &SigningKey, n: u64, every: u64) -> Vec<Vec<u8>> {
        let mut head = Head::genesis();
        let mut out = Vec::new();
        for seq in 1..=n {
            let mut rec = json!({"minion": "m1", "seq": seq, "prev": head.sha256,
                                 "decision": "ran", "jid": format!("j{seq}")});
            if seq % every == 0 {
                rec["decision"] = json!("checkpoint");
                rec["checkpoint"] =
                    serde_json::to_value(checkpoint(key, "m1", seq, &head.sha256)).unwrap();
            }
            let line = serde_json::to_vec(&rec).unwrap();
            head = Head::after(seq, &line);
            out.push(line);
        }
        out
    }

    fn verify(lines: &[Vec<u8>], key: &SigningKey) -> Verifier {
        let mut v = Verifier::new(Some(key.verifying_key()));
        for (i, l) in lines.iter().enumerate() {
            v.push("f", i + 1, l);
        }
        v
    }

    #[test]
    fn an_intact_chain_verifies_and_every_edit_is_located() {
        let key = SigningKey::from_bytes(&[3; 32]);
        let lines = chain(&key, 10, 4);
        let v = verify(&lines, &key);
        assert_eq!(
            (v.first_break.clone(), v.records, v.checkpoints),
            (None, 10, 2)
        );
        assert_eq!(v.vouched_through, Some(8));

        // Altered: record 5's job id changed; found at record 6.
        let mut altered = lines.clone();
        altered[4] = String::from_utf8(altered[4].clone())
            .unwrap()
            .replace("\"j5\"", "\"jX\"")
            .into_bytes();
        let b = verify(&altered, &key).first_break.unwrap();
        assert_eq!(b.line, 6);
        assert!(
            b.what
                .contains("record seq 5 before it (f line 5) was altered"),
            "{b}"
        );

        // Removed: record 5 gone.
        let mut removed = lines.clone();
        removed.remove(4);
        let b = verify(&removed, &key).first_break.unwrap();
        assert!(b.what.contains("seq 5 to 5 are missing"), "{b}");

        // Inserted: a copy of record 3 after record 5.
        let mut inserted = lines.clone();
        inserted.insert(5, lines[2].clone());
        let b = verify(&inserted, &key).first_break.unwrap();
        assert_eq!(b.line, 6);
        assert!(b.what.contains("inserted, moved or replayed"), "{b}");

        // Reordered: records 5 and 6 swapped.
        let mut swapped = lines.clone();
        swapped.swap(4, 5);
        let b = verify(&swapped, &key).first_break.unwrap();
        assert_eq!(b.line, 5);

        // Rewritten from record 5 on by someone without the key: the chain
        // links, but the checkpoint at 8 does not verify.
        let other = SigningKey::from_bytes(&[4; 32]);
        let mut forged: Vec<Vec<u8>> = lines[..4].to_vec();
        let mut head = Head::after(4, &lines[3]);
        for seq in 5..=8u64 {
            let mut rec = json!({"minion": "m1", "seq": seq, "prev": head.sha256,
                                 "decision": "ran", "jid": "forged"});
            if seq == 8 {
                rec["decision"] = json!("checkpoint");
                rec["checkpoint"] =
                    serde_json::to_value(checkpoint(&other, "m1", seq, &head.sha256)).unwrap();
            }
            let line = serde_json::to_vec(&rec).unwrap();
            head = Head::after(seq, &line);
            forged.push(line);
        }
        let b = verify(&forged, &key).first_break.unwrap();
        assert_eq!(b.line, 8);
        assert!(b.what.contains("does not verify"), "{b}");

        // Not JSON.
        let mut junk = lines.clone();
        junk[2] = b"{oops".to_vec();
        assert_eq!(verify(&junk, &key).first_break.unwrap().line, 3);
    }

    #[test]
    fn a_record_in_another_maids_name_breaks_the_chain_where_it_stands() {
        let key = SigningKey::from_bytes(&[6; 32]);
        let mut lines = chain(&key, 6, 4);
        assert_eq!(
            owner_of(lines.iter().map(Vec::as_slice)).as_deref(),
            Some("m1")
        );
        // Linked, signed by nobody, in db-1's name.
        let head = Head::of_line(lines.last().unwrap()).unwrap();
        let forged = json!({"minion": "db-1", "seq": head.seq + 1, "prev": head.sha256,
                            "decision": "ran"});
        lines.push(serde_json::to_vec(&forged).unwrap());
        let mut v = Verifier::new(Some(key.verifying_key())).owned_by("m1");
        for (i, l) in lines.iter().enumerate() {
            v.push("s", i + 1, l);
        }
        let b = v.first_break.unwrap();
        assert_eq!(b.line, 7);
        assert!(b.what.contains("names maid \"db-1\""), "{b}");
        // Without an owner the chain alone is checked: it links.
        assert!(verify(&lines, &key).first_break.is_none());
        // A record of an older maid's that named nobody is no one else's,
        // and was written so; any other record names its maid.
        let unnamed = json!({"minion": "", "decision": "suppressed"});
        assert_eq!(names_other(&unnamed, "m1"), None);
        assert!(!names_nobody(&unnamed));
        assert!(names_nobody(&json!({"decision": "ran"})));
        assert!(names_nobody(&json!({"minion": "", "decision": "ran"})));
        assert!(!names_nobody(&json!({"minion": "m1", "decision": "ran"})));
    }

    #[test]
    fn control_characters_are_shown_escaped() {
        assert_eq!(escape_controls("web-1 ran"), "web-1 ran");
        assert_eq!(
            escape_controls("a\u{1b}]0;x\u{7}\u{1b}[2K\u{9b}1m\u{7f}\n\t\u{202e}z"),
            "a\\u{1b}]0;x\\u{7}\\u{1b}[2K\\u{9b}1m\\u{7f}\\n\\t\\u{202e}z"
        );
        let b = Break {
            source: "f\u{1b}".into(),
            line: 1,
            what: "names maid \"\u{7}\"".into(),
        };
        assert!(!b.to_string().chars().any(steers), "{b}");
        let v = json!({"fun": "x\u{1b}]0;t\u{7}\u{9b}2K\u{7f}\u{202e}"});
        let text = escape_json_controls(&serde_json::to_string(&v).unwrap()).into_owned();
        assert!(!text.chars().any(steers), "{text}");
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), v);
    }

    fn lines_with_repeat(lines: &[Vec<u8>]) -> Vec<Vec<u8>> {
        let mut out = lines.to_vec();
        out.insert(3, lines[2].clone());
        out
    }

    #[test]
    fn a_sink_may_lack_records_its_gap_records_name_and_no_others() {
        let key = SigningKey::from_bytes(&[5; 32]);
        // Records 1..=12; record 10 says the stream lost 4 to 6.
        let mut head = Head::genesis();
        let mut lines = Vec::new();
        for seq in 1..=12u64 {
            let mut rec =
                json!({"minion": "m1", "seq": seq, "prev": head.sha256, "decision": "ran"});
            if seq == 10 {
                rec["decision"] = json!("gap");
                rec["gap"] = json!({"sink": "stream", "from_seq": 4, "to_seq": 6});
            }
            let line = serde_json::to_vec(&rec).unwrap();
            head = Head::after(seq, &line);
            lines.push(line);
        }
        let run = |lines: &[Vec<u8>], sink: Option<&str>| {
            let mut v = match sink {
                Some(s) => Verifier::for_sink(Some(key.verifying_key()), s),
                None => Verifier::new(Some(key.verifying_key())),
            };
            for (i, l) in lines.iter().enumerate() {
                v.push("s", i + 1, l);
            }
            v.finish();
            v
        };
        let mut delivered = lines.clone();
        delivered.drain(3..6);
        let v = run(&delivered, Some("stream"));
        assert_eq!((v.first_break.clone(), v.explained), (None, 1));
        // The file is held to every record; another sink's gap is no excuse.
        assert!(run(&delivered, None).first_break.is_some());
        assert!(run(&delivered, Some("syslog")).first_break.is_some());
        // Delivered twice after a failed delivery: a repeat, not a break;
        // but the file is held to every record once.
        let mut twice = delivered.clone();
        twice.insert(5, delivered[3].clone());
        twice.insert(6, delivered[4].clone());
        let v = run(&twice, Some("stream"));
        assert_eq!((v.first_break.clone(), v.repeated), (None, 2));
        // An old record copied in is no retry: its run never reaches the
        // last record read.
        let mut copied = delivered.clone();
        copied.insert(5, delivered[0].clone());
        assert!(run(&copied, Some("stream")).first_break.is_some());
        let mut at_end = delivered.clone();
        at_end.push(delivered[0].clone());
        assert!(run(&at_end, Some("stream")).first_break.is_some());
        assert!(run(&lines_with_repeat(&lines), None).first_break.is_some());
        // A record removed beyond the gap's range is found.
        let mut more = delivered.clone();
        more.remove(3);
        let b = run(&more, Some("stream")).first_break.unwrap();
        assert!(b.what.contains("seq 7 to 7 are missing"), "{b}");
    }
}
