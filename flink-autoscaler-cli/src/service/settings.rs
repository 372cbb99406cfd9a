//! From flags and configuration keys to sources, state store and event handler.
//!
//! # Sources
//!
//! `--flink-url [NAME=]URL` and `--yarn-rm-url [NAME=]URL` (repeatable), or in the file
//! [`FLINK_CLUSTERS_KEY`] / [`YARN_RESOURCE_MANAGERS_KEY`] (lists of `[NAME=]URL`), or the
//! reference's `autoscaler.standalone.fetcher.flink-cluster.host`/`.port`. Source flags on the
//! command line replace every source of the file; with none anywhere, the reference's host/port
//! keys (default `localhost:8081`) name one cluster. An unnamed source is named after its host and
//! port (`127.0.0.1-8081`), so that its job keys stay the same across restarts.
//!
//! Per source `NAME`, under `autoscaler.service.source.NAME.` ([`source_key`]):
//!
//! | key | value |
//! |---|---|
//! | `auth.bearer-token` | `env:VAR` or `file:PATH`: `Authorization: Bearer ...` |
//! | `auth.username`, `auth.password` | user, and `env:VAR` or `file:PATH`: basic auth |
//! | `tls.ca-file` | PEM file of extra CA certificates to trust |
//! | `tls.client-identity-file` | PEM file with a client certificate and its key (mutual TLS) |
//! | `jobs.include`, `jobs.exclude` | `;`-separated glob patterns on job names |
//! | `yarn.jobmanager-access` | `direct` (default), `direct-https` or `proxy` |
//!
//! Secrets are never literal values: only `env:` and `file:` are accepted.
//!
//! # State store and events
//!
//! `--state URL` wins; otherwise `autoscaler.standalone.state-store.type` `MEMORY` is `memory` and
//! `JDBC` is `autoscaler.standalone.jdbc.url` translated ([`jdbc_to_sqlx_url`]) with
//! `jdbc.username` and the password from the environment variable `jdbc.password-env-variable`
//! (default `JDBC_PWD`); unset, our durable default, a SQLite file. `event-handler.type` `JDBC`
//! stores events in the same JDBC database with `jdbc.event-handler.ttl` (90 d; 0 = keep forever).

use autoscaler_core::config::Configuration;
use autoscaler_core::config::parse_duration;
use autoscaler_core::secret::{Secret, SecretSource, redact_url};
use autoscaler_realizer::sources::{JobSelection, JobSource, SourceKind};
use autoscaler_realizer::yarn::{JobManagerAccess, YarnResourceManagerClient};
use autoscaler_realizer::{rest::AuthHeader, rest::FlinkRestClient, rest::RestClientConfig, rest::TlsConfig};
use std::fmt;
use std::time::Duration;

/// Our list key of Flink cluster sources (`[NAME=]URL;...`).
pub const FLINK_CLUSTERS_KEY: &str = "autoscaler.service.flink-clusters";
/// Our list key of YARN ResourceManager sources (`[NAME=]URL;...`).
pub const YARN_RESOURCE_MANAGERS_KEY: &str = "autoscaler.service.yarn-resource-managers";
/// The reference's state store type key (`MEMORY` | `JDBC`).
pub const STATE_STORE_TYPE: &str = "autoscaler.standalone.state-store.type";
/// The reference's event handler type key (`LOGGING` | `JDBC`).
pub const EVENT_HANDLER_TYPE: &str = "autoscaler.standalone.event-handler.type";
/// The reference's JDBC URL key.
pub const JDBC_URL: &str = "autoscaler.standalone.jdbc.url";
/// The reference's JDBC user key.
pub const JDBC_USERNAME: &str = "autoscaler.standalone.jdbc.username";
/// The reference's key naming the environment variable of the JDBC password.
pub const JDBC_PASSWORD_ENV_VARIABLE: &str = "autoscaler.standalone.jdbc.password-env-variable";
/// The reference's event TTL key (default 90 d).
pub const JDBC_EVENT_HANDLER_TTL: &str = "autoscaler.standalone.jdbc.event-handler.ttl";
/// Default of [`JDBC_PASSWORD_ENV_VARIABLE`].
pub const DEFAULT_JDBC_PASSWORD_ENV: &str = "JDBC_PWD";
/// Our default state store: a SQLite file in the working directory.
pub const DEFAULT_STATE_URL: &str = "sqlite:flink-autoscaler-state.db";

/// Every `autoscaler.standalone.*` key the reference defines (all are honoured here).
pub const STANDALONE_KEYS: &[&str] = &[
    autoscaler_core::CONTROL_LOOP_INTERVAL_KEY,
    autoscaler_core::CONTROL_LOOP_PARALLELISM_KEY,
    autoscaler_realizer::FLINK_CLUSTER_HOST,
    autoscaler_realizer::FLINK_CLUSTER_PORT,
    STATE_STORE_TYPE,
    EVENT_HANDLER_TYPE,
    JDBC_URL,
    JDBC_USERNAME,
    JDBC_PASSWORD_ENV_VARIABLE,
    JDBC_EVENT_HANDLER_TTL,
];

/// A configuration or flag that cannot be used. Messages never contain a secret.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SettingsError {
    /// A value is invalid.
    #[error("{key}: {reason}")]
    Invalid {
        /// The flag or key.
        key: String,
        /// What is wrong (no secret in it).
        reason: String,
    },
}

fn invalid(key: impl Into<String>, reason: impl Into<String>) -> SettingsError {
    SettingsError::Invalid {
        key: key.into(),
        reason: reason.into(),
    }
}

/// The kind of a source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceType {
    /// A Flink cluster's REST API.
    Flink,
    /// A YARN ResourceManager.
    Yarn,
}

/// A named source URL, before its per-source settings are applied.
#[derive(Clone, PartialEq, Eq)]
pub struct SourceSpec {
    /// The name (first part of the job keys).
    pub name: String,
    /// The kind.
    pub kind: SourceType,
    /// The URL (may hold credentials: print it with [`redact_url`]).
    pub url: String,
}

impl fmt::Debug for SourceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SourceSpec")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("url", &redact_url(&self.url))
            .finish()
    }
}

impl fmt::Display for SourceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            SourceType::Flink => "flink",
            SourceType::Yarn => "yarn",
        };
        write!(f, "{}={kind}:{}", self.name, redact_url(&self.url))
    }
}

/// Parses `[NAME=]URL`.
///
/// ```
/// use flink_autoscaler_cli::service::settings::{SourceSpec, SourceType, parse_source};
/// let s = parse_source("prod=http://jm:8081", SourceType::Flink, "--flink-url").unwrap();
/// assert_eq!((s.name.as_str(), s.url.as_str()), ("prod", "http://jm:8081"));
/// assert_eq!(parse_source("http://10.0.0.1:8081/", SourceType::Flink, "--flink-url").unwrap().name, "10.0.0.1-8081");
/// ```
pub fn parse_source(spec: &str, kind: SourceType, key: &str) -> Result<SourceSpec, SettingsError> {
    let spec = spec.trim();
    let (name, url) = match spec.split_once('=') {
        Some((name, url)) if !name.contains("://") && !name.contains('/') => (Some(name.trim()), url.trim()),
        _ => (None, spec),
    };
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(invalid(key, format!("{:?} is not an http(s) URL", redact_url(url))));
    };
    if !matches!(scheme, "http" | "https") {
        return Err(invalid(key, format!("{:?} is not an http(s) URL", redact_url(url))));
    }
    let name = match name {
        Some(n) => n.to_owned(),
        None => {
            let authority = rest.split('/').next().unwrap_or_default();
            let host_port = authority.rsplit('@').next().unwrap_or_default();
            let port = if host_port.contains(':') && !host_port.ends_with(']') {
                String::new()
            } else if scheme == "https" {
                ":443".to_owned()
            } else {
                ":80".to_owned()
            };
            format!("{host_port}{port}")
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                        c
                    } else {
                        '-'
                    }
                })
                .collect()
        }
    };
    if !autoscaler_realizer::sources::is_source_name(&name) {
        return Err(invalid(
            key,
            format!("source name {name:?}: use letters, digits, '.', '_' and '-'"),
        ));
    }
    Ok(SourceSpec {
        name,
        kind,
        url: url.to_owned(),
    })
}

/// The sources from the flags (which win) or the file; see the module documentation.
pub fn source_specs(
    flink_urls: &[String],
    yarn_urls: &[String],
    conf: &Configuration,
) -> Result<Vec<SourceSpec>, SettingsError> {
    let mut specs = Vec::new();
    if !flink_urls.is_empty() || !yarn_urls.is_empty() {
        for url in flink_urls {
            specs.push(parse_source(url, SourceType::Flink, "--flink-url")?);
        }
        for url in yarn_urls {
            specs.push(parse_source(url, SourceType::Yarn, "--yarn-rm-url")?);
        }
    } else {
        for (key, kind) in [
            (FLINK_CLUSTERS_KEY, SourceType::Flink),
            (YARN_RESOURCE_MANAGERS_KEY, SourceType::Yarn),
        ] {
            for item in list(conf.get(key)) {
                specs.push(parse_source(item, kind, key)?);
            }
        }
        let reference_keys = [
            autoscaler_realizer::FLINK_CLUSTER_HOST,
            autoscaler_realizer::FLINK_CLUSTER_HOST_DEPRECATED,
            autoscaler_realizer::FLINK_CLUSTER_PORT,
            autoscaler_realizer::FLINK_CLUSTER_PORT_DEPRECATED,
        ];
        if specs.is_empty() || reference_keys.iter().any(|k| conf.contains_key(k)) {
            let url = autoscaler_realizer::flink_cluster_rest_url(conf)
                .map_err(|e| invalid(autoscaler_realizer::FLINK_CLUSTER_PORT, e.to_string()))?;
            specs.push(parse_source(
                &url,
                SourceType::Flink,
                autoscaler_realizer::FLINK_CLUSTER_HOST,
            )?);
        }
    }
    let mut names = std::collections::HashSet::new();
    for spec in &specs {
        if !names.insert(spec.name.clone()) {
            return Err(invalid(
                "sources",
                format!("two sources are named {:?}; name them with NAME=URL", spec.name),
            ));
        }
    }
    Ok(specs)
}

fn list(value: Option<&str>) -> impl Iterator<Item = &str> {
    value
        .unwrap_or_default()
        .split([';', ','])
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

/// The key of a per-source setting: `autoscaler.service.source.<name>.<suffix>`.
pub fn source_key(name: &str, suffix: &str) -> String {
    format!("autoscaler.service.source.{name}.{suffix}")
}

fn secret_setting(conf: &Configuration, key: &str) -> Result<Option<Secret>, SettingsError> {
    let Some(value) = conf.get(key) else {
        return Ok(None);
    };
    let source = SecretSource::parse(value).ok_or_else(|| {
        invalid(
            key,
            "a secret must be given as env:VARIABLE or file:PATH, never literally",
        )
    })?;
    source.read().map(Some).map_err(|e| invalid(key, e.to_string()))
}

fn read_pem(conf: &Configuration, key: &str) -> Result<Option<Vec<u8>>, SettingsError> {
    conf.get(key)
        .map(|path| std::fs::read(path.trim()).map_err(|e| invalid(key, format!("cannot read {path}: {}", e.kind()))))
        .transpose()
}

/// The REST client settings of source `name`: `base` (timeouts) with its auth header and TLS, and
/// `name` as the `source` label of the request metrics.
pub fn source_client_config(
    name: &str,
    conf: &Configuration,
    base: &RestClientConfig,
) -> Result<RestClientConfig, SettingsError> {
    let mut config = base.clone();
    config.metrics_source = name.to_owned();
    let bearer = secret_setting(conf, &source_key(name, "auth.bearer-token"))?;
    let user = conf.get(&source_key(name, "auth.username"));
    let password = secret_setting(conf, &source_key(name, "auth.password"))?;
    config.auth_header = match (bearer, user, password) {
        (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
            return Err(invalid(
                source_key(name, "auth"),
                "set either a bearer token or a username and password, not both",
            ));
        }
        (Some(token), None, None) => Some(AuthHeader::bearer(token.expose())),
        (None, Some(user), password) => Some(AuthHeader::basic(user, password.as_ref().map_or("", |p| p.expose()))),
        (None, None, Some(_)) => {
            return Err(invalid(
                source_key(name, "auth.username"),
                "a password needs a username",
            ));
        }
        (None, None, None) => None,
    };
    config.tls = TlsConfig {
        ca_certificate_pem: read_pem(conf, &source_key(name, "tls.ca-file"))?,
        client_identity_pem: read_pem(conf, &source_key(name, "tls.client-identity-file"))?,
        accept_invalid_certificates: false,
    };
    Ok(config)
}

/// Builds the [`JobSource`] of `spec` with its per-source settings.
pub fn build_source(
    spec: &SourceSpec,
    conf: &Configuration,
    base: &RestClientConfig,
) -> Result<JobSource, SettingsError> {
    let config = source_client_config(&spec.name, conf, base)?;
    let include_key = source_key(&spec.name, "jobs.include");
    let exclude_key = source_key(&spec.name, "jobs.exclude");
    let include: Vec<&str> = list(conf.get(&include_key)).collect();
    let exclude: Vec<&str> = list(conf.get(&exclude_key)).collect();
    let selection = JobSelection::new(&include, &exclude).map_err(|e| invalid(&include_key, e.to_string()))?;
    let shown = format!("source {}", spec.name);
    let kind = match spec.kind {
        SourceType::Flink => SourceKind::FlinkCluster(
            FlinkRestClient::new(&spec.url, config).map_err(|e| invalid(&shown, e.to_string()))?,
        ),
        SourceType::Yarn => {
            let access_key = source_key(&spec.name, "yarn.jobmanager-access");
            let access = match conf.get(&access_key) {
                None => JobManagerAccess::default(),
                Some(v) => JobManagerAccess::parse(v)
                    .ok_or_else(|| invalid(&access_key, format!("{v:?}: expected direct, direct-https or proxy")))?,
            };
            SourceKind::Yarn {
                resource_manager: YarnResourceManagerClient::new(&spec.url, config.clone())
                    .map_err(|e| invalid(&shown, e.to_string()))?,
                access,
                jobmanager_config: config,
            }
        }
    };
    JobSource::new(&spec.name, kind, selection).map_err(|e| invalid(&shown, e.to_string()))
}

/// Every `autoscaler.standalone.*` key of `conf` that the reference does not define.
pub fn unknown_standalone_keys(conf: &Configuration) -> Vec<String> {
    let mut unknown: Vec<String> = conf
        .iter()
        .map(|(k, _)| k)
        .filter(|k| k.starts_with("autoscaler.standalone.") && !STANDALONE_KEYS.contains(k))
        .map(str::to_owned)
        .collect();
    unknown.sort();
    unknown
}

/// Percent-encodes a URL user or password.
fn encode(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// Puts `user`/`password` into the authority of `scheme://host/...` (keeping a user already there
/// unless `user` is given).
fn with_credentials(url: &str, user: Option<&str>, password: Option<&Secret>) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let (old_user, host) = match authority.rsplit_once('@') {
        Some((info, host)) => (Some(info.split(':').next().unwrap_or_default().to_owned()), host),
        None => (None, authority),
    };
    let user = user.map(encode).or(old_user);
    let info = match (user, password) {
        (Some(u), Some(p)) => format!("{u}:{}@", encode(p.expose())),
        (Some(u), None) => format!("{u}@"),
        (None, Some(p)) => format!(":{}@", encode(p.expose())),
        (None, None) => String::new(),
    };
    format!("{scheme}://{info}{host}{tail}")
}

/// Translates a reference JDBC URL to ours: `jdbc:postgresql://h:5432/db?x` ->
/// `postgres://USER:PASSWORD@h:5432/db?x`, `jdbc:mysql://` and `jdbc:mariadb://` -> `mysql://`.
/// Derby (the reference's test database) and others are refused.
///
/// ```
/// use flink_autoscaler_cli::service::settings::jdbc_to_sqlx_url;
/// let url = jdbc_to_sqlx_url("jdbc:mysql://db:3306/flink_autoscaler", Some("app"), None).unwrap();
/// assert_eq!(url.expose(), "mysql://app@db:3306/flink_autoscaler");
/// ```
pub fn jdbc_to_sqlx_url(jdbc: &str, user: Option<&str>, password: Option<&Secret>) -> Result<Secret, SettingsError> {
    let jdbc = jdbc.trim();
    let rest = jdbc
        .strip_prefix("jdbc:")
        .ok_or_else(|| invalid(JDBC_URL, format!("{:?} does not start with jdbc:", redact_url(jdbc))))?;
    let translated = if let Some(r) = rest.strip_prefix("postgresql://") {
        translate_jdbc_tls(&format!("postgres://{r}"), JdbcDriver::Postgres)?
    } else if let Some(r) = rest
        .strip_prefix("mysql://")
        .or_else(|| rest.strip_prefix("mariadb://"))
    {
        translate_jdbc_tls(&format!("mysql://{r}"), JdbcDriver::MySql)?
    } else {
        return Err(invalid(
            JDBC_URL,
            format!(
                "{:?}: only PostgreSQL, MySQL and MariaDB are supported (or use --state sqlite:PATH)",
                redact_url(jdbc)
            ),
        ));
    };
    Ok(Secret::new(with_credentials(&translated, user, password)))
}

/// The JDBC driver family a URL was written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JdbcDriver {
    /// pgJDBC.
    Postgres,
    /// MySQL Connector/J or MariaDB Connector/J.
    MySql,
}

/// Rewrites the JDBC drivers' TLS parameters of `url`'s query into sqlx's, which ignores names it
/// does not know (a `sslMode=VERIFY_IDENTITY` left as is would silently connect without
/// verification). Other parameters are kept as they are.
///
/// - pgJDBC: `sslmode`, `sslrootcert`, `sslcert`, `sslkey` are sqlx's names too; `ssl=true`
///   without `sslmode` means `verify-full` (pgJDBC's default for it), `ssl=false` means `disable`.
/// - Connector/J and MariaDB Connector/J: `sslMode` (`DISABLED`, `PREFERRED`, `REQUIRED`,
///   `VERIFY_CA`, `VERIFY_IDENTITY`, or MariaDB's `disable`, `trust`, `verify-ca`, `verify-full`)
///   becomes `ssl-mode`; `useSSL`/`requireSSL=true` without it `REQUIRED`, `useSSL=false`
///   `DISABLED`; MariaDB's `serverSslCert=PATH` becomes `ssl-ca`. Java keystores
///   (`trustCertificateKeyStoreUrl`, `clientCertificateKeyStoreUrl`) are refused: give PEM files
///   as `ssl-ca`, `ssl-cert`, `ssl-key`.
fn translate_jdbc_tls(url: &str, driver: JdbcDriver) -> Result<String, SettingsError> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok(url.to_owned());
    };
    let pairs: Vec<(&str, &str)> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').unwrap_or((p, "")))
        .collect();
    let has = |name: &str| pairs.iter().any(|(k, _)| k.eq_ignore_ascii_case(name));
    let mut out: Vec<(String, String)> = Vec::with_capacity(pairs.len());
    for &(key, value) in &pairs {
        let flag = value.eq_ignore_ascii_case("true");
        match (driver, key) {
            (JdbcDriver::Postgres, "ssl") if !has("sslmode") => {
                out.push(("sslmode".into(), if flag { "verify-full" } else { "disable" }.into()));
            }
            (JdbcDriver::Postgres, "ssl") => {}
            (JdbcDriver::MySql, "sslMode") => {
                let mode = match value.to_ascii_lowercase().as_str() {
                    "disabled" | "disable" => "DISABLED",
                    "preferred" => "PREFERRED",
                    "required" | "trust" => "REQUIRED",
                    "verify_ca" | "verify-ca" => "VERIFY_CA",
                    "verify_identity" | "verify-full" => "VERIFY_IDENTITY",
                    _ => {
                        return Err(invalid(
                            JDBC_URL,
                            format!(
                                "sslMode={value:?}: expected DISABLED, PREFERRED, REQUIRED, VERIFY_CA or VERIFY_IDENTITY"
                            ),
                        ));
                    }
                };
                out.push(("ssl-mode".into(), mode.into()));
            }
            (JdbcDriver::MySql, "useSSL" | "useSsl" | "requireSSL") if !has("sslMode") && !has("ssl-mode") => {
                // Both true: REQUIRED; useSSL=false: DISABLED (requireSSL=false alone says nothing).
                if flag && !out.iter().any(|(k, _)| k == "ssl-mode") {
                    out.push(("ssl-mode".into(), "REQUIRED".into()));
                } else if !flag && key != "requireSSL" {
                    out.retain(|(k, _)| k != "ssl-mode");
                    out.push(("ssl-mode".into(), "DISABLED".into()));
                }
            }
            (JdbcDriver::MySql, "useSSL" | "useSsl" | "requireSSL") => {}
            (JdbcDriver::MySql, "serverSslCert") => out.push(("ssl-ca".into(), value.into())),
            (JdbcDriver::MySql, "trustCertificateKeyStoreUrl" | "clientCertificateKeyStoreUrl") => {
                return Err(invalid(
                    JDBC_URL,
                    format!("{key}: Java keystores are not supported; give PEM files as ssl-ca, ssl-cert and ssl-key"),
                ));
            }
            _ => out.push((key.into(), value.into())),
        }
    }
    let query: Vec<String> = out.into_iter().map(|(k, v)| format!("{k}={v}")).collect();
    Ok(format!("{base}?{}", query.join("&")))
}

/// Where the events go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventsTarget {
    /// Log lines only (the reference's `LOGGING`).
    Logging,
    /// The database event handler at this URL, rows older than `ttl` deleted (`None`: kept).
    Database {
        /// The database URL (secret: may hold a password).
        url: Secret,
        /// Time to live of the rows.
        ttl: Option<Duration>,
    },
}

/// The state store and event handler to open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Storage {
    /// The state store URL (secret: may hold a password).
    pub state_url: Secret,
    /// Where events go.
    pub events: EventsTarget,
}

/// The state URL and event target from `--state`/`--state-password`/`--events` and the
/// reference's keys; see the module documentation.
pub fn storage(
    state_flag: Option<&str>,
    state_password: Option<&SecretSource>,
    events_flag: Option<&str>,
    conf: &Configuration,
) -> Result<Storage, SettingsError> {
    let jdbc = || -> Result<Secret, SettingsError> {
        let url = conf
            .get(JDBC_URL)
            .ok_or_else(|| invalid(JDBC_URL, "required when a type is JDBC"))?;
        let env = conf
            .get(JDBC_PASSWORD_ENV_VARIABLE)
            .unwrap_or(DEFAULT_JDBC_PASSWORD_ENV);
        let password = std::env::var(env).ok().filter(|p| !p.is_empty()).map(Secret::new);
        jdbc_to_sqlx_url(url, conf.get(JDBC_USERNAME), password.as_ref())
    };
    let password = state_password
        .map(|s| s.read().map_err(|e| invalid("--state-password", e.to_string())))
        .transpose()?;
    let state_url = match state_flag {
        Some(url) => Secret::new(match &password {
            Some(p) if url.contains("://") => with_credentials(url, None, Some(p)),
            Some(_) => return Err(invalid("--state-password", "only database URLs take a password")),
            None => url.to_owned(),
        }),
        None => match conf.get(STATE_STORE_TYPE).map(|v| v.trim().to_ascii_uppercase()) {
            None => Secret::new(DEFAULT_STATE_URL),
            Some(t) if t == "MEMORY" => Secret::new("memory"),
            Some(t) if t == "JDBC" => jdbc()?,
            Some(t) => return Err(invalid(STATE_STORE_TYPE, format!("{t:?}: expected MEMORY or JDBC"))),
        },
    };
    let ttl = match conf.get(JDBC_EVENT_HANDLER_TTL) {
        None => Some(Duration::from_secs(90 * 24 * 3600)),
        Some(v) => {
            let d = parse_duration(v).map_err(|e| invalid(JDBC_EVENT_HANDLER_TTL, e))?;
            (!d.is_zero()).then_some(d)
        }
    };
    let events = match events_flag.map(str::trim) {
        Some("log" | "logging") => EventsTarget::Logging,
        Some("state") => EventsTarget::Database {
            url: state_url.clone(),
            ttl,
        },
        Some(other) => {
            return Err(invalid("--events", format!("{other:?}: expected log or state")));
        }
        None => match conf.get(EVENT_HANDLER_TYPE).map(|v| v.trim().to_ascii_uppercase()) {
            None => EventsTarget::Logging,
            Some(t) if t == "LOGGING" => EventsTarget::Logging,
            Some(t) if t == "JDBC" => EventsTarget::Database { url: jdbc()?, ttl },
            Some(t) => return Err(invalid(EVENT_HANDLER_TYPE, format!("{t:?}: expected LOGGING or JDBC"))),
        },
    };
    Ok(Storage { state_url, events })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_jdbc_drivers_tls_parameters_become_sqlx_ones() {
        let url = |jdbc: &str| jdbc_to_sqlx_url(jdbc, None, None).map(|s| s.expose().to_owned());
        let ok = |jdbc: &str| url(jdbc).unwrap_or_else(|e| panic!("{jdbc}: {e}"));
        // pgJDBC: the same names, plus ssl=true meaning verify-full.
        assert_eq!(
            ok("jdbc:postgresql://db/x?sslmode=verify-ca&sslrootcert=/ca.pem"),
            "postgres://db/x?sslmode=verify-ca&sslrootcert=/ca.pem"
        );
        assert_eq!(
            ok("jdbc:postgresql://db/x?ssl=true"),
            "postgres://db/x?sslmode=verify-full"
        );
        assert_eq!(
            ok("jdbc:postgresql://db/x?ssl=false&a=b"),
            "postgres://db/x?sslmode=disable&a=b"
        );
        assert_eq!(
            ok("jdbc:postgresql://db/x?ssl=true&sslmode=require"),
            "postgres://db/x?sslmode=require"
        );
        assert_eq!(ok("jdbc:postgresql://db/x"), "postgres://db/x");
        // Connector/J and MariaDB Connector/J.
        assert_eq!(
            ok("jdbc:mysql://db/x?sslMode=VERIFY_IDENTITY&serverTimezone=UTC"),
            "mysql://db/x?ssl-mode=VERIFY_IDENTITY&serverTimezone=UTC"
        );
        assert_eq!(
            ok("jdbc:mariadb://db/x?sslMode=verify-full&serverSslCert=/ca.pem"),
            "mysql://db/x?ssl-mode=VERIFY_IDENTITY&ssl-ca=/ca.pem"
        );
        assert_eq!(
            ok("jdbc:mariadb://db/x?sslMode=trust"),
            "mysql://db/x?ssl-mode=REQUIRED"
        );
        assert_eq!(
            ok("jdbc:mysql://db/x?useSSL=true&requireSSL=true"),
            "mysql://db/x?ssl-mode=REQUIRED"
        );
        assert_eq!(ok("jdbc:mysql://db/x?useSSL=false"), "mysql://db/x?ssl-mode=DISABLED");
        assert_eq!(
            ok("jdbc:mysql://db/x?useSSL=true&sslMode=VERIFY_CA"),
            "mysql://db/x?ssl-mode=VERIFY_CA"
        );
        assert_eq!(
            ok("jdbc:mysql://db/x?ssl-mode=REQUIRED"),
            "mysql://db/x?ssl-mode=REQUIRED"
        );
        let keystore = url("jdbc:mysql://db/x?trustCertificateKeyStoreUrl=file:/t.jks").expect_err("refused");
        assert!(keystore.to_string().contains("ssl-ca"), "{keystore}");
        let bad = url("jdbc:mysql://db/x?sslMode=SOMETIMES").expect_err("refused");
        assert!(bad.to_string().contains("sslMode"), "{bad}");
    }

    #[test]
    fn flags_replace_the_files_sources_and_reference_keys_name_one_cluster() {
        let conf = Configuration::from_iter([
            (FLINK_CLUSTERS_KEY, "a=http://jm-a:8081; b=http://jm-b:8081"),
            (YARN_RESOURCE_MANAGERS_KEY, "rm=http://rm:8088"),
        ]);
        let from_file = source_specs(&[], &[], &conf).expect("specs");
        let names: Vec<_> = from_file.iter().map(|s| (s.name.as_str(), s.kind)).collect();
        assert_eq!(
            names,
            [
                ("a", SourceType::Flink),
                ("b", SourceType::Flink),
                ("rm", SourceType::Yarn)
            ]
        );

        let from_flags = source_specs(&["http://jm-c:9000".into()], &[], &conf).expect("specs");
        assert_eq!(from_flags.len(), 1);
        assert_eq!(from_flags[0].name, "jm-c-9000");

        let reference = Configuration::from_iter([("autoscaler.standalone.fetcher.flink-cluster.host", "jm")]);
        let one = source_specs(&[], &[], &reference).expect("specs");
        assert_eq!(one[0].url, "http://jm:8081");
        assert_eq!(
            source_specs(&[], &[], &Configuration::new()).expect("default")[0].url,
            "http://localhost:8081"
        );

        let dup = source_specs(
            &["http://jm:1".into(), "http://jm:1/".into()],
            &[],
            &Configuration::new(),
        );
        assert!(dup.is_err());
        let bad = parse_source("ftp://x", SourceType::Flink, "--flink-url");
        assert!(bad.is_err());
    }

    #[test]
    fn per_source_auth_and_tls_come_from_env_and_files_never_literals() {
        let dir = std::env::temp_dir().join(format!("fa-settings-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let token = dir.join("token");
        std::fs::write(&token, "tok-1\n").expect("write");
        let ca = dir.join("ca.pem");
        std::fs::write(&ca, "-----BEGIN CERTIFICATE-----\n").expect("write");
        let conf = Configuration::from_iter([
            (
                source_key("a", "auth.bearer-token"),
                format!("file:{}", token.display()),
            ),
            (source_key("a", "tls.ca-file"), ca.display().to_string()),
            (source_key("b", "auth.username"), "flink".to_owned()),
            (
                source_key("b", "auth.password"),
                "env:FA_SETTINGS_TEST_UNSET".to_owned(),
            ),
            (source_key("c", "auth.bearer-token"), "literal-secret".to_owned()),
        ]);
        let a = source_client_config("a", &conf, &RestClientConfig::default()).expect("a");
        assert_eq!(a.auth_header, Some(AuthHeader::bearer("tok-1")));
        assert!(a.tls.ca_certificate_pem.is_some());
        assert_eq!(a.metrics_source, "a", "the source names its request metrics");
        let b = source_client_config("b", &conf, &RestClientConfig::default());
        assert!(
            b.as_ref()
                .is_err_and(|e| e.to_string().contains("FA_SETTINGS_TEST_UNSET")),
            "{b:?}"
        );
        let c = source_client_config("c", &conf, &RestClientConfig::default()).expect_err("literal refused");
        assert!(!c.to_string().contains("literal-secret"), "{c}");
        let none = source_client_config("d", &conf, &RestClientConfig::default()).expect("d");
        assert_eq!(none.auth_header, None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn reference_storage_keys_map_to_our_stores() {
        // Our default stays durable.
        let default = storage(None, None, None, &Configuration::new()).expect("default");
        assert_eq!(default.state_url.expose(), DEFAULT_STATE_URL);
        assert_eq!(default.events, EventsTarget::Logging);
        let memory = Configuration::from_iter([(STATE_STORE_TYPE, "MEMORY")]);
        assert_eq!(
            storage(None, None, None, &memory).expect("memory").state_url.expose(),
            "memory"
        );

        // `std::env::set_var` needs `unsafe` (forbidden here), so the password variable is one
        // that is always set: PATH, with characters that need percent-encoding.
        let env = "PATH";
        let path = std::env::var(env).expect("PATH is set");
        let encoded = encode(&path);
        let jdbc = Configuration::from_iter([
            (STATE_STORE_TYPE, "jdbc"),
            (EVENT_HANDLER_TYPE, "JDBC"),
            (JDBC_URL, "jdbc:postgresql://db:5432/flink_autoscaler?sslmode=require"),
            (JDBC_USERNAME, "app"),
            (JDBC_PASSWORD_ENV_VARIABLE, env),
            (JDBC_EVENT_HANDLER_TTL, "0"),
        ]);
        let s = storage(None, None, None, &jdbc).expect("jdbc");
        assert_eq!(
            s.state_url.expose(),
            format!("postgres://app:{encoded}@db:5432/flink_autoscaler?sslmode=require")
        );
        assert!(!format!("{s:?}").contains(&encoded), "Debug is redacted");
        assert_eq!(
            s.events,
            EventsTarget::Database {
                url: s.state_url.clone(),
                ttl: None
            }
        );
        // The flag wins over the file.
        let flag = storage(Some("sqlite:x.db"), None, Some("state"), &jdbc).expect("flag");
        assert_eq!(flag.state_url.expose(), "sqlite:x.db");
        assert!(matches!(flag.events, EventsTarget::Database { ttl: None, .. }));
        let derby = Configuration::from_iter([(STATE_STORE_TYPE, "JDBC"), (JDBC_URL, "jdbc:derby:memory:x")]);
        assert!(storage(None, None, None, &derby).is_err());
        assert_eq!(
            unknown_standalone_keys(&Configuration::from_iter([
                ("autoscaler.standalone.control-loop.interval", "5 s"),
                ("autoscaler.standalone.fetcher.flink-cluster.hots", "x"),
            ])),
            ["autoscaler.standalone.fetcher.flink-cluster.hots"]
        );
    }
}
