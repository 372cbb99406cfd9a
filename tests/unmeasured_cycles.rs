//! The unmeasured-vertex rule in the live cycle (replay §3.3 step 7a): a collector that leaves out
//! busy time for one vertex gets a `MetricsIncomplete` Warning once per vertex and
//! `scaling.event.interval` (from the first collection on, while the window still fills), the
//! decision record gives that vertex its own reason, and the other vertices still scale.
//!
//! The job is `src -> map -> sink`: the sink 95% busy at parallelism 1 with 1000 records/s in
//! (so it scales 1 -> 2, as in `tests/support`), the map's busy time never reported.

mod support;

use autoscaler_core::record::{DecisionRecord, VertexReason};
use autoscaler_core::scaling::DecisionOutcome;
use autoscaler_core::{
    AutoScalerEventHandler, CollectError, CollectedJobMetrics, EventType, JobAutoScalerImpl, ManualClock,
    MetricsCollector, MetricsSnapshot, ParallelismOverrides, RealizeError, ScalingRealizer, async_trait,
    config::AutoScalerOptions,
};
use autoscaler_metrics::{
    CollectedMetrics, EdgeSpec, JobTopology, MetricValues, ScalingMetric, ShipStrategy, VertexId, VertexSpec,
};
use autoscaler_state::{AnyEventHandler, InMemoryStateStore};
use chrono::{DateTime, Duration, TimeZone, Utc};
use std::sync::{Arc, Mutex};
use support::{Ctx, Gauges, base_configuration, lock};

/// The three-vertex job; the map never reports `LOAD`.
struct MapWithoutBusyTime {
    start: DateTime<Utc>,
    sink_parallelism: Mutex<u32>,
}

impl MapWithoutBusyTime {
    fn topology(&self) -> Result<JobTopology, CollectError> {
        let sink = *lock(&self.sink_parallelism);
        JobTopology::new(
            vec![
                VertexSpec::new("src", 2, 128),
                VertexSpec::new("map", 2, 128),
                VertexSpec::new("sink", sink, 128),
            ],
            vec![
                EdgeSpec::new("src", "map", ShipStrategy::Forward),
                EdgeSpec::new("map", "sink", ShipStrategy::Forward),
            ],
        )
        .map_err(|e| CollectError::Failed(e.to_string()))
    }
}

#[async_trait]
impl MetricsCollector<String, Ctx> for MapWithoutBusyTime {
    async fn collect(
        &self,
        _ctx: &Ctx,
        _options: &AutoScalerOptions,
        now: DateTime<Utc>,
    ) -> Result<CollectedJobMetrics, CollectError> {
        let sink_parallelism = *lock(&self.sink_parallelism);
        let records = 1000.0 * (now - self.start).num_seconds() as f64;
        let vertex = |load: Option<f64>| {
            let mut values = MetricValues::new();
            values.insert(ScalingMetric::NumRecordsIn, records);
            values.insert(ScalingMetric::NumRecordsOut, records);
            values.insert(ScalingMetric::NumRecordsInPerSecond, 1000.0);
            if let Some(load) = load {
                values.insert(ScalingMetric::Load, load);
            }
            values
        };
        let mut src = vertex(Some(0.5));
        src.insert(ScalingMetric::Lag, 0.0);
        let mut metrics = CollectedMetrics::default();
        metrics.vertex_metrics.insert(VertexId::new("src"), src);
        metrics.vertex_metrics.insert(VertexId::new("map"), vertex(None));
        metrics
            .vertex_metrics
            .insert(VertexId::new("sink"), vertex(Some(0.95 / f64::from(sink_parallelism))));
        Ok(CollectedJobMetrics {
            topology: self.topology()?,
            job_running_since: self.start - Duration::hours(1),
            metrics: MetricsSnapshot::Scaling(metrics),
        })
    }
}

/// Records the overrides it is asked to apply.
#[derive(Default)]
struct Overrides(Mutex<Vec<ParallelismOverrides>>);

#[async_trait]
impl ScalingRealizer<String, Ctx> for Overrides {
    async fn realize_parallelism_overrides(
        &self,
        _ctx: &Ctx,
        overrides: &ParallelismOverrides,
    ) -> Result<(), RealizeError> {
        lock(&self.0).push(overrides.clone());
        Ok(())
    }
}

/// The database event handler (in memory), which deduplicates by interval, plus the records.
struct EventsAndRecords {
    events: AnyEventHandler,
    records: Mutex<Vec<DecisionRecord>>,
}

#[async_trait]
impl AutoScalerEventHandler<String, Ctx> for EventsAndRecords {
    async fn handle_event(
        &self,
        ctx: &Ctx,
        event_type: EventType,
        reason: &str,
        message: &str,
        message_key: Option<&str>,
        interval: Option<std::time::Duration>,
    ) {
        self.events
            .handle_event(ctx, event_type, reason, message, message_key, interval)
            .await;
    }

    async fn handle_decision_record(&self, _ctx: &Ctx, record: &DecisionRecord) {
        lock(&self.records).push(record.clone());
    }
}

#[tokio::test]
async fn a_vertex_without_busy_time_is_reported_once_per_interval_and_the_others_still_scale() {
    let start = Utc.with_ymd_and_hms(2024, 5, 1, 10, 0, 0).single().unwrap_or_default();
    let clock = Arc::new(ManualClock::new(start));
    let job = Arc::new(MapWithoutBusyTime {
        start,
        sink_parallelism: Mutex::new(1),
    });
    let realizer = Arc::new(Overrides::default());
    let handler = Arc::new(EventsAndRecords {
        events: AnyEventHandler::in_memory().with_clock(clock.clone()),
        records: Mutex::default(),
    });
    let autoscaler = JobAutoScalerImpl::new(
        job.clone(),
        Arc::new(InMemoryStateStore::new()),
        realizer.clone(),
        handler.clone(),
    )
    .with_clock(clock.clone());
    let mut conf = base_configuration();
    conf.set("job.autoscaler.scaling.event.interval", "2 min");
    let ctx = Ctx {
        conf,
        status: Some(autoscaler_core::JobStatus::Running),
        cpu: None,
        gauges: Gauges::default(),
    };
    let incomplete = || async {
        let events = handler.events.events("job-1").await.expect("events");
        events
            .into_iter()
            .filter(|e| e.reason == "MetricsIncomplete")
            .collect::<Vec<_>>()
    };

    // The first collection, long before the window is full, already reports the map.
    autoscaler.run_cycle(&ctx).await.expect("cycle");
    let first = incomplete().await;
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(first[0].event_type, EventType::Warning);
    assert!(
        first[0].message.contains("map") && first[0].message.contains("LOAD"),
        "{}",
        first[0].message
    );
    assert_eq!(first[0].count, 1);

    // Cycles every 30 s until the sink scales (the window is 2 min): the map is reported once in
    // the 2 min interval; the sink still scales 1 -> 2, the map is never touched.
    let mut scaled = None;
    for _ in 0..8 {
        clock.advance(std::time::Duration::from_secs(30));
        let outcome = autoscaler.run_cycle(&ctx).await.expect("cycle");
        if outcome.decision_outcome() == Some(DecisionOutcome::Scale) {
            scaled = outcome.decision().cloned();
            break;
        }
    }
    let decision = scaled.expect("the sink scales although the map is unmeasured");
    assert_eq!(decision.parallelism["sink"], 2);
    assert_eq!(decision.parallelism["map"], 2);
    assert!(decision.vertices["map"].unmeasured && decision.vertices["map"].excluded);
    assert!(!decision.vertices["sink"].unmeasured);
    let overrides = lock(&realizer.0).last().cloned().expect("overrides realized");
    assert_eq!(overrides.get("sink"), Some(&2));
    // As for any excluded vertex, the override keeps the map at its current parallelism.
    assert_eq!(overrides.get("map"), Some(&2));

    // The record says why the map was left alone.
    let record = lock(&handler.records).last().cloned().expect("a record");
    assert_eq!(record.vertices["map"].reason, VertexReason::Unmeasured, "{record:?}");
    assert_eq!(record.vertices["sink"].reason, VertexReason::ScaleUp);

    // Deduplicated within the 2 min interval: the cycles at 10:00, 10:00:30, 10:01 and 10:01:30
    // are one event counted 4 times; the one at 10:02 starts the next interval.
    let rows = incomplete().await;
    let seen: Vec<(String, u32)> = rows
        .iter()
        .map(|r| (r.create_time.format("%H:%M:%S").to_string(), r.count))
        .collect();
    assert_eq!(
        seen,
        [("10:00:00".to_owned(), 4), ("10:02:00".to_owned(), 1)],
        "{rows:?}"
    );
}
