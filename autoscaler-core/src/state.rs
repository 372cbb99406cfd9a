//! The port where the autoscaler keeps its per-job state: [`AutoScalerStateStore`]. The state
//! itself is plain data in [`crate::model::state`].

use crate::context::JobAutoScalerContext;
use crate::error::BoxError;
use crate::model::state::{
    ConfigChanges, DelayedScaleDown, JobState, ParallelismOverrides, ScalingHistory, ScalingTracking, StateChanges,
};
use async_trait::async_trait;
use autoscaler_metrics::{EvaluatedMetrics, MetricHistory};
use std::sync::Arc;

/// Errors of a state store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// The backend (database, file) failed; the cached state is kept and the next flush retries.
    #[error("state store backend error during {operation}: {message}")]
    Backend {
        /// What was being done (`flush`, `load`, ...).
        operation: &'static str,
        /// The backend's message.
        message: String,
    },
    /// Stored state could not be (de)serialized.
    #[error("state {state_type} could not be (de)serialized: {message}")]
    Serialization {
        /// The state type (`scalingHistory`, `collectedMetrics`, ...).
        state_type: &'static str,
        /// What was wrong.
        message: String,
    },
    /// A store's own error (its database client's, its file system's), kept as the cause:
    /// [`source`](std::error::Error::source) returns it. Build it with [`StateError::platform`].
    #[error("state store error during {operation}: {source}")]
    Platform {
        /// What was being done (`flush`, `load`, ...).
        operation: &'static str,
        /// The store's own error.
        #[source]
        source: BoxError,
    },
    /// The write was refused because this replica no longer owns the job (its lease expired
    /// locally, or another replica took it over: a newer epoch). Nothing was written and the
    /// job's cache was dropped; the replica must stop acting on the job (see
    /// [`JobOwnership`](crate::JobOwnership)).
    #[error("state of job {job_key} not written: {reason}")]
    Fenced {
        /// The job key's `Display` form.
        job_key: String,
        /// Why the lease is not held (expired locally, taken over, never acquired).
        reason: String,
    },
}

impl StateError {
    /// An `operation` (`load`, `flush`, ...) that failed with the store's own `error`, kept as
    /// the cause.
    pub fn platform(operation: &'static str, error: impl Into<BoxError>) -> Self {
        Self::Platform {
            operation,
            source: error.into(),
        }
    }
}

/// Result alias for state store operations (the error defaults to [`StateError`]).
pub type StateResult<T, E = StateError> = Result<T, E>;

/// Where the autoscaler keeps its per-job state between cycles (FLIP-334's `AutoScalerStateStore`).
///
/// Implementations may buffer writes until [`flush`](Self::flush); reads must see buffered writes.
///
/// How a cycle of `JobAutoScalerImpl` uses a store (see [`crate::cycle`]): after a successful
/// collection it reads the collected metrics, the scaling history, the scaling tracking, the
/// delayed scale-down state, the parallelism overrides and the configuration changes, each once,
/// in one [`get_job_state`](Self::get_job_state); it writes back only the states the cycle
/// changed (the collected metrics every cycle, the others when they changed) in one
/// [`store_job_state`](Self::store_job_state), the evaluated metrics whenever it evaluated, then
/// flushes. A cycle that stops before loading reads
/// the overrides once to re-apply them. `store_collected_metrics` always receives the whole
/// window: the new snapshot is its latest entry, and entries older than the window have been
/// removed, so a store can persist the difference to what it holds (by collection instant) instead
/// of the whole window.
///
/// The stores of `autoscaler-state` (in memory, SQLite, PostgreSQL, MySQL) implement it; a
/// platform with a store of its own keeps the store's error as the cause with
/// [`StateError::platform`]. Code that only reads or writes state stays generic over the store:
///
/// ```
/// use autoscaler_core::prelude::*;
///
/// /// Pins a vertex's parallelism, as an operator's manual override would.
/// async fn pin_parallelism<S, Ctx>(store: &S, ctx: &Ctx, vertex: &str, parallelism: u32) -> StateResult<()>
/// where
///     S: AutoScalerStateStore<String, Ctx> + ?Sized,
///     Ctx: JobAutoScalerContext<String>,
/// {
///     let mut overrides = store.get_parallelism_overrides(ctx).await?;
///     overrides.insert(vertex.into(), parallelism);
///     store.store_parallelism_overrides(ctx, &overrides).await?;
///     store.flush(ctx).await // persisted here, in one write
/// }
///
/// // A store's own failure, kept as the cause.
/// let error = StateError::platform("flush", std::io::Error::other("disk full"));
/// assert_eq!(error.to_string(), "state store error during flush: disk full");
/// ```
#[async_trait]
pub trait AutoScalerStateStore<K, Ctx>: Send + Sync
where
    Ctx: JobAutoScalerContext<K>,
{
    /// Stores the whole scaling history.
    async fn store_scaling_history(&self, ctx: &Ctx, history: &ScalingHistory) -> StateResult<()>;
    /// The stored scaling history (empty if none).
    async fn get_scaling_history(&self, ctx: &Ctx) -> StateResult<ScalingHistory>;
    /// Removes the scaling history.
    async fn remove_scaling_history(&self, ctx: &Ctx) -> StateResult<()>;

    /// Stores the scaling tracking.
    async fn store_scaling_tracking(&self, ctx: &Ctx, tracking: &ScalingTracking) -> StateResult<()>;
    /// The stored scaling tracking (empty if none).
    async fn get_scaling_tracking(&self, ctx: &Ctx) -> StateResult<ScalingTracking>;
    /// Removes the scaling tracking.
    async fn remove_scaling_tracking(&self, ctx: &Ctx) -> StateResult<()>;

    /// Stores the collected metric history.
    async fn store_collected_metrics(&self, ctx: &Ctx, history: &MetricHistory) -> StateResult<()>;
    /// The stored collected metric history (empty if none).
    async fn get_collected_metrics(&self, ctx: &Ctx) -> StateResult<MetricHistory>;
    /// Removes the collected metric history.
    async fn remove_collected_metrics(&self, ctx: &Ctx) -> StateResult<()>;

    /// Stores the last evaluated metrics. They come shared: a store that keeps them in memory, or
    /// a wrapper that hands them on (to a metrics exporter, say), keeps the `Arc` instead of a copy.
    async fn store_evaluated_metrics(&self, ctx: &Ctx, metrics: &Arc<EvaluatedMetrics>) -> StateResult<()>;
    /// The last evaluated metrics, if stored.
    async fn get_evaluated_metrics(&self, ctx: &Ctx) -> StateResult<Option<EvaluatedMetrics>>;
    /// Removes the evaluated metrics.
    async fn remove_evaluated_metrics(&self, ctx: &Ctx) -> StateResult<()>;

    /// Stores the parallelism overrides.
    async fn store_parallelism_overrides(&self, ctx: &Ctx, overrides: &ParallelismOverrides) -> StateResult<()>;
    /// The stored parallelism overrides (empty if none).
    async fn get_parallelism_overrides(&self, ctx: &Ctx) -> StateResult<ParallelismOverrides>;
    /// Removes the parallelism overrides.
    async fn remove_parallelism_overrides(&self, ctx: &Ctx) -> StateResult<()>;

    /// Stores the configuration changes.
    async fn store_config_changes(&self, ctx: &Ctx, changes: &ConfigChanges) -> StateResult<()>;
    /// The stored configuration changes (empty if none).
    async fn get_config_changes(&self, ctx: &Ctx) -> StateResult<ConfigChanges>;
    /// Removes the configuration changes.
    async fn remove_config_changes(&self, ctx: &Ctx) -> StateResult<()>;

    /// Stores the delayed scale-down state.
    async fn store_delayed_scale_down(&self, ctx: &Ctx, state: &DelayedScaleDown) -> StateResult<()>;
    /// The stored delayed scale-down state (empty if none).
    async fn get_delayed_scale_down(&self, ctx: &Ctx) -> StateResult<DelayedScaleDown>;
    /// Removes the delayed scale-down state.
    async fn remove_delayed_scale_down(&self, ctx: &Ctx) -> StateResult<()>;

    /// Every state a cycle reads, in one call: the collected metrics, the scaling history and
    /// tracking, the delayed scale-down state, the parallelism overrides and the configuration
    /// changes. The default calls the six getters; a store that can answers under one lock. The
    /// evaluated metrics, which no cycle reads, may be left `None`.
    async fn get_job_state(&self, ctx: &Ctx) -> StateResult<JobState> {
        Ok(JobState {
            metric_history: self.get_collected_metrics(ctx).await?,
            scaling_history: self.get_scaling_history(ctx).await?,
            scaling_tracking: self.get_scaling_tracking(ctx).await?,
            delayed_scale_down: self.get_delayed_scale_down(ctx).await?,
            parallelism_overrides: self.get_parallelism_overrides(ctx).await?,
            config_changes: self.get_config_changes(ctx).await?,
            // Written by every cycle that evaluates, read by none.
            evaluated_metrics: None,
        })
    }

    /// Stores the parts of `state` that `changes` marks, in one call (nothing else is written).
    /// The default calls the matching `store_*` of each part; a store that can writes them under
    /// one lock. Like every write, they are persisted by the next [`flush`](Self::flush).
    async fn store_job_state(&self, ctx: &Ctx, state: &JobState, changes: &StateChanges) -> StateResult<()> {
        // Every part named, so a part added to the state cannot be left unwritten.
        let StateChanges {
            metric_history,
            scaling_history,
            scaling_tracking,
            delayed_scale_down,
            parallelism_overrides,
            config_changes,
            evaluated_metrics,
        } = *changes;
        if metric_history {
            self.store_collected_metrics(ctx, &state.metric_history).await?;
        }
        if scaling_history {
            self.store_scaling_history(ctx, &state.scaling_history).await?;
        }
        if scaling_tracking {
            self.store_scaling_tracking(ctx, &state.scaling_tracking).await?;
        }
        if parallelism_overrides {
            self.store_parallelism_overrides(ctx, &state.parallelism_overrides)
                .await?;
        }
        if config_changes {
            self.store_config_changes(ctx, &state.config_changes).await?;
        }
        if delayed_scale_down {
            self.store_delayed_scale_down(ctx, &state.delayed_scale_down).await?;
        }
        if let Some(evaluated) = state.evaluated_metrics.as_ref().filter(|_| evaluated_metrics) {
            self.store_evaluated_metrics(ctx, evaluated).await?;
        }
        Ok(())
    }

    /// Removes every state of the job.
    async fn clear_all(&self, ctx: &Ctx) -> StateResult<()>;
    /// Persists buffered writes.
    async fn flush(&self, ctx: &Ctx) -> StateResult<()>;
    /// Drops the job's cached state without touching what is persisted.
    async fn remove_info_from_cache(&self, key: &K);
    /// Forgets the job completely: removes and flushes every persisted state of `key`, then drops
    /// its cache (what the reference's cleanup does through `clearAll` + `flush`). The default
    /// only drops the cache, for stores that cannot address persisted state by key alone.
    async fn remove_job(&self, key: &K) -> StateResult<()>
    where
        K: Sync,
    {
        self.remove_info_from_cache(key).await;
        Ok(())
    }
}
