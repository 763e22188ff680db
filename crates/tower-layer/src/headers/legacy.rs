//! The pre-standard `X-RateLimit-*` fields, for clients written against them. Off by default.

use http::{HeaderMap, HeaderName, HeaderValue};

use crate::headers::report::PolicyReport;
use crate::headers::sf::sf_seconds_up;

/// `X-RateLimit-Limit`: the policy's limit (the same number as `q` in `RateLimit-Policy`).
pub(crate) const X_RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");

/// `X-RateLimit-Remaining`: what the caller can still spend now.
pub(crate) const X_RATELIMIT_REMAINING: HeaderName =
    HeaderName::from_static("x-ratelimit-remaining");

/// `X-RateLimit-Reset`: seconds until the allowance is whole again, rounded up.
///
/// This is a *delay* in seconds (as the IETF `t` parameter), not a Unix timestamp as some APIs
/// use: a delay needs no agreement between the server's and the client's clocks, and tollgate's
/// decisions are made on the store's clock, not the gateway's.
pub(crate) const X_RATELIMIT_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

/// The three legacy fields for one policy, in the order limit, remaining, reset.
///
/// Legacy fields have room for a single policy, so callers pass the most relevant one (the first
/// in the middleware's list: the refusing policy on a 429).
pub(crate) fn legacy_fields(policy: &PolicyReport<'_>) -> [(HeaderName, HeaderValue); 3] {
    [
        (X_RATELIMIT_LIMIT, HeaderValue::from(policy.quota.limit())),
        (
            X_RATELIMIT_REMAINING,
            HeaderValue::from(policy.decision.remaining()),
        ),
        (
            X_RATELIMIT_RESET,
            HeaderValue::from(sf_seconds_up(policy.decision.reset_after())),
        ),
    ]
}

/// Sets the three legacy fields in `headers` for the **first** of `policies`, replacing any
/// values already there. Does nothing, and returns `false`, for an empty list.
pub(crate) fn insert_legacy_fields(headers: &mut HeaderMap, policies: &[PolicyReport<'_>]) -> bool {
    let Some(first) = policies.first() else {
        return false;
    };
    for (name, value) in legacy_fields(first) {
        headers.insert(name, value);
    }
    true
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tollgate_core::{Decision, Quota, Rate, RefusalReason};

    use super::*;

    fn number(headers: &HeaderMap, name: &HeaderName) -> u64 {
        headers[name].to_str().unwrap().parse().unwrap()
    }

    #[test]
    fn only_the_first_policy_is_shown() {
        let daily = Quota::fixed_window(1000, Duration::from_secs(86_400)).unwrap();
        let burst = Quota::token_bucket(10, Rate::per_second(1)).unwrap();
        let refused = Decision::refused(
            RefusalReason::LimitReached,
            1000,
            0,
            Duration::from_millis(3_600_001),
            Duration::from_secs(5),
        );
        let allowed = Decision::allowed(10, 9, Duration::from_secs(1));
        let mut headers = HeaderMap::new();
        let inserted = insert_legacy_fields(
            &mut headers,
            &[
                PolicyReport::new("daily", &daily, &refused),
                PolicyReport::new("burst", &burst, &allowed),
            ],
        );
        assert!(inserted);
        assert_eq!(headers.len(), 3);
        assert_eq!(number(&headers, &X_RATELIMIT_LIMIT), 1000);
        assert_eq!(number(&headers, &X_RATELIMIT_REMAINING), 0);
        assert_eq!(number(&headers, &X_RATELIMIT_RESET), 3601);
    }

    #[test]
    fn reset_rounds_up() {
        let quota = Quota::fixed_window(5, Duration::from_secs(10)).unwrap();
        for (reset, secs) in [
            (Duration::ZERO, 0),
            (Duration::from_millis(300), 1),
            (Duration::from_secs(1), 1),
            (Duration::from_millis(1001), 2),
        ] {
            let decision = Decision::allowed(5, 4, reset);
            let [_, _, (name, value)] = legacy_fields(&PolicyReport::new("w", &quota, &decision));
            assert_eq!(name, X_RATELIMIT_RESET);
            assert_eq!(value, secs.to_string().as_str());
        }
    }

    #[test]
    fn nothing_to_show_inserts_nothing() {
        let mut headers = HeaderMap::new();
        assert!(!insert_legacy_fields(&mut headers, &[]));
        assert!(headers.is_empty());
    }

    #[test]
    fn the_example_of_legacy_fields() -> Result<(), Box<dyn std::error::Error>> {
        use super::legacy_fields;
        use crate::headers::legacy::X_RATELIMIT_RESET;
        use crate::headers::report::PolicyReport;
        use std::time::Duration;
        use tollgate_core::{Decision, Quota};

        let quota = Quota::fixed_window(100, Duration::from_secs(60))?;
        let decision = Decision::allowed(100, 7, Duration::from_millis(12_300));
        let [limit, remaining, reset] =
            legacy_fields(&PolicyReport::new("burst", &quota, &decision));
        assert_eq!(limit.1, "100");
        assert_eq!(remaining.1, "7");
        assert_eq!(reset, (X_RATELIMIT_RESET, "13".parse()?));
        Ok(())
    }
}
