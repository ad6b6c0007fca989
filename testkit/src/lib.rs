//! What maid's integration tests and its benchmark stand up, shared so
//! both start servers and processes the same way:
//!
//! * [`redis`]: real `redis-server`s (single, Sentinel, Cluster) on free
//!   loopback ports, in temporary directories, never the system's;
//! * [`Proc`]: a child process with its output in a log file, killed with
//!   its process group when dropped;
//! * [`wire`]: the master's side of the wire, bare: publish, collect the
//!   replies, read the job cache.

pub mod proc;
pub mod redis;
pub mod wire;

pub use proc::Proc;
