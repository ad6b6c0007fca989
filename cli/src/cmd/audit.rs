//! `maid audit`: the fleet's audit trail. `query` reads the records the
//! maids append to their Redis streams (or audit files) — by time, maid,
//! user, function, decision, job and capability — as a table, JSON or an
//! outputter, and `--follow` tails them; `verify` checks one maid's
//! records (files, a syslog capture or its stream): its hash chain, the
//! checkpoints its key signed, and that every record names that maid,
//! naming the first record that was altered, removed, inserted, moved or
//! written in another maid's name; for a stream, also what Redis's counts
//! and the last checkpoint verified there (`--state-dir`) say of entries
//! gone from its head, or of the stream itself.
//!
//! Records hold words their senders chose (a job's `fun`): everything
//! printed here shows control characters escaped, never raw.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use maid_master::audit::removal::{self, Read, Seen};
use maid_master::audit::{self as trail, Query};
use maid_protocol::auditchain::{Head, Verifier, escape_controls, escape_json_controls, owner_of};
use serde_json::Value;

use crate::master::MasterOpts;
use crate::output::OutputOpts;
use crate::rt::block_on;

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Records of the fleet (every maid's `maid:audit:<id>` stream, or
    /// --file) that match, oldest first; --follow to tail.
    Query(Box<QueryArgs>),
    /// Check one maid's records (files oldest first, a syslog capture, or
    /// its stream): every record chained to the one before, every
    /// checkpoint signed by the maid's key. Exit 1 naming the first break.
    Verify(VerifyArgs),
}

/// What to look for (every option given must match; globs are Salt's).
#[derive(Debug, Clone, Args)]
pub struct QueryFilter {
    /// From when: RFC 3339, or how long ago (30m, 12h, 7d).
    #[arg(long)]
    pub since: Option<String>,
    /// Until when, as --since.
    #[arg(long)]
    pub until: Option<String>,
    /// Maid ids (glob).
    #[arg(long)]
    pub minion: Option<String>,
    /// The user who asked (glob).
    #[arg(long)]
    pub user: Option<String>,
    /// The function (glob), e.g. 'cmd.*'.
    #[arg(long)]
    pub fun: Option<String>,
    /// ran, denied, rejected, not_targeted, relayed, duplicate,
    /// plugin_loaded, plugin_removed, plugin_refused, suppressed,
    /// checkpoint or gap.
    #[arg(long)]
    pub decision: Option<String>,
    /// A job id.
    #[arg(long)]
    pub jid: Option<String>,
    /// A capability the call (or a nested one) used: exec, fetch,
    /// read_file, call, ...
    #[arg(long)]
    pub capability: Option<String>,
    /// A program started (glob on its real path or argv[0]).
    #[arg(long)]
    pub program: Option<String>,
    /// A host path read, written or changed (glob), e.g. '/etc/*'.
    #[arg(long)]
    pub path: Option<String>,
    /// The most recent N records (0: all).
    #[arg(long, default_value_t = trail::DEFAULT_LIMIT)]
    pub limit: usize,
}

impl QueryFilter {
    fn query(&self) -> Query {
        Query {
            since: self.since.clone(),
            until: self.until.clone(),
            minion: self.minion.clone(),
            user: self.user.clone(),
            fun: self.fun.clone(),
            decision: self.decision.clone(),
            jid: self.jid.clone(),
            capability: self.capability.clone(),
            program: self.program.clone(),
            path: self.path.clone(),
            limit: Some(self.limit),
        }
    }
}

#[derive(Debug, Args)]
pub struct QueryArgs {
    #[command(flatten)]
    pub filter: QueryFilter,
    /// Read these audit files (or syslog captures) instead of the streams.
    #[arg(long = "file", value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Keep printing records as they arrive (from the streams).
    #[arg(long, short = 'f', conflicts_with = "files")]
    pub follow: bool,
    #[command(flatten)]
    pub output: OutputOpts,
    #[command(flatten)]
    pub master: MasterOpts,
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The files, oldest first (audit logs, or syslog captures of them).
    #[arg(required_unless_present = "stream")]
    pub files: Vec<PathBuf>,
    /// Verify maid ID's Redis stream `maid:audit:ID` instead of files.
    #[arg(long, value_name = "ID", conflicts_with = "files")]
    pub stream: Option<String>,
    /// The files are what syslog received: records the maid could not
    /// deliver there are missing, as its gap records say.
    #[arg(long)]
    pub syslog: bool,
    /// The maid's public key (`state_dir/minion.pub`), for its checkpoints.
    #[arg(long)]
    pub key: Option<PathBuf>,
    /// The master's key store: the key it accepted for the maid the
    /// records name checks the checkpoints.
    #[arg(long, env = "MAID_PKI_DIR")]
    pub pki_dir: Option<PathBuf>,
    /// The maid whose records the files are (default: the one their first
    /// checkpoint names, else their first record). Every record must name
    /// it; a stream's maid is its ID.
    #[arg(long, value_name = "ID", conflicts_with = "stream")]
    pub minion: Option<String>,
    /// Where --stream remembers, per maid, the last checkpoint it verified
    /// (`DIR/ID.json`), so a stream deleted, or begun after that
    /// checkpoint where trimming cannot explain it, fails (default: the
    /// `audit_verified` directory in --pki-dir).
    #[arg(long, value_name = "DIR", requires = "stream")]
    pub state_dir: Option<PathBuf>,
    /// Configuration file (its [redis] table), for --stream.
    #[arg(long, short = 'c', env = "MAID_CONFIG")]
    pub config: Option<PathBuf>,
    /// Redis URL, for --stream, overriding the config.
    #[arg(long, env = "MAID_REDIS")]
    pub redis: Option<String>,
}

pub fn run(cmd: AuditCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        AuditCommand::Query(args) => query(*args),
        AuditCommand::Verify(args) => verify(args),
    }
}

fn query(args: QueryArgs) -> anyhow::Result<ExitCode> {
    args.output.prepare()?;
    let filter = args.filter.query().resolve_now()?;
    if !args.files.is_empty() {
        let mut found = Vec::new();
        for f in &args.files {
            let bytes = std::fs::read(f).with_context(|| format!("reading {}", f.display()))?;
            let records: Vec<&[u8]> = lines(&bytes).map(record_of).collect();
            found.extend(trail::read_lines(
                &records,
                &f.display().to_string(),
                &filter,
            ));
        }
        filter.keep_last(&mut found);
        print(&args.output, &found, true);
        return Ok(ExitCode::SUCCESS);
    }
    let (bus, _) = args.master.bus()?;
    block_on(async {
        let mut conn = bus.connect().await?;
        let found = trail::read(&mut conn, &filter).await?;
        print(&args.output, &found, true);
        if !args.follow {
            return anyhow::Ok(());
        }
        let mut cursor = trail::Cursor::now();
        loop {
            tokio::time::sleep(trail::FOLLOW_EVERY).await;
            let new = trail::follow(&mut conn, &filter, &mut cursor).await?;
            print(&args.output, &new, false);
        }
    })??;
    Ok(ExitCode::SUCCESS)
}

/// Records as a table (no --out), else through the outputter; control
/// characters escaped either way (JSON's own way in JSON, so it reads
/// back exactly).
fn print(output: &OutputOpts, records: &[Value], header: bool) {
    if output.out.is_some() {
        if !records.is_empty() || header {
            let records = Value::Array(records.to_vec());
            let printer = output.out();
            if output.name() == "json" {
                if let Some(w) = printer.warning() {
                    eprintln!("{w}");
                }
                let text = printer.render_ret(&records, output.out_indent, 0);
                printer.emit(&escape_json_controls(&text));
            } else {
                printer.display_value(&escaped(records), output.out_indent);
            }
        }
        return;
    }
    let mut text = String::new();
    if header {
        text.push_str("TIME                        MINION           USER       JID                   FUN                  DECISION       RC   USED\n");
    }
    for r in records {
        let s = |k: &str| escape_controls(r.get(k).and_then(Value::as_str).unwrap_or("-"));
        let rc = r
            .get("retcode")
            .and_then(Value::as_i64)
            .map_or("-".to_string(), |c| c.to_string());
        // A record in another maid's name is not that maid's: `?`.
        let mut minion = s("minion").into_owned();
        if r.get("_minion").is_some() {
            minion.push('?');
        }
        text.push_str(&format!(
            "{:<27} {:<16} {:<10} {:<21} {:<20} {:<14} {:<4} {}\n",
            s("time"),
            minion,
            s("user"),
            s("jid"),
            s("fun"),
            s("decision"),
            rc,
            escape_controls(&used(r))
        ));
    }
    if !text.is_empty() {
        // Whole lines, flushed: `--follow` is read as it prints.
        output.out().emit(&text);
        let _ = std::io::Write::flush(&mut std::io::stdout());
    }
}

/// A record's capabilities in a line: `exec /usr/bin/ls, fetch salt://x`
/// (refused ones marked `!`).
fn used(rec: &Value) -> String {
    fn walk(used: &[Value], out: &mut Vec<String>) {
        for u in used {
            let kind = match (u.get("kind").and_then(Value::as_str), u.get("access")) {
                (Some(k), Some(Value::String(a))) => format!("{k}:{a}"),
                (Some(k), _) => k.to_string(),
                (None, _) => "?".into(),
            };
            let what = ["program", "url", "path", "fun", "key"]
                .iter()
                .find_map(|k| u.get(*k).and_then(Value::as_str))
                .or_else(|| u.pointer("/argv/0").and_then(Value::as_str))
                .unwrap_or("");
            let refused = if u.get("allowed") == Some(&Value::Bool(false)) {
                "!"
            } else {
                ""
            };
            out.push(format!("{refused}{kind} {what}").trim_end().to_string());
            if let Some(inner) = u.get("used").and_then(Value::as_array) {
                walk(inner, out);
            }
        }
    }
    let mut out = Vec::new();
    if let Some(list) = rec.get("capabilities").and_then(Value::as_array) {
        walk(list, &mut out);
    }
    out.join(", ")
}

/// `v` with every string in it (keys too) shown with its control
/// characters escaped, for outputters that print strings as they are.
fn escaped(v: Value) -> Value {
    match v {
        Value::String(s) => Value::String(escape_controls(&s).into_owned()),
        Value::Array(a) => Value::Array(a.into_iter().map(escaped).collect()),
        Value::Object(m) => Value::Object(
            m.into_iter()
                .map(|(k, v)| (escape_controls(&k).into_owned(), escaped(v)))
                .collect(),
        ),
        other => other,
    }
}

/// The non-empty lines of `bytes`.
fn lines(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty())
}

/// The record in a line: the line itself, or in a syslog message the
/// part after its header (RFC 5424 puts a BOM before a UTF-8 message).
fn record_of(line: &[u8]) -> &[u8] {
    if line.first() == Some(&b'{') {
        return line;
    }
    const BOM: &[u8] = "\u{feff}".as_bytes();
    match line.windows(BOM.len()).position(|w| w == BOM) {
        Some(at) => &line[at + BOM.len()..],
        None => line,
    }
}

fn verify(args: VerifyArgs) -> anyhow::Result<ExitCode> {
    let mut texts: Vec<(String, Vec<Vec<u8>>)> = Vec::new();
    // For --stream: what Redis says of it, and its entries' ids.
    let mut stream: Option<(Option<removal::StreamInfo>, Vec<String>)> = None;
    if let Some(id) = &args.stream {
        let (key, records, info, ids) = read_stream(&args, id)?;
        texts.push((key, records));
        stream = Some((info, ids));
    }
    for f in &args.files {
        let bytes = std::fs::read(f).with_context(|| format!("reading {}", f.display()))?;
        let records = lines(&bytes).map(|l| record_of(l).to_vec()).collect();
        texts.push((f.display().to_string(), records));
    }
    // Whose records these are: every one must name this maid.
    let owner = args.stream.clone().or(args.minion.clone()).or_else(|| {
        owner_of(
            texts
                .iter()
                .flat_map(|(_, records)| records.iter().map(Vec::as_slice)),
        )
    });
    let key = chain_key(&args, owner.as_deref())?;
    let checked = key.is_some();
    let mut v = match (&args.stream, args.syslog) {
        (Some(_), _) => Verifier::for_sink(key, "stream"),
        (None, true) => Verifier::for_sink(key, "syslog"),
        (None, false) => Verifier::new(key),
    };
    if let Some(owner) = &owner {
        v = v.owned_by(owner.clone());
    }
    // A file's line numbers count its blank lines too; a stream's are
    // entry numbers.
    for (name, records) in &texts {
        for (i, line) in records.iter().enumerate() {
            v.push(name, i + 1, line);
        }
    }
    v.finish();
    if let Some(b) = &v.first_break {
        outln!("{b}");
        return Ok(ExitCode::from(1));
    }
    // What the chain cannot see: a stream's head, or the stream, gone.
    let mut notes = Vec::new();
    if let (Some(id), Some((info, ids))) = (&args.stream, &stream) {
        match judge_stream(&args, id, info.as_ref(), ids, &texts[0].1, &v)? {
            Err(why) => {
                outln!("{}", escape_controls(&why.0));
                return Ok(ExitCode::from(1));
            }
            Ok(n) => notes = n,
        }
    }
    outln!(
        "{} records, {} checkpoints: the chain is intact",
        v.records,
        v.checkpoints
    );
    for n in &notes {
        outln!("{}", escape_controls(n));
    }
    if v.repeated > 0 {
        outln!(
            "{} record(s) delivered twice (a retried delivery), read once",
            v.repeated
        );
    }
    if !v.gaps.is_empty() {
        let ranges: Vec<String> = v.gaps.iter().map(|(a, b)| format!("{a}-{b}")).collect();
        outln!(
            "never delivered here, as the maid's gap records say: seq {}",
            ranges.join(", ")
        );
    }
    if !checked {
        outln!("checkpoints not checked: no --key or --pki-dir");
    } else {
        let last = v.head().map_or(0, |h| h.seq);
        match v.vouched_through {
            Some(seq) if seq == last => outln!("signed through seq {seq}, the last"),
            Some(seq) => outln!(
                "signed through seq {seq}; seq {} to {last} wait for the next checkpoint",
                seq + 1
            ),
            None => outln!("no checkpoint yet: nothing is signed"),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The key the maid's checkpoints are checked with: `--key`, else the
/// key `--pki-dir` accepted for `owner`; none without either.
fn chain_key(
    args: &VerifyArgs,
    owner: Option<&str>,
) -> anyhow::Result<Option<ed25519_dalek::VerifyingKey>> {
    Ok(match (&args.key, &args.pki_dir) {
        (Some(path), _) => Some(maid_protocol::trust::read_verifying_key(
            path.to_str().context("the key's path is not UTF-8")?,
        )?),
        (None, Some(dir)) => {
            let minion = owner
                .map(str::to_string)
                .context("no record names its maid: give the maid's key with --key")?;
            let accepted = maid_master::pki::Pki::new(dir.clone()).accepted()?;
            Some(*accepted.get(&minion).with_context(|| {
                format!(
                    "{}: no key accepted for {}",
                    dir.display(),
                    escape_controls(&minion)
                )
            })?)
        }
        (None, None) => None,
    })
}

/// Stream `id`'s records, as `verify --stream` reads them: its key, its
/// lines, what Redis says of it and its entries' ids.
#[allow(clippy::type_complexity)]
fn read_stream(
    args: &VerifyArgs,
    id: &str,
) -> anyhow::Result<(
    String,
    Vec<Vec<u8>>,
    Option<removal::StreamInfo>,
    Vec<String>,
)> {
    let opts = MasterOpts {
        config: args.config.clone(),
        redis: args.redis.clone(),
        ..MasterOpts::default()
    };
    let (bus, _) = opts.bus()?;
    let (info, entries) = block_on(async {
        let mut conn = bus.connect().await?;
        // Counted first, then read up to the last entry counted: the
        // entries are those the counts are of (trimming meanwhile
        // takes only older ones).
        let info = removal::stream_info(&mut conn, id).await?;
        let entries = match &info {
            Some(i) => trail::entries_through(&mut conn, id, &i.last_id).await?,
            None => Vec::new(),
        };
        anyhow::Ok((info, entries))
    })??;
    let key = maid_protocol::auditchain::stream_key(id);
    let ids = entries.iter().map(|e| e.id.clone()).collect();
    Ok((
        key,
        entries.into_iter().map(|e| e.line).collect(),
        info,
        ids,
    ))
}

/// Whether entries left stream `id` other than by trimming
/// ([`removal::judge`]), from `records` (its lines, entry ids `ids`) as
/// `v` verified them; a verdict that finds nothing gone is remembered in
/// the state directory for the next verify.
fn judge_stream(
    args: &VerifyArgs,
    id: &str,
    info: Option<&removal::StreamInfo>,
    ids: &[String],
    records: &[Vec<u8>],
    v: &Verifier,
) -> anyhow::Result<Result<Vec<String>, removal::Deleted>> {
    let read: Vec<Read> = ids
        .iter()
        .zip(records)
        .filter_map(|(entry, line)| {
            Head::of_line(line).map(|h| Read {
                entry: entry.clone(),
                seq: h.seq,
                sha256: h.sha256,
            })
        })
        .collect();
    let state_dir = args
        .state_dir
        .clone()
        .or_else(|| args.pki_dir.as_ref().map(|d| d.join("audit_verified")));
    let seen = match &state_dir {
        Some(dir) => Seen::load(dir, id)?,
        None => None,
    };
    let judged = removal::judge(
        &removal::Stream {
            id,
            info,
            read: &read,
            gaps: &v.gaps,
        },
        seen.as_ref(),
    );
    if judged.is_ok()
        && let (Some(dir), Some(info)) = (&state_dir, info)
    {
        let now = removal::now();
        if let Some(next) = removal::remember(info, &read, v.vouched_through, seen.as_ref(), &now)
            && seen.as_ref() != Some(&next)
        {
            next.store(dir, id)?;
        }
    }
    Ok(judged)
}
