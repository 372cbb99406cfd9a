//! The service's base configuration: where it is read from, what overrides it, how it is checked
//! and how it is re-read on SIGHUP.
//!
//! # Discovery and overrides
//!
//! The base configuration is, lowest priority first:
//! 1. `job.autoscaler.enabled: true` (the service exists to autoscale);
//! 2. one file: `--config FILE`; without it `$FLINK_CONF_DIR/config.yaml`, else
//!    `$FLINK_CONF_DIR/flink-conf.yaml` (as Flink's scripts look); without either, none;
//! 3. `-Dkey=value` (Flink's dynamic properties) and the Java entrypoint's `--key value` for keys
//!    under `autoscaler.`, `job.autoscaler.` and `kubernetes.operator.job.autoscaler.`
//!    ([`rewrite_key_value_args`] turns the latter into the former), in command line order;
//! 4. the dedicated flags (`--interval`, `--parallelism`).
//!
//! # Checks
//!
//! [`check`] lists every problem at once, each naming its key: every autoscaler option the
//! options parser refuses or the reference's validation rejects
//! ([`autoscaler_core::config::validate_all`]), and every service key that does not parse
//! (control loop, REST client, sources, state store, cooldown, startup timeout). Unknown keys under
//! `job.autoscaler.` (and the legacy prefix) and `autoscaler.standalone.` are warnings naming the
//! closest known key, never errors.
//!
//! # Reload
//!
//! On SIGHUP the file is read again with the same overrides ([`ConfigInputs::load`]) and checked:
//! a valid configuration becomes the base every job's configuration is laid over from the next
//! cycle ([`ReloadableBase`]); an invalid one is logged with every problem and the running one is
//! kept. What the service builds once at start (sources, state store, events, interval,
//! parallelism, listen addresses) keeps its start value; a change to those keys is logged as
//! needing a restart.

use crate::service::metrics::ServiceMetrics;
use crate::service::settings;
use crate::status::DecisionBoard;
use anyhow::{Context, Result, bail};
use autoscaler_core::config::{
    AutoScalerOptions, Configuration, ValidationError, catalog, parse_duration, validate, validate_all,
};
use autoscaler_core::record::{DecisionRecord, JobOutcome};
use autoscaler_core::{AutoscalerMetricsReporter, FetchError, JobListFetcher, ValidationRejection, async_trait};
use autoscaler_realizer::sources::SourceJobContext;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

/// How long `run` keeps trying to open its databases before it exits 1 (default 60 s).
pub const STARTUP_TIMEOUT_KEY: &str = "autoscaler.service.startup-timeout";
/// Default of [`STARTUP_TIMEOUT_KEY`].
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(60);
/// Whether replicas sharing a database store coordinate through job leases (default `true`; the
/// `memory` store never does). The other `autoscaler.service.ha.*` keys are
/// [`autoscaler_core::HaOptions`]'.
pub const HA_ENABLED_KEY: &str = "autoscaler.service.ha.enabled";
/// The environment variable naming Flink's configuration directory.
pub const FLINK_CONF_DIR: &str = "FLINK_CONF_DIR";
/// The files looked for in [`FLINK_CONF_DIR`], in order (Flink 1.19+'s, then the legacy one).
pub const FLINK_CONF_FILES: [&str; 2] = ["config.yaml", "flink-conf.yaml"];

/// The prefixes of the keys the Java entrypoint's `--key value` form may set.
const KEY_VALUE_PREFIXES: [&str; 3] = ["autoscaler.", "job.autoscaler.", "kubernetes.operator.job.autoscaler."];

/// Rewrites the Java entrypoint's `--key value` and `--key=value` (for keys under
/// `autoscaler.`, `job.autoscaler.` and `kubernetes.operator.job.autoscaler.`) into
/// `-D key=value`, so that the command line parser sees one form. Other arguments are untouched.
///
/// ```
/// use flink_autoscaler_cli::service::config::rewrite_key_value_args;
/// let args = ["flink-autoscaler", "run", "--job.autoscaler.metrics.window", "5 min", "--dry-run"];
/// let out: Vec<String> = rewrite_key_value_args(args.iter().map(Into::into))
///     .into_iter()
///     .map(|a| a.to_string_lossy().into_owned())
///     .collect();
/// assert_eq!(out, ["flink-autoscaler", "run", "-D", "job.autoscaler.metrics.window=5 min", "--dry-run"]);
/// ```
pub fn rewrite_key_value_args(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut out = Vec::new();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let key = arg
            .to_str()
            .and_then(|a| a.strip_prefix("--"))
            .filter(|k| KEY_VALUE_PREFIXES.iter().any(|p| k.starts_with(p)))
            .map(str::to_owned);
        match key {
            Some(pair) if pair.contains('=') => {
                out.push(OsString::from("-D"));
                out.push(OsString::from(pair));
            }
            Some(key) => match args.next() {
                Some(value) => {
                    out.push(OsString::from("-D"));
                    let mut pair = OsString::from(format!("{key}="));
                    pair.push(value);
                    out.push(pair);
                }
                None => out.push(arg),
            },
            None => out.push(arg),
        }
    }
    out
}

/// Where the base configuration comes from: the flags that name and override it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigInputs {
    /// `--config FILE`.
    pub file: Option<PathBuf>,
    /// `-D key=value` (and the rewritten `--key value`), in order.
    pub dynamic: Vec<String>,
    /// Dedicated flags that set a key (`--interval`, `--parallelism`), applied last.
    pub flags: Vec<(String, String)>,
}

/// A loaded base configuration with where each key came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseConfig {
    /// The merged configuration.
    pub conf: Configuration,
    /// The file read, if any.
    pub file: Option<PathBuf>,
    /// Where each key's value came from (`default`, the file, `-D`, a flag).
    pub origins: BTreeMap<String, String>,
}

/// The file to read: `--config`, else the first of [`FLINK_CONF_FILES`] in `$FLINK_CONF_DIR`.
///
/// # Errors
/// When `FLINK_CONF_DIR` is set but holds neither file.
pub fn discover(file_flag: Option<&Path>, flink_conf_dir: Option<&Path>) -> Result<Option<PathBuf>> {
    if let Some(file) = file_flag {
        return Ok(Some(file.to_owned()));
    }
    let Some(dir) = flink_conf_dir else {
        return Ok(None);
    };
    match FLINK_CONF_FILES.iter().map(|f| dir.join(f)).find(|p| p.is_file()) {
        Some(file) => Ok(Some(file)),
        None => bail!(
            "{FLINK_CONF_DIR}={}: holds neither {} nor {}",
            dir.display(),
            FLINK_CONF_FILES[0],
            FLINK_CONF_FILES[1]
        ),
    }
}

impl ConfigInputs {
    /// Reads the file (discovered as [`discover`] says, `FLINK_CONF_DIR` from the environment) and
    /// applies the overrides.
    ///
    /// # Errors
    /// When the file cannot be found or read, or a `-D` argument is not `key=value`.
    pub fn load(&self) -> Result<BaseConfig> {
        let conf_dir = std::env::var_os(FLINK_CONF_DIR).map(PathBuf::from);
        let file = discover(self.file.as_deref(), conf_dir.as_deref())?;
        let mut conf = Configuration::from_iter([("job.autoscaler.enabled", "true")]);
        let mut origins = BTreeMap::from([("job.autoscaler.enabled".to_owned(), "default of run".to_owned())]);
        if let Some(path) = &file {
            let shown = path.display().to_string();
            for (key, value) in crate::commands::run::load_flink_yaml(path)?.iter() {
                conf.set(key, value);
                origins.insert(key.to_owned(), shown.clone());
            }
        }
        for arg in &self.dynamic {
            let (key, value) = arg
                .split_once('=')
                .filter(|(k, _)| !k.trim().is_empty())
                .with_context(|| format!("-D {arg:?}: expected key=value"))?;
            conf.set(key.trim(), value.trim());
            origins.insert(key.trim().to_owned(), "-D".to_owned());
        }
        for (key, value) in &self.flags {
            conf.set(key.clone(), value.clone());
            origins.insert(key.clone(), "flag".to_owned());
        }
        Ok(BaseConfig { conf, file, origins })
    }
}

/// The flags that choose sources and stores, which the checks need to know to skip the keys they
/// replace.
#[derive(Debug, Clone, Copy, Default)]
pub struct CheckFlags<'a> {
    /// `--flink-url`.
    pub flink_urls: &'a [String],
    /// `--yarn-rm-url`.
    pub yarn_urls: &'a [String],
    /// `--state`.
    pub state: Option<&'a str>,
    /// `--events`.
    pub events: Option<&'a str>,
}

/// What is wrong with a base configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigReport {
    /// Problems that make the configuration unusable, each naming its key.
    pub errors: Vec<String>,
    /// Unknown keys, each with the closest known key.
    pub warnings: Vec<String>,
}

impl ConfigReport {
    /// Whether the configuration may be used.
    pub fn is_valid(&self) -> bool {
        self.errors.is_empty()
    }
}

/// Every problem of `conf` (see the module documentation).
pub fn check(conf: &Configuration, flags: CheckFlags<'_>) -> ConfigReport {
    let mut errors: Vec<String> = validate_all(conf).into_iter().map(|p| p.message).collect();
    let mut service = |result: Result<(), String>| {
        // A service part that reads an autoscaler option words its error as the parser does.
        if let Err(message) = result
            && !errors.contains(&message)
        {
            errors.push(message);
        }
    };
    service(
        autoscaler_core::ControlLoopOptions::from_configuration(conf)
            .map(drop)
            .map_err(|e| e.to_string()),
    );
    let rest = autoscaler_realizer::rest::RestClientConfig::from_configuration(conf);
    service(rest.as_ref().map(drop).map_err(ToString::to_string));
    service(
        autoscaler_realizer::CooldownConfig::from_configuration(conf)
            .map(drop)
            .map_err(|e| e.to_string()),
    );
    service(startup_timeout(conf).map(drop).map_err(|e| e.to_string()));
    service(ha_options(conf, None).map(drop).map_err(|e| e.to_string()));
    match settings::source_specs(flags.flink_urls, flags.yarn_urls, conf) {
        // Each source's own settings: credentials, TLS files, job selection, YARN access.
        Ok(specs) => {
            if let Ok(rest) = &rest {
                for spec in &specs {
                    service(
                        settings::build_source(spec, conf, rest)
                            .map(drop)
                            .map_err(|e| e.to_string()),
                    );
                }
            }
        }
        Err(e) => service(Err(e.to_string())),
    }
    service(
        settings::storage(flags.state, None, flags.events, conf)
            .map(drop)
            .map_err(|e| e.to_string()),
    );
    let mut warnings: Vec<String> = catalog::unknown_keys(conf).iter().map(ToString::to_string).collect();
    warnings.extend(settings::unknown_standalone_keys(conf).into_iter().map(|key| {
        match catalog::closest_among(&key, settings::STANDALONE_KEYS.iter().copied()) {
            Some(closest) => format!("unknown key {key}, ignored (did you mean {closest}?)"),
            None => format!("unknown key {key}, ignored"),
        }
    }));
    ConfigReport { errors, warnings }
}

/// [`STARTUP_TIMEOUT_KEY`], [`DEFAULT_STARTUP_TIMEOUT`] when unset.
///
/// # Errors
/// When the value is not a duration.
pub fn startup_timeout(conf: &Configuration) -> Result<Duration, settings::SettingsError> {
    match conf.get(STARTUP_TIMEOUT_KEY) {
        None => Ok(DEFAULT_STARTUP_TIMEOUT),
        Some(value) => parse_duration(value).map_err(|reason| settings::SettingsError::Invalid {
            key: STARTUP_TIMEOUT_KEY.to_owned(),
            reason: format!("{value:?}: {reason}"),
        }),
    }
}

/// The replicated-operation settings: `None` when [`HA_ENABLED_KEY`] is `false`, else the
/// `autoscaler.service.ha.*` options, with `replica_id` (`--replica-id`) over the configured one.
/// Whether they apply at all depends on the store (a database store only).
///
/// # Errors
/// When a key does not parse or the options do not validate (see
/// [`autoscaler_core::HaOptions::validate`]).
pub fn ha_options(
    conf: &Configuration,
    replica_id: Option<&str>,
) -> Result<Option<autoscaler_core::HaOptions>, settings::SettingsError> {
    let invalid = |key: &str, reason: String| settings::SettingsError::Invalid {
        key: key.to_owned(),
        reason,
    };
    if let Some(value) = conf.get(HA_ENABLED_KEY) {
        let enabled = autoscaler_core::config::parse_bool(value)
            .map_err(|e| invalid(HA_ENABLED_KEY, format!("{value:?}: {e}")))?;
        if !enabled {
            return Ok(None);
        }
    }
    let mut options = autoscaler_core::HaOptions::from_configuration(conf).map_err(|e| match e {
        autoscaler_core::config::OptionsError::InvalidValue { key, value, reason } => {
            invalid(&key, format!("{value:?}: {reason}"))
        }
        other => invalid(autoscaler_core::HA_LEASE_DURATION_KEY, other.to_string()),
    })?;
    if let Some(id) = replica_id {
        options.replica_id = id.to_owned();
        options.validate().map_err(|e| invalid("--replica-id", e.to_string()))?;
    }
    Ok(Some(options))
}

/// `value` as `validate` may print it for `key` (see [`autoscaler_core::secret::redact_setting`]).
fn shown(key: &str, value: &str) -> String {
    autoscaler_core::secret::redact_setting(key, value)
}

/// The text `flink-autoscaler validate` prints: the effective configuration (every key set, with
/// where it came from, secrets redacted; then the defaults of the options left unset), then the
/// problems.
pub fn render_report(base: &BaseConfig, report: &ConfigReport) -> String {
    let mut out = String::new();
    match &base.file {
        Some(file) => out.push_str(&format!("# configuration file: {}\n", file.display())),
        None => out.push_str("# no configuration file (no --config, FLINK_CONF_DIR unset)\n"),
    }
    out.push_str("# effective configuration\n");
    for (key, value) in base.conf.iter() {
        let origin = base.origins.get(key).map_or("", String::as_str);
        out.push_str(&format!("{key}: {}  # {origin}\n", shown(key, value)));
    }
    out.push_str("# options left at their defaults\n");
    for spec in catalog::OPTIONS {
        if spec.keys().iter().all(|k| !base.conf.contains_key(k)) {
            out.push_str(&format!("{}: {}  # default\n", spec.key, spec.default));
        }
    }
    for warning in &report.warnings {
        out.push_str(&format!("warning: {warning}\n"));
    }
    for error in &report.errors {
        out.push_str(&format!("error: {error}\n"));
    }
    out.push_str(&match report.errors.len() {
        0 => "the configuration is valid\n".to_owned(),
        1 => "1 problem\n".to_owned(),
        n => format!("{n} problems\n"),
    });
    out
}

/// Arguments of `validate`.
#[derive(Debug, clap::Args)]
pub struct ValidateArgs {
    /// A Flink-style YAML file (default: `$FLINK_CONF_DIR/config.yaml`, then `flink-conf.yaml`).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Set a key over the file: `-Dkey=value` or `-D key=value` (repeatable); `--key value` works
    /// for keys under `autoscaler.`, `job.autoscaler.` and `kubernetes.operator.job.autoscaler.`.
    #[arg(short = 'D', value_name = "KEY=VALUE")]
    pub dynamic: Vec<String>,
}

/// `validate`: prints the effective configuration and its problems; exit 0 when valid, 1 when not.
pub fn run_validate(args: &ValidateArgs) -> std::process::ExitCode {
    let inputs = ConfigInputs {
        file: args.config.clone(),
        dynamic: args.dynamic.clone(),
        flags: Vec::new(),
    };
    let base = match inputs.load() {
        Ok(base) => base,
        Err(e) => {
            crate::io::report(&format!("error: {e:#}\n1 problem"));
            return std::process::ExitCode::from(1);
        }
    };
    let report = check(&base.conf, CheckFlags::default());
    print!("{}", render_report(&base, &report));
    if report.is_valid() {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::from(1)
    }
}

/// The base configuration every fetch lays the jobs' own configuration over, replaced on reload.
#[derive(Debug, Clone, Default)]
pub struct ReloadableBase(Arc<RwLock<Configuration>>);

impl ReloadableBase {
    /// Starts with `conf`.
    pub fn new(conf: Configuration) -> Self {
        Self(Arc::new(RwLock::new(conf)))
    }

    /// The current base.
    pub fn get(&self) -> Configuration {
        self.0
            .read()
            .map(|c| c.clone())
            .unwrap_or_else(|e| e.into_inner().clone())
    }

    /// Whether the current base sets `key`.
    pub fn contains_key(&self, key: &str) -> bool {
        match self.0.read() {
            Ok(current) => current.contains_key(key),
            Err(poisoned) => poisoned.into_inner().contains_key(key),
        }
    }

    /// Replaces the base.
    pub fn set(&self, conf: Configuration) {
        match self.0.write() {
            Ok(mut current) => *current = conf,
            Err(poisoned) => *poisoned.into_inner() = conf,
        }
    }
}

/// A fetcher that hands the current [`ReloadableBase`] to the fetcher it wraps, whatever base the
/// control loop holds.
pub struct ReloadingFetcher {
    inner: Arc<dyn JobListFetcher<String, SourceJobContext>>,
    base: ReloadableBase,
}

impl ReloadingFetcher {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn JobListFetcher<String, SourceJobContext>>, base: ReloadableBase) -> Self {
        Self { inner, base }
    }
}

#[async_trait]
impl JobListFetcher<String, SourceJobContext> for ReloadingFetcher {
    async fn fetch(&self, _base: &Configuration) -> Result<Vec<SourceJobContext>, FetchError> {
        self.inner.fetch(&self.base.get()).await
    }
}

/// The check every job's own configuration passes before it is scaled: the reference's
/// validation, widened to every value the options parser refuses ([`validate_all`]). An unknown
/// `job.autoscaler.*` key the job sets is a warning, once per job and key. A job that
/// fails it is not scaled; it shows in `/jobs` with outcome `misconfigured` and every problem as
/// the reason, counts a cycle and an error, and sets `flink_autoscaler_job_misconfigured` to 1
/// (back to 0 once it passes). The event is the reference's: an `AutoScaler Options Validation`
/// warning for a range check, an `AutoscalerError` for a value that cannot be read.
pub fn job_validator(
    board: Arc<DecisionBoard>,
    metrics: Arc<ServiceMetrics>,
    base: ReloadableBase,
) -> impl Fn(&SourceJobContext) -> Result<(), ValidationRejection> + Send + Sync + 'static {
    let warned = Mutex::new(HashSet::<(String, String)>::new());
    // Each job's last verdict, by a hash of the configuration it was reached on: a configuration
    // that did not change since the last cycle (the common case) costs one hash, not a parse.
    let verdicts = Mutex::new(HashMap::<String, JobVerdict>::new());
    move |ctx: &SourceJobContext| {
        let key = &ctx.labels.job_key;
        // The last verdict when the configuration is the one it was reached on: the same shared
        // entries (no hash needed), else an equal hash (kept shared for the next cycle); else the
        // hash of the new configuration.
        let known = {
            let mut verdicts = lock(&verdicts);
            match verdicts.get_mut(key) {
                Some(verdict) if verdict.checked.shares_entries_with(&ctx.configuration) => Ok(verdict.clone()),
                found => {
                    let fingerprint = fingerprint(&ctx.configuration);
                    match found.filter(|v| v.fingerprint == fingerprint) {
                        Some(verdict) => {
                            verdict.checked = ctx.configuration.clone();
                            Ok(verdict.clone())
                        }
                        None => Err(fingerprint),
                    }
                }
            }
        };
        let verdict = match known {
            Ok(verdict) => verdict,
            Err(fingerprint) => {
                warn_unknown_job_keys(ctx, &base, &warned);
                let verdict = JobVerdict::of(&ctx.configuration, fingerprint);
                let mut verdicts = lock(&verdicts);
                // Vanished jobs leave their entries behind: start over rather than grow without bound.
                if verdicts.len() > 100_000 {
                    verdicts.clear();
                }
                verdicts.insert(key.clone(), verdict.clone());
                verdict
            }
        };
        let series = metrics.job(&ctx.labels);
        series.set_misconfigured(verdict.rejection.is_some());
        let Some(rejection) = verdict.rejection else {
            return Ok(());
        };
        series.count_cycle();
        AutoscalerMetricsReporter::increment_counter(&*series, "errors");
        let defaults = AutoScalerOptions::default();
        board.publish(
            key,
            DecisionRecord::undecided(
                chrono::Utc::now(),
                Some(key),
                None,
                None,
                &defaults,
                defaults.restart_time,
                JobOutcome::Misconfigured,
                &verdict.reason,
            ),
        );
        Err(rejection)
    }
}

/// What the check of one job's configuration found.
#[derive(Debug, Clone)]
struct JobVerdict {
    /// The configuration checked (shared with the job's context, so an unchanged one is
    /// recognised without hashing it).
    checked: Configuration,
    /// [`fingerprint`] of the configuration checked.
    fingerprint: u64,
    /// Every problem, joined (empty when there is none).
    reason: String,
    /// The rejection the control loop reports, `None` when the options validate.
    rejection: Option<ValidationRejection>,
}

impl JobVerdict {
    fn of(conf: &Configuration, fingerprint: u64) -> Self {
        let problems = validate_all(conf);
        if problems.is_empty() {
            return Self {
                checked: conf.clone(),
                fingerprint,
                reason: String::new(),
                rejection: None,
            };
        }
        let reason = problems
            .iter()
            .map(|p| p.message.as_str())
            .collect::<Vec<_>>()
            .join("; ");
        let rejection = match validate(conf) {
            Err(error @ ValidationError::Unreadable(_)) => ValidationRejection::Unreadable(error.to_string()),
            Err(error) => ValidationRejection::Invalid(error.to_string()),
            // Only the options parser refuses a value: the reference fails the cycle with it.
            Ok(()) => ValidationRejection::Unreadable(reason.clone()),
        };
        Self {
            checked: conf.clone(),
            fingerprint,
            reason,
            rejection: Some(rejection),
        }
    }
}

/// A hash of every key and value of `conf`.
fn fingerprint(conf: &Configuration) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    conf.hash(&mut hasher);
    hasher.finish()
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Warns once per job and key about an unknown `job.autoscaler.*` key the job's own configuration
/// sets (the base's own are warned about at start and on reload).
fn warn_unknown_job_keys(ctx: &SourceJobContext, base: &ReloadableBase, warned: &Mutex<HashSet<(String, String)>>) {
    let unknown = catalog::unknown_keys(&ctx.configuration);
    if unknown.is_empty() {
        return;
    }
    let mut warned = lock(warned);
    // Vanished jobs leave their entries behind: start over rather than grow without bound.
    if warned.len() > 10_000 {
        warned.clear();
    }
    for key in unknown {
        if base.contains_key(&key.key) || !warned.insert((ctx.labels.job_key.clone(), key.key.clone())) {
            continue;
        }
        tracing::warn!(job = %ctx.labels.job_key, "the job's configuration: {key}");
    }
}

/// Whether a key shapes what the service builds at start (so a reload does not change it).
fn needs_restart(key: &str) -> bool {
    !catalog::is_autoscaler_key(key) && catalog::find(key).is_none() && key.starts_with("autoscaler.")
}

/// Counter of configuration reloads, by `outcome` (`applied`, `rejected`).
pub const CONFIG_RELOADS: &str = "flink_autoscaler_config_reloads_total";

/// Re-reads the configuration once (SIGHUP): applies it when it is valid, else logs every problem
/// and keeps the running one. Returns whether it was applied.
pub fn reload(inputs: &ConfigInputs, flags: CheckFlags<'_>, base: &ReloadableBase) -> bool {
    let loaded = match inputs.load() {
        Ok(loaded) => loaded,
        Err(error) => {
            tracing::error!(error = %format!("{error:#}"), "SIGHUP: cannot read the configuration, keeping the running one");
            ::metrics::counter!(CONFIG_RELOADS, "outcome" => "rejected").increment(1);
            return false;
        }
    };
    let report = check(&loaded.conf, flags);
    for warning in &report.warnings {
        tracing::warn!("{warning}");
    }
    if !report.is_valid() {
        tracing::error!(
            problems = report.errors.len(),
            "SIGHUP: the configuration is invalid, keeping the running one: {}",
            report.errors.join("; ")
        );
        ::metrics::counter!(CONFIG_RELOADS, "outcome" => "rejected").increment(1);
        return false;
    }
    let old = base.get();
    let changed: Vec<&str> = loaded
        .conf
        .iter()
        .filter(|(k, v)| old.get(k) != Some(*v))
        .map(|(k, _)| k)
        .chain(old.iter().map(|(k, _)| k).filter(|k| !loaded.conf.contains_key(k)))
        .collect();
    let restart: Vec<&str> = changed.iter().copied().filter(|k| needs_restart(k)).collect();
    if !restart.is_empty() {
        tracing::warn!(keys = ?restart, "SIGHUP: these keys only change on a restart");
    }
    tracing::info!(
        file = %loaded.file.as_deref().map(Path::display).map(|d| d.to_string()).unwrap_or_default(),
        changed = changed.len(),
        "SIGHUP: configuration reloaded, applied from the next cycle"
    );
    base.set(loaded.conf);
    ::metrics::counter!(CONFIG_RELOADS, "outcome" => "applied").increment(1);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        rewrite_key_value_args(args.iter().map(Into::into))
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn replication_settings_parse_with_the_flag_over_the_key_and_can_be_turned_off() {
        let conf = Configuration::from_iter([
            (autoscaler_core::HA_REPLICA_ID_KEY, "from-config"),
            (autoscaler_core::HA_LEASE_DURATION_KEY, "6 s"),
            (autoscaler_core::HA_RENEW_INTERVAL_KEY, "2 s"),
        ]);
        let options = ha_options(&conf, None).expect("valid").expect("enabled");
        assert_eq!(options.replica_id, "from-config");
        assert_eq!(options.lease_duration, Duration::from_secs(6));
        assert_eq!(options.renew_interval, Duration::from_secs(2));
        assert_eq!(
            ha_options(&conf, Some("flag"))
                .expect("valid")
                .expect("enabled")
                .replica_id,
            "flag"
        );
        // Defaults: on, 15 s / 5 s.
        let defaults = ha_options(&Configuration::new(), None)
            .expect("valid")
            .expect("enabled");
        assert_eq!(defaults.lease_duration, Duration::from_secs(15));
        let off = Configuration::from_iter([(HA_ENABLED_KEY, "false")]);
        assert_eq!(ha_options(&off, None).expect("valid"), None);
        // Every problem names its key or flag, and `check` reports it.
        for (conf, flag, named) in [
            (
                Configuration::from_iter([(HA_ENABLED_KEY, "maybe")]),
                None,
                HA_ENABLED_KEY,
            ),
            (
                Configuration::from_iter([(autoscaler_core::HA_RENEW_INTERVAL_KEY, "10 s")]),
                None,
                autoscaler_core::HA_RENEW_INTERVAL_KEY,
            ),
            (
                Configuration::from_iter([(autoscaler_core::HA_LEASE_DURATION_KEY, "soon")]),
                None,
                autoscaler_core::HA_LEASE_DURATION_KEY,
            ),
            (Configuration::new(), Some(" "), "--replica-id"),
        ] {
            let error = ha_options(&conf, flag).expect_err("invalid").to_string();
            assert!(error.contains(named), "{error}");
        }
        let bad = Configuration::from_iter([(autoscaler_core::HA_RENEW_INTERVAL_KEY, "10 s")]);
        let report = check(
            &bad,
            CheckFlags {
                flink_urls: &[],
                yarn_urls: &[],
                state: None,
                events: None,
            },
        );
        assert!(
            report
                .errors
                .iter()
                .any(|e| e.contains(autoscaler_core::HA_RENEW_INTERVAL_KEY)),
            "{:?}",
            report.errors
        );
        assert!(report.warnings.iter().all(|w| !w.contains("autoscaler.service.ha")));
    }

    #[test]
    fn key_value_pairs_become_dynamic_properties() {
        assert_eq!(
            strings(&[
                "fa",
                "run",
                "--autoscaler.standalone.control-loop.interval=5 s",
                "--dry-run"
            ]),
            [
                "fa",
                "run",
                "-D",
                "autoscaler.standalone.control-loop.interval=5 s",
                "--dry-run"
            ]
        );
        assert_eq!(
            strings(&["fa", "run", "--kubernetes.operator.job.autoscaler.enabled", "false"]),
            ["fa", "run", "-D", "kubernetes.operator.job.autoscaler.enabled=false"]
        );
        // Other flags and a trailing key without a value are left to the parser.
        assert_eq!(
            strings(&["fa", "run", "--interval", "5 s", "--job.autoscaler.enabled"]),
            ["fa", "run", "--interval", "5 s", "--job.autoscaler.enabled"]
        );
    }

    #[test]
    fn discovery_prefers_the_flag_then_config_yaml_then_flink_conf_yaml() {
        let dir = std::env::temp_dir().join(format!("fa-discover-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        assert!(discover(None, Some(&dir)).is_err_and(|e| e.to_string().contains("holds neither")));
        std::fs::write(dir.join("flink-conf.yaml"), "a: 1\n").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            discover(None, Some(&dir)).ok().flatten(),
            Some(dir.join("flink-conf.yaml"))
        );
        std::fs::write(dir.join("config.yaml"), "a: 1\n").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(discover(None, Some(&dir)).ok().flatten(), Some(dir.join("config.yaml")));
        let flag = Path::new("/x.yaml");
        assert_eq!(discover(Some(flag), Some(&dir)).ok().flatten(), Some(flag.to_owned()));
        assert_eq!(discover(None, None).ok().flatten(), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_check_lists_every_problem_with_its_key() {
        let conf = Configuration::from_iter([
            ("job.autoscaler.enabled", "true"),
            ("job.autoscaler.utilization.target", "2.5"),
            ("job.autoscaler.metrics.window", "forever"),
            ("autoscaler.standalone.control-loop.parallelism", "none"),
            (STARTUP_TIMEOUT_KEY, "soon"),
            ("job.autoscaler.utilisation.max", "0.9"),
            ("autoscaler.service.flink-clusters", "prod=http://jm:8081"),
            ("autoscaler.service.source.prod.auth.bearer-token", "literal"),
            ("autoscaler.standalone.control-loop.intervall", "5 s"),
        ]);
        let report = check(&conf, CheckFlags::default());
        let all = report.errors.join("\n");
        for key in [
            "job.autoscaler.utilization.target",
            "job.autoscaler.metrics.window",
            "autoscaler.standalone.control-loop.parallelism",
            STARTUP_TIMEOUT_KEY,
            "autoscaler.service.source.prod.auth.bearer-token",
        ] {
            assert!(all.contains(key), "{key} missing from\n{all}");
        }
        assert_eq!(report.errors.len(), 5, "{all}");
        assert!(!all.contains(": literal"), "{all}");
        assert_eq!(
            report.warnings,
            [
                "unknown key job.autoscaler.utilisation.max, ignored (did you mean job.autoscaler.utilization.max?)",
                "unknown key autoscaler.standalone.control-loop.intervall, ignored (did you mean \
                 autoscaler.standalone.control-loop.interval?)"
            ]
        );
        assert!(check(&Configuration::new(), CheckFlags::default()).is_valid());
    }

    #[test]
    fn restart_only_keys_are_the_services_own() {
        assert!(needs_restart("autoscaler.standalone.control-loop.interval"));
        assert!(needs_restart("autoscaler.service.flink-clusters"));
        assert!(!needs_restart("job.autoscaler.utilization.target"));
        assert!(!needs_restart("taskmanager.numberOfTaskSlots"));
    }
}
