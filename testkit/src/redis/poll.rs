//! Waiting for a server or a setup to be ready: polls with short sleeps,
//! up to a deadline.

use std::thread;
use std::time::{Duration, Instant};

/// How long a sentinel setup or a cluster may take to become ready.
pub(super) const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// Pause between two polls.
const POLL: Duration = Duration::from_millis(100);

/// Polls `check` every [`POLL`] until it returns `Ok`, or gives up after
/// `timeout` and returns the last error.
pub(super) fn poll_until<T>(
    timeout: Duration,
    mut check: impl FnMut() -> Result<T, String>,
) -> Result<T, String> {
    let deadline = Instant::now() + timeout;
    loop {
        let err = match check() {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        if Instant::now() >= deadline {
            return Err(err);
        }
        thread::sleep(POLL);
    }
}
