//! Answering without the primary: each item by its own [`OnStoreFailure`].
//!
//! * `Open` items are allowed, uncharged, with the quota's limit as limit and remaining, and
//!   marked [`CountedIn::Nowhere`] so that no one shows those numbers to a caller;
//! * `Local` items are checked in local memory exactly as given (same rule, key, quota, cost
//!   and mode), so a local refusal is a real refusal;
//! * `OpenWithin(quota)` items are checked in local memory under the same rule and key with the
//!   given quota instead, and answer with that quota's decision;
//! * an enforcing `Closed` item makes the whole call fail with the store error; a shadow
//!   `Closed` item never stops a request and is answered like `Open`.
//!
//! Items counted locally are marked [`CountedIn::LocalFallback`], and their concurrency holds
//! as local (see `holds`), so they are given back where they were taken. All items counted locally go
//! to the local store in **one** batch, so the answer stays
//! all-or-nothing across them.

use std::time::Duration;

use smallvec::SmallVec;

use super::outage::Outage;
use tollgate_core::store_kit::{AnswerKit, BatchKit, LocalKit};
use tollgate_core::{
    BatchDecision, Charge, Clock, CountedIn, Decision, Item, ItemDecision, MemoryStore,
    OnStoreFailure, StoreError,
};

/// Answers `items` without the primary.
pub(super) fn check<C: Clock>(
    local: &MemoryStore<C>,
    items: &[Item<'_>],
    outage: Outage,
) -> Result<BatchDecision, StoreError> {
    // Local memory is never written at a time no store can represent.
    crate::time_range::in_range(local.clock().now())?;
    if items.iter().any(fails_closed) {
        return Err(outage.into_error());
    }
    let counted: SmallVec<[Item<'_>; 3]> = items.iter().filter_map(counted_locally).collect();
    let local_answer = (!counted.is_empty()).then(|| local.check_sync(&counted));
    let allowed = local_answer.as_ref().is_none_or(BatchDecision::is_allowed);
    let mut local_answers = local_answer.into_iter().flat_map(BatchDecision::into_items);
    let answers = items
        .iter()
        .map(|item| {
            let counted = match item.on_store_failure() {
                OnStoreFailure::Local => local_answers.next(),
                // The charge was made under the local quota, but a receipt names the item's
                // own: refunding it would take from the wrong state, so it reports no charge.
                // A concurrency hold is the exception: it must come back when its request
                // ends, and it is given back by its slots alone, whatever the quota.
                OnStoreFailure::OpenWithin(local) => local_answers.next().map(|answer| {
                    if matches!(answer.charge(), Some(Charge::Held { .. })) {
                        // Its receipt names the local quota, so it is given back to the slots
                        // it was taken from whatever the rule's own algorithm.
                        answer.counted_as(item.rule().clone(), local)
                    } else {
                        let owed = answer.debt();
                        tollgate_core::store_kit::owing(
                            ItemDecision::uncharged(*answer.decision()),
                            owed,
                        )
                    }
                }),
                OnStoreFailure::Open | OnStoreFailure::Closed => None,
            };
            // The local store answers every item it is given; anything else goes open.
            match counted {
                Some(answer) => answer
                    .map_charge(super::holds::mark_local)
                    .counted_in_place(CountedIn::LocalFallback),
                None => ItemDecision::uncharged(open(item)).counted_in_place(CountedIn::Nowhere),
            }
        })
        .collect();
    Ok(BatchDecision::from_decisions(allowed, answers))
}

/// Answers a peek at `item` without the primary.
pub(super) fn peek<C: Clock>(
    local: &MemoryStore<C>,
    item: &Item<'_>,
    outage: Outage,
) -> Result<Decision, StoreError> {
    if fails_closed(item) {
        return Err(outage.into_error());
    }
    Ok(match counted_locally(item) {
        Some(counted) => local.peek_sync(&counted),
        None => open(item),
    })
}

/// Whether `item` makes a call fail when the primary cannot answer.
fn fails_closed(item: &Item<'_>) -> bool {
    item.is_enforcing() && item.on_store_failure() == OnStoreFailure::Closed
}

/// The item to count in local memory for `item`, if it is counted there.
fn counted_locally<'a>(item: &Item<'a>) -> Option<Item<'a>> {
    match item.on_store_failure() {
        OnStoreFailure::Local => Some(*item),
        OnStoreFailure::OpenWithin(quota) => Some(
            Item::new(item.rule(), quota, item.key())
                .with_cost(item.cost())
                .with_mode(item.mode())
                .with_take(item.take())
                .with_store_failure(item.on_store_failure()),
        ),
        OnStoreFailure::Open | OnStoreFailure::Closed => None,
    }
}

/// An open answer: allowed, nothing charged, the whole limit left.
fn open(item: &Item<'_>) -> Decision {
    let limit = item.quota().limit();
    Decision::allowed(limit, limit, Duration::ZERO)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tollgate_core::{Key, Mode, Quota, Rate, RuleId};

    fn outage() -> Outage {
        Outage::Failed(StoreError::unavailable("down"))
    }

    #[test]
    fn open_items_are_allowed_uncharged_with_their_limit() {
        let local = MemoryStore::new();
        let (rule, key) = (RuleId::new("reads").unwrap(), Key::new("u"));
        let quota = Quota::token_bucket(7, Rate::per_second(1)).unwrap();
        let answer = check(&local, &[Item::new(&rule, quota, &key)], outage()).unwrap();
        assert!(answer.is_allowed());
        let item = &answer.items()[0];
        assert_eq!(item.charge(), None);
        assert_eq!(
            (item.decision().limit(), item.decision().remaining()),
            (7, 7)
        );
        assert_eq!(item.counted_in(), CountedIn::Nowhere, "nothing to disclose");
        assert_eq!(local.stats().keys, 0, "open items touch no local state");
    }

    #[test]
    fn a_shadow_closed_item_is_answered_open() {
        let local = MemoryStore::new();
        let (rule, key) = (RuleId::new("otp").unwrap(), Key::new("u"));
        let quota = Quota::token_bucket(1, Rate::per_second(1)).unwrap();
        let item = Item::new(&rule, quota, &key)
            .with_mode(Mode::Shadow)
            .with_store_failure(OnStoreFailure::Closed);
        assert!(check(&local, &[item], outage()).unwrap().is_allowed());
        assert!(peek(&local, &item, Outage::BreakerOpen).is_ok());
        let enforcing = item.with_mode(Mode::Enforce);
        let error = peek(&local, &enforcing, Outage::BreakerOpen).unwrap_err();
        assert!(error.is_unavailable());
    }
}
