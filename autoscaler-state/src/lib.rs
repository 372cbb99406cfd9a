//! # autoscaler-state
//!
//! State stores for flink-autoscaler-rs: in-memory, SQLite (the embedded default), PostgreSQL and MySQL.
