//! `list`: a comma-separated list of minion ids, or an array of them.

/// `list_match.match` on a string, exactly: the id between commas, at
/// either end of the list, or the whole of it. Nothing is trimmed, so
/// `web1, web2` names `web1` and ` web2`; `maid run -L` (as `salt -L`)
/// removes the spaces before it sends such a list.
pub(super) fn list_match(tgt: &str, id: &str) -> bool {
    tgt.contains(&format!(",{id},"))
        || tgt.starts_with(&format!("{id},"))
        || tgt.ends_with(&format!(",{id}"))
        || tgt == id
}
