//! `Retry-After` in whole seconds, rounded up, for refusals that a retry can cure.

use std::time::Duration;

use http::header::RETRY_AFTER;
use http::{HeaderMap, HeaderValue};
use tollgate_core::{Decision, RefusalReason};

use crate::headers::sf::sf_seconds_up;

/// Seconds to send in `Retry-After` for a wait that is not a decision's (a store that is down,
/// a problem built by hand): rounded **up**, and at least 1, as
/// [`Decision::retry_after_secs`] rounds a refusal's — for a decision, use that (the layer
/// does, see [`refusal_retry_after_secs`]).
///
/// A 300 ms wait is `1` (never `0`: a client told `0` retries at once and is refused again),
/// exactly 2 s is `2`, 2.001 s is `3`. A zero wait also gives `1`, because this is only asked
/// when the caller has been turned away. Absurd waits are capped at
/// [`MAX_SF_INTEGER`](crate::headers::sf::MAX_SF_INTEGER) seconds instead of overflowing.
pub(crate) fn retry_after_secs(wait: Duration) -> u64 {
    sf_seconds_up(wait).max(1)
}

/// The `Retry-After` seconds for a decision, or `None` when none should be sent:
///
/// * allowed: `None` (there is nothing to retry);
/// * refused with [`RefusalReason::LimitReached`] (or any refusal a later request can pass):
///   [`Decision::retry_after_secs`], so always at least 1, and the number a responder reads
///   from the decision;
/// * refused with [`RefusalReason::CostExceedsLimit`]: `None`, because the same request can never
///   fit, however long the caller waits; advertising a delay would invite a retry loop.
pub(crate) fn refusal_retry_after_secs(decision: &Decision) -> Option<u64> {
    match decision.refusal()? {
        RefusalReason::CostExceedsLimit => None,
        // A decision's wait is at most u64::MAX µs, about 1.8 × 10^13 s: always an sf-integer,
        // so the number is sent as the decision says it, never clamped.
        _ => Some(decision.retry_after_secs()),
    }
}

/// Sets `Retry-After` in `headers` to `secs` (replacing any value already there).
pub(crate) fn insert_retry_after(headers: &mut HeaderMap, secs: u64) {
    headers.insert(RETRY_AFTER, HeaderValue::from(secs));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(reason: RefusalReason, retry_after: Duration) -> Decision {
        Decision::refused(reason, 10, 0, Duration::from_secs(60), retry_after)
    }

    #[test]
    fn waits_round_up_to_whole_seconds() {
        assert_eq!(retry_after_secs(Duration::from_micros(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(300)), 1);
        assert_eq!(retry_after_secs(Duration::from_secs(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1001)), 2);
        assert_eq!(retry_after_secs(Duration::from_secs(2)), 2);
        assert_eq!(retry_after_secs(Duration::from_secs(86_400)), 86_400);
        assert_eq!(
            retry_after_secs(Duration::MAX),
            crate::headers::sf::MAX_SF_INTEGER
        );
    }

    #[test]
    fn a_refusal_always_says_at_least_one_second() {
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
        let decision = refused(RefusalReason::LimitReached, Duration::ZERO);
        assert_eq!(refusal_retry_after_secs(&decision), Some(1));
        let decision = refused(RefusalReason::LimitReached, Duration::from_millis(300));
        assert_eq!(refusal_retry_after_secs(&decision), Some(1));
        let decision = refused(RefusalReason::LimitReached, Duration::from_millis(1001));
        assert_eq!(refusal_retry_after_secs(&decision), Some(2));
    }

    #[test]
    fn the_header_is_the_decision_s_own_number() {
        let mut waits: Vec<Duration> = (0..=3_000).step_by(7).map(Duration::from_millis).collect();
        waits.extend([
            Duration::from_nanos(1),
            Duration::from_micros(999_999),
            Duration::from_micros(1_000_001),
            Duration::from_secs(86_400),
            Duration::MAX,
        ]);
        for wait in waits {
            let decision = refused(RefusalReason::LimitReached, wait);
            assert_eq!(
                refusal_retry_after_secs(&decision),
                Some(decision.retry_after_secs()),
                "{wait:?}"
            );
            // Waits that are not decisions' round the same way.
            assert_eq!(
                retry_after_secs(decision.retry_after()),
                decision.retry_after_secs(),
                "{wait:?}"
            );
        }
    }

    #[test]
    fn no_retry_after_when_allowed_or_when_retrying_cannot_help() {
        let allowed = Decision::allowed(10, 9, Duration::from_secs(1));
        assert_eq!(refusal_retry_after_secs(&allowed), None);
        let never = refused(RefusalReason::CostExceedsLimit, Duration::from_secs(5));
        assert_eq!(refusal_retry_after_secs(&never), None);
    }

    #[test]
    fn the_header_holds_the_number() {
        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, HeaderValue::from_static("999"));
        insert_retry_after(&mut headers, retry_after_secs(Duration::from_millis(300)));
        assert_eq!(headers.get_all(RETRY_AFTER).iter().count(), 1);
        assert_eq!(headers[RETRY_AFTER], "1");
    }

    #[test]
    fn the_example_of_retry_after_secs() {
        use super::retry_after_secs;
        use std::time::Duration;

        assert_eq!(retry_after_secs(Duration::from_millis(300)), 1);
        assert_eq!(retry_after_secs(Duration::from_secs(2)), 2);
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
    }

    #[test]
    fn the_example_of_refusal_retry_after_secs() {
        use super::refusal_retry_after_secs;
        use std::time::Duration;
        use tollgate_core::{Decision, RefusalReason};

        let full = Decision::refused(
            RefusalReason::LimitReached,
            10,
            0,
            Duration::from_secs(60),
            Duration::from_millis(1200),
        );
        assert_eq!(refusal_retry_after_secs(&full), Some(2));

        let never = Decision::refused(
            RefusalReason::CostExceedsLimit,
            10,
            10,
            Duration::ZERO,
            Duration::ZERO,
        );
        assert_eq!(refusal_retry_after_secs(&never), None);
    }

    #[test]
    fn the_example_of_insert_retry_after() {
        use super::insert_retry_after;
        use http::{HeaderMap, header::RETRY_AFTER};

        let mut headers = HeaderMap::new();
        insert_retry_after(&mut headers, 30);
        assert_eq!(headers[RETRY_AFTER], "30");
    }
}
