//! Group commit: the flushes of many jobs written in one transaction with a handful of statements.
//!
//! A flush that only adds to a known metric window and writes or deletes rows (what nearly every
//! cycle does) is handed to the store's group writer, a task that takes whatever flushes are
//! waiting (up to [`MAX_GROUP_JOBS`]; while flushes come in company, a group of fewer than half
//! that waits [`GATHER_DELAY`] for more first) and writes them in one transaction: one statement checks
//! every fenced job's lease, one locks every window index, then the rows of all the jobs are
//! upserted and deleted in batched statements. A commit, and each round trip to the database,
//! is shared by the group instead of paid by each job; with SQLite that also means one write
//! transaction instead of one per job.
//!
//! Each job keeps its own outcome: a job whose lease is no longer this replica's is refused
//! ([`StateError::Fenced`](autoscaler_core::StateError::Fenced)) and nothing of it is written, and a job whose window index another
//! process changed is handed back to be written on its own, as any such flush is (the whole
//! window again). When the group's transaction fails, every job of the group is handed back and
//! written on its own, so one job's bad row (a MySQL key too long, say) fails that job only.

use super::{Database, Dialect, Statements, text_column, with_retries};
use crate::rows::WINDOW_INDEX;
use chrono::{DateTime, Utc};
use foldhash::HashMapExt as _;
use sqlx::Connection as _;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::{mpsc, oneshot};

/// The most jobs one group commit writes: their rows (a snapshot, the index and now and then
/// another state each) fit one batched upsert.
pub(crate) const MAX_GROUP_JOBS: usize = 64;

/// How long a small group waits for more flushes before it is written.
const GATHER_DELAY: std::time::Duration = std::time::Duration::from_millis(2);

/// Flushes waiting for the group writer, at most; a flush finding the queue full waits.
const QUEUE_CAPACITY: usize = 1024;

/// One job's flush, owned so that it can wait in the queue.
#[derive(Debug)]
pub(crate) struct GroupedFlush {
    pub(crate) job_key: String,
    /// The lease owner and epoch the write must still hold.
    pub(crate) fence: Option<(String, i64)>,
    /// The window's rows, when it is stored on top of a known index.
    pub(crate) window: Option<GroupedWindow>,
    /// Other rows to insert or update, (`state_type`, value).
    pub(crate) upserts: Vec<(&'static str, String)>,
    /// `state_type`s of rows to delete.
    pub(crate) deletes: Vec<&'static str>,
}

/// A window stored on top of the index row this process last wrote.
#[derive(Debug)]
pub(crate) struct GroupedWindow {
    pub(crate) expected_index: String,
    pub(crate) new_index: String,
    pub(crate) added: Vec<(String, String)>,
    pub(crate) trimmed: Vec<String>,
}

/// What became of a grouped flush.
#[derive(Debug)]
pub(crate) enum GroupOutcome {
    /// Committed with its group.
    Written,
    /// Refused: the job's lease is not the writer's any more. Nothing of it was written.
    Fenced { owner: String, epoch: i64 },
    /// Not written: the caller writes it on its own (its window index changed, or the group's
    /// transaction failed).
    Alone(GroupedFlush),
    /// The writer stopped before answering (its runtime shut down).
    Lost,
}

struct Queued {
    flush: GroupedFlush,
    reply: oneshot::Sender<GroupOutcome>,
}

/// The handle of a database's group writer; the task starts with the first flush (on the runtime
/// of that flush) and again if that runtime went away.
#[derive(Debug, Default)]
pub(crate) struct GroupWriter {
    sender: Mutex<Option<mpsc::Sender<Queued>>>,
    /// Set by [`GroupWriter::close`]: no writer starts again.
    closed: AtomicBool,
}

impl GroupWriter {
    /// Hands `flush` to the group writer and waits for its outcome ([`GroupOutcome::Alone`] at
    /// once when no writer could take it).
    pub(crate) async fn write(
        &self,
        database: &Database,
        statements: &Arc<Statements>,
        store: &'static str,
        flush: GroupedFlush,
    ) -> GroupOutcome {
        let Some(sender) = self.sender(database, statements, store) else {
            return GroupOutcome::Alone(flush);
        };
        let (reply, outcome) = oneshot::channel();
        if let Err(mpsc::error::SendError(queued)) = sender.send(Queued { flush, reply }).await {
            return GroupOutcome::Alone(queued.flush);
        }
        // The writer went away with the flush (its runtime shut down): whether it was written
        // is not known, and the caller's cache still holds the changes for the next flush.
        outcome.await.unwrap_or(GroupOutcome::Lost)
    }

    /// The running writer's queue, starting a writer if none runs; `None` once closed.
    fn sender(
        &self,
        database: &Database,
        statements: &Arc<Statements>,
        store: &'static str,
    ) -> Option<mpsc::Sender<Queued>> {
        let mut slot = self.sender.lock().unwrap_or_else(PoisonError::into_inner);
        if self.closed.load(Ordering::Acquire) {
            return None;
        }
        match &*slot {
            Some(sender) if !sender.is_closed() => Some(sender.clone()),
            _ => {
                let (sender, receiver) = mpsc::channel(QUEUE_CAPACITY);
                tokio::spawn(run(database.clone(), Arc::clone(statements), receiver, store));
                *slot = Some(sender.clone());
                Some(sender)
            }
        }
    }

    /// Stops taking flushes (later ones are written on their own); the writer ends once the
    /// queued ones are written.
    pub(crate) fn close(&self) {
        let mut slot = self.sender.lock().unwrap_or_else(PoisonError::into_inner);
        self.closed.store(true, Ordering::Release);
        slot.take();
    }
}

/// The group writer: takes the waiting flushes, writes them together, answers each. `store`
/// labels [`STATE_FLUSH_GROUP_JOBS`](crate::STATE_FLUSH_GROUP_JOBS).
async fn run(
    database: Database,
    statements: Arc<Statements>,
    mut receiver: mpsc::Receiver<Queued>,
    store: &'static str,
) {
    let mut group = Vec::with_capacity(MAX_GROUP_JOBS);
    let mut previous = 0;
    let kept = KeptConnection::default();
    while receiver.recv_many(&mut group, MAX_GROUP_JOBS).await > 0 {
        if previous > 1 && group.len() < MAX_GROUP_JOBS / 2 {
            // The cycles of a control loop flush within moments of each other: a short wait lets
            // them join this group rather than each start one (a commit delay, as databases have).
            // Only while flushes come in company: a lone job's flush is written at once.
            tokio::time::sleep(GATHER_DELAY).await;
            while group.len() < MAX_GROUP_JOBS {
                match receiver.try_recv() {
                    Ok(queued) => group.push(queued),
                    Err(_) => break,
                }
            }
        }
        previous = group.len();
        metrics::histogram!(crate::STATE_FLUSH_GROUP_JOBS, "store" => store).record(group.len() as f64);
        let flushes: Vec<&GroupedFlush> = group.iter().map(|q| &q.flush).collect();
        let outcomes = write_with_retries(&database, &statements, &kept, &flushes).await;
        drop(flushes);
        for (queued, outcome) in group.drain(..).zip(outcomes) {
            let outcome = match outcome {
                Some(Verdict::Written) => GroupOutcome::Written,
                Some(Verdict::Fenced) => match queued.flush.fence {
                    Some((owner, epoch)) => GroupOutcome::Fenced { owner, epoch },
                    None => GroupOutcome::Alone(queued.flush),
                },
                Some(Verdict::IndexChanged) | None => GroupOutcome::Alone(queued.flush),
            };
            // A flush whose caller stopped waiting is dropped with its answer.
            let _ = queued.reply.send(outcome);
        }
    }
}

/// One job's verdict in a committed group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Written,
    Fenced,
    IndexChanged,
}

/// The group's transaction, retried while the database aborts it; `None` for every job when it
/// failed (each is then written on its own).
async fn write_with_retries(
    database: &Database,
    statements: &Statements,
    kept: &KeptConnection,
    flushes: &[&GroupedFlush],
) -> Vec<Option<Verdict>> {
    let writing = format!("a group of {} flushes", flushes.len());
    match with_retries(&writing, || write_group(database, statements, kept, flushes)).await {
        Ok(verdicts) => verdicts.into_iter().map(Some).collect(),
        Err(e) => {
            // Not only a log line: each job's own write then fails or succeeds in its flush.
            tracing::debug!(jobs = flushes.len(), error = %e, "a group of state flushes failed; writing each job on its own");
            vec![None; flushes.len()]
        }
    }
}

/// Writes the group in one transaction (see the module docs); the verdict of each job.
async fn write_group(
    database: &Database,
    statements: &Statements,
    kept: &KeptConnection,
    flushes: &[&GroupedFlush],
) -> Result<Vec<Verdict>, sqlx::Error> {
    let now = Stamp::new(Utc::now());
    let mut verdicts = vec![Verdict::Written; flushes.len()];
    with_pool!(database, pool => {
        // A failed attempt drops the connection (back to the pool, which checks it); the next
        // one acquires another.
        let mut conn = match kept.take(pool) {
            Some(conn) => conn,
            None => pool.acquire().await?,
        };
        let mut tx = conn.begin().await?;
        // The lease rows first, as a flush of one job does (and as a taker does: only lease rows).
        let mut by_owner: foldhash::HashMap<&str, Vec<usize>> = foldhash::HashMap::default();
        for (i, flush) in flushes.iter().enumerate() {
            if let Some((owner, _)) = &flush.fence {
                by_owner.entry(owner.as_str()).or_default().push(i);
            }
        }
        for (owner, jobs) in by_owner {
            let sql = statements.leases.fence_many(jobs.len());
            let mut query = sqlx::query(&sql).bind(owner);
            for &i in &jobs {
                let epoch = flushes[i].fence.as_ref().map_or(0, |(_, epoch)| *epoch);
                query = query.bind(flushes[i].job_key.as_str()).bind(epoch);
            }
            let held = query
                .fetch_all(&mut *tx)
                .await?
                .iter()
                .map(|row| text_column(row, 0))
                .collect::<Result<HashSet<String>, _>>()?;
            for i in jobs {
                if !held.contains(&flushes[i].job_key) {
                    verdicts[i] = Verdict::Fenced;
                }
            }
        }
        // Then every window index, locked (created if missing) and read.
        let windowed: Vec<usize> = (0..flushes.len())
            .filter(|&i| verdicts[i] == Verdict::Written && flushes[i].window.is_some())
            .collect();
        if !windowed.is_empty() {
            let sql = statements.lock_window_indexes(windowed.len());
            let mut lock = sqlx::query(&sql);
            for &i in &windowed {
                lock = lock.bind(now.clone()).bind(now.clone()).bind(flushes[i].job_key.as_str()).bind(WINDOW_INDEX);
            }
            let rows = if statements.lock_returns_index {
                lock.fetch_all(&mut *tx).await?
            } else {
                lock.execute(&mut *tx).await?;
                let sql = statements.read_window_indexes(windowed.len());
                let mut read = sqlx::query(&sql).bind(WINDOW_INDEX);
                for &i in &windowed {
                    read = read.bind(flushes[i].job_key.as_str());
                }
                read.fetch_all(&mut *tx).await?
            };
            let mut current = foldhash::HashMap::with_capacity(rows.len());
            for row in &rows {
                current.insert(text_column(row, 0)?, text_column(row, 1)?);
            }
            for i in windowed {
                let expected = flushes[i].window.as_ref().map(|w| w.expected_index.as_str());
                if current.get(&flushes[i].job_key).map(String::as_str) != expected {
                    verdicts[i] = Verdict::IndexChanged;
                }
            }
        }
        // The rows of the jobs still in: upserts (window rows, index, other states), then deletes.
        let mut upserts: Vec<(&str, &str, &str)> = Vec::new();
        let mut deletes: Vec<(&str, &str)> = Vec::new();
        for (flush, verdict) in flushes.iter().zip(&verdicts) {
            if *verdict != Verdict::Written {
                continue;
            }
            let key = flush.job_key.as_str();
            if let Some(window) = &flush.window {
                upserts.extend(window.added.iter().map(|(t, v)| (key, t.as_str(), v.as_str())));
                upserts.push((key, WINDOW_INDEX, window.new_index.as_str()));
                deletes.extend(window.trimmed.iter().map(|t| (key, t.as_str())));
            }
            upserts.extend(flush.upserts.iter().map(|(t, v)| (key, *t, v.as_str())));
            deletes.extend(flush.deletes.iter().map(|t| (key, *t)));
        }
        for rows in upserts.chunks(super::MAX_BATCH_ROWS) {
            let sql = statements.upsert_rows(rows.len());
            let mut query = sqlx::query(&sql);
            for &(key, state_type, value) in rows {
                query = query.bind(now.clone()).bind(now.clone()).bind(key).bind(state_type).bind(value);
            }
            query.execute(&mut *tx).await?;
        }
        for rows in deletes.chunks(super::MAX_BATCH_ROWS) {
            let sql = statements.delete_keyed_rows(rows.len());
            let mut query = sqlx::query(&sql);
            for &(key, state_type) in rows {
                query = query.bind(key).bind(state_type);
            }
            query.execute(&mut *tx).await?;
        }
        tx.commit().await?;
        kept.keep(statements.dialect, pool, conn);
        Ok(verdicts)
    })
}

/// The connection the group writer keeps from one group to the next, on SQLite.
///
/// A SQLite connection drops its whole page cache whenever another connection has written the
/// database since its last transaction, and the pool hands its idle connections out in turn: a
/// group written on whichever connection came next found a cold cache and read the pages it
/// touched again, and every connection prepared the batched statements for itself. On the
/// writer's own connection the pages of the last groups stay cached. Kept only when the pool
/// has room for another connection beside it (a pool of one, as for `:memory:`, would
/// otherwise be the writer's alone), and given back when the writer stops. PostgreSQL and
/// MySQL connections go back to the pool after each group: keeping one measured no gain there.
///
/// The slot holds a `PoolConnection` of the store's one driver, type-erased so that the
/// driver-generic body of [`write_group`] can take it back out.
#[derive(Default)]
struct KeptConnection(Mutex<Option<Box<dyn std::any::Any + Send>>>);

impl KeptConnection {
    /// The kept connection, if there is one (of `pool`'s driver: `pool` only names the type).
    fn take<DB: sqlx::Database>(&self, _pool: &sqlx::Pool<DB>) -> Option<sqlx::pool::PoolConnection<DB>> {
        let kept = self.0.lock().unwrap_or_else(PoisonError::into_inner).take()?;
        kept.downcast().ok().map(|conn| *conn)
    }

    /// Keeps `conn` for the next group if the database is SQLite and `pool` can spare it;
    /// otherwise it goes back to the pool.
    fn keep<DB: sqlx::Database>(&self, dialect: Dialect, pool: &sqlx::Pool<DB>, conn: sqlx::pool::PoolConnection<DB>) {
        if dialect == Dialect::Sqlite && pool.options().get_max_connections() > 1 && !pool.is_closed() {
            *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(Box::new(conn));
        }
    }
}

#[cfg(all(test, feature = "sqlite"))]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::db::{Db, StateUrl, StoreOptions};
    use std::time::Duration;

    // The writer writes group after group on one connection (a temporary table, which only its
    // own connection sees, survives from one group to the next), unless the pool holds a single
    // connection; and the pool still closes.
    #[tokio::test]
    async fn the_writer_keeps_its_connection_when_the_pool_has_room() {
        let dir = tempfile::tempdir().unwrap();
        let file = crate::db::tests::sqlite_file(dir.path(), "kept.db");
        let memory: StateUrl = "sqlite::memory:".parse().unwrap();
        for (url, keeps) in [(file, true), (memory, false)] {
            let db = Db::connect(&url, &StoreOptions::default()).await.unwrap();
            let pool = crate::db::tests::sqlite_pool(&db);
            let kept = KeptConnection::default();
            write_group(&db.database, &db.statements, &kept, &[]).await.unwrap();
            match kept.take(pool) {
                Some(mut conn) => {
                    sqlx::query("CREATE TEMP TABLE mark (x INTEGER)")
                        .execute(&mut *conn)
                        .await
                        .unwrap();
                    kept.keep(Dialect::Sqlite, pool, conn);
                }
                None => assert!(!keeps, "{url}: nothing kept"),
            }
            for _ in 0..3 {
                write_group(&db.database, &db.statements, &kept, &[]).await.unwrap();
                let held = kept.0.lock().unwrap_or_else(PoisonError::into_inner).is_some();
                assert_eq!(held, keeps, "{url}");
            }
            if let Some(mut conn) = kept.take(pool) {
                assert!(keeps, "{url}: a pool of one is not kept");
                sqlx::query("SELECT x FROM temp.mark")
                    .execute(&mut *conn)
                    .await
                    .unwrap();
            }
            tokio::time::timeout(Duration::from_secs(10), db.close()).await.unwrap();
        }
    }
}

/// The time a group writes into its rows (their update and creation times), bound twice per row.
/// SQLite keeps it as text, which sqlx formats at every bind (about 700 instructions each); it is
/// formatted here once per group, as sqlx formats it. The other databases bind the time itself.
#[derive(Debug, Clone)]
struct Stamp {
    /// The time, as the other databases bind it.
    #[cfg(any(feature = "postgres", feature = "mysql"))]
    at: DateTime<Utc>,
    /// The time as sqlx's SQLite encoding of a `DateTime<Utc>` writes it.
    #[cfg(feature = "sqlite")]
    text: String,
}

impl Stamp {
    fn new(at: DateTime<Utc>) -> Self {
        Self {
            #[cfg(any(feature = "postgres", feature = "mysql"))]
            at,
            #[cfg(feature = "sqlite")]
            text: at.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, false),
        }
    }
}

/// [`Stamp`] binds as `DateTime<Utc>` does on `$db`.
macro_rules! stamp_type {
    ($db:ty) => {
        impl sqlx::Type<$db> for Stamp {
            fn type_info() -> <$db as sqlx::Database>::TypeInfo {
                <DateTime<Utc> as sqlx::Type<$db>>::type_info()
            }

            fn compatible(ty: &<$db as sqlx::Database>::TypeInfo) -> bool {
                <DateTime<Utc> as sqlx::Type<$db>>::compatible(ty)
            }
        }
    };
}

#[cfg(feature = "sqlite")]
stamp_type!(sqlx::Sqlite);
#[cfg(feature = "postgres")]
stamp_type!(sqlx::Postgres);
#[cfg(feature = "mysql")]
stamp_type!(sqlx::MySql);

#[cfg(feature = "sqlite")]
impl<'q> sqlx::Encode<'q, sqlx::Sqlite> for Stamp {
    fn encode_by_ref(
        &self,
        buf: &mut <sqlx::Sqlite as sqlx::Database>::ArgumentBuffer<'q>,
    ) -> Result<sqlx::encode::IsNull, sqlx::error::BoxDynError> {
        sqlx::Encode::<sqlx::Sqlite>::encode(self.text.clone(), buf)
    }
}

/// [`Stamp`] encodes as its time on `$db`.
#[cfg(any(feature = "postgres", feature = "mysql"))]
macro_rules! stamp_as_time {
    ($db:ty) => {
        impl<'q> sqlx::Encode<'q, $db> for Stamp {
            fn encode_by_ref(
                &self,
                buf: &mut <$db as sqlx::Database>::ArgumentBuffer<'q>,
            ) -> Result<sqlx::encode::IsNull, sqlx::error::BoxDynError> {
                <DateTime<Utc> as sqlx::Encode<'q, $db>>::encode_by_ref(&self.at, buf)
            }

            fn produces(&self) -> Option<<$db as sqlx::Database>::TypeInfo> {
                <DateTime<Utc> as sqlx::Encode<'q, $db>>::produces(&self.at)
            }

            fn size_hint(&self) -> usize {
                <DateTime<Utc> as sqlx::Encode<'q, $db>>::size_hint(&self.at)
            }
        }
    };
}

#[cfg(feature = "postgres")]
stamp_as_time!(sqlx::Postgres);
#[cfg(feature = "mysql")]
stamp_as_time!(sqlx::MySql);

#[cfg(all(test, feature = "sqlite"))]
mod stamp_tests {
    use super::*;

    /// On SQLite a stamp is stored as the text sqlx writes for its time, so rows written by a
    /// group and by a single flush compare and sort alike.
    #[test]
    fn a_stamp_binds_on_sqlite_as_its_time_does() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async {
            let pool = sqlx::SqlitePool::connect("sqlite::memory:").await.expect("SQLite");
            for at in [
                Utc::now(),
                DateTime::from_timestamp(1_700_000_000, 0).expect("a time"),
                DateTime::from_timestamp(1_700_000_000, 120_000_000).expect("a time"),
                DateTime::from_timestamp(1_700_000_000, 123_456_789).expect("a time"),
            ] {
                let (by_stamp, by_time): (String, String) = sqlx::query_as("SELECT ?1, ?2")
                    .bind(Stamp::new(at))
                    .bind(at)
                    .fetch_one(&pool)
                    .await
                    .expect("a row");
                assert_eq!(by_stamp, by_time);
            }
        });
    }
}
