//! A store that is down for a stretch of simulated time: the one stand-in of the simulator (a
//! real Redis cannot fail on a manual clock). Outside the outage every call goes to the real
//! in-memory store; inside it every call fails as an unreachable Redis would, and the layer
//! answers with each rule's failure policy.

use std::future::{Future, ready};
use std::ops::Range;
use std::sync::{Arc, Mutex};

use futures_util::future::Either;
use tollgate::core::DerivedSuffix;
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

    /// The error of a call about `items` made now, if the store is down: noting their rules.
    fn failure<'i, 'r: 'i>(
        &self,
        items: impl IntoIterator<Item = &'i Item<'r>>,
    ) -> Option<StoreError> {
        if !self.is_down() {
            // The common case, without collecting anything.
            return None;
        }
        let rules: Vec<RuleId> = items.into_iter().map(|item| item.rule().clone()).collect();
        let error = self.fails(&rules)?;
        if let Ok(mut asked) = self.asked.lock() {
            asked.extend(rules.iter().map(base_rule));
        }
        Some(error)
    }

    /// The error of refunding `receipt` now, if the store is down.
    fn refund_failure(&self, receipt: &Receipt) -> Option<StoreError> {
        self.fails(std::slice::from_ref(receipt.rule()))
    }

    fn is_down(&self) -> bool {
        self.down.contains(&self.clock.now().as_micros())
    }

    /// Whether a call about `rules` fails now: while the store is down, unless every rule is
    /// one the policy does not have.
    fn fails(&self, rules: &[RuleId]) -> Option<StoreError> {
        let absent = !rules.is_empty() && rules.iter().all(|rule| self.absent.contains(rule));
        (self.is_down() && !absent).then(|| StoreError::unavailable("the simulated store is down"))
    }
}

/// The rule an id belongs to: an escalating rule's `<id>.strikes` and `<id>.block` are its own.
fn base_rule(id: &RuleId) -> RuleId {
    [DerivedSuffix::Strikes, DerivedSuffix::Block]
        .iter()
        .find_map(|suffix| id.as_str().strip_suffix(suffix.as_str()))
        .and_then(|base| RuleId::new(base).ok())
        .unwrap_or_else(|| id.clone())
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
        match self.refund_failure(&receipt) {
            Some(error) => Either::Left(ready(Err(RefundError::new(error, receipt)))),
            None => Either::Right(self.inner.refund(receipt)),
        }
    }

    fn refund_now(&self, receipt: Receipt) -> RefundNow {
        match self.refund_failure(&receipt) {
            Some(error) => RefundNow::Done(Err(RefundError::new(error, receipt))),
            None => self.inner.refund_now(receipt),
        }
    }

    fn renew(&self, receipt: &Receipt) -> impl Future<Output = Result<(), StoreError>> + Send {
        self.inner.renew(receipt)
    }

    fn reset(
        &self,
        rule: &RuleId,
        key: &Key,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        self.inner.reset(rule, key)
    }

    fn capabilities(&self) -> tollgate::Capabilities {
        self.inner.capabilities()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures_util::FutureExt;
    use tollgate::{MemoryStore, Quota, Timestamp};

    use super::*;

    #[test]
    fn while_down_it_fails_the_policys_rules_but_never_a_rule_the_policy_does_not_have() {
        let clock = ManualClock::new(Timestamp::from_secs(100));
        let memory = MemoryStore::builder().clock(clock.clone()).build();
        let (present, absent) = (
            RuleId::new("present").expect("an id"),
            RuleId::new("absent").expect("an id"),
        );
        let store = OutageStore::new(
            memory,
            clock.clone(),
            100_000_000..200_000_000,
            vec![absent.clone()],
        );
        let quota = Quota::fixed_window(10, Duration::from_secs(60)).expect("a quota");
        let key = Key::new("k");
        let (kept, off) = (
            Item::new(&present, quota, &key),
            Item::new(&absent, quota, &key),
        );

        let checked = store.check(&[off]).now_or_never().expect("ready");
        let receipt = checked
            .expect("a rule the policy does not have never fails")
            .into_receipts(&[off])
            .pop()
            .expect("charged");
        let failed = store.check(&[kept]).now_or_never().expect("ready");
        assert!(
            failed.is_err(),
            "the policy's rule fails while the store is down"
        );
        assert_eq!(
            store.asked().lock().expect("lock").as_slice(),
            std::slice::from_ref(&present)
        );
        assert!(
            store.refund(receipt).now_or_never().expect("ready").is_ok(),
            "its refund does not fail either"
        );

        clock.set(Timestamp::from_secs(200));
        assert!(
            store.check(&[kept]).now_or_never().expect("ready").is_ok(),
            "up again"
        );
    }
}
