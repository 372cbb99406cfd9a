//! How a request reaches Flink, and how its answer is read.
//!
//! Plain `http://` clusters with no proxy in the environment (the usual in-cluster REST endpoint)
//! are asked over HTTP/1.1 connections of our own (hyper's `client::conn::http1`, kept in
//! [`Plain`]'s list), with each request's path built once ([`Transport::target`]). Everything
//! else (`https://`, an `HTTP_PROXY`/`ALL_PROXY` in the environment) goes through reqwest. So does
//! a plain request that Flink or a proxy in front of it answers with a redirect: it is sent again
//! through reqwest, which follows the redirect (up to 10 hops), and every later request of that
//! client goes through reqwest too. The two send the same headers (`accept: */*`, the auth header,
//! `content-type` with a body), share one timeout (the whole exchange, body included) and one body
//! limit ([`read_bounded`]).
//!
//! Why two: reqwest parses every request's URL twice more (for its redirect policy) and wraps it
//! in several service layers, about a sixth of the service's CPU per job-cycle against a fake
//! JobManager with eleven requests per job-cycle (docs/service-benchmark.md).

use super::{RestClientConfig, RestError};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::client::legacy::connect::HttpConnector;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HOST, HeaderName, HeaderValue};
use reqwest::{Method, StatusCode, Url};
use std::collections::VecDeque;
use std::error::Error;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

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

/// How long a connection may wait unused before it is closed: reqwest's (and hyper's pooled
/// client's) default, below Flink's own idle timeout (`rest.idleness-timeout`, 5 minutes).
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// HTTP/1.1 connections over plain TCP to the one endpoint of a [`Transport`], kept alive
/// between requests as a pooled client keeps them: a request takes the connection used last, or
/// opens a new one when none waits; a connection goes back once its answer is read to the end;
/// one unused for [`IDLE_TIMEOUT`] is closed; a request that a connection closed while idle
/// could not take (it was never written) goes to the next one.
///
/// One endpoint only, so there is no pool key to hash, and the request's path and `Host` header
/// are built once, not per request.
struct Plain {
    /// Opens connections with reqwest's socket settings.
    connector: HttpConnector,
    /// What the connector connects to: `http://host:port/`.
    endpoint: http::Uri,
    /// The `Host` header of every request: the endpoint's host, and its port unless it is 80.
    host: HeaderValue,
    /// The connections waiting for a request, the one used last at the back.
    idle: Arc<Mutex<VecDeque<Idle>>>,
    /// How long a connection may wait unused: [`IDLE_TIMEOUT`] (shorter in tests).
    idle_timeout: Duration,
    /// Whether the task that closes connections left idle while no request comes is running. A
    /// connection starts it when it is not: at the first one (inside a runtime), and again after
    /// the runtime it ran on was shut down.
    reaper: Arc<AtomicBool>,
}

/// A connection waiting for its next request.
struct Idle {
    sender: SendRequest<Full<Bytes>>,
    /// When it went idle.
    since: Instant,
}

impl Idle {
    /// Whether it has waited `timeout` or longer at `now`, and must be closed.
    fn expired(&self, now: Instant, timeout: Duration) -> bool {
        now.saturating_duration_since(self.since) >= timeout
    }
}

impl Plain {
    /// The connections to `base` (plain `http`); `None` when it has no host (reqwest reports it).
    fn new(config: &RestClientConfig, base: &Url) -> Option<Self> {
        let host = base.host_str()?;
        let authority = match base.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_owned(),
        };
        let endpoint = http::Uri::builder()
            .scheme("http")
            .authority(authority.as_str())
            .path_and_query("/")
            .build()
            .ok()?;
        let host = HeaderValue::from_str(&authority).ok()?;
        // The socket settings of reqwest's defaults: no Nagle delay, TCP keepalive probes after
        // 15 s idle (every 15 s, 3 of them), unacknowledged data given up after 30 s.
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(config.connect_timeout));
        connector.set_nodelay(true);
        connector.set_keepalive(Some(Duration::from_secs(15)));
        connector.set_keepalive_interval(Some(Duration::from_secs(15)));
        connector.set_keepalive_retries(Some(3));
        #[cfg(any(target_os = "android", target_os = "fuchsia", target_os = "linux"))]
        connector.set_tcp_user_timeout(Some(Duration::from_secs(30)));
        Some(Plain {
            connector,
            endpoint,
            host,
            idle: Arc::default(),
            idle_timeout: IDLE_TIMEOUT,
            reaper: Arc::default(),
        })
    }

    /// Sends `request` on an idle connection, or on a new one when none is left that can take
    /// it; the answer's head and the connection, to [`Plain::check_in`] once the body is read.
    async fn send(
        &self,
        mut request: http::Request<Full<Bytes>>,
    ) -> Result<(http::Response<hyper::body::Incoming>, SendRequest<Full<Bytes>>), Failure> {
        while let Some(mut sender) = self.check_out() {
            match sender.try_send_request(request).await {
                Ok(response) => return Ok((response, sender)),
                Err(mut error) => match error.take_message() {
                    // Never written: the connection closed while it was idle. The next one.
                    Some(unsent) => request = unsent,
                    None => return Err(transport_failure(error.into_error())),
                },
            }
        }
        let mut sender = self.connect().await?;
        let response = sender.send_request(request).await.map_err(transport_failure)?;
        Ok((response, sender))
    }

    /// The idle connection used last that can take a request now; those idle too long go.
    fn check_out(&self) -> Option<SendRequest<Full<Bytes>>> {
        let now = Instant::now();
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        while let Some(last) = idle.pop_back() {
            if last.expired(now, self.idle_timeout) {
                // The others went idle before it.
                idle.clear();
                return None;
            }
            if last.sender.is_ready() {
                return Some(last.sender);
            }
            // Closed (by the server, or an error): dropped.
        }
        None
    }

    /// Gives back a connection whose answer was read to the end. One the server closed is
    /// dropped; one not yet ready for the next request (its task has not caught up) goes back
    /// once it is.
    fn check_in(&self, mut sender: SendRequest<Full<Bytes>>) {
        let idle_timeout = self.idle_timeout;
        if sender.is_ready() {
            park(&self.idle, sender, idle_timeout);
        } else if !sender.is_closed() {
            let idle = Arc::downgrade(&self.idle);
            tokio::spawn(async move {
                if sender.ready().await.is_ok()
                    && let Some(idle) = idle.upgrade()
                {
                    park(&idle, sender, idle_timeout);
                }
            });
        }
    }

    /// A new connection, its task spawned.
    async fn connect(&self) -> Result<SendRequest<Full<Bytes>>, Failure> {
        if !self.reaper.swap(true, Ordering::AcqRel) {
            spawn_reaper(Arc::downgrade(&self.idle), self.idle_timeout, Arc::clone(&self.reaper));
        }
        let mut connector = self.connector.clone();
        let io = tower_service::Service::call(&mut connector, self.endpoint.clone())
            .await
            .map_err(transport_failure)?;
        let (sender, connection) = hyper::client::conn::http1::handshake(io)
            .await
            .map_err(transport_failure)?;
        tokio::spawn(async move {
            // A request on it gets the same error; this is the connection's own end.
            if let Err(error) = connection.await {
                tracing::debug!(error = %error, "Flink REST connection closed with an error");
            }
        });
        Ok(sender)
    }
}

/// Puts `sender` at the back of `idle`, first dropping the connections idle for `timeout`.
fn park(idle: &Mutex<VecDeque<Idle>>, sender: SendRequest<Full<Bytes>>, timeout: Duration) {
    let now = Instant::now();
    let mut idle = idle.lock().unwrap_or_else(PoisonError::into_inner);
    while idle.front().is_some_and(|c| c.expired(now, timeout)) {
        idle.pop_front();
    }
    idle.push_back(Idle { sender, since: now });
}

/// Closes connections idle for `timeout` while no request comes to do it, looking every sixth
/// of it (15 s for [`IDLE_TIMEOUT`]), until the connections' owner is dropped; `running` is
/// cleared when it stops, however it stops (a runtime shut down drops it).
fn spawn_reaper(idle: Weak<Mutex<VecDeque<Idle>>>, timeout: Duration, running: Arc<AtomicBool>) {
    /// Clears the flag when the task ends or is dropped.
    struct Running(Arc<AtomicBool>);
    impl Drop for Running {
        fn drop(&mut self) {
            self.0.store(false, Ordering::Release);
        }
    }
    let running = Running(running);
    tokio::spawn(async move {
        let _running = running;
        let mut every = tokio::time::interval(timeout / 6);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            let Some(idle) = idle.upgrade() else { return };
            let now = Instant::now();
            idle.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .retain(|c| !c.expired(now, timeout) && !c.sender.is_closed());
        }
    });
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
        let plain = direct_allowed(base.scheme(), |name| std::env::var_os(name))
            .then(|| Plain::new(config, base))
            .flatten();
        Ok(Self {
            reqwest: build_reqwest(config, auth.clone())?,
            plain,
            redirected: AtomicBool::new(false),
            auth,
        })
    }

    /// Where requests to `url` go: for the direct connections, the URL's path and query as a
    /// URI, sharing the URL's text; the URL itself when requests go through reqwest or its path
    /// is not a valid URI (reqwest then reports it).
    pub(super) fn target(&self, url: Url) -> Target {
        if self.plain.is_some() {
            let path_and_query = url.path().len() + url.query().map_or(0, |q| q.len() + 1);
            let fragment = url.fragment().map_or(0, |f| f.len() + 1);
            let text = Bytes::from(String::from(url));
            let end = text.len() - fragment;
            let origin = text.slice(end.saturating_sub(path_and_query)..end);
            return match http::Uri::from_maybe_shared(origin) {
                Ok(origin) => Target::Uri { text, origin },
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
            if let (Some(plain), Target::Uri { origin, .. }) = (direct, target) {
                let request = self.plain_request(method, origin, &plain.host, body.clone());
                let (response, connection) = plain.send(request).await?;
                if !response.status().is_redirection() {
                    let answer = read_bounded(response, limit).await;
                    // Only a connection whose answer was read to the end can take another
                    // request; any other closes as it is dropped.
                    if answer.is_ok() {
                        plain.check_in(connection);
                    }
                    return answer;
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

    /// The direct request to `origin` (path and query): the headers reqwest would send.
    fn plain_request(
        &self,
        method: &Method,
        origin: &http::Uri,
        host: &HeaderValue,
        body: Option<Bytes>,
    ) -> http::Request<Full<Bytes>> {
        let has_body = body.is_some();
        let mut request = http::Request::new(Full::new(body.unwrap_or_default()));
        *request.method_mut() = method.clone();
        *request.uri_mut() = origin.clone();
        let headers = request.headers_mut();
        headers.insert(HOST, host.clone());
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

    /// How a [`TestServer`] treats a connection after answering a request on it.
    #[derive(Clone, Copy, PartialEq)]
    enum AfterAnswer {
        /// Keeps it open for the next request.
        KeepAlive,
        /// Closes it without saying so (as a server closing an idle connection does).
        CloseSilently,
        /// Says `connection: close` in the answer, then closes it.
        SayClose,
    }

    /// A loopback HTTP/1.1 server answering every request with a small JSON body; it counts the
    /// connections it accepted and those the client closed, and keeps each request's head.
    struct TestServer {
        base: Url,
        accepted: Arc<std::sync::atomic::AtomicUsize>,
        closed_by_client: Arc<std::sync::atomic::AtomicUsize>,
        heads: Arc<Mutex<Vec<String>>>,
    }

    const ANSWER: &[u8] = b"{\"ok\":true}";

    async fn test_server(after: AfterAnswer) -> TestServer {
        use std::sync::atomic::AtomicUsize;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("address").port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let closed_by_client = Arc::new(AtomicUsize::new(0));
        let heads = Arc::new(Mutex::new(Vec::new()));
        let (a, c, h) = (accepted.clone(), closed_by_client.clone(), heads.clone());
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                a.fetch_add(1, Ordering::SeqCst);
                let (c, h) = (c.clone(), h.clone());
                tokio::spawn(async move {
                    let mut buffer = Vec::new();
                    let mut chunk = [0u8; 4096];
                    loop {
                        let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") else {
                            match socket.read(&mut chunk).await {
                                Ok(0) | Err(_) => {
                                    c.fetch_add(1, Ordering::SeqCst);
                                    return;
                                }
                                Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                            }
                            continue;
                        };
                        let head: Vec<u8> = buffer.drain(..end + 4).collect();
                        h.lock()
                            .expect("heads")
                            .push(String::from_utf8_lossy(&head).into_owned());
                        let close = if after == AfterAnswer::SayClose {
                            "connection: close\r\n"
                        } else {
                            ""
                        };
                        let answer = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{close}\r\n",
                            ANSWER.len()
                        );
                        let mut bytes = answer.into_bytes();
                        bytes.extend_from_slice(ANSWER);
                        if socket.write_all(&bytes).await.is_err() {
                            return;
                        }
                        if after != AfterAnswer::KeepAlive {
                            return;
                        }
                    }
                });
            }
        });
        TestServer {
            base: Url::parse(&format!("http://127.0.0.1:{port}/")).expect("url"),
            accepted,
            closed_by_client,
            heads,
        }
    }

    impl TestServer {
        fn accepted(&self) -> usize {
            self.accepted.load(Ordering::SeqCst)
        }

        /// Waits until the client has closed `connections` connections.
        async fn wait_closed_by_client(&self, connections: usize, what: &str) {
            wait_for(|| self.closed_by_client.load(Ordering::SeqCst) == connections, what).await;
        }
    }

    /// A transport to `server` whose connections are closed after `timeout` idle.
    fn direct_transport_idle_for(server: &TestServer, timeout: Duration) -> Transport {
        let mut transport = direct_transport(server);
        transport.plain.as_mut().expect("direct").idle_timeout = timeout;
        transport
    }

    fn direct_transport(server: &TestServer) -> Transport {
        let transport = Transport::new(&RestClientConfig::default(), &server.base).expect("transport");
        assert!(
            transport.plain.is_some(),
            "plain http goes direct (is a proxy variable set in the environment?)"
        );
        transport
    }

    async fn get(transport: &Transport, server: &TestServer, path: &str, limit: usize) -> Result<Vec<u8>, Failure> {
        let target = transport.target(server.base.join(path).expect("joins"));
        let (status, body) = transport
            .exchange(&Method::GET, &target, None, Duration::from_secs(5), limit)
            .await?;
        assert_eq!(status, StatusCode::OK);
        Ok(body)
    }

    #[tokio::test]
    async fn requests_take_turns_on_one_connection_with_the_path_and_host_in_the_head() {
        let server = test_server(AfterAnswer::KeepAlive).await;
        let transport = direct_transport(&server);
        for _ in 0..3 {
            let body = get(&transport, &server, "jobs/overview?get=a,b", 1 << 20)
                .await
                .expect("answer");
            assert_eq!(body, ANSWER);
        }
        assert_eq!(server.accepted(), 1, "one connection, kept alive");
        let heads = server.heads.lock().expect("heads").clone();
        assert_eq!(heads.len(), 3);
        let port = server.base.port().expect("port");
        for head in &heads {
            assert!(head.starts_with("GET /jobs/overview?get=a,b HTTP/1.1\r\n"), "{head}");
            assert!(head.contains(&format!("host: 127.0.0.1:{port}\r\n")), "{head}");
            assert!(head.contains("accept: */*\r\n"), "{head}");
        }
    }

    #[tokio::test]
    async fn concurrent_requests_open_connections_that_later_requests_reuse() {
        let server = test_server(AfterAnswer::KeepAlive).await;
        let transport = direct_transport(&server);
        let one = || get(&transport, &server, "jobs", 1 << 20);
        let batch = || async {
            let (a, b, c, d) = tokio::join!(one(), one(), one(), one());
            [a, b, c, d]
        };
        assert!(batch().await.iter().all(Result::is_ok));
        let opened = server.accepted();
        assert!((1..=4).contains(&opened), "{opened}");
        tokio::time::sleep(Duration::from_millis(50)).await;
        for _ in 0..3 {
            assert!(batch().await.iter().all(Result::is_ok));
        }
        assert_eq!(
            server.accepted(),
            opened,
            "the later batches reuse the first batch's connections"
        );
    }

    #[tokio::test]
    async fn a_connection_the_server_closed_while_idle_is_replaced_without_an_error() {
        let server = test_server(AfterAnswer::CloseSilently).await;
        let transport = direct_transport(&server);
        for round in 1..=3 {
            get(&transport, &server, "jobs", 1 << 20).await.expect("answer");
            // Time for the connection's task to see the end of the stream.
            tokio::time::sleep(Duration::from_millis(50)).await;
            assert_eq!(server.accepted(), round);
        }
    }

    #[tokio::test]
    async fn an_answer_saying_connection_close_is_not_reused() {
        let server = test_server(AfterAnswer::SayClose).await;
        let transport = direct_transport(&server);
        for round in 1..=3 {
            get(&transport, &server, "jobs", 1 << 20).await.expect("answer");
            assert_eq!(server.accepted(), round);
        }
    }

    #[tokio::test]
    async fn a_connection_whose_answer_was_not_read_to_the_end_is_closed() {
        let server = test_server(AfterAnswer::KeepAlive).await;
        let transport = direct_transport(&server);
        let too_large = get(&transport, &server, "jobs", 3).await;
        assert!(matches!(too_large, Err(Failure::TooLarge)), "{too_large:?}");
        get(&transport, &server, "jobs", 1 << 20).await.expect("answer");
        assert_eq!(server.accepted(), 2, "the first connection was not reused");
        server.wait_closed_by_client(1, "the first connection closes").await;
    }

    #[tokio::test]
    async fn idle_connections_close_after_the_idle_timeout_with_or_without_a_request() {
        let server = test_server(AfterAnswer::KeepAlive).await;
        let timeout = Duration::from_millis(300);
        let transport = direct_transport_idle_for(&server, timeout);
        // No request comes: the reaper closes it.
        let started = Instant::now();
        get(&transport, &server, "jobs", 1 << 20).await.expect("answer");
        server.wait_closed_by_client(1, "the idle connection closes").await;
        assert!(started.elapsed() >= timeout, "closed after {:?}", started.elapsed());
        // A request after the timeout opens a new one rather than take the expired one.
        get(&transport, &server, "jobs", 1 << 20).await.expect("answer");
        assert_eq!(server.accepted(), 2);
        // Within the timeout it is reused.
        get(&transport, &server, "jobs", 1 << 20).await.expect("answer");
        assert_eq!(server.accepted(), 2);
        // Dropping the transport closes its connections.
        drop(transport);
        server
            .wait_closed_by_client(2, "the dropped transport's connection closes")
            .await;
    }

    #[test]
    fn idle_connections_are_closed_after_the_runtime_of_the_first_one_was_shut_down() {
        let runtime = || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime")
        };
        let servers = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        let server = servers.block_on(test_server(AfterAnswer::KeepAlive));
        let timeout = Duration::from_millis(300);
        let transport = direct_transport_idle_for(&server, timeout);
        // The first connection, and the reaper, on a runtime that then shuts down (closing it).
        let first = runtime();
        first
            .block_on(get(&transport, &server, "jobs", 1 << 20))
            .expect("answer");
        drop(first);
        // A connection on another runtime, left idle: a reaper closes it there too.
        let second = runtime();
        second.block_on(async {
            get(&transport, &server, "jobs", 1 << 20).await.expect("answer");
            assert_eq!(server.accepted(), 2, "the first runtime's connection closed with it");
            server
                .wait_closed_by_client(2, "the second runtime's idle connection closes")
                .await;
        });
    }

    #[tokio::test]
    async fn a_refused_connection_is_a_transport_failure_naming_the_cause() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let base = Url::parse(&format!(
            "http://127.0.0.1:{}/",
            listener.local_addr().expect("address").port()
        ))
        .expect("url");
        drop(listener);
        let transport = Transport::new(&RestClientConfig::default(), &base).expect("transport");
        let target = transport.target(base.join("jobs").expect("joins"));
        match transport
            .exchange(&Method::GET, &target, None, Duration::from_secs(5), 1 << 20)
            .await
        {
            Err(Failure::Transport(message)) => assert!(message.contains("refused"), "{message}"),
            other => panic!("{other:?}"),
        }
    }

    /// Waits up to 5 s for `done`.
    async fn wait_for(done: impl Fn() -> bool, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !done() {
            assert!(Instant::now() < deadline, "timed out waiting until {what}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
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
    /// For the direct connections: the URL's text and its path and query as a URI, sharing
    /// its bytes.
    Uri {
        /// The URL's text (ASCII: a serialized URL).
        text: Bytes,
        /// The path and query of `text` (origin form, as a request line carries them).
        origin: http::Uri,
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
