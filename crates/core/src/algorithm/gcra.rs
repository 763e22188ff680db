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
//! This file is the check alone, a function of the TAT; the state it runs on (and how that
//! state is read under a changed quota) is [`GcraState`](super::gcra_state::GcraState), which
//! pacing shares.
//!
//! ```
//! use std::time::Duration;
//! use tollgate_core::algorithm::{gcra_state::GcraState, AlgorithmState};
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

use super::{allowed, limit_reached, screen};
use crate::{Charge, Decision, Quota, Timestamp};

/// The GCRA check of a token bucket quota on the theoretical arrival time `tat`, already in
/// `quota`'s terms (see [`GcraState`](super::gcra_state::GcraState)): moves it on by the cost if
/// allowed.
#[inline(always)]
pub(super) fn check(
    tat: &mut Timestamp,
    quota: &Quota,
    now: Timestamp,
    cost: u64,
) -> (Decision, Option<Charge>) {
    let interval = quota.interval_micros();
    let tolerance = quota.span_micros();
    let limit = quota.limit();
    // How far ahead of schedule this key already is (never beyond τ: see `normalize`).
    let backlog = tat.micros_since(now);
    let remaining_now = tolerance.saturating_sub(backlog) / interval;
    let current = allowed(limit, remaining_now, backlog);
    if let Some(early) = screen(current, cost) {
        return early;
    }
    let added = cost * interval; // cost <= limit, so this is at most tolerance <= 2^52.
    let new_backlog = backlog.saturating_add(added);
    if new_backlog > tolerance {
        let refused = limit_reached(limit, remaining_now, backlog, new_backlog - tolerance);
        return (refused, None);
    }
    *tat = now.saturating_add_micros(new_backlog);
    let remaining = (tolerance - new_backlog) / interval;
    let allowed = allowed(limit, remaining, new_backlog);
    (allowed, Some(Charge::scheduled(added, *tat)))
}
