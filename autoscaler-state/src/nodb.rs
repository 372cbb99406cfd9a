//! The database of a build without any driver feature (`sqlite`, `postgres`, `mysql`): a type
//! with no value, so the stores keep their one shape and every database path is statically
//! unreachable. Opening a database URL fails naming the feature that would open it.

pub(crate) use crate::rows::{EventRow, Fence, JobWrites, WINDOW_INDEX, WindowWrite};
use crate::url::missing_driver;
pub(crate) use crate::url::{StateUrl, StoreOptions};
use autoscaler_core::StateError;
use chrono::{DateTime, Utc};

/// A connected database: none can be, without a driver.
#[derive(Debug)]
pub(crate) enum Db {}

#[allow(clippy::unused_async)] // the signatures of the real `Db`'s methods
impl Db {
    /// Always the missing-driver error (the stores handle `memory` without a database).
    pub(crate) async fn connect(url: &StateUrl, _options: &StoreOptions) -> Result<Db, StateError> {
        Err(missing_driver(url))
    }

    pub(crate) async fn load_states(&self, _job_key: &str) -> Result<Vec<(String, String)>, StateError> {
        match *self {}
    }

    pub(crate) async fn write_states(
        &self,
        _job_key: &str,
        _writes: JobWrites<'_>,
        _fence: Option<Fence<'_>>,
    ) -> Result<(), StateError> {
        match *self {}
    }

    pub(crate) async fn insert_event(
        &self,
        _job_key: &str,
        _event_type: &str,
        _reason: &str,
        _message: &str,
        _event_key: &str,
        _now: DateTime<Utc>,
    ) -> Result<(), StateError> {
        match *self {}
    }

    pub(crate) async fn latest_event(
        &self,
        _job_key: &str,
        _reason: &str,
        _event_key: &str,
    ) -> Result<Option<(i64, DateTime<Utc>)>, StateError> {
        match *self {}
    }

    pub(crate) async fn update_event(&self, _id: i64, _message: &str, _now: DateTime<Utc>) -> Result<(), StateError> {
        match *self {}
    }

    pub(crate) async fn list_events(&self, _job_key: &str) -> Result<Vec<EventRow>, StateError> {
        match *self {}
    }

    pub(crate) async fn delete_events_before(&self, _cutoff: DateTime<Utc>) -> Result<u64, StateError> {
        match *self {}
    }

    pub(crate) async fn close(&self) {
        match *self {}
    }
}
