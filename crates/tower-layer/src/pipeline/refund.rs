//! Taking back charges once the response is known: those it says should not count ("count
//! only failed logins"), and the concurrency slots the request holds until its body ends.

use http::StatusCode;
use smallvec::SmallVec;
use tollgate_core::{DynStore, Receipt, RefundError, RefundNow, Store};

use super::conclude::Charges;
use super::held::HeldSlots;
use crate::rules::rule::CountWhen;

/// Refunds every receipt to `store`: at once when the store can, else in a spawned task.
pub(crate) fn refund_all(store: DynStore, receipts: Vec<Receipt>) {
    let mut later = Vec::new();
    for receipt in receipts {
        match store.refund_now(receipt) {
            RefundNow::Done(Ok(())) => {}
            RefundNow::Done(Err(error)) => log_failure(&error),
            RefundNow::Later(receipt) => later.push(receipt),
        }
    }
    if later.is_empty() {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        tracing::warn!(target: "tollgate::store", "no tokio runtime to refund charges on");
        return;
    };
    runtime.spawn(async move {
        for receipt in later {
            if let Err(error) = store.refund(receipt).await {
                log_failure(&error);
            }
        }
    });
}

/// A refund that failed is logged and dropped: the caller keeps the charge (stricter, never
/// more generous), and retrying from inside a response would hold it up.
fn log_failure(failed: &RefundError) {
    tracing::warn!(
        target: "tollgate::store",
        error = %failed,
        "could not refund a charge that should not count"
    );
}

/// Charges to take back unless the response says they count, and slots to give back when the
/// response body ends (or when this, or what it becomes, is dropped first).
pub(crate) struct PendingRefunds {
    charges: SmallVec<[(Receipt, CountWhen); 1]>,
    held: Option<HeldSlots>,
    store: DynStore,
}

impl PendingRefunds {
    /// `charges` to settle with `store` once the response is known, and the slots held until
    /// its body ends.
    pub(crate) fn new(charges: Charges, store: DynStore) -> Self {
        let held = (!charges.held.is_empty()).then(|| HeldSlots::new(charges.held, store.clone()));
        PendingRefunds {
            charges: charges.conditional,
            held,
            store,
        }
    }

    /// Refunds the charges whose rule says a response with `status` does not count; answers
    /// the slots still held, for the response body to keep until it ends.
    pub(crate) fn settle(self, status: StatusCode) -> Option<HeldSlots> {
        let receipts: Vec<Receipt> = self
            .charges
            .into_iter()
            .filter(|(_, counts)| !counts(status))
            .map(|(receipt, _)| receipt)
            .collect();
        if !receipts.is_empty() {
            refund_all(self.store, receipts);
        }
        self.held
    }
}
