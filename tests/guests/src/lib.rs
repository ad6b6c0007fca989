//! Paths of the guest `.wasm` files the build script produced: the shipped
//! plugins (`PLUGINS_DIR`, `PLUGIN_TEST`, ...) and the test fixtures
//! (`FIXTURE_HOSTILE`, ...).

include!(concat!(env!("OUT_DIR"), "/guests.rs"));
