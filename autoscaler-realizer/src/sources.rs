//! [`MultiSourceJobListFetcher`]: the jobs of any number of Flink clusters and YARN
//! ResourceManagers, in one list, each job keyed by its source.
//!
//! # Job keys
//!
//! A job of a Flink cluster source `prod` has the key `prod/<job id>`; a job of YARN application
//! `application_1_0007` of source `yarn-a` has `yarn-a/application_1_0007/<job id>`. Keys depend
//! only on the source's name and Flink's (and YARN's) ids, so a restarted autoscaler finds the
//! durable state of every job again.
//!
//! # Failures
//!
//! - A source that cannot be listed (cluster or RM down, an answer that does not parse) is
//!   reported (log, [`SourceObserver::source_fetched`]) and skipped; the other sources go on.
//! - A YARN application whose JobManager cannot be reached (connection refused, the proxy answers
//!   500) is skipped the same way, alone.
//! - A job whose configuration cannot be read is skipped alone.
//!
//! Whatever is skipped keeps the jobs of the last successful fetch in the list, with an unknown
//! status (so they are neither scaled nor mistaken for vanished jobs and cleaned up). Only what the
//! source itself no longer lists (a finished YARN application, a job the JobManager forgot)
//! vanishes from the list, and the control loop then cleans it up once. When every source fails
//! the fetch fails, and the control loop skips the cycle.
//!
//! # Selection
//!
//! [`JobSelection`]: per source, glob patterns on the job name; a job is kept when it matches an
//! include pattern (or there is none) and no exclude pattern.

use crate::context::FlinkRestContext;
use crate::fetcher::FlinkClusterJobListFetcher;
use crate::options::rest_client_timeout;
use crate::rest::{FlinkRestClient, RestClientConfig};
use crate::yarn::{JobManagerAccess, YarnApplication, YarnResourceManagerClient};
use async_trait::async_trait;
use autoscaler_core::{
    AutoscalerMetricsReporter, FetchError, JobAutoScalerContext, JobListFetcher, JobStatus, NoopMetricsReporter,
    config::Configuration,
};
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tracing::Instrument;

/// What one job of a source is, for labels and keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobLabels {
    /// The job key (`source/job id` or `source/application/job id`).
    pub job_key: String,
    /// The source's name.
    pub source: String,
    /// The YARN application id, for YARN sources.
    pub application: Option<String>,
    /// Flink's job id.
    pub job_id: String,
    /// The job name.
    pub job_name: String,
}

/// The context of one job of a [`MultiSourceJobListFetcher`]: [`JobAutoScalerContext`] and
/// [`FlinkRestContext`], with a per-job metrics reporter.
#[derive(Clone)]
pub struct SourceJobContext {
    /// Key, source, ids and name.
    pub labels: JobLabels,
    /// The effective status; `None` also while the source cannot be reached.
    pub job_status: Option<JobStatus>,
    /// The job's configuration over the base configuration.
    pub configuration: Configuration,
    /// The client of the job's JobManager.
    pub client: FlinkRestClient,
    /// Where the autoscaler's metrics for this job go.
    pub reporter: Arc<dyn AutoscalerMetricsReporter>,
}

impl fmt::Debug for SourceJobContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SourceJobContext")
            .field("labels", &self.labels)
            .field("job_status", &self.job_status)
            .field("client", &self.client)
            .finish_non_exhaustive()
    }
}

impl JobAutoScalerContext<String> for SourceJobContext {
    fn job_key(&self) -> &String {
        &self.labels.job_key
    }
    fn job_id(&self) -> Option<&str> {
        Some(&self.labels.job_id)
    }
    fn job_status(&self) -> Option<JobStatus> {
        self.job_status
    }
    fn configuration(&self) -> &Configuration {
        &self.configuration
    }
    fn metrics_reporter(&self) -> &dyn AutoscalerMetricsReporter {
        &*self.reporter
    }
    fn log_source(&self) -> Option<&str> {
        Some(&self.labels.source)
    }
}

impl FlinkRestContext for SourceJobContext {
    fn rest_client(&self) -> &FlinkRestClient {
        &self.client
    }
}

/// Why a source cannot be configured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// A source name must be non-empty and made of `A-Z a-z 0-9 . _ -`.
    #[error("invalid source name {0:?}: use letters, digits, '.', '_' and '-'")]
    InvalidName(String),
    /// Two sources have the same name.
    #[error("two sources are named {0:?}")]
    DuplicateName(String),
    /// A job-name pattern is not a valid glob.
    #[error("invalid job name pattern {pattern:?}: {reason}")]
    InvalidPattern {
        /// The pattern.
        pattern: String,
        /// What is wrong.
        reason: String,
    },
}

/// Which jobs of a source are autoscaled, by job name (glob patterns: `*`, `?`, `[abc]`).
#[derive(Debug, Clone, Default)]
pub struct JobSelection {
    include: Option<globset::GlobSet>,
    exclude: Option<globset::GlobSet>,
}

impl JobSelection {
    /// Every job.
    pub fn all() -> Self {
        Self::default()
    }

    /// Jobs matching one of `include` (any job when empty) and none of `exclude`.
    ///
    /// ```
    /// use autoscaler_realizer::sources::JobSelection;
    /// let s = JobSelection::new(&["orders-*"], &["*-canary"]).unwrap();
    /// assert!(s.selects("orders-eu"));
    /// assert!(!s.selects("orders-eu-canary"));
    /// assert!(!s.selects("billing"));
    /// ```
    pub fn new(include: &[&str], exclude: &[&str]) -> Result<Self, SourceError> {
        fn set(patterns: &[&str]) -> Result<Option<globset::GlobSet>, SourceError> {
            if patterns.is_empty() {
                return Ok(None);
            }
            let mut builder = globset::GlobSetBuilder::new();
            for pattern in patterns {
                let glob = globset::GlobBuilder::new(pattern)
                    .literal_separator(false)
                    .build()
                    .map_err(|e| SourceError::InvalidPattern {
                        pattern: (*pattern).to_owned(),
                        reason: e.kind().to_string(),
                    })?;
                builder.add(glob);
            }
            builder.build().map(Some).map_err(|e| SourceError::InvalidPattern {
                pattern: patterns.join(";"),
                reason: e.to_string(),
            })
        }
        Ok(Self {
            include: set(include)?,
            exclude: set(exclude)?,
        })
    }

    /// Whether the job named `name` is autoscaled.
    pub fn selects(&self, name: &str) -> bool {
        self.include.as_ref().is_none_or(|s| s.is_match(name))
            && !self.exclude.as_ref().is_some_and(|s| s.is_match(name))
    }
}

/// What a source lists jobs from.
#[derive(Debug, Clone)]
// Built once per source at startup and never moved in a hot path: the size does not matter.
#[allow(clippy::large_enum_variant)]
pub enum SourceKind {
    /// One Flink cluster's REST API.
    FlinkCluster(FlinkRestClient),
    /// The Flink applications of a YARN ResourceManager.
    Yarn {
        /// The RM client.
        resource_manager: YarnResourceManagerClient,
        /// How JobManagers are reached.
        access: JobManagerAccess,
        /// Settings of the JobManager clients (auth header, TLS, retries).
        jobmanager_config: RestClientConfig,
    },
}

/// One named source of jobs.
#[derive(Debug, Clone)]
pub struct JobSource {
    name: String,
    kind: SourceKind,
    selection: JobSelection,
    /// The jobs' own configurations (shared by the clones of the source).
    configurations: JobConfigurations,
}

/// Per unit (`source` or `source/application`), per job id: the job's start time and its own
/// configuration. A job's `jobmanager/config` is fixed while it runs, so it is asked once per job
/// (and again when the job's start time changes, i.e. it was resubmitted); jobs no longer listed
/// are forgotten at each listing of their unit.
#[derive(Debug, Clone, Default)]
struct JobConfigurations(Arc<Mutex<KeptConfigurations>>);

/// What [`JobConfigurations`] keeps.
#[derive(Debug, Default)]
struct KeptConfigurations {
    units: foldhash::HashMap<String, UnitConfigurations>,
    /// One copy of each distinct configuration the kept jobs hold (their own, and merged over the
    /// base), which equal ones share: a session cluster answers every job's `jobmanager/config`
    /// with the JobManager's configuration, so its jobs would otherwise keep one copy each (about
    /// 10 KB per job, own and merged).
    distinct: HashSet<Configuration>,
}

impl KeptConfigurations {
    /// Keeps in [`Self::distinct`] only what some kept job still holds.
    fn forget_unused(&mut self) {
        self.distinct = self
            .units
            .values()
            .flat_map(|jobs| jobs.values())
            .flat_map(JobConfiguration::held)
            .cloned()
            .collect();
    }
}

/// Per job id of one unit: the job's start time and its own configuration.
type UnitConfigurations = foldhash::HashMap<String, JobConfiguration>;

/// A job's own configuration, and the last merge of it over a base configuration.
#[derive(Debug, Clone)]
struct JobConfiguration {
    /// The job's start time: its configuration holds while it is the same.
    start: i64,
    own: Configuration,
    /// The base configuration and the job's over it, as last merged: reused while the base is
    /// the same (it changes only when the configuration is reloaded).
    merged: Option<(Configuration, Configuration)>,
}

impl JobConfiguration {
    /// The configurations the job holds: its own and, once merged, the merge.
    fn held(&self) -> impl Iterator<Item = &Configuration> {
        std::iter::once(&self.own).chain(self.merged.as_ref().map(|(_, merged)| merged))
    }

    /// Whether the job holds the very configurations `other` holds (the same allocations).
    fn holds_the_same(&self, other: &Self) -> bool {
        let mut theirs = other.held();
        self.held()
            .all(|mine| theirs.next().is_some_and(|their| mine.shares_entries_with(their)))
            && theirs.next().is_none()
    }

    /// The job's configuration over `base`, merged once per base, and shared through `kept` with
    /// the jobs whose merge is equal.
    fn over(&mut self, base: &Configuration, kept: &JobConfigurations) -> Configuration {
        match &self.merged {
            Some((merged_on, merged)) if merged_on.shares_entries_with(base) => merged.clone(),
            _ => {
                let merged = kept.share(base.overlay(&self.own));
                self.merged = Some((base.clone(), merged.clone()));
                merged
            }
        }
    }
}

impl JobConfigurations {
    fn lock(&self) -> std::sync::MutexGuard<'_, KeptConfigurations> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn get(&self, unit: &str, job: &crate::rest::JobOverview) -> Option<JobConfiguration> {
        let kept = self.lock();
        let conf = kept.units.get(unit)?.get(&job.jid)?;
        (conf.start == job.start_time).then(|| conf.clone())
    }

    /// The kept copy of a configuration equal to `conf`, or `conf`, kept from now on.
    fn share(&self, conf: Configuration) -> Configuration {
        let mut kept = self.lock();
        match kept.distinct.get(&conf) {
            Some(same) => same.clone(),
            None => {
                kept.distinct.insert(conf.clone());
                conf
            }
        }
    }

    /// Replaces what is kept of `unit` by its latest listing.
    fn replace(&self, unit: &str, jobs: UnitConfigurations) {
        let mut kept = self.lock();
        // A configuration goes out of use only with a job that left or was resubmitted, or a
        // merge over an earlier base.
        let dropped = kept.units.get(unit).is_some_and(|before| {
            before
                .iter()
                .any(|(id, was)| jobs.get(id).is_none_or(|now| !now.holds_the_same(was)))
        });
        kept.units.insert(unit.to_owned(), jobs);
        if dropped {
            kept.forget_unused();
        }
    }

    /// Forgets the units of `source` other than `keep`.
    fn retain_units(&self, source: &str, keep: &HashSet<String>) {
        let prefix = format!("{source}/");
        let mut kept = self.lock();
        let before = kept.units.len();
        kept.units
            .retain(|unit, _| !unit.starts_with(&prefix) || keep.contains(unit));
        if kept.units.len() != before {
            kept.forget_unused();
        }
    }
}

impl JobSource {
    /// A source named `name` (letters, digits, `.`, `_`, `-`).
    pub fn new(name: &str, kind: SourceKind, selection: JobSelection) -> Result<Self, SourceError> {
        if !is_source_name(name) {
            return Err(SourceError::InvalidName(name.to_owned()));
        }
        Ok(Self {
            name: name.to_owned(),
            kind,
            selection,
            configurations: JobConfigurations::default(),
        })
    }

    /// The source's name (first part of its jobs' keys).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What it lists jobs from.
    pub fn kind(&self) -> &SourceKind {
        &self.kind
    }
}

/// Whether `name` can name a source.
pub fn is_source_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// Hooks of the fetcher for metrics and health. Every method defaults to doing nothing.
pub trait SourceObserver: Send + Sync {
    /// The metrics reporter of a job (called on every fetch: return a cached one).
    fn job_reporter(&self, labels: &JobLabels) -> Arc<dyn AutoscalerMetricsReporter> {
        let _ = labels;
        Arc::new(NoopMetricsReporter)
    }
    /// A source was listed (`Ok(number of jobs)`) or failed (`Err(message)`), after `elapsed`.
    /// A YARN source some of whose applications could not be listed is `Err`.
    fn source_fetched(&self, source: &str, outcome: Result<usize, &str>, elapsed: Duration) {
        let _ = (source, outcome, elapsed);
    }
    /// Jobs of the source were listed: the source answered, and so did at least one of its units
    /// (or it has none). Called with [`source_fetched`](Self::source_fetched) also when a few YARN
    /// applications failed while the others were listed.
    fn source_listed(&self, source: &str) {
        let _ = source;
    }
}

/// An observer that does nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopSourceObserver;

impl SourceObserver for NoopSourceObserver {}

/// Lists the jobs of every source; see the module documentation for keys, failures and selection.
pub struct MultiSourceJobListFetcher {
    sources: Vec<JobSource>,
    observer: Arc<dyn SourceObserver>,
    /// Per unit (`source` or `source/application`): the contexts of its last successful listing.
    last: Mutex<HashMap<String, Vec<SourceJobContext>>>,
}

impl fmt::Debug for MultiSourceJobListFetcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MultiSourceJobListFetcher")
            .field("sources", &self.sources)
            .finish_non_exhaustive()
    }
}

/// The outcome of listing one unit (a cluster, or one YARN application).
struct UnitFetch {
    unit: String,
    /// `Err` = the unit could not be listed; keep its last jobs.
    jobs: Result<Vec<JobFetch>, String>,
}

/// One job of a listed unit: its context, or why it could not be built.
enum JobFetch {
    Ok(Box<SourceJobContext>),
    Failed { job_key: String, error: String },
}

struct SourceFetch {
    source: String,
    /// `Err` = the source itself failed (nothing listed).
    units: Result<Vec<UnitFetch>, String>,
    elapsed: Duration,
}

impl MultiSourceJobListFetcher {
    /// A fetcher over `sources` (names must be unique).
    pub fn new(sources: Vec<JobSource>, observer: Arc<dyn SourceObserver>) -> Result<Self, SourceError> {
        let mut seen = HashSet::new();
        for source in &sources {
            if !seen.insert(source.name.clone()) {
                return Err(SourceError::DuplicateName(source.name.clone()));
            }
        }
        Ok(Self {
            sources,
            observer,
            last: Mutex::new(HashMap::new()),
        })
    }

    /// The sources.
    pub fn sources(&self) -> &[JobSource] {
        &self.sources
    }

    async fn fetch_source(source: JobSource, base: Configuration, observer: Arc<dyn SourceObserver>) -> SourceFetch {
        let started = Instant::now();
        let units = match &source.kind {
            SourceKind::FlinkCluster(client) => {
                fetch_cluster(&source, client, &base, &*observer, None, source.name.clone())
                    .await
                    .map(|jobs| {
                        vec![UnitFetch {
                            unit: source.name.clone(),
                            jobs: Ok(jobs),
                        }]
                    })
            }
            SourceKind::Yarn {
                resource_manager,
                access,
                jobmanager_config,
            } => fetch_yarn(&source, resource_manager, *access, jobmanager_config, &base, &*observer).await,
        };
        SourceFetch {
            source: source.name.clone(),
            units,
            elapsed: started.elapsed(),
        }
    }
}

async fn fetch_yarn(
    source: &JobSource,
    rm: &YarnResourceManagerClient,
    access: JobManagerAccess,
    jobmanager_config: &RestClientConfig,
    base: &Configuration,
    observer: &dyn SourceObserver,
) -> Result<Vec<UnitFetch>, String> {
    let apps = rm
        .running_flink_applications()
        .await
        .map_err(|e| format!("ResourceManager {}: {e}", rm.base_url()))?;
    let mut units = Vec::with_capacity(apps.len());
    for app in apps {
        let unit = format!("{}/{}", source.name, app.id);
        let jobs = fetch_application(source, &app, access, jobmanager_config, base, observer, &unit).await;
        units.push(UnitFetch { unit, jobs });
    }
    let listed = units.iter().map(|u| u.unit.clone()).collect();
    source.configurations.retain_units(&source.name, &listed);
    Ok(units)
}

async fn fetch_application(
    source: &JobSource,
    app: &YarnApplication,
    access: JobManagerAccess,
    jobmanager_config: &RestClientConfig,
    base: &Configuration,
    observer: &dyn SourceObserver,
    unit: &str,
) -> Result<Vec<JobFetch>, String> {
    let url = app.jobmanager_url(access).map_err(|e| e.to_string())?;
    let client =
        FlinkRestClient::new(&url, jobmanager_config.clone()).map_err(|e| format!("application {}: {e}", app.id))?;
    fetch_cluster(source, &client, base, observer, Some(&app.id), unit.to_owned())
        .await
        .map_err(|e| format!("application {}: {e}", app.id))
}

/// Lists the jobs of one JobManager; `key_prefix` is the unit (`source` or `source/application`).
async fn fetch_cluster(
    source: &JobSource,
    client: &FlinkRestClient,
    base: &Configuration,
    observer: &dyn SourceObserver,
    application: Option<&str>,
    key_prefix: String,
) -> Result<Vec<JobFetch>, String> {
    let timeout = rest_client_timeout(base).map_err(|e| e.to_string())?;
    let client = client.with_timeout(timeout);
    let overview = client.jobs_overview().await.map_err(|e| e.to_string())?;
    let fetcher = FlinkClusterJobListFetcher::new(client);
    let mut jobs = Vec::new();
    let mut configurations = UnitConfigurations::default();
    for job in overview.jobs.iter().filter(|j| source.selection.selects(&j.name)) {
        let labels = JobLabels {
            job_key: format!("{key_prefix}/{}", job.jid),
            source: source.name.clone(),
            application: application.map(str::to_owned),
            job_id: job.jid.clone(),
            job_name: job.name.clone(),
        };
        // Its lines (an unknown state, a bad timeout) name the job by key and source. Made only
        // when there is something to log in it: it is one per job and cycle otherwise.
        let span = || tracing::error_span!("job", job = %labels.job_key, source = %source.name);
        let job_conf = match source.configurations.get(&key_prefix, job) {
            Some(conf) => Ok(conf),
            None => fetcher
                .job_configuration(job)
                .instrument(span())
                .await
                .map(|own| JobConfiguration {
                    start: job.start_time,
                    own: source.configurations.share(own),
                    merged: None,
                }),
        };
        let context = job_conf.map(|mut conf| {
            let ctx = fetcher.context(timeout, job, conf.over(base, &source.configurations), span);
            configurations.insert(job.jid.clone(), conf);
            ctx
        });
        match context {
            Ok(ctx) => jobs.push(JobFetch::Ok(Box::new(SourceJobContext {
                reporter: observer.job_reporter(&labels),
                labels,
                job_status: ctx.job_status,
                configuration: ctx.configuration,
                client: ctx.client,
            }))),
            Err(e) => jobs.push(JobFetch::Failed {
                job_key: labels.job_key,
                error: e.to_string(),
            }),
        }
    }
    source.configurations.replace(&key_prefix, configurations);
    Ok(jobs)
}

/// A context kept from an earlier fetch while its source cannot be reached.
fn stale(ctx: &SourceJobContext) -> SourceJobContext {
    SourceJobContext {
        job_status: None,
        ..ctx.clone()
    }
}

#[async_trait]
impl JobListFetcher<String, SourceJobContext> for MultiSourceJobListFetcher {
    async fn fetch(&self, base: &Configuration) -> Result<Vec<SourceJobContext>, FetchError> {
        let mut tasks = tokio::task::JoinSet::new();
        for source in &self.sources {
            tasks.spawn(Self::fetch_source(
                source.clone(),
                base.clone(),
                Arc::clone(&self.observer),
            ));
        }
        let mut results = Vec::with_capacity(self.sources.len());
        while let Some(joined) = tasks.join_next().await {
            match joined {
                Ok(fetch) => results.push(fetch),
                // A panicking source is a failed source; which one is unknown here, so every source
                // without a result keeps its jobs below.
                Err(e) => tracing::error!(error = %e, "a source fetch panicked"),
            }
        }
        results.sort_by(|a, b| a.source.cmp(&b.source));

        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out = Vec::new();
        let mut failed_sources = Vec::new();
        for source in &self.sources {
            let prefix = format!("{}/", source.name);
            let in_source = |unit: &str| unit == source.name || unit.starts_with(&prefix);
            let Some(fetch) = results.iter().find(|r| r.source == source.name) else {
                failed_sources.push(source.name.clone());
                out.extend(
                    last.iter()
                        .filter(|(u, _)| in_source(u))
                        .flat_map(|(_, jobs)| jobs.iter().map(stale)),
                );
                continue;
            };
            match &fetch.units {
                Err(error) => {
                    tracing::error!(source = %source.name, %error, "could not list the jobs of a source; skipping it this cycle");
                    self.observer.source_fetched(&source.name, Err(error), fetch.elapsed);
                    failed_sources.push(source.name.clone());
                    out.extend(
                        last.iter()
                            .filter(|(u, _)| in_source(u))
                            .flat_map(|(_, jobs)| jobs.iter().map(stale)),
                    );
                }
                Ok(units) => {
                    let mut listed = 0;
                    let mut unit_errors = Vec::new();
                    // Units the source no longer lists vanish (their jobs are cleaned up).
                    last.retain(|u, _| !in_source(u) || units.iter().any(|f| &f.unit == u));
                    for unit in units {
                        match &unit.jobs {
                            Err(error) => {
                                tracing::warn!(source = %source.name, unit = %unit.unit, %error, "could not list the jobs of an application; skipping it this cycle");
                                unit_errors.push(error.clone());
                                out.extend(last.get(&unit.unit).into_iter().flatten().map(stale));
                            }
                            Ok(jobs) => {
                                let previous = last.remove(&unit.unit).unwrap_or_default();
                                let mut current = Vec::with_capacity(jobs.len());
                                for job in jobs {
                                    match job {
                                        JobFetch::Ok(ctx) => current.push((**ctx).clone()),
                                        JobFetch::Failed { job_key, error } => {
                                            tracing::warn!(job = %job_key, source = %source.name, %error, "could not read a job's configuration; skipping it this cycle");
                                            if let Some(old) = previous.iter().find(|c| &c.labels.job_key == job_key) {
                                                current.push(stale(old));
                                            }
                                        }
                                    }
                                }
                                listed += current.len();
                                out.extend(current.iter().cloned());
                                last.insert(unit.unit.clone(), current);
                            }
                        }
                    }
                    if units.is_empty() || unit_errors.len() < units.len() {
                        self.observer.source_listed(&source.name);
                    }
                    let outcome = if unit_errors.is_empty() {
                        Ok(listed)
                    } else {
                        Err(unit_errors.join("; "))
                    };
                    match outcome {
                        Ok(n) => self.observer.source_fetched(&source.name, Ok(n), fetch.elapsed),
                        Err(e) => self.observer.source_fetched(&source.name, Err(&e), fetch.elapsed),
                    }
                }
            }
        }
        if !self.sources.is_empty() && failed_sources.len() == self.sources.len() {
            return Err(FetchError::Failed(format!(
                "every source failed: {}",
                failed_sources.join(", ")
            )));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jobs_configuration_is_merged_once_per_base() {
        let own = Configuration::from_iter([("job.autoscaler.enabled", "true")]);
        let mut job = JobConfiguration {
            start: 1,
            own,
            merged: None,
        };
        let kept = JobConfigurations::default();
        let base = Configuration::from_iter([("job.autoscaler.enabled", "false"), ("x", "1")]);
        let first = job.over(&base, &kept);
        assert_eq!(
            first.get("job.autoscaler.enabled"),
            Some("true"),
            "the job's value wins"
        );
        assert_eq!(first.get("x"), Some("1"));
        assert!(
            job.over(&base.clone(), &kept).shares_entries_with(&first),
            "the same base: merged once"
        );
        // A reloaded base (a new map, even with equal entries) is merged again.
        let reloaded = Configuration::from_iter([("job.autoscaler.enabled", "false"), ("x", "2")]);
        let second = job.over(&reloaded, &kept);
        assert!(!second.shares_entries_with(&first));
        assert_eq!(second.get("x"), Some("2"));
    }

    /// `n` jobs of `unit` started at `start`, each with `own` (a fresh copy) merged over `base`.
    fn listing(
        kept: &JobConfigurations,
        n: usize,
        start: i64,
        own: &[(&str, &str)],
        base: &Configuration,
    ) -> UnitConfigurations {
        (0..n)
            .map(|i| {
                let mut job = JobConfiguration {
                    start,
                    own: kept.share(Configuration::from_iter(own.iter().copied())),
                    merged: None,
                };
                job.over(base, kept);
                (format!("job-{i}"), job)
            })
            .collect()
    }

    #[test]
    fn equal_job_configurations_are_kept_once() {
        let kept = JobConfigurations::default();
        let base = Configuration::from_iter([("x", "1")]);
        let jm = [("job.autoscaler.enabled", "true"), ("y", "2")];
        let jobs = listing(&kept, 3, 1, &jm, &base);
        let first = &jobs["job-0"];
        for job in jobs.values() {
            assert!(
                job.own.shares_entries_with(&first.own),
                "equal own configurations share"
            );
            let (merged, first_merged) = (
                &job.merged.as_ref().expect("merged").1,
                &first.merged.as_ref().expect("merged").1,
            );
            assert!(merged.shares_entries_with(first_merged), "equal merges share");
            assert_eq!(merged.get("x"), Some("1"));
            assert_eq!(merged.get("y"), Some("2"));
        }
        kept.replace("src/app", jobs);
        assert_eq!(kept.lock().distinct.len(), 2, "one own configuration, one merge");

        // A job with a configuration of its own keeps it apart.
        let other = listing(&kept, 1, 1, &[("job.autoscaler.enabled", "false")], &base);
        assert_eq!(other["job-0"].own.get("job.autoscaler.enabled"), Some("false"));
        assert_eq!(kept.lock().distinct.len(), 4);

        // Jobs that leave take their configurations along: only what a kept job holds stays.
        kept.replace("src/app", other);
        let distinct = kept.lock().distinct.clone();
        assert_eq!(distinct.len(), 2);
        assert!(
            distinct
                .iter()
                .all(|c| c.get("job.autoscaler.enabled") == Some("false"))
        );
        kept.retain_units("src", &HashSet::new());
        assert!(kept.lock().distinct.is_empty(), "a unit no longer listed keeps nothing");
    }

    #[test]
    fn source_names_and_patterns_are_checked() {
        assert!(is_source_name("prod-eu.1_a"));
        for bad in ["", "a/b", "a b", "ü", "a:b"] {
            assert!(!is_source_name(bad), "{bad}");
        }
        assert!(matches!(
            JobSelection::new(&["[abc"], &[]),
            Err(SourceError::InvalidPattern { .. })
        ));
        let all = JobSelection::all();
        assert!(all.selects("anything"));
        let only = JobSelection::new(&["a?c", "x*"], &[]).expect("valid");
        assert!(only.selects("abc") && only.selects("x/y") && !only.selects("abcd"));
    }
}
