//! The answer to "may this go ahead?", as data.

use std::time::Duration;

/// Why a request was refused. A refusal is data, never an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RefusalReason {
    /// The quota is used up for now; [`Decision::retry_after`] says when it will fit.
    LimitReached,
    /// The cost is larger than the quota could ever allow at once (more than the capacity,
    /// burst or window limit). Retrying never helps, so `retry_after` is zero.
    CostExceedsLimit,
}

/// Allowed or refused, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// The request may go ahead (after [`Decision::delay`], for pacing rules).
    Allowed,
    /// The request must not go ahead.
    Refused(RefusalReason),
}

/// One rule's answer for one request, with sub-second precision.
///
/// * `limit`: the quota's [`limit`](crate::Quota::limit);
/// * `remaining`: how much more cost would be allowed right now (after this charge, if any);
/// * `reset_after`: when the caller's allowance is whole again;
/// * `retry_after`: when a refused request of the same cost would fit (zero when allowed);
/// * `delay`: how long an allowed request should wait before going ahead (pacing only).
///
/// ```
/// use std::time::Duration;
/// use tollgate_core::{Decision, RefusalReason};
///
/// let refused = Decision::refused(
///     RefusalReason::LimitReached, 100, 0, Duration::from_secs(30), Duration::from_millis(300),
/// );
/// assert!(!refused.is_allowed());
/// assert_eq!(refused.retry_after_secs(), 1); // 300 ms rounds up, never down to 0
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Decision {
    verdict: Verdict,
    limit: u64,
    remaining: u64,
    reset_after_micros: u64,
    /// Retry-after when refused, pacing delay when allowed: never both, so one field.
    wait_micros: u64,
}

impl Decision {
    /// An allowed decision.
    pub fn allowed(limit: u64, remaining: u64, reset_after: Duration) -> Decision {
        Decision::from_micros(
            Verdict::Allowed,
            limit,
            remaining,
            duration_micros(reset_after),
            0,
            0,
        )
    }

    /// A refused decision.
    pub fn refused(
        reason: RefusalReason,
        limit: u64,
        remaining: u64,
        reset_after: Duration,
        retry_after: Duration,
    ) -> Decision {
        Decision::from_micros(
            Verdict::Refused(reason),
            limit,
            remaining,
            duration_micros(reset_after),
            duration_micros(retry_after),
            0,
        )
    }

    /// This decision with a pacing delay.
    #[must_use]
    pub fn with_delay(mut self, delay: Duration) -> Decision {
        if self.is_allowed() {
            self.wait_micros = duration_micros(delay);
        }
        self
    }

    pub(crate) const fn from_micros(
        verdict: Verdict,
        limit: u64,
        remaining: u64,
        reset_after_micros: u64,
        retry_after_micros: u64,
        delay_micros: u64,
    ) -> Decision {
        let wait_micros = match verdict {
            Verdict::Allowed => delay_micros,
            Verdict::Refused(_) => retry_after_micros,
        };
        Decision {
            verdict,
            limit,
            remaining,
            reset_after_micros,
            wait_micros,
        }
    }

    /// Allowed or refused.
    pub const fn verdict(&self) -> Verdict {
        self.verdict
    }

    /// Whether the request may go ahead.
    pub const fn is_allowed(&self) -> bool {
        matches!(self.verdict, Verdict::Allowed)
    }

    /// Why it was refused, if it was.
    pub const fn refusal(&self) -> Option<RefusalReason> {
        match self.verdict {
            Verdict::Allowed => None,
            Verdict::Refused(reason) => Some(reason),
        }
    }

    /// The quota's limit.
    pub const fn limit(&self) -> u64 {
        self.limit
    }

    /// What could still be spent right now.
    pub const fn remaining(&self) -> u64 {
        self.remaining
    }

    /// Time until the allowance is whole again.
    pub const fn reset_after(&self) -> Duration {
        Duration::from_micros(self.reset_after_micros)
    }

    /// Time until a refused request of the same cost would fit; zero when allowed, and zero for
    /// [`RefusalReason::CostExceedsLimit`] (it never fits).
    pub const fn retry_after(&self) -> Duration {
        match self.verdict {
            Verdict::Allowed => Duration::ZERO,
            Verdict::Refused(_) => Duration::from_micros(self.wait_micros),
        }
    }

    /// How long to wait before going ahead (pacing); zero otherwise.
    pub const fn delay(&self) -> Duration {
        match self.verdict {
            Verdict::Allowed => Duration::from_micros(self.wait_micros),
            Verdict::Refused(_) => Duration::ZERO,
        }
    }

    /// [`retry_after`](Self::retry_after) in whole seconds, as a refused caller is told it:
    /// rounded **up**, and at least 1 while refused — a 300 ms wait, or none at all, is 1 (told
    /// 0, a client retries at once and is refused again); exactly 2 s is 2, 2.001 s is 3. Zero
    /// when allowed, and for [`RefusalReason::CostExceedsLimit`], which no wait cures.
    ///
    /// The layer's `Retry-After` field is this number, so a response body that shows it (a
    /// custom responder's) always agrees with the header.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate_core::{Decision, RefusalReason};
    ///
    /// let refused = |wait| Decision::refused(RefusalReason::LimitReached, 10, 0, wait, wait);
    /// assert_eq!(refused(Duration::from_millis(300)).retry_after_secs(), 1);
    /// assert_eq!(refused(Duration::ZERO).retry_after_secs(), 1);
    /// assert_eq!(refused(Duration::from_millis(2_001)).retry_after_secs(), 3);
    /// let allowed = Decision::allowed(10, 9, Duration::from_secs(1));
    /// assert_eq!(allowed.retry_after_secs(), 0);
    /// ```
    pub fn retry_after_secs(&self) -> u64 {
        match self.verdict {
            Verdict::Allowed | Verdict::Refused(RefusalReason::CostExceedsLimit) => 0,
            Verdict::Refused(_) => whole_seconds_up(self.retry_after()).max(1),
        }
    }

    /// [`reset_after`](Self::reset_after) in whole seconds, rounded up.
    pub fn reset_after_secs(&self) -> u64 {
        whole_seconds_up(self.reset_after())
    }
}

/// A duration in whole seconds, rounded **up**, as HTTP headers need it (a 300 ms wait is `1`,
/// never `0`; exactly 2 s is `2`).
///
/// ```
/// use std::time::Duration;
/// use tollgate_core::whole_seconds_up;
/// assert_eq!(whole_seconds_up(Duration::from_millis(300)), 1);
/// assert_eq!(whole_seconds_up(Duration::from_secs(2)), 2);
/// assert_eq!(whole_seconds_up(Duration::ZERO), 0);
/// assert_eq!(whole_seconds_up(Duration::MAX), u64::MAX);
/// ```
pub fn whole_seconds_up(duration: Duration) -> u64 {
    duration
        .as_secs()
        .saturating_add(u64::from(duration.subsec_nanos() > 0))
}

fn duration_micros(duration: Duration) -> u64 {
    crate::clock::micros_ceil(duration)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(reason: RefusalReason, retry_after: Duration) -> Decision {
        Decision::refused(reason, 10, 0, Duration::from_secs(60), retry_after)
    }

    #[test]
    fn a_refusal_a_wait_cures_says_at_least_one_second() {
        for wait in [
            Duration::ZERO,
            Duration::from_nanos(1),
            Duration::from_micros(1),
            Duration::from_millis(300),
            Duration::from_millis(999),
            Duration::from_secs(1),
        ] {
            let decision = refused(RefusalReason::LimitReached, wait);
            assert_eq!(
                decision.retry_after_secs(),
                1,
                "refused, told to wait {wait:?}"
            );
        }
    }

    #[test]
    fn retry_after_rounds_up_to_whole_seconds() {
        let secs = |wait| refused(RefusalReason::LimitReached, wait).retry_after_secs();
        assert_eq!(secs(Duration::from_millis(1_001)), 2);
        assert_eq!(secs(Duration::from_secs(2)), 2);
        assert_eq!(secs(Duration::from_millis(2_001)), 3);
        assert_eq!(secs(Duration::from_secs(86_400)), 86_400);
        assert_eq!(
            secs(Duration::MAX),
            u64::MAX / 1_000_000 + 1,
            "a decision holds whole µs, so the largest wait is u64::MAX µs"
        );
    }

    #[test]
    fn no_retry_after_when_allowed_or_when_no_wait_cures_the_refusal() {
        let allowed = Decision::allowed(10, 9, Duration::from_secs(1));
        assert_eq!(allowed.retry_after_secs(), 0);
        let paced = allowed.with_delay(Duration::from_millis(300));
        assert_eq!(
            paced.retry_after_secs(),
            0,
            "a pacing delay is not a retry-after"
        );
        let never = refused(RefusalReason::CostExceedsLimit, Duration::ZERO);
        assert_eq!(never.retry_after_secs(), 0);
    }
}
