//! The simulator behind the autoscaler's traits: the same [`MetricsCollector`], [`ScalingRealizer`]
//! and [`JobListFetcher`] seams the real Flink adapters implement, so `JobAutoScalerImpl` and the
//! standalone loop run on it unchanged, against the core's [`ManualClock`] moved along with
//! simulated time ([`SimHandle::clock`]).

use crate::engine::{SimJobState, Simulator};
use autoscaler_core::async_trait;
use autoscaler_core::config::parse_duration;
use autoscaler_core::{
    BasicJobContext, FetchError, JobAutoScalerContext, JobListFetcher, JobStatus, ManualClock, ParallelismOverrides,
    RealizeError, ScalingRealizer, config::AutoScalerOptions, config::Configuration,
};
use autoscaler_core::{CollectError, CollectedJobMetrics, MetricsCollector, MetricsSnapshot};
use chrono::{DateTime, TimeZone, Utc};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// The instant simulated time 0 maps to: 2026-01-01T00:00:00Z.
pub fn sim_epoch() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0)
        .single()
        .unwrap_or(DateTime::UNIX_EPOCH)
}

/// The wall-clock instant of simulated time `t`.
pub fn sim_instant(t: Duration) -> DateTime<Utc> {
    autoscaler_metrics::time::add_saturating(sim_epoch(), t)
}

/// A shared handle on a running [`Simulator`] (the "cluster client" of the simulated platform).
#[derive(Debug, Clone)]
pub struct SimHandle {
    inner: Arc<Mutex<Simulator>>,
    clock: Arc<ManualClock>,
}

impl SimHandle {
    /// Wraps `sim`; the returned handle's clock follows the simulation.
    pub fn new(sim: Simulator) -> Self {
        let clock = Arc::new(ManualClock::new(clock_instant(sim.now())));
        Self {
            inner: Arc::new(Mutex::new(sim)),
            clock,
        }
    }

    /// Locks the simulator (never held across an await).
    pub fn lock(&self) -> MutexGuard<'_, Simulator> {
        // A panic while holding the lock leaves a usable simulator (plain data), so poisoning is ignored.
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The clock that reads simulated time (to the millisecond), for
    /// `JobAutoScalerImpl::with_clock` and every other taker of a core `Clock`.
    pub fn clock(&self) -> Arc<ManualClock> {
        self.clock.clone()
    }

    /// Advances the simulation by `duration` and moves the clock along.
    pub fn advance(&self, duration: Duration) {
        let now = {
            let mut sim = self.lock();
            sim.advance(duration);
            sim.now()
        };
        self.clock.set(clock_instant(now));
    }

    /// The job status Flink would report now.
    pub fn job_status(&self) -> JobStatus {
        match self.lock().state() {
            SimJobState::Running => JobStatus::Running,
            SimJobState::Restarting { .. } => JobStatus::Restarting,
        }
    }

    /// A context for the job with `configuration` and the current status.
    pub fn context(&self, configuration: Configuration) -> SimContext {
        let name = self.lock().job().name.clone();
        let mut ctx = BasicJobContext::new(name.clone(), configuration, self.clone());
        ctx.job_id = Some(name);
        ctx.job_status = Some(self.job_status());
        ctx
    }
}

/// The context the simulated platform hands the autoscaler: the job name as key, the simulator as client.
pub type SimContext = BasicJobContext<String, SimHandle>;

/// The instant the simulation's clock shows at simulated time `t`: [`sim_instant`] of `t` in
/// whole milliseconds.
fn clock_instant(t: Duration) -> DateTime<Utc> {
    let millis = i64::try_from(t.as_millis()).unwrap_or(i64::MAX);
    sim_epoch() + chrono::Duration::milliseconds(millis)
}

/// Collects from the simulator what the REST collector collects from Flink: aggregated Flink
/// metrics ([`MetricsSnapshot::Flink`]), which the cycle converts as it converts Flink's.
#[derive(Debug, Clone, Copy, Default)]
pub struct SimMetricsCollector;

#[async_trait]
impl MetricsCollector<String, SimContext> for SimMetricsCollector {
    async fn collect(
        &self,
        ctx: &SimContext,
        _options: &AutoScalerOptions,
        _now: DateTime<Utc>,
    ) -> Result<CollectedJobMetrics, CollectError> {
        let sim = ctx.client.lock();
        let raw = sim
            .flink_metrics()
            .ok_or_else(|| CollectError::NotReady("job restarting or metrics not reported yet".to_owned()))?;
        let topology = sim.topology().map_err(|e| CollectError::Failed(e.to_string()))?;
        let running_since = sim_instant(sim.running_since());
        drop(sim);
        Ok(CollectedJobMetrics::new(
            topology,
            running_since,
            MetricsSnapshot::Flink(raw),
        ))
    }
}

/// Flink 2.x: the adaptive scheduler's cooldown after a rescale.
const COOLDOWN_AFTER_RESCALING: &str = "jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling";
/// Flink 1.x name of [`COOLDOWN_AFTER_RESCALING`], its deprecated fallback in 2.x.
const SCALING_INTERVAL_MIN: &str = "jobmanager.adaptive-scheduler.scaling-interval.min";

/// The cooldown the job's configuration gives Flink's adaptive scheduler: the first of
/// [`COOLDOWN_AFTER_RESCALING`] and [`SCALING_INTERVAL_MIN`] that is set (`None`: neither is).
fn configured_cooldown(conf: &Configuration) -> Result<Option<Duration>, RealizeError> {
    [COOLDOWN_AFTER_RESCALING, SCALING_INTERVAL_MIN]
        .into_iter()
        .find_map(|key| conf.get(key).map(|value| (key, value)))
        .map(|(key, value)| {
            parse_duration(value).map_err(|reason| RealizeError::Refused(format!("invalid {key} '{value}': {reason}")))
        })
        .transpose()
}

/// Applies overrides as the rescale-API realizer does (reference §4.3: only vertices the job has,
/// only when RUNNING, nothing sent when the requirements already match). The simulated adaptive
/// scheduler then holds the new requirements until its cooldown has passed since the job last
/// started running, as Flink's does server-side: the job configuration's
/// `jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling` (Flink 2.x) or
/// `jobmanager.adaptive-scheduler.scaling-interval.min` (1.x) if set, else the simulator's
/// setting. `scaling-interval.max` only matters when the cluster lacks slots, which the simulated
/// cluster never does.
#[derive(Debug, Clone, Copy, Default)]
pub struct SimScalingRealizer;

#[async_trait]
impl ScalingRealizer<String, SimContext> for SimScalingRealizer {
    async fn realize_parallelism_overrides(
        &self,
        ctx: &SimContext,
        overrides: &ParallelismOverrides,
    ) -> Result<(), RealizeError> {
        if ctx.job_status() != Some(JobStatus::Running) {
            tracing::info!("Job in terminal or reconciling state cannot be scaled in-place.");
            return Ok(());
        }
        // Flink's adaptive scheduler reads its cooldown from the job's configuration.
        let cooldown = configured_cooldown(ctx.configuration())?;
        let mut sim = ctx.client.lock();
        if let Some(cooldown) = cooldown {
            sim.set_scaling_interval_min(cooldown);
        }
        let mut changed = false;
        for (id, p) in overrides {
            changed |= sim.set_requirement(id.as_str(), *p);
        }
        if changed {
            tracing::info!(job = %ctx.job_key, requirements = ?sim.requirements(), "resource requirements updated");
        }
        Ok(())
    }
}

/// Lists simulated jobs (one context per simulator, configuration over the base configuration).
#[derive(Debug, Clone, Default)]
pub struct SimJobListFetcher {
    jobs: Vec<(SimHandle, Configuration)>,
}

impl SimJobListFetcher {
    /// A fetcher listing `jobs`, each with its own configuration.
    pub fn new(jobs: Vec<(SimHandle, Configuration)>) -> Self {
        Self { jobs }
    }
}

#[async_trait]
impl JobListFetcher<String, SimContext> for SimJobListFetcher {
    async fn fetch(&self, base: &Configuration) -> Result<Vec<SimContext>, FetchError> {
        Ok(self
            .jobs
            .iter()
            .map(|(handle, conf)| handle.context(base.overlay(conf)))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cooldown_comes_from_the_2x_key_then_the_1x_key() {
        let both = Configuration::from_iter([(COOLDOWN_AFTER_RESCALING, "10 s"), (SCALING_INTERVAL_MIN, "1 min")]);
        assert_eq!(configured_cooldown(&both).ok(), Some(Some(Duration::from_secs(10))));
        let legacy = Configuration::from_iter([(SCALING_INTERVAL_MIN, "2 min")]);
        assert_eq!(configured_cooldown(&legacy).ok(), Some(Some(Duration::from_secs(120))));
        assert_eq!(configured_cooldown(&Configuration::new()).ok(), Some(None));
        let bad = Configuration::from_iter([(SCALING_INTERVAL_MIN, "soon")]);
        assert!(matches!(configured_cooldown(&bad), Err(RealizeError::Refused(m)) if m.contains(SCALING_INTERVAL_MIN)));
    }
}
