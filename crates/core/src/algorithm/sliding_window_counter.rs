//! Sliding window counter: a rolling window estimated from two fixed windows.
//!
//! Keep this window's count and the previous one's, and weight the previous count by how much
//! of it still overlaps the rolling window. At 12:01:15, with 80 last minute and 30 so far this
//! minute, the estimate is `80 × 45/60 + 30 = 90`, under a limit of 100, so a request passes.
//! tollgate compares in integers scaled by the window length, so nothing is rounded:
//!
//! ```text
//! allowed  ⇔  previous × (W − elapsed) + (current + cost) × W  ≤  limit × W
//! ```
//!
//! **Trade-off.** Two counters per key, no boundary double-burst, and a clean "no more than N in
//! any rolling window" — but it assumes last window's requests were spread evenly, so it is an
//! estimate. Chirp uses it for daily limits ("400 follows a day").
//!
//! ```
//! use std::time::Duration;
//! use tollgate_core::algorithm::{sliding_window_counter::SlidingCounts, AlgorithmState};
//! use tollgate_core::{Quota, Timestamp};
//!
//! let quota = Quota::sliding_window_counter(100, Duration::from_secs(60))?;
//! // Window 1 (60 s to 120 s) held 80; 30 so far in window 2; now is 15 s into window 2.
//! let mut state = SlidingCounts::new(2, 80, 30);
//! let now = Timestamp::from_secs(135);
//! let (decision, _) = state.check(&quota, now, 1, now);
//! assert!(decision.is_allowed());
//! assert_eq!(decision.remaining(), 9); // 100 - (90 + 1)
//! # Ok::<(), tollgate_core::QuotaError>(())
//! ```

use super::fixed_window::{until_window_end, window_number};
use super::{AlgorithmState, allowed, limit_reached, ppm, screen};
use crate::{Charge, Decision, Quota, Timestamp};

/// The current window's number, the previous window's count and the current count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct SlidingCounts {
    window: u64,
    previous: u64,
    current: u64,
}

impl SlidingCounts {
    /// Counts for window number `window` (current) and the one before it (previous).
    pub const fn new(window: u64, previous: u64, current: u64) -> Self {
        SlidingCounts {
            window,
            previous,
            current,
        }
    }

    /// The current window's number.
    pub const fn window(&self) -> u64 {
        self.window
    }

    /// The previous window's count.
    pub const fn previous(&self) -> u64 {
        self.previous
    }

    /// The current window's count.
    pub const fn current(&self) -> u64 {
        self.current
    }

    /// Rolls the state forward to `window` (never backwards).
    fn roll_to(&mut self, window: u64) {
        if window == self.window {
            return;
        }
        let previous = if window == self.window.saturating_add(1) {
            self.current
        } else {
            0
        };
        *self = SlidingCounts::new(window, previous, 0);
    }
}

impl AlgorithmState for SlidingCounts {
    fn check(
        &mut self,
        quota: &Quota,
        now: Timestamp,
        cost: u64,
        _not_before: Timestamp,
    ) -> (Decision, Option<Charge>) {
        let limit = quota.limit();
        let length = quota.interval_micros();
        let window = window_number(quota, now, self.window);
        self.roll_to(window);
        let window_start = window.saturating_mul(length);
        let elapsed = now.as_micros().saturating_sub(window_start).min(length);
        let overlap = length - elapsed;
        let wide = u128::from;
        // Everything below is scaled by the window length, so the estimate is never rounded.
        let used = wide(self.previous) * wide(overlap) + wide(self.current) * wide(length);
        let capacity = wide(limit) * wide(length);
        let remaining_for = |used: u128| {
            u64::try_from(capacity.saturating_sub(used) / wide(length)).unwrap_or(u64::MAX)
        };
        let reset_after = if self.current > 0 {
            until_window_end(quota, window, 1, now)
        } else if self.previous > 0 {
            until_window_end(quota, window, 0, now)
        } else {
            0
        };
        let current = allowed(limit, remaining_for(used), reset_after);
        if let Some(early) = screen(current, cost) {
            return early;
        }
        let after = used + wide(cost) * wide(length);
        if after > capacity {
            let retry_after = self.retry_after(limit, length, elapsed, cost);
            let refused = limit_reached(limit, remaining_for(used), reset_after, retry_after);
            return (refused, None);
        }
        self.current += cost;
        let reset_after = until_window_end(quota, window, 1, now);
        let allowed = allowed(limit, remaining_for(after), reset_after);
        (allowed, Some(Charge::Window { window, cost }))
    }

    fn refund(&mut self, _quota: &Quota, charge: &Charge) {
        if let Charge::Window { window, cost } = charge {
            if *window == self.window {
                self.current = self.current.saturating_sub(*cost);
            } else if window.saturating_add(1) == self.window {
                self.previous = self.previous.saturating_sub(*cost);
            }
        }
    }

    fn is_idle(&self, quota: &Quota, now: Timestamp) -> bool {
        let window = window_number(quota, now, 0);
        (self.previous == 0 && self.current == 0)
            || window > self.window.saturating_add(1)
            || (window == self.window.saturating_add(1) && self.current == 0)
    }

    fn usage_ppm(&self, quota: &Quota, now: Timestamp) -> u64 {
        if self.is_idle(quota, now) {
            return 0;
        }
        ppm(self.previous.max(self.current), quota.limit())
    }
}

impl SlidingCounts {
    /// How long until a refused `cost` would fit, given `elapsed` µs into the current window.
    fn retry_after(&self, limit: u64, length: u64, elapsed: u64, cost: u64) -> u64 {
        let wide = u128::from;
        // The smallest elapsed time e (in some window) at which weight × (length − e) <= room.
        let earliest = |weight: u64, room: u128| -> u64 {
            if weight == 0 {
                return 0;
            }
            let overlap_allowed = room / wide(weight);
            let overlap_allowed = u64::try_from(overlap_allowed)
                .unwrap_or(u64::MAX)
                .min(length);
            length - overlap_allowed
        };
        if self.current + cost <= limit {
            // Fits later in this window, once enough of the previous window has slid out.
            let room = wide(limit - self.current - cost) * wide(length);
            earliest(self.previous, room).saturating_sub(elapsed).max(1)
        } else {
            // This window's count must become the previous window's and slide out in turn.
            let room = wide(limit - cost) * wide(length);
            (length - elapsed).saturating_add(earliest(self.current, room))
        }
    }
}
