//! Criterion benchmark of one full autoscaler cycle through `JobAutoScalerImpl` on the bench
//! scenarios (`tests/fixtures/bench/`, the reference's benchmark inputs): load the
//! stored window from an in-memory state store, add this cycle's snapshot, window and trim,
//! evaluate, decide, persist the decision. The store holds the state before the timed section,
//! and `cycle/<scenario>` reuses one autoscaler, as a long-running process does.
//!
//! `cycle_exported/<scenario>` runs the same cycles as `run --metrics-addr` does: the Prometheus
//! exporter installed and the service's metric wrappers in place.
//!
//! `cargo bench --bench cycle`

use autoscaler_core::{AutoScalerStateStore, JobAutoScalerImpl, scaling::DecisionOutcome};
use autoscaler_state::InMemoryStateStore;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::sync::Arc;

mod support;

use support::{Ctx, Discard, Prepared, preload, prepare};

/// A fresh in-memory store holding the job's state as the previous cycle left it.
fn preloaded_store(rt: &tokio::runtime::Runtime, p: &Prepared) -> Arc<InMemoryStateStore> {
    let store = Arc::new(InMemoryStateStore::new());
    rt.block_on(preload(&*store, p));
    store
}

/// Puts `store`'s state of the job back as [`preloaded_store`] writes it.
fn reload(rt: &tokio::runtime::Runtime, store: &InMemoryStateStore, p: &Prepared) {
    rt.block_on(async {
        let store: &dyn AutoScalerStateStore<String, Ctx> = store;
        store.clear_all(&p.ctx).await.expect("clear");
        preload(store, p).await;
    });
}

/// `cycle/<scenario>`: one autoscaler cycling the job as a long-running process does (the
/// autoscaler has run before, the store holds the state); between timed cycles the stored state
/// is put back as it was (not timed).
fn bench_cycle(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
    let mut group = c.benchmark_group("cycle");
    for name in ["chain-10", "dag-100", "dag-1000"] {
        let p = prepare(name);
        let now = p.scenario.now;
        // One check outside the timing: the cycle decides what the reference decides.
        let store = preloaded_store(&rt, &p);
        let autoscaler =
            JobAutoScalerImpl::new(p.collector.clone(), store.clone(), Arc::new(Discard), Arc::new(Discard))
                .with_clock(Arc::new(move || now));
        let outcome = rt.block_on(autoscaler.run_cycle(&p.ctx)).expect("cycle");
        assert_eq!(outcome.decision_outcome(), Some(DecisionOutcome::Scale), "{name}");

        reload(&rt, &store, &p);

        group.throughput(Throughput::Elements(p.scenario.topology.len() as u64));
        group.bench_function(name, |b| {
            b.iter_custom(|iterations| {
                let mut timed = std::time::Duration::ZERO;
                for _ in 0..iterations {
                    let start = std::time::Instant::now();
                    black_box(rt.block_on(autoscaler.run_cycle(&p.ctx)).expect("cycle"));
                    timed += start.elapsed();
                    reload(&rt, &store, &p);
                }
                timed
            })
        });
    }
    group.finish();
}

/// The same cycles as `service` runs them with `--metrics-addr`: the Prometheus recorder of the
/// `metrics` facade installed, the service's wrappers around the autoscaler, collector and store
/// (cycle histogram, vertex names, latest evaluation for scrape-time rendering), and the job's
/// `JobSeries` as its metrics reporter. Ids `cycle_exported/<scenario>`; compare with `cycle/`.
fn bench_cycle_exported(c: &mut Criterion) {
    use autoscaler_core::{JobAutoScaler, JobStatus};
    use autoscaler_realizer::{
        rest::FlinkRestClient, rest::RestClientConfig, sources::JobLabels, sources::SourceJobContext,
    };
    use flink_autoscaler_cli::service::metrics::{LATENCY_BUCKETS, MetricsDetail, ServiceMetrics};
    use flink_autoscaler_cli::service::{ObservedAutoScaler, ObservedCollector, ObservedStateStore};

    let exporter = metrics_exporter_prometheus::PrometheusBuilder::new()
        .set_buckets(LATENCY_BUCKETS)
        .expect("buckets")
        .install_recorder()
        .expect("the only recorder of this process");
    let rt = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
    let client = FlinkRestClient::new("http://127.0.0.1:9", RestClientConfig::default()).expect("client");
    let mut group = c.benchmark_group("cycle_exported");
    for name in ["chain-10", "dag-100", "dag-1000"] {
        let p = prepare(name);
        let now = p.scenario.now;
        let metrics = Arc::new(ServiceMetrics::with_options(
            MetricsDetail::Vertex,
            std::time::Duration::from_secs(30),
        ));
        let labels = JobLabels {
            job_key: name.to_owned(),
            source: "bench".to_owned(),
            application: None,
            job_id: name.to_owned(),
            job_name: name.to_owned(),
        };
        let ctx = SourceJobContext {
            reporter: metrics.job(&labels),
            labels,
            job_status: Some(JobStatus::Running),
            configuration: p.ctx.configuration.clone(),
            client: client.clone(),
        };
        let service = |store: Arc<InMemoryStateStore>| {
            let collector = Arc::new(ObservedCollector::new(p.collector.clone(), metrics.clone()));
            let store = Arc::new(ObservedStateStore::new(store, metrics.clone()));
            let inner = JobAutoScalerImpl::new(collector, store, Arc::new(Discard), Arc::new(Discard))
                .with_clock(Arc::new(move || now));
            ObservedAutoScaler::new(Arc::new(inner), metrics.clone())
        };
        // One check outside the timing: the same decision, and the job's series are exported.
        let before = metrics.job(&ctx.labels).scalings();
        rt.block_on(service(preloaded_store(&rt, &p)).scale(&ctx))
            .expect("cycle");
        assert_eq!(metrics.job(&ctx.labels).scalings(), before + 1, "{name} scales");
        let scraped = metrics.render_jobs();
        let vertices = p.scenario.topology.len();
        let tpr = scraped
            .lines()
            .filter(|l| l.starts_with("flink_autoscaler_vertex_true_processing_rate_records_per_second{"))
            .count();
        assert!(
            tpr >= vertices,
            "{name}: {tpr} true processing rate series for {vertices} vertices"
        );
        assert!(exporter.render().contains("flink_autoscaler_cycle_duration_seconds"));

        // Timed as `cycle/` is: one long-running service, the store's state put back between
        // timed cycles (not timed).
        let store = preloaded_store(&rt, &p);
        let autoscaler = service(store.clone());
        group.throughput(Throughput::Elements(vertices as u64));
        group.bench_function(name, |b| {
            b.iter_custom(|iterations| {
                let mut timed = std::time::Duration::ZERO;
                for _ in 0..iterations {
                    let start = std::time::Instant::now();
                    black_box(rt.block_on(autoscaler.scale(&ctx))).expect("cycle");
                    timed += start.elapsed();
                    reload(&rt, &store, &p);
                }
                timed
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(5));
    // `cycle_exported` installs the process's recorder, so it runs after `cycle`.
    targets = bench_cycle, bench_cycle_exported
}
criterion_main!(benches);
