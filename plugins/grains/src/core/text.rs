//! Python's ways of cutting text that the grains depend on: a text file's
//! lines (universal newlines) and `shlex`'s POSIX splitting.

/// The lines of `text` as Python's text mode reads them: `\r\n`, `\r`
/// and `\n` all end a line, and the ends are dropped.
pub(crate) fn lines(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let (mut start, mut i) = (0, 0);
    while i < bytes.len() {
        match bytes[i] {
            b'\n' => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            b'\r' => {
                out.push(&text[start..i]);
                if bytes.get(i + 1) == Some(&b'\n') {
                    i += 1;
                }
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    if start < bytes.len() {
        out.push(&text[start..]);
    }
    out
}

/// Where `shlex` found the text unfinished (Python raises `ValueError`).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Unclosed;

/// Python's `shlex.shlex(text, posix=True)` with `whitespace_split`:
/// the words of `text`, quotes and backslashes taken away as a POSIX
/// shell does; with `comments`, `#` at the start of a word ends the line
/// (what `shlex.split(..., comments=False)` turns off).
pub(crate) fn shlex_split(text: &str, comments: bool) -> Result<Vec<String>, Unclosed> {
    #[derive(Clone, Copy, PartialEq)]
    enum State {
        Space,
        Word,
        Quote(char),
        Escape(Escaped),
    }
    #[derive(Clone, Copy, PartialEq)]
    enum Escaped {
        Word,
        Quote(char),
    }
    let is_space = |c: char| matches!(c, ' ' | '\t' | '\r' | '\n');
    let mut out = Vec::new();
    let mut token = String::new();
    let mut quoted = false;
    let mut state = State::Space;
    let mut chars = text.chars();
    let emit = |out: &mut Vec<String>, token: &mut String, quoted: &mut bool| {
        if !token.is_empty() || *quoted {
            out.push(std::mem::take(token));
        }
        *quoted = false;
    };
    loop {
        let next = chars.next();
        match state {
            State::Space => match next {
                None => break,
                Some(c) if is_space(c) => emit(&mut out, &mut token, &mut quoted),
                Some('#') if comments => {
                    for c in chars.by_ref() {
                        if c == '\n' {
                            break;
                        }
                    }
                }
                Some('\\') => state = State::Escape(Escaped::Word),
                Some(q @ ('"' | '\'')) => state = State::Quote(q),
                Some(c) => {
                    token.push(c);
                    state = State::Word;
                }
            },
            State::Quote(q) => {
                quoted = true;
                match next {
                    None => return Err(Unclosed),
                    Some(c) if c == q => state = State::Word,
                    Some('\\') if q == '"' => state = State::Escape(Escaped::Quote(q)),
                    Some(c) => token.push(c),
                }
            }
            State::Escape(from) => {
                let Some(c) = next else {
                    return Err(Unclosed);
                };
                // Inside quotes only the quote and the backslash are escaped.
                if let Escaped::Quote(q) = from
                    && c != '\\'
                    && c != q
                {
                    token.push('\\');
                }
                token.push(c);
                state = match from {
                    Escaped::Word => State::Word,
                    Escaped::Quote(q) => State::Quote(q),
                };
            }
            State::Word => match next {
                None => break,
                Some(c) if is_space(c) => {
                    state = State::Space;
                    emit(&mut out, &mut token, &mut quoted);
                }
                Some('#') if comments => {
                    for c in chars.by_ref() {
                        if c == '\n' {
                            break;
                        }
                    }
                    state = State::Space;
                    emit(&mut out, &mut token, &mut quoted);
                }
                Some(q @ ('"' | '\'')) => state = State::Quote(q),
                Some('\\') => state = State::Escape(Escaped::Word),
                Some(c) => token.push(c),
            },
        }
    }
    emit(&mut out, &mut token, &mut quoted);
    Ok(out)
}

/// Python's `str.isdigit()` for the ASCII digits Salt's numbers use.
pub(crate) fn is_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// Python's `int(s)` of a string: optional sign, digits, surrounding
/// whitespace; `None` where Python raises (or the number does not fit).
pub(crate) fn py_int(s: &str) -> Option<i64> {
    let t = s.trim();
    let (neg, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    if !is_digits(digits) {
        return None;
    }
    let n: i64 = digits.parse().ok()?;
    Some(if neg { -n } else { n })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_end_as_python_text_mode_ends_them() {
        assert_eq!(lines("a\nb\r\nc\rd"), ["a", "b", "c", "d"]);
        assert_eq!(lines("a\n\n"), ["a", ""]);
        assert!(lines("").is_empty());
    }

    #[test]
    fn shlex_splits_as_python_posix_shlex() {
        let split = |s| shlex_split(s, false).unwrap();
        assert_eq!(split("a b  c\n"), ["a", "b", "c"]);
        assert_eq!(split(r#"a="b c" d='e f'"#), ["a=b c", "d=e f"]);
        assert_eq!(split(r#"x="a\"b\c" y=\z ''"#), ["x=a\"b\\c", "y=z", ""]);
        assert_eq!(split("a#b #c"), ["a#b", "#c"]);
        assert_eq!(
            shlex_split("A=1 # comment\nB='x y'#c\n", true).unwrap(),
            ["A=1", "B=x y"]
        );
        assert_eq!(shlex_split("a \"b", false), Err(Unclosed));
        assert_eq!(shlex_split("a\\", false), Err(Unclosed));
    }

    #[test]
    fn python_int_and_isdigit() {
        assert_eq!(py_int(" 12 "), Some(12));
        assert_eq!(py_int("-3"), Some(-3));
        assert_eq!(py_int("n/a"), None);
        assert!(is_digits("04"));
        assert!(!is_digits(""));
    }
}
