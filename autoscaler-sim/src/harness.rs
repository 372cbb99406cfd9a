//! Runs the real autoscaler (`JobAutoScalerImpl`) on a [`Simulator`], cycle by cycle on simulated
//! time, and measures how it converges: [`SimAutoscaler`], [`ConvergenceReport`].

use crate::adapters::{SimContext, SimHandle, SimMetricsCollector, SimScalingRealizer, sim_instant};
use crate::engine::Simulator;
use autoscaler_core::async_trait;
use autoscaler_core::plugins::PluginRegistry;
use autoscaler_core::{
    AutoScalerEventHandler, AutoScalerStateStore, EventType, MetricsCollector, config::Configuration,
};
use autoscaler_core::{CycleOutcome, JobAutoScalerImpl};
use autoscaler_metrics::ScalingMetric;
use autoscaler_state::InMemoryStateStore;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The autoscaler settings the examples and the benchmark use: the reference's defaults, except
/// the time scales, shortened so a run takes simulated minutes instead of hours (metric window
/// 3 min, stabilization 1 min, scale-down interval 5 min, catch-up 10 min, restart time 30 s —
/// the simulated restart downtime plus the scheduler's cooldown).
pub fn example_configuration() -> Configuration {
    let mut conf = Configuration::new();
    for (k, v) in [
        ("job.autoscaler.enabled", "true"),
        ("job.autoscaler.metrics.window", "3 min"),
        ("job.autoscaler.stabilization.interval", "1 min"),
        ("job.autoscaler.scale-down.interval", "5 min"),
        ("job.autoscaler.catch-up.duration", "10 min"),
        ("job.autoscaler.restart.time", "30 s"),
    ] {
        conf.set(k, v);
    }
    conf
}

/// An event the autoscaler emitted, kept for printing.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedEvent {
    /// Simulated time of the event.
    pub at: Duration,
    /// Normal or Warning.
    pub event_type: EventType,
    /// Event reason (`ScalingReport`, `AutoscalerError`, ...).
    pub reason: String,
    /// Event message.
    pub message: String,
}

/// An event handler that keeps every event in memory (no deduplication).
#[derive(Debug, Default)]
pub struct RecordingEventHandler {
    events: Mutex<Vec<RecordedEvent>>,
}

impl RecordingEventHandler {
    /// Removes and returns the events recorded so far.
    pub fn take(&self) -> Vec<RecordedEvent> {
        std::mem::take(&mut *self.events.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }
}

#[async_trait]
impl AutoScalerEventHandler<String, SimContext> for RecordingEventHandler {
    async fn handle_event(
        &self,
        ctx: &SimContext,
        event_type: EventType,
        reason: &str,
        message: &str,
        _message_key: Option<&str>,
        _interval: Option<Duration>,
    ) {
        let at = ctx.client.lock().now();
        let event = RecordedEvent {
            at,
            event_type,
            reason: reason.to_owned(),
            message: message.to_owned(),
        };
        self.events
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(event);
    }
}

/// What one vertex looked like in one cycle.
#[derive(Debug, Clone, PartialEq)]
pub struct VertexCycle {
    /// Vertex id.
    pub id: String,
    /// Parallelism when the cycle ran.
    pub parallelism: u32,
    /// Evaluated `TRUE_PROCESSING_RATE` (window average), NaN if not evaluated.
    pub true_processing_rate: f64,
    /// Evaluated `TARGET_DATA_RATE` (window average), NaN if not evaluated.
    pub target_data_rate: f64,
    /// The parallelism this cycle decided, if it scaled the vertex.
    pub decided: Option<u32>,
}

/// What one autoscaler cycle saw and did.
#[derive(Debug, Clone, PartialEq)]
pub struct CycleRecord {
    /// Simulated time of the cycle.
    pub at: Duration,
    /// The cycle's outcome, or its error message.
    pub outcome: Result<CycleOutcome, String>,
    /// Per-vertex view (evaluated metrics only when this cycle evaluated).
    pub vertices: Vec<VertexCycle>,
    /// Records waiting at the sources.
    pub backlog: f64,
}

impl CycleRecord {
    /// A short label of the outcome (`scale`, `no_change`, `window not full`, ...).
    pub fn outcome_label(&self) -> String {
        match &self.outcome {
            Ok(CycleOutcome::Decided(d)) => match d.outcome.reason() {
                Some(reason) => format!("{} ({reason})", d.outcome.as_str()),
                None => d.outcome.as_str().to_owned(),
            },
            Ok(CycleOutcome::WindowNotFull { stabilizing: true }) => "stabilizing".to_owned(),
            Ok(CycleOutcome::WindowNotFull { stabilizing: false }) => "window not full".to_owned(),
            Ok(CycleOutcome::NotReady(_)) | Ok(CycleOutcome::JobNotRunning) => "job restarting".to_owned(),
            Ok(CycleOutcome::InsufficientSamples) => "collecting".to_owned(),
            Ok(CycleOutcome::Disabled) => "disabled".to_owned(),
            Ok(CycleOutcome::Failed { step, message }) => format!("error in {step}: {message}"),
            Ok(other) => format!("{other:?}"),
            Err(e) => format!("error: {e}"),
        }
    }

    /// Whether this cycle decided to rescale.
    pub fn scaled(&self) -> bool {
        self.vertices.iter().any(|v| v.decided.is_some())
    }
}

/// The metrics collector a [`SimAutoscaler`] collects through ([`SimAutoscaler::wrapped`]).
pub type SimCollector = Arc<dyn MetricsCollector<String, SimContext>>;

/// The event handler a [`SimAutoscaler`] reports through ([`SimAutoscaler::wrapped`]).
pub type SimEventHandler = Arc<dyn AutoScalerEventHandler<String, SimContext>>;

/// The autoscaler wired to a simulator: the real `JobAutoScalerImpl` with the simulator's
/// collector and realizer, an in-memory state store and a recording event handler, on a clock
/// that reads simulated time. Each [`cycle`](Self::cycle) advances the simulation by the control
/// interval and runs one autoscaler cycle, as the standalone loop would.
pub struct SimAutoscaler {
    handle: SimHandle,
    configuration: Configuration,
    control_interval: Duration,
    autoscaler: JobAutoScalerImpl<String, SimContext>,
    store: Arc<InMemoryStateStore>,
    events: Arc<RecordingEventHandler>,
}

impl SimAutoscaler {
    /// An autoscaler for `sim` with `configuration`, cycling every `control_interval` of simulated time.
    pub fn new(sim: Simulator, configuration: Configuration, control_interval: Duration) -> Self {
        Self::wrapped(sim, configuration, control_interval, |collector, handler| {
            (collector, handler)
        })
    }

    /// As [`SimAutoscaler::new`], with the simulator's collector and the recording event handler
    /// passed through `wrap` before the autoscaler gets them: how a caller installs hooks around
    /// them (the facade's `flink-autoscaler run --record` wraps the collector in a recording
    /// collector and the handler in a decision publisher). A wrapper that drops the handler it is
    /// given leaves [`take_events`](Self::take_events) empty.
    pub fn wrapped(
        sim: Simulator,
        configuration: Configuration,
        control_interval: Duration,
        wrap: impl FnOnce(SimCollector, SimEventHandler) -> (SimCollector, SimEventHandler),
    ) -> Self {
        let handle = SimHandle::new(sim);
        let store = Arc::new(InMemoryStateStore::new());
        let events = Arc::new(RecordingEventHandler::default());
        let (collector, handler) = wrap(Arc::new(SimMetricsCollector), events.clone());
        let autoscaler = JobAutoScalerImpl::new(collector, store.clone(), Arc::new(SimScalingRealizer), handler)
            .with_clock(handle.clock());
        Self {
            handle,
            configuration,
            control_interval,
            autoscaler,
            store,
            events,
        }
    }

    /// Offers the plugins of `registry` to the autoscaler; the configuration selects them by name
    /// ([`JobAutoScalerImpl::with_plugins`]).
    pub fn with_plugins(mut self, registry: PluginRegistry) -> Self {
        self.autoscaler = self.autoscaler.with_plugins(registry);
        self
    }

    /// The simulator handle.
    pub fn handle(&self) -> &SimHandle {
        &self.handle
    }

    /// Events emitted since the last call.
    pub fn take_events(&self) -> Vec<RecordedEvent> {
        self.events.take()
    }

    /// Advances the simulation by one control interval, then runs one autoscaler cycle.
    pub async fn cycle(&mut self) -> CycleRecord {
        self.handle.advance(self.control_interval);
        let ctx = self.handle.context(self.configuration.clone());
        let outcome = self.autoscaler.run_cycle(&ctx).await.map_err(|e| e.to_string());
        let at = self.handle.lock().now();
        let now = sim_instant(at);
        let evaluated = match &outcome {
            Ok(CycleOutcome::Decided(_) | CycleOutcome::WindowNotFull { .. }) => {
                self.store.get_evaluated_metrics(&ctx).await.ok().flatten()
            }
            _ => None,
        };
        let history = self.store.get_scaling_history(&ctx).await.unwrap_or_default();
        let parallelism = ctx_parallelism(&ctx);
        let vertices = parallelism
            .into_iter()
            .map(|(id, p)| {
                let metric = |m: ScalingMetric| {
                    evaluated
                        .as_ref()
                        .and_then(|e| e.vertices.get(id.as_str()))
                        .map_or(f64::NAN, |v| v.get_or_absent(m).average)
                };
                let decided = history
                    .get(id.as_str())
                    .and_then(|h| h.get(&now))
                    .map(|s| s.new_parallelism);
                VertexCycle {
                    true_processing_rate: metric(ScalingMetric::TrueProcessingRate),
                    target_data_rate: metric(ScalingMetric::TargetDataRate),
                    decided,
                    parallelism: p,
                    id,
                }
            })
            .collect();
        let backlog = self.handle.lock().total_backlog();
        CycleRecord {
            at,
            outcome,
            vertices,
            backlog,
        }
    }

    /// Runs cycles until `stable_for` has passed without a rescale (decided, delayed or applied)
    /// and with no meaningful backlog, or until simulated time `limit`; calls `on_cycle` after every cycle.
    /// Returns whether it became stable.
    pub async fn run_until_stable(
        &mut self,
        stable_for: Duration,
        limit: Duration,
        mut on_cycle: impl FnMut(&CycleRecord),
    ) -> bool {
        let mut last_change = self.handle.lock().now();
        while self.handle.lock().now() < limit {
            let record = self.cycle().await;
            on_cycle(&record);
            // A scale-down the autoscaler is still delaying is a change to come.
            let ctx = self.handle.context(self.configuration.clone());
            let delaying = self
                .store
                .get_delayed_scale_down(&ctx)
                .await
                .is_ok_and(|d| !d.delayed_vertices.is_empty());
            let sim = self.handle.lock();
            let pending = sim.requirements() != sim.parallelism();
            let last_rescale = sim
                .rescales()
                .last()
                .map_or(Duration::ZERO, |r| Duration::from_millis(r.at_ms));
            if record.scaled() || pending || delaying {
                last_change = record.at;
            }
            last_change = last_change.max(last_rescale);
            let rates = sim.steady_input_rates(record.at.as_secs_f64());
            let source_rate: f64 = sim
                .job()
                .vertices
                .iter()
                .zip(&rates)
                .filter(|(v, _)| v.source.is_some())
                .map(|(_, r)| r)
                .sum();
            // "No meaningful backlog": less than ten seconds of input waiting.
            let drained = record.backlog <= (10.0 * source_rate).max(1.0);
            if drained && !pending && record.at >= last_change + stable_for {
                return true;
            }
        }
        false
    }

    /// Runs cycles until simulated time `end`, calling `on_cycle` after each.
    pub async fn run_until(&mut self, end: Duration, mut on_cycle: impl FnMut(&CycleRecord)) {
        while self.handle.lock().now() < end {
            let record = self.cycle().await;
            on_cycle(&record);
        }
    }
}

/// Current parallelism per vertex, in the job's declaration order.
fn ctx_parallelism(ctx: &SimContext) -> Vec<(String, u32)> {
    let sim = ctx.client.lock();
    let parallelism = sim.parallelism();
    sim.job()
        .vertices
        .iter()
        .map(|v| (v.id.clone(), parallelism.get(&v.id).copied().unwrap_or(0)))
        .collect()
}

/// How the autoscaler did in one load phase (between two load changes).
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseReport {
    /// Phase start (simulated).
    pub start: Duration,
    /// Phase end (simulated).
    pub end: Duration,
    /// Rescales applied during the phase.
    pub rescales: usize,
    /// Parallelism per vertex at the end of the phase.
    pub final_parallelism: BTreeMap<String, u32>,
    /// The simulator's optimum per vertex for the phase's load at the target utilization.
    pub optimal_parallelism: BTreeMap<String, u32>,
    /// Σ final / Σ optimum − 1 (negative: under-provisioned).
    pub over_provisioning: f64,
    /// Time in the phase during which the source backlog grew.
    pub backlog_growing: Duration,
    /// Direction reversals (a vertex scaled up then down, or down then up) during the phase.
    pub reversals: usize,
    /// Vertices that reversed direction twice or more in the phase (up-down-up): oscillations.
    pub oscillations: usize,
    /// `busyTimeMsPerSecond / 1000` of the busiest subtask per vertex at the end of the phase.
    pub final_busy: BTreeMap<String, f64>,
}

/// How the autoscaler did on one workload.
#[derive(Debug, Clone, PartialEq)]
pub struct ConvergenceReport {
    /// Workload name.
    pub name: String,
    /// One entry per load phase.
    pub phases: Vec<PhaseReport>,
    /// Cycles that failed (their messages).
    pub errors: Vec<String>,
    /// Every rescale applied during the run.
    pub rescales: Vec<crate::engine::RescaleEvent>,
}

/// The convergence benchmark's one-line summary over every phase of every workload: the numbers
/// the README quotes and `tests/convergence_bounds.rs` holds to the agreed bounds.
#[derive(Debug, Clone, PartialEq)]
pub struct ConvergenceSummary {
    /// Workloads measured.
    pub workloads: usize,
    /// Median rescales per load change (phase).
    pub median_rescales: f64,
    /// Most rescales in one load change.
    pub max_rescales: usize,
    /// Median over-provisioning at a phase's end, in percent.
    pub median_over_provisioning: f64,
    /// Largest over-provisioning at a phase's end, in percent.
    pub max_over_provisioning: f64,
    /// Oscillations (a vertex reversing direction twice or more in a phase), summed.
    pub oscillations: usize,
    /// Failed cycles, summed.
    pub errors: usize,
}

impl ConvergenceSummary {
    /// Summarizes `reports`.
    pub fn of(reports: &[ConvergenceReport]) -> Self {
        let phases = || reports.iter().flat_map(|r| r.phases.iter());
        let mut rescales: Vec<f64> = phases().map(|p| p.rescales as f64).collect();
        let mut over: Vec<f64> = phases().map(|p| p.over_provisioning * 100.0).collect();
        Self {
            workloads: reports.len(),
            median_rescales: median(&mut rescales),
            max_rescales: phases().map(|p| p.rescales).max().unwrap_or(0),
            median_over_provisioning: median(&mut over),
            max_over_provisioning: over.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            oscillations: phases().map(|p| p.oscillations).sum(),
            errors: reports.iter().map(|r| r.errors.len()).sum(),
        }
    }
}

/// `workloads: N, rescales per load change: median M max X, over-provisioning: median P% max Q%,
/// oscillations: O`.
impl std::fmt::Display for ConvergenceSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "workloads: {}, rescales per load change: median {} max {}, over-provisioning: median {:.0}% max {:.0}%, \
             oscillations: {}",
            self.workloads,
            self.median_rescales,
            self.max_rescales,
            self.median_over_provisioning,
            self.max_over_provisioning,
            self.oscillations
        )
    }
}

/// The median (the mean of the middle two for an even count; NaN when empty). Sorts `values`.
fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// Runs `sim` under the autoscaler until `horizon`, cutting the run into load phases at the
/// sources' change points (each phase is one "load change", the first being the initial
/// deployment), and measures each phase at its end against the simulator's optimum at
/// `utilization`.
pub async fn measure_convergence(
    name: &str,
    sim: Simulator,
    configuration: Configuration,
    control_interval: Duration,
    horizon: Duration,
    utilization: f64,
) -> ConvergenceReport {
    let mut boundaries: Vec<f64> = sim
        .job()
        .vertices
        .iter()
        .filter_map(|v| v.source.as_ref())
        .flat_map(|s| s.profile.change_points(horizon.as_secs_f64()))
        .collect();
    boundaries.sort_by(f64::total_cmp);
    boundaries.dedup_by(|a, b| (*a - *b).abs() < 1.0);
    boundaries.push(horizon.as_secs_f64());
    let mut auto = SimAutoscaler::new(sim, configuration, control_interval);
    let mut phases = Vec::new();
    let mut errors = Vec::new();
    let mut start = Duration::ZERO;
    for end_secs in boundaries {
        let end = Duration::from_secs_f64(end_secs);
        let growing_before = auto.handle.lock().backlog_growing_time();
        auto.run_until(end, |c| {
            if let Err(e) = &c.outcome {
                errors.push(format!("{:?}: {e}", c.at));
            }
        })
        .await;
        let sim = auto.handle.lock();
        let in_phase: Vec<_> = sim
            .rescales()
            .iter()
            .filter(|r| r.at_ms >= start.as_millis() as u64 && r.at_ms < end.as_millis() as u64)
            .collect();
        let (reversals, oscillations) = count_reversals(&in_phase);
        let final_parallelism = sim.parallelism();
        // The optimum for the load just before the phase ends.
        let optimal_parallelism = sim.optimal_parallelism((end.as_secs_f64() - 1.0).max(0.0), utilization);
        let total = |m: &BTreeMap<String, u32>| m.values().map(|p| f64::from(*p)).sum::<f64>();
        let final_busy = sim
            .job()
            .vertices
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let busiest = sim
                    .subtask_meters(i)
                    .iter()
                    .map(|m| m.busy_ms_per_sec / 1000.0)
                    .fold(0.0, f64::max);
                (v.id.clone(), busiest)
            })
            .collect();
        phases.push(PhaseReport {
            start,
            end,
            rescales: in_phase.len(),
            over_provisioning: total(&final_parallelism) / total(&optimal_parallelism).max(1.0) - 1.0,
            final_parallelism,
            optimal_parallelism,
            backlog_growing: sim.backlog_growing_time().saturating_sub(growing_before),
            reversals,
            oscillations,
            final_busy,
        });
        start = end;
    }
    let rescales = auto.handle.lock().rescales().to_vec();
    ConvergenceReport {
        name: name.to_owned(),
        phases,
        errors,
        rescales,
    }
}

/// Counts, over `rescales`, direction reversals per vertex and vertices with two or more.
fn count_reversals(rescales: &[&crate::engine::RescaleEvent]) -> (usize, usize) {
    let mut directions: BTreeMap<&str, Vec<i8>> = BTreeMap::new();
    for r in rescales {
        for (id, to) in &r.to {
            let from = r.from.get(id).copied().unwrap_or(*to);
            if *to != from {
                directions
                    .entry(id.as_str())
                    .or_default()
                    .push(if *to > from { 1 } else { -1 });
            }
        }
    }
    let mut reversals = 0;
    let mut oscillations = 0;
    for dirs in directions.values() {
        let n = dirs.windows(2).filter(|w| w[0] != w[1]).count();
        reversals += n;
        if n >= 2 {
            oscillations += 1;
        }
    }
    (reversals, oscillations)
}

#[cfg(test)]
mod summary_tests {
    use super::*;

    fn phase(rescales: usize, over_provisioning: f64, oscillations: usize) -> PhaseReport {
        PhaseReport {
            start: Duration::ZERO,
            end: Duration::from_secs(60),
            rescales,
            final_parallelism: BTreeMap::new(),
            optimal_parallelism: BTreeMap::new(),
            over_provisioning,
            backlog_growing: Duration::ZERO,
            reversals: oscillations * 2,
            oscillations,
            final_busy: BTreeMap::new(),
        }
    }

    #[test]
    fn the_summary_takes_medians_and_maxima_over_every_phase() {
        let report = |name: &str, phases| ConvergenceReport {
            name: name.into(),
            phases,
            errors: vec![],
            rescales: vec![],
        };
        // Phases' rescales 1, 3, 0, 2 → sorted 0 1 2 3, median (1 + 2) / 2 = 1.5, max 3.
        // Over-provisioning 10%, 40%, -5%, 20% → sorted -5 10 20 40, median 15%, max 40%.
        let reports = [
            report("a", vec![phase(1, 0.10, 0), phase(3, 0.40, 1)]),
            report("b", vec![phase(0, -0.05, 0), phase(2, 0.20, 0)]),
        ];
        let summary = ConvergenceSummary::of(&reports);
        assert_eq!(summary.median_rescales, 1.5);
        assert_eq!(summary.max_rescales, 3);
        assert!((summary.median_over_provisioning - 15.0).abs() < 1e-9);
        assert!((summary.max_over_provisioning - 40.0).abs() < 1e-9);
        assert_eq!(summary.oscillations, 1);
        assert_eq!(
            summary.to_string(),
            "workloads: 2, rescales per load change: median 1.5 max 3, over-provisioning: median 15% max 40%, \
             oscillations: 1"
        );
    }

    #[test]
    fn the_median_of_an_odd_count_is_the_middle_value() {
        assert_eq!(median(&mut [5.0, 1.0, 3.0]), 3.0);
        assert!(median(&mut []).is_nan());
    }
}
