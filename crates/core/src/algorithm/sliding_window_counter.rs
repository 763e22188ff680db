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
//! **Trade-off.** Two counters per key and a smooth estimate of "N in any rolling window", far
//! closer than a fixed window for traffic that is spread out. It is an estimate: it assumes the
//! previous window's requests were spread evenly. **Worst case: 2 × limit − 1 in one rolling
//! window** — with a limit of 100, 100 requests at the very end of one window and 99 more
//! towards the end of the next all fall within one window's span, because by then the estimate
//! weighs the first hundred at almost nothing. Use a [sliding window log](super::sliding_window_log)
//! when the limit must hold exactly. Chirp uses the counter for daily limits ("400 follows a
//! day"), where that slack is acceptable.
//!
//! The state records the current window's start **and length**: when the window length changes,
//! the old estimate at that moment (previous count weighted, rounded up, plus the current count,
//! capped at the new limit) becomes the new window's current count, so the caller keeps what it
//! used and the state never mixes two lengths. A clock that steps back is read as the window's
//! start (the counts stand until the clock catches up), and announced waits are measured from the
//! real clock, so they hold.
//!
//! ```
//! use std::time::Duration;
//! use tollgate_core::algorithm::{sliding_window_counter::SlidingCounts, AlgorithmState};
//! use tollgate_core::{Quota, Timestamp};
//!
//! let quota = Quota::sliding_window_counter(100, Duration::from_secs(60))?;
//! // The window from 60 s to 120 s held 80; 30 so far in the one from 120 s; now is 15 s in.
//! let minute = 60_000_000;
//! let mut state = SlidingCounts::new(Timestamp::from_secs(120), minute, 80, 30);
//! let now = Timestamp::from_secs(135);
//! let (decision, _) = state.check(&quota, now, 1, now);
//! assert!(decision.is_allowed());
//! assert_eq!(decision.remaining(), 9); // 100 - (90 + 1)
//! # Ok::<(), tollgate_core::QuotaError>(())
//! ```

use super::fixed_window::window_start;
use super::{AlgorithmState, allowed, limit_reached, ppm, screen};
use crate::{Charge, Decision, Quota, Timestamp};

/// The current window's start and length, the previous window's count and the current count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct SlidingCounts {
    start: Timestamp,
    /// µs; 0 for a state never written.
    length: u64,
    previous: u64,
    current: u64,
}

impl SlidingCounts {
    /// Counts for the window of `length` µs starting at `start` (current) and the one before it
    /// (previous).
    pub const fn new(start: Timestamp, length: u64, previous: u64, current: u64) -> Self {
        SlidingCounts {
            start,
            length,
            previous,
            current,
        }
    }

    /// The current window's start.
    pub const fn start(&self) -> Timestamp {
        self.start
    }

    /// The window length in µs (0 for a state never written).
    pub const fn length(&self) -> u64 {
        self.length
    }

    /// The previous window's count.
    pub const fn previous(&self) -> u64 {
        self.previous
    }

    /// The current window's count.
    pub const fn current(&self) -> u64 {
        self.current
    }

    /// Rolls the state forward, in its own length, to the window `now` falls in.
    fn roll_to(&mut self, now: Timestamp) {
        let start = window_start(now, self.length);
        if start == self.start {
            return;
        }
        self.previous = if start == self.start.saturating_add_micros(self.length) {
            self.current
        } else {
            0
        };
        self.current = 0;
        self.start = start;
    }

    /// Moves the state to `quota`'s window that `now` falls in, folding an estimate made under
    /// another length into the current count (see the module docs); answers "now", never earlier
    /// than the stored window's start.
    pub(crate) fn normalize(&mut self, quota: &Quota, now: Timestamp) -> Timestamp {
        let length = quota.interval_micros();
        if self.length == 0 {
            *self = SlidingCounts::new(window_start(now, length), length, 0, 0);
            return now;
        }
        let now = now.max(self.start);
        self.roll_to(now);
        // A lowered limit: counts above it would make a caller wait longer than the new quota
        // ever could.
        self.previous = self.previous.min(quota.limit());
        self.current = self.current.min(quota.limit());
        if self.length != length {
            let elapsed = now.micros_since(self.start).min(self.length);
            let weighted = weighted_up(self.previous, self.length - elapsed, self.length);
            let used = self.current.saturating_add(weighted).min(quota.limit());
            *self = SlidingCounts::new(window_start(now, length), length, 0, used);
        }
        now
    }
}

/// `ceil(count × overlap / length)`, exactly.
fn weighted_up(count: u64, overlap: u64, length: u64) -> u64 {
    let scaled = u128::from(count) * u128::from(overlap);
    u64::try_from(scaled.div_ceil(u128::from(length.max(1)))).unwrap_or(u64::MAX)
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
        let clamped = self.normalize(quota, now);
        // After a clock stepped back the estimate is made at the window's start, and the waits
        // are measured from the real "now", so they hold.
        let lag = clamped.micros_since(now);
        let length = self.length;
        let elapsed = clamped.micros_since(self.start).min(length);
        let overlap = length - elapsed;
        let wide = u128::from;
        // Everything below is scaled by the window length, so the estimate is never rounded.
        let used = wide(self.previous) * wide(overlap) + wide(self.current) * wide(length);
        let capacity = wide(limit) * wide(length);
        let remaining_for = |used: u128| {
            u64::try_from(capacity.saturating_sub(used) / wide(length)).unwrap_or(u64::MAX)
        };
        let window_end = |extra: u64| {
            self.start
                .saturating_add_micros(length.saturating_mul(1 + extra))
                .micros_since(now)
        };
        let reset_after = if self.current > 0 {
            window_end(1)
        } else if self.previous > 0 {
            window_end(0)
        } else {
            0
        };
        let current = allowed(limit, remaining_for(used), reset_after);
        if let Some(early) = screen(current, cost) {
            return early;
        }
        let after = used + wide(cost) * wide(length);
        if after > capacity {
            let retry_after = self
                .retry_after(limit, length, elapsed, cost)
                .saturating_add(lag);
            let refused = limit_reached(limit, remaining_for(used), reset_after, retry_after);
            return (refused, None);
        }
        self.current += cost;
        let allowed = allowed(limit, remaining_for(after), window_end(1));
        (allowed, Some(Charge::window(self.start, cost)))
    }

    /// Takes the cost out of the window it went into while that window still counts at `now`
    /// (as the current or the previous one, under the same length); otherwise it holds nothing
    /// any more.
    fn refund(&mut self, quota: &Quota, charge: &Charge, now: Timestamp) {
        let Charge::Window { start, cost } = charge else {
            return;
        };
        if self.length != quota.interval_micros() {
            return;
        }
        // Where the windows stand now: a charge whose window has slid out holds nothing.
        self.roll_to(now.max(self.start));
        if *start == self.start {
            self.current = self.current.saturating_sub(*cost);
        } else if start.saturating_add_micros(self.length) == self.start {
            self.previous = self.previous.saturating_sub(*cost);
        }
    }

    fn idle_at(&self, _quota: &Quota) -> Timestamp {
        let windows = if self.current > 0 {
            2
        } else if self.previous > 0 {
            1
        } else {
            return Timestamp::EPOCH;
        };
        self.start
            .saturating_add_micros(self.length.saturating_mul(windows))
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
