//! Leased checks however their callers run them: on plain threads with no Tokio runtime
//! (`check_now`, else the async check driven by `block_on`), with a runtime dropped before the
//! top-up it was given ever ran, and with a check dropped while its store call is on its way.
//! In each, the key never waits for a call nobody will make, and a settling gateway returns.
//! (The timeouts below only turn a hang into a failure; nothing is timed.)

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tollgate_core::{
    BatchDecision, Counting, Decision, FleetModes, Item, Key, LeaseSettings, MemoryStore, Quota,
    Receipt, RefundError, RuleId, Store, StoreError, Timestamp,
};
use tollgate_testing::ManualClock;
use tollgate_wrappers::FleetStore;

/// How long a check may take before the test calls it stuck.
const STUCK: Duration = Duration::from_secs(30);

/// A shared store whose checks wait while its gate is closed (a Redis that does not answer).
#[derive(Clone)]
struct GatedStore {
    inner: MemoryStore<ManualClock>,
    closed: Arc<AtomicBool>,
    wakers: Arc<Mutex<Vec<Waker>>>,
}

impl GatedStore {
    fn set_closed(&self, closed: bool) {
        self.closed.store(closed, Ordering::SeqCst);
        if !closed {
            for waker in self.wakers.lock().expect("not poisoned").drain(..) {
                waker.wake();
            }
        }
    }

    async fn gate(&self) {
        std::future::poll_fn(|cx| {
            if self.closed.load(Ordering::SeqCst) {
                self.wakers
                    .lock()
                    .expect("not poisoned")
                    .push(cx.waker().clone());
                Poll::Pending
            } else {
                Poll::Ready(())
            }
        })
        .await;
    }
}

impl Store for GatedStore {
    async fn check(&self, items: &[Item<'_>]) -> Result<BatchDecision, StoreError> {
        self.gate().await;
        self.inner.check(items).await
    }
    async fn peek(&self, item: &Item<'_>) -> Result<Decision, StoreError> {
        self.inner.peek(item).await
    }
    async fn refund(&self, receipt: Receipt) -> Result<(), RefundError> {
        self.inner.refund(receipt).await
    }
    async fn reset(&self, rule: &RuleId, key: &Key) -> Result<(), StoreError> {
        self.inner.reset(rule, key).await
    }
}

struct Gateway {
    clock: ManualClock,
    shared: GatedStore,
    fleet: FleetStore<GatedStore, ManualClock>,
    rule: RuleId,
    quota: Quota,
}

fn gateway() -> Gateway {
    let clock = ManualClock::new(Timestamp::from_secs(1_800_000_000));
    let shared = GatedStore {
        inner: MemoryStore::builder().clock(clock.clone()).build(),
        closed: Arc::default(),
        wakers: Arc::default(),
    };
    Gateway {
        fleet: FleetStore::with_clock(shared.clone(), clock.clone()),
        clock,
        shared,
        rule: RuleId::new("partner").expect("valid"),
        quota: Quota::fixed_window(100_000, Duration::from_secs(3600)).expect("valid"),
    }
}

impl Gateway {
    fn item<'a>(&'a self, key: &'a Key) -> Item<'a> {
        let lease = Counting::Lease(LeaseSettings::new().max_units(7));
        Item::new(&self.rule, self.quota, key)
            .with_fleet_modes(FleetModes::new().with_counting(lease))
    }

    /// As a caller with no runtime does it: `check_now`, else the async check on this thread.
    fn check_on_a_plain_thread(&self, key: &Key) -> bool {
        let items = [self.item(key)];
        match self.fleet.check_now(&items) {
            Some(answer) => answer,
            None => futures_executor::block_on(self.fleet.check(&items)),
        }
        .expect("the store answers")
        .is_allowed()
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime")
}

/// Two plain threads on one key, no runtime anywhere: every check is answered (a spend that
/// would start a top-up with nowhere to run it leaves it to the async check, which makes it).
#[test]
fn plain_threads_without_a_runtime_never_wait_for_a_call_nobody_makes() {
    let gateway = gateway();
    let key = Key::new("acme");
    let (answered, answers) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        for _ in 0..2 {
            let (gateway, key, answered) = (&gateway, &key, answered.clone());
            scope.spawn(move || {
                let allowed = (0..2_000)
                    .filter(|_| gateway.check_on_a_plain_thread(key))
                    .count();
                answered.send(allowed).expect("the test waits");
            });
        }
        for _ in 0..2 {
            let allowed = answers
                .recv_timeout(STUCK)
                .expect("a plain-thread caller is stuck in a leased check");
            assert_eq!(allowed, 2_000, "every check fits in the quota");
        }
    });
}

/// A top-up handed to a runtime that is dropped before the task ever ran: the key is not left
/// waiting for it, and the gateway still gives back what it holds.
#[test]
fn a_top_up_lost_with_its_runtime_strands_nothing() {
    let gateway = gateway();
    let key = Key::new("acme");
    let item = gateway.item(&key);
    // Two checks through the store, so the key's demand asks for leases of more than one unit.
    for _ in 0..2 {
        assert!(gateway.check_on_a_plain_thread(&key));
    }
    {
        let lost = runtime();
        let _inside = lost.enter();
        let answer = gateway.fleet.check_now(&[item]);
        assert!(
            answer.is_some(),
            "spent from the lease, a top-up handed to the runtime"
        );
    } // dropped before its task ever ran
    runtime().block_on(async {
        gateway.clock.advance(Duration::from_secs(30));
        for _ in 0..20 {
            let answer = tokio::time::timeout(STUCK, gateway.fleet.check(&[item])).await;
            let answer = answer.expect("the key waits for the lost top-up");
            assert!(answer.expect("answers").is_allowed());
        }
        tokio::time::timeout(STUCK, gateway.fleet.give_back())
            .await
            .expect("give_back waits for the lost job");
    });
}

/// A check dropped while its call for the key is on its way (a request that timed out): the
/// next check asks again instead of waiting for that call, and the gateway gives back what it holds.
#[test]
fn a_check_dropped_mid_call_leaves_the_key_to_the_next_check() {
    let gateway = gateway();
    let key = Key::new("acme");
    let items = [gateway.item(&key)];
    gateway.shared.set_closed(true);
    {
        let mut check = pin!(gateway.fleet.check(&items));
        let mut context = Context::from_waker(Waker::noop());
        assert!(
            Future::poll(Pin::as_mut(&mut check), &mut context).is_pending(),
            "the store is holding the call"
        );
    } // the caller gives up
    gateway.shared.set_closed(false);
    runtime().block_on(async {
        let answer = tokio::time::timeout(STUCK, gateway.fleet.check(&items))
            .await
            .expect("the key waits for the abandoned call");
        assert!(answer.expect("answers").is_allowed());
        tokio::time::timeout(STUCK, gateway.fleet.give_back())
            .await
            .expect("give_back returns");
    });
}
