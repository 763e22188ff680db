//! A synced item's check: decided on the key's local copy, its spend pushed to the shared count
//! as debt in one batch for every key, the shared count brought back on the same call.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::background::Job;
use super::check::Undo;
use super::store::Inner;
use super::sync::{Local, Push, Syncs, presence_key};
use tollgate_core::{
    Clock, CountedIn, Decision, Item, ItemDecision, Store, StoreError, SyncSettings, Take,
};

impl<S: Store, C: Clock + Clone> Inner<S, C> {
    /// A synced item decided now, on its local copy (`None`: it must sync first). Needs a
    /// runtime for the push it may start.
    pub(super) fn sync_now(
        self: &Arc<Self>,
        item: &Item<'_>,
        settings: SyncSettings,
        now: tollgate_core::Timestamp,
    ) -> Option<ItemDecision> {
        let (Local::Decided(answer, _), due) = self.syncs.decide(item, settings, now) else {
            return None;
        };
        self.counters
            .decided_locally
            .fetch_add(1, Ordering::Relaxed);
        if due {
            drop(self.start_push());
        }
        Some(answer)
    }

    /// Starts a background push of every due key, unless one is already waiting to start.
    fn start_push(self: &Arc<Self>) -> Option<Job> {
        if self.push_queued.swap(true, Ordering::AcqRel) {
            return None;
        }
        let inner = Arc::clone(self);
        self.start(async move {
            let _one_at_a_time = inner.pushing.lock().await;
            inner.push_queued.store(false, Ordering::Release);
            // Past the supported range nothing is pushed (a push's time is kept): the spend
            // waits for the clock to come back.
            let Ok(now) = crate::time_range::in_range(inner.clock.now()) else {
                return;
            };
            let pushes = inner.syncs.start_push(now, None);
            inner.send(pushes).await;
        })
    }

    /// A synced item: decided on the key's local copy (synced first if it has none).
    pub(super) async fn sync(
        self: &Arc<Self>,
        item: &Item<'_>,
        settings: SyncSettings,
        now: tollgate_core::Timestamp,
    ) -> Result<(ItemDecision, Undo), StoreError> {
        for _ in 0..8 {
            let (local, due) = self.syncs.decide(item, settings, now);
            match local {
                Local::Decided(answer, receipt) => {
                    self.counters
                        .decided_locally
                        .fetch_add(1, Ordering::Relaxed);
                    if due && let Some(job) = self.start_push() {
                        job.await;
                    }
                    return Ok((answer, Undo::Sync(receipt)));
                }
                Local::StoreDown => return Err(Syncs::<C>::down_error()),
                Local::Unknown | Local::Full => self.push(Some(item)).await,
                Local::Crowded => self.push(None).await,
            }
        }
        // Still full after eight pushes: other checks keep spending this gateway's M units as
        // fast as they are pushed. Refused for one interval (never an error: the store is up).
        let quota = item.quota();
        let busy = Decision::refused(
            tollgate_core::RefusalReason::LimitReached,
            quota.limit(),
            0,
            settings.interval(),
            settings.interval(),
        );
        Ok((ItemDecision::uncharged(busy), Undo::Nothing))
    }

    /// Pushes every synced key with unsynced spend or a view an interval old (or only the one
    /// named) in one batch of debt items,
    /// and starts each key's local copy again from the shared count it brings back.
    ///
    /// Once sent, a push runs to its end on the runtime even if the caller stops waiting (a
    /// client gone, a timeout layer): its answer, however late, is applied, so its units are
    /// never pushed a second time while the first push may still land. Without a runtime the
    /// caller runs it, and a caller that stops waiting gives it up (see `send`).
    pub(super) async fn push(self: &Arc<Self>, only: Option<&Item<'_>>) {
        let one_at_a_time = Arc::clone(&self.pushing).lock_owned().await;
        let Ok(now) = crate::time_range::in_range(self.clock.now()) else {
            return;
        };
        let pushes = self.syncs.start_push(now, only);
        if pushes.is_empty() {
            return;
        }
        let (done, finished) = tokio::sync::oneshot::channel();
        let inner = Arc::clone(self);
        let job = async move {
            let _one_at_a_time = one_at_a_time;
            inner.send(pushes).await;
            let _ = done.send(());
        };
        match self.start(job) {
            Some(job) => job.await,
            // Spawned: wait for its end, which comes whether or not this caller stays.
            None => drop(finished.await),
        }
    }

    /// Sends `pushes` as one batch of debt items, and starts each key's local copy again from
    /// the shared count that comes back (or keeps its spend to push again, if the push failed).
    async fn send(&self, pushes: Vec<Push>) {
        if pushes.is_empty() {
            return;
        }
        // Should the caller running this stop waiting (only without a runtime: see `push`),
        // the keys are not left marked as on their way: they are pushed again later, and the
        // push given up may still land (stricter by that push's units, never looser).
        let pending = Pending {
            syncs: &self.syncs,
            pushes: &pushes,
        };
        let presence = self.syncs.presence(&pushes, self.clock.now());
        let gateways = presence_key();
        let items: Vec<Item<'_>> = pushes
            .iter()
            .map(|push| {
                Item::new(&push.rule, push.quota, &push.key)
                    .with_cost(push.units)
                    .with_take(Take::AsDebt)
                    .with_store_failure(tollgate_core::OnStoreFailure::Closed)
            })
            .chain(presence.iter().map(|entry| {
                // The rule's counter of gateways rides on the same call.
                Item::new(&entry.rule, entry.quota, &gateways)
                    .with_cost(entry.cost)
                    .with_store_failure(tollgate_core::OnStoreFailure::Closed)
            }))
            .collect();
        self.counters.store_calls.fetch_add(1, Ordering::Relaxed);
        let sent = self.clock.now();
        let answer = self.shared.check(&items).await;
        // Spend counted anywhere but the shared store (a fallback's memory) was not pushed.
        let answer = answer.ok().filter(|batch| {
            batch
                .items()
                .iter()
                .all(|item| item.counted_in() == CountedIn::Store)
        });
        if let Some(batch) = &answer {
            for (entry, answer) in presence.iter().zip(&batch.items()[pushes.len()..]) {
                let counted = entry
                    .quota
                    .limit()
                    .saturating_sub(answer.decision().remaining());
                self.syncs.saw_presence(entry, counted, self.clock.now());
            }
        }
        if answer.is_none() {
            self.counters.failed_pushes.fetch_add(1, Ordering::Relaxed);
        }
        self.syncs
            .finish_push(&pushes, answer.as_ref(), sent, self.clock.now());
        std::mem::forget(pending);
    }
}

/// Pushes on their way, given up if dropped before their answer is applied.
struct Pending<'a, C: Clock + Clone> {
    syncs: &'a Syncs<C>,
    pushes: &'a [Push],
}

impl<C: Clock + Clone> Drop for Pending<'_, C> {
    fn drop(&mut self) {
        self.syncs.abandon(self.pushes);
    }
}
