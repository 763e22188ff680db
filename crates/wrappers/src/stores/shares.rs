//! One request whose items name several stores: each store's share checked side by side, then
//! all-or-nothing by refunding the shares that were allowed when another was refused or failed.

use std::time::Duration;

use smallvec::SmallVec;

use super::Stores;
use tollgate_core::store_kit::AnswerKit;
use tollgate_core::{
    BatchDecision, Decision, Item, ItemDecision, Receipt, Store, StoreError, Take,
};

/// The items of one request that one store counts, with their positions in the request.
struct Share<'a> {
    route: usize,
    positions: SmallVec<[usize; 4]>,
    items: SmallVec<[Item<'a>; 4]>,
}

/// A charge to take back: the store it is in, the item's position, and its receipt.
struct Charged {
    route: usize,
    position: usize,
    receipt: Receipt,
}

impl<S: Store> Stores<S> {
    /// Checks `items`, which name more than one store (see [`Stores`]' "One request over
    /// several stores").
    pub(super) async fn check_shares(
        &self,
        items: &[Item<'_>],
    ) -> Result<BatchDecision, StoreError> {
        let shares = self.shares(items);
        if let Some(refused) = self.refused_now_in(items, &shares) {
            return Ok(refused);
        }
        let answers = futures_util::future::join_all(
            shares
                .iter()
                .map(|share| self.at(share.route).check(&share.items)),
        )
        .await;
        let refused = answers
            .iter()
            .any(|answer| answer.as_ref().is_ok_and(|answer| !answer.is_allowed()));
        let failed = answers.iter().any(Result::is_err);
        let go_ahead = !refused && !failed;
        let mut merged: SmallVec<[Option<ItemDecision>; 4]> = items.iter().map(|_| None).collect();
        let mut charged: Vec<Charged> = Vec::new();
        let mut failure = None;
        for (share, answer) in shares.iter().zip(answers) {
            match answer {
                Ok(answer) => {
                    let take_back = !go_ahead && answer.is_allowed();
                    let decided = share.positions.iter().zip(&share.items);
                    for ((&position, item), answer) in decided.zip(answer.into_items()) {
                        merged[position] = Some(if take_back {
                            uncharge(share.route, position, item, answer, &mut charged)
                        } else {
                            answer
                        });
                    }
                }
                Err(error) => {
                    for (&position, item) in share.positions.iter().zip(&share.items) {
                        merged[position] = Some(unknown(item));
                    }
                    failure.get_or_insert(error);
                }
            }
        }
        self.take_back(items, charged, &mut merged).await;
        if let (false, Some(error)) = (refused, failure) {
            return Err(error);
        }
        let decisions: Option<SmallVec<[ItemDecision; 3]>> = merged.into_iter().collect();
        let decisions = decisions.ok_or_else(|| {
            StoreError::new(
                tollgate_core::StoreErrorKind::Protocol,
                "a store answered fewer items than it was given",
            )
        })?;
        Ok(BatchDecision::new(go_ahead, decisions))
    }

    /// [`refused_now_in`](Self::refused_now_in) for `items`, which name more than one store.
    pub(super) fn refused_now_shared(&self, items: &[Item<'_>]) -> Option<BatchDecision> {
        self.refused_now_in(items, &self.shares(items))
    }

    /// A refusal one store's share gives at once ([`Store::refused_now`]): the request is
    /// refused without asking any store, nothing charged; the other shares' items are answered
    /// uncharged and counted nowhere (their numbers describe no count).
    fn refused_now_in(&self, items: &[Item<'_>], shares: &[Share<'_>]) -> Option<BatchDecision> {
        let (share, refused) = shares
            .iter()
            .find_map(|share| Some((share, self.at(share.route).refused_now(&share.items)?)))?;
        let mut merged: SmallVec<[Option<ItemDecision>; 4]> = items.iter().map(|_| None).collect();
        for (&position, answer) in share.positions.iter().zip(refused.into_items()) {
            merged[position] = Some(answer);
        }
        let answers = items.iter().zip(merged).map(|(item, answer)| {
            answer.unwrap_or_else(|| {
                let limit = item.quota().limit();
                ItemDecision::uncharged(Decision::allowed(limit, limit, Duration::ZERO))
                    .counted_in_place(tollgate_core::CountedIn::Nowhere)
            })
        });
        Some(BatchDecision::new(false, answers))
    }

    /// The request's items grouped by the store that counts them, in order of first use.
    fn shares<'a>(&self, items: &[Item<'a>]) -> SmallVec<[Share<'a>; 2]> {
        let mut shares: SmallVec<[Share<'a>; 2]> = SmallVec::new();
        for (position, item) in items.iter().enumerate() {
            let route = self.route(item.store_name());
            match shares.iter_mut().find(|share| share.route == route) {
                Some(share) => {
                    share.positions.push(position);
                    share.items.push(*item);
                }
                None => shares.push(Share {
                    route,
                    positions: SmallVec::from_slice(&[position]),
                    items: SmallVec::from_slice(&[*item]),
                }),
            }
        }
        shares
    }

    /// Refunds `charged`, side by side, then reads each refunded item again so it reports its
    /// state as it stands. A refund that fails is logged and its charge stays (over-counting);
    /// a read that fails leaves the item's answer as it was, uncharged.
    async fn take_back(
        &self,
        items: &[Item<'_>],
        charged: Vec<Charged>,
        merged: &mut [Option<ItemDecision>],
    ) {
        if charged.is_empty() {
            return;
        }
        let places: SmallVec<[(usize, usize); 4]> = charged
            .iter()
            .map(|charged| (charged.route, charged.position))
            .collect();
        let refunds = charged
            .into_iter()
            .map(|charged| self.at(charged.route).refund(charged.receipt));
        for refunded in futures_util::future::join_all(refunds).await {
            if let Err(failed) = refunded {
                tracing::warn!(
                    target: "tollgate::store",
                    rule = %failed.into_receipt().rule(),
                    "could not refund a charge of a request another store refused; it stays \
                     counted until it expires"
                );
            }
        }
        let reads = places.iter().filter_map(|&(route, position)| {
            let item = items.get(position)?;
            Some(async move { (position, self.at(route).peek(item).await) })
        });
        for (position, read) in futures_util::future::join_all(reads).await {
            if let (Ok(decision), Some(Some(answer))) = (read, merged.get_mut(position)) {
                let counted_in = answer.counted_in();
                *answer = ItemDecision::uncharged(decision).counted_in_place(counted_in);
            }
        }
    }
}

/// `answer` for `item` of a share that was allowed in a request that will not go ahead:
/// reported uncharged, its receipt kept in `charged` to refund. Debt items keep their charge
/// (debt is outside all-or-nothing on any store), as do items charged without a receipt.
fn uncharge(
    route: usize,
    position: usize,
    item: &Item<'_>,
    answer: ItemDecision,
    charged: &mut Vec<Charged>,
) -> ItemDecision {
    if item.take() == Take::AsDebt || answer.charge().is_none() {
        return answer;
    }
    let (decision, counted_in, owed) = (*answer.decision(), answer.counted_in(), answer.debt());
    if let Some(receipt) = answer.into_receipt(item) {
        charged.push(Charged {
            route,
            position,
            receipt,
        });
    }
    let answer = ItemDecision::uncharged(decision).counted_in_place(counted_in);
    tollgate_core::store_kit::owing(answer, owed)
}

/// The answer for an item whose store failed: nothing known, so no charge and the whole
/// limit (the rules' failure policies decide, not these numbers).
fn unknown(item: &Item<'_>) -> ItemDecision {
    let limit = item.quota().limit();
    ItemDecision::uncharged(Decision::allowed(limit, limit, Duration::ZERO))
}
