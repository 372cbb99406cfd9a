//! The decision record: a structured, stable account of why one cycle decided what it decided.
//!
//! The reference explains a decision only in the text of its `ScalingReport` event. A
//! [`DecisionRecord`] says the same thing as data, per vertex and per job, for every outcome
//! including the ones the reference keeps silent about (a delayed scale-down, an ineffective
//! scale-up, an alignment that cancelled a change). It is pure: built from what the cycle already
//! computed ([`RecordInput`]), no I/O.
//!
//! # JSON (`flink-autoscaler-decision/1`, stable)
//!
//! Numbers follow the replay format's convention: finite values are JSON numbers, NaN and ±infinity
//! are the strings `"NaN"`, `"Infinity"`, `"-Infinity"`. Times are RFC 3339 UTC.
//!
//! ```json
//! {"format": "flink-autoscaler-decision/1", "job": "orders", "at": "2024-05-01T10:15:00Z",
//!  "outcome": "scale", "reason": null, "summary": "scale 1 vertex: sink 1 -> 2",
//!  "restart_time_s": 300, "utilization": {"target": 0.7, "min": 0.4, "max": 0.9},
//!  "bottlenecks": [], "root_cause": null,
//!  "vertices": {"sink": {
//!     "current_parallelism": 1, "target_parallelism": 2,
//!     "true_processing_rate": {"value": 1052.632, "source": "busy_time", "busy_time": 1052.63,
//!                              "observed": "NaN", "why": "busy time: no observed rate"},
//!     "target_rate": 1000.0, "catch_up_rate": 0.0, "load": 0.95,
//!     "scale_up_threshold": 1111.0, "scale_down_threshold": 2667.0, "utilization": "above_max",
//!     "role": null, "bottleneck": null,
//!     "reason": "scale_up", "until": null, "detail": "..."}}}
//! ```
//!
//! Per vertex, `reason` is one of [`VertexReason`]'s codes; `until` is set only for
//! `scale_down_delayed`. Per job, `outcome` is one of [`JobOutcome`]'s codes and `reason` refines
//! it (the replay format's reason strings).

use crate::config::AutoScalerOptions;
use crate::scaling::{BlockReason, Decision, DecisionOutcome, NoChangeReason, VertexConstraint, VertexDecision};
use autoscaler_metrics::root_cause::{Explanation, Role};
use autoscaler_metrics::{
    EvaluatedMetrics, EvaluatedVertexMetrics, JobTopology, ScalingMetric, TprEstimate, TprSource, VertexId, json_number,
};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// The format tag of a [`DecisionRecord`].
pub const DECISION_RECORD_FORMAT: &str = "flink-autoscaler-decision/1";

/// The outcome of one cycle for the job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum JobOutcome {
    /// New parallelisms are applied.
    Scale,
    /// Nothing to apply (`at_target`, `within_bounds`).
    NoChange,
    /// A change was wanted but not executed (`memory_pressure`, `scaling_disabled`,
    /// `excluded_period`, `resource_quota`, `cluster_resources`, `vetoed`).
    Blocked,
    /// Not enough data to decide (`metrics_not_ready`, `insufficient_samples`, `stabilizing`,
    /// `window_not_full`).
    NotReady,
    /// The autoscaler is disabled for the job.
    Disabled,
    /// The job is not running.
    JobNotRunning,
    /// The cycle failed; `reason` is the error.
    Error,
    /// The job's own options do not validate, so it is not scaled; `reason` names every problem
    /// (the standalone service's options check, before any cycle runs).
    Misconfigured,
}

impl JobOutcome {
    /// The stable code.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Scale => "scale",
            Self::NoChange => "no_change",
            Self::Blocked => "blocked",
            Self::NotReady => "not_ready",
            Self::Disabled => "disabled",
            Self::JobNotRunning => "job_not_running",
            Self::Error => "error",
            Self::Misconfigured => "misconfigured",
        }
    }
}

/// Why a vertex ends the cycle at its target parallelism.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum VertexReason {
    /// No change: its utilization is within the bounds, or the change it would make is within
    /// them and no other vertex is outside its bounds.
    WithinBounds,
    /// Its parallelism goes up this cycle.
    ScaleUp,
    /// Its parallelism goes down this cycle.
    ScaleDown,
    /// A scale-down waits for `scale-down.interval`; `until` says when it may happen.
    ScaleDownDelayed,
    /// A change was wanted, but the cycle is inside an excluded period.
    ExcludedPeriod,
    /// A change was wanted, but `scaling.enabled` is false (recommend only).
    ScalingDisabled,
    /// GC pressure or heap usage blocked every change.
    MemoryPressure,
    /// A change was wanted, but `quota.cpu` / `quota.memory` would be exceeded, or the cluster
    /// cannot schedule the TaskManagers needed.
    Quota,
    /// A scale-up was blocked because the last one was ineffective.
    IneffectiveScaling,
    /// The key-group / partition alignment cancelled the change.
    Alignment,
    /// A scale-up was wanted, but the vertex is at its maximum parallelism.
    MaxParallelism,
    /// The change was vetoed (by a scaling executor plugin, a validator or a platform's policy).
    Veto,
    /// Not enough data: the cycle did not decide, or the vertex has no processing-rate estimate.
    NotReady,
    /// Listed in `vertex.exclude.ids`, or finished: never scaled.
    Excluded,
    /// Its busy time was not measured in the latest collection: not scaled this cycle
    /// ([`unmeasured_vertices`](crate::cycle::unmeasured_vertices)).
    Unmeasured,
}

impl VertexReason {
    /// The stable code.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::WithinBounds => "within_bounds",
            Self::ScaleUp => "scale_up",
            Self::ScaleDown => "scale_down",
            Self::ScaleDownDelayed => "scale_down_delayed",
            Self::ExcludedPeriod => "excluded_period",
            Self::ScalingDisabled => "scaling_disabled",
            Self::MemoryPressure => "memory_pressure",
            Self::Quota => "quota",
            Self::IneffectiveScaling => "ineffective_scaling",
            Self::Alignment => "alignment",
            Self::MaxParallelism => "max_parallelism",
            Self::Veto => "veto",
            Self::NotReady => "not_ready",
            Self::Excluded => "excluded",
            Self::Unmeasured => "unmeasured",
        }
    }
}

/// Where a vertex's true processing rate lies against its thresholds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UtilizationBound {
    /// Busier than `utilization.max`: TPR below the scale-up threshold.
    AboveMax,
    /// Idler than `utilization.min`: TPR above the scale-down threshold.
    BelowMin,
    /// Between the bounds.
    Within,
    /// TPR or a threshold unknown.
    Unknown,
}

/// The true processing rate a vertex was sized with, and why that estimate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TprRecord {
    /// The evaluated rate (records/s, rounded as stored).
    #[serde(with = "json_number")]
    pub value: f64,
    /// The estimate used; `None` when the estimates are not known.
    pub source: Option<TprSource>,
    /// The busy-time estimate (unrounded).
    #[serde(with = "json_number")]
    pub busy_time: f64,
    /// The observed estimate (unrounded), NaN without enough observations.
    #[serde(with = "json_number")]
    pub observed: f64,
    /// The switch rule's verdict in words.
    pub why: String,
}

/// The decision of one vertex, explained.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VertexRecord {
    /// The vertex's name in the job graph, when it has one (people read names, ids join).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Parallelism during the cycle.
    pub current_parallelism: u32,
    /// Parallelism after the cycle (equals current unless the job's outcome is `scale`).
    pub target_parallelism: u32,
    /// What the vertex scaler recommended (may differ from `target_parallelism` when blocked).
    pub recommended_parallelism: u32,
    /// The true processing rate used.
    pub true_processing_rate: TprRecord,
    /// Average target data rate (records/s).
    #[serde(with = "json_number")]
    pub target_rate: f64,
    /// Catch-up data rate (records/s).
    #[serde(with = "json_number")]
    pub catch_up_rate: f64,
    /// Average busy ratio (0..1).
    #[serde(with = "json_number")]
    pub load: f64,
    /// Scale-up rate threshold (TPR below it = above `utilization.max`).
    #[serde(with = "json_number")]
    pub scale_up_threshold: f64,
    /// Scale-down rate threshold (TPR above it = below `utilization.min`).
    #[serde(with = "json_number")]
    pub scale_down_threshold: f64,
    /// Utilization against the bounds.
    pub utilization: UtilizationBound,
    /// Root-cause role ([`autoscaler_metrics::root_cause`]); `None` when not classified (no
    /// `BACKPRESSURE` in the window, or not computed).
    pub role: Option<Role>,
    /// For `backpressured`: the bottleneck it is held back by.
    pub bottleneck: Option<String>,
    /// The reason code of the outcome.
    pub reason: VertexReason,
    /// For `scale_down_delayed`: when the delay runs out.
    pub until: Option<DateTime<Utc>>,
    /// The reason in words, with the numbers behind it.
    pub detail: String,
}

impl VertexRecord {
    /// How a person reads the vertex `id`: `name (id)`, or the id alone when it has no name.
    pub fn label(&self, id: &str) -> String {
        match self.name.as_deref() {
            Some(name) if !name.is_empty() && name != id => format!("{name} ({id})"),
            _ => id.to_owned(),
        }
    }
}

/// The job's utilization band.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct UtilizationBand {
    /// `utilization.target`.
    pub target: f64,
    /// The lower bound.
    pub min: f64,
    /// The upper bound.
    pub max: f64,
}

/// One cycle's decision, explained (see the [module docs](self) for the JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionRecord {
    /// [`DECISION_RECORD_FORMAT`].
    pub format: String,
    /// The job key, when known.
    pub job: Option<String>,
    /// The cycle's instant.
    pub at: DateTime<Utc>,
    /// What happened.
    pub outcome: JobOutcome,
    /// Why (see [`JobOutcome`]); `None` for `scale`.
    pub reason: Option<String>,
    /// One sentence for humans.
    pub summary: String,
    /// The restart time the cycle used, whole seconds.
    pub restart_time_s: u64,
    /// The utilization band.
    pub utilization: UtilizationBand,
    /// Bottleneck vertices in topological order (empty when none or not classified).
    pub bottlenecks: Vec<String>,
    /// The root-cause line added to the scaling report
    /// ([`Explanation::summary`](autoscaler_metrics::root_cause::Explanation::summary)), e.g.
    /// `bottleneck: expensive-keyed (busy 98%), backpressuring parse-map, Source: datagen`; `None`
    /// without a bottleneck.
    pub root_cause: Option<String>,
    /// Every topology vertex.
    pub vertices: BTreeMap<String, VertexRecord>,
}

/// What a decided cycle hands to [`DecisionRecord::decided`].
#[derive(Debug, Clone, Copy)]
pub struct RecordInput<'a> {
    /// The cycle's instant.
    pub at: DateTime<Utc>,
    /// The job key, when known.
    pub job: Option<&'a str>,
    /// The job graph.
    pub topology: &'a JobTopology,
    /// The evaluated metrics the decision read.
    pub evaluated: &'a EvaluatedMetrics,
    /// The decision.
    pub decision: &'a Decision,
    /// The job's options.
    pub options: &'a AutoScalerOptions,
    /// The restart time used.
    pub restart_time: Duration,
    /// The true-processing-rate estimates (`autoscaler_metrics::true_processing_rate_estimates`);
    /// may be empty (then the record says the source is unknown).
    pub tpr: &'a BTreeMap<VertexId, TprEstimate>,
}

fn band(options: &AutoScalerOptions, restart_time: Duration) -> UtilizationBand {
    let config = options.evaluation_config(restart_time);
    UtilizationBand {
        target: config.utilization_target,
        min: config.utilization_min,
        max: config.utilization_max,
    }
}

fn utilization_bound(tpr: f64, up: f64, down: f64) -> UtilizationBound {
    if tpr.is_nan() || up.is_nan() || down.is_nan() {
        UtilizationBound::Unknown
    } else if tpr < up {
        UtilizationBound::AboveMax
    } else if tpr > down {
        UtilizationBound::BelowMin
    } else {
        UtilizationBound::Within
    }
}

fn tpr_record(value: f64, estimate: Option<&TprEstimate>) -> TprRecord {
    let Some(e) = estimate else {
        return TprRecord {
            value,
            source: None,
            busy_time: f64::NAN,
            observed: f64::NAN,
            why: "estimates not recorded".to_owned(),
        };
    };
    let pct = e.switch_threshold * 100.0;
    let why = match e.source {
        TprSource::BusyTime if e.observed.is_nan() => "busy time: no observed rate".to_owned(),
        TprSource::BusyTime => format!(
            "busy time: {:.2} is within {pct:.0}% above the observed {:.2}",
            e.busy_time, e.observed
        ),
        TprSource::Observed if !e.busy_time.is_finite() => {
            format!("observed: the busy-time estimate is unusable ({})", e.busy_time)
        }
        TprSource::Observed => format!(
            "observed: the busy-time estimate {:.2} exceeds the observed {:.2} by more than {pct:.0}%",
            e.busy_time, e.observed
        ),
    };
    TprRecord {
        value,
        source: Some(e.source),
        busy_time: e.busy_time,
        observed: e.observed,
        why,
    }
}

/// The metric-derived part of a vertex record; reason and target filled by the caller.
fn vertex_base(
    current: u32,
    metrics: Option<&EvaluatedVertexMetrics>,
    estimate: Option<&TprEstimate>,
    reason: VertexReason,
    detail: String,
) -> VertexRecord {
    let get = |m: ScalingMetric, avg: bool| {
        metrics.map_or(f64::NAN, |ms| {
            let v = ms.get_or_absent(m);
            if avg { v.average } else { v.current }
        })
    };
    let tpr = get(ScalingMetric::TrueProcessingRate, true);
    let up = get(ScalingMetric::ScaleUpRateThreshold, false);
    let down = get(ScalingMetric::ScaleDownRateThreshold, false);
    VertexRecord {
        name: None,
        current_parallelism: current,
        target_parallelism: current,
        recommended_parallelism: current,
        true_processing_rate: tpr_record(tpr, estimate),
        target_rate: get(ScalingMetric::TargetDataRate, true),
        catch_up_rate: get(ScalingMetric::CatchUpDataRate, false),
        load: get(ScalingMetric::Load, true),
        scale_up_threshold: up,
        scale_down_threshold: down,
        utilization: utilization_bound(tpr, up, down),
        role: None,
        bottleneck: None,
        reason,
        until: None,
        detail,
    }
}

/// The reason of a vertex the vertex scaler examined, given the job's outcome.
fn vertex_reason(vd: &VertexDecision, outcome: DecisionOutcome) -> (VertexReason, Option<DateTime<Utc>>, String) {
    if vd.unmeasured {
        return (
            VertexReason::Unmeasured,
            None,
            "busy time not measured in the latest collection: not scaled this cycle".to_owned(),
        );
    }
    if vd.excluded {
        return (
            VertexReason::Excluded,
            None,
            "excluded by vertex.exclude.ids or finished".to_owned(),
        );
    }
    if vd.target != vd.current {
        // Formatted only for a vertex that would change: every cycle examines every vertex.
        let wanted = format!("{} -> {}", vd.current, vd.target);
        let direction = if vd.target > vd.current {
            VertexReason::ScaleUp
        } else {
            VertexReason::ScaleDown
        };
        return match outcome {
            DecisionOutcome::Scale => (direction, None, format!("parallelism {wanted}")),
            DecisionOutcome::NoChange(_) => (
                VertexReason::WithinBounds,
                None,
                format!("would change {wanted}, but no changing vertex is outside its utilization bounds"),
            ),
            DecisionOutcome::Blocked(block) => {
                let (reason, why) = match block {
                    BlockReason::ExcludedPeriod => (VertexReason::ExcludedPeriod, "the cycle is in an excluded period"),
                    BlockReason::ScalingDisabled => (VertexReason::ScalingDisabled, "scaling.enabled is false"),
                    BlockReason::MemoryPressure => (VertexReason::MemoryPressure, "memory pressure"),
                    BlockReason::ResourceQuota => (VertexReason::Quota, "the resource quota would be exceeded"),
                    BlockReason::ClusterResources => (
                        VertexReason::Quota,
                        "the cluster cannot schedule the TaskManagers it needs",
                    ),
                    BlockReason::Vetoed => (VertexReason::Veto, "a scaling executor vetoed it"),
                };
                (reason, None, format!("recommended {wanted}, blocked: {why}"))
            }
        };
    }
    match vd.constraint {
        VertexConstraint::NoEstimate => (
            VertexReason::NotReady,
            None,
            "no true processing rate or target rate to size it with".to_owned(),
        ),
        VertexConstraint::ScaleDownDelayed { until, recommended } => (
            VertexReason::ScaleDownDelayed,
            Some(until),
            format!(
                "scale-down {} -> {recommended} delayed by scale-down.interval until {}",
                vd.current,
                until.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
            ),
        ),
        VertexConstraint::IneffectiveScaling { recommended } => (
            VertexReason::IneffectiveScaling,
            None,
            format!(
                "scale-up {} -> {recommended} blocked: the last scale-up was ineffective",
                vd.current
            ),
        ),
        VertexConstraint::Alignment { computed } => (
            VertexReason::Alignment,
            None,
            format!(
                "{} -> {computed} cancelled by the key-group / partition alignment",
                vd.current
            ),
        ),
        VertexConstraint::MaxParallelism { computed, cap } => (
            VertexReason::MaxParallelism,
            None,
            format!("needs {computed}, but the maximum parallelism is {cap}"),
        ),
        VertexConstraint::None => (
            VertexReason::WithinBounds,
            None,
            "the computed parallelism is the current one".to_owned(),
        ),
    }
}

fn summary_of(outcome: DecisionOutcome, vertices: &BTreeMap<String, VertexRecord>) -> String {
    let changes: Vec<String> = vertices
        .iter()
        .filter(|(_, v)| v.recommended_parallelism != v.current_parallelism)
        .filter(|(_, v)| !matches!(v.reason, VertexReason::WithinBounds))
        .map(|(id, v)| {
            format!(
                "{} {} -> {}",
                v.label(id),
                v.current_parallelism,
                v.recommended_parallelism
            )
        })
        .collect();
    let count = |n: usize| {
        if n == 1 {
            "1 vertex".to_owned()
        } else {
            format!("{n} vertices")
        }
    };
    match outcome {
        DecisionOutcome::Scale => format!("scale {}: {}", count(changes.len()), changes.join(", ")),
        DecisionOutcome::NoChange(NoChangeReason::AtTarget) => "no change: every vertex is at its target".to_owned(),
        DecisionOutcome::NoChange(NoChangeReason::WithinBounds) => {
            "no change: the changes wanted are all within the utilization bounds".to_owned()
        }
        DecisionOutcome::Blocked(BlockReason::MemoryPressure) => {
            "blocked by memory pressure: no vertex is scaled".to_owned()
        }
        DecisionOutcome::Blocked(block) => {
            format!("blocked ({}): would scale {}", block.as_str(), changes.join(", "))
        }
    }
}

impl DecisionRecord {
    /// The record of a cycle that reached the decision stage.
    pub fn decided(input: &RecordInput<'_>) -> Self {
        let outcome = input.decision.outcome;
        let mut vertices = BTreeMap::new();
        for info in input.topology.vertices() {
            let metrics = input.evaluated.vertices.get(info.id.as_str());
            let estimate = input.tpr.get(info.id.as_str());
            let current = info.parallelism.get();
            let record = match (input.decision.vertices.get(info.id.as_str()), outcome) {
                (_, DecisionOutcome::Blocked(BlockReason::MemoryPressure)) => vertex_base(
                    current,
                    metrics,
                    estimate,
                    VertexReason::MemoryPressure,
                    "GC pressure or heap usage above its threshold blocks every change".to_owned(),
                ),
                (Some(vd), _) => {
                    let (reason, until, detail) = vertex_reason(vd, outcome);
                    let mut r = vertex_base(vd.current, metrics, estimate, reason, detail);
                    r.recommended_parallelism = vd.target;
                    r.target_parallelism = input
                        .decision
                        .parallelism
                        .get(info.id.as_str())
                        .copied()
                        .unwrap_or(vd.current);
                    r.until = until;
                    r
                }
                (None, _) => vertex_base(
                    current,
                    metrics,
                    estimate,
                    VertexReason::NotReady,
                    "not evaluated this cycle".to_owned(),
                ),
            };
            vertices.insert(
                info.id.to_string(),
                VertexRecord {
                    name: info.name.clone(),
                    ..record
                },
            );
        }
        Self {
            format: DECISION_RECORD_FORMAT.to_owned(),
            job: input.job.map(str::to_owned),
            at: input.at,
            outcome: match outcome {
                DecisionOutcome::Scale => JobOutcome::Scale,
                DecisionOutcome::NoChange(_) => JobOutcome::NoChange,
                DecisionOutcome::Blocked(_) => JobOutcome::Blocked,
            },
            reason: outcome.reason().map(str::to_owned),
            summary: summary_of(outcome, &vertices),
            restart_time_s: input.restart_time.as_secs(),
            utilization: band(input.options, input.restart_time),
            bottlenecks: Vec::new(),
            root_cause: None,
            vertices,
        }
    }

    /// The record of a cycle that stopped before the decision (`not_ready`, `disabled`,
    /// `job_not_running`, `error`): every topology vertex keeps its parallelism, with the evaluated
    /// metrics when the evaluation ran.
    #[allow(clippy::too_many_arguments)]
    pub fn undecided(
        at: DateTime<Utc>,
        job: Option<&str>,
        topology: Option<&JobTopology>,
        evaluated: Option<&EvaluatedMetrics>,
        options: &AutoScalerOptions,
        restart_time: Duration,
        outcome: JobOutcome,
        reason: &str,
    ) -> Self {
        let vertices = topology
            .map(|t| {
                t.vertices()
                    .iter()
                    .map(|info| {
                        let metrics = evaluated.and_then(|e| e.vertices.get(info.id.as_str()));
                        (
                            info.id.to_string(),
                            VertexRecord {
                                name: info.name.clone(),
                                ..vertex_base(
                                    info.parallelism.get(),
                                    metrics,
                                    None,
                                    VertexReason::NotReady,
                                    format!("no decision this cycle ({reason})"),
                                )
                            },
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        Self {
            format: DECISION_RECORD_FORMAT.to_owned(),
            job: job.map(str::to_owned),
            at,
            outcome,
            reason: Some(reason.to_owned()),
            summary: format!("{}: {reason}", outcome.as_str().replace('_', " ")),
            restart_time_s: restart_time.as_secs(),
            utilization: band(options, restart_time),
            bottlenecks: Vec::new(),
            root_cause: None,
            vertices,
        }
    }

    /// Turns a `scale` record into `blocked`/`veto`: `by` (a validator, a policy) refused the
    /// change. Records of other outcomes are left as they are.
    pub fn veto(&mut self, by: &str) {
        if self.outcome != JobOutcome::Scale {
            return;
        }
        self.outcome = JobOutcome::Blocked;
        self.reason = Some(BlockReason::Vetoed.as_str().to_owned());
        for v in self.vertices.values_mut() {
            if matches!(v.reason, VertexReason::ScaleUp | VertexReason::ScaleDown) {
                v.detail = format!(
                    "recommended {} -> {}, vetoed by {by}",
                    v.current_parallelism, v.recommended_parallelism
                );
                v.reason = VertexReason::Veto;
                v.target_parallelism = v.current_parallelism;
            }
        }
        self.summary = format!("blocked (veto by {by}): {}", self.summary);
    }

    /// Fills the root-cause fields from the classification of the evaluation `window`
    /// ([`autoscaler_metrics::root_cause::explain`]); leaves them empty when no sample of the
    /// window has `BACKPRESSURE`. What a live cycle and every replay record.
    pub fn explain_window(&mut self, topology: &JobTopology, window: &autoscaler_metrics::MetricHistory) {
        if let Some(explanation) = autoscaler_metrics::root_cause::explain(topology, window) {
            self.set_explanation(topology, &explanation);
        }
    }

    /// Fills the root-cause fields (`role`, `bottleneck`, `bottlenecks`, `root_cause`) from the
    /// classification of the window ([`autoscaler_metrics::root_cause::explain`]).
    pub fn set_explanation(&mut self, topology: &JobTopology, explanation: &Explanation) {
        for (id, e) in &explanation.vertices {
            if let Some(v) = self.vertices.get_mut(id.as_str()) {
                v.role = Some(e.role);
                v.bottleneck = e.bottleneck.as_ref().map(|b| b.to_string());
            }
        }
        self.bottlenecks = explanation.bottlenecks.iter().map(|b| b.to_string()).collect();
        self.root_cause = root_cause_line(topology, explanation);
    }
}

/// The root-cause line of a window's classification, `None` without a bottleneck: what a record's
/// `root_cause` holds and what the scaling report ends with.
pub fn root_cause_line(topology: &JobTopology, explanation: &Explanation) -> Option<String> {
    (!explanation.bottlenecks.is_empty()).then(|| explanation.summary(topology))
}
