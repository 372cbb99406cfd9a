//! The port through which the autoscaler emits events: [`AutoScalerEventHandler`]. The event
//! vocabulary (types, the scaling report) is plain data in [`crate::model::event`].

use crate::context::JobAutoScalerContext;
use crate::model::event::{EventType, SCALING_REPORT_KEY, SCALING_REPORT_REASON, ScalingReport};
use crate::record::DecisionRecord;
use async_trait::async_trait;
use std::time::Duration;

/// Receives the autoscaler's events (FLIP-334's `AutoScalerEventHandler`).
///
/// `interval` asks the handler to suppress an event whose identity (job, type, reason and
/// `message_key`, or the message when there is no key) was already emitted within it; `None`
/// means never deduplicate. Only [`handle_event`](Self::handle_event) is required: exceptions,
/// scaling reports and decision records become events by default.
///
/// ```
/// use autoscaler_core::prelude::*;
/// use std::time::Duration;
///
/// /// Sends events to our audit log.
/// struct Audit;
///
/// #[async_trait]
/// impl AutoScalerEventHandler<String, BasicJobContext<String, ()>> for Audit {
///     async fn handle_event(
///         &self,
///         ctx: &BasicJobContext<String, ()>,
///         event_type: EventType,
///         reason: &str,
///         message: &str,
///         _message_key: Option<&str>,
///         _interval: Option<Duration>,
///     ) {
///         println!("[{event_type}] {}: {reason}: {message}", ctx.job_key());
///     }
/// }
/// ```
#[async_trait]
pub trait AutoScalerEventHandler<K, Ctx>: Send + Sync
where
    Ctx: JobAutoScalerContext<K>,
{
    /// Handles one event.
    async fn handle_event(
        &self,
        ctx: &Ctx,
        event_type: EventType,
        reason: &str,
        message: &str,
        message_key: Option<&str>,
        interval: Option<Duration>,
    );

    /// Handles an error: a Warning event with the error's message, never deduplicated.
    async fn handle_exception(&self, ctx: &Ctx, reason: &str, error: &(dyn std::error::Error + Sync)) {
        let message = error.to_string();
        self.handle_event(ctx, EventType::Warning, reason, &message, None, None)
            .await;
    }

    /// Receives the cycle's [`DecisionRecord`](DecisionRecord): why it decided what
    /// it decided (this project's addition; the reference's events are emitted unchanged beside
    /// it). Called once per cycle that got as far as a collection, after the events. The record's
    /// `job` is `None`: the handler knows the job from `ctx`. Ignored by default.
    async fn handle_decision_record(&self, ctx: &Ctx, record: &DecisionRecord) {
        let _ = (ctx, record);
    }

    /// [`handle_decision_record`](Self::handle_decision_record) with the record given away, which
    /// is how the cycle hands it over: a handler that keeps records (a status board, a queue)
    /// overrides this one to keep it without a copy. By default it lends the record to
    /// `handle_decision_record`.
    async fn take_decision_record(&self, ctx: &Ctx, record: DecisionRecord) {
        self.handle_decision_record(ctx, &record).await;
    }

    /// Whether [`handle_decision_record`](Self::handle_decision_record) does anything with the
    /// records. When `false`, the cycle skips building them (the true-processing-rate estimates,
    /// and the root-cause analysis of the window unless a scaling report needs its line) and never
    /// calls it. `true` by default; a
    /// handler that keeps the default `handle_decision_record` should say `false`, and a handler
    /// that wraps another should answer for both.
    fn wants_decision_records(&self) -> bool {
        true
    }

    /// Handles a scaling report ([`ScalingReport`]). The default implementation emits
    /// [`ScalingReport::message`] (the reference's text plus the cycle's root-cause line) as a
    /// Normal `ScalingReport` event under the key `ScalingExecutor` and the report's interval.
    async fn handle_scaling_event(&self, ctx: &Ctx, report: &ScalingReport<'_>) {
        let message = report.message();
        self.handle_event(
            ctx,
            EventType::Normal,
            SCALING_REPORT_REASON,
            &message,
            Some(SCALING_REPORT_KEY),
            Some(report.interval),
        )
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{AutoScalerOptions, Configuration};
    use crate::context::BasicJobContext;
    use std::sync::Mutex;

    type Ctx = BasicJobContext<String, ()>;

    /// Keeps the reasons of the records lent to it.
    #[derive(Default)]
    struct Lent(Mutex<Vec<Option<String>>>);

    #[async_trait]
    impl AutoScalerEventHandler<String, Ctx> for Lent {
        async fn handle_event(&self, _: &Ctx, _: EventType, _: &str, _: &str, _: Option<&str>, _: Option<Duration>) {}

        async fn handle_decision_record(&self, _: &Ctx, record: &DecisionRecord) {
            self.0.lock().expect("not poisoned").push(record.reason.clone());
        }
    }

    #[tokio::test]
    async fn a_record_given_away_is_lent_to_handle_decision_record_by_default() {
        let handler = Lent::default();
        let ctx = BasicJobContext::new("job".to_owned(), Configuration::new(), ());
        let options = AutoScalerOptions::default();
        let record = crate::cycle::not_ready_record(chrono::DateTime::UNIX_EPOCH, None, &options, "warming up");
        let reason = record.reason.clone();
        assert!(reason.is_some());
        handler.take_decision_record(&ctx, record).await;
        assert_eq!(*handler.0.lock().expect("not poisoned"), vec![reason]);
    }
}
