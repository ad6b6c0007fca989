//! The WASI a plugin is linked with: every interface of wasi:cli 0.2 a
//! guest's standard library imports, through wasmtime-wasi's own linker
//! call, each checked by the store's context (no sockets, no environment,
//! preopens only as granted).

use super::*;

pub(super) fn link_wasi(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    // That includes wasi:sockets: CPython built by componentize-py imports
    // it whether or not the plugin opens a socket. It is linked so such a
    // plugin loads, but no call can use it: the `WasiCtx` of every store is
    // built without `allow_tcp`, `allow_udp`, `allow_ip_name_lookup` or a
    // socket address check, so creating a socket, resolving a name and every
    // address are refused (`access-denied`); `tests/sandbox.rs` proves each
    // refusal. A plugin reaches outside only through `host.exec` and
    // `host.fetch`, which check its grants.
    wasmtime_wasi::p2::add_to_linker_async(linker)
}
