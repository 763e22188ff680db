//! A request whose items live in several cluster slots: one script execution per slot, side by
//! side, then all-or-nothing by compensation.
//!
//! * Each slot checks its enforcing items (`enforce`: shadow items only report, since whether
//!   the request goes ahead is not known yet).
//! * If every slot allows, the request goes ahead, and the slots holding shadow items check
//!   them (one more round trip, only for such requests): shadow items are evaluated after every
//!   enforcing item, as in a single execution.
//! * If any slot refuses, the request is refused — even when another slot failed, since the
//!   refusal decides an all-or-nothing request — and the slots that answered "charged" take
//!   those charges back (a compensation, not a receipt: no refund marker, applied once, as
//!   sent). A slot whose answer was lost is never refunded: its script may or may not have run
//!   (its items are reported uncharged, with the whole limit).
//! * If no slot refuses but one failed, the error is returned (after refunding the slots that
//!   charged), for the rule's failure policy to decide.
//!
//! The whole exchange runs in a task of its own (see `RedisStore::check`), so a caller that
//! stops waiting does not leave charges of a refused request behind.

use std::time::Duration;

use smallvec::SmallVec;
use tollgate_core::{BatchDecision, Decision, ItemDecision, StoreError, StoreErrorKind};

use crate::RedisStore;
use crate::script::{Answer, Operation, Timing};
use crate::split::SlotGroups;
use crate::store::Planned;

impl RedisStore {
    /// Checks a batch split over several slots; `groups` holds each slot's item positions.
    pub(crate) async fn check_split(
        self,
        planned: Vec<Planned>,
        groups: SlotGroups,
        timing: Timing,
    ) -> Result<BatchDecision, StoreError> {
        let timing = self.align_pacing(&planned, &groups, timing).await?;
        let answers =
            futures_util::future::join_all(groups.iter().map(|positions| {
                self.check_group(Operation::Enforce, &planned, positions, timing)
            }))
            .await;
        let refused = answers
            .iter()
            .any(|answer| answer.as_ref().is_ok_and(|answer| !answer.allowed));
        let failed = answers.iter().any(Result::is_err);
        let go_ahead = !refused && !failed;
        let mut merged: SmallVec<[Option<ItemDecision>; 3]> =
            planned.iter().map(|_| None).collect();
        let mut failure = None;
        for (positions, answer) in groups.iter().zip(answers) {
            match answer {
                Ok(mut answer) => {
                    if !go_ahead && answer.allowed {
                        self.take_back(&planned, positions, &mut answer, timing)
                            .await;
                    }
                    for (&at, item) in positions.iter().zip(answer.items) {
                        merged[at] = Some(item);
                    }
                }
                Err(error) => {
                    for &at in positions {
                        let limit = planned[at].quota.limit();
                        let unknown = Decision::allowed(limit, limit, Duration::ZERO);
                        merged[at] = Some(ItemDecision::uncharged(unknown));
                    }
                    failure.get_or_insert(error);
                }
            }
        }
        if let (false, Some(error)) = (refused, failure) {
            return Err(error);
        }
        if go_ahead {
            self.check_shadows(&planned, &groups, timing, &mut merged)
                .await;
        }
        let decisions = merged.into_iter().map(|item| {
            item.ok_or_else(|| {
                StoreError::new(StoreErrorKind::Protocol, "a slot group answered no item")
            })
        });
        let decisions: Result<SmallVec<[ItemDecision; 3]>, StoreError> = decisions.collect();
        Ok(BatchDecision::new(go_ahead, decisions?))
    }

    /// Checks (and charges) the shadow items of a request that goes ahead, one execution per
    /// slot holding any, side by side. A slot that fails leaves its shadow items reported as
    /// they were (uncharged): the request goes ahead whatever shadow items say.
    async fn check_shadows(
        &self,
        planned: &[Planned],
        groups: &SlotGroups,
        timing: Timing,
        merged: &mut [Option<ItemDecision>],
    ) {
        let shadows: SmallVec<[SmallVec<[usize; 3]>; 2]> = groups
            .iter()
            .map(|positions| {
                positions
                    .iter()
                    .copied()
                    .filter(|&at| !planned[at].enforcing)
                    .collect::<SmallVec<[usize; 3]>>()
            })
            .filter(|positions| !positions.is_empty())
            .collect();
        let answers = futures_util::future::join_all(
            shadows
                .iter()
                .map(|positions| self.check_group(Operation::Check, planned, positions, timing)),
        )
        .await;
        for (positions, answer) in shadows.iter().zip(answers) {
            match answer {
                Ok(answer) => {
                    for (&at, item) in positions.iter().zip(answer.items) {
                        merged[at] = Some(item);
                    }
                }
                Err(error) => tracing::warn!(
                    target: "tollgate::store",
                    %error,
                    "could not check the shadow items of a slot of a cross-slot request"
                ),
            }
        }
    }

    /// Refunds what a slot group charged for a request that will not go ahead, and reports
    /// its items as they then stand (as a single script reports a refused batch), in one
    /// execution.
    async fn take_back(
        &self,
        planned: &[Planned],
        positions: &[usize],
        answer: &mut Answer,
        timing: Timing,
    ) {
        let charged: SmallVec<[_; 3]> = positions
            .iter()
            .zip(&answer.items)
            .map(|(&at, item)| (at, item.charge().copied()))
            .collect();
        let shares_a_key = positions.iter().enumerate().any(|(n, &at)| {
            positions[..n]
                .iter()
                .any(|&earlier| planned[earlier].key == planned[at].key)
        });
        if charged.iter().all(|(_, charge)| charge.is_none()) && !shares_a_key {
            // Nothing charged, and no item's state was read again after it answered: every item
            // already reports its state as it stands.
            return;
        }
        for item in &mut answer.items {
            *item = ItemDecision::uncharged(*item.decision());
        }
        match self.refund_group(planned, &charged, timing).await {
            Ok(after) => answer.items = after.items,
            Err(error) => tracing::warn!(
                target: "tollgate::store",
                %error,
                "could not refund a slot group of a refused cross-slot request"
            ),
        }
    }

    /// Pacing items in several slots must start together: read each slot's earliest start
    /// first (one more round trip, only for such requests) and pass the latest to every slot.
    /// A concurrent request may move a slot in between; its item then starts later, and the
    /// request still waits for the longest delay. (Each slot's start is on its own master's
    /// clock; masters' clocks are assumed to agree to well within a pacing rule's delay.)
    async fn align_pacing(
        &self,
        planned: &[Planned],
        groups: &SlotGroups,
        timing: Timing,
    ) -> Result<Timing, StoreError> {
        let pacing: SmallVec<[&SmallVec<[usize; 3]>; 2]> = groups
            .iter()
            .filter(|positions| positions.iter().any(|&at| planned[at].paces()))
            .collect();
        if pacing.len() < 2 {
            return Ok(timing);
        }
        let starts = futures_util::future::join_all(
            pacing
                .iter()
                .map(|positions| self.execute_items(Operation::Start, planned, positions, timing)),
        )
        .await;
        let mut latest = 0;
        for start in starts {
            let start = start?
                .first()
                .and_then(|start| u64::try_from(*start).ok())
                .ok_or_else(|| StoreError::new(StoreErrorKind::Protocol, "no pacing start"))?;
            latest = latest.max(start);
        }
        Ok(Timing {
            not_before: latest,
            ..timing
        })
    }
}
