//! Hot-key sub-buckets: one logical (rule, key) counted as S sub-keys on different Redis
//! Cluster slots, so one caller's traffic spreads over the cluster's masters.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use parking_lot::RwLock;
use smallvec::SmallVec;

use tollgate_core::store_kit::{AnswerKit, BatchKit, CapabilitiesKit};
use tollgate_core::{
    BatchDecision, Capabilities, Decision, Item, ItemDecision, Key, Quota, Receipt, RefundError,
    RefundNow, RefusalReason, RuleId, Store, StoreError,
};

/// Wraps a store and counts each item that asks for sub-buckets
/// ([`FleetModes::with_sub_buckets`](tollgate_core::FleetModes::with_sub_buckets))
/// as one of S sub-keys instead of one key.
///
/// Sub-bucket `i` of S of a rule's key is counted under the rule id `<id>#<i>.<S>`
/// ([`RuleId::sub_bucket`]). The Redis store puts the rule id inside a key's hash tag and
/// places sub-bucket `i` in part `i` of S equal parts of the 16,384 cluster slots, so on a
/// cluster whose masters hold equal ranges of slots (as `redis-cli --cluster create` makes
/// them) S ≥ masters sub-buckets reach every master. Each
/// holds its part of the quota ([`Quota::part`]): ⌊C/S⌋ or ⌈C/S⌉ of the limit and R/S of a
/// bucket's rate, adding up to the quota (so it needs C ≥ S).
///
/// A request picks a sub-bucket at random; when that one refuses, it tries one other before it
/// is refused (two store calls, all-or-nothing each, so nothing is charged twice). The cost of
/// that spread, stated: a refusal can come while at most (S − 2)·⌈C/S⌉ + 2(c − 1) units are
/// unused elsewhere (c the request's cost: the two buckets tried held fewer than c each, the
/// others at most their part). Never more than C is admitted. A request may cost at most
/// ⌈C/S⌉ (it must fit in one sub-bucket); a larger one is refused as never fitting.
///
/// What a caller is told is the sub-bucket's answer: its remaining units and its wait (the
/// sooner of the two tried, when both refused). [`peek`](Store::peek) adds up every
/// sub-bucket; [`reset`](Store::reset) clears the whole key and every sub-bucket of the rule
/// this store has counted in (`LayerHandle::reset` names each sub-bucket the rule's
/// configuration has, so an operator's reset reaches them from any gateway). Receipts refund
/// the sub-bucket that was charged. A local quota the item fails open within
/// ([`OnStoreFailure::OpenWithin`](tollgate_core::OnStoreFailure::OpenWithin)) is shared out the same
/// way, so an outage admits it once, not once per sub-bucket.
///
/// Only items taken exactly are spread ([`Item::sub_buckets`]); up-to and debt items count on
/// the rule's whole key. **A change of S is a new layout**, as a new rule id is: the
/// sub-buckets of the new S start empty (a change back finds the old ones as they were), so
/// each change can let a key's callers have the limit once more. Change S when the key is
/// quiet, or accept that.
///
/// A [`FleetStore`](crate::FleetStore) applies this to its shared store; items without
/// sub-buckets pass straight through.
///
/// ```
/// use tollgate_core::{FleetModes, Item, Key, MemoryStore, Quota, Rate, RuleId, Store};
/// use tollgate_wrappers::SubBuckets;
///
/// # futures_executor::block_on(async {
/// let store = SubBuckets::new(MemoryStore::new());
/// let (rule, key) = (RuleId::new("trending")?, Key::global());
/// let quota = Quota::token_bucket(100, Rate::per_second(100))?;
/// let item = Item::new(&rule, quota, &key).with_fleet_modes(FleetModes::new().with_sub_buckets(4));
/// let mut admitted = 0;
/// for _ in 0..200 {
///     admitted += u32::from(store.check(&[item]).await?.is_allowed());
/// }
/// // Never above the limit; a few refusals may come while another sub-bucket has units.
/// assert!(admitted <= 100 && admitted >= 100 - 2 * 25, "{admitted}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct SubBuckets<S> {
    inner: S,
    /// Each rule's sub-bucket ids, as last seen (made once: an id is interned under a lock);
    /// a reset clears them all.
    ids: RwLock<HashMap<RuleId, Arc<[RuleId]>>>,
}

impl<S: std::fmt::Debug> std::fmt::Debug for SubBuckets<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubBuckets")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

/// Which sub-bucket each item of one attempt goes to (`None`: the item's own key).
type Picks = SmallVec<[Option<u32>; 4]>;

impl<S: Store> SubBuckets<S> {
    /// Sub-bucket `index` of `item`: its rule id and quota.
    fn part(&self, item: &Item<'_>, index: u32) -> Option<(RuleId, Quota)> {
        let quota = item
            .quota()
            .part(u64::from(index), u64::from(item.sub_buckets()))
            .ok()?;
        Some((self.ids(item).get(index as usize)?.clone(), quota))
    }

    /// Wraps `inner`.
    pub fn new(inner: S) -> Self {
        SubBuckets {
            inner,
            ids: RwLock::new(HashMap::new()),
        }
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// The sub-bucket ids of `item`'s rule, made on first use (and again when the rule's
    /// number of sub-buckets changes).
    fn ids(&self, item: &Item<'_>) -> Arc<[RuleId]> {
        let spread = item.sub_buckets();
        let known = self.ids.read().get(item.rule()).cloned();
        if let Some(ids) = known.filter(|ids| ids.len() == spread as usize) {
            return ids;
        }
        let ids: Arc<[RuleId]> = (0..spread)
            .map(|index| item.rule().sub_bucket(index, spread))
            .collect();
        self.ids
            .write()
            .insert(item.rule().clone(), Arc::clone(&ids));
        ids
    }

    /// Checks `items` with each spread item in the sub-bucket `picks` names.
    async fn attempt(
        &self,
        items: &[Item<'_>],
        picks: &Picks,
    ) -> Result<BatchDecision, StoreError> {
        let parts: SmallVec<[Option<(u32, RuleId, Quota)>; 4]> = items
            .iter()
            .zip(picks)
            .map(|(item, pick)| {
                let index = (*pick)?;
                let (rule, quota) = self.part(item, index)?;
                Some((index, rule, quota))
            })
            .collect();
        let sent: SmallVec<[Item<'_>; 4]> = items
            .iter()
            .zip(&parts)
            .map(|(item, part)| match part {
                Some((index, rule, quota)) => in_part(item, *index, rule, *quota),
                None => *item,
            })
            .collect();
        let answer = self.inner.check(&sent).await?;
        drop(sent);
        let allowed = answer.is_allowed();
        let answers = answer
            .into_items()
            .zip(parts)
            .map(|(answer, part)| match part {
                Some((_, rule, quota)) => answer.counted_as(rule, quota),
                None => answer,
            })
            .collect();
        Ok(BatchDecision::from_decisions(allowed, answers))
    }
}

/// `item`, counted under sub-bucket `index`'s rule id and quota; a local quota it fails open
/// within is shared out the same way, so an outage admits the local quota once, not per
/// sub-bucket.
fn in_part<'a>(item: &Item<'a>, index: u32, rule: &'a RuleId, quota: Quota) -> Item<'a> {
    let policy = match item.on_store_failure() {
        tollgate_core::OnStoreFailure::OpenWithin(local) => {
            tollgate_core::OnStoreFailure::OpenWithin(
                local
                    .part(u64::from(index), u64::from(item.sub_buckets()))
                    .unwrap_or(local),
            )
        }
        policy @ (tollgate_core::OnStoreFailure::Open
        | tollgate_core::OnStoreFailure::Local
        | tollgate_core::OnStoreFailure::Closed) => policy,
    };
    Item::new(rule, quota, item.key())
        .with_cost(item.cost())
        .with_mode(item.mode())
        .with_store_failure(policy)
        .with_fleet_modes(
            tollgate_core::FleetModes::new()
                .with_store(item.store_name())
                .with_replica_ack(item.fleet_modes().replica_ack()),
        )
}

/// How many of `item`'s sub-buckets its cost fits in: the first ones, which hold ⌈C/S⌉ when
/// S does not divide C (0: none).
fn fitting(item: &Item<'_>) -> u32 {
    let (limit, spread) = (item.quota().limit(), u64::from(item.sub_buckets()));
    let (floor, larger) = (limit / spread, limit % spread);
    if item.cost() <= floor {
        item.sub_buckets()
    } else if item.cost() <= floor + 1 {
        u32::try_from(larger).unwrap_or(u32::MAX)
    } else {
        0
    }
}

/// A random sub-bucket among the first `fitting`, other than `not` when there is another.
fn pick(fitting: u32, not: Option<u32>) -> Option<u32> {
    match not {
        None => Some(fastrand::u32(0..fitting)),
        Some(_) if fitting < 2 => None,
        Some(tried) => Some((tried + 1 + fastrand::u32(0..fitting - 1)) % fitting),
    }
}

/// The refusal of an item whose cost fits in no sub-bucket: its limit is the largest
/// sub-bucket's, ⌈C/S⌉, which the cost exceeds.
fn never_fits(item: &Item<'_>) -> ItemDecision {
    ItemDecision::uncharged(Decision::refused(
        RefusalReason::CostExceedsLimit,
        item.quota().limit().div_ceil(u64::from(item.sub_buckets())),
        0,
        std::time::Duration::ZERO,
        std::time::Duration::ZERO,
    ))
}

/// `second`'s answer, with each item refused in both attempts told the sooner of its two waits.
fn sooner(first: BatchDecision, second: BatchDecision) -> BatchDecision {
    let allowed = second.is_allowed();
    let answers = first
        .into_items()
        .zip(second.into_items())
        .map(|(first, second)| {
            let both_refused = !first.decision().is_allowed() && !second.decision().is_allowed();
            if both_refused && first.decision().retry_after() < second.decision().retry_after() {
                first
            } else {
                second
            }
        })
        .collect();
    BatchDecision::from_decisions(allowed, answers)
}

impl<S: Store> Store for SubBuckets<S> {
    async fn check(&self, items: &[Item<'_>]) -> Result<BatchDecision, StoreError> {
        if items.iter().all(|item| item.sub_buckets() < 2) {
            return self.inner.check(items).await;
        }
        let fits: SmallVec<[u32; 4]> = items.iter().map(fitting).collect();
        if let Some(position) = items
            .iter()
            .zip(&fits)
            .position(|(item, fits)| item.sub_buckets() > 1 && *fits == 0)
        {
            // A cost larger than any sub-bucket: refused without a store call.
            let answers = items.iter().enumerate().map(|(at, item)| {
                if at == position {
                    never_fits(item)
                } else {
                    ItemDecision::uncharged(Decision::allowed(
                        item.quota().limit(),
                        0,
                        Default::default(),
                    ))
                }
            });
            return Ok(BatchDecision::new(false, answers));
        }
        let first: Picks = items
            .iter()
            .zip(&fits)
            .map(|(item, fits)| {
                (item.sub_buckets() > 1)
                    .then(|| pick(*fits, None))
                    .flatten()
            })
            .collect();
        let answer = self.attempt(items, &first).await?;
        if answer.is_allowed() {
            return Ok(answer);
        }
        let mut again = first.clone();
        let mut retried = false;
        for ((pick_now, fits), item) in again.iter_mut().zip(&fits).zip(answer.items()) {
            if let Some(tried) = *pick_now
                && !item.decision().is_allowed()
                && let Some(other) = pick(*fits, Some(tried))
            {
                *pick_now = Some(other);
                retried = true;
            }
        }
        if !retried {
            return Ok(answer);
        }
        match self.attempt(items, &again).await {
            Ok(second) if second.is_allowed() => Ok(second),
            Ok(second) => Ok(sooner(answer, second)),
            // The first answer stands: the store refused, and nothing is charged.
            Err(_) => Ok(answer),
        }
    }

    fn check_now(&self, items: &[Item<'_>]) -> Option<Result<BatchDecision, StoreError>> {
        if items.iter().all(|item| item.sub_buckets() < 2) {
            return self.inner.check_now(items);
        }
        None
    }

    /// Every sub-bucket added up: the units left in all of them, allowed when any has room for
    /// the item's cost (then waiting for the soonest).
    async fn peek(&self, item: &Item<'_>) -> Result<Decision, StoreError> {
        let spread = item.sub_buckets();
        if spread < 2 {
            return self.inner.peek(item).await;
        }
        if fitting(item) == 0 {
            return Ok(*never_fits(item).decision());
        }
        let (mut remaining, mut allowed, mut reset_after) =
            (0_u64, false, std::time::Duration::ZERO);
        let mut retry_after = std::time::Duration::MAX;
        for index in 0..spread {
            let Some((rule, quota)) = self.part(item, index) else {
                continue;
            };
            let decision = self.inner.peek(&in_part(item, index, &rule, quota)).await?;
            remaining = remaining.saturating_add(decision.remaining());
            allowed |= decision.is_allowed();
            reset_after = reset_after.max(decision.reset_after());
            retry_after = retry_after.min(decision.retry_after());
        }
        let limit = item.quota().limit();
        Ok(if allowed {
            Decision::allowed(limit, remaining, reset_after)
        } else {
            Decision::refused(
                RefusalReason::LimitReached,
                limit,
                remaining,
                retry_after,
                reset_after,
            )
        })
    }

    fn refund(&self, receipt: Receipt) -> impl Future<Output = Result<(), RefundError>> + Send {
        self.inner.refund(receipt)
    }

    fn refund_now(&self, receipt: Receipt) -> RefundNow {
        self.inner.refund_now(receipt)
    }

    fn renew(&self, receipt: &Receipt) -> impl Future<Output = Result<(), StoreError>> + Send {
        self.inner.renew(receipt)
    }

    /// The inner store's, with sub-buckets in every store under it (a sub-bucket's item
    /// names the store its item named).
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities().with_sub_buckets()
    }

    fn refused_now(&self, items: &[Item<'_>]) -> Option<BatchDecision> {
        self.inner.refused_now(items)
    }

    /// The wrapped store's node for an item counted on its own key; `None` for an item spread
    /// over sub-buckets, which live on several nodes (a `FallbackStore` around this store then
    /// gives it the breaker of the whole primary, never another node's).
    fn node_of(&self, item: &Item<'_>) -> Option<std::sync::Arc<str>> {
        if item.sub_buckets() > 1 {
            return None;
        }
        self.inner.node_of(item)
    }

    async fn reset(&self, rule: &RuleId, key: &Key) -> Result<(), StoreError> {
        let ids = self.ids.read().get(rule).cloned();
        for id in ids.iter().flat_map(|ids| ids.iter()) {
            self.inner.reset(id, key).await?;
        }
        self.inner.reset(rule, key).await
    }
}
