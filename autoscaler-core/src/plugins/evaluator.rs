//! The custom evaluator (FLIP-514, reference `ScalingMetricsEvaluatorPlugin` and its use in
//! `ScalingMetricEvaluator`).

use super::{PluginConfig, PluginError, ResolvedPlugins};
use autoscaler_metrics::{
    CustomVertexEvaluation, EvaluatedVertexMetrics, Evaluation, EvaluationConfig, JobTopology, MetricHistory,
    MetricsError, VertexId, evaluate_with_estimates,
};
use std::collections::BTreeMap;
use std::time::Duration;

/// Everything a custom evaluator sees besides the vertex and its built-in metrics.
#[derive(Debug, Clone, Copy)]
pub struct EvaluatorContext<'a> {
    /// The instance's parameters and the configuration it sees.
    pub config: &'a PluginConfig,
    /// The job graph.
    pub topology: &'a JobTopology,
    /// The metric window being evaluated.
    pub history: &'a MetricHistory,
    /// The cycle's restart time.
    pub restart_time: Duration,
    /// The vertices evaluated before this one, in topological order, with custom metrics merged
    /// (the reference's in-progress `evaluatedVertexMetrics`).
    pub evaluated_vertices: &'a BTreeMap<VertexId, EvaluatedVertexMetrics>,
    /// Whether the job is processing backlog (a source's lag exceeds
    /// `backlog-processing.lag-threshold`; nothing scales down then).
    pub processing_backlog: bool,
}

/// Custom evaluation logic on top of the built-in evaluation (reference
/// `ScalingMetricsEvaluatorPlugin.evaluateVertexMetrics`).
///
/// Called once per vertex per evaluation, in topological order, after the vertex's built-in metrics
/// (thresholds included) are computed. The returned metrics are merged over the built-in ones
/// ([`merge_custom_metrics`](autoscaler_metrics::merge_custom_metrics): a NaN `current` or `average`
/// keeps the built-in value) before any downstream vertex reads them. Thresholds are not recomputed
/// after the merge. Only the first instance of `job.autoscaler.metrics.custom-evaluators` is used.
///
/// An `Err` is logged as a warning and that vertex keeps its built-in metrics (the reference catches
/// the plugin's exception the same way).
pub trait ScalingMetricsEvaluatorPlugin: Send + Sync {
    /// The metrics to merge over `evaluated` for `vertex` (an empty map changes nothing).
    ///
    /// # Errors
    /// Whatever the plugin cannot compute; it is logged and ignored.
    fn evaluate_vertex_metrics(
        &self,
        vertex: &VertexId,
        evaluated: &EvaluatedVertexMetrics,
        ctx: &EvaluatorContext<'_>,
    ) -> Result<EvaluatedVertexMetrics, PluginError>;
}

/// Evaluates the window with the custom evaluator `plugins` selects, or the built-in evaluation
/// alone when there is none, with the built-in true-processing-rate estimates that explain a
/// decision ([`evaluate_with_estimates`]: the window is read once for both).
///
/// # Errors
/// As [`evaluate_with_estimates`].
pub fn evaluate_with_plugins(
    topology: &JobTopology,
    history: &MetricHistory,
    config: &EvaluationConfig,
    plugins: &ResolvedPlugins,
) -> Result<Evaluation, MetricsError> {
    let Some(evaluator) = plugins.evaluator() else {
        return evaluate_with_estimates(topology, history, config, None);
    };
    let mut custom = |e: &CustomVertexEvaluation<'_>| {
        let ctx = EvaluatorContext {
            config: &evaluator.config,
            topology,
            history,
            restart_time: config.restart_time,
            evaluated_vertices: e.evaluated_vertices,
            processing_backlog: e.processing_backlog,
        };
        match evaluator.plugin.evaluate_vertex_metrics(e.vertex, e.metrics, &ctx) {
            Ok(metrics) => {
                if !metrics.is_empty() {
                    tracing::info!("Merging custom evaluated metrics for vertex {}: {metrics:?}", e.vertex);
                }
                metrics
            }
            Err(error) => {
                tracing::warn!(
                    %error,
                    "Custom metric evaluator instance '{}' (class={}) failed for vertex {}; its metrics are ignored.",
                    evaluator.config.instance(),
                    evaluator.config.class(),
                    e.vertex
                );
                EvaluatedVertexMetrics::new()
            }
        }
    };
    evaluate_with_estimates(topology, history, config, Some(&mut custom))
}
