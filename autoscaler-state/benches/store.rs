//! Flush and load of one job with a full history, per store.
//!
//! "Full history": 20 vertices, 90 collected snapshots (15 min window at a 10 s interval) of 12
//! metrics each, a scaling history of 5 decisions per vertex, plus the small states. PostgreSQL and
//! MySQL run when `AUTOSCALER_TEST_POSTGRES_URL` / `AUTOSCALER_TEST_MYSQL_URL` are set. Figures are
//! in the crate docs (`src/lib.rs`, "Cost").

#![allow(missing_docs, clippy::unwrap_used)]

#[path = "../tests/common/mod.rs"]
mod common;

use autoscaler_core::{AutoScalerStateStore, ScalingHistory, ScalingSummary};
use autoscaler_metrics::{CollectedMetrics, MetricHistory, MetricValues, ScalingMetric, VertexId};
use autoscaler_state::AnyStateStore;
use common::{Ctx, Kind, TestDb, ctx, sample, t};
use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;

const VERTICES: usize = 20;
const SNAPSHOTS: usize = 90;

const METRICS: [ScalingMetric; 12] = [
    ScalingMetric::Load,
    ScalingMetric::Lag,
    ScalingMetric::NumRecordsIn,
    ScalingMetric::NumRecordsOut,
    ScalingMetric::TrueProcessingRate,
    ScalingMetric::ObservedTpr,
    ScalingMetric::TargetDataRate,
    ScalingMetric::CatchUpDataRate,
    ScalingMetric::ScaleUpRateThreshold,
    ScalingMetric::ScaleDownRateThreshold,
    ScalingMetric::Parallelism,
    ScalingMetric::MaxParallelism,
];

fn vertex(i: usize) -> VertexId {
    VertexId::new(format!("{i:032x}"))
}

fn full_history(seed: f64) -> MetricHistory {
    (0..SNAPSHOTS)
        .map(|s| {
            let mut snapshot = CollectedMetrics::default();
            for v in 0..VERTICES {
                let mut values = MetricValues::default();
                for (m, metric) in METRICS.iter().enumerate() {
                    values.insert(*metric, seed + (s * 1000 + v * 10 + m) as f64 * 0.731);
                }
                snapshot.vertex_metrics.insert(vertex(v), values);
            }
            snapshot
                .global_metrics
                .insert(ScalingMetric::GcPressure, 0.01 * s as f64);
            (t(s as i64 * 10), snapshot)
        })
        .collect()
}

fn scaling_history() -> ScalingHistory {
    let mut history = ScalingHistory::new();
    for v in 0..VERTICES {
        for d in 0..5 {
            history.entry(vertex(v)).or_default().insert(
                t(d * 600),
                ScalingSummary {
                    current_parallelism: 2 + d as u32,
                    new_parallelism: 3 + d as u32,
                    metrics: common::evaluated_vertex(d as u32),
                },
            );
        }
    }
    history
}

async fn store_full_job(store: &AnyStateStore, c: &Ctx, history: &MetricHistory) {
    let s = sample(1);
    store.store_scaling_history(c, &scaling_history()).await.unwrap();
    store.store_scaling_tracking(c, &s.tracking).await.unwrap();
    store.store_collected_metrics(c, history).await.unwrap();
    store.store_evaluated_metrics(c, &s.evaluated).await.unwrap();
    store.store_parallelism_overrides(c, &s.overrides).await.unwrap();
    store.store_config_changes(c, &s.changes).await.unwrap();
    store.store_delayed_scale_down(c, &s.delayed).await.unwrap();
}

fn bench_store(criterion: &mut Criterion, kind: Kind, name: &str) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let Some(db) = rt.block_on(TestDb::new(kind)) else {
        return;
    };
    let store = rt.block_on(AnyStateStore::open(&db.url)).unwrap();
    let c = ctx("bench-job");
    let histories = [full_history(0.0), full_history(1.0)];
    rt.block_on(store_full_job(&store, &c, &histories[0]));
    rt.block_on(store.flush(&c)).unwrap();

    let mut group = criterion.benchmark_group(format!("state_store/{name}"));
    group.sample_size(20);
    let mut i = 0;
    // A cycle's write: every state changed (the history alternates so each flush really writes).
    group.bench_function("store_and_flush_full_job", |b| {
        b.iter(|| {
            i += 1;
            rt.block_on(async {
                store_full_job(&store, &c, &histories[i % 2]).await;
                store.flush(&c).await.unwrap();
            })
        })
    });
    // A cycle's read: served from the cache (a clone of the history).
    group.bench_function("get_cached_history", |b| {
        b.iter(|| rt.block_on(async { black_box(store.get_collected_metrics(&c).await.unwrap().len()) }))
    });
    if kind == Kind::Memory {
        // The in-memory store has nothing to reload from.
        group.finish();
        return;
    }
    // A restart's read: drop the cache, load every row and decode it.
    group.bench_function("load_full_job", |b| {
        b.iter(|| {
            rt.block_on(async {
                AutoScalerStateStore::<String, Ctx>::remove_info_from_cache(&store, &c.job_key).await;
                black_box(store.get_collected_metrics(&c).await.unwrap().len())
            })
        })
    });
    group.finish();
    rt.block_on(store.close());
    rt.block_on(db.cleanup());
}

fn benches(criterion: &mut Criterion) {
    let json_len = serde_json::to_string(&full_history(0.0)).unwrap().len();
    eprintln!("collected-metrics JSON of the full history: {json_len} bytes");
    bench_store(criterion, Kind::Memory, "memory");
    bench_store(criterion, Kind::Sqlite, "sqlite");
    bench_store(criterion, Kind::Postgres, "postgres");
    bench_store(criterion, Kind::MySql, "mysql");
}

criterion_group!(store_benches, benches);
criterion_main!(store_benches);
