//! `flink-autoscaler run`: the standalone autoscaler as a service over any number of Flink clusters
//! and YARN ResourceManagers (the parts live in `flink_autoscaler::service`; the HTTP server of
//! `/metrics`, `/livez`, `/readyz` is `flink_autoscaler::service::http`).

use anyhow::{Context, Result, bail};
use autoscaler_core::secret::SecretSource;
use autoscaler_core::standalone::ControlLoopOptions;
use autoscaler_core::{
    AutoScalerEventHandler, AutoScalerStateStore, Configuration, FetchError, JobAutoScaler, JobAutoScalerImpl,
    JobListFetcher, LoggingEventHandler, MetricsCollector, ParallelismOverrides, RealizeError, ScalingRealizer,
    StandaloneAutoscaler, async_trait,
};
use autoscaler_realizer::{
    CooldownConfig, CooldownRealizer, MultiSourceJobListFetcher, RescaleApiScalingRealizer, RescaleInFlightGuard,
    RestClientConfig, RestMetricsCollector, SourceJobContext,
};
use flink_autoscaler::service::metrics::{self, ServiceMetrics};
use flink_autoscaler::service::settings::{self, EventsTarget};
use flink_autoscaler::service::{ObservedAutoScaler, ObservedCollector, ObservedStateStore, http};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

type Ctx = SourceJobContext;

/// Output format of the logs (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Arguments of `run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// A Flink cluster's REST address, `[NAME=]URL` (repeatable). Without any source flag the
    /// sources come from --config (default: the reference's host/port keys, localhost:8081).
    #[arg(long = "flink-url", value_name = "[NAME=]URL")]
    pub flink_urls: Vec<String>,
    /// A YARN ResourceManager's REST address, `[NAME=]URL` (repeatable): its RUNNING Flink
    /// applications are autoscaled.
    #[arg(long = "yarn-rm-url", value_name = "[NAME=]URL")]
    pub yarn_rm_urls: Vec<String>,
    /// A Flink-style YAML file with `job.autoscaler.*`, `autoscaler.standalone.*` and
    /// `autoscaler.service.*` keys; the jobs' own configuration overrides it, flags override it.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Control loop interval (Flink duration syntax, e.g. `10 s`); default 10 s.
    #[arg(long)]
    pub interval: Option<String>,
    /// How many jobs are scaled concurrently; default 100.
    #[arg(long)]
    pub parallelism: Option<usize>,
    /// Decide and report, never rescale (forces `job.autoscaler.scaling.enabled=false`).
    #[arg(long)]
    pub dry_run: bool,
    /// Where state is kept: `memory`, `sqlite:PATH`, `postgres://...`, `mysql://...`
    /// (default: `autoscaler.standalone.state-store.type`, else `sqlite:flink-autoscaler-state.db`).
    #[arg(long)]
    pub state: Option<String>,
    /// The database password of --state, as `env:VARIABLE` or `file:PATH` (keeps it off the
    /// command line).
    #[arg(long, value_name = "env:VAR|file:PATH")]
    pub state_password: Option<String>,
    /// Where events go: `log`, or `state` (the database of --state, with dedup and TTL); default
    /// `autoscaler.standalone.event-handler.type`, else `log`.
    #[arg(long)]
    pub events: Option<String>,
    /// Serve Prometheus metrics at `/metrics`, and `/livez`, `/readyz`, on this address.
    #[arg(long, value_name = "HOST:PORT")]
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// Log format.
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// Stop after this long (Flink duration syntax); default: run until SIGTERM / ctrl-c.
    #[arg(long)]
    pub run_for: Option<String>,
}

/// Reads a Flink `config.yaml` (nested maps flattened with dots, lists joined with `;`) or a legacy
/// `flink-conf.yaml` (flat `key: value` lines, which is also valid YAML).
pub fn load_flink_yaml(path: &Path) -> Result<Configuration> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    parse_flink_yaml(&text).with_context(|| format!("{} is not valid Flink YAML", path.display()))
}

fn parse_flink_yaml(text: &str) -> Result<Configuration> {
    use yaml_rust2::{Yaml, YamlLoader};
    fn scalar(y: &Yaml) -> Option<String> {
        match y {
            Yaml::Real(s) | Yaml::String(s) => Some(s.clone()),
            Yaml::Integer(i) => Some(i.to_string()),
            Yaml::Boolean(b) => Some(b.to_string()),
            Yaml::Array(items) => Some(items.iter().filter_map(scalar).collect::<Vec<_>>().join(";")),
            _ => None,
        }
    }
    fn flatten(prefix: &str, y: &Yaml, out: &mut Configuration) -> Result<()> {
        match y {
            Yaml::Hash(map) => {
                for (k, v) in map {
                    let Some(key) = scalar(k) else {
                        bail!("a key under {prefix:?} is not a scalar")
                    };
                    let full = if prefix.is_empty() {
                        key
                    } else {
                        format!("{prefix}.{key}")
                    };
                    flatten(&full, v, out)?;
                }
                Ok(())
            }
            Yaml::Null => Ok(()),
            other => match scalar(other) {
                Some(v) => {
                    out.set(prefix, v);
                    Ok(())
                }
                None => bail!("unsupported value at {prefix:?}"),
            },
        }
    }
    let docs = YamlLoader::load_from_str(text)?;
    let mut conf = Configuration::new();
    for doc in &docs {
        flatten("", doc, &mut conf)?;
    }
    Ok(conf)
}

/// A fetcher wrapper forcing recommend-only mode on every job (`--dry-run`).
struct DryRunFetcher(MultiSourceJobListFetcher);

#[async_trait]
impl JobListFetcher<String, Ctx> for DryRunFetcher {
    async fn fetch(&self, base: &Configuration) -> Result<Vec<Ctx>, FetchError> {
        let mut jobs = self.0.fetch(base).await?;
        for job in &mut jobs {
            job.configuration.set("job.autoscaler.scaling.enabled", "false");
        }
        Ok(jobs)
    }
}

/// A realizer that only logs (`--dry-run`).
struct LogOnlyRealizer;

#[async_trait]
impl ScalingRealizer<String, Ctx> for LogOnlyRealizer {
    async fn realize_parallelism_overrides(
        &self,
        ctx: &Ctx,
        overrides: &ParallelismOverrides,
    ) -> Result<(), RealizeError> {
        tracing::info!(job = %ctx.labels.job_key, ?overrides, "dry run: not rescaling");
        Ok(())
    }
}

/// Warns about a password given literally on the command line (other local users can read it).
fn warn_if_password_on_command_line(flag: &str, url: &str) {
    if autoscaler_core::secret::redact_url(url) != url {
        tracing::warn!(
            flag,
            "a password on the command line is visible to other local users; use --state-password env:VAR or the per-source auth.password key"
        );
    }
}

/// Installs the Prometheus recorder of the `metrics` facade (once per process) and returns its
/// renderer.
fn install_prometheus_recorder() -> Result<http::ProcessMetricsRenderer> {
    let handle = metrics_exporter_prometheus::PrometheusBuilder::new()
        .set_buckets(metrics::LATENCY_BUCKETS)
        .context("metric buckets")?
        .install_recorder()
        .context("cannot install the Prometheus recorder")?;
    Ok(Arc::new(move || handle.render()))
}

/// Runs the standalone autoscaler until shutdown.
pub async fn run(args: RunArgs) -> Result<()> {
    let mut base = Configuration::from_iter([("job.autoscaler.enabled", "true")]);
    if let Some(path) = &args.config {
        base = base.overlay(&load_flink_yaml(path)?);
    }
    for key in settings::unknown_standalone_keys(&base) {
        tracing::warn!(key = %key, "unknown autoscaler.standalone.* key, ignored");
    }
    if let Some(interval) = &args.interval {
        autoscaler_core::duration::parse_duration(interval)
            .map_err(|e| anyhow::anyhow!("--interval {interval:?}: {e}"))?;
        base.set(autoscaler_core::standalone::CONTROL_LOOP_INTERVAL_KEY, interval.clone());
    }
    if let Some(p) = args.parallelism {
        base.set(autoscaler_core::standalone::CONTROL_LOOP_PARALLELISM_KEY, p.to_string());
    }
    let run_for = match &args.run_for {
        Some(d) => {
            Some(autoscaler_core::duration::parse_duration(d).map_err(|e| anyhow::anyhow!("--run-for {d:?}: {e}"))?)
        }
        None => None,
    };
    let loop_options = ControlLoopOptions::from_configuration(&base).context("control loop options")?;
    let rest_config = RestClientConfig::from_configuration(&base).context("autoscaler options in --config")?;

    for url in args.flink_urls.iter().chain(&args.yarn_rm_urls) {
        warn_if_password_on_command_line("source URL", url);
    }
    if let Some(state) = &args.state {
        warn_if_password_on_command_line("--state", state);
    }
    let specs = settings::source_specs(&args.flink_urls, &args.yarn_rm_urls, &base)?;
    let metrics = Arc::new(ServiceMetrics::new());
    let sources = specs
        .iter()
        .map(|spec| settings::build_source(spec, &base, &rest_config))
        .collect::<Result<Vec<_>, _>>()?;
    let fetcher = MultiSourceJobListFetcher::new(sources, metrics.clone())?;

    let state_password = args
        .state_password
        .as_deref()
        .map(|s| {
            SecretSource::parse(s)
                .ok_or_else(|| anyhow::anyhow!("--state-password: expected env:VARIABLE or file:PATH"))
        })
        .transpose()?;
    let storage = settings::storage(
        args.state.as_deref(),
        state_password.as_ref(),
        args.events.as_deref(),
        &base,
    )?;
    let shown_state = autoscaler_core::secret::redact_url(storage.state_url.expose());
    // The store's own errors print the URL redacted (and scrub the password from driver messages).
    let store = autoscaler_state::open_state_store(storage.state_url.expose())
        .await
        .map_err(|e| anyhow::anyhow!("--state {shown_state}: {e}"))?;
    let store: Arc<dyn AutoScalerStateStore<String, Ctx>> =
        Arc::new(ObservedStateStore::new(Arc::new(store), metrics.clone()));
    let (events, ttl_cleaner): (Arc<dyn AutoScalerEventHandler<String, Ctx>>, _) = match &storage.events {
        EventsTarget::Logging => (Arc::new(LoggingEventHandler), None),
        EventsTarget::Database { url, ttl } => {
            let shown = autoscaler_core::secret::redact_url(url.expose());
            let handler = Arc::new(
                autoscaler_state::open_event_handler(url.expose())
                    .await
                    .map_err(|e| anyhow::anyhow!("event database {shown}: {e}"))?,
            );
            let cleaner = ttl.map(|ttl| Arc::clone(&handler).spawn_ttl_cleaner(ttl, Duration::from_secs(24 * 3600)));
            (handler, cleaner)
        }
    };
    let collector: Arc<dyn MetricsCollector<String, Ctx>> = Arc::new(ObservedCollector::new(
        Arc::new(RestMetricsCollector::<String>::new()),
        metrics.clone(),
    ));
    let fetcher: Arc<dyn JobListFetcher<String, Ctx>> = if args.dry_run {
        Arc::new(DryRunFetcher(fetcher))
    } else {
        Arc::new(fetcher)
    };
    let autoscaler: Arc<dyn JobAutoScaler<String, Ctx>> = if args.dry_run {
        let inner = Arc::new(JobAutoScalerImpl::new(
            collector,
            store,
            Arc::new(LogOnlyRealizer),
            events.clone(),
        ));
        Arc::new(ObservedAutoScaler::new(inner, metrics.clone()))
    } else {
        // Per job, the cooldown reads the Flink 2.x keys (1.x fallbacks) from the job's own
        // configuration; the guard skips a job's cycles while its rescale is in flight and drops
        // a vanished job's cooldown entry.
        let cooldown_defaults = CooldownConfig::from_configuration(&base).context("cooldown options")?;
        let cooldown = Arc::new(CooldownRealizer::new(
            RescaleApiScalingRealizer::with_event_handler(events.clone()),
            cooldown_defaults,
        ));
        let realizer: Arc<dyn ScalingRealizer<String, Ctx>> = cooldown.clone();
        let inner = Arc::new(JobAutoScalerImpl::new(collector, store, realizer, events.clone()));
        Arc::new(RescaleInFlightGuard::new(
            ObservedAutoScaler::new(inner, metrics.clone()),
            cooldown,
        ))
    };

    let (stop_http, http_stopped) = tokio::sync::oneshot::channel::<()>();
    let server = match args.metrics_addr {
        Some(addr) => {
            let process = install_prometheus_recorder()?;
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("--metrics-addr {addr}"))?;
            // Other routes (e.g. job status pages) are merged into this router here.
            let app = http::router(metrics.clone(), Some(process));
            tracing::info!(%addr, "serving /metrics, /livez and /readyz");
            Some(tokio::spawn(http::serve(listener, app, async {
                let _ = http_stopped.await;
            })))
        }
        None => None,
    };

    let shown_sources: Vec<String> = specs.iter().map(ToString::to_string).collect();
    tracing::info!(sources = ?shown_sources, state = %shown_state, dry_run = args.dry_run, "standalone autoscaler starting");
    let control_loop = StandaloneAutoscaler::new(fetcher, autoscaler, events, loop_options)
        .with_base_configuration(base)
        .with_options_validation();
    control_loop
        .run(async move {
            let stop = shutdown_signal();
            match run_for {
                Some(d) => {
                    tokio::select! {
                        () = stop => {}
                        () = tokio::time::sleep(d) => tracing::info!("--run-for elapsed"),
                    }
                }
                None => stop.await,
            }
        })
        .await;
    let _ = stop_http.send(());
    if let Some(server) = server {
        match server.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "the metrics server failed"),
            Err(e) => tracing::warn!(error = %e, "the metrics server task failed"),
        }
    }
    if let Some(cleaner) = ttl_cleaner {
        cleaner.abort();
    }
    tracing::info!("standalone autoscaler stopped");
    Ok(())
}

/// Completes on ctrl-c or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => tracing::info!("ctrl-c: stopping after the cycle in flight"),
        () = term => tracing::info!("SIGTERM: stopping after the cycle in flight"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flink_yaml_nested_and_flat_keys_flatten_to_dotted_keys() {
        let conf = parse_flink_yaml(
            "job:\n  autoscaler:\n    enabled: true\n    metrics.window: 3 min\n    vertex.exclude.ids: [a, b]\njobmanager.scheduler: adaptive\n",
        )
        .expect("valid yaml");
        assert_eq!(conf.get("job.autoscaler.enabled"), Some("true"));
        assert_eq!(conf.get("job.autoscaler.metrics.window"), Some("3 min"));
        assert_eq!(conf.get("job.autoscaler.vertex.exclude.ids"), Some("a;b"));
        assert_eq!(conf.get("jobmanager.scheduler"), Some("adaptive"));
    }

    #[test]
    fn broken_yaml_is_an_error() {
        assert!(parse_flink_yaml("a: [1, 2").is_err());
    }
}
