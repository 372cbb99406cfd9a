//! Memory autotuning: the TaskManager memory the job actually needs, as configuration changes
//! (the reference's `MemoryTuning.tuneTaskManagerMemory` with `MemoryBudget` and `MemoryScaling`).
//!
//! Pure and synchronous. The decision stage calls [`tune_task_manager_memory`] when a parallelism
//! change is about to be executed (after the memory-pressure check, the per-vertex targets, the
//! "any vertex outside its bound" rule and the `scaling.enabled` / excluded-period block, before
//! the resource quota), whether or not `job.autoscaler.memory.tuning.enabled` is set. Steps:
//!
//! 1. **Spec.** Flink's memory model derives the user's TaskManager memory from the configuration
//!    ([`MemorySpec::derive`]); an inconsistent configuration ends tuning (no event, no changes).
//! 2. **Budget.** The context's TaskManager memory (`JobAutoScalerContext::task_manager_memory`,
//!    which defaults to `taskmanager.memory.process.size`) is distributed, each pool taking what it
//!    asks for while memory remains, in this order: framework off-heap, task off-heap and JVM
//!    overhead as specified; network as the new parallelisms need it ([`network_memory_need`]);
//!    metaspace and heap as measured (average `METASPACE_MEMORY_USED` / `HEAP_MEMORY_USED` times
//!    `1 + memory.tuning.overhead`); managed memory 0 when unused, everything left with
//!    `memory.tuning.maximize-managed-memory`, else as specified.
//! 3. **Scale-down compensation** (`memory.tuning.scale-down-compensation.enabled`): the heap grows
//!    by the factor the number of TaskManagers shrinks ([`scale_down_compensation_factor`]).
//! 4. **Changes.** The process size becomes what was distributed; framework heap 0; managed memory
//!    and JVM overhead as fractions; network min = max; metaspace as budgeted; and the absolute
//!    sizes Flink would otherwise derive from (total Flink, task heap, managed size) are removed.
//!
//! The `Configuration recommendation` event carries the recommendation either way; the returned
//! [`ConfigChanges`] are empty unless tuning is enabled. The caller stores them with the scaling,
//! and the autoscaler hands them to
//! [`ScalingRealizer::realize_config_overrides`](crate::ScalingRealizer::realize_config_overrides)
//! every cycle while tuning is enabled. The quota check then uses the tuned process size
//! ([`tuned_task_manager_memory`]).
//!
//! **Where the reference would fail, tuning skips or clamps instead:** a memory configuration that
//! Flink rejects with an `IllegalArgumentException` (e.g. a process size smaller than total Flink
//! memory plus metaspace) is treated like an `IllegalConfigurationException`: no spec. A missing
//! `NUM_TASK_SLOTS_USED` counts as 0 slots (the reference throws a `NullPointerException`); a
//! vertex without evaluated metrics counts at its topology parallelism; a negative usage or budget
//! request counts as 0 (the reference's preconditions throw); an all-empty Flink memory, whose
//! managed fraction is 0/0, ends tuning without a recommendation ([`TuningSkipped::EmptyFlinkMemory`];
//! the reference throws a `NumberFormatException`). The event's lines end with `\n` (the reference
//! uses the platform's line separator).
//!
//! ```
//! use autoscaler_core::tuning::{TuningInput, tune_task_manager_memory};
//! use autoscaler_core::config::{AutoScalerOptions, Configuration};
//! use autoscaler_core::ScalingSummary;
//! use autoscaler_metrics::{
//!     EdgeSpec, EvaluatedMetrics, EvaluatedScalingMetric, EvaluatedVertexMetrics, JobTopology, ScalingMetric,
//!     ShipStrategy, VertexId, VertexMap, VertexSpec,
//! };
//!
//! let conf = Configuration::from_iter([
//!     ("taskmanager.memory.process.size", "4 gb"),
//!     ("job.autoscaler.memory.tuning.enabled", "true"),
//! ]);
//! let options = AutoScalerOptions::from_configuration(&conf).unwrap();
//! let topology = JobTopology::new(
//!     vec![VertexSpec::new("src", 2, 128), VertexSpec::new("sink", 2, 128)],
//!     vec![EdgeSpec::new("src", "sink", ShipStrategy::Hash)],
//! )
//! .unwrap();
//! let mut evaluated = EvaluatedMetrics::default();
//! evaluated.global.insert(ScalingMetric::HeapMemoryUsed, EvaluatedScalingMetric::avg(512.0 * 1048576.0));
//! evaluated.global.insert(ScalingMetric::MetaspaceMemoryUsed, EvaluatedScalingMetric::avg(64.0 * 1048576.0));
//! let summaries = VertexMap::from([(
//!     VertexId::new("sink"),
//!     ScalingSummary { current_parallelism: 2, new_parallelism: 4, metrics: EvaluatedVertexMetrics::new() },
//! )]);
//! let tuning = tune_task_manager_memory(&TuningInput {
//!     options: &options,
//!     task_manager_memory: Some(4 << 30),
//!     topology: &topology,
//!     evaluated: &evaluated,
//!     summaries: &summaries,
//! });
//! let recommendation = tuning.outcome.as_ref().unwrap();
//! // Heap 512 mb x 1.2, metaspace 64 mb x 1.2, no managed memory in use: far less than 4 gb.
//! assert_eq!(tuning.changes.overrides["taskmanager.memory.jvm-metaspace.size"], "80530636 bytes");
//! assert!(recommendation.sizes.total_process < 2 << 30);
//! ```

mod model;
mod size;

pub use model::{
    FRAMEWORK_HEAP_MEMORY, FRAMEWORK_OFF_HEAP_MEMORY, JVM_METASPACE, JVM_OVERHEAD_FRACTION, JVM_OVERHEAD_MAX,
    JVM_OVERHEAD_MIN, MANAGED_MEMORY_FRACTION, MANAGED_MEMORY_SIZE, MANAGED_MEMORY_SIZE_DEPRECATED,
    MEMORY_SEGMENT_SIZE, MemoryModelOptions, MemorySpec, NETWORK_BUFFERS_PER_CHANNEL,
    NETWORK_FLOATING_BUFFERS_PER_GATE, NETWORK_MEMORY_FRACTION, NETWORK_MEMORY_MAX, NETWORK_MEMORY_MIN, RangeFraction,
    SpecError, TASK_HEAP_MEMORY, TASK_OFF_HEAP_MEMORY, TOTAL_FLINK_MEMORY, TOTAL_PROCESS_MEMORY, parse_float,
};
pub use size::{format_fraction, format_memory_size, multiply};

use crate::config::AutoScalerOptions;
use crate::config::Configuration;
use crate::model::event::EventType;
use crate::model::state::{ConfigChanges, ScalingSummary};
use crate::scaling::CycleEvent;
use autoscaler_metrics::{EvaluatedMetrics, JobTopology, ScalingMetric, ShipStrategy, VertexMap};

/// Reason of the recommendation event.
pub const CONFIGURATION_RECOMMENDATION_REASON: &str = "Configuration recommendation";
/// Message key of the recommendation event (its dedup identity).
pub const MEMORY_TUNING_MESSAGE_KEY: &str = "MemoryTuning";
/// Prefix of the gauges a recommendation reports ([`MemoryRecommendation::gauges`]).
pub const MEMORY_TUNING_GAUGE_PREFIX: &str = "MemoryTuning.";

/// The keys tuning removes, sorted: total Flink memory, task heap and managed size (with its
/// deprecated key), from which Flink would otherwise derive sizes that contradict the overrides.
pub const REMOVED_KEYS: [&str; 4] = [
    TOTAL_FLINK_MEMORY,
    MANAGED_MEMORY_SIZE,
    MANAGED_MEMORY_SIZE_DEPRECATED,
    TASK_HEAP_MEMORY,
];

/// What memory tuning reads.
#[derive(Debug, Clone, Copy)]
pub struct TuningInput<'a> {
    /// The job's options: the `memory.tuning.*` flags, the memory model
    /// ([`AutoScalerOptions::memory_model`]), `taskmanager.numberOfTaskSlots` and the event interval.
    pub options: &'a AutoScalerOptions,
    /// The TaskManager process memory the context reports
    /// ([`JobAutoScalerContext::task_manager_memory`](crate::JobAutoScalerContext::task_manager_memory)):
    /// the budget. `None` = unknown, which ends tuning.
    pub task_manager_memory: Option<u64>,
    /// The job graph (edges and ship strategies size the network memory).
    pub topology: &'a JobTopology,
    /// The evaluated metrics: the global memory usage averages, `NUM_TASK_SLOTS_USED` and each
    /// vertex's current `PARALLELISM`.
    pub evaluated: &'a EvaluatedMetrics,
    /// The scaling summaries about to be executed.
    pub summaries: &'a VertexMap<ScalingSummary>,
}

/// Why tuning ended without a recommendation (no event, empty changes).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum TuningSkipped {
    /// The memory configuration is not consistent (Flink's `IllegalConfigurationException`).
    #[error("the memory configuration is not valid: {0}")]
    NoSpec(#[from] SpecError),
    /// The context reports no TaskManager memory, or 0.
    #[error("the TaskManager memory size could not be determined")]
    NoTaskManagerMemory,
    /// Nothing was distributed.
    #[error("the tuned total memory {0} is not positive")]
    NonPositiveTotal(i64),
    /// Every Flink memory pool came out empty, so the managed fraction has no denominator (the
    /// reference fails on a NaN fraction here).
    #[error("the tuned Flink memory is empty, so the managed memory fraction is undefined")]
    EmptyFlinkMemory,
}

/// The tuned sizes, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TunedMemory {
    /// JVM heap (framework + task heap), after scale-down compensation.
    pub heap: i64,
    /// Managed memory.
    pub managed: i64,
    /// Network memory (min = max).
    pub network: i64,
    /// JVM metaspace.
    pub metaspace: i64,
    /// JVM overhead (as specified, not tuned).
    pub overhead: i64,
    /// Total process memory: everything distributed.
    pub total_process: i64,
    /// Total Flink memory: the spec's, changed by the heap, managed and network differences.
    pub total_flink: i64,
}

/// A recommendation: the spec it started from, the tuned sizes and the changes that express them.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryRecommendation {
    /// The user's memory as Flink derives it from the configuration.
    pub spec: MemorySpec,
    /// The tuned sizes.
    pub sizes: TunedMemory,
    /// The recommended changes (the 7 overrides and 4 removals), whether or not tuning is enabled.
    pub changes: ConfigChanges,
    /// `memory.tuning.enabled`: whether the changes are returned for application.
    pub enabled: bool,
}

/// The result of one tuning step.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryTuning {
    /// The recommendation, or why there is none.
    pub outcome: Result<MemoryRecommendation, TuningSkipped>,
    /// The changes to store and apply: the recommendation's if `memory.tuning.enabled`, else empty.
    pub changes: ConfigChanges,
}

impl MemoryRecommendation {
    /// The event message: a header naming whether tuning is enabled, one `key: value` line per
    /// override (key order) and the removed keys.
    pub fn message(&self) -> String {
        let mut message = format!(
            "Memory tuning recommends the following configuration (automatic tuning is {}):\n",
            if self.enabled { "enabled" } else { "disabled" }
        );
        for (key, value) in &self.changes.overrides {
            message.push_str(&format!("{key}: {value}\n"));
        }
        let removals: Vec<&str> = self.changes.removals.iter().map(String::as_str).collect();
        message.push_str(&format!(
            "Remove the following config entries if present: [{}]",
            removals.join(", ")
        ));
        message
    }

    /// The `Configuration recommendation` event (Normal, key `MemoryTuning`, deduplicated over
    /// `scaling.event.interval`).
    pub fn event(&self, options: &AutoScalerOptions) -> CycleEvent {
        CycleEvent {
            event_type: EventType::Normal,
            reason: CONFIGURATION_RECOMMENDATION_REASON.to_owned(),
            message: self.message(),
            message_key: Some(MEMORY_TUNING_MESSAGE_KEY.to_owned()),
            interval: Some(options.scaling_event_interval),
            report_header: None,
        }
    }

    /// One gauge per recommended size, in bytes, named `MemoryTuning.<config key>` (e.g.
    /// `MemoryTuning.taskmanager.memory.process.size`), for a platform's metrics exporter.
    pub fn gauges(&self) -> [(String, f64); 4] {
        let s = &self.sizes;
        [
            (TOTAL_PROCESS_MEMORY, s.total_process),
            (MANAGED_MEMORY_SIZE, s.managed),
            (NETWORK_MEMORY_MAX, s.network),
            (JVM_METASPACE, s.metaspace),
        ]
        .map(|(key, bytes)| (format!("{MEMORY_TUNING_GAUGE_PREFIX}{key}"), bytes as f64))
    }
}

impl ConfigChanges {
    /// Whether there is neither an override nor a removal.
    pub fn is_empty(&self) -> bool {
        self.overrides.is_empty() && self.removals.is_empty()
    }

    /// `conf` with the removals removed, then the overrides set (the reference's
    /// `ConfigChanges.newConfigWithOverrides`): what a platform deploys.
    ///
    /// ```
    /// use autoscaler_core::config::Configuration;
    /// use autoscaler_core::ConfigChanges;
    /// let mut changes = ConfigChanges::default();
    /// changes.overrides.insert("taskmanager.memory.process.size".into(), "2 gb".into());
    /// changes.removals.insert("taskmanager.memory.flink.size".into());
    /// let conf = Configuration::from_iter([("taskmanager.memory.flink.size", "3 gb")]);
    /// let tuned = changes.applied_to(&conf);
    /// assert_eq!(tuned.get("taskmanager.memory.process.size"), Some("2 gb"));
    /// assert!(!tuned.contains_key("taskmanager.memory.flink.size"));
    /// ```
    pub fn applied_to(&self, conf: &Configuration) -> Configuration {
        let mut out = conf.clone();
        for key in &self.removals {
            out.remove(key);
        }
        for (key, value) in &self.overrides {
            out.set(key.clone(), value.clone());
        }
        out
    }
}

/// The TaskManager memory the resource checks use (the reference's `MemoryTuning.getTotalMemory`
/// on the tuned configuration): `taskmanager.memory.process.size` of the configuration with
/// `changes` applied if tuning is enabled (else as configured), falling back to the context's
/// value.
pub fn tuned_task_manager_memory(
    changes: &ConfigChanges,
    options: &AutoScalerOptions,
    context_memory: Option<u64>,
) -> Option<u64> {
    let configured = if options.memory_tuning_enabled {
        match changes.overrides.get(TOTAL_PROCESS_MEMORY) {
            // The overrides are written by `format_memory_size`, which always parses.
            Some(value) => crate::config::parse_memory_size(value).ok(),
            None if changes.removals.contains(TOTAL_PROCESS_MEMORY) => None,
            None => options.task_manager_process_memory,
        }
    } else {
        options.task_manager_process_memory
    };
    configured.or(context_memory)
}

/// Memory accounting: each pool takes what it asks for while memory remains (the reference's
/// `MemoryBudget`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryBudget {
    remaining: i64,
}

impl MemoryBudget {
    /// A budget of `total` bytes (negative counts as 0).
    pub fn new(total: i64) -> Self {
        Self {
            remaining: total.max(0),
        }
    }

    /// Grants `min(amount, remaining)` and subtracts it. A negative request is granted nothing
    /// (the reference rejects it with an `IllegalArgumentException`).
    pub fn take(&mut self, amount: i64) -> i64 {
        let granted = amount.clamp(0, self.remaining);
        self.remaining -= granted;
        granted
    }

    /// What is left.
    pub fn remaining(&self) -> i64 {
        self.remaining
    }
}

/// Java's `(int)` cast of a metric value (NaN -> 0, saturating).
fn java_int(value: f64) -> i32 {
    value as i32
}

/// Java's `(long)` cast of a metric value (NaN -> 0, saturating).
fn java_long(value: f64) -> i64 {
    value as i64
}

fn to_int(parallelism: u32) -> i32 {
    i32::try_from(parallelism).unwrap_or(i32::MAX)
}

/// Per topology vertex (by index): the current `PARALLELISM` of the evaluated metrics, or the
/// topology's parallelism for a vertex that was not evaluated.
pub fn current_parallelisms(topology: &JobTopology, evaluated: &EvaluatedMetrics) -> Vec<i32> {
    topology
        .vertices()
        .iter()
        .map(|v| {
            match evaluated
                .vertices
                .get(&v.id)
                .and_then(|m| m.get(ScalingMetric::Parallelism))
            {
                Some(p) => java_int(p.current),
                None => to_int(v.parallelism.get()),
            }
        })
        .collect()
}

/// Per topology vertex (by index): the summary's new parallelism, else the current one
/// ([`current_parallelisms`]); the reference's `ResourceCheckUtils.computeNewParallelisms`.
pub fn new_parallelisms(
    topology: &JobTopology,
    evaluated: &EvaluatedMetrics,
    summaries: &VertexMap<ScalingSummary>,
) -> Vec<i32> {
    topology
        .vertices()
        .iter()
        .zip(current_parallelisms(topology, evaluated))
        .map(|(v, current)| summaries.get(&v.id).map_or(current, |s| to_int(s.new_parallelism)))
        .collect()
}

/// The reference's `ResourceCheckUtils.estimateNumTaskSlotsAfterRescale`: with slot sharing (the
/// largest current parallelism equals the slots in use) the largest new parallelism, else the
/// sum of the new parallelisms.
pub fn estimate_task_slots_after_rescale(current: &[i32], new: &[i32], slots_used: i32) -> i32 {
    if current.iter().copied().fold(0, i32::max) == slots_used {
        new.iter().copied().fold(0, i32::max)
    } else {
        new.iter().copied().fold(0, i32::wrapping_add)
    }
}

/// Network buffers one gate of a vertex at parallelism `current` needs towards a vertex at
/// `connected` (the reference's `MemoryTuning.calculateNetworkSegmentNumber`): a FORWARD edge
/// between equal parallelisms has one channel; FORWARD (rescaled) and RESCALE edges connect to
/// `ceil(connected / current)` channels; every other strategy to all `connected` subtasks. Each
/// channel has `buffers_per_channel` buffers, each gate `floating_buffers` more.
///
/// ```
/// use autoscaler_core::tuning::network_segments;
/// use autoscaler_metrics::ShipStrategy;
/// assert_eq!(network_segments(10, 10, ShipStrategy::Forward, 2, 8), 10); // 2 + 8
/// assert_eq!(network_segments(10, 15, ShipStrategy::Rescale, 2, 8), 12); // ceil(1.5) x 2 + 8
/// assert_eq!(network_segments(10, 15, ShipStrategy::Hash, 2, 8), 38); // 15 x 2 + 8
/// ```
pub fn network_segments(
    current: i32,
    connected: i32,
    strategy: ShipStrategy,
    buffers_per_channel: i32,
    floating_buffers: i32,
) -> i32 {
    let channels = match strategy {
        ShipStrategy::Forward if current == connected => 1,
        ShipStrategy::Forward | ShipStrategy::Rescale => java_int((f64::from(connected) / f64::from(current)).ceil()),
        _ => connected,
    };
    channels
        .wrapping_mul(buffers_per_channel)
        .wrapping_add(floating_buffers)
}

/// The network memory one TaskManager needs at the given per-vertex parallelisms (by topology
/// index): every edge counted at both ends ([`network_segments`] from each vertex towards the
/// other), times the segment size, times the slots per TaskManager (a slot may host a subtask of
/// every vertex).
pub fn network_memory_need(
    topology: &JobTopology,
    parallelism: &[i32],
    model: &MemoryModelOptions,
    slots_per_task_manager: i32,
) -> i64 {
    let p = |index: usize| parallelism.get(index).copied().unwrap_or(0);
    let mut need: i64 = 0;
    for (index, vertex) in topology.vertices().iter().enumerate() {
        for (other, strategy) in vertex.inputs.iter().chain(&vertex.outputs) {
            let segments = network_segments(
                p(index),
                p(*other),
                *strategy,
                model.buffers_per_channel,
                model.floating_buffers_per_gate,
            );
            need = need.wrapping_add(i64::from(segments).wrapping_mul(model.segment_size));
        }
    }
    need.wrapping_mul(i64::from(slots_per_task_manager))
}

/// The reference's `MemoryScaling.getMemoryScalingFactor`: TaskManagers before over TaskManagers
/// after the rescale (each `ceil(slots / slots per TM)`), at least 1, so the heap only grows when
/// the number of TaskManagers shrinks. Java double semantics (a NaN quotient stays NaN).
///
/// ```
/// use autoscaler_core::tuning::scale_down_compensation_factor;
/// // 20 slots -> 10 slots at 1 slot per TM: 20 / 10 TMs = 2.
/// assert_eq!(scale_down_compensation_factor(20, 10, 1), 2.0);
/// // A scale-up never shrinks the heap.
/// assert_eq!(scale_down_compensation_factor(10, 20, 1), 1.0);
/// ```
pub fn scale_down_compensation_factor(slots_used: i32, slots_after: i32, slots_per_task_manager: i32) -> f64 {
    let task_managers = |slots: i32| java_int((f64::from(slots) / f64::from(slots_per_task_manager)).ceil());
    let factor = f64::from(task_managers(slots_used)) / f64::from(task_managers(slots_after));
    autoscaler_metrics::java::max(factor, 1.0)
}

/// Java `(long)` of a global metric's average (NaN -> 0); a negative usage counts as 0 (the
/// reference rejects it).
fn usage(evaluated: &EvaluatedMetrics, metric: ScalingMetric) -> i64 {
    java_long(evaluated.global.get_or_absent(metric).average).max(0)
}

/// `(long)(usage × (1 + overhead))`.
fn with_overhead(usage: i64, overhead: f64) -> i64 {
    java_long(usage as f64 * (1.0 + overhead))
}

/// Runs memory tuning (see the [module docs](self)).
pub fn tune_task_manager_memory(input: &TuningInput<'_>) -> MemoryTuning {
    let outcome = recommend(input);
    let changes = match &outcome {
        Ok(r) if r.enabled => r.changes.clone(),
        _ => ConfigChanges::default(),
    };
    MemoryTuning { outcome, changes }
}

fn recommend(input: &TuningInput<'_>) -> Result<MemoryRecommendation, TuningSkipped> {
    let options = input.options;
    let spec = MemorySpec::derive(&options.memory_model)?;
    let available = input
        .task_manager_memory
        .and_then(|m| i64::try_from(m).ok())
        .filter(|m| *m > 0)
        .ok_or(TuningSkipped::NoTaskManagerMemory)?;
    let slots_per_task_manager = to_int(options.task_slots_per_task_manager);

    let mut budget = MemoryBudget::new(available);
    // What tuning does not change.
    budget.take(spec.framework_off_heap);
    budget.take(spec.task_off_heap);
    budget.take(spec.overhead);
    // The order decides who gets less when the measured needs exceed the memory: managed memory
    // comes last because it may grow without bound (RocksDB).
    let current = current_parallelisms(input.topology, input.evaluated);
    let new = new_parallelisms(input.topology, input.evaluated, input.summaries);
    let network = budget.take(network_memory_need(
        input.topology,
        &new,
        &options.memory_model,
        slots_per_task_manager,
    ));
    let overhead = options.memory_tuning_overhead;
    let metaspace = budget.take(with_overhead(
        usage(input.evaluated, ScalingMetric::MetaspaceMemoryUsed),
        overhead,
    ));
    let mut heap = budget.take(with_overhead(
        usage(input.evaluated, ScalingMetric::HeapMemoryUsed),
        overhead,
    ));
    let managed = if usage(input.evaluated, ScalingMetric::ManagedMemoryUsed) == 0 {
        0
    } else if options.memory_tuning_maximize_managed_memory {
        budget.take(i64::MAX)
    } else {
        budget.take(spec.managed)
    };
    if options.memory_tuning_scale_down_compensation_enabled {
        let slots_used = java_int(
            input
                .evaluated
                .global
                .get_or_absent(ScalingMetric::NumTaskSlotsUsed)
                .current,
        );
        let slots_after = estimate_task_slots_after_rescale(&current, &new, slots_used);
        let factor = scale_down_compensation_factor(slots_used, slots_after, slots_per_task_manager);
        heap += budget.take(java_long(factor * heap as f64).wrapping_sub(heap));
    }

    let total_process = available - budget.remaining();
    if total_process <= 0 {
        return Err(TuningSkipped::NonPositiveTotal(total_process));
    }
    // The spec's Flink memory changed by what tuning changed (all terms fit a long; the sum is
    // computed wider and cannot exceed what was distributed plus the spec's off-heap).
    let total_flink = i128::from(spec.total_flink())
        + i128::from(heap - spec.jvm_heap())
        + i128::from(managed - spec.managed)
        + i128::from(network - spec.network);
    let total_flink = i64::try_from(total_flink).map_err(|_| TuningSkipped::NoSpec(SpecError::Overflow))?;
    let managed_fraction = format_fraction(managed, total_flink)
        .filter(|_| total_flink > 0)
        .ok_or(TuningSkipped::EmptyFlinkMemory)?;
    let overhead_fraction =
        format_fraction(spec.overhead, total_process).ok_or(TuningSkipped::NonPositiveTotal(total_process))?;

    let mut changes = ConfigChanges::default();
    for (key, value) in [
        (TOTAL_PROCESS_MEMORY, format_memory_size(total_process)),
        // The heap is set through the other pools; framework heap 0 keeps the accounting exact.
        (FRAMEWORK_HEAP_MEMORY, format_memory_size(0)),
        (MANAGED_MEMORY_FRACTION, managed_fraction),
        (NETWORK_MEMORY_MIN, format_memory_size(network)),
        (NETWORK_MEMORY_MAX, format_memory_size(network)),
        (JVM_OVERHEAD_FRACTION, overhead_fraction),
        (JVM_METASPACE, format_memory_size(metaspace)),
    ] {
        changes.overrides.insert(key.to_owned(), value);
    }
    changes.removals = REMOVED_KEYS.iter().map(|k| (*k).to_owned()).collect();
    Ok(MemoryRecommendation {
        spec,
        sizes: TunedMemory {
            heap,
            managed,
            network,
            metaspace,
            overhead: spec.overhead,
            total_process,
            total_flink,
        },
        changes,
        enabled: options.memory_tuning_enabled,
    })
}

#[cfg(test)]
mod tests;
