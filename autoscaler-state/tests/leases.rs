//! The job lease protocol ([`DbJobOwnership`]) against every database: contenders, expiry and
//! takeover, renewal racing expiry, epochs, fencing of a stale owner's flush, handoff, and the
//! rendezvous spread of jobs over replicas.
//!
//! PostgreSQL and MySQL run when `AUTOSCALER_TEST_POSTGRES_URL` / `AUTOSCALER_TEST_MYSQL_URL` are
//! set (with `CI=true` a missing one fails); each test gets its own schema / database. On the
//! `memory` store the ownership cannot be attached, which each test checks instead.

#![allow(missing_docs, clippy::unwrap_used)]

mod common;

use autoscaler_core::{AutoScalerStateStore, HaOptions, JobOwnership, ParallelismOverrides, StateError};
use autoscaler_core::{rendezvous_score, rendezvous_winner};
use autoscaler_state::{AnyStateStore, DbJobOwnership};
use common::{TestDb, ctx};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn ms(millis: u64) -> Duration {
    Duration::from_millis(millis)
}

/// One replica: its own store (own pool, own cache) on the shared database, with leases of
/// `lease_ms` renewed every third of it. `None` on the memory store, after checking that it
/// refuses the ownership.
async fn replica(db: &TestDb, name: &str, lease_ms: u64) -> Option<(Arc<AnyStateStore>, DbJobOwnership)> {
    let store = Arc::new(AnyStateStore::open(&db.url).await.unwrap());
    let options = HaOptions {
        replica_id: name.to_owned(),
        lease_duration: ms(lease_ms),
        renew_interval: ms(lease_ms / 3),
    };
    match DbJobOwnership::attach(&store, options).await {
        Ok(ownership) => Some((store, ownership)),
        Err(error) => {
            assert!(!db.persistent(), "{error}");
            assert!(error.to_string().contains("memory"), "{error}");
            None
        }
    }
}

/// One round of `ownership` over `jobs`: the jobs it holds after it, with their epochs.
async fn round(ownership: &DbJobOwnership, jobs: &[String]) -> BTreeMap<String, u64> {
    let owned = JobOwnership::<String>::acquire_and_renew(ownership, jobs)
        .await
        .unwrap();
    owned.leases.into_iter().map(|(k, l)| (k, l.epoch)).collect()
}

fn jobs(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

fn overrides(parallelism: u32) -> ParallelismOverrides {
    let mut o = ParallelismOverrides::new();
    o.insert("bc764cd8ddf7a0cff126f51c16239658".into(), parallelism);
    o
}

/// Forces a lease to lapse on the database (what waiting out the lease duration would do).
async fn expire(db: &TestDb, job: &str) {
    db.exec(
        "UPDATE t_flink_autoscaler_job_lease SET expires_at = 0 WHERE job_key = ?",
        &[job],
    )
    .await;
}

// Three replicas race for the same free leases at the same instant: each lease goes to exactly
// one of them, at epoch 1; the losers' renewals of it fail.
async fn contenders_race_for_free_leases(db: &TestDb) {
    let Some((_a_store, a)) = replica(db, "a", 60_000).await else {
        return;
    };
    let (_b_store, b) = replica(db, "b", 60_000).await.unwrap();
    let (_c_store, c) = replica(db, "c", 60_000).await.unwrap();
    for job in jobs("race", 20) {
        let (ra, rb, rc) = tokio::join!(a.try_take(&job), b.try_take(&job), c.try_take(&job));
        let results = [ra.unwrap(), rb.unwrap(), rc.unwrap()];
        let winners: Vec<usize> = (0..3).filter(|i| results[*i].is_some()).collect();
        assert_eq!(winners.len(), 1, "{job}: {results:?}");
        assert_eq!(results[winners[0]], Some(1));
        let lease = a.lease(&job).await.unwrap().unwrap();
        assert_eq!(lease.owner.as_deref(), Some(["a", "b", "c"][winners[0]]));
        for (i, contender) in [&a, &b, &c].into_iter().enumerate() {
            assert_eq!(contender.try_renew(&job, 1).await.unwrap(), i == winners[0], "{job}");
        }
    }
}
per_backend!(contenders_race_for_free_leases);

// Two, then three replicas running rounds: every job is held by exactly its rendezvous winner
// among the live replicas, whatever order the rounds run in.
async fn only_the_rendezvous_winner_holds_a_job(db: &TestDb) {
    let Some((_a_store, a)) = replica(db, "a", 60_000).await else {
        return;
    };
    let (_b_store, b) = replica(db, "b", 60_000).await.unwrap();
    let (_c_store, c) = replica(db, "c", 60_000).await.unwrap();
    let all = jobs("spread", 30);

    // A alone takes everything; once B is live, A hands B's jobs over and B takes them.
    assert_eq!(round(&a, &all).await.len(), 30);
    round(&b, &all).await; // heartbeat: A still holds B's jobs
    let a_jobs = round(&a, &all).await; // gives B's up
    let b_jobs = round(&b, &all).await; // takes them
    let members = vec!["a".to_owned(), "b".to_owned()];
    assert_eq!(a_jobs.len() + b_jobs.len(), 30);
    for job in &all {
        let winner = rendezvous_winner(job, &members).unwrap();
        assert_eq!(a_jobs.contains_key(job), winner == "a", "{job}");
        assert_eq!(b_jobs.contains_key(job), winner == "b", "{job}");
    }

    // C joins: two more rounds each, in a different order.
    round(&c, &all).await;
    for _ in 0..2 {
        round(&b, &all).await;
        round(&a, &all).await;
        round(&c, &all).await;
    }
    let owned = [round(&a, &all).await, round(&b, &all).await, round(&c, &all).await];
    let members = vec!["a".to_owned(), "b".to_owned(), "c".to_owned()];
    for job in &all {
        let holders: Vec<&str> = ["a", "b", "c"]
            .into_iter()
            .zip(&owned)
            .filter(|(_, held)| held.contains_key(job))
            .map(|(name, _)| name)
            .collect();
        assert_eq!(holders, vec![rendezvous_winner(job, &members).unwrap()], "{job}");
    }
}
per_backend!(only_the_rendezvous_winner_holds_a_job);

// A replica stops (killed: no release); once its heartbeat and lease are older than the lease
// duration, the other takes its jobs over at a higher epoch, and the old owner cannot renew.
async fn an_expired_lease_is_taken_over_at_a_higher_epoch(db: &TestDb) {
    let Some((_a_store, a)) = replica(db, "a", 1_000).await else {
        return;
    };
    let (_b_store, b) = replica(db, "b", 1_000).await.unwrap();
    let all = jobs("takeover", 10);
    round(&b, &all).await;
    let mut a_jobs = round(&a, &all).await;
    for _ in 0..3 {
        round(&b, &all).await;
        a_jobs = round(&a, &all).await;
    }
    assert!(!a_jobs.is_empty(), "a wins some of 10 jobs");
    // A dies now. B runs a round every 100 ms (a renew interval of the test).
    let died = Instant::now();
    let taken_over = loop {
        let b_jobs = round(&b, &all).await;
        if b_jobs.len() == all.len() {
            break died.elapsed();
        }
        assert!(died.elapsed() < Duration::from_secs(5), "no takeover after 5 s");
        tokio::time::sleep(ms(100)).await;
    };
    eprintln!("takeover after {taken_over:?} (lease 1 s, rounds every 100 ms)");
    assert!(
        taken_over >= ms(900),
        "{taken_over:?}: not before the lease could expire"
    );
    assert!(taken_over <= ms(1_600), "{taken_over:?}");
    let b_jobs = round(&b, &all).await;
    for (job, epoch) in &a_jobs {
        assert!(b_jobs[job] > *epoch, "{job}");
        assert!(!a.try_renew(job, *epoch).await.unwrap(), "{job}");
    }
}
per_backend!(an_expired_lease_is_taken_over_at_a_higher_epoch);

// A renewal and a takeover race around the instant the lease lapses: never both succeed, and the
// database holds what the winner believes.
async fn renewal_racing_expiry_has_one_winner(db: &TestDb) {
    let Some((_a_store, a)) = replica(db, "a", 300).await else {
        return;
    };
    let (_b_store, b) = replica(db, "b", 300).await.unwrap();
    let (mut renewed, mut taken) = (0, 0);
    for (trial, job) in jobs("expiry-race", 16).into_iter().enumerate() {
        let epoch = a.try_take(&job).await.unwrap().unwrap();
        // Around the lapse: 270 ms to 330 ms after the take.
        tokio::time::sleep(ms(270 + (trial as u64 % 8) * 8)).await;
        let (renew, take) = tokio::join!(a.try_renew(&job, epoch), b.try_take(&job));
        let (renew, take) = (renew.unwrap(), take.unwrap());
        assert!(
            !(renew && take.is_some()),
            "{job}: both the renewal and the takeover succeeded"
        );
        let lease = a.lease(&job).await.unwrap().unwrap();
        if renew {
            renewed += 1;
            assert_eq!((lease.owner.as_deref(), lease.epoch), (Some("a"), epoch), "{job}");
        } else if let Some(new_epoch) = take {
            taken += 1;
            assert_eq!(new_epoch, epoch + 1, "{job}");
            assert_eq!((lease.owner.as_deref(), lease.epoch), (Some("b"), new_epoch), "{job}");
        } else {
            // Expired between the renewal's check and the take's: neither (rare, allowed).
            assert_eq!(lease.epoch, epoch, "{job}");
        }
    }
    eprintln!("renewal won {renewed}, takeover won {taken} of 16");
}
per_backend!(renewal_racing_expiry_has_one_winner);

// Through takes, releases, expiries and retakes by three replicas, a job's epoch grows by one on
// every change of owner and never goes back; a release keeps it.
async fn epochs_only_grow(db: &TestDb) {
    let Some((_a_store, a)) = replica(db, "a", 60_000).await else {
        return;
    };
    let (_b_store, b) = replica(db, "b", 60_000).await.unwrap();
    let (_c_store, c) = replica(db, "c", 60_000).await.unwrap();
    let job = "epochs";
    let mut last = 0;
    for step in 0..9 {
        let taker = [&a, &b, &c][step % 3];
        let epoch = taker.try_take(job).await.unwrap().unwrap();
        assert_eq!(epoch, last + 1, "step {step}");
        // Someone else cannot take it while held.
        assert_eq!([&a, &b, &c][(step + 1) % 3].try_take(job).await.unwrap(), None);
        if step % 2 == 0 {
            assert!(taker.try_release(job, epoch).await.unwrap());
            assert_eq!(
                a.lease(job).await.unwrap().unwrap().epoch,
                epoch,
                "a release keeps the epoch"
            );
        } else {
            expire(db, job).await;
        }
        last = epoch;
    }
    // Retaking one's own expired lease grows the epoch too.
    let epoch = a.try_take(job).await.unwrap().unwrap();
    expire(db, job).await;
    assert_eq!(a.try_take(job).await.unwrap(), Some(epoch + 1));
}
per_backend!(epochs_only_grow);

// A stale owner's flush is refused with `Fenced` and writes nothing: once on the database's
// word (another replica took the lease over while this one did not notice), once on its own
// clock (the local deadline passed, the database is not even asked).
async fn a_stale_owners_flush_is_refused(db: &TestDb) {
    let Some((a_store, a)) = replica(db, "a", 60_000).await else {
        return;
    };
    let (_b_store, b) = replica(db, "b", 60_000).await.unwrap();
    let job = ctx("fenced");
    let keys = vec![job.job_key.clone()];
    assert_eq!(round(&a, &keys).await[&job.job_key], 1);
    a_store.store_parallelism_overrides(&job, &overrides(4)).await.unwrap();
    a_store.flush(&job).await.unwrap();
    let before = db.state_rows(&job.job_key).await;

    // B takes the lease over behind A's back (A frozen past its lease, say).
    expire(db, &job.job_key).await;
    assert_eq!(b.try_take(&job.job_key).await.unwrap(), Some(2));
    a_store.store_parallelism_overrides(&job, &overrides(8)).await.unwrap();
    let events = autoscaler_state::AnyEventHandler::open(&db.url).await.unwrap();
    let refused = autoscaler_state::flush_or_warn(&*a_store, &events, &job)
        .await
        .unwrap_err();
    assert!(matches!(refused, StateError::Fenced { .. }), "{refused}");
    assert!(
        events.events(&job.job_key).await.unwrap().is_empty(),
        "no event from a non-owner"
    );
    assert!(refused.to_string().contains("epoch 1"), "{refused}");
    assert_eq!(db.state_rows(&job.job_key).await, before, "nothing written");
    // A's cache of the job was dropped: it reads what the database holds.
    assert_eq!(a_store.get_parallelism_overrides(&job).await.unwrap(), overrides(4));

    // Self-fencing: leases of 300 ms are valid locally for 200 ms after the round started.
    let (c_store, c) = replica(db, "c", 300).await.unwrap();
    // A job C wins over A (the other live replica).
    let members = ["a".to_owned(), "c".to_owned()];
    let other = (0..)
        .map(|i| format!("self-fenced-{i}"))
        .find(|k| rendezvous_winner(k, &members) == Some("c"))
        .map(|k| ctx(&k))
        .unwrap();
    assert_eq!(round(&c, std::slice::from_ref(&other.job_key)).await.len(), 1);
    tokio::time::sleep(ms(220)).await;
    assert!(
        c.lease(&other.job_key).await.unwrap().unwrap().remaining_ms > 0,
        "still held on the database"
    );
    c_store
        .store_parallelism_overrides(&other, &overrides(2))
        .await
        .unwrap();
    let refused = c_store.flush(&other).await.unwrap_err();
    assert!(refused.to_string().contains("lapsed on the local clock"), "{refused}");
    assert!(db.state_rows(&other.job_key).await.is_empty());

    // A job never acquired cannot be written by a fenced store at all.
    let never = ctx("never-acquired");
    a_store
        .store_parallelism_overrides(&never, &overrides(3))
        .await
        .unwrap();
    assert!(matches!(a_store.flush(&never).await, Err(StateError::Fenced { .. })));
}
per_backend!(a_stale_owners_flush_is_refused);

// Flushes of many jobs at once share transactions, and a job among them whose lease another
// replica took over is refused alone: its rows stay as they were, every other job is written.
async fn a_stale_job_in_a_group_is_refused_alone(db: &TestDb) {
    let Some((a_store, a)) = replica(db, "a", 60_000).await else {
        return;
    };
    let (_b_store, b) = replica(db, "b", 60_000).await.unwrap();
    let keys = jobs("grouped", 40);
    assert_eq!(round(&a, &keys).await.len(), 40);
    let window = |n: u32| common::metric_history(n, 3);
    for key in &keys {
        a_store.store_collected_metrics(&ctx(key), &window(1)).await.unwrap();
        a_store.flush(&ctx(key)).await.unwrap();
    }
    let stale = &keys[13];
    let before = db.state_rows(stale).await;
    expire(db, stale).await;
    assert_eq!(b.try_take(stale).await.unwrap(), Some(2));

    let tasks: Vec<_> = keys
        .iter()
        .map(|key| {
            let (store, c) = (Arc::clone(&a_store), ctx(key));
            tokio::spawn(async move {
                // A grown window on top of the known one, and new overrides.
                let mut grown = store.get_collected_metrics(&c).await.unwrap();
                let newest = grown.iter().next_back().unwrap().1.clone();
                grown.insert(common::t(500), newest);
                store.store_collected_metrics(&c, &grown).await.unwrap();
                store.store_parallelism_overrides(&c, &overrides(6)).await.unwrap();
                (c.job_key.clone(), store.flush(&c).await)
            })
        })
        .collect();
    for task in tasks {
        let (key, flushed) = task.await.unwrap();
        if &key == stale {
            assert!(matches!(flushed, Err(StateError::Fenced { .. })), "{flushed:?}");
        } else {
            flushed.unwrap();
            let rows = db.state_rows(&key).await;
            assert_eq!(rows.len(), 4 + 1 + 1, "{key}: 4 snapshots, the index, the overrides");
        }
    }
    assert_eq!(db.state_rows(stale).await, before, "nothing of the stale job written");
}
per_backend!(a_stale_job_in_a_group_is_refused_alone);

// A replica leaving (SIGTERM) frees its leases and its membership at once: the other replica
// takes its jobs at its very next round and reads what the first one persisted.
async fn release_then_immediate_takeover(db: &TestDb) {
    let Some((a_store, a)) = replica(db, "a", 60_000).await else {
        return;
    };
    let (b_store, b) = replica(db, "b", 60_000).await.unwrap();
    let all = jobs("handoff", 12);
    round(&b, &all).await; // alone: takes all
    round(&a, &all).await; // a live now, b still holds a's jobs
    round(&b, &all).await; // b gives them up
    let a_jobs = round(&a, &all).await; // a takes them
    let job = ctx(a_jobs.keys().next().expect("a wins some of 12 jobs"));
    a_store.store_parallelism_overrides(&job, &overrides(6)).await.unwrap();
    a_store.flush(&job).await.unwrap();
    // B read the job while A held it (no cache kept for a job B does not hold).
    assert_eq!(b_store.get_parallelism_overrides(&job).await.unwrap(), overrides(6));

    let left = Instant::now();
    JobOwnership::<String>::leave(&a).await.unwrap();
    let b_jobs = round(&b, &all).await;
    let took = left.elapsed();
    eprintln!("handoff of {} jobs took {took:?} (leave + one round)", a_jobs.len());
    assert_eq!(b_jobs.len(), all.len());
    for (job, epoch) in &a_jobs {
        assert_eq!(b_jobs[job], epoch + 1, "{job}");
    }
    assert_eq!(b_store.get_parallelism_overrides(&job).await.unwrap(), overrides(6));
    b_store.store_parallelism_overrides(&job, &overrides(7)).await.unwrap();
    b_store.flush(&job).await.unwrap();
    // A, gone, cannot write any more.
    a_store.store_parallelism_overrides(&job, &overrides(9)).await.unwrap();
    assert!(matches!(a_store.flush(&job).await, Err(StateError::Fenced { .. })));
}
per_backend!(release_then_immediate_takeover);

// A replica that (re)acquires a job reloads it: what it cached under an earlier epoch is not
// what the job's state is any more.
async fn a_reacquired_job_is_read_again_from_the_database(db: &TestDb) {
    let Some((a_store, a)) = replica(db, "a", 60_000).await else {
        return;
    };
    let job = ctx("reacquired");
    let keys = vec![job.job_key.clone()];
    assert_eq!(round(&a, &keys).await[&job.job_key], 1);
    a_store.store_parallelism_overrides(&job, &overrides(2)).await.unwrap();
    a_store.flush(&job).await.unwrap();

    // While A was away (frozen), its lease lapsed and the job's state changed in the database
    // (another owner's flush; here an unfenced store), then the lease was given up.
    expire(db, &job.job_key).await;
    let writer = AnyStateStore::open(&db.url).await.unwrap();
    writer.store_parallelism_overrides(&job, &overrides(5)).await.unwrap();
    writer.flush(&job).await.unwrap();
    db.exec(
        "UPDATE t_flink_autoscaler_job_lease SET owner = NULL WHERE job_key = ?",
        &[&job.job_key],
    )
    .await;

    // A's round takes it again at epoch 2: A's reads now show the database, not its cache.
    assert_eq!(round(&a, &keys).await[&job.job_key], 2);
    assert_eq!(a_store.get_parallelism_overrides(&job).await.unwrap(), overrides(5));
    a_store.store_parallelism_overrides(&job, &overrides(6)).await.unwrap();
    a_store.flush(&job).await.unwrap();
    assert_eq!(
        writer.get_parallelism_overrides(&job).await.unwrap(),
        overrides(5),
        "writer's own cache"
    );
    let fresh = AnyStateStore::open(&db.url).await.unwrap();
    assert_eq!(fresh.get_parallelism_overrides(&job).await.unwrap(), overrides(6));
}
per_backend!(a_reacquired_job_is_read_again_from_the_database);

// 60 jobs over three replicas: each gets a fair share; when one leaves, only its jobs move.
async fn jobs_spread_over_replicas_and_few_move(db: &TestDb) {
    let Some((_a_store, a)) = replica(db, "a", 60_000).await else {
        return;
    };
    let (_b_store, b) = replica(db, "b", 60_000).await.unwrap();
    let (_c_store, c) = replica(db, "c", 60_000).await.unwrap();
    let all = jobs("fleet", 60);
    let replicas = [&a, &b, &c];
    for r in replicas {
        round(r, &all).await;
    }
    let mut owned = Vec::new();
    for _ in 0..2 {
        owned.clear();
        for r in replicas {
            owned.push(round(r, &all).await);
        }
    }
    let counts: Vec<usize> = owned.iter().map(BTreeMap::len).collect();
    eprintln!("60 jobs over 3 replicas: {counts:?}");
    assert_eq!(counts.iter().sum::<usize>(), 60);
    for count in &counts {
        assert!((10..=30).contains(count), "{counts:?}");
    }

    JobOwnership::<String>::leave(&c).await.unwrap();
    let after = [round(&a, &all).await, round(&b, &all).await];
    let holder_before: HashMap<&String, usize> = (0..3).flat_map(|i| owned[i].keys().map(move |k| (k, i))).collect();
    let mut moved = 0;
    for job in &all {
        let now: Vec<usize> = (0..2).filter(|i| after[*i].contains_key(job)).collect();
        assert_eq!(now.len(), 1, "{job}");
        if holder_before[job] != now[0] {
            moved += 1;
            assert_eq!(holder_before[job], 2, "{job} moved between the replicas that stayed");
        }
    }
    eprintln!("replica c left: {moved} of 60 jobs moved (c held {})", counts[2]);
    assert_eq!(moved, counts[2]);
    // The score is what decides: c's jobs went to the better of a and b.
    for job in owned[2].keys() {
        let (sa, sb) = (rendezvous_score(job, "a"), rendezvous_score(job, "b"));
        assert_eq!(after[0].contains_key(job), sa > sb, "{job}");
    }
}
per_backend!(jobs_spread_over_replicas_and_few_move);

// The cost of a round over a large fleet: taking 1000 jobs, then renewing them.
async fn a_round_over_a_thousand_jobs_is_quick(db: &TestDb) {
    let Some((_store, a)) = replica(db, "a", 60_000).await else {
        return;
    };
    let all = jobs("large", 1000);
    let started = Instant::now();
    assert_eq!(round(&a, &all).await.len(), 1000);
    let first = started.elapsed();
    let started = Instant::now();
    for _ in 0..5 {
        assert_eq!(round(&a, &all).await.len(), 1000);
    }
    let steady = started.elapsed() / 5;
    eprintln!("round over 1000 jobs: {first:?} taking them all, {steady:?} renewing");
    assert!(steady < Duration::from_secs(2), "{steady:?}");
}
per_backend!(a_round_over_a_thousand_jobs_is_quick);
