//! How a quota is advertised: the `q` (quota) and `w` (window) of a `RateLimit-Policy` item.
//!
//! The draft describes a policy as "`q` units per `w` seconds". Window algorithms fit that
//! exactly; for the scheduled algorithms (token bucket, GCRA, pacing) `q` is what can be spent
//! at once and `w` the time an exhausted caller takes to get all of it back, which is the
//! closest honest reading: a client that spends `q` and then waits `w` never gets refused. A
//! concurrency quota has no window (`q` requests at once, for as long as they run), so it
//! advertises `q` alone: the draft makes `w` optional.

use std::time::Duration;

use tollgate_core::{Algorithm, Quota};

use crate::headers::sf::{sf_integer, sf_seconds_up};

/// The numbers a `RateLimit-Policy` item advertises for one quota, already rounded and clamped
/// for the field: `q` at most [`MAX_SF_INTEGER`](crate::headers::sf::MAX_SF_INTEGER), `w` at least
/// one second.
///
/// | algorithm | `q` | `w` (seconds, rounded up) |
/// |---|---|---|
/// | fixed window, sliding window counter, sliding window log | the window limit | the window length |
/// | token bucket | the capacity | the time an empty bucket takes to refill (τ), at least 1 |
/// | GCRA | the burst | τ = burst × emission interval, at least 1 |
/// | leaky bucket (pacing) | the slots that can be scheduled ahead | `limit` emission intervals, at least 1 |
/// | concurrency | the requests that may run at once | none (no window) |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct PolicyTerms {
    /// `q`: how much can be spent in one window (or at once, for scheduled algorithms).
    pub(crate) quota: u64,
    /// `w`: the window, or the time to get the whole quota back, in whole seconds (≥ 1);
    /// `None` for a quota with no window (concurrency).
    pub(crate) window_secs: Option<u64>,
}

impl PolicyTerms {
    /// The terms advertised for `quota` (see the table above).
    pub(crate) fn of(quota: &Quota) -> PolicyTerms {
        let window = match quota.algorithm() {
            Algorithm::FixedWindow
            | Algorithm::SlidingWindowCounter
            | Algorithm::SlidingWindowLog => {
                Some(quota.window().unwrap_or_else(|| quota.replenish_time()))
            }
            Algorithm::Concurrency => None,
            // Token bucket, GCRA, pacing, and any algorithm added later: the time an exhausted
            // caller takes to get the whole limit back.
            _ => Some(quota.replenish_time()),
        };
        PolicyTerms {
            quota: sf_integer(quota.limit()),
            window_secs: window.map(window_secs),
        }
    }
}

/// Whole seconds, rounded up, at least 1, at most an sf-integer.
fn window_secs(window: Duration) -> u64 {
    // Quota's constructors already rule out a zero window or interval; the floor stays so that
    // no future algorithm can make the field say `w=0`, which would tell a client nothing.
    sf_seconds_up(window).max(1)
}

#[cfg(test)]
mod tests {
    use tollgate_core::Rate;

    use super::*;

    fn terms(quota: Quota) -> (u64, u64) {
        let terms = PolicyTerms::of(&quota);
        (terms.quota, terms.window_secs.expect("a windowed quota"))
    }

    #[test]
    fn a_concurrency_quota_advertises_its_limit_and_no_window() {
        let terms = PolicyTerms::of(&Quota::concurrency(20).unwrap());
        assert_eq!((terms.quota, terms.window_secs), (20, None));
    }

    #[test]
    fn window_algorithms_advertise_limit_per_window() {
        let minute = Duration::from_secs(60);
        assert_eq!(terms(Quota::fixed_window(100, minute).unwrap()), (100, 60));
        assert_eq!(
            terms(Quota::sliding_window_counter(400, minute).unwrap()),
            (400, 60)
        );
        assert_eq!(
            terms(Quota::sliding_window_log(7, minute).unwrap()),
            (7, 60)
        );
    }

    #[test]
    fn window_lengths_round_up() {
        let quota = Quota::fixed_window(3, Duration::from_millis(1500)).unwrap();
        assert_eq!(terms(quota), (3, 2));
        let tiny = Quota::sliding_window_log(3, Duration::from_micros(1)).unwrap();
        assert_eq!(terms(tiny), (3, 1));
    }

    #[test]
    fn token_bucket_advertises_capacity_per_refill_time() {
        // 50 tokens at 10 a second: empty to full in 5 s.
        let quota = Quota::token_bucket(50, Rate::per_second(10)).unwrap();
        assert_eq!(terms(quota), (50, 5));
        // 5 tokens, one every 6 s: 30 s.
        let slow = Quota::token_bucket(5, Rate::every(Duration::from_secs(6))).unwrap();
        assert_eq!(terms(slow), (5, 30));
    }

    #[test]
    fn gcra_advertises_burst_per_tolerance_at_least_one_second() {
        let quota = Quota::gcra(Rate::per_minute(60), 10).unwrap();
        assert_eq!(terms(quota), (10, 10));
        // τ = 3 × 100 ms = 300 ms: rounded up to 1 s, never 0.
        let fast = Quota::gcra(Rate::per_second(10), 3).unwrap();
        assert_eq!(terms(fast), (3, 1));
        // τ = 7 × (1/3 s, rounded up to whole µs) = a little over 2.33 s: 3 s.
        let odd = Quota::gcra(Rate::per_second(3), 7).unwrap();
        assert_eq!(terms(odd), (7, 3));
    }

    #[test]
    fn pacing_advertises_schedulable_slots_per_their_drain_time() {
        // One every 100 ms, at most 250 ms of delay: 3 slots, drained in 300 ms: w = 1.
        let quota = Quota::leaky_bucket(Rate::per_second(10), Duration::from_millis(250)).unwrap();
        assert_eq!(terms(quota), (3, 1));
        // One a second, up to 9 s of delay: 10 slots, 10 s.
        let slow = Quota::leaky_bucket(Rate::per_second(1), Duration::from_secs(9)).unwrap();
        assert_eq!(terms(slow), (10, 10));
    }

    #[test]
    fn the_largest_quotas_stay_within_sf_integers() {
        let quota = Quota::fixed_window(tollgate_core::quota::MAX_LIMIT, Duration::from_secs(1));
        let (q, w) = terms(quota.unwrap());
        assert_eq!(q, tollgate_core::quota::MAX_LIMIT);
        assert!(q <= crate::headers::sf::MAX_SF_INTEGER);
        assert_eq!(w, 1);
        assert_eq!(
            window_secs(Duration::MAX),
            crate::headers::sf::MAX_SF_INTEGER
        );
    }

    #[test]
    fn the_example_of_policyterms() -> Result<(), Box<dyn std::error::Error>> {
        use super::PolicyTerms;
        use std::time::Duration;
        use tollgate_core::{Quota, Rate};

        let hourly = Quota::fixed_window(1000, Duration::from_secs(3600))?;
        assert_eq!(
            PolicyTerms::of(&hourly),
            PolicyTerms {
                quota: 1000,
                window_secs: Some(3600)
            }
        );

        // A burst of 5, refilled at 10 a second: empty to full in 500 ms, advertised as 1 s.
        let bursty = Quota::gcra(Rate::per_second(10), 5)?;
        assert_eq!(
            PolicyTerms::of(&bursty),
            PolicyTerms {
                quota: 5,
                window_secs: Some(1)
            }
        );
        Ok(())
    }
}
