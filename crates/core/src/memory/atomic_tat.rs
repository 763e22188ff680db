//! The one-timestamp state (token bucket, GCRA, pacing) in an atomic, so a check on a key the
//! store already holds needs only a shared lock and one compare-and-swap.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::algorithm::AlgorithmState;
use crate::algorithm::gcra::GcraState;
use crate::{Charge, Decision, Quota, Timestamp};

/// A [`GcraState`] that can also be checked through a shared reference.
#[derive(Debug, Default)]
pub(crate) struct AtomicTat(AtomicU64);

impl Clone for AtomicTat {
    fn clone(&self) -> Self {
        AtomicTat(AtomicU64::new(self.0.load(Ordering::Acquire)))
    }
}

impl AtomicTat {
    fn snapshot(&self) -> GcraState {
        GcraState::new(Timestamp::from_micros(self.0.load(Ordering::Acquire)))
    }

    /// Runs `change` on the state with exclusive access (no atomic operation needed).
    fn with_state<R>(&mut self, change: impl FnOnce(&mut GcraState) -> R) -> R {
        let mut state = GcraState::new(Timestamp::from_micros(*self.0.get_mut()));
        let result = change(&mut state);
        *self.0.get_mut() = state.tat().as_micros();
        result
    }

    /// The check through a shared reference: evaluate a snapshot, and publish the charge only if
    /// nobody changed the state meanwhile (otherwise evaluate again). A refusal writes nothing.
    #[inline]
    pub(crate) fn check_shared(
        &self,
        quota: &Quota,
        now: Timestamp,
        cost: u64,
    ) -> (Decision, Option<Charge>) {
        let mut seen = self.0.load(Ordering::Acquire);
        loop {
            let mut state = GcraState::new(Timestamp::from_micros(seen));
            let outcome = state.check(quota, now, cost, now);
            if outcome.1.is_none() {
                return outcome;
            }
            let charged = state.tat().as_micros();
            match self
                .0
                .compare_exchange_weak(seen, charged, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return outcome,
                Err(current) => seen = current,
            }
        }
    }
}

impl AlgorithmState for AtomicTat {
    #[inline]
    fn check(
        &mut self,
        quota: &Quota,
        now: Timestamp,
        cost: u64,
        not_before: Timestamp,
    ) -> (Decision, Option<Charge>) {
        self.with_state(|state| state.check(quota, now, cost, not_before))
    }

    fn earliest_start(&self, quota: &Quota, now: Timestamp) -> Timestamp {
        self.snapshot().earliest_start(quota, now)
    }

    fn refund(&mut self, quota: &Quota, charge: &Charge) {
        self.with_state(|state| state.refund(quota, charge));
    }

    fn is_idle(&self, quota: &Quota, now: Timestamp) -> bool {
        self.snapshot().is_idle(quota, now)
    }

    fn usage_ppm(&self, quota: &Quota, now: Timestamp) -> u64 {
        self.snapshot().usage_ppm(quota, now)
    }

    fn peek(&self, quota: &Quota, now: Timestamp, cost: u64) -> Decision {
        self.snapshot().peek(quota, now, cost)
    }
}
