//! Any store behind one type: what code that must not carry a store type parameter (typed
//! limits in handlers, the admin API, the layer's refunds) holds.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::{
    BatchDecision, Capabilities, Decision, Item, ItemDecision, Key, Receipt, RefundError,
    RefundNow, RuleId, Store, StoreError,
};

/// A boxed future, as the erased methods return.
type Boxed<'a, T, E = StoreError> = Pin<Box<dyn Future<Output = Result<T, E>> + Send + 'a>>;

/// The object-safe face of [`Store`]: every method, futures boxed.
trait ErasedStore: Send + Sync + 'static {
    fn check<'a>(&'a self, items: &'a [Item<'a>]) -> Boxed<'a, BatchDecision>;
    fn check_now(&self, items: &[Item<'_>]) -> Option<Result<BatchDecision, StoreError>>;
    fn check_one<'a>(&'a self, item: &'a Item<'a>) -> Boxed<'a, ItemDecision>;
    fn peek<'a>(&'a self, item: &'a Item<'a>) -> Boxed<'a, Decision>;
    fn refund(&self, receipt: Receipt) -> Boxed<'_, (), RefundError>;
    fn refund_now(&self, receipt: Receipt) -> RefundNow;
    fn renew<'a>(&'a self, receipt: &'a Receipt) -> Boxed<'a, ()>;
    fn reset<'a>(&'a self, rule: &'a RuleId, key: &'a Key) -> Boxed<'a, ()>;
    fn capabilities(&self) -> Capabilities;
    fn refused_now(&self, items: &[Item<'_>]) -> Option<BatchDecision>;
    fn node_of(&self, item: &Item<'_>) -> Option<std::sync::Arc<str>>;
}

impl<St: Store> ErasedStore for St {
    fn check<'a>(&'a self, items: &'a [Item<'a>]) -> Boxed<'a, BatchDecision> {
        Box::pin(Store::check(self, items))
    }

    fn check_now(&self, items: &[Item<'_>]) -> Option<Result<BatchDecision, StoreError>> {
        Store::check_now(self, items)
    }

    fn check_one<'a>(&'a self, item: &'a Item<'a>) -> Boxed<'a, ItemDecision> {
        Box::pin(Store::check_one(self, item))
    }

    fn peek<'a>(&'a self, item: &'a Item<'a>) -> Boxed<'a, Decision> {
        Box::pin(Store::peek(self, item))
    }

    fn refund(&self, receipt: Receipt) -> Boxed<'_, (), RefundError> {
        Box::pin(Store::refund(self, receipt))
    }

    fn refund_now(&self, receipt: Receipt) -> RefundNow {
        Store::refund_now(self, receipt)
    }

    fn renew<'a>(&'a self, receipt: &'a Receipt) -> Boxed<'a, ()> {
        Box::pin(Store::renew(self, receipt))
    }

    fn reset<'a>(&'a self, rule: &'a RuleId, key: &'a Key) -> Boxed<'a, ()> {
        Box::pin(Store::reset(self, rule, key))
    }

    fn capabilities(&self) -> Capabilities {
        Store::capabilities(self)
    }

    fn refused_now(&self, items: &[Item<'_>]) -> Option<BatchDecision> {
        Store::refused_now(self, items)
    }

    fn node_of(&self, item: &Item<'_>) -> Option<std::sync::Arc<str>> {
        Store::node_of(self, item)
    }
}

/// Any [`Store`], its type erased: a cheap-to-clone handle that is itself a `Store`. Stores
/// that answer at once (the in-memory store) still answer without a boxed future, through
/// [`check_now`](Store::check_now) and [`refund_now`](Store::refund_now); the other methods box
/// one future per call.
///
/// Clones share the store; [`from_arc`](Self::from_arc) shares one the caller already holds.
///
/// ```
/// use tollgate_core::{DynStore, Item, Key, MemoryStore, Quota, RuleId, Store};
/// use std::time::Duration;
///
/// # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
/// let store = DynStore::new(MemoryStore::new());
/// let rule = RuleId::new("follows")?;
/// let quota = Quota::fixed_window(400, Duration::from_secs(86_400))?;
/// let key = Key::new("account-4821");
/// let decision = store.check_one(&Item::new(&rule, quota, &key)).await?;
/// assert_eq!(decision.decision().remaining(), 399);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct DynStore {
    inner: Arc<dyn ErasedStore>,
}

impl std::fmt::Debug for DynStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynStore").finish_non_exhaustive()
    }
}

impl DynStore {
    /// `store`, its type erased.
    pub fn new<St: Store>(store: St) -> DynStore {
        DynStore {
            inner: Arc::new(store),
        }
    }

    /// A store already shared, its type erased (no second `Arc`).
    pub fn from_arc<St: Store>(store: Arc<St>) -> DynStore {
        DynStore { inner: store }
    }
}

impl Store for DynStore {
    async fn check(&self, items: &[Item<'_>]) -> Result<BatchDecision, StoreError> {
        self.inner.check(items).await
    }

    fn check_now(&self, items: &[Item<'_>]) -> Option<Result<BatchDecision, StoreError>> {
        self.inner.check_now(items)
    }

    async fn check_one(&self, item: &Item<'_>) -> Result<ItemDecision, StoreError> {
        self.inner.check_one(item).await
    }

    async fn peek(&self, item: &Item<'_>) -> Result<Decision, StoreError> {
        self.inner.peek(item).await
    }

    fn refund(&self, receipt: Receipt) -> impl Future<Output = Result<(), RefundError>> + Send {
        self.inner.refund(receipt)
    }

    fn refund_now(&self, receipt: Receipt) -> RefundNow {
        self.inner.refund_now(receipt)
    }

    async fn renew(&self, receipt: &Receipt) -> Result<(), StoreError> {
        self.inner.renew(receipt).await
    }

    async fn reset(&self, rule: &RuleId, key: &Key) -> Result<(), StoreError> {
        self.inner.reset(rule, key).await
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    fn refused_now(&self, items: &[Item<'_>]) -> Option<BatchDecision> {
        self.inner.refused_now(items)
    }

    fn node_of(&self, item: &Item<'_>) -> Option<std::sync::Arc<str>> {
        self.inner.node_of(item)
    }
}
