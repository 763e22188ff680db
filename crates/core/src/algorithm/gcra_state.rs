//! The state token bucket (GCRA) and leaky-bucket pacing share: one theoretical arrival time per
//! key, with the emission interval it was written under. Each algorithm's check is a function of
//! that time in its own file ([`gcra`], [`leaky_bucket`]); this file holds the state, its
//! backlog, how it is read under a changed quota, and its refunds.

use super::{AlgorithmState, gcra, leaky_bucket, ppm};
use crate::{Algorithm, Charge, Decision, Quota, Timestamp};

/// One timestamp per key, the theoretical arrival time, with the emission interval it was
/// written under. Shared by the token bucket (GCRA) and leaky-bucket pacing, which differ only
/// in how they read it.
///
/// Its **backlog** is how far ahead of schedule the caller is, `tat − now` in µs: for a bucket,
/// the time its spent tokens take to come back; for pacing, the time already booked ahead.
///
/// **When the quota changes** (a reloaded rule, a per-plan quota), the state is first rewritten
/// in the new quota's terms, so it means the same thing:
///
/// * a new emission interval: the caller still owes `ceil(backlog / T_old)` units, now worth
///   `T_new` each — `tat' = now + min(owed × T_new, τ_new)` — so 1,000 a day exhausted then 10 a
///   second waits one tenth of a second, not a day, and 100 a second exhausted then 1 a second
///   is still exhausted, not granted 98 at once. Pacing keeps its schedule instead (it is what
///   callers were promised), capped as below.
/// * a smaller capacity (or a clock that stepped back): the backlog is capped at the quota's
///   reach (τ; for pacing, the longest it can build: max delay + limit × T), so nobody waits
///   longer than the new quota could make them wait. That is `now' = max(now, tat − τ)`: an
///   exhausted caller, never a fuller one.
/// * a larger capacity alone changes nothing: the backlog keeps its meaning.
///
/// ```
/// use std::time::Duration;
/// use tollgate_core::algorithm::{gcra_state::GcraState, AlgorithmState};
/// use tollgate_core::{Quota, Rate, Timestamp};
///
/// let now = Timestamp::from_secs(86_400);
/// let daily = Quota::token_bucket(1_000, Rate::per_day(1_000))?;
/// let mut state = GcraState::default();
/// assert!(state.check(&daily, now, 1_000, now).0.is_allowed()); // exhausted for a day
/// let per_second = Quota::token_bucket(10, Rate::per_second(10))?;
/// let (refused, _) = state.check(&per_second, now, 1, now);
/// assert_eq!(refused.retry_after(), Duration::from_millis(100)); // not 86,400 s
/// # Ok::<(), tollgate_core::QuotaError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct GcraState {
    tat: Timestamp,
    /// The emission interval (µs) the TAT was written under; 0 for a state never written.
    interval: u64,
}

impl GcraState {
    /// A state with this theoretical arrival time, written under emission interval `interval`
    /// (µs).
    pub const fn new(tat: Timestamp, interval: u64) -> Self {
        GcraState { tat, interval }
    }

    /// The theoretical arrival time.
    pub const fn tat(&self) -> Timestamp {
        self.tat
    }

    /// The emission interval (µs) the TAT was written under; 0 for a state never written.
    pub const fn interval(&self) -> u64 {
        self.interval
    }

    /// The backlog under `quota` at `now`: how far ahead of schedule (µs) the caller is, the
    /// stored `tat − now` rescaled to `quota`'s emission interval and capped at its reach.
    pub fn backlog(&self, quota: &Quota, now: Timestamp) -> u64 {
        let raw = self.tat.micros_since(now);
        let interval = quota.interval_micros();
        let keeps_schedule = quota.algorithm() == Algorithm::LeakyBucket;
        let rescaled =
            if raw == 0 || self.interval == 0 || self.interval == interval || keeps_schedule {
                raw
            } else {
                raw.div_ceil(self.interval).saturating_mul(interval)
            };
        rescaled.min(reach(quota))
    }

    /// Whether the state must be rewritten before `quota` can read it at `now` (another
    /// emission interval, or a backlog beyond the quota's reach).
    pub(crate) fn needs_rewrite(&self, quota: &Quota, now: Timestamp) -> bool {
        (self.interval != quota.interval_micros() && self.tat > now)
            || self.tat.micros_since(now) > reach(quota)
    }

    /// The check on a state already in `quota`'s terms at `now` (see
    /// [`needs_rewrite`](Self::needs_rewrite)): the in-memory fast path skips the rewrite.
    #[inline(always)]
    pub(crate) fn check_normalized(
        &mut self,
        quota: &Quota,
        now: Timestamp,
        cost: u64,
        not_before: Timestamp,
    ) -> (Decision, Option<Charge>) {
        if quota.algorithm() == Algorithm::LeakyBucket {
            return leaky_bucket::check(&mut self.tat, quota, now, cost, not_before);
        }
        gcra::check(&mut self.tat, quota, now, cost)
    }

    /// Rewrites the state in `quota`'s terms at `now` (see the type's docs).
    pub(crate) fn normalize(&mut self, quota: &Quota, now: Timestamp) {
        if self.tat > now {
            self.tat = now.saturating_add_micros(self.backlog(quota, now));
        }
        self.interval = quota.interval_micros();
    }
}

/// The longest backlog `quota` can build: τ for a token bucket (GCRA); for pacing the maximum
/// delay and `limit` slots more (a request may start after the maximum delay and take up to
/// `limit` slots).
pub(crate) fn reach(quota: &Quota) -> u64 {
    match quota.algorithm() {
        Algorithm::LeakyBucket => quota
            .span_micros()
            .saturating_add(quota.limit().saturating_mul(quota.interval_micros())),
        _ => quota.span_micros(),
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
        self.normalize(quota, now);
        self.check_normalized(quota, now, cost, not_before)
    }

    fn earliest_start(&self, quota: &Quota, now: Timestamp) -> Timestamp {
        if quota.algorithm() == Algorithm::LeakyBucket {
            return now.saturating_add_micros(self.backlog(quota, now));
        }
        now
    }

    /// Gives back what is left of the charge: `min(micros, until − now, tat − now)` — nothing
    /// once `until` has passed (the charge has been paid back by time), and never more than the
    /// caller owes. Tokens are alike, so receipts may be refunded in any order. Nothing when the
    /// emission interval has changed since.
    ///
    /// Pacing gives back only the latest booking, the part of `[until − micros, until)` not yet
    /// past: an earlier booking's slot is already promised to the bookings after it.
    ///
    /// A receipt in flight across a smaller capacity (or a clock that stepped back) can still
    /// give back its whole cost, up to what the caller owes, though the cut already forgave part
    /// of what was owed; at most its own cost, once.
    fn refund(&mut self, quota: &Quota, charge: &Charge, now: Timestamp) {
        let Charge::Scheduled { micros, until } = *charge else {
            return;
        };
        if self.interval != 0 && self.interval != quota.interval_micros() {
            return;
        }
        let held = if quota.algorithm() == Algorithm::LeakyBucket {
            if until < self.tat {
                return;
            }
            let booked = Timestamp::from_micros(until.as_micros().saturating_sub(micros));
            self.tat.micros_since(booked.max(now))
        } else {
            micros
                .min(until.micros_since(now))
                .min(self.tat.micros_since(now))
        };
        self.tat = Timestamp::from_micros(self.tat.as_micros().saturating_sub(held));
    }

    fn idle_at(&self, _quota: &Quota) -> Timestamp {
        self.tat
    }

    fn usage_ppm(&self, quota: &Quota, now: Timestamp) -> u64 {
        ppm(self.backlog(quota, now), reach(quota))
    }
}
