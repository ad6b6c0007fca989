//! Job ids and timestamps in Salt's formats.

use std::sync::atomic::{AtomicI64, Ordering};

use chrono::{DateTime, Utc};

/// The microsecond of the last jid this process made.
static LAST_JID: AtomicI64 = AtomicI64::new(i64::MIN);

/// A new job id, Salt style: `YYYYMMDDhhmmssffffff` (UTC, microseconds).
///
/// Unique within the process, as Salt's `gen_jid`: two jobs made in the
/// same microsecond (the API publishes many at once) get successive
/// microseconds instead of one jid, which maids would run only once.
pub fn new_jid() -> String {
    let now = Utc::now().timestamp_micros();
    let mut last = LAST_JID.load(Ordering::Relaxed);
    let micros = loop {
        let next = now.max(last.saturating_add(1));
        match LAST_JID.compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => break next,
            Err(seen) => last = seen,
        }
    };
    DateTime::from_timestamp_micros(micros)
        .unwrap_or_else(Utc::now)
        .format("%Y%m%d%H%M%S%6f")
        .to_string()
}

/// A return's `_stamp`: ISO 8601 with microseconds, UTC, as Salt writes it.
pub fn stamp() -> String {
    Utc::now().format("%Y-%m-%dT%H:%M:%S%.6f").to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn shapes() {
        let jid = super::new_jid();
        assert_eq!(jid.len(), 20);
        assert!(jid.chars().all(|c| c.is_ascii_digit()));
        let stamp = super::stamp();
        assert_eq!(stamp.len(), 26);
        assert_eq!(&stamp[10..11], "T");
    }

    #[test]
    fn jids_made_at_once_are_all_different() {
        let threads: Vec<_> = (0..4)
            .map(|_| {
                std::thread::spawn(|| (0..10_000).map(|_| super::new_jid()).collect::<Vec<_>>())
            })
            .collect();
        let mut all: Vec<String> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        let n = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), n);
        assert!(all.iter().all(|j| j.len() == 20));
    }
}
