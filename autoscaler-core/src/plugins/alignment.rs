//! Alignment modes (FLIP-586, reference `ParallelismAlignmentMode`; the built-ins are
//! [`AlignmentMode`]'s implementation of the trait).

use super::{PluginConfig, PluginError, Resolved};
use crate::config::{AlignmentMode, compat_reference_1_16};
use crate::scaling::{AlignmentContext, PartitionCap, align_with};
use autoscaler_metrics::{EvaluatedVertexMetrics, ShipStrategy, VertexId, VertexInfo};

/// One vertex's alignment problem as a mode sees it (reference `ParallelismAlignmentMode.Context`).
#[derive(Debug, Clone, Copy)]
pub struct AlignmentModeContext<'a> {
    /// The mode's parameters (`…parallelism-alignment.mode.<name>.*`) and the configuration it sees.
    pub config: &'a PluginConfig,
    /// The vertex being aligned.
    pub vertex: &'a VertexId,
    /// Current parallelism, the clamped target, partitions, max parallelism and limits, with the
    /// region helpers the built-in modes use
    /// ([`first_aligned_in_region`](AlignmentContext::first_aligned_in_region) and friends).
    pub alignment: AlignmentContext,
    /// The ship strategies of the vertex's inputs.
    pub input_ship_strategies: &'a [ShipStrategy],
    /// The vertex's evaluated metrics.
    pub metrics: &'a EvaluatedVertexMetrics,
}

/// Adjusts a vertex's computed target parallelism (reference `ParallelismAlignmentMode`).
///
/// The vertex scaler computes `ceil(scale factor × current)` clamped to the parallelism limits; when
/// that differs from the current parallelism it asks the mode. A mode that is not
/// [`is_applicable`](ParallelismAlignmentMode::is_applicable) keeps the target. The answer is then
/// used as the new parallelism (equal to the current one: no change; below 1: no change).
///
/// The built-ins `BALANCED`, `EVENLY_SPREAD` and `OFF` (and the legacy blocking modes) are
/// [`AlignmentMode`]s, which implement this trait, so a custom mode can delegate to them. A custom
/// mode is selected with `job.autoscaler.scaling.parallelism-alignment.mode: <name>` and
/// `job.autoscaler.scaling.parallelism-alignment.mode.<name>.class: <registered name>`; an unknown
/// one falls back to BALANCED with a warning.
///
/// An `Err` fails the cycle (an `AutoscalerError` event; nothing recorded).
pub trait ParallelismAlignmentMode: Send + Sync {
    /// Whether the mode applies to the vertex; by default keyed (HASH input) vertices and sources
    /// that report a partition count.
    fn is_applicable(&self, ctx: &AlignmentModeContext<'_>) -> bool {
        ctx.alignment.is_applicable()
    }

    /// The parallelism to use for the vertex (called only when applicable).
    ///
    /// # Errors
    /// When the mode cannot decide; the cycle then fails.
    fn align_parallelism(&self, ctx: &AlignmentModeContext<'_>) -> Result<i64, PluginError>;
}

/// The built-in modes. Called through the trait, the legacy modes do not emit `ScalingLimited`
/// (as the reference's `KeyGroupOrPartitionsAdjustMode.alignParallelism` without an emitter). They
/// apply the partition cap ([`PartitionCap`]) unless the configuration the mode sees sets
/// `job.autoscaler.compat.reference-1-16: true`.
///
/// ```
/// use autoscaler_core::plugins::{AlignmentModeContext, ParallelismAlignmentMode, PluginConfig};
/// use autoscaler_core::scaling::AlignmentContext;
/// use autoscaler_core::config::{AlignmentMode, Configuration};
/// use autoscaler_metrics::{EvaluatedVertexMetrics, ShipStrategy, VertexId};
/// let config = PluginConfig::new(&Configuration::new(), "", "EVENLY_SPREAD", "EVENLY_SPREAD");
/// let ctx = AlignmentModeContext {
///     config: &config,
///     vertex: &VertexId::new("keyed"),
///     alignment: AlignmentContext { current: 16, target: 24, num_source_partitions: 0, max_parallelism: 128,
///         lower_limit: 1, upper_limit: 200, has_hash_input: true },
///     input_ship_strategies: &[ShipStrategy::Hash],
///     metrics: &EvaluatedVertexMetrics::new(),
/// };
/// // 24 does not divide 128; 32 is the first divisor above it.
/// assert_eq!(AlignmentMode::EvenlySpread.align_parallelism(&ctx), Ok(32));
/// assert_eq!(AlignmentMode::Off.align_parallelism(&ctx), Ok(24));
/// ```
impl ParallelismAlignmentMode for AlignmentMode {
    fn align_parallelism(&self, ctx: &AlignmentModeContext<'_>) -> Result<i64, PluginError> {
        let compat =
            compat_reference_1_16(ctx.config.configuration()).map_err(|e| PluginError::failed(e.to_string()))?;
        Ok(align_with(*self, &ctx.alignment, PartitionCap::from_compat(compat)).parallelism)
    }
}

/// Aligns with the custom `mode` (reference `ParallelismAligner.align` for a custom mode).
pub(crate) fn align_with_plugin(
    mode: &Resolved<dyn ParallelismAlignmentMode>,
    vertex: &VertexId,
    alignment: AlignmentContext,
    info: Option<&VertexInfo>,
    metrics: &EvaluatedVertexMetrics,
) -> Result<i64, PluginError> {
    let input_ship_strategies: Vec<ShipStrategy> = info
        .map(|i| i.inputs.iter().map(|(_, strategy)| *strategy).collect())
        .unwrap_or_default();
    let ctx = AlignmentModeContext {
        config: &mode.config,
        vertex,
        alignment,
        input_ship_strategies: &input_ship_strategies,
        metrics,
    };
    if !mode.plugin.is_applicable(&ctx) {
        return Ok(alignment.target);
    }
    mode.plugin.align_parallelism(&ctx).map_err(|e| {
        e.within(format!(
            "custom alignment mode '{}' (class={})",
            mode.config.instance(),
            mode.config.class()
        ))
    })
}
