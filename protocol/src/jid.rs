//! Job ids and timestamps in Salt's formats.

use std::sync::atomic::{AtomicI64, Ordering};

use chrono::{DateTime, Datelike, Timelike, Utc};

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
    let (y, mo, d, h, mi, s, us) =
        fields(DateTime::from_timestamp_micros(micros).unwrap_or_else(Utc::now));
    format!("{y:04}{mo:02}{d:02}{h:02}{mi:02}{s:02}{us:06}")
}

/// A return's `_stamp`: ISO 8601 with microseconds, UTC, as Salt writes it.
pub fn stamp() -> String {
    let (y, mo, d, h, mi, s, us) = fields(Utc::now());
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{us:06}")
}

/// The fields jids and stamps are written from: year, month, day, hour,
/// minute, second, microsecond. Every job, return and audit record takes
/// one, and `format("%Y…")` parsed its pattern again each time.
fn fields(t: DateTime<Utc>) -> (i32, u32, u32, u32, u32, u32, u32) {
    let (date, time) = (t.date_naive(), t.time());
    (
        date.year(),
        date.month(),
        date.day(),
        time.hour(),
        time.minute(),
        time.second(),
        // A leap second's nanoseconds run past 10^9.
        time.nanosecond() % 1_000_000_000 / 1_000,
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn shapes() {
        let before = chrono::Utc::now().naive_utc();
        let jid = super::new_jid();
        assert_eq!(jid.len(), 20);
        assert!(jid.chars().all(|c| c.is_ascii_digit()));
        let parsed = chrono::NaiveDateTime::parse_from_str(&jid, "%Y%m%d%H%M%S%6f")
            .unwrap_or_else(|e| panic!("{jid}: {e}"));
        // A jid may be a few microseconds ahead of the clock (it steps past
        // the last one made), never behind it.
        assert!(
            parsed >= before - chrono::Duration::microseconds(1),
            "{before} {jid}"
        );
        let before = chrono::Utc::now().naive_utc();
        let stamp = super::stamp();
        assert_eq!(stamp.len(), 26);
        assert_eq!(&stamp[10..11], "T");
        let parsed = chrono::NaiveDateTime::parse_from_str(&stamp, "%Y-%m-%dT%H:%M:%S%.6f")
            .unwrap_or_else(|e| panic!("{stamp}: {e}"));
        let after = chrono::Utc::now().naive_utc();
        let floor = before - chrono::Duration::microseconds(1);
        assert!(
            floor <= parsed && parsed <= after,
            "{before} {stamp} {after}"
        );
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
