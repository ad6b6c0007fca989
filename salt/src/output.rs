//! Salt's outputters, byte for byte: what `salt --out X` and `salt-call
//! --out X` print (Salt 3008.4's `salt/output/*.py`), in colour or not.
//!
//! Each renders `{minion_id: return}`. As `salt.output.display_output`
//! does, the text is right-stripped and printed with one newline, or not at
//! all when empty. An outputter Salt does not ship (3008.4 has no `quiet`
//! or `newline_values_only`) falls back to `nested` with Salt's error line
//! on stderr. `tests/salt.rs` compares every outputter with Salt's own on a
//! corpus of return shapes.
//!
//! `--out highstate` names no outputter of its own: Salt's CLIs then print
//! each return with the outputter its function names (`highstate` for
//! `state.*`, else `nested`), which [`Out::for_function`] says.

pub mod highstate;
pub mod table;
pub mod yaml;

use serde_json::{Map, Value};

use crate::python;

pub use highstate::HighstateOpts;

/// The outputters maid renders.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outputter {
    Nested,
    Json,
    Yaml,
    Txt,
    Raw,
    Pprint,
    Table,
    NoReturn,
    Highstate,
}

impl Outputter {
    /// Salt's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Nested => "nested",
            Self::Json => "json",
            Self::Yaml => "yaml",
            Self::Txt => "txt",
            Self::Raw => "raw",
            Self::Pprint => "pprint",
            Self::Table => "table",
            Self::NoReturn => "no_return",
            Self::Highstate => "highstate",
        }
    }

    fn by_name(name: &str) -> Option<Self> {
        Some(match name {
            "nested" => Self::Nested,
            "json" => Self::Json,
            "yaml" => Self::Yaml,
            // `get_printout` maps `text` to `txt`.
            "txt" | "text" => Self::Txt,
            "raw" => Self::Raw,
            "pprint" => Self::Pprint,
            "table" => Self::Table,
            "no_return" => Self::NoReturn,
            "highstate" => Self::Highstate,
            _ => return None,
        })
    }
}

/// Salt's terminal colours (`salt.utils.color.get_colors`), those its
/// `nested` and `key` outputters use.
pub mod colors {
    pub const RED: &str = "\x1b[0;31m";
    pub const LIGHT_RED: &str = "\x1b[0;1;31m";
    pub const GREEN: &str = "\x1b[0;32m";
    pub const LIGHT_GREEN: &str = "\x1b[0;1;32m";
    pub const YELLOW: &str = "\x1b[0;33m";
    pub const LIGHT_YELLOW: &str = "\x1b[0;1;33m";
    pub const BLUE: &str = "\x1b[0;34m";
    pub const LIGHT_BLUE: &str = "\x1b[0;1;34m";
    pub const MAGENTA: &str = "\x1b[0;35m";
    pub const LIGHT_MAGENTA: &str = "\x1b[0;1;35m";
    pub const CYAN: &str = "\x1b[0;36m";
    pub const DARK_GRAY: &str = "\x1b[0;1;30m";
    pub const LIGHT_GRAY: &str = "\x1b[0;37m";
    pub const WHITE: &str = "\x1b[0;1;37m";
    pub const ENDC: &str = "\x1b[0;0m";

    /// `text` in `tint`, then reset, when `on`; else `text` alone.
    pub fn tinted(on: bool, tint: &str, text: &str) -> String {
        if on {
            format!("{tint}{text}{ENDC}")
        } else {
            text.to_string()
        }
    }
}

/// `--out NAME` as Salt takes it: any name; one it does not know is
/// rendered by `nested`. Colour is off unless [`Out::colored`] turns it
/// on. It renders to a `String`; printing is the command line's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Out {
    /// Salt's `output` opt: the outputter asked for.
    name: String,
    color: bool,
    /// The outputter the function names for its return (a job return's
    /// `out`), which `--out highstate` defers to; `None`: `nested`.
    function: Option<String>,
    /// The `state_*` opts, for the `highstate` outputter.
    state: HighstateOpts,
}

impl Default for Out {
    fn default() -> Self {
        "nested".parse().expect("infallible")
    }
}

impl std::str::FromStr for Out {
    type Err = std::convert::Infallible;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Ok(Self {
            name: name.to_string(),
            color: false,
            function: None,
            state: HighstateOpts::default(),
        })
    }
}

impl std::fmt::Display for Out {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)
    }
}

impl From<Outputter> for Out {
    /// That outputter itself (`highstate` too, whatever the function).
    fn from(o: Outputter) -> Self {
        Self {
            function: Some(o.name().into()),
            ..o.name().parse::<Out>().expect("infallible")
        }
    }
}

impl Out {
    /// The same outputter, colouring as Salt's does when `on`.
    pub fn colored(&self, on: bool) -> Out {
        Out {
            color: on,
            ..self.clone()
        }
    }

    /// The same outputter, for a return whose function names `out` as its
    /// outputter (`highstate` for Salt's `state.*` functions, `nested`
    /// for most others): what `get_printout` does with `--out highstate`,
    /// and with no `--out` at all, which is the same as it.
    pub fn for_function(&self, out: &str) -> Out {
        Out {
            function: Some(out.into()),
            ..self.clone()
        }
    }

    /// The same outputter with the `state_*` opts the `highstate`
    /// outputter reads (`--state-output`, `--state-verbose`, ...).
    pub fn with_state_opts(&self, state: HighstateOpts) -> Out {
        Out {
            state,
            ..self.clone()
        }
    }

    /// The name as asked for, which a job carries in `out`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The name `get_printout` looks up: the one asked for, but for
    /// `highstate`, which means the function's own.
    fn effective(&self) -> &str {
        if self.name == "highstate" {
            self.function.as_deref().unwrap_or("nested")
        } else {
            &self.name
        }
    }

    /// The outputter that renders: the one named, else `nested`.
    pub fn outputter(&self) -> Outputter {
        Outputter::by_name(self.effective()).unwrap_or(Outputter::Nested)
    }

    /// Salt's stderr line for an outputter it does not ship.
    pub fn warning(&self) -> Option<String> {
        Outputter::by_name(self.effective()).is_none().then(|| {
            format!(
                "[ERROR   ] Invalid outputter {} specified, fall back to nested",
                self.effective()
            )
        })
    }

    /// What `display_output` prints on stdout for `data`, given Salt's
    /// `output_indent` (`--out-indent`; `None` when not given).
    pub fn render(&self, data: &Map<String, Value>, indent: Option<i64>) -> String {
        self.render_value(&Value::Object(data.clone()), indent)
    }

    /// [`Self::render`] for data that is no `{id: return}` mapping (the
    /// minion list of `--preview-target`).
    pub fn render_value(&self, data: &Value, indent: Option<i64>) -> String {
        self.render_ret(data, indent, 0)
    }

    /// [`Self::render_value`] of a return with `retcode`, which `nested`
    /// shows in red when it is not 0 and colour is on (Salt's `_retcode`).
    pub fn render_ret(&self, data: &Value, indent: Option<i64>, retcode: i64) -> String {
        let paint = Paint {
            on: self.color,
            retcode,
        };
        let text = match self.outputter() {
            Outputter::Nested => nested_painted(data, paint),
            // Where Salt's table raises, `display_output` falls back to
            // `nested`.
            Outputter::Table => {
                table::table(data, self.color).unwrap_or_else(|| nested_painted(data, paint))
            }
            // Where Salt's highstate raises, `nested` prints the data as
            // it left it.
            Outputter::Highstate => highstate::highstate(data, self.color, &self.state)
                .unwrap_or_else(|left| nested_painted(&left, paint)),
            Outputter::Json => json(data, indent),
            Outputter::Yaml => yaml::dump(data, indent),
            Outputter::Txt => txt(data),
            Outputter::NoReturn => no_return(data, self.color),
            Outputter::Raw => python::repr(data),
            Outputter::Pprint => pprint(data, indent),
        };
        let text = text.trim_end();
        if text.is_empty() {
            String::new()
        } else {
            format!("{text}\n")
        }
    }
}

/// The outputter a function names for its returns (Salt's module
/// `__outputter__`): `highstate` for the `state` functions that run
/// states, `nested` for everything else maid ships.
pub fn function_outputter(fun: &str) -> &'static str {
    match fun.strip_prefix("state.") {
        Some(
            "sls" | "sls_id" | "pkg" | "top" | "single" | "highstate" | "template" | "template_str"
            | "apply" | "test" | "request" | "check_request" | "run_request",
        ) => "highstate",
        _ => "nested",
    }
}

/// Salt's `no_return` outputter (what `salt -v` once showed for minions
/// that did not return): each key in cyan, each line of a string in red,
/// anything else nothing.
pub fn no_return(data: &Value, color: bool) -> String {
    fn display(v: &Value, indent: usize, color: bool, out: &mut String) {
        let pad = " ".repeat(indent);
        match v {
            Value::String(s) => {
                for line in s.split('\n') {
                    out.push_str(&colors::tinted(color, colors::RED, &format!("{pad}{line}")));
                    out.push('\n');
                }
            }
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                for key in keys {
                    out.push_str(&colors::tinted(color, colors::CYAN, &format!("{pad}{key}")));
                    out.push_str(":\n");
                    display(&map[key], indent + 4, color, out);
                }
            }
            _ => {}
        }
    }
    let mut out = String::new();
    display(data, 0, color, &mut out);
    out
}

/// Python's `str.splitlines()`: every line boundary Python knows, no
/// trailing empty line, no line at all for "".
pub fn split_lines(s: &str) -> Vec<&str> {
    split_lines_keepends(s)
        .into_iter()
        .map(|line| {
            line.strip_suffix("\r\n")
                .or_else(|| {
                    line.char_indices()
                        .last()
                        .filter(|&(_, c)| is_line_boundary(c))
                        .map(|(i, _)| &line[..i])
                })
                .unwrap_or(line)
        })
        .collect()
}

fn is_line_boundary(c: char) -> bool {
    matches!(
        c,
        '\n' | '\r'
            | '\x0b'
            | '\x0c'
            | '\x1c'
            | '\x1d'
            | '\x1e'
            | '\u{85}'
            | '\u{2028}'
            | '\u{2029}'
    )
}

/// `str.splitlines(True)`: the lines with their line ends.
fn split_lines_keepends(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if !is_line_boundary(c) {
            continue;
        }
        let mut end = i + c.len_utf8();
        if c == '\r' && chars.peek().map(|&(_, n)| n) == Some('\n') {
            chars.next();
            end += 1;
        }
        out.push(&s[start..end]);
        start = end;
    }
    if start < s.len() {
        out.push(&s[start..]);
    }
    out
}

/// Salt's `nested` outputter (`salt/output/nested.py`), colour off.
pub fn nested(data: &Value) -> String {
    nested_painted(data, Paint::default())
}

/// How `nested` colours: not at all, or as `NestDisplay` does for a
/// return with `retcode` (keys and markers red when it is not 0).
#[derive(Debug, Clone, Copy, Default)]
struct Paint {
    on: bool,
    retcode: i64,
}

impl Paint {
    /// Keys, `----------` and `|_`: `ok` unless the retcode says failure.
    fn structure(self, ok: &'static str) -> &'static str {
        if self.retcode != 0 { colors::RED } else { ok }
    }

    /// `NestDisplay.ustring`: indent, colour, prefix, text, reset, suffix.
    fn line(self, indent: usize, color: &str, prefix: &str, msg: &str, suffix: &str) -> String {
        let text = colors::tinted(self.on, color, &format!("{prefix}{msg}"));
        format!("{}{text}{suffix}", " ".repeat(indent))
    }
}

fn nested_painted(data: &Value, paint: Paint) -> String {
    let mut out = Vec::new();
    nested_display(data, 0, "", paint, &mut out);
    out.join("\n")
}

/// `nested` from column `indent` on (Salt's `nested_indent`), retcode 0:
/// how the highstate outputter shows a state's changes.
fn nested_at(data: &Value, indent: usize, color: bool) -> String {
    let mut out = Vec::new();
    let paint = Paint {
        on: color,
        retcode: 0,
    };
    nested_display(data, indent, "", paint, &mut out);
    out.join("\n")
}

fn nested_display(v: &Value, indent: usize, prefix: &str, paint: Paint, out: &mut Vec<String>) {
    match v {
        Value::Array(items) => {
            let color = paint.structure(colors::GREEN);
            for item in items {
                match item {
                    Value::Array(_) | Value::Object(_) => {
                        out.push(paint.line(indent, color, "", "|_", ""));
                        let p = if item.is_object() { "" } else { "- " };
                        nested_display(item, indent + 2, p, paint, out);
                    }
                    _ => nested_display(item, indent, "- ", paint, out),
                }
            }
        }
        Value::Object(map) => {
            let color = paint.structure(colors::CYAN);
            if indent > 0 {
                out.push(paint.line(indent, color, "", "----------", ""));
            }
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            for key in keys {
                out.push(paint.line(indent, color, prefix, key, ":"));
                nested_display(&map[key], indent + 4, "", paint, out);
            }
        }
        Value::String(s) => {
            // `strip_colors`: an escape character would colour the
            // terminal; Salt shows it as `?`.
            let s = s.replace('\x1b', "?");
            for (i, line) in split_lines(&s).into_iter().enumerate() {
                let p = if i == 0 {
                    prefix.to_string()
                } else {
                    " ".repeat(prefix.chars().count())
                };
                out.push(paint.line(indent, colors::GREEN, &p, line, ""));
            }
        }
        scalar => out.push(paint.line(
            indent,
            colors::LIGHT_YELLOW,
            prefix,
            &python::repr(scalar),
            "",
        )),
    }
}

/// Salt's `json` outputter: Python's `json.dumps(data, indent=4,
/// ensure_ascii=False)`, or with `output_indent` N that indent (a negative
/// one prints one line, with Python's `", "` and `": "` separators).
pub fn json(data: &Value, indent: Option<i64>) -> String {
    let indent = match indent {
        None => Some(4),
        Some(n) if n < 0 => None,
        Some(n) => Some(n as usize),
    };
    let mut out = String::new();
    py_json(data, indent, 0, &mut out);
    out
}

fn py_json(v: &Value, indent: Option<usize>, level: usize, out: &mut String) {
    let newline = |out: &mut String, level: usize| {
        if let Some(n) = indent {
            out.push('\n');
            out.push_str(&" ".repeat(n * level));
        }
    };
    let item_sep = if indent.is_some() { "," } else { ", " };
    match v {
        Value::Array(items) if items.is_empty() => out.push_str("[]"),
        Value::Object(map) if map.is_empty() => out.push_str("{}"),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                }
                newline(out, level + 1);
                py_json(item, indent, level + 1, out);
            }
            newline(out, level);
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                }
                newline(out, level + 1);
                json_str(k, out);
                out.push_str(": ");
                py_json(item, indent, level + 1, out);
            }
            newline(out, level);
            out.push('}');
        }
        Value::String(s) => json_str(s, out),
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(_) => out.push_str(&python::repr(v)),
    }
}

/// A string as Python's `json` writes it with `ensure_ascii=False`.
fn json_str(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Salt's `txt` outputter: `minion: line` for every line of a string
/// return, `minion: str(return)` otherwise.
pub fn txt(data: &Value) -> String {
    let map = match data {
        Value::Object(map) => map,
        Value::String(s) => return format!("{s}\n"),
        other => return format!("{}\n", pprint(other, None)),
    };
    let mut out = String::new();
    for (minion, ret) in map {
        match ret {
            Value::String(s) => {
                for line in split_lines(s) {
                    out.push_str(&format!("{minion}: {line}\n"));
                }
            }
            other => out.push_str(&format!("{minion}: {}\n", python::str(other))),
        }
    }
    out
}

/// Salt's `pprint` outputter: Python's `pprint.pformat(data)` (width 80,
/// dict keys sorted), with `output_indent` as its `indent`.
pub fn pprint(data: &Value, indent: Option<i64>) -> String {
    let per_level = match indent {
        Some(n) if n >= 0 => n as usize,
        _ => 1,
    };
    let mut p = Pprint {
        per_level,
        out: String::new(),
    };
    p.format(data, 0, 0, 0);
    p.out
}

/// Python's `PrettyPrinter` (3.11), for JSON values.
struct Pprint {
    per_level: usize,
    out: String,
}

const PPRINT_WIDTH: usize = 80;

/// `repr()` with dict keys sorted, as `pprint`'s `_safe_repr` writes it.
fn sorted_repr(v: &Value) -> String {
    match v {
        Value::Object(map) => {
            let mut items: Vec<(&String, &Value)> = map.iter().collect();
            items.sort_by(|a, b| a.0.cmp(b.0));
            let items: Vec<String> = items
                .into_iter()
                .map(|(k, v)| format!("{}: {}", python::str_repr(k), sorted_repr(v)))
                .collect();
            format!("{{{}}}", items.join(", "))
        }
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(sorted_repr).collect();
            format!("[{}]", items.join(", "))
        }
        other => python::repr(other),
    }
}

impl Pprint {
    fn format(&mut self, v: &Value, indent: usize, allowance: usize, level: usize) {
        let rep = sorted_repr(v);
        let max_width = PPRINT_WIDTH.saturating_sub(indent + allowance);
        if rep.chars().count() > max_width {
            match v {
                Value::Object(map) if !map.is_empty() => {
                    return self.dict(map, indent, allowance, level + 1);
                }
                Value::Array(items) if !items.is_empty() => {
                    return self.list(items, indent, allowance, level + 1);
                }
                Value::String(s) => return self.string(s, indent, allowance, level + 1),
                _ => {}
            }
        }
        self.out.push_str(&rep);
    }

    fn dict(&mut self, map: &Map<String, Value>, indent: usize, allowance: usize, level: usize) {
        self.out.push('{');
        if self.per_level > 1 {
            self.out.push_str(&" ".repeat(self.per_level - 1));
        }
        let mut items: Vec<(&String, &Value)> = map.iter().collect();
        items.sort_by(|a, b| a.0.cmp(b.0));
        let indent = indent + self.per_level;
        let allowance = allowance + 1;
        let last_index = items.len() - 1;
        for (i, (key, value)) in items.into_iter().enumerate() {
            let last = i == last_index;
            let rep = python::str_repr(key);
            self.out.push_str(&rep);
            self.out.push_str(": ");
            let sub_allowance = if last { allowance } else { 1 };
            self.format(
                value,
                indent + rep.chars().count() + 2,
                sub_allowance,
                level,
            );
            if !last {
                self.out.push_str(",\n");
                self.out.push_str(&" ".repeat(indent));
            }
        }
        self.out.push('}');
    }

    fn list(&mut self, items: &[Value], indent: usize, allowance: usize, level: usize) {
        self.out.push('[');
        let indent = indent + self.per_level;
        if self.per_level > 1 {
            self.out.push_str(&" ".repeat(self.per_level - 1));
        }
        let allowance = allowance + 1;
        let last_index = items.len() - 1;
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                self.out.push_str(",\n");
                self.out.push_str(&" ".repeat(indent));
            }
            let sub_allowance = if i == last_index { allowance } else { 1 };
            self.format(item, indent, sub_allowance, level);
        }
        self.out.push(']');
    }

    /// `_pprint_str`: a long string split into adjacent literals at
    /// line ends and spaces.
    fn string(&mut self, s: &str, indent: usize, allowance: usize, level: usize) {
        let (indent, allowance) = if level == 1 {
            (indent + 1, allowance + 1)
        } else {
            (indent, allowance)
        };
        let max_width = PPRINT_WIDTH.saturating_sub(indent);
        let mut max_width1 = max_width;
        let lines = split_lines_keepends(s);
        let mut chunks: Vec<String> = Vec::new();
        let len = |t: &str| python::str_repr(t).chars().count();
        for (i, line) in lines.iter().enumerate() {
            let last_line = i == lines.len() - 1;
            if last_line {
                max_width1 = max_width1.saturating_sub(allowance);
            }
            if len(line) <= max_width1 {
                chunks.push(python::str_repr(line));
                continue;
            }
            // Alternating runs of non-space then space (`\S*\s*`).
            let parts = space_runs(line);
            let mut max_width2 = max_width;
            let mut current = String::new();
            for (j, part) in parts.iter().enumerate() {
                let candidate = format!("{current}{part}");
                if j == parts.len() - 1 && last_line {
                    max_width2 = max_width2.saturating_sub(allowance);
                }
                if len(&candidate) > max_width2 {
                    if !current.is_empty() {
                        chunks.push(python::str_repr(&current));
                    }
                    current = part.to_string();
                } else {
                    current = candidate;
                }
            }
            if !current.is_empty() {
                chunks.push(python::str_repr(&current));
            }
        }
        if chunks.len() == 1 {
            self.out.push_str(&python::str_repr(s));
            return;
        }
        if level == 1 {
            self.out.push('(');
        }
        for (i, chunk) in chunks.iter().enumerate() {
            if i > 0 {
                self.out.push('\n');
                self.out.push_str(&" ".repeat(indent));
            }
            self.out.push_str(chunk);
        }
        if level == 1 {
            self.out.push(')');
        }
    }
}

/// `re.findall(r'\S*\s*', line)` without the final empty match.
fn space_runs(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = line;
    while !rest.is_empty() {
        let non_space = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let after = &rest[non_space..];
        let space = after
            .find(|c: char| !c.is_whitespace())
            .unwrap_or(after.len());
        let len = non_space + space;
        out.push(&rest[..len]);
        rest = &rest[len..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn local(v: Value) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("local".into(), v);
        m
    }

    fn render(out: &str, v: Value) -> String {
        out.parse::<Out>().unwrap().render(&local(v), None)
    }

    #[test]
    fn floats_print_as_python() {
        for (f, shown) in [(1e16, "1e+16"), (1e-7, "1e-07"), (2.0, "2.0"), (0.1, "0.1")] {
            assert_eq!(render("nested", json!(f)), format!("local:\n    {shown}\n"));
            assert_eq!(render("txt", json!([f])), format!("local: [{shown}]\n"));
            assert_eq!(
                render("json", json!(f)),
                format!("{{\n    \"local\": {shown}\n}}\n")
            );
        }
    }

    #[test]
    fn nested_as_salt() {
        assert_eq!(render("nested", json!(true)), "local:\n    True\n");
        assert_eq!(
            render("nested", json!("a\r\nb\x0bc")),
            "local:\n    a\n    b\n    c\n"
        );
        assert_eq!(render("nested", json!("")), "local:\n");
        let ret = json!({"retcode": 0, "stdout": "hi", "stderr": "", "pid": 7});
        assert_eq!(
            render("nested", ret),
            "local:\n    ----------\n    pid:\n        7\n    retcode:\n        0\n    stderr:\n    stdout:\n        hi\n"
        );
    }

    #[test]
    fn json_as_python_writes_it() {
        assert_eq!(
            render("json", json!("é\x1b")),
            "{\n    \"local\": \"é\\u001b\"\n}\n"
        );
        let one_line = "json"
            .parse::<Out>()
            .unwrap()
            .render(&local(json!({"a": [1, 2]})), Some(-1));
        assert_eq!(one_line, "{\"local\": {\"a\": [1, 2]}}\n");
    }

    #[test]
    fn unknown_outputters_fall_back_to_nested() {
        let quiet: Out = "quiet".parse().unwrap();
        assert_eq!(quiet.render(&local(json!("hi")), None), "local:\n    hi\n");
        assert_eq!(
            quiet.warning().unwrap(),
            "[ERROR   ] Invalid outputter quiet specified, fall back to nested"
        );
        assert_eq!(render("text", json!("a\nb")), "local: a\nlocal: b\n");
    }

    #[test]
    fn out_highstate_defers_to_the_function() {
        let named: Out = "highstate".parse().unwrap();
        assert_eq!(named.outputter(), Outputter::Nested);
        assert_eq!(
            named.for_function("highstate").outputter(),
            Outputter::Highstate
        );
        assert_eq!(
            Out::from(Outputter::Highstate).outputter(),
            Outputter::Highstate
        );
        let json: Out = "json".parse().unwrap();
        assert_eq!(json.for_function("highstate").outputter(), Outputter::Json);
        assert_eq!(
            named.for_function("bogus").warning().unwrap(),
            "[ERROR   ] Invalid outputter bogus specified, fall back to nested"
        );
        let ret = json!({"a_|-b_|-c_|-d": {"result": true, "__run_num__": 0, "comment": "", "changes": {}}});
        let terse = named
            .for_function("highstate")
            .with_state_opts(HighstateOpts {
                state_output: "terse".into(),
                ..HighstateOpts::default()
            });
        assert_eq!(
            terse.render(&local(ret), None),
            "local:\n  Name: c - Function: a.d - Result: Clean\n\nSummary for local\n------------\nSucceeded: 1\nFailed:    0\n------------\nTotal states run:     1\nTotal run time:   0.000 ms\n"
        );
    }

    #[test]
    fn pprint_wraps_as_python() {
        assert_eq!(render("pprint", json!([1, 2])), "{'local': [1, 2]}\n");
        let long: Vec<Value> = (0..30).map(|i| json!(i)).collect();
        let text = render("pprint", json!(long));
        assert!(text.starts_with("{'local': [0,\n           1,\n"), "{text}");
    }

    #[test]
    fn lines_split_as_python() {
        assert_eq!(split_lines("a\nb\r\nc\rd\n"), vec!["a", "b", "c", "d"]);
        assert_eq!(split_lines_keepends("a\nb\r\nc"), vec!["a\n", "b\r\n", "c"]);
        assert!(split_lines("").is_empty());
        assert_eq!(space_runs("ab  cd e"), vec!["ab  ", "cd ", "e"]);
    }
}
