//! The stores' series (`flink_autoscaler_state_*`), recorded through the `metrics` facade into a
//! local Prometheus recorder: one sample per flush that writes, one failure per flush that fails,
//! one count per unreadable row discarded, labelled by the backend.

#![allow(missing_docs, clippy::unwrap_used)]

mod common;

use autoscaler_core::AutoScalerStateStore;
use autoscaler_state::{
    STATE_FLUSH_DURATION, STATE_FLUSH_ERRORS, STATE_FLUSH_GROUP_JOBS, STATE_ROWS_DISCARDED, open_state_store,
};
use common::{Kind, TestDb, ctx, sample};
use std::time::Duration;

/// Runs `run` (bounded to 30 s) on a runtime of its own with a local Prometheus recorder, and
/// returns what it returned and what the recorder renders after it.
fn recorded<T>(run: impl Future<Output = T>) -> (T, String) {
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let out = metrics::with_local_recorder(&recorder, || {
        rt.block_on(async { tokio::time::timeout(Duration::from_secs(30), run).await.unwrap() })
    });
    (out, handle.render())
}

#[test]
fn database_flushes_are_timed_and_failures_counted() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("flush.db").display());
    let ((), text) = recorded(async {
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
    });
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

// A row that does not decode is discarded on load (the reference's discard of an undeserializable
// state) and counted: one per row, none for rows that read. The next flush deletes the history's
// row; the window's is gone once the window is written again (every cycle stores it).
#[test]
fn unreadable_rows_are_counted_as_discarded() {
    let (rows, text) = recorded(async {
        let db = TestDb::new(Kind::Sqlite).await.unwrap();
        let writer = open_state_store(&db.url).await.unwrap();
        let c = ctx("job");
        writer.store_config_changes(&c, &sample(1).changes).await.unwrap();
        writer.flush(&c).await.unwrap();
        writer.close().await;
        db.insert_state_row("job", "scalingHistory", "{broken").await;
        db.insert_state_row("job", "collectedMetrics#0", r#"{"v":2,"at":"x","packed":"!"}"#)
            .await;
        let reader = open_state_store(&db.url).await.unwrap();
        assert_eq!(
            common::json(&reader.get_config_changes(&c).await.unwrap()),
            common::json(&sample(1).changes),
            "the readable row is kept"
        );
        assert!(reader.get_scaling_history(&c).await.unwrap().is_empty());
        assert!(reader.get_collected_metrics(&c).await.unwrap().is_empty());
        reader
            .store_collected_metrics(&c, &common::metric_history(1, 1))
            .await
            .unwrap();
        reader.flush(&c).await.unwrap();
        reader.close().await;
        db.state_rows("job").await
    });
    let types: Vec<&str> = rows.iter().map(|(state_type, _)| state_type.as_str()).collect();
    assert_eq!(
        types,
        ["collectedMetrics#0", "collectedMetricsIndex", "configOverrides"],
        "the history's row deleted"
    );
    assert!(
        autoscaler_state::decode_window_row(&rows[0].1).is_ok(),
        "the window's row rewritten: {rows:?}"
    );
    assert!(
        text.contains(&format!("{STATE_ROWS_DISCARDED}{{store=\"sqlite\"}} 2\n")),
        "{text}"
    );
}
