//! Drives `JobAutoScalerImpl` through several cycles with a scripted metrics collector, a recording
//! realizer and a recording event handler: the autoscaler waits for a full window, scales the
//! bottleneck once, re-applies its overrides every cycle, and reports failures as events without
//! losing state.

mod support;

use autoscaler_core::{
    AutoScalerStateStore, CycleOutcome, EventType, JobAutoScalerContext, JobAutoScalerImpl, JobStatus,
    scaling::{BlockReason, DecisionOutcome},
};
use std::sync::Arc;
use std::time::Duration;
use support::{harness, lock};

#[tokio::test]
async fn scales_the_bottleneck_once_after_a_full_window_and_reapplies_overrides() {
    let h = harness();
    assert_eq!(h.cycle().await, CycleOutcome::InsufficientSamples);
    // 10:00:30 .. 10:01:30: evaluated for reporting only while the 2 min window fills.
    for _ in 0..3 {
        assert!(matches!(
            h.cycle().await,
            CycleOutcome::WindowNotFull { stabilizing: false }
        ));
    }
    // 10:02:00: the window (from the first stable sample at 10:00) is full and the sink (TPR 1052.6/s < scale-up threshold 1111/s) scales 1 -> 2.
    assert_eq!(h.cycle().await.decision_outcome(), Some(DecisionOutcome::Scale));
    assert_eq!(h.parallelism(), (2, 2));
    let calls = lock(&h.realizer.calls).clone();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].get("sink"), Some(&2));
    assert_eq!(calls[0].get("src"), Some(&2));
    {
        let events = lock(&h.events.0);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].1, "ScalingReport");
        assert!(
            events[0].2.contains("{ Vertex ID sink | Parallelism 1 -> 2 |"),
            "{}",
            events[0].2
        );
    }
    // The job restarted: its history was dropped, and it waits for a new full window. The stored
    // overrides are re-applied every cycle (the reference's self-healing), without a new rescale.
    assert_eq!(h.cycle().await, CycleOutcome::InsufficientSamples);
    for _ in 0..8 {
        let outcome = h.cycle().await;
        assert!(
            outcome.decision_outcome() != Some(DecisionOutcome::Scale),
            "{outcome:?}"
        );
    }
    assert_eq!(h.parallelism(), (2, 2));
    assert_eq!(lock(&h.realizer.calls).len(), 10);
    let history = h.store.get_scaling_history(&h.ctx).await.expect("history");
    assert_eq!(history.get("sink").map(|s| s.len()), Some(1));
}

#[tokio::test]
async fn a_failing_collection_is_an_event_not_a_lost_state() {
    let h = harness();
    for _ in 0..3 {
        h.cycle().await;
    }
    let before = h.store.get_collected_metrics(&h.ctx).await.expect("history").len();
    *lock(&h.job.fail_next) = true;
    let err = h.autoscaler.run_cycle(&h.ctx).await.expect_err("collection fails");
    assert!(err.to_string().contains("answered 500"), "{err}");
    let events = lock(&h.events.0).clone();
    assert_eq!(
        events.last().map(|e| (e.0, e.1.as_str())),
        Some((EventType::Warning, "AutoscalerError"))
    );
    assert_eq!(
        h.store.get_collected_metrics(&h.ctx).await.expect("history").len(),
        before
    );
}

#[tokio::test]
async fn recommend_only_mode_reports_but_never_realizes() {
    let mut h = harness();
    h.ctx.conf.set("job.autoscaler.scaling.enabled", "false");
    for _ in 0..4 {
        h.cycle().await;
    }
    assert_eq!(
        h.cycle().await.decision_outcome(),
        Some(DecisionOutcome::Blocked(BlockReason::ScalingDisabled))
    );
    assert!(lock(&h.realizer.calls).is_empty());
    let events = lock(&h.events.0).clone();
    assert!(events.iter().any(|e| {
        e.2.starts_with("Scaling execution disabled by config job.autoscaler.scaling.enabled:false")
    }));
}

#[tokio::test]
async fn a_job_that_is_not_running_only_gets_its_overrides_reapplied() {
    let mut h = harness();
    for _ in 0..5 {
        h.cycle().await;
    }
    assert_eq!(lock(&h.realizer.calls).len(), 1);
    h.ctx.status = Some(JobStatus::Restarting);
    assert_eq!(h.cycle().await, CycleOutcome::JobNotRunning);
    assert_eq!(lock(&h.realizer.calls).len(), 2);
    assert_eq!(h.ctx.job_status(), Some(JobStatus::Restarting));
}

#[tokio::test]
async fn disabling_the_autoscaler_clears_its_state() {
    let mut h = harness();
    for _ in 0..6 {
        h.cycle().await;
    }
    assert!(!h.store.get_scaling_history(&h.ctx).await.expect("history").is_empty());
    h.ctx.conf.set("job.autoscaler.enabled", "false");
    assert_eq!(h.cycle().await, CycleOutcome::Disabled);
    assert!(h.store.get_scaling_history(&h.ctx).await.expect("history").is_empty());
    assert!(h.store.get_collected_metrics(&h.ctx).await.expect("metrics").is_empty());
    assert!(
        h.store
            .get_parallelism_overrides(&h.ctx)
            .await
            .expect("overrides")
            .is_empty()
    );
}

#[tokio::test]
async fn cleanup_forgets_the_job_completely_even_in_a_durable_store() {
    use autoscaler_core::JobAutoScaler;
    let dir = std::env::temp_dir().join(format!("fa-cleanup-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let url = format!("sqlite:{}", dir.join("state.db").display());
    let h = harness();
    let store = Arc::new(autoscaler_state::open_state_store(&url).await.expect("sqlite store"));
    let autoscaler = JobAutoScalerImpl::new(h.job.clone(), store.clone(), h.realizer.clone(), h.events.clone())
        .with_clock(h.clock.clone());
    for _ in 0..5 {
        autoscaler.run_cycle(&h.ctx).await.expect("cycle");
        h.clock.advance(Duration::from_secs(30));
    }
    assert!(!store.get_scaling_history(&h.ctx).await.expect("history").is_empty());
    autoscaler.cleanup(&"job-1".to_owned()).await;
    // A fresh store on the same file sees nothing of the job.
    let reopened = autoscaler_state::open_state_store(&url).await.expect("reopen");
    assert!(reopened.get_scaling_history(&h.ctx).await.expect("history").is_empty());
    assert!(
        reopened
            .get_collected_metrics(&h.ctx)
            .await
            .expect("metrics")
            .is_empty()
    );
    assert!(
        reopened
            .get_parallelism_overrides(&h.ctx)
            .await
            .expect("overrides")
            .is_empty()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
