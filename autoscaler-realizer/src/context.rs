//! [`FlinkRestContext`]: how the adapters reach a job's Flink REST client from its context.

use crate::rest::FlinkRestClient;
use autoscaler_core::BasicJobContext;

/// A job context that carries a [`FlinkRestClient`] for the job's cluster. Implemented for
/// [`BasicJobContext`] with a `FlinkRestClient` as its platform client (what
/// [`crate::FlinkClusterJobListFetcher`] produces); implement it on your own context type to use the
/// REST collector and realizer with it.
pub trait FlinkRestContext {
    /// The client of the cluster the job runs on.
    fn rest_client(&self) -> &FlinkRestClient;
}

impl<K> FlinkRestContext for BasicJobContext<K, FlinkRestClient> {
    fn rest_client(&self) -> &FlinkRestClient {
        &self.client
    }
}
