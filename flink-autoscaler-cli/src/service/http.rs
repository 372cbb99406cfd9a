//! The service's HTTP server (axum): `/metrics` (Prometheus text), `/livez`, `/readyz`.
//!
//! [`router`] builds the routes; other parts of the service add theirs with
//! [`axum::Router::merge`] before [`serve`] (the binary does it in `commands/run.rs`, where the job
//! status routes `/jobs` and `/jobs/{key}` of [`crate::status::router`] are merged in). The server binds the address of `--metrics-addr` and stops
//! with the autoscaler.

use super::metrics::ServiceMetrics;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use std::future::Future;
use std::sync::Arc;

/// Renders the process-wide series (the installed `metrics` recorder), if any.
pub type ProcessMetricsRenderer = Arc<dyn Fn() -> String + Send + Sync>;

#[derive(Clone)]
struct AppState {
    metrics: Arc<ServiceMetrics>,
    process: Option<ProcessMetricsRenderer>,
}

/// The routes `/metrics`, `/livez` and `/readyz`. `process` renders the series of the `metrics`
/// facade's recorder (the binary passes the Prometheus exporter's handle); they follow the per-job
/// series.
pub fn router(metrics: Arc<ServiceMetrics>, process: Option<ProcessMetricsRenderer>) -> Router {
    Router::new()
        .route("/metrics", get(render_metrics))
        .route("/livez", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .with_state(AppState { metrics, process })
}

async fn render_metrics(State(state): State<AppState>) -> Response {
    let mut text = state.metrics.render_jobs();
    if let Some(process) = &state.process {
        text.push_str(&process());
    }
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        text,
    )
        .into_response()
}

async fn readyz(State(state): State<AppState>) -> Response {
    match state.metrics.health().not_ready_reason() {
        None => (StatusCode::OK, "ready\n").into_response(),
        Some(reason) => (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {reason}\n")).into_response(),
    }
}

/// Serves `router` on `listener` until `shutdown` completes.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router).with_graceful_shutdown(shutdown).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoscaler_realizer::sources::SourceObserver;
    use std::time::Duration;

    /// Serves `app` on a free loopback port: its address, the shutdown trigger and the server task.
    async fn start(
        app: Router,
    ) -> (
        std::net::SocketAddr,
        tokio::sync::oneshot::Sender<()>,
        tokio::task::JoinHandle<std::io::Result<()>>,
    ) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(listener, app, async {
            let _ = stopped.await;
        }));
        (addr, stop, server)
    }

    async fn get_text(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.expect("write");
        let mut response = String::new();
        stream.read_to_string(&mut response).await.expect("read");
        let status = response.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        (status, response)
    }

    #[tokio::test]
    async fn health_and_metrics_endpoints_answer() {
        let metrics = Arc::new(ServiceMetrics::new());
        let extra = Router::new().route("/extra", get(|| async { "merged" }));
        let app = router(Arc::clone(&metrics), Some(Arc::new(|| "process_series 1\n".to_owned()))).merge(extra);
        let (addr, stop, server) = start(app).await;
        let run = async {
            assert_eq!(get_text(addr, "/livez").await.0, 200);
            let (status, body) = get_text(addr, "/readyz").await;
            assert_eq!(status, 503);
            assert!(body.contains("no job list fetch has succeeded yet"), "{body}");
            metrics.source_listed("prod");
            assert_eq!(get_text(addr, "/readyz").await.0, 200);
            let (status, body) = get_text(addr, "/metrics").await;
            assert_eq!(status, 200);
            assert!(body.contains("process_series 1"), "{body}");
            assert!(
                body.contains("# TYPE flink_autoscaler_scalings_total counter"),
                "{body}"
            );
            assert!(get_text(addr, "/extra").await.1.ends_with("merged"));
        };
        tokio::time::timeout(Duration::from_secs(20), run)
            .await
            .expect("in time");
        let _ = stop.send(());
        let stopped = tokio::time::timeout(Duration::from_secs(5), server).await;
        assert!(matches!(stopped, Ok(Ok(Ok(())))), "server stops on shutdown");
    }

    /// `run` merges the job status routes into this router when `--metrics-addr` is set.
    #[tokio::test]
    async fn job_status_routes_merge_beside_the_metrics() {
        use crate::status::DecisionBoard;
        use autoscaler_core::record::{DecisionRecord, JobOutcome};
        let board = Arc::new(DecisionBoard::new());
        board.publish(
            "prod/abc",
            DecisionRecord::undecided(
                chrono::DateTime::UNIX_EPOCH,
                Some("prod/abc"),
                None,
                None,
                &autoscaler_core::config::AutoScalerOptions::default(),
                Duration::from_secs(300),
                JobOutcome::NotReady,
                "insufficient_samples",
            ),
        );
        let app = router(Arc::new(ServiceMetrics::new()), None).merge(crate::status::router(board.clone()));
        let (addr, stop, server) = start(app).await;
        let run = async {
            let (status, body) = get_text(addr, "/jobs").await;
            assert_eq!(status, 200, "{body}");
            assert!(body.contains(r#""job":"prod/abc""#), "{body}");
            let (status, body) = get_text(addr, "/jobs/prod/abc").await;
            assert_eq!(status, 200, "{body}");
            assert!(body.contains(r#""reason":"insufficient_samples""#), "{body}");
            assert_eq!(get_text(addr, "/jobs/prod/gone").await.0, 404);
            assert_eq!(get_text(addr, "/metrics").await.0, 200);
            board.remove("prod/abc");
            assert_eq!(
                get_text(addr, "/jobs/prod/abc").await.0,
                404,
                "a vanished job's status goes"
            );
        };
        tokio::time::timeout(Duration::from_secs(20), run)
            .await
            .expect("in time");
        let _ = stop.send(());
        let _ = tokio::time::timeout(Duration::from_secs(5), server).await;
    }
}
