//! The per-job cache in front of a database (the reference's `JobStateView`): typed values plus a
//! flush state per state type.

use crate::codec::{StateType, StateValue};
use std::collections::BTreeMap;

/// Where one state type of one job stands relative to the database (the reference's `State`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FlushState {
    /// No value in the cache, no row in the database.
    NotNeeded,
    /// A value in the cache, no row yet.
    NeedsCreate,
    /// A value in the cache that differs from the row.
    NeedsUpdate,
    /// The cached value is the row.
    UpToDate,
    /// No value in the cache, a row to delete.
    NeedsDelete,
}

impl FlushState {
    /// Transition on `put` (reference table: from NOT_NEEDED/NEEDS_CREATE -> NEEDS_CREATE, else NEEDS_UPDATE).
    fn after_put(self) -> Self {
        match self {
            FlushState::NotNeeded | FlushState::NeedsCreate => FlushState::NeedsCreate,
            FlushState::NeedsUpdate | FlushState::UpToDate | FlushState::NeedsDelete => FlushState::NeedsUpdate,
        }
    }

    /// Transition on `remove` (reference: from NOT_NEEDED/NEEDS_CREATE -> NOT_NEEDED, else NEEDS_DELETE).
    fn after_remove(self) -> Self {
        match self {
            FlushState::NotNeeded | FlushState::NeedsCreate => FlushState::NotNeeded,
            FlushState::NeedsUpdate | FlushState::UpToDate | FlushState::NeedsDelete => FlushState::NeedsDelete,
        }
    }

    /// Transition on a successful flush (reference: NOT_NEEDED/NEEDS_DELETE -> NOT_NEEDED, else UP_TO_DATE).
    fn after_flush(self) -> Self {
        match self {
            FlushState::NotNeeded | FlushState::NeedsDelete => FlushState::NotNeeded,
            FlushState::NeedsCreate | FlushState::NeedsUpdate | FlushState::UpToDate => FlushState::UpToDate,
        }
    }
}

#[derive(Debug, Clone)]
struct Slot {
    value: Option<StateValue>,
    state: FlushState,
}

/// The writes a flush must make for one job, in one transaction.
#[derive(Debug, Default)]
pub(crate) struct PendingWrites<'a> {
    /// Values to insert or update.
    pub(crate) upserts: Vec<&'a StateValue>,
    /// Rows to delete.
    pub(crate) deletes: Vec<StateType>,
}

impl PendingWrites<'_> {
    pub(crate) fn is_empty(&self) -> bool {
        self.upserts.is_empty() && self.deletes.is_empty()
    }
}

/// Cached states of one job. A state type without a slot is NOT_NEEDED.
#[derive(Debug, Clone, Default)]
pub(crate) struct JobView {
    slots: BTreeMap<StateType, Slot>,
}

impl JobView {
    /// A view of rows just read from the database: each decodable row is UP_TO_DATE; a row that does
    /// not decode is dropped and marked NEEDS_DELETE, logging why (the reference discards an
    /// undeserializable state the same way, `testDiscardInvalidHistory`).
    pub(crate) fn from_rows(job_key: &str, rows: impl IntoIterator<Item = (String, String)>) -> Self {
        let mut slots = BTreeMap::new();
        for (identifier, text) in rows {
            let Some(state_type) = StateType::from_identifier(&identifier) else {
                // A newer release may add state types; ignoring them keeps this one running.
                tracing::warn!(job_key, state_type = %identifier, "ignoring a state row of unknown type");
                continue;
            };
            let slot = match StateValue::decode(state_type, &text) {
                Ok(value) => Slot {
                    value: Some(value),
                    state: FlushState::UpToDate,
                },
                Err(error) => {
                    tracing::error!(job_key, %state_type, %error, "discarding a state row that cannot be read");
                    Slot {
                        value: None,
                        state: FlushState::NeedsDelete,
                    }
                }
            };
            slots.insert(state_type, slot);
        }
        JobView { slots }
    }

    pub(crate) fn get(&self, state_type: StateType) -> Option<&StateValue> {
        self.slots.get(&state_type).and_then(|s| s.value.as_ref())
    }

    pub(crate) fn put(&mut self, value: StateValue) {
        let state_type = value.state_type();
        let state = self.flush_state(state_type).after_put();
        self.slots.insert(
            state_type,
            Slot {
                value: Some(value),
                state,
            },
        );
    }

    pub(crate) fn remove(&mut self, state_type: StateType) {
        let state = self.flush_state(state_type).after_remove();
        if state == FlushState::NotNeeded {
            self.slots.remove(&state_type);
        } else {
            self.slots.insert(state_type, Slot { value: None, state });
        }
    }

    pub(crate) fn clear(&mut self) {
        for state_type in StateType::ALL {
            self.remove(state_type);
        }
    }

    pub(crate) fn flush_state(&self, state_type: StateType) -> FlushState {
        self.slots.get(&state_type).map_or(FlushState::NotNeeded, |s| s.state)
    }

    /// What a flush has to write; empty when every state is UP_TO_DATE or NOT_NEEDED.
    pub(crate) fn pending(&self) -> PendingWrites<'_> {
        let mut pending = PendingWrites::default();
        for (state_type, slot) in &self.slots {
            match (slot.state, &slot.value) {
                (FlushState::NeedsCreate | FlushState::NeedsUpdate, Some(value)) => pending.upserts.push(value),
                (FlushState::NeedsDelete, _) => pending.deletes.push(*state_type),
                _ => {}
            }
        }
        pending
    }

    /// Records that the pending writes reached the database.
    pub(crate) fn mark_flushed(&mut self) {
        self.slots.retain(|_, slot| {
            slot.state = slot.state.after_flush();
            slot.state != FlushState::NotNeeded
        });
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use autoscaler_core::state::ConfigChanges;
    use autoscaler_metrics::MetricHistory;

    fn metrics() -> StateValue {
        StateValue::CollectedMetrics(MetricHistory::new())
    }
    fn changes(key: &str) -> StateValue {
        let mut c = ConfigChanges::default();
        c.removals.insert(key.to_owned());
        StateValue::ConfigOverrides(c)
    }

    fn counts(view: &JobView) -> (usize, usize) {
        let p = view.pending();
        (p.upserts.len(), p.deletes.len())
    }

    // The reference's JobStateViewTest.testAllOperations / testAvoidUnnecessaryFlushes, as transitions.
    #[test]
    fn put_flush_update_remove_follow_the_reference_state_machine() {
        let mut view = JobView::default();
        assert_eq!(view.flush_state(StateType::CollectedMetrics), FlushState::NotNeeded);
        view.put(metrics());
        assert_eq!(view.flush_state(StateType::CollectedMetrics), FlushState::NeedsCreate);
        view.put(metrics());
        assert_eq!(view.flush_state(StateType::CollectedMetrics), FlushState::NeedsCreate);
        assert_eq!(counts(&view), (1, 0));
        view.mark_flushed();
        assert_eq!(view.flush_state(StateType::CollectedMetrics), FlushState::UpToDate);
        assert!(view.pending().is_empty(), "a second flush has nothing to do");

        view.put(metrics());
        assert_eq!(view.flush_state(StateType::CollectedMetrics), FlushState::NeedsUpdate);
        view.mark_flushed();
        view.remove(StateType::CollectedMetrics);
        assert_eq!(view.flush_state(StateType::CollectedMetrics), FlushState::NeedsDelete);
        assert!(view.get(StateType::CollectedMetrics).is_none());
        view.put(metrics());
        assert_eq!(view.flush_state(StateType::CollectedMetrics), FlushState::NeedsUpdate);
        view.remove(StateType::CollectedMetrics);
        assert_eq!(counts(&view), (0, 1));
        view.mark_flushed();
        assert_eq!(view.flush_state(StateType::CollectedMetrics), FlushState::NotNeeded);
        view.clear();
        assert!(view.pending().is_empty(), "clearing nothing flushes nothing");
    }

    #[test]
    fn create_then_remove_before_flush_writes_nothing() {
        let mut view = JobView::default();
        view.put(changes("a"));
        view.remove(StateType::ConfigOverrides);
        assert_eq!(view.flush_state(StateType::ConfigOverrides), FlushState::NotNeeded);
        assert!(view.pending().is_empty());
    }

    // JobStateViewTest.testCreateDeleteAndUpdateWorkTogether: one delete, one update, one create.
    #[test]
    fn create_update_and_delete_flush_together() {
        let mut view = JobView::default();
        view.put(metrics());
        view.put(changes("a"));
        view.mark_flushed();
        view.remove(StateType::CollectedMetrics);
        view.put(changes("b"));
        view.put(StateValue::ParallelismOverrides(Default::default()));
        assert_eq!(counts(&view), (2, 1));
        assert_eq!(view.get(StateType::ConfigOverrides), Some(&changes("b")));
    }

    #[test]
    fn an_unreadable_row_is_discarded_and_deleted_on_flush() {
        let rows = vec![
            ("scalingHistory".to_owned(), "{broken".to_owned()),
            ("configOverrides".to_owned(), changes("x").encode(usize::MAX).unwrap()),
            ("someFutureType".to_owned(), "{}".to_owned()),
        ];
        let view = JobView::from_rows("job", rows);
        assert!(view.get(StateType::ScalingHistory).is_none());
        assert_eq!(view.flush_state(StateType::ScalingHistory), FlushState::NeedsDelete);
        assert_eq!(view.get(StateType::ConfigOverrides), Some(&changes("x")));
        assert_eq!(counts(&view), (0, 1));
    }
}
