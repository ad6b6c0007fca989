//! The tables every command prints, aligned for the terminal and in
//! Markdown (for BENCHMARKS.md and docs/reliability.md), and how their
//! cells write durations, counts, sizes and ratios.
//!
//! One place for both renderings, so the text and the Markdown of a run
//! always carry the same rows in the same order.

use std::time::Duration;

/// A duration in µs, ms or s, whichever reads best.
pub(super) fn fmt_dur(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 1000.0 {
        format!("{us:.0} µs")
    } else if us < 1e6 {
        format!("{:.2} ms", us / 1e3)
    } else {
        format!("{:.2} s", us / 1e6)
    }
}

/// A difference in µs (may be negative), in ms from a thousand.
pub(super) fn fmt_signed_us(us: f64) -> String {
    if us.abs() < 1000.0 {
        format!("{us:.0} µs")
    } else {
        format!("{:.2} ms", us / 1e3)
    }
}

/// A count, rounded, its thousands set apart by spaces.
pub(super) fn fmt_count(n: f64) -> String {
    let digits = format!("{:.0}", n.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

/// KiB as MB (10^6 bytes), one decimal.
pub(super) fn fmt_mb(kib: u64) -> String {
    format!("{:.1} MB", kib as f64 * 1024.0 / 1e6)
}

/// A ratio, two decimals below 10, none from 10.
pub(super) fn fmt_ratio(r: f64) -> String {
    if r >= 10.0 {
        format!("{r:.0}")
    } else {
        format!("{r:.2}")
    }
}

/// A table, rendered aligned for the terminal and as Markdown.
pub(super) struct Table {
    title: String,
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub(super) fn new(title: &str, header: &[&str]) -> Table {
        Table {
            title: title.into(),
            header: header.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub(super) fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub(super) fn text(&self) -> String {
        let width = |i: usize| {
            std::iter::once(&self.header)
                .chain(&self.rows)
                .map(|r| r.get(i).map(|c| c.chars().count()).unwrap_or(0))
                .max()
                .unwrap_or(0)
        };
        let widths: Vec<usize> = (0..self.header.len()).map(width).collect();
        let line = |cells: &Vec<String>| {
            let mut s = String::new();
            for (i, w) in widths.iter().enumerate() {
                let cell = cells.get(i).map(String::as_str).unwrap_or("");
                let pad = w - cell.chars().count();
                if i == 0 {
                    s.push_str(cell);
                    s.push_str(&" ".repeat(pad));
                } else {
                    s.push_str("  ");
                    s.push_str(&" ".repeat(pad));
                    s.push_str(cell);
                }
            }
            s.trim_end().to_string() + "\n"
        };
        let mut out = format!("{}\n", self.title);
        out.push_str(&line(&self.header));
        let total: usize = widths.iter().sum::<usize>() + 2 * (widths.len() - 1);
        out.push_str(&"-".repeat(total));
        out.push('\n');
        for r in &self.rows {
            out.push_str(&line(r));
        }
        out
    }

    pub(super) fn markdown(&self) -> String {
        let mut out = format!("**{}**\n\n", self.title);
        out.push_str(&format!("| {} |\n", self.header.join(" | ")));
        let rule: Vec<&str> = (0..self.header.len())
            .map(|i| if i == 0 { "---" } else { "---:" })
            .collect();
        out.push_str(&format!("|{}|\n", rule.join("|")));
        for r in &self.rows {
            out.push_str(&format!("| {} |\n", r.join(" | ")));
        }
        out
    }
}
