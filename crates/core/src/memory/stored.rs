//! How the in-memory store keeps each algorithm's state: compactly, naming the quota it was last
//! checked under by slot (see `quota_slots`) and whether its caller was refused since last allowed.

use super::quota_slots::MAX_SLOTS;
use crate::algorithm::AlgorithmState;
use crate::algorithm::concurrency::InFlight;
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

const VALUE_BITS: u32 = 53;
const VALUE_MASK: u64 = (1 << VALUE_BITS) - 1;
const SLOT_MASK: u64 = (MAX_SLOTS as u64 - 1) << VALUE_BITS;
const REFUSED: u64 = 1 << 63;

impl Meta {
    /// One word: the refused mark (top bit), the slot (10 bits) and a value below 2^53 (a
    /// timestamp in µs until the year 2255, or a count: limits are at most 2^40). Packing keeps
    /// entries as small as they were before states named their quotas.
    #[inline]
    pub(crate) fn pack(self, value: u64) -> u64 {
        let refused = if self.refused { REFUSED } else { 0 };
        let slot = (u64::from(self.slot) << VALUE_BITS) & SLOT_MASK;
        refused | slot | value.min(VALUE_MASK)
    }

    /// The value and meta of a packed word.
    #[inline]
    pub(crate) fn unpack(word: u64) -> (u64, Meta) {
        let slot = u16::try_from((word & SLOT_MASK) >> VALUE_BITS).unwrap_or_default();
        let meta = Meta {
            slot,
            refused: word & REFUSED != 0,
        };
        (word & VALUE_MASK, meta)
    }

    /// The refused mark alone, as a word to OR in.
    pub(crate) const REFUSED_BIT: u64 = REFUSED;
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

    /// Whether the state means the same under any quota of its algorithm (a count of held
    /// slots), so a table out of quota slots may give a slot's states another quota instead of
    /// dropping them.
    const SAME_UNDER_ANY_QUOTA: bool = false;

    /// Eviction order, lowest first: callers not refused since last allowed, then by share of
    /// the limit used, then by how soon the state would be idle anyway.
    fn eviction_rank(&self, quota: &Quota, now: Timestamp) -> (bool, u64, Timestamp) {
        let refused = self.meta().refused;
        self.view(quota, |state| {
            (refused, state.usage_ppm(quota, now), state.idle_at(quota))
        })
    }
}

/// Fixed window: start, and the count packed with the meta (the length is the slot's quota's
/// window).
pub(crate) struct StoredWindow {
    start: u64,
    count_and_meta: u64,
}

impl StoredWindow {
    fn state(&self, quota: &Quota) -> WindowCount {
        let (count, _) = Meta::unpack(self.count_and_meta);
        WindowCount::new(
            Timestamp::from_micros(self.start),
            quota.interval_micros(),
            count,
        )
    }
}

impl StoredState for StoredWindow {
    type State = WindowCount;

    fn new(state: WindowCount, meta: Meta) -> Self {
        StoredWindow {
            start: state.start().as_micros(),
            count_and_meta: meta.pack(state.count()),
        }
    }

    fn view<R>(&self, quota: &Quota, read: impl FnOnce(&WindowCount) -> R) -> R {
        read(&self.state(quota))
    }

    fn update<R>(&mut self, quota: &Quota, change: impl FnOnce(&mut WindowCount) -> R) -> R {
        let mut state = self.state(quota);
        let result = change(&mut state);
        *self = StoredWindow::new(state, self.meta());
        result
    }

    fn meta(&self) -> Meta {
        Meta::unpack(self.count_and_meta).1
    }

    fn set_meta(&mut self, meta: Meta) {
        let (count, _) = Meta::unpack(self.count_and_meta);
        self.count_and_meta = meta.pack(count);
    }
}

/// Sliding window counter: start and two counts, the current one packed with the meta (the
/// length is the slot's quota's window).
pub(crate) struct StoredSliding {
    start: u64,
    previous: u64,
    current_and_meta: u64,
}

impl StoredSliding {
    fn state(&self, quota: &Quota) -> SlidingCounts {
        let start = Timestamp::from_micros(self.start);
        let (current, _) = Meta::unpack(self.current_and_meta);
        SlidingCounts::new(start, quota.interval_micros(), self.previous, current)
    }
}

impl StoredState for StoredSliding {
    type State = SlidingCounts;

    fn new(state: SlidingCounts, meta: Meta) -> Self {
        StoredSliding {
            start: state.start().as_micros(),
            previous: state.previous(),
            current_and_meta: meta.pack(state.current()),
        }
    }

    fn view<R>(&self, quota: &Quota, read: impl FnOnce(&SlidingCounts) -> R) -> R {
        read(&self.state(quota))
    }

    fn update<R>(&mut self, quota: &Quota, change: impl FnOnce(&mut SlidingCounts) -> R) -> R {
        let mut state = self.state(quota);
        let result = change(&mut state);
        *self = StoredSliding::new(state, self.meta());
        result
    }

    fn meta(&self) -> Meta {
        Meta::unpack(self.current_and_meta).1
    }

    fn set_meta(&mut self, meta: Meta) {
        let (current, _) = Meta::unpack(self.current_and_meta);
        self.current_and_meta = meta.pack(current);
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

/// Concurrency: the slots held, packed with the meta. Kept apart from eviction: a held slot is
/// a running request, and forgetting it would admit one more than the limit (see `Shard`).
pub(crate) struct StoredInFlight {
    held_and_meta: u64,
    epoch: u64,
}

impl StoredState for StoredInFlight {
    type State = InFlight;

    /// Held slots are given back by count, whatever the limit: never dropped for want of a
    /// quota slot (that would admit more than the limit).
    const SAME_UNDER_ANY_QUOTA: bool = true;

    fn new(state: InFlight, meta: Meta) -> Self {
        StoredInFlight {
            held_and_meta: meta.pack(state.held()),
            epoch: state.epoch(),
        }
    }

    fn view<R>(&self, _quota: &Quota, read: impl FnOnce(&InFlight) -> R) -> R {
        let (held, _) = Meta::unpack(self.held_and_meta);
        read(&InFlight::in_epoch(held, self.epoch))
    }

    fn update<R>(&mut self, _quota: &Quota, change: impl FnOnce(&mut InFlight) -> R) -> R {
        let (held, meta) = Meta::unpack(self.held_and_meta);
        let mut state = InFlight::in_epoch(held, self.epoch);
        let result = change(&mut state);
        self.held_and_meta = meta.pack(state.held());
        result
    }

    fn meta(&self) -> Meta {
        Meta::unpack(self.held_and_meta).1
    }

    fn set_meta(&mut self, meta: Meta) {
        self.held_and_meta = meta.pack(Meta::unpack(self.held_and_meta).0);
    }
}
