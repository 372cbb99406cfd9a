//! Stores and reads back a parallelism override in the in-memory store, and checks that a
//! database URL names the feature this build leaves out. No async runtime: the in-memory store's
//! futures are ready at their first poll.

use autoscaler_core::config::Configuration;
use autoscaler_core::{AutoScalerStateStore, BasicJobContext, StateError};
use autoscaler_state::{AnyStateStore, InMemoryStateStore};
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

/// Polls `future` to completion on this thread (enough for futures that never wait on I/O).
fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        std::thread::yield_now();
    }
}

fn main() -> Result<(), StateError> {
    let store = InMemoryStateStore::new();
    let ctx = BasicJobContext::new("job-1".to_owned(), Configuration::new(), ());
    let mut overrides = block_on(store.get_parallelism_overrides(&ctx))?;
    overrides.insert("bc764cd8ddf7a0cff126f51c16239658".into(), 4);
    block_on(store.store_parallelism_overrides(&ctx, &overrides))?;
    block_on(store.flush(&ctx))?;
    assert_eq!(block_on(store.get_parallelism_overrides(&ctx))?, overrides);

    let Err(error) = block_on(AnyStateStore::open("sqlite:state.db")) else {
        panic!("a build without the sqlite feature opened a SQLite store");
    };
    assert!(error.to_string().contains("`sqlite` feature"), "{error}");
    println!("embedded in-memory store: ok; sqlite URL refused: {error}");
    Ok(())
}
