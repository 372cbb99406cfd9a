//! [`LoggingEventHandler`]: the default event handler, one `tracing` line per event.

use crate::context::JobAutoScalerContext;
use crate::event::AutoScalerEventHandler;
use crate::model::event::EventType;
use async_trait::async_trait;
use std::fmt::Display;
use std::time::Duration;

/// Logs every event through `tracing` (Warning events at WARN, Normal at INFO), without
/// deduplication, as the reference's `LoggingEventHandler`.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoggingEventHandler;

#[async_trait]
impl<K, Ctx> AutoScalerEventHandler<K, Ctx> for LoggingEventHandler
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
        let _ = (message_key, interval);
        let job = ctx.job_key().to_string();
        match event_type {
            EventType::Normal => tracing::info!(job = %job, reason, "{message}"),
            EventType::Warning => tracing::warn!(job = %job, reason, "{message}"),
        }
    }

    /// Logs the decision's summary and root cause: at INFO when the job scales or is blocked, at
    /// DEBUG otherwise.
    async fn handle_decision_record(&self, ctx: &Ctx, record: &crate::record::DecisionRecord) {
        use crate::record::JobOutcome;
        let job = ctx.job_key().to_string();
        let root_cause = record.root_cause.as_deref().unwrap_or("");
        match record.outcome {
            JobOutcome::Scale | JobOutcome::Blocked => {
                tracing::info!(job = %job, root_cause, "decision: {}", record.summary)
            }
            _ => tracing::debug!(job = %job, root_cause, "decision: {}", record.summary),
        }
    }
}
