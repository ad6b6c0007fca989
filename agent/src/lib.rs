//! maid: a sandboxed WebAssembly agent for SaltStack-style fleets.
//!
//! The agent's library: everything a maid does, from a configuration to
//! replies on Redis. The `maid` binary (`cli/`) builds one with
//! [`agent::run`]; nothing here knows the command line or the master.
//!
//! * [`agent`] takes jobs from the masters' topics: [`agent::run`] builds
//!   and runs one from its configuration.
//! * [`runtime`] loads plugins (one Salt module per WebAssembly component)
//!   and runs each call in a fresh, capability-restricted instance.
//! * [`fileserver`], [`filestore`] and [`grains`] are what plugins can ask
//!   the host for.
//! * [`sync`] installs plugins pushed by a master, where the agent accepts
//!   them (`saltutil.sync_modules`).
//! * [`audit`], [`jidstore`], [`outbox`] and [`metrics`]: what the agent
//!   records, remembers, holds back while Redis is away, and counts.

pub mod agent;
pub mod audit;
pub mod fileserver;
pub mod filestore;
pub mod grains;
pub mod identity;
pub mod jidstore;
pub mod metrics;
pub mod outbox;
pub mod runtime;
pub mod sync;

// The wire contract lives in its own pure crate; its modules keep their
// paths here, so `maid_agent::protocol` and `crate::protocol` name the same code.
pub use maid_protocol::{jid, protocol, registry, replies, trust};
pub use maid_salt::{self as salt, target};

// Redis and its stores, and the configuration file, under the names the
// modules here use for them.
use maid_bus::{self as bus, fsutil, plugin_store};
use maid_config as config;
