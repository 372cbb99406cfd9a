//! The job status endpoints of `flink-autoscaler run`: the latest [`DecisionRecord`] of every job.
//!
//! - `GET /jobs`: `{"jobs": [{"job", "at", "age_seconds", "stale", "outcome", "reason", "summary"},
//!   ...]}`, sorted by job;
//! - `GET /jobs/{key}`: `{"job": key, "age_seconds", "stale", "record": DecisionRecord}`, or 404
//!   with `{"error": "unknown job"}`. Keys may contain `/` (`/jobs/prod/abc` is the job
//!   `prod/abc`).
//!
//! When replicas share the state database, every answer also says who owns the job: `"owned"`
//! (whether this replica holds the job's lease now) and `"owner"` (this replica's id when owned;
//! otherwise, in `/jobs/{key}`, the holder the database's lease row names, `null` when the lease
//! is free or expired, with its `"epoch"`). A job this replica does not own keeps the record of
//! its last cycle here, if it had one; `/jobs/{key}` also answers for a job it never decided on
//! when the database has a lease row for it (`"record": null`).
//!
//! `age_seconds` is how long ago the record's cycle ran; `stale` is true once that is longer than
//! the board's staleness bound (the service's `autoscaler.service.readiness.max-staleness`): the
//! job has not been decided on since (its source cannot be listed, its cycles fail).
//!
//! [`DecisionBoard`] keeps the records; [`router`] serves them and merges into the service's own
//! router (or serves alone on `--status-addr`).

use autoscaler_core::Ownership;
use autoscaler_core::record::DecisionRecord;
use autoscaler_state::DbJobOwnership;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// The latest decision record per job, shared between the cycles that write and the endpoints
/// that read.
#[derive(Debug)]
pub struct DecisionBoard {
    records: RwLock<BTreeMap<String, DecisionRecord>>,
    max_staleness: Duration,
    owners: std::sync::OnceLock<Owners>,
}

/// How long `/jobs/{key}` waits for the database's lease row of a job this replica does not own.
const LEASE_LOOKUP_TIMEOUT: Duration = Duration::from_secs(2);

/// Who owns the jobs, when replicas share the state database.
#[derive(Debug)]
pub struct Owners {
    replica: String,
    current: tokio::sync::watch::Receiver<Arc<Ownership<String>>>,
    leases: Arc<DbJobOwnership>,
}

impl Owners {
    /// `replica`'s view: the loop's latest answer (`current`) and the lease rows of `leases`.
    pub fn new(
        replica: String,
        current: tokio::sync::watch::Receiver<Arc<Ownership<String>>>,
        leases: Arc<DbJobOwnership>,
    ) -> Self {
        Self {
            replica,
            current,
            leases,
        }
    }

    /// Whether this replica holds a valid lease of `job` now.
    fn owns(&self, job: &str) -> bool {
        self.current
            .borrow()
            .valid_lease(&job.to_owned(), tokio::time::Instant::now())
            .is_some()
    }

    /// The `owned`, `owner` (and `epoch`, from the database, for a job not owned) fields of `job`;
    /// whether the database knows the job.
    async fn describe(&self, job: &str) -> (serde_json::Map<String, Value>, bool) {
        let mut fields = serde_json::Map::new();
        if self.owns(job) {
            fields.insert("owned".into(), json!(true));
            fields.insert("owner".into(), json!(self.replica));
            return (fields, true);
        }
        fields.insert("owned".into(), json!(false));
        // Bounded: the status must answer even while the database does not.
        let lookup = tokio::time::timeout(LEASE_LOOKUP_TIMEOUT, self.leases.lease(job)).await;
        match lookup.unwrap_or_else(|_| {
            Err(autoscaler_core::StateError::Backend {
                operation: "lease",
                message: format!("no answer within {LEASE_LOOKUP_TIMEOUT:?}"),
                source: None,
            })
        }) {
            Ok(Some(lease)) => {
                let owner = lease.owner.filter(|_| lease.remaining_ms > 0);
                fields.insert("owner".into(), json!(owner));
                fields.insert("epoch".into(), json!(lease.epoch));
                (fields, true)
            }
            Ok(None) => {
                fields.insert("owner".into(), Value::Null);
                (fields, false)
            }
            Err(error) => {
                fields.insert("owner".into(), Value::Null);
                fields.insert("owner_error".into(), json!(error.to_string()));
                (fields, false)
            }
        }
    }
}

impl Default for DecisionBoard {
    fn default() -> Self {
        Self::with_max_staleness(Duration::from_secs(30))
    }
}

impl DecisionBoard {
    /// An empty board whose records are stale 30 s after their cycle.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty board whose records are stale `max_staleness` after their cycle.
    pub fn with_max_staleness(max_staleness: Duration) -> Self {
        Self {
            records: RwLock::new(BTreeMap::new()),
            max_staleness,
            owners: std::sync::OnceLock::new(),
        }
    }

    /// How old `record` is now (seconds, millisecond precision), and whether that is stale.
    fn age(&self, record: &DecisionRecord, now: DateTime<Utc>) -> (f64, bool) {
        let age = (now - record.at).num_milliseconds().max(0) as f64 / 1000.0;
        (age, age > self.max_staleness.as_secs_f64())
    }

    /// Adds who owns each job to the answers (replicas sharing a database). Set once.
    pub fn set_owners(&self, owners: Owners) {
        let _ = self.owners.set(owners);
    }

    /// Stores `record` as the latest of `job`.
    pub fn publish(&self, job: &str, record: DecisionRecord) {
        if let Ok(mut records) = self.records.write() {
            records.insert(job.to_owned(), record);
        }
    }

    /// Forgets `job` (it disappeared from the cluster).
    pub fn remove(&self, job: &str) {
        if let Ok(mut records) = self.records.write() {
            records.remove(job);
        }
    }

    /// The latest record of `job`.
    pub fn get(&self, job: &str) -> Option<DecisionRecord> {
        self.records.read().ok()?.get(job).cloned()
    }

    /// The `/jobs` document.
    pub fn list(&self) -> Value {
        let now = Utc::now();
        let jobs: Vec<Value> = self
            .records
            .read()
            .map(|records| {
                records
                    .iter()
                    .map(|(job, r)| {
                        let (age, stale) = self.age(r, now);
                        let mut entry = json!({"job": job, "at": r.at, "age_seconds": age, "stale": stale, "outcome": r.outcome, "reason": r.reason, "summary": r.summary});
                        if let (Some(owners), Some(fields)) = (self.owners.get(), entry.as_object_mut()) {
                            let owned = owners.owns(job);
                            fields.insert("owned".into(), json!(owned));
                            fields.insert("owner".into(), if owned { json!(owners.replica) } else { Value::Null });
                        }
                        entry
                    })
                    .collect()
            })
            .unwrap_or_default();
        json!({ "jobs": jobs })
    }
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

async fn list(State(board): State<Arc<DecisionBoard>>) -> Response {
    json_response(StatusCode::OK, &board.list())
}

async fn one(State(board): State<Arc<DecisionBoard>>, Path(key): Path<String>) -> Response {
    let (ownership, known) = match board.owners.get() {
        Some(owners) => {
            let (fields, known) = owners.describe(&key).await;
            (Some(fields), known)
        }
        None => (None, false),
    };
    let mut body = match board.get(&key) {
        Some(record) => {
            let (age, stale) = board.age(&record, Utc::now());
            json!({"job": key, "age_seconds": age, "stale": stale, "record": record})
        }
        // Another replica decides on it: the database knows its owner, this one has no record.
        None if known => json!({"job": key, "record": null}),
        None => return json_response(StatusCode::NOT_FOUND, &json!({"error": "unknown job", "job": key})),
    };
    if let (Some(fields), Some(object)) = (ownership, body.as_object_mut()) {
        object.extend(fields);
    }
    json_response(StatusCode::OK, &body)
}

/// The routes `/jobs` and `/jobs/{key}` over `board`.
pub fn router(board: Arc<DecisionBoard>) -> Router {
    Router::new()
        .route("/jobs", get(list))
        .route("/jobs/{*key}", get(one))
        .with_state(board)
}

/// Serves [`router`] alone on `listener` until `shutdown` completes (`--status-addr`).
///
/// # Errors
/// When serving fails.
pub async fn serve(
    listener: tokio::net::TcpListener,
    board: Arc<DecisionBoard>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(board))
        .with_graceful_shutdown(shutdown)
        .await
}

/// Fetches `url` (`http://127.0.0.1:PORT/jobs/KEY`) with a plain HTTP/1.1 GET, for `explain`.
/// Loopback only: any other host is refused. The answer is bounded to 16 MiB.
///
/// # Errors
/// A message naming what failed.
pub async fn fetch_loopback(url: &str, timeout: std::time::Duration) -> Result<String, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("{url}: only http:// URLs are supported"))?;
    let (authority, path) = rest
        .split_once('/')
        .map_or((rest, "/".to_owned()), |(a, p)| (a, format!("/{p}")));
    let addr: std::net::SocketAddr = match authority.parse() {
        Ok(a) => a,
        Err(_) => {
            let (host, port) = authority
                .rsplit_once(':')
                .ok_or_else(|| format!("{url}: expected host:port"))?;
            if host != "localhost" {
                return Err(format!("{url}: only loopback addresses are allowed"));
            }
            let port: u16 = port.parse().map_err(|_| format!("{url}: bad port"))?;
            std::net::SocketAddr::from(([127, 0, 0, 1], port))
        }
    };
    if !addr.ip().is_loopback() {
        return Err(format!("{url}: only loopback addresses are allowed"));
    }
    let fetch = async {
        let mut stream = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| format!("{url}: {e}"))?;
        let request = format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
        stream
            .write_all(request.as_bytes())
            .await
            .map_err(|e| format!("{url}: {e}"))?;
        let mut body = Vec::new();
        stream
            .take(16 << 20)
            .read_to_end(&mut body)
            .await
            .map_err(|e| format!("{url}: {e}"))?;
        Ok::<_, String>(body)
    };
    let raw = tokio::time::timeout(timeout, fetch)
        .await
        .map_err(|_| format!("{url}: no answer within {timeout:?}"))??;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("{url}: not an HTTP answer"))?;
    let status = head.split(' ').nth(1).unwrap_or_default();
    if status != "200" {
        return Err(format!("{url}: HTTP {status}: {}", body.trim()));
    }
    Ok(body.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoscaler_core::config::AutoScalerOptions;
    use autoscaler_core::record::JobOutcome;
    use std::time::Duration;

    fn record(job: &str) -> DecisionRecord {
        DecisionRecord::undecided(
            chrono::DateTime::UNIX_EPOCH,
            Some(job),
            None,
            None,
            &AutoScalerOptions::default(),
            Duration::from_secs(300),
            JobOutcome::NotReady,
            "insufficient_samples",
        )
    }

    #[test]
    fn records_carry_their_age_and_go_stale_after_the_bound() {
        let board = DecisionBoard::with_max_staleness(Duration::from_secs(30));
        let mut fresh = record("fresh");
        fresh.at = Utc::now() - chrono::Duration::seconds(10);
        board.publish("fresh", fresh);
        board.publish("old", record("old"));
        let list = board.list();
        let jobs = list["jobs"].as_array().cloned().unwrap_or_default();
        assert_eq!(jobs[0]["job"], "fresh");
        assert_eq!(jobs[0]["stale"], false);
        let age = jobs[0]["age_seconds"].as_f64().unwrap_or_default();
        assert!((10.0..20.0).contains(&age), "{age}");
        assert_eq!(jobs[1]["job"], "old");
        assert_eq!(jobs[1]["stale"], true, "a record of 1970 is stale");
    }

    async fn body_of(response: Response) -> (StatusCode, Value) {
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap_or_default();
        (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
    }

    /// With replicas sharing a database: an owned job names this replica; a job another replica
    /// leased is served from the lease row, even without a record here; an unknown job is 404.
    #[tokio::test]
    async fn answers_say_who_owns_the_job() {
        let dir = std::env::temp_dir().join(format!("fa-status-owners-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_default();
        let url = format!("sqlite:{}", dir.join("state.db").display());
        let options = |id: &str| autoscaler_core::HaOptions {
            replica_id: id.to_owned(),
            ..autoscaler_core::HaOptions::default()
        };
        let store = autoscaler_state::AnyStateStore::open(&url).await.expect("store");
        let mine = Arc::new(DbJobOwnership::attach(&store, options("me")).await.expect("attach"));
        let other_store = autoscaler_state::AnyStateStore::open(&url).await.expect("store");
        let other = DbJobOwnership::attach(&other_store, options("other"))
            .await
            .expect("attach");
        assert!(other.try_take("theirs").await.expect("take").is_some());

        let mut ownership = Ownership::default();
        let lease = autoscaler_core::JobLease {
            epoch: 1,
            valid_until: tokio::time::Instant::now() + Duration::from_secs(60),
        };
        ownership.leases.insert("mine".to_owned(), lease);
        let (_sender, current) = tokio::sync::watch::channel(Arc::new(ownership));
        let board = Arc::new(DecisionBoard::new());
        board.set_owners(Owners::new("me".into(), current, mine));
        board.publish("mine", record("mine"));

        let (status, v) = body_of(one(State(board.clone()), Path("mine".into())).await).await;
        assert_eq!(
            (status, &v["owned"], &v["owner"]),
            (StatusCode::OK, &json!(true), &json!("me")),
            "{v}"
        );
        let (status, v) = body_of(one(State(board.clone()), Path("theirs".into())).await).await;
        assert_eq!(status, StatusCode::OK, "{v}");
        assert_eq!(
            (&v["owned"], &v["owner"], &v["epoch"], &v["record"]),
            (&json!(false), &json!("other"), &json!(1), &Value::Null),
            "{v}"
        );
        let (status, _) = body_of(one(State(board.clone()), Path("nobody".into())).await).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        let list = board.list();
        assert_eq!(list["jobs"][0]["owner"], json!("me"), "{list}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn serves_the_latest_record_per_job_over_loopback() {
        let board = Arc::new(DecisionBoard::new());
        board.publish("prod/abc", record("prod/abc"));
        board.publish("b", record("b"));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(listener, board.clone(), async {
            let _ = stopped.await;
        }));
        let timeout = Duration::from_secs(10);
        let list = fetch_loopback(&format!("http://{addr}/jobs"), timeout)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let list: Value = serde_json::from_str(&list).unwrap_or_default();
        assert_eq!(list["jobs"][0]["job"], "b");
        assert_eq!(list["jobs"][1]["job"], "prod/abc");
        assert_eq!(list["jobs"][1]["outcome"], "not_ready");
        let one = fetch_loopback(&format!("http://{addr}/jobs/prod/abc"), timeout)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let one: Value = serde_json::from_str(&one).unwrap_or_default();
        assert_eq!(one["job"], "prod/abc");
        assert_eq!(one["record"]["reason"], "insufficient_samples");
        assert_eq!(one["stale"], true, "{one}");
        assert!(one["age_seconds"].as_f64().is_some_and(|a| a > 1e9), "{one}");
        let missing = fetch_loopback(&format!("http://{addr}/jobs/nope"), timeout).await;
        assert!(missing.is_err_and(|e| e.contains("HTTP 404")));
        assert!(
            fetch_loopback("http://10.0.0.1:80/jobs", timeout)
                .await
                .is_err_and(|e| e.contains("loopback"))
        );
        let _ = stop.send(());
        let _ = tokio::time::timeout(timeout, server).await;
    }
}
