//! What the `maid` binary shares with the other binaries of the workspace
//! (the benchmark): [`setup`] turns command-line options and the config
//! file into a ready configuration and plugin runtime. The commands
//! themselves are the binary's (`src/cmd/`, one file per command).

pub mod setup;
