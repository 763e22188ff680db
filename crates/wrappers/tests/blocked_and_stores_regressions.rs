//! The blocked-caller cache and named stores: what an adversarial review found, kept as
//! regressions (a refund unblocks; a locally refused request never reaches another store).
//! What each wrapper can do, named stores included, is `capabilities.rs`'s.

use std::time::Duration;

use futures_executor::block_on;
use tollgate_core::{FleetModes, Item, Key, MemoryStore, Quota, RuleId, Store, Timestamp};
use tollgate_testing::ManualClock;
use tollgate_wrappers::BlockedCache;

/// A refund (a `count_only_when` response, a `Stores` share taken back, a FleetStore give-back)
/// puts units back in the store and forgets the caller's cached refusal: the store is asked
/// again and allows it, rather than the cache refusing until the old wait.
#[test]
fn a_refund_unblocks_a_cached_caller() {
    let clock = ManualClock::new(Timestamp::from_secs(1_000));
    let memory = MemoryStore::builder().clock(clock.clone()).build();
    let cache = BlockedCache::with_clock(memory.clone(), clock.clone());
    let (rule, key) = (RuleId::new("login").unwrap(), Key::new("user77"));
    let quota = Quota::fixed_window(2, Duration::from_secs(3_600)).unwrap();
    let item =
        Item::new(&rule, quota, &key).with_fleet_modes(FleetModes::new().with_cache_blocked(true));

    let first = block_on(cache.check(&[item])).unwrap();
    assert!(first.is_allowed());
    assert!(block_on(cache.check(&[item])).unwrap().is_allowed());
    // Refused by the store, remembered for the rest of the hour.
    assert!(!block_on(cache.check(&[item])).unwrap().is_allowed());

    // The first request's charge is refunded (its response did not count): the store has a
    // unit again.
    let receipt = first.into_receipts(&[item]).pop().expect("a receipt");
    block_on(cache.refund(receipt)).unwrap();
    assert!(
        block_on(memory.peek(&item)).unwrap().is_allowed(),
        "the store itself would allow the caller now"
    );

    let after = block_on(cache.check(&[item])).unwrap();
    assert!(
        after.is_allowed(),
        "the cache still refuses (refused_locally = {}) for {:?} after the refund gave the unit back",
        after.items()[0].refused_locally(),
        after.items()[0].decision().retry_after(),
    );
}

mod counting {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use tollgate_core::{
        BatchDecision, Decision, Item, ItemDecision, Key, MemoryStore, Receipt, RefundError,
        RuleId, Store, StoreError,
    };
    use tollgate_testing::ManualClock;

    /// A store that counts every call reaching it (checks, refunds, peeks).
    #[derive(Clone)]
    pub(crate) struct Counted {
        pub store: MemoryStore<ManualClock>,
        pub calls: Arc<AtomicU64>,
    }

    impl Counted {
        pub(crate) fn new(store: MemoryStore<ManualClock>) -> Self {
            Counted {
                store,
                calls: Arc::default(),
            }
        }
        pub(crate) fn calls(&self) -> u64 {
            self.calls.load(Ordering::SeqCst)
        }
        fn tick(&self) {
            self.calls.fetch_add(1, Ordering::SeqCst);
        }
    }

    impl Store for Counted {
        async fn check(&self, items: &[Item<'_>]) -> Result<BatchDecision, StoreError> {
            self.tick();
            self.store.check(items).await
        }
        async fn check_one(&self, item: &Item<'_>) -> Result<ItemDecision, StoreError> {
            self.tick();
            self.store.check_one(item).await
        }
        async fn peek(&self, item: &Item<'_>) -> Result<Decision, StoreError> {
            self.tick();
            self.store.peek(item).await
        }
        async fn refund(&self, receipt: Receipt) -> Result<(), RefundError> {
            self.tick();
            self.store.refund(receipt).await
        }
        async fn reset(&self, rule: &RuleId, key: &Key) -> Result<(), StoreError> {
            self.store.reset(rule, key).await
        }
    }
}

/// The configuration `Stores` recommends (a cache inside each store): once a caller is blocked
/// on a cached home rule, each of its requests is refused locally before any store is asked —
/// the local store is neither charged, refunded nor read.
#[test]
fn a_request_refused_locally_in_one_store_never_reaches_the_other() {
    use tollgate_core::Rate;
    use tollgate_wrappers::Stores;
    let clock = ManualClock::new(Timestamp::from_secs(1_000));
    let local = counting::Counted::new(MemoryStore::builder().clock(clock.clone()).build());
    let home = counting::Counted::new(MemoryStore::builder().clock(clock.clone()).build());
    let stores = Stores::new(BlockedCache::with_clock(local.clone(), clock.clone()))
        .with(
            "home",
            BlockedCache::with_clock(home.clone(), clock.clone()),
        )
        .unwrap();
    let (login, reads, user) = (
        RuleId::new("login").unwrap(),
        RuleId::new("reads").unwrap(),
        Key::new("u1"),
    );
    let logins = Item::new(
        &login,
        Quota::token_bucket(1, Rate::per_hour(1)).unwrap(),
        &user,
    )
    .with_fleet_modes(
        FleetModes::new()
            .with_store("home")
            .with_cache_blocked(true),
    );
    let read = Item::new(
        &reads,
        Quota::token_bucket(100, Rate::per_hour(100)).unwrap(),
        &user,
    );

    assert!(
        block_on(stores.check(&[logins, read]))
            .unwrap()
            .is_allowed()
    );
    let by_store = block_on(stores.check(&[logins, read])).unwrap();
    assert!(!by_store.is_allowed() && !by_store.items()[0].refused_locally());

    let (local_before, home_before) = (local.calls(), home.calls());
    let here = block_on(stores.check(&[logins, read])).unwrap();
    assert!(!here.is_allowed());
    assert!(
        here.items()[0].refused_locally(),
        "the login refusal is the cache's"
    );
    assert_eq!(home.calls() - home_before, 0, "the home store is not asked");
    assert_eq!(
        local.calls() - local_before,
        0,
        "a request refused locally should not charge/refund/read the local store"
    );
}
