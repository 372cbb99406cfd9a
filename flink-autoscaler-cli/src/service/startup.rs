//! Opening the service's databases at start: a database that is not up yet is retried with
//! backoff for `autoscaler.service.startup-timeout` (default 60 s) before `run` exits 1, and every
//! failed attempt says why in words an operator acts on ("connection refused", "unknown host"),
//! which a connection pool's "timed out" hides. The absolute path of a SQLite file is logged, so
//! that a relative default never leaves the state somewhere nobody looks.

use anyhow::{Result, bail};
use autoscaler_core::secret::redact_url;
use std::fmt::Display;
use std::future::Future;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// First pause between two attempts; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// Longest pause between two attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(8);
/// How long one attempt may wait for a connection, at most.
const MAX_ATTEMPT: Duration = Duration::from_secs(10);
/// How long one attempt may wait for a connection, at least.
const MIN_ATTEMPT: Duration = Duration::from_millis(250);
/// How long the diagnosis of a failed attempt may wait for a TCP connection.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// The absolute path of the SQLite file of `url` (`sqlite:PATH`, `sqlite://PATH`), `None` for any
/// other store or an in-memory SQLite database.
///
/// ```
/// use flink_autoscaler_cli::service::startup::sqlite_path;
/// assert_eq!(sqlite_path("sqlite:/var/lib/fa.db?mode=rwc"), Some("/var/lib/fa.db".into()));
/// assert!(sqlite_path("sqlite:state.db").is_some_and(|p| p.is_absolute()));
/// assert_eq!(sqlite_path("sqlite::memory:"), None);
/// assert_eq!(sqlite_path("postgres://db/x"), None);
/// ```
pub fn sqlite_path(url: &str) -> Option<PathBuf> {
    let rest = url.strip_prefix("sqlite://").or_else(|| url.strip_prefix("sqlite:"))?;
    let path = rest.split('?').next().unwrap_or(rest);
    if path.is_empty() || path.contains(":memory:") {
        return None;
    }
    std::path::absolute(path).ok()
}

/// Whether `url` names a database reached over the network (worth retrying).
fn is_network(url: &str) -> bool {
    ["postgres://", "postgresql://", "mysql://", "mariadb://"]
        .iter()
        .any(|scheme| url.starts_with(scheme))
}

/// The `host` and `port` of a network database URL (default ports 5432 and 3306).
fn host_port(url: &str) -> Option<(String, u16)> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?']).next()?;
    let host_port = authority.rsplit('@').next()?;
    let default_port = if scheme.starts_with("postgres") { 5432 } else { 3306 };
    if let Some(bracketed) = host_port.strip_prefix('[') {
        let (host, after) = bracketed.split_once(']')?;
        let port = after
            .strip_prefix(':')
            .and_then(|p| p.parse().ok())
            .unwrap_or(default_port);
        return Some((host.to_owned(), port));
    }
    match host_port.rsplit_once(':') {
        Some((host, port)) => Some((host.to_owned(), port.parse().ok()?)),
        None => Some((host_port.to_owned(), default_port)),
    }
    .filter(|(host, _)| !host.is_empty())
}

/// Why a network database cannot be reached, found by resolving its host and opening a TCP
/// connection to it; `None` when it accepts connections (then the driver's own error is the
/// reason: a refused login, a missing database).
pub async fn diagnose(url: &str) -> Option<String> {
    let (host, port) = host_port(url)?;
    let addresses: Vec<std::net::SocketAddr> = match tokio::net::lookup_host((host.as_str(), port)).await {
        Ok(addresses) => addresses.collect(),
        Err(e) => return Some(format!("unknown host {host:?}: {e}")),
    };
    let Some(address) = addresses.first() else {
        return Some(format!("unknown host {host:?}: no address"));
    };
    match tokio::time::timeout(PROBE_TIMEOUT, tokio::net::TcpStream::connect(address)).await {
        Ok(Ok(_)) => None,
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            Some(format!("connection refused by {host}:{port}"))
        }
        Ok(Err(e)) => Some(format!("cannot connect to {host}:{port}: {e}")),
        Err(_) => Some(format!("no answer from {host}:{port} within {PROBE_TIMEOUT:?}")),
    }
}

/// Opens `what` at `url` with `open(attempt_timeout)`, retrying a network database with
/// exponential backoff until `timeout` has passed; each failure is logged with its reason. A
/// SQLite or in-memory store is tried once (its errors are not transient).
///
/// # Errors
/// The last failure with its reason, once `timeout` has passed.
pub async fn open_with_retry<T, E, F, Fut>(what: &str, url: &str, timeout: Duration, mut open: F) -> Result<T>
where
    E: Display,
    F: FnMut(Duration) -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let shown = redact_url(url);
    let started = Instant::now();
    let mut backoff = FIRST_BACKOFF;
    for attempt in 1u32.. {
        // Several attempts fit in the timeout, each long enough for a slow handshake.
        let left = timeout.saturating_sub(started.elapsed());
        let attempt_timeout = (timeout / 6).clamp(MIN_ATTEMPT, MAX_ATTEMPT).min(left).max(MIN_ATTEMPT);
        let error = match open(attempt_timeout).await {
            Ok(opened) => {
                if attempt > 1 {
                    tracing::info!(attempt, "{what} {shown}: connected");
                }
                return Ok(opened);
            }
            Err(e) => e.to_string(),
        };
        let why = if is_network(url) { diagnose(url).await } else { None };
        let message = match &why {
            Some(why) => format!("{error} ({why})"),
            None => error,
        };
        // The stores' own errors already name the (redacted) URL.
        let what = if message.contains(&shown) {
            what.to_owned()
        } else {
            format!("{what} {shown}")
        };
        let left = timeout.saturating_sub(started.elapsed());
        if !is_network(url) || left.is_zero() {
            bail!(
                "{what}: {message}{}",
                if attempt > 1 {
                    format!(" (gave up after {attempt} attempts in {:?})", started.elapsed())
                } else {
                    String::new()
                }
            );
        }
        let pause = backoff.min(left);
        tracing::warn!(attempt, retry_in = ?pause, "{what}: {message}");
        tokio::time::sleep(pause).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
    bail!("{what} {shown}: no attempt made")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_and_port_of_database_urls() {
        assert_eq!(host_port("postgres://u:p@db:6543/x"), Some(("db".into(), 6543)));
        assert_eq!(host_port("postgres://db/x"), Some(("db".into(), 5432)));
        assert_eq!(
            host_port("mysql://root@127.0.0.1/test"),
            Some(("127.0.0.1".into(), 3306))
        );
        assert_eq!(host_port("mysql://[::1]:3307/test"), Some(("::1".into(), 3307)));
        assert_eq!(host_port("sqlite:x.db"), None);
    }

    #[tokio::test]
    async fn a_refused_connection_is_named_and_retried_until_the_timeout() {
        // A port nothing listens on: bind one, then free it.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap_or_else(|e| panic!("{e}"));
        let url = format!("postgres://u:secret@127.0.0.1:{port}/x");
        assert_eq!(
            diagnose(&url).await,
            Some(format!("connection refused by 127.0.0.1:{port}"))
        );
        let mut attempts = 0;
        let started = Instant::now();
        let result: Result<()> = open_with_retry("state store", &url, Duration::from_millis(1200), |_| {
            attempts += 1;
            async { Err::<(), _>("pool timed out") }
        })
        .await;
        let error = result.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(error.contains("connection refused"), "{error}");
        assert!(!error.contains("secret"), "{error}");
        assert!(attempts >= 2, "{attempts}");
        assert!(started.elapsed() < Duration::from_secs(10));
        let unknown = diagnose("postgres://db.invalid/x").await.unwrap_or_default();
        assert!(unknown.starts_with("unknown host \"db.invalid\""), "{unknown}");
    }

    #[tokio::test]
    async fn a_sqlite_store_is_tried_once() {
        let mut attempts = 0;
        let result: Result<()> = open_with_retry(
            "state store",
            "sqlite:/nonexistent/dir/x.db",
            Duration::from_secs(60),
            |_| {
                attempts += 1;
                async { Err::<(), _>("unable to open database file") }
            },
        )
        .await;
        assert!(result.is_err());
        assert_eq!(attempts, 1);
    }
}
