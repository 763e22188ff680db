//! The per-item operations of the in-memory store, written once for every state type.

use super::shard::{Shard, StateVisitor, Tabled, visit_state};
use super::stored::Meta;
use crate::algorithm::AlgorithmState;
use crate::{Charge, Decision, Item, Quota, Refusal, Timestamp};

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
/// another quota is rewritten first).
#[inline(always)]
pub(crate) fn evaluate(
    shard: &mut Shard,
    at: Location,
    item: &Item<'_>,
    now: Timestamp,
    not_before: Timestamp,
    context: &impl InsertContext,
) -> (Decision, Option<Charge>) {
    struct Evaluate<'a, 'i, C> {
        shard: &'a mut Shard,
        at: Location,
        item: &'a Item<'i>,
        now: Timestamp,
        not_before: Timestamp,
        context: &'a C,
    }
    impl<C: InsertContext> StateVisitor for Evaluate<'_, '_, C> {
        type Output = (Decision, Option<Charge>);
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
            let table = shard.table_mut::<S>(at.rule);
            let (slot, dropped) = table.slot_for(quota);
            if dropped > 0 {
                shard.note_removed_many(dropped);
                context.record_removed(0, dropped);
            }
            let table = shard.table_mut::<S>(at.rule);
            let check = |state: &mut S::State| state.check(&quota, now, item.cost(), not_before);
            if let Some((stored, written_under)) = table.find_written(at.hash, key) {
                if stored.view(&written_under, |state| state.is_idle(&written_under, now)) {
                    // Idle under the quota it was written under: as good as gone (a Redis key
                    // would have expired), whatever quota reads it now.
                    *stored = S::new(S::State::default(), stored.meta());
                }
                let outcome = stored.update(&written_under, check);
                let refused = marks_refusal(item, &outcome, stored.meta().refused);
                stored.set_meta(Meta { slot, refused });
                return outcome;
            }
            let mut state = S::State::default();
            let outcome = check(&mut state);
            if outcome.1.is_some() {
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
            outcome
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
    outcome: &(Decision, Option<Charge>),
    was: bool,
) -> bool {
    if outcome.1.is_some() {
        return false;
    }
    was || (item.is_enforcing() && outcome.0.refusal() == Some(Refusal::LimitReached))
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
        Algorithm::Gcra,
        Algorithm::FixedWindow,
        Algorithm::SlidingWindowCounter,
        Algorithm::SlidingWindowLog,
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
