//! A leased item's check: spent from this gateway's lease, or from a lease (or a top-up) taken
//! from the shared store; unspent units given back.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::background::Job;
use super::check::Undo;
use super::lease::Spend;
use super::never_fits;
use super::store::Inner;
use crate::{
    Clock, CountedIn, Item, ItemDecision, LeaseSettings, Receipt, Store, StoreError, Take,
};

impl<S: Store, C: Clock + Clone> Inner<S, C> {
    /// A leased item: spent from this gateway's lease, or from a lease taken now.
    pub(super) async fn lease(
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
    pub(super) fn lease_now(
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

    /// Gives back the unspent units these receipts hold. One that fails is dropped: its units
    /// stay charged until its lease would have ended (a bounded loss, never a grant).
    pub(super) async fn give_back(&self, receipts: Vec<Receipt>) {
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
