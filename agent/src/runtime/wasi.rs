//! The WASI a plugin is linked with: the interfaces of wasi:cli 0.2 a
//! guest's standard library imports, each checked by the store's context
//! (no sockets, no environment, preopens only as granted).

use super::*;

pub(super) fn link_wasi(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    // Everything of wasi:cli 0.2 that a guest's standard library imports.
    // That includes wasi:sockets: CPython built by componentize-py imports
    // it whether or not the plugin opens a socket. It is linked so such a
    // plugin loads, but no call can use it: the `WasiCtx` of every store is
    // built without `allow_tcp`, `allow_udp`, `allow_ip_name_lookup` or a
    // socket address check, so creating a socket, resolving a name and every
    // address are refused (`access-denied`). A plugin reaches outside only
    // through `host.exec` and `host.fetch`, which check its grants.
    use wasmtime_wasi::cli::{WasiCli, WasiCliView};
    use wasmtime_wasi::clocks::{WasiClocks, WasiClocksView};
    use wasmtime_wasi::filesystem::{WasiFilesystem, WasiFilesystemView};
    use wasmtime_wasi::p2::bindings::{cli, clocks, filesystem, random, sockets};
    use wasmtime_wasi::sockets::{WasiSockets, WasiSocketsView};
    use wasmtime_wasi::{WasiView, random::WasiRandom};
    type Io = HasSelf<ResourceTable>;
    let l = linker;
    wasmtime_wasi_io::bindings::wasi::io::error::add_to_linker::<HostState, Io>(l, |t| {
        &mut t.table
    })?;
    wasmtime_wasi_io::bindings::wasi::io::poll::add_to_linker::<HostState, Io>(l, |t| {
        &mut t.table
    })?;
    wasmtime_wasi_io::bindings::wasi::io::streams::add_to_linker::<HostState, Io>(l, |t| {
        &mut t.table
    })?;
    clocks::wall_clock::add_to_linker::<HostState, WasiClocks>(l, |t| t.clocks())?;
    clocks::monotonic_clock::add_to_linker::<HostState, WasiClocks>(l, |t| t.clocks())?;
    filesystem::types::add_to_linker::<HostState, WasiFilesystem>(l, |t| t.filesystem())?;
    filesystem::preopens::add_to_linker::<HostState, WasiFilesystem>(l, |t| t.filesystem())?;
    random::random::add_to_linker::<HostState, WasiRandom>(l, |t| t.ctx().ctx.random())?;
    random::insecure::add_to_linker::<HostState, WasiRandom>(l, |t| t.ctx().ctx.random())?;
    random::insecure_seed::add_to_linker::<HostState, WasiRandom>(l, |t| t.ctx().ctx.random())?;
    cli::exit::add_to_linker::<HostState, WasiCli>(l, |t| t.cli())?;
    cli::environment::add_to_linker::<HostState, WasiCli>(l, |t| t.cli())?;
    cli::stdin::add_to_linker::<HostState, WasiCli>(l, |t| t.cli())?;
    cli::stdout::add_to_linker::<HostState, WasiCli>(l, |t| t.cli())?;
    cli::stderr::add_to_linker::<HostState, WasiCli>(l, |t| t.cli())?;
    cli::terminal_input::add_to_linker::<HostState, WasiCli>(l, |t| t.cli())?;
    cli::terminal_output::add_to_linker::<HostState, WasiCli>(l, |t| t.cli())?;
    cli::terminal_stdin::add_to_linker::<HostState, WasiCli>(l, |t| t.cli())?;
    cli::terminal_stdout::add_to_linker::<HostState, WasiCli>(l, |t| t.cli())?;
    cli::terminal_stderr::add_to_linker::<HostState, WasiCli>(l, |t| t.cli())?;
    let network = sockets::network::LinkOptions::default();
    sockets::network::add_to_linker::<HostState, WasiSockets>(l, &network, |t| t.sockets())?;
    sockets::instance_network::add_to_linker::<HostState, WasiSockets>(l, |t| t.sockets())?;
    sockets::tcp::add_to_linker::<HostState, WasiSockets>(l, |t| t.sockets())?;
    sockets::tcp_create_socket::add_to_linker::<HostState, WasiSockets>(l, |t| t.sockets())?;
    sockets::udp::add_to_linker::<HostState, WasiSockets>(l, |t| t.sockets())?;
    sockets::udp_create_socket::add_to_linker::<HostState, WasiSockets>(l, |t| t.sockets())?;
    sockets::ip_name_lookup::add_to_linker::<HostState, WasiSockets>(l, |t| t.sockets())?;
    Ok(())
}
