//! A store that is down for a stretch of simulated time: the one stand-in of the simulator (a
//! real Redis cannot fail on a manual clock). Outside the outage every call goes to the real
//! in-memory store; inside it every call fails as an unreachable Redis would, and the layer
//! answers with each rule's failure policy.

use std::future::{Future, ready};
use std::ops::Range;
use std::sync::{Arc, Mutex};

use futures_util::future::Either;
use tollgate::core::testing::ManualClock;
use tollgate::{
    BatchDecision, Clock, Decision, Item, ItemDecision, Key, Receipt, RefundError, RefundNow,
    RuleId, Store, StoreError,
};

/// `inner`, failing while `clock` is within `down` (µs since the epoch), and noting the rules
/// it was asked about meanwhile. Calls only about rules the policy does not have (`absent`: the
/// typed limits it leaves off) never fail: those checks do not exist in the policy.
pub(crate) struct OutageStore<S> {
    inner: S,
    clock: ManualClock,
    down: Range<u64>,
    absent: Vec<RuleId>,
    asked: Arc<Mutex<Vec<RuleId>>>,
}

impl<S: Store> OutageStore<S> {
    pub(crate) fn new(inner: S, clock: ManualClock, down: Range<u64>, absent: Vec<RuleId>) -> Self {
        OutageStore {
            inner,
            clock,
            down,
            absent,
            asked: Arc::default(),
        }
    }

    /// The rules asked about (and failed) since the last call, oldest first.
    pub(crate) fn asked(&self) -> Arc<Mutex<Vec<RuleId>>> {
        self.asked.clone()
    }

    /// The error of a call made now, if the store is down: noting the items' rules.
    fn failure<'i, 'r: 'i>(
        &self,
        items: impl IntoIterator<Item = &'i Item<'r>>,
    ) -> Option<StoreError> {
        if !self.down.contains(&self.clock.now().as_micros()) {
            return None;
        }
        let rules: Vec<RuleId> = items.into_iter().map(|item| item.rule().clone()).collect();
        if !rules.is_empty() && rules.iter().all(|rule| self.absent.contains(rule)) {
            return None;
        }
        if let Ok(mut asked) = self.asked.lock() {
            asked.extend(rules);
        }
        Some(StoreError::unavailable("the simulated store is down"))
    }
}

impl<S: Store> Store for OutageStore<S> {
    fn check(
        &self,
        items: &[Item<'_>],
    ) -> impl Future<Output = Result<BatchDecision, StoreError>> + Send {
        match self.failure(items) {
            Some(error) => Either::Left(ready(Err(error))),
            None => Either::Right(self.inner.check(items)),
        }
    }

    fn check_now(&self, items: &[Item<'_>]) -> Option<Result<BatchDecision, StoreError>> {
        match self.failure(items) {
            Some(error) => Some(Err(error)),
            None => self.inner.check_now(items),
        }
    }

    fn check_one(
        &self,
        item: &Item<'_>,
    ) -> impl Future<Output = Result<ItemDecision, StoreError>> + Send {
        match self.failure([item]) {
            Some(error) => Either::Left(ready(Err(error))),
            None => Either::Right(self.inner.check_one(item)),
        }
    }

    fn peek(&self, item: &Item<'_>) -> impl Future<Output = Result<Decision, StoreError>> + Send {
        match self.failure([item]) {
            Some(error) => Either::Left(ready(Err(error))),
            None => Either::Right(self.inner.peek(item)),
        }
    }

    fn refund(&self, receipt: Receipt) -> impl Future<Output = Result<(), RefundError>> + Send {
        match self.failure([]) {
            Some(error) => Either::Left(ready(Err(RefundError::new(error, receipt)))),
            None => Either::Right(self.inner.refund(receipt)),
        }
    }

    fn refund_now(&self, receipt: Receipt) -> RefundNow {
        match self.failure([]) {
            Some(error) => RefundNow::Done(Err(RefundError::new(error, receipt))),
            None => self.inner.refund_now(receipt),
        }
    }

    fn reset(
        &self,
        rule: &RuleId,
        key: &Key,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        self.inner.reset(rule, key)
    }
}
