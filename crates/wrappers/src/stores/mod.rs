//! A store per rule: one default store and named ones (a home region's), each item counted in
//! the store it names. [`Stores`] has the whole story.
//!
//! * `mod.rs` — the combinator, its routing and its [`Store`] implementation;
//! * `name.rs` — store names and their errors;
//! * `shares.rs` — one request over several stores, all-or-nothing by refund.

mod name;
mod shares;

use std::collections::HashSet;

use parking_lot::Mutex;

pub use self::name::{MAX_STORE_NAME_LEN, StoreNameError};

use self::name::is_store_name;
use tollgate_core::store_kit::CapabilitiesKit;
use tollgate_core::{
    BatchDecision, Capabilities, Decision, Item, ItemDecision, Key, Receipt, RefundError,
    RefundNow, RuleId, Store, StoreError,
};

/// How many unknown store names are remembered, to log each once; past that, every use of
/// another unknown name logs (loud rather than silent, and no unbounded set).
const REMEMBERED_UNKNOWN: usize = 256;

/// A [`Store`] made of several stores of one type: a default one and named ones. Each item is
/// counted in the store its [`store_name`](Item::store_name) names
/// ([`FleetModes::with_store`](tollgate_core::FleetModes::with_store); a tower rule's `store(..)`, a
/// rule file's `store = "home"`), and an item naming none in the default store.
///
/// The use it is made for: two regions, each with its own Redis, where the security rules
/// (logins, password resets, sign-up codes) of every account are counted in the account's
/// **home region** so an attacker gets one limit, not one per region, while everything else is
/// counted in the local region's store.
///
/// ```
/// use futures_executor::block_on;
/// use tollgate_core::{FleetModes, Item, Key, MemoryStore, Quota, Rate, RuleId, Store};
/// use tollgate_wrappers::Stores;
///
/// // In production: Stores::new(local_redis).with("home", home_redis)?
/// let stores = Stores::new(MemoryStore::new()).with("home", MemoryStore::new())?;
/// let (login, reads, user) = (RuleId::new("login")?, RuleId::new("reads")?, Key::new("u1"));
/// let logins = Item::new(&login, Quota::token_bucket(1, Rate::per_hour(10))?, &user)
///     .with_fleet_modes(FleetModes::new().with_store("home"));
/// let read = Item::new(&reads, Quota::token_bucket(100, Rate::per_hour(100))?, &user);
///
/// assert!(block_on(stores.check(&[logins, read]))?.is_allowed());
/// // The login is spent in the home store: the second request is refused, and its read is
/// // not charged in the local store either.
/// assert!(!block_on(stores.check(&[logins, read]))?.is_allowed());
/// // (a peek at cost 0 reads what is left without asking for more)
/// assert_eq!(block_on(stores.named("home").unwrap().peek(&logins.with_cost(0)))?.remaining(), 0);
/// assert_eq!(block_on(stores.default_store().peek(&read.with_cost(0)))?.remaining(), 99);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # One request over several stores
///
/// A request whose items all name one store is that store's call, as if it stood alone. A
/// request spread over several stores stays **all-or-nothing** by compensation, as a Redis
/// Cluster request spread over several slots does:
///
/// * each store checks its share of the items, side by side (one round trip, not one per store);
/// * if every share is allowed, the request goes ahead;
/// * if a share is refused, the request is refused — even when another store failed, since the
///   refusal decides an all-or-nothing request — and every share that was allowed has its
///   charges refunded **by receipt** ([`Store::refund`]), then its items are read again
///   ([`Store::peek`]) so they report their state as it stands, uncharged;
/// * if none is refused but a store failed, the shares that were allowed are refunded the same
///   way and the error is returned, for the rules' [`OnStoreFailure`](tollgate_core::OnStoreFailure) to
///   decide (behind a [`FallbackStore`](crate::FallbackStore) per store, that is each store's
///   own wrapper: a home store that is down answers its `Closed` rules with this error and its
///   `Open` ones uncounted, while the local store's rules are decided as usual).
///
/// What cannot be taken back, and is not:
///
/// * a store that **failed** answered nothing: whatever it may have charged before failing (a
///   timed-out call that ran after all) stays charged; its items report no charge and their
///   quota's whole limit, as with a cross-slot request;
/// * a refund that fails leaves its charge in place (logged at `warn` on `tollgate::store`):
///   a caller is over-counted by that cost until it expires, never under-counted;
/// * charges with no receipt stay: debt items ([`Take::AsDebt`](tollgate_core::Take::AsDebt), spend
///   that already happened, outside all-or-nothing on any store), a
///   [`FleetStore`](crate::FleetStore)'s local spends (leased and synced rules), and a
///   `FallbackStore`'s local counts under an `OpenWithin` quota — each over-counts by its cost,
///   the safe side;
/// * a receipt gives back only what its charge still holds: a refund a moment after the charge
///   gives back all of it, unless the window rolled over in between (then the old window's
///   charge no longer matters);
/// * a caller that stops waiting (a dropped future) after one store charged and before its
///   refund leaves that charge in place (over-counting, the safe side).
///
/// Pacing items in different stores each get their own store's slot (they are not aligned to
/// the latest as within one store); the request waits for the longest delay.
///
/// # Other calls
///
/// * [`peek`](Store::peek) and [`check_one`](Store::check_one) go to the item's store;
///   [`check_now`](Store::check_now) answers at once only for a request whose items all name
///   one store (that store's own `check_now`).
/// * [`refund`](Store::refund) goes to the store the receipt names: a receipt carries the name
///   its item named ([`Receipt::store_name`]), so it is refunded where it was charged.
/// * [`reset`](Store::reset) clears the caller in **every** store (a reset names a rule, not a
///   store, and a rule's state lives in one of them): all are asked, side by side; the first
///   error is reported after every store was tried.
/// * [`capabilities`](Store::capabilities) answers per name: each named store's under its name,
///   the default store's for items naming none (and for the names the default store holds, a
///   `Stores` as the default store).
///
/// # An item naming a store that is not there
///
/// Never let through: it is counted in the **default** store (a misconfigured name limits at
/// the local store's scope rather than not at all), and the first use of each such name is
/// logged at `error` on `tollgate::store`. A rule file naming an unknown store is refused when
/// loaded (`tollgate_config` asks [`Capabilities::supports`](tollgate_core::Capabilities::supports)).
///
/// A `Stores` inside a `Stores` is supported as the default store only: a named member gets
/// items still naming the outer name.
///
/// # With fleet modes
///
/// Put a [`FleetStore`](crate::FleetStore) inside each store —
/// `Stores::new(FleetStore::new(local)).with("home", FleetStore::new(home))` — so a leased,
/// synced, sub-bucketed or cached rule gets its mode in the store it names. A `FleetStore`
/// around a `Stores` counts rules that name a store exactly (its leases and pushes would be
/// made for the default store), and its [`capabilities`](Store::capabilities) say so: a
/// leased or synced rule naming a store is refused when a rule file is loaded (see
/// [`Capabilities`](tollgate_core::Capabilities)).
#[derive(Debug)]
pub struct Stores<S> {
    default: S,
    named: Vec<(Box<str>, S)>,
    /// The names the default store holds (a `Stores` as the default store), read once.
    default_names: Box<[Box<str>]>,
    /// Unknown names already logged.
    unknown: Mutex<HashSet<Box<str>>>,
}

impl<S: Store> Stores<S> {
    /// Stores with `default` for items that name no store, and no named store yet.
    pub fn new(default: S) -> Self {
        let default_names = default.capabilities().names().map(Box::from).collect();
        Stores {
            default,
            default_names,
            named: Vec::new(),
            unknown: Mutex::new(HashSet::new()),
        }
    }

    /// Adds `store` under `name` (1 to [`MAX_STORE_NAME_LEN`] bytes of `A-Z a-z 0-9 _ - .`);
    /// an error when the name is not one or is taken.
    ///
    /// ```
    /// use tollgate_core::MemoryStore;
    /// use tollgate_wrappers::Stores;
    /// let stores = Stores::new(MemoryStore::new()).with("home", MemoryStore::new())?;
    /// assert_eq!(stores.names().collect::<Vec<_>>(), ["home"]);
    /// # Ok::<(), tollgate_wrappers::StoreNameError>(())
    /// ```
    pub fn with(mut self, name: &str, store: S) -> Result<Self, StoreNameError> {
        if !is_store_name(name) {
            return Err(StoreNameError::Invalid {
                name: name.to_owned(),
            });
        }
        if self.named(name).is_some() {
            return Err(StoreNameError::Duplicate {
                name: name.to_owned(),
            });
        }
        self.named.push((Box::from(name), store));
        Ok(self)
    }

    /// The default store (items naming no store).
    ///
    /// ```
    /// use tollgate_core::MemoryStore;
    /// use tollgate_wrappers::Stores;
    /// let stores = Stores::new(MemoryStore::new());
    /// let _local: &MemoryStore = stores.default_store();
    /// ```
    pub fn default_store(&self) -> &S {
        &self.default
    }

    /// The store named `name`, if there is one.
    ///
    /// ```
    /// use tollgate_core::MemoryStore;
    /// use tollgate_wrappers::Stores;
    /// let stores = Stores::new(MemoryStore::new()).with("home", MemoryStore::new())?;
    /// assert!(stores.named("home").is_some());
    /// assert!(stores.named("away").is_none());
    /// # Ok::<(), tollgate_wrappers::StoreNameError>(())
    /// ```
    pub fn named(&self, name: &str) -> Option<&S> {
        self.named
            .iter()
            .find(|(held, _)| &**held == name)
            .map(|(_, store)| store)
    }

    /// The names held, in the order they were added.
    ///
    /// ```
    /// use tollgate_core::MemoryStore;
    /// use tollgate_wrappers::Stores;
    /// let stores = Stores::new(MemoryStore::new())
    ///     .with("home", MemoryStore::new())?
    ///     .with("eu", MemoryStore::new())?;
    /// assert_eq!(stores.names().collect::<Vec<_>>(), ["home", "eu"]);
    /// # Ok::<(), tollgate_wrappers::StoreNameError>(())
    /// ```
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.named.iter().map(|(name, _)| &**name)
    }

    /// Where an item naming `name` is counted: 0 for the default store, `n` for the `n`th
    /// named one. An unknown name goes to the default store, logged once.
    fn route(&self, name: Option<&str>) -> usize {
        let Some(name) = name else {
            return 0;
        };
        if let Some(at) = self.named.iter().position(|(held, _)| &**held == name) {
            return at + 1;
        }
        if !self.default_names.iter().any(|known| &**known == name) {
            self.unknown_name(name);
        }
        0
    }

    /// Logs an item naming a store this does not hold, once per name.
    fn unknown_name(&self, name: &str) {
        let first = {
            let mut unknown = self.unknown.lock();
            if unknown.len() < REMEMBERED_UNKNOWN {
                unknown.insert(Box::from(name))
            } else {
                !unknown.contains(name)
            }
        };
        if first {
            tracing::error!(
                target: "tollgate::store",
                store = name,
                known = ?self.names().collect::<Vec<_>>(),
                "an item names a store there is none of; counted in the default store instead"
            );
        }
    }

    /// The store at `route` (see [`route`](Self::route)).
    fn at(&self, route: usize) -> &S {
        match route.checked_sub(1).and_then(|at| self.named.get(at)) {
            Some((_, store)) => store,
            None => &self.default,
        }
    }

    /// The store `item` is counted in.
    fn of(&self, item: &Item<'_>) -> &S {
        self.at(self.route(item.store_name()))
    }

    /// The one store every item of `items` goes to, if they all go to one.
    fn single(&self, items: &[Item<'_>]) -> Result<usize, ()> {
        let mut routes = items.iter().map(|item| self.route(item.store_name()));
        let first = routes.next().unwrap_or(0);
        if routes.all(|route| route == first) {
            Ok(first)
        } else {
            Err(())
        }
    }
}

impl<S: Store> Store for Stores<S> {
    async fn check(&self, items: &[Item<'_>]) -> Result<BatchDecision, StoreError> {
        match self.single(items) {
            Ok(route) => self.at(route).check(items).await,
            Err(()) => self.check_shares(items).await,
        }
    }

    fn check_now(&self, items: &[Item<'_>]) -> Option<Result<BatchDecision, StoreError>> {
        match self.single(items) {
            Ok(route) => self.at(route).check_now(items),
            // Several stores: only a refusal one of them gives at once is an answer now.
            Err(()) => self.refused_now(items).map(Ok),
        }
    }

    fn refused_now(&self, items: &[Item<'_>]) -> Option<BatchDecision> {
        match self.single(items) {
            Ok(route) => self.at(route).refused_now(items),
            Err(()) => self.refused_now_shared(items),
        }
    }

    async fn check_one(&self, item: &Item<'_>) -> Result<ItemDecision, StoreError> {
        self.of(item).check_one(item).await
    }

    async fn peek(&self, item: &Item<'_>) -> Result<Decision, StoreError> {
        self.of(item).peek(item).await
    }

    async fn refund(&self, receipt: Receipt) -> Result<(), RefundError> {
        let route = self.route(receipt.store_name());
        self.at(route).refund(receipt).await
    }

    fn refund_now(&self, receipt: Receipt) -> RefundNow {
        let route = self.route(receipt.store_name());
        self.at(route).refund_now(receipt)
    }

    async fn renew(&self, receipt: &Receipt) -> Result<(), StoreError> {
        let route = self.route(receipt.store_name());
        self.at(route).renew(receipt).await
    }

    async fn reset(&self, rule: &RuleId, key: &Key) -> Result<(), StoreError> {
        let resets = std::iter::once(&self.default)
            .chain(self.named.iter().map(|(_, store)| store))
            .map(|store| store.reset(rule, key));
        let answers = futures_util::future::join_all(resets).await;
        answers.into_iter().collect()
    }

    /// Each named store's capabilities under its name, the default store's for the rest.
    fn capabilities(&self) -> Capabilities {
        Capabilities::stores(
            self.default.capabilities(),
            self.named
                .iter()
                .map(|(name, store)| (&**name, store.capabilities())),
        )
    }
}
