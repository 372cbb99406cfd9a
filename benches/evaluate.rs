//! Criterion benchmark of the evaluation stage: windowing (restart discard, trim) plus
//! `autoscaler_metrics::evaluate` on an already-loaded metric history of the bench scenarios
//! (`tests/fixtures/bench/`, the reference's benchmark inputs).
//!
//! Parsing the scenario is not timed. `window+evaluate` clones the untrimmed history outside the
//! timed section (the window trims it in place); `evaluate` runs on the trimmed 60-sample window.
//!
//! `cargo bench --bench evaluate`

use autoscaler_core::config::AutoScalerOptions;
use autoscaler_metrics::{EvaluationConfig, JobTopology, MetricHistory, apply_window, evaluate};
use autoscaler_replay::{ScenarioInput, parse_scenario};
use chrono::{DateTime, Utc};
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

/// What the evaluation needs from a bench scenario, parsed with the replay tool's own parser.
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
    let scenario = parse_scenario(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
    let options = AutoScalerOptions::from_configuration(&scenario.config).unwrap_or_else(|e| panic!("{name}: {e}"));
    let ScenarioInput::Metrics(snapshots) = scenario.input else {
        panic!("{name}: bench scenarios carry metrics")
    };
    Loaded {
        now: scenario.now,
        running_since: scenario
            .job
            .running_since
            .unwrap_or_else(|| panic!("{name}: running_since")),
        window: options.metrics_window,
        stabilization: options.stabilization_interval,
        topology: scenario.topology,
        history: snapshots.into_iter().collect(),
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
        assert!(
            evaluate(&job.topology, &window, &config, None).is_ok(),
            "{name} evaluates"
        );

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
                    black_box(evaluate(&job.topology, &history, &config, None))
                },
                BatchSize::LargeInput,
            )
        });
        group.bench_function(format!("{name}/evaluate"), |b| {
            b.iter(|| black_box(evaluate(&job.topology, black_box(&window), &config, None)))
        });
    }
    group.finish();
}

criterion_group!(benches, bench_evaluate);
criterion_main!(benches);
