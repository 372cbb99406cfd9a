//! The stores' flush series (`flink_autoscaler_state_flush_*`), recorded through the `metrics`
//! facade into a local Prometheus recorder: one sample per flush that writes, one failure per
//! flush that fails, labelled by the backend.

#![allow(missing_docs, clippy::unwrap_used)]

mod common;

use autoscaler_core::AutoScalerStateStore;
use autoscaler_state::{STATE_FLUSH_DURATION, STATE_FLUSH_ERRORS, STATE_FLUSH_GROUP_JOBS, open_state_store};
use common::{ctx, sample};
use std::time::Duration;

#[test]
fn database_flushes_are_timed_and_failures_counted() {
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("flush.db").display());
    metrics::with_local_recorder(&recorder, || {
        rt.block_on(async {
            let run = async {
                let store = open_state_store(&url).await.unwrap();
                let c = ctx("job");
                store
                    .store_parallelism_overrides(&c, &sample(1).overrides)
                    .await
                    .unwrap();
                store.flush(&c).await.unwrap();
                // Nothing changed: nothing written, no sample.
                store.flush(&c).await.unwrap();
                store
                    .store_parallelism_overrides(&c, &sample(2).overrides)
                    .await
                    .unwrap();
                store.flush(&c).await.unwrap();
                // A closed pool fails the next write.
                store
                    .store_parallelism_overrides(&c, &sample(3).overrides)
                    .await
                    .unwrap();
                store.close().await;
                assert!(store.flush(&c).await.is_err());
                // The in-memory store writes nothing anywhere.
                let memory = open_state_store("memory").await.unwrap();
                memory
                    .store_parallelism_overrides(&c, &sample(1).overrides)
                    .await
                    .unwrap();
                memory.flush(&c).await.unwrap();
            };
            tokio::time::timeout(Duration::from_secs(30), run).await.unwrap();
        });
    });
    let text = handle.render();
    assert!(
        text.contains(&format!("{STATE_FLUSH_DURATION}_count{{store=\"sqlite\"}} 3\n")),
        "two writes and one failed write:\n{text}"
    );
    assert!(
        text.contains(&format!("{STATE_FLUSH_ERRORS}{{store=\"sqlite\"}} 1\n")),
        "{text}"
    );
    // Each write went through a group of one (the failed one never reached the closed writer).
    assert!(
        text.contains(&format!("{STATE_FLUSH_GROUP_JOBS}_count{{store=\"sqlite\"}} 2\n")),
        "{text}"
    );
    assert!(
        text.contains(&format!("{STATE_FLUSH_GROUP_JOBS}_sum{{store=\"sqlite\"}} 2\n")),
        "{text}"
    );
    assert!(!text.contains("store=\"memory\""), "{text}");
}
