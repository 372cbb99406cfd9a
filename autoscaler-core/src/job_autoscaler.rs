//! [`JobAutoScalerImpl`]: one autoscaler cycle per call — collect, evaluate, decide, realize, persist.

use crate::autoscaler::{AutoscalerError, CycleStep, JobAutoScaler};
use crate::clock::{Clock, SystemClock};
use crate::collector::{CollectError, MetricsCollector};
use crate::config::AutoScalerOptions;
use crate::context::GaugeKind;
use crate::context::{JobAutoScalerContext, JobStatus};
use crate::cycle::{self, CycleInput, CycleMetrics, CycleOutcome, CycleResult};
use crate::event::AutoScalerEventHandler;
use crate::model::event::ScalingReport;
use crate::model::state::{ConfigChanges, ParallelismOverrides};
use crate::model::state::{JobState, StateChanges};
use crate::plugins::PluginRegistry;
use crate::realizer::ScalingRealizer;
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
/// Looking a configuration up by its entries hashes all of them, so a configuration seen before is
/// first looked up by the address of its shared entries (a clone of one seen shares them), and only
/// then by its entries. Both maps use foldhash (seeded per process), which is cheaper than the
/// standard SipHash on these keys.
#[derive(Default)]
struct OptionsCache {
    maps: std::sync::Mutex<OptionsMaps>,
}

/// The two maps of an [`OptionsCache`], under one lock.
#[derive(Default)]
struct OptionsMaps {
    /// By entries.
    parsed: foldhash::HashMap<crate::config::Configuration, Arc<AutoScalerOptions>>,
    /// By [`crate::config::Configuration::entries_address`], with the configuration kept (so the
    /// address stays its own) to check that it still shares them.
    by_address: foldhash::HashMap<usize, (crate::config::Configuration, Arc<AutoScalerOptions>)>,
}

impl OptionsMaps {
    /// Keeps `options` as `conf`'s by the address of its entries (the map starts over when full).
    fn remember(&mut self, conf: &crate::config::Configuration, options: &Arc<AutoScalerOptions>) {
        if self.by_address.len() >= OptionsCache::CAPACITY {
            self.by_address.clear();
        }
        self.by_address
            .insert(conf.entries_address(), (conf.clone(), Arc::clone(options)));
    }
}

impl OptionsCache {
    /// Configurations kept per map; a map starts over when full.
    const CAPACITY: usize = 4096;

    /// [`AutoScalerOptions::from_configuration`] of `conf`, parsed once.
    fn get(&self, conf: &crate::config::Configuration) -> Result<Arc<AutoScalerOptions>, crate::config::OptionsError> {
        let lock = || self.maps.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let address = conf.entries_address();
        {
            let mut maps = lock();
            if let Some((kept, options)) = maps.by_address.get(&address)
                && kept.shares_entries_with(conf)
            {
                return Ok(Arc::clone(options));
            }
            if let Some(options) = maps.parsed.get(conf).map(Arc::clone) {
                maps.remember(conf, &options);
                return Ok(options);
            }
        }
        let options = Arc::new(AutoScalerOptions::from_configuration(conf)?);
        let mut maps = lock();
        if maps.parsed.len() >= Self::CAPACITY {
            maps.parsed.clear();
        }
        maps.parsed.insert(conf.clone(), Arc::clone(&options));
        maps.remember(conf, &options);
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
    /// The job's options are parsed once, its stored state is read once, [`cycle::run`] runs every
    /// stage on it, and only the parts it changed are written back and flushed. A decision to
    /// scale reaches the realizer only once it is durable: if the flush fails, nothing is sent,
    /// the job's cached state is dropped (the next cycle reads what is persisted and decides
    /// again), and stored overrides are not re-applied this cycle. The reference realizes in a
    /// `finally` after storing, whether or not the state reached the database; this project does
    /// not, so that no rescale happens that the state does not remember.
    pub async fn run_cycle(&self, ctx: &Ctx) -> Result<CycleOutcome, AutoscalerError> {
        let mut end = CycleEnd::default();
        let result = self.run_cycle_inner(ctx, &mut end).await;
        let result = match result {
            Ok(outcome) => Ok(outcome),
            // Another replica's job now: nothing of this cycle happened, and it is no fault of the job.
            Err(error @ AutoscalerError::Fenced { .. }) => return Err(error),
            Err(error) => {
                self.report_error(ctx, &error).await;
                Err(error)
            }
        };
        if !end.durable {
            return result;
        }
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

    /// Writes back the parts of `state` the cycle changed and flushes them. On failure the job's
    /// cached state is dropped, so that nothing unflushed is read back (and re-applied) later.
    async fn persist(&self, ctx: &Ctx, state: &JobState, changes: &StateChanges) -> Result<(), AutoscalerError> {
        let written = match self.state_store.store_job_state(ctx, state, changes).await {
            Ok(()) => self.state_store.flush(ctx).await,
            Err(error) => Err(error),
        };
        if let Err(error) = written {
            self.state_store.remove_info_from_cache(ctx.job_key()).await;
            return Err(match error {
                StateError::Fenced { job_key, reason } => AutoscalerError::Fenced { job_key, reason },
                other => AutoscalerError::cycle(CycleStep::Persist, other),
            });
        }
        Ok(())
    }

    async fn run_cycle_inner(&self, ctx: &Ctx, end: &mut CycleEnd) -> Result<CycleOutcome, AutoscalerError> {
        let options = self
            .options
            .get(ctx.configuration())
            .map_err(|e| AutoscalerError::cycle(CycleStep::Options, e))?;
        let options = &*options;
        end.excluded = options.vertex_exclude_ids.clone();
        end.memory_tuning_enabled = options.memory_tuning_enabled;
        if !options.enabled {
            let cleared = match self.state_store.clear_all(ctx).await {
                Ok(()) => self.state_store.flush(ctx).await,
                Err(error) => Err(error),
            };
            if let Err(error) = cleared {
                end.durable = false;
                return Err(AutoscalerError::cycle(CycleStep::Persist, error));
            }
            end.overrides = Some(ParallelismOverrides::new());
            end.config_changes = Some(ConfigChanges::default());
            return Ok(CycleOutcome::Disabled);
        }
        if ctx.job_status() != Some(JobStatus::Running) {
            return Ok(CycleOutcome::JobNotRunning);
        }
        let now = self.clock.now();
        let records = self.event_handler.wants_decision_records();
        let collected = match self.collector.collect(ctx, options, now).await {
            Ok(c) => c,
            Err(CollectError::NotReady(reason)) => {
                if records {
                    let record = cycle::not_ready_record(now, None, options, &reason);
                    self.event_handler.take_decision_record(ctx, record).await;
                }
                return Ok(CycleOutcome::NotReady(reason));
            }
            Err(e) => return Err(AutoscalerError::cycle(CycleStep::Collect, e)),
        };
        let plugins = self.plugins.resolve(ctx.configuration(), options);
        let mut state = match self.state_store.get_job_state(ctx).await {
            Ok(state) => state,
            Err(error) => {
                // What the store holds cannot be read: nothing of it is re-applied either.
                end.durable = false;
                return Err(AutoscalerError::cycle(CycleStep::Load, error));
            }
        };
        let input = CycleInput {
            now,
            metrics: CycleMetrics::Collected {
                collected,
                collected_at: now,
            },
            options,
            task_manager_cpu: ctx.task_manager_cpu(),
            task_manager_memory: ctx.task_manager_memory(),
            records,
            explain: false,
            job: None,
        };
        let mut result = cycle::run(&mut state, input, &plugins);
        end.excluded.clone_from(&result.excluded);
        if let Some(evaluated) = state
            .evaluated_metrics
            .as_ref()
            .filter(|_| result.changes.evaluated_metrics)
        {
            report_gauges(ctx, evaluated);
        }
        // The one exit: nothing of the cycle is emitted or realized before it is durable.
        if let Err(error) = self.persist(ctx, &state, &result.changes).await {
            end.durable = false;
            return Err(error);
        }
        end.overrides = Some(state.parallelism_overrides);
        end.config_changes = Some(state.config_changes);
        self.emit(ctx, &result, options).await;
        if let Some(decision) = result.outcome.decision() {
            let reporter = ctx.metrics_reporter();
            for (id, summary) in &decision.summaries {
                reporter.set_vertex_gauge(
                    id,
                    ScalingMetric::RecommendedParallelism,
                    GaugeKind::Current,
                    f64::from(summary.new_parallelism),
                );
            }
            report_memory_recommendation(ctx, decision);
            if matches!(decision.outcome, DecisionOutcome::Scale) {
                reporter.increment_counter("scalings");
            } else {
                reporter.increment_counter("balanced");
            }
        }
        if let Some(record) = result.record.take() {
            self.event_handler.take_decision_record(ctx, record).await;
        }
        match result.outcome {
            CycleOutcome::Failed { step, message } => Err(AutoscalerError::Cycle {
                step,
                message,
                source: None,
            }),
            outcome => Ok(outcome),
        }
    }

    /// Emits the cycle's events. Scaling reports go through the handler's report hook so it can
    /// deduplicate them by the recommended parallelism, as the reference's handlers do.
    async fn emit(&self, ctx: &Ctx, result: &CycleResult, options: &AutoScalerOptions) {
        let summaries = result.outcome.decision().map(|d| &d.summaries);
        for event in result.events() {
            match (&event.report_header, summaries) {
                (Some(header), Some(summaries)) => {
                    let report = ScalingReport {
                        summaries,
                        header,
                        text: &event.message,
                        root_cause: result.root_cause.as_deref(),
                        interval: options.scaling_event_interval,
                    };
                    self.event_handler.handle_scaling_event(ctx, &report).await
                }
                _ => {
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
            None => self
                .state_store
                .get_config_changes(ctx)
                .await
                .map_err(|e| AutoscalerError::cycle(CycleStep::Load, e))?,
        };
        self.realizer
            .realize_config_overrides(ctx, &changes)
            .await
            .map_err(|e| AutoscalerError::cycle(CycleStep::Realize, e))
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
                .map_err(|e| AutoscalerError::cycle(CycleStep::Load, e))?,
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
            .map_err(|e| AutoscalerError::cycle(CycleStep::Realize, e))
    }
}

/// What the end of a cycle hands to the override re-application.
#[derive(Debug)]
struct CycleEnd {
    /// Whether the job's state is known to be durable: false when it could not be read or
    /// flushed, and then nothing is re-applied.
    durable: bool,
    /// The overrides after the cycle, if it loaded the state (else they are read from the store).
    overrides: Option<ParallelismOverrides>,
    /// The vertices excluded from scaling this cycle.
    excluded: Vec<String>,
    /// The configuration changes after the cycle, if it loaded the state.
    config_changes: Option<ConfigChanges>,
    /// `memory.tuning.enabled` (false when the options do not parse).
    memory_tuning_enabled: bool,
}

impl Default for CycleEnd {
    fn default() -> Self {
        Self {
            durable: true,
            overrides: None,
            excluded: Vec::new(),
            config_changes: None,
            memory_tuning_enabled: false,
        }
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

#[async_trait]
impl<K, Ctx> JobAutoScaler<K, Ctx> for JobAutoScalerImpl<K, Ctx>
where
    K: Send + Sync + 'static,
    Ctx: JobAutoScalerContext<K> + 'static,
{
    async fn scale(&self, ctx: &Ctx) -> Result<(), AutoscalerError> {
        self.run_cycle(ctx).await.map(|_| ())
    }

    async fn forget_cached(&self, job_key: &K)
    where
        K: Sync,
    {
        self.state_store.remove_info_from_cache(job_key).await;
    }

    async fn cleanup(&self, job_key: &K) {
        self.collector.cleanup(job_key).await;
        // As the reference, a failed cleanup is logged only: the job is gone either way.
        if let Err(error) = self.state_store.remove_job(job_key).await {
            tracing::warn!(%error, "could not remove the state of a job that disappeared");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Configuration;

    const TARGET: &str = "job.autoscaler.utilization.target";

    #[test]
    fn options_are_parsed_once_per_configuration_and_follow_its_changes() {
        let cache = OptionsCache::default();
        let conf = Configuration::from_iter([(TARGET, "0.6")]);
        let first = cache.get(&conf).expect("valid");
        assert_eq!(first.utilization_target, 0.6);
        // A clone shares the entries: found by their address.
        assert!(Arc::ptr_eq(&first, &cache.get(&conf.clone()).expect("valid")));
        // Equal entries built apart: found by the entries, and from then on by their address too.
        let apart = Configuration::from_iter([(TARGET, "0.6")]);
        assert!(Arc::ptr_eq(&first, &cache.get(&apart).expect("valid")));
        assert!(Arc::ptr_eq(&first, &cache.get(&apart).expect("valid")));
        // A changed clone no longer shares the entries: its own options.
        let mut changed = conf.clone();
        changed.set(TARGET, "0.8");
        assert_eq!(cache.get(&changed).expect("valid").utilization_target, 0.8);
        assert_eq!(cache.get(&conf).expect("valid").utilization_target, 0.6);
        // Invalid options are an error every time, never kept.
        let invalid = Configuration::from_iter([(TARGET, "not a number")]);
        assert!(cache.get(&invalid).is_err() && cache.get(&invalid).is_err());
        let maps = cache.maps.lock().expect("not poisoned");
        assert_eq!((maps.parsed.len(), maps.by_address.len()), (2, 3));
    }

    #[test]
    fn configurations_dropped_in_turn_past_the_capacity_each_read_their_own_options() {
        let cache = OptionsCache::default();
        // A kept configuration keeps its address; once a full map starts over, the addresses of
        // the configurations dropped meanwhile are free for new ones, which must not find the old
        // options.
        for i in 0..OptionsCache::CAPACITY + 500 {
            let target = format!("0.{}", 1 + i % 9);
            let conf = Configuration::from_iter([(TARGET, target.as_str())]);
            let options = cache.get(&conf).expect("valid");
            assert_eq!(options.utilization_target, target.parse::<f64>().expect("a number"));
        }
    }
}
