//! The maid's own key (PROTOCOL §4): made at first start in `state_dir`
//! (`minion.key`, mode 0600, beside `minion.pub`), registered as `pubkey`,
//! and used to sign every ping, return and reject (§3.4), so a master that
//! accepted it can tell this maid's answers from anyone else's.

use std::path::Path;

use ed25519_dalek::SigningKey;

use crate::trust::{self, KeyError};

/// The private key's file name in `state_dir`, as Salt's `minion.pem`.
pub const KEY_FILE: &str = "minion.key";
/// The public key's file name in `state_dir`, as Salt's `minion.pub`.
pub const PUB_FILE: &str = "minion.pub";

/// The lock file's name in `state_dir`: held while a maid runs.
pub const LOCK_FILE: &str = "maid.lock";

/// Why a `state_dir` cannot be used by this maid.
#[derive(Debug, thiserror::Error)]
pub enum StateDirError {
    #[error("state_dir {0}: {1}")]
    Io(std::path::PathBuf, std::io::Error),
    #[error(
        "state_dir {0} is in use by another running maid (it holds {LOCK_FILE}); \
         each maid needs a state_dir of its own"
    )]
    InUse(std::path::PathBuf),
}

/// Claim `state_dir` for this maid until the returned file is dropped.
/// A `state_dir` holds one maid's key and replay memory: two maids on one
/// would race to make the key and forget each other's jids, so a second
/// is refused with a clear error rather than left to fail later.
pub fn lock_state_dir(state_dir: &Path) -> Result<std::fs::File, StateDirError> {
    let io = |e| StateDirError::Io(state_dir.to_path_buf(), e);
    std::fs::create_dir_all(state_dir).map_err(io)?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(state_dir.join(LOCK_FILE))
        .map_err(io)?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => {
            Err(StateDirError::InUse(state_dir.to_path_buf()))
        }
        Err(std::fs::TryLockError::Error(e)) => Err(io(e)),
    }
}

/// The maid's key in `state_dir`, made (and its public half written) when
/// there is none yet. A key file that exists but does not read is an
/// error, never silently replaced: the master knows this maid by its key.
pub fn load_or_create(state_dir: &Path) -> Result<SigningKey, KeyError> {
    let path = state_dir.join(KEY_FILE);
    let io = |error| KeyError::Io {
        path: path.clone(),
        error,
    };
    match std::fs::metadata(&path) {
        Ok(_) => return trust::read_signing_key(&path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(e)),
    }
    std::fs::create_dir_all(state_dir).map_err(io)?;
    let key = trust::generate()?;
    // Written whole and private, and never over a key that appeared
    // meanwhile (another start on the same state_dir).
    let text = trust::encode_signing(&key);
    crate::fsutil::staged_in(state_dir, |w| writeln!(w, "{text}"))
        .map_err(io)?
        .persist_noclobber(&path)
        .map_err(|e| io(e.error))?;
    let public = state_dir.join(PUB_FILE);
    std::fs::write(
        &public,
        format!("{}\n", trust::encode_verifying(&key.verifying_key())),
    )
    .map_err(|error| KeyError::Io {
        path: public,
        error,
    })?;
    tracing::info!(
        kid = %trust::key_id(&key.verifying_key()),
        path = %path.display(),
        "made this maid's key"
    );
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_key_is_made_once_private_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let key = load_or_create(&state).unwrap();
        let mode = std::fs::metadata(state.join(KEY_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let public = std::fs::read_to_string(state.join(PUB_FILE)).unwrap();
        assert_eq!(public.trim(), trust::encode_verifying(&key.verifying_key()));
        // The next start reads the same key.
        assert_eq!(load_or_create(&state).unwrap().to_bytes(), key.to_bytes());
        // A damaged key file is an error, not a new identity.
        std::fs::write(state.join(KEY_FILE), "garbage").unwrap();
        assert!(load_or_create(&state).is_err());
    }
}
