//! Plugins pushed to the fleet (`maid plugin push`), as they are kept in
//! Redis, signed by a master key.
//!
//! * The component's bytes go into the content-addressed store that
//!   `salt://` files use ([`filestore::store`]): 1 MiB chunks under
//!   `maid:file:chunk:<sha256>:<i>` and `maid:file:meta:<sha256>`. A 40 MB
//!   Python component never travels in one message, and pushing the same
//!   bytes again stores nothing new.
//! * `maid:plugins` is a hash: module name → a signed [`PluginManifest`]
//!   (a [`trust::Envelope`], the same envelope and keys as signed jobs).
//!   The manifest names the content by SHA-256 and size, so the signature
//!   covers the bytes an agent will run; a removal is a signed manifest
//!   without content, so nobody without the key can remove a plugin either.
//!   This is the latest push of each module, for agents that sync without
//!   pins (`require_signed = false`).
//! * `maid:plugins:<module>` is a hash: content SHA-256 → the signed
//!   manifest of the latest push of that content, and `removed` → the
//!   latest signed removal. A sync job pins a module to a hash; the agent
//!   takes the entry filed under that hash, so whatever a Redis writer
//!   restores or deletes in `maid:plugins`, it gets the push the master
//!   named or nothing.
//!
//! Nothing read from here is trusted: `sync.rs` checks the signature, the
//! agent's policy and the content hash before anything is written or
//! loaded. What the master itself pushed last is kept on the master's disk
//! ([`Pushed`]), since Redis cannot vouch for it.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use ed25519_dalek::SigningKey;
use redis::AsyncCommands;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::Conn;
use crate::filestore::{self, PushError, is_sha256};
use maid_protocol::protocol::is_identifier;
use maid_protocol::trust::{self, Envelope, SignatureError, Verifier};

/// The function that installs pushed plugins, which the agent answers
/// itself, not a plugin.
pub const SYNC_MODULES: &str = "saltutil.sync_modules";

/// Salt's sync of every kind of extension; on a maid, the modules are the
/// only kind, and it installs them as [`SYNC_MODULES`] does.
pub const SYNC_ALL: &str = "saltutil.sync_all";

/// The kinds `saltutil.sync_all` reports, as a Salt 3008 minion (file
/// client `remote`) reports them.
pub const SYNC_ALL_KINDS: &[&str] = &[
    "clouds",
    "beacons",
    "modules",
    "states",
    "sdb",
    "grains",
    "renderers",
    "returners",
    "output",
    "utils",
    "log_handlers",
    "executors",
    "proxymodules",
    "engines",
    "thorium",
    "serializers",
    "matchers",
    "resources",
];

/// The kwarg of [`SYNC_MODULES`] that pins what to install.
pub const MODULES_KWARG: &str = "modules";

/// Module name → signed manifest of every pushed plugin.
pub const PLUGINS_KEY: &str = "maid:plugins";

/// The field of [`versions_key`] that holds the latest signed removal.
pub const REMOVED_FIELD: &str = "removed";

/// The hash of every pushed version of `module`: content SHA-256 (or
/// [`REMOVED_FIELD`]) → the signed manifest of its latest push.
pub fn versions_key(module: &str) -> String {
    format!("{PLUGINS_KEY}:{module}")
}

/// The first bytes of a WebAssembly component (magic, version 0x0d, layer 1);
/// a core module or anything else is refused before it is stored.
const COMPONENT_HEADER: [u8; 8] = [0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];

/// What a master signs when it pushes or removes a plugin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginManifest {
    /// The module the plugin provides; its file on an agent is
    /// `<module>.wasm`, and its own manifest must name the same module.
    pub module: String,
    /// SHA-256 of the component; absent in a removal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Size of the component in bytes; absent in a removal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// When it was pushed (Unix ms, the master's clock). Agents never go
    /// back to an older push of a module, so a replayed old manifest cannot
    /// roll a plugin back or bring a removed one back.
    pub pushed_at: i64,
}

impl PluginManifest {
    /// Whether this manifest removes the module rather than providing it.
    pub fn is_removal(&self) -> bool {
        self.sha256.is_none()
    }

    /// How a sync job pins this push: its content hash, or `null` for a
    /// removal.
    pub fn pin(&self) -> Value {
        self.sha256.clone().map_or(Value::Null, Value::String)
    }

    /// Checks the types cannot express.
    fn validate(&self) -> Result<(), BadManifest> {
        if !is_identifier(&self.module) {
            return Err(BadManifest::Module(self.module.clone()));
        }
        match (&self.sha256, self.size) {
            (Some(sha), Some(_)) if is_sha256(sha) => Ok(()),
            (None, None) => Ok(()),
            _ => Err(BadManifest::Hash),
        }
    }
}

/// A manifest whose signature verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signed {
    pub manifest: PluginManifest,
    /// Key id of the master key that signed it.
    pub kid: String,
}

/// What a manifest says that no manifest may.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadManifest {
    #[error("module name {0:?} is not an identifier")]
    Module(String),
    #[error("sha256 must be 64 lowercase hex digits, given with size")]
    Hash,
}

/// Why a stored manifest is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    #[error("not a signed manifest: {0}")]
    Malformed(String),
    #[error("not a signed manifest: {0}")]
    Bad(#[from] BadManifest),
    #[error("{0}")]
    Signature(#[from] SignatureError),
    #[error("signed for module {signed:?} but stored as {stored:?}")]
    WrongModule { signed: String, stored: String },
}

/// What one master pushed last, module → the manifest it signed: the
/// master's own record, kept on its disk beside its key
/// ([`Pushed::beside`]), from which it pins what a sync job installs.
/// Redis cannot be the record: whoever can write there can restore an
/// older signed entry or delete the newest.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Pushed(BTreeMap<String, PluginManifest>);

impl Pushed {
    /// Where the master with signing key `key` keeps its record:
    /// `<key>.pushed.json`.
    pub fn beside(key: &Path) -> PathBuf {
        let mut name = key.as_os_str().to_owned();
        name.push(".pushed.json");
        PathBuf::from(name)
    }

    /// The record at `path`; empty when nothing was pushed yet.
    pub fn load(path: &Path) -> Result<Self, StoreError> {
        match std::fs::read_to_string(path) {
            Ok(text) => serde_json::from_str(&text)
                .map_err(|e| StoreError::Invalid(format!("{}: {e}", path.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(error) => Err(StoreError::Io {
                path: path.to_path_buf(),
                error,
            }),
        }
    }

    /// Replace the file at `path` with this record (mode 0600, atomically).
    pub fn save(&self, path: &Path) -> Result<(), StoreError> {
        let text = serde_json::to_string_pretty(self).expect("records serialise");
        crate::fsutil::replace_private(path, [text]).map_err(|error| StoreError::Io {
            path: path.to_path_buf(),
            error,
        })
    }

    /// Note a push or removal this master just stored.
    pub fn note(&mut self, manifest: &PluginManifest) {
        self.0.insert(manifest.module.clone(), manifest.clone());
    }

    /// The `modules` kwarg of a sync job that installs exactly what this
    /// master pushed last: module → SHA-256, or `null` where it removed.
    pub fn pins(&self) -> serde_json::Map<String, Value> {
        self.0.iter().map(|(m, p)| (m.clone(), p.pin())).collect()
    }
}

/// Why a push or removal failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{0}")]
    Redis(#[from] redis::RedisError),
    #[error("{0}")]
    Push(#[from] PushError),
    #[error("{path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Manifest(#[from] BadManifest),
}

/// Why content could not be fetched into a file.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("{0}")]
    Redis(#[from] redis::RedisError),
    #[error("{path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("content {0} is not stored (no metadata)")]
    Missing(String),
    #[error("chunk {index} of {sha256} is missing")]
    MissingChunk { sha256: String, index: u64 },
    #[error("content is larger than the {expected} bytes signed for")]
    TooLarge { expected: u64 },
    #[error(
        "content hash mismatch: signed {expected}, stored bytes hash to {actual} ({size} bytes)"
    )]
    Mismatch {
        expected: String,
        actual: String,
        size: u64,
    },
}

/// Sign and store `manifest` under its module: filed under its content
/// hash (or as the removal) first, then as the module's latest push. Two
/// commands, not a transaction: the keys may live on different cluster
/// slots, and a push cut short between them is only a push not yet
/// announced.
async fn put(
    conn: &mut Conn,
    manifest: PluginManifest,
    key: &SigningKey,
) -> Result<Signed, StoreError> {
    manifest.validate()?;
    let payload = serde_json::to_string(&manifest).expect("manifests serialise");
    let envelope = trust::sign(payload, key);
    let kid = envelope.kid.clone().unwrap_or_default();
    let text = serde_json::to_string(&envelope).expect("envelopes serialise");
    let field = manifest.sha256.as_deref().unwrap_or(REMOVED_FIELD);
    let _: () = conn
        .hset(versions_key(&manifest.module), field, &text)
        .await?;
    let _: () = conn.hset(PLUGINS_KEY, &manifest.module, text).await?;
    Ok(Signed { manifest, kid })
}

/// Store the component at `path` as `module`, signed with `key`.
pub async fn push(
    conn: &mut Conn,
    path: &Path,
    module: &str,
    key: &SigningKey,
) -> Result<Signed, StoreError> {
    if !is_identifier(module) {
        return Err(StoreError::Invalid(format!(
            "module name {module:?} is not an identifier; pass --name MODULE"
        )));
    }
    let io = |error| StoreError::Io {
        path: path.to_path_buf(),
        error,
    };
    let mut head = [0u8; 8];
    let mut file = std::fs::File::open(path).map_err(io)?;
    std::io::Read::read_exact(&mut file, &mut head).map_err(io)?;
    if head != COMPONENT_HEADER {
        return Err(StoreError::Invalid(format!(
            "{} is not a WebAssembly component (build it with `maid plugin build`)",
            path.display()
        )));
    }
    let (sha256, size) = filestore::store(conn, path).await?;
    let manifest = PluginManifest {
        module: module.into(),
        sha256: Some(sha256),
        size: Some(size),
        pushed_at: chrono::Utc::now().timestamp_millis(),
    };
    put(conn, manifest, key).await
}

/// Remove `module` from the fleet: a signed removal replaces its manifest.
/// The content stays in the store (other pushes or files may share it).
pub async fn remove(conn: &mut Conn, module: &str, key: &SigningKey) -> Result<Signed, StoreError> {
    let manifest = PluginManifest {
        module: module.into(),
        sha256: None,
        size: None,
        pushed_at: chrono::Utc::now().timestamp_millis(),
    };
    put(conn, manifest, key).await
}

/// Every entry of [`PLUGINS_KEY`], unverified: module → stored text.
pub async fn entries(conn: &mut Conn) -> redis::RedisResult<Vec<(String, String)>> {
    let mut all: Vec<(String, String)> = conn.hgetall(PLUGINS_KEY).await?;
    all.sort();
    Ok(all)
}

/// The stored, unverified entry a sync job pins: the push of `module` with
/// content `sha256`, or its removal when `None`.
pub async fn pinned(
    conn: &mut Conn,
    module: &str,
    sha256: Option<&str>,
) -> redis::RedisResult<Option<String>> {
    conn.hget(versions_key(module), sha256.unwrap_or(REMOVED_FIELD))
        .await
}

/// Verify the manifest stored as `module`: its signature against the
/// trusted keys, its shape, and that it was signed for this module.
pub fn open(module: &str, text: &str, verifier: &Verifier) -> Result<Signed, ManifestError> {
    let envelope: Envelope =
        serde_json::from_str(text).map_err(|e| ManifestError::Malformed(e.to_string()))?;
    let kid = verifier.signer(&envelope.payload, &envelope.sig, envelope.kid.as_deref())?;
    let manifest: PluginManifest = serde_json::from_str(&envelope.payload)
        .map_err(|e| ManifestError::Malformed(e.to_string()))?;
    manifest.validate()?;
    if manifest.module != module {
        return Err(ManifestError::WrongModule {
            signed: manifest.module,
            stored: module.into(),
        });
    }
    Ok(Signed { manifest, kid })
}

/// Write the content `sha256` of `size` bytes into a new file at `dest`
/// (mode 0600, synced to disk), checking size and hash as it streams; on
/// any failure the file is removed.
pub async fn fetch(
    conn: &mut Conn,
    sha256: &str,
    size: u64,
    dest: &Path,
) -> Result<(), FetchError> {
    let result = fetch_into(conn, sha256, size, dest).await;
    if result.is_err() {
        let _ = std::fs::remove_file(dest);
    }
    result
}

async fn fetch_into(
    conn: &mut Conn,
    sha256: &str,
    size: u64,
    dest: &Path,
) -> Result<(), FetchError> {
    let io = |error| FetchError::Io {
        path: dest.to_path_buf(),
        error,
    };
    let chunks: Option<u64> = conn.hget(filestore::meta_key(sha256), "chunks").await?;
    let chunks = chunks.ok_or_else(|| FetchError::Missing(sha256.into()))?;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(dest)
        .map_err(io)?;
    let mut hasher = Sha256::new();
    let mut written = 0u64;
    for index in 0..chunks {
        // The chunk's length first: one longer than what the signed size
        // leaves is refused unread, so a Redis writer cannot make the agent
        // buffer more than the push it signed.
        let len: u64 = conn.strlen(filestore::chunk_key(sha256, index)).await?;
        if len > size.saturating_sub(written) {
            return Err(FetchError::TooLarge { expected: size });
        }
        let chunk: Option<Vec<u8>> = conn.get(filestore::chunk_key(sha256, index)).await?;
        let chunk = chunk.ok_or_else(|| FetchError::MissingChunk {
            sha256: sha256.into(),
            index,
        })?;
        written += chunk.len() as u64;
        // The signed size bounds what a tampered store can make us write.
        if written > size {
            return Err(FetchError::TooLarge { expected: size });
        }
        hasher.update(&chunk);
        file.write_all(&chunk).map_err(io)?;
    }
    let actual = hex::encode(hasher.finalize());
    if actual != sha256 || written != size {
        return Err(FetchError::Mismatch {
            expected: sha256.into(),
            actual,
            size: written,
        });
    }
    file.sync_all().map_err(io)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verifier(key: &SigningKey) -> Verifier {
        let pk = key.verifying_key();
        Verifier {
            keys: vec![(trust::key_id(&pk), pk)],
            require_signed: true,
            max_skew_ms: 0,
        }
    }

    fn stored(manifest: &PluginManifest, key: &SigningKey) -> String {
        let env = trust::sign(serde_json::to_string(manifest).unwrap(), key);
        serde_json::to_string(&env).unwrap()
    }

    #[test]
    fn manifests_open_only_when_signed_by_a_trusted_key_for_their_module() {
        let key = trust::generate().unwrap();
        let v = verifier(&key);
        let m = PluginManifest {
            module: "disk".into(),
            sha256: Some("a".repeat(64)),
            size: Some(3),
            pushed_at: 1,
        };
        let text = stored(&m, &key);
        let signed = open("disk", &text, &v).unwrap();
        assert_eq!(signed.manifest, m);
        assert_eq!(signed.kid, trust::key_id(&key.verifying_key()));

        // Stored under another module's name.
        assert!(matches!(
            open("file", &text, &v),
            Err(ManifestError::WrongModule { .. })
        ));
        // Signed by a key nobody trusts.
        let other = trust::generate().unwrap();
        assert_eq!(
            open("disk", &stored(&m, &other), &v),
            Err(ManifestError::Signature(SignatureError::UnknownKey))
        );
        // Payload changed after signing.
        let mut env: Envelope = serde_json::from_str(&text).unwrap();
        env.payload = env.payload.replace("\"size\":3", "\"size\":4");
        assert_eq!(
            open("disk", &serde_json::to_string(&env).unwrap(), &v),
            Err(ManifestError::Signature(SignatureError::BadSignature))
        );
        // A signed job is not a plugin manifest.
        let job = trust::sign(r#"{"jid":"1","tempTopic":"t","fun":"x.y"}"#.into(), &key);
        assert!(matches!(
            open("disk", &serde_json::to_string(&job).unwrap(), &v),
            Err(ManifestError::Malformed(_))
        ));
        // Content hash that is not one.
        let bad = PluginManifest {
            sha256: Some("XYZ".into()),
            ..m.clone()
        };
        assert_eq!(
            open("disk", &stored(&bad, &key), &v),
            Err(ManifestError::Bad(BadManifest::Hash))
        );
        // A removal has neither hash nor size.
        let removal = PluginManifest {
            sha256: None,
            size: None,
            ..m
        };
        assert!(
            open("disk", &stored(&removal, &key), &v)
                .unwrap()
                .manifest
                .is_removal()
        );
    }

    #[test]
    fn the_masters_record_pins_its_latest_push_of_each_module() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("master.key");
        let path = Pushed::beside(&key);
        assert_eq!(path, dir.path().join("master.key.pushed.json"));
        // Nothing pushed yet: no pins.
        let mut pushed = Pushed::load(&path).unwrap();
        assert!(pushed.pins().is_empty());

        let push = |module: &str, fill: char, at| PluginManifest {
            module: module.into(),
            sha256: Some(fill.to_string().repeat(64)),
            size: Some(3),
            pushed_at: at,
        };
        pushed.note(&push("disk", 'a', 1));
        pushed.note(&push("file", 'b', 2));
        pushed.note(&push("disk", 'c', 3));
        pushed.note(&PluginManifest {
            sha256: None,
            size: None,
            ..push("file", 'd', 4)
        });
        pushed.save(&path).unwrap();
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&path).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o600);
        let again = Pushed::load(&path).unwrap();
        assert_eq!(again, pushed);
        assert_eq!(
            Value::Object(again.pins()),
            serde_json::json!({"disk": "c".repeat(64), "file": null})
        );

        std::fs::write(&path, "not json").unwrap();
        assert!(matches!(Pushed::load(&path), Err(StoreError::Invalid(_))));
    }

    #[test]
    fn a_sha256_is_64_lowercase_hex_digits() {
        assert!(is_sha256(&"0123456789abcdef".repeat(4)));
        assert!(!is_sha256(&"0123456789ABCDEF".repeat(4)));
        assert!(!is_sha256(&"a".repeat(63)));
        assert!(!is_sha256(&"g".repeat(64)));
    }
}
