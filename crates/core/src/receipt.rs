//! Proof of a charge, enough to undo exactly that charge, once.

use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::{Key, Quota, RuleId, StoreError, Timestamp};

/// What one charge did to one caller's state, in the algorithm's own terms.
///
/// Refunding "by rule, key and cost" is wrong once a window has rolled over or time has passed:
/// the charge must be taken back from the window it went into, the log entry it created, or the
/// part of a schedule it still holds. A `Charge` says which. Charges are read-only data: only a
/// store builds them (another crate's store through `tollgate_core::store_kit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Charge {
    /// Token bucket, GCRA or pacing: the theoretical arrival time (TAT) moved `micros` later,
    /// to `until`.
    #[non_exhaustive]
    Scheduled {
        /// µs added (cost × emission interval, and for pacing any gap before its slot).
        micros: u64,
        /// The TAT right after the charge: once the clock passes it, the charge holds nothing.
        until: Timestamp,
    },
    /// Fixed window or sliding window counter: `cost` went into the window starting at `start`
    /// (its length is the receipt's quota's window).
    #[non_exhaustive]
    Window {
        /// The window's start.
        start: Timestamp,
        /// The cost charged.
        cost: u64,
    },
    /// Sliding window log: an entry of `cost` logged at `at`.
    #[non_exhaustive]
    Logged {
        /// When the entry was logged (store time).
        at: Timestamp,
        /// The cost charged.
        cost: u64,
    },
    /// Concurrency: `slots` taken for a running request; refunding the receipt gives them back
    /// (the request ended).
    #[non_exhaustive]
    Held {
        /// The store's name for this hold: a remote store keeps each hold apart to renew and
        /// expire it; the in-memory store names the life of the count it was taken from, so a
        /// hold from before a reset gives nothing back to the count after it (see
        /// [`lapses`](Charge::lapses)).
        id: u64,
        /// The slots taken.
        slots: u64,
    },
}

impl Charge {
    pub(crate) const fn scheduled(micros: u64, until: Timestamp) -> Charge {
        Charge::Scheduled { micros, until }
    }

    pub(crate) const fn window(start: Timestamp, cost: u64) -> Charge {
        Charge::Window { start, cost }
    }

    pub(crate) const fn logged(at: Timestamp, cost: u64) -> Charge {
        Charge::Logged { at, cost }
    }

    pub(crate) const fn held(id: u64, slots: u64) -> Charge {
        Charge::Held { id, slots }
    }

    /// Whether this is a concurrency hold that lapses unless renewed
    /// ([`Store::renew`](crate::Store::renew)): a remote store's. An in-process store's holds
    /// never lapse, and other charges are not holds.
    ///
    /// ```
    /// use futures_executor::block_on;
    /// use tollgate_core::{Item, Key, MemoryStore, Quota, RuleId, Store};
    ///
    /// let (rule, key) = (RuleId::new("exports")?, Key::new("acct"));
    /// let items = [Item::new(&rule, Quota::concurrency(1)?, &key)];
    /// let hold = block_on(MemoryStore::new().check(&items))?.into_receipts(&items).remove(0);
    /// assert!(!hold.charge().lapses(), "in memory, a slot is held until given back");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn lapses(&self) -> bool {
        matches!(self, Charge::Held { id, .. }
            if id & crate::algorithm::concurrency::NEVER_LAPSES == 0)
    }
}

/// A charge and whose it was: give it to [`Store::refund`](crate::Store::refund) to undo it
/// (for example, "count only failed logins": take up front, refund on success).
///
/// * **Single use.** A receipt comes only from consuming a store's answer
///   ([`BatchDecision::into_receipts`](crate::BatchDecision::into_receipts),
///   [`ItemDecision::into_receipt`](crate::ItemDecision::into_receipt)); it is not `Clone`, and
///   `refund` takes it by value. Charges are built only by stores: this crate's, and those of
///   other crates through the `store_kit` module (feature `store-kit`), whose copies of a
///   receipt share its spent mark (refunded twice, they give back once). A charge built there
///   that no store made gives back at most what `reset` would.
/// * **Bounded.** A refund gives back only what the charge can still be holding: nothing once
///   its window has ended, its log entry has left the window, or its part of a bucket's schedule
///   has passed, or been cut off by a smaller capacity; nothing when the rule's emission interval
///   or window has changed since. (After an operator's `reset`, or an eviction, a refund cannot
///   tell the new state from the old: it may give back up to its own cost of what was charged
///   since.)
/// * **Safe to retry.** A refund that fails hands the receipt back inside the
///   [`RefundError`]; a remote store makes the refund idempotent (it remembers the receipt's
///   [`id`](Self::id) for as long as the charge could matter), so retrying after a lost answer
///   gives back once.
/// * **In-process.** Receipts are not serialisable: refund from the process that charged.
///
/// ```compile_fail
/// # fn twice(store: &tollgate_core::MemoryStore, receipt: tollgate_core::Receipt) {
/// use tollgate_core::Store;
/// let _ = store.refund(receipt);
/// let _ = store.refund(receipt); // error: use of moved value
/// # }
/// ```
#[derive(Debug)]
pub struct Receipt {
    rule: RuleId,
    key: Key,
    quota: Quota,
    charge: Charge,
    id: u64,
    /// Set by the first refund that reaches an in-process store; shared with the copies that
    /// stand for retries (`tollgate_testing::replay`), so a retry that reaches such a store again is a
    /// no-op.
    spent: Arc<Shared>,
}

/// What a receipt shares with its retry copies: whether it was used, the store the charged
/// item named ([`FleetModes::with_store`](crate::FleetModes::with_store)), so a `Stores`
/// refunds it where it was charged, and whether a `FallbackStore`
/// charged it in its local memory, so it is refunded there whether or not the primary is back
/// (behind the one pointer, so a receipt grows no larger).
#[derive(Debug, Default)]
struct Shared {
    spent: AtomicBool,
    store: Option<Box<str>>,
    local: bool,
}

impl Receipt {
    pub(crate) fn new(rule: RuleId, key: Key, quota: Quota, charge: Charge) -> Self {
        Receipt {
            rule,
            key,
            quota,
            charge,
            id: fresh_id(),
            spent: Arc::new(Shared::default()),
        }
    }

    /// The same receipt, naming the store its item named, and whether a fallback's local
    /// memory charged it.
    pub(crate) fn in_store(mut self, store: Option<&str>, local: bool) -> Self {
        if store.is_some() || local {
            // A fresh receipt: no retry copy shares its mark yet.
            self.spent = Arc::new(Shared {
                spent: AtomicBool::new(self.spent.spent.load(Ordering::Acquire)),
                store: store.map(Box::from),
                local,
            });
        }
        self
    }

    /// Whether a `FallbackStore` charged this in its local memory
    /// while its primary was down: refunded there, never in the primary (which never saw it).
    pub(crate) fn is_counted_locally(&self) -> bool {
        self.spent.local
    }

    /// The store the charged item named ([`Item::store_name`](crate::Item::store_name)), if
    /// any: where a `Stores` sends the refund (its default store when `None`).
    ///
    /// ```
    /// use futures_executor::block_on;
    /// use tollgate_core::{FleetModes, Item, Key, MemoryStore, Quota, Rate, RuleId, Store};
    /// let (store, rule, key) = (MemoryStore::new(), RuleId::new("login")?, Key::new("u"));
    /// let item = Item::new(&rule, Quota::token_bucket(5, Rate::per_minute(5))?, &key)
    ///     .with_fleet_modes(FleetModes::new().with_store("home"));
    /// let receipt = block_on(store.check_one(&item))?.into_receipt(&item);
    /// assert_eq!(receipt.as_ref().and_then(|r| r.store_name()), Some("home"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn store_name(&self) -> Option<&str> {
        self.spent.store.as_deref()
    }

    /// The rule charged.
    pub fn rule(&self) -> &RuleId {
        &self.rule
    }

    /// The key charged.
    pub fn key(&self) -> &Key {
        &self.key
    }

    /// The quota in force when charged.
    pub fn quota(&self) -> &Quota {
        &self.quota
    }

    /// What the charge did.
    pub fn charge(&self) -> &Charge {
        &self.charge
    }

    /// A random number naming this charge (never 0), which remote stores remember to make a
    /// retried refund a no-op.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Marks the receipt used; whether it already was (in-process stores refund only when not).
    pub(crate) fn take_spent(&self) -> bool {
        self.spent.spent.swap(true, Ordering::AcqRel)
    }

    /// The same receipt for only `units` of its charge, the last ones charged (a lease giving
    /// back what it did not spend): a schedule's last `units` emission intervals, a window's or
    /// a log entry's `units` of cost. Never more than the charge itself.
    pub(crate) fn narrowed(mut self, units: u64) -> Receipt {
        self.charge = match self.charge {
            Charge::Scheduled { micros, until } => Charge::Scheduled {
                micros: micros.min(units.saturating_mul(self.quota.interval_micros())),
                until,
            },
            Charge::Window { start, cost } => Charge::Window {
                start,
                cost: cost.min(units),
            },
            Charge::Logged { at, cost } => Charge::Logged {
                at,
                cost: cost.min(units),
            },
            Charge::Held { id, slots } => Charge::Held {
                id,
                slots: slots.min(units),
            },
        };
        self
    }

    /// The same receipt again, sharing its id and spent mark: what a retry sends, and what a
    /// wrapper keeps while the original is away at another store.
    pub(crate) fn retry_copy(&self) -> Receipt {
        Receipt {
            rule: self.rule.clone(),
            key: self.key.clone(),
            quota: self.quota,
            charge: self.charge,
            id: self.id,
            spent: Arc::clone(&self.spent),
        }
    }
}

/// A random, non-zero 64-bit id: std's per-process random keys mixed with a counter.
fn fresh_id() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    static KEYS: std::sync::OnceLock<RandomState> = std::sync::OnceLock::new();
    let keys = KEYS.get_or_init(RandomState::new);
    keys.hash_one(COUNTER.fetch_add(1, Ordering::Relaxed))
        .max(1)
}

/// A refund that did not happen (or may not have: the answer was lost), with the receipt back
/// so the caller can retry it safely.
///
/// ```
/// use tollgate_core::{Receipt, RefundError, Store};
///
/// // A timed-out refund may or may not have happened; retrying is safe.
/// async fn refund_with_one_retry<S: Store>(store: &S, receipt: Receipt) -> Result<(), RefundError> {
///     match store.refund(receipt).await {
///         Err(failed) if failed.error().is_timeout() => store.refund(failed.into_receipt()).await,
///         done => done,
///     }
/// }
/// # let _ = refund_with_one_retry::<tollgate_core::MemoryStore>;
/// ```
#[derive(Debug, thiserror::Error)]
#[error("refund of a charge to rule `{rule}` failed: {error}", rule = receipt.rule())]
pub struct RefundError {
    #[source]
    error: StoreError,
    receipt: Receipt,
}

impl RefundError {
    /// The store's error and the receipt it could not refund.
    pub fn new(error: StoreError, receipt: Receipt) -> Self {
        RefundError { error, receipt }
    }

    /// What went wrong.
    pub fn error(&self) -> &StoreError {
        &self.error
    }

    /// The receipt, to retry the refund.
    pub fn into_receipt(self) -> Receipt {
        self.receipt
    }

    /// The error and the receipt.
    pub fn into_parts(self) -> (StoreError, Receipt) {
        (self.error, self.receipt)
    }
}

/// What [`Store::refund_now`](crate::Store::refund_now) did with a receipt.
#[derive(Debug)]
pub enum RefundNow {
    /// The refund was done (or failed) at once.
    Done(Result<(), RefundError>),
    /// This store must be awaited: the receipt back, for [`Store::refund`](crate::Store::refund).
    Later(Receipt),
}
