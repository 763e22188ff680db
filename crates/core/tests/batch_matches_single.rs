//! A request of several rules, checked in one `Store::check`, decides exactly as the same rules
//! checked one at a time would under all-or-nothing: every item is peeked first, and only a
//! request whose every item fits is charged, item by item. Random requests of one to three
//! token-bucket rules over a few callers, on a manual clock, so each batch is compared with its
//! one-at-a-time twin step by step. The batch path decides a batch of known keys that is
//! allowed whole from the words as they stand, writing them only at the end; a batch with a new
//! key, a refusal or one key twice goes the general way (all are exercised).

use std::time::Duration;

use futures_util::FutureExt;
use proptest::prelude::*;
use tollgate_core::{Item, Key, MemoryStore, Quota, Rate, RuleId, Store, Timestamp};
use tollgate_testing::ManualClock;

fn store(clock: &ManualClock) -> MemoryStore<ManualClock> {
    MemoryStore::builder().clock(clock.clone()).build()
}

fn quota(rule: usize) -> Quota {
    match rule {
        0 => Quota::token_bucket(5, Rate::per_second(2)),
        1 => Quota::token_bucket(3, Rate::per_second(1)),
        _ => Quota::gcra(Rate::per_second(4), 4),
    }
    .expect("valid quotas")
}

/// One item of a request: its rule, its caller and its cost.
type Asked = (usize, u8, u64);

/// Requests, each with the gap before it in ms.
fn requests() -> impl Strategy<Value = Vec<(u64, Vec<Asked>)>> {
    let item = (0usize..3, 0u8..3, 0u64..3);
    prop::collection::vec((0u64..400, prop::collection::vec(item, 1..=3)), 1..80)
}

proptest! {
    #[test]
    fn a_batch_decides_as_its_items_one_at_a_time(requests in requests()) {
        let start = Timestamp::from_secs(1_700_000_000);
        let (batch_clock, single_clock) = (ManualClock::new(start), ManualClock::new(start));
        let (batched, single) = (store(&batch_clock), store(&single_clock));
        let rules: Vec<RuleId> = ["a", "b", "c"]
            .iter()
            .map(|name| RuleId::new(name).expect("valid"))
            .collect();
        let keys: Vec<Key> = (0..3).map(|caller| Key::new(format!("caller-{caller}"))).collect();
        for (gap, request) in requests {
            batch_clock.advance(Duration::from_millis(gap));
            single_clock.advance(Duration::from_millis(gap));
            let items: Vec<Item<'_>> = request
                .iter()
                .map(|&(rule, caller, cost)| {
                    Item::new(&rules[rule], quota(rule), &keys[usize::from(caller)]).with_cost(cost)
                })
                .collect();
            let answer = batched
                .check(&items)
                .now_or_never()
                .expect("ready")
                .expect("the memory store answers");
            // The twin: a request is charged only if every item fits with the ones before it
            // charged (items may share a key); otherwise nothing stays charged.
            let mut charged = Vec::new();
            let mut fits = true;
            for item in &items {
                let one = single.check_one(item).now_or_never().expect("ready").expect("answers");
                if !one.decision().is_allowed() {
                    fits = false;
                    break;
                }
                charged.push(one.into_receipt(item));
            }
            if !fits {
                for receipt in charged.into_iter().flatten() {
                    single.refund(receipt).now_or_never().expect("ready").expect("refunds");
                }
            }
            prop_assert_eq!(answer.is_allowed(), fits, "request {:?}", request);
            for item in &items {
                let probe = item.with_cost(0);
                let left = |store: &MemoryStore<ManualClock>| {
                    store.peek(&probe).now_or_never().expect("ready").expect("peeks").remaining()
                };
                prop_assert_eq!(left(&batched), left(&single), "after {:?}", request);
            }
        }
    }
}
