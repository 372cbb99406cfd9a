//! # flink-autoscaler
//!
//! Facade of flink-autoscaler-rs: re-exports the member crates and implements the `replay` tool.

pub use autoscaler_core as core;
pub use autoscaler_metrics as metrics;
pub use autoscaler_realizer as realizer;
pub use autoscaler_state as state;

pub mod explain;
pub mod fuzzing;
pub mod recording;
pub mod replay;
pub mod service;
pub mod sim;
pub mod status;

/// The README's Rust examples, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
