//! Concurrency holds on Redis: a hold lapses once its quota's slot ttl passes without a renewal
//! (so a gateway that died mid-request frees its slots), a renewal keeps it, a renewal after
//! it lapsed takes nothing back, and a hold given back twice frees its slots once. Standalone
//! and Cluster, on the script's clock (a manual one, passed to the server in test mode). A
//! request's slot costs two script calls: one to take it, one to give it back. And what an
//! adversarial review once broke: a hold of the largest limit, a shorter slot ttl cutting a
//! longer one's hold short, a value of another type at the key, and a refused cross-slot
//! request keeping its slot.

mod common;

use std::time::Duration;

use tollgate_core::{Algorithm, Item, Key, Quota, Receipt, RuleId, Store};
use tollgate_redis::RedisStore;
use tollgate_testing::ManualClock;
use tollgate_testing::conformance::START;

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

/// A hold of the largest limit (100,000 slots, one member each) is taken, renewed and given
/// back: the script writes its members in chunks.
#[test]
fn a_hold_of_the_largest_limit_is_taken_renewed_and_given_back() {
    let store = common::standalone_store(ManualClock::new(START));
    let (rule, key) = (
        RuleId::new("bulk").expect("a valid rule id"),
        Key::new("acct"),
    );
    let quota = Quota::concurrency(100_000).expect("the largest limit");
    let item = Item::new(&rule, quota, &key).with_cost(100_000);
    common::block_on(async {
        let held = take(&store, item).await.expect("all the slots");
        store.renew(&held).await.expect("renewed");
        assert!(take(&store, item.with_cost(1)).await.is_none(), "none left");
        store.refund(held).await.expect("given back");
        assert!(take(&store, item).await.is_some(), "all of them back");
    });
}

/// Holds under a shorter slot ttl (a quota changed by a reload) do not cut the key's life, and
/// with it a longer hold still running, short: the key lives as long as its latest member.
#[test]
fn a_shorter_slot_ttl_leaves_a_longer_holds_key_alive() {
    let store = common::server_time_store();
    let (rule, key) = (
        RuleId::new("exports").expect("a valid rule id"),
        Key::new("acct"),
    );
    let long = Quota::concurrency_with(2, Duration::from_secs(1), Duration::from_secs(60));
    let short = Quota::concurrency_with(2, Duration::from_secs(1), Duration::from_secs(1));
    let (long, short) = (long.expect("valid"), short.expect("valid"));
    let stored = store
        .stored_key(&rule, &key, Algorithm::Concurrency)
        .expect("the key's name");
    common::block_on(async {
        let _running = take(&store, Item::new(&rule, long, &key))
            .await
            .expect("a 60 s hold");
        let brief = take(&store, Item::new(&rule, short, &key))
            .await
            .expect("a 1 s hold");
        store.refund(brief).await.expect("given back");
        let mut connection = common::direct_connection().await;
        let lifetime: i64 = redis::cmd("PTTL")
            .arg(&stored)
            .query_async(&mut connection)
            .await
            .expect("PTTL answers");
        assert!(
            lifetime > 50_000,
            "the key lives {lifetime} ms, not the 60 s hold's"
        );
    });
}

/// A value of another type at the slots key fails the check, the renewal and the give-back with
/// a store error (the rule's failure policy decides), and panics nowhere.
#[test]
fn a_value_of_another_type_at_the_key_is_a_store_error() {
    let store = common::standalone_store(ManualClock::new(START));
    let (rule, key) = (
        RuleId::new("exports").expect("a valid rule id"),
        Key::new("acct-3"),
    );
    let item = Item::new(&rule, exports(), &key);
    let stored = store
        .stored_key(&rule, &key, Algorithm::Concurrency)
        .expect("the key's name");
    common::block_on(async {
        let held = take(&store, item).await.expect("the slot");
        common::set_bytes(&stored, b"hello").await;
        assert!(store.check(&[item]).await.is_err());
        assert!(store.renew(&held).await.is_err());
        assert!(store.refund(held).await.is_err());
    });
}

/// A request whose rules live in two cluster slots, refused by a window rule in one, gives back
/// the slot the other took, whichever order its rules come in.
#[test]
fn a_refused_cross_slot_request_gives_its_slot_back() {
    for slot_first in [true, false] {
        let store = common::cluster_store(ManualClock::new(START));
        let (in_flight, key) = (RuleId::new("in-flight").expect("valid"), Key::new("acct-x"));
        let window_rule = (0..)
            .map(|n| RuleId::new(&format!("rate{n}")).expect("valid"))
            .find(|rule| store.slot(rule, &key) != store.slot(&in_flight, &key))
            .expect("a rule in another slot");
        let slot = Item::new(&in_flight, exports(), &key);
        let hour = Duration::from_secs(3_600);
        let window = Item::new(
            &window_rule,
            Quota::fixed_window(1, hour).expect("valid"),
            &key,
        );
        common::block_on(async {
            assert!(
                take(&store, window).await.is_some(),
                "the window's one request"
            );
            let items = if slot_first {
                [slot, window]
            } else {
                [window, slot]
            };
            let answer = store.check(&items).await.expect("the store answers");
            assert!(!answer.is_allowed(), "the window refuses");
            assert!(
                take(&store, slot).await.is_some(),
                "the slot was given back"
            );
        });
    }
}
