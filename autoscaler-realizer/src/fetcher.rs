//! [`FlinkClusterJobListFetcher`]: the jobs of one Flink cluster, each with its configuration
//! (reference: standalone `FlinkClusterJobListFetcher`).

use crate::options::rest_client_timeout;
use crate::rest::{FlinkRestClient, JobOverview};
use async_trait::async_trait;
use autoscaler_core::{BasicJobContext, FetchError, JobListFetcher, config::Configuration};
use std::time::Duration;

/// Lists every job of the cluster behind its client: `GET /jobs/overview`, then per job
/// `GET /jobs/<id>/jobmanager/config` merged over the base configuration (the job's values win).
///
/// Each context has the job id as key and job id, the *effective* status (RUNNING with tasks not all
/// RUNNING/FINISHED counts as CREATED) and a clone of the client whose per-request timeout is the
/// merged configuration's `job.autoscaler.flink.rest-client.timeout` (the base configuration's when
/// the job's own value is invalid; only that key is read, so a job with any bad option is still
/// listed, and the autoscaler reports the bad option as that job's error). Finished, failed and cancelled
/// jobs are listed too while the JobManager remembers them (the autoscaler then skips them as not
/// RUNNING). One failing job fails the whole fetch, as in the reference, so that the control loop
/// does not mistake a job it could not read for a job that disappeared (and clean its state up).
///
/// ```
/// use autoscaler_realizer::rest::{FlinkRestClient, RestClientConfig};
/// use autoscaler_realizer::FlinkClusterJobListFetcher;
/// let client = FlinkRestClient::new("http://127.0.0.1:8081", RestClientConfig::default())?;
/// let fetcher = FlinkClusterJobListFetcher::new(client);
/// # let _ = fetcher;
/// # Ok::<(), autoscaler_realizer::rest::RestError>(())
/// ```
#[derive(Debug, Clone)]
pub struct FlinkClusterJobListFetcher {
    client: FlinkRestClient,
}

impl FlinkClusterJobListFetcher {
    /// A fetcher for the cluster `client` talks to.
    pub fn new(client: FlinkRestClient) -> Self {
        Self { client }
    }

    pub(crate) async fn job_context(
        &self,
        base: &Configuration,
        base_timeout: Duration,
        job: &JobOverview,
    ) -> Result<BasicJobContext<String, FlinkRestClient>, FetchError> {
        let job_conf = self.job_configuration(job).await?;
        Ok(self.context(base_timeout, job, base.overlay(&job_conf), tracing::Span::current))
    }

    /// `GET /jobs/<id>/jobmanager/config`: the configuration the job runs with (fixed for the
    /// job's lifetime, so callers may keep it as long as the job keeps its id and start time).
    pub(crate) async fn job_configuration(&self, job: &JobOverview) -> Result<Configuration, FetchError> {
        let entries = self
            .client
            .job_jobmanager_config(&job.jid)
            .await
            .map_err(|e| FetchError::Failed(format!("configuration of job {}: {e}", job.jid)))?;
        Ok(entries.into_iter().map(|e| (e.key, e.value)).collect())
    }

    /// The context of `job`, whose configuration (its own over the base one) is `configuration`.
    /// Its warnings are logged in the span `in_job` makes, made only for them: most jobs have
    /// none, and a span costs its fields' formatting.
    pub(crate) fn context(
        &self,
        base_timeout: Duration,
        job: &JobOverview,
        configuration: Configuration,
        in_job: impl Fn() -> tracing::Span,
    ) -> BasicJobContext<String, FlinkRestClient> {
        // A bad value in the job's own configuration is that job's problem: it is listed (so its
        // state is not cleaned up) and the autoscaler reports the bad option as the job's error event
        // and skips it, while the other jobs go on.
        let timeout = rest_client_timeout(&configuration).unwrap_or_else(|e| {
            in_job()
                .in_scope(|| tracing::warn!(job_id = %job.jid, error = %e, "using the base REST timeout for this job"));
            base_timeout
        });
        let status = job.effective_status();
        if status.is_none() {
            in_job().in_scope(
                || tracing::warn!(job_id = %job.jid, state = %job.state, "unknown job state; the job will not be scaled"),
            );
        }
        BasicJobContext {
            job_key: job.jid.clone(),
            job_id: Some(job.jid.clone()),
            job_status: status,
            configuration,
            task_manager_cpu: None,
            client: self.client.with_timeout(timeout),
        }
    }
}

#[async_trait]
impl JobListFetcher<String, BasicJobContext<String, FlinkRestClient>> for FlinkClusterJobListFetcher {
    async fn fetch(&self, base: &Configuration) -> Result<Vec<BasicJobContext<String, FlinkRestClient>>, FetchError> {
        // The job list and config calls use the base configuration's timeout.
        let timeout = rest_client_timeout(base).map_err(|e| FetchError::Failed(e.to_string()))?;
        let this = Self {
            client: self.client.with_timeout(timeout),
        };
        let overview = this
            .client
            .jobs_overview()
            .await
            .map_err(|e| FetchError::Failed(format!("job list: {e}")))?;
        let mut contexts = Vec::with_capacity(overview.jobs.len());
        for job in &overview.jobs {
            contexts.push(this.job_context(base, timeout, job).await?);
        }
        Ok(contexts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rest::{RestClientConfig, TaskCounts};
    use autoscaler_sim::logs::LogBuffer;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A job's warnings (a bad REST timeout, an unknown state) are logged in the span its caller
    /// makes for them, and the span is made only when there is one to log.
    #[test]
    fn a_jobs_warnings_are_logged_in_the_span_made_for_them() {
        let client = FlinkRestClient::new("http://127.0.0.1:9", RestClientConfig::default()).expect("a client");
        let fetcher = FlinkClusterJobListFetcher::new(client);
        let job = |state: &str| JobOverview {
            jid: "j1".to_owned(),
            name: "n".to_owned(),
            state: state.to_owned(),
            start_time: 0,
            tasks: TaskCounts::default(),
        };
        let made = AtomicUsize::new(0);
        let in_job = || {
            made.fetch_add(1, Ordering::Relaxed);
            tracing::error_span!("job", job = "src/j1", source = "src")
        };
        let lines = LogBuffer::default();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(lines.clone())
            .finish();
        let base_timeout = Duration::from_secs(3);
        tracing::subscriber::with_default(subscriber, || {
            let ctx = fetcher.context(base_timeout, &job("RUNNING"), Configuration::new(), in_job);
            assert!(ctx.job_status.is_some());
            assert_eq!(made.load(Ordering::Relaxed), 0, "nothing to log, no span");
            let bad = Configuration::from_iter([("job.autoscaler.flink.rest-client.timeout", "0 s")]);
            let ctx = fetcher.context(base_timeout, &job("NOT-A-STATE"), bad, in_job);
            assert_eq!(ctx.job_status, None);
            assert_eq!(ctx.client.timeout(), base_timeout);
        });
        assert_eq!(made.load(Ordering::Relaxed), 2, "one span per warning");
        let text = lines.text();
        let in_span: Vec<&str> = text
            .lines()
            .filter(|line| line.contains(r#"job{job="src/j1" source="src"}"#))
            .collect();
        assert_eq!(in_span.len(), 2, "{text}");
        assert!(in_span[0].contains("using the base REST timeout"), "{text}");
        assert!(in_span[1].contains("unknown job state"), "{text}");
    }
}
