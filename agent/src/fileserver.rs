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

use std::path::{Path, PathBuf};

use async_trait::async_trait;
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

/// Serves `salt://` paths.
#[async_trait]
pub trait FileServer: Send + Sync {
    /// Open `path` (relative, normalised). With `pin` (lower-case hex
    /// SHA-256 from the signed job), only that content may be served.
    /// `Ok(None)` when it does not exist here.
    async fn open(
        &self,
        path: &Path,
        pin: Option<&str>,
    ) -> Result<Option<Box<dyn SourceReader>>, OpenError>;
}

/// No `salt://` sources at all.
pub struct NoFiles;

#[async_trait]
impl FileServer for NoFiles {
    async fn open(
        &self,
        _path: &Path,
        _pin: Option<&str>,
    ) -> Result<Option<Box<dyn SourceReader>>, OpenError> {
        Ok(None)
    }
}

/// Directories on local disk, searched in order.
pub struct LocalRoots {
    roots: Vec<PathBuf>,
}

impl LocalRoots {
    pub fn new(roots: Vec<PathBuf>) -> Self {
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

async fn hash_file(path: &Path) -> std::io::Result<String> {
    let mut f = tokio::fs::File::open(path).await?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).await?;
        if n == 0 {
            return Ok(hex::encode(hasher.finalize()));
        }
        hasher.update(&buf[..n]);
    }
}

#[async_trait]
impl FileServer for LocalRoots {
    async fn open(
        &self,
        path: &Path,
        pin: Option<&str>,
    ) -> Result<Option<Box<dyn SourceReader>>, OpenError> {
        let failed = |e: std::io::Error| OpenError::Failed(e.to_string());
        for root in &self.roots {
            let candidate = root.join(path);
            let Ok(real) = tokio::fs::canonicalize(&candidate).await else {
                continue;
            };
            let root_real = tokio::fs::canonicalize(root)
                .await
                .map_err(|e| OpenError::Failed(format!("file root {}: {e}", root.display())))?;
            if !real.starts_with(&root_real) {
                return Err(OpenError::Failed(format!(
                    "salt://{} resolves outside its file root",
                    path.display()
                )));
            }
            let meta = tokio::fs::metadata(&real).await.map_err(failed)?;
            if !meta.is_file() {
                continue;
            }
            let sha256 = hash_file(&real).await.map_err(failed)?;
            if pin.is_some_and(|pin| pin != sha256) {
                // Another version than the job's: a later root or server
                // may hold the pinned one.
                continue;
            }
            let file = tokio::fs::File::open(&real).await.map_err(failed)?;
            return Ok(Some(Box::new(LocalSource {
                file,
                size: meta.len(),
                sha256,
            })));
        }
        Ok(None)
    }
}

/// Several file servers, asked in order; the first that has a path serves it.
pub struct Chain(pub Vec<std::sync::Arc<dyn FileServer>>);

#[async_trait]
impl FileServer for Chain {
    async fn open(
        &self,
        path: &Path,
        pin: Option<&str>,
    ) -> Result<Option<Box<dyn SourceReader>>, OpenError> {
        for server in &self.0 {
            if let Some(source) = server.open(path, pin).await? {
                return Ok(Some(source));
            }
        }
        Ok(None)
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
        let roots = LocalRoots::new(vec![a.path().into(), b.path().into()]);
        let sha = |s: &str| hex::encode(Sha256::digest(s));
        let open = |pin: Option<String>| {
            let roots = &roots;
            async move {
                roots
                    .open(Path::new("f"), pin.as_deref())
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
}
