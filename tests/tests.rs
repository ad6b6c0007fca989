//! The integration tests, one binary: each module is one area (its file
//! says what it proves), and all share `common`, the test kit. One binary
//! links wasmtime once where twelve linked it twelve times. The bench's
//! own tests live with it (`bench/tests/bench.rs`).

mod common;

mod api;
mod api_pillar;
mod attacks;
mod attacks_api;
mod attacks_audit;
mod attacks_exec;
mod attacks_fleet;
mod attacks_modules;
mod attacks_pillar;
mod attacks_states;
mod attacks_targeting;
mod audit_chain;
mod audit_fleet;
mod authors;
mod browser;
mod cli;
mod console;
mod deployments;
mod file_audit;
mod fleet;
mod grains;
mod harness;
mod identity;
mod layout;
mod modules;
mod package;
mod pepper;
mod pillar;
mod pillar_delivery;
mod pillar_functions;
mod pillar_trees;
mod pkg_states;
mod reliability;
mod runtime;
mod salt;
mod salt_cli;
mod salt_down;
mod salt_pillar;
mod sandbox;
mod service_states;
mod state_envs;
mod states;
mod sync;
mod syndic;
mod trust;
mod user_states;
