//! [`RestMetricsCollector`]: collects a job's topology and scaling metrics over Flink's REST API
//! (reference `RestApiMetricsCollector` + `ScalingMetricCollector`).
//!
//! One collection:
//! 1. `GET /jobs/<id>`: when the job last became RUNNING, vertex parallelism / max parallelism /
//!    status / IO counters, and the plan (edges, ship strategies). An empty plan is "not ready".
//! 2. Per source: list its metric names and count Kafka/Pulsar partitions (used by alignment).
//!    A source is listed every cycle until it reports `pendingRecords` (registered lazily), then
//!    every [`SOURCE_METRIC_NAMES_MAX_AGE`] (new partitions show there).
//! 3. Per vertex: which metrics to query, discovered from its metric names and cached per job
//!    (`names.rs`); a missing required metric is [`CollectError::MetricNotFound`], or
//!    [`CollectError::NotReady`] while the job is stabilizing.
//! 4. Per vertex: the aggregated subtask metrics; several names of one kind (two `pendingRecords`)
//!    are merged.
//! 5. The job manager's slot metrics and the task managers' heap/GC/managed/metaspace metrics.
//!    Both describe the cluster, not the job: one answer serves every job of the cluster for
//!    [`CLUSTER_METRICS_MAX_AGE`] (Flink itself refreshes them every
//!    `metrics.fetcher.update-interval`, 10 s by default).
//!
//! Everything cached about a job is dropped when the job switched to RUNNING again (a restart or
//! a rescale), when Flink answers a vertex's query with nothing, and by
//! [`MetricsCollector::cleanup`].
//!
//! The result is a [`MetricsSnapshot::Flink`]: the cycle converts it
//! ([`autoscaler_metrics::collection::convert_to_scaling_metrics`]) against its metric window, and
//! does the windowing, the stabilization bookkeeping and the exclusion of unmeasurable vertices.

mod names;

use crate::context::FlinkRestContext;
use crate::rest::{
    AggregatedMetricValue, Aggregation, FlinkRestClient, JobDetails, JobPlan, PreparedRequest, RestError,
};
use async_trait::async_trait;
use autoscaler_core::{
    CollectError, CollectedJobMetrics, JobAutoScalerContext, MetricsCollector, MetricsSnapshot,
    config::AutoScalerOptions,
};
use autoscaler_metrics::collection::{FlinkMetric, FlinkMetrics, IoMetrics, RawJobMetrics, TaskSlotMetrics};
use autoscaler_metrics::time::add_saturating;
use autoscaler_metrics::{EdgeSpec, JobTopology, ShipStrategy, VertexId, VertexSpec};
use chrono::TimeDelta;
use chrono::{DateTime, Utc};
use names::{VertexMetricNames, count_source_partitions, filter_vertex_metric_names};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

/// How long one answer of a cluster's slot and task-manager metrics serves its jobs.
pub const CLUSTER_METRICS_MAX_AGE: TimeDelta = TimeDelta::seconds(5);
/// How long a source's metric listing is reused once the source reports `pendingRecords`.
pub const SOURCE_METRIC_NAMES_MAX_AGE: TimeDelta = TimeDelta::seconds(60);

/// Task-manager metrics every collection needs.
const TM_METRICS: [(&str, FlinkMetric); 4] = [
    ("Status.JVM.Memory.Heap.Max", FlinkMetric::HeapMemoryMax),
    ("Status.JVM.Memory.Heap.Used", FlinkMetric::HeapMemoryUsed),
    ("Status.Flink.Memory.Managed.Used", FlinkMetric::ManagedMemoryUsed),
    ("Status.JVM.Memory.Metaspace.Used", FlinkMetric::MetaspaceMemoryUsed),
];
/// The GC metric, not reported by every JVM.
const TM_GC_METRIC: (&str, FlinkMetric) = (
    "Status.JVM.GarbageCollector.All.TimeMsPerSecond",
    FlinkMetric::TotalGcTimePerSec,
);

/// Collects metrics of jobs whose context carries a [`FlinkRestClient`] ([`FlinkRestContext`]).
///
/// It caches, per job key, the metric names to query per vertex and when each source was last
/// listed (with its partition count), and per cluster (REST base URL) whether the task managers
/// report GC metrics and the latest slot and task-manager metrics (see the module docs).
///
/// ```
/// use autoscaler_core::{BasicJobContext, MetricsCollector};
/// use autoscaler_realizer::rest::FlinkRestClient;
/// use autoscaler_realizer::RestMetricsCollector;
/// use std::sync::Arc;
///
/// let collector: Arc<dyn MetricsCollector<String, BasicJobContext<String, FlinkRestClient>>> =
///     Arc::new(RestMetricsCollector::<String>::new());
/// # let _ = collector;
/// ```
#[derive(Debug)]
pub struct RestMetricsCollector<K> {
    /// Shared with the cycles reading it: a cycle clones the `Arc`, and one that changes the names
    /// replaces it.
    metric_names: Mutex<HashMap<K, Arc<JobMetricNames>>>,
    /// One copy of each distinct set of names asked of a vertex, shared by every vertex (of any
    /// job) that asks the same: a job's operators mostly report the same metrics, and so do the
    /// jobs of one fleet.
    queries: Mutex<SharedQueries>,
    source_listings: Mutex<HashMap<K, BTreeMap<VertexId, SourceListing>>>,
    clusters: Mutex<HashMap<String, Arc<tokio::sync::Mutex<ClusterMetrics>>>>,
    running_since: Mutex<HashMap<K, DateTime<Utc>>>,
}

/// The names to query per vertex of one job.
type JobMetricNames = BTreeMap<VertexId, CachedVertexNames>;

/// The metric names to query for one vertex, with the query built from them once.
#[derive(Debug, Clone)]
struct CachedVertexNames {
    /// The names and their query, shared with the vertices asking the same ([`SharedQueries`]).
    query: Arc<VertexQuery>,
    /// The request of the vertex's aggregated metrics, built at its first use, with the job id it
    /// was built for.
    /// Boxed: most of a job's vertices are in one node of its map, and a box keeps the node small.
    request: OnceLock<Box<(String, PreparedRequest)>>,
}

/// The metric names asked of a vertex and the query asking them.
#[derive(Debug)]
struct VertexQuery {
    /// Flink metric name -> what it measures.
    names: VertexMetricNames,
    /// `get=<names>` ([`crate::rest::metrics_query`]); empty without names.
    query: String,
}

impl CachedVertexNames {
    fn new(query: Arc<VertexQuery>) -> Self {
        Self {
            query,
            request: OnceLock::new(),
        }
    }

    fn names(&self) -> &VertexMetricNames {
        &self.query.names
    }
}

/// A [`VertexQuery`] found by its names.
#[derive(Debug)]
struct ByNames(Arc<VertexQuery>);

impl std::borrow::Borrow<VertexMetricNames> for ByNames {
    fn borrow(&self) -> &VertexMetricNames {
        &self.0.names
    }
}

impl PartialEq for ByNames {
    fn eq(&self, other: &Self) -> bool {
        self.0.names == other.0.names
    }
}

impl Eq for ByNames {}

impl Hash for ByNames {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.names.hash(state);
    }
}

/// The distinct [`VertexQuery`]s in use.
#[derive(Debug, Default)]
struct SharedQueries {
    by_names: HashSet<ByNames>,
    /// Entries after the last sweep of the unused ones; the next sweep comes at twice as many.
    swept_at: usize,
}

impl SharedQueries {
    /// The query of `names`, shared with every vertex that asks the same names.
    fn share(&mut self, names: VertexMetricNames) -> Arc<VertexQuery> {
        if let Some(query) = self.by_names.get(&names) {
            return Arc::clone(&query.0);
        }
        // Sweeping when the map has doubled keeps it within twice what is in use, at a constant
        // cost per insertion.
        if self.by_names.len() >= 2 * self.swept_at.max(32) {
            self.by_names.retain(|query| Arc::strong_count(&query.0) > 1);
            self.swept_at = self.by_names.len();
        }
        let query = Arc::new(VertexQuery {
            query: crate::rest::metrics_query(names.keys().map(String::as_str), &[]),
            names,
        });
        self.by_names.insert(ByNames(Arc::clone(&query)));
        query
    }
}

/// When a source was last listed, and what the listing said that the cycle needs again.
#[derive(Debug, Clone, Copy)]
struct SourceListing {
    listed_at: DateTime<Utc>,
    partitions: u32,
}

/// What one cluster's jobs share: whether its task managers report GC metrics (probed once) and
/// the latest answer of the slot and task-manager metrics.
#[derive(Debug, Default)]
struct ClusterMetrics {
    has_gc_metrics: Option<bool>,
    latest: Option<(DateTime<Utc>, Option<TaskSlotMetrics>, FlinkMetrics)>,
}

impl<K> Default for RestMetricsCollector<K> {
    fn default() -> Self {
        Self {
            metric_names: Mutex::new(HashMap::new()),
            queries: Mutex::new(SharedQueries::default()),
            source_listings: Mutex::new(HashMap::new()),
            clusters: Mutex::new(HashMap::new()),
            running_since: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Eq + Hash + Clone> RestMetricsCollector<K> {
    /// A collector with empty caches.
    pub fn new() -> Self {
        Self::default()
    }

    /// The cached metric names of `job_key` (vertex -> Flink metric name -> kind); for tests and
    /// diagnostics.
    pub fn cached_metric_names(&self, job_key: &K) -> Option<BTreeMap<VertexId, BTreeMap<String, FlinkMetric>>> {
        let names = lock(&self.metric_names).get(job_key).cloned()?;
        Some(
            names
                .iter()
                .map(|(id, cached)| (id.clone(), cached.names().clone()))
                .collect(),
        )
    }

    fn forget(&self, job_key: &K) {
        lock(&self.metric_names).remove(job_key);
        lock(&self.source_listings).remove(job_key);
        lock(&self.running_since).remove(job_key);
    }

    /// The shared metrics of the cluster `client` talks to.
    fn cluster(&self, client: &FlinkRestClient) -> Arc<tokio::sync::Mutex<ClusterMetrics>> {
        let mut clusters = lock(&self.clusters);
        if let Some(cluster) = clusters.get(client.base_url()) {
            return Arc::clone(cluster);
        }
        Arc::clone(clusters.entry(client.base_url().to_owned()).or_default())
    }

    /// Remembers when the job last switched to RUNNING and drops the job's caches when that moved
    /// since the previous collection (the job restarted or was rescaled: its vertices and metrics
    /// may have changed), as the reference's collector does when it clears a void window.
    async fn note_running_since(&self, job_key: &K, client: &FlinkRestClient, running_since: DateTime<Utc>) {
        let previous = insert(&mut lock(&self.running_since), job_key, running_since);
        if previous.is_some_and(|previous| running_since > previous) {
            tracing::info!(%running_since, "Job updated. Clearing metrics.");
            lock(&self.metric_names).remove(job_key);
            lock(&self.source_listings).remove(job_key);
            // The job's task managers may be new ones: probe their GC metrics again.
            let cluster = self.cluster(client);
            cluster.lock().await.has_gc_metrics = None;
        }
    }

    /// The metric names of the sources to (re)list this cycle: a source never listed (or whose
    /// caches were dropped), one without `pendingRecords` yet, or one listed
    /// [`SOURCE_METRIC_NAMES_MAX_AGE`] ago. Returns the fresh listings and the partition count of
    /// every source.
    async fn list_sources(
        &self,
        job_key: &K,
        client: &FlinkRestClient,
        job_id: &str,
        sources: &[VertexId],
        now: DateTime<Utc>,
    ) -> Result<(BTreeMap<VertexId, BTreeSet<String>>, BTreeMap<VertexId, u32>), CollectError> {
        // The previous listing of each source, as the cache holds it now.
        let listings: Vec<Option<SourceListing>> = {
            let all = lock(&self.source_listings);
            let job = all.get(job_key);
            sources
                .iter()
                .map(|id| job.and_then(|listings| listings.get(id)).copied())
                .collect()
        };
        let names = lock(&self.metric_names).get(job_key).cloned();
        let mut listed = BTreeMap::new();
        let mut partitions = BTreeMap::new();
        let mut updated = BTreeMap::new();
        for (id, listing) in sources.iter().zip(listings) {
            let reported_pending = names
                .as_ref()
                .and_then(|n| n.get(id))
                .is_some_and(|n| n.names().values().any(|m| *m == FlinkMetric::PendingRecords));
            match listing {
                Some(listing)
                    if reported_pending
                        && now >= listing.listed_at
                        && now - listing.listed_at < SOURCE_METRIC_NAMES_MAX_AGE =>
                {
                    partitions.insert(id.clone(), listing.partitions);
                    updated.insert(id.clone(), listing);
                }
                _ => {
                    let all = list_metric_names(client, job_id, id).await?;
                    let count = count_source_partitions(all.iter().map(String::as_str));
                    partitions.insert(id.clone(), count);
                    updated.insert(
                        id.clone(),
                        SourceListing {
                            listed_at: now,
                            partitions: count,
                        },
                    );
                    listed.insert(id.clone(), all);
                }
            }
        }
        insert(&mut lock(&self.source_listings), job_key, updated);
        Ok((listed, partitions))
    }

    /// The names to query per non-finished vertex. All vertices are listed when the cached vertex set
    /// differs from the topology's, otherwise only the sources listed this cycle are filtered
    /// again (see [`Self::list_sources`]). As in the reference, finished vertices are dropped from
    /// the cache, so while one is finished every vertex is listed each cycle.
    async fn filtered_metric_names(
        &self,
        job_key: &K,
        client: &FlinkRestClient,
        job_id: &str,
        topology: &JobTopology,
        source_names: &BTreeMap<VertexId, BTreeSet<String>>,
    ) -> Result<Arc<JobMetricNames>, CollectError> {
        let cached = lock(&self.metric_names).get(job_key).cloned();
        // The topology's ids are distinct, so this is "the cached ids are the topology's".
        let vertices = topology.vertices();
        let (mut names, only_sources) = match cached {
            Some(c) if c.len() == vertices.len() && vertices.iter().all(|v| c.contains_key(&v.id)) => (c, true),
            _ => (Arc::new(BTreeMap::new()), false),
        };
        for vertex in topology.vertices() {
            if vertex.finished || (only_sources && !source_names.contains_key(&vertex.id)) {
                continue;
            }
            let fetched;
            let all = match source_names.get(&vertex.id) {
                Some(listed) => listed,
                None => {
                    fetched = list_metric_names(client, job_id, &vertex.id).await?;
                    &fetched
                }
            };
            // Its log lines name the vertex by id and name.
            let span = tracing::error_span!("vertex", vertex = %vertex.id, vertex_name = vertex.name.as_deref());
            let filtered = span.in_scope(|| filter_vertex_metric_names(&vertex.id, all, vertex.is_source()))?;
            // Copied (from the cache's) only when the names changed.
            if names.get(&vertex.id).is_none_or(|cached| *cached.names() != filtered) {
                let query = lock(&self.queries).share(filtered);
                Arc::make_mut(&mut names).insert(vertex.id.clone(), CachedVertexNames::new(query));
            }
        }
        let keep = |id: &VertexId| topology.get(id.as_str()).is_some_and(|v| !v.finished);
        if !names.keys().all(keep) {
            Arc::make_mut(&mut names).retain(|id, _| keep(id));
        }
        insert(&mut lock(&self.metric_names), job_key, Arc::clone(&names));
        Ok(names)
    }

    /// Aggregated subtask metrics of every vertex in `names`, merged per [`FlinkMetric`].
    async fn vertex_metrics(
        &self,
        job_key: &K,
        client: &FlinkRestClient,
        job_id: &str,
        names: &JobMetricNames,
    ) -> Result<BTreeMap<VertexId, FlinkMetrics>, CollectError> {
        let mut out = BTreeMap::new();
        for (vertex, cached) in names {
            let values = if cached.query.query.is_empty() {
                // Asks nothing (once the ids are checked).
                client
                    .vertex_aggregated_metrics(job_id, vertex.as_str(), &[], &[])
                    .await
            } else {
                // The request built for this job on this client, else a new one (kept if none was).
                let built;
                let request = match cached.request.get().map(|kept| &**kept) {
                    Some((id, request)) if id == job_id && client.prepared_here(request) => request,
                    _ => {
                        built = client
                            .prepare_vertex_aggregated_metrics(job_id, vertex.as_str(), &cached.query.query)
                            .map_err(failed)?;
                        let _ = cached.request.set(Box::new((job_id.to_owned(), built.clone())));
                        &built
                    }
                };
                client.get_prepared(request).await
            }
            .map_err(failed)?;
            if values.is_empty() && !cached.names().is_empty() {
                // Flink answers [] for all names when one of them is gone (a lazily registered metric
                // that disappeared, a restart in between). Relist next cycle; this cycle the vertex
                // has no metrics, so it is not scaled.
                let query: Vec<&str> = cached.names().keys().map(String::as_str).collect();
                tracing::warn!(%vertex, names = ?query, "Flink returned no metrics for the vertex; relisting its metric names next cycle");
                lock(&self.metric_names).remove(job_key);
                lock(&self.source_listings).remove(job_key);
            }
            out.insert(vertex.clone(), merge_by_metric(cached.names(), &values));
        }
        Ok(out)
    }

    /// The cluster's slot and task-manager metrics, asked at most once per
    /// [`CLUSTER_METRICS_MAX_AGE`] for all its jobs (the jobs waiting meanwhile reuse the answer).
    /// Whether GC metrics exist is probed once per cluster (Flink answers nothing at all when one
    /// requested name is missing); if even the base set is missing the probe is forgotten and the
    /// collection fails, to be retried next cycle.
    async fn cluster_metrics(
        &self,
        client: &FlinkRestClient,
        now: DateTime<Utc>,
    ) -> Result<(Option<TaskSlotMetrics>, FlinkMetrics), CollectError> {
        let cluster = self.cluster(client);
        let mut cluster = cluster.lock().await;
        if let Some((at, slots, task_managers)) = &cluster.latest
            && now >= *at
            && now - *at < CLUSTER_METRICS_MAX_AGE
        {
            return Ok((*slots, task_managers.clone()));
        }
        let slots = task_slot_metrics(client).await?;
        let with_gc: Vec<(&str, FlinkMetric)> = TM_METRICS.iter().copied().chain([TM_GC_METRIC]).collect();
        let has_gc = match cluster.has_gc_metrics {
            Some(has_gc) => has_gc,
            None => {
                let probe = query_task_manager_metrics(client, &with_gc).await?;
                let found = !probe.is_empty();
                if !found {
                    tracing::debug!("No GC metrics found, using only heap information");
                }
                cluster.has_gc_metrics = Some(found);
                found
            }
        };
        let wanted: &[(&str, FlinkMetric)] = if has_gc { &with_gc } else { &TM_METRICS };
        let metrics = query_task_manager_metrics(client, wanted).await?;
        if metrics.is_empty() {
            cluster.has_gc_metrics = None;
            cluster.latest = None;
            return Err(CollectError::Failed("Missing required TM metrics".to_owned()));
        }
        cluster.latest = Some((now, slots, metrics.clone()));
        Ok((slots, metrics))
    }
}

#[async_trait]
impl<K, Ctx> MetricsCollector<K, Ctx> for RestMetricsCollector<K>
where
    K: Eq + Hash + Clone + Send + Sync,
    Ctx: JobAutoScalerContext<K> + FlinkRestContext,
{
    async fn collect(
        &self,
        ctx: &Ctx,
        options: &AutoScalerOptions,
        now: DateTime<Utc>,
    ) -> Result<CollectedJobMetrics, CollectError> {
        let job_key = ctx.job_key();
        let job_id = ctx
            .job_id()
            .ok_or_else(|| CollectError::NotReady("the job has no Flink job id yet".to_owned()))?;
        let client = ctx.rest_client();

        let details = client.job_details(job_id).await.map_err(|e| job_error(job_id, e))?;
        let running_since = details.running_since().ok_or_else(|| {
            CollectError::Failed(format!("Unable to find when job {job_id} was switched to RUNNING."))
        })?;
        self.note_running_since(job_key, client, running_since).await;

        let fetched;
        let plan = match &details.plan {
            Some(plan) => plan,
            None => {
                fetched = client.job_plan(job_id).await.map_err(|e| job_error(job_id, e))?;
                &fetched
            }
        };
        if plan.nodes.is_empty() {
            return Err(CollectError::NotReady("job is not ready yet".to_owned()));
        }
        // Sources are relisted for lazily registered pendingRecords and new partitions.
        let sources: Vec<VertexId> = plan
            .nodes
            .iter()
            .filter(|n| n.inputs.is_empty())
            .map(|n| VertexId::new(&n.id))
            .collect();
        let (source_names, partitions) = self.list_sources(job_key, client, job_id, &sources, now).await?;
        let (topology, io_metrics) = job_topology(&details, plan, &partitions)?;

        let stabilizing = now < add_saturating(running_since, options.stabilization_interval);
        let names = match self
            .filtered_metric_names(job_key, client, job_id, &topology, &source_names)
            .await
        {
            Err(e @ CollectError::MetricNotFound { .. }) if stabilizing => {
                return Err(CollectError::NotReady(e.to_string()));
            }
            other => other?,
        };

        let vertex_metrics = self.vertex_metrics(job_key, client, job_id, &names).await?;
        let (task_slots, task_manager_metrics) = self.cluster_metrics(client, now).await?;
        let raw = RawJobMetrics {
            vertex_metrics,
            io_metrics,
            task_slots,
            task_manager_metrics,
        };
        Ok(CollectedJobMetrics::new(
            topology,
            running_since,
            MetricsSnapshot::Flink(raw),
        ))
    }

    async fn cleanup(&self, job_key: &K) {
        self.forget(job_key);
    }
}

/// Builds the topology from the plan (vertices, edges, ship strategies, parallelism) and the job
/// details' vertices (max parallelism, slot sharing group, FINISHED), with the IO counters per vertex
/// (reference `getJobTopology` / `JobTopology.fromJsonPlan`). A parallelism above the max parallelism
/// is accepted, as in the reference.
fn job_topology(
    details: &JobDetails,
    plan: &JobPlan,
    source_partitions: &BTreeMap<VertexId, u32>,
) -> Result<(JobTopology, BTreeMap<VertexId, IoMetrics>), CollectError> {
    let mut vertices = Vec::with_capacity(plan.nodes.len());
    let mut edges = Vec::new();
    let mut io_metrics = BTreeMap::new();
    for node in &plan.nodes {
        let id = VertexId::new(&node.id);
        let vertex = details.vertex(&node.id).ok_or_else(|| {
            CollectError::Failed(format!(
                "vertex {} of the plan is missing from the job details",
                node.id
            ))
        })?;
        let mut spec = VertexSpec::new(
            id.clone(),
            positive(node.parallelism, "parallelism", &node.id)?,
            positive(vertex.max_parallelism, "max parallelism", &node.id)?,
        );
        spec.name = Some(vertex.name.clone());
        spec.finished = vertex.is_finished();
        spec.slot_sharing_group = vertex.slot_sharing_group_id.clone();
        if let Some(partitions) = source_partitions.get(&id) {
            spec.num_source_partitions = *partitions;
        }
        let io = vertex.metrics.map(IoMetrics::from).unwrap_or_default();
        io_metrics.insert(id.clone(), if spec.finished { IoMetrics::FINISHED } else { io });
        vertices.push(spec);
        for input in &node.inputs {
            edges.push(EdgeSpec::new(
                input.id.as_str(),
                id.clone(),
                ShipStrategy::parse_lenient(&input.ship_strategy),
            ));
        }
    }
    let topology = JobTopology::new_lenient(vertices, edges)
        .map_err(|e| CollectError::Failed(format!("the job graph is not usable: {e}")))?;
    Ok((topology, io_metrics))
}

fn positive(value: i64, what: &str, vertex: &str) -> Result<u32, CollectError> {
    u32::try_from(value)
        .ok()
        .filter(|v| *v > 0)
        .ok_or_else(|| CollectError::Failed(format!("vertex {vertex} reports {what} {value}")))
}

async fn list_metric_names(
    client: &FlinkRestClient,
    job_id: &str,
    vertex: &VertexId,
) -> Result<BTreeSet<String>, CollectError> {
    let names = client
        .vertex_metric_names(job_id, vertex.as_str())
        .await
        .map_err(failed)?;
    Ok(names.into_iter().collect())
}

/// Groups the answer by kind, merging several names of one kind.
fn merge_by_metric(names: &VertexMetricNames, values: &[AggregatedMetricValue]) -> FlinkMetrics {
    let mut out = FlinkMetrics::new();
    for value in values {
        let Some(&metric) = names.get(&value.id) else {
            continue;
        };
        let aggregates = value.aggregates();
        out.entry(metric)
            .and_modify(|m| *m = m.merge(&aggregates))
            .or_insert(aggregates);
    }
    out
}

async fn query_task_manager_metrics(
    client: &FlinkRestClient,
    wanted: &[(&str, FlinkMetric)],
) -> Result<FlinkMetrics, CollectError> {
    let names: Vec<&str> = wanted.iter().map(|(n, _)| *n).collect();
    let kinds: VertexMetricNames = wanted.iter().map(|(n, m)| ((*n).to_owned(), *m)).collect();
    let values = client
        .taskmanagers_aggregated_metrics(&names, &[Aggregation::Min, Aggregation::Max, Aggregation::Avg])
        .await
        .map_err(failed)?;
    Ok(merge_by_metric(&kinds, &values))
}

/// `taskSlotsTotal` and `taskSlotsAvailable`; `None` when either is missing or not a number (the
/// reference then leaves `NUM_TASK_SLOTS_USED` out).
async fn task_slot_metrics(client: &FlinkRestClient) -> Result<Option<TaskSlotMetrics>, CollectError> {
    let values = client
        .jobmanager_metrics(&["taskSlotsTotal", "taskSlotsAvailable"])
        .await
        .map_err(failed)?;
    let value = |name: &str| values.iter().find(|v| v.id == name).and_then(|v| v.as_f64());
    Ok(match (value("taskSlotsTotal"), value("taskSlotsAvailable")) {
        (Some(total), Some(available)) => Some(TaskSlotMetrics { total, available }),
        _ => {
            tracing::debug!("Slot metrics and registered task managers not available");
            None
        }
    })
}

/// A failed REST call, kept as the cause (the message is "metric collection failed: " and the
/// [`RestError`]'s).
fn failed(e: RestError) -> CollectError {
    CollectError::platform(e)
}

/// A job that vanished between listing and collection (cancelled, finished and purged) is not an
/// error worth an event: the next job list drops it and the control loop cleans it up.
fn job_error(job_id: &str, e: RestError) -> CollectError {
    if e.is_job_not_found() {
        CollectError::NotReady(format!("job {job_id} is no longer known to the cluster: {e}"))
    } else {
        failed(e)
    }
}

/// Sets `map[key]` to `value` (cloning the key only when it is new); the previous value.
fn insert<K: Eq + Hash + Clone, V>(map: &mut HashMap<K, V>, key: &K, value: V) -> Option<V> {
    match map.get_mut(key) {
        Some(slot) => Some(std::mem::replace(slot, value)),
        None => map.insert(key.clone(), value),
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(of: &[&str]) -> VertexMetricNames {
        of.iter()
            .map(|n| ((*n).to_owned(), FlinkMetric::BusyTimePerSec))
            .collect()
    }

    #[test]
    fn vertices_asking_the_same_names_share_one_query() {
        let mut shared = SharedQueries::default();
        let a = shared.share(names(&["busyTimeMsPerSecond", "numRecordsIn"]));
        let b = shared.share(names(&["busyTimeMsPerSecond", "numRecordsIn"]));
        let c = shared.share(names(&["busyTimeMsPerSecond"]));
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(
            a.query,
            crate::rest::metrics_query(["busyTimeMsPerSecond", "numRecordsIn"], &[])
        );
        assert_eq!(shared.by_names.len(), 2);
    }

    #[test]
    fn queries_no_vertex_asks_are_swept() {
        let mut shared = SharedQueries::default();
        let kept = shared.share(names(&["kept"]));
        // Many queries asked once and dropped: the map never holds more than twice what is in
        // use (at least 64).
        for i in 0..1_000 {
            let _ = shared.share(names(&[&format!("gone-{i}")]));
            assert!(shared.by_names.len() <= 64, "{} entries", shared.by_names.len());
        }
        assert!(
            Arc::ptr_eq(&kept, &shared.share(names(&["kept"]))),
            "one in use survives the sweeps"
        );
    }
}
