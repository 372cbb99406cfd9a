//! Opening stores and event handlers from the URLs the CLI's `--state` takes.

#![allow(missing_docs, clippy::unwrap_used)]

mod common;

use autoscaler_core::{AutoScalerStateStore, StateError};
use autoscaler_state::{StateUrl, open_event_handler, open_state_store};
use common::{ctx, sample};

#[tokio::test]
async fn every_url_form_opens_the_right_store() {
    let dir = tempfile::tempdir().unwrap();
    let memory = open_state_store("memory").await.unwrap();
    assert!(memory.is_in_memory());
    let path = dir.path().join("sub-dir-free.db");
    let url = format!("sqlite:{}", path.display());
    let file = open_state_store(&url).await.unwrap();
    assert!(!file.is_in_memory());
    assert!(path.exists(), "the SQLite file is created");
    assert!(matches!(file.url(), StateUrl::Sqlite(_)));

    // `sqlite::memory:` is one private database that lives as long as the store.
    let private = open_state_store("sqlite::memory:").await.unwrap();
    let c = ctx("job");
    private
        .store_parallelism_overrides(&c, &sample(3).overrides)
        .await
        .unwrap();
    private.flush(&c).await.unwrap();
    AutoScalerStateStore::<String, common::Ctx>::remove_info_from_cache(&private, &"job".to_owned()).await;
    assert_eq!(
        private.get_parallelism_overrides(&c).await.unwrap(),
        sample(3).overrides
    );

    assert!(
        open_event_handler("memory")
            .await
            .unwrap()
            .events("x")
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        open_event_handler(&url)
            .await
            .unwrap()
            .events("x")
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn bad_urls_are_typed_errors_naming_the_url() {
    let err = open_state_store("redis://127.0.0.1:6379").await.unwrap_err();
    assert!(matches!(err, StateError::Backend { operation: "open", .. }));
    assert!(err.to_string().contains("redis://127.0.0.1:6379"), "{err}");
    // A directory that does not exist: the file cannot be created.
    let err = open_state_store("sqlite:/nonexistent-dir/x/state.db")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("/nonexistent-dir/x/state.db"), "{err}");
    // Nothing listens on port 1: fails within the acquire timeout, naming the URL without password.
    let options = autoscaler_state::StoreOptions {
        acquire_timeout: std::time::Duration::from_secs(2),
        ..Default::default()
    };
    let err = autoscaler_state::AnyStateStore::open_with("postgres://u:secret@127.0.0.1:1/db", &options)
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("postgres://u:***@127.0.0.1:1/db") && !message.contains("secret"),
        "{message}"
    );
}

#[tokio::test]
async fn a_sqlite_url_without_a_path_is_refused() {
    // `sqlite:` opened a temporary database deleted on close: the state was lost without a word.
    for url in ["sqlite:", "sqlite://", "sqlite:?mode=rwc", "sqlite:  "] {
        let err = open_state_store(url).await.unwrap_err();
        assert!(err.to_string().contains("names no file"), "{url}: {err}");
    }
}

/// A table of someone else's named like ours: `CREATE TABLE IF NOT EXISTS` kept it, and every
/// flush then failed (or wrote into it). Opening the store refuses it, naming the table.
async fn foreign_table_is_refused(kind: common::Kind) {
    let Some(db) = common::TestDb::new(kind).await else {
        return;
    };
    if kind == common::Kind::Sqlite {
        // Create the file first: the helper connects without `mode=rwc`.
        use sqlx::Connection;
        let mut conn = sqlx::SqliteConnection::connect(&format!("{}?mode=rwc", db.url))
            .await
            .unwrap();
        sqlx::raw_sql("SELECT 1").execute(&mut conn).await.unwrap();
        conn.close().await.unwrap();
    }
    db.exec_raw("CREATE TABLE t_flink_autoscaler_state_store (name VARCHAR(20), price INTEGER)")
        .await;
    let err = open_state_store(&db.url).await.unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("t_flink_autoscaler_state_store is not the autoscaler's"),
        "{message}"
    );
    db.cleanup().await;
}

#[tokio::test]
async fn a_foreign_table_with_our_name_is_refused_sqlite() {
    foreign_table_is_refused(common::Kind::Sqlite).await;
}

#[tokio::test]
async fn a_foreign_table_with_our_name_is_refused_postgres() {
    foreign_table_is_refused(common::Kind::Postgres).await;
}

#[tokio::test]
async fn a_foreign_table_with_our_name_is_refused_mysql() {
    foreign_table_is_refused(common::Kind::MySql).await;
}

/// A row whose gzip expands past [`autoscaler_state::MAX_DECOMPRESSED_STATE_BYTES`]: 65 MiB of JSON
/// whitespace around a valid state compress to about 65 KiB. Without the bound it was decompressed
/// in full (the finding: 8.3 MB of gzip, 6 GiB in memory) and even read as valid; now the row is
/// discarded as unreadable, like any other undecodable state.
#[tokio::test]
async fn a_decompression_bomb_row_is_discarded_within_the_limit() {
    use base64::Engine as _;
    use std::io::Write as _;
    let Some(db) = common::TestDb::new(common::Kind::Sqlite).await else {
        return;
    };
    // Creates the tables.
    drop(open_state_store(&db.url).await.unwrap());
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let spaces = vec![b' '; 1 << 20];
    for _ in 0..65 {
        encoder.write_all(&spaces).unwrap();
    }
    encoder.write_all(br#"{"v1": 7}"#).unwrap();
    let gzip = base64::engine::general_purpose::STANDARD.encode(encoder.finish().unwrap());
    assert!(gzip.len() < 1 << 20, "{}", gzip.len());
    let row = format!(r#"{{"v":1,"gzip":"{gzip}"}}"#);
    assert!(autoscaler_state::decode_state_value(autoscaler_state::StateType::ParallelismOverrides, &row).is_err());
    db.insert_state_row("job", "parallelismOverrides", &row).await;
    let store = open_state_store(&db.url).await.unwrap();
    let overrides = store.get_parallelism_overrides(&ctx("job")).await.unwrap();
    assert!(overrides.is_empty(), "{overrides:?}");
}
