//! maid's wire contract and the rules every side of it shares.
//!
//! Pure code — no Redis, no WebAssembly runtime, no HTTP — so the agent,
//! the master side and the fuzz targets build on the same types:
//!
//! * [`protocol`]: jobs and replies as `docs/protocol.md` (the shared
//!   `PROTOCOL.md`, v1.2) defines them.
//! * [`trust`]: Ed25519 keys and the signed envelope of jobs and pushes.
//! * [`replies`]: replies as a master receives them, signed by the maid's
//!   own key or not, and checked against the keys it accepted.
//! * [`registry`]: registrations and syndic lists, signed with the maid's
//!   own key, as a master that keeps keys believes them.
//! * [`jid`]: Salt-style job ids and timestamps.
//! * [`pillar`]: pillar sealed to one maid's key, in a record a master
//!   signs (PROTOCOL §8).

pub mod auditchain;
pub mod jid;
pub mod pillar;
pub mod protocol;
pub mod registry;
pub mod replies;
pub mod trust;
