//! Memory tuning inside the decision: where it runs, its event, the quota on the tuned memory, and
//! that it never changes a parallelism decision.

use autoscaler_core::scaling::{BlockReason, Decision, DecisionInput, DecisionOutcome};
use autoscaler_core::tuning::{CONFIGURATION_RECOMMENDATION_REASON, TOTAL_PROCESS_MEMORY};
use autoscaler_core::{DelayedScaleDown, ScalingHistory, config::AutoScalerOptions, config::Configuration};
use autoscaler_metrics::{
    EdgeSpec, EvaluatedMetrics, EvaluatedScalingMetric, EvaluatedVertexMetrics, JobTopology, ScalingMetric,
    ShipStrategy, VertexId, VertexSpec,
};
use chrono::{DateTime, TimeZone, Utc};
use proptest::prelude::*;
use std::time::Duration;

/// The decision without plugins (which cannot fail without the compat switch).
fn decide(
    input: &autoscaler_core::scaling::DecisionInput<'_>,
    state: &mut autoscaler_core::DelayedScaleDown,
) -> autoscaler_core::scaling::Decision {
    autoscaler_core::scaling::decide(input, &autoscaler_core::plugins::ResolvedPlugins::default(), state)
        .unwrap_or_else(|e| panic!("{e}"))
}

const MIB: f64 = 1_048_576.0;

fn id(i: usize) -> VertexId {
    VertexId::new(format!("v{i}"))
}

fn now() -> DateTime<Utc> {
    Utc.timestamp_opt(1_714_557_600, 0).single().unwrap_or_default()
}

fn options(entries: &[(&str, String)]) -> AutoScalerOptions {
    let conf: Configuration = entries.iter().map(|(k, v)| (*k, v.clone())).collect();
    let mut options = AutoScalerOptions::from_configuration(&conf).unwrap_or_else(|e| panic!("{e}"));
    // Scale-downs execute at once, so that every out-of-band vertex changes.
    options.scale_down_interval = Duration::ZERO;
    options
}

/// A vertex: parallelism, true processing rate, target rate (capacity at the default target).
#[derive(Debug, Clone, Copy)]
struct GenVertex {
    parallelism: u32,
    true_processing_rate: f64,
    target_rate: f64,
}

/// A chain of vertices, all in one slot sharing group, with memory usage.
#[derive(Debug, Clone)]
struct GenJob {
    vertices: Vec<GenVertex>,
    strategies: Vec<ShipStrategy>,
    heap_mb: f64,
    managed_mb: f64,
    metaspace_mb: f64,
    slots_used: u32,
}

impl GenJob {
    fn topology(&self) -> JobTopology {
        let specs = (0..self.vertices.len())
            .map(|i| {
                let mut spec = VertexSpec::new(id(i), self.vertices[i].parallelism, 720);
                spec.slot_sharing_group = Some("default".to_owned());
                spec
            })
            .collect();
        let edges = (1..self.vertices.len())
            .map(|i| EdgeSpec::new(id(i - 1), id(i), self.strategies[i - 1]))
            .collect();
        JobTopology::new(specs, edges).unwrap_or_else(|e| panic!("{e}"))
    }

    fn evaluated(&self) -> EvaluatedMetrics {
        let mut evaluated = EvaluatedMetrics::default();
        for (i, v) in self.vertices.iter().enumerate() {
            let mut m = EvaluatedVertexMetrics::new();
            m.insert(
                ScalingMetric::Parallelism,
                EvaluatedScalingMetric::of(f64::from(v.parallelism)),
            );
            m.insert(ScalingMetric::MaxParallelism, EvaluatedScalingMetric::of(720.0));
            m.insert(ScalingMetric::NumSourcePartitions, EvaluatedScalingMetric::of(0.0));
            m.insert(
                ScalingMetric::TrueProcessingRate,
                EvaluatedScalingMetric::avg(v.true_processing_rate),
            );
            m.insert(
                ScalingMetric::TargetDataRate,
                EvaluatedScalingMetric::avg(v.target_rate),
            );
            m.insert(ScalingMetric::CatchUpDataRate, EvaluatedScalingMetric::of(0.0));
            // Thresholds of the default band: out of band unless TPR lies in [target, target/0.4].
            m.insert(
                ScalingMetric::ScaleUpRateThreshold,
                EvaluatedScalingMetric::of(v.target_rate),
            );
            m.insert(
                ScalingMetric::ScaleDownRateThreshold,
                EvaluatedScalingMetric::of(v.target_rate / 0.4),
            );
            evaluated.vertices.insert(id(i), m);
        }
        let global = &mut evaluated.global;
        global.insert(
            ScalingMetric::HeapMemoryUsed,
            EvaluatedScalingMetric::avg(self.heap_mb * MIB),
        );
        global.insert(
            ScalingMetric::ManagedMemoryUsed,
            EvaluatedScalingMetric::avg(self.managed_mb * MIB),
        );
        global.insert(
            ScalingMetric::MetaspaceMemoryUsed,
            EvaluatedScalingMetric::avg(self.metaspace_mb * MIB),
        );
        global.insert(
            ScalingMetric::NumTaskSlotsUsed,
            EvaluatedScalingMetric::of(f64::from(self.slots_used)),
        );
        evaluated
    }
}

fn decide_job(job: &GenJob, options: &AutoScalerOptions, memory: Option<u64>) -> Decision {
    let topology = job.topology();
    let evaluated = job.evaluated();
    let history = ScalingHistory::new();
    decide(
        &DecisionInput {
            now: now(),
            topology: &topology,
            evaluated: &evaluated,
            scaling_history: &history,
            restart_time: Duration::ZERO,
            options,
            in_excluded_period: false,
            task_manager_cpu: None,
            task_manager_memory: memory,
        },
        &mut DelayedScaleDown::default(),
    )
}

/// src (1) -REBALANCE-> sink (2): the sink (TPR 100 at 2, target 1000) scales 2 -> 29 at
/// restart 0 (capacity 1000 / 0.7 = 1429, factor 14.29, ceil(28.57)); 1 GiB heap and 64 MiB
/// metaspace used, 2 slots in use (slot sharing), 1 slot per TM.
fn scaling_job() -> GenJob {
    GenJob {
        vertices: vec![
            GenVertex {
                parallelism: 2,
                true_processing_rate: 1500.0,
                target_rate: 1000.0,
            },
            GenVertex {
                parallelism: 2,
                true_processing_rate: 100.0,
                target_rate: 1000.0,
            },
        ],
        strategies: vec![ShipStrategy::Rebalance],
        heap_mb: 1024.0,
        managed_mb: 0.0,
        metaspace_mb: 64.0,
        slots_used: 2,
    }
}

#[test]
fn tuning_runs_for_an_executed_change_and_its_event_follows_the_report() {
    let job = scaling_job();
    let options = options(&[
        ("job.autoscaler.memory.tuning.enabled", "true".into()),
        (TOTAL_PROCESS_MEMORY, "8 gb".into()),
    ]);
    let decision = decide_job(&job, &options, Some(8 << 30));
    assert_eq!(decision.outcome, DecisionOutcome::Scale);
    assert_eq!(decision.parallelism[&id(1)], 29);
    let reasons: Vec<&str> = decision.events.iter().map(|e| e.reason.as_str()).collect();
    assert_eq!(reasons, [CONFIGURATION_RECOMMENDATION_REASON, "ScalingReport"]);
    let tuning = decision.memory_tuning.unwrap_or_else(|| panic!("tuning ran"));
    // Network for src(2) -REBALANCE-> sink(29): at src 29 x 2 + 8 = 66, at sink 2 x 2 + 8 = 12
    // segments; 78 x 32 kb = 2496 kb at 1 slot per TM.
    assert_eq!(tuning.changes.overrides["taskmanager.memory.network.max"], "2496 kb");
    // Metaspace (long)(64 mb x 1.2) = 80530636 bytes.
    assert_eq!(
        tuning.changes.overrides["taskmanager.memory.jvm-metaspace.size"],
        "80530636 bytes"
    );
    assert_eq!(tuning.outcome.map(|r| r.changes), Ok(tuning.changes));
}

#[test]
fn the_quota_checks_the_tuned_memory_when_tuning_is_enabled() {
    // 2 -> 29 slots at 1 per TM: 29 TMs. 29 x 8 gb = 232 gb exceeds a 100 gb quota, the tuned
    // ~1.7 gb TaskManagers (1 gb heap x 1.2 + overhead + off-heap + ...) fit.
    let job = scaling_job();
    let quota = ("job.autoscaler.quota.memory", "100 gb".to_owned());
    let process = (TOTAL_PROCESS_MEMORY, "8 gb".to_owned());
    let untuned = decide_job(&job, &options(&[quota.clone(), process.clone()]), Some(8 << 30));
    assert_eq!(untuned.outcome, DecisionOutcome::Blocked(BlockReason::ResourceQuota));
    // Blocked by the quota, tuning has still run and reported (disabled) what it recommends.
    let tuning = untuned.memory_tuning.unwrap_or_else(|| panic!("tuning ran"));
    assert!(tuning.changes.is_empty());
    let recommendation = tuning.outcome.unwrap_or_else(|e| panic!("{e}"));
    assert!(recommendation.message().contains("(automatic tuning is disabled)"));
    let reasons: Vec<&str> = untuned.events.iter().map(|e| e.reason.as_str()).collect();
    assert_eq!(reasons, [CONFIGURATION_RECOMMENDATION_REASON, "ResourceQuotaReached"]);
    let tuned_size = recommendation.sizes.total_process;
    assert!(tuned_size * 29 < 100 << 30, "{tuned_size}");

    let enabled = ("job.autoscaler.memory.tuning.enabled", "true".to_owned());
    let tuned = decide_job(&job, &options(&[quota, process, enabled]), Some(8 << 30));
    assert_eq!(tuned.outcome, DecisionOutcome::Scale);
}

#[test]
fn tuning_does_not_run_when_the_change_is_not_executed() {
    let job = scaling_job();
    let tuned = |extra: (&str, String)| {
        let options = options(&[
            ("job.autoscaler.memory.tuning.enabled", "true".into()),
            (TOTAL_PROCESS_MEMORY, "8 gb".into()),
            extra,
        ]);
        decide_job(&job, &options, Some(8 << 30))
    };
    let disabled = tuned(("job.autoscaler.scaling.enabled", "false".into()));
    assert_eq!(disabled.outcome, DecisionOutcome::Blocked(BlockReason::ScalingDisabled));
    assert!(disabled.memory_tuning.is_none());
    assert!(
        disabled
            .events
            .iter()
            .all(|e| e.reason != CONFIGURATION_RECOMMENDATION_REASON)
    );
    // Nothing to change: the sink in its band.
    let mut in_band = scaling_job();
    in_band.vertices[1].true_processing_rate = 1500.0;
    let options = options(&[
        ("job.autoscaler.memory.tuning.enabled", "true".into()),
        (TOTAL_PROCESS_MEMORY, "8 gb".into()),
    ]);
    let decision = decide_job(&in_band, &options, Some(8 << 30));
    assert!(matches!(decision.outcome, DecisionOutcome::NoChange(_)));
    assert!(decision.memory_tuning.is_none() && decision.events.is_empty());
}

fn vertex() -> impl Strategy<Value = GenVertex> {
    (1u32..60, 1.0f64..10_000.0, 0.0f64..10_000.0).prop_map(|(parallelism, true_processing_rate, target_rate)| {
        GenVertex {
            parallelism,
            true_processing_rate,
            target_rate,
        }
    })
}

fn strategy() -> impl Strategy<Value = ShipStrategy> {
    prop_oneof![
        Just(ShipStrategy::Forward),
        Just(ShipStrategy::Rescale),
        Just(ShipStrategy::Hash),
        Just(ShipStrategy::Rebalance),
        Just(ShipStrategy::Broadcast),
    ]
}

fn job() -> impl Strategy<Value = GenJob> {
    (
        prop::collection::vec(vertex(), 1..6),
        prop::collection::vec(strategy(), 5),
        (0.0f64..40_000.0, 0.0f64..40_000.0, 0.0f64..1000.0),
        0u32..100,
    )
        .prop_map(
            |(vertices, strategies, (heap_mb, managed_mb, metaspace_mb), slots_used)| GenJob {
                vertices,
                strategies,
                heap_mb,
                managed_mb,
                metaspace_mb,
                slots_used,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn tuning_never_changes_parallelism(
        job in job(),
        process_gb in 1u32..64,
        slots in 1u32..8,
        flags in any::<(bool, bool, bool)>(),
    ) {
        let (enabled, maximize, compensate) = flags;
        let plain = decide_job(&job, &options(&[]), None);
        let tuned_options = options(&[
            ("job.autoscaler.memory.tuning.enabled", enabled.to_string()),
            ("job.autoscaler.memory.tuning.maximize-managed-memory", maximize.to_string()),
            ("job.autoscaler.memory.tuning.scale-down-compensation.enabled", compensate.to_string()),
            (TOTAL_PROCESS_MEMORY, format!("{process_gb} gb")),
            ("taskmanager.numberOfTaskSlots", slots.to_string()),
        ]);
        let tuned = decide_job(&job, &tuned_options, Some(u64::from(process_gb) << 30));
        prop_assert_eq!(tuned.outcome, plain.outcome);
        prop_assert_eq!(&tuned.parallelism, &plain.parallelism);
        prop_assert_eq!(&tuned.summaries, &plain.summaries);
        // (Compared as text: an unset expected rate is NaN.)
        prop_assert_eq!(format!("{:?}", tuned.vertices), format!("{:?}", plain.vertices));
        // The only extra event is the recommendation, emitted exactly when tuning recommends.
        let others: Vec<_> = tuned
            .events
            .iter()
            .filter(|e| e.reason != CONFIGURATION_RECOMMENDATION_REASON)
            .cloned()
            .collect();
        prop_assert_eq!(&others, &plain.events);
        let recommended = tuned.memory_tuning.as_ref().is_some_and(|t| t.outcome.is_ok());
        prop_assert_eq!(tuned.events.len() - others.len(), usize::from(recommended));
        // Tuning runs exactly for an executed change (no quota is set here).
        prop_assert_eq!(tuned.memory_tuning.is_some(), tuned.outcome == DecisionOutcome::Scale);
        if let Some(tuning) = &tuned.memory_tuning {
            prop_assert_eq!(tuning.changes.is_empty(), !enabled || tuning.outcome.is_err());
        }
    }
}
