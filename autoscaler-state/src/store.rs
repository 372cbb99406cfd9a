//! The state stores: one caching store over any backend ([`AnyStateStore`]) and the in-memory
//! store ([`InMemoryStateStore`]).

use crate::cache::JobView;
use crate::codec::{StateType, StateValue};
use crate::db::{Db, Fence, StateUrl, StoreOptions};
use crate::lease::FenceBook;
use async_trait::async_trait;
use autoscaler_core::AutoScalerEventHandler;
use autoscaler_core::JobAutoScalerContext;
use autoscaler_core::cycle::{JobState, StateChanges};
use autoscaler_core::{
    AutoScalerStateStore, ConfigChanges, DelayedScaleDown, ParallelismOverrides, ScalingHistory, ScalingTracking,
    StateError, StateResult,
};
use autoscaler_metrics::{EvaluatedMetrics, MetricHistory};
use std::fmt::Display;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Instant;

/// Name of the histogram of state flush latency in seconds, labelled `store` (`sqlite`,
/// `postgres`, `mysql`): one sample per flush that writes to a database (a flush with nothing
/// changed writes nothing and is not counted). Emitted through the `metrics` facade.
pub const STATE_FLUSH_DURATION: &str = "flink_autoscaler_state_flush_duration_seconds";
/// Name of the histogram of the jobs one group commit wrote together (see the crate docs,
/// "Group commit"), labelled like [`STATE_FLUSH_DURATION`]: one sample per group transaction.
pub const STATE_FLUSH_GROUP_JOBS: &str = "flink_autoscaler_state_flush_group_jobs";
/// Buckets for [`STATE_FLUSH_GROUP_JOBS`]: up to the 64 jobs a group holds.
pub const STATE_FLUSH_GROUP_BUCKETS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0];
/// Name of the counter of failed state flushes, labelled like [`STATE_FLUSH_DURATION`].
pub const STATE_FLUSH_ERRORS: &str = "flink_autoscaler_state_flush_errors_total";

/// Name of the counter of state rows read from the database that could not be decoded and were
/// discarded (and deleted when the job's states are next written: a history or override row by
/// its next flush, a window row by the next flush of the window), labelled like
/// [`STATE_FLUSH_DURATION`]. A
/// discarded window row costs the job that snapshot; a discarded scaling history or override
/// costs what it held, as the reference's discard of an undeserializable state does.
pub const STATE_ROWS_DISCARDED: &str = "flink_autoscaler_state_rows_discarded_total";

/// Records one database flush in [`STATE_FLUSH_DURATION`] and, when it failed, [`STATE_FLUSH_ERRORS`].
fn record_flush(store: &'static str, started: Instant, ok: bool) {
    metrics::histogram!(STATE_FLUSH_DURATION, "store" => store).record(started.elapsed().as_secs_f64());
    if !ok {
        metrics::counter!(STATE_FLUSH_ERRORS, "store" => store).increment(1);
    }
}

/// Reason of the Warning event [`flush_or_warn`] emits when a flush fails.
pub const STATE_FLUSH_FAILED_REASON: &str = "StateFlushFailed";

/// The cached states of one job; `None` until loaded (a failed load is retried by the next access).
type JobSlot = Arc<tokio::sync::Mutex<Option<Loaded>>>;

/// A job's cached states and the lease epoch they were loaded under (`None`: no lease, either
/// because the store is not fenced or because this replica does not hold the job).
#[derive(Debug)]
struct Loaded {
    view: JobView,
    epoch: Option<u64>,
}

/// A state store over any backend: the in-memory one, a SQLite file, PostgreSQL or MySQL/MariaDB.
///
/// Reads are served from a per-job cache filled by one query on the job's first access; writes
/// stay in the cache until [`flush`](AutoScalerStateStore::flush), which writes the job's changed
/// rows in one transaction. A failed flush keeps the cache, so the next flush writes the same
/// changes again. The job key's `Display` form is the row key.
#[derive(Debug)]
pub struct AnyStateStore {
    db: Option<Arc<Db>>,
    /// Set once a [`DbJobOwnership`](crate::DbJobOwnership) is attached: from then on every
    /// flush is fenced by the job's lease.
    fences: OnceLock<Arc<FenceBook>>,
    url: StateUrl,
    compression_threshold: usize,
    /// foldhash: a lookup per job-cycle, where SipHash costs more than the rest of a lookup.
    jobs: Mutex<foldhash::HashMap<String, JobSlot>>,
    bytes_written: AtomicU64,
    window_bytes_written: AtomicU64,
}

impl AnyStateStore {
    /// A store keeping everything in memory (what `memory` opens).
    pub fn in_memory() -> Self {
        AnyStateStore {
            db: None,
            fences: OnceLock::new(),
            url: StateUrl::Memory,
            compression_threshold: usize::MAX,
            jobs: Mutex::default(),
            bytes_written: AtomicU64::new(0),
            window_bytes_written: AtomicU64::new(0),
        }
    }

    /// Opens the store at `url` with default [`StoreOptions`]; see [`open_state_store`].
    pub async fn open(url: &str) -> StateResult<Self> {
        Self::open_with(url, &StoreOptions::default()).await
    }

    /// Opens the store at `url` (`memory`, `sqlite:PATH`, `postgres://...`, `mysql://...`), creating
    /// the SQLite file and the tables if missing.
    pub async fn open_with(url: &str, options: &StoreOptions) -> StateResult<Self> {
        let url: StateUrl = url.parse()?;
        if url == StateUrl::Memory {
            return Ok(Self::in_memory());
        }
        let db = Db::connect(&url, options).await?;
        Ok(AnyStateStore {
            db: Some(Arc::new(db)),
            fences: OnceLock::new(),
            url,
            compression_threshold: options.compression_threshold,
            jobs: Mutex::default(),
            bytes_written: AtomicU64::new(0),
            window_bytes_written: AtomicU64::new(0),
        })
    }

    /// Where the store keeps its state (password redacted).
    pub fn url(&self) -> &StateUrl {
        &self.url
    }

    /// Bytes of `state_value` this store's flushes have written so far (the rows a flush after
    /// one new snapshot writes: that snapshot, the window index and the other states that
    /// changed). A window written whole again, because another process wrote the job meanwhile,
    /// counts as the difference only.
    pub fn bytes_written(&self) -> u64 {
        self.bytes_written.load(Ordering::Relaxed)
    }

    /// The part of [`bytes_written`](Self::bytes_written) that is the metric window: the new
    /// snapshot rows and the window's index row (one snapshot and the index, a flush after one
    /// new snapshot).
    pub fn window_bytes_written(&self) -> u64 {
        self.window_bytes_written.load(Ordering::Relaxed)
    }

    /// Whether nothing is persisted.
    pub fn is_in_memory(&self) -> bool {
        self.db.is_none()
    }

    /// Closes the database pool; later operations on the store fail.
    pub async fn close(&self) {
        if let Some(db) = &self.db {
            db.close().await;
        }
    }

    fn job_slot(&self, job_key: &str) -> JobSlot {
        let mut jobs = self.jobs.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = jobs.get(job_key) {
            return Arc::clone(slot);
        }
        jobs.entry(job_key.to_owned()).or_default().clone()
    }

    /// Runs `f` on the job's loaded view, loading it first if needed.
    ///
    /// In a fenced store the view belongs to the lease epoch it was loaded under: a job this
    /// replica (re)acquired since is loaded again from the database, so the new owner starts from
    /// what the previous one persisted; a job it does not hold is read from the database and
    /// not kept.
    async fn with_view<R>(&self, job_key: &str, f: impl FnOnce(&mut JobView) -> R) -> StateResult<R> {
        let epoch = self.fences.get().map(|book| book.epoch(job_key));
        let slot = self.job_slot(job_key);
        let mut guard = slot.lock().await;
        let epoch = epoch.flatten();
        if guard.as_ref().is_some_and(|loaded| loaded.epoch != epoch) {
            *guard = None;
        }
        let loaded = match &mut *guard {
            Some(loaded) => loaded,
            empty => empty.insert(Loaded {
                view: self.load(job_key).await?,
                epoch,
            }),
        };
        let result = f(&mut loaded.view);
        if self.fences.get().is_some() && epoch.is_none() {
            *guard = None;
        }
        Ok(result)
    }

    async fn load(&self, job_key: &str) -> StateResult<JobView> {
        match &self.db {
            None => Ok(JobView::default()),
            Some(db) => {
                let (view, discarded) = JobView::from_rows(job_key, db.load_states(job_key).await?);
                if discarded > 0 {
                    metrics::counter!(STATE_ROWS_DISCARDED, "store" => self.url.backend()).increment(discarded);
                }
                Ok(view)
            }
        }
    }

    async fn get(&self, job_key: &str, state_type: StateType) -> StateResult<Option<StateValue>> {
        self.with_view(job_key, |view| view.get(state_type).cloned()).await
    }

    async fn put(&self, job_key: &str, value: StateValue) -> StateResult<()> {
        self.with_view(job_key, |view| view.put(value)).await
    }

    async fn remove(&self, job_key: &str, state_type: StateType) -> StateResult<()> {
        self.with_view(job_key, |view| view.remove(state_type)).await
    }

    async fn clear(&self, job_key: &str) -> StateResult<()> {
        self.with_view(job_key, JobView::clear).await
    }

    /// Writes the job's pending changes in one transaction; on failure the cache keeps them.
    ///
    /// In a fenced store the flush first needs a lease of the job that is valid on this
    /// process's clock, for the epoch the cache was loaded under, and the transaction checks it
    /// on the database too; a refusal ([`StateError::Fenced`]) writes nothing and drops the
    /// job's cache.
    async fn flush_job(&self, job_key: &str) -> StateResult<()> {
        let fence = match self.fences.get() {
            None => None,
            Some(book) => Some((book, book.valid_epoch(job_key)?)),
        };
        let slot = self.job_slot(job_key);
        // Holding the job's lock through the write keeps concurrent puts from being marked flushed
        // without having been written.
        let mut guard = slot.lock().await;
        if let Some((_, epoch)) = fence
            && guard.as_ref().is_some_and(|loaded| loaded.epoch != Some(epoch))
        {
            *guard = None;
            return Err(StateError::Fenced {
                job_key: job_key.to_owned(),
                reason: format!("its cached state was loaded before this replica acquired epoch {epoch}"),
            });
        }
        let Some(loaded) = guard.as_mut() else {
            return Ok(()); // never loaded: nothing changed
        };
        let view = &mut loaded.view;
        let Some(db) = &self.db else {
            view.mark_flushed(None);
            return Ok(());
        };
        let Some((writes, flushed)) = view.writes(self.compression_threshold)? else {
            return Ok(());
        };
        let started = Instant::now();
        let fence = fence.map(|(book, epoch)| Fence {
            owner: book.replica(),
            epoch: i64::try_from(epoch).unwrap_or(i64::MAX),
        });
        let written = db.write_states(job_key, writes, fence).await;
        record_flush(self.url.backend(), started, written.is_ok());
        if let Err(error) = written {
            if matches!(error, StateError::Fenced { .. }) {
                // Not ours any more: what this replica cached is not the job's state.
                *guard = None;
            }
            return Err(error);
        }
        self.bytes_written.fetch_add(flushed.bytes, Ordering::Relaxed);
        self.window_bytes_written
            .fetch_add(flushed.window_bytes, Ordering::Relaxed);
        view.mark_flushed(Some(flushed));
        Ok(())
    }

    /// The store's database, if it has one.
    #[cfg_attr(
        not(any(feature = "sqlite", feature = "postgres", feature = "mysql")),
        allow(dead_code)
    )] // used by the leases
    pub(crate) fn database(&self) -> Option<&Db> {
        self.db.as_deref()
    }

    /// The database and the fence book of a store a [`DbJobOwnership`](crate::DbJobOwnership)
    /// attaches to; fails if the store has no database or is already fenced.
    #[cfg_attr(
        not(any(feature = "sqlite", feature = "postgres", feature = "mysql")),
        allow(dead_code)
    )] // used by the leases
    pub(crate) fn attach_fences(&self, book: Arc<FenceBook>) -> StateResult<Arc<Db>> {
        let Some(db) = &self.db else {
            return Err(StateError::Backend {
                operation: "lease",
                message: "the `memory` store has no database to hold leases: run one process, or use SQLite, PostgreSQL or MySQL".to_owned(),
                source: None,
            });
        };
        self.fences.set(book).map_err(|_| StateError::Backend {
            operation: "lease",
            message: "this store already has a job ownership attached".to_owned(),
            source: None,
        })?;
        Ok(Arc::clone(db))
    }

    fn forget(&self, job_key: &str) {
        let mut jobs = self.jobs.lock().unwrap_or_else(PoisonError::into_inner);
        jobs.remove(job_key);
    }
}

/// Opens the state store at `url`: `memory`, `sqlite:PATH` (the file is created if missing),
/// `postgres://user@host:port/db`, `mysql://user@host:port/db` (or `mariadb://`). The tables are
/// created by the embedded migrations.
pub async fn open_state_store(url: &str) -> Result<AnyStateStore, StateError> {
    AnyStateStore::open(url).await
}

/// Flushes `ctx`'s state; if that fails, emits a Warning event ([`STATE_FLUSH_FAILED_REASON`])
/// through `events` and returns the typed error. The cached state is kept, so the next flush
/// writes it. A flush refused because this replica no longer owns the job
/// ([`StateError::Fenced`]) emits no event: the job is another replica's to report on.
pub async fn flush_or_warn<K, Ctx, S, E>(store: &S, events: &E, ctx: &Ctx) -> StateResult<()>
where
    Ctx: JobAutoScalerContext<K>,
    S: AutoScalerStateStore<K, Ctx> + ?Sized,
    E: AutoScalerEventHandler<K, Ctx> + ?Sized,
{
    let result = store.flush(ctx).await;
    match &result {
        Err(error @ StateError::Fenced { .. }) => tracing::warn!(%error, "not the job's owner any more"),
        Err(error) => events.handle_exception(ctx, STATE_FLUSH_FAILED_REASON, error).await,
        Ok(()) => {}
    }
    result
}

/// A state the store keeps as one [`StateValue`] variant (all but the evaluated metrics, which
/// are shared and optional): its type, and how it is taken out of and put into a value.
trait Stored: Clone + Default {
    const TYPE: StateType;
    fn of(value: &StateValue) -> Option<&Self>;
    fn into_value(self) -> StateValue;
}

macro_rules! stored {
    ($ty:ty, $variant:ident) => {
        impl Stored for $ty {
            const TYPE: StateType = StateType::$variant;
            fn of(value: &StateValue) -> Option<&Self> {
                match value {
                    StateValue::$variant(v) => Some(v),
                    _ => None,
                }
            }
            fn into_value(self) -> StateValue {
                StateValue::$variant(self)
            }
        }
    };
}

stored!(ScalingHistory, ScalingHistory);
stored!(ScalingTracking, ScalingTracking);
stored!(MetricHistory, CollectedMetrics);
stored!(ParallelismOverrides, ParallelismOverrides);
stored!(ConfigChanges, ConfigOverrides);
stored!(DelayedScaleDown, DelayedScaleDown);

/// The job's `T` in `view`, or the empty `T` when none is stored.
fn read_view<T: Stored>(view: &JobView) -> T {
    view.get(T::TYPE).and_then(T::of).cloned().unwrap_or_default()
}

impl AnyStateStore {
    /// The job's `T` (empty when none is stored).
    async fn read<T: Stored>(&self, job_key: &str) -> StateResult<T> {
        self.with_view(job_key, |view| read_view::<T>(view)).await
    }

    /// Every state of a cycle, under one lock of the job.
    async fn job_state(&self, job_key: &str) -> StateResult<JobState> {
        self.with_view(job_key, |view| JobState {
            metric_history: read_view(view),
            scaling_history: read_view(view),
            scaling_tracking: read_view(view),
            delayed_scale_down: read_view(view),
            parallelism_overrides: read_view(view),
            config_changes: read_view(view),
            // Written by every cycle that evaluates, read by none.
            evaluated_metrics: None,
        })
        .await
    }

    /// The parts of `state` that `changes` marks, put under one lock of the job.
    async fn put_job_state(&self, job_key: &str, state: &JobState, changes: &StateChanges) -> StateResult<()> {
        fn put_if<T: Stored>(view: &mut JobView, changed: bool, value: &T) {
            if changed {
                view.put(value.clone().into_value());
            }
        }
        // Every part named, so a part added to the state cannot be left unwritten.
        let StateChanges {
            metric_history,
            scaling_history,
            scaling_tracking,
            delayed_scale_down,
            parallelism_overrides,
            config_changes,
            evaluated_metrics,
        } = *changes;
        self.with_view(job_key, |view| {
            put_if(view, metric_history, &state.metric_history);
            put_if(view, scaling_history, &state.scaling_history);
            put_if(view, scaling_tracking, &state.scaling_tracking);
            put_if(view, parallelism_overrides, &state.parallelism_overrides);
            put_if(view, config_changes, &state.config_changes);
            put_if(view, delayed_scale_down, &state.delayed_scale_down);
            if let Some(evaluated) = state.evaluated_metrics.as_ref().filter(|_| evaluated_metrics) {
                view.put(StateValue::EvaluatedMetrics(Arc::clone(evaluated)));
            }
        })
        .await
    }
}

/// Implements the trait for a type whose `$inner` expression yields an `&AnyStateStore`.
macro_rules! impl_state_store {
    ($ty:ty, |$this:ident| $inner:expr) => {
        #[async_trait]
        impl<K, Ctx> AutoScalerStateStore<K, Ctx> for $ty
        where
            K: Display + Send + Sync,
            Ctx: JobAutoScalerContext<K>,
        {
            async fn store_scaling_history(&self, ctx: &Ctx, history: &ScalingHistory) -> StateResult<()> {
                let $this = self;
                let key = ctx.job_key().to_string();
                $inner.put(&key, history.clone().into_value()).await
            }
            async fn get_scaling_history(&self, ctx: &Ctx) -> StateResult<ScalingHistory> {
                let $this = self;
                let key = ctx.job_key().to_string();
                $inner.read::<ScalingHistory>(&key).await
            }
            async fn remove_scaling_history(&self, ctx: &Ctx) -> StateResult<()> {
                let $this = self;
                let key = ctx.job_key().to_string();
                $inner.remove(&key, StateType::ScalingHistory).await
            }

            async fn store_scaling_tracking(&self, ctx: &Ctx, tracking: &ScalingTracking) -> StateResult<()> {
                let $this = self;
                let key = ctx.job_key().to_string();
                $inner.put(&key, tracking.clone().into_value()).await
            }
            async fn get_scaling_tracking(&self, ctx: &Ctx) -> StateResult<ScalingTracking> {
                let $this = self;
                let key = ctx.job_key().to_string();
                $inner.read::<ScalingTracking>(&key).await
            }
            async fn remove_scaling_tracking(&self, ctx: &Ctx) -> StateResult<()> {
                let $this = self;
                let key = ctx.job_key().to_string();
                $inner.remove(&key, StateType::ScalingTracking).await
            }

            async fn store_collected_metrics(&self, ctx: &Ctx, history: &MetricHistory) -> StateResult<()> {
                let $this = self;
                let key = ctx.job_key().to_string();
                $inner.put(&key, history.clone().into_value()).await
            }
            async fn get_collected_metrics(&self, ctx: &Ctx) -> StateResult<MetricHistory> {
                let $this = self;
                let key = ctx.job_key().to_string();
                $inner.read::<MetricHistory>(&key).await
            }
            async fn remove_collected_metrics(&self, ctx: &Ctx) -> StateResult<()> {
                let $this = self;
                let key = ctx.job_key().to_string();
                $inner.remove(&key, StateType::CollectedMetrics).await
            }

            async fn store_evaluated_metrics(&self, ctx: &Ctx, metrics: &Arc<EvaluatedMetrics>) -> StateResult<()> {
                let $this = self;
                let key = ctx.job_key().to_string();
                $inner
                    .put(&key, StateValue::EvaluatedMetrics(Arc::clone(metrics)))
                    .await
            }
            async fn get_evaluated_metrics(&self, ctx: &Ctx) -> StateResult<Option<EvaluatedMetrics>> {
                let $this = self;
                let key = ctx.job_key().to_string();
                Ok(match $inner.get(&key, StateType::EvaluatedMetrics).await? {
                    Some(StateValue::EvaluatedMetrics(v)) => Some(Arc::unwrap_or_clone(v)),
                    _ => None,
                })
            }
            async fn remove_evaluated_metrics(&self, ctx: &Ctx) -> StateResult<()> {
                let $this = self;
                let key = ctx.job_key().to_string();
                $inner.remove(&key, StateType::EvaluatedMetrics).await
            }

            async fn store_parallelism_overrides(
                &self,
                ctx: &Ctx,
                overrides: &ParallelismOverrides,
            ) -> StateResult<()> {
                let $this = self;
                let key = ctx.job_key().to_string();
                $inner.put(&key, overrides.clone().into_value()).await
            }
            async fn get_parallelism_overrides(&self, ctx: &Ctx) -> StateResult<ParallelismOverrides> {
                let $this = self;
                let key = ctx.job_key().to_string();
                $inner.read::<ParallelismOverrides>(&key).await
            }
            async fn remove_parallelism_overrides(&self, ctx: &Ctx) -> StateResult<()> {
                let $this = self;
                let key = ctx.job_key().to_string();
                $inner.remove(&key, StateType::ParallelismOverrides).await
            }

            async fn store_config_changes(&self, ctx: &Ctx, changes: &ConfigChanges) -> StateResult<()> {
                let $this = self;
                let key = ctx.job_key().to_string();
                $inner.put(&key, changes.clone().into_value()).await
            }
            async fn get_config_changes(&self, ctx: &Ctx) -> StateResult<ConfigChanges> {
                let $this = self;
                let key = ctx.job_key().to_string();
                $inner.read::<ConfigChanges>(&key).await
            }
            async fn remove_config_changes(&self, ctx: &Ctx) -> StateResult<()> {
                let $this = self;
                let key = ctx.job_key().to_string();
                $inner.remove(&key, StateType::ConfigOverrides).await
            }

            async fn store_delayed_scale_down(&self, ctx: &Ctx, state: &DelayedScaleDown) -> StateResult<()> {
                let $this = self;
                let key = ctx.job_key().to_string();
                $inner.put(&key, state.clone().into_value()).await
            }
            async fn get_delayed_scale_down(&self, ctx: &Ctx) -> StateResult<DelayedScaleDown> {
                let $this = self;
                let key = ctx.job_key().to_string();
                $inner.read::<DelayedScaleDown>(&key).await
            }
            async fn remove_delayed_scale_down(&self, ctx: &Ctx) -> StateResult<()> {
                let $this = self;
                let key = ctx.job_key().to_string();
                $inner.remove(&key, StateType::DelayedScaleDown).await
            }

            async fn get_job_state(&self, ctx: &Ctx) -> StateResult<JobState> {
                let $this = self;
                let key = ctx.job_key().to_string();
                $inner.job_state(&key).await
            }
            async fn store_job_state(&self, ctx: &Ctx, state: &JobState, changes: &StateChanges) -> StateResult<()> {
                let $this = self;
                let key = ctx.job_key().to_string();
                $inner.put_job_state(&key, state, changes).await
            }

            async fn clear_all(&self, ctx: &Ctx) -> StateResult<()> {
                let $this = self;
                let key = ctx.job_key().to_string();
                $inner.clear(&key).await
            }
            async fn flush(&self, ctx: &Ctx) -> StateResult<()> {
                let $this = self;
                let key = ctx.job_key().to_string();
                $inner.flush_job(&key).await
            }
            async fn remove_info_from_cache(&self, key: &K) {
                let $this = self;
                $inner.forget(&key.to_string());
            }
            async fn remove_job(&self, key: &K) -> StateResult<()>
            where
                K: Sync,
            {
                let $this = self;
                let key = key.to_string();
                $inner.clear(&key).await?;
                $inner.flush_job(&key).await?;
                $inner.forget(&key);
                Ok(())
            }
        }
    };
}

impl_state_store!(AnyStateStore, |this| this);

/// The in-memory state store: everything lives in the process, `flush` writes nothing, and
/// `remove_info_from_cache` forgets the job entirely (the reference's `InMemoryAutoScalerStateStore`).
#[derive(Debug)]
pub struct InMemoryStateStore {
    inner: AnyStateStore,
}

impl InMemoryStateStore {
    /// An empty store.
    pub fn new() -> Self {
        InMemoryStateStore {
            inner: AnyStateStore::in_memory(),
        }
    }
}

impl Default for InMemoryStateStore {
    fn default() -> Self {
        Self::new()
    }
}

impl_state_store!(InMemoryStateStore, |this| this.inner);
