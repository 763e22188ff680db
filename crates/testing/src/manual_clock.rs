//! A clock that moves only when told.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tollgate_core::{Clock, Timestamp};

/// A [`Clock`] that stands still until a test moves it. Clones share the same time, so a test
/// keeps one clone and gives another to the store.
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    micros: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock showing `now`.
    pub fn new(now: Timestamp) -> Self {
        ManualClock {
            micros: Arc::new(AtomicU64::new(now.as_micros())),
        }
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let by = u64::try_from(by.as_micros()).unwrap_or(u64::MAX);
        self.micros.fetch_add(by, Ordering::SeqCst);
    }

    /// Moves the clock backward by `by` (saturating at the epoch), to test that going back in
    /// time grants nothing.
    pub fn rewind(&self, by: Duration) {
        let by = u64::try_from(by.as_micros()).unwrap_or(u64::MAX);
        let _ = self
            .micros
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |now| {
                Some(now.saturating_sub(by))
            });
    }

    /// Sets the clock to `now`.
    pub fn set(&self, now: Timestamp) {
        self.micros.store(now.as_micros(), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_micros(self.micros.load(Ordering::SeqCst))
    }
}
