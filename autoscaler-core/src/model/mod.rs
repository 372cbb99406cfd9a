//! The plain domain data of the autoscaler: the per-job state a cycle reads and writes
//! ([`state`]) and the vocabulary of its events ([`event`]). The ports (the state store and
//! event handler traits) and the decision code import these types; nothing here imports a port or
//! the engine, so the data has no circle through them.

pub mod event;
pub mod state;
