//! How the decision stage consults the plugins: through [`DecisionHooks`], so that a decision
//! without plugins ([`NoPlugins`]) cannot fail by construction.

use super::{
    ChainInput, ChainOutcome, PluginError, ResolvedPlugins, ScalingSummaries, align_with_plugin, apply_executor_chain,
    scaling_would_exceed_cluster_resources,
};
use crate::model::state::ConfigChanges;
use crate::scaling::{AlignmentContext, DecisionError, DecisionInput};
use autoscaler_metrics::{EvaluatedVertexMetrics, VertexId, VertexInfo};
#[cfg(test)]
use std::convert::Infallible;

/// The plugin calls of one decision.
pub(crate) trait DecisionHooks {
    /// What a plugin call can fail with.
    type Error;

    /// How this decision fails where the reference 1.16 aborts (compat mode only); `None` when it
    /// cannot fail, and then the vertex scaler answers as without the compat switch.
    fn abort(&self, error: DecisionError) -> Option<Self::Error>;

    /// A custom alignment mode's parallelism for the vertex; `None` = use the built-in mode.
    fn align(
        &self,
        vertex: &VertexId,
        alignment: AlignmentContext,
        info: Option<&VertexInfo>,
        metrics: &EvaluatedVertexMetrics,
    ) -> Option<Result<i64, Self::Error>>;

    /// Whether the cluster-resource check refuses the scaling.
    fn exceeds_cluster_resources(
        &self,
        input: &DecisionInput<'_>,
        summaries: &ScalingSummaries,
        task_manager_memory: Option<u64>,
    ) -> Result<bool, Self::Error>;

    /// Whether any scaling executor is configured: without one the chain approves the summaries
    /// as they are, so the decision need not hand it a copy.
    fn has_executors(&self) -> bool;

    /// The scaling executor chain's verdict on `summaries`, with memory tuning's `config_changes`.
    fn run_executor_chain(
        &self,
        input: &DecisionInput<'_>,
        summaries: ScalingSummaries,
        config_changes: &ConfigChanges,
    ) -> Result<ChainOutcome, Self::Error>;
}

/// The built-in behaviour: no custom alignment, no resource check, no executors.
#[cfg(test)]
pub(crate) struct NoPlugins;

#[cfg(test)]
impl DecisionHooks for NoPlugins {
    type Error = Infallible;

    fn abort(&self, _: DecisionError) -> Option<Infallible> {
        None
    }

    fn align(
        &self,
        _: &VertexId,
        _: AlignmentContext,
        _: Option<&VertexInfo>,
        _: &EvaluatedVertexMetrics,
    ) -> Option<Result<i64, Infallible>> {
        None
    }

    fn exceeds_cluster_resources(
        &self,
        _: &DecisionInput<'_>,
        _: &ScalingSummaries,
        _: Option<u64>,
    ) -> Result<bool, Infallible> {
        Ok(false)
    }

    fn has_executors(&self) -> bool {
        false
    }

    fn run_executor_chain(
        &self,
        _: &DecisionInput<'_>,
        summaries: ScalingSummaries,
        _: &ConfigChanges,
    ) -> Result<ChainOutcome, Infallible> {
        Ok(ChainOutcome::Approved(summaries))
    }
}

impl DecisionHooks for ResolvedPlugins {
    type Error = PluginError;

    fn abort(&self, error: DecisionError) -> Option<PluginError> {
        Some(PluginError::Aborted(error))
    }

    fn align(
        &self,
        vertex: &VertexId,
        alignment: AlignmentContext,
        info: Option<&VertexInfo>,
        metrics: &EvaluatedVertexMetrics,
    ) -> Option<Result<i64, PluginError>> {
        let mode = self.alignment_mode()?;
        Some(align_with_plugin(mode, vertex, alignment, info, metrics))
    }

    fn exceeds_cluster_resources(
        &self,
        input: &DecisionInput<'_>,
        summaries: &ScalingSummaries,
        task_manager_memory: Option<u64>,
    ) -> Result<bool, PluginError> {
        let Some(check) = self.resource_check() else {
            return Ok(false);
        };
        scaling_would_exceed_cluster_resources(
            check,
            input.evaluated,
            summaries,
            input.task_manager_cpu,
            task_manager_memory,
            input.options.task_slots_per_task_manager,
        )
    }

    fn has_executors(&self) -> bool {
        !self.executors().is_empty()
    }

    fn run_executor_chain(
        &self,
        input: &DecisionInput<'_>,
        summaries: ScalingSummaries,
        config_changes: &ConfigChanges,
    ) -> Result<ChainOutcome, PluginError> {
        let chain = ChainInput {
            now: input.now,
            topology: input.topology,
            evaluated: input.evaluated,
            options: input.options,
            config_changes,
        };
        apply_executor_chain(self.executors(), &chain, summaries)
    }
}

/// The built-in behaviour, failing where the reference 1.16 aborts (compat mode): [`NoPlugins`]
/// with [`DecisionError`] as its error.
#[cfg(test)]
pub(crate) struct NoPluginsOrAbort;

#[cfg(test)]
impl DecisionHooks for NoPluginsOrAbort {
    type Error = DecisionError;

    fn abort(&self, error: DecisionError) -> Option<DecisionError> {
        Some(error)
    }

    fn align(
        &self,
        _: &VertexId,
        _: AlignmentContext,
        _: Option<&VertexInfo>,
        _: &EvaluatedVertexMetrics,
    ) -> Option<Result<i64, DecisionError>> {
        None
    }

    fn exceeds_cluster_resources(
        &self,
        _: &DecisionInput<'_>,
        _: &ScalingSummaries,
        _: Option<u64>,
    ) -> Result<bool, DecisionError> {
        Ok(false)
    }

    fn has_executors(&self) -> bool {
        false
    }

    fn run_executor_chain(
        &self,
        _: &DecisionInput<'_>,
        summaries: ScalingSummaries,
        _: &ConfigChanges,
    ) -> Result<ChainOutcome, DecisionError> {
        Ok(ChainOutcome::Approved(summaries))
    }
}
