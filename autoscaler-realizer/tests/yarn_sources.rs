//! The multi-source fetcher against a fake YARN ResourceManager and fake JobManagers (wiremock):
//! RM down, `{"apps":null}`, an application that is gone, proxy 500s, malformed JSON, a RUNNING
//! application whose JobManager refuses connections; job keys, selection, auth headers.

use autoscaler_core::{JobAutoScalerContext, JobListFetcher, JobStatus, config::Configuration};
use autoscaler_realizer::sources::{
    JobLabels, JobSelection, JobSource, MultiSourceJobListFetcher, NoopSourceObserver, SourceJobContext, SourceKind,
    SourceObserver,
};
use autoscaler_realizer::yarn::{JobManagerAccess, YarnResourceManagerClient};
use autoscaler_realizer::{rest::AuthHeader, rest::FlinkRestClient, rest::RestClientConfig};
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wiremock::matchers::{header, method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn config() -> RestClientConfig {
    RestClientConfig {
        timeout: Duration::from_secs(2),
        connect_timeout: Duration::from_secs(1),
        retries: 0,
        ..RestClientConfig::default()
    }
}

/// A fake JobManager with the given (id, name) jobs, all RUNNING.
async fn jobmanager(jobs: &[(&str, &str)]) -> MockServer {
    let server = MockServer::start().await;
    mount_jobmanager(&server, "", jobs).await;
    server
}

async fn mount_jobmanager(server: &MockServer, prefix: &str, jobs: &[(&str, &str)]) {
    let overview: Vec<_> = jobs
        .iter()
        .map(|(id, name)| {
            json!({"jid": id, "name": name, "state": "RUNNING", "start-time": 1,
                   "tasks": {"total": 1, "running": 1, "finished": 0}})
        })
        .collect();
    Mock::given(method("GET"))
        .and(path(format!("{prefix}/jobs/overview")))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({ "jobs": overview })))
        .mount(server)
        .await;
    for (id, _) in jobs {
        Mock::given(method("GET"))
            .and(path(format!("{prefix}/jobs/{id}/jobmanager/config")))
            .respond_with(
                ResponseTemplate::new(200).set_body_json(json!([{"key": "jobmanager.scheduler", "value": "adaptive"}])),
            )
            .mount(server)
            .await;
    }
}

fn app(id: &str, am: &str, tracking: &str) -> serde_json::Value {
    json!({"id": id, "name": "flink", "state": "RUNNING", "applicationType": "Apache Flink",
           "trackingUrl": tracking, "amRPCAddress": am, "finalStatus": "UNDEFINED"})
}

async fn resource_manager(body: serde_json::Value) -> MockServer {
    let rm = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/ws/v1/cluster/apps"))
        .and(query_param("states", "RUNNING"))
        .and(query_param("applicationTypes", "Apache Flink"))
        .respond_with(ResponseTemplate::new(200).set_body_json(body))
        .mount(&rm)
        .await;
    rm
}

fn host_port(server: &MockServer) -> String {
    server.address().to_string()
}

/// A local port nothing listens on.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    drop(listener);
    port
}

#[derive(Default)]
struct Recorder {
    fetched: Mutex<Vec<(String, Result<usize, String>)>>,
    listed: Mutex<Vec<String>>,
}

impl SourceObserver for Recorder {
    fn source_fetched(&self, source: &str, outcome: Result<usize, &str>, _elapsed: Duration) {
        self.fetched
            .lock()
            .expect("lock")
            .push((source.to_owned(), outcome.map_err(str::to_owned)));
    }
    fn job_reporter(&self, _labels: &JobLabels) -> Arc<dyn autoscaler_core::AutoscalerMetricsReporter> {
        Arc::new(autoscaler_core::NoopMetricsReporter)
    }
    fn source_listed(&self, source: &str) {
        self.listed.lock().expect("lock").push(source.to_owned());
    }
}

impl Recorder {
    fn take_listed(&self) -> Vec<String> {
        std::mem::take(&mut *self.listed.lock().expect("lock"))
    }

    fn take(&self) -> Vec<(String, Result<usize, String>)> {
        std::mem::take(&mut *self.fetched.lock().expect("lock"))
    }
}

fn yarn_source(name: &str, rm_url: &str, access: JobManagerAccess) -> JobSource {
    JobSource::new(
        name,
        SourceKind::Yarn {
            resource_manager: YarnResourceManagerClient::new(rm_url, config()).expect("rm client"),
            access,
            jobmanager_config: config(),
        },
        JobSelection::all(),
    )
    .expect("source")
}

fn flink_source(name: &str, url: &str, selection: JobSelection) -> JobSource {
    JobSource::new(
        name,
        SourceKind::FlinkCluster(FlinkRestClient::new(url, config()).expect("client")),
        selection,
    )
    .expect("source")
}

fn keys(jobs: &[SourceJobContext]) -> Vec<(String, Option<JobStatus>)> {
    let mut k: Vec<_> = jobs.iter().map(|c| (c.job_key().clone(), c.job_status())).collect();
    k.sort_by(|a, b| a.0.cmp(&b.0));
    k
}

const J1: &str = "11111111111111111111111111111111";
const J2: &str = "22222222222222222222222222222222";
const J3: &str = "33333333333333333333333333333333";

#[tokio::test]
async fn jobs_of_clusters_and_yarn_applications_get_source_keys() {
    let jm_a = jobmanager(&[(J1, "orders")]).await;
    let jm_b = jobmanager(&[(J2, "billing"), (J3, "billing-canary")]).await;
    let rm = resource_manager(json!({"apps": {"app": [
        app("application_1_0002", &host_port(&jm_b), "http://unused/"),
        // Not RUNNING or not Flink: dropped even if the RM ignored the filter.
        {"id": "application_1_0003", "state": "FINISHED", "applicationType": "Apache Flink"},
        {"id": "application_1_0004", "state": "RUNNING", "applicationType": "MAPREDUCE"},
    ]}}))
    .await;
    let observer = Arc::new(Recorder::default());
    let mut yarn = yarn_source("yarn-a", &rm.uri(), JobManagerAccess::Direct);
    yarn = JobSource::new(
        yarn.name(),
        yarn.kind().clone(),
        JobSelection::new(&[], &["*-canary"]).expect("glob"),
    )
    .expect("source");
    let fetcher = MultiSourceJobListFetcher::new(
        vec![flink_source("prod", &jm_a.uri(), JobSelection::all()), yarn],
        observer.clone(),
    )
    .expect("fetcher");
    let jobs = fetcher.fetch(&Configuration::new()).await.expect("fetch");
    assert_eq!(
        keys(&jobs),
        vec![
            (format!("prod/{J1}"), Some(JobStatus::Running)),
            (format!("yarn-a/application_1_0002/{J2}"), Some(JobStatus::Running)),
        ]
    );
    let yarn_job = jobs.iter().find(|j| j.labels.source == "yarn-a").expect("yarn job");
    assert_eq!(yarn_job.labels.application.as_deref(), Some("application_1_0002"));
    assert_eq!(yarn_job.labels.job_name, "billing");
    assert_eq!(yarn_job.client.base_url(), format!("{}/", jm_b.uri()));
    assert_eq!(yarn_job.configuration.get("jobmanager.scheduler"), Some("adaptive"));
    let mut fetched = observer.take();
    fetched.sort();
    assert_eq!(fetched, vec![("prod".into(), Ok(1)), ("yarn-a".into(), Ok(1))]);
}

#[tokio::test]
async fn apps_null_is_an_empty_list() {
    let rm = resource_manager(json!({"apps": null})).await;
    let observer = Arc::new(Recorder::default());
    let fetcher = MultiSourceJobListFetcher::new(
        vec![yarn_source("y", &rm.uri(), JobManagerAccess::Direct)],
        observer.clone(),
    )
    .expect("fetcher");
    assert!(fetcher.fetch(&Configuration::new()).await.expect("fetch").is_empty());
    assert_eq!(observer.take(), vec![("y".into(), Ok(0))]);
}

#[tokio::test]
async fn resource_manager_down_is_skipped_and_the_other_sources_go_on() {
    let jm = jobmanager(&[(J1, "orders")]).await;
    let observer = Arc::new(Recorder::default());
    let down = format!("http://127.0.0.1:{}", closed_port());
    let fetcher = MultiSourceJobListFetcher::new(
        vec![
            flink_source("prod", &jm.uri(), JobSelection::all()),
            yarn_source("y", &down, JobManagerAccess::Direct),
        ],
        observer.clone(),
    )
    .expect("fetcher");
    let jobs = fetcher.fetch(&Configuration::new()).await.expect("one source is up");
    assert_eq!(keys(&jobs), vec![(format!("prod/{J1}"), Some(JobStatus::Running))]);
    let mut fetched = observer.take();
    fetched.sort();
    assert_eq!(fetched[0], ("prod".into(), Ok(1)));
    let (name, outcome) = &fetched[1];
    assert_eq!(name, "y");
    assert!(
        outcome.as_ref().is_err_and(|e| e.contains("ws/v1/cluster/apps")),
        "{outcome:?}"
    );

    // Every source down: the fetch fails, so the control loop skips the cycle and cleans nothing.
    let only_down = MultiSourceJobListFetcher::new(
        vec![yarn_source("y", &down, JobManagerAccess::Direct)],
        observer.clone(),
    )
    .expect("fetcher");
    assert!(only_down.fetch(&Configuration::new()).await.is_err());
}

#[tokio::test]
async fn malformed_answers_fail_only_their_source() {
    let rm = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/ws/v1/cluster/apps"))
        .respond_with(ResponseTemplate::new(200).set_body_string("{\"apps\": {\"app\": [ {\"id\": 7"))
        .mount(&rm)
        .await;
    let jm = jobmanager(&[(J1, "orders")]).await;
    let observer = Arc::new(Recorder::default());
    let fetcher = MultiSourceJobListFetcher::new(
        vec![
            yarn_source("y", &rm.uri(), JobManagerAccess::Direct),
            flink_source("prod", &jm.uri(), JobSelection::all()),
        ],
        observer.clone(),
    )
    .expect("fetcher");
    let jobs = fetcher.fetch(&Configuration::new()).await.expect("fetch");
    assert_eq!(jobs.len(), 1);
    let failed: Vec<_> = observer.take().into_iter().filter(|(_, o)| o.is_err()).collect();
    assert_eq!(failed.len(), 1);
    assert!(
        failed[0].1.as_ref().is_err_and(|e| e.contains("does not parse")),
        "{failed:?}"
    );
}

/// Mounts an RM answer that replaces earlier ones (wiremock: the newest mock with the same
/// priority wins only if the earlier is reset, so reset first).
async fn set_apps(rm: &MockServer, body: serde_json::Value) {
    rm.reset().await;
    Mock::given(method("GET"))
        .and(path("/ws/v1/cluster/apps"))
        .respond_with(ResponseTemplate::new(200).set_body_json(body))
        .mount(rm)
        .await;
}

#[tokio::test]
async fn an_application_that_is_gone_vanishes_and_an_unreachable_one_keeps_its_jobs() {
    let jm1 = jobmanager(&[(J1, "a")]).await;
    let jm2 = jobmanager(&[(J2, "b")]).await;
    let rm = MockServer::start().await;
    set_apps(
        &rm,
        json!({"apps": {"app": [
            app("application_1_0001", &host_port(&jm1), "http://unused/"),
            app("application_1_0002", &host_port(&jm2), "http://unused/"),
        ]}}),
    )
    .await;
    let observer = Arc::new(Recorder::default());
    let fetcher = MultiSourceJobListFetcher::new(
        vec![yarn_source("y", &rm.uri(), JobManagerAccess::Direct)],
        observer.clone(),
    )
    .expect("fetcher");
    let first = fetcher.fetch(&Configuration::new()).await.expect("fetch");
    assert_eq!(first.len(), 2);

    // Application 2 is still RUNNING on YARN but its JobManager refuses connections: its job stays
    // in the list with an unknown status (not scaled, not cleaned up). Application 1 is gone.
    let refused = format!("127.0.0.1:{}", closed_port());
    set_apps(
        &rm,
        json!({"apps": {"app": [app("application_1_0002", &refused, "http://unused/")]}}),
    )
    .await;
    let second = fetcher.fetch(&Configuration::new()).await.expect("fetch");
    assert_eq!(keys(&second), vec![(format!("y/application_1_0002/{J2}"), None)]);
    let outcome = observer.take().pop().expect("observed");
    assert!(outcome.1.is_err_and(|e| e.contains("application_1_0002")));

    // The RM itself goes down: the kept job stays kept.
    set_apps(&rm, json!({})).await;
    rm.reset().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(503))
        .mount(&rm)
        .await;
    let third = fetcher.fetch(&Configuration::new()).await;
    assert!(third.is_err(), "the only source failed");

    // The application ends: its job vanishes.
    set_apps(&rm, json!({"apps": null})).await;
    assert!(fetcher.fetch(&Configuration::new()).await.expect("fetch").is_empty());
}

/// A YARN source is listed (for readiness) while one of its applications answers; a failed
/// application still counts as a failed fetch.
#[tokio::test]
async fn a_source_is_listed_while_one_of_its_applications_answers() {
    let jm1 = jobmanager(&[(J1, "a")]).await;
    let refused = format!("127.0.0.1:{}", closed_port());
    let rm = MockServer::start().await;
    set_apps(
        &rm,
        json!({"apps": {"app": [
            app("application_1_0001", &host_port(&jm1), "http://unused/"),
            app("application_1_0002", &refused, "http://unused/"),
        ]}}),
    )
    .await;
    let observer = Arc::new(Recorder::default());
    let fetcher = MultiSourceJobListFetcher::new(
        vec![yarn_source("y", &rm.uri(), JobManagerAccess::Direct)],
        observer.clone(),
    )
    .expect("fetcher");
    let jobs = fetcher.fetch(&Configuration::new()).await.expect("fetch");
    assert_eq!(jobs.len(), 1);
    let outcome = observer.take().pop().expect("observed");
    assert!(outcome.1.is_err_and(|e| e.contains("application_1_0002")));
    assert_eq!(observer.take_listed(), vec!["y".to_owned()]);

    // Every application fails: the source is not listed.
    set_apps(
        &rm,
        json!({"apps": {"app": [app("application_1_0002", &refused, "http://unused/")]}}),
    )
    .await;
    let _ = fetcher.fetch(&Configuration::new()).await;
    assert!(observer.take_listed().is_empty());
    // No application at all: listed (nothing to list).
    set_apps(&rm, json!({"apps": null})).await;
    let _ = fetcher.fetch(&Configuration::new()).await;
    assert_eq!(observer.take_listed(), vec!["y".to_owned()]);
}

#[tokio::test]
async fn jobmanagers_behind_the_rm_proxy_and_proxy_errors() {
    let rm = MockServer::start().await;
    let app_id = "application_1_0009";
    let tracking = format!("{}/proxy/{app_id}/", rm.uri());
    Mock::given(method("GET"))
        .and(path("/ws/v1/cluster/apps"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"apps": {"app": [
            app(app_id, "unreachable:1", &tracking)
        ]}})))
        .mount(&rm)
        .await;
    mount_jobmanager(&rm, &format!("/proxy/{app_id}"), &[(J3, "via-proxy")]).await;
    let observer = Arc::new(Recorder::default());
    let fetcher = MultiSourceJobListFetcher::new(
        vec![yarn_source("y", &rm.uri(), JobManagerAccess::Proxy)],
        observer.clone(),
    )
    .expect("fetcher");
    let jobs = fetcher.fetch(&Configuration::new()).await.expect("fetch");
    assert_eq!(
        keys(&jobs),
        vec![(format!("y/{app_id}/{J3}"), Some(JobStatus::Running))]
    );
    assert_eq!(jobs[0].client.base_url(), tracking);

    // The proxy starts answering 500: the job is kept, unscaled, and the failure is reported.
    rm.reset().await;
    Mock::given(method("GET"))
        .and(path("/ws/v1/cluster/apps"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"apps": {"app": [
            app(app_id, "unreachable:1", &tracking)
        ]}})))
        .mount(&rm)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("/proxy/{app_id}/jobs/overview")))
        .respond_with(ResponseTemplate::new(500).set_body_string("proxy error"))
        .mount(&rm)
        .await;
    let kept = fetcher.fetch(&Configuration::new()).await.expect("fetch");
    assert_eq!(keys(&kept), vec![(format!("y/{app_id}/{J3}"), None)]);
    let last = observer.take().pop().expect("observed");
    assert!(last.1.is_err_and(|e| e.contains("500")));
}

#[tokio::test]
async fn each_source_sends_its_own_auth_header() {
    let jm = MockServer::start().await;
    // Only requests with the right header get an answer.
    Mock::given(method("GET"))
        .and(path("/jobs/overview"))
        .and(header("authorization", "Bearer tok-a"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"jobs": []})))
        .mount(&jm)
        .await;
    Mock::given(method("GET"))
        .and(path("/jobs/overview"))
        .and(header("authorization", "Basic dTpwQHNz")) // base64("u:p@ss")
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"jobs": []})))
        .mount(&jm)
        .await;
    let with = |auth: Option<AuthHeader>| RestClientConfig {
        auth_header: auth,
        ..config()
    };
    let sources = vec![
        JobSource::new(
            "a",
            SourceKind::FlinkCluster(
                FlinkRestClient::new(&jm.uri(), with(Some(AuthHeader::bearer("tok-a")))).expect("c"),
            ),
            JobSelection::all(),
        )
        .expect("s"),
        // Credentials in the URL become a basic auth header and leave the URL.
        JobSource::new(
            "b",
            SourceKind::FlinkCluster(
                FlinkRestClient::new(&jm.uri().replace("http://", "http://u:p%40ss@"), with(None)).expect("c"),
            ),
            JobSelection::all(),
        )
        .expect("s"),
        JobSource::new(
            "none",
            SourceKind::FlinkCluster(FlinkRestClient::new(&jm.uri(), with(None)).expect("c")),
            JobSelection::all(),
        )
        .expect("s"),
    ];
    let b_client = match sources[1].kind() {
        SourceKind::FlinkCluster(c) => c.clone(),
        SourceKind::Yarn { .. } => unreachable!(),
    };
    assert!(!b_client.base_url().contains("p%40ss") && !format!("{b_client:?}").contains("p%40ss"));
    let observer = Arc::new(Recorder::default());
    let fetcher = MultiSourceJobListFetcher::new(sources, observer.clone()).expect("fetcher");
    fetcher.fetch(&Configuration::new()).await.expect("fetch");
    let mut fetched = observer.take();
    fetched.sort();
    assert_eq!(fetched[0], ("a".into(), Ok(0)));
    assert_eq!(fetched[1], ("b".into(), Ok(0)));
    assert!(fetched[2].1.is_err(), "no header, no answer: {fetched:?}");
}

#[tokio::test]
async fn a_jobs_configuration_is_asked_once_per_job_and_again_for_a_new_start_time() {
    let jm = jobmanager(&[(J1, "orders"), (J2, "billing")]).await;
    let fetcher = MultiSourceJobListFetcher::new(
        vec![flink_source("prod", &jm.uri(), JobSelection::all())],
        Arc::new(NoopSourceObserver),
    )
    .expect("fetcher");
    let config_requests = |job: &'static str| {
        let jm = &jm;
        async move {
            let requests = jm.received_requests().await.unwrap_or_default();
            let at = format!("/jobs/{job}/jobmanager/config");
            requests.iter().filter(|r| r.url.path() == at).count()
        }
    };
    for _ in 0..3 {
        let jobs = fetcher.fetch(&Configuration::new()).await.expect("fetch");
        assert_eq!(jobs.len(), 2);
        assert!(
            jobs.iter()
                .all(|j| j.configuration.get("jobmanager.scheduler") == Some("adaptive"))
        );
    }
    assert_eq!(config_requests(J1).await, 1);
    assert_eq!(config_requests(J2).await, 1);

    // J1 resubmitted under the same id (a new start time): its configuration is asked again.
    jm.reset().await;
    let overview = json!({"jobs": [
        {"jid": J1, "name": "orders", "state": "RUNNING", "start-time": 2,
         "tasks": {"total": 1, "running": 1, "finished": 0}},
        {"jid": J2, "name": "billing", "state": "RUNNING", "start-time": 1,
         "tasks": {"total": 1, "running": 1, "finished": 0}},
    ]});
    Mock::given(method("GET"))
        .and(path("/jobs/overview"))
        .respond_with(ResponseTemplate::new(200).set_body_json(overview))
        .mount(&jm)
        .await;
    for id in [J1, J2] {
        Mock::given(method("GET"))
            .and(path(format!("/jobs/{id}/jobmanager/config")))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!([{"key": "k", "value": "v2"}])))
            .mount(&jm)
            .await;
    }
    let jobs = fetcher.fetch(&Configuration::new()).await.expect("fetch");
    let conf = |id: &str| {
        jobs.iter()
            .find(|j| j.labels.job_id == id)
            .map(|j| j.configuration.get("k").map(str::to_owned))
    };
    assert_eq!(conf(J1), Some(Some("v2".to_owned())));
    assert_eq!(conf(J2), Some(None), "J2 kept its configuration");
    assert_eq!(config_requests(J1).await, 1);
    assert_eq!(config_requests(J2).await, 0);
}
