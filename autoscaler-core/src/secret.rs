//! Secrets: values that must never reach a log line or an error message.
//!
//! - [`redact_url`] is the one rule for printing a URL that may carry credentials: the password of
//!   its user info and the values of credential-like query parameters (`password`, `token`, ...)
//!   become `***`. Every `Display`/`Debug` of a URL in the family goes through it.
//! - [`Secret`] wraps a value whose `Debug` and `Display` print `<redacted>`.
//! - [`SecretSource`] says where a secret comes from without holding it: an environment variable
//!   or a file (so that it is not on the command line, which any local user can read).

use std::fmt;

/// Query parameters whose values are credentials (compared case-insensitively).
const SECRET_QUERY_KEYS: &[&str] = &[
    "password",
    "pass",
    "passwd",
    "pwd",
    "secret",
    "token",
    "access_token",
    "api_key",
    "apikey",
    "sslpassword",
    "ssl-key-password",
];

/// The mark that replaces a secret in printed text.
pub const REDACTED: &str = "***";

/// `url` with its secrets replaced by `***`: the password of `scheme://user:password@host` and the
/// values of credential-like query parameters (`?password=...`, `&token=...`). A string that is not
/// a URL is returned unchanged, except that credential-like `key=value` pairs after a `?` are still
/// redacted.
///
/// ```
/// use autoscaler_core::secret::redact_url;
/// assert_eq!(redact_url("postgres://app:s3cret@db:5432/x"), "postgres://app:***@db:5432/x");
/// assert_eq!(redact_url("mysql://db/x?user=app&password=s3cret&ssl-mode=required"),
///            "mysql://db/x?user=app&password=***&ssl-mode=required");
/// assert_eq!(redact_url("http://jm:8081"), "http://jm:8081");
/// ```
pub fn redact_url(url: &str) -> String {
    let (before_query, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let mut out = redact_user_info(before_query);
    if let Some(query) = query {
        out.push('?');
        let (query, fragment) = match query.split_once('#') {
            Some((q, f)) => (q, Some(f)),
            None => (query, None),
        };
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((key, _)) if is_secret_key(key) => format!("{key}={REDACTED}"),
                _ => pair.to_owned(),
            })
            .collect();
        out.push_str(&pairs.join("&"));
        if let Some(fragment) = fragment {
            out.push('#');
            out.push_str(fragment);
        }
    }
    out
}

/// `text` with every secret that `url` carries (user-info password, credential-like query values,
/// raw and percent-decoded) replaced by `***`: for messages of libraries that might echo parts of
/// the URL they were given.
///
/// ```
/// use autoscaler_core::secret::scrub;
/// assert_eq!(scrub("auth failed with s3cret", "postgres://u:s3cret@h/db"), "auth failed with ***");
/// ```
pub fn scrub(text: &str, url: &str) -> String {
    let mut out = redact_url(text);
    for secret in url_secrets(url) {
        if secret.len() >= 3 {
            out = out.replace(&secret, REDACTED);
        }
    }
    out
}

/// The secrets a URL carries, raw and percent-decoded.
fn url_secrets(url: &str) -> Vec<String> {
    let mut found = Vec::new();
    let (before_query, query) = url.split_once('?').map_or((url, None), |(b, q)| (b, Some(q)));
    if let Some((_, rest)) = before_query.split_once("://") {
        let authority = &rest[..rest.find('/').unwrap_or(rest.len())];
        if let Some(at) = authority.rfind('@')
            && let Some((_, password)) = authority[..at].split_once(':')
        {
            found.push(password.to_owned());
        }
    }
    for pair in query.unwrap_or_default().split(['&', '#']) {
        if let Some((key, value)) = pair.split_once('=')
            && is_secret_key(key)
        {
            found.push(value.to_owned());
        }
    }
    let decoded: Vec<String> = found.iter().map(|s| percent_decode(s)).collect();
    found.extend(decoded);
    found.sort_by_key(|s| std::cmp::Reverse(s.len()));
    found.dedup();
    found
}

/// Percent-decoding of a URL component (invalid escapes are kept as they are).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(hi), Some(lo)) => {
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether a query parameter (or configuration key suffix) names a credential.
pub fn is_secret_key(key: &str) -> bool {
    let key = key.trim();
    SECRET_QUERY_KEYS.iter().any(|k| key.eq_ignore_ascii_case(k))
}

/// The value of configuration `key` as it may be printed: a key whose last segment names a
/// credential (`auth.password`, `auth.bearer-token`) shows only an `env:`/`file:` reference, any
/// other value of it becomes `***`; every other value goes through [`redact_url`].
///
/// ```
/// use autoscaler_core::secret::redact_setting;
/// assert_eq!(redact_setting("autoscaler.service.source.a.auth.password", "hunter2"), "***");
/// assert_eq!(redact_setting("autoscaler.service.source.a.auth.password", "env:PW"), "env:PW");
/// assert_eq!(redact_setting("autoscaler.standalone.jdbc.url", "jdbc:postgresql://db/x?password=s"), "jdbc:postgresql://db/x?password=***");
/// assert_eq!(redact_setting("job.autoscaler.metrics.window", "5 min"), "5 min");
/// ```
pub fn redact_setting(key: &str, value: &str) -> String {
    let last = key.rsplit('.').next().unwrap_or(key);
    // `jdbc.password-env-variable` names a variable, not a secret.
    let names_a_secret =
        !last.ends_with("env-variable") && (is_secret_key(last) || last.split(['-', '_']).any(is_secret_key));
    if names_a_secret && SecretSource::parse(value).is_none() {
        REDACTED.to_owned()
    } else {
        redact_url(value)
    }
}

/// `scheme://user:password@rest` -> `scheme://user:***@rest` (the part before any query).
fn redact_user_info(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    match authority.rfind('@') {
        Some(at) => {
            let user_info = &authority[..at];
            let user = user_info.split_once(':').map_or(user_info, |(user, _)| user);
            if user_info.contains(':') {
                format!("{scheme}://{user}:{REDACTED}{}", &rest[at..])
            } else {
                url.to_owned()
            }
        }
        None => url.to_owned(),
    }
}

/// A value that prints as `<redacted>` in `Debug` and `Display`. Read it with [`Secret::expose`].
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Secret(String);

impl Secret {
    /// Wraps `value`.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself; never format it into a message.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Where a secret comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretSource {
    /// The value of this environment variable.
    Env(String),
    /// The content of this file, without a trailing newline.
    File(std::path::PathBuf),
}

/// Why a secret could not be read (the message never holds the secret).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SecretError {
    /// The environment variable is not set (or not UTF-8).
    #[error("environment variable {0} is not set")]
    MissingEnv(String),
    /// The file cannot be read.
    #[error("cannot read the secret file {path}: {reason}")]
    File {
        /// The file.
        path: String,
        /// The I/O error.
        reason: String,
    },
    /// The secret is empty.
    #[error("the secret from {0} is empty")]
    Empty(String),
}

impl SecretSource {
    /// Parses `env:NAME` or `file:PATH`.
    ///
    /// ```
    /// use autoscaler_core::secret::SecretSource;
    /// assert_eq!(SecretSource::parse("env:JDBC_PWD"), Some(SecretSource::Env("JDBC_PWD".into())));
    /// assert!(SecretSource::parse("hunter2").is_none());
    /// ```
    pub fn parse(spec: &str) -> Option<Self> {
        let spec = spec.trim();
        if let Some(name) = spec.strip_prefix("env:") {
            (!name.is_empty()).then(|| Self::Env(name.to_owned()))
        } else {
            spec.strip_prefix("file:")
                .filter(|p| !p.is_empty())
                .map(|p| Self::File(p.into()))
        }
    }

    /// Reads the secret.
    pub fn read(&self) -> Result<Secret, SecretError> {
        let value = match self {
            Self::Env(name) => std::env::var(name).map_err(|_| SecretError::MissingEnv(name.clone()))?,
            Self::File(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| SecretError::File {
                    path: path.display().to_string(),
                    reason: e.kind().to_string(),
                })?;
                text.trim_end_matches(['\r', '\n']).to_owned()
            }
        };
        if value.is_empty() {
            return Err(SecretError::Empty(self.to_string()));
        }
        Ok(Secret(value))
    }
}

impl fmt::Display for SecretSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Env(name) => write!(f, "env:{name}"),
            Self::File(path) => write!(f, "file:{}", path.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_in_user_info_and_query_are_redacted() {
        assert_eq!(redact_url("http://u:PASS@jm:8081/x"), "http://u:***@jm:8081/x");
        assert_eq!(
            redact_url("postgres://u:p%40ss@h/db?sslmode=require"),
            "postgres://u:***@h/db?sslmode=require"
        );
        assert_eq!(
            redact_url("postgres://h/db?user=u&password=PASS&sslmode=verify-full"),
            "postgres://h/db?user=u&password=***&sslmode=verify-full"
        );
        assert_eq!(
            redact_url("mysql://h/db?PASSWORD=PASS#frag"),
            "mysql://h/db?PASSWORD=***#frag"
        );
        // A user without a password has nothing to hide; an `@` in the path is not user info.
        assert_eq!(redact_url("http://u@jm:8081"), "http://u@jm:8081");
        assert_eq!(redact_url("http://jm/a@b:c"), "http://jm/a@b:c");
        assert_eq!(redact_url("sqlite:state.db"), "sqlite:state.db");
        assert_eq!(redact_url("http://u:a:b@h"), "http://u:***@h");
    }

    #[test]
    fn scrub_removes_raw_and_decoded_passwords_from_messages() {
        let url = "postgres://u:p%40ssw0rd@h/db?token=tok123";
        assert_eq!(scrub("bad p@ssw0rd / p%40ssw0rd / tok123", url), "bad *** / *** / ***");
        assert_eq!(scrub("nothing here", "postgres://h/db"), "nothing here");
    }

    #[test]
    fn secrets_print_redacted_and_read_from_env_and_files() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s} {s:?}"), "<redacted> <redacted>");
        assert_eq!(s.expose(), "hunter2");
        let dir = std::env::temp_dir().join(format!("secret-test-{}", std::process::id()));
        std::fs::write(&dir, "hunter2\n").expect("write");
        let read = SecretSource::File(dir.clone()).read().expect("file secret");
        assert_eq!(read.expose(), "hunter2");
        let _ = std::fs::remove_file(&dir);
        let missing = SecretSource::Env("FLINK_AUTOSCALER_TEST_NO_SUCH_VAR".into()).read();
        assert!(matches!(missing, Err(SecretError::MissingEnv(_))));
        assert_eq!(
            SecretSource::parse("file:/run/s"),
            Some(SecretSource::File("/run/s".into()))
        );
        assert_eq!(SecretSource::parse("env:"), None);
    }
}
