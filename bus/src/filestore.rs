//! The fleet-wide `salt://` file server, kept in Redis.
//!
//! `maid file push` stores a file content-addressed: its bytes in chunks
//! under its SHA-256, a small metadata hash, and a name → hash index, so
//! `salt://NAME` resolves on every agent. With the master key it also
//! signs what it pushed — name, SHA-256 and size ([`FileRecord`]) — beside
//! the index, in [`SIGNED_KEY`].
//!
//! Everything in Redis can be written by anyone who holds credentials for
//! it, so agents serve stored content only as far as a trusted key vouches
//! for it (the agent's `filestore` module reads it that way).

use std::path::{Path, PathBuf};

use ed25519_dalek::SigningKey;
use redis::AsyncCommands;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::io::AsyncReadExt;

use crate::Conn;
use maid_protocol::trust::{self, Envelope, SignatureError, Verifier};

/// Name → SHA-256 of every file pushed to the `base` environment.
pub const INDEX_KEY: &str = "maid:file:index";
/// Name → the master's signed [`FileRecord`] of that name in `base`, as an
/// [`Envelope`] in JSON.
pub const SIGNED_KEY: &str = "maid:file:signed";

/// [`INDEX_KEY`] of environment `saltenv`: `base`'s is [`INDEX_KEY`],
/// another's `maid:file:index:<saltenv>`.
pub fn index_key(saltenv: &str) -> String {
    env_key(INDEX_KEY, saltenv)
}

/// [`SIGNED_KEY`] of environment `saltenv`, as [`index_key`] names it.
pub fn signed_key(saltenv: &str) -> String {
    env_key(SIGNED_KEY, saltenv)
}

fn env_key(base: &str, saltenv: &str) -> String {
    if saltenv == "base" {
        base.to_string()
    } else {
        format!("{base}:{saltenv}")
    }
}
/// Bytes per chunk.
pub const CHUNK_BYTES: usize = 1 << 20;
/// Bytes fetched from Redis per command when serving content: a chunk is
/// read in pieces (`GETRANGE`), never whole, whatever a tampered store
/// holds under its key.
pub const PIECE_BYTES: usize = 256 << 10;
/// `kind` of a [`FileRecord`]: what the master's signature is about, so a
/// signature over anything else (a job) never reads as one.
pub const RECORD_KIND: &str = "salt-file";
/// Chunk sizes an agent accepts from stored metadata.
pub const CHUNK_BYTES_ACCEPTED: std::ops::RangeInclusive<u64> = (64 << 10)..=(64 << 20);

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
    Name(#[from] maid_salt::files::BadSaltUrl),
    #[error("{0:?} is not an environment name (1 to 128 letters, digits, `_`, `-` or `.`)")]
    Env(String),
}

/// What a push stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    pub name: String,
    pub sha256: String,
    pub size: u64,
    /// Id of the key that signed it, when one did.
    pub kid: Option<String>,
}

/// What a master signs about a pushed file: `salt://name` in environment
/// `saltenv` is exactly `size` bytes whose SHA-256 is `sha256`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRecord {
    /// Always [`RECORD_KIND`].
    pub kind: String,
    /// The environment; absent (as in records signed before environments)
    /// for `base`.
    #[serde(default = "base", skip_serializing_if = "is_base")]
    pub saltenv: String,
    /// The `salt://` name, normalised as agents resolve it.
    pub name: String,
    /// Lower-case hex SHA-256 of the content.
    pub sha256: String,
    /// Bytes of the content.
    pub size: u64,
}

impl FileRecord {
    /// The record of `salt://name` in `base`.
    pub fn new(name: &str, sha256: &str, size: u64) -> Self {
        Self {
            kind: RECORD_KIND.into(),
            saltenv: base(),
            name: name.into(),
            sha256: sha256.into(),
            size,
        }
    }

    /// The same record for environment `saltenv`.
    pub fn in_saltenv(mut self, saltenv: &str) -> Self {
        self.saltenv = saltenv.into();
        self
    }

    /// The record signed with `key`, as stored in [`SIGNED_KEY`].
    pub fn sign(&self, key: &SigningKey) -> Envelope {
        let payload = serde_json::to_string(self).expect("a file record serialises");
        trust::sign(payload, key)
    }

    /// The record in `envelope` (JSON, as stored in [`signed_key`]) when a
    /// key of `verifier` signed it and it vouches for `name` in `saltenv`;
    /// why not, otherwise.
    pub fn verify(
        verifier: &Verifier,
        envelope: &str,
        saltenv: &str,
        name: &str,
    ) -> Result<Self, NotVouched> {
        let envelope: Envelope = serde_json::from_str(envelope).map_err(NotVouched::NotEnvelope)?;
        verifier.signer(&envelope.payload, &envelope.sig, envelope.kid.as_deref())?;
        let record: Self =
            serde_json::from_str(&envelope.payload).map_err(NotVouched::NotRecord)?;
        if record.kind != RECORD_KIND {
            return Err(NotVouched::Kind(record.kind));
        }
        if record.name != name {
            return Err(NotVouched::Name(record.name));
        }
        if record.saltenv != saltenv {
            return Err(NotVouched::Env(record.saltenv));
        }
        if !is_sha256(&record.sha256) {
            return Err(NotVouched::NoHash);
        }
        Ok(record)
    }
}

fn base() -> String {
    "base".into()
}

fn is_base(saltenv: &str) -> bool {
    saltenv == "base"
}

/// Why a file's signed record does not vouch for it.
#[derive(Debug, thiserror::Error)]
pub enum NotVouched {
    #[error("its signed record is not an envelope: {0}")]
    NotEnvelope(serde_json::Error),
    #[error("its signed record: {0}")]
    Signature(#[from] SignatureError),
    #[error("its signed record is not a file record: {0}")]
    NotRecord(serde_json::Error),
    #[error("its signed record is a {0:?}")]
    Kind(String),
    #[error("its signed record names salt://{0}")]
    Name(String),
    #[error("its signed record is for environment {0:?}")]
    Env(String),
    #[error("its signed record holds no SHA-256")]
    NoHash,
}

/// Whether `text` is a SHA-256 as manifests, records and pins write it:
/// 64 lower-case hex digits.
pub fn is_sha256(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Check a `salt://` name the way the agents will resolve it.
fn check_name(name: &str) -> Result<String, PushError> {
    let path = maid_salt::files::salt_path(&format!("salt://{name}"))?;
    Ok(path.to_string_lossy().into_owned())
}

/// Store the file at `path` as `salt://name` in environment `saltenv`;
/// with `key`, sign what was stored. Without one, a signed record of an
/// earlier push of `name` is removed: it would vouch for other content
/// than the index now names.
pub async fn push(
    conn: &mut Conn,
    path: &Path,
    saltenv: &str,
    name: &str,
    key: Option<&SigningKey>,
) -> Result<Pushed, PushError> {
    let name = check_name(name)?;
    if !maid_salt::files::is_saltenv(saltenv) {
        return Err(PushError::Env(saltenv.into()));
    }
    let (sha, size) = store(conn, path).await?;
    // The record first: an agent that requires it never finds the index
    // ahead of it. (Two commands, not MULTI: the keys may live on different
    // cluster nodes.)
    let kid = match key {
        Some(key) => {
            let envelope = FileRecord::new(&name, &sha, size)
                .in_saltenv(saltenv)
                .sign(key);
            let json = serde_json::to_string(&envelope).expect("an envelope serialises");
            let _: () = conn.hset(signed_key(saltenv), &name, json).await?;
            envelope.kid
        }
        None => {
            let _: () = conn.hdel(signed_key(saltenv), &name).await?;
            None
        }
    };
    let _: () = conn.hset(index_key(saltenv), &name, &sha).await?;
    Ok(Pushed {
        name,
        sha256: sha,
        size,
        kid,
    })
}

/// Every file under `roots` stored as `salt://` its path in the root in
/// environment `saltenv` (a name in an earlier root wins, as Salt's
/// `file_roots` search them), each signed with `key` when given: what a
/// master serves its state runs from. Links are followed while they stay
/// inside their root; anything else (a link leading out, a socket) is
/// skipped.
pub async fn push_tree(
    conn: &mut Conn,
    saltenv: &str,
    roots: &[std::path::PathBuf],
    key: Option<&SigningKey>,
) -> Result<Vec<Pushed>, PushError> {
    let mut seen = std::collections::BTreeSet::new();
    let mut pushed = Vec::new();
    for root in roots {
        let io = |error| PushError::Io {
            path: root.clone(),
            error,
        };
        let real_root = std::fs::canonicalize(root).map_err(io)?;
        let mut stack = vec![real_root.clone()];
        // Each real directory once: a link back up is no loop.
        let mut visited = std::collections::BTreeSet::new();
        while let Some(dir) = stack.pop() {
            let Ok(real_dir) = std::fs::canonicalize(&dir) else {
                continue;
            };
            if !visited.insert(real_dir) {
                continue;
            }
            let mut entries: Vec<_> = std::fs::read_dir(&dir)
                .map_err(|error| PushError::Io {
                    path: dir.clone(),
                    error,
                })?
                .flatten()
                .map(|e| e.path())
                .collect();
            entries.sort();
            for path in entries {
                let Ok(real) = std::fs::canonicalize(&path) else {
                    continue;
                };
                if !real.starts_with(&real_root) {
                    continue;
                }
                if real.is_dir() {
                    stack.push(path);
                    continue;
                }
                if !real.is_file() {
                    continue;
                }
                let Ok(rel) = path.strip_prefix(&real_root) else {
                    continue;
                };
                let name = rel.to_string_lossy().into_owned();
                if seen.insert(name.clone()) {
                    pushed.push(push(conn, &real, saltenv, &name, key).await?);
                }
            }
        }
    }
    Ok(pushed)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn sha(bytes: &[u8]) -> String {
        hex::encode(Sha256::digest(bytes))
    }

    #[test]
    fn file_records_verify_only_as_signed_for_their_name() {
        let key = trust::generate().unwrap();
        let pk = key.verifying_key();
        let verifier = Verifier {
            keys: vec![(trust::key_id(&pk), pk)],
            require_signed: true,
            max_skew_ms: 0,
        };
        let record = FileRecord::new("etc/motd", &sha(b"hi"), 2);
        let json = |e: &Envelope| serde_json::to_string(e).unwrap();
        let signed = json(&record.sign(&key));
        assert_eq!(
            FileRecord::verify(&verifier, &signed, "base", "etc/motd").unwrap(),
            record
        );
        // Another name's record.
        let err = FileRecord::verify(&verifier, &signed, "base", "etc/passwd").unwrap_err();
        assert!(matches!(&err, NotVouched::Name(n) if n == "etc/motd"));
        assert_eq!(err.to_string(), "its signed record names salt://etc/motd");
        // Signed by a key nobody trusts.
        let other = trust::generate().unwrap();
        assert!(matches!(
            FileRecord::verify(&verifier, &json(&record.sign(&other)), "base", "etc/motd"),
            Err(NotVouched::Signature(_))
        ));
        // The payload changed after signing.
        let mut forged = record.sign(&key);
        forged.payload = forged.payload.replace(&record.sha256, &sha(b"evil"));
        assert!(matches!(
            FileRecord::verify(&verifier, &json(&forged), "base", "etc/motd"),
            Err(NotVouched::Signature(_))
        ));
        // Something else the master signed (a job) is no file record.
        let job = trust::sign(
            serde_json::json!({"name": "etc/motd", "sha256": record.sha256, "size": 2,
                               "jid": "1", "fun": "test.ping"})
            .to_string(),
            &key,
        );
        assert!(matches!(
            FileRecord::verify(&verifier, &json(&job), "base", "etc/motd"),
            Err(NotVouched::Kind(_) | NotVouched::NotRecord(_))
        ));
        assert!(matches!(
            FileRecord::verify(&verifier, "not json", "base", "etc/motd"),
            Err(NotVouched::NotEnvelope(_))
        ));
        // A record of base is none of another environment's, nor the
        // reverse; a record without `saltenv` (signed before environments)
        // is base's.
        assert!(!signed.contains("saltenv"));
        let err = FileRecord::verify(&verifier, &signed, "dev", "etc/motd").unwrap_err();
        assert_eq!(
            err.to_string(),
            "its signed record is for environment \"base\""
        );
        let dev = json(&record.clone().in_saltenv("dev").sign(&key));
        assert!(FileRecord::verify(&verifier, &dev, "dev", "etc/motd").is_ok());
        assert!(matches!(
            FileRecord::verify(&verifier, &dev, "base", "etc/motd"),
            Err(NotVouched::Env(e)) if e == "dev"
        ));
        assert_eq!(index_key("base"), INDEX_KEY);
        assert_eq!(signed_key("dev"), "maid:file:signed:dev");
    }
}
