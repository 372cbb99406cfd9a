//! Several `flink-autoscaler run` processes on one state database (issue 22): each job owned by
//! exactly one replica through its lease, under configuration skew, through a `kill -9` and a
//! SIGTERM handoff, a replica cut off from the database; and a database that refuses the state
//! writes, with which no rescale goes out.
//!
//! The fake JobManager runs in this process; the replicas are the real binary. The tests need
//! the real databases: PostgreSQL (`AUTOSCALER_TEST_POSTGRES_URL`) and MariaDB
//! (`AUTOSCALER_TEST_MYSQL_URL`). Without them they are skipped, except in CI (`CI=true`), where
//! a missing server fails them.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use autoscaler_core::HaOptions;
use autoscaler_state::{AnyStateStore, DbJobOwnership};
use flink_fake_jobmanager::{FakeConfig, FakeJobManager, RunningFakeJobManager};
use sqlx::Connection as _;
use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const POSTGRES_ENV: &str = "AUTOSCALER_TEST_POSTGRES_URL";
const MYSQL_ENV: &str = "AUTOSCALER_TEST_MYSQL_URL";
/// The lease settings of every replica: a takeover after a crash within 3 s + 1 s.
const LEASE: Duration = Duration::from_secs(3);
const RENEW: Duration = Duration::from_secs(1);
const INTERVAL: Duration = Duration::from_secs(1);

/// The server's admin URL, or `None` (skip) outside CI; in CI a missing server is a failure.
fn server(env: &str) -> Option<String> {
    match std::env::var(env) {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI=true but {env} is not set"
            );
            eprintln!("skipping: {env} is not set");
            None
        }
    }
}

fn unique_name(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("as_rep_{tag}_{}_{nanos:x}", std::process::id())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Postgres,
    MySql,
}

/// A fresh PostgreSQL schema or MariaDB database, dropped by [`IsolatedDb::drop_now`].
struct IsolatedDb {
    kind: Kind,
    admin: String,
    name: String,
    /// The URL the replicas use.
    url: String,
}

impl IsolatedDb {
    async fn create(kind: Kind, admin: &str, tag: &str) -> Self {
        let name = unique_name(tag);
        let url = match kind {
            Kind::Postgres => {
                let mut conn = sqlx::PgConnection::connect(admin).await.expect("connect");
                sqlx::raw_sql(&format!("CREATE SCHEMA {name}"))
                    .execute(&mut conn)
                    .await
                    .expect("create schema");
                let sep = if admin.contains('?') { '&' } else { '?' };
                format!("{admin}{sep}options[search_path]={name}")
            }
            Kind::MySql => {
                let mut conn = sqlx::MySqlConnection::connect(admin).await.expect("connect");
                sqlx::raw_sql(&format!("CREATE DATABASE {name} CHARACTER SET utf8mb4"))
                    .execute(&mut conn)
                    .await
                    .expect("create database");
                // mysql://USER@HOST:PORT/DB?Q -> .../NAME?Q
                let (head, tail) = admin.split_at(admin.find("://").expect("scheme") + 3);
                let (authority, rest) = tail.split_at(tail.find('/').unwrap_or(tail.len()));
                let query = rest.find('?').map(|i| &rest[i..]).unwrap_or("");
                format!("{head}{authority}/{name}{query}")
            }
        };
        Self {
            kind,
            admin: admin.to_owned(),
            name,
            url,
        }
    }

    async fn exec(&self, sql: &str) {
        match self.kind {
            Kind::Postgres => {
                let mut conn = sqlx::PgConnection::connect(&self.url).await.expect("connect");
                sqlx::raw_sql(sql).execute(&mut conn).await.expect(sql);
            }
            Kind::MySql => {
                let mut conn = sqlx::MySqlConnection::connect(&self.url).await.expect("connect");
                sqlx::raw_sql(sql).execute(&mut conn).await.expect(sql);
            }
        }
    }

    async fn drop_now(&self) {
        match self.kind {
            Kind::Postgres => {
                if let Ok(mut conn) = sqlx::PgConnection::connect(&self.admin).await {
                    let _ = sqlx::raw_sql(&format!("DROP SCHEMA {} CASCADE", self.name))
                        .execute(&mut conn)
                        .await;
                }
            }
            Kind::MySql => {
                if let Ok(mut conn) = sqlx::MySqlConnection::connect(&self.admin).await {
                    let _ = sqlx::raw_sql(&format!("DROP DATABASE {}", self.name))
                        .execute(&mut conn)
                        .await;
                }
            }
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// One `flink-autoscaler run` process; killed when dropped.
struct Replica {
    id: String,
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Replica {
    fn start(id: &str, dir: &std::path::Path, flink: &str, state: &str, settings: &[(&str, &str)]) -> Self {
        let config = dir.join(format!("{id}.yaml"));
        let mut yaml = String::new();
        for (key, value) in settings {
            yaml.push_str(&format!("{key}: '{value}'\n"));
        }
        std::fs::write(&config, yaml).expect("config");
        let port = free_port();
        let log = dir.join(format!("{id}.log"));
        let child = Command::new(env!("CARGO_BIN_EXE_flink-autoscaler"))
            .args(["run", "--flink-url"])
            .arg(format!("fake={flink}"))
            .arg("--state")
            .arg(state)
            .arg("--config")
            .arg(&config)
            .args(["--interval", "1 s", "--replica-id", id, "--metrics-addr"])
            .arg(format!("127.0.0.1:{port}"))
            .args(["--shutdown-grace", "5 s", "--run-for", "170 s"])
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log"))
            .spawn()
            .expect("spawn flink-autoscaler");
        Self {
            id: id.to_owned(),
            child,
            port,
            log,
        }
    }

    fn get(&self, path: &str) -> Option<(u16, String)> {
        http_get(self.port, path)
    }

    fn metrics(&self) -> String {
        self.get("/metrics").map(|(_, body)| body).unwrap_or_default()
    }

    /// `kill -9`.
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill -TERM");
        assert!(status.success());
    }

    /// Waits (at most `bound`) for the process to exit; its exit code.
    fn wait_exit(&mut self, bound: Duration) -> Option<i32> {
        let started = Instant::now();
        while started.elapsed() < bound {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A plain HTTP/1.1 GET on 127.0.0.1:`port` (2 s bound): status and body.
fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut raw = String::new();
    stream.read_to_string(&mut raw).ok()?;
    let (head, body) = raw.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    Some((status, body.to_owned()))
}

/// The value of the series `name` (first line, whatever its labels).
fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// `flink_autoscaler_scalings_total` per job id.
fn scalings_per_job(text: &str) -> HashMap<String, u64> {
    text.lines()
        .filter(|l| l.starts_with("flink_autoscaler_scalings_total{"))
        .filter_map(|l| {
            let job = l.split("job_id=\"").nth(1)?.split('"').next()?.to_owned();
            let value: f64 = l.rsplit(' ').next()?.parse().ok()?;
            Some((job, value as u64))
        })
        .collect()
}

/// Reads the lease rows (never takes part: no heartbeat, no round).
struct Observer(DbJobOwnership);

impl Observer {
    async fn open(url: &str) -> Self {
        let store = AnyStateStore::open(url).await.expect("open the state database");
        let options = HaOptions {
            replica_id: "test-observer".into(),
            lease_duration: LEASE,
            renew_interval: RENEW,
        };
        Self(DbJobOwnership::attach(&store, options).await.expect("attach"))
    }

    /// The live owner of every job (`None`: free, expired or never leased).
    async fn owners(&self, keys: &[String]) -> BTreeMap<String, Option<String>> {
        let mut out = BTreeMap::new();
        for key in keys {
            let owner = match self.0.lease(key).await {
                Ok(Some(lease)) if lease.remaining_ms > 0 => lease.owner,
                _ => None,
            };
            out.insert(key.clone(), owner);
        }
        out
    }
}

fn settings<'a>(target: &'a str, extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut settings = vec![
        ("job.autoscaler.metrics.window", "10 s"),
        ("job.autoscaler.stabilization.interval", "3 s"),
        ("job.autoscaler.scale-down.interval", "0 s"),
        ("job.autoscaler.utilization.target", target),
        ("autoscaler.service.ha.lease-duration", "3 s"),
        ("autoscaler.service.ha.renew-interval", "1 s"),
    ];
    settings.extend_from_slice(extra);
    settings
}

async fn start_fake(jobs: usize, hot_every: usize) -> RunningFakeJobManager {
    FakeJobManager::new(FakeConfig {
        jobs,
        vertices: 4,
        hot_every,
        ..FakeConfig::default()
    })
    .start("127.0.0.1:0".parse().expect("address"))
    .await
    .expect("start the fake JobManager")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// Polls `check` every 100 ms until it holds or `bound` passes; how long it took.
fn wait_until(bound: Duration, mut check: impl FnMut() -> bool) -> Option<Duration> {
    let started = Instant::now();
    while started.elapsed() < bound {
        if check() {
            return Some(started.elapsed());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    None
}

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(unique_name(tag));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// PUTs per job id at the fake.
fn puts(fake: &RunningFakeJobManager) -> BTreeMap<String, usize> {
    fake.fake().stats().rescales_per_job().into_iter().collect()
}

/// Every rescale of a job is at least one cycle interval after the previous one: never two
/// decisions of one job in a cycle window.
fn assert_one_rescale_per_cycle_window(fake: &RunningFakeJobManager) {
    let mut last: HashMap<String, i64> = HashMap::new();
    for rescale in fake.fake().stats().rescales {
        if let Some(previous) = last.insert(rescale.job_id.clone(), rescale.at_ms) {
            let gap = rescale.at_ms - previous;
            assert!(
                gap >= i64::try_from(INTERVAL.as_millis()).unwrap(),
                "job {} rescaled twice within {gap} ms",
                rescale.job_id
            );
        }
    }
}

/// Three replicas with different utilization targets on one PostgreSQL database: each job has
/// one owner, only the owner rescales it (at most 3 PUTs per job over the run, against 58 in 90 s
/// without leases), a `kill -9`ed replica's jobs are taken over within lease duration + one
/// interval, and a SIGTERMed replica hands its jobs over within about one renew interval.
#[test]
fn three_replicas_on_postgres_share_the_jobs_under_config_skew() {
    let Some(admin) = server(POSTGRES_ENV) else {
        return;
    };
    let test_started = Instant::now();
    let rt = runtime();
    let db = rt.block_on(IsolatedDb::create(Kind::Postgres, &admin, "pg3"));
    let fake = rt.block_on(start_fake(20, 4));
    let keys: Vec<String> = fake.fake().job_ids().iter().map(|id| format!("fake/{id}")).collect();
    let hot = keys.len().div_ceil(4);
    let dir = temp_dir("pg3");
    let flink = fake.url();
    let mut a = Replica::start("replica-a", &dir, &flink, &db.url, &settings("0.5", &[]));
    let mut b = Replica::start("replica-b", &dir, &flink, &db.url, &settings("0.8", &[]));
    let c = Replica::start("replica-c", &dir, &flink, &db.url, &settings("0.65", &[]));
    let observer = rt.block_on(Observer::open(&db.url));
    let owners = || rt.block_on(observer.owners(&keys));
    let logs = |replicas: &[&Replica]| {
        replicas
            .iter()
            .map(|r| format!("--- {} ---\n{}", r.id, r.log_text()))
            .collect::<String>()
    };

    // Every job gets an owner, and the three replicas share them.
    let spread = wait_until(Duration::from_secs(30), || {
        let owners = owners();
        let distinct: std::collections::HashSet<_> = owners.values().flatten().collect();
        owners.values().all(Option::is_some) && distinct.len() == 3
    });
    assert!(spread.is_some(), "the jobs were not spread:\n{}", logs(&[&a, &b, &c]));
    for replica in [&a, &b, &c] {
        // Each sees the three at its next round.
        let seen = wait_until(RENEW * 3, || {
            metric(&replica.metrics(), "flink_autoscaler_ha_replicas") == Some(3.0)
        });
        assert!(seen.is_some(), "{}: {}", replica.id, replica.metrics());
        assert_eq!(replica.get("/readyz").map(|r| r.0), Some(200), "{}", replica.id);
    }
    // The hot jobs get rescaled by their owners; then the skew has time to show.
    let scaled = wait_until(Duration::from_secs(40), || puts(&fake).len() >= hot);
    assert!(scaled.is_some(), "{:?}\n{}", puts(&fake), logs(&[&a, &b, &c]));
    std::thread::sleep(Duration::from_secs(6));

    // Before any failure: each job's decisions come from one replica, its lease owner, and every
    // PUT is one of them.
    let owners_now = owners();
    let scalings: Vec<(String, HashMap<String, u64>)> = [&a, &b, &c]
        .iter()
        .map(|r| (r.id.clone(), scalings_per_job(&r.metrics())))
        .collect();
    let puts_before = puts(&fake);
    for (job_id, count) in &puts_before {
        let deciders: Vec<&str> = scalings
            .iter()
            .filter(|(_, per_job)| per_job.get(job_id).copied().unwrap_or(0) > 0)
            .map(|(id, _)| id.as_str())
            .collect();
        assert_eq!(deciders.len(), 1, "job {job_id}: decided by {deciders:?}");
        let decisions: u64 = scalings.iter().filter_map(|(_, m)| m.get(job_id)).sum();
        assert!(
            *count as u64 <= decisions,
            "job {job_id}: {count} PUTs for {decisions} decisions"
        );
        assert_eq!(
            owners_now.get(&format!("fake/{job_id}")).cloned().flatten().as_deref(),
            Some(deciders[0]),
            "job {job_id} was rescaled by a replica that does not own it"
        );
    }
    eprintln!("PUTs per job before the failures: {puts_before:?}");

    // kill -9 of replica A: its jobs are taken over within lease duration + one interval.
    let owners_before = owners();
    let a_jobs: Vec<String> = owners_before
        .iter()
        .filter(|(_, o)| o.as_deref() == Some("replica-a"))
        .map(|(k, _)| k.clone())
        .collect();
    assert!(!a_jobs.is_empty());
    a.kill();
    let killed_at = Instant::now();
    let takeover = wait_until(Duration::from_secs(15), || {
        let owners = owners();
        a_jobs.iter().all(|k| {
            matches!(
                owners.get(k).cloned().flatten().as_deref(),
                Some("replica-b" | "replica-c")
            )
        })
    });
    let takeover = takeover.expect("replica-a's jobs were not taken over");
    // A cycle by the new owner: its /jobs/{key} shows the job owned, with a record after the kill.
    let first_cycle = wait_until(Duration::from_secs(15), || {
        a_jobs.iter().all(|key| {
            [&b, &c].iter().any(|r| {
                r.get(&format!("/jobs/{key}"))
                    .and_then(|(status, body)| (status == 200).then_some(body))
                    .and_then(|body| serde_json::from_str::<serde_json::Value>(&body).ok())
                    .is_some_and(|v| {
                        v["owned"] == serde_json::json!(true)
                            && v["age_seconds"]
                                .as_f64()
                                .is_some_and(|age| age < killed_at.elapsed().as_secs_f64())
                    })
            })
        })
    });
    first_cycle.expect("no cycle of replica-a's jobs after the kill");
    let first_cycle = killed_at.elapsed();
    eprintln!(
        "kill -9: {} jobs taken over {:.2} s after the kill, all cycled by their new owners {:.2} s after it",
        a_jobs.len(),
        takeover.as_secs_f64(),
        first_cycle.as_secs_f64()
    );
    assert!(
        takeover <= LEASE + INTERVAL + Duration::from_millis(1500),
        "takeover after {takeover:?}"
    );
    // A job another replica owns is served from the database's lease row.
    let c_owned = owners().into_iter().find(|(_, o)| o.as_deref() == Some("replica-c"));
    if let Some((key, _)) = c_owned {
        let (status, body) = b.get(&format!("/jobs/{key}")).expect("/jobs/{key}");
        let v: serde_json::Value = serde_json::from_str(&body).expect("json");
        assert_eq!(status, 200, "{body}");
        assert_eq!(v["owned"], serde_json::json!(false), "{body}");
        assert_eq!(v["owner"], serde_json::json!("replica-c"), "{body}");
    }

    // SIGTERM of replica B: it stops, gives its leases up, and C takes them at its next round.
    let b_jobs: Vec<String> = owners()
        .iter()
        .filter(|(_, o)| o.as_deref() == Some("replica-b"))
        .map(|(k, _)| k.clone())
        .collect();
    assert!(!b_jobs.is_empty());
    b.terminate();
    let handoff = wait_until(Duration::from_secs(10), || {
        let owners = owners();
        b_jobs
            .iter()
            .all(|k| owners.get(k).cloned().flatten().as_deref() == Some("replica-c"))
    })
    .expect("replica-b's jobs were not handed over");
    assert_eq!(b.wait_exit(Duration::from_secs(10)), Some(0), "{}", b.log_text());
    eprintln!(
        "SIGTERM: {} jobs handed over after {:.2} s",
        b_jobs.len(),
        handoff.as_secs_f64()
    );
    assert!(
        handoff <= RENEW + Duration::from_millis(1500),
        "handoff after {handoff:?}"
    );
    assert!(b.log_text().contains("gave up every job lease"), "{}", b.log_text());

    // C alone: it owns all 20, sees one replica, and the run stays within 3 PUTs per job.
    let alone = wait_until(Duration::from_secs(10), || {
        let text = c.metrics();
        metric(&text, "flink_autoscaler_owned_jobs") == Some(20.0)
            && metric(&text, "flink_autoscaler_ha_replicas") == Some(1.0)
    });
    assert!(alone.is_some(), "{}", c.metrics());
    std::thread::sleep(Duration::from_secs(4));
    let puts_after = puts(&fake);
    eprintln!(
        "PUTs per job over the run: {puts_after:?} ({} in all, {:.0} s)",
        puts_after.values().sum::<usize>(),
        test_started.elapsed().as_secs_f64()
    );
    for (job, count) in &puts_after {
        assert!(*count <= 3, "job {job}: {count} PUTs");
    }
    assert_one_rescale_per_cycle_window(&fake);
    assert!(
        metric(&c.metrics(), "flink_autoscaler_ownership_changes_total").is_some_and(|n| n >= 20.0),
        "{}",
        c.metrics()
    );

    drop((a, b, c));
    rt.block_on(async {
        fake.stop().await;
        db.drop_now().await;
    });
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        test_started.elapsed() < Duration::from_secs(120),
        "{:?}",
        test_started.elapsed()
    );
}

/// The smaller variant on MariaDB: two replicas with different targets, one killed with `kill -9`.
#[test]
fn two_replicas_on_mariadb_take_over_after_a_kill() {
    let Some(admin) = server(MYSQL_ENV) else {
        return;
    };
    let rt = runtime();
    let db = rt.block_on(IsolatedDb::create(Kind::MySql, &admin, "my2"));
    let fake = rt.block_on(start_fake(10, 3));
    let keys: Vec<String> = fake.fake().job_ids().iter().map(|id| format!("fake/{id}")).collect();
    let dir = temp_dir("my2");
    let flink = fake.url();
    let mut a = Replica::start("replica-a", &dir, &flink, &db.url, &settings("0.5", &[]));
    let b = Replica::start("replica-b", &dir, &flink, &db.url, &settings("0.8", &[]));
    let observer = rt.block_on(Observer::open(&db.url));
    let owners = || rt.block_on(observer.owners(&keys));
    let spread = wait_until(Duration::from_secs(30), || {
        let owners = owners();
        let distinct: std::collections::HashSet<_> = owners.values().flatten().collect();
        owners.values().all(Option::is_some) && distinct.len() == 2
    });
    assert!(spread.is_some(), "{}\n{}", a.log_text(), b.log_text());
    let scaled = wait_until(Duration::from_secs(40), || puts(&fake).len() >= 4);
    assert!(scaled.is_some(), "{:?}\n{}", puts(&fake), b.log_text());

    let a_jobs: Vec<String> = owners()
        .iter()
        .filter(|(_, o)| o.as_deref() == Some("replica-a"))
        .map(|(k, _)| k.clone())
        .collect();
    a.kill();
    let takeover = wait_until(Duration::from_secs(15), || {
        let owners = owners();
        a_jobs
            .iter()
            .all(|k| owners.get(k).cloned().flatten().as_deref() == Some("replica-b"))
    })
    .expect("replica-a's jobs were not taken over");
    eprintln!(
        "MariaDB kill -9: {} jobs taken over after {:.2} s",
        a_jobs.len(),
        takeover.as_secs_f64()
    );
    assert!(
        takeover <= LEASE + INTERVAL + Duration::from_millis(1500),
        "takeover after {takeover:?}"
    );
    std::thread::sleep(Duration::from_secs(4));
    let puts = puts(&fake);
    eprintln!("MariaDB PUTs per job: {puts:?}");
    for (job, count) in &puts {
        assert!(*count <= 3, "job {job}: {count} PUTs");
    }
    assert_one_rescale_per_cycle_window(&fake);
    drop((a, b));
    rt.block_on(async {
        fake.stop().await;
        db.drop_now().await;
    });
    let _ = std::fs::remove_dir_all(&dir);
}

/// A database that refuses every state write (a trigger raising on the state table, as a full
/// disk or a read-only database would) while the leases still work: the decisions cannot be
/// flushed, so no PUT reaches the cluster and `/readyz` says why; a replica restarted after a
/// crash in that window sends nothing either. Once writes are accepted again, the same jobs are
/// rescaled: the decisions were held back, not absent.
#[test]
fn no_rescale_reaches_the_cluster_while_the_state_cannot_be_written() {
    let Some(admin) = server(POSTGRES_ENV) else {
        return;
    };
    let rt = runtime();
    let db = rt.block_on(IsolatedDb::create(Kind::Postgres, &admin, "ro"));
    let fake = rt.block_on(start_fake(4, 1));
    let keys: Vec<String> = fake.fake().job_ids().iter().map(|id| format!("fake/{id}")).collect();
    let dir = temp_dir("ro");
    let mut replica = Replica::start("replica-ro", &dir, &fake.url(), &db.url, &settings("0.5", &[]));
    let observer = rt.block_on(Observer::open(&db.url));
    let owned = wait_until(Duration::from_secs(30), || {
        rt.block_on(observer.owners(&keys)).values().all(Option::is_some)
    });
    assert!(owned.is_some(), "{}", replica.log_text());
    // Well before the first decision (the metric window is 10 s), the state table turns read-only.
    rt.block_on(db.exec(
        "CREATE FUNCTION refuse_writes() RETURNS trigger LANGUAGE plpgsql AS \
         $$ BEGIN RAISE EXCEPTION 'the state is read-only (test)'; END $$; \
         CREATE TRIGGER refuse_writes BEFORE INSERT OR UPDATE OR DELETE ON t_flink_autoscaler_state_store \
         FOR EACH STATEMENT EXECUTE FUNCTION refuse_writes();",
    ));
    assert!(puts(&fake).is_empty(), "rescaled before the window was full");
    let refused_since = Instant::now();
    // Long enough for every hot job to be decided several times over (window 10 s + 3 s).
    let not_ready = wait_until(Duration::from_secs(20), || {
        replica
            .get("/readyz")
            .is_some_and(|(status, body)| status == 503 && body.contains("state store"))
    });
    assert!(not_ready.is_some(), "{:?}", replica.get("/readyz"));
    while refused_since.elapsed() < Duration::from_secs(18) {
        std::thread::sleep(Duration::from_millis(200));
    }
    let text = replica.metrics();
    assert_eq!(
        puts(&fake),
        BTreeMap::new(),
        "a rescale went out without a durable record"
    );
    assert!(
        metric(&text, "flink_autoscaler_state_flush_errors_total").is_some_and(|n| n > 0.0),
        "{text}"
    );
    assert!(
        scalings_per_job(&text).values().all(|n| *n == 0),
        "a decision counted without a flush: {text}"
    );

    // A crash in that window, and a restart under the same id: it takes its leases back at once
    // and, with nothing durable to act on, sends nothing either.
    replica.kill();
    let replica = Replica::start("replica-ro", &dir, &fake.url(), &db.url, &settings("0.5", &[]));
    let back = wait_until(Duration::from_secs(10), || {
        metric(&replica.metrics(), "flink_autoscaler_owned_jobs") == Some(keys.len() as f64)
    });
    assert!(back.is_some(), "{}", replica.log_text());
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(puts(&fake), BTreeMap::new(), "a rescale went out after the restart");

    // Writes accepted again: the hot jobs are rescaled, and the replica is ready again.
    rt.block_on(db.exec("DROP TRIGGER refuse_writes ON t_flink_autoscaler_state_store"));
    let rescaled = wait_until(Duration::from_secs(30), || puts(&fake).len() == keys.len());
    eprintln!(
        "state writes refused for 18 s: 0 PUTs; accepted again: every job rescaled after {:?}",
        rescaled
    );
    assert!(rescaled.is_some(), "{:?}\n{}", puts(&fake), replica.log_text());
    assert!(
        wait_until(Duration::from_secs(10), || replica
            .get("/readyz")
            .is_some_and(|r| r.0 == 200))
        .is_some()
    );
    drop(replica);
    rt.block_on(async {
        fake.stop().await;
        db.drop_now().await;
    });
    let _ = std::fs::remove_dir_all(&dir);
}

/// A TCP proxy to the database that the test can cut: existing connections are dropped and new
/// ones refused.
struct CuttableProxy {
    port: u16,
    cut: tokio::sync::watch::Sender<bool>,
}

impl CuttableProxy {
    async fn start(target: String) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let (cut, cut_rx) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if *cut_rx.borrow() {
                    continue;
                }
                let target = target.clone();
                let mut cut_rx = cut_rx.clone();
                tokio::spawn(async move {
                    let Ok(mut outbound) = tokio::net::TcpStream::connect(&target).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = cut_rx.wait_for(|cut| *cut) => {}
                    }
                });
            }
        });
        Self { port, cut }
    }

    fn cut(&self) {
        let _ = self.cut.send(true);
    }
}

/// A replica cut off from the database (its connections dropped, new ones refused) stops acting
/// on its jobs at its local deadlines, before its leases expire on the database; `/readyz` says
/// why; the other replica takes the jobs over once the leases expired.
#[test]
fn a_replica_cut_off_from_the_database_stops_before_its_leases_expire() {
    let Some(admin) = server(POSTGRES_ENV) else {
        return;
    };
    let rt = runtime();
    let db = rt.block_on(IsolatedDb::create(Kind::Postgres, &admin, "cut"));
    // The replica behind the proxy reaches the same schema through 127.0.0.1:<proxy>.
    let (head, tail) = db.url.split_at(db.url.find("://").expect("scheme") + 3);
    let (user, rest) = tail.split_at(tail.find('@').map_or(0, |i| i + 1));
    let host_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (server_addr, path) = rest.split_at(host_end);
    let proxy = rt.block_on(CuttableProxy::start(server_addr.to_owned()));
    let proxied_url = format!("{head}{user}127.0.0.1:{}{path}", proxy.port);
    let fake = rt.block_on(start_fake(8, 0));
    let keys: Vec<String> = fake.fake().job_ids().iter().map(|id| format!("fake/{id}")).collect();
    let dir = temp_dir("cut");
    let a = Replica::start("replica-a", &dir, &fake.url(), &proxied_url, &settings("0.5", &[]));
    let b = Replica::start("replica-b", &dir, &fake.url(), &db.url, &settings("0.8", &[]));
    let observer = rt.block_on(Observer::open(&db.url));
    let owners = || rt.block_on(observer.owners(&keys));
    let spread = wait_until(Duration::from_secs(30), || {
        let owners = owners();
        let distinct: std::collections::HashSet<_> = owners.values().flatten().collect();
        owners.values().all(Option::is_some) && distinct.len() == 2
    });
    assert!(spread.is_some(), "{}\n{}", a.log_text(), b.log_text());
    let a_jobs: Vec<String> = owners()
        .iter()
        .filter(|(_, o)| o.as_deref() == Some("replica-a"))
        .map(|(k, _)| k.clone())
        .collect();

    proxy.cut();
    let cut_at = Instant::now();
    let stopped = wait_until(Duration::from_secs(10), || {
        metric(&a.metrics(), "flink_autoscaler_owned_jobs") == Some(0.0)
    })
    .map(|_| cut_at.elapsed())
    .expect("the cut-off replica kept its jobs");
    let taken = wait_until(Duration::from_secs(15), || {
        let owners = owners();
        a_jobs
            .iter()
            .all(|k| owners.get(k).cloned().flatten().as_deref() == Some("replica-b"))
    })
    .map(|_| cut_at.elapsed())
    .expect("replica-a's jobs were not taken over");
    let (status, body) = a.get("/readyz").expect("/readyz");
    eprintln!(
        "cut off: replica-a stopped acting on its {} jobs {:.2} s after the cut, replica-b owned them {:.2} s after it; /readyz {status} {body}",
        a_jobs.len(),
        stopped.as_secs_f64(),
        taken.as_secs_f64()
    );
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("job leases"), "{body}");
    // The local deadline (lease - margin = 2 s after the last renewal's start) comes before the
    // lease can expire on the database (3 s after that renewal).
    assert!(stopped < LEASE, "stopped after {stopped:?}");
    assert!(stopped < taken, "stopped {stopped:?}, taken over {taken:?}");
    drop((a, b));
    rt.block_on(async {
        fake.stop().await;
        db.drop_now().await;
    });
    let _ = std::fs::remove_dir_all(&dir);
}
