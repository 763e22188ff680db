//! Leaky bucket as pacing: requests are put on a steady schedule and told how long to wait.
//!
//! This is *virtual scheduling*: GCRA whose tolerance is the longest a request may wait. Each
//! key keeps one timestamp, the next free slot (TAT). A request of cost c starts at
//! `start = max(now, tat)`, waits `start − now`, and moves the next free slot to
//! `start + c × T`. A request that would wait longer than the maximum delay is refused, with a
//! retry-after of how much too long it would wait. There are no queues and no timers, so a
//! shared store decides pacing exactly like the in-memory one.
//!
//! **When the quota changes** the schedule is kept — it is what earlier callers were told to
//! wait for — but a backlog longer than the new quota could build (its maximum delay plus
//! `limit` slots) is cut to that, so the worst wait after a change is the new quota's own worst:
//! a refusal says to retry after at most `limit × T` beyond the maximum delay. A clock that
//! steps back is cut the same way.
//!
//! **Trade-off.** Smooths bursts instead of refusing them, which suits work that must go out at a
//! steady pace (SMS to a provider that cannot take spikes). Waiting callers hold a connection
//! open; a long maximum delay can hide overload, so keep it short.
//!
//! ```
//! use std::time::Duration;
//! use tollgate_core::algorithm::{gcra_state::GcraState, AlgorithmState};
//! use tollgate_core::{Quota, Rate, Timestamp};
//!
//! let quota = Quota::leaky_bucket(Rate::per_second(10), Duration::from_millis(200))?;
//! let now = Timestamp::from_secs(1);
//! let mut state = GcraState::default();
//! let delays: Vec<_> = (0..3).map(|_| state.check(&quota, now, 1, now).0.delay()).collect();
//! assert_eq!(delays, [Duration::ZERO, Duration::from_millis(100), Duration::from_millis(200)]);
//! assert!(!state.check(&quota, now, 1, now).0.is_allowed());
//! # Ok::<(), tollgate_core::QuotaError>(())
//! ```

use super::{allowed, limit_reached, screen};
use crate::{Charge, Decision, Quota, Timestamp, Verdict};

/// The pacing check on the next free slot `tat`, already in `quota`'s terms (see
/// [`GcraState`](super::gcra_state::GcraState), the state it shares with the token bucket):
/// books the request's slots if it may wait that long.
pub(super) fn check(
    tat: &mut Timestamp,
    quota: &Quota,
    now: Timestamp,
    cost: u64,
    not_before: Timestamp,
) -> (Decision, Option<Charge>) {
    let interval = quota.interval_micros();
    let max_delay = quota.span_micros();
    let limit = quota.limit();
    let slots_left = |backlog: u64| {
        if backlog <= max_delay {
            (max_delay - backlog) / interval + 1
        } else {
            0
        }
    };
    let backlog = tat.micros_since(now);
    let current = allowed(limit, slots_left(backlog), backlog);
    if let Some(early) = screen(current, cost) {
        return early;
    }
    let scheduled_until = (*tat).max(now);
    let start = scheduled_until.max(not_before);
    let delay = start.micros_since(now);
    if delay > max_delay {
        let refused = limit_reached(limit, slots_left(backlog), backlog, delay - max_delay);
        return (refused, None);
    }
    let next_free = start.saturating_add_micros(cost * interval);
    *tat = next_free;
    // The charge includes any gap left by `not_before`, so a refund restores the schedule.
    let added = next_free.micros_since(scheduled_until);
    let new_backlog = next_free.micros_since(now);
    let allowed = Decision::from_micros(
        Verdict::Allowed,
        limit,
        slots_left(new_backlog),
        new_backlog,
        0,
        delay,
    );
    (allowed, Some(Charge::scheduled(added, next_free)))
}
