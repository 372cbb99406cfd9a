//! A quick timing of window + evaluation on the benchmark scenarios (no assertion on time).
//!
//! `cargo test --release -p autoscaler-metrics --test evaluation_timing -- --ignored --nocapture`

mod common;

use autoscaler_metrics::{EvaluationConfig, apply_window, evaluate};
use common::{fixture, load_scenario};
use std::hint::black_box;
use std::time::Instant;

fn median_micros(mut run: impl FnMut(), iterations: usize) -> f64 {
    let mut samples: Vec<f64> = (0..iterations)
        .map(|_| {
            let start = Instant::now();
            run();
            start.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

#[test]
#[ignore = "timing only; run in release with --ignored --nocapture"]
fn time_window_and_evaluate() {
    let paths = [
        fixture("chain-10.json"),
        fixture("dag-100.json"),
        fixture("dag-1000.json"),
    ];
    let config = EvaluationConfig::default();
    for path in paths {
        let scenario = load_scenario(&path);
        let vertices = scenario.topology.len();
        let mut trimmed = scenario.history.clone();
        apply_window(
            &mut trimmed,
            scenario.running_since,
            scenario.now,
            scenario.stabilization,
            scenario.window,
        );
        let evaluate_only = median_micros(
            || {
                black_box(evaluate(&scenario.topology, black_box(&trimmed), &config, None).ok());
            },
            2000,
        );
        let window_and_evaluate = median_micros(
            || {
                let mut history = scenario.history.clone();
                apply_window(
                    &mut history,
                    scenario.running_since,
                    scenario.now,
                    scenario.stabilization,
                    scenario.window,
                );
                black_box(evaluate(&scenario.topology, &history, &config, None).ok());
            },
            500,
        );
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        println!(
            "{name}: {vertices} vertices x {} samples: evaluate median {evaluate_only:.1} us ({:.3} us/vertex); \
             clone+window+evaluate {window_and_evaluate:.1} us",
            trimmed.len(),
            evaluate_only / vertices as f64,
        );
    }
}
