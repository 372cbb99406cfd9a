//! Properties of the cooldown governor over random request sequences: it only ever forwards the
//! newest request, never forwards two changes closer than `min` (or `max` when that is smaller and
//! forces a held request), and always delivers the last request once the requests stop.

use async_trait::async_trait;
use autoscaler_core::{
    BasicJobContext, Clock, ManualClock, ParallelismOverrides, RealizeError, ScalingRealizer, config::Configuration,
};
use autoscaler_metrics::VertexId;
use autoscaler_realizer::{CooldownConfig, CooldownRealizer};
use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use proptest::prelude::*;
use std::sync::{Arc, Mutex};
use std::time::Duration;

type Ctx = BasicJobContext<String, ()>;

#[derive(Default)]
struct Recorder {
    calls: Mutex<Vec<(DateTime<Utc>, u32)>>,
}

struct Forward {
    recorder: Arc<Recorder>,
    clock: Arc<ManualClock>,
}

#[async_trait]
impl ScalingRealizer<String, Ctx> for Forward {
    async fn realize_parallelism_overrides(
        &self,
        _ctx: &Ctx,
        overrides: &ParallelismOverrides,
    ) -> Result<(), RealizeError> {
        let value = overrides.values().next().copied().unwrap_or(0);
        if let Ok(mut calls) = self.recorder.calls.lock() {
            calls.push((self.clock.now(), value));
        }
        Ok(())
    }
}

fn request(value: u32) -> ParallelismOverrides {
    [(VertexId::new("v"), value)].into_iter().collect()
}

/// Runs `steps` (seconds to wait, requested parallelism) and returns the forwarded calls and the
/// time of the last step.
fn run(min: u64, max: Option<u64>, steps: &[(u64, u32)], settle: bool) -> (Vec<(DateTime<Utc>, u32)>, Vec<bool>) {
    let start = Utc.timestamp_opt(1_700_000_000, 0).single().expect("valid start");
    let clock = Arc::new(ManualClock::new(start));
    let recorder = Arc::new(Recorder::default());
    let realizer: CooldownRealizer<Forward, String> = CooldownRealizer::with_clock(
        Forward {
            recorder: Arc::clone(&recorder),
            clock: Arc::clone(&clock),
        },
        CooldownConfig {
            min_interval: Duration::from_secs(min),
            max_interval: max.map(Duration::from_secs),
            ..CooldownConfig::default()
        },
        clock.clone(),
    );
    let ctx: Ctx = BasicJobContext::new("job".to_owned(), Configuration::new(), ());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a current-thread runtime");
    // Whether each step's call forwarded exactly the value it requested (or nothing).
    let mut forwarded_newest = Vec::new();
    runtime.block_on(async {
        let mut last = 0;
        for (wait, value) in steps {
            clock.advance(Duration::from_secs(*wait));
            let before = recorder.calls.lock().map(|c| c.len()).unwrap_or(0);
            let result = realizer.realize_parallelism_overrides(&ctx, &request(*value)).await;
            let calls = recorder.calls.lock().map(|c| c.clone()).unwrap_or_default();
            forwarded_newest
                .push(result.is_ok() && (calls.len() == before || calls.last().map(|c| c.1) == Some(*value)));
            last = *value;
        }
        if settle {
            clock.advance(Duration::from_secs(min + max.unwrap_or(0) + 1));
            let _ = realizer.realize_parallelism_overrides(&ctx, &request(last)).await;
        }
    });
    let calls = recorder.calls.lock().map(|c| c.clone()).unwrap_or_default();
    (calls, forwarded_newest)
}

fn steps() -> impl Strategy<Value = Vec<(u64, u32)>> {
    prop::collection::vec((0u64..40, 1u32..5), 1..60)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn only_the_newest_request_is_ever_forwarded(min in 1u64..60, max in prop::option::of(1u64..200), steps in steps()) {
        let (_, newest) = run(min, max, &steps, false);
        prop_assert!(newest.iter().all(|ok| *ok));
    }

    #[test]
    fn changes_are_spaced_by_the_cooldown(min in 1u64..60, max in prop::option::of(1u64..200), steps in steps()) {
        let (calls, _) = run(min, max, &steps, false);
        let spacing = TimeDelta::seconds(min.min(max.unwrap_or(min)) as i64);
        let mut last_change: Option<(DateTime<Utc>, u32)> = None;
        for (at, value) in calls {
            match last_change {
                Some((_, previous)) if previous == value => {}
                Some((changed_at, _)) => {
                    prop_assert!(at - changed_at >= spacing, "changes at {changed_at} and {at}, spacing {spacing}");
                    last_change = Some((at, value));
                }
                None => last_change = Some((at, value)),
            }
        }
    }

    #[test]
    fn the_last_request_is_delivered_once_requests_stop(min in 1u64..60, max in prop::option::of(1u64..200), steps in steps()) {
        let (calls, _) = run(min, max, &steps, true);
        let wanted = steps.last().map(|s| s.1);
        prop_assert_eq!(calls.last().map(|c| c.1), wanted);
    }
}

/// `scaling-interval.min` and `.max` of `9223372036854775807 s` (i64::MAX, the longest Java
/// Duration): `last + min` and `held_since + max` are past chrono's range, which panicked.
#[tokio::test]
async fn intervals_of_i64_max_seconds_hold_forever_without_overflow() {
    let conf = Configuration::from_iter([
        (
            "jobmanager.adaptive-scheduler.scaling-interval.min",
            "9223372036854775807 s",
        ),
        (
            "jobmanager.adaptive-scheduler.scaling-interval.max",
            "9223372036854775807 s",
        ),
    ]);
    let config = CooldownConfig::from_configuration(&conf).expect("a valid Java Duration");
    let start = Utc.timestamp_opt(1_700_000_000, 0).single().expect("valid start");
    let clock = Arc::new(ManualClock::new(start));
    let recorder = Arc::new(Recorder::default());
    let realizer: CooldownRealizer<Forward, String> = CooldownRealizer::with_clock(
        Forward {
            recorder: Arc::clone(&recorder),
            clock: Arc::clone(&clock),
        },
        config,
        clock.clone(),
    );
    let ctx = Ctx::new("job".to_owned(), Configuration::new(), ());
    assert!(realizer.realize_parallelism_overrides(&ctx, &request(2)).await.is_ok());
    clock.advance(Duration::from_secs(3600));
    assert!(realizer.realize_parallelism_overrides(&ctx, &request(3)).await.is_ok());
    // The first change is forwarded, the second is held until the end of time.
    assert_eq!(recorder.calls.lock().map(|c| c.len()).unwrap_or(0), 1);
    assert_eq!(realizer.held_until(&"job".to_owned()), Some(DateTime::<Utc>::MAX_UTC));
    clock.advance(Duration::from_secs(u64::MAX));
    assert!(realizer.realize_parallelism_overrides(&ctx, &request(3)).await.is_ok());
}
