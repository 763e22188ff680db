//! The per-item operations of the in-memory store, written once for every state type.

use super::shard::{Shard, StateVisitor, Tabled, visit_state};
use super::stored::Meta;
use crate::algorithm::AlgorithmState;
use crate::algorithm::taking::{self, Taken};
use crate::{Charge, Decision, Item, Quota, RefusalReason, Take, Timestamp};

/// Where an item's state lives.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Location {
    pub(crate) shard: usize,
    pub(crate) rule: u32,
    pub(crate) hash: u64,
}

/// What inserting a new key may need: room, and the hash to move keys when the table grows.
pub(crate) trait InsertContext {
    fn capacity_per_shard(&self) -> usize;
    fn rehash(&self, rule: u32, key: &[u8]) -> u64;
    fn record_removed(&self, lossless: usize, lossy: usize);
}

/// Evaluates `item` and charges it if allowed, in its own quota's terms (a state written under
/// another quota is rewritten first); an up-to or debt item reads and settles its caller's debt
/// (see [`Take`]). Answers the decision, the charge, and the units owed after it.
#[inline(always)]
pub(crate) fn evaluate(
    shard: &mut Shard,
    at: Location,
    item: &Item<'_>,
    now: Timestamp,
    not_before: Timestamp,
    context: &impl InsertContext,
) -> Taken {
    struct Evaluate<'a, 'i, C> {
        shard: &'a mut Shard,
        at: Location,
        item: &'a Item<'i>,
        now: Timestamp,
        not_before: Timestamp,
        context: &'a C,
    }
    impl<C: InsertContext> StateVisitor for Evaluate<'_, '_, C> {
        type Output = Taken;
        #[inline(always)]
        fn visit<S: Tabled>(self) -> Self::Output {
            let Evaluate {
                shard,
                at,
                item,
                now,
                not_before,
                context,
            } = self;
            let key = item.key().as_bytes();
            let quota = *item.quota();
            let take = item.take();
            let owed = match take {
                Take::Exact => 0,
                _ => shard.ledger.owed(at.rule, key, now),
            };
            let table = shard.table_mut::<S>(at.rule);
            let (slot, dropped) = table.slot_for(quota);
            if dropped > 0 {
                shard.note_removed_many(dropped);
                context.record_removed(0, dropped);
            }
            let table = shard.table_mut::<S>(at.rule);
            let check = |state: &mut S::State| -> (Taken, Timestamp) {
                if take == Take::Exact {
                    let (decision, charge) = state.check(&quota, now, item.cost(), not_before);
                    return ((decision, charge, 0), Timestamp::EPOCH);
                }
                let taken = taking::take(state, &quota, now, take, item.cost(), owed);
                let lapses_at = taking::debt_lapses_at(state, &quota, now, taken.2);
                (taken, lapses_at)
            };
            let settle_debt = |shard: &mut Shard, (taken, lapses_at): (Taken, Timestamp)| {
                if take != Take::Exact && (owed > 0 || taken.2 > 0) {
                    let capacity = context.capacity_per_shard();
                    shard
                        .ledger
                        .set(at.rule, key, taken.2, lapses_at, now, capacity);
                }
                taken
            };
            if let Some((stored, written_under)) = table.find_written(at.hash, key) {
                if stored.view(&written_under, |state| state.is_idle(&written_under, now)) {
                    // Idle under the quota it was written under: as good as gone (a Redis key
                    // would have expired), whatever quota reads it now.
                    *stored = S::new(S::State::default(), stored.meta());
                }
                let outcome = stored.update(&written_under, check);
                let (decision, charge, _) = &outcome.0;
                let refused = marks_refusal(item, decision, charge, stored.meta().refused);
                stored.set_meta(Meta { slot, refused });
                return settle_debt(shard, outcome);
            }
            let mut state = S::State::default();
            let outcome = check(&mut state);
            // An up-to or debt item may change the state without a charge of its own (paying a
            // debt, or the part of a debt that fit).
            let changed =
                outcome.0.1.is_some() || (take != Take::Exact && !state.is_idle(&quota, now));
            if changed {
                let removed = shard.before_insert(context.capacity_per_shard(), now);
                context.record_removed(removed.lossless, removed.lossy);
                let rule = at.rule;
                let stored = S::new(
                    state,
                    Meta {
                        slot,
                        refused: false,
                    },
                );
                shard
                    .table_mut::<S>(rule)
                    .insert(at.hash, key, stored, |key| context.rehash(rule, key));
                shard.note_added();
            }
            settle_debt(shard, outcome)
        }
    }
    visit_state(
        item.quota().algorithm(),
        Evaluate {
            shard,
            at,
            item,
            now,
            not_before,
            context,
        },
    )
}

/// The refused mark after `outcome`: set by an enforcing refusal for the limit, cleared by a
/// charge, otherwise unchanged.
pub(crate) fn marks_refusal(
    item: &Item<'_>,
    decision: &Decision,
    charge: &Option<Charge>,
    was: bool,
) -> bool {
    if charge.is_some() {
        return false;
    }
    was || (item.is_enforcing() && decision.refusal() == Some(RefusalReason::LimitReached))
}

/// Would `cost` of `item` pass? Charges nothing.
pub(crate) fn peek(
    shard: &Shard,
    at: Location,
    item: &Item<'_>,
    cost: u64,
    now: Timestamp,
) -> Decision {
    struct Peek<'a, 'i> {
        shard: &'a Shard,
        at: Location,
        item: &'a Item<'i>,
        cost: u64,
        now: Timestamp,
    }
    impl StateVisitor for Peek<'_, '_> {
        type Output = Decision;
        fn visit<S: Tabled>(self) -> Decision {
            let quota = self.item.quota();
            let found = self.shard.table::<S>(self.at.rule).and_then(|table| {
                let stored = table.find(self.at.hash, self.item.key().as_bytes())?;
                let written_under = table.quota_of(stored)?;
                stored.view(&written_under, |state| {
                    let live = !state.is_idle(&written_under, self.now);
                    live.then(|| state.peek(quota, self.now, self.cost))
                })
            });
            found.unwrap_or_else(|| S::State::default().peek(quota, self.now, self.cost))
        }
    }
    visit_state(
        item.quota().algorithm(),
        Peek {
            shard,
            at,
            item,
            cost,
            now,
        },
    )
}

/// The earliest a pacing item could start.
pub(crate) fn earliest_start(
    shard: &Shard,
    at: Location,
    item: &Item<'_>,
    now: Timestamp,
) -> Timestamp {
    struct Earliest<'a, 'i> {
        shard: &'a Shard,
        at: Location,
        item: &'a Item<'i>,
        now: Timestamp,
    }
    impl StateVisitor for Earliest<'_, '_> {
        type Output = Timestamp;
        fn visit<S: Tabled>(self) -> Timestamp {
            let quota = self.item.quota();
            self.shard
                .table::<S>(self.at.rule)
                .and_then(|table| {
                    let stored = table.find(self.at.hash, self.item.key().as_bytes())?;
                    let written_under = table.quota_of(stored)?;
                    stored.view(&written_under, |state| {
                        let live = !state.is_idle(&written_under, self.now);
                        live.then(|| state.earliest_start(quota, self.now))
                    })
                })
                .unwrap_or(self.now)
        }
    }
    visit_state(
        item.quota().algorithm(),
        Earliest {
            shard,
            at,
            item,
            now,
        },
    )
}

/// Undoes what is left of `charge` (made under `quota`) on the state at `at`; drops the state if
/// that leaves it idle.
pub(crate) fn refund(
    shard: &mut Shard,
    at: Location,
    key: &[u8],
    quota: &Quota,
    charge: &Charge,
    now: Timestamp,
) {
    struct Refund<'a> {
        shard: &'a mut Shard,
        at: Location,
        key: &'a [u8],
        quota: &'a Quota,
        charge: &'a Charge,
        now: Timestamp,
    }
    impl StateVisitor for Refund<'_> {
        type Output = ();
        fn visit<S: Tabled>(self) {
            let table = self.shard.table_mut::<S>(self.at.rule);
            let Some((stored, written_under)) = table.find_written(self.at.hash, self.key) else {
                return;
            };
            let idle = stored.update(&written_under, |state| {
                state.refund(self.quota, self.charge, self.now);
                state.is_idle(&written_under, self.now)
            });
            if idle && table.remove(self.at.hash, self.key) {
                self.shard.note_removed();
            }
        }
    }
    visit_state(
        quota.algorithm(),
        Refund {
            shard,
            at,
            key,
            quota,
            charge,
            now,
        },
    );
}

/// Forgets the key's state of every algorithm for the rule.
pub(crate) fn reset(shard: &mut Shard, at: Location, key: &[u8]) {
    use crate::Algorithm;
    shard.ledger.forget(at.rule, key);
    struct Reset<'a> {
        shard: &'a mut Shard,
        at: Location,
        key: &'a [u8],
    }
    impl StateVisitor for Reset<'_> {
        type Output = ();
        fn visit<S: Tabled>(self) {
            if self
                .shard
                .table_mut::<S>(self.at.rule)
                .remove(self.at.hash, self.key)
            {
                self.shard.note_removed();
            }
        }
    }
    for algorithm in [
        Algorithm::TokenBucket,
        Algorithm::FixedWindow,
        Algorithm::SlidingWindowCounter,
        Algorithm::SlidingWindowLog,
        Algorithm::Concurrency,
    ] {
        visit_state(
            algorithm,
            Reset {
                shard: &mut *shard,
                at,
                key,
            },
        );
    }
}
