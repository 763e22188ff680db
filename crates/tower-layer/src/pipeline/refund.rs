//! Giving charges back to the store: at once when it answers at once (in memory), else in a
//! spawned task; a refund that fails is logged, and the caller keeps the charge.

use tollgate_core::{DynStore, Receipt, RefundError, RefundNow, Store};

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
