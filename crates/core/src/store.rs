//! The Store contract: where counts live, and the one shape every store answers in.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use smallvec::SmallVec;

use crate::{
    Capabilities, Charge, Decision, Item, Key, Receipt, RefundError, RefundNow, RuleId, StoreError,
    StoreErrorKind,
};

/// Keeps the counts and decides, on its own clock.
///
/// Every store — in-memory, Redis, Redis Cluster, leased, with-fallback — passes the same
/// conformance suite (`tollgate_testing::conformance`, feature `testing`), so a rule gives
/// the same decision wherever its state lives.
///
/// * [`check`](Store::check) takes **all** items of one request in one call and answers
///   all-or-nothing over the enforcing items: if any refuses, none is charged. Shadow items are
///   evaluated as if enforced on their own, charged only if the request goes ahead and they
///   would allow it, and their would-be refusals are reported. Read-only items
///   ([`Mode::ReadOnly`](crate::Mode::ReadOnly)) are checked at their cost and never charged, and their
///   refusal refuses the request like an enforcing item's (a block read in the same call).
///   Several pacing items are all scheduled at the latest of their earliest slots.
/// * An item takes its cost exactly unless it says otherwise ([`Take`](crate::Take)): **up to**
///   its cost (a lease: allowed with whatever there is, at least one unit, and
///   [`ItemDecision::granted`] says how much), or **as debt** (spend that already happened: never
///   refused, charged in full, the excess owed past the limit — [`ItemDecision::debt`] — and
///   paid back before anything else is granted to that caller). Debt is outside
///   all-or-nothing: a refused batch keeps it.
/// * [`peek`](Store::peek) answers "would this cost pass now?" without charging.
/// * [`refund`](Store::refund) undoes exactly the charge a [`Receipt`] describes, once, and only
///   as much of it as the caller's state can still be holding.
/// * [`reset`](Store::reset) clears a caller's state for a rule (to unblock someone limited by
///   mistake).
///
/// A store error is never a refusal; the rule's [`OnStoreFailure`](crate::OnStoreFailure) decides.
/// The in-memory store answers with ready futures that neither box nor allocate; remote stores
/// may box.
///
/// ```
/// use futures_executor::block_on;
/// use tollgate_core::{Item, Key, MemoryStore, Quota, Rate, RuleId, Store};
///
/// let store = MemoryStore::new();
/// let rule = RuleId::new("login")?;
/// let key = Key::new("user77");
/// let quota = Quota::token_bucket(2, Rate::per_minute(2))?;
/// let item = Item::new(&rule, quota, &key);
///
/// assert!(block_on(store.check(&[item]))?.is_allowed());
/// assert!(block_on(store.check(&[item]))?.is_allowed());
/// let third = block_on(store.check(&[item]))?;
/// assert!(!third.is_allowed());
/// assert_eq!(third.items()[0].decision().retry_after_secs(), 30);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Store: Send + Sync + 'static {
    /// Decides and charges one request's items, all-or-nothing over the enforcing ones.
    fn check(
        &self,
        items: &[Item<'_>],
    ) -> impl Future<Output = Result<BatchDecision, StoreError>> + Send;

    /// [`check`](Store::check), answered at once when the store can decide without waiting (the
    /// in-memory store always can); `None` means "await `check` instead". Middleware uses this
    /// to decide without boxing a future; the default answers `None`.
    fn check_now(&self, items: &[Item<'_>]) -> Option<Result<BatchDecision, StoreError>> {
        let _ = items;
        None
    }

    /// Decides and charges a single item: [`check`](Store::check) for a one-rule request,
    /// answering just that item. For a shadow item the answer is its would-be decision (the
    /// request itself always goes ahead). Stores may answer this faster than a batch.
    fn check_one(
        &self,
        item: &Item<'_>,
    ) -> impl Future<Output = Result<ItemDecision, StoreError>> + Send {
        async move {
            let batch = self.check(std::slice::from_ref(item)).await?;
            batch.into_items().next().ok_or_else(|| {
                StoreError::new(StoreErrorKind::Protocol, "store answered no item for one")
            })
        }
    }

    /// Would `item` pass now? Charges nothing.
    fn peek(&self, item: &Item<'_>) -> impl Future<Output = Result<Decision, StoreError>> + Send;

    /// Undoes the charge `receipt` describes, consuming it: exactly, as long as the charge is
    /// still held; only the part still held once time has passed (nothing once its window has
    /// ended, its log entry has expired, or its share of a bucket's schedule has passed); nothing
    /// when the rule's emission interval or window length has changed since. A failed refund
    /// hands the receipt back in the [`RefundError`]; retrying it never gives back twice.
    fn refund(&self, receipt: Receipt) -> impl Future<Output = Result<(), RefundError>> + Send;

    /// [`refund`](Store::refund), done at once when the store can; [`RefundNow::Later`] hands
    /// the receipt back to await `refund` with instead (the default).
    fn refund_now(&self, receipt: Receipt) -> RefundNow {
        RefundNow::Later(receipt)
    }

    /// Keeps the concurrency slots `receipt` holds ([`Charge::Held`]) from lapsing: a remote
    /// store lets a hold go once its [`Quota::slot_ttl`](crate::Quota::slot_ttl) passes
    /// without a renewal (so a gateway that dies mid-request frees its slots), and a gateway
    /// renews the holds of the requests it is still running a few times within that. The
    /// default does nothing: a store whose holds never lapse (the in-memory store) need not.
    /// Wrappers forward it to the store the receipt was charged in. A hold that has lapsed
    /// already is not taken again (its slots may be someone else's by now); that is not an
    /// error.
    ///
    /// ```
    /// use futures_executor::block_on;
    /// use tollgate_core::{Item, Key, MemoryStore, Quota, RuleId, Store};
    ///
    /// let store = MemoryStore::new();
    /// let (rule, key) = (RuleId::new("exports")?, Key::new("acct"));
    /// let items = [Item::new(&rule, Quota::concurrency(1)?, &key)];
    /// let hold = block_on(store.check(&items))?.into_receipts(&items).remove(0);
    /// block_on(store.renew(&hold))?; // the request runs on
    /// block_on(store.refund(hold))?; // and ends: its slot is free
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn renew(&self, receipt: &Receipt) -> impl Future<Output = Result<(), StoreError>> + Send {
        let _ = receipt;
        std::future::ready(Ok(()))
    }

    /// Forgets everything `rule` counted for `key`.
    fn reset(
        &self,
        rule: &RuleId,
        key: &Key,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// What this store stack does with what items ask of it ([`FleetModes`](crate::FleetModes):
    /// leases, syncs, splits, sub-buckets, cached refusals, named stores), per store an item
    /// can be counted in. The default: a plain store every gateway may share, counting every
    /// item exactly where it is, knowing no store names. Every wrapper answers its inner
    /// store's capabilities with its own added (see [`Capabilities`](crate::Capabilities));
    /// a wrapper of your own forwards its inner store's. Rule loaders refuse a rule asking
    /// what this cannot do ([`Capabilities::supports`](crate::Capabilities::supports)).
    ///
    /// ```
    /// use tollgate_core::{FleetModes, MemoryStore, Store};
    /// use tollgate_wrappers::{FleetStore, Stores};
    /// let home = FleetModes::new().with_store("home");
    /// assert!(MemoryStore::new().capabilities().supports(&home).is_err());
    /// let stores = Stores::new(MemoryStore::new()).with("home", MemoryStore::new())?;
    /// assert!(stores.capabilities().supports(&home).is_ok());
    /// let cached = home.with_cache_blocked(true);
    /// assert!(stores.capabilities().supports(&cached).is_err(), "no BlockedCache at home");
    /// let fleet = Stores::new(FleetStore::new(MemoryStore::new()))
    ///     .with("home", FleetStore::new(MemoryStore::new()))?;
    /// assert!(fleet.capabilities().supports(&cached).is_ok());
    /// # Ok::<(), tollgate_wrappers::StoreNameError>(())
    /// ```
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }

    /// The node of this store that holds `item`'s key, when the store is several nodes that
    /// fail one by one (a Redis Cluster: the master serving the key's slot, by its address); `None`
    /// (the default) for a store that answers or fails as one. A
    /// `FallbackStore` keeps a circuit breaker per node, so a dead
    /// master opens the breaker of the keys it serves and the others are decided as usual.
    ///
    /// ```
    /// use tollgate_core::{Item, Key, MemoryStore, Quota, Rate, RuleId, Store};
    /// let (rule, key) = (RuleId::new("login")?, Key::new("u1"));
    /// let item = Item::new(&rule, Quota::token_bucket(5, Rate::per_minute(5))?, &key);
    /// assert_eq!(MemoryStore::new().node_of(&item), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn node_of(&self, item: &Item<'_>) -> Option<std::sync::Arc<str>> {
        let _ = item;
        None
    }

    /// A refusal of `items` this store can give at once from what it already knows, charging
    /// nothing and asking nobody (a `BlockedCache`'s remembered
    /// callers); `None` (the default) otherwise. A `Stores` asks each store's
    /// share first, so a request one store refuses this way never reaches the others. Wrappers
    /// forward it.
    ///
    /// ```
    /// use tollgate_core::{Item, Key, MemoryStore, Quota, Rate, RuleId, Store};
    /// let (rule, key) = (RuleId::new("login")?, Key::new("u1"));
    /// let item = Item::new(&rule, Quota::token_bucket(5, Rate::per_minute(5))?, &key);
    /// assert!(MemoryStore::new().refused_now(&[item]).is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn refused_now(&self, items: &[Item<'_>]) -> Option<BatchDecision> {
        let _ = items;
        None
    }
}

impl<S: Store> Store for Arc<S> {
    fn check(
        &self,
        items: &[Item<'_>],
    ) -> impl Future<Output = Result<BatchDecision, StoreError>> + Send {
        (**self).check(items)
    }

    fn check_now(&self, items: &[Item<'_>]) -> Option<Result<BatchDecision, StoreError>> {
        (**self).check_now(items)
    }

    fn check_one(
        &self,
        item: &Item<'_>,
    ) -> impl Future<Output = Result<ItemDecision, StoreError>> + Send {
        (**self).check_one(item)
    }

    fn peek(&self, item: &Item<'_>) -> impl Future<Output = Result<Decision, StoreError>> + Send {
        (**self).peek(item)
    }

    fn refund(&self, receipt: Receipt) -> impl Future<Output = Result<(), RefundError>> + Send {
        (**self).refund(receipt)
    }

    fn renew(&self, receipt: &Receipt) -> impl Future<Output = Result<(), StoreError>> + Send {
        (**self).renew(receipt)
    }

    fn refund_now(&self, receipt: Receipt) -> RefundNow {
        (**self).refund_now(receipt)
    }

    fn reset(
        &self,
        rule: &RuleId,
        key: &Key,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        (**self).reset(rule, key)
    }

    fn capabilities(&self) -> Capabilities {
        (**self).capabilities()
    }

    fn refused_now(&self, items: &[Item<'_>]) -> Option<BatchDecision> {
        (**self).refused_now(items)
    }

    fn node_of(&self, item: &Item<'_>) -> Option<Arc<str>> {
        (**self).node_of(item)
    }
}

/// One item's part of a [`BatchDecision`]: its decision, and its charge if it was charged.
///
/// Not `Clone`: the charge inside turns into at most one [`Receipt`], by consuming the answer.
#[derive(Debug, PartialEq, Eq)]
pub struct ItemDecision {
    pub(crate) decision: Decision,
    pub(crate) charge: Option<Charge>,
    pub(crate) counted_in: CountedIn,
    /// Units of debt the caller owes after this check ([`Take`](crate::Take)).
    pub(crate) owed: u64,
    /// The rule and quota the charge was made under, when not the item's own (a sub-bucket's).
    pub(crate) counted_as: Option<Box<(RuleId, crate::Quota)>>,
    /// Refused by a `BlockedCache` without asking the store.
    pub(crate) refused_locally: bool,
}

/// Where an item's decision was counted: what a response may honestly tell the caller about it.
///
/// ```
/// use std::time::Duration;
/// use tollgate_core::{CountedIn, Decision, ItemDecision};
/// let answer = ItemDecision::uncharged(Decision::allowed(10, 10, Duration::ZERO));
/// assert_eq!(answer.counted_in(), CountedIn::Store);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum CountedIn {
    /// By the store that was asked, under the item's own quota: the usual case.
    #[default]
    Store,
    /// By a `FallbackStore`'s local memory while its primary is down:
    /// under the item's quota for [`OnStoreFailure::Local`](crate::OnStoreFailure::Local), under
    /// the local quota for [`OnStoreFailure::OpenWithin`](crate::OnStoreFailure::OpenWithin). The
    /// decision is this gateway's own count.
    LocalFallback,
    /// Nowhere: the item was let through uncounted (an
    /// [`OnStoreFailure::Open`](crate::OnStoreFailure::Open) rule while the primary is down).
    /// Its decision's numbers describe no count, and must not be shown to the caller.
    Nowhere,
}

impl ItemDecision {
    /// A decision that charged nothing (any store, or a test double, may build one).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate_core::{Decision, ItemDecision};
    /// let answer = ItemDecision::uncharged(Decision::allowed(10, 10, Duration::ZERO));
    /// assert!(answer.charge().is_none());
    /// ```
    pub fn uncharged(decision: Decision) -> Self {
        ItemDecision {
            decision,
            charge: None,
            counted_in: CountedIn::Store,
            owed: 0,
            counted_as: None,
            refused_locally: false,
        }
    }

    /// A store's own answer: `decision`, having charged `charge`.
    #[inline]
    pub(crate) fn new(decision: Decision, charge: Option<Charge>) -> Self {
        ItemDecision {
            decision,
            charge,
            counted_in: CountedIn::Store,
            owed: 0,
            counted_as: None,
            refused_locally: false,
        }
    }

    /// The same answer, counted in `counted_in` instead.
    pub(crate) fn counted_in_place(mut self, counted_in: CountedIn) -> Self {
        self.counted_in = counted_in;
        self
    }

    /// Whether a `BlockedCache` refused this item on this gateway,
    /// without asking the store, because the store had refused its caller until a time not yet
    /// reached. The decision reads as the store's refusal would (same limit, `retry_after`
    /// counted down to the same instant); the layer counts it as `refused_locally`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate_core::{Decision, ItemDecision};
    /// let answer = ItemDecision::uncharged(Decision::allowed(10, 10, Duration::ZERO));
    /// assert!(!answer.refused_locally());
    /// ```
    pub fn refused_locally(&self) -> bool {
        self.refused_locally
    }

    /// A refusal made on this gateway by a `BlockedCache`.
    pub(crate) fn refused_here(decision: Decision) -> Self {
        let mut answer = ItemDecision::uncharged(decision);
        answer.refused_locally = true;
        answer
    }

    /// Where the decision was counted (by the store asked, in a fallback's local memory, or
    /// nowhere).
    pub fn counted_in(&self) -> CountedIn {
        self.counted_in
    }

    /// The quota this decision was counted under, to show a caller with it; `item` is the item
    /// it answers. The item's own quota, but an
    /// [`OpenWithin`](crate::OnStoreFailure::OpenWithin) item's local quota when a fallback
    /// counted it locally; `None` when it was counted nowhere (its numbers mean nothing, and
    /// telling a caller "full quota" would make clients that pace on headers burst).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate_core::{Decision, Item, ItemDecision, Key, Quota, RuleId};
    /// let (rule, key) = (RuleId::new("reads")?, Key::new("u"));
    /// let quota = Quota::fixed_window(10, Duration::from_secs(60))?;
    /// let answer = ItemDecision::uncharged(Decision::allowed(10, 9, Duration::ZERO));
    /// assert_eq!(answer.counted_quota(&Item::new(&rule, quota, &key)), Some(quota));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn counted_quota(&self, item: &Item<'_>) -> Option<crate::Quota> {
        match (self.counted_in, item.on_store_failure()) {
            (CountedIn::Nowhere, _) => None,
            (CountedIn::LocalFallback, crate::OnStoreFailure::OpenWithin(local)) => Some(local),
            _ => Some(*item.quota()),
        }
    }

    /// The decision. In a refused batch, items that were not the refusing one report their
    /// current, uncharged state.
    pub fn decision(&self) -> &Decision {
        &self.decision
    }

    /// What was charged; `None` when nothing was (refused batch, shadow refusal, zero cost).
    pub fn charge(&self) -> Option<&Charge> {
        self.charge.as_ref()
    }

    /// How many units of the item's cost were taken: all of it for an allowed exact item or a
    /// debt item ([`Take::AsDebt`](crate::Take::AsDebt) always takes all, past the limit if need
    /// be), what there was for a lease ([`Take::UpTo`](crate::Take::UpTo)), 0 when refused or
    /// not charged. `item` must be the item this decision answers.
    ///
    /// ```
    /// use futures_executor::block_on;
    /// use tollgate_core::{Item, Key, MemoryStore, Quota, Rate, RuleId, Store, Take};
    /// let (store, rule, key) = (MemoryStore::new(), RuleId::new("r")?, Key::new("k"));
    /// let quota = Quota::token_bucket(3, Rate::per_minute(3))?;
    /// let lease = Item::new(&rule, quota, &key).with_cost(5).with_take(Take::UpTo);
    /// assert_eq!(block_on(store.check_one(&lease))?.granted(&lease), 3);
    /// assert_eq!(block_on(store.check_one(&lease))?.granted(&lease), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn granted(&self, item: &Item<'_>) -> u64 {
        match (item.take(), &self.charge) {
            (crate::Take::AsDebt, _) => item.cost(),
            (crate::Take::UpTo, Some(Charge::Scheduled { micros, .. })) => {
                let quota = self.counted_as.as_ref().map_or(*item.quota(), |as_| as_.1);
                micros / quota.interval_micros().max(1)
            }
            (
                crate::Take::UpTo,
                Some(
                    Charge::Window { cost, .. }
                    | Charge::Logged { cost, .. }
                    | Charge::Held { slots: cost, .. },
                ),
            ) => *cost,
            (_, Some(_)) => item.cost(),
            (_, None) => 0,
        }
    }

    /// Units the caller owes past its limit after this check: what debt items
    /// ([`Take::AsDebt`](crate::Take::AsDebt)) charged beyond the allowance and the allowance
    /// has not paid back yet. Always 0 for an exact item (which does not read debt).
    pub fn debt(&self) -> u64 {
        self.owed
    }

    /// The same answer, reporting `owed` units of debt.
    pub(crate) fn owing(mut self, owed: u64) -> Self {
        self.owed = owed;
        self
    }

    /// A receipt for this charge, to refund later; `None` when nothing was charged. `item` must
    /// be the item this decision answers (same position in the batch).
    pub fn into_receipt(self, item: &Item<'_>) -> Option<Receipt> {
        let counted_as = self.counted_as;
        let local = self.counted_in == CountedIn::LocalFallback;
        self.charge.map(|charge| {
            let (rule, quota) = match counted_as {
                Some(counted_as) => *counted_as,
                None => (item.rule().clone(), *item.quota()),
            };
            Receipt::new(rule, item.key().clone(), quota, charge).in_store(item.store_name(), local)
        })
    }

    /// This answer, charged under `rule` and `quota` rather than its item's own: its receipt
    /// refunds there (a sub-bucket's charge).
    pub(crate) fn counted_as(mut self, rule: RuleId, quota: crate::Quota) -> Self {
        self.counted_as = Some(Box::new((rule, quota)));
        self
    }
}

/// A store's answer to one [`Store::check`]: one [`ItemDecision`] per item, in order.
#[derive(Debug, PartialEq, Eq)]
pub struct BatchDecision {
    allowed: bool,
    items: SmallVec<[ItemDecision; 3]>,
}

impl BatchDecision {
    /// An answer: whether the request goes ahead, and each item's decision in order.
    pub fn new(allowed: bool, items: impl IntoIterator<Item = ItemDecision>) -> Self {
        BatchDecision {
            allowed,
            items: items.into_iter().collect(),
        }
    }

    /// A store's answer built in place (no per-item conversion on the hot path).
    pub(crate) fn from_decisions(allowed: bool, items: SmallVec<[ItemDecision; 3]>) -> Self {
        BatchDecision { allowed, items }
    }

    /// The answers, for a store that builds them in place.
    #[inline]
    pub(crate) fn items_mut(&mut self) -> &mut SmallVec<[ItemDecision; 3]> {
        &mut self.items
    }

    /// Sets whether the request may go ahead, once a store building the answer in place knows.
    #[inline]
    pub(crate) fn set_allowed(&mut self, allowed: bool) {
        self.allowed = allowed;
    }

    /// The answer to a request of one item.
    #[inline]
    pub(crate) fn one(allowed: bool, item: ItemDecision) -> Self {
        let mut items = SmallVec::new();
        items.push(item);
        BatchDecision { allowed, items }
    }

    /// Whether the request may go ahead (every enforcing item allowed).
    pub fn is_allowed(&self) -> bool {
        self.allowed
    }

    /// Each item's decision, in the order the items were given.
    pub fn items(&self) -> &[ItemDecision] {
        &self.items
    }

    /// Each item's decision, in order, by value.
    pub fn into_items(self) -> impl Iterator<Item = ItemDecision> {
        self.items.into_iter()
    }
    /// The item whose refusal to report, with its decision, given the items checked (shadow
    /// refusals do not count): [`worst_refusal`](Self::worst_refusal), as the item itself.
    pub fn refusing<'i>(&self, items: &'i [Item<'i>]) -> Option<(&'i Item<'i>, &ItemDecision)> {
        let (position, answer) = self.worst_refusal(items)?;
        Some((items.get(position)?, answer))
    }

    /// The refusal to report when several enforcing items refused, given the items checked: a
    /// cost that can never fit first (retrying is pointless), else the longest wait, so a
    /// client that honours `Retry-After` is not refused again. Its position and decision.
    pub fn worst_refusal(&self, items: &[Item<'_>]) -> Option<(usize, &ItemDecision)> {
        items
            .iter()
            .zip(&self.items)
            .enumerate()
            .filter(|(_, (item, answer))| item.is_enforcing() && !answer.decision.is_allowed())
            .max_by_key(|(_, (_, answer))| {
                let never_fits =
                    answer.decision.refusal() == Some(crate::RefusalReason::CostExceedsLimit);
                (never_fits, answer.decision.retry_after())
            })
            .map(|(position, (_, answer))| (position, answer))
    }

    /// How long to wait before going ahead, given the items checked: the longest delay of an
    /// enforcing pacing item (zero without pacing; shadow and read-only items only report
    /// theirs).
    pub fn delay(&self, items: &[Item<'_>]) -> Duration {
        items
            .iter()
            .zip(&self.items)
            .filter(|(item, _)| item.charges_at_once())
            .map(|(_, answer)| answer.decision.delay())
            .max()
            .unwrap_or(Duration::ZERO)
    }

    /// Receipts for every charged item, consuming the answer (for "count only some outcomes":
    /// refund them all when the response says the request should not count). `items` are the
    /// items checked, in order.
    ///
    /// `items` must be the very slice that was checked: a slice of another length gets no
    /// receipts at all (a receipt naming the wrong rule or key would refund the wrong caller).
    pub fn into_receipts(self, items: &[Item<'_>]) -> Vec<Receipt> {
        if items.len() != self.items.len() {
            tracing::error!(
                target: "tollgate::store",
                items = items.len(),
                answers = self.items.len(),
                "into_receipts was given other items than were checked; no receipts made"
            );
            return Vec::new();
        }
        items
            .iter()
            .zip(self.items)
            .filter_map(|(item, answer)| answer.into_receipt(item))
            .collect()
    }
}
