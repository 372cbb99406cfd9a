//! What a store is opened with: its URL ([`StateUrl`]) and tuning ([`StoreOptions`]). Compiled
//! whatever database drivers are: a URL names its database even when the driver that opens it is
//! left out, and opening it then fails naming the missing feature ([`missing_driver`]).

use autoscaler_core::StateError;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// How a store reaches its database; see [`StoreOptions`] for the knobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateUrl {
    /// `memory`: nothing persisted.
    Memory,
    /// `sqlite:PATH` (or `sqlite://PATH`, `sqlite::memory:`): one SQLite file.
    Sqlite(String),
    /// `postgres://...` or `postgresql://...`.
    Postgres(String),
    /// `mysql://...` or `mariadb://...`.
    MySql(String),
}

impl StateUrl {
    /// The backend's name: `memory`, `sqlite`, `postgres` or `mysql` (the `store` label of the
    /// flush metrics, and the name of the cargo feature that compiles its driver in).
    pub fn backend(&self) -> &'static str {
        match self {
            Self::Memory => "memory",
            Self::Sqlite(_) => "sqlite",
            Self::Postgres(_) => "postgres",
            Self::MySql(_) => "mysql",
        }
    }
}

impl FromStr for StateUrl {
    type Err = StateError;

    fn from_str(url: &str) -> Result<Self, StateError> {
        let url = url.trim();
        if url == "memory" || url == "memory:" {
            Ok(StateUrl::Memory)
        } else if let Some(rest) = url.strip_prefix("sqlite:") {
            // `sqlite:` alone (or `sqlite://`, `sqlite:?mode=rwc`) names no file, and SQLite then
            // opens a temporary database that is deleted on close: state would be lost silently.
            let path = rest.strip_prefix("//").unwrap_or(rest);
            if path.split('?').next().is_none_or(|p| p.trim().is_empty()) {
                return Err(StateError::Backend {
                    operation: "open",
                    message: format!(
                        "state URL `{url}` names no file: use `sqlite:PATH` (or `sqlite::memory:` / `memory` for state that is not kept)"
                    ),
                });
            }
            Ok(StateUrl::Sqlite(url.to_owned()))
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(StateUrl::Postgres(url.to_owned()))
        } else if url.starts_with("mysql://") {
            Ok(StateUrl::MySql(url.to_owned()))
        } else if let Some(rest) = url.strip_prefix("mariadb://") {
            Ok(StateUrl::MySql(format!("mysql://{rest}")))
        } else {
            Err(StateError::Backend {
                operation: "open",
                message: format!(
                    "unsupported state URL `{}`: use `memory`, `sqlite:PATH`, `postgres://...` or `mysql://...`",
                    redact_password(url)
                ),
            })
        }
    }
}

impl fmt::Display for StateUrl {
    /// The URL without its password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StateUrl::Memory => f.write_str("memory"),
            StateUrl::Sqlite(url) => f.write_str(url),
            StateUrl::Postgres(url) | StateUrl::MySql(url) => f.write_str(&redact_password(url)),
        }
    }
}

/// The URL without its secrets, for messages (the family's one rule: [`redact_url`]).
pub(crate) fn redact_password(url: &str) -> String {
    autoscaler_core::secret::redact_url(url)
}

/// The error of opening `url` in a build without its driver: names the cargo feature of
/// `autoscaler-state` that compiles the driver in (`memory` needs none).
pub(crate) fn missing_driver(url: &StateUrl) -> StateError {
    let backend = url.backend();
    StateError::Backend {
        operation: "open",
        message: format!(
            "state URL `{url}` needs the `{backend}` feature of autoscaler-state, which this build leaves out \
             (enable it in Cargo.toml, or use `memory`)"
        ),
    }
}

/// Tuning of a database-backed store or event handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreOptions {
    /// Upper bound on connections in the pool.
    pub max_connections: u32,
    /// How long an operation waits for a connection before failing; bounds how long a flush against a
    /// database that is down takes.
    pub acquire_timeout: Duration,
    /// SQLite only: how long a write waits for another process's lock.
    pub busy_timeout: Duration,
    /// Serialized states at least this many bytes long are gzip-compressed.
    pub compression_threshold: usize,
    /// Whether to run the embedded migrations on open (turn off when a DBA manages the schema).
    pub migrate: bool,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            max_connections: 4,
            acquire_timeout: Duration::from_secs(10),
            busy_timeout: Duration::from_secs(5),
            compression_threshold: crate::codec::DEFAULT_COMPRESSION_THRESHOLD,
            migrate: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_driver_is_named_with_its_feature() {
        let url: StateUrl = "postgres://u:secret@h:5432/db".parse().unwrap_or(StateUrl::Memory);
        let message = missing_driver(&url).to_string();
        assert_eq!(
            message,
            "state store backend error during open: state URL `postgres://u:***@h:5432/db` needs the `postgres` \
             feature of autoscaler-state, which this build leaves out (enable it in Cargo.toml, or use `memory`)"
        );
    }
}
