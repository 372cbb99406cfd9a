//! Job leases in the state database: [`DbJobOwnership`]. The protocol, its guarantees and its
//! failure modes are described in the crate docs, "Several replicas".

use crate::db::Db;
use crate::store::AnyStateStore;
use async_trait::async_trait;
use autoscaler_core::{
    HaOptions, JobLease, JobOwnership, Ownership, OwnershipError, StateError, StateResult, rendezvous_winner,
};
use std::collections::HashMap;
use std::fmt::Display;
use std::hash::Hash;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::time::Instant;

/// Replicas silent for this long are removed from the member table (each restart has a new
/// default name, so the table would otherwise grow).
const FORGET_REPLICAS_AFTER: Duration = Duration::from_secs(24 * 3600);

/// The leases a fenced store checks before a flush: one per job this replica holds.
#[derive(Debug)]
pub(crate) struct FenceBook {
    replica: String,
    /// foldhash: a lookup per flush, where SipHash costs more than the rest of a lookup.
    leases: Mutex<foldhash::HashMap<String, JobLease>>,
}

impl FenceBook {
    /// The replica the leases belong to.
    pub(crate) fn replica(&self) -> &str {
        &self.replica
    }

    /// The epoch of the job's lease, if this replica holds one that is valid now.
    pub(crate) fn epoch(&self, job_key: &str) -> Option<u64> {
        let now = Instant::now();
        self.lock().get(job_key).filter(|l| l.is_valid_at(now)).map(|l| l.epoch)
    }

    /// The epoch of the job's lease, or why a flush must be refused.
    pub(crate) fn valid_epoch(&self, job_key: &str) -> StateResult<u64> {
        let now = Instant::now();
        match self.lock().get(job_key) {
            None => Err(StateError::Fenced {
                job_key: job_key.to_owned(),
                reason: format!("replica {} holds no lease of it", self.replica),
            }),
            Some(lease) if !lease.is_valid_at(now) => Err(StateError::Fenced {
                job_key: job_key.to_owned(),
                reason: format!(
                    "the lease of replica {} (epoch {}) lapsed on the local clock {:?} ago",
                    self.replica,
                    lease.epoch,
                    now.saturating_duration_since(lease.valid_until)
                ),
            }),
            Some(lease) => Ok(lease.epoch),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, foldhash::HashMap<String, JobLease>> {
        self.leases.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A job's lease as the database holds it (for tests and diagnostics).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseInfo {
    /// The replica holding it; `None` when it is free.
    pub owner: Option<String>,
    /// How many times it was taken.
    pub epoch: u64,
    /// How long it has left on the database's clock; negative once expired.
    pub remaining_ms: i64,
}

/// Job ownership through lease rows in the shared state database (SQLite, PostgreSQL,
/// MySQL/MariaDB); see the [crate docs](crate#several-replicas) for the protocol.
///
/// ```no_run
/// use autoscaler_core::{HaOptions, JobOwnership};
/// use autoscaler_state::{AnyStateStore, DbJobOwnership};
/// use std::sync::Arc;
/// # async fn demo() -> Result<(), autoscaler_core::StateError> {
/// let store = Arc::new(AnyStateStore::open("postgres://autoscaler@db:5432/autoscaler").await?);
/// let ownership = DbJobOwnership::attach(&store, HaOptions::default()).await?;
/// // Each round: which of the listed jobs this replica owns now; the store's flushes of the
/// // others are refused from now on.
/// let owned = ownership.acquire_and_renew(&["job-a".to_owned(), "job-b".to_owned()]).await;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct DbJobOwnership {
    db: Arc<Db>,
    book: Arc<FenceBook>,
    options: HaOptions,
    /// Rounds of this replica run one at a time.
    round: tokio::sync::Mutex<()>,
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

fn epoch_of(raw: i64) -> u64 {
    u64::try_from(raw).unwrap_or(0)
}

fn ownership_error(error: StateError) -> OwnershipError {
    match error {
        StateError::Backend { operation, message, .. } => OwnershipError::Backend { operation, message },
        other => OwnershipError::Backend {
            operation: "lease",
            message: other.to_string(),
        },
    }
}

impl DbJobOwnership {
    /// Attaches job ownership to `store`: leases live in its database, and from now on each of
    /// its flushes is fenced by the job's lease (a job this replica does not hold cannot be
    /// written). Fails on the `memory` store, on a store that already has one, on options that do
    /// not validate, and when the lease tables are missing (migrations turned off).
    pub async fn attach(store: &AnyStateStore, options: HaOptions) -> StateResult<Self> {
        options.validate().map_err(|e| StateError::Backend {
            operation: "lease",
            message: e.to_string(),
            source: None,
        })?;
        let book = Arc::new(FenceBook {
            replica: options.replica_id.clone(),
            leases: Mutex::default(),
        });
        if let Some(db) = store.database() {
            db.check_lease_schema().await?;
        }
        let db = store.attach_fences(Arc::clone(&book))?;
        Ok(DbJobOwnership {
            db,
            book,
            options,
            round: tokio::sync::Mutex::new(()),
        })
    }

    /// The options this ownership runs with.
    pub fn options(&self) -> &HaOptions {
        &self.options
    }

    /// The lease of `job_key` as the database holds it now, if it was ever leased.
    pub async fn lease(&self, job_key: &str) -> StateResult<Option<LeaseInfo>> {
        Ok(self.db.lease_of(job_key).await?.map(|row| LeaseInfo {
            owner: row.owner,
            epoch: epoch_of(row.epoch),
            remaining_ms: row.remaining_ms,
        }))
    }

    /// Takes the lease of `job_key` if it is free or expired, whoever should own it (no
    /// rendezvous, no fence book update): the bare conditional write, for tests and tools.
    /// Returns the new epoch if this replica got it.
    pub async fn try_take(&self, job_key: &str) -> StateResult<Option<u64>> {
        let replica = self.options.replica_id.as_str();
        let taken = self
            .db
            .take(replica, &[job_key], millis(self.options.lease_duration))
            .await?;
        if taken == 0 {
            return Ok(None);
        }
        Ok(self.db.lease_of(job_key).await?.map(|row| epoch_of(row.epoch)))
    }

    /// Renews the lease of `job_key` if this replica still holds it with `epoch`, unexpired:
    /// the bare conditional write. Whether it did.
    pub async fn try_renew(&self, job_key: &str, epoch: u64) -> StateResult<bool> {
        let epoch = i64::try_from(epoch).unwrap_or(i64::MAX);
        self.db
            .renew_one(
                &self.options.replica_id,
                job_key,
                epoch,
                millis(self.options.lease_duration),
            )
            .await
    }

    /// Frees the lease of `job_key` if this replica holds it with `epoch`. Whether it did.
    pub async fn try_release(&self, job_key: &str, epoch: u64) -> StateResult<bool> {
        let epoch = i64::try_from(epoch).unwrap_or(i64::MAX);
        self.db.release_one(&self.options.replica_id, job_key, epoch).await
    }

    async fn round<K>(&self, candidates: &[K]) -> StateResult<Ownership<K>>
    where
        K: Display + Clone + Eq + Hash,
    {
        let _one_at_a_time = self.round.lock().await;
        let started = Instant::now();
        let replica = self.options.replica_id.as_str();
        let lease_ms = millis(self.options.lease_duration);
        let db = &self.db;

        db.heartbeat(replica).await?;
        let mut live = db.live_replicas(lease_ms).await?;
        if !live.iter().any(|r| r == replica) {
            // Our heartbeat was just written; a database clock that jumped could hide it.
            live.push(replica.to_owned());
            live.sort();
        }
        let names: foldhash::HashMap<String, &K> = candidates.iter().map(|k| (k.to_string(), k)).collect();
        let wins = |job: &str| names.contains_key(job) && rendezvous_winner(job, &live) == Some(replica);

        let held = db.held_leases(replica).await?;
        let give_up: Vec<&str> = held
            .iter()
            .filter(|(job, row)| row.remaining_ms > 0 && !wins(job))
            .map(|(job, _)| job.as_str())
            .collect();
        db.release(replica, &give_up).await?;
        db.renew_held(replica, lease_ms).await?;
        let kept: foldhash::HashSet<&str> = held
            .iter()
            .filter(|(job, row)| row.remaining_ms > 0 && wins(job))
            .map(|(job, _)| job.as_str())
            .collect();
        let mut to_take: Vec<&str> = names
            .keys()
            .map(String::as_str)
            .filter(|job| wins(job) && !kept.contains(job))
            .collect();
        to_take.sort_unstable();
        db.take(replica, &to_take, lease_ms).await?;

        let valid_until = started + self.options.local_validity();
        let mut leases = HashMap::new();
        let mut book = foldhash::HashMap::default();
        for (job, row) in db.held_leases(replica).await? {
            if row.remaining_ms <= 0 {
                continue;
            }
            let lease = JobLease {
                epoch: epoch_of(row.epoch),
                valid_until,
            };
            if let Some(key) = names.get(&job) {
                leases.insert((*key).clone(), lease);
            }
            book.insert(job, lease);
        }
        *self.book.lock() = book;
        if let Err(error) = db.prune_replicas(millis(FORGET_REPLICAS_AFTER)).await {
            tracing::debug!(%error, "could not prune silent replicas");
        }
        Ok(Ownership {
            leases,
            live_replicas: live,
        })
    }
}

#[async_trait]
impl<K> JobOwnership<K> for DbJobOwnership
where
    K: Display + Clone + Eq + Hash + Send + Sync + 'static,
{
    fn replica_id(&self) -> &str {
        &self.options.replica_id
    }

    fn renew_interval(&self) -> Duration {
        self.options.renew_interval
    }

    async fn acquire_and_renew(&self, candidates: &[K]) -> Result<Ownership<K>, OwnershipError> {
        self.round(candidates).await.map_err(ownership_error)
    }

    async fn release(&self, jobs: &[K]) -> Result<(), OwnershipError> {
        let names: Vec<String> = jobs.iter().map(ToString::to_string).collect();
        {
            // Stop writing first, then tell the database.
            let mut book = self.book.lock();
            for name in &names {
                book.remove(name);
            }
        }
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        self.db
            .release(&self.options.replica_id, &names)
            .await
            .map_err(ownership_error)
    }

    async fn leave(&self) -> Result<(), OwnershipError> {
        let _one_at_a_time = self.round.lock().await;
        self.book.lock().clear();
        self.db.leave(&self.options.replica_id).await.map_err(ownership_error)
    }
}
