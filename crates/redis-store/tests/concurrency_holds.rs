//! Concurrency holds on Redis: a hold lapses once its quota's slot ttl passes without a renewal
//! (so a gateway that died mid-request frees its slots), a renewal keeps it, a renewal after
//! it lapsed takes nothing back, and a hold given back twice frees its slots once. Standalone
//! and Cluster, on the script's clock (a manual one, passed to the server in test mode). A
//! request's slot costs two script calls: one to take it, one to give it back.

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

/// `calls=` of `cmdstat_evalsha` in `INFO commandstats`.
async fn evalsha_calls(connection: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(connection)
        .await
        .expect("INFO answers");
    info.lines()
        .find_map(|line| line.strip_prefix("cmdstat_evalsha:calls="))
        .and_then(|rest| rest.split(',').next()?.parse().ok())
        .unwrap_or(0)
}

/// A request's slot is one script call to take and one to give back, however many requests
/// (on a server of its own, so no other test's calls are counted).
#[test]
fn a_slot_costs_two_script_calls() {
    let server = tollgate_redis_harness::RedisServer::start().expect("start redis-server");
    common::block_on(async {
        let store = RedisStore::builder()
            .connect(&server.url())
            .await
            .expect("connect to redis-server");
        let (rule, key) = (
            RuleId::new("exports").expect("a valid rule id"),
            Key::new("acct-2"),
        );
        let item = Item::new(&rule, exports(), &key);
        // The script is loaded (and any NOSCRIPT retry made) before counting.
        let warm = take(&store, item).await.expect("the slot");
        store.refund(warm).await.expect("given back");
        let client = redis::Client::open(server.url()).expect("a valid url");
        let mut connection = client
            .get_multiplexed_async_connection()
            .await
            .expect("connect to redis-server");
        let before = evalsha_calls(&mut connection).await;
        for _ in 0..100 {
            let held = take(&store, item).await.expect("the slot");
            store.refund(held).await.expect("given back");
        }
        let calls = evalsha_calls(&mut connection).await - before;
        assert_eq!(calls, 200, "two script calls per request");
    });
}
