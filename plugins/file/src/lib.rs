//! Salt's `file` module, for the directories the operator grants and no
//! others: read, write, copy, link and inspect files with Salt's names,
//! arguments and returns. Files go through WASI (`std::fs` on the
//! preopened directories); owners and modes, which WASI does not carry,
//! through `host.stat` and `host.set-mode`, which check the same grants.
//!
//! One module per concern: [`paths`] turns arguments into granted paths,
//! [`inspect`] answers questions about files, [`content`] reads and writes
//! them, [`tree`] makes, copies, links and removes them, [`mode`] reads and
//! sets modes, [`pattern`] searches with Python's regexes and [`replace`]
//! edits with them; [`perms`] checks owners and modes as Salt's
//! `check_perms`, [`managed`] is the execution side of `file.managed`, and
//! [`difflib`] makes Python's unified diffs, which Salt shows as changes.

mod b64;
mod content;
mod difflib;
mod inspect;
mod managed;
mod mode;
mod paths;
mod pattern;
mod perms;
mod replace;
mod tree;

use maid_sdk::{Capability, Function, Plugin, export_plugin};

struct File;

/// Serde's default for a flag that is on unless the call says otherwise.
pub(crate) fn yes() -> bool {
    true
}

impl Plugin for File {
    const MODULE: &'static str = "file";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");
    const CAPABILITIES: &'static [Capability] = &[Capability::FsRead, Capability::FsWrite];

    fn functions() -> Vec<Function> {
        maid_sdk::functions![
            inspect::file_exists,
            inspect::directory_exists,
            content::read,
            content::write,
            content::append,
            content::touch,
            inspect::stats_,
            inspect::get_hash,
            tree::remove,
            tree::mkdir,
            tree::makedirs,
            tree::copy,
            tree::symlink,
            tree::rename,
            mode::get_mode,
            mode::set_mode,
            pattern::contains,
            pattern::search,
            replace::replace,
            tree::is_link_,
            tree::readlink,
            tree::makedirs_perms_,
            tree::readdir,
            perms::check_perms_,
            managed::check_managed_changes,
            managed::manage_file,
            managed::get_diff,
        ]
    }
}

export_plugin!(File);
