//! Drives `JobAutoScalerImpl` through several cycles with a scripted metrics collector, a recording
//! realizer and a recording event handler: the autoscaler waits for a full window, scales the
//! bottleneck once, re-applies its overrides every cycle, and reports failures as events without
//! losing state.

use autoscaler_core::{
    AutoScalerEventHandler, AutoScalerOptions, AutoScalerStateStore, BasicJobContext, CollectError,
    CollectedJobMetrics, Configuration, CycleOutcome, EventType, JobAutoScalerContext, JobAutoScalerImpl, JobStatus,
    MetricsCollector, MetricsSnapshot, ParallelismOverrides, RealizeError, ScalingRealizer, async_trait,
    scaling::{BlockReason, DecisionOutcome},
};
use autoscaler_metrics::{
    CollectedMetrics, EdgeSpec, JobTopology, MetricValues, ScalingMetric, ShipStrategy, VertexId, VertexSpec,
};
use autoscaler_state::InMemoryStateStore;
use chrono::{DateTime, Duration, TimeZone, Utc};
use std::sync::{Arc, Mutex};

type Ctx = BasicJobContext<String, ()>;

/// A two-vertex job `src -> sink` whose sink is 95% busy at parallelism 1 (1000 records/s in).
struct ScriptedJob {
    parallelism: Mutex<(u32, u32)>,
    running_since: Mutex<DateTime<Utc>>,
    start: DateTime<Utc>,
    fail_next: Mutex<bool>,
}

impl ScriptedJob {
    fn topology(&self) -> JobTopology {
        let (src, sink) = *self.parallelism.lock().expect("lock");
        JobTopology::new(
            vec![VertexSpec::new("src", src, 128), VertexSpec::new("sink", sink, 128)],
            vec![EdgeSpec::new("src", "sink", ShipStrategy::Forward)],
        )
        .expect("valid topology")
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
        if std::mem::take(&mut *self.fail_next.lock().expect("lock")) {
            return Err(CollectError::Failed("metrics endpoint answered 500".into()));
        }
        let (_, sink_parallelism) = *self.parallelism.lock().expect("lock");
        let seconds = (now - self.start).num_seconds() as f64;
        let records = 1000.0 * seconds;
        let mut src = MetricValues::new();
        src.insert(ScalingMetric::NumRecordsIn, records);
        src.insert(ScalingMetric::NumRecordsOut, records);
        src.insert(ScalingMetric::Load, 0.5);
        src.insert(ScalingMetric::Lag, 0.0);
        let mut sink = MetricValues::new();
        sink.insert(ScalingMetric::NumRecordsIn, records);
        sink.insert(ScalingMetric::NumRecordsInPerSecond, 1000.0);
        // The sink's work is spread over its subtasks.
        sink.insert(ScalingMetric::Load, 0.95 / f64::from(sink_parallelism));
        let mut metrics = CollectedMetrics::default();
        metrics.vertex_metrics.insert(VertexId::new("src"), src);
        metrics.vertex_metrics.insert(VertexId::new("sink"), sink);
        Ok(CollectedJobMetrics {
            topology: self.topology(),
            job_running_since: *self.running_since.lock().expect("lock"),
            metrics: MetricsSnapshot::Scaling(metrics),
        })
    }
}

/// Applies overrides to the scripted job (a restart at `now`) and records every call.
struct RecordingRealizer {
    job: Arc<ScriptedJob>,
    clock: Arc<Mutex<DateTime<Utc>>>,
    calls: Mutex<Vec<ParallelismOverrides>>,
}

#[async_trait]
impl ScalingRealizer<String, Ctx> for RecordingRealizer {
    async fn realize_parallelism_overrides(
        &self,
        _ctx: &Ctx,
        overrides: &ParallelismOverrides,
    ) -> Result<(), RealizeError> {
        self.calls.lock().expect("lock").push(overrides.clone());
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
    job: Arc<ScriptedJob>,
    realizer: Arc<RecordingRealizer>,
    events: Arc<RecordingEvents>,
    store: Arc<InMemoryStateStore>,
    clock: Arc<Mutex<DateTime<Utc>>>,
    ctx: Ctx,
}

fn harness() -> Harness {
    let start = Utc.with_ymd_and_hms(2024, 5, 1, 10, 0, 0).single().expect("valid time");
    let clock = Arc::new(Mutex::new(start));
    let job = Arc::new(ScriptedJob {
        parallelism: Mutex::new((2, 1)),
        running_since: Mutex::new(start - Duration::hours(1)),
        start,
        fail_next: Mutex::new(false),
    });
    let realizer = Arc::new(RecordingRealizer {
        job: job.clone(),
        clock: clock.clone(),
        calls: Mutex::default(),
    });
    let events = Arc::new(RecordingEvents::default());
    let store = Arc::new(InMemoryStateStore::new());
    let c = clock.clone();
    let autoscaler = JobAutoScalerImpl::new(job.clone(), store.clone(), realizer.clone(), events.clone())
        .with_clock(Arc::new(move || *c.lock().expect("lock")));
    let configuration = Configuration::from_iter([
        ("job.autoscaler.enabled", "true"),
        ("job.autoscaler.metrics.window", "2 min"),
        ("job.autoscaler.stabilization.interval", "1 min"),
        ("job.autoscaler.utilization.max", "0.9"),
    ]);
    let ctx = BasicJobContext::new("job-1".to_owned(), configuration, ());
    Harness {
        autoscaler,
        job,
        realizer,
        events,
        store,
        clock,
        ctx,
    }
}

impl Harness {
    async fn cycle(&self) -> CycleOutcome {
        let outcome = self.autoscaler.run_cycle(&self.ctx).await.expect("cycle succeeds");
        *self.clock.lock().expect("lock") += Duration::seconds(30);
        outcome
    }
}

#[tokio::test]
async fn scales_the_bottleneck_once_after_a_full_window_and_reapplies_overrides() {
    let h = harness();
    assert_eq!(h.cycle().await, CycleOutcome::InsufficientSamples);
    // 10:00:30 .. 10:01:30: evaluated for reporting only while the 2 min window fills.
    for _ in 0..3 {
        assert!(matches!(
            h.cycle().await,
            CycleOutcome::WindowNotFull { stabilizing: false }
        ));
    }
    // 10:02:00: the window (from the first stable sample at 10:00) is full and the sink (TPR 1052.6/s < scale-up threshold 1111/s) scales 1 -> 2.
    assert_eq!(h.cycle().await, CycleOutcome::Decided(DecisionOutcome::Scale));
    assert_eq!(*h.job.parallelism.lock().expect("lock"), (2, 2));
    let calls = h.realizer.calls.lock().expect("lock").clone();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].get("sink"), Some(&2));
    assert_eq!(calls[0].get("src"), Some(&2));
    {
        let events = h.events.0.lock().expect("lock");
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].1, "ScalingReport");
        assert!(
            events[0].2.contains("{ Vertex ID sink | Parallelism 1 -> 2 |"),
            "{}",
            events[0].2
        );
    }
    // The job restarted: its history was dropped, and it waits for a new full window. The stored
    // overrides are re-applied every cycle (the reference's self-healing), without a new rescale.
    assert_eq!(h.cycle().await, CycleOutcome::InsufficientSamples);
    for _ in 0..8 {
        let outcome = h.cycle().await;
        assert!(
            !matches!(outcome, CycleOutcome::Decided(DecisionOutcome::Scale)),
            "{outcome:?}"
        );
    }
    assert_eq!(*h.job.parallelism.lock().expect("lock"), (2, 2));
    assert_eq!(h.realizer.calls.lock().expect("lock").len(), 10);
    let history = h.store.get_scaling_history(&h.ctx).await.expect("history");
    assert_eq!(history.get("sink").map(|s| s.len()), Some(1));
}

#[tokio::test]
async fn a_failing_collection_is_an_event_not_a_lost_state() {
    let h = harness();
    for _ in 0..3 {
        h.cycle().await;
    }
    let before = h.store.get_collected_metrics(&h.ctx).await.expect("history").len();
    *h.job.fail_next.lock().expect("lock") = true;
    let err = h.autoscaler.run_cycle(&h.ctx).await.expect_err("collection fails");
    assert!(err.to_string().contains("answered 500"), "{err}");
    let events = h.events.0.lock().expect("lock").clone();
    assert_eq!(
        events.last().map(|e| (e.0, e.1.as_str())),
        Some((EventType::Warning, "AutoscalerError"))
    );
    assert_eq!(
        h.store.get_collected_metrics(&h.ctx).await.expect("history").len(),
        before
    );
}

#[tokio::test]
async fn recommend_only_mode_reports_but_never_realizes() {
    let mut h = harness();
    h.ctx.configuration.set("job.autoscaler.scaling.enabled", "false");
    for _ in 0..4 {
        h.cycle().await;
    }
    assert_eq!(
        h.cycle().await,
        CycleOutcome::Decided(DecisionOutcome::Blocked(BlockReason::ScalingDisabled))
    );
    assert!(h.realizer.calls.lock().expect("lock").is_empty());
    let events = h.events.0.lock().expect("lock").clone();
    assert!(events.iter().any(|e| {
        e.2.starts_with("Scaling execution disabled by config job.autoscaler.scaling.enabled:false")
    }));
}

#[tokio::test]
async fn a_job_that_is_not_running_only_gets_its_overrides_reapplied() {
    let mut h = harness();
    for _ in 0..5 {
        h.cycle().await;
    }
    assert_eq!(h.realizer.calls.lock().expect("lock").len(), 1);
    h.ctx.job_status = Some(JobStatus::Restarting);
    assert_eq!(h.cycle().await, CycleOutcome::JobNotRunning);
    assert_eq!(h.realizer.calls.lock().expect("lock").len(), 2);
    assert_eq!(h.ctx.job_status(), Some(JobStatus::Restarting));
}

#[tokio::test]
async fn disabling_the_autoscaler_clears_its_state() {
    let mut h = harness();
    for _ in 0..6 {
        h.cycle().await;
    }
    assert!(!h.store.get_scaling_history(&h.ctx).await.expect("history").is_empty());
    h.ctx.configuration.set("job.autoscaler.enabled", "false");
    assert_eq!(h.cycle().await, CycleOutcome::Disabled);
    assert!(h.store.get_scaling_history(&h.ctx).await.expect("history").is_empty());
    assert!(h.store.get_collected_metrics(&h.ctx).await.expect("metrics").is_empty());
    assert!(
        h.store
            .get_parallelism_overrides(&h.ctx)
            .await
            .expect("overrides")
            .is_empty()
    );
}

#[tokio::test]
async fn cleanup_forgets_the_job_completely_even_in_a_durable_store() {
    use autoscaler_core::JobAutoScaler;
    let dir = std::env::temp_dir().join(format!("fa-cleanup-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let url = format!("sqlite:{}", dir.join("state.db").display());
    let h = harness();
    let store = Arc::new(autoscaler_state::open_state_store(&url).await.expect("sqlite store"));
    let c = h.clock.clone();
    let autoscaler = JobAutoScalerImpl::new(h.job.clone(), store.clone(), h.realizer.clone(), h.events.clone())
        .with_clock(Arc::new(move || *c.lock().expect("lock")));
    for _ in 0..5 {
        autoscaler.run_cycle(&h.ctx).await.expect("cycle");
        *h.clock.lock().expect("lock") += Duration::seconds(30);
    }
    assert!(!store.get_scaling_history(&h.ctx).await.expect("history").is_empty());
    autoscaler.cleanup(&"job-1".to_owned()).await;
    // A fresh store on the same file sees nothing of the job.
    let reopened = autoscaler_state::open_state_store(&url).await.expect("reopen");
    assert!(reopened.get_scaling_history(&h.ctx).await.expect("history").is_empty());
    assert!(
        reopened
            .get_collected_metrics(&h.ctx)
            .await
            .expect("metrics")
            .is_empty()
    );
    assert!(
        reopened
            .get_parallelism_overrides(&h.ctx)
            .await
            .expect("overrides")
            .is_empty()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
