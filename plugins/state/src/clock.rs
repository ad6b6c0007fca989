//! The times Salt puts in each state's return: `start_time` (the local
//! time of day, as `datetime.time.isoformat()`) and `duration` (ms).

use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// `HH:MM:SS.ffffff` now (UTC: the sandbox has no time zone).
pub fn now() -> String {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let secs = d.as_secs() % 86_400;
    format!(
        "{:02}:{:02}:{:02}.{:06}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        d.subsec_micros()
    )
}

/// A state's start.
pub struct Started {
    at: String,
    instant: Instant,
}

impl Started {
    pub fn now() -> Self {
        Self {
            at: now(),
            instant: Instant::now(),
        }
    }

    /// `(start_time, duration in ms)`.
    pub fn finish(self) -> (String, f64) {
        let us = self.instant.elapsed().as_micros() as f64;
        (self.at, us / 1000.0)
    }
}
