//! `glob`: shell-style patterns, translated as Python's `fnmatch`.

use super::*;
use regex::Regex;

/// A compiled `fnmatch` pattern.
///
/// Most targets are `*`, a literal id or a prefix such as `web*`: patterns
/// with no `?` or `[` are matched by splitting on `*`, without building a
/// regex for every job (which cost a third of the agent's CPU per job).
pub(super) enum Glob {
    /// The pattern split on `*`: the id starts with the first piece, ends
    /// with the last and contains the others in order between them.
    Stars(Vec<String>),
    /// `fnmatch.translate`'s regex.
    Regex(Regex),
    /// An empty range such as `[z-a]`: matches nothing.
    Never,
}

impl Glob {
    pub(super) fn new(pattern: &str) -> Result<Self, TargetError> {
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

    pub(super) fn is_match(&self, s: &str) -> bool {
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
pub(super) fn stars_match(pieces: &[String], s: &str) -> bool {
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
pub(super) enum SetElem {
    Char(char),
    Range,
}

/// Python's `fnmatch.translate`, producing a Rust regex anchored at both
/// ends, or `None` if the pattern contains an empty set (never matches).
///
/// Set contents are emitted as `\x{..}` escapes so no character can take on
/// a meaning in Rust's class syntax that it did not have in Python's.
pub(super) fn fnmatch_translate(pat: &str) -> Option<String> {
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
pub(super) fn set_elems(p: &[char], i: usize, j: usize) -> Vec<SetElem> {
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
