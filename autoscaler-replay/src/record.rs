//! The replay result's `record`: the decision record ([`DecisionRecord`]) of the replayed cycle.
//! An addition beside the result's other fields, which stay exactly as the format says; `null`
//! when the cycle did not reach the decision.

use autoscaler_core::config::AutoScalerOptions;
use autoscaler_core::record::{DecisionRecord, RecordInput};
use autoscaler_core::scaling::Decision;
use autoscaler_metrics::{EvaluatedMetrics, JobTopology, MetricHistory, true_processing_rate_estimates};
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use std::time::Duration;

/// The record of a decided cycle; `window` is the evaluation window (`None` in `evaluated` mode:
/// no estimates, no root cause).
pub(super) fn decision_record(
    at: DateTime<Utc>,
    topology: &JobTopology,
    evaluated: &EvaluatedMetrics,
    decision: &Decision,
    options: &AutoScalerOptions,
    restart_time: Duration,
    window: Option<&MetricHistory>,
) -> DecisionRecord {
    let tpr = window.map_or_else(BTreeMap::new, |w| {
        true_processing_rate_estimates(topology, w, &options.evaluation_config(restart_time))
    });
    let mut record = DecisionRecord::decided(&RecordInput {
        at,
        job: None,
        topology,
        evaluated,
        decision,
        options,
        restart_time,
        tpr: &tpr,
    });
    if let Some(window) = window {
        record.explain_window(topology, window);
    }
    record
}
