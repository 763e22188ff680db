//! A local cache of blocked callers: a store combinator that refuses, on this gateway and
//! without a store call, a caller the shared store has refused until a time not yet reached.

mod stats;
mod table;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

pub use self::stats::BlockedStats;
use self::table::{Found, Table};
use tollgate_core::store_kit::{AnswerKit, CapabilitiesKit};
use tollgate_core::{
    BatchDecision, Capabilities, Clock, CountedIn, Decision, Item, ItemDecision, Key, Receipt,
    RefundError, RefundNow, RefusalReason, RuleId, Store, StoreError, SystemClock, Take, Timestamp,
};

/// How many blocked callers a [`BlockedCache`] remembers unless told otherwise.
pub const DEFAULT_MAX_BLOCKED: usize = 65_536;

/// Wraps any store (Redis, a [`FallbackStore`](crate::FallbackStore) around it) and remembers
/// the callers it refused, so that a caller flooding a gateway is refused here until the store
/// said it may try again, without asking the store each time.
///
/// **What is remembered.** When the store refuses an item for lack of quota
/// ([`RefusalReason::LimitReached`], counted in the store itself, with a wait above zero) and the item
/// asks for it ([`Item::caches_blocked`], set with
/// [`FleetModes::with_cache_blocked`](tollgate_core::FleetModes::with_cache_blocked):
/// `Rule::cache_blocked(true)` in `tollgate-tower`, or
/// `cache_blocked = true` in a rule file — enforcing items counted exactly only), the cache
/// remembers its rule and key until `now + retry_after`, with the item's quota and cost and the
/// refusal's numbers. An allow is never remembered, nor a shadow or read-only item, nor a
/// refusal a fallback counted in its local memory (the store was not asked), nor a cost that
/// can never fit. "Now" is read before the store is asked, so an entry ends no later than the
/// store's own wait (a round trip early at most: the caller is then asked about once more).
///
/// **What is answered.** A later check of a batch holding such an item, with the same quota and
/// cost, before that time, is refused without a store call: the item's decision is the store's
/// refusal counted down — same limit and remaining, `retry_after` and `reset_after` ending at the
/// same instants (whole µs, as the store counts them), so the response's status, `Retry-After`
/// and `RateLimit` fields are those the store's own refusal would give;
/// [`ItemDecision::refused_locally`] says so, and the layer counts it as `refused_locally`. The
/// batch stays all-or-nothing: nothing is charged for its other items. They were not asked
/// about, so their answers are uncharged, allowed at the full limit and marked
/// [`CountedIn::Nowhere`] — numbers that describe no count, which the layer neither shows in
/// headers nor counts. A refused request reports this one wait, even if another rule of the
/// request would have refused it for longer (the next try learns that from the store). A batch
/// with a debt item ([`Take::AsDebt`], spend that already happened) or a read-only item (an
/// escalating rule's block, read in the store with its own longer wait and strikes) always goes
/// to the store. [`Store::refused_now`] gives the same refusal without a call, so a
/// [`Stores`](crate::Stores) holding this cache in one of its stores refuses such a request
/// before asking any store.
///
/// **When an entry ends.** At its time; when a check of the same rule and key comes with
/// another quota (the rule's quota changed, or an override gives this caller another: the
/// entry is dropped and the store asked); on [`reset`](Store::reset) of that rule and key
/// (which also resets the store), on a [`refund`](Store::refund) of a charge of that caller
/// (the store may allow it now), [`forget`](Self::forget) and [`clear`](Self::clear). A
/// reset made on another gateway reaches this one only if something tells it: with a shared
/// Redis, `tollgate_redis::ResetFollower` calls [`forget_named`](Self::forget_named) on every
/// gateway when any gateway resets a caller; an announcement that is missed costs at most
/// until the entry's time (it ends by itself).
///
/// **Bound.** At most [`max_keys`](Self::max_keys) entries (default 65,536, about 100 bytes
/// each). When full, entries that have ended are dropped, then as many of those that end
/// soonest as it takes to free a sixteenth of the table (they would have been asked about
/// soonest anyway). Dropping an entry costs a store call, never a wrong answer.
///
/// **Cost.** Under a flood at F times a key's limit from G gateways, each gateway asks the
/// store about a blocked key about once per emission interval (token bucket: when the next
/// unit comes back, one gateway gets it and every gateway learns the new wait) or once per
/// window (windows). The store answers about G refusals per key per interval, against the
/// F − 1 refusals per interval it answers without the cache: about G / (F − 1) store calls per
/// refused request for a token bucket, and G per key per window for windows
/// (`BENCHMARKS.md` measures both).
///
/// ```
/// use std::time::Duration;
/// use futures_executor::block_on;
/// use tollgate_core::{FleetModes, Item, Key, MemoryStore, Quota, Rate, RuleId, Store};
/// use tollgate_wrappers::BlockedCache;
///
/// let store = BlockedCache::new(MemoryStore::new());
/// let (rule, key) = (RuleId::new("login")?, Key::new("user77"));
/// let quota = Quota::fixed_window(2, Duration::from_secs(60))?;
/// let item = Item::new(&rule, quota, &key)
///     .with_fleet_modes(FleetModes::new().with_cache_blocked(true));
///
/// assert!(block_on(store.check(&[item]))?.is_allowed());
/// assert!(block_on(store.check(&[item]))?.is_allowed());
/// let by_store = block_on(store.check(&[item]))?; // the store refuses, and is remembered
/// assert!(!by_store.items()[0].refused_locally());
/// let here = block_on(store.check(&[item]))?; // refused here, no store call
/// assert!(here.items()[0].refused_locally());
/// assert_eq!(store.stats().refused_locally, 1);
///
/// block_on(store.reset(&rule, &key))?; // forgets here, resets the store
/// assert!(block_on(store.check(&[item]))?.is_allowed());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct BlockedCache<S, C: Clock = SystemClock> {
    shared: Arc<Shared<S, C>>,
}

impl<S, C: Clock> Clone for BlockedCache<S, C> {
    fn clone(&self) -> Self {
        BlockedCache {
            shared: Arc::clone(&self.shared),
        }
    }
}

struct Shared<S, C> {
    store: S,
    clock: C,
    table: Mutex<Table>,
    refused_locally: AtomicU64,
    remembered: AtomicU64,
    store_checks: AtomicU64,
}

impl<S: Store> BlockedCache<S, SystemClock> {
    /// Wraps `store`, timing entries on the system clock.
    pub fn new(store: S) -> Self {
        BlockedCache::with_clock(store, SystemClock::new())
    }
}

impl<S: Store, C: Clock> BlockedCache<S, C> {
    /// Wraps `store`, timing entries on `clock` (a test's manual clock, shared with the store).
    ///
    /// ```
    /// use tollgate_testing::ManualClock;
    /// use tollgate_core::{MemoryStore, Timestamp};
    /// use tollgate_wrappers::BlockedCache;
    /// let clock = ManualClock::new(Timestamp::from_secs(1_000));
    /// let store = MemoryStore::builder().clock(clock.clone()).build();
    /// let cache = BlockedCache::with_clock(store, clock);
    /// assert_eq!(cache.stats().entries, 0);
    /// ```
    pub fn with_clock(store: S, clock: C) -> Self {
        BlockedCache {
            shared: Arc::new(Shared {
                store,
                clock,
                table: Mutex::new(Table::new(DEFAULT_MAX_BLOCKED)),
                refused_locally: AtomicU64::new(0),
                remembered: AtomicU64::new(0),
                store_checks: AtomicU64::new(0),
            }),
        }
    }

    /// Remembers at most `max` blocked callers (default [`DEFAULT_MAX_BLOCKED`]; at least 1).
    ///
    /// ```
    /// use tollgate_core::MemoryStore;
    /// use tollgate_wrappers::BlockedCache;
    /// let cache = BlockedCache::new(MemoryStore::new()).max_keys(1_000);
    /// # let _ = cache;
    /// ```
    #[must_use]
    pub fn max_keys(self, max: usize) -> Self {
        self.shared.table.lock().set_max(max);
        self
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.shared.store
    }

    /// Forgets `rule`'s entry for `key` on this gateway only (the store keeps its count);
    /// whether there was one.
    ///
    /// ```
    /// use tollgate_core::{Key, MemoryStore, RuleId};
    /// use tollgate_wrappers::BlockedCache;
    /// let cache = BlockedCache::new(MemoryStore::new());
    /// assert!(!cache.forget(&RuleId::new("login")?, &Key::new("user77")));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn forget(&self, rule: &RuleId, key: &Key) -> bool {
        self.forget_named(rule.as_str(), key.as_bytes())
    }

    /// [`forget`](Self::forget), by the rule's id as text and the key's encoding
    /// ([`Key::as_bytes`]), as a reset announced by another gateway carries them (no rule id
    /// or key is made from what arrives).
    ///
    /// ```
    /// use tollgate_core::{Key, MemoryStore};
    /// use tollgate_wrappers::BlockedCache;
    /// let cache = BlockedCache::new(MemoryStore::new());
    /// assert!(!cache.forget_named("login", Key::new("user77").as_bytes()));
    /// ```
    pub fn forget_named(&self, rule: &str, key: &[u8]) -> bool {
        self.shared.table.lock().forget(rule, key)
    }

    /// Forgets the entry of the caller a receipt charged: under its rule, or the rule whose
    /// sub-bucket it charged (`<id>#i.S`).
    fn forget_refunded(&self, receipt: &Receipt) {
        let rule = receipt.rule().as_str();
        let logical = rule.split_once('#').map_or(rule, |(logical, _)| logical);
        self.forget_named(logical, receipt.key().as_bytes());
    }

    /// Forgets every entry (after a reconnect that may have missed reset announcements, say).
    ///
    /// ```
    /// use tollgate_core::MemoryStore;
    /// use tollgate_wrappers::BlockedCache;
    /// let cache = BlockedCache::new(MemoryStore::new());
    /// cache.clear();
    /// assert_eq!(cache.stats().entries, 0);
    /// ```
    pub fn clear(&self) {
        self.shared.table.lock().clear();
    }

    /// What the cache has done since it was built, and what it holds.
    ///
    /// ```
    /// use tollgate_core::MemoryStore;
    /// use tollgate_wrappers::BlockedCache;
    /// let stats = BlockedCache::new(MemoryStore::new()).stats();
    /// assert_eq!((stats.refused_locally, stats.entries), (0, 0));
    /// ```
    pub fn stats(&self) -> BlockedStats {
        let shared = &self.shared;
        BlockedStats {
            refused_locally: shared.refused_locally.load(Ordering::Relaxed),
            remembered: shared.remembered.load(Ordering::Relaxed),
            store_checks: shared.store_checks.load(Ordering::Relaxed),
            entries: shared.table.lock().len(),
        }
    }

    /// Records [`stats`](Self::stats) through the `metrics` facade (names in
    /// [`tollgate_core::metrics`]): `tollgate_blocked_keys` and
    /// `tollgate_blocked_refused_locally_total`. Call it now and then (a scrape, a ticker).
    ///
    /// ```
    /// let cache = tollgate_wrappers::BlockedCache::new(tollgate_core::MemoryStore::new());
    /// cache.publish_metrics(); // with no recorder installed, a no-op
    /// ```
    #[cfg(feature = "metrics")]
    pub fn publish_metrics(&self) {
        use tollgate_core::metrics::{BLOCKED_KEYS, BLOCKED_REFUSED_LOCALLY};
        let stats = self.stats();
        metrics::gauge!(BLOCKED_KEYS).set(stats.entries as f64);
        metrics::counter!(BLOCKED_REFUSED_LOCALLY).absolute(stats.refused_locally);
    }
}

/// Whether the cache may answer or remember `item`.
fn is_cached(item: &Item<'_>) -> bool {
    item.caches_blocked() && item.take() == Take::Exact && item.cost() > 0
}

impl<S: Store, C: Clock> Shared<S, C> {
    /// The batch refused here, if one of its items is a caller blocked until after `now`.
    fn refused_here(&self, items: &[Item<'_>], now: Timestamp) -> Option<BatchDecision> {
        // Debt must reach the store; a block gate (an escalating rule's block) is read there,
        // so its longer wait and its strikes stay the store's.
        if !items.iter().any(is_cached)
            || items
                .iter()
                .any(|item| item.take() == Take::AsDebt || item.is_read_only())
        {
            return None;
        }
        let mut found: smallvec::SmallVec<[Option<Decision>; 3]> = smallvec::SmallVec::new();
        {
            let mut table = self.table.lock();
            for item in items {
                found.push(match is_cached(item).then(|| table.find(item, now)) {
                    Some(Found::Refused(decision)) => Some(decision),
                    _ => None,
                });
            }
        }
        if found.iter().all(Option::is_none) {
            return None;
        }
        self.refused_locally.fetch_add(1, Ordering::Relaxed);
        let answers = items.iter().zip(found).map(|(item, found)| match found {
            Some(refusal) => ItemDecision::refused_here(refusal),
            None => {
                let limit = item.quota().limit();
                ItemDecision::uncharged(Decision::allowed(limit, limit, Duration::ZERO))
                    .counted_in_place(CountedIn::Nowhere)
            }
        });
        Some(BatchDecision::new(false, answers))
    }

    /// Remembers the refusals worth remembering in the store's `answer` to `items`, asked at
    /// `now`.
    fn remember(&self, items: &[Item<'_>], answer: &BatchDecision, now: Timestamp) {
        self.store_checks.fetch_add(1, Ordering::Relaxed);
        if answer.is_allowed() {
            return;
        }
        for (item, answer) in items.iter().zip(answer.items()) {
            self.remember_one(item, answer, now);
        }
    }

    fn remember_one(&self, item: &Item<'_>, answer: &ItemDecision, now: Timestamp) {
        let decision = answer.decision();
        let worth = is_cached(item)
            && answer.counted_in() == CountedIn::Store
            && !answer.refused_locally()
            && decision.refusal() == Some(RefusalReason::LimitReached)
            && !decision.retry_after().is_zero();
        if worth {
            self.table.lock().insert(item, decision, now);
            self.remembered.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl<S: Store, C: Clock> Store for BlockedCache<S, C> {
    async fn check(&self, items: &[Item<'_>]) -> Result<BatchDecision, StoreError> {
        let shared = &self.shared;
        if !items.iter().any(is_cached) {
            // No rule of this request caches: nothing to read or remember.
            shared.store_checks.fetch_add(1, Ordering::Relaxed);
            return shared.store.check(items).await;
        }
        let now = shared.clock.now();
        if let Some(refused) = shared.refused_here(items, now) {
            return Ok(refused);
        }
        let answer = shared.store.check(items).await?;
        shared.remember(items, &answer, now);
        Ok(answer)
    }

    /// A blocked caller's refusal, or the wrapped store's answer now if it has one.
    fn check_now(&self, items: &[Item<'_>]) -> Option<Result<BatchDecision, StoreError>> {
        let shared = &self.shared;
        if !items.iter().any(is_cached) {
            let answer = shared.store.check_now(items)?;
            shared.store_checks.fetch_add(1, Ordering::Relaxed);
            return Some(answer);
        }
        let now = shared.clock.now();
        if let Some(refused) = shared.refused_here(items, now) {
            return Some(Ok(refused));
        }
        let answer = shared.store.check_now(items)?;
        if let Ok(batch) = &answer {
            shared.remember(items, batch, now);
        }
        Some(answer)
    }

    async fn check_one(&self, item: &Item<'_>) -> Result<ItemDecision, StoreError> {
        let shared = &self.shared;
        let now = shared.clock.now();
        let items = std::slice::from_ref(item);
        if let Some(refused) = shared.refused_here(items, now)
            && let Some(answer) = refused.into_items().next()
        {
            return Ok(answer);
        }
        let answer = shared.store.check_one(item).await?;
        shared.store_checks.fetch_add(1, Ordering::Relaxed);
        shared.remember_one(item, &answer, now);
        Ok(answer)
    }

    /// The wrapped store's answer (a probe asks the store, blocked or not).
    fn peek(&self, item: &Item<'_>) -> impl Future<Output = Result<Decision, StoreError>> + Send {
        self.shared.store.peek(item)
    }

    /// Forgets the caller's entry (a refund may leave room the store would now grant: a
    /// `count_only_when` rule refunding a request that should not count), then refunds.
    fn refund(&self, receipt: Receipt) -> impl Future<Output = Result<(), RefundError>> + Send {
        self.forget_refunded(&receipt);
        self.shared.store.refund(receipt)
    }

    fn refund_now(&self, receipt: Receipt) -> RefundNow {
        self.forget_refunded(&receipt);
        self.shared.store.refund_now(receipt)
    }

    fn renew(&self, receipt: &Receipt) -> impl Future<Output = Result<(), StoreError>> + Send {
        self.shared.store.renew(receipt)
    }

    /// The wrapped store's, with cached refusals in every store under it.
    fn capabilities(&self) -> Capabilities {
        self.shared.store.capabilities().with_blocked_cache()
    }

    /// A remembered caller's refusal (then the wrapped store's, if it has one).
    fn refused_now(&self, items: &[Item<'_>]) -> Option<BatchDecision> {
        let shared = &self.shared;
        shared
            .refused_here(items, shared.clock.now())
            .or_else(|| shared.store.refused_now(items))
    }

    /// Forgets the caller here and resets it in the wrapped store.
    async fn reset(&self, rule: &RuleId, key: &Key) -> Result<(), StoreError> {
        self.forget(rule, key);
        let reset = self.shared.store.reset(rule, key).await;
        // A check that was on its way to the store during the reset may have remembered it.
        self.forget(rule, key);
        reset
    }
}
