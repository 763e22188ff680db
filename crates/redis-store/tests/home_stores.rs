//! A store per rule on two real redis-servers, "local" and "home": each rule counted on its own
//! server, one request all-or-nothing across them (a refusal on either side refunds the other
//! by receipt), peek and reset routed, an unknown store name counted locally, and a home server
//! that hangs (SIGSTOP) behind a `FallbackStore`: its closed rules answer an error, its open
//! ones go on, and the local rules are still counted exactly.

mod common;

use std::sync::OnceLock;
use std::time::Duration;

use common::block_on;
use tollgate_core::{FleetModes, Item, Key, OnStoreFailure, Quota, Rate, RuleId, Store};
use tollgate_redis::{RedisConnection, RedisStore};
use tollgate_redis_harness::RedisServer;
use tollgate_wrappers::{FallbackStore, Stores};

/// The home region's server (the binary's shared one is the local region's).
fn home_server() -> &'static RedisServer {
    static SERVER: OnceLock<RedisServer> = OnceLock::new();
    SERVER.get_or_init(|| RedisServer::start().expect("start the home redis-server"))
}

/// A store on `server` under `prefix`, on the server's own clock.
async fn store_on(server: &RedisServer, prefix: &str) -> RedisStore {
    let connection = RedisConnection::connect(&server.url())
        .await
        .expect("connect to redis-server");
    RedisStore::builder()
        .prefix(prefix)
        .build(connection)
        .expect("a valid prefix")
}

/// The stored keys under `prefix` on `server`.
fn keys(server: &RedisServer, prefix: &str) -> usize {
    server
        .cli(&["KEYS", &format!("{prefix}*")])
        .expect("redis-cli answers")
        .lines()
        .filter(|line| !line.trim().is_empty())
        .count()
}

/// "local" and "home", one prefix for both, so a rule's keys exist only where it is counted.
async fn two_regions(local: &RedisServer, home: &RedisServer) -> (Stores<RedisStore>, String) {
    let prefix = common::unique_prefix();
    let stores = Stores::new(store_on(local, &prefix).await)
        .with("home", store_on(home, &prefix).await)
        .expect("a valid name");
    (stores, prefix)
}

struct Rules {
    login: RuleId,
    reads: RuleId,
    user: Key,
}

impl Rules {
    fn new() -> Rules {
        Rules {
            login: RuleId::new("login").expect("valid"),
            reads: RuleId::new("reads").expect("valid"),
            user: Key::new("account-4821"),
        }
    }

    /// Two logins an hour, in the home region.
    fn login(&self) -> Item<'_> {
        let quota = Quota::fixed_window(2, Duration::from_secs(3_600)).expect("valid");
        Item::new(&self.login, quota, &self.user)
            .with_fleet_modes(FleetModes::new().with_store("home"))
    }

    /// Ten reads an hour, in the local region.
    fn reads(&self) -> Item<'_> {
        let quota = Quota::token_bucket(10, Rate::per_hour(10)).expect("valid");
        Item::new(&self.reads, quota, &self.user)
    }
}

/// What a peek says would remain after one more.
async fn remaining<S: Store>(store: &S, item: &Item<'_>) -> u64 {
    store.peek(item).await.expect("peek").remaining()
}

#[test]
fn each_rule_is_counted_on_its_own_server() {
    let (local, home) = (common::server(), home_server());
    block_on(async {
        let (stores, prefix) = two_regions(local, home).await;
        let rules = Rules::new();
        assert!(
            stores
                .check(&[rules.login(), rules.reads()])
                .await
                .expect("check")
                .is_allowed()
        );
        assert_eq!(
            remaining(stores.named("home").expect("home"), &rules.login()).await,
            0
        );
        assert_eq!(remaining(stores.default_store(), &rules.reads()).await, 8);
        assert_eq!(
            remaining(stores.default_store(), &rules.login()).await,
            1,
            "none local"
        );
        assert_eq!(
            keys(home, &prefix),
            1,
            "the login's window, on the home server"
        );
        assert_eq!(
            keys(local, &prefix),
            1,
            "the reads' bucket, on the local server"
        );
        // Peek routes by the item's store.
        assert_eq!(remaining(&stores, &rules.login()).await, 0);
        assert_eq!(remaining(&stores, &rules.reads()).await, 8);
    });
}

#[test]
fn a_home_refusal_refunds_the_local_charge() {
    let (local, home) = (common::server(), home_server());
    block_on(async {
        let (stores, _prefix) = two_regions(local, home).await;
        let rules = Rules::new();
        for _ in 0..2 {
            assert!(
                stores
                    .check(&[rules.login()])
                    .await
                    .expect("check")
                    .is_allowed()
            );
        }
        let answer = stores
            .check(&[rules.reads(), rules.login()])
            .await
            .expect("check");
        assert!(!answer.is_allowed());
        assert!(answer.items()[0].charge().is_none());
        assert_eq!(
            remaining(stores.default_store(), &rules.reads()).await,
            9,
            "refunded"
        );
    });
}

#[test]
fn a_local_refusal_refunds_the_home_charge() {
    let (local, home) = (common::server(), home_server());
    block_on(async {
        let (stores, _prefix) = two_regions(local, home).await;
        let rules = Rules::new();
        let all_reads = rules.reads().with_cost(10);
        assert!(
            stores
                .check(&[all_reads])
                .await
                .expect("check")
                .is_allowed()
        );
        let answer = stores
            .check(&[rules.login(), rules.reads()])
            .await
            .expect("check");
        assert!(!answer.is_allowed());
        let home_store = stores.named("home").expect("home");
        assert_eq!(remaining(home_store, &rules.login()).await, 1, "refunded");
        // Both logins are still there to use.
        for _ in 0..2 {
            assert!(
                stores
                    .check(&[rules.login()])
                    .await
                    .expect("check")
                    .is_allowed()
            );
        }
    });
}

#[test]
fn refunds_and_resets_reach_the_right_server() {
    let (local, home) = (common::server(), home_server());
    block_on(async {
        let (stores, _prefix) = two_regions(local, home).await;
        let rules = Rules::new();
        let items = [rules.login(), rules.reads()];
        let receipts = stores
            .check(&items)
            .await
            .expect("check")
            .into_receipts(&items);
        for receipt in receipts {
            stores.refund(receipt).await.expect("refund");
        }
        assert_eq!(
            remaining(stores.named("home").expect("home"), &rules.login()).await,
            1
        );
        assert_eq!(remaining(stores.default_store(), &rules.reads()).await, 9);

        for _ in 0..2 {
            assert!(stores.check(&items).await.expect("check").is_allowed());
        }
        assert!(!stores.check(&items).await.expect("check").is_allowed());
        stores
            .reset(&rules.login, &rules.user)
            .await
            .expect("reset");
        stores
            .reset(&rules.reads, &rules.user)
            .await
            .expect("reset");
        assert_eq!(
            remaining(stores.named("home").expect("home"), &rules.login()).await,
            1
        );
        assert_eq!(remaining(stores.default_store(), &rules.reads()).await, 9);
    });
}

#[test]
fn an_unknown_store_name_is_counted_on_the_local_server() {
    let (local, home) = (common::server(), home_server());
    block_on(async {
        let (stores, prefix) = two_regions(local, home).await;
        let rules = Rules::new();
        let lost = rules
            .login()
            .with_fleet_modes(FleetModes::new().with_store("hoem"));
        for _ in 0..2 {
            assert!(stores.check(&[lost]).await.expect("check").is_allowed());
        }
        assert!(
            !stores.check(&[lost]).await.expect("check").is_allowed(),
            "still limited"
        );
        assert_eq!((keys(local, &prefix), keys(home, &prefix)), (1, 0));
    });
}

#[test]
fn a_hung_home_region_fails_its_closed_rules_and_lets_its_open_ones_go_on() {
    // A home server of this test's own: it is paused.
    let home = RedisServer::start().expect("start redis-server");
    let local = common::server();
    block_on(async {
        let prefix = common::unique_prefix();
        let guarded = |store| {
            FallbackStore::builder(store)
                .timeout(Duration::from_millis(100))
                .build()
        };
        let stores = Stores::new(guarded(store_on(local, &prefix).await))
            .with("home", guarded(store_on(&home, &prefix).await))
            .expect("a valid name");
        let rules = Rules::new();
        let closed = rules.login().with_store_failure(OnStoreFailure::Closed);
        let open = rules.login().with_store_failure(OnStoreFailure::Open);
        assert!(
            stores
                .check(&[closed, rules.reads()])
                .await
                .expect("check")
                .is_allowed()
        );

        home.pause().expect("pause the home server");
        let error = stores
            .check(&[rules.reads(), closed])
            .await
            .expect_err("a closed home rule fails while home is down");
        assert!(error.is_timeout() || error.is_unavailable(), "{error}");
        assert_eq!(
            remaining(stores.default_store(), &rules.reads()).await,
            8,
            "the local charge of the failed request was refunded"
        );
        let answer = stores
            .check(&[rules.reads(), open])
            .await
            .expect("open goes on");
        assert!(answer.is_allowed());
        assert_eq!(remaining(stores.default_store(), &rules.reads()).await, 7);
        home.resume().expect("resume the home server");
    });
}
