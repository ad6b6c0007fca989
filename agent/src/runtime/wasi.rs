//! The WASI a plugin is linked with: every interface of wasi:cli 0.2 a
//! guest's standard library imports, through wasmtime-wasi's own linker
//! call, each checked by the store's context (no sockets, no environment,
//! preopens only as granted).
//!
//! The `wasi:filesystem` calls that open or change a host file are then
//! replaced by wrappers that call wasmtime-wasi's own implementation and
//! record, for the audit trail, which host path each touched (read,
//! written or changed; allowed or refused by the preopen's permissions).
//! A descriptor carries no path, so the call keeps one per descriptor it
//! handed out: the preopens (whose guest name is their host path) and
//! every file or directory opened beneath them.

use std::path::{Path, PathBuf};

use wasmtime::StoreContextMut;
use wasmtime::component::Resource;
use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystemView as _};
use wasmtime_wasi::p2::FsResult;
use wasmtime_wasi::p2::bindings::filesystem::preopens;
use wasmtime_wasi::p2::bindings::filesystem::types::{
    DescriptorFlags, ErrorCode, HostDescriptor, NewTimestamp, OpenFlags, PathFlags,
};

use super::fileuse::FileAccess;
use super::*;

/// The instances wasmtime-wasi 48.0.8 registers (its
/// `wit/deps/filesystem.wit`); a guest importing any 0.2.x is linked to
/// them. Exactly these: under another version the wrappers would make a
/// second instance and audit nothing (`tests/sandbox.rs` would fail).
const TYPES: &str = "wasi:filesystem/types@0.2.12";
const PREOPENS: &str = "wasi:filesystem/preopens@0.2.12";

type Store<'a> = StoreContextMut<'a, HostState>;
type Out<T> = wasmtime::Result<(Result<T, ErrorCode>,)>;

pub(super) fn link_wasi(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    // That includes wasi:sockets: CPython built by componentize-py imports
    // it whether or not the plugin opens a socket. It is linked so such a
    // plugin loads, but no call can use it: the `WasiCtx` of every store is
    // built without `allow_tcp`, `allow_udp`, `allow_ip_name_lookup` or a
    // socket address check, so creating a socket, resolving a name and every
    // address are refused (`access-denied`); `tests/sandbox.rs` proves each
    // refusal. A plugin reaches outside only through `host.exec` and
    // `host.fetch`, which check its grants.
    wasmtime_wasi::p2::add_to_linker_async(linker)?;
    linker.allow_shadowing(true);
    let audited = audit_filesystem(linker);
    linker.allow_shadowing(false);
    audited
}

/// wasmtime-wasi's result as the guest gets it: an error code, or a trap
/// for anything else (as its own bindings do).
fn lower<T>(r: FsResult<T>) -> Out<T> {
    Ok((match r {
        Ok(v) => Ok(v),
        Err(e) => Err(e.downcast()?),
    },))
}

/// The host path of `rel` beneath the descriptor `fd`.
fn at(s: &HostState, fd: u32, rel: &str) -> String {
    let base = s
        .job
        .fs_paths
        .get(&fd)
        .map(PathBuf::as_path)
        .unwrap_or(Path::new("?"));
    let p = if rel.is_empty() || rel == "." {
        base.to_path_buf()
    } else {
        base.join(rel)
    };
    p.to_string_lossy().into_owned()
}

/// Record a use that happened, or that the preopen's permissions refused;
/// other failures (no such file) touched nothing.
fn record<T>(s: &mut HostState, access: FileAccess, path: String, r: &Result<T, ErrorCode>) {
    let refused = matches!(
        r,
        Err(ErrorCode::NotPermitted | ErrorCode::ReadOnly | ErrorCode::Access)
    );
    if r.is_ok() || refused {
        s.job.file_used(path, access, !refused);
    }
}

fn audit_filesystem(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    let mut pre = linker.instance(PREOPENS)?;
    pre.func_wrap("get-directories", |mut store: Store<'_>, (): ()| {
        let dirs = preopens::Host::get_directories(&mut store.data_mut().filesystem())?;
        let s = store.data_mut();
        for (fd, guest) in &dirs {
            s.job.fs_paths.insert(fd.rep(), PathBuf::from(guest));
        }
        Ok((dirs,))
    })?;
    let mut t = linker.instance(TYPES)?;
    wrap_open_at(&mut t)?;
    wrap_changes(&mut t)?;
    wrap_links(&mut t)
}

type Instance<'a> = wasmtime::component::LinkerInstance<'a, HostState>;

/// `open-at`: a read, or a write (create, truncate, write, mutate).
fn wrap_open_at(t: &mut Instance<'_>) -> wasmtime::Result<()> {
    t.func_wrap_async(
        "[method]descriptor.open-at",
        |mut store: Store<'_>,
         (fd, pf, path, of, df): (
            Resource<Descriptor>,
            PathFlags,
            String,
            OpenFlags,
            DescriptorFlags,
        )| {
            Box::new(async move {
                let writes = of.intersects(OpenFlags::CREATE | OpenFlags::TRUNCATE)
                    || df.intersects(DescriptorFlags::WRITE | DescriptorFlags::MUTATE_DIRECTORY);
                let host = at(store.data(), fd.rep(), &path);
                let r = HostDescriptor::open_at(
                    &mut store.data_mut().filesystem(),
                    fd,
                    pf,
                    path,
                    of,
                    df,
                )
                .await;
                let (r,) = lower(r)?;
                let s = store.data_mut();
                if let Ok(new) = &r {
                    s.job.fs_paths.insert(new.rep(), PathBuf::from(&host));
                }
                let access = if writes {
                    FileAccess::Write
                } else {
                    FileAccess::Read
                };
                record(s, access, host, &r);
                Ok((r,))
            })
        },
    )?;
    Ok(())
}

/// What removes, makes or renames a path.
fn wrap_changes(t: &mut Instance<'_>) -> wasmtime::Result<()> {
    macro_rules! changes_one_path {
        ($name:literal, $method:ident) => {
            t.func_wrap_async(
                $name,
                |mut store: Store<'_>, (fd, path): (Resource<Descriptor>, String)| {
                    Box::new(async move {
                        let host = at(store.data(), fd.rep(), &path);
                        let r =
                            HostDescriptor::$method(&mut store.data_mut().filesystem(), fd, path)
                                .await;
                        let (r,) = lower(r)?;
                        record(store.data_mut(), FileAccess::Change, host, &r);
                        Ok((r,))
                    })
                },
            )?;
        };
    }
    changes_one_path!("[method]descriptor.unlink-file-at", unlink_file_at);
    changes_one_path!(
        "[method]descriptor.create-directory-at",
        create_directory_at
    );
    changes_one_path!(
        "[method]descriptor.remove-directory-at",
        remove_directory_at
    );
    t.func_wrap_async(
        "[method]descriptor.rename-at",
        |mut store: Store<'_>,
         (fd, old, to_fd, new): (Resource<Descriptor>, String, Resource<Descriptor>, String)| {
            Box::new(async move {
                let from = at(store.data(), fd.rep(), &old);
                let to = at(store.data(), to_fd.rep(), &new);
                let r = HostDescriptor::rename_at(
                    &mut store.data_mut().filesystem(),
                    fd,
                    old,
                    to_fd,
                    new,
                )
                .await;
                let (r,) = lower(r)?;
                record(store.data_mut(), FileAccess::Change, from, &r);
                record(store.data_mut(), FileAccess::Change, to, &r);
                Ok((r,))
            })
        },
    )?;
    Ok(())
}

/// What links a path or sets its times.
fn wrap_links(t: &mut Instance<'_>) -> wasmtime::Result<()> {
    t.func_wrap_async(
        "[method]descriptor.symlink-at",
        |mut store: Store<'_>, (fd, target, link): (Resource<Descriptor>, String, String)| {
            Box::new(async move {
                let host = at(store.data(), fd.rep(), &link);
                let r = HostDescriptor::symlink_at(
                    &mut store.data_mut().filesystem(),
                    fd,
                    target,
                    link,
                )
                .await;
                let (r,) = lower(r)?;
                record(store.data_mut(), FileAccess::Change, host, &r);
                Ok((r,))
            })
        },
    )?;
    t.func_wrap_async(
        "[method]descriptor.link-at",
        |mut store: Store<'_>,
         (fd, pf, old, to_fd, new): (
            Resource<Descriptor>,
            PathFlags,
            String,
            Resource<Descriptor>,
            String,
        )| {
            Box::new(async move {
                let to = at(store.data(), to_fd.rep(), &new);
                let r = HostDescriptor::link_at(
                    &mut store.data_mut().filesystem(),
                    fd,
                    pf,
                    old,
                    to_fd,
                    new,
                )
                .await;
                let (r,) = lower(r)?;
                record(store.data_mut(), FileAccess::Change, to, &r);
                Ok((r,))
            })
        },
    )?;
    t.func_wrap_async(
        "[method]descriptor.set-times-at",
        |mut store: Store<'_>,
         (fd, pf, path, atime, mtime): (
            Resource<Descriptor>,
            PathFlags,
            String,
            NewTimestamp,
            NewTimestamp,
        )| {
            Box::new(async move {
                let host = at(store.data(), fd.rep(), &path);
                let r = HostDescriptor::set_times_at(
                    &mut store.data_mut().filesystem(),
                    fd,
                    pf,
                    path,
                    atime,
                    mtime,
                )
                .await;
                let (r,) = lower(r)?;
                record(store.data_mut(), FileAccess::Change, host, &r);
                Ok((r,))
            })
        },
    )?;
    Ok(())
}
