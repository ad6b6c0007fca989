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

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser, Tag};
use yaml_rust2::scanner::{Marker, TScalarStyle};

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

/// `yaml.load(text, Loader=SaltYamlSafeLoader)`; `Err` where PyYAML
/// raises.
pub fn safe_load(text: &str) -> Result<Py, String> {
    let mut builder = Builder::default();
    let mut parser = Parser::new_from_str(text);
    parser.load(&mut builder, true).map_err(|e| e.to_string())?;
    if let Some(err) = builder.error {
        return Err(err);
    }
    match builder.docs.len() {
        0 => Ok(Py::None),
        1 => construct(&builder.docs.remove(0)),
        _ => Err("expected a single document in the stream".into()),
    }
}

/// A node as PyYAML's composer builds it: tag resolved, nothing built.
#[derive(Debug, Clone)]
enum Node {
    Scalar {
        tag: String,
        value: String,
    },
    Seq {
        tag: String,
        items: Vec<Node>,
    },
    Map {
        tag: String,
        pairs: Vec<(Node, Node)>,
    },
}

impl Node {
    fn tag(&self) -> &str {
        match self {
            Self::Scalar { tag, .. } | Self::Seq { tag, .. } | Self::Map { tag, .. } => tag,
        }
    }
}

/// Builds [`Node`]s from parser events.
#[derive(Default)]
struct Builder {
    docs: Vec<Node>,
    /// Open collections: the node, its anchor, and a key awaiting its value.
    stack: Vec<(Node, usize, Option<Node>)>,
    anchors: HashMap<usize, Node>,
    error: Option<String>,
}

/// `!` alone: the non-specific tag (a string, a list or a dict as plain).
fn non_specific(tag: &Tag) -> bool {
    (tag.handle.is_empty() && tag.suffix == "!") || (tag.handle == "!" && tag.suffix.is_empty())
}

fn full_tag(tag: &Tag) -> String {
    if tag.handle == "!!" {
        format!("{TAG}{}", tag.suffix)
    } else {
        format!("{}{}", tag.handle, tag.suffix)
    }
}

impl Builder {
    fn push(&mut self, node: Node, anchor: usize) {
        if anchor > 0 {
            self.anchors.insert(anchor, node.clone());
        }
        match self.stack.last_mut() {
            None => self.docs.push(node),
            Some((Node::Seq { items, .. }, _, _)) => items.push(node),
            Some((Node::Map { pairs, .. }, _, key)) => match key.take() {
                None => *key = Some(node),
                Some(k) => pairs.push((k, node)),
            },
            Some((Node::Scalar { .. }, _, _)) => unreachable!("scalars hold nothing"),
        }
    }
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, ev: Event, _mark: Marker) {
        if self.error.is_some() {
            return;
        }
        match ev {
            Event::Scalar(value, style, anchor, tag) => {
                let tag = match tag {
                    Some(t) if non_specific(&t) => format!("{TAG}str"),
                    Some(t) => full_tag(&t),
                    None if style == TScalarStyle::Plain => resolve_plain(&value).to_string(),
                    None => format!("{TAG}str"),
                };
                self.push(Node::Scalar { tag, value }, anchor);
            }
            Event::SequenceStart(anchor, tag) => {
                let tag = tag
                    .filter(|t| !non_specific(t))
                    .map_or_else(|| format!("{TAG}seq"), |t| full_tag(&t));
                self.stack.push((
                    Node::Seq {
                        tag,
                        items: Vec::new(),
                    },
                    anchor,
                    None,
                ));
            }
            Event::MappingStart(anchor, tag) => {
                let tag = tag
                    .filter(|t| !non_specific(t))
                    .map_or_else(|| format!("{TAG}map"), |t| full_tag(&t));
                self.stack.push((
                    Node::Map {
                        tag,
                        pairs: Vec::new(),
                    },
                    anchor,
                    None,
                ));
            }
            Event::SequenceEnd | Event::MappingEnd => {
                if let Some((node, anchor, _)) = self.stack.pop() {
                    self.push(node, anchor);
                }
            }
            Event::Alias(id) => match self.anchors.get(&id).cloned() {
                Some(node) => self.push(node, 0),
                None => self.error = Some("found undefined alias".into()),
            },
            _ => {}
        }
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
                .map(construct)
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

/// `flatten_mapping`: `<<` keys merge the mappings they name, without
/// overriding keys given here.
fn flatten(pairs: &[(Node, Node)]) -> Result<Vec<(Node, Node)>, String> {
    let mut merged = Vec::new();
    let mut own = Vec::new();
    for (key, value) in pairs {
        if key.tag() != format!("{TAG}merge") {
            own.push((key.clone(), value.clone()));
            continue;
        }
        match value {
            Node::Map { pairs, .. } => merged.extend(flatten(pairs)?),
            Node::Seq { items, .. } => {
                let mut sub = Vec::new();
                for item in items {
                    let Node::Map { pairs, .. } = item else {
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
    let scalar_text = |n: &Node| match n {
        Node::Scalar { value, .. } => Some(value.clone()),
        _ => None,
    };
    let existing: Vec<Option<String>> = own.iter().map(|(k, _)| scalar_text(k)).collect();
    merged.retain(|(k, _)| !existing.contains(&scalar_text(k)));
    merged.extend(own);
    Ok(merged)
}

/// Salt's `construct_mapping`: hashable keys, none twice.
fn mapping(pairs: &[(Node, Node)]) -> Result<Vec<(Py, Py)>, String> {
    let mut out: Vec<(Py, Py)> = Vec::with_capacity(pairs.len());
    for (k, v) in pairs {
        // A `=` key is a string here (Salt's flatten_mapping).
        let key = match k {
            Node::Scalar { tag, value } if tag == &format!("{TAG}value") => Py::Str(value.clone()),
            k => construct(k)?,
        };
        if matches!(key, Py::List(_) | Py::Dict(_) | Py::Set(_)) {
            return Err("found unacceptable key".into());
        }
        if out.iter().any(|(existing, _)| py_eq(existing, &key)) {
            return Err("found conflicting ID".into());
        }
        out.push((key, construct(v)?));
    }
    Ok(out)
}

/// Python's `==` between dict keys: `1 == 1.0 == True`.
fn py_eq(a: &Py, b: &Py) -> bool {
    let num = |p: &Py| match p {
        Py::Bool(b) => Some(f64::from(u8::from(*b))),
        Py::Int(i) => Some(*i as f64),
        Py::Float(f) => Some(*f),
        _ => None,
    };
    match (num(a), num(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
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
}
