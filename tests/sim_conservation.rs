//! Conservation laws of the simulator, as properties over random jobs:
//! records are neither created nor lost beyond selectivity, busy + backpressured + idle is 1000 ms
//! per second for every subtask, no subtask processes above its capacity, and buffers stay bounded.

use autoscaler_sim::{RateProfile, SimEdge, SimJob, SimSettings, SimVertex, Simulator};
use flink_autoscaler::metrics::ShipStrategy;
use proptest::prelude::*;
use std::time::Duration;

const STRATEGIES: [ShipStrategy; 6] = [
    ShipStrategy::Hash,
    ShipStrategy::Rebalance,
    ShipStrategy::Forward,
    ShipStrategy::Rescale,
    ShipStrategy::Broadcast,
    ShipStrategy::Global,
];

/// A random DAG: vertex 0 and maybe vertex 1 are sources, every later vertex reads from one or two
/// earlier vertices.
fn arb_job() -> impl Strategy<Value = SimJob> {
    (2usize..6, any::<bool>(), any::<u64>()).prop_flat_map(|(n, two_sources, seed)| {
        let vertices = prop::collection::vec((100.0f64..5_000.0, 1u32..6, 0.0f64..6_000.0), n);
        let edges = prop::collection::vec((0usize..1000, 0usize..1000, 0usize..6, 0.0f64..3.0, any::<bool>()), n);
        let factors = prop::collection::vec(prop::collection::vec(0.2f64..1.5, 0..4), n);
        (Just((n, two_sources, seed)), vertices, edges, factors).prop_map(
            |((n, two_sources, seed), vertices, edges, factors)| {
                let sources = if two_sources && n > 2 { 2 } else { 1 };
                let mut job = SimJob::new("prop").settings(SimSettings {
                    seed,
                    rate_noise: 0.05,
                    ..SimSettings::default()
                });
                for (i, ((capacity, p, rate), factors)) in vertices.into_iter().zip(factors).enumerate() {
                    let id = format!("v{i}");
                    let vertex = if i < sources {
                        SimVertex::source(id, capacity, p, RateProfile::Constant { rate }).backlog(rate)
                    } else {
                        SimVertex::new(id, capacity, p).max_parallelism(16)
                    };
                    job = job.vertex(vertex.capacity_factors(factors));
                }
                for (i, (a, b, s, sel, second)) in edges.into_iter().enumerate().skip(sources) {
                    job =
                        job.edge(SimEdge::new(format!("v{}", a % i), format!("v{i}"), STRATEGIES[s]).selectivity(sel));
                    let other = b % i;
                    if second && other != a % i {
                        job = job.edge(SimEdge::new(
                            format!("v{other}"),
                            format!("v{i}"),
                            ShipStrategy::Rebalance,
                        ));
                    }
                }
                job
            },
        )
    })
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * a.abs().max(b.abs()).max(1.0)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn records_are_conserved(job in arb_job(), rescale_to in 1u32..8, rescale_vertex in 0usize..6) {
        let mut sim = Simulator::new(job).expect("generated jobs are valid");
        sim.advance(Duration::from_secs(45));
        let id = format!("v{}", rescale_vertex % sim.job().vertices.len());
        sim.set_requirement(&id, rescale_to);
        sim.advance(Duration::from_secs(75));
        let totals = sim.totals().clone();
        let n = sim.job().vertices.len();
        for v in 0..n {
            if sim.job().vertices[v].source.is_some() {
                // Arrived = read + still waiting in the external system.
                prop_assert!(close(totals.arrived[v], totals.processed[v] + sim.backlog(v)),
                    "source v{v}: arrived {} processed {} backlog {}", totals.arrived[v], totals.processed[v], sim.backlog(v));
            } else {
                // Delivered into the input buffers = processed + still buffered.
                let delivered: f64 = sim.edge_ends().iter().enumerate().filter(|(_, (_, w))| *w == v).map(|(e, _)| totals.delivered[e]).sum();
                prop_assert!(close(delivered, totals.processed[v] + sim.buffered(v)),
                    "v{v}: delivered {delivered} processed {} buffered {}", totals.processed[v], sim.buffered(v));
            }
        }
        for (e, (u, _)) in sim.edge_ends().iter().enumerate() {
            let edge = &sim.job().edges[e];
            // Only selectivity changes the count; BROADCAST copies to every receiver instead.
            if edge.ship_strategy != ShipStrategy::Broadcast {
                prop_assert!(close(totals.delivered[e], totals.processed[*u] * edge.selectivity));
            } else {
                prop_assert!(totals.delivered[e] + 1e-6 >= totals.processed[*u] * edge.selectivity);
            }
        }
    }

    #[test]
    fn time_adds_up_and_capacity_is_respected(job in arb_job()) {
        let mut sim = Simulator::new(job).expect("generated jobs are valid");
        sim.advance(Duration::from_secs(90));
        for v in 0..sim.job().vertices.len() {
            let mut buffer_cap = 0.0;
            for (s, m) in sim.subtask_meters(v).into_iter().enumerate() {
                let capacity = sim.subtask_capacity(v, s);
                buffer_cap += capacity * sim.job().settings.buffer_secs;
                let total = m.busy_ms_per_sec + m.backpressured_ms_per_sec + m.idle_ms_per_sec;
                prop_assert!((total - 1000.0).abs() < 1e-6, "v{v}: busy+bp+idle = {total}");
                prop_assert!(m.busy_ms_per_sec >= 0.0 && m.backpressured_ms_per_sec >= 0.0 && m.idle_ms_per_sec >= 0.0);
                prop_assert!(m.records_in_per_sec <= capacity * (1.0 + 1e-9), "v{v}: {} > {capacity}", m.records_in_per_sec);
                // Busy time is exactly the time the processed records take at capacity.
                prop_assert!((m.busy_ms_per_sec - m.records_in_per_sec / capacity * 1000.0).abs() < 1e-6);
            }
            // Without a rescale, credit keeps every input buffer within its bound.
            prop_assert!(sim.buffered(v) <= buffer_cap * (1.0 + 1e-9), "v{} overfilled", v);
        }
    }
}

#[test]
fn a_slow_vertex_backpressures_its_upstream_and_grows_the_backlog() {
    let job = SimJob::new("bp")
        .vertex(SimVertex::source(
            "src",
            10_000.0,
            1,
            RateProfile::Constant { rate: 3_000.0 },
        ))
        .vertex(SimVertex::new("slow", 1_000.0, 1))
        .edge(SimEdge::new("src", "slow", ShipStrategy::Rebalance));
    let mut sim = Simulator::new(job).expect("valid job");
    sim.advance(Duration::from_secs(120));
    let src = sim.subtask_meters(0)[0];
    let slow = sim.subtask_meters(1)[0];
    // The slow vertex is busy all the time at 1,000 records/s.
    assert!((slow.busy_ms_per_sec - 1000.0).abs() < 1e-6);
    assert!((slow.records_in_per_sec - 1000.0).abs() < 1e-6);
    // The source reads only what credit allows (1,000/s = 100 ms busy per second) and is
    // backpressured the rest of the time.
    assert!((src.busy_ms_per_sec - 100.0).abs() < 1e-6, "{src:?}");
    assert!((src.backpressured_ms_per_sec - 900.0).abs() < 1e-6, "{src:?}");
    // 3,000 arrive, 1,000 leave: the backlog grows by 2,000/s, minus what sits in the slow
    // vertex's buffer (1 s of its capacity, less the 100 records it took in the last step).
    assert!(
        (sim.backlog(0) - (120.0 * 2_000.0 - 900.0)).abs() < 1.0,
        "{}",
        sim.backlog(0)
    );
    assert!((src.pending_records - sim.backlog(0)).abs() < 1e-6);
}

#[test]
fn a_rescale_stops_processing_for_the_downtime_after_the_cooldown() {
    let job = SimJob::new("rescale")
        .vertex(SimVertex::source(
            "src",
            10_000.0,
            1,
            RateProfile::Constant { rate: 1_000.0 },
        ))
        .vertex(SimVertex::new("sink", 5_000.0, 1))
        .edge(SimEdge::new("src", "sink", ShipStrategy::Rebalance));
    let mut sim = Simulator::new(job).expect("valid job");
    sim.advance(Duration::from_secs(10));
    assert!(sim.set_requirement("sink", 3));
    // scaling-interval.min (30 s) since the job started: nothing happens before t = 30 s.
    sim.advance(Duration::from_secs(15));
    assert!(sim.rescales().is_empty());
    sim.advance(Duration::from_secs(6));
    assert_eq!(sim.rescales().len(), 1);
    assert_eq!(sim.rescales()[0].at_ms, 30_000);
    let processed = sim.totals().processed[0];
    sim.advance(Duration::from_secs(15));
    // Restarting (20 s downtime): nothing processed, 15 s of arrivals wait.
    assert_eq!(sim.totals().processed[0], processed);
    assert!(sim.flink_metrics().is_none());
    sim.advance(Duration::from_secs(30));
    assert_eq!(sim.parallelism()["sink"], 3);
    assert_eq!(sim.running_since(), Duration::from_secs(50));
    assert!(sim.backlog(0) < 1.0, "the backlog is drained after the restart");
}

#[test]
fn the_optimum_accounts_for_partitions_key_groups_and_slow_subtasks() {
    let job = SimJob::new("opt")
        // 10 partitions: a subtask owning 2 of them reads 1,800/s > 70% of 2,000, so it takes 10.
        .vertex(SimVertex::source("src", 2_000.0, 1, RateProfile::Constant { rate: 9_000.0 }).partitions(10))
        // 128 key groups, 9,000 + 1,000 records/s: at 5 subtasks the busiest owns 26/128 -> 2,031/s <= 2,100.
        .vertex(SimVertex::source(
            "side",
            20_000.0,
            1,
            RateProfile::Constant { rate: 1_000.0 },
        ))
        .vertex(SimVertex::new("keyed", 3_000.0, 1))
        // Every fourth subtask at half speed: 10,000 / p <= 0.7 * 1,500 * 0.5 needs p >= 19.05.
        .vertex(SimVertex::new("slow", 1_500.0, 1).capacity_factors(vec![1.0, 1.0, 1.0, 0.5]))
        .edge(SimEdge::new("src", "keyed", ShipStrategy::Hash))
        .edge(SimEdge::new("side", "keyed", ShipStrategy::Hash))
        .edge(SimEdge::new("keyed", "slow", ShipStrategy::Rebalance));
    let sim = Simulator::new(job).expect("valid job");
    let optimum = sim.optimal_parallelism(0.0, 0.7);
    assert_eq!(optimum["src"], 10);
    assert_eq!(optimum["side"], 1);
    assert_eq!(optimum["keyed"], 5);
    assert_eq!(optimum["slow"], 20);
}
