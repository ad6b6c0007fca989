//! What a job names, read as Salt's `pkg_resource.parse_targets` reads it
//! and checked before any of it reaches a package tool: names, versions
//! and repositories as words of their own, `pkgs=` and `sources=` lists,
//! and `sources=` packages fetched or found in the directories granted to
//! pkg. Both backends read a job the same way; where the package managers
//! differ (which name is a package file, how an architecture suffix is
//! dropped) this asks the [`Backend`](crate::Backend).

use std::path::Path;

use maid_sdk::salt::is_true;
use maid_sdk::{Error, ErrorKind, host, python};
use serde_json::Value;

use crate::{Install, Uninstall, backend};

/// A word a job gives (a name, a version, a repository) that reaches a
/// package tool's command line as an argument of its own: never an
/// option (`-oDPkg::Pre-Invoke::=...` makes apt run a command as root;
/// dnf has no working `--`), nor a line of `dpkg --set-selections`.
pub(crate) fn word<'a>(what: &str, text: &'a str) -> Result<&'a str, Error> {
    if text.starts_with('-') {
        return Err(Error::bad_arguments(format!(
            "{what} {text:?} begins with '-': it would be read as an option"
        )));
    }
    if text.chars().any(char::is_control) {
        return Err(Error::bad_arguments(format!(
            "{what} {text:?} holds a control character"
        )));
    }
    Ok(text)
}

/// A package as a job names it ([`word`]), which must name a package and
/// never a package file: `apt-get install` and `dnf install` take a path
/// (`x/../../evil.deb`, `/tmp/evil.rpm`, a URL) as a local package, which
/// would get round `sources=`'s check. Which names are files is the
/// backend's to say ([`Backend::package_file`](crate::Backend::package_file)).
pub(crate) fn package(text: &str) -> Result<&str, Error> {
    word("package", text)?;
    if backend().package_file(text) {
        return Err(Error::denied(format!(
            "{text} names a package file: install files with sources=, \
             from the directories granted to pkg"
        )));
    }
    Ok(text)
}

/// Packages and versions a job names, each checked ([`package`], [`word`]).
fn checked(pkgs: Vec<(String, Option<String>)>) -> Result<Vec<(String, Option<String>)>, Error> {
    for (name, version) in &pkgs {
        package(name)?;
        if let Some(v) = version {
            word("version", v)?;
        }
    }
    Ok(pkgs)
}

/// The packages a `name=` names: comma-separated, each normalized
/// ([`Backend::normalize_name`](crate::Backend::normalize_name)) when
/// asked, a name given twice once (Salt keeps them in a dict).
fn names(name: &Value, normalize: bool, osarch: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for n in python::str(name).split(',') {
        let n = if normalize {
            backend().normalize_name(n, osarch)
        } else {
            n.to_string()
        };
        if !out.contains(&n) {
            out.push(n);
        }
    }
    out
}

/// A `pkgs=`/`sources=` value: a list, or the YAML text of one.
pub(crate) fn listed(v: &Value) -> Option<Vec<Value>> {
    match v {
        Value::Array(a) => Some(a.clone()),
        Value::String(s) => serde_json::from_str::<Value>(s)
            .ok()
            .and_then(|v| v.as_array().cloned()),
        _ => None,
    }
}

/// What `pkg_resource.parse_targets` gives `install`.
pub(crate) enum Targets {
    /// Names from a repository, each with the version asked for.
    Repository(Vec<(String, Option<String>)>),
    /// Package files on this host.
    Files(Vec<String>),
}

/// Salt's `salt.utils.data.repack_dictlist` with `_repack_pkgs`'s `str()`.
fn repack(
    list: &[Value],
    normalize: bool,
    osarch: &str,
) -> Result<Vec<(String, Option<String>)>, Error> {
    let mut out: Vec<(String, Option<String>)> = Vec::new();
    for element in list {
        let (name, version) = match element {
            Value::String(_) | Value::Number(_) => (python::str(element), None),
            Value::Object(o) if o.len() == 1 => {
                let (k, v) = o.iter().next().expect("one entry");
                (k.clone(), (!v.is_null()).then(|| python::str(v)))
            }
            _ => {
                host::warn(&format!("Invalid input for repack_dictlist: {element}"));
                return Ok(Vec::new());
            }
        };
        let name = if normalize {
            backend().normalize_name(&name, osarch)
        } else {
            name
        };
        if let Some(at) = out.iter().position(|(n, _)| *n == name) {
            out[at].1 = version;
        } else {
            out.push((name, version));
        }
    }
    if out.len() != list.len() {
        return Err(Error::bad_arguments(format!(
            "You are passing a list of packages that contains duplicated packages names: {}. \
             This cannot be processed. In case you are targeting different versions of the \
             same package, please target them individually",
            python::repr(&Value::Array(list.to_vec()))
        )));
    }
    Ok(out)
}

/// Salt's `pkg_resource.parse_targets` for `install`: `pkgs=`, else
/// `sources=`, else `name=` (with `version=`); `None`, with Salt's
/// warning, when none is usable.
pub(crate) fn parse_targets(a: &Install, osarch: &str) -> Result<Option<Targets>, Error> {
    let normalize = is_true(&a.normalize);
    let given = |v: &Value| python::truthy(v);
    if given(&a.pkgs) && given(&a.sources) {
        host::warn("Only one of \"pkgs\" and \"sources\" can be used.");
        return Ok(None);
    }
    if given(&a.pkgs) {
        let Some(list) = listed(&a.pkgs) else {
            return Ok(None);
        };
        let pkgs = checked(repack(&list, normalize, osarch)?)?;
        return Ok((!pkgs.is_empty()).then_some(Targets::Repository(pkgs)));
    }
    if given(&a.sources) {
        return sources(&a.sources);
    }
    if given(&a.name) {
        let version = a.version.as_ref().filter(|v| !v.is_null()).map(python::str);
        let pkgs = names(&a.name, normalize, osarch)
            .into_iter()
            .map(|n| (n, version.clone()))
            .collect();
        return Ok(Some(Targets::Repository(checked(pkgs)?)));
    }
    host::warn("No package sources provided");
    Ok(None)
}

/// The package files a `sources=` list of `{name: source}` names: each
/// `salt://` one cached ([`cache_source`]), each local one found in the
/// grants ([`local_source`]).
fn sources(sources: &Value) -> Result<Option<Targets>, Error> {
    let Some(list) = listed(sources) else {
        return Ok(None);
    };
    let mut files = Vec::new();
    for source in &list {
        let Some((name, src)) = source
            .as_object()
            .filter(|o| o.len() == 1)
            .and_then(|o| o.iter().next())
        else {
            host::warn("Input must be a list of 1-element dicts");
            return Ok(None);
        };
        let src = python::str(src);
        if src.contains("://") {
            files.push(cache_source(&src, name)?);
        } else if !Path::new(&src).is_absolute() {
            return Err(Error::bad_arguments(format!(
                "Path {src} for package {name} is either not absolute or an invalid protocol"
            )));
        } else {
            files.push(local_source(&src, name)?);
        }
    }
    Ok((!files.is_empty()).then_some(Targets::Files(files)))
}

/// What `remove` and `purge` are asked to remove: `pkgs=` (with the
/// versions given), else the names of `name=`, each normalized; not yet
/// checked.
pub(crate) fn to_remove(
    a: &Uninstall,
    osarch: &str,
) -> Result<Vec<(String, Option<String>)>, Error> {
    Ok(if python::truthy(&a.pkgs) {
        repack(&listed(&a.pkgs).unwrap_or_default(), true, osarch)?
    } else if python::truthy(&a.name) {
        names(&a.name, true, osarch)
            .into_iter()
            .map(|n| (n, None))
            .collect()
    } else {
        Vec::new()
    })
}

/// A local `sources=` package, which must lie in a directory granted to
/// pkg: a file that another plugin lets a job write (`cp`'s directory)
/// must never reach `dpkg -I`, `rpm -qp` or `apt-get install`. The host
/// resolves links (one that leads out of the granted directory is
/// refused), and the tools are given the real path it found.
fn local_source(src: &str, name: &str) -> Result<String, Error> {
    let at = |e: Error| match e.kind {
        ErrorKind::Denied => Error::denied(format!(
            "Path {src} for package {name} is not in a directory granted to pkg: {}",
            e.message
        )),
        _ => Error::failed(format!("Path {src} for package {name}: {}", e.message), 1),
    };
    let st = host::stat(src, true).map_err(at)?;
    if st.kind != "file" {
        return Err(Error::bad_arguments(format!(
            "Path {src} for package {name} is not a file"
        )));
    }
    Ok(st.target.unwrap_or_else(|| src.to_string()))
}

/// Salt's `cp.cache_file` for a `sources=` URL: a `salt://` package is
/// fetched (under the fetch grant) into the first writable directory
/// granted to the plugin, which is where `apt-get` reads it.
fn cache_source(url: &str, name: &str) -> Result<String, Error> {
    let unable = || {
        Error::failed(
            format!("Unable to cache source {url} for package {name}"),
            1,
        )
    };
    if !url.starts_with("salt://") {
        return Err(Error::bad_arguments(format!(
            "only salt:// sources and local paths are supported, not {url:?}"
        )));
    }
    let dir = host::dirs()
        .into_iter()
        .find(|d| d.writable)
        .ok_or_else(|| {
            Error::denied(format!(
                "{url}: caching a package needs a writable directory granted to pkg"
            ))
        })?;
    if !dir.path.is_dir() {
        return Err(Error::failed(
            format!(
                "{url}: {} (granted to pkg for caching packages) does not exist; create it",
                dir.path.display()
            ),
            1,
        ));
    }
    let Some(mut source) = host::fetch(url)? else {
        return Err(unable());
    };
    let file = url
        .rsplit('/')
        .next()
        .filter(|f| !f.is_empty())
        .ok_or_else(unable)?;
    let dest = dir.path.join(file);
    maid_sdk::fs::write_source(&mut source, url, &dest, "pkg")?;
    Ok(dest.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Backend;
    use crate::apt::Apt;
    use crate::dnf::Dnf;

    #[test]
    fn options_and_package_files_are_no_package_names() {
        assert!(word("package", "-oDPkg::Pre-Invoke::=touch /x").is_err());
        assert!(word("version", "--force").is_err());
        assert!(word("package", "a\nb hold").is_err());
        assert_eq!(word("package", "bash").unwrap(), "bash");
        for file in [
            "./x.deb",
            "partial/../../tmp/evil.deb",
            "a/",
            "a/b/c",
            "/tmp/x.deb",
        ] {
            assert!(Apt.package_file(file), "{file}");
        }
        for name in [
            "bash",
            "bash=5.2-1",
            "bash:amd64",
            "bash/bookworm-backports",
        ] {
            assert!(!Apt.package_file(name), "{name}");
        }
        for file in ["/tmp/x.rpm", "x.RPM", "https://example.com/x"] {
            assert!(Dnf.package_file(file), "{file}");
        }
        assert!(!Dnf.package_file("/usr/bin/vim"));
        assert!(!Dnf.package_file("vim-9.0-1.x86_64"));
    }
}
