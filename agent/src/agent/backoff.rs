//! The agent's one backoff: waits that double from a first to a most, for
//! a reply retried across reconnects and for reconnecting itself. The
//! reconnect's waits are jittered (± 25 %), so a fleet that lost Redis
//! together does not come back in lockstep.

use std::time::Duration;

/// Doubling waits, from `first` to at most `most`.
#[derive(Debug, Clone)]
pub(super) struct Backoff {
    first: Duration,
    next: Duration,
    most: Duration,
    jitter: bool,
}

impl Backoff {
    pub(super) fn new(first: Duration, most: Duration) -> Self {
        Self {
            first,
            next: first,
            most,
            jitter: false,
        }
    }

    /// Each wait ± 25 %.
    pub(super) fn jittered(mut self) -> Self {
        self.jitter = true;
        self
    }

    /// Back to the first wait (the thing waited for worked).
    pub(super) fn reset(&mut self) {
        self.next = self.first;
    }

    /// The next wait, and the one after it doubled.
    fn step(&mut self) -> Duration {
        let wait = self.next;
        self.next = (self.next * 2).min(self.most);
        if self.jitter { jitter(wait) } else { wait }
    }

    /// Sleep the next wait.
    pub(super) async fn wait(&mut self) {
        tokio::time::sleep(self.step()).await;
    }
}

/// `d` ± 25 %.
fn jitter(d: Duration) -> Duration {
    let mut b = [0u8; 2];
    let r = getrandom::fill(&mut b)
        .map(|()| u16::from_le_bytes(b))
        .unwrap_or(0);
    let factor = 0.75 + 0.5 * (f64::from(r) / f64::from(u16::MAX));
    d.mul_f64(factor)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn waits_double_up_to_the_most_and_start_again_on_reset() {
        let mut b = Backoff::new(50 * MS, 300 * MS);
        let waits: Vec<_> = (0..5).map(|_| b.step()).collect();
        assert_eq!(waits, [50 * MS, 100 * MS, 200 * MS, 300 * MS, 300 * MS]);
        b.reset();
        assert_eq!(b.step(), 50 * MS);
    }

    #[test]
    fn jittered_waits_stay_within_a_quarter() {
        let mut b = Backoff::new(400 * MS, 400 * MS).jittered();
        for _ in 0..200 {
            let w = b.step();
            assert!((300 * MS..=500 * MS).contains(&w), "{w:?}");
        }
    }
}
