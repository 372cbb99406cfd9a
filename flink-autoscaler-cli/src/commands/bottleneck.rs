//! `flink-autoscaler bottleneck`: the root cause of a running job's backpressure, right now.
//!
//! Collects a few metric snapshots of the job(s) over Flink's REST API with the autoscaler's own
//! collector, then classifies every vertex with `autoscaler_metrics::root_cause` over those samples
//! and prints one JSON object per job: `{"job_id", "job_name", "summary", "explanation"}` with the
//! explanation in the replay result's shape. Nothing is scaled.

use anyhow::{Context, Result, bail};
use autoscaler_core::{
    BasicJobContext, JobListFetcher, JobStatus, MetricsCollector, config::AutoScalerOptions, config::Configuration,
};
use autoscaler_metrics::MetricHistory;
use autoscaler_metrics::root_cause;
use autoscaler_realizer::{
    FlinkClusterJobListFetcher, RestMetricsCollector, rest::FlinkRestClient, rest::RestClientConfig,
};
use clap::Args;
use std::time::Duration;

/// Arguments of `bottleneck`.
#[derive(Args, Debug)]
pub struct BottleneckArgs {
    /// Flink REST URL, e.g. http://127.0.0.1:8081.
    #[arg(long)]
    pub flink_url: String,
    /// Only this job id (default: every RUNNING job).
    #[arg(long)]
    pub job: Option<String>,
    /// Number of snapshots to average over (at least 1).
    #[arg(long, default_value_t = 3)]
    pub samples: u32,
    /// Time between snapshots, e.g. "5 s".
    #[arg(long, default_value = "5 s")]
    pub interval: String,
}

/// Collects and classifies; prints one JSON line per job.
pub async fn bottleneck(args: BottleneckArgs) -> Result<()> {
    let interval = autoscaler_core::config::parse_duration(&args.interval)
        .map_err(|e| anyhow::anyhow!("--interval {:?}: {e}", args.interval))?;
    if args.samples == 0 || args.samples > 100 {
        bail!("--samples must be between 1 and 100, got {}", args.samples);
    }
    let client = FlinkRestClient::new(
        &args.flink_url,
        RestClientConfig {
            timeout: Duration::from_secs(10),
            ..RestClientConfig::default()
        },
    )
    .with_context(|| format!("--flink-url {}", args.flink_url))?;
    // No stabilization wait: the caller decides when the job is worth looking at.
    let base = Configuration::from_iter([("job.autoscaler.stabilization.interval", "0 s")]);
    let jobs: Vec<BasicJobContext<String, FlinkRestClient>> = FlinkClusterJobListFetcher::new(client)
        .fetch(&base)
        .await
        .context("listing the jobs")?
        .into_iter()
        .filter(|c| c.job_status == Some(JobStatus::Running))
        .filter(|c| args.job.as_deref().is_none_or(|id| c.job_id.as_deref() == Some(id)))
        .collect();
    if jobs.is_empty() {
        bail!(
            "no RUNNING job{}",
            args.job.map(|j| format!(" with id {j}")).unwrap_or_default()
        );
    }
    let collector = RestMetricsCollector::<String>::new();
    for ctx in &jobs {
        let options = AutoScalerOptions::from_configuration(&ctx.configuration)
            .with_context(|| format!("the options of job {}", ctx.job_key))?;
        let mut history = MetricHistory::new();
        let mut topology = None;
        for i in 0..args.samples {
            if i > 0 {
                tokio::time::sleep(interval).await;
            }
            let now = chrono::Utc::now();
            let collected = collector
                .collect(ctx, &options, now)
                .await
                .with_context(|| format!("collecting the metrics of job {}", ctx.job_key))?;
            let metrics = collected
                .metrics
                .into_scaling_metrics(&collected.topology, &options, &history);
            history.insert(now, metrics);
            topology = Some(collected.topology);
        }
        let Some(topology) = topology else { continue };
        let explanation = root_cause::explain(&topology, &history);
        let line = serde_json::json!({
            "job_id": ctx.job_id,
            "job_name": ctx.job_key,
            "summary": explanation.as_ref().map(|e| e.summary(&topology)),
            "explanation": explanation
                .as_ref()
                .map(|e| autoscaler_replay::explanation_json(e, &topology)),
        });
        println!("{line}");
    }
    Ok(())
}

/// `bottleneck`: on a current-thread runtime.
pub(crate) fn run_bottleneck(args: BottleneckArgs) -> std::process::ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("flink-autoscaler: cannot start the runtime: {e}");
            return std::process::ExitCode::from(1);
        }
    };
    match runtime.block_on(bottleneck(args)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("flink-autoscaler: {e:#}");
            std::process::ExitCode::from(1)
        }
    }
}
