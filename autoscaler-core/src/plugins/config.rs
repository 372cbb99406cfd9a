//! What a configured plugin instance sees of the configuration (reference
//! `AutoScalerOptions.prefixStrippedConfiguration` and `overlayConfiguration`).

use crate::config::Configuration;
use crate::config::{AUTOSCALER_PREFIX, LEGACY_PREFIX};
use crate::model::state::ConfigChanges;

/// Prefix (after `job.autoscaler.`) of a custom evaluator instance's keys.
pub const CUSTOM_EVALUATOR_PREFIX: &str = "metrics.custom-evaluator.";
/// Prefix (after `job.autoscaler.`) of a scaling executor instance's keys.
pub const CUSTOM_EXECUTOR_PREFIX: &str = "scaling.custom-executor.";
/// Prefix (after `job.autoscaler.`) of a custom alignment mode's keys.
pub const ALIGNMENT_MODE_PREFIX: &str = "scaling.parallelism-alignment.mode.";

/// The keys `job.autoscaler.<prefix><name>.<parameter>` of `conf` as `<parameter>` (reference
/// `prefixStrippedConfiguration`): the legacy `kubernetes.operator.job.autoscaler.` spelling first,
/// so the canonical spelling wins where both set a parameter. `class` is a parameter like any other.
///
/// ```
/// use autoscaler_core::config::Configuration;
/// use autoscaler_core::plugins::{CUSTOM_EXECUTOR_PREFIX, prefix_stripped_parameters};
/// let conf = Configuration::from_iter([
///     ("job.autoscaler.scaling.custom-executor.hours.start", "09:00"),
///     ("kubernetes.operator.job.autoscaler.scaling.custom-executor.hours.start", "08:00"),
///     ("kubernetes.operator.job.autoscaler.scaling.custom-executor.hours.end", "17:00"),
///     ("job.autoscaler.scaling.custom-executor.other.start", "10:00"),
/// ]);
/// let params = prefix_stripped_parameters(&conf, CUSTOM_EXECUTOR_PREFIX, "hours");
/// assert_eq!(params, Configuration::from_iter([("start", "09:00"), ("end", "17:00")]));
/// ```
pub fn prefix_stripped_parameters(conf: &Configuration, prefix: &str, name: &str) -> Configuration {
    let canonical = format!("{AUTOSCALER_PREFIX}{prefix}{name}.");
    let legacy = format!("{LEGACY_PREFIX}{prefix}{name}.");
    let mut stripped = Configuration::new();
    for wanted in [&legacy, &canonical] {
        for (key, value) in conf.iter() {
            if let Some(parameter) = key.strip_prefix(wanted.as_str()) {
                stripped.set(parameter, value);
            }
        }
    }
    stripped
}

/// One configured plugin instance: its name, the registered class it resolved to, its own
/// parameters and the configuration it sees.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginConfig {
    instance: String,
    class: String,
    parameters: Configuration,
    configuration: Configuration,
}

impl PluginConfig {
    /// The instance `name` of class `class`, whose keys live under `job.autoscaler.<prefix><name>.`.
    pub fn new(conf: &Configuration, prefix: &str, name: &str, class: &str) -> Self {
        let parameters = prefix_stripped_parameters(conf, prefix, name);
        Self {
            instance: name.to_owned(),
            class: class.to_owned(),
            configuration: conf.overlay(&parameters),
            parameters,
        }
    }

    /// The configured instance name (`<name>` in the keys).
    pub fn instance(&self) -> &str {
        &self.instance
    }

    /// The registered name the instance's `.class` key selected.
    pub fn class(&self) -> &str {
        &self.class
    }

    /// The instance's own parameters, prefix stripped (`start` for
    /// `job.autoscaler.scaling.custom-executor.<name>.start`).
    pub fn parameters(&self) -> &Configuration {
        &self.parameters
    }

    /// One parameter of the instance.
    pub fn parameter(&self, key: &str) -> Option<&str> {
        self.parameters.get(key)
    }

    /// The job configuration with the instance's parameters set on top (the reference's plugin
    /// context `getConfiguration()`): parameters win over job keys of the same name.
    pub fn configuration(&self) -> &Configuration {
        &self.configuration
    }

    /// The same instance seeing the job configuration with `changes` applied
    /// ([`ConfigChanges::applied_to`]), its parameters still on top: what a scaling executor sees
    /// while `memory.tuning.enabled` (the reference hands it the tuned configuration).
    ///
    /// ```
    /// use autoscaler_core::plugins::{CUSTOM_EXECUTOR_PREFIX, PluginConfig};
    /// use autoscaler_core::config::Configuration;
    /// use autoscaler_core::ConfigChanges;
    /// let conf = Configuration::from_iter([
    ///     ("taskmanager.memory.process.size", "4 gb"),
    ///     ("job.autoscaler.scaling.custom-executor.e.max", "8"),
    /// ]);
    /// let config = PluginConfig::new(&conf, CUSTOM_EXECUTOR_PREFIX, "e", "cap");
    /// let mut changes = ConfigChanges::default();
    /// changes.overrides.insert("taskmanager.memory.process.size".into(), "2 gb".into());
    /// let tuned = config.with_config_changes(&changes);
    /// assert_eq!(tuned.configuration().get("taskmanager.memory.process.size"), Some("2 gb"));
    /// assert_eq!(tuned.configuration().get("max"), Some("8"));
    /// assert_eq!(tuned.parameters(), config.parameters());
    /// ```
    pub fn with_config_changes(&self, changes: &ConfigChanges) -> Self {
        Self {
            instance: self.instance.clone(),
            class: self.class.clone(),
            parameters: self.parameters.clone(),
            configuration: changes.applied_to(&self.configuration).overlay(&self.parameters),
        }
    }
}
