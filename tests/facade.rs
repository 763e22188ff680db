//! The facade re-exports what applications use, and the guide's first store example runs.

use std::time::Duration;

use futures_executor::block_on;
use tollgate::{Item, Key, MemoryStore, Quota, Rate, RefusalReason, RuleId, Store};

#[test]
fn the_guides_store_example_runs() {
    let store = MemoryStore::new();
    let login = RuleId::new("login-per-account").unwrap();
    let quota = Quota::sliding_window_log(10, Duration::from_secs(15 * 60)).unwrap();
    let target = Key::new("victim@example.com");
    for _ in 0..10 {
        assert!(
            block_on(store.check(&[Item::new(&login, quota, &target)]))
                .unwrap()
                .is_allowed()
        );
    }
    let eleventh = block_on(store.check(&[Item::new(&login, quota, &target)])).unwrap();
    assert!(!eleventh.is_allowed());
    assert_eq!(eleventh.items()[0].decision().retry_after_secs(), 900);
}

#[test]
fn a_cost_computed_from_a_request_can_never_become_an_error() {
    let store = MemoryStore::new();
    let export = RuleId::new("export").unwrap();
    let quota = Quota::token_bucket(100, Rate::per_minute(100)).unwrap();
    let key = Key::new("user77");
    let huge = Item::new(&export, quota, &key).with_cost(u64::MAX);
    let answer = block_on(store.check(&[huge])).unwrap();
    assert_eq!(
        answer.items()[0].decision().refusal(),
        Some(RefusalReason::CostExceedsLimit)
    );
}

#[test]
fn the_core_crate_is_reachable_through_the_facade() {
    let clock = tollgate_testing::ManualClock::default();
    let store = tollgate::core::MemoryStore::builder().clock(clock).build();
    assert_eq!(store.stats().keys, 0);
}

/// With the `testing` feature the testing kit is where it always was, `tollgate::core::testing`.
#[cfg(feature = "testing")]
#[test]
fn the_testing_kit_is_reachable_through_the_facade_core() {
    let clock = tollgate::core::testing::ManualClock::default();
    let store = tollgate::core::MemoryStore::builder().clock(clock).build();
    assert_eq!(store.stats().keys, 0);
}
