//! Conformance cases for concurrency quotas ([`Quota::concurrency`]): slots taken by checks,
//! given back by refunding their receipts, all-or-nothing with the other rules of a request.

use super::{START, check_one, peek, rule, secs};
use crate::ManualClock;
use tollgate_core::{Item, Key, Quota, Rate, Receipt, RefusalReason, Store};

fn slots(limit: u64) -> Quota {
    Quota::concurrency_with(limit, secs(3), secs(60)).expect("valid")
}

/// What `item`'s rule has free now (a peek of cost 0 reports the state as it is).
async fn free<S: Store>(store: &S, item: Item<'_>) -> u64 {
    peek(store, item.with_cost(0)).await.remaining()
}

/// Checks `item` and keeps its receipt when allowed.
async fn take<S: Store>(store: &S, item: Item<'_>) -> Option<Receipt> {
    let items = [item];
    let answer = check_one(store, item).await;
    answer
        .is_allowed()
        .then(|| answer.into_receipts(&items).pop())
        .flatten()
}

/// Limit 3: three requests take a slot each (2, 1, 0 free), the fourth is refused with the
/// quota's own wait, and a request that ends (its receipt refunded) lets the next one in.
pub(crate) async fn concurrency_admits_up_to_its_limit_and_an_ended_request_frees_its_slot<
    S: Store,
>(
    make: &impl Fn(ManualClock) -> S,
) {
    let clock = ManualClock::new(START);
    let store = make(clock.clone());
    let (id, key) = (rule("exports"), Key::new("account-9"));
    let item = Item::new(&id, slots(3), &key);
    let mut running = Vec::new();
    for free_after in [2, 1, 0] {
        let answer = check_one(&store, item).await;
        assert!(answer.is_allowed());
        assert_eq!(answer.items()[0].decision().remaining(), free_after);
        running.extend(answer.into_receipts(&[item]));
    }
    let refused = check_one(&store, item).await;
    assert!(!refused.is_allowed(), "a fourth at once is refused");
    let decision = *refused.items()[0].decision();
    assert_eq!(decision.refusal(), Some(RefusalReason::LimitReached));
    assert_eq!(decision.retry_after(), secs(3), "the quota's wait");
    assert_eq!(decision.remaining(), 0);

    let ended = running.pop().expect("three running");
    store
        .refund(ended)
        .await
        .expect("store gives the slot back");
    assert!(peek(&store, item).await.is_allowed());
    assert!(
        take(&store, item).await.is_some(),
        "the freed slot is taken"
    );
    assert!(take(&store, item).await.is_none(), "and only that one");
}

/// Slots do not come back with time: a request still running an hour later holds its slot
/// (a remote store renews it; see [`Quota::slot_ttl`]).
pub(crate) async fn concurrency_slots_do_not_come_back_with_time<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let clock = ManualClock::new(START);
    let store = make(clock.clone());
    let (id, key) = (rule("exports"), Key::new("account-9"));
    let item = Item::new(&id, slots(1), &key);
    let held = take(&store, item).await.expect("the one slot");
    clock.advance(secs(30));
    assert!(take(&store, item).await.is_none(), "still held 30 s later");
    store.refund(held).await.expect("store gives the slot back");
    assert!(take(&store, item).await.is_some());
}

/// A request refused by a rate rule takes no slot, and one refused for a slot is not charged to
/// the rate rule: all-or-nothing, as for any two rules.
pub(crate) async fn concurrency_is_all_or_nothing_with_the_other_rules<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let clock = ManualClock::new(START);
    let store = make(clock.clone());
    let (rate_id, slot_id, key) = (rule("per-account"), rule("in-flight"), Key::new("acct"));
    let rate = Item::new(
        &rate_id,
        Quota::token_bucket(2, Rate::per_minute(1)).expect("valid"),
        &key,
    );
    let slot = Item::new(&slot_id, slots(1), &key);

    let both = [rate, slot];
    let first = store.check(&both).await.expect("store answers");
    assert!(first.is_allowed());
    let held = first.into_receipts(&both);
    // The slot is taken: the next request is refused for it, and its rate charge is undone.
    let second = store.check(&both).await.expect("store answers");
    assert!(!second.is_allowed());
    assert!(!second.items()[1].decision().is_allowed());
    assert_eq!(free(&store, rate).await, 1, "no rate charged");

    for receipt in held {
        store.refund(receipt).await.expect("store refunds");
    }
    // Spend the rate rule; a request it refuses takes no slot.
    assert!(check_one(&store, rate).await.is_allowed());
    assert!(check_one(&store, rate).await.is_allowed());
    let third = store.check(&both).await.expect("store answers");
    assert!(!third.is_allowed());
    assert!(!third.items()[0].decision().is_allowed());
    assert_eq!(free(&store, slot).await, 1, "no slot taken");
}

/// A receipt refunded twice gives one slot back; a request of cost 2 takes and gives back two.
pub(crate) async fn concurrency_gives_back_each_hold_once<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let clock = ManualClock::new(START);
    let store = make(clock.clone());
    let (id, key) = (rule("exports"), Key::new("account-9"));
    let item = Item::new(&id, slots(4), &key);
    let pair = take(&store, item.with_cost(2)).await.expect("two slots");
    let one = take(&store, item).await.expect("one slot");
    assert_eq!(free(&store, item).await, 1);
    let retry = crate::replay(&one);
    store.refund(one).await.expect("store refunds");
    store
        .refund(retry)
        .await
        .expect("a retried refund succeeds");
    assert_eq!(free(&store, item).await, 2, "one slot back, once");
    store.refund(pair).await.expect("store refunds");
    assert_eq!(free(&store, item).await, 4);
    let too_many = check_one(&store, item.with_cost(5)).await;
    assert_eq!(
        too_many.items()[0].decision().refusal(),
        Some(RefusalReason::CostExceedsLimit)
    );
}

/// An operator's reset frees every slot of the caller; another caller's slots stay.
pub(crate) async fn concurrency_reset_frees_the_callers_slots<S: Store>(
    make: &impl Fn(ManualClock) -> S,
) {
    let clock = ManualClock::new(START);
    let store = make(clock.clone());
    let id = rule("exports");
    let (stuck, other) = (Key::new("stuck"), Key::new("other"));
    let stuck_item = Item::new(&id, slots(2), &stuck);
    let other_item = Item::new(&id, slots(2), &other);
    let _held = [
        take(&store, stuck_item).await,
        take(&store, stuck_item).await,
        take(&store, other_item).await,
    ];
    assert!(take(&store, stuck_item).await.is_none());
    store.reset(&id, &stuck).await.expect("store resets");
    assert_eq!(free(&store, stuck_item).await, 2);
    assert_eq!(free(&store, other_item).await, 1);
}
