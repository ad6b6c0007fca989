//! `grain` and `grain_pcre`: `key:pattern` against the minion's grains,
//! traversing nested keys as Salt's `traverse_dict_and_list` does.

use super::*;

/// `grain_match.match` / `grain_pcre_match.match`: no delimiter, no match.
pub(super) fn grain_match(
    tgt: &str,
    delimiter: &str,
    regex: bool,
    grains: &Map<String, Value>,
) -> Result<bool, TargetError> {
    if !tgt.contains(delimiter) {
        return Ok(false);
    }
    GrainMatcher::new(regex).subdict_match(grains, tgt, delimiter)
}

/// `salt.utils.data.subdict_match` with either glob or regex matching of the
/// final component. Patterns are compiled once per distinct string.
pub(super) struct GrainMatcher {
    regex: bool,
    compiled: HashMap<String, Pattern>,
}

/// A grain pattern compiled for [`GrainMatcher`].
pub(super) enum Pattern {
    Glob(Glob),
    /// Matched as Python's `re.match`.
    Re(PyRegex),
    /// A regex that does not compile: Salt logs it and matches nothing.
    Refused,
}

impl GrainMatcher {
    pub(super) fn new(regex: bool) -> Self {
        Self {
            regex,
            compiled: HashMap::new(),
        }
    }

    /// Try every split of `expr` into key path and pattern, deepest key
    /// first: `a:b:c` is `a` → `b` matched against `c`, then `a` matched
    /// against `b:c`.
    pub(super) fn subdict_match(
        &mut self,
        data: &Map<String, Value>,
        expr: &str,
        delimiter: &str,
    ) -> Result<bool, TargetError> {
        let splits: Vec<&str> = expr.split(delimiter).collect();
        for idx in (1..splits.len()).rev() {
            let key = splits[..idx].join(delimiter);
            if key == "*" {
                // Everything under the top level: match the whole
                // expression (`*:value`) against the whole of `data`.
                if !data.is_empty() && self.dict_match(data, expr)? {
                    return Ok(true);
                }
                continue;
            }
            let pattern = splits[idx..].join(delimiter);
            let Some(found) = traverse(data, &key, delimiter) else {
                continue;
            };
            let hit = match found {
                // Salt's "not found" default is `{}`, so an empty dict
                // counts as missing.
                Value::Object(map) if map.is_empty() => false,
                Value::Object(map) => self.dict_match(map, &pattern)?,
                Value::Array(members) => {
                    let mut hit = false;
                    for member in members {
                        if let Value::Object(map) = member
                            && self.dict_match(map, &pattern)?
                        {
                            hit = true;
                            break;
                        }
                        if self.scalar_match(member, &pattern)? {
                            hit = true;
                            break;
                        }
                    }
                    hit
                }
                other => self.scalar_match(other, &pattern)?,
            };
            if hit {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// `_dict_match`: the pattern names a key of `target` (or is `*`), or
    /// matches further down; `*:pattern` also tries every value.
    pub(super) fn dict_match(
        &mut self,
        target: &Map<String, Value>,
        pattern: &str,
    ) -> Result<bool, TargetError> {
        let (wildcard, pattern) = match pattern.strip_prefix("*:") {
            Some(rest) => (true, rest),
            None => (false, pattern),
        };
        if pattern == "*" || target.contains_key(pattern) {
            return Ok(true);
        }
        // The pattern may match a key, as list members are matched.
        for key in target.keys() {
            if self.scalar_match(&Value::String(key.clone()), pattern)? {
                return Ok(true);
            }
        }
        // Salt recurses with the default delimiter, whatever the caller's.
        if self.subdict_match(target, pattern, DEFAULT_DELIM)? {
            return Ok(true);
        }
        if wildcard {
            for value in target.values() {
                let hit = match value {
                    Value::Object(map) => self.dict_match(map, pattern)?,
                    Value::Array(items) => {
                        let mut hit = false;
                        for item in items {
                            if self.scalar_match(item, pattern)? {
                                hit = true;
                                break;
                            }
                        }
                        hit
                    }
                    other => self.scalar_match(other, pattern)?,
                };
                if hit {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    /// `_match`: `str(value).lower()` against `pattern.lower()`, by
    /// `fnmatch` or by `re.match`; a regex Python refuses matches nothing.
    pub(super) fn scalar_match(
        &mut self,
        value: &Value,
        pattern: &str,
    ) -> Result<bool, TargetError> {
        let target = python::str(value).to_lowercase();
        let pattern = pattern.to_lowercase();
        if !self.compiled.contains_key(&pattern) {
            let compiled = if self.regex {
                compile_regex(&pattern).map_or(Pattern::Refused, Pattern::Re)
            } else {
                Pattern::Glob(Glob::new(&pattern)?)
            };
            self.compiled.insert(pattern.clone(), compiled);
        }
        Ok(match &self.compiled[&pattern] {
            Pattern::Re(re) => py_re_match(re, &target),
            Pattern::Glob(glob) => glob.is_match(&target),
            Pattern::Refused => false,
        })
    }
}

#[cfg(test)]
pub(super) use crate::data::py_int;
pub(super) use crate::data::traverse;
