//! YAML as Salt reads a command-line word: PyYAML's YAML 1.1 `SafeLoader`
//! with Salt's changes (`salt.utils.yamlloader.SaltYamlSafeLoader`).
//!
//! `serde_yaml` speaks YAML 1.2, where `010`, `1e3`, `0o17`, `1:30` and
//! `yes` mean other things than they do to Salt. So the document is parsed
//! into events by `yaml-rust2`, and the scalars are resolved and built here
//! by PyYAML's rules:
//!
//! * implicit types from PyYAML's resolver regexes: booleans `yes`/`on`/…,
//!   ints in binary, octal, hex and base 60 (`1:30` is 90), floats that
//!   need a dot and a signed exponent (`1e3` is a string), `~`/`null`;
//! * Salt's constructors: a timestamp stays a string, a leading-zero int is
//!   decimal (`010` is 10; `-010` is still octal, -8), `!!binary` pads;
//!   duplicate mapping keys are an error.
//!
//! The result is a Python value ([`Py`]): what `yaml.safe_load` returns.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use std::sync::LazyLock;

use regex::Regex;
use yaml_rust2::parser::{Event, Parser, Tag};
use yaml_rust2::scanner::TScalarStyle;

/// A value as Python holds it after `safe_load`.
#[derive(Debug, Clone, PartialEq)]
pub enum Py {
    None,
    Bool(bool),
    /// Any int: Python's are unbounded; ours to 128 bits, beyond which the
    /// digits are kept.
    Int(i128),
    BigInt(String),
    Float(f64),
    Str(String),
    Bytes(Vec<u8>),
    List(Vec<Py>),
    Set(Vec<Py>),
    /// Insertion-ordered, as Python's dict.
    Dict(Vec<(Py, Py)>),
}

const TAG: &str = "tag:yaml.org,2002:";
const STR: &str = "tag:yaml.org,2002:str";
const SEQ: &str = "tag:yaml.org,2002:seq";
const MAP: &str = "tag:yaml.org,2002:map";
const MERGE: &str = "tag:yaml.org,2002:merge";
const VALUE: &str = "tag:yaml.org,2002:value";

/// Collections open at once, aliases expanded: as deep as `serde_json`
/// reads JSON. Deeper documents are refused while they are read, before
/// anything recurses over them.
pub const MAX_DEPTH: usize = 128;

/// What a document may cost beyond twice its length: see [`budget`].
const SLACK: usize = 64;

/// What a document of `len` bytes may cost: each node 1, each scalar its
/// bytes too, aliases counted as the node they name, expanded. A document
/// without aliases costs less than `2 × len` (a node takes at least a byte
/// of text, and a scalar holds no more bytes than its text, escapes aside),
/// so aliases may at most double what a document of that length could
/// cost anyway: a few hundred bytes of nested aliases ("billion laughs")
/// are refused as they are read, before anything is expanded, where
/// PyYAML (and so Salt) builds every copy.
pub fn budget(len: usize) -> usize {
    len.saturating_mul(2).saturating_add(SLACK)
}

/// Why a document does not load: PyYAML's words, or the bound it passed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct YamlError(pub String);

/// `yaml.load(text, Loader=SaltYamlSafeLoader)`; `Err` where PyYAML
/// raises, and where the document is deeper than [`MAX_DEPTH`] or costs
/// more than its [`budget`].
pub fn safe_load(text: &str) -> Result<Py, YamlError> {
    load(text).map_err(YamlError)
}

fn load(text: &str) -> Result<Py, String> {
    let mut builder = Builder::new(budget(text.len()));
    let mut parser = Parser::new_from_str(text);
    // Events are pulled one at a time: `Parser::load` recurses once per
    // level of nesting, and the depth is checked here, as each opens.
    loop {
        let (event, _) = parser.next_token().map_err(|e| e.to_string())?;
        match event {
            Event::StreamEnd => break,
            Event::DocumentStart if !builder.docs.is_empty() => {
                return Err("expected a single document in the stream".into());
            }
            event => builder.on_event(event)?,
        }
    }
    match builder.docs.pop() {
        None => Ok(Py::None),
        Some(doc) => construct(&doc),
    }
}

/// A node as PyYAML's composer builds it: tag resolved, nothing built.
/// Children are shared, so an alias is a pointer to its anchor's node,
/// never a copy: the tree takes the memory of the text, however often a
/// node is named.
#[derive(Debug)]
enum Node {
    Scalar {
        tag: Cow<'static, str>,
        value: String,
    },
    Seq {
        tag: Cow<'static, str>,
        items: Vec<Rc<Node>>,
    },
    Map {
        tag: Cow<'static, str>,
        pairs: Vec<(Rc<Node>, Rc<Node>)>,
    },
}

impl Node {
    fn tag(&self) -> &str {
        match self {
            Self::Scalar { tag, .. } | Self::Seq { tag, .. } | Self::Map { tag, .. } => tag,
        }
    }
}

/// What a node costs once its aliases are expanded ([`budget`]), and how
/// many levels of collections it holds.
#[derive(Debug, Clone, Copy, Default)]
struct Size {
    cost: usize,
    height: usize,
}

/// A collection being read: the node, its anchor, a key awaiting its
/// value, and what it has cost so far.
struct Open {
    node: Node,
    anchor: usize,
    key: Option<Rc<Node>>,
    size: Size,
}

/// Builds [`Node`]s from parser events, within a budget.
struct Builder {
    docs: Vec<Rc<Node>>,
    stack: Vec<Open>,
    anchors: HashMap<usize, (Rc<Node>, Size)>,
    /// What the document may still cost.
    left: usize,
}

/// `!` alone: the non-specific tag (a string, a list or a dict as plain).
fn non_specific(tag: &Tag) -> bool {
    (tag.handle.is_empty() && tag.suffix == "!") || (tag.handle == "!" && tag.suffix.is_empty())
}

fn full_tag(tag: &Tag) -> Cow<'static, str> {
    if tag.handle == "!!" {
        Cow::Owned(format!("{TAG}{}", tag.suffix))
    } else {
        Cow::Owned(format!("{}{}", tag.handle, tag.suffix))
    }
}

impl Builder {
    fn new(budget: usize) -> Self {
        Builder {
            docs: Vec::new(),
            stack: Vec::new(),
            anchors: HashMap::new(),
            left: budget,
        }
    }

    /// Take `size` from what is left, or refuse: before anything of that
    /// size is built.
    fn spend(&mut self, size: Size) -> Result<(), String> {
        if self.stack.len() + size.height > MAX_DEPTH {
            return Err(format!("the document nests deeper than {MAX_DEPTH} levels"));
        }
        self.left = self.left.checked_sub(size.cost).ok_or_else(|| {
            "the document is too large once its aliases are expanded (more than twice its \
             length)"
                .to_string()
        })?;
        Ok(())
    }

    fn open(&mut self, node: Node, anchor: usize) -> Result<(), String> {
        self.spend(Size { cost: 1, height: 1 })?;
        self.stack.push(Open {
            node,
            anchor,
            key: None,
            size: Size { cost: 1, height: 1 },
        });
        Ok(())
    }

    /// Add a finished node (already paid for) where it goes.
    fn push(&mut self, node: Rc<Node>, anchor: usize, size: Size) {
        if anchor > 0 {
            self.anchors.insert(anchor, (node.clone(), size));
        }
        let Some(open) = self.stack.last_mut() else {
            self.docs.push(node);
            return;
        };
        open.size.cost += size.cost;
        open.size.height = open.size.height.max(size.height + 1);
        match &mut open.node {
            Node::Seq { items, .. } => items.push(node),
            Node::Map { pairs, .. } => match open.key.take() {
                None => open.key = Some(node),
                Some(k) => pairs.push((k, node)),
            },
            Node::Scalar { .. } => unreachable!("scalars hold nothing"),
        }
    }

    fn on_event(&mut self, ev: Event) -> Result<(), String> {
        match ev {
            Event::Scalar(value, style, anchor, tag) => {
                let size = Size {
                    cost: 1 + value.len(),
                    height: 0,
                };
                self.spend(size)?;
                let tag = match tag {
                    Some(t) if non_specific(&t) => Cow::Borrowed(STR),
                    Some(t) => full_tag(&t),
                    None if style == TScalarStyle::Plain => Cow::Borrowed(resolve_plain(&value)),
                    None => Cow::Borrowed(STR),
                };
                self.push(Rc::new(Node::Scalar { tag, value }), anchor, size);
            }
            Event::SequenceStart(anchor, tag) => {
                let tag = tag
                    .filter(|t| !non_specific(t))
                    .map_or(Cow::Borrowed(SEQ), |t| full_tag(&t));
                let items = Vec::new();
                self.open(Node::Seq { tag, items }, anchor)?;
            }
            Event::MappingStart(anchor, tag) => {
                let tag = tag
                    .filter(|t| !non_specific(t))
                    .map_or(Cow::Borrowed(MAP), |t| full_tag(&t));
                let pairs = Vec::new();
                self.open(Node::Map { tag, pairs }, anchor)?;
            }
            Event::SequenceEnd | Event::MappingEnd => {
                if let Some(open) = self.stack.pop() {
                    self.push(Rc::new(open.node), open.anchor, open.size);
                }
            }
            Event::Alias(id) => {
                let (node, size) = self
                    .anchors
                    .get(&id)
                    .cloned()
                    .ok_or("found undefined alias")?;
                // An alias costs all it stands for, as PyYAML builds it.
                self.spend(size)?;
                self.push(node, 0, size);
            }
            _ => {}
        }
        Ok(())
    }
}

/// The tag PyYAML's implicit resolvers (YAML 1.1, in its order) give a
/// plain scalar; a dumper writes a string unquoted only when this is
/// `tag:yaml.org,2002:str`.
pub fn resolve_plain(value: &str) -> &'static str {
    static RESOLVERS: LazyLock<Vec<(&'static str, Regex)>> = LazyLock::new(|| {
        [
            (
                "tag:yaml.org,2002:bool",
                r"^(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$",
            ),
            (
                "tag:yaml.org,2002:float",
                r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
            ),
            (
                "tag:yaml.org,2002:int",
                r"^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$",
            ),
            ("tag:yaml.org,2002:merge", r"^(?:<<)$"),
            ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$"),
            (
                "tag:yaml.org,2002:timestamp",
                r"^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]|[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?(?:[Tt]|[ \t]+)[0-9][0-9]?:[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$",
            ),
            ("tag:yaml.org,2002:value", r"^(?:=)$"),
        ]
        .into_iter()
        .map(|(tag, re)| (tag, Regex::new(re).expect("PyYAML's resolver regexes compile")))
        .collect()
    });
    RESOLVERS
        .iter()
        .find(|(_, re)| re.is_match(value))
        .map_or("tag:yaml.org,2002:str", |(tag, _)| tag)
}

fn construct(node: &Node) -> Result<Py, String> {
    let tag = node.tag().strip_prefix(TAG).unwrap_or(node.tag());
    match node {
        Node::Scalar { value, .. } => scalar(tag, value),
        Node::Seq { items, .. } => match tag {
            "seq" => items
                .iter()
                .map(|item| construct(item))
                .collect::<Result<_, _>>()
                .map(Py::List),
            other => Err(format!(
                "could not determine a constructor for the tag {other}"
            )),
        },
        Node::Map { pairs, .. } => {
            let pairs = flatten(pairs)?;
            match tag {
                "map" => mapping(&pairs).map(Py::Dict),
                "set" => Ok(Py::Set(
                    mapping(&pairs)?.into_iter().map(|(k, _)| k).collect(),
                )),
                other => Err(format!(
                    "could not determine a constructor for the tag {other}"
                )),
            }
        }
    }
}

type Pairs = Vec<(Rc<Node>, Rc<Node>)>;

/// `flatten_mapping`: `<<` keys merge the mappings they name, without
/// overriding keys given here.
fn flatten(pairs: &[(Rc<Node>, Rc<Node>)]) -> Result<Pairs, String> {
    let mut merged = Vec::new();
    let mut own = Vec::new();
    for (key, value) in pairs {
        if key.tag() != MERGE {
            own.push((key.clone(), value.clone()));
            continue;
        }
        match &**value {
            Node::Map { pairs, .. } => merged.extend(flatten(pairs)?),
            Node::Seq { items, .. } => {
                let mut sub = Vec::new();
                for item in items {
                    let Node::Map { pairs, .. } = &**item else {
                        return Err("expected a mapping for merging".into());
                    };
                    sub.push(flatten(pairs)?);
                }
                sub.reverse();
                merged.extend(sub.into_iter().flatten());
            }
            Node::Scalar { .. } => {
                return Err("expected a mapping or list of mappings for merging".into());
            }
        }
    }
    fn scalar_text(n: &Node) -> Option<&str> {
        match n {
            Node::Scalar { value, .. } => Some(value.as_str()),
            _ => None,
        }
    }
    {
        let existing: HashSet<Option<&str>> = own.iter().map(|(k, _)| scalar_text(k)).collect();
        merged.retain(|(k, _)| !existing.contains(&scalar_text(k)));
    }
    merged.extend(own);
    Ok(merged)
}

/// Salt's `construct_mapping`: hashable keys, none twice.
fn mapping(pairs: &[(Rc<Node>, Rc<Node>)]) -> Result<Vec<(Py, Py)>, String> {
    let mut out: Vec<(Py, Py)> = Vec::with_capacity(pairs.len());
    let mut seen = HashSet::with_capacity(pairs.len());
    for (k, v) in pairs {
        // A `=` key is a string here (Salt's flatten_mapping).
        let key = match &**k {
            Node::Scalar { tag, value } if tag == VALUE => Py::Str(value.clone()),
            k => construct(k)?,
        };
        if matches!(key, Py::List(_) | Py::Dict(_) | Py::Set(_)) {
            return Err("found unacceptable key".into());
        }
        if let Some(id) = KeyId::of(&key)
            && !seen.insert(id)
        {
            return Err("found conflicting ID".into());
        }
        out.push((key, construct(v)?));
    }
    Ok(out)
}

/// A dict key as Python's `==` tells keys apart (`1 == 1.0 == True`), to
/// find a repeated key in a hash set rather than by comparing each key
/// with every other.
#[derive(PartialEq, Eq, Hash)]
enum KeyId {
    None,
    /// A bool, int or float, by the bits of its value as a float.
    Number(u64),
    BigInt(String),
    Str(String),
    Bytes(Vec<u8>),
}

impl KeyId {
    /// `None` for a key equal to no other (NaN).
    fn of(key: &Py) -> Option<KeyId> {
        let number = |f: f64| {
            // -0.0 == 0.0; NaN equals nothing.
            (!f.is_nan()).then(|| KeyId::Number(if f == 0.0 { 0 } else { f.to_bits() }))
        };
        match key {
            Py::None => Some(KeyId::None),
            Py::Bool(b) => number(f64::from(u8::from(*b))),
            Py::Int(i) => number(*i as f64),
            Py::Float(f) => number(*f),
            Py::BigInt(s) => Some(KeyId::BigInt(s.clone())),
            Py::Str(s) => Some(KeyId::Str(s.clone())),
            Py::Bytes(b) => Some(KeyId::Bytes(b.clone())),
            Py::List(_) | Py::Set(_) | Py::Dict(_) => None,
        }
    }
}

fn scalar(tag: &str, value: &str) -> Result<Py, String> {
    match tag {
        "str" | "timestamp" | "python/unicode" => Ok(Py::Str(value.to_string())),
        "null" => Ok(Py::None),
        "bool" => match value.to_lowercase().as_str() {
            "yes" | "true" | "on" => Ok(Py::Bool(true)),
            "no" | "false" | "off" => Ok(Py::Bool(false)),
            _ => Err(format!("not a bool: {value}")),
        },
        "int" => int(value),
        "float" => float(value),
        "binary" => {
            use base64::Engine as _;
            if !value.is_ascii() {
                return Err("failed to convert base64 data into ascii".into());
            }
            // `base64.decodebytes` skips whitespace; Salt pads.
            let mut clean: String = value.chars().filter(|c| !c.is_ascii_whitespace()).collect();
            while !clean.len().is_multiple_of(4) {
                clean.push('=');
            }
            base64::engine::general_purpose::STANDARD
                .decode(clean)
                .map(Py::Bytes)
                .map_err(|e| format!("failed to decode base64 data: {e}"))
        }
        other => Err(format!(
            "could not determine a constructor for the tag {other}"
        )),
    }
}

/// Salt's `construct_scalar` (leading zeros make no octal), then PyYAML's
/// `construct_yaml_int`.
fn int(text: &str) -> Result<Py, String> {
    let mut value = text.to_string();
    if value != "0"
        && value.starts_with('0')
        && !value.starts_with("0b")
        && !value.starts_with("0x")
    {
        value = value.trim_start_matches('0').to_string();
        if value.is_empty() {
            value = "0".into();
        }
    }
    let value = value.replace('_', "");
    let bad = || format!("invalid literal for int(): {text:?}");
    let (sign, digits) = match value.strip_prefix('-') {
        Some(rest) => (-1i128, rest),
        None => (1, value.strip_prefix('+').unwrap_or(&value)),
    };
    if digits == "0" {
        return Ok(Py::Int(0));
    }
    let parsed = if let Some(bin) = digits.strip_prefix("0b") {
        i128::from_str_radix(bin, 2)
    } else if let Some(hex) = digits.strip_prefix("0x") {
        i128::from_str_radix(hex, 16)
    } else if digits.starts_with('0') {
        i128::from_str_radix(digits, 8)
    } else if digits.contains(':') {
        let mut total: i128 = 0;
        for part in digits.split(':') {
            let part: i128 = part.trim().parse().map_err(|_| bad())?;
            total = total
                .checked_mul(60)
                .and_then(|t| t.checked_add(part))
                .ok_or_else(bad)?;
        }
        Ok(total)
    } else if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        match digits.parse::<i128>() {
            Ok(n) => Ok(n),
            // Python's ints have no bound.
            Err(_) => {
                let digits = digits.trim_start_matches('0');
                return Ok(Py::BigInt(if sign < 0 {
                    format!("-{digits}")
                } else {
                    digits.to_string()
                }));
            }
        }
    } else {
        return Err(bad());
    };
    parsed.map(|n| Py::Int(sign * n)).map_err(|_| bad())
}

/// PyYAML's `construct_yaml_float`.
fn float(text: &str) -> Result<Py, String> {
    let value = text.replace('_', "").to_lowercase();
    let (sign, rest) = match value.strip_prefix('-') {
        Some(rest) => (-1.0, rest),
        None => (1.0, value.strip_prefix('+').unwrap_or(&value)),
    };
    let bad = || format!("could not convert string to float: {text:?}");
    let f = if rest == ".inf" {
        f64::INFINITY
    } else if rest == ".nan" {
        f64::NAN
    } else if rest.contains(':') {
        let mut total = 0.0;
        for part in rest.split(':') {
            total = total * 60.0 + py_float(part).ok_or_else(bad)?;
        }
        total
    } else {
        py_float(rest).ok_or_else(bad)?
    };
    Ok(Py::Float(sign * f))
}

/// Python's `float(s)` for the texts YAML hands it.
fn py_float(s: &str) -> Option<f64> {
    let s = s.trim();
    match s {
        "inf" | "infinity" => Some(f64::INFINITY),
        "nan" => Some(f64::NAN),
        _ if s
            .bytes()
            .all(|b| b.is_ascii_digit() || b"+-.e".contains(&b)) =>
        {
            s.parse().ok()
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(s: &str) -> Py {
        safe_load(s).unwrap_or_else(|e| panic!("{s:?}: {e}"))
    }

    #[test]
    fn yaml_1_1_scalars_as_pyyaml_with_salts_changes() {
        assert_eq!(load("010"), Py::Int(10));
        assert_eq!(load("-010"), Py::Int(-8));
        assert_eq!(load("08"), Py::Str("08".into()));
        assert_eq!(load("1:30"), Py::Int(90));
        assert_eq!(load("12:30:45"), Py::Int(45045));
        assert_eq!(load("0x1F"), Py::Int(31));
        assert_eq!(load("0b101"), Py::Int(5));
        assert_eq!(load("0o17"), Py::Str("0o17".into()));
        assert_eq!(load("1e3"), Py::Str("1e3".into()));
        assert_eq!(load("1.0e+3"), Py::Float(1000.0));
        assert_eq!(load(".5"), Py::Float(0.5));
        assert_eq!(load("5."), Py::Float(5.0));
        assert_eq!(load(".inf"), Py::Float(f64::INFINITY));
        assert_eq!(load("yes"), Py::Bool(true));
        assert_eq!(load("y"), Py::Str("y".into()));
        assert_eq!(load("~"), Py::None);
        assert_eq!(load("2026-11-24"), Py::Str("2026-11-24".into()));
        assert_eq!(load("'quoted'"), Py::Str("quoted".into()));
        assert_eq!(load("!!str 1"), Py::Str("1".into()));
        assert_eq!(load("! foo"), Py::Str("foo".into()));
        assert_eq!(load("! 12"), Py::Str("12".into()));
        assert_eq!(load("!!binary aGk"), Py::Bytes(b"hi".to_vec()));
        assert_eq!(load("&a 1"), Py::Int(1));
        assert_eq!(
            load("123456789012345678901234567890123456789012"),
            Py::BigInt("123456789012345678901234567890123456789012".into())
        );
        assert_eq!(
            load("{a: 1, b: [x, 2]}"),
            Py::Dict(vec![
                (Py::Str("a".into()), Py::Int(1)),
                (
                    Py::Str("b".into()),
                    Py::List(vec![Py::Str("x".into()), Py::Int(2)])
                )
            ])
        );
        assert!(safe_load("{a: 1, a: 2}").is_err());
        assert!(safe_load("*a").is_err());
        assert!(safe_load("!!int 0o17").is_err());
    }

    #[test]
    fn keys_equal_as_python_compares_them_conflict() {
        for doc in [
            "{1: a, 1.0: b}",
            "{1: a, true: b}",
            "{0: a, -0.0: b}",
            "{~: a, null: b}",
        ] {
            assert_eq!(
                safe_load(doc).unwrap_err().0,
                "found conflicting ID",
                "{doc}"
            );
        }
        assert!(safe_load("{.nan: a, .nan: b}").is_ok());
        assert!(safe_load("{1: a, '1': b, !!binary MQ==: c}").is_ok());
        // Thousands of keys are told apart in linear time.
        let many: Vec<String> = (0..20_000).map(|i| format!("k{i}: {i}")).collect();
        let started = std::time::Instant::now();
        let Py::Dict(pairs) = load(&format!("{{{}}}", many.join(", "))) else {
            panic!("a dict")
        };
        assert_eq!(pairs.len(), 20_000);
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
    }

    #[test]
    fn anchors_aliases_and_merges_within_the_budget() {
        let Py::Dict(pairs) =
            load("base: &b {x: 1, y: 2}\nweb: {<<: *b, y: 3}\nlist: &l [a, b]\nagain: *l\n")
        else {
            panic!("a dict")
        };
        assert_eq!(
            pairs[1].1,
            Py::Dict(vec![
                (Py::Str("x".into()), Py::Int(1)),
                (Py::Str("y".into()), Py::Int(3)),
            ])
        );
        assert_eq!(pairs[3].1, pairs[2].1);
        assert!(safe_load("{<<: [*a]}").is_err());
    }

    /// "Billion laughs": each level names the one before ten times. PyYAML
    /// builds every copy; here the document is refused as the alias that
    /// would exceed its budget is read.
    #[test]
    fn nested_aliases_are_refused_before_they_are_expanded() {
        let mut doc = String::from("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
        for i in 1..10 {
            let prev = format!("*a{}", i - 1);
            doc.push_str(&format!("a{i}: &a{i} [{}]\n", vec![prev; 10].join(", ")));
        }
        assert!(doc.len() < 600, "{}", doc.len());
        let started = std::time::Instant::now();
        let err = safe_load(&doc).unwrap_err();
        assert!(err.0.contains("aliases are expanded"), "{err}");
        assert!(started.elapsed() < std::time::Duration::from_millis(100));
        // One large scalar named many times is refused as well.
        let big = "x".repeat(10_000);
        let doc = format!("[&s {big}, {}]", vec!["*s"; 100].join(", "));
        assert!(
            safe_load(&doc)
                .unwrap_err()
                .0
                .contains("aliases are expanded")
        );
        // A few aliases of a small node are fine.
        assert_eq!(
            load("[&s abc, *s, *s]"),
            Py::List(vec![Py::Str("abc".into()); 3])
        );
    }

    #[test]
    fn nesting_is_bounded_in_every_style() {
        let deep = MAX_DEPTH + 1;
        let flow = format!("{}{}", "[".repeat(deep), "]".repeat(deep));
        let block: String = (0..deep)
            .map(|i| format!("{}-\n", "  ".repeat(i)))
            .collect();
        let mapping: String = (0..deep)
            .map(|i| format!("{}k:\n", "  ".repeat(i)))
            .collect();
        for doc in [&flow, &block, &mapping] {
            let err = safe_load(doc).unwrap_err();
            assert!(err.0.contains("nests deeper"), "{err}");
        }
        // Block nesting far past any stack: refused, not a crash.
        let very: String = "- ".repeat(200_000) + "x";
        assert!(safe_load(&very).unwrap_err().0.contains("nests deeper"));
        // Through an alias too.
        let inner = format!("{}{}", "[".repeat(100), "]".repeat(100));
        let doc = format!("[&d {inner}, {}*d{}]", "[".repeat(40), "]".repeat(40));
        assert!(safe_load(&doc).unwrap_err().0.contains("nests deeper"));
        let ok = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(safe_load(&ok).is_ok());
    }
}
