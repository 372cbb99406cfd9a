//! The result of an evaluation: per-vertex and global [`EvaluatedScalingMetric`]s.

use crate::{EvaluatedScalingMetric, EvaluatedVertexMetrics, ScalingMetric, VertexMap};
use serde::{Deserialize, Serialize};

/// Evaluated metrics of a job: what the reference's `EvaluatedMetrics` holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EvaluatedMetrics {
    /// Per-vertex evaluated metrics.
    pub vertices: VertexMap<EvaluatedVertexMetrics>,
    /// Job-wide evaluated metrics (GC pressure, heap usage, task slots).
    pub global: EvaluatedVertexMetrics,
}

impl EvaluatedMetrics {
    /// The evaluated `metric` of vertex `id`, if present.
    pub fn vertex_metric(&self, id: &str, metric: ScalingMetric) -> Option<EvaluatedScalingMetric> {
        self.vertices.get(id).and_then(|m| m.get(metric))
    }
}
