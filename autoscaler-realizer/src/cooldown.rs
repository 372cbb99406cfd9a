//! [`CooldownRealizer`]: a cooldown governor around any [`ScalingRealizer`], with the adaptive
//! scheduler's `jobmanager.adaptive-scheduler.scaling-interval.min` / `.max` semantics.
//!
//! # How the intervals are read
//!
//! The adaptive scheduler does not rescale more often than every `scaling-interval.min` (default
//! 30 s); a change that is not worth a rescale on its own is still applied once `scaling-interval.max`
//! has passed (unset: never forced). The governor applies the same rules to the requests it forwards,
//! per job:
//!
//! - A request equal to the one last forwarded passes through (the realizer is called every cycle
//!   with the stored overrides and must stay idempotent; the wrapped realizer turns it into a no-op
//!   or a self-heal). It also drops a held request: the newest request wins.
//! - A changed request is forwarded at once when no rescale happened yet or the last one is at least
//!   `min` ago; that instant becomes the last rescale.
//! - Otherwise the request is **held** and becomes due at `last rescale + min`.
//! - A newer, different request replaces a held one and **resets the cooldown**: it becomes due at
//!   `its arrival + min`. A job whose recommendation keeps changing is thus not rescaled for every
//!   twitch.
//! - A held request is **forced** once the hold (counted from when the first held request arrived)
//!   is `max` old, even if its cooldown has not run out. Without `max` it is never forced.
//! - A held request is realized on the first call (or [`CooldownRealizer::poll`]) at or after it is
//!   due; the autoscaler calls the realizer every cycle, so the delay beyond the due time is at most
//!   one control-loop interval. [`CooldownRealizer::held_until`] tells a scheduler when to poll.
//!
//! What the governor cannot see: whether the wrapped realizer actually rescaled. A forwarded change
//! counts as a rescale even when the wrapped realizer turned it into a no-op (job not RUNNING,
//! requirements already matching) or when Flink itself delays it (its own
//! `executing.cooldown-after-rescaling`). The first change after the governor starts is forwarded at
//! once, since it knows of no earlier rescale. A failed forward changes nothing: the request stays
//! held (or is retried on the next call).
//!
//! Time comes from an injectable [`Clock`] (the core's, shared with `JobAutoScalerImpl`); tests and
//! simulations use the core's [`ManualClock`](autoscaler_core::ManualClock).

use async_trait::async_trait;
use autoscaler_core::{
    Clock, ConfigChanges, JobAutoScalerContext, ParallelismOverrides, RealizeError, ScalingRealizer, SystemClock,
    config::Configuration, config::OptionsError,
};
use autoscaler_metrics::time::add_saturating;
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::hash::Hash;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::options::{
    COOLDOWN_AFTER_RESCALING, RESCALE_TRIGGER_MAX_DELAY, RESOURCE_STABILIZATION_TIMEOUT, SCALING_INTERVAL_MAX,
    SCALING_INTERVAL_MIN, optional_duration,
};

/// The cooldown intervals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CooldownConfig {
    /// Minimum time between two forwarded changes (Flink 2.x
    /// `executing.cooldown-after-rescaling`, 1.x `scaling-interval.min`; 30 s).
    pub min_interval: Duration,
    /// Age after which a held request is forced (2.x `executing.resource-stabilization-timeout`,
    /// 1.x `scaling-interval.max`; `None` = never forced).
    pub max_interval: Option<Duration>,
    /// How long Flink may delay a requested rescale until a checkpoint (2.x
    /// `rescale-trigger.max-delay`; 0 when unset). Only lengthens how long a forwarded rescale
    /// counts as in flight.
    pub rescale_max_delay: Duration,
}

impl Default for CooldownConfig {
    fn default() -> Self {
        Self {
            min_interval: Duration::from_secs(30),
            max_interval: None,
            rescale_max_delay: Duration::ZERO,
        }
    }
}

/// The first of `keys` present in `conf`, as a duration.
fn first_duration(conf: &Configuration, keys: &[&str]) -> Result<Option<Duration>, OptionsError> {
    for key in keys {
        if let Some(d) = optional_duration(conf, key)? {
            return Ok(Some(d));
        }
    }
    Ok(None)
}

impl CooldownConfig {
    /// Reads the Flink 2.x keys with the 1.x ones as fallbacks; unset keys keep the defaults.
    pub fn from_configuration(conf: &Configuration) -> Result<Self, OptionsError> {
        Self::from_configuration_or(conf, &Self::default())
    }

    /// Like [`Self::from_configuration`], with `defaults` for the unset keys: how a job's own
    /// configuration (`/jobs/<id>/jobmanager/config`) overrides the governor's settings.
    ///
    /// ```
    /// use autoscaler_core::config::Configuration;
    /// use autoscaler_realizer::CooldownConfig;
    /// use std::time::Duration;
    /// let conf = Configuration::from_iter([
    ///     ("jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling", "10 s"),
    ///     ("jobmanager.adaptive-scheduler.scaling-interval.min", "1 min"), // 1.x name, loses
    /// ]);
    /// assert_eq!(CooldownConfig::from_configuration(&conf).unwrap().min_interval, Duration::from_secs(10));
    /// ```
    pub fn from_configuration_or(conf: &Configuration, defaults: &Self) -> Result<Self, OptionsError> {
        Ok(Self {
            min_interval: first_duration(conf, &[COOLDOWN_AFTER_RESCALING, SCALING_INTERVAL_MIN])?
                .unwrap_or(defaults.min_interval),
            max_interval: first_duration(conf, &[RESOURCE_STABILIZATION_TIMEOUT, SCALING_INTERVAL_MAX])?
                .or(defaults.max_interval),
            rescale_max_delay: first_duration(conf, &[RESCALE_TRIGGER_MAX_DELAY])?
                .unwrap_or(defaults.rescale_max_delay),
        })
    }

    /// How long a forwarded rescale counts as in flight at most: the cooldown, Flink's checkpoint
    /// delay, and [`IN_FLIGHT_GRACE`] for the restart itself.
    pub fn in_flight_timeout(&self) -> Duration {
        self.min_interval
            .saturating_add(self.rescale_max_delay)
            .saturating_add(IN_FLIGHT_GRACE)
    }
}

/// Time a rescale may take beyond the cooldown and checkpoint delay before its in-flight mark is
/// dropped (the request was lost, or Flink could not get the slots).
pub const IN_FLIGHT_GRACE: Duration = Duration::from_secs(300);

/// Whether a job's requested rescale is still in flight (see [`CooldownRealizer::in_flight`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InFlight {
    /// Nothing requested is pending.
    None,
    /// A request is held in the cooldown.
    Held(ParallelismOverrides),
    /// A request was forwarded at this instant and Flink does not report it yet.
    Forwarded {
        /// What was requested.
        overrides: ParallelismOverrides,
        /// When.
        since: DateTime<Utc>,
        /// When the mark is dropped if Flink never reports it.
        expires_at: DateTime<Utc>,
    },
}

#[derive(Debug, Clone)]
struct Held {
    overrides: ParallelismOverrides,
    held_since: DateTime<Utc>,
    due_at: DateTime<Utc>,
}

#[derive(Debug, Default)]
struct JobCooldown {
    last_rescale: Option<DateTime<Utc>>,
    forwarded: Option<ParallelismOverrides>,
    held: Option<Held>,
    /// The last forwarded change until Flink reports it: (overrides, since, expires at).
    in_flight: Option<(ParallelismOverrides, DateTime<Utc>, DateTime<Utc>)>,
    /// The job's own intervals, from its last request.
    config: Option<CooldownConfig>,
}

enum Decision {
    /// Forward `overrides`; `change` marks a new rescale (starts the cooldown on success);
    /// `released` is the held request being forwarded, put back if forwarding fails.
    Forward {
        overrides: ParallelismOverrides,
        change: bool,
        released: Option<Held>,
    },
    Hold,
}

/// Holds parallelism changes inside a cooldown before handing them to the wrapped realizer `R`
/// (see the module documentation for the exact rules). Configuration changes pass straight through.
///
/// ```
/// use autoscaler_core::BasicJobContext;
/// use autoscaler_realizer::rest::FlinkRestClient;
/// use autoscaler_realizer::{CooldownConfig, CooldownRealizer, RescaleApiScalingRealizer};
/// use std::time::Duration;
///
/// type Ctx = BasicJobContext<String, FlinkRestClient>;
/// let config = CooldownConfig { min_interval: Duration::from_secs(30), max_interval: Some(Duration::from_secs(300)), ..CooldownConfig::default() };
/// let realizer: CooldownRealizer<RescaleApiScalingRealizer<String, Ctx>, String> =
///     CooldownRealizer::new(RescaleApiScalingRealizer::new(), config);
/// # let _ = realizer;
/// ```
pub struct CooldownRealizer<R, K> {
    inner: R,
    config: CooldownConfig,
    clock: Arc<dyn Clock>,
    jobs: Mutex<HashMap<K, JobCooldown>>,
    _key: PhantomData<fn(K)>,
}

impl<R, K: Eq + Hash + Clone> CooldownRealizer<R, K> {
    /// Wraps `inner` with the wall clock.
    pub fn new(inner: R, config: CooldownConfig) -> Self {
        Self::with_clock(inner, config, Arc::new(SystemClock))
    }

    /// Wraps `inner` with the given clock.
    pub fn with_clock(inner: R, config: CooldownConfig, clock: Arc<dyn Clock>) -> Self {
        Self {
            inner,
            config,
            clock,
            jobs: Mutex::new(HashMap::new()),
            _key: PhantomData,
        }
    }

    /// The wrapped realizer.
    pub fn inner(&self) -> &R {
        &self.inner
    }

    /// The cooldown intervals.
    pub fn config(&self) -> CooldownConfig {
        self.config
    }

    /// When the request held for `job_key` becomes due (or is forced, whichever comes first); `None`
    /// when nothing is held.
    pub fn held_until(&self, job_key: &K) -> Option<DateTime<Utc>> {
        let jobs = lock(&self.jobs);
        let held = jobs.get(job_key)?.held.as_ref()?;
        let forced = self.config.max_interval.map(|max| add_saturating(held.held_since, max));
        Some(forced.map_or(held.due_at, |f| f.min(held.due_at)))
    }

    /// The overrides held for `job_key`, if any.
    pub fn held_overrides(&self, job_key: &K) -> Option<ParallelismOverrides> {
        lock(&self.jobs)
            .get(job_key)?
            .held
            .as_ref()
            .map(|h| h.overrides.clone())
    }

    /// Forgets everything about `job_key` (the job is gone).
    pub fn forget(&self, job_key: &K) {
        lock(&self.jobs).remove(job_key);
    }

    /// Takes the held request of `job` if it is due now.
    fn take_if_due(&self, state: &mut JobCooldown, now: DateTime<Utc>) -> Decision {
        let config = state.config.unwrap_or(self.config);
        let Some(held) = &state.held else {
            return Decision::Hold;
        };
        let forced = config
            .max_interval
            .is_some_and(|max| now >= add_saturating(held.held_since, max));
        if now >= held.due_at || forced {
            if forced && now < held.due_at {
                tracing::info!(held_since = %held.held_since, "forcing a held rescale: scaling-interval.max reached");
            }
            let overrides = held.overrides.clone();
            Decision::Forward {
                overrides,
                change: true,
                released: state.held.take(),
            }
        } else {
            tracing::debug!(due_at = %held.due_at, "rescale held in cooldown (scaling-interval.min)");
            Decision::Hold
        }
    }

    fn decide(
        &self,
        job_key: &K,
        overrides: &ParallelismOverrides,
        now: DateTime<Utc>,
        config: CooldownConfig,
    ) -> Decision {
        let mut jobs = lock(&self.jobs);
        let state = jobs.entry(job_key.clone()).or_default();
        state.config = Some(config);
        if state.forwarded.as_ref() == Some(overrides) {
            // The newest request is what already runs: nothing held survives it.
            state.held = None;
            return Decision::Forward {
                overrides: overrides.clone(),
                change: false,
                released: None,
            };
        }
        let min = config.min_interval;
        match &mut state.held {
            Some(held) if held.overrides != *overrides => {
                held.overrides = overrides.clone();
                held.due_at = add_saturating(now, min);
            }
            Some(_) => {}
            None => match state.last_rescale {
                Some(last) if now < add_saturating(last, min) => {
                    state.held = Some(Held {
                        overrides: overrides.clone(),
                        held_since: now,
                        due_at: add_saturating(last, min),
                    });
                }
                _ => {
                    return Decision::Forward {
                        overrides: overrides.clone(),
                        change: true,
                        released: None,
                    };
                }
            },
        }
        self.take_if_due(state, now)
    }

    fn record_forwarded(&self, job_key: &K, overrides: ParallelismOverrides, now: DateTime<Utc>) {
        let mut jobs = lock(&self.jobs);
        let state = jobs.entry(job_key.clone()).or_default();
        let timeout = state.config.unwrap_or(self.config).in_flight_timeout();
        state.last_rescale = Some(now);
        state.in_flight = Some((overrides.clone(), now, add_saturating(now, timeout)));
        state.forwarded = Some(overrides);
    }

    /// Whether a rescale of `job_key` is in flight: held in the cooldown, or forwarded and not yet
    /// [settled](Self::settle_in_flight). While it is, no cycle should decide (and record) the
    /// same scaling again: [`RescaleInFlightGuard`] skips the job's cycles.
    pub fn in_flight(&self, job_key: &K) -> InFlight {
        let jobs = lock(&self.jobs);
        let Some(state) = jobs.get(job_key) else {
            return InFlight::None;
        };
        if let Some(held) = &state.held {
            return InFlight::Held(held.overrides.clone());
        }
        match &state.in_flight {
            Some((overrides, since, expires_at)) => InFlight::Forwarded {
                overrides: overrides.clone(),
                since: *since,
                expires_at: *expires_at,
            },
            None => InFlight::None,
        }
    }

    /// Drops the in-flight mark of `job_key` (Flink reports the new parallelism, or the request is
    /// given up).
    pub fn settle_in_flight(&self, job_key: &K) {
        if let Some(state) = lock(&self.jobs).get_mut(job_key) {
            state.in_flight = None;
        }
    }

    /// The clock of the governor.
    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// The intervals that apply to a job: its own configuration's keys over the governor's.
    fn job_config(&self, conf: &Configuration) -> CooldownConfig {
        CooldownConfig::from_configuration_or(conf, &self.config).unwrap_or_else(|error| {
            tracing::warn!(%error, "invalid adaptive scheduler interval in the job's configuration; using the defaults");
            self.config
        })
    }
}

impl<R, K> CooldownRealizer<R, K>
where
    K: Eq + Hash + Clone + Send + Sync,
{
    /// Realizes the request held for the job of `ctx` if it is due; returns whether it forwarded one.
    /// A control loop that wants held requests applied on time (rather than on its next cycle) calls
    /// this at [`Self::held_until`].
    pub async fn poll<Ctx>(&self, ctx: &Ctx) -> Result<bool, RealizeError>
    where
        Ctx: JobAutoScalerContext<K>,
        R: ScalingRealizer<K, Ctx>,
    {
        let now = self.clock.now();
        let decision = {
            let mut jobs = lock(&self.jobs);
            match jobs.get_mut(ctx.job_key()) {
                Some(state) => self.take_if_due(state, now),
                None => Decision::Hold,
            }
        };
        match decision {
            Decision::Hold => Ok(false),
            Decision::Forward {
                overrides,
                change,
                released,
            } => {
                self.forward(ctx, overrides, change, released, now).await?;
                Ok(true)
            }
        }
    }

    async fn forward<Ctx>(
        &self,
        ctx: &Ctx,
        overrides: ParallelismOverrides,
        change: bool,
        released: Option<Held>,
        now: DateTime<Utc>,
    ) -> Result<(), RealizeError>
    where
        Ctx: JobAutoScalerContext<K>,
        R: ScalingRealizer<K, Ctx>,
    {
        if let Err(error) = self.inner.realize_parallelism_overrides(ctx, &overrides).await {
            if let Some(held) = released {
                // Keep the request (and its age, for max) unless a newer one arrived meanwhile.
                lock(&self.jobs)
                    .entry(ctx.job_key().clone())
                    .or_default()
                    .held
                    .get_or_insert(held);
            }
            return Err(error);
        }
        if change {
            self.record_forwarded(ctx.job_key(), overrides, now);
        }
        Ok(())
    }
}

#[async_trait]
impl<R, K, Ctx> ScalingRealizer<K, Ctx> for CooldownRealizer<R, K>
where
    R: ScalingRealizer<K, Ctx>,
    K: Eq + Hash + Clone + Send + Sync,
    Ctx: JobAutoScalerContext<K>,
{
    async fn realize_parallelism_overrides(
        &self,
        ctx: &Ctx,
        overrides: &ParallelismOverrides,
    ) -> Result<(), RealizeError> {
        let now = self.clock.now();
        let config = self.job_config(ctx.configuration());
        match self.decide(ctx.job_key(), overrides, now, config) {
            Decision::Hold => Ok(()),
            Decision::Forward {
                overrides,
                change,
                released,
            } => self.forward(ctx, overrides, change, released, now).await,
        }
    }

    async fn realize_config_overrides(&self, ctx: &Ctx, changes: &ConfigChanges) -> Result<(), RealizeError> {
        self.inner.realize_config_overrides(ctx, changes).await
    }
}

/// Skips the cycles of a job whose rescale is in flight, so that no cycle decides (and records)
/// the same scaling twice while the cooldown holds it or Flink has not applied it yet.
///
/// Before each cycle of a job with an in-flight mark ([`CooldownRealizer::in_flight`]):
/// - **held**: a due request is released ([`CooldownRealizer::poll`]); the cycle is skipped;
/// - **forwarded**: the job's vertices are read (`GET /jobs/<id>`); when every requested vertex
///   runs at its requested parallelism the mark is dropped and the cycle runs; when the mark has
///   expired ([`CooldownConfig::in_flight_timeout`]: the request was lost, or Flink could not get
///   the slots) it is dropped with a warning and the cycle runs; otherwise the cycle is skipped.
///
/// A vanished job's cleanup also forgets its cooldown entry ([`CooldownRealizer::forget`]).
pub struct RescaleInFlightGuard<A, R, K> {
    inner: A,
    cooldown: Arc<CooldownRealizer<R, K>>,
}

impl<A, R, K> RescaleInFlightGuard<A, R, K> {
    /// Guards the autoscaler `inner` with the in-flight marks of `cooldown` (the realizer `inner`
    /// scales through).
    pub fn new(inner: A, cooldown: Arc<CooldownRealizer<R, K>>) -> Self {
        Self { inner, cooldown }
    }
}

/// Whether Flink runs every vertex of `requested` at its requested parallelism.
pub fn parallelism_applied(requested: &ParallelismOverrides, running: &crate::rest::JobDetails) -> bool {
    requested.iter().all(|(id, p)| {
        running
            .vertices
            .iter()
            .any(|v| v.id == id.as_str() && u32::try_from(v.parallelism).ok() == Some(*p))
    })
}

#[async_trait]
impl<A, R, K, Ctx> autoscaler_core::JobAutoScaler<K, Ctx> for RescaleInFlightGuard<A, R, K>
where
    A: autoscaler_core::JobAutoScaler<K, Ctx>,
    R: ScalingRealizer<K, Ctx>,
    K: Eq + Hash + Clone + Send + Sync + std::fmt::Debug + std::fmt::Display,
    Ctx: JobAutoScalerContext<K> + crate::FlinkRestContext,
{
    async fn scale(&self, ctx: &Ctx) -> Result<(), autoscaler_core::AutoscalerError> {
        let key = ctx.job_key();
        match self.cooldown.in_flight(key) {
            InFlight::None => {}
            InFlight::Held(_) => {
                if let Err(error) = self.cooldown.poll(ctx).await {
                    tracing::warn!(job = %key, %error, "could not realize a held rescale");
                }
                tracing::debug!(job = %key, "rescale in flight (held in the cooldown): cycle skipped");
                return Ok(());
            }
            InFlight::Forwarded {
                overrides, expires_at, ..
            } => {
                let applied = match ctx.job_id() {
                    Some(job_id) => match ctx.rest_client().job_details(job_id).await {
                        Ok(details) => parallelism_applied(&overrides, &details),
                        Err(error) => {
                            tracing::debug!(job = %key, %error, "cannot check an in-flight rescale");
                            false
                        }
                    },
                    None => true,
                };
                if applied {
                    self.cooldown.settle_in_flight(key);
                } else if self.cooldown.now() >= expires_at {
                    tracing::warn!(job = %key, ?overrides, "Flink never reported the requested parallelism; no longer waiting for it");
                    self.cooldown.settle_in_flight(key);
                } else {
                    tracing::debug!(job = %key, "rescale in flight (Flink has not applied it yet): cycle skipped");
                    return Ok(());
                }
            }
        }
        self.inner.scale(ctx).await
    }

    async fn cleanup(&self, job_key: &K) {
        self.inner.cleanup(job_key).await;
        self.cooldown.forget(job_key);
    }
}

/// Locks `mutex`, recovering the data if a panicking thread poisoned it (the state stays usable).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoscaler_core::{BasicJobContext, ManualClock};
    use autoscaler_metrics::VertexId;
    use chrono::TimeZone;

    type Ctx = BasicJobContext<String, ()>;

    #[derive(Default)]
    struct Recorder {
        calls: Mutex<Vec<ParallelismOverrides>>,
        fail_next: Mutex<bool>,
    }

    impl Recorder {
        fn calls(&self) -> Vec<ParallelismOverrides> {
            lock(&self.calls).clone()
        }
    }

    /// The realizer under test's view of the shared recorder.
    struct Shared(Arc<Recorder>);

    #[async_trait]
    impl ScalingRealizer<String, Ctx> for Shared {
        async fn realize_parallelism_overrides(
            &self,
            _ctx: &Ctx,
            overrides: &ParallelismOverrides,
        ) -> Result<(), RealizeError> {
            if std::mem::take(&mut *lock(&self.0.fail_next)) {
                return Err(RealizeError::Unavailable("connection refused".to_owned()));
            }
            lock(&self.0.calls).push(overrides.clone());
            Ok(())
        }
    }

    fn p(value: u32) -> ParallelismOverrides {
        [(VertexId::new("v"), value)].into_iter().collect()
    }

    struct Setup {
        clock: Arc<ManualClock>,
        recorder: Arc<Recorder>,
        realizer: CooldownRealizer<Shared, String>,
        ctx: Ctx,
    }

    fn setup(max: Option<u64>) -> Setup {
        let start = Utc.timestamp_opt(1_000_000, 0).single().expect("valid start");
        let clock = Arc::new(ManualClock::new(start));
        let recorder = Arc::new(Recorder::default());
        let config = CooldownConfig {
            min_interval: Duration::from_secs(30),
            max_interval: max.map(Duration::from_secs),
            ..CooldownConfig::default()
        };
        let realizer = CooldownRealizer::with_clock(Shared(Arc::clone(&recorder)), config, clock.clone());
        let ctx = BasicJobContext::new("job".to_owned(), Configuration::new(), ());
        Setup {
            clock,
            recorder,
            realizer,
            ctx,
        }
    }

    impl Setup {
        async fn at(&self, seconds: u64, value: u32) {
            let start = Utc.timestamp_opt(1_000_000, 0).single().expect("valid start");
            self.clock.set(add_saturating(start, Duration::from_secs(seconds)));
            self.realizer
                .realize_parallelism_overrides(&self.ctx, &p(value))
                .await
                .expect("recorder never fails");
        }
    }

    #[tokio::test]
    async fn first_request_and_repeats_pass_through() {
        let s = setup(None);
        s.at(0, 2).await;
        s.at(5, 2).await;
        // Repeats of the running request are forwarded (idempotent self-heal), not held.
        assert_eq!(s.recorder.calls(), vec![p(2), p(2)]);
    }

    #[tokio::test]
    async fn change_inside_min_is_held_until_last_rescale_plus_min() {
        let s = setup(None);
        s.at(0, 2).await;
        s.at(10, 4).await; // min not exceeded: held, due at 0 + 30
        s.at(29, 4).await;
        assert_eq!(s.recorder.calls(), vec![p(2)]);
        assert_eq!(
            s.realizer.held_until(&"job".to_owned()),
            Some(Utc.timestamp_opt(1_000_030, 0).single().expect("valid"))
        );
        s.at(30, 4).await; // min exceeded: realized
        assert_eq!(s.recorder.calls(), vec![p(2), p(4)]);
        assert_eq!(s.realizer.held_until(&"job".to_owned()), None);
        // The realized change restarted the cooldown: a change at 45 waits for 60.
        s.at(45, 6).await;
        assert_eq!(s.recorder.calls().len(), 2);
        s.at(60, 6).await;
        assert_eq!(s.recorder.calls(), vec![p(2), p(4), p(6)]);
    }

    #[tokio::test]
    async fn change_after_min_is_forwarded_at_once() {
        let s = setup(None);
        s.at(0, 2).await;
        s.at(31, 3).await;
        assert_eq!(s.recorder.calls(), vec![p(2), p(3)]);
    }

    #[tokio::test]
    async fn newer_request_replaces_the_held_one_and_resets_the_cooldown() {
        let s = setup(None);
        s.at(0, 2).await;
        s.at(10, 4).await; // held, due at 30
        s.at(20, 5).await; // replaces 4, due at 20 + 30 = 50
        s.at(35, 5).await;
        assert_eq!(s.recorder.calls(), vec![p(2)]);
        s.at(50, 5).await;
        assert_eq!(s.recorder.calls(), vec![p(2), p(5)]);
    }

    #[tokio::test]
    async fn reverting_to_the_running_request_drops_the_held_one() {
        let s = setup(None);
        s.at(0, 2).await;
        s.at(10, 4).await;
        s.at(15, 2).await;
        assert_eq!(s.realizer.held_overrides(&"job".to_owned()), None);
        s.at(100, 2).await;
        assert!(s.recorder.calls().iter().all(|c| *c == p(2)));
    }

    #[tokio::test]
    async fn without_max_a_changing_request_is_never_forced() {
        let s = setup(None);
        s.at(0, 2).await;
        for step in 1..=60u32 {
            s.at(u64::from(step) * 10, 10 + step).await;
        }
        assert_eq!(s.recorder.calls(), vec![p(2)]);
    }

    #[tokio::test]
    async fn with_max_a_held_request_is_forced_when_max_old() {
        let s = setup(Some(60));
        s.at(0, 2).await;
        // Held from 10 on, replaced every 10 s so the min cooldown never runs out.
        for t in [10u64, 20, 30, 40, 50, 60] {
            s.at(t, 100 + t as u32).await;
        }
        assert_eq!(s.recorder.calls(), vec![p(2)], "max not exceeded yet (held 50 s)");
        s.at(70, 170).await; // held 60 s: forced with the newest request
        assert_eq!(s.recorder.calls(), vec![p(2), p(170)]);
    }

    #[tokio::test]
    async fn poll_realizes_a_due_request_without_a_new_call() {
        let s = setup(None);
        s.at(0, 2).await;
        s.at(10, 4).await;
        s.clock.advance(Duration::from_secs(5));
        assert!(!s.realizer.poll(&s.ctx).await.expect("ok"));
        s.clock.advance(Duration::from_secs(20));
        assert!(s.realizer.poll(&s.ctx).await.expect("ok"));
        assert_eq!(s.recorder.calls(), vec![p(2), p(4)]);
    }

    #[tokio::test]
    async fn a_failed_forward_keeps_the_held_request_and_its_age() {
        let s = setup(Some(20));
        s.at(0, 2).await;
        s.at(5, 4).await; // held since 5, forced at 25
        *lock(&s.recorder.fail_next) = true;
        s.clock.set(Utc.timestamp_opt(1_000_025, 0).single().expect("valid"));
        assert!(s.realizer.poll(&s.ctx).await.is_err());
        assert_eq!(s.realizer.held_overrides(&"job".to_owned()), Some(p(4)));
        assert!(s.realizer.poll(&s.ctx).await.expect("retried"));
        assert_eq!(s.recorder.calls(), vec![p(2), p(4)]);
    }

    #[tokio::test]
    async fn the_jobs_own_flink_2_keys_override_the_governors_intervals() {
        let mut s = setup(None);
        // The job's JobManager serves the 2.x key: 10 s instead of the governor's 30 s.
        s.ctx.configuration.set(COOLDOWN_AFTER_RESCALING, "10 s");
        s.at(0, 2).await;
        s.at(5, 3).await; // held: last rescale 0 s + 10 s
        assert_eq!(
            s.realizer.held_until(&"job".to_owned()),
            Some(s.clock.now() + chrono::TimeDelta::seconds(5))
        );
        s.at(10, 3).await;
        assert_eq!(s.recorder.calls(), vec![p(2), p(3)]);
        // 1.x key only: used as the fallback.
        let mut old = setup(None);
        old.ctx.configuration.set(SCALING_INTERVAL_MIN, "20 s");
        old.at(0, 2).await;
        old.at(15, 3).await;
        old.at(19, 3).await;
        assert_eq!(old.recorder.calls(), vec![p(2)]);
        old.at(20, 3).await;
        assert_eq!(old.recorder.calls(), vec![p(2), p(3)]);
    }

    #[tokio::test]
    async fn a_rescale_is_in_flight_while_held_and_after_forwarding_until_settled() {
        let s = setup(None);
        let key = "job".to_owned();
        assert_eq!(s.realizer.in_flight(&key), InFlight::None);
        s.at(0, 2).await;
        let start = s.clock.now();
        // Forwarded at 0 s; expires after min 30 s + max-delay 0 + grace 300 s.
        assert_eq!(
            s.realizer.in_flight(&key),
            InFlight::Forwarded {
                overrides: p(2),
                since: start,
                expires_at: start + chrono::TimeDelta::seconds(330)
            }
        );
        s.realizer.settle_in_flight(&key);
        assert_eq!(s.realizer.in_flight(&key), InFlight::None);
        s.at(10, 4).await; // held until 30 s
        assert_eq!(s.realizer.in_flight(&key), InFlight::Held(p(4)));
        s.realizer.forget(&key);
        assert_eq!(s.realizer.in_flight(&key), InFlight::None);
        assert_eq!(s.realizer.held_overrides(&key), None);
    }

    #[test]
    fn in_flight_timeout_adds_the_checkpoint_delay_and_grace() {
        let conf = Configuration::from_iter([
            (RESCALE_TRIGGER_MAX_DELAY, "2 min"),
            (RESOURCE_STABILIZATION_TIMEOUT, "1 min"),
            (SCALING_INTERVAL_MAX, "10 min"),
        ]);
        let c = CooldownConfig::from_configuration(&conf).expect("valid");
        assert_eq!(c.max_interval, Some(Duration::from_secs(60)), "the 2.x key wins");
        // 30 s + 120 s + 300 s.
        assert_eq!(c.in_flight_timeout(), Duration::from_secs(450));
    }

    #[test]
    fn config_reads_the_adaptive_scheduler_keys() {
        assert_eq!(
            CooldownConfig::from_configuration(&Configuration::new()).ok(),
            Some(CooldownConfig::default())
        );
        let conf = Configuration::from_iter([(SCALING_INTERVAL_MIN, "10 s"), (SCALING_INTERVAL_MAX, "5 min")]);
        assert_eq!(
            CooldownConfig::from_configuration(&conf).ok(),
            Some(CooldownConfig {
                min_interval: Duration::from_secs(10),
                max_interval: Some(Duration::from_secs(300)),
                rescale_max_delay: Duration::ZERO,
            })
        );
        let bad = Configuration::from_iter([(SCALING_INTERVAL_MIN, "soon")]);
        assert!(CooldownConfig::from_configuration(&bad).is_err());
    }
}
