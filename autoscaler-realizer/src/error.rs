//! The crate's errors in one enum ([`Error`]), for callers that want one type.

use crate::rest::RestError;
use crate::sources::SourceError;
use crate::yarn::YarnError;

/// Any error of `autoscaler-realizer`: a transparent wrapper of the failing part's error (its
/// `Display` and `source` are the wrapped error's). The FLIP-334 adapters return the core's
/// errors instead (`CollectError`, `RealizeError`, `FetchError`), keeping a [`RestError`] as
/// the cause where a REST call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A Flink REST call failed.
    #[error(transparent)]
    Rest(#[from] RestError),
    /// Finding the JobManager through YARN failed.
    #[error(transparent)]
    Yarn(#[from] YarnError),
    /// A job source is misconfigured.
    #[error(transparent)]
    Source(#[from] SourceError),
}

/// `Result` with [`Error`] as the default error type (as sqlx's `Result`).
pub type Result<T, E = Error> = std::result::Result<T, E>;
