//! The commands of `maid-bench`, one module each, over the pieces they
//! share.
//!
//! The commands:
//!
//! * [`run`]: `maid-bench run`, the benchmark (its scenarios in
//!   [`scenarios`], the processes it starts in [`responders`], what it
//!   measures in [`measure`], [`results`] and [`goals`], its tables in
//!   [`report`], the plugin runtime in this process in [`in_process`]);
//! * [`soak`]: `maid-bench soak`, Redis restarted under many agents;
//! * [`syndic`]: `maid-bench syndic`, a flat fleet against tiered ones;
//! * [`states`]: `maid-bench states`, a highstate through maid and Salt;
//! * [`raw`] and [`fleet`]: the hidden `maid-bench raw` and `maid-bench
//!   fleet`, the processes the others start.
//!
//! What they share: the master's side of the protocol ([`master`]), the
//! reading of `/proc` ([`procfs`]), the tables ([`table`]) and a scratch
//! directory ([`scratch`]).

mod fleet;
mod goals;
mod in_process;
mod master;
mod measure;
mod procfs;
mod raw;
mod report;
mod responders;
mod results;
mod run;
mod scenarios;
mod scratch;
mod soak;
mod states;
mod syndic;
mod table;

pub use fleet::{FleetArgs, fleet};
pub use raw::{RawArgs, raw};
pub use run::{BenchArgs, bench};
pub use soak::{SoakArgs, soak};
pub use states::{StatesArgs, states};
pub use syndic::{SyndicArgs, syndic};

/// A progress line on stderr, between the steps of a run.
fn stage(what: &str) {
    eprintln!("==> {what}");
}
