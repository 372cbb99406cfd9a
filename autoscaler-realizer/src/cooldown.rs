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
//! simulations use [`ManualClock`].

use async_trait::async_trait;
pub use autoscaler_core::{Clock, SystemClock};
use autoscaler_core::{
    ConfigChanges, Configuration, JobAutoScalerContext, OptionsError, ParallelismOverrides, RealizeError,
    ScalingRealizer,
};
use autoscaler_metrics::time::add_saturating;
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::hash::Hash;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::options::{SCALING_INTERVAL_MAX, SCALING_INTERVAL_MIN, optional_duration};

/// A clock that only moves when told to (tests and simulations).
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<DateTime<Utc>>,
}

impl ManualClock {
    /// A clock standing at `start`.
    pub fn new(start: DateTime<Utc>) -> Self {
        Self { now: Mutex::new(start) }
    }

    /// Moves the clock to `at`.
    pub fn set(&self, at: DateTime<Utc>) {
        *lock(&self.now) = at;
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let mut now = lock(&self.now);
        *now = add_saturating(*now, by);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *lock(&self.now)
    }
}

/// The cooldown intervals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CooldownConfig {
    /// Minimum time between two forwarded changes (`scaling-interval.min`, 30 s).
    pub min_interval: Duration,
    /// Age after which a held request is forced (`scaling-interval.max`; `None` = never forced).
    pub max_interval: Option<Duration>,
}

impl Default for CooldownConfig {
    fn default() -> Self {
        Self {
            min_interval: Duration::from_secs(30),
            max_interval: None,
        }
    }
}

impl CooldownConfig {
    /// Reads `jobmanager.adaptive-scheduler.scaling-interval.min` and `.max` (Flink durations).
    pub fn from_configuration(conf: &Configuration) -> Result<Self, OptionsError> {
        Ok(Self {
            min_interval: optional_duration(conf, SCALING_INTERVAL_MIN)?.unwrap_or(Duration::from_secs(30)),
            max_interval: optional_duration(conf, SCALING_INTERVAL_MAX)?,
        })
    }
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
/// use autoscaler_realizer::{CooldownConfig, CooldownRealizer, FlinkRestClient, RescaleApiScalingRealizer};
/// use std::time::Duration;
///
/// type Ctx = BasicJobContext<String, FlinkRestClient>;
/// let config = CooldownConfig { min_interval: Duration::from_secs(30), max_interval: Some(Duration::from_secs(300)) };
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
        let Some(held) = &state.held else {
            return Decision::Hold;
        };
        let forced = self
            .config
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

    fn decide(&self, job_key: &K, overrides: &ParallelismOverrides, now: DateTime<Utc>) -> Decision {
        let mut jobs = lock(&self.jobs);
        let state = jobs.entry(job_key.clone()).or_default();
        if state.forwarded.as_ref() == Some(overrides) {
            // The newest request is what already runs: nothing held survives it.
            state.held = None;
            return Decision::Forward {
                overrides: overrides.clone(),
                change: false,
                released: None,
            };
        }
        let min = self.config.min_interval;
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
        state.last_rescale = Some(now);
        state.forwarded = Some(overrides);
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
        match self.decide(ctx.job_key(), overrides, now) {
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

/// Locks `mutex`, recovering the data if a panicking thread poisoned it (the state stays usable).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoscaler_core::BasicJobContext;
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
            })
        );
        let bad = Configuration::from_iter([(SCALING_INTERVAL_MIN, "soon")]);
        assert!(CooldownConfig::from_configuration(&bad).is_err());
    }
}
