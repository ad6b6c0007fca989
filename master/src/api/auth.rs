//! Logins and tokens, as salt-api's `/login`: the operator lists users with
//! argon2 password hashes in `[api.users]`; a good login gets a random
//! token that every other request sends as `X-Auth-Token` until it expires.
//!
//! Tokens live in memory only: restarting the API logs everyone out, which
//! is what salt-api does with its default token store too.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};

/// Why a password could not be hashed.
#[derive(Debug, thiserror::Error)]
pub enum HashError {
    #[error("no randomness for the salt: {error}")]
    Random { error: getrandom::Error },
    #[error("hashing failed: {error}")]
    Hash { error: argon2::password_hash::Error },
}

/// The argon2id PHC string of `password` (`$argon2id$v=19$...`), with a
/// fresh random salt: what `[api.users]` stores.
pub fn hash_password(password: &str) -> Result<String, HashError> {
    let mut salt = [0u8; 16];
    getrandom::fill(&mut salt).map_err(|error| HashError::Random { error })?;
    let salt = SaltString::encode_b64(&salt).map_err(|error| HashError::Hash { error })?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|error| HashError::Hash { error })
}

fn verify(password: &str, phc: &str) -> bool {
    PasswordHash::new(phc).is_ok_and(|hash| {
        Argon2::default()
            .verify_password(password.as_bytes(), &hash)
            .is_ok()
    })
}

/// A token handed out by a login.
#[derive(Debug, Clone)]
pub struct Session {
    pub token: String,
    pub user: String,
    /// Unix time (seconds) of the login and of the expiry, as salt-api
    /// reports them.
    pub start: f64,
    pub expire: f64,
    /// When the token stops working, on the monotonic clock (immune to
    /// wall-clock jumps).
    deadline: Instant,
}

/// The users who may log in and the tokens they hold.
pub struct Auth {
    /// User name → PHC string.
    users: BTreeMap<String, String>,
    /// A hash checked when the user is unknown, so that a wrong user name
    /// takes as long to refuse as a wrong password and names cannot be
    /// probed by timing.
    decoy: String,
    ttl: Duration,
    tokens: Mutex<HashMap<String, Session>>,
}

impl Auth {
    pub fn new(users: BTreeMap<String, String>, ttl: Duration) -> Result<Auth, HashError> {
        Ok(Auth {
            users,
            decoy: hash_password("decoy")?,
            ttl,
            tokens: Mutex::new(HashMap::new()),
        })
    }

    /// Check `password` and hand out a token. Argon2 is deliberately slow,
    /// so the check runs off the async workers.
    pub async fn login(&self, user: &str, password: &str) -> Option<Session> {
        let known = self.users.get(user);
        let phc = known.unwrap_or(&self.decoy).clone();
        let password = password.to_string();
        let ok = tokio::task::spawn_blocking(move || verify(&password, &phc))
            .await
            .unwrap_or(false);
        if !(ok && known.is_some()) {
            return None;
        }
        let mut raw = [0u8; 24];
        getrandom::fill(&mut raw).ok()?;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64();
        let session = Session {
            token: hex::encode(raw),
            user: user.to_string(),
            start: now,
            expire: now + self.ttl.as_secs_f64(),
            deadline: Instant::now() + self.ttl,
        };
        let mut tokens = self.tokens.lock().expect("token table poisoned");
        // Expired tokens go at each login, so the table stays as small as
        // the number of live sessions.
        let now = Instant::now();
        tokens.retain(|_, s| s.deadline > now);
        tokens.insert(session.token.clone(), session.clone());
        Some(session)
    }

    /// The user `token` belongs to, while it is valid.
    pub fn check(&self, token: &str) -> Option<String> {
        let mut tokens = self.tokens.lock().expect("token table poisoned");
        match tokens.get(token) {
            Some(s) if s.deadline > Instant::now() => Some(s.user.clone()),
            Some(_) => {
                tokens.remove(token);
                None
            }
            None => None,
        }
    }

    /// Forget `token` (`/logout`).
    pub fn logout(&self, token: &str) {
        self.tokens
            .lock()
            .expect("token table poisoned")
            .remove(token);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn login_check_logout_and_expiry() {
        let users = BTreeMap::from([("ann".to_string(), hash_password("s3cret").unwrap())]);
        let auth = Auth::new(users, Duration::from_millis(200)).unwrap();
        assert!(auth.login("ann", "wrong").await.is_none());
        assert!(auth.login("bob", "s3cret").await.is_none());
        let s = auth.login("ann", "s3cret").await.unwrap();
        assert_eq!(auth.check(&s.token).as_deref(), Some("ann"));
        auth.logout(&s.token);
        assert!(auth.check(&s.token).is_none());
        let s = auth.login("ann", "s3cret").await.unwrap();
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert!(auth.check(&s.token).is_none());
    }
}
