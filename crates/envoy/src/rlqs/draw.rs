//! A lease from the store: what Envoy let through beyond its leases, charged as debt, then up to
//! a lease's size, taken as there is ([`Take::UpTo`]) — with the rule's quota, key, failure
//! policy and fleet modes, as the rate limit service charges the same caller.

use tollgate_core::{
    BatchDecision, CountedIn, DynStore, Item, ItemDecision, Key, RuleId, Store, StoreError, Take,
};
use tollgate_tower::Rule;

use super::bucket::Outcome;

/// What a draw charged and answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Drawn {
    /// Units charged as debt.
    pub(crate) debt: u64,
    pub(crate) outcome: Outcome,
}

/// Charges `uncovered` units as debt (when any), then takes a lease of up to `size` units of
/// `rule` (whose id is `id`) for `key`.
///
/// A rule whose store cannot answer follows its `on_store_failure`, as the store stack carries
/// it out (a `FallbackStore`): `open` answers [`Outcome::Open`]; `local` and `open_within` lease
/// from the fallback's local memory (`open_within` reports no grant, so its lease is the one
/// unit an up-to item always takes); `closed` (or a store with no fallback) answers
/// [`Outcome::Closed`].
pub(crate) async fn draw(
    store: &DynStore,
    id: &RuleId,
    rule: &Rule,
    key: &Key,
    size: u64,
    uncovered: u64,
) -> Drawn {
    let item = Item::new(id, *rule.quota(), key)
        .with_mode(rule.store_mode())
        .with_store_failure(rule.on_store_failure())
        .with_fleet_modes(rule.fleet_modes());
    let mut debt = 0;
    if uncovered > 0 {
        let owed = item.with_cost(uncovered).with_take(Take::AsDebt);
        match check(store, &owed).await {
            Ok(answer) if answer.counted_in() == CountedIn::Nowhere => {
                return Drawn {
                    debt,
                    outcome: Outcome::Open,
                };
            }
            Ok(_) => debt = uncovered,
            Err(error) => return closed(&error, id, debt),
        }
    }
    let lease = item.with_cost(size).with_take(Take::UpTo);
    let outcome = match check(store, &lease).await {
        Err(error) => return closed(&error, id, debt),
        Ok(answer) if answer.counted_in() == CountedIn::Nowhere => Outcome::Open,
        Ok(answer) if answer.decision().is_allowed() => {
            Outcome::Tokens(answer.granted(&lease).max(1))
        }
        Ok(answer) => Outcome::Exhausted(answer.decision().retry_after()),
    };
    Drawn { debt, outcome }
}

/// One item's answer, from the store at once when it can (memory), else awaited.
async fn check(store: &DynStore, item: &Item<'_>) -> Result<ItemDecision, StoreError> {
    let items = std::slice::from_ref(item);
    let batch = match store.check_now(items) {
        Some(answer) => answer,
        None => store.check(items).await,
    }?;
    BatchDecision::into_items(batch)
        .next()
        .ok_or_else(|| StoreError::unavailable("the store answered no decision for the item"))
}

fn closed(error: &StoreError, id: &RuleId, debt: u64) -> Drawn {
    tracing::warn!(
        target: "tollgate::envoy",
        rule = id.as_str(),
        %error,
        "the store cannot answer and the rule fails closed: its quota buckets are denied"
    );
    Drawn {
        debt,
        outcome: Outcome::Closed,
    }
}
