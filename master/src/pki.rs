//! The master's maid keys, kept as Salt's master keeps minion keys: one
//! file per id, named by the id, in a directory per state under the pki
//! dir — `minions` (accepted), `minions_pre` (pending), `minions_rejected`
//! and `minions_denied`. Each file holds the maid's public key as its
//! registry entry carries it (base64 of the raw 32-byte Ed25519 key).
//!
//! Maids submit their keys through the registry (PROTOCOL §4); [`Pki::submit`]
//! files a submission as Salt's master does an authentication attempt: a
//! new id goes to pending, and a key that differs from the one accepted for
//! its id goes to denied — the accepted key stays, so an impostor cannot
//! replace a maid. `maid key` moves keys between the states; `maid run`,
//! `maid job`, `maid maids` and `maid api` trust replies only from accepted
//! keys.

use std::collections::BTreeMap;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::protocol::Registration;
use crate::replies::AcceptedKeys;
use crate::trust;

/// Where a key stands, in the order `salt-key -L` lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum KeyState {
    Accepted,
    Denied,
    Pending,
    Rejected,
}

impl KeyState {
    pub const ALL: [KeyState; 4] = [
        KeyState::Accepted,
        KeyState::Denied,
        KeyState::Pending,
        KeyState::Rejected,
    ];

    /// Its directory under the pki dir, and its name in Salt's JSON output.
    pub fn dir(self) -> &'static str {
        match self {
            KeyState::Accepted => "minions",
            KeyState::Denied => "minions_denied",
            KeyState::Pending => "minions_pre",
            KeyState::Rejected => "minions_rejected",
        }
    }

    /// Its name in `maid maids`.
    pub fn name(self) -> &'static str {
        match self {
            KeyState::Accepted => "accepted",
            KeyState::Denied => "denied",
            KeyState::Pending => "pending",
            KeyState::Rejected => "rejected",
        }
    }

    /// Its heading in `salt-key -L`.
    pub fn heading(self) -> &'static str {
        match self {
            KeyState::Accepted => "Accepted Keys:",
            KeyState::Denied => "Denied Keys:",
            KeyState::Pending => "Unaccepted Keys:",
            KeyState::Rejected => "Rejected Keys:",
        }
    }
}

/// Why the key store could not be used.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error("{path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    /// Salt's master answers such an id with "Request contains invalid
    /// minion id".
    #[error("invalid minion id '{}': {why}", .id.escape_debug())]
    BadId { id: String, why: &'static str },
    #[error("the key presented for {0:?} is not a base64 Ed25519 public key")]
    BadKey(String),
}

/// What became of a submitted key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Submitted {
    /// The id's key is already filed as it is, in this state.
    Known(KeyState),
    /// A new id: now pending.
    Pending,
    /// A key other than the one filed for the id: now in denied.
    Denied,
    /// Nothing filed: the id is no minion id ([`check_id`]) or the key is
    /// no key. One such registry entry is passed over (and logged), as
    /// Salt's master answers one bad authentication, so that it cannot
    /// stop every other maid's key from being filed.
    Refused,
}

/// A pki dir.
#[derive(Debug, Clone)]
pub struct Pki {
    dir: PathBuf,
}

/// The longest file name Linux allows (`NAME_MAX`): a longer id could be
/// no key file.
const MAX_ID_BYTES: usize = 255;

/// Whether `id` may be a maid id, and so a file name in the key
/// directories: stricter than Salt's `valid_id` (no `/`, `\`, NUL, and
/// inside the pki dir), because ids are also words an operator pastes
/// into `maid key` and targets. Refused: empty, too long for a file
/// name, `.`-leading (hidden, `.`, `..`), `-`-leading (an option to
/// `maid key -a`, `rm`, ...), path separators, control characters (which
/// would write on the operator's terminal) and `*?[]{},` (which `maid key`
/// and glob targets read as patterns: accepting `*` would accept all).
pub fn check_id(id: &str) -> Result<(), PkiError> {
    let why = if id.is_empty() {
        "it is empty"
    } else if id.len() > MAX_ID_BYTES.min(crate::protocol::MAX_ADDRESS_BYTES) {
        "it is longer than a file name may be"
    } else if id.contains(['/', '\\']) {
        "it holds a path separator"
    } else if id.chars().any(char::is_control) {
        "it holds a control character"
    } else if id.starts_with('.') {
        "it begins with '.'"
    } else if id.starts_with('-') {
        "it begins with '-', as an option does"
    } else if id.contains(['*', '?', '[', ']', '{', '}', ',']) {
        "it holds a character that maid key and targets read as a pattern"
    } else {
        return Ok(());
    };
    Err(PkiError::BadId { id: id.into(), why })
}

/// Salt's fingerprint of a key: the SHA-256 of its raw bytes as
/// colon-separated hex pairs (`salt.utils.crypt.pem_finger`'s form).
pub fn fingerprint(key_text: &str) -> String {
    let raw = trust::decode_verifying_key(key_text)
        .map(|k| k.to_bytes().to_vec())
        .unwrap_or_else(|_| key_text.trim().as_bytes().to_vec());
    let digest = Sha256::digest(raw);
    digest
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

impl Pki {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn io(path: &Path) -> impl Fn(std::io::Error) -> PkiError + '_ {
        move |error| PkiError::Io {
            path: path.to_path_buf(),
            error,
        }
    }

    fn path(&self, state: KeyState, id: &str) -> PathBuf {
        self.dir.join(state.dir()).join(id)
    }

    /// The ids filed in `state`, sorted.
    pub fn ids(&self, state: KeyState) -> Result<Vec<String>, PkiError> {
        let dir = self.dir.join(state.dir());
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Self::io(&dir)(e)),
        };
        let mut ids = Vec::new();
        for entry in entries {
            let entry = entry.map_err(Self::io(&dir))?;
            if let Some(name) = entry.file_name().to_str()
                && check_id(name).is_ok()
                && entry.file_type().is_ok_and(|t| t.is_file())
            {
                ids.push(name.to_string());
            }
        }
        ids.sort();
        Ok(ids)
    }

    /// Every state's ids.
    pub fn list(&self) -> Result<BTreeMap<KeyState, Vec<String>>, PkiError> {
        KeyState::ALL
            .into_iter()
            .map(|s| Ok((s, self.ids(s)?)))
            .collect()
    }

    /// The key text filed for `id` in `state`.
    pub fn key(&self, state: KeyState, id: &str) -> Result<Option<String>, PkiError> {
        check_id(id)?;
        let path = self.path(state, id);
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(Some(text.trim().to_string())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Self::io(&path)(e)),
        }
    }

    /// The accepted keys, by maid id. A file that holds no key is left out
    /// (and logged): it accepts nobody.
    pub fn accepted(&self) -> Result<AcceptedKeys, PkiError> {
        let mut out = AcceptedKeys::new();
        for id in self.ids(KeyState::Accepted)? {
            let Some(text) = self.key(KeyState::Accepted, &id)? else {
                continue;
            };
            match trust::decode_verifying_key(&text) {
                Ok(key) => {
                    out.insert(id, key);
                }
                Err(e) => tracing::warn!(%id, cause = %e, "accepted key file holds no key"),
            }
        }
        Ok(out)
    }

    fn write(&self, state: KeyState, id: &str, key: &str) -> Result<(), PkiError> {
        check_id(id)?;
        let dir = self.dir.join(state.dir());
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(Self::io(&dir))?;
        let path = dir.join(id);
        crate::fsutil::replace_private(&path, [key]).map_err(Self::io(&path))
    }

    fn remove(&self, state: KeyState, id: &str) -> Result<bool, PkiError> {
        check_id(id)?;
        let path = self.path(state, id);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(Self::io(&path)(e)),
        }
    }

    /// File the key `key` that maid `id` presents, as Salt's master files
    /// an authentication attempt (`salt/channel/server.py`, `_auth`): a
    /// rejected id stays rejected whatever it presents; a key other than
    /// the one accepted or pending for the id is denied (the first denied
    /// key is kept) and the filed one stays; a new id — or one only ever
    /// denied — goes to pending.
    pub fn submit(&self, id: &str, key: &str) -> Result<Submitted, PkiError> {
        let key = key.trim();
        let refused = match check_id(id) {
            Err(e) => Some(e),
            Ok(()) if trust::decode_verifying_key(key).is_err() || key.contains('\n') => {
                Some(PkiError::BadKey(id.into()))
            }
            Ok(()) => None,
        };
        if let Some(e) = refused {
            tracing::warn!(cause = %e, "a key submission refused: nothing filed");
            return Ok(Submitted::Refused);
        }
        if self.key(KeyState::Rejected, id)?.is_some() {
            return Ok(Submitted::Known(KeyState::Rejected));
        }
        for state in [KeyState::Accepted, KeyState::Pending] {
            match self.key(state, id)? {
                Some(filed) if filed == key => return Ok(Submitted::Known(state)),
                Some(_) => {
                    if self.key(KeyState::Denied, id)?.is_none() {
                        self.write(KeyState::Denied, id, key)?;
                    }
                    tracing::warn!(
                        %id,
                        "a maid presented a key other than the one filed for it: denied"
                    );
                    return Ok(Submitted::Denied);
                }
                None => {}
            }
        }
        self.write(KeyState::Pending, id, key)?;
        Ok(Submitted::Pending)
    }

    /// File every key the registry carries ([`Pki::submit`]).
    pub fn submit_registry<'a>(
        &self,
        registrations: impl IntoIterator<Item = (&'a String, &'a Registration)>,
    ) -> Result<(), PkiError> {
        for (id, reg) in registrations {
            if let Some(key) = &reg.pubkey
                && reg.id == *id
                && trust::decode_verifying_key(key).is_ok()
            {
                self.submit(id, key)?;
            }
        }
        Ok(())
    }

    /// Move `id`'s key from `from` to `to`; the id leaves every other
    /// state but denied, as Salt keeps them. `false` when it is not in
    /// `from`.
    pub fn transfer(&self, id: &str, from: KeyState, to: KeyState) -> Result<bool, PkiError> {
        let Some(key) = self.key(from, id)? else {
            return Ok(false);
        };
        self.write(to, id, &key)?;
        for state in KeyState::ALL {
            if state != to && (state != KeyState::Denied || from == KeyState::Denied) {
                self.remove(state, id)?;
            }
        }
        Ok(true)
    }

    /// File `key` as `id`'s accepted key, as the wheel's `key.gen_accept`
    /// does: not when the id has a key in any state already, unless
    /// `force`, which then replaces them all. `false` when nothing was
    /// filed.
    pub fn accept_new(&self, id: &str, key: &str, force: bool) -> Result<bool, PkiError> {
        check_id(id)?;
        let mut known = false;
        for state in KeyState::ALL {
            known |= self.key(state, id)?.is_some();
        }
        if known && !force {
            return Ok(false);
        }
        self.write(KeyState::Accepted, id, key)?;
        for state in KeyState::ALL {
            if state != KeyState::Accepted {
                self.remove(state, id)?;
            }
        }
        Ok(true)
    }

    /// Delete `id`'s key from `state`. `false` when it was not there.
    pub fn delete(&self, state: KeyState, id: &str) -> Result<bool, PkiError> {
        self.remove(state, id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> String {
        trust::encode_verifying(&trust::generate().unwrap().verifying_key())
    }

    #[test]
    fn submissions_are_filed_as_salts_master_files_them() {
        let dir = tempfile::tempdir().unwrap();
        let pki = Pki::new(dir.path());
        let (k1, k2) = (key(), key());
        assert_eq!(pki.submit("m1", &k1).unwrap(), Submitted::Pending);
        assert_eq!(
            pki.submit("m1", &k1).unwrap(),
            Submitted::Known(KeyState::Pending)
        );
        assert!(pki.accepted().unwrap().is_empty());
        assert!(
            pki.transfer("m1", KeyState::Pending, KeyState::Accepted)
                .unwrap()
        );
        assert_eq!(pki.accepted().unwrap().len(), 1);
        // Another key for an accepted id is denied; the accepted one stays,
        // and so does the first key denied.
        assert_eq!(pki.submit("m1", &k2).unwrap(), Submitted::Denied);
        assert_eq!(pki.submit("m1", &key()).unwrap(), Submitted::Denied);
        assert_eq!(pki.key(KeyState::Accepted, "m1").unwrap(), Some(k1.clone()));
        assert_eq!(pki.key(KeyState::Denied, "m1").unwrap(), Some(k2.clone()));
        assert_eq!(pki.ids(KeyState::Denied).unwrap(), ["m1"]);
        // Accepting the denied key replaces the accepted one.
        assert!(
            pki.transfer("m1", KeyState::Denied, KeyState::Accepted)
                .unwrap()
        );
        assert_eq!(pki.key(KeyState::Accepted, "m1").unwrap(), Some(k2));
        assert!(pki.ids(KeyState::Denied).unwrap().is_empty());
        // A rejected id stays rejected, whatever it presents.
        assert_eq!(pki.submit("m2", &k1).unwrap(), Submitted::Pending);
        assert!(
            pki.transfer("m2", KeyState::Pending, KeyState::Rejected)
                .unwrap()
        );
        assert_eq!(
            pki.submit("m2", &key()).unwrap(),
            Submitted::Known(KeyState::Rejected)
        );
        assert!(pki.ids(KeyState::Pending).unwrap().is_empty());
        // Ids that are no file names, or would be options or patterns on
        // an operator's command line, are refused and nothing is filed.
        let long = "m".repeat(256);
        for bad in [
            "",
            "..",
            ".hidden",
            "a/b",
            "../x",
            "a\0b",
            "a\\b",
            "*",
            "web[1]",
            "a,b",
            "-A",
            "-rf",
            "a\nb",
            "\u{1b}[31m",
            &long,
        ] {
            assert!(check_id(bad).is_err(), "{bad:?}");
            assert_eq!(pki.submit(bad, &k1).unwrap(), Submitted::Refused, "{bad:?}");
        }
        assert_eq!(pki.submit("m3", "not a key").unwrap(), Submitted::Refused);
        assert!(pki.ids(KeyState::Pending).unwrap().is_empty());
        for good in ["web1", "db-1.example.com", "a_b", "m:1", "x@y"] {
            assert!(check_id(good).is_ok(), "{good:?}");
        }
        assert_eq!(
            check_id("../x").unwrap_err().to_string(),
            "invalid minion id '../x': it holds a path separator"
        );
    }

    #[test]
    fn fingerprints_are_colon_separated_sha256() {
        let k = key();
        let f = fingerprint(&k);
        assert_eq!(f.len(), 32 * 3 - 1);
        assert_eq!(f.split(':').count(), 32);
        assert_eq!(f, fingerprint(&format!("{k}\n")));
    }
}
