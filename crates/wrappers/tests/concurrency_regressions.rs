//! Concurrency holds that an adversarial review once leaked or double-freed, kept as
//! regressions: a reset while slots are held, a rule that fails open within a concurrency
//! quota, and a concurrency rule asked to split over gateways.

use std::time::Duration;

use futures_executor::block_on;
use tollgate_core::{
    BatchDecision, Counting, FleetModes, Item, Key, MemoryStore, OnStoreFailure, Quota, Receipt,
    RuleId, SplitSettings, Store,
};
use tollgate_wrappers::{FallbackStore, FleetStore};

mod common;
use common::Down;

fn rule(id: &str) -> RuleId {
    RuleId::new(id).expect("a valid rule id")
}

fn one_slot() -> Quota {
    Quota::concurrency(1).expect("a valid quota")
}

async fn hold<S: Store>(store: &S, item: Item<'_>) -> Option<Receipt> {
    let items = [item];
    let answer: BatchDecision = store.check(&items).await.expect("the store answers");
    answer
        .is_allowed()
        .then(|| answer.into_receipts(&items).pop())
        .flatten()
}

/// A hold taken before an operator's reset gives nothing back to the count after it, which
/// holds a newer request's slot (the memory store names each count's life in its holds).
#[test]
fn a_hold_from_before_a_reset_frees_no_newer_holders_slot() {
    let store = MemoryStore::new();
    let (id, key) = (rule("exports"), Key::new("acct"));
    let item = Item::new(&id, one_slot(), &key);
    block_on(async {
        let before = hold(&store, item).await.expect("the slot");
        store.reset(&id, &key).await.expect("the store resets");
        let after = hold(&store, item)
            .await
            .expect("the slot again, after the reset");
        store.refund(before).await.expect("the store answers");
        assert!(
            hold(&store, item).await.is_none(),
            "the newer request still holds it"
        );
        store.refund(after).await.expect("the store answers");
        assert!(hold(&store, item).await.is_some());
    });
}

/// A rate rule that fails open within a concurrency quota takes a local slot while the primary
/// is down, and gives it back there (its receipt names the local quota).
#[test]
fn a_rate_rule_open_within_a_concurrency_quota_gives_its_local_slot_back() {
    let store = FallbackStore::builder(Down).build();
    let (id, key) = (rule("exports"), Key::new("acct"));
    let rate = Quota::fixed_window(100, Duration::from_secs(60)).expect("a valid quota");
    let item =
        Item::new(&id, rate, &key).with_store_failure(OnStoreFailure::OpenWithin(one_slot()));
    block_on(async {
        let local = hold(&store, item).await.expect("the local slot");
        assert!(hold(&store, item).await.is_none(), "one local slot");
        store.refund(local).await.expect("given back");
        assert_eq!(store.local().stats().keys, 0, "nothing held locally");
        assert!(hold(&store, item).await.is_some());
    });
}

/// A concurrency rule asked to split over gateways is counted whole and exactly (a slot must
/// come back where it was taken), so each request's slot comes back.
#[test]
fn a_concurrency_rule_asked_to_split_is_counted_exactly() {
    let store = FleetStore::new(MemoryStore::new());
    let (id, key) = (rule("exports"), Key::new("acct"));
    let modes = FleetModes::new().with_counting(Counting::Split(SplitSettings::new(2)));
    let quota = Quota::concurrency(4).expect("a valid quota");
    let item = Item::new(&id, quota, &key).with_fleet_modes(modes);
    assert_eq!(item.counting(), Counting::Exact);
    assert_eq!(item.quota().limit(), 4, "not shared out");
    block_on(async {
        for request in 0..10 {
            let held = hold(&store, item).await;
            let held = held.unwrap_or_else(|| panic!("request {request} refused"));
            store.refund(held).await.expect("given back");
        }
    });
}
