//! Fleet modes: a store combinator that counts some rules on this gateway and settles with the
//! shared store in batches ([`Counting::Lease`], [`Counting::Sync`]), counts split rules on this
//! gateway alone ([`Counting::Split`]), and every other rule in the shared store on each check
//! (spread over sub-buckets when the rule asks).

mod lease;
mod sync;
mod table;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use self::lease::{Leases, Spend};
use self::sync::{Local, Push, Syncs};
use crate::{
    BatchDecision, BlockedCache, Clock, CountedIn, Counting, Decision, Item, ItemDecision, Key,
    LeaseSettings, MemoryStore, Receipt, RefundError, RefundNow, RuleId, Store, StoreError,
    SubBuckets, SyncSettings, SystemClock, Take,
};

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
/// Exact items asking for sub-buckets ([`Item::with_sub_buckets`]) are spread over them in the
/// shared store ([`SubBuckets`]), and callers the shared store refused on a rule that caches
/// them ([`Item::with_cache_blocked`]) are refused here until their time ([`BlockedCache`],
/// reached through [`blocked`](Self::blocked)).
///
/// The bounds each mode keeps, against the exact limiter, are in [`Counting`]'s table. A
/// request whose rules are counted differently stays all-or-nothing: a local spend is put back
/// when the shared store refuses the rest.
///
/// Timers: leases end and quiet keys are settled by [`tick`](Self::tick), which
/// [`spawn_ticker`](Self::spawn_ticker) runs in the background; top-ups and pushes run on their
/// own as tasks of the Tokio runtime the check runs in (inline without one). Call
/// [`settle`](Self::settle) before a gateway stops, so it strands nothing.
///
/// What the modes give up: a leased, synced or split check has no receipt (a spend made here
/// cannot be refunded one request at a time), and [`peek`](Store::peek) reads the shared count
/// only.
///
/// ```
/// use tollgate_core::{
///     Counting, FleetStore, Item, Key, LeaseSettings, MemoryStore, Quota, Rate, RuleId, Store,
/// };
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build()?.block_on(async {
/// let shared = MemoryStore::new(); // in a fleet: the Redis store every gateway shares
/// let store = FleetStore::new(shared.clone());
/// let (rule, key) = (RuleId::new("partner")?, Key::new("acme"));
/// let quota = Quota::token_bucket(200, Rate::per_second(200))?;
/// let item = Item::new(&rule, quota, &key)
///     .with_counting(Counting::Lease(LeaseSettings::new().max_units(20)));
/// for _ in 0..50 {
///     assert!(store.check(&[item]).await?.is_allowed());
/// }
/// assert!(store.stats().store_calls < 50, "most checks were decided here");
/// store.settle().await; // gives back what this gateway still holds
/// assert_eq!(store.leased(&rule, &key), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct FleetStore<S, C: Clock = SystemClock> {
    inner: Arc<Inner<S, C>>,
}

impl<S, C: Clock> Clone for FleetStore<S, C> {
    fn clone(&self) -> Self {
        FleetStore {
            inner: Arc::clone(&self.inner),
        }
    }
}

struct Inner<S, C: Clock> {
    /// The shared store, with hot keys spread over sub-buckets and refused callers remembered.
    shared: BlockedCache<SubBuckets<S>, C>,
    clock: C,
    /// Split rules' parts, counted on this gateway alone.
    split: MemoryStore<C>,
    leases: Leases,
    syncs: Syncs<C>,
    /// One push at a time: a check that must push first waits for the push on its way.
    pushing: tokio::sync::Mutex<()>,
    /// Background jobs (top-ups, give-backs, pushes) running, and their end.
    background: std::sync::atomic::AtomicUsize,
    idle: tokio::sync::Notify,
    /// A background push has been asked for and has not started yet.
    push_queued: std::sync::atomic::AtomicBool,
    counters: Counters,
}

#[derive(Default)]
struct Counters {
    decided_locally: AtomicU64,
    store_calls: AtomicU64,
    receipts_given_back: AtomicU64,
    failed_pushes: AtomicU64,
}

/// What a [`FleetStore`] has done since it was built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct FleetStats {
    /// Leased or synced checks decided on this gateway without a store call.
    pub decided_locally: u64,
    /// Calls to the shared store for leased or synced rules: leases taken, top-ups, pushes and
    /// give-backs.
    pub store_calls: u64,
    /// Leases whose unspent units went back to the shared store.
    pub receipts_given_back: u64,
    /// Pushes the shared store did not take (their spend stays, to push again).
    pub failed_pushes: u64,
    /// Units spent here and not yet pushed to the shared count.
    pub unsynced_units: u64,
    /// Keys this gateway holds a lease entry for (at most 65,536: past that, leases not in use
    /// end and their units go back).
    pub leased_keys: usize,
    /// Keys this gateway keeps a local copy for (past 65,536, keys with nothing unsynced are
    /// forgotten).
    pub synced_keys: usize,
}

/// The refusal of a cost `quota` can never allow.
pub(crate) fn never_fits(quota: &crate::Quota) -> Decision {
    Decision::refused(
        crate::Refusal::CostExceedsLimit,
        quota.limit(),
        0,
        std::time::Duration::ZERO,
        std::time::Duration::ZERO,
    )
}

/// Runs its closure when dropped, unless disarmed.
struct OnDrop<F: FnOnce()>(Option<F>);

impl<F: FnOnce()> OnDrop<F> {
    fn new(run: F) -> Self {
        OnDrop(Some(run))
    }

    fn disarm(mut self) {
        self.0 = None;
    }
}

impl<F: FnOnce()> Drop for OnDrop<F> {
    fn drop(&mut self) {
        if let Some(run) = self.0.take() {
            run();
        }
    }
}

/// Background work to await here, when there is no runtime to spawn it on.
type Job = std::pin::Pin<Box<dyn Future<Output = ()> + Send>>;

/// How to put back one local decision of a request refused elsewhere.
enum Undo {
    Nothing,
    Lease,
    Sync(Option<Receipt>),
    Split(Option<Receipt>),
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
        FleetStore {
            inner: Arc::new(Inner {
                shared: BlockedCache::with_clock(SubBuckets::new(shared), clock.clone()),
                split: MemoryStore::builder().clock(clock.clone()).build(),
                syncs: Syncs::new(clock.clone()),
                clock,
                leases: Leases::default(),
                pushing: tokio::sync::Mutex::new(()),
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
    /// [`Item::with_cache_blocked`]): for its [`stats`](BlockedCache::stats), and to follow
    /// fleet-wide resets (`tollgate_redis::ResetFollower::start(store.shared(),
    /// store.blocked())`).
    pub fn blocked(&self) -> &BlockedCache<SubBuckets<S>, C> {
        &self.inner.shared
    }

    /// What this store has done.
    pub fn stats(&self) -> FleetStats {
        let counters = &self.inner.counters;
        FleetStats {
            decided_locally: counters.decided_locally.load(Ordering::Relaxed),
            store_calls: counters.store_calls.load(Ordering::Relaxed),
            receipts_given_back: counters.receipts_given_back.load(Ordering::Relaxed),
            failed_pushes: counters.failed_pushes.load(Ordering::Relaxed),
            unsynced_units: self.inner.syncs.unsynced(),
            leased_keys: self.inner.leases.len(),
            synced_keys: self.inner.syncs.len(),
        }
    }

    /// Records [`stats`](Self::stats) through the `metrics` facade (names in
    /// [`crate::metrics`]); the ticker does it every tick.
    ///
    /// ```
    /// let store = tollgate_core::FleetStore::new(tollgate_core::MemoryStore::new());
    /// store.publish_metrics(); // with no recorder installed, a no-op
    /// ```
    #[cfg(feature = "metrics")]
    pub fn publish_metrics(&self) {
        use crate::metrics::{
            FLEET_DECIDED_LOCALLY, FLEET_FAILED_PUSHES, FLEET_LEASES_RETURNED, FLEET_STORE_CALLS,
            FLEET_UNSYNCED_UNITS,
        };
        let stats = self.stats();
        metrics::counter!(FLEET_DECIDED_LOCALLY).absolute(stats.decided_locally);
        metrics::counter!(FLEET_STORE_CALLS).absolute(stats.store_calls);
        metrics::counter!(FLEET_LEASES_RETURNED).absolute(stats.receipts_given_back);
        metrics::counter!(FLEET_FAILED_PUSHES).absolute(stats.failed_pushes);
        metrics::gauge!(FLEET_UNSYNCED_UNITS).set(stats.unsynced_units as f64);
    }

    /// Units this gateway holds leased for `rule` and `key`.
    pub fn leased(&self, rule: &RuleId, key: &Key) -> u64 {
        self.inner.leases.held(rule, key)
    }

    /// Ends what is due now: leases past their lifetime or window give back their unspent
    /// units, keys quiet for two top-up periods give back everything, and synced keys due a
    /// push are pushed (one batch).
    pub async fn tick(&self) {
        let ended = self.inner.leases.end_quiet(self.inner.clock.now());
        self.inner.give_back(ended).await;
        self.inner.push(None).await;
    }

    /// Waits until no top-up, give-back or push started in the background is still running
    /// (for tests, and for a gateway stopping: then [`settle`](Self::settle)).
    pub async fn background_done(&self) {
        loop {
            let idle = self.inner.idle.notified();
            if self.inner.background.load(Ordering::Acquire) == 0 {
                return;
            }
            idle.await;
        }
    }

    /// Gives back every lease and pushes every unsynced unit now: call it before a gateway stops.
    pub async fn settle(&self) {
        self.background_done().await;
        let held = self.inner.leases.end_all();
        self.inner.give_back(held).await;
        self.inner.push(None).await;
    }

    /// Runs [`tick`](Self::tick) every `every` on the current Tokio runtime, until this store
    /// and its clones are dropped. Must be called inside a runtime.
    pub fn spawn_ticker(&self, every: Duration) -> tokio::task::JoinHandle<()>
    where
        S: 'static,
        C: 'static,
    {
        let weak = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(every.max(Duration::from_millis(1)));
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                interval.tick().await;
                let Some(inner) = weak.upgrade() else { return };
                let store = FleetStore { inner };
                store.tick().await;
                #[cfg(feature = "metrics")]
                {
                    store.publish_metrics();
                    store.blocked().publish_metrics();
                }
            }
        })
    }
}

impl<S: Store, C: Clock + Clone> Inner<S, C> {
    /// Whether `item` goes to the shared store as it is: counted exactly, costing nothing, or
    /// naming a store of a [`Stores`](crate::Stores) this wraps (leases and pushes would be
    /// made for its default store; a `FleetStore` inside each store of a `Stores` leases and
    /// syncs there).
    fn is_exact(&self, item: &Item<'_>) -> bool {
        match item.counting() {
            Counting::Exact => true,
            Counting::Lease(_) | Counting::Sync(_) => {
                item.cost() == 0
                    || item
                        .store_name()
                        .is_some_and(|name| self.shared.knows_store(name))
            }
            _ => item.cost() == 0,
        }
    }

    /// Spawns `job` on the current Tokio runtime; without one, answers it (boxed) for the caller
    /// to await. Counted while it runs, for [`FleetStore::background_done`].
    fn start(self: &Arc<Self>, job: impl Future<Output = ()> + Send + 'static) -> Option<Job> {
        self.background.fetch_add(1, Ordering::AcqRel);
        let inner = Arc::clone(self);
        let counted = async move {
            job.await;
            if inner.background.fetch_sub(1, Ordering::AcqRel) == 1 {
                inner.idle.notify_waiters();
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                drop(runtime.spawn(counted));
                None
            }
            Err(_) => Some(Box::pin(counted)),
        }
    }

    /// A request with leased or synced items: those are decided here first; the rest in the
    /// shared store; all-or-nothing over both.
    async fn check_mixed(
        self: &Arc<Self>,
        items: &[Item<'_>],
    ) -> Result<BatchDecision, StoreError> {
        let now = self.clock.now();
        let mut answers: Vec<Option<ItemDecision>> = items.iter().map(|_| None).collect();
        let mut undo = Vec::new();
        let mut refused = false;
        for (position, item) in items
            .iter()
            .enumerate()
            .filter(|(_, item)| !self.is_exact(item))
        {
            let decided = match item.counting() {
                Counting::Lease(settings) => self.lease(item, settings, now).await,
                Counting::Sync(settings) => self.sync(item, settings, now).await,
                Counting::Split(_) => Ok(self.split(item)),
                _ => continue,
            };
            let (answer, how) = match decided {
                Ok(decided) => decided,
                Err(error) => {
                    self.undo(items, undo);
                    return Err(error);
                }
            };
            if answer.decision().is_allowed() || !item.is_enforcing() {
                // A shadow split rule's would-be refusal never refuses the request.
                undo.push((position, how));
            } else {
                refused = true;
            }
            answers[position] = Some(answer);
        }
        let exact: Vec<Item<'_>> = items
            .iter()
            .copied()
            .filter(|item| self.is_exact(item))
            .collect();
        if refused {
            self.undo(items, undo);
            for (position, item) in items
                .iter()
                .enumerate()
                .filter(|(_, item)| self.is_exact(item))
            {
                let decision = self.shared.peek(item).await?;
                answers[position] = Some(ItemDecision::uncharged(decision));
            }
            return Ok(BatchDecision::new(false, answers.into_iter().flatten()));
        }
        let mut allowed = true;
        if !exact.is_empty() {
            let shared = match self.shared.check(&exact).await {
                Ok(shared) => shared,
                Err(error) => {
                    self.undo(items, undo);
                    return Err(error);
                }
            };
            allowed = shared.is_allowed();
            let mut shared = shared.into_items();
            for (position, _) in items
                .iter()
                .enumerate()
                .filter(|(_, item)| self.is_exact(item))
            {
                answers[position] = shared.next();
            }
            if !allowed {
                self.undo(items, undo);
            }
        }
        Ok(BatchDecision::new(allowed, answers.into_iter().flatten()))
    }

    fn undo(&self, items: &[Item<'_>], undo: Vec<(usize, Undo)>) {
        for (position, how) in undo {
            let Some(item) = items.get(position) else {
                continue;
            };
            match how {
                Undo::Nothing => {}
                Undo::Lease => self.leases.unspend(item),
                Undo::Sync(receipt) => self.syncs.undo(item, receipt),
                Undo::Split(receipt) => {
                    if let Some(receipt) = receipt {
                        self.split.refund_sync(&receipt);
                    }
                }
            }
        }
    }

    /// A split item: its part of the quota, counted here alone (no store call).
    fn split(&self, item: &Item<'_>) -> (ItemDecision, Undo) {
        self.counters
            .decided_locally
            .fetch_add(1, Ordering::Relaxed);
        let answer = self.split.check_sync(std::slice::from_ref(item));
        let Some(answer) = answer.into_items().next() else {
            return (
                ItemDecision::uncharged(never_fits(item.quota())),
                Undo::Nothing,
            );
        };
        let decision = *answer.decision();
        (
            ItemDecision::uncharged(decision),
            Undo::Split(answer.into_receipt(item)),
        )
    }

    /// A leased item: spent from this gateway's lease, or from a lease taken now.
    async fn lease(
        self: &Arc<Self>,
        item: &Item<'_>,
        settings: LeaseSettings,
        now: crate::Timestamp,
    ) -> Result<(ItemDecision, Undo), StoreError> {
        if item.cost() > item.quota().limit() {
            // Never fits: refused as such, without taking anything.
            let never = never_fits(item.quota());
            return Ok((ItemDecision::uncharged(never), Undo::Nothing));
        }
        let mut want = 0;
        for attempt in 0..2 {
            let (spend, top_up, ended) = self.leases.spend(item, settings, now);
            self.in_background(item, top_up.map(|top_up| top_up.units), ended)
                .await;
            match spend {
                Spend::Spent(decision) => {
                    self.counters
                        .decided_locally
                        .fetch_add(1, Ordering::Relaxed);
                    return Ok((ItemDecision::uncharged(decision), Undo::Lease));
                }
                // A top-up on its way may land if the runtime gets a turn (a current-thread
                // runtime runs it only when this task yields).
                Spend::Short { waiting: true, .. } if attempt == 0 => {
                    tokio::task::yield_now().await;
                }
                Spend::Dry(refusal) => {
                    self.counters
                        .decided_locally
                        .fetch_add(1, Ordering::Relaxed);
                    return Ok((ItemDecision::uncharged(refusal), Undo::Nothing));
                }
                Spend::Short { want: short, .. } => {
                    want = short;
                    break;
                }
            }
        }
        let asked = item.with_cost(want).with_take(Take::UpTo);
        self.counters.store_calls.fetch_add(1, Ordering::Relaxed);
        // The probe mark is cleared however this ends, a caller that stops waiting included.
        let probe = OnDrop::new(|| self.leases.probed(item, false));
        let answer = self.shared.check_one(&asked).await;
        let granted = answer.as_ref().map_or(0, |answer| answer.granted(&asked));
        probe.disarm();
        self.leases.probed(item, granted > 0);
        let answer = answer?;
        if answer.counted_in() == CountedIn::Nowhere || granted == 0 {
            // Refused, or let through uncounted by the rule's failure policy: as the store said.
            if !answer.decision().is_allowed() && answer.counted_in() == CountedIn::Store {
                self.leases.dry(item, answer.decision(), now);
            }
            return Ok((ItemDecision::uncharged(*answer.decision()), Undo::Nothing));
        }
        let view = *answer.decision();
        if self
            .leases
            .held(item.rule(), item.key())
            .saturating_add(granted)
            < item.cost()
        {
            // Too little to cover this request: the units go straight back rather than sit
            // here, so no gateway holds more than H.
            if let Some(receipt) = answer.into_receipt(&asked) {
                self.give_back(vec![receipt]).await;
            }
            return Ok((
                ItemDecision::uncharged(self.leases.refusal(item, &view)),
                Undo::Nothing,
            ));
        }
        self.leases.add(&asked, answer, now);
        let (spend, top_up, ended) = self.leases.spend(item, settings, now);
        self.in_background(item, top_up.map(|top_up| top_up.units), ended)
            .await;
        match spend {
            Spend::Spent(decision) => Ok((ItemDecision::uncharged(decision), Undo::Lease)),
            Spend::Short { .. } | Spend::Dry(_) => Ok((
                ItemDecision::uncharged(self.leases.refusal(item, &view)),
                Undo::Nothing,
            )),
        }
    }

    /// Asks for a top-up of `top_up` units for `item`'s key, and gives back `ended`, without
    /// holding up the caller when a Tokio runtime can run them.
    async fn in_background(
        self: &Arc<Self>,
        item: &Item<'_>,
        top_up: Option<u64>,
        ended: Vec<Receipt>,
    ) {
        for job in self.start_background(item, top_up, ended) {
            job.await;
        }
    }

    /// [`in_background`](Self::in_background), started: answers the jobs to await when there is
    /// no runtime to spawn them on.
    fn start_background(
        self: &Arc<Self>,
        item: &Item<'_>,
        top_up: Option<u64>,
        ended: Vec<Receipt>,
    ) -> Vec<Job> {
        let mut inline = Vec::new();
        if !ended.is_empty() {
            let inner = Arc::clone(self);
            inline.extend(self.start(async move { inner.give_back(ended).await }));
        }
        if let Some(units) = top_up {
            let inner = Arc::clone(self);
            let (rule, key, quota) = (item.rule().clone(), item.key().clone(), *item.quota());
            let policy = item.on_store_failure();
            inline.extend(self.start(async move {
                // Marked answered however the job ends (a runtime shutting down drops it).
                let _answered = OnDrop::new(|| inner.leases.topped_up(&rule, &key));
                let asked = Item::new(&rule, quota, &key)
                    .with_cost(units)
                    .with_take(Take::UpTo)
                    .with_store_failure(policy);
                inner.counters.store_calls.fetch_add(1, Ordering::Relaxed);
                if let Ok(answer) = inner.shared.check_one(&asked).await
                    && answer.counted_in() != CountedIn::Nowhere
                {
                    inner.leases.add(&asked, answer, inner.clock.now());
                }
            }));
        }
        inline
    }

    /// A leased item decided now, from the lease (`None`: the store must be asked). Needs a
    /// runtime for what it starts in the background.
    fn lease_now(
        self: &Arc<Self>,
        item: &Item<'_>,
        settings: LeaseSettings,
        now: crate::Timestamp,
    ) -> Option<ItemDecision> {
        if item.cost() > item.quota().limit() {
            return None;
        }
        let (spend, top_up, ended) = self.leases.spend(item, settings, now);
        let inline = self.start_background(item, top_up.map(|top_up| top_up.units), ended);
        debug_assert!(inline.is_empty(), "check_now runs inside a runtime");
        match spend {
            Spend::Spent(decision) | Spend::Dry(decision) => {
                self.counters
                    .decided_locally
                    .fetch_add(1, Ordering::Relaxed);
                Some(ItemDecision::uncharged(decision))
            }
            Spend::Short { .. } => None,
        }
    }

    /// A synced item decided now, on its local copy (`None`: it must sync first). Needs a
    /// runtime for the push it may start.
    fn sync_now(
        self: &Arc<Self>,
        item: &Item<'_>,
        settings: SyncSettings,
        now: crate::Timestamp,
    ) -> Option<ItemDecision> {
        let (Local::Decided(answer, _), due) = self.syncs.decide(item, settings, now) else {
            return None;
        };
        self.counters
            .decided_locally
            .fetch_add(1, Ordering::Relaxed);
        if due {
            drop(self.start_push());
        }
        Some(answer)
    }

    /// Starts a background push of every due key, unless one is already waiting to start.
    fn start_push(self: &Arc<Self>) -> Option<Job> {
        if self.push_queued.swap(true, Ordering::AcqRel) {
            return None;
        }
        let inner = Arc::clone(self);
        self.start(async move {
            let _one_at_a_time = inner.pushing.lock().await;
            inner.push_queued.store(false, Ordering::Release);
            let pushes = inner.syncs.start_push(inner.clock.now(), None);
            inner.send(pushes).await;
        })
    }

    /// Gives back the unspent units these receipts hold. One that fails is dropped: its units
    /// stay charged until its lease would have ended (a bounded loss, never a grant).
    async fn give_back(&self, receipts: Vec<Receipt>) {
        for receipt in receipts {
            self.counters.store_calls.fetch_add(1, Ordering::Relaxed);
            if let Err(error) = self.shared.refund(receipt).await {
                tracing::debug!(
                    target: "tollgate::fleet",
                    error = %error,
                    "a lease's unspent units could not be given back; they stay charged until it would have ended"
                );
            } else {
                self.counters
                    .receipts_given_back
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// A synced item: decided on the key's local copy (synced first if it has none).
    async fn sync(
        self: &Arc<Self>,
        item: &Item<'_>,
        settings: SyncSettings,
        now: crate::Timestamp,
    ) -> Result<(ItemDecision, Undo), StoreError> {
        for _ in 0..8 {
            let (local, due) = self.syncs.decide(item, settings, now);
            match local {
                Local::Decided(answer, receipt) => {
                    self.counters
                        .decided_locally
                        .fetch_add(1, Ordering::Relaxed);
                    if due && let Some(job) = self.start_push() {
                        job.await;
                    }
                    return Ok((answer, Undo::Sync(receipt)));
                }
                Local::StoreDown => return Err(Syncs::<C>::down_error()),
                Local::Unknown | Local::Full => self.push(Some((item.rule(), item.key()))).await,
                Local::Crowded => self.push(None).await,
            }
        }
        // Still full after eight pushes: other checks keep spending this gateway's M units as
        // fast as they are pushed. Refused for one interval (never an error: the store is up).
        let quota = item.quota();
        let busy = Decision::refused(
            crate::Refusal::LimitReached,
            quota.limit(),
            0,
            settings.interval(),
            settings.interval(),
        );
        Ok((ItemDecision::uncharged(busy), Undo::Nothing))
    }

    /// Pushes every synced key with unsynced spend or a view an interval old (or only the one
    /// named) in one batch of debt items,
    /// and starts each key's local copy again from the shared count it brings back.
    async fn push(&self, only: Option<(&RuleId, &Key)>) {
        let _one_at_a_time = self.pushing.lock().await;
        let pushes = self.syncs.start_push(self.clock.now(), only);
        self.send(pushes).await;
    }

    async fn send(&self, pushes: Vec<Push>) {
        if pushes.is_empty() {
            return;
        }
        let items: Vec<Item<'_>> = pushes
            .iter()
            .map(|push| {
                Item::new(&push.rule, push.quota, &push.key)
                    .with_cost(push.units)
                    .with_take(Take::AsDebt)
                    .with_store_failure(crate::OnStoreFailure::Closed)
            })
            .collect();
        self.counters.store_calls.fetch_add(1, Ordering::Relaxed);
        let answer = self.shared.check(&items).await;
        // Spend counted anywhere but the shared store (a fallback's memory) was not pushed.
        let answer = answer.ok().filter(|batch| {
            batch
                .items()
                .iter()
                .all(|item| item.counted_in() == CountedIn::Store)
        });
        if answer.is_none() {
            self.counters.failed_pushes.fetch_add(1, Ordering::Relaxed);
        }
        self.syncs
            .finish_push(&pushes, answer.as_ref(), self.clock.now());
    }
}

impl<S: Store, C: Clock + Clone> Store for FleetStore<S, C> {
    fn knows_store(&self, name: &str) -> bool {
        self.inner.shared.knows_store(name)
    }

    fn refused_now(&self, items: &[Item<'_>]) -> Option<BatchDecision> {
        self.inner.shared.refused_now(items)
    }
    async fn check(&self, items: &[Item<'_>]) -> Result<BatchDecision, StoreError> {
        if items.iter().all(|item| self.inner.is_exact(item)) {
            return self.inner.shared.check(items).await;
        }
        if let [item] = items {
            // One leased or synced rule, the hot path: decided without the mixed batch's
            // bookkeeping.
            let now = self.inner.clock.now();
            let (answer, _) = match item.counting() {
                Counting::Lease(settings) => self.inner.lease(item, settings, now).await?,
                Counting::Sync(settings) => self.inner.sync(item, settings, now).await?,
                Counting::Split(_) => self.inner.split(item),
                _ => return self.inner.shared.check(items).await,
            };
            let allowed = answer.decision().is_allowed() || !item.is_enforcing();
            return Ok(BatchDecision::new(allowed, [answer]));
        }
        self.inner.check_mixed(items).await
    }

    /// Exact items: the shared store's own answer now, if it has one. One leased or synced item
    /// decided from the lease or the local copy (inside a Tokio runtime, which runs what it
    /// starts in the background); `None` when the store must be asked.
    fn check_now(&self, items: &[Item<'_>]) -> Option<Result<BatchDecision, StoreError>> {
        if items.iter().all(|item| self.inner.is_exact(item)) {
            return self.inner.shared.check_now(items);
        }
        let [item] = items else {
            return None;
        };
        if let Counting::Split(_) = item.counting() {
            let (answer, _) = self.inner.split(item);
            let allowed = answer.decision().is_allowed() || !item.is_enforcing();
            return Some(Ok(BatchDecision::new(allowed, [answer])));
        }
        tokio::runtime::Handle::try_current().ok()?;
        let now = self.inner.clock.now();
        let answer = match item.counting() {
            Counting::Lease(settings) => self.inner.lease_now(item, settings, now)?,
            Counting::Sync(settings) => self.inner.sync_now(item, settings, now)?,
            _ => return None,
        };
        let allowed = answer.decision().is_allowed() || !item.is_enforcing();
        Some(Ok(BatchDecision::new(allowed, [answer])))
    }

    /// A split item's part, read here; every other item in the shared store.
    async fn peek(&self, item: &Item<'_>) -> Result<Decision, StoreError> {
        if let Counting::Split(_) = item.counting() {
            return Ok(self.inner.split.peek_sync(item));
        }
        self.inner.shared.peek(item).await
    }

    fn refund(&self, receipt: Receipt) -> impl Future<Output = Result<(), RefundError>> + Send {
        self.inner.shared.refund(receipt)
    }

    fn refund_now(&self, receipt: Receipt) -> RefundNow {
        self.inner.shared.refund_now(receipt)
    }

    async fn reset(&self, rule: &RuleId, key: &Key) -> Result<(), StoreError> {
        self.inner.leases.forget(rule, key);
        self.inner.syncs.forget(rule, key);
        self.inner.split.reset_sync(rule, key);
        self.inner.shared.reset(rule, key).await
    }
}
