//! The limiting algorithms, one file each, as pure functions over small integer states.
//!
//! | algorithm | state per key | bursts | accuracy | use it for |
//! |---|---|---|---|---|
//! | [token bucket](token_bucket) | one timestamp (computed as GCRA) | up to the capacity | exact | most API limits |
//! | [GCRA](gcra) | one timestamp | up to the burst | exact | the same, in rate + burst terms |
//! | [fixed window](fixed_window) | window number + count | up to 2× at a boundary | coarse | cheap counters |
//! | [sliding window counter](sliding_window_counter) | window number + two counts | none beyond the limit | estimate | "N in any rolling day" |
//! | [sliding window log](sliding_window_log) | one entry per charge | none | exact | small, strict limits |
//! | [leaky bucket](leaky_bucket) | one timestamp | none: delays instead | exact | pacing calls to a provider |
//!
//! Every store evaluates the same functions (the Redis store in Lua, over the same integers), so
//! a rule decides the same wherever its state lives. Time is whole microseconds since the Unix
//! epoch; windows are numbered from the epoch. A clock that steps backwards never grants anything:
//! stores also never let their "now" go backwards for a key, which makes it count as no time
//! passing.

pub mod fixed_window;
pub mod gcra;
pub mod leaky_bucket;
pub mod sliding_window_counter;
pub mod sliding_window_log;
pub mod token_bucket;

use crate::{Charge, Decision, Quota, Refusal, Timestamp, Verdict};

/// The state one algorithm keeps for one key, and how it evaluates a request.
///
/// `check` mutates the state only to charge an allowed request (and to normalise it, such as
/// dropping expired log entries or rolling a window, which loses nothing). Undoing a charge is
/// `refund` with the returned [`Charge`], which restores the state exactly; stores build
/// all-or-nothing batches on that.
pub trait AlgorithmState: Default + Clone + Send + Sync + 'static {
    /// Evaluates `cost` at `now` and charges it if allowed. `not_before` only matters for pacing:
    /// the request is scheduled no earlier than that (several pacing rules in one request are all
    /// charged at the latest of their earliest slots). A zero cost reports the current state and
    /// charges nothing.
    fn check(
        &mut self,
        quota: &Quota,
        now: Timestamp,
        cost: u64,
        not_before: Timestamp,
    ) -> (Decision, Option<Charge>);

    /// When a pacing request of this cost could start at the earliest (`now` for others).
    fn earliest_start(&self, _quota: &Quota, now: Timestamp) -> Timestamp {
        now
    }

    /// Undoes `charge`. Charges of another algorithm, or into a window that is gone, are ignored.
    fn refund(&mut self, quota: &Quota, charge: &Charge);

    /// Whether dropping this state would lose nothing (expired, or full again).
    fn is_idle(&self, quota: &Quota, now: Timestamp) -> bool;

    /// How much of the limit this state holds, in millionths (0 when idle, 1,000,000 or more when
    /// exhausted). Stores that must evict live state evict the lowest first, so a caller who is
    /// being refused is the last to be forgotten.
    fn usage_ppm(&self, quota: &Quota, now: Timestamp) -> u64;

    /// Would `cost` pass now? Evaluates a copy; charges nothing.
    fn peek(&self, quota: &Quota, now: Timestamp, cost: u64) -> Decision {
        self.clone().check(quota, now, cost, now).0
    }
}

/// Parts per million of `part / whole`, saturating.
pub(crate) fn ppm(part: u64, whole: u64) -> u64 {
    let scaled = u128::from(part) * 1_000_000 / u128::from(whole.max(1));
    u64::try_from(scaled).unwrap_or(u64::MAX)
}

/// An allowed decision, in µs.
pub(crate) const fn allowed(limit: u64, remaining: u64, reset_after: u64) -> Decision {
    Decision::from_micros(Verdict::Allowed, limit, remaining, reset_after, 0, 0)
}

/// A refusal because the quota is used up for now, in µs.
pub(crate) const fn limit_reached(
    limit: u64,
    remaining: u64,
    reset_after: u64,
    retry_after: u64,
) -> Decision {
    Decision::from_micros(
        Verdict::Refused(Refusal::LimitReached),
        limit,
        remaining,
        reset_after,
        retry_after,
        0,
    )
}

/// The opening every check shares: a zero cost reports the `current` state, and a cost above the
/// limit is refused for good (retry-after zero). `None` when the cost must be evaluated.
pub(crate) fn screen(current: Decision, cost: u64) -> Option<(Decision, Option<Charge>)> {
    if cost == 0 {
        return Some((current, None));
    }
    if cost > current.limit() {
        let never_fits = Decision::from_micros(
            Verdict::Refused(Refusal::CostExceedsLimit),
            current.limit(),
            current.remaining(),
            u64::try_from(current.reset_after().as_micros()).unwrap_or(u64::MAX),
            0,
            0,
        );
        return Some((never_fits, None));
    }
    None
}
