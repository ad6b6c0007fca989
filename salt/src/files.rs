//! `salt://` URLs: which file under the file roots one names.

use std::path::{Component, Path, PathBuf};

/// Why a URL names no file under the file roots; each holds the URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadSaltUrl {
    #[error("{0:?} is not a salt:// URL")]
    NotSalt(String),
    #[error("{0:?} is not a valid salt:// path")]
    Invalid(String),
    #[error("{0:?} leaves the file roots")]
    Leaves(String),
    #[error("{0:?} names no file")]
    NoFile(String),
    #[error("{0:?} names an environment maid does not serve (letters, digits, `_`, `-`, `.`)")]
    Env(String),
}

/// A `salt://` URL as Salt's `salt.utils.url.parse` splits it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaltUrl {
    /// The path under the file roots, normalised ([`salt_path`]).
    pub path: PathBuf,
    /// The environment a `?saltenv=` names; `None` for the caller's own
    /// (Salt ignores an empty one and the old `?env=`).
    pub saltenv: Option<String>,
}

/// Whether `name` is an environment name maid serves: 1 to 128 ASCII
/// letters, digits, `_`, `-` or `.`, and not `.` or `..`. Environment
/// names become Redis key names and configuration keys, so nothing else
/// is accepted from a URL, a job or a file store.
pub fn is_saltenv(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// Split a `salt://` URL as Salt does — `?saltenv=NAME` names the
/// environment, `?env=` is dropped, any other `?` is part of the path —
/// and normalise its path ([`salt_path`]'s rules).
pub fn parse(url: &str) -> Result<SaltUrl, BadSaltUrl> {
    let rest = url
        .strip_prefix("salt://")
        .ok_or_else(|| BadSaltUrl::NotSalt(url.to_string()))?;
    let (path, saltenv) = if let Some((path, _)) = rest.split_once("?env=") {
        (path, None)
    } else if let Some((path, env)) = rest.split_once("?saltenv=") {
        (path, Some(env).filter(|e| !e.is_empty()))
    } else {
        (rest, None)
    };
    if let Some(env) = saltenv
        && !is_saltenv(env)
    {
        return Err(BadSaltUrl::Env(url.to_string()));
    }
    Ok(SaltUrl {
        path: clean_path(url, path)?,
        saltenv: saltenv.map(str::to_string),
    })
}

/// The `salt://` URL of `path` in `saltenv` (`base` needs no query).
pub fn url(path: &str, saltenv: &str) -> String {
    if saltenv == "base" {
        format!("salt://{path}")
    } else {
        format!("salt://{path}?saltenv={saltenv}")
    }
}

/// Normalise the path part of a `salt://` URL, refusing anything that could
/// leave a file root: absolute paths, `..`, empty names, NUL bytes and
/// backslashes (CVE-2020-11652 and its descendants).
pub fn salt_path(url: &str) -> Result<PathBuf, BadSaltUrl> {
    parse(url).map(|u| u.path)
}

fn clean_path(url: &str, rest: &str) -> Result<PathBuf, BadSaltUrl> {
    let bad = |why: fn(String) -> BadSaltUrl| why(url.to_string());
    if rest.is_empty() || rest.contains('\0') || rest.contains('\\') {
        return Err(bad(BadSaltUrl::Invalid));
    }
    let path = Path::new(rest);
    let mut clean = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Normal(c) => clean.push(c),
            Component::CurDir => {}
            _ => return Err(bad(BadSaltUrl::Leaves)),
        }
    }
    if clean.as_os_str().is_empty() {
        return Err(bad(BadSaltUrl::NoFile));
    }
    Ok(clean)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn salt_paths_stay_inside_roots() {
        assert_eq!(
            salt_path("salt://a/b.txt").unwrap(),
            PathBuf::from("a/b.txt")
        );
        assert_eq!(
            salt_path("salt://./a?saltenv=base").unwrap(),
            PathBuf::from("a")
        );
        for bad in [
            "salt://../etc/passwd",
            "salt://a/../../b",
            "salt:///etc/passwd",
            "salt://",
            "salt://a\\..\\b",
            "file:///etc/passwd",
        ] {
            assert!(salt_path(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn urls_split_as_salts_parse_does() {
        let parsed = |url: &str| {
            let u = parse(url).unwrap();
            (u.path.to_string_lossy().into_owned(), u.saltenv)
        };
        assert_eq!(
            parsed("salt://a/b?saltenv=dev"),
            ("a/b".into(), Some("dev".into()))
        );
        assert_eq!(parsed("salt://a/b?saltenv="), ("a/b".into(), None));
        assert_eq!(parsed("salt://a/b?env=dev"), ("a/b".into(), None));
        // Any other query is part of the name, as in Salt.
        assert_eq!(parsed("salt://a?b.conf"), ("a?b.conf".into(), None));
        for bad in [
            "salt://a?saltenv=../x",
            "salt://a?saltenv=a/b",
            "salt://a?saltenv=..",
            "salt://a?saltenv=x y",
            "salt://a?saltenv=x\n",
            "salt://../a?saltenv=dev",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert_eq!(url("a/b", "base"), "salt://a/b");
        assert_eq!(url("a/b", "dev"), "salt://a/b?saltenv=dev");
    }
}
