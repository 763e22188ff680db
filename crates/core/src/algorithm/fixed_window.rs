//! Fixed window: one counter per epoch-aligned window, reset at the boundary.
//!
//! Windows of length W start at whole multiples of W microseconds since the Unix epoch, so every
//! store agrees on the boundaries. A request of cost c passes when `count + c <= limit`.
//!
//! The state records the window's start **and length** with its count, so it keeps its meaning
//! when the quota changes: under a new length L the current window is `[s, s + L)` with
//! `s = ⌊now / L⌋ × L`; the count carries over when the old window is still running and overlaps
//! it, and starts from zero otherwise (a window that has ended holds nothing, under any quota —
//! as Redis, which has expired it by then). A count above a lowered limit is cut to the limit. A clock that steps back is read as the window's
//! start: the count stays until the clock is past the window's end again, and the waits a
//! refusal announces are measured from the real clock, so they hold.
//!
//! **Worst case:** up to 2 × limit in one window's span, across a boundary.
//!
//! **Trade-off.** The cheapest limiter: two integers per key (Redis: one `INCRBY` + `EXPIRE`).
//! Its weakness is the boundary: with 60 a minute, a caller can send 60 at 12:00:59 and 60 more
//! at 12:01:00 — 120 in about a second, twice the intended rate. Use a
//! [sliding window counter](super::sliding_window_counter) or a
//! [token bucket](super::token_bucket) when that matters.
//!
//! ```
//! use std::time::Duration;
//! use tollgate_core::algorithm::{fixed_window::WindowCount, AlgorithmState};
//! use tollgate_core::{Quota, Timestamp};
//!
//! let quota = Quota::fixed_window(60, Duration::from_secs(60))?;
//! let mut state = WindowCount::default();
//! let just_before = Timestamp::from_secs(119);
//! let just_after = Timestamp::from_secs(120);
//! assert!(state.check(&quota, just_before, 60, just_before).0.is_allowed());
//! assert!(state.check(&quota, just_after, 60, just_after).0.is_allowed()); // 120 in one second
//! # Ok::<(), tollgate_core::QuotaError>(())
//! ```

use super::{AlgorithmState, allowed, limit_reached, ppm, screen};
use crate::{Charge, Decision, Quota, Timestamp};

/// The current window's start and length, and its count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct WindowCount {
    start: Timestamp,
    /// µs; 0 for a state never written.
    length: u64,
    count: u64,
}

impl WindowCount {
    /// `count` in the window of `length` µs starting at `start`.
    pub const fn new(start: Timestamp, length: u64, count: u64) -> Self {
        WindowCount {
            start,
            length,
            count,
        }
    }

    /// The window's start.
    pub const fn start(&self) -> Timestamp {
        self.start
    }

    /// The window's length in µs (0 for a state never written).
    pub const fn length(&self) -> u64 {
        self.length
    }

    /// The count in that window.
    pub const fn count(&self) -> u64 {
        self.count
    }

    /// Moves the state to the window of `quota` that `now` falls in (see the module docs);
    /// answers "now", never earlier than the stored window's start.
    pub(crate) fn normalize(&mut self, quota: &Quota, now: Timestamp) -> Timestamp {
        let length = quota.interval_micros();
        let now = if self.length == 0 {
            now
        } else {
            now.max(self.start)
        };
        let start = window_start(now, length);
        let count = if self.length == length {
            if self.start == start {
                self.count.min(quota.limit())
            } else {
                0
            }
        } else if self.length == 0
            || self.start.saturating_add_micros(self.length) <= now
            || !overlaps(self.start, self.length, start, length)
        {
            0
        } else {
            self.count.min(quota.limit())
        };
        *self = WindowCount::new(start, length, count);
        now
    }
}

/// The start of the window of `length` µs that `now` falls in.
pub(crate) fn window_start(now: Timestamp, length: u64) -> Timestamp {
    Timestamp::from_micros(now.as_micros() / length * length)
}

/// Whether `[a, a + a_len)` and `[b, b + b_len)` share an instant.
pub(crate) fn overlaps(a: Timestamp, a_len: u64, b: Timestamp, b_len: u64) -> bool {
    a < b.saturating_add_micros(b_len) && a.saturating_add_micros(a_len) > b
}

impl AlgorithmState for WindowCount {
    fn check(
        &mut self,
        quota: &Quota,
        now: Timestamp,
        cost: u64,
        _not_before: Timestamp,
    ) -> (Decision, Option<Charge>) {
        let limit = quota.limit();
        self.normalize(quota, now);
        // Measured from the real "now": after a clock stepped back, the wait is honest.
        let reset_after = self
            .start
            .saturating_add_micros(self.length)
            .micros_since(now);
        let remaining_now = limit.saturating_sub(self.count);
        let current = allowed(limit, remaining_now, reset_after);
        if let Some(early) = screen(current, cost) {
            return early;
        }
        if cost > remaining_now {
            let refused = limit_reached(limit, remaining_now, reset_after, reset_after);
            return (refused, None);
        }
        self.count += cost;
        let allowed = allowed(limit, remaining_now - cost, reset_after);
        (allowed, Some(Charge::window(self.start, cost)))
    }

    /// Takes the cost out of the window it went into, if that window is still running (same
    /// start, same length, not ended); otherwise the charge holds nothing any more.
    fn refund(&mut self, quota: &Quota, charge: &Charge, now: Timestamp) {
        if let Charge::Window { start, cost } = charge
            && *start == self.start
            && self.length == quota.interval_micros()
            && self.start.saturating_add_micros(self.length) > now
        {
            self.count = self.count.saturating_sub(*cost);
        }
    }

    fn idle_at(&self, _quota: &Quota) -> Timestamp {
        if self.count == 0 {
            return Timestamp::EPOCH;
        }
        self.start.saturating_add_micros(self.length)
    }

    fn usage_ppm(&self, quota: &Quota, now: Timestamp) -> u64 {
        if self.is_idle(quota, now) {
            return 0;
        }
        ppm(self.count, quota.limit())
    }
}
