//! The cluster-resource check (reference `ResourceCheck`, `NoopResourceCheck`,
//! `ScalingExecutor.scalingWouldExceedClusterResources` and `ResourceCheckUtils`).

use super::{PluginError, ScalingSummaries};
use autoscaler_metrics::{EvaluatedMetrics, EvaluatedVertexMetrics, ScalingMetric};

/// Whether the cluster can host the TaskManagers a scaling needs (reference `ResourceCheck`).
///
/// Consulted before the resource quota check of every scaling that is not otherwise blocked, only
/// when the TaskManager CPU and memory are both known (positive). The instance counts are
/// `ceil(task slots / taskmanager.numberOfTaskSlots)` before and after the scaling, where the slots
/// after are [`estimate_num_task_slots_after_rescale`]. `Ok(false)` blocks the scaling silently (the
/// reference emits no event for it); an `Err` fails the cycle.
///
/// No configuration key selects it: set one with
/// [`PluginRegistry::with_resource_check`](super::PluginRegistry::with_resource_check). Without one
/// nothing is checked, as with the reference's default [`NoopResourceCheck`].
pub trait ResourceCheck: Send + Sync {
    /// Whether `new_instances` TaskManagers of `cpu_per_instance` cores and `memory_per_instance`
    /// bytes can be scheduled where `current_instances` run now.
    ///
    /// # Errors
    /// When the check cannot be made; the cycle then fails.
    fn try_schedule(
        &self,
        current_instances: u32,
        new_instances: u32,
        cpu_per_instance: f64,
        memory_per_instance: u64,
    ) -> Result<bool, PluginError>;
}

/// Allows everything (reference `NoopResourceCheck`).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopResourceCheck;

impl ResourceCheck for NoopResourceCheck {
    fn try_schedule(&self, _: u32, _: u32, _: f64, _: u64) -> Result<bool, PluginError> {
        Ok(true)
    }
}

/// The task slots the job uses after applying `summaries` (reference
/// `ResourceCheckUtils.estimateNumTaskSlotsAfterRescale`): every evaluated vertex at its new (or
/// current) parallelism; when the largest current parallelism equals `num_task_slots_used` the
/// slots are shared, so the largest new parallelism; otherwise no sharing is assumed, so their sum.
///
/// ```
/// use autoscaler_core::plugins::estimate_num_task_slots_after_rescale;
/// use autoscaler_core::ScalingSummary;
/// use autoscaler_metrics::{EvaluatedScalingMetric, EvaluatedVertexMetrics, ScalingMetric, VertexId, VertexMap};
/// let at = |p: f64| EvaluatedVertexMetrics::from_iter([(ScalingMetric::Parallelism, EvaluatedScalingMetric::of(p))]);
/// let vertices = VertexMap::from([(VertexId::new("a"), at(4.0)), (VertexId::new("b"), at(2.0))]);
/// let summaries = VertexMap::from([(VertexId::new("b"), ScalingSummary {
///     current_parallelism: 2, new_parallelism: 6, metrics: at(2.0) })]);
/// // Slot sharing (4 slots used = largest parallelism 4): max(4, 6) = 6.
/// assert_eq!(estimate_num_task_slots_after_rescale(&vertices, &summaries, 4), 6);
/// // No sharing (6 slots used): 4 + 6 = 10.
/// assert_eq!(estimate_num_task_slots_after_rescale(&vertices, &summaries, 6), 10);
/// ```
pub fn estimate_num_task_slots_after_rescale(
    vertices: &autoscaler_metrics::VertexMap<EvaluatedVertexMetrics>,
    summaries: &ScalingSummaries,
    num_task_slots_used: i64,
) -> i64 {
    // Java `(int)` of the evaluated parallelism: NaN counts as 0.
    let current: Vec<i32> = vertices
        .values()
        .map(|m| m.get_or_absent(ScalingMetric::Parallelism).current as i32)
        .collect();
    let new: Vec<i32> = vertices
        .keys()
        .zip(&current)
        .map(|(id, c)| {
            summaries
                .get(id)
                .map_or(*c, |s| i32::try_from(s.new_parallelism).unwrap_or(i32::MAX))
        })
        .collect();
    // The rule itself is shared with memory tuning's scale-down compensation.
    let used = i32::try_from(num_task_slots_used).unwrap_or(i32::MAX);
    i64::from(crate::tuning::estimate_task_slots_after_rescale(&current, &new, used))
}

/// Reference `scalingWouldExceedClusterResources`: whether `check` refuses the TaskManagers the
/// scaling needs. Unknown (non-positive) TaskManager CPU or memory: no assumption, not blocked. No
/// `NUM_TASK_SLOTS_USED` among the global metrics: the JobManager metrics are not ready, blocked.
pub(crate) fn scaling_would_exceed_cluster_resources(
    check: &dyn ResourceCheck,
    evaluated: &EvaluatedMetrics,
    summaries: &ScalingSummaries,
    task_manager_cpu: Option<f64>,
    task_manager_memory: Option<u64>,
    task_slots_per_task_manager: u32,
) -> Result<bool, PluginError> {
    let cpu = task_manager_cpu.unwrap_or(0.0);
    let memory = task_manager_memory.unwrap_or(0);
    if cpu <= 0.0 || memory == 0 {
        return Ok(false);
    }
    let Some(used) = evaluated.global.get(ScalingMetric::NumTaskSlotsUsed) else {
        tracing::info!("JM metrics not ready yet");
        return Ok(true);
    };
    let used = i64::from(used.current as i32);
    let after = estimate_num_task_slots_after_rescale(&evaluated.vertices, summaries, used);
    // Java `(int) Math.ceil(slots / (double) slotsPerTm)`: saturating, NaN (0 / 0) as 0.
    let per_tm = f64::from(task_slots_per_task_manager);
    let instances = |slots: i64| u32::try_from((slots as f64 / per_tm).ceil() as i32).unwrap_or(0);
    let allowed = check
        .try_schedule(instances(used), instances(after), cpu, memory)
        .map_err(|e| e.within("the cluster-resource check".to_owned()))?;
    Ok(!allowed)
}
