//! Small rules of Salt's and Python's that many modules need, in one
//! place: `fnmatch`, Salt's `is_true`, Python's `int()` (Python's truth
//! is [`crate::python::truthy`]).

use serde_json::Value;

/// Python's `fnmatch.fnmatchcase` (and `fnmatch.fnmatch` on POSIX): `*`,
/// `?` and `[...]` over the whole text, `/` not special. A pattern Python
/// would read literally (an unclosed `[`) matches only itself.
pub fn fnmatch(text: &str, pattern: &str) -> bool {
    let options = glob::MatchOptions {
        case_sensitive: true,
        require_literal_separator: false,
        require_literal_leading_dot: false,
    };
    match glob::Pattern::new(pattern) {
        Ok(p) => p.matches_with(text, options),
        Err(_) => text == pattern,
    }
}

/// Python's `int(text)`: an optional sign, digits with single underscores
/// between them, surrounding whitespace.
pub fn python_int(text: &str) -> Option<i64> {
    let t = text.trim();
    let digits = t.strip_prefix(['+', '-']).unwrap_or(t);
    let ok = !digits.is_empty()
        && !digits.starts_with('_')
        && !digits.ends_with('_')
        && !digits.contains("__")
        && digits.chars().all(|c| c.is_ascii_digit() || c == '_');
    ok.then(|| t.replace('_', "").parse().ok()).flatten()
}

/// Salt's `salt.utils.data.is_true`: a positive number, the text `true`
/// (any case) or of a positive integer, or Python's truth of the rest.
pub fn is_true(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f > 0.0),
        Value::String(s) => match python_int(s) {
            Some(n) => n > 0,
            None => s.eq_ignore_ascii_case("true"),
        },
        other => crate::python::truthy(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::python::truthy;
    use serde_json::json;

    #[test]
    fn as_python_and_salt() {
        assert!(fnmatch("Debian", "Deb*") && !fnmatch("Debian", "deb*"));
        assert!(fnmatch("a/b", "a*") && fnmatch("[", "["));
        assert_eq!(python_int(" +1_000 "), Some(1000));
        assert_eq!(python_int("1__0"), None);
        assert!(is_true(&json!("TRUE")) && is_true(&json!("2")) && !is_true(&json!("0")));
        assert!(!is_true(&json!(-1)) && is_true(&json!([1])));
        assert!(!truthy(&json!("")) && truthy(&json!(-1)) && !truthy(&json!({})));
    }
}

/// A `salt://` URL as fetched from environment `saltenv` (a job's
/// `saltenv=`, a state's `__env__`): the URL's own `?saltenv=` wins, as
/// Salt's file client lets it; `base`, an empty name or none adds nothing,
/// and any other URL (`file://…`) is left as it is, for the host to judge.
pub fn url_in(url: &str, saltenv: Option<&str>) -> String {
    match saltenv {
        Some(env)
            if url.starts_with("salt://")
                && !env.is_empty()
                && env != "base"
                && !url.contains("?saltenv=") =>
        {
            format!("{url}?saltenv={env}")
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod url_tests {
    use super::url_in;

    #[test]
    fn a_urls_own_environment_wins() {
        assert_eq!(url_in("salt://a/b", Some("dev")), "salt://a/b?saltenv=dev");
        assert_eq!(url_in("file:///etc/x", Some("dev")), "file:///etc/x");
        assert_eq!(
            url_in("salt://a?saltenv=qa", Some("dev")),
            "salt://a?saltenv=qa"
        );
        assert_eq!(url_in("salt://a", Some("base")), "salt://a");
        assert_eq!(url_in("salt://a", Some("")), "salt://a");
        assert_eq!(url_in("salt://a", None), "salt://a");
    }
}
