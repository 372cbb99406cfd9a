//! Memory tuning through `JobAutoScalerImpl`: the recommendation is reported (event and gauges)
//! with every executed rescale; with `memory.tuning.enabled` its changes are stored with the
//! scaling and handed to `ScalingRealizer::realize_config_overrides` every cycle, without it they
//! are neither stored nor realized.

use autoscaler_core::{
    AutoScalerEventHandler, AutoScalerOptions, AutoScalerStateStore, AutoscalerMetricsReporter, CollectError,
    CollectedJobMetrics, ConfigChanges, Configuration, CycleOutcome, EventType, JobAutoScalerContext,
    JobAutoScalerImpl, JobStatus, MetricsCollector, MetricsSnapshot, ParallelismOverrides, RealizeError,
    ScalingRealizer, async_trait, scaling::DecisionOutcome,
};
use autoscaler_metrics::{
    CollectedMetrics, EdgeSpec, JobTopology, MetricValues, ScalingMetric, ShipStrategy, VertexId, VertexSpec,
};
use autoscaler_state::InMemoryStateStore;
use chrono::{DateTime, Duration, TimeZone, Utc};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Records the gauges the autoscaler reports.
#[derive(Default)]
struct Gauges(Mutex<BTreeMap<String, f64>>);

impl AutoscalerMetricsReporter for Gauges {
    fn set_gauge(&self, name: &str, value: f64) {
        self.0.lock().expect("lock").insert(name.to_owned(), value);
    }
}

struct Ctx {
    conf: Configuration,
    gauges: Gauges,
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
        Some(JobStatus::Running)
    }
    fn configuration(&self) -> &Configuration {
        &self.conf
    }
    fn metrics_reporter(&self) -> &dyn AutoscalerMetricsReporter {
        &self.gauges
    }
}

/// `src (2) -FORWARD-> sink (1)`, the sink 95% busy at 1000 records/s; the TaskManagers report a
/// 500 MiB heap and 80 MiB metaspace in use, no managed memory, 2 slots used.
struct ScriptedJob {
    parallelism: Mutex<(u32, u32)>,
    running_since: Mutex<DateTime<Utc>>,
    start: DateTime<Utc>,
}

#[async_trait]
impl MetricsCollector<String, Ctx> for ScriptedJob {
    async fn collect(
        &self,
        _ctx: &Ctx,
        _options: &AutoScalerOptions,
        now: DateTime<Utc>,
    ) -> Result<CollectedJobMetrics, CollectError> {
        let (src_parallelism, sink_parallelism) = *self.parallelism.lock().expect("lock");
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
        for (metric, value) in [
            (ScalingMetric::HeapMemoryUsed, 500.0 * 1_048_576.0),
            (ScalingMetric::MetaspaceMemoryUsed, 80.0 * 1_048_576.0),
            (ScalingMetric::ManagedMemoryUsed, 0.0),
            (ScalingMetric::NumTaskSlotsUsed, 2.0),
        ] {
            metrics.global_metrics.insert(metric, value);
        }
        let topology = JobTopology::new(
            vec![
                VertexSpec::new("src", src_parallelism, 128),
                VertexSpec::new("sink", sink_parallelism, 128),
            ],
            vec![EdgeSpec::new("src", "sink", ShipStrategy::Forward)],
        )
        .map_err(|e| CollectError::Failed(e.to_string()))?;
        Ok(CollectedJobMetrics {
            topology,
            job_running_since: *self.running_since.lock().expect("lock"),
            metrics: MetricsSnapshot::Scaling(metrics),
        })
    }
}

/// Applies parallelism overrides to the scripted job and records every configuration call.
struct RecordingRealizer {
    job: Arc<ScriptedJob>,
    clock: Arc<Mutex<DateTime<Utc>>>,
    config_calls: Mutex<Vec<ConfigChanges>>,
}

#[async_trait]
impl ScalingRealizer<String, Ctx> for RecordingRealizer {
    async fn realize_parallelism_overrides(
        &self,
        _ctx: &Ctx,
        overrides: &ParallelismOverrides,
    ) -> Result<(), RealizeError> {
        let new = (
            overrides.get("src").copied().unwrap_or(2),
            overrides.get("sink").copied().unwrap_or(1),
        );
        let mut current = self.job.parallelism.lock().expect("lock");
        if *current != new {
            *current = new;
            *self.job.running_since.lock().expect("lock") = *self.clock.lock().expect("lock");
        }
        Ok(())
    }

    async fn realize_config_overrides(&self, _ctx: &Ctx, changes: &ConfigChanges) -> Result<(), RealizeError> {
        self.config_calls.lock().expect("lock").push(changes.clone());
        Ok(())
    }
}

#[derive(Default)]
struct RecordingEvents(Mutex<Vec<(EventType, String, String)>>);

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
        self.0
            .lock()
            .expect("lock")
            .push((event_type, reason.to_owned(), message.to_owned()));
    }
}

struct Harness {
    autoscaler: JobAutoScalerImpl<String, Ctx>,
    realizer: Arc<RecordingRealizer>,
    events: Arc<RecordingEvents>,
    store: Arc<InMemoryStateStore>,
    clock: Arc<Mutex<DateTime<Utc>>>,
    ctx: Ctx,
}

fn harness(tuning_enabled: bool) -> Harness {
    let start = Utc.with_ymd_and_hms(2024, 5, 1, 10, 0, 0).single().expect("valid time");
    let clock = Arc::new(Mutex::new(start));
    let job = Arc::new(ScriptedJob {
        parallelism: Mutex::new((2, 1)),
        running_since: Mutex::new(start - Duration::hours(1)),
        start,
    });
    let realizer = Arc::new(RecordingRealizer {
        job: job.clone(),
        clock: clock.clone(),
        config_calls: Mutex::default(),
    });
    let events = Arc::new(RecordingEvents::default());
    let store = Arc::new(InMemoryStateStore::new());
    let c = clock.clone();
    let autoscaler = JobAutoScalerImpl::new(job, store.clone(), realizer.clone(), events.clone())
        .with_clock(Arc::new(move || *c.lock().expect("lock")));
    let conf = Configuration::from_iter([
        ("job.autoscaler.enabled", "true"),
        ("job.autoscaler.metrics.window", "2 min"),
        ("job.autoscaler.stabilization.interval", "1 min"),
        ("job.autoscaler.utilization.max", "0.9"),
        (
            "job.autoscaler.memory.tuning.enabled",
            if tuning_enabled { "true" } else { "false" },
        ),
        ("taskmanager.memory.process.size", "2 gb"),
    ]);
    Harness {
        autoscaler,
        realizer,
        events,
        store,
        clock,
        ctx: Ctx {
            conf,
            gauges: Gauges::default(),
        },
    }
}

impl Harness {
    async fn cycle(&self) -> CycleOutcome {
        let outcome = self.autoscaler.run_cycle(&self.ctx).await.expect("cycle succeeds");
        *self.clock.lock().expect("lock") += Duration::seconds(30);
        outcome
    }

    /// Runs cycles until the sink scales (10:02:00, the 5th cycle).
    async fn until_scaled(&self) {
        for _ in 0..4 {
            assert!(!matches!(self.cycle().await, CycleOutcome::Decided(_)));
        }
        assert_eq!(self.cycle().await, CycleOutcome::Decided(DecisionOutcome::Scale));
    }

    fn recommendations(&self) -> Vec<String> {
        let events = self.events.0.lock().expect("lock");
        events
            .iter()
            .filter(|(_, reason, _)| reason == "Configuration recommendation")
            .map(|(_, _, message)| message.clone())
            .collect()
    }
}

/// What tuning recommends for the scripted job on a 2 gb TaskManager (the same job and numbers as
/// the replay case `tests/scenarios/memory-tuning-metrics.json`): overhead 214748368, network
/// 20 segments x 32 kb = 640 kb, metaspace (long)(80 mb x 1.2) = 96 mb, heap (long)(500 mb x 1.2)
/// = 600 mb, no managed memory; total 134217728 + 214748368 + 655360 + 100663296 + 629145600 =
/// 1079430352 bytes.
fn expected_overrides() -> BTreeMap<String, String> {
    [
        ("taskmanager.memory.framework.heap.size", "0 bytes"),
        ("taskmanager.memory.jvm-metaspace.size", "96 mb"),
        ("taskmanager.memory.jvm-overhead.fraction", "0.199"),
        ("taskmanager.memory.managed.fraction", "0.0"),
        ("taskmanager.memory.network.max", "640 kb"),
        ("taskmanager.memory.network.min", "640 kb"),
        ("taskmanager.memory.process.size", "1079430352 bytes"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

#[tokio::test]
async fn enabled_tuning_is_stored_with_the_scaling_and_realized_every_cycle() {
    let h = harness(true);
    h.until_scaled().await;
    let recommendations = h.recommendations();
    assert_eq!(recommendations.len(), 1);
    assert!(recommendations[0].contains("(automatic tuning is enabled)"));
    let stored = h.store.get_config_changes(&h.ctx).await.expect("config changes");
    assert_eq!(stored.overrides, expected_overrides());
    assert_eq!(stored.removals.len(), 4);
    // The realizer got nothing to do before the scaling (empty stored changes), then the tuned
    // configuration in the scaling cycle and in every cycle after it.
    for _ in 0..3 {
        h.cycle().await;
    }
    let calls = h.realizer.config_calls.lock().expect("lock").clone();
    assert_eq!(calls.len(), 8);
    assert!(calls[..4].iter().all(ConfigChanges::is_empty));
    assert!(calls[4..].iter().all(|c| *c == stored));
    // One gauge per recommended size.
    let gauges = h.ctx.gauges.0.lock().expect("lock").clone();
    assert_eq!(
        gauges.get("MemoryTuning.taskmanager.memory.process.size"),
        Some(&1_079_430_352.0)
    );
    assert_eq!(
        gauges.get("MemoryTuning.taskmanager.memory.jvm-metaspace.size"),
        Some(&100_663_296.0)
    );
}

#[tokio::test]
async fn disabled_tuning_reports_but_neither_stores_nor_realizes() {
    let h = harness(false);
    h.until_scaled().await;
    let recommendations = h.recommendations();
    assert_eq!(recommendations.len(), 1);
    assert!(recommendations[0].contains("(automatic tuning is disabled)"));
    assert!(recommendations[0].contains("taskmanager.memory.process.size: 1079430352 bytes\n"));
    assert!(
        h.store
            .get_config_changes(&h.ctx)
            .await
            .expect("config changes")
            .is_empty()
    );
    h.cycle().await;
    assert!(h.realizer.config_calls.lock().expect("lock").is_empty());
}
