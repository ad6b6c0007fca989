//! `list`: a comma-separated list of minion ids, or an array of them.

/// `list_match.match` on a string: the id is one of the comma-separated items
/// (maid also trims whitespace around each item, so `web1, web2` works).
pub(super) fn list_match(tgt: &str, id: &str) -> bool {
    tgt.split(',').any(|item| item.trim() == id)
}
