//! Real Redis servers for integration tests, in the spirit of redis-rs's
//! `redis-test` crate: a single server, a sentinel setup (master, replica,
//! three sentinels) and a three-node cluster.
//!
//! Every server is a real `redis-server` child process listening on
//! 127.0.0.1 at a free port, in its own temporary directory, with
//! persistence off. Nothing here touches the system Redis on port 6379.
//! Servers are killed (SIGKILL) and reaped when their handle is dropped; they
//! also get SIGKILL if the test process dies without unwinding (parent-death
//! signal), so an aborted run leaves no strays behind.
//!
//! All functions block (they poll with short sleeps). From an async test,
//! start the servers before doing anything else on the runtime, or inside
//! `tokio::task::spawn_blocking`.
//!
//! If `redis-server` is not installed the helpers panic: tests are never
//! skipped silently.
//!
//! One concern per file: [`RedisServer`] (`server`), [`Sentinel`]
//! (`sentinel`) and [`Cluster`] (`cluster`) on top of the binaries on
//! PATH (`bins`), free ports (`ports`), spawning (`spawn`), the starters'
//! own Redis queries (`client`) and polling until ready (`poll`).

mod bins;
mod client;
mod cluster;
mod poll;
mod ports;
mod sentinel;
mod server;
mod spawn;

pub use self::bins::{redis_cli_bin, redis_sentinel_cmd, redis_server_bin};
pub use self::cluster::Cluster;
pub use self::ports::free_port;
pub use self::sentinel::Sentinel;
pub use self::server::RedisServer;
