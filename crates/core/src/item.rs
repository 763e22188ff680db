//! One rule's part of one request, as sent to a store.

use crate::{Algorithm, Counting, FleetModes, Key, Mode, OnStoreFailure, Quota, RuleId};

/// How an item takes its cost: all of it or nothing (the usual case), as much of it as there
/// is, all of it even past the limit, or all of it or nothing once the caller's debt is paid.
///
/// [`UpTo`](Take::UpTo) and [`AsDebt`](Take::AsDebt) exist for the fleet modes, which count
/// part of a rule's traffic on each gateway and reconcile with the shared store in batches;
/// [`AsDebt`](Take::AsDebt) and [`AfterDebt`](Take::AfterDebt) for a cost known only after the
/// response ([`Estimate`](crate::Estimate)):
///
/// * [`UpTo`](Take::UpTo): a **lease**. The item's cost is the most it wants; it is allowed when
///   at least one unit is there and charged what there is, up to its cost.
///   [`ItemDecision::granted`](crate::ItemDecision::granted) says how many units it got, and its
///   receipt gives back any of them (a lease returned unspent). Refused only when not one unit
///   is there, with the wait until one is.
/// * [`AfterDebt`](Take::AfterDebt): an **estimate** of a cost settled later. What the caller
///   owes is paid first from what has come back; while any is still owed the item is refused
///   (with the wait until the debt and its cost fit), else it is taken exactly, all or nothing.
/// * [`AsDebt`](Take::AsDebt): spend that **already happened** elsewhere (a gateway's local
///   count, pushed to the shared one). Never refused and always charged in full: what fits is
///   charged as usual, and the rest is recorded as the caller's **debt**
///   ([`ItemDecision::debt`](crate::ItemDecision::debt)). Debt is paid, first, from whatever
///   allowance comes back, before anything else is granted: while any is owed, up-to items are
///   refused and debt items report nothing remaining. It is outside all-or-nothing (a refused
///   batch keeps it: the spend is not undone by refusing something else) and has no receipt.
///
/// These kinds are for enforcing items of rules that refuse: a shadow or read-only item, a
/// pacing quota (whose "cost" is a place in a queue, not a count) and a concurrency quota (a
/// slot is not spent, it is held) always take exactly. An exact item does not read debt: give
/// a rule one mode across a fleet.
///
/// Debt is kept per rule and key beside the count, for as long as the caller's own allowance
/// would take to come back and pay it: once that long has passed with nobody checking, the
/// allowance it would have paid went unused, and the debt is dropped. A caller owes at most
/// 1,024 times the quota's limit: beyond that the debt is forgiven (the answer reports the
/// capped debt), so no spend, however large, locks a key for good.
///
/// ```
/// use futures_executor::block_on;
/// use tollgate_core::{Item, Key, MemoryStore, Quota, Rate, RuleId, Store, Take};
///
/// let store = MemoryStore::new();
/// let (rule, key) = (RuleId::new("partner")?, Key::new("acme"));
/// let quota = Quota::token_bucket(10, Rate::per_second(10))?;
///
/// // A lease of up to 8 units, then one of up to 8 more: the second gets the 2 that are left.
/// let lease = Item::new(&rule, quota, &key).with_cost(8).with_take(Take::UpTo);
/// assert_eq!(block_on(store.check_one(&lease))?.granted(&lease), 8);
/// assert_eq!(block_on(store.check_one(&lease))?.granted(&lease), 2);
///
/// // Five units spent elsewhere while none were left: all five become debt.
/// let spent = Item::new(&rule, quota, &key).with_cost(5).with_take(Take::AsDebt);
/// let answer = block_on(store.check_one(&spent))?;
/// assert_eq!((answer.granted(&spent), answer.debt()), (5, 5));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Take {
    /// All of the cost, or nothing (the default).
    #[default]
    Exact,
    /// As much of the cost as there is, at least one unit (a lease).
    UpTo,
    /// All of the cost, past the limit if need be, the excess recorded as debt.
    AsDebt,
    /// All of the cost or nothing, once what the caller owes is paid (an estimate, settled
    /// later with [`AsDebt`](Take::AsDebt) or a refund).
    AfterDebt,
}

/// What a store needs to decide one rule for one request: the rule id, the **full quota and
/// algorithm** (so per-key and per-plan quotas — a partner's contract — need no new API), the
/// key, the cost, the mode and the store-failure policy.
///
/// Items borrow the rule id and key, so building one allocates nothing.
///
/// ```
/// use tollgate_core::{Item, Key, Mode, Quota, Rate, RuleId};
///
/// let rule = RuleId::new("search")?;
/// let key = Key::new("user77");
/// let quota = Quota::token_bucket(20, Rate::per_second(2))?;
/// let item = Item::new(&rule, quota, &key).with_cost(10).with_mode(Mode::Shadow);
/// assert_eq!(item.cost(), 10);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Item<'a> {
    rule: &'a RuleId,
    quota: Quota,
    key: &'a Key,
    cost: u64,
    mode: Mode,
    on_store_failure: OnStoreFailure,
    take: Take,
    /// What it asks of the store's wrappers.
    modes: FleetModes<'a>,
    /// The quota as given, before a split took this gateway's part of it.
    whole: Quota,
}

impl<'a> Item<'a> {
    /// An enforcing item of cost 1 that fails open.
    pub fn new(rule: &'a RuleId, quota: Quota, key: &'a Key) -> Self {
        Item {
            rule,
            quota,
            key,
            cost: 1,
            mode: Mode::Enforce,
            on_store_failure: OnStoreFailure::Open,
            take: Take::Exact,
            modes: FleetModes::new(),
            whole: quota,
        }
    }

    /// Sets the cost (how many units this request takes). A cost of zero charges nothing and
    /// always passes; a cost above the quota's limit is refused with
    /// [`RefusalReason::CostExceedsLimit`](crate::RefusalReason::CostExceedsLimit).
    #[must_use]
    pub fn with_cost(mut self, cost: u64) -> Self {
        self.cost = cost;
        self
    }

    /// Sets the mode.
    #[must_use]
    pub fn with_mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// Sets the store-failure policy.
    #[must_use]
    pub fn with_store_failure(mut self, policy: OnStoreFailure) -> Self {
        self.on_store_failure = policy;
        self
    }

    /// Sets how the item takes its cost (see [`Take`]).
    #[must_use]
    pub fn with_take(mut self, take: Take) -> Self {
        self.take = take;
        self
    }

    /// How the item takes its cost, as the store applies it: [`Take::Exact`] for shadow and
    /// read-only items and pacing quotas, whatever was set.
    pub fn take(&self) -> Take {
        if self.always_exact() {
            return Take::Exact;
        }
        self.take
    }

    /// Sets what the item asks of the store's wrappers ([`FleetModes`]: its counting across a
    /// fleet, sub-buckets, cached refusals, named store), replacing what was set. A
    /// [`Counting::Split`] also makes [`quota`](Item::quota) this gateway's part of the quota
    /// given to [`new`](Item::new), so any store counts the part; a quota that cannot be split
    /// that many ways (a limit below the number of parts, or pacing) is counted whole and
    /// exactly.
    ///
    /// ```
    /// use tollgate_core::{Counting, FleetModes, Item, Key, Quota, Rate, RuleId, SplitSettings};
    /// let (rule, key) = (RuleId::new("search")?, Key::global());
    /// let quota = Quota::token_bucket(200, Rate::per_second(200))?;
    /// let modes = FleetModes::new().with_counting(Counting::Split(SplitSettings::new(50)));
    /// let item = Item::new(&rule, quota, &key).with_fleet_modes(modes);
    /// assert_eq!(item.quota().limit(), 4);
    /// assert_eq!(item.fleet_modes(), modes);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    #[inline]
    pub fn with_fleet_modes(mut self, modes: FleetModes<'a>) -> Self {
        self.modes = modes;
        self.quota = self.whole;
        if let Counting::Split(split) = modes.counting() {
            match split.share(&self.whole) {
                Some(part) => self.quota = part,
                None => self.modes = modes.with_counting(Counting::Exact),
            }
        }
        self
    }

    /// What the item asks of the store's wrappers, as set (a split its quota cannot take reads
    /// as exact). What each wrapper applies is [`counting`](Item::counting),
    /// [`sub_buckets`](Item::sub_buckets), [`caches_blocked`](Item::caches_blocked) and
    /// [`store_name`](Item::store_name).
    pub fn fleet_modes(&self) -> FleetModes<'a> {
        self.modes
    }

    /// How the rule is counted across a fleet, as a `FleetStore` applies
    /// it: [`Counting::Exact`] for shadow and read-only items, pacing and concurrency quotas,
    /// and items that take otherwise than exactly ([`Take`]: they read and write the debt
    /// kept with the shared count) when lease or sync was set (they are never leased or
    /// synced); a split stays a split (its
    /// quota is already this gateway's part), except where the quota cannot be split (pacing,
    /// concurrency: see [`with_fleet_modes`](Item::with_fleet_modes)).
    pub fn counting(&self) -> Counting {
        let counting = self.modes.counting();
        let exact = self.always_exact() || self.take != Take::Exact;
        if exact && !matches!(counting, Counting::Split(_)) {
            return Counting::Exact;
        }
        counting
    }

    /// Shadow and read-only items, pacing and concurrency quotas are always taken and counted
    /// exactly (a slot is held by one running request: there is nothing to lease ahead).
    fn always_exact(&self) -> bool {
        self.mode != Mode::Enforce
            || matches!(
                self.quota.algorithm(),
                Algorithm::LeakyBucket | Algorithm::Concurrency
            )
    }

    /// How many sub-buckets a `SubBuckets` store spreads this item over:
    /// 1 (one key, counted as usual) unless it is an enforcing item, counted and taken exactly,
    /// whose quota can be split that many ways ([`Quota::part`]: a limit of at least that
    /// many, not pacing) — and so can its local quota, when it fails open within one. Up-to and
    /// debt items are never spread: a rule's leases and pushes count on its whole key; nor are
    /// concurrency items (a slot must come back where it was taken, and a spread limit would
    /// refuse while other sub-buckets have free slots).
    pub fn sub_buckets(&self) -> u32 {
        let asked = self.modes.sub_buckets();
        let spread = u64::from(asked);
        if spread < 2
            || self.mode != Mode::Enforce
            || self.counting() != Counting::Exact
            || self.take() != Take::Exact
            || self.quota.algorithm() == Algorithm::Concurrency
            || self.quota.part(0, spread).is_err()
        {
            return 1;
        }
        match self.on_store_failure {
            OnStoreFailure::OpenWithin(local) if local.part(0, spread).is_err() => 1,
            _ => asked,
        }
    }

    /// Whether a `BlockedCache` may answer this item: asked for, on an
    /// enforcing item counted exactly (leases and syncs keep their own refusals).
    pub fn caches_blocked(&self) -> bool {
        self.modes.cache_blocked()
            && self.mode == Mode::Enforce
            && self.counting() == Counting::Exact
    }

    /// The store this item names, if any: counted there among a `Stores`';
    /// without a name, in the default store.
    pub fn store_name(&self) -> Option<&'a str> {
        self.modes.store_name()
    }

    /// The quota the rule was given, before a [`Counting::Split`] took this gateway's part
    /// ([`quota`](Item::quota) is what is counted).
    pub fn whole_quota(&self) -> &Quota {
        &self.whole
    }

    /// The rule id.
    pub fn rule(&self) -> &'a RuleId {
        self.rule
    }

    /// The quota counted: the one given, or this gateway's part of it under a
    /// [`Counting::Split`].
    pub fn quota(&self) -> &Quota {
        &self.quota
    }

    /// The key.
    pub fn key(&self) -> &'a Key {
        self.key
    }

    /// The cost.
    pub fn cost(&self) -> u64 {
        self.cost
    }

    /// The mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Whether this item can refuse the request (an enforcing or a read-only item).
    pub fn is_enforcing(&self) -> bool {
        matches!(self.mode, Mode::Enforce | Mode::ReadOnly)
    }

    /// Whether this item is only read, never charged ([`Mode::ReadOnly`]).
    pub fn is_read_only(&self) -> bool {
        self.mode == Mode::ReadOnly
    }

    /// Whether an allowed check charges this item at once (an enforcing item; a shadow item is
    /// charged only once the request goes ahead, a read-only one never).
    pub(crate) fn charges_at_once(&self) -> bool {
        self.mode == Mode::Enforce
    }

    /// The store-failure policy.
    pub fn on_store_failure(&self) -> OnStoreFailure {
        self.on_store_failure
    }
}
