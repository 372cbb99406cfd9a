//! Criterion benchmark of the evaluation stage: windowing (restart discard, trim) plus
//! `autoscaler_metrics::evaluate` on an already-loaded metric history of the bench scenarios
//! (`tests/fixtures/bench/`, byte-identical copies of `shared/bench-scenarios`).
//!
//! Parsing the scenario is not timed. `window+evaluate` clones the untrimmed history outside the
//! timed section (the window trims it in place); `evaluate` runs on the trimmed 60-sample window.
//!
//! `cargo bench --bench evaluate`

use autoscaler_metrics::{
    CollectedMetrics, EdgeSpec, EvaluationConfig, JobTopology, MetricHistory, MetricValues, ShipStrategy, VertexId,
    VertexSpec, apply_window, evaluate,
};
use chrono::{DateTime, Utc};
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

/// The parts of a `flink-autoscaler-scenario/1` file (metrics mode) the evaluation needs.
#[derive(Deserialize)]
struct ScenarioFile {
    now: DateTime<Utc>,
    #[serde(default)]
    config: BTreeMap<String, String>,
    job: Job,
    topology: Topology,
    metrics: Vec<Snapshot>,
}

#[derive(Deserialize)]
struct Job {
    running_since: DateTime<Utc>,
}

#[derive(Deserialize)]
struct Topology {
    vertices: Vec<Vertex>,
    #[serde(default)]
    edges: Vec<Edge>,
}

#[derive(Deserialize)]
struct Vertex {
    id: String,
    parallelism: u32,
    max_parallelism: u32,
    #[serde(default)]
    num_source_partitions: u32,
    #[serde(default)]
    finished: bool,
}

#[derive(Deserialize)]
struct Edge {
    from: String,
    to: String,
    ship_strategy: String,
}

#[derive(Deserialize)]
struct Snapshot {
    at: DateTime<Utc>,
    #[serde(default)]
    vertices: BTreeMap<VertexId, MetricValues>,
    #[serde(default)]
    global: MetricValues,
}

struct Loaded {
    now: DateTime<Utc>,
    running_since: DateTime<Utc>,
    window: Duration,
    stabilization: Duration,
    topology: JobTopology,
    history: MetricHistory,
}

fn load(name: &str) -> Loaded {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/bench")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let file: ScenarioFile = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let vertices = file
        .topology
        .vertices
        .into_iter()
        .map(|v| VertexSpec {
            num_source_partitions: v.num_source_partitions,
            finished: v.finished,
            ..VertexSpec::new(v.id, v.parallelism, v.max_parallelism)
        })
        .collect();
    let edges = file
        .topology
        .edges
        .into_iter()
        .map(|e| EdgeSpec::new(e.from, e.to, ShipStrategy::parse_lenient(&e.ship_strategy)))
        .collect();
    let topology = JobTopology::new_lenient(vertices, edges).unwrap_or_else(|e| panic!("{name}: {e}"));
    let history = file
        .metrics
        .into_iter()
        .map(|s| {
            (
                s.at,
                CollectedMetrics {
                    vertex_metrics: s.vertices,
                    global_metrics: s.global,
                },
            )
        })
        .collect();
    // The bench scenarios set exactly these two durations, in minutes.
    let minutes = |key: &str, default: u64| {
        let value = file.config.get(&format!("job.autoscaler.{key}"));
        let minutes = value
            .and_then(|v| v.trim().strip_suffix("min"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(default);
        Duration::from_secs(minutes * 60)
    };
    Loaded {
        now: file.now,
        running_since: file.job.running_since,
        window: minutes("metrics.window", 15),
        stabilization: minutes("stabilization.interval", 5),
        topology,
        history,
    }
}

fn bench_evaluate(c: &mut Criterion) {
    let config = EvaluationConfig::default();
    let mut group = c.benchmark_group("evaluate");
    for name in ["chain-10", "dag-100", "dag-1000"] {
        let job = load(&format!("{name}.json"));
        let mut window = job.history.clone();
        let status = apply_window(&mut window, job.running_since, job.now, job.stabilization, job.window);
        assert!(status.window_full, "{name}: the bench window is full");
        assert!(evaluate(&job.topology, &window, &config).is_ok(), "{name} evaluates");

        // Throughput in vertices, so criterion also reports the cost per vertex.
        group.throughput(Throughput::Elements(job.topology.len() as u64));
        if job.topology.len() >= 1000 {
            group.sample_size(30);
        } else {
            group.sample_size(100);
        }
        group.bench_function(format!("{name}/window+evaluate"), |b| {
            b.iter_batched(
                || job.history.clone(),
                |mut history| {
                    apply_window(&mut history, job.running_since, job.now, job.stabilization, job.window);
                    black_box(evaluate(&job.topology, &history, &config))
                },
                BatchSize::LargeInput,
            )
        });
        group.bench_function(format!("{name}/evaluate"), |b| {
            b.iter(|| black_box(evaluate(&job.topology, black_box(&window), &config)))
        });
    }
    group.finish();
}

criterion_group!(benches, bench_evaluate);
criterion_main!(benches);
