//! The store-failure wrapper: each rule's policy when the primary fails, hangs or is cut off by
//! the circuit breaker, and the counters that tell the application about it.
//!
//! The primary here is a [`MemoryStore`] behind a switch that makes it fail or hang on demand;
//! real Redis faults are tested with the Redis store. Time never passes for real: the breaker
//! runs on a [`ManualClock`] and timeouts on paused Tokio time.

use std::future::{Future, pending};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::Duration;

use futures_executor::block_on;
use tollgate_core::{
    BatchDecision, CountedIn, Decision, Item, ItemDecision, Key, MemoryStore, Mode, OnStoreFailure,
    Quota, Rate, Receipt, RefundError, RefundNow, RefusalReason, RuleId, Store, StoreError,
    Timestamp,
};
use tollgate_testing::{EventRecorder, ManualClock};
use tollgate_wrappers::{FallbackStats, FallbackStore};

// ---------------------------------------------------------------------------------------------
// A primary that can be told to fail or hang.

const HEALTHY: u8 = 0;
const FAILING: u8 = 1;
const HANGING: u8 = 2;

/// A [`MemoryStore`] that answers, fails or never answers, as the test says, and counts the calls
/// it gets. Like a remote store, it answers `check_now` only when built with `answers_now`.
#[derive(Clone)]
struct Switchable {
    inner: MemoryStore<ManualClock>,
    mode: Arc<AtomicU8>,
    calls: Arc<AtomicU64>,
    answers_now: bool,
    /// What a failing call says (tests that read logs make theirs recognisable).
    failure: &'static str,
}

impl Switchable {
    fn new(clock: &ManualClock) -> Self {
        Switchable {
            inner: MemoryStore::builder().clock(clock.clone()).build(),
            mode: Arc::new(AtomicU8::new(HEALTHY)),
            calls: Arc::new(AtomicU64::new(0)),
            answers_now: false,
            failure: "connection refused",
        }
    }

    fn failing_with(mut self, failure: &'static str) -> Self {
        self.failure = failure;
        self
    }

    fn answering_now(mut self) -> Self {
        self.answers_now = true;
        self
    }

    fn heal(&self) {
        self.mode.store(HEALTHY, Ordering::SeqCst);
    }

    fn fail(&self) {
        self.mode.store(FAILING, Ordering::SeqCst);
    }

    fn hang(&self) {
        self.mode.store(HANGING, Ordering::SeqCst);
    }

    fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }

    /// Counts a call and answers it as the switch says; `healthy` runs only when healthy.
    fn answer<T: Send>(
        &self,
        healthy: impl FnOnce() -> Result<T, StoreError>,
    ) -> impl Future<Output = Result<T, StoreError>> + Send {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let answer = match self.mode.load(Ordering::SeqCst) {
            HEALTHY => Some(healthy()),
            FAILING => Some(Err(StoreError::unavailable(self.failure))),
            _ => None,
        };
        async move {
            match answer {
                Some(answer) => answer,
                None => pending().await,
            }
        }
    }
}

impl Store for Switchable {
    fn check(
        &self,
        items: &[Item<'_>],
    ) -> impl Future<Output = Result<BatchDecision, StoreError>> + Send {
        self.answer(|| block_on(self.inner.check(items)))
    }

    fn check_now(&self, items: &[Item<'_>]) -> Option<Result<BatchDecision, StoreError>> {
        if !self.answers_now || self.mode.load(Ordering::SeqCst) == HANGING {
            return None;
        }
        Some(block_on(self.answer(|| block_on(self.inner.check(items)))))
    }

    fn peek(&self, item: &Item<'_>) -> impl Future<Output = Result<Decision, StoreError>> + Send {
        self.answer(|| block_on(self.inner.peek(item)))
    }

    fn refund(&self, receipt: Receipt) -> impl Future<Output = Result<(), RefundError>> + Send {
        let healthy = self.answer(|| Ok(()));
        async move {
            match healthy.await {
                Ok(()) => self.inner.refund(receipt).await,
                Err(error) => Err(RefundError::new(error, receipt)),
            }
        }
    }

    fn reset(
        &self,
        rule: &RuleId,
        key: &Key,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        self.answer(|| block_on(self.inner.reset(rule, key)))
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers.

const THRESHOLD: u32 = 3;
const COOL_DOWN: Duration = Duration::from_secs(1);
const TIMEOUT: Duration = Duration::from_millis(5);

struct Setup {
    clock: ManualClock,
    primary: Switchable,
    store: FallbackStore<Switchable, ManualClock>,
}

fn setup() -> Setup {
    setup_with(|primary| primary)
}

fn setup_with(primary: impl FnOnce(Switchable) -> Switchable) -> Setup {
    let clock = ManualClock::new(Timestamp::from_secs(1_700_000_000));
    let primary = primary(Switchable::new(&clock));
    let store = FallbackStore::builder(primary.clone())
        .timeout(TIMEOUT)
        .failure_threshold(THRESHOLD)
        .cool_down(COOL_DOWN)
        .clock(clock.clone())
        .build();
    Setup {
        clock,
        primary,
        store,
    }
}

fn rule(id: &str) -> RuleId {
    RuleId::new(id).expect("test rule ids are valid")
}

fn per_hour(limit: u64) -> Quota {
    Quota::fixed_window(limit, Duration::from_secs(3600)).expect("test quotas are valid")
}

async fn check<S: Store>(store: &S, items: &[Item<'_>]) -> BatchDecision {
    store.check(items).await.expect("the store answers")
}

async fn allowed<S: Store>(store: &S, item: Item<'_>) -> bool {
    check(store, &[item]).await.is_allowed()
}

async fn decide<S: Store>(store: &S, item: Item<'_>) -> ItemDecision {
    check(store, &[item])
        .await
        .into_items()
        .next()
        .expect("one answer")
}

// ---------------------------------------------------------------------------------------------
// Each policy.

#[tokio::test]
async fn open_allows_without_charging() {
    let Setup { primary, store, .. } = setup();
    let (id, key) = (rule("reads"), Key::new("user77"));
    let item = Item::new(&id, per_hour(2), &key).with_store_failure(OnStoreFailure::Open);
    primary.fail();
    for _ in 0..10 {
        let answer = decide(&store, item).await;
        assert!(answer.decision().is_allowed());
        assert_eq!(answer.charge(), None, "open answers charge nothing");
        assert_eq!(answer.decision().limit(), 2);
        assert_eq!(answer.decision().remaining(), 2);
        assert_eq!(
            answer.counted_in(),
            CountedIn::Nowhere,
            "nothing to disclose"
        );
    }
    assert_eq!(store.local().stats().keys, 0, "nothing counted locally");
    assert_eq!(
        block_on(primary.inner.peek(&item.with_cost(0)))
            .unwrap()
            .remaining(),
        2
    );
    assert_eq!(store.stats().fallback_checks, 10);
}

#[tokio::test]
async fn clones_share_one_breaker_and_one_local_count() {
    let Setup { primary, store, .. } = setup();
    let clone = store.clone();
    let (id, key) = (rule("sms"), Key::new("+91-98xxxxxx02"));
    let item = Item::new(&id, per_hour(2), &key).with_store_failure(OnStoreFailure::Local);
    assert_eq!(
        decide(&clone, item).await.counted_in(),
        CountedIn::Store,
        "healthy: the primary counts"
    );
    primary.fail();
    assert!(allowed(&clone, item).await);
    assert!(
        allowed(&store, item).await,
        "one local count: the second use"
    );
    assert!(
        !allowed(&clone, item).await,
        "the third is refused through either clone"
    );
    for _ in 0..THRESHOLD {
        let _ = check(&clone, &[item]).await;
    }
    assert!(
        store.stats().breaker_open,
        "a failure through a clone counts for both"
    );
    assert_eq!(store.stats(), clone.stats());
}

#[tokio::test]
async fn open_within_enforces_its_local_quota() {
    let Setup { primary, store, .. } = setup();
    let (id, key) = (rule("reads"), Key::new("user77"));
    let local_limit = per_hour(2);
    let item = Item::new(&id, per_hour(100), &key)
        .with_store_failure(OnStoreFailure::OpenWithin(local_limit));
    primary.fail();
    for remaining in [1, 0] {
        let answer = decide(&store, item).await;
        assert!(answer.decision().is_allowed());
        assert_eq!(answer.decision().limit(), 2, "the local quota's decision");
        assert_eq!(answer.decision().remaining(), remaining);
        assert_eq!(answer.charge(), None, "no receipt for a local-quota charge");
        assert_eq!(answer.counted_in(), CountedIn::LocalFallback);
    }
    let third = decide(&store, item).await;
    assert_eq!(
        third.decision().refusal(),
        Some(RefusalReason::LimitReached)
    );
    assert!(third.decision().retry_after() > Duration::ZERO);
    let other_key = Key::new("user78");
    let other = Item::new(&id, per_hour(100), &other_key)
        .with_store_failure(OnStoreFailure::OpenWithin(local_limit));
    assert!(
        allowed(&store, other).await,
        "other callers have their own count"
    );
}

#[tokio::test]
async fn local_enforces_the_same_rule_in_local_memory() {
    let Setup { primary, store, .. } = setup();
    let (id, key) = (rule("sms-codes"), Key::new("+91-98xxxxxx01"));
    let item = Item::new(&id, per_hour(3), &key).with_store_failure(OnStoreFailure::Local);
    primary.fail();
    for remaining in [2, 1, 0] {
        let answer = decide(&store, item).await;
        assert!(answer.decision().is_allowed());
        assert_eq!(answer.decision().remaining(), remaining);
        assert!(answer.charge().is_some(), "a local charge has a receipt");
        assert_eq!(answer.counted_in(), CountedIn::LocalFallback);
    }
    let fourth = decide(&store, item).await;
    assert_eq!(
        fourth.decision().refusal(),
        Some(RefusalReason::LimitReached)
    );
    assert_eq!(fourth.decision().limit(), 3);
    assert!(!check(&store, &[item]).await.is_allowed());
    // Peeks fall back to the same local count.
    assert!(!store.peek(&item).await.unwrap().is_allowed());
    // The primary never saw a charge.
    primary.heal();
    assert_eq!(
        block_on(primary.inner.peek(&item.with_cost(0)))
            .unwrap()
            .remaining(),
        3
    );
}

#[tokio::test]
async fn closed_returns_the_store_error_never_a_refusal() {
    let Setup { primary, store, .. } = setup();
    let (id, key) = (rule("login"), Key::new("user77"));
    let item = Item::new(&id, per_hour(1), &key).with_store_failure(OnStoreFailure::Closed);
    primary.fail();
    let error = store.check(&[item]).await.unwrap_err();
    assert!(error.is_unavailable());
    assert!(store.check_one(&item).await.unwrap_err().is_unavailable());
    assert!(store.peek(&item).await.unwrap_err().is_unavailable());
    // Once the breaker is open the error still comes, now without calling the primary.
    assert!(store.stats().breaker_open);
    let error = store.check(&[item]).await.unwrap_err();
    assert!(error.is_unavailable(), "{error}");
    let stats = store.stats();
    assert_eq!(stats.failed_closed, 4);
    assert_eq!(stats.fallback_checks, 4);
}

#[tokio::test(start_paused = true)]
async fn closed_on_a_hanging_primary_is_a_timeout_error() {
    let Setup { primary, store, .. } = setup();
    let (id, key) = (rule("login"), Key::new("user77"));
    let item = Item::new(&id, per_hour(1), &key).with_store_failure(OnStoreFailure::Closed);
    primary.hang();
    let error = store.check(&[item]).await.unwrap_err();
    assert!(error.is_timeout(), "{error}");
    assert!(!error.is_unavailable());
}

// ---------------------------------------------------------------------------------------------
// Batches.

#[tokio::test]
async fn a_mixed_batch_is_all_or_nothing_across_local_counts() {
    let Setup { primary, store, .. } = setup();
    let (open_id, local_id, within_id) = (rule("reads"), rule("posts"), rule("search"));
    let key = Key::new("user77");
    let open = Item::new(&open_id, per_hour(10), &key).with_store_failure(OnStoreFailure::Open);
    let local = Item::new(&local_id, per_hour(1), &key).with_store_failure(OnStoreFailure::Local);
    let within = Item::new(&within_id, per_hour(10), &key)
        .with_store_failure(OnStoreFailure::OpenWithin(per_hour(2)));
    primary.fail();

    let first = check(&store, &[open, local, within]).await;
    assert!(first.is_allowed());
    let limits: Vec<_> = first
        .items()
        .iter()
        .map(|answer| (answer.decision().limit(), answer.decision().remaining()))
        .collect();
    assert_eq!(limits, [(10, 10), (1, 0), (2, 1)], "answers in item order");

    let second = check(&store, &[open, local, within]).await;
    assert!(!second.is_allowed(), "the local rule is used up");
    assert_eq!(
        second
            .refusing(&[open, local, within])
            .map(|(item, _)| item.rule()),
        Some(&local_id)
    );
    // All or nothing: the refused batch did not charge the local-quota item.
    assert!(allowed(&store, within).await, "second of two");
    assert!(!allowed(&store, within).await, "two of two used");
}

#[tokio::test]
async fn a_batch_with_an_enforcing_closed_item_fails_and_charges_nothing() {
    let Setup { primary, store, .. } = setup();
    let (local_id, closed_id) = (rule("posts"), rule("payments"));
    let key = Key::new("user77");
    let local = Item::new(&local_id, per_hour(1), &key).with_store_failure(OnStoreFailure::Local);
    let closed =
        Item::new(&closed_id, per_hour(1), &key).with_store_failure(OnStoreFailure::Closed);
    primary.fail();
    assert!(store.check(&[local, closed]).await.is_err());
    assert!(
        allowed(&store, local).await,
        "the failed batch charged nothing locally"
    );
}

#[tokio::test]
async fn shadow_items_never_cause_an_error() {
    let Setup { primary, store, .. } = setup();
    let (shadow_id, local_id, open_id) = (rule("otp-new"), rule("otp-shadow-local"), rule("reads"));
    let key = Key::new("user77");
    let shadow_closed = Item::new(&shadow_id, per_hour(1), &key)
        .with_mode(Mode::Shadow)
        .with_store_failure(OnStoreFailure::Closed);
    let shadow_local = Item::new(&local_id, per_hour(1), &key)
        .with_mode(Mode::Shadow)
        .with_store_failure(OnStoreFailure::Local);
    let open = Item::new(&open_id, per_hour(5), &key);
    primary.fail();
    for attempt in 0..3 {
        let answer = check(&store, &[shadow_closed, shadow_local, open]).await;
        assert!(answer.is_allowed(), "shadow items never stop a request");
        let would_refuse = !answer.items()[1].decision().is_allowed();
        assert_eq!(would_refuse, attempt > 0, "the shadow local count reports");
    }
    assert!(store.check_one(&shadow_closed).await.is_ok());
    assert!(store.peek(&shadow_closed).await.is_ok());
    assert_eq!(store.stats().failed_closed, 0);
}

#[tokio::test]
async fn a_store_error_is_never_a_refusal() {
    let Setup { primary, store, .. } = setup();
    let key = Key::new("user77");
    let (open_id, closed_id) = (rule("reads"), rule("login"));
    let open = Item::new(&open_id, per_hour(1), &key).with_store_failure(OnStoreFailure::Open);
    let closed =
        Item::new(&closed_id, per_hour(1), &key).with_store_failure(OnStoreFailure::Closed);
    for round in 0..20 {
        if round % 7 == 3 {
            primary.heal();
        } else {
            primary.fail();
        }
        for item in [open, closed] {
            match store.check(&[item]).await {
                Ok(answer) if round % 7 != 3 => {
                    assert!(
                        answer.is_allowed(),
                        "an open rule is never refused by an outage"
                    );
                }
                Ok(_) => {}
                Err(error) => {
                    assert_eq!(item.on_store_failure(), OnStoreFailure::Closed);
                    assert!(error.is_unavailable());
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Timeouts and the circuit breaker.

#[tokio::test(start_paused = true)]
async fn a_hanging_primary_is_given_up_on_after_the_timeout() {
    let Setup { primary, store, .. } = setup();
    let (id, key) = (rule("reads"), Key::new("user77"));
    let item = Item::new(&id, per_hour(1), &key);
    primary.hang();
    let started = tokio::time::Instant::now();
    assert!(allowed(&store, item).await);
    assert_eq!(started.elapsed(), TIMEOUT);
    let stats = store.stats();
    assert_eq!((stats.primary_failures, stats.timeouts), (1, 1));

    // Every call waits at most the timeout; once the breaker opens, none waits at all.
    for _ in 1..THRESHOLD {
        let started = tokio::time::Instant::now();
        assert!(store.peek(&item).await.is_ok());
        assert_eq!(started.elapsed(), TIMEOUT);
    }
    assert!(store.stats().breaker_open);
    let started = tokio::time::Instant::now();
    assert!(allowed(&store, item).await);
    assert_eq!(started.elapsed(), Duration::ZERO);
    assert_eq!(store.stats().timeouts, u64::from(THRESHOLD));
}

#[tokio::test]
async fn the_breaker_opens_stops_calling_probes_and_closes() {
    let Setup {
        clock,
        primary,
        store,
    } = setup();
    let (id, key) = (rule("reads"), Key::new("user77"));
    let item = Item::new(&id, per_hour(100), &key).with_store_failure(OnStoreFailure::Local);
    primary.fail();
    for _ in 0..THRESHOLD {
        assert!(allowed(&store, item).await);
    }
    assert_eq!(primary.calls(), u64::from(THRESHOLD));
    assert!(store.stats().breaker_open);

    // Open: the primary is not called, however many requests come.
    for _ in 0..10 {
        assert!(allowed(&store, item).await);
    }
    assert_eq!(primary.calls(), u64::from(THRESHOLD), "no calls while open");
    clock.advance(COOL_DOWN - Duration::from_millis(1));
    assert!(allowed(&store, item).await);
    assert_eq!(primary.calls(), u64::from(THRESHOLD), "still cooling down");

    // A failed probe keeps it open for another cool-down.
    clock.advance(Duration::from_millis(1));
    assert!(allowed(&store, item).await);
    assert_eq!(primary.calls(), u64::from(THRESHOLD) + 1, "one probe");
    assert!(allowed(&store, item).await);
    assert_eq!(primary.calls(), u64::from(THRESHOLD) + 1);
    assert!(store.stats().breaker_open);

    // A successful probe closes it; calls go to the primary again.
    primary.heal();
    clock.advance(COOL_DOWN);
    let probe = decide(&store, item).await;
    assert_eq!(probe.decision().remaining(), 99, "the primary counted it");
    assert_eq!(primary.calls(), u64::from(THRESHOLD) + 2);
    assert!(!store.stats().breaker_open);
    assert!(allowed(&store, item).await);
    assert_eq!(primary.calls(), u64::from(THRESHOLD) + 3);

    let stats = store.stats();
    assert_eq!(stats.primary_failures, u64::from(THRESHOLD) + 1);
    assert_eq!(stats.timeouts, 0);
    assert_eq!(stats.short_circuited, 12);
    assert_eq!(stats.fallback_checks, u64::from(THRESHOLD) + 13);
    assert_eq!(stats.breaker_opened, 1);
    assert_eq!(stats.failed_probes, 1);
    assert_eq!(stats.breaker_closed, 1);
    assert!(!stats.breaker_open);
    assert_eq!((stats.failed_closed, stats.local_refunds), (0, 0));
}

#[tokio::test]
async fn falling_back_opening_and_closing_are_logged_on_the_store_target() {
    let recorder = EventRecorder::global();
    let Setup {
        clock,
        primary,
        store,
    } = setup_with(|primary| primary.failing_with("refused for the logging test"));
    let (id, key) = (rule("logged"), Key::new("user77"));
    let item = Item::new(&id, per_hour(100), &key).with_store_failure(OnStoreFailure::Local);
    primary.fail();
    for _ in 0..THRESHOLD {
        assert!(allowed(&store, item).await);
    }
    primary.heal();
    clock.advance(COOL_DOWN);
    assert!(allowed(&store, item).await);
    assert!(store.stats().breaker_closed >= 1);

    let events = recorder.on_target("tollgate::store");
    let ours = |level: tracing::Level, words: &str| {
        events.iter().any(|event| {
            event.level == level
                && event
                    .field("message")
                    .is_some_and(|message| message.contains(words))
                && event
                    .field("error")
                    .is_none_or(|error| error.contains("refused for the logging test"))
        })
    };
    assert!(
        ours(
            tracing::Level::WARN,
            "rules follow their store-failure policy"
        ),
        "{events:#?}"
    );
    assert!(
        ours(tracing::Level::ERROR, "circuit breaker open"),
        "{events:#?}"
    );
    assert!(
        ours(tracing::Level::INFO, "circuit breaker closed"),
        "{events:#?}"
    );
}

#[tokio::test]
async fn failures_must_be_in_a_row_to_open_the_breaker() {
    let Setup { primary, store, .. } = setup();
    let (id, key) = (rule("reads"), Key::new("user77"));
    let item = Item::new(&id, per_hour(100), &key);
    for _ in 0..5 {
        primary.fail();
        for _ in 1..THRESHOLD {
            assert!(allowed(&store, item).await);
        }
        primary.heal();
        assert!(allowed(&store, item).await);
    }
    let stats = store.stats();
    assert!(!stats.breaker_open);
    assert_eq!(stats.breaker_opened, 0);
    assert_eq!(stats.primary_failures, 5 * u64::from(THRESHOLD - 1));
}

// ---------------------------------------------------------------------------------------------
// check_now, refunds, resets.

#[tokio::test]
async fn check_now_forwards_answers_at_once_while_open_and_leaves_probes_to_check() {
    let Setup {
        clock,
        primary,
        store,
    } = setup_with(Switchable::answering_now);
    let (id, key) = (rule("posts"), Key::new("user77"));
    let item = Item::new(&id, per_hour(2), &key).with_store_failure(OnStoreFailure::Local);

    let forwarded = store
        .check_now(&[item])
        .expect("the primary answers at once");
    assert_eq!(forwarded.unwrap().items()[0].decision().remaining(), 1);
    assert_eq!(primary.calls(), 1);

    primary.fail();
    for _ in 0..THRESHOLD {
        let answer = store
            .check_now(&[item])
            .expect("a failure falls back at once");
        assert!(answer.is_ok());
    }
    assert!(store.stats().breaker_open);
    let calls = primary.calls();
    let answer = store
        .check_now(&[item])
        .expect("open: local memory answers at once");
    assert!(!answer.unwrap().is_allowed(), "local limit of 2 used up");
    assert_eq!(primary.calls(), calls);

    clock.advance(COOL_DOWN);
    assert!(store.check_now(&[item]).is_none(), "a probe is due");
    primary.heal();
    assert!(check(&store, &[item]).await.is_allowed(), "the probe");
    assert!(!store.stats().breaker_open);
}

#[tokio::test]
async fn check_now_is_none_for_a_primary_that_must_be_awaited() {
    let Setup { primary, store, .. } = setup();
    let (id, key) = (rule("posts"), Key::new("user77"));
    let item = Item::new(&id, per_hour(2), &key);
    assert!(store.check_now(&[item]).is_none());
    let charged = block_on(primary.inner.check(&[item])).unwrap();
    let receipt = charged.into_receipts(&[item]).pop().unwrap();
    assert!(matches!(store.refund_now(receipt), RefundNow::Later(_)));
    primary.fail();
    for _ in 0..THRESHOLD {
        assert!(allowed(&store, item).await);
    }
    assert!(store.check_now(&[item]).is_some(), "open: answered at once");
}

#[tokio::test]
async fn a_local_charge_is_refunded_locally_during_the_outage() {
    let Setup { primary, store, .. } = setup();
    let (id, key) = (rule("login-failures"), Key::new("user77"));
    let item = Item::new(&id, per_hour(10), &key).with_store_failure(OnStoreFailure::Local);
    primary.fail();
    let items = [item];
    let answer = check(&store, &items).await;
    let mut receipts = answer.into_receipts(&items);
    assert_eq!(receipts.len(), 1);
    // Before the breaker opens: the primary fails the refund, so it is made locally.
    store.refund(receipts.pop().unwrap()).await.unwrap();
    assert_eq!(
        store.peek(&item.with_cost(0)).await.unwrap().remaining(),
        10
    );

    // With the breaker open, refund_now makes it locally at once.
    for _ in 0..THRESHOLD {
        check(&store, &items).await;
    }
    assert!(store.stats().breaker_open);
    let before = store.peek(&item.with_cost(0)).await.unwrap().remaining();
    let answer = check(&store, &items).await;
    let calls = primary.calls();
    let refunded = store.refund_now(answer.into_receipts(&items).pop().unwrap());
    assert!(
        matches!(refunded, RefundNow::Done(Ok(()))),
        "open: refunded at once"
    );
    assert_eq!(primary.calls(), calls);
    assert_eq!(
        store.peek(&item.with_cost(0)).await.unwrap().remaining(),
        before
    );
    assert_eq!(store.stats().local_refunds, 2);
}

#[tokio::test]
async fn refunds_go_to_the_primary_while_it_answers() {
    let Setup { primary, store, .. } = setup();
    let (id, key) = (rule("login-failures"), Key::new("user77"));
    let item = Item::new(&id, per_hour(3), &key).with_store_failure(OnStoreFailure::Local);
    let items = [item];
    let answer = check(&store, &items).await;
    assert_eq!(
        block_on(primary.inner.peek(&item.with_cost(0)))
            .unwrap()
            .remaining(),
        2
    );
    let receipt = answer.into_receipts(&items).pop().unwrap();
    store.refund(receipt).await.unwrap();
    assert_eq!(
        block_on(primary.inner.peek(&item.with_cost(0)))
            .unwrap()
            .remaining(),
        3
    );
    assert_eq!(store.stats().local_refunds, 0);
}

#[tokio::test]
async fn reset_clears_local_memory_and_the_primary() {
    let Setup {
        clock,
        primary,
        store,
    } = setup();
    let (id, key) = (rule("posts"), Key::new("user77"));
    let item = Item::new(&id, per_hour(1), &key).with_store_failure(OnStoreFailure::Local);
    assert!(allowed(&store, item).await);
    primary.fail();
    assert!(allowed(&store, item).await, "counted locally: first");
    assert!(!allowed(&store, item).await, "counted locally: used up");

    // The primary is down: local memory is cleared, and the error says the primary was not.
    assert!(store.reset(&id, &key).await.unwrap_err().is_unavailable());
    assert!(allowed(&store, item).await, "cleared locally");

    assert!(store.stats().breaker_open);
    primary.heal();
    clock.advance(COOL_DOWN);
    assert!(
        !allowed(&store, item).await,
        "the primary still counts its charge"
    );
    assert!(!store.stats().breaker_open, "that was the probe");
    store.reset(&id, &key).await.unwrap();
    assert!(allowed(&store, item).await, "cleared in the primary");
}

#[tokio::test]
async fn check_one_falls_back_like_check() {
    let Setup { primary, store, .. } = setup();
    let (id, key) = (rule("posts"), Key::new("user77"));
    let item = Item::new(&id, per_hour(1), &key).with_store_failure(OnStoreFailure::Local);
    primary.fail();
    assert!(
        store
            .check_one(&item)
            .await
            .unwrap()
            .decision()
            .is_allowed()
    );
    let second = store.check_one(&item).await.unwrap();
    assert_eq!(
        second.decision().refusal(),
        Some(RefusalReason::LimitReached)
    );
}

#[tokio::test]
async fn a_healthy_primary_is_used_and_nothing_is_counted() {
    let Setup { primary, store, .. } = setup();
    let (id, key) = (rule("posts"), Key::new("user77"));
    let quota = Quota::token_bucket(5, Rate::per_second(1)).unwrap();
    let item = Item::new(&id, quota, &key).with_store_failure(OnStoreFailure::Local);
    for _ in 0..5 {
        assert!(allowed(&store, item).await);
    }
    assert!(!allowed(&store, item).await);
    assert_eq!(primary.calls(), 6);
    assert_eq!(store.local().stats().keys, 0);
    assert_eq!(store.stats(), FallbackStats::default());
}

// ---------------------------------------------------------------------------------------------
// Loud fall-back.

/// How many `tollgate::fallback` events at `level` name `rule`.
fn fallback_events(recorder: &EventRecorder, rule: &str, level: tracing::Level) -> usize {
    recorder
        .on_target("tollgate::fallback")
        .into_iter()
        .filter(|event| event.level == level && event.field("rule") == Some(rule))
        .count()
}

#[tokio::test]
async fn a_rule_falling_back_is_announced_once_a_minute_and_its_recovery_once() {
    let recorder = EventRecorder::global();
    let Setup {
        clock,
        primary,
        store,
    } = setup();
    let (id, key) = (rule("loud-fallback"), Key::new("user77"));
    let item = Item::new(&id, per_hour(1000), &key).with_store_failure(OnStoreFailure::Local);
    let about_us = |level| fallback_events(recorder, "loud-fallback", level);
    primary.fail();
    for _ in 0..20 {
        assert!(allowed(&store, item).await);
    }
    assert_eq!(
        about_us(tracing::Level::WARN),
        1,
        "one warning, not one per request"
    );
    assert_eq!(store.falling_back(), std::slice::from_ref(&id));
    clock.advance(Duration::from_secs(30));
    assert!(allowed(&store, item).await);
    assert_eq!(
        about_us(tracing::Level::WARN),
        1,
        "not again within the minute"
    );
    clock.advance(Duration::from_secs(31));
    assert!(allowed(&store, item).await);
    assert_eq!(about_us(tracing::Level::WARN), 2, "again after a minute");
    let warning = recorder
        .on_target("tollgate::fallback")
        .into_iter()
        .find(|event| event.field("rule") == Some("loud-fallback"))
        .expect("the warning");
    assert_eq!(warning.field("policy"), Some("local"));

    primary.heal();
    clock.advance(COOL_DOWN);
    assert!(allowed(&store, item).await);
    assert_eq!(
        about_us(tracing::Level::INFO),
        1,
        "the recovery is announced"
    );
    assert!(store.falling_back().is_empty());
    assert!(allowed(&store, item).await);
    assert_eq!(about_us(tracing::Level::INFO), 1, "once");
}

/// Every metric the recorder holds, by `name{label=value,...}`.
#[cfg(feature = "metrics")]
fn metric_values(
    snapshotter: &metrics_util::debugging::Snapshotter,
) -> std::collections::HashMap<String, metrics_util::debugging::DebugValue> {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let labels: Vec<String> = key
                .key()
                .labels()
                .map(|label| format!("{}={}", label.key(), label.value()))
                .collect();
            (
                format!("{}{{{}}}", key.key().name(), labels.join(",")),
                value,
            )
        })
        .collect()
}

#[cfg(feature = "metrics")]
#[test]
fn the_store_wrapper_records_latency_errors_the_breaker_and_fall_backs() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime");
    metrics::with_local_recorder(&recorder, || {
        let clock = ManualClock::new(Timestamp::from_secs(1_700_000_000));
        let primary = Switchable::new(&clock);
        let store = FallbackStore::builder(primary.clone())
            .timeout(TIMEOUT)
            .failure_threshold(THRESHOLD)
            .cool_down(COOL_DOWN)
            .clock(clock.clone())
            .metrics("redis")
            .build();
        let (id, key) = (rule("metered"), Key::new("user77"));
        let item = Item::new(&id, per_hour(1000), &key).with_store_failure(OnStoreFailure::Open);
        runtime.block_on(async {
            assert!(allowed(&store, item).await);
            primary.fail();
            for _ in 0..5 {
                assert!(allowed(&store, item).await);
            }
        });
        let values = metric_values(&snapshotter);
        let counter = |name: &str| match values.get(name) {
            Some(DebugValue::Counter(value)) => *value,
            other => panic!("{name}: {other:?} in {values:#?}"),
        };
        let gauge = |name: &str| match values.get(name) {
            Some(DebugValue::Gauge(value)) => value.into_inner(),
            other => panic!("{name}: {other:?} in {values:#?}"),
        };
        // Three calls failed before the breaker opened; two more were never sent.
        assert_eq!(
            counter("tollgate_store_errors_total{store=redis,kind=unavailable}"),
            3
        );
        assert_eq!(
            counter("tollgate_store_errors_total{store=redis,kind=timeout}"),
            0
        );
        assert_eq!(gauge("tollgate_breaker_open{store=redis}"), 1.0);
        assert_eq!(
            counter("tollgate_fallback_decisions_total{store=redis,rule=metered,policy=open}"),
            5
        );
        assert_eq!(
            gauge("tollgate_fallback_active{store=redis,rule=metered}"),
            1.0
        );
        match values.get("tollgate_store_seconds{store=redis}") {
            Some(DebugValue::Histogram(samples)) => {
                assert_eq!(samples.len(), 4, "one per call sent")
            }
            other => panic!("{other:?}"),
        }

        primary.heal();
        clock.advance(COOL_DOWN);
        runtime.block_on(async { assert!(allowed(&store, item).await) });
        let after = metric_values(&snapshotter);
        let gauge = |name: &str| match after.get(name) {
            Some(DebugValue::Gauge(value)) => value.into_inner(),
            other => panic!("{name}: {other:?} in {after:#?}"),
        };
        assert_eq!(gauge("tollgate_breaker_open{store=redis}"), 0.0);
        assert_eq!(
            gauge("tollgate_fallback_active{store=redis,rule=metered}"),
            0.0
        );
    });
}

#[tokio::test]
async fn a_flapping_primary_is_announced_once_a_minute_and_a_closed_call_names_only_its_closed_rule()
 {
    let recorder = EventRecorder::global();
    let Setup {
        clock,
        primary,
        store,
    } = setup();
    let (id, key) = (rule("flapping"), Key::new("user77"));
    let item = Item::new(&id, per_hour(1000), &key).with_store_failure(OnStoreFailure::Local);
    let warnings = || fallback_events(recorder, "flapping", tracing::Level::WARN);
    for _ in 0..50 {
        primary.fail();
        assert!(allowed(&store, item).await);
        primary.heal();
        assert!(allowed(&store, item).await);
    }
    assert_eq!(warnings(), 1, "fifty flaps within a minute, one warning");

    // A call failed closed: only the closed rule was answered (by the 503), not its neighbours.
    let (open_id, closed_id) = (rule("neighbour"), rule("otp"));
    let open = Item::new(&open_id, per_hour(10), &key).with_store_failure(OnStoreFailure::Open);
    let closed =
        Item::new(&closed_id, per_hour(10), &key).with_store_failure(OnStoreFailure::Closed);
    clock.advance(Duration::from_secs(1));
    primary.fail();
    assert!(store.check(&[open, closed]).await.is_err());
    assert_eq!(store.falling_back(), std::slice::from_ref(&closed_id));
}

// ---------------------------------------------------------------------------------------------
// Concurrency holds.

fn one_slot() -> Quota {
    Quota::concurrency(1).expect("test quotas are valid")
}

async fn hold<S: Store>(store: &S, item: Item<'_>) -> Option<Receipt> {
    let items = [item];
    let answer = check(store, &items).await;
    answer
        .is_allowed()
        .then(|| answer.into_receipts(&items).pop())
        .flatten()
}

#[tokio::test]
async fn a_hold_is_given_back_where_it_was_taken() {
    let Setup { primary, store, .. } = setup();
    let (id, key) = (rule("exports"), Key::new("acct"));
    let item = Item::new(&id, one_slot(), &key).with_store_failure(OnStoreFailure::Local);

    primary.fail();
    let local = hold(&store, item).await.expect("a slot in local memory");
    primary.heal();
    let remote = hold(&store, item).await.expect("a slot in the primary");

    // The local hold ends while the primary answers: memory gets it, the primary keeps its own.
    store.refund(local).await.unwrap();
    assert_eq!(store.local().stats().keys, 0, "the local slot is free");
    assert!(
        hold(&store, item).await.is_none(),
        "the primary's slot is still held"
    );

    // The primary's hold ends while the primary fails: memory must not give back someone
    // else's slot (the primary's hold lapses after its slot ttl instead).
    primary.fail();
    let other_local = hold(&store, item).await.expect("a slot in local memory");
    store.refund(remote).await.unwrap();
    assert!(
        hold(&store, item).await.is_none(),
        "the local slot is still held"
    );
    assert_eq!(store.stats().local_refunds, 1);
    store.refund(other_local).await.unwrap();
    assert!(hold(&store, item).await.is_some());
}

#[tokio::test]
async fn a_hold_counted_within_a_local_quota_is_given_back() {
    let Setup { primary, store, .. } = setup();
    let (id, key) = (rule("exports"), Key::new("acct"));
    let item = Item::new(&id, Quota::concurrency(5).unwrap(), &key)
        .with_store_failure(OnStoreFailure::OpenWithin(one_slot()));
    primary.fail();
    let first = hold(&store, item)
        .await
        .expect("the local quota's one slot");
    assert!(
        hold(&store, item).await.is_none(),
        "the local quota is one slot"
    );
    store.refund(first).await.unwrap();
    assert!(
        hold(&store, item).await.is_some(),
        "given back, not kept for ever"
    );
}

#[tokio::test]
async fn a_local_charge_is_refunded_locally_after_the_primary_is_back() {
    let Setup { primary, store, .. } = setup();
    let (id, key) = (rule("login-failures"), Key::new("user77"));
    let item = Item::new(&id, per_hour(10), &key).with_store_failure(OnStoreFailure::Local);
    primary.fail();
    let items = [item];
    let receipt = check(&store, &items)
        .await
        .into_receipts(&items)
        .pop()
        .unwrap();
    primary.heal();
    store.refund(receipt).await.unwrap();
    // The primary never saw the charge: giving it back there would grant a unit never spent.
    assert_eq!(
        block_on(primary.inner.peek(&item.with_cost(0)))
            .unwrap()
            .remaining(),
        10
    );
    primary.fail();
    assert_eq!(
        store.peek(&item.with_cost(0)).await.unwrap().remaining(),
        10,
        "given back in local memory, where it was charged"
    );
}

// ---------------------------------------------------------------------------------------------
// Settling a cost after the response while the primary is down.

#[tokio::test]
async fn a_settlement_during_an_outage_follows_each_rules_policy() {
    use tollgate_core::{Estimate, Settlement, Take};
    let (id, key) = (rule("tokens"), Key::new("acct"));
    let estimate = |policy| {
        Item::new(&id, per_hour(10), &key)
            .with_cost(3)
            .with_take(Take::AfterDebt)
            .with_store_failure(policy)
    };
    let local_quota = per_hour(6);

    // Local, admitted while up, settled while down: the excess is owed in local memory.
    let Setup { primary, store, .. } = setup();
    let item = estimate(OnStoreFailure::Local);
    let admitted = Estimate::new(&item, decide(&store, item).await);
    primary.fail();
    let settled = admitted.settle(&store, 15).await.unwrap();
    assert_eq!(settled, Settlement::Charged { units: 12, debt: 2 });
    assert!(!allowed(&store, item).await, "owing in local memory");

    // OpenWithin: the excess is owed under the local quota, as debt (not an exact check that
    // may refuse it).
    let Setup { primary, store, .. } = setup();
    let item = estimate(OnStoreFailure::OpenWithin(local_quota));
    let admitted = Estimate::new(&item, decide(&store, item).await);
    primary.fail();
    let settled = admitted.settle(&store, 11).await.unwrap();
    assert_eq!(settled, Settlement::Charged { units: 8, debt: 2 });
    assert!(!allowed(&store, item).await, "owing under the local quota");

    // OpenWithin, admitted while down: counted under the local quota with no receipt, so the
    // estimate stands whatever the actual cost.
    let Setup { primary, store, .. } = setup();
    let item = estimate(OnStoreFailure::OpenWithin(local_quota));
    primary.fail();
    let admitted = Estimate::new(&item, decide(&store, item).await);
    assert_eq!(
        admitted.settle(&store, 0).await.unwrap(),
        Settlement::Unchanged
    );
    assert!(allowed(&store, item).await, "3 of the local 6 left");
    assert!(!allowed(&store, item).await, "the estimate stood: 0 left");

    // Open: the excess goes uncounted, and says so.
    let Setup { primary, store, .. } = setup();
    let item = estimate(OnStoreFailure::Open);
    let admitted = Estimate::new(&item, decide(&store, item).await);
    primary.fail();
    assert_eq!(
        admitted.settle(&store, 20).await.unwrap(),
        Settlement::Uncounted
    );

    // Closed: the excess fails to settle.
    let Setup { primary, store, .. } = setup();
    let item = estimate(OnStoreFailure::Closed);
    let admitted = Estimate::new(&item, decide(&store, item).await);
    primary.fail();
    assert!(admitted.settle(&store, 20).await.is_err());
}
