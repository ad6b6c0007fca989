//! A plugin's effective grants: what its manifest asks for intersected with
//! what the configuration grants, compiled once at load time and checked on
//! every host call.
//!
//! Default is deny. A capability counts only when the plugin *declares* it
//! and the operator *grants* it, so a reviewer reading either side alone
//! never underestimates what can happen.

use std::ffi::{OsStr, OsString};
use std::path::{Component, Path, PathBuf};

use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};
use serde::Serialize;

use crate::config::{DirGrant, PluginGrants};
use crate::runtime::manifest::Capability;

/// Programs that run arbitrary command lines; starting one needs `shell`.
const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "csh", "tcsh", "fish", "ash", "busybox",
];

/// A compiled set of globs plus the patterns it came from.
#[derive(Debug, Clone)]
pub struct Patterns {
    patterns: Vec<String>,
    set: GlobSet,
}

impl Patterns {
    fn new(patterns: &[String], literal_separator: bool) -> Result<Self, globset::Error> {
        let mut builder = GlobSetBuilder::new();
        for p in patterns {
            let glob = if p == "*" || p == "**" {
                Glob::new("**")?
            } else {
                GlobBuilder::new(p)
                    .literal_separator(literal_separator)
                    .build()?
            };
            builder.add(glob);
        }
        Ok(Self {
            patterns: patterns.to_vec(),
            set: builder.build()?,
        })
    }

    fn empty() -> Self {
        Self {
            patterns: Vec::new(),
            set: GlobSet::empty(),
        }
    }

    pub fn is_match(&self, s: impl AsRef<Path>) -> bool {
        self.set.is_match(s)
    }

    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }
}

/// The agent's environment variables that a plugin's `env` grant passes to
/// the programs it starts, taken when its grants are made: the agent never
/// changes its own environment, so reading it again for every command would
/// find the same list. Names and values are kept as the OS gives them (a
/// variable that is not UTF-8 passes through unchanged). `Debug` shows the
/// names only: the values may be secrets.
#[derive(Clone, Default)]
pub struct PassedEnv(Vec<(OsString, OsString)>);

impl PassedEnv {
    fn of(env: &Patterns) -> Self {
        if env.is_empty() {
            return Self::default();
        }
        Self(
            std::env::vars_os()
                .filter(|(name, _)| env.is_match(name))
                .collect(),
        )
    }

    /// Each variable, as (name, value).
    pub fn vars(&self) -> impl Iterator<Item = (&OsStr, &OsStr)> {
        self.0.iter().map(|(k, v)| (k.as_os_str(), v.as_os_str()))
    }

    /// The value of `name`, when it is passed.
    pub fn get(&self, name: &str) -> Option<&OsStr> {
        self.vars().find(|(k, _)| *k == name).map(|(_, v)| v)
    }
}

impl std::fmt::Debug for PassedEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|(k, _)| k))
            .finish()
    }
}

/// What a plugin may do, after intersecting its manifest with its grants.
#[derive(Debug, Clone)]
pub struct Grants {
    /// Programs `exec` may start; empty when exec is not both asked and granted.
    pub exec: Patterns,
    /// Whether a shell may be started.
    pub shell: bool,
    /// Environment variables passed through to programs.
    pub env: Patterns,
    /// The agent's variables that `env` lets through, with their values.
    pub passed_env: PassedEnv,
    /// `salt://` URLs `fetch` may open.
    pub fetch: Patterns,
    /// Granted directories: preopened when `fs`, places to run programs in
    /// when exec is granted.
    pub dirs: Vec<DirGrant>,
    /// Whether the plugin asked for filesystem access at all.
    pub fs: bool,
    /// Users programs may run as.
    pub runas: Patterns,
}

/// A human-readable account of grants, for `maid plugin inspect`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct GrantSummary {
    pub exec: Vec<String>,
    pub shell: bool,
    pub env: Vec<String>,
    pub fetch: Vec<String>,
    pub dirs: Vec<DirGrant>,
    pub runas: Vec<String>,
}

impl Grants {
    /// Nothing at all.
    pub fn none() -> Self {
        Self {
            exec: Patterns::empty(),
            shell: false,
            env: Patterns::empty(),
            passed_env: PassedEnv::default(),
            fetch: Patterns::empty(),
            dirs: Vec::new(),
            fs: false,
            runas: Patterns::empty(),
        }
    }

    /// Intersect what the plugin declares with what the config grants.
    pub fn effective(declared: &[Capability], granted: &PluginGrants) -> Result<Self, String> {
        let has = |c: Capability| declared.contains(&c);
        let bad = |what: &str, e: globset::Error| format!("invalid {what} pattern: {e}");
        let exec = if has(Capability::Exec) {
            Patterns::new(&granted.exec, true).map_err(|e| bad("exec", e))?
        } else {
            Patterns::empty()
        };
        let env = if has(Capability::Exec) {
            Patterns::new(&granted.env, false).map_err(|e| bad("env", e))?
        } else {
            Patterns::empty()
        };
        let runas = if has(Capability::Exec) {
            Patterns::new(&granted.runas, false).map_err(|e| bad("runas", e))?
        } else {
            Patterns::empty()
        };
        let fetch = if has(Capability::Fetch) {
            Patterns::new(&granted.fetch, true).map_err(|e| bad("fetch", e))?
        } else {
            Patterns::empty()
        };
        let read = has(Capability::FsRead) || has(Capability::FsWrite);
        let dirs = granted
            .dirs
            .iter()
            .filter(|_| read || has(Capability::Exec))
            .map(|d| DirGrant {
                path: d.path.clone(),
                writable: d.writable && has(Capability::FsWrite),
            })
            .collect();
        Ok(Self {
            exec,
            shell: granted.shell && has(Capability::Shell) && has(Capability::Exec),
            passed_env: PassedEnv::of(&env),
            env,
            fetch,
            dirs,
            fs: read,
            runas,
        })
    }

    /// Directories to preopen for the guest. A plugin that only runs
    /// programs gets `dirs` as places to run them in, not as files to read.
    pub fn preopens(&self) -> impl Iterator<Item = &DirGrant> {
        self.dirs.iter().filter(|_| self.fs)
    }

    pub fn summary(&self) -> GrantSummary {
        GrantSummary {
            exec: self.exec.patterns().to_vec(),
            shell: self.shell,
            env: self.env.patterns().to_vec(),
            fetch: self.fetch.patterns().to_vec(),
            dirs: self.dirs.clone(),
            runas: self.runas.patterns().to_vec(),
        }
    }

    /// Whether `program` (resolved, absolute) may be started; `Err` says why not.
    ///
    /// `canonical` gives the program's path with every link resolved. It is
    /// asked for only when it can change the answer: when the resolved path
    /// is not allowed itself, or when shells are refused and a link may hide
    /// one (`/bin/sh` is `dash`). Resolving costs a `readlink` per component
    /// of the path, on every command.
    pub fn check_program(
        &self,
        resolved: &Path,
        canonical: impl FnOnce() -> PathBuf,
    ) -> Result<(), String> {
        if self.exec.is_empty() {
            return Err("exec is not granted to this plugin".into());
        }
        let allowed = self.exec.is_match(resolved);
        if allowed && self.shell {
            return Ok(());
        }
        let canonical = canonical();
        if !(allowed || self.exec.is_match(&canonical)) {
            return Err(format!(
                "{} is not in the exec allow-list",
                resolved.display()
            ));
        }
        let is_shell = [resolved, &canonical].iter().any(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| SHELLS.contains(&n))
        });
        if is_shell && !self.shell {
            return Err(format!(
                "{} is a shell and the shell capability is not granted (use python_shell=False)",
                resolved.display()
            ));
        }
        Ok(())
    }

    /// Whether a program may run in `cwd`: it must lie inside a granted
    /// directory once `..` and symlinks are resolved.
    pub fn check_cwd(&self, cwd: &Path) -> Result<PathBuf, String> {
        let real = cwd
            .canonicalize()
            .map_err(|e| format!("cwd {}: {e}", cwd.display()))?;
        for dir in &self.dirs {
            if let Ok(root) = dir.path.canonicalize()
                && real.starts_with(&root)
            {
                return Ok(real);
            }
        }
        Err(format!(
            "cwd {} is outside the directories granted to this plugin",
            cwd.display()
        ))
    }

    /// Whether `url` may be fetched.
    pub fn check_fetch(&self, url: &str) -> Result<(), String> {
        if self.fetch.is_empty() {
            return Err("fetch is not granted to this plugin".into());
        }
        if !self.fetch.is_match(url) {
            return Err(format!("{url} is not in the fetch allow-list"));
        }
        Ok(())
    }
}

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

    fn grants(exec: &[&str], shell: bool) -> Grants {
        let g = PluginGrants {
            exec: exec.iter().map(|s| s.to_string()).collect(),
            shell,
            ..Default::default()
        };
        Grants::effective(&[Capability::Exec, Capability::Shell], &g).unwrap()
    }

    #[test]
    fn passed_env_takes_the_granted_variables_and_shows_only_their_names() {
        let path = std::env::var_os("PATH").expect("PATH is set");
        let env = Patterns::new(&["PATH".to_string()], false).unwrap();
        let passed = PassedEnv::of(&env);
        assert_eq!(passed.get("PATH"), Some(path.as_os_str()));
        assert_eq!(passed.vars().count(), 1);
        let shown = format!("{passed:?}");
        assert_eq!(shown, "[\"PATH\"]");
        let none = Patterns::new(&["MAID_NO_SUCH_*".to_string()], false).unwrap();
        assert_eq!(PassedEnv::of(&none).vars().count(), 0);
        assert_eq!(PassedEnv::of(&Patterns::empty()).vars().count(), 0);
    }

    #[test]
    fn undeclared_capabilities_are_not_granted() {
        let g = PluginGrants {
            exec: vec!["*".into()],
            shell: true,
            fetch: vec!["**".into()],
            ..Default::default()
        };
        let eff = Grants::effective(&[], &g).unwrap();
        assert!(eff.exec.is_empty());
        assert!(!eff.shell);
        assert!(eff.fetch.is_empty());
    }

    /// Whether `g` lets `resolved` run when its links lead to `canonical`.
    fn runs(g: &Grants, resolved: &str, canonical: &str) -> bool {
        let canonical = PathBuf::from(canonical);
        g.check_program(Path::new(resolved), || canonical).is_ok()
    }

    #[test]
    fn exec_globs_do_not_cross_directories() {
        let g = grants(&["/usr/bin/*"], false);
        assert!(runs(&g, "/usr/bin/true", "/usr/bin/true"));
        assert!(!runs(&g, "/usr/bin/x/evil", "/usr/bin/x/evil"));
        assert!(!runs(&g, "/opt/true", "/opt/true"));
        // A link from outside the allow-list to a program inside it.
        assert!(runs(&g, "/opt/true", "/usr/bin/true"));
    }

    #[test]
    fn shells_need_the_shell_grant() {
        assert!(!runs(&grants(&["*"], false), "/bin/sh", "/usr/bin/dash"));
        assert!(runs(&grants(&["*"], true), "/bin/sh", "/usr/bin/dash"));
        // A shell behind a name that is not a shell's.
        let refused = grants(&["*"], false);
        assert!(!runs(&refused, "/usr/local/bin/tool", "/usr/bin/bash"));
    }

    #[test]
    fn links_are_resolved_only_when_they_can_change_the_answer() {
        let sh = Path::new("/bin/sh");
        let never = || -> PathBuf { panic!("resolved the links of an allowed program") };
        assert!(grants(&["/bin/*"], true).check_program(sh, never).is_ok());
        // Shells refused: the links are followed, and lead to one.
        let mut asked = false;
        let follow = || {
            asked = true;
            PathBuf::from("/usr/bin/dash")
        };
        assert!(
            grants(&["/bin/*"], false)
                .check_program(sh, follow)
                .is_err()
        );
        assert!(asked);
    }

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
