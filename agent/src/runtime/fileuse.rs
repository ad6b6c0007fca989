//! A call's file uses through WASI, as its audit record lists them (the
//! wrappers in [`super::wasi`] report them): each host path, access and
//! outcome once, and past [`MAX_FILES`] a count.

use serde::Serialize;

use super::host::CapabilityUse;

/// How a plugin used a host file through WASI.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum FileAccess {
    /// Opened to read (a file, or a directory to list).
    Read,
    /// Opened to write, create or truncate.
    Write,
    /// Removed, made, renamed, linked, or its times set.
    Change,
}

/// Distinct file uses a call's record lists; beyond them it counts.
pub const MAX_FILES: usize = 1_000;

/// The file uses of one call, as its record lists them: each path,
/// access and outcome once; past [`MAX_FILES`], one `more_files` count.
#[derive(Debug, Default)]
pub struct FileUses {
    seen: std::collections::HashSet<(String, FileAccess, bool)>,
    /// Where in `used` the count past [`MAX_FILES`] is.
    more_at: Option<usize>,
}

impl FileUses {
    /// Record a use into `used`, unless it is there already.
    pub fn add(
        &mut self,
        used: &mut Vec<CapabilityUse>,
        path: String,
        access: FileAccess,
        allowed: bool,
    ) {
        let key = (path, access, allowed);
        if self.seen.contains(&key) {
            return;
        }
        if self.seen.len() >= MAX_FILES {
            match self.more_at.and_then(|at| used.get_mut(at)) {
                Some(CapabilityUse::MoreFiles { count }) => *count += 1,
                _ => {
                    self.more_at = Some(used.len());
                    used.push(CapabilityUse::MoreFiles { count: 1 });
                }
            }
            return;
        }
        let (path, access, allowed) = key.clone();
        self.seen.insert(key);
        used.push(CapabilityUse::File {
            path,
            access,
            allowed,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_uses_are_listed_once_and_counted_past_the_cap() {
        let mut used = vec![CapabilityUse::Jobs { allowed: true }];
        let mut files = FileUses::default();
        files.add(&mut used, "/d/a".into(), FileAccess::Read, true);
        files.add(&mut used, "/d/a".into(), FileAccess::Read, true);
        files.add(&mut used, "/d/a".into(), FileAccess::Write, true);
        files.add(&mut used, "/d/a".into(), FileAccess::Write, false);
        assert_eq!(used.len(), 4, "{used:?}");
        for i in 0..MAX_FILES + 10 {
            files.add(&mut used, format!("/d/{i}"), FileAccess::Read, true);
        }
        assert_eq!(used.len(), 1 + MAX_FILES + 1);
        assert_eq!(used.last(), Some(&CapabilityUse::MoreFiles { count: 13 }));
        // A use already listed is not counted again.
        files.add(&mut used, "/d/a".into(), FileAccess::Read, true);
        assert_eq!(used.last(), Some(&CapabilityUse::MoreFiles { count: 13 }));
    }
}
