//! Python's `re`, on `fancy-regex`.
//!
//! Salt matches `pcre`, `grain_pcre`, `E@` and `P@` targets with Python's
//! `re.match`, so an operator's regex must mean here what it means there:
//! lookaround, backreferences, `(?P<name>)`/`(?P=name)`, atomic groups and
//! possessive quantifiers (Python 3.11) come from `fancy-regex`; where the
//! two syntaxes read the same text differently, the pattern is rewritten
//! first:
//!
//! * `$` is "end, or before a final newline" and `\Z` is the very end, as in
//!   Python (`fancy-regex` reads them the other way round).
//! * `[` inside a class is a literal (`[[:alpha:]]` is no POSIX class in
//!   Python), as are `&&`, `~~` and `--`; `[\b]` is a backspace.
//! * `{` that does not start a well-formed repeat is a literal, and `{,n}`
//!   means `{0,n}`.
//! * Octal (`\0`, `\012`) and `\x`/`\u`/`\U` escapes are spelled out.
//! * What Python refuses is refused: an unknown escape letter (`\q`, `\h`),
//!   `(?<name>…)`, global flags anywhere but the start, `\N{…}` (which
//!   maid cannot resolve), and a reference to a group not yet closed.
//!
//! `x` (verbose) is applied here, so comments never reach the rewriting.

use fancy_regex::Regex;

/// Why a pattern does not compile.
#[derive(Debug, thiserror::Error)]
pub enum PatternError {
    /// Python's `re` refuses it (or it uses what maid does not translate).
    #[error("{0}")]
    Python(String),
    /// Translated, it does not compile.
    #[error("{0}")]
    Compile(Box<fancy_regex::Error>),
}

/// A compiled Python regular expression.
#[derive(Debug, Clone)]
pub struct PyRegex(Regex);

/// How many backtracking steps one match may take before it counts as no
/// match; a hostile pattern costs a bounded amount of work, where Python
/// would spin for ever.
const BACKTRACK_LIMIT: usize = 100_000;

impl PyRegex {
    /// Compile `pattern` as `re.compile` would; `Err` says why Python (or,
    /// for a pattern Python takes, maid) refuses it.
    pub fn new(pattern: &str) -> Result<Self, PatternError> {
        let translated = translate(pattern).map_err(PatternError::Python)?;
        fancy_regex::RegexBuilder::new(&translated)
            .backtrack_limit(BACKTRACK_LIMIT)
            .build()
            .map(Self)
            .map_err(|e| PatternError::Compile(Box::new(e)))
    }

    /// `re.match`: a match that starts at the beginning of `s`; it need not
    /// reach the end. The leftmost match starts at 0 exactly when one does.
    pub fn is_match_at_start(&self, s: &str) -> bool {
        matches!(self.0.find(s), Ok(Some(m)) if m.start() == 0)
    }
}

/// Python's global flags that change how the rest is rewritten.
#[derive(Default)]
struct Flags {
    multiline: bool,
    verbose: bool,
}

/// Rewrites `pattern` from Python's syntax into `fancy-regex`'s, one
/// construct at a time (see [`Translator::step`]).
fn translate(pattern: &str) -> Result<String, String> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut t = Translator {
        chars: &chars,
        out: String::with_capacity(pattern.len() + 16),
        flags: Flags::default(),
        open_groups: Vec::new(),
        groups: 0,
        started: false,
    };
    let mut i = 0;
    while i < chars.len() {
        i = t.step(i)?;
    }
    Ok(t.out)
}

/// What [`translate`] carries from one construct to the next.
struct Translator<'a> {
    /// The pattern being read.
    chars: &'a [char],
    /// The rewritten pattern so far.
    out: String,
    /// Global flags seen so far, which change how later text reads.
    flags: Flags,
    /// Groups opened and not yet closed (by number), so a backreference
    /// to an open group is refused as Python refuses it.
    open_groups: Vec<Option<usize>>,
    /// How many numbered groups opened, so a reference to a group that
    /// does not exist is refused.
    groups: usize,
    /// Whether anything but global flags was seen, for Python's rule that
    /// global flags come first.
    started: bool,
}

impl Translator<'_> {
    /// Rewrites the construct that starts at `i`; returns where to go on.
    fn step(&mut self, i: usize) -> Result<usize, String> {
        let c = self.chars[i];
        if self.flags.verbose && (c.is_whitespace() || c == '#') {
            return Ok(self.verbose_skip(i));
        }
        match c {
            '\\' => {
                self.started = true;
                escape(
                    self.chars,
                    i,
                    false,
                    self.groups,
                    &self.open_groups,
                    &mut self.out,
                )
            }
            '[' => {
                self.started = true;
                class(self.chars, i, &mut self.out)
            }
            '$' => {
                self.started = true;
                Ok(self.dollar(i))
            }
            '{' => {
                self.started = true;
                Ok(brace(self.chars, i, &mut self.out))
            }
            '}' => {
                self.out.push_str(r"\}");
                Ok(i + 1)
            }
            '(' if self.chars.get(i + 1) == Some(&'?') => self.extension(i),
            '(' => Ok(self.open_group(i)),
            ')' => Ok(self.close_group(i)),
            other => {
                self.started = true;
                self.out.push(other);
                Ok(i + 1)
            }
        }
    }

    /// Verbose mode (`x`): whitespace at `i` is dropped, and a `#` comment
    /// up to (not past) the end of its line.
    fn verbose_skip(&self, mut i: usize) -> usize {
        if self.chars[i].is_whitespace() {
            return i + 1;
        }
        while i < self.chars.len() && self.chars[i] != '\n' {
            i += 1;
        }
        i
    }

    /// `$` at `i`: the end, or before a final newline, as in Python; any
    /// line's end under `m`.
    fn dollar(&mut self, i: usize) -> usize {
        self.out.push_str(if self.flags.multiline {
            "(?m:$)"
        } else {
            r"(?=\n?\z)"
        });
        i + 1
    }

    /// A plain `(` at `i`: a numbered capturing group.
    fn open_group(&mut self, i: usize) -> usize {
        self.started = true;
        self.groups += 1;
        self.open_groups.push(Some(self.groups));
        self.out.push('(');
        i + 1
    }

    /// A `)` at `i`: closes the innermost open group.
    fn close_group(&mut self, i: usize) -> usize {
        self.open_groups.pop();
        self.out.push(')');
        i + 1
    }

    /// `(?` at `i`: global flags, a comment, a named group or reference, or
    /// an extension `fancy-regex` reads as Python does (lookaround, atomic
    /// group, scoped flags), which opens a group that takes no number.
    fn extension(&mut self, i: usize) -> Result<usize, String> {
        let rest: String = self.chars[i + 2..].iter().take(3).collect();
        if let Some(end) = global_flags(self.chars, i + 2) {
            return self.apply_global_flags(i, end);
        }
        self.started = true;
        if rest.starts_with('#') {
            return comment(self.chars, i);
        }
        if rest.starts_with("P<") {
            self.groups += 1;
            self.open_groups.push(Some(self.groups));
        } else if rest.starts_with('<') && !rest.starts_with("<=") && !rest.starts_with("<!") {
            return Err(format!(
                "unknown extension ?<{} at position {}",
                self.chars.get(i + 3).copied().unwrap_or(' '),
                i + 1
            ));
        } else if rest.starts_with("P=") {
            return self.named_reference(i);
        } else {
            self.open_groups.push(None);
        }
        self.out.push('(');
        Ok(i + 1)
    }

    /// A global-flags group `(?aiLmsux)` at `i` whose `)` is at `end`:
    /// refused after anything else, as Python refuses it; `m` and `x`
    /// change the rewriting, `i` and `s` are passed on, the rest dropped.
    fn apply_global_flags(&mut self, i: usize, end: usize) -> Result<usize, String> {
        if self.started || !self.open_groups.is_empty() {
            return Err(format!(
                "global flags not at the start of the expression at position {i}"
            ));
        }
        for &f in &self.chars[i + 2..end] {
            match f {
                'm' => self.flags.multiline = true,
                'x' => self.flags.verbose = true,
                'L' => {
                    return Err("bad inline flags: cannot use 'L' flag with a str pattern".into());
                }
                _ => {}
            }
        }
        let keep: String = self.chars[i + 2..end]
            .iter()
            .filter(|f| matches!(f, 'i' | 's'))
            .collect();
        if !keep.is_empty() {
            self.out.push_str(&format!("(?{keep})"));
        }
        Ok(end + 1)
    }

    /// `(?P=name)` at `i`, copied as it is: a named reference is no group.
    fn named_reference(&mut self, i: usize) -> Result<usize, String> {
        let close = self.chars[i..]
            .iter()
            .position(|&c| c == ')')
            .ok_or("missing ), unterminated name")?;
        self.out.extend(&self.chars[i..=i + close]);
        Ok(i + close + 1)
    }
}

/// A `(?#…)` comment at `i`: skipped to its `)`; returns where to go on.
fn comment(chars: &[char], i: usize) -> Result<usize, String> {
    match chars[i..].iter().position(|&c| c == ')') {
        Some(len) => Ok(i + len + 1),
        None => Err("missing ), unterminated comment".into()),
    }
}

/// The end of a global-flags group `(?aiLmsux)` starting its letters at
/// `from`, if that is what is there.
fn global_flags(chars: &[char], from: usize) -> Option<usize> {
    let mut j = from;
    while j < chars.len() && "aiLmsux".contains(chars[j]) {
        j += 1;
    }
    (j > from && chars.get(j) == Some(&')')).then_some(j)
}

/// A `{` at `i`: a repeat as Python reads one (`{n}`, `{n,}`, `{,m}`,
/// `{n,m}`), else a literal brace. Returns where to go on.
fn brace(chars: &[char], i: usize, out: &mut String) -> usize {
    let mut j = i + 1;
    let digits = |j: &mut usize| {
        let start = *j;
        while *j < chars.len() && chars[*j].is_ascii_digit() {
            *j += 1;
        }
        chars[start..*j].iter().collect::<String>()
    };
    let lo = digits(&mut j);
    let hi = if chars.get(j) == Some(&',') {
        j += 1;
        Some(digits(&mut j))
    } else {
        None
    };
    if chars.get(j) != Some(&'}') || (lo.is_empty() && hi.is_none()) {
        out.push_str(r"\{");
        return i + 1;
    }
    let lo = if lo.is_empty() { "0".to_string() } else { lo };
    match hi {
        None => out.push_str(&format!("{{{lo}}}")),
        Some(hi) => out.push_str(&format!("{{{lo},{hi}}}")),
    }
    j + 1
}

/// A character class starting at `i` (`[`), rewritten; returns where to
/// go on after its `]`.
fn class(chars: &[char], i: usize, out: &mut String) -> Result<usize, String> {
    let mut j = i + 1;
    out.push('[');
    if chars.get(j) == Some(&'^') {
        out.push('^');
        j += 1;
    }
    // A `]` first in the class is a literal.
    if chars.get(j) == Some(&']') {
        out.push_str(r"\]");
        j += 1;
    }
    loop {
        let Some(&c) = chars.get(j) else {
            return Err(format!("unterminated character set at position {i}"));
        };
        match c {
            ']' => {
                out.push(']');
                return Ok(j + 1);
            }
            '\\' => j = escape(chars, j, true, 0, &[], out)?,
            '[' | '&' | '~' => {
                out.push('\\');
                out.push(c);
                j += 1;
            }
            '-' if chars.get(j + 1) == Some(&'-') => {
                out.push_str(r"\-");
                j += 1;
            }
            other => {
                out.push(other);
                j += 1;
            }
        }
    }
}

/// An escape at `i` (`\`), inside a class or not; returns where to go on.
fn escape(
    chars: &[char],
    i: usize,
    in_class: bool,
    groups: usize,
    open_groups: &[Option<usize>],
    out: &mut String,
) -> Result<usize, String> {
    let Some(&c) = chars.get(i + 1) else {
        return Err("bad escape (end of pattern)".into());
    };
    let hex = |len: usize, out: &mut String| -> Result<usize, String> {
        let digits: String = chars.iter().skip(i + 2).take(len).collect();
        if digits.len() != len || !digits.chars().all(|d| d.is_ascii_hexdigit()) {
            return Err(format!("incomplete escape \\{c}{digits} at position {i}"));
        }
        let code = u32::from_str_radix(&digits, 16).map_err(|e| e.to_string())?;
        let ch = char::from_u32(code)
            .ok_or_else(|| format!("bad escape \\{c}{digits} at position {i}"))?;
        push_literal(ch, out);
        Ok(i + 2 + len)
    };
    match c {
        'x' => hex(2, out),
        'u' => hex(4, out),
        'U' => hex(8, out),
        'Z' if !in_class => {
            out.push_str(r"\z");
            Ok(i + 2)
        }
        'A' | 'b' | 'B' if !in_class => {
            out.push('\\');
            out.push(c);
            Ok(i + 2)
        }
        'b' => {
            push_literal('\u{8}', out);
            Ok(i + 2)
        }
        'd' | 'D' | 's' | 'S' | 'w' | 'W' | 'n' | 't' | 'r' | 'f' | 'v' | 'a' => {
            out.push('\\');
            out.push(c);
            Ok(i + 2)
        }
        '0'..='7' if c == '0' || in_class || octal3(chars, i + 1) => {
            // Octal: `\0` and up to two more digits, or three digits.
            let mut j = i + 1;
            let mut value = 0u32;
            while j < chars.len() && j < i + 4 && chars[j].is_digit(8) {
                value = value * 8 + chars[j].to_digit(8).unwrap_or(0);
                j += 1;
            }
            if value > 0o377 {
                return Err(format!(
                    "octal escape value \\{value:o} outside of range 0-0o377 at position {i}"
                ));
            }
            push_literal(char::from_u32(value).unwrap_or('\0'), out);
            Ok(j)
        }
        '1'..='9' if !in_class => {
            // A group reference: one or two digits.
            let mut j = i + 1;
            let mut n = 0usize;
            while j < chars.len() && j < i + 3 && chars[j].is_ascii_digit() {
                n = n * 10 + chars[j].to_digit(10).unwrap_or(0) as usize;
                j += 1;
            }
            if n > groups {
                return Err(format!("invalid group reference {n} at position {}", i + 1));
            }
            if open_groups.contains(&Some(n)) {
                return Err(format!("cannot refer to an open group at position {i}"));
            }
            out.push_str(&format!("\\{n}"));
            Ok(j)
        }
        c if c.is_ascii_alphanumeric() => Err(format!("bad escape \\{c} at position {i}")),
        other => {
            push_literal(other, out);
            Ok(i + 2)
        }
    }
}

/// Python reads `\ddd` (three octal digits, not after `\0`) as octal.
fn octal3(chars: &[char], at: usize) -> bool {
    chars
        .get(at..at + 3)
        .is_some_and(|d| d.iter().all(|c| c.is_digit(8)))
}

/// Writes `c` so that it stands for itself: as it is when it is a letter,
/// a digit or non-ASCII and no whitespace, else as a `\x{…}` escape.
fn push_literal(c: char, out: &mut String) {
    if c.is_ascii_alphanumeric() || !c.is_ascii() && !c.is_whitespace() {
        out.push(c);
    } else {
        out.push_str(&format!("\\x{{{:x}}}", c as u32));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, s: &str) -> bool {
        PyRegex::new(p)
            .unwrap_or_else(|e| panic!("{p:?}: {e}"))
            .is_match_at_start(s)
    }

    #[test]
    fn reads_patterns_as_python() {
        assert!(m(r"web\d$", "web1\n"));
        assert!(!m(r"web\d\Z", "web1\n"));
        assert!(m(r"web\d\Z", "web1"));
        // `[[:alph]` then a literal `]`: no POSIX class in Python.
        assert!(m(r"[[:alpha:]]", ":]"));
        assert!(!m(r"[[:alpha:]]", ":"));
        assert!(m(r"[[:alpha:]]", "a]"));
        assert!(m(r"a{", "a{"));
        assert!(m(r"x{,2}app", "xxapp"));
        assert!(m(r"(?P<c>[a-z])(?P=c)", "aa"));
        assert!(m(r"(\w)\w*\1", "abca"));
        assert!(m(r"(?=.*\d)(?!web)", "db1"));
        assert!(!m(r"(?=.*\d)(?!web)", "web1"));
        assert!(m(r"(?<=w)eb|w", "web"));
        assert!(m("(?x) w e b # comment", "web"));
        assert!(m(r"app(?#comment)10", "app10"));
        assert!(m(r"[\b]", "\u{8}"));
        assert!(m(r"\101", "A"));
        assert!(m(r"\0101", "\u{8}1"));
        assert!(m(r"\x41\u0042", "AB"));
        assert!(m("(?i)DB", "db"));
        assert!(m("[]a]", "]"));
        assert!(m("a{}", "a{}"));
        assert!(m("(?>db)-", "db-"));
    }

    #[test]
    fn deep_nesting_is_refused_not_a_crash() {
        // fancy-regex stops at 64 levels (Python, between 400 and 800): a
        // hostile target is an error, never an exhausted stack.
        let deep = |n: usize| format!("{}a{}", "(".repeat(n), ")".repeat(n));
        assert!(PyRegex::new(&deep(50)).is_ok());
        assert!(PyRegex::new(&deep(100_000)).is_err());
        let lookarounds = format!("{}a{}", "(?=".repeat(100_000), ")".repeat(100_000));
        assert!(PyRegex::new(&lookarounds).is_err());
    }

    #[test]
    fn refuses_what_python_refuses() {
        for bad in [
            r"\q",
            r"\h",
            "(?<n>a)",
            "a(?i)b",
            r"\8",
            r"(a)\2",
            r"(a\1)",
            "[a",
            "(unclosed",
            "*bad",
            "\\",
        ] {
            assert!(PyRegex::new(bad).is_err(), "{bad:?} compiled");
        }
    }
}
