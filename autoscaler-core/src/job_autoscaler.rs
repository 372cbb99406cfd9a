//! [`JobAutoScalerImpl`]: one autoscaler cycle per call — collect, evaluate, decide, realize, persist.

use crate::autoscaler::{AutoscalerError, JobAutoScaler};
use crate::clock::{Clock, SystemClock};
use crate::collector::{CollectError, MetricsCollector};
use crate::config::AutoScalerOptions;
use crate::context::GaugeKind;
use crate::context::{JobAutoScalerContext, JobStatus};
use crate::cycle::{self, DecisionFacts, Stage};
use crate::event::AutoScalerEventHandler;
use crate::model::state::{ConfigChanges, ParallelismOverrides};
use crate::model::state::{JobState, StateChanges};
use crate::plugins::PluginRegistry;
use crate::realizer::ScalingRealizer;
use crate::record::{DecisionRecord, JobOutcome};
use crate::scaling::DecisionOutcome;
use crate::state::{AutoScalerStateStore, StateError};
use async_trait::async_trait;
use autoscaler_metrics::{ScalingMetric, VertexId};
use std::marker::PhantomData;
use std::sync::Arc;

/// Reason of the event emitted when a cycle fails, or a scale panics in the standalone loop (the
/// reference's `AUTOSCALER_ERROR`).
pub const AUTOSCALER_ERROR_REASON: &str = "AutoscalerError";

/// Config key of the user's own parallelism overrides (`vertex:parallelism,...`).
pub const PIPELINE_PARALLELISM_OVERRIDES: &str = "pipeline.jobvertex-parallelism-overrides";

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
/// wired from the four FLIP-334 adapters plus a [`MetricsCollector`], and optionally the plugins a
/// job's configuration can select ([`with_plugins`](Self::with_plugins)).
pub struct JobAutoScalerImpl<K, Ctx> {
    collector: Arc<dyn MetricsCollector<K, Ctx>>,
    state_store: Arc<dyn AutoScalerStateStore<K, Ctx>>,
    realizer: Arc<dyn ScalingRealizer<K, Ctx>>,
    event_handler: Arc<dyn AutoScalerEventHandler<K, Ctx>>,
    clock: Arc<dyn Clock>,
    plugins: PluginRegistry,
    options: OptionsCache,
    _key: PhantomData<fn(K)>,
}

/// The parsed options of every configuration seen lately. Parsing is a pure function of the
/// configuration, and a job keeps its configuration for many cycles: a cycle parses only a
/// configuration it has not seen (at most [`OptionsCache::CAPACITY`] are kept).
///
/// Looking a configuration up hashes all of its entries every cycle, so the map uses foldhash
/// (seeded per process), which is cheaper than the standard SipHash on these string keys.
#[derive(Default)]
struct OptionsCache {
    parsed: std::sync::Mutex<
        std::collections::HashMap<crate::config::Configuration, Arc<AutoScalerOptions>, foldhash::fast::RandomState>,
    >,
}

impl OptionsCache {
    /// Configurations kept; the cache starts over when full.
    const CAPACITY: usize = 4096;

    /// [`AutoScalerOptions::from_configuration`] of `conf`, parsed once.
    fn get(&self, conf: &crate::config::Configuration) -> Result<Arc<AutoScalerOptions>, crate::config::OptionsError> {
        let lock = || self.parsed.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(options) = lock().get(conf) {
            return Ok(Arc::clone(options));
        }
        let options = Arc::new(AutoScalerOptions::from_configuration(conf)?);
        let mut parsed = lock();
        if parsed.len() >= Self::CAPACITY {
            parsed.clear();
        }
        parsed.insert(conf.clone(), Arc::clone(&options));
        Ok(options)
    }
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
            plugins: PluginRegistry::new(),
            options: OptionsCache::default(),
            _key: PhantomData,
        }
    }

    /// Replaces the clock (simulations, tests).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Offers the plugins of `registry` to every job (default: none). Each cycle resolves the
    /// ones the job's configuration selects by name ([`PluginRegistry::resolve`]): the custom
    /// evaluator in the evaluation, the custom alignment mode, the cluster-resource check and the
    /// scaling executor chain in the decision. A configured name that is not registered is
    /// skipped with a warning in the log (a custom alignment mode falls back to BALANCED), as the
    /// reference does; a plugin that fails fails the cycle with an `AutoscalerError` event, and
    /// nothing is recorded or realized.
    ///
    /// ```
    /// use autoscaler_core::plugins::{ExecutorContext, PluginError, PluginRegistry, ScalingExecutorPlugin, ScalingSummaries};
    /// /// Approves every scaling as proposed.
    /// struct Approve;
    /// impl ScalingExecutorPlugin for Approve {
    ///     fn apply(&self, _: &ExecutorContext<'_>, s: ScalingSummaries) -> Result<ScalingSummaries, PluginError> {
    ///         Ok(s)
    ///     }
    /// }
    /// let registry = PluginRegistry::new().with_executor("approve", Approve);
    /// // JobAutoScalerImpl::new(collector, store, realizer, events).with_plugins(registry)
    /// # let _ = registry;
    /// ```
    pub fn with_plugins(mut self, registry: PluginRegistry) -> Self {
        self.plugins = registry;
        self
    }

    /// Runs one cycle and tells what happened. Errors are also reported as an `AutoscalerError`
    /// Warning event and an `errors` counter increment; stored state is never lost on error.
    ///
    /// The job's options are parsed once, each stored state is read once, the steps of
    /// [`crate::cycle`] run on them, and only the parts they changed are written back.
    pub async fn run_cycle(&self, ctx: &Ctx) -> Result<CycleOutcome, AutoscalerError> {
        let mut end = CycleEnd::default();
        let result = self.run_cycle_inner(ctx, &mut end).await;
        let result = match result {
            Ok(outcome) => Ok(outcome),
            Err(error) => {
                self.report_error(ctx, &error).await;
                Err(error)
            }
        };
        // The reference re-applies stored overrides every cycle, whatever happened ("self-healing").
        if let Err(error) = self.apply_parallelism_overrides(ctx, &mut end).await {
            self.report_error(ctx, &error).await;
            return result.and(Err(error));
        }
        if let Err(error) = self.apply_config_overrides(ctx, end).await {
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

    /// Reads every stored state of the job once.
    async fn load_state(&self, ctx: &Ctx) -> Result<JobState, AutoscalerError> {
        self.state_store.get_job_state(ctx).await.map_err(state_error)
    }

    /// Writes back the parts of `state` the cycle changed.
    async fn persist(&self, ctx: &Ctx, state: &JobState, changes: &StateChanges) -> Result<(), AutoscalerError> {
        self.state_store
            .store_job_state(ctx, state, changes)
            .await
            .map_err(state_error)
    }

    async fn run_cycle_inner(&self, ctx: &Ctx, end: &mut CycleEnd) -> Result<CycleOutcome, AutoscalerError> {
        let options = self
            .options
            .get(ctx.configuration())
            .map_err(|e| cycle_error("options", e))?;
        let options = &*options;
        end.excluded = options.vertex_exclude_ids.clone();
        end.memory_tuning_enabled = options.memory_tuning_enabled;
        if !options.enabled {
            self.state_store.clear_all(ctx).await.map_err(state_error)?;
            self.state_store.flush(ctx).await.map_err(state_error)?;
            end.overrides = Some(ParallelismOverrides::new());
            end.config_changes = Some(ConfigChanges::default());
            return Ok(CycleOutcome::Disabled);
        }
        if ctx.job_status() != Some(JobStatus::Running) {
            return Ok(CycleOutcome::JobNotRunning);
        }
        let now = self.clock.now();
        let wants_records = self.event_handler.wants_decision_records();

        let collected = match self.collector.collect(ctx, options, now).await {
            Ok(c) => c,
            Err(CollectError::NotReady(reason)) => {
                if wants_records {
                    let record = DecisionRecord::undecided(
                        now,
                        None,
                        None,
                        None,
                        options,
                        options.restart_time,
                        JobOutcome::NotReady,
                        &format!("metrics_not_ready: {reason}"),
                    );
                    self.event_handler.handle_decision_record(ctx, &record).await;
                }
                return Ok(CycleOutcome::NotReady(reason));
            }
            Err(e) => return Err(cycle_error("collect", e)),
        };
        let plugins = self.plugins.resolve(ctx.configuration(), options);
        let mut state = self.load_state(ctx).await?;
        let mut changes = StateChanges::default();
        let observation = cycle::observe(&mut state, &mut changes, collected, now, now, options);
        end.excluded = observation.excluded_vertices(options);
        let assessment = cycle::assess_with_plugins(&mut state, &mut changes, &observation, now, options, &plugins);
        let (stabilizing, evaluated) = match assessment.stage {
            Stage::InsufficientSamples => {
                self.persist(ctx, &state, &changes).await?;
                end.overrides = Some(state.parallelism_overrides);
                end.config_changes = Some(state.config_changes);
                self.state_store.flush(ctx).await.map_err(state_error)?;
                if wants_records {
                    let record = DecisionRecord::undecided(
                        now,
                        None,
                        Some(&observation.topology),
                        None,
                        options,
                        assessment.scaling.restart_time,
                        JobOutcome::NotReady,
                        cycle::INSUFFICIENT_SAMPLES,
                    );
                    self.event_handler.handle_decision_record(ctx, &record).await;
                }
                return Ok(CycleOutcome::InsufficientSamples);
            }
            Stage::Failed(error) => {
                self.persist(ctx, &state, &changes).await?;
                end.overrides = Some(state.parallelism_overrides);
                end.config_changes = Some(state.config_changes);
                return Err(cycle_error("evaluate", error));
            }
            Stage::WindowNotFull { stabilizing, evaluated } => (Some(stabilizing), evaluated),
            Stage::Ready(evaluated) => (None, evaluated),
        };
        report_gauges(ctx, &evaluated);
        // Shared with the store, which may keep it (the in-memory store does) without a copy.
        let evaluated = Arc::new(evaluated);
        self.state_store
            .store_evaluated_metrics(ctx, &evaluated)
            .await
            .map_err(state_error)?;
        if let Some(stabilizing) = stabilizing {
            self.persist(ctx, &state, &changes).await?;
            end.overrides = Some(state.parallelism_overrides);
            end.config_changes = Some(state.config_changes);
            self.state_store.flush(ctx).await.map_err(state_error)?;
            if wants_records {
                let record = DecisionRecord::undecided(
                    now,
                    None,
                    Some(&observation.topology),
                    Some(&evaluated),
                    options,
                    assessment.scaling.restart_time,
                    JobOutcome::NotReady,
                    cycle::window_not_full_reason(stabilizing),
                );
                self.event_handler.handle_decision_record(ctx, &record).await;
            }
            return Ok(CycleOutcome::WindowNotFull { stabilizing });
        }

        let facts = DecisionFacts {
            now,
            topology: &observation.topology,
            evaluated: &evaluated,
            options,
            unmeasured: &observation.unmeasured,
            task_manager_cpu: ctx.task_manager_cpu(),
            task_manager_memory: ctx.task_manager_memory(),
        };
        let restart_time = assessment.scaling.restart_time;
        let decision =
            match cycle::conclude_with_plugins(&mut state, &mut changes, assessment.scaling, &facts, &plugins) {
                Ok(decision) => decision,
                Err(error) => {
                    // Nothing of the decision is recorded; the window and the trimmed history are kept.
                    self.persist(ctx, &state, &changes).await?;
                    end.overrides = Some(state.parallelism_overrides);
                    end.config_changes = Some(state.config_changes);
                    self.state_store.flush(ctx).await.map_err(state_error)?;
                    return Err(cycle_error("decide", error));
                }
            };
        // The decision explained, for the handler (beside the reference's events, which stay as
        // they are), when it wants it; the root cause also when a scaling report carries its line.
        let reports = decision.events.iter().any(|e| e.report_header.is_some());
        let explanation = (wants_records || reports)
            .then(|| autoscaler_metrics::root_cause::explain(&observation.topology, &state.metric_history))
            .flatten();
        let root_cause = explanation
            .as_ref()
            .and_then(|e| crate::record::root_cause_line(&observation.topology, e));
        let record = wants_records.then(|| {
            let mut record = DecisionRecord::concluded(
                now,
                None,
                &observation,
                &state.metric_history,
                &evaluated,
                &decision,
                options,
                restart_time,
            );
            if let Some(explanation) = &explanation {
                record.set_explanation(&observation.topology, explanation);
            }
            record
        });
        for event in &decision.events {
            match &event.report_header {
                // Scaling reports go through the handler's report hook so it can deduplicate them by
                // the recommended parallelism, as the reference's handlers do.
                Some(header) => {
                    let report = crate::model::event::ScalingReport {
                        summaries: &decision.summaries,
                        header,
                        text: &event.message,
                        root_cause: root_cause.as_deref(),
                        interval: options.scaling_event_interval,
                    };
                    self.event_handler.handle_scaling_event(ctx, &report).await
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
        let reporter = ctx.metrics_reporter();
        for (id, summary) in &decision.summaries {
            reporter.set_vertex_gauge(
                id,
                ScalingMetric::RecommendedParallelism,
                GaugeKind::Current,
                f64::from(summary.new_parallelism),
            );
        }
        report_memory_recommendation(ctx, &decision);
        self.persist(ctx, &state, &changes).await?;
        end.overrides = Some(state.parallelism_overrides);
        end.config_changes = Some(state.config_changes);
        if matches!(decision.outcome, DecisionOutcome::Scale) {
            reporter.increment_counter("scalings");
        } else {
            reporter.increment_counter("balanced");
        }
        self.state_store.flush(ctx).await.map_err(state_error)?;
        if let Some(record) = &record {
            self.event_handler.handle_decision_record(ctx, record).await;
        }
        Ok(CycleOutcome::Decided(decision.outcome))
    }

    /// While `memory.tuning.enabled`, hands the configuration changes (memory tuning's, from the
    /// last executed scaling) to the realizer, every cycle (the reference's
    /// `applyConfigOverrides`). They are the cycle's when it loaded the state, else they are read
    /// from the store.
    async fn apply_config_overrides(&self, ctx: &Ctx, end: CycleEnd) -> Result<(), AutoscalerError> {
        if !end.memory_tuning_enabled {
            return Ok(());
        }
        let changes = match end.config_changes {
            Some(changes) => changes,
            None => self.state_store.get_config_changes(ctx).await.map_err(state_error)?,
        };
        self.realizer
            .realize_config_overrides(ctx, &changes)
            .await
            .map_err(|e| cycle_error("realize", e))
    }

    /// Sends the overrides, merged with the user's `pipeline.jobvertex-parallelism-overrides`
    /// (the autoscaler wins, except for the cycle's excluded vertices), to the realizer. The
    /// overrides are the cycle's when it loaded the state, else they are read from the store.
    async fn apply_parallelism_overrides(&self, ctx: &Ctx, end: &mut CycleEnd) -> Result<(), AutoscalerError> {
        let stored = match end.overrides.take() {
            Some(overrides) => overrides,
            None => self
                .state_store
                .get_parallelism_overrides(ctx)
                .await
                .map_err(state_error)?,
        };
        if stored.is_empty() {
            return Ok(());
        }
        let user = user_overrides(ctx.configuration().get(PIPELINE_PARALLELISM_OVERRIDES));
        // Without overrides of the user's to keep, the stored overrides are the merge.
        let merged = if user.is_empty() {
            stored
        } else {
            let mut merged = user;
            for (id, p) in stored {
                if end.excluded.iter().any(|e| e == id.as_str()) && merged.contains_key(&id) {
                    continue;
                }
                merged.insert(id, p);
            }
            merged
        };
        self.realizer
            .realize_parallelism_overrides(ctx, &merged)
            .await
            .map_err(|e| cycle_error("realize", e))
    }
}

/// What the end of a cycle hands to the override re-application.
#[derive(Debug, Default)]
struct CycleEnd {
    /// The overrides after the cycle, if it loaded the state (else they are read from the store).
    overrides: Option<ParallelismOverrides>,
    /// The vertices excluded from scaling this cycle.
    excluded: Vec<String>,
    /// The configuration changes after the cycle, if it loaded the state.
    config_changes: Option<ConfigChanges>,
    /// `memory.tuning.enabled` (false when the options do not parse).
    memory_tuning_enabled: bool,
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
    if !reporter.wants_gauges() {
        return;
    }
    for (id, metrics) in &evaluated.vertices {
        for (metric, value) in metrics.iter() {
            reporter.set_vertex_gauge(id, metric, GaugeKind::Current, value.current);
            if metric.calculates_average() {
                reporter.set_vertex_gauge(id, metric, GaugeKind::Average, value.average);
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
