//! # flink-autoscaler-cli
//!
//! The `flink-autoscaler` binary as a library: the command line ([`cli`]), one module per command
//! ([`commands`]: `run`, `replay`, `explain`, `bottleneck`), and the standalone service `run` wires
//! up: its configuration, logs ([`logging`]), Prometheus metrics, health and status endpoints ([`service`],
//! [`status`]) and the recording hooks of `run --record` ([`recording`]). Library users of the
//! autoscaler depend on the member crates (`autoscaler-core`, `autoscaler-state`, ...) and never
//! compile this crate, axum or clap.

pub mod cli;
pub mod commands;
mod io;
pub mod logging;
pub mod recording;
pub mod service;
pub mod status;
