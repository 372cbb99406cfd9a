//! Memory tuning through `JobAutoScalerImpl`: the recommendation is reported (event and gauges)
//! with every executed rescale; with `memory.tuning.enabled` its changes are stored with the
//! scaling and handed to `ScalingRealizer::realize_config_overrides` every cycle, without it they
//! are neither stored nor realized.

mod support;

use autoscaler_core::{AutoScalerStateStore, ConfigChanges};
use std::collections::BTreeMap;
use support::{Harness, Setup, harness_with, lock};

/// The scripted job with its memory metrics on a 2 gb TaskManager, tuning on or off.
fn harness(tuning_enabled: bool) -> Harness {
    harness_with(
        Setup {
            memory_metrics: true,
            ..Setup::default()
        }
        .set(
            "job.autoscaler.memory.tuning.enabled",
            if tuning_enabled { "true" } else { "false" },
        )
        .set("taskmanager.memory.process.size", "2 gb"),
    )
}

fn recommendations(h: &Harness) -> Vec<String> {
    h.events.messages("Configuration recommendation")
}

/// What tuning recommends for the scripted job on a 2 gb TaskManager (the same job and numbers as
/// the replay case `tests/scenarios/memory-tuning-metrics.json`): overhead 214748368, network
/// 20 segments x 32 kb = 640 kb, metaspace (long)(80 mb x 1.2) = 96 mb, heap (long)(500 mb x 1.2)
/// = 600 mb, no managed memory; total 134217728 + 214748368 + 655360 + 100663296 + 629145600 =
/// 1079430352 bytes.
fn expected_overrides() -> BTreeMap<String, String> {
    [
        ("taskmanager.memory.framework.heap.size", "0 bytes"),
        ("taskmanager.memory.jvm-metaspace.size", "96 mb"),
        ("taskmanager.memory.jvm-overhead.fraction", "0.199"),
        ("taskmanager.memory.managed.fraction", "0.0"),
        ("taskmanager.memory.network.max", "640 kb"),
        ("taskmanager.memory.network.min", "640 kb"),
        ("taskmanager.memory.process.size", "1079430352 bytes"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

#[tokio::test]
async fn enabled_tuning_is_stored_with_the_scaling_and_realized_every_cycle() {
    let h = harness(true);
    h.until_scaled().await;
    let recommendations = recommendations(&h);
    assert_eq!(recommendations.len(), 1);
    assert!(recommendations[0].contains("(automatic tuning is enabled)"));
    let stored = h.store.get_config_changes(&h.ctx).await.expect("config changes");
    assert_eq!(stored.overrides, expected_overrides());
    assert_eq!(stored.removals.len(), 4);
    // The realizer got nothing to do before the scaling (empty stored changes), then the tuned
    // configuration in the scaling cycle and in every cycle after it.
    for _ in 0..3 {
        h.cycle().await;
    }
    let calls = lock(&h.realizer.config_calls).clone();
    assert_eq!(calls.len(), 8);
    assert!(calls[..4].iter().all(ConfigChanges::is_empty));
    assert!(calls[4..].iter().all(|c| *c == stored));
    // One gauge per recommended size.
    let gauges = lock(&h.ctx.gauges.0).clone();
    assert_eq!(
        gauges.get("MemoryTuning.taskmanager.memory.process.size"),
        Some(&1_079_430_352.0)
    );
    assert_eq!(
        gauges.get("MemoryTuning.taskmanager.memory.jvm-metaspace.size"),
        Some(&100_663_296.0)
    );
}

#[tokio::test]
async fn disabled_tuning_reports_but_neither_stores_nor_realizes() {
    let h = harness(false);
    h.until_scaled().await;
    let recommendations = recommendations(&h);
    assert_eq!(recommendations.len(), 1);
    assert!(recommendations[0].contains("(automatic tuning is disabled)"));
    assert!(recommendations[0].contains("taskmanager.memory.process.size: 1079430352 bytes\n"));
    assert!(
        h.store
            .get_config_changes(&h.ctx)
            .await
            .expect("config changes")
            .is_empty()
    );
    h.cycle().await;
    assert!(lock(&h.realizer.config_calls).is_empty());
}
