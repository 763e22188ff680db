//! A quota as Envoy's `current_limit`: requests per unit.
//!
//! Envoy's units are fixed lengths: a second, a minute, an hour, a day, a week, a month (30
//! days) and a year (365 days). A quota's terms are those of the IETF `RateLimit-Policy` field:
//! `q`, what can be spent at once (a window's limit, a bucket's capacity), per `w`, the window
//! or the time an empty bucket takes to fill again. When `w` is one of Envoy's units exactly,
//! `current_limit` is `q` per that unit; otherwise (10 per 15 minutes, a bucket of 5 that
//! refills in 7 s) no unit expresses it, and `current_limit` is `q` per `UNKNOWN`: the limit's
//! name and size stay true, and the exact window is in the `RateLimit-Policy` field the answer
//! adds (`w=900`).

use std::time::Duration;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::RateLimit;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;
use tollgate_core::Quota;

/// Envoy's units and their lengths in seconds.
const UNITS: [(Unit, u64); 7] = [
    (Unit::Second, 1),
    (Unit::Minute, 60),
    (Unit::Hour, 3_600),
    (Unit::Day, 86_400),
    (Unit::Week, 604_800),
    (Unit::Month, 2_592_000),
    (Unit::Year, 31_536_000),
];

/// `quota`, named `name`, as Envoy's `current_limit`.
pub(crate) fn current_limit(name: &str, quota: &Quota) -> RateLimit {
    let per = quota.window().unwrap_or_else(|| quota.replenish_time());
    RateLimit {
        name: name.to_owned(),
        requests_per_unit: u32::try_from(quota.limit()).unwrap_or(u32::MAX),
        unit: unit_of(per) as i32,
    }
}

/// The unit `per` is exactly, else `Unknown`.
fn unit_of(per: Duration) -> Unit {
    if per.subsec_nanos() != 0 {
        return Unit::Unknown;
    }
    UNITS
        .iter()
        .find(|(_, seconds)| *seconds == per.as_secs())
        .map_or(Unit::Unknown, |(unit, _)| *unit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tollgate_core::Rate;

    #[test]
    fn a_window_of_one_unit_is_that_unit_and_any_other_is_unknown() {
        let per_minute = Quota::fixed_window(20, Duration::from_secs(60)).unwrap();
        let limit = current_limit("edge", &per_minute);
        assert_eq!(
            (limit.requests_per_unit, limit.unit),
            (20, Unit::Minute as i32)
        );
        let quarter = Quota::sliding_window_counter(10, Duration::from_secs(900)).unwrap();
        assert_eq!(current_limit("q", &quarter).unit, Unit::Unknown as i32);
        // A bucket of 10 refilled at 10 a second is whole again in a second.
        let bucket = Quota::token_bucket(10, Rate::per_second(10)).unwrap();
        assert_eq!(current_limit("b", &bucket).unit, Unit::Second as i32);
        let month = Quota::fixed_window(5, Duration::from_secs(2_592_000)).unwrap();
        assert_eq!(current_limit("m", &month).unit, Unit::Month as i32);
        let huge = Quota::fixed_window(u64::from(u32::MAX) + 5, Duration::from_secs(1)).unwrap();
        assert_eq!(current_limit("h", &huge).requests_per_unit, u32::MAX);
    }
}
