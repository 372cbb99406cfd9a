//! # autoscaler-replay
//!
//! The replay tooling of flink-autoscaler-rs, as a library: `flink-autoscaler replay` runs one
//! autoscaler cycle on a recorded scenario and reports what the autoscaler would evaluate and
//! decide. The contract is `replay-format.md`
//! (`flink-autoscaler-scenario/1` in, `flink-autoscaler-result/1` out). [`recording`] is the
//! format `run --record` writes (reader and writer), [`recording_replay`] replays many cycles of a
//! recording, optionally with a changed configuration, and [`explain`] puts a decision record into
//! words. With the `fuzzing` feature, [`fuzzing`] holds the entry points of the fuzz targets.
//!
//! [`replay_str`] and [`replay`] return the result as a `serde_json::Value`; [`replay_result`]
//! returns it as a [`ReplayResult`] that [`ReplayResult::write_json`] streams to a writer, section
//! by section, as the binary does (a `Value` tree takes many times the memory of its text).
//!
//! ```
//! let scenario = r#"{
//!   "format": "flink-autoscaler-scenario/1",
//!   "now": "2024-05-01T10:15:00Z",
//!   "topology": {"vertices": [{"id": "src", "parallelism": 2, "max_parallelism": 128}]},
//!   "evaluated": {"vertices": {"src": {"TRUE_PROCESSING_RATE": {"average": 100}}}}
//! }"#;
//! let result = autoscaler_replay::replay_str(scenario).expect("valid scenario");
//! assert_eq!(result["format"], "flink-autoscaler-result/1");
//! ```

mod error;
pub mod explain;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
mod output;
mod pipeline;
pub mod recording;
pub mod recording_replay;
mod scenario;

pub use error::{Error, Result};
pub use output::{RESULT_FORMAT, explanation_json};
pub use pipeline::{ReplayResult, replay, replay_result};
pub(crate) use scenario::parse_topology;
pub use scenario::{JobInfo, SCENARIO_FORMAT, Scenario, ScenarioError, ScenarioInput, parse_scenario};

/// Parses `text` as a scenario and replays it, returning the result document.
pub fn replay_str(text: &str) -> Result<serde_json::Value, ScenarioError> {
    let scenario = parse_scenario(text)?;
    let result = replay_result(scenario)?;
    // Infallible: every map key is a string.
    serde_json::to_value(&result).map_err(|e| ScenarioError::new("result", e.to_string()))
}

/// The plugins a job's configuration can select (by the `.class` value) in `run` and in
/// `replay --recording`: [`BusinessHoursExecutor`](autoscaler_core::plugins::BusinessHoursExecutor)
/// as `business-hours`. No cluster-resource check is set (the reference's default allows
/// everything).
pub fn stock_plugins() -> autoscaler_core::plugins::PluginRegistry {
    use autoscaler_core::plugins::{BUSINESS_HOURS_EXECUTOR, BusinessHoursExecutor, PluginRegistry};
    PluginRegistry::new().with_executor(BUSINESS_HOURS_EXECUTOR, BusinessHoursExecutor)
}
