//! The autoscaler as a service: many job sources in one process, Prometheus metrics, health
//! endpoints, the reference standalone's configuration keys, secrets kept out of logs.
//!
//! The `flink-autoscaler run` binary is wired from these parts (`commands/run.rs`); a platform can
//! wire them the same way:
//!
//! - [`config`]: where the base configuration is read from (`--config`, `FLINK_CONF_DIR`), its
//!   overrides (`-D`, `--key value`), its checks (`validate`, the start of `run`) and its reload
//!   on SIGHUP;
//! - [`settings`]: CLI flags and `autoscaler.standalone.*` / `autoscaler.service.*` keys to
//!   sources, state store and event handler;
//! - [`startup`]: opening the databases at start, retried with backoff, failures said in words;
//! - [`autoscaler_realizer::sources::MultiSourceJobListFetcher`]: the job list of every source;
//! - [`metrics`]: per-job series rendered at scrape time, process-wide series via the `metrics`
//!   facade, health flags;
//! - [`http`]: the axum server of `/metrics`, `/livez` and `/readyz` (other routes merge in);
//! - the wrappers below, which feed the metrics from the autoscaler without changing it:
//!   [`ObservedAutoScaler`] (cycles, duration, cleanup of a vanished job's series and cooldown),
//!   [`ObservedStateStore`] (latest evaluation, store health),
//!   [`ObservedCollector`] (vertex names).

pub mod config;
pub mod http;
pub mod metrics;
pub mod settings;
pub mod startup;

use self::metrics::{CYCLE_DURATION, ServiceMetrics};
use autoscaler_core::cycle::{JobState, StateChanges};
use autoscaler_core::{
    AutoScalerStateStore, AutoscalerError, CollectError, CollectedJobMetrics, ConfigChanges, DelayedScaleDown,
    JobAutoScaler, MetricsCollector, ParallelismOverrides, ScalingHistory, ScalingTracking, StateResult, async_trait,
};
use autoscaler_metrics::{EvaluatedMetrics, MetricHistory};
use autoscaler_realizer::sources::SourceJobContext;
use chrono::{DateTime, Utc};
use std::sync::Arc;
use std::time::Instant;

type Ctx = SourceJobContext;

/// A hook run when the control loop cleans a vanished job up (drop its cooldown entry, ...).
pub type CleanupHook = Arc<dyn Fn(&String) + Send + Sync>;

/// Wraps a [`JobAutoScaler`]: counts cycles, times them, and on cleanup drops the job's series and
/// runs the cleanup hooks.
pub struct ObservedAutoScaler {
    inner: Arc<dyn JobAutoScaler<String, Ctx>>,
    metrics: Arc<ServiceMetrics>,
    hooks: Vec<CleanupHook>,
}

impl ObservedAutoScaler {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn JobAutoScaler<String, Ctx>>, metrics: Arc<ServiceMetrics>) -> Self {
        Self {
            inner,
            metrics,
            hooks: Vec::new(),
        }
    }

    /// Runs `hook` with the key of every job cleaned up.
    pub fn on_cleanup(mut self, hook: CleanupHook) -> Self {
        self.hooks.push(hook);
        self
    }
}

#[async_trait]
impl JobAutoScaler<String, Ctx> for ObservedAutoScaler {
    async fn scale(&self, ctx: &Ctx) -> Result<(), AutoscalerError> {
        let started = Instant::now();
        let result = self.inner.scale(ctx).await;
        autoscaler_core::AutoscalerMetricsReporter::increment_counter(&*ctx.reporter, "cycles");
        ::metrics::histogram!(CYCLE_DURATION, "source" => ctx.labels.source.clone())
            .record(started.elapsed().as_secs_f64());
        result
    }

    async fn cleanup(&self, job_key: &String) {
        self.inner.cleanup(job_key).await;
        self.metrics.remove_job(job_key);
        for hook in &self.hooks {
            hook(job_key);
        }
        tracing::info!(job = %job_key, "job vanished: state, metrics and cooldown cleaned up");
    }
}

/// Wraps a metrics collector: records each job's vertex names for the metric labels.
pub struct ObservedCollector {
    inner: Arc<dyn MetricsCollector<String, Ctx>>,
    metrics: Arc<ServiceMetrics>,
}

impl ObservedCollector {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn MetricsCollector<String, Ctx>>, metrics: Arc<ServiceMetrics>) -> Self {
        Self { inner, metrics }
    }
}

#[async_trait]
impl MetricsCollector<String, Ctx> for ObservedCollector {
    async fn collect(
        &self,
        ctx: &Ctx,
        options: &autoscaler_core::config::AutoScalerOptions,
        now: DateTime<Utc>,
    ) -> Result<CollectedJobMetrics, CollectError> {
        let collected = self.inner.collect(ctx, options, now).await?;
        if let Some(series) = self.metrics.get(&ctx.labels.job_key) {
            series.set_topology(&collected.topology);
        }
        Ok(collected)
    }

    async fn cleanup(&self, job_key: &String) {
        self.inner.cleanup(job_key).await;
    }
}

/// Wraps a state store: keeps each job's latest evaluation for `/metrics` and tracks whether the
/// store is reachable for `/readyz`.
pub struct ObservedStateStore {
    inner: Arc<dyn AutoScalerStateStore<String, Ctx>>,
    metrics: Arc<ServiceMetrics>,
}

impl ObservedStateStore {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn AutoScalerStateStore<String, Ctx>>, metrics: Arc<ServiceMetrics>) -> Self {
        Self { inner, metrics }
    }

    /// Keeps the job's latest evaluation for `/metrics` (shared, not copied).
    fn keep_evaluation(&self, ctx: &Ctx, evaluated: &Arc<EvaluatedMetrics>) {
        if let Some(series) = self.metrics.get(&ctx.labels.job_key) {
            series.set_evaluation(Arc::clone(evaluated));
        }
    }
}

#[async_trait]
impl AutoScalerStateStore<String, Ctx> for ObservedStateStore {
    async fn store_scaling_history(&self, ctx: &Ctx, value: &ScalingHistory) -> StateResult<()> {
        self.inner.store_scaling_history(ctx, value).await
    }
    async fn get_scaling_history(&self, ctx: &Ctx) -> StateResult<ScalingHistory> {
        self.inner.get_scaling_history(ctx).await
    }
    async fn remove_scaling_history(&self, ctx: &Ctx) -> StateResult<()> {
        self.inner.remove_scaling_history(ctx).await
    }
    async fn store_scaling_tracking(&self, ctx: &Ctx, value: &ScalingTracking) -> StateResult<()> {
        self.inner.store_scaling_tracking(ctx, value).await
    }
    async fn get_scaling_tracking(&self, ctx: &Ctx) -> StateResult<ScalingTracking> {
        self.inner.get_scaling_tracking(ctx).await
    }
    async fn remove_scaling_tracking(&self, ctx: &Ctx) -> StateResult<()> {
        self.inner.remove_scaling_tracking(ctx).await
    }
    async fn store_collected_metrics(&self, ctx: &Ctx, value: &MetricHistory) -> StateResult<()> {
        self.inner.store_collected_metrics(ctx, value).await
    }
    async fn get_collected_metrics(&self, ctx: &Ctx) -> StateResult<MetricHistory> {
        self.inner.get_collected_metrics(ctx).await
    }
    async fn remove_collected_metrics(&self, ctx: &Ctx) -> StateResult<()> {
        self.inner.remove_collected_metrics(ctx).await
    }
    async fn store_parallelism_overrides(&self, ctx: &Ctx, value: &ParallelismOverrides) -> StateResult<()> {
        self.inner.store_parallelism_overrides(ctx, value).await
    }
    async fn get_parallelism_overrides(&self, ctx: &Ctx) -> StateResult<ParallelismOverrides> {
        self.inner.get_parallelism_overrides(ctx).await
    }
    async fn remove_parallelism_overrides(&self, ctx: &Ctx) -> StateResult<()> {
        self.inner.remove_parallelism_overrides(ctx).await
    }
    async fn store_config_changes(&self, ctx: &Ctx, value: &ConfigChanges) -> StateResult<()> {
        self.inner.store_config_changes(ctx, value).await
    }
    async fn get_config_changes(&self, ctx: &Ctx) -> StateResult<ConfigChanges> {
        self.inner.get_config_changes(ctx).await
    }
    async fn remove_config_changes(&self, ctx: &Ctx) -> StateResult<()> {
        self.inner.remove_config_changes(ctx).await
    }
    async fn store_delayed_scale_down(&self, ctx: &Ctx, value: &DelayedScaleDown) -> StateResult<()> {
        self.inner.store_delayed_scale_down(ctx, value).await
    }
    async fn get_delayed_scale_down(&self, ctx: &Ctx) -> StateResult<DelayedScaleDown> {
        self.inner.get_delayed_scale_down(ctx).await
    }
    async fn remove_delayed_scale_down(&self, ctx: &Ctx) -> StateResult<()> {
        self.inner.remove_delayed_scale_down(ctx).await
    }

    async fn store_evaluated_metrics(&self, ctx: &Ctx, metrics: &Arc<EvaluatedMetrics>) -> StateResult<()> {
        self.keep_evaluation(ctx, metrics);
        self.inner.store_evaluated_metrics(ctx, metrics).await
    }

    async fn get_evaluated_metrics(&self, ctx: &Ctx) -> StateResult<Option<EvaluatedMetrics>> {
        self.inner.get_evaluated_metrics(ctx).await
    }

    async fn remove_evaluated_metrics(&self, ctx: &Ctx) -> StateResult<()> {
        self.inner.remove_evaluated_metrics(ctx).await
    }

    async fn get_job_state(&self, ctx: &Ctx) -> StateResult<JobState> {
        self.inner.get_job_state(ctx).await
    }
    async fn store_job_state(&self, ctx: &Ctx, state: &JobState, changes: &StateChanges) -> StateResult<()> {
        // A cycle hands its evaluation over as part of the job's state.
        if let Some(evaluated) = state.evaluated_metrics.as_ref().filter(|_| changes.evaluated_metrics) {
            self.keep_evaluation(ctx, evaluated);
        }
        self.inner.store_job_state(ctx, state, changes).await
    }

    async fn clear_all(&self, ctx: &Ctx) -> StateResult<()> {
        self.inner.clear_all(ctx).await
    }

    /// Flushes and records the outcome for `/readyz` (the store itself emits the flush latency
    /// and failure series). A flush refused by the lease check (another replica owns the job now)
    /// says nothing about the database's health and leaves readiness as it was.
    async fn flush(&self, ctx: &Ctx) -> StateResult<()> {
        let result = self.inner.flush(ctx).await;
        match &result {
            Err(autoscaler_core::StateError::Fenced { .. }) => {}
            other => self.metrics.health().set_state_ok(other.is_ok()),
        }
        result
    }

    async fn remove_info_from_cache(&self, key: &String) {
        self.inner.remove_info_from_cache(key).await;
    }

    async fn remove_job(&self, key: &String) -> StateResult<()> {
        self.inner.remove_job(key).await
    }
}
