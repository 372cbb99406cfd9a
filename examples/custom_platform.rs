//! Plugging the autoscaler into your own platform: "Acme Streams", an imaginary deployment system
//! that runs pipelines of stages with replicas and speaks its own vocabulary.
//!
//! ```text
//! cargo run --example custom_platform
//! ```
//!
//! Four traits connect it: [`JobListFetcher`] (which pipelines exist), [`MetricsCollector`] (their
//! stages as a topology plus scaling metrics), [`ScalingRealizer`] (set replicas, and apply memory
//! tuning's TaskManager configuration) and [`AutoScalerEventHandler`] (where reports go). Acme's
//! API is faked here on top of the simulator.
//!
//! Memory tuning is on (`job.autoscaler.memory.tuning.enabled`): Acme reports its workers' heap and
//! metaspace use, the autoscaler recommends a TaskManager configuration with each rescale, and
//! Acme's realizer rolls it out (`realize_config_overrides`), which the Flink rescale API of the
//! `run` binary cannot do.

use autoscaler_sim::harness::example_configuration;
use autoscaler_sim::sim_instant;
use autoscaler_sim::{SimHandle, Simulator, workloads};
use flink_autoscaler::core::JobAutoScalerImpl;
use flink_autoscaler::core::{
    AutoScalerEventHandler, BasicJobContext, CollectError, CollectedJobMetrics, ConfigChanges, EventType, FetchError,
    JobAutoScaler, JobListFetcher, MetricsCollector, MetricsSnapshot, ParallelismOverrides, RealizeError,
    ScalingRealizer, async_trait, config::AutoScalerOptions, config::Configuration,
};
use flink_autoscaler::metrics::{CollectedMetrics, MetricValues, ScalingMetric};
use flink_autoscaler::state::InMemoryStateStore;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Acme's view of a stage: replicas, busy fraction of the busiest replica, record counters.
struct StageStats {
    stage: String,
    replicas: u32,
    busiest_replica_busy: f64,
    records_in: f64,
    records_out: f64,
    backlog: Option<f64>,
}

/// Acme's API client (faked: it reads and drives a simulated job). The configuration is what
/// Acme's workers run with (the TaskManager memory options among it).
#[derive(Clone)]
struct AcmeApi(SimHandle, Arc<Mutex<Configuration>>);

impl AcmeApi {
    fn stage_stats(&self) -> Vec<StageStats> {
        let sim = self.0.lock();
        let replicas = sim.parallelism();
        let stats = sim.job().vertices.iter().enumerate().map(|(i, v)| {
            let meters = sim.subtask_meters(i);
            StageStats {
                stage: v.id.clone(),
                replicas: replicas[&v.id],
                busiest_replica_busy: meters.iter().map(|m| m.busy_ms_per_sec / 1000.0).fold(0.0, f64::max),
                records_in: meters.iter().map(|m| m.counters.records_in).sum(),
                records_out: meters.iter().map(|m| m.counters.records_out).sum(),
                backlog: v.source.is_some().then(|| sim.backlog(i)),
            }
        });
        stats.collect()
    }
    fn set_replicas(&self, stage: &str, replicas: u32) {
        self.0.lock().set_requirement(stage, replicas);
    }
    fn worker_configuration(&self) -> Configuration {
        self.1.lock().map(|c| c.clone()).unwrap_or_default()
    }
    /// Rolls out a new worker configuration; returns whether it changed.
    fn set_worker_configuration(&self, conf: Configuration) -> bool {
        let Ok(mut current) = self.1.lock() else { return false };
        let changed = *current != conf;
        *current = conf;
        changed
    }
}

/// What Acme's workers report about their memory: a 600 MiB heap and 90 MiB of metaspace in use,
/// no managed memory (no RocksDB).
const HEAP_USED: f64 = 600.0 * 1_048_576.0;
const METASPACE_USED: f64 = 90.0 * 1_048_576.0;

type AcmeContext = BasicJobContext<String, AcmeApi>;

/// 1. Which pipelines to scale.
struct AcmePipelines(AcmeApi);

#[async_trait]
impl JobListFetcher<String, AcmeContext> for AcmePipelines {
    async fn fetch(&self, base: &Configuration) -> Result<Vec<AcmeContext>, FetchError> {
        let mut ctx = BasicJobContext::new("orders-pipeline".to_owned(), base.clone(), self.0.clone());
        ctx.job_status = Some(self.0.0.job_status());
        Ok(vec![ctx])
    }
}

/// 2. Acme's stage statistics as the autoscaler's topology and scaling metrics.
struct AcmeMetrics;

#[async_trait]
impl MetricsCollector<String, AcmeContext> for AcmeMetrics {
    async fn collect(
        &self,
        ctx: &AcmeContext,
        _options: &AutoScalerOptions,
        _now: chrono::DateTime<chrono::Utc>,
    ) -> Result<CollectedJobMetrics, CollectError> {
        let (topology, running_since) = {
            let sim = ctx.client.0.lock();
            let topology = sim.topology().map_err(|e| CollectError::Failed(e.to_string()))?;
            (topology, sim_instant(sim.running_since()))
        };
        let mut metrics = CollectedMetrics::default();
        for s in ctx.client.stage_stats() {
            let mut values = MetricValues::new();
            values.insert(ScalingMetric::Load, s.busiest_replica_busy);
            values.insert(ScalingMetric::NumRecordsIn, s.records_in);
            values.insert(ScalingMetric::NumRecordsOut, s.records_out);
            if let Some(backlog) = s.backlog {
                values.insert(ScalingMetric::Lag, backlog); // what the source still has to read
            }
            metrics.vertex_metrics.insert(s.stage.as_str().into(), values);
        }
        let replicas = ctx.client.stage_stats().iter().map(|s| s.replicas).max().unwrap_or(1);
        for (metric, value) in [
            (ScalingMetric::HeapMemoryUsed, HEAP_USED),
            (ScalingMetric::MetaspaceMemoryUsed, METASPACE_USED),
            (ScalingMetric::ManagedMemoryUsed, 0.0),
            // Acme shares slots like Flink: a worker slot runs one replica of every stage.
            (ScalingMetric::NumTaskSlotsUsed, f64::from(replicas)),
        ] {
            metrics.global_metrics.insert(metric, value);
        }
        Ok(CollectedJobMetrics::new(
            topology,
            running_since,
            // Already in the autoscaler's vocabulary; the cycle keeps the window.
            MetricsSnapshot::Scaling(metrics),
        ))
    }
}

/// 3. Decisions become replica counts.
struct AcmeReplicas;

#[async_trait]
impl ScalingRealizer<String, AcmeContext> for AcmeReplicas {
    async fn realize_parallelism_overrides(
        &self,
        ctx: &AcmeContext,
        overrides: &ParallelismOverrides,
    ) -> Result<(), RealizeError> {
        for (stage, replicas) in overrides {
            ctx.client.set_replicas(stage.as_str(), *replicas);
        }
        Ok(())
    }

    /// Memory tuning's changes, handed over every cycle while tuning is enabled: Acme applies
    /// them to the pipeline's own configuration (removals, then overrides) and rolls the workers
    /// when that changes anything.
    async fn realize_config_overrides(&self, ctx: &AcmeContext, changes: &ConfigChanges) -> Result<(), RealizeError> {
        let tuned = changes.applied_to(&ctx.configuration);
        let memory = |c: &Configuration, key: &str| c.get(key).unwrap_or("(default)").to_owned();
        let before = ctx.client.worker_configuration();
        if ctx.client.set_worker_configuration(tuned.clone()) {
            println!(
                "        Acme rolls the workers: process memory {} -> {}, metaspace {} -> {}, network {}",
                memory(&before, "taskmanager.memory.process.size"),
                memory(&tuned, "taskmanager.memory.process.size"),
                memory(&before, "taskmanager.memory.jvm-metaspace.size"),
                memory(&tuned, "taskmanager.memory.jvm-metaspace.size"),
                memory(&tuned, "taskmanager.memory.network.max"),
            );
        }
        Ok(())
    }
}

/// 4. Reports go to Acme's activity feed (stdout here).
struct AcmeFeed;

#[async_trait]
impl AutoScalerEventHandler<String, AcmeContext> for AcmeFeed {
    async fn handle_event(
        &self,
        ctx: &AcmeContext,
        t: EventType,
        reason: &str,
        msg: &str,
        _: Option<&str>,
        _: Option<Duration>,
    ) {
        let at = ctx.client.0.lock().now().as_secs();
        // The recommendation lists one override per line.
        let msg = msg.replace('\n', "\n        ");
        println!("[{:02}:{:02}] {t} {reason}: {msg}", at / 60, at % 60);
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut conf = example_configuration();
    conf.set("job.autoscaler.memory.tuning.enabled", "true");
    conf.set("taskmanager.memory.process.size", "4 gb");
    let api = AcmeApi(
        SimHandle::new(Simulator::new(workloads::quickstart())?),
        Arc::new(Mutex::new(conf.clone())),
    );
    let autoscaler = JobAutoScalerImpl::new(
        Arc::new(AcmeMetrics),
        Arc::new(InMemoryStateStore::new()),
        Arc::new(AcmeReplicas),
        Arc::new(AcmeFeed),
    )
    .with_clock(api.0.clock());
    let pipelines = AcmePipelines(api.clone());
    for _ in 0..(20 * 6) {
        api.0.advance(Duration::from_secs(10)); // one control-loop tick of simulated time
        for ctx in pipelines.fetch(&conf).await? {
            autoscaler.scale(&ctx).await?;
        }
    }
    for s in api.stage_stats() {
        println!(
            "stage {:6} replicas {} busiest replica {:.0}% busy",
            s.stage,
            s.replicas,
            s.busiest_replica_busy * 100.0
        );
    }
    let workers = api.worker_configuration();
    println!(
        "workers run with taskmanager.memory.process.size = {}",
        workers.get("taskmanager.memory.process.size").unwrap_or("-")
    );
    Ok(())
}
