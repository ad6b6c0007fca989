//! maid's master side, and the Redis and configuration layer the agent
//! builds on. No WebAssembly runtime: nothing here runs a plugin.
//!
//! * [`bus`]: connections to Redis (standalone, Sentinel, Cluster; TLS).
//! * [`config`]: the operator's TOML file, which agent and master share.
//! * [`jobs`]: publish a job and collect what comes back (`maid run`).
//! * [`batch`]: Salt's rolling batch (`-b`, `local_batch`).
//! * [`jobcache`]: what each job was (its load), for `jobs.list_jobs`.
//! * [`api`]: `maid api`, salt-api's REST interface.
//! * [`filestore`] and [`plugin_store`]: the layout in Redis of pushed
//!   `salt://` files and plugins, pushing, and verifying what was pushed.
//! * [`pki`]: the maid keys the master accepted, rejected or denied, kept
//!   as Salt's master keeps minion keys (`maid key`).
//! * [`cli`]: the master commands of the `maid` binary.

pub mod api;
pub mod batch;
pub mod bus;
pub mod cli;
pub mod config;
pub mod filestore;
pub mod fsutil;
pub mod jobcache;
pub mod jobs;
pub mod pki;
pub mod plugin_store;
pub mod registry;

// The wire contract, under the names the modules here use for it.
/// Registry values as a maid writes them (PROTOCOL v1.2 §4, §7).
use maid_protocol::registry as wire_registry;
use maid_protocol::{jid, protocol, replies, trust};
use maid_salt::target;
