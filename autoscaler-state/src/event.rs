//! Event handlers that keep events, readable back per job: in memory or in the database's
//! `t_flink_autoscaler_event_handler` table, with the reference's interval deduplication.

use crate::db::{Db, EventRow, StateUrl, StoreOptions};
use async_trait::async_trait;
use autoscaler_core::JobAutoScalerContext;
use autoscaler_core::{
    AutoScalerEventHandler, EventType, SCALING_REPORT_KEY, SCALING_REPORT_REASON,
    SCALING_SUMMARY_HEADER_SCALING_EXECUTION_ENABLED, ScalingReport, parallelism_hash_code,
};
use autoscaler_core::{Clock, SystemClock};
use autoscaler_core::{StateError, StateResult};
use chrono::{DateTime, Utc};
use std::fmt::{self, Display};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// One stored event (a row of `t_flink_autoscaler_event_handler`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEvent {
    /// Row id, increasing in insertion order.
    pub id: i64,
    /// When the first occurrence was stored; the dedup interval is anchored here.
    pub create_time: DateTime<Utc>,
    /// When the last occurrence was stored.
    pub update_time: DateTime<Utc>,
    /// The job key's string form.
    pub job_key: String,
    /// The event reason (`ScalingReport`, `AutoscalerError`, ...).
    pub reason: String,
    /// `Normal` or `Warning`.
    pub event_type: EventType,
    /// The message of the last occurrence.
    pub message: String,
    /// How many occurrences this row stands for.
    pub count: u32,
    /// The dedup identity, [`event_key`] of (job, type, reason, message key or message).
    pub event_key: String,
}

/// The stable dedup key of an event: 64-bit FNV-1a over the length-prefixed fields, in hex.
///
/// The reference hashes with Java's `Objects.hash`, whose enum part changes between JVM runs, so its
/// dedup forgets events written before a restart; this key is the same in every process and release.
pub fn event_key(job_key: &str, event_type: EventType, reason: &str, message_key_or_message: &str) -> String {
    let mut hash = Fnv1a64::default();
    for field in [job_key, &event_type.to_string(), reason, message_key_or_message] {
        // The length prefix keeps ("ab","c") and ("a","bc") apart.
        hash.write(&(field.len() as u64).to_le_bytes());
        hash.write(field.as_bytes());
    }
    format!("{:016x}", hash.0)
}

struct Fnv1a64(u64);

impl Default for Fnv1a64 {
    fn default() -> Self {
        Fnv1a64(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv1a64 {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

#[derive(Debug, Default)]
struct MemoryEvents {
    next_id: i64,
    events: Vec<StoredEvent>,
}

enum EventBackend {
    Memory(Mutex<MemoryEvents>),
    Database(Box<Db>),
}

/// An event handler storing every event (FLIP-334's JDBC event handler, over any backend).
///
/// `handle_event` with `interval = None` always adds a row; with an interval it finds the newest row
/// with the same job, reason and [`event_key`], and if that row was *created* less than `interval`
/// ago it bumps the count and replaces the message, else it adds a row. A scaling report that was
/// executed is never deduplicated; one that was not is deduplicated by its parallelism hash. Events
/// are also logged through `tracing`; a failure to store one is logged and otherwise ignored.
pub struct AnyEventHandler {
    backend: EventBackend,
    url: StateUrl,
    clock: Arc<dyn Clock>,
}

impl fmt::Debug for AnyEventHandler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnyEventHandler")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl AnyEventHandler {
    /// A handler keeping events in memory.
    pub fn in_memory() -> Self {
        AnyEventHandler {
            backend: EventBackend::Memory(Mutex::default()),
            url: StateUrl::Memory,
            clock: Arc::new(SystemClock),
        }
    }

    /// Opens the handler at `url` (same URLs as the state store) with default options.
    pub async fn open(url: &str) -> StateResult<Self> {
        Self::open_with(url, &StoreOptions::default()).await
    }

    /// Opens the handler at `url` with `options`.
    pub async fn open_with(url: &str, options: &StoreOptions) -> StateResult<Self> {
        let url: StateUrl = url.parse()?;
        if url == StateUrl::Memory {
            return Ok(Self::in_memory());
        }
        let db = Db::connect(&url, options).await?;
        Ok(AnyEventHandler {
            backend: EventBackend::Database(Box::new(db)),
            url,
            clock: Arc::new(SystemClock),
        })
    }

    /// Replaces the clock events are stamped with (the core's [`Clock`], as the cycle's).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Where events are kept (password redacted).
    pub fn url(&self) -> &StateUrl {
        &self.url
    }

    /// Every stored event of the job whose key's string form is `job_key`, oldest first.
    pub async fn events(&self, job_key: &str) -> StateResult<Vec<StoredEvent>> {
        match &self.backend {
            EventBackend::Memory(events) => {
                let events = events.lock().unwrap_or_else(PoisonError::into_inner);
                Ok(events.events.iter().filter(|e| e.job_key == job_key).cloned().collect())
            }
            EventBackend::Database(db) => db
                .list_events(job_key)
                .await?
                .into_iter()
                .map(|row| stored_event(job_key, row))
                .collect(),
        }
    }

    /// Deletes every event created before `now - ttl` (the reference's TTL cleaner, run on demand);
    /// returns how many were deleted.
    pub async fn delete_expired(&self, ttl: Duration) -> StateResult<u64> {
        let cutoff = autoscaler_metrics::time::sub_saturating(self.clock.now(), ttl);
        match &self.backend {
            EventBackend::Memory(events) => {
                let mut events = events.lock().unwrap_or_else(PoisonError::into_inner);
                let before = events.events.len();
                events.events.retain(|e| e.create_time >= cutoff);
                Ok((before - events.events.len()) as u64)
            }
            EventBackend::Database(db) => db.delete_events_before(cutoff).await,
        }
    }

    /// Starts the reference's TTL cleaner: every `period` (the reference: daily, first run after one
    /// period), deletes events created more than `ttl` ago. Errors are logged. Abort the returned
    /// task to stop it.
    pub fn spawn_ttl_cleaner(self: Arc<Self>, ttl: Duration, period: Duration) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let now = tokio::time::Instant::now();
            // A period too long to add is as good as never (tokio's own far future is 30 years).
            let first = now
                .checked_add(period)
                .unwrap_or_else(|| now + Duration::from_secs(30 * 365 * 86_400));
            let mut ticks = tokio::time::interval_at(first, period);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                match self.delete_expired(ttl).await {
                    Ok(deleted) => tracing::info!(deleted, "deleted expired autoscaler events"),
                    Err(error) => tracing::error!(%error, "could not delete expired autoscaler events"),
                }
            }
        })
    }

    /// Closes the database pool, if any.
    pub async fn close(&self) {
        if let EventBackend::Database(db) = &self.backend {
            db.close().await;
        }
    }

    /// Stores one event with the dedup rule; the trait method logs what this returns.
    async fn store_event(
        &self,
        job_key: &str,
        event_type: EventType,
        reason: &str,
        message: &str,
        message_key: Option<&str>,
        interval: Option<Duration>,
    ) -> StateResult<()> {
        let key = event_key(job_key, event_type, reason, message_key.unwrap_or(message));
        let now = self.clock.now();
        // Dedup window anchored at the newest matching row's create_time (reference JdbcAutoScalerEventHandler).
        let within = |created: DateTime<Utc>| match interval {
            Some(interval) => created > autoscaler_metrics::time::sub_saturating(now, interval),
            None => false,
        };
        match &self.backend {
            EventBackend::Memory(events) => {
                let mut events = events.lock().unwrap_or_else(PoisonError::into_inner);
                let latest = events
                    .events
                    .iter_mut()
                    .rev()
                    .find(|e| e.job_key == job_key && e.reason == reason && e.event_key == key);
                match latest {
                    Some(event) if interval.is_some() && within(event.create_time) => {
                        event.message = message.to_owned();
                        event.update_time = now;
                        event.count += 1;
                    }
                    _ => {
                        events.next_id += 1;
                        let id = events.next_id;
                        events.events.push(StoredEvent {
                            id,
                            create_time: now,
                            update_time: now,
                            job_key: job_key.to_owned(),
                            reason: reason.to_owned(),
                            event_type,
                            message: message.to_owned(),
                            count: 1,
                            event_key: key,
                        });
                    }
                }
                Ok(())
            }
            EventBackend::Database(db) => {
                if interval.is_some()
                    && let Some((id, created)) = db.latest_event(job_key, reason, &key).await?
                    && within(created)
                {
                    return db.update_event(id, message, now).await;
                }
                db.insert_event(job_key, &event_type.to_string(), reason, message, &key, now)
                    .await
            }
        }
    }
}

fn stored_event(job_key: &str, row: EventRow) -> StateResult<StoredEvent> {
    let event_type = match row.event_type.as_str() {
        "Normal" => EventType::Normal,
        "Warning" => EventType::Warning,
        other => {
            return Err(StateError::Serialization {
                state_type: "event",
                message: format!("event {} has unknown event_type `{other}`", row.id),
            });
        }
    };
    Ok(StoredEvent {
        id: row.id,
        create_time: row.create_time,
        update_time: row.update_time,
        job_key: job_key.to_owned(),
        reason: row.reason,
        event_type,
        message: row.message,
        count: u32::try_from(row.event_count).unwrap_or(0),
        event_key: row.event_key,
    })
}

/// Opens the event handler at `url`: `memory`, `sqlite:PATH`, `postgres://...` or `mysql://...`.
pub async fn open_event_handler(url: &str) -> Result<AnyEventHandler, StateError> {
    AnyEventHandler::open(url).await
}

#[async_trait]
impl<K, Ctx> AutoScalerEventHandler<K, Ctx> for AnyEventHandler
where
    K: Display + Send + Sync,
    Ctx: JobAutoScalerContext<K>,
{
    async fn handle_event(
        &self,
        ctx: &Ctx,
        event_type: EventType,
        reason: &str,
        message: &str,
        message_key: Option<&str>,
        interval: Option<Duration>,
    ) {
        let job_key = ctx.job_key().to_string();
        match event_type {
            EventType::Normal => tracing::info!(job = %job_key, reason, message, "autoscaler event"),
            EventType::Warning => tracing::warn!(job = %job_key, reason, message, "autoscaler event"),
        }
        if let Err(error) = self
            .store_event(&job_key, event_type, reason, message, message_key, interval)
            .await
        {
            tracing::error!(job = %job_key, reason, %error, "could not store an autoscaler event");
        }
    }

    /// Decision records are not kept in the event table (the reference's events are).
    fn wants_decision_records(&self) -> bool {
        false
    }

    async fn handle_scaling_event(&self, ctx: &Ctx, report: &ScalingReport<'_>) {
        let (summaries, header, interval) = (report.summaries, report.header, report.interval);
        let report = report.message();
        if header.contains(SCALING_SUMMARY_HEADER_SCALING_EXECUTION_ENABLED) {
            // An executed scaling is always recorded (reference: interval null for this header).
            self.handle_event(
                ctx,
                EventType::Normal,
                SCALING_REPORT_REASON,
                &report,
                Some(SCALING_REPORT_KEY),
                None,
            )
            .await;
        } else {
            // An unchanged recommendation is recorded once per interval: keyed by the parallelisms.
            let key = parallelism_hash_code(summaries);
            self.handle_event(
                ctx,
                EventType::Normal,
                SCALING_REPORT_REASON,
                &report,
                Some(&key),
                Some(interval),
            )
            .await;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a64_matches_the_published_test_vectors() {
        let hash = |s: &str| {
            let mut h = Fnv1a64::default();
            h.write(s.as_bytes());
            h.0
        };
        assert_eq!(hash(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(hash("a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(hash("foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn event_key_is_stable_and_separates_fields() {
        let k = event_key("job", EventType::Normal, "ScalingReport", "ScalingExecutor");
        assert_eq!(k.len(), 16);
        assert_eq!(
            k,
            event_key("job", EventType::Normal, "ScalingReport", "ScalingExecutor")
        );
        assert_ne!(
            k,
            event_key("job", EventType::Warning, "ScalingReport", "ScalingExecutor")
        );
        assert_ne!(
            event_key("ab", EventType::Normal, "c", "m"),
            event_key("a", EventType::Normal, "bc", "m")
        );
    }
}
