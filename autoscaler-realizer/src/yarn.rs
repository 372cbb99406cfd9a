//! YARN: the Flink applications a ResourceManager runs, and how to reach their JobManagers.
//!
//! FLIP-334 names a YARN job list fetcher; the reference has none. [`YarnResourceManagerClient`]
//! lists the RUNNING applications of type `Apache Flink` through the ResourceManager REST API
//! (`GET /ws/v1/cluster/apps?states=RUNNING&applicationTypes=Apache%20Flink`) and
//! [`YarnApplication::jobmanager_url`] gives the REST address of each one's JobManager:
//!
//! - [`JobManagerAccess::Direct`] (the default): `http://<amRPCAddress>`. Flink registers its
//!   JobManager REST host and port as the application master's RPC address, so this reaches the
//!   JobManager without the RM in the path (rescale `PUT`s included).
//! - [`JobManagerAccess::Proxy`]: the application's `trackingUrl`, the RM web proxy
//!   (`http://rm:8088/proxy/<application id>/`). Use it when the JobManagers are not reachable
//!   from the autoscaler; the proxy must forward `PUT` (Hadoop 3 does).
//!
//! The RM answers `{"apps":null}` when nothing runs; that is an empty list, not an error. Every
//! answer is checked again (state, type, a well-formed application id), as an old RM may ignore
//! the query filters. Kerberos/SPNEGO authentication is not supported: use a bearer or basic auth
//! header in front of a secured RM.

use crate::rest::{FlinkRestClient, RestClientConfig, RestError};
use serde::Deserialize;
use std::fmt;

/// The application type Flink registers on YARN.
pub const FLINK_APPLICATION_TYPE: &str = "Apache Flink";

/// How the autoscaler reaches the JobManager of a YARN application.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum JobManagerAccess {
    /// `scheme://<amRPCAddress>`: the REST host and port Flink registered (default, `http`).
    #[default]
    Direct,
    /// Like [`Self::Direct`] over `https`.
    DirectHttps,
    /// The application's `trackingUrl` (the RM web proxy).
    Proxy,
}

impl JobManagerAccess {
    /// Parses `direct`, `direct-https` or `proxy` (case-insensitive).
    pub fn parse(value: &str) -> Option<Self> {
        match value.trim().to_ascii_lowercase().as_str() {
            "direct" => Some(Self::Direct),
            "direct-https" => Some(Self::DirectHttps),
            "proxy" => Some(Self::Proxy),
            _ => None,
        }
    }
}

impl fmt::Display for JobManagerAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Direct => "direct",
            Self::DirectHttps => "direct-https",
            Self::Proxy => "proxy",
        })
    }
}

/// Why a YARN application's JobManager cannot be addressed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum YarnError {
    /// The application report lacks the address the access mode needs.
    #[error("application {application}: no usable {field} in its report ({value:?})")]
    MissingAddress {
        /// The application id.
        application: String,
        /// `amRPCAddress` or `trackingUrl`.
        field: &'static str,
        /// What the report had.
        value: Option<String>,
    },
}

/// One application of the ResourceManager's answer (the fields the autoscaler uses).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct YarnApplication {
    /// `application_<cluster timestamp>_<sequence>`.
    pub id: String,
    /// The application name (Flink: the cluster or job name).
    #[serde(default)]
    pub name: String,
    /// YARN state (`RUNNING`, ...).
    #[serde(default)]
    pub state: String,
    /// Application type (`Apache Flink`).
    #[serde(default)]
    pub application_type: String,
    /// The RM web proxy URL of the application.
    #[serde(default)]
    pub tracking_url: Option<String>,
    /// `host:port` the application master registered (Flink: its REST endpoint).
    #[serde(default, rename = "amRPCAddress")]
    pub am_rpc_address: Option<String>,
}

impl YarnApplication {
    /// The REST base URL of the application's JobManager under `access`.
    ///
    /// ```
    /// use autoscaler_realizer::yarn::{JobManagerAccess, YarnApplication};
    /// let app = YarnApplication {
    ///     id: "application_1700000000000_0001".into(), name: "orders".into(), state: "RUNNING".into(),
    ///     application_type: "Apache Flink".into(),
    ///     tracking_url: Some("http://rm:8088/proxy/application_1700000000000_0001/".into()),
    ///     am_rpc_address: Some("node7:40123".into()),
    /// };
    /// assert_eq!(app.jobmanager_url(JobManagerAccess::Direct).unwrap(), "http://node7:40123");
    /// assert_eq!(app.jobmanager_url(JobManagerAccess::Proxy).unwrap(), "http://rm:8088/proxy/application_1700000000000_0001/");
    /// ```
    pub fn jobmanager_url(&self, access: JobManagerAccess) -> Result<String, YarnError> {
        let missing = |field, value: &Option<String>| YarnError::MissingAddress {
            application: self.id.clone(),
            field,
            value: value.clone(),
        };
        match access {
            JobManagerAccess::Direct | JobManagerAccess::DirectHttps => {
                let address = self
                    .am_rpc_address
                    .as_deref()
                    .map(str::trim)
                    .filter(|a| is_host_port(a))
                    .ok_or_else(|| missing("amRPCAddress", &self.am_rpc_address))?;
                let scheme = if access == JobManagerAccess::Direct {
                    "http"
                } else {
                    "https"
                };
                Ok(format!("{scheme}://{address}"))
            }
            JobManagerAccess::Proxy => {
                let url = self
                    .tracking_url
                    .as_deref()
                    .map(str::trim)
                    .filter(|u| u.starts_with("http://") || u.starts_with("https://"))
                    .ok_or_else(|| missing("trackingUrl", &self.tracking_url))?;
                Ok(url.to_owned())
            }
        }
    }

    fn is_running_flink(&self) -> bool {
        self.state.eq_ignore_ascii_case("RUNNING") && self.application_type.eq_ignore_ascii_case(FLINK_APPLICATION_TYPE)
    }
}

/// `host:port` with a non-empty host of URL-safe characters and a port in 1..=65535.
fn is_host_port(address: &str) -> bool {
    let Some((host, port)) = address.rsplit_once(':') else {
        return false;
    };
    let host_ok = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '[' | ']' | ':'));
    host_ok && port.parse::<u16>().is_ok_and(|p| p > 0)
}

/// `application_<digits>_<digits>`: the only ids used in keys and URLs.
fn is_application_id(id: &str) -> bool {
    let mut parts = id.split('_');
    parts.next() == Some("application")
        && parts
            .next()
            .is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        && parts
            .next()
            .is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        && parts.next().is_none()
}

#[derive(Debug, Deserialize)]
struct AppsResponse {
    #[serde(default)]
    apps: Option<AppList>,
}

#[derive(Debug, Deserialize)]
struct AppList {
    #[serde(default)]
    app: Vec<YarnApplication>,
}

/// A client of one YARN ResourceManager's REST API (cheap to clone).
#[derive(Debug, Clone)]
pub struct YarnResourceManagerClient {
    client: FlinkRestClient,
}

impl YarnResourceManagerClient {
    /// A client of the RM at `rm_url` (`http://rm:8088`), with the same timeouts, retries, auth
    /// header and TLS settings as the Flink client.
    pub fn new(rm_url: &str, config: RestClientConfig) -> Result<Self, RestError> {
        Ok(Self {
            client: FlinkRestClient::new(rm_url, config)?,
        })
    }

    /// The RM's base URL (without credentials).
    pub fn base_url(&self) -> &str {
        self.client.base_url()
    }

    /// The RUNNING applications of type `Apache Flink`, sorted by id. Entries of another state or
    /// type, or with a malformed id, are dropped (with a debug log).
    pub async fn running_flink_applications(&self) -> Result<Vec<YarnApplication>, RestError> {
        let query = [
            ("states", "RUNNING".to_owned()),
            ("applicationTypes", FLINK_APPLICATION_TYPE.to_owned()),
        ];
        let response: AppsResponse = self
            .client
            .get("/ws/v1/cluster/apps", "ws/v1/cluster/apps", &query)
            .await?;
        Ok(running_flink_applications(response))
    }
}

/// The RUNNING applications of type `Apache Flink` in an RM answer body (`GET
/// /ws/v1/cluster/apps`), sorted by id, as [`YarnResourceManagerClient::running_flink_applications`]
/// reads them: `{"apps":null}` is no application; entries of another state or type, or with a
/// malformed id, are dropped; a repeated id is kept once.
///
/// ```
/// use autoscaler_realizer::yarn::running_flink_applications_in;
/// assert!(running_flink_applications_in(br#"{"apps":null}"#).unwrap().is_empty());
/// let body = br#"{"apps":{"app":[{"id":"application_1_0001","state":"RUNNING","applicationType":"Apache Flink"},
///                                  {"id":"../x","state":"RUNNING","applicationType":"Apache Flink"}]}}"#;
/// assert_eq!(running_flink_applications_in(body).unwrap().len(), 1);
/// ```
pub fn running_flink_applications_in(body: &[u8]) -> Result<Vec<YarnApplication>, serde_json::Error> {
    serde_json::from_slice::<AppsResponse>(body).map(running_flink_applications)
}

fn running_flink_applications(response: AppsResponse) -> Vec<YarnApplication> {
    let mut apps: Vec<YarnApplication> = response
        .apps
        .map(|list| list.app)
        .unwrap_or_default()
        .into_iter()
        .filter(|app| {
            let keep = app.is_running_flink() && is_application_id(&app.id);
            if !keep {
                tracing::debug!(application = %app.id, state = %app.state, kind = %app.application_type, "skipping YARN application");
            }
            keep
        })
        .collect();
    apps.sort_by(|a, b| a.id.cmp(&b.id));
    apps.dedup_by(|a, b| a.id == b.id);
    apps
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(am: Option<&str>, tracking: Option<&str>) -> YarnApplication {
        YarnApplication {
            id: "application_1_0002".into(),
            name: "n".into(),
            state: "RUNNING".into(),
            application_type: "Apache Flink".into(),
            tracking_url: tracking.map(Into::into),
            am_rpc_address: am.map(Into::into),
        }
    }

    #[test]
    fn jobmanager_urls_follow_the_access_mode_and_reject_unusable_addresses() {
        let a = app(Some("10.0.0.7:8081"), Some("https://rm/proxy/application_1_0002/"));
        assert_eq!(
            a.jobmanager_url(JobManagerAccess::Direct).ok().as_deref(),
            Some("http://10.0.0.7:8081")
        );
        assert_eq!(
            a.jobmanager_url(JobManagerAccess::DirectHttps).ok().as_deref(),
            Some("https://10.0.0.7:8081")
        );
        assert_eq!(
            a.jobmanager_url(JobManagerAccess::Proxy).ok().as_deref(),
            Some("https://rm/proxy/application_1_0002/")
        );
        for bad in ["N/A", "host", "host:0", "host:99999", "a/b:80", ":80"] {
            let err = app(Some(bad), None).jobmanager_url(JobManagerAccess::Direct);
            assert!(
                matches!(
                    err,
                    Err(YarnError::MissingAddress {
                        field: "amRPCAddress",
                        ..
                    })
                ),
                "{bad}"
            );
        }
        assert!(app(None, Some("N/A")).jobmanager_url(JobManagerAccess::Proxy).is_err());
    }

    #[test]
    fn application_ids_and_access_modes_parse() {
        assert!(is_application_id("application_1700000000000_0001"));
        for bad in [
            "application_1",
            "application__1",
            "app_1_2",
            "application_1_2/../x",
            "application_1_2_3",
        ] {
            assert!(!is_application_id(bad), "{bad}");
        }
        assert_eq!(JobManagerAccess::parse("Proxy"), Some(JobManagerAccess::Proxy));
        assert_eq!(JobManagerAccess::parse("direct"), Some(JobManagerAccess::Direct));
        assert_eq!(JobManagerAccess::parse("tunnel"), None);
    }
}
