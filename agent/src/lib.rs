//! maid: a sandboxed WebAssembly agent for SaltStack-style fleets.
//!
//! The library holds everything; the `maid` binary is a thin CLI over it.
//!
//! * [`runtime`] loads plugins (one Salt module per WebAssembly component)
//!   and runs each call in a fresh, capability-restricted instance.
//! * [`config`] is the operator's TOML: grants and limits per plugin.
//! * [`salt`] holds what makes maid behave like Salt at its edges: argument
//!   parsing and the outputters.
//! * [`fileserver`] and [`grains`] are what plugins can ask the host for.
//! * [`plugin_store`] and [`sync`] carry plugins pushed by a master to the
//!   agents that accept them (`saltutil.sync_modules`).

pub mod agent;
pub mod api;
pub mod audit;
pub mod bus;
pub mod config;
pub mod fileserver;
pub mod filestore;
pub mod fsutil;
pub mod grains;
pub mod jidstore;
pub mod master;
pub mod metrics;
pub mod outbox;
pub mod plugin_store;
pub mod runtime;
pub mod sync;

// The wire contract lives in its own pure crate; its modules keep their
// paths here, so `maid::protocol` and `crate::protocol` name the same code.
pub use maid_protocol::{jid, protocol, salt, target, trust};
