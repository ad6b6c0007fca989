//! What travels between maids and masters besides the messages themselves:
//! the Redis deployments a fleet runs on, and what is kept in them.
//!
//! * [`Bus`] and [`Conn`] ([`connection`]): one server, Sentinel or
//!   Cluster, over TLS and ACL users; commands, pub/sub and reply topics.
//! * [`filestore`]: `salt://` files, content-addressed and signed.
//! * [`plugin_store`]: plugins pushed to the fleet, signed by a master key.
//! * [`fsutil`]: staged writes of private files, whole or not at all — how
//!   what is fetched from Redis reaches a disk.
//!
//! No WebAssembly runtime and no HTTP: the agent and the master build on it.

pub mod connection;
pub mod filestore;
pub mod fsutil;
pub mod plugin_store;

pub use connection::*;
