//! Salt's jids as text: `salt.utils.jid.jid_to_time`, which the master's
//! job runners and the state module's `state.running` both print.

/// Salt's `jid_to_time`: `2026, Nov 24 23:04:17.123456`, or empty for a
/// jid that is not Salt's 20 digits.
pub fn jid_to_time(jid: &str) -> String {
    const MONTHS: [&str; 13] = [
        "", "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let b = jid.as_bytes();
    let shaped = b.len() == 20 || (b.len() > 21 && b[20] == b'_');
    if !shaped || !jid.is_char_boundary(20) || !jid[..20].bytes().all(|c| c.is_ascii_digit()) {
        return String::new();
    }
    let month = jid[4..6].parse::<usize>().ok().and_then(|m| MONTHS.get(m));
    let Some(month) = month.filter(|m| !m.is_empty()) else {
        return String::new();
    };
    format!(
        "{}, {month} {} {}:{}:{}.{}",
        &jid[..4],
        &jid[6..8],
        &jid[8..10],
        &jid[10..12],
        &jid[12..14],
        &jid[14..20]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_time_is_salts() {
        assert_eq!(
            jid_to_time("20261124230417123456"),
            "2026, Nov 24 23:04:17.123456"
        );
        assert_eq!(
            jid_to_time("20260101000000000001_3"),
            "2026, Jan 01 00:00:00.000001"
        );
        for odd in [
            "",
            "123",
            "2026112423041712345x",
            "20261324230417123456",
            "202611242304171234567",
        ] {
            assert_eq!(jid_to_time(odd), "", "{odd}");
        }
    }
}
