//! The entry points of the fuzz targets in `fuzz/` (one function per target). Each takes arbitrary
//! bytes and must return for every input without panicking, overflowing or allocating without
//! bound; `tests/fuzz_regressions.rs` replays the inputs the fuzzers found (`fuzz/regressions/`)
//! through the same functions in a normal `cargo test`.

use autoscaler_core::config::Configuration;
use chrono::{DateTime, Utc};

/// The bytes as UTF-8 text, lossily (every target takes text).
fn text(data: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(data)
}

/// Target `replay_parse`: the scenario parser alone.
pub fn replay_parse(data: &[u8]) {
    let _ = crate::parse_scenario(&text(data));
}

/// Target `replay_whole`: parse, window, evaluate and decide, as `flink-autoscaler replay` does.
/// An error must be one line.
pub fn replay_whole(data: &[u8]) {
    if let Err(e) = crate::replay_str(&text(data)) {
        let message = e.to_string();
        assert!(
            !message.contains('\n') && !message.contains('\r'),
            "multi-line error: {message:?}"
        );
    }
}

/// Target `flink_rest_models`: every Flink REST body model, and the values derived from it.
pub fn flink_rest_models(data: &[u8]) {
    use autoscaler_realizer::rest::{
        AggregatedMetricValue, ConfigEntry, JobConfig, JobDetails, JobPlanResponse, JobResourceRequirements,
        JobStatusInfo, JobsOverview, MetricName, MetricValue,
    };
    if let Ok(overview) = serde_json::from_slice::<JobsOverview>(data) {
        for job in &overview.jobs {
            let _ = job.effective_status();
        }
    }
    if let Ok(details) = serde_json::from_slice::<JobDetails>(data) {
        let _ = (details.status(), details.running_since());
        for vertex in &details.vertices {
            let _ = (vertex.is_finished(), details.vertex(&vertex.id));
        }
    }
    if let Ok(status) = serde_json::from_slice::<JobStatusInfo>(data) {
        let _ = status.job_status();
    }
    let _ = serde_json::from_slice::<JobPlanResponse>(data);
    let _ = serde_json::from_slice::<JobConfig>(data);
    let _ = serde_json::from_slice::<Vec<ConfigEntry>>(data);
    let _ = serde_json::from_slice::<Vec<MetricName>>(data);
    if let Ok(values) = serde_json::from_slice::<Vec<AggregatedMetricValue>>(data) {
        for value in &values {
            let _ = value.aggregates();
        }
    }
    if let Ok(values) = serde_json::from_slice::<Vec<MetricValue>>(data) {
        for value in &values {
            let _ = value.as_f64();
        }
    }
    if let Ok(requirements) = serde_json::from_slice::<JobResourceRequirements>(data) {
        let _ = serde_json::to_vec(&requirements);
    }
}

/// Target `config_values`: the Flink value parsers (durations, memory sizes, numbers, lists) on
/// the first line, then `key=value` lines as a configuration read into the autoscaler options and
/// validated.
pub fn config_values(data: &[u8]) {
    use autoscaler_core::config::{parse_bool, parse_double, parse_int, parse_list, parse_memory_size};
    let text = text(data);
    let first = text.lines().next().unwrap_or("");
    let _ = autoscaler_core::config::parse_duration(first);
    let _ = parse_memory_size(first);
    let _ = parse_double(first);
    let _ = parse_int(first);
    let _ = parse_bool(first);
    let _ = parse_list(first);
    let conf: Configuration = text
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let _ = autoscaler_core::config::validate(&conf);
    let _ = autoscaler_core::ControlLoopOptions::from_configuration(&conf);
    let _ = autoscaler_realizer::CooldownConfig::from_configuration(&conf);
    if let Ok(options) = autoscaler_core::config::AutoScalerOptions::from_configuration(&conf) {
        let _ = options.is_excluded_period(DateTime::<Utc>::UNIX_EPOCH);
        let _ = options.is_excluded_period(DateTime::<Utc>::MAX_UTC);
    }
}

/// Target `excluded_periods`: the Quartz cron and time-range parser, then the matcher at a few
/// instants (the first 8 bytes pick one).
pub fn excluded_periods(data: &[u8]) {
    use autoscaler_core::config::ExcludedPeriod;
    let (seed, rest) = data.split_at(data.len().min(8));
    let mut millis = [0u8; 8];
    millis[..seed.len()].copy_from_slice(seed);
    let millis = i64::from_le_bytes(millis);
    let Ok(period) = ExcludedPeriod::parse(&text(rest)) else {
        return;
    };
    let instants = [
        DateTime::from_timestamp_millis(millis),
        Some(DateTime::<Utc>::UNIX_EPOCH),
        Some(DateTime::<Utc>::MIN_UTC),
        Some(DateTime::<Utc>::MAX_UTC),
    ];
    for at in instants.into_iter().flatten() {
        let _ = period.contains(at);
    }
}

/// Target `state_codec`: a stored `state_value` read back as each state type and as a window row
/// (packed or JSON).
pub fn state_codec(data: &[u8]) {
    let text = text(data);
    for state_type in autoscaler_state::StateType::ALL {
        let _ = autoscaler_state::decode_state_value(state_type, &text);
    }
    let _ = autoscaler_state::decode_window_row(&text);
}

/// Target `yarn_responses`: a YARN ResourceManager's `GET /ws/v1/cluster/apps` body, read as the
/// YARN source reads it, then each kept application's JobManager address under every access mode.
pub fn yarn_responses(data: &[u8]) {
    use autoscaler_realizer::yarn::{JobManagerAccess, running_flink_applications_in};
    let Ok(apps) = running_flink_applications_in(data) else {
        return;
    };
    for app in &apps {
        for access in [
            JobManagerAccess::Direct,
            JobManagerAccess::DirectHttps,
            JobManagerAccess::Proxy,
        ] {
            if let Ok(url) = app.jobmanager_url(access) {
                assert!(!url.contains('\n'), "multi-line JobManager URL {url:?}");
            }
        }
    }
}
