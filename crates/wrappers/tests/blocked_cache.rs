//! The blocked-caller cache over a real in-memory store on a manual clock, with a wrapper that
//! counts the calls reaching the store: cached refusals make no call and read as the store's,
//! end at the store's time, stay bounded, and give way to a quota change and a reset; an allow
//! is never cached, and a refused batch charges nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures_executor::block_on;
use tollgate_core::{
    BatchDecision, CountedIn, Decision, FleetModes, Item, ItemDecision, Key, MemoryStore, Mode,
    Quota, Rate, Receipt, RefundError, RuleId, Store, StoreError, Timestamp,
};
use tollgate_testing::ManualClock;
use tollgate_wrappers::BlockedCache;

/// A store that counts the checks reaching it.
#[derive(Clone)]
struct Counted {
    store: MemoryStore<ManualClock>,
    checks: Arc<AtomicU64>,
}

impl Counted {
    fn calls(&self) -> u64 {
        self.checks.load(Ordering::SeqCst)
    }
}

impl Store for Counted {
    async fn check(&self, items: &[Item<'_>]) -> Result<BatchDecision, StoreError> {
        self.checks.fetch_add(1, Ordering::SeqCst);
        self.store.check(items).await
    }

    fn check_now(&self, items: &[Item<'_>]) -> Option<Result<BatchDecision, StoreError>> {
        self.checks.fetch_add(1, Ordering::SeqCst);
        self.store.check_now(items)
    }

    async fn check_one(&self, item: &Item<'_>) -> Result<ItemDecision, StoreError> {
        self.checks.fetch_add(1, Ordering::SeqCst);
        self.store.check_one(item).await
    }

    async fn peek(&self, item: &Item<'_>) -> Result<Decision, StoreError> {
        self.store.peek(item).await
    }

    async fn refund(&self, receipt: Receipt) -> Result<(), RefundError> {
        self.store.refund(receipt).await
    }

    async fn reset(&self, rule: &RuleId, key: &Key) -> Result<(), StoreError> {
        self.store.reset(rule, key).await
    }
}

struct Setup {
    clock: ManualClock,
    counted: Counted,
    /// The same kind of store on the same clock, never cached: what the store itself says.
    twin: MemoryStore<ManualClock>,
    cache: BlockedCache<Counted, ManualClock>,
}

fn setup() -> Setup {
    let clock = ManualClock::new(Timestamp::from_secs(1_700_000_000));
    let counted = Counted {
        store: MemoryStore::builder().clock(clock.clone()).build(),
        checks: Arc::new(AtomicU64::new(0)),
    };
    let twin = MemoryStore::builder().clock(clock.clone()).build();
    let cache = BlockedCache::with_clock(counted.clone(), clock.clone());
    Setup {
        clock,
        counted,
        twin,
        cache,
    }
}

fn bucket() -> Quota {
    // 2 at once, one back every 500 ms.
    Quota::token_bucket(2, Rate::per_second(2)).expect("a valid quota")
}

fn check(store: &impl Store, items: &[Item<'_>]) -> BatchDecision {
    block_on(store.check(items)).expect("the store answers")
}

#[test]
fn a_cached_refusal_makes_no_call_and_reads_as_the_stores() {
    let s = setup();
    let (rule, key) = (RuleId::new("login").unwrap(), Key::new("u1"));
    let item = Item::new(&rule, bucket(), &key)
        .with_fleet_modes(FleetModes::new().with_cache_blocked(true));
    for _ in 0..3 {
        check(&s.cache, &[item]);
        check(&s.twin, &[item]);
    }
    assert_eq!(s.counted.calls(), 3, "the third was the store's refusal");
    for step_ms in [0, 100, 250, 399] {
        s.clock.set(Timestamp::from_micros(
            1_700_000_000_000_000 + step_ms * 1_000,
        ));
        let here = check(&s.cache, &[item]);
        let store = check(&s.twin, &[item]);
        assert!(!here.is_allowed() && here.items()[0].refused_locally());
        assert_eq!(here.items()[0].decision(), store.items()[0].decision());
        assert_eq!(here.items()[0].counted_in(), CountedIn::Store);
        assert!(here.items()[0].charge().is_none());
    }
    assert_eq!(s.counted.calls(), 3, "no call while blocked");
    assert_eq!(s.cache.stats().refused_locally, 4);
    assert_eq!(s.cache.stats().entries, 1);
}

#[test]
fn an_entry_ends_at_the_stores_time() {
    let s = setup();
    let (rule, key) = (RuleId::new("login").unwrap(), Key::new("u1"));
    let item = Item::new(&rule, bucket(), &key)
        .with_fleet_modes(FleetModes::new().with_cache_blocked(true));
    for _ in 0..3 {
        check(&s.cache, &[item]);
    }
    let wait = check(&s.cache, &[item]).items()[0].decision().retry_after();
    assert_eq!(wait, Duration::from_millis(500));
    s.clock.advance(wait - Duration::from_micros(1));
    assert!(check(&s.cache, &[item]).items()[0].refused_locally());
    assert_eq!(s.counted.calls(), 3);
    s.clock.advance(Duration::from_micros(1));
    let after = check(&s.cache, &[item]);
    assert!(after.is_allowed(), "at the store's time the store is asked");
    assert_eq!(s.counted.calls(), 4);
    // An allow is never cached: the next is asked about (and refused by the store).
    let next = check(&s.cache, &[item]);
    assert!(!next.is_allowed() && !next.items()[0].refused_locally());
    assert_eq!(s.counted.calls(), 5);
}

#[test]
fn an_allow_is_never_cached() {
    let s = setup();
    let (rule, key) = (RuleId::new("reads").unwrap(), Key::new("u1"));
    let quota = Quota::fixed_window(100, Duration::from_secs(60)).unwrap();
    let item =
        Item::new(&rule, quota, &key).with_fleet_modes(FleetModes::new().with_cache_blocked(true));
    for _ in 0..50 {
        assert!(check(&s.cache, &[item]).is_allowed());
    }
    assert_eq!(s.counted.calls(), 50);
    assert_eq!(s.cache.stats().entries, 0);
}

#[test]
fn only_items_that_ask_are_cached() {
    let s = setup();
    let (rule, key) = (RuleId::new("login").unwrap(), Key::new("u1"));
    for item in [
        Item::new(&rule, bucket(), &key),
        Item::new(&rule, bucket(), &key)
            .with_fleet_modes(FleetModes::new().with_cache_blocked(true))
            .with_mode(Mode::Shadow),
        Item::new(&rule, bucket(), &key)
            .with_fleet_modes(FleetModes::new().with_cache_blocked(true))
            .with_mode(Mode::ReadOnly),
    ] {
        for _ in 0..4 {
            check(&s.cache, &[item]);
        }
    }
    assert_eq!(s.counted.calls(), 12);
    assert_eq!(s.cache.stats().entries, 0);
    // A cost that can never fit is not remembered either.
    let huge = Item::new(&rule, bucket(), &key)
        .with_cost(5)
        .with_fleet_modes(FleetModes::new().with_cache_blocked(true));
    check(&s.cache, &[huge]);
    assert_eq!(s.cache.stats().entries, 0);
}

#[test]
fn another_cost_asks_the_store() {
    let s = setup();
    let (rule, key) = (RuleId::new("login").unwrap(), Key::new("u1"));
    let two = Item::new(&rule, bucket(), &key)
        .with_cost(2)
        .with_fleet_modes(FleetModes::new().with_cache_blocked(true));
    check(&s.cache, &[two]);
    check(&s.cache, &[two.with_cost(1)]);
    s.clock.advance(Duration::from_millis(500));
    // One unit back: a cost of 2 is refused (and remembered), a cost of 1 still fits.
    assert!(!check(&s.cache, &[two]).is_allowed());
    assert!(check(&s.cache, &[two]).items()[0].refused_locally());
    let one = check(&s.cache, &[two.with_cost(1)]);
    assert!(one.is_allowed(), "the store was asked about the other cost");
    assert_eq!(s.counted.calls(), 4);
}

#[test]
fn a_quota_change_drops_the_entry() {
    let s = setup();
    let (rule, key) = (RuleId::new("login").unwrap(), Key::new("u1"));
    let item = Item::new(&rule, bucket(), &key)
        .with_fleet_modes(FleetModes::new().with_cache_blocked(true));
    for _ in 0..4 {
        check(&s.cache, &[item]);
    }
    assert_eq!(s.counted.calls(), 3);
    let raised = Quota::token_bucket(10, Rate::per_second(10)).unwrap();
    let answer = check(
        &s.cache,
        &[Item::new(&rule, raised, &key)
            .with_fleet_modes(FleetModes::new().with_cache_blocked(true))],
    );
    assert!(answer.is_allowed(), "the store decides under the new quota");
    assert_eq!(s.counted.calls(), 4);
    assert_eq!(s.cache.stats().entries, 0);
}

#[test]
fn a_reset_forgets_here_and_in_the_store() {
    let s = setup();
    let (rule, key) = (RuleId::new("login").unwrap(), Key::new("u1"));
    let item = Item::new(&rule, bucket(), &key)
        .with_fleet_modes(FleetModes::new().with_cache_blocked(true));
    for _ in 0..4 {
        check(&s.cache, &[item]);
    }
    block_on(s.cache.reset(&rule, &key)).unwrap();
    assert_eq!(s.cache.stats().entries, 0);
    assert!(check(&s.cache, &[item]).is_allowed());
    // forget and forget_named drop the entry only here.
    for _ in 0..3 {
        check(&s.cache, &[item]);
    }
    assert!(s.cache.forget_named("login", key.as_bytes()));
    assert!(!s.cache.forget(&rule, &key));
    let asked = s.counted.calls();
    assert!(!check(&s.cache, &[item]).items()[0].refused_locally());
    assert_eq!(s.counted.calls(), asked + 1);
    s.cache.clear();
    assert_eq!(s.cache.stats().entries, 0);
}

#[test]
fn a_refused_batch_charges_nothing() {
    let s = setup();
    let (login, reads, key) = (
        RuleId::new("login").unwrap(),
        RuleId::new("reads").unwrap(),
        Key::new("u1"),
    );
    let blocked = Item::new(&login, bucket(), &key)
        .with_fleet_modes(FleetModes::new().with_cache_blocked(true));
    let reads_quota = Quota::fixed_window(10, Duration::from_secs(60)).unwrap();
    let other = Item::new(&reads, reads_quota, &key);
    for _ in 0..3 {
        check(&s.cache, &[blocked]);
    }
    let calls = s.counted.calls();
    for _ in 0..20 {
        let answer = check(&s.cache, &[other, blocked]);
        assert!(!answer.is_allowed());
        let [other_answer, refusal] = answer.items() else {
            panic!("two answers")
        };
        assert!(refusal.refused_locally());
        assert!(other_answer.charge().is_none() && !other_answer.refused_locally());
        assert_eq!(other_answer.counted_in(), CountedIn::Nowhere);
        assert_eq!(other_answer.counted_quota(&other), None, "not shown");
    }
    assert_eq!(s.counted.calls(), calls);
    let untouched = block_on(s.counted.store.peek(&other.with_cost(10))).unwrap();
    assert!(
        untouched.is_allowed(),
        "nothing was charged to the other rule"
    );
}

#[test]
fn the_table_is_bounded_and_ends_soonest_first() {
    let s = setup();
    let cache = BlockedCache::with_clock(s.counted.clone(), s.clock.clone()).max_keys(16);
    let rule = RuleId::new("login").unwrap();
    let window = |secs| Quota::fixed_window(1, Duration::from_secs(secs)).unwrap();
    let keys: Vec<Key> = (0..40).map(|n| Key::new(format!("k{n}"))).collect();
    for (n, key) in keys.iter().enumerate() {
        // Longer windows for later keys: later entries end later.
        let item = Item::new(&rule, window(60 * (n as u64 + 1)), key)
            .with_fleet_modes(FleetModes::new().with_cache_blocked(true));
        check(&cache, &[item]);
        check(&cache, &[item]);
        assert!(cache.stats().entries <= 16);
    }
    // The newest key is still remembered; the first (ending soonest) is not.
    let last = Item::new(&rule, window(60 * 40), &keys[39])
        .with_fleet_modes(FleetModes::new().with_cache_blocked(true));
    assert!(check(&cache, &[last]).items()[0].refused_locally());
    let first = Item::new(&rule, window(60), &keys[0])
        .with_fleet_modes(FleetModes::new().with_cache_blocked(true));
    let asked = s.counted.calls();
    check(&cache, &[first]);
    assert_eq!(s.counted.calls(), asked + 1, "the first was evicted");
    // Entries that have ended go first when full.
    s.clock.advance(Duration::from_secs(60 * 41 * 60));
    for key in &keys[..4] {
        let item = Item::new(&rule, window(60), key)
            .with_fleet_modes(FleetModes::new().with_cache_blocked(true));
        check(&cache, &[item]);
        check(&cache, &[item]);
    }
    assert!(cache.stats().entries <= 5);
}

#[test]
fn check_now_and_check_one_answer_alike() {
    let s = setup();
    let (rule, key) = (RuleId::new("login").unwrap(), Key::new("u1"));
    let item = Item::new(&rule, bucket(), &key)
        .with_fleet_modes(FleetModes::new().with_cache_blocked(true));
    for _ in 0..3 {
        s.cache.check_now(&[item]).unwrap().unwrap();
    }
    let now = s.cache.check_now(&[item]).unwrap().unwrap();
    assert!(now.items()[0].refused_locally());
    let one = block_on(s.cache.check_one(&item)).unwrap();
    assert!(one.refused_locally());
    assert_eq!(one.decision(), now.items()[0].decision());
    assert_eq!(s.counted.calls(), 3);
}
