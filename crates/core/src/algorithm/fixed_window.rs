//! Fixed window: one counter per epoch-aligned window, reset at the boundary.
//!
//! Window number `n` covers `[n × W, (n + 1) × W)` microseconds since the Unix epoch, so every
//! store agrees on the boundaries. A request of cost c passes when `count + c <= limit`.
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

/// The current window's number and count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct WindowCount {
    window: u64,
    count: u64,
}

impl WindowCount {
    /// The count in window number `window`.
    pub const fn new(window: u64, count: u64) -> Self {
        WindowCount { window, count }
    }

    /// The window's number.
    pub const fn window(&self) -> u64 {
        self.window
    }

    /// The count in that window.
    pub const fn count(&self) -> u64 {
        self.count
    }
}

/// The number of the window `now` falls in, never earlier than `latest_seen` (a clock that went
/// backwards counts as no time passing).
pub(crate) fn window_number(quota: &Quota, now: Timestamp, latest_seen: u64) -> u64 {
    (now.as_micros() / quota.interval_micros()).max(latest_seen)
}

/// Microseconds from `now` to the end of window `window` (plus `extra` whole windows).
pub(crate) fn until_window_end(quota: &Quota, window: u64, extra: u64, now: Timestamp) -> u64 {
    let end = window
        .saturating_add(1 + extra)
        .saturating_mul(quota.interval_micros());
    end.saturating_sub(now.as_micros())
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
        let window = window_number(quota, now, self.window);
        if window != self.window {
            *self = WindowCount { window, count: 0 };
        }
        let reset_after = until_window_end(quota, window, 0, now);
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
        (allowed, Some(Charge::Window { window, cost }))
    }

    fn refund(&mut self, _quota: &Quota, charge: &Charge) {
        if let Charge::Window { window, cost } = charge
            && *window == self.window
        {
            self.count = self.count.saturating_sub(*cost);
        }
    }

    fn is_idle(&self, quota: &Quota, now: Timestamp) -> bool {
        self.count == 0 || window_number(quota, now, 0) > self.window
    }

    fn usage_ppm(&self, quota: &Quota, now: Timestamp) -> u64 {
        if self.is_idle(quota, now) {
            return 0;
        }
        ppm(self.count, quota.limit())
    }
}
