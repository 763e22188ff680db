//! A cost known only once the work is done (tokens generated, bytes streamed, rows scanned): an
//! estimate charged up front, settled with the actual cost afterwards.

use crate::{
    Counting, FleetModes, Item, ItemDecision, Key, OnStoreFailure, Quota, Receipt, RuleId, Store,
    StoreError, Take,
};

/// An estimate charged up front, to settle with the actual cost once it is known.
///
/// Check the estimate with an item taking [`Take::AfterDebt`] (what the caller owes from
/// earlier settlements is paid first, and the request is refused while any is owed), keep the
/// answer as an `Estimate`, and [`settle`](Estimate::settle) it with the actual cost:
///
/// * **more than the estimate**: the difference is charged as debt ([`Take::AsDebt`]): what
///   fits now is charged, the rest is owed and paid by the caller's next requests before any of
///   them is admitted;
/// * **less**: the difference is given back from the estimate's own charge (as much of it as the
///   caller's state still holds, like any refund);
/// * **the same**: nothing to do.
///
/// **Bounds.** A caller with `K` requests in flight can get at most `K × (max actual −
/// estimate)` past its limit (each was admitted on its estimate), and that overshoot is owed
/// and paid before it is admitted again — up to the store's debt cap of 1,024 full allowances.
///
/// The settlement follows the item's store-failure policy like any check: with the store down,
/// an open rule's difference is not charged ([`Settlement::Uncounted`]), a local or
/// open-within one's is charged in this gateway's memory (behind a
/// `FallbackStore`), a closed one's excess fails to settle (the
/// estimate stands). A shortfall is given back as any refund is: where the estimate was
/// charged, or in the fallback's memory while the primary is down. An estimate let through
/// uncounted settles nothing.
///
/// ```
/// use futures_executor::block_on;
/// use tollgate_core::{Estimate, Item, Key, MemoryStore, Quota, Rate, RuleId, Settlement, Store, Take};
///
/// let store = MemoryStore::new();
/// let (rule, key) = (RuleId::new("llm-tokens")?, Key::new("acct-1"));
/// let quota = Quota::token_bucket(1_000, Rate::per_minute(1_000))?;
///
/// // Admitted on an estimate of 100 tokens...
/// let item = Item::new(&rule, quota, &key).with_cost(100).with_take(Take::AfterDebt);
/// let answer = block_on(store.check_one(&item))?;
/// assert!(answer.decision().is_allowed());
/// let estimate = Estimate::new(&item, answer);
///
/// // ...the answer took 1,500: 900 more fit, 500 are owed.
/// let settled = block_on(estimate.settle(&store, 1_500))?;
/// assert_eq!(settled, Settlement::Charged { units: 1_400, debt: 500 });
///
/// // The next request waits until the debt is paid.
/// assert!(!block_on(store.check_one(&item))?.decision().is_allowed());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Estimate {
    rule: RuleId,
    key: Key,
    quota: Quota,
    counting: Counting,
    store: Option<Box<str>>,
    on_store_failure: OnStoreFailure,
    /// Whether the item took after debt: one that did not (a shadow item, a pacing or
    /// concurrency quota, which take exactly) settles nothing.
    settles: bool,
    /// What the estimate charged (0 when it was not counted), and its receipt.
    charged: u64,
    receipt: Option<Receipt>,
}

/// What settling an [`Estimate`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Settlement {
    /// The actual cost was what was charged: nothing changed.
    Unchanged,
    /// `units` more were charged, of which `debt` are owed past the limit (the caller's whole
    /// debt after this charge, at most 1,024 full allowances: the rest is forgiven).
    Charged {
        /// Units charged beyond the estimate (as asked; see `debt` for what is owed).
        units: u64,
        /// What the caller owes past its limit afterwards.
        debt: u64,
    },
    /// Up to `units` of the estimate were given back (what the caller's state still held of
    /// them).
    Refunded {
        /// Units of the estimate asked back.
        units: u64,
    },
    /// The difference was let through uncounted: the store could not answer and the rule's
    /// failure policy is open.
    Uncounted,
}

impl Estimate {
    /// What the store's `answer` to `item` charged, to settle later. An estimate of 0 (no
    /// charge) settles from 0: the whole actual cost is charged then.
    ///
    /// These settle nothing (the estimate stands): a refused answer (the work never ran); an
    /// item let through uncounted by an open failure policy
    /// ([`CountedIn::Nowhere`](crate::CountedIn): the rule was not applied to this request,
    /// before or after); a charge the store keeps no receipt for (a
    /// [`Counting::Split`] rule's local count, an
    /// [`OpenWithin`](crate::OnStoreFailure::OpenWithin) rule counted under its local quota);
    /// an item that does not take [`Take::AfterDebt`] as the store applies it ([`Item::take`]:
    /// shadow items, pacing and concurrency quotas take exactly).
    pub fn new(item: &Item<'_>, answer: ItemDecision) -> Estimate {
        let counted = answer.counted_in() != crate::CountedIn::Nowhere;
        let allowed = answer.decision().is_allowed();
        let receipt = answer.into_receipt(item);
        // A charge with no receipt (a split rule's, an `OpenWithin` rule's local one) cannot be
        // narrowed or told from no charge: such an estimate stands.
        let settles = item.take() == Take::AfterDebt
            && counted
            && allowed
            && (receipt.is_some() || item.cost() == 0);
        let charged = if receipt.is_some() { item.cost() } else { 0 };
        Estimate {
            rule: item.rule().clone(),
            key: item.key().clone(),
            quota: *item.whole_quota(),
            counting: item.fleet_modes().counting(),
            store: item.store_name().map(Box::from),
            on_store_failure: item.on_store_failure(),
            settles,
            charged,
            receipt,
        }
    }

    /// The rule charged.
    pub fn rule(&self) -> &RuleId {
        &self.rule
    }

    /// The key charged.
    pub fn key(&self) -> &Key {
        &self.key
    }

    /// The units the estimate charged.
    pub fn charged(&self) -> u64 {
        self.charged
    }

    /// Settles with the `actual` cost: charges what it was above the estimate as debt, or gives
    /// back what it was below (see [`Estimate`]). An error is the store's: the difference was
    /// not settled (the caller keeps the estimate's charge).
    pub async fn settle<S: Store + ?Sized>(
        self,
        store: &S,
        actual: u64,
    ) -> Result<Settlement, StoreError> {
        if !self.settles {
            return Ok(Settlement::Unchanged);
        }
        if actual > self.charged {
            let units = actual - self.charged;
            let modes = FleetModes::new()
                .with_counting(self.counting)
                .with_store(self.store.as_deref());
            let item = Item::new(&self.rule, self.quota, &self.key)
                .with_fleet_modes(modes)
                .with_cost(units)
                .with_take(Take::AsDebt)
                .with_store_failure(self.on_store_failure);
            let answer = store.check(std::slice::from_ref(&item)).await?;
            let Some(answer) = answer.items().first() else {
                return Ok(Settlement::Uncounted);
            };
            if answer.counted_in() == crate::CountedIn::Nowhere {
                return Ok(Settlement::Uncounted);
            }
            let debt = answer.debt();
            return Ok(Settlement::Charged { units, debt });
        }
        match self.receipt {
            Some(receipt) if actual < self.charged => {
                let units = self.charged - actual;
                store
                    .refund(receipt.narrowed(units))
                    .await
                    .map_err(|failed| failed.error().clone())?;
                Ok(Settlement::Refunded { units })
            }
            _ => Ok(Settlement::Unchanged),
        }
    }
}
