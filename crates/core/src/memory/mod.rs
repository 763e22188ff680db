//! The in-memory store: keyed, concurrent, sharded and bounded.
//!
//! State lives in shards, each behind its own reader-writer lock; a key's shard comes from a
//! hash of the key with a per-store random seed (so callers cannot aim keys at one shard, and a
//! caller's several rules share one), its slot from that hash with the rule mixed in. Every check reads the clock once, before locking, and answers with a ready future: no
//! boxing, and no allocation unless a new key is stored (or a request has more than three rules).
//!
//! * A one-rule check of a token bucket, GCRA or pacing key the store already holds takes the
//!   shard's lock **shared** and charges with one compare-and-swap on the key's timestamp, so
//!   checks on one shard run side by side and a refusal writes nothing.
//! * Everything else (new keys, window algorithms, batches of several rules) takes the write
//!   locks of the shards involved, in a fixed order so batches never deadlock; holding them is
//!   what makes a batch all-or-nothing against every other check.
//!
//! **Time** is the clock's, read once per check. A clock that steps back grants nothing and
//! freezes nobody: each algorithm reads such a "now" by the same rule as the Redis store (see
//! [`crate::algorithm`]), so both stores decide alike. A clock past
//! [`Timestamp::MAX_SUPPORTED`] (the year 2112) is not supported: a check, peek or refund then
//! answers a [`StoreError`] that [`is_time_out_of_range`](StoreError::is_time_out_of_range)
//! and names the range, before it reads or changes anything (as the Redis store does), and
//! answers normally once the clock is back in range; [`sweep`](MemoryStore::sweep) sweeps
//! nothing meanwhile.
//!
//! **Quotas per key.** Each state remembers the quota it was last checked under (a numbered slot
//! per rule, up to 1,024 distinct quotas per rule and shard), so per-plan quotas under one rule,
//! and quotas changed while callers have state, are each read, swept and evicted by their own
//! numbers. Should one rule see more distinct quotas than that within one shard, quotas no state
//! uses are freed first, and then the states of the least used quota are dropped (counted as
//! lossy evictions).
//!
//! **Memory.** Token bucket, GCRA and pacing keep 24 bytes per key (a 16-byte inline key and one
//! word packing the timestamp, the quota's slot and the refused mark; keys over 15 encoded bytes
//! take one extra allocation), windows 32–40 (the count packs the slot and mark too), a sliding log 16 bytes per entry. BENCHMARKS.md has
//! measured bytes per key.
//!
//! **Bounds and eviction.** The store holds at most [`max_keys`](MemoryStoreBuilder::max_keys)
//! keys (default [`DEFAULT_MAX_KEYS`]), split evenly across shards. Eviction order:
//!
//! 1. state that loses nothing when dropped — expired windows, logs with nothing in the window,
//!    buckets that are full again — is removed by sweeps, which run when a shard has doubled
//!    since its last sweep, when it is full, and at least once a minute of store time;
//! 2. only when a shard is full of live state, a sixteenth of the shard at a time is evicted,
//!    ordered so that the least is lost: callers **refused since they were last allowed** go
//!    last; among the rest, those holding the **smallest share of their own limit** first, then
//!    those whose state would be **idle soonest**. Each such lossy eviction is counted in
//!    [`MemoryStats::lossy_evictions`].
//!
//! So a flood of fresh keys — even keys that each spend their whole limit — evicts other flood
//! keys first: a caller who is being refused is forgotten only when the refused callers alone
//! fill its shard, and cannot reset itself by flooding. Shards hold at least 64 keys each (small
//! stores get fewer shards) so that guarantee is not spoiled by tiny shards.
//!
//! ```
//! use futures_executor::block_on;
//! use tollgate_core::{Item, Key, MemoryStore, Quota, Rate, RuleId, Store};
//!
//! let store = MemoryStore::builder().max_keys(100_000).build();
//! let rule = RuleId::new("reads")?;
//! let key = Key::new("user77");
//! let item = Item::new(&rule, Quota::token_bucket(50, Rate::per_second(10))?, &key);
//! let answer = block_on(store.check(&[item]))?;
//! assert_eq!(answer.items()[0].decision().remaining(), 49);
//! assert_eq!(store.stats().keys, 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod atomic_tat;
mod compact_key;
mod known_batch;
mod ledger;
mod locked_shards;
mod ops;
mod quota_slots;
mod shard;
mod stored;
mod table;
mod thin_bytes;

use std::future::{Future, ready};
use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{RwLock, RwLockWriteGuard};
use smallvec::SmallVec;

use self::atomic_tat::AtomicTat;
use self::locked_shards::LockedShards;
use self::ops::{InsertContext, Location};
use self::shard::Shard;
use crate::{
    Algorithm, BatchDecision, Clock, Decision, Item, ItemDecision, Key, Receipt, RefundError,
    RefundNow, RuleId, Store, StoreError, SystemClock, Take, Timestamp,
};

/// Per-item answers, inline for up to three rules per request (more spill to the heap).
type Answers = SmallVec<[ItemDecision; 3]>;

/// The default bound on keys: 2^20 (about a million; some 50 MB of token buckets).
pub const DEFAULT_MAX_KEYS: usize = 1 << 20;

/// Small stores get fewer shards, so that each holds at least this many keys.
const MIN_KEYS_PER_SHARD: usize = 64;

/// How a call reads a clock past [`Timestamp::MAX_SUPPORTED`].
trait Range {
    /// What such a clock answers.
    type Error;
    /// `now`, as the call may use it.
    fn read(now: Timestamp) -> Result<Timestamp, Self::Error>;
}

/// The [`Store`] calls: an error naming the supported range, before anything is read or
/// changed.
struct Strict;

impl Range for Strict {
    type Error = StoreError;

    #[inline(always)]
    fn read(now: Timestamp) -> Result<Timestamp, StoreError> {
        if now > Timestamp::MAX_SUPPORTED {
            return Err(StoreError::time_out_of_range(now));
        }
        Ok(now)
    }
}

/// A wrapper's own memory (the `*_sync` calls, on the wrapper's clock, which have no error to
/// answer): the last supported time, so no state ever holds a time the store cannot represent.
struct Lenient;

impl Range for Lenient {
    type Error = std::convert::Infallible;

    #[inline(always)]
    fn read(now: Timestamp) -> Result<Timestamp, std::convert::Infallible> {
        Ok(now.min(Timestamp::MAX_SUPPORTED))
    }
}

/// A lock on its own cache lines, so neighbouring shards do not slow each other down.
#[repr(align(128))]
struct Padded<T>(T);

/// Counts a [`MemoryStore`] keeps about itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct MemoryStats {
    /// Keys held now (all rules, all algorithms).
    pub keys: usize,
    /// States removed because dropping them lost nothing.
    pub lossless_evictions: u64,
    /// States still in use evicted because a shard was full: each one forgot part of someone's usage.
    pub lossy_evictions: u64,
}

/// The in-memory [`Store`]. Cloning is cheap and clones share state.
pub struct MemoryStore<C: Clock = SystemClock> {
    inner: Arc<Inner<C>>,
}

impl<C: Clock> Clone for MemoryStore<C> {
    fn clone(&self) -> Self {
        MemoryStore {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<C: Clock> std::fmt::Debug for MemoryStore<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore")
            .field("shards", &self.inner.shards.len())
            .field("max_keys_per_shard", &self.inner.capacity_per_shard)
            .finish_non_exhaustive()
    }
}

struct Inner<C> {
    clock: C,
    shards: Box<[Padded<RwLock<Shard>>]>,
    shard_mask: usize,
    capacity_per_shard: usize,
    seed: foldhash::fast::RandomState,
    lossless_evictions: AtomicU64,
    lossy_evictions: AtomicU64,
}

/// Builds a [`MemoryStore`].
#[derive(Debug, Clone)]
#[must_use]
pub struct MemoryStoreBuilder<C = SystemClock> {
    clock: C,
    max_keys: usize,
    shards: usize,
}

impl MemoryStore<SystemClock> {
    /// A store with the system clock and default bounds.
    pub fn new() -> Self {
        MemoryStore::builder().build()
    }

    /// Starts building a store.
    pub fn builder() -> MemoryStoreBuilder<SystemClock> {
        let parallelism = std::thread::available_parallelism().map_or(4, usize::from);
        MemoryStoreBuilder {
            clock: SystemClock::new(),
            max_keys: DEFAULT_MAX_KEYS,
            shards: (parallelism * 16).clamp(64, 1024),
        }
    }
}

impl Default for MemoryStore<SystemClock> {
    fn default() -> Self {
        MemoryStore::new()
    }
}

impl<C> MemoryStoreBuilder<C> {
    /// The most keys the store holds (default [`DEFAULT_MAX_KEYS`]); see the module docs for
    /// what happens at the bound.
    pub fn max_keys(mut self, max_keys: usize) -> Self {
        self.max_keys = max_keys.max(1);
        self
    }

    /// How many independently locked shards (rounded up to a power of two; default 16 per
    /// core, at least 64). A store whose [`max_keys`](Self::max_keys) is small gets fewer, so
    /// that every shard holds at least 64 keys.
    pub fn shards(mut self, shards: usize) -> Self {
        self.shards = shards.clamp(1, 1 << 16);
        self
    }

    /// The clock the store decides by (tests use `tollgate_testing::ManualClock`).
    pub fn clock<D: Clock>(self, clock: D) -> MemoryStoreBuilder<D> {
        MemoryStoreBuilder {
            clock,
            max_keys: self.max_keys,
            shards: self.shards,
        }
    }

    /// Builds the store.
    pub fn build(self) -> MemoryStore<C>
    where
        C: Clock,
    {
        let by_keys = (self.max_keys / MIN_KEYS_PER_SHARD).max(1);
        let largest_power_of_two_within = 1 << by_keys.ilog2();
        let shards = self
            .shards
            .next_power_of_two()
            .min(largest_power_of_two_within);
        MemoryStore {
            inner: Arc::new(Inner {
                clock: self.clock,
                shards: (0..shards)
                    .map(|_| Padded(RwLock::new(Shard::new())))
                    .collect(),
                shard_mask: shards - 1,
                capacity_per_shard: (self.max_keys / shards).max(1),
                seed: foldhash::fast::RandomState::default(),
                lossless_evictions: AtomicU64::new(0),
                lossy_evictions: AtomicU64::new(0),
            }),
        }
    }
}

impl<C: Clock> InsertContext for Inner<C> {
    fn capacity_per_shard(&self) -> usize {
        self.capacity_per_shard
    }

    fn rehash(&self, rule: u32, key: &[u8]) -> u64 {
        self.hash(rule, key)
    }

    fn record_removed(&self, lossless: usize, lossy: usize) {
        if lossless > 0 {
            self.lossless_evictions
                .fetch_add(lossless as u64, Ordering::Relaxed);
        }
        if lossy > 0 {
            self.lossy_evictions
                .fetch_add(lossy as u64, Ordering::Relaxed);
        }
    }
}

/// A (rule, key) pair's table hash from the key's seeded hash: the rule's number spread over
/// the word and mixed in by a 64-bit finalizer (MurmurHash3's), so each bit of the result
/// depends on every bit of both, and pairs only collide as often as random words would.
fn with_rule(key_hash: u64, rule: u32) -> u64 {
    let mut h = key_hash ^ u64::from(rule).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    h ^= h >> 33;
    h = h.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    h ^= h >> 33;
    h = h.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
    h ^ (h >> 33)
}

impl<C: Clock> Inner<C> {
    fn hash(&self, rule: u32, key: &[u8]) -> u64 {
        with_rule(self.seed.hash_one(key), rule)
    }

    fn locate(&self, rule: &RuleId, key: &Key) -> Location {
        self.locate_hashed(rule, self.seed.hash_one(key.as_bytes()))
    }

    /// A key's shard comes from the key alone, so the several rules of one caller's request
    /// share one shard and a batch of them takes one lock (three rules cost 4.8 times one
    /// check when each rule picked its own shard; measured by `benches/check.rs`).
    fn locate_hashed(&self, rule: &RuleId, key_hash: u64) -> Location {
        let rule = rule.number();
        Location {
            // The table uses the low bits and the top seven of its hash; the shard the middle
            // bits of the key's.
            shard: (key_hash >> 32) as usize & self.shard_mask,
            rule,
            hash: with_rule(key_hash, rule),
        }
    }

    /// Each item's location, hashing a key once when items in a row name the same one (the
    /// usual batch: several rules on one caller).
    fn locate_all(&self, items: &[Item<'_>]) -> SmallVec<[Location; 4]> {
        let mut last: Option<(&[u8], u64)> = None;
        items
            .iter()
            .map(|item| {
                let key = item.key().as_bytes();
                let key_hash = match last {
                    Some((seen, hash)) if seen == key => hash,
                    _ => self.seed.hash_one(key),
                };
                last = Some((key, key_hash));
                self.locate_hashed(item.rule(), key_hash)
            })
            .collect()
    }

    fn lock(&self, shard: usize) -> RwLockWriteGuard<'_, Shard> {
        self.shards[shard].0.write()
    }

    /// The clock's "now", as `R` reads a time past the supported range.
    #[inline(always)]
    fn now<R: Range>(&self) -> Result<Timestamp, R::Error> {
        R::read(self.clock.now())
    }

    /// One item is answered by [`check_one`](Self::check_one), inline: the answer is built
    /// where the caller keeps it (a batch answer is a few hundred bytes, and copying it
    /// between frames cost as much as the check itself, measured with `perf`). Always inlined:
    /// left to the heuristics, it stops being inlined as soon as a second caller appears.
    #[inline(always)]
    fn check<R: Range>(&self, items: &[Item<'_>]) -> Result<BatchDecision, R::Error> {
        match items {
            [item] => {
                let answer = self.check_one::<R>(item)?;
                // An item alone is all-or-nothing by itself; a shadow item never refuses.
                let allowed = answer.decision.is_allowed() || !item.is_enforcing();
                Ok(BatchDecision::one(allowed, answer))
            }
            _ => self.check_batch::<R>(items),
        }
    }

    /// The common case, one rule: one lock, no sorting.
    ///
    /// The lock-free path reads the clock before it looks. The exclusive path reads it again
    /// once it holds the lock: a "now" read before waiting for the lock can be older than the
    /// time another thread charged the key at, and read as a clock that stepped back, whose
    /// rewrite (capping the backlog at the quota's reach) would hand the delay back as tokens.
    /// Read under the lock, it is never older than any charge the state holds.
    #[inline(always)]
    fn check_one<R: Range>(&self, item: &Item<'_>) -> Result<ItemDecision, R::Error> {
        if item.is_read_only() {
            return Ok(ItemDecision::new(self.peek::<R>(item)?, None));
        }
        let at = self.locate(item.rule(), item.key());
        if item.take() == Take::Exact
            && let Some(answer) = self.check_known_timestamp(item, at, self.now::<R>()?)
        {
            return Ok(answer);
        }
        let mut shard = self.lock(at.shard);
        let now = self.now::<R>()?;
        let (decision, charge, owed) = ops::evaluate(&mut shard, at, item, now, now, self);
        Ok(ItemDecision::new(decision, charge).owing(owed))
    }

    /// The fastest path: a one-timestamp algorithm (token bucket, GCRA, pacing) on a key the
    /// store already holds takes only a shared lock and one compare-and-swap, so checks on one
    /// shard run side by side and a refusal writes nothing (but the refused mark, once). `None`
    /// when the key is new, was last checked under another quota or must be rewritten first,
    /// or the algorithm keeps more state, for the exclusive path to handle.
    #[inline]
    fn check_known_timestamp(
        &self,
        item: &Item<'_>,
        at: Location,
        now: Timestamp,
    ) -> Option<ItemDecision> {
        if !keeps_one_timestamp(item) {
            return None;
        }
        let shard = self.shards[at.shard].0.read();
        let (decision, charge) = check_known_timestamp(&shard, at, item, now)?;
        Some(ItemDecision::new(decision, charge))
    }

    fn check_batch<R: Range>(&self, items: &[Item<'_>]) -> Result<BatchDecision, R::Error> {
        let locations = self.locate_all(items);
        let mut locked = LockedShards::lock(&locations, |shard| self.lock(shard));
        let now = self.now::<R>()?;
        // The answer is built where it is returned from rather than moved in at the end: one
        // copy of a few hundred bytes fewer (`memmove` of answers is a tenth of a three-rule
        // batch's time in `perf`).
        let mut batch = BatchDecision::from_decisions(true, Answers::new());
        if let LockedShards::One(shard) = &locked {
            if known_batch::check_known_batch(shard, items, &locations, now, batch.items_mut()) {
                return Ok(batch);
            }
            batch.items_mut().clear();
        }

        // Several pacing rules are all scheduled at the latest of their earliest slots.
        let not_before = items
            .iter()
            .zip(&locations)
            .filter(|(item, _)| {
                item.charges_at_once()
                    && item.cost() > 0
                    && item.quota().algorithm() == Algorithm::LeakyBucket
            })
            .map(|(item, at)| ops::earliest_start(locked.shard(at), *at, item, now))
            .fold(now, Timestamp::max);

        let answers = batch.items_mut();
        let mut allowed = true;
        for (item, at) in items.iter().zip(&locations) {
            let shard = locked.shard(at);
            let (decision, charge, owed) = if item.is_read_only() {
                (ops::peek(shard, *at, item, item.cost(), now), None, 0)
            } else if item.is_enforcing() {
                // A key the store holds, as `check_one` decides it (under the exclusive lock
                // its compare-and-swap succeeds at once; a plain store instead measured no
                // faster); pacing scheduled after another rule's slot takes the general path.
                let known =
                    (item.take() == Take::Exact && not_before == now && keeps_one_timestamp(item))
                        .then(|| check_known_timestamp(shard, *at, item, now))
                        .flatten();
                match known {
                    Some((decision, charge)) => (decision, charge, 0),
                    None => ops::evaluate(shard, *at, item, now, not_before, self),
                }
            } else {
                // Filled in below, once the request's fate is known.
                (Decision::allowed(0, 0, std::time::Duration::ZERO), None, 0)
            };
            allowed &= decision.is_allowed();
            answers.push(ItemDecision::new(decision, charge).owing(owed));
        }
        if !allowed {
            // All or nothing: take back every charge, newest first; then report every item
            // that did not refuse as it stands with none of them charged (items may share keys).
            let pairs = items.iter().zip(&locations).zip(answers.iter_mut());
            for ((item, at), answer) in pairs.rev() {
                if let Some(charge) = answer.charge.take() {
                    let key = item.key().as_bytes();
                    ops::refund(locked.shard(at), *at, key, item.quota(), &charge, now);
                }
            }
            let pairs = items.iter().zip(&locations).zip(answers.iter_mut());
            for ((item, at), answer) in pairs {
                if item.charges_at_once() && answer.decision.is_allowed() {
                    answer.decision = ops::peek(locked.shard(at), *at, item, 0, now);
                }
            }
        }
        // Shadow items act as if enforced alone; they are charged only if the request goes ahead.
        let pairs = items.iter().zip(&locations).zip(answers.iter_mut());
        for ((item, at), answer) in pairs.filter(|((item, _), _)| !item.is_enforcing()) {
            let shard = locked.shard(at);
            (answer.decision, answer.charge) = if allowed {
                let (decision, charge, _) = ops::evaluate(shard, *at, item, now, now, self);
                (decision, charge)
            } else {
                (ops::peek(shard, *at, item, item.cost(), now), None)
            };
        }
        drop(locked);
        batch.set_allowed(allowed);
        Ok(batch)
    }

    fn peek<R: Range>(&self, item: &Item<'_>) -> Result<Decision, R::Error> {
        let at = self.locate(item.rule(), item.key());
        let now = self.now::<R>()?;
        let shard = self.shards[at.shard].0.read();
        Ok(ops::peek(&shard, at, item, item.cost(), now))
    }

    /// Refunds once: a receipt already spent (a replayed copy) gives back nothing. A clock past
    /// the supported range leaves the receipt unspent, to refund again once it is back.
    fn refund<R: Range>(&self, receipt: &Receipt) -> Result<(), R::Error> {
        let at = self.locate(receipt.rule(), receipt.key());
        let mut shard = self.lock(at.shard);
        // Read under the lock, as a check's exclusive path does.
        let now = self.now::<R>()?;
        if receipt.take_spent() {
            return Ok(());
        }
        let key = receipt.key().as_bytes();
        ops::refund(&mut shard, at, key, receipt.quota(), receipt.charge(), now);
        Ok(())
    }

    fn reset(&self, rule: &RuleId, key: &Key) {
        let at = self.locate(rule, key);
        ops::reset(&mut self.lock(at.shard), at, key.as_bytes());
    }
}

/// Whether `item`'s algorithm keeps one timestamp (token bucket, GCRA, pacing), the state the
/// compare-and-swap path can check.
#[inline]
fn keeps_one_timestamp(item: &Item<'_>) -> bool {
    matches!(
        item.quota().algorithm(),
        Algorithm::TokenBucket | Algorithm::LeakyBucket
    )
}

/// A one-timestamp check of a key `shard` already holds under `item`'s quota, by one
/// compare-and-swap on its cell; `None` for the exclusive path (a new key, another quota, a state
/// to rewrite first).
#[inline(always)]
fn check_known_timestamp(
    shard: &Shard,
    at: Location,
    item: &Item<'_>,
    now: Timestamp,
) -> Option<(Decision, Option<crate::Charge>)> {
    let (cell, slot) = known_timestamp(shard, at, item)?;
    cell.check_shared(item.quota(), slot, now, item.cost(), item.is_enforcing())
}

/// The cell of a key `shard` holds under `item`'s quota, and the quota's slot.
#[inline(always)]
fn known_timestamp<'s>(
    shard: &'s Shard,
    at: Location,
    item: &Item<'_>,
) -> Option<(&'s AtomicTat, u16)> {
    let table = shard.table::<AtomicTat>(at.rule)?;
    let slot = table.slots.find(item.quota())?;
    Some((table.find(at.hash, item.key().as_bytes())?, slot))
}

impl<C: Clock> MemoryStore<C> {
    /// What the store holds and has evicted.
    pub fn stats(&self) -> MemoryStats {
        MemoryStats {
            keys: self
                .inner
                .shards
                .iter()
                .map(|shard| shard.0.read().len())
                .sum(),
            lossless_evictions: self.inner.lossless_evictions.load(Ordering::Relaxed),
            lossy_evictions: self.inner.lossy_evictions.load(Ordering::Relaxed),
        }
    }

    /// Records [`stats`](Self::stats) as `tollgate_memory_keys` (gauge) and
    /// `tollgate_memory_lossy_evictions_total` (counter) through the `metrics` facade (feature
    /// `metrics`). Counting keys reads every shard, so this is not done per request: call it
    /// where metrics are gathered (before rendering a `/metrics` page, say).
    ///
    /// ```
    /// use tollgate_core::MemoryStore;
    ///
    /// let store = MemoryStore::new();
    /// store.publish_metrics(); // with no recorder installed, a no-op
    /// ```
    #[cfg(feature = "metrics")]
    pub fn publish_metrics(&self) {
        let stats = self.stats();
        metrics::gauge!(crate::metrics::MEMORY_KEYS).set(stats.keys as f64);
        metrics::counter!(crate::metrics::MEMORY_LOSSY_EVICTIONS).absolute(stats.lossy_evictions);
    }

    /// Removes every state that loses nothing when dropped, now. Sweeps also run on their own
    /// (see the module docs); call this from a timer to return memory sooner after a burst.
    /// While the clock reads past [`Timestamp::MAX_SUPPORTED`] it removes nothing.
    pub fn sweep(&self) {
        for shard in self.inner.shards.iter() {
            let Ok(now) = self.inner.now::<Strict>() else {
                return;
            };
            let removed = shard.0.write().sweep(now);
            self.inner.record_removed(removed, 0);
        }
    }

    /// The store's clock.
    pub fn clock(&self) -> &C {
        &self.inner.clock
    }

    /// [`Store::check`], answered directly (for wrappers that must not await). A clock past
    /// [`Timestamp::MAX_SUPPORTED`] is read as that last supported time (here alone: the
    /// [`Store`] calls answer an error).
    pub(crate) fn check_sync(&self, items: &[Item<'_>]) -> BatchDecision {
        let Ok(batch) = self.inner.check::<Lenient>(items);
        batch
    }

    /// [`Store::peek`], answered directly (a clock past the range read as for `check_sync`).
    pub(crate) fn peek_sync(&self, item: &Item<'_>) -> Decision {
        let Ok(decision) = self.inner.peek::<Lenient>(item);
        decision
    }

    /// [`Store::refund`], done directly (a clock past the range read as for `check_sync`).
    pub(crate) fn refund_sync(&self, receipt: &Receipt) {
        let Ok(()) = self.inner.refund::<Lenient>(receipt);
    }

    /// [`Store::reset`], done directly.
    pub(crate) fn reset_sync(&self, rule: &RuleId, key: &Key) {
        self.inner.reset(rule, key);
    }
}

impl<C: Clock> Store for MemoryStore<C> {
    fn check(
        &self,
        items: &[Item<'_>],
    ) -> impl Future<Output = Result<BatchDecision, StoreError>> + Send {
        ready(self.inner.check::<Strict>(items))
    }

    fn check_now(&self, items: &[Item<'_>]) -> Option<Result<BatchDecision, StoreError>> {
        Some(self.inner.check::<Strict>(items))
    }

    fn check_one(
        &self,
        item: &Item<'_>,
    ) -> impl Future<Output = Result<ItemDecision, StoreError>> + Send {
        ready(self.inner.check_one::<Strict>(item))
    }

    fn peek(&self, item: &Item<'_>) -> impl Future<Output = Result<Decision, StoreError>> + Send {
        ready(self.inner.peek::<Strict>(item))
    }

    /// A clock past [`Timestamp::MAX_SUPPORTED`] hands the receipt back unspent in the error.
    fn refund(&self, receipt: Receipt) -> impl Future<Output = Result<(), RefundError>> + Send {
        let refunded = self.inner.refund::<Strict>(&receipt);
        ready(refunded.map_err(|error| RefundError::new(error, receipt)))
    }

    fn refund_now(&self, receipt: Receipt) -> RefundNow {
        let refunded = self.inner.refund::<Strict>(&receipt);
        RefundNow::Done(refunded.map_err(|error| RefundError::new(error, receipt)))
    }

    fn reset(
        &self,
        rule: &RuleId,
        key: &Key,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        self.inner.reset(rule, key);
        ready(Ok(()))
    }

    /// This gateway's own memory: a split's part is counted right here.
    fn capabilities(&self) -> crate::Capabilities {
        crate::Capabilities::this_gateway()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_callers_rules_share_a_shard_and_not_a_slot() {
        let store = MemoryStore::builder().shards(64).build();
        let rules = ["per-ip", "per-route", "daily"].map(|name| RuleId::new(name).unwrap());
        for caller in 0..200 {
            let key = Key::new(format!("user:{caller}"));
            let at = rules.each_ref().map(|rule| store.inner.locate(rule, &key));
            assert!(at.iter().all(|each| each.shard == at[0].shard));
            assert!(
                at[0].hash != at[1].hash && at[1].hash != at[2].hash && at[0].hash != at[2].hash
            );
        }
    }

    #[test]
    fn callers_spread_over_the_shards() {
        let store = MemoryStore::builder().shards(16).build();
        let rule = RuleId::new("per-ip").unwrap();
        let mut per_shard = [0usize; 16];
        for caller in 0..16_000 {
            per_shard[store
                .inner
                .locate(&rule, &Key::new(format!("{caller}")))
                .shard] += 1;
        }
        // 1,000 expected in each; a fair hash stays well within ±25 %.
        assert!(
            per_shard.iter().all(|&n| (750..1250).contains(&n)),
            "{per_shard:?}"
        );
    }
}
