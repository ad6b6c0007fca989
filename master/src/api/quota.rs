//! How many jobs each API user may start: a token bucket per user
//! (`[api] jobs_per_second`, `jobs_burst`). Every job lands in the replay
//! store of each maid it targets, which holds its ids for minutes and then
//! refuses new jobs `busy`; without a bound, one user could fill it with a
//! few requests and keep every other user's jobs out. A request that would
//! overdraw its user's bucket runs nothing and is 429 with `Retry-After`.
//!
//! What this bounds, per user: `jobs_burst + jobs_per_second × T` jobs in
//! any `T` seconds. `maid run`'s room does not rest on it: the maids count
//! the jids of each signing key apart, and the API has a key of its own
//! (`[api] key`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

/// Everyone's buckets.
pub struct Quota {
    /// Jobs a second each bucket refills by.
    rate: f64,
    /// What a full bucket holds.
    burst: f64,
    /// User → (jobs they may start now, when that was reckoned). Only
    /// users who logged in have one, so the table is as small as
    /// `[api.users]`.
    buckets: Mutex<HashMap<String, (f64, Instant)>>,
}

impl Quota {
    pub fn new(rate: f64, burst: u32) -> Quota {
        Quota {
            rate,
            burst: f64::from(burst),
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Take `jobs` from each user's bucket, all or none: `Err` with the
    /// seconds until the first user short of them has enough.
    pub fn take(&self, jobs: &HashMap<&str, u32>) -> Result<(), u64> {
        self.take_at(jobs, Instant::now())
    }

    fn take_at(&self, jobs: &HashMap<&str, u32>, now: Instant) -> Result<(), u64> {
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let mut wait: f64 = 0.0;
        for (user, n) in jobs {
            let have = match buckets.get(*user) {
                Some((tokens, at)) => {
                    (tokens + now.duration_since(*at).as_secs_f64() * self.rate).min(self.burst)
                }
                None => self.burst,
            };
            let short = f64::from(*n) - have;
            if short > 0.0 {
                wait = wait.max(short / self.rate);
            }
        }
        if wait > 0.0 {
            return Err((wait.ceil() as u64).max(1));
        }
        for (user, n) in jobs {
            let have = buckets.get(*user).map_or(self.burst, |(tokens, at)| {
                (tokens + now.duration_since(*at).as_secs_f64() * self.rate).min(self.burst)
            });
            buckets.insert((*user).to_string(), (have - f64::from(*n), now));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_bucket_allows_its_burst_then_its_rate() {
        let quota = Quota::new(2.0, 4);
        let t0 = Instant::now();
        let one = |user: &'static str, n: u32| HashMap::from([(user, n)]);
        assert_eq!(quota.take_at(&one("ann", 3), t0), Ok(()));
        // One left: two more are short by one, which takes half a second.
        assert_eq!(quota.take_at(&one("ann", 2), t0), Err(1));
        // Nothing was taken by the refusal.
        assert_eq!(quota.take_at(&one("ann", 1), t0), Ok(()));
        assert_eq!(quota.take_at(&one("ann", 1), t0), Err(1));
        // Another user has a bucket of their own.
        assert_eq!(quota.take_at(&one("bob", 4), t0), Ok(()));
        // Refilled at two a second, never past the burst.
        let later = t0 + Duration::from_secs(1);
        assert_eq!(quota.take_at(&one("ann", 2), later), Ok(()));
        assert_eq!(quota.take_at(&one("ann", 1), later), Err(1));
        let much_later = t0 + Duration::from_secs(3600);
        assert_eq!(quota.take_at(&one("ann", 5), much_later), Err(1));
        assert_eq!(quota.take_at(&one("ann", 4), much_later), Ok(()));
        // Several users at once: all or none.
        let both = HashMap::from([("ann", 1), ("cy", 1)]);
        assert_eq!(quota.take_at(&both, much_later), Err(1));
        assert_eq!(quota.take_at(&one("cy", 4), much_later), Ok(()));
        let slow = Quota::new(0.1, 1);
        assert_eq!(slow.take_at(&one("ann", 1), t0), Ok(()));
        assert_eq!(slow.take_at(&one("ann", 1), t0), Err(10));
    }
}
