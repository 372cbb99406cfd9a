//! The convergence benchmark's agreed bounds, checked on every `cargo test`: over the thirteen
//! simulated workloads of `cargo run --release --example convergence`, with the reference's
//! defaults, the autoscaler needs a median of at most 2 rescales per load change, at most 3 in any,
//! and never oscillates. The README quotes the same summary line.

use autoscaler_sim::harness::{ConvergenceSummary, example_configuration, measure_convergence};
use autoscaler_sim::{Simulator, workloads};
use std::time::Duration;

#[tokio::test(flavor = "current_thread")]
async fn the_benchmark_workloads_converge_within_the_agreed_bounds() {
    let mut reports = Vec::new();
    for workload in workloads::benchmark() {
        let sim = Simulator::new(workload.job.clone()).expect("a valid workload");
        reports.push(
            measure_convergence(
                workload.name,
                sim,
                example_configuration(),
                Duration::from_secs(10),
                workload.horizon,
                0.7,
            )
            .await,
        );
    }
    let summary = ConvergenceSummary::of(&reports);
    println!("{summary}");
    assert_eq!(summary.workloads, 13, "{summary}");
    assert_eq!(
        summary.errors,
        0,
        "failed cycles: {:?}",
        reports.iter().map(|r| &r.errors).collect::<Vec<_>>()
    );
    assert!(summary.median_rescales <= 2.0, "{summary}");
    assert!(summary.max_rescales <= 3, "{summary}");
    assert_eq!(summary.oscillations, 0, "{summary}");
}
