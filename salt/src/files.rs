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
}

/// Normalise the path part of a `salt://` URL, refusing anything that could
/// leave a file root: absolute paths, `..`, empty names, NUL bytes and
/// backslashes (CVE-2020-11652 and its descendants).
pub fn salt_path(url: &str) -> Result<PathBuf, BadSaltUrl> {
    let bad = |why: fn(String) -> BadSaltUrl| why(url.to_string());
    let rest = url
        .strip_prefix("salt://")
        .ok_or_else(|| bad(BadSaltUrl::NotSalt))?;
    // Salt allows `?saltenv=...`; environments are not supported, so drop it.
    let rest = rest.split('?').next().unwrap_or_default();
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
}
