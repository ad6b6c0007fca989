//! Why a grant refuses what a plugin asked of the host, one variant per
//! rule, and why a plugin's grants cannot be compiled at all. The texts are
//! what a plugin (and, through it, the operator) reads in its
//! `host-error::denied`, so each names the rule and what to change.

use std::path::PathBuf;

/// A host call the plugin's grants do not allow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    /// The capability (`exec`, `fetch`, `call`, `fs-read`, `fs-write`) is
    /// not granted at all.
    #[error("{0} is not granted to this plugin")]
    NotGranted(&'static str),
    /// `files` is empty.
    #[error("no files are granted to this plugin")]
    NoFiles,
    /// The program's real path is not in the exec allow-list.
    #[error("{} is not in the exec allow-list", .0.display())]
    ProgramNotListed(PathBuf),
    /// The path asked for is listed, the real path it leads to is not.
    #[error("{} (really {}) is not in the exec allow-list", .resolved.display(), .real.display())]
    ProgramLeadsOut { resolved: PathBuf, real: PathBuf },
    /// The program lies where plugins may write, and `shell` is not granted.
    #[error(
        "{} lies in {}, which plugins are granted to write: a job could have written it, \
         so it runs only for plugins granted shell",
        .program.display(), .dir.display()
    )]
    WritableProgram { program: PathBuf, dir: PathBuf },
    /// A shell or another program that runs its arguments, without `shell`.
    #[error(
        "{} is a shell or another program that runs code from its arguments ({name}), and \
         the shell capability is not granted (use python_shell=False with a program that \
         does not)",
        .program.display()
    )]
    RunsItsArguments { program: PathBuf, name: String },
    /// Reached through a glob, and its name is not on the plain list.
    #[error(
        "{} is reached through an exec glob and {name:?} is not classified as a plain \
         program (one that starts no other program and writes no file it is told to), so it \
         runs only with the shell capability or when the exec grant names its path exactly",
        .program.display()
    )]
    NotPlain { program: PathBuf, name: String },
    /// Reached through a glob, and not an ELF executable.
    #[error(
        "{} (really {}) is not an ELF executable but a script or data that an interpreter \
         would run, so through an exec glob it runs only with the shell capability",
        .resolved.display(), .real.display()
    )]
    NotElf { resolved: PathBuf, real: PathBuf },
    /// Reached through a glob, and its kind cannot be read.
    #[error(
        "{}: cannot tell whether it is an ELF executable ({error}), so through an exec glob \
         it runs only with the shell capability",
        .program.display()
    )]
    UnknownKind { program: PathBuf, error: String },
    /// A variable that changes what programs load or run.
    #[error("env {0} changes what programs load or run; a job may never set it")]
    HijackEnv(String),
    /// A variable only the grant sets (`PATH`, `HOME`).
    #[error("env {0} is the grant's to set, never a job's")]
    GrantsEnv(String),
    /// Not a variable name at all.
    #[error("env {0:?} is not a variable name")]
    NotAVariable(String),
    /// A variable the `env` grant does not name.
    #[error("env {0} is not granted to this plugin")]
    EnvNotGranted(String),
    /// The working directory cannot be resolved.
    #[error("cwd {}: {error}", .cwd.display())]
    CwdUnreadable { cwd: PathBuf, error: String },
    /// The working directory lies outside every granted directory.
    #[error("cwd {} is outside the directories granted to this plugin", .0.display())]
    CwdOutside(PathBuf),
    /// A path that is not absolute.
    #[error("{0} is not an absolute path")]
    NotAbsolute(String),
    /// A path with a `..`.
    #[error("{0}: '..' is not allowed here")]
    ParentDir(String),
    /// Written to a directory granted read-only.
    #[error("{0} is in a directory granted read-only")]
    ReadOnly(String),
    /// Outside every granted directory.
    #[error("{0} is outside the directories granted to this plugin")]
    OutsideDirs(String),
    /// `read-file` of a path that is relative or has a `..`.
    #[error("{} is not an absolute path without '..'", .0.display())]
    NotPlainPath(PathBuf),
    /// `read-file` of a path `files` does not name.
    #[error("{} is not among the files granted", .0.display())]
    FileNotGranted(PathBuf),
    /// `read-file` of a path that cannot be resolved. When it is granted
    /// and does not exist (`missing`), the read is no refusal:
    /// `read-file` fails as reading a missing file does.
    #[error("{}: {error}", .path.display())]
    Unresolvable {
        path: PathBuf,
        error: String,
        missing: bool,
    },
    /// `read-file` of a granted path that leads to one not granted.
    #[error("{} leads to {}, which is not among the files granted", .path.display(), .real.display())]
    FileLeadsOut { path: PathBuf, real: PathBuf },
    /// A URL the fetch allow-list does not name.
    #[error("{0} is not in the fetch allow-list")]
    UrlNotListed(String),
    /// A function `call` may not run.
    #[error("{0} is not among the functions call may run")]
    CallNotListed(String),
}

/// Why a plugin's grants cannot be compiled: the plugin does not load.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrantError {
    /// An exec pattern with a `..`.
    #[error("exec pattern {0:?} has a '..': name programs by their real path")]
    ParentDirPattern(String),
    /// A pattern that is no glob.
    #[error("invalid {what} pattern: {error}")]
    Pattern { what: &'static str, error: String },
}
