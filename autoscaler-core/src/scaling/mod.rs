//! The decision stage: from evaluated metrics to new vertex parallelisms.
//!
//! Everything here is pure and synchronous: no I/O, no async, no clock. The cycle's instant, the
//! loaded (trimmed) scaling history and the restart time come in as data through
//! [`DecisionInput`]; the only state that is mutated is the job's
//! [`DelayedScaleDown`](crate::DelayedScaleDown), which the caller loads before and persists after
//! [`decide`] when its `updated` flag is set.
//!
//! The stage follows the reference's `ScalingExecutor.scaleResource` (anchor §2.7) with
//! `JobVertexScaler` (§2.4), `ParallelismAligner` (§2.5) and `DelayedScaleDown` (§2.6); the
//! history helpers follow `ScalingHistoryUtils` and `ScalingTracking` (§2.8). Both the async
//! `JobAutoScalerImpl` and the `flink-autoscaler replay` tool call it.
//!
//! It departs from the reference 1.16 on purpose in two rules, where 1.16 scales a source onto
//! subtasks that get no partition or aborts on an idle vertex:
//! * the partition cap in alignment ([`PartitionCap`], replay §3.5.1; the reference's later fix
//!   FLINK-40389): a source never ends above its partition count, in every mode but `OFF`;
//! * the observed-scalability guard (replay §3.5.2; FLINK-39890): where the coefficient's fit is
//!   undefined (Σ(p²) × baseline rate is 0), it is 1.0 instead of aborting the decision.
//!
//! `job.autoscaler.compat.reference-1-16: true`
//! ([`AutoScalerOptions::compat_reference_1_16`]) restores 1.16's answers in both; the abort then
//! surfaces from [`decide`] as [`PluginError::Aborted`](crate::plugins::PluginError::Aborted)
//! ([`DecisionError`]).
//!
//! ```
//! use autoscaler_core::plugins::ResolvedPlugins;
//! use autoscaler_core::scaling::{DecisionInput, DecisionOutcome, NoChangeReason, decide};
//! use autoscaler_core::config::AutoScalerOptions;
//! use autoscaler_core::{DelayedScaleDown, ScalingHistory};
//! use autoscaler_metrics::{EvaluatedMetrics, JobTopology, VertexSpec};
//! use std::time::Duration;
//!
//! let topology = JobTopology::new(vec![VertexSpec::new("src", 2, 128)], vec![]).unwrap();
//! let options = AutoScalerOptions::default();
//! let input = DecisionInput {
//!     now: chrono::DateTime::UNIX_EPOCH,
//!     topology: &topology,
//!     evaluated: &EvaluatedMetrics::default(),
//!     scaling_history: &ScalingHistory::new(),
//!     restart_time: Duration::from_secs(300),
//!     options: &options,
//!     in_excluded_period: false,
//!     task_manager_cpu: None,
//!     task_manager_memory: None,
//! };
//! let decision = decide(&input, &ResolvedPlugins::default(), &mut DelayedScaleDown::default())
//!     .expect("no plugin to fail");
//! assert_eq!(decision.outcome, DecisionOutcome::NoChange(NoChangeReason::AtTarget));
//! assert_eq!(decision.parallelism["src"], 2);
//! ```

mod alignment;
mod delayed_scale_down;
mod executor;
mod history;
mod report;
mod vertex_scaler;

pub use alignment::{AlignmentContext, AlignmentResult, PartitionCap, align, align_with};
pub use executor::{apply_to_evaluated, decide};
pub use history::{
    max_restart_time_or_default, record_restart_duration_if_tracked_and_parallelism_matches, record_scaling,
    trim_scaling_history, trim_scaling_tracking,
};

use crate::config::AutoScalerOptions;
use crate::model::event::EventType;
use crate::model::state::{ScalingHistory, ScalingSummary};
use autoscaler_metrics::{EvaluatedMetrics, JobTopology, VertexId, VertexMap};
use chrono::{DateTime, Utc};
use std::fmt;
use std::time::Duration;

/// An event the decision stage wants emitted, with the reference's dedup identity.
///
/// Hand it to [`AutoScalerEventHandler::handle_event`](crate::AutoScalerEventHandler::handle_event)
/// as is; a [`scaling report`](CycleEvent::report_header) may instead be routed to
/// `handle_scaling_event` with [`Decision::summaries`] so that handlers which deduplicate reports by
/// their parallelism hash (the reference's JDBC and Kubernetes handlers) can do so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CycleEvent {
    /// Normal or Warning.
    pub event_type: EventType,
    /// The reference's reason (`ScalingReport`, `MemoryPressure`, `IneffectiveScaling`, ...).
    pub reason: String,
    /// The full message.
    pub message: String,
    /// The reference's message key, `None` when it passes none.
    pub message_key: Option<String>,
    /// The dedup interval (`scaling.event.interval`), `None` = never deduplicate.
    pub interval: Option<Duration>,
    /// For a `ScalingReport`: the header the report was built from (the message is the header
    /// followed by one entry per summary); `None` for every other event.
    pub report_header: Option<String>,
}

/// A decision aborted where the reference 1.16 aborts it. This happens only under
/// `job.autoscaler.compat.reference-1-16: true`
/// ([`AutoScalerOptions::compat_reference_1_16`]); by default this project decides there.
///
/// The message is the one the reference's exception carries, as a JVM autoscaler 1.16 shows it in
/// its `AutoscalerError` event, so that the two can be compared decision for decision.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecisionError {
    /// `observed-scalability.enabled` fitted the scaling coefficient of `vertex` on a history
    /// where it is undefined (Σ(p²) × baseline rate is 0: an idle vertex's zero processing rate).
    /// The reference 1.16 hands the NaN to `BigDecimal.valueOf`, whose `NumberFormatException`
    /// aborts the scaling of the whole job (FLINK-39890). Without the compat switch the
    /// coefficient is 1.0 there (replay §3.5.2).
    #[error("Character N is neither a decimal digit number, decimal point, nor \"e\" notation exponential mark.")]
    UndefinedScalingCoefficient {
        /// The vertex whose coefficient is undefined.
        vertex: VertexId,
    },
}

/// Everything one decision needs, computed by the caller for the cycle at `now`.
#[derive(Debug, Clone, Copy)]
pub struct DecisionInput<'a> {
    /// The cycle's instant (the reference's `cycleState.now` and the vertex scaler's clock).
    pub now: DateTime<Utc>,
    /// The job graph (inputs' ship strategies, finished flags, slot sharing groups, parallelism).
    pub topology: &'a JobTopology,
    /// Evaluated metrics; only these vertices are considered for scaling.
    pub evaluated: &'a EvaluatedMetrics,
    /// The scaling history, already trimmed ([`trim_scaling_history`]).
    pub scaling_history: &'a ScalingHistory,
    /// The restart time ([`max_restart_time_or_default`]); used in whole seconds.
    pub restart_time: Duration,
    /// The job's options.
    pub options: &'a AutoScalerOptions,
    /// Whether `now` lies in one of `options.excluded_periods` (the caller evaluates them).
    pub in_excluded_period: bool,
    /// TaskManager CPU as the context reports it; `None` = unknown (counts as 0 in the quota check).
    pub task_manager_cpu: Option<f64>,
    /// TaskManager process memory in bytes as the context reports it
    /// ([`JobAutoScalerContext::task_manager_memory`](crate::JobAutoScalerContext::task_manager_memory));
    /// `None` = unknown. It is memory tuning's budget; the resource checks use
    /// `taskmanager.memory.process.size` (after tuning, when enabled) and fall back to this value
    /// (0 when unknown).
    pub task_manager_memory: Option<u64>,
}

/// Why a decision changes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NoChangeReason {
    /// No vertex has a target different from its current parallelism.
    AtTarget,
    /// Some vertex would change, but none of the changing vertices is outside its utilization bound.
    WithinBounds,
}

/// Why a decision that wanted to change parallelisms is not executed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BlockReason {
    /// GC pressure or heap usage above its threshold (checked before any vertex).
    MemoryPressure,
    /// `scaling.enabled` is false (recommend only).
    ScalingDisabled,
    /// `now` lies in an excluded period.
    ExcludedPeriod,
    /// `quota.cpu` or `quota.memory` would be exceeded.
    ResourceQuota,
    /// The cluster-resource check ([`ResourceCheck`](crate::plugins::ResourceCheck)) cannot
    /// schedule the TaskManagers the scaling needs.
    ClusterResources,
    /// A scaling executor ([`ScalingExecutorPlugin`](crate::plugins::ScalingExecutorPlugin))
    /// returned no summaries.
    Vetoed,
}

/// The result of one decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DecisionOutcome {
    /// The summaries are to be applied.
    Scale,
    /// Nothing to apply.
    NoChange(NoChangeReason),
    /// Changes were recommended (or memory is under pressure) but not executed.
    Blocked(BlockReason),
}

impl DecisionOutcome {
    /// The replay format's outcome string: `scale`, `no_change` or `blocked`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Scale => "scale",
            Self::NoChange(_) => "no_change",
            Self::Blocked(_) => "blocked",
        }
    }

    /// The replay format's reason string, `None` for [`DecisionOutcome::Scale`].
    pub fn reason(&self) -> Option<&'static str> {
        match self {
            Self::Scale => None,
            Self::NoChange(r) => Some(r.as_str()),
            Self::Blocked(r) => Some(r.as_str()),
        }
    }
}

impl NoChangeReason {
    /// The replay format's reason string (`at_target`, `within_bounds`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::AtTarget => "at_target",
            Self::WithinBounds => "within_bounds",
        }
    }
}

impl BlockReason {
    /// The replay format's reason string (`memory_pressure`, `scaling_disabled`, `excluded_period`,
    /// `resource_quota`; `cluster_resources` and `vetoed` come only from plugins, which the replay
    /// does not load).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::MemoryPressure => "memory_pressure",
            Self::ScalingDisabled => "scaling_disabled",
            Self::ExcludedPeriod => "excluded_period",
            Self::ResourceQuota => "resource_quota",
            Self::ClusterResources => "cluster_resources",
            Self::Vetoed => "vetoed",
        }
    }
}

impl fmt::Display for DecisionOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.reason() {
            Some(reason) => write!(f, "{}/{}", self.as_str(), reason),
            None => f.write_str(self.as_str()),
        }
    }
}

/// What the vertex-level logic decided for one examined vertex.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VertexDecision {
    /// Current parallelism (the evaluated `PARALLELISM`).
    pub current: u32,
    /// Recommended parallelism; equals `current` when nothing changes, the vertex is excluded, an
    /// ineffective scale-up is blocked or a scale-down is delayed.
    pub target: u32,
    /// The change's outside-utilization-bound flag (false when `target == current`).
    pub outside_utilization_bound: bool,
    /// Listed in `vertex.exclude.ids`, finished, or unmeasured.
    pub excluded: bool,
    /// Excluded this cycle because its busy time was not measured
    /// ([`unmeasured_vertices`](crate::cycle::unmeasured_vertices); replay §3.3 step 7a).
    pub unmeasured: bool,
    /// `EXPECTED_PROCESSING_RATE` set when the computed parallelism differed from current (even if
    /// the change was then delayed or blocked), NaN otherwise.
    pub expected_processing_rate: f64,
    /// What, beyond the scale factor, shaped `target` (the decision record's per-vertex reason).
    pub constraint: VertexConstraint,
}

/// What, beyond the scale factor, shaped a vertex's target: the rule of the vertex scaler that
/// capped, moved or held back the computed parallelism. Only the decisive rule is kept: a hold
/// (delay, ineffective scaling) wins over an alignment, which wins over the cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum VertexConstraint {
    /// Nothing: the target is `ceil(scale factor x current)` within the limits.
    #[default]
    None,
    /// No target could be computed: the true processing rate or the target capacity is unknown.
    NoEstimate,
    /// `ceil(scale factor x current)` = `computed` exceeded `min(max parallelism,
    /// max(current, vertex.max-parallelism))` = `cap` and was capped to it.
    MaxParallelism {
        /// The uncapped parallelism.
        computed: i64,
        /// The cap it was lowered to.
        cap: i64,
    },
    /// The key-group / partition alignment moved the (capped) target `computed` elsewhere, possibly
    /// back to the current parallelism.
    Alignment {
        /// The parallelism before alignment.
        computed: i64,
    },
    /// A scale-down to `recommended` waits for `scale-down.interval` since its first trigger.
    ScaleDownDelayed {
        /// When the delay since the first trigger runs out.
        until: DateTime<Utc>,
        /// The parallelism the vertex scaler recommended this cycle.
        recommended: u32,
    },
    /// A scale-up to `recommended` was blocked: the last scale-up was ineffective.
    IneffectiveScaling {
        /// The parallelism the vertex scaler would have used.
        recommended: u32,
    },
}

/// The decision of one cycle.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// What happens.
    pub outcome: DecisionOutcome,
    /// Every examined vertex (empty when blocked by memory pressure).
    pub vertices: VertexMap<VertexDecision>,
    /// The recommended changes; non-empty iff some changing vertex is outside its utilization
    /// bound (then also for blocked outcomes, as the reference's report shows them).
    pub summaries: VertexMap<ScalingSummary>,
    /// Parallelism of every topology vertex after the cycle (new values only for `Scale`).
    pub parallelism: VertexMap<u32>,
    /// Events emitted during the decision, in emission order.
    pub events: Vec<CycleEvent>,
    /// Memory tuning's result; `None` when the decision did not get that far (tuning runs only for
    /// a change about to be executed: outcomes `Scale` and `Blocked(ResourceQuota)`). Its
    /// [`changes`](crate::tuning::MemoryTuning::changes) are what to store with the scaling.
    pub memory_tuning: Option<crate::tuning::MemoryTuning>,
}

/// A vertex's parallelism change; `new == current` means no change (and then the flag is false).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ParallelismChange {
    /// Current parallelism.
    pub current: u32,
    /// Recommended parallelism.
    pub new: u32,
    /// Whether the vertex's true processing rate lies outside `[scale-up, scale-down]` thresholds.
    pub outside_utilization_bound: bool,
}

impl ParallelismChange {
    pub(crate) fn no_change(current: u32) -> Self {
        Self {
            current,
            new: current,
            outside_utilization_bound: false,
        }
    }

    pub(crate) fn is_no_change(&self) -> bool {
        self.new == self.current
    }

    /// As the reference's `equals`: a no-change carries no bound flag.
    pub(crate) fn normalized(self) -> Self {
        if self.is_no_change() {
            Self::no_change(self.current)
        } else {
            self
        }
    }
}
