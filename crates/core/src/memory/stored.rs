//! How the in-memory store keeps each algorithm's state: compactly, naming the quota it was last
//! checked under by slot (see `quota_slots`) and whether its caller was refused since last allowed.

use crate::algorithm::AlgorithmState;
use crate::algorithm::fixed_window::WindowCount;
use crate::algorithm::sliding_window_counter::SlidingCounts;
use crate::algorithm::sliding_window_log::ChargeLog;
use crate::{Quota, Timestamp};

/// What the store keeps beside a state: its quota's slot, and whether the caller was refused
/// since it was last allowed (eviction forgets such callers last).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Meta {
    pub(crate) slot: u16,
    pub(crate) refused: bool,
}

/// A state as the store keeps it. `quota` is always the quota of the state's own slot: what it
/// was written under.
pub(crate) trait StoredState: Send + Sync + 'static {
    /// The algorithm's state.
    type State: AlgorithmState;

    /// Stores `state` with `meta`.
    fn new(state: Self::State, meta: Meta) -> Self;

    /// Reads the state.
    fn view<R>(&self, quota: &Quota, read: impl FnOnce(&Self::State) -> R) -> R;

    /// Changes the state in place (its meta stays).
    fn update<R>(&mut self, quota: &Quota, change: impl FnOnce(&mut Self::State) -> R) -> R;

    /// The slot and refused mark.
    fn meta(&self) -> Meta;

    /// Sets the slot and refused mark.
    fn set_meta(&mut self, meta: Meta);

    /// Eviction order, lowest first: callers not refused since last allowed, then by share of
    /// the limit used, then by how soon the state would be idle anyway.
    fn eviction_rank(&self, quota: &Quota, now: Timestamp) -> (bool, u64, Timestamp) {
        let refused = self.meta().refused;
        self.view(quota, |state| {
            (refused, state.usage_ppm(quota, now), state.idle_at(quota))
        })
    }
}

/// Fixed window: start and count (the length is the slot's quota's window).
pub(crate) struct StoredWindow {
    start: u64,
    count: u64,
    meta: Meta,
}

impl StoredState for StoredWindow {
    type State = WindowCount;

    fn new(state: WindowCount, meta: Meta) -> Self {
        StoredWindow {
            start: state.start().as_micros(),
            count: state.count(),
            meta,
        }
    }

    fn view<R>(&self, quota: &Quota, read: impl FnOnce(&WindowCount) -> R) -> R {
        let start = Timestamp::from_micros(self.start);
        read(&WindowCount::new(
            start,
            quota.interval_micros(),
            self.count,
        ))
    }

    fn update<R>(&mut self, quota: &Quota, change: impl FnOnce(&mut WindowCount) -> R) -> R {
        let start = Timestamp::from_micros(self.start);
        let mut state = WindowCount::new(start, quota.interval_micros(), self.count);
        let result = change(&mut state);
        *self = StoredWindow::new(state, self.meta);
        result
    }

    fn meta(&self) -> Meta {
        self.meta
    }

    fn set_meta(&mut self, meta: Meta) {
        self.meta = meta;
    }
}

/// Sliding window counter: start and two counts (the length is the slot's quota's window).
pub(crate) struct StoredSliding {
    start: u64,
    previous: u64,
    current: u64,
    meta: Meta,
}

impl StoredSliding {
    fn state(&self, quota: &Quota) -> SlidingCounts {
        let start = Timestamp::from_micros(self.start);
        SlidingCounts::new(start, quota.interval_micros(), self.previous, self.current)
    }
}

impl StoredState for StoredSliding {
    type State = SlidingCounts;

    fn new(state: SlidingCounts, meta: Meta) -> Self {
        StoredSliding {
            start: state.start().as_micros(),
            previous: state.previous(),
            current: state.current(),
            meta,
        }
    }

    fn view<R>(&self, quota: &Quota, read: impl FnOnce(&SlidingCounts) -> R) -> R {
        read(&self.state(quota))
    }

    fn update<R>(&mut self, quota: &Quota, change: impl FnOnce(&mut SlidingCounts) -> R) -> R {
        let mut state = self.state(quota);
        let result = change(&mut state);
        *self = StoredSliding::new(state, self.meta);
        result
    }

    fn meta(&self) -> Meta {
        self.meta
    }

    fn set_meta(&mut self, meta: Meta) {
        self.meta = meta;
    }
}

/// Sliding window log: the log itself (its entries are absolute times).
pub(crate) struct StoredLog {
    log: ChargeLog,
    meta: Meta,
}

impl StoredState for StoredLog {
    type State = ChargeLog;

    fn new(log: ChargeLog, meta: Meta) -> Self {
        StoredLog { log, meta }
    }

    fn view<R>(&self, _quota: &Quota, read: impl FnOnce(&ChargeLog) -> R) -> R {
        read(&self.log)
    }

    fn update<R>(&mut self, _quota: &Quota, change: impl FnOnce(&mut ChargeLog) -> R) -> R {
        change(&mut self.log)
    }

    fn meta(&self) -> Meta {
        self.meta
    }

    fn set_meta(&mut self, meta: Meta) {
        self.meta = meta;
    }
}
