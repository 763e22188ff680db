//! Two gateways on one real redis-server, each with its own connection, a `BlockedCache` and a
//! `ResetFollower`: a caller blocked on both is unblocked on both by a reset on one, and a
//! follower whose subscription is killed clears its cache when it is back.

mod common;

use std::time::Duration;

use tollgate_core::{FleetModes, Item, Key, Quota, RuleId, Store, Timestamp};
use tollgate_redis::{RedisConnection, RedisStore, ResetFollower};
use tollgate_testing::ManualClock;
use tollgate_wrappers::BlockedCache;

use common::{block_on, server, unique_prefix};

type Gateway = BlockedCache<RedisStore, ManualClock>;

async fn gateway(prefix: &str, clock: &ManualClock) -> (Gateway, ResetFollower) {
    let connection = RedisConnection::connect(&server().url())
        .await
        .expect("connect to redis-server");
    let store = RedisStore::builder()
        .prefix(prefix)
        .test_clock(clock.clone())
        .build(connection)
        .expect("a valid prefix");
    let cache = BlockedCache::with_clock(store.clone(), clock.clone());
    let follower = ResetFollower::start(&store, &cache);
    follower.subscribed().await;
    (cache, follower)
}

/// Waits, at most 10 s, until `done` holds (checking every few ms).
async fn until(what: &str, done: impl Fn() -> bool) {
    let waited = tokio::time::timeout(Duration::from_secs(10), async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "timed out waiting until {what}");
}

#[test]
fn a_reset_on_one_gateway_unblocks_the_caller_on_both_and_a_lost_subscription_forgets_all() {
    block_on(async {
        let clock = ManualClock::new(Timestamp::from_secs(1_700_000_000));
        let prefix = unique_prefix();
        let (a, _follow_a) = gateway(&prefix, &clock).await;
        let (b, follow_b) = gateway(&prefix, &clock).await;
        let (rule, key) = (RuleId::new("login").unwrap(), Key::new("user77"));
        let quota = Quota::fixed_window(2, Duration::from_secs(3_600)).unwrap();
        let item = Item::new(&rule, quota, &key)
            .with_fleet_modes(FleetModes::new().with_cache_blocked(true));

        for gateway in [&a, &b, &a, &b] {
            gateway.check(&[item]).await.expect("redis answers");
        }
        for gateway in [&a, &b] {
            let answer = gateway.check(&[item]).await.expect("redis answers");
            assert!(answer.items()[0].refused_locally(), "blocked on both");
            assert_eq!(gateway.stats().entries, 1);
        }

        a.reset(&rule, &key).await.expect("redis resets");
        assert_eq!(a.stats().entries, 0, "forgotten at once where reset");
        until("the other gateway heard the reset", || {
            b.stats().entries == 0
        })
        .await;
        let asked = b.stats().store_checks;
        let answer = b.check(&[item]).await.expect("redis answers");
        assert!(answer.is_allowed(), "the store was reset and asked");
        assert_eq!(b.stats().store_checks, asked + 1);

        // A reset announced while a follower is away is missed; coming back clears its cache.
        // (In this test, not one of its own: killing every subscription would disturb another
        // test's followers.)
        let other = Key::new("user78");
        let item = Item::new(&rule, quota, &other)
            .with_fleet_modes(FleetModes::new().with_cache_blocked(true));
        for _ in 0..3 {
            b.check(&[item]).await.expect("redis answers");
        }
        assert_eq!(b.stats().entries, 1);
        server()
            .cli(&["CLIENT", "KILL", "TYPE", "pubsub"])
            .expect("CLIENT KILL");
        until("the follower is back and forgot the caller", || {
            follow_b.is_subscribed() && b.stats().entries == 0
        })
        .await;
    });
}
