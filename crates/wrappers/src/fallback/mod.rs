//! The store-failure wrapper: any primary store, a timeout on every call, a circuit breaker, and
//! each rule's [`OnStoreFailure`](tollgate_core::OnStoreFailure) carried out in local memory when the
//! primary cannot answer. [`FallbackStore`] has the whole story.
//!
//! * `mod.rs` — the store and its [`Store`] implementation;
//! * `builder.rs` — settings and their defaults;
//! * `call.rs` — one call to the primary: breaker, timeout, outcome;
//! * `breaker.rs` — the circuit breaker (two atomics);
//! * `degraded.rs` — answering by each item's policy;
//! * `report.rs` — logs; `stats.rs` — counters; `outage.rs` — why the primary was not used.

mod alarm;
mod breaker;
mod builder;
mod call;
mod degraded;
mod holds;
mod nodes;
mod outage;
mod report;
mod stats;
#[cfg(feature = "metrics")]
mod store_metrics;

use std::sync::Arc;
use std::time::Duration;

pub use self::builder::{
    DEFAULT_COOL_DOWN, DEFAULT_FAILURE_THRESHOLD, DEFAULT_TIMEOUT, FallbackStoreBuilder,
};
pub use self::stats::FallbackStats;

use self::alarm::Alarm;
use self::breaker::{Admission, Gate};
use self::holds::HoldPlace;
use self::nodes::Breakers;
use self::outage::Outage;
use self::report::Announcer;
use self::stats::Counters;
use tollgate_core::store_kit::{LocalKit, ReceiptKit};
use tollgate_core::{
    BatchDecision, Clock, Decision, Item, ItemDecision, Key, MemoryStore, Receipt, RefundError,
    RefundNow, RuleId, Store, StoreError, StoreErrorKind, SystemClock,
};

/// A [`Store`] that survives its primary: every call to the primary has a timeout, a circuit
/// breaker stops waiting on a primary that keeps failing, and when the primary cannot answer each
/// item follows its own [`OnStoreFailure`](tollgate_core::OnStoreFailure), counting in a local
/// [`MemoryStore`] where the policy says so.
///
/// Wrap the shared store (Redis) in it and give it to the middleware like any store.
///
/// # When the primary cannot answer
///
/// A call falls back when the primary answers with an error, does not answer within the
/// [timeout](FallbackStoreBuilder::timeout) (default [`DEFAULT_TIMEOUT`]; a
/// [`StoreError`] that [`is_timeout`](StoreError::is_timeout)), or is not called because the
/// breaker is open. Then each item of the request answers by its policy:
///
/// | policy | answer |
/// |---|---|
/// | `Open` | allowed, uncharged, the quota's limit as limit and remaining |
/// | `OpenWithin(quota)` | allowed unless this gateway's local count under `quota` (same rule id and key) refuses |
/// | `Local` | the same item — quota, cost, mode — checked in local memory; its refusal is real |
/// | `Closed` | the call returns the [`StoreError`] (the HTTP layer answers 503 with `Retry-After`) |
///
/// A batch with any **enforcing** `Closed` item fails as a whole; shadow items never cause an
/// error (a shadow `Closed` item is answered like `Open`). The items counted locally go to the
/// local store in one batch, so the answer is still all-or-nothing across them. A store error is
/// never turned into a refusal: only a local count can refuse.
///
/// `OpenWithin` answers with the local quota's decision and reports no charge (a receipt names
/// the rule's own quota, so refunding it would take from the wrong state).
///
/// **A call held up before it runs is not charged later.** Each call to the primary carries
/// its deadline (now plus the timeout, read by the primary through
/// [`store_kit::call_deadline`](tollgate_core::store_kit::call_deadline)). The Redis store hands it to
/// its script on the server's clock: a check still queued when its caller gave up (a server
/// stalled, then woken; a request slow on its way there) starts after the deadline, charges
/// nothing and answers `TOLLGATE_LATE`, so a caller answered by its policy does not pay in
/// Redis as well. What it cannot cover: a script that started in time and whose **answer**
/// came back too late (a slow network on the way back, the last round trip before the
/// timeout) has charged, and its caller was answered by its policy too — charged twice, at
/// most once per call in flight. A Redis store that has had no answer yet asks the server its
/// `TIME` before its first check, so that check carries a deadline too (should the `TIME`
/// stall, no script is sent before the caller gives up). The deadline it sends is early by about the best
/// round trip it has seen, so a check that reaches the script in the last round trip before
/// the timeout is declined (the caller, still waiting, gets a timeout and its policy). A
/// primary that ignores the deadline may charge any timed-out call when it runs.
///
/// # The circuit breaker
///
/// After [`failure_threshold`](FallbackStoreBuilder::failure_threshold) failures in a row
/// (default [`DEFAULT_FAILURE_THRESHOLD`]; timeouts count) the breaker opens: calls go straight to
/// the fallback without waiting, and `check_now` answers at once. After the
/// [`cool_down`](FallbackStoreBuilder::cool_down) (default [`DEFAULT_COOL_DOWN`], on the store's
/// [`Clock`]) one call is let through as a probe; its success closes the breaker, its failure
/// starts another cool-down. While closed, the breaker costs one atomic load per call and takes
/// no lock.
///
/// Switches are logged on the `tollgate::store` target (`warn` when the primary starts failing,
/// `error` when the breaker opens, `info` when the primary answers again) and counted in
/// [`stats`](FallbackStore::stats).
///
/// # Other calls
///
/// * [`peek`](Store::peek) asks the primary, and falls back like a check (without charging).
/// * [`refund`](Store::refund) goes where checks go now: to the primary while it answers; to
///   local memory when the primary fails, times out or is skipped (and then answers `Ok`). A
///   charge counted locally during an outage and refunded during it is undone exactly. A receipt
///   that crosses a switch is given back where checks go at refund time, so it can be off by its
///   own cost, never more: a charge made in the primary and refunded during an outage stays in
///   the primary until it expires (over-counting, the safe side), and one made locally and
///   refunded after recovery is given back to the primary. A receipt does not say where it was
///   charged, and refunding in both places would give it back twice.
/// * [`reset`](Store::reset) clears local memory at once, then the primary; it reports the
///   primary's error, if any.
/// * [`check_now`](Store::check_now) forwards to the primary's `check_now` while the breaker is
///   closed (falling back at once if that answer is an error); while the breaker is open it
///   answers from local memory at once; when a probe is due it answers `None`, so the awaited
///   `check` carries the probe.
///
/// # Runtime
///
/// Waiting for the primary uses Tokio's timer, so calls whose answer is not ready at once must be
/// polled inside a Tokio runtime with its time driver enabled (every `#[tokio::main]` runtime
/// is; Tokio panics otherwise). Answers that are ready at once set no timer.
///
/// # Example
///
/// ```
/// # use std::future::{Future, ready};
/// use std::time::Duration;
/// use tollgate_core::{Item, Key, OnStoreFailure, Quota, RuleId, Store, StoreError};
/// use tollgate_wrappers::FallbackStore;
/// # use tollgate_core::{BatchDecision, Decision, Receipt, RefundError};
///
/// /// A primary that is down (in production, the Redis store).
/// struct Down;
/// # impl Store for Down {
/// #     fn check(&self, _: &[Item<'_>]) -> impl Future<Output = Result<BatchDecision, StoreError>> + Send {
/// #         ready(Err(StoreError::unavailable("connection refused")))
/// #     }
/// #     fn peek(&self, _: &Item<'_>) -> impl Future<Output = Result<Decision, StoreError>> + Send {
/// #         ready(Err(StoreError::unavailable("connection refused")))
/// #     }
/// #     fn refund(&self, r: Receipt) -> impl Future<Output = Result<(), RefundError>> + Send {
/// #         ready(Err(RefundError::new(StoreError::unavailable("connection refused"), r)))
/// #     }
/// #     fn reset(&self, _: &RuleId, _: &Key) -> impl Future<Output = Result<(), StoreError>> + Send {
/// #         ready(Err(StoreError::unavailable("connection refused")))
/// #     }
/// # }
///
/// let store = FallbackStore::builder(Down).timeout(Duration::from_millis(5)).build();
/// let (codes, phone) = (RuleId::new("sms-codes")?, Key::new("+91-98xxxxxx01"));
/// let quota = Quota::fixed_window(3, Duration::from_secs(3600))?;
/// let local = Item::new(&codes, quota, &phone).with_store_failure(OnStoreFailure::Local);
/// let closed = local.with_store_failure(OnStoreFailure::Closed);
///
/// let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
/// runtime.block_on(async {
///     for _ in 0..3 {
///         assert!(store.check(&[local]).await?.is_allowed());
///     }
///     // Counted in this gateway's memory: the fourth is a real refusal.
///     assert!(!store.check(&[local]).await?.is_allowed());
///     // Failing closed is an error, never a refusal.
///     assert!(store.check(&[closed]).await.is_err());
///     Ok::<(), StoreError>(())
/// })?;
///
/// let stats = store.stats();
/// assert_eq!((stats.fallback_checks, stats.failed_closed), (5, 1));
/// assert!(stats.breaker_open, "five failures in a row");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct FallbackStore<P, C: Clock = SystemClock> {
    primary: P,
    local: MemoryStore<C>,
    timeout: Duration,
    cool_down: Duration,
    breakers: Arc<Breakers>,
    counters: Arc<Counters>,
    announcer: Arc<Announcer>,
    alarm: Arc<Alarm>,
    #[cfg(feature = "metrics")]
    metrics: Option<Arc<store_metrics::StoreMetrics>>,
}

/// Clones share everything: the primary (when its clones share, as the stores here do), the
/// local memory, the breaker and the counters — two clones are one store, never two breakers.
impl<P: Clone, C: Clock> Clone for FallbackStore<P, C> {
    fn clone(&self) -> Self {
        FallbackStore {
            primary: self.primary.clone(),
            local: self.local.clone(),
            timeout: self.timeout,
            cool_down: self.cool_down,
            breakers: Arc::clone(&self.breakers),
            counters: Arc::clone(&self.counters),
            announcer: Arc::clone(&self.announcer),
            alarm: Arc::clone(&self.alarm),
            #[cfg(feature = "metrics")]
            metrics: self.metrics.clone(),
        }
    }
}

impl<P, C: Clock> FallbackStore<P, C> {
    /// What the store has counted about its primary, and whether the breaker is open now.
    pub fn stats(&self) -> FallbackStats {
        self.counters.snapshot(self.breakers.any_open())
    }

    /// The primary store.
    pub fn primary(&self) -> &P {
        &self.primary
    }

    /// The local store the fallback counts in (its clock is the breaker's).
    pub fn local(&self) -> &MemoryStore<C> {
        &self.local
    }

    /// How long each call waits for the primary.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The rules answered by their failure policies since the primary last answered (empty
    /// while it answers): what the `tollgate::fallback` events and the
    /// `tollgate_fallback_active` gauge report.
    pub fn falling_back(&self) -> Vec<RuleId> {
        self.alarm.rules()
    }

    /// The primary's nodes whose circuit breaker is open now (a Redis Cluster master that does
    /// not answer): only the keys they serve follow their failure policies. Empty for a primary
    /// that is one node (its breaker is [`FallbackStats::breaker_open`]).
    pub fn failing_nodes(&self) -> Vec<Arc<str>> {
        self.breakers.open_nodes()
    }
}

impl<P: Store, C: Clock> FallbackStore<P, C> {
    /// The breaker a call about `items` goes through (and, now and then, the nodes no call
    /// has been about for a while forgotten, reported closed).
    fn pick(&self, items: &[Item<'_>]) -> nodes::Picked {
        let now = self.local.clock().now();
        for node in self.breakers.forget_unused(now) {
            self.report_forgotten(&node);
        }
        self.breakers.pick(&self.primary, items, now)
    }

    /// Answers a check by the items' policies, counting it.
    fn fall_back(&self, items: &[Item<'_>], outage: Outage) -> Result<BatchDecision, StoreError> {
        self.counters.fallback_checks.add_one();
        let answer = degraded::check(&self.local, items, outage);
        let now = self.local.clock().now();
        if answer.is_err() {
            self.counters.failed_closed.add_one();
            // Only the rules that failed it closed were answered, by refusing the call.
            let closed = items.iter().filter(|item| {
                item.is_enforcing()
                    && item.on_store_failure() == tollgate_core::OnStoreFailure::Closed
            });
            self.alarm.fell_back(closed, now);
        } else {
            self.alarm.fell_back(items.iter(), now);
        }
        answer
    }

    /// Gives a refund to local memory, counting it.
    fn refund_locally(&self, receipt: &Receipt) {
        self.counters.local_refunds.add_one();
        self.local.refund_sync(receipt);
    }
}

impl<P: Store, C: Clock> Store for FallbackStore<P, C> {
    /// The primary's: what it does while it answers (the local memory counts only while it
    /// does not).
    fn capabilities(&self) -> tollgate_core::Capabilities {
        self.primary.capabilities()
    }

    fn refused_now(&self, items: &[Item<'_>]) -> Option<BatchDecision> {
        self.primary.refused_now(items)
    }

    fn node_of(&self, item: &Item<'_>) -> Option<Arc<str>> {
        self.primary.node_of(item)
    }

    async fn check(&self, items: &[Item<'_>]) -> Result<BatchDecision, StoreError> {
        let picked = self.pick(items);
        match self
            .call_primary(&picked, "check", || self.primary.check(items))
            .await
        {
            Ok(answer) => Ok(answer),
            Err(outage) => self.fall_back(items, outage),
        }
    }

    fn check_now(&self, items: &[Item<'_>]) -> Option<Result<BatchDecision, StoreError>> {
        let picked = self.pick(items);
        match picked.breaker.gate(self.local.clock()) {
            Gate::Closed => {
                #[cfg(feature = "metrics")]
                let started = self.metrics.as_ref().map(|_| std::time::Instant::now());
                let answer = self.primary.check_now(items)?;
                #[cfg(feature = "metrics")]
                if let (Some(metrics), Some(started)) = (&self.metrics, started) {
                    metrics.seconds.record(started.elapsed().as_secs_f64());
                }
                Some(
                    self.settle(&picked, "check", Admission::Call, answer)
                        .or_else(|outage| self.fall_back(items, outage)),
                )
            }
            Gate::Open => {
                self.counters.short_circuited.add_one();
                Some(self.fall_back(items, Outage::BreakerOpen))
            }
            Gate::ProbeDue => None,
        }
    }

    async fn check_one(&self, item: &Item<'_>) -> Result<ItemDecision, StoreError> {
        let picked = self.pick(std::slice::from_ref(item));
        match self
            .call_primary(&picked, "check", || self.primary.check_one(item))
            .await
        {
            Ok(answer) => Ok(answer),
            Err(outage) => self
                .fall_back(std::slice::from_ref(item), outage)?
                .into_items()
                .next()
                .ok_or_else(|| {
                    StoreError::new(StoreErrorKind::Protocol, "fallback answered no item")
                }),
        }
    }

    async fn peek(&self, item: &Item<'_>) -> Result<Decision, StoreError> {
        let picked = self.pick(std::slice::from_ref(item));
        match self
            .call_primary(&picked, "peek", || self.primary.peek(item))
            .await
        {
            Ok(decision) => Ok(decision),
            Err(outage) => {
                self.counters.fallback_checks.add_one();
                let answer = degraded::peek(&self.local, item, outage);
                if answer.is_err() {
                    self.counters.failed_closed.add_one();
                }
                answer
            }
        }
    }

    async fn refund(&self, receipt: Receipt) -> Result<(), RefundError> {
        let place = holds::place_of(receipt.charge());
        // Charged in local memory while the primary was down: given back there, never to a
        // primary that is back and never saw it.
        if place == HoldPlace::Local || receipt.is_counted_locally() {
            self.refund_locally(&receipt);
            return Ok(());
        }
        // The primary may drop the receipt with its call (a timeout): keep a copy for memory.
        let kept = receipt.retry_copy();
        let picked = self.pick(&[receipt_item(&kept)]);
        let refunded = self
            .call_primary(&picked, "refund", || async move {
                self.primary.refund(receipt).await.map_err(without_receipt)
            })
            .await;
        if refunded.is_err() && place == HoldPlace::NotAHold {
            self.refund_locally(&kept);
        }
        Ok(())
    }

    fn refund_now(&self, receipt: Receipt) -> RefundNow {
        let place = holds::place_of(receipt.charge());
        if place == HoldPlace::Local || receipt.is_counted_locally() {
            self.refund_locally(&receipt);
            return RefundNow::Done(Ok(()));
        }
        let picked = self.pick(&[receipt_item(&receipt)]);
        match picked.breaker.gate(self.local.clock()) {
            Gate::Closed => {
                let kept = receipt.retry_copy();
                let answer = match self.primary.refund_now(receipt) {
                    RefundNow::Done(answer) => answer.map_err(without_receipt),
                    later @ RefundNow::Later(_) => return later,
                };
                if self
                    .settle(&picked, "refund", Admission::Call, answer)
                    .is_err()
                    && place == HoldPlace::NotAHold
                {
                    self.refund_locally(&kept);
                }
            }
            Gate::Open => {
                self.counters.short_circuited.add_one();
                if place == HoldPlace::NotAHold {
                    self.refund_locally(&receipt);
                }
            }
            Gate::ProbeDue => return RefundNow::Later(receipt),
        }
        RefundNow::Done(Ok(()))
    }

    /// A hold taken in local memory never lapses; a primary's is renewed there (when the
    /// primary cannot be reached, the error says so and the hold lapses after its slot ttl).
    async fn renew(&self, receipt: &Receipt) -> Result<(), StoreError> {
        if holds::place_of(receipt.charge()) != HoldPlace::Primary {
            return Ok(());
        }
        let picked = self.pick(&[receipt_item(receipt)]);
        self.call_primary(&picked, "renew", || self.primary.renew(receipt))
            .await
            .map_err(Outage::into_error)
    }

    async fn reset(&self, rule: &RuleId, key: &Key) -> Result<(), StoreError> {
        self.local.reset_sync(rule, key);
        let picked = self.pick(&[]);
        self.call_primary(&picked, "reset", || self.primary.reset(rule, key))
            .await
            .map_err(Outage::into_error)
    }
}

/// The item a receipt was charged for: what its refund is about (the node that holds it).
fn receipt_item(receipt: &Receipt) -> Item<'_> {
    Item::new(receipt.rule(), *receipt.quota(), receipt.key())
}

/// A refund's error without its receipt (the caller of the primary kept a copy).
fn without_receipt(error: RefundError) -> StoreError {
    error.into_parts().0
}

impl<P, C: Clock> std::fmt::Debug for FallbackStore<P, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FallbackStore")
            .field("primary", &std::any::type_name::<P>())
            .field("local", &self.local)
            .field("timeout", &self.timeout)
            .field("cool_down", &self.cool_down)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}
