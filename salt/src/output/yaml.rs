//! Salt's `yaml` outputter: `yaml.safe_dump(data, default_flow_style=False,
//! allow_unicode=True)` through libyaml's emitter (PyYAML's `CSafeDumper`).
//!
//! Keys are sorted; a string that would read back as another type (`yes`,
//! `1`, `''`) or holds an indicator is quoted; plain and single-quoted
//! scalars fold at the first space past column 80; a sequence under a key
//! is not indented. The emitter below follows libyaml's own state for
//! indentation (`indent`, `indention`, `whitespace`, `column`) so folding
//! and indentation land where libyaml puts them.

use serde_json::{Map, Value};

use crate::python;
use crate::yaml11;

const BEST_WIDTH: usize = 80;

/// `safe_dump(data)`; `indent` is Salt's `output_indent` (PyYAML honours
/// 2..=9, else 2). A negative one asks for flow style (`{a: [1, 2]}`).
pub fn dump(data: &Value, indent: Option<i64>) -> String {
    let best_indent = match indent {
        Some(n) if (2..=9).contains(&n) => n as usize,
        _ => 2,
    };
    let mut e = Emitter {
        out: String::new(),
        column: 0,
        indent: -1,
        best_indent,
        whitespace: true,
        indention: true,
        flow: indent.is_some_and(|n| n < 0),
        flow_level: 0,
    };
    e.node(data, Context::Root);
    if e.column > 0 {
        e.out.push('\n');
    }
    e.out
}

#[derive(Clone, Copy, PartialEq)]
enum Context {
    Root,
    SequenceItem,
    MappingValue,
    SimpleKey,
}

struct Emitter {
    out: String,
    column: usize,
    /// libyaml's current block indent (-1 before the first block).
    indent: i64,
    best_indent: usize,
    /// The last character written was whitespace.
    whitespace: bool,
    /// Only indentation has been written on this line.
    indention: bool,
    /// `default_flow_style=True`: every collection in flow style.
    flow: bool,
    /// How deep in flow collections the emitter is.
    flow_level: usize,
}

/// What libyaml's `yaml_emitter_analyze_scalar` finds in a scalar.
struct Analysis {
    empty: bool,
    multiline: bool,
    allow_flow_plain: bool,
    allow_block_plain: bool,
    allow_single_quoted: bool,
}

fn is_break(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

fn is_blankz(c: Option<char>) -> bool {
    matches!(c, None | Some(' ' | '\t' | '\0')) || c.is_some_and(is_break)
}

/// libyaml's `IS_PRINTABLE`: no control characters, nothing beyond the
/// Basic Multilingual Plane, no BOM or non-characters.
fn is_printable(c: char) -> bool {
    let u = c as u32;
    u == 0x0A
        || (0x20..=0x7E).contains(&u)
        || (0xA0..=0xD7FF).contains(&u)
        || ((0xE000..=0xFFFD).contains(&u) && u != 0xFEFF)
}

/// libyaml's `yaml_emitter_analyze_scalar`: which styles `s` may take.
fn analyze(s: &str) -> Analysis {
    if s.is_empty() {
        return Analysis {
            empty: true,
            multiline: false,
            allow_flow_plain: false,
            allow_block_plain: true,
            allow_single_quoted: true,
        };
    }
    let chars: Vec<char> = s.chars().collect();
    let mut scan = Scan::default();
    if s.starts_with("---") || s.starts_with("...") {
        scan.block_indicators = true;
        scan.flow_indicators = true;
    }
    let mut preceded_by_whitespace = true;
    for (i, &c) in chars.iter().enumerate() {
        let followed_by_whitespace = is_blankz(chars.get(i + 1).copied());
        scan.indicators(c, i == 0, preceded_by_whitespace, followed_by_whitespace);
        if !is_printable(c) {
            scan.special = true;
        }
        if is_break(c) {
            scan.line_breaks = true;
        }
        scan.spaces_and_breaks(c, i == 0, i == chars.len() - 1);
        preceded_by_whitespace = is_blankz(Some(c));
    }
    scan.analysis()
}

/// What [`analyze`] has found in a non-empty scalar so far: libyaml's
/// local flags in `yaml_emitter_analyze_scalar`, under its names.
#[derive(Default)]
struct Scan {
    block_indicators: bool,
    flow_indicators: bool,
    line_breaks: bool,
    special: bool,
    leading_space: bool,
    leading_break: bool,
    trailing_space: bool,
    trailing_break: bool,
    break_space: bool,
    space_break: bool,
    previous_space: bool,
    previous_break: bool,
}

impl Scan {
    /// Indicators: characters that would read as YAML syntax, at the start
    /// (`first`) or further in, depending on the whitespace around them.
    fn indicators(
        &mut self,
        c: char,
        first: bool,
        preceded_by_whitespace: bool,
        followed_by_whitespace: bool,
    ) {
        if first {
            if "#,[]{}&*!|>'\"%@`".contains(c) {
                self.flow_indicators = true;
                self.block_indicators = true;
            }
            if c == '?' || c == ':' {
                self.flow_indicators = true;
                if followed_by_whitespace {
                    self.block_indicators = true;
                }
            }
            if c == '-' && followed_by_whitespace {
                self.flow_indicators = true;
                self.block_indicators = true;
            }
        } else {
            if ",?[]{}".contains(c) {
                self.flow_indicators = true;
            }
            if c == ':' {
                self.flow_indicators = true;
                if followed_by_whitespace {
                    self.block_indicators = true;
                }
            }
            if c == '#' && preceded_by_whitespace {
                self.flow_indicators = true;
                self.block_indicators = true;
            }
        }
    }

    /// Spaces and line breaks: leading, trailing, and a space next to a
    /// break, which no plain (or single-quoted) scalar can carry.
    fn spaces_and_breaks(&mut self, c: char, first: bool, last: bool) {
        if c == ' ' {
            if first {
                self.leading_space = true;
            }
            if last {
                self.trailing_space = true;
            }
            if self.previous_break {
                self.break_space = true;
            }
            self.previous_space = true;
            self.previous_break = false;
        } else if is_break(c) {
            if first {
                self.leading_break = true;
            }
            if last {
                self.trailing_break = true;
            }
            if self.previous_space {
                self.space_break = true;
            }
            self.previous_space = false;
            self.previous_break = true;
        } else {
            self.previous_space = false;
            self.previous_break = false;
        }
    }

    /// The styles the scan allows, as libyaml decides them from its flags.
    fn analysis(&self) -> Analysis {
        let mut allow_block_plain = true;
        let mut allow_single_quoted = true;
        if self.leading_space || self.leading_break || self.trailing_space || self.trailing_break {
            allow_block_plain = false;
        }
        if self.break_space {
            allow_block_plain = false;
            allow_single_quoted = false;
        }
        if self.space_break || self.special {
            allow_block_plain = false;
            allow_single_quoted = false;
        }
        let mut allow_flow_plain = allow_block_plain;
        if self.line_breaks {
            allow_block_plain = false;
            allow_flow_plain = false;
        }
        if self.flow_indicators {
            allow_flow_plain = false;
        }
        if self.block_indicators {
            allow_block_plain = false;
        }
        Analysis {
            empty: false,
            multiline: self.line_breaks,
            allow_flow_plain,
            allow_block_plain,
            allow_single_quoted,
        }
    }
}

/// The text SafeRepresenter writes for a scalar, and whether it may be
/// plain (it reads back as what it is).
fn represent(v: &Value) -> (String, bool) {
    match v {
        Value::Null => ("null".into(), true),
        Value::Bool(b) => (if *b { "true" } else { "false" }.into(), true),
        Value::Number(n) if n.is_i64() || n.is_u64() => (n.to_string(), true),
        Value::Number(n) => {
            let f = n.as_f64().unwrap_or(f64::NAN);
            let mut text = python::float(f).to_lowercase();
            if f.is_nan() {
                text = ".nan".into();
            } else if f.is_infinite() {
                text = if f > 0.0 { ".inf" } else { "-.inf" }.into();
            } else if !text.contains('.') && text.contains('e') {
                text = text.replacen('e', ".0e", 1);
            }
            (text, true)
        }
        // Plain only when the resolver would read it back as a string.
        Value::String(s) => (
            s.clone(),
            yaml11::resolve_plain(s) == "tag:yaml.org,2002:str",
        ),
        _ => (String::new(), false),
    }
}

impl Emitter {
    fn put(&mut self, s: &str) {
        for c in s.chars() {
            self.out.push(c);
            self.column += 1;
        }
    }

    fn put_break(&mut self) {
        self.out.push('\n');
        self.column = 0;
    }

    fn write_indicator(
        &mut self,
        indicator: &str,
        need_whitespace: bool,
        is_whitespace: bool,
        is_indention: bool,
    ) {
        if need_whitespace && !self.whitespace {
            self.put(" ");
        }
        self.put(indicator);
        self.whitespace = is_whitespace;
        self.indention = self.indention && is_indention;
    }

    fn write_indent(&mut self) {
        let indent = self.indent.max(0) as usize;
        if !self.indention || self.column > indent || (self.column == indent && !self.whitespace) {
            self.put_break();
        }
        while self.column < indent {
            self.put(" ");
        }
        self.whitespace = true;
        self.indention = true;
    }

    fn increase_indent(&mut self, flow: bool, indentless: bool) {
        if self.indent < 0 {
            self.indent = if flow { self.best_indent as i64 } else { 0 };
        } else if !indentless {
            self.indent += self.best_indent as i64;
        }
    }

    fn node(&mut self, v: &Value, ctx: Context) {
        if self.flow || self.flow_level > 0 {
            match v {
                Value::Array(items) => return self.flow_sequence(items),
                Value::Object(map) => return self.flow_mapping(map),
                _ => {}
            }
        }
        match v {
            Value::Array(items) if !items.is_empty() => self.block_sequence(items, ctx),
            Value::Object(map) if !map.is_empty() => self.block_mapping(map),
            Value::Array(_) => self.flow_empty("[]"),
            Value::Object(_) => self.flow_empty("{}"),
            scalar => self.scalar(scalar, ctx),
        }
    }

    fn flow_empty(&mut self, text: &str) {
        self.write_indicator(&text[..1], true, true, false);
        self.write_indicator(&text[1..], false, false, false);
    }

    fn flow_sequence(&mut self, items: &[Value]) {
        self.write_indicator("[", true, true, false);
        let saved = self.indent;
        self.increase_indent(true, false);
        self.flow_level += 1;
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                self.write_indicator(",", false, false, false);
            }
            if self.column > BEST_WIDTH {
                self.write_indent();
            }
            self.node(item, Context::SequenceItem);
        }
        self.flow_level -= 1;
        self.indent = saved;
        self.write_indicator("]", false, false, false);
    }

    fn flow_mapping(&mut self, map: &Map<String, Value>) {
        self.write_indicator("{", true, true, false);
        let saved = self.indent;
        self.increase_indent(true, false);
        self.flow_level += 1;
        let mut keys: Vec<&String> = map.keys().collect();
        keys.sort();
        for (i, key) in keys.into_iter().enumerate() {
            if i > 0 {
                self.write_indicator(",", false, false, false);
            }
            if self.column > BEST_WIDTH {
                self.write_indent();
            }
            self.scalar(&Value::String(key.clone()), Context::SimpleKey);
            self.write_indicator(":", false, false, false);
            self.node(&map[key], Context::MappingValue);
        }
        self.flow_level -= 1;
        self.indent = saved;
        self.write_indicator("}", false, false, false);
    }

    fn block_sequence(&mut self, items: &[Value], ctx: Context) {
        let saved = self.indent;
        let indentless = ctx == Context::MappingValue && !self.indention;
        self.increase_indent(false, indentless);
        for item in items {
            self.write_indent();
            self.write_indicator("-", true, false, true);
            self.node(item, Context::SequenceItem);
        }
        self.indent = saved;
    }

    fn block_mapping(&mut self, map: &Map<String, Value>) {
        let saved = self.indent;
        self.increase_indent(false, false);
        let mut keys: Vec<&String> = map.keys().collect();
        keys.sort();
        for key in keys {
            self.write_indent();
            self.scalar(&Value::String(key.clone()), Context::SimpleKey);
            self.write_indicator(":", false, false, false);
            self.node(&map[key], Context::MappingValue);
        }
        self.indent = saved;
    }

    fn scalar(&mut self, v: &Value, ctx: Context) {
        let (text, implicit) = represent(v);
        let a = analyze(&text);
        let simple_key = ctx == Context::SimpleKey;
        let allowed = if self.flow_level > 0 {
            a.allow_flow_plain
        } else {
            a.allow_block_plain
        };
        let plain = implicit && !(simple_key && (a.empty || a.multiline)) && allowed;
        let single = !plain && a.allow_single_quoted && !(simple_key && a.multiline);
        let saved = self.indent;
        self.increase_indent(true, false);
        if plain {
            self.write_plain(&text, !simple_key);
        } else if single {
            self.write_single_quoted(&text, !simple_key);
        } else {
            self.write_double_quoted(&text, !simple_key);
        }
        self.indent = saved;
    }

    fn write_plain(&mut self, s: &str, allow_breaks: bool) {
        if !self.whitespace && (!s.is_empty() || self.flow_level > 0) {
            self.put(" ");
        }
        let chars: Vec<char> = s.chars().collect();
        let mut spaces = false;
        for (i, &c) in chars.iter().enumerate() {
            if c == ' ' {
                if allow_breaks
                    && !spaces
                    && self.column > BEST_WIDTH
                    && chars.get(i + 1) != Some(&' ')
                {
                    self.write_indent();
                } else {
                    self.put(" ");
                }
                spaces = true;
            } else {
                self.put(&c.to_string());
                self.indention = false;
                spaces = false;
            }
        }
        self.whitespace = false;
        self.indention = false;
    }

    fn write_single_quoted(&mut self, s: &str, allow_breaks: bool) {
        self.write_indicator("'", true, false, false);
        let chars: Vec<char> = s.chars().collect();
        let (mut spaces, mut breaks) = (false, false);
        for (i, &c) in chars.iter().enumerate() {
            if c == ' ' {
                if allow_breaks
                    && !spaces
                    && self.column > BEST_WIDTH
                    && i != 0
                    && i != chars.len() - 1
                    && chars.get(i + 1) != Some(&' ')
                {
                    self.write_indent();
                } else {
                    self.put(" ");
                }
                spaces = true;
            } else if is_break(c) {
                if !breaks && c == '\n' {
                    self.put_break();
                }
                if c == '\n' {
                    self.put_break();
                } else {
                    self.out.push(c);
                    self.column = 0;
                }
                self.indention = true;
                breaks = true;
            } else {
                if breaks {
                    self.write_indent();
                }
                if c == '\'' {
                    self.put("''");
                } else {
                    self.put(&c.to_string());
                }
                self.indention = false;
                spaces = false;
                breaks = false;
            }
        }
        if breaks {
            self.write_indent();
        }
        self.write_indicator("'", false, false, false);
    }

    fn write_double_quoted(&mut self, s: &str, allow_breaks: bool) {
        self.write_indicator("\"", true, false, false);
        let chars: Vec<char> = s.chars().collect();
        let mut spaces = false;
        for (i, &c) in chars.iter().enumerate() {
            if !is_printable(c) || c == '\u{FEFF}' || is_break(c) || c == '"' || c == '\\' {
                let esc = match c {
                    '\0' => "0".to_string(),
                    '\x07' => "a".into(),
                    '\x08' => "b".into(),
                    '\t' => "t".into(),
                    '\n' => "n".into(),
                    '\x0b' => "v".into(),
                    '\x0c' => "f".into(),
                    '\r' => "r".into(),
                    '\x1b' => "e".into(),
                    '"' => "\"".into(),
                    '\\' => "\\".into(),
                    '\u{85}' => "N".into(),
                    '\u{A0}' => "_".into(),
                    '\u{2028}' => "L".into(),
                    '\u{2029}' => "P".into(),
                    c if (c as u32) <= 0xFF => format!("x{:02X}", c as u32),
                    c if (c as u32) <= 0xFFFF => format!("u{:04X}", c as u32),
                    c => format!("U{:08X}", c as u32),
                };
                self.put("\\");
                self.put(&esc);
                spaces = false;
            } else if c == ' ' {
                if allow_breaks
                    && !spaces
                    && self.column > BEST_WIDTH
                    && i != 0
                    && i != chars.len() - 1
                {
                    self.write_indent();
                    if chars.get(i + 1) == Some(&' ') {
                        self.put("\\");
                    }
                } else {
                    self.put(" ");
                }
                spaces = true;
            } else {
                self.put(&c.to_string());
                spaces = false;
            }
        }
        self.write_indicator("\"", false, false, false);
    }
}
