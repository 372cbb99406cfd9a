//! Criterion benchmark of one full autoscaler cycle through `JobAutoScalerImpl` on the bench
//! scenarios (`tests/fixtures/bench/`, the reference's benchmark inputs): load the
//! stored window from an in-memory state store, add this cycle's snapshot, window and trim,
//! evaluate, decide, persist the decision. The store is pre-loaded outside the timed section.
//!
//! `cargo bench --bench cycle`

use autoscaler_core::{
    AutoScalerEventHandler, AutoScalerOptions, AutoScalerStateStore, BasicJobContext, CollectError,
    CollectedJobMetrics, CycleOutcome, EventType, JobAutoScalerImpl, MetricsCollector, MetricsSnapshot,
    ParallelismOverrides, RealizeError, ScalingRealizer, async_trait, scaling::DecisionOutcome,
};
use autoscaler_metrics::{CollectedMetrics, JobTopology, MetricHistory};
use autoscaler_state::InMemoryStateStore;
use chrono::{DateTime, Utc};
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use flink_autoscaler::replay::{Scenario, ScenarioInput, parse_scenario};
use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;

type Ctx = BasicJobContext<String, ()>;

/// Hands out this cycle's snapshot (the scenario's last one).
struct Replayed {
    topology: JobTopology,
    running_since: DateTime<Utc>,
    latest: CollectedMetrics,
}

#[async_trait]
impl MetricsCollector<String, Ctx> for Replayed {
    async fn collect(
        &self,
        _: &Ctx,
        _: &AutoScalerOptions,
        _: DateTime<Utc>,
    ) -> Result<CollectedJobMetrics, CollectError> {
        Ok(CollectedJobMetrics {
            topology: self.topology.clone(),
            job_running_since: self.running_since,
            metrics: MetricsSnapshot::Scaling(self.latest.clone()),
        })
    }
}

struct Discard;

#[async_trait]
impl ScalingRealizer<String, Ctx> for Discard {
    async fn realize_parallelism_overrides(&self, _: &Ctx, _: &ParallelismOverrides) -> Result<(), RealizeError> {
        Ok(())
    }
}

#[async_trait]
impl AutoScalerEventHandler<String, Ctx> for Discard {
    async fn handle_event(
        &self,
        _: &Ctx,
        _: EventType,
        _: &str,
        _: &str,
        _: Option<&str>,
        _: Option<std::time::Duration>,
    ) {
    }
}

struct Prepared {
    scenario: Scenario,
    earlier: MetricHistory,
    collector: Arc<Replayed>,
    ctx: Ctx,
}

fn prepare(name: &str) -> Prepared {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/bench")
        .join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).expect("bench scenario");
    let scenario = parse_scenario(&text).expect("valid bench scenario");
    let ScenarioInput::Metrics(snapshots) = &scenario.input else {
        panic!("bench scenarios carry metrics")
    };
    let (_, latest) = snapshots.last().cloned().expect("at least one snapshot");
    let earlier: MetricHistory = snapshots[..snapshots.len() - 1].iter().cloned().collect();
    let collector = Arc::new(Replayed {
        topology: scenario.topology.clone(),
        running_since: scenario.job.running_since.expect("running_since"),
        latest,
    });
    let mut configuration = scenario.config.clone();
    configuration.set("job.autoscaler.enabled", "true");
    let ctx = BasicJobContext::new(name.to_owned(), configuration, ());
    Prepared {
        scenario,
        earlier,
        collector,
        ctx,
    }
}

fn preloaded_store(rt: &tokio::runtime::Runtime, p: &Prepared) -> Arc<InMemoryStateStore> {
    let store = Arc::new(InMemoryStateStore::new());
    rt.block_on(async {
        store
            .store_collected_metrics(&p.ctx, &p.earlier)
            .await
            .expect("store metrics");
        store
            .store_scaling_history(&p.ctx, &p.scenario.scaling_history)
            .await
            .expect("store history");
        store
            .store_scaling_tracking(&p.ctx, &p.scenario.scaling_tracking)
            .await
            .expect("store tracking");
        store
            .store_delayed_scale_down(&p.ctx, &p.scenario.delayed_scale_down)
            .await
            .expect("store delayed");
    });
    store
}

fn bench_cycle(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
    let mut group = c.benchmark_group("cycle");
    for name in ["chain-10", "dag-100", "dag-1000"] {
        let p = prepare(name);
        let now = p.scenario.now;
        // One check outside the timing: the cycle decides what the reference decides.
        let store = preloaded_store(&rt, &p);
        let autoscaler = JobAutoScalerImpl::new(p.collector.clone(), store, Arc::new(Discard), Arc::new(Discard))
            .with_clock(Arc::new(move || now));
        let outcome = rt.block_on(autoscaler.run_cycle(&p.ctx)).expect("cycle");
        assert_eq!(outcome, CycleOutcome::Decided(DecisionOutcome::Scale), "{name}");

        group.throughput(Throughput::Elements(p.scenario.topology.len() as u64));
        group.bench_function(name, |b| {
            b.iter_batched(
                || {
                    let store = preloaded_store(&rt, &p);
                    JobAutoScalerImpl::new(p.collector.clone(), store, Arc::new(Discard), Arc::new(Discard))
                        .with_clock(Arc::new(move || now))
                },
                |autoscaler| black_box(rt.block_on(autoscaler.run_cycle(&p.ctx))),
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(5));
    targets = bench_cycle
}
criterion_main!(benches);
