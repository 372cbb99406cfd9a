//! The [`JobAutoScaler`] trait: one call per job per control-loop cycle.

use async_trait::async_trait;

/// An error that escaped a scaling cycle (already reported as an `AutoscalerError` event).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AutoscalerError {
    /// A step of the cycle failed.
    #[error("autoscaler cycle failed in {step}: {message}")]
    Cycle {
        /// The failing step (`collect`, `evaluate`, `decide`, `realize`, `persist`).
        step: &'static str,
        /// What went wrong.
        message: String,
    },
}

/// Scales one kind of job (FLIP-334's `JobAutoScaler<KEY, Context>`).
#[async_trait]
pub trait JobAutoScaler<K, Ctx>: Send + Sync {
    /// Runs one autoscaling cycle for the job described by `ctx`.
    async fn scale(&self, ctx: &Ctx) -> Result<(), AutoscalerError>;
    /// Forgets everything about the job `job_key` (it was deleted or disappeared).
    async fn cleanup(&self, job_key: &K);
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
