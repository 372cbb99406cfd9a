//! What the cycle benches share: a bench scenario (`tests/fixtures/bench/`) prepared as a
//! long-running process has it, a collector handing out its last snapshot, and adapters that
//! discard what the cycle realizes and reports.

use autoscaler_core::config::AutoScalerOptions;
use autoscaler_core::{
    AutoScalerEventHandler, AutoScalerStateStore, BasicJobContext, CollectError, CollectedJobMetrics, EventType,
    JobAutoScalerContext, MetricsCollector, MetricsSnapshot, ParallelismOverrides, RealizeError, ScalingRealizer,
    async_trait,
};
use autoscaler_metrics::{CollectedMetrics, JobTopology, MetricHistory};
use autoscaler_replay::{Scenario, ScenarioInput, parse_scenario};
use chrono::{DateTime, Utc};
use std::path::Path;
use std::sync::Arc;

/// The benches' job context.
pub type Ctx = BasicJobContext<String, ()>;

/// Hands out this cycle's snapshot (the scenario's last one).
pub struct Replayed {
    topology: JobTopology,
    running_since: DateTime<Utc>,
    latest: CollectedMetrics,
}

#[async_trait]
impl<C: JobAutoScalerContext<String>> MetricsCollector<String, C> for Replayed {
    async fn collect(
        &self,
        _: &C,
        _: &AutoScalerOptions,
        _: DateTime<Utc>,
    ) -> Result<CollectedJobMetrics, CollectError> {
        Ok(CollectedJobMetrics::new(
            self.topology.clone(),
            self.running_since,
            MetricsSnapshot::Scaling(self.latest.clone()),
        ))
    }
}

impl Replayed {
    /// The length of the JSON of the snapshot this collector hands out.
    #[allow(dead_code)] // used by one of the benches that share this module
    pub fn latest_encoding_len(&self) -> usize {
        serde_json::to_string(&self.latest)
            .expect("a collected snapshot serializes")
            .len()
    }
}

/// Applies nothing, reports nothing and asks for no decision record (as a handler that keeps
/// only the reference's events).
pub struct Discard;

#[async_trait]
impl<C: JobAutoScalerContext<String>> ScalingRealizer<String, C> for Discard {
    async fn realize_parallelism_overrides(&self, _: &C, _: &ParallelismOverrides) -> Result<(), RealizeError> {
        Ok(())
    }
}

#[async_trait]
impl<C: JobAutoScalerContext<String>> AutoScalerEventHandler<String, C> for Discard {
    async fn handle_event(
        &self,
        _: &C,
        _: EventType,
        _: &str,
        _: &str,
        _: Option<&str>,
        _: Option<std::time::Duration>,
    ) {
    }

    fn wants_decision_records(&self) -> bool {
        false
    }
}

/// A bench scenario ready to be cycled: the window before its last snapshot, that snapshot in
/// the collector.
pub struct Prepared {
    /// The parsed scenario.
    pub scenario: Scenario,
    /// Every snapshot but the last.
    pub earlier: MetricHistory,
    /// Hands out the last snapshot.
    pub collector: Arc<Replayed>,
    /// The job's context (autoscaler enabled).
    pub ctx: Ctx,
}

/// Parses `tests/fixtures/bench/{name}.json`.
pub fn prepare(name: &str) -> Prepared {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/bench")
        .join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).expect("bench scenario");
    let scenario = parse_scenario(&text).expect("valid bench scenario");
    let ScenarioInput::Metrics(snapshots) = &scenario.input else {
        panic!("bench scenarios carry metrics")
    };
    let (_, latest) = snapshots.last().cloned().expect("at least one snapshot");
    let earlier: MetricHistory = snapshots[..snapshots.len() - 1].iter().cloned().collect();
    let collector = Arc::new(Replayed {
        topology: scenario.topology.clone(),
        running_since: scenario.job.running_since.expect("running_since"),
        latest,
    });
    let mut configuration = scenario.config.clone();
    configuration.set("job.autoscaler.enabled", "true");
    let ctx = BasicJobContext::new(name.to_owned(), configuration, ());
    Prepared {
        scenario,
        earlier,
        collector,
        ctx,
    }
}

/// Writes the scenario's stored state (the window before the last snapshot, the scaling history,
/// tracking and delayed scale-down) into `store` as the previous cycle left it, and flushes.
pub async fn preload(store: &dyn AutoScalerStateStore<String, Ctx>, p: &Prepared) {
    store
        .store_collected_metrics(&p.ctx, &p.earlier)
        .await
        .expect("store metrics");
    store
        .store_scaling_history(&p.ctx, &p.scenario.scaling_history)
        .await
        .expect("store history");
    store
        .store_scaling_tracking(&p.ctx, &p.scenario.scaling_tracking)
        .await
        .expect("store tracking");
    store
        .store_delayed_scale_down(&p.ctx, &p.scenario.delayed_scale_down)
        .await
        .expect("store delayed");
    // What the cycle adds besides, removed (nothing to remove in a fresh store).
    store
        .remove_parallelism_overrides(&p.ctx)
        .await
        .expect("remove overrides");
    store
        .remove_config_changes(&p.ctx)
        .await
        .expect("remove config changes");
    store
        .remove_evaluated_metrics(&p.ctx)
        .await
        .expect("remove evaluated metrics");
    store.flush(&p.ctx).await.expect("flush");
}
