//! The seams through which `run` records and publishes: a [`RecordingCollector`] around any
//! [`MetricsCollector`] writes each collection as it arrives, a [`DecisionPublisher`] around any
//! [`AutoScalerEventHandler`] writes each decision record and puts it on the status board. Both
//! only observe: what they wrap sees exactly what it would see without them, and a failed write is
//! logged, never an error of the cycle.

use crate::status::DecisionBoard;
use autoscaler_core::ScalingReport;
use autoscaler_core::record::DecisionRecord;
use autoscaler_core::{
    AutoScalerEventHandler, EventType, JobAutoScalerContext, async_trait, config::AutoScalerOptions,
};
use autoscaler_core::{CollectError, CollectedJobMetrics, MetricsCollector, MetricsSnapshot};
use autoscaler_replay::recording::{RecordedMetrics, Recorder};
use chrono::{DateTime, Utc};
use std::fmt::Display;
use std::sync::Arc;
use std::time::Duration;

/// Records every successful collection of the collector it wraps.
pub struct RecordingCollector<K, Ctx> {
    inner: Arc<dyn MetricsCollector<K, Ctx>>,
    recorder: Arc<Recorder>,
}

impl<K, Ctx> RecordingCollector<K, Ctx> {
    /// Wraps `inner`, recording into `recorder`.
    pub fn new(inner: Arc<dyn MetricsCollector<K, Ctx>>, recorder: Arc<Recorder>) -> Self {
        Self { inner, recorder }
    }
}

#[async_trait]
impl<K, Ctx> MetricsCollector<K, Ctx> for RecordingCollector<K, Ctx>
where
    K: Display + Send + Sync,
    Ctx: JobAutoScalerContext<K>,
{
    async fn collect(
        &self,
        ctx: &Ctx,
        options: &AutoScalerOptions,
        now: DateTime<Utc>,
    ) -> Result<CollectedJobMetrics, CollectError> {
        let collected = self.inner.collect(ctx, options, now).await?;
        let job = ctx.job_key().to_string();
        if let Err(error) = self.recorder.record_collection(
            &job,
            now,
            ctx.configuration(),
            &collected.topology,
            collected.job_running_since,
            ctx.task_manager_cpu(),
            ctx.task_manager_memory(),
            match &collected.metrics {
                MetricsSnapshot::Flink(raw) => RecordedMetrics::Flink(raw.clone()),
                MetricsSnapshot::Scaling(metrics) => RecordedMetrics::Scaling(metrics.clone()),
            },
        ) {
            tracing::warn!(%job, %error, "cannot record the collection");
        }
        Ok(collected)
    }

    async fn cleanup(&self, job_key: &K) {
        self.recorder.forget(&job_key.to_string());
        self.inner.cleanup(job_key).await;
    }
}

/// Publishes every decision record (status board, recording), then hands everything to the
/// handler it wraps.
pub struct DecisionPublisher<K, Ctx> {
    inner: Arc<dyn AutoScalerEventHandler<K, Ctx>>,
    board: Option<Arc<DecisionBoard>>,
    recorder: Option<Arc<Recorder>>,
}

impl<K, Ctx> DecisionPublisher<K, Ctx> {
    /// Wraps `inner`; records go to `board` and `recorder` when given.
    pub fn new(
        inner: Arc<dyn AutoScalerEventHandler<K, Ctx>>,
        board: Option<Arc<DecisionBoard>>,
        recorder: Option<Arc<Recorder>>,
    ) -> Self {
        Self { inner, board, recorder }
    }
}

#[async_trait]
impl<K, Ctx> AutoScalerEventHandler<K, Ctx> for DecisionPublisher<K, Ctx>
where
    K: Display + Send + Sync,
    Ctx: JobAutoScalerContext<K>,
{
    async fn handle_event(
        &self,
        ctx: &Ctx,
        event_type: EventType,
        reason: &str,
        message: &str,
        message_key: Option<&str>,
        interval: Option<Duration>,
    ) {
        self.inner
            .handle_event(ctx, event_type, reason, message, message_key, interval)
            .await;
    }

    async fn handle_exception(&self, ctx: &Ctx, reason: &str, error: &(dyn std::error::Error + Sync)) {
        self.inner.handle_exception(ctx, reason, error).await;
    }

    async fn handle_scaling_event(&self, ctx: &Ctx, report: &ScalingReport<'_>) {
        self.inner.handle_scaling_event(ctx, report).await;
    }

    fn wants_decision_records(&self) -> bool {
        self.board.is_some() || self.recorder.is_some() || self.inner.wants_decision_records()
    }

    async fn handle_decision_record(&self, ctx: &Ctx, record: &DecisionRecord) {
        self.take_decision_record(ctx, record.clone()).await;
    }

    /// Names the job in the record, records it, lends it to the inner handler and puts it on the
    /// board: the cycle's record itself, not a copy.
    async fn take_decision_record(&self, ctx: &Ctx, mut record: DecisionRecord) {
        let job = ctx.job_key().to_string();
        record.job = Some(job.clone());
        if let Some(recorder) = &self.recorder
            && let Err(error) = recorder.record_decision(&job, &record)
        {
            tracing::warn!(%job, %error, "cannot record the decision");
        }
        self.inner.handle_decision_record(ctx, &record).await;
        if let Some(board) = &self.board {
            board.publish(&job, record);
        }
    }
}
