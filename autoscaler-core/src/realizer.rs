//! Applying decisions to the platform ([`ScalingRealizer`]).

use crate::context::JobAutoScalerContext;
use crate::error::BoxError;
use crate::model::state::{ConfigChanges, ParallelismOverrides};
use async_trait::async_trait;

/// Why a realizer could not apply a change.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RealizeError {
    /// The platform refused the request (e.g. Flink answered 400); the message is the platform's.
    #[error("the platform refused the rescale: {0}")]
    Refused(String),
    /// The platform could not be reached or answered unexpectedly.
    #[error("could not reach the platform to rescale: {0}")]
    Unavailable(String),
    /// The platform's own error, kept as the cause: [`source`](std::error::Error::source) returns
    /// it. Build it with [`RealizeError::platform`].
    #[error("could not rescale: {0}")]
    Platform(#[source] BoxError),
}

impl RealizeError {
    /// A rescale that failed with the platform's own `error`, kept as the cause.
    pub fn platform(error: impl Into<BoxError>) -> Self {
        Self::Platform(error.into())
    }
}

/// Applies parallelism (and configuration) overrides to a running job (FLIP-334's `ScalingRealizer`).
///
/// ```
/// use autoscaler_core::prelude::*;
/// use std::sync::Mutex;
///
/// /// Redeploys through our deployment API (here: remembers what it was asked).
/// #[derive(Default)]
/// struct Deployer {
///     applied: Mutex<Vec<ParallelismOverrides>>,
/// }
///
/// #[async_trait]
/// impl ScalingRealizer<String, BasicJobContext<String, ()>> for Deployer {
///     async fn realize_parallelism_overrides(
///         &self,
///         _ctx: &BasicJobContext<String, ()>,
///         overrides: &ParallelismOverrides,
///     ) -> Result<(), RealizeError> {
///         // Called every cycle while overrides are stored: applying the same ones twice is a no-op.
///         let mut applied = self.applied.lock().map_err(|e| RealizeError::platform(e.to_string()))?;
///         if applied.last() != Some(overrides) {
///             applied.push(overrides.clone());
///         }
///         Ok(())
///     }
/// }
/// ```
#[async_trait]
pub trait ScalingRealizer<K, Ctx>: Send + Sync
where
    Ctx: JobAutoScalerContext<K>,
{
    /// Makes the job run with `overrides` (vertex id -> parallelism). Called every cycle while
    /// overrides are stored, so it must be idempotent.
    async fn realize_parallelism_overrides(
        &self,
        ctx: &Ctx,
        overrides: &ParallelismOverrides,
    ) -> Result<(), RealizeError>;

    /// Applies configuration changes (memory tuning). The default does nothing, as the reference's
    /// standalone realizer.
    async fn realize_config_overrides(&self, ctx: &Ctx, changes: &ConfigChanges) -> Result<(), RealizeError> {
        let _ = (ctx, changes);
        Ok(())
    }
}
