//! [`JobAutoScalerImpl`]: one autoscaler cycle per call — collect, evaluate, decide, realize, persist.

use crate::autoscaler::{AutoscalerError, JobAutoScaler};
use crate::collector::{CollectError, MetricsCollector};
use crate::context::{JobAutoScalerContext, JobStatus};
use crate::event::AutoScalerEventHandler;
use crate::options::AutoScalerOptions;
use crate::realizer::ScalingRealizer;
use crate::record::{DecisionRecord, JobOutcome, RecordInput};
use crate::scaling::{
    self, DecisionInput, DecisionOutcome, max_restart_time_or_default,
    record_restart_duration_if_tracked_and_parallelism_matches, record_scaling, trim_scaling_history,
    trim_scaling_tracking,
};
use crate::state::{AutoScalerStateStore, ConfigChanges, ParallelismOverrides, StateError};
use async_trait::async_trait;
use autoscaler_metrics::{ScalingMetric, VertexId, evaluate, true_processing_rate_estimates, window_status};
use chrono::{DateTime, Utc};
use std::marker::PhantomData;
use std::sync::Arc;

/// Reason of the event emitted when a cycle fails.
pub const AUTOSCALER_ERROR_REASON: &str = "AutoscalerError";

/// Config key of the user's own parallelism overrides (`vertex:parallelism,...`).
pub const PIPELINE_PARALLELISM_OVERRIDES: &str = "pipeline.jobvertex-parallelism-overrides";

/// A source of "now" for the cycle; inject a fixed or simulated clock in tests and simulations.
pub trait Clock: Send + Sync {
    /// The current instant.
    fn now(&self) -> DateTime<Utc>;
}

/// The wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

impl<F: Fn() -> DateTime<Utc> + Send + Sync> Clock for F {
    fn now(&self) -> DateTime<Utc> {
        self()
    }
}

/// What one call of [`JobAutoScalerImpl::run_cycle`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum CycleOutcome {
    /// The autoscaler is disabled for the job; its state was cleared.
    Disabled,
    /// The job is not RUNNING; only stored overrides were re-applied.
    JobNotRunning,
    /// Metrics were not ready (just started, metrics missing during stabilization).
    NotReady(String),
    /// Fewer than two samples: nothing to evaluate yet.
    InsufficientSamples,
    /// Evaluated for reporting only: the window is not full yet.
    WindowNotFull {
        /// Still inside the stabilization interval.
        stabilizing: bool,
    },
    /// A decision was made.
    Decided(DecisionOutcome),
}

/// The autoscaler for one kind of job: generic over the job key `K` and the platform's context `Ctx`,
/// wired from the four FLIP-334 adapters plus a [`MetricsCollector`].
pub struct JobAutoScalerImpl<K, Ctx> {
    collector: Arc<dyn MetricsCollector<K, Ctx>>,
    state_store: Arc<dyn AutoScalerStateStore<K, Ctx>>,
    realizer: Arc<dyn ScalingRealizer<K, Ctx>>,
    event_handler: Arc<dyn AutoScalerEventHandler<K, Ctx>>,
    clock: Arc<dyn Clock>,
    _key: PhantomData<fn(K)>,
}

impl<K, Ctx> JobAutoScalerImpl<K, Ctx>
where
    K: Send + Sync + 'static,
    Ctx: JobAutoScalerContext<K> + 'static,
{
    /// An autoscaler using the wall clock.
    pub fn new(
        collector: Arc<dyn MetricsCollector<K, Ctx>>,
        state_store: Arc<dyn AutoScalerStateStore<K, Ctx>>,
        realizer: Arc<dyn ScalingRealizer<K, Ctx>>,
        event_handler: Arc<dyn AutoScalerEventHandler<K, Ctx>>,
    ) -> Self {
        Self {
            collector,
            state_store,
            realizer,
            event_handler,
            clock: Arc::new(SystemClock),
            _key: PhantomData,
        }
    }

    /// Replaces the clock (simulations, tests).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Runs one cycle and tells what happened. Errors are also reported as an `AutoscalerError`
    /// Warning event and an `errors` counter increment; stored state is never lost on error.
    pub async fn run_cycle(&self, ctx: &Ctx) -> Result<CycleOutcome, AutoscalerError> {
        let result = self.run_cycle_inner(ctx).await;
        let result = match result {
            Ok(outcome) => Ok(outcome),
            Err(error) => {
                self.report_error(ctx, &error).await;
                Err(error)
            }
        };
        // The reference re-applies stored overrides every cycle, whatever happened ("self-healing").
        if let Err(error) = self.apply_parallelism_overrides(ctx).await {
            self.report_error(ctx, &error).await;
            return result.and(Err(error));
        }
        if let Err(error) = self.apply_config_overrides(ctx).await {
            self.report_error(ctx, &error).await;
            return result.and(Err(error));
        }
        result
    }

    async fn report_error(&self, ctx: &Ctx, error: &AutoscalerError) {
        ctx.metrics_reporter().increment_counter("errors");
        self.event_handler
            .handle_exception(ctx, AUTOSCALER_ERROR_REASON, error)
            .await;
    }

    async fn run_cycle_inner(&self, ctx: &Ctx) -> Result<CycleOutcome, AutoscalerError> {
        let mut options =
            AutoScalerOptions::from_configuration(ctx.configuration()).map_err(|e| cycle_error("options", e))?;
        if !options.enabled {
            self.state_store.clear_all(ctx).await.map_err(state_error)?;
            self.state_store.flush(ctx).await.map_err(state_error)?;
            return Ok(CycleOutcome::Disabled);
        }
        if ctx.job_status() != Some(JobStatus::Running) {
            return Ok(CycleOutcome::JobNotRunning);
        }
        let now = self.clock.now();

        // Collection (anchor §2.2): load the stored window, add this cycle's snapshot.
        let mut history = self.state_store.get_collected_metrics(ctx).await.map_err(state_error)?;
        let collected = match self.collector.collect(ctx, &history, now).await {
            Ok(c) => c,
            Err(CollectError::NotReady(reason)) => {
                let record = DecisionRecord::undecided(
                    now,
                    None,
                    None,
                    None,
                    &options,
                    options.restart_time,
                    JobOutcome::NotReady,
                    &format!("metrics_not_ready: {reason}"),
                );
                self.event_handler.handle_decision_record(ctx, &record).await;
                return Ok(CycleOutcome::NotReady(reason));
            }
            Err(e) => return Err(cycle_error("collect", e)),
        };
        let topology = collected.topology;
        if history
            .first_time()
            .is_some_and(|first| collected.job_running_since > first)
        {
            // The job restarted or was rescaled since the first sample: that window is void.
            self.state_store
                .remove_collected_metrics(ctx)
                .await
                .map_err(state_error)?;
            history.clear();
        }
        // Vertices whose busy time cannot be measured are never scaled (reference: legacy sources).
        for (id, values) in &collected.metrics.vertex_metrics {
            if values.get_or_absent(ScalingMetric::Load).is_nan()
                && !options.vertex_exclude_ids.contains(&id.to_string())
            {
                options.vertex_exclude_ids.push(id.to_string());
            }
        }
        history.insert(now, collected.metrics);
        let status = window_status(
            &history,
            collected.job_running_since,
            now,
            options.stabilization_interval,
            options.metrics_window,
        );
        if status.window_full {
            history.remove_before(autoscaler_metrics::time::sub_saturating(now, options.metrics_window));
        }
        self.state_store
            .store_collected_metrics(ctx, &history)
            .await
            .map_err(state_error)?;

        let mut scaling_history = self.state_store.get_scaling_history(ctx).await.map_err(state_error)?;
        let before = scaling_history.len();
        scaling_history.retain(|id, _| topology.get(id.as_str()).is_some());
        if scaling_history.len() != before {
            self.state_store
                .store_scaling_history(ctx, &scaling_history)
                .await
                .map_err(state_error)?;
        }
        let scaling_history = trim_scaling_history(&scaling_history, now, &options);
        let mut tracking = trim_scaling_tracking(
            &self.state_store.get_scaling_tracking(ctx).await.map_err(state_error)?,
            now,
            &options,
        );
        if record_restart_duration_if_tracked_and_parallelism_matches(
            &mut tracking,
            collected.job_running_since,
            &topology,
            &scaling_history,
        ) {
            self.state_store
                .store_scaling_tracking(ctx, &tracking)
                .await
                .map_err(state_error)?;
        }

        let restart_time = max_restart_time_or_default(&tracking, &options);
        if history.len() < 2 {
            self.state_store.flush(ctx).await.map_err(state_error)?;
            let record = DecisionRecord::undecided(
                now,
                None,
                Some(&topology),
                None,
                &options,
                restart_time,
                JobOutcome::NotReady,
                "insufficient_samples",
            );
            self.event_handler.handle_decision_record(ctx, &record).await;
            return Ok(CycleOutcome::InsufficientSamples);
        }

        // Evaluation (anchor §2.3).
        let evaluated = evaluate(&topology, &history, &options.evaluation_config(restart_time))
            .map_err(|e| cycle_error("evaluate", e))?;
        report_gauges(ctx, &evaluated);
        self.state_store
            .store_evaluated_metrics(ctx, &evaluated)
            .await
            .map_err(state_error)?;
        if !status.window_full {
            self.state_store.flush(ctx).await.map_err(state_error)?;
            let record = DecisionRecord::undecided(
                now,
                None,
                Some(&topology),
                Some(&evaluated),
                &options,
                restart_time,
                JobOutcome::NotReady,
                if status.stabilizing {
                    "stabilizing"
                } else {
                    "window_not_full"
                },
            );
            self.event_handler.handle_decision_record(ctx, &record).await;
            return Ok(CycleOutcome::WindowNotFull {
                stabilizing: status.stabilizing,
            });
        }

        // Decision (anchor §2.7).
        let mut delayed = self
            .state_store
            .get_delayed_scale_down(ctx)
            .await
            .map_err(state_error)?;
        let in_excluded_period = options.is_excluded_period(now).map_err(|e| cycle_error("options", e))?;
        let input = DecisionInput {
            now,
            topology: &topology,
            evaluated: &evaluated,
            scaling_history: &scaling_history,
            restart_time,
            options: &options,
            in_excluded_period,
            task_manager_cpu: ctx.task_manager_cpu(),
            task_manager_memory: ctx.task_manager_memory(),
        };
        let decision = scaling::decide(&input, &mut delayed);
        // The decision explained, for the handler (beside the reference's events, which stay as they are).
        let tpr = true_processing_rate_estimates(&topology, &history, &options.evaluation_config(restart_time));
        let mut record = DecisionRecord::decided(&RecordInput {
            at: now,
            job: None,
            topology: &topology,
            evaluated: &evaluated,
            decision: &decision,
            options: &options,
            restart_time,
            tpr: &tpr,
        });
        if let Some(explanation) = autoscaler_metrics::root_cause::explain(&topology, &history) {
            record.set_explanation(&topology, &explanation);
        }
        for event in &decision.events {
            match &event.report_header {
                // Scaling reports go through the handler's report hook so it can deduplicate them by
                // the recommended parallelism, as the reference's handlers do.
                Some(header) => {
                    self.event_handler
                        .handle_scaling_event(ctx, &decision.summaries, header, options.scaling_event_interval)
                        .await
                }
                None => {
                    self.event_handler
                        .handle_event(
                            ctx,
                            event.event_type,
                            &event.reason,
                            &event.message,
                            event.message_key.as_deref(),
                            event.interval,
                        )
                        .await
                }
            }
        }
        for (id, summary) in &decision.summaries {
            ctx.metrics_reporter().set_gauge(
                &format!("{id}.RECOMMENDED_PARALLELISM.Current"),
                f64::from(summary.new_parallelism),
            );
        }
        report_memory_recommendation(ctx, &decision);
        if matches!(decision.outcome, DecisionOutcome::Scale) {
            let mut full_history = self.state_store.get_scaling_history(ctx).await.map_err(state_error)?;
            full_history.retain(|id, _| topology.get(id.as_str()).is_some());
            record_scaling(&mut full_history, &mut tracking, now, &decision.summaries, &options);
            let full_history = trim_scaling_history(&full_history, now, &options);
            self.state_store
                .store_scaling_history(ctx, &full_history)
                .await
                .map_err(state_error)?;
            self.state_store
                .store_scaling_tracking(ctx, &tracking)
                .await
                .map_err(state_error)?;
            let overrides: ParallelismOverrides = evaluated
                .vertices
                .keys()
                .filter_map(|id| {
                    let current = topology.get(id.as_str())?.parallelism.get();
                    let new = decision.summaries.get(id).map_or(current, |s| s.new_parallelism);
                    Some((id.clone(), new))
                })
                .collect();
            self.state_store
                .store_parallelism_overrides(ctx, &overrides)
                .await
                .map_err(state_error)?;
            self.state_store
                .store_config_changes(ctx, &decision_config_changes(&decision))
                .await
                .map_err(state_error)?;
            self.state_store
                .store_delayed_scale_down(ctx, &delayed)
                .await
                .map_err(state_error)?;
            ctx.metrics_reporter().increment_counter("scalings");
        } else {
            if delayed.updated {
                self.state_store
                    .store_delayed_scale_down(ctx, &delayed)
                    .await
                    .map_err(state_error)?;
            }
            ctx.metrics_reporter().increment_counter("balanced");
        }
        self.state_store.flush(ctx).await.map_err(state_error)?;
        self.event_handler.handle_decision_record(ctx, &record).await;
        Ok(CycleOutcome::Decided(decision.outcome))
    }

    /// While `memory.tuning.enabled`, hands the stored configuration changes (memory tuning's, from
    /// the last executed scaling) to the realizer, every cycle (the reference's
    /// `applyConfigOverrides`).
    async fn apply_config_overrides(&self, ctx: &Ctx) -> Result<(), AutoscalerError> {
        let enabled = AutoScalerOptions::from_configuration(ctx.configuration()).is_ok_and(|o| o.memory_tuning_enabled);
        if !enabled {
            return Ok(());
        }
        let changes = self.state_store.get_config_changes(ctx).await.map_err(state_error)?;
        self.realizer
            .realize_config_overrides(ctx, &changes)
            .await
            .map_err(|e| cycle_error("realize", e))
    }

    /// Sends the stored overrides, merged with the user's `pipeline.jobvertex-parallelism-overrides`
    /// (the autoscaler wins, except for excluded vertices), to the realizer.
    async fn apply_parallelism_overrides(&self, ctx: &Ctx) -> Result<(), AutoscalerError> {
        let stored = self
            .state_store
            .get_parallelism_overrides(ctx)
            .await
            .map_err(state_error)?;
        if stored.is_empty() {
            return Ok(());
        }
        let excluded: Vec<String> = AutoScalerOptions::from_configuration(ctx.configuration())
            .map(|o| o.vertex_exclude_ids)
            .unwrap_or_default();
        let mut merged = user_overrides(ctx.configuration().get(PIPELINE_PARALLELISM_OVERRIDES));
        for (id, p) in stored {
            if excluded.iter().any(|e| e == id.as_str()) && merged.contains_key(&id) {
                continue;
            }
            merged.insert(id, p);
        }
        self.realizer
            .realize_parallelism_overrides(ctx, &merged)
            .await
            .map_err(|e| cycle_error("realize", e))
    }
}

/// Parses the user's `vertex:parallelism,...` map, skipping malformed entries.
fn user_overrides(value: Option<&str>) -> ParallelismOverrides {
    value
        .unwrap_or_default()
        .split(',')
        .filter_map(|entry| {
            let (k, v) = entry.split_once(':')?;
            Some((VertexId::new(k.trim()), v.trim().parse().ok()?))
        })
        .collect()
}

/// The configuration changes stored with an executed scaling: memory tuning's (empty when tuning
/// is disabled, which undoes earlier tuning).
fn decision_config_changes(decision: &crate::scaling::Decision) -> ConfigChanges {
    decision
        .memory_tuning
        .as_ref()
        .map(|t| t.changes.clone())
        .unwrap_or_default()
}

/// One gauge per size memory tuning recommended ([`MemoryRecommendation::gauges`](crate::tuning::MemoryRecommendation::gauges)).
fn report_memory_recommendation<K, Ctx: JobAutoScalerContext<K>>(ctx: &Ctx, decision: &crate::scaling::Decision) {
    if let Some(Ok(recommendation)) = decision.memory_tuning.as_ref().map(|t| &t.outcome) {
        for (name, bytes) in recommendation.gauges() {
            ctx.metrics_reporter().set_gauge(&name, bytes);
        }
    }
}

fn report_gauges<K, Ctx: JobAutoScalerContext<K>>(ctx: &Ctx, evaluated: &autoscaler_metrics::EvaluatedMetrics) {
    let reporter = ctx.metrics_reporter();
    for (id, metrics) in &evaluated.vertices {
        for (metric, value) in metrics.iter() {
            reporter.set_gauge(&format!("{id}.{metric}.Current"), value.current);
            if metric.calculates_average() {
                reporter.set_gauge(&format!("{id}.{metric}.Average"), value.average);
            }
        }
    }
}

fn cycle_error(step: &'static str, e: impl std::fmt::Display) -> AutoscalerError {
    AutoscalerError::Cycle {
        step,
        message: e.to_string(),
    }
}

fn state_error(e: StateError) -> AutoscalerError {
    AutoscalerError::Cycle {
        step: "persist",
        message: e.to_string(),
    }
}

#[async_trait]
impl<K, Ctx> JobAutoScaler<K, Ctx> for JobAutoScalerImpl<K, Ctx>
where
    K: Send + Sync + 'static,
    Ctx: JobAutoScalerContext<K> + 'static,
{
    async fn scale(&self, ctx: &Ctx) -> Result<(), AutoscalerError> {
        self.run_cycle(ctx).await.map(|_| ())
    }

    async fn cleanup(&self, job_key: &K) {
        self.collector.cleanup(job_key).await;
        // As the reference, a failed cleanup is logged only: the job is gone either way.
        if let Err(error) = self.state_store.remove_job(job_key).await {
            tracing::warn!(%error, "could not remove the state of a job that disappeared");
        }
    }
}

/// Removes the persisted state of a job through `ctx` (cleanup with a context at hand).
pub async fn clear_job_state<K, Ctx: JobAutoScalerContext<K>>(
    store: &dyn AutoScalerStateStore<K, Ctx>,
    ctx: &Ctx,
) -> Result<(), StateError> {
    store.clear_all(ctx).await?;
    store.flush(ctx).await
}
