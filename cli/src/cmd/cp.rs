//! `maid cp`: Salt's `salt-cp`, in both of its modes.
//!
//! * By default each source file is pushed to the Redis file store and
//!   the targeted maids fetch it with `cp.get_file`, pinned to the bytes
//!   pushed (salt-cp's old style sends the files in one job instead; what
//!   the operator sees is the same).
//! * `-C/--chunked` sends what `salt-cp -C` sends: every file under the
//!   sources, directories walked, in chunks of `cp.recv_chunked` jobs
//!   (gzipped unless `-n`), with each file's mode, then the empty
//!   directories, so a maid answers exactly as a Salt minion would.
//!
//! Either way, each minion's `{path written: True}` (or why not) is shown
//! in one document and the exit status is 0 once the copy went out.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use base64::Engine;
use clap::Args;
use serde_json::{Map, Value};

use super::file::signed_by;
use super::fleet::{
    NO_MATCH, Prepared, Ready, ReportOpts, Spec, TargetOpts, accounting, prepare, report_forged,
};
use crate::master::MasterOpts;
use crate::rt::block_on;
use maid_bus::filestore;
use maid_master::jobs::{self, JobRequest, Report};

#[derive(Debug, Args)]
// salt-cp's `-C` is `--chunked`; its targets have no compound short flag.
#[command(mut_arg("compound", |a| a.short(None)))]
pub struct CpArgs {
    #[command(flatten)]
    pub target: TargetOpts,
    /// Target expression.
    pub tgt: String,
    /// Local files (directories too with --chunked), then the destination
    /// on the minions: a file (one source), or a directory they are copied
    /// into.
    #[arg(required = true, num_args = 1.., value_name = "SOURCE... DEST")]
    pub paths: Vec<String>,
    /// Send the files in chunks (`cp.recv_chunked`), as `salt-cp -C`:
    /// directories recursively, missing directories made, modes kept.
    #[arg(short = 'C', long)]
    pub chunked: bool,
    /// With --chunked: send the chunks as they are, not gzipped.
    #[arg(short = 'n', long = "no-compression")]
    pub no_compression: bool,
    /// Create missing directories of DEST.
    #[arg(long)]
    pub makedirs: bool,
    #[command(flatten)]
    pub report: ReportOpts,
    #[command(flatten)]
    pub master: MasterOpts,
}

/// What `salt-cp` shows for a minion whose destination directory is
/// missing.
const DEST_UNAVAILABLE: &str = "Destination unavailable";

/// salt-cp's chunk size (the master's `salt_cp_chunk_size`).
const CHUNK_SIZE: usize = 98_304;

/// The job went out: who it selected, and the ids the target listed that
/// no maid answers for.
struct Copy {
    bus: maid_bus::Bus,
    req: JobRequest,
    selected: std::collections::BTreeSet<String>,
    unknown: std::collections::BTreeSet<String>,
}

/// What a copy sends, read off the sources before anything goes out.
enum Plan {
    /// Old style: the files named, each as the file store serves it.
    Files(Vec<(PathBuf, String)>),
    /// `--chunked`: every file under the sources, and the empty
    /// directories.
    Chunked(Listing),
}

pub fn cp(args: CpArgs, verbose: bool) -> anyhow::Result<ExitCode> {
    args.report.output.prepare()?;
    let (dest, sources) = args.paths.split_last().context("SOURCE... DEST")?;
    let plan = if args.chunked {
        match list(sources) {
            Ok(listing) => Plan::Chunked(listing),
            // As salt-cp: a source that is not there is said, exit 42.
            Err(missing) => {
                eprintln!("{missing} does not exist");
                return Ok(ExitCode::from(42));
            }
        }
    } else {
        let mut files = Vec::new();
        for src in sources {
            let path = Path::new(src);
            if path.is_dir() {
                outln!(
                    "{src} is a directory, only files are supported in non-chunked mode. \
                     Use \"--chunked\" command line argument."
                );
                return Ok(ExitCode::FAILURE);
            }
            // As salt-cp: what is neither file nor directory is left out.
            if path.is_file() {
                let name = path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .with_context(|| format!("{src} has no file name"))?;
                files.push((path.to_path_buf(), name.to_string()));
            }
        }
        Plan::Files(files)
    };
    let mut kwarg = Map::new();
    if args.makedirs && !args.chunked {
        kwarg.insert("makedirs".into(), Value::Bool(true));
    }
    let mut spec = Spec::new(
        args.target.tgt(&args.tgt),
        args.target.tgt_type(),
        if args.chunked {
            "cp.recv_chunked"
        } else {
            "cp.get_file"
        },
    );
    spec.kwarg = kwarg;
    // `--delimiter` is taken and not used: salt-cp reads the target with
    // `:` whatever it says, and so does maid cp.
    let copy = match prepare(&args.master, &args.report, spec)? {
        Prepared::Done(code) => return Ok(code),
        Prepared::NoMatch => {
            outln!("{NO_MATCH}");
            return Ok(ExitCode::SUCCESS);
        }
        Prepared::Ready(ready) => {
            let unknown = ready.registry.unknown(&ready.req);
            let Ready {
                bus, req, selected, ..
            } = *ready;
            Copy {
                bus,
                req,
                selected,
                unknown,
            }
        }
    };
    let (shown, last) = match plan {
        Plan::Chunked(listing) => chunked(&copy, &listing, sources, dest, !args.no_compression)?,
        Plan::Files(files) => old_style(&copy, &files, dest, verbose)?,
    };
    let (out, indent) = (&args.report.output(), args.report.output.out_indent);
    out.display(&shown.into_iter().collect(), indent);
    if let (Some(report), true) = (last, args.report.summary) {
        eprint!("{}", accounting(&report));
    }
    Ok(ExitCode::SUCCESS)
}

/// What each minion's document says, and the last job's report.
type Shown = (BTreeMap<String, Value>, Option<Report>);

/// The rows of a copy job's minions that did not return (or refused it),
/// each set by `row` into the minion's document.
fn missed(copy: &Copy, report: &Report, mut row: impl FnMut(&String, Value)) {
    let selected = |id: &&String| copy.selected.contains(*id);
    for id in report
        .missed_minions
        .iter()
        .filter(selected)
        .chain(&copy.unknown)
    {
        row(id, Value::String(jobs::no_response(&report.jid)));
    }
    // As `maid run`: a maid that never answered is not connected.
    for id in report.missed_maids.iter().filter(selected) {
        row(id, Value::String(jobs::NOT_CONNECTED.into()));
    }
    for (id, reason) in &report.rejected {
        row(id, Value::String(format!("Job rejected: {reason}")));
    }
    report_forged(&report.forged);
}

/// Each file pushed to the file store (as `salt://NAME`) and fetched by
/// the maids with `cp.get_file`, pinned to the bytes pushed.
fn old_style(
    copy: &Copy,
    files: &[(PathBuf, String)],
    dest: &str,
    verbose: bool,
) -> anyhow::Result<Shown> {
    let mut shown: BTreeMap<String, Value> = BTreeMap::new();
    if files.is_empty() {
        // Salt sends the minions an empty set of files: each answers `{}`.
        shown.extend(
            copy.selected
                .iter()
                .map(|id| (id.clone(), Value::Object(Map::new()))),
        );
    }
    let mut last = None;
    for (path, name) in files {
        // Signed like the job: the file then stays vouched for after this
        // copy, for jobs that name it without a pin.
        let pushed = block_on(async {
            let mut conn = copy.bus.connect().await?;
            anyhow::Ok(filestore::push(&mut conn, path, "base", name, copy.req.key.as_ref()).await?)
        })??;
        if verbose {
            eprintln!(
                "pushed salt://{} ({} bytes, sha256 {}{})",
                pushed.name,
                pushed.size,
                pushed.sha256,
                signed_by(&pushed)
            );
        }
        let url = format!("salt://{}", pushed.name);
        let mut one = copy.req.clone();
        one.arg = vec![Value::String(url.clone()), Value::String(dest.to_string())];
        // The agents write exactly the bytes pushed here, whatever the
        // Redis file store holds by the time they read it.
        one.source_hashes = [(url, pushed.sha256.clone())].into();
        let report = block_on(jobs::run(&copy.bus, &one, |_| {}))??;
        for r in &report.returns {
            let entry = shown
                .entry(r.id.clone())
                .or_insert_with(|| Value::Object(Map::new()));
            match (&r.ret, r.retcode) {
                (Value::String(written), 0) if !written.is_empty() => {
                    if let Value::Object(m) = entry {
                        m.insert(written.clone(), Value::Bool(true));
                    }
                }
                (Value::String(_), 0) => {}
                // The agent's words for a missing destination directory
                // are salt-cp's `Destination unavailable`.
                (Value::String(why), _) if why.contains("does not exist; pass makedirs") => {
                    *entry = Value::String(DEST_UNAVAILABLE.into());
                }
                (other, _) => *entry = other.clone(),
            }
        }
        missed(copy, &report, |id, row| {
            shown.insert(id.clone(), row);
        });
        last = Some(report);
    }
    Ok((shown, last))
}

/// What `salt-cp -C` sends: every file under the sources with its mode
/// bits, and the directories that hold nothing.
#[derive(Debug, Default, PartialEq)]
struct Listing {
    files: BTreeMap<String, u32>,
    empty_dirs: Vec<String>,
}

/// salt-cp's `_list_files`: each source walked; `Err` names a source
/// that is not there.
fn list(sources: &[String]) -> Result<Listing, String> {
    fn walk(path: &str, into: &mut Listing) -> Result<(), String> {
        match std::fs::read_dir(path) {
            Ok(entries) => {
                let mut names: Vec<String> = entries
                    .flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect();
                names.sort();
                if names.is_empty() {
                    into.empty_dirs.push(path.to_string());
                }
                for name in names {
                    walk(&py_join(&[path, &name]), into)?;
                }
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(path.to_string()),
            Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => {
                let mode = std::fs::metadata(path)
                    .map(|m| m.permissions().mode() & 0o7777)
                    .unwrap_or(0o644);
                into.files.insert(path.to_string(), mode);
                Ok(())
            }
            // Unreadable: salt-cp sends nothing for it.
            Err(_) => Ok(()),
        }
    }
    let mut listing = Listing::default();
    for src in sources {
        walk(src, &mut listing)?;
    }
    listing.empty_dirs.sort();
    listing.empty_dirs.dedup();
    Ok(listing)
}

/// Python's `os.path.join`.
fn py_join(parts: &[&str]) -> String {
    let mut out = String::new();
    for part in parts {
        if part.starts_with('/') {
            out = (*part).to_string();
        } else if out.is_empty() || out.ends_with('/') {
            out.push_str(part);
        } else {
            out.push('/');
            out.push_str(part);
        }
    }
    out
}

/// Python's `os.path.basename`.
fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Where salt-cp's `_get_remote_path` puts `file`: a source named on the
/// command line goes into DEST (or is DEST, when DEST names one file),
/// what lies under a directory source keeps its place beneath the
/// directory's name.
fn remote_path(file: &str, sources: &[String], dest: &str, dest_is_dir: bool) -> Option<String> {
    if sources.iter().any(|s| s == file) {
        return Some(if dest_is_dir {
            py_join(&[dest, basename(file)])
        } else {
            dest.to_string()
        });
    }
    sources.iter().find_map(|src| {
        let root = format!("{}/", src.trim_end_matches('/'));
        let rel = file.strip_prefix(&root)?;
        Some(py_join(&[dest, basename(src), rel]))
    })
}

/// A file read as salt-cp reads it for sending: gzipped chunks (a last
/// one, maybe empty, once a read comes up short), or the chunks as they
/// are (none for an empty file).
fn chunks(path: &str, gzip: bool) -> std::io::Result<Vec<Vec<u8>>> {
    let mut file = std::fs::File::open(path)?;
    let mut out = Vec::new();
    loop {
        let mut buf = Vec::with_capacity(CHUNK_SIZE);
        (&mut file).take(CHUNK_SIZE as u64).read_to_end(&mut buf)?;
        let full = buf.len() == CHUNK_SIZE;
        if gzip {
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
            enc.write_all(&buf)?;
            out.push(enc.finish()?);
        } else if !buf.is_empty() {
            out.push(buf);
        }
        if !full {
            return Ok(out);
        }
    }
}

/// `salt-cp -C`: each file a job of `cp.recv_chunked` per chunk (the
/// first writes, the rest append; the first sets the mode), then each
/// empty directory; a minion's first failure for a path is what it shows.
fn chunked(
    copy: &Copy,
    listing: &Listing,
    sources: &[String],
    dest: &str,
    gzip: bool,
) -> anyhow::Result<Shown> {
    let dest_is_dir = !listing.empty_dirs.is_empty()
        || listing.files.len() > 1
        || dest.ends_with('/')
        || dest.ends_with('\\');
    let mut shown: BTreeMap<String, Map<String, Value>> = BTreeMap::new();
    let mut last = None;
    // Sent by keyword, unlike salt-cp's positional words: a Salt minion
    // reads a chunk's base64 that looks like `key=value` (`YQo=`) as a
    // keyword argument and fails the copy.
    let mut send =
        |remote: &str, kwarg: Value, shown: &mut BTreeMap<String, Map<String, Value>>| {
            let mut one = copy.req.clone();
            one.kwarg = kwarg.as_object().cloned().unwrap_or_default();
            let report = block_on(jobs::run(&copy.bus, &one, |_| {}))??;
            let mut rows: Vec<(String, Value)> = report
                .returns
                .iter()
                .map(|r| (r.id.clone(), r.ret.clone()))
                .collect();
            missed(copy, &report, |id, row| rows.push((id.clone(), row)));
            for (id, ret) in rows {
                let entry = shown.entry(id).or_default();
                // The first answer that is not True stands for the file.
                let failed = entry.get(remote).is_some_and(|v| *v != Value::Bool(true));
                if !failed {
                    entry.insert(remote.to_string(), ret);
                }
            }
            last = Some(report);
            anyhow::Ok(())
        };
    for (file, mode) in &listing.files {
        let Some(remote) = remote_path(file, sources, dest, dest_is_dir) else {
            continue;
        };
        let chunks = chunks(file, gzip).with_context(|| format!("read {file}"))?;
        for (i, chunk) in chunks.iter().enumerate() {
            let data = base64::engine::general_purpose::STANDARD.encode(chunk);
            let kwarg = serde_json::json!({
                "dest": remote, "chunk": data, "append": i > 0, "compressed": gzip, "mode": mode,
            });
            send(&remote, kwarg, &mut shown)?;
        }
    }
    for dir in &listing.empty_dirs {
        let Some(remote) = remote_path(dir, sources, dest, dest_is_dir) else {
            continue;
        };
        send(
            &remote,
            serde_json::json!({"dest": remote, "chunk": null}),
            &mut shown,
        )?;
    }
    let shown = shown
        .into_iter()
        .map(|(id, paths)| (id, Value::Object(paths)))
        .collect();
    Ok((shown, last))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_paths_are_salt_cps() {
        let src = |s: &[&str]| s.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // One file named: DEST is the file, unless DEST is a directory.
        assert_eq!(
            remote_path("/s/a.txt", &src(&["/s/a.txt"]), "/d/x.txt", false).unwrap(),
            "/d/x.txt"
        );
        assert_eq!(
            remote_path("/s/a.txt", &src(&["/s/a.txt"]), "/d/", true).unwrap(),
            "/d/a.txt"
        );
        // Under a directory source: beneath the directory's own name.
        let dirs = src(&["/s/dir"]);
        assert_eq!(
            remote_path("/s/dir/sub/b.txt", &dirs, "/d", true).unwrap(),
            "/d/dir/sub/b.txt"
        );
        // A source with a trailing slash has no name of its own.
        assert_eq!(
            remote_path("/s/dir/b.txt", &src(&["/s/dir/"]), "/d/", true).unwrap(),
            "/d/b.txt"
        );
        assert_eq!(py_join(&["/d", "", "a"]), "/d/a");
    }

    #[test]
    fn files_are_chunked_as_salt_cp_reads_them() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty");
        std::fs::write(&empty, b"").unwrap();
        let e = empty.to_str().unwrap();
        // gzip: one (empty) chunk; plain: none.
        assert_eq!(chunks(e, true).unwrap().len(), 1);
        assert!(chunks(e, false).unwrap().is_empty());
        let exact = dir.path().join("exact");
        std::fs::write(&exact, vec![7u8; CHUNK_SIZE]).unwrap();
        let x = exact.to_str().unwrap();
        // A full read asks for another: gzip sends it (empty), plain not.
        assert_eq!(chunks(x, true).unwrap().len(), 2);
        assert_eq!(chunks(x, false).unwrap(), vec![vec![7u8; CHUNK_SIZE]]);
        let gzipped = chunks(x, true).unwrap();
        let mut gz = flate2::read::GzDecoder::new(&gzipped[0][..]);
        let mut back = Vec::new();
        gz.read_to_end(&mut back).unwrap();
        assert_eq!(back, vec![7u8; CHUNK_SIZE]);

        std::fs::create_dir_all(dir.path().join("tree/sub")).unwrap();
        std::fs::create_dir_all(dir.path().join("tree/hollow")).unwrap();
        std::fs::write(dir.path().join("tree/sub/b.txt"), b"b").unwrap();
        let tree = dir.path().join("tree").display().to_string();
        let listing = list(std::slice::from_ref(&tree)).unwrap();
        assert_eq!(
            listing.files.keys().collect::<Vec<_>>(),
            [&format!("{tree}/sub/b.txt")]
        );
        assert_eq!(listing.empty_dirs, [format!("{tree}/hollow")]);
        assert_eq!(
            list(&[format!("{tree}/nope")]).unwrap_err(),
            format!("{tree}/nope")
        );
    }
}
