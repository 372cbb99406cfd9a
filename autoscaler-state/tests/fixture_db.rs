//! SQLite databases written by earlier releases still load with the current code, value for
//! value, and their windows move to the current rows on their next flush: the release before
//! incremental window persistence (`tests/fixtures/format-v1-db/`, a whole-window row) and the
//! release before slots (`tests/fixtures/format-v1-rows-db/`, snapshot rows keyed by instant).
//! Both fixtures are frozen.

#![allow(missing_docs, clippy::unwrap_used)]

mod common;

use autoscaler_core::AutoScalerStateStore;
use autoscaler_metrics::CollectedMetrics;
use autoscaler_state::AnyStateStore;
use common::{Ctx, Sample, assert_all, ctx, metric_history, sample, t};
use sqlx::Connection as _;

/// The fixture's jobs and the values the earlier release stored for them.
fn fixture_jobs() -> Vec<(Ctx, Sample)> {
    let mut wide = sample(5);
    wide.metrics = metric_history(5, 400);
    vec![(ctx("fixture-small"), sample(3)), (ctx("fixture-wide"), wide)]
}

/// `(state_type)` rows of `job_key`, straight from the table.
async fn state_types(url: &str, job_key: &str) -> Vec<String> {
    let mut conn = sqlx::SqliteConnection::connect(url).await.unwrap();
    let rows: Vec<(String,)> =
        sqlx::query_as("SELECT state_type FROM t_flink_autoscaler_state_store WHERE job_key = ? ORDER BY state_type")
            .bind(job_key)
            .fetch_all(&mut conn)
            .await
            .unwrap();
    conn.close().await.unwrap();
    rows.into_iter().map(|(t,)| t).collect()
}

/// Opens the database at `url` as a restarted process would and checks each job's states.
async fn assert_after_restart<const N: usize>(url: &str, jobs: [(&Ctx, &Sample); N]) {
    let store = AnyStateStore::open(url).await.unwrap();
    for (c, s) in jobs {
        assert_all(&store, c, s).await;
    }
    store.close().await;
}

#[tokio::test]
async fn a_database_of_the_earlier_release_loads_and_migrates_its_window() {
    let run = async {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/format-v1-db/state.db");
        std::fs::copy(&fixture, &path).unwrap();
        let url = format!("sqlite:{}", path.display());
        assert!(
            state_types(&url, "fixture-wide")
                .await
                .contains(&"collectedMetrics".to_owned()),
            "the fixture holds the earlier release's whole-window row"
        );

        // Opening runs the current migrations on the old schema; every state loads as written.
        let store = AnyStateStore::open(&url).await.unwrap();
        for (c, s) in &fixture_jobs() {
            assert_all(&store, c, s).await;
        }

        // The next flush of the window (one more snapshot) migrates it to snapshot rows.
        let (c, mut s) = fixture_jobs().remove(1);
        s.metrics.insert(t(400 * 10), CollectedMetrics::default());
        store.store_collected_metrics(&c, &s.metrics).await.unwrap();
        store.flush(&c).await.unwrap();
        store.close().await;
        let types = state_types(&url, "fixture-wide").await;
        assert!(!types.contains(&"collectedMetrics".to_owned()), "{types:?}");
        assert!(types.contains(&"collectedMetricsIndex".to_owned()), "{types:?}");
        let snapshot_rows = types.iter().filter(|t| t.starts_with("collectedMetrics#")).count();
        assert_eq!(snapshot_rows, 401);

        // A restarted process reads the migrated window and the untouched job as they were.
        let (small, small_sample) = fixture_jobs().remove(0);
        assert_after_restart(&url, [(&c, &s), (&small, &small_sample)]).await;
    };
    tokio::time::timeout(std::time::Duration::from_secs(60), run)
        .await
        .unwrap();
}

/// The jobs of `tests/fixtures/format-v1-rows-db/` (the release before slots: one row per
/// snapshot keyed by its instant) and the values stored for them.
fn rows_fixture_jobs() -> Vec<(Ctx, Sample)> {
    let mut window = sample(6);
    window.metrics = metric_history(6, 40);
    // Slid by one before it was frozen: t(10) ..= t(400).
    window.metrics.insert(t(400), CollectedMetrics::default());
    window.metrics.remove_before(t(10));
    vec![(ctx("rows-small"), sample(3)), (ctx("rows-window"), window)]
}

#[tokio::test]
async fn a_database_with_snapshot_rows_keyed_by_instant_loads_and_moves_to_slots() {
    let run = async {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let fixture =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/format-v1-rows-db/state.db");
        std::fs::copy(&fixture, &path).unwrap();
        let url = format!("sqlite:{}", path.display());
        let instant_rows = |types: &[String]| types.iter().filter(|t| t.starts_with("collectedMetrics@")).count();
        let slot_rows = |types: &[String]| types.iter().filter(|t| t.starts_with("collectedMetrics#")).count();
        assert_eq!(instant_rows(&state_types(&url, "rows-window").await), 40);

        // Every state loads as written.
        let store = AnyStateStore::open(&url).await.unwrap();
        for (c, s) in &rows_fixture_jobs() {
            assert_all(&store, c, s).await;
        }

        // The next flush of the window (slid by one more) writes it whole as slot rows and
        // deletes the rows keyed by instant.
        let (c, mut s) = rows_fixture_jobs().remove(1);
        s.metrics.insert(t(410), CollectedMetrics::default());
        s.metrics.remove_before(t(20));
        store.store_collected_metrics(&c, &s.metrics).await.unwrap();
        store.flush(&c).await.unwrap();
        // And the one after that overwrites a slot in place.
        s.metrics.insert(t(420), CollectedMetrics::default());
        s.metrics.remove_before(t(30));
        store.store_collected_metrics(&c, &s.metrics).await.unwrap();
        store.flush(&c).await.unwrap();
        store.close().await;
        let types = state_types(&url, "rows-window").await;
        assert_eq!(instant_rows(&types), 0, "{types:?}");
        assert_eq!(slot_rows(&types), 40, "{types:?}");
        assert!(types.contains(&"collectedMetricsIndex".to_owned()), "{types:?}");
        // The untouched job keeps its rows until its window is flushed.
        assert_eq!(instant_rows(&state_types(&url, "rows-small").await), 3);

        // A restarted process reads the moved window and the untouched job as they were.
        let (small, small_sample) = rows_fixture_jobs().remove(0);
        assert_after_restart(&url, [(&c, &s), (&small, &small_sample)]).await;
    };
    tokio::time::timeout(std::time::Duration::from_secs(60), run)
        .await
        .unwrap();
}
