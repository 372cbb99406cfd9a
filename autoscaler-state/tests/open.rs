//! Opening stores and event handlers from the URLs the CLI's `--state` takes.

#![allow(missing_docs, clippy::unwrap_used)]

mod common;

use autoscaler_core::state::{AutoScalerStateStore, StateError};
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
