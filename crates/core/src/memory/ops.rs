//! The per-item operations of the in-memory store, written once for every state type.

use super::shard::{Shard, StateVisitor, StoredState, visit_state};
use crate::{Charge, Decision, Item, Quota, Timestamp};

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

/// Evaluates `item` and, when `charge` is true and it is allowed, charges it.
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
        fn visit<S: StoredState>(self) -> Self::Output {
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
            table.quota = Some(quota);
            if let Some(state) = table.find_mut(at.hash, key) {
                return state.check(&quota, now, item.cost(), not_before);
            }
            let mut state = S::default();
            let outcome = state.check(&quota, now, item.cost(), not_before);
            if outcome.1.is_some() {
                let removed = shard.before_insert(context.capacity_per_shard(), now);
                context.record_removed(removed.lossless, removed.lossy);
                let rule = at.rule;
                shard
                    .table_mut::<S>(rule)
                    .insert(at.hash, key, state, |key| context.rehash(rule, key));
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
        fn visit<S: StoredState>(self) -> Decision {
            let quota = self.item.quota();
            let found = self
                .shard
                .table::<S>(self.at.rule)
                .and_then(|table| table.find(self.at.hash, self.item.key().as_bytes()));
            match found {
                Some(state) => state.peek(quota, self.now, self.cost),
                None => S::default().peek(quota, self.now, self.cost),
            }
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
        fn visit<S: StoredState>(self) -> Timestamp {
            self.shard
                .table::<S>(self.at.rule)
                .and_then(|table| table.find(self.at.hash, self.item.key().as_bytes()))
                .map_or(self.now, |state| {
                    state.earliest_start(self.item.quota(), self.now)
                })
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

/// Undoes `charge` on the state at `at` under `quota`; drops the state if that leaves it idle.
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
        fn visit<S: StoredState>(self) {
            let table = self.shard.table_mut::<S>(self.at.rule);
            let Some(state) = table.find_mut(self.at.hash, self.key) else {
                return;
            };
            state.refund(self.quota, self.charge);
            if state.is_idle(self.quota, self.now) && table.remove(self.at.hash, self.key) {
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
        fn visit<S: StoredState>(self) {
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
