//! Which jobs this replica may act on: the [`JobOwnership`] seam of the standalone loop, its
//! single-process implementation [`SoleOwner`], the rendezvous assignment of jobs to replicas
//! and the `autoscaler.service.ha.*` options.

use crate::config::{Configuration, OptionsError, parse_duration};
use async_trait::async_trait;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// Config key of this replica's name (default: host name and process id, `host-1234`).
pub const HA_REPLICA_ID_KEY: &str = "autoscaler.service.ha.replica-id";
/// Config key of the lease duration (default 15 s, as the reference operator's leader election).
pub const HA_LEASE_DURATION_KEY: &str = "autoscaler.service.ha.lease-duration";
/// Config key of the renew interval (default 5 s).
pub const HA_RENEW_INTERVAL_KEY: &str = "autoscaler.service.ha.renew-interval";

/// Default lease duration.
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);
/// Default renew interval.
pub const DEFAULT_RENEW_INTERVAL: Duration = Duration::from_secs(5);

/// One job this replica holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobLease {
    /// Grows every time the job changes owner; a store fences writes with it.
    pub epoch: u64,
    /// Local (monotonic) instant after which this replica must treat the lease as lost, whatever
    /// it can or cannot learn from the coordinator (self-fencing).
    pub valid_until: Instant,
}

impl JobLease {
    /// Whether the lease may still be acted on at `now`.
    pub fn is_valid_at(&self, now: Instant) -> bool {
        now < self.valid_until
    }
}

/// What one round of [`JobOwnership::acquire_and_renew`] found: the jobs held and the replicas seen.
#[derive(Debug, Clone)]
pub struct Ownership<K> {
    /// Every candidate job this replica holds now.
    pub leases: HashMap<K, JobLease>,
    /// The replicas the coordinator considers alive, this one included, sorted.
    pub live_replicas: Vec<String>,
}

impl<K> Default for Ownership<K> {
    fn default() -> Self {
        Ownership {
            leases: HashMap::new(),
            live_replicas: Vec::new(),
        }
    }
}

impl<K: Eq + Hash> Ownership<K> {
    /// The lease of `key`, if held and still valid at `now`.
    pub fn valid_lease(&self, key: &K, now: Instant) -> Option<JobLease> {
        self.leases.get(key).copied().filter(|lease| lease.is_valid_at(now))
    }

    /// The earliest local deadline of the leases held, if any.
    pub fn earliest_deadline(&self) -> Option<Instant> {
        self.leases.values().map(|lease| lease.valid_until).min()
    }
}

/// Why a round of ownership could not be completed; the previous answer stands until its leases'
/// local deadlines pass.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OwnershipError {
    /// The coordinator (database, API server) failed or could not be reached.
    #[error("job ownership: {operation} failed: {message}")]
    Backend {
        /// What was being done (`heartbeat`, `renew`, `acquire`, `release`, ...).
        operation: &'static str,
        /// The coordinator's message.
        message: String,
    },
    /// The ownership cannot work with what it was given (a store without a database, say).
    #[error("job ownership is misconfigured: {0}")]
    Misconfigured(String),
}

/// Which jobs this replica owns.
///
/// Several autoscaler processes (replicas) may share one job list and one state database. Each
/// job must then be acted on (collected, decided, written, rescaled) by exactly one of them. The
/// standalone loop asks a [`JobOwnership`] at every round which of the listed jobs it owns, and
/// only those get a cycle.
///
/// ## The contract
///
/// - A round ([`JobOwnership::acquire_and_renew`]) renews the leases this replica holds, takes the
///   free ones it should own, gives up the ones it should no longer own, and answers with the set
///   it holds now, each job with its **epoch** (a number that grows every time the job changes
///   owner) and its **local deadline** ([`JobLease::valid_until`]).
/// - The local deadline is measured on this process's monotonic clock from the *start* of the
///   round that last renewed the lease: `round start + lease duration - safety margin`. Past it,
///   the replica must treat the lease as lost even if it could not learn anything from the
///   coordinator (database down, network cut, the process paused): that is **self-fencing**. The
///   coordinator counts the lease duration from a later instant (when it executed the renewal), so
///   the replica always stops before anyone else may start, as long as the two clocks run at about
///   the same rate. The margin absorbs the difference in rate and the time between "deadline
///   passed" and "the last action stopped"; [`HaOptions::safety_margin`] documents its default.
/// - A store that takes part (the database store of `autoscaler-state`) also **fences** writes:
///   a flush checks, in its own transaction, that the writer still holds the lease with the
///   epoch it was given, and is refused with [`StateError::Fenced`](crate::StateError::Fenced)
///   otherwise. Self-fencing stops a replica that knows it is late; fencing stops one that does
///   not (a process frozen for longer than the lease, whose monotonic clock did not move).
/// - [`JobOwnership::release`] gives leases up at once (a handoff: another replica takes them at
///   its next round); [`JobOwnership::leave`] gives up everything and leaves the membership, as a
///   replica does on SIGTERM after its cycles in flight have finished.
///
/// The semantics follow the Kubernetes `Lease` object (holder identity, lease duration, renew
/// time, lease transitions) and the leader election of the reference's operator (lease
/// duration 15 s, renew deadline 10 s, retry period 2 s), applied per job instead of per process.
///
/// ## Implementations
///
/// - [`SoleOwner`]: this process owns every job (one process, the `memory` store, tests).
/// - `autoscaler_state::DbJobOwnership`: leases rows in the shared state database, taken and
///   renewed with conditional writes on the database's clock, jobs spread over the live replicas
///   by [`rendezvous_winner`].
/// - A platform with its own scheme implements the trait, e.g. one Kubernetes `Lease` per job:
///
/// ```
/// use autoscaler_core::async_trait;
/// use autoscaler_core::{JobLease, JobOwnership, Ownership, OwnershipError};
/// use std::time::Duration;
///
/// /// Owns a job while it holds the job's Kubernetes Lease (`autoscaler-<job>`).
/// struct KubeLeases {
///     identity: String,
///     lease_duration: Duration,
/// }
///
/// #[async_trait]
/// impl JobOwnership<String> for KubeLeases {
///     fn replica_id(&self) -> &str {
///         &self.identity
///     }
///     fn renew_interval(&self) -> Duration {
///         self.lease_duration / 3
///     }
///     async fn acquire_and_renew(&self, candidates: &[String]) -> Result<Ownership<String>, OwnershipError> {
///         let started = tokio::time::Instant::now();
///         let mut owned = Ownership::default();
///         for job in candidates {
///             // GET the Lease; if we hold it, or it is free or expired, PUT it with our identity
///             // and renewTime, using its resourceVersion (a conditional write); leaseTransitions
///             // is the epoch. Here: pretend every PUT succeeded.
///             let transitions = 1;
///             owned.leases.insert(job.clone(), JobLease {
///                 epoch: transitions,
///                 valid_until: started + self.lease_duration - self.lease_duration / 3,
///             });
///         }
///         owned.live_replicas = vec![self.identity.clone()];
///         Ok(owned)
///     }
///     async fn release(&self, _jobs: &[String]) -> Result<(), OwnershipError> {
///         // Clear holderIdentity of each Lease, again conditionally.
///         Ok(())
///     }
/// }
/// ```
#[async_trait]
pub trait JobOwnership<K>: Send + Sync {
    /// This replica's name, as other replicas and the coordinator see it.
    fn replica_id(&self) -> &str;

    /// How often the loop runs a round (it also runs one after every fetch of the job list).
    fn renew_interval(&self) -> Duration;

    /// One round: renews the leases held, takes those this replica should own among
    /// `candidates`, gives up the rest (jobs not in `candidates` included), and returns the
    /// leases held now. An error leaves the previous answer standing until its local deadlines.
    async fn acquire_and_renew(&self, candidates: &[K]) -> Result<Ownership<K>, OwnershipError>;

    /// Gives up the leases of `jobs` (those held), so another replica can take them at once.
    async fn release(&self, jobs: &[K]) -> Result<(), OwnershipError>;

    /// Gives up every lease and leaves the membership (shutdown). The default does nothing.
    async fn leave(&self) -> Result<(), OwnershipError> {
        Ok(())
    }
}

/// The only replica: owns every candidate, for ever, at epoch 1 (one process, the `memory` store).
#[derive(Debug, Clone)]
pub struct SoleOwner {
    replica_id: String,
}

impl SoleOwner {
    /// An owner named [`default_replica_id`].
    pub fn new() -> Self {
        SoleOwner {
            replica_id: default_replica_id(),
        }
    }
}

impl Default for SoleOwner {
    fn default() -> Self {
        Self::new()
    }
}

/// A deadline that never comes (tokio's own "far future": about 30 years).
fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(30 * 365 * 86_400)
}

#[async_trait]
impl<K: Clone + Eq + Hash + Send + Sync + 'static> JobOwnership<K> for SoleOwner {
    fn replica_id(&self) -> &str {
        &self.replica_id
    }

    fn renew_interval(&self) -> Duration {
        DEFAULT_RENEW_INTERVAL
    }

    async fn acquire_and_renew(&self, candidates: &[K]) -> Result<Ownership<K>, OwnershipError> {
        let valid_until = far_future();
        Ok(Ownership {
            leases: candidates
                .iter()
                .map(|key| (key.clone(), JobLease { epoch: 1, valid_until }))
                .collect(),
            live_replicas: vec![self.replica_id.clone()],
        })
    }

    async fn release(&self, _jobs: &[K]) -> Result<(), OwnershipError> {
        Ok(())
    }
}

/// The replica's default name: the host name and the process id, `host-1234` (the host name
/// from `HOSTNAME`, else `/etc/hostname`, else `localhost`).
pub fn default_replica_id() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned());
    format!("{host}-{}", std::process::id())
}

/// The settings of replicated operation (`autoscaler.service.ha.*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HaOptions {
    /// This replica's name ([`HA_REPLICA_ID_KEY`]).
    pub replica_id: String,
    /// How long a lease lasts on the coordinator's clock after a renewal ([`HA_LEASE_DURATION_KEY`]).
    pub lease_duration: Duration,
    /// How often the leases are renewed ([`HA_RENEW_INTERVAL_KEY`]).
    pub renew_interval: Duration,
}

impl Default for HaOptions {
    fn default() -> Self {
        HaOptions {
            replica_id: default_replica_id(),
            lease_duration: DEFAULT_LEASE_DURATION,
            renew_interval: DEFAULT_RENEW_INTERVAL,
        }
    }
}

impl HaOptions {
    /// Reads the `autoscaler.service.ha.*` keys; unset keys keep the defaults. The renew interval
    /// must be positive and below half the lease duration, so one failed renewal never loses a
    /// lease.
    ///
    /// ```
    /// use autoscaler_core::HaOptions;
    /// use autoscaler_core::config::Configuration;
    /// let conf = Configuration::from_iter([("autoscaler.service.ha.lease-duration", "30 s")]);
    /// let options = HaOptions::from_configuration(&conf).unwrap();
    /// assert_eq!(options.lease_duration.as_secs(), 30);
    /// assert_eq!(options.safety_margin().as_secs(), 10);
    /// ```
    pub fn from_configuration(conf: &Configuration) -> Result<Self, OptionsError> {
        let mut options = HaOptions::default();
        if let Some(id) = conf.get(HA_REPLICA_ID_KEY) {
            options.replica_id = id.trim().to_owned();
        }
        for (key, field) in [
            (HA_LEASE_DURATION_KEY, &mut options.lease_duration),
            (HA_RENEW_INTERVAL_KEY, &mut options.renew_interval),
        ] {
            if let Some(value) = conf.get(key) {
                *field = parse_duration(value).map_err(|reason| OptionsError::InvalidValue {
                    key: key.to_owned(),
                    value: value.to_owned(),
                    reason,
                })?;
            }
        }
        options.validate()?;
        Ok(options)
    }

    /// Checks that the replica id is a name of 1 to 255 bytes and that the renew interval is
    /// positive and at most a third of the lease duration. Replica ids must also be unique among
    /// the replicas sharing a database: two processes with one name would both believe they hold
    /// that name's leases (the default, host name and pid, is unique).
    pub fn validate(&self) -> Result<(), OptionsError> {
        if self.replica_id.is_empty() || self.replica_id.len() > 255 || self.replica_id.trim() != self.replica_id {
            return Err(invalid(
                HA_REPLICA_ID_KEY,
                &self.replica_id,
                "a name of 1 to 255 bytes without surrounding spaces",
            ));
        }
        if self.renew_interval.is_zero() || self.renew_interval.saturating_mul(3) > self.lease_duration {
            return Err(OptionsError::InvalidValue {
                key: HA_RENEW_INTERVAL_KEY.to_owned(),
                value: format!("{:?}", self.renew_interval),
                reason: format!(
                    "expected a positive duration of at most a third of {HA_LEASE_DURATION_KEY} ({:?})",
                    self.lease_duration
                ),
            });
        }
        Ok(())
    }

    /// How long before the lease could expire on the coordinator a replica stops acting on it:
    /// a third of the lease duration (5 s of the default 15 s). It covers a renewal round that
    /// is slow to fail, the difference in rate between this machine's clock and the
    /// coordinator's (far below 1 %), and the time an action already under way needs to notice.
    pub fn safety_margin(&self) -> Duration {
        self.lease_duration / 3
    }

    /// How long after a round started its leases may be acted on: the lease duration minus the
    /// [`safety_margin`](Self::safety_margin).
    pub fn local_validity(&self) -> Duration {
        self.lease_duration.saturating_sub(self.safety_margin())
    }
}

fn invalid(key: &str, value: &str, expected: &str) -> OptionsError {
    OptionsError::InvalidValue {
        key: key.to_owned(),
        value: value.to_owned(),
        reason: format!("expected {expected}"),
    }
}

/// The score of `member` for `job_key` in rendezvous (highest random weight) hashing: a 64-bit
/// FNV-1a hash of both names, mixed with the SplitMix64 finalizer. It is the same on every
/// machine and every build, which replicas agreeing on owners need (the standard library's hasher
/// is seeded per process).
pub fn rendezvous_score(job_key: &str, member: &str) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut hash = OFFSET;
    // The member's length first, so ("ab", "c") and ("a", "bc") differ.
    let bytes = (member.len() as u64)
        .to_le_bytes()
        .into_iter()
        .chain(member.bytes())
        .chain(job_key.bytes());
    for byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(PRIME);
    }
    // SplitMix64's finalizer: FNV's low bits are weak, and the comparison reads all of them.
    hash ^= hash >> 30;
    hash = hash.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    hash ^= hash >> 27;
    hash = hash.wrapping_mul(0x94d0_49bb_1331_11eb);
    hash ^ (hash >> 31)
}

/// The member that should own `job_key`: the one with the highest [`rendezvous_score`] (ties,
/// which need a 64-bit collision, go to the greater name). `None` when `members` is empty.
///
/// Removing a member moves only the jobs it won; adding one moves only the jobs it now wins
/// (about `1/n` of them), which keeps handoffs few when replicas come and go.
///
/// ```
/// use autoscaler_core::rendezvous_winner;
/// let members = ["a".to_owned(), "b".to_owned(), "c".to_owned()];
/// let owner = rendezvous_winner("job-1", &members).unwrap();
/// let without_owner: Vec<String> = members.iter().filter(|m| *m != owner).cloned().collect();
/// assert_ne!(rendezvous_winner("job-1", &without_owner).unwrap(), owner);
/// ```
pub fn rendezvous_winner<'m>(job_key: &str, members: &'m [String]) -> Option<&'m str> {
    members
        .iter()
        .max_by(|a, b| {
            rendezvous_score(job_key, a)
                .cmp(&rendezvous_score(job_key, b))
                .then_with(|| a.cmp(b))
        })
        .map(String::as_str)
}

/// Counters of the ownership for a service to export: `flink_autoscaler_owned_jobs`,
/// `flink_autoscaler_ha_replicas` (gauges) and `flink_autoscaler_ownership_changes_total`.
/// The standalone loop updates them after every round; read them at any time.
#[derive(Debug, Default)]
pub struct OwnershipStats {
    owned_jobs: AtomicU64,
    live_replicas: AtomicU64,
    ownership_changes: AtomicU64,
    failed_rounds: AtomicU64,
    last_round_failed: AtomicBool,
}

impl OwnershipStats {
    /// Jobs this replica holds a valid lease on after the last round.
    pub fn owned_jobs(&self) -> u64 {
        self.owned_jobs.load(Ordering::Relaxed)
    }
    /// Live replicas the last successful round saw (this one included).
    pub fn live_replicas(&self) -> u64 {
        self.live_replicas.load(Ordering::Relaxed)
    }
    /// Jobs acquired plus jobs released or lost so far.
    pub fn ownership_changes(&self) -> u64 {
        self.ownership_changes.load(Ordering::Relaxed)
    }
    /// Rounds that failed (coordinator unreachable, timed out) so far.
    pub fn failed_rounds(&self) -> u64 {
        self.failed_rounds.load(Ordering::Relaxed)
    }

    /// Whether the last round succeeded (a service's readiness: it reaches the coordinator and
    /// holds its leases). True before the first round.
    pub fn last_round_succeeded(&self) -> bool {
        !self.last_round_failed.load(Ordering::Relaxed)
    }

    pub(crate) fn set_round_ok(&self, ok: bool) {
        self.last_round_failed.store(!ok, Ordering::Relaxed);
    }
    pub(crate) fn set_owned(&self, owned: usize, replicas: usize) {
        self.owned_jobs.store(owned as u64, Ordering::Relaxed);
        self.live_replicas.store(replicas as u64, Ordering::Relaxed);
    }
    pub(crate) fn add_changes(&self, changes: usize) {
        self.ownership_changes.fetch_add(changes as u64, Ordering::Relaxed);
    }
    pub(crate) fn add_failed_round(&self) {
        self.failed_rounds.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn members(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("replica-{i}")).collect()
    }

    #[test]
    fn scores_are_stable_across_builds() {
        // Pinned values: replicas of different builds must agree on every owner.
        assert_eq!(rendezvous_score("job", "a"), rendezvous_score("job", "a"));
        assert_ne!(rendezvous_score("ab", "c"), rendezvous_score("b", "ac"));
        let pinned = rendezvous_score("job-1", "replica-0");
        assert_eq!(pinned, 0xa7b4_00dd_ff2e_2c0b_u64, "{pinned:#x}");
    }

    #[test]
    fn jobs_spread_about_evenly() {
        let members = members(3);
        let mut counts = HashMap::new();
        for job in 0..3000 {
            *counts
                .entry(rendezvous_winner(&format!("job-{job}"), &members).unwrap())
                .or_insert(0) += 1;
        }
        for (member, count) in counts {
            assert!((850..=1150).contains(&count), "{member}: {count}");
        }
    }

    #[test]
    fn no_members_no_winner() {
        assert_eq!(rendezvous_winner("job", &[]), None);
    }

    proptest! {
        #[test]
        fn each_job_has_one_winner_and_removing_a_member_moves_only_its_jobs(
            n in 1usize..8,
            removed in 0usize..8,
            jobs in proptest::collection::vec("[a-z0-9/-]{1,20}", 1..60),
        ) {
            let all = members(n);
            let removed = removed % n;
            let rest: Vec<String> = all.iter().enumerate().filter(|(i, _)| *i != removed).map(|(_, m)| m.clone()).collect();
            for job in &jobs {
                let winner = rendezvous_winner(job, &all).unwrap();
                // Exactly one member wins: the winner outscores every other member.
                let winners = all.iter().filter(|m| {
                    all.iter().all(|o| o == *m || (rendezvous_score(job, m), m.as_str()) > (rendezvous_score(job, o), o.as_str()))
                }).count();
                prop_assert_eq!(winners, 1);
                // Order of the members does not matter.
                let mut reversed = all.clone();
                reversed.reverse();
                prop_assert_eq!(rendezvous_winner(job, &reversed), Some(winner));
                // Removing a member moves only the jobs it won.
                let after = rendezvous_winner(job, &rest);
                if winner == all[removed] {
                    prop_assert_ne!(after, Some(winner));
                } else {
                    prop_assert_eq!(after, Some(winner));
                }
            }
        }
    }

    #[test]
    fn options_default_and_parse() {
        let options = HaOptions::from_configuration(&Configuration::new()).unwrap();
        assert_eq!(options.lease_duration, Duration::from_secs(15));
        assert_eq!(options.renew_interval, Duration::from_secs(5));
        assert_eq!(options.safety_margin(), Duration::from_secs(5));
        assert_eq!(options.local_validity(), Duration::from_secs(10));
        assert!(options.replica_id.ends_with(&format!("-{}", std::process::id())));

        let conf = Configuration::from_iter([
            (HA_REPLICA_ID_KEY, " r1 "),
            (HA_LEASE_DURATION_KEY, "6 s"),
            (HA_RENEW_INTERVAL_KEY, "2000"),
        ]);
        let options = HaOptions::from_configuration(&conf).unwrap();
        assert_eq!(
            (
                options.replica_id.as_str(),
                options.lease_duration,
                options.renew_interval
            ),
            ("r1", Duration::from_secs(6), Duration::from_secs(2))
        );
    }

    #[test]
    fn a_renew_interval_too_close_to_the_lease_is_refused() {
        let conf = Configuration::from_iter([(HA_RENEW_INTERVAL_KEY, "6 s")]);
        let err = HaOptions::from_configuration(&conf).unwrap_err();
        assert!(err.to_string().contains(HA_RENEW_INTERVAL_KEY), "{err}");
        let conf = Configuration::from_iter([(HA_REPLICA_ID_KEY, "  ")]);
        assert!(HaOptions::from_configuration(&conf).is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn the_sole_owner_owns_every_candidate() {
        let owner = SoleOwner::new();
        let owned = owner
            .acquire_and_renew(&["a".to_owned(), "b".to_owned()])
            .await
            .unwrap();
        assert_eq!(owned.leases.len(), 2);
        let later = Instant::now() + Duration::from_secs(365 * 86_400);
        assert!(owned.valid_lease(&"a".to_owned(), later).is_some());
        assert_eq!(owned.live_replicas.len(), 1);
    }
}
