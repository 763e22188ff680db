//! A request whose items live in several cluster slots: one script execution per slot, side by
//! side, then all-or-nothing by compensation.
//!
//! * If every slot allows, the request goes ahead.
//! * If any slot refuses, the request is refused — even when another slot failed, since the
//!   refusal decides an all-or-nothing request — and the slots that answered "charged" are
//!   refunded by receipt. A slot whose answer was lost is never refunded: its script may or
//!   may not have run (its items are reported uncharged, with the whole limit).
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
        let answers = futures_util::future::join_all(
            groups
                .iter()
                .map(|positions| self.check_group(&planned, positions, timing)),
        )
        .await;
        let refused = answers
            .iter()
            .any(|answer| answer.as_ref().is_ok_and(|answer| !answer.allowed));
        let failed = answers.iter().any(Result::is_err);
        let go_ahead = !refused && !failed;
        let mut merged: SmallVec<[Option<ItemDecision>; 3]> =
            SmallVec::from_elem(None, planned.len());
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
                        merged[at] = Some(ItemDecision::new(unknown, None));
                    }
                    failure.get_or_insert(error);
                }
            }
        }
        if let (false, Some(error)) = (refused, failure) {
            return Err(error);
        }
        let decisions = merged.into_iter().map(|item| {
            item.ok_or_else(|| {
                StoreError::new(StoreErrorKind::Protocol, "a slot group answered no item")
            })
        });
        let decisions: Result<SmallVec<[ItemDecision; 3]>, StoreError> = decisions.collect();
        Ok(BatchDecision::new(go_ahead, decisions?))
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
        if charged.iter().all(|(_, charge)| charge.is_none()) {
            // Nothing charged: every item already reports the state as it stands.
            return;
        }
        for item in &mut answer.items {
            *item = ItemDecision::new(*item.decision(), None);
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
