//! The crate's errors in one enum ([`Error`]), for callers that want one type.

use crate::ScenarioError;
use crate::explain::ExplainError;
use crate::recording::RecordingError;
use crate::recording_replay::RecordingReplayError;

/// Any error of `autoscaler-replay`: a transparent wrapper of the failing step's error (its
/// `Display` and `source` are the wrapped error's, so the `replay` contract's messages are
/// unchanged).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A scenario does not parse (the message names the JSON path).
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    /// A recording cannot be read or written.
    #[error(transparent)]
    Recording(#[from] RecordingError),
    /// A recording cannot be replayed.
    #[error(transparent)]
    RecordingReplay(#[from] RecordingReplayError),
    /// A decision cannot be explained.
    #[error(transparent)]
    Explain(#[from] ExplainError),
}

/// `Result` with [`Error`] as the default error type (as sqlx's `Result`).
pub type Result<T, E = Error> = std::result::Result<T, E>;
