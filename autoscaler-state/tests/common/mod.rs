//! Shared by the integration tests: one isolated database per test for every backend, a job
//! context, state samples that carry a version number, and a TCP proxy that can play "database down".

#![allow(dead_code, missing_docs, clippy::unwrap_used)]

use autoscaler_core::{BasicJobContext, config::Configuration};
use autoscaler_core::{
    ConfigChanges, DelayedScaleDown, ParallelismOverrides, RecommendedParallelism, ScalingHistory, ScalingRecord,
    ScalingSummary, ScalingTracking, VertexDelayedScaleDownInfo,
};
use autoscaler_metrics::{
    CollectedMetrics, EvaluatedMetrics, EvaluatedScalingMetric, EvaluatedVertexMetrics, MetricHistory, MetricValues,
    ScalingMetric, VertexId,
};
use chrono::{DateTime, TimeZone, Utc};
use serde::Serialize;
use sqlx::Connection as _;
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};

pub const POSTGRES_ENV: &str = "AUTOSCALER_TEST_POSTGRES_URL";
pub const MYSQL_ENV: &str = "AUTOSCALER_TEST_MYSQL_URL";

pub type Ctx = BasicJobContext<String, ()>;

pub fn ctx(job_key: &str) -> Ctx {
    BasicJobContext::new(job_key.to_owned(), Configuration::new(), ())
}

/// Compares through JSON: `MetricMap`'s derived `PartialEq` sees NaN fillers as unequal.
pub fn json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Memory,
    Sqlite,
    Postgres,
    MySql,
}

/// One isolated database: a SQLite file in a temp dir, a PostgreSQL schema or a MySQL database,
/// named uniquely so that concurrent runs never share tables.
pub struct TestDb {
    pub kind: Kind,
    pub url: String,
    /// Host:port of the server, for the fault proxy.
    pub server: Option<String>,
    /// The URL with host:port replaced by `{addr}`, to point it elsewhere.
    url_template: Option<String>,
    admin_url: Option<String>,
    name: String,
    _dir: Option<tempfile::TempDir>,
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

pub fn unique_name() -> String {
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    let nanos = Utc::now().timestamp_subsec_nanos();
    format!("as_{}_{}_{:x}", std::process::id(), n, nanos)
}

/// Splits `scheme://user@host:port/db?query` into (prefix up to `@`, host:port, `/db?query`).
fn split_url(url: &str) -> (String, String, String) {
    let (scheme, rest) = url.split_once("://").unwrap();
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let (user, host) = match authority.rfind('@') {
        Some(i) => (&authority[..=i], &authority[i + 1..]),
        None => ("", authority),
    };
    (format!("{scheme}://{user}"), host.to_owned(), path.to_owned())
}

/// `None`, with the reason printed: on a laptop a missing server skips its tests. In CI
/// (`CI=true`) every server must be there, so a missing one fails the test instead.
pub fn skip<T>(reason: &str) -> Option<T> {
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("CI=true but {reason}");
    }
    eprintln!("skipping: {reason}");
    None
}

impl TestDb {
    /// `None` (with the reason printed) when the backend's server is not configured.
    pub async fn new(kind: Kind) -> Option<TestDb> {
        let name = unique_name();
        match kind {
            Kind::Memory => Some(TestDb {
                kind,
                url: "memory".into(),
                server: None,
                url_template: None,
                admin_url: None,
                name,
                _dir: None,
            }),
            Kind::Sqlite => {
                let dir = tempfile::tempdir().unwrap();
                let url = format!("sqlite:{}", dir.path().join("state.db").display());
                Some(TestDb {
                    kind,
                    url,
                    server: None,
                    url_template: None,
                    admin_url: None,
                    name,
                    _dir: Some(dir),
                })
            }
            Kind::Postgres => {
                let Ok(admin) = std::env::var(POSTGRES_ENV) else {
                    return skip(&format!(
                        "{POSTGRES_ENV} is not set (e.g. postgres://postgres@127.0.0.1:5432/test)"
                    ));
                };
                let mut conn = sqlx::PgConnection::connect(&admin).await.unwrap();
                sqlx::raw_sql(&format!("CREATE SCHEMA {name}"))
                    .execute(&mut conn)
                    .await
                    .unwrap();
                conn.close().await.unwrap();
                let (prefix, host, path) = split_url(&admin);
                let sep = if path.contains('?') { '&' } else { '?' };
                let path = format!("{path}{sep}options[search_path]={name}");
                Some(TestDb {
                    kind,
                    url: format!("{prefix}{host}{path}"),
                    server: Some(host),
                    url_template: Some(format!("{prefix}{{addr}}{path}")),
                    admin_url: Some(admin),
                    name,
                    _dir: None,
                })
            }
            Kind::MySql => {
                let Ok(admin) = std::env::var(MYSQL_ENV) else {
                    return skip(&format!(
                        "{MYSQL_ENV} is not set (e.g. mysql://root@127.0.0.1:3306/test)"
                    ));
                };
                let mut conn = sqlx::MySqlConnection::connect(&admin).await.unwrap();
                sqlx::raw_sql(&format!("CREATE DATABASE {name} CHARACTER SET utf8mb4"))
                    .execute(&mut conn)
                    .await
                    .unwrap();
                conn.close().await.unwrap();
                let (prefix, host, path) = split_url(&admin);
                let query = path.find('?').map(|i| path[i..].to_owned()).unwrap_or_default();
                let path = format!("/{name}{query}");
                Some(TestDb {
                    kind,
                    url: format!("{prefix}{host}{path}"),
                    server: Some(host),
                    url_template: Some(format!("{prefix}{{addr}}{path}")),
                    admin_url: Some(admin),
                    name,
                    _dir: None,
                })
            }
        }
    }

    pub fn persistent(&self) -> bool {
        self.kind != Kind::Memory
    }

    /// The URL pointed at `addr` instead of the server (for the fault proxy).
    pub fn url_via(&self, addr: &str) -> Option<String> {
        self.url_template.as_ref().map(|t| t.replace("{addr}", addr))
    }

    /// Drops the schema / database (the SQLite temp dir goes with `self`).
    pub async fn cleanup(self) {
        match (self.kind, &self.admin_url) {
            (Kind::Postgres, Some(admin)) => {
                if let Ok(mut conn) = sqlx::PgConnection::connect(admin).await {
                    let _ = sqlx::raw_sql(&format!("DROP SCHEMA {} CASCADE", self.name))
                        .execute(&mut conn)
                        .await;
                }
            }
            (Kind::MySql, Some(admin)) => {
                if let Ok(mut conn) = sqlx::MySqlConnection::connect(admin).await {
                    let _ = sqlx::raw_sql(&format!("DROP DATABASE {}", self.name))
                        .execute(&mut conn)
                        .await;
                }
            }
            _ => {}
        }
    }

    /// Runs a raw statement with `?` placeholders bound to `args` (PostgreSQL gets `$n`).
    pub async fn exec(&self, sql: &str, args: &[&str]) {
        match self.kind {
            Kind::Memory => panic!("no database"),
            Kind::Sqlite => {
                let mut conn = sqlx::SqliteConnection::connect(&self.url).await.unwrap();
                let mut q = sqlx::query(sql);
                for a in args {
                    q = q.bind(*a);
                }
                q.execute(&mut conn).await.unwrap();
            }
            Kind::Postgres => {
                let mut conn = sqlx::PgConnection::connect(&self.url).await.unwrap();
                let mut n = 0;
                let sql: String = sql
                    .chars()
                    .map(|c| {
                        if c == '?' {
                            n += 1;
                            format!("${n}")
                        } else {
                            c.to_string()
                        }
                    })
                    .collect();
                let mut q = sqlx::query(&sql);
                for a in args {
                    q = q.bind(*a);
                }
                q.execute(&mut conn).await.unwrap();
            }
            Kind::MySql => {
                let mut conn = sqlx::MySqlConnection::connect(&self.url).await.unwrap();
                let mut q = sqlx::query(sql);
                for a in args {
                    q = q.bind(*a);
                }
                q.execute(&mut conn).await.unwrap();
            }
        }
    }

    /// Runs statements without parameters over the text protocol (DDL, triggers).
    pub async fn exec_raw(&self, sql: &str) {
        match self.kind {
            Kind::Memory => panic!("no database"),
            Kind::Sqlite => {
                let mut conn = sqlx::SqliteConnection::connect(&self.url).await.unwrap();
                sqlx::raw_sql(sql).execute(&mut conn).await.unwrap();
            }
            Kind::Postgres => {
                let mut conn = sqlx::PgConnection::connect(&self.url).await.unwrap();
                sqlx::raw_sql(sql).execute(&mut conn).await.unwrap();
            }
            Kind::MySql => {
                let mut conn = sqlx::MySqlConnection::connect(&self.url).await.unwrap();
                sqlx::raw_sql(sql).execute(&mut conn).await.unwrap();
            }
        }
    }

    /// Inserts a raw state row (the table must exist: open a store first).
    pub async fn insert_state_row(&self, job_key: &str, state_type: &str, value: &str) {
        let now = "2024-01-01 00:00:00";
        let sql = match self.kind {
            Kind::Postgres => {
                "INSERT INTO t_flink_autoscaler_state_store (create_time, update_time, job_key, state_type, state_value) \
                 VALUES (CAST(? AS TIMESTAMPTZ), CAST(? AS TIMESTAMPTZ), ?, ?, ?)"
            }
            _ => {
                "INSERT INTO t_flink_autoscaler_state_store (create_time, update_time, job_key, state_type, state_value) \
                 VALUES (?, ?, ?, ?, ?)"
            }
        };
        self.exec(sql, &[now, now, job_key, state_type, value]).await;
    }

    /// The state types `job_key` has rows of, in order, the metric window's snapshot and index
    /// rows counted as one `collectedMetrics`.
    pub async fn state_types(&self, job_key: &str) -> Vec<String> {
        let mut types: Vec<String> = self
            .state_rows(job_key)
            .await
            .into_iter()
            .map(|(state_type, _)| {
                if state_type.starts_with("collectedMetrics#")
                    || state_type.starts_with("collectedMetrics@")
                    || state_type == "collectedMetricsIndex"
                {
                    "collectedMetrics".to_owned()
                } else {
                    state_type
                }
            })
            .collect();
        types.sort();
        types.dedup();
        types
    }

    /// `(state_type, state_value)` rows of `job_key`, read straight from the table.
    pub async fn state_rows(&self, job_key: &str) -> Vec<(String, String)> {
        let sql =
            "SELECT state_type, state_value FROM t_flink_autoscaler_state_store WHERE job_key = ? ORDER BY state_type";
        let mut rows: Vec<(String, String)> = match self.kind {
            Kind::Memory => panic!("no database"),
            Kind::Sqlite => {
                let mut conn = sqlx::SqliteConnection::connect(&self.url).await.unwrap();
                sqlx::query_as(sql).bind(job_key).fetch_all(&mut conn).await.unwrap()
            }
            Kind::Postgres => {
                let mut conn = sqlx::PgConnection::connect(&self.url).await.unwrap();
                sqlx::query_as(&sql.replace('?', "$1"))
                    .bind(job_key)
                    .fetch_all(&mut conn)
                    .await
                    .unwrap()
            }
            Kind::MySql => {
                let mut conn = sqlx::MySqlConnection::connect(&self.url).await.unwrap();
                sqlx::query_as(sql).bind(job_key).fetch_all(&mut conn).await.unwrap()
            }
        };
        rows.sort();
        rows
    }
}

/// Generates one `#[tokio::test]` per backend for `$check(&TestDb)`, each bounded in time.
#[macro_export]
macro_rules! per_backend {
    ($check:ident) => {
        mod $check {
            use super::*;
            async fn run(kind: common::Kind) {
                let Some(db) = common::TestDb::new(kind).await else {
                    return;
                };
                tokio::time::timeout(std::time::Duration::from_secs(120), super::$check(&db))
                    .await
                    .expect("test timed out");
                db.cleanup().await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn memory() {
                run(common::Kind::Memory).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                run(common::Kind::Sqlite).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                run(common::Kind::Postgres).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn mysql() {
                run(common::Kind::MySql).await
            }
        }
    };
}

pub fn t(secs: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_700_000_000 + secs, 0).unwrap()
}

/// Every state of one job, each carrying `version` so a reader can tell versions apart.
#[derive(Debug, Clone)]
pub struct Sample {
    pub history: ScalingHistory,
    pub tracking: ScalingTracking,
    pub metrics: MetricHistory,
    pub evaluated: std::sync::Arc<EvaluatedMetrics>,
    pub overrides: ParallelismOverrides,
    pub changes: ConfigChanges,
    pub delayed: DelayedScaleDown,
}

pub fn evaluated_vertex(version: u32) -> EvaluatedVertexMetrics {
    let mut m = EvaluatedVertexMetrics::default();
    m.insert(
        ScalingMetric::TrueProcessingRate,
        EvaluatedScalingMetric::new(f64::from(version), f64::NAN),
    );
    m.insert(ScalingMetric::Lag, EvaluatedScalingMetric::of(f64::INFINITY));
    m
}

/// A metric history of `snapshots` samples with a NaN and an infinity in each.
pub fn metric_history(version: u32, snapshots: usize) -> MetricHistory {
    (0..snapshots)
        .map(|i| {
            let mut vertex = MetricValues::default();
            vertex.insert(ScalingMetric::Load, f64::from(version));
            vertex.insert(ScalingMetric::Lag, f64::NAN);
            vertex.insert(ScalingMetric::NumRecordsIn, i as f64 * 1000.5);
            let mut global = MetricValues::default();
            global.insert(ScalingMetric::GcPressure, f64::NEG_INFINITY);
            let mut snapshot = CollectedMetrics::default();
            for v in ["a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5", "bc764cd8ddf7a0cff126f51c16239658"] {
                snapshot.vertex_metrics.insert(VertexId::new(v), vertex);
            }
            snapshot.global_metrics = global;
            (t(i as i64 * 10), snapshot)
        })
        .collect()
}

pub fn sample(version: u32) -> Sample {
    let v1 = VertexId::new("bc764cd8ddf7a0cff126f51c16239658");
    let mut history = ScalingHistory::new();
    history.entry(v1.clone()).or_default().insert(
        t(i64::from(version)),
        ScalingSummary {
            current_parallelism: version,
            new_parallelism: version + 1,
            metrics: evaluated_vertex(version),
        },
    );
    let mut tracking = ScalingTracking::default();
    tracking.scaling_records.insert(
        t(i64::from(version)),
        ScalingRecord {
            restart_duration: Some(Duration::from_millis(u64::from(version) * 1500)),
        },
    );
    tracking
        .scaling_records
        .insert(t(-1), ScalingRecord { restart_duration: None });
    let mut evaluated = EvaluatedMetrics::default();
    evaluated.vertices.insert(v1.clone(), evaluated_vertex(version));
    evaluated
        .global
        .insert(ScalingMetric::HeapMemoryUsed, EvaluatedScalingMetric::avg(0.5));
    let mut overrides = ParallelismOverrides::new();
    overrides.insert(v1.clone(), version);
    let mut changes = ConfigChanges::default();
    changes
        .overrides
        .insert("taskmanager.memory.process.size".into(), format!("{version}g"));
    changes.removals.insert("taskmanager.memory.managed.fraction".into());
    let mut delayed = DelayedScaleDown::default();
    delayed.delayed_vertices.insert(
        v1,
        VertexDelayedScaleDownInfo {
            first_trigger_time: t(0),
            recommended_parallelisms: VecDeque::from([RecommendedParallelism {
                trigger_time: t(i64::from(version)),
                parallelism: version,
                outside_utilization_bound: version.is_multiple_of(2),
            }]),
        },
    );
    Sample {
        history,
        tracking,
        metrics: metric_history(version, 3),
        evaluated: std::sync::Arc::new(evaluated),
        overrides,
        changes,
        delayed,
    }
}

/// A TCP proxy to a database server that can be switched off: when down it cuts open connections
/// and closes new ones at once, so clients fail fast instead of hanging.
pub struct FaultProxy {
    pub addr: String,
    down: Arc<AtomicBool>,
    generation: Arc<AtomicU32>,
}

impl FaultProxy {
    pub async fn start(target: String) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let down = Arc::new(AtomicBool::new(false));
        let generation = Arc::new(AtomicU32::new(0));
        let (down2, generation2) = (down.clone(), generation.clone());
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                if down2.load(Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let target = target.clone();
                let generation = generation2.clone();
                let born = generation.load(Ordering::SeqCst);
                tokio::spawn(async move {
                    let Ok(mut server) = TcpStream::connect(&target).await else {
                        return;
                    };
                    let copy = tokio::io::copy_bidirectional(&mut client, &mut server);
                    let cut = async {
                        while generation.load(Ordering::SeqCst) == born {
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                    };
                    tokio::select! {
                        _ = copy => {}
                        _ = cut => {}
                    }
                });
            }
        });
        FaultProxy { addr, down, generation }
    }

    /// Going down returns once the open connections have been cut.
    pub async fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
        if down {
            self.generation.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Asserts that `store` holds every state of `s` for job `c`.
pub async fn assert_all(store: &autoscaler_state::AnyStateStore, c: &Ctx, s: &Sample) {
    use autoscaler_core::AutoScalerStateStore as _;
    let key = &c.job_key;
    assert_eq!(
        json(&store.get_scaling_history(c).await.unwrap()),
        json(&s.history),
        "{key}"
    );
    assert_eq!(store.get_scaling_tracking(c).await.unwrap(), s.tracking, "{key}");
    assert_eq!(
        json(&store.get_collected_metrics(c).await.unwrap()),
        json(&s.metrics),
        "{key}"
    );
    // Evaluated metrics are kept in memory only: a database store opened anew has none.
    let evaluated = store.get_evaluated_metrics(c).await.unwrap();
    if evaluated.is_some() || store.is_in_memory() {
        assert_eq!(json(&evaluated), json(&Some(&*s.evaluated)), "{key}");
    }
    assert_eq!(store.get_parallelism_overrides(c).await.unwrap(), s.overrides, "{key}");
    assert_eq!(store.get_config_changes(c).await.unwrap(), s.changes, "{key}");
    assert_eq!(store.get_delayed_scale_down(c).await.unwrap(), s.delayed, "{key}");
}
