//! Concurrency slots a request holds while it runs: given back when the response body has been
//! sent to its end, or when the response, its body or the request's future is dropped (the
//! client went away, a timeout fired, the handler panicked); renewed meanwhile in a store whose
//! holds lapse.

use std::sync::Arc;
use std::time::Duration;

use smallvec::SmallVec;
use tokio::task::AbortHandle;
use tollgate_core::{Charge, DynStore, Receipt, Store};

use super::refund::refund_all;
use crate::observe::observers::RuleObservers;

/// The slots one request holds; dropping it gives them back.
pub(crate) struct HeldSlots {
    held: Arc<Held>,
    renewal: Option<AbortHandle>,
}

/// A held receipt and its rule's observers (the in-flight gauge).
pub(crate) type Hold = (Receipt, Option<RuleObservers>);

/// The holds, given back when the last reference goes (the guard's, or a renewal's in progress
/// when the guard went).
struct Held {
    holds: SmallVec<[Hold; 1]>,
    store: DynStore,
}

impl Held {
    /// Tells each hold's observers that its slots were taken (`true`) or given back.
    fn tell_observers(&self, taken: bool) {
        for (receipt, observers) in &self.holds {
            if let Some(observers) = observers {
                observers.slots_held(slots_of(receipt), taken);
            }
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.tell_observers(false);
        let receipts: Vec<Receipt> = self.holds.drain(..).map(|(receipt, _)| receipt).collect();
        refund_all(self.store.clone(), receipts);
    }
}

/// The slots a held receipt took.
fn slots_of(receipt: &Receipt) -> u64 {
    match receipt.charge() {
        Charge::Held { slots, .. } => *slots,
        _ => 0,
    }
}

impl HeldSlots {
    /// Holds `holds` (concurrency charges) until dropped, renewing them in `store` a few times
    /// per slot ttl when they lapse otherwise ([`Charge::lapses`]: a remote store's).
    pub(crate) fn new(holds: SmallVec<[Hold; 1]>, store: DynStore) -> Self {
        let every = renewal_period(&holds);
        let held = Arc::new(Held { holds, store });
        held.tell_observers(true);
        let renewal = every.and_then(|every| start_renewal(&held, every));
        HeldSlots { held, renewal }
    }
}

impl Drop for HeldSlots {
    fn drop(&mut self) {
        if let Some(renewal) = self.renewal.take() {
            renewal.abort();
        }
    }
}

impl std::fmt::Debug for HeldSlots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeldSlots")
            .field("holds", &self.held.holds.len())
            .finish_non_exhaustive()
    }
}

/// A third of the shortest slot ttl among holds that can lapse, so two renewals may fail in a
/// row before a running request loses its slot.
fn renewal_period(holds: &[Hold]) -> Option<Duration> {
    holds
        .iter()
        .map(|(receipt, _)| receipt)
        .filter(|receipt| receipt.charge().lapses())
        .filter_map(|receipt| receipt.quota().slot_ttl())
        .min()
        .map(|ttl| ttl / 3)
}

fn start_renewal(held: &Arc<Held>, every: Duration) -> Option<AbortHandle> {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        tracing::warn!(
            target: "tollgate::store",
            "no tokio runtime to renew concurrency slots on; they lapse after their slot ttl"
        );
        return None;
    };
    let weak = Arc::downgrade(held);
    let task = runtime.spawn(async move {
        let start = tokio::time::Instant::now() + every;
        let mut ticks = tokio::time::interval_at(start, every);
        loop {
            ticks.tick().await;
            let Some(held) = weak.upgrade() else { return };
            for (receipt, _) in &held.holds {
                if let Err(error) = held.store.renew(receipt).await {
                    tracing::warn!(
                        target: "tollgate::store",
                        rule = %receipt.rule(),
                        %error,
                        "could not renew a concurrency slot; it lapses after its slot ttl unless a later renewal succeeds"
                    );
                }
            }
        }
    });
    Some(task.abort_handle())
}
