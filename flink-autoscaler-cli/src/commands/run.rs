//! `flink-autoscaler run`: the standalone autoscaler as a service over any number of Flink clusters
//! and YARN ResourceManagers (the parts live in `crate::service`; the HTTP server of
//! `/metrics`, `/livez`, `/readyz` is `crate::service::http`).

use crate::recording::{DecisionPublisher, RecordingCollector};
use crate::service::config::{self as service_config, ReloadableBase, ReloadingFetcher};
use crate::service::metrics::{self, ServiceMetrics};
use crate::service::settings::{self, EventsTarget};
use crate::service::{ObservedAutoScaler, ObservedCollector, ObservedStateStore, http, startup};
use crate::status::DecisionBoard;
use anyhow::{Context, Result, bail};
use autoscaler_core::ControlLoopOptions;
use autoscaler_core::secret::SecretSource;
use autoscaler_core::{
    AutoScalerEventHandler, AutoScalerStateStore, FetchError, JobAutoScaler, JobAutoScalerImpl, JobListFetcher,
    JobOwnership, LoggingEventHandler, MetricsCollector, ParallelismOverrides, RealizeError, ScalingRealizer,
    StandaloneAutoscaler, async_trait, config::Configuration,
};
use autoscaler_realizer::{
    CooldownConfig, CooldownRealizer, RescaleApiScalingRealizer, RescaleInFlightGuard, RestMetricsCollector,
    rest::RestClientConfig, sources::MultiSourceJobListFetcher, sources::SourceJobContext,
};
use autoscaler_replay::recording::{Recorder, RecorderOptions};
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
    /// `autoscaler.service.*` keys (default: `$FLINK_CONF_DIR/config.yaml`, then
    /// `flink-conf.yaml`); the jobs' own configuration overrides it, flags override it.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Set a key over the file: `-Dkey=value` or `-D key=value` (repeatable); `--key value` works
    /// for keys under `autoscaler.`, `job.autoscaler.` and `kubernetes.operator.job.autoscaler.`.
    #[arg(short = 'D', value_name = "KEY=VALUE")]
    pub dynamic: Vec<String>,
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
    /// Serve Prometheus metrics at `/metrics`, `/livez`, `/readyz` and the job status (`/jobs`,
    /// `/jobs/{key}`) on this address.
    #[arg(long, value_name = "HOST:PORT")]
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// Log format.
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// What `/metrics` serves per job: `job` (its info and counters, a few hundred bytes) or
    /// `vertex` (also every evaluated metric of the job and its vertices).
    #[arg(long, value_enum, default_value = "job")]
    pub metrics_detail: metrics::MetricsDetail,
    /// Stop after this long (Flink duration syntax); default: run until SIGTERM / ctrl-c.
    #[arg(long)]
    pub run_for: Option<String>,
    /// Record every job's cycles (configuration, topology, collections, decisions) as JSON lines
    /// into this directory, one `<job>.jsonl` per job (see docs/recording.md).
    #[arg(long)]
    pub record: Option<PathBuf>,
    /// Rotate a recording before it grows past this many bytes (default 64 MiB, at least 4096).
    #[arg(long, requires = "record", value_parser = clap::value_parser!(u64).range(4096..))]
    pub record_max_bytes: Option<u64>,
    /// Rotated recordings kept per job (default 4).
    #[arg(long, requires = "record")]
    pub record_keep: Option<u32>,
    /// Serve the job status endpoints (`/jobs`, `/jobs/{key}`: the latest decision record of each
    /// job) on this address, e.g. `127.0.0.1:9250` (they are also on --metrics-addr when set).
    #[arg(long)]
    pub status_addr: Option<std::net::SocketAddr>,
    /// How long the scales in flight may take to finish after SIGTERM / ctrl-c before they are
    /// cancelled (Flink duration syntax); a second signal cancels them at once.
    #[arg(long, default_value = "30 s")]
    pub shutdown_grace: String,
    /// This process's name among the replicas sharing the state database (overrides
    /// `autoscaler.service.ha.replica-id`; default: host name and pid). Must be unique.
    #[arg(long, value_name = "ID")]
    pub replica_id: Option<String>,
    /// Threads running the control loop, the Flink REST calls and the HTTP endpoints. One (the
    /// default) suffices for 10,000 jobs of 10 vertices at a 10 s interval and costs the least CPU
    /// per job-cycle: the service mostly waits on Flink and its database, and one thread hands no
    /// work to another. Raise it for fleets whose cycles need more than one core. The SQLite driver
    /// and host name lookups have threads of their own.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub worker_threads: u16,
}

/// Largest `--config` file read (Flink configurations are a few KiB).
const MAX_CONFIG_BYTES: u64 = 16 * 1024 * 1024;
/// Deepest nesting of maps and lists accepted in `--config`.
const MAX_CONFIG_DEPTH: usize = 64;

/// Reads a Flink `config.yaml` (nested maps flattened with dots, lists joined with `;`) or a legacy
/// `flink-conf.yaml` (flat `key: value` lines, which is also valid YAML).
pub fn load_flink_yaml(path: &Path) -> Result<Configuration> {
    let text =
        crate::io::read_limited(path, MAX_CONFIG_BYTES).with_context(|| format!("cannot read {}", path.display()))?;
    parse_flink_yaml(&text).with_context(|| format!("{} is not valid Flink YAML", path.display()))
}

/// Refuses what would make the YAML loader's output much larger than its input: aliases (a
/// 478-byte "billion laughs" expands to gigabytes) and deep nesting.
fn check_yaml_shape(text: &str) -> Result<()> {
    use yaml_rust2::parser::{Event, Parser};
    let mut parser = Parser::new_from_str(text);
    let mut depth = 0usize;
    loop {
        let (event, mark) = parser.next_token()?;
        match event {
            Event::Alias(_) => bail!(
                "line {}: YAML aliases (*name) are not supported in a Flink configuration",
                mark.line()
            ),
            Event::SequenceStart(..) | Event::MappingStart(..) => {
                depth += 1;
                if depth > MAX_CONFIG_DEPTH {
                    bail!("line {}: nested deeper than {MAX_CONFIG_DEPTH} levels", mark.line());
                }
            }
            Event::SequenceEnd | Event::MappingEnd => depth = depth.saturating_sub(1),
            Event::StreamEnd => return Ok(()),
            _ => {}
        }
    }
}

fn parse_flink_yaml(text: &str) -> Result<Configuration> {
    use yaml_rust2::{Yaml, YamlLoader};
    check_yaml_shape(text)?;
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

/// A cleanup hook that drops a vanished job's status (`/jobs`).
fn forget_status(board: &Arc<DecisionBoard>) -> crate::service::CleanupHook {
    let board = Arc::clone(board);
    Arc::new(move |job: &String| board.remove(job))
}

/// Installs the Prometheus recorder of the `metrics` facade (once per process) with the HELP
/// texts, the error counters at 0, the `process_*` collector and the histograms' upkeep, and
/// returns its renderer. Must be called within a Tokio runtime.
fn install_prometheus_recorder(sources: &[&str], store: Option<&'static str>) -> Result<http::ProcessMetricsRenderer> {
    let handle = metrics_exporter_prometheus::PrometheusBuilder::new()
        .set_buckets(metrics::LATENCY_BUCKETS)
        .context("metric buckets")?
        .set_buckets_for_metric(
            metrics_exporter_prometheus::Matcher::Full(autoscaler_state::STATE_FLUSH_GROUP_JOBS.to_owned()),
            autoscaler_state::STATE_FLUSH_GROUP_BUCKETS,
        )
        .context("metric buckets")?
        .install_recorder()
        .context("cannot install the Prometheus recorder")?;
    // Runs as long as the process: the recorder is installed once and never removed.
    metrics::spawn_histogram_upkeep(handle.clone(), metrics::HISTOGRAM_UPKEEP_PERIOD);
    metrics::describe_process_series();
    metrics::init_error_counters(sources.iter().copied(), store);
    let process = metrics_process::Collector::default();
    process.describe();
    Ok(Arc::new(move || {
        process.collect();
        handle.render()
    }))
}

/// Runs the standalone autoscaler until shutdown.
pub async fn run(args: RunArgs) -> Result<()> {
    // Registered first: until a handler is installed, SIGHUP's default action ends the process.
    let hangups = hangup_signals();
    let mut flags = Vec::new();
    if let Some(interval) = &args.interval {
        autoscaler_core::config::parse_duration(interval)
            .map_err(|e| anyhow::anyhow!("--interval {interval:?}: {e}"))?;
        flags.push((autoscaler_core::CONTROL_LOOP_INTERVAL_KEY.to_owned(), interval.clone()));
    }
    if let Some(p) = args.parallelism {
        flags.push((autoscaler_core::CONTROL_LOOP_PARALLELISM_KEY.to_owned(), p.to_string()));
    }
    let inputs = service_config::ConfigInputs {
        file: args.config.clone(),
        dynamic: args.dynamic.clone(),
        flags,
    };
    let loaded = inputs.load()?;
    match &loaded.file {
        Some(file) => tracing::info!(file = %file.display(), "configuration read"),
        None => tracing::info!("no configuration file (no --config, FLINK_CONF_DIR unset): flags and defaults only"),
    }
    let check_flags = service_config::CheckFlags {
        flink_urls: &args.flink_urls,
        yarn_urls: &args.yarn_rm_urls,
        state: args.state.as_deref(),
        events: args.events.as_deref(),
    };
    let report = service_config::check(&loaded.conf, check_flags);
    for warning in &report.warnings {
        tracing::warn!("{warning}");
    }
    if !report.is_valid() {
        let n = report.errors.len();
        bail!(
            "invalid configuration ({n} problem{}):\n  {}",
            if n == 1 { "" } else { "s" },
            report.errors.join("\n  ")
        );
    }
    let base = loaded.conf;
    let startup_timeout = service_config::startup_timeout(&base)?;
    let run_for = match &args.run_for {
        Some(d) => {
            Some(autoscaler_core::config::parse_duration(d).map_err(|e| anyhow::anyhow!("--run-for {d:?}: {e}"))?)
        }
        None => None,
    };
    let grace = autoscaler_core::config::parse_duration(&args.shutdown_grace)
        .map_err(|e| anyhow::anyhow!("--shutdown-grace {:?}: {e}", args.shutdown_grace))?;
    let loop_options = ControlLoopOptions::from_configuration(&base).context("control loop options")?;
    crate::logging::set_repeat_interval(loop_options.scaling_event_interval);
    let max_staleness =
        metrics::readiness_max_staleness(&base, loop_options.interval).map_err(|e| anyhow::anyhow!(e))?;
    let rest_config = RestClientConfig::from_configuration(&base).context("autoscaler options in --config")?;
    let ha = service_config::ha_options(&base, args.replica_id.as_deref())?;

    for url in args.flink_urls.iter().chain(&args.yarn_rm_urls) {
        warn_if_password_on_command_line("source URL", url);
    }
    if let Some(state) = &args.state {
        warn_if_password_on_command_line("--state", state);
    }
    let specs = settings::source_specs(&args.flink_urls, &args.yarn_rm_urls, &base)?;
    let metrics = Arc::new(ServiceMetrics::with_options(args.metrics_detail, max_staleness));
    metrics.register_sources(specs.iter().map(|s| s.name.as_str()));
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
    if let Some(path) = startup::sqlite_path(storage.state_url.expose()) {
        tracing::info!(path = %path.display(), "state kept in the SQLite file");
    }
    // The store's own errors print the URL redacted; a network database not up yet is retried.
    let what = if args.state.is_some() { "--state" } else { "state store" };
    let store = startup::open_with_retry(what, storage.state_url.expose(), startup_timeout, |attempt| {
        let options = autoscaler_state::StoreOptions {
            acquire_timeout: attempt,
            ..autoscaler_state::StoreOptions::default()
        };
        let url = storage.state_url.expose().to_owned();
        async move { autoscaler_state::AnyStateStore::open_with(&url, &options).await }
    })
    .await?;
    let backend = storage
        .state_url
        .expose()
        .parse::<autoscaler_state::StateUrl>()
        .ok()
        .map(|url| url.backend());
    // Replicas sharing a database own each job through its lease (the memory store is one process).
    let ownership = match ha {
        Some(ha) if backend.is_some_and(|b| b != "memory") => {
            let replica = ha.replica_id.clone();
            let ownership = autoscaler_state::DbJobOwnership::attach(&store, ha)
                .await
                .map_err(|e| anyhow::anyhow!("job leases in the state database: {e}"))?;
            tracing::info!(replica = %replica, lease_duration = ?ownership.options().lease_duration, renew_interval = ?ownership.options().renew_interval, "sharing the jobs with the other replicas of the state database");
            Some(Arc::new(ownership))
        }
        Some(_) => None,
        None => {
            tracing::info!(
                "{} is false: this process acts on every job",
                service_config::HA_ENABLED_KEY
            );
            None
        }
    };
    let store: Arc<dyn AutoScalerStateStore<String, Ctx>> =
        Arc::new(ObservedStateStore::new(Arc::new(store), metrics.clone()));
    let (events, ttl_cleaner): (Arc<dyn AutoScalerEventHandler<String, Ctx>>, _) = match &storage.events {
        EventsTarget::Logging => (Arc::new(LoggingEventHandler), None),
        EventsTarget::Database { url, ttl } => {
            let handler = Arc::new(
                startup::open_with_retry("event database", url.expose(), startup_timeout, |attempt| {
                    let options = autoscaler_state::StoreOptions {
                        acquire_timeout: attempt,
                        ..autoscaler_state::StoreOptions::default()
                    };
                    let url = url.expose().to_owned();
                    async move { autoscaler_state::AnyEventHandler::open_with(&url, &options).await }
                })
                .await?,
            );
            let cleaner = ttl.map(|ttl| Arc::clone(&handler).spawn_ttl_cleaner(ttl, Duration::from_secs(24 * 3600)));
            (handler, cleaner)
        }
    };
    // Job status (`--status-addr`: /jobs, /jobs/{key}) and recordings (`--record`).
    let recorder = match &args.record {
        Some(dir) => {
            let defaults = RecorderOptions::default();
            let options = RecorderOptions {
                max_file_bytes: args.record_max_bytes.unwrap_or(defaults.max_file_bytes),
                keep_rotated: args.record_keep.unwrap_or(defaults.keep_rotated),
            };
            let recorder = Recorder::new(dir, options).with_context(|| format!("--record {}", dir.display()))?;
            tracing::info!(dir = %dir.display(), "recording every job's cycles");
            Some(Arc::new(recorder))
        }
        None => None,
    };
    let board = Arc::new(DecisionBoard::with_max_staleness(max_staleness));
    let events: Arc<dyn AutoScalerEventHandler<String, Ctx>> =
        Arc::new(DecisionPublisher::new(events, Some(board.clone()), recorder.clone()));
    let collector: Arc<dyn MetricsCollector<String, Ctx>> = Arc::new(RestMetricsCollector::<String>::new());
    let collector: Arc<dyn MetricsCollector<String, Ctx>> = match &recorder {
        Some(recorder) => Arc::new(RecordingCollector::new(collector, recorder.clone())),
        None => collector,
    };
    let collector: Arc<dyn MetricsCollector<String, Ctx>> =
        Arc::new(ObservedCollector::new(collector, metrics.clone()));
    let (stop_status, status_stopped) = tokio::sync::oneshot::channel::<()>();
    let status_server = match args.status_addr {
        Some(addr) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("--status-addr {addr}"))?;
            tracing::info!(%addr, "job status on /jobs and /jobs/{{key}}");
            Some(tokio::spawn(crate::status::serve(listener, board.clone(), async {
                let _ = status_stopped.await;
            })))
        }
        None => None,
    };
    let fetcher: Arc<dyn JobListFetcher<String, Ctx>> = if args.dry_run {
        Arc::new(DryRunFetcher(fetcher))
    } else {
        Arc::new(fetcher)
    };
    // Every fetch lays the jobs over the current base, which SIGHUP may replace.
    let reloadable = ReloadableBase::new(base.clone());
    let fetcher: Arc<dyn JobListFetcher<String, Ctx>> = Arc::new(ReloadingFetcher::new(fetcher, reloadable.clone()));
    let autoscaler: Arc<dyn JobAutoScaler<String, Ctx>> = if args.dry_run {
        let inner = Arc::new(
            JobAutoScalerImpl::new(collector, store, Arc::new(LogOnlyRealizer), events.clone())
                .with_plugins(autoscaler_replay::stock_plugins()),
        );
        Arc::new(ObservedAutoScaler::new(inner, metrics.clone()).on_cleanup(forget_status(&board)))
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
        let inner = Arc::new(
            JobAutoScalerImpl::new(collector, store, realizer, events.clone())
                .with_plugins(autoscaler_replay::stock_plugins()),
        );
        Arc::new(RescaleInFlightGuard::new(
            ObservedAutoScaler::new(inner, metrics.clone()).on_cleanup(forget_status(&board)),
            cooldown,
        ))
    };

    let (stop_http, http_stopped) = tokio::sync::oneshot::channel::<()>();
    let server = match args.metrics_addr {
        Some(addr) => {
            let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
            let store_kind = backend.filter(|backend| *backend != "memory");
            let process = install_prometheus_recorder(&names, store_kind)?;
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("--metrics-addr {addr}"))?;
            // The job status routes are served here too (issue 12: on the metrics address when
            // there is one), as well as on --status-addr when that is given.
            let app = http::router(metrics.clone(), Some(process)).merge(crate::status::router(board.clone()));
            tracing::info!(%addr, "serving /metrics, /livez, /readyz, /jobs and /jobs/{{key}}");
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
        .with_rejecting_validator(service_config::job_validator(
            board.clone(),
            metrics.clone(),
            reloadable.clone(),
        ));
    let control_loop = match &ownership {
        Some(ownership) => {
            let replica = ownership.options().replica_id.clone();
            let control_loop = control_loop.with_ownership(Arc::clone(ownership) as Arc<dyn JobOwnership<String>>);
            if let (Some(stats), Some(watch)) = (control_loop.ownership_stats(), control_loop.ownership_watch()) {
                metrics.health().set_ownership(replica.clone(), stats);
                board.set_owners(crate::status::Owners::new(replica, watch, Arc::clone(ownership)));
            }
            control_loop
        }
        None => control_loop,
    };
    let reloader = spawn_reloader(hangups, inputs, &args, reloadable);
    let signals = signal_count();
    let mut first = signals.clone();
    let mut second = signals;
    let shutdown = async move {
        let stop = async move {
            let _ = first.wait_for(|&n| n >= 1).await;
        };
        match run_for {
            Some(d) => {
                tokio::select! {
                    () = stop => {}
                    () = tokio::time::sleep(d) => tracing::info!("--run-for elapsed"),
                }
            }
            None => stop.await,
        }
    };
    // First polled once the shutdown has begun, so the grace period counts from then.
    let abort = async move {
        tokio::select! {
            () = tokio::time::sleep(grace) => tracing::warn!(?grace, "shutdown grace period over"),
            _ = second.wait_for(|&n| n >= 2) => tracing::warn!("second signal: stopping now"),
        }
    };
    control_loop.run_with_abort(shutdown, abort).await;
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
    let _ = stop_status.send(());
    if let Some(server) = status_server
        && let Ok(Err(error)) = server.await
    {
        tracing::warn!(%error, "the status server failed");
    }
    if let Some(reloader) = reloader {
        reloader.abort();
    }
    tracing::info!("standalone autoscaler stopped");
    Ok(())
}

/// The SIGHUP stream (unix), registered as early as possible: until then SIGHUP ends the process.
#[cfg(unix)]
fn hangup_signals() -> Option<tokio::signal::unix::Signal> {
    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .map_err(|error| tracing::warn!(%error, "cannot listen for SIGHUP: no configuration reload"))
        .ok()
}

#[cfg(not(unix))]
fn hangup_signals() -> Option<()> {
    None
}

/// Re-reads the configuration on every SIGHUP (see [`service_config::reload`]).
#[cfg(unix)]
fn spawn_reloader(
    hangups: Option<tokio::signal::unix::Signal>,
    inputs: service_config::ConfigInputs,
    args: &RunArgs,
    base: ReloadableBase,
) -> Option<tokio::task::JoinHandle<()>> {
    let mut hangups = hangups?;
    // Both outcomes exist from the start, so an alert on `rejected` sees 0, not nothing.
    for outcome in ["applied", "rejected"] {
        ::metrics::counter!(service_config::CONFIG_RELOADS, "outcome" => outcome).increment(0);
    }
    let (flink_urls, yarn_urls) = (args.flink_urls.clone(), args.yarn_rm_urls.clone());
    let (state, events) = (args.state.clone(), args.events.clone());
    Some(tokio::spawn(async move {
        while hangups.recv().await.is_some() {
            tracing::info!("SIGHUP: re-reading the configuration");
            let flags = service_config::CheckFlags {
                flink_urls: &flink_urls,
                yarn_urls: &yarn_urls,
                state: state.as_deref(),
                events: events.as_deref(),
            };
            service_config::reload(&inputs, flags, &base);
        }
    }))
}

#[cfg(not(unix))]
fn spawn_reloader(
    _hangups: Option<()>,
    _inputs: service_config::ConfigInputs,
    _args: &RunArgs,
    _base: ReloadableBase,
) -> Option<tokio::task::JoinHandle<()>> {
    None
}

/// How many times ctrl-c or SIGTERM arrived: the first asks for a graceful stop, the second for
/// an immediate one.
fn signal_count() -> tokio::sync::watch::Receiver<u32> {
    let (count, receiver) = tokio::sync::watch::channel(0u32);
    tokio::spawn(async move {
        #[cfg(unix)]
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        loop {
            #[cfg(unix)]
            let term_signal = async {
                match term.as_mut() {
                    Some(s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            #[cfg(not(unix))]
            let term_signal = std::future::pending::<()>();
            let name = tokio::select! {
                result = tokio::signal::ctrl_c() => match result {
                    Ok(()) => "ctrl-c",
                    Err(_) => std::future::pending().await,
                },
                () = term_signal => "SIGTERM",
            };
            let n = *count.borrow() + 1;
            if n == 1 {
                tracing::info!("{name}: stopping after the cycle in flight (a second signal stops at once)");
            }
            if count.send(n).is_err() {
                return;
            }
        }
    });
    receiver
}

/// `run`: logging set up, then the service on a runtime of `--worker-threads` threads.
pub(crate) fn run_standalone(args: RunArgs) -> std::process::ExitCode {
    crate::logging::init(args.log_format == LogFormat::Json);
    let workers = usize::from(args.worker_threads);
    match on_threads(workers, run(args)) {
        Ok(Ok(())) => std::process::ExitCode::SUCCESS,
        Ok(Err(e)) => {
            crate::io::report(&format!("flink-autoscaler: {e:#}"));
            std::process::ExitCode::from(1)
        }
        Err(e) => {
            crate::io::report(&format!("flink-autoscaler: cannot start the runtime: {e}"));
            std::process::ExitCode::from(1)
        }
    }
}

/// Runs `work` to its end on a runtime of `workers` threads (at least one), `work` itself
/// included: an error only when the runtime cannot start.
///
/// One thread is the current-thread scheduler, which runs `work` and every task it spawns on the
/// calling thread. (The multi-thread scheduler with one worker would run `work` on the calling
/// thread and its tasks on the worker, and wake one thread from the other, a futex call and a
/// context switch, whenever a job's cycle ends: about a fifth of the service's CPU.) With several
/// workers `work` runs on one of them, so that `workers` threads do the work, not those plus the
/// calling one; a panic in it goes on unwinding in the caller, as it does with one thread.
fn on_threads<F, T>(workers: usize, work: F) -> std::io::Result<Result<T>>
where
    F: std::future::Future<Output = Result<T>> + Send + 'static,
    T: Send + 'static,
{
    if workers <= 1 {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        return Ok(runtime.block_on(work));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()?;
    Ok(runtime.block_on(async {
        match tokio::spawn(work).await {
            Ok(outcome) => outcome,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => Err(anyhow::anyhow!("the control loop ended abnormally: {e}")),
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The threads `work` and a task it spawns ran on, as seen from the calling thread.
    fn threads_of(workers: usize) -> (std::thread::ThreadId, std::thread::ThreadId, std::thread::ThreadId) {
        let caller = std::thread::current().id();
        let (work, task) = on_threads(workers, async {
            let work = std::thread::current().id();
            let task = tokio::spawn(async { std::thread::current().id() }).await?;
            Ok((work, task))
        })
        .expect("the runtime starts")
        .expect("the work ends");
        (caller, work, task)
    }

    #[test]
    fn one_worker_runs_the_loop_and_its_tasks_on_the_calling_thread() {
        let (caller, work, task) = threads_of(1);
        assert_eq!(work, caller);
        assert_eq!(task, caller);
    }

    #[test]
    fn several_workers_run_the_loop_on_a_worker_not_the_calling_thread() {
        let (caller, work, task) = threads_of(2);
        assert_ne!(work, caller);
        assert_ne!(task, caller);
    }

    #[test]
    fn a_panic_in_the_loop_reaches_the_caller_whatever_the_threads() {
        for workers in [1, 2] {
            let caught = std::panic::catch_unwind(|| {
                let _ = on_threads(workers, async { panic!("the loop broke") as Result<()> });
            });
            let payload = caught.expect_err("the panic reaches the caller");
            assert_eq!(
                payload.downcast_ref::<&str>(),
                Some(&"the loop broke"),
                "{workers} workers"
            );
        }
    }

    #[test]
    fn the_loop_s_error_is_its_own() {
        for workers in [1, 3] {
            let outcome = on_threads(workers, async { Err::<(), _>(anyhow::anyhow!("the loop failed")) })
                .expect("the runtime starts");
            assert_eq!(outcome.expect_err("the loop's error").to_string(), "the loop failed");
        }
    }

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
    fn a_yaml_alias_bomb_is_refused_before_it_expands() {
        // The 478-byte "billion laughs" of the finding: 9 levels of 9 aliases each, 9^9 strings.
        let mut bomb =
            String::from("a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n");
        for (name, prev) in ["b", "c", "d", "e", "f", "g", "h", "i"]
            .iter()
            .zip(["a", "b", "c", "d", "e", "f", "g", "h"])
        {
            let refs = vec![format!("*{prev}"); 9].join(",");
            bomb.push_str(&format!("{name}: &{name} [{refs}]\n"));
        }
        assert!(bomb.len() < 500, "{}", bomb.len());
        let error = parse_flink_yaml(&bomb).expect_err("aliases are refused");
        assert!(error.to_string().contains("aliases"), "{error}");
    }

    #[test]
    fn deep_nesting_is_refused() {
        let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
        assert!(parse_flink_yaml(&deep).is_err());
        // 64 levels are fine.
        let ok = format!("k: {}1{}", "[".repeat(63), "]".repeat(63));
        assert!(parse_flink_yaml(&ok).is_ok());
    }

    #[test]
    fn broken_yaml_is_an_error() {
        assert!(parse_flink_yaml("a: [1, 2").is_err());
    }
}
