//! maid's master side: publishing jobs and collecting what comes back, the
//! keys it accepts, the job cache, and salt-api's REST interface. No
//! WebAssembly runtime: nothing here runs a plugin.
//!
//! * [`jobs`]: publish a job and collect what comes back (`maid run`),
//!   deciding with [`collect`], the reply collection without I/O.
//! * [`batch`]: Salt's rolling batch (`-b`, `local_batch`).
//! * [`jobcache`]: what each job was (its load), for `jobs.list_jobs`.
//! * [`registry`]: the maids that registered, as far as accepted keys
//!   vouch for them.
//! * [`runners`]: the runners the master runs itself (`jobs.*`,
//!   `manage.*`); [`wheel`]: its `key.*` wheel functions; [`binding`]:
//!   how both are called, as Salt binds their arguments.
//! * [`api`]: `maid api`, salt-api's REST interface.
//! * [`pillar`]: each minion's pillar, compiled from `pillar_roots`.
//! * [`pki`]: the maid keys the master accepted, rejected or denied, kept
//!   as Salt's master keeps minion keys (`maid key`).
//!
//! Redis and its stores are `maid-bus`'s, the configuration file
//! `maid-config`'s, the wire `maid-protocol`'s and Salt's language
//! `maid-salt`'s; the modules here name them as below.

pub mod api;
pub mod audit;
pub mod batch;
pub mod binding;
pub mod collect;
pub mod jobcache;
pub mod jobs;
pub mod pillar;
pub mod pki;
pub mod registry;
pub mod runners;
pub mod wheel;

use maid_bus::{self as bus, fsutil};
use maid_config as config;
/// Registry values as a maid writes them (PROTOCOL v1.2 §4, §7).
use maid_protocol::registry as wire_registry;
use maid_protocol::{jid, protocol, replies, trust};
use maid_salt::target;
