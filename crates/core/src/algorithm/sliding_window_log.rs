//! Sliding window log: an exact rolling window, from a log of every charge.
//!
//! Keep the time of each charge for the last W microseconds; a request of cost c passes when the
//! charges in the window `(now − W, now]` plus c stay within the limit. When refused, the
//! retry-after is the moment enough old entries slide out.
//!
//! Entries are absolute times, so a changed window length simply reads the same log with the new
//! window (entries already dropped under a shorter window stay gone: lengthening the window again
//! does not bring them back). A clock that steps back is read as the newest entry's time (the
//! log stands until the clock catches up), and announced waits are measured from the real clock,
//! so they hold.
//!
//! **Trade-off.** Exact — **worst case: the limit, in any rolling window** — with no boundary
//! burst and no estimate. But it stores an entry per charge (16 bytes each here, about 800 bytes for a limit of
//! 50 in Redis), which is gigabytes more at scale; tollgate caps its limit at
//! [`MAX_LOG_LIMIT`](crate::quota::MAX_LOG_LIMIT). Use it for small, strict limits (login attempts)
//! and a [sliding window counter](super::sliding_window_counter) for large ones.
//!
//! ```
//! use std::time::Duration;
//! use tollgate_core::algorithm::{sliding_window_log::ChargeLog, AlgorithmState};
//! use tollgate_core::{Quota, Timestamp};
//!
//! let quota = Quota::sliding_window_log(2, Duration::from_secs(10))?;
//! let mut log = ChargeLog::default();
//! let t = |s| Timestamp::from_secs(s);
//! assert!(log.check(&quota, t(100), 1, t(100)).0.is_allowed());
//! assert!(log.check(&quota, t(105), 1, t(105)).0.is_allowed());
//! let (third, _) = log.check(&quota, t(109), 1, t(109));
//! assert_eq!(third.retry_after(), Duration::from_secs(1)); // the entry at 100 leaves at 110
//! # Ok::<(), tollgate_core::QuotaError>(())
//! ```

use std::collections::VecDeque;

use super::{AlgorithmState, allowed, limit_reached, ppm, screen};
use crate::{Charge, Decision, Quota, Timestamp};

/// The charges in the current window, oldest first: `(time, cost)`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ChargeLog {
    entries: VecDeque<(Timestamp, u64)>,
    total: u64,
}

impl ChargeLog {
    /// The logged charges, oldest first.
    pub fn entries(&self) -> impl Iterator<Item = (Timestamp, u64)> + '_ {
        self.entries.iter().copied()
    }

    /// The sum of the logged costs.
    pub fn total(&self) -> u64 {
        self.total
    }

    fn newest(&self) -> Option<Timestamp> {
        self.entries.back().map(|(at, _)| *at)
    }

    /// Drops entries that are out of the window ending at `now`.
    fn expire(&mut self, window: u64, now: Timestamp) {
        while let Some(&(at, cost)) = self.entries.front() {
            if at.saturating_add_micros(window) > now {
                break;
            }
            self.entries.pop_front();
            self.total -= cost;
        }
    }
}

impl AlgorithmState for ChargeLog {
    fn check(
        &mut self,
        quota: &Quota,
        now: Timestamp,
        cost: u64,
        _not_before: Timestamp,
    ) -> (Decision, Option<Charge>) {
        let limit = quota.limit();
        let window = quota.interval_micros();
        // A clock that went backwards counts as no time passing; waits are measured from the
        // real "now", so they hold.
        let real_now = now;
        let now = self.newest().map_or(now, |newest| newest.max(now));
        self.expire(window, now);
        let reset_after = self.newest().map_or(0, |newest| {
            newest.saturating_add_micros(window).micros_since(real_now)
        });
        let remaining_now = limit.saturating_sub(self.total);
        let current = allowed(limit, remaining_now, reset_after);
        if let Some(early) = screen(current, cost) {
            return early;
        }
        if cost > remaining_now {
            // Walk the oldest entries out until the cost fits.
            let mut total = self.total;
            let mut retry_after = 0;
            for &(at, entry_cost) in &self.entries {
                total -= entry_cost;
                if total + cost <= limit {
                    retry_after = at.saturating_add_micros(window).micros_since(real_now);
                    break;
                }
            }
            let refused = limit_reached(limit, remaining_now, reset_after, retry_after);
            return (refused, None);
        }
        match self.entries.back_mut() {
            Some((at, logged)) if *at == now => *logged += cost,
            _ => {
                if self.entries.capacity() == 0 {
                    // Most logs hold one or two entries: don't let the first push reserve four.
                    self.entries.reserve_exact(1);
                }
                self.entries.push_back((now, cost));
            }
        }
        self.total += cost;
        let allowed = allowed(
            limit,
            remaining_now - cost,
            now.saturating_add_micros(window).micros_since(real_now),
        );
        (allowed, Some(Charge::logged(now, cost)))
    }

    /// Shrinks the entry the charge logged, unless it has left the window (then it counts for
    /// nothing any more).
    fn refund(&mut self, quota: &Quota, charge: &Charge, now: Timestamp) {
        let Charge::Logged { at, cost } = charge else {
            return;
        };
        let now = self.newest().map_or(now, |newest| newest.max(now));
        if at.saturating_add_micros(quota.interval_micros()) <= now {
            return;
        }
        let Some(position) = self
            .entries
            .iter()
            .rposition(|(logged_at, _)| logged_at == at)
        else {
            return;
        };
        let entry = &mut self.entries[position].1;
        let taken = (*cost).min(*entry);
        *entry -= taken;
        self.total -= taken;
        if *entry == 0 {
            self.entries.remove(position);
        }
    }

    fn idle_at(&self, quota: &Quota) -> Timestamp {
        self.newest().map_or(Timestamp::EPOCH, |newest| {
            newest.saturating_add_micros(quota.interval_micros())
        })
    }

    fn usage_ppm(&self, quota: &Quota, now: Timestamp) -> u64 {
        if self.is_idle(quota, now) {
            return 0;
        }
        ppm(self.total, quota.limit())
    }
}
