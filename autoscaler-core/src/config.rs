//! A Flink-style configuration: string keys to string values.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A Flink `Configuration`: `key -> value` strings, e.g. `job.autoscaler.metrics.window -> "10 min"`.
///
/// ```
/// use autoscaler_core::Configuration;
/// let base = Configuration::from_iter([("job.autoscaler.utilization.target", "0.7")]);
/// let job = Configuration::from_iter([("job.autoscaler.utilization.target", "0.6")]);
/// assert_eq!(base.overlay(&job).get("job.autoscaler.utilization.target"), Some("0.6"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Configuration(BTreeMap<String, String>);

impl Configuration {
    /// An empty configuration.
    pub fn new() -> Self {
        Self::default()
    }

    /// The raw value of `key`, if set.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    /// Whether `key` is set.
    pub fn contains_key(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }

    /// Sets `key` to `value`.
    pub fn set(&mut self, key: impl Into<String>, value: impl Into<String>) {
        self.0.insert(key.into(), value.into());
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        self.0.remove(key)
    }

    /// A copy of `self` with every entry of `overrides` set on top (the overrides win).
    pub fn overlay(&self, overrides: &Configuration) -> Configuration {
        let mut merged = self.clone();
        for (k, v) in &overrides.0 {
            merged.0.insert(k.clone(), v.clone());
        }
        merged
    }

    /// All entries in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there is no entry.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Configuration {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        Self(iter.into_iter().map(|(k, v)| (k.into(), v.into())).collect())
    }
}
