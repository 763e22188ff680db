//! Any store behind one object, so extractors need no store type parameter.

use std::future::Future;
use std::pin::Pin;

use tollgate_core::{BatchDecision, Item, Receipt, RefundError, RefundNow, Store, StoreError};

type Boxed<'a, T, E = StoreError> = Pin<Box<dyn Future<Output = Result<T, E>> + Send + 'a>>;

/// A [`Store`] behind a trait object. Stores that answer at once (the in-memory store) still
/// answer without boxing, through `check_now` / `refund_now`.
pub(crate) trait ErasedStore: Send + Sync + 'static {
    fn check_now(&self, items: &[Item<'_>]) -> Option<Result<BatchDecision, StoreError>>;
    fn check<'a>(&'a self, items: &'a [Item<'a>]) -> Boxed<'a, BatchDecision>;
    fn refund_now(&self, receipt: Receipt) -> RefundNow;
    fn refund(&self, receipt: Receipt) -> Boxed<'_, (), RefundError>;
}

impl<St: Store> ErasedStore for St {
    fn check_now(&self, items: &[Item<'_>]) -> Option<Result<BatchDecision, StoreError>> {
        Store::check_now(self, items)
    }

    fn check<'a>(&'a self, items: &'a [Item<'a>]) -> Boxed<'a, BatchDecision> {
        Box::pin(Store::check(self, items))
    }

    fn refund_now(&self, receipt: Receipt) -> RefundNow {
        Store::refund_now(self, receipt)
    }

    fn refund(&self, receipt: Receipt) -> Boxed<'_, (), RefundError> {
        Box::pin(Store::refund(self, receipt))
    }
}
