//! Minion targeting: does a job's `tgt` / `tgt_type` select this maid?
//!
//! A Salt master publishes every job to every minion, and each minion decides
//! for itself whether it is targeted. maid has to take that decision exactly
//! as a Salt minion would, or a fleet mixing the two would answer the same
//! command differently. So this module ports Salt 3008.4's own minion-side
//! matchers (`salt/matchers/*_match.py` and `salt.utils.data.subdict_match`),
//! and `tests/salt.rs` checks it against them, expression by expression:
//!
//! * `glob` — Python's `fnmatch.fnmatch` on the minion id: `*`, `?`, `[abc]`,
//!   `[!abc]`, whole string, case-sensitive, `*` crosses `.` and `/`. There is
//!   no escaping and no `{a,b}`; an unclosed `[` is a literal.
//! * `list` — the id is one of the comma-separated ids (or of a JSON array).
//! * `pcre` — Python's `re.match` (see [`crate::pyre`]).
//! * `grain` / `grain_pcre` — `key:subkey:pattern`, with Salt's trial of
//!   every split point so values may contain the delimiter, keys and values
//!   matched case-insensitively (keys by pattern too), list-valued grains,
//!   and Python's `str()` of non-string values.
//! * `ipcidr` — an address or network against the `ipv4`/`ipv6` grains.
//! * `compound` — `G@ P@ L@ E@ S@` (and `I@ J@ T@ M@`, `N@`) words joined by
//!   `and`, `or`, `not` and parentheses, evaluated as the Python expression
//!   Salt builds from them.
//!
//! Where Salt would raise or log and not match, maid returns a
//! [`TargetError`] so the job is rejected as malformed: the minion runs
//! nothing either way, and the master learns why.

mod compound;
mod error;
mod glob;
mod grain;
mod ipcidr;
mod list;
mod nodegroup;
mod pcre;
mod tgt_type;
mod top;

pub use self::error::TargetError;
pub use self::list::listed_ids;
pub use self::nodegroup::{NodegroupError, expand_nodegroups, nodegroup_comp, resolve_compound};
pub use self::tgt_type::TargetType;
pub use self::top::confirm_top;

use std::collections::HashMap;

use crate::pyre::PyRegex;
use crate::python;
use serde_json::{Map, Value};

use self::error::{expect_str, wrong_type};
use self::{compound::*, glob::*, grain::*, ipcidr::*, list::*, pcre::*};

/// Salt's `DEFAULT_TARGET_DELIM`, between the levels of a grain key path:
/// a job carries a `delimiter` only when it is another.
pub const DEFAULT_DELIM: &str = ":";

/// Python's parser gives up beyond this many nested parentheses; so do we,
/// which also keeps a hostile target from exhausting the stack.
const MAX_NESTING: usize = 200;

/// Python's `fnmatch.fnmatch` on POSIX: whether `name` matches the shell
/// pattern `pattern` (`*`, `?`, `[seq]`, `[!seq]`).
pub fn fnmatch(pattern: &str, name: &str) -> bool {
    Glob::new(pattern).is_ok_and(|g| g.is_match(name))
}

/// Whether minion `id` with `grains` is targeted by `tgt` (a JSON string, or for `list` also a JSON array of strings).
///
/// A `compound` target may also be a JSON array of strings, which Salt takes
/// as the already-split words of the expression (elements are not split
/// again).
pub fn matches(
    tgt: &Value,
    tgt_type: TargetType,
    id: &str,
    grains: &Map<String, Value>,
) -> Result<bool, TargetError> {
    matches_delimited(tgt, tgt_type, id, grains, None)
}

/// [`matches`] with the job's `delimiter` (`salt --delimiter`): what
/// separates the levels of a `grain` or `grain_pcre` target's key path,
/// `:` when `None`. As a Salt minion, only those two target types read it;
/// compound words name their own (`G;@os;Debian`).
pub fn matches_delimited(
    tgt: &Value,
    tgt_type: TargetType,
    id: &str,
    grains: &Map<String, Value>,
    delimiter: Option<&str>,
) -> Result<bool, TargetError> {
    matches_with_pillar(tgt, tgt_type, id, grains, None, delimiter)
}

/// Whether target `tgt` of `tgt_type` reads pillar: a `pillar` or
/// `pillar_pcre` target, or a compound one with an `I@` or `J@` word. A
/// master evaluates such a target itself (PROTOCOL §8).
pub fn reads_pillar(tgt: &Value, tgt_type: TargetType) -> bool {
    let word = |w: &str| matches!(split_engine(w), Some(('I' | 'J', _, _)));
    match tgt_type {
        TargetType::Pillar | TargetType::PillarPcre => true,
        TargetType::Compound => match tgt {
            Value::String(s) => py_split(s).into_iter().any(word),
            Value::Array(a) => a.iter().filter_map(Value::as_str).any(word),
            _ => false,
        },
        _ => false,
    }
}

/// [`matches_delimited`] by one who holds the minion's `pillar` (a
/// master): `pillar` and `pillar_pcre` targets and `I@`/`J@` words read
/// it, as Salt's pillar matchers read `opts["pillar"]`; with `None`
/// they match nothing.
pub fn matches_with_pillar(
    tgt: &Value,
    tgt_type: TargetType,
    id: &str,
    grains: &Map<String, Value>,
    pillar: Option<&Map<String, Value>>,
    delimiter: Option<&str>,
) -> Result<bool, TargetError> {
    let delimiter = delimiter.unwrap_or(DEFAULT_DELIM);
    if delimiter.is_empty()
        && matches!(
            tgt_type,
            TargetType::Grain | TargetType::GrainPcre | TargetType::Pillar | TargetType::PillarPcre
        )
    {
        // Python's `str.split("")` raises: a Salt minion drops the job.
        return Err(TargetError::EmptyDelimiter);
    }
    match tgt_type {
        TargetType::Glob => Ok(Glob::new(expect_str(tgt, tgt_type)?)?.is_match(id)),
        TargetType::Pcre => Ok(py_re_match(&compile_regex(expect_str(tgt, tgt_type)?)?, id)),
        TargetType::List => match tgt {
            Value::String(s) => Ok(list_match(s, id)),
            Value::Array(items) => {
                let mut hit = false;
                for item in items {
                    let Some(item) = item.as_str() else {
                        return Err(wrong_type(
                            tgt_type,
                            "a string or an array of strings",
                            item,
                        ));
                    };
                    hit |= item == id;
                }
                Ok(hit)
            }
            other => Err(wrong_type(
                tgt_type,
                "a string or an array of strings",
                other,
            )),
        },
        TargetType::Grain => grain_match(expect_str(tgt, tgt_type)?, delimiter, false, grains),
        TargetType::GrainPcre => grain_match(expect_str(tgt, tgt_type)?, delimiter, true, grains),
        TargetType::Pillar | TargetType::PillarPcre => {
            let tgt = expect_str(tgt, tgt_type)?;
            match pillar {
                Some(p) => grain_match(tgt, delimiter, tgt_type == TargetType::PillarPcre, p),
                None => Ok(false),
            }
        }
        TargetType::Ipcidr => {
            let tgt = expect_str(tgt, tgt_type)?;
            Cidr::parse(tgt)
                .ok_or_else(|| TargetError::BadCidr(tgt.to_string()))?
                .matches(grains)
        }
        TargetType::Compound => {
            let (display, words): (String, Vec<&str>) = match tgt {
                Value::String(s) => (s.clone(), py_split(s)),
                Value::Array(items) => {
                    let mut words = Vec::with_capacity(items.len());
                    for item in items {
                        let Some(word) = item.as_str() else {
                            return Err(wrong_type(
                                tgt_type,
                                "a string or an array of strings",
                                item,
                            ));
                        };
                        words.push(word);
                    }
                    (words.join(" "), words)
                }
                other => {
                    return Err(wrong_type(
                        tgt_type,
                        "a string or an array of strings",
                        other,
                    ));
                }
            };
            compound_match(&words, &display, id, grains, pillar)
        }
    }
}

#[cfg(test)]
mod tests;
