//! `salt://` URLs: which file under the file roots one names.

use std::path::{Component, Path, PathBuf};

/// Normalise the path part of a `salt://` URL, refusing anything that could
/// leave a file root: absolute paths, `..`, empty names, NUL bytes and
/// backslashes (CVE-2020-11652 and its descendants).
pub fn salt_path(url: &str) -> Result<PathBuf, String> {
    let rest = url
        .strip_prefix("salt://")
        .ok_or_else(|| format!("{url:?} is not a salt:// URL"))?;
    // Salt allows `?saltenv=...`; environments are not supported, so drop it.
    let rest = rest.split('?').next().unwrap_or_default();
    if rest.is_empty() || rest.contains('\0') || rest.contains('\\') {
        return Err(format!("{url:?} is not a valid salt:// path"));
    }
    let path = Path::new(rest);
    let mut clean = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Normal(c) => clean.push(c),
            Component::CurDir => {}
            _ => return Err(format!("{url:?} leaves the file roots")),
        }
    }
    if clean.as_os_str().is_empty() {
        return Err(format!("{url:?} names no file"));
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
