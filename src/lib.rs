//! # flink-autoscaler
//!
//! The facade of flink-autoscaler-rs: it only re-exports the member crates, so one dependency
//! brings the autoscaler, with the heavy parts behind cargo features (as `kube` does):
//!
//! | module | crate | feature |
//! |---|---|---|
//! | [`metrics`] | `autoscaler-metrics`: the pure evaluation engine | always |
//! | [`core`] | `autoscaler-core`: traits, options, the cycle, decisions, the standalone loop | always |
//! | `state` | `autoscaler-state`: in-memory, SQLite, PostgreSQL and MySQL state stores | `state` (default) |
//! | `realizer` | `autoscaler-realizer`: the Flink REST client, collector, realizer, fetchers | `realizer` (default) |
//! | `replay` | `autoscaler-replay`: scenario and recording replay, explanations | `replay` |
//!
//! The `flink-autoscaler` binary is the crate `flink-autoscaler-cli`; the simulated Flink job of
//! the examples and tests is `autoscaler-sim`, which is not published.

pub use autoscaler_core as core;
pub use autoscaler_metrics as metrics;
#[cfg(feature = "realizer")]
pub use autoscaler_realizer as realizer;
#[cfg(feature = "replay")]
pub use autoscaler_replay as replay;
#[cfg(feature = "state")]
pub use autoscaler_state as state;

/// The README's Rust examples, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
