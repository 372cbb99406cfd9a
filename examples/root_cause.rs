//! Precision and recall of the root-cause rule on the simulator, which knows the true bottleneck.
//!
//! ```text
//! cargo run --release --example root_cause            # add --verbose for every case
//! ```
//!
//! Cases: the thirteen convergence workloads and five more (a slow sink, a slow middle operator
//! behind a busy one, a source that is itself the bottleneck, a DAG whose one branch is slow, a
//! healthy job). For every load phase of a workload (its sources' rates frozen at the middle of the
//! phase) the job runs as deployed, at the simulator's optimum for 70% utilization, and at that
//! optimum with each vertex in turn slowed to half its capacity.
//!
//! Truth, per case (`sim::bottleneck`): a vertex is a true bottleneck when 1.5× its capacity raises
//! what the sources take in by more than 0.5% (deterministic runs: 3 min warm-up, 3 min window).
//! Verdict: `autoscaler_metrics::root_cause` on the `LOAD` and `BACKPRESSURE` snapshots of the
//! baseline run's window (every 10 s, converted as a collector would). A predicted bottleneck is a
//! true positive if it is a true bottleneck; precision = TP / (TP + FP), recall = TP / (TP + FN).

use autoscaler_sim::bottleneck::{CaseOutcome, Score, TruthSettings, evaluate_case, situations, variants};
use autoscaler_sim::workloads::{self, Workload};
use std::time::Instant;

fn set(s: &std::collections::BTreeSet<String>) -> String {
    if s.is_empty() {
        "-".to_owned()
    } else {
        s.iter().cloned().collect::<Vec<_>>().join(",")
    }
}

fn main() -> anyhow::Result<()> {
    let verbose = std::env::args().any(|a| a == "--verbose");
    let settings = TruthSettings::default();
    let started = Instant::now();
    let mut total = Score::default();
    let (mut exact, mut cases, mut victims_right, mut victims) = (0, 0, 0, 0);
    println!(
        "{:<17} {:>5} {:>4} {:>4} {:>4} {:>9} {:>7} {:>13}",
        "workload", "cases", "TP", "FP", "FN", "precision", "recall", "exact cases"
    );
    let mut all: Vec<(&'static str, Workload)> = workloads::benchmark().into_iter().map(|w| ("bench", w)).collect();
    all.extend(situations().into_iter().map(|w| ("extra", w)));
    for (_, workload) in &all {
        let mut score = Score::default();
        let mut workload_exact = 0;
        let list = variants(&workload.job, workload.horizon)?;
        for (label, job) in &list {
            let outcome: CaseOutcome = evaluate_case(job, &settings)?;
            score.add(&outcome);
            let (right, all_victims) = outcome.victims_naming_a_true_bottleneck();
            victims_right += right;
            victims += all_victims;
            let matched = outcome.truth == outcome.predicted;
            workload_exact += usize::from(matched);
            if verbose || !matched {
                println!(
                    "  {:<15} {:<38} truth {:<18} rule {:<18} {}",
                    workload.name,
                    label,
                    set(&outcome.truth),
                    set(&outcome.predicted),
                    if matched { "" } else { "MISMATCH" }
                );
            }
            if !matched {
                // The signals the rule read, to see why.
                let signals: Vec<String> = outcome
                    .explanation
                    .vertices
                    .iter()
                    .map(|(id, v)| {
                        format!(
                            "{id} L={:.3} B={:.3}",
                            v.load.unwrap_or(f64::NAN),
                            v.backpressure.unwrap_or(f64::NAN)
                        )
                    })
                    .collect();
                println!("      signals: {}", signals.join(", "));
            }
        }
        println!(
            "{:<17} {:>5} {:>4} {:>4} {:>4} {:>9.3} {:>7.3} {:>8}/{:<4}",
            workload.name,
            list.len(),
            score.tp,
            score.fp,
            score.fn_,
            score.precision(),
            score.recall(),
            workload_exact,
            list.len()
        );
        total.tp += score.tp;
        total.fp += score.fp;
        total.fn_ += score.fn_;
        exact += workload_exact;
        cases += list.len();
    }
    println!(
        "workloads: {}, cases: {cases}, bottlenecks: precision {:.3} recall {:.3} (TP {} FP {} FN {}), \
         exact bottleneck set: {exact}/{cases}, backpressured vertices naming a true bottleneck: {victims_right}/{victims} \
         ({:.1} s)",
        all.len(),
        total.precision(),
        total.recall(),
        total.tp,
        total.fp,
        total.fn_,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
