//! The one-timestamp state (token bucket, GCRA, pacing) in one atomic word, so a check on a key
//! the store already holds needs only a shared lock and one compare-and-swap.
//!
//! The word packs, from the top: the refused mark (1 bit), the quota's slot (10 bits) and the
//! theoretical arrival time in µs (53 bits: until the year 2255). Keeping the slot in the same
//! word keeps an entry at 24 bytes (a 16-byte key and this word) while every state still knows
//! the emission interval it was written under.

use std::sync::atomic::{AtomicU64, Ordering};

use super::stored::{Meta, StoredState};
use crate::algorithm::gcra_state::GcraState;
use crate::{Charge, Decision, Quota, RefusalReason, Timestamp};

/// A packed [`GcraState`] and its [`Meta`].
#[derive(Debug, Default)]
pub(crate) struct AtomicTat(AtomicU64);

#[inline]
fn pack(tat: Timestamp, meta: Meta) -> u64 {
    meta.pack(tat.as_micros())
}

#[inline]
fn unpack(word: u64) -> (Timestamp, Meta) {
    let (tat, meta) = Meta::unpack(word);
    (Timestamp::from_micros(tat), meta)
}

impl AtomicTat {
    /// The check through a shared reference, for an item whose quota is in `slot`: evaluate a
    /// snapshot and publish a charge only if nobody changed the word meanwhile (otherwise
    /// evaluate again). A refusal writes at most the refused mark, once.
    ///
    /// `None` when the state was written under another quota, or must be rewritten first (a
    /// clock that stepped back, a smaller capacity): the exclusive path does that.
    ///
    /// Always inlined: called, it returns its answer through memory that the caller reads back
    /// at once, and the one-rule check was slower for it (78 against 68 ns on the `check`
    /// bench's hot key, medians of seven interleaved runs).
    #[inline(always)]
    pub(crate) fn check_shared(
        &self,
        quota: &Quota,
        slot: u16,
        now: Timestamp,
        cost: u64,
        enforcing: bool,
    ) -> Option<(Decision, Option<Charge>)> {
        let mut seen = self.0.load(Ordering::Acquire);
        loop {
            let (tat, meta) = unpack(seen);
            let mut state = GcraState::new(tat, quota.interval_micros());
            if meta.slot != slot || state.needs_rewrite(quota, now) {
                return None;
            }
            let outcome = state.check_normalized(quota, now, cost, now);
            if outcome.1.is_none() {
                let limited = outcome.0.refusal() == Some(RefusalReason::LimitReached);
                if limited && enforcing && !meta.refused {
                    self.0.fetch_or(Meta::REFUSED_BIT, Ordering::AcqRel);
                }
                return Some(outcome);
            }
            let charged = pack(
                state.tat(),
                Meta {
                    slot,
                    refused: false,
                },
            );
            match self
                .0
                .compare_exchange_weak(seen, charged, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Some(outcome),
                Err(current) => seen = current,
            }
        }
    }

    /// The check's plan for a caller holding the shard exclusively: the allowed decision, its
    /// charge and the word to store for it (`None`: the word stays), written by
    /// [`set`](Self::set) only once every item of the batch is allowed. `None` when the check
    /// refuses, or the state was written under another quota or must be rewritten first.
    #[inline(always)]
    pub(crate) fn plan(
        &self,
        quota: &Quota,
        slot: u16,
        now: Timestamp,
        cost: u64,
    ) -> Option<(Decision, Option<Charge>, Option<u64>)> {
        let (tat, meta) = unpack(self.0.load(Ordering::Relaxed));
        let mut state = GcraState::new(tat, quota.interval_micros());
        if meta.slot != slot || state.needs_rewrite(quota, now) {
            return None;
        }
        let (decision, charge) = state.check_normalized(quota, now, cost, now);
        if !decision.is_allowed() {
            return None;
        }
        let word = charge.is_some().then(|| {
            let meta = Meta {
                slot,
                refused: false,
            };
            pack(state.tat(), meta)
        });
        Some((decision, charge, word))
    }

    /// Stores a word [`plan`](Self::plan) made, under the shard's write lock (whose release
    /// publishes it).
    #[inline(always)]
    pub(crate) fn set(&self, word: u64) {
        self.0.store(word, Ordering::Relaxed);
    }

    fn state(&self, quota: &Quota) -> GcraState {
        let (tat, _) = unpack(self.0.load(Ordering::Acquire));
        GcraState::new(tat, quota.interval_micros())
    }
}

impl StoredState for AtomicTat {
    type State = GcraState;

    fn new(state: GcraState, meta: Meta) -> Self {
        AtomicTat(AtomicU64::new(pack(state.tat(), meta)))
    }

    fn view<R>(&self, quota: &Quota, read: impl FnOnce(&GcraState) -> R) -> R {
        read(&self.state(quota))
    }

    fn update<R>(&mut self, quota: &Quota, change: impl FnOnce(&mut GcraState) -> R) -> R {
        let (tat, meta) = unpack(*self.0.get_mut());
        let mut state = GcraState::new(tat, quota.interval_micros());
        let result = change(&mut state);
        *self.0.get_mut() = pack(state.tat(), meta);
        result
    }

    fn meta(&self) -> Meta {
        unpack(self.0.load(Ordering::Acquire)).1
    }

    fn set_meta(&mut self, meta: Meta) {
        let (tat, _) = unpack(*self.0.get_mut());
        *self.0.get_mut() = pack(tat, meta);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_word_keeps_the_time_the_slot_and_the_mark_apart() {
        let tat = Timestamp::from_secs(4_102_444_800); // 2100-01-01
        for meta in [
            Meta {
                slot: 0,
                refused: false,
            },
            Meta {
                slot: 1023,
                refused: true,
            },
            Meta {
                slot: 517,
                refused: false,
            },
        ] {
            assert_eq!(unpack(pack(tat, meta)), (tat, meta));
        }
    }
}
