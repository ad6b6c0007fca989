//! The host's own file calls: `stat`, `set-mode` and `symlink`, what WASI
//! does not carry (owners, permission bits, links with absolute targets),
//! inside the plugin's granted directories only; and `read-file`, single
//! files the grants name.
//!
//! The path is checked lexically against the grants
//! ([`Grants::fs_dir`]), its real path must lie in the same granted
//! directory, and it is then reached with cap-std from that directory,
//! which refuses any link that leads out of it: the same rule the WASI
//! preopens follow.

use std::path::{Path, PathBuf};

use cap_std::fs::{Dir, FileTypeExt, MetadataExt, Permissions, PermissionsExt};

use super::bindings::maid::plugin::host::{FileStat, HostError};
use super::denied::Denied;
use super::policy::Grants;

/// An I/O error as the plugin sees it: escaping the granted directory is a
/// denial, the rest are failures.
fn io_error(path: &str, e: std::io::Error) -> HostError {
    if e.kind() == std::io::ErrorKind::PermissionDenied {
        HostError::Denied(format!("{path}: {e}"))
    } else {
        HostError::Failed(format!("{path}: {e}"))
    }
}

/// An opened path: the granted directory (at its real path) as cap-std
/// holds it, the path relative to it with every link resolved, and that
/// real path.
struct Opened {
    root: Dir,
    rel: PathBuf,
    real: PathBuf,
}

/// `path` in its granted directory, links resolved (the last component
/// only when `follow`). A link may point anywhere by absolute path, which
/// cap-std alone refuses even inside the directory; so the real path is
/// found first, must lie inside the real directory, and is then reached
/// through cap-std, which refuses a link swapped in since.
fn open(grants: &Grants, path: &str, write: bool, follow: bool) -> Result<Opened, HostError> {
    let dir = grants.fs_dir(path, write).map_err(HostError::from)?;
    let root = dir
        .path
        .canonicalize()
        .map_err(|e| HostError::Failed(format!("{}: {e}", dir.path.display())))?;
    let p = Path::new(path);
    let real = if follow {
        p.canonicalize().map_err(|e| io_error(path, e))?
    } else {
        match (p.parent(), p.file_name()) {
            (Some(parent), Some(name)) => parent
                .canonicalize()
                .map_err(|e| io_error(path, e))?
                .join(name),
            _ => p.canonicalize().map_err(|e| io_error(path, e))?,
        }
    };
    let Ok(rel) = real.strip_prefix(&root) else {
        return Err(HostError::Denied(format!(
            "{path} leads to {}, outside the directories granted to this plugin",
            real.display()
        )));
    };
    let rel = if rel.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        rel.to_path_buf()
    };
    let opened = Dir::open_ambient_dir(&root, cap_std::ambient_authority())
        .map_err(|e| HostError::Failed(format!("{}: {e}", root.display())))?;
    Ok(Opened {
        root: opened,
        rel,
        real,
    })
}

fn seconds(secs: i64, nanos: i64) -> f64 {
    secs as f64 + nanos as f64 / 1e9
}

/// `stat` of `path`, links followed (inside the granted directory only)
/// or not.
pub(crate) fn stat(grants: &Grants, path: &str, follow: bool) -> Result<FileStat, HostError> {
    let Opened { root, rel, real } = open(grants, path, false, follow)?;
    let md = root.symlink_metadata(&rel).map_err(|e| io_error(path, e))?;
    let ft = md.file_type();
    let kind = if ft.is_symlink() {
        "link"
    } else if ft.is_dir() {
        "dir"
    } else if ft.is_file() {
        "file"
    } else if ft.is_fifo() {
        "pipe"
    } else if ft.is_socket() {
        "socket"
    } else if ft.is_block_device() {
        "block"
    } else {
        "char"
    };
    let target = if follow {
        Some(real.to_string_lossy().into_owned())
    } else if ft.is_symlink() {
        root.read_link_contents(&rel)
            .ok()
            .map(|t| t.to_string_lossy().into_owned())
    } else {
        None
    };
    let user = nix::unistd::User::from_uid(md.uid().into())
        .ok()
        .flatten()
        .map(|u| u.name);
    let group = nix::unistd::Group::from_gid(md.gid().into())
        .ok()
        .flatten()
        .map(|g| g.name);
    Ok(FileStat {
        kind: kind.into(),
        mode: md.mode() & 0o7777,
        uid: md.uid(),
        gid: md.gid(),
        user,
        group,
        size: md.len(),
        inode: md.ino(),
        atime: seconds(md.atime(), md.atime_nsec()),
        mtime: seconds(md.mtime(), md.mtime_nsec()),
        ctime: seconds(md.ctime(), md.ctime_nsec()),
        target,
    })
}

/// Mode bits a plugin sets only with the `special_modes` grant: set-uid
/// and set-gid (a set-uid-root copy of a shell in a granted directory is
/// root for every local user) and world-writable (anyone could put a
/// program in the file, or in the directory, for a job or an operator
/// to run). Sticky alone grants nothing and is allowed.
pub(crate) const SPECIAL_MODE_BITS: u32 = 0o6002;

/// Whether `mode` may be set under `grants`: any mode with
/// `special_modes`, else none of [`SPECIAL_MODE_BITS`]. The same for files
/// and directories, so a path swapped between a check and the change
/// cannot turn an allowed directory mode into a forbidden file mode.
pub(crate) fn check_mode(grants: &Grants, path: &str, mode: u32) -> Result<(), HostError> {
    if mode > 0o7777 {
        return Err(HostError::Failed(format!("{mode:o} is not a file mode")));
    }
    let special = mode & SPECIAL_MODE_BITS;
    if special != 0 && !grants.special_modes {
        return Err(HostError::Denied(format!(
            "{path}: mode {mode:04o} has set-uid, set-gid or world-writable bits \
             ({special:04o}), which need the special_modes grant"
        )));
    }
    Ok(())
}

/// Set the permission bits of `path` (a link on the way is followed only
/// while it stays in the granted directory). The path is checked first,
/// so a refused place is reported as such whatever the mode.
pub(crate) fn set_mode(grants: &Grants, path: &str, mode: u32) -> Result<(), HostError> {
    let Opened { root, rel, .. } = open(grants, path, true, true)?;
    check_mode(grants, path, mode)?;
    root.set_permissions(&rel, Permissions::from_mode(mode))
        .map_err(|e| io_error(path, e))
}

/// Create the link `link` -> `target`. The link's directory is resolved
/// inside a directory granted read-write and opened through cap-std; the
/// link is made there with `symlinkat`, so no link swapped in on the way
/// is followed. `target` is the link's content only.
pub(crate) fn symlink(grants: &Grants, target: &str, link: &str) -> Result<(), HostError> {
    use std::os::fd::AsFd;
    if target.is_empty() || target.contains('\0') {
        return Err(HostError::Failed(format!(
            "{target:?} is not a link target"
        )));
    }
    let Opened { root, rel, .. } = open(grants, link, true, false)?;
    let (Some(parent), Some(name)) = (rel.parent(), rel.file_name()) else {
        return Err(HostError::Failed(format!(
            "{link}: not a path a link can take"
        )));
    };
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    let dir = root.open_dir(parent).map_err(|e| io_error(link, e))?;
    nix::unistd::symlinkat(target, dir.as_fd(), name)
        .map_err(|e| io_error(link, std::io::Error::from(e)))
}

/// The whole of a file the grants name (`files`), up to the plugin's
/// output limit (`max_output_bytes`).
pub(crate) fn read_file(
    grants: &Grants,
    max_output_bytes: usize,
    path: &str,
) -> Result<Vec<u8>, HostError> {
    use std::io::Read;
    let real = match grants.check_file(Path::new(path)) {
        Ok(real) => real,
        // Granted and not there: the grant allowed the look, and the
        // answer is that the file is missing (what `grains._core` asks of
        // many a path). Nothing is opened.
        Err(Denied::Unresolvable {
            missing: true,
            error,
            ..
        }) => return Err(HostError::Failed(format!("{path}: {error}"))),
        Err(denied) => return Err(denied.into()),
    };
    let file = std::fs::File::open(&real).map_err(|e| io_error(path, e))?;
    let cap = u64::try_from(max_output_bytes).unwrap_or(u64::MAX);
    let mut out = Vec::new();
    file.take(cap.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|e| io_error(path, e))?;
    if out.len() as u64 > cap {
        return Err(HostError::Failed(format!(
            "{path} is larger than the plugin's output limit ({cap} bytes)"
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_granted_file_that_is_missing_fails_and_one_not_granted_is_denied() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("there"), "x").unwrap();
        let granted = maid_config::PluginGrants {
            files: vec![format!("{}/*", dir.path().display())],
            ..Default::default()
        };
        let g = Grants::effective(&[super::super::Capability::FsRead], &granted).unwrap();
        let limits = crate::config::Limits::default();
        let path = |name: &str| dir.path().join(name).display().to_string();
        assert_eq!(
            read_file(&g, limits.max_output_bytes, &path("there")).unwrap(),
            b"x"
        );
        match read_file(&g, limits.max_output_bytes, &path("missing")) {
            Err(HostError::Failed(why)) => assert!(why.ends_with("(os error 2)"), "{why}"),
            other => panic!("{other:?}"),
        }
        // Not granted: refused before anything is resolved, there or not.
        for outside in ["/etc/hostname", "/nonexistent/maid"] {
            assert!(
                matches!(
                    read_file(&g, limits.max_output_bytes, outside),
                    Err(HostError::Denied(_))
                ),
                "{outside}"
            );
        }
    }

    #[test]
    fn special_modes_need_their_grant_and_sticky_does_not() {
        let mut g = Grants::none();
        for mode in [
            0o4755, 0o2755, 0o6755, 0o0666, 0o0777, 0o1777, 0o4000, 0o0002,
        ] {
            let err = check_mode(&g, "/x", mode).unwrap_err();
            assert!(matches!(err, HostError::Denied(_)), "{mode:o}: {err:?}");
        }
        for mode in [0o0755, 0o0644, 0o1755, 0o0700, 0o0000, 0o0775] {
            assert!(check_mode(&g, "/x", mode).is_ok(), "{mode:o}");
        }
        assert!(matches!(
            check_mode(&g, "/x", 0o10000),
            Err(HostError::Failed(_))
        ));
        g.special_modes = true;
        for mode in [0o4755, 0o2755, 0o0777, 0o1777] {
            assert!(check_mode(&g, "/x", mode).is_ok(), "{mode:o}");
        }
    }
}
