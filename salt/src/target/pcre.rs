//! `pcre`: a regular expression matched as Python's `re.match` does.

use super::*;

pub(super) fn compile_regex(pattern: &str) -> Result<PyRegex, TargetError> {
    PyRegex::new(pattern).map_err(|reason| TargetError::BadRegex {
        pattern: pattern.to_string(),
        reason: reason.to_string(),
    })
}

/// Python's `re.match`: a match that starts at the beginning of `s`.
pub(super) fn py_re_match(re: &PyRegex, s: &str) -> bool {
    re.is_match_at_start(s)
}
