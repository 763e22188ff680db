//! GCRA, the generic cell rate algorithm: a rate with a burst, stored as one timestamp.
//!
//! With a rate of 10 a second, requests are due every T = 100 ms (the *emission interval*). For
//! each key the state is one number, the *theoretical arrival time* (TAT): when the next request
//! would be exactly on schedule. A burst of B lets requests run ahead of schedule by up to
//! τ = B × T. For a request of cost c at `now`:
//!
//! ```text
//! new_tat = max(now, tat) + c × T
//! if new_tat − now > τ: refuse, retry after (new_tat − now − τ)
//! else:                 tat = new_tat; allow
//! ```
//!
//! **Trade-off.** Behaves exactly like a token bucket of capacity B refilled one token per T
//! (see [`token_bucket`](super::token_bucket)) with less state: no windows to reset, no refill to
//! compute, nothing to expire but the key itself (at TAT, when the bucket is full again). It is
//! exact and cheap; its only cost is that "bursts of 5, then 10 a second" must be expressed as a
//! rate and a burst. A cost larger than B can never fit and is refused as such.
//!
//! ```
//! use std::time::Duration;
//! use tollgate_core::algorithm::{gcra::GcraState, AlgorithmState};
//! use tollgate_core::{Quota, Rate, Timestamp};
//!
//! let quota = Quota::gcra(Rate::per_second(10), 5)?;
//! let now = Timestamp::from_secs(1_000);
//! let mut state = GcraState::default();
//! for _ in 0..5 {
//!     assert!(state.check(&quota, now, 1, now).0.is_allowed());
//! }
//! let (sixth, _) = state.check(&quota, now, 1, now);
//! assert_eq!(sixth.retry_after(), Duration::from_millis(100));
//! # Ok::<(), tollgate_core::QuotaError>(())
//! ```

use super::{AlgorithmState, allowed, leaky_bucket, limit_reached, ppm, screen};
use crate::{Algorithm, Charge, Decision, Quota, Timestamp};

/// One timestamp per key: the theoretical arrival time. Shared by token bucket, GCRA and
/// leaky-bucket pacing, which differ only in how they read it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct GcraState {
    tat: Timestamp,
}

impl GcraState {
    /// A state with this theoretical arrival time.
    pub const fn new(tat: Timestamp) -> Self {
        GcraState { tat }
    }

    /// The theoretical arrival time.
    pub const fn tat(&self) -> Timestamp {
        self.tat
    }

    pub(crate) fn set_tat(&mut self, tat: Timestamp) {
        self.tat = tat;
    }
}

impl AlgorithmState for GcraState {
    #[inline(always)]
    fn check(
        &mut self,
        quota: &Quota,
        now: Timestamp,
        cost: u64,
        not_before: Timestamp,
    ) -> (Decision, Option<Charge>) {
        if quota.algorithm() == Algorithm::LeakyBucket {
            return leaky_bucket::check(self, quota, now, cost, not_before);
        }
        check(self, quota, now, cost)
    }

    fn earliest_start(&self, quota: &Quota, now: Timestamp) -> Timestamp {
        if quota.algorithm() == Algorithm::LeakyBucket {
            return self.tat.max(now);
        }
        now
    }

    fn refund(&mut self, _quota: &Quota, charge: &Charge) {
        if let Charge::Scheduled { micros } = charge {
            self.tat = Timestamp::from_micros(self.tat.as_micros().saturating_sub(*micros));
        }
    }

    fn is_idle(&self, _quota: &Quota, now: Timestamp) -> bool {
        self.tat <= now
    }

    fn usage_ppm(&self, quota: &Quota, now: Timestamp) -> u64 {
        let span = match quota.algorithm() {
            Algorithm::LeakyBucket => quota.span_micros().saturating_add(quota.interval_micros()),
            _ => quota.span_micros(),
        };
        ppm(self.tat.micros_since(now), span)
    }
}

/// The GCRA check (token bucket and GCRA quotas).
#[inline(always)]
fn check(
    state: &mut GcraState,
    quota: &Quota,
    now: Timestamp,
    cost: u64,
) -> (Decision, Option<Charge>) {
    let interval = quota.interval_micros();
    let tolerance = quota.span_micros();
    let limit = quota.limit();
    // Debt: how far ahead of schedule this key already is. A clock that went backwards makes it
    // larger, never smaller, so it grants nothing.
    let debt = state.tat.micros_since(now);
    let remaining_now = tolerance.saturating_sub(debt) / interval;
    let current = allowed(limit, remaining_now, debt);
    if let Some(early) = screen(current, cost) {
        return early;
    }
    let added = cost * interval; // cost <= limit, so this is at most tolerance <= 2^52.
    let new_debt = debt.saturating_add(added);
    if new_debt > tolerance {
        let refused = limit_reached(limit, remaining_now, debt, new_debt - tolerance);
        return (refused, None);
    }
    state.tat = now.saturating_add_micros(new_debt);
    let remaining = (tolerance - new_debt) / interval;
    let allowed = allowed(limit, remaining, new_debt);
    (allowed, Some(Charge::Scheduled { micros: added }))
}
