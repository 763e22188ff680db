//! The fleet store: the type and its documentation, what it holds, how it is built, and what it
//! lends out (the shared store, the blocked-callers cache, a key's leased units).

use std::sync::Arc;

use super::counters::Counters;
use super::lease::Leases;
use super::sync::Syncs;
use crate::{BlockedCache, SubBuckets};
use tollgate_core::store_kit::CapabilitiesKit;
use tollgate_core::{Capabilities, Clock, Key, MemoryStore, RuleId, Store, SystemClock};
#[cfg(doc)] // Named in the docs only.
use tollgate_core::{Counting, FleetModes, Item, Take};

/// Wraps a shared store (Redis, Redis Cluster, a [`FallbackStore`](crate::FallbackStore) around
/// either) and counts each rule as its items say ([`Item::counting`]):
///
/// * [`Counting::Exact`]: passed to the shared store, every check (the default).
/// * [`Counting::Lease`]: units are taken from the shared store in batches (up-to items,
///   [`Take::UpTo`]) and spent here; a top-up is asked for in the background when half a lease
///   is left, and unspent units go back by receipt when the lease ends or the key goes quiet.
/// * [`Counting::Sync`]: decided on a local copy of the key's state; what was spent here is
///   pushed to the shared count as debt ([`Take::AsDebt`]) in one batch for every key, every
///   interval or at M units, and the shared count comes back on the same call.
/// * [`Counting::Split`]: this gateway's part of the quota, counted here alone (a private
///   in-memory store on the same clock); the shared store never sees it.
///
/// Exact items asking for sub-buckets ([`FleetModes::with_sub_buckets`]) are spread over them in
/// the shared store ([`SubBuckets`]), and callers the shared store refused on a rule that caches
/// them ([`FleetModes::with_cache_blocked`]) are refused here until their time
/// ([`BlockedCache`], reached through [`blocked`](Self::blocked)).
///
/// Its [`capabilities`](Store::capabilities) are the shared store's with all of that added;
/// around a [`Stores`](crate::Stores), leases and syncs only for its default store (put a
/// `FleetStore` inside each store of a `Stores` instead: see
/// [`Capabilities`](tollgate_core::Capabilities)).
///
/// While the shared store cannot answer (a [`FallbackStore`](crate::FallbackStore) underneath
/// applying each rule's [`OnStoreFailure`](tollgate_core::OnStoreFailure)), a leased rule spends what it
/// holds, then every check follows the rule's policy — those that waited for the key's call in
/// flight included, answered as the check that made it was (its error, or the policy) — and a
/// synced rule decides on its local copy as its policy says.
///
/// The bounds each mode keeps, against the exact limiter, are in [`Counting`]'s table. A
/// request whose rules are counted differently stays all-or-nothing: a local spend is put back
/// when the shared store refuses the rest.
///
/// Timers: leases end and quiet keys are settled by [`tick`](Self::tick), which
/// [`spawn_ticker`](Self::spawn_ticker) runs in the background; top-ups and pushes run on their
/// own as tasks of the Tokio runtime the check runs in (inline without one). Call
/// [`give_back`](Self::give_back) before a gateway stops, so it strands nothing.
///
/// What the modes give up: a leased, synced or split check has no receipt (a spend made here
/// cannot be refunded one request at a time), and [`peek`](Store::peek) reads the shared count
/// only.
///
/// ```
/// use tollgate_core::{
///     Counting, FleetModes, Item, Key, LeaseSettings, MemoryStore, Quota, Rate, RuleId, Store,
/// };
/// use tollgate_wrappers::FleetStore;
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build()?.block_on(async {
/// let shared = MemoryStore::new(); // in a fleet: the Redis store every gateway shares
/// let store = FleetStore::new(shared.clone());
/// let (rule, key) = (RuleId::new("partner")?, Key::new("acme"));
/// let quota = Quota::token_bucket(200, Rate::per_second(200))?;
/// let lease = Counting::Lease(LeaseSettings::new().max_units(20));
/// let item = Item::new(&rule, quota, &key).with_fleet_modes(FleetModes::new().with_counting(lease));
/// for _ in 0..50 {
///     assert!(store.check(&[item]).await?.is_allowed());
/// }
/// assert!(store.stats().store_calls < 50, "most checks were decided here");
/// store.give_back().await; // gives back what this gateway still holds
/// assert_eq!(store.leased(&rule, &key), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct FleetStore<S, C: Clock = SystemClock> {
    pub(super) inner: Arc<Inner<S, C>>,
}

impl<S, C: Clock> Clone for FleetStore<S, C> {
    fn clone(&self) -> Self {
        FleetStore {
            inner: Arc::clone(&self.inner),
        }
    }
}

/// What a [`FleetStore`] and its clones share.
pub(super) struct Inner<S, C: Clock> {
    /// The shared store, with hot keys spread over sub-buckets and refused callers remembered.
    pub(super) shared: BlockedCache<SubBuckets<S>, C>,
    /// What this fleet store does (the shared store's, with its own added), read once.
    pub(super) capabilities: Capabilities,
    pub(super) clock: C,
    /// Split rules' parts, counted on this gateway alone.
    pub(super) split: MemoryStore<C>,
    pub(super) leases: Leases,
    pub(super) syncs: Syncs<C>,
    /// One push at a time: a check that must push first waits for the push on its way.
    pub(super) pushing: Arc<tokio::sync::Mutex<()>>,
    /// Background jobs (top-ups, give-backs, pushes) running, and their end.
    pub(super) background: std::sync::atomic::AtomicUsize,
    pub(super) idle: tokio::sync::Notify,
    /// A background push has been asked for and has not started yet.
    pub(super) push_queued: std::sync::atomic::AtomicBool,
    pub(super) counters: Counters,
}

impl<S: Store> FleetStore<S, SystemClock> {
    /// Wraps `shared`, timing leases and syncs on the system clock.
    pub fn new(shared: S) -> Self {
        FleetStore::with_clock(shared, SystemClock::new())
    }
}

impl<S: Store, C: Clock + Clone> FleetStore<S, C> {
    /// Wraps `shared`, timing leases and syncs on `clock` (a test's manual clock, shared with
    /// the store's test time source).
    pub fn with_clock(shared: S, clock: C) -> Self {
        let shared = BlockedCache::with_clock(SubBuckets::new(shared), clock.clone());
        FleetStore {
            inner: Arc::new(Inner {
                capabilities: shared.capabilities().with_fleet_store(),
                shared,
                split: MemoryStore::builder().clock(clock.clone()).build(),
                syncs: Syncs::new(clock.clone()),
                clock,
                leases: Leases::default(),
                pushing: Arc::new(tokio::sync::Mutex::new(())),
                push_queued: std::sync::atomic::AtomicBool::new(false),
                background: std::sync::atomic::AtomicUsize::new(0),
                idle: tokio::sync::Notify::new(),
                counters: Counters::default(),
            }),
        }
    }

    /// The shared store.
    pub fn shared(&self) -> &S {
        self.inner.shared.inner().inner()
    }

    /// The cache of blocked callers in front of the shared store (rules with
    /// [`FleetModes::with_cache_blocked`]): for its [`stats`](BlockedCache::stats), and to follow
    /// fleet-wide resets (`tollgate_redis::ResetFollower::start(store.shared(),
    /// store.blocked())`).
    pub fn blocked(&self) -> &BlockedCache<SubBuckets<S>, C> {
        &self.inner.shared
    }

    /// Units this gateway holds leased for `rule` and `key`.
    pub fn leased(&self, rule: &RuleId, key: &Key) -> u64 {
        self.inner.leases.held(rule, key)
    }

    /// Synced rules this gateway counts exactly now, with the fleet size it learnt for each:
    /// their limit is below 10 gateways' worth of units per gateway (L < 10·G), so no push size
    /// keeps the fleet's over-admission within a tenth of the limit (see
    /// [`SyncSettings`](tollgate_core::SyncSettings)). Also in the metrics
    /// (`tollgate_fleet_rules_counted_exactly`) and in tollgate-admin's health report.
    ///
    /// ```
    /// let store = tollgate_wrappers::FleetStore::new(tollgate_core::MemoryStore::new());
    /// assert!(store.counted_exactly().is_empty());
    /// ```
    pub fn counted_exactly(&self) -> Vec<(RuleId, u64)> {
        self.inner.syncs.counted_exactly(self.inner.clock.now())
    }
}
