//! For crates that implement [`Store`](crate::Store) on another backend (feature `store-kit`).
//!
//! A store reports what it charged as a [`Charge`] inside an [`ItemDecision`]; receipts, and so
//! refunds, are made only from those. Applications never build charges: this module is the one
//! door for stores outside `tollgate-core` (the Redis store and the stores that wrap stores use
//! it), kept behind a feature an application never names. Cargo unifies features, so any crate
//! in a build that holds such a store can reach it too; what that allows is stated below.
//!
//! A store that wraps another store (the crate `tollgate-wrappers` holds tollgate's own) reaches
//! a little more through it: the sealed traits below, each named for what it lends — building
//! and re-marking answers ([`AnswerKit`], [`BatchKit`]), copying and narrowing receipts
//! ([`ReceiptKit`]), a [`MemoryStore`] answered without awaiting ([`LocalKit`]), what a wrapper
//! adds to its inner store's [`Capabilities`] ([`CapabilitiesKit`]), and a key no caller can
//! have ([`reserved_key`]). They cannot be implemented outside this crate.
//!
//! **Receipts stay single-use.** A [`Receipt`] is not `Clone`, and the public API builds one only
//! from a store's answer. The copy [`ReceiptKit::retry_copy`] makes shares the original's id and
//! spent mark, so refunding both gives back once (a conformance case: the memory store,
//! `DynStore`, `FallbackStore`, Redis and Redis Cluster run it), and [`ReceiptKit::narrowed`]
//! only ever shrinks what a receipt can give back. What this module does allow is building a
//! charge no store made ([`charged`] with any [`Charge`]) and refunding it: that gives back at
//! most what the store still holds for the rule and key — no more than
//! [`Store::reset`](crate::Store::reset), which every application may call.
//!
//! ```
//! use std::time::Duration;
//! use tollgate_core::store_kit;
//! use tollgate_core::{Decision, Timestamp};
//!
//! let charge = store_kit::window(Timestamp::from_secs(60), 1);
//! let answer = store_kit::charged(Decision::allowed(10, 9, Duration::from_secs(60)), charge);
//! assert_eq!(answer.charge(), Some(&charge));
//! ```

use smallvec::SmallVec;

use crate::{
    BatchDecision, Capabilities, Charge, Clock, CountedIn, Decision, ItemDecision, Key,
    MemoryStore, Quota, Receipt, RuleId, Timestamp,
};

/// An item's decision and what it charged.
pub fn charged(decision: Decision, charge: Charge) -> ItemDecision {
    ItemDecision {
        decision,
        charge: Some(charge),
        counted_in: crate::CountedIn::Store,
        owed: 0,
        counted_as: None,
        refused_locally: false,
    }
}

/// The same answer, reporting that the caller owes `owed` units of debt after it (see
/// [`Take::AsDebt`](crate::Take::AsDebt)).
pub fn owing(answer: ItemDecision, owed: u64) -> ItemDecision {
    answer.owing(owed)
}

/// A bucket, GCRA or pacing charge: the schedule moved `micros` later, to `until`.
pub fn scheduled(micros: u64, until: Timestamp) -> Charge {
    Charge::scheduled(micros, until)
}

/// A window charge: `cost` into the window starting at `start`.
pub fn window(start: Timestamp, cost: u64) -> Charge {
    Charge::window(start, cost)
}

/// A log charge: an entry of `cost` at `at`.
pub fn logged(at: Timestamp, cost: u64) -> Charge {
    Charge::logged(at, cost)
}

/// A concurrency charge: `slots` held under the store's hold id `id`.
pub fn held(id: u64, slots: u64) -> Charge {
    Charge::held(id, slots)
}

/// When the caller of the store call being made stops waiting for it, if a wrapper around the
/// store set a deadline (`FallbackStore` does, for every call to its
/// primary: now plus its timeout). A store whose work may still run after its caller gave up
/// (a request queued behind a stalled server) should not charge once this has passed: the
/// caller was answered by its failure policy, and would otherwise pay twice. Read it when the
/// call starts (it is a task-local value: a task the store spawns does not see it).
///
/// ```
/// use tollgate_core::store_kit;
/// assert_eq!(store_kit::call_deadline(), None, "no wrapper set one");
/// ```
pub fn call_deadline() -> Option<std::time::Instant> {
    crate::call_deadline::current()
}

/// `call`, made under `deadline` (or under the deadline already set around it, if earlier): what
/// [`call_deadline`] answers inside it. A wrapper that stops waiting for its inner store at
/// `deadline` sets it, so the store can refuse to charge once its caller has given up.
///
/// ```
/// use std::time::{Duration, Instant};
/// use tollgate_core::store_kit;
///
/// let deadline = Instant::now() + Duration::from_millis(50);
/// let seen = futures_executor::block_on(store_kit::within_call_deadline(deadline, async {
///     store_kit::call_deadline()
/// }));
/// assert_eq!(seen, Some(deadline));
/// ```
pub fn within_call_deadline<F: std::future::Future>(
    deadline: std::time::Instant,
    call: F,
) -> impl std::future::Future<Output = F::Output> {
    crate::call_deadline::within(deadline, call)
}

/// A duration in whole microseconds, rounded up and saturating: how the stores turn a wait into
/// the microseconds they count in, so a wait is never shortened.
///
/// ```
/// use std::time::Duration;
/// assert_eq!(tollgate_core::store_kit::micros_ceil(Duration::from_nanos(1_001)), 2);
/// ```
pub fn micros_ceil(duration: std::time::Duration) -> u64 {
    crate::clock::micros_ceil(duration)
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for crate::ItemDecision {}
    impl Sealed for crate::BatchDecision {}
    impl Sealed for crate::Receipt {}
    impl Sealed for crate::Capabilities {}
    impl<C: crate::Clock> Sealed for crate::MemoryStore<C> {}
}

/// A key no caller can have (its first byte is neither a part length nor the digest tag), for
/// state a store wrapper keeps beside callers' under a rule: `name` says what it is.
///
/// ```
/// use tollgate_core::{store_kit, Key};
/// assert_ne!(store_kit::reserved_key("gateways"), Key::new("gateways"));
/// ```
pub fn reserved_key(name: &str) -> Key {
    Key::reserved(name)
}

/// Building and re-marking one item's answer, for stores that wrap stores.
pub trait AnswerKit: sealed::Sealed + Sized {
    /// A refusal made on this gateway without asking the store (a cached refusal): it reads as
    /// the store's refusal would, and `refused_locally` is true.
    fn refused_here(decision: Decision) -> Self;
    /// The same answer, counted in `counted_in` instead.
    fn counted_in_place(self, counted_in: CountedIn) -> Self;
    /// This answer, charged under `rule` and `quota` rather than its item's own: its receipt
    /// refunds there (a sub-bucket's charge).
    fn counted_as(self, rule: RuleId, quota: Quota) -> Self;
    /// The same answer with its charge, if any, replaced by `remark(charge)` (a wrapper marking
    /// where a charge was made, so its refund goes back there).
    fn map_charge(self, remark: impl FnOnce(Charge) -> Charge) -> Self;
}

impl AnswerKit for ItemDecision {
    #[inline]
    fn refused_here(decision: Decision) -> Self {
        ItemDecision::refused_here(decision)
    }
    #[inline]
    fn counted_in_place(self, counted_in: CountedIn) -> Self {
        ItemDecision::counted_in_place(self, counted_in)
    }
    #[inline]
    fn counted_as(self, rule: RuleId, quota: Quota) -> Self {
        ItemDecision::counted_as(self, rule, quota)
    }
    #[inline]
    fn map_charge(mut self, remark: impl FnOnce(Charge) -> Charge) -> Self {
        self.charge = self.charge.map(remark);
        self
    }
}

/// Building a whole answer in place, for stores that wrap stores.
pub trait BatchKit: sealed::Sealed + Sized {
    /// An answer built from decisions already in place (no per-item conversion).
    fn from_decisions(allowed: bool, items: SmallVec<[ItemDecision; 3]>) -> Self;
    /// The answer to a request of one item.
    fn one(allowed: bool, item: ItemDecision) -> Self;
}

impl BatchKit for BatchDecision {
    #[inline]
    fn from_decisions(allowed: bool, items: SmallVec<[ItemDecision; 3]>) -> Self {
        BatchDecision::from_decisions(allowed, items)
    }
    #[inline]
    fn one(allowed: bool, item: ItemDecision) -> Self {
        BatchDecision::one(allowed, item)
    }
}

/// What a wrapper reads of a receipt and makes of it.
pub trait ReceiptKit: sealed::Sealed + Sized {
    /// Whether a failure-policy wrapper charged this in its local memory while its primary was
    /// down: refunded there, never in the primary (which never saw it).
    fn is_counted_locally(&self) -> bool;
    /// The same receipt again, sharing its id and spent mark: what a retried refund sends, and
    /// what a wrapper keeps while the original is away at another store. Refunding both gives
    /// back once.
    ///
    /// ```
    /// use futures_executor::block_on;
    /// use tollgate_core::store_kit::ReceiptKit;
    /// use tollgate_core::{Item, Key, MemoryStore, Quota, Rate, RuleId, Store};
    ///
    /// let rule = RuleId::new("posting")?;
    /// let store = MemoryStore::new();
    /// let key = Key::new("account-1");
    /// let quota = Quota::token_bucket(1, Rate::per_hour(1))?;
    /// let items = [Item::new(&rule, quota, &key)];
    /// let receipt = block_on(store.check(&items))?.into_receipts(&items).remove(0);
    /// let copy = receipt.retry_copy();
    /// block_on(store.refund(receipt))?;
    /// block_on(store.refund(copy))?; // gives back nothing more
    /// assert!(block_on(store.check(&items))?.is_allowed(), "the one token is back");
    /// assert!(!block_on(store.check(&items))?.is_allowed(), "and only one");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn retry_copy(&self) -> Self;
    /// The same receipt for only `units` of its charge, the last ones charged (a lease giving
    /// back what it did not spend). Never more than the charge itself.
    fn narrowed(self, units: u64) -> Self;
}

impl ReceiptKit for Receipt {
    #[inline]
    fn is_counted_locally(&self) -> bool {
        Receipt::is_counted_locally(self)
    }
    #[inline]
    fn retry_copy(&self) -> Self {
        Receipt::retry_copy(self)
    }
    #[inline]
    fn narrowed(self, units: u64) -> Self {
        Receipt::narrowed(self, units)
    }
}

/// A [`MemoryStore`] answered directly, for wrappers that keep local state in one and must not
/// await (the same answers as its [`Store`](crate::Store) methods).
pub trait LocalKit: sealed::Sealed {
    /// [`Store::check`](crate::Store::check), answered directly.
    fn check_sync(&self, items: &[crate::Item<'_>]) -> BatchDecision;
    /// [`Store::peek`](crate::Store::peek), answered directly.
    fn peek_sync(&self, item: &crate::Item<'_>) -> Decision;
    /// [`Store::refund`](crate::Store::refund), done directly.
    fn refund_sync(&self, receipt: &Receipt);
    /// [`Store::reset`](crate::Store::reset), done directly.
    fn reset_sync(&self, rule: &RuleId, key: &Key);
}

impl<C: Clock> LocalKit for MemoryStore<C> {
    #[inline]
    fn check_sync(&self, items: &[crate::Item<'_>]) -> BatchDecision {
        MemoryStore::check_sync(self, items)
    }
    #[inline]
    fn peek_sync(&self, item: &crate::Item<'_>) -> Decision {
        MemoryStore::peek_sync(self, item)
    }
    #[inline]
    fn refund_sync(&self, receipt: &Receipt) {
        MemoryStore::refund_sync(self, receipt)
    }
    #[inline]
    fn reset_sync(&self, rule: &RuleId, key: &Key) {
        MemoryStore::reset_sync(self, rule, key)
    }
}

/// What a wrapper adds to the capabilities of the store it wraps.
pub trait CapabilitiesKit: sealed::Sealed + Sized {
    /// Whether an item naming `name` is counted in a store of that name.
    fn knows_store(&self, name: &str) -> bool;
    /// The store names held, in the order they were added.
    fn names(&self) -> impl Iterator<Item = &str>;
    /// With sub-buckets around it.
    fn with_sub_buckets(self) -> Self;
    /// With a blocked-caller cache around it.
    fn with_blocked_cache(self) -> Self;
    /// With the fleet's counting modes around it (whose own blocked cache and sub-buckets are
    /// already added): splits everywhere, leases and syncs for the default store only.
    fn with_fleet_store(self) -> Self;
    /// Named stores: `default` for the default store, and each named store's for its name.
    fn stores<'n>(default: Self, named: impl IntoIterator<Item = (&'n str, Self)>) -> Self;
}

impl CapabilitiesKit for Capabilities {
    fn knows_store(&self, name: &str) -> bool {
        Capabilities::knows_store(self, name)
    }
    fn names(&self) -> impl Iterator<Item = &str> {
        Capabilities::names(self)
    }
    fn with_sub_buckets(self) -> Self {
        Capabilities::with_sub_buckets(self)
    }
    fn with_blocked_cache(self) -> Self {
        Capabilities::with_blocked_cache(self)
    }
    fn with_fleet_store(self) -> Self {
        Capabilities::with_fleet_store(self)
    }
    fn stores<'n>(default: Self, named: impl IntoIterator<Item = (&'n str, Self)>) -> Self {
        Capabilities::stores(default, named)
    }
}
