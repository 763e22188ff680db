//! The check path: which items are decided on this gateway, and one request over local and
//! shared counts, all-or-nothing over both.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::never_fits;
use super::store::{FleetStore, Inner};
use tollgate_core::store_kit::{BatchKit, CapabilitiesKit, LocalKit};
use tollgate_core::{
    BatchDecision, Clock, Counting, Decision, Item, ItemDecision, Key, Receipt, RefundError,
    RefundNow, RuleId, Store, StoreError,
};

/// How to put back one local decision of a request refused elsewhere.
pub(super) enum Undo {
    Nothing,
    Lease,
    Sync(Option<Receipt>),
    Split(Option<Receipt>),
}

impl<S: Store, C: Clock + Clone> Inner<S, C> {
    /// Whether `item` goes to the shared store as it is: counted exactly, costing nothing, or
    /// naming a store of a [`Stores`](crate::Stores) this wraps (leases and pushes would be
    /// made for its default store; a `FleetStore` inside each store of a `Stores` leases and
    /// syncs there).
    fn is_exact(&self, item: &Item<'_>) -> bool {
        match item.counting() {
            Counting::Exact => true,
            Counting::Lease(_) | Counting::Sync(_)
                if item.cost() == 0
                    || item
                        .store_name()
                        .is_some_and(|name| self.capabilities.knows_store(name)) =>
            {
                true
            }
            Counting::Lease(_) => false,
            // A rule whose fleet is too large for its limit: counted exactly (and said so).
            Counting::Sync(settings) => self.syncs.counts_exactly(item, settings, self.clock.now()),
            Counting::Split(_) => item.cost() == 0,
        }
    }

    /// A request with leased or synced items: those are decided here first; the rest in the
    /// shared store; all-or-nothing over both.
    async fn check_mixed(
        self: &Arc<Self>,
        items: &[Item<'_>],
    ) -> Result<BatchDecision, StoreError> {
        let now = crate::time_range::in_range(self.clock.now())?;
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
                Counting::Exact => continue,
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

    /// Puts back the local decisions `undo` lists, of a request refused elsewhere.
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
}

impl<S: Store, C: Clock + Clone> Store for FleetStore<S, C> {
    /// The shared store's, with sub-buckets, cached refusals and splits for every store under
    /// it, and leases and syncs for its default store.
    fn capabilities(&self) -> tollgate_core::Capabilities {
        self.inner.capabilities.clone()
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
            let now = crate::time_range::in_range(self.inner.clock.now())?;
            let (answer, _) = match item.counting() {
                Counting::Lease(settings) => self.inner.lease(item, settings, now).await?,
                Counting::Sync(settings) => self.inner.sync(item, settings, now).await?,
                Counting::Split(_) => self.inner.split(item),
                Counting::Exact => return self.inner.shared.check(items).await,
            };
            let allowed = answer.decision().is_allowed() || !item.is_enforcing();
            return Ok(BatchDecision::one(allowed, answer));
        }
        self.inner.check_mixed(items).await
    }

    /// Exact items: the shared store's own answer now, if it has one. One leased or synced item
    /// decided from the lease or the local copy (a synced one only inside a Tokio runtime, which
    /// runs its push; a leased one too when the spend starts a top-up or gives units back);
    /// `None` when the store must be asked.
    fn check_now(&self, items: &[Item<'_>]) -> Option<Result<BatchDecision, StoreError>> {
        let exact = items.iter().all(|item| self.inner.is_exact(item));
        let ([item], false) = (items, exact) else {
            // All exact: the shared store's; several items, some local: asked in `check`.
            return if exact {
                self.inner.shared.check_now(items)
            } else {
                None
            };
        };
        let now = match crate::time_range::in_range(self.inner.clock.now()) {
            Ok(now) => now,
            Err(error) => return Some(Err(error)),
        };
        let answer = match item.counting() {
            Counting::Split(_) => self.inner.split(item).0,
            Counting::Lease(settings) => self.inner.lease_now(item, settings, now)?,
            Counting::Sync(settings) => {
                tokio::runtime::Handle::try_current().ok()?;
                self.inner.sync_now(item, settings, now)?
            }
            Counting::Exact => return None,
        };
        let allowed = answer.decision().is_allowed() || !item.is_enforcing();
        Some(Ok(BatchDecision::one(allowed, answer)))
    }

    /// A split item's part, read here; every other item in the shared store.
    async fn peek(&self, item: &Item<'_>) -> Result<Decision, StoreError> {
        if let Counting::Split(_) = item.counting() {
            crate::time_range::in_range(self.inner.clock.now())?;
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

    fn renew(&self, receipt: &Receipt) -> impl Future<Output = Result<(), StoreError>> + Send {
        self.inner.shared.renew(receipt)
    }

    async fn reset(&self, rule: &RuleId, key: &Key) -> Result<(), StoreError> {
        self.inner.leases.forget(rule, key);
        self.inner.syncs.forget(rule, key);
        self.inner.split.reset_sync(rule, key);
        self.inner.shared.reset(rule, key).await
    }
}
