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
use argon2::password_hash::{PasswordHash, PasswordHasher, SaltString};
use sha2::Digest;

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

/// Whether `password` matches the PHC string `phc`, computed in
/// `memory`, the checking thread's own Argon2 working memory: kept from
/// one check to the next, so a check allocates nothing and a flood of
/// logins leaves no freed blocks behind for the allocator to hold.
fn verify(password: &str, phc: &str, memory: &mut Vec<argon2::Block>) -> bool {
    let Ok(hash) = PasswordHash::new(phc) else {
        return false;
    };
    let (Some(salt), Some(expected)) = (hash.salt, hash.hash) else {
        return false;
    };
    let Ok(algorithm) = argon2::Algorithm::new(hash.algorithm.as_str()) else {
        return false;
    };
    let version = match hash.version.map(argon2::Version::try_from) {
        None => argon2::Version::default(),
        Some(Ok(v)) => v,
        Some(Err(_)) => return false,
    };
    let Ok(params) = argon2::Params::try_from(&hash) else {
        return false;
    };
    let mut salt_buf = [0u8; 64];
    let Ok(salt) = salt.decode_b64(&mut salt_buf) else {
        return false;
    };
    memory.resize(params.block_count(), argon2::Block::default());
    let mut out = vec![0u8; expected.len()];
    Argon2::new(algorithm, version, params)
        .hash_password_into_with_memory(password.as_bytes(), salt, &mut out, &mut memory[..])
        .is_ok()
        && argon2::password_hash::Output::new(&out).is_ok_and(|o| o == expected)
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

/// Failed logins allowed per user name within [`WINDOW`] before its
/// logins are refused (429) until the window ends.
pub const USER_FAILURES: u32 = 5;
/// Failed logins allowed per client address within [`WINDOW`].
pub const ADDRESS_FAILURES: u32 = 20;
/// How long failures are remembered.
pub const WINDOW: Duration = Duration::from_secs(60);
/// Logins that may wait for a password check beyond those being checked;
/// past it a login is refused at once (429) instead of queueing.
const WAITING: usize = 64;
/// Failure counters kept at most; past it the expired ones go, and if
/// none has, a login from a new name or address is refused (429).
const COUNTERS: usize = 10_000;

/// Why a login was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// Wrong user name or password.
    Wrong,
    /// Too many failures, or too many logins at once: retry after this many
    /// seconds.
    Throttled(u64),
}

/// Failures per key (user name or address) within a window.
#[derive(Default)]
struct Failures(HashMap<String, (u32, Instant)>);

impl Failures {
    /// Seconds until `key` may try again, when it has used up `limit`.
    fn blocked(&mut self, key: &str, limit: u32, now: Instant) -> Option<u64> {
        match self.0.get(key) {
            Some((n, since)) if now.duration_since(*since) < WINDOW => {
                (*n >= limit).then(|| (WINDOW - now.duration_since(*since)).as_secs().max(1))
            }
            Some(_) => {
                self.0.remove(key);
                None
            }
            None => None,
        }
    }

    /// Count a failure of `key`; `false` when there is no room to.
    fn fail(&mut self, key: &str, now: Instant) -> bool {
        if !self.0.contains_key(key) && self.0.len() >= COUNTERS {
            self.0
                .retain(|_, (_, since)| now.duration_since(*since) < WINDOW);
            if self.0.len() >= COUNTERS {
                return false;
            }
        }
        let entry = self.0.entry(key.to_string()).or_insert((0, now));
        if now.duration_since(entry.1) >= WINDOW {
            *entry = (0, now);
        }
        entry.0 += 1;
        true
    }
}

/// A password check: the password, the PHC string, and where the answer
/// goes.
type CheckJob = (String, String, tokio::sync::oneshot::Sender<bool>);

/// A few long-lived threads that check passwords, fed by a bounded queue.
/// Few threads, not the blocking pool's many: each Argon2 check allocates
/// ~19 MiB, and the allocator keeps freed memory per thread, so the
/// number of threads bounds the memory a flood of logins leaves behind.
struct Checker {
    jobs: std::sync::mpsc::SyncSender<CheckJob>,
}

impl Checker {
    fn new(threads: usize, queue: usize) -> Checker {
        let (jobs, rx) = std::sync::mpsc::sync_channel::<CheckJob>(queue);
        let rx = std::sync::Arc::new(Mutex::new(rx));
        for i in 0..threads {
            let rx = rx.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("maid-login-{i}"))
                .spawn(move || {
                    let mut memory = Vec::new();
                    loop {
                        let job = rx.lock().unwrap_or_else(|e| e.into_inner()).recv();
                        let Ok((password, phc, answer)) = job else {
                            return;
                        };
                        let _ = answer.send(verify(&password, &phc, &mut memory));
                    }
                });
            if let Err(e) = spawned {
                tracing::error!(cause = %e, "cannot start a password-check thread");
            }
        }
        Checker { jobs }
    }

    /// Whether `password` matches `phc`; `None` when the queue is full.
    async fn check(&self, password: String, phc: String) -> Option<bool> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.jobs.try_send((password, phc, tx)).ok()?;
        rx.await.ok()
    }
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
    /// Where passwords are checked: Argon2 takes ~19 MiB and a core's
    /// time each, so a flood of logins is bounded in memory and CPU.
    checker: Checker,
    /// Recent failures by user name and by client address.
    by_user: Mutex<Failures>,
    by_address: Mutex<Failures>,
    /// Bumped at every logout, so an open event stream checks its token
    /// at once and ends when it was the one logged out.
    logouts: tokio::sync::watch::Sender<u64>,
}

impl Auth {
    pub fn new(users: BTreeMap<String, String>, ttl: Duration) -> Result<Auth, HashError> {
        Ok(Auth {
            users,
            decoy: hash_password("decoy")?,
            ttl,
            tokens: Mutex::new(HashMap::new()),
            checker: Checker::new(
                std::thread::available_parallelism().map_or(2, |n| n.get().max(2)),
                WAITING,
            ),
            by_user: Mutex::new(Failures::default()),
            by_address: Mutex::new(Failures::default()),
            logouts: tokio::sync::watch::Sender::new(0),
        })
    }

    /// A receiver that changes at every logout (see [`Auth::check`] for
    /// whether a given token survived it).
    pub fn logouts(&self) -> tokio::sync::watch::Receiver<u64> {
        self.logouts.subscribe()
    }

    /// [`Auth::login`] from `address`, throttled: a user name or address
    /// with too many recent failures, or a login beyond those the checks
    /// can queue, is refused without checking the password.
    pub async fn login_from(
        &self,
        user: &str,
        password: &str,
        address: &str,
    ) -> Result<Session, Refused> {
        let now = Instant::now();
        // A digest, not the name: names come from anyone, at any length,
        // and the table of counters must stay small.
        let user_key = format!(
            "user:{}",
            hex::encode(&sha2::Sha256::digest(user.as_bytes())[..16])
        );
        let address_key = format!("address:{address}");
        {
            // Checked and counted at once, before the password is: an
            // attempt counts as a failure until it succeeds, so a burst of
            // concurrent guesses gets no more checks than a slow series.
            let mut by_user = self.by_user.lock().unwrap_or_else(|e| e.into_inner());
            let mut by_address = self.by_address.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(secs) = by_user
                .blocked(&user_key, USER_FAILURES, now)
                .or_else(|| by_address.blocked(&address_key, ADDRESS_FAILURES, now))
            {
                return Err(Refused::Throttled(secs));
            }
            if !(by_user.fail(&user_key, now) & by_address.fail(&address_key, now)) {
                return Err(Refused::Throttled(WINDOW.as_secs()));
            }
        }
        match self.login(user, password).await {
            Ok(session) => {
                // A success takes back what its attempt counted.
                let mut by_user = self.by_user.lock().unwrap_or_else(|e| e.into_inner());
                by_user.0.remove(&user_key);
                let mut by_address = self.by_address.lock().unwrap_or_else(|e| e.into_inner());
                if let Some((n, _)) = by_address.0.get_mut(&address_key) {
                    *n = n.saturating_sub(1);
                }
                Ok(session)
            }
            Err(refused) => Err(refused),
        }
    }

    /// Check `password` and hand out a token. Argon2 is deliberately slow,
    /// so the check runs off the async workers.
    pub async fn login(&self, user: &str, password: &str) -> Result<Session, Refused> {
        let known = self.users.get(user);
        let phc = known.unwrap_or(&self.decoy).clone();
        let ok = self
            .checker
            .check(password.to_string(), phc)
            .await
            .ok_or(Refused::Throttled(1))?;
        if !(ok && known.is_some()) {
            return Err(Refused::Wrong);
        }
        let mut raw = [0u8; 24];
        getrandom::fill(&mut raw).map_err(|_| Refused::Wrong)?;
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
        Ok(session)
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
        let removed = self
            .tokens
            .lock()
            .expect("token table poisoned")
            .remove(token);
        if removed.is_some() {
            self.logouts.send_modify(|n| *n = n.wrapping_add(1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_verify_in_the_threads_own_memory() {
        let phc = hash_password("s3cret").unwrap();
        let mut memory = Vec::new();
        assert!(verify("s3cret", &phc, &mut memory));
        assert!(!verify("s3cret!", &phc, &mut memory));
        assert!(!verify("s3cret", "not a hash", &mut memory));
        // The same answer as the argon2 crate's own check.
        use argon2::password_hash::PasswordVerifier;
        let parsed = PasswordHash::new(&phc).unwrap();
        assert!(
            Argon2::default()
                .verify_password(b"s3cret", &parsed)
                .is_ok()
        );
        assert_eq!(memory.len(), argon2::Params::default().block_count());
    }

    #[tokio::test]
    async fn login_check_logout_and_expiry() {
        let users = BTreeMap::from([("ann".to_string(), hash_password("s3cret").unwrap())]);
        let auth = Auth::new(users, Duration::from_millis(200)).unwrap();
        assert_eq!(
            auth.login("ann", "wrong").await.unwrap_err(),
            Refused::Wrong
        );
        assert_eq!(
            auth.login("bob", "s3cret").await.unwrap_err(),
            Refused::Wrong
        );
        let s = auth.login("ann", "s3cret").await.unwrap();
        assert_eq!(auth.check(&s.token).as_deref(), Some("ann"));
        auth.logout(&s.token);
        assert!(auth.check(&s.token).is_none());
        let s = auth.login("ann", "s3cret").await.unwrap();
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert!(auth.check(&s.token).is_none());
    }

    #[tokio::test]
    async fn failed_logins_are_throttled_per_user_and_per_address() {
        let users = BTreeMap::from([("ann".to_string(), hash_password("s3cret").unwrap())]);
        let auth = Auth::new(users, Duration::from_secs(60)).unwrap();
        for _ in 0..USER_FAILURES {
            assert_eq!(
                auth.login_from("ann", "wrong", "10.0.0.1")
                    .await
                    .unwrap_err(),
                Refused::Wrong
            );
        }
        // The right password no longer helps ann within the window.
        assert!(matches!(
            auth.login_from("ann", "s3cret", "10.0.0.2").await,
            Err(Refused::Throttled(s)) if (1..=60).contains(&s)
        ));
        // Another address guessing many names is stopped too.
        for i in 0..ADDRESS_FAILURES {
            let name = format!("u{i}");
            assert_eq!(
                auth.login_from(&name, "x", "10.0.0.3").await.unwrap_err(),
                Refused::Wrong
            );
        }
        assert!(matches!(
            auth.login_from("zed", "x", "10.0.0.3").await,
            Err(Refused::Throttled(_))
        ));
    }
}
