//! Salt's `file_roots`: the directories that serve `salt://`, per
//! environment.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// `file_roots` as an operator writes it: a list (the `base`
/// environment's directories, searched in order) or a table of
/// environments, each a list, as Salt's `file_roots` is:
///
/// ```toml
/// file_roots = ["/srv/salt"]
/// file_roots = { base = ["/srv/salt"], dev = ["/srv/salt-dev"] }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct FileRoots(BTreeMap<String, Vec<PathBuf>>);

#[derive(Deserialize)]
#[serde(untagged)]
enum Written {
    Base(Vec<PathBuf>),
    Envs(BTreeMap<String, Vec<PathBuf>>),
}

impl<'de> Deserialize<'de> for FileRoots {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let envs = match Written::deserialize(d).map_err(|_| {
            serde::de::Error::custom(
                "file_roots is a list of directories or a table of environments, each a list",
            )
        })? {
            Written::Base(dirs) => BTreeMap::from([("base".to_string(), dirs)]),
            Written::Envs(envs) => envs,
        };
        if let Some(bad) = envs.keys().find(|e| !maid_salt::files::is_saltenv(e)) {
            return Err(serde::de::Error::custom(format!(
                "file_roots: {bad:?} is not an environment name (1 to 128 letters, digits, \
                 `_`, `-` or `.`)"
            )));
        }
        Ok(Self(envs))
    }
}

impl FileRoots {
    /// Only `base`, served from `dirs`.
    pub fn base(dirs: Vec<PathBuf>) -> Self {
        Self(BTreeMap::from([("base".to_string(), dirs)]))
    }

    /// Whether no environment has a directory.
    pub fn is_empty(&self) -> bool {
        self.0.values().all(Vec::is_empty)
    }

    /// The environments as Salt's `_get_envs` orders them: `base` first,
    /// then the others by name; each with its directories.
    pub fn envs(&self) -> impl Iterator<Item = (&str, &[PathBuf])> {
        let base = self.0.get_key_value("base");
        base.into_iter()
            .chain(self.0.iter().filter(|(e, _)| *e != "base"))
            .map(|(e, dirs)| (e.as_str(), dirs.as_slice()))
    }

    /// The directories of `saltenv` (none for an environment not
    /// configured).
    pub fn get(&self, saltenv: &str) -> &[PathBuf] {
        self.0.get(saltenv).map_or(&[], Vec::as_slice)
    }

    /// `dirs` searched before `saltenv`'s own (`--file-root`).
    pub fn prepend(&mut self, saltenv: &str, mut dirs: Vec<PathBuf>) {
        let own = self.0.entry(saltenv.to_string()).or_default();
        dirs.append(own);
        *own = dirs;
    }

    /// Each of `other`'s environments' directories searched after this
    /// one's.
    pub fn append(&mut self, other: FileRoots) {
        for (env, mut dirs) in other.0 {
            self.0.entry(env).or_default().append(&mut dirs);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Doc {
        file_roots: FileRoots,
    }

    fn read(text: &str) -> Result<FileRoots, String> {
        toml::from_str::<Doc>(text)
            .map(|d| d.file_roots)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_list_is_base_and_a_table_names_environments() {
        let roots = read(r#"file_roots = ["/a", "/b"]"#).unwrap();
        assert_eq!(roots, FileRoots::base(vec!["/a".into(), "/b".into()]));
        let roots = read(r#"file_roots = { prod = ["/p"], base = ["/a"], dev = ["/d"] }"#).unwrap();
        let envs: Vec<&str> = roots.envs().map(|(e, _)| e).collect();
        assert_eq!(envs, ["base", "dev", "prod"]);
        assert_eq!(roots.get("dev"), [PathBuf::from("/d")]);
        assert!(roots.get("qa").is_empty());
        for bad in [
            r#"file_roots = { "../x" = ["/a"] }"#,
            r#"file_roots = { "a/b" = ["/a"] }"#,
            r#"file_roots = { "" = ["/a"] }"#,
            r#"file_roots = "/srv/salt""#,
        ] {
            assert!(read(bad).is_err(), "{bad}");
        }
        let mut roots = read(r#"file_roots = { dev = ["/d"] }"#).unwrap();
        roots.prepend("base", vec!["/cli".into()]);
        roots.append(FileRoots::base(vec!["/conf".into()]));
        assert_eq!(roots.get("base"), [PathBuf::from("/cli"), "/conf".into()]);
        assert!(!roots.is_empty());
        assert!(FileRoots::default().is_empty());
    }
}
