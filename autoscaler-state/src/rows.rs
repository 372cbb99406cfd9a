//! The rows a flush writes and an event read returns: plain data shared by the cache, the event
//! handler and the databases, compiled whatever drivers are.

use autoscaler_core::StateError;
use chrono::{DateTime, Utc};

/// The `state_type` of a job's window index row: which generation of snapshot rows the
/// database holds (see [`crate::cache`]).
pub(crate) const WINDOW_INDEX: &str = "collectedMetricsIndex";

/// Every snapshot row of a window, encoded on demand.
pub(crate) type EncodeAll<'a> = dyn Fn() -> Result<Vec<(String, String)>, StateError> + Send + Sync + 'a;

/// What a flush writes for one job's metric window.
#[cfg_attr(
    not(any(feature = "sqlite", feature = "postgres", feature = "mysql")),
    allow(dead_code)
)]
pub(crate) enum WindowWrite<'a> {
    /// Delete every snapshot row and the index.
    Remove,
    /// Store the window: when the index row is still `expected_index`, write `added` and delete
    /// `trimmed`; otherwise replace every snapshot row by `all()`. Either way the index becomes
    /// `new_index`. The index row is locked first.
    Store {
        /// The index row this process last read or wrote; `None` when it knows of none.
        expected_index: Option<String>,
        /// The index row to write.
        new_index: String,
        /// Snapshot rows (`state_type`, value) the database does not hold yet.
        added: Vec<(String, String)>,
        /// `state_type`s of snapshot rows the window no longer holds.
        trimmed: Vec<String>,
        /// Every snapshot row of the window.
        all: Box<EncodeAll<'a>>,
    },
}

/// The writes of one job's flush.
pub(crate) struct JobWrites<'a> {
    /// The metric window's rows, if it changed.
    pub(crate) window: Option<WindowWrite<'a>>,
    /// Other rows to insert or update, (`state_type`, value) in `state_type` order.
    pub(crate) upserts: Vec<(&'static str, String)>,
    /// `state_type`s of rows to delete, in order.
    pub(crate) deletes: Vec<&'static str>,
}

/// One stored event row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EventRow {
    pub(crate) id: i64,
    pub(crate) create_time: DateTime<Utc>,
    pub(crate) update_time: DateTime<Utc>,
    pub(crate) reason: String,
    pub(crate) event_type: String,
    pub(crate) message: String,
    pub(crate) event_count: i32,
    pub(crate) event_key: String,
}

/// The writer of a fenced flush: the lease's owner and the epoch it was given.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(
    not(any(feature = "sqlite", feature = "postgres", feature = "mysql")),
    allow(dead_code)
)]
pub(crate) struct Fence<'a> {
    pub(crate) owner: &'a str,
    pub(crate) epoch: i64,
}
