//! `pcre`: a regular expression matched as Python's `re.match` does.

use super::*;

pub(super) fn compile_regex(pattern: &str) -> Result<Regex, TargetError> {
    Regex::new(pattern).map_err(|e| TargetError::BadRegex {
        pattern: pattern.to_string(),
        reason: e.to_string(),
    })
}

/// Python's `re.match`: a match that starts at the beginning of `s` (it need
/// not reach the end). The leftmost match starts at 0 exactly when some match
/// does, so no anchoring has to be spliced into the user's pattern.
pub(super) fn py_re_match(re: &Regex, s: &str) -> bool {
    re.find(s).is_some_and(|m| m.start() == 0)
}
