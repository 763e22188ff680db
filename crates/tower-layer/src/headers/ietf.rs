//! The IETF fields: `RateLimit-Policy` (the rules) and `RateLimit` (where this caller stands),
//! as in draft-ietf-httpapi-ratelimit-headers-10.

use http::{HeaderMap, HeaderName, HeaderValue};
use tollgate_core::Algorithm;

use crate::headers::policy::PolicyTerms;
use crate::headers::report::PolicyReport;
use crate::headers::sf::{push_integer_param, push_sf_string, sf_seconds_up};

/// `RateLimit-Policy`: the quota policies that apply, as an sf-list of
/// `"name";q=<quota>;w=<window seconds>` items.
pub(crate) const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");

/// `RateLimit`: the caller's standing under each policy, as an sf-list of
/// `"name";r=<remaining>;t=<seconds until reset>` items.
pub(crate) const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");

/// The two IETF field values for a list of policies, named so they cannot be swapped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RateLimitFields {
    /// The value of [`RATELIMIT_POLICY`].
    pub(crate) policy: HeaderValue,
    /// The value of [`RATELIMIT`].
    pub(crate) rate_limit: HeaderValue,
}

/// Both IETF field values for `policies`, in the order given; `None` when there are none to show
/// (an empty list is not sent at all).
pub(crate) fn rate_limit_fields(policies: &[PolicyReport<'_>]) -> Option<RateLimitFields> {
    Some(RateLimitFields {
        policy: rate_limit_policy_value(policies)?,
        rate_limit: rate_limit_value(policies)?,
    })
}

/// The `RateLimit-Policy` value: per policy, `q` and `w` from [`PolicyTerms::of`] its quota.
/// `None` for an empty list.
pub(crate) fn rate_limit_policy_value(policies: &[PolicyReport<'_>]) -> Option<HeaderValue> {
    sf_list(policies, |out, report| {
        let terms = PolicyTerms::of(report.quota);
        push_integer_param(out, "q", terms.quota);
        if let Some(window_secs) = terms.window_secs {
            push_integer_param(out, "w", window_secs);
        }
    })
}

/// The `RateLimit` value: per policy, `r` = [`Decision::remaining`] and `t` =
/// [`Decision::reset_after`] in whole seconds rounded up. `None` for an empty list. For a
/// concurrency quota `r` is the free slots after this request and `t` is left out: slots come
/// back when requests end, not at a time the draft's `t` could name (it is optional).
///
/// [`Decision::remaining`]: tollgate_core::Decision::remaining
/// [`Decision::reset_after`]: tollgate_core::Decision::reset_after
pub(crate) fn rate_limit_value(policies: &[PolicyReport<'_>]) -> Option<HeaderValue> {
    sf_list(policies, |out, report| {
        push_integer_param(out, "r", report.decision.remaining());
        if report.quota.algorithm() != Algorithm::Concurrency {
            push_integer_param(out, "t", sf_seconds_up(report.decision.reset_after()));
        }
    })
}

/// Sets [`RATELIMIT_POLICY`] and [`RATELIMIT`] in `headers` for `policies`, replacing any values
/// already there. Does nothing, and returns `false`, for an empty list.
pub(crate) fn insert_rate_limit_fields(
    headers: &mut HeaderMap,
    policies: &[PolicyReport<'_>],
) -> bool {
    let Some(fields) = rate_limit_fields(policies) else {
        return false;
    };
    headers.insert(RATELIMIT_POLICY, fields.policy);
    headers.insert(RATELIMIT, fields.rate_limit);
    true
}

/// An sf-list with one item per policy: the name as an sf-string, then what `params` appends.
fn sf_list(
    policies: &[PolicyReport<'_>],
    params: impl Fn(&mut String, &PolicyReport<'_>),
) -> Option<HeaderValue> {
    if policies.is_empty() {
        return None;
    }
    // Written in a buffer this thread keeps, then copied once into the value: one allocation
    // per field (a `String` handed over as it is costs two: its buffer, and the shared handle
    // `Bytes` puts around a buffer with room to spare).
    FIELD.with_borrow_mut(|out| {
        out.clear();
        for (index, report) in policies.iter().enumerate() {
            if index > 0 {
                out.push_str(", ");
            }
            push_sf_string(out, report.name);
            params(out, report);
        }
        // Printable ASCII only (see `push_sf_string`), so this always succeeds.
        HeaderValue::from_bytes(out.as_bytes()).ok()
    })
}

thread_local! {
    /// The buffer field values are written in before they are copied into a `HeaderValue`.
    static FIELD: std::cell::RefCell<String> = std::cell::RefCell::new(String::with_capacity(256));
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use sfv::{ListEntry, Parser, Version};
    use tollgate_core::{Decision, Quota, Rate, RefusalReason};

    use super::*;

    /// Parses a value as an RFC 8941 sf-list and returns, per member, the name and its integer
    /// parameters in order; fails the test on anything else.
    fn parse(value: &HeaderValue) -> Vec<(String, Vec<(String, i64)>)> {
        let list: sfv::List = Parser::new(value.as_bytes())
            .with_version(Version::Rfc8941)
            .parse()
            .unwrap_or_else(|error| panic!("{value:?} is not an sf-list: {error}"));
        list.into_iter()
            .map(|entry| {
                let ListEntry::Item(item) = entry else {
                    panic!("inner list in {value:?}");
                };
                let name = item.bare_item.as_string().expect("an sf-string name");
                let params = item
                    .params
                    .iter()
                    .map(|(key, bare)| {
                        let int = bare.as_integer().expect("an integer parameter");
                        (key.as_str().to_owned(), i64::from(int))
                    })
                    .collect();
                (name.as_str().to_owned(), params)
            })
            .collect()
    }

    fn params(pairs: &[(&str, i64)]) -> Vec<(String, i64)> {
        pairs
            .iter()
            .map(|(key, value)| ((*key).to_owned(), *value))
            .collect()
    }

    fn secs(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    #[test]
    fn one_policy_gives_both_fields() {
        let quota = Quota::fixed_window(100, secs(60)).unwrap();
        let decision = Decision::allowed(100, 50, Duration::from_millis(29_001));
        let fields = rate_limit_fields(&[PolicyReport::new("burst", &quota, &decision)]).unwrap();
        assert_eq!(
            parse(&fields.policy),
            [("burst".to_owned(), params(&[("q", 100), ("w", 60)]))]
        );
        assert_eq!(
            parse(&fields.rate_limit),
            [("burst".to_owned(), params(&[("r", 50), ("t", 30)]))]
        );
    }

    #[test]
    fn several_policies_keep_their_order() {
        let burst = Quota::token_bucket(10, Rate::per_second(1)).unwrap();
        let daily = Quota::fixed_window(1000, secs(86_400)).unwrap();
        let hourly = Quota::sliding_window_log(100, secs(3600)).unwrap();
        let refused =
            Decision::refused(RefusalReason::LimitReached, 1000, 0, secs(4000), secs(4000));
        let burst_ok = Decision::allowed(10, 9, secs(1));
        let hourly_ok = Decision::allowed(100, 42, Duration::from_millis(1));
        let reports = [
            PolicyReport::new("daily", &daily, &refused),
            PolicyReport::new("burst", &burst, &burst_ok),
            PolicyReport::new("hourly", &hourly, &hourly_ok),
        ];
        let fields = rate_limit_fields(&reports).unwrap();
        assert_eq!(
            parse(&fields.policy),
            [
                ("daily".to_owned(), params(&[("q", 1000), ("w", 86_400)])),
                ("burst".to_owned(), params(&[("q", 10), ("w", 10)])),
                ("hourly".to_owned(), params(&[("q", 100), ("w", 3600)])),
            ]
        );
        assert_eq!(
            parse(&fields.rate_limit),
            [
                ("daily".to_owned(), params(&[("r", 0), ("t", 4000)])),
                ("burst".to_owned(), params(&[("r", 9), ("t", 1)])),
                ("hourly".to_owned(), params(&[("r", 42), ("t", 1)])),
            ]
        );
    }

    #[test]
    fn every_algorithm_maps_to_q_and_w() {
        let cases = [
            (
                Quota::token_bucket(50, Rate::per_second(10)).unwrap(),
                50,
                5,
            ),
            (Quota::gcra(Rate::per_second(10), 5).unwrap(), 5, 1),
            (Quota::gcra(Rate::per_minute(6), 5).unwrap(), 5, 50),
            (Quota::fixed_window(100, secs(60)).unwrap(), 100, 60),
            (
                Quota::sliding_window_counter(400, secs(86_400)).unwrap(),
                400,
                86_400,
            ),
            (
                Quota::sliding_window_log(20, Duration::from_millis(2500)).unwrap(),
                20,
                3,
            ),
            (
                Quota::leaky_bucket(Rate::per_second(2), secs(4)).unwrap(),
                9,
                5,
            ),
        ];
        for (quota, q, w) in cases {
            let decision = Decision::allowed(quota.limit(), 1, secs(1));
            let value = rate_limit_policy_value(&[PolicyReport::new("p", &quota, &decision)]);
            let parsed = parse(&value.unwrap());
            assert_eq!(
                parsed,
                [("p".to_owned(), params(&[("q", q), ("w", w)]))],
                "{:?}",
                quota.algorithm()
            );
        }
    }

    #[test]
    fn reset_rounds_up_and_zero_stays_zero() {
        let quota = Quota::fixed_window(5, secs(10)).unwrap();
        for (reset, t) in [
            (Duration::ZERO, 0),
            (Duration::from_micros(1), 1),
            (secs(2), 2),
            (Duration::from_millis(2001), 3),
        ] {
            let decision = Decision::allowed(5, 4, reset);
            let value = rate_limit_value(&[PolicyReport::new("w", &quota, &decision)]).unwrap();
            assert_eq!(
                parse(&value),
                [("w".to_owned(), params(&[("r", 4), ("t", t)]))]
            );
        }
    }

    #[test]
    fn remaining_beyond_fifteen_digits_is_clamped() {
        let quota = Quota::fixed_window(5, secs(10)).unwrap();
        let decision = Decision::allowed(u64::MAX, u64::MAX, Duration::MAX);
        let value = rate_limit_value(&[PolicyReport::new("w", &quota, &decision)]).unwrap();
        // A decision keeps whole microseconds in a u64, so its longest reset fits in 14 digits.
        let t = i64::try_from(u64::MAX / 1_000_000 + 1).unwrap();
        let max = 999_999_999_999_999;
        assert_eq!(
            parse(&value),
            [("w".to_owned(), params(&[("r", max), ("t", t)]))]
        );
    }

    #[test]
    fn names_that_need_escaping_stay_valid_sf_strings() {
        let quota = Quota::fixed_window(5, secs(10)).unwrap();
        let decision = Decision::allowed(5, 4, secs(3));
        let names = [
            r#"say "hi""#,
            r"back\slash",
            r#"\""#,
            "a, b;q=1",
            "ünï\r\ncode",
        ];
        let reports: Vec<_> = names
            .iter()
            .map(|name| PolicyReport::new(name, &quota, &decision))
            .collect();
        let fields = rate_limit_fields(&reports).unwrap();
        let expected = [
            r#"say "hi""#,
            r"back\slash",
            r#"\""#,
            "a, b;q=1",
            "?n???code",
        ];
        for value in [&fields.policy, &fields.rate_limit] {
            let parsed = parse(value);
            let parsed_names: Vec<_> = parsed.iter().map(|(name, _)| name.as_str()).collect();
            assert_eq!(parsed_names, expected);
            assert!(parsed.iter().all(|(_, params)| params.len() == 2));
        }
    }

    #[test]
    fn nothing_to_show_gives_no_fields() {
        assert_eq!(rate_limit_fields(&[]), None);
        assert_eq!(rate_limit_policy_value(&[]), None);
        assert_eq!(rate_limit_value(&[]), None);
        let mut headers = HeaderMap::new();
        assert!(!insert_rate_limit_fields(&mut headers, &[]));
        assert!(headers.is_empty());
    }

    #[test]
    fn inserting_replaces_earlier_values() {
        let quota = Quota::fixed_window(5, secs(10)).unwrap();
        let decision = Decision::allowed(5, 4, secs(3));
        let mut headers = HeaderMap::new();
        headers.insert(RATELIMIT, HeaderValue::from_static(r#""old";r=1"#));
        assert!(insert_rate_limit_fields(
            &mut headers,
            &[PolicyReport::new("new", &quota, &decision)]
        ));
        assert_eq!(headers.get_all(RATELIMIT).iter().count(), 1);
        assert_eq!(
            parse(&headers[RATELIMIT]),
            [("new".to_owned(), params(&[("r", 4), ("t", 3)]))]
        );
        assert_eq!(
            parse(&headers[RATELIMIT_POLICY]),
            [("new".to_owned(), params(&[("q", 5), ("w", 10)]))]
        );
    }

    #[test]
    fn the_example_of_ratelimitfields() -> Result<(), Box<dyn std::error::Error>> {
        use super::rate_limit_fields;
        use crate::headers::report::PolicyReport;
        use std::time::Duration;
        use tollgate_core::{Decision, Quota};

        let quota = Quota::fixed_window(100, Duration::from_secs(60))?;
        let decision = Decision::allowed(100, 50, Duration::from_millis(29_200));
        let fields = rate_limit_fields(&[PolicyReport::new("burst", &quota, &decision)])
            .expect("the example's value");
        assert_eq!(fields.policy, r#""burst";q=100;w=60"#);
        assert_eq!(fields.rate_limit, r#""burst";r=50;t=30"#);
        Ok(())
    }

    #[test]
    fn the_example_of_rate_limit_policy_value() -> Result<(), Box<dyn std::error::Error>> {
        use super::rate_limit_policy_value;
        use crate::headers::report::PolicyReport;
        use std::time::Duration;
        use tollgate_core::{Decision, Quota};

        let burst = Quota::fixed_window(100, Duration::from_secs(60))?;
        let daily = Quota::fixed_window(1000, Duration::from_secs(86_400))?;
        let allowed = Decision::allowed(100, 99, Duration::from_secs(60));
        let value = rate_limit_policy_value(&[
            PolicyReport::new("burst", &burst, &allowed),
            PolicyReport::new("daily", &daily, &allowed),
        ]);
        assert_eq!(
            value.expect("the example's value"),
            r#""burst";q=100;w=60, "daily";q=1000;w=86400"#
        );
        Ok(())
    }
}
