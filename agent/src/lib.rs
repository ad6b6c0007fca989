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
pub mod jid;
pub mod jidstore;
pub mod master;
pub mod metrics;
pub mod outbox;
pub mod plugin_store;
pub mod protocol;
pub mod runtime;
pub mod salt;
pub mod sync;
pub mod target;
pub mod trust;
