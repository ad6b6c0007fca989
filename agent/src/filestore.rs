//! The fleet-wide `salt://` file server, kept in Redis.
//!
//! `maid file push` stores a file content-addressed: its bytes in chunks
//! under its SHA-256, a small metadata hash, and a name → hash index, so
//! `salt://NAME` resolves on every agent. Files stream through in chunks on
//! both sides, so neither side holds a whole file in memory; agents check
//! the content against the hash as they write it (the `cp` plugin does).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use redis::AsyncCommands;
use sha2::{Digest, Sha256};
use tokio::io::AsyncReadExt;

use crate::bus::Conn;
use crate::fileserver::{FileServer, SourceReader};

/// Name → SHA-256 of every pushed file.
pub const INDEX_KEY: &str = "maid:file:index";
/// Bytes per chunk.
pub const CHUNK_BYTES: usize = 1 << 20;

/// `maid:file:meta:<sha256>`: size, chunk count and chunk size of stored
/// content.
pub fn meta_key(sha: &str) -> String {
    format!("maid:file:meta:{sha}")
}

/// `maid:file:chunk:<sha256>:<i>`: the `i`th chunk of stored content.
pub fn chunk_key(sha: &str, i: u64) -> String {
    format!("maid:file:chunk:{sha}:{i}")
}

/// Why a push failed.
#[derive(Debug, thiserror::Error)]
pub enum PushError {
    #[error("{path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{0}")]
    Redis(#[from] redis::RedisError),
    #[error("{0}")]
    Name(String),
}

/// What a push stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    pub name: String,
    pub sha256: String,
    pub size: u64,
}

/// Check a `salt://` name the way the agents will resolve it.
fn check_name(name: &str) -> Result<String, PushError> {
    let path =
        crate::runtime::policy::salt_path(&format!("salt://{name}")).map_err(PushError::Name)?;
    Ok(path.to_string_lossy().into_owned())
}

/// Store the file at `path` as `salt://name`.
pub async fn push(conn: &mut Conn, path: &Path, name: &str) -> Result<Pushed, PushError> {
    let name = check_name(name)?;
    let (sha, size) = store(conn, path).await?;
    let _: () = conn.hset(INDEX_KEY, &name, &sha).await?;
    Ok(Pushed {
        name,
        sha256: sha,
        size,
    })
}

/// Store the bytes of `path` content-addressed — chunks and metadata under
/// their SHA-256 — unless that content is already stored; its SHA-256 and
/// size. Pushed plugins share this store with `salt://` files.
pub async fn store(conn: &mut Conn, path: &Path) -> Result<(String, u64), PushError> {
    let io = |error| PushError::Io {
        path: path.to_path_buf(),
        error,
    };
    // Pass 1: the hash, which names everything else.
    let mut file = tokio::fs::File::open(path).await.map_err(io)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; CHUNK_BYTES];
    let mut size = 0u64;
    loop {
        let n = read_full(&mut file, &mut buf).await.map_err(io)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        size += n as u64;
    }
    let sha = hex::encode(hasher.finalize());
    // Pass 2: the chunks, unless this content is already stored.
    let stored: Option<u64> = conn.hget(meta_key(&sha), "size").await?;
    if stored != Some(size) {
        let mut file = tokio::fs::File::open(path).await.map_err(io)?;
        let mut i = 0u64;
        loop {
            let n = read_full(&mut file, &mut buf).await.map_err(io)?;
            if n == 0 && i > 0 {
                break;
            }
            let _: () = conn.set(chunk_key(&sha, i), &buf[..n]).await?;
            i += 1;
            if n < CHUNK_BYTES {
                break;
            }
        }
        let _: () = conn
            .hset_multiple(
                meta_key(&sha),
                &[
                    ("size", size.to_string()),
                    ("chunks", i.to_string()),
                    ("chunk_bytes", CHUNK_BYTES.to_string()),
                ],
            )
            .await?;
    }
    Ok((sha, size))
}

async fn read_full(file: &mut tokio::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        let n = file.read(&mut buf[filled..]).await?;
        if n == 0 {
            break;
        }
        filled += n;
    }
    Ok(filled)
}

/// Gives the current command connection (it changes across reconnects).
pub trait ConnSource: Send + Sync {
    fn conn(&self) -> Option<Conn>;
}

/// `salt://` served from Redis.
pub struct RedisFiles {
    conns: Arc<dyn ConnSource>,
}

impl RedisFiles {
    pub fn new(conns: Arc<dyn ConnSource>) -> Self {
        Self { conns }
    }
}

struct RedisSource {
    conns: Arc<dyn ConnSource>,
    sha256: String,
    size: u64,
    chunks: u64,
    next: u64,
    buf: Vec<u8>,
    pos: usize,
}

fn unavailable() -> std::io::Error {
    std::io::Error::other("redis is not connected")
}

#[async_trait]
impl SourceReader for RedisSource {
    fn size(&self) -> u64 {
        self.size
    }

    fn sha256(&self) -> &str {
        &self.sha256
    }

    async fn read(&mut self, max: usize) -> std::io::Result<Vec<u8>> {
        if self.pos >= self.buf.len() {
            if self.next >= self.chunks {
                return Ok(Vec::new());
            }
            let mut conn = self.conns.conn().ok_or_else(unavailable)?;
            let chunk: Option<Vec<u8>> = conn
                .get(chunk_key(&self.sha256, self.next))
                .await
                .map_err(std::io::Error::other)?;
            self.buf = chunk.ok_or_else(|| {
                std::io::Error::other(format!("chunk {} of {} is missing", self.next, self.sha256))
            })?;
            self.pos = 0;
            self.next += 1;
        }
        let end = (self.pos + max).min(self.buf.len());
        let out = self.buf[self.pos..end].to_vec();
        self.pos = end;
        Ok(out)
    }
}

#[async_trait]
impl FileServer for RedisFiles {
    async fn open(&self, path: &Path) -> Result<Option<Box<dyn SourceReader>>, String> {
        let mut conn = self.conns.conn().ok_or("redis is not connected")?;
        let name = path.to_string_lossy();
        let sha: Option<String> = conn
            .hget(INDEX_KEY, name.as_ref())
            .await
            .map_err(|e| e.to_string())?;
        let Some(sha) = sha else {
            return Ok(None);
        };
        let (size, chunks): (Option<u64>, Option<u64>) = redis::cmd("HMGET")
            .arg(meta_key(&sha))
            .arg("size")
            .arg("chunks")
            .query_async(&mut conn)
            .await
            .map_err(|e| e.to_string())?;
        let (Some(size), Some(chunks)) = (size, chunks) else {
            return Err(format!("salt://{name}: metadata of {sha} is missing"));
        };
        Ok(Some(Box::new(RedisSource {
            conns: self.conns.clone(),
            sha256: sha,
            size,
            chunks,
            next: 0,
            buf: Vec::new(),
            pos: 0,
        })))
    }
}
