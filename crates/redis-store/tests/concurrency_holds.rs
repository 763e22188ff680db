//! Concurrency holds on Redis: a hold lapses once its quota's slot ttl passes without a renewal
//! (so a gateway that died mid-request frees its slots), a renewal keeps it, a renewal after
//! it lapsed takes nothing back, and a hold given back twice frees its slots once. Standalone
//! and Cluster, on the script's clock (a manual one, passed to the server in test mode).

mod common;

use std::time::Duration;

use tollgate_core::testing::ManualClock;
use tollgate_core::testing::conformance::START;
use tollgate_core::{Item, Key, Quota, Receipt, RuleId, Store};
use tollgate_redis::RedisStore;

const TTL: Duration = Duration::from_secs(60);

fn exports() -> Quota {
    Quota::concurrency_with(1, Duration::from_secs(2), TTL).expect("valid")
}

async fn take(store: &RedisStore, item: Item<'_>) -> Option<Receipt> {
    let items = [item];
    let answer = store.check(&items).await.expect("store answers");
    answer
        .is_allowed()
        .then(|| answer.into_receipts(&items).pop())
        .flatten()
}

async fn lapses_unless_renewed(store: RedisStore, clock: ManualClock) {
    let (rule, key) = (
        RuleId::new("exports").expect("a valid rule id"),
        Key::new("acct-1"),
    );
    let item = Item::new(&rule, exports(), &key);

    // Renewed twice within each ttl: held for 100 s.
    let held = take(&store, item).await.expect("the one slot");
    for _ in 0..2 {
        clock.advance(Duration::from_secs(50));
        store.renew(&held).await.expect("store renews");
        assert!(
            take(&store, item).await.is_none(),
            "still held after renewal"
        );
    }
    store.refund(held).await.expect("store gives the slot back");

    // Not renewed: free again once the ttl has passed, and not before.
    let abandoned = take(&store, item).await.expect("the slot again");
    clock.advance(TTL - Duration::from_secs(1));
    assert!(
        take(&store, item).await.is_none(),
        "held until the ttl passes"
    );
    clock.advance(Duration::from_secs(2));
    let next = take(&store, item)
        .await
        .expect("a lapsed hold frees its slot");
    // The lapsed hold's renewal and release touch nothing of the new one.
    store.renew(&abandoned).await.expect("store answers");
    store.refund(abandoned).await.expect("store answers");
    assert!(take(&store, item).await.is_none(), "the new hold stands");
    store.refund(next).await.expect("store gives the slot back");
    assert!(take(&store, item).await.is_some());
}

#[test]
fn a_hold_lapses_unless_renewed_standalone() {
    let clock = ManualClock::new(START);
    common::block_on(lapses_unless_renewed(
        common::standalone_store(clock.clone()),
        clock,
    ));
}

#[test]
fn a_hold_lapses_unless_renewed_on_a_cluster() {
    let clock = ManualClock::new(START);
    common::block_on(lapses_unless_renewed(
        common::cluster_store(clock.clone()),
        clock,
    ));
}
