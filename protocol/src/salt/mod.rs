//! What makes maid behave like Salt at its edges: how arguments are read
//! and how returns are printed.

pub mod args;
pub mod files;
pub mod output;
pub mod pyre;
pub mod python;
pub mod yaml11;
