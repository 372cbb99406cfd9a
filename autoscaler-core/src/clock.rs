//! The one source of "now" ([`Clock`]) every time-dependent part takes: the cycle
//! (`JobAutoScalerImpl::with_clock`), the realizer's cooldown governor, the state crate's event
//! handler and the simulator. [`SystemClock`] is the wall clock, [`ManualClock`] a clock that only
//! moves when told to, and any `Fn() -> DateTime<Utc>` closure is a clock too.

use autoscaler_metrics::time::add_saturating;
use chrono::{DateTime, Utc};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// A source of "now"; inject a fixed, manual or simulated clock in tests and simulations.
pub trait Clock: Send + Sync {
    /// The current instant.
    fn now(&self) -> DateTime<Utc>;
}

/// The wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

impl<F: Fn() -> DateTime<Utc> + Send + Sync> Clock for F {
    fn now(&self) -> DateTime<Utc> {
        self()
    }
}

/// A clock that only moves when told to (tests and simulations); share it behind an `Arc` to
/// move the time of everything that reads it.
///
/// ```
/// use autoscaler_core::{Clock, ManualClock};
/// use chrono::{TimeZone, Utc};
/// use std::time::Duration;
/// let start = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
/// let clock = ManualClock::new(start);
/// clock.advance(Duration::from_secs(90));
/// assert_eq!(clock.now(), Utc.with_ymd_and_hms(2026, 1, 1, 0, 1, 30).unwrap());
/// ```
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<DateTime<Utc>>,
}

impl ManualClock {
    /// A clock standing at `start`.
    pub fn new(start: DateTime<Utc>) -> Self {
        Self { now: Mutex::new(start) }
    }

    /// Moves the clock to `at` (backwards too).
    pub fn set(&self, at: DateTime<Utc>) {
        *self.now.lock().unwrap_or_else(PoisonError::into_inner) = at;
    }

    /// Moves the clock forward by `by` (saturating at the largest representable instant).
    pub fn advance(&self, by: Duration) {
        let mut now = self.now.lock().unwrap_or_else(PoisonError::into_inner);
        *now = add_saturating(*now, by);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.now.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a failing fixture should fail the test loudly
mod tests {
    use super::*;
    use chrono::TimeZone;
    use std::sync::Arc;

    #[test]
    fn a_manual_clock_moves_only_when_told_and_is_shared() {
        let start = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        let clock = Arc::new(ManualClock::new(start));
        let shared: Arc<dyn Clock> = clock.clone();
        assert_eq!(shared.now(), start);
        clock.advance(Duration::from_millis(1500));
        assert_eq!(shared.now(), start + chrono::Duration::milliseconds(1500));
        clock.set(start - chrono::Duration::days(1));
        assert_eq!(shared.now(), start - chrono::Duration::days(1));
        clock.set(DateTime::<Utc>::MAX_UTC);
        clock.advance(Duration::from_secs(1));
        assert_eq!(clock.now(), DateTime::<Utc>::MAX_UTC);
    }

    #[test]
    fn a_closure_is_a_clock() {
        let at = Utc.with_ymd_and_hms(2026, 6, 1, 12, 0, 0).unwrap();
        let fixed: Arc<dyn Clock> = Arc::new(move || at);
        assert_eq!(fixed.now(), at);
    }
}
