//! One conformance suite for every state store: memory, SQLite, PostgreSQL and MySQL/MariaDB.
//!
//! PostgreSQL and MySQL run when `AUTOSCALER_TEST_POSTGRES_URL` / `AUTOSCALER_TEST_MYSQL_URL` are set
//! (else they print why and pass); each test gets its own schema / database.

#![allow(missing_docs, clippy::unwrap_used)]

mod common;

use autoscaler_core::{AutoScalerEventHandler, EventType};
use autoscaler_core::{
    AutoScalerStateStore, ConfigChanges, DelayedScaleDown, ParallelismOverrides, ScalingHistory, ScalingTracking,
    StateError,
};
use autoscaler_metrics::{CollectedMetrics, MetricHistory, MetricValues, ScalingMetric, VertexId};
use autoscaler_state::{AnyEventHandler, AnyStateStore, STATE_FLUSH_FAILED_REASON, StoreOptions, flush_or_warn};
use common::{Ctx, Kind, Sample, TestDb, assert_all, ctx, json, sample};
use std::time::Duration;

async fn open(db: &TestDb) -> AnyStateStore {
    AnyStateStore::open(&db.url).await.unwrap()
}

/// A second store on the same database: what a restarted process sees. For memory, a fresh store.
async fn reopen(db: &TestDb) -> AnyStateStore {
    open(db).await
}

async fn store_all(store: &AnyStateStore, c: &Ctx, s: &Sample) {
    store.store_scaling_history(c, &s.history).await.unwrap();
    store.store_scaling_tracking(c, &s.tracking).await.unwrap();
    store.store_collected_metrics(c, &s.metrics).await.unwrap();
    store.store_evaluated_metrics(c, &s.evaluated).await.unwrap();
    store.store_parallelism_overrides(c, &s.overrides).await.unwrap();
    store.store_config_changes(c, &s.changes).await.unwrap();
    store.store_delayed_scale_down(c, &s.delayed).await.unwrap();
}

async fn assert_empty(store: &AnyStateStore, c: &Ctx) {
    assert_eq!(store.get_scaling_history(c).await.unwrap(), ScalingHistory::new());
    assert_eq!(store.get_scaling_tracking(c).await.unwrap(), ScalingTracking::default());
    assert!(store.get_collected_metrics(c).await.unwrap().is_empty());
    assert!(store.get_evaluated_metrics(c).await.unwrap().is_none());
    assert_eq!(
        store.get_parallelism_overrides(c).await.unwrap(),
        ParallelismOverrides::new()
    );
    assert_eq!(store.get_config_changes(c).await.unwrap(), ConfigChanges::default());
    assert_eq!(
        store.get_delayed_scale_down(c).await.unwrap(),
        DelayedScaleDown::default()
    );
}

// Every store/get/remove method round-trips its own state and leaves the others alone.
async fn every_method_round_trips(db: &TestDb) {
    let store = open(db).await;
    let c = ctx("job");
    assert_empty(&store, &c).await;
    let s = sample(7);
    store_all(&store, &c, &s).await;
    assert_all(&store, &c, &s).await;

    store.remove_scaling_history(&c).await.unwrap();
    assert!(store.get_scaling_history(&c).await.unwrap().is_empty());
    store.remove_scaling_tracking(&c).await.unwrap();
    assert_eq!(
        store.get_scaling_tracking(&c).await.unwrap(),
        ScalingTracking::default()
    );
    store.remove_collected_metrics(&c).await.unwrap();
    assert!(store.get_collected_metrics(&c).await.unwrap().is_empty());
    store.remove_evaluated_metrics(&c).await.unwrap();
    assert!(store.get_evaluated_metrics(&c).await.unwrap().is_none());
    store.remove_parallelism_overrides(&c).await.unwrap();
    assert!(store.get_parallelism_overrides(&c).await.unwrap().is_empty());
    store.remove_config_changes(&c).await.unwrap();
    assert_eq!(store.get_config_changes(&c).await.unwrap(), ConfigChanges::default());
    // Removing what is absent is fine.
    store.remove_config_changes(&c).await.unwrap();
    // The last one standing is untouched by the removals of the others.
    assert_eq!(store.get_delayed_scale_down(&c).await.unwrap(), s.delayed);
    store.remove_delayed_scale_down(&c).await.unwrap();
    assert_empty(&store, &c).await;
}
per_backend!(every_method_round_trips);

// A cycle's one-call read and write agree with the per-state methods: the write stores only the
// parts marked changed, the read returns every part (empty where none is stored), and after a
// flush another process reads the same.
async fn job_state_reads_and_writes_in_one_call(db: &TestDb) {
    use autoscaler_core::cycle::{JobState, StateChanges};
    let store = open(db).await;
    let c = ctx("job");
    assert_eq!(store.get_job_state(&c).await.unwrap(), JobState::default());
    let s = sample(3);
    let state = JobState {
        metric_history: s.metrics.clone(),
        scaling_history: s.history.clone(),
        scaling_tracking: s.tracking.clone(),
        delayed_scale_down: s.delayed.clone(),
        parallelism_overrides: s.overrides.clone(),
        config_changes: s.changes.clone(),
        evaluated_metrics: Some(s.evaluated.clone()),
    };
    let only_window_and_tracking = StateChanges {
        metric_history: true,
        scaling_tracking: true,
        ..StateChanges::default()
    };
    store
        .store_job_state(&c, &state, &only_window_and_tracking)
        .await
        .unwrap();
    let read = store.get_job_state(&c).await.unwrap();
    assert_eq!(json(&read.metric_history), json(&s.metrics));
    assert_eq!(read.scaling_tracking, s.tracking);
    assert_eq!(read.scaling_history, ScalingHistory::new(), "not marked changed");
    assert_eq!(read.parallelism_overrides, ParallelismOverrides::new());
    assert_eq!(read.config_changes, ConfigChanges::default());
    assert_eq!(read.delayed_scale_down, DelayedScaleDown::default());

    assert_eq!(
        store.get_evaluated_metrics(&c).await.unwrap(),
        None,
        "not marked changed"
    );

    // Every part, the evaluated metrics included (part of the state, no call of their own).
    store.store_job_state(&c, &state, &StateChanges::all()).await.unwrap();
    assert_all(&store, &c, &s).await;
    store.flush(&c).await.unwrap();
    if db.persistent() {
        let other = reopen(db).await;
        let read = other.get_job_state(&c).await.unwrap();
        assert_eq!(json(&read.metric_history), json(&s.metrics));
        assert_eq!(json(&read.scaling_history), json(&s.history));
        assert_eq!(
            (
                read.scaling_tracking,
                read.parallelism_overrides,
                read.config_changes,
                read.delayed_scale_down
            ),
            (
                s.tracking.clone(),
                s.overrides.clone(),
                s.changes.clone(),
                s.delayed.clone()
            )
        );
        assert_all(&other, &c, &s).await;
    }
}
per_backend!(job_state_reads_and_writes_in_one_call);

// Writes are buffered: another process sees nothing until flush, then everything; updates and
// removals likewise reach the database only on flush (reference testCaching).
async fn writes_reach_the_database_only_on_flush(db: &TestDb) {
    let store = open(db).await;
    let c = ctx("job-a");
    store_all(&store, &c, &sample(1)).await;
    if db.persistent() {
        assert_empty(&reopen(db).await, &c).await;
    }
    store.flush(&c).await.unwrap();
    assert_all(&store, &c, &sample(1)).await;
    if !db.persistent() {
        return;
    }
    assert_all(&reopen(db).await, &c, &sample(1)).await;

    store_all(&store, &c, &sample(2)).await;
    store.remove_collected_metrics(&c).await.unwrap();
    assert_all(&reopen(db).await, &c, &sample(1)).await;
    store.flush(&c).await.unwrap();
    let other = reopen(db).await;
    assert!(other.get_collected_metrics(&c).await.unwrap().is_empty());
    assert_eq!(other.get_parallelism_overrides(&c).await.unwrap(), sample(2).overrides);
    // Five states (the evaluated metrics are never written), no window.
    assert_eq!(db.state_rows("job-a").await.len(), 5);
}
per_backend!(writes_reach_the_database_only_on_flush);

// A flush with nothing changed writes nothing (reference testAvoidUnnecessaryFlushes): the row is
// byte-for-byte and time-for-time the same.
async fn flush_without_changes_writes_nothing(db: &TestDb) {
    let store = open(db).await;
    let c = ctx("job");
    store.flush(&c).await.unwrap(); // never touched: nothing to do
    store.store_config_changes(&c, &sample(1).changes).await.unwrap();
    store.flush(&c).await.unwrap();
    if !db.persistent() {
        return;
    }
    db.exec(
        "UPDATE t_flink_autoscaler_state_store SET state_value = ? WHERE state_type = ?",
        &[
            "{\"v\":1,\"state\":{\"overrides\":{},\"removals\":[\"marker\"]}}",
            "configOverrides",
        ],
    )
    .await;
    store.flush(&c).await.unwrap();
    store.clear_all(&c).await.unwrap();
    store.store_config_changes(&c, &sample(1).changes).await.unwrap();
    // Cleared and re-put: NEEDS_UPDATE, so this flush does write.
    store.flush(&c).await.unwrap();
    let rows = db.state_rows("job").await;
    assert_eq!(rows.len(), 1);
    assert!(!rows[0].1.contains("marker"), "{rows:?}");

    db.exec(
        "UPDATE t_flink_autoscaler_state_store SET state_value = ? WHERE state_type = ?",
        &[
            "{\"v\":1,\"state\":{\"overrides\":{},\"removals\":[\"marker\"]}}",
            "configOverrides",
        ],
    )
    .await;
    store.flush(&c).await.unwrap();
    assert!(
        db.state_rows("job").await[0].1.contains("marker"),
        "an unchanged job must not be rewritten"
    );
}
per_backend!(flush_without_changes_writes_nothing);

// clear_all removes every state of the job, and only of that job.
async fn clear_all_removes_every_state_of_the_job(db: &TestDb) {
    let store = open(db).await;
    let (a, b) = (ctx("a"), ctx("b"));
    store_all(&store, &a, &sample(1)).await;
    store_all(&store, &b, &sample(2)).await;
    store.flush(&a).await.unwrap();
    store.flush(&b).await.unwrap();
    store.clear_all(&a).await.unwrap();
    assert_empty(&store, &a).await;
    assert_all(&store, &b, &sample(2)).await;
    store.flush(&a).await.unwrap();
    if db.persistent() {
        assert!(db.state_rows("a").await.is_empty());
        // Every state but the evaluated metrics, which are never written.
        assert_eq!(db.state_types("b").await.len(), 6);
        assert_empty(&reopen(db).await, &a).await;
    }
}
per_backend!(clear_all_removes_every_state_of_the_job);

// remove_info_from_cache drops unflushed changes; the next access reloads what was flushed (a
// database store) or starts empty (the in-memory store, whose cache is everything).
async fn remove_info_from_cache_reloads(db: &TestDb) {
    let store = open(db).await;
    let c = ctx("job");
    store_all(&store, &c, &sample(1)).await;
    store.flush(&c).await.unwrap();
    store_all(&store, &c, &sample(2)).await;
    AutoScalerStateStore::<String, Ctx>::remove_info_from_cache(&store, &"job".to_owned()).await;
    if db.persistent() {
        assert_all(&store, &c, &sample(1)).await;
    } else {
        assert_empty(&store, &c).await;
    }
}
per_backend!(remove_info_from_cache_reloads);

// Many jobs, each with its own states, flushed and reloaded without cross-talk.
async fn many_jobs_keep_their_own_state(db: &TestDb) {
    let store = open(db).await;
    let jobs: Vec<Ctx> = (0..40).map(|i| ctx(&format!("job-{i:03}"))).collect();
    for (i, c) in jobs.iter().enumerate() {
        store_all(&store, c, &sample(i as u32)).await;
    }
    for c in &jobs {
        store.flush(c).await.unwrap();
    }
    let check = if db.persistent() { reopen(db).await } else { store };
    for (i, c) in jobs.iter().enumerate() {
        assert_all(&check, c, &sample(i as u32)).await;
    }
}
per_backend!(many_jobs_keep_their_own_state);

/// Job keys that break naive SQL, collations and encodings.
const ODD_KEYS: &[&str] = &[
    "plain",
    "it's",
    "say \"hi\"",
    "back\\slash",
    "'; DROP TABLE t_flink_autoscaler_state_store; --",
    "100% _match_",
    "ünïcödé-jöb",
    "作业-𝄞-🚀",
    "Job",
    "job",
    "job ",
    "tab\there\nnewline",
    "?$1:name",
];

// Job keys with quotes, unicode and SQL metacharacters are stored verbatim and kept apart, even
// when they differ only in case or a trailing space.
async fn odd_job_keys_are_stored_verbatim_and_apart(db: &TestDb) {
    let store = open(db).await;
    for (i, key) in ODD_KEYS.iter().enumerate() {
        let c = ctx(key);
        store_all(&store, &c, &sample(i as u32)).await;
        store.flush(&c).await.unwrap();
    }
    let check = if db.persistent() { reopen(db).await } else { store };
    for (i, key) in ODD_KEYS.iter().enumerate() {
        assert_all(&check, &ctx(key), &sample(i as u32)).await;
    }
    if db.persistent() {
        for key in ODD_KEYS {
            assert_eq!(db.state_types(key).await.len(), 6, "{key:?}");
        }
    }
}
per_backend!(odd_job_keys_are_stored_verbatim_and_apart);

// A row that cannot be decoded (garbage, or written by a newer format) is discarded with a logged
// error and deleted on the next flush; the other states load (reference testDiscardInvalidHistory).
async fn unreadable_rows_are_discarded(db: &TestDb) {
    if !db.persistent() {
        return;
    }
    let store = open(db).await;
    let c = ctx("job");
    store_all(&store, &c, &sample(3)).await;
    store.remove_scaling_history(&c).await.unwrap();
    store.remove_delayed_scale_down(&c).await.unwrap();
    store.flush(&c).await.unwrap();
    db.insert_state_row("job", "scalingHistory", "{not json").await;
    db.insert_state_row("job", "delayedScaleDown", r#"{"v":99,"state":{}}"#)
        .await;
    db.insert_state_row("job", "someFutureState", r#"{"v":1,"state":{}}"#)
        .await;

    let store = reopen(db).await;
    assert!(store.get_scaling_history(&c).await.unwrap().is_empty());
    assert_eq!(
        store.get_delayed_scale_down(&c).await.unwrap(),
        DelayedScaleDown::default()
    );
    assert_eq!(store.get_parallelism_overrides(&c).await.unwrap(), sample(3).overrides);
    store.flush(&c).await.unwrap();
    let types: Vec<String> = db.state_rows("job").await.into_iter().map(|r| r.0).collect();
    assert!(!types.contains(&"scalingHistory".to_owned()), "{types:?}");
    assert!(!types.contains(&"delayedScaleDown".to_owned()), "{types:?}");
    assert!(
        types.contains(&"someFutureState".to_owned()),
        "unknown types are left alone: {types:?}"
    );
}
per_backend!(unreadable_rows_are_discarded);

// A long collected-metrics history reads back identical, one row per snapshot; a large snapshot
// is stored gzip-compressed.
async fn large_histories_are_compressed(db: &TestDb) {
    let store = open(db).await;
    let c = ctx("job");
    let history = common::metric_history(5, 2000);
    store.store_collected_metrics(&c, &history).await.unwrap();
    let wide = ctx("wide");
    // 4,000 vertices: about 100 KB packed, past the 64 KiB threshold.
    let wide_history = wide_history(2, 4000);
    store.store_collected_metrics(&wide, &wide_history).await.unwrap();
    store.flush(&c).await.unwrap();
    store.flush(&wide).await.unwrap();
    let check = if db.persistent() { reopen(db).await } else { store };
    assert_eq!(json(&check.get_collected_metrics(&c).await.unwrap()), json(&history));
    assert_eq!(
        json(&check.get_collected_metrics(&wide).await.unwrap()),
        json(&wide_history)
    );
    if db.persistent() {
        assert_eq!(
            db.state_rows("job").await.len(),
            2000 + 1,
            "a row per snapshot and the index"
        );
        let rows = db.state_rows("wide").await;
        let snapshot = &rows[0];
        assert!(snapshot.0.starts_with("collectedMetrics#"), "{}", snapshot.0);
        assert!(snapshot.1.starts_with(r#"{"v":2,"at":""#), "{}", &snapshot.1[..40]);
        assert!(
            snapshot.1.contains(r#"Z","packedGzip":""#),
            "the instant, then the compressed packed snapshot"
        );
        assert!(
            snapshot.1.len() < json(&wide_history).len() / 2 / 4,
            "compressed {} bytes",
            snapshot.1.len()
        );
    }
}

/// `snapshots` snapshots of `vertices` vertices each.
fn wide_history(snapshots: usize, vertices: usize) -> MetricHistory {
    (0..snapshots)
        .map(|s| {
            let mut snapshot = CollectedMetrics::default();
            for v in 0..vertices {
                let mut values = MetricValues::default();
                values.insert(ScalingMetric::Load, 0.5);
                values.insert(ScalingMetric::NumRecordsIn, (s * 1000 + v) as f64);
                snapshot
                    .vertex_metrics
                    .insert(VertexId::new(format!("{v:032x}")), values);
            }
            (common::t(s as i64 * 10), snapshot)
        })
        .collect()
}

// A flush after one new snapshot (and one trimmed) writes that snapshot's row (over the trimmed
// one's, in its slot) and the window index, and the window loads back identical.
async fn a_flush_writes_only_the_new_snapshot(db: &TestDb) {
    let store = open(db).await;
    let c = ctx("job");
    let mut window = wide_history(60, 20);
    store.store_collected_metrics(&c, &window).await.unwrap();
    store.flush(&c).await.unwrap();
    let first = store.bytes_written();
    let mut next = wide_history(61, 20);
    next.remove_before(common::t(10));
    let latest = next.iter().next_back().map(|(at, s)| (*at, s.clone())).unwrap();
    window.insert(latest.0, latest.1);
    window.remove_before(common::t(10));
    store.store_collected_metrics(&c, &window).await.unwrap();
    store.flush(&c).await.unwrap();
    let written = store.bytes_written() - first;
    if !db.persistent() {
        assert_eq!(written, 0);
        return;
    }
    let rows = db.state_rows("job").await;
    assert_eq!(rows.len(), 60 + 1);
    let index = rows.iter().find(|(t, _)| t == "collectedMetricsIndex").unwrap();
    let newest = rows.iter().find(|(_, v)| v.contains("T22:23:20")).unwrap();
    assert_eq!(written, (index.1.len() + newest.1.len()) as u64, "{written} bytes");
    assert_eq!(
        store.window_bytes_written(),
        first + written,
        "only the window was written"
    );
    assert!(
        first > 50 * written,
        "the first flush wrote the whole window: {first} bytes"
    );
    assert!(
        !rows.iter().any(|(_, v)| v.contains("T22:13:20")),
        "the trimmed snapshot's row is overwritten"
    );
    assert_eq!(
        json(&reopen(db).await.get_collected_metrics(&c).await.unwrap()),
        json(&window)
    );
    // Nothing changed: nothing written.
    store.flush(&c).await.unwrap();
    assert_eq!(store.bytes_written() - first, written);
}
per_backend!(a_flush_writes_only_the_new_snapshot);

// A snapshot row the window index vouches for went missing behind the store's back (a DBA's
// clean-up, say) just before the flush that trims it: the flush still leaves exactly the new
// window (deleting a row that is not there deletes nothing).
async fn a_trimmed_row_gone_missing_still_leaves_the_exact_window(db: &TestDb) {
    if !db.persistent() {
        return;
    }
    let store = open(db).await;
    let c = ctx("job");
    let mut window = wide_history(60, 4);
    store.store_collected_metrics(&c, &window).await.unwrap();
    store.flush(&c).await.unwrap();
    let rows = db.state_rows("job").await;
    let (trimmed, _) = rows.iter().find(|(_, v)| v.contains("T22:13:20")).unwrap();
    db.exec(
        "DELETE FROM t_flink_autoscaler_state_store WHERE job_key = ? AND state_type = ?",
        &["job", trimmed],
    )
    .await;
    let latest = wide_history(61, 4)
        .iter()
        .next_back()
        .map(|(at, s)| (*at, s.clone()))
        .unwrap();
    window.insert(latest.0, latest.1);
    window.remove_before(common::t(10));
    store.store_collected_metrics(&c, &window).await.unwrap();
    store.flush(&c).await.unwrap();
    let rows = db.state_rows("job").await;
    let snapshot_rows = rows.iter().filter(|(t, _)| t.starts_with("collectedMetrics#")).count();
    assert_eq!(snapshot_rows, 60);
    assert_eq!(
        json(&reopen(db).await.get_collected_metrics(&c).await.unwrap()),
        json(&window)
    );
}
per_backend!(a_trimmed_row_gone_missing_still_leaves_the_exact_window);

// Writes and deletions go in batches of a bounded size: a flush that adds and trims more
// snapshots than one batch holds stores exactly the new window.
async fn flushes_larger_than_a_batch_store_the_exact_window(db: &TestDb) {
    let store = open(db).await;
    let c = ctx("job");
    let window = wide_history(450, 2);
    store.store_collected_metrics(&c, &window).await.unwrap();
    store.flush(&c).await.unwrap();
    // 430 snapshots trimmed, 230 added.
    let mut next = wide_history(680, 2);
    next.remove_before(common::t(4300));
    store.store_collected_metrics(&c, &next).await.unwrap();
    store.flush(&c).await.unwrap();
    assert_eq!(json(&store.get_collected_metrics(&c).await.unwrap()), json(&next));
    if db.persistent() {
        assert_eq!(
            json(&reopen(db).await.get_collected_metrics(&c).await.unwrap()),
            json(&next)
        );
        // 250 snapshot rows and the index.
        assert_eq!(db.state_rows("job").await.len(), 250 + 1);
    }
}
per_backend!(flushes_larger_than_a_batch_store_the_exact_window);

// A job whose window an earlier release stored as one `collectedMetrics` row (the format-v1
// fixture) loads it, and its next flush replaces that row by one row per snapshot.
async fn a_whole_window_row_is_migrated_to_snapshot_rows(db: &TestDb) {
    if !db.persistent() {
        return;
    }
    open(db).await; // creates the tables
    let dir = fixture_dir("format-v1");
    let legacy = std::fs::read_to_string(dir.join("collectedMetrics-gzip.json")).unwrap();
    db.insert_state_row("old-job", "collectedMetrics", legacy.trim_end())
        .await;
    let store = open(db).await;
    let c = ctx("old-job");
    let mut window = store.get_collected_metrics(&c).await.unwrap();
    assert_eq!(json(&window), json(&common::metric_history(5, 2000)));
    let (at, latest) = window.iter().next_back().map(|(at, s)| (*at, s.clone())).unwrap();
    window.insert(at + chrono::TimeDelta::seconds(10), latest);
    window.remove_before(common::t(10));
    store.store_collected_metrics(&c, &window).await.unwrap();
    store.flush(&c).await.unwrap();
    let types: Vec<String> = db.state_rows("old-job").await.into_iter().map(|r| r.0).collect();
    assert!(
        !types.contains(&"collectedMetrics".to_owned()),
        "the whole-window row is gone"
    );
    assert_eq!(types.len(), 2000 + 1);
    assert_eq!(
        json(&reopen(db).await.get_collected_metrics(&c).await.unwrap()),
        json(&window)
    );
}
per_backend!(a_whole_window_row_is_migrated_to_snapshot_rows);

// Two stores (two processes) writing one job's window in turn: each flush leaves exactly the
// window of the store that flushed, although each store's cache misses the other's rows.
async fn two_stores_writing_one_window_leave_the_last_one(db: &TestDb) {
    if !db.persistent() {
        return;
    }
    let (a, b) = (open(db).await, open(db).await);
    let c = ctx("job");
    let wa = common::metric_history(1, 30);
    a.store_collected_metrics(&c, &wa).await.unwrap();
    a.flush(&c).await.unwrap();
    // b loads a's window, then writes a shorter one of its own.
    assert_eq!(json(&b.get_collected_metrics(&c).await.unwrap()), json(&wa));
    let wb = common::metric_history(2, 10);
    b.store_collected_metrics(&c, &wb).await.unwrap();
    b.flush(&c).await.unwrap();
    assert_eq!(
        json(&reopen(db).await.get_collected_metrics(&c).await.unwrap()),
        json(&wb)
    );
    // a still believes its own rows are there: its next flush must not keep b's.
    let mut wa2 = wa.clone();
    wa2.remove_before(common::t(100));
    a.store_collected_metrics(&c, &wa2).await.unwrap();
    a.flush(&c).await.unwrap();
    assert_eq!(
        json(&reopen(db).await.get_collected_metrics(&c).await.unwrap()),
        json(&wa2)
    );
    assert_eq!(db.state_rows("job").await.len(), wa2.len() + 1);
}
per_backend!(two_stores_writing_one_window_leave_the_last_one);
per_backend!(large_histories_are_compressed);

// Rows written by format version 1 (tests/fixtures/format-v1, frozen) still load.
async fn format_v1_fixture_still_loads(db: &TestDb) {
    if !db.persistent() {
        return;
    }
    open(db).await; // creates the tables
    let dir = fixture_dir("format-v1");
    for state_type in [
        "scalingHistory",
        "scalingTracking",
        "collectedMetrics",
        "evaluatedMetrics",
        "parallelismOverrides",
        "configOverrides",
        "delayedScaleDown",
    ] {
        let value = std::fs::read_to_string(dir.join(format!("{state_type}.json"))).unwrap();
        db.insert_state_row("fixture-job", state_type, value.trim_end()).await;
    }
    let compressed = std::fs::read_to_string(dir.join("collectedMetrics-gzip.json")).unwrap();
    db.insert_state_row("fixture-gzip", "collectedMetrics", compressed.trim_end())
        .await;

    let store = open(db).await;
    assert_all(&store, &ctx("fixture-job"), &sample(4)).await;
    assert_eq!(
        json(&store.get_collected_metrics(&ctx("fixture-gzip")).await.unwrap()),
        json(&common::metric_history(5, 2000))
    );
}
per_backend!(format_v1_fixture_still_loads);

/// The window of the slot-row fixtures (`tests/fixtures/format-v*-slots`): `metric_history(7, 20)`
/// stored and flushed, then slid by three snapshots (each a copy of the latest) and flushed again,
/// so that three slots hold newer snapshots than the slots after them. Also what the rows hold.
fn slid_window() -> MetricHistory {
    let mut window = common::metric_history(7, 20);
    for i in 20..23 {
        let latest = window.latest().cloned().unwrap();
        window.insert(common::t(i * 10), latest);
    }
    window.remove_before(common::t(30));
    window
}

/// Inserts the rows of `tests/fixtures/<dir>/rows.json` (`[state_type, state_value]` pairs) as
/// job `job`'s.
async fn insert_fixture_rows(db: &TestDb, dir: &str, job: &str) -> usize {
    let path = fixture_dir(dir).join("rows.json");
    let rows: Vec<(String, String)> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    for (state_type, value) in &rows {
        db.insert_state_row(job, state_type, value).await;
    }
    rows.len()
}

// Window rows written by format version 1 (JSON, the release before packed rows) and version 2
// (packed) load as the window they hold; the next flush of a slid window overwrites only the
// slots it needs, as packed rows, and the mix of both versions loads too.
async fn slot_rows_of_every_version_load(db: &TestDb) {
    if !db.persistent() {
        return;
    }
    open(db).await; // creates the tables
    for (dir, version) in [("format-v1-slots", 1), ("format-v2-slots", 2)] {
        let job = format!("slots-{dir}");
        assert_eq!(insert_fixture_rows(db, dir, &job).await, 21);
        let c = ctx(&job);
        let store = open(db).await;
        let mut window = store.get_collected_metrics(&c).await.unwrap();
        assert_eq!(json(&window), json(&slid_window()), "{dir}");
        assert_eq!(window.len(), 20);
        let latest = window.latest().cloned().unwrap();
        window.insert(common::t(230), latest);
        window.remove_before(common::t(40));
        store.store_collected_metrics(&c, &window).await.unwrap();
        store.flush(&c).await.unwrap();
        let rows = db.state_rows(&job).await;
        let versions: Vec<bool> = rows
            .iter()
            .filter(|(state_type, _)| state_type.starts_with("collectedMetrics#"))
            .map(|(_, value)| value.starts_with(&format!("{{\"v\":{version},")))
            .collect();
        assert_eq!(versions.len(), 20, "{dir}");
        // One slot rewritten, packed; the others as the fixture wrote them.
        assert_eq!(
            versions.iter().filter(|same| !**same).count(),
            usize::from(version == 1),
            "{dir}"
        );
        assert_eq!(
            json(&reopen(db).await.get_collected_metrics(&c).await.unwrap()),
            json(&window),
            "{dir}"
        );
    }
}
per_backend!(slot_rows_of_every_version_load);

/// `tests/fixtures/<name>` of this crate.
fn fixture_dir(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Runs the fixture writer `write` on a fresh SQLite database and a store open on it.
fn write_fixture_with(write: impl AsyncFnOnce(&TestDb, &AnyStateStore)) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let db = TestDb::new(Kind::Sqlite).await.unwrap();
        let store = AnyStateStore::open_with(&db.url, &StoreOptions::default())
            .await
            .unwrap();
        write(&db, &store).await;
    });
}

// Writes the slot-row fixture of the current format version, by hand only, when the format
// version changes (then add a new directory, never rewrite an old one):
// `cargo test -p autoscaler-state --test conformance write_slot_fixture -- --ignored`.
#[test]
#[ignore = "a fixture writer, not a test: run by hand with --ignored when the format version changes"]
fn write_slot_fixture() {
    write_fixture_with(async |db, store| {
        let c = ctx("fixture-slots");
        store
            .store_collected_metrics(&c, &common::metric_history(7, 20))
            .await
            .unwrap();
        store.flush(&c).await.unwrap();
        store.store_collected_metrics(&c, &slid_window()).await.unwrap();
        store.flush(&c).await.unwrap();
        let rows = db.state_rows("fixture-slots").await;
        let dir = fixture_dir(&format!("format-v{}-slots", autoscaler_state::FORMAT_VERSION));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("rows.json"),
            serde_json::to_string_pretty(&rows).unwrap() + "\n",
        )
        .unwrap();
    });
}

// Writes the fixture, by hand only, when the format version changes (then add a new directory,
// never rewrite an old one):
// `cargo test -p autoscaler-state --test conformance write_fixtures -- --ignored`.
#[test]
#[ignore = "a fixture writer, not a test: run by hand with --ignored when the format version changes"]
fn write_fixtures() {
    write_fixture_with(async |db, store| {
        store_all(store, &ctx("fixture-job"), &sample(4)).await;
        store.flush(&ctx("fixture-job")).await.unwrap();
        let c = ctx("fixture-gzip");
        store
            .store_collected_metrics(&c, &common::metric_history(5, 2000))
            .await
            .unwrap();
        store.flush(&c).await.unwrap();
        let dir = fixture_dir("format-v1");
        std::fs::create_dir_all(&dir).unwrap();
        for (state_type, value) in db.state_rows("fixture-job").await {
            std::fs::write(dir.join(format!("{state_type}.json")), value + "\n").unwrap();
        }
        let (_, value) = db.state_rows("fixture-gzip").await.remove(0);
        std::fs::write(dir.join("collectedMetrics-gzip.json"), value + "\n").unwrap();
    });
}

/// Makes the database refuse writes for a while; `restore` ends it.
enum Outage {
    None,
    /// Another connection holds SQLite's write lock.
    SqliteLock(sqlx::SqliteConnection),
    /// The store talks through a proxy that is down.
    Proxy(common::FaultProxy),
}

// Database down at flush: a typed Backend error and a Warning event; the cache keeps the changes
// and the next flush, with the database back, writes them (the reference drops them).
async fn flush_failure_keeps_the_cache_and_retries(db: &TestDb) {
    use sqlx::Connection as _;
    let options = StoreOptions {
        acquire_timeout: Duration::from_secs(2),
        busy_timeout: Duration::from_millis(200),
        ..StoreOptions::default()
    };
    let events = AnyEventHandler::in_memory();
    let c = ctx("job");
    let (store, mut outage) = match db.kind {
        Kind::Memory => return, // nothing to fail
        Kind::Sqlite => (AnyStateStore::open_with(&db.url, &options).await.unwrap(), Outage::None),
        Kind::Postgres | Kind::MySql => {
            let proxy = common::FaultProxy::start(db.server.clone().unwrap()).await;
            let url = db.url_via(&proxy.addr).unwrap();
            (
                AnyStateStore::open_with(&url, &options).await.unwrap(),
                Outage::Proxy(proxy),
            )
        }
    };
    store_all(&store, &c, &sample(1)).await;
    store.flush(&c).await.unwrap();
    store_all(&store, &c, &sample(2)).await;

    // Down.
    match &mut outage {
        Outage::Proxy(proxy) => proxy.set_down(true).await,
        _ => {
            let mut locker = sqlx::SqliteConnection::connect(&db.url).await.unwrap();
            sqlx::raw_sql("BEGIN EXCLUSIVE").execute(&mut locker).await.unwrap();
            outage = Outage::SqliteLock(locker);
        }
    }
    let started = std::time::Instant::now();
    let err = flush_or_warn(&store, &events, &c).await.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "bounded: {:?}",
        started.elapsed()
    );
    assert!(matches!(err, StateError::Backend { operation: "flush", .. }), "{err:?}");
    let warnings = events.events("job").await.unwrap();
    assert_eq!(warnings.len(), 1);
    assert_eq!(warnings[0].event_type, EventType::Warning);
    assert_eq!(warnings[0].reason, STATE_FLUSH_FAILED_REASON);
    assert!(warnings[0].message.contains("flush"), "{}", warnings[0].message);
    // The cache still serves the unflushed version.
    assert_all(&store, &c, &sample(2)).await;

    // Back up.
    match outage {
        Outage::Proxy(proxy) => {
            proxy.set_down(false).await;
            store.flush(&c).await.unwrap();
            drop(proxy);
        }
        Outage::SqliteLock(mut locker) => {
            sqlx::raw_sql("ROLLBACK").execute(&mut locker).await.unwrap();
            store.flush(&c).await.unwrap();
        }
        Outage::None => unreachable!(),
    }
    assert_all(&reopen(db).await, &c, &sample(2)).await;
}
per_backend!(flush_failure_keeps_the_cache_and_retries);

// A flush whose last row fails (a trigger rejects it) commits none of the job's rows: the
// database keeps the old version of every state, the cache the new one, and the next flush writes it.
async fn a_failing_row_rolls_back_the_whole_job_flush(db: &TestDb) {
    let (install, remove) = match db.kind {
        Kind::Memory => return,
        Kind::Sqlite => (
            "CREATE TRIGGER fail_ins BEFORE INSERT ON t_flink_autoscaler_state_store \
             WHEN NEW.state_type = 'delayedScaleDown' BEGIN SELECT RAISE(ABORT, 'injected failure'); END; \
             CREATE TRIGGER fail_upd BEFORE UPDATE ON t_flink_autoscaler_state_store \
             WHEN NEW.state_type = 'delayedScaleDown' BEGIN SELECT RAISE(ABORT, 'injected failure'); END;",
            "DROP TRIGGER fail_ins; DROP TRIGGER fail_upd;",
        ),
        Kind::Postgres => (
            "CREATE FUNCTION fail_row() RETURNS trigger AS $$ BEGIN \
             IF NEW.state_type = 'delayedScaleDown' THEN RAISE EXCEPTION 'injected failure'; END IF; \
             RETURN NEW; END $$ LANGUAGE plpgsql; \
             CREATE TRIGGER fail_row BEFORE INSERT OR UPDATE ON t_flink_autoscaler_state_store \
             FOR EACH ROW EXECUTE FUNCTION fail_row();",
            "DROP TRIGGER fail_row ON t_flink_autoscaler_state_store;",
        ),
        Kind::MySql => (
            "CREATE TRIGGER fail_ins BEFORE INSERT ON t_flink_autoscaler_state_store FOR EACH ROW BEGIN \
             IF NEW.state_type = 'delayedScaleDown' THEN \
             SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'injected failure'; END IF; END",
            "DROP TRIGGER fail_ins",
        ),
    };
    let store = open(db).await;
    let c = ctx("job");
    store_all(&store, &c, &sample(1)).await;
    store.flush(&c).await.unwrap();
    db.exec_raw(install).await;

    store_all(&store, &c, &sample(2)).await;
    let err = store.flush(&c).await.unwrap_err();
    assert!(err.to_string().contains("injected failure"), "{err}");
    assert_all(&reopen(db).await, &c, &sample(1)).await;
    assert_all(&store, &c, &sample(2)).await;

    db.exec_raw(remove).await;
    store.flush(&c).await.unwrap();
    assert_all(&reopen(db).await, &c, &sample(2)).await;
}
per_backend!(a_failing_row_rolls_back_the_whole_job_flush);

// A failed first load caches nothing: the next access retries and succeeds (reference
// testErrorHandlingDuringQuery).
async fn failed_load_is_retried(db: &TestDb) {
    if !matches!(db.kind, Kind::Postgres | Kind::MySql) {
        return;
    }
    let seed = open(db).await;
    let c = ctx("job");
    store_all(&seed, &c, &sample(1)).await;
    seed.flush(&c).await.unwrap();
    let proxy = common::FaultProxy::start(db.server.clone().unwrap()).await;
    let options = StoreOptions {
        acquire_timeout: Duration::from_secs(2),
        ..StoreOptions::default()
    };
    let store = AnyStateStore::open_with(&db.url_via(&proxy.addr).unwrap(), &options)
        .await
        .unwrap();
    proxy.set_down(true).await;
    let err = store.get_scaling_history(&c).await.unwrap_err();
    assert!(matches!(err, StateError::Backend { operation: "load", .. }), "{err:?}");
    proxy.set_down(false).await;
    assert_all(&store, &c, &sample(1)).await;
}
per_backend!(failed_load_is_retried);

// Two processes (two stores, two pools) writing the same jobs at once never fail on the unique
// index and never deadlock; each job ends up with one writer's complete version.
async fn two_stores_writing_the_same_jobs_are_safe(db: &TestDb) {
    if !db.persistent() {
        return;
    }
    let (a, b) = (open(db).await, open(db).await);
    let jobs: Vec<Ctx> = (0..6).map(|i| ctx(&format!("shared-{i}"))).collect();
    let writer = |store: AnyStateStore, base: u32| {
        let jobs = jobs.clone();
        tokio::spawn(async move {
            for round in 0..8 {
                for c in &jobs {
                    store_all(&store, c, &sample(base + round)).await;
                    store.flush(c).await.unwrap();
                }
            }
        })
    };
    let (ra, rb) = tokio::join!(writer(a, 100), writer(b, 200));
    ra.unwrap();
    rb.unwrap();
    let check = reopen(db).await;
    for c in &jobs {
        let version = *check
            .get_parallelism_overrides(c)
            .await
            .unwrap()
            .values()
            .next()
            .unwrap();
        assert!(
            version == 107 || version == 207,
            "last round of a writer, got {version}"
        );
        assert_all(&check, c, &sample(version)).await;
        assert_eq!(db.state_types(&c.job_key).await.len(), 6);
    }
}
per_backend!(two_stores_writing_the_same_jobs_are_safe);

// The evaluated metrics are kept in the store's memory and never written: the same store
// returns them, a store opened anew has none, and a row an earlier release wrote is deleted by
// the job's next flush.
async fn evaluated_metrics_stay_in_memory(db: &TestDb) {
    let store = open(db).await;
    let c = ctx("job");
    let s = sample(5);
    store_all(&store, &c, &s).await;
    store.flush(&c).await.unwrap();
    assert_eq!(
        json(&store.get_evaluated_metrics(&c).await.unwrap()),
        json(&Some(&*s.evaluated))
    );
    if !db.persistent() {
        return;
    }
    assert!(!db.state_types("job").await.contains(&"evaluatedMetrics".to_owned()));
    assert_eq!(reopen(db).await.get_evaluated_metrics(&c).await.unwrap(), None);

    let legacy = ctx("legacy");
    let earlier = r#"{"v":1,"state":{"vertices":{},"global":{}}}"#;
    db.insert_state_row("legacy", "evaluatedMetrics", earlier).await;
    let store = reopen(db).await;
    assert_eq!(store.get_evaluated_metrics(&legacy).await.unwrap(), None);
    store.store_scaling_tracking(&legacy, &s.tracking).await.unwrap();
    store.flush(&legacy).await.unwrap();
    assert_eq!(db.state_types("legacy").await, vec!["scalingTracking".to_owned()]);
}
per_backend!(evaluated_metrics_stay_in_memory);

// Many jobs flushing at once share transactions (the group writer) and each ends up with
// exactly its own rows: their windows grow and trim over rounds, other states change now and
// then, and a job whose window another process rewrote meanwhile is written whole again.
async fn concurrent_flushes_are_grouped_and_exact(db: &TestDb) {
    let store = std::sync::Arc::new(open(db).await);
    let jobs: Vec<Ctx> = (0..150).map(|i| ctx(&format!("grouped-{i}"))).collect();
    for round in 0..4u32 {
        if round == 2 && db.persistent() {
            // Another process writes job 7's window behind this store's back.
            let other = reopen(db).await;
            other
                .store_collected_metrics(&jobs[7], &common::metric_history(90, 3))
                .await
                .unwrap();
            other.flush(&jobs[7]).await.unwrap();
        }
        let tasks: Vec<_> = jobs
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let (store, c) = (std::sync::Arc::clone(&store), c.clone());
                tokio::spawn(async move {
                    let version = round * 1000 + i as u32;
                    // The window the store holds, one snapshot newer and the oldest trimmed.
                    let mut window = store.get_collected_metrics(&c).await.unwrap();
                    if window.is_empty() {
                        window = common::metric_history(i as u32, 6);
                    }
                    let newest = window.iter().next_back().unwrap().1.clone();
                    window.insert(common::t(1_000 + i64::from(round)), newest);
                    window.remove_before(common::t(10 * i64::from(round) + 1));
                    store.store_collected_metrics(&c, &window).await.unwrap();
                    if (i as u32 + round).is_multiple_of(3) {
                        store
                            .store_parallelism_overrides(&c, &sample(version).overrides)
                            .await
                            .unwrap();
                    }
                    store.flush(&c).await.unwrap();
                    (c, window)
                })
            })
            .collect();
        let mut written = Vec::new();
        for task in tasks {
            written.push(task.await.unwrap());
        }
        if !db.persistent() {
            continue;
        }
        let check = reopen(db).await;
        for (i, (c, window)) in written.iter().enumerate() {
            assert_eq!(
                json(&check.get_collected_metrics(c).await.unwrap()),
                json(window),
                "{} round {round}",
                c.job_key
            );
            let overrides = check.get_parallelism_overrides(c).await.unwrap();
            let last = (0..=round).rev().find(|r| (i as u32 + r).is_multiple_of(3));
            let expected = last.map_or_else(ParallelismOverrides::new, |r| sample(r * 1000 + i as u32).overrides);
            assert_eq!(overrides, expected, "{} round {round}", c.job_key);
            let snapshot_rows = db
                .state_rows(&c.job_key)
                .await
                .iter()
                .filter(|(t, _)| t.starts_with("collectedMetrics#"))
                .count();
            assert_eq!(snapshot_rows, window.len(), "{} round {round}", c.job_key);
        }
    }
}
per_backend!(concurrent_flushes_are_grouped_and_exact);

// Processes starting at once on a fresh database create the schema once and all open.
async fn concurrent_opens_migrate_once(db: &TestDb) {
    let (a, b, c, d) = tokio::join!(
        AnyStateStore::open(&db.url),
        AnyStateStore::open(&db.url),
        AnyEventHandler::open(&db.url),
        AnyStateStore::open(&db.url)
    );
    let (a, _b, _c, _d) = (a.unwrap(), b.unwrap(), c.unwrap(), d.unwrap());
    let job = ctx("job");
    store_all(&a, &job, &sample(1)).await;
    a.flush(&job).await.unwrap();
    if db.persistent() {
        assert_all(&reopen(db).await, &job, &sample(1)).await;
    }
}
per_backend!(concurrent_opens_migrate_once);

// ---- event handler ----

async fn event_handler(db: &TestDb) -> (AnyEventHandler, std::sync::Arc<autoscaler_core::ManualClock>) {
    let now = std::sync::Arc::new(autoscaler_core::ManualClock::new(common::t(0)));
    let handler = AnyEventHandler::open(&db.url).await.unwrap().with_clock(now.clone());
    (handler, now)
}

// Reference testEventWithIntervalAndMessageKey: within the interval (anchored at create_time) the
// row is updated (count 2, new message); after it, a new row.
async fn events_dedup_within_the_interval(db: &TestDb) {
    let (handler, now) = event_handler(db).await;
    let c = ctx("it's-a-job");
    let interval = Some(Duration::from_secs(30 * 60));
    handler
        .handle_event(
            &c,
            EventType::Warning,
            "IneffectiveScaling",
            "first",
            Some("k"),
            interval,
        )
        .await;
    now.set(common::t(20 * 60));
    handler
        .handle_event(
            &c,
            EventType::Warning,
            "IneffectiveScaling",
            "second",
            Some("k"),
            interval,
        )
        .await;
    let events = handler.events("it's-a-job").await.unwrap();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].count, 2);
    assert_eq!(events[0].message, "second");
    assert_eq!(events[0].create_time, common::t(0));
    assert_eq!(events[0].update_time, common::t(20 * 60));

    // 40 minutes after the first create_time: outside, although only 20 after the update.
    now.set(common::t(40 * 60));
    handler
        .handle_event(
            &c,
            EventType::Warning,
            "IneffectiveScaling",
            "third",
            Some("k"),
            interval,
        )
        .await;
    let events = handler.events("it's-a-job").await.unwrap();
    assert_eq!(events.len(), 2);
    assert_eq!((events[1].count, events[1].message.as_str()), (1, "third"));
    assert_eq!(events[1].create_time, common::t(40 * 60));
    assert_eq!(events[0].event_type, EventType::Warning);
    assert!(events[0].id < events[1].id);

    // Exactly at create_time + interval: outside (create_time > now - interval is false).
    now.set(common::t(70 * 60));
    handler
        .handle_event(
            &c,
            EventType::Warning,
            "IneffectiveScaling",
            "fourth",
            Some("k"),
            interval,
        )
        .await;
    assert_eq!(handler.events("it's-a-job").await.unwrap().len(), 3);
}
per_backend!(events_dedup_within_the_interval);

// No interval: always a new row. Without a message key, the message is the identity. Other jobs'
// events are not returned.
async fn events_without_interval_always_insert(db: &TestDb) {
    let (handler, now) = event_handler(db).await;
    let c = ctx("job");
    for _ in 0..2 {
        handler
            .handle_event(&c, EventType::Normal, "Reason", "msg", None, None)
            .await;
    }
    now.set(common::t(1));
    let interval = Some(Duration::from_secs(60));
    handler
        .handle_event(&c, EventType::Normal, "Other", "m1", None, interval)
        .await;
    handler
        .handle_event(&c, EventType::Normal, "Other", "m1", None, interval)
        .await;
    handler
        .handle_event(&c, EventType::Normal, "Other", "m2", None, interval)
        .await;
    handler
        .handle_event(&ctx("job2"), EventType::Normal, "Other", "m1", None, interval)
        .await;
    let events = handler.events("job").await.unwrap();
    let summary: Vec<(&str, &str, u32)> = events
        .iter()
        .map(|e| (e.reason.as_str(), e.message.as_str(), e.count))
        .collect();
    assert_eq!(
        summary,
        vec![
            ("Reason", "msg", 1),
            ("Reason", "msg", 1),
            ("Other", "m1", 2),
            ("Other", "m2", 1)
        ]
    );
    assert_eq!(handler.events("job2").await.unwrap().len(), 1);
    assert!(handler.events("nobody").await.unwrap().is_empty());

    // TTL cleanup: everything created before now - ttl goes.
    now.set(common::t(100));
    assert_eq!(handler.delete_expired(Duration::from_secs(99)).await.unwrap(), 2);
    assert_eq!(handler.events("job").await.unwrap().len(), 2);
    assert_eq!(handler.events("job2").await.unwrap().len(), 1);
}
per_backend!(events_without_interval_always_insert);

// The TTL cleaner deletes expired events periodically and leaves fresh ones.
async fn ttl_cleaner_deletes_expired_events(db: &TestDb) {
    let (handler, now) = event_handler(db).await;
    let handler = std::sync::Arc::new(handler);
    let c = ctx("job");
    handler
        .handle_event(&c, EventType::Normal, "Old", "m", None, None)
        .await;
    now.set(common::t(3600));
    handler
        .handle_event(&c, EventType::Normal, "New", "m", None, None)
        .await;
    let cleaner = handler
        .clone()
        .spawn_ttl_cleaner(Duration::from_secs(1800), Duration::from_millis(20));
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while handler.events("job").await.unwrap().len() != 1 {
        assert!(std::time::Instant::now() < deadline, "the cleaner did not run");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cleaner.abort();
    assert_eq!(handler.events("job").await.unwrap()[0].reason, "New");
}
per_backend!(ttl_cleaner_deletes_expired_events);

// Scaling reports: executed ones never dedup; unexecuted ones dedup by parallelism hash, and a
// changed recommendation is a new row (reference testScalingEventDeduplication /
// testScalingEventWithParallelismChange).
async fn scaling_reports_dedup_by_parallelism(db: &TestDb) {
    use autoscaler_core::ScalingSummary;
    use autoscaler_core::{
        SCALING_SUMMARY_HEADER_SCALING_EXECUTION_DISABLED, SCALING_SUMMARY_HEADER_SCALING_EXECUTION_ENABLED,
    };
    let (handler, now) = event_handler(db).await;
    let c = ctx("job");
    let summaries = |new: u32| {
        autoscaler_metrics::VertexMap::from([(
            autoscaler_metrics::VertexId::new("v1"),
            ScalingSummary {
                current_parallelism: 2,
                new_parallelism: new,
                metrics: common::evaluated_vertex(1),
            },
        )])
    };
    let interval = Duration::from_secs(600);
    let disabled = format!("{SCALING_SUMMARY_HEADER_SCALING_EXECUTION_DISABLED}[k=false]");
    let report = |new: u32, header: &str| {
        let summaries = summaries(new);
        let handler = &handler;
        let (c, header) = (&c, header.to_owned());
        async move {
            let text = autoscaler_core::scaling_report(&summaries, &header);
            let report = autoscaler_core::ScalingReport::new(&summaries, &header, &text, None, interval);
            handler.handle_scaling_event(c, &report).await;
        }
    };
    report(4, &disabled).await;
    now.set(common::t(1));
    report(4, &disabled).await;
    report(5, &disabled).await;
    report(4, SCALING_SUMMARY_HEADER_SCALING_EXECUTION_ENABLED).await;
    report(4, SCALING_SUMMARY_HEADER_SCALING_EXECUTION_ENABLED).await;
    let events = handler.events("job").await.unwrap();
    let counts: Vec<u32> = events.iter().map(|e| e.count).collect();
    assert_eq!(counts, vec![2, 1, 1, 1], "{events:#?}");
    assert!(
        events
            .iter()
            .all(|e| e.reason == "ScalingReport" && e.event_type == EventType::Normal)
    );
    assert!(
        events[0].message.contains("Parallelism 2 -> 4"),
        "{}",
        events[0].message
    );
    assert!(events[1].message.contains("Parallelism 2 -> 5"));
    assert!(
        events[2]
            .message
            .starts_with(SCALING_SUMMARY_HEADER_SCALING_EXECUTION_ENABLED)
    );
}
per_backend!(scaling_reports_dedup_by_parallelism);

// The same handler's key is the same in a new process: dedup works across restarts.
async fn event_dedup_survives_a_restart(db: &TestDb) {
    if !db.persistent() {
        return;
    }
    let c = ctx("job");
    let interval = Some(Duration::from_secs(60));
    let (first, _) = event_handler(db).await;
    first
        .handle_event(&c, EventType::Normal, "R", "m", Some("k"), interval)
        .await;
    first.close().await;
    let (second, _) = event_handler(db).await;
    second
        .handle_event(&c, EventType::Normal, "R", "m", Some("k"), interval)
        .await;
    let events = second.events("job").await.unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].count, 2);
    let _ = MetricHistory::new();
}
per_backend!(event_dedup_survives_a_restart);
