//! How a request reaches Flink, and how its answer is read.
//!
//! Plain `http://` clusters with no proxy in the environment (the usual in-cluster REST endpoint)
//! are asked through a hyper client of our own, with each request's `http::Uri` built once
//! ([`Transport::uri_for`]). Everything else (`https://`, an `HTTP_PROXY`/`ALL_PROXY` in the
//! environment) goes through reqwest. So does a plain request that Flink or a proxy in front of it
//! answers with a redirect: it is sent again through reqwest, which follows the redirect (up to 10
//! hops), and every later request of that client goes through reqwest too. The two send the same headers
//! (`accept: */*`, the auth header, `content-type` with a body), share one timeout (the whole
//! exchange, body included) and one body limit ([`read_bounded`]).
//!
//! Why two: reqwest parses every request's URL twice more (for its redirect policy) and wraps it
//! in several service layers, about a sixth of the service's CPU per job-cycle against a fake
//! JobManager with eleven requests per job-cycle (docs/service-benchmark.md).

use super::{RestClientConfig, RestError};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::{Client, connect::HttpConnector};
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderName, HeaderValue};
use reqwest::{Method, StatusCode, Url};
use std::error::Error;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The environment variables reqwest takes an `http://` proxy from.
const HTTP_PROXY_VARIABLES: [&str; 4] = ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"];

/// The clients of one Flink REST endpoint.
pub(super) struct Transport {
    /// Every request when `plain` is `None`; with it, the plain requests answered by a redirect.
    reqwest: reqwest::Client,
    /// The direct client, for `http://` endpoints with no proxy configured.
    plain: Option<Plain>,
    /// Set once a direct request was answered with a redirect: from then on reqwest sends all.
    redirected: AtomicBool,
    /// The header sent with every request (the configuration's auth header).
    auth: Option<(HeaderName, HeaderValue)>,
}

/// A hyper client over plain TCP, pooled and kept alive like reqwest's.
struct Plain {
    client: Client<HttpConnector, Full<Bytes>>,
}

/// Why an exchange failed; `FlinkRestClient::send_once` names the endpoint in the [`RestError`].
#[derive(Debug)]
pub(super) enum Failure {
    /// The timeout passed (connecting, waiting for or reading the answer).
    Timeout,
    /// The connection failed; the error with its sources.
    Transport(String),
    /// The body was longer than the limit (or announced so).
    TooLarge,
}

impl Transport {
    /// The clients for `base` under `config`: always reqwest (TLS, proxies, redirects), plus the
    /// direct client when `base` is plain `http://` and no proxy variable is set.
    pub(super) fn new(config: &RestClientConfig, base: &Url) -> Result<Self, RestError> {
        let auth = match &config.auth_header {
            None => None,
            Some(auth) => {
                let name = HeaderName::from_bytes(auth.name.as_bytes())
                    .map_err(|e| RestError::Config(format!("auth header name {:?} is invalid: {e}", auth.name)))?;
                let mut value = HeaderValue::from_str(&auth.value)
                    .map_err(|_| RestError::Config(format!("auth header {:?} has an invalid value", auth.name)))?;
                value.set_sensitive(true);
                Some((name, value))
            }
        };
        let plain = direct_allowed(base.scheme(), |name| std::env::var_os(name)).then(|| {
            // The socket and pool settings of reqwest's defaults: no Nagle delay, TCP keepalive
            // probes after 15 s idle (every 15 s, 3 of them), unacknowledged data given up after
            // 30 s, idle connections closed after 90 s.
            let mut connector = HttpConnector::new();
            connector.set_connect_timeout(Some(config.connect_timeout));
            connector.set_nodelay(true);
            connector.set_keepalive(Some(Duration::from_secs(15)));
            connector.set_keepalive_interval(Some(Duration::from_secs(15)));
            connector.set_keepalive_retries(Some(3));
            #[cfg(any(target_os = "android", target_os = "fuchsia", target_os = "linux"))]
            connector.set_tcp_user_timeout(Some(Duration::from_secs(30)));
            let client = Client::builder(hyper_util::rt::TokioExecutor::new())
                .timer(hyper_util::rt::TokioTimer::new())
                .pool_timer(hyper_util::rt::TokioTimer::new())
                .pool_idle_timeout(Duration::from_secs(90))
                .build(connector);
            Plain { client }
        });
        Ok(Self {
            reqwest: build_reqwest(config, auth.clone())?,
            plain,
            redirected: AtomicBool::new(false),
            auth,
        })
    }

    /// Where requests to `url` go: the direct client's URI, sharing the URL's text, or the URL
    /// itself when requests go through reqwest or the URL is not a valid URI (reqwest then
    /// reports it).
    pub(super) fn target(&self, url: Url) -> Target {
        if self.plain.is_some() {
            let text = Bytes::from(String::from(url));
            return match http::Uri::from_maybe_shared(text.clone()) {
                Ok(uri) => Target::Uri { text, uri },
                // Parsed back from the text it was written as.
                Err(_) => match std::str::from_utf8(&text).map(Url::parse) {
                    Ok(Ok(url)) => Target::Url(url),
                    _ => Target::Unsendable(text),
                },
            };
        }
        Target::Url(url)
    }

    /// Sends `method` to `target` (via the direct client when it has a URI) with the JSON
    /// `body`, and reads the answer's status and at most `limit` bytes of body, all within
    /// `timeout`.
    pub(super) async fn exchange(
        &self,
        method: &Method,
        target: &Target,
        body: Option<Vec<u8>>,
        timeout: Duration,
        limit: usize,
    ) -> Result<(StatusCode, Vec<u8>), Failure> {
        let exchange = async {
            let body = body.map(Bytes::from);
            let direct = self.plain.as_ref().filter(|_| !self.redirected.load(Ordering::Relaxed));
            if let (Some(plain), Target::Uri { uri, .. }) = (direct, target) {
                let request = self.plain_request(method, uri, body.clone());
                let response = plain.client.request(request).await.map_err(transport_failure)?;
                if !response.status().is_redirection() {
                    return read_bounded(response, limit).await;
                }
                // Sent again through reqwest, which follows redirects (and drops the auth header
                // when one leads to another host).
                self.redirected.store(true, Ordering::Relaxed);
                tracing::debug!(status = %response.status(), "Flink REST answered a redirect; reqwest sends every request from now on");
            }
            let mut request = match target {
                Target::Url(url) => self.reqwest.request(method.clone(), url.clone()),
                // Parsed (again) only after a redirect; reqwest reports a text it cannot parse.
                Target::Uri { .. } | Target::Unsendable(_) => self.reqwest.request(method.clone(), target.as_str()),
            };
            if let Some(body) = body {
                request = request.header(CONTENT_TYPE, "application/json").body(body);
            }
            let response = request.send().await.map_err(transport_failure)?;
            read_bounded(http::Response::from(response), limit).await
        };
        tokio::time::timeout(timeout, exchange)
            .await
            .unwrap_or(Err(Failure::Timeout))
    }

    /// The direct client's request: the headers reqwest would send.
    fn plain_request(&self, method: &Method, uri: &http::Uri, body: Option<Bytes>) -> http::Request<Full<Bytes>> {
        let has_body = body.is_some();
        let mut request = http::Request::new(Full::new(body.unwrap_or_default()));
        *request.method_mut() = method.clone();
        *request.uri_mut() = uri.clone();
        let headers = request.headers_mut();
        headers.insert(ACCEPT, HeaderValue::from_static("*/*"));
        if let Some((name, value)) = &self.auth {
            headers.insert(name.clone(), value.clone());
        }
        if has_body {
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        }
        request
    }
}

/// Whether a request to a `scheme` URL may skip reqwest: plain `http` with none of
/// [`HTTP_PROXY_VARIABLES`] set (reqwest would send it through that proxy).
fn direct_allowed(scheme: &str, var: impl Fn(&str) -> Option<std::ffi::OsString>) -> bool {
    scheme == "http"
        && HTTP_PROXY_VARIABLES
            .iter()
            .all(|name| var(name).is_none_or(|value| value.is_empty()))
}

/// The failure of a connection, a timeout when an I/O error in its sources timed out (a connect
/// timeout).
fn transport_failure(error: impl Error + 'static) -> Failure {
    let mut source: Option<&(dyn Error + 'static)> = Some(&error);
    while let Some(e) = source {
        let timed_out = e
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
            || e.downcast_ref::<reqwest::Error>()
                .is_some_and(reqwest::Error::is_timeout);
        if timed_out {
            return Failure::Timeout;
        }
        source = e.source();
    }
    Failure::Transport(super::error_chain(&error))
}

/// The status and body of `response`, the body read frame by frame and never more than `limit`
/// bytes (a `Content-Length` above it fails before reading).
async fn read_bounded<B>(response: http::Response<B>, limit: usize) -> Result<(StatusCode, Vec<u8>), Failure>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Error + 'static,
{
    let status = response.status();
    let body = response.into_body();
    let announced = http_body::Body::size_hint(&body)
        .exact()
        .and_then(|n| usize::try_from(n).ok());
    if announced.is_some_and(|n| n > limit) {
        return Err(Failure::TooLarge);
    }
    // Preallocate what is announced, but never more than 1 MiB on the server's word.
    let mut out = Vec::with_capacity(announced.unwrap_or(0).min(1 << 20));
    let mut body = std::pin::pin!(body);
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(transport_failure)?;
        if let Ok(chunk) = frame.into_data() {
            if chunk.len() > limit.saturating_sub(out.len()) {
                return Err(Failure::TooLarge);
            }
            out.extend_from_slice(&chunk);
        }
    }
    Ok((status, out))
}

/// reqwest's client: rustls with the webpki roots plus the configured CA, the client identity,
/// the auth header as a default header.
fn build_reqwest(
    config: &RestClientConfig,
    auth: Option<(HeaderName, HeaderValue)>,
) -> Result<reqwest::Client, RestError> {
    let mut builder = reqwest::Client::builder()
        .connect_timeout(config.connect_timeout)
        .use_rustls_tls();
    if let Some((name, value)) = auth {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(name, value);
        builder = builder.default_headers(headers);
    }
    if let Some(pem) = &config.tls.ca_certificate_pem {
        for cert in reqwest::Certificate::from_pem_bundle(pem)
            .map_err(|e| RestError::Config(format!("CA certificate does not parse as PEM: {e}")))?
        {
            builder = builder.add_root_certificate(cert);
        }
    }
    if let Some(pem) = &config.tls.client_identity_pem {
        let identity = reqwest::Identity::from_pem(pem)
            .map_err(|e| RestError::Config(format!("client certificate/key does not parse as PEM: {e}")))?;
        builder = builder.identity(identity);
    }
    if config.tls.accept_invalid_certificates {
        builder = builder.danger_accept_invalid_certs(true);
    }
    builder
        .build()
        .map_err(|e| RestError::Config(format!("HTTP client: {}", super::error_chain(&e))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    #[test]
    fn only_plain_http_without_a_proxy_goes_direct() {
        let none = |_: &str| None;
        assert!(direct_allowed("http", none));
        assert!(!direct_allowed("https", none));
        for name in HTTP_PROXY_VARIABLES {
            let set = |n: &str| (n == name).then(|| OsString::from("http://proxy:3128"));
            assert!(!direct_allowed("http", set), "{name}");
            let empty = |n: &str| (n == name).then(OsString::new);
            assert!(direct_allowed("http", empty), "{name} empty");
        }
        // Only reqwest's https proxy: plain http is not proxied.
        assert!(direct_allowed("http", |n: &str| (n == "HTTPS_PROXY")
            .then(|| OsString::from("http://p:1"))));
    }

    #[test]
    fn a_timed_out_connect_is_a_timeout_and_other_errors_keep_their_chain() {
        #[derive(Debug)]
        struct Wrapper(std::io::Error);
        impl std::fmt::Display for Wrapper {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("tcp connect error")
            }
        }
        impl Error for Wrapper {
            fn source(&self) -> Option<&(dyn Error + 'static)> {
                Some(&self.0)
            }
        }
        let timed_out = Wrapper(std::io::Error::new(std::io::ErrorKind::TimedOut, "timed out"));
        assert!(matches!(transport_failure(timed_out), Failure::Timeout));
        let refused = Wrapper(std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused"));
        match transport_failure(refused) {
            Failure::Transport(message) => assert_eq!(message, "tcp connect error: refused"),
            other => panic!("{other:?}"),
        }
    }
}

/// Where a prepared request is sent: built once per request, sent as often as needed.
#[derive(Debug, Clone)]
pub(super) enum Target {
    /// For the direct client: the URL's text and the same text as a URI, sharing its bytes.
    Uri {
        /// The URL's text (ASCII: a serialized URL).
        text: Bytes,
        /// `text` as a URI.
        uri: http::Uri,
    },
    /// For reqwest.
    Url(Url),
    /// A URL the direct client cannot take and that does not parse back (never seen; reqwest
    /// reports it at the first send).
    Unsendable(Bytes),
}

impl Target {
    /// The URL's text.
    pub(super) fn as_str(&self) -> &str {
        match self {
            Target::Uri { text, .. } | Target::Unsendable(text) => std::str::from_utf8(text).unwrap_or_default(),
            Target::Url(url) => url.as_str(),
        }
    }

    /// The URL's text as bytes (no UTF-8 check).
    pub(super) fn as_bytes(&self) -> &[u8] {
        match self {
            Target::Uri { text, .. } | Target::Unsendable(text) => text,
            Target::Url(url) => url.as_str().as_bytes(),
        }
    }
}
