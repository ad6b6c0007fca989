//! Minion targeting: does a job's `tgt` / `tgt_type` select this maid?
//!
//! A Salt master publishes every job to every minion, and each minion decides
//! for itself whether it is targeted. maid has to take that decision exactly
//! as a Salt minion would, or a fleet mixing the two would answer the same
//! command differently. So this module re-implements Salt's own matchers
//! (`salt/matchers/*_match.py` and `salt.utils.data.subdict_match`) rather
//! than anything "similar":
//!
//! * `glob` — Python's `fnmatch.fnmatch` on the minion id: `*`, `?`, `[abc]`,
//!   `[!abc]`, whole string, case-sensitive, `*` crosses `.` and `/`. There is
//!   no escaping and no `{a,b}`; an unclosed `[` is a literal.
//! * `list` — the id is one of the comma-separated ids (or of a JSON array).
//! * `pcre` — Python's `re.match`: anchored at the start, not at the end.
//! * `grain` — `key:subkey:glob`, with Salt's trial of every split point so
//!   values may contain the delimiter, list-valued grains, Python's `str()`
//!   of non-string values, and case-insensitive matching.
//! * `compound` — `and` / `or` / `not` / parentheses over `G@`, `P@`, `L@`,
//!   `E@` and bare globs, with Python's operator precedence, because Salt
//!   builds a Python expression from the words and `eval`s it.
//!
//! Where Salt would log and quietly not match a malformed target, maid returns
//! a [`TargetError`] instead so the job can be rejected as malformed.

use std::collections::HashMap;

use crate::salt::python;
use regex::Regex;
use serde_json::{Map, Value};

/// Salt's `DEFAULT_TARGET_DELIM`, between the levels of a grain key path.
const DEFAULT_DELIM: &str = ":";

/// Python's parser gives up beyond this many nested parentheses; so do we,
/// which also keeps a hostile target from exhausting the stack.
const MAX_NESTING: usize = 200;

/// How `tgt` is to be read: Salt's `tgt_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetType {
    /// Shell-style glob on the minion id (`web*`).
    Glob,
    /// Explicit minion ids (`web1,web2`, or a JSON array).
    List,
    /// Regular expression on the minion id, anchored at the start.
    Pcre,
    /// Glob on a grain (`os:Debian`).
    Grain,
    /// Boolean expression over the other matchers (`web* and G@os:Debian`).
    Compound,
}

impl TargetType {
    /// Parse Salt's tgt_type names: "glob", "list", "pcre", "grain", "compound". Anything else -> Err.
    pub fn parse(s: &str) -> Result<Self, TargetError> {
        match s {
            "glob" => Ok(Self::Glob),
            "list" => Ok(Self::List),
            "pcre" => Ok(Self::Pcre),
            "grain" => Ok(Self::Grain),
            "compound" => Ok(Self::Compound),
            other => Err(TargetError::UnknownType(other.to_string())),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Glob => "glob",
            Self::List => "list",
            Self::Pcre => "pcre",
            Self::Grain => "grain",
            Self::Compound => "compound",
        }
    }
}

/// Why a target could not be evaluated: the job is malformed for this maid.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum TargetError {
    /// `tgt_type` is not one of the supported names.
    #[error("unknown target type `{0}` (expected glob, list, pcre, grain or compound)")]
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
        TargetType::Grain => grain_match(expect_str(tgt, tgt_type)?, DEFAULT_DELIM, false, grains),
        TargetType::Compound => {
            let (display, words): (String, Vec<&str>) = match tgt {
                Value::String(s) => (s.clone(), s.split_whitespace().collect()),
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
            Compound::parse(&words, &display)?.eval(id, grains)
        }
    }
}

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

fn wrong_type(tgt_type: TargetType, expected: &'static str, found: &Value) -> TargetError {
    TargetError::WrongTgtType {
        tgt_type: tgt_type.name(),
        expected,
        found: json_type(found),
    }
}

fn expect_str(tgt: &Value, tgt_type: TargetType) -> Result<&str, TargetError> {
    tgt.as_str()
        .ok_or_else(|| wrong_type(tgt_type, "a string", tgt))
}

// ---------------------------------------------------------------------------
// list

/// `list_match.match` on a string: the id is one of the comma-separated items
/// (maid also trims whitespace around each item, so `web1, web2` works).
fn list_match(tgt: &str, id: &str) -> bool {
    tgt.split(',').any(|item| item.trim() == id)
}

// ---------------------------------------------------------------------------
// pcre

fn compile_regex(pattern: &str) -> Result<Regex, TargetError> {
    Regex::new(pattern).map_err(|e| TargetError::BadRegex {
        pattern: pattern.to_string(),
        reason: e.to_string(),
    })
}

/// Python's `re.match`: a match that starts at the beginning of `s` (it need
/// not reach the end). The leftmost match starts at 0 exactly when some match
/// does, so no anchoring has to be spliced into the user's pattern.
fn py_re_match(re: &Regex, s: &str) -> bool {
    re.find(s).is_some_and(|m| m.start() == 0)
}

// ---------------------------------------------------------------------------
// glob

/// A compiled `fnmatch` pattern.
///
/// Most targets are `*`, a literal id or a prefix such as `web*`: patterns
/// with no `?` or `[` are matched by splitting on `*`, without building a
/// regex for every job (which cost a third of the agent's CPU per job).
enum Glob {
    /// The pattern split on `*`: the id starts with the first piece, ends
    /// with the last and contains the others in order between them.
    Stars(Vec<String>),
    /// `fnmatch.translate`'s regex.
    Regex(Regex),
    /// An empty range such as `[z-a]`: matches nothing.
    Never,
}

impl Glob {
    fn new(pattern: &str) -> Result<Self, TargetError> {
        if !pattern.contains(['?', '[']) {
            return Ok(Self::Stars(pattern.split('*').map(str::to_owned).collect()));
        }
        let Some(source) = fnmatch_translate(pattern) else {
            return Ok(Self::Never);
        };
        Regex::new(&source)
            .map(Self::Regex)
            .map_err(|e| TargetError::BadRegex {
                pattern: pattern.to_string(),
                reason: format!("glob cannot be compiled: {e}"),
            })
    }

    fn is_match(&self, s: &str) -> bool {
        match self {
            Self::Stars(pieces) => stars_match(pieces, s),
            Self::Regex(re) => re.is_match(s),
            Self::Never => false,
        }
    }
}

/// `s` matches the `*`-separated `pieces` (at least one) of a pattern with
/// no other wildcard. Taking each middle piece at its leftmost place is
/// enough: a later place could only leave less room for the rest.
fn stars_match(pieces: &[String], s: &str) -> bool {
    let Some((first, rest)) = pieces.split_first() else {
        return s.is_empty();
    };
    let Some((last, middle)) = rest.split_last() else {
        return s == first;
    };
    let Some(mut s) = s.strip_prefix(first.as_str()) else {
        return false;
    };
    for piece in middle {
        match s.find(piece.as_str()) {
            Some(at) => s = &s[at + piece.len()..],
            None => return false,
        }
    }
    s.ends_with(last.as_str())
}

/// One element of the inside of a `[...]` set after Python's range clean-up:
/// a character, or the `-` between two characters that makes them a range.
#[derive(Clone, Copy, PartialEq)]
enum SetElem {
    Char(char),
    Range,
}

/// Python's `fnmatch.translate`, producing a Rust regex anchored at both
/// ends, or `None` if the pattern contains an empty set (never matches).
///
/// Set contents are emitted as `\x{..}` escapes so no character can take on
/// a meaning in Rust's class syntax that it did not have in Python's.
fn fnmatch_translate(pat: &str) -> Option<String> {
    let p: Vec<char> = pat.chars().collect();
    let n = p.len();
    let mut out = String::from(r"(?s)\A");
    let mut last_star = false;
    let mut i = 0;
    while i < n {
        let c = p[i];
        i += 1;
        if c == '*' {
            if !last_star {
                out.push_str(".*");
            }
            last_star = true;
            continue;
        }
        last_star = false;
        match c {
            '?' => out.push('.'),
            '[' => {
                let mut j = i;
                if j < n && p[j] == '!' {
                    j += 1;
                }
                if j < n && p[j] == ']' {
                    j += 1;
                }
                while j < n && p[j] != ']' {
                    j += 1;
                }
                if j >= n {
                    out.push_str(r"\[");
                    continue;
                }
                let elems = set_elems(&p, i, j);
                i = j + 1;
                if elems.is_empty() {
                    return None;
                }
                if elems == [SetElem::Char('!')] {
                    out.push('.');
                    continue;
                }
                let (negated, elems) = match elems.split_first() {
                    Some((SetElem::Char('!'), rest)) => (true, rest),
                    _ => (false, &elems[..]),
                };
                out.push('[');
                if negated {
                    out.push('^');
                }
                let mut k = 0;
                while k < elems.len() {
                    match (elems[k], elems.get(k + 1), elems.get(k + 2)) {
                        (SetElem::Char(lo), Some(SetElem::Range), Some(SetElem::Char(hi))) => {
                            out.push_str(&format!(r"\x{{{:x}}}-\x{{{:x}}}", lo as u32, *hi as u32));
                            k += 3;
                        }
                        (SetElem::Char(ch), _, _) => {
                            out.push_str(&format!(r"\x{{{:x}}}", ch as u32));
                            k += 1;
                        }
                        (SetElem::Range, _, _) => {
                            out.push_str(r"\x{2d}");
                            k += 1;
                        }
                    }
                }
                out.push(']');
            }
            other => out.push_str(&regex::escape(other.encode_utf8(&mut [0; 4]))),
        }
    }
    out.push_str(r"\z");
    Some(out)
}

/// The contents of the set `p[i..j]` (between `[` and `]`), split into
/// chunks at range hyphens and with reversed ranges removed, exactly as
/// CPython's `fnmatch.translate` does.
fn set_elems(p: &[char], i: usize, j: usize) -> Vec<SetElem> {
    let stuff = &p[i..j];
    let mut chunks: Vec<Vec<char>> = Vec::new();
    if !stuff.contains(&'-') {
        chunks.push(stuff.to_vec());
    } else {
        let mut start = i;
        let mut k = if p[i] == '!' { i + 2 } else { i + 1 };
        while let Some(dash) = (k..j).find(|&x| p[x] == '-') {
            chunks.push(p[start..dash].to_vec());
            start = dash + 1;
            k = dash + 3;
        }
        let chunk = &p[start..j];
        if !chunk.is_empty() {
            chunks.push(chunk.to_vec());
        } else if let Some(last) = chunks.last_mut() {
            last.push('-');
        }
        // Remove empty ranges (`z-a`): they are invalid in a regex.
        for k in (1..chunks.len()).rev() {
            if let (Some(&lo), Some(&hi)) = (chunks[k - 1].last(), chunks[k].first())
                && lo > hi
            {
                let tail = chunks[k][1..].to_vec();
                chunks[k - 1].pop();
                chunks[k - 1].extend(tail);
                chunks.remove(k);
            }
        }
    }
    let mut elems = Vec::new();
    for (idx, chunk) in chunks.iter().enumerate() {
        if idx > 0 {
            elems.push(SetElem::Range);
        }
        elems.extend(chunk.iter().map(|&c| SetElem::Char(c)));
    }
    elems
}

// ---------------------------------------------------------------------------
// grains

/// `grain_match.match` / `grain_pcre_match.match`: no delimiter, no match.
fn grain_match(
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
struct GrainMatcher {
    regex: bool,
    compiled: HashMap<String, Pattern>,
}

/// A grain pattern compiled for [`GrainMatcher`].
enum Pattern {
    Glob(Glob),
    /// Matched as Python's `re.match`.
    Re(Regex),
}

impl GrainMatcher {
    fn new(regex: bool) -> Self {
        Self {
            regex,
            compiled: HashMap::new(),
        }
    }

    /// Try every split of `expr` into key path and pattern, deepest key
    /// first: `a:b:c` is `a` → `b` matched against `c`, then `a` matched
    /// against `b:c`.
    fn subdict_match(
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
    fn dict_match(
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
    /// `fnmatch` or by `re.match`.
    fn scalar_match(&mut self, value: &Value, pattern: &str) -> Result<bool, TargetError> {
        let target = python::str(value).to_lowercase();
        let pattern = pattern.to_lowercase();
        if !self.compiled.contains_key(&pattern) {
            let compiled = if self.regex {
                Pattern::Re(compile_regex(&pattern)?)
            } else {
                Pattern::Glob(Glob::new(&pattern)?)
            };
            self.compiled.insert(pattern.clone(), compiled);
        }
        Ok(match &self.compiled[&pattern] {
            Pattern::Re(re) => py_re_match(re, &target),
            Pattern::Glob(glob) => glob.is_match(&target),
        })
    }
}

/// `salt.utils.data.traverse_dict_and_list`: follow `key` down through
/// objects and arrays (an array step is an index, negative from the end, or
/// else a key of the first embedded object that has it).
fn traverse<'a>(data: &'a Map<String, Value>, key: &str, delimiter: &str) -> Option<&'a Value> {
    let mut parts = key.split(delimiter);
    let mut ptr = data.get(parts.next()?)?;
    for part in parts {
        ptr = match ptr {
            Value::Object(map) => map.get(part)?,
            Value::Array(items) => match py_int(part) {
                // Embedded dicts are searched with the int first, but JSON
                // keys are strings, so only the index can succeed.
                Some(idx) => {
                    let len = i128::try_from(items.len()).ok()?;
                    let idx = if idx < 0 { idx + len } else { idx };
                    items.get(usize::try_from(idx).ok()?)?
                }
                None => items
                    .iter()
                    .filter_map(Value::as_object)
                    .find_map(|map| map.get(part))?,
            },
            _ => return None,
        };
    }
    Some(ptr)
}

/// Python's `int(s)` for ASCII input: surrounding whitespace, a sign, and
/// single underscores between digits.
fn py_int(s: &str) -> Option<i128> {
    let s = s.trim();
    let (neg, digits) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if digits.is_empty()
        || digits.starts_with('_')
        || digits.ends_with('_')
        || digits.contains("__")
        || !digits.chars().all(|c| c.is_ascii_digit() || c == '_')
    {
        return None;
    }
    // Too large to index anything: saturate, the lookup then misses.
    let value = digits
        .chars()
        .filter(char::is_ascii_digit)
        .try_fold(0i128, |acc, c| {
            acc.checked_mul(10)?
                .checked_add(i128::from(c.to_digit(10)?))
        })
        .unwrap_or(i128::MAX);
    Some(if neg { -value } else { value })
}

// ---------------------------------------------------------------------------
// compound

/// One matcher inside a compound expression.
enum Leaf {
    Glob(Glob),
    Pcre(Regex),
    List(String),
    Grain {
        expr: String,
        delimiter: String,
        regex: bool,
    },
}

impl Leaf {
    fn eval(&self, id: &str, grains: &Map<String, Value>) -> Result<bool, TargetError> {
        match self {
            Self::Glob(glob) => Ok(glob.is_match(id)),
            Self::Pcre(re) => Ok(py_re_match(re, id)),
            Self::List(list) => Ok(list_match(list, id)),
            Self::Grain {
                expr,
                delimiter,
                regex,
            } => grain_match(expr, delimiter, *regex, grains),
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Tok {
    Open,
    Close,
    And,
    Or,
    Not,
    /// Index into [`Compound::leaves`].
    Term(usize),
}

fn describe(tok: Option<Tok>) -> &'static str {
    match tok {
        Some(Tok::Open) => "`(`",
        Some(Tok::Close) => "`)`",
        Some(Tok::And) => "`and`",
        Some(Tok::Or) => "`or`",
        Some(Tok::Not) => "`not`",
        Some(Tok::Term(_)) => "a target",
        None => "the end",
    }
}

/// A parsed boolean expression; `and`/`or` chains are flat so evaluation
/// depth is bounded by parenthesis nesting, not by the number of terms.
enum Expr {
    Leaf(usize),
    Not(Box<Expr>),
    And(Vec<Expr>),
    Or(Vec<Expr>),
}

impl Expr {
    fn eval(&self, leaves: &[bool]) -> bool {
        match self {
            Self::Leaf(i) => leaves[*i],
            Self::Not(e) => !e.eval(leaves),
            Self::And(es) => es.iter().all(|e| e.eval(leaves)),
            Self::Or(es) => es.iter().any(|e| e.eval(leaves)),
        }
    }
}

struct Compound {
    leaves: Vec<Leaf>,
    expr: Expr,
}

impl Compound {
    fn parse(words: &[&str], display: &str) -> Result<Self, TargetError> {
        let bad = |reason: String| TargetError::BadCompound {
            expr: display.to_string(),
            reason,
        };
        let mut leaves = Vec::new();
        let mut toks = Vec::new();
        for &word in words {
            if word.is_empty() {
                // Only possible in the array form; Salt globs it.
                leaves.push(Leaf::Glob(Glob::new("")?));
                push_tok(&mut toks, Tok::Term(leaves.len() - 1)).map_err(bad)?;
                continue;
            }
            let mut core = word;
            while let Some(rest) = core.strip_prefix('(') {
                push_tok(&mut toks, Tok::Open).map_err(bad)?;
                core = rest;
            }
            let (core, closes) = split_closing_parens(core);
            if !core.is_empty() {
                let tok = match core {
                    "and" => Tok::And,
                    "or" => Tok::Or,
                    "not" => Tok::Not,
                    _ => {
                        leaves.push(parse_word(core, display)?);
                        Tok::Term(leaves.len() - 1)
                    }
                };
                push_tok(&mut toks, tok).map_err(bad)?;
            }
            for _ in 0..closes {
                push_tok(&mut toks, Tok::Close).map_err(bad)?;
            }
        }
        if toks.is_empty() {
            return Err(bad("the expression is empty".to_string()));
        }
        let mut parser = Parser {
            toks: &toks,
            pos: 0,
            depth: 0,
        };
        let expr = parser.or().map_err(bad)?;
        if let Some(&tok) = toks.get(parser.pos) {
            let reason = match tok {
                Tok::Close => "unbalanced `)`: it closes nothing".to_string(),
                tok => format!(
                    "unexpected {} after a complete expression (missing `and`/`or`?)",
                    describe(Some(tok))
                ),
            };
            return Err(bad(reason));
        }
        Ok(Self { leaves, expr })
    }

    /// Every matcher is evaluated, as Salt does before its `eval`, so a bad
    /// `P@` regex is reported whichever branch it sits in.
    fn eval(&self, id: &str, grains: &Map<String, Value>) -> Result<bool, TargetError> {
        let values = self
            .leaves
            .iter()
            .map(|leaf| leaf.eval(id, grains))
            .collect::<Result<Vec<bool>, _>>()?;
        Ok(self.expr.eval(&values))
    }
}

/// Append a token, applying the checks Salt makes while it builds its
/// Python expression: no leading `and`/`or`, none right after `(`, and a
/// `not` after a target or `)` means `and not`.
fn push_tok(toks: &mut Vec<Tok>, tok: Tok) -> Result<(), String> {
    match (tok, toks.last()) {
        (Tok::And | Tok::Or, None) => {
            return Err(format!(
                "it cannot start with {} (nothing on its left)",
                describe(Some(tok))
            ));
        }
        (Tok::And | Tok::Or, Some(Tok::Open)) => {
            return Err(format!(
                "{} cannot directly follow `(` (nothing on its left)",
                describe(Some(tok))
            ));
        }
        (Tok::Not, Some(Tok::Not)) => {
            return Err("`not not` is not allowed (Salt reads it as `not and not`)".to_string());
        }
        (Tok::Not, Some(Tok::Term(_) | Tok::Close)) => toks.push(Tok::And),
        _ => {}
    }
    toks.push(tok);
    Ok(())
}

/// Split `)` characters attached to the end of a word off it, but only as
/// many as the word itself leaves unbalanced, so `E@web(1|2)` keeps its
/// group while `G@os:Debian)` closes one. Backslash-escaped parentheses do
/// not count.
fn split_closing_parens(word: &str) -> (&str, usize) {
    let (mut open, mut close) = (0usize, 0usize);
    let mut escaped = false;
    for c in word.chars() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '(' => open += 1,
            ')' => close += 1,
            _ => {}
        }
    }
    let mut core = word;
    let mut excess = close.saturating_sub(open);
    let mut split = 0;
    while excess > 0
        && let Some(rest) = core.strip_suffix(')')
        && !rest.ends_with('\\')
    {
        core = rest;
        excess -= 1;
        split += 1;
    }
    (core, split)
}

/// Salt's `TARGET_REX`: an engine letter from `GPIJLNSER`, for `G`/`P`/`I`/
/// `J` optionally followed by a one-character delimiter, then `@` and a
/// non-empty pattern.
fn split_engine(word: &str) -> Option<(char, Option<char>, &str)> {
    let engine = word.chars().next()?;
    if !"GPIJLNSER".contains(engine) {
        return None;
    }
    let after = &word[engine.len_utf8()..];
    if "GPIJ".contains(engine)
        && let Some(delim) = after.chars().next()
        && let Some(pattern) = after[delim.len_utf8()..].strip_prefix('@')
        && !pattern.is_empty()
    {
        return Some((engine, Some(delim), pattern));
    }
    let pattern = after.strip_prefix('@')?;
    (!pattern.is_empty()).then_some((engine, None, pattern))
}

fn parse_word(word: &str, display: &str) -> Result<Leaf, TargetError> {
    let bad = |reason: String| TargetError::BadCompound {
        expr: display.to_string(),
        reason,
    };
    if let Some((engine, delim, pattern)) = split_engine(word) {
        let delimiter = delim.map_or_else(|| DEFAULT_DELIM.to_string(), String::from);
        return match engine {
            'G' | 'P' => Ok(Leaf::Grain {
                expr: pattern.to_string(),
                delimiter,
                regex: engine == 'P',
            }),
            'L' => Ok(Leaf::List(pattern.to_string())),
            'E' => Ok(Leaf::Pcre(compile_regex(pattern)?)),
            other => Err(TargetError::UnsupportedEngine {
                engine: other,
                name: match other {
                    'I' => "pillar",
                    'J' => "pillar PCRE",
                    'N' => "nodegroup",
                    'S' => "IP/CIDR",
                    _ => "range",
                },
            }),
        };
    }
    // Salt would glob a word such as `X@foo` or `G@`, which cannot be what
    // was meant; refuse it instead.
    let mut chars = word.chars();
    if let (Some(letter), Some(second)) = (chars.next(), chars.next())
        && letter.is_ascii_uppercase()
    {
        let rest = chars.as_str();
        if second == '@' {
            return Err(bad(if "GPIJLNSER".contains(letter) {
                format!("`{word}` has an empty pattern")
            } else {
                format!("unknown target engine `{letter}@` in `{word}`")
            }));
        }
        if "GPIJ".contains(letter) && rest == "@" {
            return Err(bad(format!("`{word}` has an empty pattern")));
        }
    }
    Ok(Leaf::Glob(Glob::new(word)?))
}

/// Recursive descent with Python's precedence: `not` > `and` > `or`.
struct Parser<'t> {
    toks: &'t [Tok],
    pos: usize,
    depth: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<Tok> {
        self.toks.get(self.pos).copied()
    }

    fn eat(&mut self, tok: Tok) -> bool {
        let hit = self.peek() == Some(tok);
        if hit {
            self.pos += 1;
        }
        hit
    }

    fn or(&mut self) -> Result<Expr, String> {
        let mut terms = vec![self.and()?];
        while self.eat(Tok::Or) {
            terms.push(self.and()?);
        }
        Ok(if terms.len() == 1 {
            terms.remove(0)
        } else {
            Expr::Or(terms)
        })
    }

    fn and(&mut self) -> Result<Expr, String> {
        let mut terms = vec![self.not()?];
        while self.eat(Tok::And) {
            terms.push(self.not()?);
        }
        Ok(if terms.len() == 1 {
            terms.remove(0)
        } else {
            Expr::And(terms)
        })
    }

    fn not(&mut self) -> Result<Expr, String> {
        if self.eat(Tok::Not) {
            // `not not` is refused when tokenising, so this recursion is a
            // single level deep.
            return Ok(Expr::Not(Box::new(self.not()?)));
        }
        self.atom()
    }

    fn atom(&mut self) -> Result<Expr, String> {
        let prev = self.pos.checked_sub(1).map(|i| self.toks[i]);
        match self.peek() {
            Some(Tok::Term(i)) => {
                self.pos += 1;
                Ok(Expr::Leaf(i))
            }
            Some(Tok::Open) => {
                self.depth += 1;
                if self.depth > MAX_NESTING {
                    return Err(format!(
                        "parentheses are nested more than {MAX_NESTING} deep"
                    ));
                }
                self.pos += 1;
                let inner = self.or()?;
                match self.peek() {
                    Some(Tok::Close) => {
                        self.pos += 1;
                        self.depth -= 1;
                        Ok(inner)
                    }
                    None => Err("unbalanced `(`: it is never closed".to_string()),
                    Some(tok) => Err(format!(
                        "unexpected {} inside parentheses (missing `and`/`or`?)",
                        describe(Some(tok))
                    )),
                }
            }
            tok => Err(match prev {
                None => format!("expected a target, found {}", describe(tok)),
                Some(prev) => format!(
                    "expected a target after {}, found {}",
                    describe(Some(prev)),
                    describe(tok)
                ),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn grains() -> Map<String, Value> {
        let v = json!({
            "id": "web-dc1-srv1",
            "os": "Debian",
            "os_family": "Debian",
            "kernel": "Linux",
            "num_cpus": 4,
            "mem_ratio": 0.5,
            "big": 1e16,
            "virtual": false,
            "ipv4": ["127.0.0.1", "10.0.0.5"],
            "roles": ["web", "db"],
            "master": "salt.example.com:4506",
            "nothing": null,
            "empty": {},
            "deep": {"a": {"b": "leaf"}, "a:b": "colon-key"},
            "pkgs": {"nginx": "1.24", "openssl": "3.0"},
            "disks": [{"name": "sda", "size": 100}, {"name": "sdb"}],
            "nested": {"x": {"y": "value:with:colons"}},
        });
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    fn m(tgt: Value, t: TargetType, id: &str) -> Result<bool, TargetError> {
        matches(&tgt, t, id, &grains())
    }

    fn glob(p: &str, id: &str) -> bool {
        m(json!(p), TargetType::Glob, id).unwrap()
    }

    fn pcre(p: &str, id: &str) -> bool {
        m(json!(p), TargetType::Pcre, id).unwrap()
    }

    fn grain(p: &str) -> bool {
        m(json!(p), TargetType::Grain, "any").unwrap()
    }

    fn comp(expr: &str, id: &str) -> bool {
        m(json!(expr), TargetType::Compound, id).unwrap_or_else(|e| panic!("{expr}: {e}"))
    }

    fn comp_err(expr: &str) -> TargetError {
        match m(json!(expr), TargetType::Compound, "web1") {
            Err(e) => e,
            Ok(v) => panic!("{expr:?} should be an error, got {v}"),
        }
    }

    fn assert_bad_compound(expr: &str, needle: &str) {
        match comp_err(expr) {
            TargetError::BadCompound { reason, .. } => {
                assert!(
                    reason.contains(needle),
                    "{expr:?}: {reason:?} lacks {needle:?}"
                )
            }
            other => panic!("{expr:?}: expected BadCompound, got {other:?}"),
        }
    }

    #[test]
    fn parses_target_types() {
        assert_eq!(TargetType::parse("glob"), Ok(TargetType::Glob));
        assert_eq!(TargetType::parse("list"), Ok(TargetType::List));
        assert_eq!(TargetType::parse("pcre"), Ok(TargetType::Pcre));
        assert_eq!(TargetType::parse("grain"), Ok(TargetType::Grain));
        assert_eq!(TargetType::parse("compound"), Ok(TargetType::Compound));
        for bad in ["", "Glob", "pillar", "ipcidr", "nodegroup", " glob"] {
            assert_eq!(
                TargetType::parse(bad),
                Err(TargetError::UnknownType(bad.to_string()))
            );
        }
        let msg = TargetType::parse("range").unwrap_err().to_string();
        assert!(msg.contains("`range`") && msg.contains("compound"), "{msg}");
    }

    #[test]
    fn star_patterns_agree_with_fnmatch_translate() {
        let patterns = [
            "", "*", "**", "web*", "*1", "w*b*1", "*eb*", "web1", "a*a", "*a*a*", "a**b",
        ];
        let ids = [
            "", "web1", "web", "aweb1", "wbweb1", "a", "aa", "aba", "ab", "a\nb",
        ];
        for p in patterns {
            let re = Regex::new(&fnmatch_translate(p).unwrap()).unwrap();
            let fast = Glob::new(p).unwrap();
            assert!(matches!(fast, Glob::Stars(_)), "{p}");
            for id in ids {
                assert_eq!(
                    fast.is_match(id),
                    re.is_match(id),
                    "pattern {p:?} on {id:?}"
                );
            }
        }
    }

    #[test]
    fn glob_basics() {
        assert!(glob("*", "web1"));
        assert!(glob("web*", "web1"));
        assert!(glob("web*", "web"));
        assert!(!glob("web*", "aweb1"));
        assert!(glob("web?", "web1"));
        assert!(!glob("web?", "web12"));
        assert!(!glob("web?", "web"));
        assert!(glob("web[123]", "web2"));
        assert!(!glob("web[123]", "web4"));
        assert!(glob("web[!123]", "web4"));
        assert!(!glob("web[!123]", "web1"));
        assert!(glob("web[1-3]", "web2"));
        assert!(!glob("web[1-3]", "web5"));
        // Whole-string match, case-sensitive.
        assert!(!glob("web", "web1"));
        assert!(!glob("Web*", "web1"));
        assert!(!glob("", "web1"));
        // `*` crosses `.` and `/`.
        assert!(glob("*.example.com", "web1.dc1.example.com"));
        assert!(glob("a*z", "a/b/c.z"));
        assert!(glob("*", ""));
        assert!(glob("**", "x"));
    }

    #[test]
    fn glob_python_fnmatch_corners() {
        // An unclosed `[` is a literal.
        assert!(glob("web[1", "web[1"));
        assert!(!glob("web[1", "web1"));
        // `]` first in a set is a member.
        assert!(glob("[]]", "]"));
        assert!(glob("[!]]", "a"));
        assert!(!glob("[!]]", "]"));
        // A trailing `-` is literal.
        assert!(glob("[a-]", "-"));
        assert!(glob("[a-]", "a"));
        // Reversed ranges are empty: never match.
        assert!(!glob("[z-a]", "m"));
        assert!(!glob("x[z-a]", "x-"));
        // `[!z-a]`: negated empty set, any character.
        assert!(glob("[!z-a]", "q"));
        // `^` is not negation in fnmatch.
        assert!(glob("[^a]", "^"));
        assert!(glob("[^a]", "a"));
        assert!(!glob("[^a]", "b"));
        // No escaping, no braces; regex metacharacters are literal.
        assert!(glob(r"a\b", r"a\b"));
        assert!(glob("{a,b}", "{a,b}"));
        assert!(!glob("{a,b}", "a"));
        assert!(glob("a.b+c", "a.b+c"));
        assert!(!glob("a.b", "axb"));
        assert!(glob("[a-c-e]", "-"));
        assert!(glob("[a-c-e]", "e"));
        assert!(!glob("[a-c-e]", "d"));
        assert!(glob("[&|~]", "|"));
        // Non-ASCII.
        assert!(glob("sérv?r", "sérvër"));
    }

    #[test]
    fn list_target() {
        let l = TargetType::List;
        assert!(m(json!("web1,web2"), l, "web2").unwrap());
        assert!(m(json!("web1"), l, "web1").unwrap());
        assert!(m(json!(" web1 , web2 "), l, "web1").unwrap());
        assert!(m(json!("web1, web2"), l, "web2").unwrap());
        assert!(!m(json!("web1,web2"), l, "web").unwrap());
        assert!(!m(json!("web1,web2"), l, "web1,web2").unwrap());
        assert!(!m(json!("web*"), l, "web1").unwrap());
        assert!(m(json!(["web1", "db1"]), l, "db1").unwrap());
        assert!(!m(json!(["web1", "db1"]), l, "db").unwrap());
        assert!(!m(json!([]), l, "db").unwrap());
        assert_eq!(
            m(json!(["web1", 2]), l, "web1"),
            Err(TargetError::WrongTgtType {
                tgt_type: "list",
                expected: "a string or an array of strings",
                found: "a number",
            })
        );
        assert!(matches!(
            m(json!({"a": 1}), l, "web1"),
            Err(TargetError::WrongTgtType {
                found: "an object",
                ..
            })
        ));
    }

    #[test]
    fn wrong_json_types() {
        for t in [TargetType::Glob, TargetType::Pcre, TargetType::Grain] {
            let err = m(json!(["web1"]), t, "web1").unwrap_err();
            assert!(matches!(
                err,
                TargetError::WrongTgtType {
                    found: "an array",
                    ..
                }
            ));
            assert!(m(json!(null), t, "web1").is_err());
        }
        let err = m(json!(5), TargetType::Compound, "web1").unwrap_err();
        assert_eq!(
            err.to_string(),
            "a compound target must be a string or an array of strings, not a number"
        );
    }

    #[test]
    fn pcre_is_anchored_at_start_only() {
        assert!(pcre("web", "web1"));
        assert!(pcre(r"^web\d+$", "web12"));
        assert!(!pcre(r"^web\d+$", "web12x"));
        assert!(!pcre("eb", "web1"));
        assert!(!pcre("1", "web1"));
        assert!(pcre(".*1", "web1"));
        assert!(pcre("web|db", "db7"));
        assert!(!pcre("Web", "web1"));
        assert!(pcre("(?i)Web", "web1"));
        assert!(pcre("", "web1"));
        assert!(pcre("web-dc1-srv.*", "web-dc1-srv3"));
    }

    #[test]
    fn pcre_errors() {
        for bad in ["(", "a)|(b", "[a-", "*web"] {
            match m(json!(bad), TargetType::Pcre, "web1") {
                Err(TargetError::BadRegex { pattern, .. }) => assert_eq!(pattern, bad),
                other => panic!("{bad}: {other:?}"),
            }
        }
        // Python-only syntax Rust's engine lacks is reported, not guessed at.
        assert!(m(json!("web(?=1)"), TargetType::Pcre, "web1").is_err());
    }

    #[test]
    fn grain_simple() {
        assert!(grain("os:Debian"));
        // Salt lowercases both sides.
        assert!(grain("os:debian"));
        assert!(grain("os:DEBIAN"));
        assert!(grain("os:Deb*"));
        assert!(grain("os:*"));
        assert!(!grain("os:Ubuntu"));
        assert!(!grain("os:Deb"));
        assert!(grain("kernel:L?nux"));
        // Missing grains never match, not even `*`.
        assert!(!grain("missing:*"));
        assert!(!grain("missing:"));
        // No delimiter at all: no match.
        assert!(!grain("os"));
        assert!(!grain(""));
    }

    #[test]
    fn grain_non_string_values() {
        assert!(grain("num_cpus:4"));
        assert!(grain("num_cpus:[3-5]"));
        assert!(!grain("num_cpus:40"));
        assert!(grain("mem_ratio:0.5"));
        assert!(grain("big:1e+16"));
        assert!(grain("virtual:False"));
        assert!(grain("virtual:false"));
        assert!(!grain("virtual:0"));
        assert!(grain("nothing:None"));
        // An empty dict is indistinguishable from "missing" in Salt.
        assert!(!grain("empty:*"));
    }

    #[test]
    fn grain_nested_and_lists() {
        assert!(grain("deep:a:b:leaf"));
        assert!(grain("deep:a:b:LE*"));
        assert!(!grain("deep:a:b:other"));
        // A dict value: the pattern can name a key, or be `*`.
        assert!(grain("pkgs:nginx"));
        assert!(grain("pkgs:*"));
        assert!(!grain("pkgs:apache"));
        assert!(grain("pkgs:nginx:1.24"));
        assert!(grain("pkgs:nginx:1.*"));
        // Key membership is exact (not lowercased, not globbed).
        assert!(!grain("pkgs:NGINX"));
        // List-valued grains: any element.
        assert!(grain("roles:web"));
        assert!(grain("roles:DB"));
        assert!(!grain("roles:cache"));
        assert!(grain("ipv4:10.0.0.*"));
        // Indexing into lists, also from the end.
        assert!(grain("roles:0:web"));
        assert!(grain("roles:-1:db"));
        assert!(!grain("roles:0:db"));
        assert!(!grain("roles:5:db"));
        // Lists of dicts: keys of the embedded dicts.
        assert!(grain("disks:name:sda"));
        assert!(grain("disks:size:100"));
        assert!(grain("disks:name:sdb"));
        // A bare value is not looked for inside embedded dicts.
        assert!(!grain("disks:sdb"));
        assert!(grain("disks:1:name:sdb"));
        assert!(grain("disks:name"));
        // The dict itself is matched by its Python repr.
        assert!(grain("disks:{'name': 'sda'*"));
    }

    #[test]
    fn grain_values_with_the_delimiter() {
        // `master` = "salt.example.com:4506": the split that leaves
        // "salt.example.com:4506" as the pattern is tried after the deeper ones.
        assert!(grain("master:salt.example.com:4506"));
        assert!(grain("master:*:4506"));
        assert!(!grain("master:salt.example.com"));
        assert!(grain("nested:x:y:value:with:colons"));
        assert!(grain("nested:x:y:value:*"));
        // Traversal always splits the key path, so a key that itself
        // contains the delimiter is only seen by key membership.
        assert!(!grain("deep:a:b:colon-key"));
        assert!(grain("deep:a:b"));
    }

    #[test]
    fn grain_wildcard_key() {
        // `*:value` looks at every top-level grain.
        assert!(grain("*:Debian"));
        assert!(grain("*:10.0.0.5"));
        // Dict-valued grains: by key, one level down only.
        assert!(grain("*:nginx"));
        assert!(!grain("*:leaf"));
        assert!(!grain("*:nowhere"));
    }

    #[test]
    fn grain_pcre_in_compound() {
        assert!(comp("P@os:(RedHat|Fedora|Debian)", "web1"));
        assert!(comp("P@os:deb", "web1"));
        assert!(!comp("P@os:ian", "web1"));
        assert!(comp("P@num_cpus:[0-9]+$", "web1"));
        assert!(comp("P@roles:d.", "web1"));
        // Salt lowercases the pattern too.
        assert!(comp("P@os:DEBIAN$", "web1"));
        assert!(matches!(
            comp_err("P@os:(deb"),
            TargetError::BadRegex { pattern, .. } if pattern == "(deb"
        ));
        // An invalid pattern that is never tried (its key path does not
        // exist) is not an error, as in Salt.
        assert!(!comp("P@missing:(deb", "web1"));
    }

    #[test]
    fn compound_salt_doc_examples() {
        let g = "webserv* and G@os:Debian or E@web-dc1-srv.*";
        assert!(comp(g, "webserv1"));
        assert!(comp(g, "web-dc1-srv7"));
        assert!(!comp(g, "db1"));
        let ubuntu = {
            let mut g = grains();
            g.insert("os".into(), json!("Ubuntu"));
            g
        };
        assert!(!matches(&json!(g), TargetType::Compound, "webserv1", &ubuntu).unwrap());
        assert!(matches(&json!(g), TargetType::Compound, "web-dc1-srv1", &ubuntu).unwrap());

        assert!(comp("G@os:Debian and webser*", "webser1"));
        assert!(!comp("G@os:Debian and webser*", "db1"));
        assert!(!comp("not web-dc1-srv", "web-dc1-srv"));
        assert!(comp("not web-dc1-srv", "web1"));
        assert!(!comp("* and not G@kernel:Linux", "web1"));
        assert!(comp("* and not G@kernel:Darwin", "web1"));
        assert!(comp("( ms-1 or G@id:ms-3 ) and G@os:Debian", "ms-1"));
        assert!(!comp("( ms-1 or G@id:ms-3 ) and G@os:Debian", "ms-2"));
        assert!(comp("G@os:Debian and L@web1,web2 or E@db.*", "web2"));
        assert!(comp("L@web1,web2,web3", "web3"));
        assert!(!comp("L@web1,web2,web3", "web"));
        assert!(comp(r"E@web\d+", "web42"));
        assert!(comp("G@ipv4:10.0.0.5", "x"));
    }

    #[test]
    fn compound_precedence() {
        // a or (b and c)
        assert!(comp("a or b and c", "a"));
        assert!(!comp("a or b and c", "b"));
        assert!(!comp("( a or b ) and c", "a"));
        // not binds tighter than and/or.
        assert!(comp("not a and *", "b"));
        assert!(!comp("not a and *", "a"));
        assert!(comp("not a or a", "a"));
        assert!(comp("* and not a or a", "a"));
        assert!(!comp("* and not ( a or b )", "b"));
        assert!(comp("not ( a and b )", "a"));
        // Left to right chains.
        assert!(comp("x or y or z or a", "a"));
        assert!(!comp("* and * and * and a", "b"));
        assert!(comp("( ( ( a ) ) )", "a"));
    }

    #[test]
    fn compound_not_without_and() {
        // Salt inserts `and` before a `not` that follows a target or `)`.
        assert!(comp("web* not web2", "web1"));
        assert!(!comp("web* not web2", "web2"));
        assert!(!comp("( web* ) not G@os:Debian", "web1"));
        assert_bad_compound("not not web1", "not not");
    }

    #[test]
    fn compound_attached_parens() {
        assert!(comp("(web* or db*) and G@os:Debian", "db3"));
        assert!(!comp("(web* or db*) and G@os:Ubuntu", "db3"));
        assert!(comp("((web1)) or db1", "web1"));
        assert!(comp("not (a or b)", "c"));
        assert!(!comp("(not a) and (a)", "a"));
        // Parentheses belonging to a regex are kept.
        assert!(comp("E@web(1|2)", "web2"));
        assert!(comp("(E@web(1|2))", "web1"));
        assert!(comp("(E@web(1|2)) and *", "web1"));
        assert!(!comp("(E@web(1|2)) and not web1", "web1"));
        assert!(comp(r"(E@web\))", "web)"));
        assert!(comp("(P@os:(redhat|debian))", "x"));
        assert!(comp("( G@os:Debian )", "x"));
    }

    #[test]
    fn compound_engines_and_delimiters() {
        // G/P take an optional one-character delimiter before `@`.
        assert!(comp("G;@deep;a;b;leaf", "x"));
        assert!(comp("G;@master;salt.example.com:4506", "x"));
        assert!(!comp("G;@deep:a:b:leaf", "x"));
        assert!(comp("P|@os|^deb", "x"));
        // Operators are lowercase only; anything else is a glob.
        assert!(comp("AND", "AND"));
        assert!(comp("web1@dc", "web1@dc"));
        assert!(comp("E:@x", "E:@x"));
    }

    #[test]
    fn compound_array_form() {
        let words = json!(["web*", "and", "G@os:Debian"]);
        assert!(matches(&words, TargetType::Compound, "web1", &grains()).unwrap());
        assert!(!matches(&words, TargetType::Compound, "db1", &grains()).unwrap());
        // Elements are words; they are not split again.
        let one = json!(["web1 or db1"]);
        assert!(!matches(&one, TargetType::Compound, "web1", &grains()).unwrap());
        assert!(matches!(
            matches(&json!(["web1", 1]), TargetType::Compound, "web1", &grains()),
            Err(TargetError::WrongTgtType { .. })
        ));
        assert!(matches!(
            matches(&json!([]), TargetType::Compound, "web1", &grains()),
            Err(TargetError::BadCompound { .. })
        ));
    }

    #[test]
    fn compound_malformed() {
        assert_bad_compound("", "empty");
        assert_bad_compound("   ", "empty");
        assert_bad_compound("and web1", "cannot start with `and`");
        assert_bad_compound("or web1", "cannot start with `or`");
        assert_bad_compound("web1 and", "after `and`, found the end");
        assert_bad_compound("web1 or", "after `or`, found the end");
        assert_bad_compound("not", "after `not`, found the end");
        assert_bad_compound("web1 and not", "after `not`, found the end");
        assert_bad_compound("web1 and or db1", "after `and`, found `or`");
        assert_bad_compound("( web1", "never closed");
        assert_bad_compound("(web1 or (db1)", "never closed");
        assert_bad_compound("web1 )", "closes nothing");
        assert_bad_compound("web1) or (db1", "closes nothing");
        assert_bad_compound("( and web1 )", "cannot directly follow `(`");
        assert_bad_compound("( )", "after `(`, found `)`");
        assert_bad_compound("()", "after `(`, found `)`");
        assert_bad_compound("web1 db1", "missing `and`/`or`");
        assert_bad_compound("( web1 db1 )", "missing `and`/`or`");
        assert_bad_compound("web1 ( db1 )", "missing `and`/`or`");
        assert_bad_compound("X@foo", "unknown target engine `X@`");
        assert_bad_compound("web1 or T@foo", "unknown target engine `T@`");
        assert_bad_compound("G@", "empty pattern");
        assert_bad_compound("E@", "empty pattern");
        assert_bad_compound("G;@", "empty pattern");
        let deep = format!("{}web1{}", "( ".repeat(300), " )".repeat(300));
        assert_bad_compound(&deep, "nested");
        let ok = format!("{}web1{}", "( ".repeat(50), " )".repeat(50));
        assert!(comp(&ok, "web1"));
        let long = vec!["web1"; 20_000].join(" or ");
        assert!(comp(&long, "web1"));
        let msg = comp_err("web1 and").to_string();
        assert!(
            msg.starts_with("invalid compound target `web1 and`: "),
            "{msg}"
        );
    }

    #[test]
    fn compound_unsupported_engines() {
        for (expr, engine, name) in [
            ("I@role:web", 'I', "pillar"),
            ("J@role:w.*", 'J', "pillar PCRE"),
            ("N@webservers", 'N', "nodegroup"),
            ("S@10.0.0.0/24", 'S', "IP/CIDR"),
            ("R@%cluster", 'R', "range"),
            ("web1 or I@role:web", 'I', "pillar"),
        ] {
            assert_eq!(
                comp_err(expr),
                TargetError::UnsupportedEngine { engine, name },
                "{expr}"
            );
        }
        assert!(
            comp_err("S@10.0.0.0/24")
                .to_string()
                .contains("not supported")
        );
        // Reported even when the branch would not be needed.
        assert!(matches!(
            comp_err("* or I@a:b"),
            TargetError::UnsupportedEngine { .. }
        ));
    }

    #[test]
    fn compound_bad_regex() {
        assert!(matches!(
            comp_err("web* and E@web(["),
            TargetError::BadRegex { pattern, .. } if pattern == "web(["
        ));
        assert!(matches!(comp_err("* or E@("), TargetError::BadRegex { .. }));
    }

    #[test]
    fn python_reprs() {
        assert_eq!(python::float(1.0), "1.0");
        assert_eq!(python::float(0.5), "0.5");
        assert_eq!(python::float(-2.25), "-2.25");
        assert_eq!(python::float(0.0), "0.0");
        assert_eq!(python::float(-0.0), "-0.0");
        assert_eq!(python::float(1e15), "1000000000000000.0");
        assert_eq!(python::float(1e16), "1e+16");
        assert_eq!(python::float(1.5e16), "1.5e+16");
        assert_eq!(python::float(0.0001), "0.0001");
        assert_eq!(python::float(0.00001), "1e-05");
        assert_eq!(python::float(1.5e-7), "1.5e-07");
        assert_eq!(python::float(1e100), "1e+100");
        assert_eq!(python::float(123.456), "123.456");
        // Two shortest strings round-trip; Python takes the nearer, even one.
        assert_eq!(
            python::float(87_700_567_198_155.0 + 0.125),
            "87700567198155.12"
        );
        assert_eq!(
            python::float(1_670_247_125_337_306.0 + 0.25),
            "1670247125337306.2"
        );
        assert_eq!(python::str(&json!(true)), "True");
        assert_eq!(python::str(&json!(null)), "None");
        assert_eq!(python::str(&json!(-3)), "-3");
        assert_eq!(python::str(&json!(u64::MAX)), "18446744073709551615");
        assert_eq!(
            python::str(&json!({"a": [1, "x", null], "b'": "it's"})),
            r#"{'a': [1, 'x', None], "b'": "it's"}"#
        );
        assert_eq!(python::str_repr("a'\"\\\n"), r#"'a\'"\\\n'"#);
        assert_eq!(py_int(" -2 "), Some(-2));
        assert_eq!(py_int("1_0"), Some(10));
        assert_eq!(py_int("1__0"), None);
        assert_eq!(py_int("x"), None);
        assert_eq!(py_int(""), None);
    }
}
