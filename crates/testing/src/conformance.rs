//! The store conformance suite: every [`Store`] runs it, so a rule decides the same wherever its
//! state lives.
//!
//! Each case is a check of one behaviour, run on a factory that builds a fresh store on a given
//! [`ManualClock`] (a remote store passes the clock's "now" to the server in test mode). The
//! [`conformance_suite!`](crate::conformance_suite) macro turns every case into a `#[test]` named
//! after it, which calls [`run`] with its name:
//!
//! ```
//! use tollgate_core::MemoryStore;
//! use tollgate_testing::ManualClock;
//!
//! fn memory_store(clock: ManualClock) -> MemoryStore<ManualClock> {
//!     MemoryStore::builder().clock(clock).build()
//! }
//!
//! mod conformance {
//!     tollgate_testing::conformance_suite!(
//!         block_on = futures_executor::block_on,
//!         store = super::memory_store
//!     );
//! }
//! # fn main() {}
//! ```
//!
//! The cases include worked examples whose numbers are in their names (the token bucket of
//! capacity 20 refilled 2 a second, the sliding window counter at 12:01:15, ...).

use std::time::Duration;

use super::ManualClock;
use tollgate_core::{
    Algorithm, BatchDecision, Decision, Item, Key, Mode, Quota, Rate, RefusalReason, RuleId, Store,
    Timestamp,
};

mod state_changes;
use state_changes::*;
mod taking;
use taking::*;
mod concurrency;
use concurrency::*;
mod settling;
use settling::*;

/// The suite's start time: midnight UTC, 2023-11-14 (aligned to days, hours and minutes).
pub const START: Timestamp = Timestamp::from_secs(19_675 * 86_400);

/// Turns every conformance case into a `#[test]` for one store.
///
/// `block_on` is a function that runs a future to completion (`futures_executor::block_on`, or a
/// wrapper around a tokio runtime); `store` is a function or closure `ManualClock -> S`. Each
/// test is named after its case and calls [`run`](crate::conformance::run) with that name.
#[macro_export]
macro_rules! conformance_suite {
    (block_on = $block_on:path, store = $store:expr) => {
        $crate::__conformance_cases!(@tests $block_on, $store);
    };
}

/// The conformance cases, listed once: hands the list to what the suite makes of it (a test
/// per case in the user's crate, the dispatch in `conformance::run`). Not for direct use.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_cases {
    ($($made_of:tt)*) => {
        $crate::__conformance_each! { ($($made_of)*)
            token_bucket_capacity_20_refill_2_per_second_after_idle_minute,
            token_bucket_5_tokens_one_per_6_seconds_bursts_5_then_10_a_minute,
            gcra_10_per_second_burst_5_has_exact_retry_after,
            fixed_window_60_per_minute_lets_120_through_across_a_boundary,
            sliding_window_log_never_passes_more_than_its_limit_in_any_window,
            token_bucket_never_passes_more_than_capacity_plus_rate_times_span,
            sliding_window_counter_weights_the_previous_window,
            batch_where_the_second_rule_refuses_charges_neither,
            shadow_items_act_alone_and_are_charged_only_when_the_request_goes_ahead,
            read_only_items_are_never_charged_and_their_refusal_refuses_the_batch,
            cost_10_takes_10,
            cost_above_the_limit_is_refused_with_its_own_reason,
            refund_with_a_receipt_restores_exactly,
            refund_after_the_window_rolled_over_uses_the_right_window,
            peek_answers_without_charging,
            reset_clears_a_caller,
            clock_stepping_backwards_grants_nothing,
            leaky_bucket_paces_instead_of_refusing,
            several_pacing_items_start_at_the_latest_slot,
            equal_keys_under_different_rules_do_not_share_state,
            quota_travels_with_the_item,
            a_much_longer_period_keeps_the_usage_and_still_ends,
            fixed_window_lengthened_from_a_second_to_an_hour_lets_the_caller_back,
            token_bucket_of_1000_a_day_spent_then_10_a_second_waits_at_most_100_ms,
            a_much_shorter_period_waits_no_longer_than_the_new_quota,
            token_bucket_refilled_more_slowly_at_the_same_capacity_grants_nothing_at_once,
            token_bucket_and_gcra_with_the_same_numbers_share_one_state,
            token_bucket_to_pacing_and_back_grants_nothing_extra,
            a_raised_limit_gives_the_extra_room_at_once,
            a_lowered_limit_refuses_no_longer_than_the_new_quota_would,
            after_a_quota_change_the_long_run_total_stays_within_bounds,
            keys_of_one_rule_are_each_judged_by_their_own_quota,
            a_refund_sent_twice_gives_back_once,
            a_bucket_refund_after_its_share_of_the_schedule_passed_gives_nothing,
            a_window_refund_after_its_window_ended_gives_nothing_to_the_new_one,
            a_log_refund_after_its_entry_left_the_window_gives_nothing,
            a_bucket_refund_after_the_emission_interval_changed_gives_nothing,
            a_clock_stepping_back_an_hour_grants_nothing,
            a_clock_stepping_back_an_hour_does_not_freeze_a_bucket,
            a_clock_stepping_back_an_hour_keeps_a_window_and_its_announced_wait,
            receipts_refunded_in_any_order_each_give_back_their_charge,
            a_refund_after_a_capacity_cut_gives_back_at_most_its_cost,
            a_refund_after_a_clock_step_back_gives_back_at_most_its_cost,
            pacing_gives_back_only_its_latest_booking,
            a_lowered_sliding_limit_waits_no_longer_than_the_new_quota_alone,
            up_to_takes_what_there_is_and_says_how_much,
            a_lease_given_back_by_its_receipt_restores_the_count,
            a_debt_is_charged_in_full_and_refuses_leases_until_paid,
            a_debt_carries_into_the_next_window,
            debt_stays_charged_when_the_batch_is_refused,
            a_debt_lapses_once_the_allowance_could_have_paid_it,
            reset_forgives_a_debt,
            shadow_and_pacing_items_take_exactly,
            a_huge_debt_is_capped_and_never_fails,
            concurrency_admits_up_to_its_limit_and_an_ended_request_frees_its_slot,
            concurrency_slots_do_not_come_back_with_time,
            concurrency_is_all_or_nothing_with_the_other_rules,
            concurrency_gives_back_each_hold_once,
            concurrency_reset_frees_the_callers_slots,
            an_estimate_waits_until_the_debt_and_its_cost_fit,
            an_estimate_is_charged_exactly_once_the_debt_is_paid,
            settling_above_the_estimate_charges_the_difference_as_debt,
            settling_below_the_estimate_gives_back_the_difference,
            an_estimate_of_zero_charges_the_whole_actual_cost
        }
    };
}

/// What the suite makes of each case. Not for direct use.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_each {
    ((@tests $block_on:path, $store:expr) $($case:ident),+ $(,)?) => {
        $(
            #[test]
            fn $case() {
                $block_on($crate::conformance::run(stringify!($case), &$store));
            }
        )+
    };
    ((@run $name:expr, $make:expr) $($case:ident),+ $(,)?) => {{
        $(
            if $name == stringify!($case) {
                return $crate::conformance::$case($make).await;
            }
        )+
        panic!("no conformance case is named {:?}", $name);
    }};
}

/// Runs the conformance case named `case` on stores made by `make` (a fresh store on the given
/// [`ManualClock`] each time the case needs one): what each test of
/// [`conformance_suite!`](crate::conformance_suite) calls. Panics, failing the test, on a name
/// that is no case.
pub async fn run<S: Store>(case: &str, make: &impl Fn(ManualClock) -> S) {
    crate::__conformance_cases!(@run case, make)
}

fn rule(id: &str) -> RuleId {
    RuleId::new(id).expect("conformance rule ids are valid")
}

fn ms(millis: u64) -> Duration {
    Duration::from_millis(millis)
}

fn secs(seconds: u64) -> Duration {
    Duration::from_secs(seconds)
}

/// One quota of each algorithm, each with a limit of 10 (pacing: 10 slots).
fn one_of_each() -> Vec<Quota> {
    let window = secs(60);
    [
        Quota::token_bucket(10, Rate::per_second(1)),
        Quota::fixed_window(10, window),
        Quota::sliding_window_counter(10, window),
        Quota::sliding_window_log(10, window),
        Quota::leaky_bucket(Rate::per_second(10), ms(900)),
    ]
    .into_iter()
    .map(|quota| quota.expect("conformance quotas are valid"))
    .collect()
}

async fn check_one<S: Store>(store: &S, item: Item<'_>) -> BatchDecision {
    store
        .check(&[item])
        .await
        .unwrap_or_else(|err| panic!("store failed a check: {err}"))
}

async fn decide<S: Store>(store: &S, item: Item<'_>) -> Decision {
    *check_one(store, item).await.items()[0].decision()
}

async fn peek<S: Store>(store: &S, item: Item<'_>) -> Decision {
    store
        .peek(&item)
        .await
        .unwrap_or_else(|err| panic!("store failed a peek: {err}"))
}

async fn count_allowed<S: Store>(store: &S, item: Item<'_>, attempts: u32) -> u32 {
    let mut allowed = 0;
    for _ in 0..attempts {
        allowed += u32::from(check_one(store, item).await.is_allowed());
    }
    allowed
}

/// Token bucket, capacity 20, refill 2/s: idle a minute, 50 at once gives exactly 20, then one
/// every 500 ms (20 in the next 10 s).
pub(crate) async fn token_bucket_capacity_20_refill_2_per_second_after_idle_minute<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let clock = ManualClock::new(START);
    let store = make(clock.clone());
    let (id, key) = (rule("search"), Key::new("user77"));
    let item = Item::new(
        &id,
        Quota::token_bucket(20, Rate::per_second(2)).expect("valid"),
        &key,
    );
    clock.advance(secs(60));
    assert_eq!(
        count_allowed(&store, item, 50).await,
        20,
        "a full bucket of 20 allows exactly 20"
    );
    let mut steady = 0;
    for _ in 0..100 {
        clock.advance(ms(100));
        steady += u32::from(check_one(&store, item).await.is_allowed());
    }
    assert_eq!(steady, 20, "then 2 a second: 20 in 10 s");
}

/// Capacity 5, one token back every 6 s: a burst of 5, then 10 a minute.
pub(crate) async fn token_bucket_5_tokens_one_per_6_seconds_bursts_5_then_10_a_minute<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let clock = ManualClock::new(START);
    let store = make(clock.clone());
    let (id, key) = (rule("login"), Key::new("user77"));
    let quota = Quota::token_bucket(5, Rate::every(secs(6))).expect("valid");
    let item = Item::new(&id, quota, &key);
    assert_eq!(count_allowed(&store, item, 8).await, 5, "a burst of 5");
    let mut in_the_next_minute = 0;
    for _ in 0..60 {
        clock.advance(secs(1));
        in_the_next_minute += count_allowed(&store, item, 3).await;
    }
    assert_eq!(in_the_next_minute, 10, "then 10 a minute");
}

/// GCRA at 10/s with a burst of 5: T = 100 ms, τ = 500 ms, exact retry-after values.
pub(crate) async fn gcra_10_per_second_burst_5_has_exact_retry_after<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let clock = ManualClock::new(START);
    let store = make(clock.clone());
    let (id, key) = (rule("partner"), Key::new("scores-site"));
    let quota = Quota::gcra(Rate::per_second(10), 5).expect("valid");
    assert_eq!(quota.emission_interval(), Some(ms(100)));
    assert_eq!(quota.replenish_time(), ms(500));
    let item = Item::new(&id, quota, &key);
    for expected_remaining in (0..5).rev() {
        let decision = decide(&store, item).await;
        assert!(decision.is_allowed());
        assert_eq!(decision.remaining(), expected_remaining);
        assert_eq!(decision.limit(), 5);
    }
    let sixth = decide(&store, item).await;
    assert_eq!(sixth.refusal(), Some(RefusalReason::LimitReached));
    assert_eq!(sixth.retry_after(), ms(100));
    assert_eq!(sixth.reset_after(), ms(500));
    assert_eq!(sixth.retry_after_secs(), 1, "100 ms rounds up to 1 s");
    clock.advance(ms(40));
    assert_eq!(decide(&store, item).await.retry_after(), ms(60));
    clock.advance(ms(60));
    let on_time = decide(&store, item).await;
    assert!(
        on_time.is_allowed(),
        "allowed exactly when retry-after said"
    );
    assert_eq!(on_time.remaining(), 0);
    assert_eq!(decide(&store, item).await.retry_after(), ms(100));
}

/// Fixed window, 60 a minute: 60 just before a boundary and 60 just after — 120 within 10 s.
pub(crate) async fn fixed_window_60_per_minute_lets_120_through_across_a_boundary<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let clock = ManualClock::new(START.saturating_add_micros(55_000_000));
    let store = make(clock.clone());
    let (id, key) = (rule("reads"), Key::new("user77"));
    let item = Item::new(&id, Quota::fixed_window(60, secs(60)).expect("valid"), &key);
    let before = count_allowed(&store, item, 70).await;
    let refused = decide(&store, item).await;
    assert_eq!(refused.retry_after(), secs(5), "retry at the boundary");
    clock.advance(secs(5));
    let after = count_allowed(&store, item, 70).await;
    assert_eq!(
        (before, after),
        (60, 60),
        "the documented weakness: 120 through in 5 s"
    );
}

/// Sliding window log, 5 per 10 s: in no rolling 10 s window do more than 5 pass.
pub(crate) async fn sliding_window_log_never_passes_more_than_its_limit_in_any_window<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let clock = ManualClock::new(START);
    let store = make(clock.clone());
    let (id, key) = (rule("otp"), Key::new("+15550100"));
    let window = secs(10);
    let item = Item::new(
        &id,
        Quota::sliding_window_log(5, window).expect("valid"),
        &key,
    );
    let mut passed = Vec::new();
    let mut elapsed = 0u64;
    // Uneven arrivals: bursts and gaps.
    for step in 0..400u64 {
        elapsed += [50, 700, 1_300, 20, 3_000][(step % 5) as usize];
        clock.set(START.saturating_add_micros(elapsed * 1_000));
        if check_one(&store, item).await.is_allowed() {
            passed.push(elapsed);
        }
    }
    assert!(passed.len() > 20, "the log lets traffic through over time");
    for (i, start) in passed.iter().enumerate() {
        let in_window = passed[i..]
            .iter()
            .take_while(|at| **at < start + 10_000)
            .count();
        assert!(
            in_window <= 5,
            "{in_window} passed in the 10 s from {start} ms"
        );
    }
}

/// A bucket of capacity B refilled at R never passes more than B + R × t in any span t.
pub(crate) async fn token_bucket_never_passes_more_than_capacity_plus_rate_times_span<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let clock = ManualClock::new(START);
    let store = make(clock.clone());
    let (id, key) = (rule("posting"), Key::new("user77"));
    let (capacity, per_second) = (5u64, 2u64);
    let quota = Quota::token_bucket(capacity, Rate::per_second(per_second)).expect("valid");
    let item = Item::new(&id, quota, &key);
    let mut passed = Vec::new();
    let mut elapsed_ms = 0u64;
    for step in 0..600u64 {
        elapsed_ms += [10, 10, 10, 900, 250, 1_700][(step % 6) as usize];
        clock.set(START.saturating_add_micros(elapsed_ms * 1_000));
        if check_one(&store, item).await.is_allowed() {
            passed.push(elapsed_ms);
        }
    }
    for (i, first) in passed.iter().enumerate() {
        for (j, last) in passed.iter().enumerate().skip(i) {
            let count = (j - i + 1) as u64;
            // Integer form of count <= B + R * span.
            assert!(
                count * 1_000 <= capacity * 1_000 + per_second * (last - first),
                "{count} passed between {first} ms and {last} ms"
            );
        }
    }
}

/// The sliding window counter 15 s into a minute with 80 last minute and 30 so far estimates
/// 80 × 45/60 + 30 = 90: under a limit of 100 a request passes, leaving 9.
pub(crate) async fn sliding_window_counter_weights_the_previous_window<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let clock = ManualClock::new(START.saturating_add_micros(20_000_000));
    let store = make(clock.clone());
    let (id, key) = (rule("search"), Key::new("user77"));
    let quota = Quota::sliding_window_counter(100, secs(60)).expect("valid");
    let item = Item::new(&id, quota, &key);
    assert!(
        check_one(&store, item.with_cost(80)).await.is_allowed(),
        "80 in the previous minute"
    );
    clock.set(START.saturating_add_micros(75_000_000)); // 12:01:15
    assert!(
        check_one(&store, item.with_cost(30)).await.is_allowed(),
        "30 so far this minute"
    );
    let estimate = peek(&store, item.with_cost(0)).await;
    assert_eq!(estimate.remaining(), 10, "estimate 90 of 100");
    let decision = decide(&store, item).await;
    assert!(decision.is_allowed());
    assert_eq!(decision.remaining(), 9);
    assert_eq!(count_allowed(&store, item, 20).await, 9);
}

/// All or nothing: when the second rule refuses, the first is not charged either.
pub(crate) async fn batch_where_the_second_rule_refuses_charges_neither<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let store = make(ManualClock::new(START));
    let (per_ip, per_account) = (rule("login-ip"), rule("login-account"));
    let (ip, account) = (Key::new("203.0.113.7"), Key::new("user77"));
    let roomy = Item::new(
        &per_ip,
        Quota::token_bucket(5, Rate::per_minute(1)).expect("valid"),
        &ip,
    );
    let tight = Item::new(
        &per_account,
        Quota::token_bucket(1, Rate::per_minute(1)).expect("valid"),
        &account,
    );
    assert!(
        check_one(&store, tight).await.is_allowed(),
        "spend the only token"
    );
    let answer = check_one(&store, roomy).await;
    assert_eq!(answer.items()[0].decision().remaining(), 4);
    let batch = store.check(&[roomy, tight]).await.expect("store answers");
    assert!(!batch.is_allowed());
    assert!(
        batch.items()[0].charge().is_none(),
        "the first rule was not charged"
    );
    assert_eq!(
        batch.items()[0].decision().remaining(),
        4,
        "reported as it stands"
    );
    assert_eq!(
        batch.items()[1].decision().refusal(),
        Some(RefusalReason::LimitReached)
    );
    let items = [roomy, tight];
    let (refusing, _) = batch.refusing(&items).expect("a refusing item");
    assert_eq!(refusing.rule(), &per_account);
    assert_eq!(
        peek(&store, roomy).await.remaining(),
        3,
        "still 4 left: peeking at cost 1 leaves 3"
    );
}

/// Shadow items are evaluated as if enforced alone, charged only when the request goes ahead
/// and they would allow it; their would-be refusals are reported.
pub(crate) async fn shadow_items_act_alone_and_are_charged_only_when_the_request_goes_ahead<
    S: Store,
>(
    make: &impl Fn(ManualClock) -> S,
) {
    let store = make(ManualClock::new(START));
    let (enforced, shadow) = (rule("posting"), rule("posting-tighter"));
    let key = Key::new("user77");
    let enforce = Item::new(
        &enforced,
        Quota::token_bucket(3, Rate::per_hour(1)).expect("valid"),
        &key,
    );
    let trial = Item::new(
        &shadow,
        Quota::token_bucket(2, Rate::per_hour(1)).expect("valid"),
        &key,
    )
    .with_mode(Mode::Shadow);
    let batch = [enforce, trial];
    for _ in 0..2 {
        let answer = store.check(&batch).await.expect("store answers");
        assert!(answer.is_allowed());
        assert!(
            answer.items()[1].charge().is_some(),
            "shadow charged when it allows"
        );
    }
    let third = store.check(&batch).await.expect("store answers");
    assert!(third.is_allowed(), "a shadow refusal never refuses");
    assert_eq!(
        third.items()[1].decision().refusal(),
        Some(RefusalReason::LimitReached)
    );
    assert!(third.items()[1].charge().is_none());
    assert!(third.refusing(&batch).is_none());
    let fourth = store.check(&batch).await.expect("store answers");
    assert!(!fourth.is_allowed(), "the enforced rule is used up");
    assert!(
        fourth.items()[1].charge().is_none(),
        "shadow not charged when refused"
    );
    // A fresh shadow rule is not charged by a request that does not go ahead.
    let (fresh_id, fresh_key) = (rule("posting-trial"), Key::new("user77"));
    let fresh = Item::new(
        &fresh_id,
        Quota::token_bucket(2, Rate::per_hour(1)).expect("valid"),
        &fresh_key,
    )
    .with_mode(Mode::Shadow);
    let refused = store.check(&[enforce, fresh]).await.expect("store answers");
    assert!(!refused.is_allowed());
    assert!(
        refused.items()[1].decision().is_allowed(),
        "would have allowed, alone"
    );
    assert_eq!(
        peek(&store, fresh.with_mode(Mode::Enforce))
            .await
            .remaining(),
        1,
        "uncharged"
    );
}

/// A read-only ([`Mode::ReadOnly`]) item is checked at its cost and never charged, alone or in a
/// batch; when it would refuse, the whole batch is refused and nothing in it is charged.
pub(crate) async fn read_only_items_are_never_charged_and_their_refusal_refuses_the_batch<
    S: Store,
>(
    make: &impl Fn(ManualClock) -> S,
) {
    let store = make(ManualClock::new(START));
    let (posting, block) = (rule("posting"), rule("posting-block"));
    let key = Key::new("user77");
    let post = Item::new(
        &posting,
        Quota::token_bucket(5, Rate::per_hour(1)).expect("valid"),
        &key,
    );
    let one_token = Quota::token_bucket(1, Rate::per_hour(1)).expect("valid");
    let gate = Item::new(&block, one_token, &key).with_mode(Mode::ReadOnly);
    for round in 0..3 {
        let alone = check_one(&store, gate).await;
        assert!(alone.is_allowed(), "round {round}: an open gate allows");
        assert!(alone.items()[0].charge().is_none(), "never charged");
        let batch = store.check(&[gate, post]).await.expect("store answers");
        assert!(batch.is_allowed());
        assert!(
            batch.items()[0].charge().is_none(),
            "the gate is not charged"
        );
        assert!(batch.items()[1].charge().is_some(), "the rest is");
    }
    assert_eq!(peek(&store, post.with_cost(0)).await.remaining(), 2);
    // Close the gate: its one token spent (as escalation's block is).
    assert!(
        check_one(&store, Item::new(&block, one_token, &key))
            .await
            .is_allowed()
    );
    let refused = store.check(&[post, gate]).await.expect("store answers");
    assert!(!refused.is_allowed(), "a closed gate refuses the request");
    assert!(
        refused.items()[0].charge().is_none(),
        "nothing else is charged"
    );
    let closed = refused.items()[1].decision();
    assert_eq!(closed.refusal(), Some(RefusalReason::LimitReached));
    assert!(
        closed.retry_after() > secs(3_500),
        "the gate says when it opens"
    );
    let items = [post, gate];
    let (refusing, _) = refused.refusing(&items).expect("a refusing item");
    assert_eq!(refusing.rule(), &block);
    assert_eq!(
        peek(&store, post.with_cost(0)).await.remaining(),
        2,
        "unchanged"
    );
    assert!(!check_one(&store, gate).await.is_allowed(), "alone, too");
}

/// A cost of 10 takes 10.
pub(crate) async fn cost_10_takes_10<S: Store>(make: &impl Fn(ManualClock) -> S) {
    let store = make(ManualClock::new(START));
    let (id, key) = (rule("search"), Key::new("user77"));
    for quota in one_of_each() {
        if quota.algorithm() == Algorithm::LeakyBucket {
            continue;
        }
        let item = Item::new(&id, quota, &key);
        store.reset(&id, &key).await.expect("store resets");
        let decision = decide(&store, item.with_cost(10)).await;
        assert!(decision.is_allowed(), "{:?}", quota.algorithm());
        assert_eq!(decision.remaining(), 0, "{:?}", quota.algorithm());
        assert!(
            !decide(&store, item).await.is_allowed(),
            "{:?}",
            quota.algorithm()
        );
    }
}

/// A cost that can never fit is a refusal with its own reason, for every algorithm.
pub(crate) async fn cost_above_the_limit_is_refused_with_its_own_reason<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let store = make(ManualClock::new(START));
    let (id, key) = (rule("export"), Key::new("user77"));
    for quota in one_of_each() {
        let item = Item::new(&id, quota, &key);
        let decision = decide(&store, item.with_cost(quota.limit() + 1)).await;
        assert_eq!(
            decision.refusal(),
            Some(RefusalReason::CostExceedsLimit),
            "{:?}",
            quota.algorithm()
        );
        assert_eq!(decision.retry_after(), Duration::ZERO);
        let huge = decide(&store, item.with_cost(u64::MAX)).await;
        assert_eq!(
            huge.refusal(),
            Some(RefusalReason::CostExceedsLimit),
            "{:?}",
            quota.algorithm()
        );
        assert_eq!(
            peek(&store, item).await.remaining(),
            quota.limit() - 1,
            "nothing charged"
        );
    }
}

/// Refunding with a receipt restores exactly what was there.
pub(crate) async fn refund_with_a_receipt_restores_exactly<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let clock = ManualClock::new(START);
    let store = make(clock.clone());
    let (id, key) = (rule("login"), Key::new("user77"));
    for quota in one_of_each() {
        store.reset(&id, &key).await.expect("store resets");
        let item = Item::new(&id, quota, &key);
        let first = check_one(&store, item.with_cost(3)).await;
        clock.advance(ms(10));
        let before = peek(&store, item).await;
        let items = [item.with_cost(4)];
        let charged = store.check(&items).await.expect("store answers");
        assert!(charged.is_allowed());
        let mut receipts = charged.into_receipts(&items);
        assert_eq!(receipts.len(), 1);
        let receipt = receipts.pop().expect("one receipt");
        store.refund(receipt).await.expect("store refunds");
        assert_eq!(peek(&store, item).await, before, "{:?}", quota.algorithm());
        assert!(first.is_allowed());
    }
}

/// A refund after the window rolled over comes out of the window it was charged to.
pub(crate) async fn refund_after_the_window_rolled_over_uses_the_right_window<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let clock = ManualClock::new(START.saturating_add_micros(50_000_000));
    let store = make(clock.clone());
    let (id, key) = (rule("follows"), Key::new("user77"));
    let sliding = Item::new(
        &id,
        Quota::sliding_window_counter(100, secs(60)).expect("valid"),
        &key,
    );
    let items = [sliding.with_cost(60)];
    let old = store
        .check(&items)
        .await
        .expect("store answers")
        .into_receipts(&items)
        .pop()
        .expect("charged");
    clock.set(START.saturating_add_micros(90_000_000)); // 30 s into the next window
    assert!(check_one(&store, sliding.with_cost(10)).await.is_allowed());
    // previous 60 × 30/60 + current 10 = 40 used.
    assert_eq!(peek(&store, sliding.with_cost(0)).await.remaining(), 60);
    store.refund(old).await.expect("store refunds");
    // previous 0 + current 10: the 10 charged this window stay charged.
    assert_eq!(peek(&store, sliding.with_cost(0)).await.remaining(), 90);

    let (fixed_id, fixed_key) = (rule("follows-fixed"), Key::new("user77"));
    let fixed = Item::new(
        &fixed_id,
        Quota::fixed_window(100, secs(60)).expect("valid"),
        &fixed_key,
    );
    clock.set(START.saturating_add_micros(170_000_000));
    let items = [fixed.with_cost(60)];
    let old = store
        .check(&items)
        .await
        .expect("store answers")
        .into_receipts(&items)
        .pop()
        .expect("charged");
    clock.set(START.saturating_add_micros(190_000_000));
    assert!(check_one(&store, fixed.with_cost(10)).await.is_allowed());
    store.refund(old).await.expect("store refunds");
    assert_eq!(
        peek(&store, fixed.with_cost(0)).await.remaining(),
        90,
        "a refund into a finished fixed window takes nothing from the new one"
    );
}

/// Peek says whether a cost would pass and charges nothing.
pub(crate) async fn peek_answers_without_charging<S: Store>(make: &impl Fn(ManualClock) -> S) {
    let store = make(ManualClock::new(START));
    let (id, key) = (rule("reads"), Key::new("user77"));
    for quota in one_of_each() {
        store.reset(&id, &key).await.expect("store resets");
        let item = Item::new(&id, quota, &key);
        for _ in 0..3 {
            let decision = peek(&store, item.with_cost(quota.limit())).await;
            assert!(decision.is_allowed(), "{:?}", quota.algorithm());
        }
        assert!(
            decide(&store, item.with_cost(quota.limit()))
                .await
                .is_allowed()
        );
        let after = peek(&store, item).await;
        assert!(!after.is_allowed(), "{:?}", quota.algorithm());
        assert!(after.retry_after() > Duration::ZERO);
    }
}

/// Reset clears one caller of one rule, and nobody else.
pub(crate) async fn reset_clears_a_caller<S: Store>(make: &impl Fn(ManualClock) -> S) {
    let store = make(ManualClock::new(START));
    let id = rule("login");
    let (blocked, other) = (Key::new("user77"), Key::new("user78"));
    for quota in one_of_each() {
        let item = Item::new(&id, quota, &blocked);
        let neighbour = Item::new(&id, quota, &other);
        store.reset(&id, &blocked).await.expect("store resets");
        store.reset(&id, &other).await.expect("store resets");
        assert!(
            decide(&store, item.with_cost(quota.limit()))
                .await
                .is_allowed()
        );
        assert!(
            decide(&store, neighbour.with_cost(quota.limit()))
                .await
                .is_allowed()
        );
        assert!(!decide(&store, item).await.is_allowed());
        store.reset(&id, &blocked).await.expect("store resets");
        assert!(
            decide(&store, item).await.is_allowed(),
            "{:?} cleared",
            quota.algorithm()
        );
        assert!(
            !decide(&store, neighbour).await.is_allowed(),
            "{:?} untouched",
            quota.algorithm()
        );
    }
    let unknown = rule("never-used");
    store
        .reset(&unknown, &blocked)
        .await
        .expect("resetting an unknown rule is fine");
}

/// A clock that steps backwards grants nothing: an exhausted caller stays refused. Windows and
/// logs read the rewound "now" as the window's start or newest entry, so stepping forward again
/// finds them as they were; buckets read it as an exhausted bucket and keep that, so the time the
/// clock then moves forward refills them as any time does (never beyond their capacity).
pub(crate) async fn clock_stepping_backwards_grants_nothing<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let clock = ManualClock::new(START.saturating_add_micros(3_600_000_000));
    let store = make(clock.clone());
    let (id, key) = (rule("sms"), Key::new("+15550100"));
    for quota in one_of_each() {
        store.reset(&id, &key).await.expect("store resets");
        let item = Item::new(&id, quota, &key);
        assert!(
            decide(&store, item.with_cost(quota.limit()))
                .await
                .is_allowed()
        );
        let refused = decide(&store, item).await;
        assert!(!refused.is_allowed());
        clock.rewind(secs(3_000));
        assert!(
            !decide(&store, item).await.is_allowed(),
            "{:?} after rewind",
            quota.algorithm()
        );
        clock.advance(secs(3_000));
        let keeps_a_schedule = quota.emission_interval().is_some();
        if keeps_a_schedule {
            let passed = count_allowed(&store, item, 2 * quota.limit() as u32).await;
            assert!(
                u64::from(passed) <= quota.limit(),
                "{:?}: {passed} passed back at start, more than a full bucket",
                quota.algorithm()
            );
        } else {
            assert!(
                !decide(&store, item).await.is_allowed(),
                "{:?} back at start",
                quota.algorithm()
            );
        }
    }
}

/// A clock past [`Timestamp::MAX_SUPPORTED`] (2^52 − 1 µs, the year 2112: a misread clock, a
/// test's) is not supported: every check, peek and refund answers an error that
/// [`is_time_out_of_range`](tollgate_core::StoreError::is_time_out_of_range) and names the supported
/// range, and leaves the key as it was. Once the clock is back in range the key reads as before,
/// the receipt handed back by the refused refund refunds, and checks charge as usual.
///
/// Not in [`conformance_suite!`](crate::conformance_suite): a store that cannot answer leaves a
/// `FallbackStore` (tollgate-wrappers) to answer each rule by its failure policy, so the
/// stores that keep the state run it by name (the in-memory store, Redis, Redis Cluster).
pub async fn a_time_past_the_supported_range_is_an_error_that_changes_nothing<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let last = Timestamp::MAX_SUPPORTED;
    // An hour before the end of the range.
    let in_range = Timestamp::from_micros(last.as_micros() - 3_600_000_000);
    let clock = ManualClock::new(in_range);
    let store = make(clock.clone());
    let (id, key, other) = (rule("clock"), Key::new("user77"), Key::new("user78"));
    let mut quotas = one_of_each();
    quotas.push(Quota::concurrency(10).expect("valid"));
    let range = last.as_micros().to_string();
    for quota in quotas {
        clock.set(in_range);
        store.reset(&id, &key).await.expect("store resets");
        let item = Item::new(&id, quota, &key);
        let uncharged = peek(&store, item).await;
        let items = [item.with_cost(3)];
        let charged = store.check(&items).await.expect("store answers in range");
        assert!(charged.is_allowed(), "{:?}", quota.algorithm());
        let mut receipt = charged.into_receipts(&items).pop().expect("one receipt");
        let before = peek(&store, item).await;
        let past_range = [
            last.saturating_add_micros(1),
            Timestamp::from_micros(1 << 53),
            Timestamp::from_micros(u64::MAX),
        ];
        for past in past_range {
            clock.set(past);
            let what = format!("{:?} at {} µs", quota.algorithm(), past.as_micros());
            let named = |call: &str, error: &tollgate_core::StoreError| {
                assert!(error.is_time_out_of_range(), "{call}, {what}: {error}");
                assert!(
                    error.to_string().contains(&range),
                    "{call}, {what}: the error names the supported range: {error}"
                );
            };
            match store.check(&[item]).await {
                Ok(answer) => panic!("a check, {what}: answered {answer:?}"),
                Err(error) => named("a check", &error),
            }
            let batch = [item, Item::new(&id, quota, &other)];
            match store.check(&batch).await {
                Ok(answer) => panic!("a batch, {what}: answered {answer:?}"),
                Err(error) => named("a batch", &error),
            }
            if let Some(answer) = store.check_now(&[item]) {
                match answer {
                    Ok(answer) => panic!("a check now, {what}: answered {answer:?}"),
                    Err(error) => named("a check now", &error),
                }
            }
            match store.peek(&item).await {
                Ok(answer) => panic!("a peek, {what}: answered {answer:?}"),
                Err(error) => named("a peek", &error),
            }
            match store.refund(receipt).await {
                Ok(()) => panic!("a refund, {what}: done"),
                Err(refused) => {
                    let (error, handed_back) = refused.into_parts();
                    named("a refund", &error);
                    receipt = handed_back;
                }
            }
        }
        clock.set(in_range);
        let what = format!("{:?} back in range", quota.algorithm());
        assert_eq!(
            peek(&store, item).await,
            before,
            "{what}: the key as it was"
        );
        store
            .refund(receipt)
            .await
            .unwrap_or_else(|error| panic!("{what}: the receipt refunds: {error}"));
        assert_eq!(
            peek(&store, item).await,
            uncharged,
            "{what}: the refund gave the charge back"
        );
        assert!(
            decide(&store, item.with_cost(3)).await.is_allowed(),
            "{what}: checks charge again"
        );
    }
}

/// Pacing delays instead of refusing, until the wait would exceed the maximum delay.
pub(crate) async fn leaky_bucket_paces_instead_of_refusing<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let clock = ManualClock::new(START);
    let store = make(clock.clone());
    let (id, key) = (rule("sms-provider"), Key::new("provider-a"));
    let quota = Quota::leaky_bucket(Rate::per_second(10), ms(300)).expect("valid");
    let item = Item::new(&id, quota, &key);
    let mut delays = Vec::new();
    for _ in 0..4 {
        let decision = decide(&store, item).await;
        assert!(decision.is_allowed());
        delays.push(decision.delay());
    }
    assert_eq!(delays, [ms(0), ms(100), ms(200), ms(300)]);
    let refused = decide(&store, item).await;
    assert_eq!(refused.refusal(), Some(RefusalReason::LimitReached));
    assert_eq!(refused.retry_after(), ms(100));
    clock.advance(ms(250));
    assert_eq!(decide(&store, item).await.delay(), ms(150));
}

/// Several pacing items in one request are all charged at the latest of their earliest slots.
pub(crate) async fn several_pacing_items_start_at_the_latest_slot<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let store = make(ManualClock::new(START));
    let (slow_id, fast_id) = (rule("pace-slow"), rule("pace-fast"));
    let key = Key::new("provider-a");
    let slow = Item::new(
        &slow_id,
        Quota::leaky_bucket(Rate::per_second(2), secs(5)).expect("valid"),
        &key,
    );
    let fast = Item::new(
        &fast_id,
        Quota::leaky_bucket(Rate::per_second(10), secs(5)).expect("valid"),
        &key,
    );
    assert_eq!(
        decide(&store, slow).await.delay(),
        Duration::ZERO,
        "slow is now busy for 500 ms"
    );
    let both = store.check(&[fast, slow]).await.expect("store answers");
    let items = [fast, slow];
    assert!(both.is_allowed());
    assert_eq!(both.delay(&items), ms(500));
    assert_eq!(
        both.items()[0].decision().delay(),
        ms(500),
        "fast waits for slow's slot"
    );
    assert_eq!(both.items()[1].decision().delay(), ms(500));
    assert_eq!(
        peek(&store, fast).await.delay(),
        ms(600),
        "fast was charged at the shared slot"
    );
}

/// The same key under two rules is two callers.
pub(crate) async fn equal_keys_under_different_rules_do_not_share_state<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let store = make(ManualClock::new(START));
    let (a, b) = (rule("rule-a"), rule("rule-b"));
    let key = Key::new("user77");
    let quota = Quota::fixed_window(1, secs(60)).expect("valid");
    assert!(
        decide(&store, Item::new(&a, quota, &key))
            .await
            .is_allowed()
    );
    assert!(
        decide(&store, Item::new(&b, quota, &key))
            .await
            .is_allowed()
    );
    assert!(
        !decide(&store, Item::new(&a, quota, &key))
            .await
            .is_allowed()
    );
    let (parts_one, parts_two) = (
        Key::from_parts(&[b"ab", b"c"]),
        Key::from_parts(&[b"a", b"bc"]),
    );
    assert!(
        decide(&store, Item::new(&a, quota, &parts_one))
            .await
            .is_allowed()
    );
    assert!(
        decide(&store, Item::new(&a, quota, &parts_two))
            .await
            .is_allowed()
    );
}

/// The quota comes with each item: a partner with a bigger contract needs no new rule.
pub(crate) async fn quota_travels_with_the_item<S: Store>(make: &impl Fn(ManualClock) -> S) {
    let store = make(ManualClock::new(START));
    let id = rule("partner-api");
    let (small, large) = (Key::new("partner-small"), Key::new("partner-large"));
    let small_plan = Quota::token_bucket(2, Rate::per_second(2)).expect("valid");
    let large_plan = Quota::token_bucket(200, Rate::per_second(200)).expect("valid");
    assert_eq!(
        count_allowed(&store, Item::new(&id, small_plan, &small), 300).await,
        2
    );
    assert_eq!(
        count_allowed(&store, Item::new(&id, large_plan, &large), 300).await,
        200
    );
}
