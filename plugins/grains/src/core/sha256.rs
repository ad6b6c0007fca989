//! Salt's `server_id` grain, from the SHA-256 of the minion id.

use sha2::{Digest, Sha256};

/// Salt's `get_server_id`: the SHA-256 of the minion id, as a number,
/// modulo 2^31.
pub(crate) fn server_id(id: &str) -> u32 {
    let d = Sha256::digest(id.as_bytes());
    u32::from_be_bytes([d[28], d[29], d[30], d[31]]) & 0x7fff_ffff
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_id_is_salts() {
        // What Salt 3008.4 reports for minion `sc1`.
        assert_eq!(server_id("sc1"), 210_726_045);
    }
}
