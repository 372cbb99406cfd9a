//! Scripted fakes shared by the tests that drive `JobAutoScalerImpl::run_cycle`: a two-vertex job
//! `src -> sink` whose sink is 95% busy at parallelism 1 (a collector), a realizer that applies
//! overrides to it and records every call, an event handler that records every event, a context
//! that records gauges, and a harness on a settable clock.
//!
//! With the defaults the autoscaler waits for its 2 min window (cycles every 30 s from 10:00) and
//! scales the sink 1 -> 2 in the 5th cycle, at 10:02:00: its TPR 1000 / 0.95 = 1052.6/s is below
//! the scale-up threshold round(1000 / 0.9) = 1111/s, and the capacity it needs at the 0.7 target
//! with the 5 min restart allowance is round(1000 x 300/1800 + 1000/0.7) = 1595/s.

#![allow(dead_code)]

use autoscaler_core::{
    AutoScalerEventHandler, AutoscalerMetricsReporter, Clock, CollectError, CollectedJobMetrics, ConfigChanges,
    CycleOutcome, EventType, JobAutoScalerContext, JobAutoScalerImpl, JobStatus, ManualClock, MetricsCollector,
    MetricsSnapshot, ParallelismOverrides, RealizeError, ScalingRealizer, async_trait, config::AutoScalerOptions,
    config::Configuration, plugins::PluginRegistry, scaling::DecisionOutcome,
};
use autoscaler_metrics::{
    CollectedMetrics, EdgeSpec, JobTopology, MetricValues, ScalingMetric, ShipStrategy, VertexId, VertexSpec,
};
use autoscaler_state::InMemoryStateStore;
use chrono::{DateTime, Duration, TimeZone, Utc};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Locks, ignoring poisoning (a failed assertion elsewhere must not hide the first failure).
pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Records the gauges the autoscaler reports.
#[derive(Default)]
pub struct Gauges(pub Mutex<BTreeMap<String, f64>>);

impl AutoscalerMetricsReporter for Gauges {
    fn set_gauge(&self, name: &str, value: f64) {
        lock(&self.0).insert(name.to_owned(), value);
    }
}

/// The job's context: its configuration, status, TaskManager CPU and the recorded gauges.
pub struct Ctx {
    /// The job configuration.
    pub conf: Configuration,
    /// The job status the platform reports.
    pub status: Option<JobStatus>,
    /// TaskManager CPU, if known.
    pub cpu: Option<f64>,
    /// The gauges reported so far.
    pub gauges: Gauges,
}

impl JobAutoScalerContext<String> for Ctx {
    fn job_key(&self) -> &String {
        static KEY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        KEY.get_or_init(|| "job-1".to_owned())
    }
    fn job_id(&self) -> Option<&str> {
        None
    }
    fn job_status(&self) -> Option<JobStatus> {
        self.status
    }
    fn configuration(&self) -> &Configuration {
        &self.conf
    }
    fn task_manager_cpu(&self) -> Option<f64> {
        self.cpu
    }
    fn metrics_reporter(&self) -> &dyn AutoscalerMetricsReporter {
        &self.gauges
    }
}

/// `src -FORWARD-> sink`, the sink 95% busy at parallelism 1 with 1000 records/s in (its work
/// spread over its subtasks). With `memory_metrics` the TaskManagers also report a 500 MiB heap
/// and 80 MiB metaspace in use, no managed memory, and 2 task slots used.
pub struct ScriptedJob {
    /// Current parallelism of (src, sink).
    pub parallelism: Mutex<(u32, u32)>,
    /// When the job last switched to RUNNING.
    pub running_since: Mutex<DateTime<Utc>>,
    /// Time 0 of the record counters.
    pub start: DateTime<Utc>,
    /// Whether the next collection fails (then resets).
    pub fail_next: Mutex<bool>,
    /// Whether the TaskManager memory and slot metrics are reported.
    pub memory_metrics: bool,
}

impl ScriptedJob {
    /// The job graph at the current parallelism.
    pub fn topology(&self) -> Result<JobTopology, CollectError> {
        let (src, sink) = *lock(&self.parallelism);
        JobTopology::new(
            vec![VertexSpec::new("src", src, 128), VertexSpec::new("sink", sink, 128)],
            vec![EdgeSpec::new("src", "sink", ShipStrategy::Forward)],
        )
        .map_err(|e| CollectError::Failed(e.to_string()))
    }
}

#[async_trait]
impl MetricsCollector<String, Ctx> for ScriptedJob {
    async fn collect(
        &self,
        _ctx: &Ctx,
        _options: &AutoScalerOptions,
        now: DateTime<Utc>,
    ) -> Result<CollectedJobMetrics, CollectError> {
        if std::mem::take(&mut *lock(&self.fail_next)) {
            return Err(CollectError::Failed("metrics endpoint answered 500".into()));
        }
        let (_, sink_parallelism) = *lock(&self.parallelism);
        let records = 1000.0 * (now - self.start).num_seconds() as f64;
        let mut src = MetricValues::new();
        src.insert(ScalingMetric::NumRecordsIn, records);
        src.insert(ScalingMetric::NumRecordsOut, records);
        src.insert(ScalingMetric::Load, 0.5);
        src.insert(ScalingMetric::Lag, 0.0);
        let mut sink = MetricValues::new();
        sink.insert(ScalingMetric::NumRecordsIn, records);
        sink.insert(ScalingMetric::NumRecordsInPerSecond, 1000.0);
        sink.insert(ScalingMetric::Load, 0.95 / f64::from(sink_parallelism));
        let mut metrics = CollectedMetrics::default();
        metrics.vertex_metrics.insert(VertexId::new("src"), src);
        metrics.vertex_metrics.insert(VertexId::new("sink"), sink);
        if self.memory_metrics {
            for (metric, value) in [
                (ScalingMetric::HeapMemoryUsed, 500.0 * 1_048_576.0),
                (ScalingMetric::MetaspaceMemoryUsed, 80.0 * 1_048_576.0),
                (ScalingMetric::ManagedMemoryUsed, 0.0),
                (ScalingMetric::NumTaskSlotsUsed, 2.0),
            ] {
                metrics.global_metrics.insert(metric, value);
            }
        }
        Ok(CollectedJobMetrics::new(
            self.topology()?,
            *lock(&self.running_since),
            MetricsSnapshot::Scaling(metrics),
        ))
    }
}

/// Applies parallelism overrides to the scripted job (a restart at the clock's `now` when they
/// change it) and records every parallelism and configuration call.
pub struct RecordingRealizer {
    /// The job the overrides apply to.
    pub job: Arc<ScriptedJob>,
    /// The harness clock.
    pub clock: Arc<ManualClock>,
    /// Every `realize_parallelism_overrides` call.
    pub calls: Mutex<Vec<ParallelismOverrides>>,
    /// Every `realize_config_overrides` call.
    pub config_calls: Mutex<Vec<ConfigChanges>>,
}

#[async_trait]
impl ScalingRealizer<String, Ctx> for RecordingRealizer {
    async fn realize_parallelism_overrides(
        &self,
        _ctx: &Ctx,
        overrides: &ParallelismOverrides,
    ) -> Result<(), RealizeError> {
        lock(&self.calls).push(overrides.clone());
        let new = (
            overrides.get("src").copied().unwrap_or(2),
            overrides.get("sink").copied().unwrap_or(1),
        );
        let mut current = lock(&self.job.parallelism);
        if *current != new {
            *current = new;
            *lock(&self.job.running_since) = self.clock.now();
        }
        Ok(())
    }

    async fn realize_config_overrides(&self, _ctx: &Ctx, changes: &ConfigChanges) -> Result<(), RealizeError> {
        lock(&self.config_calls).push(changes.clone());
        Ok(())
    }
}

/// Records every event as (type, reason, message).
#[derive(Default)]
pub struct RecordingEvents(pub Mutex<Vec<(EventType, String, String)>>);

impl RecordingEvents {
    /// The recorded events' reasons, in order.
    pub fn reasons(&self) -> Vec<String> {
        lock(&self.0).iter().map(|(_, reason, _)| reason.clone()).collect()
    }

    /// The messages of the events with `reason`.
    pub fn messages(&self, reason: &str) -> Vec<String> {
        lock(&self.0)
            .iter()
            .filter(|(_, r, _)| r == reason)
            .map(|(_, _, message)| message.clone())
            .collect()
    }
}

#[async_trait]
impl AutoScalerEventHandler<String, Ctx> for RecordingEvents {
    async fn handle_event(
        &self,
        _ctx: &Ctx,
        event_type: EventType,
        reason: &str,
        message: &str,
        _key: Option<&str>,
        _interval: Option<std::time::Duration>,
    ) {
        lock(&self.0).push((event_type, reason.to_owned(), message.to_owned()));
    }
}

/// The autoscaler wired to the fakes, on a clock the harness moves 30 s after every cycle.
pub struct Harness {
    /// The autoscaler under test.
    pub autoscaler: JobAutoScalerImpl<String, Ctx>,
    /// The scripted job.
    pub job: Arc<ScriptedJob>,
    /// The recording realizer.
    pub realizer: Arc<RecordingRealizer>,
    /// The recording event handler.
    pub events: Arc<RecordingEvents>,
    /// The state store.
    pub store: Arc<InMemoryStateStore>,
    /// The clock (10:00 at the start).
    pub clock: Arc<ManualClock>,
    /// The job's context.
    pub ctx: Ctx,
}

/// The job configuration of every harness: window 2 min, stabilization 1 min, utilization bound
/// 0.9.
pub fn base_configuration() -> Configuration {
    Configuration::from_iter([
        ("job.autoscaler.enabled", "true"),
        ("job.autoscaler.metrics.window", "2 min"),
        ("job.autoscaler.stabilization.interval", "1 min"),
        ("job.autoscaler.utilization.max", "0.9"),
    ])
}

/// What a harness is built with.
#[derive(Default)]
pub struct Setup {
    /// Keys set over [`base_configuration`].
    pub conf: Vec<(String, String)>,
    /// Whether the job reports TaskManager memory and slot metrics.
    pub memory_metrics: bool,
    /// TaskManager CPU the context reports.
    pub cpu: Option<f64>,
    /// The plugins offered to the autoscaler.
    pub plugins: PluginRegistry,
}

impl Setup {
    /// Sets `key` to `value` over the base configuration.
    pub fn set(mut self, key: &str, value: &str) -> Self {
        self.conf.push((key.to_owned(), value.to_owned()));
        self
    }
}

/// A harness with the base configuration and no plugins.
pub fn harness() -> Harness {
    harness_with(Setup::default())
}

/// A harness built from `setup`.
pub fn harness_with(setup: Setup) -> Harness {
    let start = Utc.with_ymd_and_hms(2024, 5, 1, 10, 0, 0).single().unwrap_or_default();
    let clock = Arc::new(ManualClock::new(start));
    let job = Arc::new(ScriptedJob {
        parallelism: Mutex::new((2, 1)),
        running_since: Mutex::new(start - Duration::hours(1)),
        start,
        fail_next: Mutex::new(false),
        memory_metrics: setup.memory_metrics,
    });
    let realizer = Arc::new(RecordingRealizer {
        job: job.clone(),
        clock: clock.clone(),
        calls: Mutex::default(),
        config_calls: Mutex::default(),
    });
    let events = Arc::new(RecordingEvents::default());
    let store = Arc::new(InMemoryStateStore::new());
    let autoscaler = JobAutoScalerImpl::new(job.clone(), store.clone(), realizer.clone(), events.clone())
        .with_clock(clock.clone())
        .with_plugins(setup.plugins);
    let mut conf = base_configuration();
    for (key, value) in setup.conf {
        conf.set(key, value);
    }
    Harness {
        autoscaler,
        job,
        realizer,
        events,
        store,
        clock,
        ctx: Ctx {
            conf,
            status: Some(JobStatus::Running),
            cpu: setup.cpu,
            gauges: Gauges::default(),
        },
    }
}

impl Harness {
    /// Runs one cycle, which must succeed, then moves the clock 30 s on.
    pub async fn cycle(&self) -> CycleOutcome {
        let outcome = self.try_cycle().await;
        outcome.unwrap_or_else(|e| panic!("cycle fails: {e}"))
    }

    /// Runs one cycle, then moves the clock 30 s on.
    pub async fn try_cycle(&self) -> Result<CycleOutcome, autoscaler_core::AutoscalerError> {
        let outcome = self.autoscaler.run_cycle(&self.ctx).await;
        self.clock.advance(std::time::Duration::from_secs(30));
        outcome
    }

    /// Runs the four cycles before the first decision (10:00:00 .. 10:01:30), none of which decides.
    pub async fn until_window_full(&self) {
        for _ in 0..4 {
            let outcome = self.cycle().await;
            assert!(!matches!(outcome, CycleOutcome::Decided(_)), "{outcome:?}");
        }
    }

    /// Runs cycles until the sink scales (10:02:00, the 5th cycle).
    pub async fn until_scaled(&self) {
        self.until_window_full().await;
        assert_eq!(self.cycle().await.decision_outcome(), Some(DecisionOutcome::Scale));
    }

    /// The parallelism the job runs at, (src, sink).
    pub fn parallelism(&self) -> (u32, u32) {
        *lock(&self.job.parallelism)
    }
}
