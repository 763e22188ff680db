//! What several of these tests share.

use tollgate_core::{
    BatchDecision, Decision, Item, Key, Receipt, RefundError, RuleId, Store, StoreError,
};

/// A primary that always fails.
#[derive(Clone)]
pub(crate) struct Down;

impl Store for Down {
    async fn check(&self, _: &[Item<'_>]) -> Result<BatchDecision, StoreError> {
        Err(StoreError::unavailable("down"))
    }
    async fn peek(&self, _: &Item<'_>) -> Result<Decision, StoreError> {
        Err(StoreError::unavailable("down"))
    }
    async fn refund(&self, receipt: Receipt) -> Result<(), RefundError> {
        Err(RefundError::new(StoreError::unavailable("down"), receipt))
    }
    async fn reset(&self, _: &RuleId, _: &Key) -> Result<(), StoreError> {
        Err(StoreError::unavailable("down"))
    }
}
