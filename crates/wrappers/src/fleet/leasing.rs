//! A leased item's check: spent from this gateway's lease, or from a lease (or a top-up) taken
//! from the shared store; unspent units given back.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::background::Job;
use super::check::Undo;
use super::lease::{Failure, Landed, Spend, TopUp};
use super::never_fits;
use super::on_drop::OnDrop;
use super::store::Inner;
use tollgate_core::{
    Clock, CountedIn, Item, ItemDecision, LeaseSettings, Receipt, Store, StoreError, Take,
};

/// The most calls one check waits for before it is refused here. A check waits again only while
/// the calls landing bring units that other checks took first (a call that finds the store
/// refusing or short ends the wait with a refusal), so this bounds only a pathological flood
/// where each lease is spent by others: 64 leases' worth of checks ahead of it.
const WAITS_AT_MOST: usize = 64;

impl<S: Store, C: Clock + Clone> Inner<S, C> {
    /// A leased item: spent from this gateway's lease, or from what the key's one store call
    /// brings (this check's, or the one on its way, waited for).
    pub(super) async fn lease(
        self: &Arc<Self>,
        item: &Item<'_>,
        settings: LeaseSettings,
        now: tollgate_core::Timestamp,
    ) -> Result<(ItemDecision, Undo), StoreError> {
        if item.cost() > item.quota().limit() {
            // Never fits: refused as such, without taking anything.
            let never = never_fits(item.quota());
            return Ok((ItemDecision::uncharged(never), Undo::Nothing));
        }
        let mut now = now;
        for round in 0..WAITS_AT_MOST {
            let (spend, ended) = self.leases.spend(item, settings, now, round == 0, true);
            match spend {
                Spend::Spent(decision, top_up) => {
                    self.in_background(item, top_up, ended).await;
                    return Ok((ItemDecision::uncharged(decision), Undo::Lease));
                }
                Spend::Refused(refusal) => {
                    self.in_background(item, None, ended).await;
                    return Ok((ItemDecision::uncharged(refusal), Undo::Nothing));
                }
                Spend::Wait { notify, landed } => {
                    self.in_background(item, None, ended).await;
                    let notified = notify.notified();
                    tokio::pin!(notified);
                    notified.as_mut().enable();
                    if self.leases.landed(item) == landed {
                        notified.await;
                    }
                    // The call this check waited for failed: answered as its caller was.
                    match self.leases.failed_since(item, landed) {
                        Some(Failure::Error(error)) => return Err(error),
                        Some(Failure::Policy) => return self.by_policy(item).await,
                        None => now = self.clock.now(),
                    }
                }
                Spend::Call { want } => {
                    // Marked landed however this check ends, even dropped before it asks.
                    let on_its_way =
                        OnDrop::new(|| self.leases.call_abandoned(item.rule(), item.key()));
                    self.in_background(item, None, ended).await;
                    return self.call(item, want, on_its_way).await;
                }
                // Never answered to a check that may call; looked at again if it were.
                Spend::Short => now = self.clock.now(),
            }
        }
        // The calls it waited for all went to other checks: refused here for a top-up period
        // (rare: it takes a burst of other checks larger than every lease they brought).
        self.counters
            .decided_locally
            .fetch_add(1, Ordering::Relaxed);
        let wait = settings.top_up_period();
        let busy = tollgate_core::Decision::refused(
            tollgate_core::RefusalReason::LimitReached,
            item.quota().limit(),
            0,
            wait,
            wait,
        );
        Ok((ItemDecision::uncharged(busy), Undo::Nothing))
    }

    /// This check's call for the key: up to `want` units, its own cost spent first from what
    /// comes back. `on_its_way` marks the call landed if this ends before the store answers: a
    /// caller that stops waiting abandons the call (the checks waiting for it ask again), it
    /// does not fail it.
    async fn call(
        self: &Arc<Self>,
        item: &Item<'_>,
        want: u64,
        on_its_way: OnDrop<impl FnOnce()>,
    ) -> Result<(ItemDecision, Undo), StoreError> {
        let asked = item.with_cost(want).with_take(Take::UpTo);
        self.counters.store_calls.fetch_add(1, Ordering::Relaxed);
        let answer = self.shared.check_one(&asked).await;
        on_its_way.disarm();
        let answer = match answer {
            Ok(answer) if !let_through_by_policy(&answer, &asked) => answer,
            Ok(answer) => {
                // Let through by the rule's failure policy, nothing leased: as the store said;
                // the next check asks again.
                self.leases
                    .call_failed(item.rule(), item.key(), Failure::Policy);
                return Ok((ItemDecision::uncharged(*answer.decision()), Undo::Nothing));
            }
            Err(error) => {
                let failure = Failure::Error(error.clone());
                self.leases.call_failed(item.rule(), item.key(), failure);
                return Err(error);
            }
        };
        let now = self.clock.now();
        let view = *answer.decision();
        let (landed, give_back) = self.leases.land(&asked, answer, Some(item.cost()), now);
        if let Some(receipt) = give_back {
            self.give_back(vec![receipt]).await;
        }
        // A call made with a cost is always decided; `view` is only a fallback.
        match landed.unwrap_or(Landed::Refused(view)) {
            Landed::Spent(decision) => Ok((ItemDecision::uncharged(decision), Undo::Lease)),
            Landed::Refused(refusal) => Ok((ItemDecision::uncharged(refusal), Undo::Nothing)),
        }
    }

    /// A check whose key's call was let through by the rule's failure policy while it waited:
    /// it asks the shared store for its own cost (outside the key's single flight), so the
    /// policy answers it as it answered the caller — at once from a
    /// [`FallbackStore`](crate::FallbackStore) whose breaker is open, after its timeout before
    /// (once per check that waited, at the start of an outage). A store answering again counts
    /// it for real: no receipt, as no leased check has one, and not put back if the rest of its
    /// request is refused (stricter by that check's cost, never looser).
    async fn by_policy(&self, item: &Item<'_>) -> Result<(ItemDecision, Undo), StoreError> {
        self.counters.store_calls.fetch_add(1, Ordering::Relaxed);
        let answer = self.shared.check_one(item).await?;
        Ok((ItemDecision::uncharged(*answer.decision()), Undo::Nothing))
    }

    /// Asks for a top-up for `item`'s key, and gives back `ended`, without holding up the
    /// caller when a Tokio runtime can run them.
    async fn in_background(
        self: &Arc<Self>,
        item: &Item<'_>,
        top_up: Option<TopUp>,
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
        top_up: Option<TopUp>,
        ended: Vec<Receipt>,
    ) -> Vec<Job> {
        let mut inline = Vec::new();
        if top_up.is_none() && ended.is_empty() {
            return inline;
        }
        if !ended.is_empty() {
            let inner = Arc::clone(self);
            inline.extend(self.start(async move { inner.give_back(ended).await }));
        }
        if let Some(TopUp { units }) = top_up {
            let inner = Arc::clone(self);
            let (rule, key, quota) = (item.rule().clone(), item.key().clone(), *item.quota());
            let policy = item.on_store_failure();
            // Marked landed however the job ends, even dropped before it first ran (a runtime
            // shut down, a caller that awaited it inline and stopped waiting).
            let on_its_way = {
                let (inner, rule, key) = (Arc::clone(self), rule.clone(), key.clone());
                OnDrop::new(move || inner.leases.call_abandoned(&rule, &key))
            };
            inline.extend(self.start(async move {
                let asked = Item::new(&rule, quota, &key)
                    .with_cost(units)
                    .with_take(Take::UpTo)
                    .with_store_failure(policy);
                inner.counters.store_calls.fetch_add(1, Ordering::Relaxed);
                let answer = inner.shared.check_one(&asked).await;
                on_its_way.disarm();
                match answer {
                    Ok(answer) if !let_through_by_policy(&answer, &asked) => {
                        let now = inner.clock.now();
                        let (_, give_back) = inner.leases.land(&asked, answer, None, now);
                        if let Some(receipt) = give_back {
                            inner.give_back(vec![receipt]).await;
                        }
                    }
                    Ok(_) => inner.leases.call_failed(&rule, &key, Failure::Policy),
                    Err(error) => inner.leases.call_failed(&rule, &key, Failure::Error(error)),
                }
            }));
        }
        inline
    }

    /// A leased item decided now, from the lease (`None`: the store must be asked, or a call on
    /// its way waited for, or there is background work to start and no Tokio runtime to spawn
    /// it on: the async check does it).
    pub(super) fn lease_now(
        self: &Arc<Self>,
        item: &Item<'_>,
        settings: LeaseSettings,
        now: tollgate_core::Timestamp,
    ) -> Option<ItemDecision> {
        if item.cost() > item.quota().limit() {
            return None;
        }
        let (spend, ended) = self.leases.spend(item, settings, now, true, false);
        let (decision, top_up) = match spend {
            Spend::Spent(decision, None) if ended.is_empty() => {
                // Nearly every check of a busy key: nothing to start.
                return Some(ItemDecision::uncharged(decision));
            }
            Spend::Spent(decision, top_up) => (Some(decision), top_up),
            Spend::Refused(decision) => (Some(decision), None),
            Spend::Wait { .. } | Spend::Call { .. } | Spend::Short => (None, None),
        };
        self.start_spawned(item, top_up, ended);
        Some(ItemDecision::uncharged(decision?))
    }

    /// Starts what a check decided now leaves to do, on the runtime `Leases::spend` made sure
    /// of (kept out of line: once a lease, not once a check).
    #[inline(never)]
    fn start_spawned(
        self: &Arc<Self>,
        item: &Item<'_>,
        top_up: Option<TopUp>,
        ended: Vec<Receipt>,
    ) {
        let inline = self.start_background(item, top_up, ended);
        debug_assert!(
            inline.is_empty(),
            "spend starts background work only inside a runtime"
        );
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

/// Whether `answer` to the lease call `asked` is the rule's failure policy letting the check
/// through without leasing anything (`open`; `open_within`, counted in the fallback's memory
/// under its own quota) rather than the shared store's answer: the call failed, and the key asks
/// again on its next check. A local count's refusal, or units leased from the fallback's memory
/// (`local`), land as the store's answers do.
fn let_through_by_policy(answer: &ItemDecision, asked: &Item<'_>) -> bool {
    answer.counted_in() != CountedIn::Store
        && answer.granted(asked) == 0
        && answer.decision().is_allowed()
}
