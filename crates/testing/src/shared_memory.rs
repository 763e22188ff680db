//! An in-memory store that answers as a store the gateways share: for testing what a layer does
//! over Redis without a server.

use tollgate_core::{
    BatchDecision, Decision, Item, Key, MemoryStore, Receipt, RefundError, RuleId, Store,
    StoreError,
};

/// A [`MemoryStore`] that answers [`capabilities`](Store::capabilities) as the Redis store
/// does (a store every gateway shares, which can wait for a replica), so fleet modes that
/// need a wrapper over such a store are refused over it too. Clones share counts. (It has no
/// replica: an item asking for one's acknowledgement is answered at once.)
///
/// ```
/// use tollgate_testing::SharedMemory;
/// use tollgate_core::{Capabilities, Store};
///
/// let redis_like = Capabilities::default().with_replica_ack();
/// assert_eq!(SharedMemory::default().capabilities(), redis_like);
/// ```
#[derive(Debug, Clone, Default)]
pub struct SharedMemory(MemoryStore);

impl Store for SharedMemory {
    fn capabilities(&self) -> tollgate_core::Capabilities {
        tollgate_core::Capabilities::default().with_replica_ack()
    }

    async fn check(&self, items: &[Item<'_>]) -> Result<BatchDecision, StoreError> {
        self.0.check(items).await
    }

    async fn peek(&self, item: &Item<'_>) -> Result<Decision, StoreError> {
        self.0.peek(item).await
    }

    async fn refund(&self, receipt: Receipt) -> Result<(), RefundError> {
        self.0.refund(receipt).await
    }

    async fn reset(&self, rule: &RuleId, key: &Key) -> Result<(), StoreError> {
        self.0.reset(rule, key).await
    }
}
