//! The scaling executor chain (FLIP-575, reference `ScalingExecutorPlugin` and
//! `ScalingExecutor.applyCustomExecutors`).

use super::{PluginConfig, PluginError, Resolved};
use crate::config::AutoScalerOptions;
use crate::model::state::{ConfigChanges, ScalingSummary};
use autoscaler_metrics::{EvaluatedMetrics, JobTopology, VertexMap};
use chrono::{DateTime, Utc};

/// The proposed changes of one scaling, per vertex.
pub type ScalingSummaries = VertexMap<ScalingSummary>;

/// Reason of the event emitted when an executor vetoes a scaling.
pub const SCALING_VETOED_REASON: &str = "ScalingVetoed";

/// Everything a scaling executor sees besides the summaries.
#[derive(Debug, Clone, Copy)]
pub struct ExecutorContext<'a> {
    /// The instance's parameters and the configuration it sees: while `memory.tuning.enabled`, the
    /// job configuration with [`config_changes`](Self::config_changes) applied (the reference's
    /// tuned configuration), else the job configuration as it is.
    pub config: &'a PluginConfig,
    /// Memory tuning's changes for this scaling, which are stored with it and realized: empty unless
    /// `memory.tuning.enabled` and tuning recommended something.
    pub config_changes: &'a ConfigChanges,
    /// The cycle's instant.
    pub now: DateTime<Utc>,
    /// The job graph.
    pub topology: &'a JobTopology,
    /// This cycle's evaluated metrics.
    pub evaluated: &'a EvaluatedMetrics,
    /// The job's options.
    pub options: &'a AutoScalerOptions,
}

/// Intercepts, adjusts or rejects a scaling before it is applied (reference
/// `ScalingExecutorPlugin`).
///
/// The chain runs once the scaling is not blocked (`scaling.enabled`, excluded periods, memory
/// pressure, the cluster-resource check and the resource quota all passed) and before the scaling
/// report is emitted and anything is recorded. Executors run in ascending [`priority`]; each
/// receives the previous one's output. Returning an empty map vetoes the scaling: a Warning
/// `ScalingVetoed` event names the instance, nothing is recorded and the current parallelism stays.
/// The report, the scaling history and the parallelism overrides use the chain's final output.
///
/// An `Err` fails the cycle (an `AutoscalerError` event; nothing recorded). A returned summary for
/// a vertex that is not in the topology, or with a new parallelism of 0, is rejected the same way.
///
/// [`priority`]: ScalingExecutorPlugin::priority
pub trait ScalingExecutorPlugin: Send + Sync {
    /// Lower runs first; the default is 0. Equal priorities run in the configured order.
    fn priority(&self) -> i32 {
        0
    }

    /// The summaries to apply (possibly changed), or an empty map to veto.
    ///
    /// # Errors
    /// When the plugin cannot decide; the cycle then fails.
    fn apply(&self, ctx: &ExecutorContext<'_>, summaries: ScalingSummaries) -> Result<ScalingSummaries, PluginError>;
}

/// What the chain decided.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ChainOutcome {
    /// Apply these summaries.
    Approved(ScalingSummaries),
    /// The instance vetoed.
    Vetoed {
        /// The configured instance name.
        instance: String,
        /// Its registered class.
        class: String,
    },
}

/// What the chain runs on besides the summaries.
pub(crate) struct ChainInput<'a> {
    pub(crate) now: DateTime<Utc>,
    pub(crate) topology: &'a JobTopology,
    pub(crate) evaluated: &'a EvaluatedMetrics,
    pub(crate) options: &'a AutoScalerOptions,
    /// Memory tuning's changes for the scaling.
    pub(crate) config_changes: &'a ConfigChanges,
}

/// Runs `executors` (already sorted) over `summaries`.
pub(crate) fn apply_executor_chain(
    executors: &[Resolved<dyn ScalingExecutorPlugin>],
    input: &ChainInput<'_>,
    mut summaries: ScalingSummaries,
) -> Result<ChainOutcome, PluginError> {
    let ChainInput {
        now,
        topology,
        evaluated,
        options,
        config_changes,
    } = *input;
    for executor in executors {
        let name = describe(&executor.config);
        // The reference hands the executors the tuned configuration while tuning is enabled.
        let tuned;
        let config = if options.memory_tuning_enabled && !config_changes.is_empty() {
            tuned = executor.config.with_config_changes(config_changes);
            &tuned
        } else {
            &executor.config
        };
        let ctx = ExecutorContext {
            config,
            config_changes,
            now,
            topology,
            evaluated,
            options,
        };
        let previous = summaries.clone();
        summaries = executor
            .plugin
            .apply(&ctx, summaries)
            .map_err(|e| e.within(name.clone()))?;
        if summaries.is_empty() {
            tracing::info!("Scaling vetoed by {name}.");
            return Ok(ChainOutcome::Vetoed {
                instance: executor.config.instance().to_owned(),
                class: executor.config.class().to_owned(),
            });
        }
        for (vertex, summary) in &summaries {
            let reason = if topology.get(vertex.as_str()).is_none() {
                Some("the vertex is not in the job graph")
            } else if summary.new_parallelism == 0 {
                Some("the new parallelism is 0")
            } else {
                None
            };
            if let Some(reason) = reason {
                return Err(PluginError::InvalidSummary {
                    plugin: name,
                    vertex: vertex.to_string(),
                    reason,
                });
            }
        }
        if summaries != previous {
            tracing::info!(
                "Scaling summaries modified by {name}: {:?} -> {:?}",
                parallelisms(&previous),
                parallelisms(&summaries)
            );
        }
    }
    Ok(ChainOutcome::Approved(summaries))
}

fn describe(config: &PluginConfig) -> String {
    format!(
        "scaling custom executor instance '{}' (class={})",
        config.instance(),
        config.class()
    )
}

fn parallelisms(summaries: &ScalingSummaries) -> Vec<(&str, u32, u32)> {
    summaries
        .iter()
        .map(|(v, s)| (v.as_str(), s.current_parallelism, s.new_parallelism))
        .collect()
}
