//! Ready-made simulated jobs: the quickstart job and the convergence benchmark's workloads.
//!
//! Capacities are records per second per subtask; every job starts at parallelism 1 and every
//! vertex has max parallelism 128 unless said otherwise.

use crate::job::{KeySkew, SimEdge, SimJob, SimSettings, SimVertex};
use crate::profile::RateProfile;
use autoscaler_metrics::ShipStrategy::{Forward, Hash, Rebalance};
use std::time::Duration;

/// A benchmark workload: a job and how long to run it.
#[derive(Debug, Clone)]
pub struct Workload {
    /// Short name (table row).
    pub name: &'static str,
    /// What it models.
    pub description: &'static str,
    /// The job.
    pub job: SimJob,
    /// Simulated run length.
    pub horizon: Duration,
}

const MIN: f64 = 60.0;

fn settings() -> SimSettings {
    SimSettings {
        rate_noise: 0.02,
        ..SimSettings::default()
    }
}

/// The quickstart job: `source -> parse -> sink` at 5,000 records/s, where `parse` (2,000
/// records/s per subtask) is the bottleneck. The optimum at 70% utilization is 1 / 4 / 1.
pub fn quickstart() -> SimJob {
    SimJob::new("quickstart")
        .vertex(SimVertex::source(
            "source",
            10_000.0,
            1,
            RateProfile::Constant { rate: 5_000.0 },
        ))
        .vertex(SimVertex::new("parse", 2_000.0, 1))
        .vertex(SimVertex::new("sink", 8_000.0, 1))
        .edge(SimEdge::new("source", "parse", Rebalance))
        .edge(SimEdge::new("parse", "sink", Hash))
}

/// A source -> map -> sink chain fed by `profile` (the load-step workloads).
fn chain(name: &str, profile: RateProfile) -> SimJob {
    SimJob::new(name)
        .vertex(SimVertex::source("source", 12_000.0, 1, profile).partitions(32))
        .vertex(SimVertex::new("map", 1_500.0, 1))
        .vertex(SimVertex::new("sink", 6_000.0, 1))
        .edge(SimEdge::new("source", "map", Rebalance))
        .edge(SimEdge::new("map", "sink", Hash))
        .settings(settings())
}

/// The benchmark's workloads (thirteen).
pub fn benchmark() -> Vec<Workload> {
    let hour = Duration::from_secs(3600);
    let two_hours = Duration::from_secs(7200);
    vec![
        Workload {
            name: "word-count",
            description: "lines -> split (x5 words) -> keyed count -> sink",
            job: SimJob::new("word-count")
                .vertex(SimVertex::source(
                    "lines",
                    20_000.0,
                    1,
                    RateProfile::Constant { rate: 8_000.0 },
                ))
                .vertex(SimVertex::new("split", 6_000.0, 1))
                .vertex(SimVertex::new("count", 12_000.0, 1))
                .vertex(SimVertex::new("sink", 20_000.0, 1))
                .edge(SimEdge::new("lines", "split", Rebalance))
                .edge(SimEdge::new("split", "count", Hash).selectivity(5.0))
                .edge(SimEdge::new("count", "sink", Rebalance).selectivity(0.1))
                .settings(settings()),
            horizon: hour,
        },
        Workload {
            name: "nexmark-q5",
            description: "bids -> hot items: sliding window count by auction -> max -> sink",
            job: SimJob::new("nexmark-q5")
                .vertex(SimVertex::source("bids", 25_000.0, 1, RateProfile::Constant { rate: 20_000.0 }).partitions(64))
                .vertex(SimVertex::new("window-count", 5_000.0, 1))
                .vertex(SimVertex::new("max", 4_000.0, 1))
                .vertex(SimVertex::new("sink", 10_000.0, 1))
                .edge(SimEdge::new("bids", "window-count", Hash))
                .edge(SimEdge::new("window-count", "max", Hash).selectivity(0.2))
                .edge(SimEdge::new("max", "sink", Forward).selectivity(0.05))
                .settings(settings()),
            horizon: hour,
        },
        Workload {
            name: "nexmark-q8",
            description: "persons + auctions -> windowed join -> sink (two sources)",
            job: SimJob::new("nexmark-q8")
                .vertex(SimVertex::source(
                    "persons",
                    20_000.0,
                    1,
                    RateProfile::Constant { rate: 2_000.0 },
                ))
                .vertex(SimVertex::source(
                    "auctions",
                    20_000.0,
                    1,
                    RateProfile::Constant { rate: 8_000.0 },
                ))
                .vertex(SimVertex::new("window-join", 3_000.0, 1))
                .vertex(SimVertex::new("sink", 10_000.0, 1))
                .edge(SimEdge::new("persons", "window-join", Hash))
                .edge(SimEdge::new("auctions", "window-join", Hash))
                .edge(SimEdge::new("window-join", "sink", Rebalance).selectivity(0.3))
                .settings(settings()),
            horizon: hour,
        },
        Workload {
            name: "nexmark-q3",
            description: "auctions -> filter, persons -> filter, keyed join -> sink",
            job: SimJob::new("nexmark-q3")
                .vertex(SimVertex::source(
                    "auctions",
                    20_000.0,
                    1,
                    RateProfile::Constant { rate: 12_000.0 },
                ))
                .vertex(SimVertex::source(
                    "persons",
                    20_000.0,
                    1,
                    RateProfile::Constant { rate: 3_000.0 },
                ))
                .vertex(SimVertex::new("filter-a", 15_000.0, 1))
                .vertex(SimVertex::new("filter-p", 15_000.0, 1))
                .vertex(SimVertex::new("join", 1_200.0, 1))
                .vertex(SimVertex::new("sink", 10_000.0, 1))
                .edge(SimEdge::new("auctions", "filter-a", Forward))
                .edge(SimEdge::new("persons", "filter-p", Forward))
                .edge(SimEdge::new("filter-a", "join", Hash).selectivity(0.25))
                .edge(SimEdge::new("filter-p", "join", Hash).selectivity(0.5))
                .edge(SimEdge::new("join", "sink", Rebalance))
                .settings(settings()),
            horizon: hour,
        },
        Workload {
            name: "multi-source",
            description: "three sources -> union -> enrich -> sink",
            job: SimJob::new("multi-source")
                .vertex(SimVertex::source(
                    "clicks",
                    15_000.0,
                    1,
                    RateProfile::Constant { rate: 5_000.0 },
                ))
                .vertex(SimVertex::source(
                    "views",
                    15_000.0,
                    1,
                    RateProfile::Constant { rate: 3_000.0 },
                ))
                .vertex(SimVertex::source(
                    "orders",
                    15_000.0,
                    1,
                    RateProfile::Constant { rate: 1_000.0 },
                ))
                .vertex(SimVertex::new("enrich", 2_500.0, 1))
                .vertex(SimVertex::new("sink", 12_000.0, 1))
                .edge(SimEdge::new("clicks", "enrich", Rebalance))
                .edge(SimEdge::new("views", "enrich", Rebalance))
                .edge(SimEdge::new("orders", "enrich", Rebalance))
                .edge(SimEdge::new("enrich", "sink", Rebalance))
                .settings(settings()),
            horizon: hour,
        },
        Workload {
            name: "skewed",
            description: "source -> keyed aggregation with Zipf(0.6) keys -> sink",
            job: SimJob::new("skewed")
                .vertex(SimVertex::source(
                    "source",
                    20_000.0,
                    1,
                    RateProfile::Constant { rate: 8_000.0 },
                ))
                .vertex(SimVertex::new("aggregate", 2_000.0, 1).key_skew(KeySkew::Zipf { exponent: 0.6 }))
                .vertex(SimVertex::new("sink", 10_000.0, 1))
                .edge(SimEdge::new("source", "aggregate", Hash))
                .edge(SimEdge::new("aggregate", "sink", Rebalance).selectivity(0.5))
                .settings(settings()),
            horizon: hour,
        },
        Workload {
            name: "slow-node",
            description: "source -> parse on a cluster where every fourth subtask runs at half speed -> sink",
            job: SimJob::new("slow-node")
                .vertex(SimVertex::source(
                    "source",
                    20_000.0,
                    1,
                    RateProfile::Constant { rate: 6_000.0 },
                ))
                .vertex(SimVertex::new("parse", 1_500.0, 1).capacity_factors(vec![1.0, 1.0, 1.0, 0.5]))
                .vertex(SimVertex::new("sink", 10_000.0, 1))
                .edge(SimEdge::new("source", "parse", Rebalance))
                .edge(SimEdge::new("parse", "sink", Rebalance))
                .settings(settings()),
            horizon: hour,
        },
        Workload {
            name: "step-up-x2",
            description: "chain, 4k -> 8k records/s at 60 min",
            job: chain(
                "step-up-x2",
                RateProfile::Step {
                    before: 4_000.0,
                    after: 8_000.0,
                    at_secs: 60.0 * MIN,
                },
            ),
            horizon: two_hours,
        },
        Workload {
            name: "step-up-x5",
            description: "chain, 2k -> 10k records/s at 60 min",
            job: chain(
                "step-up-x5",
                RateProfile::Step {
                    before: 2_000.0,
                    after: 10_000.0,
                    at_secs: 60.0 * MIN,
                },
            ),
            horizon: two_hours,
        },
        Workload {
            name: "step-up-x10",
            description: "chain, 1k -> 10k records/s at 60 min",
            job: chain(
                "step-up-x10",
                RateProfile::Step {
                    before: 1_000.0,
                    after: 10_000.0,
                    at_secs: 60.0 * MIN,
                },
            ),
            horizon: two_hours,
        },
        Workload {
            name: "step-down",
            description: "chain, 10k -> 2.5k records/s at 60 min",
            job: chain(
                "step-down",
                RateProfile::Step {
                    before: 10_000.0,
                    after: 2_500.0,
                    at_secs: 60.0 * MIN,
                },
            ),
            horizon: two_hours,
        },
        Workload {
            name: "diurnal",
            description: "chain, 6k ± 4k records/s sine over a 4 h day (phases = quarter days)",
            job: chain(
                "diurnal",
                RateProfile::Diurnal {
                    mean: 6_000.0,
                    amplitude: 4_000.0,
                    period_secs: 240.0 * MIN,
                },
            ),
            horizon: Duration::from_secs(4 * 3600),
        },
        Workload {
            name: "spike",
            description: "chain, 3k records/s with a 10 min spike to 9k at 45 min",
            job: chain(
                "spike",
                RateProfile::Spike {
                    base: 3_000.0,
                    peak: 9_000.0,
                    at_secs: 45.0 * MIN,
                    duration_secs: 10.0 * MIN,
                },
            ),
            horizon: Duration::from_secs(105 * 60),
        },
    ]
}
