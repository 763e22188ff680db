//! For crates that implement [`Store`](crate::Store) on another backend (feature `store-kit`).
//!
//! A store reports what it charged as a [`Charge`] inside an [`ItemDecision`]; receipts, and so
//! refunds, are made only from those. Applications never build charges: this module is the one
//! door for stores outside `tollgate-core` (the Redis store uses it), kept behind a feature so
//! that no application reaches it by accident.
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

use crate::{Charge, Decision, ItemDecision, Receipt, Timestamp};

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
/// store set a deadline ([`FallbackStore`](crate::FallbackStore) does, for every call to its
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

/// The same receipt again, sharing its id and its spent mark: what a retried refund sends, and
/// what a wrapper keeps while the original is away at another store. Refunding both gives back
/// once (the store checks the shared mark, or its own record of the id), so a copy cannot undo
/// a charge twice; it exists for stores and the conformance suite, never for applications.
///
/// ```
/// use futures_executor::block_on;
/// use tollgate_core::{store_kit, Item, Key, MemoryStore, Quota, Rate, RuleId, Store};
///
/// let rule = RuleId::new("posting")?;
/// let store = MemoryStore::new();
/// let key = Key::new("account-1");
/// let quota = Quota::token_bucket(1, Rate::per_hour(1))?;
/// let items = [Item::new(&rule, quota, &key)];
/// let receipt = block_on(store.check(&items))?.into_receipts(&items).remove(0);
/// let copy = store_kit::retry_copy(&receipt);
/// block_on(store.refund(receipt))?;
/// block_on(store.refund(copy))?; // gives back nothing more
/// assert!(block_on(store.check(&items))?.is_allowed(), "the one token is back");
/// assert!(!block_on(store.check(&items))?.is_allowed(), "and only one");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn retry_copy(receipt: &Receipt) -> Receipt {
    receipt.retry_copy()
}

/// The same receipt for only `units` of its charge, the last ones charged (a lease giving back
/// what it did not spend): a schedule's last `units` emission intervals, a window's or a log
/// entry's `units` of cost. Never more than the charge itself.
pub fn narrowed(receipt: Receipt, units: u64) -> Receipt {
    receipt.narrowed(units)
}
