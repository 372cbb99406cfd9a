//! The decision record's reason codes: one hand-built decision per outcome, blocked or not, and
//! the code each vertex gets for it.

use autoscaler_core::record::{DecisionRecord, JobOutcome, RecordInput, UtilizationBound, VertexReason};
use autoscaler_core::scaling::{BlockReason, Decision, DecisionInput, DecisionOutcome};
use autoscaler_core::{
    DelayedScaleDown, ScalingHistory, ScalingSummary, config::AlignmentMode, config::AutoScalerOptions,
};
use autoscaler_metrics::root_cause::{Role, RootCauseThresholds, VertexSignals, classify};
use autoscaler_metrics::{
    EdgeSpec, EvaluatedMetrics, EvaluatedScalingMetric, EvaluatedVertexMetrics, JobTopology, ScalingMetric,
    ShipStrategy, TprEstimate, TprSource, VertexId, VertexSpec,
};
use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use std::collections::BTreeMap;
use std::time::Duration;

/// The decision without plugins (which cannot fail without the compat switch).
fn decide(
    input: &autoscaler_core::scaling::DecisionInput<'_>,
    state: &mut autoscaler_core::DelayedScaleDown,
) -> autoscaler_core::scaling::Decision {
    autoscaler_core::scaling::decide(input, &autoscaler_core::plugins::ResolvedPlugins::default(), state)
        .unwrap_or_else(|e| panic!("{e}"))
}

fn at(minutes: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_714_557_600, 0).single().unwrap_or_default() + TimeDelta::minutes(minutes)
}

/// Utilization target 1 and no catch-up (restart 0, catch-up 0): the target capacity is exactly
/// the target rate, so the scale factor is `target_rate / tpr`. No scale-down delay.
fn options() -> AutoScalerOptions {
    let mut options = AutoScalerOptions::default();
    options.utilization_target = 1.0;
    options.catch_up_duration = Duration::ZERO;
    options.restart_time = Duration::ZERO;
    options.scale_down_interval = Duration::ZERO;
    options.scale_up_max_factor = 100.0;
    options
}

/// Evaluated metrics: `tpr` and `target` rates, thresholds `(up, down)`.
fn metrics(
    parallelism: u32,
    max_parallelism: u32,
    tpr: f64,
    target: f64,
    bounds: (f64, f64),
) -> EvaluatedVertexMetrics {
    let mut m = EvaluatedVertexMetrics::new();
    m.insert(
        ScalingMetric::Parallelism,
        EvaluatedScalingMetric::of(f64::from(parallelism)),
    );
    m.insert(
        ScalingMetric::MaxParallelism,
        EvaluatedScalingMetric::of(f64::from(max_parallelism)),
    );
    m.insert(ScalingMetric::NumSourcePartitions, EvaluatedScalingMetric::of(0.0));
    m.insert(ScalingMetric::TrueProcessingRate, EvaluatedScalingMetric::avg(tpr));
    m.insert(ScalingMetric::TargetDataRate, EvaluatedScalingMetric::avg(target));
    m.insert(ScalingMetric::CatchUpDataRate, EvaluatedScalingMetric::of(0.0));
    m.insert(ScalingMetric::Load, EvaluatedScalingMetric::avg(0.5));
    m.insert(
        ScalingMetric::ScaleUpRateThreshold,
        EvaluatedScalingMetric::of(bounds.0),
    );
    m.insert(
        ScalingMetric::ScaleDownRateThreshold,
        EvaluatedScalingMetric::of(bounds.1),
    );
    m
}

struct Job {
    topology: JobTopology,
    evaluated: EvaluatedMetrics,
    history: ScalingHistory,
    options: AutoScalerOptions,
    in_excluded_period: bool,
    delayed: DelayedScaleDown,
    cpu: Option<f64>,
}

impl Job {
    /// src (2) -REBALANCE-> map (4) -HASH-> sink (2), all at max parallelism 720.
    /// map: tpr 1000, target 2000 -> sf 2 -> 8, outside (1000 < up 1500).
    /// src: tpr 1000, target 600 -> sf 0.6 -> ceil(1.2) = 2: unchanged.
    /// sink: tpr 1000, target 1000 -> 2 -> 2: unchanged.
    fn new() -> Self {
        let spec = |id: &str, p| {
            let mut s = VertexSpec::new(id, p, 720);
            s.slot_sharing_group = Some("default".to_owned());
            s
        };
        let topology = JobTopology::new(
            vec![spec("src", 2), spec("map", 4), spec("sink", 2)],
            vec![
                EdgeSpec::new("src", "map", ShipStrategy::Rebalance),
                EdgeSpec::new("map", "sink", ShipStrategy::Hash),
            ],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let mut evaluated = EvaluatedMetrics::default();
        let mut put = |id: &str, m| {
            evaluated.vertices.insert(VertexId::new(id), m);
        };
        put("src", metrics(2, 720, 1000.0, 600.0, (500.0, 3000.0)));
        put("map", metrics(4, 720, 1000.0, 2000.0, (1500.0, 3000.0)));
        put("sink", metrics(2, 720, 1000.0, 1000.0, (900.0, 3000.0)));
        Job {
            topology,
            evaluated,
            history: ScalingHistory::new(),
            options: options(),
            in_excluded_period: false,
            delayed: DelayedScaleDown::default(),
            cpu: None,
        }
    }

    fn set(&mut self, id: &str, m: EvaluatedVertexMetrics) {
        self.evaluated.vertices.insert(VertexId::new(id), m);
    }

    fn decide(&mut self) -> (Decision, DecisionRecord) {
        let decision = decide(
            &DecisionInput {
                now: at(0),
                topology: &self.topology,
                evaluated: &self.evaluated,
                scaling_history: &self.history,
                restart_time: Duration::ZERO,
                options: &self.options,
                in_excluded_period: self.in_excluded_period,
                task_manager_cpu: self.cpu,
                task_manager_memory: None,
            },
            &mut self.delayed,
        );
        let record = DecisionRecord::decided(&RecordInput {
            at: at(0),
            job: Some("orders"),
            topology: &self.topology,
            evaluated: &self.evaluated,
            decision: &decision,
            options: &self.options,
            restart_time: Duration::ZERO,
            tpr: &BTreeMap::new(),
        });
        (decision, record)
    }
}

fn reason(record: &DecisionRecord, id: &str) -> VertexReason {
    record.vertices[id].reason
}

#[test]
fn scale_up_and_ride_along_scale_down() {
    let mut job = Job::new();
    // src: target 400 -> sf 0.4 -> ceil(0.8) = 1, in band (1000 in [500, 3000]) but rides along.
    job.set("src", metrics(2, 720, 1000.0, 400.0, (500.0, 3000.0)));
    let (_, record) = job.decide();
    assert_eq!(record.outcome, JobOutcome::Scale);
    assert_eq!(record.reason, None);
    assert_eq!(reason(&record, "map"), VertexReason::ScaleUp);
    assert_eq!(reason(&record, "src"), VertexReason::ScaleDown);
    assert_eq!(reason(&record, "sink"), VertexReason::WithinBounds);
    let map = &record.vertices["map"];
    assert_eq!((map.current_parallelism, map.target_parallelism), (4, 8));
    assert_eq!(map.utilization, UtilizationBound::AboveMax);
    assert_eq!(record.vertices["sink"].utilization, UtilizationBound::Within);
    assert_eq!(record.summary, "scale 2 vertices: map 4 -> 8, src 2 -> 1");
    // Utilization target 1, default boundary 0.3: bounds 0.7 .. 1.3.
    assert_eq!(record.utilization.target, 1.0);
}

#[test]
fn within_bounds_change_is_no_change() {
    let mut job = Job::new();
    // map wants 8 but is inside its band (1000 >= up 900).
    job.set("map", metrics(4, 720, 1000.0, 2000.0, (900.0, 3000.0)));
    let (_, record) = job.decide();
    assert_eq!(record.outcome, JobOutcome::NoChange);
    assert_eq!(record.reason.as_deref(), Some("within_bounds"));
    assert_eq!(reason(&record, "map"), VertexReason::WithinBounds);
    assert_eq!(record.vertices["map"].recommended_parallelism, 8);
    assert_eq!(record.vertices["map"].target_parallelism, 4);
}

#[test]
fn excluded_period_blocks_every_wanted_change() {
    let mut job = Job::new();
    job.in_excluded_period = true;
    job.options.excluded_periods =
        vec![autoscaler_core::config::ExcludedPeriod::parse("* * * ? * *").expect("valid period")];
    let (_, record) = job.decide();
    assert_eq!(record.outcome, JobOutcome::Blocked);
    assert_eq!(record.reason.as_deref(), Some("excluded_period"));
    assert_eq!(reason(&record, "map"), VertexReason::ExcludedPeriod);
    assert_eq!(record.vertices["map"].target_parallelism, 4);
    assert_eq!(record.vertices["map"].recommended_parallelism, 8);
    assert_eq!(reason(&record, "sink"), VertexReason::WithinBounds);
}

#[test]
fn scaling_disabled_is_recommend_only() {
    let mut job = Job::new();
    job.options.scaling_enabled = false;
    let (_, record) = job.decide();
    assert_eq!(record.reason.as_deref(), Some("scaling_disabled"));
    assert_eq!(reason(&record, "map"), VertexReason::ScalingDisabled);
}

#[test]
fn memory_pressure_blocks_every_vertex() {
    let mut job = Job::new();
    job.evaluated
        .global
        .insert(ScalingMetric::GcPressure, EvaluatedScalingMetric::of(0.5));
    job.options.gc_pressure_threshold = 0.3;
    let (_, record) = job.decide();
    assert_eq!(record.outcome, JobOutcome::Blocked);
    assert_eq!(record.reason.as_deref(), Some("memory_pressure"));
    for id in ["src", "map", "sink"] {
        assert_eq!(reason(&record, id), VertexReason::MemoryPressure, "{id}");
    }
}

#[test]
fn quota_blocks_growth() {
    let mut job = Job::new();
    // Slot sharing group "default": 4 -> 8 slots, 1 slot per TM, 1 CPU per TM: 8 > 7.5.
    job.cpu = Some(1.0);
    job.options.quota_cpu = Some(7.5);
    let (_, record) = job.decide();
    assert_eq!(record.reason.as_deref(), Some("resource_quota"));
    assert_eq!(reason(&record, "map"), VertexReason::Quota);
}

#[test]
fn ineffective_scale_up_is_blocked() {
    let mut job = Job::new();
    job.options.scaling_effectiveness_detection_enabled = true;
    // Last scale-up 2 -> 4 expected 1000 -> 2000; now 1050: 50 / 1000 = 0.05 < 0.1.
    let mut last = metrics(2, 720, 1000.0, 2000.0, (1500.0, 3000.0));
    last.insert(
        ScalingMetric::ExpectedProcessingRate,
        EvaluatedScalingMetric::of(2000.0),
    );
    job.history.entry(VertexId::new("map")).or_default().insert(
        at(-10),
        ScalingSummary {
            current_parallelism: 2,
            new_parallelism: 4,
            metrics: last,
        },
    );
    job.set("map", metrics(4, 720, 1050.0, 2100.0, (1500.0, 3000.0)));
    let (decision, record) = job.decide();
    assert!(decision.events.iter().any(|e| e.reason == "IneffectiveScaling"));
    assert_eq!(reason(&record, "map"), VertexReason::IneffectiveScaling);
    assert_eq!(record.vertices["map"].target_parallelism, 4);
    assert!(
        record.vertices["map"].detail.contains("4 -> 8"),
        "{}",
        record.vertices["map"].detail
    );
    assert_eq!(record.outcome, JobOutcome::NoChange);
}

#[test]
fn legacy_alignment_cancels_the_change() {
    let mut job = Job::new();
    // Source with 35 partitions at 22, vertex.max-parallelism 30: tpr 2200, target 2450 ->
    // sf 1.1136, ceil(24.5) = 25; no divisor of 35 in [25, 30]; the legacy fallback gives 18 <= 22:
    // blocked (reference ScalingExecutorTest legacy alignment).
    let mut src = metrics(22, 128, 2200.0, 2450.0, (3000.0, 9000.0));
    src.insert(ScalingMetric::NumSourcePartitions, EvaluatedScalingMetric::of(35.0));
    job.set("src", src);
    job.topology = JobTopology::new(
        vec![
            VertexSpec::new("src", 22, 128),
            VertexSpec::new("map", 4, 720),
            VertexSpec::new("sink", 2, 720),
        ],
        vec![EdgeSpec::new("src", "map", ShipStrategy::Rebalance)],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    job.options.vertex_max_parallelism = 30;
    job.options.alignment_mode = AlignmentMode::LegacyEvenlySpread;
    job.set("map", metrics(4, 720, 1000.0, 1000.0, (900.0, 3000.0)));
    let (decision, record) = job.decide();
    assert!(decision.events.iter().any(|e| e.reason == "ScalingLimited"));
    assert_eq!(reason(&record, "src"), VertexReason::Alignment);
    assert!(
        record.vertices["src"].detail.contains("22 -> 25"),
        "{}",
        record.vertices["src"].detail
    );
}

#[test]
fn max_parallelism_blocks_a_scale_up_at_the_cap() {
    let mut job = Job::new();
    // map at its max parallelism 4 wants 8: capped to 4 = current.
    job.set("map", metrics(4, 4, 1000.0, 2000.0, (1500.0, 3000.0)));
    let (_, record) = job.decide();
    assert_eq!(reason(&record, "map"), VertexReason::MaxParallelism);
    assert_eq!(
        record.vertices["map"].detail,
        "needs 8, but the maximum parallelism is 4"
    );
    // Capped above current: still a scale-up (to the cap).
    job.set("map", metrics(4, 6, 1000.0, 2000.0, (1500.0, 3000.0)));
    let (_, record) = job.decide();
    assert_eq!(reason(&record, "map"), VertexReason::ScaleUp);
    assert_eq!(record.vertices["map"].target_parallelism, 6);
}

#[test]
fn delayed_scale_down_says_until_when() {
    let mut job = Job::new();
    job.options.scale_down_interval = Duration::from_secs(3600);
    // sink: target 250 -> sf 0.25 -> ceil(0.5) = 1, outside (1000 > down 600).
    job.set("sink", metrics(2, 720, 1000.0, 250.0, (200.0, 600.0)));
    job.set("map", metrics(4, 720, 1000.0, 1000.0, (900.0, 3000.0)));
    let (_, record) = job.decide();
    let sink = &record.vertices["sink"];
    assert_eq!(sink.reason, VertexReason::ScaleDownDelayed);
    assert_eq!(sink.until, Some(at(60)));
    assert_eq!(sink.utilization, UtilizationBound::BelowMin);
    assert_eq!(record.outcome, JobOutcome::NoChange);
    let json = serde_json::to_value(&record).unwrap_or_default();
    assert_eq!(json["vertices"]["sink"]["reason"], "scale_down_delayed");
    assert_eq!(json["vertices"]["sink"]["until"], "2024-05-01T11:00:00Z");
}

#[test]
fn veto_turns_a_scale_into_a_block() {
    let mut job = Job::new();
    let (_, mut record) = job.decide();
    record.veto("the change-freeze policy");
    assert_eq!(record.outcome, JobOutcome::Blocked);
    assert_eq!(record.reason.as_deref(), Some("vetoed"));
    assert_eq!(reason(&record, "map"), VertexReason::Veto);
    assert_eq!(record.vertices["map"].target_parallelism, 4);
    assert_eq!(
        record.vertices["map"].detail,
        "recommended 4 -> 8, vetoed by the change-freeze policy"
    );
    // A scaling executor's veto (BlockReason::Vetoed) reads the same.
    let mut job = Job::new();
    let (mut decision, _) = job.decide();
    decision.outcome = DecisionOutcome::Blocked(BlockReason::Vetoed);
    decision.parallelism.insert(VertexId::new("map"), 4);
    let record = DecisionRecord::decided(&RecordInput {
        at: at(0),
        job: None,
        topology: &job.topology,
        evaluated: &job.evaluated,
        decision: &decision,
        options: &job.options,
        restart_time: Duration::ZERO,
        tpr: &BTreeMap::new(),
    });
    assert_eq!(record.reason.as_deref(), Some("vetoed"));
    assert_eq!(reason(&record, "map"), VertexReason::Veto);
    assert_eq!(record.vertices["map"].target_parallelism, 4);
    // A veto of a no-change is no change.
    let mut job = Job::new();
    job.set("map", metrics(4, 720, 1000.0, 1000.0, (900.0, 3000.0)));
    let (_, mut record) = job.decide();
    record.veto("policy");
    assert_eq!(record.outcome, JobOutcome::NoChange);
}

#[test]
fn not_ready_cycles_and_vertices_without_estimate() {
    let job = Job::new();
    let record = DecisionRecord::undecided(
        at(0),
        Some("orders"),
        Some(&job.topology),
        None,
        &job.options,
        Duration::from_secs(300),
        JobOutcome::NotReady,
        "window_not_full",
    );
    assert_eq!(record.reason.as_deref(), Some("window_not_full"));
    assert_eq!(record.vertices.len(), 3);
    assert!(record.vertices.values().all(|v| v.reason == VertexReason::NotReady));
    assert_eq!(record.restart_time_s, 300);
    // A vertex whose TPR is unknown cannot be sized.
    let mut job = Job::new();
    job.set("sink", metrics(2, 720, f64::NAN, 1000.0, (900.0, 3000.0)));
    let (_, record) = job.decide();
    assert_eq!(reason(&record, "sink"), VertexReason::NotReady);
    assert_eq!(record.vertices["sink"].utilization, UtilizationBound::Unknown);
}

#[test]
fn excluded_vertex_is_never_scaled() {
    let mut job = Job::new();
    job.options.vertex_exclude_ids = vec!["map".to_owned()];
    let (_, record) = job.decide();
    assert_eq!(reason(&record, "map"), VertexReason::Excluded);
}

#[test]
fn tpr_source_is_explained() {
    let mut job = Job::new();
    let decision = decide(
        &DecisionInput {
            now: at(0),
            topology: &job.topology,
            evaluated: &job.evaluated,
            scaling_history: &job.history,
            restart_time: Duration::ZERO,
            options: &job.options,
            in_excluded_period: false,
            task_manager_cpu: None,
            task_manager_memory: None,
        },
        &mut job.delayed,
    );
    let estimate = |busy_time, observed, source| TprEstimate {
        busy_time,
        observed,
        source,
        switch_threshold: 0.15,
    };
    let tpr = BTreeMap::from([
        (VertexId::new("src"), estimate(1500.0, 1000.0, TprSource::Observed)),
        (VertexId::new("map"), estimate(1000.0, f64::NAN, TprSource::BusyTime)),
        (
            VertexId::new("sink"),
            estimate(f64::INFINITY, 1000.0, TprSource::Observed),
        ),
    ]);
    let record = DecisionRecord::decided(&RecordInput {
        at: at(0),
        job: None,
        topology: &job.topology,
        evaluated: &job.evaluated,
        decision: &decision,
        options: &job.options,
        restart_time: Duration::ZERO,
        tpr: &tpr,
    });
    let why = |id: &str| record.vertices[id].true_processing_rate.why.clone();
    // 1500 > 1000 x 1.15.
    assert_eq!(
        why("src"),
        "observed: the busy-time estimate 1500.00 exceeds the observed 1000.00 by more than 15%"
    );
    assert_eq!(why("map"), "busy time: no observed rate");
    assert_eq!(why("sink"), "observed: the busy-time estimate is unusable (inf)");
    let json = serde_json::to_value(&record).unwrap_or_default();
    assert_eq!(
        json["vertices"]["sink"]["true_processing_rate"]["busy_time"],
        "Infinity"
    );
    assert_eq!(json["vertices"]["src"]["true_processing_rate"]["source"], "observed");
}

#[test]
fn explanation_fills_roles_and_the_root_cause_line_and_json_round_trips() {
    let mut job = Job::new();
    let (_, mut record) = job.decide();
    // src and map backpressured (B > 0.1), the sink busy 98% and not backpressured: the culprit.
    let signals = BTreeMap::from([
        (
            VertexId::new("src"),
            VertexSignals {
                load: 0.1,
                backpressure: 0.85,
            },
        ),
        (
            VertexId::new("map"),
            VertexSignals {
                load: 0.05,
                backpressure: 0.9,
            },
        ),
        (
            VertexId::new("sink"),
            VertexSignals {
                load: 0.984,
                backpressure: 0.0,
            },
        ),
    ]);
    let explanation = classify(&job.topology, &signals, &RootCauseThresholds::default());
    record.set_explanation(&job.topology, &explanation);
    assert_eq!(record.bottlenecks, ["sink"]);
    assert_eq!(
        record.root_cause.as_deref(),
        Some("bottleneck: sink (busy 98%), backpressuring src, map")
    );
    assert_eq!(record.vertices["map"].role, Some(Role::Backpressured));
    assert_eq!(record.vertices["map"].bottleneck.as_deref(), Some("sink"));
    assert_eq!(record.vertices["sink"].role, Some(Role::Bottleneck));
    let text = serde_json::to_string(&record).unwrap_or_default();
    let back: DecisionRecord = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    // NaN != NaN: compare the re-serialized text.
    assert_eq!(serde_json::to_string(&back).unwrap_or_default(), text);
    let json: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    assert_eq!(json["format"], "flink-autoscaler-decision/1");
    assert_eq!(json["vertices"]["src"]["role"], "backpressured");
    // A healthy job: roles, no bottleneck, no line.
    let healthy = BTreeMap::from([
        (
            VertexId::new("src"),
            VertexSignals {
                load: 0.3,
                backpressure: 0.0,
            },
        ),
        (
            VertexId::new("map"),
            VertexSignals {
                load: 0.3,
                backpressure: 0.0,
            },
        ),
        (
            VertexId::new("sink"),
            VertexSignals {
                load: 0.3,
                backpressure: 0.0,
            },
        ),
    ]);
    let (_, mut record) = job.decide();
    record.set_explanation(
        &job.topology,
        &classify(&job.topology, &healthy, &RootCauseThresholds::default()),
    );
    assert!(record.bottlenecks.is_empty());
    assert_eq!(record.root_cause, None);
    assert_eq!(record.vertices["sink"].role, Some(Role::Ok));
}

/// Every code of the record, as the JSON and `as_str` spell it: one table, so a renamed or
/// re-serialized code fails here (the codes are part of the stable format).
#[test]
fn every_reason_and_outcome_code_is_spelled_alike_in_json_and_text() {
    let vertex_codes = [
        (VertexReason::WithinBounds, "within_bounds"),
        (VertexReason::ScaleUp, "scale_up"),
        (VertexReason::ScaleDown, "scale_down"),
        (VertexReason::ScaleDownDelayed, "scale_down_delayed"),
        (VertexReason::ExcludedPeriod, "excluded_period"),
        (VertexReason::ScalingDisabled, "scaling_disabled"),
        (VertexReason::MemoryPressure, "memory_pressure"),
        (VertexReason::Quota, "quota"),
        (VertexReason::IneffectiveScaling, "ineffective_scaling"),
        (VertexReason::Alignment, "alignment"),
        (VertexReason::MaxParallelism, "max_parallelism"),
        (VertexReason::Veto, "veto"),
        (VertexReason::NotReady, "not_ready"),
        (VertexReason::Excluded, "excluded"),
    ];
    for (reason, code) in vertex_codes {
        assert_eq!(reason.as_str(), code);
        assert_eq!(serde_json::to_value(reason).ok(), Some(serde_json::Value::from(code)));
        let back: VertexReason =
            serde_json::from_value(serde_json::Value::from(code)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, reason);
    }
    let job_codes = [
        (JobOutcome::Scale, "scale"),
        (JobOutcome::NoChange, "no_change"),
        (JobOutcome::Blocked, "blocked"),
        (JobOutcome::NotReady, "not_ready"),
        (JobOutcome::Disabled, "disabled"),
        (JobOutcome::JobNotRunning, "job_not_running"),
        (JobOutcome::Error, "error"),
        (JobOutcome::Misconfigured, "misconfigured"),
    ];
    for (outcome, code) in job_codes {
        assert_eq!(outcome.as_str(), code);
        assert_eq!(serde_json::to_value(outcome).ok(), Some(serde_json::Value::from(code)));
    }
}
