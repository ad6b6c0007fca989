//! `compound`: Salt's compound expressions (`G@`, `E@`, `L@`, … joined by
//! `and`, `or`, `not` and parentheses), parsed and evaluated.

use super::*;

/// One matcher inside a compound expression.
pub(super) enum Leaf {
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
    pub(super) fn eval(&self, id: &str, grains: &Map<String, Value>) -> Result<bool, TargetError> {
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
pub(super) enum Tok {
    Open,
    Close,
    And,
    Or,
    Not,
    /// Index into [`Compound::leaves`].
    Term(usize),
}

pub(super) fn describe(tok: Option<Tok>) -> &'static str {
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
pub(super) enum Expr {
    Leaf(usize),
    Not(Box<Expr>),
    And(Vec<Expr>),
    Or(Vec<Expr>),
}

impl Expr {
    pub(super) fn eval(&self, leaves: &[bool]) -> bool {
        match self {
            Self::Leaf(i) => leaves[*i],
            Self::Not(e) => !e.eval(leaves),
            Self::And(es) => es.iter().all(|e| e.eval(leaves)),
            Self::Or(es) => es.iter().any(|e| e.eval(leaves)),
        }
    }
}

pub(super) struct Compound {
    leaves: Vec<Leaf>,
    expr: Expr,
}

impl Compound {
    pub(super) fn parse(words: &[&str], display: &str) -> Result<Self, TargetError> {
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
    pub(super) fn eval(&self, id: &str, grains: &Map<String, Value>) -> Result<bool, TargetError> {
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
pub(super) fn push_tok(toks: &mut Vec<Tok>, tok: Tok) -> Result<(), String> {
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
pub(super) fn split_closing_parens(word: &str) -> (&str, usize) {
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
pub(super) fn split_engine(word: &str) -> Option<(char, Option<char>, &str)> {
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

pub(super) fn parse_word(word: &str, display: &str) -> Result<Leaf, TargetError> {
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
pub(super) struct Parser<'t> {
    toks: &'t [Tok],
    pos: usize,
    depth: usize,
}

impl Parser<'_> {
    pub(super) fn peek(&self) -> Option<Tok> {
        self.toks.get(self.pos).copied()
    }

    pub(super) fn eat(&mut self, tok: Tok) -> bool {
        let hit = self.peek() == Some(tok);
        if hit {
            self.pos += 1;
        }
        hit
    }

    pub(super) fn or(&mut self) -> Result<Expr, String> {
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

    pub(super) fn and(&mut self) -> Result<Expr, String> {
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

    pub(super) fn not(&mut self) -> Result<Expr, String> {
        if self.eat(Tok::Not) {
            // `not not` is refused when tokenising, so this recursion is a
            // single level deep.
            return Ok(Expr::Not(Box::new(self.not()?)));
        }
        self.atom()
    }

    pub(super) fn atom(&mut self) -> Result<Expr, String> {
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
