//! A `FallbackStore` over a primary of several nodes (`Store::node_of`, as a Redis Cluster
//! answers it): a dead node opens the breaker of its own keys only; a request spread over
//! several nodes goes through the breaker of its set of nodes, so one touching the dead node
//! does not close the way for one spread over healthy ones; a node no call is about any more
//! (a master replaced by its replica) is forgotten, not reported failing for ever. On a manual
//! clock.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures_executor::block_on;
use tollgate_core::{
    BatchDecision, Decision, Item, Key, MemoryStore, OnStoreFailure, Quota, Receipt, RefundError,
    RuleId, Store, StoreError, StoreErrorKind,
};
use tollgate_testing::ManualClock;
use tollgate_wrappers::FallbackStore;

/// A primary of nodes `a` and `b`: a key's node is its first letter; node `b` can be down.
#[derive(Clone, Default)]
struct TwoNodes {
    memory: MemoryStore,
    b_down: Arc<AtomicBool>,
}

impl TwoNodes {
    fn fails(&self, items: &[Item<'_>]) -> bool {
        self.b_down.load(Ordering::Relaxed)
            && items.iter().any(|item| item.key().as_bytes()[1] == b'b')
    }
}

impl Store for TwoNodes {
    fn node_of(&self, item: &Item<'_>) -> Option<Arc<str>> {
        // A key's encoding is its length byte, then the part.
        let first = *item.key().as_bytes().get(1)?;
        Some(Arc::from(format!("node-{}", char::from(first))))
    }

    async fn check(&self, items: &[Item<'_>]) -> Result<BatchDecision, StoreError> {
        if self.fails(items) {
            return Err(StoreError::new(
                StoreErrorKind::Unavailable,
                "node b is down",
            ));
        }
        self.memory.check(items).await
    }

    async fn peek(&self, item: &Item<'_>) -> Result<Decision, StoreError> {
        self.memory.peek(item).await
    }

    async fn refund(&self, receipt: Receipt) -> Result<(), RefundError> {
        self.memory.refund(receipt).await
    }

    async fn reset(&self, rule: &RuleId, key: &Key) -> Result<(), StoreError> {
        self.memory.reset(rule, key).await
    }
}

const THRESHOLD: u32 = 3;

fn guarded(primary: TwoNodes, clock: &ManualClock) -> FallbackStore<TwoNodes, ManualClock> {
    FallbackStore::builder(primary)
        .failure_threshold(THRESHOLD)
        .cool_down(Duration::from_millis(500))
        .clock(clock.clone())
        .build()
}

/// Whether a request on `keys` (a rule failing closed on each) is answered by the primary.
fn answered(store: &FallbackStore<TwoNodes, ManualClock>, keys: &[&str]) -> bool {
    let rule = RuleId::new("closed").expect("id");
    let quota = Quota::fixed_window(1_000_000, Duration::from_secs(3_600)).expect("valid");
    let keys: Vec<Key> = keys.iter().map(Key::new).collect();
    let items: Vec<Item<'_>> = keys
        .iter()
        .map(|key| Item::new(&rule, quota, key).with_store_failure(OnStoreFailure::Closed))
        .collect();
    block_on(store.check(&items)).is_ok()
}

#[test]
fn a_dead_node_opens_its_own_breaker_and_its_sets_only() {
    let clock = ManualClock::new(tollgate_testing::conformance::START);
    let primary = TwoNodes::default();
    let store = guarded(primary.clone(), &clock);
    primary.b_down.store(true, Ordering::Relaxed);
    for _ in 0..THRESHOLD {
        assert!(!answered(&store, &["b1"]), "node b fails");
        assert!(
            !answered(&store, &["a1", "b2"]),
            "so does a request touching it"
        );
    }
    assert_eq!(
        store.failing_nodes(),
        [Arc::from("node-a+node-b"), Arc::from("node-b")],
        "node b, and the set of nodes a and b"
    );
    for _ in 0..10 {
        assert!(
            answered(&store, &["a1"]),
            "node a's keys are decided as usual"
        );
        assert!(
            answered(&store, &["a1", "a2"]),
            "requests on node a alone too"
        );
    }
    assert_eq!(store.stats().primary_failures, u64::from(2 * THRESHOLD));
}

#[test]
fn a_node_no_call_is_about_any_more_is_forgotten() {
    let clock = ManualClock::new(tollgate_testing::conformance::START);
    let primary = TwoNodes::default();
    let store = guarded(primary.clone(), &clock);
    primary.b_down.store(true, Ordering::Relaxed);
    for _ in 0..THRESHOLD {
        assert!(!answered(&store, &["b1"]));
    }
    assert_eq!(store.failing_nodes(), [Arc::from("node-b")]);
    // Its keys now live elsewhere: calls are only about node a from here on.
    clock.advance(Duration::from_secs(9));
    assert!(answered(&store, &["a1"]));
    assert_eq!(
        store.failing_nodes(),
        [Arc::from("node-b")],
        "kept for a while (its probes come first)"
    );
    clock.advance(Duration::from_secs(2));
    assert!(answered(&store, &["a1"]));
    assert!(store.failing_nodes().is_empty(), "forgotten");
    assert!(!store.stats().breaker_open);
}
