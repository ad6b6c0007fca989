//! Where `salt://` sources come from.
//!
//! The host's `fetch` capability asks a [`FileServer`] for a path that
//! `policy::salt_path` has already normalised (relative, no `..`). The
//! local implementation serves directories on disk (`file_roots`,
//! `maid call --local --file-root`) and still refuses a symlink that leads
//! out of its root.

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

/// Serves `salt://` paths.
#[async_trait]
pub trait FileServer: Send + Sync {
    /// Open `path` (relative, normalised). `Ok(None)` when it does not
    /// exist; `Err` for anything that should not be served.
    async fn open(&self, path: &Path) -> Result<Option<Box<dyn SourceReader>>, String>;
}

/// No `salt://` sources at all.
pub struct NoFiles;

#[async_trait]
impl FileServer for NoFiles {
    async fn open(&self, _path: &Path) -> Result<Option<Box<dyn SourceReader>>, String> {
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
    async fn open(&self, path: &Path) -> Result<Option<Box<dyn SourceReader>>, String> {
        for root in &self.roots {
            let candidate = root.join(path);
            let Ok(real) = tokio::fs::canonicalize(&candidate).await else {
                continue;
            };
            let root_real = tokio::fs::canonicalize(root)
                .await
                .map_err(|e| format!("file root {}: {e}", root.display()))?;
            if !real.starts_with(&root_real) {
                return Err(format!(
                    "salt://{} resolves outside its file root",
                    path.display()
                ));
            }
            let meta = tokio::fs::metadata(&real)
                .await
                .map_err(|e| e.to_string())?;
            if !meta.is_file() {
                continue;
            }
            let sha256 = hash_file(&real).await.map_err(|e| e.to_string())?;
            let file = tokio::fs::File::open(&real)
                .await
                .map_err(|e| e.to_string())?;
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
    async fn open(&self, path: &Path) -> Result<Option<Box<dyn SourceReader>>, String> {
        for server in &self.0 {
            if let Some(source) = server.open(path).await? {
                return Ok(Some(source));
            }
        }
        Ok(None)
    }
}
