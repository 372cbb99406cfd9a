//! The [`JobAutoScaler`] trait: one call per job per control-loop cycle.

use async_trait::async_trait;

/// An error that escaped a scaling cycle (already reported as an `AutoscalerError` event).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AutoscalerError {
    /// A step of the cycle failed.
    #[error("autoscaler cycle failed in {step}: {message}")]
    Cycle {
        /// The failing step.
        step: CycleStep,
        /// What went wrong.
        message: String,
    },
    /// This replica no longer owns the job (its lease expired or was taken over): the cycle's
    /// state was not written, nothing was realized, and the job is another replica's now. Not an
    /// error of the job: no `AutoscalerError` event is emitted for it.
    #[error("job {job_key} is no longer owned by this replica: {reason}")]
    Fenced {
        /// The job key's `Display` form.
        job_key: String,
        /// Why the lease is not held.
        reason: String,
    },
}

impl AutoscalerError {
    /// A failure of `step`, described by `error`.
    pub fn cycle(step: CycleStep, error: impl std::fmt::Display) -> Self {
        Self::Cycle {
            step,
            message: error.to_string(),
        }
    }

    /// The step that failed (a fenced cycle failed to persist).
    pub fn step(&self) -> CycleStep {
        match self {
            Self::Cycle { step, .. } => *step,
            Self::Fenced { .. } => CycleStep::Persist,
        }
    }
}

/// The step of a cycle that failed ([`AutoscalerError::Cycle`]), in cycle order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CycleStep {
    /// Parsing the job's `job.autoscaler.*` options.
    Options,
    /// Reading the job's stored state.
    Load,
    /// Collecting the job's metrics.
    Collect,
    /// Evaluating the metric window.
    Evaluate,
    /// Deciding (a plugin failed, or the decision was aborted as the reference 1.16 aborts it).
    Decide,
    /// Writing back or flushing the job's state.
    Persist,
    /// Handing overrides to the realizer.
    Realize,
}

impl CycleStep {
    /// The stable lower-case name (`options`, `load`, `collect`, `evaluate`, `decide`,
    /// `persist`, `realize`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Options => "options",
            Self::Load => "load",
            Self::Collect => "collect",
            Self::Evaluate => "evaluate",
            Self::Decide => "decide",
            Self::Persist => "persist",
            Self::Realize => "realize",
        }
    }
}

impl std::fmt::Display for CycleStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Scales one kind of job (FLIP-334's `JobAutoScaler<KEY, Context>`).
#[async_trait]
pub trait JobAutoScaler<K, Ctx>: Send + Sync {
    /// Runs one autoscaling cycle for the job described by `ctx`.
    async fn scale(&self, ctx: &Ctx) -> Result<(), AutoscalerError>;
    /// Forgets everything about the job `job_key` (it was deleted or disappeared).
    async fn cleanup(&self, job_key: &K);
    /// Drops whatever this autoscaler caches about `job_key` (state, collector memory) without
    /// touching what is persisted, so the next cycle starts from the stored record. The
    /// standalone loop calls it when this replica acquires a job it did not hold (another
    /// replica may have written it meanwhile) and when it loses one. The default does nothing.
    async fn forget_cached(&self, _job_key: &K)
    where
        K: Sync,
    {
    }
}

/// Lists the jobs the standalone autoscaler should scale (FLIP-334's `JobListFetcher`).
///
/// ```
/// use autoscaler_core::prelude::*;
///
/// /// The jobs our platform runs, each with its own settings over the service's.
/// struct Inventory {
///     jobs: Vec<(String, Vec<(String, String)>)>,
/// }
///
/// #[async_trait]
/// impl JobListFetcher<String, BasicJobContext<String, ()>> for Inventory {
///     async fn fetch(&self, base: &Configuration) -> Result<Vec<BasicJobContext<String, ()>>, FetchError> {
///         Ok(self
///             .jobs
///             .iter()
///             .map(|(name, settings)| {
///                 let mut conf = base.clone();
///                 for (key, value) in settings {
///                     conf.set(key, value);
///                 }
///                 BasicJobContext::new(name.clone(), conf, ())
///             })
///             .collect())
///     }
/// }
/// ```
#[async_trait]
pub trait JobListFetcher<K, Ctx>: Send + Sync {
    /// Fetches the current jobs, each with its configuration merged over `base`.
    async fn fetch(&self, base: &crate::config::Configuration) -> Result<Vec<Ctx>, FetchError>;
}

/// Why the job list could not be fetched.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FetchError {
    /// The platform could not be reached or answered unexpectedly.
    #[error("could not fetch the job list: {0}")]
    Failed(String),
    /// The platform's own error, kept as the cause: [`source`](std::error::Error::source) returns
    /// it. Build it with [`FetchError::platform`].
    #[error("could not fetch the job list: {0}")]
    Platform(#[source] crate::error::BoxError),
}

impl FetchError {
    /// A fetch that failed with the platform's own `error`, kept as the cause.
    pub fn platform(error: impl Into<crate::error::BoxError>) -> Self {
        Self::Platform(error.into())
    }
}
