//! `salt://` served from the fleet-wide file store in Redis
//! ([`maid_bus::filestore`] holds its layout and `maid file push`).
//!
//! Everything in Redis can be written by anyone who holds credentials for
//! it (every agent does), so an agent serves stored content only as far as
//! someone it trusts vouches for it: the SHA-256 a signed job pins, else
//! (where signed jobs are required) a record signed by a trusted master
//! key; the index alone is trusted only where signatures are not required.
//! [`StoredSource`] then streams the content in bounded pieces, never more
//! than the vouched size, and fails the read that would complete content
//! whose hash is not the vouched one, so no plugin ever sees its end.

use std::io;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use maid_bus::Conn;
use maid_bus::filestore::{
    CHUNK_BYTES, CHUNK_BYTES_ACCEPTED, FileRecord, PIECE_BYTES, chunk_key, index_key, is_sha256,
    meta_key, signed_key,
};
use redis::AsyncCommands;
use sha2::{Digest, Sha256};

use crate::fileserver::{FileServer, Listing, MAX_LISTED, OpenError, SourceReader};
use crate::trust::Verifier;

/// Gives the current command connection (it changes across reconnects).
pub trait ConnSource: Send + Sync {
    fn conn(&self) -> Option<Conn>;
}

/// `salt://` served from Redis, as far as it is vouched for (see the
/// module's header).
pub struct RedisFiles {
    /// The command connection of the moment.
    conns: Arc<dyn ConnSource>,
    /// The trusted master keys, whose signed records vouch for content.
    verifier: Verifier,
    /// Serve only pinned or signed content (`security.require_signed`):
    /// the index alone vouches for nothing.
    require_signed: bool,
}

impl RedisFiles {
    /// Serving what `keys` vouch for; with `require_signed`, nothing else.
    pub fn new(
        conns: Arc<dyn ConnSource>,
        keys: Vec<(String, ed25519_dalek::VerifyingKey)>,
        require_signed: bool,
    ) -> Self {
        Self {
            conns,
            verifier: Verifier {
                keys,
                require_signed: true,
                max_skew_ms: 0,
            },
            require_signed,
        }
    }

    /// The SHA-256 and size a trusted master key vouches for as
    /// `salt://name` in `saltenv`, from its signed record; `Ok(None)` when
    /// `name` was never pushed there.
    async fn vouched(
        &self,
        conn: &mut Conn,
        saltenv: &str,
        name: &str,
    ) -> Result<Option<(String, u64)>, OpenError> {
        let url = maid_salt::files::url(name, saltenv);
        let not_vouched = |why: &str| {
            OpenError::Denied(format!(
                "{url} is not vouched for by a trusted master key: {why}"
            ))
        };
        let record: Option<String> = conn.hget(signed_key(saltenv), name).await.map_err(failed)?;
        let Some(record) = record else {
            let pushed: bool = conn
                .hexists(index_key(saltenv), name)
                .await
                .map_err(failed)?;
            if !pushed {
                return Ok(None);
            }
            return Err(not_vouched(
                "it was pushed without a signature (push it with the master key, or copy \
                 it with `maid cp`, which pins its hash in the signed job)",
            ));
        };
        let record = FileRecord::verify(&self.verifier, &record, saltenv, name)
            .map_err(|why| not_vouched(&why.to_string()))?;
        Ok(Some((record.sha256, record.size)))
    }
}

/// Whether `name` is a `salt://` path as agents resolve it (relative,
/// normalised): a name a Redis writer spelled otherwise (`a/../b`, `/etc`)
/// is never listed.
fn is_salt_name(name: &str) -> bool {
    maid_salt::files::salt_path(&format!("salt://{name}"))
        .is_ok_and(|p| p.to_str() == Some(name) && !name.contains('?'))
}

/// The listing of `names` (each beginning with `prefix`): each a file,
/// and every directory above one that begins with `prefix` too.
fn listing_of<'a>(
    prefix: &str,
    names: impl Iterator<Item = &'a str>,
) -> Result<Listing, OpenError> {
    let mut listing = Listing::default();
    for name in names {
        let mut dir = name;
        while let Some((parent, _)) = dir.rsplit_once('/') {
            if parent.starts_with(prefix) {
                listing.dirs.insert(parent.to_string());
            }
            dir = parent;
        }
        listing.files.insert(name.to_string());
        if listing.files.len() > MAX_LISTED {
            return Err(OpenError::Failed(format!(
                "the file store holds more than {MAX_LISTED} names"
            )));
        }
    }
    Ok(listing)
}

fn failed(e: redis::RedisError) -> OpenError {
    OpenError::Failed(e.to_string())
}

fn unavailable() -> io::Error {
    io::Error::other("redis is not connected")
}

#[async_trait]
impl FileServer for RedisFiles {
    async fn open(
        &self,
        saltenv: &str,
        path: &Path,
        pin: Option<&str>,
    ) -> Result<Option<Box<dyn SourceReader>>, OpenError> {
        let mut conn = self
            .conns
            .conn()
            .ok_or_else(|| OpenError::Failed("redis is not connected".into()))?;
        let name = path.to_string_lossy();
        // Who vouches for which content: the job's pin, else a signed
        // record, else (only where signatures are not required) the index.
        let (sha, vouched_size) = match pin {
            Some(pin) if is_sha256(pin) => (pin.to_string(), None),
            Some(pin) => {
                return Err(OpenError::Denied(format!(
                    "salt://{name}: the job pins {pin:?}, not a SHA-256"
                )));
            }
            None if self.require_signed => match self.vouched(&mut conn, saltenv, &name).await? {
                Some((sha, size)) => (sha, Some(size)),
                None => return Ok(None),
            },
            None => {
                let sha: Option<String> = conn
                    .hget(index_key(saltenv), name.as_ref())
                    .await
                    .map_err(failed)?;
                let Some(sha) = sha else {
                    return Ok(None);
                };
                if !is_sha256(&sha) {
                    return Err(OpenError::Failed(format!(
                        "salt://{name}: the index names {sha:?}, not a SHA-256"
                    )));
                }
                (sha, None)
            }
        };
        let (size, chunk_bytes): (Option<u64>, Option<u64>) = redis::cmd("HMGET")
            .arg(meta_key(&sha))
            .arg("size")
            .arg("chunk_bytes")
            .query_async(&mut conn)
            .await
            .map_err(failed)?;
        let Some(stored_size) = size else {
            return Err(OpenError::Failed(format!(
                "salt://{name}: content {sha} is not in the file store"
            )));
        };
        // A pin vouches for the hash only; a size that lies is caught by
        // it, at the end of the content.
        let size = vouched_size.unwrap_or(stored_size);
        let chunk_bytes = chunk_bytes.unwrap_or(CHUNK_BYTES as u64);
        if !CHUNK_BYTES_ACCEPTED.contains(&chunk_bytes) {
            return Err(OpenError::Failed(format!(
                "salt://{name}: content {sha} is stored in chunks of {chunk_bytes} bytes"
            )));
        }
        let chunks = RedisChunks(self.conns.clone());
        Ok(Some(Box::new(StoredSource::new(
            chunks,
            sha,
            size,
            chunk_bytes,
        ))))
    }

    /// The names `open` would serve without a pin: where signatures are
    /// required, those whose signed record a trusted key signed for that
    /// very name (a name a Redis writer added to the index, or a record of
    /// its own, is not listed); otherwise the index. The store holds files
    /// only, so its directories are those above a file: it has no empty
    /// ones.
    async fn list(&self, saltenv: &str, prefix: &str) -> Result<Listing, OpenError> {
        let mut conn = self
            .conns
            .conn()
            .ok_or_else(|| OpenError::Failed("redis is not connected".into()))?;
        let wanted = |name: &str| name.starts_with(prefix) && is_salt_name(name);
        if self.require_signed {
            let records: Vec<(String, String)> =
                conn.hgetall(signed_key(saltenv)).await.map_err(failed)?;
            let vouched = records.iter().filter(|(name, record)| {
                wanted(name) && FileRecord::verify(&self.verifier, record, saltenv, name).is_ok()
            });
            listing_of(prefix, vouched.map(|(name, _)| name.as_str()))
        } else {
            let names: Vec<String> = conn.hkeys(index_key(saltenv)).await.map_err(failed)?;
            listing_of(
                prefix,
                names.iter().map(String::as_str).filter(|n| wanted(n)),
            )
        }
    }
}

/// Where stored content's chunks are read from.
#[async_trait]
trait Chunks: Send + Sync {
    /// Bytes held by chunk `i` of `sha` (0 when it does not exist).
    async fn len(&self, sha: &str, i: u64) -> io::Result<u64>;
    /// `len` bytes of chunk `i` of `sha` from `start`, or fewer where the
    /// chunk ends first.
    async fn range(&self, sha: &str, i: u64, start: u64, len: usize) -> io::Result<Vec<u8>>;
}

/// Chunks in Redis.
struct RedisChunks(Arc<dyn ConnSource>);

#[async_trait]
impl Chunks for RedisChunks {
    async fn len(&self, sha: &str, i: u64) -> io::Result<u64> {
        let mut conn = self.0.conn().ok_or_else(unavailable)?;
        redis::cmd("STRLEN")
            .arg(chunk_key(sha, i))
            .query_async(&mut conn)
            .await
            .map_err(io::Error::other)
    }

    async fn range(&self, sha: &str, i: u64, start: u64, len: usize) -> io::Result<Vec<u8>> {
        if len == 0 {
            return Ok(Vec::new());
        }
        let mut conn = self.0.conn().ok_or_else(unavailable)?;
        redis::cmd("GETRANGE")
            .arg(chunk_key(sha, i))
            .arg(start)
            .arg(start + len as u64 - 1)
            .query_async(&mut conn)
            .await
            .map_err(io::Error::other)
    }
}

/// Stored content, served only as what was vouched for: `size` bytes
/// whose SHA-256 is `sha256`, laid out in chunks of `chunk_bytes` as
/// [`store`] writes them. Each read fetches at most [`PIECE_BYTES`]; a
/// chunk of another length than its place in `size` gives it, a piece that
/// comes back short, or a hash that does not match fails the read — the
/// last before the final piece is handed out — and every read after it.
struct StoredSource<C> {
    chunks: C,
    /// The vouched hash.
    sha256: String,
    /// The vouched size (or, under a pin, the stored one, which the hash
    /// then checks).
    size: u64,
    chunk_bytes: u64,
    /// Bytes handed out so far.
    delivered: u64,
    /// Over the bytes handed out.
    hasher: Sha256,
    /// The whole content was read and matched its hash.
    verified: bool,
    /// Why the content failed a check, once it did: a plugin that reads on
    /// after an error must not then see an end of the content.
    broken: Option<String>,
}

/// Why stored content stops being served.
#[derive(Debug, thiserror::Error)]
enum Unserved {
    #[error("{0}")]
    Read(#[from] io::Error),
    #[error("chunk {0} changed while it was read")]
    Changed(u64),
    #[error("chunk {i} holds {held} bytes where {expected} belong")]
    Length { i: u64, held: u64, expected: u64 },
    #[error("it hashes to {0}, not to the vouched SHA-256")]
    Hash(String),
}

impl<C: Chunks> StoredSource<C> {
    fn new(chunks: C, sha256: String, size: u64, chunk_bytes: u64) -> Self {
        Self {
            chunks,
            sha256,
            size,
            chunk_bytes,
            delivered: 0,
            hasher: Sha256::new(),
            verified: false,
            broken: None,
        }
    }

    async fn next(&mut self, max: usize) -> Result<Vec<u8>, Unserved> {
        if self.delivered == self.size {
            if !self.verified {
                // Empty content: nothing was read, check it all the same.
                self.finish().await?;
            }
            return Ok(Vec::new());
        }
        if max == 0 {
            return Ok(Vec::new());
        }
        let i = self.delivered / self.chunk_bytes;
        let offset = self.delivered % self.chunk_bytes;
        let expected = self.chunk_bytes.min(self.size - i * self.chunk_bytes);
        if offset == 0 {
            self.check_len(i, expected).await?;
        }
        let want = (max as u64).min(PIECE_BYTES as u64).min(expected - offset) as usize;
        let piece = self.chunks.range(&self.sha256, i, offset, want).await?;
        if piece.len() != want {
            return Err(Unserved::Changed(i));
        }
        self.hasher.update(&piece);
        self.delivered += want as u64;
        if self.delivered == self.size {
            self.finish().await?;
        }
        Ok(piece)
    }

    async fn check_len(&self, i: u64, expected: u64) -> Result<(), Unserved> {
        let held = self.chunks.len(&self.sha256, i).await?;
        if held != expected {
            return Err(Unserved::Length { i, held, expected });
        }
        Ok(())
    }

    async fn finish(&mut self) -> Result<(), Unserved> {
        if self.size == 0 {
            self.check_len(0, 0).await?;
        }
        let got = hex::encode(std::mem::take(&mut self.hasher).finalize());
        if got != self.sha256 {
            return Err(Unserved::Hash(got));
        }
        self.verified = true;
        Ok(())
    }
}

#[async_trait]
impl<C: Chunks> SourceReader for StoredSource<C> {
    fn size(&self) -> u64 {
        self.size
    }

    fn sha256(&self) -> &str {
        &self.sha256
    }

    async fn read(&mut self, max: usize) -> io::Result<Vec<u8>> {
        if self.broken.is_none() {
            match self.next(max).await {
                Ok(piece) => return Ok(piece),
                Err(why) => {
                    self.broken = Some(format!(
                        "stored content {} is not served (nothing more of it will be): {why}",
                        self.sha256
                    ));
                }
            }
        }
        Err(io::Error::other(self.broken.clone().unwrap_or_default()))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Mutex;

    use super::*;

    /// Chunks in memory, recording what was asked of them.
    #[derive(Default)]
    struct Mem {
        chunks: HashMap<u64, Vec<u8>>,
        /// Bytes asked for by each `range`.
        asked: Mutex<Vec<usize>>,
        /// What `len` says instead of the truth, when set.
        len_lies: Option<u64>,
    }

    #[async_trait]
    impl Chunks for Mem {
        async fn len(&self, _sha: &str, i: u64) -> io::Result<u64> {
            Ok(self
                .len_lies
                .unwrap_or_else(|| self.chunks.get(&i).map_or(0, |c| c.len() as u64)))
        }

        async fn range(&self, _sha: &str, i: u64, start: u64, len: usize) -> io::Result<Vec<u8>> {
            self.asked.lock().unwrap().push(len);
            let chunk = self.chunks.get(&i).map(Vec::as_slice).unwrap_or_default();
            let start = (start as usize).min(chunk.len());
            let end = (start + len).min(chunk.len());
            Ok(chunk[start..end].to_vec())
        }
    }

    const CHUNK: u64 = 1 << 20;

    fn content(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    fn sha(bytes: &[u8]) -> String {
        hex::encode(Sha256::digest(bytes))
    }

    /// `bytes` laid out in chunks as `store` writes them.
    fn mem(bytes: &[u8]) -> Mem {
        let mut chunks: HashMap<u64, Vec<u8>> = bytes
            .chunks(CHUNK as usize)
            .enumerate()
            .map(|(i, c)| (i as u64, c.to_vec()))
            .collect();
        chunks.entry(0).or_default();
        Mem {
            chunks,
            ..Default::default()
        }
    }

    /// A source vouched for as `vouched`, serving `chunks`.
    fn source(chunks: Mem, vouched: &[u8]) -> StoredSource<Mem> {
        StoredSource::new(chunks, sha(vouched), vouched.len() as u64, CHUNK)
    }

    /// Every read until the end or the first error: the pieces, and the
    /// error.
    async fn drain(src: &mut StoredSource<Mem>, max: usize) -> (Vec<Vec<u8>>, Option<String>) {
        let mut pieces = Vec::new();
        loop {
            match src.read(max).await {
                Ok(piece) if piece.is_empty() => return (pieces, None),
                Ok(piece) => pieces.push(piece),
                Err(e) => return (pieces, Some(e.to_string())),
            }
        }
    }

    #[test]
    fn a_listing_holds_only_names_agents_resolve_and_the_directories_above() {
        for bad in [
            "a/../b",
            "/etc/passwd",
            "./a",
            "a//b",
            "a/",
            "",
            "a\\b",
            "a?saltenv=x",
        ] {
            assert!(!is_salt_name(bad), "{bad}");
        }
        assert!(is_salt_name("web/a b.conf"));
        let listing = listing_of("web", ["web/a/b.sls", "web/c", "webx/d"].into_iter()).unwrap();
        let files: Vec<&str> = listing.files.iter().map(String::as_str).collect();
        let dirs: Vec<&str> = listing.dirs.iter().map(String::as_str).collect();
        assert_eq!(files, ["web/a/b.sls", "web/c", "webx/d"]);
        assert_eq!(dirs, ["web", "web/a", "webx"]);
        let listing = listing_of("web/a", ["web/a/b.sls"].into_iter()).unwrap();
        assert_eq!(listing.dirs.into_iter().collect::<Vec<_>>(), ["web/a"]);
    }

    #[tokio::test]
    async fn vouched_content_streams_in_bounded_pieces() {
        let bytes = content(2 * CHUNK as usize + 300_000);
        let mut src = source(mem(&bytes), &bytes);
        assert_eq!(src.sha256(), sha(&bytes));
        assert_eq!(src.size(), bytes.len() as u64);
        let (pieces, err) = drain(&mut src, 4 << 20).await;
        assert_eq!(err, None);
        assert_eq!(pieces.concat(), bytes);
        let asked = src.chunks.asked.lock().unwrap().clone();
        assert!(asked.iter().all(|n| *n <= PIECE_BYTES), "{asked:?}");
        // The end stays the end.
        assert!(src.read(100).await.unwrap().is_empty());

        // Small reads are served as asked.
        let mut src = source(mem(&bytes), &bytes);
        let (pieces, err) = drain(&mut src, 1000).await;
        assert_eq!(err, None);
        assert!(pieces.iter().all(|p| p.len() <= 1000));
        assert_eq!(pieces.concat(), bytes);

        // Empty content.
        let mut src = source(mem(b""), b"");
        assert_eq!(drain(&mut src, 10).await, (vec![], None));
    }

    #[tokio::test]
    async fn tampered_content_fails_before_its_last_piece() {
        let bytes = content(600_000);
        let mut tampered = bytes.clone();
        *tampered.last_mut().unwrap() ^= 1;
        let mut src = source(mem(&tampered), &bytes);
        let (pieces, err) = drain(&mut src, 1 << 20).await;
        // The pieces before the last only: the last is never handed out.
        assert_eq!(pieces.concat(), bytes[..2 * PIECE_BYTES]);
        let err = err.expect("tampered content must fail");
        assert!(err.contains("not to the vouched SHA-256"), "{err}");
        // Reading on never reaches an end.
        for _ in 0..3 {
            assert!(src.read(1 << 20).await.is_err());
        }

        // Tampered early: found only at the end, still before the end.
        let mut tampered = bytes.clone();
        tampered[0] ^= 1;
        let mut src = source(mem(&tampered), &bytes);
        let (pieces, err) = drain(&mut src, 1 << 20).await;
        assert_eq!(pieces.len(), 2);
        assert!(err.is_some());

        // Empty content vouched for, something else stored.
        let mut src = source(mem(b"x"), b"");
        assert!(drain(&mut src, 10).await.1.is_some());
    }

    #[tokio::test]
    async fn a_chunk_of_the_wrong_length_is_refused_unread() {
        // 8 MiB where 10 bytes belong, beginning with the right 10 bytes.
        let bytes = b"0123456789".to_vec();
        let mut huge = bytes.clone();
        huge.resize(8 << 20, b'x');
        let mut chunks = mem(b"");
        chunks.chunks.insert(0, huge);
        let mut src = source(chunks, &bytes);
        let (pieces, err) = drain(&mut src, 1 << 20).await;
        assert!(pieces.is_empty());
        let err = err.unwrap();
        assert!(
            err.contains("chunk 0 holds 8388608 bytes where 10 belong"),
            "{err}"
        );
        assert!(src.chunks.asked.lock().unwrap().is_empty(), "nothing read");

        // A chunk missing in the middle.
        let bytes = content(2 * CHUNK as usize + 5);
        let mut chunks = mem(&bytes);
        chunks.chunks.remove(&1);
        let mut src = source(chunks, &bytes);
        let (pieces, err) = drain(&mut src, 1 << 20).await;
        assert_eq!(pieces.concat(), bytes[..CHUNK as usize]);
        assert!(err.unwrap().contains("chunk 1 holds 0 bytes"));

        // Stored shorter than vouched.
        let bytes = content(1000);
        let mut src = source(mem(&bytes[..900]), &bytes);
        assert!(drain(&mut src, 1 << 20).await.1.is_some());
    }

    #[tokio::test]
    async fn a_chunk_that_shrinks_while_read_is_refused() {
        let bytes = content(1000);
        let mut chunks = mem(&bytes[..500]);
        chunks.len_lies = Some(1000);
        let mut src = source(chunks, &bytes);
        let (pieces, err) = drain(&mut src, 1 << 20).await;
        assert!(pieces.is_empty());
        assert!(err.unwrap().contains("changed while it was read"));
    }
}
