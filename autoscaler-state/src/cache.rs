//! The per-job cache in front of a database (the reference's `JobStateView`): typed values plus a
//! flush state per state type.
//!
//! The metric window is not one row but one row per snapshot (`collectedMetrics@<instant>`) plus an
//! index row (`collectedMetricsIndex`) naming the generation of the last flush that wrote the
//! window. A flush after one new snapshot writes that snapshot's row, deletes the rows of the
//! trimmed ones and replaces the index, provided the index is still the one this process last saw
//! (so the rows are the ones it knows); otherwise (another process wrote the job, or an earlier
//! release left one whole-window `collectedMetrics` row) it writes every row of the window again.
//! Either way in one transaction with the job's other rows.

use crate::codec::{
    StateType, StateValue, decode_snapshot, encode_snapshot, encode_window_index, snapshot_identifier, snapshot_instant,
};
use crate::db::{JobWrites, WINDOW_INDEX, WindowWrite};
use autoscaler_core::StateError;
use autoscaler_metrics::{CollectedMetrics, MetricHistory, SharedSnapshot};
use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};

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

/// The metric window as the database holds it, as this process last read or wrote it.
#[derive(Debug, Clone, Default)]
struct StoredWindow {
    /// The snapshot rows, sharing their snapshots with the cached window they were written from.
    rows: StoredRows,
    /// The index row's value; `None` when there is none.
    index: Option<String>,
    /// An earlier release's whole-window `collectedMetrics` row is there.
    legacy_row: bool,
}

/// The snapshot rows of a [`StoredWindow`], in time order.
#[derive(Debug, Clone)]
enum StoredRows {
    /// Those of a window as it was written or read whole: a clone of it, which costs a few
    /// pointers rather than a list of its samples.
    Window(MetricHistory),
    /// Some of a window's snapshots (the database held an earlier release's whole-window row
    /// beside them).
    Listed(Vec<(DateTime<Utc>, SharedSnapshot)>),
}

impl Default for StoredRows {
    fn default() -> Self {
        Self::Listed(Vec::new())
    }
}

impl StoredRows {
    /// The rows in time order.
    fn iter(&self) -> impl Iterator<Item = (DateTime<Utc>, &SharedSnapshot)> {
        let (window, listed) = match self {
            Self::Window(history) => (Some(history.shared()), None),
            Self::Listed(rows) => (None, Some(rows.iter().map(|(at, s)| (*at, s)))),
        };
        window.into_iter().flatten().chain(listed.into_iter().flatten())
    }
}

/// What a flush wrote, for [`JobView::mark_flushed`].
#[derive(Debug)]
pub(crate) struct Flushed {
    /// The index row written, if the window was.
    index: Option<String>,
    /// Bytes of `state_value` written (at most; a window rewritten whole writes more).
    pub(crate) bytes: u64,
    /// The part of `bytes` that is the window: its new snapshot rows and its index row.
    pub(crate) window_bytes: u64,
}

/// Cached states of one job. A state type without a slot is NOT_NEEDED.
#[derive(Debug, Clone, Default)]
pub(crate) struct JobView {
    slots: BTreeMap<StateType, Slot>,
    window: StoredWindow,
    /// Rows of state types this release does not write ([`StateType::is_written`]) that an
    /// earlier one left: the next flush deletes them.
    stale_rows: BTreeSet<StateType>,
}

/// A generation no other flush (of this process or another) uses.
fn new_generation() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = Utc::now().timestamp_nanos_opt().unwrap_or_default();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{:x}-{nanos:x}-{n:x}", std::process::id())
}

impl JobView {
    /// A view of rows just read from the database: each decodable row is UP_TO_DATE; a row that does
    /// not decode is dropped and marked NEEDS_DELETE, logging why (the reference discards an
    /// undeserializable state the same way, `testDiscardInvalidHistory`).
    pub(crate) fn from_rows(job_key: &str, rows: impl IntoIterator<Item = (String, String)>) -> Self {
        let mut slots = BTreeMap::new();
        let mut window = StoredWindow::default();
        let mut snapshots: Vec<(DateTime<Utc>, CollectedMetrics)> = Vec::new();
        let mut stale_rows = BTreeSet::new();
        for (identifier, text) in rows {
            if identifier == WINDOW_INDEX {
                window.index = Some(text);
                continue;
            }
            if let Some(at) = snapshot_instant(&identifier) {
                match decode_snapshot(&text) {
                    Ok(snapshot) => snapshots.push((at, snapshot)),
                    // Dropped from the window; the next flush of the window rewrites it whole
                    // (the index no longer matches what is cached), which deletes the row.
                    Err(error) => {
                        tracing::error!(job_key, state_type = %identifier, %error, "discarding a state row that cannot be read");
                        window.index = None;
                    }
                }
                continue;
            }
            let Some(state_type) = StateType::from_identifier(&identifier) else {
                // A newer release may add state types; ignoring them keeps this one running.
                tracing::warn!(job_key, state_type = %identifier, "ignoring a state row of unknown type");
                continue;
            };
            if !state_type.is_written() {
                // An earlier release wrote it; this one keeps it in memory only: delete the row.
                stale_rows.insert(state_type);
                continue;
            }
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
            window.legacy_row |= state_type == StateType::CollectedMetrics;
            slots.insert(state_type, slot);
        }
        if !snapshots.is_empty() || window.index.is_some() {
            // The snapshot rows, over what an earlier release's whole-window row holds (if both
            // are there, which only a crash between two releases' flushes could leave).
            let mut merged: BTreeMap<DateTime<Utc>, CollectedMetrics> = match slots.remove(&StateType::CollectedMetrics)
            {
                Some(Slot {
                    value: Some(StateValue::CollectedMetrics(legacy)),
                    ..
                }) => legacy.iter().map(|(at, s)| (*at, s.clone())).collect(),
                _ => BTreeMap::new(),
            };
            let mut stored: Vec<DateTime<Utc>> = snapshots.iter().map(|(at, _)| *at).collect();
            stored.sort_unstable();
            merged.extend(snapshots);
            let history: MetricHistory = merged.into_iter().collect();
            window.rows = if stored.len() == history.len() {
                StoredRows::Window(history.clone())
            } else {
                StoredRows::Listed(
                    history
                        .shared()
                        .filter(|(at, _)| stored.binary_search(at).is_ok())
                        .map(|(at, s)| (at, s.clone()))
                        .collect(),
                )
            };
            slots.insert(
                StateType::CollectedMetrics,
                Slot {
                    value: Some(StateValue::CollectedMetrics(history)),
                    state: FlushState::UpToDate,
                },
            );
        }
        JobView {
            slots,
            window,
            stale_rows,
        }
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

    /// The rows a flush has to write, encoded; `None` when every state is UP_TO_DATE or NOT_NEEDED.
    pub(crate) fn writes(&self, compression_threshold: usize) -> Result<Option<(JobWrites<'_>, Flushed)>, StateError> {
        let pending = self.pending();
        if pending.is_empty() {
            return Ok(None);
        }
        let mut writes = JobWrites {
            window: None,
            upserts: Vec::new(),
            deletes: Vec::new(),
        };
        let mut flushed = Flushed {
            index: None,
            bytes: 0,
            window_bytes: 0,
        };
        for value in pending.upserts {
            if let StateValue::CollectedMetrics(history) = value {
                let write = self.window_write(history, compression_threshold)?;
                if let WindowWrite::Store { new_index, added, .. } = &write {
                    flushed.index = Some(new_index.clone());
                    flushed.window_bytes = (new_index.len() + added.iter().map(|(_, v)| v.len()).sum::<usize>()) as u64;
                    flushed.bytes += flushed.window_bytes;
                }
                writes.window = Some(write);
                if self.window.legacy_row {
                    writes.deletes.push(StateType::CollectedMetrics.identifier());
                }
                continue;
            }
            let text = value.encode(compression_threshold)?;
            flushed.bytes += text.len() as u64;
            writes.upserts.push((value.state_type().identifier(), text));
        }
        for state_type in pending.deletes {
            if state_type == StateType::CollectedMetrics {
                writes.window = Some(WindowWrite::Remove);
            }
            writes.deletes.push(state_type.identifier());
        }
        Ok(Some((writes, flushed)))
    }

    /// The rows that bring the database from [`StoredWindow`] to `history`.
    fn window_write<'a>(
        &'a self,
        history: &'a MetricHistory,
        compression_threshold: usize,
    ) -> Result<WindowWrite<'a>, StateError> {
        // Both lists are in time order: one walk down both finds the snapshots the database lacks
        // (or holds another version of) and the rows no longer in the window.
        let mut stored = self.window.rows.iter().peekable();
        let mut added = Vec::new();
        let mut trimmed = Vec::new();
        for (at, snapshot) in history.shared() {
            while let Some((gone, _)) = stored.next_if(|(t, _)| *t < at) {
                trimmed.push(snapshot_identifier(gone));
            }
            let known = match stored.next_if(|(t, _)| *t == at) {
                Some((_, row)) => SharedSnapshot::ptr_eq(row, snapshot),
                None => false,
            };
            if !known {
                added.push((
                    snapshot_identifier(at),
                    encode_snapshot(snapshot, compression_threshold)?,
                ));
            }
        }
        trimmed.extend(stored.map(|(gone, _)| snapshot_identifier(gone)));
        let all = move || {
            history
                .shared()
                .map(|(at, snapshot)| {
                    Ok((
                        snapshot_identifier(at),
                        encode_snapshot(snapshot, compression_threshold)?,
                    ))
                })
                .collect()
        };
        Ok(WindowWrite::Store {
            expected_index: self.window.index.clone(),
            new_index: encode_window_index(&new_generation(), history.len())?,
            added,
            trimmed,
            all: Box::new(all),
        })
    }

    /// What a flush has to write; empty when every state is UP_TO_DATE or NOT_NEEDED.
    pub(crate) fn pending(&self) -> PendingWrites<'_> {
        let mut pending = PendingWrites::default();
        for (state_type, slot) in &self.slots {
            match (slot.state, &slot.value) {
                (FlushState::NeedsCreate | FlushState::NeedsUpdate, Some(value)) if state_type.is_written() => {
                    pending.upserts.push(value);
                }
                (FlushState::NeedsDelete, _) if state_type.is_written() => pending.deletes.push(*state_type),
                _ => {}
            }
        }
        pending.deletes.extend(self.stale_rows.iter().copied());
        pending
    }

    /// Records that the pending writes reached the database (`flushed` says how the window was
    /// written; `None` for a store without database).
    pub(crate) fn mark_flushed(&mut self, flushed: Option<Flushed>) {
        if let Some(flushed) = flushed
            && matches!(
                self.flush_state(StateType::CollectedMetrics),
                FlushState::NeedsCreate | FlushState::NeedsUpdate | FlushState::NeedsDelete
            )
        {
            self.window = match self.get(StateType::CollectedMetrics) {
                Some(StateValue::CollectedMetrics(history)) => StoredWindow {
                    rows: StoredRows::Window(history.clone()),
                    index: flushed.index,
                    legacy_row: false,
                },
                _ => StoredWindow::default(),
            };
        }
        self.mark_flushed_states();
    }

    fn mark_flushed_states(&mut self) {
        self.stale_rows.clear();
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
    use autoscaler_core::ConfigChanges;
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
        view.mark_flushed(None);
        assert_eq!(view.flush_state(StateType::CollectedMetrics), FlushState::UpToDate);
        assert!(view.pending().is_empty(), "a second flush has nothing to do");

        view.put(metrics());
        assert_eq!(view.flush_state(StateType::CollectedMetrics), FlushState::NeedsUpdate);
        view.mark_flushed(None);
        view.remove(StateType::CollectedMetrics);
        assert_eq!(view.flush_state(StateType::CollectedMetrics), FlushState::NeedsDelete);
        assert!(view.get(StateType::CollectedMetrics).is_none());
        view.put(metrics());
        assert_eq!(view.flush_state(StateType::CollectedMetrics), FlushState::NeedsUpdate);
        view.remove(StateType::CollectedMetrics);
        assert_eq!(counts(&view), (0, 1));
        view.mark_flushed(None);
        assert_eq!(view.flush_state(StateType::CollectedMetrics), FlushState::NotNeeded);
        view.clear();
        assert!(view.pending().is_empty(), "clearing nothing flushes nothing");
    }

    /// `(added, trimmed)` identifiers of the window write `view` would flush, its flush recorded.
    fn flush_window(view: &mut JobView) -> (Vec<String>, Vec<String>) {
        let (window, flushed) = {
            let (writes, flushed) = view.writes(usize::MAX).unwrap().unwrap();
            let window = match writes.window {
                Some(WindowWrite::Store { added, trimmed, .. }) => {
                    (added.into_iter().map(|(id, _)| id).collect(), trimmed)
                }
                _ => panic!("a window store"),
            };
            (window, flushed)
        };
        view.mark_flushed(Some(flushed));
        window
    }

    #[test]
    fn a_slid_window_writes_its_new_snapshots_and_trims_the_old() {
        use chrono::TimeZone as _;
        let t = |s: i64| Utc.timestamp_opt(s, 0).unwrap();
        let ids = |secs: &[i64]| {
            secs.iter()
                .map(|s| crate::codec::snapshot_identifier(t(*s)))
                .collect::<Vec<_>>()
        };
        let mut view = JobView::default();
        let mut history = MetricHistory::new();
        for s in 0..3 {
            history.insert(t(s), CollectedMetrics::default());
        }
        view.put(StateValue::CollectedMetrics(history.clone()));
        assert_eq!(flush_window(&mut view), (ids(&[0, 1, 2]), vec![]), "all new");

        // The window slides by two: two new snapshots, two trimmed, the kept one not rewritten.
        history.remove_before(t(2));
        history.insert(t(3), CollectedMetrics::default());
        history.insert(t(4), CollectedMetrics::default());
        view.put(StateValue::CollectedMetrics(history.clone()));
        assert_eq!(flush_window(&mut view), (ids(&[3, 4]), ids(&[0, 1])));

        // A snapshot replaced at a kept instant is written again; one past every kept is trimmed.
        let mut replaced = MetricHistory::new();
        replaced.insert(t(2), CollectedMetrics::default());
        for (at, snapshot) in history.iter().skip(1).take(1) {
            replaced.insert(*at, snapshot.clone());
        }
        view.put(StateValue::CollectedMetrics(replaced));
        let (added, trimmed) = flush_window(&mut view);
        assert_eq!(added, ids(&[2, 3]), "new snapshots, the same instants");
        assert_eq!(trimmed, ids(&[4]));
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
        view.mark_flushed(None);
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
