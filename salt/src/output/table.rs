//! Salt's `table` outputter (`salt/output/table_out.py`, 3008.4) with its
//! defaults: each key of a mapping as a heading, each list under it as a
//! table of centred cells, 50 columns wide before a cell wraps at a space.
//!
//! Salt's quirks are kept, since they decide what an operator sees: rows
//! of mixed kinds print no table, a wrapped cell keeps only as many lines
//! as its row's shortest cell, columns past the shortest row are dropped,
//! and data the Python cannot lay out (a row of numbers, a row of no
//! cells) makes it fall back to `nested`, which [`table`] says with `None`.

use serde_json::Value;

use crate::python;

use super::colors::{DARK_GRAY, ENDC, LIGHT_GRAY, WHITE};

/// `TableDisplay`'s defaults.
const WIDTH: usize = 50;
const PREFIX: &str = "| ";
const SUFFIX: &str = " |";
const DELIM: &str = " | ";

/// What `table` prints for `data`, or `None` where Salt's outputter raises
/// and `display_output` falls back to `nested`.
pub fn table(data: &Value, color: bool) -> Option<String> {
    let t = Table { color };
    let mut out = Vec::new();
    t.display(data, 0, &mut out)?;
    Some(out.join("\n"))
}

struct Table {
    color: bool,
}

/// A cell's text as Python's `str.center` places it in `width`.
fn center(text: &str, width: usize) -> String {
    let len = text.chars().count();
    if len >= width {
        return text.to_string();
    }
    let marg = width - len;
    let left = marg / 2 + (marg & width & 1);
    format!("{}{text}{}", " ".repeat(left), " ".repeat(marg - left))
}

/// Python's `str.title()`.
fn title(text: &str) -> String {
    let mut out = String::new();
    let mut prev_cased = false;
    for c in text.chars() {
        if prev_cased {
            out.extend(c.to_lowercase());
        } else {
            out.extend(c.to_uppercase());
        }
        prev_cased = c.is_lowercase() || c.is_uppercase();
    }
    out
}

/// `wrap_onspace`: words joined by a space, or a newline once the line
/// so far and the next word reach the width.
fn wrap_onspace(text: &str) -> String {
    let mut words = text.split(' ');
    let mut line = words.next().unwrap_or_default().to_string();
    for word in words {
        let last = &line[line.rfind('\n').map_or(0, |i| i + 1)..];
        let first = word.split('\n').next().unwrap_or_default();
        let sep = if last.chars().count() + first.chars().count() >= WIDTH {
            '\n'
        } else {
            ' '
        };
        line.push(sep);
        line.push_str(word);
    }
    line
}

/// Python's `type()` of a JSON value, as `display_rows` compares rows.
fn kind(v: &Value) -> u8 {
    match v {
        Value::Null => 0,
        Value::Bool(_) => 1,
        Value::Number(n) if n.is_f64() => 2,
        Value::Number(_) => 3,
        Value::String(_) => 4,
        Value::Array(_) => 5,
        Value::Object(_) => 6,
    }
}

impl Table {
    fn ustring(&self, indent: usize, color: &str, msg: &str, suffix: &str) -> String {
        let (color, endc) = if self.color { (color, ENDC) } else { ("", "") };
        format!("{}{color}{msg}{endc}{suffix}", " ".repeat(indent))
    }

    /// `TableDisplay.display`; `None` where the Python raises.
    fn display(&self, ret: &Value, indent: usize, out: &mut Vec<String>) -> Option<()> {
        match ret {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                for key in keys {
                    out.push(self.ustring(indent, DARK_GRAY, key, ":"));
                    out.push(self.ustring(indent, DARK_GRAY, "----------", ""));
                    match &map[key] {
                        Value::Array(rows) => out.extend(self.display_rows(rows, indent)?),
                        val => self.display(val, indent + 4, out)?,
                    }
                }
            }
            Value::Array(rows) => out.extend(self.display_rows(rows, indent)?),
            _ => {}
        }
        Some(())
    }

    /// `display_rows`: a table of `rows` when they are all of one kind.
    fn display_rows(&self, rows: &[Value], indent: usize) -> Option<Vec<String>> {
        let Some(first) = rows.first() else {
            return Some(Vec::new());
        };
        if rows.iter().any(|r| kind(r) != kind(first)) {
            return Some(Vec::new());
        }
        let mut table: Vec<Vec<String>> = Vec::new();
        match first {
            Value::Object(head) => {
                let mut labels: Vec<&String> = head.keys().collect();
                labels.sort();
                if !labels.is_empty() {
                    table.push(labels.iter().map(|l| title(&l.replace('_', " "))).collect());
                }
                for row in rows {
                    let row = row.as_object()?;
                    let mut keys: Vec<&String> = row.keys().collect();
                    keys.sort();
                    table.push(keys.iter().map(|k| python::str(&row[*k])).collect());
                }
            }
            Value::String(_) => {
                table.extend(rows.iter().map(|r| vec![python::str(r)]));
            }
            // A row that is a list lays out when every cell is a string;
            // anything else makes the Python raise.
            Value::Array(_) => {
                for row in rows {
                    let cells = row.as_array()?;
                    table.push(
                        cells
                            .iter()
                            .map(|c| c.as_str().map(str::to_string))
                            .collect::<Option<_>>()?,
                    );
                }
            }
            _ => return None,
        }
        self.prepare_rows(&table, indent + 4)
    }

    /// `prepare_rows`: the lines of a table of `rows` of cells, a rule
    /// above and below each row (Salt's `separate_rows`).
    fn prepare_rows(&self, rows: &[Vec<String>], indent: usize) -> Option<Vec<String>> {
        // Each logical row as its physical lines: a cell's wrapped lines,
        // zipped with its neighbours' (so as many as the shortest has).
        let mut logical: Vec<Vec<Vec<String>>> = Vec::new();
        for row in rows {
            if row.is_empty() {
                return None;
            }
            let cells: Vec<Vec<String>> = row
                .iter()
                .map(|c| wrap_onspace(c).split('\n').map(str::to_string).collect())
                .collect();
            let height = cells.iter().map(Vec::len).min().unwrap_or(0);
            logical.push(
                (0..height)
                    .map(|i| cells.iter().map(|c| c[i].clone()).collect())
                    .collect(),
            );
        }
        let physical: Vec<&Vec<String>> = logical.iter().flatten().collect();
        let columns = physical.iter().map(|r| r.len()).min()?;
        let widths: Vec<usize> = (0..columns)
            .map(|i| {
                physical
                    .iter()
                    .map(|r| r[i].chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let rule = "-".repeat(
            PREFIX.len()
                + SUFFIX.len()
                + widths.iter().sum::<usize>()
                + DELIM.len() * (columns - 1),
        );
        let mut out = vec![self.ustring(indent, LIGHT_GRAY, &rule, "")];
        for lines in &logical {
            for line in lines {
                let cells: Vec<String> = line
                    .iter()
                    .zip(&widths)
                    .map(|(cell, w)| center(cell, *w))
                    .collect();
                let text = format!("{PREFIX}{}{SUFFIX}", cells.join(DELIM));
                out.push(self.ustring(indent, WHITE, &text, ""));
            }
            out.push(self.ustring(indent, LIGHT_GRAY, &rule, ""));
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_centre_and_labels_title_as_python_does() {
        assert_eq!(center("ab", 5), "  ab ");
        assert_eq!(center("ab", 6), "  ab  ");
        assert_eq!(center("a", 4), " a  ");
        assert_eq!(center("abc", 4), "abc ");
        assert_eq!(title("disk usage_x 1a"), "Disk Usage_X 1A");
    }
}
