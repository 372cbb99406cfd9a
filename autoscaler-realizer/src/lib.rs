//! # autoscaler-realizer
//!
//! Adapters to a real Flink cluster: the REST client, metrics collection over REST, the rescale-API
//! realizer, the cluster job list fetcher and the cooldown governor.
