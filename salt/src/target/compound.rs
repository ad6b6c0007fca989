//! `compound`: Salt's compound expressions, decided as
//! `salt/matchers/compound_match.py` decides them.
//!
//! Salt splits the target on whitespace, turns each word into `True` or
//! `False` (a matcher's answer) or keeps it as an operator (`and`, `or`,
//! `not`, `(`, `)` — only as whole words: `(web1` is a glob), inserts `and`
//! before a `not` that follows an operand, and `eval`s the result as
//! Python. This module does the same, with a parser for the few Python
//! expressions those words can form, so what Python would reject is
//! rejected here too (and the job not run).

use super::*;

/// One word of the expression after its matcher ran.
#[derive(Clone, Copy, PartialEq, Debug)]
pub(super) enum Tok {
    Open,
    Close,
    And,
    Or,
    Not,
    /// A matcher's answer.
    Value(bool),
}

/// Salt's engine letters (`TARGET_REX`), those that take a delimiter
/// (`G|@os|Debian`), and what each matches.
const ENGINES: &str = "GPIJLNSERTM";
const DELIMITED: &str = "GPIJ";

/// `salt.utils.minions.parse_target`: `(engine, delimiter, pattern)`, or
/// `None` for a plain glob. The pattern must not be empty.
pub(super) fn split_engine(word: &str) -> Option<(char, Option<char>, &str)> {
    let engine = word.chars().next().filter(|c| ENGINES.contains(*c))?;
    let after = &word[1..];
    if DELIMITED.contains(engine)
        && let Some(delim) = after.chars().next()
        && let Some(pattern) = after[delim.len_utf8()..].strip_prefix('@')
        && !pattern.is_empty()
    {
        return Some((engine, Some(delim), pattern));
    }
    let pattern = after.strip_prefix('@')?;
    (!pattern.is_empty()).then_some((engine, None, pattern))
}

/// Python's `str.split()`: Unicode whitespace and the ASCII separators
/// `\x1c`–`\x1f`.
pub(super) fn py_split(s: &str) -> Vec<&str> {
    s.split(|c: char| c.is_whitespace() || ('\x1c'..='\x1f').contains(&c))
        .filter(|w| !w.is_empty())
        .collect()
}

/// `compound_match.match` for minion `id`: `Ok(true)` when it is targeted;
/// `Err` where Salt fails the whole expression (a malformed one, an engine
/// it has no matcher for, a matcher that raised).
pub(super) fn compound_match(
    words: &[&str],
    display: &str,
    id: &str,
    grains: &Map<String, Value>,
    pillar: Option<&Map<String, Value>>,
) -> Result<bool, TargetError> {
    let bad = |reason: String| TargetError::BadCompound {
        expr: display.to_string(),
        reason,
    };
    let mut results: Vec<Tok> = Vec::with_capacity(words.len());
    for &word in words {
        let op = match word {
            "and" => Some(Tok::And),
            "or" => Some(Tok::Or),
            "not" => Some(Tok::Not),
            "(" => Some(Tok::Open),
            ")" => Some(Tok::Close),
            _ => None,
        };
        if let Some(op) = op {
            match results.last() {
                None if !matches!(op, Tok::Open | Tok::Not) => {
                    return Err(bad(format!("it cannot start with `{word}`")));
                }
                Some(Tok::Open) if matches!(op, Tok::And | Tok::Or) => {
                    return Err(bad(format!("`{word}` cannot directly follow `(`")));
                }
                Some(last) if op == Tok::Not && !matches!(last, Tok::And | Tok::Or | Tok::Open) => {
                    results.push(Tok::And);
                }
                _ => {}
            }
            results.push(op);
            continue;
        }
        let value = match split_engine(word) {
            None => Glob::new(word)?.is_match(id),
            Some((engine, delim, pattern)) => {
                let delimiter = delim.map_or_else(|| DEFAULT_DELIM.to_string(), String::from);
                match engine {
                    'G' => grain_match(pattern, &delimiter, false, grains)?,
                    'P' => grain_match(pattern, &delimiter, true, grains)?,
                    // Pillar where the caller holds it (a master); a
                    // minion's own, like its resources, is none here:
                    // Salt's matchers given none match nothing.
                    'I' | 'J' => match pillar {
                        Some(p) => grain_match(pattern, &delimiter, engine == 'J', p)?,
                        None => false,
                    },
                    'T' => false,
                    'M' => pattern == id,
                    'L' => list_match(pattern, id),
                    'E' => py_re_match(&compile_regex(pattern)?, id),
                    'S' => match Cidr::parse(pattern) {
                        Some(cidr) => cidr.matches(grains)?,
                        None => false,
                    },
                    // A nodegroup the master did not expand: a minion knows
                    // none, and Salt drops the word.
                    'N' => continue,
                    _ => {
                        return Err(TargetError::UnsupportedEngine {
                            engine,
                            name: "range",
                        });
                    }
                }
            }
        };
        results.push(Tok::Value(value));
    }
    PyExpr::eval(&results).map_err(bad)
}

/// The Python expression Salt's words form: `or` < `and` < `not`, `True`,
/// `False` and parenthesised expressions (`()` is an empty tuple, false).
/// An operand followed by `(` is a call, which raises when (and only when)
/// Python gets to evaluate it, so it is kept as a node.
enum Node {
    Value(bool),
    Not(Box<Node>),
    And(Vec<Node>),
    Or(Vec<Node>),
    /// A call of `True`, `False` or a tuple: `TypeError` when evaluated.
    Call,
}

impl Node {
    /// Python's evaluation, short-circuiting as `and` and `or` do.
    fn eval(&self) -> Result<bool, String> {
        match self {
            Self::Value(v) => Ok(*v),
            Self::Not(n) => Ok(!n.eval()?),
            Self::And(ns) => {
                for n in ns {
                    if !n.eval()? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            Self::Or(ns) => {
                for n in ns {
                    if n.eval()? {
                        return Ok(true);
                    }
                }
                Ok(false)
            }
            Self::Call => Err("a value followed by `(` is called, which fails".into()),
        }
    }
}

/// A parser for [`Node`]s over Salt's words.
struct PyExpr<'t> {
    toks: &'t [Tok],
    pos: usize,
    depth: usize,
}

impl PyExpr<'_> {
    fn eval(toks: &[Tok]) -> Result<bool, String> {
        let mut p = PyExpr {
            toks,
            pos: 0,
            depth: 0,
        };
        let node = p.or()?;
        if let Some(tok) = p.peek() {
            return Err(format!(
                "unexpected {} after a complete expression",
                describe(Some(tok))
            ));
        }
        node.eval()
    }

    fn peek(&self) -> Option<Tok> {
        self.toks.get(self.pos).copied()
    }

    fn eat(&mut self, tok: Tok) -> bool {
        let hit = self.peek() == Some(tok);
        self.pos += usize::from(hit);
        hit
    }

    fn or(&mut self) -> Result<Node, String> {
        let mut terms = vec![self.and()?];
        while self.eat(Tok::Or) {
            terms.push(self.and()?);
        }
        Ok(if terms.len() == 1 {
            terms.remove(0)
        } else {
            Node::Or(terms)
        })
    }

    fn and(&mut self) -> Result<Node, String> {
        let mut terms = vec![self.not()?];
        while self.eat(Tok::And) {
            terms.push(self.not()?);
        }
        Ok(if terms.len() == 1 {
            terms.remove(0)
        } else {
            Node::And(terms)
        })
    }

    fn not(&mut self) -> Result<Node, String> {
        // `not not` cannot occur (Salt puts `and` between), so this
        // recursion is as deep as the parentheses.
        if self.eat(Tok::Not) {
            return Ok(Node::Not(Box::new(self.not()?)));
        }
        let mut node = self.atom()?;
        // Calls: `atom ( [expr] )`, any number of them.
        while self.peek() == Some(Tok::Open) {
            self.parenthesised()?;
            node = Node::Call;
        }
        Ok(node)
    }

    fn atom(&mut self) -> Result<Node, String> {
        match self.peek() {
            Some(Tok::Value(v)) => {
                self.pos += 1;
                Ok(Node::Value(v))
            }
            Some(Tok::Open) => Ok(self.parenthesised()?.unwrap_or(Node::Value(false))),
            tok => Err(format!("expected a target, found {}", describe(tok))),
        }
    }

    /// `( expr )`, or `()` (`None`: the empty tuple, or no call argument).
    fn parenthesised(&mut self) -> Result<Option<Node>, String> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return Err(format!(
                "parentheses are nested more than {MAX_NESTING} deep"
            ));
        }
        self.pos += 1;
        let inner = if self.peek() == Some(Tok::Close) {
            None
        } else {
            Some(self.or()?)
        };
        match self.peek() {
            Some(Tok::Close) => {
                self.pos += 1;
                self.depth -= 1;
                Ok(inner)
            }
            None => Err("unbalanced `(`: it is never closed".into()),
            Some(tok) => Err(format!(
                "unexpected {} inside parentheses",
                describe(Some(tok))
            )),
        }
    }
}

fn describe(tok: Option<Tok>) -> &'static str {
    match tok {
        Some(Tok::Open) => "`(`",
        Some(Tok::Close) => "`)`",
        Some(Tok::And) => "`and`",
        Some(Tok::Or) => "`or`",
        Some(Tok::Not) => "`not`",
        Some(Tok::Value(_)) => "a target",
        None => "the end",
    }
}
