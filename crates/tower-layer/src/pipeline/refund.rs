//! Taking back charges that a response says should not count ("count only failed logins").

use http::StatusCode;
use smallvec::SmallVec;
use tollgate_core::{DynStore, Receipt, RefundError, RefundNow, Store};

use crate::rules::rule::CountWhen;

/// Refunds every receipt to `store`: at once when the store can, else in a spawned task.
fn refund_all(store: DynStore, receipts: Vec<Receipt>) {
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

/// Charges to take back unless the response says they count.
pub(crate) struct PendingRefunds {
    charges: SmallVec<[(Receipt, CountWhen); 1]>,
    store: DynStore,
}

impl PendingRefunds {
    /// Charges to settle with `store` once the response is known.
    pub(crate) fn new(charges: SmallVec<[(Receipt, CountWhen); 1]>, store: DynStore) -> Self {
        PendingRefunds { charges, store }
    }

    /// Refunds the charges whose rule says a response with `status` does not count.
    pub(crate) fn settle(self, status: StatusCode) {
        let receipts: Vec<Receipt> = self
            .charges
            .into_iter()
            .filter(|(_, counts)| !counts(status))
            .map(|(receipt, _)| receipt)
            .collect();
        if !receipts.is_empty() {
            refund_all(self.store, receipts);
        }
    }
}
