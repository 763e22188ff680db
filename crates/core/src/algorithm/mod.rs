//! The limiting algorithms, one file each, as pure functions over small integer states.
//!
//! | algorithm | state per key | worst case admitted | accuracy | use it for |
//! |---|---|---|---|---|
//! | [token bucket](token_bucket), computed as [GCRA](gcra) | one timestamp + its interval | B + R × t in any span t (capacity or burst B, rate R) | exact | most API limits |
//! | [fixed window](fixed_window) | window start, length, count | 2 × limit within one window's span, across a boundary | coarse | cheap counters |
//! | [sliding window counter](sliding_window_counter) | window start, length, two counts | 2 × limit − 1 in one rolling window (the estimate's blind spot); about the limit for spread-out traffic | estimate | "N in any rolling day" |
//! | [sliding window log](sliding_window_log) | one entry per charge | the limit, in any rolling window | exact | small, strict limits |
//! | [leaky bucket](leaky_bucket) | one timestamp + its interval | 1 + t / T starts in any span t (one per emission interval T) | exact | pacing calls to a provider |
//! | [concurrency] | slots held | the limit, running at once | exact | slow, expensive requests |
//!
//! Every store evaluates the same functions (the Redis store in Lua, over the same integers), so
//! a rule decides the same wherever its state lives. Time is whole microseconds since the Unix
//! epoch; windows start at whole multiples of their length since the epoch.
//!
//! **State outlives its quota.** A rule's quota can change while callers have state (a reloaded
//! rule file, a per-plan quota). Every state records what it was written under (a bucket's
//! emission interval, a window's start and length; a log's entries are absolute times) and is
//! read in the new quota's terms: the caller keeps what it owed, capped at the new quota's full
//! allowance; it never waits longer than the new quota could make it wait, and is never granted
//! more than it would have had. Each module says how. Two limits of that rule, by design:
//!
//! * the cap applies at every change, so a key switched back and forth between a generous and a
//!   small quota is forgiven, at each switch, whatever it owed beyond the small quota's
//!   allowance. Quotas per key are for plans and reloads, which change rarely: never let a
//!   caller pick its own quota request by request.
//! * state is kept per algorithm family (buckets and pacing; fixed windows; sliding counters;
//!   logs), so a change of family starts the caller afresh in the new family — at most one fresh
//!   allowance per change — and the old state is read again if the rule changes back before it
//!   expires.
//! * a refused batch that names one rule and key under two quotas of different intervals (two
//!   layers configured differently for one rule id) may keep the first item's charge: the second
//!   item rewrote the state in its own terms, and a charge made under another interval is not
//!   given back (as a receipt's is not). Give each configuration its own rule id.
//!
//! **Clocks that step back** (a Redis failover onto a replica whose `TIME` is behind) grant
//! nothing, by one rule in every store and with no extra state: windows and logs read "now" as
//! no earlier than the stored window's start or newest entry, so their count stands until the
//! clock catches up (a caller waits at most the step back plus its own wait); buckets and pacing
//! read it as no earlier than `tat − τ` (an exhausted bucket) and keep that, so a clock an hour
//! behind costs a bucket's caller at most one full refill, not an hour.

pub mod concurrency;
pub mod fixed_window;
pub mod gcra;
pub mod gcra_state;
pub mod leaky_bucket;
pub mod sliding_window_counter;
pub mod sliding_window_log;
pub(crate) mod taking;
pub mod token_bucket;

use crate::{Charge, Decision, Quota, RefusalReason, Timestamp, Verdict};

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

    /// Undoes what is left of `charge` at `now`; `quota` is the quota it was charged under.
    /// Charges of another algorithm, into a window that is gone, under another interval or
    /// window length, or whose time has passed, give back nothing.
    fn refund(&mut self, quota: &Quota, charge: &Charge, now: Timestamp);

    /// When dropping this state will lose nothing (expired, or full again); `quota` is the quota
    /// it was last checked under.
    fn idle_at(&self, quota: &Quota) -> Timestamp;

    /// Whether dropping this state would lose nothing now.
    fn is_idle(&self, quota: &Quota, now: Timestamp) -> bool {
        self.idle_at(quota) <= now
    }

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
        Verdict::Refused(RefusalReason::LimitReached),
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
            Verdict::Refused(RefusalReason::CostExceedsLimit),
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
