//! Python's `textwrap.fill` (3.11) with the options the highstate
//! outputter gives it for a state's warnings: one indent for every line,
//! tabs expanded, whitespace made spaces, words split after hyphens and
//! broken when longer than a line.

use std::sync::LazyLock;

use fancy_regex::Regex;

use super::py_strip;

/// `TextWrapper.wordsep_re`: runs of whitespace, em-dashes, and words
/// (split after the hyphen of a hyphenated word).
static WORDSEP: LazyLock<Regex> = LazyLock::new(|| {
    let ws = r"[\t\n\x0b\x0c\r ]";
    let nws = r"[^\t\n\x0b\x0c\r ]";
    let wp = r#"[\w!"'&.,?]"#;
    let lt = r"[^\d\W]";
    let pattern = format!(
        r"{ws}+|(?<={wp})-{{2,}}(?=\w)|{nws}+?(?:-(?:(?<={lt}{{2}}-)|(?<={lt}-{lt}-))(?={lt}-?{lt})|(?={ws}|\z)|(?<={wp})(?=-{{2,}}\w))"
    );
    Regex::new(&pattern).expect("textwrap's word separator compiles")
});

/// `textwrap.fill(text, width, initial_indent=indent,
/// subsequent_indent=indent)` with every other option at its default.
pub(super) fn fill(text: &str, width: usize, indent: usize) -> String {
    let text: String = expand_tabs(text)
        .chars()
        .map(|c| if "\t\n\x0b\x0c\r".contains(c) { ' ' } else { c })
        .collect();
    let pad = " ".repeat(indent);
    wrap_chunks(split(&text), width.saturating_sub(indent))
        .into_iter()
        .map(|line| format!("{pad}{line}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `str.expandtabs(8)`.
fn expand_tabs(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut column = 0;
    for c in text.chars() {
        match c {
            '\t' => {
                let n = 8 - column % 8;
                out.push_str(&" ".repeat(n));
                column += n;
            }
            '\n' | '\r' => {
                out.push(c);
                column = 0;
            }
            c => {
                out.push(c);
                column += 1;
            }
        }
    }
    out
}

/// `wordsep_re.split(text)` without the empty pieces.
fn split(text: &str) -> Vec<String> {
    let mut chunks = Vec::new();
    let mut last = 0;
    for m in WORDSEP.find_iter(text).flatten() {
        if m.start() > last {
            chunks.push(text[last..m.start()].to_string());
        }
        chunks.push(m.as_str().to_string());
        last = m.end();
    }
    if last < text.len() {
        chunks.push(text[last..].to_string());
    }
    chunks
}

fn len(s: &str) -> usize {
    s.chars().count()
}

fn is_blank(s: &str) -> bool {
    py_strip(s).is_empty()
}

/// `_wrap_chunks`: lines of at most `width` characters, whitespace
/// dropped at their ends, over-long words broken (after a hyphen when
/// one fits).
fn wrap_chunks(chunks: Vec<String>, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut chunks: Vec<String> = chunks.into_iter().rev().collect();
    while !chunks.is_empty() {
        let mut cur: Vec<String> = Vec::new();
        let mut cur_len = 0;
        if !lines.is_empty() && chunks.last().is_some_and(|c| is_blank(c)) {
            chunks.pop();
        }
        while let Some(chunk) = chunks.last() {
            let l = len(chunk);
            if cur_len + l > width {
                break;
            }
            cur_len += l;
            cur.push(chunks.pop().expect("looked at"));
        }
        if chunks.last().is_some_and(|c| len(c) > width) {
            break_long_word(&mut chunks, &mut cur, cur_len, width);
        }
        if cur.last().is_some_and(|c| is_blank(c)) {
            cur.pop();
        }
        if !cur.is_empty() {
            lines.push(cur.concat());
        }
    }
    lines
}

/// `_handle_long_word`: as much of the next chunk as fits, ending after
/// its last hyphen there if the chunk has anything but hyphens before it.
fn break_long_word(chunks: &mut [String], cur: &mut Vec<String>, cur_len: usize, width: usize) {
    let space_left = if width < 1 { 1 } else { width - cur_len };
    let Some(chunk) = chunks.last_mut() else {
        return;
    };
    let chars: Vec<char> = chunk.chars().collect();
    let mut end = space_left;
    if chars.len() > space_left {
        let hyphen = chars[..space_left].iter().rposition(|&c| c == '-');
        if let Some(h) = hyphen
            && h > 0
            && chars[..h].iter().any(|&c| c != '-')
        {
            end = h + 1;
        }
    }
    let end = end.min(chars.len());
    cur.push(chars[..end].iter().collect());
    *chunk = chars[end..].iter().collect();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_as_python() {
        assert_eq!(
            split("a well-known  x--y"),
            ["a", " ", "well-", "known", "  ", "x", "--", "y"]
        );
    }

    #[test]
    fn fills_as_python() {
        let text = "word ".repeat(30);
        let filled = fill(&text, 30, 4);
        assert_eq!(
            filled.lines().next().unwrap(),
            "    word word word word word"
        );
        assert_eq!(
            fill(&"x".repeat(30), 20, 4),
            format!("    {}\n    {}", "x".repeat(16), "x".repeat(14))
        );
        assert_eq!(
            fill(&format!("aaaa-{}", "b".repeat(25)), 20, 4),
            "    aaaa-bbbbbbbbbbb\n    bbbbbbbbbbbbbb"
        );
    }
}
