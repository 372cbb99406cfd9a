//! Extension points: the reference's plugins as Rust traits, registered by name in a
//! [`PluginRegistry`] and selected per job with the reference's config keys.
//!
//! | trait | reference | selected by | when it runs |
//! |---|---|---|---|
//! | [`ScalingMetricsEvaluatorPlugin`] | `ScalingMetricsEvaluatorPlugin` (FLIP-514) | `job.autoscaler.metrics.custom-evaluators` + `…metrics.custom-evaluator.<name>.class` | per vertex during evaluation; its metrics are merged over the built-in ones |
//! | [`ScalingExecutorPlugin`] | `ScalingExecutorPlugin` (FLIP-575) | `job.autoscaler.scaling.custom-executors` + `…scaling.custom-executor.<name>.class` | after the quota check, in ascending [`priority`](ScalingExecutorPlugin::priority); an empty result vetoes |
//! | [`ParallelismAlignmentMode`] | `ParallelismAlignmentMode` (FLIP-586) | `job.autoscaler.scaling.parallelism-alignment.mode=<name>` + `…mode.<name>.class` | per changing vertex, after the limits |
//! | [`ResourceCheck`] | `ResourceCheck` | set on the registry (no config key, as the reference injects it) | before the quota check of a scaling |
//!
//! The `.class` value is the name a plugin was registered under (the reference matches a class
//! name against the plugins it discovered). Each configured instance sees its own parameters
//! `job.autoscaler.<prefix><name>.<parameter>` with the prefix stripped ([`PluginConfig`]; the legacy
//! `kubernetes.operator.` spelling counts, the canonical key wins).
//!
//! What happens when the configuration names something that is not there, or a plugin fails, is
//! the reference's behaviour:
//! - an instance without `.class`, or whose class is not registered: a warning in the log and the
//!   instance is skipped (a custom alignment mode falls back to BALANCED);
//! - more than one custom evaluator: a warning, only the first is used;
//! - an evaluator that fails: a warning, its answer for that vertex is ignored;
//! - an executor, alignment mode or resource check that fails: the cycle fails (an
//!   `AutoscalerError` event), nothing is recorded or realized.
//!
//! ```
//! use autoscaler_core::plugins::{ExecutorContext, PluginError, PluginRegistry, ScalingExecutorPlugin, ScalingSummaries};
//! use autoscaler_core::config::{AutoScalerOptions, Configuration};
//!
//! /// Never lets a vertex go above `max` (a parameter of the instance).
//! struct Cap;
//! impl ScalingExecutorPlugin for Cap {
//!     fn apply(&self, ctx: &ExecutorContext<'_>, mut summaries: ScalingSummaries) -> Result<ScalingSummaries, PluginError> {
//!         let max: u32 = ctx.config.parameter("max").unwrap_or("8").parse().map_err(|_| PluginError::failed("max is not a number"))?;
//!         for summary in summaries.values_mut() {
//!             summary.new_parallelism = summary.new_parallelism.min(max);
//!         }
//!         Ok(summaries)
//!     }
//! }
//!
//! let registry = PluginRegistry::new().with_executor("cap", Cap);
//! let conf = Configuration::from_iter([
//!     ("job.autoscaler.scaling.custom-executors", "small"),
//!     ("job.autoscaler.scaling.custom-executor.small.class", "cap"),
//!     ("job.autoscaler.scaling.custom-executor.small.max", "4"),
//! ]);
//! let options = AutoScalerOptions::from_configuration(&conf).unwrap();
//! let resolved = registry.resolve(&conf, &options);
//! assert_eq!(resolved.executor_instances().collect::<Vec<_>>(), ["small"]);
//! ```

mod alignment;
mod business_hours;
mod config;
mod evaluator;
mod executor;
mod hooks;
mod resource_check;

pub use alignment::{AlignmentModeContext, ParallelismAlignmentMode};
pub use business_hours::{BUSINESS_HOURS_EXECUTOR, BusinessHoursExecutor};
pub use config::{
    ALIGNMENT_MODE_PREFIX, CUSTOM_EVALUATOR_PREFIX, CUSTOM_EXECUTOR_PREFIX, PluginConfig, prefix_stripped_parameters,
};
pub use evaluator::{EvaluatorContext, ScalingMetricsEvaluatorPlugin, evaluate_with_plugins};
pub use executor::{ExecutorContext, SCALING_VETOED_REASON, ScalingExecutorPlugin, ScalingSummaries};
pub use resource_check::{NoopResourceCheck, ResourceCheck, estimate_num_task_slots_after_rescale};

pub(crate) use alignment::align_with_plugin;
pub(crate) use executor::{ChainInput, ChainOutcome, apply_executor_chain};
pub(crate) use hooks::DecisionHooks;
#[cfg(test)]
pub(crate) use hooks::{NoPlugins, NoPluginsOrAbort};
pub(crate) use resource_check::scaling_would_exceed_cluster_resources;

use crate::config::Configuration;
use crate::config::{AutoScalerOptions, option_keys};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

/// A plugin's failure, or a result the autoscaler cannot use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PluginError {
    /// The plugin could not do its work (its own message).
    #[error("{0}")]
    Failed(String),
    /// A plugin (named as the log names it) failed.
    #[error("{plugin} failed: {source}")]
    In {
        /// Which configured plugin, e.g. `custom scaling executor instance 'cap' (class=cap)`.
        plugin: String,
        /// What it reported.
        #[source]
        source: Box<PluginError>,
    },
    /// A scaling executor returned a summary that cannot be applied.
    #[error("{plugin} returned an invalid scaling summary for vertex {vertex}: {reason}")]
    InvalidSummary {
        /// Which configured executor.
        plugin: String,
        /// The vertex of the summary.
        vertex: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The decision aborted as the reference 1.16 aborts it (only under
    /// `job.autoscaler.compat.reference-1-16: true`); no plugin is at fault.
    #[error(transparent)]
    Aborted(#[from] crate::scaling::DecisionError),
}

impl PluginError {
    /// A plugin's own failure with `message`.
    pub fn failed(message: impl Into<String>) -> Self {
        Self::Failed(message.into())
    }

    fn within(self, plugin: String) -> Self {
        Self::In {
            plugin,
            source: Box::new(self),
        }
    }
}

/// The plugins a platform offers, each under the name a job's configuration selects it by (the
/// `.class` value). The standalone binary and every `JobAutoScalerImpl` hold one; the default is
/// empty (the reference's behaviour without plugins).
///
/// Registering a second plugin of the same kind under a name replaces the first.
#[derive(Clone, Default)]
pub struct PluginRegistry {
    evaluators: BTreeMap<String, Arc<dyn ScalingMetricsEvaluatorPlugin>>,
    executors: BTreeMap<String, Arc<dyn ScalingExecutorPlugin>>,
    alignment_modes: BTreeMap<String, Arc<dyn ParallelismAlignmentMode>>,
    resource_check: Option<Arc<dyn ResourceCheck>>,
}

impl fmt::Debug for PluginRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PluginRegistry")
            .field("evaluators", &self.evaluators.keys().collect::<Vec<_>>())
            .field("executors", &self.executors.keys().collect::<Vec<_>>())
            .field("alignment_modes", &self.alignment_modes.keys().collect::<Vec<_>>())
            .field("resource_check", &self.resource_check.is_some())
            .finish()
    }
}

impl PluginRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a custom evaluator under `class`.
    pub fn with_evaluator(
        mut self,
        class: impl Into<String>,
        plugin: impl ScalingMetricsEvaluatorPlugin + 'static,
    ) -> Self {
        self.evaluators.insert(class.into(), Arc::new(plugin));
        self
    }

    /// Registers a scaling executor under `class`.
    pub fn with_executor(mut self, class: impl Into<String>, plugin: impl ScalingExecutorPlugin + 'static) -> Self {
        self.executors.insert(class.into(), Arc::new(plugin));
        self
    }

    /// Registers a custom alignment mode under `class`.
    pub fn with_alignment_mode(
        mut self,
        class: impl Into<String>,
        mode: impl ParallelismAlignmentMode + 'static,
    ) -> Self {
        self.alignment_modes.insert(class.into(), Arc::new(mode));
        self
    }

    /// Sets the cluster-resource check consulted before every scaling (default: none, which never
    /// blocks, as the reference's `NoopResourceCheck`).
    pub fn with_resource_check(mut self, check: impl ResourceCheck + 'static) -> Self {
        self.resource_check = Some(Arc::new(check));
        self
    }

    /// Whether nothing is registered.
    pub fn is_empty(&self) -> bool {
        self.evaluators.is_empty()
            && self.executors.is_empty()
            && self.alignment_modes.is_empty()
            && self.resource_check.is_none()
    }

    /// Picks the plugins the job configuration `conf` (already read into `options`) selects, with
    /// each instance's parameters; logs a warning for every instance that cannot be resolved (see
    /// the module docs). Executors come sorted by ascending priority; equal priorities keep the
    /// configured order.
    pub fn resolve(&self, conf: &Configuration, options: &AutoScalerOptions) -> ResolvedPlugins {
        ResolvedPlugins {
            evaluator: self.resolve_evaluator(conf, options),
            executors: self.resolve_executors(conf, options),
            alignment_mode: self.resolve_alignment_mode(conf, options),
            resource_check: self.resource_check.clone(),
        }
    }

    /// Reference `ScalingMetricEvaluator.getCustomEvaluatorIfRequired`.
    fn resolve_evaluator(
        &self,
        conf: &Configuration,
        options: &AutoScalerOptions,
    ) -> Option<Resolved<dyn ScalingMetricsEvaluatorPlugin>> {
        let instances = &options.custom_evaluators;
        let instance = instances.first()?;
        if instances.len() > 1 {
            tracing::warn!(
                "Only a single custom metric evaluator is currently supported, but {} were configured via \
                 'job.autoscaler.metrics.custom-evaluators': {instances:?}. Falling back to the first entry \
                 ('{instance}'); the remaining entries will be ignored.",
                instances.len()
            );
        }
        resolve_instance(
            &self.evaluators,
            conf,
            CUSTOM_EVALUATOR_PREFIX,
            instance,
            "metric evaluator",
        )
    }

    /// Reference `ScalingExecutor.resolveCustomScalingExecutors`.
    fn resolve_executors(
        &self,
        conf: &Configuration,
        options: &AutoScalerOptions,
    ) -> Vec<Resolved<dyn ScalingExecutorPlugin>> {
        let mut seen = BTreeSet::new();
        let mut resolved = Vec::new();
        for instance in &options.custom_executors {
            if !seen.insert(instance.as_str()) {
                tracing::warn!(
                    "Custom scaling executor instance name '{instance}' is configured more than once; ignoring duplicates."
                );
                continue;
            }
            if let Some(plugin) = resolve_instance(
                &self.executors,
                conf,
                CUSTOM_EXECUTOR_PREFIX,
                instance,
                "scaling executor",
            ) {
                resolved.push(plugin);
            }
        }
        // A stable sort: equal priorities run in the configured order.
        resolved.sort_by_key(|r| r.plugin.priority());
        if !resolved.is_empty() {
            tracing::info!(
                "Custom scaling executors resolved and sorted by priority: {:?}",
                resolved
                    .iter()
                    .map(|r| format!(
                        "[name={}, class={}, priority={}]",
                        r.config.instance(),
                        r.config.class(),
                        r.plugin.priority()
                    ))
                    .collect::<Vec<_>>()
            );
        }
        resolved
    }

    /// Reference `ParallelismAligner.resolveByName` for a name that is not a built-in.
    fn resolve_alignment_mode(
        &self,
        conf: &Configuration,
        options: &AutoScalerOptions,
    ) -> Option<Resolved<dyn ParallelismAlignmentMode>> {
        let name = options.custom_alignment_mode.as_deref()?;
        let Some(class) = class_of(conf, ALIGNMENT_MODE_PREFIX, name) else {
            tracing::warn!(
                "Alignment mode '{name}' is not a built-in and has no '{}' configured. Falling back to BALANCED.",
                class_key(ALIGNMENT_MODE_PREFIX, name)
            );
            return None;
        };
        let Some(mode) = self.alignment_modes.get(class) else {
            tracing::warn!(
                "Custom alignment mode '{name}' (class {class}) was not found among the registered plugins \
                 {:?}. Falling back to BALANCED.",
                self.alignment_modes.keys().collect::<Vec<_>>()
            );
            return None;
        };
        Some(Resolved {
            plugin: Arc::clone(mode),
            config: PluginConfig::new(conf, ALIGNMENT_MODE_PREFIX, name, class),
        })
    }
}

/// `job.autoscaler.<prefix><name>.class`.
fn class_key(prefix: &str, name: &str) -> String {
    format!("{}{prefix}{name}.class", crate::config::AUTOSCALER_PREFIX)
}

/// The class an instance names: the canonical key, else the legacy fallback key; blank = none.
fn class_of<'c>(conf: &'c Configuration, prefix: &str, name: &str) -> Option<&'c str> {
    option_keys(&format!("{prefix}{name}.class"))
        .iter()
        .find_map(|key| conf.get(key))
        .filter(|class| !class.trim().is_empty())
}

/// Looks `instance` up: its class key, then the registered plugin of that class.
fn resolve_instance<T: ?Sized>(
    registered: &BTreeMap<String, Arc<T>>,
    conf: &Configuration,
    prefix: &str,
    instance: &str,
    what: &str,
) -> Option<Resolved<T>> {
    let Some(class) = class_of(conf, prefix, instance) else {
        tracing::warn!(
            "Custom {what} instance '{instance}' is configured but no implementation class is set via '{}'. Ignoring.",
            class_key(prefix, instance)
        );
        return None;
    };
    let Some(plugin) = registered.get(class) else {
        tracing::warn!(
            "No registered {what} matches class '{class}' configured for instance '{instance}' via '{}'. \
             Registered: {:?}.",
            class_key(prefix, instance),
            registered.keys().collect::<Vec<_>>()
        );
        return None;
    };
    Some(Resolved {
        plugin: Arc::clone(plugin),
        config: PluginConfig::new(conf, prefix, instance, class),
    })
}

/// One resolved plugin instance with the configuration it sees.
pub(crate) struct Resolved<T: ?Sized> {
    pub(crate) plugin: Arc<T>,
    pub(crate) config: PluginConfig,
}

impl<T: ?Sized> Clone for Resolved<T> {
    fn clone(&self) -> Self {
        Self {
            plugin: Arc::clone(&self.plugin),
            config: self.config.clone(),
        }
    }
}

/// The plugins one job's configuration selects ([`PluginRegistry::resolve`]); the default selects
/// none, which is the built-in behaviour.
#[derive(Clone, Default)]
pub struct ResolvedPlugins {
    evaluator: Option<Resolved<dyn ScalingMetricsEvaluatorPlugin>>,
    executors: Vec<Resolved<dyn ScalingExecutorPlugin>>,
    alignment_mode: Option<Resolved<dyn ParallelismAlignmentMode>>,
    resource_check: Option<Arc<dyn ResourceCheck>>,
}

impl fmt::Debug for ResolvedPlugins {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResolvedPlugins")
            .field("evaluator", &self.evaluator_instance())
            .field("executors", &self.executor_instances().collect::<Vec<_>>())
            .field("alignment_mode", &self.alignment_mode_name())
            .field("resource_check", &self.resource_check.is_some())
            .finish()
    }
}

impl ResolvedPlugins {
    /// The custom evaluator instance in use, if any.
    pub fn evaluator_instance(&self) -> Option<&str> {
        self.evaluator.as_ref().map(|r| r.config.instance())
    }

    /// The scaling executor instances in the order they run.
    pub fn executor_instances(&self) -> impl Iterator<Item = &str> {
        self.executors.iter().map(|r| r.config.instance())
    }

    /// The custom alignment mode in use (its configured name), if any.
    pub fn alignment_mode_name(&self) -> Option<&str> {
        self.alignment_mode.as_ref().map(|r| r.config.instance())
    }

    /// Whether a cluster-resource check is consulted.
    pub fn has_resource_check(&self) -> bool {
        self.resource_check.is_some()
    }

    pub(crate) fn evaluator(&self) -> Option<&Resolved<dyn ScalingMetricsEvaluatorPlugin>> {
        self.evaluator.as_ref()
    }

    pub(crate) fn executors(&self) -> &[Resolved<dyn ScalingExecutorPlugin>] {
        &self.executors
    }

    pub(crate) fn alignment_mode(&self) -> Option<&Resolved<dyn ParallelismAlignmentMode>> {
        self.alignment_mode.as_ref()
    }

    pub(crate) fn resource_check(&self) -> Option<&dyn ResourceCheck> {
        self.resource_check.as_deref()
    }
}

#[cfg(test)]
mod tests;
