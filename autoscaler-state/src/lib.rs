//! # autoscaler-state
//!
//! Where the autoscaler keeps its per-job state between cycles, and a handler that keeps its
//! events: implementations of [`AutoScalerStateStore`](autoscaler_core::AutoScalerStateStore) and
//! [`AutoScalerEventHandler`](autoscaler_core::AutoScalerEventHandler) over memory, a SQLite file
//! (the default), PostgreSQL and MySQL/MariaDB, following the reference's JDBC plugin
//! (`flink-autoscaler-plugin-jdbc`) with the improvements listed below.
//!
//! ```no_run
//! use autoscaler_core::config::Configuration;
//! use autoscaler_core::{AutoScalerStateStore, BasicJobContext};
//! use autoscaler_state::{open_event_handler, open_state_store};
//!
//! # async fn demo() -> Result<(), autoscaler_core::StateError> {
//! let store = open_state_store("sqlite:autoscaler-state.db").await?;
//! let events = open_event_handler("sqlite:autoscaler-state.db").await?;
//! let ctx = BasicJobContext::new("a1b2c3".to_owned(), Configuration::new(), ());
//! let mut overrides = store.get_parallelism_overrides(&ctx).await?;
//! overrides.insert("bc764cd8ddf7a0cff126f51c16239658".into(), 4);
//! store.store_parallelism_overrides(&ctx, &overrides).await?;
//! autoscaler_state::flush_or_warn(&store, &events, &ctx).await?; // one transaction
//! # Ok(()) }
//! ```
//!
//! ## Stores and URLs
//!
//! | URL | Store |
//! |---|---|
//! | `memory` | [`InMemoryStateStore`] semantics: nothing persisted, `flush` writes nothing |
//! | `sqlite:PATH` (`sqlite://PATH`, `sqlite::memory:`) | one SQLite file, created if missing, WAL journal |
//! | `postgres://user@host:5432/db` (`postgresql://`) | PostgreSQL; `?options[search_path]=schema` picks a schema |
//! | `mysql://user@host:3306/db` (`mariadb://`) | MySQL 5.7+/8 or MariaDB 10.3+ |
//!
//! [`open_state_store`] and [`open_event_handler`] take these URLs (the CLI's `--state`);
//! [`AnyStateStore::open_with`] takes [`StoreOptions`] too (pool size, acquire timeout that bounds
//! a flush against a dead database, SQLite busy timeout, compression threshold, migrations on/off).
//!
//! ## Caching and flush (the reference's `JobStateView`)
//!
//! - The first access to a job reads all its rows with one query and caches them, typed; every
//!   later read is served from the cache, so a row written by another process is not seen until
//!   the job is dropped with `remove_info_from_cache`. A failed load caches nothing; the next
//!   access retries.
//! - Each (job, state type) has the reference's flush state: NOT_NEEDED, NEEDS_CREATE,
//!   NEEDS_UPDATE, UP_TO_DATE, NEEDS_DELETE, with the same transitions. `flush` does nothing when
//!   nothing changed; otherwise it writes the job's changed rows (upserts, then deletes) in **one
//!   transaction**, so a process killed mid-flush leaves every job's rows all old or all new.
//! - **Group commit.** A flush that adds to a known metric window (nearly every cycle's) is
//!   written together with the other jobs' flushes waiting at that moment (up to 64; while
//!   flushes come in company, a small group waits 2 ms for more, a lone flush never waits): one
//!   transaction, one statement that checks every fenced job's lease, one that locks every
//!   window index, and the rows of all of them in batched upserts and deletes. Each job keeps its
//!   own outcome: a job whose lease is no longer this replica's is refused alone, one whose
//!   window another process rewrote is written whole on its own, and if the group's transaction
//!   fails every job of it is written on its own, so one job's bad row fails that job only. A
//!   job's rows are still all old or all new. The flush returns once its group committed.
//! - **Evaluated metrics stay in memory.** `store_evaluated_metrics` keeps them in the cache and
//!   no flush writes them: each cycle that evaluates replaces them and none reads them (the next
//!   cycle evaluates again from the persisted window), as the reference's `JobAutoScalerImpl`
//!   keeps its last evaluated metrics in memory. A process opened anew has none until its first
//!   evaluation; an `evaluatedMetrics` row an earlier release wrote is deleted by the job's next
//!   flush.
//! - A row that cannot be decoded is dropped with a logged error and deleted on the next flush
//!   (the reference's `testDiscardInvalidHistory`); a row of an unknown state type (written by a
//!   newer release) is ignored with a warning.
//! - **Flush failure** (database down, disk full): the flush returns
//!   [`StateError::Backend`](autoscaler_core::StateError) with `operation = "flush"` and the cache
//!   keeps the unflushed changes, so the next flush writes them. The reference drops the job's
//!   cache instead, losing them. [`flush_or_warn`] also emits a Warning event
//!   ([`STATE_FLUSH_FAILED_REASON`]). A deadlock or busy database is retried twice first.
//!
//! ## Schema (embedded migrations, `migrations/<dialect>/0001_autoscaler_tables.sql` and `0002_job_leases.sql`)
//!
//! Opening a database store runs sqlx's migrator (its `_sqlx_migrations` table records version
//! `20261201000001` and, for the lease tables of [several replicas](#several-replicas),
//! `20261205000001`; other sqlx applications' rows there are tolerated), which creates the
//! reference's two tables if missing; the reference never creates them. Set
//! [`StoreOptions::migrate`] to `false` when a DBA applies the SQL files instead.
//!
//! `t_flink_autoscaler_state_store`: `id` (identity PK), `create_time` (**added**: when the row
//! was first written), `update_time` (time of the flush that last wrote it), `job_key` (the job
//! key's `Display` form), `state_type`, `state_value` (text), unique (`job_key`, `state_type`)
//! `un_job_state_type_inx`. Differences from the reference's DDL: PostgreSQL uses `TIMESTAMPTZ`
//! and an identity id; MySQL uses `DATETIME(6)` in UTC and `job_key VARBINARY(764)` instead of
//! `varchar(191) utf8mb4_general_ci`, so job keys differing only in case, accents or trailing
//! spaces are distinct rows (a key longer than 764 UTF-8 bytes fails the flush with a typed
//! error); SQLite stores times as RFC 3339 text. A PostgreSQL job key cannot hold a NUL character
//! (PostgreSQL text cannot). The reference's DDL also creates a `flink_autoscaler` database; here
//! the tables go into the database (and PostgreSQL schema) the URL names.
//!
//! `state_type` values are the reference's `scalingHistory`, `scalingTracking`, `collectedMetrics`,
//! `parallelismOverrides`, `configOverrides`, `delayedScaleDown`. The metric window is not one
//! `collectedMetrics` row but one row per snapshot, `collectedMetrics#<slot>` (a number), plus the
//! index row `collectedMetricsIndex`. A snapshot's row names its instant in the value (`"at"`,
//! below); as the window slides, the row of the snapshot that left it is overwritten in place with
//! the one that entered, so a cycle's flush updates two rows (the slot and the index) and inserts
//! and deletes none. Earlier releases wrote the window as one `collectedMetrics` row, then as rows
//! keyed by instant (`collectedMetrics@<RFC 3339>`); both load, and the window's next flush
//! replaces them with slot rows. Earlier releases also wrote `evaluatedMetrics`; see above.
//!
//! `t_flink_autoscaler_event_handler`: exactly the reference's columns (`id`, `create_time`,
//! `update_time`, `job_key`, `reason`, `event_type`, `message`, `event_count`, `event_key`) and its
//! two indexes (`job_key, reason, event_key`) and (`job_key, reason, create_time`).
//!
//! ## Serialization and format version
//!
//! `state_value` holds a serde JSON envelope: `{"v":1,"state":<the state as JSON>}`, or, when the
//! JSON is at least [`StoreOptions::compression_threshold`] bytes (64 KiB by default; in practice a
//! long collected-metrics history), `{"v":1,"gzip":"<base64 of the gzipped JSON>"}`. A window
//! row names its snapshot's instant after the version and holds the snapshot packed (format
//! version 2): `{"v":2,"at":"2024-05-01T12:00:00.000000000Z","packed":"<base64>"}`, the bytes of
//! [`autoscaler_metrics::PACKED_LAYOUT`], bit for bit (a 10-vertex snapshot's row is about 600
//! bytes so, against 2.2 KB of JSON, and rows that small share the database's pages); packed
//! bytes past the compression threshold are gzipped (`"packedGzip"`). Releases before version 2
//! wrote window rows as JSON, `{"v":1,"at":...,"state":...}`; they still load. [`FORMAT_VERSION`] is the newest version;
//! every release reads every older version (`tests/fixtures/format-v1` and
//! `tests/fixtures/format-v1-slots` hold rows of version 1, `tests/fixtures/format-v2-slots` of
//! version 2, that the tests load), and a newer version is a typed
//! [`StateError::Serialization`](autoscaler_core::StateError), which discards that state as
//! above. In JSON, NaN and infinities are the strings `"NaN"`, `"Infinity"`, `"-Infinity"`. The
//! values are not byte-compatible with the reference's Jackson JSON (times are RFC 3339 here).
//!
//! ## Events
//!
//! [`AnyEventHandler`] stores events with the reference's dedup: with an interval, the newest row
//! of the same job, reason and event key is updated (count + 1, new message, new update time) if it
//! was *created* less than the interval ago, else a row is inserted; without an interval a row is
//! always inserted. The event key is [`event_key`], a stable hash (the reference's varies between
//! JVM runs). Executed scaling reports are never deduplicated; unexecuted ones are keyed by their
//! parallelism hash. [`AnyEventHandler::events`] reads a job's events back;
//! [`AnyEventHandler::delete_expired`] is the TTL cleanup, and
//! [`AnyEventHandler::spawn_ttl_cleaner`] runs it periodically as the reference's daily cleaner
//! does (one `DELETE ... WHERE create_time < cutoff`, not the reference's 2000-id windows).
//! Storing an event never fails the caller: an error (database down) is logged.
//!
//! ## Two autoscaler processes on one database, without leases
//!
//! Safe, not coordinated. Each process has its own cache; upserts mean neither fails on the unique
//! index when both write a job (the reference's INSERT does), writes of one job flush in one
//! transaction in a fixed row order (no deadlock between two writers; a deadlock or busy error is
//! retried), and migrations are serialized by sqlx's lock. If both scale the *same* job, the last
//! flush wins per job and each process keeps acting on its own cached view until
//! `remove_info_from_cache`: attach a [`DbJobOwnership`] (next section) so that each job has one
//! owner. SQLite files may be shared by processes on one host (WAL, busy timeout), not over a
//! network share. `tests/crash.rs` runs two child processes writing the same jobs on each
//! database, and kills a writer with SIGKILL mid-flush; `tests/conformance.rs` has the
//! in-process variants.
//!
//! ## Several replicas
//!
//! Any number of autoscaler processes may share one database (one SQLite file on one host).
//! [`DbJobOwnership::attach`] ties a store to job leases held in the database, the
//! [`JobOwnership`](autoscaler_core::JobOwnership) the standalone loop asks each round which
//! jobs are this replica's (`StandaloneAutoscaler::with_ownership`). Coordination goes only
//! through the database's transactions, conditional writes and clock, as Kubernetes `Lease`
//! objects and the reference operator's leader election do, applied per job.
//!
//! ### Tables (migration `0002_job_leases.sql` of each dialect)
//!
//! - `t_flink_autoscaler_replica (replica_id, heartbeat_at)`: one row per replica, its last
//!   heartbeat. A replica is **live** while its heartbeat is younger than the lease duration.
//! - `t_flink_autoscaler_job_lease (job_key, owner, epoch, expires_at)`: one row per job ever
//!   leased. `owner` is `NULL` when the lease is free; `epoch` grows by one every time the lease
//!   is taken; `expires_at` is when it lapses.
//!
//! Every time is milliseconds since the Unix epoch **on the database's clock**: the statements
//! compute it themselves (`julianday('now')`, `clock_timestamp()`, `UTC_TIMESTAMP(6)`), so
//! replicas whose clocks disagree still agree on who holds what.
//!
//! ### One round ([`JobOwnership::acquire_and_renew`](autoscaler_core::JobOwnership::acquire_and_renew))
//!
//! 1. Heartbeat, then read the live replicas.
//! 2. For each candidate job, the **rendezvous winner** among the live replicas
//!    ([`rendezvous_winner`](autoscaler_core::rendezvous_winner)) is the replica that should own it. Every replica computes the same
//!    winner from the same member list, and a replica joining or leaving moves only the jobs it
//!    wins or won.
//! 3. Give up (set free) the leases this replica holds on jobs it no longer wins or that are no
//!    longer candidates: a handoff, which the winner completes at its next round.
//! 4. Renew the leases still held: `expires_at = now + duration` only where `owner` is this
//!    replica and the lease has not expired. An expired lease is never renewed, even if nobody
//!    took it: it must be taken again, which grows its epoch.
//! 5. Take the jobs this replica wins and does not hold, only where the lease is free or
//!    expired: `owner = me, epoch = epoch + 1, expires_at = now + duration`. A job another
//!    live replica still holds is left alone until that replica gives it up (step 3 of its next
//!    round) or stops renewing it (its lease expires).
//! 6. Read back what this replica holds, unexpired: that, with the local deadline
//!    `round start + lease duration - safety margin`, is the answer.
//!
//! Each step is one conditional statement (per 200 jobs), so two replicas racing for a lease
//! cannot both get it: the database serializes the two updates and the second finds the lease
//! taken. A failed step fails the round; the previous answer then lapses at its local deadlines.
//!
//! ### Fencing
//!
//! The store the ownership is attached to ([`DbJobOwnership::attach`]) fences every flush: the
//! job must be held on this process's clock (its local deadline not passed), the cache must have
//! been loaded under the current epoch, and the flush's transaction first runs
//! `UPDATE ... SET epoch = epoch WHERE job_key = ? AND owner = ? AND epoch = ? AND expires_at > now`.
//! Matching no row refuses the flush with [`StateError::Fenced`] and nothing is written; matching
//! it locks the lease row until the commit, so a takeover waits for the flush and the new owner
//! reads what it wrote.
//!
//! ### Guarantees and failure modes
//!
//! - At most one replica holds a job's lease at any instant of the database's clock, and a
//!   replica stops acting on its own clock before that instant (the safety margin, a third of
//!   the lease duration, see [`HaOptions::safety_margin`](autoscaler_core::HaOptions::safety_margin)).
//! - A replica killed (`kill -9`) or cut off stops renewing; its heartbeat ages out and its
//!   leases expire after at most the lease duration, then the new winners take its jobs at their
//!   next round: takeover within lease duration + renew interval.
//! - A replica that shuts down cleanly calls [`JobOwnership::leave`](autoscaler_core::JobOwnership::leave): its leases are freed and it
//!   leaves the member list at once, so the others take over at their next round.
//! - A replica frozen longer than its lease (a stopped VM, a paused container) may resume
//!   believing it still holds its jobs; its first flush is refused by the epoch check.
//! - A job whose rendezvous winner does not list it (replicas whose job lists differ) has no
//!   owner until the lists agree: give every replica the same job source.
//! - Two processes with the same replica id would share its leases: keep ids unique (the
//!   default, host name and pid, is).
//! - Without the database nobody can take or renew anything: every replica stops acting once its
//!   local deadlines pass, and resumes when the database is back.
//!
//! ### Tested and measured
//!
//! `tests/leases.rs` runs the protocol against each database: three contenders racing for the
//! same free leases (one winner each), renewals racing expiry (never both), epochs growing by one
//! per change of owner, a stale owner's flush refused with nothing written, a handoff, a
//! reacquired job read again, and 60 jobs over three replicas (22/20/18; when one left, exactly
//! its 18 jobs moved). `tests/replicas.rs` runs standalone loops on each database with leases of
//! 1 s renewed every 300 ms and cycles every 100 ms: the jobs of a replica killed without a
//! handoff were taken over 1.01 to 1.18 s after the kill, a replica cut off from the database
//! started its last cycle 0.52 to 0.58 s after the cut (its leases lapsed on the database after
//! 1 s), and a replica stopping cleanly (its loop's shutdown, then `leave`) had its 6 jobs
//! cycled by the other 0.09 to 0.47 s after the stop began. Each job's counter, incremented by
//! every cycle through the fenced store, never repeated a value: no two writers, and every new
//! owner started from the persisted state. (Cutting the network can lose a count's
//! acknowledgement, not the count: a commit that reached the database while the connection was
//! cut reports an error to its writer.) At the protocol level (`tests/leases.rs`), a `leave`
//! and one round of the other replica hand 6 jobs over in 2 to 30 ms.
//! A round over 1000 jobs (debug build, loopback servers) takes them all in 15 ms (SQLite),
//! 250 ms (PostgreSQL 15), 235 ms (MariaDB 10.11), and renews them in 13, 106 and 65 ms.
//!
//! ## Cost (`cargo bench -p autoscaler-state --bench store`)
//!
//! One job with a full history (20 vertices, 90 snapshots of 12 metrics: 695 KB of JSON, stored
//! gzip-compressed), loopback servers, a 2-core machine under load; medians:
//!
//! | store | store + flush every state | load after a restart | cached read of the history |
//! |---|---|---|---|
//! | memory | 0.19 ms | n/a | 0.09 ms |
//! | SQLite | 8.1 ms | 5.5 ms | 0.10 ms |
//! | PostgreSQL 15 | 16.8 ms | 7.0 ms | 0.08 ms |
//! | MariaDB 10.11 | 15.1 ms | 6.6 ms | 0.10 ms |
//!
//! Encoding and compressing the history dominates a flush; a cycle's reads never touch the database.

mod cache;
mod codec;
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "mysql"))]
mod db;
#[cfg(not(any(feature = "sqlite", feature = "postgres", feature = "mysql")))]
#[path = "nodb.rs"]
mod db;
mod event;
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "mysql"))]
mod lease;
#[cfg(not(any(feature = "sqlite", feature = "postgres", feature = "mysql")))]
#[path = "nolease.rs"]
mod lease;
mod rows;
mod store;
mod url;

/// The stores' error: the core's [`StateError`], which the
/// [`AutoScalerStateStore`](autoscaler_core::AutoScalerStateStore) trait returns.
pub use autoscaler_core::StateError;
/// `Result` with [`StateError`] as the default error type (as sqlx's `Result`).
pub type Result<T, E = StateError> = std::result::Result<T, E>;

pub use codec::{
    DEFAULT_COMPRESSION_THRESHOLD, FORMAT_VERSION, MAX_DECOMPRESSED_STATE_BYTES, StateType, decode_state_value,
    decode_window_row,
};
pub use event::{AnyEventHandler, StoredEvent, event_key, open_event_handler};
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "mysql"))]
pub use lease::{DbJobOwnership, LeaseInfo};
pub use store::{
    AnyStateStore, InMemoryStateStore, STATE_FLUSH_DURATION, STATE_FLUSH_ERRORS, STATE_FLUSH_FAILED_REASON,
    STATE_FLUSH_GROUP_BUCKETS, STATE_FLUSH_GROUP_JOBS, STATE_ROWS_DISCARDED, flush_or_warn, open_state_store,
};
pub use url::{StateUrl, StoreOptions};
