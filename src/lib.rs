//! # flink-autoscaler
//!
//! Facade of flink-autoscaler-rs: re-exports the member crates and implements the `replay` tool.

pub use autoscaler_core as core;
pub use autoscaler_metrics as metrics;
pub use autoscaler_realizer as realizer;
pub use autoscaler_sim as sim;
pub use autoscaler_state as state;

pub mod explain;
pub mod fuzzing;
pub mod recording;
pub mod replay;
pub mod service;
pub mod status;

/// The plugins a job's configuration can select (by the `.class` value) in `run` and in
/// `replay --recording`: [`BusinessHoursExecutor`](autoscaler_core::plugins::BusinessHoursExecutor)
/// as `business-hours`. No cluster-resource check is set (the reference's default allows
/// everything).
pub fn stock_plugins() -> autoscaler_core::plugins::PluginRegistry {
    use autoscaler_core::plugins::{BUSINESS_HOURS_EXECUTOR, BusinessHoursExecutor, PluginRegistry};
    PluginRegistry::new().with_executor(BUSINESS_HOURS_EXECUTOR, BusinessHoursExecutor)
}

/// The README's Rust examples, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
