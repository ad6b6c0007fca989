//! Python's `difflib.unified_diff`, hunk for hunk: Salt shows every
//! change to a file as its output (`changes['diff']`), so the matcher is
//! `SequenceMatcher`'s own (longest matching block first, with its
//! "popular line" heuristic for inputs of 200 lines or more), not a
//! Myers diff that would group the same change differently.
//!
//! Also the ways Salt cuts text into lines before diffing: `readlines()`
//! of bytes, `bytes.splitlines(True)` and `str.splitlines()`.
//!
//! Only `std` is used here: the state plugin compiles this same file
//! (`#[path]`), for the diffs Salt's states make themselves.

use std::collections::HashMap;

/// `SequenceMatcher(None, a, b)`: the matching blocks of two line lists.
struct Matcher<'a> {
    a: &'a [String],
    b: &'a [String],
    /// Where each line of `b` occurs, less the popular ones.
    b2j: HashMap<&'a str, Vec<usize>>,
}

/// `(i, j, size)`: `a[i..i+size] == b[j..j+size]`.
type Block = (usize, usize, usize);
/// `(tag, i1, i2, j1, j2)`.
type Opcode = (char, usize, usize, usize, usize);

impl<'a> Matcher<'a> {
    fn new(a: &'a [String], b: &'a [String]) -> Self {
        let mut b2j: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, line) in b.iter().enumerate() {
            b2j.entry(line.as_str()).or_default().push(i);
        }
        // autojunk: in 200 lines or more, a line found in more than 1%
        // of them (plus one) is not used to anchor a match.
        let n = b.len();
        if n >= 200 {
            let ntest = n / 100 + 1;
            b2j.retain(|_, idxs| idxs.len() <= ntest);
        }
        Matcher { a, b, b2j }
    }

    fn find_longest_match(&self, alo: usize, ahi: usize, blo: usize, bhi: usize) -> Block {
        let (mut besti, mut bestj, mut bestsize) = (alo, blo, 0);
        let mut j2len: HashMap<usize, usize> = HashMap::new();
        for i in alo..ahi {
            let mut newj2len = HashMap::new();
            if let Some(js) = self.b2j.get(self.a[i].as_str()) {
                for &j in js {
                    if j < blo {
                        continue;
                    }
                    if j >= bhi {
                        break;
                    }
                    let k = j
                        .checked_sub(1)
                        .and_then(|p| j2len.get(&p))
                        .copied()
                        .unwrap_or(0)
                        + 1;
                    newj2len.insert(j, k);
                    if k > bestsize {
                        (besti, bestj, bestsize) = (i + 1 - k, j + 1 - k, k);
                    }
                }
            }
            j2len = newj2len;
        }
        // No junk is defined, so the match grows over equal lines, popular
        // ones included.
        while besti > alo && bestj > blo && self.a[besti - 1] == self.b[bestj - 1] {
            (besti, bestj, bestsize) = (besti - 1, bestj - 1, bestsize + 1);
        }
        while besti + bestsize < ahi
            && bestj + bestsize < bhi
            && self.a[besti + bestsize] == self.b[bestj + bestsize]
        {
            bestsize += 1;
        }
        (besti, bestj, bestsize)
    }

    fn matching_blocks(&self) -> Vec<Block> {
        let (la, lb) = (self.a.len(), self.b.len());
        let mut queue = vec![(0, la, 0, lb)];
        let mut blocks = Vec::new();
        while let Some((alo, ahi, blo, bhi)) = queue.pop() {
            let (i, j, k) = self.find_longest_match(alo, ahi, blo, bhi);
            if k > 0 {
                blocks.push((i, j, k));
                if alo < i && blo < j {
                    queue.push((alo, i, blo, j));
                }
                if i + k < ahi && j + k < bhi {
                    queue.push((i + k, ahi, j + k, bhi));
                }
            }
        }
        blocks.sort_unstable();
        let (mut i1, mut j1, mut k1) = (0, 0, 0);
        let mut out = Vec::new();
        for (i2, j2, k2) in blocks {
            if i1 + k1 == i2 && j1 + k1 == j2 {
                k1 += k2;
            } else {
                if k1 > 0 {
                    out.push((i1, j1, k1));
                }
                (i1, j1, k1) = (i2, j2, k2);
            }
        }
        if k1 > 0 {
            out.push((i1, j1, k1));
        }
        out.push((la, lb, 0));
        out
    }

    fn opcodes(&self) -> Vec<Opcode> {
        let (mut i, mut j) = (0, 0);
        let mut out = Vec::new();
        for (ai, bj, size) in self.matching_blocks() {
            let tag = match (i < ai, j < bj) {
                (true, true) => Some('r'),
                (true, false) => Some('d'),
                (false, true) => Some('i'),
                (false, false) => None,
            };
            if let Some(tag) = tag {
                out.push((tag, i, ai, j, bj));
            }
            (i, j) = (ai + size, bj + size);
            if size > 0 {
                out.push(('e', ai, i, bj, j));
            }
        }
        out
    }

    /// `get_grouped_opcodes(n)`: the hunks, each with `n` lines of context.
    fn grouped_opcodes(&self, n: usize) -> Vec<Vec<Opcode>> {
        let mut codes = self.opcodes();
        if codes.is_empty() {
            codes.push(('e', 0, 1, 0, 1));
        }
        if let Some(first) = codes.first_mut()
            && first.0 == 'e'
        {
            let (t, i1, i2, j1, j2) = *first;
            *first = (
                t,
                i1.max(i2.saturating_sub(n)),
                i2,
                j1.max(j2.saturating_sub(n)),
                j2,
            );
        }
        if let Some(last) = codes.last_mut()
            && last.0 == 'e'
        {
            let (t, i1, i2, j1, j2) = *last;
            *last = (t, i1, i2.min(i1 + n), j1, j2.min(j1 + n));
        }
        let nn = n + n;
        let mut groups = Vec::new();
        let mut group = Vec::new();
        for (tag, mut i1, i2, mut j1, j2) in codes {
            if tag == 'e' && i2 - i1 > nn {
                group.push((tag, i1, i2.min(i1 + n), j1, j2.min(j1 + n)));
                groups.push(std::mem::take(&mut group));
                (i1, j1) = (i1.max(i2.saturating_sub(n)), j1.max(j2.saturating_sub(n)));
            }
            group.push((tag, i1, i2, j1, j2));
        }
        if !(group.is_empty() || group.len() == 1 && group[0].0 == 'e') {
            groups.push(group);
        }
        groups
    }
}

/// `_format_range_unified`.
fn range(start: usize, stop: usize) -> String {
    let length = stop - start;
    match length {
        1 => format!("{}", start + 1),
        0 => format!("{start},0"),
        _ => format!("{},{length}", start + 1),
    }
}

/// `difflib.unified_diff(a, b, n=3, lineterm=lineterm)` with empty file
/// names, as the list of lines it yields.
pub(crate) fn unified_diff(a: &[String], b: &[String], lineterm: &str) -> Vec<String> {
    unified_diff_named(a, b, ("", ""), lineterm)
}

/// `difflib.unified_diff(a, b, fromfile, tofile, lineterm=lineterm)`.
pub(crate) fn unified_diff_named(
    a: &[String],
    b: &[String],
    names: (&str, &str),
    lineterm: &str,
) -> Vec<String> {
    let m = Matcher::new(a, b);
    let mut out = Vec::new();
    for group in m.grouped_opcodes(3) {
        if out.is_empty() {
            out.push(format!("--- {}{lineterm}", names.0));
            out.push(format!("+++ {}{lineterm}", names.1));
        }
        let (first, last) = (group[0], group[group.len() - 1]);
        out.push(format!(
            "@@ -{} +{} @@{lineterm}",
            range(first.1, last.2),
            range(first.3, last.4)
        ));
        for (tag, i1, i2, j1, j2) in group {
            if tag == 'e' {
                out.extend(a[i1..i2].iter().map(|l| format!(" {l}")));
                continue;
            }
            if tag == 'r' || tag == 'd' {
                out.extend(a[i1..i2].iter().map(|l| format!("-{l}")));
            }
            if tag == 'r' || tag == 'i' {
                out.extend(b[j1..j2].iter().map(|l| format!("+{l}")));
            }
        }
    }
    out
}

/// Bytes as Salt decodes a line: UTF-8, else Latin-1.
pub(crate) fn decode(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(s) => s.to_string(),
        Err(_) => bytes.iter().map(|&b| b as char).collect(),
    }
}

/// `open(path, 'rb').readlines()`: cut after each `\n`, decoded.
pub(crate) fn readlines(bytes: &[u8]) -> Vec<String> {
    bytes.split_inclusive(|&b| b == b'\n').map(decode).collect()
}

/// `bytes.splitlines(True)`: cut after `\n`, `\r\n` or a lone `\r`.
pub(crate) fn bytes_splitlines_keep(bytes: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        let end = match bytes[i] {
            b'\n' => Some(i + 1),
            b'\r' if bytes.get(i + 1) == Some(&b'\n') => Some(i + 2),
            b'\r' => Some(i + 1),
            _ => None,
        };
        if let Some(end) = end {
            out.push(decode(&bytes[start..end]));
            start = end;
            i = end;
        } else {
            i += 1;
        }
    }
    if start < bytes.len() {
        out.push(decode(&bytes[start..]));
    }
    out
}

/// `str.splitlines()`: Python's line boundaries, dropped.
#[allow(dead_code)] // The state plugin's `file.append` cuts lines so.
pub(crate) fn str_splitlines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' => {
                if chars.peek() == Some(&'\n') {
                    chars.next();
                }
                out.push(std::mem::take(&mut cur));
            }
            '\n' | '\x0b' | '\x0c' | '\x1c' | '\x1d' | '\x1e' | '\u{85}' | '\u{2028}'
            | '\u{2029}' => {
                out.push(std::mem::take(&mut cur));
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Salt's `get_diff` of two files' bytes (no file names): the unified
/// diff of their `readlines()`, joined.
pub(crate) fn get_diff(a: &[u8], b: &[u8]) -> String {
    unified_diff(&readlines(a), &readlines(b), "\n").concat()
}

/// `salt.utils.stringutils.is_binary` over the first `block` bytes.
pub(crate) fn is_binary(data: &[u8]) -> bool {
    if data.is_empty() {
        return false;
    }
    if data.contains(&0) {
        return true;
    }
    let mb = match std::str::from_utf8(data) {
        Ok(_) => true,
        // A character cut off at the end of the block still counts.
        Err(e) => e.error_len().is_none(),
    };
    let nontext = data
        .iter()
        .filter(|&&b| {
            let text = (32..127).contains(&b)
                || b"\n\r\t\x0c\x08".contains(&b)
                || (mb && (128..255).contains(&b));
            !text
        })
        .count();
    nontext as f64 / data.len() as f64 > 0.30
}

/// `salt.utils.files.is_text` of a file's content (its first 512 bytes).
pub(crate) fn is_text(data: &[u8]) -> bool {
    !is_binary(&data[..data.len().min(512)])
}

/// `_binary_replace`: Salt's words for a change to or from a binary file,
/// empty when both are text.
pub(crate) fn binary_replace(old: &[u8], new: &[u8]) -> &'static str {
    match (!is_text(old), !is_text(new)) {
        (true, true) => "Replace binary file",
        (true, false) => "Replace binary file with text file",
        (false, true) => "Replace text file with binary file",
        (false, false) => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(s: &[&str]) -> Vec<String> {
        s.iter().map(|l| l.to_string()).collect()
    }

    #[test]
    fn hunks_are_difflibs() {
        let a = lines(&["a\n", "b\n", "c\n"]);
        let b = lines(&["a\n", "B\n", "c\n", "d\n"]);
        assert_eq!(
            unified_diff(&a, &b, "\n").concat(),
            "--- \n+++ \n@@ -1,3 +1,4 @@\n a\n-b\n+B\n c\n+d\n"
        );
        assert_eq!(unified_diff(&a, &a, "\n"), Vec::<String>::new());
        let empty: Vec<String> = Vec::new();
        assert_eq!(
            unified_diff(&empty, &a, "\n").concat(),
            "--- \n+++ \n@@ -0,0 +1,3 @@\n+a\n+b\n+c\n"
        );
    }

    #[test]
    fn far_apart_changes_make_two_hunks() {
        let a: Vec<String> = (0..20).map(|i| format!("{i}\n")).collect();
        let mut b = a.clone();
        b[1] = "x\n".into();
        b[18] = "y\n".into();
        let d = unified_diff(&a, &b, "\n").concat();
        assert!(d.contains("@@ -1,5 +1,5 @@\n"), "{d}");
        assert!(d.contains("@@ -16,5 +16,5 @@\n"), "{d}");
    }

    #[test]
    fn line_cutting_is_pythons() {
        assert_eq!(readlines(b"a\nb"), lines(&["a\n", "b"]));
        assert_eq!(
            bytes_splitlines_keep(b"a\r\nb\rc"),
            lines(&["a\r\n", "b\r", "c"])
        );
        assert_eq!(str_splitlines("a\n\nb\n"), lines(&["a", "", "b"]));
        assert!(is_binary(b"a\0b"));
        assert!(!is_binary("héllo\n".as_bytes()));
    }
}
