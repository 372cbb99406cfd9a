//! The per-job cache in front of a database (the reference's `JobStateView`): typed values plus a
//! flush state per state type.
//!
//! The metric window is not one row but one row per snapshot (`collectedMetrics#<slot>`, the
//! snapshot's instant in the value) plus an index row (`collectedMetricsIndex`) naming the
//! generation of the last flush that wrote the window. A flush after one new snapshot overwrites
//! the row of the snapshot that left the window with the new one (its slot is reused), deletes
//! the rows of any other trimmed snapshots and replaces the index, provided the index is still the
//! one this process last saw (so the rows are the ones it knows); otherwise (another process wrote
//! the job, or an earlier release left one whole-window `collectedMetrics` row or its
//! `collectedMetrics@<instant>` rows) it writes every row of the window again. Either way in one
//! transaction with the job's other rows.

use crate::codec::{
    StateType, StateValue, decode_slot, decode_snapshot, encode_snapshot, encode_window_index, slot_identifier,
    slot_number, snapshot_instant,
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
    /// The slot of each of `rows`, in their (time) order; distinct.
    slot_numbers: Vec<u32>,
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
    /// The slot of each snapshot of the window written, in time order.
    slot_numbers: Vec<u32>,
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
    // The process id asked once: each job-cycle's flush makes a generation, and asking costs a
    // system call each time.
    static PROCESS: std::sync::LazyLock<u32> = std::sync::LazyLock::new(std::process::id);
    let nanos = Utc::now().timestamp_nanos_opt().unwrap_or_default();
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{:x}-{nanos:x}-{n:x}", *PROCESS)
}

impl JobView {
    /// A view of rows just read from the database, and how many rows it discarded: each decodable
    /// row is UP_TO_DATE; a row that does not decode is dropped and marked NEEDS_DELETE, logging
    /// why (the reference discards an undeserializable state the same way,
    /// `testDiscardInvalidHistory`). The caller counts the discarded rows in
    /// [`STATE_ROWS_DISCARDED`](crate::STATE_ROWS_DISCARDED).
    pub(crate) fn from_rows(job_key: &str, rows: impl IntoIterator<Item = (String, String)>) -> (Self, u64) {
        let mut discarded = 0;
        let mut slots = BTreeMap::new();
        let mut window = StoredWindow::default();
        let mut snapshots: Vec<(DateTime<Utc>, CollectedMetrics)> = Vec::new();
        // The slot and instant of each window row read, and whether an earlier release's
        // snapshot rows (keyed by their instant) are there too.
        let mut stored: Vec<(DateTime<Utc>, u32)> = Vec::new();
        let mut instant_rows = false;
        // Set when a window row did not read: the index read (in whatever order the rows came)
        // is then forgotten, so the next flush writes the window whole.
        let mut unreadable_window_row = false;
        let mut stale_rows = BTreeSet::new();
        for (identifier, text) in rows {
            if identifier == WINDOW_INDEX {
                window.index = Some(text);
                continue;
            }
            // A window row: a slot, or (rewritten as slots by the next flush of the window, which
            // deletes it) a row keyed by instant.
            let window_row = if let Some(slot) = slot_number(&identifier) {
                Some(decode_slot(&text).map(|(at, snapshot)| (at, Some(slot), snapshot)))
            } else if let Some(at) = snapshot_instant(&identifier) {
                instant_rows = true;
                Some(decode_snapshot(&text).map(|snapshot| (at, None, snapshot)))
            } else {
                None
            };
            if let Some(read) = window_row {
                match read {
                    Ok((at, slot, snapshot)) => {
                        if let Some(slot) = slot {
                            stored.push((at, slot));
                        }
                        snapshots.push((at, snapshot));
                    }
                    // Dropped from the window; the next flush of the window rewrites it whole
                    // (the index no longer matches what is cached), which deletes the row.
                    Err(error) => {
                        tracing::error!(job_key, state_type = %identifier, %error, "discarding a state row that cannot be read");
                        discarded += 1;
                        unreadable_window_row = true;
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
                    discarded += 1;
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
            merged.extend(snapshots);
            let history: MetricHistory = merged.into_iter().collect();
            if instant_rows {
                // Known rows are slot rows only: with the index forgotten the window is written
                // whole, which deletes every earlier row.
                stored.clear();
            }
            if instant_rows || unreadable_window_row {
                window.index = None;
            }
            stored.sort_unstable();
            let every_instant_once = stored.iter().map(|(at, _)| *at).eq(history.shared().map(|(at, _)| at));
            (window.rows, window.slot_numbers) = if every_instant_once {
                (
                    StoredRows::Window(history.clone()),
                    stored.iter().map(|(_, slot)| *slot).collect(),
                )
            } else {
                // Each row with the snapshot of its instant (two rows naming one instant, which
                // only a damaged table holds, share it; the walk of the next flush trims one).
                let shared: BTreeMap<DateTime<Utc>, &SharedSnapshot> = history.shared().collect();
                let (rows, numbers) = stored
                    .iter()
                    .filter_map(|(at, slot)| shared.get(at).map(|s| ((*at, (*s).clone()), *slot)))
                    .unzip();
                (StoredRows::Listed(rows), numbers)
            };
            slots.insert(
                StateType::CollectedMetrics,
                Slot {
                    value: Some(StateValue::CollectedMetrics(history)),
                    state: FlushState::UpToDate,
                },
            );
        }
        let view = JobView {
            slots,
            window,
            stale_rows,
        };
        (view, discarded)
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
            slot_numbers: Vec::new(),
        };
        for value in pending.upserts {
            if let StateValue::CollectedMetrics(history) = value {
                let (write, slot_numbers) = self.window_write(history, compression_threshold)?;
                flushed.slot_numbers = slot_numbers;
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

    /// The rows that bring the database from [`StoredWindow`] to `history`, and the slot of each
    /// of its snapshots once they are written.
    ///
    /// A snapshot already stored keeps its slot (its row is written again only if the snapshot
    /// at that instant was replaced); a new one takes the slot of a snapshot that left the window,
    /// so that its row is overwritten in place, and only when none is left a number no row of the
    /// window uses. The slots of trimmed snapshots no new one took are deleted. The whole-window
    /// write (for a database whose rows are not the ones known) uses the same slots, so both
    /// leave the rows [`JobView::mark_flushed`] records.
    fn window_write<'a>(
        &'a self,
        history: &'a MetricHistory,
        compression_threshold: usize,
    ) -> Result<(WindowWrite<'a>, Vec<u32>), StateError> {
        // Both lists are in time order: one walk down both finds the snapshots the database lacks
        // (or holds another version of) and the rows no longer in the window; a new snapshot
        // takes a slot freed before it in the walk (in a sliding window, the oldest's).
        let mut stored = self
            .window
            .rows
            .iter()
            .zip(self.window.slot_numbers.iter().copied())
            .peekable();
        let mut slots: Vec<u32> = Vec::with_capacity(history.len());
        let mut added = Vec::new();
        let mut freed: Vec<u32> = Vec::new();
        let mut taken = 0;
        // New snapshots no freed slot was left for when the walk reached them.
        let mut unplaced = Vec::new();
        // The packed bytes of each snapshot encoded, one buffer for them all.
        let mut packed = Vec::new();
        for (position, (at, snapshot)) in history.shared().enumerate() {
            while let Some((_, slot)) = stored.next_if(|((t, _), _)| *t < at) {
                freed.push(slot);
            }
            let slot = match stored.next_if(|((t, _), _)| *t == at) {
                Some(((_, row), slot)) if SharedSnapshot::ptr_eq(row, snapshot) => {
                    slots.push(slot);
                    continue;
                }
                Some((_, slot)) => slot,
                None => match freed.get(taken) {
                    Some(&slot) => {
                        taken += 1;
                        slot
                    }
                    None => {
                        // Given a number below, once the walk has freed every slot it will.
                        slots.push(u32::MAX);
                        unplaced.push((position, at, snapshot));
                        continue;
                    }
                },
            };
            slots.push(slot);
            added.push((
                slot_identifier(slot),
                encode_snapshot(at, snapshot, compression_threshold, &mut packed)?,
            ));
        }
        freed.extend(stored.map(|(_, slot)| slot));
        let mut freed = freed.into_iter().skip(taken);
        // Numbers past the freed ones: the smallest no stored row uses (taken once a growing
        // window has reused every freed slot).
        let mut in_use: Option<BTreeSet<u32>> = None;
        let mut candidate = 0u32;
        for (position, at, snapshot) in unplaced {
            let slot = freed.next().unwrap_or_else(|| {
                let in_use = in_use.get_or_insert_with(|| self.window.slot_numbers.iter().copied().collect());
                // At most one step per stored or newly numbered row.
                while in_use.contains(&candidate) {
                    candidate = candidate.saturating_add(1);
                }
                in_use.insert(candidate);
                candidate
            });
            if let Some(placeholder) = slots.get_mut(position) {
                *placeholder = slot;
            }
            added.push((
                slot_identifier(slot),
                encode_snapshot(at, snapshot, compression_threshold, &mut packed)?,
            ));
        }
        let trimmed: Vec<String> = freed.map(slot_identifier).collect();
        let all_slots = slots.clone();
        let all = move || {
            let mut packed = Vec::new();
            history
                .shared()
                .zip(&all_slots)
                .map(|((at, snapshot), slot)| {
                    Ok((
                        slot_identifier(*slot),
                        encode_snapshot(at, snapshot, compression_threshold, &mut packed)?,
                    ))
                })
                .collect()
        };
        let write = WindowWrite::Store {
            expected_index: self.window.index.clone(),
            new_index: encode_window_index(&new_generation(), history.len())?,
            added,
            trimmed,
            all: Box::new(all),
        };
        Ok((write, slots))
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
                    slot_numbers: flushed.slot_numbers,
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

    // A generation names this process (its id, asked once) and differs from every other one it
    // made, even within one clock tick.
    #[test]
    fn generations_name_the_process_and_never_repeat() {
        let made: Vec<String> = (0..1000).map(|_| new_generation()).collect();
        let distinct: BTreeSet<&String> = made.iter().collect();
        assert_eq!(distinct.len(), made.len());
        let process = format!("{:x}-", std::process::id());
        assert!(made.iter().all(|g| g.starts_with(&process)), "{:?}", &made[..3]);
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

    fn t(secs: i64) -> DateTime<Utc> {
        use chrono::TimeZone as _;
        Utc.timestamp_opt(secs, 0).unwrap()
    }

    fn ids(slots: &[u32]) -> Vec<String> {
        slots.iter().map(|s| slot_identifier(*s)).collect()
    }

    #[test]
    fn a_slid_window_overwrites_the_rows_of_the_snapshots_that_left_it() {
        let mut view = JobView::default();
        let mut history = MetricHistory::new();
        for s in 0..3 {
            history.insert(t(s), CollectedMetrics::default());
        }
        view.put(StateValue::CollectedMetrics(history.clone()));
        assert_eq!(flush_window(&mut view), (ids(&[0, 1, 2]), vec![]), "all new");

        // The window slides by two: the two new snapshots take the slots of the two that left,
        // oldest first; nothing is deleted and the kept one is not rewritten.
        history.remove_before(t(2));
        history.insert(t(3), CollectedMetrics::default());
        history.insert(t(4), CollectedMetrics::default());
        view.put(StateValue::CollectedMetrics(history.clone()));
        assert_eq!(flush_window(&mut view), (ids(&[0, 1]), vec![]));
        assert_eq!(view.window.slot_numbers, vec![2, 0, 1], "t2, t3, t4");

        // A snapshot replaced at a kept instant is written again in its slot; the slot of one
        // that left with no new one to take it is deleted.
        let mut replaced = MetricHistory::new();
        replaced.insert(t(2), CollectedMetrics::default());
        for (at, snapshot) in history.iter().skip(1).take(1) {
            replaced.insert(*at, snapshot.clone());
        }
        view.put(StateValue::CollectedMetrics(replaced));
        assert_eq!(flush_window(&mut view), (ids(&[2, 0]), ids(&[1])));
        assert_eq!(view.window.slot_numbers, vec![2, 0]);
    }

    #[test]
    fn a_growing_window_takes_the_smallest_free_numbers_after_the_freed_slots() {
        let mut view = JobView::default();
        let mut history = MetricHistory::new();
        for s in [0, 1, 2, 3] {
            history.insert(t(s), CollectedMetrics::default());
        }
        view.put(StateValue::CollectedMetrics(history.clone()));
        flush_window(&mut view);
        // Shrinks to t3: slots 0, 1, 2 are deleted.
        history.remove_before(t(3));
        view.put(StateValue::CollectedMetrics(history.clone()));
        assert_eq!(flush_window(&mut view), (vec![], ids(&[0, 1, 2])));
        // Slides by one and grows by two: t4 takes t3's slot 3, t5 and t6 the numbers 0 and 1.
        history.remove_before(t(4));
        for s in [4, 5, 6] {
            history.insert(t(s), CollectedMetrics::default());
        }
        view.put(StateValue::CollectedMetrics(history.clone()));
        assert_eq!(flush_window(&mut view), (ids(&[3, 0, 1]), vec![]));
        assert_eq!(view.window.slot_numbers, vec![3, 0, 1]);
    }

    /// The window row of `snapshot` at `at` in slot `slot`.
    fn slot_row(slot: u32, at: DateTime<Utc>) -> (String, String) {
        let history: MetricHistory = [(at, CollectedMetrics::default())].into_iter().collect();
        let (_, snapshot) = history.shared().next().unwrap();
        (
            slot_identifier(slot),
            encode_snapshot(at, snapshot, usize::MAX, &mut Vec::new()).unwrap(),
        )
    }

    #[test]
    fn slot_rows_read_back_in_time_order_with_their_slots() {
        let index = (WINDOW_INDEX.to_owned(), "i".to_owned());
        let rows = vec![slot_row(7, t(20)), slot_row(0, t(30)), slot_row(3, t(10)), index];
        let (mut view, discarded) = JobView::from_rows("job", rows);
        assert_eq!(discarded, 0);
        assert_eq!(view.window.slot_numbers, vec![3, 7, 0]);
        assert_eq!(view.window.index.as_deref(), Some("i"));
        let Some(StateValue::CollectedMetrics(history)) = view.get(StateType::CollectedMetrics) else {
            panic!("a window");
        };
        let mut history = history.clone();
        assert_eq!(
            history.iter().map(|(at, _)| *at).collect::<Vec<_>>(),
            vec![t(10), t(20), t(30)]
        );
        // The next slide overwrites the oldest snapshot's slot.
        history.remove_before(t(20));
        history.insert(t(40), CollectedMetrics::default());
        view.put(StateValue::CollectedMetrics(history));
        let (writes, _) = view.writes(usize::MAX).unwrap().unwrap();
        let Some(WindowWrite::Store {
            expected_index,
            added,
            trimmed,
            ..
        }) = writes.window
        else {
            panic!("a window store");
        };
        assert_eq!(expected_index.as_deref(), Some("i"), "the rows are the known ones");
        assert_eq!(added.iter().map(|(id, _)| id.clone()).collect::<Vec<_>>(), ids(&[3]));
        assert!(trimmed.is_empty());
    }

    #[test]
    fn rows_keyed_by_instant_are_read_and_the_window_is_written_whole_as_slots() {
        let history: MetricHistory = [(t(10), CollectedMetrics::default())].into_iter().collect();
        let (_, snapshot) = history.shared().next().unwrap();
        let instant_row = (
            format!("{}{}", crate::codec::SNAPSHOT_PREFIX, "1970-01-01T00:00:10.000000000Z"),
            crate::codec::encode_value(StateType::CollectedMetrics, snapshot, usize::MAX).unwrap(),
        );
        let rows = vec![
            instant_row,
            slot_row(0, t(20)),
            (WINDOW_INDEX.to_owned(), "i".to_owned()),
        ];
        let (mut view, discarded) = JobView::from_rows("job", rows);
        assert_eq!(discarded, 0, "an earlier release's row is read, not discarded");
        let Some(StateValue::CollectedMetrics(read)) = view.get(StateType::CollectedMetrics).cloned() else {
            panic!("a window");
        };
        assert_eq!(read.iter().map(|(at, _)| *at).collect::<Vec<_>>(), vec![t(10), t(20)]);
        assert_eq!(view.window.index, None, "the rows are not the known ones");
        view.put(StateValue::CollectedMetrics(read));
        let (writes, flushed) = view.writes(usize::MAX).unwrap().unwrap();
        let Some(WindowWrite::Store {
            expected_index, all, ..
        }) = writes.window
        else {
            panic!("a window store");
        };
        assert_eq!(expected_index, None);
        let whole: Vec<String> = all().unwrap().into_iter().map(|(id, _)| id).collect();
        assert_eq!(whole, ids(&[0, 1]));
        assert_eq!(flushed.slot_numbers, vec![0, 1]);
    }

    #[test]
    fn a_second_row_naming_the_same_instant_is_trimmed_and_its_slot_reused() {
        let index = (WINDOW_INDEX.to_owned(), "i".to_owned());
        let rows = vec![slot_row(0, t(10)), slot_row(1, t(10)), slot_row(2, t(20)), index];
        let (mut view, _) = JobView::from_rows("job", rows);
        assert_eq!(view.window.slot_numbers, vec![0, 1, 2]);
        let Some(StateValue::CollectedMetrics(history)) = view.get(StateType::CollectedMetrics).cloned() else {
            panic!("a window");
        };
        assert_eq!(history.len(), 2);
        let mut history = history;
        history.insert(t(30), CollectedMetrics::default());
        view.put(StateValue::CollectedMetrics(history));
        assert_eq!(
            flush_window(&mut view),
            (ids(&[1]), vec![]),
            "t30 in the duplicate's slot"
        );
        assert_eq!(view.window.slot_numbers, vec![0, 2, 1]);
    }

    use proptest::strategy::Strategy as _;

    /// One change of a window between two flushes.
    #[derive(Debug, Clone)]
    enum Change {
        /// Drops this many of the oldest snapshots.
        Trim(usize),
        /// Adds this many snapshots after the newest.
        Add(usize),
        /// Replaces the snapshot at this position (modulo the length) by a new one.
        Replace(usize),
    }

    proptest::proptest! {
        /// Whatever the window does between flushes, and whichever way the database takes each
        /// flush (the rows known, or the window written whole), the window rows are exactly the
        /// window's snapshots, each in its own slot, and no slot number reaches past the largest
        /// window seen.
        #[test]
        fn the_slot_rows_are_always_exactly_the_window(
            steps in proptest::collection::vec(
                (
                    proptest::collection::vec(
                        proptest::prop_oneof![
                            (0usize..4).prop_map(Change::Trim),
                            (0usize..4).prop_map(Change::Add),
                            (0usize..8).prop_map(Change::Replace),
                        ],
                        1..4,
                    ),
                    proptest::bool::ANY,
                ),
                1..25,
            )
        ) {
            let mut view = JobView::default();
            let mut history = MetricHistory::new();
            let mut next = 0i64;
            let mut largest = 0usize;
            // The database's window rows: slot identifier -> the instant its value names.
            let mut rows: BTreeMap<String, DateTime<Utc>> = BTreeMap::new();
            for (changes, whole) in steps {
                for change in changes {
                    match change {
                        Change::Trim(n) => {
                            let cut = history.iter().nth(n).map(|(at, _)| *at);
                            if let Some(at) = cut {
                                history.remove_before(at);
                            } else {
                                history = MetricHistory::new();
                            }
                        }
                        Change::Add(n) => {
                            for _ in 0..n {
                                history.insert(t(next), CollectedMetrics::default());
                                next += 10;
                            }
                        }
                        Change::Replace(k) => {
                            let at = history.iter().map(|(at, _)| *at).nth(k % history.len().max(1));
                            if let Some(at) = at {
                                history.insert(at, CollectedMetrics::default());
                            }
                        }
                    }
                }
                largest = largest.max(history.len());
                view.put(StateValue::CollectedMetrics(history.clone()));
                let flushed = {
                    let Some((writes, flushed)) = view.writes(usize::MAX).unwrap() else {
                        continue;
                    };
                    let Some(WindowWrite::Store { added, trimmed, all, .. }) = writes.window else {
                        panic!("a window store");
                    };
                    let at_of = |value: &str| decode_slot(value).unwrap().0;
                    if whole {
                        rows = all().unwrap().iter().map(|(id, value)| (id.clone(), at_of(value))).collect();
                    } else {
                        for (id, value) in &added {
                            rows.insert(id.clone(), at_of(value));
                        }
                        for id in &trimmed {
                            proptest::prop_assert!(rows.remove(id).is_some(), "{} deleted but not there", id);
                        }
                    }
                    flushed
                };
                view.mark_flushed(Some(flushed));
                let mut instants: Vec<DateTime<Utc>> = rows.values().copied().collect();
                instants.sort_unstable();
                let expected: Vec<DateTime<Utc>> = history.iter().map(|(at, _)| *at).collect();
                proptest::prop_assert_eq!(instants, expected);
                for id in rows.keys() {
                    let slot = slot_number(id).unwrap();
                    proptest::prop_assert!((slot as usize) < largest, "{id} with windows of at most {largest}");
                }
            }
        }
    }

    #[test]
    fn window_rows_that_do_not_read_are_dropped_and_the_window_rewritten() {
        let rows = vec![
            slot_row(0, t(10)),
            ("collectedMetrics#1".to_owned(), r#"{"v":1,"state":{}}"#.to_owned()),
            (WINDOW_INDEX.to_owned(), "i".to_owned()),
        ];
        let (view, discarded) = JobView::from_rows("job", rows);
        assert_eq!(discarded, 1);
        assert_eq!(
            view.window.index, None,
            "no instant: the row is dropped, the index forgotten"
        );
        assert_eq!(view.window.slot_numbers, vec![0]);
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
        let (view, discarded) = JobView::from_rows("job", rows);
        assert_eq!(
            discarded, 1,
            "the broken row; a row of an unknown type is ignored, not discarded"
        );
        assert!(view.get(StateType::ScalingHistory).is_none());
        assert_eq!(view.flush_state(StateType::ScalingHistory), FlushState::NeedsDelete);
        assert_eq!(view.get(StateType::ConfigOverrides), Some(&changes("x")));
        assert_eq!(counts(&view), (0, 1));
    }
}
