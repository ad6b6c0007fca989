//! Host bindings generated from `wit/plugin.wit` (the one source of truth
//! the SDK also generates from). Nobody edits generated code; change the
//! WIT instead.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "plugin",
    imports: { default: async },
    exports: { default: async },
    with: {
        "maid:plugin/host.source": crate::runtime::host::SourceHandle,
    },
});
