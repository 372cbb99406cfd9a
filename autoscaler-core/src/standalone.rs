//! The standalone control loop (FLIP-334's `StandaloneAutoscalerExecutor`).
//!
//! Every `autoscaler.standalone.control-loop.interval` the loop fetches the job list and scales
//! every job on its own tokio task, at most `control-loop.parallelism` at a time. The rules it keeps:
//! - a slow or failing (even panicking) job never delays or breaks the others: the cycle only
//!   dispatches, it never waits for a scale;
//! - a job whose previous scale is still in flight (running or queued for a permit) is skipped;
//! - a job that disappears from the list is cleaned up exactly once; if its scale is still in
//!   flight, the cleanup runs when that scale finishes;
//! - a failed fetch is logged and the whole cycle skipped (no scaling, no cleanup);
//! - when the shutdown future completes the loop starts no new cycle (a fetch in flight is
//!   dropped), waits for the scales in flight (and their deferred cleanups) and returns; with
//!   [`StandaloneAutoscaler::run_with_abort`] that wait is bounded and the scales still running are
//!   cancelled.
//!
//! With [`StandaloneAutoscaler::with_ownership`] several replicas share the jobs: only the jobs
//! a [`JobOwnership`] grants this replica get a cycle, and a cycle whose lease is lost is
//! cancelled (see that method for the rules).
//!
//! The fetch and the cleanups run on the loop itself, as on the reference's single loop thread:
//! a fetcher must bound its own time (the reference's REST timeout), and `cleanup` should be quick.
//!
//! ```no_run
//! # use std::sync::Arc;
//! # use autoscaler_core::{BasicJobContext, JobAutoScaler, JobListFetcher, LoggingEventHandler};
//! # use autoscaler_core::{ControlLoopOptions, StandaloneAutoscaler};
//! # async fn demo(
//! #     fetcher: Arc<dyn JobListFetcher<String, BasicJobContext<String>>>,
//! #     scaler: Arc<dyn JobAutoScaler<String, BasicJobContext<String>>>,
//! # ) {
//! let options = ControlLoopOptions::default();
//! let control_loop = StandaloneAutoscaler::new(fetcher, scaler, Arc::new(LoggingEventHandler), options);
//! // SIGTERM handling is the binary's business; any future will do, e.g. ctrl-c or a CancellationToken.
//! control_loop.run(async { let _ = tokio::signal::ctrl_c().await; }).await;
//! # }
//! ```

use crate::autoscaler::{FetchError, JobAutoScaler, JobListFetcher};
use crate::config::Configuration;
use crate::config::OptionsError;
use crate::config::ValidationError;
use crate::config::parse_duration;
use crate::context::JobAutoScalerContext;
use crate::event::AutoScalerEventHandler;
use crate::job_autoscaler::AUTOSCALER_ERROR_REASON;
use crate::model::event::EventType;
use crate::ownership::{JobOwnership, Ownership, OwnershipStats};
use std::fmt::{Debug, Display};
use std::future::Future;
use std::hash::Hash;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Semaphore, watch};
use tokio::task::{Id as TaskId, JoinError, JoinHandle, JoinSet};
use tokio::time::Instant;
use tracing::Instrument;

/// Key of the control-loop interval (reference default 10 s).
pub const CONTROL_LOOP_INTERVAL_KEY: &str = "autoscaler.standalone.control-loop.interval";
/// Deprecated key of the control-loop interval, still honoured as the reference does.
pub const CONTROL_LOOP_INTERVAL_DEPRECATED_KEY: &str = "scalingInterval";
/// Key of the number of jobs scaled at the same time (reference default 100).
pub const CONTROL_LOOP_PARALLELISM_KEY: &str = "autoscaler.standalone.control-loop.parallelism";
/// Key of the event deduplication interval used for the validation warning (default 30 min).
pub const SCALING_EVENT_INTERVAL_KEY: &str = "job.autoscaler.scaling.event.interval";
/// Event reason of a job whose autoscaler options do not validate.
pub const VALIDATION_REASON: &str = "AutoScaler Options Validation";

const DEFAULT_PARALLELISM: NonZeroUsize = match NonZeroUsize::new(100) {
    Some(n) => n,
    None => NonZeroUsize::MIN,
};

/// Why an options validator refuses to let a job be scaled in this cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValidationRejection {
    /// The options are invalid: one `AutoScaler Options Validation` warning, deduplicated over
    /// `scaling.event.interval`.
    Invalid(String),
    /// The options cannot even be read: an `AutoscalerError` warning, as the reference reports the
    /// exception its validator throws then.
    Unreadable(String),
}

/// Checks a job's autoscaler options before it is scaled; a rejection is reported as an event and
/// the job is not scaled in that cycle.
pub type OptionsValidator<Ctx> = Arc<ValidatorFn<Ctx>>;

/// The function behind an [`OptionsValidator`].
pub type ValidatorFn<Ctx> = dyn Fn(&Ctx) -> Result<(), ValidationRejection> + Send + Sync;

/// Settings of the control loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlLoopOptions {
    /// Pause between the end of one cycle's dispatch and the next fetch (fixed delay, as the
    /// reference's `scheduleWithFixedDelay`).
    pub interval: Duration,
    /// How many jobs are scaled at the same time.
    pub parallelism: NonZeroUsize,
    /// Deduplication interval handed to the event handler with the validation warning.
    pub scaling_event_interval: Duration,
}

impl Default for ControlLoopOptions {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(10),
            parallelism: DEFAULT_PARALLELISM,
            scaling_event_interval: Duration::from_secs(30 * 60),
        }
    }
}

impl ControlLoopOptions {
    /// Reads the options from the standalone autoscaler's base configuration; unset keys keep
    /// the reference's defaults.
    ///
    /// ```
    /// use autoscaler_core::config::Configuration;
    /// use autoscaler_core::ControlLoopOptions;
    /// let conf = Configuration::from_iter([("autoscaler.standalone.control-loop.interval", "5 s")]);
    /// let options = ControlLoopOptions::from_configuration(&conf).unwrap();
    /// assert_eq!(options.interval, std::time::Duration::from_secs(5));
    /// assert_eq!(options.parallelism.get(), 100);
    /// ```
    pub fn from_configuration(conf: &Configuration) -> Result<Self, OptionsError> {
        let mut options = Self::default();
        let interval_key = [CONTROL_LOOP_INTERVAL_KEY, CONTROL_LOOP_INTERVAL_DEPRECATED_KEY]
            .into_iter()
            .find(|k| conf.contains_key(k));
        if let Some(key) = interval_key {
            options.interval = duration_option(conf, key)?;
        }
        if let Some(value) = conf.get(CONTROL_LOOP_PARALLELISM_KEY) {
            options.parallelism = value
                .trim()
                .parse::<NonZeroUsize>()
                .map_err(|_| invalid(CONTROL_LOOP_PARALLELISM_KEY, value, "a positive integer"))?;
        }
        if conf.contains_key(SCALING_EVENT_INTERVAL_KEY) {
            options.scaling_event_interval = duration_option(conf, SCALING_EVENT_INTERVAL_KEY)?;
        }
        Ok(options)
    }
}

fn invalid(key: &str, value: &str, expected: &str) -> OptionsError {
    OptionsError::InvalidValue {
        key: key.to_owned(),
        value: value.to_owned(),
        reason: format!("expected {expected}"),
    }
}

fn duration_option(conf: &Configuration, key: &str) -> Result<Duration, OptionsError> {
    let value = conf.get(key).unwrap_or_default();
    parse_duration(value).map_err(|reason| OptionsError::InvalidValue {
        key: key.to_owned(),
        value: value.to_owned(),
        reason,
    })
}

/// What one cycle did, for logs and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CycleReport<K> {
    /// Jobs whose scale was started (or queued for a permit), in list order.
    pub dispatched: Vec<K>,
    /// Jobs skipped because their previous scale is still in flight.
    pub skipped_in_flight: Vec<K>,
    /// Jobs gone from the list and cleaned up in this cycle.
    pub cleaned_up: Vec<K>,
    /// Jobs gone from the list whose cleanup waits for their scale in flight.
    pub cleanup_deferred: Vec<K>,
    /// Jobs of the list another replica owns (only with a [`JobOwnership`]): left alone.
    pub not_owned: Vec<K>,
}

impl<K> Default for CycleReport<K> {
    fn default() -> Self {
        Self {
            dispatched: Vec::new(),
            skipped_in_flight: Vec::new(),
            cleaned_up: Vec::new(),
            cleanup_deferred: Vec::new(),
            not_owned: Vec::new(),
        }
    }
}

/// The standalone control loop over any platform's job list and autoscaler.
///
/// Drive it with [`run`](Self::run), or cycle by cycle with [`run_cycle`](Self::run_cycle) and
/// [`wait_idle`](Self::wait_idle). Dropping it aborts the scales in flight.
pub struct StandaloneAutoscaler<K, Ctx> {
    fetcher: Arc<dyn JobListFetcher<K, Ctx>>,
    autoscaler: Arc<dyn JobAutoScaler<K, Ctx>>,
    events: Arc<dyn AutoScalerEventHandler<K, Ctx>>,
    validator: Option<OptionsValidator<Ctx>>,
    base_conf: Configuration,
    options: ControlLoopOptions,
    permits: Arc<Semaphore>,
    tasks: JoinSet<()>,
    /// The job behind every task in `tasks`, so a finished (or panicked) task can be matched.
    task_jobs: foldhash::HashMap<TaskId, Arc<Ctx>>,
    /// Keys with a scale in flight (the reference's `scalingJobKeys`).
    in_flight: foldhash::HashSet<K>,
    /// Keys of the last successful fetch (the reference's `lastScaling`).
    last_seen: foldhash::HashSet<K>,
    /// Which jobs this replica owns, when several replicas share the jobs.
    owners: Option<Owners<K>>,
}

impl<K, Ctx> Debug for StandaloneAutoscaler<K, Ctx>
where
    K: Debug,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StandaloneAutoscaler")
            .field("options", &self.options)
            .field("in_flight", &self.in_flight)
            .field("last_seen", &self.last_seen)
            .finish_non_exhaustive()
    }
}

impl<K, Ctx> StandaloneAutoscaler<K, Ctx>
where
    K: Clone + Eq + Hash + Debug + Display + Send + Sync + 'static,
    Ctx: JobAutoScalerContext<K> + 'static,
{
    /// A loop that fetches with `fetcher`, scales with `autoscaler` and reports to `events`.
    pub fn new(
        fetcher: Arc<dyn JobListFetcher<K, Ctx>>,
        autoscaler: Arc<dyn JobAutoScaler<K, Ctx>>,
        events: Arc<dyn AutoScalerEventHandler<K, Ctx>>,
        options: ControlLoopOptions,
    ) -> Self {
        Self {
            fetcher,
            autoscaler,
            events,
            validator: None,
            base_conf: Configuration::new(),
            permits: Arc::new(Semaphore::new(options.parallelism.get())),
            options,
            tasks: JoinSet::new(),
            task_jobs: foldhash::HashMap::default(),
            in_flight: foldhash::HashSet::default(),
            last_seen: foldhash::HashSet::default(),
            owners: None,
        }
    }

    /// Scales only the jobs `ownership` says this replica owns (see [`crate::JobOwnership`]).
    ///
    /// With an ownership, every cycle runs a round of it right after the fetch (so a newly
    /// listed job is taken at once), and [`run`](Self::run) also runs one every
    /// [`renew_interval`](JobOwnership::renew_interval) on a task of its own, so a slow fetch
    /// or a long cycle never delays a renewal. Then:
    /// - a job is dispatched only while its lease is valid on the local clock; a job another
    ///   replica owns is reported in [`CycleReport::not_owned`] and left alone;
    /// - the first cycle of a job under a new epoch (just acquired, or acquired again) first
    ///   calls [`JobAutoScaler::forget_cached`], so it starts from what is persisted;
    /// - a cycle in flight whose lease is lost (released, taken over, or its local deadline
    ///   passed without a renewal) is cancelled where it waits;
    /// - a job gone from the list is cleaned up only by its owner; another replica only drops
    ///   what it cached;
    /// - on shutdown no cycle starts, the leases of jobs without a cycle in flight are given up
    ///   at the next round, the cycles in flight finish (or are cancelled after the grace
    ///   period), then [`JobOwnership::leave`] gives up everything else.
    ///
    /// Every acquired and released job is logged at INFO; [`ownership_stats`](Self::ownership_stats)
    /// counts them.
    pub fn with_ownership(mut self, ownership: Arc<dyn JobOwnership<K>>) -> Self {
        let (current, _) = watch::channel(Arc::new(Ownership::default()));
        self.owners = Some(Owners {
            shared: Arc::new(SharedOwnership {
                ownership,
                current,
                stats: Arc::new(OwnershipStats::default()),
                candidates: std::sync::Mutex::new(None),
                rounds: tokio::sync::Mutex::new(()),
            }),
            dispatched_epochs: foldhash::HashMap::default(),
        });
        self
    }

    /// The ownership counters (owned jobs, live replicas, ownership changes, failed rounds);
    /// `None` without a [`with_ownership`](Self::with_ownership).
    pub fn ownership_stats(&self) -> Option<Arc<OwnershipStats>> {
        self.owners.as_ref().map(|o| Arc::clone(&o.shared.stats))
    }

    /// The latest answer of the ownership, updated after every round (for a service's job
    /// listing and readiness); `None` without a [`with_ownership`](Self::with_ownership).
    pub fn ownership_watch(&self) -> Option<watch::Receiver<Arc<Ownership<K>>>> {
        self.owners.as_ref().map(|o| o.shared.current.subscribe())
    }

    /// Sets the configuration handed to every fetch (the standalone autoscaler's own config).
    pub fn with_base_configuration(mut self, base_conf: Configuration) -> Self {
        self.base_conf = base_conf;
        self
    }

    /// Runs `validator` before every scale; its `Err` message becomes the
    /// `AutoScaler Options Validation` warning.
    pub fn with_validator(self, validator: impl Fn(&Ctx) -> Result<(), String> + Send + Sync + 'static) -> Self {
        self.with_rejecting_validator(move |ctx: &Ctx| validator(ctx).map_err(ValidationRejection::Invalid))
    }

    /// Runs `validator` before every scale, with the full choice of [`ValidationRejection`]s.
    pub fn with_rejecting_validator(
        mut self,
        validator: impl Fn(&Ctx) -> Result<(), ValidationRejection> + Send + Sync + 'static,
    ) -> Self {
        self.validator = Some(Arc::new(validator));
        self
    }

    /// Validates every job's configuration with [`crate::config::validate`] before scaling it,
    /// as the reference's standalone executor runs `AutoscalerValidator`.
    pub fn with_options_validation(self) -> Self {
        self.with_rejecting_validator(|ctx: &Ctx| {
            crate::config::validate(ctx.configuration()).map_err(|e| match e {
                ValidationError::Unreadable(_) => ValidationRejection::Unreadable(e.to_string()),
                other => ValidationRejection::Invalid(other.to_string()),
            })
        })
    }

    /// Keys whose scale is in flight right now.
    pub fn in_flight(&self) -> impl Iterator<Item = &K> {
        self.in_flight.iter()
    }

    /// Runs cycles every `interval` until `shutdown` completes, then waits for the scales in
    /// flight (running their deferred cleanups) and returns. The first cycle starts at once.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        self.run_with_abort(shutdown, std::future::pending()).await;
    }

    /// Like [`run`](Self::run), but bounded: once `shutdown` has completed, the scales in flight
    /// get until `abort` completes (a grace period, a second signal) to finish; then they are
    /// cancelled where they wait (a REST call in flight is dropped, a state flush not yet committed
    /// is rolled back by its transaction) and the loop returns. A fetch in flight when `shutdown`
    /// completes is dropped at once. `abort` is first polled after `shutdown` has completed, so a
    /// grace timer written as `async { sleep(grace).await }` starts counting then.
    pub async fn run_with_abort(mut self, shutdown: impl Future<Output = ()>, abort: impl Future<Output = ()>) {
        tracing::info!(interval = ?self.options.interval, parallelism = self.options.parallelism, "control loop started");
        // Renewals on a task of their own: a slow fetch or a busy loop never delays them.
        let keeper = self
            .owners
            .as_ref()
            .map(|owners| AbortOnDrop(tokio::spawn(keep_leases(Arc::clone(&owners.shared)))));
        tokio::pin!(shutdown);
        let next_cycle = tokio::time::sleep(Duration::ZERO);
        tokio::pin!(next_cycle);
        'cycles: loop {
            tokio::select! {
                // Shutdown wins over a due cycle, so no cycle starts once it has fired.
                biased;
                () = &mut shutdown => break,
                Some(finished) = self.tasks.join_next_with_id() => self.on_scale_finished(finished).await,
                () = &mut next_cycle => {
                    // The outcome is already logged inside; a failed fetch only skips this cycle.
                    // A slow fetch (minutes with long REST timeouts) must not delay the shutdown.
                    let interval = self.options.interval;
                    tokio::select! {
                        biased;
                        () = &mut shutdown => break 'cycles,
                        _ = self.run_cycle() => {}
                    }
                    next_cycle.as_mut().reset(instant_after(interval));
                }
            }
        }
        tracing::info!(
            in_flight = self.in_flight.len(),
            "control loop stopping after the scales in flight"
        );
        if let Some(owners) = &self.owners {
            // Only the jobs with a cycle in flight are still wanted: the next round gives the
            // others up, so their new owners need not wait for this replica's grace period.
            owners.shared.set_candidates(self.in_flight.iter().cloned().collect());
        }
        tokio::select! {
            () = self.wait_idle() => {}
            () = abort => {
                tracing::warn!(in_flight = self.in_flight.len(), "cancelling the scales still in flight");
                self.tasks.abort_all();
                while let Some(finished) = self.tasks.join_next_with_id().await {
                    if let Err(e) = &finished
                        && e.is_cancelled()
                    {
                        // Cancelled on purpose: no error event, the job is scaled on the next start.
                        if let Some(ctx) = self.task_jobs.remove(&e.id()) {
                            self.in_flight.remove(ctx.job_key());
                        }
                        continue;
                    }
                    self.on_scale_finished(finished).await;
                }
            }
        }
        drop(keeper);
        if let Some(owners) = &self.owners {
            owners.shared.leave().await;
        }
        tracing::info!("control loop stopped");
    }

    /// One cycle: fetch, clean up vanished jobs, dispatch a scale for every job not in flight.
    /// With an ownership, a round of it runs right after the fetch and only owned jobs are
    /// cleaned up and dispatched (see [`with_ownership`](Self::with_ownership)).
    /// Returns without waiting for any scale. `Err` means the fetch failed and nothing was done.
    pub async fn run_cycle(&mut self) -> Result<CycleReport<K>, FetchError> {
        // Scales that finished since the last look free their keys before the skip check.
        while let Some(finished) = self.tasks.try_join_next_with_id() {
            self.on_scale_finished(finished).await;
        }
        let jobs = match self.fetcher.fetch(&self.base_conf).await {
            Ok(jobs) => jobs,
            Err(e) => {
                // §4.1 step 1: log and skip the run; in particular, clean nothing up.
                tracing::error!(error = %e, "could not fetch the job list, skipping this cycle");
                return Err(e);
            }
        };
        let mut report = CycleReport::default();
        let current: foldhash::HashSet<K> = jobs.iter().map(|ctx| ctx.job_key().clone()).collect();

        // §4.1 step 2: jobs of the previous list missing from this one are cleaned up now, or
        // when their scale in flight finishes.
        let vanished: Vec<K> = self.last_seen.difference(&current).cloned().collect();
        self.last_seen = current;

        // Which jobs are this replica's: the listed ones, those with a cycle in flight and
        // those just gone (their cycle, or their cleanup, still needs the lease; the next
        // round gives them up).
        let ownership = match &self.owners {
            None => None,
            Some(owners) => {
                let mut candidates: Vec<K> = jobs.iter().map(|ctx| ctx.job_key().clone()).collect();
                candidates.extend(
                    self.in_flight
                        .iter()
                        .filter(|key| !self.last_seen.contains(*key))
                        .cloned(),
                );
                candidates.extend(vanished.iter().filter(|key| !self.in_flight.contains(*key)).cloned());
                owners.shared.set_candidates(candidates);
                owners.shared.round().await;
                Some(Arc::clone(&*owners.shared.current.borrow()))
            }
        };
        let now = Instant::now();
        let owns = |key: &K| ownership.as_ref().is_none_or(|o| o.valid_lease(key, now).is_some());

        for key in vanished {
            if self.in_flight.contains(&key) {
                report.cleanup_deferred.push(key);
            } else if owns(&key) {
                self.cleanup(&key).await;
                report.cleaned_up.push(key);
            } else {
                // Its owner cleans it up; this replica only drops what it may have cached.
                self.forget(&key).await;
            }
        }
        // Jobs lost since their last cycle: what this replica cached of them is stale.
        if let Some(owners) = &self.owners {
            let lost: Vec<K> = owners
                .dispatched_epochs
                .keys()
                .filter(|key| !self.in_flight.contains(*key) && !owns(key))
                .cloned()
                .collect();
            for key in lost {
                self.forget(&key).await;
            }
        }

        // §4.1 step 3: one task per job whose previous scale is done.
        for ctx in jobs {
            let key = ctx.job_key().clone();
            if self.in_flight.contains(&key) {
                tracing::debug!(job = %key, "previous scale still in flight, skipping");
                report.skipped_in_flight.push(key);
                continue;
            }
            let lease = match (&ownership, &mut self.owners) {
                (Some(ownership), Some(owners)) => match ownership.valid_lease(&key, now) {
                    None => {
                        report.not_owned.push(key);
                        continue;
                    }
                    Some(lease) => {
                        // The first cycle under a new epoch starts from what is persisted.
                        let fresh = owners.dispatched_epochs.insert(key.clone(), lease.epoch) != Some(lease.epoch);
                        Some(TaskLease {
                            current: owners.shared.current.subscribe(),
                            epoch: lease.epoch,
                            fresh,
                        })
                    }
                },
                _ => None,
            };
            self.dispatch(Arc::new(ctx), lease);
            self.in_flight.insert(key.clone());
            report.dispatched.push(key);
        }
        tracing::info!(
            dispatched = report.dispatched.len(),
            skipped = report.skipped_in_flight.len(),
            cleaned_up = report.cleaned_up.len(),
            cleanup_deferred = report.cleanup_deferred.len(),
            not_owned = report.not_owned.len(),
            "control loop cycle"
        );
        Ok(report)
    }

    /// Waits until no scale is in flight, running the cleanups deferred meanwhile.
    pub async fn wait_idle(&mut self) {
        while let Some(finished) = self.tasks.join_next_with_id().await {
            self.on_scale_finished(finished).await;
        }
    }

    fn dispatch(&mut self, ctx: Arc<Ctx>, lease: Option<TaskLease<K>>) {
        let permits = Arc::clone(&self.permits);
        let autoscaler = Arc::clone(&self.autoscaler);
        let events = Arc::clone(&self.events);
        let validator = self.validator.clone();
        let event_interval = self.options.scaling_event_interval;
        // At ERROR level so that it is enabled whatever the filter: every line of the job's scale,
        // WARN and ERROR lines included, carries the job (and its source) as plain fields.
        let span = tracing::error_span!("job", job = %ctx.job_key(), source = ctx.log_source());
        let task_ctx = Arc::clone(&ctx);
        let handle = self.tasks.spawn(
            async move {
                // The semaphore is never closed, so this only fails if the loop is torn down.
                let Ok(_permit) = permits.acquire_owned().await else {
                    return;
                };
                let ctx = &*task_ctx;
                let scale = scale_one(ctx, &*autoscaler, &*events, validator.as_deref(), event_interval);
                let Some(lease) = lease else {
                    return scale.await;
                };
                let key = ctx.job_key();
                tokio::select! {
                    // A lease lost while waiting for the permit stops the cycle before it starts.
                    biased;
                    () = lease_lost(lease.current, key, lease.epoch) => {
                        // The loop drops the job's cache when it sees the task end.
                        tracing::warn!(epoch = lease.epoch, "lost the job's lease: its cycle is cancelled");
                    }
                    () = async {
                        if lease.fresh {
                            autoscaler.forget_cached(key).await;
                        }
                        scale.await;
                    } => {}
                }
            }
            .instrument(span),
        );
        self.task_jobs.insert(handle.id(), ctx);
    }

    async fn on_scale_finished(&mut self, finished: Result<(TaskId, ()), JoinError>) {
        let (id, failure) = match finished {
            Ok((id, ())) => (id, None),
            Err(e) => (e.id(), Some(e)),
        };
        let Some(ctx) = self.task_jobs.remove(&id) else {
            return;
        };
        let key = ctx.job_key().clone();
        if let Some(e) = failure {
            // A panic inside one job's scale must not take the loop down; report it as the
            // reference reports any Throwable escaping `scale`.
            let message = panic_message(e);
            tracing::error!(job = %key, source = ctx.log_source(), "scaling panicked: {message}");
            self.events
                .handle_event(&*ctx, EventType::Warning, AUTOSCALER_ERROR_REASON, &message, None, None)
                .await;
        }
        self.in_flight.remove(&key);
        let owned = self.owns_now(&key);
        // The job vanished while it was being scaled: its deferred cleanup runs now, exactly once
        // (a job that came back meanwhile is in `last_seen` again and is kept), by its owner.
        if !self.last_seen.contains(&key) && owned {
            self.cleanup(&key).await;
        } else if !owned {
            // Lost during its cycle (the cycle was cancelled): what was cached is stale.
            self.forget(&key).await;
        }
    }

    /// Whether this replica may act on `key` now (always, without an ownership).
    fn owns_now(&self, key: &K) -> bool {
        self.owners.as_ref().is_none_or(|owners| {
            owners
                .shared
                .current
                .borrow()
                .valid_lease(key, Instant::now())
                .is_some()
        })
    }

    async fn cleanup(&mut self, key: &K) {
        tracing::info!(job = %key, "job is gone, cleaning up");
        self.autoscaler.cleanup(key).await;
        if let Some(owners) = &mut self.owners {
            owners.dispatched_epochs.remove(key);
        }
    }

    /// Drops what this replica caches of a job it does not own (any more).
    async fn forget(&mut self, key: &K) {
        self.autoscaler.forget_cached(key).await;
        if let Some(owners) = &mut self.owners {
            owners.dispatched_epochs.remove(key);
        }
    }
}

/// The ownership side of the loop.
struct Owners<K> {
    shared: Arc<SharedOwnership<K>>,
    /// The epoch each owned job last had a cycle under: a new one drops the autoscaler's cache.
    dispatched_epochs: foldhash::HashMap<K, u64>,
}

/// What the loop, its lease keeper task and its scale tasks share.
struct SharedOwnership<K> {
    ownership: Arc<dyn JobOwnership<K>>,
    /// The latest answer (pruned of leases whose local deadline passed).
    current: watch::Sender<Arc<Ownership<K>>>,
    stats: Arc<OwnershipStats>,
    /// The jobs to own; `None` until the first fetch (a round before it would give up everything).
    candidates: std::sync::Mutex<Option<Arc<Vec<K>>>>,
    /// Rounds run one at a time, each with the candidates current when it starts.
    rounds: tokio::sync::Mutex<()>,
}

impl<K> SharedOwnership<K>
where
    K: Clone + Eq + Hash + Debug + Send + Sync + 'static,
{
    fn set_candidates(&self, candidates: Vec<K>) {
        *self
            .candidates
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Arc::new(candidates));
    }

    /// One round of the ownership, bounded by the renew interval; the answer is published, a
    /// failure is logged and counted (the leases then lapse at their local deadlines).
    async fn round(&self) {
        let _one_at_a_time = self.rounds.lock().await;
        let candidates = self
            .candidates
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let Some(candidates) = candidates else {
            return;
        };
        let bound = self.ownership.renew_interval();
        match tokio::time::timeout(bound, self.ownership.acquire_and_renew(&candidates)).await {
            Ok(Ok(ownership)) => {
                self.stats.set_round_ok(true);
                self.publish(ownership);
            }
            Ok(Err(error)) => self.round_failed(&error.to_string()),
            Err(_) => self.round_failed(&format!("no answer within the renew interval ({bound:?})")),
        }
    }

    fn round_failed(&self, error: &str) {
        tracing::error!(
            replica = self.ownership.replica_id(),
            error,
            "could not renew the job leases: each job stops at its lease's local deadline unless a later round succeeds"
        );
        self.stats.add_failed_round();
        self.stats.set_round_ok(false);
        self.prune_lapsed();
    }

    /// Makes `new` the current answer; logs and counts every job acquired or released.
    fn publish(&self, new: Ownership<K>) {
        let replica = self.ownership.replica_id();
        let mut changes = 0;
        self.current.send_modify(|current| {
            for (key, lease) in &new.leases {
                if current.leases.get(key).map(|l| l.epoch) != Some(lease.epoch) {
                    tracing::info!(job = ?key, epoch = lease.epoch, replica, "acquired job");
                    changes += 1;
                }
            }
            for key in current.leases.keys() {
                if !new.leases.contains_key(key) {
                    tracing::info!(job = ?key, replica, "released job");
                    changes += 1;
                }
            }
            self.stats.set_owned(new.leases.len(), new.live_replicas.len());
            *current = Arc::new(new);
        });
        self.stats.add_changes(changes);
    }

    /// Drops the leases whose local deadline has passed (self-fencing without the coordinator).
    fn prune_lapsed(&self) {
        let now = Instant::now();
        let current = Arc::clone(&*self.current.borrow());
        if current.leases.values().all(|lease| lease.is_valid_at(now)) {
            return;
        }
        let mut kept = Ownership::clone(&current);
        kept.leases.retain(|key, lease| {
            let valid = lease.is_valid_at(now);
            if !valid {
                tracing::warn!(job = ?key, epoch = lease.epoch, "lease not renewed in time: stopping work on the job");
            }
            valid
        });
        self.publish(kept);
    }

    /// Gives up every lease and the membership (shutdown), bounded by the renew interval.
    async fn leave(&self) {
        let _one_at_a_time = self.rounds.lock().await;
        *self
            .candidates
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Arc::new(Vec::new()));
        let bound = self.ownership.renew_interval();
        match tokio::time::timeout(bound, self.ownership.leave()).await {
            Ok(Ok(())) => tracing::info!(replica = self.ownership.replica_id(), "gave up every job lease"),
            Ok(Err(error)) => {
                tracing::warn!(%error, "could not give the job leases up: they lapse after the lease duration");
            }
            Err(_) => tracing::warn!("giving the job leases up timed out: they lapse after the lease duration"),
        }
        self.publish(Ownership::default());
    }
}

/// Runs a round every renew interval, and drops each lease at its local deadline if no round
/// renewed it by then.
async fn keep_leases<K>(shared: Arc<SharedOwnership<K>>)
where
    K: Clone + Eq + Hash + Debug + Send + Sync + 'static,
{
    let interval = shared.ownership.renew_interval();
    let mut next_round = instant_after(interval);
    loop {
        let deadline = shared.current.borrow().earliest_deadline();
        tokio::select! {
            () = tokio::time::sleep_until(next_round) => {
                shared.round().await;
                next_round = instant_after(interval);
            }
            () = sleep_until_some(deadline) => shared.prune_lapsed(),
        }
    }
}

async fn sleep_until_some(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// What a scale task needs to stop when its job's lease is lost.
struct TaskLease<K> {
    current: watch::Receiver<Arc<Ownership<K>>>,
    epoch: u64,
    /// The job's first cycle under this epoch: drop the autoscaler's cache first.
    fresh: bool,
}

/// Completes once `key` is no longer held with `epoch`: given up, taken over, or past its
/// local deadline.
async fn lease_lost<K: Eq + Hash>(mut current: watch::Receiver<Arc<Ownership<K>>>, key: &K, epoch: u64) {
    loop {
        let deadline = match current.borrow_and_update().valid_lease(key, Instant::now()) {
            Some(lease) if lease.epoch == epoch => lease.valid_until,
            _ => return,
        };
        tokio::select! {
            changed = current.changed() => {
                if changed.is_err() {
                    return; // the loop is gone
                }
            }
            () = tokio::time::sleep_until(deadline) => {}
        }
    }
}

/// Aborts the task when dropped (the lease keeper must not outlive its loop).
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Validates, then scales one job. Errors of `scale` were already reported as events by the
/// autoscaler (see [`crate::AutoscalerError`]), so they are only logged here.
async fn scale_one<K, Ctx>(
    ctx: &Ctx,
    autoscaler: &dyn JobAutoScaler<K, Ctx>,
    events: &dyn AutoScalerEventHandler<K, Ctx>,
    validator: Option<&ValidatorFn<Ctx>>,
    event_interval: Duration,
) where
    Ctx: JobAutoScalerContext<K>,
{
    match validator.map(|validate| validate(ctx)) {
        Some(Err(ValidationRejection::Invalid(message))) => {
            tracing::warn!("autoscaler options do not validate, not scaling: {message}");
            events
                .handle_event(
                    ctx,
                    EventType::Warning,
                    VALIDATION_REASON,
                    &message,
                    None,
                    Some(event_interval),
                )
                .await;
            return;
        }
        Some(Err(ValidationRejection::Unreadable(message))) => {
            tracing::error!("autoscaler options cannot be read, not scaling: {message}");
            events
                .handle_event(ctx, EventType::Warning, AUTOSCALER_ERROR_REASON, &message, None, None)
                .await;
            return;
        }
        Some(Ok(())) | None => {}
    }
    if let Err(e) = autoscaler.scale(ctx).await {
        // Already logged once, by the event handler that reported it.
        tracing::debug!(error = %e, "scaling failed");
    }
}

/// `now + delay`, or 30 years from now (tokio's own "far future") when the sum overflows: an
/// interval of `9223372036854775807 s` means "never again", not a panic.
fn instant_after(delay: Duration) -> tokio::time::Instant {
    let now = tokio::time::Instant::now();
    now.checked_add(delay)
        .unwrap_or_else(|| now + Duration::from_secs(30 * 365 * 86_400))
}

fn panic_message(e: JoinError) -> String {
    if e.is_cancelled() {
        return "scaling task was cancelled".to_owned();
    }
    let payload = e.into_panic();
    let text = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic payload".to_owned());
    format!("scaling panicked: {text}")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests fail loudly on a poisoned lock or a bad fixture
mod tests {
    use super::*;
    use crate::autoscaler::AutoscalerError;
    use crate::context::BasicJobContext;
    use crate::ownership::{JobLease, OwnershipError};
    use async_trait::async_trait;
    use std::collections::BTreeMap;
    use std::collections::{HashMap, HashSet};
    use std::sync::Mutex;
    use tokio::time::Instant;

    type Ctx = BasicJobContext<String>;

    fn ctx(key: &str) -> Ctx {
        BasicJobContext::new(key.to_owned(), Configuration::new(), ())
    }

    /// Returns the current job list, or the next scripted failure if one is queued for that fetch.
    #[derive(Default)]
    struct ScriptedFetcher {
        jobs: Mutex<Vec<String>>,
        /// Fetch numbers (1-based) that fail.
        failing_fetches: Mutex<HashSet<usize>>,
        fetches: Mutex<usize>,
    }

    impl ScriptedFetcher {
        fn with_jobs(jobs: &[&str]) -> Arc<Self> {
            let f = Self::default();
            f.set_jobs(jobs);
            Arc::new(f)
        }
        fn set_jobs(&self, jobs: &[&str]) {
            *self.jobs.lock().unwrap() = jobs.iter().map(|s| (*s).to_owned()).collect();
        }
        fn fetches(&self) -> usize {
            *self.fetches.lock().unwrap()
        }
    }

    #[async_trait]
    impl JobListFetcher<String, Ctx> for ScriptedFetcher {
        async fn fetch(&self, _base: &Configuration) -> Result<Vec<Ctx>, FetchError> {
            let n = {
                let mut fetches = self.fetches.lock().unwrap();
                *fetches += 1;
                *fetches
            };
            if self.failing_fetches.lock().unwrap().contains(&n) {
                return Err(FetchError::Failed(format!("fetch {n} refused")));
            }
            Ok(self.jobs.lock().unwrap().iter().map(|k| ctx(k)).collect())
        }
    }

    /// What happened to the jobs, with (paused-clock) times relative to the test's start.
    #[derive(Debug, Default)]
    struct Record {
        scale_starts: BTreeMap<String, Vec<Duration>>,
        scale_ends: BTreeMap<String, Vec<Duration>>,
        cleanups: BTreeMap<String, Vec<Duration>>,
        forgets: BTreeMap<String, Vec<Duration>>,
        running: BTreeMap<String, usize>,
        max_running_per_job: usize,
        running_total: usize,
        max_running_total: usize,
    }

    /// Scales by sleeping `durations[key]` (default 10 ms); can fail or panic for chosen keys.
    struct RecordingScaler {
        start: Instant,
        durations: HashMap<String, Duration>,
        failing: HashSet<String>,
        panicking: HashSet<String>,
        record: Mutex<Record>,
    }

    impl RecordingScaler {
        fn new(durations: &[(&str, Duration)]) -> Self {
            Self {
                start: Instant::now(),
                durations: durations.iter().map(|(k, d)| ((*k).to_owned(), *d)).collect(),
                failing: HashSet::new(),
                panicking: HashSet::new(),
                record: Mutex::new(Record::default()),
            }
        }
        fn scales(&self, key: &str) -> usize {
            self.record.lock().unwrap().scale_ends.get(key).map_or(0, Vec::len)
        }
        fn cleanups(&self, key: &str) -> Vec<Duration> {
            self.record
                .lock()
                .unwrap()
                .cleanups
                .get(key)
                .cloned()
                .unwrap_or_default()
        }
    }

    #[async_trait]
    impl JobAutoScaler<String, Ctx> for RecordingScaler {
        async fn scale(&self, ctx: &Ctx) -> Result<(), AutoscalerError> {
            let key = ctx.job_key.clone();
            {
                let mut r = self.record.lock().unwrap();
                r.scale_starts
                    .entry(key.clone())
                    .or_default()
                    .push(self.start.elapsed());
                let running = r.running.entry(key.clone()).or_default();
                *running += 1;
                let running = *running;
                r.max_running_per_job = r.max_running_per_job.max(running);
                r.running_total += 1;
                r.max_running_total = r.max_running_total.max(r.running_total);
            }
            let duration = self.durations.get(&key).copied().unwrap_or(Duration::from_millis(10));
            tokio::time::sleep(duration).await;
            {
                let mut r = self.record.lock().unwrap();
                *r.running.entry(key.clone()).or_default() -= 1;
                r.running_total -= 1;
                r.scale_ends.entry(key.clone()).or_default().push(self.start.elapsed());
            }
            if self.panicking.contains(&key) {
                panic!("scaler bug for {key}");
            }
            if self.failing.contains(&key) {
                return Err(AutoscalerError::Cycle {
                    step: crate::CycleStep::Collect,
                    message: format!("{key} unreachable"),
                    source: None,
                });
            }
            Ok(())
        }

        async fn cleanup(&self, key: &String) {
            let mut r = self.record.lock().unwrap();
            r.cleanups.entry(key.clone()).or_default().push(self.start.elapsed());
        }

        async fn forget_cached(&self, key: &String) {
            let mut r = self.record.lock().unwrap();
            r.forgets.entry(key.clone()).or_default().push(self.start.elapsed());
        }
    }

    impl RecordingScaler {
        fn forgets(&self, key: &str) -> Vec<Duration> {
            self.record
                .lock()
                .unwrap()
                .forgets
                .get(key)
                .cloned()
                .unwrap_or_default()
        }
    }

    /// (job, type, reason, message, dedup interval)
    type SeenEvent = (String, EventType, String, String, Option<Duration>);

    #[derive(Default)]
    struct CollectingEvents {
        events: Mutex<Vec<SeenEvent>>,
    }

    impl CollectingEvents {
        fn events(&self) -> Vec<SeenEvent> {
            self.events.lock().unwrap().clone()
        }
    }

    #[async_trait]
    impl AutoScalerEventHandler<String, Ctx> for CollectingEvents {
        async fn handle_event(
            &self,
            ctx: &Ctx,
            event_type: EventType,
            reason: &str,
            message: &str,
            _message_key: Option<&str>,
            interval: Option<Duration>,
        ) {
            self.events.lock().unwrap().push((
                ctx.job_key.clone(),
                event_type,
                reason.to_owned(),
                message.to_owned(),
                interval,
            ));
        }
    }

    fn options(interval_ms: u64, parallelism: usize) -> ControlLoopOptions {
        ControlLoopOptions {
            interval: Duration::from_millis(interval_ms),
            parallelism: NonZeroUsize::new(parallelism).unwrap(),
            scaling_event_interval: Duration::from_secs(1800),
        }
    }

    fn control_loop(
        fetcher: &Arc<ScriptedFetcher>,
        scaler: &Arc<RecordingScaler>,
        events: &Arc<CollectingEvents>,
        options: ControlLoopOptions,
    ) -> StandaloneAutoscaler<String, Ctx> {
        StandaloneAutoscaler::new(
            Arc::clone(fetcher) as Arc<dyn JobListFetcher<String, Ctx>>,
            Arc::clone(scaler) as Arc<dyn JobAutoScaler<String, Ctx>>,
            Arc::clone(events) as Arc<dyn AutoScalerEventHandler<String, Ctx>>,
            options,
        )
    }

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[tokio::test(start_paused = true)]
    async fn slow_job_does_not_block_the_others() {
        // Interval 1 s, 2 permits. "slow" takes 10 s, holding one permit; "b" and "c" (10 ms)
        // share the other. Cycles start at 0, 1, ..., 5 s; shutdown at 5.5 s.
        let fetcher = ScriptedFetcher::with_jobs(&["slow", "b", "c"]);
        let scaler = Arc::new(RecordingScaler::new(&[("slow", secs(10.0))]));
        let events = Arc::new(CollectingEvents::default());
        let start = Instant::now();
        control_loop(&fetcher, &scaler, &events, options(1000, 2))
            .run(tokio::time::sleep(secs(5.5)))
            .await;

        assert_eq!(fetcher.fetches(), 6);
        assert_eq!(scaler.scales("b"), 6, "a fast job is scaled in every cycle");
        assert_eq!(scaler.scales("c"), 6);
        assert_eq!(scaler.scales("slow"), 1, "skipped while in flight");
        // The run waited for the slow scale dispatched at 0 s before returning.
        assert_eq!(start.elapsed(), secs(10.0));
        assert!(scaler.record.lock().unwrap().max_running_total <= 2);
        assert!(events.events().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_job_is_never_scaled_twice_at_the_same_time() {
        // One job taking 2.5 s, interval 1 s: scales start at 0, 3, 6, 9 s (cycles at 1, 2, 4, 5,
        // 7, 8 s find it in flight); shutdown at 10 s lets the one started at 9 s finish at 11.5 s.
        let fetcher = ScriptedFetcher::with_jobs(&["job"]);
        let scaler = Arc::new(RecordingScaler::new(&[("job", secs(2.5))]));
        let events = Arc::new(CollectingEvents::default());
        control_loop(&fetcher, &scaler, &events, options(1000, 4))
            .run(tokio::time::sleep(secs(10.0)))
            .await;

        let r = scaler.record.lock().unwrap();
        assert_eq!(r.max_running_per_job, 1);
        assert_eq!(r.scale_starts["job"], vec![secs(0.0), secs(3.0), secs(6.0), secs(9.0)]);
        assert_eq!(r.scale_ends["job"], vec![secs(2.5), secs(5.5), secs(8.5), secs(11.5)]);
    }

    #[tokio::test(start_paused = true)]
    async fn at_most_parallelism_jobs_are_scaled_at_once() {
        // 5 jobs of 1 s each on 2 permits: 2 + 2 + 1, all done after 3 s.
        let fetcher = ScriptedFetcher::with_jobs(&["a", "b", "c", "d", "e"]);
        let one_second: Vec<(&str, Duration)> = ["a", "b", "c", "d", "e"].map(|k| (k, secs(1.0))).to_vec();
        let scaler = Arc::new(RecordingScaler::new(&one_second));
        let events = Arc::new(CollectingEvents::default());
        let mut control_loop = control_loop(&fetcher, &scaler, &events, options(60_000, 2));
        let start = Instant::now();
        let report = control_loop.run_cycle().await.unwrap();
        assert_eq!(report.dispatched.len(), 5);
        control_loop.wait_idle().await;
        assert_eq!(start.elapsed(), secs(3.0));
        assert_eq!(scaler.record.lock().unwrap().max_running_total, 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_vanished_job_is_cleaned_up_exactly_once() {
        let fetcher = ScriptedFetcher::with_jobs(&[]);
        let scaler = Arc::new(RecordingScaler::new(&[]));
        let events = Arc::new(CollectingEvents::default());
        let mut control_loop = control_loop(&fetcher, &scaler, &events, options(1000, 4));

        let report = control_loop.run_cycle().await.unwrap();
        assert_eq!(report, CycleReport::default());

        fetcher.set_jobs(&["j1", "j2"]);
        for round in 1..=2 {
            let report = control_loop.run_cycle().await.unwrap();
            assert_eq!(report.dispatched, vec!["j1".to_owned(), "j2".to_owned()]);
            control_loop.wait_idle().await;
            assert_eq!((scaler.scales("j1"), scaler.scales("j2")), (round, round));
        }

        fetcher.set_jobs(&["j2"]);
        let report = control_loop.run_cycle().await.unwrap();
        assert_eq!(report.cleaned_up, vec!["j1".to_owned()]);
        control_loop.wait_idle().await;
        let report = control_loop.run_cycle().await.unwrap();
        assert!(report.cleaned_up.is_empty());
        control_loop.wait_idle().await;

        assert_eq!((scaler.scales("j1"), scaler.scales("j2")), (2, 4));
        assert_eq!(scaler.cleanups("j1").len(), 1);
        assert!(scaler.cleanups("j2").is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn cleanup_of_a_vanished_job_waits_for_its_scale_in_flight() {
        let fetcher = ScriptedFetcher::with_jobs(&["j1", "j2"]);
        let scaler = Arc::new(RecordingScaler::new(&[("j1", secs(10.0))]));
        let events = Arc::new(CollectingEvents::default());
        let mut control_loop = control_loop(&fetcher, &scaler, &events, options(1000, 4));

        control_loop.run_cycle().await.unwrap();
        tokio::time::sleep(secs(1.0)).await;
        let report = control_loop.run_cycle().await.unwrap();
        assert_eq!(report.skipped_in_flight, vec!["j1".to_owned()]);

        // j1 disappears at 1 s while its scale runs until 10 s.
        fetcher.set_jobs(&["j2"]);
        tokio::time::sleep(secs(1.0)).await;
        let report = control_loop.run_cycle().await.unwrap();
        assert_eq!(report.cleanup_deferred, vec!["j1".to_owned()]);
        assert!(report.cleaned_up.is_empty());
        tokio::time::sleep(secs(1.0)).await;
        let report = control_loop.run_cycle().await.unwrap();
        assert!(report.cleanup_deferred.is_empty(), "only reported once");
        assert!(scaler.cleanups("j1").is_empty());

        control_loop.wait_idle().await;
        assert_eq!(scaler.cleanups("j1"), vec![secs(10.0)], "right after the scale ended");
        assert_eq!(scaler.scales("j1"), 1);
        assert!(scaler.cleanups("j2").is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_job_back_in_the_list_before_its_scale_ends_is_not_cleaned_up() {
        let fetcher = ScriptedFetcher::with_jobs(&["j1"]);
        let scaler = Arc::new(RecordingScaler::new(&[("j1", secs(5.0))]));
        let events = Arc::new(CollectingEvents::default());
        let mut control_loop = control_loop(&fetcher, &scaler, &events, options(1000, 4));

        control_loop.run_cycle().await.unwrap();
        fetcher.set_jobs(&[]);
        let report = control_loop.run_cycle().await.unwrap();
        assert_eq!(report.cleanup_deferred, vec!["j1".to_owned()]);
        fetcher.set_jobs(&["j1"]);
        let report = control_loop.run_cycle().await.unwrap();
        assert_eq!(report.skipped_in_flight, vec!["j1".to_owned()]);

        control_loop.wait_idle().await;
        assert!(scaler.cleanups("j1").is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_fetch_skips_one_cycle_and_the_loop_goes_on() {
        // Cycles at 0..=4 s; fetches 2 and 3 fail. A failed fetch must not clean anything up.
        let fetcher = ScriptedFetcher::with_jobs(&["job"]);
        fetcher.failing_fetches.lock().unwrap().extend([2, 3]);
        let scaler = Arc::new(RecordingScaler::new(&[]));
        let events = Arc::new(CollectingEvents::default());
        control_loop(&fetcher, &scaler, &events, options(1000, 4))
            .run(tokio::time::sleep(secs(4.5)))
            .await;

        assert_eq!(fetcher.fetches(), 5);
        let r = scaler.record.lock().unwrap();
        assert_eq!(r.scale_starts["job"], vec![secs(0.0), secs(3.0), secs(4.0)]);
        assert!(r.cleanups.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_stops_the_loop_after_the_scales_in_flight() {
        // Shutdown at 0.5 s: no second cycle, but the scale started at 0 s runs to its end at 3 s.
        let fetcher = ScriptedFetcher::with_jobs(&["job"]);
        let scaler = Arc::new(RecordingScaler::new(&[("job", secs(3.0))]));
        let events = Arc::new(CollectingEvents::default());
        let start = Instant::now();
        control_loop(&fetcher, &scaler, &events, options(1000, 4))
            .run(tokio::time::sleep(secs(0.5)))
            .await;

        assert_eq!(start.elapsed(), secs(3.0));
        assert_eq!(fetcher.fetches(), 1);
        assert_eq!(scaler.record.lock().unwrap().scale_ends["job"], vec![secs(3.0)]);
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_runs_a_cleanup_deferred_behind_a_scale_in_flight() {
        let fetcher = ScriptedFetcher::with_jobs(&["job"]);
        let scaler = Arc::new(RecordingScaler::new(&[("job", secs(3.0))]));
        let events = Arc::new(CollectingEvents::default());
        let shutdown = {
            let fetcher = Arc::clone(&fetcher);
            async move {
                // The job vanishes before the 1 s cycle; shutdown comes at 1.5 s.
                tokio::time::sleep(secs(0.5)).await;
                fetcher.set_jobs(&[]);
                tokio::time::sleep(secs(1.0)).await;
            }
        };
        control_loop(&fetcher, &scaler, &events, options(1000, 4))
            .run(shutdown)
            .await;
        assert_eq!(fetcher.fetches(), 2);
        assert_eq!(scaler.cleanups("job"), vec![secs(3.0)]);
    }

    #[tokio::test(start_paused = true)]
    async fn failing_and_panicking_jobs_do_not_affect_the_others() {
        let fetcher = ScriptedFetcher::with_jobs(&["fails", "panics", "fine"]);
        let mut scaler = RecordingScaler::new(&[]);
        scaler.failing.insert("fails".to_owned());
        scaler.panicking.insert("panics".to_owned());
        let scaler = Arc::new(scaler);
        let events = Arc::new(CollectingEvents::default());
        control_loop(&fetcher, &scaler, &events, options(1000, 1))
            .run(tokio::time::sleep(secs(2.5)))
            .await;

        // Cycles at 0, 1, 2 s: every job is tried in every cycle.
        for key in ["fails", "panics", "fine"] {
            assert_eq!(scaler.scales(key), 3, "{key}");
        }
        // A returned error was reported by the autoscaler itself; a panic is reported here.
        let events = events.events();
        assert_eq!(events.len(), 3);
        for (key, event_type, reason, message, interval) in events {
            assert_eq!(
                (key.as_str(), event_type, reason.as_str(), interval),
                ("panics", EventType::Warning, AUTOSCALER_ERROR_REASON, None)
            );
            assert!(message.contains("scaler bug for panics"), "{message}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_job_failing_validation_gets_one_warning_and_is_not_scaled() {
        let fetcher = ScriptedFetcher::with_jobs(&["bad", "good"]);
        let scaler = Arc::new(RecordingScaler::new(&[]));
        let events = Arc::new(CollectingEvents::default());
        let mut control_loop =
            control_loop(&fetcher, &scaler, &events, options(1000, 4)).with_validator(|ctx: &Ctx| {
                if ctx.job_key == "bad" {
                    Err("job.autoscaler.utilization.target must be in (0, 1]".to_owned())
                } else {
                    Ok(())
                }
            });
        let report = control_loop.run_cycle().await.unwrap();
        control_loop.wait_idle().await;

        assert_eq!(report.dispatched.len(), 2);
        assert_eq!((scaler.scales("bad"), scaler.scales("good")), (0, 1));
        assert_eq!(
            events.events(),
            vec![(
                "bad".to_owned(),
                EventType::Warning,
                VALIDATION_REASON.to_owned(),
                "job.autoscaler.utilization.target must be in (0, 1]".to_owned(),
                Some(Duration::from_secs(1800)),
            )]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_scale_queued_for_a_permit_counts_as_in_flight() {
        // One permit held 5 s by "a"; "b" waits for it, so the 1 s cycle skips both.
        let fetcher = ScriptedFetcher::with_jobs(&["a", "b"]);
        let scaler = Arc::new(RecordingScaler::new(&[("a", secs(5.0))]));
        let events = Arc::new(CollectingEvents::default());
        let mut control_loop = control_loop(&fetcher, &scaler, &events, options(1000, 1));
        control_loop.run_cycle().await.unwrap();
        tokio::time::sleep(secs(1.0)).await;
        let report = control_loop.run_cycle().await.unwrap();
        assert_eq!(report.skipped_in_flight, vec!["a".to_owned(), "b".to_owned()]);
        control_loop.wait_idle().await;
        assert_eq!(scaler.record.lock().unwrap().scale_starts["b"], vec![secs(5.0)]);
    }

    #[test]
    fn options_default_to_the_reference_values() {
        let options = ControlLoopOptions::from_configuration(&Configuration::new()).unwrap();
        assert_eq!(options.interval, secs(10.0));
        assert_eq!(options.parallelism.get(), 100);
        assert_eq!(options.scaling_event_interval, secs(1800.0));
    }

    #[test]
    fn options_read_the_standalone_keys() {
        let conf = Configuration::from_iter([
            ("autoscaler.standalone.control-loop.interval", "1 min"),
            ("autoscaler.standalone.control-loop.parallelism", "3"),
            ("job.autoscaler.scaling.event.interval", "500"),
        ]);
        let options = ControlLoopOptions::from_configuration(&conf).unwrap();
        assert_eq!(options.interval, secs(60.0));
        assert_eq!(options.parallelism.get(), 3);
        assert_eq!(options.scaling_event_interval, Duration::from_millis(500));

        // The deprecated key counts, the new one wins.
        let old = Configuration::from_iter([("scalingInterval", "20s")]);
        assert_eq!(
            ControlLoopOptions::from_configuration(&old).unwrap().interval,
            secs(20.0)
        );
        let both = Configuration::from_iter([("scalingInterval", "20s"), (CONTROL_LOOP_INTERVAL_KEY, "2s")]);
        assert_eq!(
            ControlLoopOptions::from_configuration(&both).unwrap().interval,
            secs(2.0)
        );
    }

    #[test]
    fn bad_option_values_name_the_key_and_value() {
        let zero = Configuration::from_iter([(CONTROL_LOOP_PARALLELISM_KEY, "0")]);
        let err = ControlLoopOptions::from_configuration(&zero).unwrap_err();
        assert!(
            err.to_string()
                .contains("\"0\" for autoscaler.standalone.control-loop.parallelism"),
            "{err}"
        );
        let fortnight = Configuration::from_iter([(CONTROL_LOOP_INTERVAL_KEY, "2 fortnights")]);
        let err = ControlLoopOptions::from_configuration(&fortnight).unwrap_err();
        assert!(err.to_string().contains("2 fortnights"), "{err}");
    }

    #[tokio::test(start_paused = true)]
    async fn options_validation_reports_invalid_and_unreadable_options_differently() {
        let scaler = Arc::new(RecordingScaler::new(&[]));
        let events = Arc::new(CollectingEvents::default());
        let jobs: Vec<Ctx> = vec![
            BasicJobContext::new(
                "invalid".to_owned(),
                Configuration::from_iter([
                    ("job.autoscaler.enabled", "true"),
                    ("job.autoscaler.utilization.target", "0.7"),
                    ("job.autoscaler.utilization.max", "0.5"),
                ]),
                (),
            ),
            BasicJobContext::new(
                "unreadable".to_owned(),
                Configuration::from_iter([("job.autoscaler.enabled", "maybe")]),
                (),
            ),
            BasicJobContext::new(
                "valid".to_owned(),
                Configuration::from_iter([("job.autoscaler.enabled", "true")]),
                (),
            ),
        ];
        struct Fixed(Vec<Ctx>);
        #[async_trait]
        impl JobListFetcher<String, Ctx> for Fixed {
            async fn fetch(&self, _base: &Configuration) -> Result<Vec<Ctx>, FetchError> {
                Ok(self.0.clone())
            }
        }
        let mut control_loop = StandaloneAutoscaler::new(
            Arc::new(Fixed(jobs)) as Arc<dyn JobListFetcher<String, Ctx>>,
            Arc::clone(&scaler) as Arc<dyn JobAutoScaler<String, Ctx>>,
            Arc::clone(&events) as Arc<dyn AutoScalerEventHandler<String, Ctx>>,
            options(1000, 4),
        )
        .with_options_validation();
        control_loop.run_cycle().await.unwrap();
        control_loop.wait_idle().await;

        assert_eq!(
            (
                scaler.scales("invalid"),
                scaler.scales("unreadable"),
                scaler.scales("valid")
            ),
            (0, 0, 1)
        );
        let mut events = events.events();
        events.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(events.len(), 2, "{events:?}");
        assert_eq!(
            (events[0].0.as_str(), events[0].2.as_str(), events[0].4),
            ("invalid", VALIDATION_REASON, Some(Duration::from_secs(1800)))
        );
        assert_eq!(
            events[0].3,
            "The AutoScalerOption job.autoscaler.utilization.max is invalid, it should be a value within the range [0.7, 1.0]"
        );
        assert_eq!(
            (events[1].0.as_str(), events[1].2.as_str(), events[1].4),
            ("unreadable", AUTOSCALER_ERROR_REASON, None)
        );
        assert!(events[1].3.contains("maybe"), "{}", events[1].3);
    }

    // ---- several replicas: the loop with a JobOwnership ----

    /// A coordinator in a test: grants the jobs in `granted` (at their epochs) to whoever asks,
    /// each valid for `validity` from the start of the round; can be "down".
    struct ScriptedOwnership {
        granted: Mutex<HashMap<String, u64>>,
        validity: Duration,
        renew_interval: Duration,
        down: std::sync::atomic::AtomicBool,
        rounds: Mutex<Vec<(Duration, Vec<String>)>>,
        left_at: Mutex<Vec<Duration>>,
        start: Instant,
    }

    impl ScriptedOwnership {
        fn new(granted: &[(&str, u64)], validity: Duration, renew_interval: Duration) -> Arc<Self> {
            Arc::new(Self {
                granted: Mutex::new(granted.iter().map(|(k, e)| ((*k).to_owned(), *e)).collect()),
                validity,
                renew_interval,
                down: Default::default(),
                rounds: Mutex::default(),
                left_at: Mutex::default(),
                start: Instant::now(),
            })
        }
        fn grant(&self, granted: &[(&str, u64)]) {
            *self.granted.lock().unwrap() = granted.iter().map(|(k, e)| ((*k).to_owned(), *e)).collect();
        }
        fn set_down(&self, down: bool) {
            self.down.store(down, std::sync::atomic::Ordering::SeqCst);
        }
        fn round_times(&self) -> Vec<Duration> {
            self.rounds.lock().unwrap().iter().map(|(t, _)| *t).collect()
        }
    }

    #[async_trait]
    impl JobOwnership<String> for ScriptedOwnership {
        fn replica_id(&self) -> &str {
            "test-replica"
        }
        fn renew_interval(&self) -> Duration {
            self.renew_interval
        }
        async fn acquire_and_renew(&self, candidates: &[String]) -> Result<Ownership<String>, OwnershipError> {
            let started = Instant::now();
            let mut sorted = candidates.to_vec();
            sorted.sort();
            self.rounds.lock().unwrap().push((self.start.elapsed(), sorted));
            if self.down.load(std::sync::atomic::Ordering::SeqCst) {
                return Err(OwnershipError::Backend {
                    operation: "renew",
                    message: "database down".into(),
                });
            }
            let granted = self.granted.lock().unwrap();
            Ok(Ownership {
                leases: candidates
                    .iter()
                    .filter_map(|k| {
                        granted.get(k).map(|epoch| {
                            (
                                k.clone(),
                                JobLease {
                                    epoch: *epoch,
                                    valid_until: started + self.validity,
                                },
                            )
                        })
                    })
                    .collect(),
                live_replicas: vec!["test-replica".into(), "other".into()],
            })
        }
        async fn release(&self, _jobs: &[String]) -> Result<(), OwnershipError> {
            Ok(())
        }
        async fn leave(&self) -> Result<(), OwnershipError> {
            self.left_at.lock().unwrap().push(self.start.elapsed());
            Ok(())
        }
    }

    fn owned_loop(
        fetcher: &Arc<ScriptedFetcher>,
        scaler: &Arc<RecordingScaler>,
        ownership: &Arc<ScriptedOwnership>,
        interval_ms: u64,
    ) -> StandaloneAutoscaler<String, Ctx> {
        let events = Arc::new(CollectingEvents::default());
        control_loop(fetcher, scaler, &events, options(interval_ms, 4))
            .with_ownership(Arc::clone(ownership) as Arc<dyn JobOwnership<String>>)
    }

    #[tokio::test(start_paused = true)]
    async fn only_owned_jobs_get_a_cycle_and_a_new_epoch_starts_from_the_store() {
        let fetcher = ScriptedFetcher::with_jobs(&["a", "b", "c"]);
        let scaler = Arc::new(RecordingScaler::new(&[]));
        let ownership = ScriptedOwnership::new(&[("a", 1), ("c", 4)], secs(10.0), secs(3.0));
        let mut control_loop = owned_loop(&fetcher, &scaler, &ownership, 1000);

        let report = control_loop.run_cycle().await.unwrap();
        assert_eq!(report.dispatched, vec!["a".to_owned(), "c".to_owned()]);
        assert_eq!(report.not_owned, vec!["b".to_owned()]);
        control_loop.wait_idle().await;
        assert_eq!((scaler.scales("a"), scaler.scales("b"), scaler.scales("c")), (1, 0, 1));
        // Newly acquired: the cache was dropped before the first cycle.
        assert_eq!((scaler.forgets("a").len(), scaler.forgets("c").len()), (1, 1));

        // Same epochs: no more drops. Then "a" is taken over and taken back (epoch 3), "c" is
        // lost, "b" acquired.
        control_loop.run_cycle().await.unwrap();
        control_loop.wait_idle().await;
        assert_eq!(scaler.forgets("a").len(), 1);
        ownership.grant(&[("a", 3), ("b", 1)]);
        let report = control_loop.run_cycle().await.unwrap();
        assert_eq!(report.dispatched, vec!["a".to_owned(), "b".to_owned()]);
        assert_eq!(report.not_owned, vec!["c".to_owned()]);
        control_loop.wait_idle().await;
        assert_eq!(
            (
                scaler.forgets("a").len(),
                scaler.forgets("b").len(),
                scaler.forgets("c").len()
            ),
            (2, 1, 2),
            "a: new epoch; b: acquired; c: lost"
        );
        assert_eq!((scaler.scales("a"), scaler.scales("b"), scaler.scales("c")), (3, 1, 2));

        let stats = control_loop.ownership_stats().unwrap();
        assert_eq!(stats.owned_jobs(), 2);
        assert_eq!(stats.live_replicas(), 2);
        // a, c acquired; then a (new epoch) and b acquired, c released.
        assert_eq!(stats.ownership_changes(), 5);
        assert!(stats.last_round_succeeded());
    }

    #[tokio::test(start_paused = true)]
    async fn a_vanished_job_is_cleaned_up_by_its_owner_only() {
        let fetcher = ScriptedFetcher::with_jobs(&["mine", "theirs"]);
        let scaler = Arc::new(RecordingScaler::new(&[]));
        let ownership = ScriptedOwnership::new(&[("mine", 1)], secs(10.0), secs(3.0));
        let mut control_loop = owned_loop(&fetcher, &scaler, &ownership, 1000);
        control_loop.run_cycle().await.unwrap();
        control_loop.wait_idle().await;
        fetcher.set_jobs(&[]);
        // The round after the fetch still asks for the vanished jobs, so the owner keeps the
        // lease its cleanup needs; the next round lets it go.
        let report = control_loop.run_cycle().await.unwrap();
        assert_eq!(report.cleaned_up, vec!["mine".to_owned()]);
        assert_eq!(scaler.cleanups("mine").len(), 1);
        assert!(scaler.cleanups("theirs").is_empty());
        assert_eq!(scaler.forgets("theirs").len(), 1, "a non-owner only drops its cache");
        control_loop.run_cycle().await.unwrap();
        assert!(ownership.rounds.lock().unwrap().last().unwrap().1.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_cycle_in_flight_stops_when_its_lease_lapses_without_the_coordinator() {
        // Leases valid 10 s after a round; the coordinator goes down right after the first round.
        // The 30 s cycle of "slow" is cancelled at 10 s, and nothing is dispatched after.
        let fetcher = ScriptedFetcher::with_jobs(&["slow"]);
        let scaler = Arc::new(RecordingScaler::new(&[("slow", secs(30.0))]));
        let ownership = ScriptedOwnership::new(&[("slow", 1)], secs(10.0), secs(3.0));
        let control_loop = owned_loop(&fetcher, &scaler, &ownership, 1000);
        let stats = control_loop.ownership_stats().unwrap();
        let down = {
            let ownership = Arc::clone(&ownership);
            async move {
                tokio::time::sleep(secs(0.5)).await;
                ownership.set_down(true);
                tokio::time::sleep(secs(14.5)).await;
            }
        };
        control_loop.run(down).await;

        let r = scaler.record.lock().unwrap();
        assert_eq!(r.scale_starts["slow"], vec![secs(0.0)]);
        assert!(!r.scale_ends.contains_key("slow"), "cancelled before its end");
        assert_eq!(
            r.forgets["slow"],
            vec![secs(0.0), secs(10.0)],
            "acquired at 0 s, lost at 10 s"
        );
        drop(r);
        assert_eq!(stats.owned_jobs(), 0);
        assert!(stats.failed_rounds() >= 14, "{}", stats.failed_rounds());
        assert!(!stats.last_round_succeeded());
    }

    #[tokio::test(start_paused = true)]
    async fn leases_are_renewed_on_their_own_schedule_between_rare_cycles() {
        // Cycles every 60 s, renewals every 3 s, leases valid 10 s: a 25 s cycle runs to its end.
        let fetcher = ScriptedFetcher::with_jobs(&["job"]);
        let scaler = Arc::new(RecordingScaler::new(&[("job", secs(25.0))]));
        let ownership = ScriptedOwnership::new(&[("job", 1)], secs(10.0), secs(3.0));
        let control_loop = owned_loop(&fetcher, &scaler, &ownership, 60_000);
        control_loop.run(tokio::time::sleep(secs(20.0))).await;

        assert_eq!(scaler.record.lock().unwrap().scale_ends["job"], vec![secs(25.0)]);
        let rounds = ownership.round_times();
        // One after the fetch at 0 s, then every 3 s (until 25 s: the shutdown waits for the
        // cycle in flight).
        assert_eq!(rounds[..4], [secs(0.0), secs(3.0), secs(6.0), secs(9.0)]);
        assert!(rounds.len() >= 8, "{rounds:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_hands_idle_jobs_over_and_leaves_after_the_cycles_in_flight() {
        let fetcher = ScriptedFetcher::with_jobs(&["busy", "idle"]);
        let scaler = Arc::new(RecordingScaler::new(&[("busy", secs(5.0)), ("idle", secs(0.1))]));
        let ownership = ScriptedOwnership::new(&[("busy", 1), ("idle", 1)], secs(10.0), secs(1.0));
        let control_loop = owned_loop(&fetcher, &scaler, &ownership, 1000);
        let stats = control_loop.ownership_stats().unwrap();
        let watch = control_loop.ownership_watch().unwrap();
        control_loop.run(tokio::time::sleep(secs(0.5))).await;

        // After the shutdown at 0.5 s, the rounds ask only for the job with a cycle in flight.
        let rounds = ownership.rounds.lock().unwrap().clone();
        assert_eq!(rounds[0], (secs(0.0), vec!["busy".to_owned(), "idle".to_owned()]));
        assert_eq!(rounds[1], (secs(1.0), vec!["busy".to_owned()]));
        assert_eq!(*ownership.left_at.lock().unwrap(), vec![secs(5.0)]);
        assert_eq!(scaler.record.lock().unwrap().scale_ends["busy"], vec![secs(5.0)]);
        assert_eq!(stats.owned_jobs(), 0);
        assert!(watch.borrow().leases.is_empty());
    }
}
