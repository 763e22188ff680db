//! Any store behind one object, so extractors need no store type parameter.

use std::future::Future;
use std::pin::Pin;

use tollgate_core::{BatchDecision, Item, Receipt, Store, StoreError};

type Boxed<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// A [`Store`] behind a trait object. Stores that answer at once (the in-memory store) still
/// answer without boxing, through `check_now` / `refund_now`.
pub(crate) trait ErasedStore: Send + Sync + 'static {
    fn check_now(&self, items: &[Item<'_>]) -> Option<Result<BatchDecision, StoreError>>;
    fn check<'a>(&'a self, items: &'a [Item<'a>]) -> Boxed<'a, BatchDecision>;
    fn refund_now(&self, receipt: &Receipt) -> Option<Result<(), StoreError>>;
    fn refund<'a>(&'a self, receipt: &'a Receipt) -> Boxed<'a, ()>;
}

impl<St: Store> ErasedStore for St {
    fn check_now(&self, items: &[Item<'_>]) -> Option<Result<BatchDecision, StoreError>> {
        Store::check_now(self, items)
    }

    fn check<'a>(&'a self, items: &'a [Item<'a>]) -> Boxed<'a, BatchDecision> {
        Box::pin(Store::check(self, items))
    }

    fn refund_now(&self, receipt: &Receipt) -> Option<Result<(), StoreError>> {
        Store::refund_now(self, receipt)
    }

    fn refund<'a>(&'a self, receipt: &'a Receipt) -> Boxed<'a, ()> {
        Box::pin(Store::refund(self, receipt))
    }
}
