//! The crate's errors in one enum ([`Error`]), and the boxed cause a platform hands in
//! ([`BoxError`]).
//!
//! Each port has its own error type ([`CollectError`], [`RealizeError`], [`StateError`],
//! [`FetchError`]), whose `Platform`/`Other` variant keeps the platform's own error as its
//! [`source`](std::error::Error::source): an error chain that starts in a platform's client
//! survives the autoscaler, for `anyhow`-style reports or a downcast. [`Error`] gathers them,
//! with the cycle's and the options' errors, for glue code that wants one type; it is
//! transparent, so its `Display` and `source` are the wrapped error's.
//!
//! ```
//! use autoscaler_core::{CollectError, Error};
//! use std::error::Error as _;
//!
//! let io = std::io::Error::new(std::io::ErrorKind::TimedOut, "metrics endpoint timed out");
//! let error: Error = CollectError::platform(io).into();
//! assert_eq!(error.to_string(), "metric collection failed: metrics endpoint timed out");
//! let cause = error.source().and_then(|cause| cause.downcast_ref::<std::io::Error>());
//! assert_eq!(cause.map(std::io::Error::kind), Some(std::io::ErrorKind::TimedOut));
//! ```

use crate::autoscaler::{AutoscalerError, FetchError};
use crate::collector::CollectError;
use crate::config::OptionsError;
use crate::plugins::PluginError;
use crate::realizer::RealizeError;
use crate::state::StateError;

/// A platform's own error, boxed to travel as the cause of one of the crate's errors.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Any error of `autoscaler-core`: a transparent wrapper of the error of the port or step that
/// failed (its `Display` and `source` are the wrapped error's).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A metrics collection failed.
    #[error(transparent)]
    Collect(#[from] CollectError),
    /// A realizer could not apply a change.
    #[error(transparent)]
    Realize(#[from] RealizeError),
    /// A state store failed.
    #[error(transparent)]
    State(#[from] StateError),
    /// The job list could not be fetched.
    #[error(transparent)]
    Fetch(#[from] FetchError),
    /// A scaling cycle failed.
    #[error(transparent)]
    Cycle(#[from] AutoscalerError),
    /// An option's value is invalid.
    #[error(transparent)]
    Options(#[from] OptionsError),
    /// A plugin failed.
    #[error(transparent)]
    Plugin(#[from] PluginError),
}

/// `Result` with [`Error`] as the default error type (as sqlx's `Result`); name another error
/// as the second parameter: `Result<(), CollectError>`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    /// A platform's error type, as a platform would define it.
    #[derive(Debug, thiserror::Error)]
    #[error("deployment API answered 503")]
    struct DeployApiError;

    #[test]
    fn every_port_keeps_the_platforms_error_as_its_source() {
        let errors: [Error; 4] = [
            CollectError::platform(DeployApiError).into(),
            RealizeError::platform(DeployApiError).into(),
            StateError::platform("flush", DeployApiError).into(),
            FetchError::platform(DeployApiError).into(),
        ];
        let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            messages,
            [
                "metric collection failed: deployment API answered 503",
                "could not rescale: deployment API answered 503",
                "state store error during flush: deployment API answered 503",
                "could not fetch the job list: deployment API answered 503",
            ]
        );
        for error in &errors {
            let cause = error.source().and_then(|cause| cause.downcast_ref::<DeployApiError>());
            assert!(cause.is_some(), "{error:?} lost its cause");
        }
    }

    #[test]
    fn existing_variants_keep_their_messages_and_have_no_cause() {
        let error: Error = CollectError::Failed("no vertices".to_owned()).into();
        assert_eq!(error.to_string(), "metric collection failed: no vertices");
        assert!(error.source().is_none());
        let error: Error = RealizeError::Refused("400".to_owned()).into();
        assert_eq!(error.to_string(), "the platform refused the rescale: 400");
    }
}
