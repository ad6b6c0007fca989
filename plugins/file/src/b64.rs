//! Standard base64 (RFC 4648, padded), decoding only: how a caller hands
//! this plugin bytes that JSON cannot carry as text (`maid_source`).

/// The bytes `text` encodes; `None` when it is not base64.
pub(crate) fn decode(text: &str) -> Option<Vec<u8>> {
    fn value(c: u8) -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    }
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    for (n, chunk) in bytes.chunks(4).enumerate() {
        let last = n + 1 == bytes.len() / 4;
        let pad = chunk.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && !last) {
            return None;
        }
        let mut acc = 0u32;
        for &c in &chunk[..4 - pad] {
            acc = (acc << 6) | value(c)?;
        }
        acc <<= 6 * pad as u32;
        let three = [(acc >> 16) as u8, (acc >> 8) as u8, acc as u8];
        out.extend_from_slice(&three[..3 - pad]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn decodes_padded_base64() {
        assert_eq!(super::decode("aGVsbG8K").as_deref(), Some(&b"hello\n"[..]));
        assert_eq!(super::decode("aGk=").as_deref(), Some(&b"hi"[..]));
        assert_eq!(super::decode("YQ==").as_deref(), Some(&b"a"[..]));
        assert_eq!(super::decode("").as_deref(), Some(&b""[..]));
        assert_eq!(super::decode("a"), None);
        assert_eq!(super::decode("YQ=a"), None);
    }
}
