//! Why a target could not be evaluated, and the errors for a `tgt` of the
//! wrong JSON type.

use super::*;

/// Why a target could not be evaluated: the job is malformed for this maid.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum TargetError {
    /// `tgt_type` is not one of the supported names.
    #[error(
        "unknown target type `{0}` (expected glob, list, pcre, grain, grain_pcre, ipcidr or compound)"
    )]
    UnknownType(String),
    /// A regular expression (`pcre`, `E@`, `P@`) does not compile.
    #[error("invalid regular expression `{pattern}`: {reason}")]
    BadRegex {
        /// The expression as given (lowercased for `P@`, as Salt does).
        pattern: String,
        /// What the regex engine objected to.
        reason: String,
    },
    /// A compound target is not a well-formed expression.
    #[error("invalid compound target `{expr}`: {reason}")]
    BadCompound {
        /// The whole compound target.
        expr: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Salt raises matching the target against this minion's grains (an
    /// `ipv4`/`ipv6` grain holding something that is no address).
    #[error("grain `{grain}` cannot be matched: {reason}")]
    BadGrain {
        /// The grain (key path) being looked at.
        grain: String,
        /// What is wrong.
        reason: String,
    },
    /// An `ipcidr` target that is neither an address nor a network.
    #[error("invalid IP/CIDR target `{0}`")]
    BadCidr(String),
    /// A `grain`/`grain_pcre` job whose `delimiter` is empty.
    #[error("the target delimiter is empty")]
    EmptyDelimiter,
    /// A compound target uses a Salt engine that maid does not implement.
    #[error("target engine `{engine}@` ({name} matching) is not supported")]
    UnsupportedEngine {
        /// The engine letter, e.g. `I`.
        engine: char,
        /// What Salt calls it, e.g. `pillar`.
        name: &'static str,
    },
    /// `tgt` has a JSON type this target type cannot take.
    #[error("a {tgt_type} target must be {expected}, not {found}")]
    WrongTgtType {
        /// The target type.
        tgt_type: &'static str,
        /// What it accepts.
        expected: &'static str,
        /// What it was given.
        found: &'static str,
    },
}

/// How the error messages name a JSON value's type.
fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A `tgt` of a JSON type `tgt_type` cannot take.
pub(super) fn wrong_type(
    tgt_type: TargetType,
    expected: &'static str,
    found: &Value,
) -> TargetError {
    TargetError::WrongTgtType {
        tgt_type: tgt_type.name(),
        expected,
        found: json_type(found),
    }
}

/// `tgt` as a string, for the target types that take nothing else.
pub(super) fn expect_str(tgt: &Value, tgt_type: TargetType) -> Result<&str, TargetError> {
    tgt.as_str()
        .ok_or_else(|| wrong_type(tgt_type, "a string", tgt))
}
