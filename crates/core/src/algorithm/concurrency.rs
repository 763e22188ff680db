//! Concurrency: at most `limit` requests in flight per key at once.
//!
//! A rate limit counts arrivals; a caller whose requests are slow and expensive (a report
//! export that runs thirty seconds) hurts a service long before it sends many. A concurrency
//! quota counts what is **running**: a request takes a slot (its cost in slots) before it runs
//! and gives it back when it ends, by refunding the check's [`Receipt`](crate::Receipt). No time
//! passes into the state: a slot comes back only when its request gives it back (or, in a
//! remote store, when the gateway holding it stops renewing it; see
//! [`Quota::slot_ttl`](crate::Quota::slot_ttl)).
//!
//! **Refusals** carry the quota's [`refusal_retry_after`](crate::Quota::refusal_retry_after)
//! as their wait: there is no refill to compute a wait from. `remaining` is the number of free
//! slots; `reset_after` is zero (nothing resets on its own).
//!
//! **State outlives its quota.** The count of slots held is kept through a change of limit: a
//! lowered limit refuses new requests until enough running ones end, and ends none.
//!
//! ```
//! use tollgate_core::algorithm::{concurrency::InFlight, AlgorithmState};
//! use tollgate_core::{Quota, Timestamp};
//!
//! let quota = Quota::concurrency(2)?;
//! let mut state = InFlight::default();
//! let now = Timestamp::from_secs(60);
//! let (_, first) = state.check(&quota, now, 1, now);
//! assert!(state.check(&quota, now, 1, now).0.is_allowed());
//! assert!(!state.check(&quota, now, 1, now).0.is_allowed()); // two running: the third waits
//! state.refund(&quota, &first.unwrap(), now); // the first one ended
//! assert!(state.check(&quota, now, 1, now).0.is_allowed());
//! # Ok::<(), tollgate_core::QuotaError>(())
//! ```

use std::sync::atomic::{AtomicU64, Ordering};

use super::{AlgorithmState, allowed, limit_reached, ppm, screen};
use crate::{Charge, Decision, Quota, Timestamp};

/// The slots held for one key, and the life of the count they belong to.
///
/// Each state starts a new **epoch** (a number no other state of this process had), and its
/// holds carry it: a hold taken before an operator's reset (or any other end of the state) is
/// not given back to the count that replaced it, which holds other requests' slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct InFlight {
    held: u64,
    epoch: u64,
}

impl Default for InFlight {
    /// No slot held, in a new epoch.
    fn default() -> Self {
        InFlight::new(0)
    }
}

impl InFlight {
    /// `held` slots taken, in a new epoch.
    pub fn new(held: u64) -> Self {
        static EPOCHS: AtomicU64 = AtomicU64::new(1);
        let epoch = EPOCHS.fetch_add(1, Ordering::Relaxed) & EPOCH_MASK;
        InFlight { held, epoch }
    }

    /// `held` slots taken in `epoch` (a stored state read back).
    pub(crate) const fn in_epoch(held: u64, epoch: u64) -> Self {
        InFlight { held, epoch }
    }

    /// The slots taken.
    pub const fn held(&self) -> u64 {
        self.held
    }

    /// The state's epoch.
    pub(crate) const fn epoch(&self) -> u64 {
        self.epoch
    }
}

/// The epoch bits of an in-process hold's id.
const EPOCH_MASK: u64 = (1 << 62) - 1;

/// Set in the id of a hold that never lapses (an in-process store's): there is nothing to
/// renew. A remote store's ids stay below 2^53.
pub(crate) const NEVER_LAPSES: u64 = 1 << 62;

impl AlgorithmState for InFlight {
    fn check(
        &mut self,
        quota: &Quota,
        _now: Timestamp,
        cost: u64,
        _not_before: Timestamp,
    ) -> (Decision, Option<Charge>) {
        let limit = quota.limit();
        let free = limit.saturating_sub(self.held);
        if let Some(early) = screen(allowed(limit, free, 0), cost) {
            return early;
        }
        if cost > free {
            return (limit_reached(limit, free, 0, quota.interval_micros()), None);
        }
        self.held += cost;
        let id = self.epoch | NEVER_LAPSES;
        (allowed(limit, free - cost, 0), Some(Charge::held(id, cost)))
    }

    /// Gives back the slots a [`Charge::Held`] of this state's epoch took, whatever the quota
    /// is now; a hold of an earlier epoch (taken before a reset) gives back nothing.
    fn refund(&mut self, _quota: &Quota, charge: &Charge, _now: Timestamp) {
        if let Charge::Held { id, slots } = charge
            && id & EPOCH_MASK == self.epoch
        {
            self.held = self.held.saturating_sub(*slots);
        }
    }

    /// Idle once no slot is held, and never before: a held slot is a running request.
    fn idle_at(&self, _quota: &Quota) -> Timestamp {
        if self.held == 0 {
            Timestamp::EPOCH
        } else {
            // Past any time a clock reads.
            Timestamp::from_micros(u64::MAX)
        }
    }

    fn usage_ppm(&self, quota: &Quota, _now: Timestamp) -> u64 {
        ppm(self.held, quota.limit())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn quota(limit: u64) -> Quota {
        Quota::concurrency_with(limit, Duration::from_secs(3), Duration::from_secs(60)).unwrap()
    }

    #[test]
    fn a_refusal_waits_the_quotas_retry_after_and_says_how_many_are_free() {
        let now = Timestamp::from_secs(1);
        let mut state = InFlight::new(4);
        let (refused, charge) = state.check(&quota(5), now, 2, now);
        assert!(!refused.is_allowed());
        assert_eq!(charge, None);
        assert_eq!(refused.remaining(), 1);
        assert_eq!(refused.retry_after(), Duration::from_secs(3));
        assert_eq!(state.held(), 4, "a refusal takes nothing");
    }

    #[test]
    fn more_slots_than_the_limit_never_fit() {
        let now = Timestamp::from_secs(1);
        let (decision, _) = InFlight::default().check(&quota(5), now, 6, now);
        assert_eq!(
            decision.refusal(),
            Some(crate::RefusalReason::CostExceedsLimit)
        );
    }

    #[test]
    fn a_lowered_limit_keeps_the_running_and_admits_none_until_below_it() {
        let now = Timestamp::from_secs(1);
        let mut state = InFlight::new(8);
        assert!(!state.check(&quota(5), now, 1, now).0.is_allowed());
        state.refund(&quota(5), &Charge::held(state.epoch(), 4), now);
        assert!(state.check(&quota(5), now, 1, now).0.is_allowed());
        assert!(!state.is_idle(&quota(5), Timestamp::MAX_SUPPORTED));
    }

    #[test]
    fn a_hold_of_an_earlier_epoch_gives_back_nothing() {
        let now = Timestamp::from_secs(1);
        let mut before = InFlight::default();
        let (_, old) = before.check(&quota(1), now, 1, now);
        let mut after = InFlight::default();
        after.check(&quota(1), now, 1, now);
        after.refund(&quota(1), &old.unwrap(), now);
        assert_eq!(after.held(), 1, "the new epoch's hold stands");
    }

    #[test]
    fn idle_only_with_nothing_held() {
        let mut state = InFlight::default();
        assert!(state.is_idle(&quota(1), Timestamp::EPOCH));
        let now = Timestamp::from_secs(1);
        let (_, charge) = state.check(&quota(1), now, 1, now);
        assert!(!state.is_idle(&quota(1), Timestamp::MAX_SUPPORTED));
        state.refund(&quota(1), &charge.unwrap(), now);
        assert!(state.is_idle(&quota(1), now));
    }
}
