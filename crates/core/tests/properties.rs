//! Property tests: every algorithm against an independent oracle, and no input that panics.
//!
//! The oracles are the textbook formulations, not copies of tollgate's code: the two-number token
//! bucket (tokens and last refill time) for GCRA, and an exact log of allowed arrivals for the
//! window algorithms.

use std::time::Duration;

use proptest::prelude::*;
use tollgate_core::algorithm::AlgorithmState;
use tollgate_core::algorithm::fixed_window::WindowCount;
use tollgate_core::algorithm::gcra_state::GcraState;
use tollgate_core::algorithm::sliding_window_counter::SlidingCounts;
use tollgate_core::algorithm::sliding_window_log::ChargeLog;
use tollgate_core::{Decision, Quota, Rate, RefusalReason, Timestamp};

const START: u64 = 1_700_000_000_000_000;

/// The seeds' token bucket: `tokens = min(B, tokens + elapsed × R)`, kept in units of
/// µs-of-refill (tokens × T) so it stays in integers.
struct TwoNumberBucket {
    capacity: u64,
    interval: u64,
    tokens_as_micros: u64,
    last_refill: u64,
}

impl TwoNumberBucket {
    fn check(&mut self, now: u64, cost: u64) -> (bool, u64, u64) {
        let full = self.capacity * self.interval;
        let earned = now.saturating_sub(self.last_refill);
        self.tokens_as_micros = (self.tokens_as_micros + earned).min(full);
        self.last_refill = now.max(self.last_refill);
        let needed = cost * self.interval;
        if cost <= self.capacity && needed <= self.tokens_as_micros {
            self.tokens_as_micros -= needed;
            (true, self.tokens_as_micros / self.interval, 0)
        } else {
            let retry = needed.saturating_sub(self.tokens_as_micros);
            (false, self.tokens_as_micros / self.interval, retry)
        }
    }
}

fn steps(max_gap: u64, max_cost: u64) -> impl Strategy<Value = Vec<(u64, u64)>> {
    prop::collection::vec((0..=max_gap, 0..=max_cost), 1..120)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn gcra_matches_the_two_number_token_bucket(
        capacity in 1u64..20,
        interval in 1u64..3_000_000,
        gcra_form in any::<bool>(),
        events in steps(6_000_000, 24),
    ) {
        let rate = Rate::every(Duration::from_micros(interval));
        let quota = if gcra_form {
            Quota::gcra(rate, capacity).unwrap()
        } else {
            Quota::token_bucket(capacity, rate).unwrap()
        };
        let mut state = GcraState::default();
        let mut oracle = TwoNumberBucket { capacity, interval, tokens_as_micros: capacity * interval, last_refill: 0 };
        let mut now = START;
        for (gap, cost) in events {
            now += gap;
            let (decision, _) = state.check(&quota, Timestamp::from_micros(now), cost, Timestamp::from_micros(now));
            let (allowed, remaining, retry) = oracle.check(now, cost);
            prop_assert_eq!(decision.is_allowed(), allowed, "cost {} at {}", cost, now);
            prop_assert_eq!(decision.remaining(), remaining);
            if cost > capacity {
                prop_assert_eq!(decision.refusal(), Some(RefusalReason::CostExceedsLimit));
            } else {
                prop_assert_eq!(decision.retry_after(), Duration::from_micros(retry));
            }
        }
    }

    #[test]
    fn fixed_window_matches_an_exact_log(
        limit in 1u64..30,
        window in 1u64..5_000_000,
        events in steps(2_000_000, 8),
    ) {
        let quota = Quota::fixed_window(limit, Duration::from_micros(window)).unwrap();
        let mut state = WindowCount::default();
        let mut log: Vec<(u64, u64)> = Vec::new();
        let mut now = START;
        for (gap, cost) in events {
            now += gap;
            let window_start = now - now % window;
            let used: u64 = log.iter().filter(|(at, _)| *at >= window_start).map(|(_, c)| c).sum();
            let expected = cost <= limit && used + cost <= limit;
            let decision = step(&mut state, &quota, now, cost);
            prop_assert_eq!(decision.is_allowed(), expected);
            if expected {
                log.push((now, cost));
                prop_assert_eq!(decision.remaining(), limit - used - cost);
            } else if cost <= limit {
                prop_assert_eq!(decision.retry_after(), Duration::from_micros(window_start + window - now));
            }
        }
    }

    #[test]
    fn sliding_window_log_matches_an_exact_log(
        limit in 1u64..30,
        window in 1u64..5_000_000,
        events in steps(2_000_000, 8),
    ) {
        let quota = Quota::sliding_window_log(limit, Duration::from_micros(window)).unwrap();
        let mut state = ChargeLog::default();
        let mut log: Vec<(u64, u64)> = Vec::new();
        let mut now = START;
        for (gap, cost) in events {
            now += gap;
            let in_window = |at: u64| at + window > now;
            let used: u64 = log.iter().filter(|(at, _)| in_window(*at)).map(|(_, c)| c).sum();
            let expected = cost <= limit && used + cost <= limit;
            let decision = step(&mut state, &quota, now, cost);
            prop_assert_eq!(decision.is_allowed(), expected);
            if expected {
                log.push((now, cost));
            } else if cost <= limit {
                // The first moment enough of the window has slid out for the cost to fit.
                let retry_at = log
                    .iter()
                    .map(|(at, _)| at + window)
                    .filter(|t| *t > now)
                    .find(|t| {
                        let still: u64 = log.iter().filter(|(at, _)| at + window > *t).map(|(_, c)| c).sum();
                        still + cost <= limit
                    })
                    .unwrap();
                prop_assert_eq!(decision.retry_after(), Duration::from_micros(retry_at - now));
            }
        }
    }

    #[test]
    fn sliding_window_counter_matches_the_weighted_estimate_of_an_exact_log(
        limit in 1u64..50,
        window in 2u64..5_000_000,
        events in steps(2_000_000, 8),
    ) {
        let quota = Quota::sliding_window_counter(limit, Duration::from_micros(window)).unwrap();
        let mut state = SlidingCounts::default();
        let mut log: Vec<(u64, u64)> = Vec::new();
        let mut now = START;
        for (gap, cost) in events {
            now += gap;
            let current_start = now - now % window;
            let previous_start = current_start - window;
            let sum = |from: u64, to: u64| -> u64 {
                log.iter().filter(|(at, _)| *at >= from && *at < to).map(|(_, c)| c).sum()
            };
            let previous = sum(previous_start, current_start);
            let current = sum(current_start, u64::MAX);
            // estimate = previous × (window − elapsed) / window + current, compared exactly.
            let overlap = window - (now - current_start);
            let estimate_scaled = u128::from(previous) * u128::from(overlap)
                + u128::from(current + cost) * u128::from(window);
            let expected = cost <= limit && estimate_scaled <= u128::from(limit) * u128::from(window);
            let decision = step(&mut state, &quota, now, cost);
            prop_assert_eq!(decision.is_allowed(), expected, "prev {} cur {} cost {}", previous, current, cost);
            if expected {
                log.push((now, cost));
            } else if cost <= limit {
                // Retrying exactly at retry-after fits, and one microsecond earlier does not.
                let wait = decision.retry_after().as_micros() as u64;
                prop_assert!(wait > 0);
                let later = step(&mut state.clone(), &quota, now + wait, cost);
                prop_assert!(later.is_allowed(), "retry-after {} too early", wait);
                let earlier = step(&mut state.clone(), &quota, now + wait - 1, cost);
                prop_assert!(!earlier.is_allowed(), "retry-after {} too late", wait);
            }
        }
    }

    /// A bucket whose quota changes (capacity, rate, or both; token bucket or GCRA) keeps
    /// exactly the units its caller owed, capped at the new capacity, and a refusal under the
    /// new quota never asks for a longer wait than one of its own emission intervals.
    #[test]
    fn a_changed_bucket_quota_keeps_exactly_what_the_caller_owed(
        (capacity_a, interval_a) in (1u64..50, 1u64..5_000_000),
        (capacity_b, interval_b) in (1u64..50, 1u64..5_000_000),
        events in steps(3_000_000, 10),
        pause in 0u64..10_000_000,
    ) {
        let old = Quota::token_bucket(capacity_a, Rate::every(Duration::from_micros(interval_a))).unwrap();
        let new = Quota::gcra(Rate::every(Duration::from_micros(interval_b)), capacity_b).unwrap();
        let mut state = GcraState::default();
        let mut now = START;
        for (gap, cost) in events {
            now += gap;
            step(&mut state, &old, now, cost);
        }
        now += pause;
        let at = Timestamp::from_micros(now);
        let owed = capacity_a - state.peek(&old, at, 0).remaining();
        let under_new = state.peek(&new, at, 0);
        prop_assert_eq!(under_new.remaining(), capacity_b.saturating_sub(owed));
        let one_more = step(&mut state, &new, now, 1);
        if !one_more.is_allowed() {
            prop_assert!(one_more.retry_after() <= Duration::from_micros(interval_b));
        }
    }

    #[test]
    fn no_input_panics_or_wraps_into_an_allow(
        limit in prop_oneof![1u64..100, any::<u64>()],
        period in prop_oneof![1u64..10_000_000, 1u64..(366 * 86_400_000_000), any::<u64>()],
        count in prop_oneof![1u64..100, any::<u64>()],
        events in prop::collection::vec(
            (prop_oneof![START..START + 1_000_000_000, any::<u64>()], prop_oneof![0u64..100, any::<u64>()]),
            1..40,
        ),
    ) {
        let period = Duration::from_micros(period);
        let quotas = [
            Quota::token_bucket(limit, Rate::per(count, period)),
            Quota::gcra(Rate::per(count, period), limit),
            Quota::fixed_window(limit, period),
            Quota::sliding_window_counter(limit, period),
            Quota::sliding_window_log(limit, period),
            Quota::leaky_bucket(Rate::per(count, period), period),
        ];
        let valid: Vec<Quota> = quotas.into_iter().flatten().collect();
        prop_assume!(!valid.is_empty());
        for quota in valid {
            let mut states = (GcraState::default(), WindowCount::default(), SlidingCounts::default(), ChargeLog::default());
            for (now, cost) in &events {
                let decisions = [
                    step(&mut states.0, &quota, *now, *cost),
                    step(&mut states.1, &quota, *now, *cost),
                    step(&mut states.2, &quota, *now, *cost),
                    step(&mut states.3, &quota, *now, *cost),
                ];
                for decision in decisions {
                    if *cost > quota.limit() {
                        prop_assert!(!decision.is_allowed());
                    }
                    if decision.is_allowed() {
                        prop_assert_eq!(decision.retry_after(), Duration::ZERO);
                    }
                }
            }
        }
    }
}

fn step<S: AlgorithmState>(state: &mut S, quota: &Quota, now: u64, cost: u64) -> Decision {
    let now = Timestamp::from_micros(now);
    state.check(quota, now, cost, now).0
}
