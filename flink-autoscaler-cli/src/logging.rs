//! The logs of `flink-autoscaler run`: stderr, filtered by `RUST_LOG` (default `info`), as text
//! lines or one JSON object per line, with two rules for a fleet:
//!
//! - **The job on every line about it.** The control loop runs each job's scale in a span with
//!   the fields `job` (its key) and `source`; [`JobFields`] keeps them, and every line inside the
//!   span carries them, with `vertex` when the line is about one vertex. In JSON they are plain
//!   top-level string fields (`{"level":"WARN","job":"prod/69d8…","source":"prod",…}`), beside
//!   `timestamp`, `level`, `target`, `message` and the event's own fields. The span is at ERROR
//!   level, so it is kept at `RUST_LOG=warn` too.
//! - **A repeated warning once per interval.** A WARN or ERROR line about a job is keyed by the
//!   job, the line's call site and its vertex; once logged, the same key is not logged again for
//!   `job.autoscaler.scaling.event.interval` (as events are deduplicated), and the next line
//!   after that carries `suppressed`: how many were left out meanwhile. The failures stay counted
//!   in `/metrics` (`flink_autoscaler_errors_total`) whatever the logs say.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber, span};
use tracing_subscriber::fmt::format::{Format, Full, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// The span fields copied onto every line inside the span.
const CONTEXT_FIELDS: [&str; 4] = ["job", "source", "vertex", "vertex_name"];

/// Default of the repeat interval until the configuration is read (the reference's default
/// `scaling.event.interval`, 30 min).
const DEFAULT_REPEAT_INTERVAL_MS: u64 = 30 * 60 * 1000;

static REPEAT_INTERVAL_MS: AtomicU64 = AtomicU64::new(DEFAULT_REPEAT_INTERVAL_MS);

/// Sets how long a repeated warning about the same job and cause stays quiet
/// (`job.autoscaler.scaling.event.interval` of the base configuration).
pub fn set_repeat_interval(interval: Duration) {
    let ms = u64::try_from(interval.as_millis()).unwrap_or(u64::MAX);
    REPEAT_INTERVAL_MS.store(ms, Ordering::Relaxed);
}

/// Installs the global subscriber: `RUST_LOG` (default `info`), text or JSON lines on stderr.
pub fn init(json: bool) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let ansi = !json && std::io::IsTerminal::is_terminal(&std::io::stderr());
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(JobFields::layer())
        .with(lines_layer(json, ansi, std::io::stderr))
        .try_init();
}

/// The layer writing the lines (text or JSON) to `writer`.
fn lines_layer<S, W>(json: bool, ansi: bool, writer: W) -> impl Layer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    let format = if json {
        LineFormat::Json
    } else {
        LineFormat::Text(Format::default().with_ansi(ansi))
    };
    tracing_subscriber::fmt::layer()
        .with_ansi(ansi)
        .with_writer(writer)
        .event_format(Lines {
            format,
            repeats: Repeats::default(),
        })
}

/// The context fields (`job`, `source`, `vertex`) of a span, kept in its extensions.
#[derive(Debug, Default, Clone)]
pub struct JobFields {
    fields: Vec<(&'static str, String)>,
}

impl JobFields {
    /// The layer that records them on every new span.
    pub fn layer() -> JobFieldsLayer {
        JobFieldsLayer
    }

    fn set(&mut self, name: &'static str, value: String) {
        match self.fields.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => self.fields.push((name, value)),
        }
    }
}

impl Visit for JobFields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if let Some(name) = CONTEXT_FIELDS.iter().find(|n| **n == field.name()) {
            self.set(name, value.to_owned());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if let Some(name) = CONTEXT_FIELDS.iter().find(|n| **n == field.name()) {
            self.set(name, format!("{value:?}"));
        }
    }
}

/// Records [`JobFields`] in the extensions of each span that has any.
#[derive(Debug, Clone, Copy)]
pub struct JobFieldsLayer;

impl<S> Layer<S> for JobFieldsLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &span::Attributes<'_>, id: &span::Id, ctx: Context<'_, S>) {
        let mut fields = JobFields::default();
        attrs.record(&mut fields);
        if !fields.fields.is_empty()
            && let Some(span) = ctx.span(id)
        {
            span.extensions_mut().insert(fields);
        }
    }

    fn on_record(&self, id: &span::Id, values: &span::Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            let mut extensions = span.extensions_mut();
            match extensions.get_mut::<JobFields>() {
                Some(fields) => values.record(fields),
                None => {
                    let mut fields = JobFields::default();
                    values.record(&mut fields);
                    if !fields.fields.is_empty() {
                        extensions.insert(fields);
                    }
                }
            }
        }
    }
}

/// An event's fields as JSON values, in their order.
#[derive(Default)]
struct EventFields {
    message: Option<String>,
    fields: Vec<(&'static str, serde_json::Value)>,
}

impl EventFields {
    fn get(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| *n == name)
            .and_then(|(_, v)| v.as_str())
    }

    fn push(&mut self, field: &Field, value: serde_json::Value) {
        if field.name() == "message" {
            self.message = value.as_str().map(str::to_owned);
        } else {
            self.fields.push((field.name(), value));
        }
    }
}

impl Visit for EventFields {
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.push(field, serde_json::json!(value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.push(field, value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.push(field, value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.push(field, value.into());
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.push(field, value.into());
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.push(field, value.to_string().into());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.push(field, format!("{value:?}").into());
    }
}

/// The key of a repeated line: job, call site, vertex.
type RepeatKey = (String, tracing::callsite::Identifier, Option<String>);

/// When each (job, call site, vertex) was last logged, and how many were left out since.
#[derive(Default)]
struct Repeats {
    seen: Mutex<HashMap<RepeatKey, (Instant, u64)>>,
}

/// Entries beyond which the expired ones are dropped.
const REPEATS_PRUNE_AT: usize = 4096;

impl Repeats {
    /// `None`: leave this line out; `Some(n)`: log it, `n` lines having been left out before.
    fn admit(&self, key: RepeatKey, now: Instant, interval: Duration) -> Option<u64> {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((logged, suppressed)) = seen.get_mut(&key) {
            if now.duration_since(*logged) < interval {
                *suppressed += 1;
                return None;
            }
            let left_out = *suppressed;
            *logged = now;
            *suppressed = 0;
            return Some(left_out);
        }
        if seen.len() >= REPEATS_PRUNE_AT {
            seen.retain(|_, (logged, suppressed)| now.duration_since(*logged) < interval || *suppressed > 0);
        }
        seen.insert(key, (now, 0));
        Some(0)
    }
}

enum LineFormat {
    Json,
    Text(Format<Full>),
}

/// The event formatter of [`init`]: adds the span's job fields, leaves repeats out.
struct Lines {
    format: LineFormat,
    repeats: Repeats,
}

impl<S, N> FormatEvent<S, N> for Lines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(&self, ctx: &FmtContext<'_, S, N>, mut writer: Writer<'_>, event: &Event<'_>) -> fmt::Result {
        let mut context = JobFields::default();
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                if let Some(fields) = span.extensions().get::<JobFields>() {
                    for (name, value) in &fields.fields {
                        context.set(name, value.clone());
                    }
                }
            }
        }
        let mut fields = EventFields::default();
        event.record(&mut fields);
        // The event's own fields win over the span's.
        let job = fields
            .get("job")
            .map(str::to_owned)
            .or_else(|| context.fields.iter().find(|(n, _)| *n == "job").map(|(_, v)| v.clone()));
        let level = *event.metadata().level();
        let mut suppressed = 0;
        if level <= Level::WARN
            && let Some(job) = job
        {
            let vertex = fields.get("vertex").map(str::to_owned).or_else(|| {
                context
                    .fields
                    .iter()
                    .find(|(n, _)| *n == "vertex")
                    .map(|(_, v)| v.clone())
            });
            let key = (job, event.metadata().callsite(), vertex);
            let interval = Duration::from_millis(REPEAT_INTERVAL_MS.load(Ordering::Relaxed));
            match self.repeats.admit(key, Instant::now(), interval) {
                None => return Ok(()),
                Some(n) => suppressed = n,
            }
        }
        match &self.format {
            LineFormat::Json => {
                let mut line = serde_json::Map::new();
                line.insert(
                    "timestamp".into(),
                    chrono::Utc::now()
                        .to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
                        .into(),
                );
                line.insert("level".into(), level.as_str().into());
                line.insert("target".into(), event.metadata().target().into());
                line.insert("message".into(), fields.message.take().unwrap_or_default().into());
                for (name, value) in fields.fields {
                    line.insert(name.to_owned(), value);
                }
                for (name, value) in context.fields {
                    line.entry(name).or_insert(value.into());
                }
                if suppressed > 0 {
                    line.insert("suppressed".into(), suppressed.into());
                }
                writeln!(writer, "{}", serde_json::Value::Object(line))
            }
            LineFormat::Text(format) => {
                // The span's fields show in its prefix (`job{job=prod/.. source=prod}:`).
                if suppressed == 0 {
                    return format.format_event(ctx, writer, event);
                }
                let mut text = String::new();
                format.format_event(ctx, Writer::new(&mut text), event)?;
                let text = text.trim_end_matches('\n');
                writeln!(writer, "{text} suppressed={suppressed}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoscaler_sim::logs::LogBuffer;

    /// Logs what the control loop logs about a job, at `RUST_LOG=warn`, in `json` or text.
    fn log_at_warn(json: bool) -> String {
        let buffer = LogBuffer::default();
        let subscriber = tracing_subscriber::registry()
            .with(tracing_subscriber::filter::LevelFilter::WARN)
            .with(JobFields::layer())
            .with(lines_layer(json, false, buffer.clone()));
        tracing::subscriber::with_default(subscriber, || {
            let key = String::from("prod/69d8");
            let span = tracing::error_span!("job", job = %key, source = Some("prod"));
            let _entered = span.enter();
            tracing::info!("left out by the filter");
            for _ in 0..3 {
                tracing::warn!(vertex = %"v1", "pendingRecords metric could not be found");
            }
            tracing::warn!(vertex = %"v2", "pendingRecords metric could not be found");
            tracing::error!(job = %"prod/other", "about another job");
        });
        buffer.text()
    }

    #[test]
    fn json_lines_carry_the_span_fields_as_plain_strings_and_leave_repeats_out() {
        let text = log_at_warn(true);
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert_eq!(lines[0]["job"], "prod/69d8", "{text}");
        assert_eq!(lines[0]["source"], "prod", "{text}");
        assert_eq!(lines[0]["vertex"], "v1", "{text}");
        assert_eq!(lines[0]["level"], "WARN", "{text}");
        assert_eq!(lines[0]["message"], "pendingRecords metric could not be found");
        assert_eq!(lines[1]["vertex"], "v2", "another vertex, another cause: {text}");
        // The event's own job wins over the span's.
        assert_eq!(lines[2]["job"], "prod/other", "{text}");
        assert!(!text.contains("\\\""), "no double encoding: {text}");
    }

    #[test]
    fn text_lines_name_the_job_in_the_span_prefix() {
        let text = log_at_warn(false);
        assert_eq!(text.lines().count(), 3, "{text}");
        assert!(text.contains("job{job=prod/69d8 source=\"prod\"}"), "{text}");
    }

    #[test]
    fn a_repeat_is_left_out_for_the_interval_then_logged_with_the_count() {
        struct Site;
        static SITE: Site = Site;
        impl tracing::callsite::Callsite for Site {
            fn set_interest(&self, _: tracing::subscriber::Interest) {}
            fn metadata(&self) -> &tracing::Metadata<'_> {
                unreachable!()
            }
        }
        let repeats = Repeats::default();
        let t0 = Instant::now();
        let key = |vertex: Option<&str>| {
            (
                "prod/a".to_owned(),
                tracing::callsite::Identifier(&SITE),
                vertex.map(str::to_owned),
            )
        };
        let interval = Duration::from_secs(10);
        assert_eq!(repeats.admit(key(Some("v1")), t0, interval), Some(0));
        assert_eq!(
            repeats.admit(key(Some("v1")), t0 + Duration::from_secs(3), interval),
            None
        );
        assert_eq!(
            repeats.admit(key(Some("v1")), t0 + Duration::from_secs(6), interval),
            None
        );
        // Another vertex is another cause.
        assert_eq!(
            repeats.admit(key(Some("v2")), t0 + Duration::from_secs(6), interval),
            Some(0)
        );
        assert_eq!(
            repeats.admit(key(Some("v1")), t0 + Duration::from_secs(11), interval),
            Some(2)
        );
        assert_eq!(
            repeats.admit(key(Some("v1")), t0 + Duration::from_secs(12), interval),
            None
        );
    }
}
