//! A process killed with SIGKILL in the middle of flushes: on restart every job's state is one
//! consistent version (all old or all new), never a mix and never a corrupt row.
//!
//! The test re-executes its own binary as the child (`crash_child`, switched on by
//! `AUTOSCALER_STATE_CRASH_CHILD_URL`), which writes every state of every job with a version number
//! and flushes in a loop; the parent kills it at varying moments and checks the database.

#![allow(missing_docs, clippy::unwrap_used)]

mod common;

use autoscaler_core::AutoScalerStateStore;
use autoscaler_state::AnyStateStore;
use common::{Ctx, Kind, TestDb, ctx, json, sample};
use std::io::{BufRead as _, BufReader};
use std::os::unix::process::ExitStatusExt as _;
use std::process::{Command, Stdio};
use std::time::Duration;

const CHILD_URL_ENV: &str = "AUTOSCALER_STATE_CRASH_CHILD_URL";
const CHILD_BASE_ENV: &str = "AUTOSCALER_STATE_CRASH_CHILD_BASE";
const JOBS: usize = 6;

fn jobs() -> Vec<Ctx> {
    (0..JOBS).map(|i| ctx(&format!("crash-job-{i}"))).collect()
}

/// The child: store version `base + round` of every state of every job and flush, forever.
#[test]
fn crash_child() {
    let (Ok(url), Ok(base)) = (std::env::var(CHILD_URL_ENV), std::env::var(CHILD_BASE_ENV)) else {
        return; // not the child
    };
    let base: u32 = base.parse().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let store = AnyStateStore::open(&url).await.unwrap();
        for round in 0.. {
            let version = base + round;
            let mut s = sample(version);
            // A long history now and then, so some flushes write a compressed row.
            if round % 3 == 2 {
                s.metrics = common::metric_history(version, 400);
            }
            for c in jobs() {
                store.store_scaling_history(&c, &s.history).await.unwrap();
                store.store_scaling_tracking(&c, &s.tracking).await.unwrap();
                store.store_collected_metrics(&c, &s.metrics).await.unwrap();
                store.store_evaluated_metrics(&c, &s.evaluated).await.unwrap();
                store.store_parallelism_overrides(&c, &s.overrides).await.unwrap();
                store.store_config_changes(&c, &s.changes).await.unwrap();
                store.store_delayed_scale_down(&c, &s.delayed).await.unwrap();
                store.flush(&c).await.unwrap();
            }
            println!("ROUND {version}");
        }
    });
}

/// The version a job's states carry, checking that every state agrees. `None` if the job has no state.
async fn consistent_version(store: &AnyStateStore, c: &Ctx) -> Option<u32> {
    let overrides = store.get_parallelism_overrides(c).await.unwrap();
    let Some(&version) = overrides.values().next() else {
        assert!(
            store.get_scaling_history(c).await.unwrap().is_empty(),
            "{}: a mix",
            c.job_key
        );
        return None;
    };
    let s = sample(version);
    let key = &c.job_key;
    assert_eq!(
        json(&store.get_scaling_history(c).await.unwrap()),
        json(&s.history),
        "{key} v{version}"
    );
    assert_eq!(
        store.get_scaling_tracking(c).await.unwrap(),
        s.tracking,
        "{key} v{version}"
    );
    let metrics = store.get_collected_metrics(c).await.unwrap();
    let long = common::metric_history(version, 400);
    assert!(
        json(&metrics) == json(&s.metrics) || json(&metrics) == json(&long),
        "{key}: collected metrics are not version {version}"
    );
    // Kept in memory only: the process that reopens the database has none.
    assert_eq!(store.get_evaluated_metrics(c).await.unwrap(), None, "{key}");
    assert_eq!(
        store.get_config_changes(c).await.unwrap(),
        s.changes,
        "{key} v{version}"
    );
    assert_eq!(
        store.get_delayed_scale_down(c).await.unwrap(),
        s.delayed,
        "{key} v{version}"
    );
    Some(version)
}

async fn killed_mid_flush_leaves_old_or_new(kind: Kind) {
    let Some(db) = TestDb::new(kind).await else { return };
    let mut last_versions: Vec<Option<u32>> = vec![None; JOBS];
    for (kill, delay_ms) in [0u64, 7, 23, 51, 120].into_iter().enumerate() {
        let base = 1000 * (kill as u32 + 1);
        let (mut child, rx, drain) = spawn_child(&db.url, base);
        // Two complete rounds, then the kill lands a little later: at a different point of the
        // flush loop each time.
        for _ in 0..2 {
            if rx.recv_timeout(Duration::from_secs(60)).is_err() {
                child.kill().unwrap();
                panic!("the child did not finish two rounds within 60 s");
            }
        }
        std::thread::sleep(Duration::from_millis(delay_ms));
        child.kill().unwrap(); // SIGKILL
        let status = child.wait().unwrap();
        assert_eq!(
            status.signal(),
            Some(9),
            "the child must die of SIGKILL, not exit: {status}"
        );
        drain.join().unwrap();

        // "Restart": a new store reads what the killed process left.
        let store = AnyStateStore::open(&db.url).await.unwrap();
        for (i, c) in jobs().iter().enumerate() {
            let version = consistent_version(&store, c).await;
            let version = version.unwrap_or_else(|| panic!("{}: lost after two full rounds", c.job_key));
            assert!(
                version > base && version < base + 1000,
                "{}: version {version} is not from run {kill}",
                c.job_key
            );
            if let Some(previous) = last_versions[i] {
                assert!(version > previous);
            }
            last_versions[i] = Some(version);
            if db.persistent() {
                assert_eq!(
                    db.state_types(&c.job_key).await.len(),
                    6,
                    "rows of every state type written"
                );
            }
        }
        store.close().await;
    }
    db.cleanup().await;
}

/// Starts a child writing versions from `base`, with a thread draining its stdout; the receiver
/// gets each `ROUND` line.
fn spawn_child(
    url: &str,
    base: u32,
) -> (
    std::process::Child,
    std::sync::mpsc::Receiver<String>,
    std::thread::JoinHandle<()>,
) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["crash_child", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_URL_ENV, url)
        .env(CHILD_BASE_ENV, base.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let drain = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.starts_with("ROUND ") {
                let _ = tx.send(line);
            }
        }
    });
    (child, rx, drain)
}

// Two autoscaler processes writing the same jobs on one database at once: neither fails (each
// child would panic and exit on an error, instead of dying of our SIGKILL), and every job ends
// as one process's complete version.
async fn two_processes_write_the_same_jobs(kind: Kind) {
    let Some(db) = TestDb::new(kind).await else { return };
    // Create the schema first so the two children do not race on it (that race has its own test).
    AnyStateStore::open(&db.url).await.unwrap().close().await;
    let mut children = vec![spawn_child(&db.url, 10_000), spawn_child(&db.url, 20_000)];
    for (child, rx, _) in &mut children {
        for _ in 0..3 {
            if rx.recv_timeout(Duration::from_secs(60)).is_err() {
                child.kill().unwrap();
                panic!("a child did not finish three rounds within 60 s (did a flush fail?)");
            }
        }
    }
    for (mut child, _, drain) in children {
        child.kill().unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(9), "a child exited by itself: {status}");
        drain.join().unwrap();
    }
    let store = AnyStateStore::open(&db.url).await.unwrap();
    for c in jobs() {
        let version = consistent_version(&store, &c).await.unwrap();
        assert!((10_000..30_000).contains(&version), "{version}");
        assert_eq!(db.state_types(&c.job_key).await.len(), 6);
    }
    store.close().await;
    db.cleanup().await;
}

#[test]
fn two_processes_sqlite() {
    if std::env::var(CHILD_URL_ENV).is_ok() {
        return;
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(two_processes_write_the_same_jobs(Kind::Sqlite));
}

#[test]
fn two_processes_postgres() {
    if std::env::var(CHILD_URL_ENV).is_ok() {
        return;
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(two_processes_write_the_same_jobs(Kind::Postgres));
}

#[test]
fn two_processes_mysql() {
    if std::env::var(CHILD_URL_ENV).is_ok() {
        return;
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(two_processes_write_the_same_jobs(Kind::MySql));
}

#[test]
fn sigkill_mid_flush_sqlite() {
    if std::env::var(CHILD_URL_ENV).is_ok() {
        return;
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(killed_mid_flush_leaves_old_or_new(Kind::Sqlite));
}

#[test]
fn sigkill_mid_flush_postgres() {
    if std::env::var(CHILD_URL_ENV).is_ok() {
        return;
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(killed_mid_flush_leaves_old_or_new(Kind::Postgres));
}

#[test]
fn sigkill_mid_flush_mysql() {
    if std::env::var(CHILD_URL_ENV).is_ok() {
        return;
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(killed_mid_flush_leaves_old_or_new(Kind::MySql));
}
