//! [`RestError`]: what can go wrong talking to Flink's REST API.

use std::time::Duration;

/// A failed Flink REST call. Every variant names the endpoint (`GET /jobs/<id>`) it concerns.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum RestError {
    /// Flink answered with an error status. `message` is Flink's own message (the first line of
    /// `errors`, without the Java stack trace).
    #[error("{endpoint} answered HTTP {status}: {message}")]
    Status {
        /// Method and path of the request.
        endpoint: String,
        /// HTTP status code.
        status: u16,
        /// Flink's message, or the start of the body when it is not Flink's error format.
        message: String,
    },
    /// No answer within the per-request timeout.
    #[error("{endpoint} timed out after {timeout:?}; is the JobManager overloaded or unreachable?")]
    Timeout {
        /// Method and path of the request.
        endpoint: String,
        /// The timeout that elapsed.
        timeout: Duration,
    },
    /// The connection failed (refused, reset, TLS handshake, ...).
    #[error("{endpoint} failed: {message}; check the REST address and that the JobManager is up")]
    Transport {
        /// Method and path of the request.
        endpoint: String,
        /// What the HTTP client reported.
        message: String,
    },
    /// Flink answered 2xx with a body that is not the expected JSON.
    #[error("{endpoint} returned a body that does not parse: {message}")]
    Decode {
        /// Method and path of the request.
        endpoint: String,
        /// The parse error.
        message: String,
    },
    /// The answer's body is longer than [`super::RestClientConfig::max_response_bytes`]; reading
    /// stopped at the limit.
    #[error("{endpoint} returned a body longer than the limit of {limit} bytes (max_response_bytes)")]
    BodyTooLarge {
        /// Method and path of the request.
        endpoint: String,
        /// The limit in bytes.
        limit: usize,
    },
    /// A job or vertex id that cannot be one URL path segment (empty, `.` or `..`).
    #[error("{kind} {id:?} cannot be used in a Flink REST path")]
    InvalidId {
        /// `job id` or `vertex id`.
        kind: &'static str,
        /// The refused id.
        id: String,
    },
    /// The client could not be built (bad base URL, certificate or header).
    #[error("invalid Flink REST client configuration: {0}")]
    Config(String),
}

impl RestError {
    /// Every [`kind`](Self::kind), in declaration order.
    pub const KINDS: [&'static str; 7] = [
        "status",
        "timeout",
        "transport",
        "decode",
        "body_too_large",
        "invalid_id",
        "config",
    ];

    /// A short, stable name of the variant (`status`, `timeout`, `transport`, `decode`,
    /// `body_too_large`, `invalid_id`, `config`): the `kind` label of
    /// [`crate::rest::REST_REQUEST_ERRORS`].
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Status { .. } => "status",
            Self::Timeout { .. } => "timeout",
            Self::Transport { .. } => "transport",
            Self::Decode { .. } => "decode",
            Self::BodyTooLarge { .. } => "body_too_large",
            Self::InvalidId { .. } => "invalid_id",
            Self::Config(_) => "config",
        }
    }

    /// The HTTP status, if Flink answered with an error status.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// Whether the job is unknown to the cluster or no longer running. Flink answers 404 on
    /// `/jobs/<id>` but **500** with a `FlinkJobNotFoundException` on the resource-requirements
    /// endpoints for an unknown or cancelled job.
    pub fn is_job_not_found(&self) -> bool {
        match self {
            Self::Status { status, message, .. } => {
                *status == 404 || (*status == 500 && message.contains("FlinkJobNotFoundException"))
            }
            _ => false,
        }
    }

    /// Whether repeating the same GET may succeed: timeouts, connection failures and server errors,
    /// except a missing job (which stays missing).
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Timeout { .. } | Self::Transport { .. } => true,
            Self::Status { status, .. } => *status >= 500 && !self.is_job_not_found(),
            Self::Decode { .. } | Self::BodyTooLarge { .. } | Self::InvalidId { .. } | Self::Config(_) => false,
        }
    }
}

/// Flink's message from an error body `{"errors": ["<Exception>: <message>\n\tat ...", ...]}`.
///
/// A 500 starts with `"Internal server error."` and puts the server-side exception second, behind
/// `"<Exception on server side:\n"`; that exception is what the caller needs. Only the first line of
/// the chosen entry is kept (the rest is a Java stack trace); a `RestHandlerException` prefix is
/// dropped since the text after it is the user-facing reason, while other exception class names are
/// shortened to their simple name (`FlinkJobNotFoundException: Could not find Flink job (...)`).
pub(crate) fn flink_error_message(body: &str) -> String {
    #[derive(serde::Deserialize)]
    struct ErrorBody {
        errors: Vec<String>,
    }
    let Ok(parsed) = serde_json::from_str::<ErrorBody>(body) else {
        return truncate(body.trim(), 300);
    };
    let mut entries = parsed.errors.iter().map(String::as_str);
    let first = entries.next().unwrap_or("");
    let chosen = if first.trim() == "Internal server error." {
        entries.next().unwrap_or(first)
    } else {
        first
    };
    let chosen = chosen.trim_start_matches("<Exception on server side:").trim_start();
    let line = chosen.lines().next().unwrap_or("").trim();
    truncate(&shorten_exception_class(line), 500)
}

fn shorten_exception_class(line: &str) -> String {
    let Some((class, rest)) = line.split_once(": ") else {
        return line.to_owned();
    };
    let looks_like_class = !class.contains(' ') && class.contains('.');
    if !looks_like_class {
        return line.to_owned();
    }
    let simple = class.rsplit('.').next().unwrap_or(class);
    if simple == "RestHandlerException" {
        rest.to_owned()
    } else {
        format!("{simple}: {rest}")
    }
}

fn truncate(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        text.to_owned()
    } else {
        let mut out: String = text.chars().take(max_chars).collect();
        out.push('…');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_request_message_is_the_first_line_without_the_handler_class() {
        let body = r#"{"errors":["org.apache.flink.runtime.rest.handler.RestHandlerException: The newly requested parallelism 200 for the job vertex 435c exceeds its maximum parallelism 128.\n\tat org.apache.flink.Foo(Foo.java:1)"]}"#;
        assert_eq!(
            flink_error_message(body),
            "The newly requested parallelism 200 for the job vertex 435c exceeds its maximum parallelism 128."
        );
    }

    #[test]
    fn internal_server_error_message_is_the_server_side_exception() {
        let body = r#"{"errors":["Internal server error.","<Exception on server side:\norg.apache.flink.runtime.messages.FlinkJobNotFoundException: Could not find Flink job (69d8)\n\tat x"]}"#;
        assert_eq!(
            flink_error_message(body),
            "FlinkJobNotFoundException: Could not find Flink job (69d8)"
        );
    }

    #[test]
    fn non_flink_bodies_are_kept_short() {
        assert_eq!(flink_error_message("  oops "), "oops");
        assert_eq!(flink_error_message(&"x".repeat(400)).chars().count(), 301);
    }

    #[test]
    fn job_not_found_is_recognised_on_404_and_on_500() {
        let status = |status: u16, message: &str| RestError::Status {
            endpoint: "GET /jobs/x".into(),
            status,
            message: message.into(),
        };
        assert!(status(404, "Job x not found").is_job_not_found());
        assert!(status(500, "FlinkJobNotFoundException: Could not find Flink job (x)").is_job_not_found());
        assert!(!status(500, "Internal server error.").is_job_not_found());
        assert!(status(500, "Internal server error.").is_retryable());
        assert!(!status(500, "FlinkJobNotFoundException: x").is_retryable());
        assert!(!status(400, "bad").is_retryable());
    }
}
