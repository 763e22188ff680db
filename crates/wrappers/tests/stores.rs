//! `Stores` on in-memory stores: each item counted in the store it names, one request
//! all-or-nothing across stores, refunds and resets routed, unknown names never let through.

use std::sync::atomic::{AtomicBool, Ordering};

use futures_executor::block_on;
use tollgate_core::{
    BatchDecision, Decision, FleetModes, Item, Key, MemoryStore, Quota, Rate, Receipt, RefundError,
    RuleId, Store, StoreError, Take,
};
use tollgate_wrappers::Stores;

/// A memory store that can be made to fail every call.
#[derive(Default)]
struct Part {
    memory: MemoryStore,
    down: AtomicBool,
}

impl Part {
    fn up(&self) -> Result<(), StoreError> {
        if self.down.load(Ordering::SeqCst) {
            Err(StoreError::unavailable("connection refused"))
        } else {
            Ok(())
        }
    }
}

impl Store for Part {
    async fn check(&self, items: &[Item<'_>]) -> Result<BatchDecision, StoreError> {
        self.up()?;
        self.memory.check(items).await
    }
    fn check_now(&self, items: &[Item<'_>]) -> Option<Result<BatchDecision, StoreError>> {
        match self.up() {
            Ok(()) => self.memory.check_now(items),
            Err(error) => Some(Err(error)),
        }
    }
    async fn peek(&self, item: &Item<'_>) -> Result<Decision, StoreError> {
        self.up()?;
        self.memory.peek(item).await
    }
    async fn refund(&self, receipt: Receipt) -> Result<(), RefundError> {
        match self.up() {
            Ok(()) => self.memory.refund(receipt).await,
            Err(error) => Err(RefundError::new(error, receipt)),
        }
    }
    async fn reset(&self, rule: &RuleId, key: &Key) -> Result<(), StoreError> {
        self.up()?;
        self.memory.reset(rule, key).await
    }
}

fn stores() -> Stores<Part> {
    Stores::new(Part::default())
        .with("home", Part::default())
        .expect("a valid, new name")
}

fn home(stores: &Stores<Part>) -> &Part {
    stores.named("home").expect("a home store")
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
            user: Key::new("user-1"),
        }
    }

    /// Two logins an hour, counted in the home store.
    fn login(&self) -> Item<'_> {
        let quota = Quota::fixed_window(2, std::time::Duration::from_secs(3_600)).expect("valid");
        Item::new(&self.login, quota, &self.user)
            .with_fleet_modes(FleetModes::new().with_store("home"))
    }

    /// Ten reads an hour, counted in the default store.
    fn reads(&self) -> Item<'_> {
        let quota = Quota::token_bucket(10, Rate::per_hour(10)).expect("valid");
        Item::new(&self.reads, quota, &self.user)
    }
}

/// What a peek at `item` in `store` says would remain after one more (so 9 for an untouched
/// limit of 10).
fn remaining<S: Store>(store: &S, item: &Item<'_>) -> u64 {
    block_on(store.peek(item)).expect("peek").remaining()
}

#[test]
fn each_item_is_counted_in_the_store_it_names() {
    let (stores, rules) = (stores(), Rules::new());
    let answer = block_on(stores.check(&[rules.login(), rules.reads()])).expect("check");
    assert!(answer.is_allowed());
    assert_eq!(remaining(home(&stores), &rules.login()), 0);
    assert_eq!(remaining(stores.default_store(), &rules.reads()), 8);
    // Nothing of either rule in the other store.
    assert_eq!(remaining(stores.default_store(), &rules.login()), 1);
    assert_eq!(remaining(home(&stores), &rules.reads()), 9);
}

#[test]
fn a_refusal_in_the_home_store_refunds_the_local_charge() {
    let (stores, rules) = (stores(), Rules::new());
    for _ in 0..2 {
        assert!(
            block_on(stores.check_one(&rules.login()))
                .expect("check")
                .decision()
                .is_allowed()
        );
    }
    let answer = block_on(stores.check(&[rules.reads(), rules.login()])).expect("check");
    assert!(!answer.is_allowed());
    assert!(answer.items()[0].charge().is_none());
    assert_eq!(
        answer.items()[0].decision().remaining(),
        remaining(stores.default_store(), &rules.reads()),
        "reported as it stands"
    );
    assert_eq!(remaining(stores.default_store(), &rules.reads()), 9);
    assert_eq!(remaining(home(&stores), &rules.login()), 0);
}

#[test]
fn a_refusal_in_the_local_store_refunds_the_home_charge() {
    let (stores, rules) = (stores(), Rules::new());
    let greedy = rules.reads().with_cost(10);
    assert!(
        block_on(stores.check(&[greedy]))
            .expect("check")
            .is_allowed()
    );
    let answer = block_on(stores.check(&[rules.login(), rules.reads()])).expect("check");
    assert!(!answer.is_allowed());
    assert_eq!(remaining(home(&stores), &rules.login()), 1);
    assert_eq!(
        answer.items()[0].decision().remaining(),
        remaining(home(&stores), &rules.login())
    );
}

#[test]
fn a_failed_store_refunds_the_other_and_answers_the_error() {
    let (stores, rules) = (stores(), Rules::new());
    home(&stores).down.store(true, Ordering::SeqCst);
    let error = block_on(stores.check(&[rules.reads(), rules.login()])).expect_err("home is down");
    assert!(error.is_unavailable());
    assert_eq!(remaining(stores.default_store(), &rules.reads()), 9);
}

#[test]
fn a_refusal_wins_over_a_failed_store() {
    let (stores, rules) = (stores(), Rules::new());
    assert!(
        block_on(stores.check(&[rules.reads().with_cost(10)]))
            .expect("check")
            .is_allowed()
    );
    home(&stores).down.store(true, Ordering::SeqCst);
    let answer = block_on(stores.check(&[rules.login(), rules.reads()])).expect("a refusal");
    assert!(!answer.is_allowed());
}

#[test]
fn debt_is_kept_when_another_store_refuses() {
    let (stores, rules) = (stores(), Rules::new());
    for _ in 0..2 {
        assert!(
            block_on(stores.check(&[rules.login()]))
                .expect("check")
                .is_allowed()
        );
    }
    let spent = rules.reads().with_cost(3).with_take(Take::AsDebt);
    let answer = block_on(stores.check(&[spent, rules.login()])).expect("check");
    assert!(!answer.is_allowed());
    assert_eq!(remaining(stores.default_store(), &rules.reads()), 6);
}

#[test]
fn an_unknown_store_name_is_counted_in_the_default_store() {
    let (stores, rules) = (stores(), Rules::new());
    let lost = rules
        .login()
        .with_fleet_modes(FleetModes::new().with_store("elsewhere"));
    for _ in 0..2 {
        assert!(block_on(stores.check(&[lost])).expect("check").is_allowed());
    }
    assert!(
        !block_on(stores.check(&[lost])).expect("check").is_allowed(),
        "never let through"
    );
    assert_eq!(remaining(stores.default_store(), &rules.login()), 0);
    assert_eq!(remaining(home(&stores), &rules.login()), 1);
    let named = |name| FleetModes::new().with_store(name);
    let capabilities = stores.capabilities();
    assert!(
        capabilities
            .supports(&named("elsewhere"))
            .unwrap_err()
            .is_unknown_store()
    );
    assert!(capabilities.supports(&named("home")).is_ok());
}

#[test]
fn refunds_go_to_the_store_the_receipt_names() {
    let (stores, rules) = (stores(), Rules::new());
    let items = [rules.login(), rules.reads()];
    let answer = block_on(stores.check(&items)).expect("check");
    let receipts = answer.into_receipts(&items);
    assert_eq!(receipts[0].store_name(), Some("home"));
    for receipt in receipts {
        block_on(stores.refund(receipt)).expect("refund");
    }
    assert_eq!(remaining(home(&stores), &rules.login()), 1);
    assert_eq!(remaining(stores.default_store(), &rules.reads()), 9);
}

#[test]
fn peek_goes_to_the_items_store_and_reset_clears_every_store() {
    let (stores, rules) = (stores(), Rules::new());
    assert!(
        block_on(stores.check(&[rules.login(), rules.reads()]))
            .expect("check")
            .is_allowed()
    );
    assert_eq!(remaining(&stores, &rules.login()), 0);
    assert_eq!(remaining(&stores, &rules.reads()), 8);
    block_on(stores.reset(&rules.login, &rules.user)).expect("reset");
    block_on(stores.reset(&rules.reads, &rules.user)).expect("reset");
    assert_eq!(remaining(home(&stores), &rules.login()), 1);
    assert_eq!(remaining(stores.default_store(), &rules.reads()), 9);
}

#[test]
fn one_store_answers_at_once_and_several_are_awaited() {
    let (stores, rules) = (stores(), Rules::new());
    let now = stores
        .check_now(&[rules.login()])
        .expect("one store answers now");
    assert!(now.expect("check").is_allowed());
    assert!(stores.check_now(&[rules.login(), rules.reads()]).is_none());
}

#[test]
fn names_are_checked() {
    let error = Stores::new(MemoryStore::new())
        .with("", MemoryStore::new())
        .unwrap_err();
    assert!(error.is_invalid());
    let long = "h".repeat(65);
    assert!(
        Stores::new(MemoryStore::new())
            .with(&long, MemoryStore::new())
            .is_err()
    );
    let twice = Stores::new(MemoryStore::new())
        .with("home", MemoryStore::new())
        .and_then(|stores| stores.with("home", MemoryStore::new()));
    assert!(twice.unwrap_err().is_duplicate());
}

/// A leased rule naming the home store, checked through a `FleetStore` wrapped around the
/// `Stores`, is counted exactly in the home store (a lease would be taken from the default
/// one); inside each store, the same rule is leased there.
#[test]
fn fleet_modes_go_to_the_store_a_rule_names() {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime")
        .block_on(async {
            use tollgate_core::{Counting, LeaseSettings};
            use tollgate_wrappers::FleetStore;
            let (rule, key) = (RuleId::new("login").expect("valid"), Key::new("u1"));
            let quota = Quota::token_bucket(50, Rate::per_hour(50)).expect("valid");
            let leased = Item::new(&rule, quota, &key).with_fleet_modes(
                FleetModes::new()
                    .with_store("home")
                    .with_counting(Counting::Lease(LeaseSettings::new().max_units(10))),
            );
            let (local, home) = (MemoryStore::new(), MemoryStore::new());
            let outside = FleetStore::new(
                Stores::new(local.clone())
                    .with("home", home.clone())
                    .expect("a valid name"),
            );
            for _ in 0..3 {
                assert!(
                    outside
                        .check(&[leased])
                        .await
                        .expect("answers")
                        .is_allowed()
                );
            }
            let probe = leased.with_cost(0);
            assert_eq!(
                home.peek(&probe).await.expect("peeks").remaining(),
                47,
                "exact, at home"
            );
            assert_eq!(local.peek(&probe).await.expect("peeks").remaining(), 50);
            let (local, home) = (MemoryStore::new(), MemoryStore::new());
            let inside = Stores::new(FleetStore::new(local.clone()))
                .with("home", FleetStore::new(home.clone()))
                .expect("a valid name");
            assert!(inside.check(&[leased]).await.expect("answers").is_allowed());
            let at_home = inside.named("home").expect("home");
            at_home.background_done().await;
            // A quiet key's lease is the one unit it needs, taken by home's fleet store.
            assert_eq!(at_home.stats().leased_keys, 1, "leased at home");
            assert_eq!(home.peek(&probe).await.expect("peeks").remaining(), 49);
            assert_eq!(local.peek(&probe).await.expect("peeks").remaining(), 50);
        });
}
