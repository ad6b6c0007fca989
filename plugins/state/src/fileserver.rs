//! Salt's file server as the state system asks it — `cp.list_master`,
//! `cp.list_master_dirs` and `cp.list_states` (`file.recurse`, glob
//! includes) — answered by the host's `list-sources` under this plugin's own
//! `fetch` grant, so a state sees exactly the `salt://` paths it could
//! read, in the environment asked for (one the file server does not have
//! lists nothing, as Salt's).

use maid_sdk::host;
use maid_sdk::{Error, ErrorKind};

use crate::states::CallError;

/// What the host lists under `prefix` in `saltenv`.
fn listing(saltenv: &str, prefix: &str) -> Result<host::Listing, CallError> {
    host::list(saltenv, prefix).map_err(|e: Error| match e.kind {
        ErrorKind::Denied => CallError::Denied(e.message),
        _ => CallError::Failed(e.message),
    })
}

/// `cp.list_master(saltenv, prefix)`: the files, sorted.
pub fn file_list(saltenv: &str, prefix: &str) -> Result<Vec<String>, CallError> {
    listing(saltenv, prefix).map(|l| l.files)
}

/// `cp.list_master_dirs(saltenv, prefix)`: the directories, sorted.
pub fn dir_list(saltenv: &str, prefix: &str) -> Result<Vec<String>, CallError> {
    listing(saltenv, prefix).map(|l| l.dirs)
}

/// `cp.list_states(saltenv)` (`fileclient.list_states`): each `.sls`
/// file as an SLS name, an `init.sls` as its directory's; sorted.
pub fn list_states(saltenv: &str) -> Result<Vec<String>, CallError> {
    let files = file_list(saltenv, "")?;
    let states: std::collections::BTreeSet<String> = files
        .iter()
        .filter_map(|path| match path.strip_suffix("/init.sls") {
            Some(dir) => Some(dir.replace('/', ".")),
            None => path.strip_suffix(".sls").map(|p| p.replace('/', ".")),
        })
        .collect();
    Ok(states.into_iter().collect())
}
