//! Memory tuning tests. The numbers of `reference_vectors_*` are those of the reference's
//! `MemoryTuningTest.testMemoryTuning`, re-derived by hand below.

use super::*;
use autoscaler_metrics::{EdgeSpec, EvaluatedScalingMetric, EvaluatedVertexMetrics, VertexId, VertexMap, VertexSpec};
use proptest::prelude::*;
use std::collections::BTreeMap;

const KIB: i64 = 1 << 10;
const MIB: i64 = 1 << 20;
const GIB: i64 = 1 << 30;

fn options(entries: &[(&str, &str)]) -> AutoScalerOptions {
    AutoScalerOptions::from_configuration(&entries.iter().copied().collect()).unwrap_or_else(|e| panic!("{e}"))
}

fn topology(vertices: &[(&str, u32)], edges: &[(&str, &str, ShipStrategy)]) -> JobTopology {
    JobTopology::new(
        vertices.iter().map(|(id, p)| VertexSpec::new(*id, *p, 1000)).collect(),
        edges.iter().map(|(f, t, s)| EdgeSpec::new(*f, *t, *s)).collect(),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

fn summaries(changes: &[(&str, u32, u32)]) -> VertexMap<ScalingSummary> {
    changes
        .iter()
        .map(|(id, current, new)| {
            (
                VertexId::new(*id),
                ScalingSummary {
                    current_parallelism: *current,
                    new_parallelism: *new,
                    metrics: EvaluatedVertexMetrics::new(),
                },
            )
        })
        .collect()
}

/// Evaluated metrics with every topology vertex at its topology parallelism and the given
/// global averages (heap, managed, metaspace in bytes) and current slots used.
fn evaluated(topology: &JobTopology, heap: f64, managed: f64, metaspace: f64, slots_used: f64) -> EvaluatedMetrics {
    let mut e = EvaluatedMetrics::default();
    for v in topology.vertices() {
        let mut m = EvaluatedVertexMetrics::new();
        m.insert(
            ScalingMetric::Parallelism,
            EvaluatedScalingMetric::of(f64::from(v.parallelism.get())),
        );
        e.vertices.insert(v.id.clone(), m);
    }
    e.global
        .insert(ScalingMetric::HeapMemoryUsed, EvaluatedScalingMetric::avg(heap));
    e.global
        .insert(ScalingMetric::ManagedMemoryUsed, EvaluatedScalingMetric::avg(managed));
    e.global.insert(
        ScalingMetric::MetaspaceMemoryUsed,
        EvaluatedScalingMetric::avg(metaspace),
    );
    e.global
        .insert(ScalingMetric::NumTaskSlotsUsed, EvaluatedScalingMetric::of(slots_used));
    e
}

fn tune(
    options: &AutoScalerOptions,
    memory: Option<u64>,
    topology: &JobTopology,
    evaluated: &EvaluatedMetrics,
    summaries: &VertexMap<ScalingSummary>,
) -> MemoryTuning {
    tune_task_manager_memory(&TuningInput {
        options,
        task_manager_memory: memory,
        topology,
        evaluated,
        summaries,
    })
}

fn overrides(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

/// The reference test's job: v1 (50) -REBALANCE-> v2 (50), scaled to 25 and 10, 5 slots per TM,
/// a 30 gb TaskManager; heap 5096 mb, managed 10000 mb, metaspace 100 mb used, 50 slots used.
struct ReferenceJob {
    topology: JobTopology,
    evaluated: EvaluatedMetrics,
    summaries: VertexMap<ScalingSummary>,
}

impl ReferenceJob {
    fn new() -> Self {
        let topology = topology(&[("v1", 50), ("v2", 50)], &[("v1", "v2", ShipStrategy::Rebalance)]);
        let evaluated = evaluated(
            &topology,
            (5096 * MIB) as f64,
            (10_000 * MIB) as f64,
            (100 * MIB) as f64,
            50.0,
        );
        Self {
            topology,
            evaluated,
            summaries: summaries(&[("v1", 50, 25), ("v2", 50, 10)]),
        }
    }

    fn tune(&self, extra: &[(&str, &str)]) -> MemoryTuning {
        let mut entries = vec![
            ("job.autoscaler.memory.tuning.enabled", "true"),
            ("job.autoscaler.memory.tuning.scale-down-compensation.enabled", "false"),
            ("taskmanager.numberOfTaskSlots", "5"),
            ("taskmanager.memory.process.size", "30 gb"),
        ];
        entries.extend_from_slice(extra);
        tune(
            &options(&entries),
            Some(30 << 30),
            &self.topology,
            &self.evaluated,
            &self.summaries,
        )
    }
}

// The spec of a 30 gb process (see model::tests::process_size_path): overhead 1 gb, metaspace
// 256 mb, total Flink 30870077440, managed M0 12348031160, network N0 3087007790, heap
// H0 = 128 mb + 15166603034 = 15300820762, framework off-heap 128 mb.
//
// Budget 30 gb = 32212254720: off-heap 134217728 and overhead 1073741824 leave 31004295168.
// Network: v1's output to v2 at 25 -> 10 under REBALANCE: 10 x 2 + 8 = 28 segments; v2's input
// from v1: 25 x 2 + 8 = 58; (28 + 58) x 32 kb x 5 slots = 14090240 = 13760 kb.
// Metaspace (long)(104857600 x 1.2) = 125829120 = 120 mb. Heap (long)(5343543296 x 1.2)
// = 6412251955.
#[test]
fn reference_vectors_default_managed() {
    // Managed in use, not maximized: M0 = 12348031160. Total = 134217728 + 1073741824 +
    // 14090240 + 125829120 + 6412251955 + 12348031160 = 20108162027.
    // Flink memory = 30870077440 + (6412251955 − 15300820762) + 0 + (14090240 − 3087007790)
    // = 18908591083; managed fraction 12348031160 / 18908591083 = 0.65303... -> 0.654.
    // Overhead fraction 1073741824 / 20108162027 = 0.053398... -> 0.054.
    let job = ReferenceJob::new();
    let tuning = job.tune(&[]);
    assert_eq!(
        tuning.changes.overrides,
        overrides(&[
            (MANAGED_MEMORY_FRACTION, "0.654"),
            (NETWORK_MEMORY_MIN, "13760 kb"),
            (NETWORK_MEMORY_MAX, "13760 kb"),
            (JVM_METASPACE, "120 mb"),
            (JVM_OVERHEAD_FRACTION, "0.054"),
            (FRAMEWORK_HEAP_MEMORY, "0 bytes"),
            (TOTAL_PROCESS_MEMORY, "20108162027 bytes"),
        ])
    );
    let removals: Vec<&str> = tuning.changes.removals.iter().map(String::as_str).collect();
    assert_eq!(
        removals,
        [
            "taskmanager.memory.flink.size",
            "taskmanager.memory.managed.size",
            "taskmanager.memory.size",
            "taskmanager.memory.task.heap.size"
        ]
    );
    let r = tuning.outcome.as_ref().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        r.sizes,
        TunedMemory {
            heap: 6_412_251_955,
            managed: 12_348_031_160,
            network: 14_090_240,
            metaspace: 125_829_120,
            overhead: GIB,
            total_process: 20_108_162_027,
            total_flink: 18_908_591_083,
        }
    );
    assert_eq!(
        r.message(),
        "Memory tuning recommends the following configuration (automatic tuning is enabled):\n\
         taskmanager.memory.framework.heap.size: 0 bytes\n\
         taskmanager.memory.jvm-metaspace.size: 120 mb\n\
         taskmanager.memory.jvm-overhead.fraction: 0.054\n\
         taskmanager.memory.managed.fraction: 0.654\n\
         taskmanager.memory.network.max: 13760 kb\n\
         taskmanager.memory.network.min: 13760 kb\n\
         taskmanager.memory.process.size: 20108162027 bytes\n\
         Remove the following config entries if present: [taskmanager.memory.flink.size, \
         taskmanager.memory.managed.size, taskmanager.memory.size, taskmanager.memory.task.heap.size]"
    );
    let event = r.event(&options(&[("job.autoscaler.scaling.event.interval", "5 min")]));
    assert_eq!(event.reason, "Configuration recommendation");
    assert_eq!(event.event_type, EventType::Normal);
    assert_eq!(event.message_key.as_deref(), Some("MemoryTuning"));
    assert_eq!(event.interval, Some(std::time::Duration::from_secs(300)));
    assert_eq!(
        r.gauges()[0],
        (
            "MemoryTuning.taskmanager.memory.process.size".to_owned(),
            20_108_162_027.0
        )
    );
}

#[test]
fn reference_vectors_maximized_managed() {
    // Managed takes everything left: 31004295168 − 14090240 − 125829120 − 6412251955
    // = 24452123853; the whole 30 gb is used. Fraction 24452123853 / (30870077440 − 8888568807
    // + 12104092693 − 3072917550 = 31012683776) = 0.78846... -> 0.789; overhead 1 gb / 30 gb
    // = 0.0333... -> 0.034.
    let tuning = ReferenceJob::new().tune(&[("job.autoscaler.memory.tuning.maximize-managed-memory", "true")]);
    assert_eq!(
        tuning.changes.overrides,
        overrides(&[
            (MANAGED_MEMORY_FRACTION, "0.789"),
            (NETWORK_MEMORY_MIN, "13760 kb"),
            (NETWORK_MEMORY_MAX, "13760 kb"),
            (JVM_METASPACE, "120 mb"),
            (JVM_OVERHEAD_FRACTION, "0.034"),
            (FRAMEWORK_HEAP_MEMORY, "0 bytes"),
            (TOTAL_PROCESS_MEMORY, "30 gb"),
        ])
    );
}

#[test]
fn reference_vectors_unused_managed_memory_and_compensation() {
    // No managed memory in use: managed 0 whatever the flag. Total = 134217728 + 1073741824 +
    // 14090240 + 125829120 + 6412251955 = 7760130867; overhead 1 gb / that = 0.1383... -> 0.139.
    let mut job = ReferenceJob::new();
    job.evaluated
        .global
        .insert(ScalingMetric::ManagedMemoryUsed, EvaluatedScalingMetric::avg(0.0));
    let maximize = ("job.autoscaler.memory.tuning.maximize-managed-memory", "true");
    let tuning = job.tune(&[maximize]);
    assert_eq!(tuning.changes.overrides[MANAGED_MEMORY_FRACTION], "0.0");
    assert_eq!(tuning.changes.overrides[JVM_OVERHEAD_FRACTION], "0.139");
    assert_eq!(tuning.changes.overrides[TOTAL_PROCESS_MEMORY], "7760130867 bytes");

    // Compensation: 50 slots used = the largest current parallelism (slot sharing), so 25 slots
    // after (the largest new parallelism); at 5 per TM 10 TMs become 5: factor 2, the heap
    // doubles to 12824503910. Total 7760130867 + 6412251955 = 14172382822; overhead
    // 1073741824 / 14172382822 = 0.0757... -> 0.076.
    let compensate = ("job.autoscaler.memory.tuning.scale-down-compensation.enabled", "true");
    let tuning = job.tune(&[maximize, compensate]);
    assert_eq!(tuning.changes.overrides[TOTAL_PROCESS_MEMORY], "14172382822 bytes");
    assert_eq!(tuning.changes.overrides[JVM_OVERHEAD_FRACTION], "0.076");
    assert_eq!(tuning.outcome.map(|r| r.sizes.heap), Ok(12_824_503_910));

    // Usage beyond the memory: metaspace (long)(268435456 x 1.2) = 322122547 is served before
    // the heap, which takes the rest 31004295168 − 14090240 − 322122547 = 30668082381 (its
    // compensation then finds nothing left). The whole 30 gb is used.
    job.evaluated.global.insert(
        ScalingMetric::HeapMemoryUsed,
        EvaluatedScalingMetric::avg(30_812_254_720.0),
    );
    job.evaluated.global.insert(
        ScalingMetric::MetaspaceMemoryUsed,
        EvaluatedScalingMetric::avg(268_435_456.0),
    );
    let tuning = job.tune(&[maximize, compensate]);
    assert_eq!(
        tuning.changes.overrides,
        overrides(&[
            (MANAGED_MEMORY_FRACTION, "0.0"),
            (NETWORK_MEMORY_MIN, "13760 kb"),
            (NETWORK_MEMORY_MAX, "13760 kb"),
            (JVM_METASPACE, "322122547 bytes"),
            (JVM_OVERHEAD_FRACTION, "0.034"),
            (FRAMEWORK_HEAP_MEMORY, "0 bytes"),
            (TOTAL_PROCESS_MEMORY, "30 gb"),
        ])
    );
    assert_eq!(tuning.outcome.map(|r| r.sizes.heap), Ok(30_668_082_381));

    // Disabled: the recommendation is the same, the returned changes are empty.
    let tuning = job.tune(&[maximize, compensate, ("job.autoscaler.memory.tuning.enabled", "false")]);
    assert!(tuning.changes.is_empty());
    let r = tuning.outcome.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.changes.overrides[TOTAL_PROCESS_MEMORY], "30 gb");
    assert!(
        r.message()
            .starts_with("Memory tuning recommends the following configuration (automatic tuning is disabled):\n")
    );
}

#[test]
fn the_budget_serves_pools_in_order() {
    // A 2 gb process: overhead floor(2147483648 x 0.10000000149011612) = 214748368 (inside
    // [192 mb, 1 gb]); spec managed 665719939. Budget 2 gb − 128 mb − 214748368 = 1798517552.
    // No edges: no network. Metaspace asks (long)(1 gb x 1.2) = 1288490188 and gets it, the
    // heap asks as much and gets the remaining 510027364, managed memory (in use) gets nothing.
    // Overhead fraction 214748368 / 2 gb = 0.1000000037 -> 0.101 (ceiling).
    let topology = topology(&[("solo", 4)], &[]);
    let evaluated = evaluated(&topology, GIB as f64, 1.0, GIB as f64, 4.0);
    let options = options(&[
        ("job.autoscaler.memory.tuning.enabled", "true"),
        ("taskmanager.memory.process.size", "2 gb"),
    ]);
    let tuning = tune(
        &options,
        Some(2 << 30),
        &topology,
        &evaluated,
        &summaries(&[("solo", 4, 2)]),
    );
    let r = tuning.outcome.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.spec.overhead, 214_748_368);
    assert_eq!(
        (r.sizes.network, r.sizes.metaspace, r.sizes.heap, r.sizes.managed),
        (0, 1_288_490_188, 510_027_364, 0)
    );
    assert_eq!(r.sizes.total_process, 2 * GIB);
    assert_eq!(r.changes.overrides[JVM_OVERHEAD_FRACTION], "0.101");
    assert_eq!(r.changes.overrides[NETWORK_MEMORY_MAX], "0 bytes");
    assert_eq!(r.changes.overrides[MANAGED_MEMORY_FRACTION], "0.0");
}

#[test]
fn the_budget_is_the_context_memory_not_the_configured_size() {
    // Configured 30 gb, but the context reports 1 gb: off-heap 128 mb and overhead 1 gb
    // (the spec's, from the 30 gb) already exceed it, so nothing else gets memory and the
    // total is the whole 1 gb.
    let job = ReferenceJob::new();
    let options = options(&[
        ("job.autoscaler.memory.tuning.enabled", "true"),
        ("taskmanager.memory.process.size", "30 gb"),
    ]);
    let tuning = tune(&options, Some(1 << 30), &job.topology, &job.evaluated, &job.summaries);
    let r = tuning.outcome.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((r.sizes.heap, r.sizes.network, r.sizes.metaspace), (0, 0, 0));
    assert_eq!(r.changes.overrides[TOTAL_PROCESS_MEMORY], "1 gb");
    assert_eq!(r.changes.overrides[JVM_OVERHEAD_FRACTION], "1.0");
}

#[test]
fn network_need_counts_every_edge_at_both_ends() {
    // a(2) -FORWARD-> b(2) -RESCALE-> c(3) -HASH-> d(4), a -BROADCAST-> d, 2 buffers per
    // channel + 8 floating per gate:
    //   a->b FORWARD equal:   at a 2 + 8 = 10,              at b 10
    //   b->c RESCALE:         at b ceil(3/2) x 2 + 8 = 12,  at c ceil(2/3) x 2 + 8 = 10
    //   c->d HASH:            at c 4 x 2 + 8 = 16,          at d 3 x 2 + 8 = 14
    //   a->d BROADCAST:       at a 4 x 2 + 8 = 16,          at d 2 x 2 + 8 = 12
    // 100 segments x 32 kb x 2 slots = 6553600 = 6400 kb.
    let t = topology(
        &[("a", 2), ("b", 2), ("c", 3), ("d", 4)],
        &[
            ("a", "b", ShipStrategy::Forward),
            ("b", "c", ShipStrategy::Rescale),
            ("c", "d", ShipStrategy::Hash),
            ("a", "d", ShipStrategy::Broadcast),
        ],
    );
    let model = MemoryModelOptions::default();
    assert_eq!(network_memory_need(&t, &[2, 2, 3, 4], &model, 2), 6_553_600);
    assert_eq!(format_memory_size(6_553_600), "6400 kb");
    // A FORWARD edge between different parallelisms is sized like RESCALE (the rescale API can
    // turn one into the other): a(2) -> b(5): at a ceil(5/2) x 2 + 8 = 14, at b ceil(2/5) x 2 + 8
    // = 10 instead of 10 + 10; the rest as above: 100 − 20 + 24 = 104 segments, but b's RESCALE
    // to c now reads 5 -> 3: at b ceil(3/5) x 2 + 8 = 10, at c ceil(5/3) x 2 + 8 = 12, so
    // 104 − 22 + 22 = 104 segments x 32 kb x 2 = 6815744.
    assert_eq!(network_memory_need(&t, &[2, 5, 3, 4], &model, 2), 6_815_744);
    // Each strategy class on its own (the reference's calculateNetworkSegmentNumber cases).
    assert_eq!(network_segments(10, 10, ShipStrategy::Forward, 2, 8), 10);
    assert_eq!(network_segments(10, 15, ShipStrategy::Forward, 2, 8), 12);
    assert_eq!(network_segments(10, 15, ShipStrategy::Rescale, 2, 8), 12);
    assert_eq!(network_segments(10, 10, ShipStrategy::Rescale, 2, 8), 10);
    for other in [
        ShipStrategy::Rebalance,
        ShipStrategy::Hash,
        ShipStrategy::Broadcast,
        ShipStrategy::Global,
        ShipStrategy::Custom,
        ShipStrategy::Unknown,
    ] {
        assert_eq!(network_segments(10, 15, other, 2, 8), 38, "{other:?}");
        assert_eq!(network_segments(10, 10, other, 2, 8), 28, "{other:?}");
    }
    // Configured buffers: 4 per channel, 16 floating, 64 kb segments, 1 slot:
    // a->b: 4 + 16 = 20 at each end -> 40 x 64 kb.
    let t = topology(&[("a", 3), ("b", 3)], &[("a", "b", ShipStrategy::Forward)]);
    let model = options(&[
        ("taskmanager.network.memory.buffers-per-channel", "4"),
        ("taskmanager.network.memory.floating-buffers-per-gate", "16"),
        ("taskmanager.memory.segment-size", "64 kb"),
    ])
    .memory_model;
    assert_eq!(network_memory_need(&t, &[3, 3], &model, 1), 40 * 64 * KIB);
}

#[test]
fn new_parallelisms_come_from_summaries_then_evaluated_then_topology() {
    let t = topology(&[("a", 2), ("b", 3), ("c", 4)], &[]);
    let mut e = evaluated(&t, 0.0, 0.0, 0.0, 0.0);
    // c was not evaluated (decision-only input listing a subset).
    e.vertices.remove(&VertexId::new("c"));
    // b's evaluated parallelism differs from the topology's and wins.
    e.vertices.insert(VertexId::new("b"), {
        let mut m = EvaluatedVertexMetrics::new();
        m.insert(ScalingMetric::Parallelism, EvaluatedScalingMetric::of(6.0));
        m
    });
    assert_eq!(current_parallelisms(&t, &e), [2, 6, 4]);
    assert_eq!(new_parallelisms(&t, &e, &summaries(&[("a", 2, 7)])), [7, 6, 4]);
}

#[test]
fn scale_down_compensation_follows_the_task_managers() {
    // The reference's MemoryScalingTest: two vertices 20 -> 10 with 20 slots used (slot sharing):
    // 10 slots after, factor 20 / 10 = 2; a 10 gb heap grows to 20 gb inside a 30 gb budget.
    assert_eq!(estimate_task_slots_after_rescale(&[20, 20], &[10, 10], 20), 10);
    assert_eq!(scale_down_compensation_factor(20, 10, 1), 2.0);
    let mut budget = MemoryBudget::new(30 * GIB);
    let heap = 10 * GIB;
    assert_eq!(heap + budget.take(java_long(2.0 * heap as f64) - heap), 20 * GIB);
    // Scaling up never takes memory away.
    assert_eq!(estimate_task_slots_after_rescale(&[10, 10], &[20, 20], 10), 20);
    assert_eq!(scale_down_compensation_factor(10, 20, 1), 1.0);
    // Without slot sharing (slots used != the largest parallelism) the new parallelisms add up:
    // 100 used, 25 + 10 = 35 after; at 5 per TM ceil(100/5) = 20 TMs before, ceil(35/5) = 7
    // after: factor 20 / 7 = 2.857142857142857.
    assert_eq!(estimate_task_slots_after_rescale(&[50, 50], &[25, 10], 100), 35);
    assert_eq!(scale_down_compensation_factor(100, 35, 5), 20.0 / 7.0);
    // Partial TMs count whole: 9 slots at 4 per TM = 3 TMs, 5 slots = 2 TMs: 1.5.
    assert_eq!(scale_down_compensation_factor(9, 5, 4), 1.5);
    // No slot metric (NaN -> 0 used): factor max(1, 0 / n) = 1.
    assert_eq!(scale_down_compensation_factor(0, 35, 5), 1.0);
}

#[test]
fn compensation_is_capped_by_the_budget() {
    let mut budget = MemoryBudget::new(5);
    assert_eq!(budget.take(3), 3);
    assert_eq!(budget.take(3), 2);
    assert_eq!(budget.take(3), 0);
    assert_eq!(budget.take(-1), 0);
    assert_eq!(budget.remaining(), 0);
    assert_eq!(MemoryBudget::new(-4).remaining(), 0);
}

#[test]
fn tuning_ends_early_without_a_recommendation() {
    let job = ReferenceJob::new();
    let tuned = |entries: &[(&str, &str)], memory: Option<u64>| {
        let mut all = vec![("job.autoscaler.memory.tuning.enabled", "true")];
        all.extend_from_slice(entries);
        tune(&options(&all), memory, &job.topology, &job.evaluated, &job.summaries)
    };
    // No spec at all.
    let t = tuned(&[], Some(1 << 30));
    assert!(matches!(
        t.outcome,
        Err(TuningSkipped::NoSpec(SpecError::NotConfigured))
    ));
    assert!(t.changes.is_empty());
    // An inconsistent spec.
    let t = tuned(&[(TOTAL_PROCESS_MEMORY, "300 mb")], Some(300 << 20));
    assert!(matches!(t.outcome, Err(TuningSkipped::NoSpec(_))));
    // No TaskManager memory from the context.
    assert_eq!(
        tuned(&[(TOTAL_PROCESS_MEMORY, "30 gb")], None).outcome,
        Err(TuningSkipped::NoTaskManagerMemory)
    );
    assert_eq!(
        tuned(&[(TOTAL_PROCESS_MEMORY, "30 gb")], Some(0)).outcome,
        Err(TuningSkipped::NoTaskManagerMemory)
    );
    // Nothing to distribute: no off-heap, no overhead, no edges, no usage.
    let solo = topology(&[("solo", 1)], &[]);
    let empty = tune(
        &options(&[
            ("job.autoscaler.memory.tuning.enabled", "true"),
            (TOTAL_PROCESS_MEMORY, "1 gb"),
            (FRAMEWORK_OFF_HEAP_MEMORY, "0"),
            (JVM_OVERHEAD_MIN, "0"),
            (JVM_OVERHEAD_FRACTION, "0"),
        ]),
        Some(1 << 30),
        &solo,
        &evaluated(&solo, 0.0, 0.0, 0.0, 1.0),
        &summaries(&[("solo", 1, 2)]),
    );
    assert_eq!(empty.outcome, Err(TuningSkipped::NonPositiveTotal(0)));
    // Only metaspace: the process is not empty but the Flink memory is.
    let metaspace_only = tune(
        &options(&[
            ("job.autoscaler.memory.tuning.enabled", "true"),
            (TOTAL_PROCESS_MEMORY, "1 gb"),
            (FRAMEWORK_OFF_HEAP_MEMORY, "0"),
            (JVM_OVERHEAD_MIN, "0"),
            (JVM_OVERHEAD_FRACTION, "0"),
        ]),
        Some(1 << 30),
        &solo,
        &evaluated(&solo, 0.0, 0.0, 1000.0, 1.0),
        &summaries(&[("solo", 1, 2)]),
    );
    assert_eq!(metaspace_only.outcome, Err(TuningSkipped::EmptyFlinkMemory));
}

#[test]
fn missing_and_odd_metrics_count_as_zero() {
    // No memory metrics at all (NaN averages): heap, metaspace and managed memory get nothing;
    // only the network, off-heap and overhead remain.
    let job = ReferenceJob::new();
    let mut e = job.evaluated.clone();
    e.global = Default::default();
    let tuning = tune(
        &options(&[
            ("job.autoscaler.memory.tuning.enabled", "true"),
            ("taskmanager.numberOfTaskSlots", "5"),
            (TOTAL_PROCESS_MEMORY, "30 gb"),
        ]),
        Some(30 << 30),
        &job.topology,
        &e,
        &job.summaries,
    );
    let r = tuning.outcome.unwrap_or_else(|err| panic!("{err}"));
    assert_eq!((r.sizes.heap, r.sizes.metaspace, r.sizes.managed), (0, 0, 0));
    // 128 mb + 1 gb + 13760 kb.
    assert_eq!(r.sizes.total_process, 134_217_728 + GIB + 14_090_240);
    // A negative usage is treated as none.
    e.global
        .insert(ScalingMetric::HeapMemoryUsed, EvaluatedScalingMetric::avg(-5.0));
    assert_eq!(usage(&e, ScalingMetric::HeapMemoryUsed), 0);
    // Fractions of a byte are truncated.
    e.global
        .insert(ScalingMetric::HeapMemoryUsed, EvaluatedScalingMetric::avg(99.9));
    assert_eq!(usage(&e, ScalingMetric::HeapMemoryUsed), 99);
    assert_eq!(with_overhead(99, 0.2), 118);
}

#[test]
fn the_quota_sees_the_tuned_process_size_only_when_tuning_is_enabled() {
    let mut changes = ConfigChanges::default();
    changes
        .overrides
        .insert(TOTAL_PROCESS_MEMORY.to_owned(), "20108162027 bytes".to_owned());
    let enabled = options(&[
        ("job.autoscaler.memory.tuning.enabled", "true"),
        (TOTAL_PROCESS_MEMORY, "30 gb"),
    ]);
    let disabled = options(&[(TOTAL_PROCESS_MEMORY, "30 gb")]);
    let unset = options(&[("job.autoscaler.memory.tuning.enabled", "true")]);
    assert_eq!(
        tuned_task_manager_memory(&changes, &enabled, Some(1)),
        Some(20_108_162_027)
    );
    assert_eq!(tuned_task_manager_memory(&changes, &disabled, Some(1)), Some(30 << 30));
    // No tuned or configured size: the context's value.
    assert_eq!(
        tuned_task_manager_memory(&ConfigChanges::default(), &unset, Some(7)),
        Some(7)
    );
    assert_eq!(
        tuned_task_manager_memory(&ConfigChanges::default(), &enabled, Some(7)),
        Some(30 << 30)
    );
}

#[test]
fn applied_changes_remove_first_then_override() {
    let job = ReferenceJob::new();
    let tuning = job.tune(&[]);
    let conf = Configuration::from_iter([
        (TOTAL_PROCESS_MEMORY, "30 gb"),
        (TASK_HEAP_MEMORY, "10 gb"),
        ("taskmanager.memory.size", "1 gb"),
        ("other.key", "kept"),
    ]);
    let tuned = tuning.changes.applied_to(&conf);
    assert_eq!(tuned.get(TOTAL_PROCESS_MEMORY), Some("20108162027 bytes"));
    assert!(!tuned.contains_key(TASK_HEAP_MEMORY) && !tuned.contains_key("taskmanager.memory.size"));
    assert_eq!(tuned.get("other.key"), Some("kept"));
    // Flink derives a process of exactly the tuned size from the tuned configuration.
    let model = MemoryModelOptions::from_configuration(&tuned).unwrap_or_else(|e| panic!("{e}"));
    let spec = MemorySpec::derive(&model).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(spec.total_process(), 20_108_162_027);
    assert_eq!(spec.network, 14_090_240);
    assert_eq!(spec.metaspace, 125_829_120);
}

fn any_strategy() -> impl Strategy<Value = ShipStrategy> {
    prop_oneof![
        Just(ShipStrategy::Forward),
        Just(ShipStrategy::Rescale),
        Just(ShipStrategy::Hash),
        Just(ShipStrategy::Rebalance),
        Just(ShipStrategy::Broadcast),
    ]
}

/// A chain of 1-4 vertices with random parallelisms, strategies and scalings, random memory
/// usage, a random process size between 1 and 64 gb and random tuning flags.
#[derive(Debug, Clone)]
struct Case {
    parallelisms: Vec<(u32, u32)>,
    strategies: Vec<ShipStrategy>,
    process_mb: i64,
    context_mb: i64,
    heap_mb: f64,
    managed_mb: f64,
    metaspace_mb: f64,
    slots_used: f64,
    slots_per_tm: u32,
    maximize: bool,
    compensate: bool,
}

fn any_case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec((1u32..200, 1u32..200), 1..5),
        prop::collection::vec(any_strategy(), 3),
        1024i64..65536,
        1i64..65536,
        (0.0f64..70000.0, 0.0f64..70000.0, 0.0f64..2000.0),
        (0.0f64..400.0, 1u32..8),
        any::<(bool, bool)>(),
    )
        .prop_map(
            |(
                parallelisms,
                strategies,
                process_mb,
                context_mb,
                (heap_mb, managed_mb, metaspace_mb),
                (slots_used, slots_per_tm),
                (maximize, compensate),
            )| Case {
                parallelisms,
                strategies,
                process_mb,
                context_mb,
                heap_mb,
                managed_mb,
                metaspace_mb,
                slots_used: slots_used.floor(),
                slots_per_tm,
                maximize,
                compensate,
            },
        )
}

impl Case {
    fn run(&self) -> (JobTopology, MemoryTuning) {
        let ids: Vec<String> = (0..self.parallelisms.len()).map(|i| format!("v{i}")).collect();
        let vertices: Vec<(&str, u32)> = ids
            .iter()
            .zip(&self.parallelisms)
            .map(|(id, (p, _))| (id.as_str(), *p))
            .collect();
        let edges: Vec<(&str, &str, ShipStrategy)> = ids
            .windows(2)
            .zip(&self.strategies)
            .map(|(pair, s)| (pair[0].as_str(), pair[1].as_str(), *s))
            .collect();
        let t = topology(&vertices, &edges);
        let changes: Vec<(&str, u32, u32)> = ids
            .iter()
            .zip(&self.parallelisms)
            .map(|(id, (p, n))| (id.as_str(), *p, *n))
            .collect();
        let e = evaluated(
            &t,
            self.heap_mb * MIB as f64,
            self.managed_mb * MIB as f64,
            self.metaspace_mb * MIB as f64,
            self.slots_used,
        );
        let process = format!("{} mb", self.process_mb);
        let slots = self.slots_per_tm.to_string();
        let o = options(&[
            ("job.autoscaler.memory.tuning.enabled", "true"),
            (
                "job.autoscaler.memory.tuning.maximize-managed-memory",
                if self.maximize { "true" } else { "false" },
            ),
            (
                "job.autoscaler.memory.tuning.scale-down-compensation.enabled",
                if self.compensate { "true" } else { "false" },
            ),
            (TOTAL_PROCESS_MEMORY, &process),
            ("taskmanager.numberOfTaskSlots", &slots),
        ]);
        let memory = u64::try_from(self.context_mb * MIB).ok();
        let tuning = tune(&o, memory, &t, &e, &summaries(&changes));
        (t, tuning)
    }
}

proptest! {
    #[test]
    fn tuned_sizes_are_never_negative_and_add_up_to_the_process_size(case in any_case()) {
        let (_, tuning) = case.run();
        if let Ok(r) = &tuning.outcome {
            let s = r.sizes;
            for size in [s.heap, s.managed, s.network, s.metaspace, s.overhead, s.total_process, s.total_flink] {
                prop_assert!(size >= 0, "{s:?}");
            }
            // Every byte of the process is accounted for by exactly one pool.
            let pools = r.spec.framework_off_heap + r.spec.task_off_heap + s.overhead + s.network + s.metaspace
                + s.heap + s.managed;
            prop_assert_eq!(pools.min(case.context_mb * MIB), s.total_process);
            prop_assert!(s.total_process <= case.context_mb * MIB);
            // The overrides state the same sizes.
            let o = &tuning.changes.overrides;
            prop_assert_eq!(o[TOTAL_PROCESS_MEMORY].clone(), format_memory_size(s.total_process));
            prop_assert_eq!(o[NETWORK_MEMORY_MIN].clone(), format_memory_size(s.network));
            prop_assert_eq!(o[JVM_METASPACE].clone(), format_memory_size(s.metaspace));
            prop_assert_eq!(tuning.changes.removals.len(), 4);
            // What Flink derives from the tuned configuration, if consistent, is a process of
            // exactly the tuned size with the tuned network and metaspace.
            let conf = Configuration::from_iter([(TOTAL_PROCESS_MEMORY, format!("{} mb", case.process_mb))]);
            let tuned = tuning.changes.applied_to(&conf);
            let model = MemoryModelOptions::from_configuration(&tuned);
            prop_assert!(model.is_ok());
            if let Ok(spec) = model.as_ref().map(MemorySpec::derive).unwrap_or(Err(SpecError::Overflow)) {
                prop_assert_eq!(spec.total_process(), s.total_process);
                prop_assert_eq!(spec.metaspace, s.metaspace);
            }
        }
    }

    #[test]
    fn pools_fit_the_budget_whatever_their_order(case in any_case()) {
        let (_, tuning) = case.run();
        if let Ok(r) = tuning.outcome {
            prop_assert!(r.sizes.metaspace <= case.context_mb * MIB);
            // Heap and metaspace never exceed what was asked (with compensation at most the
            // factor more), managed memory never more than the spec unless maximized.
            if !case.maximize {
                prop_assert!(r.sizes.managed <= r.spec.managed);
            }
            if case.managed_mb < 1.0 / MIB as f64 {
                prop_assert_eq!(r.sizes.managed, 0);
            }
        }
    }
}
