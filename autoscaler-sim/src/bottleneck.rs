//! Ground truth for the root-cause rule ([`autoscaler_metrics::root_cause`]): which vertices really
//! hold a simulated job back, and what the rule says about the same run.
//!
//! The simulator knows the true bottleneck by experiment: a vertex is a *true bottleneck* when
//! giving it more capacity (×1.5 per subtask) raises the job's throughput (the records its sources
//! take in over the measurement window) by more than 0.5%, every other input held equal. A healthy
//! job takes in everything that arrives, so no vertex counts. The runs are deterministic (same
//! seed, same arrival noise), so any gain is caused by the relieved vertex.
//!
//! The rule's verdict comes from the baseline run: a snapshot of the Flink metrics every 10 s over
//! the same window, converted exactly as a collector would ([`convert_to_scaling_metrics`]), then
//! [`root_cause::explain`].
//!
//! ```
//! use autoscaler_sim::bottleneck::{TruthSettings, evaluate_case};
//! use autoscaler_sim::{RateProfile, SimEdge, SimJob, SimVertex};
//! use autoscaler_metrics::ShipStrategy;
//!
//! // 2,000 records/s into a sink that does 1,000/s.
//! let job = SimJob::new("slow-sink")
//!     .vertex(SimVertex::source("src", 10_000.0, 1, RateProfile::Constant { rate: 2_000.0 }))
//!     .vertex(SimVertex::new("sink", 1_000.0, 1))
//!     .edge(SimEdge::new("src", "sink", ShipStrategy::Rebalance));
//! let outcome = evaluate_case(&job, &TruthSettings::quick()).unwrap();
//! assert_eq!(outcome.truth, ["sink".to_owned()].into());
//! assert_eq!(outcome.predicted, outcome.truth);
//! ```

use crate::engine::Simulator;
use crate::job::{SimEdge, SimVertex};
use crate::job::{SimError, SimJob};
use crate::profile::RateProfile;
use crate::workloads::Workload;
use autoscaler_metrics::ShipStrategy::{Hash, Rebalance};
use autoscaler_metrics::collection::{CollectionConfig, convert_to_scaling_metrics};
use autoscaler_metrics::root_cause::{self, Explanation, Role};
use autoscaler_metrics::{MetricHistory, VertexId};
use chrono::{DateTime, Utc};
use std::collections::BTreeSet;
use std::time::Duration;

/// How long the runs are and how the truth is decided.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TruthSettings {
    /// Simulated time before the measurement window (buffers fill, meters settle).
    pub warmup: Duration,
    /// The measurement window: throughput and the rule's samples.
    pub window: Duration,
    /// Interval between metric snapshots in the window.
    pub sample_every: Duration,
    /// Capacity multiplier of the relieved vertex.
    pub relief: f64,
    /// Relative throughput gain above which the relieved vertex is a true bottleneck.
    pub min_gain: f64,
}

impl Default for TruthSettings {
    /// Warm-up 3 min, window 3 min (the examples' metric window), a snapshot every 10 s,
    /// relief ×1.5, gain 0.5%.
    fn default() -> Self {
        Self {
            warmup: Duration::from_secs(180),
            window: Duration::from_secs(180),
            sample_every: Duration::from_secs(10),
            relief: 1.5,
            min_gain: 0.005,
        }
    }
}

impl TruthSettings {
    /// Shorter runs for tests: warm-up 2 min, window 1 min.
    pub fn quick() -> Self {
        Self {
            warmup: Duration::from_secs(120),
            window: Duration::from_secs(60),
            ..Self::default()
        }
    }
}

/// The truth and the rule's verdict on one job.
#[derive(Debug, Clone, PartialEq)]
pub struct CaseOutcome {
    /// The true bottlenecks (vertex ids).
    pub truth: BTreeSet<String>,
    /// The vertices the rule calls bottlenecks.
    pub predicted: BTreeSet<String>,
    /// The rule's full explanation of the baseline run.
    pub explanation: Explanation,
    /// Records per second the sources took in during the window (baseline).
    pub throughput: f64,
}

impl CaseOutcome {
    /// Backpressured vertices (by the rule) that name a true bottleneck, and all backpressured vertices.
    pub fn victims_naming_a_true_bottleneck(&self) -> (usize, usize) {
        let victims: Vec<_> = self
            .explanation
            .vertices
            .values()
            .filter(|v| v.role == Role::Backpressured)
            .collect();
        let right = victims
            .iter()
            .filter(|v| v.bottleneck.as_ref().is_some_and(|b| self.truth.contains(b.as_str())))
            .count();
        (right, victims.len())
    }
}

/// Counts of vertex verdicts: bottleneck predicted and true (`tp`), predicted only (`fp`), true only (`fn_`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Score {
    /// Predicted and true bottlenecks.
    pub tp: usize,
    /// Predicted bottlenecks that are not true ones.
    pub fp: usize,
    /// True bottlenecks not predicted.
    pub fn_: usize,
}

impl Score {
    /// Adds one case's verdicts.
    pub fn add(&mut self, outcome: &CaseOutcome) {
        self.tp += outcome.predicted.intersection(&outcome.truth).count();
        self.fp += outcome.predicted.difference(&outcome.truth).count();
        self.fn_ += outcome.truth.difference(&outcome.predicted).count();
    }

    /// tp / (tp + fp); 1 when nothing was predicted.
    pub fn precision(&self) -> f64 {
        ratio(self.tp, self.tp + self.fp)
    }

    /// tp / (tp + fn); 1 when there was nothing to find.
    pub fn recall(&self) -> f64 {
        ratio(self.tp, self.tp + self.fn_)
    }
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 { 1.0 } else { a as f64 / b as f64 }
}

fn instant(at: Duration) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(1_700_000_000_000 + at.as_millis() as i64).unwrap_or_default()
}

/// Runs `job` for warm-up plus window and returns the records/s its sources took in during the
/// window, and the window's metric history (when `sample` is set).
fn run(job: &SimJob, settings: &TruthSettings, sample: bool) -> Result<(f64, MetricHistory), SimError> {
    let mut sim = Simulator::new(job.clone())?;
    let sources: Vec<usize> = (0..job.vertices.len())
        .filter(|i| job.vertices[*i].source.is_some())
        .collect();
    let taken = |sim: &Simulator| sources.iter().map(|i| sim.totals().processed[*i]).sum::<f64>();
    sim.advance(settings.warmup);
    let before = taken(&sim);
    let mut history = MetricHistory::new();
    let topology = sim.topology()?;
    let config = CollectionConfig::default();
    let step = settings.sample_every.max(Duration::from_secs(1));
    let mut elapsed = Duration::ZERO;
    while elapsed < settings.window {
        let chunk = step.min(settings.window - elapsed);
        sim.advance(chunk);
        elapsed += chunk;
        if sample && let Some(raw) = sim.flink_metrics() {
            let snapshot = convert_to_scaling_metrics(&topology, &raw, &config, &history);
            history.insert(instant(sim.now()), snapshot);
        }
    }
    let secs = settings.window.as_secs_f64().max(1e-9);
    Ok(((taken(&sim) - before) / secs, history))
}

/// The vertices whose relief raises the throughput of `job` by more than `min_gain`.
pub fn true_bottlenecks(job: &SimJob, settings: &TruthSettings) -> Result<BTreeSet<String>, SimError> {
    let (base, _) = run(job, settings, false)?;
    let mut out = BTreeSet::new();
    for (i, v) in job.vertices.iter().enumerate() {
        let mut relieved = job.clone();
        relieved.vertices[i].capacity *= settings.relief;
        let (t, _) = run(&relieved, settings, false)?;
        if t > base * (1.0 + settings.min_gain) {
            out.insert(v.id.clone());
        }
    }
    Ok(out)
}

/// The truth and the rule's verdict for `job`.
pub fn evaluate_case(job: &SimJob, settings: &TruthSettings) -> Result<CaseOutcome, SimError> {
    let (throughput, history) = run(job, settings, true)?;
    let topology = Simulator::new(job.clone())?.topology()?;
    let explanation = root_cause::explain(&topology, &history).unwrap_or_default();
    let predicted = explanation.bottlenecks.iter().map(VertexId::to_string).collect();
    Ok(CaseOutcome {
        truth: true_bottlenecks(job, settings)?,
        predicted,
        explanation,
        throughput,
    })
}

/// `job` with every source's arrival rate frozen at its rate at `t_secs` (a constant profile).
pub fn frozen_at(job: &SimJob, t_secs: f64) -> SimJob {
    let mut out = job.clone();
    for v in &mut out.vertices {
        if let Some(s) = &mut v.source {
            s.profile = RateProfile::Constant {
                rate: s.profile.rate_at(t_secs),
            };
        }
    }
    out
}

/// The jobs a workload contributes to the measurement, labelled: for the source rates in the middle
/// of each load phase before `horizon` (distinct rate sets only), the job at its own parallelism,
/// at the simulator's optimum for 70% utilization, and at that optimum with each vertex in turn
/// slowed to half its capacity (a slow operator, a slow sink, a slow source).
pub fn variants(job: &SimJob, horizon: Duration) -> Result<Vec<(String, SimJob)>, SimError> {
    let horizon_secs = horizon.as_secs_f64();
    let mut points: Vec<f64> = job
        .vertices
        .iter()
        .filter_map(|v| v.source.as_ref())
        .flat_map(|s| s.profile.change_points(horizon_secs))
        .filter(|t| *t > 0.0 && *t < horizon_secs)
        .collect();
    points.push(0.0);
    points.push(horizon_secs);
    points.sort_by(f64::total_cmp);
    points.dedup_by(|a, b| (*a - *b).abs() < 1.0);
    let mut seen_rates: Vec<Vec<f64>> = Vec::new();
    let mut out = Vec::new();
    for pair in points.windows(2) {
        let mid = (pair[0] + pair[1]) / 2.0;
        let frozen = frozen_at(job, mid);
        let rates: Vec<f64> = frozen
            .vertices
            .iter()
            .filter_map(|v| v.source.as_ref().map(|s| s.profile.rate_at(0.0)))
            .collect();
        if seen_rates.iter().any(|r| {
            r.iter()
                .zip(&rates)
                .all(|(a, b)| (a - b).abs() <= 0.01 * a.abs().max(1.0))
        }) {
            continue;
        }
        seen_rates.push(rates);
        let at = format!("t={:.0}min", mid / 60.0);
        out.push((format!("{at} as deployed"), frozen.clone()));
        let optimum = Simulator::new(frozen.clone())?.optimal_parallelism(0.0, 0.7);
        let mut optimal = frozen.clone();
        for v in &mut optimal.vertices {
            v.parallelism = optimum.get(&v.id).copied().unwrap_or(v.parallelism);
        }
        out.push((format!("{at} at optimum"), optimal.clone()));
        for i in 0..optimal.vertices.len() {
            let mut slowed = optimal.clone();
            slowed.vertices[i].capacity *= 0.5;
            out.push((format!("{at} optimum, {} slowed x0.5", slowed.vertices[i].id), slowed));
        }
    }
    Ok(out)
}

/// The five hand-made root-cause situations (as deployed, each has the named true bottleneck):
/// `slow-sink` (sink), `slow-behind-busy` (aggregate, behind an 80%-busy parse), `slow-source`
/// (source), `dag-slow-branch` (enrich, not its sibling filter) and `healthy` (none).
pub fn situations() -> Vec<Workload> {
    let hour = Duration::from_secs(3600);
    let constant = |rate: f64| RateProfile::Constant { rate };
    vec![
        Workload {
            name: "slow-sink",
            description: "source -> map -> sink that does 1,500/s of the 3,000/s",
            job: SimJob::new("slow-sink")
                .vertex(SimVertex::source("source", 10_000.0, 1, constant(3_000.0)))
                .vertex(SimVertex::new("map", 8_000.0, 1))
                .vertex(SimVertex::new("sink", 1_500.0, 1))
                .edge(SimEdge::new("source", "map", Rebalance))
                .edge(SimEdge::new("map", "sink", Hash)),
            horizon: hour,
        },
        Workload {
            name: "slow-behind-busy",
            description: "source -> busy parse (80% at full rate) -> slow aggregate -> sink",
            job: SimJob::new("slow-behind-busy")
                .vertex(SimVertex::source("source", 10_000.0, 1, constant(4_000.0)))
                .vertex(SimVertex::new("parse", 5_000.0, 1))
                .vertex(SimVertex::new("aggregate", 2_500.0, 1))
                .vertex(SimVertex::new("sink", 10_000.0, 1))
                .edge(SimEdge::new("source", "parse", Rebalance))
                .edge(SimEdge::new("parse", "aggregate", Hash))
                .edge(SimEdge::new("aggregate", "sink", Rebalance)),
            horizon: hour,
        },
        Workload {
            name: "slow-source",
            description: "a source that reads 2,000/s of the 3,000/s arriving -> map -> sink",
            job: SimJob::new("slow-source")
                .vertex(SimVertex::source("source", 2_000.0, 1, constant(3_000.0)))
                .vertex(SimVertex::new("map", 6_000.0, 1))
                .vertex(SimVertex::new("sink", 6_000.0, 1))
                .edge(SimEdge::new("source", "map", Rebalance))
                .edge(SimEdge::new("map", "sink", Rebalance)),
            horizon: hour,
        },
        Workload {
            name: "dag-slow-branch",
            description: "source -> {enrich (slow), filter (fast)} -> sink",
            job: SimJob::new("dag-slow-branch")
                .vertex(SimVertex::source("source", 10_000.0, 1, constant(3_000.0)))
                .vertex(SimVertex::new("enrich", 2_000.0, 1))
                .vertex(SimVertex::new("filter", 5_000.0, 1))
                .vertex(SimVertex::new("sink", 10_000.0, 1))
                .edge(SimEdge::new("source", "enrich", Hash))
                .edge(SimEdge::new("source", "filter", Rebalance))
                .edge(SimEdge::new("enrich", "sink", Rebalance))
                .edge(SimEdge::new("filter", "sink", Rebalance)),
            horizon: hour,
        },
        Workload {
            name: "healthy",
            description: "source -> map -> sink, every vertex below 70% busy",
            job: SimJob::new("healthy")
                .vertex(SimVertex::source("source", 10_000.0, 1, constant(2_000.0)))
                .vertex(SimVertex::new("map", 3_000.0, 1))
                .vertex(SimVertex::new("sink", 4_000.0, 1))
                .edge(SimEdge::new("source", "map", Rebalance))
                .edge(SimEdge::new("map", "sink", Hash)),
            horizon: hour,
        },
    ]
}
