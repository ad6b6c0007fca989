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

use super::denied::{Denied, GrantError};
use super::programs::not_plain;
pub use super::programs::{PLAIN, RUNS_ITS_ARGUMENTS, runs_its_arguments};

/// Environment variables that change what a program loads or runs before
/// it runs a line of its own: the dynamic loader's (glibc's list of
/// variables it ignores for set-uid programs, and `GLIBC_TUNABLES`), the
/// shells' start-up and function import, interpreters' module paths and
/// options, and tools' hooks. They never reach a program, whatever a grant
/// says: from a job they are refused, from the agent's environment they
/// are not passed. Names ending in `*` are prefixes.
pub const HIJACK_ENV: &[&str] = &[
    // The dynamic loader and libc.
    "LD_*",
    "DYLD_*",
    "GLIBC_TUNABLES",
    "GCONV_PATH",
    "GETCONF_DIR",
    "HOSTALIASES",
    "LOCALDOMAIN",
    "LOCPATH",
    "MALLOC_*",
    "NIS_PATH",
    "NLSPATH",
    "RESOLV_HOST_CONF",
    "RES_OPTIONS",
    "TMPDIR",
    "TZDIR",
    // Shells.
    "BASH_ENV",
    "ENV",
    "BASH_FUNC_*",
    "SHELLOPTS",
    "BASHOPTS",
    "PS4",
    "PROMPT_COMMAND",
    "IFS",
    "CDPATH",
    "ZDOTDIR",
    "GLOBIGNORE",
    // Interpreters.
    "PYTHON*",
    "PERL*",
    "RUBY*",
    "GEM_*",
    "BUNDLE_*",
    "NODE_*",
    "NPM_CONFIG_*",
    "LUA_*",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "CLASSPATH",
    "PHPRC",
    "PHP_INI_SCAN_DIR",
    "TCLLIBPATH",
    "R_PROFILE*",
    "R_ENVIRON*",
    "JULIA_*",
    // Tools that run hooks, pagers and editors, or read config that does.
    "GIT_*",
    "EDITOR",
    "VISUAL",
    "PAGER",
    "MANPAGER",
    "SYSTEMD_*",
    "LESSOPEN",
    "LESSCLOSE",
    "BROWSER",
    "SSH_ASKPASS",
    "SUDO_ASKPASS",
    "OPENSSL_CONF",
    "OPENSSL_ENGINES",
    "APT_CONFIG",
    "XDG_CONFIG_HOME",
    "XDG_CONFIG_DIRS",
    "XDG_DATA_DIRS",
    "INPUTRC",
    "TERMINFO",
    "TERMINFO_DIRS",
];

/// Variables a job may never set, though a grant may pass the agent's own:
/// `PATH` (programs are looked up on the grant's, and a program's own
/// lookups must not find a job's files) and `HOME` (where programs read
/// their dotfiles, which may run code).
pub const JOB_MAY_NOT_SET: &[&str] = &["PATH", "HOME"];

/// Whether `name` is one of `list` (entries ending in `*` are prefixes).
fn listed(list: &[&str], name: &str) -> bool {
    list.iter().any(|entry| match entry.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => name == *entry,
    })
}

/// Whether a variable named `name` must never reach a program.
pub fn is_hijack_env(name: &str) -> bool {
    listed(HIJACK_ENV, name)
}

/// Whether `pattern` has glob syntax.
fn has_glob(pattern: &str) -> bool {
    pattern.contains(['*', '?', '[', ']', '{', '}', '\\'])
}

/// The exec allow-list as it is matched: each pattern, and the same pattern
/// under the real path of its literal leading directories, since programs
/// are matched on their real path (`/bin/*` also admits what it means on a
/// host where `/bin` is a link to `/usr/bin`). A pattern with a `..` is
/// refused: it would never mean what it seems to.
fn resolved_exec_patterns(patterns: &[String]) -> Result<Vec<String>, GrantError> {
    let mut out = Vec::with_capacity(patterns.len());
    for p in patterns {
        if Path::new(p).components().any(|c| c == Component::ParentDir) {
            return Err(GrantError::ParentDirPattern(p.clone()));
        }
        out.push(p.clone());
        if !p.starts_with('/') {
            continue;
        }
        let parts: Vec<&str> = p.split('/').collect();
        let literal = parts.iter().take_while(|c| !has_glob(c)).count();
        let (head, tail) = parts.split_at(literal);
        let head = head.join("/");
        if head.is_empty() {
            continue;
        }
        let Ok(real) = std::fs::canonicalize(&head) else {
            continue;
        };
        let mut resolved = real.to_string_lossy().into_owned();
        for part in tail {
            resolved.push('/');
            resolved.push_str(part);
        }
        if resolved != *p {
            out.push(resolved);
        }
    }
    Ok(out)
}

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
                .filter(|(name, _)| !name.to_str().is_none_or(is_hijack_env))
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
    /// The programs `exec` names by their whole path, without a glob (as
    /// written and under their directory's real path): the operator chose
    /// each one, so it needs no classification to start without `shell`.
    pub exec_exact: Vec<PathBuf>,
    /// Every program `exec` admits counts as named exactly: the operator
    /// is the caller (`maid call --local` without a configuration).
    pub exec_all_chosen: bool,
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
    /// Single files `read-file` may read; empty unless `fs-read` is asked.
    pub files: Patterns,
    /// Whether the plugin asked for filesystem access at all.
    pub fs: bool,
    /// Users programs may run as.
    pub runas: Patterns,
    /// May see and signal the running jobs.
    pub jobs: bool,
    /// May set and remove grains.
    pub set_grains: bool,
    /// May read the job's pillar.
    pub pillar: bool,
    /// Functions of other modules it may run (`module.function` globs).
    pub call: Patterns,
    /// Directories any plugin may write into (their real paths): a
    /// program there may be one a job wrote, so it is as good as a shell.
    pub writable_anywhere: Vec<PathBuf>,
    /// May set set-uid, set-gid and world-writable modes (`set-mode`): a
    /// set-uid file in a granted directory is a way to root for anyone who
    /// can run it, so it takes a grant of its own.
    pub special_modes: bool,
}

/// A human-readable account of grants, for `maid plugin inspect`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct GrantSummary {
    pub exec: Vec<String>,
    pub shell: bool,
    pub env: Vec<String>,
    pub fetch: Vec<String>,
    pub dirs: Vec<DirGrant>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    pub runas: Vec<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub jobs: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub set_grains: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub pillar: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub call: Vec<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub special_modes: bool,
    /// What a reviewer should know about these grants: programs named that
    /// run only with `shell`, variables named that never pass.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl Grants {
    /// Nothing at all.
    pub fn none() -> Self {
        Self {
            exec: Patterns::empty(),
            exec_exact: Vec::new(),
            exec_all_chosen: false,
            shell: false,
            env: Patterns::empty(),
            passed_env: PassedEnv::default(),
            fetch: Patterns::empty(),
            dirs: Vec::new(),
            files: Patterns::empty(),
            fs: false,
            runas: Patterns::empty(),
            jobs: false,
            set_grains: false,
            pillar: false,
            call: Patterns::empty(),
            writable_anywhere: Vec::new(),
            special_modes: false,
        }
    }

    /// These grants, knowing that `dirs` are writable by some plugin (any
    /// plugin: a job can write with one and run with another).
    pub fn with_writable_dirs(mut self, dirs: &[PathBuf]) -> Self {
        self.writable_anywhere = dirs
            .iter()
            .map(|d| d.canonicalize().unwrap_or_else(|_| d.clone()))
            .collect();
        self
    }

    /// Intersect what the plugin declares with what the config grants.
    pub fn effective(declared: &[Capability], granted: &PluginGrants) -> Result<Self, GrantError> {
        let has = |c: Capability| declared.contains(&c);
        let bad = |what: &'static str, e: globset::Error| GrantError::Pattern {
            what,
            error: e.to_string(),
        };
        let (exec, exec_exact) = if has(Capability::Exec) {
            let patterns = resolved_exec_patterns(&granted.exec)?;
            let mut exec = Patterns::new(&patterns, true).map_err(|e| bad("exec", e))?;
            // Shown as the operator wrote them.
            exec.patterns = granted.exec.clone();
            let exact = patterns
                .iter()
                .filter(|p| p.starts_with('/') && !has_glob(p))
                .map(PathBuf::from)
                .collect();
            (exec, exact)
        } else {
            (Patterns::empty(), Vec::new())
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
        let files = if read {
            Patterns::new(&granted.files, true).map_err(|e| bad("files", e))?
        } else {
            Patterns::empty()
        };
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
            exec_exact,
            exec_all_chosen: granted.operator_is_caller,
            shell: granted.shell && has(Capability::Shell) && has(Capability::Exec),
            passed_env: PassedEnv::of(&env),
            env,
            fetch,
            dirs,
            files,
            fs: read,
            runas,
            jobs: granted.jobs,
            set_grains: granted.set_grains,
            pillar: granted.pillar,
            call: Patterns::new(&granted.call, false).map_err(|e| bad("call", e))?,
            writable_anywhere: Vec::new(),
            special_modes: granted.special_modes && has(Capability::FsWrite),
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
            files: self.files.patterns().to_vec(),
            runas: self.runas.patterns().to_vec(),
            jobs: self.jobs,
            set_grains: self.set_grains,
            pillar: self.pillar,
            call: self.call.patterns().to_vec(),
            special_modes: self.special_modes,
            warnings: self.warnings(),
        }
    }

    /// Grants that do less than they seem to, in words.
    fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        for p in self.exec.patterns() {
            out.extend(self.exec_warnings(p));
        }
        for dir in &self.writable_anywhere {
            if !self.exec.is_empty() && self.exec.is_match(dir.join("program")) {
                out.push(format!(
                    "exec admits programs in {}, which plugins may write: they run only with \
                     shell = true",
                    dir.display()
                ));
            }
        }
        if self.special_modes {
            out.push(
                "special_modes lets this plugin make set-uid, set-gid and world-writable files \
                 in its writable directories"
                    .into(),
            );
        }
        if self.set_grains {
            out.push(
                "set_grains lets jobs that reach this plugin set this maid's grains, which \
                 targeting, grain-targeted API permissions (G@role:db) and pillar top files \
                 believe: whoever may call it here can widen what those give them"
                    .into(),
            );
        }
        for p in self.env.patterns() {
            if has_glob(p) {
                let blocked: Vec<&str> = HIJACK_ENV
                    .iter()
                    .chain(JOB_MAY_NOT_SET)
                    .map(|v| v.trim_end_matches('*'))
                    .filter(|v| self.env.is_match(v))
                    .collect();
                if !blocked.is_empty() {
                    out.push(format!(
                        "env {p:?} also matches variables a job may never set ({}{})",
                        blocked[..blocked.len().min(6)].join(", "),
                        if blocked.len() > 6 { ", …" } else { "" }
                    ));
                }
            } else if is_hijack_env(p) {
                out.push(format!(
                    "env {p:?} changes what programs load or run: it is never passed, \
                     from a job or from the agent"
                ));
            } else if listed(JOB_MAY_NOT_SET, p) {
                out.push(format!(
                    "env {p:?} passes the agent's own value; a job may never set it"
                ));
            }
        }
        out
    }

    /// What exec pattern `p` admits that a reviewer may not expect: with
    /// `shell`, runners (so anything); without, the runners it names,
    /// which never start, and the unclassified programs a glob reaches,
    /// which start only when named exactly.
    fn exec_warnings(&self, p: &str) -> Vec<String> {
        let name = p.rsplit('/').next().unwrap_or(p);
        let shown = |names: &[String]| {
            if names.len() > 12 {
                format!("{}, … ({} in all)", names[..12].join(", "), names.len())
            } else {
                names.join(", ")
            }
        };
        let under = has_glob(name).then(|| self.programs_under(p));
        let runners: Vec<String> = match &under {
            Some(Some(names)) => names
                .iter()
                .filter(|n| runs_its_arguments(n))
                .cloned()
                .collect(),
            Some(None) => vec!["any program in matching directories".into()],
            None if runs_its_arguments(name) => vec![name.to_string()],
            None => Vec::new(),
        };
        let mut out = Vec::new();
        if self.shell {
            if !runners.is_empty() {
                out.push(format!(
                    "exec {p:?} admits programs that run code from their arguments ({}): \
                     with shell granted, this plugin can run anything",
                    shown(&runners)
                ));
            }
            return out;
        }
        if !runners.is_empty() {
            out.push(format!(
                "exec {p:?} names programs that run code from their arguments ({}): \
                 they are refused unless shell = true",
                shown(&runners)
            ));
        }
        let dir = Path::new(p).parent().unwrap_or(Path::new("/"));
        let named_exactly = |n: &str| {
            let path = dir.join(n);
            !self.exec_exact.is_empty()
                && (self.exec_exact.contains(&path)
                    || path
                        .canonicalize()
                        .is_ok_and(|real| self.exec_exact.contains(&real)))
        };
        let unclassified: Vec<String> = match &under {
            Some(Some(names)) => names
                .iter()
                .filter(|n| !runs_its_arguments(n) && !PLAIN.contains(&n.as_str()))
                .filter(|n| !named_exactly(n))
                .cloned()
                .collect(),
            Some(None) => vec!["any program not classified plain".into()],
            None => Vec::new(),
        };
        if !unclassified.is_empty() {
            out.push(format!(
                "exec {p:?} is a glob: of what it admits, only programs classified plain \
                 start without shell = true; refused through it: {} (name one's path \
                 exactly to allow it)",
                shown(&unclassified)
            ));
        }
        out
    }

    /// The names of the programs in the directory of `pattern` that it
    /// admits, sorted (empty when the directory cannot be read); `None`
    /// when the pattern spans directories and they cannot be listed.
    fn programs_under(&self, pattern: &str) -> Option<Vec<String>> {
        let (dir, name) = pattern.rsplit_once('/')?;
        if has_glob(dir) || name.contains("**") {
            return None;
        }
        let mut out: Vec<String> = std::fs::read_dir(if dir.is_empty() { "/" } else { dir })
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| self.exec.is_match(format!("{dir}/{n}")))
            .collect();
        out.sort();
        Some(out)
    }

    /// Whether `program` may be started; `Err` says why not.
    ///
    /// `resolved` is the path it was found at and `real` that path with
    /// every link and `..` resolved. The allow-list is matched on `real`
    /// alone, so neither a `..` nor a link inside an allowed directory can
    /// lead anywhere else; the program that runs is `real`. Without
    /// `shell`, a program that runs code from its arguments
    /// ([`RUNS_ITS_ARGUMENTS`]), under either name, never starts; any
    /// other starts when the grant names its real path exactly, or when it
    /// is classified plain ([`PLAIN`]): through a glob, an unclassified
    /// program is refused, so a runner no list foresaw is refused too.
    pub fn check_program(&self, resolved: &Path, real: &Path) -> Result<(), Denied> {
        if self.exec.is_empty() {
            return Err(Denied::NotGranted("exec"));
        }
        if !self.exec.is_match(real) {
            // The real path is named when it is what made the difference.
            return Err(if real == resolved || !self.exec.is_match(resolved) {
                Denied::ProgramNotListed(resolved.to_path_buf())
            } else {
                Denied::ProgramLeadsOut {
                    resolved: resolved.to_path_buf(),
                    real: real.to_path_buf(),
                }
            });
        }
        // With shell granted, any allowed program may run.
        if self.shell {
            return Ok(());
        }
        if let Some(dir) = self.writable_anywhere.iter().find(|d| real.starts_with(d)) {
            return Err(Denied::WritableProgram {
                program: resolved.to_path_buf(),
                dir: dir.clone(),
            });
        }
        let runner = [resolved, real].iter().find_map(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .filter(|n| runs_its_arguments(n))
        });
        if let Some(name) = runner {
            return Err(Denied::RunsItsArguments {
                program: resolved.to_path_buf(),
                name: name.to_string(),
            });
        }
        // Named exactly: the operator chose this very program.
        if self.exec_all_chosen || self.exec_exact.iter().any(|p| p == real) {
            return Ok(());
        }
        // Reached through a glob: only a program known to start none.
        not_plain(resolved, real).map_or(Ok(()), Err)
    }

    /// The variables a job asks to set for a program, checked: each must be
    /// named by the `env` grant, and none may be one that changes what a
    /// program loads or finds ([`HIJACK_ENV`], [`JOB_MAY_NOT_SET`]), whatever
    /// the grant says.
    pub fn check_job_env<'a>(
        &self,
        vars: impl IntoIterator<Item = &'a (String, String)>,
    ) -> Result<(), Denied> {
        for (name, _) in vars {
            if is_hijack_env(name) {
                return Err(Denied::HijackEnv(name.clone()));
            }
            if listed(JOB_MAY_NOT_SET, name) {
                return Err(Denied::GrantsEnv(name.clone()));
            }
            if name.is_empty() || name.contains(['=', '\0']) {
                return Err(Denied::NotAVariable(name.clone()));
            }
            if !self.env.is_match(name) {
                return Err(Denied::EnvNotGranted(name.clone()));
            }
        }
        Ok(())
    }

    /// Whether a program may run in `cwd`: it must lie inside a granted
    /// directory once `..` and symlinks are resolved.
    pub fn check_cwd(&self, cwd: &Path) -> Result<PathBuf, Denied> {
        let real = cwd.canonicalize().map_err(|e| Denied::CwdUnreadable {
            cwd: cwd.to_path_buf(),
            error: e.to_string(),
        })?;
        for dir in &self.dirs {
            if let Ok(root) = dir.path.canonicalize()
                && real.starts_with(&root)
            {
                return Ok(real);
            }
        }
        Err(Denied::CwdOutside(cwd.to_path_buf()))
    }

    /// The granted directory `path` lies in (the innermost one, read-write
    /// when `write`), for the host's own file calls (`stat`, `set-mode`).
    /// Checked lexically here, with `..` refused outright; the caller finds
    /// the real path, which must lie in the same directory.
    pub fn fs_dir(&self, path: &str, write: bool) -> Result<&DirGrant, Denied> {
        let need = if write { "fs-write" } else { "fs-read" };
        if !self.fs || (write && !self.dirs.iter().any(|d| d.writable)) {
            return Err(Denied::NotGranted(need));
        }
        let p = Path::new(path);
        if !p.is_absolute() {
            return Err(Denied::NotAbsolute(path.to_string()));
        }
        if p.components().any(|c| c == Component::ParentDir) {
            return Err(Denied::ParentDir(path.to_string()));
        }
        self.dirs
            .iter()
            .filter(|d| p.starts_with(&d.path) && (d.writable || !write))
            .max_by_key(|d| d.path.components().count())
            .ok_or_else(|| {
                if write && self.dirs.iter().any(|d| p.starts_with(&d.path)) {
                    Denied::ReadOnly(path.to_string())
                } else {
                    Denied::OutsideDirs(path.to_string())
                }
            })
    }

    /// Whether `path` may be read whole by `read-file`: the path asked
    /// for and the real path it leads to must both be granted.
    pub fn check_file(&self, path: &Path) -> Result<PathBuf, Denied> {
        if self.files.is_empty() {
            return Err(Denied::NoFiles);
        }
        if !path.is_absolute() || path.components().any(|c| c == Component::ParentDir) {
            return Err(Denied::NotPlainPath(path.to_path_buf()));
        }
        if !self.files.is_match(path) {
            return Err(Denied::FileNotGranted(path.to_path_buf()));
        }
        let real = path.canonicalize().map_err(|e| Denied::Unresolvable {
            path: path.to_path_buf(),
            missing: e.kind() == std::io::ErrorKind::NotFound,
            error: e.to_string(),
        })?;
        if !self.files.is_match(&real) && !through_proc_self(path, &real) {
            return Err(Denied::FileLeadsOut {
                path: path.to_path_buf(),
                real,
            });
        }
        Ok(real)
    }

    /// Whether `url` may be fetched.
    pub fn check_fetch(&self, url: &str) -> Result<(), Denied> {
        if self.fetch.is_empty() {
            return Err(Denied::NotGranted("fetch"));
        }
        if !self.fetch.is_match(url) {
            return Err(Denied::UrlNotListed(url.to_string()));
        }
        Ok(())
    }

    /// Whether function `fun` (`module.function`) may be run with `call`.
    pub fn check_call(&self, fun: &str) -> Result<(), Denied> {
        if self.call.is_empty() {
            return Err(Denied::NotGranted("call"));
        }
        if !self.call.is_match(fun) {
            return Err(Denied::CallNotListed(fun.to_string()));
        }
        Ok(())
    }
}

/// Whether `path` is one of the kernel's own links into this process's
/// `/proc/<pid>/` (`/proc/mounts` is `self/mounts`, `/proc/net` is
/// `self/net`, `/proc/self` is `<pid>`), and `real` is where that link
/// and nothing else leads: what a grant of `/proc/mounts` means, though
/// its real path names the agent's pid. A link anyone else made (a file
/// under a granted directory pointing into `/proc/self/`) is not one of
/// these: its first component is not under `/proc`.
fn through_proc_self(path: &Path, real: &Path) -> bool {
    let Ok(rest) = path.strip_prefix("/proc") else {
        return false;
    };
    let mut parts = rest.components();
    let Some(Component::Normal(first)) = parts.next() else {
        return false;
    };
    let Ok(target) = std::fs::read_link(Path::new("/proc").join(first)) else {
        return false;
    };
    let pid = std::process::id().to_string();
    // `self` → `<pid>`; `mounts` → `self/mounts`.
    let target = match target.strip_prefix("self") {
        Ok(under) => Path::new(&pid).join(under),
        Err(_) if target == Path::new(&pid) => target,
        Err(_) => return false,
    };
    real == Path::new("/proc").join(target).join(parts.as_path())
}

#[cfg(test)]
mod tests;
