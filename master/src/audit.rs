//! The fleet's audit trail as the master reads it: each maid appends its
//! chained records to its own Redis stream (`maid:audit:<id>`), and
//! [`read`] gathers them across the fleet for a [`Query`] — by time,
//! maid, user, function, decision, job and capability — for `maid audit`
//! and the API's `GET /audit`. [`follow`] reads what arrives after.
//!
//! A stream is its maid's: `--minion` picks streams, and a record in a
//! stream that names another maid is shown marked (`_minion`), never as
//! the other maid's. A record that does not chain to the one before it
//! is marked `_chain`. [`removal`] tells what Redis says of entries gone
//! from a stream, for `maid audit verify --stream`.

pub mod removal;

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDateTime, Utc};
use redis::AsyncCommands;
use serde::Deserialize;
use serde_json::Value;

use maid_bus::Conn;
use maid_protocol::auditchain::{Head, names_other, owner_of, stream_key};
use maid_protocol::protocol::REGISTRY_KEY;
use maid_salt::target::fnmatch;

/// What to look for; every field given must match. Globs are Salt's
/// (`fnmatch`).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Query {
    /// From when: RFC 3339 (`2026-11-28T22:00:00Z`) or how long ago
    /// (`30m`, `12h`, `7d`).
    pub since: Option<String>,
    /// Until when, as `since`.
    pub until: Option<String>,
    /// Maid ids (glob).
    pub minion: Option<String>,
    /// The API or CLI user who asked (glob).
    pub user: Option<String>,
    /// The function (glob): `cmd.*`.
    pub fun: Option<String>,
    /// `ran`, `denied`, `rejected`, ...
    pub decision: Option<String>,
    /// A job id.
    pub jid: Option<String>,
    /// A capability used (or refused) by the call or a nested one:
    /// `exec`, `fetch`, `read_file`, `call`, ...
    pub capability: Option<String>,
    /// A program started (glob on its real path or its argv[0]); implies
    /// `capability = exec`.
    pub program: Option<String>,
    /// A host path the call read, wrote or changed (glob): a file opened
    /// through WASI, a granted file read, a mode set, a link made.
    pub path: Option<String>,
    /// The most recent this many (0: all); 1000 when not given.
    pub limit: Option<usize>,
}

/// What went wrong reading the trail.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("{0}")]
    Query(String),
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
}

/// A [`Query`] with its times resolved.
#[derive(Debug, Clone)]
pub struct Filter {
    query: Query,
    since_ms: Option<i64>,
    until_ms: Option<i64>,
}

/// Records returned when no limit is asked.
pub const DEFAULT_LIMIT: usize = 1_000;

impl Query {
    /// The filter of this query, times taken relative to the present.
    pub fn resolve_now(self) -> Result<Filter, AuditError> {
        self.resolve(Utc::now())
    }

    /// The filter of this query, times taken relative to `now`.
    pub fn resolve(self, now: DateTime<Utc>) -> Result<Filter, AuditError> {
        let since_ms = self.since.as_deref().map(|t| instant(t, now)).transpose()?;
        let until_ms = self.until.as_deref().map(|t| instant(t, now)).transpose()?;
        if let Some(d) = &self.decision
            && !DECISIONS.contains(&d.as_str())
        {
            return Err(AuditError::Query(format!(
                "decision {d:?}: one of {}",
                DECISIONS.join(", ")
            )));
        }
        Ok(Filter {
            query: self,
            since_ms,
            until_ms,
        })
    }
}

/// The decisions a record can carry.
pub const DECISIONS: &[&str] = &[
    "ran",
    "denied",
    "rejected",
    "not_targeted",
    "relayed",
    "duplicate",
    "plugin_loaded",
    "plugin_removed",
    "plugin_refused",
    "suppressed",
    "checkpoint",
    "gap",
];

/// `text` as milliseconds since the epoch: RFC 3339, or a duration ago.
fn instant(text: &str, now: DateTime<Utc>) -> Result<i64, AuditError> {
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Ok(t.timestamp_millis());
    }
    let bad = || {
        AuditError::Query(format!(
            "{text:?}: a time is RFC 3339 (2026-11-28T22:00:00Z) or how long ago (30s, 15m, 12h, 7d)"
        ))
    };
    let split = text.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (n, unit) = text.split_at(split);
    let n: i64 = n.parse().map_err(|_| bad())?;
    let secs = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        "w" => 604_800,
        _ => return Err(bad()),
    };
    Ok(now.timestamp_millis() - n.saturating_mul(secs).saturating_mul(1_000))
}

/// A record's `time` (UTC, as maids write it) in milliseconds.
fn record_ms(rec: &Value) -> Option<i64> {
    let t = rec.get("time")?.as_str()?;
    NaiveDateTime::parse_from_str(t, "%Y-%m-%dT%H:%M:%S%.f")
        .ok()
        .map(|t| t.and_utc().timestamp_millis())
}

fn glob(pattern: &Option<String>, value: Option<&str>) -> bool {
    match pattern {
        None => true,
        Some(p) => value.is_some_and(|v| fnmatch(p, v)),
    }
}

impl Filter {
    /// The query asked for.
    pub fn query(&self) -> &Query {
        &self.query
    }

    /// How many records to return at most (`None`: all).
    pub fn limit(&self) -> Option<usize> {
        match self.query.limit {
            Some(0) => None,
            Some(n) => Some(n),
            None => Some(DEFAULT_LIMIT),
        }
    }

    /// Keep the most recent of `found` (oldest first), as many as the
    /// limit allows.
    pub fn keep_last<T>(&self, found: &mut Vec<T>) {
        if let Some(limit) = self.limit() {
            found.drain(..found.len().saturating_sub(limit));
        }
    }

    /// Whether maid `id`'s stream may hold matching records.
    pub fn wants_minion(&self, id: &str) -> bool {
        glob(&self.query.minion, Some(id))
    }

    /// Whether `rec` is one asked for.
    pub fn matches(&self, rec: &Value) -> bool {
        self.matches_of(rec, None)
    }

    /// Whether `rec`, a record of maid `owner`'s stream or file, is one
    /// asked for: `minion` is matched against whose records they are, not
    /// what a record says (which anyone appending to them chooses).
    pub fn matches_of(&self, rec: &Value, owner: Option<&str>) -> bool {
        let s = |k: &str| rec.get(k).and_then(Value::as_str);
        let q = &self.query;
        if self.since_ms.is_some() || self.until_ms.is_some() {
            let Some(t) = record_ms(rec) else {
                return false;
            };
            if self.since_ms.is_some_and(|since| t < since)
                || self.until_ms.is_some_and(|until| t > until)
            {
                return false;
            }
        }
        glob(&q.minion, owner.or(s("minion")))
            && glob(&q.user, s("user"))
            && glob(&q.fun, s("fun"))
            && q.decision
                .as_deref()
                .is_none_or(|d| s("decision") == Some(d))
            && q.jid.as_deref().is_none_or(|j| s("jid") == Some(j))
            && self.uses_capability(rec)
    }

    fn uses_capability(&self, rec: &Value) -> bool {
        let q = &self.query;
        if q.capability.is_none() && q.program.is_none() && q.path.is_none() {
            return true;
        }
        let kind = match (&q.capability, &q.program) {
            (Some(k), _) => Some(k.as_str()),
            (None, Some(_)) => Some("exec"),
            (None, None) => None,
        };
        let used = rec
            .get("capabilities")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        any_use(used, &mut |u| {
            kind.is_none_or(|k| u.get("kind").and_then(Value::as_str) == Some(k))
                && q.path.as_ref().is_none_or(|p| {
                    ["path", "link"]
                        .iter()
                        .filter_map(|k| u.get(*k).and_then(Value::as_str))
                        .any(|v| fnmatch(p, v))
                })
                && q.program.as_ref().is_none_or(|p| {
                    let program = u.get("program").and_then(Value::as_str);
                    let argv0 = u.pointer("/argv/0").and_then(Value::as_str);
                    [program, argv0]
                        .into_iter()
                        .flatten()
                        .any(|v| fnmatch(p, v))
                })
        })
    }
}

/// Whether any use, or one nested in a `call`, satisfies `f`.
fn any_use(used: &[Value], f: &mut impl FnMut(&Value) -> bool) -> bool {
    used.iter().any(|u| {
        f(u) || u
            .get("used")
            .and_then(Value::as_array)
            .is_some_and(|inner| any_use(inner, f))
    })
}

/// The maids whose streams are read: every registered maid, and every
/// stream a scan finds (a maid gone from the registry keeps its records).
pub async fn maids(conn: &mut Conn) -> Result<Vec<String>, AuditError> {
    let mut ids: Vec<String> = conn.hkeys(REGISTRY_KEY).await?;
    let prefix = stream_key("");
    // A cluster answers SCAN for one node only: the registry covers the
    // rest.
    if let Ok(mut keys) = conn.scan_match::<_, String>(format!("{prefix}*")).await {
        use futures_util::StreamExt;
        while let Some(Ok(k)) = keys.next().await {
            if let Some(id) = k.strip_prefix(&prefix) {
                ids.push(id.to_string());
            }
        }
    }
    ids.sort();
    ids.dedup();
    Ok(ids)
}

/// Entries read per round trip.
const PAGE: usize = 1_000;

/// One stream entry: its id and the record (the line as chained).
pub struct Entry {
    pub id: String,
    pub line: Vec<u8>,
}

/// Entries of maid `id`'s stream after `after` (exclusive; `None`: from
/// the start) up to `end_ms`, oldest first.
pub async fn entries(
    conn: &mut Conn,
    id: &str,
    after: Option<&str>,
    since_ms: Option<i64>,
    end_ms: Option<i64>,
) -> Result<Vec<Entry>, AuditError> {
    let start = match (after, since_ms) {
        (Some(a), _) => format!("({a}"),
        (None, Some(ms)) => format!("{}-0", ms.max(0)),
        (None, None) => "-".into(),
    };
    // An id of milliseconds alone ends at that millisecond's last entry.
    let end = end_ms.map_or("+".to_string(), |ms| ms.max(0).to_string());
    range(conn, id, start, &end).await
}

/// Every entry of maid `id`'s stream up to entry `last` (inclusive), as
/// `XINFO STREAM` named it: what was there when Redis counted.
pub async fn entries_through(
    conn: &mut Conn,
    id: &str,
    last: &str,
) -> Result<Vec<Entry>, AuditError> {
    range(conn, id, "-".into(), last).await
}

/// `XRANGE` of maid `id`'s stream from `start` to `end`, by pages.
async fn range(
    conn: &mut Conn,
    id: &str,
    mut start: String,
    end: &str,
) -> Result<Vec<Entry>, AuditError> {
    let key = stream_key(id);
    let mut out = Vec::new();
    loop {
        // Each entry: its id and its fields and values, flat.
        let page: Vec<(String, Vec<Vec<u8>>)> = redis::cmd("XRANGE")
            .arg(&key)
            .arg(&start)
            .arg(end)
            .arg("COUNT")
            .arg(PAGE)
            .query_async(conn)
            .await?;
        let n = page.len();
        for (id, fields) in page {
            start = format!("({id}");
            let line = fields
                .chunks_exact(2)
                .find(|kv| kv[0] == b"line")
                .map(|kv| kv[1].clone());
            if let Some(line) = line {
                out.push(Entry { id, line });
            }
        }
        if n < PAGE {
            return Ok(out);
        }
    }
}

/// Where records were read: maid `id`'s stream, or a file.
#[derive(Debug, Clone, Copy)]
pub enum Source<'a> {
    Stream(&'a str),
    File(&'a str),
}

impl Source<'_> {
    /// How `maid audit verify` checks this source.
    fn verify(&self) -> String {
        match self {
            Source::Stream(id) => format!("maid audit verify --stream {id}"),
            Source::File(f) => format!("maid audit verify {f}"),
        }
    }

    fn name(&self) -> String {
        match self {
            Source::Stream(id) => stream_key(id),
            Source::File(f) => f.to_string(),
        }
    }
}

/// A record that does not follow the entry before it in its stream: an
/// entry was added, removed or altered there (or the maid recorded a
/// gap). The reader is told, not spared: `_chain` says so.
fn mark_unlinked(rec: &mut Value, from: Source) {
    if let Value::Object(map) = rec {
        map.insert(
            "_chain".into(),
            Value::String(format!(
                "does not follow the entry before it: check with `{}`",
                from.verify()
            )),
        );
    }
}

/// A record that names a maid other than the one whose records hold it:
/// whoever may append to them wrote it (the chain is not keyed), so it is
/// not the other maid's, whatever it says. `_minion` says so.
fn mark_foreign(rec: &mut Value, from: Source, owner: &str, named: &str) {
    if let Value::Object(map) = rec {
        map.insert(
            "_minion".into(),
            Value::String(format!(
                "names maid {named:?} but stands in {}, {owner}'s records: written in \
                 another maid's name; check with `{}`",
                from.name(),
                from.verify()
            )),
        );
    }
}

/// The records of one maid's audit file (or syslog capture: `lines` are
/// the records in it) that `filter` matches, oldest first, marked as
/// [`read`] marks a stream's: the file's maid is the one its checkpoints
/// name ([`owner_of`]).
pub fn read_lines(lines: &[&[u8]], file: &str, filter: &Filter) -> Vec<Value> {
    let owner = owner_of(lines.iter().copied());
    let entries = lines
        .iter()
        .map(|l| Entry {
            id: String::new(),
            line: l.to_vec(),
        })
        .collect();
    let from = Source::File(file);
    matching(entries, &mut None, owner.as_deref(), from, filter)
        .into_iter()
        .map(|(_, r)| r)
        .collect()
}

/// Every record of the fleet's streams that `filter` matches, oldest
/// first, at most its limit (the most recent). A record that does not
/// chain to the entry before it carries `_chain` saying so.
pub async fn read(conn: &mut Conn, filter: &Filter) -> Result<Vec<Value>, AuditError> {
    let mut found: Vec<(i64, String, Value)> = Vec::new();
    for id in maids(conn).await? {
        if !filter.wants_minion(&id) {
            continue;
        }
        let got = entries(conn, &id, None, filter.since_ms, filter.until_ms).await?;
        let from = Source::Stream(&id);
        for (entry, rec) in matching(got, &mut None, Some(&id), from, filter) {
            found.push((record_ms(&rec).unwrap_or_default(), entry, rec));
        }
    }
    found.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    filter.keep_last(&mut found);
    Ok(found.into_iter().map(|(_, _, r)| r).collect())
}

/// The records of `owner`'s `entries` (read `from` a stream or file)
/// that `filter` matches, with their entry ids, each marked `_chain`
/// when it does not follow the entry before it (`head`: the last one
/// read before these, kept for the next call) and `_minion` when it
/// names a maid other than `owner`.
fn matching(
    entries: Vec<Entry>,
    head: &mut Option<Head>,
    owner: Option<&str>,
    from: Source,
    filter: &Filter,
) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for e in entries {
        let Ok(mut rec) = serde_json::from_slice::<Value>(&e.line) else {
            continue;
        };
        let linked = head.as_ref().is_none_or(|h| h.links(&rec));
        *head = Head::of_line(&e.line);
        if filter.matches_of(&rec, owner) {
            if !linked {
                mark_unlinked(&mut rec, from);
            }
            if let Some(owner) = owner
                && let Some(named) = names_other(&rec, owner)
            {
                mark_foreign(&mut rec, from, owner, &named);
            }
            out.push((e.id, rec));
        }
    }
    out
}

/// How often [`follow`] looks for new records.
pub const FOLLOW_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Where [`follow`] stands in each stream: the last entry read and the
/// chain's head there.
#[derive(Debug, Default)]
pub struct Cursor {
    after: BTreeMap<String, (String, Option<Head>)>,
    start_ms: i64,
}

impl Cursor {
    /// Records from now on.
    pub fn now() -> Self {
        Cursor {
            after: BTreeMap::new(),
            start_ms: Utc::now().timestamp_millis(),
        }
    }
}

/// The records that arrived since the last call for `cursor`, matching
/// `filter`, in the order each maid wrote them.
pub async fn follow(
    conn: &mut Conn,
    filter: &Filter,
    cursor: &mut Cursor,
) -> Result<Vec<Value>, AuditError> {
    let mut out = Vec::new();
    for id in maids(conn).await? {
        if !filter.wants_minion(&id) {
            continue;
        }
        let (after, head) = cursor.after.get(&id).cloned().unzip();
        let mut head = head.flatten();
        let since = after.is_none().then_some(cursor.start_ms);
        let got = entries(conn, &id, after.as_deref(), since, None).await?;
        let last = got.last().map(|e| e.id.clone());
        out.extend(
            matching(got, &mut head, Some(&id), Source::Stream(&id), filter)
                .into_iter()
                .map(|(_, r)| r),
        );
        if let Some(last) = last {
            cursor.after.insert(id, (last, head));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn filter(q: Value) -> Filter {
        let now = DateTime::parse_from_rfc3339("2026-11-29T08:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        serde_json::from_value::<Query>(q)
            .unwrap()
            .resolve(now)
            .unwrap()
    }

    #[test]
    fn a_query_matches_by_time_maid_user_function_and_program() {
        let rec = json!({
            "time": "2026-11-29T02:00:00.000000", "minion": "web-1", "user": "alice",
            "fun": "cmd.run", "decision": "ran", "jid": "j1",
            "capabilities": [{"kind": "call", "fun": "cmd.run_all", "allowed": true, "used": [
                {"kind": "exec", "program": "/usr/bin/systemctl", "argv_sha256": "x", "allowed": true}
            ]}]
        });
        let night = json!({"since": "2026-11-28T22:00:00Z", "until": "2026-11-29T06:00:00Z",
                           "minion": "web-*", "user": "alice", "fun": "cmd.*", "capability": "exec"});
        assert!(filter(night.clone()).matches(&rec));
        assert!(filter(json!({"program": "*/systemctl"})).matches(&rec));
        let wrote = json!({"capabilities": [
            {"kind": "file", "path": "/etc/app/app.conf", "access": "write", "allowed": true}
        ]});
        assert!(filter(json!({"path": "/etc/app/*"})).matches(&wrote));
        assert!(filter(json!({"path": "/etc/*", "capability": "file"})).matches(&wrote));
        assert!(!filter(json!({"path": "/var/*"})).matches(&wrote));
        assert!(!filter(json!({"path": "/etc/*", "capability": "exec"})).matches(&wrote));
        assert!(filter(json!({"since": "12h"})).matches(&rec));
        for miss in [
            json!({"since": "1h"}),
            json!({"minion": "db-*"}),
            json!({"user": "bob"}),
            json!({"fun": "state.*"}),
            json!({"decision": "denied"}),
            json!({"capability": "fetch"}),
            json!({"program": "*/rm"}),
            json!({"jid": "j2"}),
        ] {
            assert!(!filter(miss.clone()).matches(&rec), "{miss}");
        }
        // A record without a user is no user's.
        assert!(!filter(json!({"user": "*"})).matches(&json!({"minion": "m"})));
        let now = Utc::now();
        assert!(
            serde_json::from_value::<Query>(json!({"since": "yesterday"}))
                .unwrap()
                .resolve(now)
                .is_err()
        );
        assert!(
            serde_json::from_value::<Query>(json!({"decision": "maybe"}))
                .unwrap()
                .resolve(now)
                .is_err()
        );
        assert!(serde_json::from_value::<Query>(json!({"sql": "1"})).is_err());
    }

    #[test]
    fn a_record_is_its_files_maids_and_one_in_another_name_is_marked() {
        let line = |v: Value| serde_json::to_vec(&v).unwrap();
        let lines = [
            line(
                json!({"minion": "web-1", "seq": 1, "prev": "x", "decision": "ran", "user": "alice"}),
            ),
            line(json!({"minion": "web-1", "seq": 2, "prev": "y", "decision": "checkpoint"})),
            line(
                json!({"minion": "db-1", "seq": 3, "prev": "z", "decision": "ran", "user": "mallory"}),
            ),
        ];
        let lines: Vec<&[u8]> = lines.iter().map(Vec::as_slice).collect();
        let found = read_lines(&lines, "a.log", &filter(json!({"user": "mallory"})));
        assert_eq!(found.len(), 1);
        let mark = found[0]["_minion"].as_str().unwrap();
        assert!(
            mark.contains("\"db-1\"") && mark.contains("web-1's"),
            "{mark}"
        );
        // Asked for db-1's records, the file (web-1's) has none; asked
        // for web-1's, the forged one is among them, marked.
        assert!(read_lines(&lines, "a.log", &filter(json!({"minion": "db-1"}))).is_empty());
        let web = read_lines(&lines, "a.log", &filter(json!({"minion": "web-1"})));
        assert_eq!(web.len(), 3);
        assert!(web[2]["_minion"].is_string() && web[2]["_chain"].is_string());
        assert!(web[0].get("_minion").is_none());
    }
}
