//! [`RestMetricsCollector`]: collects a job's topology and scaling metrics over Flink's REST API
//! (reference `RestApiMetricsCollector` + `ScalingMetricCollector`).
//!
//! One collection:
//! 1. `GET /jobs/<id>`: when the job last became RUNNING, vertex parallelism / max parallelism /
//!    status / IO counters, and the plan (edges, ship strategies). An empty plan is "not ready".
//!    The answer is read in place (the strings borrowed from its body, the plan's descriptions
//!    skipped; in one pass, by hand, when it has the plain shape Flink writes), and the previous cycle's topology is handed out again while the answer describes
//!    exactly the same graph; the IO counters are this cycle's.
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
//! a rescale) and by [`MetricsCollector::cleanup`]; the metric names and source listings also when
//! Flink answers a vertex's query with nothing.
//!
//! The result is a [`MetricsSnapshot::Flink`]: the cycle converts it
//! ([`autoscaler_metrics::collection::convert_to_scaling_metrics`]) against its metric window, and
//! does the windowing, the stabilization bookkeeping and the exclusion of unmeasurable vertices.

mod names;

use crate::context::FlinkRestContext;
use crate::rest::{
    AggregatedMetricValueView, Aggregation, FlinkRestClient, JobDetailsView, JobPlanView, JobVertexView, PlanNodeView,
    PreparedRequest, RestError,
};
use async_trait::async_trait;
use autoscaler_core::{
    CollectError, CollectedJobMetrics, JobAutoScalerContext, MetricsCollector, MetricsSnapshot,
    config::AutoScalerOptions,
};
use autoscaler_metrics::collection::{
    AggregatedMetric, FlinkMetric, FlinkMetrics, IoMetrics, RawJobMetrics, TaskSlotMetrics,
};
use autoscaler_metrics::time::add_saturating;
use autoscaler_metrics::{EdgeSpec, JobTopology, ShipStrategy, VertexId, VertexSpec};
use chrono::TimeDelta;
use chrono::{DateTime, Utc};
use names::{VertexMetricNames, count_source_partitions, filter_vertex_metric_names};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

/// How long one answer of a cluster's slot and task-manager metrics serves its jobs.
pub const CLUSTER_METRICS_MAX_AGE: TimeDelta = TimeDelta::seconds(5);
/// How long a source's metric listing is reused once the source reports `pendingRecords`.
pub const SOURCE_METRIC_NAMES_MAX_AGE: TimeDelta = TimeDelta::seconds(60);

/// The aggregates asked of a vertex's metrics: all but `skew`, which no rule of the evaluation
/// reads (the reference asks for all five by leaving `agg` out). Each answer is a fifth shorter
/// to send and to read.
const VERTEX_AGGREGATIONS: [Aggregation; 4] = [Aggregation::Min, Aggregation::Max, Aggregation::Avg, Aggregation::Sum];

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
/// It caches, per job key, the metric names to query per vertex, when each source was last listed
/// (with its partition count) and the job's topology, and per cluster (REST base URL) whether the
/// task managers report GC metrics and the latest slot and task-manager metrics (see the module
/// docs).
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
///
/// Its maps hash with foldhash (seeded per process): each is looked up once or more per job and
/// cycle, where SipHash costs more than the rest of a lookup.
#[derive(Debug)]
pub struct RestMetricsCollector<K> {
    /// Shared with the cycles reading it: a cycle clones the `Arc`, and one that changes the names
    /// replaces it.
    metric_names: Mutex<foldhash::HashMap<K, Arc<JobMetricNames>>>,
    /// One copy of each distinct set of names asked of a vertex, shared by every vertex (of any
    /// job) that asks the same: a job's operators mostly report the same metrics, and so do the
    /// jobs of one fleet.
    queries: Mutex<SharedQueries>,
    source_listings: Mutex<foldhash::HashMap<K, BTreeMap<VertexId, SourceListing>>>,
    clusters: Mutex<foldhash::HashMap<String, Arc<tokio::sync::Mutex<ClusterMetrics>>>>,
    running_since: Mutex<foldhash::HashMap<K, DateTime<Utc>>>,
    /// The topology each job's last collection handed out, handed out again while the job details
    /// describe the same graph ([`describes`]).
    topologies: Mutex<foldhash::HashMap<K, JobTopology>>,
    /// Each job's request of its details, built once, with the job id it was built for.
    details_requests: Mutex<foldhash::HashMap<K, Arc<(String, PreparedRequest)>>>,
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
    /// `get=<names>&agg=min,max,avg,sum` ([`crate::rest::metrics_query`], [`VERTEX_AGGREGATIONS`]);
    /// empty without names.
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
            query: crate::rest::metrics_query(names.keys().map(String::as_str), &VERTEX_AGGREGATIONS),
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
            metric_names: Mutex::new(foldhash::HashMap::default()),
            queries: Mutex::new(SharedQueries::default()),
            source_listings: Mutex::new(foldhash::HashMap::default()),
            clusters: Mutex::new(foldhash::HashMap::default()),
            running_since: Mutex::new(foldhash::HashMap::default()),
            topologies: Mutex::new(foldhash::HashMap::default()),
            details_requests: Mutex::new(foldhash::HashMap::default()),
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
        lock(&self.topologies).remove(job_key);
        lock(&self.details_requests).remove(job_key);
    }

    /// The request of the job's details: the one built for this job id on this client, else a new
    /// one, kept.
    fn details_request(
        &self,
        job_key: &K,
        client: &FlinkRestClient,
        job_id: &str,
    ) -> Result<Arc<(String, PreparedRequest)>, RestError> {
        if let Some(kept) = lock(&self.details_requests).get(job_key)
            && kept.0 == job_id
            && client.prepared_here(&kept.1)
        {
            return Ok(Arc::clone(kept));
        }
        let built = Arc::new((job_id.to_owned(), client.job_details_request(job_id)?));
        insert(&mut lock(&self.details_requests), job_key, Arc::clone(&built));
        Ok(built)
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
            lock(&self.topologies).remove(job_key);
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
        let vertices = topology.vertices();
        // Whether the cached ids are the topology's: both in id order, compared in step.
        let same_ids = |c: &JobMetricNames| {
            c.len() == vertices.len() && c.keys().zip(topology.id_order()).all(|(id, &i)| *id == vertices[i].id)
        };
        let (mut names, only_sources) = match cached {
            Some(c) if same_ids(&c) => (c, true),
            _ => (Arc::new(BTreeMap::new()), false),
        };
        if only_sources && source_names.is_empty() && !vertices.iter().any(|v| v.finished) {
            // Nothing listed this cycle and nothing to drop: the cached names are this cycle's,
            // already in the cache (most cycles of a running job).
            return Ok(names);
        }
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
            // The answer's body, which the values read below borrow their names from.
            let mut body = Vec::new();
            let values: Vec<AggregatedMetricValueView<'_>> = if cached.query.query.is_empty() {
                // Asks nothing (once the ids are checked).
                client
                    .vertex_aggregated_metrics(job_id, vertex.as_str(), &[], &[])
                    .await
                    .map(|_| Vec::new())
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
                client
                    .get_read(request, &mut body, crate::rest::read_aggregated_metrics)
                    .await
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
            out.insert(
                vertex.clone(),
                merge_by_metric(cached.names(), values.iter().map(|v| (&*v.id, v.aggregates()))),
            );
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

        // The details (and the plan, if fetched apart) borrow their strings from these.
        let (mut details_body, mut plan_body) = (Vec::new(), Vec::new());
        let request = self
            .details_request(job_key, client, job_id)
            .map_err(|e| job_error(job_id, e))?;
        let details = client
            .job_details_view(&request.1, &mut details_body)
            .await
            .map_err(|e| job_error(job_id, e))?;
        let running_since = details.running_since().ok_or_else(|| {
            CollectError::Failed(format!("Unable to find when job {job_id} was switched to RUNNING."))
        })?;
        self.note_running_since(job_key, client, running_since).await;

        let fetched;
        let plan = match &details.plan {
            Some(plan) => plan,
            None => {
                fetched = client
                    .job_plan_view(job_id, &mut plan_body)
                    .await
                    .map_err(|e| job_error(job_id, e))?;
                &fetched
            }
        };
        if plan.nodes.is_empty() {
            return Err(CollectError::NotReady("job is not ready yet".to_owned()));
        }
        let cached = lock(&self.topologies).get(job_key).cloned();
        // Sources are relisted for lazily registered pendingRecords and new partitions.
        let sources: Vec<VertexId> = plan
            .nodes
            .iter()
            .filter(|n| n.inputs.is_empty())
            .map(|n| vertex_id(cached.as_ref(), &n.id))
            .collect();
        let (source_names, partitions) = self.list_sources(job_key, client, job_id, &sources, now).await?;
        let (topology, io_metrics) = job_topology(&details, plan, &partitions, cached)?;
        insert(&mut lock(&self.topologies), job_key, topology.clone());

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

/// The job's topology (reference `getJobTopology` / `JobTopology.fromJsonPlan`) with the IO
/// counters per vertex: `cached` when the details describe exactly its graph ([`describes`]),
/// otherwise built anew ([`build_topology`]). The IO counters are always this cycle's.
fn job_topology(
    details: &JobDetailsView<'_>,
    plan: &JobPlanView<'_>,
    source_partitions: &BTreeMap<VertexId, u32>,
    cached: Option<JobTopology>,
) -> Result<(JobTopology, BTreeMap<VertexId, IoMetrics>), CollectError> {
    let nodes: Vec<PlannedVertex<'_, '_>> = plan.nodes.iter().map(|node| (node, details.vertex(&node.id))).collect();
    let topology = match cached {
        Some(cached) if describes(&cached, &nodes, source_partitions) => cached,
        cached => build_topology(&nodes, source_partitions, cached.as_ref())?,
    };
    // Either way the topology's vertices are the plan's nodes, in order.
    let io_metrics = topology
        .vertices()
        .iter()
        .zip(&nodes)
        .map(|(built, (_, vertex))| {
            let io = if built.finished {
                IoMetrics::FINISHED
            } else {
                vertex.and_then(|v| v.metrics).map(IoMetrics::from).unwrap_or_default()
            };
            (built.id.clone(), io)
        })
        .collect();
    Ok((topology, io_metrics))
}

/// A node of the plan with its vertex of the job details (`None` when the details lack it).
type PlannedVertex<'p, 'a> = (&'p PlanNodeView<'a>, Option<&'p JobVertexView<'a>>);

/// Builds the topology from the plan (vertices, edges, ship strategies, parallelism) and the job
/// details' vertices (name, max parallelism, slot sharing group, FINISHED). A parallelism above the
/// max parallelism is accepted, as in the reference. Ids already in `cached` are shared with it.
fn build_topology(
    nodes: &[PlannedVertex<'_, '_>],
    source_partitions: &BTreeMap<VertexId, u32>,
    cached: Option<&JobTopology>,
) -> Result<JobTopology, CollectError> {
    let mut vertices = Vec::with_capacity(nodes.len());
    let mut edges = Vec::new();
    for &(node, vertex) in nodes {
        let vertex = vertex.ok_or_else(|| {
            CollectError::Failed(format!(
                "vertex {} of the plan is missing from the job details",
                node.id
            ))
        })?;
        let id = vertex_id(cached, &node.id);
        let mut spec = VertexSpec::new(
            id.clone(),
            positive(node.parallelism, "parallelism", &node.id)?,
            positive(vertex.max_parallelism, "max parallelism", &node.id)?,
        );
        spec.name = Some(vertex.name.to_string());
        spec.finished = vertex.is_finished();
        spec.slot_sharing_group = vertex.slot_sharing_group_id.as_deref().map(str::to_owned);
        if let Some(partitions) = source_partitions.get(&id) {
            spec.num_source_partitions = *partitions;
        }
        vertices.push(spec);
        for input in &node.inputs {
            edges.push(EdgeSpec::new(
                vertex_id(cached, &input.id),
                id.clone(),
                ShipStrategy::parse_lenient(&input.ship_strategy),
            ));
        }
    }
    JobTopology::new_lenient(vertices, edges)
        .map_err(|e| CollectError::Failed(format!("the job graph is not usable: {e}")))
}

/// Whether `topology` is the one [`build_topology`] builds from `nodes`: the same vertices in the
/// same order, each with the same id, name, parallelism, max parallelism, FINISHED flag, slot sharing
/// group and source partitions, and the same inputs in the same order with the same ship strategies.
/// Compared in place, without building anything; every field `build_topology` sets is compared here.
/// Details that would fail to build never describe a topology (it was built, so it is valid).
fn describes(
    topology: &JobTopology,
    nodes: &[PlannedVertex<'_, '_>],
    source_partitions: &BTreeMap<VertexId, u32>,
) -> bool {
    let vertices = topology.vertices();
    vertices.len() == nodes.len()
        && vertices.iter().zip(nodes).all(|(built, &(node, vertex))| {
            vertex.is_some_and(|vertex| {
                built.id.as_str() == node.id
                    && i64::from(built.parallelism.get()) == node.parallelism
                    && i64::from(built.max_parallelism.get()) == vertex.max_parallelism
                    && built.name.as_deref() == Some(&*vertex.name)
                    && built.finished == vertex.is_finished()
                    && built.slot_sharing_group.as_deref() == vertex.slot_sharing_group_id.as_deref()
                    && built.num_source_partitions == source_partitions.get(&*node.id).copied().unwrap_or(0)
                    && built.inputs.len() == node.inputs.len()
                    && built.inputs.iter().zip(&node.inputs).all(|(&(from, strategy), input)| {
                        vertices.get(from).is_some_and(|from| from.id.as_str() == input.id)
                            && strategy == ShipStrategy::parse_lenient(&input.ship_strategy)
                    })
            })
        })
}

/// The vertex id `id`: the `cached` topology's (sharing its text) when it has that vertex.
fn vertex_id(cached: Option<&JobTopology>, id: &str) -> VertexId {
    cached
        .and_then(|topology| topology.get(id))
        .map_or_else(|| VertexId::new(id), |vertex| vertex.id.clone())
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
fn merge_by_metric<'v>(
    names: &VertexMetricNames,
    values: impl IntoIterator<Item = (&'v str, AggregatedMetric)>,
) -> FlinkMetrics {
    let mut out = FlinkMetrics::new();
    for (id, aggregates) in values {
        let Some(&metric) = names.get(id) else {
            continue;
        };
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
    Ok(merge_by_metric(
        &kinds,
        values.iter().map(|v| (v.id.as_str(), v.aggregates())),
    ))
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
fn insert<K: Eq + Hash + Clone, V>(map: &mut foldhash::HashMap<K, V>, key: &K, value: V) -> Option<V> {
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
    use serde_json::{Value, json};

    /// The details of a small job: `source` -HASH-> `keyed` -FORWARD-> `sink`, one slot sharing
    /// group, the plan included.
    fn job() -> Value {
        json!({
            "jid": "j", "name": "small", "state": "RUNNING",
            "timestamps": {"RUNNING": 1_700_000_000_000_i64, "CREATED": 1_699_999_999_000_i64},
            "vertices": [
                {"id": "source", "name": "Source: numbers", "maxParallelism": 128, "parallelism": 2,
                 "status": "RUNNING", "slotSharingGroupId": "default",
                 "metrics": {"read-records": 0, "write-records": 1000, "accumulated-busy-time": 250.0}},
                {"id": "keyed", "name": "keyed \"sum\"", "maxParallelism": 128, "parallelism": 4,
                 "status": "RUNNING", "slotSharingGroupId": "default",
                 "metrics": {"read-records": 1000, "write-records": 500, "accumulated-busy-time": "NaN"}},
                {"id": "sink", "name": "Sink: print", "maxParallelism": 64, "parallelism": 1,
                 "status": "RUNNING", "slotSharingGroupId": "default",
                 "metrics": {"read-records": 500, "write-records": 0, "accumulated-busy-time": 10.0}}
            ],
            "plan": {"jid": "j", "nodes": [
                {"id": "source", "parallelism": 2, "description": "Source: numbers<br/>", "inputs": []},
                {"id": "keyed", "parallelism": 4, "description": "keyed<br/>",
                 "inputs": [{"num": 0, "id": "source", "ship_strategy": "HASH", "exchange": "pipelined_bounded"}]},
                {"id": "sink", "parallelism": 1, "description": "Sink: print<br/>",
                 "inputs": [{"num": 0, "id": "keyed", "ship_strategy": "FORWARD", "exchange": "pipelined_bounded"}]}
            ]}
        })
    }

    /// The source has 8 partitions.
    fn partitions() -> BTreeMap<VertexId, u32> {
        BTreeMap::from([(VertexId::new("source"), 8)])
    }

    /// The topology and IO counters of `details` (a body) with `cached` from a previous cycle.
    fn topology_of(
        details: &str,
        partitions: &BTreeMap<VertexId, u32>,
        cached: Option<JobTopology>,
    ) -> Result<(JobTopology, BTreeMap<VertexId, IoMetrics>), CollectError> {
        let view: JobDetailsView<'_> = serde_json::from_str(details).expect("the details parse");
        let plan = view.plan.as_ref().expect("the details have the plan");
        job_topology(&view, plan, partitions, cached)
    }

    /// Whether `a` and `b` are one topology handed out twice (not two equal ones): both are alive,
    /// so two builds cannot share the address of their vertices.
    fn same_graph(a: &JobTopology, b: &JobTopology) -> bool {
        std::ptr::eq(a.vertices().as_ptr(), b.vertices().as_ptr())
    }

    fn failure(result: Result<(JobTopology, BTreeMap<VertexId, IoMetrics>), CollectError>) -> String {
        match result {
            Err(CollectError::Failed(message)) => message,
            other => panic!("expected a failed collection, got {other:?}"),
        }
    }

    #[test]
    fn the_topology_is_built_from_the_plan_and_the_vertices() {
        let (topology, io) = topology_of(&job().to_string(), &partitions(), None).expect("builds");
        let expected = JobTopology::new_lenient(
            vec![
                VertexSpec::new("source", 2, 128)
                    .with_name("Source: numbers")
                    .with_slot_sharing_group("default")
                    .with_source_partitions(8),
                VertexSpec::new("keyed", 4, 128)
                    .with_name("keyed \"sum\"")
                    .with_slot_sharing_group("default"),
                VertexSpec::new("sink", 1, 64)
                    .with_name("Sink: print")
                    .with_slot_sharing_group("default"),
            ],
            vec![
                EdgeSpec::new("source", "keyed", ShipStrategy::Hash),
                EdgeSpec::new("keyed", "sink", ShipStrategy::Forward),
            ],
        )
        .expect("valid");
        assert_eq!(topology, expected);
        assert_eq!(io.len(), 3);
        assert_eq!(
            (io["source"].num_records_out, io["source"].accumulated_busy_time),
            (1000, 250.0)
        );
        assert!(io["keyed"].accumulated_busy_time.is_nan());
        assert_eq!(io["sink"].num_records_in, 500);
    }

    #[test]
    fn an_unchanged_graph_hands_out_the_cached_topology_with_this_cycles_io() {
        let (cached, _) = topology_of(&job().to_string(), &partitions(), None).expect("builds");
        let mut next = job();
        next["vertices"][1]["metrics"] =
            json!({"read-records": 3000, "write-records": 1500, "accumulated-busy-time": 900.0});
        next["vertices"][2]["metrics"] =
            json!({"read-records": 1500, "write-records": 0, "accumulated-busy-time": 30.0});
        // The job's name, its timestamps and the plan's descriptions are not the graph.
        next["name"] = json!("renamed");
        next["timestamps"]["RUNNING"] = json!(1_700_000_100_000_i64);
        next["plan"]["nodes"][0]["description"] = json!("Source: numbers (new description)");

        let (topology, io) = topology_of(&next.to_string(), &partitions(), Some(cached.clone())).expect("reuses");
        assert!(
            same_graph(&topology, &cached),
            "the cached topology is handed out again"
        );
        assert_eq!(io["keyed"].num_records_in, 3000);
        assert_eq!(io["keyed"].accumulated_busy_time, 900.0);
        assert_eq!(io["sink"].num_records_in, 1500);
        for (id, vertex) in io.keys().zip(cached.id_order().iter().map(|&i| &cached.vertices()[i])) {
            assert_eq!(id, &vertex.id);
            assert!(
                std::ptr::eq(id.as_str(), vertex.id.as_str()),
                "{id} shares the topology's text"
            );
        }
    }

    #[test]
    fn a_finished_vertex_has_the_finished_io_in_a_reused_topology_too() {
        let mut finished = job();
        finished["vertices"][0]["status"] = json!("FINISHED");
        let (cached, _) = topology_of(&finished.to_string(), &partitions(), None).expect("builds");
        let (topology, io) = topology_of(&finished.to_string(), &partitions(), Some(cached.clone())).expect("reuses");
        assert!(same_graph(&topology, &cached));
        assert_eq!(io["source"], IoMetrics::FINISHED);
    }

    /// A change of the job details, named.
    type Change = (&'static str, fn(&mut Value));

    /// The array at `value` (of the test's own JSON).
    fn array(value: &mut Value) -> &mut Vec<Value> {
        value.as_array_mut().expect("an array")
    }

    #[test]
    fn each_change_of_the_graph_builds_a_new_topology() {
        let changes: [Change; 13] = [
            ("the plan's parallelism", |d| {
                d["plan"]["nodes"][1]["parallelism"] = json!(6);
                d["vertices"][1]["parallelism"] = json!(6);
            }),
            ("the max parallelism", |d| {
                d["vertices"][1]["maxParallelism"] = json!(256)
            }),
            ("a vertex finished", |d| d["vertices"][0]["status"] = json!("FINISHED")),
            ("another slot sharing group", |d| {
                d["vertices"][2]["slotSharingGroupId"] = json!("sinks")
            }),
            ("no slot sharing group", |d| {
                if let Some(sink) = d["vertices"][2].as_object_mut() {
                    sink.remove("slotSharingGroupId");
                }
            }),
            ("a ship strategy", |d| {
                d["plan"]["nodes"][2]["inputs"][0]["ship_strategy"] = json!("REBALANCE")
            }),
            ("a vertex name", |d| d["vertices"][2]["name"] = json!("Sink: log")),
            ("an edge's source", |d| {
                d["plan"]["nodes"][2]["inputs"][0]["id"] = json!("source")
            }),
            ("an edge more", |d| {
                array(&mut d["plan"]["nodes"][2]["inputs"]).push(json!({"id": "source", "ship_strategy": "REBALANCE"}));
            }),
            ("a vertex more", |d| {
                array(&mut d["vertices"])
                    .push(json!({"id": "audit", "name": "audit", "maxParallelism": 64, "parallelism": 1}));
                array(&mut d["plan"]["nodes"]).push(
                    json!({"id": "audit", "parallelism": 1, "inputs": [{"id": "keyed", "ship_strategy": "FORWARD"}]}),
                );
            }),
            ("a vertex less", |d| {
                array(&mut d["vertices"]).pop();
                array(&mut d["plan"]["nodes"]).pop();
            }),
            ("a vertex's id", |d| {
                d["vertices"][2]["id"] = json!("sink-2");
                d["plan"]["nodes"][2]["id"] = json!("sink-2");
            }),
            ("the vertices' order", |d| array(&mut d["plan"]["nodes"]).swap(1, 2)),
        ];
        for (change, apply) in changes {
            let (cached, _) = topology_of(&job().to_string(), &partitions(), None).expect("builds");
            let mut changed = job();
            apply(&mut changed);
            let (topology, _) = topology_of(&changed.to_string(), &partitions(), Some(cached.clone()))
                .unwrap_or_else(|e| panic!("{change}: {e}"));
            assert!(!same_graph(&topology, &cached), "{change}: built anew");
            assert_ne!(topology, cached, "{change}: describes the change");
            let (fresh, _) = topology_of(&changed.to_string(), &partitions(), None).expect("builds");
            assert_eq!(topology, fresh, "{change}: as built without a cache");
        }

        // The source's partitions are the collector's, not the details'.
        let (cached, _) = topology_of(&job().to_string(), &partitions(), None).expect("builds");
        let more = BTreeMap::from([(VertexId::new("source"), 12)]);
        let (topology, _) = topology_of(&job().to_string(), &more, Some(cached.clone())).expect("builds");
        assert!(!same_graph(&topology, &cached), "new partitions build anew");
        assert_eq!(topology.get("source").map(|v| v.num_source_partitions), Some(12));
    }

    #[test]
    fn invalid_details_fail_as_without_a_cache() {
        let (cached, _) = topology_of(&job().to_string(), &partitions(), None).expect("builds");
        // Each change, named by the error it must give.
        let cases: [Change; 4] = [
            ("vertex keyed of the plan is missing from the job details", |d| {
                array(&mut d["vertices"]).remove(1);
            }),
            ("vertex keyed reports parallelism 0", |d| {
                d["plan"]["nodes"][1]["parallelism"] = json!(0)
            }),
            ("vertex sink reports max parallelism -1", |d| {
                d["vertices"][2]["maxParallelism"] = json!(-1)
            }),
            (
                "the job graph is not usable: unknown vertex gone (edge source); it is not in the job topology",
                |d| d["plan"]["nodes"][2]["inputs"][0]["id"] = json!("gone"),
            ),
        ];
        for (expected, apply) in cases {
            let mut invalid = job();
            apply(&mut invalid);
            let body = invalid.to_string();
            assert_eq!(failure(topology_of(&body, &partitions(), None)), expected);
            assert_eq!(
                failure(topology_of(&body, &partitions(), Some(cached.clone()))),
                expected
            );
        }
    }

    #[tokio::test]
    async fn the_cached_topology_is_dropped_on_cleanup_and_when_the_job_restarted() {
        let collector = RestMetricsCollector::<String>::new();
        let client =
            FlinkRestClient::new("http://127.0.0.1:8081", crate::rest::RestClientConfig::default()).expect("a client");
        let key = "job".to_owned();
        let (topology, _) = topology_of(&job().to_string(), &partitions(), None).expect("builds");
        let cached = |collector: &RestMetricsCollector<String>| lock(&collector.topologies).get(&key).cloned();
        let started = DateTime::from_timestamp_millis(1_700_000_000_000).expect("valid");

        insert(&mut lock(&collector.topologies), &key, topology.clone());
        collector.note_running_since(&key, &client, started).await;
        assert!(
            cached(&collector).is_some_and(|t| same_graph(&t, &topology)),
            "first sight keeps it"
        );
        collector.note_running_since(&key, &client, started).await;
        assert!(cached(&collector).is_some(), "still running since then");
        collector
            .note_running_since(&key, &client, started + TimeDelta::seconds(30))
            .await;
        assert!(cached(&collector).is_none(), "a restart drops it");

        insert(&mut lock(&collector.topologies), &key, topology);
        MetricsCollector::<String, autoscaler_core::BasicJobContext<String, FlinkRestClient>>::cleanup(
            &collector, &key,
        )
        .await;
        assert!(cached(&collector).is_none(), "cleanup drops it");
    }

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
            a.query, "get=busyTimeMsPerSecond%2CnumRecordsIn&agg=min%2Cmax%2Cavg%2Csum",
            "every aggregate but skew"
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
