//! Conformance cases for a caller whose situation changes between two checks.
//!
//! The rest of the suite checks one quota on a steady clock. Real callers see more than that,
//! and each of these cases is a way a store has lost track of one in the past:
//!
//! * **The quota on the item is edited** (a longer or shorter period, a higher or lower limit, a
//!   token bucket read as pacing). The caller keeps what it owed, capped at what the
//!   new quota could make it owe: it is never refused for ever, never waits longer than the new
//!   quota could make it wait, and is never granted more than it had.
//! * **Keys of one rule carry different quotas** (a partner on a bigger plan). Each key is judged
//!   by its own quota when the store decides what is idle, never by the last quota the rule saw.
//! * **A refund arrives twice** (a retry after a lost answer) **or late** (its window ended, its
//!   log entry expired, its share of a bucket's schedule passed, the emission interval changed).
//!   It gives back at most once, and only what the charge still holds.
//! * **The clock steps back an hour.** Nothing is granted that was not there, and nobody is
//!   frozen for the hour either.
//!
//! Every case runs on a [`ManualClock`], so none sleeps and each decides the same on every run.

use std::time::Duration;

use crate::conformance::START;
use crate::{ManualClock, replay};
use tollgate_core::{
    Algorithm, Decision, Item, Key, Quota, Rate, Receipt, RefusalReason, RuleId, Store,
};

const HOUR: Duration = Duration::from_secs(3_600);
const DAY: Duration = Duration::from_secs(86_400);

/// The limit of most quotas here: small enough to spend in one check, large enough to leave some.
const LIMIT: u64 = 10;

/// How many new callers on a short quota arrive while a long-quota caller is spent. The
/// in-memory store tidies a shard when it stores a new key there, and has at least 64 shards;
/// this many fresh keys reach the spent caller's shard on all but about one run in e^16.
const NEIGHBOURS: usize = 1_024;

fn rule(id: &str) -> RuleId {
    RuleId::new(id).expect("conformance rule ids are valid")
}

fn ms(millis: u64) -> Duration {
    Duration::from_millis(millis)
}

fn secs(seconds: u64) -> Duration {
    Duration::from_secs(seconds)
}

fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).expect("conformance durations fit in µs")
}

fn name(quota: &Quota) -> &'static str {
    quota.algorithm().name()
}

/// One quota of each algorithm, all with `limit`, each giving the whole limit back over
/// `period`: buckets refill it, pacing schedules `limit` slots across it, windows last it.
/// Always in the same order, so two calls zip into (old, new) pairs of one algorithm.
fn each_over(limit: u64, period: Duration) -> [Quota; 5] {
    let rate = Rate::per(limit, period);
    let slots = u32::try_from(limit).expect("small limits");
    let max_delay = period / slots * (slots - 1);
    [
        Quota::token_bucket(limit, rate),
        Quota::fixed_window(limit, period),
        Quota::sliding_window_counter(limit, period),
        Quota::sliding_window_log(limit, period),
        Quota::leaky_bucket(rate, max_delay),
    ]
    .map(|quota| quota.expect("conformance quotas are valid"))
}

/// One quota of each algorithm with `limit`, at a pace that does not depend on the limit
/// (buckets and pacing 10 a second, windows a minute): raising or lowering the limit is then the
/// only change. Same order as [`each_over`].
fn each_with_limit(limit: u64) -> [Quota; 5] {
    let rate = Rate::per_second(10);
    [
        Quota::token_bucket(limit, rate),
        Quota::fixed_window(limit, secs(60)),
        Quota::sliding_window_counter(limit, secs(60)),
        Quota::sliding_window_log(limit, secs(60)),
        Quota::leaky_bucket(rate, ms(100 * (limit - 1))),
    ]
    .map(|quota| quota.expect("conformance quotas are valid"))
}

/// The longest `quota` can make a spent caller wait for one unit: its replenish time, and for a
/// sliding counter one window more, over which the spent window fades out of the estimate.
fn longest_wait(quota: &Quota) -> Duration {
    let replenish = quota.replenish_time();
    match quota.algorithm() {
        Algorithm::SlidingWindowCounter => replenish * 2,
        _ => replenish,
    }
}

/// An upper bound on what `quota` lets through in `span` from any starting state: the limit
/// plus one unit per emission interval (buckets, pacing), or the limit in every window the span
/// touches (windows; the sliding counter never holds more than the limit in one window either).
fn most_in(quota: &Quota, span: Duration) -> u64 {
    let (span, step) = (micros(span), quota.interval_micros());
    if quota.window().is_some() {
        quota.limit() * (span.div_ceil(step) + 1)
    } else {
        quota.limit() + span / step
    }
}

async fn decide<S: Store>(store: &S, item: Item<'_>) -> Decision {
    let batch = store
        .check(&[item])
        .await
        .unwrap_or_else(|err| panic!("store failed a check: {err}"));
    *batch.items()[0].decision()
}

async fn peek<S: Store>(store: &S, item: Item<'_>) -> Decision {
    store
        .peek(&item)
        .await
        .unwrap_or_else(|err| panic!("store failed a peek: {err}"))
}

/// What the caller could spend right now: a peek at cost 0 charges nothing and never refuses.
async fn remaining<S: Store>(store: &S, item: Item<'_>) -> u64 {
    peek(store, item.with_cost(0)).await.remaining()
}

async fn count_allowed<S: Store>(store: &S, item: Item<'_>, attempts: u32) -> u64 {
    let mut allowed = 0;
    for _ in 0..attempts {
        allowed += u64::from(decide(store, item).await.is_allowed());
    }
    allowed
}

/// Charges `item`, which must be allowed, and keeps the receipt.
async fn charge<S: Store>(store: &S, item: Item<'_>) -> Receipt {
    let items = [item];
    let batch = store
        .check(&items)
        .await
        .unwrap_or_else(|err| panic!("store failed a check: {err}"));
    assert!(
        batch.is_allowed(),
        "{}: a charge of {} is allowed",
        name(item.quota()),
        item.cost()
    );
    batch
        .into_receipts(&items)
        .pop()
        .expect("an allowed charge leaves a receipt")
}

async fn refund<S: Store>(store: &S, receipt: Receipt) {
    store
        .refund(receipt)
        .await
        .unwrap_or_else(|err| panic!("store failed a refund: {err}"));
}

/// Spends the whole limit of `item`'s quota in one charge.
async fn exhaust<S: Store>(store: &S, item: Item<'_>) {
    let limit = item.quota().limit();
    let spent = decide(store, item.with_cost(limit)).await;
    assert!(
        spent.is_allowed(),
        "{}: a fresh caller spends its whole limit",
        name(item.quota())
    );
    assert_eq!(spent.remaining(), 0, "{}: spent", name(item.quota()));
}

/// A caller spent on a 1 s quota that is lengthened to an hour, or to a day, keeps its usage (it
/// is still refused at once, and told to wait no longer than the new quota could make it wait)
/// and has its whole new limit back once the new quota's longest wait has passed. Pacing may take
/// it at once, but only after the slots it already holds.
pub(crate) async fn a_much_longer_period_keeps_the_usage_and_still_ends<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let clock = ManualClock::new(START);
    let store = make(clock.clone());
    let id = rule("lengthened");
    for longer in [HOUR, DAY] {
        let pairs = each_over(LIMIT, secs(1))
            .into_iter()
            .zip(each_over(LIMIT, longer));
        for (short, long) in pairs {
            let algorithm = name(&short);
            let key = Key::new(format!("{algorithm}-{}s", longer.as_secs()));
            let (before, after) = (Item::new(&id, short, &key), Item::new(&id, long, &key));
            exhaust(&store, before).await;
            let first = decide(&store, after).await;
            if short.algorithm() == Algorithm::LeakyBucket && first.is_allowed() {
                assert!(
                    first.delay() >= short.replenish_time(),
                    "leaky_bucket: lengthened to {longer:?}, a request is scheduled after the \
                     {:?} already booked, not at {:?}",
                    short.replenish_time(),
                    first.delay()
                );
            } else {
                assert_eq!(
                    first.refusal(),
                    Some(RefusalReason::LimitReached),
                    "{algorithm}: a caller spent on a 1 s quota is still spent right after it is \
                     lengthened to {longer:?}"
                );
                assert!(
                    first.retry_after() <= longest_wait(&long),
                    "{algorithm}: lengthened to {longer:?}, told to wait {:?}, longer than the \
                     new quota can make anyone wait ({:?})",
                    first.retry_after(),
                    longest_wait(&long)
                );
            }
            clock.advance(longest_wait(&long));
            assert!(
                decide(&store, after.with_cost(long.limit()))
                    .await
                    .is_allowed(),
                "{algorithm}: lengthened to {longer:?}, the whole limit is back {:?} later",
                longest_wait(&long)
            );
        }
    }
}

/// The report that started this group: a fixed window of 5 a second, spent, then changed to 5 an
/// hour, refused the caller for good (its window number was read in the wrong unit). The caller
/// waits at most the hour, and 403 days later is plainly allowed.
pub(crate) async fn fixed_window_lengthened_from_a_second_to_an_hour_lets_the_caller_back<
    S: Store,
>(
    make: &impl Fn(ManualClock) -> S,
) {
    let clock = ManualClock::new(START);
    let store = make(clock.clone());
    let (id, key) = (rule("fixed-lengthened"), Key::new("user77"));
    let per_second = Quota::fixed_window(5, secs(1)).expect("valid");
    let per_hour = Quota::fixed_window(5, HOUR).expect("valid");
    exhaust(&store, Item::new(&id, per_second, &key)).await;
    let hourly = Item::new(&id, per_hour, &key);
    let right_after = decide(&store, hourly).await;
    assert_eq!(
        right_after.refusal(),
        Some(RefusalReason::LimitReached),
        "fixed_window: the 5 spent this second count in the new hour"
    );
    assert!(
        right_after.retry_after() <= HOUR,
        "fixed_window: 1 s -> 1 h, told to wait {:?}, more than the hour",
        right_after.retry_after()
    );
    clock.advance(HOUR);
    assert!(
        peek(&store, hourly.with_cost(5)).await.is_allowed(),
        "fixed_window: 1 s -> 1 h, the whole limit is back an hour later"
    );
    clock.set(START.saturating_add_micros(micros(DAY * 403)));
    let much_later = decide(&store, hourly).await;
    assert!(
        much_later.is_allowed(),
        "fixed_window: 1 s -> 1 h, still refused 403 days later (retry after {:?})",
        much_later.retry_after()
    );
    assert_eq!(much_later.remaining(), 4, "fixed_window: a fresh hour");
}

/// A token bucket of 1,000 a day, spent, then changed to 10 a second: the caller owes the new
/// bucket at most its capacity, so it is refused for 100 ms (one token), not for a day.
pub(crate) async fn token_bucket_of_1000_a_day_spent_then_10_a_second_waits_at_most_100_ms<
    S: Store,
>(
    make: &impl Fn(ManualClock) -> S,
) {
    let clock = ManualClock::new(START);
    let store = make(clock.clone());
    let (id, key) = (rule("bucket-quickened"), Key::new("user77"));
    let daily = Quota::token_bucket(1_000, Rate::per_day(1_000)).expect("valid");
    let fast = Quota::token_bucket(10, Rate::per_second(10)).expect("valid");
    exhaust(&store, Item::new(&id, daily, &key)).await;
    let item = Item::new(&id, fast, &key);
    let next = decide(&store, item).await;
    assert_eq!(
        next.refusal(),
        Some(RefusalReason::LimitReached),
        "token_bucket: the day's 1,000 spent leave the new bucket empty"
    );
    assert!(
        next.retry_after() <= ms(100),
        "token_bucket: 1000/day -> 10/s, told to wait {:?} (not ~86,400 s: at most one 100 ms token)",
        next.retry_after()
    );
    clock.advance(ms(100));
    assert!(
        decide(&store, item).await.is_allowed(),
        "token_bucket: 1000/day -> 10/s, allowed again 100 ms later"
    );
}

/// A caller spent on an hour-long (or day-long) quota that is shortened to 1 s owes the new
/// quota at most its whole limit: it is refused at once (it was spent), told to wait no longer
/// than the new quota could make it wait, and allowed once that wait is over. The first look
/// under the new quota is a real, refused check, as a caller would send.
pub(crate) async fn a_much_shorter_period_waits_no_longer_than_the_new_quota<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let clock = ManualClock::new(START);
    let store = make(clock.clone());
    let id = rule("shortened");
    for longer in [HOUR, DAY] {
        let pairs = each_over(LIMIT, longer)
            .into_iter()
            .zip(each_over(LIMIT, secs(1)));
        for (long, short) in pairs {
            let algorithm = name(&long);
            let key = Key::new(format!("{algorithm}-{}s", longer.as_secs()));
            let (before, after) = (Item::new(&id, long, &key), Item::new(&id, short, &key));
            exhaust(&store, before).await;
            let first = decide(&store, after).await;
            assert_eq!(
                first.refusal(),
                Some(RefusalReason::LimitReached),
                "{algorithm}: a caller spent on a {longer:?} quota is still spent right after it \
                 is shortened to 1 s"
            );
            assert!(
                first.retry_after() <= longest_wait(&short),
                "{algorithm}: {longer:?} -> 1 s, told to wait {:?}, longer than the new quota \
                 can make anyone wait ({:?})",
                first.retry_after(),
                longest_wait(&short)
            );
            clock.advance(longest_wait(&short));
            let later = decide(&store, after).await;
            assert!(
                later.is_allowed(),
                "{algorithm}: {longer:?} -> 1 s, still refused {:?} after the change (retry \
                 after {:?})",
                longest_wait(&short),
                later.retry_after()
            );
        }
    }
}

/// A token bucket of 100 refilled 100 a second, all spent, then refilled 1 a second at the same
/// capacity: the caller owes the new bucket all 100 tokens, so the next check is refused (the old
/// arithmetic granted 98 at once) and from then on exactly one token comes back each second.
pub(crate) async fn token_bucket_refilled_more_slowly_at_the_same_capacity_grants_nothing_at_once<
    S: Store,
>(
    make: &impl Fn(ManualClock) -> S,
) {
    let clock = ManualClock::new(START);
    let store = make(clock.clone());
    let (id, key) = (rule("bucket-slowed"), Key::new("user77"));
    let fast = Quota::token_bucket(100, Rate::per_second(100)).expect("valid");
    let slow = Quota::token_bucket(100, Rate::per_second(1)).expect("valid");
    exhaust(&store, Item::new(&id, fast, &key)).await;
    let item = Item::new(&id, slow, &key);
    let next = decide(&store, item).await;
    assert_eq!(
        next.refusal(),
        Some(RefusalReason::LimitReached),
        "token_bucket: 100 spent at 100/s, refilled at 1/s: nothing at once"
    );
    assert!(
        next.retry_after() <= secs(1),
        "token_bucket: one token at 1/s takes at most 1 s, told {:?}",
        next.retry_after()
    );
    for second in 1..=30 {
        clock.advance(secs(1));
        assert_eq!(
            count_allowed(&store, item, 5).await,
            1,
            "token_bucket: at 1/s, one request a second, second {second}"
        );
    }
}

/// A token bucket and a GCRA with the same numbers are the same limiter (one quota, whichever
/// constructor built it): switching the item from one to the other, mid-refill, carries the
/// state over to the microsecond.
pub(crate) async fn token_bucket_and_gcra_with_the_same_numbers_share_one_state<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let clock = ManualClock::new(START);
    let store = make(clock.clone());
    let (id, key) = (rule("bucket-or-gcra"), Key::new("user77"));
    let bucket = Item::new(
        &id,
        Quota::token_bucket(LIMIT, Rate::per_second(10)).expect("valid"),
        &key,
    );
    let gcra = Item::new(
        &id,
        Quota::gcra(Rate::per_second(10), LIMIT).expect("valid"),
        &key,
    );
    assert!(decide(&store, bucket.with_cost(4)).await.is_allowed());
    // Half a token has come back: a state rounded to whole tokens would show here.
    clock.advance(ms(50));
    for cost in 0..=LIMIT {
        assert_eq!(
            peek(&store, gcra.with_cost(cost)).await,
            peek(&store, bucket.with_cost(cost)).await,
            "gcra reads the token bucket's state as the token bucket does, cost {cost}"
        );
    }
    let now = peek(&store, gcra.with_cost(0)).await;
    assert_eq!(
        (now.remaining(), now.reset_after()),
        (6, ms(350)),
        "gcra: 4 spent 50 ms ago at 10/s"
    );
    assert_eq!(
        peek(&store, gcra.with_cost(7)).await.retry_after(),
        ms(50),
        "gcra: the seventh token is 50 ms away"
    );
    let charged = decide(&store, gcra.with_cost(3)).await;
    assert!(charged.is_allowed(), "gcra: 3 of the 6 left");
    assert_eq!((charged.remaining(), charged.reset_after()), (3, ms(650)));
    let back = peek(&store, bucket.with_cost(0)).await;
    assert_eq!(
        (back.remaining(), back.reset_after()),
        (3, ms(650)),
        "token_bucket reads what gcra charged"
    );
}

/// A token bucket switched to pacing at the same rate, and pacing switched back to a token
/// bucket: neither grants anything the caller had not earned, and neither makes it wait longer
/// than the new quota could.
pub(crate) async fn token_bucket_to_pacing_and_back_grants_nothing_extra<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let clock = ManualClock::new(START);
    let store = make(clock.clone());
    let id = rule("bucket-or-pacing");
    let bucket = Quota::token_bucket(LIMIT, Rate::per_second(10)).expect("valid");
    let pacing = Quota::leaky_bucket(Rate::per_second(10), ms(900)).expect("valid");
    let interval = ms(100);

    // Bucket, spent, then pacing. The bucket would let the k-th request through k × 100 ms from
    // now: pacing may schedule the caller, but never earlier than that.
    let key = Key::new("bucket-then-pacing");
    exhaust(&store, Item::new(&id, bucket, &key)).await;
    let paced = Item::new(&id, pacing, &key);
    let mut starts = Vec::new();
    let mut first_retry = None;
    for _ in 0..20 {
        let decision = decide(&store, paced).await;
        if decision.is_allowed() {
            starts.push(decision.delay());
        } else {
            assert!(
                decision.retry_after() <= pacing.replenish_time(),
                "leaky_bucket after token_bucket: told to wait {:?}, longer than pacing can \
                 make anyone wait ({:?})",
                decision.retry_after(),
                pacing.replenish_time()
            );
            first_retry.get_or_insert(decision.retry_after());
        }
    }
    for (k, start) in (1u32..).zip(&starts) {
        assert!(
            *start >= interval * k,
            "leaky_bucket after a spent token_bucket: request {k} starts after {start:?}, before \
             the bucket would have let it through"
        );
    }
    clock.advance(first_retry.expect("twenty requests at once are not all scheduled"));
    assert!(
        decide(&store, paced).await.is_allowed(),
        "leaky_bucket after token_bucket: allowed when retry-after said"
    );

    // Pacing, fully booked, then the bucket: ten booked slots are ten tokens spent.
    let key = Key::new("pacing-then-bucket");
    let paced = Item::new(&id, pacing, &key);
    assert_eq!(
        count_allowed(&store, paced, 10).await,
        10,
        "ten slots booked"
    );
    let bucketed = Item::new(&id, bucket, &key);
    let first = decide(&store, bucketed).await;
    assert_eq!(
        first.refusal(),
        Some(RefusalReason::LimitReached),
        "token_bucket after ten booked pacing slots: nothing left"
    );
    assert!(
        first.retry_after() <= interval,
        "token_bucket after leaky_bucket: one token is at most 100 ms away, told {:?}",
        first.retry_after()
    );
    clock.advance(first.retry_after());
    assert!(
        decide(&store, bucketed).await.is_allowed(),
        "token_bucket after leaky_bucket: allowed when retry-after said"
    );
    assert!(
        !decide(&store, bucketed).await.is_allowed(),
        "token_bucket after leaky_bucket: only the one token came back"
    );
}

/// A limit raised from 10 to 20 at the same pace gives the caller the extra room at once: with 4
/// used, 16 remain, and exactly 16 more pass.
pub(crate) async fn a_raised_limit_gives_the_extra_room_at_once<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let store = make(ManualClock::new(START));
    let id = rule("raised");
    let pairs = each_with_limit(LIMIT)
        .into_iter()
        .zip(each_with_limit(2 * LIMIT));
    for (small, large) in pairs {
        let algorithm = name(&small);
        let key = Key::new(algorithm);
        assert!(
            decide(&store, Item::new(&id, small, &key).with_cost(4))
                .await
                .is_allowed()
        );
        let raised = Item::new(&id, large, &key);
        assert_eq!(
            remaining(&store, raised).await,
            16,
            "{algorithm}: 4 used, limit raised to 20, 16 remain"
        );
        assert!(
            decide(&store, raised.with_cost(16)).await.is_allowed(),
            "{algorithm}: the 16 can be spent at once"
        );
        assert!(
            !decide(&store, raised).await.is_allowed(),
            "{algorithm}: and no more"
        );
    }
}

/// A limit lowered from 10 to 3 at the same pace, with 6 used: the caller is over the new limit
/// and refused, but waits no longer than the new quota could make it wait (a bucket: one
/// emission interval for one unit), and is allowed when its retry-after says.
pub(crate) async fn a_lowered_limit_refuses_no_longer_than_the_new_quota_would<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let clock = ManualClock::new(START);
    let store = make(clock.clone());
    let id = rule("lowered");
    let pairs = each_with_limit(LIMIT).into_iter().zip(each_with_limit(3));
    for (large, small) in pairs {
        let algorithm = name(&large);
        let key = Key::new(algorithm);
        assert!(
            decide(&store, Item::new(&id, large, &key).with_cost(6))
                .await
                .is_allowed()
        );
        let lowered = Item::new(&id, small, &key);
        let refused = decide(&store, lowered).await;
        assert_eq!(
            refused.refusal(),
            Some(RefusalReason::LimitReached),
            "{algorithm}: 6 used, limit lowered to 3: refused"
        );
        let bound = match small.algorithm() {
            Algorithm::TokenBucket => small.emission_interval().expect("a bucket"),
            _ => longest_wait(&small),
        };
        assert!(
            refused.retry_after() <= bound,
            "{algorithm}: 10 -> 3, told to wait {:?}, longer than the new quota could ({bound:?})",
            refused.retry_after()
        );
        clock.advance(refused.retry_after());
        assert!(
            decide(&store, lowered).await.is_allowed(),
            "{algorithm}: 10 -> 3, allowed when retry-after said ({:?})",
            refused.retry_after()
        );
    }
}

/// However a quota changes (a 1 s quota made 10 s, or the reverse), a minute of steady attempts
/// afterwards gets no more than what the old quota had left plus what the new quota lets through
/// in a minute.
pub(crate) async fn after_a_quota_change_the_long_run_total_stays_within_bounds<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let clock = ManualClock::new(START);
    let store = make(clock.clone());
    let id = rule("changed-long-run");
    let (run, step, spent) = (secs(60), ms(100), 4);
    let steps = micros(run) / micros(step);
    let fast = each_over(LIMIT, secs(1));
    let slow = each_over(LIMIT, secs(10));
    let changes = fast
        .into_iter()
        .zip(slow)
        .flat_map(|(fast, slow)| [(fast, slow), (slow, fast)]);
    for (old, new) in changes {
        let algorithm = name(&old);
        let key = Key::new(format!("{algorithm}-from-{}us", old.interval_micros()));
        assert!(
            decide(&store, Item::new(&id, old, &key).with_cost(spent))
                .await
                .is_allowed()
        );
        let left = old.limit() - spent;
        let item = Item::new(&id, new, &key);
        let mut allowed = 0;
        for _ in 0..steps {
            allowed += count_allowed(&store, item, 2).await;
            clock.advance(step);
        }
        let bound = left + most_in(&new, run);
        assert!(
            allowed <= bound,
            "{algorithm}: {allowed} passed in {run:?} after {old:?} -> {new:?}, more than the \
             {left} left plus the new quota's {}",
            most_in(&new, run)
        );
    }
}

/// Two keys of one rule on different quotas: A on a quota of a day (or an hour), spent; B on a
/// quota of a second, busy, with new callers on B's quota arriving. A minute later A is still
/// refused: whether A's state is idle is decided by A's quota, never by B's.
pub(crate) async fn keys_of_one_rule_are_each_judged_by_their_own_quota<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let clock = ManualClock::new(START);
    let store = make(clock.clone());
    let pairs = [
        (
            Quota::fixed_window(3, DAY),
            Quota::fixed_window(100, secs(1)),
        ),
        (
            Quota::token_bucket(1, Rate::per_hour(1)),
            Quota::token_bucket(100, Rate::per_second(100)),
        ),
        (
            Quota::sliding_window_counter(3, DAY),
            Quota::sliding_window_counter(100, secs(1)),
        ),
        (
            Quota::sliding_window_log(3, DAY),
            Quota::sliding_window_log(100, secs(1)),
        ),
    ];
    for (long, short) in pairs {
        let (long, short) = (long.expect("valid"), short.expect("valid"));
        let algorithm = name(&long);
        let id = rule(&format!("mixed-{algorithm}"));
        let (a, b) = (Key::new("A"), Key::new("B"));
        let spent = Item::new(&id, long, &a);
        let busy = Item::new(&id, short, &b);
        exhaust(&store, spent).await;
        assert!(
            !decide(&store, spent).await.is_allowed(),
            "{algorithm}: A is spent"
        );
        assert!(decide(&store, busy).await.is_allowed());
        clock.advance(secs(61));
        assert_eq!(
            count_allowed(&store, busy, 5).await,
            5,
            "{algorithm}: B goes on"
        );
        // New callers are when a store stores new keys, and so when it tidies up what it
        // thinks is idle.
        for n in 0..NEIGHBOURS {
            let neighbour = Key::new(format!("neighbour-{n}"));
            assert!(
                decide(&store, Item::new(&id, short, &neighbour))
                    .await
                    .is_allowed()
            );
        }
        let still = decide(&store, spent).await;
        assert_eq!(
            still.refusal(),
            Some(RefusalReason::LimitReached),
            "{algorithm}: A, spent on {long:?}, is allowed again 61 s later because B's quota \
             is {short:?}"
        );
        clock.advance(longest_wait(&long));
        assert!(
            decide(&store, spent).await.is_allowed(),
            "{algorithm}: A is allowed once its own quota has refilled"
        );
    }
}

/// A refund retried after a lost answer gives back once. For every algorithm: charge 2, charge
/// 3 and refund that receipt, then refund the same receipt replayed — the state is exactly as
/// after the first refund. Also the other way round, the replay arriving first.
pub(crate) async fn a_refund_sent_twice_gives_back_once<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let store = make(ManualClock::new(START));
    let id = rule("refunded-twice");
    for quota in each_with_limit(LIMIT) {
        let algorithm = name(&quota);
        for replay_first in [false, true] {
            let key = Key::new(format!("{algorithm}-{replay_first}"));
            let item = Item::new(&id, quota, &key);
            assert!(decide(&store, item.with_cost(2)).await.is_allowed());
            let receipt = charge(&store, item.with_cost(3)).await;
            let retry = replay(&receipt);
            let (first, second) = if replay_first {
                (retry, receipt)
            } else {
                (receipt, retry)
            };
            refund(&store, first).await;
            let once = peek(&store, item.with_cost(0)).await;
            assert_eq!(
                once.remaining(),
                LIMIT - 2,
                "{algorithm}: one refund gives the 3 back (replay first: {replay_first})"
            );
            refund(&store, second).await;
            assert_eq!(
                peek(&store, item.with_cost(0)).await,
                once,
                "{algorithm}: the same refund again gives nothing more (replay first: \
                 {replay_first})"
            );
        }
    }
}

/// A bucket refund comes only out of the part of the schedule the charge still holds. Capacity
/// 1, one token an hour: charge (keep the receipt), two hours later charge again, then refund the
/// first receipt — its hour is long over, so the caller stays spent for the full hour.
pub(crate) async fn a_bucket_refund_after_its_share_of_the_schedule_passed_gives_nothing<
    S: Store,
>(
    make: &impl Fn(ManualClock) -> S,
) {
    let clock = ManualClock::new(START);
    let store = make(clock.clone());
    let id = rule("late-bucket-refund");
    let quotas = [
        Quota::token_bucket(1, Rate::per_hour(1)),
        Quota::leaky_bucket(Rate::per_hour(1), Duration::ZERO),
    ];
    for quota in quotas {
        let quota = quota.expect("valid");
        let algorithm = name(&quota);
        let key = Key::new(algorithm);
        let item = Item::new(&id, quota, &key);
        let old = charge(&store, item).await;
        clock.advance(HOUR * 2);
        assert!(
            decide(&store, item).await.is_allowed(),
            "{algorithm}: refilled"
        );
        refund(&store, old).await;
        let after = peek(&store, item).await;
        assert!(
            !after.is_allowed(),
            "{algorithm}: a refund of a charge whose hour ended two hours ago freed the new one"
        );
        assert_eq!(
            after.retry_after(),
            HOUR,
            "{algorithm}: the new charge's hour is untouched"
        );
    }
}

/// A window refund gives back only into the window it was charged to: a receipt from a window
/// that has ended (for the sliding counter: slid out entirely) gives nothing to the new one.
pub(crate) async fn a_window_refund_after_its_window_ended_gives_nothing_to_the_new_one<
    S: Store,
>(
    make: &impl Fn(ManualClock) -> S,
) {
    let minute = secs(60);
    let cases = [
        // The next window.
        (Quota::fixed_window(LIMIT, minute), secs(70)),
        // Two windows on: the charged window no longer weighs in the estimate at all.
        (Quota::sliding_window_counter(LIMIT, minute), secs(130)),
    ];
    for (quota, later) in cases {
        let quota = quota.expect("valid");
        let algorithm = name(&quota);
        let clock = ManualClock::new(START.saturating_add_micros(micros(secs(50))));
        let store = make(clock.clone());
        let (id, key) = (rule("late-window-refund"), Key::new(algorithm));
        let item = Item::new(&id, quota, &key);
        let old = charge(&store, item.with_cost(3)).await;
        clock.set(START.saturating_add_micros(micros(later)));
        assert!(decide(&store, item.with_cost(4)).await.is_allowed());
        refund(&store, old).await;
        assert_eq!(
            remaining(&store, item).await,
            LIMIT - 4,
            "{algorithm}: a refund from a window that ended took from the new window's count"
        );
    }
}

/// A log refund gives nothing once its entry has left the window: 3 per 10 s, one charge kept,
/// 11 s later the caller spends all 3, and refunding the old entry frees nothing.
pub(crate) async fn a_log_refund_after_its_entry_left_the_window_gives_nothing<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let clock = ManualClock::new(START);
    let store = make(clock.clone());
    let (id, key) = (rule("late-log-refund"), Key::new("user77"));
    let quota = Quota::sliding_window_log(3, secs(10)).expect("valid");
    let item = Item::new(&id, quota, &key);
    let old = charge(&store, item).await;
    clock.advance(secs(11));
    assert!(decide(&store, item.with_cost(3)).await.is_allowed());
    refund(&store, old).await;
    assert_eq!(
        remaining(&store, item).await,
        0,
        "sliding_window_log: a refund of an expired entry freed room in the current window"
    );
    assert!(!decide(&store, item).await.is_allowed());
}

/// A bucket refund gives nothing once the rule's emission interval has changed: the charge was
/// measured in the old interval, and the state no longer is.
pub(crate) async fn a_bucket_refund_after_the_emission_interval_changed_gives_nothing<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let store = make(ManualClock::new(START));
    let id = rule("refund-across-a-change");
    let pairs = [
        (
            Quota::token_bucket(LIMIT, Rate::per_second(10)),
            Quota::token_bucket(LIMIT, Rate::per_second(1)),
        ),
        (
            Quota::leaky_bucket(Rate::per_second(10), ms(900)),
            Quota::leaky_bucket(Rate::per_second(1), secs(9)),
        ),
    ];
    for (old, new) in pairs {
        let (old, new) = (old.expect("valid"), new.expect("valid"));
        let algorithm = name(&old);
        let key = Key::new(algorithm);
        let receipt = charge(&store, Item::new(&id, old, &key).with_cost(3)).await;
        let item = Item::new(&id, new, &key);
        assert!(decide(&store, item).await.is_allowed());
        let before = peek(&store, item.with_cost(0)).await;
        refund(&store, receipt).await;
        assert_eq!(
            peek(&store, item.with_cost(0)).await,
            before,
            "{algorithm}: a refund charged at 100 ms a unit changed a state now at 1 s a unit"
        );
    }
}

/// The clock steps back an hour after a caller spent part of its limit: for every algorithm,
/// nothing is granted that was not there, and a window keeps the count it had.
pub(crate) async fn a_clock_stepping_back_an_hour_grants_nothing<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    for quota in each_with_limit(LIMIT) {
        let algorithm = name(&quota);
        let clock = ManualClock::new(START.saturating_add_micros(micros(secs(30))));
        let store = make(clock.clone());
        let (id, key) = (rule("rewound"), Key::new(algorithm));
        let item = Item::new(&id, quota, &key);
        assert!(decide(&store, item.with_cost(4)).await.is_allowed());
        let before = remaining(&store, item).await;
        clock.rewind(HOUR);
        let after = remaining(&store, item).await;
        assert!(
            after <= before,
            "{algorithm}: {after} remain after the clock stepped back an hour, {before} before"
        );
        if quota.window().is_some() {
            assert_eq!(
                after, before,
                "{algorithm}: the window goes on with the count it had"
            );
        }
    }
}

/// The clock steps back an hour after a caller spent one unit of a bucket of 10, one a second.
/// The bucket may be stricter for a moment, but the caller is not refused for the hour: within
/// 10 s (capacity × emission interval) of clock time from the rewound point it gets through.
pub(crate) async fn a_clock_stepping_back_an_hour_does_not_freeze_a_bucket<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let quotas = [
        Quota::token_bucket(LIMIT, Rate::per_second(1)),
        Quota::leaky_bucket(Rate::per_second(1), secs(9)),
    ];
    for quota in quotas {
        let quota = quota.expect("valid");
        let algorithm = name(&quota);
        let clock = ManualClock::new(START.saturating_add_micros(micros(secs(30))));
        let store = make(clock.clone());
        let (id, key) = (rule("rewound-bucket"), Key::new(algorithm));
        let item = Item::new(&id, quota, &key);
        assert!(decide(&store, item).await.is_allowed());
        clock.rewind(HOUR);
        let mut waited = Duration::ZERO;
        loop {
            let decision = decide(&store, item).await;
            if decision.is_allowed() {
                break;
            }
            assert!(
                waited < quota.replenish_time(),
                "{algorithm}: still refused {waited:?} after the clock stepped back an hour \
                 (retry after {:?})",
                decision.retry_after()
            );
            clock.advance(secs(1));
            waited += secs(1);
        }
    }
}

/// The clock steps back an hour after a caller spent a window's whole limit. Windows and logs
/// read the rewound "now" as the window's start or newest entry — moving the window back would
/// let a caller spend a second limit within one window of the store's time — so the count stands
/// until the clock catches up; but the wait a refusal announces is measured from the real clock,
/// so a caller who waits as told is let through, never refused again and again.
pub(crate) async fn a_clock_stepping_back_an_hour_keeps_a_window_and_its_announced_wait<
    S: Store,
>(
    make: &impl Fn(ManualClock) -> S,
) {
    let minute = secs(60);
    let quotas = [
        Quota::fixed_window(LIMIT, minute),
        Quota::sliding_window_counter(LIMIT, minute),
        Quota::sliding_window_log(LIMIT, minute),
    ];
    for quota in quotas {
        let quota = quota.expect("valid");
        let algorithm = name(&quota);
        let clock = ManualClock::new(START.saturating_add_micros(micros(secs(30))));
        let store = make(clock.clone());
        let (id, key) = (rule("rewound-window"), Key::new(algorithm));
        let item = Item::new(&id, quota, &key);
        exhaust(&store, item).await;
        clock.rewind(HOUR);
        let refused = decide(&store, item).await;
        assert!(
            !refused.is_allowed(),
            "{algorithm}: nothing granted by the step back"
        );
        assert_eq!(remaining(&store, item).await, 0, "{algorithm}: still spent");
        let told = refused.retry_after();
        assert!(
            told >= HOUR,
            "{algorithm}: the wait counts the hour the clock stepped back ({told:?})"
        );
        assert!(
            told <= HOUR + longest_wait(&quota),
            "{algorithm}: and no more than the quota's own longest wait beyond it ({told:?})"
        );
        clock.advance(told);
        assert!(
            decide(&store, item).await.is_allowed(),
            "{algorithm}: allowed when the announced wait is over"
        );
    }
}

/// Receipts are refunded in the order responses finish, not the order charges were made: each
/// gives back its own charge whatever the order (pacing aside: it gives back only its latest
/// booking).
pub(crate) async fn receipts_refunded_in_any_order_each_give_back_their_charge<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let clock = ManualClock::new(START);
    let store = make(clock.clone());
    for quota in each_with_limit(LIMIT) {
        if quota.algorithm() == Algorithm::LeakyBucket {
            continue;
        }
        let algorithm = name(&quota);
        let (id, key) = (rule("out-of-order"), Key::new(algorithm));
        let item = Item::new(&id, quota, &key);
        let mut receipts = Vec::new();
        for cost in [1, 2, 3] {
            receipts.push(charge(&store, item.with_cost(cost)).await);
            clock.advance(ms(1));
        }
        assert_eq!(remaining(&store, item).await, LIMIT - 6, "{algorithm}");
        let (third, second) = (receipts.pop().expect("3"), receipts.pop().expect("2"));
        let first = receipts.pop().expect("1");
        refund(&store, first).await;
        refund(&store, third).await;
        refund(&store, second).await;
        assert_eq!(
            remaining(&store, item).await,
            LIMIT,
            "{algorithm}: every charge given back, oldest first"
        );
    }
}

/// A capacity cut forgives what the caller owed beyond the new capacity; a receipt in flight
/// across it gives back at most its own cost (never more than the caller owes).
pub(crate) async fn a_refund_after_a_capacity_cut_gives_back_at_most_its_cost<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let clock = ManualClock::new(START);
    let store = make(clock.clone());
    let (id, key) = (rule("cut-then-refund"), Key::new("user77"));
    let big = Quota::token_bucket(20, Rate::per_second(1)).expect("valid");
    let small = Quota::token_bucket(10, Rate::per_second(1)).expect("valid");
    assert!(
        decide(&store, Item::new(&id, big, &key).with_cost(17))
            .await
            .is_allowed()
    );
    let receipt = charge(&store, Item::new(&id, big, &key).with_cost(3)).await;
    assert!(
        !decide(&store, Item::new(&id, small, &key))
            .await
            .is_allowed()
    );
    refund(&store, receipt).await;
    assert_eq!(
        remaining(&store, Item::new(&id, small, &key)).await,
        3,
        "the refund gives back its own 3, no more"
    );
}

/// A clock that steps back clamps a bucket to exhausted; a receipt refunded then gives back at
/// most its own cost.
pub(crate) async fn a_refund_after_a_clock_step_back_gives_back_at_most_its_cost<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let clock = ManualClock::new(START.saturating_add_micros(micros(DAY)));
    let store = make(clock.clone());
    let (id, key) = (rule("rewind-then-refund"), Key::new("user77"));
    let item = Item::new(
        &id,
        Quota::token_bucket(10, Rate::per_second(1)).expect("valid"),
        &key,
    );
    assert!(decide(&store, item.with_cost(8)).await.is_allowed());
    let receipt = charge(&store, item.with_cost(2)).await;
    clock.rewind(HOUR);
    assert!(
        !decide(&store, item).await.is_allowed(),
        "clamped to exhausted"
    );
    refund(&store, receipt).await;
    assert_eq!(remaining(&store, item).await, 2, "its own 2, no more");
}

/// Pacing gives back only its latest booking: an earlier booking's slot is promised to the
/// bookings after it, and giving it back would tell two callers to start at the same instant.
pub(crate) async fn pacing_gives_back_only_its_latest_booking<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let store = make(ManualClock::new(START));
    let (id, key) = (rule("sms-provider"), Key::new("provider-a"));
    let pacing = Quota::leaky_bucket(Rate::per_second(10), secs(1)).expect("valid");
    let item = Item::new(&id, pacing, &key);
    let first = charge(&store, item).await;
    assert_eq!(
        decide(&store, item).await.delay(),
        ms(100),
        "the second booking"
    );
    refund(&store, first).await;
    assert_eq!(
        decide(&store, item).await.delay(),
        ms(200),
        "the third booking still comes after the second"
    );
    let latest = charge(&store, item).await;
    refund(&store, latest).await;
    assert_eq!(
        decide(&store, item).await.delay(),
        ms(300),
        "the latest booking's slot is given back"
    );
}

/// A sliding window counter whose limit is lowered (same window) waits no longer than the new
/// quota could ever make a caller wait.
pub(crate) async fn a_lowered_sliding_limit_waits_no_longer_than_the_new_quota_alone<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let clock = ManualClock::new(START);
    let store = make(clock.clone());
    let minute = secs(60);
    let old = Quota::sliding_window_counter(100, minute).expect("valid");
    let new = Quota::sliding_window_counter(10, minute).expect("valid");
    let (id, key) = (rule("lowered"), Key::new("user77"));
    let (alone_id, alone_key) = (rule("lowered-alone"), Key::new("user78"));
    assert!(
        decide(&store, Item::new(&id, old, &key).with_cost(100))
            .await
            .is_allowed()
    );
    assert!(
        decide(&store, Item::new(&alone_id, new, &alone_key).with_cost(10))
            .await
            .is_allowed()
    );
    clock.advance(secs(1));
    let lowered = decide(&store, Item::new(&id, new, &key)).await;
    let alone = decide(&store, Item::new(&alone_id, new, &alone_key)).await;
    assert!(!lowered.is_allowed() && !alone.is_allowed());
    assert!(
        lowered.retry_after() <= alone.retry_after(),
        "after 100 -> 10: told {:?}; the new quota alone at its worst: {:?}",
        lowered.retry_after(),
        alone.retry_after()
    );
}
