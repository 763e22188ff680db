//! Hot-key sub-buckets over the in-memory store: never more than the limit, refusals only
//! within the stated bound of unused units, receipts and resets reach the sub-buckets.

use std::time::Duration;

use tollgate_core::{FleetModes, Item, Key, MemoryStore, Quota, Rate, RuleId, Store, Timestamp};
use tollgate_testing::ManualClock;
use tollgate_wrappers::SubBuckets;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime")
}

/// Units left in every sub-bucket of `item`, read from the store underneath.
async fn unused(store: &MemoryStore<ManualClock>, item: &Item<'_>) -> u64 {
    let spread = item.sub_buckets();
    let mut total = 0;
    for index in 0..spread {
        let rule = item.rule().sub_bucket(index, spread);
        let part = item
            .quota()
            .part(u64::from(index), u64::from(spread))
            .expect("splits");
        let probe = Item::new(&rule, part, item.key()).with_cost(0);
        total += store.peek(&probe).await.expect("peeks").remaining();
    }
    total
}

/// Floods one key split 5 ways (C = 103, so parts of 21 and 20) with costs 1 to 3, on a
/// frozen clock: the admitted total never passes C, and at every refusal the units left
/// unused are within (S − 2)·⌈C/S⌉ + 2(c − 1).
#[test]
fn a_flood_never_passes_the_limit_and_refuses_early_only_within_the_bound() {
    runtime().block_on(async {
        for cost in 1..=3_u64 {
            let clock = ManualClock::new(Timestamp::from_secs(1_000));
            let memory = MemoryStore::builder().clock(clock.clone()).build();
            let store = SubBuckets::new(memory.clone());
            let (rule, key) = (RuleId::new("trending").expect("valid"), Key::global());
            let quota = Quota::token_bucket(103, Rate::per_second(103)).expect("valid");
            let item = Item::new(&rule, quota, &key).with_fleet_modes(FleetModes::new().with_sub_buckets(5)).with_cost(cost);
            let (spread, limit) = (5_u64, 103_u64);
            let bound = (spread - 2) * limit.div_ceil(spread) + 2 * (cost - 1);
            let mut admitted = 0;
            let mut worst = 0;
            for _ in 0..400 {
                if store.check(&[item]).await.expect("answers").is_allowed() {
                    admitted += cost;
                } else {
                    let left = unused(&memory, &item).await;
                    assert!(left <= bound, "cost {cost}: refused with {left} unused > {bound}");
                    worst = worst.max(left);
                }
            }
            assert!(admitted <= limit, "cost {cost}: admitted {admitted} > {limit}");
            assert_eq!(admitted + unused(&memory, &item).await, limit);
            println!("cost {cost}: admitted {admitted} of {limit}, worst unused at a refusal {worst} (bound {bound})");
        }
    });
}

/// A refusal's wait is the sooner of the two sub-buckets tried, and never zero while refused.
#[test]
fn a_refusal_says_when_a_sub_bucket_has_room_again() {
    runtime().block_on(async {
        let clock = ManualClock::new(Timestamp::from_secs(1_000));
        let memory = MemoryStore::builder().clock(clock.clone()).build();
        let store = SubBuckets::new(memory);
        let (rule, key) = (RuleId::new("trending").expect("valid"), Key::global());
        let quota = Quota::token_bucket(4, Rate::per_second(4)).expect("valid");
        let item =
            Item::new(&rule, quota, &key).with_fleet_modes(FleetModes::new().with_sub_buckets(2));
        while store.check(&[item]).await.expect("answers").is_allowed() {}
        let refused = store.check(&[item]).await.expect("answers");
        let wait = refused.items()[0].decision().retry_after();
        assert!(
            wait > Duration::ZERO && wait <= Duration::from_millis(500),
            "{wait:?}"
        );
        clock.advance(wait);
        assert!(
            store.check(&[item]).await.expect("answers").is_allowed()
                || store.check(&[item]).await.expect("answers").is_allowed(),
            "after the wait, a sub-bucket has room (at most one more pick away)"
        );
    });
}

/// A receipt refunds the sub-bucket that was charged; a reset clears every sub-bucket; a peek
/// adds them up.
#[test]
fn receipts_resets_and_peeks_reach_the_sub_buckets() {
    runtime().block_on(async {
        let clock = ManualClock::new(Timestamp::from_secs(1_000));
        let memory = MemoryStore::builder().clock(clock.clone()).build();
        let store = SubBuckets::new(memory.clone());
        let (rule, key) = (RuleId::new("trending").expect("valid"), Key::new("k"));
        let quota = Quota::fixed_window(12, Duration::from_secs(60)).expect("valid");
        let item =
            Item::new(&rule, quota, &key).with_fleet_modes(FleetModes::new().with_sub_buckets(3));
        let answer = store.check(&[item]).await.expect("answers");
        assert!(answer.is_allowed());
        assert_eq!(unused(&memory, &item).await, 11);
        assert_eq!(
            store
                .peek(&item.with_cost(0))
                .await
                .expect("peeks")
                .remaining(),
            11
        );
        for receipt in answer.into_receipts(&[item]) {
            store.refund(receipt).await.expect("refunds");
        }
        assert_eq!(
            unused(&memory, &item).await,
            12,
            "the charged sub-bucket got it back"
        );
        for _ in 0..6 {
            assert!(store.check(&[item]).await.expect("answers").is_allowed());
        }
        store.reset(&rule, &key).await.expect("resets");
        assert_eq!(
            unused(&memory, &item).await,
            12,
            "every sub-bucket was reset"
        );
    });
}

/// A cost that fits no sub-bucket (above ⌈C/S⌉) is refused as never fitting, with no charge;
/// one that fits only the larger parts is sent only to them.
#[test]
fn costs_are_sent_only_to_sub_buckets_they_fit() {
    runtime().block_on(async {
        let clock = ManualClock::new(Timestamp::from_secs(1_000));
        let memory = MemoryStore::builder().clock(clock.clone()).build();
        let store = SubBuckets::new(memory.clone());
        let (rule, key) = (RuleId::new("trending").expect("valid"), Key::new("k"));
        // Parts 4, 3, 3.
        let quota = Quota::fixed_window(10, Duration::from_secs(60)).expect("valid");
        let item =
            Item::new(&rule, quota, &key).with_fleet_modes(FleetModes::new().with_sub_buckets(3));
        let huge = store.check(&[item.with_cost(5)]).await.expect("answers");
        assert_eq!(
            huge.items()[0].decision().refusal(),
            Some(tollgate_core::RefusalReason::CostExceedsLimit)
        );
        assert_eq!(unused(&memory, &item).await, 10);
        assert!(
            store
                .check(&[item.with_cost(4)])
                .await
                .expect("answers")
                .is_allowed()
        );
        assert!(
            !store
                .check(&[item.with_cost(4)])
                .await
                .expect("answers")
                .is_allowed()
        );
        assert_eq!(unused(&memory, &item).await, 6);
    });
}
