//! Where `salt://` sources come from.
//!
//! The host's `fetch` capability asks a [`FileServer`] for a path that
//! `policy::salt_path` has already normalised (relative, no `..`), with the
//! SHA-256 the job pins for it, if any. The local implementation serves
//! directories on disk (`file_roots`, `maid call --local --file-root`): the
//! operator's own disk is trusted, but it still refuses a symlink that
//! leads out of its root, and a file whose content is not the pinned one is
//! left to the next server. The Redis file store (`filestore`) serves only
//! content it can vouch for.
//!
//! Listing (the host's `list-sources`, Salt's `file_list` and `dir_list`) follows
//! the same rules: a local root lists only what `open` would reach inside
//! it, and the Redis store only names it would serve.

use std::collections::BTreeSet;
use std::path::Path;

use async_trait::async_trait;
use maid_config::FileRoots;
use sha2::{Digest, Sha256};
use tokio::io::AsyncReadExt;

/// An open source: its size and hash are known before the first read.
#[async_trait]
pub trait SourceReader: Send + Sync {
    fn size(&self) -> u64;
    /// Lower-case hex SHA-256 of the whole content.
    fn sha256(&self) -> &str;
    /// Up to `max` next bytes; empty at the end.
    async fn read(&mut self, max: usize) -> std::io::Result<Vec<u8>>;
}

/// Why a source is not served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    /// Refused: nobody the agent trusts vouches for the content. The job
    /// returns `Denied:` (retcode 77).
    #[error("{0}")]
    Denied(String),
    /// Could not be served: Redis is down, stored content is incomplete.
    #[error("{0}")]
    Failed(String),
}

/// What a file server holds under a prefix: `salt://` paths, relative and
/// `/`-separated, as Salt's file server lists them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    /// Every file (a link to a file inside the root counts as one).
    pub files: BTreeSet<String>,
    /// Every directory, empty or not (a link to one inside the root too).
    pub dirs: BTreeSet<String>,
}

impl Listing {
    /// Both lists together, as one server's answer after another's.
    pub fn extend(&mut self, other: Listing) {
        self.files.extend(other.files);
        self.dirs.extend(other.dirs);
    }
}

/// The most entries one listing gathers: a tree of links that multiplies
/// its paths (two links to one directory in every level) must not take the
/// agent's memory with it.
pub const MAX_LISTED: usize = 100_000;

/// Serves `salt://` paths.
#[async_trait]
pub trait FileServer: Send + Sync {
    /// Open `path` (relative, normalised) in environment `saltenv` (a
    /// name `maid_salt::files::is_saltenv` accepts). With `pin`
    /// (lower-case hex SHA-256 from the signed job), only that content may
    /// be served. `Ok(None)` when it does not exist here.
    async fn open(
        &self,
        saltenv: &str,
        path: &Path,
        pin: Option<&str>,
    ) -> Result<Option<Box<dyn SourceReader>>, OpenError>;

    /// Every file and directory of `saltenv` whose path begins with
    /// `prefix` (a string prefix, as Salt's file server filters; `""` for
    /// all). The caller has checked `prefix` (no `..`, NUL or backslash,
    /// no leading `/`) and `saltenv`.
    async fn list(&self, saltenv: &str, prefix: &str) -> Result<Listing, OpenError>;
}

/// No `salt://` sources at all.
pub struct NoFiles;

#[async_trait]
impl FileServer for NoFiles {
    async fn open(
        &self,
        _saltenv: &str,
        _path: &Path,
        _pin: Option<&str>,
    ) -> Result<Option<Box<dyn SourceReader>>, OpenError> {
        Ok(None)
    }

    async fn list(&self, _saltenv: &str, _prefix: &str) -> Result<Listing, OpenError> {
        Ok(Listing::default())
    }
}

/// Directories on local disk, per environment, searched in order.
pub struct LocalRoots {
    roots: FileRoots,
}

impl LocalRoots {
    pub fn new(roots: FileRoots) -> Self {
        Self { roots }
    }
}

struct LocalSource {
    file: tokio::fs::File,
    size: u64,
    sha256: String,
}

#[async_trait]
impl SourceReader for LocalSource {
    fn size(&self) -> u64 {
        self.size
    }

    fn sha256(&self) -> &str {
        &self.sha256
    }

    async fn read(&mut self, max: usize) -> std::io::Result<Vec<u8>> {
        let mut buf = vec![0u8; max.min(self.size as usize + 1).max(1)];
        let n = self.file.read(&mut buf).await?;
        buf.truncate(n);
        Ok(buf)
    }
}

/// Hash what `file` holds from where it stands to its end, then rewind
/// it: the content served is the content hashed (one open, no window for
/// the path to name another file in between).
fn hash_and_rewind(file: &mut std::fs::File) -> std::io::Result<String> {
    use std::io::{Read, Seek};
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    file.rewind()?;
    Ok(hex::encode(hasher.finalize()))
}

/// [`LocalRoots::open`] off the async runtime, all of it at once: one
/// hand-off to a blocking thread, not one per file system call.
fn open_local(
    roots: &[std::path::PathBuf],
    path: &Path,
    pin: Option<&str>,
) -> Result<Option<(std::fs::File, u64, String)>, OpenError> {
    let failed = |e: std::io::Error| OpenError::Failed(e.to_string());
    for root in roots {
        let candidate = root.join(path);
        let Ok(real) = std::fs::canonicalize(&candidate) else {
            continue;
        };
        let root_real = std::fs::canonicalize(root)
            .map_err(|e| OpenError::Failed(format!("file root {}: {e}", root.display())))?;
        if !real.starts_with(&root_real) {
            return Err(OpenError::Failed(format!(
                "salt://{} resolves outside its file root",
                path.display()
            )));
        }
        let meta = std::fs::metadata(&real).map_err(failed)?;
        if !meta.is_file() {
            continue;
        }
        let mut file = std::fs::File::open(&real).map_err(failed)?;
        let sha256 = hash_and_rewind(&mut file).map_err(failed)?;
        if pin.is_some_and(|pin| pin != sha256) {
            // Another version than the job's: a later root or server
            // may hold the pinned one.
            continue;
        }
        return Ok(Some((file, meta.len(), sha256)));
    }
    Ok(None)
}

#[async_trait]
impl FileServer for LocalRoots {
    async fn open(
        &self,
        saltenv: &str,
        path: &Path,
        pin: Option<&str>,
    ) -> Result<Option<Box<dyn SourceReader>>, OpenError> {
        let roots = self.roots.get(saltenv).to_vec();
        if roots.is_empty() {
            return Ok(None);
        }
        let (path, pin) = (path.to_path_buf(), pin.map(str::to_string));
        let opened = tokio::task::spawn_blocking(move || open_local(&roots, &path, pin.as_deref()))
            .await
            .map_err(|e| OpenError::Failed(format!("opening salt://: {e}")))??;
        Ok(opened.map(|(file, size, sha256)| {
            Box::new(LocalSource {
                file: tokio::fs::File::from_std(file),
                size,
                sha256,
            }) as Box<dyn SourceReader>
        }))
    }

    async fn list(&self, saltenv: &str, prefix: &str) -> Result<Listing, OpenError> {
        let roots = self.roots.get(saltenv).to_vec();
        let prefix = prefix.to_string();
        tokio::task::spawn_blocking(move || {
            let mut listing = Listing::default();
            for root in &roots {
                walk_root(root, &prefix, &mut listing)?;
            }
            Ok(listing)
        })
        .await
        .map_err(|e| OpenError::Failed(format!("listing salt://: {e}")))?
    }
}

/// Add what `root` holds under `prefix` to `listing`, as Salt's `roots`
/// backend walks it (`os.walk` following links), less what `open` would
/// refuse: a link whose real path leaves the root (or leads nowhere) is
/// not listed, nor anything but files and directories. A directory that
/// is its own ancestor (a link loop) is listed once and not walked again,
/// where Salt's walk would go on until the path grows too long.
fn walk_root(root: &Path, prefix: &str, listing: &mut Listing) -> Result<(), OpenError> {
    let Ok(real_root) = std::fs::canonicalize(root) else {
        // A root that does not exist lists nothing, as for Salt's walk.
        return Ok(());
    };
    // Walk from the deepest directory the prefix names whole.
    let start = prefix.rsplit_once('/').map_or("", |(dir, _)| dir);
    // The real paths from the root down to the start: a link back to any
    // of them is a loop.
    let mut above = vec![real_root.clone()];
    let mut logical = real_root.clone();
    for part in start.split('/').filter(|p| !p.is_empty()) {
        logical.push(part);
        match std::fs::canonicalize(&logical) {
            Ok(real) if real.starts_with(&real_root) && real.is_dir() => above.push(real),
            _ => return Ok(()),
        }
    }
    let start_real = above.last().cloned().unwrap_or_else(|| real_root.clone());
    // (directory's real path, its salt:// path, the real paths above it)
    let mut stack = vec![(start_real, start.to_string(), above)];
    while let Some((dir, rel, above)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                continue;
            };
            let path = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            // Only what the prefix names, or a directory on the way to it.
            let wanted = path.starts_with(prefix);
            if !wanted && !prefix.starts_with(&format!("{path}/")) {
                continue;
            }
            let Ok(real) = std::fs::canonicalize(entry.path()) else {
                continue;
            };
            if !real.starts_with(&real_root) {
                continue;
            }
            let Ok(meta) = std::fs::metadata(&real) else {
                continue;
            };
            if meta.is_dir() {
                if wanted {
                    listing.dirs.insert(path.clone());
                }
                if !above.contains(&real) {
                    let mut chain = above.clone();
                    chain.push(real.clone());
                    stack.push((real, path, chain));
                }
            } else if meta.is_file() && wanted {
                listing.files.insert(path);
            }
            if listing.files.len() + listing.dirs.len() > MAX_LISTED {
                return Err(OpenError::Failed(format!(
                    "{} holds more than {MAX_LISTED} entries under {prefix:?}",
                    root.display()
                )));
            }
        }
    }
    Ok(())
}

/// Several file servers, asked in order; the first that has a path serves it.
pub struct Chain(pub Vec<std::sync::Arc<dyn FileServer>>);

#[async_trait]
impl FileServer for Chain {
    async fn open(
        &self,
        saltenv: &str,
        path: &Path,
        pin: Option<&str>,
    ) -> Result<Option<Box<dyn SourceReader>>, OpenError> {
        for server in &self.0 {
            if let Some(source) = server.open(saltenv, path, pin).await? {
                return Ok(Some(source));
            }
        }
        Ok(None)
    }

    /// Everything any server lists, as Salt merges its backends' lists.
    async fn list(&self, saltenv: &str, prefix: &str) -> Result<Listing, OpenError> {
        let mut listing = Listing::default();
        for server in &self.0 {
            listing.extend(server.list(saltenv, prefix).await?);
        }
        Ok(listing)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_local_file_is_served_under_a_pin_only_with_the_pinned_content() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        std::fs::write(a.path().join("f"), "new").unwrap();
        std::fs::write(b.path().join("f"), "old").unwrap();
        let roots = LocalRoots::new(FileRoots::base(vec![a.path().into(), b.path().into()]));
        let sha = |s: &str| hex::encode(Sha256::digest(s));
        let open = |pin: Option<String>| {
            let roots = &roots;
            async move {
                roots
                    .open("base", Path::new("f"), pin.as_deref())
                    .await
                    .unwrap()
                    .map(|s| s.sha256().to_string())
            }
        };
        assert_eq!(open(None).await, Some(sha("new")));
        assert_eq!(open(Some(sha("new"))).await, Some(sha("new")));
        assert_eq!(open(Some(sha("old"))).await, Some(sha("old")));
        assert_eq!(open(Some(sha("other"))).await, None);
    }

    fn names(set: &BTreeSet<String>) -> Vec<&str> {
        set.iter().map(String::as_str).collect()
    }

    #[tokio::test]
    async fn local_roots_list_as_salt_filters_by_prefix_and_stay_inside() {
        let (a, b, out) = (
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
            tempfile::tempdir().unwrap(),
        );
        for (root, path) in [
            (a.path(), "web/index.html"),
            (a.path(), "web/sub/x.txt"),
            (a.path(), "webx/y.txt"),
            (b.path(), "web/index.html"),
            (b.path(), "top.sls"),
        ] {
            let path = root.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "x").unwrap();
        }
        std::fs::create_dir_all(a.path().join("web/empty")).unwrap();
        std::fs::write(out.path().join("secret"), "s").unwrap();
        let link = |to: &Path, at: &str| std::os::unix::fs::symlink(to, a.path().join(at)).unwrap();
        link(out.path(), "web/out");
        link(&out.path().join("secret"), "web/secret");
        link(Path::new("../.."), "web/sub/loop");
        link(Path::new("sub/x.txt"), "web/alias.txt");
        link(Path::new("nowhere"), "web/dangling");
        let mut roots = FileRoots::base(vec![a.path().into(), b.path().into()]);
        roots.append(FileRoots::base(vec!["/nonexistent".into()]));
        roots.prepend("dev", vec![out.path().into()]);
        let roots = LocalRoots::new(roots);

        let all = roots.list("base", "").await.unwrap();
        assert_eq!(
            names(&all.files),
            [
                "top.sls",
                "web/alias.txt",
                "web/index.html",
                "web/sub/x.txt",
                "webx/y.txt"
            ]
        );
        assert_eq!(
            names(&all.dirs),
            ["web", "web/empty", "web/sub", "web/sub/loop", "webx"]
        );
        // A string prefix, as Salt's: `web` takes `webx` too.
        let web = roots.list("base", "web").await.unwrap();
        assert_eq!(web.files.len(), 4);
        assert!(web.files.contains("webx/y.txt"));
        let sub = roots.list("base", "web/sub").await.unwrap();
        assert_eq!(names(&sub.files), ["web/sub/x.txt"]);
        assert_eq!(names(&sub.dirs), ["web/sub", "web/sub/loop"]);
        assert_eq!(
            roots.list("base", "web/out").await.unwrap(),
            Listing::default()
        );
        assert_eq!(
            roots.list("base", "nothing/").await.unwrap(),
            Listing::default()
        );
        // Each environment its own roots: `dev` is `out`, `qa` nothing.
        let dev = roots.list("dev", "").await.unwrap();
        assert_eq!(names(&dev.files), ["secret"]);
        assert!(
            roots
                .open("dev", Path::new("secret"), None)
                .await
                .unwrap()
                .is_some()
        );
        assert!(
            roots
                .open("base", Path::new("secret"), None)
                .await
                .unwrap()
                .is_none()
        );
        assert_eq!(roots.list("qa", "").await.unwrap(), Listing::default());
    }
}
