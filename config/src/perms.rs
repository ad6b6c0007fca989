//! Salt's `external_auth` permission lists as `[api.perms]` writes them,
//! and the check that refuses a list the API could not apply: so a mistake
//! stops `maid api` at start, never a request. What each entry allows is
//! the API's to decide (`maid-master`'s `api::perms`).

use std::collections::BTreeMap;

use maid_salt::pyre::{PatternError, PyRegex};
use maid_salt::target::{self, TargetType};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
/// One entry of a user's list (`[api.perms]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PermEntry {
    /// A function regex for every minion, or `@runner`, `@wheel`, `@jobs`.
    Fun(String),
    /// Target → the function regexes allowed on the minions it matches.
    Targeted(BTreeMap<String, Vec<String>>),
}

/// Why a permission list cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("api.perms.{user}: {message}")]
pub struct PermError {
    pub user: String,
    pub message: String,
}

/// The special entries of Salt's `external_auth`.
pub const JOBS: &str = "@jobs";
/// maid's own: reading the fleet's audit trail (`GET /audit`).
pub const AUDIT: &str = "@audit";
const SPECIAL: [&str; 4] = ["@runner", "@wheel", JOBS, AUDIT];

/// `@runner`, `@wheel`, `@jobs`, `@audit`, or `@` and a module name.
fn special(entry: &str) -> bool {
    SPECIAL.contains(&entry)
        || entry.strip_prefix('@').is_some_and(|m| {
            !m.is_empty() && m.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}

/// Salt's function check (`CkMinions.match_check`): `re.match`, Python's
/// syntax, anchored at the start of the function name only.
pub fn fun_regex(pattern: &str) -> Result<PyRegex, PatternError> {
    PyRegex::new(pattern)
}

/// Check every entry of `perms` (regexes compile, targets parse, one
/// target per table) so a mistake stops the API at start, never a
/// request.
pub fn validate(perms: &BTreeMap<String, Vec<PermEntry>>) -> Result<(), PermError> {
    for (user, entries) in perms {
        let bad = |message: String| PermError {
            user: user.clone(),
            message,
        };
        for entry in entries {
            match entry {
                PermEntry::Fun(f) if f.starts_with('@') => {
                    if !special(f) {
                        return Err(bad(format!(
                            "{f:?} is none of {SPECIAL:?} nor `@` and a module name"
                        )));
                    }
                }
                PermEntry::Fun(f) => {
                    fun_regex(f).map_err(|e| bad(format!("{f:?}: {e}")))?;
                }
                PermEntry::Targeted(table) => {
                    let [(tgt, funs)] = table.iter().collect::<Vec<_>>()[..] else {
                        return Err(bad("a target table names exactly one target".into()));
                    };
                    if tgt.starts_with('@') {
                        if !special(tgt) {
                            return Err(bad(format!("{tgt:?}: `@` and a module name")));
                        }
                        for f in funs {
                            fun_regex(f).map_err(|e| bad(format!("{f:?}: {e}")))?;
                        }
                        continue;
                    }
                    target::matches(
                        &Value::String(tgt.clone()),
                        TargetType::Compound,
                        "",
                        &Map::new(),
                    )
                    .map_err(|e| bad(format!("target {tgt:?}: {e}")))?;
                    for f in funs {
                        fun_regex(f).map_err(|e| bad(format!("{f:?}: {e}")))?;
                    }
                }
            }
        }
    }
    Ok(())
}
