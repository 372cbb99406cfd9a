//! The databases behind the stores: pools, the embedded migrations and every SQL statement, one
//! dialect per database. Compiled with at least one driver feature (`sqlite`, `postgres`,
//! `mysql`), each driver's pool only with its own; without any, `nodb.rs` stands in.

#[cfg(feature = "mysql")]
use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};
#[cfg(feature = "postgres")]
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
#[cfg(feature = "sqlite")]
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous};

pub(crate) use crate::rows::{EventRow, Fence, JobWrites, WINDOW_INDEX, WindowWrite};
use crate::url::missing_driver;
#[cfg(test)]
use crate::url::redact_password;
pub(crate) use crate::url::{StateUrl, StoreOptions};
use autoscaler_core::StateError;
use chrono::{DateTime, Utc};
use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::{Connection as _, Row as _};
use std::borrow::Cow;
use std::fmt;
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "mysql"))]
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

/// The embedded schema, one file per dialect (version 1 of our migrations).
const SQLITE_SCHEMA: &str = include_str!("../migrations/sqlite/0001_autoscaler_tables.sql");
const POSTGRES_SCHEMA: &str = include_str!("../migrations/postgres/0001_autoscaler_tables.sql");
const MYSQL_SCHEMA: &str = include_str!("../migrations/mysql/0001_autoscaler_tables.sql");
/// Version 2: the replica and job lease tables of several replicas on one database.
const SQLITE_LEASES: &str = include_str!("../migrations/sqlite/0002_job_leases.sql");
const POSTGRES_LEASES: &str = include_str!("../migrations/postgres/0002_job_leases.sql");
const MYSQL_LEASES: &str = include_str!("../migrations/mysql/0002_job_leases.sql");

/// sqlx migration version of the v1 schema: timestamp-style, so it does not collide with another
/// sqlx application's `1` in a shared database.
const SCHEMA_V1_VERSION: i64 = 20261201000001;
/// sqlx migration version of the lease tables.
const SCHEMA_V2_VERSION: i64 = 20261205000001;

/// SQL dialects differ in placeholders, upsert syntax and DDL. Every dialect's statements are
/// kept whatever drivers are compiled (they are plain text, and tested as such).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    not(all(feature = "sqlite", feature = "postgres", feature = "mysql")),
    allow(dead_code)
)]
pub(crate) enum Dialect {
    Sqlite,
    Postgres,
    MySql,
}

/// A connected database.
#[derive(Debug, Clone)]
pub(crate) enum Database {
    #[cfg(feature = "sqlite")]
    Sqlite(SqlitePool),
    #[cfg(feature = "postgres")]
    Postgres(PgPool),
    #[cfg(feature = "mysql")]
    MySql(MySqlPool),
}

/// The statements, with the dialect's placeholders.
#[derive(Debug)]
pub(crate) struct Statements {
    dialect: Dialect,
    load_states: String,
    /// The upsert of one row, with `?` placeholders ([`Statements::upsert_rows`] repeats its row).
    upsert_state_template: &'static str,
    lock_window_index: String,
    /// [`Statements::lock_window_index`] before placeholders, for one row.
    lock_window_index_template: &'static str,
    /// Whether [`Statements::lock_window_index`] returns the index's value (else it is read after).
    lock_returns_index: bool,
    read_window_index: String,
    delete_window_rows: String,
    insert_event: String,
    latest_event: String,
    update_event: String,
    list_events: String,
    delete_events_before: String,
    /// The replica and lease statements.
    pub(crate) leases: LeaseStatements,
}

impl Statements {
    fn new(dialect: Dialect) -> Self {
        let upsert_state = match dialect {
            // Upserts, not the reference's INSERT-or-UPDATE by cached state: a row another process
            // created meanwhile is overwritten instead of failing on the unique index.
            Dialect::Sqlite | Dialect::Postgres => {
                "INSERT INTO t_flink_autoscaler_state_store \
                 (create_time, update_time, job_key, state_type, state_value) VALUES (?, ?, ?, ?, ?) \
                 ON CONFLICT (job_key, state_type) DO UPDATE \
                 SET update_time = excluded.update_time, state_value = excluded.state_value"
            }
            Dialect::MySql => {
                "INSERT INTO t_flink_autoscaler_state_store \
                 (create_time, update_time, job_key, state_type, state_value) VALUES (?, ?, ?, ?, ?) \
                 ON DUPLICATE KEY UPDATE update_time = VALUES(update_time), state_value = VALUES(state_value)"
            }
        };
        let lock_window_index = match dialect {
            // Returning the row's value: the lock and the read of the index in one round trip.
            Dialect::Sqlite | Dialect::Postgres => {
                "INSERT INTO t_flink_autoscaler_state_store \
                 (create_time, update_time, job_key, state_type, state_value) VALUES (?, ?, ?, ?, '') \
                 ON CONFLICT (job_key, state_type) DO UPDATE \
                 SET state_value = t_flink_autoscaler_state_store.state_value RETURNING state_value"
            }
            Dialect::MySql => {
                "INSERT INTO t_flink_autoscaler_state_store \
                 (create_time, update_time, job_key, state_type, state_value) VALUES (?, ?, ?, ?, '') \
                 ON DUPLICATE KEY UPDATE state_value = state_value"
            }
        };
        let p = |sql: &str| placeholders(dialect, sql);
        Statements {
            dialect,
            upsert_state_template: upsert_state,
            load_states: p("SELECT state_type, state_value FROM t_flink_autoscaler_state_store WHERE job_key = ?"),
            // Creates or locks the job's window index row, changing nothing: whoever writes a
            // job's window holds this row first, so two writers of one job take turns.
            lock_window_index: p(lock_window_index),
            lock_window_index_template: lock_window_index,
            lock_returns_index: dialect != Dialect::MySql,
            read_window_index: p(
                "SELECT state_value FROM t_flink_autoscaler_state_store WHERE job_key = ? AND state_type = ?",
            ),
            // The slot rows, and the rows keyed by instant of the release before slots.
            delete_window_rows: p("DELETE FROM t_flink_autoscaler_state_store WHERE job_key = ? \
                 AND (state_type LIKE 'collectedMetrics#%' OR state_type LIKE 'collectedMetrics@%')"),
            insert_event: p("INSERT INTO t_flink_autoscaler_event_handler \
                 (create_time, update_time, job_key, reason, event_type, message, event_count, event_key) \
                 VALUES (?, ?, ?, ?, ?, ?, 1, ?)"),
            latest_event: p("SELECT id, create_time FROM t_flink_autoscaler_event_handler \
                 WHERE job_key = ? AND reason = ? AND event_key = ? ORDER BY id DESC LIMIT 1"),
            // `event_count + 1` in SQL so two processes updating the same row both count.
            update_event: p("UPDATE t_flink_autoscaler_event_handler \
                 SET message = ?, update_time = ?, event_count = event_count + 1 WHERE id = ?"),
            list_events: p(
                "SELECT id, create_time, update_time, reason, event_type, message, event_count, event_key \
                 FROM t_flink_autoscaler_event_handler WHERE job_key = ? ORDER BY id",
            ),
            delete_events_before: p("DELETE FROM t_flink_autoscaler_event_handler WHERE create_time < ?"),
            leases: LeaseStatements::new(dialect),
        }
    }
}

/// The most rows one batched statement writes or deletes: far below every driver's limit on bound
/// parameters (SQLite's 32,766, PostgreSQL's and MySQL's 65,535) at five a row.
const MAX_BATCH_ROWS: usize = 200;

/// Prepared statements each SQLite connection keeps (sqlx's default is 100). The batched
/// statements take one shape per row count (a group of 1 to [`group::MAX_GROUP_JOBS`] jobs, up to
/// [`MAX_BATCH_ROWS`] rows), so a fleet's flushes use a few hundred shapes; with 100 they were
/// evicted and prepared again, over and over (2 % of the service's CPU at 3,000 jobs, 0.6 % with
/// this, for 10 MB more memory). PostgreSQL and MySQL keep the default: there each statement is
/// held by the server too, and the larger cache cost 80 MB more memory at 3,000 jobs (with four
/// connections) for no CPU gain that could be measured.
#[cfg(feature = "sqlite")]
const STATEMENT_CACHE_CAPACITY: usize = 1024;

/// One row of the state table to write: (`state_type`, value).
type StateRow<'a> = (&'a str, &'a str);

impl Statements {
    /// The upsert of `rows` rows in one statement (each row binds create time, update time, job
    /// key, state type and value, in that order).
    fn upsert_rows(&self, rows: usize) -> String {
        const ROW: &str = "(?, ?, ?, ?, ?)";
        let tuples = repeated(ROW, rows, ", ");
        placeholders(self.dialect, &self.upsert_state_template.replacen(ROW, &tuples, 1))
    }

    /// The deletion of `rows` rows of any jobs in one statement (each row binds its job key and
    /// its state type).
    fn delete_keyed_rows(&self, rows: usize) -> String {
        let list = repeated("(job_key = ? AND state_type = ?)", rows, " OR ");
        placeholders(
            self.dialect,
            &format!("DELETE FROM t_flink_autoscaler_state_store WHERE {list}"),
        )
    }

    /// The lock of `jobs` window index rows in one statement, created if missing (each row binds
    /// create time, update time, job key and the index's state type); it returns each job key
    /// with its index when [`Statements::lock_returns_index`].
    fn lock_window_indexes(&self, jobs: usize) -> String {
        const ROW: &str = "(?, ?, ?, ?, '')";
        let tuples = repeated(ROW, jobs, ", ");
        let sql = self.lock_window_index_template.replacen(ROW, &tuples, 1);
        let sql = if self.lock_returns_index {
            sql.replacen("RETURNING state_value", "RETURNING job_key, state_value", 1)
        } else {
            sql
        };
        placeholders(self.dialect, &sql)
    }

    /// The read of `jobs` window index rows (binding the index's state type, then the job keys):
    /// job key and index.
    fn read_window_indexes(&self, jobs: usize) -> String {
        let list = repeated("?", jobs, ", ");
        placeholders(
            self.dialect,
            &format!(
                "SELECT job_key, state_value FROM t_flink_autoscaler_state_store \
                 WHERE state_type = ? AND job_key IN ({list})"
            ),
        )
    }

    /// The deletion of the job's rows of `rows` state types in one statement (binding the job key,
    /// then the state types).
    fn delete_rows(&self, rows: usize) -> String {
        let list = repeated("?", rows, ", ");
        placeholders(
            self.dialect,
            &format!("DELETE FROM t_flink_autoscaler_state_store WHERE job_key = ? AND state_type IN ({list})"),
        )
    }
}

/// `item` written `n` times (at least once: a statement for no row is never sent, but must parse),
/// separated by `separator`: the rows, keys or pairs of a batched statement.
fn repeated(item: &str, n: usize, separator: &str) -> String {
    vec![item; n.max(1)].join(separator)
}

/// Rewrites `?` placeholders as `$1, $2, ...` for PostgreSQL (our statements hold no `?` literal).
fn placeholders(dialect: Dialect, sql: &str) -> String {
    if dialect != Dialect::Postgres {
        return sql.to_owned();
    }
    let mut out = String::with_capacity(sql.len() + 8);
    let mut n = 0;
    for c in sql.chars() {
        if c == '?' {
            n += 1;
            out.push_str(&format!("${n}"));
        } else {
            out.push(c);
        }
    }
    out
}

/// Why a fenced flush was refused.
fn fenced_reason(owner: &str, epoch: i64) -> String {
    format!("the database no longer lists {owner} as the holder of epoch {epoch} (expired or taken over)")
}

/// A backend failure of `operation`, described by `error` (already scrubbed of secrets).
fn backend_error(operation: &'static str, error: impl fmt::Display) -> StateError {
    StateError::Backend {
        operation,
        message: error.to_string(),
        source: None,
    }
}

/// A failure of the database driver during `operation`, keeping the driver's error as the cause.
fn driver_error(operation: &'static str, error: sqlx::Error) -> StateError {
    StateError::Backend {
        operation,
        message: error.to_string(),
        source: Some(Box::new(error)),
    }
}

/// Runs `$body` with `$pool` bound to the concrete pool, so one generic body serves every driver.
macro_rules! with_pool {
    ($db:expr, $pool:ident => $body:expr) => {
        match $db {
            #[cfg(feature = "sqlite")]
            Database::Sqlite($pool) => $body,
            #[cfg(feature = "postgres")]
            Database::Postgres($pool) => $body,
            #[cfg(feature = "mysql")]
            Database::MySql($pool) => $body,
        }
    };
}

mod group;

/// A connected database with its statements.
#[derive(Debug)]
pub(crate) struct Db {
    pub(crate) database: Database,
    pub(crate) dialect: Dialect,
    /// [`StateUrl::backend`]: the `store` label of the flush series.
    backend: &'static str,
    statements: Arc<Statements>,
    /// Writes the flushes of many jobs together ([`group`]).
    group: group::GroupWriter,
}

/// Deadlocks and lock timeouts are worth retrying: the transaction did nothing.
fn is_transient(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Database(db) => matches!(
            db.code().as_deref(),
            // PG/MySQL serialization failure or deadlock; SQLite BUSY / BUSY_SNAPSHOT / LOCKED.
            Some("40001" | "40P01" | "5" | "517" | "6" | "262")
        ),
        _ => false,
    }
}

/// Attempts of one flush transaction the database aborted. Two processes flushing on one MySQL or
/// MariaDB deadlock now and then on the gap locks around a job's window rows (InnoDB locks the gap
/// after a deleted range, which may border another job's rows), and can do so several rounds in
/// a row when they flush in step; a growing, jittered backoff separates them.
const WRITE_ATTEMPTS: u32 = 8;

/// The pause before retry `attempt` (1-based): 10 ms per attempt plus up to 20 ms of jitter, so
/// two writers that collided do not retry in lockstep. At most about 0.5 s over all attempts.
fn retry_backoff(attempt: u32) -> Duration {
    use std::hash::{BuildHasher, Hasher};
    // A fresh `RandomState` is randomly keyed: enough jitter without a random number crate.
    let jitter = std::collections::hash_map::RandomState::new().build_hasher().finish() % 20;
    Duration::from_millis(10 * u64::from(attempt) + jitter)
}

/// Runs the transaction `attempt` until it succeeds, fails for good, or the database has aborted
/// it [`WRITE_ATTEMPTS`] times ([`is_transient`]), pausing [`retry_backoff`] between attempts.
/// `writing` names what is written (a job key, a group), for the debug line of each retry.
async fn with_retries<T, F, Fut>(writing: &str, mut attempt: F) -> Result<T, sqlx::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, sqlx::Error>>,
{
    let mut attempts = 1;
    loop {
        match attempt().await {
            Err(e) if attempts < WRITE_ATTEMPTS && is_transient(&e) => {
                tracing::debug!(writing, attempt = attempts, error = %e, "retrying an aborted state transaction");
                tokio::time::sleep(retry_backoff(attempts)).await;
                attempts += 1;
            }
            other => return other,
        }
    }
}

impl Db {
    /// Connects to `url` (not `memory`) and runs the embedded migrations if asked.
    pub(crate) async fn connect(url: &StateUrl, options: &StoreOptions) -> Result<Db, StateError> {
        let raw_url = match url {
            StateUrl::Memory => "",
            StateUrl::Sqlite(raw) | StateUrl::Postgres(raw) | StateUrl::MySql(raw) => raw.as_str(),
        };
        // `url` prints redacted; `scrub` also hides a password the driver might echo.
        let open_error =
            |e: sqlx::Error| backend_error("open", autoscaler_core::secret::scrub(&format!("{url}: {e}"), raw_url));
        let (database, dialect) = match url {
            StateUrl::Memory => {
                return Err(backend_error("open", "`memory` has no database"));
            }
            #[cfg(feature = "sqlite")]
            StateUrl::Sqlite(raw) => {
                let in_memory = raw.contains(":memory:");
                let connect = SqliteConnectOptions::from_str(raw)
                    .map_err(open_error)?
                    .create_if_missing(true)
                    // WAL: readers never block the writer; a transaction survives a killed process
                    // as all-or-nothing (NORMAL sync may lose the last commits on power loss, never
                    // corrupt them).
                    .journal_mode(SqliteJournalMode::Wal)
                    .synchronous(SqliteSynchronous::Normal)
                    .busy_timeout(options.busy_timeout)
                    // A batched upsert inside a transaction keeps a statement journal (the pages
                    // it changed, to undo it alone); past 64 KiB SQLite spills it to a temporary
                    // file, created and deleted within the transaction. In memory it is a copy.
                    .pragma("temp_store", "memory")
                    .statement_cache_capacity(STATEMENT_CACHE_CAPACITY);
                // Each connection to `:memory:` is its own database: keep exactly one, forever.
                let pool_options = if in_memory {
                    SqlitePoolOptions::new()
                        .max_connections(1)
                        .min_connections(1)
                        .idle_timeout(None)
                        .max_lifetime(None)
                } else {
                    SqlitePoolOptions::new().max_connections(options.max_connections)
                }
                // An embedded database drops no connection: no ping on every acquire.
                .test_before_acquire(false);
                let pool_options = pool_options.acquire_timeout(options.acquire_timeout);
                // Processes opening a fresh file at once race to switch it to WAL; SQLite answers
                // the loser BUSY at once, without waiting out the busy timeout (its deadlock
                // rule). Nothing was done then: open again.
                let pool = with_retries("opening the database", || {
                    pool_options.clone().connect_with(connect.clone())
                })
                .await
                .map_err(open_error)?;
                (Database::Sqlite(pool), Dialect::Sqlite)
            }
            #[cfg(feature = "postgres")]
            StateUrl::Postgres(raw) => {
                let connect = PgConnectOptions::from_str(raw).map_err(open_error)?;
                let pool = PgPoolOptions::new()
                    .max_connections(options.max_connections)
                    .acquire_timeout(options.acquire_timeout)
                    .connect_with(connect)
                    .await
                    .map_err(open_error)?;
                (Database::Postgres(pool), Dialect::Postgres)
            }
            #[cfg(feature = "mysql")]
            StateUrl::MySql(raw) => {
                let connect = MySqlConnectOptions::from_str(raw)
                    .map_err(open_error)?
                    .charset("utf8mb4");
                let pool = MySqlPoolOptions::new()
                    .max_connections(options.max_connections)
                    .acquire_timeout(options.acquire_timeout)
                    .connect_with(connect)
                    .await
                    .map_err(open_error)?;
                (Database::MySql(pool), Dialect::MySql)
            }
            #[allow(unreachable_patterns)] // every driver compiled in
            _ => return Err(missing_driver(url)),
        };
        let db = Db {
            database,
            dialect,
            backend: url.backend(),
            statements: Arc::new(Statements::new(dialect)),
            group: group::GroupWriter::default(),
        };
        if options.migrate {
            db.migrate().await?;
        }
        db.check_schema().await?;
        Ok(db)
    }

    /// Checks that both tables have our columns. `CREATE TABLE IF NOT EXISTS` keeps a foreign table
    /// that happens to carry our name; reading and writing it would fail on every flush (or, worse,
    /// write into someone else's table), so it is refused when the store opens, naming the table.
    async fn check_schema(&self) -> Result<(), StateError> {
        const TABLES: [(&str, &str); 2] = [
            (
                "t_flink_autoscaler_state_store",
                "id, create_time, update_time, job_key, state_type, state_value",
            ),
            (
                "t_flink_autoscaler_event_handler",
                "id, create_time, update_time, job_key, reason, event_type, message, event_count, event_key",
            ),
        ];
        self.check_tables(&TABLES).await
    }

    /// Checks that the lease tables have our columns (only a store that coordinates replicas
    /// needs them; a DBA who applies the schema by hand may not have created them).
    pub(crate) async fn check_lease_schema(&self) -> Result<(), StateError> {
        self.check_tables(&[
            ("t_flink_autoscaler_replica", "replica_id, heartbeat_at"),
            ("t_flink_autoscaler_job_lease", "job_key, owner, epoch, expires_at"),
        ])
        .await
    }

    /// Probes each (table, columns) with a query that reads no row.
    async fn check_tables(&self, tables: &[(&str, &str)]) -> Result<(), StateError> {
        for &(table, columns) in tables {
            let sql = format!("SELECT {columns} FROM {table} WHERE 1 = 0");
            let probe = with_pool!(&self.database, pool => sqlx::query(&sql).fetch_all(pool).await.map(|_| ()));
            probe.map_err(|e| {
                backend_error(
                    "open",
                    format!("table {table} is not the autoscaler's (expected the columns {columns}): {e}"),
                )
            })?;
        }
        Ok(())
    }

    /// Applies the embedded migrations. sqlx takes an advisory lock (PG, MySQL) or the write lock
    /// (SQLite), so two processes starting at once migrate once.
    async fn migrate(&self) -> Result<(), StateError> {
        let (v1, v2) = match self.dialect {
            Dialect::Sqlite => (SQLITE_SCHEMA, SQLITE_LEASES),
            Dialect::Postgres => (POSTGRES_SCHEMA, POSTGRES_LEASES),
            Dialect::MySql => (MYSQL_SCHEMA, MYSQL_LEASES),
        };
        let migrator = Migrator {
            migrations: Cow::Owned(vec![
                Migration::new(
                    SCHEMA_V1_VERSION,
                    Cow::Borrowed("autoscaler state and event tables"),
                    MigrationType::Simple,
                    Cow::Borrowed(v1),
                    false,
                ),
                Migration::new(
                    SCHEMA_V2_VERSION,
                    Cow::Borrowed("replica and job lease tables"),
                    MigrationType::Simple,
                    Cow::Borrowed(v2),
                    false,
                ),
            ]),
            // Another sqlx application's migrations in the same database are not ours to judge.
            ignore_missing: true,
            ..Migrator::DEFAULT
        };
        let mut result = with_pool!(&self.database, pool => migrator.run(pool).await);
        if let Err(error) = &result {
            // SQLite has no migration lock: a process racing us to create the tables makes our
            // bookkeeping insert fail. The schema is there then; the retry sees it applied.
            tracing::debug!(%error, "retrying the migrations once");
            tokio::time::sleep(Duration::from_millis(200)).await;
            result = with_pool!(&self.database, pool => migrator.run(pool).await);
        }
        result.map_err(|e| backend_error("migrate", e))
    }

    /// Every (state_type, state_value) row of `job_key`.
    pub(crate) async fn load_states(&self, job_key: &str) -> Result<Vec<(String, String)>, StateError> {
        let sql = self.statements.load_states.as_str();
        let rows = with_pool!(&self.database, pool => {
            let rows = sqlx::query(sql).bind(job_key).fetch_all(pool).await.map_err(|e| driver_error("load", e))?;
            rows.iter()
                .map(|r| Ok((r.try_get::<String, _>(0)?, r.try_get::<String, _>(1)?)))
                .collect::<Result<Vec<_>, sqlx::Error>>()
        });
        rows.map_err(|e| driver_error("load", e))
    }

    /// Writes one job's pending changes in ONE transaction, so a crash leaves the job's rows all
    /// old or all new. Retries a transaction the database aborted (deadlock, busy).
    /// With a `fence`, the transaction first checks that the lease of the job is still held by
    /// the fence's owner with its epoch and unexpired on the database's clock (locking the lease
    /// row until the commit, so no one takes the lease over in between); otherwise it writes
    /// nothing and returns [`StateError::Fenced`].
    ///
    /// A flush that adds to a known window (or leaves it alone) goes through the group writer and
    /// shares its transaction with other jobs' flushes ([`group`]); the others, and a grouped
    /// one handed back, are written on their own.
    pub(crate) async fn write_states(
        &self,
        job_key: &str,
        writes: JobWrites<'_>,
        fence: Option<Fence<'_>>,
    ) -> Result<(), StateError> {
        let JobWrites {
            window,
            upserts,
            deletes,
        } = writes;
        let (window, all) = match window {
            None => (None, None),
            Some(WindowWrite::Store {
                expected_index: Some(expected_index),
                new_index,
                added,
                trimmed,
                all,
            }) => (
                Some(group::GroupedWindow {
                    expected_index,
                    new_index,
                    added,
                    trimmed,
                }),
                Some(all),
            ),
            // A window written whole or removed: on its own.
            Some(window) => {
                let writes = JobWrites {
                    window: Some(window),
                    upserts,
                    deletes,
                };
                return self.write_alone(job_key, &writes, fence).await;
            }
        };
        let flush = group::GroupedFlush {
            job_key: job_key.to_owned(),
            fence: fence.map(|f| (f.owner.to_owned(), f.epoch)),
            window,
            upserts,
            deletes,
        };
        match self
            .group
            .write(&self.database, &self.statements, self.backend, flush)
            .await
        {
            group::GroupOutcome::Written => Ok(()),
            group::GroupOutcome::Fenced { owner, epoch } => Err(StateError::Fenced {
                job_key: job_key.to_owned(),
                reason: fenced_reason(&owner, epoch),
            }),
            group::GroupOutcome::Lost => Err(backend_error(
                "flush",
                "the state writer stopped before it answered (the runtime is shutting down)",
            )),
            group::GroupOutcome::Alone(flush) => {
                let writes = JobWrites {
                    window: match (flush.window, all) {
                        (Some(w), Some(all)) => Some(WindowWrite::Store {
                            expected_index: Some(w.expected_index),
                            new_index: w.new_index,
                            added: w.added,
                            trimmed: w.trimmed,
                            all,
                        }),
                        _ => None,
                    },
                    upserts: flush.upserts,
                    deletes: flush.deletes,
                };
                self.write_alone(job_key, &writes, fence).await
            }
        }
    }

    /// [`Db::write_states`] in a transaction of its own.
    async fn write_alone(
        &self,
        job_key: &str,
        writes: &JobWrites<'_>,
        fence: Option<Fence<'_>>,
    ) -> Result<(), StateError> {
        match with_retries(job_key, || self.try_write_states(job_key, writes, fence)).await {
            Ok(written) => written,
            Err(e) => Err(backend_error("flush", e)),
        }
    }

    async fn try_write_states(
        &self,
        job_key: &str,
        writes: &JobWrites<'_>,
        fence: Option<Fence<'_>>,
    ) -> Result<Result<(), StateError>, sqlx::Error> {
        let now = Utc::now();
        let statements = &self.statements;
        with_pool!(&self.database, pool => {
            let mut conn = pool.acquire().await?;
            let mut tx = conn.begin().await?;
            // The lease row before any state row: a taker only ever locks the lease row, so the
            // order is the same for everyone and nobody deadlocks.
            if let Some(fence) = fence {
                let held = sqlx::query(&statements.leases.fence)
                    .bind(job_key)
                    .bind(fence.owner)
                    .bind(fence.epoch)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                if held != 1 {
                    // Dropping the transaction rolls it back: nothing is written.
                    return Ok(Err(StateError::Fenced {
                        job_key: job_key.to_owned(),
                        reason: fenced_reason(fence.owner, fence.epoch),
                    }));
                }
            }
            // The window first, its index row before anything else, so two writers of the same
            // job lock rows in the same order (index, then state types in order) and cannot
            // deadlock each other.
            let mut locked_index = None;
            if writes.window.is_some() {
                let lock = sqlx::query(&statements.lock_window_index)
                    .bind(now)
                    .bind(now)
                    .bind(job_key)
                    .bind(WINDOW_INDEX);
                if statements.lock_returns_index {
                    locked_index = Some(lock.fetch_one(&mut *tx).await?.try_get::<String, _>(0)?);
                } else {
                    lock.execute(&mut *tx).await?;
                }
            }
            // Every row written and deleted, each in one batched statement (a round trip to the
            // database costs more than the rows): the window's rows first, then its index, then the
            // other states in state type order; deletions after.
            let mut upserts: Vec<StateRow<'_>> = Vec::new();
            let mut deletes: Vec<&str> = Vec::new();
            // Rows re-encoded for a whole-window write; they outlive the statements binding them.
            let rewritten;
            match &writes.window {
                None => {}
                Some(WindowWrite::Remove) => {
                    sqlx::query(&statements.delete_window_rows).bind(job_key).execute(&mut *tx).await?;
                    deletes.push(WINDOW_INDEX);
                }
                Some(WindowWrite::Store { expected_index, new_index, added, trimmed, all }) => {
                    let current = match locked_index.take() {
                        Some(current) => current,
                        None => {
                            let (current,): (String,) = sqlx::query_as(&statements.read_window_index)
                                .bind(job_key)
                                .bind(WINDOW_INDEX)
                                .fetch_one(&mut *tx)
                                .await?;
                            current
                        }
                    };
                    // The rows are what this process last saw only if the index is.
                    let known = expected_index.as_deref().is_some_and(|expected| expected == current);
                    if known {
                        upserts.extend(added.iter().map(|(identifier, value)| (identifier.as_str(), value.as_str())));
                        deletes.extend(trimmed.iter().map(String::as_str));
                    } else {
                        // Another writer (or an earlier release) left rows this process does not
                        // know: the whole window is written again.
                        rewritten = match all() {
                            Ok(rows) => rows,
                            Err(encoding) => return Ok(Err(encoding)),
                        };
                        sqlx::query(&statements.delete_window_rows).bind(job_key).execute(&mut *tx).await?;
                        upserts.extend(rewritten.iter().map(|(identifier, value)| (identifier.as_str(), value.as_str())));
                    }
                    upserts.push((WINDOW_INDEX, new_index.as_str()));
                }
            }
            upserts.extend(writes.upserts.iter().map(|(identifier, value)| (*identifier, value.as_str())));
            deletes.extend(writes.deletes.iter().copied());
            for rows in upserts.chunks(MAX_BATCH_ROWS) {
                let sql = statements.upsert_rows(rows.len());
                let mut query = sqlx::query(&sql);
                for &(identifier, value) in rows {
                    query = query.bind(now).bind(now).bind(job_key).bind(identifier).bind(value);
                }
                query.execute(&mut *tx).await?;
            }
            for rows in deletes.chunks(MAX_BATCH_ROWS) {
                let sql = statements.delete_rows(rows.len());
                let mut query = sqlx::query(&sql).bind(job_key);
                for &identifier in rows {
                    query = query.bind(identifier);
                }
                query.execute(&mut *tx).await?;
            }
            tx.commit().await.map(Ok)
        })
    }

    /// Inserts an event row with count 1.
    pub(crate) async fn insert_event(
        &self,
        job_key: &str,
        event_type: &str,
        reason: &str,
        message: &str,
        event_key: &str,
        now: DateTime<Utc>,
    ) -> Result<(), StateError> {
        let sql = self.statements.insert_event.as_str();
        with_pool!(&self.database, pool => sqlx::query(sql)
            .bind(now)
            .bind(now)
            .bind(job_key)
            .bind(reason)
            .bind(event_type)
            .bind(message)
            .bind(event_key)
            .execute(pool)
            .await
            .map(|_| ())
            .map_err(|e| driver_error("insert event", e)))
    }

    /// Id and create time of the newest event with this identity.
    pub(crate) async fn latest_event(
        &self,
        job_key: &str,
        reason: &str,
        event_key: &str,
    ) -> Result<Option<(i64, DateTime<Utc>)>, StateError> {
        let sql = self.statements.latest_event.as_str();
        let row = with_pool!(&self.database, pool => {
            let row = sqlx::query(sql).bind(job_key).bind(reason).bind(event_key).fetch_optional(pool).await;
            row.and_then(|r| r.map(|r| Ok((r.try_get::<i64, _>(0)?, r.try_get::<DateTime<Utc>, _>(1)?))).transpose())
        });
        row.map_err(|e| driver_error("query event", e))
    }

    /// Bumps the count of event `id` and replaces its message.
    pub(crate) async fn update_event(&self, id: i64, message: &str, now: DateTime<Utc>) -> Result<(), StateError> {
        let sql = self.statements.update_event.as_str();
        with_pool!(&self.database, pool => sqlx::query(sql)
            .bind(message)
            .bind(now)
            .bind(id)
            .execute(pool)
            .await
            .map(|_| ())
            .map_err(|e| driver_error("update event", e)))
    }

    /// Every event of `job_key`, oldest first.
    pub(crate) async fn list_events(&self, job_key: &str) -> Result<Vec<EventRow>, StateError> {
        let sql = self.statements.list_events.as_str();
        let rows = with_pool!(&self.database, pool => {
            match sqlx::query(sql).bind(job_key).fetch_all(pool).await {
                Ok(rows) => rows
                    .iter()
                    .map(|r| {
                        Ok(EventRow {
                            id: r.try_get(0)?,
                            create_time: r.try_get(1)?,
                            update_time: r.try_get(2)?,
                            reason: r.try_get(3)?,
                            event_type: r.try_get(4)?,
                            message: r.try_get(5)?,
                            event_count: r.try_get(6)?,
                            event_key: r.try_get(7)?,
                        })
                    })
                    .collect::<Result<Vec<_>, sqlx::Error>>(),
                Err(e) => Err(e),
            }
        });
        rows.map_err(|e| driver_error("list events", e))
    }

    /// Deletes every event created before `cutoff`; returns how many.
    pub(crate) async fn delete_events_before(&self, cutoff: DateTime<Utc>) -> Result<u64, StateError> {
        let sql = self.statements.delete_events_before.as_str();
        with_pool!(&self.database, pool => sqlx::query(sql)
            .bind(cutoff)
            .execute(pool)
            .await
            .map(|r| r.rows_affected())
            .map_err(|e| driver_error("delete events", e)))
    }

    /// Closes the pool, waiting for connections to be returned.
    pub(crate) async fn close(&self) {
        self.group.close();
        with_pool!(&self.database, pool => pool.close().await)
    }
}

/// The statements of the replica and lease tables. Every time in them is the database's clock,
/// milliseconds since the Unix epoch (`NOW` below), never a replica's.
#[derive(Debug)]
pub(crate) struct LeaseStatements {
    dialect: Dialect,
    heartbeat: String,
    live_replicas: String,
    prune_replicas: String,
    remove_replica: String,
    held: String,
    renew_held: String,
    release_all: String,
    take_template: String,
    insert_missing_template: String,
    release_template: String,
    renew_one: String,
    release_one: String,
    lease_of: String,
    pub(crate) fence: String,
    /// [`LeaseStatements::fence`] for many jobs of one owner (`PAIRS` stands for their job keys and
    /// epochs), returning the job keys still held.
    fence_many_template: String,
}

impl LeaseStatements {
    fn new(dialect: Dialect) -> Self {
        let now = match dialect {
            // julianday has sub-millisecond resolution; 2440587.5 is the Unix epoch's Julian day.
            Dialect::Sqlite => "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)",
            // clock_timestamp(), not now(): the time of the statement, not of its transaction.
            Dialect::Postgres => "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)",
            // UTC whatever the session's time zone.
            Dialect::MySql => "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)",
        };
        let p = |sql: &str| placeholders(dialect, &sql.replace("NOW", now));
        // `OWNER` in a statement that names its rows by key: SQLite's planner (which has no
        // statistics) prefers the owner index to the key lookups and would read every lease of the
        // owner, thousands, per statement; a unary `+` keeps that term from choosing the index.
        // PostgreSQL and MySQL pick the key with their statistics.
        let by_key = |sql: &str| match dialect {
            Dialect::Sqlite => sql.replace("OWNER", "+owner"),
            Dialect::Postgres | Dialect::MySql => sql.replace("OWNER", "owner"),
        };
        let heartbeat = match dialect {
            Dialect::Sqlite | Dialect::Postgres => {
                "INSERT INTO t_flink_autoscaler_replica (replica_id, heartbeat_at) VALUES (?, NOW) \
                 ON CONFLICT (replica_id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at"
            }
            Dialect::MySql => {
                "INSERT INTO t_flink_autoscaler_replica (replica_id, heartbeat_at) VALUES (?, NOW) \
                 ON DUPLICATE KEY UPDATE heartbeat_at = VALUES(heartbeat_at)"
            }
        };
        let insert_missing = match dialect {
            Dialect::Sqlite | Dialect::Postgres => {
                "INSERT INTO t_flink_autoscaler_job_lease (job_key, owner, epoch, expires_at) VALUES (?, NULL, 0, 0) \
                 ON CONFLICT (job_key) DO NOTHING"
            }
            // Not INSERT IGNORE: that would also turn a too-long key into a truncated one.
            Dialect::MySql => {
                "INSERT INTO t_flink_autoscaler_job_lease (job_key, owner, epoch, expires_at) VALUES (?, NULL, 0, 0) \
                 ON DUPLICATE KEY UPDATE job_key = job_key"
            }
        };
        LeaseStatements {
            dialect,
            heartbeat: p(heartbeat),
            live_replicas: p(
                "SELECT replica_id FROM t_flink_autoscaler_replica WHERE heartbeat_at > NOW - ? ORDER BY replica_id",
            ),
            prune_replicas: p("DELETE FROM t_flink_autoscaler_replica WHERE heartbeat_at < NOW - ?"),
            remove_replica: p("DELETE FROM t_flink_autoscaler_replica WHERE replica_id = ?"),
            held: p("SELECT job_key, epoch, expires_at - NOW FROM t_flink_autoscaler_job_lease WHERE owner = ?"),
            renew_held: p("UPDATE t_flink_autoscaler_job_lease SET expires_at = NOW + ? \
                 WHERE owner = ? AND expires_at > NOW"),
            release_all: p("UPDATE t_flink_autoscaler_job_lease SET owner = NULL, expires_at = 0 WHERE owner = ?"),
            // Free (never taken or given up) or expired, whoever held it: the epoch grows.
            take_template: now_replaced(
                "UPDATE t_flink_autoscaler_job_lease SET owner = ?, epoch = epoch + 1, expires_at = NOW + ? \
                 WHERE (owner IS NULL OR expires_at <= NOW) AND job_key IN (KEYS)",
                now,
            ),
            insert_missing_template: insert_missing.to_owned(),
            release_template: by_key(
                "UPDATE t_flink_autoscaler_job_lease SET owner = NULL, expires_at = 0 \
                 WHERE OWNER = ? AND job_key IN (KEYS)",
            ),
            renew_one: p("UPDATE t_flink_autoscaler_job_lease SET expires_at = NOW + ? \
                 WHERE job_key = ? AND owner = ? AND epoch = ? AND expires_at > NOW"),
            release_one: p("UPDATE t_flink_autoscaler_job_lease SET owner = NULL, expires_at = 0 \
                 WHERE job_key = ? AND owner = ? AND epoch = ?"),
            lease_of: p("SELECT owner, epoch, expires_at - NOW FROM t_flink_autoscaler_job_lease WHERE job_key = ?"),
            // Matches (and locks) the lease row only while it is still the writer's.
            fence: p("UPDATE t_flink_autoscaler_job_lease SET epoch = epoch \
                 WHERE job_key = ? AND owner = ? AND epoch = ? AND expires_at > NOW"),
            fence_many_template: now_replaced(
                &by_key(match dialect {
                    Dialect::Sqlite | Dialect::Postgres => {
                        "UPDATE t_flink_autoscaler_job_lease SET epoch = epoch \
                         WHERE OWNER = ? AND expires_at > NOW AND (PAIRS) RETURNING job_key"
                    }
                    // No RETURNING on an UPDATE: the rows are locked by reading them for update.
                    Dialect::MySql => {
                        "SELECT job_key FROM t_flink_autoscaler_job_lease \
                         WHERE OWNER = ? AND expires_at > NOW AND (PAIRS) FOR UPDATE"
                    }
                }),
                now,
            ),
        }
    }

    /// `template` with `KEYS` replaced by `keys` placeholders.
    fn with_keys(&self, template: &str, keys: usize) -> String {
        placeholders(self.dialect, &template.replace("KEYS", &repeated("?", keys, ", ")))
    }

    /// [`LeaseStatements::fence`] of `jobs` jobs of one owner in one statement (binding the owner,
    /// then each job's key and epoch); returns the job keys whose lease the owner still holds,
    /// locked until the transaction ends.
    pub(crate) fn fence_many(&self, jobs: usize) -> String {
        let pairs = repeated("(job_key = ? AND epoch = ?)", jobs, " OR ");
        placeholders(self.dialect, &self.fence_many_template.replace("PAIRS", &pairs))
    }

    /// The insert of `rows` free lease rows (one job key each) in one statement.
    fn insert_missing(&self, rows: usize) -> String {
        const ROW: &str = "(?, NULL, 0, 0)";
        let tuples = repeated(ROW, rows, ", ");
        placeholders(self.dialect, &self.insert_missing_template.replacen(ROW, &tuples, 1))
    }
}

fn now_replaced(sql: &str, now: &str) -> String {
    sql.replace("NOW", now)
}

/// A text column, also when MySQL marks it binary (`VARBINARY`, a `_bin` collation).
fn text_column<R>(row: &R, index: usize) -> Result<String, sqlx::Error>
where
    R: sqlx::Row,
    usize: sqlx::ColumnIndex<R>,
    for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> Vec<u8>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    row.try_get::<String, _>(index).or_else(|_| {
        row.try_get::<Vec<u8>, _>(index)
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
    })
}

/// An optional text column, as [`text_column`].
fn optional_text_column<R>(row: &R, index: usize) -> Result<Option<String>, sqlx::Error>
where
    R: sqlx::Row,
    usize: sqlx::ColumnIndex<R>,
    for<'r> Option<String>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> Option<Vec<u8>>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    row.try_get::<Option<String>, _>(index).or_else(|_| {
        row.try_get::<Option<Vec<u8>>, _>(index)
            .map(|bytes| bytes.map(|b| String::from_utf8_lossy(&b).into_owned()))
    })
}

/// One lease row as a replica sees it: its holder, its epoch and how long it has left on the
/// database's clock (negative: expired).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LeaseRow {
    pub(crate) owner: Option<String>,
    pub(crate) epoch: i64,
    pub(crate) remaining_ms: i64,
}

impl Db {
    /// Records that `replica` is alive now (database clock).
    pub(crate) async fn heartbeat(&self, replica: &str) -> Result<(), StateError> {
        let sql = self.statements.leases.heartbeat.as_str();
        with_pool!(&self.database, pool => sqlx::query(sql).bind(replica).execute(pool).await.map(|_| ()))
            .map_err(|e| driver_error("heartbeat", e))
    }

    /// The replicas whose last heartbeat is less than `within_ms` old, sorted.
    pub(crate) async fn live_replicas(&self, within_ms: i64) -> Result<Vec<String>, StateError> {
        let sql = self.statements.leases.live_replicas.as_str();
        let rows = with_pool!(&self.database, pool => {
            match sqlx::query(sql).bind(within_ms).fetch_all(pool).await {
                Ok(rows) => rows.iter().map(|r| text_column(r, 0)).collect::<Result<Vec<_>, _>>(),
                Err(e) => Err(e),
            }
        });
        rows.map_err(|e| driver_error("list replicas", e))
    }

    /// Forgets replicas silent for more than `older_than_ms` (each restart has a new name).
    pub(crate) async fn prune_replicas(&self, older_than_ms: i64) -> Result<(), StateError> {
        let sql = self.statements.leases.prune_replicas.as_str();
        with_pool!(&self.database, pool => sqlx::query(sql).bind(older_than_ms).execute(pool).await.map(|_| ()))
            .map_err(|e| driver_error("prune replicas", e))
    }

    /// Removes `replica` from the members and frees every lease it holds.
    pub(crate) async fn leave(&self, replica: &str) -> Result<(), StateError> {
        let leases = &self.statements.leases;
        with_pool!(&self.database, pool => {
            let freed = sqlx::query(&leases.release_all).bind(replica).execute(pool).await;
            match freed {
                Ok(_) => sqlx::query(&leases.remove_replica).bind(replica).execute(pool).await.map(|_| ()),
                Err(e) => Err(e),
            }
        })
        .map_err(|e| driver_error("leave", e))
    }

    /// Every lease row `replica` is the holder of, expired or not: (job key, row).
    pub(crate) async fn held_leases(&self, replica: &str) -> Result<Vec<(String, LeaseRow)>, StateError> {
        let sql = self.statements.leases.held.as_str();
        let rows = with_pool!(&self.database, pool => {
            match sqlx::query(sql).bind(replica).fetch_all(pool).await {
                Ok(rows) => rows
                    .iter()
                    .map(|r| {
                        Ok((
                            text_column(r, 0)?,
                            LeaseRow { owner: Some(replica.to_owned()), epoch: r.try_get(1)?, remaining_ms: r.try_get(2)? },
                        ))
                    })
                    .collect::<Result<Vec<_>, sqlx::Error>>(),
                Err(e) => Err(e),
            }
        });
        rows.map_err(|e| driver_error("read leases", e))
    }

    /// Extends every unexpired lease of `replica` to `lease_ms` from now; how many.
    pub(crate) async fn renew_held(&self, replica: &str, lease_ms: i64) -> Result<u64, StateError> {
        let sql = self.statements.leases.renew_held.as_str();
        with_pool!(&self.database, pool => sqlx::query(sql).bind(lease_ms).bind(replica).execute(pool).await.map(|r| r.rows_affected()))
            .map_err(|e| driver_error("renew", e))
    }

    /// Frees the leases of `jobs` that `replica` holds.
    pub(crate) async fn release(&self, replica: &str, jobs: &[&str]) -> Result<(), StateError> {
        let leases = &self.statements.leases;
        for chunk in jobs.chunks(MAX_BATCH_ROWS) {
            let sql = leases.with_keys(&leases.release_template, chunk.len());
            with_pool!(&self.database, pool => {
                let mut query = sqlx::query(&sql).bind(replica);
                for job in chunk {
                    query = query.bind(*job);
                }
                query.execute(pool).await.map(|_| ())
            })
            .map_err(|e| driver_error("release", e))?;
        }
        Ok(())
    }

    /// Takes, for `replica`, the leases of `jobs` that are free or expired (creating the rows
    /// of jobs never leased), each for `lease_ms`, growing their epochs; how many it took.
    pub(crate) async fn take(&self, replica: &str, jobs: &[&str], lease_ms: i64) -> Result<u64, StateError> {
        let leases = &self.statements.leases;
        let mut taken = 0;
        for chunk in jobs.chunks(MAX_BATCH_ROWS) {
            let insert = leases.insert_missing(chunk.len());
            let take = leases.with_keys(&leases.take_template, chunk.len());
            let result = with_pool!(&self.database, pool => {
                let mut query = sqlx::query(&insert);
                for job in chunk {
                    query = query.bind(*job);
                }
                match query.execute(pool).await {
                    Ok(_) => {
                        let mut query = sqlx::query(&take).bind(replica).bind(lease_ms);
                        for job in chunk {
                            query = query.bind(*job);
                        }
                        query.execute(pool).await.map(|r| r.rows_affected())
                    }
                    Err(e) => Err(e),
                }
            });
            taken += result.map_err(|e| driver_error("acquire", e))?;
        }
        Ok(taken)
    }

    /// Extends one lease if `replica` still holds it with `epoch`, unexpired; whether it did.
    pub(crate) async fn renew_one(
        &self,
        replica: &str,
        job: &str,
        epoch: i64,
        lease_ms: i64,
    ) -> Result<bool, StateError> {
        let sql = self.statements.leases.renew_one.as_str();
        with_pool!(&self.database, pool => sqlx::query(sql)
            .bind(lease_ms)
            .bind(job)
            .bind(replica)
            .bind(epoch)
            .execute(pool)
            .await
            .map(|r| r.rows_affected() == 1))
        .map_err(|e| driver_error("renew", e))
    }

    /// Frees one lease if `replica` still holds it with `epoch`; whether it did.
    pub(crate) async fn release_one(&self, replica: &str, job: &str, epoch: i64) -> Result<bool, StateError> {
        let sql = self.statements.leases.release_one.as_str();
        with_pool!(&self.database, pool => sqlx::query(sql).bind(job).bind(replica).bind(epoch).execute(pool).await.map(|r| r.rows_affected() == 1))
            .map_err(|e| driver_error("release", e))
    }

    /// The lease row of `job`, if it was ever leased.
    pub(crate) async fn lease_of(&self, job: &str) -> Result<Option<LeaseRow>, StateError> {
        let sql = self.statements.leases.lease_of.as_str();
        let row = with_pool!(&self.database, pool => {
            match sqlx::query(sql).bind(job).fetch_optional(pool).await {
                Ok(Some(r)) => (|| Ok(Some(LeaseRow {
                    owner: optional_text_column(&r, 0)?,
                    epoch: r.try_get(1)?,
                    remaining_ms: r.try_get(2)?,
                })))(),
                Ok(None) => Ok(None),
                Err(e) => Err::<_, sqlx::Error>(e),
            }
        });
        row.map_err(|e| driver_error("read lease", e))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The URL of a SQLite file `name` in `dir`.
    #[cfg(feature = "sqlite")]
    pub(super) fn sqlite_file(dir: &std::path::Path, name: &str) -> StateUrl {
        format!("sqlite:{}", dir.join(name).display()).parse().unwrap()
    }

    /// `db`'s SQLite pool.
    #[cfg(feature = "sqlite")]
    pub(super) fn sqlite_pool(db: &Db) -> &SqlitePool {
        match &db.database {
            Database::Sqlite(pool) => pool,
            #[allow(unreachable_patterns)] // other drivers compiled in
            _ => panic!("a SQLite database"),
        }
    }

    #[test]
    fn urls_parse_to_their_backend() {
        assert_eq!("memory".parse::<StateUrl>().unwrap(), StateUrl::Memory);
        assert_eq!(
            "sqlite:/tmp/a.db".parse::<StateUrl>().unwrap(),
            StateUrl::Sqlite("sqlite:/tmp/a.db".into())
        );
        assert!(matches!(
            "postgresql://h/db".parse::<StateUrl>().unwrap(),
            StateUrl::Postgres(_)
        ));
        assert_eq!(
            "mariadb://root@h/db".parse::<StateUrl>().unwrap(),
            StateUrl::MySql("mysql://root@h/db".into())
        );
        let err = "redis://h".parse::<StateUrl>().unwrap_err();
        assert!(err.to_string().contains("redis://h"), "{err}");
    }

    #[test]
    fn passwords_are_redacted_in_messages() {
        let url = StateUrl::Postgres("postgres://u:secret@h:5432/db".into());
        assert_eq!(url.to_string(), "postgres://u:***@h:5432/db");
        assert_eq!(redact_password("mysql://root@h/db"), "mysql://root@h/db");
    }

    #[test]
    fn retry_backoff_grows_with_jitter_and_stays_bounded() {
        let pauses: Vec<Duration> = (1..WRITE_ATTEMPTS).map(retry_backoff).collect();
        for (attempt, pause) in (1u64..).zip(&pauses) {
            assert!(*pause >= Duration::from_millis(10 * attempt), "{pause:?}");
            assert!(*pause < Duration::from_millis(10 * attempt + 20), "{pause:?}");
        }
        let total: Duration = pauses.iter().sum();
        assert!(total < Duration::from_millis(500), "{total:?}");
        // Jitter: 50 draws of one attempt's pause are not all the same.
        let first = retry_backoff(1);
        assert!((0..50).any(|_| retry_backoff(1) != first));
    }

    #[test]
    fn postgres_placeholders_are_numbered() {
        assert_eq!(placeholders(Dialect::Postgres, "a = ? AND b = ?"), "a = $1 AND b = $2");
        assert_eq!(placeholders(Dialect::MySql, "a = ?"), "a = ?");
    }

    #[test]
    fn batched_statements_bind_five_values_a_row_and_one_a_deleted_type() {
        let pg = Statements::new(Dialect::Postgres);
        let upsert = pg.upsert_rows(2);
        assert!(
            upsert.contains("VALUES ($1, $2, $3, $4, $5), ($6, $7, $8, $9, $10) ON CONFLICT"),
            "{upsert}"
        );
        assert_eq!(
            pg.delete_rows(3),
            "DELETE FROM t_flink_autoscaler_state_store WHERE job_key = $1 AND state_type IN ($2, $3, $4)"
        );
        let mysql = Statements::new(Dialect::MySql).upsert_rows(3);
        assert_eq!(mysql.matches("(?, ?, ?, ?, ?)").count(), 3, "{mysql}");
        assert!(
            mysql.ends_with(
                "ON DUPLICATE KEY UPDATE update_time = VALUES(update_time), state_value = VALUES(state_value)"
            )
        );
        let sqlite = Statements::new(Dialect::Sqlite);
        assert_eq!(sqlite.upsert_rows(1).matches('?').count(), 5);
        assert_eq!(sqlite.delete_rows(1).matches('?').count(), 2);
    }

    // The grouped fence and the release name their leases by key: SQLite must look each one up
    // rather than read every lease of the owner (it did, through the owner index, for each group).
    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn sqlite_finds_fenced_and_released_leases_by_key() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::connect(&sqlite_file(dir.path(), "plan.db"), &StoreOptions::default())
            .await
            .unwrap();
        let pool = sqlite_pool(&db);
        // As many leases of one owner as a fleet has, so that a scan would be the costly plan.
        for i in 0..500 {
            sqlx::query("INSERT INTO t_flink_autoscaler_job_lease VALUES (?, 'me', 1, 9999999999999)")
                .bind(format!("fake/{i:032x}"))
                .execute(pool)
                .await
                .unwrap();
        }
        let leases = &db.statements.leases;
        for (name, sql, keys) in [
            ("fence_many", leases.fence_many(40), 40),
            ("release", leases.with_keys(&leases.release_template, 40), 40),
        ] {
            let binds = sql.matches('?').count();
            let explain = format!("EXPLAIN QUERY PLAN {sql}");
            let mut query = sqlx::query(&explain);
            for i in 0..binds {
                query = query.bind(format!("fake/{i:032x}"));
            }
            let plan: Vec<String> = query
                .fetch_all(pool)
                .await
                .unwrap()
                .iter()
                .map(|row| row.get::<String, _>(3))
                .collect();
            assert!(binds > keys, "{name}: {sql}");
            assert!(
                plan.iter().all(|step| !step.contains("owner")) && plan.iter().any(|step| step.contains("job_key=?")),
                "{name} reads leases by owner: {plan:?}"
            );
        }
    }

    // A fleet's group commits use a statement shape per row count: each stays prepared on the
    // connection instead of being evicted (sqlx keeps 100 by default) and prepared again.
    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn every_batch_shape_stays_prepared() {
        use sqlx::Connection as _;
        let url: StateUrl = "sqlite::memory:".parse().unwrap();
        let db = Db::connect(&url, &StoreOptions::default()).await.unwrap();
        let mut conn = sqlite_pool(&db).acquire().await.unwrap();
        let before = conn.cached_statements_size();
        let shapes = MAX_BATCH_ROWS;
        for rows in 1..=shapes {
            let sql = db.statements.delete_keyed_rows(rows);
            let mut query = sqlx::query(&sql);
            for i in 0..rows {
                query = query.bind(format!("fake/{i}")).bind("collectedMetricsIndex");
            }
            query.execute(&mut *conn).await.unwrap();
        }
        assert!(shapes > 100 && shapes <= STATEMENT_CACHE_CAPACITY);
        assert_eq!(conn.cached_statements_size(), before + shapes);
    }
}
